"""`lablib grade` end to end on the fixture lab: reports, statuses, cache, parallel jobs."""

import csv
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import nbformat
import pytest

from lablib.cli import main
from lablib.grading.run.isolation import sandbox_possible
from lablib.grading.author.assignment import assign_notebook
from lablib.grading.gradebook import GradebookFolder
from grading_paths import CORPUS, FIXTURE_HIDDEN, FIXTURE_LAB, FIXTURE_SOLUTION

pytestmark = pytest.mark.integration  # grades batches with the sandboxed runner


@pytest.fixture()
def batch(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "alice.ipynb")
    assign_notebook(FIXTURE_SOLUTION, tmp_path / "labs")
    shutil.copy(tmp_path / "labs" / "lab0_fixture.ipynb", subs / "bob.ipynb")
    (subs / "carol").mkdir()  # a Gradescope-style folder per student
    shutil.copy(CORPUS / "deleted_cell.ipynb", subs / "carol" / "submission.ipynb")
    return subs


def _rows(out):
    with open(out / "grades.csv", newline="") as f:
        return {row["submission"]: row for row in csv.DictReader(f)}


def test_grade_writes_gradebook_feedback_and_uses_cache(batch, tmp_path, capsys):
    out = tmp_path / "out"
    args = [
        "grade",
        str(FIXTURE_LAB),
        str(batch),
        "-o",
        str(out),
        "--tests",
        str(FIXTURE_HIDDEN),
        "--lab-notebook",
        str(FIXTURE_SOLUTION),
        "--jobs",
        "2",
        "--timeout",
        "20",
        "--quiet",
    ]
    assert main(args) == 0
    rows = _rows(out)
    assert list(next(iter(rows.values()))) == [
        "submission",
        "status",
        "score",
        "max_score",
        "normalize",
        "softmax",
        "running_mean",
    ]
    assert rows["alice"]["status"] == "ok" and rows["alice"]["score"] == "8"
    assert rows["bob"]["score"] == "0" and rows["bob"]["status"] == "ok"
    assert (
        rows["carol"]["status"] == "missing: running_mean" and rows["carol"]["running_mean"] == "0"
    )
    assert rows["carol"]["score"] == "6"
    summary = json.loads((out / "summary.json").read_text())  # the class at a glance
    assert summary["submissions"] == 3 and summary["statuses"]["missing"] == 1
    assert [p["piece"] for p in summary["pieces"]] == ["normalize", "softmax", "running_mean"]
    page = (out / "summary.html").read_text()
    assert all(f"<td>{piece}</td>" in page for piece in ("normalize", "softmax", "running_mean"))
    data = json.loads((out / "grades.json").read_text())
    bob = next(s for s in data["submissions"] if s["submission"] == "bob")
    assert all(t["message"].startswith("not done yet: the graded piece") for t in bob["tests"])
    md = (out / "feedback" / "bob.md").read_text()
    assert "large_logits (hidden)" in md and "hidden test: details are not shown" in md
    assert "SECRET_LOGITS" not in md and "1000" not in md  # hidden inputs never shown
    assert "Hint: Subtract the row maximum" in md
    html = (out / "feedback" / "carol.html").read_text()
    assert "<table>" in html and "missing" in html
    # re-run: everything comes from the cache; --force re-grades
    capsys.readouterr()
    assert main(args) == 0
    assert capsys.readouterr().out.count("(cached)") == 3
    nb = nbformat.read(batch / "alice.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("# GRADED: normalize"))
    cell.source = cell.source.replace("keepdims=True)", "keepdims=True) * 2")
    nbformat.write(nb, batch / "alice.ipynb")
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert printed.count("(cached)") == 2 and _rows(out)["alice"]["normalize"] == "0"
    assert main(args + ["--force"]) == 0
    assert "(cached)" not in capsys.readouterr().out


def test_grade_command_line_entry_point_and_errors(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lablib.cli",
            "grade",
            "lab_nope",
            str(FIXTURE_SOLUTION),
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "Unknown lab 'lab_nope'" in result.stderr
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lablib.cli",
            "grade",
            str(FIXTURE_LAB),
            str(tmp_path / "none.ipynb"),
            "-o",
            str(tmp_path),
            "--lab-notebook",
            str(FIXTURE_SOLUTION),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "does not exist" in result.stderr


def test_assign_command(tmp_path, capsys):
    assert main(["assign", str(FIXTURE_SOLUTION), "-o", str(tmp_path)]) == 0
    first = (tmp_path / "lab0_fixture.ipynb").read_bytes()
    assert main(["assign", str(FIXTURE_SOLUTION), "-o", str(tmp_path)]) == 0
    assert (tmp_path / "lab0_fixture.ipynb").read_bytes() == first


def test_data_subcommands_call_sources(monkeypatch, tmp_path, capsys):
    import types

    calls = []
    fake = types.ModuleType("lablib.data.sources")
    fake.dataset_status = lambda data_dir=None: (
        calls.append(("status", data_dir))
        or [{"name": "cora", "present": True}, {"name": "reuters", "present": False}]
    )
    fake.fetch_dataset = lambda name, data_dir=None: (
        calls.append(("fetch", name, data_dir)) or tmp_path / name
    )
    monkeypatch.setitem(sys.modules, "lablib.data.sources", fake)
    import lablib.data

    monkeypatch.setattr(lablib.data, "sources", fake, raising=False)
    assert main(["data", "list", "--data-dir", str(tmp_path)]) == 0
    assert main(["data", "fetch", "cora"]) == 0
    out = capsys.readouterr().out
    assert "cora | True" in out and str(tmp_path / "cora") in out
    assert calls == [("status", str(tmp_path)), ("fetch", "cora", None)]


def test_collect_submissions_names(tmp_path):
    from lablib.grading.submissions import collect_submissions

    (tmp_path / "a.ipynb").write_text("{}")
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "lab.ipynb").write_text("{}")
    (tmp_path / "eve").mkdir()
    (tmp_path / "eve" / "x.ipynb").write_text("{}")
    (tmp_path / "eve" / "y.ipynb").write_text("{}")
    (tmp_path / "notes.txt").write_text("")
    refused = []
    found = collect_submissions([tmp_path, tmp_path / "a.ipynb"], refused=refused)
    assert [name for name, _ in found] == ["a", "bob", "eve/x", "eve/y"]
    # a.ipynb given again (once in the folder, once by itself): one row, not a and a-2
    assert [p.name for p, _ in refused] == ["notes.txt", "a.ipynb"]
    assert refused[1][1] == f"the same notebook as {tmp_path / 'a.ipynb'}, given again: graded once"


def test_a_folder_that_cannot_be_read_or_nests_too_deep_skips_only_itself(tmp_path, monkeypatch):
    """One student's folder holding a folder that cannot be listed (unzip restores a zip's
    mode 000) or a chain of folders a thousand deep ended the listing of the whole class
    (PermissionError, RecursionError). Each is skipped with its reason; the class is
    listed. The folder given itself cannot be read: a clear error."""
    from lablib.grading import submissions as listing

    for name in ("alice", "mallory"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "lab.ipynb").write_text("{}")
    private = tmp_path / "mallory" / "private"
    private.mkdir()
    deep = tmp_path / "mallory" / "/".join(["d"] * (listing.MAX_DEPTH + 8))
    deep.mkdir(parents=True)
    (deep / "lab.ipynb").write_text("{}")
    listed = pathlib.Path.iterdir

    def iterdir(self):  # as for a user without the right to list it (root has it)
        if self == private or self == tmp_path / "gone":
            raise PermissionError(13, "Permission denied")
        return listed(self)

    noexec = tmp_path / "mallory" / "noexec"  # mode r--: listed, its files not reached
    noexec.mkdir()
    (noexec / "lab.ipynb").write_text("{}")
    stat = pathlib.Path.lstat

    def lstat(self):
        if self.parent == noexec:
            raise PermissionError(13, "Permission denied")
        return stat(self)

    monkeypatch.setattr(pathlib.Path, "iterdir", iterdir)
    monkeypatch.setattr(pathlib.Path, "lstat", lstat)
    refused = []
    found = listing.collect_submissions([tmp_path], refused=refused)
    assert [name for name, _ in found] == ["alice", "mallory"]
    why = {str(p.relative_to(tmp_path)): reason for p, reason in refused}
    assert why["mallory/private"].startswith("a folder that cannot be read (Permission denied)")
    assert why["mallory/noexec"].startswith("a folder whose files cannot be read (Permission")
    nested = "mallory/" + "/".join(["d"] * (listing.MAX_DEPTH))
    assert why[nested].startswith(f"a folder nested more than {listing.MAX_DEPTH} folders deep")
    monkeypatch.setattr(os, "listdir", lambda path: iterdir(pathlib.Path(path)))
    (tmp_path / "gone").mkdir()
    with pytest.raises(ValueError, match="'.*gone' cannot be read \\(Permission denied\\)"):
        listing.collect_submissions([tmp_path / "gone"], refused=[])


def test_regrade_one_student_keeps_the_class_and_no_stale_file(batch, tmp_path, capsys):
    out = tmp_path / "out"
    common = [
        "-o",
        str(out),
        "--tests",
        str(FIXTURE_HIDDEN),
        "--lab-notebook",
        str(FIXTURE_SOLUTION),
        "--jobs",
        "2",
        "--timeout",
        "20",
        "--quiet",
    ]
    assert main(["grade", str(FIXTURE_LAB), str(batch), *common]) == 0
    assert sorted(_rows(out)) == ["alice", "bob", "carol"]
    # the student fixes bob's softmax; only bob is graded again, into the class's output
    shutil.copy(FIXTURE_SOLUTION, batch / "bob.ipynb")
    assert main(["grade", str(FIXTURE_LAB), str(batch / "bob.ipynb"), *common]) == 0
    rows = _rows(out)
    assert sorted(rows) == ["alice", "bob", "carol"] and rows["bob"]["score"] == "8"
    assert rows["alice"]["score"] == "8" and rows["carol"]["score"] == "6"  # kept as they were
    assert json.loads((out / "summary.json").read_text())["submissions"] == 3
    assert (out / "instructor" / "carol.md").is_file()
    # carol's folder is removed: her row goes, with a word, and so do her files
    shutil.rmtree(batch / "carol")
    capsys.readouterr()
    assert main(["grade", str(FIXTURE_LAB), str(batch), *common]) == 0
    err = capsys.readouterr().err
    assert "lablib grade: removed: carol was in the gradebook" in err and "no longer exists" in err
    assert sorted(_rows(out)) == ["alice", "bob"]
    assert sorted(p.name for p in (out / "feedback").iterdir()) == [
        "alice.html",
        "alice.md",
        "bob.html",
        "bob.md",
    ]
    assert not list((out / "instructor").glob("*.md"))
    # --fresh starts a new gradebook; another lab's gradebook is never overwritten
    assert main(["grade", str(FIXTURE_LAB), str(batch / "alice.ipynb"), *common, "--fresh"]) == 0
    assert sorted(_rows(out)) == ["alice"] and sorted(
        p.name for p in (out / "feedback").iterdir()
    ) == ["alice.html", "alice.md"]
    capsys.readouterr()
    assert main(["grade", "lab1", str(batch / "alice.ipynb"), "-o", str(out), "--quiet"]) == 2
    assert (
        "holds the gradebook of 'lab0_fixture', not of 'lab1_attention'" in capsys.readouterr().err
    )


def test_names_are_inert_in_the_spreadsheet_and_the_terminal(tmp_path, capsys):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("=HYPERLINK(1)", "+1+1", "@SUM(1)", "-2", "clear\x1b[2Jscreen"):
        shutil.copy(FIXTURE_SOLUTION, subs / f"{name}.ipynb")
    out = tmp_path / "out"
    assert (
        main(
            [
                "grade",
                str(FIXTURE_LAB),
                str(subs),
                "-o",
                str(out),
                "--lab-notebook",
                str(FIXTURE_SOLUTION),
                "--jobs",
                "2",
                "--timeout",
                "20",
                "--quiet",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "clear?[2Jscreen" in printed
    with open(out / "grades.csv", newline="") as f:
        names = [row["submission"] for row in csv.DictReader(f)]
    # control characters are replaced where the name is read: no report holds them
    assert sorted(names) == sorted(
        ["'=HYPERLINK(1)", "'+1+1", "'@SUM(1)", "'-2", "clear?[2Jscreen"]
    )
    data = json.loads((out / "grades.json").read_text())  # the JSON keeps the names as they are
    assert "=HYPERLINK(1)" in {s["submission"] for s in data["submissions"]}


def test_judging_time_counts_in_the_submissions_seconds(tmp_path, monkeypatch):
    """A judge that rebuilds and runs a model spends grader time: it is the submission's."""
    import time as _time

    from lablib.grading import grade as grade_module
    from lablib.grading.spec import load_lab

    real = grade_module.judge_submission

    def slow_judge(*args, **kwargs):
        _time.sleep(1.0)
        return real(*args, **kwargs)

    monkeypatch.setattr(grade_module, "judge_submission", slow_judge)
    monkeypatch.setattr(
        grade_module,
        "run_submission",  # a run of 0.25 s that answered nothing
        lambda *a, **k: grade_module.RunOutcome(seconds=0.25),
    )
    lab = load_lab(str(FIXTURE_LAB))
    from lablib.grading.notebook import read_notebook, setup_sources

    nb, _ = read_notebook(FIXTURE_SOLUTION)
    result = grade_module.grade_one(
        lab, "alice", FIXTURE_SOLUTION, setup_sources(nb), limits=grade_module.Limits(timeout=20)
    )
    assert 1.2 <= result.seconds < 5, result.seconds  # the run's 0.25 s and the judge's second


def test_a_file_the_system_cannot_read_is_the_graders_error_not_the_students(tmp_path):
    """A notebook listed and gone when read (the download unzipped again over the folder),
    or not readable by the grading user, was `invalid-notebook` (exported as the
    student's 0); the file system's doing is a grader error, graded again."""
    from lablib.grading import grade as grade_module
    from lablib.grading.results import Kind
    from lablib.grading.spec import load_lab

    lab = load_lab(str(FIXTURE_LAB))
    result = grade_module.grade_one(lab, "alice", tmp_path / "gone.ipynb", [])
    assert result.status.has(Kind.GRADER_ERROR) and not result.status.has(Kind.INVALID_NOTEBOOK)
    assert result.notes == [
        "grader error: the file could not be read (No such file or directory); not the "
        "student's doing: make it readable to the grading user and grade again"
    ]
    (tmp_path / "empty.ipynb").write_text("")  # the student's own: invalid as before
    empty = grade_module.grade_one(lab, "bob", tmp_path / "empty.ipynb", [])
    assert empty.status.has(Kind.INVALID_NOTEBOOK)


def test_a_file_time_is_the_one_read_at_grading_never_read_again(tmp_path):
    """With --late-from-file-times, every rewrite of the gradebook (lablib report, the
    review page's write, a regrade of one student) read each notebook's file time again:
    a folder copied again (cp without -p, a new unzip) or a file merely touched made an
    on-time row late, without a regrade. The time is read once, when the notebook is
    graded, and kept with the bytes graded."""
    from lablib.grading import grade as grading
    from lablib.grading.gradebook.late import LatePolicy, parse_time
    from lablib.grading.spec import load_lab

    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "alice.ipynb")
    due = "2026-11-20T23:59+01:00"
    on_time = parse_time(due).timestamp() - 3600
    os.utime(subs / "alice.ipynb", (on_time, on_time))
    policy = LatePolicy.parse(due=due, per_day="2", from_files=True)
    options = dict(lab_notebook=FIXTURE_SOLUTION, jobs=1, timeout=20, progress=False)
    [row] = grading.grade(str(FIXTURE_LAB), [subs], out, late_policy=policy, **options)
    assert parse_time(row.identity["file_time"]).timestamp() == on_time
    os.utime(subs / "alice.ipynb")  # touched (copied again): its time is now, days late
    grading.rewrite_reports(out, lab=load_lab(str(FIXTURE_LAB)))
    [kept] = _rows(out).values()
    assert kept["late_penalty"] == "0", kept


def test_a_row_keeping_its_student_takes_the_new_notebooks_time_not_the_old(tmp_path):
    """The same path graded again without the roster that matched it keeps its student;
    it kept the earlier notebook's file time too, with the new notebook's bytes, so a late
    resubmission dated by --late-from-file-times was on time."""
    import types

    from lablib.grading.grade import _carry_identity

    old = types.SimpleNamespace(
        identity={"matched": True, "key": "S1", "name": "Alice", "sha256": "aaa",
                  "file_time": "2026-03-01T10:00:00+00:00", "file": "/c/alice/lab1.ipynb"}
    )  # fmt: skip
    new = types.SimpleNamespace(
        identity={"key": "lab1", "sha256": "bbb", "file_time": "2026-03-09T23:00:00+00:00",
                  "file": "/c/alice/lab1.ipynb"}
    )  # fmt: skip
    _carry_identity(new, old)
    assert (new.identity["key"], new.identity["sha256"]) == ("S1", "bbb")
    assert new.identity["file_time"] == "2026-03-09T23:00:00+00:00"
    unread = types.SimpleNamespace(identity={"key": "lab1", "sha256": ""})  # none read now
    _carry_identity(unread, old)
    assert "file_time" not in unread.identity


def _fixture_grade(subs, *extra) -> list[str]:
    """``lablib grade`` of the fixture lab over ``subs`` (quiet), with ``extra`` options."""
    return [
        "grade",
        str(FIXTURE_LAB),
        str(subs),
        "--tests",
        str(FIXTURE_HIDDEN),
        "--lab-notebook",
        str(FIXTURE_SOLUTION),
        "--quiet",
        *extra,
    ]


def test_grading_without_the_sandbox_says_so_once(tmp_path, capsys):
    """Without the sandbox stage a submission runs as the grading user: the command says so
    in one line (the rows' isolation notes alone were easy to miss); a cached row ran
    before and is not counted."""
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "alice.ipynb")
    args = _fixture_grade(subs, "-o", str(tmp_path / "out"), "--no-sandbox")
    assert main(args) == 0
    said = capsys.readouterr().err
    assert "1 submission(s) ran without the sandbox" in said and "read and write" in said, said
    assert main(args) == 0  # cached: nothing ran
    assert "without the sandbox" not in capsys.readouterr().err
    if sandbox_possible():  # as root on Linux: sandboxed, nothing to say
        assert main([a for a in args if a != "--no-sandbox"] + ["--force"]) == 0
        assert "without the sandbox" not in capsys.readouterr().err


def test_layout_plain_from_the_command_line(tmp_path, capsys):
    """A plain layout where a student's folder holds a file named as Canvas names its files:
    read by its shape it is that Canvas user's row, and the command says so; with
    --layout plain it is the student's own."""
    subs = tmp_path / "subs"
    (subs / "alice").mkdir(parents=True)
    (subs / "mallory").mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "alice" / "lab0.ipynb")
    shutil.copy(FIXTURE_SOLUTION, subs / "mallory" / "smithbob_184002_9000002_lab0.ipynb")
    args = _fixture_grade(subs, "--no-sandbox")
    assert main(args + ["-o", str(tmp_path / "auto")]) == 0
    said = capsys.readouterr().err
    assert "lablib grade: layout:" in said and "students' own folders (alice)" in said, said
    assert sorted(_rows(tmp_path / "auto")) == ["alice", "smithbob"]
    assert main(args + ["-o", str(tmp_path / "plain"), "--layout", "plain"]) == 0
    assert "lablib grade: layout:" not in capsys.readouterr().err
    assert sorted(_rows(tmp_path / "plain")) == ["alice", "mallory"]


def test_a_regrade_reads_new_folders_as_the_gradebook_was_graded(tmp_path, capsys):
    """A plain class graded with --layout plain, then regraded without it when a late
    student's folder arrives: that folder's Canvas-named file is still the student's own
    (the output folder keeps the layout, and the command says it used it); --layout auto
    changes it back for folders graded after (kept rows keep their names, as in any
    regrade); a kept layout that cannot be read stops the command, changing nothing."""
    subs = tmp_path / "subs"
    (subs / "alice").mkdir(parents=True)
    shutil.copy(FIXTURE_SOLUTION, subs / "alice" / "lab0.ipynb")
    out = tmp_path / "out"
    args = _fixture_grade(subs, "--no-sandbox", "-o", str(out))
    assert main(args + ["--layout", "plain"]) == 0
    capsys.readouterr()
    (subs / "mallory").mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "mallory" / "smithbob_184002_9000002_lab0.ipynb")
    assert main(args) == 0
    said = capsys.readouterr().err
    assert "lablib grade: layout:" in said and "as this gradebook's submissions were" in said
    assert sorted(_rows(out)) == ["alice", "mallory"]
    assert main(args + ["--layout", "auto"]) == 0
    assert sorted(_rows(out)) == ["alice", "mallory"]
    (subs / "trudy").mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "trudy" / "jonescarol_184003_9000003_lab0.ipynb")
    capsys.readouterr()
    assert main(args) == 0  # auto kept now: read by shapes, and the mixed folder named
    said = capsys.readouterr().err
    assert "each folder given is read as one student's" not in said
    assert "LMS-shaped content in" in said and "trudy" in said, said
    assert sorted(_rows(out)) == ["alice", "jonescarol", "mallory"]
    data = json.loads((out / "grades.json").read_text(encoding="utf-8"))
    assert data["kept"]["layout"] == "auto"
    data["kept"]["layout"] = "plian"
    (out / "grades.json").write_text(json.dumps(data), encoding="utf-8")
    before = (out / "grades.json").read_bytes()
    assert main(args) != 0
    said = capsys.readouterr().err
    assert 'grades.json ("kept") cannot be read' in said and "'plian'" in said, said
    assert (out / "grades.json").read_bytes() == before


def test_the_cache_key_holds_what_decides_a_grade(tmp_path, monkeypatch):
    """The cache's key changes with a data file beside the hidden tests (a test that loads
    its expected values), in a hidden folder too (``.data/``), with a module of lablib
    outside the grading package (the layers the judges' references use), with the
    child's LABLIB_FAST and the numerical distributions' versions (scikit-learn's too),
    and with whether the sandbox runs; not with files in the output folder kept beside the
    tests, nor in version control's store."""
    from lablib.grading import grade as grading
    from lablib.grading.labspec.registry import load_spec
    from lablib.grading.run import Limits
    from lablib.labs import find_lab

    course = tmp_path / "course"
    # (the checkout's compiled modules left out: the test makes its own __pycache__ below)
    shutil.copytree(FIXTURE_LAB, course, ignore=shutil.ignore_patterns("__pycache__"))
    spec = load_spec(find_lab(str(course)), [str(course / "hidden")])
    out = course / "hidden" / "out"
    out.mkdir()
    real_versions = grading._versions

    def key():
        return grading._tests_fingerprint(spec, [], Limits(), skip=[out])

    first = key()
    (out / "grades.json").write_text("{}")  # the output folder: not read
    assert key() == first
    (course / "hidden" / "secret.json").write_text('{"expected": 1}')
    with_data = key()
    assert with_data != first
    (course / "hidden" / "secret.json").write_text('{"expected": 2}')
    assert key() != with_data
    with_data = key()
    (course / "hidden" / ".data").mkdir()  # a hidden folder of expected values: keyed
    (course / "hidden" / ".data" / "expected.npy").write_bytes(b"1")
    assert key() != with_data
    with_data = key()
    (course / "hidden" / ".data" / "expected.npy").write_bytes(b"2")
    assert key() != with_data
    with_data = key()
    for unread in (".git", ".ipynb_checkpoints", "__pycache__", ".pytest_cache", ".venv", "env"):
        (course / "hidden" / unread).mkdir()  # no judge reads these (env: a venv, by its file)
        (course / "hidden" / unread / "x").write_text("changed at every commit, or every run")
    (course / "hidden" / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert key() == with_data
    # a large folder no judge reads spends none of the files keyed: a data file after it
    # is still read (a .venv of 5,001 files took every one, and a changed expected value
    # then regraded no one)
    monkeypatch.setattr(grading, "_KEYED_FILES", 20)
    for k in range(30):
        (course / "hidden" / ".venv" / f"f{k}").write_text("")
    (course / "hidden" / "zdata").mkdir()  # walked after .venv
    (course / "hidden" / "zdata" / "expected.json").write_text("1")
    before = key()
    (course / "hidden" / "zdata" / "expected.json").write_text("2")
    assert key() != before
    monkeypatch.undo()
    monkeypatch.setenv("LABLIB_FAST", "0" if os.environ.get("LABLIB_FAST") == "1" else "1")
    assert key() != with_data
    monkeypatch.undo()
    package = tmp_path / "package"
    shutil.copytree(grading.PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(grading, "PACKAGE_DIR", package)
    copied = key()
    positional = package / "layers" / "positional.py"
    positional.write_text(positional.read_text().replace("10000", "10001"))
    assert key() != copied
    monkeypatch.setattr(grading, "_versions", lambda: "numpy=0.0")
    assert key() != copied
    versions = key()
    real_version = grading.importlib.metadata.version
    monkeypatch.setattr(grading, "_versions", real_versions)
    monkeypatch.setattr(
        grading.importlib.metadata,
        "version",
        lambda name: "0.1" if name == "scikit-learn" else real_version(name),
    )
    assert key() != versions, "scikit-learn computes the lab's macro-F1 references"
    sandboxed, possible = key(), grading.sandbox_possible()
    monkeypatch.setattr(grading, "sandbox_possible", lambda: not possible)
    assert key() != sandboxed, "a run in the sandbox and one without are not the same run"


def test_a_run_stopped_before_the_students_code_is_not_cached(tmp_path):
    """A run whose process did not start or whose lab set-up cells failed (a data folder
    not reachable, a loaded machine) says so and is graded again next time, never kept
    as the student's crash."""
    from lablib.grading import grade as grading
    from lablib.grading.judge import judge_submission
    from lablib.grading.labspec.registry import load_spec
    from lablib.grading.results import Kind
    from lablib.grading.run import Problem, RunOutcome
    from lablib.labs import find_lab

    spec = load_spec(find_lab(str(FIXTURE_LAB)), [str(FIXTURE_HIDDEN)])
    cache = grading._Cache(tmp_path, "fingerprint")
    for where, kept in (("set-up", False), ("startup", False), ("graded cell softmax", True)):
        outcome = RunOutcome(problems=[Problem(Kind.CRASHED, where)])
        result = judge_submission(spec, "alice", str(tmp_path / "a.ipynb"), {}, outcome)
        cache.put(where, result)
        assert (cache.get("alice", tmp_path / "a.ipynb", where) is not None) == kept, where
        said = [n for n in result.notes if "before the submission's code ran" in n]
        assert bool(said) != kept, result.notes


def test_a_kept_row_keeps_its_name_and_a_newcomer_takes_the_next(tmp_path):
    """The people's grades of written answers are kept by row name: a second section's
    erin graded into the gradebook is erin-2, and the kept erin (whose answer a grader
    scored) stays erin; a newer submission of the same LMS student that replaces their
    row takes its name back."""
    from lablib.grading.grade import _merged, _replaced
    from lablib.grading.results import PieceScore, Status, SubmissionResult

    def row(name, path, user=None):
        path = tmp_path / path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
        r = SubmissionResult(name, str(path), Status(), 1.0, 2.0, {"f": PieceScore(1.0, 2.0)}, [])
        r.identity = {"lms": {"lms": "canvas", "user_id": user}} if user else {}
        return r

    kept = row("erin", "sec1/erin/lab.ipynb")
    newcomer = row("erin", "sec2/erin/lab.ipynb")
    merged = _merged([kept], [newcomer])
    assert {r.submission: r.path for r in merged} == {
        "erin": str(tmp_path / "sec1/erin/lab.ipynb"),
        "erin-2": str(tmp_path / "sec2/erin/lab.ipynb"),
    }
    old = row("smithalice", "canvas/smithalice_1_900_lab.ipynb", user="1")
    new = row("smithalice", "canvas/smithalice_LATE_1_901_lab.ipynb", user="1")
    suffixed = {}
    merged = _merged([old], [new], suffixed)
    with pytest.warns(UserWarning, match="replaced by the newer submission"):
        rows = _replaced(merged, {id(new)}, suffixed)
    assert [(r.submission, r.path) for r in rows] == [("smithalice", new.path)]


def test_a_notebook_graded_again_is_one_row(tmp_path):
    """A gradebook written while a link to a classmate's notebook was graded as a
    submission of its own has two rows on one notebook: graded again, the notebook's new
    result goes to the row of its name (its owner's, whose written grades are kept by
    name), and the link's row is dropped with a warning, never kept with the grade."""
    from lablib.grading.grade import SubmissionRemoved, _merged
    from lablib.grading.results import PieceScore, Status, SubmissionResult

    path = tmp_path / "repos" / "alice" / "lab.ipynb"
    path.parent.mkdir(parents=True)
    path.write_text("{}")

    def row(name, score):
        return SubmissionResult(
            name, str(path), Status(), score, 2.0, {"f": PieceScore(score, 2.0)}, []
        )

    for previous in (
        [row("aaron", 2.0), row("alice", 2.0)],
        [row("alice", 2.0), row("aaron", 2.0)],
    ):
        new = row("alice", 1.0)
        with pytest.warns(SubmissionRemoved, match="aaron was in the gradebook for .* graded once"):
            merged = _merged(previous, [new])
        assert [(r.submission, r.score) for r in merged] == [("alice", 1.0)]


def test_a_kept_row_goes_to_one_notebook_graded_again(tmp_path):
    """Both the notebook a row was graded on and the path it was graded by (a link that
    leads to a new download now) graded in one run: the row goes to one of them (the
    notebook it was graded on, by its name), the other is a row of its own; nothing is
    taken twice."""
    from lablib.grading.grade import _merged
    from lablib.grading.results import PieceScore, Status, SubmissionResult

    for download in ("download-1", "download-2"):
        (tmp_path / download / "alice").mkdir(parents=True)
        (tmp_path / download / "alice" / "lab.ipynb").write_text("{}")
    os.symlink("download-2", tmp_path / "latest")

    def row(name, path, file):
        r = SubmissionResult(name, str(path), Status(), 1.0, 2.0, {"f": PieceScore(1.0, 2.0)}, [])
        r.identity = {"file": str(file)}
        return r

    first = tmp_path / "download-1" / "alice" / "lab.ipynb"
    old = row("alice", tmp_path / "latest" / "alice" / "lab.ipynb", first)
    direct = row("alice", first, first)
    through = row(
        "alice",
        tmp_path / "latest" / "alice" / "lab.ipynb",
        tmp_path / "download-2" / "alice" / "lab.ipynb",
    )
    merged = _merged([old], [direct, through])
    assert sorted(r.submission for r in merged) == ["alice", "alice-2"]
    assert next(r for r in merged if r.submission == "alice") is direct


def test_a_link_to_a_classmates_notebook_takes_nothing_from_them(tmp_path, fixture_lab):
    """The red-team case end to end: graded, then regraded after aaron's repository
    links its notebook to alice's. Aaron's link is not graded (listed as skipped), alice
    keeps her row and its name (her written grades are kept by name), and aaron's row
    keeps the result of the notebook it was graded on (its own): no row scores alice's
    work for aaron, whatever is regraded."""
    from lablib.grading.grade import grade

    repos, out = tmp_path / "repos", tmp_path / "out"
    (repos / "alice").mkdir(parents=True)
    (repos / "aaron").mkdir()
    shutil.copy(FIXTURE_SOLUTION, repos / "alice" / "lab0.ipynb")
    blank = nbformat.read(FIXTURE_SOLUTION, as_version=4)
    for cell in blank.cells:
        if cell.cell_type == "code" and "def " in cell.source:
            cell.source = "raise NotImplementedError"
    nbformat.write(blank, repos / "aaron" / "lab0.ipynb")
    options = dict(lab_notebook=FIXTURE_SOLUTION, jobs=1, timeout=20, progress=False)
    first = {r.submission: r.score for r in grade(fixture_lab, [repos], out, **options)}
    assert first["alice"] > first["aaron"]
    os.unlink(repos / "aaron" / "lab0.ipynb")
    os.symlink("../alice/lab0.ipynb", repos / "aaron" / "lab0.ipynb")
    # alice's folder regraded alone (its row is named lab0 there): aaron's row, whose
    # path now leads to her notebook, never takes her result, whatever the rows' order
    alone = grade(fixture_lab, [repos / "alice"], out, **options)
    assert {r.submission: r.score for r in alone} == first
    with pytest.warns(UserWarning) as caught:
        again = grade(fixture_lab, [repos], out, **options)
    said = [str(w.message) for w in caught]
    assert any("aaron/lab0.ipynb is not graded: a symbolic link inside" in m for m in said), said
    assert {r.submission: r.score for r in again} == first
    book = json.loads((out / "grades.json").read_text())
    assert {e["submission"]: e["path"] for e in book["submissions"]}["alice"] == str(
        repos / "alice" / "lab0.ipynb"
    )
    assert any(s["path"].endswith("aaron/lab0.ipynb") for s in book["skipped"])


def test_a_folder_turned_into_a_link_takes_no_row_at_any_regrade(tmp_path, fixture_lab):
    """The second review's regrades: aaron was graded on his own ``sub/lab0.ipynb``, then
    made ``sub`` a link to alice's folder. Regrading alice's folder through another path
    to the same place (an alias of a folder above, where her row's path as written no
    longer matches and the new row's name is the notebook's), alone, or the class:
    alice keeps her row, its name and her result; aaron's row keeps the result of the
    notebook it was graded on (its own), never hers."""
    from lablib.grading.grade import grade

    repos, out = tmp_path / "repos", tmp_path / "out"
    (repos / "alice").mkdir(parents=True)
    (repos / "aaron" / "sub").mkdir(parents=True)
    shutil.copy(FIXTURE_SOLUTION, repos / "alice" / "lab0.ipynb")
    blank = nbformat.read(FIXTURE_SOLUTION, as_version=4)
    for cell in blank.cells:
        if cell.cell_type == "code" and "def " in cell.source:
            cell.source = "raise NotImplementedError"
    nbformat.write(blank, repos / "aaron" / "sub" / "lab0.ipynb")
    options = dict(
        lab_notebook=FIXTURE_SOLUTION, jobs=1, timeout=20, progress=False, layout="plain"
    )
    first = {r.submission: r.score for r in grade(fixture_lab, [repos], out, **options)}
    assert first["alice"] > first["aaron"]
    shutil.rmtree(repos / "aaron" / "sub")
    os.symlink("../alice", repos / "aaron" / "sub")
    os.symlink(tmp_path, tmp_path / "alias")
    import warnings

    said = []
    for given in (tmp_path / "alias" / "repos" / "alice", repos / "alice", repos):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = grade(fixture_lab, [given], out, **options)
        said.append(" ".join(str(w.message) for w in caught))
        assert {r.submission: r.score for r in rows} == first, (given, said)
        book = json.loads((out / "grades.json").read_text())
        assert sorted(e["submission"] for e in book["submissions"]) == ["aaron", "alice"]
    assert "sub is not graded: a symbolic link inside a student's folder" in said[2], said


def test_a_folder_given_through_a_link_to_a_new_download_keeps_its_rows(tmp_path, fixture_lab):
    """An honest regrade: ``latest -> download-1`` graded, then ``latest`` pointed at the
    new download and graded again by the same path: each row takes its student's new
    result (two rows, not alice, bob, alice-2 and bob-2 with the written grades left on
    the stale ones), and keeps the notebook it was graded on now."""
    from lablib.grading.grade import grade

    for download in ("download-1", "download-2"):
        for student in ("alice", "bob"):
            (tmp_path / download / student).mkdir(parents=True)
            shutil.copy(FIXTURE_SOLUTION, tmp_path / download / student / "lab0.ipynb")
    latest, out = tmp_path / "latest", tmp_path / "out"
    os.symlink("download-1", latest)
    options = dict(
        lab_notebook=FIXTURE_SOLUTION, jobs=1, timeout=20, progress=False, layout="plain"
    )
    grade(fixture_lab, [latest], out, **options)
    os.unlink(latest)
    os.symlink("download-2", latest)
    grade(fixture_lab, [latest], out, **options)
    book = json.loads((out / "grades.json").read_text())
    assert {e["submission"]: e["identity"]["file"] for e in book["submissions"]} == {
        name: str((tmp_path / "download-2" / name / "lab0.ipynb").resolve())
        for name in ("alice", "bob")
    }


def test_a_kept_row_is_never_given_the_notebook_its_path_leads_to_now(tmp_path, fixture_lab):
    """Resolving a kept row again (a roster given later, `lablib report --roster`) keeps
    the notebook it was graded on; a row of an older gradebook, which has none, gets
    none (what its path leads to now may be a link its student made since, to a
    classmate's notebook, which would make the two rows one notebook's)."""
    from lablib.grading.grade import _again
    from lablib.grading.results import PieceScore, Status, SubmissionResult

    (tmp_path / "alice").mkdir()
    shutil.copy(FIXTURE_SOLUTION, tmp_path / "alice" / "lab0.ipynb")
    (tmp_path / "aaron").mkdir()
    os.symlink("../alice", tmp_path / "aaron" / "sub")
    path = str(tmp_path / "aaron" / "sub" / "lab0.ipynb")
    row = SubmissionResult("aaron", path, Status(), 0.0, 2.0, {"f": PieceScore(0.0, 2.0)}, [])
    row.identity = {"where": "aaron/sub/lab0.ipynb", "folder": "aaron"}
    assert "file" not in _again(row, None, None, fixture_lab)
    row.identity["file"] = str(tmp_path / "aaron-then" / "lab0.ipynb")
    assert _again(row, None, None, fixture_lab)["file"] == row.identity["file"]


def test_two_graders_into_one_folder_keep_both_rows(tmp_path):
    """Two writers of one output folder: while another command holds the writers' lock
    (and writes carol's row), a `lablib grade` of bob grades, then waits, and writes
    bob's row into the gradebook as it is then (alice, carol, bob). Without the lock it
    wrote the gradebook it had read while the other held it, and the other's write then
    dropped bob (or bob's dropped carol)."""
    import threading

    from lablib.grading.grade import grade
    from lablib.grading.gradebook import GradebookFolder

    def notebook(name):  # each with its own graded code: its own run and cache entry
        nb = nbformat.read(FIXTURE_SOLUTION, as_version=4)
        code = next(c for c in nb.cells if c.cell_type == "code" and "def " in c.source)
        code.source += f"\n# {name}\n"
        path = tmp_path / "subs" / name / "lab0.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
        return path

    settings = dict(
        hidden_dirs=[str(FIXTURE_HIDDEN)],
        lab_notebook=str(FIXTURE_SOLUTION),
        isolate=False,
        progress=False,
        jobs=1,
    )
    out, other = tmp_path / "out", tmp_path / "other"
    grade(str(FIXTURE_LAB), [notebook("alice")], out, **settings)
    shutil.copytree(out, other)
    grade(str(FIXTURE_LAB), [notebook("carol")], other, **settings)  # the other writer's work
    bob = notebook("bob")
    before = (out / "grades.json").read_bytes()
    cached = set((out / ".cache").glob("*.json"))
    with GradebookFolder(out).writing():
        writer = threading.Thread(
            target=grade, args=(str(FIXTURE_LAB), [bob], out), kwargs=settings
        )
        writer.start()
        deadline = time.monotonic() + 120
        while set((out / ".cache").glob("*.json")) == cached:
            # not serial: a hang's guard; the whole test takes about 5 s in CI's parallel pass
            assert time.monotonic() < deadline, "bob's run never ended"
            time.sleep(0.1)  # bob's run is done (cached) when its result file appears
        time.sleep(1.0)
        assert writer.is_alive() and (out / "grades.json").read_bytes() == before
        shutil.copy(other / "grades.json", out / "grades.json")  # the other writer's write
        for page in (other / "feedback").glob("*"):
            shutil.copy(page, out / "feedback" / page.name)
    writer.join(timeout=120)
    entries = json.loads((out / "grades.json").read_text())["submissions"]
    owners = {pathlib.Path(e["path"]).parent.name for e in entries}
    assert owners == {"alice", "carol", "bob"}, owners
    feedback = {p.stem for p in (out / "feedback").glob("*.md")}
    assert feedback == {e["submission"] for e in entries}


def test_the_cache_key_frames_each_cell_and_the_mask_follows_links(tmp_path):
    """One graded cell holding the text that separated two cells in the key took a
    classmate's key (and poisoned their cached grade); a hidden tests' file that is a link
    into an open folder left that folder unmasked (and unchecked without a private root)."""
    import types

    from lablib.grading import grade as grading
    from lablib.grading.labspec.registry import load_spec
    from lablib.labs import find_lab

    cache = grading._Cache(tmp_path, "fingerprint")

    def cells(**sources):
        return {piece: types.SimpleNamespace(source=text) for piece, text in sources.items()}

    victim = cells(normalize="A", softmax="B")
    forged = cells(normalize="A\0cell\0softmax\0B")
    assert cache.key(victim, []) != cache.key(forged, [])
    assert cache.key(cells(a="x"), ["n"]) != cache.key(cells(a="x\0note\0n"), [])

    real = tmp_path / "tests_real"
    shutil.copytree(FIXTURE_HIDDEN, real)
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "lab0_fixture.py").symlink_to(real / "lab0_fixture.py")
    spec = load_spec(find_lab(str(FIXTURE_LAB)), [str(hidden)])
    masked = grading._masked_paths(spec, [str(hidden)], tmp_path / "out", [])
    assert str(real) in masked and str(hidden) in masked, masked


def test_a_newer_submission_never_takes_the_kept_worksheets_time(tmp_path, capsys):
    """Moodle regrades the way the guide shows them (a new download, no new worksheet):
    the kept worksheet's time dates the notebooks it was given with, not a resubmission.
    Ann's new file (another folder), Bo's file unzipped over his old one and Cara's
    notebook after a zip each took the kept time ("On time" on 1 June: Ann's 3-day-late
    resubmission scored 8, not 5.6); now their lateness is not computed (the same command
    run again too), the export refuses it until the new worksheet is given, and with it
    the penalty counts. An unchanged notebook regraded keeps its time."""
    from lablib.grading.export import export
    from lablib.grading.gradebook.roster import Roster

    folder = "assignsubmission_file_"
    header = "Identifier,Full name,Email address,Status,Grade,Maximum Grade,"
    header += "Grade can be changed,Last modified (submission),Last modified (grade),Feedback\n"
    june1 = "Monday, 1 June 2026, 10:00 AM"

    def worksheet(path, ann_time):
        rows = [
            ("201", "Ann Lee", ann_time),
            ("202", "Bo Chan", june1),
            ("203", "Cara Diaz", june1),
        ]
        path.write_text(
            header
            + "".join(
                f'Participant {pid},{name},{pid}@u.edu,Submitted,,8.00,Yes,"{when}",-,\n'
                for pid, name, when in rows
            )
        )

    def hand_in(subs, who, name="lab0.ipynb"):
        (subs / f"{who}_{folder}").mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURE_SOLUTION, subs / f"{who}_{folder}" / name)

    first, second = tmp_path / "subs", tmp_path / "subs2"
    hand_in(first, "Ann Lee_201")
    hand_in(first, "Bo Chan_202")
    hand_in(first, "Cara Diaz_203", "lab0.zip")  # not a notebook: skipped
    hand_in(second, "Ann Lee_201")
    hand_in(second, "Cara Diaz_203")
    ann = second / f"Ann Lee_201_{folder}" / "lab0.ipynb"  # changed since: a resubmission
    ann.write_text(ann.read_text().replace("Fixture lab", "Fixture lab (resubmitted)"))
    worksheet(tmp_path / "w1.csv", june1)
    worksheet(tmp_path / "w2.csv", "Friday, 5 June 2026, 10:00 AM")
    out = tmp_path / "out"
    late = ["--due", "2026-06-02T23:59", "--late-per-day", "10%"]
    assert (
        main(_fixture_grade(first, "-o", str(out), "--roster", str(tmp_path / "w1.csv"), *late))
        == 0
    )
    assert main(_fixture_grade(first, "-o", str(out))) == 0  # unchanged: the times hold
    assert [_rows(out)[n]["late_penalty"] for n in ("Ann Lee", "Bo Chan")] == ["0", "0"]
    # Bo's new notebook unzipped over his old one (same path, other content)
    bo = first / f"Bo Chan_202_{folder}" / "lab0.ipynb"
    bo.write_text(bo.read_text().replace("Fixture lab", "Fixture lab (resubmitted)"))
    for _ in range(2):  # the new download, then the same command again
        assert main(_fixture_grade(second, "-o", str(out))) == 0
        assert main(_fixture_grade(bo, "-o", str(out))) == 0  # one resubmission by its path
        rows = _rows(out)
        for name in ("Ann Lee", "Bo Chan", "Cara Diaz"):
            assert rows[name]["late_penalty"] == "", (name, rows[name])
            assert (
                "comes from the roster kept from an earlier grading run" in rows[name]["lateness"]
            )
            assert "--roster" in rows[name]["lateness"], rows[name]
    roster = Roster.load(tmp_path / "w2.csv")
    with pytest.raises(Exception, match="--allow-unknown-lateness"):
        export("moodle", [out], roster, tmp_path / "m.csv")
    # graded again with the new worksheet: Ann's penalty (3 started days, 10% each) counts
    assert main(_fixture_grade(second, "-o", str(out), "--roster", str(tmp_path / "w2.csv"))) == 0
    rows = _rows(out)
    assert float(rows["Ann Lee"]["late_penalty"]) == pytest.approx(2.4), rows["Ann Lee"]
    assert [rows[n]["late_penalty"] for n in ("Bo Chan", "Cara Diaz")] == ["0", "0"]
    assert main(_fixture_grade(second, "-o", str(out))) == 0  # and they hold after
    assert float(_rows(out)["Ann Lee"]["late_penalty"]) == pytest.approx(2.4)
    capsys.readouterr()


def test_a_regrade_without_times_keeps_the_times_files_times(tmp_path):
    """A class graded with --roster --times and a late policy, then graded again without
    --times (a notebook added, one student regraded with --force, the roster given again):
    each row keeps the time the times file gave it, and its source, so the late student's
    penalty stays (every time was dropped: full marks, exported without a word). A
    resubmission (other bytes) is not dated by the earlier time: its lateness is not
    computed until the new time is given."""
    from lablib.grading.export import export

    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for name in ("ann", "bo"):
        shutil.copy(FIXTURE_SOLUTION, subs / f"{name}.ipynb")
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "student_id,name,email\nann,Ann Lee,ann@u.edu\nbo,Bo Chan,bo@u.edu\n"
        "cara,Cara Diaz,cara@u.edu\n"
    )
    times = tmp_path / "times.csv"
    times.write_text("student,lab,submitted_at\nann,,2026-06-04T10:00+00:00\n")
    late = ["--due", "2026-06-02T23:59+00:00", "--late-per-day", "10%"]
    grade = _fixture_grade(subs, "--no-sandbox", "-o", str(out))
    assert main([*grade, "--roster", str(roster), "--times", str(times), *late]) == 0
    penalty = _rows(out)["ann"]["late_penalty"]
    assert float(penalty) > 0

    def ann():
        row = _rows(out)["ann"]
        stored = json.loads((out / "grades.json").read_text())
        (kept,) = [r for r in stored["submissions"] if r["submission"] == "ann"]
        return row, kept["identity"]

    shutil.copy(FIXTURE_SOLUTION, subs / "cara.ipynb")  # a late-arriving notebook
    for again in ([], ["--force"], ["--roster", str(roster)]):
        assert main([*grade, *again]) == 0, again
        row, identity = ann()
        assert row["submitted_at"] == "2026-06-04T10:00+00:00", (again, row)
        assert row["late_penalty"] == penalty, (again, row)
        assert identity["time_source"].startswith("the times file (times.csv"), identity
    # Ann resubmits (other bytes at the same path): the earlier time does not date it
    path = subs / "ann.ipynb"
    path.write_text(path.read_text().replace("Fixture lab", "Fixture lab (resubmitted)"))
    for _ in range(2):  # and the same command again
        assert main(grade) == 0
        row, identity = ann()
        assert row["late_penalty"] == "" and row["submitted_at"] == "", row
        assert "given for another version of their notebook" in row["lateness"], row
        assert "--times" in row["lateness"], row
    with pytest.raises(Exception, match="--allow-unknown-lateness"):
        export("moodle", [out], None, tmp_path / "m.csv")
    times.write_text("student,lab,submitted_at\nann,,2026-06-05T10:00+00:00\n")
    assert main([*grade, "--times", str(times)]) == 0
    assert ann()[0]["submitted_at"] == "2026-06-05T10:00+00:00"
    assert float(ann()[0]["late_penalty"]) > float(penalty)


def test_a_plain_students_notebook_regraded_by_its_path_keeps_its_row_without_a_roster(
    tmp_path,
):
    """Students' folders (``--layout plain``), no roster, a times file: a resubmission
    graded by its path, with a new times file naming the row, keeps the row's student
    and gets that time (it took the file's name, ``lab``, and no time: full marks; a
    second student's regrade by path then merged the two under ``lab``)."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    for name in ("alice", "bob", "carl"):
        (subs / name).mkdir(parents=True)
        shutil.copy(FIXTURE_SOLUTION, subs / name / "lab.ipynb")
    first, later = tmp_path / "times1.csv", tmp_path / "times2.csv"
    first.write_text(
        "student,lab,submitted_at\n"
        + "".join(f"{n},,2026-06-01T10:00+00:00\n" for n in ("alice", "bob", "carl"))
    )
    later.write_text("student,lab,submitted_at\ncarl,,2026-06-08T10:00+00:00\n")
    late = ["--due", "2026-06-02T23:59+00:00", "--late-per-day", "10%", "--late-cap", "50%"]
    grade = [*_fixture_grade(subs, "--no-sandbox", "-o", str(out)), "--layout", "plain"]
    assert main([*grade, "--times", str(first), *late]) == 0
    assert {n: r["late_penalty"] for n, r in _rows(out).items()} == {
        "alice": "0",
        "bob": "0",
        "carl": "0",
    }
    carl = subs / "carl" / "lab.ipynb"
    carl.write_text(carl.read_text().replace("Fixture lab", "Fixture lab (resubmitted)"))
    by_path = _fixture_grade(carl, "--no-sandbox", "-o", str(out))
    assert main([*by_path, "--times", str(later)]) == 0
    assert (
        main(
            [*_fixture_grade(subs / "bob" / "lab.ipynb", "--no-sandbox", "-o", str(out)), "--force"]
        )
        == 0
    )
    rows = _rows(out)
    assert sorted(rows) == ["alice", "bob", "carl"], rows
    assert rows["carl"]["submitted_at"] == "2026-06-08T10:00+00:00", rows["carl"]
    assert float(rows["carl"]["late_penalty"]) > 0, rows["carl"]
    stored = json.loads((out / "grades.json").read_text())
    keys = {r["submission"]: r["identity"]["key"] for r in stored["submissions"]}
    assert keys == {n: n for n in ("alice", "bob", "carl")}, keys


def _kept(out) -> tuple:
    """What a regrade of ``out`` would keep: (late policy, layout, roster's students)."""
    folder = GradebookFolder(out)
    roster = folder.roster()
    policy = folder.late_policy()
    return (
        policy.to_dict() if policy else None,
        folder.layout(),
        [s.student_id for s in roster.students] if roster else None,
    )


def _alice(tmp_path) -> tuple[list[str], pathlib.Path]:
    """Alice's notebook in her folder, and `lablib grade` of it into ``out`` (its args)."""
    subs = tmp_path / "subs"
    (subs / "alice").mkdir(parents=True)
    shutil.copy(FIXTURE_SOLUTION, subs / "alice" / "lab0.ipynb")
    out = tmp_path / "out"
    return _fixture_grade(subs, "--no-sandbox", "-o", str(out)), out


def _rosters(tmp_path) -> tuple[pathlib.Path, pathlib.Path]:
    """Two rosters that give alice's folder to two different students (S1, then S9)."""
    old_roster, new_roster = tmp_path / "old.csv", tmp_path / "new.csv"
    old_roster.write_text("student_id,name,submission\nS1,Alice A,alice\n", encoding="utf-8")
    new_roster.write_text("student_id,name,submission\nS9,Alice B,alice\n", encoding="utf-8")
    return old_roster, new_roster


def _meanwhile(monkeypatch, then) -> None:
    """``then()`` runs after a grading run has graded, before it takes the writers' lock:
    another command writing the folder meanwhile."""
    from lablib.grading import grade as grading

    graded = grading._in_parallel

    def meanwhile(*a, **k):
        rows = graded(*a, **k)
        then()
        return rows

    monkeypatch.setattr(grading, "_in_parallel", meanwhile)


def test_a_run_stopped_while_writing_leaves_the_gradebook_whole(tmp_path, monkeypatch, capsys):
    """`lablib grade --fresh` with a new late policy, layout and roster, stopped (Ctrl-C)
    after it wrote the roster's copy but before grades.json: the folder keeps the old
    gradebook with the old policy, layout and roster, all three, since they live in
    grades.json with the rows; the next run finishes the change and removes what the
    stopped one left. Stopped after grades.json, before the tidying: the new state."""
    from lablib.grading.gradebook import store

    args, out = _alice(tmp_path)
    old_roster, new_roster = _rosters(tmp_path)
    first = [
        "--roster",
        str(old_roster),
        "--due",
        "2026-11-20T23:59+00:00",
        "--late-per-day",
        "10%",
    ]
    assert main(args + first) == 0
    before = _kept(out)
    assert before[1:] == (None, ["S1"]) and before[0]["deduction"] == "10%"
    gradebook = (out / "grades.json").read_bytes()
    write = store.atomic_write

    def stopped(path, *a, **k):
        if pathlib.Path(path).name == "grades.json":
            raise KeyboardInterrupt
        return write(path, *a, **k)

    monkeypatch.setattr(store, "atomic_write", stopped)
    fresh = ["--fresh", "--layout", "plain", "--roster", str(new_roster)]
    assert main(args + fresh + ["--due", "2026-11-27T23:59+00:00"]) == 130
    said = capsys.readouterr().err
    assert "interrupted while writing the gradebook" in said and "again to go on" in said
    assert (out / "grades.json").read_bytes() == gradebook
    assert _kept(out) == before, "the old gradebook with its own policy, layout and roster"
    assert len(list(out.glob(".roster-*.csv"))) == 2  # the stopped run's copy, named by nothing
    monkeypatch.setattr(store, "atomic_write", write)
    monkeypatch.setattr(store.GradebookFolder, "_tidy", lambda self, kept, before: None)
    assert main(args + fresh) == 0  # stopped after grades.json, before the tidying
    assert _kept(out) == (None, "plain", ["S9"])
    monkeypatch.undo()
    assert main(args) == 0  # a regrade keeps them, and tidies
    assert _kept(out) == (None, "plain", ["S9"])
    assert [p.name for p in out.glob(".roster-*.csv")] == [
        json.loads((out / "grades.json").read_text())["kept"]["roster"]["file"]
    ]
    assert main(args + ["--fresh"]) == 0  # a new gradebook: nothing kept
    assert _kept(out) == (None, None, None) and not list(out.glob(".roster-*.csv"))


def test_a_regrade_refuses_a_roster_changed_while_it_graded(tmp_path, monkeypatch, capsys):
    """A regrade takes the kept roster when it starts; `lablib report --roster` writing the
    folder meanwhile changes it. The regrade's rows were resolved with the old one, so it
    writes nothing and says to run it again (the roster kept is the new one)."""
    from lablib.grading import grade as grading
    from lablib.grading.gradebook.roster import Roster

    args, out = _alice(tmp_path)
    old_roster, new_roster = _rosters(tmp_path)
    assert main(args + ["--roster", str(old_roster)]) == 0
    _meanwhile(
        monkeypatch,
        lambda: grading.rewrite_reports(out, lab=FIXTURE_LAB, roster=Roster.load(new_roster)),
    )
    capsys.readouterr()
    assert main(args) != 0
    said = capsys.readouterr().err
    assert "The roster kept in" in said and "changed while this run graded" in said, said
    assert _kept(out)[2] == ["S9"], "the report's roster, not this run's"
    assert (
        json.loads((out / "grades.json").read_text())["submissions"][0]["student"]["student_id"]
        == "S9"
    )


def test_a_regrade_refuses_a_layout_changed_while_it_graded(tmp_path, monkeypatch, capsys):
    """A regrade reads new folders by the layout kept when it starts; another run that
    keeps --layout plain meanwhile would leave rows read by LMS shapes under "plain"."""
    args, out = _alice(tmp_path)
    assert main(args + ["--layout", "auto"]) == 0

    def plain():  # another run commits --layout plain
        data = json.loads((out / "grades.json").read_text(encoding="utf-8"))
        data["kept"]["layout"] = "plain"
        (out / "grades.json").write_text(json.dumps(data), encoding="utf-8")

    _meanwhile(monkeypatch, plain)
    capsys.readouterr()
    assert main(args) != 0
    said = capsys.readouterr().err
    assert "The layout kept in" in said and "changed while this run graded" in said, said
    assert (
        json.loads((out / "grades.json").read_text(encoding="utf-8"))["kept"]["layout"] == "plain"
    )


def test_a_notebook_past_a_time_limit_beside_others_is_graded_again_alone(tmp_path, monkeypatch):
    """A time limit is wall time: on a machine busy with the class's other notebooks
    (``--jobs``), a notebook that fits its limits alone can run past them. Such a notebook
    is graded again alone after the rest, and that run stands, noted; only a run alone is
    cached. Here bob's run beside others is made to time out (a limit far too short) and
    his run alone fits; carol's times out both times and keeps her timeout; dave's run
    beside others is the grader's error (as the kernel's kill when the machine runs out
    of memory makes it), graded again alone."""
    from lablib.grading import grade as grading
    from lablib.grading.judge.submission import NOT_CACHED
    from lablib.grading.results import Kind, Status

    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for name in ("alice", "bob", "carol", "dave", "erin"):  # each its own code: no shared run
        nb = nbformat.read(FIXTURE_SOLUTION, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code" and "def " in cell.source:
                cell.source += f"\n# {name}'s"
        nbformat.write(nb, subs / f"{name}.ipynb")
    real, calls = grading.grade_one, []

    def grade_one(spec, name, path, setup, **kw):
        calls.append((name, kw["alone"]))
        if name == "carol" or (name == "bob" and not kw["alone"]):
            kw["limits"] = grading.Limits(timeout=0.001)  # as a loaded machine would
        result = real(spec, name, path, setup, **kw)
        if name == "dave" and not kw["alone"]:  # the machine out of memory, say
            result.status = Status.of([Kind.GRADER_ERROR])
        if name == "erin" and not kw["alone"]:  # its start past its limit on a busy machine
            result.status = Status.of([Kind.CRASHED])
            result.notes.append(f"the run stopped before the submission's code ran; {NOT_CACHED}")
        return result

    monkeypatch.setattr(grading, "grade_one", grade_one)
    options = dict(lab_notebook=FIXTURE_SOLUTION, jobs=3, timeout=20, progress=False)
    first = {r.submission: r for r in grading.grade(str(FIXTURE_LAB), [subs], out, **options)}
    assert sorted(calls) == sorted(
        [("alice", False), ("bob", False), ("bob", True), ("carol", False), ("carol", True)]
        + [("dave", False), ("dave", True), ("erin", False), ("erin", True)]
    )
    again = grading.AGAIN_ALONE.format(what="ran past a time limit", jobs=3)
    assert first["bob"].status.ok and first["bob"].score == first["alice"].score
    assert again in first["bob"].notes and again not in first["alice"].notes
    assert first["carol"].status.has(Kind.TIMEOUT) and again in first["carol"].notes
    assert first["dave"].status.ok and first["dave"].notes[-1] == grading.AGAIN_ALONE.format(
        what="failed for the grader's own reasons (see its diagnostics)", jobs=3
    )
    feedback = (out / "feedback" / "bob.md").read_text()
    assert "graded again alone" in feedback
    calls.clear()  # graded again: bob's and carol's runs alone come from the cache
    second = {r.submission: r for r in grading.grade(str(FIXTURE_LAB), [subs], out, **options)}
    assert first["erin"].status.ok and any("graded again alone" in n for n in first["erin"].notes)
    assert all(r.cached for r in second.values()) and len(calls) == 5
    assert second["bob"].status.ok and second["carol"].status.has(Kind.TIMEOUT)


@pytest.mark.serial  # timed: run alone (.ci/run's serial pass)
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_an_interrupted_grading_run_stops_at_once_and_leaves_nothing_running(tmp_path, sig):
    """Ctrl-C went on grading the whole queue (hours for a class) before it stopped and
    wrote nothing; SIGTERM, a closed ssh session or SIGKILL killed the grader and left the
    students' code running without limits. Each stops now within seconds: no further
    notebook starts, the runs going are ended, nothing is written, and (where the grader
    can still say it) the message says that the notebooks judged before are cached; a
    grader killed outright takes its runs with it (the kernel's parent-death signal)."""
    import psutil

    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for name in ("s1", "s2", "s3"):
        nb = nbformat.read(FIXTURE_SOLUTION, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.source.startswith("# GRADED:"):
                cell.source += f"\nimport time as _t\n_t.sleep(30)  # {name}\n"
                break
        nbformat.write(nb, subs / f"{name}.ipynb")
    command = [sys.executable, "-m", "lablib.cli", *_fixture_grade(subs, "-o", str(out))]
    run = subprocess.Popen(
        [*command, "--jobs", "1", "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as from a terminal: a job started in the background of a script (CI's) has
        # SIGINT ignored, which Python and lablib rightly keep
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline, running = time.monotonic() + 60, False
        while time.monotonic() < deadline and not running:  # the first notebook's code runs
            kids = psutil.Process(run.pid).children(recursive=True)
            running = any("lablib.grading.run.child" in " ".join(_cmdline(k)) for k in kids)
            time.sleep(0.2)
        time.sleep(1)
        mine = {k.pid: k.create_time() for k in psutil.Process(run.pid).children(recursive=True)}
        sent = time.monotonic()
        run.send_signal(getattr(signal, sig))
        _, err = run.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == (-9 if sig == "SIGKILL" else 130), err[-2000:]
    assert took < 15, f"stopped {took:.1f} s after {sig}"
    if sig != "SIGKILL":
        assert "interrupted; nothing was written" in err and "cached" in err
    assert not (out / "grades.json").exists()
    assert running, "the students' code was running when the signal came"
    for _ in range(50):  # the kernel's signals are sent as each parent goes
        left = [p for p in psutil.process_iter() if mine.get(p.pid) == _started(p)]
        if not left:
            break
        time.sleep(0.1)
    said = [(p, _cmdline(p)) for p in left]
    for p in left:  # never left to the next test
        p.kill()
    assert not left, said


def _started(process) -> float | None:
    import psutil

    try:
        return process.create_time()
    except psutil.Error:
        return None


def _cmdline(process) -> list[str]:
    import psutil

    try:
        return process.cmdline()
    except psutil.Error:
        return []


def test_more_memory_asked_than_the_machine_has_is_said_before_grading(
    tmp_path, capsys, monkeypatch
):
    """--jobs times --memory beyond the machine's memory: a run under its own limit can be
    killed when the machine runs out. Said before grading, with the --jobs that fits; a
    grader's environment gets TensorFlow's memory growth, so notebooks sharing a GPU do
    not each take the whole card."""
    import psutil

    from lablib.grading.run.supervisor import _child_env

    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("a", "b"):
        (subs / f"{name}.ipynb").write_text("{}")  # invalid: nothing runs
    total_mb = psutil.virtual_memory().total / 2**20
    memory = str(int(total_mb * 0.75))
    assert main([*_fixture_grade(subs, "-o", str(tmp_path / "out")), "--jobs", "2",
                 "--memory", memory]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "lablib grade: memory: 2 notebooks graded at once, each allowed" in err
    assert "give --jobs 1 or a lower --memory" in err
    assert _child_env("t")["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    # a container's limit (the grader's cgroup) counts as the machine's; said at once
    from lablib.grading import grade as grading
    from lablib.grading.run import cgroups

    monkeypatch.setattr(cgroups, "own_memory_limit", lambda: 2**30)
    options = dict(lab_notebook=FIXTURE_SOLUTION, jobs=2, memory_mb=800, progress=True)
    grading.grade(str(FIXTURE_LAB), [subs], tmp_path / "out2", **options)
    err = capsys.readouterr().err
    assert err.index("memory: 2 notebooks graded at once") < err.index("grading lab0_fixture")
    assert "this machine has 1.0 GB" in err


def test_a_second_interrupt_while_stopping_still_ends_every_run(monkeypatch):
    """A second Ctrl-C while the runs were ending cleared the stop: the runs went on to
    their time limits and the command hung. Now the runs end however many interrupts
    come, and the stop is cleared only once they have; a nohup's ignored SIGHUP is kept."""
    import concurrent.futures
    import threading

    from lablib.cli import _stopped_by_signals
    from lablib.grading import grade as grading
    from lablib.grading.run.supervisor import STOPPING

    ended, started = [], threading.Barrier(3)

    def work(item):
        started.wait(timeout=10)
        if item[0] == "boom":
            raise KeyboardInterrupt
        stopped = STOPPING.wait(timeout=20)  # a run: ends at once when told to stop
        ended.append((item[0], stopped))
        return None

    real = concurrent.futures.ThreadPoolExecutor.shutdown
    second = []

    def shutdown(self, wait=True, **kw):
        if wait and not second:  # the second Ctrl-C lands while waiting for the runs
            second.append(True)
            raise KeyboardInterrupt
        return real(self, wait=wait, **kw)

    monkeypatch.setattr(concurrent.futures.ThreadPoolExecutor, "shutdown", shutdown)
    items = [("a", None), ("b", None), ("boom", None), ("c", None)]
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        grading._in_parallel(None, items, work, 3, False)
    # not serial: a hang's guard; the whole test takes milliseconds in CI's parallel pass
    assert time.monotonic() - began < 10 and second
    assert sorted(ended) == [("a", True), ("b", True)], "c never started; a and b stopped"
    assert not STOPPING.is_set()
    monkeypatch.setattr(signal, "signal", signal.signal)
    kept = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with _stopped_by_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN, "nohup is kept"
    finally:
        signal.signal(signal.SIGHUP, kept)


def test_the_same_bytes_graded_again_keep_their_file_time(tmp_path):
    """--late-from-file-times: a folder copied without its times (cp -r to another
    machine) or a notebook touched, then graded again (--force, or a fix to the tests),
    made every row late, though the bytes were those graded on time. The same bytes keep
    the time kept when they were first graded; changed bytes take their own."""
    from lablib.grading import grade as grading
    from lablib.grading.gradebook.late import LatePolicy, parse_time

    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for name in ("alice", "bob"):
        shutil.copy(FIXTURE_SOLUTION, subs / f"{name}.ipynb")
    due = "2026-11-20T23:59+01:00"
    on_time = parse_time(due).timestamp() - 3600
    for name in ("alice", "bob"):
        os.utime(subs / f"{name}.ipynb", (on_time, on_time))
    policy = LatePolicy.parse(due=due, per_day="2", from_files=True)
    options = dict(lab_notebook=FIXTURE_SOLUTION, jobs=1, timeout=20, progress=False)
    grading.grade(str(FIXTURE_LAB), [subs], out, late_policy=policy, **options)
    os.utime(subs / "alice.ipynb")  # touched: days after the due date
    nb = nbformat.read(subs / "bob.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("changed after the due date"))
    nbformat.write(nb, subs / "bob.ipynb")  # new bytes, written now
    rows = {
        r.submission: r for r in grading.grade(str(FIXTURE_LAB), [subs], out, force=True, **options)
    }
    assert parse_time(rows["alice"].identity["file_time"]).timestamp() == on_time
    assert parse_time(rows["bob"].identity["file_time"]).timestamp() > on_time + 86400
    table = _rows(out)
    assert table["alice"]["late_penalty"] == "0" and float(table["bob"]["late_penalty"]) > 0
    # the class copied elsewhere without its times (cp -r) and graded by its new path:
    # new rows, the same students' same bytes, their first times
    copy = tmp_path / "elsewhere" / "subs"
    shutil.copytree(subs, copy, copy_function=shutil.copy)
    os.utime(copy / "alice.ipynb")
    rows = grading.grade(str(FIXTURE_LAB), [copy], out, **options)
    moved = [r for r in rows if r.path.startswith(str(copy)) and r.identity["key"] == "alice"]
    assert moved and parse_time(moved[0].identity["file_time"]).timestamp() == on_time, [
        (r.submission, r.path, r.identity.get("key"), r.identity.get("file_time")) for r in rows
    ]


def test_a_moved_course_s_row_is_never_moved_onto_a_classmates_notebook(
    tmp_path, monkeypatch, capsys
):
    """The course folder moved, and aaron's folder in it made a link to alice's (the same
    bytes): his row is not found there (it would claim her notebook); hers is."""
    course = tmp_path / "course"
    for name in ("alice", "aaron", "bob"):
        (course / "subs" / name).mkdir(parents=True)
        shutil.copy(FIXTURE_SOLUTION, course / "subs" / name / "lab.ipynb")
    common = ["--lab-notebook", str(FIXTURE_SOLUTION), "--jobs", "1", "--timeout", "20", "--quiet"]
    monkeypatch.chdir(course)
    assert main(["grade", str(FIXTURE_LAB), "subs", "-o", "out", *common]) == 0
    moved = tmp_path / "moved"
    course.rename(moved)
    shutil.rmtree(moved / "subs" / "aaron")
    (moved / "subs" / "aaron").symlink_to("alice")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    bob = str(moved / "subs" / "bob" / "lab.ipynb")
    assert main(["grade", str(FIXTURE_LAB), bob, "-o", str(moved / "out"), *common]) == 0
    assert "aaron was in the gradebook" in capsys.readouterr().err
    rows = json.loads((moved / "out" / "grades.json").read_text())["submissions"]
    files = {r["submission"]: r["identity"]["file"] for r in rows}
    assert sorted(files) == ["alice", "bob"], files
    assert files["alice"] == os.path.realpath(moved / "subs" / "alice" / "lab.ipynb")


def test_a_regrade_from_another_folder_keeps_the_rows_it_does_not_grade(
    tmp_path, monkeypatch, capsys
):
    """Graded from the course folder with relative paths, then one student graded again
    from another working directory (a new terminal, a cron job): every other row was
    dropped as gone (their relative paths tested from the new folder), with their
    feedback, and exported as 0. A row's notebook is the file graded, kept at grading."""
    course = tmp_path / "course"
    (course / "subs").mkdir(parents=True)
    for name in ("alice", "bob"):
        shutil.copy(FIXTURE_SOLUTION, course / "subs" / f"{name}.ipynb")
    common = ["--lab-notebook", str(FIXTURE_SOLUTION), "--jobs", "1", "--timeout", "20", "--quiet"]
    monkeypatch.chdir(course)
    assert main(["grade", str(FIXTURE_LAB), "subs", "-o", "out", *common]) == 0
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    bob = str(course / "subs" / "bob.ipynb")
    assert main(["grade", str(FIXTURE_LAB), bob, "-o", str(course / "out"), *common]) == 0
    assert "removed" not in capsys.readouterr().err
    assert sorted(_rows(course / "out")) == ["alice", "bob"]
    assert (course / "out" / "feedback" / "alice.md").is_file()
    moved = tmp_path / "moved"  # the course folder moved, graded again from its new place
    course.rename(moved)
    monkeypatch.chdir(moved)
    assert main(["grade", str(FIXTURE_LAB), "subs/bob.ipynb", "-o", "out", *common]) == 0
    err = capsys.readouterr().err  # bob's row, graded above by its absolute path, is new
    assert "alice was in the gradebook" not in err, err
    assert sorted(_rows(moved / "out")) == ["alice", "bob"]
    assert "removed" not in err, err  # bob's row found where it moved, graded again
    farther = tmp_path / "farther"  # moved again, graded again from outside it: alice's
    moved.rename(farther)  # row (a relative path, a file graded in the old place) is
    monkeypatch.chdir(tmp_path)  # found from the output folder
    there = str(farther / "subs" / "bob.ipynb")
    assert main(["grade", str(FIXTURE_LAB), there, "-o", str(farther / "out"), *common]) == 0
    err = capsys.readouterr().err
    assert "removed" not in err, err
    rows = json.loads((farther / "out" / "grades.json").read_text())["submissions"]
    assert sorted(r["submission"] for r in rows) == ["alice", "bob"]
    alice = next(r for r in rows if r["submission"] == "alice")
    assert alice["identity"]["file"] == os.path.realpath(farther / "subs" / "alice.ipynb"), alice
    farther.rename(course)
    monkeypatch.chdir(tmp_path)
    os.remove(course / "subs" / "alice.ipynb")  # a notebook really gone is still dropped
    assert main(["grade", str(FIXTURE_LAB), bob, "-o", str(course / "out"), *common]) == 0
    assert "alice was in the gradebook" in capsys.readouterr().err
    assert sorted(_rows(course / "out")) == ["bob"]


def test_a_regrade_of_some_notebooks_with_other_tests_is_refused(tmp_path, capsys):
    """The hidden tests changed (a test re-weighted), then one student graded: the
    gradebook held rows out of two versions of the tests, the export's points possible
    was the larger, and the other students lost points without a word. Such a run is
    refused before grading, nothing written; grading every notebook again (or --fresh)
    is the way, and the same tests as before go on as ever."""
    subs, out, lab = tmp_path / "subs", tmp_path / "out", tmp_path / "lab0_regrade"
    subs.mkdir()
    # the spec and its hidden/ tests, as a lab of another name: a lab's spec is read once
    # per process, and hidden tests of another folder would join the fixture lab's own
    for source in (FIXTURE_LAB / "lab0_fixture.py", FIXTURE_LAB / "hidden" / "lab0_fixture.py"):
        copy = lab / source.relative_to(FIXTURE_LAB).with_name("lab0_regrade.py")
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(source.read_text().replace("lab0_fixture", "lab0_regrade"))
    for name in ("alice", "bob"):
        shutil.copy(FIXTURE_SOLUTION, subs / f"{name}.ipynb")
    tests = ["--tests", str(lab / "hidden")]
    common = ["-o", str(out), "--lab-notebook", str(FIXTURE_SOLUTION), "--jobs", "1",
              "--timeout", "20", "--quiet"]  # fmt: skip
    assert main(["grade", str(lab), str(subs), *tests, *common]) == 0
    shutil.copy(FIXTURE_SOLUTION, subs / "carol.ipynb")
    carol = str(subs / "carol.ipynb")
    assert main(["grade", str(lab), carol, *tests, *common]) == 0
    assert sorted(_rows(out)) == ["alice", "bob", "carol"]  # the same tests: kept
    before = (out / "grades.json").read_bytes()
    hidden = lab / "hidden" / "lab0_regrade.py"
    hidden.write_text(hidden.read_text().replace('"softmax", points=2', '"softmax", points=5'))
    capsys.readouterr()
    assert main(["grade", str(lab), carol, *tests, *common]) == 2
    err = capsys.readouterr().err
    assert "2 row(s) of the gradebook" in err and "('alice', 'bob')" in err, err
    assert "other tests than this run's" in err and "--fresh" in err
    assert "(out of 8 points then; now 5 tests out of " in err, err
    assert (out / "grades.json").read_bytes() == before
    # a gradebook graded before rows kept their tests' version: told by their tests and
    # points (here rows graded when the softmax test was worth 5; this process's spec, read
    # once, is worth 2 as its first reading)
    data = json.loads(before)
    for entry in data["submissions"]:
        entry["identity"].pop("tests", None)
        for t in entry["tests"]:
            if t["id"] == "softmax::large_logits":
                t["max_score"] = 5.0
    (out / "grades.json").write_text(json.dumps(data), encoding="utf-8")
    before = (out / "grades.json").read_bytes()
    assert main(["grade", str(lab), carol, *tests, *common]) == 2
    assert "2 row(s) of the gradebook" in capsys.readouterr().err
    assert (out / "grades.json").read_bytes() == before
    os.remove(subs / "bob.ipynb")  # a notebook gone meanwhile: its row goes, no refusal
    assert main(["grade", str(lab), str(subs), *tests, *common]) == 0
    rows = _rows(out)
    assert sorted(rows) == ["alice", "carol"]  # every notebook graded with one version
    assert len({rows[n]["max_score"] for n in rows}) == 1, rows


def test_the_tests_version_is_the_files_contents_not_where_they_lie(tmp_path):
    """The same spec and hidden tests in other folders (a course folder moved, a venv
    elsewhere) are the same tests: the version hashed the files in the order of their
    paths, so a move could make a gradebook's rows "graded with other tests"."""
    from lablib.grading.grade import tests_version
    from lablib.grading.labspec.model import LabSpec

    spec, hidden = FIXTURE_LAB / "lab0_fixture.py", FIXTURE_LAB / "hidden" / "lab0_fixture.py"
    versions = []
    for first, second in (("a", "z"), ("z", "a")):  # the spec's folder sorts first, then last
        lab = LabSpec("lab0_fixture")
        for folder, source in ((first, spec), (second, hidden)):
            (tmp_path / first / second / folder).mkdir(parents=True, exist_ok=True)
            copy = tmp_path / first / second / folder / f"{source.parent.name}.py"
            shutil.copy(source, copy)
            lab.source_files.append(copy)
        versions.append(tests_version(lab))
    assert versions[0] == versions[1]
    lab = LabSpec("lab0_fixture")
    lab.source_files = [spec]
    assert tests_version(lab) != versions[0]  # the hidden tests' file counts


def test_an_output_folder_holding_the_submissions_hides_no_hand_in(tmp_path, monkeypatch):
    """-o . with the submissions in ./subs: every skipped file lies in the output folder,
    and a student's zip was dropped from the skipped list (the export then said "no
    submission"). Only an output folder inside a submissions folder given is left out."""
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "alice.ipynb")
    (subs / "bob_lab0.zip").write_bytes(b"PK")
    monkeypatch.chdir(tmp_path)
    assert main(["grade", str(FIXTURE_LAB), "subs", "-o", ".", "--lab-notebook",
                 str(FIXTURE_SOLUTION), "--jobs", "1", "--timeout", "20", "--quiet"]) == 0  # fmt: skip
    skipped = json.loads((tmp_path / "grades.json").read_text())["skipped"]
    assert [os.path.basename(s["path"]) for s in skipped] == ["bob_lab0.zip"], skipped
    monkeypatch.chdir(subs)  # the output folder is the submissions folder: graded twice
    for _ in range(2):
        assert main(["grade", str(FIXTURE_LAB), ".", "-o", ".", "--lab-notebook",
                     str(FIXTURE_SOLUTION), "--jobs", "1", "--timeout", "20", "--quiet"]) == 0  # fmt: skip
    skipped = json.loads((subs / "grades.json").read_text())["skipped"]
    assert [os.path.basename(s["path"]) for s in skipped] == ["bob_lab0.zip"], skipped


def test_the_memory_advice_is_skipped_where_the_machine_hides_its_memory(monkeypatch):
    """/proc/meminfo hidden (systemd's ProcSubset=pid): psutil raised and the whole grade
    stopped with "No such file or directory: '/proc/meminfo'", for advice."""
    import psutil

    from lablib.grading import grade as grading
    from lablib.grading.run.supervisor import Limits

    def hidden():
        raise FileNotFoundError(2, "No such file or directory", "/proc/meminfo")

    monkeypatch.setattr(psutil, "virtual_memory", hidden)
    monkeypatch.setattr("lablib.grading.run.cgroups.own_memory_limit", lambda: None)
    grading._warn_memory(8, Limits(memory_mb=4096), progress=True)  # no error, no advice
    monkeypatch.setattr("lablib.grading.run.cgroups.own_memory_limit", lambda: 2**30)
    with pytest.warns(grading.ResourcesWarning, match="give --jobs 1"):
        grading._warn_memory(2, Limits(memory_mb=1024), progress=False)


def test_an_ascii_terminal_and_non_utf8_file_names(tmp_path):
    """PYTHONIOENCODING=ascii (a CI log): a non-ASCII name ended the command with a
    UnicodeEncodeError after its files were written; it is printed as escapes. File names
    read as ASCII (C locale with PYTHONUTF8=0) gave one notebook two rows, one per
    encoding: the grading commands refuse to run so, saying how to fix it."""
    folder = tmp_path / "Jös é"
    folder.mkdir()
    shutil.copy(FIXTURE_SOLUTION, folder / "lab0_fixture.ipynb")
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    run = subprocess.run(
        [sys.executable, "-m", "lablib.cli", "assign", str(folder / "lab0_fixture.ipynb"),
         "-o", str(tmp_path / "out")],
        env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert b"J\\xf6s \\xe9" in run.stdout and (tmp_path / "out" / "lab0_fixture.ipynb").is_file()
    env = dict(os.environ, LC_ALL="POSIX", PYTHONUTF8="0")
    env.pop("PYTHONIOENCODING", None)
    run = subprocess.run(
        [sys.executable, "-m", "lablib.cli", "grade", str(FIXTURE_LAB), str(folder), "-o",
         str(tmp_path / "graded")],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2 and "PYTHONUTF8=1" in run.stderr, run.stderr
    assert not (tmp_path / "graded").exists()


def test_an_output_folder_inside_the_submissions_is_not_listed_as_skipped(tmp_path, capsys):
    """-o subs/out: the second run listed the grader's own files as submissions skipped
    (on stderr, in grades.json and the summary)."""
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "alice.ipynb")
    common = ["-o", str(subs / "out"), "--lab-notebook", str(FIXTURE_SOLUTION), "--jobs", "1",
              "--timeout", "20", "--quiet"]  # fmt: skip
    for _ in range(2):
        assert main(["grade", str(FIXTURE_LAB), str(subs), *common]) == 0
    assert "skipped" not in capsys.readouterr().err
    assert not json.loads((subs / "out" / "grades.json").read_text()).get("skipped")


def test_grades_json_is_written_before_the_other_reports(tmp_path, monkeypatch):
    """A grade run stopped while writing (kill -9, a full disk) between grades.csv and
    grades.json left the CSV ahead of the gradebook that export, report and the review
    page read: the instructor saw grades the LMS file would not carry. grades.json,
    what every later command reads, is written first."""
    from lablib.grading.report import CsvGradebook

    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "alice.ipynb")

    def disk_full(self, out, book):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(CsvGradebook, "write", disk_full)
    with pytest.raises(OSError, match="No space left"):
        main(["grade", str(FIXTURE_LAB), str(subs), "-o", str(tmp_path / "out"), "--lab-notebook",
              str(FIXTURE_SOLUTION), "--jobs", "1", "--timeout", "20", "--quiet"])  # fmt: skip
    [row] = json.loads((tmp_path / "out" / "grades.json").read_text())["submissions"]
    assert row["submission"] == "alice" and not (tmp_path / "out" / "grades.csv").exists()
