"""The class list: who the students are, when they submitted, and which submission is whose.

``lablib grade --roster roster.csv`` and ``lablib export`` read a CSV file in any of these
layouts, recognised by its header row (case, spacing and Unicode form ignored):

* lablib's own: ``student_id, name, email, section, submission`` (``submission``: the
  notebook or folder that is the student's, as named in the gradebook or as a path below
  the submissions folder; optional), with optional late-work columns
  ``submitted_at`` (when the student submitted, ISO 8601), one ``submitted_at:<lab>``
  column per lab (``submitted_at:lab1``; the lab's short or full name), ``extension``
  (``2d``, ``36h``) and ``due`` (the student's own due date) (:mod:`~lablib.grading.gradebook.late`);
* Canvas's gradebook export (Grades > Export): ``Student, ID, SIS User ID, SIS Login ID,
  Section, ...`` (its test student is skipped, its "Points Possible" row is kept apart as
  :attr:`Roster.points_possible`, each assignment column's points; ``ID`` is the user id
  of Canvas's download names, a number);
* Gradescope's roster export: ``First Name, Last Name, SID, Email, Role, ...`` (only the
  rows whose role is Student, when the file has a role column);
* Moodle's grading worksheet (Assignment > View all submissions > Download grading
  worksheet): ``Identifier ("Participant 1234567"), Full name, Email address, ...,
  Last modified (submission)``: the participant id of Moodle's download folders and the
  submission time of that assignment, and for a team assignment its ``Group`` column,
  each student's group as Moodle names the group's download folder (read in English: a
  worksheet from a site in another language is refused, saying so); or Moodle's grade
  export (``First name, Last name, ID number, Email address``).

Any layout may carry a ``group`` (or ``team``, ``group name``) column: the student's
group, whose Moodle team folder is the student's too; a folder not named as one of the
roster's groups is matched as without it (:mod:`~lablib.grading.gradebook.identity`).

A times file (``lablib grade --times times.csv``; :class:`SubmissionTimes`) gives
submission times apart from the roster: ``student, lab, submitted_at``, one row per
submission; a student's later row for the same lab (a resubmission) replaces the earlier.

Which submission is whose is resolved once, at grading, by
:func:`lablib.grading.gradebook.identity.resolve` (the roster's ``submission`` column, then the
LMS download's ids, then the student's identifiers naming the submission, then names),
and kept in the gradebook.

Example::

    roster = Roster.load("canvas_export.csv")
    match = match_roster(roster, [("erin@uni.edu", "/subs/erin@uni.edu/lab1.ipynb")])  # .identity
    match.students["erin@uni.edu"].name, match.unmatched, match.without_submission
"""

from __future__ import annotations

import csv
import dataclasses
import io
import pathlib
import re

from lablib.grading.lms import fold, moodle_number, moodle_time

__all__ = ["Student", "Roster", "RosterMatch", "RosterError", "SubmissionTimes", "lab_aliases"]


class RosterError(ValueError):
    """The roster (or times) file cannot be read as a class list (the message says why and
    what to fix)."""


@dataclasses.dataclass(frozen=True)
class Student:
    """One student of the roster.

    Attributes:
        student_id: the institution's id (lablib's ``student_id``, Canvas's SIS User ID,
            Gradescope's SID, Moodle's ID number).
        name: as the LMS shows it.
        email, section: when the roster has them.
        submission: the roster's ``submission`` column (lablib's layout).
        lms_id: Canvas's own user ``ID``; login: Canvas's SIS Login ID.
        submitted_at: when the student submitted (ISO 8601; Gradescope's "Submission Time",
            Moodle's "Last modified (submission)"), for any lab.
        extension: a duration added to the due date for this student (``2d``).
        due: this student's own due date (ISO 8601), instead of the lab's.
        participant_id: Moodle's participant id (its grading worksheet's Identifier).
        times: ``(lab, time)`` pairs of the roster's ``submitted_at:<lab>`` columns.
        group: the student's group (Moodle's worksheet of a team assignment: its
            ``Group`` column), whose submission is the student's.
        extended_until: an extension granted in the LMS (a Moodle worksheet's "Extension
            granted until: ..."): the due date is the later of it and the lab's.
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
    participant_id: str = ""
    times: tuple = ()
    group: str = ""
    extended_until: str = ""

    @property
    def key(self) -> str:
        """One identifier that names the student in reports (id, else e-mail, else name)."""
        return self.student_id or self.lms_id or self.email or self.participant_id or self.name

    def identifiers(self) -> set[str]:
        """Everything a submission may be named after, folded (NFC, lower case)."""
        keys = {
            self.student_id,
            self.lms_id,
            self.login,
            self.email,
            self.email.split("@", 1)[0],
            self.participant_id,
        }
        return {fold(k) for k in keys if k and k.strip()}

    def time_for(self, aliases) -> tuple[str, str]:
        """``(time, where it came from)`` for a lab called any of ``aliases`` (its full and
        short names): its own ``submitted_at:<lab>`` column, else ``submitted_at``; ("", "")
        when the roster has neither."""
        names = {fold(a) for a in aliases}
        for lab, value in self.times:
            if fold(lab) in names and str(value).strip():
                return str(value).strip(), f"the roster's submitted_at:{lab} column"
        if self.submitted_at:
            return self.submitted_at, "the roster's submitted_at column"
        return "", ""


@dataclasses.dataclass(frozen=True)
class RosterMatch:
    """Submissions matched to students.

    Attributes:
        students: submission name -> :class:`Student`.
        unmatched: submission names that matched no student (or two).
        without_submission: students that no submission matched.
        reasons: unmatched submission name -> why it matched no one, where the matching
            said (a Moodle folder: what it says, what was expected, what to do).
    """

    students: dict
    unmatched: tuple[str, ...]
    without_submission: tuple[Student, ...]
    reasons: dict = dataclasses.field(default_factory=dict)


#: Header (folded) -> field, per layout.
_COLUMNS = {
    "student_id": ("student_id", "student id", "sid", "sis user id", "student number", "id number"),
    "name": ("name", "student", "full name", "student name"),
    "first": ("first name", "firstname", "given name"),
    "last": ("last name", "lastname", "surname", "family name"),
    "email": ("email", "email address", "e-mail", "e-mail address"),
    "section": ("section", "sections"),
    "submission": ("submission", "file", "folder", "path"),
    "lms_id": ("id",),
    "login": ("sis login id", "login", "login id", "username"),
    "role": ("role",),
    "submitted_at": (
        "submitted_at",
        "submitted at",
        "submission time",
        "submitted",
        "submission date",
        "last modified (submission)",
    ),
    "extension": ("extension", "extensions"),
    "due": ("due", "due date", "due_at", "due at"),
    "participant_id": ("identifier",),
    "status": ("status",),  # read in a Moodle grading worksheet only (its extensions)
    "group": ("group", "team", "group name"),
}
_TEST_STUDENTS = {"student, test", "test student"}
#: A Moodle grading worksheet's Status where an extension was granted: "Submitted for
#: grading - Extension granted until: Monday, 23 November 2026, 11:59 PM"
_MOODLE_EXTENSION = re.compile(r"extension granted until:\s*(.+?)\s*(?:$| - )", re.I)
# submitted_at:<lab>, "submitted at lab1", "lab1 submitted_at"
_LAB_TIME = re.compile(
    r"^(?:submitted[_ ]at|submission time)\s*[:/ ]\s*(?P<lab>[\w.-]+)$"
    r"|^(?P<lab2>[\w.-]+)\s*[:/ ]\s*(?:submitted[_ ]at|submission time)$"
)


def lab_aliases(lab) -> tuple[str, ...]:
    """The names a roster or times file may give a lab: its full name and, for a lab of
    the registry, its short name (``lab1_attention``, ``lab1``)."""
    name = getattr(lab, "name", lab)
    aliases = [str(name)]
    try:
        from lablib.labs import resolve_lab

        found = resolve_lab(name)
        aliases += [found.name, found.short]
    except (KeyError, ValueError, ImportError):
        pass
    return tuple(dict.fromkeys(aliases))


def _unreadable(what: str, path, exc: Exception) -> RosterError:
    return RosterError(f"{what} {str(path)!r} cannot be read ({exc}); pass a CSV file (UTF-8).")


def _read_bytes(path, what: str) -> bytes:
    try:
        return pathlib.Path(path).read_bytes()
    except OSError as exc:
        raise _unreadable(what, path, exc) from None


def _read_csv(path, what: str, raw: bytes | None = None) -> list[list[str]]:
    """The rows of the CSV file ``path`` (of its bytes ``raw``, when already read)."""
    path = pathlib.Path(path)
    try:
        text = (_read_bytes(path, what) if raw is None else raw).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _unreadable(what, path, exc) from None
    try:
        # newline="": a line break inside a quoted cell is the cell's, and U+0085 or
        # U+2028 in a name ends no row (str.splitlines would end one there)
        return list(csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(text)))
    except csv.Error as exc:
        raise RosterError(f"{what} {str(path)!r} is not a CSV file ({exc}).") from None


def _delimiter(text: str) -> str:
    """``";"`` where the file's columns are separated by semicolons, else ``","``.

    Canvas writes its gradebook export with semicolons for a user who chose "Use
    semicolons to separate fields in CSV files" (common where a comma is the decimal
    mark: its numbers are then written ``20,00``), and reads either back. Decided on the
    header, the first row that is not blank (a data row may end in an empty cell or be
    blank, a header names every column): semicolons where they give it more than one
    column and more than commas do."""
    header = next((line for line in io.StringIO(text, newline="") if line.strip()), "")
    counts = {}
    for sep in (",", ";"):
        try:
            counts[sep] = len(next(csv.reader([header], delimiter=sep), []))
        except csv.Error:
            counts[sep] = 0
    return ";" if counts[";"] > max(counts[","], 1) else ","


class Roster:
    """The students of a class, read from a CSV file (:meth:`load`).

    Attributes:
        students: the :class:`Student` rows, in the file's order.
        source: the file read.
        raw: the bytes read from it (the gradebook keeps a copy of exactly these), or None
            for a roster not read from a file.
        points_possible: a Canvas gradebook export's "Points Possible" row: column header
            -> the points its assignment is out of, as written (``{"Lab 1 (5501)":
            "100.00"}``; only the columns with a value); {} for other layouts.
        maximum_grade: a Moodle grading worksheet's "Maximum Grade" (its assignment's
            maximum, as written: ``"10.00"``) where its rows agree on one; "" otherwise.
    """

    def __init__(
        self, students, source: str = "", points_possible=None, maximum_grade="", raw=None
    ):
        self.students = tuple(students)
        self.source = source
        self.raw = raw
        self.points_possible = dict(points_possible or {})
        #: index in ``students`` -> the headers of the columns whose cell is ``EX``
        self.excused: dict[int, tuple[str, ...]] = {}
        self.maximum_grade = str(maximum_grade or "")

    def __len__(self) -> int:
        return len(self.students)

    @classmethod
    def load(cls, path, raw: bytes | None = None) -> Roster:
        """Read ``path`` in any of the module's layouts (its bytes ``raw``, when already
        read: the gradebook's copy, checked against its digest).

        Raises:
            RosterError: no header naming a student, or no student in the file; a Moodle
                grading worksheet from a site not in English; an ``ID`` (Canvas's user
                id) that is no number.
        """
        path = pathlib.Path(path)
        raw = _read_bytes(path, "Roster") if raw is None else raw
        rows = _read_csv(path, "Roster", raw)
        if not rows:
            raise RosterError(
                f"Roster {str(path)!r} is empty; expected a header row and one row per student."
            )
        header = [fold(h) for h in rows[0]]
        where = {
            field: next((i for i, h in enumerate(header) if h in names), None)
            for field, names in _COLUMNS.items()
        }
        _check_not_foreign_moodle(path, rows, where)
        if all(
            where[f] is None
            for f in ("student_id", "name", "first", "email", "lms_id", "login", "participant_id")
        ):
            raise RosterError(
                f"Roster {str(path)!r} has no column naming a student (its header: {rows[0]}). Expected "
                f"lablib's 'student_id, name, email, section, submission', a Canvas gradebook export "
                f"(Student, ID, SIS User ID, ...), a Gradescope roster (First Name, Last Name, SID, Email) or "
                f"a Moodle grading worksheet (Identifier, Full name, Email address, ...)."
            )
        lab_times = {}
        for i, h in enumerate(header):
            match = _LAB_TIME.match(h)
            if match and h not in _COLUMNS["submitted_at"]:
                lab_times[i] = match["lab"] or match["lab2"]
        entries = []  # (student, the headers of its cells marked EX, its row in the file)
        naming = [i for f in _NAMING if (i := where[f]) is not None]
        for line, row in enumerate(rows[1:], 2):
            if naming and all(i < len(row) and fold(row[i]) == header[i] for i in naming):
                raise RosterError(
                    f"Roster {str(path)!r}: row {line} repeats the header "
                    f"({', '.join(row[i].strip() for i in naming)}), counting the header as "
                    f"row 1: two files put together, or a header pasted "
                    f"again. A row below the header is a student; nothing was read. Remove the "
                    f"repeated header (and check the rows around it are this class's)."
                )
            student = cls._student(row, where, lab_times)
            if student is None:
                continue
            marked = tuple(h.strip() for h, v in zip(rows[0], row) if v.strip().upper() == "EX")
            entries.append((student, marked, line))
        if not entries:
            raise RosterError(f"Roster {str(path)!r} lists no student below its header.")
        _check_canvas_ids(path, rows[0], where, [student for student, _, _ in entries])
        entries = _one_row_per_student(path, entries, canvas=where["lms_id"] is not None)
        students, excused = [], {}
        for student, marked, _ in entries:
            students.append(student)
            if marked:
                excused[len(students) - 1] = marked
        roster = cls(
            students, str(path), _points_possible(rows, where), _maximum_grade(rows), raw=raw
        )
        roster.excused = excused
        return roster

    def excused_in(self, index: int) -> tuple[str, ...]:
        """The column headers whose cell is ``EX`` (excused) in the row of the
        ``index``-th student of :attr:`students`: a Canvas gradebook export marks an
        excused assignment so, and its import keeps the excuse only where the cell is
        ``EX`` still (:func:`lablib.grading.export.export` writes it back)."""
        return self.excused.get(index, ())

    @staticmethod
    def _student(row, where, lab_times) -> Student | None:
        def get(field):
            i = where[field]
            return row[i].strip() if i is not None and i < len(row) else ""

        name = get("name") or " ".join(p for p in (get("first"), get("last")) if p)
        if not any(row):
            return None
        canvas = where["lms_id"] is not None
        if canvas and ("points possible" in fold(name) or fold(name) in _TEST_STUDENTS):
            return None  # Canvas's points row and test student (never another list's people)
        if where["role"] is not None and fold(get("role")) not in ("", "student"):
            return None  # Gradescope's instructors and TAs
        participant = re.sub(r"^\D+", "", get("participant_id"))  # Moodle's "Participant 1234567"
        submitted, extended_until = get("submitted_at"), ""
        if where["participant_id"] is not None:
            submitted = moodle_time(submitted)  # the worksheet's "Wednesday, 10 June 2026, 2:14 PM"
            extended = _MOODLE_EXTENSION.search(get("status"))
            if extended:  # an extension granted in Moodle: never earlier than the lab's due date
                extended_until = moodle_time(extended.group(1))
        times = tuple(
            (lab, row[i].strip()) for i, lab in lab_times.items() if i < len(row) and row[i].strip()
        )
        student = Student(
            get("student_id"),
            name,
            get("email"),
            get("section"),
            get("submission"),
            get("lms_id"),
            get("login"),
            submitted,
            get("extension"),
            get("due"),
            participant,
            times,
            get("group"),
            extended_until,
        )
        return student if student.identifiers() or name else None

    def match_of(self, identities: dict) -> RosterMatch:
        """The :class:`RosterMatch` of identities resolved at grading (submission name ->
        identity): who matched (a group's submission claims each of its students), what
        did not and why, and who has no submission."""
        by_key = {}
        for student in self.students:
            by_key.setdefault(_student_key(dataclasses.asdict(student)), student)
        students, unmatched, claimed, reasons = {}, [], set(), {}
        for name, identity in identities.items():
            # a group's matched members are its students whoever its first submitter is
            # (one no roster names: they were said to have no submission, yet exported)
            for other in identity.get("others") or []:
                if other.get("matched") and (s := by_key.get(_student_key(other))) is not None:
                    claimed.add(id(s))
            student = by_key.get(_student_key(identity)) if identity.get("matched") else None
            if student is None:
                unmatched.append(name)
                if identity.get("why_unmatched"):
                    reasons[name] = str(identity["why_unmatched"])
                continue
            students[name] = student
            claimed.add(id(student))
        for name, identity in identities.items():  # a group's members matched to no one
            for other in identity.get("others") or []:
                if not other.get("matched") and (other.get("name") or other.get("key")):
                    member = f"{name} (group member {other.get('name') or other.get('key')})"
                    unmatched.append(member)
                    if other.get("why_unmatched"):
                        reasons[member] = str(other["why_unmatched"])
        return RosterMatch(
            students,
            tuple(unmatched),
            tuple(s for s in self.students if id(s) not in claimed),
            reasons,
        )


#: A Moodle grading worksheet's Identifier in any language: a word (Moodle's "Participant",
#: "Teilnehmer/in", "Participante"...) then the participant id.
_PARTICIPANT = re.compile(r"^(?P<word>\D*[^\W\d_]\D*?)\s*\d+$")
#: The English worksheet's columns lablib reads, in Moodle's order.
_MOODLE_COLUMNS = (
    "Identifier, Full name, Email address, Status, Grade, Maximum Grade, Last modified (submission)"
)


def _check_not_foreign_moodle(path, rows, where) -> None:
    """A Moodle grading worksheet downloaded from a site in another language than English
    is refused, saying so: its headers are translated (German ``ID, Vollständiger Name,
    E-Mail-Adresse, ...``), so its ``ID`` would be read as Canvas's user id, or no column
    would name a student. Recognised by its first column: in every row a word and digits,
    the same word in each (Moodle's "Participant 1234567" in the site's language), where
    no English column but ``ID`` names a student. Its columns are not read by position:
    which identity columns a worksheet has (and a team assignment's ``Group``) depends on
    the site's settings.

    Raises:
        RosterError: the file looks like such a worksheet.
    """
    if where["participant_id"] is not None or not rows[0]:
        return
    naming = ("student_id", "name", "first", "email", "login")
    if any(where[f] is not None for f in naming) or where["lms_id"] not in (None, 0):
        return
    cells = [row[0].strip() for row in rows[1:] if any(c.strip() for c in row)]
    words = {m["word"].strip().casefold() if (m := _PARTICIPANT.match(c)) else None for c in cells}
    if not cells or len(words) != 1 or None in words:
        return
    raise RosterError(
        f"Roster {str(path)!r} looks like a Moodle grading worksheet from a site not in English: "
        f"its first column holds Moodle's participant identifiers ({cells[0]!r}...), and the "
        f"headers given were {rows[0]}. lablib reads the English worksheet ({_MOODLE_COLUMNS}; "
        f"which other columns it has depends on the site's settings, so columns are not read "
        f"by their place): switch your Moodle language to English (the language menu, or your "
        f"profile's preferred language) and download the grading worksheet again, or rename "
        f"its columns to {_MOODLE_COLUMNS} (its times are then read only where they are "
        f"written in English)."
    )


def _check_canvas_ids(path, header, where, students) -> None:
    """The ``ID`` column is read as Canvas's user id (a Canvas gradebook export's, the
    number in Canvas's download names): a value that is no number is refused, naming it,
    since no download file could match it and the export would write it where Canvas
    expects its user id.

    Raises:
        RosterError: a student's ``ID`` is not a number.
    """
    bad = [s for s in students if s.lms_id and not (s.lms_id.isascii() and s.lms_id.isdigit())]
    if where["lms_id"] is None or not bad:
        return
    first = bad[0]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    column = header[where["lms_id"]].strip()
    raise RosterError(
        f"Roster {str(path)!r}: its {column!r} column is read as Canvas's user id (a Canvas "
        f"gradebook export's ID, a number such as 1001), but {first.name or first.key!r} has "
        f"{first.lms_id!r}{more}. Give Canvas's gradebook export as Canvas wrote it; for "
        f"another list, name the column of your institution's ids student_id."
    )


#: A Canvas roster's ids, each naming one student: field -> its column in Canvas's export.
_CANVAS_IDS = {"lms_id": "ID", "student_id": "SIS User ID", "login": "SIS Login ID"}
#: The columns that name a student: a row whose cells there are the header's repeats it.
_NAMING = ("student_id", "name", "first", "email", "lms_id", "login", "participant_id")


def _one_row_per_student(path, entries: list, canvas: bool) -> list:
    """A roster's rows, one per student. Canvas's gradebook export writes a student of
    several sections once (``Sec-01 and Sec-02``); section exports put together list them
    once per section, and a list pasted together may hold a row twice (a lablib list with
    one row twice left that student's notebook matched to no one, and two rows of 0 in
    the export). Rows of one person (every field the same but the section) are one
    student, their sections joined as Canvas joins them and their ``EX`` marks kept. In a
    Canvas roster (``canvas``), rows that share an ``ID``, ``SIS User ID`` or ``SIS Login
    ID`` and differ otherwise are refused, naming them: the export would write two rows
    for one student in Canvas's import, with conflicting grades. In another list, an id
    two different rows share names neither student when matching (a typo in the roster,
    said at grading), and the export refuses two rows it would match by one id.

    Raises:
        RosterError: two rows of a Canvas roster share an id and differ otherwise.
    """
    kept: list = []
    index: dict = {}  # (field, folded id) on Canvas, else the row but its section -> kept's
    for student, marked, line in entries:
        alike = dataclasses.replace(student, section="")
        keys = (
            [(f, fold(getattr(student, f))) for f in _CANVAS_IDS if getattr(student, f)]
            if canvas
            else [alike]
        )
        same = min((index[k] for k in keys if k in index), default=None)
        if same is None:
            for k in keys:
                index.setdefault(k, len(kept))
            kept.append((student, marked, line))
            continue
        other, other_marked, other_line = kept[same]
        if dataclasses.replace(other, section="") != alike:
            raise RosterError(
                f"Roster {str(path)!r} lists one student twice with different details: row "
                f"{other_line} ({_canvas_row(other)}) and row {line} ({_canvas_row(student)}), "
                f"counting the header as row 1. Canvas's import would get two rows for one "
                f"student, with conflicting grades. Keep one row per student: export the "
                f"course's gradebook once (Grades > Export) rather than putting section "
                f"exports together (a student of several sections is one row there)."
            )
        parts = [p for x in (other.section, student.section) for p in x.split(" and ") if p]
        section = " and ".join(dict.fromkeys(parts))
        kept[same] = (
            dataclasses.replace(other, section=section),
            tuple(dict.fromkeys(other_marked + marked)),
            other_line,
        )
    return kept


def _canvas_row(student: Student) -> str:
    """A Canvas roster row's student as a message names it: name, ids, section."""
    fields = [repr(student.name)] + [
        f"{column} {getattr(student, field)!r}" for field, column in _CANVAS_IDS.items()
    ]
    return ", ".join(fields + [f"section {student.section!r}"])


def _points_possible(rows, where) -> dict[str, str]:
    """Canvas's "Points Possible" row (the first row whose student is so named, in its
    name column or, where Canvas splits names into ``LastName, FirstName``, in either):
    column header -> value, for the columns with a value ({} when there is no such
    row)."""
    columns = [i for i in (where["name"], where["first"], where["last"]) if i is not None]
    for row in rows[1:]:
        label = next(
            (i for i in columns if i < len(row) and "points possible" in fold(row[i])), None
        )
        if label is not None:
            return {
                header.strip(): value.strip()
                for i, (header, value) in enumerate(zip(rows[0], row))
                if i != label and header.strip() and value.strip()
            }
    return {}


def _maximum_grade(rows) -> str:
    """A Moodle grading worksheet's "Maximum Grade", as its first row with one writes it,
    where the rows agree ("10" and "10.00" do); the distinct values joined by "; " where
    they differ (no number: the export says it could not check it); "" without that
    column."""
    header = [fold(h) for h in rows[0]]
    if "maximum grade" not in header:
        return ""
    i = header.index("maximum grade")
    values = list(dict.fromkeys(r[i].strip() for r in rows[1:] if i < len(r) and r[i].strip()))
    numbers = {v if (n := moodle_number(v)) is None else n for v in values}
    return values[0] if len(numbers) == 1 else "; ".join(values)


def _student_key(fields: dict) -> tuple:
    """What tells two descriptions of a roster student apart (ids, e-mail, name)."""
    return tuple(
        fold(fields.get(k, ""))
        for k in ("student_id", "lms_id", "email", "participant_id", "login", "name")
    )


@dataclasses.dataclass(frozen=True)
class SubmissionTimes:
    """Submission times from a small CSV file: ``student, lab, submitted_at`` (header row;
    ``student`` is any identifier of the student: id, e-mail, login, Canvas user id, or
    the submission's name in the gradebook; ``lab`` the lab's short or full name, or empty
    for every lab). Several rows for one student and lab are submissions and
    resubmissions: the latest time counts.

    Example::

        times = SubmissionTimes.load("times.csv")
        times.lookup({"s001", "erin@uni.edu"}, ("lab1_attention", "lab1"))  # ('2026-11-21T09:00+01:00', ...)
    """

    rows: tuple  # (student folded, lab folded, time text, line)
    source: str = ""

    @classmethod
    def load(cls, path) -> SubmissionTimes:
        """Read ``path``.

        Raises:
            RosterError: no ``student`` and ``submitted_at`` columns, a time that is not
                ISO 8601 (the message names the line), or no row.
        """
        from lablib.grading.gradebook.late import LateError, parse_time

        rows = _read_csv(path, "Times file")
        header = [fold(h) for h in rows[0]] if rows else []
        try:
            student, when = (
                header.index("student"),
                next(
                    i for i, h in enumerate(header) if h in ("submitted_at", "submitted at", "time")
                ),
            )
        except (ValueError, StopIteration):
            raise RosterError(
                f"Times file {str(path)!r} needs a header 'student,lab,submitted_at' (its header: "
                f"{rows[0] if rows else []}); one row per submission, e.g. "
                f"'S001,lab1,2026-11-20T23:10+01:00'."
            ) from None
        lab = header.index("lab") if "lab" in header else None
        out = []
        for line, row in enumerate(rows[1:], 2):
            if not any(c.strip() for c in row):
                continue
            who = row[student].strip() if student < len(row) else ""
            value = row[when].strip() if when < len(row) else ""
            if not who or not value:
                raise RosterError(
                    f"Times file {str(path)!r}, line {line}: expected a student and a time, got {row}."
                )
            try:
                parse_time(value)
            except LateError as exc:
                raise RosterError(f"Times file {str(path)!r}, line {line}: {exc}") from None
            out.append(
                (
                    fold(who),
                    fold(row[lab]) if lab is not None and lab < len(row) else "",
                    value,
                    line,
                )
            )
        if not out:
            raise RosterError(f"Times file {str(path)!r} lists no submission below its header.")
        return cls(tuple(out), str(path))

    def lookup(self, identifiers, aliases) -> tuple[str, str]:
        """``(time, where it came from)``: the latest time of a row naming one of
        ``identifiers`` (folded) for a lab called any of ``aliases`` (or for every lab);
        ("", "") when there is none."""
        from lablib.grading.gradebook.late import parse_time

        names = {fold(a) for a in aliases}
        keys = {fold(i) for i in identifiers if i}
        found = [
            (parse_time(t), t, line)
            for who, lab, t, line in self.rows
            if who in keys and (not lab or lab in names)
        ]
        if not found:
            return "", ""
        _, text, line = max(found, key=lambda f: f[0])
        return text, f"{pathlib.Path(self.source).name or 'the times file'}, line {line}"
