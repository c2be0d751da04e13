"""``grades.json``: everything about every submission, for scripts.

Each submission's entry is its :meth:`~lablib.grading.results.SubmissionResult.to_dict`
with ``status`` as text (as in ``grades.csv``), ``problems`` and ``missing`` as lists,
and ``feedback``: the stem of its feedback files. Its ``identity`` is who submitted it,
resolved once at grading and kept (:mod:`lablib.grading.identity`: the roster's student
or what the LMS download says, the submission time and its source); ``lablib export``
reads it. With a roster, each entry has its ``student`` (or null) and ``roster`` lists
what matched nothing.

A lab with written answers adds ``questions`` (id -> points and title) and, per entry,
``answers`` (what the student wrote), ``written`` (each question's
:class:`~lablib.grading.results.PersonScore`), ``ungraded``, ``total`` (automatic +
people's points) and ``max_total``; ``reviews_through`` is the review log's last change
included (``lablib export`` refuses a gradebook older than its reviews). With a late
policy, ``late_policy`` and per entry ``late`` (:class:`~lablib.grading.late.Late`, null
without a submission time); ``total`` then subtracts the penalty.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

from lablib.grading.atomic import atomic_write
from lablib.grading.report.base import Gradebook
from lablib.grading.report.text import status_text
from lablib.grading.results import SubmissionResult

__all__ = ["JsonGradebook", "GradebookError", "read_gradebook", "result_from_entry"]

#: What to do about a gradebook that cannot be read, in every message that says so.
_WHAT_TO_DO = ("Nothing in the folder was changed. Restore grades.json (from a backup or version control) "
               "and run the command again, or grade every submission again into a new gradebook with "
               "`lablib grade ... --fresh` (rows of submissions not graded in that run are then dropped).")


class GradebookError(ValueError):
    """A ``grades.json`` that exists but cannot be read as a gradebook: cut short (a
    writer stopped midway by an older lablib, a full disk), edited by hand, or another
    file. Never taken for an empty gradebook: a regrade that did so would drop every
    other student's row and feedback."""


def read_gradebook(out_dir):
    """The parsed ``grades.json`` of a grading output folder.

    Raises:
        FileNotFoundError: there is no ``grades.json`` (no gradebook yet).
        OSError: it cannot be opened.
        GradebookError: it is not a gradebook (not UTF-8, not JSON, cut short, not an
            object with ``lab`` and ``submissions``): the message names the file, what
            is wrong and what to do.
    """
    path = pathlib.Path(out_dir) / "grades.json"
    raw = path.read_bytes()
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise GradebookError(f"{path} cannot be read: it is not UTF-8 text (byte {exc.start} of {len(raw)}). "
                             f"{_WHAT_TO_DO}") from None
    except json.JSONDecodeError as exc:
        if not raw.strip():
            raise GradebookError(f"{path} cannot be read: it is empty ({len(raw)} bytes). {_WHAT_TO_DO}") from None
        cut = "" if raw.rstrip().endswith(b"}") else " (it does not end as a gradebook ends: cut short while being written?)"
        raise GradebookError(f"{path} cannot be read: not valid JSON at line {exc.lineno}, column {exc.colno} "
                             f"({exc.msg}; {len(raw)} bytes){cut}. {_WHAT_TO_DO}") from None
    except RecursionError:
        raise GradebookError(f"{path} cannot be read: it is nested too deeply to be a gradebook. "
                             f"{_WHAT_TO_DO}") from None
    if not isinstance(data, dict) or not isinstance(data.get("lab"), str) \
            or not isinstance(data.get("submissions"), list):
        raise GradebookError(f"{path} is JSON but not a gradebook written by `lablib grade` (expected an object "
                             f"with \"lab\" and a list \"submissions\"). {_WHAT_TO_DO}")
    return data


def result_from_entry(entry: dict) -> SubmissionResult:
    """The :class:`SubmissionResult` of one ``submissions`` entry: the inverse of
    :class:`JsonGradebook`'s entry (status from ``problems``, ``missing`` and ``raised``;
    the keys the writer adds are left aside). Raises KeyError, TypeError or ValueError on
    an entry it cannot read."""
    return SubmissionResult.from_dict(dict(entry, status=entry))  # Status.from_dict reads its keys


class JsonGradebook:
    """Writes ``grades.json``: the lab's pieces and every submission in full."""

    name = "grades.json"

    def write(self, out_dir: pathlib.Path, book: Gradebook) -> list[pathlib.Path]:
        lab = book.lab
        submissions = []
        for r in book.results:
            entry = r.to_dict()
            entry.update(r.status.to_dict())  # problems, missing, raised: read back by result_from_entry
            entry.update(status=status_text(r.status), feedback=f"feedback/{book.stems[r.submission]}")
            row = book.row(r)
            if book.questions:
                entry.update(written={q.id: score.to_dict() for q, score in row.written}, ungraded=row.pending)
            if book.late_policy is not None:
                entry["late"] = None if row.late is None else row.late.to_dict()
            if book.questions or book.late_policy is not None:
                entry.update(total=row.total, max_total=row.max_total)
            if book.roster is not None:
                student = book.student(r)
                entry["student"] = None if student is None else dataclasses.asdict(student)
            submissions.append(entry)
        data = {
            "lab": lab.name,
            "title": lab.title,
            "pieces": {p: {"objects": list(lab.pieces[p].objects), "description": lab.pieces[p].description}
                       for p in book.pieces},
            "questions": {q.id: {"points": q.points, "title": q.title} for q in book.questions},
            "reviews_through": book.reviews_through,
            "late_policy": None if book.late_policy is None else book.late_policy.to_dict(),
            "submissions": submissions,
        }
        if book.roster is not None:
            data["roster"] = {"unmatched_submissions": list(book.roster.unmatched),
                              "students_without_submission": [dataclasses.asdict(s)
                                                              for s in book.roster.without_submission]}
        path = pathlib.Path(out_dir) / "grades.json"
        atomic_write(path, json.dumps(data, indent=1, default=str) + "\n")
        return [path]
