"""A submission's file is read once, as listed, within its limit: what a student can change
on disk while a class is graded (a shared drive, a repository pulled again before a
regrade) changes nothing but their own row. The red-team review of races: a file swapped
for a link to a classmate's notebook after the listing, a pipe or a device put in a kept
row's place, a roster-dated time checked against a second read of the file."""

import hashlib
import json
import os
import shutil
import threading

import nbformat
import pytest

from lablib.grading.atomic import _umask
from lablib.grading.gradebook.similarity import identical_files
from lablib.grading.notebook import InvalidNotebook, file_id, read_notebook_bytes
from lablib.grading.results import SubmissionResult
from grading_paths import FIXTURE_SOLUTION

OPTIONS = dict(lab_notebook=FIXTURE_SOLUTION, jobs=1, timeout=20, progress=False)


def _blank(path):
    blank = nbformat.read(FIXTURE_SOLUTION, as_version=4)
    for cell in blank.cells:
        if cell.cell_type == "code" and "def " in cell.source:
            cell.source = "raise NotImplementedError"
    nbformat.write(blank, path)


def test_a_pipe_or_a_device_is_refused_before_anything_is_read(tmp_path):
    fifo = tmp_path / "eve.ipynb"
    os.mkfifo(fifo)  # opening it to read would wait for a writer for ever
    with pytest.raises(InvalidNotebook, match="not a regular file"):
        read_notebook_bytes(fifo)
    with pytest.raises(InvalidNotebook, match="not a regular file"):
        read_notebook_bytes("/dev/zero")  # endless: its size says 0


def test_the_file_listed_is_the_file_read(tmp_path):
    mine, theirs = tmp_path / "eve.ipynb", tmp_path / "bob.ipynb"
    mine.write_text("{}")
    theirs.write_text('{"bob": 1}')
    listed = file_id(mine)
    assert read_notebook_bytes(mine, listed) == b"{}"
    mine.unlink()
    os.symlink(theirs, mine)  # swapped for a link to a classmate's notebook
    with pytest.raises(InvalidNotebook, match="changed between the listing"):
        read_notebook_bytes(mine, listed)


@pytest.mark.integration
def test_a_notebook_swapped_for_a_link_after_the_listing_is_not_graded(
    tmp_path, fixture_lab, monkeypatch
):
    """The review's race: right after the listing, eve's notebook becomes a link to bob's.
    Before, eve's row scored bob's solution with no warning; now her row says what
    happened and scores nothing, and bob's row is his own."""
    from lablib.grading import grade as grade_module

    repos, out = tmp_path / "repos", tmp_path / "out"
    for student in ("bob", "eve"):
        (repos / student).mkdir(parents=True)
    shutil.copy(FIXTURE_SOLUTION, repos / "bob" / "lab0.ipynb")
    _blank(repos / "eve" / "lab0.ipynb")
    real = grade_module.find_submissions

    def listed_then_swapped(*args, **kwargs):
        found = real(*args, **kwargs)
        os.rename(repos / "eve" / "lab0.ipynb", repos / "eve" / "mine.txt")
        os.symlink("../bob/lab0.ipynb", repos / "eve" / "lab0.ipynb")
        return found

    monkeypatch.setattr(grade_module, "find_submissions", listed_then_swapped)
    rows = {r.submission: r for r in grade_module.grade(fixture_lab, [repos], out, **OPTIONS)}
    assert rows["bob"].score == rows["bob"].max_score > 0
    assert rows["eve"].score == 0
    assert any("changed between the listing" in n for n in rows["eve"].notes), rows["eve"].notes


@pytest.mark.integration
def test_a_kept_rows_file_turned_into_a_pipe_holds_nothing_up(tmp_path, fixture_lab):
    """A regrade of one student writes every row's similarity hints: eve's kept file,
    turned into a pipe (or a link to /dev/zero) since she was graded, was read to its
    end under the gradebook's lock, waiting for ever (or filling memory). The digest of
    the bytes graded is kept in each row, so nothing is read again."""
    from lablib.grading.grade import grade

    repos, out = tmp_path / "repos", tmp_path / "out"
    for student in ("alice", "eve"):
        (repos / student).mkdir(parents=True)
        shutil.copy(FIXTURE_SOLUTION, repos / student / "lab0.ipynb")
    first = grade(fixture_lab, [repos], out, **OPTIONS)
    graded = hashlib.sha256((repos / "eve" / "lab0.ipynb").read_bytes()).hexdigest()
    assert {r.identity["sha256"] for r in first} == {graded}  # the two files are the same
    (repos / "eve" / "lab0.ipynb").unlink()
    os.mkfifo(repos / "eve" / "lab0.ipynb")
    done = []
    worker = threading.Thread(
        target=lambda: done.append(grade(fixture_lab, [repos / "alice"], out, **OPTIONS)),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=120)
    if worker.is_alive():  # unblock every read of the pipe before failing, so the test ends
        while worker.is_alive():
            try:  # a writer that opens and closes gives a waiting reader its end of file
                os.close(os.open(repos / "eve" / "lab0.ipynb", os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # no reader waiting right now
                pass
            worker.join(timeout=0.05)
        pytest.fail("the regrade waited on the pipe in a kept row's place")
    rows = {r.submission: r for r in done[0]}
    assert rows["eve"].identity["sha256"] == graded  # the bytes she was graded on
    summary = json.loads((out / "summary.json").read_text())
    assert ["alice", "eve"] in summary["similarity"]["identical_files"]  # by the digests kept


def test_identical_files_compares_the_digests_kept_and_never_waits(tmp_path):
    fifo = tmp_path / "pipe.ipynb"
    os.mkfifo(fifo)
    same = tmp_path / "a.ipynb"
    same.write_text("{}")
    paths = {"a": same, "b": fifo, "c": "/dev/zero"}
    assert identical_files(paths) == []  # the pipe and the device are left out
    digests = {"b": hashlib.sha256(b"{}").hexdigest(), "c": "other"}
    assert identical_files(paths, digests=digests) == [["a", "b"]]


def test_the_roster_dates_the_bytes_graded_not_the_file_now(tmp_path):
    from lablib.grading.grade import _date_by_roster

    path = tmp_path / "eve.ipynb"
    path.write_text('{"v": 1}')
    row = SubmissionResult("eve", str(path), None, 0.0, 1.0, {}, [])
    row.identity = {
        "sha256": hashlib.sha256(b'{"v": 2}').hexdigest(),  # what was graded
        "submitted_at": "2025-12-31T10:00",
        "time_source": "the roster's Last modified",
    }
    _date_by_roster([row])
    assert row.identity["dated"] == hashlib.sha256(b'{"v": 2}').hexdigest()


def test_reading_the_umask_leaves_it_as_it_was():
    before = os.umask(0o027)
    try:
        assert _umask() == 0o027
        assert os.umask(0o027) == 0o027  # unchanged by the reading
    finally:
        os.umask(before)
