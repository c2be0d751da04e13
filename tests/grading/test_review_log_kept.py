"""The review log a gradebook was written from, and no other (a red-team review's holes).

``grades.json`` includes the people's grades up to a change of the review log
(``reviews_through``); the export counted the log's changes after that number, and a
regrade or ``lablib report`` read the people's grades from whatever log was there. A log
restored from an older backup (or one whose ``-wal`` file was lost) hands out the lost
changes' ids again: the export then took a changed grade for no change and shipped the
old one. A missing or empty log was read as "no grades", and ``lablib report`` rewrote
``grades.json`` with every written answer ungraded, dropping the only copy left. The
gradebook now records which log and which change it includes (``reviews_log``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from lablib.grading.export import ExportError, export
from lablib.grading.grade import rewrite_reports
from lablib.grading.gradebook import GradebookError
from lablib.grading.review import printout
from lablib.grading.review.server import ReviewApp
from lablib.grading.review.store import DB_NAME, ReviewError, ReviewStore, text_digest
from review_fixtures import write_class, written_lab

ANSWERS = {
    "alice": {"why": "because A", "how": "fix A"},
    "bob": {"why": "because B", "how": "fix B"},
}


def _graded_class(tmp_path):
    """alice and bob, both answers graded (4 changes), and the gradebook written with them."""
    out, lab = tmp_path / "out", written_lab()
    write_class(out, lab, ANSWERS)
    store = ReviewStore(out / DB_NAME, lab)
    why = {i.comment: i.id for i in store.rubric("why")}
    how = {i.comment: i.id for i in store.rubric("how")}
    for name, answers in ANSWERS.items():
        store.set_items(name, "why", [why["Names the cause."]], digest=text_digest(answers["why"]))
        store.set_items(name, "how", [how["A fix that works."]], digest=text_digest(answers["how"]))
    rewrite_reports(out, lab=lab)
    return out, lab, store, why


def _backup(out, to):
    source, copy = sqlite3.connect(out / DB_NAME), sqlite3.connect(to)
    source.backup(copy)
    copy.close()
    source.close()


def _restore(out, backup):
    for suffix in ("", "-wal", "-shm"):
        (out / f"{DB_NAME}{suffix}").unlink(missing_ok=True)
    shutil.copy(backup, out / DB_NAME)


def _written(out, name):
    entry = next(e for e in _book(out)["submissions"] if e["submission"] == name)
    return {q: w["score"] for q, w in entry["written"].items()}


def _book(out):
    return json.loads((out / "grades.json").read_text(encoding="utf-8"))


def test_the_gradebook_records_which_log_and_change(tmp_path):
    out, _, store, _ = _graded_class(tmp_path)
    kept = _book(out)["reviews_log"]
    assert kept["through"] == _book(out)["reviews_through"] == store.last_change() == 4
    assert len(kept["log"]) == 32 and len(kept["change"]) == 32
    export("canvas", [out], None, tmp_path / "c.csv")  # the log as written: exported


def test_a_log_restored_from_a_backup_and_written_since_is_refused(tmp_path):
    """The red team's sequence: a backup at change 4; bob's "why" given 4 (change 5) and
    the gradebook written; the log restored; bob's "why" given 0 (change 5 again). The
    export counted no change after 5 and shipped bob's 4."""
    out, lab, store, why = _graded_class(tmp_path)
    _backup(out, tmp_path / "backup.sqlite")
    both = [why["Names the cause."], why["Gives numbers."]]
    store.set_items("bob", "why", both, digest=text_digest("because B"))
    rewrite_reports(out, lab=lab)
    assert _written(out, "bob")["why"] == 4 and _book(out)["reviews_through"] == 5
    _restore(out, tmp_path / "backup.sqlite")
    store = ReviewStore(out / DB_NAME, lab)
    store.set_items("bob", "why", [why["No answer."]], digest=text_digest("because B"))
    assert store.last_change() == 5  # the lost change's id, handed out again
    before = (out / "grades.json").read_bytes()
    with pytest.raises(ExportError, match="Change 5 of .* is not the change grades.json includes"):
        export("canvas", [out], None, tmp_path / "c.csv")
    assert not (tmp_path / "c.csv").exists()
    with pytest.raises(GradebookError, match="restored from an older backup and written since"):
        rewrite_reports(out, lab=lab)
    assert (out / "grades.json").read_bytes() == before  # nothing written


def test_a_log_that_lost_its_last_changes_is_refused(tmp_path):
    out, lab, store, why = _graded_class(tmp_path)
    _backup(out, tmp_path / "backup.sqlite")
    store.set_items("bob", "why", [why["Gives numbers."]], digest=text_digest("because B"))
    rewrite_reports(out, lab=lab)
    _restore(out, tmp_path / "backup.sqlite")  # change 5 lost, nothing written since
    with pytest.raises(ExportError, match="holds the people's grades up to change 4, and "):
        export("canvas", [out], None, tmp_path / "c.csv")


@pytest.mark.parametrize("gone", ["empty", "missing", "dangling link"])
def test_a_log_gone_never_makes_the_gradebook_drop_the_peoples_grades(tmp_path, gone):
    """``lablib report`` (and the review page's write, and a regrade) refuse, and write
    nothing; the export ships the grades grades.json holds; the review page does not
    start on an empty log of its own making."""
    out, lab, _, _ = _graded_class(tmp_path)
    for suffix in ("", "-wal", "-shm"):
        (out / f"{DB_NAME}{suffix}").unlink(missing_ok=True)
    if gone == "empty":
        (out / DB_NAME).write_bytes(b"")
    elif gone == "dangling link":
        (out / DB_NAME).symlink_to(tmp_path / "share-not-mounted" / DB_NAME)
    before = (out / "grades.json").read_bytes()
    state = "empty" if gone == "empty" else "missing"
    said = (
        "holds the people's grades of 4 written answer\\(s\\), from the review log's "
        f"change 4, and .* is {state}"
    )
    with pytest.raises(GradebookError, match=said):
        rewrite_reports(out, lab=lab)
    assert (out / "grades.json").read_bytes() == before
    assert _written(out, "alice") == {"why": 2.0, "how": 3.0}
    with pytest.raises(ReviewError, match=said):
        ReviewApp(out, lab)
    with pytest.raises(printout.PrintoutError, match=said):  # nor a log made there
        printout.write_points_csv(out, lab, tmp_path / "points.csv")
    evaluations = tmp_path / "1_why.csv"
    evaluations.write_text(
        "Assignment Submission ID,Question Submission ID,Name,SID,Email,Score,Grader\n"
        "1,11,alice,,,4,ta\n",
        encoding="utf-8",
    )
    with pytest.raises(printout.PrintoutError, match=said):
        printout.import_gradescope(out, lab, evaluations, question_map={"1": "why"})
    if gone == "empty":
        assert (out / DB_NAME).stat().st_size == 0  # no log made in its place
        with pytest.raises(ExportError, match="cannot be read as the written answers' review"):
            export("canvas", [out], None, tmp_path / "c.csv")
    else:
        assert not (out / DB_NAME).exists()
        export("canvas", [out], None, tmp_path / "c.csv")
        rows = (tmp_path / "c.csv").read_text(encoding="utf-8").splitlines()
        alice = next(e for e in _book(out)["submissions"] if e["submission"] == "alice")
        assert alice["total"] == alice["score"] + 5  # the people's 2 + 3 included
        assert f"alice,,,,,{alice['total']:g}" in rows, rows


def test_a_log_made_anew_is_not_the_gradebooks(tmp_path):
    """Another log with as many changes (made anew, or copied from another folder) has
    another id: its change 4 is not the gradebook's."""
    out, lab, _, _ = _graded_class(tmp_path)
    other = tmp_path / "other"
    write_class(other, lab, ANSWERS)
    store = ReviewStore(other / DB_NAME, lab)
    why = {i.comment: i.id for i in store.rubric("why")}
    for name in ANSWERS:
        for _ in range(2):
            store.set_items(name, "why", [why["No answer."]], digest=text_digest(f"x {name}"))
    _restore(out, other / DB_NAME)
    with pytest.raises(ExportError, match="is not the review log grades.json was written from"):
        export("canvas", [out], None, tmp_path / "c.csv")


def test_revealing_a_student_is_no_change_to_export_again_for(tmp_path):
    out, _, store, _ = _graded_class(tmp_path)
    store.log_reveal("alice", "why")
    export("canvas", [out], None, tmp_path / "c.csv")


@pytest.mark.parametrize("through", [None, "4", -1, True])
def test_a_reviews_through_that_is_no_change_number_is_an_export_error(tmp_path, through):
    out, _, _, _ = _graded_class(tmp_path)
    book = _book(out)
    book["reviews_through"] = through
    (out / "grades.json").write_text(json.dumps(book), encoding="utf-8")
    with pytest.raises(ExportError, match="reviews_through is .*expected the number"):
        export("canvas", [out], None, tmp_path / "c.csv")


def test_a_gradebook_written_before_it_recorded_its_log_is_still_checked(tmp_path):
    """No ``reviews_log``: the change it includes must still be in the log."""
    out, lab, store, why = _graded_class(tmp_path)
    book = _book(out)
    del book["reviews_log"]
    (out / "grades.json").write_text(json.dumps(book), encoding="utf-8")
    export("canvas", [out], None, tmp_path / "c.csv")
    book["reviews_through"] = 9
    (out / "grades.json").write_text(json.dumps(book), encoding="utf-8")
    with pytest.raises(ExportError, match="up to change 4, and grades.json includes change 9"):
        export("canvas", [out], None, tmp_path / "c.csv")


def test_a_backup_that_lost_nothing_is_the_same_log(tmp_path):
    """A log's id comes from the secret it has held since it was made: a full backup
    restored (nothing lost), or a log written before gradebooks recorded their log, is
    the gradebook's own, never "made anew"."""
    out, lab, store, why = _graded_class(tmp_path)
    _backup(out, tmp_path / "backup.sqlite")
    copy = sqlite3.connect(tmp_path / "backup.sqlite")  # as a log of before holds its meta:
    copy.execute("DELETE FROM meta WHERE key NOT IN ('schema', 'lab', 'secret')")
    copy.execute("DELETE FROM meta WHERE key = 'schema'")  # no id key of any kind
    copy.commit()
    copy.close()
    _restore(out, tmp_path / "backup.sqlite")
    ReviewApp(out, lab)  # opened first: it writes its own meta again
    export("canvas", [out], None, tmp_path / "c.csv")
    rewrite_reports(out, lab=lab)


def test_a_gradebook_without_peoples_grades_is_written_again_without_its_log(tmp_path):
    """A gradebook written after a student was only revealed (a change, no grade) holds no
    person's grade: with its log gone, nothing would be dropped, and it is written. A log
    there is still checked: another folder's, holding a grade, is refused."""
    out, lab = tmp_path / "out", written_lab()
    write_class(out, lab, ANSWERS)
    ReviewStore(out / DB_NAME, lab).log_reveal("alice", "why")
    rewrite_reports(out, lab=lab)
    assert _book(out)["reviews_through"] == 1
    (out / DB_NAME).unlink()
    rewrite_reports(out, lab=lab)
    ReviewStore(out / DB_NAME, lab).log_reveal("alice", "why")
    rewrite_reports(out, lab=lab)
    other, _, _, _ = _graded_class(tmp_path / "other")
    _restore(out, other / DB_NAME)
    with pytest.raises(GradebookError, match="is not the review log grades.json was written"):
        rewrite_reports(out, lab=lab)


def test_a_grade_run_checks_the_log_of_its_own_labs_gradebook_only(tmp_path):
    """Before grading (``--fresh`` too): refused where the lab's gradebook holds people's
    grades and the log is gone; another lab's gradebook, replaced with ``--fresh``, carries
    nothing over and is not checked."""
    from lablib.grading import grade as grading

    out, lab, _, _ = _graded_class(tmp_path)
    (out / DB_NAME).unlink()
    with pytest.raises(GradebookError, match="is missing"):
        grading._check_review_log(out, lab.name)
    grading._check_review_log(out, "lab1_attention")
