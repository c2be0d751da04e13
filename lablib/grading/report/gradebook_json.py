"""``grades.json``: everything about every submission, for scripts.

Each submission's entry is its :meth:`~lablib.grading.results.SubmissionResult.to_dict`
with ``status`` as text (as in ``grades.csv``), ``problems`` and ``missing`` as lists,
and ``feedback``: the stem of its feedback files. With a roster, each entry has its
``student`` (or null) and ``roster`` lists what matched nothing.

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

from lablib.grading.report.base import Gradebook
from lablib.grading.report.text import status_text
from lablib.grading.results import SubmissionResult

__all__ = ["JsonGradebook", "read_gradebook", "result_from_entry"]


def read_gradebook(out_dir):
    """The parsed ``grades.json`` of a grading output folder.

    Raises:
        OSError: no readable file; ValueError: not JSON.
    """
    return json.loads((pathlib.Path(out_dir) / "grades.json").read_text(encoding="utf-8"))


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
        path.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
        return [path]
