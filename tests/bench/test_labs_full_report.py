"""``benchmarks/labs_full.py`` keeps its report: re-running one lab updates that lab only.

A lab takes from a minute (Lab 1) to most of an hour (Lab 2 on two CPU cores) in full
mode, so a teaching assistant re-runs the lab they changed. These tests run no notebook:
``run_lab`` is replaced by one that returns a small executed notebook.
"""

import importlib.util
import os
import pathlib
import sys
from unittest import mock

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def labs_full():
    # The script puts benchmarks/ on sys.path and sets a default data folder: keep both
    # from leaking into the rest of the test session.
    with mock.patch.dict(os.environ), mock.patch.object(sys, "path", [str(BENCHMARKS)] + sys.path):
        spec = importlib.util.spec_from_file_location(
            "labs_full_under_test", BENCHMARKS / "labs_full.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def executed_notebook(printed: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("## 1. A section"),
        nbformat.v4.new_code_cell(
            "print('x')", outputs=[nbformat.v4.new_output("stream", name="stdout", text=printed)]
        ),
    ]
    return nb


def fake_run_lab(printed_by_lab: dict, minutes=2.5, meanwhile=None):
    """A ``run_lab`` that prints ``printed_by_lab[lab]``; ``meanwhile()`` runs while the lab "runs"."""

    def run_lab(name, fast, keep, timeout, budget=None):
        if meanwhile:
            meanwhile()
        return executed_notebook(printed_by_lab[name]), minutes, None

    return run_lab


@pytest.fixture
def first_report(labs_full, tmp_path, monkeypatch):
    """A report of every lab, each section printing "first run"."""
    report = tmp_path / "labs_full.md"
    monkeypatch.setattr(
        labs_full, "run_lab", fake_run_lab(dict.fromkeys(labs_full.LABS, "first run"))
    )
    assert labs_full.main(["--output", str(report)]) == 0
    return report


def test_the_committed_report_has_every_lab_in_full_mode(labs_full):
    rows, _, sections = labs_full.parse_report(
        (BENCHMARKS / "results" / "labs_full.md").read_text()
    )
    assert sorted(rows) == sorted(labs_full.LABS) == sorted(sections)
    for name, row in rows.items():
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1] == "full", row
        assert sections[name].startswith(f"## {name}: {cells[2]} min, full mode"), (
            row,
            sections[name][:80],
        )


def test_one_lab_rerun_replaces_its_row_and_section_only(labs_full, first_report, monkeypatch):
    report = first_report
    first = report.read_text()
    notes = "Notes by hand: lab 3 ran on a busy machine."
    report.write_text(
        first.replace("\n\n## lab1_attention", f"\n\n{notes}\n\n## lab1_attention", 1)
    )

    monkeypatch.setattr(
        labs_full, "run_lab", fake_run_lab({"lab3_gcn_molecules": "second run"}, minutes=7.25)
    )
    assert labs_full.main(["--labs", "lab3_gcn_molecules", "--output", str(report)]) == 0
    rows, kept_notes, sections = labs_full.parse_report(report.read_text())
    _, _, first_sections = labs_full.parse_report(first)

    assert list(rows) == list(sections) == list(labs_full.LABS)  # course order kept
    assert kept_notes == notes
    assert (
        "second run" in sections["lab3_gcn_molecules"]
        and "first run" not in sections["lab3_gcn_molecules"]
    )
    assert sections["lab3_gcn_molecules"].startswith("## lab3_gcn_molecules: 7.2 min, full mode")
    assert "| lab3_gcn_molecules | full | 7.2 |" in rows["lab3_gcn_molecules"]
    assert "--labs lab3_gcn_molecules" in rows["lab3_gcn_molecules"]
    for name in ("lab1_attention", "lab2_transformer_reuters", "lab4_gat"):
        assert sections[name] == first_sections[name]
        assert "--labs" not in rows[name]


def test_a_run_that_finishes_meanwhile_keeps_its_update(labs_full, first_report, monkeypatch):
    # Two terminals: Lab 2 (most of an hour) and Lab 4 run at once into the same report.
    report = first_report

    def lab4_finishes():
        monkeypatch.setattr(labs_full, "run_lab", fake_run_lab({"lab4_gat": "lab 4 again"}))
        assert labs_full.main(["--labs", "lab4_gat", "--output", str(report)]) == 0

    monkeypatch.setattr(
        labs_full,
        "run_lab",
        fake_run_lab({"lab2_transformer_reuters": "lab 2 again"}, meanwhile=lab4_finishes),
    )
    assert labs_full.main(["--labs", "lab2_transformer_reuters", "--output", str(report)]) == 0
    _, _, sections = labs_full.parse_report(report.read_text())
    assert "lab 2 again" in sections["lab2_transformer_reuters"]
    assert "lab 4 again" in sections["lab4_gat"]
    assert "first run" in sections["lab1_attention"]


def test_a_report_changed_into_another_layout_meanwhile_is_not_overwritten(
    labs_full, first_report, monkeypatch, tmp_path
):
    report = first_report
    monkeypatch.setattr(
        labs_full,
        "run_lab",
        fake_run_lab(
            {"lab1_attention": "again"},
            meanwhile=lambda: report.write_text("# Somebody's own notes\n"),
        ),
    )
    assert labs_full.main(["--labs", "lab1_attention", "--output", str(report)]) == 1
    assert report.read_text() == "# Somebody's own notes\n"
    rows, _, sections = labs_full.parse_report((tmp_path / "labs_full.md.new").read_text())
    assert (
        list(rows) == list(sections) == ["lab1_attention"] and "again" in sections["lab1_attention"]
    )


def test_the_row_names_the_gpu_where_there_is_one(labs_full, tmp_path, monkeypatch):
    report = tmp_path / "labs_full.md"
    monkeypatch.setattr(labs_full, "run_lab", fake_run_lab(dict.fromkeys(labs_full.LABS, "run")))
    monkeypatch.setattr(labs_full, "visible_gpus", lambda: "NVIDIA H100 80GB HBM3")
    assert labs_full.main(["--labs", "lab1_attention", "--output", str(report)]) == 0
    monkeypatch.setattr(labs_full, "visible_gpus", lambda: "")
    assert labs_full.main(["--labs", "lab4_gat", "--output", str(report)]) == 0
    rows, _, _ = labs_full.parse_report(report.read_text())
    assert "; GPU: NVIDIA H100 80GB HBM3 |" in rows["lab1_attention"]
    assert "GPU" not in rows["lab4_gat"]


def test_replace_starts_afresh(labs_full, first_report):
    report = first_report
    assert labs_full.main(["--labs", "lab4_gat", "--output", str(report), "--replace"]) == 0
    rows, _, sections = labs_full.parse_report(report.read_text())
    assert list(rows) == list(sections) == ["lab4_gat"]


def test_a_file_of_another_layout_is_refused_before_any_lab_runs(
    labs_full, tmp_path, monkeypatch, capsys
):
    report = tmp_path / "notes.md"
    report.write_text("# My own notes\n\nNothing to lose.\n")

    def must_not_run(*args):
        raise AssertionError("a lab ran although the report could not be updated")

    monkeypatch.setattr(labs_full, "run_lab", must_not_run)
    with pytest.raises(SystemExit) as exit_info:
        labs_full.main(["--labs", "lab1_attention", "--output", str(report)])
    assert exit_info.value.code == 2
    message = capsys.readouterr().err
    assert str(report) in message and "--replace" in message and labs_full.TABLE_HEADER in message
    assert report.read_text() == "# My own notes\n\nNothing to lose.\n"


def test_a_row_for_an_unknown_lab_is_refused(labs_full):
    text = (
        labs_full.TITLE
        + "\n\n"
        + labs_full.TABLE_HEADER
        + "\n|---|\n| lab9_missing | full | 1.0 |\n"
    )
    with pytest.raises(labs_full.ReportFormatError, match="lab9_missing"):
        labs_full.parse_report(text)


def test_a_lab_past_its_budget_stops_and_keeps_what_it_printed(labs_full, tmp_path, monkeypatch):
    """--budget: the cell running when the minutes are spent is interrupted; earlier outputs stay."""
    (tmp_path / "solutions").mkdir()
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("## 1. Quick"),
            nbformat.v4.new_code_cell("print('first cell ran')"),
            nbformat.v4.new_markdown_cell("## 2. Slow"),
            nbformat.v4.new_code_cell(
                "import time\nprint('slow cell started', flush=True)\ntime.sleep(120)"
            ),
            nbformat.v4.new_code_cell("print('never reached')"),
        ]
    )
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, tmp_path / "solutions" / "slow_lab.ipynb")
    monkeypatch.setattr(labs_full, "ROOT", str(tmp_path))
    executed, minutes, error = labs_full.run_lab(
        "slow_lab", True, str(tmp_path / "kept"), 600, budget=0.1
    )
    assert error == "time limit of 0.1 min reached in cell 3", error
    assert minutes < 1.5, minutes  # stopped, not slept for two minutes
    assert "first cell ran" in labs_full.cell_text(executed.cells[1])
    assert "slow cell started" in labs_full.cell_text(executed.cells[3])
    assert not executed.cells[4].get("outputs"), "a cell after the limit ran"
    kept = nbformat.read(tmp_path / "kept" / "slow_lab.ipynb", as_version=4)
    assert "first cell ran" in labs_full.cell_text(kept.cells[1])
    section = labs_full.render("slow_lab", executed, minutes, error, False)
    assert "STOPPED: time limit of 0.1 min reached in cell 3" in section
    assert "(2. Slow" in section
    row = labs_full.table_row(
        "lab1_attention", False, minutes, error, "abc1234", ["--budget", "0.1"]
    )
    assert "(stopped at the time limit)" in row
