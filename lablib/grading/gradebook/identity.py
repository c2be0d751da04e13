"""Who submitted each submission: resolved once, at grading, and kept in the gradebook.

A submission's identity is a plain dict (``grades.json``'s ``identity`` per row)::

    {"key": "S001", "name": "Doe, Erin", "student_id": "S001", "email": "erin@uni.edu",
     "section": "A", "lms_id": "1001", "login": "erin", "participant_id": "",
     "extension": "", "due": "",
     "matched": True, "matched_by": "Canvas user id 1001",
     "lms": {"lms": "canvas", "user_id": "1001", "late": True, ...},
     "others": [],                       # a Gradescope group's other submitters
     "submitted_at": "2026-11-21T09:00:00+00:00", "time_source": "Gradescope's submission_metadata.yml"}

Matching a submission to the roster, first rule that finds exactly one student:

1. the roster's ``submission`` column names it (its name, its path below the folder
   given, its student's folder or its notebook, without ``.ipynb``);
2. the LMS download's ids: Canvas's user id = the roster's ``ID``; Moodle's participant
   id = the worksheet's Identifier; a Gradescope submitter's SID or e-mail;
3. one of the student's identifiers (student id, SIS/Canvas ids, login, e-mail or its part
   before ``@``, Moodle participant id) equals the submission's name, one of its folders
   or its notebook's name;
4. for an LMS download only, the student's name as the LMS wrote it (Canvas's
   ``andersonemma`` for "Anderson, Emma", Moodle's full name, a Gradescope submitter's
   name), when no other student has that name.

Everything is compared NFC-normalised and case-folded (a macOS zip's NFD ``josé.núñez``
matches the roster's NFC one). An identifier shared by two students matches neither.
Without a match (or without a roster) the identity is what the download says (Canvas
user id and name, Moodle participant id and full name, Gradescope SID, e-mail and name),
else the submission's name.

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

from lablib.grading.lms import fold
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
)


def _slug(text: str) -> str:
    """A name as Canvas's download writes it: folded, only letters, digits and ``_``."""
    return re.sub(r"[^\w]", "", fold(text))


def _name_forms(student: Student) -> set[str]:
    """The ways an LMS writes ``student``'s name: as given, folded; Canvas's slug of it
    and of its "Last, First" form."""
    name = fold(student.name)
    if not name:
        return set()
    forms = {name, _slug(name)}
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
    finds neither)."""

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
    if kind == "moodle":
        student, _ = index.one(index.participants, [lms.get("participant_id", "")])
        return [(student, f"Moodle participant id {lms.get('participant_id', '')}")]
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


def _lms_name_match(index: RosterIndex, lms: dict) -> tuple[Student | None, str]:
    name = lms.get("name", "")
    if not name:
        return None, ""
    forms = [name, _slug(name)]
    if lms.get("lms") == "moodle" and "-" in name:  # a group submission: "<group>-<Full name>"
        forms += [name.split("-", k)[-1] for k in range(1, name.count("-") + 1)]
    student, key = index.one(index.names, forms)
    return student, (f"{lms.get('lms', 'LMS').capitalize()} name {name}" if student else "")


def _from_student(student: Student) -> dict:
    return {f: getattr(student, f) for f in STUDENT_FIELDS} | {"key": student.key}


def _from_lms(found) -> dict:
    """The identity a download gives where no roster student matched."""
    lms = dict(getattr(found, "lms", {}) or {})
    identity = {f: "" for f in STUDENT_FIELDS}
    kind = lms.get("lms")
    if kind == "canvas":
        identity.update(name=lms.get("name", ""), lms_id=lms.get("user_id", ""))
        key = lms.get("user_id") or (
            f"anon_{lms['anonymous_id']}" if lms.get("anonymous_id") else ""
        )
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
    if roster is not None:
        index = index or RosterIndex(roster)
        student, how = None, ""
        explicit, key = index.one(index.explicit, _candidates(found))
        if explicit is not None:
            student, how = explicit, f"the roster's submission column ({key})"
        if student is None and lms:
            people = _lms_match(index, lms)
            if people:
                student, how = people[0]
                for other, other_how in people[1:]:
                    others.append(
                        (_from_student(other) | {"matched": True, "matched_by": other_how})
                        if other is not None
                        else {"matched": False}
                    )
        if student is None and not explicit:
            student, key = index.one(index.ids, _candidates(found))
            how = f"the name {key!r}" if student is not None else ""
        if student is None and lms:
            student, how = _lms_name_match(index, lms)
        if student is not None:
            identity = _from_student(student) | {"matched": True, "matched_by": how}
    if not identity:
        identity = _from_lms(found) | {"matched": False, "matched_by": ""}
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
    index = RosterIndex(roster) if roster is not None else None
    return {f.name: resolve(f, roster, times=times, lab=lab, index=index) for f in found}


def match_roster(roster: Roster, submissions) -> RosterMatch:
    """Match ``(name, notebook path)`` pairs to the students of ``roster`` (what
    :func:`resolve` does at grading, for submissions without an LMS download's names).

    Example::

        match_roster(roster, [("erin@uni.edu", "/subs/erin@uni.edu/lab1.ipynb")]).students
    """
    found = [Found(name, pathlib.Path(str(path))) for name, path in submissions]
    return roster.match_of(resolve_all(found, roster))
