"""Grades for the LMS: ``lablib export canvas|moodle`` of one or more graded labs.

Each grading output (``lablib grade ... -o OUT``) holds a lab's ``grades.json``. The export
reads them, matches their rows to the class list (:mod:`~lablib.grading.roster`) and
writes one row per student with one column per lab total: the tests' points plus the
points people gave the written answers (``lablib review``); ``pieces=True`` adds one
column per graded piece and per written question after each total. A gradebook older
than its reviews (``reviews.sqlite`` changed since ``grades.json`` was written) is refused:
run ``lablib report`` first.

* ``canvas``: Canvas's gradebook import layout: ``Student, ID, SIS User ID, SIS Login ID,
  Section`` and the lab columns, with the "Points Possible" row Canvas's own export has.
  Canvas matches students by ``ID`` or ``SIS User ID`` (export the roster from Canvas's
  gradebook to have them) and a column by its name: an existing assignment's
  ``Name (id)`` (``columns``), else a new assignment is made.
* ``moodle``: ``Full name, Email address, ID number`` and the lab columns, for Moodle's
  "Import grades from CSV": map ``Email address`` (or ``ID number``) to the user field of
  the same name and each lab column to its grade item.

A student with no submission gets an empty cell (no grade), or 0 with ``missing=0``;
a student with several notebooks in one lab gets the best. Text cells are made inert for
spreadsheets, as in ``grades.csv``.

Example::

    export("canvas", ["grades/lab1", "grades/lab2"], Roster.load("canvas.csv"), "canvas_import.csv")
"""

from __future__ import annotations

import csv
import pathlib

from lablib.grading.atomic import atomic_write
from lablib.grading.report.gradebook_csv import spreadsheet_text
from lablib.grading.report.gradebook_json import read_gradebook
from lablib.grading.report.text import num
from lablib.grading.review.store import DB_NAME, changes_since
from lablib.grading.roster import Roster

__all__ = ["FORMATS", "export", "ExportError"]

FORMATS = ("canvas", "moodle")


class ExportError(ValueError):
    """An export that cannot be made as asked (the message says why and what to do)."""


def _gradebook(folder) -> dict:
    path = pathlib.Path(folder) / "grades.json"
    try:
        data = read_gradebook(folder)
    except (OSError, ValueError) as exc:
        raise ExportError(f"{path} cannot be read ({exc}); pass the output folders of `lablib grade`.") from None
    if not isinstance(data, dict) or "lab" not in data or "submissions" not in data:
        raise ExportError(f"{path} is not a gradebook written by `lablib grade`.")
    newer = changes_since(pathlib.Path(folder) / DB_NAME, data.get("reviews_through", 0))
    if newer:
        raise ExportError(f"{folder}: the written answers' grades changed {newer} time(s) since grades.json was "
                          f"written; run `lablib report {folder}` (or \"Write the gradebook\" in the review page) "
                          f"and export again.")
    return data


def _total(row: dict) -> float:
    """A row's total: the tests' points plus the people's points (``total``, written for a
    lab with written answers), else the tests' points."""
    return row.get("total", row["score"])


def _lab_columns(data: dict, header: str, pieces: bool) -> list[tuple[str, str | None, float]]:
    """``(column header, piece or None for the total, points possible)`` of one lab."""
    rows = data["submissions"]
    total = max([r.get("max_total", r.get("max_score", 0.0)) for r in rows] or [0.0])
    columns = [(header, None, total)]
    if pieces:
        for piece in data.get("pieces", {}):
            top = max([r["pieces"].get(piece, {}).get("max_score", 0.0) for r in rows] or [0.0])
            columns.append((f"{header}: {piece}", piece, top))
        for question, about in data.get("questions", {}).items():
            columns.append((f"{header}: written {question}", f"written:{question}", about.get("points", 0.0)))
    return columns


def export(fmt: str, outputs, roster: Roster, destination, *, columns=None, pieces: bool = False,
           missing: float | None = None) -> dict:
    """Write the LMS import file of the gradebooks in ``outputs``.

    Args:
        fmt: ``"canvas"`` or ``"moodle"``.
        outputs: grading output folders (each with a ``grades.json``), one per lab.
        roster: the class list; one row per student, in its order.
        destination: the CSV file to write.
        columns: lab name -> column header (default: the lab's title).
        pieces: add a column per graded piece after each lab's total.
        missing: the value for a student with no submission (default: empty, no grade).

    Returns:
        ``{"students", "labs", "unmatched": {lab: [submission names]}, "without_submission":
        {lab: [student keys]}}``: what to check before importing.
    """
    if fmt not in FORMATS:
        raise ExportError(f"Unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}.")
    columns = dict(columns or {})
    books = [_gradebook(folder) for folder in outputs]
    labs = [b["lab"] for b in books]
    if len(set(labs)) != len(labs):
        raise ExportError(f"Two of the outputs hold the same lab ({labs}); pass one output per lab.")
    unknown = set(columns) - set(labs)
    if unknown:
        raise ExportError(f"--column names {sorted(unknown)}, which none of the outputs grades (they grade {labs}).")
    header_cells, points, values = [], [], {id(s): [] for s in roster.students}
    report = {"students": len(roster), "labs": labs, "unmatched": {}, "without_submission": {}}
    for book in books:
        lab_columns = _lab_columns(book, columns.get(book["lab"], book.get("title") or book["lab"]), pieces)
        rows = book["submissions"]
        match = roster.match([(r["submission"], r.get("path", "")) for r in rows])
        best: dict[int, dict] = {}
        for row in rows:
            student = match.students.get(row["submission"])
            if student is not None and (id(student) not in best or _total(row) > _total(best[id(student)])):
                best[id(student)] = row
        report["unmatched"][book["lab"]] = list(match.unmatched)
        report["without_submission"][book["lab"]] = [s.key for s in match.without_submission]
        for header, piece, possible in lab_columns:
            header_cells.append(header)
            points.append(num(possible))
            for student in roster.students:
                row = best.get(id(student))
                if row is None:
                    values[id(student)].append("" if missing is None else num(missing))
                elif piece is None:
                    values[id(student)].append(num(_total(row)))
                elif piece.startswith("written:"):
                    given = row.get("written", {}).get(piece.split(":", 1)[1], {})
                    values[id(student)].append(num(given.get("score", 0.0)) if given.get("graded") else "")
                else:
                    values[id(student)].append(num(row["pieces"].get(piece, {}).get("score", 0.0)))
    destination = pathlib.Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(destination, newline="") as f:
        writer = csv.writer(f)
        if fmt == "canvas":
            writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                             *map(spreadsheet_text, header_cells)])
            writer.writerow(["    Points Possible", "", "", "", "", *points])
            for s in roster.students:
                writer.writerow([*map(spreadsheet_text, (s.name, s.lms_id, s.student_id, s.login, s.section)),
                                 *values[id(s)]])
        else:
            writer.writerow(["Full name", "Email address", "ID number", *map(spreadsheet_text, header_cells)])
            for s in roster.students:
                writer.writerow([*map(spreadsheet_text, (s.name, s.email, s.student_id)), *values[id(s)]])
    return report
