"""``grades.csv``: one row per submission: status, total, the points of each piece.

Text cells are written so that no spreadsheet runs them as formulas (OWASP's CSV
injection rule): a cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return gets a leading ``'``. A submission named ``=HYPERLINK(...)`` stays text.
"""

from __future__ import annotations

import csv
import pathlib

from lablib.grading.atomic import atomic_write
from lablib.grading.gradebook import Gradebook
from lablib.grading.report.text import num, status_text

__all__ = ["CsvGradebook", "spreadsheet_text"]

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(value: str) -> str:
    """``value`` made inert for spreadsheets: a leading ``'`` when it could start a formula."""
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


class CsvGradebook:
    """Writes ``grades.csv`` (columns: submission, with a roster the student's id, name,
    e-mail and section, then status, score, max_score, each piece; for a lab with written
    answers then ``written: <id>`` per question (empty until a person grades it),
    ``written``, ``ungraded`` (answers still to grade), ``total`` and ``max_total``)."""

    name = "grades.csv"

    def write(self, out_dir: pathlib.Path, book: Gradebook) -> list[pathlib.Path]:
        path = pathlib.Path(out_dir) / "grades.csv"
        with atomic_write(path, newline="") as f:
            writer = csv.writer(f)
            who = ["student_id", "name", "email", "section"] if book.roster is not None else []
            questions = book.questions
            late = book.late_policy is not None
            written = (
                [f"written: {q.id}" for q in questions] + ["written", "ungraded"]
                if questions
                else []
            )
            written += ["submitted_at", "late_hours", "late_penalty"] if late else []
            written += ["total", "max_total"] if questions or late else []
            writer.writerow(
                [
                    "submission",
                    *who,
                    "status",
                    "score",
                    "max_score",
                    *map(spreadsheet_text, book.pieces),
                    *written,
                ]
            )
            for r in book.results:
                scores = [num(r.pieces[p].score if p in r.pieces else 0.0) for p in book.pieces]
                student = book.student(r)
                columns = (
                    []
                    if book.roster is None
                    else [
                        spreadsheet_text(v)
                        for v in (
                            (student.key, student.name, student.email, student.section)
                            if student
                            else ("", "", "", "")
                        )
                    ]
                )
                row, people = book.row(r), []
                if questions:
                    people = [num(score.score) if score.graded else "" for _, score in row.written]
                    people += [num(row.given), str(row.pending)]
                if late:
                    people += (
                        ["", "", ""]
                        if row.late is None
                        else [
                            row.late.submitted_at,
                            num(round(row.late.late_seconds / 3600, 2)),
                            num(row.late.penalty),
                        ]
                    )
                if questions or late:
                    people += [num(row.total), num(row.max_total)]
                writer.writerow(
                    [
                        spreadsheet_text(r.submission),
                        *columns,
                        status_text(r.status),
                        num(r.score),
                        num(r.max_score),
                        *scores,
                        *people,
                    ]
                )
        return [path]
