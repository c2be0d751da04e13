"""Who submitted each submission: resolved once, at grading, and kept in the gradebook.

A submission's identity is a plain dict (``grades.json``'s ``identity`` per row)::

    {"key": "S001", "name": "Doe, Erin", "student_id": "S001", "email": "erin@uni.edu",
     "section": "A", "lms_id": "1001", "login": "erin", "participant_id": "",
     "extension": "", "due": "", "group": "",
     "matched": True, "matched_by": "Canvas user id 1001",
     "lms": {"lms": "canvas", "user_id": "1001", "late": True, ...},
     "others": [],                       # a group's other members (Gradescope, Moodle)
     "submitted_at": "2026-11-21T09:00:00+00:00", "time_source": "Gradescope's submission_metadata.yml"}

Matching a submission to the roster, first rule that finds exactly one student:

1. the roster's ``submission`` column names it (its name, its path below the folder
   given, its student's folder or its notebook, without ``.ipynb``);
2. the LMS download's ids: Canvas's user id = the roster's ``ID``; Moodle's participant
   id = the worksheet's Identifier, when the folder's name is that student's (their full
   name, "Participant", or ``<their group>-`` before either; any, for a student without
   a full name); a Gradescope submitter's SID or e-mail. A Moodle folder whose name is
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
   or its notebook's name;
4. for an LMS download only, the student's name as the LMS wrote it (Canvas's
   ``andersonemma`` for "Anderson, Emma", Moodle's full name, a Gradescope submitter's
   name), when no other student has that name.

Everything else is compared NFC-normalised and case-folded (a macOS zip's NFD ``josé.núñez``
matches the roster's NFC one). An identifier shared by two students matches neither.
Without a match (or without a roster) the identity is what the download says (Canvas
user id and name, Moodle participant id and full name or a group's name, Gradescope SID,
e-mail and name), else the submission's name; a Moodle number the roster gives another
student, or any unmatched Moodle folder's number when the roster has groups (it may be a
group's id), is left out of it.

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

from lablib.grading.lms import clean_label, fold, moodle_file_forms, moodle_file_text
from lablib.grading.gradebook.roster import Roster, RosterMatch, Student, lab_aliases
from lablib.grading.submissions import Found

__all__ = [
    "resolve",
    "resolve_all",
    "match_roster",
    "student_of",
    "identity_keys",
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


def _candidates(found) -> list[str]:
    """What a submission may be named after: its name, its path below the folder given and
    its student's folder, each of their parts, and its notebook's name, without ``.ipynb``."""
    name = str(found.name)
    where = re.sub(r"\.ipynb$", "", str(getattr(found, "where", "") or ""), flags=re.I)
    folder = str(getattr(found, "folder", "") or "")
    stem = re.sub(
        r"\.ipynb$",
        "",
        found.path.name if hasattr(found.path, "name") else str(found.path),
        flags=re.I,
    )
    out = [name, where, folder, f"{name}/{stem}", stem]
    for text in (name, where):
        out += text.split("/")
    return [c for c in dict.fromkeys(out) if c]


def _lms_match(index: RosterIndex, lms: dict) -> list[tuple[Student | None, str]]:
    """``(student or None, how)`` per person the LMS download names (a Gradescope group
    has several), by the LMS's ids."""
    kind = lms.get("lms")
    if kind == "canvas" and lms.get("user_id"):
        student, _ = index.one(index.lms_ids, [lms["user_id"]])
        return [(student, f"Canvas user id {lms['user_id']}")]
    if kind == "gradescope":
        out = []
        for person in lms.get("submitters", []):
            student, how = None, ""
            if person.get("sid"):
                student, _ = index.one(index.student_ids, [person["sid"]])
                how = f"Gradescope SID {person['sid']}"
            if student is None and person.get("email"):
                student, _ = index.one(index.emails, [person["email"]])
                how = f"Gradescope e-mail {person['email']}"
            if student is None and person.get("name"):
                student, _ = index.one(index.names, [person["name"]])
                how = f"Gradescope name {person['name']}"
            out.append((student, how))
        return out
    return []


@dataclasses.dataclass(frozen=True)
class _MoodleMatch:
    """Whose a Moodle download's folder (or flat file) is.

    Attributes:
        students: its students (a group's members, in roster order); () for no one.
        how: how they were found.
        lms: what to add to the download's description when it is a group's (its
            ``group``, ``group_id`` and no ``participant_id``) or a member's copy (its
            ``group``); nothing when it is no one's, so that another roster can decide.
        why: why it is no one's (what it says, what was expected, what to do).
        final: decided: the identifier and name rules are not tried after it.
        doubted: its number is not known to be a participant id (a team assignment's
            folder, one whose name is not that participant's, or any folder left to the
            identifier and name rules when the roster has groups): left out of the
            identity if unmatched, so that no later join by participant id gives it to
            anyone.
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


def _moodle_match(index: RosterIndex, lms: dict) -> _MoodleMatch:
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
                return _MoodleMatch(
                    why=_own_and_group(index, name, number, owner, keys, shared),
                    final=True,
                    doubted=True,
                )
            keys = []  # their exact full name or "Participant": a group written so is not theirs
        if own and not keys:
            how = f"Moodle participant id {number}" + (f" (group {group}'s copy)" if group else "")
            return _MoodleMatch((owner,), how, {"group": group} if group else {}, final=True)
    if keys:  # a team assignment's folder: its group's
        return _moodle_group(index, lms, keys)
    if index.members and owner is None:
        member = _moodle_copy(index, name)
        if member is not None:
            return _MoodleMatch((member,), f"Moodle name {name}", {}, final=True)
    if owner is not None:
        return _MoodleMatch(why=_not_theirs(index, name, number, owner), final=True, doubted=True)
    # a student's own folder as far as the roster knows: the identifier and name rules
    # follow. With groups in the roster its number may be a group's: left out if unmatched
    return _MoodleMatch(
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


def _moodle_group(index: RosterIndex, lms: dict, keys: list) -> _MoodleMatch:
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
        return _MoodleMatch(
            why=f"{folder} is a team submission of a group named {name!r} (Moodle writes no "
            f"id for its own Default group), so it is not the Default group's: {rename}",
            final=True,
            doubted=True,
        )
    if index.default_named and index.is_default_folder(lms):
        return _MoodleMatch(
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
        return _MoodleMatch(members, how, group, final=True)
    if len(keys) > 1:
        alike = ", ".join(repr(index.group_names[k]) for k in keys)
        return _MoodleMatch(
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
    return _MoodleMatch(why=why, final=True, doubted=True)


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
    number the roster gives another student, left out)."""
    lms = dict(getattr(found, "lms", {}) or {}) if lms is None else lms
    identity = {f: "" for f in STUDENT_FIELDS}
    kind = lms.get("lms")
    if kind == "canvas":
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
    moodle = _MoodleMatch()
    if roster is not None:
        index = index or RosterIndex(roster)
        student, how, people = None, "", []
        explicit, key = index.one(index.explicit, _candidates(found))
        if explicit is not None:
            student, how = explicit, f"the roster's submission column ({key})"
        if student is None and lms.get("lms") == "moodle":
            moodle = _moodle_match(index, lms)
            lms.update(moodle.lms)
            people = [(s, moodle.how) for s in moodle.students]
        elif student is None and lms:
            people = _lms_match(index, lms)
        if student is None and lms and people:
            student, how = people[0]
            for other, other_how in people[1:]:
                others.append(
                    (_from_student(other) | {"matched": True, "matched_by": other_how})
                    if other is not None
                    else {"matched": False}
                )
        if student is None and not explicit and not moodle.final:
            student, key = index.one(index.ids, _candidates(found))
            how = f"the name {key!r}" if student is not None else ""
        if student is None and lms and not moodle.final:
            student, how = _lms_name_match(index, lms)
        if student is not None:
            identity = _from_student(student) | {"matched": True, "matched_by": how}
        elif lms.get("lms") == "moodle":
            identity = {"why_unmatched": moodle.why or _moodle_unmatched(index, lms)}
    if not identity.get("matched"):
        identity = (
            _from_lms(found, lms, moodle.doubted) | {"matched": False, "matched_by": ""} | identity
        )
    if (
        lms.get("lms") == "gradescope" and not others
    ):  # a group's other submitters, without a roster
        others = [
            {
                "name": p.get("name", ""),
                "student_id": p.get("sid", ""),
                "email": p.get("email", ""),
                "key": p.get("sid") or p.get("email") or p.get("name", ""),
                "matched": False,
            }
            for p in lms.get("submitters", [])[1:]
        ]
    identity["lms"] = lms
    identity["others"] = others
    identity["submitted_at"], identity["time_source"] = _time(identity, found, roster, times, lab)
    return identity


def _time(identity: dict, found, roster, times, lab) -> tuple[str, str]:
    """The submission time and where it came from (see the module's docstring)."""
    lms = identity.get("lms") or {}
    if lms.get("submitted_at"):
        return lms["submitted_at"], "Gradescope's submission_metadata.yml"
    aliases = lab_aliases(lab) if lab is not None else ()
    if times is not None:
        keys = identity_keys(identity) | {fold(found.name)}
        when, where = times.lookup(keys, aliases)
        if when:
            return when, f"the times file ({where})"
    if identity.get("matched") and roster is not None:
        student = student_of(identity, roster)
        if student is not None:
            return student.time_for(aliases)
    return "", ""


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
