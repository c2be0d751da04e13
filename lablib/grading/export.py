"""Grades for the LMS: ``lablib export canvas|moodle`` of one or more graded labs.

Each grading output (``lablib grade ... -o OUT``) holds a lab's ``grades.json``, whose rows
carry the identity resolved at grading (:mod:`~lablib.grading.gradebook.identity`: the roster's
student, or what the LMS download said). The export writes one row per student and one
column per lab total: the tests' points plus the points people gave the written answers
(``lablib review``) less the late penalty; ``pieces=True`` adds one column per graded
piece and per written question after each total.

Nothing is lost or under-counted without a word:

* Students are who the gradebooks say they are. A roster given to the export only adds
  columns and students: a row joins the roster's student that has its id (student id,
  Canvas user id, e-mail, Moodle participant id, login: compared field by field) and
  none of whose lasting ids (student id, Canvas user id, e-mail, login) differ; a Moodle
  participant id is one assignment's, not the person's (each lab's worksheet gives a
  student another), so one that differs tells nothing. A row that matched no student at
  grading (or was graded without a roster) is first matched to this roster by the grading
  rules; a row that joins no one is still written, from its own identity, and counted as
  not in the roster. Every roster student is written, with or without work.
* A group's members each get their own total: the late penalty under their own extension
  or due date (``grades.json``'s ``members``).
* A row whose lateness could not be computed (a submission time or an extension that
  cannot be read: no penalty, :func:`~lablib.grading.gradebook.late.not_computed`), or
  one the LMS marks late without a time (Canvas's ``LATE``: no penalty computed), is
  refused unless ``allow_unknown_lateness``; then exported without a penalty, the student
  noted.
* A student without a submission for a lab gets ``0`` and a note (``missing="zero"``, the
  default) or an empty cell (``missing="blank"``: no grade in the LMS). A file handed in
  but not graded (a zip, a ``.ipynb.txt``: the gradebook's ``skipped``) whose LMS names
  say whose it is (a Canvas file name's user id, a Moodle folder's participant id,
  resolved as at grading) is that student's: one without a graded row is noted with
  what they handed in and why it was not graded, not as without a submission.
* A row whose status is ``grader-error`` (the grader failed on some tests, not the
  student, who was told the instructor will regrade them) is refused unless
  ``allow_grader_errors``; then exported as scored. Every exported row whose status is
  not ``ok`` (``invalid-notebook``, ``timeout``, ``memory``, ``crashed``, a graded cell
  that raised or is missing) is noted with what it did to the points.
* A gradebook with written answers still to grade, or graded before the student changed
  them, is refused (:class:`ExportError`) unless ``allow_ungraded``: those answers then
  count 0 (an answer changed since graded: its earlier grade) and each such student gets a
  note. A gradebook older than its reviews
  (``reviews.sqlite`` changed since ``grades.json`` was written) is refused: run
  ``lablib report`` first.
* Notes: Moodle's file has a ``Notes`` column (map it to nothing, or to a feedback
  field; written as HTML text, ``<``, ``>`` and ``&`` escaped, as Moodle shows feedback); Canvas makes a new assignment of every column it does not know, so its notes go
  to a file beside the import, ``<output>.notes.csv``, written for both formats.

* ``canvas``: Canvas's gradebook import layout: ``Student, ID, SIS User ID, SIS Login ID,
  Section`` and the lab columns, with the "Points Possible" row Canvas's own export has.
  Canvas matches students by ``ID`` or ``SIS User ID`` (export the roster from Canvas's
  gradebook to have them) and a column by its name: an existing assignment's
  ``Name (id)`` (``columns``), else a new assignment is made. A column whose assignment
  the roster's "Points Possible" row says is out of other points than the lab's is
  refused unless ``scale_to_points_possible`` (each score scaled to the assignment's
  points, rounded to 2 decimals). A row without an ``ID``, ``SIS User ID`` or ``SIS Login
  ID`` is matched by Canvas by its name: refused where another row has that name, noted
  otherwise.
* ``moodle``: ``Full name, Email address, ID number``, the lab columns and ``Notes``, for
  Moodle's "Import grades from CSV": map ``Email address`` to the user field of the same
  name (``ID number``, where no student has an e-mail: the summary says which) and each
  lab column to its grade item. Moodle's import keeps the previous row's user for a row
  whose mapped field is blank, and applies rows in order: a student without that field
  is left out of the file and listed (the notes, with their grades, and ``left_out``), and
  two rows with one e-mail address (or ID number) are refused. Moodle caps a grade at its
  item's maximum: with a grading worksheet as the roster (its "Maximum Grade") and one
  grade column out of other points, the export is refused unless
  ``scale_to_points_possible``; with several columns the summary asks to check each item.

Two lab columns with one header (two labs of one title, or ``columns`` giving two labs one
header) are refused: Canvas's import reads the first column of a name only.

A student with several notebooks in one lab is refused unless ``allow_several`` (then the
best counts, noted). Text cells are made inert for
spreadsheets, as in ``grades.csv``.

Example::

    report = export("canvas", ["grades/lab1", "grades/lab2"], Roster.load("canvas.csv"), "canvas_import.csv")
    report["summary"]   # 'wrote canvas_import.csv: 36 students (34 with every total, ...)'
"""

from __future__ import annotations

import csv
import html
import os
import pathlib
import re
import unicodedata

from lablib.grading.atomic import atomic_write
from lablib.grading.gradebook import GradebookError, GradebookFolder, feedback_stems
from lablib.grading.gradebook.identity import STUDENT_FIELDS, RosterIndex, resolve
from lablib.grading.lms import clean_label, fold, moodle_number
from lablib.grading.report.gradebook_csv import spreadsheet_text
from lablib.grading.report.text import num, visible_controls
from lablib.grading.results import PROBLEMS, Kind, Status
from lablib.grading.review.store import DB_NAME, ReviewError, changes_since
from lablib.grading.submissions import (
    NO_NOTEBOOK_FOLDER,
    NOT_A_NOTEBOOK,
    Found,
    skipped_submission,
)

__all__ = ["FORMATS", "MISSING", "export", "ExportError"]

FORMATS = ("canvas", "moodle")
#: What a student without a submission gets: ``zero`` (0 and a note) or ``blank`` (no grade).
MISSING = ("zero", "blank")
#: The fields by which a gradebook row joins a roster student, each compared with itself.
_JOIN = ("student_id", "lms_id", "email", "participant_id", "login")
#: The fields that name a person in every lab: one that differs is another student. Not
#: Moodle's participant id: each assignment gives a student another.
_STABLE = ("student_id", "lms_id", "email", "login")
#: The user fields a Moodle import file's rows can be matched by: person field -> column.
_MOODLE_KEYS = {"email": "Email address", "student_id": "ID number"}
#: The fields Canvas's import matches a row by (its ID, SIS User ID and SIS Login ID).
_CANVAS_IDS = ("lms_id", "student_id", "login")
#: How the notes name a person field.
_FIELD_NAMES = {
    "student_id": "student id",
    "lms_id": "LMS user id",
    "email": "e-mail",
    "login": "login",
}


class ExportError(ValueError):
    """An export that cannot be made as asked (the message says why and what to do)."""


def _gradebook(folder) -> dict:
    path = pathlib.Path(folder) / "grades.json"
    try:
        data = GradebookFolder(folder).read()
    except GradebookError as exc:
        raise ExportError(str(exc)) from None
    except OSError as exc:
        raise ExportError(
            f"{path} cannot be read ({exc}); pass the output folders of `lablib grade`."
        ) from None
    try:
        newer = changes_since(
            pathlib.Path(folder) / DB_NAME, data.get("reviews_through", 0), data.get("reviews_log")
        )
    except ReviewError as exc:
        raise ExportError(str(exc)) from None
    if newer:
        raise ExportError(
            f"{folder}: the written answers' grades changed {newer} time(s) since grades.json was "
            f'written; run `lablib report {folder}` (or "Write the gradebook" in the review page) '
            f"and export again."
        )
    return data


def _total(row: dict) -> float:
    """A row's total: the tests' points plus the people's points less the late penalty
    (``total``, written for a lab with written answers or a late policy), else the tests'
    points."""
    return float(row.get("total", row["score"]))


def _pending(row: dict) -> tuple[int, int]:
    """``(never graded, graded before the answer changed)`` written answers of a row."""
    written = row.get("written") or {}
    stale = sum(bool(w.get("stale")) for w in written.values() if isinstance(w, dict))
    never = sum(not w.get("graded") for w in written.values() if isinstance(w, dict))
    return never, stale


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
            columns.append(
                (f"{header}: written {question}", f"written:{question}", about.get("points", 0.0))
            )
    return columns


class _Person:
    """One student of the export: the roster's fields or a gradebook identity's."""

    def __init__(self, fields: dict, in_roster: bool):
        self.fields = {f: str(fields.get(f, "") or "") for f in STUDENT_FIELDS}
        self.in_roster = in_roster
        self.rows: dict[str, list] = {}  # lab -> gradebook rows
        self.skipped: dict[str, list] = {}  # lab -> [(path, why)] handed in, not graded
        self.notes: list[str] = []
        self.staff_notes: list[str] = []  # the notes file's only, never the Moodle file's Notes
        self.excused: set[str] = set()  # Canvas columns marked EX in the roster given (folded)

    def joins(self, identity: dict) -> int:
        """How many join fields ``identity`` shares with this student (0: another student)."""
        return sum(
            1 for f in _JOIN if identity.get(f) and fold(identity[f]) == fold(self.fields[f])
        )

    def clashes(self, identity: dict) -> bool:
        """``identity`` gives a lasting id (:data:`_STABLE`) a different value: another
        student (a Moodle participant id that differs is another lab's)."""
        return any(
            identity.get(f) and self.fields[f] and fold(identity[f]) != fold(self.fields[f])
            for f in _STABLE
        )


def _identities(entry: dict, roster=None, index=None) -> list[dict]:
    """The people a gradebook row belongs to: its identity (and a group's other
    submitters); for a gradebook written before identities were kept, its roster
    ``student``, else its name. A row that matched no student at grading (or was graded
    without a roster) is matched to ``roster`` here by the grading rules
    (:func:`lablib.grading.gradebook.identity.resolve`); a row matched at grading keeps its
    student, but for a folder the rules refuse as a Moodle Default group's (one a gradebook
    written before those rules kept matched: :meth:`RosterIndex.default_refused
    <lablib.grading.gradebook.identity.RosterIndex.default_refused>`), resolved again."""
    identity = entry.get("identity")
    if not isinstance(identity, dict) or not identity:
        student = entry.get("student")
        identity = (
            dict(student, matched=True)
            if isinstance(student, dict)
            else {"key": entry["submission"]}
        )
    lms = identity.get("lms") if isinstance(identity.get("lms"), dict) else {}
    doubted = index is not None and index.default_refused(lms)  # e.g. matched before the rule
    if roster is not None and (not identity.get("matched") or doubted):
        found = Found(
            str(entry["submission"]),
            pathlib.Path(str(entry.get("path", ""))),
            str(identity.get("where", "")),
            str(identity.get("folder", "")),
            dict(identity.get("lms") or {}),
        )
        again = resolve(found, roster, index=index)
        if again.get("matched"):
            identity = again | {
                "matched_by": f"{again['matched_by']} (matched by the export's roster)"
            }
        elif again.get("why_unmatched") or doubted:
            identity = again  # e.g. a Moodle group id this roster gives a student
    people = [identity]
    for other in identity.get("others") or []:  # a group's other members
        if isinstance(other, dict) and any(other.get(f) for f in (*_JOIN, "key", "name")):
            people.append(other)
    return people


def _joined(people: list[_Person], identity: dict) -> _Person | None:
    """The student of the export ``identity`` joins: the one with its LMS user id (Canvas's
    ID: the LMS's own key, which no student chooses and no spreadsheet reshapes), whatever
    else differs (a SIS Login ID renamed since grading, a SIS User ID whose leading zeros
    a spreadsheet dropped: noted); else the one sharing most ids, none clashing; or None."""
    lms_id = fold(str(identity.get("lms_id") or "").strip())
    if lms_id:
        same = [p for p in people if fold(p.fields["lms_id"].strip()) == lms_id]
        if len(same) == 1:
            person = same[0]
            differ = [
                f"{_FIELD_NAMES.get(f, f)} {identity[f]!r} at grading, {person.fields[f]!r} now"
                for f in _STABLE
                if f != "lms_id"
                and identity.get(f)
                and person.fields[f]
                and fold(str(identity[f])) != fold(person.fields[f])
            ]
            if differ:
                note = (
                    f"matched by the LMS user id {person.fields['lms_id']!r} although "
                    f"{'; '.join(differ)}: check the roster given is this class's"
                )
                if note not in person.staff_notes:
                    person.staff_notes.append(note)
            return person
    best = max(
        ((p.joins(identity), i) for i, p in enumerate(people) if not p.clashes(identity)),
        default=(0, -1),
    )
    return people[best[1]] if best[0] > 0 else None


def _place(people: list[_Person], identity: dict, submission: str, lab: str) -> _Person:
    """The export's student of one identity: the roster student it joins (most shared
    ids, none clashing), else a student of its own (kept, counted as not in the roster)."""
    joined = _joined(people, identity)
    if joined is not None:
        return joined
    key = str(identity.get("key") or submission)
    for p in people:  # a row of the same unmatched person in another lab
        if (  # (a person without a name was given their key as one)
            not p.in_roster
            and fold(p.fields.get("name") or "") == fold(identity.get("name") or key)
            and p.fields.get("_key") == fold(key)
        ):
            return p
    person = _Person(identity, in_roster=False)
    if not person.fields["name"]:
        person.fields["name"] = str(identity.get("key") or submission)
    person.fields["_key"] = fold(identity.get("key") or submission)
    people.append(person)
    return person


def export(
    fmt: str,
    outputs,
    roster,
    destination,
    *,
    columns=None,
    pieces: bool = False,
    missing: str = "zero",
    allow_ungraded: bool = False,
    allow_unknown_lateness: bool = False,
    allow_several: bool = False,
    allow_grader_errors: bool = False,
    scale_to_points_possible: bool = False,
) -> dict:
    # Over 80 lines for its signature and docstring; code: 53 lines.
    """Write the LMS import file of the gradebooks in ``outputs``.

    Args:
        fmt: ``"canvas"`` or ``"moodle"``.
        outputs: grading output folders (each with a ``grades.json``), one per lab.
        roster: the class list (a :class:`~lablib.grading.gradebook.roster.Roster`), or None: its
            students come first, in its order, and every one of them is written (for
            Moodle: each with the user field the file is matched by).
        destination: the CSV file to write.
        columns: lab name -> column header (default: the lab's title).
        pieces: add a column per graded piece after each lab's total.
        missing: ``"zero"`` (0 and a note) or ``"blank"`` (empty: no grade) for a student
            without a submission.
        allow_ungraded: export a gradebook with written answers still to grade (counted
            0, each such student noted) instead of refusing it.
        allow_unknown_lateness: export rows whose lateness could not be computed (a
            submission time or an extension that cannot be read) without a late penalty,
            each such student noted, instead of refusing them.
        allow_several: export a student with several rows in one lab (several notebooks
            or attachments handed in) with the best one's total, noted, instead of refusing
            them (the best of several would let a student hedge against the hidden tests,
            one variant per notebook).
        allow_grader_errors: export rows whose status is ``grader-error`` (the grader
            failed on some tests, not the student) with their scores as they are, each
            such student noted, instead of refusing them.
        scale_to_points_possible: scale a column's scores to the points its assignment
            is out of where the roster says other points than the lab's (rounded to 2
            decimals), instead of refusing the export: Canvas's gradebook export by its
            "Points Possible" row, a Moodle grading worksheet (one column exported) by its
            "Maximum Grade".

    Returns:
        ``{"students", "with_totals", "ungraded": {lab: [keys]}, "missing": {lab: [keys]},
        "lateness_unknown": {lab: [keys]}, "not_in_roster": [keys], "unmatched": {lab:
        [submission names]}, "unmatched_reasons": {lab: {submission name: why}},
        "without_submission": {lab: [keys]}, "left_out": [{"name", "key", "why", "advice", "submissions",
        "grades"}], "matched_by": the Moodle user field or None, "statuses": {lab: {key:
        status}}, "not_graded": {lab: {key: [files]}}, "skipped_unmatched": {lab: [paths]},
        "scaled": {header: [lab points, Points Possible or Maximum Grade]}, "scaled_to",
        "maximum_unchecked": None or {"maximum_grade", "why", "columns": {header:
        points}} (a Moodle worksheet's maximum that could not be checked: several
        columns, or no number), "matched_by_name": [keys], "held": {lab: [keys]},
        "left_out_empty", "empty_cells", "excused": {lab: [keys]}, "format", "labs", "notes": path or
        None, "summary", "roster_given", "identifiers_as_given": [keys]}``: ``unmatched``
        with a roster its rows joined to none of its students, without one the rows
        matched to no one at grading; ``identifiers_as_given`` the students written with an
        id or e-mail the LMS matches by that starts as a formula may (written as given,
        noted); ``late_deducted`` ({lab: [keys]}) the students whose total
        exported has lablib's late penalty deducted (Canvas's own late policy, where on,
        deducts again); ``group_totals_differ`` ({lab: [submission names]}) a Canvas file's
        group submissions whose members' totals differ; ``excused`` the students whose
        cell of a Canvas column is
        ``EX`` in the Canvas roster given (written as ``EX``: any other value un-excuses);
        ``left_out`` lists the students not written to the file (Moodle: no value in the
        field its rows are matched by, or no grade at all, ``left_out_empty`` of them:
        Moodle's import clears the grade of an empty cell; Canvas: rows its import would
        match by a name alone), with their grades; ``empty_cells`` the empty cells of a
        Moodle file's rows written, each noted; ``missing`` the students with neither a graded row nor a file
        handed in (both get ``missing``'s 0 or blank); ``statuses`` the exported rows whose status is not ``ok``;
        ``not_graded`` the students without a graded row who handed in files that were
        not graded (a zip, a ``.ipynb.txt``: the gradebook's ``skipped``, told to them by
        the LMS's file names), ``skipped_unmatched`` such files told to no student of the
        export; ``matched_by_name`` the Canvas rows without an ID, SIS User ID or SIS
        Login ID (Canvas matches them by name); ``held`` the roster's students without a
        row who are left empty, not given ``missing``'s 0, because a graded row that
        matched no one may be theirs (a Canvas file under their user id with another
        name, a Canvas download graded anonymously).

    Raises:
        ExportError: an unknown format or ``missing`` value, a gradebook that cannot be
            read or is older than its reviews, two outputs of one lab, a ``columns`` lab
            no output grades, two columns with one header, written answers still to
            grade without ``allow_ungraded``, lateness not computed without
            ``allow_unknown_lateness``, several rows of one student in one lab without
            ``allow_several``, a row whose status is ``grader-error`` without
            ``allow_grader_errors``, (Canvas) a column whose roster "Points Possible"
            differs from the lab's without ``scale_to_points_possible``, or two rows
            without an id that share a name, or (Moodle) two rows with one e-mail address
            or ID number, or no row with either.
    """
    columns = dict(columns or {})
    books = _checked_books(fmt, outputs, columns, missing, pieces)
    _check_destination(fmt, pathlib.Path(destination), outputs, roster)
    labs = [b["lab"] for _, b in books]
    scales = _points_scales(fmt, books, columns, pieces, roster, scale_to_points_possible)
    _refuse_ungraded(books, allow_ungraded)
    _refuse_unknown_lateness(books, allow_unknown_lateness)
    _refuse_grader_errors(books, allow_grader_errors)
    people = [
        _Person({f: getattr(s, f, "") for f in STUDENT_FIELDS}, in_roster=True)
        for s in (roster.students if roster is not None else ())
    ]
    if fmt == "canvas" and roster is not None:
        for i, p in enumerate(people):
            p.excused = {fold(h) for h in roster.excused_in(i)}
    report = {"students": 0, "labs": labs, "unmatched": {}, "unmatched_reasons": {}}
    report |= {"without_submission": {}, "ungraded": {}, "missing": {}, "lateness_unknown": {}}
    report |= {"not_in_roster": [], "with_totals": 0, "notes": None, "left_out": []}
    report |= {"left_out_empty": 0, "empty_cells": 0, "excused": {}}
    report["late_deducted"] = {}  # lab -> keys whose exported total has lablib's late penalty
    report["format"] = fmt
    report["roster_given"] = roster is not None
    report["group_totals_differ"] = {}  # lab -> group submissions whose members' totals differ
    report |= {"statuses": {}, "not_graded": {}, "skipped_unmatched": {}, "matched_by_name": []}
    report["held"] = {}
    report["scaled"] = {header: list(pair) for header, pair in scales.items()}
    report["scaled_to"] = "Maximum Grade" if fmt == "moodle" else "Points Possible"
    report["maximum_unchecked"] = _maximum_unchecked(fmt, books, columns, pieces, roster)
    index = _place_rows(people, books, roster, report)
    _place_skipped(people, books, roster, index, report)
    _refuse_several(people, allow_several)
    header_cells, points, values = _grade_columns(
        people, books, columns, pieces, missing, report, scales
    )
    for p in people:
        if not p.in_roster and roster is not None:
            p.notes.insert(0, "not in the roster given to the export (identity kept at grading)")
    report["not_in_roster"] = [_key(p) for p in people if not p.in_roster]
    report["students"] = len(people)
    report["with_totals"] = sum(all(p.rows.get(lab) for lab in labs) for p in people)

    destination = pathlib.Path(destination)
    field, rows = None, people
    if fmt == "moodle":
        field, rows = _moodle_rows(people, destination, header_cells, values, report)
    else:
        rows = _canvas_rows(people, roster is not None, destination, header_cells, values, report)
        _groups_apart(people, books, columns, report)
    report["matched_by"] = None if field is None else _MOODLE_KEYS[field]
    _identifiers_as_given(fmt, rows, destination, report)
    destination.parent.mkdir(parents=True, exist_ok=True)
    _write_import_file(fmt, destination, rows, header_cells, points, values)
    notes_path = _write_notes(destination, people)
    report["notes"] = None if notes_path is None else str(notes_path)
    report["summary"] = _summary(destination, report, missing, notes_path)
    return report


def _check_destination(fmt: str, destination: pathlib.Path, outputs, roster) -> None:
    """Refuse (:class:`ExportError`) an import file that would replace what the export
    reads: a folder (an ``IsADirectoryError`` traceback before), the roster given (``-o``
    and ``--roster`` one file: the roster was silently replaced), or a file in a grading
    output folder, which lablib writes and reads (``-o out/grades.json`` replaced the
    gradebook). Its notes file (``<name>.notes.csv`` beside it) is held to the same."""
    notes = destination.with_name(destination.stem + ".notes.csv")
    if destination.is_dir():
        raise ExportError(
            f"-o {str(destination)!r} is a folder; give the import file to write (a CSV "
            f"file), e.g. -o {fmt}_import.csv. Nothing was written."
        )
    kept = {os.path.realpath(destination), os.path.realpath(notes)}
    source = getattr(roster, "source", "") if roster is not None else ""
    if source and os.path.realpath(source) in kept:
        raise ExportError(
            f"-o {str(destination)!r} would replace the roster given ({source!r}), which the "
            f"export reads; write the import file under another name. Nothing was written."
        )
    for folder in outputs:
        inside = os.path.realpath(folder) + os.sep
        if any(path.startswith(inside) for path in kept):
            raise ExportError(
                f"-o {str(destination)!r} is inside the grading output folder {str(folder)!r}, "
                f"whose files lablib writes and reads (grades.json, the reports, the reviews); "
                f"write the import file outside it, e.g. beside it. Nothing was written."
            )


def _checked_books(fmt: str, outputs, columns: dict, missing: str, pieces: bool) -> list:
    """``[(folder, gradebook)]`` of ``outputs``, once the format, ``missing``, the labs
    (one output each), ``columns`` and the headers are checked (:class:`ExportError`)."""
    if fmt not in FORMATS:
        raise ExportError(f"Unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}.")
    if missing not in MISSING:
        raise ExportError(
            f"--missing {missing!r}: expected 'zero' (0 and a note) or 'blank' (no grade)."
        )
    books = [(pathlib.Path(folder), _gradebook(folder)) for folder in outputs]
    labs = [b["lab"] for _, b in books]
    if len(set(labs)) != len(labs):
        raise ExportError(
            f"Two of the outputs hold the same lab ({labs}); pass one output per lab."
        )
    unknown = set(columns) - set(labs)
    if unknown:
        raise ExportError(
            f"--column names {sorted(unknown)}, which none of the outputs grades (they grade {labs})."
        )
    _refuse_shared_headers(fmt, books, columns, pieces)
    return books


def _summary(destination, report: dict, missing: str, notes_path) -> str:
    """The export's one line: what was written, what is missing, noted or left out."""
    ungraded = len({k for keys in report["ungraded"].values() for k in keys})
    missing_any = len({k for keys in report["missing"].values() for k in keys})
    unknown = len({k for keys in report["lateness_unknown"].values() for k in keys})
    line = (
        f"wrote {destination}: {report['students']} students ({report['with_totals']} with a submission for every "
        f"lab; {missing_any} missing one or more ({'0, noted' if missing == 'zero' else 'left empty'}); "
        f"{ungraded} with written answers not graded or changed since (noted); {_outside(report)}), "
        f"labs {', '.join(report['labs'])}"
    )
    if unknown:
        line += f"; {unknown} with lateness not computed (no late penalty, noted)"
    held = len({k for keys in report["held"].values() for k in keys})
    if held:
        line += (
            f"; {held} without a submission left empty, not 0: a graded notebook that "
            f"matched no one may be theirs (noted; unmatched lists them)"
        )
    line += _more_summary(report, missing)
    if report["matched_by"]:
        line += f"; in Moodle map {report['matched_by']} to the user field {report['matched_by']}"
    nothing = report["left_out_empty"]
    if len(report["left_out"]) > nothing and report["matched_by"]:
        line += (
            f"; {len(report['left_out']) - nothing} left out of the file, without an "
            f"{report['matched_by']} for Moodle to match (their grades are in the notes: enter "
            f"them by hand)"
        )
    if nothing:
        line += (
            f"; {nothing} without any grade left out of the file (Moodle's import clears the "
            f"grade of an empty cell)"
        )
    if report["empty_cells"]:
        line += (
            f"; {report['empty_cells']} empty cell(s) in rows written: Moodle's import clears "
            f"the grade there (noted)"
        )
    if report["left_out"] and not report["matched_by"]:  # a Canvas file
        line += (
            f"; {len(report['left_out'])} left out of the file, rows Canvas's import would match "
            f"by a name alone or read as its points row (their grades are in the notes: enter "
            f"them by hand)"
        )
    return line + (f"; notes in {notes_path}" if notes_path else "")


def _outside(report: dict) -> str:
    """The summary's count of the students not in the roster; without a roster given,
    that none was (every student is then from the gradebooks' identities)."""
    if not report.get("roster_given", True):
        return "no roster given: each student as identified at grading"
    return f"{len(report['not_in_roster'])} not in the roster"


def _more_summary(report: dict, missing: str) -> str:
    """The summary line's parts for statuses, files not graded, scaled columns and Canvas
    rows matched by name ("" when there are none)."""
    line = ""
    statuses = len({k for keys in report["statuses"].values() for k in keys})
    if statuses:
        line += f"; {statuses} with a status other than ok (noted)"
    not_graded = len({k for keys in report["not_graded"].values() for k in keys})
    if not_graded:
        line += (
            f"; {not_graded} handed in only files that were not graded "
            f"({'0' if missing == 'zero' else 'left empty'}, noted)"
        )
    stray = sum(len(paths) for paths in report["skipped_unmatched"].values())
    if stray:
        line += (
            f"; {stray} file(s) not graded that name no student of the export (listed in the "
            f"grading summary's Not graded)"
        )
    for header, (theirs, target) in report["scaled"].items():
        line += f"; {header} scaled from {num(theirs)} to its {report['scaled_to']} {num(target)}"
    unchecked = report.get("maximum_unchecked")
    if unchecked:
        line += (
            f"; the roster's Maximum Grade ({unchecked['maximum_grade']}) {unchecked['why']}: "
            f"check that each Moodle grade item is out of its column's points ("
            + ", ".join(f"{h} {num(p)}" for h, p in unchecked["columns"].items())
            + "), as Moodle caps a grade at its item's maximum"
        )
    deducted = sum(len(keys) for keys in report["late_deducted"].values())
    if deducted and report["format"] == "canvas":
        line += (
            f"; {deducted} total(s) with lablib's late penalty deducted: turn off Canvas's "
            f"automatic late policy for these assignments, or its import deducts again"
        )
    apart = sum(len(names) for names in report["group_totals_differ"].values())
    if apart:
        line += (
            f"; {apart} group submission(s) whose members' totals differ: in Canvas tick 'Assign "
            f"grades to each student individually' for the assignment (noted)"
        )
    excused = sum(len(keys) for keys in report["excused"].values())
    if excused:
        line += f"; {excused} cell(s) excused in Canvas kept as EX (noted)"
    if report["matched_by_name"]:
        line += (
            f"; {len(report['matched_by_name'])} without an ID, SIS User ID or SIS Login ID "
            f"(Canvas matches them by name, noted)"
        )
    if report.get("identifiers_as_given"):
        line += (
            f"; {len(report['identifiers_as_given'])} with an id or e-mail starting with "
            f"= + - or @, written as the LMS gave it for its import to match (noted): do not "
            f"open the file in a spreadsheet"
        )
    return line


def _moodle_rows(
    people: list[_Person], destination, header_cells, values: dict, report: dict
) -> tuple[str, list[_Person]]:
    """``(the user field a Moodle file's rows are matched by, the people written)``.

    The field is the e-mail address where any student has one, else the ID number.
    Moodle's import keeps the previous row's user for a row whose field is blank: such a
    student is left out of the file, noted with their grades and listed in
    ``report["left_out"]``. Two rows with one value would both reach one student, the
    second overwriting the first: refused (:class:`ExportError`), as is a file no row of
    which could be matched."""
    field = next((f for f in _MOODLE_KEYS if any(p.fields[f].strip() for p in people)), None)
    if field is None:
        raise ExportError(
            f"No student of the export has an e-mail address or an ID number, the fields Moodle's "
            f"grade import matches rows by (got {len(people)} students, e.g. "
            f"{', '.join(p.fields['name'] for p in people[:3])}); nothing was written. Give the "
            f"export a roster with them: --roster with Moodle's grading worksheet or grade export."
        )
    label = _MOODLE_KEYS[field]
    written, seen = [], {}
    for p in people:
        value = fold(p.fields[field].strip())
        if not value:
            _leave_out(p, label, destination, header_cells, values[id(p)], report)
            continue
        if value in seen:
            raise ExportError(
                f"Two rows of the Moodle import would have the {label} {p.fields[field]!r}: "
                f"{_described(seen[value])} and {_described(p)}. Moodle's import applies rows in order, "
                f"so the second would overwrite the first's grades; nothing was written. Check the "
                f"students' identities in the gradebooks (grades.json) and the roster given (--roster): "
                f"one person must be one roster row."
            )
        seen[value] = p
        if not any(values[id(p)]):
            why = (
                "no grade to import (every cell empty), and Moodle's import clears the grade "
                "of an empty cell: a grade entered in Moodle by hand would be lost"
            )
            _leave_out(p, label, destination, header_cells, values[id(p)], report, why, "Moodle")
            report["left_out_empty"] += 1
            continue
        written.append(p)
    _empty_cells(written, header_cells, values, report)
    return field, written


def _empty_cells(written: list[_Person], header_cells, values: dict, report: dict) -> None:
    """Notes for the empty cells of a Moodle file's rows written (a lab not submitted
    with ``--missing blank``, a written answer not graded): Moodle's import clears the
    grade there, one entered by hand included; the export's summary counts them."""
    count = 0
    for p in written:
        empty = [h for h, c in zip(header_cells, values[id(p)]) if c == ""]
        if empty:
            count += len(empty)
            p.staff_notes.append(
                f"empty in the Moodle file: {', '.join(empty)}; Moodle's import clears the grade "
                f"there (enter it after the import)"
            )
    report["empty_cells"] = count


def _excused(person: _Person, lab: str, title: str, report: dict) -> None:
    """A student excused in Canvas for ``lab``: not "without a submission" (no 0 given),
    nor counted as late."""
    person.notes = [n for n in person.notes if not n.startswith(f"{title}: no submission")]
    key = _key(person)
    for listed in (report["missing"].get(lab), report["late_deducted"].get(lab)):
        if listed is not None and key in listed:
            listed.remove(key)


def _groups_apart(people: list[_Person], books, columns: dict, report: dict) -> None:
    """Group submissions whose members' totals differ (each member's own due date or
    extension): Canvas's import grades a group assignment not graded individually once
    per group, each row over the whole group, so the last member's total would be every
    member's. Each member is noted; ``report["group_totals_differ"]`` lists them."""
    for _folder, book in books:
        lab = book["lab"]
        title = columns.get(lab, book.get("title") or lab)
        by_submission: dict[str, list] = {}
        for p in people:
            rows = p.rows.get(lab) or []
            if rows:
                best = max(rows, key=_total)
                by_submission.setdefault(str(best.get("submission")), []).append((p, best))
        for name, members in by_submission.items():
            totals = {num(_total(row)) for _, row in members}
            if len(members) < 2 or len(totals) < 2:
                continue
            report["group_totals_differ"].setdefault(lab, []).append(name)
            for p, row in members:
                p.notes.append(
                    f"{title}: group submission {name!r}, whose members' totals differ (their "
                    f"own due dates): this member's is {num(_total(row))}. In Canvas, grade "
                    f"the assignment's groups individually, or its import gives every member "
                    f"the last row's total"
                )


def _described(person: _Person) -> str:
    """A student of the export in words, for a message: name, ids, labs, where from."""
    ids = ", ".join(f"{f} {person.fields[f]}" for f in _JOIN if person.fields[f])
    labs = ", ".join(f"{lab}'s {rows[0]['submission']!r}" for lab, rows in person.rows.items())
    where = "the roster" if person.in_roster else "not in the roster"
    return f"{person.fields['name']!r} ({ids or 'no id'}; {where}; {labs or 'no submission'})"


def _unnamed(person: _Person) -> str:
    """A student without a name in words: the ids they have, else their submissions."""
    ids = ", ".join(f"{f} {person.fields[f]}" for f in _JOIN if person.fields[f].strip())
    labs = ", ".join(f"{lab}'s {rows[0]['submission']!r}" for lab, rows in person.rows.items())
    where = "a roster row" if person.in_roster else "a row not in the roster"
    return f"{where} with {ids or labs or 'nothing to name it by'}"


def _leave_out(
    person: _Person, label: str, destination, header_cells, cells, report, why: str = "",
    lms: str = "Canvas",
) -> None:  # fmt: skip
    """Note a student left out of the import file with their grades, and list them in
    ``report["left_out"]``: in a Moodle file (``why`` empty), no ``label`` to match them
    by; else ``why``. ``lms``: the LMS the file is for."""
    grades = {h: c for h, c in zip(header_cells, cells) if c != ""}
    said = "; ".join(f"{h} {c}" for h, c in grades.items()) or "no grade"
    if not why:
        lms = "Moodle"
    advice = (
        f"Enter them in {lms} by hand, or add the student with their {label} to the roster "
        f"(--roster) and export again"
        if grades or not why
        else f"Nothing changes in {lms} for them"
    )
    why = f"not written to {pathlib.Path(destination).name}: " + (
        why
        or f"no {label} for Moodle to match this student by (Moodle's import would give the "
        f"grades of a row without one to the student of the row above)"
    )
    person.notes.insert(0, f"{why}; grades: {said}. {advice}")
    handed = sorted({str(r.get("submission")) for rows in person.rows.values() for r in rows})
    report["left_out"].append(
        {
            "name": person.fields["name"],
            "key": _key(person),
            "why": why,
            "grades": grades,
            "advice": advice,
            "submissions": handed,
        }
    )


def _refuse_shared_headers(fmt: str, books, columns: dict, pieces: bool) -> None:
    """Raise :class:`ExportError` when two columns of the import file would have one
    header (two labs of one title, ``columns`` giving two labs one header, or a lab
    headed as one of the file's own columns): Canvas's import finds a column by its
    name, the first of that name, so the other lab's grades would be lost."""
    fixed = (
        ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
        if fmt == "canvas"
        else ("Full name", "Email address", "ID number", "Notes")
    )
    owner = {spreadsheet_text(name): f"the file's own column {name!r}" for name in fixed}
    for _folder, book in books:
        lab = book["lab"]
        title = columns.get(lab, book.get("title") or lab)
        for header, _piece, _possible in _lab_columns(book, title, pieces):
            cell = spreadsheet_text(header)
            if cell in owner:
                raise ExportError(
                    f"Two columns of the import file would be headed {header!r}: {owner[cell]} and "
                    f"lab {lab}'s (title {book.get('title')!r}). The LMS's import reads the first "
                    f"column of a name only, so the other's grades would be lost; nothing was "
                    f"written. Give each lab its own header: --column {lab}='<another header>' "
                    f"(Canvas: an existing assignment's 'Name (id)')."
                )
            owner[cell] = f"lab {lab}'s (title {book.get('title')!r})"


def _refuse_ungraded(books, allow_ungraded: bool) -> None:
    """Raise :class:`ExportError` when a gradebook holds written answers never graded or
    changed since, unless ``allow_ungraded``."""
    pending = {}
    for _folder, book in books:
        rows = [(r["submission"], *_pending(r)) for r in book["submissions"]]
        waiting = [(name, never, stale) for name, never, stale in rows if never or stale]
        if waiting:
            pending[book["lab"]] = waiting
    if pending and not allow_ungraded:
        parts = []
        for folder, book in books:
            if book["lab"] in pending:
                w = pending[book["lab"]]
                parts.append(
                    f"{folder}: {len(w)} submissions have {sum(n for _, n, _ in w)} written answers never "
                    f"graded and {sum(s for _, _, s in w)} changed since they were graded "
                    f"(e.g. {', '.join(n for n, _, _ in w[:3])}); run `lablib review {book['lab']} {folder}`, "
                    f"then `lablib report {folder}`"
                )
        raise ExportError(
            "Refusing to export totals that count written answers nobody graded as 0, or grades given "
            "to answers changed since. "
            + "; ".join(parts)
            + ". Or pass --allow-ungraded to export them "
            "anyway (never graded: 0; changed: the earlier grade; each such student noted)."
        )


def _unknown_late(late) -> bool:
    """A row's ``late`` (``grades.json``) is lateness not computed: a time or an extension
    that could not be read (no penalty; a gradebook before ``computed`` left ``due`` empty)."""
    return isinstance(late, dict) and (late.get("computed") is False or not late.get("due"))


#: Why a row the LMS marks late without a time has no penalty (its ``late`` is null).
MARKED_LATE = (
    "the LMS marks it late (Canvas's LATE) but no submission time was found, so no penalty "
    "could be computed"
)


def _marked_late(entry: dict, policy: bool) -> bool:
    """A row of a gradebook with a late policy (``policy``) whose LMS download marks it
    late (Canvas's ``LATE``) but whose lateness is null: no time was found, no penalty
    computed."""
    identity = _kept_identity(entry)
    lms = identity.get("lms") if isinstance(identity.get("lms"), dict) else {}
    return policy and entry.get("late") is None and bool(lms.get("late"))


def _refuse_unknown_lateness(books, allow: bool) -> None:
    """Raise :class:`ExportError` when a gradebook holds rows (or group members) whose
    lateness could not be computed, unless ``allow``: their totals carry no late penalty,
    as if on time."""
    parts = []
    for folder, book in books:
        unknown = [
            (entry["submission"], late["text"])
            for entry in book["submissions"]
            for late in [entry.get("late"), *(m.get("late") for m in entry.get("members") or [])]
            if _unknown_late(late)
        ] + [
            (entry["submission"], MARKED_LATE)
            for entry in book["submissions"]
            if _marked_late(entry, bool(book.get("late_policy")))
        ]
        if unknown:
            names = sorted({name for name, _ in unknown})
            parts.append(
                f"{folder}: {len(names)} submission(s) (e.g. {', '.join(names[:3])}; "
                f"{names[0]}: {unknown[0][1]})"
            )
    if parts and not allow:
        raise ExportError(
            "Refusing to export totals without the late penalty of submissions whose lateness "
            "could not be computed (a submission time or an extension that cannot be read, or "
            "a submission the LMS marks late without its time): they would count as on time. "
            + "; ".join(parts)
            + ". Give the times with --times FILE (student,lab,submitted_at) and grade again, or "
            "run `lablib report FOLDER --roster ROSTER` with an English worksheet or a fixed "
            "roster; or pass --allow-unknown-lateness to export them without a late penalty (each "
            "such student noted)."
        )


def _refuse_several(people: list[_Person], allow: bool) -> None:
    """Raise :class:`ExportError` when a student has several rows in one lab (several
    notebooks or attachments handed in), unless ``allow``: the best one's total would
    count, and a student could hand in one variant per notebook against the hidden tests."""
    several = [
        (_key(p), lab, sorted(str(r.get("submission")) for r in rows))
        for p in people
        for lab, rows in p.rows.items()
        if len(rows) > 1
    ]
    if several and not allow:
        shown = "; ".join(f"{key} in {lab}: {', '.join(names)}" for key, lab, names in several[:5])
        strangers = _other_people(people)
        raise ExportError(
            f"Refusing to export {len(several)} student(s) with several rows in one lab "
            f"(several notebooks or attachments handed in: {shown}"
            f"{' ...' if len(several) > 5 else ''}): the best of them would count, and a "
            f"student could hand in one variant per notebook against the hidden tests. "
            + (
                f"Some of these rows were handed in by someone else, the LMS download says "
                f"({strangers}): a wrong ID typed in the LMS makes a classmate's notebook this "
                f"student's, and --allow-several would then leave its author without a grade. "
                f"Give the author's row their student in the roster's submission column (or "
                f"fix the ID in the LMS and download again), then grade again. "
                if strangers
                else ""
            )
            + "Remove the notebooks that are not the student's answer from the submissions and "
            "grade again (their rows are dropped), or pass --allow-several to export the best "
            "of each (each such student noted)."
        )


def _handed_in_by(row: dict) -> list[dict]:
    """Who the LMS download says handed a row's notebook in: its submitters (Gradescope's
    metadata) or the one person its file names (Canvas, Moodle); [] where it says none."""
    identity = row.get("identity") if isinstance(row.get("identity"), dict) else {}
    lms = identity.get("lms") if isinstance(identity.get("lms"), dict) else {}
    submitters = lms.get("submitters") if isinstance(lms.get("submitters"), list) else None
    if submitters is not None:
        return [s for s in submitters if isinstance(s, dict)]
    return [lms] if lms.get("email") or lms.get("name") else []


def _theirs(person: _Person, submitter: dict) -> bool:
    """Whether the download's ``submitter`` may be ``person``: the first id both have (an
    e-mail, the LMS's user id, a Moodle participant id, a student id) agrees; with no id
    to compare (a name only, spelled as the LMS's file names spell it), it may."""
    pairs = (
        ("email", "email"),
        ("user_id", "lms_id"),
        ("participant_id", "participant_id"),
        ("sid", "student_id"),
        ("student_id", "student_id"),
    )
    for theirs, ours in pairs:
        if submitter.get(theirs) and person.fields[ours]:
            return fold(str(submitter[theirs])) == fold(person.fields[ours])
    return True


def _other_people(people: list[_Person]) -> str:
    """For the students with several rows in one lab, the rows the LMS download says
    someone else handed in (no submitter of theirs is the student: a classmate's ID typed
    by mistake): ``key: who`` each, for :func:`_refuse_several`'s message; "" where none
    is (a group's submission the student belongs to is theirs)."""
    said = []
    for p in people:
        for rows in p.rows.values():
            if len(rows) < 2:
                continue
            others = []
            for row in rows:
                handed = _handed_in_by(row)
                if handed and not any(_theirs(p, s) for s in handed):
                    first = handed[0]
                    others.append(str(first.get("email") or first.get("name")))
            if others:
                said.append(f"{_key(p)}: {', '.join(sorted(others))}")
    return "; ".join(said[:5])


def _status(entry: dict) -> Status:
    """A gradebook row's status: its ``problems``, ``missing`` and ``raised`` (kept
    beside the ``status`` text), else read from that text (a gradebook written before
    they were kept: ``"grader-error; error: f (NameError); missing: g"``)."""
    known = {kind.value for kind in PROBLEMS}
    if "problems" in entry:
        problems = [str(p) for p in entry.get("problems") or () if str(p) in known]
        return Status.of(problems, entry.get("missing") or (), entry.get("raised") or ())
    problems, missing, raised = [], [], []
    for part in str(entry.get("status") or "ok").split("; "):
        if part.startswith("error: "):
            raised += part[len("error: ") :].split(", ")
        elif part.startswith("missing: "):
            missing += part[len("missing: ") :].split(", ")
        elif part in known:
            problems.append(part)
    return Status.of(problems, missing, raised)


#: Each problem of a status in a student's note: what happened, what it did to the points.
_STATUS_WORDS = {
    Kind.GRADER_ERROR: "grader error: the grader itself failed on some tests, not the student, "
    "who was told the instructor will regrade them; exported as the grader scored it",
    Kind.INVALID_NOTEBOOK: "invalid notebook: the file could not be read as a Jupyter notebook "
    "(empty or corrupt), nothing was graded",
    Kind.MEMORY: "out of memory: some code used more memory than allowed, those tests scored 0",
    Kind.TIMEOUT: "timeout: some code ran past the time limit, those tests scored 0",
    Kind.CRASHED: "crashed: some code ended the grader's process (sys.exit, os._exit, a "
    "crash), those tests scored 0",
}


def _status_note(entry: dict) -> str:
    """What a row's status other than ``ok`` means, in words, with its points ("" for
    ``ok``)."""
    status = _status(entry)
    if status.ok:
        return ""
    said = [_STATUS_WORDS[kind] for kind in status.problems]
    if status.raised:
        said.append(
            f"error: graded cells raised ({', '.join(status.raised)}), their tests saw only "
            f"the code before the line that failed"
        )
    if status.missing:
        said.append(
            f"missing: graded cells not found ({', '.join(status.missing)}), their tests scored 0"
        )
    top = entry.get("max_total", entry.get("max_score", 0.0))
    return f"{'; '.join(said)}; scored {num(_total(entry))} of {num(float(top))}"


def _refuse_grader_errors(books, allow: bool) -> None:
    """Raise :class:`ExportError` when a gradebook holds rows whose status is
    ``grader-error`` (the grader failed on some tests: not the student's doing, and the
    student was told the instructor will regrade), unless ``allow``."""
    parts = []
    for folder, book in books:
        stems = feedback_stems(str(entry["submission"]) for entry in book["submissions"])
        failed = sorted(
            (str(entry["submission"]), _stem(entry, stems))
            for entry in book["submissions"]
            if Kind.GRADER_ERROR in _status(entry).problems
        )
        if failed:
            files = ", ".join(f"{folder}/instructor/{stem}.md" for _name, stem in failed[:5])
            parts.append(
                f"{folder}: {len(failed)} submission(s) ({', '.join(n for n, _ in failed[:5])}"
                f"{' ...' if len(failed) > 5 else ''}; {files}"
                f"{' ...' if len(failed) > 5 else ''} name the test the grader failed on)"
            )
    if parts and not allow:
        raise ExportError(
            "Refusing to export scores the grader could not judge: rows with status "
            "grader-error (the grader failed on some tests, not the student, who was told the "
            "instructor will regrade them) would reach the LMS without those tests' points. "
            + "; ".join(parts)
            + ". Fix the grader (the lab's hidden tests or spec) and grade the folder again with "
            "the same command (a grader-error result is not cached, so those submissions are "
            "graded again), or pass --allow-grader-errors to export their scores as they are "
            "(each such student noted)."
        )


def _stem(entry: dict, stems: dict[str, str]) -> str:
    """The file stem of a gradebook row's feedback and instructor view: what its
    ``feedback`` path ends with, else the one :func:`feedback_stems` gives its name."""
    feedback = str(entry.get("feedback") or "")
    return pathlib.PurePosixPath(feedback).name if feedback else stems[str(entry["submission"])]


def _points_scales(fmt: str, books, columns: dict, pieces: bool, roster, scale: bool) -> dict:
    """(Canvas) ``{header: (the lab's points, the roster's Points Possible)}`` of each
    column whose assignment the roster (Canvas's gradebook export: its "Points Possible"
    row) says is out of other points than the lab's. Raise :class:`ExportError` for any
    unless ``scale`` (then each score of the column is scaled to the assignment's points);
    a column where either is 0 cannot be scaled and is refused either way. For Moodle,
    :func:`_maximum_scales`. {} for a roster without that row."""
    if fmt == "moodle":
        return _maximum_scales(books, columns, pieces, roster, scale)
    given = (getattr(roster, "points_possible", None) or {}) if fmt == "canvas" else {}
    given = {fold(header): value for header, value in given.items()}
    scales, unread = {}, []
    for header, possible in _grade_headers(books, columns, pieces):
        text = given.get(fold(header), "")
        if not text or fold(text) == "(read only)":
            continue  # not in the roster, or a column no import writes
        theirs = moodle_number(text)  # "20.00", or "20,00" where decimals take a comma
        if theirs is None:
            unread.append(f"{header!r}: {text[:40]!r}")
        elif abs(theirs - possible) > 1e-9:
            scales[header] = (possible, theirs)
    if unread:
        raise ExportError(
            f"The roster's Points Possible row gives {'; '.join(unread)}, not a number of "
            f"points: the export cannot check that those columns are out of the lab's points; "
            f"nothing was written. Give Canvas's gradebook export as it wrote it (Grades > "
            f"Export), or a roster without that row."
        )
    shown = "; ".join(
        f"column {h!r} is out of {num(t)} in the roster's Points Possible row, the lab's "
        f"scores out of {num(p)}"
        for h, (p, t) in scales.items()
    )
    where = getattr(roster, "source", "") or "the roster"
    if scales and not scale:
        raise ExportError(
            f"Refusing to write scores into Canvas columns whose assignments are out of other "
            f"points ({where}: {shown}): Canvas would show a full score as out of the "
            f"assignment's points, or change the assignment's points; nothing was written. "
            f"Pass --scale-to-points-possible to scale each score to its assignment's points "
            f"(rounded to 2 decimals), or set the assignment's points in Canvas to the lab's "
            f"and give its gradebook export again as --roster."
        )
    if any(p <= 0 or t <= 0 for p, t in scales.values()):
        raise ExportError(
            f"--scale-to-points-possible cannot scale scores from or to 0 points ({where}: "
            f"{shown}); expected both above 0. Set the assignment's points in Canvas to the "
            f"lab's and give its gradebook export again as --roster."
        )
    return scales


def _grade_headers(books, columns: dict, pieces: bool) -> list[tuple[str, float]]:
    """``(header, points)`` of every grade column of the export, in order."""
    return [
        (header, float(possible))
        for _folder, book in books
        for header, _piece, possible in _lab_columns(
            book, columns.get(book["lab"], book.get("title") or book["lab"]), pieces
        )
    ]


def _worksheet_maximum(roster) -> tuple[float | None, str]:
    """The roster's Moodle worksheet "Maximum Grade": ``(its value, as written)``; the value
    None where there is none (``""``) or it is no number as Moodle writes one (a scale's
    name, rows that differ: :func:`~lablib.grading.lms.moodle_number`)."""
    raw = str(getattr(roster, "maximum_grade", "") or "").strip()
    return moodle_number(raw), raw


def _maximum_unchecked(fmt: str, books, columns: dict, pieces: bool, roster) -> dict | None:
    """(Moodle) Why a grading worksheet's Maximum Grade could not be checked against the
    columns (``{"maximum_grade", "why", "columns": {header: points}}``), for the summary:
    several grade columns (one worksheet is one assignment's), or a value that is no
    number. None where there is nothing to say."""
    if fmt != "moodle":
        return None
    maximum, raw = _worksheet_maximum(roster)
    headers = _grade_headers(books, columns, pieces)
    if raw and maximum is None:
        why = "cannot be read as a number (a scale, or rows that differ)"
    elif maximum is not None and len(headers) > 1:
        why = f"is one assignment's and the file has {len(headers)} grade columns"
    else:
        return None
    return {"maximum_grade": raw, "why": why, "columns": dict(headers)}


def _maximum_scales(books, columns: dict, pieces: bool, roster, scale: bool) -> dict:
    """(Moodle) ``{header: (the lab's points, the worksheet's Maximum Grade)}`` when the
    roster is a grading worksheet (one assignment's: its "Maximum Grade") and the file has
    one grade column whose points differ: Moodle's import caps a grade at its item's
    maximum, so 17 of 17 would become 10 of 10 and 8.5 of 17 read as 8.5 of 10. Refused
    (:class:`ExportError`) unless ``scale``, as Canvas's Points Possible; a maximum of 0 or
    less (an assignment without points) is refused either way. With several grade columns
    the worksheet's maximum is one of their items' and cannot be told to one; the summary
    then asks to check each item (:func:`_maximum_unchecked`)."""
    maximum, raw = _worksheet_maximum(roster)
    headers = _grade_headers(books, columns, pieces)
    if maximum is None or len(headers) != 1 or abs(maximum - headers[0][1]) <= 1e-9:
        return {}
    (header, possible), where = headers[0], getattr(roster, "source", "") or "the roster"
    shown = (
        f"column {header!r} scores out of {num(possible)}; the worksheet's Maximum Grade is {raw}"
    )
    if maximum <= 0 or possible <= 0:
        raise ExportError(
            f"Cannot write scores into a Moodle grade item out of {raw} points ({where}: "
            f"{shown}); expected both above 0 (an assignment whose grade type is None or a "
            f"scale has no points). Give the lab's own assignment's grading worksheet as "
            f"--roster, after setting its maximum grade in Moodle to {num(possible)}."
        )
    if not scale:
        raise ExportError(
            f"Refusing to write scores into a Moodle grade item out of other points ({where}: "
            f"{shown}): Moodle's import caps a grade at the item's maximum, so a full score "
            f"would be cut and any other read as out of {raw}; nothing was written. Check "
            f"that the worksheet is this lab's assignment's. Pass --scale-to-points-possible "
            f"to scale each score to the Maximum Grade (rounded to 2 decimals), or set the "
            f"assignment's maximum grade in Moodle to {num(possible)} and download its "
            f"grading worksheet again as --roster."
        )
    return {header: (possible, maximum)}


def _member_rows(entry: dict, identities: list[dict]) -> list[dict]:
    """The row each of ``identities`` (:func:`_identities` of ``entry``) gets: a group
    member kept in ``entry["members"]`` gets the entry with their own ``total`` and
    ``late`` (their own extension or due date); everyone else the entry itself."""
    kept = _kept_identity(entry)
    members = entry.get("members") or []
    order = [kept, *(kept.get("others") or [])] if kept else []
    rows = []
    for identity in identities:
        k = next((i for i, m in enumerate(order) if m is identity), None)
        own = members[k] if k is not None and k < len(members) else None
        rows.append(
            entry
            if not isinstance(own, dict) or "total" not in own
            else dict(entry, total=own["total"], late=own.get("late"))
        )
    return rows


def _member(entry: dict, identity: dict) -> str:
    """A group's other member as the unmatched lists name them."""
    return f"{entry['submission']} (group member {identity.get('name') or identity.get('key')})"


def _place_rows(people: list[_Person], books, roster, report: dict) -> RosterIndex | None:
    """Every gradebook row placed with its student (``people`` grows by those not in the
    roster); ``report["unmatched"]`` gets each lab's submissions matched to no one (with
    a roster: to none of its students; without: to no one at grading). Returns the
    roster's index (None without a roster)."""
    index = RosterIndex(roster) if roster is not None else None
    for _, book in books if index is not None else ():
        # what the whole download says (a group named like Moodle's Default group)
        index.note(
            (
                (entry.get("identity") or {}).get("lms")
                for entry in book["submissions"]
                if isinstance(entry.get("identity"), dict)
            ),
            f"{book['lab']}'s gradebook",
        )
    for _, book in books:
        lab = book["lab"]
        unmatched, why = [], {}
        for entry in book["submissions"]:
            identities = _identities(entry, roster, index)
            for i, (identity, row) in enumerate(zip(identities, _member_rows(entry, identities))):
                person = _place(people, identity, entry["submission"], lab)
                person.rows.setdefault(lab, []).append(row)
                # a group's other member too, as roster.match_of; without a roster, only
                # what matched no one at grading (a student matched then is no stray)
                if not person.in_roster and (roster is not None or not identity.get("matched")):
                    name = entry["submission"] if i == 0 else _member(entry, identity)
                    unmatched.append(name)
                    if identity.get("why_unmatched"):
                        why[name] = str(identity["why_unmatched"])
        report["unmatched"][lab] = unmatched
        report["unmatched_reasons"][lab] = why
    return index


def _place_skipped(people: list[_Person], books, roster, index, report: dict) -> None:
    """Each path handed in but not graded (a gradebook's ``skipped``: a zip, a
    ``.ipynb.txt``, a Moodle folder without a notebook) whose LMS names say whose it is
    (:func:`~lablib.grading.submissions.skipped_submission`, resolved as at grading), kept
    with that student of the export (and a Moodle team folder with each member the roster
    gives it): one without a graded row is then noted with what they handed in, not as
    without a submission. A file joins the student whose graded row the same LMS user
    handed in (:func:`_lms_person`) before the roster's fields are compared.

    A path inside a student's own folder (the folder of a graded row named by its folder,
    not by an LMS: :func:`_own_folders`) is that student's, whatever its name says: such
    a name names no one. A student those names give
    whom the export has no row for (no roster was given, or the roster lacks them) gets a
    row of their own, as a graded row of an unknown student does (not in the roster,
    listed in ``report["unmatched"]``). Other paths are listed in
    ``report["skipped_unmatched"]``; a gradebook graded with ``--layout plain`` names no
    one by its files: there a path is its student folder's (:func:`_plain_found`), told
    to the student the roster gives that folder, else to no one."""
    for folder, book in books:
        gradebook = GradebookFolder(folder)
        try:
            skipped, layout = gradebook.skipped(book), gradebook.layout(book)
        except GradebookError as exc:
            raise ExportError(str(exc)) from None
        lab, stray = book["lab"], []
        by_lms = _lms_people(people, lab)
        own = _own_folders(book)
        roots = _given_folders(book) if layout == "plain" else set()
        for path, why in skipped:
            found = skipped_submission(path, layout or "auto", folder=why != NOT_A_NOTEBOOK)
            plain = found is None and bool(roots)
            if plain:
                found = _plain_found(path, why, roots)
            if found is None:
                continue
            # where the path was found (a link not followed is where it is, not where it
            # leads: into a classmate's folder), by its folders as given or on disk
            here = os.path.abspath(path) if plain else os.path.realpath(path)
            if any(str(a) in own for a in (pathlib.Path(here), *pathlib.Path(here).parents)):
                stray.append(path)  # a name a student gave a file in their own folder
                continue
            identity, key = resolve(found, roster, index=index), _lms_person(found.lms, lab)
            person = (by_lms.get(key) if key else None) or _joined(people, identity)
            if person is None and not _names_a_student(identity, key):
                stray.append(path)
                continue
            if person is None:
                person = _place(people, identity, found.name, lab)
                if key:
                    by_lms.setdefault(key, person)
                if lab not in person.skipped and not person.rows.get(lab):
                    report["unmatched"].setdefault(lab, []).append(found.name)
                    if identity.get("why_unmatched"):
                        report["unmatched_reasons"].setdefault(lab, {})[found.name] = str(
                            identity["why_unmatched"]
                        )
            members = [person] + [_joined(people, o) for o in identity.get("others") or []]
            for member in dict.fromkeys(m for m in members if m is not None):
                member.skipped.setdefault(lab, []).append((path, why))
        report["skipped_unmatched"][lab] = stray


def _lms_person(lms, lab: str) -> tuple | None:
    """Who handed a file in, as an LMS download names them: a Canvas user (its id, or an
    anonymous id, with the name Canvas wrote), a Moodle participant of this lab's
    assignment (Moodle gives a student another id in each); None for anything else."""
    lms = lms if isinstance(lms, dict) else {}
    kind = lms.get("lms")
    if kind == "canvas":
        user = lms.get("user_id") or (
            f"anon_{lms['anonymous_id']}" if lms.get("anonymous_id") else ""
        )
        return ("canvas", fold(str(user)), fold(str(lms.get("name", "")))) if user else None
    if kind == "moodle" and lms.get("participant_id"):
        return ("moodle", lab, fold(str(lms["participant_id"])))
    return None


def _lms_people(people: list[_Person], lab: str) -> dict:
    """``{_lms_person: person}`` of every graded row placed (a Canvas user's rows of any
    lab, a Moodle participant's of ``lab``)."""
    found = {}
    for p in people:
        for row_lab, rows in p.rows.items():
            for row in rows:
                identity = _kept_identity(row)
                key = _lms_person(identity.get("lms"), row_lab)
                if key is not None and (key[0] == "canvas" or row_lab == lab):
                    found.setdefault(key, p)
    return found


def _kept_identity(entry: dict) -> dict:
    """A gradebook row's ``identity`` as grading kept it ({} where it has none)."""
    identity = entry.get("identity")
    return identity if isinstance(identity, dict) else {}


def _kept_parts(identity: dict, key: str) -> list[str]:
    """A path kept in a row's identity (``where``, ``folder``) as its parts."""
    return [p for p in str(identity.get(key) or "").split("/") if p]


def _given_folders(book: dict) -> set[str]:
    """The folders given to ``lablib grade`` (absolute paths as written), as its rows tell
    them: each row's path less its ``where``."""
    roots = set()
    for entry in book["submissions"]:
        identity = _kept_identity(entry)
        where = _kept_parts(identity, "where")
        path = pathlib.Path(os.path.abspath(str(entry.get("path") or "")))
        if where and entry.get("path") and len(where) <= len(path.parents):
            roots.add(str(path.parents[len(where) - 1]))
    return roots


def _plain_found(path: str, why: str, roots: set[str]) -> Found | None:
    """A path not graded in a plain layout as the :class:`Found` of its student's folder
    (the first folder below a folder given, which names the student as their graded
    notebook's row would be named), or None: a file at the top of the folder given is in
    no student's folder."""
    absolute = pathlib.Path(os.path.abspath(path))
    for root in roots:
        try:
            parts = absolute.relative_to(root).parts
        except ValueError:
            continue
        if not parts or (len(parts) == 1 and why != NO_NOTEBOOK_FOLDER):
            return None
        folder = unicodedata.normalize("NFC", parts[0])
        return Found(clean_label(folder), pathlib.Path(path), "/".join(parts), folder, {})
    return None


def _own_folders(book: dict) -> set[str]:
    """The real paths of the students' own folders of a gradebook: the folder of each graded
    row that no LMS names (a plain layout's ``jsmith/``), as grading kept its ``where`` and
    ``folder`` (a row without them gives none)."""
    folders = set()
    for entry in book["submissions"]:
        identity = _kept_identity(entry)
        lms = identity.get("lms") if isinstance(identity.get("lms"), dict) else {}
        where, folder = _kept_parts(identity, "where"), _kept_parts(identity, "folder")
        if lms.get("lms") or not folder or len(where) <= len(folder) or not entry.get("path"):
            continue
        depth = len(where) - len(folder) - 1
        for path in {
            pathlib.Path(os.path.realpath(str(entry["path"]))),
            pathlib.Path(os.path.abspath(str(entry["path"]))),
        }:  # on disk, and as given (where a path not graded is compared as given)
            if depth < len(path.parents):
                folders.add(str(path.parents[depth]))
    return folders


def _names_a_student(identity: dict, key) -> bool:
    """Whether a path not graded says whose it is, so that its student gets a row of their
    own: its LMS name gives a person (``key``, :func:`_lms_person`: a Canvas user or
    anonymous id, a Moodle participant id), or its identity an id."""
    return key is not None or any(
        identity.get(f) for f in ("lms_id", "participant_id", "student_id")
    )


def _grade_columns(
    people: list[_Person], books, columns: dict, pieces: bool, missing: str, report: dict, scales
) -> tuple[list, list, dict]:
    """The import file's grade columns: ``(headers, points possible, {id(person): cells})``;
    each student's notes and ``report``'s ungraded, missing and without-submission lists.
    A column of ``scales`` (:func:`_points_scales`) has its scores scaled to its
    assignment's points."""
    header_cells, points = [], []
    values = {id(p): [] for p in people}
    for _folder, book in books:
        lab = book["lab"]
        title = columns.get(lab, book.get("title") or lab)
        best = _best_rows(people, lab, title, missing, report, bool(book.get("late_policy")))
        held = {id(p) for p in people if _key(p) in report["held"].get(lab, ())}
        for header, piece, possible in _lab_columns(book, title, pieces):
            header_cells.append(header)
            ours, theirs = scales.get(header, (None, None))
            factor = None if ours is None else theirs / ours
            points.append(num(possible) if factor is None else _two(theirs))
            for p in people:
                given = "blank" if id(p) in held else missing
                cell = _cell(best.get(id(p)), piece, given, factor)
                if fold(header) in p.excused:
                    _excused(p, lab, title, report)
                    p.notes.append(
                        f"{header}: excused in Canvas (EX in the roster given): written as EX, "
                        f"so the import keeps the excuse; lablib's grade, not exported: "
                        f"{cell or 'none'}"
                    )
                    report["excused"].setdefault(lab, []).append(_key(p))
                    cell = "EX"
                values[id(p)].append(cell)
    return header_cells, points, values


def _best_rows(
    people: list[_Person], lab: str, title: str, missing: str, report: dict, policy: bool = False
) -> dict:
    """``{id(person): the row with the best total}`` of one lab, with the notes of students
    without a submission (or with only files that were not graded) and of each row
    exported (:func:`_row_notes`). A roster student without a row is left empty, not
    given ``missing``'s 0, where a graded row of the lab that matched no student of the
    roster may be theirs (:func:`_maybe_theirs`); ``report["held"]`` lists them."""
    best = {}
    report["not_graded"][lab] = {}
    strays = [r for p in people if not p.in_roster for r in p.rows.get(lab, [])]
    held = report["held"].setdefault(lab, [])
    for p in people:
        rows = p.rows.get(lab, [])
        maybe = _maybe_theirs(p, strays) if p.in_roster and missing == "zero" and not rows else ""
        zero = "left empty" if maybe or missing != "zero" else "0"
        if maybe:
            held.append(_key(p))
        if rows:
            best[id(p)] = max(rows, key=_total)
            if len(rows) > 1:
                p.notes.append(
                    f"{title}: {len(rows)} notebooks handed in, the best counted "
                    f"({best[id(p)].get('submission')})"
                )
        elif p.skipped.get(lab):
            handed = _handed_in(p.skipped[lab])
            report["not_graded"][lab][_key(p)] = [name for name, _why in handed]
            p.notes.append(
                f"{title}: handed in "
                + "; ".join(f"{name} ({why})" for name, why in handed)
                + f", nothing graded ({zero}{maybe})"
            )
        else:
            p.notes.append(f"{title}: no submission ({zero}{maybe})")
    for p in people:
        if id(p) in best:
            _row_notes(p, best[id(p)], lab, title, report, policy)
            if float((best[id(p)].get("late") or {}).get("penalty") or 0) > 0:
                report["late_deducted"].setdefault(lab, []).append(_key(p))
    report["missing"][lab] = [
        _key(p) for p in people if id(p) not in best and not p.skipped.get(lab)
    ]
    report["without_submission"][lab] = report["missing"][lab]
    return best


def _maybe_theirs(person: _Person, strays: list) -> str:
    """Why a graded row that matched no student of the roster (``strays``) may be
    ``person``'s ("" where none may): a Canvas download graded anonymously names no one
    (any of them may be theirs), and a Canvas file under their own user id whose name is
    not theirs as the roster has it (a name changed since the roster was exported) is
    refused at grading, never given to them. (A Moodle folder's number is no such sign:
    in a team assignment's download it is a group's id, which may be a student's too.)"""
    theirs = person.fields.get("lms_id", "")
    lms = [(r.get("identity") or {}).get("lms") or {} for r in strays]
    canvas = [x for x in lms if x.get("lms") == "canvas"]
    anonymous = [x for x in canvas if any(r.get("anonymous_id") for r in _readings(x))]
    own = [x for x in canvas if theirs and theirs in _canvas_user_ids(x)]
    if own:
        return (
            f": a graded notebook of this lab is under your Canvas user id but another name "
            f"({own[0].get('name') or '?'}); it matched no one"
        )
    if anonymous:
        return (
            f": {len(anonymous)} graded notebook(s) of this lab were downloaded graded "
            f"anonymously and match no student; one may be yours"
        )
    return ""


def _canvas_user_ids(lms: dict) -> set[str]:
    """The Canvas user ids a Canvas file's name gives (each reading's)."""
    return {str(r["user_id"]) for r in _readings(lms) if r.get("user_id")}


def _readings(lms: dict) -> list[dict]:
    """A Canvas file's description and each reading of its name kept with it."""
    return [lms, *(c for c in lms.get("candidates", []) if isinstance(c, dict))]


def _handed_in(skipped) -> list[tuple[str, str]]:
    """``(name, why not graded)`` of what a student handed in that was not graded: each
    path's name, a folder left out where a file inside it is listed; the reason as the
    student may read it (:func:`_student_reason`)."""
    paths = [pathlib.PurePath(path) for path, _why in skipped]
    return [
        (paths[i].name, _student_reason(why))
        for i, (_path, why) in enumerate(skipped)
        if not any(paths[i] in other.parents for other in paths)
    ]


#: Where a grader's message names a path: `` (to `` a link's target, or a word with a ``/``.
_A_PATH = re.compile(r" \(to |\s\S*/")


def _student_reason(why: str) -> str:
    """A reason a path was not graded, without the paths the grader's message names (a
    link's target, a classmate's notebook, the instructor's folders): the note goes to
    the student. ``a symbolic link inside a student's folder (to .../alice/lab1.ipynb):
    not followed, ...`` -> ``a symbolic link inside a student's folder``."""
    found = _A_PATH.search(why)
    cut = found.start() if found else len(why)
    return why[:cut].rstrip(" ,:;") or why


def _row_notes(p: _Person, row: dict, lab: str, title: str, report: dict, policy: bool) -> None:
    """The notes of a student's exported row: lateness not computed (``policy``: the
    gradebook has a late policy), written answers not graded or changed since, and a
    status other than ``ok``; each listed in ``report``."""
    unknown = None
    if _unknown_late(row.get("late")):
        unknown = row["late"].get("text", "")
    elif _marked_late(row, policy):
        unknown = MARKED_LATE
    if unknown is not None:
        p.notes.append(
            f"{title}: lateness not computed, exported without a late penalty: {unknown}"
        )
        report["lateness_unknown"].setdefault(lab, []).append(_key(p))
    never, stale = _pending(row)
    if never or stale:
        said = [f"{never} written answer(s) never graded, counted as 0"] if never else []
        said += (
            [f"{stale} written answer(s) changed since graded, the earlier grade counted"]
            if stale
            else []
        )
        p.notes.append(f"{title}: {'; '.join(said)}")
        report["ungraded"].setdefault(lab, []).append(_key(p))
    status = _status_note(row)
    if status:
        p.notes.append(f"{title}: {status}")
        report["statuses"].setdefault(lab, {})[_key(p)] = _status(row).text()


def _cell(row, piece, missing: str, factor: float | None = None):
    """One grade cell: the total (``piece`` None), a piece's or a written answer's score;
    times ``factor`` (rounded to 2 decimals) where one is given."""
    if row is None:
        value = 0.0 if missing == "zero" and piece is None else None
    elif piece is None:
        value = _total(row)
    elif piece.startswith("written:"):
        given = row.get("written", {}).get(piece.split(":", 1)[1], {})
        value = float(given.get("score", 0.0)) if given.get("graded") else None
    else:
        value = float(row["pieces"].get(piece, {}).get("score", 0.0))
    if value is None:
        return ""
    return num(value) if factor is None else _two(value * factor)


def _two(x: float) -> str:
    """``x`` rounded to 2 decimals, as people write it: ``66.67``, ``100``."""
    text = f"{round(x, 2):.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


#: Canvas's import takes any row whose Student cell holds this for its points row: every
#: number in it becomes an assignment's points, and that row's student gets no grade.
_CANVAS_POINTS_ROW = re.compile(r"points\s*possible", re.I)


def _canvas_rows(
    people: list[_Person], roster_given: bool, destination, header_cells, values, report
) -> list[_Person]:
    """The people written to a Canvas file. Left out (noted with their grades, listed in
    ``report["left_out"]``): a row whose Student cell Canvas's import would read as the
    "Points Possible" row; and, where a roster was given, a row of no student of it
    (without an ID, SIS User ID or SIS Login ID: Canvas's import would match it by its
    name alone, to a classmate of that display name, overwriting their grade). The rows
    without an id of an export without a roster are checked as :func:`_canvas_names`
    says."""
    kept = []
    for p in people:
        name = p.fields["name"]
        bare = not any(p.fields[f].strip() for f in _CANVAS_IDS)
        why = ""
        if _CANVAS_POINTS_ROW.search(name):
            why = (
                f'its Student name {name!r} holds "Points Possible", which Canvas\'s import '
                f"reads as its points row (each grade in it would become an assignment's points)"
            )
        elif bare and roster_given and not p.in_roster:
            why = (
                "this student is in no row of the roster and has no ID, SIS User ID or SIS "
                f"Login ID: Canvas's import would match the row by its name {name!r} alone, to "
                f"any student of that name (a classmate's grade overwritten)"
            )
        if why:
            cells = values[id(p)]
            _leave_out(p, "ID", destination, header_cells, cells, report, why=why)
        else:
            kept.append(p)
    _canvas_names(kept, report)
    _refuse_shared_ids(kept, _IDENTIFIER_COLUMNS["canvas"], "Canvas")
    return kept


def _refuse_shared_ids(people: list[_Person], columns: dict, lms: str) -> None:
    """Refuse (:class:`ExportError`) to write two rows that share a value in a column the
    LMS's import matches a student by (``columns``: field -> header): the import would
    give both rows' grades to one student, the second overwriting the first."""
    for field, header in columns.items():
        seen: dict[str, _Person] = {}
        for p in people:
            value = fold(p.fields[field].strip())
            if not value:
                continue
            if value in seen:
                first = seen[value]
                raise ExportError(
                    f"Refusing to write two {lms} rows with one {header} "
                    f"{p.fields[field]!r}: {_described(first)} and {_described(p)}. "
                    f"{lms}'s import would give both rows' grades to one student, the second "
                    f"overwriting the first; nothing was written. One of them is a gradebook "
                    f"row the roster given does not hold as it was graded (its other ids "
                    f"differ): give the export the roster the class was graded with, or grade "
                    f"the folder again with this one (lablib grade ... --roster)."
                )
            seen[value] = p


def _canvas_names(people: list[_Person], report: dict) -> None:
    """Canvas's import matches a row without an ID, SIS User ID or SIS Login ID by its
    Student name: refuse (:class:`ExportError`) such a row whose name another row has (both
    could reach one student, the second overwriting the first); note the others and list
    them in ``report["matched_by_name"]``."""
    names: dict[str, list[_Person]] = {}
    for p in people:
        names.setdefault(fold(p.fields["name"].strip()), []).append(p)
    bare = [p for p in people if not any(p.fields[f].strip() for f in _CANVAS_IDS)]
    nameless = [p for p in bare if not p.fields["name"].strip()]
    if nameless:
        raise ExportError(
            f"Refusing to write Canvas rows with neither a Student name nor an ID, SIS User ID "
            f"or SIS Login ID: {', '.join(_unnamed(p) for p in nameless[:5])}"
            f"{f' and {len(nameless) - 5} more' if len(nameless) > 5 else ''}. Canvas's import "
            f"matches a row by one of those, so it cannot match these rows to any student; "
            f"nothing was written. Give the export Canvas's gradebook export (Grades > Export) "
            f"as --roster: it has each student's ID and name."
        )
    shared = [p for p in bare if len(names[fold(p.fields["name"].strip())]) > 1]
    if shared:
        same = names[fold(shared[0].fields["name"].strip())]
        raise ExportError(
            f"Refusing to write Canvas rows without an ID, SIS User ID or SIS Login ID whose "
            f"Student name another row has: {' and '.join(_described(p) for p in same)}"
            f"{f' ({len(shared)} such rows in all)' if len(shared) > len(same) else ''}. Canvas's "
            f"import matches a row without an id by its name, so both could reach one student, "
            f"the second overwriting the first; nothing was written. Give the export Canvas's "
            f"gradebook export (Grades > Export) as --roster: it has each student's ID."
        )
    for p in bare:
        p.notes.insert(
            0,
            "no ID, SIS User ID or SIS Login ID: Canvas's import matches this row by its name "
            f"{p.fields['name']!r}; check it reached the right student (or export with Canvas's "
            f"gradebook export as --roster)",
        )
    report["matched_by_name"] = [_key(p) for p in bare]


#: The import file's columns the LMS matches a row to its student by, per format: field
#: -> header. Written as the LMS gave them (:func:`_identifier_cell`).
_IDENTIFIER_COLUMNS = {
    "canvas": {"lms_id": "ID", "student_id": "SIS User ID", "login": "SIS Login ID"},
    "moodle": {"email": "Email address", "student_id": "ID number"},
}
#: How a cell starts that a spreadsheet may run as a formula (what
#: :func:`~lablib.grading.report.gradebook_csv.spreadsheet_text` makes inert).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _identifier_cell(value: str) -> str:
    """A cell of a column the LMS's import matches students by (:data:`_IDENTIFIER_COLUMNS`):
    written as the LMS gave it, its control characters shown (no LMS has them in an id),
    never with the leading ``'`` that keeps other text inert in a spreadsheet: the import
    would look for a user whose e-mail is ``'-ann@x.org`` and find none."""
    return visible_controls(value)


def _identifiers_as_given(fmt: str, people: list[_Person], destination, report: dict) -> None:
    """Note each student written whose identifier cell (:data:`_IDENTIFIER_COLUMNS`) starts
    as a formula may (``=``, ``+``, ``-``, ``@``): written as the LMS gave it, for the
    import to match it, it is not made inert, so the file is for the LMS's import, not a
    spreadsheet. Listed in ``report["identifiers_as_given"]``; the note is the notes
    file's only."""
    report["identifiers_as_given"] = []
    for p in people:
        cells = [
            (header, p.fields[field])
            for field, header in _IDENTIFIER_COLUMNS[fmt].items()
            if p.fields[field].startswith(_FORMULA_STARTS)
        ]
        for header, value in cells:
            p.staff_notes.append(
                f"{header} {value!r} starts with {value[0]!r}, which a spreadsheet may read as "
                f"a formula: written as the LMS gave it, for its import to match the student "
                f"(a leading ' would match no one); give {destination.name} to the LMS's "
                f"import without opening it in a spreadsheet"
            )
        if cells:
            report["identifiers_as_given"].append(_key(p))


def _write_import_file(
    fmt: str, destination: pathlib.Path, people: list[_Person], header_cells, points, values: dict
) -> None:
    """The LMS's import file: Canvas' or Moodle's columns, one row per student."""
    with atomic_write(destination, newline="") as f:
        writer = csv.writer(f)
        if fmt == "canvas":
            writer.writerow(
                [
                    "Student",
                    "ID",
                    "SIS User ID",
                    "SIS Login ID",
                    "Section",
                    *map(spreadsheet_text, header_cells),
                ]
            )
            writer.writerow(["    Points Possible", "", "", "", "", *points])
            for p in people:
                x = p.fields
                writer.writerow(
                    [
                        spreadsheet_text(x["name"]),
                        *map(_identifier_cell, (x["lms_id"], x["student_id"], x["login"])),
                        spreadsheet_text(x["section"]),
                        *values[id(p)],
                    ]
                )
        else:
            writer.writerow(
                [
                    "Full name",
                    "Email address",
                    "ID number",
                    *map(spreadsheet_text, header_cells),
                    "Notes",
                ]
            )
            for p in people:
                x = p.fields
                writer.writerow(
                    [
                        spreadsheet_text(x["name"]),
                        *map(_identifier_cell, (x["email"], x["student_id"])),
                        *values[id(p)],
                        # Moodle shows an imported feedback as HTML: a name a student gave
                        # a file (<img ...>) is text there
                        spreadsheet_text(html.escape("; ".join(p.notes), quote=False)),
                    ]
                )


def _write_notes(destination: pathlib.Path, people: list[_Person]) -> pathlib.Path | None:
    """The notes file beside ``destination`` (one row per note), or None when no student
    has a note (an earlier export's notes file is then removed)."""
    notes_path = destination.with_name(destination.stem + ".notes.csv")
    noted = [p for p in people if p.notes or p.staff_notes]
    if not noted:
        notes_path.unlink(missing_ok=True)  # no note of an earlier export left beside this one
        return None
    with atomic_write(notes_path, newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["Student", "ID", "SIS User ID", "Email address", "Note"])
        for p in noted:
            x = p.fields
            for note in (*p.notes, *p.staff_notes):
                writer.writerow(
                    [
                        *map(
                            spreadsheet_text,
                            (x["name"], x["lms_id"], x["student_id"], x["email"], note),
                        )
                    ]
                )
    return notes_path


def _key(person: _Person) -> str:
    x = person.fields
    return x["student_id"] or x["lms_id"] or x["email"] or x["participant_id"] or x["name"]
