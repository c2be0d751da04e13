"""Files written whole or not at all, and a gradebook that cannot be read is never empty.

The red team saw grades.json rewritten in place (a 20 MB rewrite observed at sizes 0,
2 MiB, 4 MiB ...) and a regrade that read a cut grades.json as empty: it kept only its
own row and deleted every other student's feedback, without a word. Here the writers go
through lablib.grading.atomic, a writer killed before its rename leaves the old file, and
grade / report / export refuse a gradebook they cannot read, changing nothing.
"""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap

import pytest

from grading_paths import FIXTURE_HIDDEN, FIXTURE_LAB, FIXTURE_SOLUTION
from lablib.cli import main
from lablib.grading import report
from lablib.grading.atomic import TEMP_SUFFIX, atomic_write
from lablib.grading.grade import grade, rewrite_reports
from lablib.grading.judge import summarise
from lablib.grading.gradebook import GradebookError, GradebookFolder
from lablib.grading.results import Status, TestResult


def test_atomic_write_replaces_whole_and_keeps_the_permissions(tmp_path):
    path = tmp_path / "grades.json"
    atomic_write(path, "old\n")
    os.chmod(path, 0o640)
    atomic_write(path, "new\n")
    assert path.read_text() == "new\n" and stat.S_IMODE(path.stat().st_mode) == 0o640
    with atomic_write(tmp_path / "grades.csv", newline="") as f:
        f.write("a,b\r\n")
    assert (tmp_path / "grades.csv").read_bytes() == b"a,b\r\n"
    umask = os.umask(0o022)
    try:
        atomic_write(tmp_path / "fresh.bin", b"\x00\x01")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "fresh.bin").stat().st_mode) == 0o644, (
        "a new file gets open()'s permissions"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.bin", "grades.csv", "grades.json"]


def test_a_crash_between_write_and_rename_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "grades.json"
    path.write_text('{"lab": "old"}\n')

    def crash(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space"):
        atomic_write(path, '{"lab": "new"}\n')
    with pytest.raises(RuntimeError):
        with atomic_write(path) as f:  # the writer's own code fails halfway
            f.write('{"lab": "ne')
            raise RuntimeError("the writer failed")
    assert json.loads(path.read_text()) == {"lab": "old"}
    assert [p.name for p in tmp_path.iterdir()] == ["grades.json"], "no temporary file is left"


def test_a_writer_killed_before_its_rename_leaves_the_old_file(tmp_path):
    """A real SIGKILL of the JSON gradebook writer after its data is written and before the
    rename (the child announces that moment from os.fsync, then waits to be killed)."""
    from lablib.grading.spec import load_lab

    lab = load_lab(FIXTURE_LAB, hidden_dirs=[FIXTURE_HIDDEN])
    out = tmp_path / "out"
    report.write_reports(
        out, lab, [_result(lab, "ann", tmp_path)], writers=[report.JsonGradebook()]
    )
    before = (out / "grades.json").read_bytes()
    script = textwrap.dedent(f"""
        import os, sys, time
        from lablib.grading import report
        from lablib.grading.results import Status
        from lablib.grading.judge import summarise
        from lablib.grading.spec import load_lab
        lab = load_lab({str(FIXTURE_LAB)!r}, hidden_dirs=[{str(FIXTURE_HIDDEN)!r}])
        results = [summarise(lab, f"student{{i}}", f"/subs/{{i}}.ipynb", [], Status(), notes=["x" * 50_000])
                   for i in range(200)]   # about 10 MB of JSON
        def stop(fd):
            print("written", flush=True)
            time.sleep(60)
        os.fsync = stop
        report.write_reports({str(out)!r}, lab, results, writers=[report.JsonGradebook()])
        print("renamed", flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "written\n"
        assert os.path.getsize(out / "grades.json") == len(before), (
            "the old file is untouched while writing"
        )
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    assert (out / "grades.json").read_bytes() == before
    leftovers = [p for p in out.iterdir() if p.name.endswith(TEMP_SUFFIX)]
    assert len(leftovers) == 1 and leftovers[0].stat().st_size > 5_000_000, (
        "the new data went to a temporary file"
    )


def _result(lab, name, folder):
    tests = [
        TestResult(t.id, t.piece, t.name, t.points, t.points, True, t.hidden) for t in lab.tests
    ]
    return summarise(lab, name, str(folder / f"{name}.ipynb"), tests, Status())


@pytest.fixture()
def graded(tmp_path):
    """A gradebook of three students (their notebooks exist) with feedback for each."""
    from lablib.grading.spec import load_lab

    lab = load_lab(FIXTURE_LAB, hidden_dirs=[FIXTURE_HIDDEN])
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("ann", "bob", "cat"):
        shutil.copy(FIXTURE_SOLUTION, subs / f"{name}.ipynb")
    out = tmp_path / "out"
    report.write_reports(out, lab, [_result(lab, name, subs) for name in ("ann", "bob", "cat")])
    assert sorted(p.name for p in (out / "feedback").glob("*.md")) == ["ann.md", "bob.md", "cat.md"]
    return lab, subs, out


def _snapshot(folder):
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock"  # the writers' lock: empty, made by any writer
    }


@pytest.mark.parametrize("cut", ["half", "empty", "not-an-object", "bad-entry", "not-utf8"])
def test_a_regrade_refuses_a_gradebook_it_cannot_read_and_deletes_nothing(graded, cut, capsys):
    lab, subs, out = graded
    path = out / "grades.json"
    text = path.read_bytes()
    path.write_bytes(
        {
            "half": text[: len(text) // 2],  # cut mid-write
            "empty": b"",
            "not-an-object": b"[]\n",
            "bad-entry": json.dumps(
                dict(json.loads(text), submissions=[{"submission": "ann"}])
            ).encode(),
            "not-utf8": b"\xff\xfe" + text,
        }[cut]
    )
    before = _snapshot(out)
    with pytest.raises(GradebookError) as caught:
        GradebookFolder(out).results(lab.name)
    message = str(caught.value)
    assert str(path) in message and "--fresh" in message and "Restore grades.json" in message, (
        message
    )
    if cut == "half":
        assert "not valid JSON at line" in message and "cut short" in message, message
    if cut == "bad-entry":
        assert "submission 1 ('ann') cannot be read" in message, message
    # the command line: exit status 2, the same message, nothing graded or written
    args = [
        "grade",
        str(FIXTURE_LAB),
        str(subs / "ann.ipynb"),
        "-o",
        str(out),
        "--tests",
        str(FIXTURE_HIDDEN),
        "--lab-notebook",
        str(FIXTURE_SOLUTION),
        "--quiet",
        "--no-sandbox",
    ]
    assert main(args) == 2
    assert str(path) in capsys.readouterr().err
    assert main(["report", str(out), "--lab", str(FIXTURE_LAB)]) == 2
    assert "Restore grades.json" in capsys.readouterr().err
    with pytest.raises(GradebookError):
        rewrite_reports(out, lab=lab)
    assert _snapshot(out) == before, "nothing was deleted or rewritten"


def test_a_missing_gradebook_is_a_new_one_and_fresh_replaces_a_cut_one(graded):
    lab, subs, out = graded
    assert GradebookFolder(out.parent / "nowhere").results(lab.name) == []
    (out / "grades.json").write_text('{"lab": "lab0_fix')
    results = grade(
        lab,
        [subs / "ann.ipynb"],
        out,
        lab_notebook=FIXTURE_SOLUTION,
        progress=False,
        isolate=False,
        fresh=True,
        timeout=30,
    )
    assert [r.submission for r in results] == ["ann"] and results[0].score == results[0].max_score
    assert json.loads((out / "grades.json").read_text())["submissions"][0]["submission"] == "ann"
    assert sorted(p.name for p in (out / "feedback").glob("*.md")) == ["ann.md"]


def test_export_refuses_a_cut_gradebook(graded, tmp_path):
    from lablib.grading.export import ExportError, export
    from lablib.grading.gradebook.roster import Roster

    _, _, out = graded
    (out / "grades.json").write_bytes((out / "grades.json").read_bytes()[:100])
    roster_csv = tmp_path / "roster.csv"
    roster_csv.write_text("student_id,name,email,section,submission\n1,Ann,ann@x,A,ann\n")
    with pytest.raises(ExportError, match="not valid JSON"):
        export("canvas", [out], Roster.load(roster_csv), tmp_path / "canvas.csv")
    assert not (tmp_path / "canvas.csv").exists()
