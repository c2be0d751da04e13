"""The class list: who the students are, and which submission is whose.

``lablib grade --roster roster.csv`` and ``lablib export`` read a CSV file in any of these
layouts, recognised by its header row (case and spacing ignored):

* lablib's own: ``student_id, name, email, section, submission`` (``submission``: the
  notebook or folder that is the student's, as named in the gradebook or as a path below
  the submissions folder; optional), with optional late-work columns
  ``submitted_at`` (when the student submitted, ISO 8601), ``extension`` (``2d``, ``36h``)
  and ``due`` (the student's own due date) (:mod:`~lablib.grading.late`);
* Canvas's gradebook export: ``Student, ID, SIS User ID, SIS Login ID, Section, ...``
  (its "Points Possible" row and its test student are skipped);
* Gradescope's roster export: ``First Name, Last Name, SID, Email, Role, ...`` (only the
  rows whose role is Student, when the file has a role column).

A submission is matched to a student by the roster's ``submission`` column when it has
one, else when one of the student's identifiers (student id, SIS ids, login, e-mail or
the part of it before ``@``) equals the submission's name, one of its folders, or its
notebook's name, ignoring case (``erin@uni.edu/lab1.ipynb``, ``12345.ipynb``). An
identifier shared by two students matches neither. What matched nothing is listed, on
both sides.

Example::

    roster = Roster.load("canvas_export.csv")
    match = roster.match([("erin@uni.edu", "/subs/erin@uni.edu/lab1.ipynb")])
    match.students["erin@uni.edu"].name, match.unmatched, match.without_submission
"""

from __future__ import annotations

import csv
import dataclasses
import pathlib
import re

__all__ = ["Student", "Roster", "RosterMatch", "RosterError"]


class RosterError(ValueError):
    """The roster file cannot be read as a class list (the message says why and what to fix)."""


@dataclasses.dataclass(frozen=True)
class Student:
    """One student of the roster.

    Attributes:
        student_id: the institution's id (lablib's ``student_id``, Canvas's SIS User ID,
            Gradescope's SID).
        name: as the LMS shows it.
        email, section: when the roster has them.
        submission: the roster's ``submission`` column (lablib's layout).
        lms_id: Canvas's own user ``ID``; login: Canvas's SIS Login ID.
        submitted_at: when the student submitted (ISO 8601; Gradescope's "Submission Time").
        extension: a duration added to the due date for this student (``2d``).
        due: this student's own due date (ISO 8601), instead of the lab's.
    """

    student_id: str
    name: str
    email: str = ""
    section: str = ""
    submission: str = ""
    lms_id: str = ""
    login: str = ""
    submitted_at: str = ""
    extension: str = ""
    due: str = ""

    @property
    def key(self) -> str:
        """One identifier that names the student in reports (id, else e-mail, else name)."""
        return self.student_id or self.lms_id or self.email or self.name

    def identifiers(self) -> set[str]:
        """Everything a submission may be named after, folded to lower case."""
        keys = {self.student_id, self.lms_id, self.login, self.email, self.email.split("@", 1)[0]}
        return {k.strip().casefold() for k in keys if k and k.strip()}


@dataclasses.dataclass(frozen=True)
class RosterMatch:
    """Submissions matched to students.

    Attributes:
        students: submission name -> :class:`Student`.
        unmatched: submission names that matched no student (or two).
        without_submission: students that no submission matched.
    """

    students: dict
    unmatched: tuple[str, ...]
    without_submission: tuple[Student, ...]


#: Header (folded) -> field, per layout.
_COLUMNS = {
    "student_id": ("student_id", "student id", "sid", "sis user id", "student number"),
    "name": ("name", "student", "full name", "student name"),
    "first": ("first name", "firstname", "given name"),
    "last": ("last name", "lastname", "surname", "family name"),
    "email": ("email", "email address", "e-mail", "e-mail address"),
    "section": ("section", "sections"),
    "submission": ("submission", "file", "folder", "path"),
    "lms_id": ("id",),
    "login": ("sis login id", "login", "login id", "username"),
    "role": ("role",),
    "submitted_at": ("submitted_at", "submitted at", "submission time", "submitted", "submission date"),
    "extension": ("extension", "extensions"),
    "due": ("due", "due date", "due_at", "due at"),
}
_TEST_STUDENTS = {"student, test", "test student"}


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", str(text).strip()).casefold()


class Roster:
    """The students of a class, read from a CSV file (:meth:`load`)."""

    def __init__(self, students, source: str = ""):
        self.students = tuple(students)
        self.source = source

    def __len__(self) -> int:
        return len(self.students)

    @classmethod
    def load(cls, path) -> "Roster":
        """Read ``path`` in any of the module's layouts.

        Raises:
            RosterError: no header naming a student, or no student in the file.
        """
        path = pathlib.Path(path)
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise RosterError(f"Roster {str(path)!r} cannot be read ({exc}); pass a CSV file (UTF-8).") from None
        rows = list(csv.reader(text.splitlines()))
        if not rows:
            raise RosterError(f"Roster {str(path)!r} is empty; expected a header row and one row per student.")
        header = [_fold(h) for h in rows[0]]
        where = {field: next((i for i, h in enumerate(header) if h in names), None)
                 for field, names in _COLUMNS.items()}
        if all(where[f] is None for f in ("student_id", "name", "first", "email", "lms_id", "login")):
            raise RosterError(
                f"Roster {str(path)!r} has no column naming a student (its header: {rows[0]}). Expected "
                f"lablib's 'student_id, name, email, section, submission', a Canvas gradebook export "
                f"(Student, ID, SIS User ID, ...) or a Gradescope roster (First Name, Last Name, SID, Email).")
        students = [s for s in (cls._student(row, where) for row in rows[1:]) if s is not None]
        if not students:
            raise RosterError(f"Roster {str(path)!r} lists no student below its header.")
        return cls(students, str(path))

    @staticmethod
    def _student(row, where) -> Student | None:
        def get(field):
            i = where[field]
            return row[i].strip() if i is not None and i < len(row) else ""

        name = get("name") or " ".join(p for p in (get("first"), get("last")) if p)
        if not any(row) or "points possible" in _fold(name) or _fold(name) in _TEST_STUDENTS:
            return None  # Canvas's points row and test student
        if where["role"] is not None and _fold(get("role")) not in ("", "student"):
            return None  # Gradescope's instructors and TAs
        student = Student(get("student_id"), name, get("email"), get("section"), get("submission"),
                          get("lms_id"), get("login"), get("submitted_at"), get("extension"), get("due"))
        return student if student.identifiers() or name else None

    def match(self, submissions) -> RosterMatch:
        """Match ``(name, notebook path)`` pairs (the gradebook's rows) to students."""
        explicit = {}
        for student in self.students:
            if student.submission:
                explicit.setdefault(_fold(re.sub(r"\.ipynb$", "", student.submission.strip("/"), flags=re.I)),
                                    []).append(student)
        by_key: dict[str, list[Student]] = {}
        for student in self.students:
            for key in student.identifiers():
                by_key.setdefault(key, []).append(student)
        students, unmatched = {}, []
        for name, path in submissions:
            stem = pathlib.PurePath(str(path)).stem
            candidates = [_fold(name), _fold(f"{name}/{stem}"), _fold(stem),
                          *(_fold(part) for part in str(name).split("/"))]
            found = next((explicit[c] for c in candidates if c in explicit), None)
            if found is None:
                found = next((by_key[c] for c in candidates if c in by_key), None)
            if found is not None and len({id(s) for s in found}) == 1:
                students[name] = found[0]
            else:
                unmatched.append(name)
        claimed = {id(s) for s in students.values()}
        return RosterMatch(students, tuple(unmatched), tuple(s for s in self.students if id(s) not in claimed))
