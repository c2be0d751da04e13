"""``grades.csv``: one row per submission: status, total, the points of each piece.

Text cells are written so that no spreadsheet runs them as formulas (OWASP's CSV
injection rule): a cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return gets a leading ``'``. A submission named ``=HYPERLINK(...)`` stays text, and so
does a submission time an LMS wrote in a form lablib could not read. Every row goes
through :class:`SpreadsheetWriter`: a cell is a number (``int`` or ``float``, written as
:func:`~lablib.grading.report.text.num` writes it) or text (made inert), so no column can
forget it.
"""

from __future__ import annotations

import csv
import pathlib

from lablib.grading.atomic import atomic_write
from lablib.grading.gradebook import Gradebook
from lablib.grading.report.text import visible_controls, num, status_text

__all__ = ["CsvGradebook", "SpreadsheetWriter", "spreadsheet_text"]

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(value: str) -> str:
    """``value`` made inert for spreadsheets: a leading ``'`` when it could start a formula,
    its control characters shown as symbols (:func:`~.text.visible_controls`: a CSV file
    shown in a terminal draws nothing a submission wrote)."""
    value = visible_controls(value)
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


class SpreadsheetWriter:
    """A :func:`csv.writer` whose rows hold numbers and text: an ``int`` or ``float`` is
    written as a number (``4``, ``2.5``, ``-1``), None empty, anything else as text through
    :func:`spreadsheet_text`. Give scores as numbers, never as text already formatted
    (``"-1"`` would be written ``'-1``).

    Example::

        with atomic_write(path, newline="") as f:
            SpreadsheetWriter(f).writerow(["submission", "score"])
    """

    def __init__(self, file):
        self._writer = csv.writer(file)

    def writerow(self, cells) -> None:
        """Write one row: numbers as numbers, everything else as inert text."""
        self._writer.writerow([_cell(c) for c in cells])


def _late_cells(late) -> list:
    """``submitted_at, late_hours, late_penalty, lateness`` of a row: empty without a
    time; hours and penalty empty where the lateness was not computed (never 0, "on time")."""
    if late is None:
        return ["", "", "", ""]
    if not late.computed:
        return [late.submitted_at, "", "", late.text]
    return [late.submitted_at, round(late.late_seconds / 3600, 2), late.penalty, late.text]


def _cell(value) -> str:
    if value is None:  # as csv.writer writes it
        return ""
    if isinstance(value, bool):  # not a score
        return spreadsheet_text(str(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return num(value)
    return spreadsheet_text(str(value))


class CsvGradebook:
    """Writes ``grades.csv`` (columns: submission, with a roster the student's id, name,
    e-mail and section, then status, score, max_score, each piece; for a lab with written
    answers then ``written: <id>`` per question (empty until a person grades it),
    ``written``, ``ungraded`` (answers still to grade); with a late policy
    ``submitted_at``, ``late_hours``, ``late_penalty`` (both empty where the lateness could
    not be computed: a time that cannot be read) and ``lateness`` (in words: why it was
    not computed, or a group's members' own lateness and totals); then ``total`` and
    ``max_total``)."""

    name = "grades.csv"

    def write(self, out_dir: pathlib.Path, book: Gradebook) -> list[pathlib.Path]:
        path = pathlib.Path(out_dir) / "grades.csv"
        with atomic_write(path, newline="") as f:
            writer = SpreadsheetWriter(f)
            who = ["student_id", "name", "email", "section"] if book.roster is not None else []
            questions = book.questions
            late = book.late_policy is not None
            written = (
                [f"written: {q.id}" for q in questions] + ["written", "ungraded"]
                if questions
                else []
            )
            written += ["submitted_at", "late_hours", "late_penalty", "lateness"] if late else []
            written += ["total", "max_total"] if questions or late else []
            writer.writerow(
                ["submission", *who, "status", "score", "max_score", *book.pieces, *written]
            )
            for r in book.results:
                scores = [r.pieces[p].score if p in r.pieces else 0.0 for p in book.pieces]
                student = book.student(r)
                columns = (
                    []
                    if book.roster is None
                    else (
                        [student.key, student.name, student.email, student.section]
                        if student
                        else ["", "", "", ""]
                    )
                )
                row, people = book.row(r), []
                if questions:
                    people = [score.score if score.graded else "" for _, score in row.written]
                    people += [row.given, row.pending]
                if late:
                    people += _late_cells(row.late)
                if questions or late:
                    people += [row.total, row.max_total]
                writer.writerow(
                    [
                        r.submission,
                        *columns,
                        status_text(r.status),
                        r.score,
                        r.max_score,
                        *scores,
                        *people,
                    ]
                )
        return [path]
