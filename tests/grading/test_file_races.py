"""A submission's file is read once, as listed, within its limit: what a student can change
on disk while a class is graded (a shared drive, a repository pulled again before a
regrade) changes nothing but their own row. The red-team review of races: a file swapped
for a link to a classmate's notebook after the listing, a pipe or a device put in a kept
row's place, a roster-dated time checked against a second read of the file."""

import hashlib
import json
import os
import pathlib
import shutil
import threading

import nbformat
import pytest

from lablib.grading.atomic import _umask
from lablib.grading.gradebook.similarity import identical_files
from lablib.grading.notebook import (
    InvalidNotebook,
    NotebookMoved,
    listed_path,
    read_notebook_bytes,
)
from lablib.grading.results import Kind, SubmissionResult
from grading_paths import FIXTURE_SOLUTION

OPTIONS = dict(lab_notebook=FIXTURE_SOLUTION, jobs=1, timeout=20, progress=False)


def _blank(path):
    blank = nbformat.read(FIXTURE_SOLUTION, as_version=4)
    for cell in blank.cells:
        if cell.cell_type == "code" and "def " in cell.source:
            cell.source = "raise NotImplementedError"
    nbformat.write(blank, path)


def _bob_and_eve(tmp_path):
    """``repos/`` with bob's solution and eve's blank lab, and the output folder."""
    repos = tmp_path / "repos"
    for student in ("bob", "eve"):
        (repos / student).mkdir(parents=True)
    shutil.copy(FIXTURE_SOLUTION, repos / "bob" / "lab0.ipynb")
    _blank(repos / "eve" / "lab0.ipynb")
    return repos, tmp_path / "out"


def _swap_eves_for_bobs(repos):
    """Eve's notebook moved aside and a link to bob's put in its place."""
    os.rename(repos / "eve" / "lab0.ipynb", repos / "eve" / "mine.txt")
    os.symlink("../bob/lab0.ipynb", repos / "eve" / "lab0.ipynb")


def test_a_pipe_or_a_device_is_refused_before_anything_is_read(tmp_path):
    fifo = tmp_path / "eve.ipynb"
    os.mkfifo(fifo)  # opening it to read would wait for a writer for ever
    with pytest.raises(InvalidNotebook, match="not a regular file"):
        read_notebook_bytes(fifo)
    with pytest.raises(InvalidNotebook, match="not a regular file"):
        read_notebook_bytes("/dev/zero")  # endless: its size says 0


def test_the_file_listed_is_the_file_read(tmp_path):
    (tmp_path / "eve").mkdir()
    (tmp_path / "bob").mkdir()
    mine, theirs = tmp_path / "eve" / "lab.ipynb", tmp_path / "bob" / "lab.ipynb"
    mine.write_text("{}")
    theirs.write_text('{"bob": 1}')
    listed = listed_path(mine)
    assert read_notebook_bytes(mine, listed) == b"{}"
    # saved again (a new file renamed over it, as editors, git and rsync do): still hers
    again = tmp_path / "eve" / "new"
    again.write_text('{"v": 2}')
    os.replace(again, mine)
    assert read_notebook_bytes(mine, listed) == b'{"v": 2}'
    mine.unlink()
    os.symlink(theirs, mine)  # swapped for a link to a classmate's notebook
    with pytest.raises(NotebookMoved):
        read_notebook_bytes(mine, listed)
    mine.unlink()
    os.rename(tmp_path / "eve", tmp_path / "eve-old")
    os.symlink("bob", tmp_path / "eve")  # her folder swapped for a link to bob's
    with pytest.raises(NotebookMoved):
        read_notebook_bytes(mine, listed)


def test_a_small_notebook_is_read_without_a_buffer_of_the_limit():
    import tracemalloc

    tracemalloc.start()
    read_notebook_bytes(FIXTURE_SOLUTION)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * 2**20, peak  # the 64 MB limit is a limit, not an allocation


@pytest.mark.integration
def test_a_notebook_swapped_for_a_link_after_the_listing_is_not_graded(
    tmp_path, fixture_lab, monkeypatch
):
    """The review's race: right after the listing, eve's notebook becomes a link to bob's.
    Before, eve's row scored bob's solution with no warning; now her row says what
    happened and scores nothing, and bob's row is his own."""
    from lablib.grading import grade as grade_module

    repos, out = _bob_and_eve(tmp_path)
    real = grade_module.find_submissions

    def listed_then_swapped(*args, **kwargs):
        found = real(*args, **kwargs)
        _swap_eves_for_bobs(repos)
        return found

    monkeypatch.setattr(grade_module, "find_submissions", listed_then_swapped)
    rows = {r.submission: r for r in grade_module.grade(fixture_lab, [repos], out, **OPTIONS)}
    assert rows["bob"].score == rows["bob"].max_score > 0
    # the grader's error, not the student's: export refuses it until it is graded again
    assert rows["eve"].score == 0 and Kind.GRADER_ERROR in rows["eve"].status.problems
    assert any("led to another file" in n for n in rows["eve"].notes), rows["eve"].notes
    assert rows["eve"].identity["sha256"] == ""  # nothing read: no file stands for it
    assert rows["eve"].identity["file"] == os.path.realpath(repos / "eve" / "mine.txt").replace(
        "mine.txt", "lab0.ipynb"
    )  # where it was listed, not where the link leads
    summary = json.loads((out / "summary.json").read_text())
    assert summary["similarity"]["identical_files"] == []  # eve's link is not read for it


@pytest.mark.integration
def test_a_swap_while_the_listing_runs_is_refused_at_the_listing(
    tmp_path, fixture_lab, monkeypatch
):
    """The second review: eve's file swapped for a link to bob's after the walk's link
    checks but before the listing took its real path; the path now leads to bob's
    notebook, so it is not listed as eve's."""
    from lablib.grading import submissions
    from lablib.grading.grade import grade

    repos, out = _bob_and_eve(tmp_path)
    real = submissions.listed_path

    def swapped_first(path):
        if pathlib.Path(path).parent.name == "eve" and not os.path.islink(path):
            _swap_eves_for_bobs(repos)
        return real(path)

    monkeypatch.setattr(submissions, "listed_path", swapped_first)
    with pytest.warns(UserWarning) as caught:
        rows = {r.submission: r for r in grade(fixture_lab, [repos], out, **OPTIONS)}
    assert "eve" not in rows and rows["bob"].score == rows["bob"].max_score
    said = [str(w.message) for w in caught]
    assert any("led to another file while the submissions were listed" in m for m in said), said


@pytest.mark.integration
def test_a_notebook_saved_again_while_the_class_is_graded_is_graded(
    tmp_path, fixture_lab, monkeypatch
):
    """An honest update after the listing (git pull, rsync: a new file renamed over the
    old, a new inode) is the same path: graded, not refused."""
    from lablib.grading import grade as grade_module

    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "eve").mkdir(parents=True)
    shutil.copy(FIXTURE_SOLUTION, subs / "eve" / "lab0.ipynb")
    real = grade_module.find_submissions

    def listed_then_saved(*args, **kwargs):
        found = real(*args, **kwargs)
        shutil.copy(FIXTURE_SOLUTION, subs / "eve" / "new.tmp")
        os.replace(subs / "eve" / "new.tmp", subs / "eve" / "lab0.ipynb")
        return found

    monkeypatch.setattr(grade_module, "find_submissions", listed_then_saved)
    (row,) = grade_module.grade(fixture_lab, [subs], out, **OPTIONS)
    assert row.score == row.max_score > 0 and row.status.problems == ()


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
