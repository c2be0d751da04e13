"""Who submitted each submission: resolved once, at grading, and kept in the gradebook.

A submission's identity is a plain dict (``grades.json``'s ``identity`` per row)::

    {"key": "S001", "name": "Doe, Erin", "student_id": "S001", "email": "erin@uni.edu",
     "section": "A", "lms_id": "1001", "login": "erin", "participant_id": "",
     "extension": "", "due": "", "group": "",
     "matched": True, "matched_by": "Canvas user id 1001",
     "lms": {"lms": "canvas", "user_id": "1001", "late": True, ...},
     "others": [],                       # a group's other members (Gradescope, Moodle, Canvas)
     "submitted_at": "2026-11-21T09:00:00+00:00", "time_source": "Gradescope's submission_metadata.yml"}

Matching a submission to the roster, first rule that finds exactly one student:

1. the roster's ``submission`` column names it (its name, its path below the folder
   given, its student's folder or its notebook, without ``.ipynb``; for a notebook of an
   LMS download not its notebook's or a folder's name inside the student's folder, which
   the student chose: see rule 3);
2. the LMS download's ids: Canvas's user id = the roster's ``ID``, when the name in the
   file is that student's as Canvas writes it (:func:`~lablib.grading.lms.canvas_slug` of
   their name, either order of its words) or their own group's (the roster's ``group``
   column: a group assignment's file, named after the group under one member's user id,
   is each member's, that member the identity and the others its ``others``); a file
   name that can be read in several ways (:func:`~lablib.grading.lms.canvas_splits`:
   ``mallory_1002_1005_...`` is user 1002 named ``mallory`` or user 1005 named
   ``mallory_1002``) is the one reading's that agrees so, and no one's when none or
   several do; a reading whose student the roster gives no name agrees only when it is
   the file's only one. A Canvas file whose user id the roster has but whose name is not
   that student's is no one's, with why (a group submission?), and rules 3 and 4 are not
   tried for it; its user id is left out of the identity. Canvas's ``LATE`` marker in
   any reading counts (``lms.late``; ``late_disputed`` when another reading has none).
   Moodle's participant id = the worksheet's Identifier, when the folder's name is that
   student's (their full name, "Participant", or ``<their group>-`` before either; any,
   for a student without a full name); a Gradescope submitter's SID or e-mail. A Moodle folder whose name is
   one of the roster's groups' as Moodle 4.1's download writes it
   (``<group name>_<group id>``, the "Default group" without an id;
   :func:`~lablib.grading.lms.moodle_file_forms`) is each student's of that group (the
   ``group`` column: the worksheet's ``Group``), the first the identity, the others its
   ``others``; groups are told apart by their exact name. A folder's name is compared as
   Moodle writes it (case and spacing kept) first, folded only when nothing is written
   exactly so, and the exact match wins; a folder with a student's participant id and
   exact full name, or ``Participant`` (an anonymous submission's), is theirs though a
   group is written alike, unless that group is their own with others in it. A folder
   two groups are written alike in, or that is both a student's own and a group's alike,
   is no one's. A student the roster gives no full name owns any folder with their
   participant id (nothing to compare) but one written exactly as a group's, which is
   the group's. A numbered folder named as the "Default group" (a group some student
   named so; :meth:`RosterIndex.names_default`) is no one's, and so is the Default
   group's own (:meth:`RosterIndex.is_default_folder`) when the download or a gradebook
   graded with it also has one (:meth:`RosterIndex.note`). A folder whose number is the
   participant id of a student it does not name is no one's (a group id that is some
   student's participant id is not theirs), and rules 3 and 4 are not tried for it. Any
   other Moodle folder goes on to rules 3 and 4, except that with groups in the roster a
   member's copy (``<group>-<Full name>``, Moodle before 4.1) is only a student's of
   that group. What matches no one says why (``why_unmatched``: what the folder says,
   what was expected, what to do);
3. one of the student's identifiers (student id, SIS/Canvas ids, login, e-mail or its part
   before ``@``, Moodle participant id) equals the submission's name, one of its folders
   or its notebook's name (a key that is one student's id, login or address and only the
   part before ``@`` of others' is that student's). A notebook in a student's folder is
   named by that folder (and the folders above it) only, never by its own file's or
   subfolders' names (``lab9-erin/frank.ipynb`` is not Frank's); a notebook at the top of
   the folder given, by its file's name. For a notebook of an LMS download (its row
   carries the LMS's description), only the folders may name the student: its student's folder (the
   LMS's) with the folders above it, never the student's own file or subfolder names
   (``frank.ipynb`` in Mallory's Moodle folder, or in a Gradescope ``submission_<id>``
   folder, is not Frank's), and never the name the LMS writes (Canvas's, Moodle's
   folder's full name, a Gradescope submitter's, and the submission's name made of it):
   that is a display name, compared with the roster's names only (rule 4), never with a
   login, a student id or an e-mail address (Canvas's ``aditi`` for the student "Aditi"
   is not the file of "Aditi Sharma", whose e-mail is ``aditi@...``). The LMS's own ids
   are compared by rule 2;
4. for an LMS download only, the student's name as the LMS wrote it (Canvas's
   ``andersonemma`` for "Anderson, Emma", Moodle's full name, a Gradescope submitter's
   name), when no other student has that name. A Canvas file found by rule 3 or 4 is
   never a student's whom the roster gives another Canvas user id (no one's, with why).
   Where the name the LMS wrote is also another student's identifier, the match says so
   (``matched_by``: whose, and how to give the file to them); where it is no student's
   name, or several students', the download is no one's, with why
   (``why_unmatched``: what the name is, whose identifier it also is, and to give the
   LMS's own roster export, with its ids, or the roster's submission column).

A Gradescope group's other submitters are the identity's ``others``: a roster student,
or, matched to no one, their name, SID and e-mail with ``why_unmatched`` (listed with
the unmatched submissions as ``<submission> (group member <name>)``).

Everything else is compared NFC-normalised and case-folded (a macOS zip's NFD ``josé.núñez``
matches the roster's NFC one). An identifier shared by two students matches neither.
Without a match (or without a roster) the identity is what the download says (Canvas
user id and name, Moodle participant id and full name or a group's name, Gradescope SID,
e-mail and name), else the submission's name; a Moodle number the roster gives another
student, or any unmatched Moodle folder's number when the roster has groups (it may be a
group's id), is left out of it, and so is the user id of a Canvas file that is not its
student's by name or that can be read in several ways (without a roster too: no reading
is taken, and ``why_unmatched`` names the readings).

The submission time, first found of: the LMS download (a Gradescope export's
``:created_at:``), the times file (``--times``; the latest row), the roster's
``submitted_at:<lab>`` column, its ``submitted_at`` column. Canvas's ``LATE`` marker is
kept as the LMS's word that the submission was late (``lms.late``).

Example::

    from lablib.grading.gradebook.identity import resolve_all
    identities = resolve_all(found, roster, times=times, lab=spec)   # name -> identity
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import unicodedata

from lablib.grading.lms import (
    canvas_slug,
    clean_label,
    fold,
    moodle_file_forms,
    moodle_file_text,
)
from lablib.grading.gradebook.roster import Roster, RosterMatch, Student, lab_aliases
from lablib.grading.submissions import Found

__all__ = [
    "resolve",
    "resolve_all",
    "match_roster",
    "student_of",
    "identity_keys",
    "lms_person",
    "owner_of",
    "RosterIndex",
    "STUDENT_FIELDS",
]

#: The roster fields an identity carries.
STUDENT_FIELDS = (
    "student_id",
    "name",
    "email",
    "section",
    "lms_id",
    "login",
    "participant_id",
    "extension",
    "due",
    "group",
)


#: The group the grading worksheet of a team assignment gives the students in no group
#: (Moodle's Default group, whose folder has no number), as it writes it.
DEFAULT_GROUP = "Default group"


def _slug(text: str) -> str:
    """A name as Canvas's download writes it: folded, only letters, digits and ``_``."""
    return re.sub(r"[^\w]", "", fold(text))


def _name_forms(student: Student) -> set[str]:
    """The ways an LMS writes ``student``'s name: as given, folded; Canvas's slug of it
    and of its "Last, First" form; Moodle's download's (``O'Brien`` written ``OBrien``)."""
    name = fold(student.name)
    if not name:
        return set()
    forms = {name, _slug(name)} | moodle_file_forms(student.name)  # full names unformatted
    if "," in name:  # "doe, erin" -> "erin doe"
        last, _, first = name.partition(",")
        forms.add(fold(f"{first} {last}"))
    else:  # "erin doe" -> Canvas's "doeerin"
        words = name.split()
        if len(words) > 1:
            forms.add(_slug(" ".join(words[-1:] + words[:-1])))
    return forms


class RosterIndex:
    """The roster's students by every key a submission may carry (a key of two students
    finds neither), and its groups by the names Moodle's download gives them."""

    def __init__(self, roster):
        self.roster = roster
        self.explicit: dict[str, list] = {}
        self.ids: dict[str, list] = {}
        self.lms_ids: dict[str, list] = {}
        self.participants: dict[str, list] = {}
        self.student_ids: dict[str, list] = {}
        self.emails: dict[str, list] = {}
        self.names: dict[str, list] = {}
        for s in roster.students:
            if s.submission:
                key = fold(re.sub(r"\.ipynb$", "", s.submission.strip().strip("/"), flags=re.I))
                self.explicit.setdefault(key, []).append(s)
            for key in s.identifiers():
                self.ids.setdefault(key, []).append(s)
            for table, value in (
                (self.lms_ids, s.lms_id),
                (self.participants, s.participant_id),
                (self.student_ids, s.student_id),
                (self.emails, s.email),
            ):
                if value.strip():
                    table.setdefault(fold(value), []).append(s)
            for form in _name_forms(s):
                self.names.setdefault(form, []).append(s)
        # a key that is one student's id, login or address and only the start of others'
        # addresses is that student's (``jsmith``: John's login, and the start of Jane's
        # jsmith@gmail.com)
        for key, students in self.ids.items():
            strong = [s for s in students if key in _strong_ids(s)]
            if len(students) > 1 and len(strong) == 1:
                self.ids[key] = strong
        # a team assignment's groups (the roster's group column), each by its exact (NFC)
        # name: "Team Red" and "team  red" are two Moodle groups. Members in roster order,
        # and the group folders' names as Moodle 4.1's download writes them (formatted)
        self.members: dict[str, list] = {}
        self.group_names: dict[str, str] = {}  # as shown (control characters made "?")
        self.groups: dict[str, list] = {}  # folded
        self.groups_exact: dict[str, list] = {}  # as written, case and spacing kept
        for s in roster.students:
            if s.group.strip():
                key = unicodedata.normalize("NFC", s.group.strip())
                if key not in self.members:
                    self.group_names[key] = clean_label(s.group)
                    for form in moodle_file_forms(s.group, formatted=True):
                        self.groups.setdefault(form, []).append(key)
                    exact = moodle_file_text(s.group, formatted=True)
                    if exact:
                        self.groups_exact.setdefault(exact, []).append(key)
                self.members.setdefault(key, []).append(s)
        # a numbered folder named as Moodle's Default group, and where it is (see note)
        self.default_named = ""
        self.default_where = ""

    def group_match(self, name: str) -> tuple[list[str], bool]:
        """The roster's groups whose folder Moodle's download names ``name`` (two or more
        when their names are written alike), and whether exactly: compared as written
        first (case and spacing kept: "Team Red" and "team  red" are two folders), folded
        only when no group is written exactly so."""
        exact = self.groups_exact.get(unicodedata.normalize("NFC", str(name or "")).strip())
        if exact:
            return list(dict.fromkeys(exact)), True
        return list(dict.fromkeys(self.groups.get(fold(name), []))), False

    def group_keys(self, name: str) -> list[str]:
        """The roster's groups whose folder Moodle's download names ``name``
        (:meth:`group_match`)."""
        return self.group_match(name)[0]

    def is_default_folder(self, lms) -> bool:
        """Whether ``lms`` (a submission's download description, as the download gives it
        or a gradebook kept it) is Moodle's Default group's own folder: a Moodle folder
        without a number named as the roster's "Default group"."""
        lms = lms or {}
        return (
            lms.get("lms") == "moodle"
            and not lms.get("participant_id")
            and not lms.get("group_id")
            and DEFAULT_GROUP in self.group_keys(lms.get("name", ""))
        )

    def names_default(self, lms) -> str:
        """The folder (``<name>_<number>``) when ``lms`` is a numbered Moodle folder named
        as the roster's "Default group" (a group some student named so), else "": its
        number a participant id as the download gives it, or a group id as a gradebook
        written before this rule kept it (matched as that group's)."""
        lms = lms or {}
        number = lms.get("participant_id") or lms.get("group_id") or ""
        if lms.get("lms") != "moodle" or not number:
            return ""
        name = lms.get("name", "")
        return _prefix(name, number) if DEFAULT_GROUP in self.group_keys(name) else ""

    def default_refused(self, lms) -> bool:
        """Whether the rules refuse ``lms``'s folder as a Default group's: a numbered folder
        named so (:meth:`names_default`), or the Default group's own
        (:meth:`is_default_folder`) once such a folder is noted (:meth:`note`). A kept row
        of either is resolved again: it may have been matched before."""
        return bool(self.names_default(lms)) or bool(
            self.default_named and self.is_default_folder(lms)
        )

    def note(self, lms_infos, where: str = "this download") -> None:
        """What the whole download says that one folder cannot: a numbered folder named as
        the roster's "Default group" (:meth:`names_default`; the worksheet writes "Default
        group" for that group's members and for the students in no group alike), after
        which the Default group's own folder (no number) cannot be told to be the
        students' in no group. ``lms_infos``: download descriptions (of the submissions
        graded now, or of a gradebook's rows); ``where``: where they come from, as the
        refusal says it ("this download", "lab1's gradebook"). The first folder noted
        stays."""
        if self.default_named:
            return
        for lms in lms_infos:
            named = self.names_default(lms)
            if named:
                self.default_named, self.default_where = named, where
                return

    @staticmethod
    def one(table: dict, keys) -> tuple[Student | None, str]:
        """The one student a key of ``keys`` finds in ``table`` (first key that finds any),
        and the key; (None, key) when that key names two students."""
        for key in keys:
            key = fold(key)
            if key and key in table:
                found = {id(s): s for s in table[key]}
                return (next(iter(found.values())) if len(found) == 1 else None), key
        return None, ""


def _candidates(found, lms: dict | None = None, *, names: bool = True) -> list[str]:
    """What a submission may be named after: its name, its path below the folder given and
    its student's folder, each of their parts, and its notebook's name, without ``.ipynb``.
    A notebook in a student's folder is that folder's: named after the folder (and the
    folders above it) only, never after its own file's or subfolders' names, which the
    student gave (``lab9-erin/frank.ipynb`` is Erin's or no one's, never Frank's).
    A notebook of an LMS download (``lms``, else the submission's own LMS description):
    only what the LMS wrote (:func:`_lms_candidates`; ``names=False``: not the display
    names it wrote, for the identifier rule)."""
    lms = dict(getattr(found, "lms", {}) or {}) if lms is None else lms
    if lms.get("lms"):
        return _lms_candidates(found, lms, names=names)
    name = str(found.name)
    where = re.sub(r"\.ipynb$", "", str(getattr(found, "where", "") or ""), flags=re.I)
    folder = str(getattr(found, "folder", "") or "")
    stem = re.sub(
        r"\.ipynb$",
        "",
        found.path.name if hasattr(found.path, "name") else str(found.path),
        flags=re.I,
    )
    if folder:  # the whole name and path as given (a roster's submission column) too
        out = [name, where, folder, *folder.split("/")]
    else:
        out = [name, where, f"{name}/{stem}", stem]
        for text in (name, where):
            out += text.split("/")
    return [c for c in dict.fromkeys(out) if c]


def _lms_candidates(found, lms: dict, *, names: bool = True) -> list[str]:
    """What a notebook of an LMS download may be named after: what the LMS wrote, never the
    student's own file or folder names inside it (``frank.ipynb`` in Mallory's folder is
    Mallory's): the name the LMS gives it (each reading's, for a Canvas file read in
    several ways) and the row's name made of it (:func:`_display_names`; left out with
    ``names=False``: a display name is never compared with the roster's identifiers), its
    student's folder (the LMS's, with the folders above it), for a file without one the
    folders above it, and, for the roster's submission column, the row's path below the
    folder given."""
    where = re.sub(r"\.ipynb$", "", str(getattr(found, "where", "") or ""), flags=re.I)
    folder = str(getattr(found, "folder", "") or "")
    above = folder.split("/") if folder else where.split("/")[:-1]
    shown = _display_names(found, lms) if names else []
    out = [*shown[:1], where, folder, *shown[1:], *above]
    return [c for c in dict.fromkeys(out) if c]


def _display_names(found, lms: dict) -> list[str]:
    """The display names an LMS download's notebook carries: the row's name (made of the
    name the LMS wrote: Canvas's, Moodle's full name, a Gradescope export's first
    submitter's) and the name the LMS wrote (each reading's, for a Canvas file read in
    several ways)."""
    names = [str(found.name), lms.get("name", "")]
    if lms.get("lms") == "canvas":
        names += [r.get("name", "") for r in _canvas_readings(lms)]
    return [n for n in dict.fromkeys(names) if n]


def _lms_match(index: RosterIndex, lms: dict) -> list[tuple[Student | None, str]]:
    """``(student or None, how)`` per person a Gradescope submission names (a group has
    several): :func:`_gradescope_person`."""
    if lms.get("lms") == "gradescope":
        return [_gradescope_person(index, person) for person in lms.get("submitters", [])]
    return []


def _gradescope_person(index: RosterIndex, person: dict) -> tuple[Student | None, str]:
    """``(student, how)`` for one submitter of a Gradescope export, by its SID, else its
    e-mail, else its name; ``(None, why)`` when they name different students of the
    roster, its name counted only where its e-mail names no one (a SID typed wrong in
    Gradescope, Bob's on Mallory's account: her notebook was Bob's, her name and e-mail on
    it, and she got 0 without a word), or when only its name names a student whose roster
    SID or e-mail differs from the submitter's; ``(None, "")`` when none names anyone."""
    found, by_email = [], None
    for key, table, label in (
        ("sid", index.student_ids, "SID"),
        ("email", index.emails, "e-mail"),
        ("name", index.names, "name"),
    ):
        value = str(person.get(key) or "")
        student = index.one(table, [value])[0] if value else None
        if key == "email":
            by_email = student
        if key == "name" and by_email is not None:  # a display name never outweighs the
            break  # account's e-mail; it does speak against a SID typed alone
        if student is not None and all(student is not s for s, _ in found):
            found.append((student, f"Gradescope {label} {value}"))
    if len(found) > 1:
        said = ", ".join(f"{how} is {s.name or s.key}'s" for s, how in found)
        return None, (
            f"Gradescope submitter {person.get('name', '')!r}: {said} in the roster; which "
            f"student handed it in cannot be told (a SID typed wrong in Gradescope gives a "
            f"classmate the notebook): correct the SID in Gradescope and download again, or "
            f"name the student in the roster's submission column, then grade again"
        )
    if found and found[0][1].startswith("Gradescope name"):  # the name alone named them
        student = found[0][0]
        against = [
            f"{label} {value!r} is not {student.name or student.key}'s ({theirs!r})"
            for label, value, theirs in (
                ("SID", str(person.get("sid") or ""), student.student_id),
                ("e-mail", str(person.get("email") or ""), student.email),
            )
            if value and theirs and fold(value) != fold(theirs)
        ]
        if against:  # Mallory's account named "Bob Brown": Bob got her notebook
            return None, (
                f"Gradescope submitter {person.get('name', '')!r}: the name is a roster "
                f"student's, but the submitter's {' and '.join(against)}; a name alone "
                f"never outweighs an id that names someone else: correct the roster or the "
                f"Gradescope account, or name the student in the roster's submission column, "
                f"then grade again"
            )
    return found[0] if found else (None, "")


@dataclasses.dataclass(frozen=True)
class _LmsMatch:
    """Whose a Moodle download's folder (or flat file), or a Canvas file, is.

    Attributes:
        students: its students (a group's members, in roster order; a Canvas group's
            member whose user id the file has first); () for no one.
        how: how they were found.
        lms: Moodle: what to add to the download's description when it is a group's (its
            ``group``, ``group_id`` and no ``participant_id``) or a member's copy (its
            ``group``); nothing when it is no one's, so that another roster can decide.
            Canvas: the description as decided (the reading taken, or none), replacing
            the download's.
        why: why it is no one's (what it says, what was expected, what to do).
        final: decided: the identifier and name rules are not tried after it.
        doubted: its number is not known to be a participant id (a team assignment's
            folder, one whose name is not that participant's, or any folder left to the
            identifier and name rules when the roster has groups), or its Canvas user id
            not known to be its student's (the name in the file is not theirs, or the file
            can be read in several ways): left out of the identity if unmatched, so that
            no later join by participant or user id gives it to anyone.
    """

    students: tuple = ()
    how: str = ""
    lms: dict = dataclasses.field(default_factory=dict)
    why: str = ""
    final: bool = False
    doubted: bool = False


def _moodle_own(student: Student, name: str) -> tuple[int, str, str]:
    """Whether a Moodle folder called ``name`` can be ``student``'s own: 2 when exactly as
    Moodle writes it (case and spacing kept), 1 when only folded, 0 not; the group it
    names; and by what: ``"name"`` (their full name), ``"participant"`` (Moodle's
    "Participant", an anonymous submission's), or ``"any"`` (the roster gives the
    student no full name: nothing to compare, any name). Theirs: their full name as
    Moodle writes it, or "Participant"; or either after ``<group>-``, a team member's
    copy (``locallib.php`` before Moodle 4.1, the group's name unformatted), whose group
    must be the student's when the roster gives one."""
    named = bool(fold(student.name))
    full = moodle_file_text(student.name) if named else ""
    exact = {full, "Participant"} - {""}
    folded = (_name_forms(student) if named else set()) | {"participant"}
    in_group = student.group.strip()
    group_text = moodle_file_text(student.group) if in_group else None
    group_forms = moodle_file_forms(student.group) if in_group else None

    def by(part: str) -> str:
        return "name" if named and fold(part) != "participant" else "participant"

    if name in exact:
        return 2, "", by(name)
    for i, char in enumerate(name):
        if char == "-" and name[i + 1 :] in exact:
            if group_text is None or name[:i] == group_text:
                return 2, name[:i], by(name[i + 1 :])
    if fold(name) in folded:
        return 1, "", by(name)
    for i, char in enumerate(name):
        if char == "-" and fold(name[i + 1 :]) in folded:
            if group_forms is None or fold(name[:i]) in group_forms:
                return 1, name[:i], by(name[i + 1 :])
    if not named:  # nothing to compare; "<their group>-..." is their copy
        copy = group_text is not None and name.startswith(group_text + "-")
        return 1, group_text if copy else "", "any"
    return 0, "", ""


def _moodle_match(index: RosterIndex, lms: dict) -> _LmsMatch:
    """Whose a Moodle folder is, by its number and name against the roster: a student's
    own (the participant id, and a name that is that student's); a team's, when its name
    is one of the roster's groups' as Moodle writes it (its number the group's id): the
    group's members; else the identifier and name rules decide, as for any folder. Names
    are compared as Moodle writes them first (case and spacing kept), folded only when
    that finds nothing, and the exact match wins. A folder with a student's participant
    id and that student's exact full name, or "Participant", is theirs though a group is
    written alike (its id would have to equal that participant id: a coincidence no
    student can arrange), unless that group is the student's own with others in it. A
    student the roster gives no full name owns any folder with their participant id
    (nothing to compare) but one written exactly as a group's, which is the group's. A
    number that names a student the name does not, or a name two groups or a group and
    that number's student share alike, is reported, never given to a student it does not
    name."""
    name, number = lms.get("name", ""), lms.get("participant_id", "")
    if lms.get("group") and not number:  # "Default group", or a group's folder decided before
        return _moodle_group(index, lms, index.group_keys(name))
    owner = index.one(index.participants, [number])[0] if number else None
    keys, keys_exact = index.group_match(name)
    if owner is not None:
        own, group, by = _moodle_own(owner, name)
        level = 2 if keys_exact else 1
        if own and keys and by == "any":
            if keys_exact:
                own = 0  # written exactly as a group's: the group's (below)
            else:
                keys = []  # only folded like a group's: the student's
        elif own and keys and own > level:
            keys = []  # the student's exactly, the group's only folded
        elif own and keys and own == level:
            mine = unicodedata.normalize("NFC", owner.group.strip())
            shared = mine in keys and len(index.members.get(mine, ())) > 1
            if own == 1 or shared:
                return _LmsMatch(
                    why=_own_and_group(index, name, number, owner, keys, shared),
                    final=True,
                    doubted=True,
                )
            keys = []  # their exact full name or "Participant": a group written so is not theirs
        if own and not keys:
            how = f"Moodle participant id {number}" + (f" (group {group}'s copy)" if group else "")
            return _LmsMatch((owner,), how, {"group": group} if group else {}, final=True)
    if keys:  # a team assignment's folder: its group's
        return _moodle_group(index, lms, keys)
    if index.members and owner is None:
        member = _moodle_copy(index, name)
        if member is not None:
            return _LmsMatch((member,), f"Moodle name {name}", {}, final=True)
    if owner is not None:
        return _LmsMatch(why=_not_theirs(index, name, number, owner), final=True, doubted=True)
    # a student's own folder as far as the roster knows: the identifier and name rules
    # follow. With groups in the roster its number may be a group's: left out if unmatched
    return _LmsMatch(
        why=_moodle_unmatched(index, lms) if index.members else "", doubted=bool(index.members)
    )


def _own_and_group(
    index: RosterIndex, name: str, number: str, owner: Student, keys: list, shared: bool
) -> str:
    """Why a Moodle folder that is both ``owner``'s own (their participant id) and one of
    the roster's groups' (``keys``) is no one's."""
    folder = f"Moodle's folder {_prefix(name, number)!r}"
    written = ", ".join(repr(index.group_names[k]) for k in keys)
    named = bool(fold(owner.name))
    who = owner.name if named else f"participant {number}"
    as_own = (
        f"{owner.name}, whose participant id is {number}"
        if named
        else f"the anonymous submission of participant {number} (the roster gives no full name)"
    )
    if shared:
        said = (
            f"{folder} is named as {as_own}, and as {who}'s own group {written}, which has "
            f"other members: it may be {who}'s own or the whole group's"
        )
    else:
        said = f"{folder} is named as {as_own}, and as the roster's group {written}"
    return (
        f"{said}; lablib does not guess whose it is. If it is the group's, rename the group "
        f"in Moodle (to a name no student has, not 'Participant') and download again; if it "
        f"is {who}'s own, name it in the roster's submission column"
    )


def _not_theirs(index: RosterIndex, name: str, number: str, owner: Student) -> str:
    """Why a Moodle folder whose number is ``owner``'s participant id but whose name is
    not theirs is no one's: what was expected, and what to do with the roster given."""
    folder = f"Moodle's folder {_prefix(name, number)!r}"
    named = bool(fold(owner.name))
    who = owner.name if named else f"participant {number}"
    full = moodle_file_text(owner.name) if named else ""
    expected = " or ".join(repr(f"{n}_{number}") for n in (full, "Participant") if n)
    theirs = (
        f"{who}'s own folder is {expected}, or the same after '<their group>-' (a member's "
        f"copy), not {name!r}"
    )
    sheet = (
        f"if the roster is another assignment's grading worksheet, give this assignment's "
        f"(participant ids differ between assignments); if it is this assignment's, "
        f"downloaded with these submissions, the folder is not {who}'s: should it be, name "
        f"it in the roster's submission column"
    )
    if index.members:
        return (
            f"{folder} is not the folder of any of the roster's groups ({_known(index)}) and "
            f"not {who}'s own: {number} is {who}'s participant id, but {theirs}. For a team "
            f"submission, write each member's group, as Moodle names it, in the roster's group "
            f"column (the grading worksheet's Group column names each student's group); "
            f"for a student's own, {sheet}"
        )
    return (
        f"{folder}: {number} is the participant id of {who} in the roster, but {theirs}. A team "
        f"submission's folder is '<group name>_<group id>' (a group's id, not a participant's): "
        f"give the team assignment's grading worksheet, with its Group column, as the roster. "
        f"For a student's own, {sheet}"
    )


def _known(index: RosterIndex) -> str:
    """The roster's groups, as a message lists them."""
    known = sorted(index.group_names.values())
    return f"its groups: {', '.join(map(repr, known[:8]))}{', ...' if len(known) > 8 else ''}"


def _moodle_unmatched(index: RosterIndex | None, lms: dict) -> str:
    """Why a Moodle folder that no rule decided matches no one."""
    name, number = lms.get("name", ""), lms.get("participant_id", "")
    said = (
        f"participant id {number} is not in the roster's Identifier column and " if number else ""
    )
    folder = f"Moodle's folder {_prefix(name, number)!r}"
    if index is not None and index.members:
        return (
            f"{folder} is not the folder of any of the roster's groups ({_known(index)}), "
            f"{said}no student of the roster is named {name!r}: for a team assignment, give its "
            f"grading worksheet as the roster (its Group column names each student's group) or "
            f"write each member's group, as Moodle names it, in the roster's group column; for "
            f"a student's own, give this assignment's grading worksheet"
        )
    return (
        f"{folder}: {said}no student of the roster is named "
        f"{name!r}; give this assignment's grading worksheet as the roster (for a team assignment, "
        f"with its Group column)"
    )


def _prefix(name: str, number: str) -> str:
    """A Moodle folder's prefix as the download wrote it."""
    return f"{name}_{number}" if number else name


def _moodle_group(index: RosterIndex, lms: dict, keys: list) -> _LmsMatch:
    """A team assignment's folder (``lms``: its download description, its number a
    participant id as the download gives it or a group id as decided before): the
    members of the one roster group (``keys``: those whose name Moodle writes its name);
    refused when two groups are written alike or, for a folder without a number (the
    "Default group"), when no group is. The worksheet writes "Default group" for the
    students in no group and for the members of a group named so alike: a numbered
    folder of that name is refused (:meth:`RosterIndex.names_default`), and then the
    Default group's own folder too (:meth:`RosterIndex.is_default_folder`)."""
    name = lms.get("name", "")
    number = lms.get("participant_id") or lms.get("group_id") or ""
    group = {"group": name, "group_id": number, "participant_id": ""}
    folder = f"Moodle's folder {_prefix(name, number)!r}"
    rename = (
        "a group is named like Moodle's Default group, and the grading worksheet writes "
        "'Default group' both for the students in no group and for that group's members; "
        "rename that group in Moodle (to a name no other group has) and download the "
        "submissions and the worksheet again"
    )
    if index.names_default(lms):
        return _LmsMatch(
            why=f"{folder} is a team submission of a group named {name!r} (Moodle writes no "
            f"id for its own Default group), so it is not the Default group's: {rename}",
            final=True,
            doubted=True,
        )
    if index.default_named and index.is_default_folder(lms):
        return _LmsMatch(
            why=f"{folder} is the team submission of Moodle's Default group (the students in "
            f"no group), but {index.default_where} also has {index.default_named!r}, a group "
            f"named like it, and the roster cannot tell the Default group's students from that "
            f"group's: {rename}",
            final=True,
            doubted=True,
        )
    if len(keys) == 1:
        members = tuple(index.members[keys[0]])
        how = (
            f"Moodle group {index.group_names[keys[0]]!r}"
            + (f" (group id {number})" if number else "")
            + f", {len(members)} member(s) in the roster's group column"
        )
        return _LmsMatch(members, how, group, final=True)
    if len(keys) > 1:
        alike = ", ".join(repr(index.group_names[k]) for k in keys)
        return _LmsMatch(
            why=f"{folder}: the roster's groups {alike} are all written {name!r} in Moodle's "
            f"download, so it is none of them; rename all but one in Moodle and download again",
            final=True,
            doubted=True,
        )
    if not index.members:
        why = (
            f"{folder} is a team submission (of the group {name!r}; Moodle writes no id for its "
            f"Default group) and the roster gives no student a group: give the team assignment's "
            f"grading worksheet (its Group column) as the roster, or add a group column"
        )
    else:
        why = (
            f"{folder} is a team submission of the group {name!r}, which no student of the "
            f"roster is in ({_known(index)}); give this assignment's grading worksheet as the "
            f"roster (its Group column names each student's group), or write each member's "
            f"group, as Moodle names it, in the roster's group column"
        )
    return _LmsMatch(why=why, final=True, doubted=True)


def _moodle_copy(index: RosterIndex, name: str) -> Student | None:
    """The student of a team member's copy ``<group>-<Full name>`` (``locallib.php``, the
    group's name unformatted) found by name alone: one student has the name and is in
    that group."""
    for i, char in enumerate(name):
        if char == "-":
            student, _ = index.one(index.names, [name[i + 1 :]])
            if student is not None and fold(name[:i]) in moodle_file_forms(student.group):
                return student
    return None


def _canvas_forms(name, *, person: bool = True) -> set[str]:
    """How Canvas's download writes ``name`` (a roster student's, or with ``person=False``
    a group's), folded (:func:`~lablib.grading.lms.canvas_slug`): for a student also the
    other order of its words ("Doe, Erin" is written ``erindoe`` too: the display name
    Canvas gives a student in no group of a group assignment). A name without a comma
    ("Erin Doe"; a roster's first and last name columns joined, "Jan van der Berg") is
    written in every order that puts a last part of its words first (``doeerin``,
    ``vanderbergjan``, ``bergjanvander``...): the sortable name Canvas made of it splits
    the words where the roster no longer says."""
    text = unicodedata.normalize("NFC", str(name or "")).strip()
    variants = {text}
    if person and "," in text:
        last, _, first = text.partition(",")
        variants.add(f"{first} {last}")
    elif person and len(text.split()) > 1:
        words = text.split()
        variants.update(" ".join(words[k:] + words[:k]) for k in range(1, len(words)))
    return {fold(canvas_slug(v)) for v in variants} - {""}


def _canvas_readings(lms: dict) -> list[dict]:
    """The ways a Canvas file's name can be read (:func:`~lablib.grading.lms.canvas_name`):
    its ``candidates``, else the one reading it is."""
    readings = lms.get("candidates")
    if isinstance(readings, list) and readings:
        return [r for r in readings if isinstance(r, dict)]
    return [lms]


def _canvas_file(found, reading: dict) -> str:
    """The Canvas file's name, as the messages show it."""
    where = str(getattr(found, "where", "") or "")
    return where.rsplit("/", 1)[-1] or f"{reading.get('name', '')}_..._{reading.get('file', '')}"


@dataclasses.dataclass(frozen=True)
class _Reading:
    """One reading of a Canvas file's name against the roster.

    Attributes:
        reading: the reading (``name``, ``user_id`` or ``anonymous_id``, ``late``, ...).
        student: the roster's student of its user id, or None.
        agrees: 2: the name is that student's (or their group's) as Canvas writes it;
            1: the roster gives the student no name to compare; 0: neither.
        members: whose file it is when it agrees: the student, or their group's members
            (the student first).
        how: how they were found.
        said: what the roster says of this reading, for the reasons.
        group: the roster group it names (the student's own), or "".
    """

    reading: dict
    student: Student | None = None
    agrees: int = 0
    members: tuple = ()
    how: str = ""
    said: str = ""
    group: str = ""


def _canvas_reading(index: RosterIndex, reading: dict) -> _Reading:
    """``reading`` judged against the roster: its user id's student, and whether the name
    in the file is theirs, or their own group's (the roster's group column: a group
    assignment's file is named after the group), as Canvas writes it."""
    uid = str(reading.get("user_id") or "")
    if not uid:
        return _Reading(reading, said="an anonymous submission's, which no roster names")
    student, _ = index.one(index.lms_ids, [uid])
    if student is None:
        many = len({id(s) for s in index.lms_ids.get(fold(uid), [])}) > 1
        return _Reading(
            reading,
            said=f"{'two students of the roster have' if many else 'no student of the roster has'} "
            f"Canvas user id {uid} (its ID column)",
        )
    name = fold(reading.get("name", ""))
    group = unicodedata.normalize("NFC", student.group.strip())
    own = bool(fold(student.name)) and name in _canvas_forms(student.name)
    as_group = bool(group) and name in _canvas_forms(group, person=False)
    members = (student, *(m for m in index.members.get(group, ()) if m is not student))
    sortable = fold(canvas_slug(student.name))
    written = " or ".join(map(repr, [sortable, *sorted(_canvas_forms(student.name) - {sortable})]))
    if own and as_group and len(members) > 1:
        said = (
            f"user id {uid} is {student.name}'s, whose own name and whose group "
            f"{index.group_names.get(group, group)!r} (with other members) Canvas both writes "
            f"{reading.get('name', '')!r}: their own file or the group's? Rename the group in "
            f"Canvas and download again"
        )
        return _Reading(reading, student, said=said)
    if own:
        return _Reading(reading, student, 2, (student,), f"Canvas user id {uid}", "theirs")
    if as_group:
        how = (
            f"Canvas group {index.group_names.get(group, group)!r} (its file, under user id "
            f"{uid}), {len(members)} member(s) in the roster's group column"
        )
        return _Reading(reading, student, 2, members, how, "their group's", student.group.strip())
    if not fold(student.name):
        how = f"Canvas user id {uid} (the roster gives no name to compare)"
        return _Reading(reading, student, 1, (student,), how, "a student the roster gives no name")
    said = f"user id {uid} is {student.name}'s, whose name Canvas writes {written}"
    return _Reading(reading, student, said=said)


def _canvas_match(index: RosterIndex, lms: dict, found) -> _LmsMatch:
    """Whose a Canvas file is: the reading of its name (one, or several:
    :func:`~lablib.grading.lms.canvas_splits`) whose user id is a roster student's and
    whose name is that student's as Canvas writes it, or their own group's (then every
    member's). Exactly one reading must agree, with the roster's name, not by itself; a
    reading whose student the roster gives no name agrees only when it is the file's
    only one. Nothing agreeing and a user id the roster knows: no one's, with why (the
    identifier and name rules are not tried: the file is not given to another student by
    its name); no user id the roster knows: the identifier and name rules decide."""
    judged = [_canvas_reading(index, r) for r in _canvas_readings(lms)]
    several = len(judged) > 1
    agreeing = [j for j in judged if j.agrees == 2 or (j.agrees == 1 and not several)]
    if len(agreeing) == 1:
        chosen = agreeing[0]
        how = chosen.how
        if several:
            how += (
                f" (the file name read as name {chosen.reading.get('name', '')!r}, its "
                f"student's; {len(judged) - 1} other reading(s) refused)"
            )
        if lms.get("late_disputed"):
            how += "; counted late: one reading of the file name has Canvas's LATE marker"
        taken = _canvas_taken(lms, chosen.reading, chosen.group)
        return _LmsMatch(chosen.members, how, taken, final=True)
    known = any(j.student is not None for j in judged)
    why = _canvas_why(index, found, lms, judged, agreeing) if known or several else ""
    return _LmsMatch(lms=_canvas_taken(lms, None), why=why, final=known, doubted=known or several)


def _canvas_taken(lms: dict, reading: dict | None, group: str = "") -> dict:
    """A Canvas file's description once decided: a file read one way as it is (with the
    roster group it was found to be, if any); read in several ways, the reading taken as
    its ``name``, ``user_id``, ``attachment_id`` and ``file`` (None: none of them, so no
    user id is kept); ``late`` and the ``candidates`` kept."""
    if "candidates" in lms:
        lms = {k: v for k, v in lms.items() if k not in _READING_IDS}
        if reading is not None:
            lms |= {k: reading[k] for k in ("name", *_READING_IDS) if k in reading}
    return lms | ({"group": group} if group else {})


#: What one reading of a Canvas file name says beside its name and ``late`` (which stays
#: the file's: True when any reading has Canvas's LATE marker), and the group taken.
_READING_IDS = ("user_id", "anonymous_id", "attachment_id", "file", "group")


def _canvas_why(index: RosterIndex, found, lms: dict, judged: list, agreeing: list) -> str:
    """Why a Canvas file is no one's: what its name says, what the roster says of it, what
    to do."""
    file = f"Canvas file {_canvas_file(found, judged[0].reading)!r}"
    late = (
        " One reading has Canvas's LATE marker and another none: it counts as late."
        if lms.get("late_disputed")
        else ""
    )
    if len(judged) == 1:
        name = judged[0].reading.get("name", "")
        groups = sorted(
            label
            for key, label in index.group_names.items()
            if fold(name) in _canvas_forms(key, person=False)
        )
        named = (
            f" (the roster's group {', '.join(map(repr, groups))} is written so)" if groups else ""
        )
        return (
            f"{file}: {judged[0].said}, not {name!r}, the name in the file{named}, so it is "
            f"given to no one (a file's user id counts only with its student's name: a name "
            f"ending in '_' and digits could claim another's id). If the student changed their "
            f"name in Canvas since the roster was exported, export the gradebook again. In a "
            f"group assignment Canvas names each group's file after the group, under one "
            f"member's user id: give each student's group, as named in Canvas, in the "
            f"roster's group column (the group set's CSV export lists them: name, "
            f"canvas_user_id, ..., group_name), and every member gets the grade. If the file "
            f"is theirs all the same, name it in their row of the roster's submission "
            f"column.{late}"
        )
    readings = "; ".join(f"{_reading_text(j.reading)} ({j.said})" for j in judged)
    return (
        f"{file} can be read in {len(judged)} ways: {readings}. "
        f"{'More than one' if agreeing else 'None'} of them gives a roster student's user id "
        f"with that student's own name (or their group's), so lablib gives it to no one: a "
        f"sortable name ending in '_' and digits makes such a file name, and so can a file's "
        f"own name. Find who submitted it in Canvas (SpeedGrader) and name the file in that "
        f"student's row of the roster's submission column; for a group assignment (Canvas "
        f"names each group's file after the group, under one member's user id), give each "
        f"student's group, as named in Canvas, in the roster's group column.{late}"
    )


def _reading_text(reading: dict) -> str:
    """One reading of a Canvas file name, as the messages show it."""
    who = (
        f"user id {reading['user_id']}"
        if reading.get("user_id")
        else f"anonymous id {reading.get('anonymous_id', '')}"
    )
    return f"name {reading.get('name', '')!r}, {who}" + (", LATE" if reading.get("late") else "")


def _canvas_refused(student: Student | None, lms: dict, how: str) -> str:
    """Why ``student``, found by the identifier or name rules (``how``), cannot have this
    Canvas file: the roster gives them a Canvas user id that none of its readings has (a
    Canvas file is never given to a student with another user id); "" when they can."""
    ids = {fold(r.get("user_id") or "") for r in _canvas_readings(lms)} - {""}
    if student is None or not ids or not student.lms_id.strip() or fold(student.lms_id) in ids:
        return ""
    return (
        f"Canvas's file of user id {' or '.join(sorted(ids))} is named as {student.name} "
        f"({how}), whose Canvas user id is {student.lms_id} in the roster: a file is never "
        f"given to a student with another user id. If the roster is another course's or "
        f"older than the download, export this course's gradebook again; if the file is "
        f"theirs, name it in their row of the roster's submission column"
    )


def _canvas_name_match(index: RosterIndex, lms: dict) -> tuple[Student | None, str, dict]:
    """Rule 4 for a Canvas file: the one student that the name of one of its readings
    names (:func:`_lms_name_match`), and the description with that reading taken when
    only it names them."""
    found = []
    for reading in _canvas_readings(lms):
        name = reading.get("name", "")
        student = index.one(index.names, [name, _slug(name)])[0] if name else None
        if student is not None:
            found.append((student, reading))
    if len({id(s) for s, _ in found}) != 1:
        return None, "", lms
    student, reading = found[0]
    taken = _canvas_taken(lms, reading if len(found) == 1 else None)
    return student, f"Canvas name {reading.get('name', '')}", taken


def _lms_name_match(index: RosterIndex, lms: dict) -> tuple[Student | None, str]:
    name = lms.get("name", "")
    if not name:
        return None, ""
    forms = [name, _slug(name)]
    if lms.get("lms") == "moodle" and "-" in name and not index.members:
        # a member's copy "<group>-<Full name>"; with groups in the roster only a copy of the
        # student's own group is theirs (_moodle_copy): a group's name claims no one else
        forms += [name.split("-", k)[-1] for k in range(1, name.count("-") + 1)]
    student, key = index.one(index.names, forms)
    return student, (f"{lms.get('lms', 'LMS').capitalize()} name {name}" if student else "")


def _from_student(student: Student) -> dict:
    return {f: getattr(student, f) for f in STUDENT_FIELDS} | {"key": student.key}


def _from_lms(found, lms: dict | None = None, doubted: bool = False) -> dict:
    """The identity a download gives where no roster student matched (``lms``: the
    download's description as resolved, else the submission's; ``doubted``: a Moodle
    number the roster gives another student, or a Canvas user id whose roster student the
    file's name is not, left out)."""
    lms = dict(getattr(found, "lms", {}) or {}) if lms is None else lms
    identity = {f: "" for f in STUDENT_FIELDS}
    kind = lms.get("lms")
    if kind == "canvas" and doubted:
        identity.update(name=lms.get("name", ""))
        key = _prefix(lms.get("name", ""), lms.get("user_id", ""))
    elif kind == "canvas":
        identity.update(name=lms.get("name", ""), lms_id=lms.get("user_id", ""))
        key = lms.get("user_id") or (
            f"anon_{lms['anonymous_id']}" if lms.get("anonymous_id") else ""
        )
    elif kind == "moodle" and lms.get("group") and not lms.get("participant_id"):
        identity.update(name=lms.get("name", ""), group=lms["group"])
        key = f"Moodle group {lms.get('group_id') or lms['group']}"
    elif kind == "moodle" and doubted:
        identity.update(name=lms.get("name", ""))
        key = _prefix(lms.get("name", ""), lms.get("participant_id", ""))
    elif kind == "moodle":
        identity.update(name=lms.get("name", ""), participant_id=lms.get("participant_id", ""))
        key = f"Participant {lms['participant_id']}" if lms.get("participant_id") else ""
    elif kind == "gradescope" and lms.get("submitters") and doubted:
        first = lms["submitters"][0]  # ids naming different students: neither kept
        identity.update(name=first.get("name", ""))
        key = _prefix(first.get("name", ""), f"SID {first.get('sid')}" if first.get("sid") else "")
    elif kind == "gradescope" and lms.get("submitters"):
        first = lms["submitters"][0]
        identity.update(
            name=first.get("name", ""),
            student_id=first.get("sid", ""),
            email=first.get("email", ""),
        )
        key = first.get("sid") or first.get("email") or ""
    else:
        key = ""
    identity["key"] = key or str(found.name)
    return identity


def _submitter(person: dict, doubted: bool = False) -> dict:
    """A Gradescope submitter no roster student matched, as the identity of a group's
    other member keeps them (their name, SID and e-mail; their name alone where their ids
    name different students: ``doubted``)."""
    if doubted:
        sid = f"SID {person.get('sid')}" if person.get("sid") else ""
        return {
            "name": person.get("name", ""),
            "student_id": "",
            "email": "",
            "key": _prefix(person.get("name", ""), sid),
            "matched": False,
        }
    return {
        "name": person.get("name", ""),
        "student_id": person.get("sid", ""),
        "email": person.get("email", ""),
        "key": person.get("sid") or person.get("email") or person.get("name", ""),
        "matched": False,
    }


def _others(people: list, lms: dict, found) -> list[dict]:
    """A group's other members (``people[1:]``: ``(student or None, how)`` in the order the
    download names them): a roster student, or a Gradescope submitter the roster does not
    have, kept with their name, SID, e-mail and why (never dropped: they are listed with
    the unmatched submissions)."""
    submitters = lms.get("submitters") or [] if lms.get("lms") == "gradescope" else []
    out = []
    for i, (other, how) in enumerate(people[1:], start=1):
        if other is not None:
            out.append(_from_student(other) | {"matched": True, "matched_by": how})
            continue
        person = submitters[i] if i < len(submitters) else {}
        member = _submitter(person, doubted=bool(how)) | {"matched_by": ""}
        member["why_unmatched"] = how or (
            f"Gradescope submitter {person.get('name', '')!r} (SID {person.get('sid') or '-'}, "
            f"e-mail {person.get('email') or '-'}), a member of the group submission "
            f"{found.name!r}, matches no student of the roster by SID, e-mail or name: add them "
            f"to the roster (or correct their SID in Gradescope), then run `lablib report` with "
            f"the roster"
        )
        out.append(member)
    return out


def _match(index: RosterIndex, found, lms: dict) -> tuple:
    """Rules 1-4 (the module's docstring) for one submission: ``(student or None, how,
    others, decided, lms)``; ``decided`` the LMS rule's :class:`_LmsMatch` (a Moodle folder
    or a Canvas file: its reason when no one's), ``lms`` the download's description as
    resolved."""
    student, how, people, decided = None, "", [], _LmsMatch()
    explicit, key = index.one(index.explicit, _candidates(found, lms))
    if explicit is not None:
        student, how = explicit, f"the roster's submission column ({key})"
    kind = lms.get("lms")
    if student is None and kind in ("moodle", "canvas"):
        if kind == "moodle":
            decided = _moodle_match(index, lms)
            lms = lms | decided.lms
        else:
            decided = _canvas_match(index, lms, found)
            lms = decided.lms
        people = [(s, decided.how) for s in decided.students]
    elif kind == "gradescope":
        people = _lms_match(index, lms)
        if people and people[0][0] is None and people[0][1]:  # its ids name different students
            first = next((i for i, (s, _) in enumerate(people) if s is not None), None)
            if first is None:
                decided = _LmsMatch(why=people[0][1], final=True, doubted=True)
            else:  # a group's: its first matched member is the row's, the other listed
                order = [first, *(i for i in range(len(people)) if i != first)]
                submitters = list(lms.get("submitters") or [])
                people = [people[i] for i in order]
                lms = lms | {"submitters": [submitters[i] for i in order]}
    if student is None and people and people[0][0] is not None:
        student, how = people[0]
    others = _others(people, lms, found)
    by_name = student is None and not decided.final  # rules 3 and 4
    if by_name:
        student, how, lms, why = _by_name(index, found, lms)
        if why:
            decided = dataclasses.replace(decided, why=why)
    refused = _canvas_refused(student, lms, how) if by_name and kind == "canvas" else ""
    if refused:
        student, decided = None, _LmsMatch(why=refused, final=True, doubted=True)
    return student, how, others, decided, lms


def _by_name(index: RosterIndex, found, lms: dict) -> tuple:
    """Rules 3 and 4 (the module's docstring) for a submission no earlier rule decided:
    ``(student or None, how, lms, why)``. An LMS download's display name is compared with
    the roster's names only (rule 4), never with its identifiers (rule 3 compares its
    folders); ``how`` says when that name is also another student's identifier, ``why``
    why a download is no one's when its name is no student's, or several students'."""
    student, key = index.one(index.ids, _candidates(found, lms, names=False))
    if student is not None or not lms:
        return student, (f"the name {key!r}" if student is not None else ""), lms, ""
    if lms.get("lms") == "canvas":
        student, how, lms = _canvas_name_match(index, lms)
    else:
        student, how = _lms_name_match(index, lms)
    doubt = _display_doubt(index, found, lms, student)
    if student is not None:
        return student, how + doubt, lms, ""
    return None, "", lms, doubt


#: Per LMS: its name, and its own roster export, whose ids name each student's download.
_LMS_EXPORTS = {
    "canvas": ("Canvas", "the course's gradebook export (its ID column: Canvas user ids)"),
    "moodle": (
        "Moodle",
        "this assignment's grading worksheet (its Identifier column: participant ids)",
    ),
    "gradescope": ("Gradescope", "Gradescope's roster export (its SID and Email columns)"),
}


def _display_doubt(index: RosterIndex, found, lms: dict, student: Student | None) -> str:
    """What rule 4's answer (``student``, or None) leaves in doubt about an LMS download
    whose display name is also another student's identifier, or (None) several students'
    name: for a match, a note for its ``matched_by`` (starting "; "); without one, why it
    is no one's. "" when nothing is in doubt."""
    names = _display_names(found, lms)
    owners: dict[int, tuple] = {}  # students whose identifier a display name equals
    for name in names:
        for other in index.ids.get(fold(name), []):
            if other is not student:
                owners.setdefault(id(other), (other, name))
    named = {}
    if student is None:
        forms = {f for n in names for f in (fold(n), _slug(n))}
        named = {id(s): s for f in forms for s in index.names.get(f, [])}
    if not owners and len(named) < 2:
        return ""
    kind = lms.get("lms", "")
    lms_name, export = _LMS_EXPORTS.get(kind, ("the LMS", "the LMS's own roster export"))
    written = lms.get("name") or str(found.name)
    also = " and ".join(f"{o.name or o.key}'s {_id_fields(o, key)}" for o, key in owners.values())
    rule = (
        f"a name {lms_name} writes is a display name, compared with the roster's names only, "
        f"never with a login, a student id or an e-mail address"
    )
    if student is not None:
        theirs = " or ".join(o.name or o.key for o, _ in owners.values())
        return (
            f"; {written!r} is also {also}, but {rule}. Should the file be {theirs}'s, give "
            f"{export} as the roster, or name the file in their row of the roster's "
            f"submission column"
        )
    if len(named) > 1:
        who = ", ".join(f"{s.name} ({s.key})" for s in named.values())
        said = f"{written!r} is the name of {len(named)} students of the roster ({who})"
    else:
        said = f"no student of the roster is named {written!r} as {lms_name} writes names"
    return (
        f"{_download_label(found, lms)}: {said}"
        + (f"; {written!r} is {also}, but {rule}" if owners else "")
        + f"; it is given to no one. Give {export} as the roster, or name the file in its "
        f"student's row of the roster's submission column"
    )


def _id_fields(student: Student, key: str) -> str:
    """Which of ``student``'s identifiers ``key`` is, as a message names them."""
    fields = (
        ("student id", student.student_id),
        ("login", student.login),
        ("e-mail address", student.email),
        ("e-mail address's local part", student.email.split("@", 1)[0]),
        ("Canvas user id", student.lms_id),
        ("Moodle participant id", student.participant_id),
    )
    found = [label for label, value in fields if value.strip() and fold(value) == fold(key)]
    return " and ".join(found) or "identifier"


def _download_label(found, lms: dict) -> str:
    """An LMS download's file or folder, as the messages name it."""
    kind = lms.get("lms")
    if kind == "canvas":
        return f"Canvas file {_canvas_file(found, lms)!r}"
    if kind == "moodle":
        return f"Moodle's folder {_prefix(lms.get('name', ''), lms.get('participant_id', ''))!r}"
    folder = str(getattr(found, "folder", "") or "") or str(found.name)
    return f"{_LMS_EXPORTS.get(kind, ('The LMS',))[0]} submission {folder!r}"


def _canvas_unread(found, lms: dict) -> str:
    """Why a Canvas file read in several ways is no one's without a roster."""
    readings = "; ".join(_reading_text(r) for r in _canvas_readings(lms))
    return (
        f"Canvas file {_canvas_file(found, lms)!r} can be read in "
        f"{len(_canvas_readings(lms))} ways ({readings}): without a roster lablib cannot tell "
        f"which is Canvas's; give the course's gradebook export as the roster"
        + (" (one reading has Canvas's LATE marker: it counts as late)" if lms.get("late") else "")
    )


def resolve(found, roster=None, *, times=None, lab=None, index=None) -> dict:
    """The identity of one submission (a :class:`~lablib.grading.submissions.Found`; see
    the module's docstring for the rules and the dict).

    Args:
        found: the submission (its name, path, where, folder and LMS download info).
        roster: a :class:`~lablib.grading.gradebook.roster.Roster`, or None.
        times: a :class:`~lablib.grading.gradebook.roster.SubmissionTimes`, or None.
        lab: the lab (a spec or its name): the roster's and times file's lab columns.
    """
    lms = dict(getattr(found, "lms", {}) or {})
    identity: dict = {}
    others: list = []
    decided = _LmsMatch()
    if roster is not None:
        index = index or RosterIndex(roster)
        student, how, others, decided, lms = _match(index, found, lms)
        if student is not None:
            identity = _from_student(student) | {"matched": True, "matched_by": how}
        elif lms.get("lms") == "moodle":
            identity = {"why_unmatched": decided.why or _moodle_unmatched(index, lms)}
        elif decided.why:
            identity = {"why_unmatched": decided.why}
        elif not lms.get("lms") and _named_inside(index, found):
            identity = {"why_unmatched": _named_inside(index, found)}
    elif lms.get("lms") == "canvas" and "candidates" in lms:
        lms = _canvas_taken(lms, None)
        identity = {"why_unmatched": _canvas_unread(found, lms)}
        decided = _LmsMatch(doubted=True)
    if not identity.get("matched"):
        identity = (
            _from_lms(found, lms, decided.doubted) | {"matched": False, "matched_by": ""} | identity
        )
    if lms.get("lms") == "gradescope" and roster is None:  # a group's other submitters
        others = [_submitter(p) for p in lms.get("submitters", [])[1:]]
    identity["lms"] = lms
    identity["others"] = others
    identity["submitted_at"], identity["time_source"] = _time(
        identity, found, roster, times, lab, index
    )
    return identity


def _named_inside(index: RosterIndex, found) -> str:
    """Why a notebook in a folder matched no one though a name inside that folder (its
    file's, a subfolder's) is a student's identifier ("" where none is): a folder names
    every notebook in it, a name a student gives a file names no one."""
    folder = str(getattr(found, "folder", "") or "")
    where = re.sub(r"\.ipynb$", "", str(getattr(found, "where", "") or ""), flags=re.I)
    if not folder or not where.startswith(folder + "/"):
        return ""
    if any(len(index.ids.get(fold(part), ())) > 1 for part in folder.split("/")):
        return ""  # the folder names several students: not "no student"
    inside = [part for part in where[len(folder) + 1 :].split("/") if part]
    named = [(part, index.ids[fold(part)]) for part in inside if index.ids.get(fold(part))]
    if not named:
        return ""
    part, students = named[0]
    who = " or ".join(s.name or s.key for s in students)
    return (
        f"the notebook is in the folder {folder!r}, which names no student of the roster; a "
        f"notebook in a folder is that folder's, and {part!r} inside it (the name of {who}) "
        f"names no one: a student could name a file after a classmate. Where {folder!r} "
        f"holds several students' notebooks (a section), give each such folder itself to "
        f"lablib grade; otherwise name the folder in the roster's submission column."
    )


def _time(identity: dict, found, roster, times, lab, index=None) -> tuple[str, str]:
    """The submission time and where it came from (see the module's docstring)."""
    lms = identity.get("lms") or {}
    if lms.get("submitted_at"):
        return lms["submitted_at"], "Gradescope's submission_metadata.yml"
    aliases = lab_aliases(lab) if lab is not None else ()
    if times is not None:
        keys = identity_keys(identity) | {fold(found.name)}
        if roster is not None:
            keys = _own_keys(keys, identity, roster, index or RosterIndex(roster))
        when, where = times.lookup(keys, aliases)
        if when:
            return when, f"the times file ({where})"
    if identity.get("matched") and roster is not None:
        student = student_of(identity, roster)
        if student is not None:
            return student.time_for(aliases)
    return "", ""


def _own_keys(keys: set[str], identity: dict, roster, index: RosterIndex) -> set[str]:
    """Of ``keys`` (an identity's), those a times file's row may name this student by: the
    keys the roster gives this student alone (:class:`RosterIndex`: the start of an e-mail
    address yields to another student's id, login or address: ``jsmith``, John's login,
    is also the start of Jane's ``jsmith@gmail.com``, and a row for ``jsmith`` is John's,
    never Jane's), and those it gives no one."""
    me = student_of(identity, roster)
    return {k for k in keys if all(s is me for s in index.ids.get(k, ()))}


def _strong_ids(student) -> set[str]:
    """A roster student's identifiers less the start of their e-mail address (folded)."""
    values = (student.student_id, student.lms_id, student.login, student.email)
    return {fold(v) for v in (*values, student.participant_id) if v and v.strip()}


def identity_keys(identity: dict) -> set[str]:
    """The folded identifiers of an identity (to find the same person elsewhere)."""
    keys = {
        identity.get(k, "")
        for k in ("key", "student_id", "lms_id", "email", "login", "participant_id")
    }
    email = identity.get("email", "")
    if email:
        keys.add(email.split("@", 1)[0])
    return {fold(k) for k in keys if k and str(k).strip()}


def lms_person(identity: dict) -> tuple | None:
    """The LMS's own key of a submission's student (Canvas user id, Moodle participant id
    or a team's group, a Gradescope submitter's SID or e-mail), or None for a plain file or
    folder."""
    lms = identity.get("lms") or {}
    kind = lms.get("lms")
    if kind == "canvas":
        who = lms.get("user_id") or lms.get("anonymous_id")
    elif kind == "moodle" and lms.get("group") and not lms.get("participant_id"):
        who = f"group {lms.get('group_id') or fold(lms['group'])}"  # a team's folder
    elif kind == "moodle":  # not a number left out as no participant's (identity.resolve)
        doubted = not identity.get("matched") and not identity.get("participant_id")
        who = "" if doubted and identity.get("why_unmatched") else lms.get("participant_id")
    elif kind == "gradescope":  # not a submitter whose ids named different students
        first = (lms.get("submitters") or [{}])[0]
        doubted = not identity.get("matched") and not identity.get("student_id")
        who = (
            ""
            if doubted and identity.get("why_unmatched")
            else first.get("sid") or first.get("email")
        )
    else:
        return None
    return (kind, str(who)) if who else None


def owner_of(result) -> tuple:
    """Who a gradebook row (a :class:`~lablib.grading.results.SubmissionResult`) belongs
    to, so that a student with several rows (several notebooks, several attachments) counts
    once: the roster student it matched, else its LMS person (:func:`lms_person`), else its
    student's folder, else the row itself."""
    identity = result.identity or {}
    if identity.get("matched") and identity.get("key"):
        return ("student", fold(str(identity["key"])))
    person = lms_person(identity)
    if person is not None:
        return ("lms", *person)
    if identity.get("folder"):
        return ("folder", str(identity["folder"]))
    return ("row", result.submission)


def student_of(identity: dict, roster=None) -> Student | None:
    """The roster :class:`~lablib.grading.gradebook.roster.Student` an identity was matched to: the
    roster's own entry when ``roster`` is given and holds it, else one rebuilt from the
    identity; None when it matched no student."""
    if not identity or not identity.get("matched"):
        return None
    if roster is not None:
        wanted = tuple(
            fold(identity.get(k, ""))
            for k in ("student_id", "lms_id", "email", "participant_id", "login", "name")
        )
        for student in roster.students:
            if (
                tuple(
                    fold(getattr(student, k))
                    for k in ("student_id", "lms_id", "email", "participant_id", "login", "name")
                )
                == wanted
            ):
                return student
    fields = {f.name for f in dataclasses.fields(Student)}
    return Student(**{k: str(identity.get(k, "") or "") for k in STUDENT_FIELDS if k in fields})


def resolve_all(found, roster=None, *, times=None, lab=None) -> dict[str, dict]:
    """Submission name -> identity, for every :class:`~lablib.grading.submissions.Found`."""
    found = list(found)
    index = RosterIndex(roster) if roster is not None else None
    if index is not None:
        index.note(getattr(f, "lms", None) for f in found)
    return {f.name: resolve(f, roster, times=times, lab=lab, index=index) for f in found}


def match_roster(roster: Roster, submissions) -> RosterMatch:
    """Match ``(name, notebook path)`` pairs to the students of ``roster`` (what
    :func:`resolve` does at grading, for submissions without an LMS download's names).

    Example::

        match_roster(roster, [("erin@uni.edu", "/subs/erin@uni.edu/lab1.ipynb")]).students
    """
    found = [Found(name, pathlib.Path(str(path))) for name, path in submissions]
    return roster.match_of(resolve_all(found, roster))
