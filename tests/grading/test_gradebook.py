"""The class gradebook's one owner (lablib.grading.gradebook): built by keyword, stored and
read back through GradebookFolder only, never through a report."""

import dataclasses
import json
import shutil

import pytest

from grading_paths import FIXTURE_HIDDEN, FIXTURE_LAB, FIXTURE_SOLUTION
from lablib.grading.gradebook import Gradebook, GradebookError, GradebookFolder
from lablib.grading.gradebook.late import LateError, LatePolicy
from lablib.grading.gradebook.roster import Roster
from lablib.grading.grade import rewrite_reports
from lablib.grading.judge import summarise
from lablib.grading.report import write_reports
from lablib.grading.results import Status, TestResult
from lablib.grading.spec import load_lab


@pytest.fixture()
def lab():
    return load_lab(FIXTURE_LAB, hidden_dirs=[FIXTURE_HIDDEN])


def _result(lab, name, folder):
    shutil.copy(FIXTURE_SOLUTION, folder / f"{name}.ipynb")
    tests = [
        TestResult(t.id, t.piece, t.name, t.points, t.points, True, t.hidden) for t in lab.tests
    ]
    return summarise(lab, name, str(folder / f"{name}.ipynb"), tests, Status())


def test_gradebook_fields_are_given_by_keyword(lab, tmp_path):
    result = _result(lab, "ann", tmp_path)
    with pytest.raises(TypeError):
        Gradebook(lab, (result,), {"ann": "ann"})  # positional: refused
    book = Gradebook.of(lab, [result], skipped=[(tmp_path / "x.txt", "not a notebook")])
    assert book.skipped == ((str(tmp_path / "x.txt"), "not a notebook"),)
    assert {f.name for f in dataclasses.fields(book)} >= {"lab", "results", "late_policy", "roster"}


def test_skipped_paths_are_kept_in_the_gradebook_not_read_from_the_summary(lab, tmp_path):
    out = tmp_path / "out"
    skipped = [(str(tmp_path / "notes.txt"), "not a notebook: only .ipynb files are graded")]
    write_reports(out, lab, [_result(lab, "ann", tmp_path)], skipped=skipped)
    assert json.loads((out / "grades.json").read_text())["skipped"] == [
        {"path": skipped[0][0], "reason": skipped[0][1]}
    ]
    (out / "summary.json").write_text("not a summary")  # a report: never read back
    rewrite_reports(out, lab=lab)
    summary = json.loads((out / "summary.json").read_text())
    assert [(s["path"], s["reason"]) for s in summary["skipped"]] == skipped


def test_a_gradebook_from_before_keeps_its_skipped_paths_from_its_summary(lab, tmp_path):
    """lablib 0.3 kept the skipped paths in summary.json only: regenerating its reports
    reads them from there once, then keeps them in the gradebook."""
    out = tmp_path / "out"
    skipped = [(str(tmp_path / "notes.txt"), "not a notebook: only .ipynb files are graded")]
    write_reports(out, lab, [_result(lab, "ann", tmp_path)], skipped=skipped)
    data = json.loads((out / "grades.json").read_text())
    del data["skipped"]  # as 0.3 wrote it
    (out / "grades.json").write_text(json.dumps(data))
    rewrite_reports(out, lab=lab)
    assert json.loads((out / "grades.json").read_text())["skipped"] == [
        {"path": skipped[0][0], "reason": skipped[0][1]}
    ]
    data.pop("skipped", None)
    (out / "grades.json").write_text(json.dumps(data))
    (out / "summary.json").write_text("not a summary")  # unreadable: none, not an error
    assert GradebookFolder(out).skipped(data) == ()


def test_a_stored_gradebook_with_a_broken_skipped_list_is_an_error(lab, tmp_path):
    out = tmp_path / "out"
    write_reports(out, lab, [_result(lab, "ann", tmp_path)])
    data = json.loads((out / "grades.json").read_text())
    (out / "grades.json").write_text(json.dumps(dict(data, skipped=["notes.txt"])))
    with pytest.raises(GradebookError, match='"skipped" is not a list'):
        rewrite_reports(out, lab=lab)


def test_what_regrades_keep_is_read_back_from_grades_json(lab, tmp_path):
    """The late policy, the layout and the roster's copy are kept with the rows in
    grades.json (one write); the copy is named by its content and checked when read."""
    roster_file = tmp_path / "class.csv"
    roster_file.write_text("student_id,name,submission\nS1,Ann A,ann\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    folder = GradebookFolder(out)
    assert (folder.late_policy(), folder.roster(), folder.layout()) == (None, None, None)
    policy = LatePolicy.parse(due="2026-11-20T23:59+01:00", per_day="10%")
    roster = Roster.load(roster_file)
    kept = {"layout": "plain", "roster": folder.keep_roster(roster)}
    write_reports(
        out, lab, [_result(lab, "ann", tmp_path)], late_policy=policy, roster=roster, kept=kept
    )
    assert folder.late_policy() == policy and folder.layout() == "plain"
    assert [s.student_id for s in folder.roster().students] == ["S1"]
    data = json.loads((out / "grades.json").read_text())
    copy = out / data["kept"]["roster"]["file"]
    assert copy.read_bytes() == roster_file.read_bytes() and copy.name.startswith(".roster-")
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp") or "tmp" in p.name]
    copy.write_text("student_id,name,submission\nS2,Eve E,ann\n", encoding="utf-8")
    with pytest.raises(GradebookError, match="it was changed since.* give the roster again"):
        folder.roster()
    copy.unlink()
    with pytest.raises(GradebookError, match="cannot be read .* give the roster again"):
        folder.roster()
    (out / "grades.json").write_text(json.dumps(dict(data, late_policy={"due": "soon"})))
    with pytest.raises(LateError, match="cannot be read as a late policy.*give --due again"):
        folder.late_policy()


DUE2 = "2026-12-01T23:59+01:00"


def test_a_gradebook_of_before_keeps_its_files_until_its_next_write(lab, tmp_path):
    """A grades.json written before it kept its options (no "kept") has them in late.json,
    .options.json and .roster.csv: read from there, moved into grades.json by the next
    write (lablib report), and then removed."""
    out = tmp_path / "out"
    write_reports(out, lab, [_result(lab, "ann", tmp_path)])
    data = json.loads((out / "grades.json").read_text())
    del data["kept"], data["late_policy"]  # lablib 0.2 wrote no late_policy there either
    (out / "grades.json").write_text(json.dumps(data))
    policy = LatePolicy.parse(due="2026-11-20T23:59+01:00", per_day="2")
    (out / "late.json").write_text(json.dumps(policy.to_dict()))
    (out / ".options.json").write_text('{"layout": "plain"}')
    (out / ".roster.csv").write_text("student_id,name,submission\nS1,Ann A,ann\n")
    folder = GradebookFolder(out)
    assert folder.late_policy() == policy and folder.layout() == "plain"
    assert [s.student_id for s in folder.roster().students] == ["S1"]
    (out / "late.json").write_text("{")
    with pytest.raises(LateError, match="late.json cannot be read as a late policy"):
        folder.late_policy()
    (out / "late.json").write_text(json.dumps(policy.to_dict()))
    rewrite_reports(out, lab=lab)
    for name in ("late.json", ".options.json", ".roster.csv"):
        assert not (out / name).exists(), name
    assert folder.late_policy() == policy and folder.layout() == "plain"
    assert [s.student_id for s in folder.roster().students] == ["S1"]
    assert json.loads((out / "grades.json").read_text())["kept"]["layout"] == "plain"
    # where grades.json of before has its own policy, it wins over late.json (a run of
    # before stopped between the two left them apart; the rows are grades.json's)
    data = json.loads((out / "grades.json").read_text())
    del data["kept"]
    (out / "grades.json").write_text(json.dumps(data))
    (out / "late.json").write_text(json.dumps(LatePolicy.parse(due=DUE2, per_day="5").to_dict()))
    assert GradebookFolder(out).late_policy() == policy
    mine = out / ".roster-backup.csv"  # not lablib's: left alone
    mine.write_text("x")
    rewrite_reports(out, lab=lab)
    assert mine.exists() and not (out / "late.json").exists()


@pytest.mark.parametrize(
    "entry",
    [
        {"file": ".roster-../../etc.csv", "sha256": "../../../etc"},
        {"file": ".roster-0123456789abcdef.csv", "sha256": "0123456789abcdef"},
        {"file": 7, "sha256": None},
        "class.csv",
    ],
)
def test_a_kept_roster_entry_of_another_shape_is_refused_with_the_fix(lab, tmp_path, entry):
    out = tmp_path / "out"
    write_reports(out, lab, [_result(lab, "ann", tmp_path)])
    data = json.loads((out / "grades.json").read_text())
    data["kept"]["roster"] = entry
    (out / "grades.json").write_text(json.dumps(data))
    with pytest.raises(GradebookError, match=r'"kept.roster" is .*expected .*--roster'):
        GradebookFolder(out).roster()


def test_every_text_cell_of_grades_csv_is_inert(lab, tmp_path):
    """A submission time the LMS's metadata gave in a form lablib cannot read is kept as
    it was written: in grades.csv it is text, not a formula; numbers stay numbers."""
    import csv

    hostile = '=HYPERLINK("http://evil.example","late?")'
    late, on_time = _result(lab, "ann", tmp_path), _result(lab, "bob", tmp_path)
    late.identity = {"submitted_at": hostile}
    on_time.identity = {"submitted_at": "2026-11-19T10:00+01:00"}
    policy = LatePolicy.parse(due="2026-11-20T23:59+01:00", per_day="10%")
    write_reports(tmp_path / "out", lab, [late, on_time], late_policy=policy)
    with open(tmp_path / "out" / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert rows["ann"]["submitted_at"] == "'" + hostile
    assert rows["bob"]["submitted_at"] == "2026-11-19T10:00+01:00"
    assert rows["bob"]["late_hours"] == "0" and rows["bob"]["total"] == rows["bob"]["max_total"]


def test_the_spreadsheet_writer_keeps_numbers_and_makes_text_inert():
    import io

    from lablib.grading.report.gradebook_csv import SpreadsheetWriter

    out = io.StringIO()
    SpreadsheetWriter(out).writerow([-1.5, 3, 2.0, "", "-1", "@SUM(1)", "\tx", "ok", None])
    assert out.getvalue() == "-1.5,3,2,,'-1,'@SUM(1),'\tx,ok,\r\n"
