"""The class gradebook in memory: its rows, each row's points and total, computed once.

A :class:`Gradebook` is what every report writer reads (:mod:`lablib.grading.report`)
and what :mod:`~lablib.grading.gradebook.store` keeps in ``grades.json``: the lab, one
:class:`~lablib.grading.results.SubmissionResult` per submission (with its identity, as
resolved at grading), the people's grades of the written answers, the late policy, the
roster match and the similarity hints. A :class:`Row` is one submission's points beside
its tests': the written questions' grades, the lateness and the total.

Example::

    book = Gradebook.of(lab, results, late_policy=policy)
    row = book.row(book.results[0])
    row.total, row.max_total, row.late
"""

from __future__ import annotations

import dataclasses
import hashlib
import pathlib
import unicodedata
from collections.abc import Iterable, Sequence

from lablib.grading.filenames import STEM_BYTES, cap_bytes, portable, same_file, shown
from lablib.grading.gradebook.identity import resolve, student_of
from lablib.grading.gradebook.late import (
    Late,
    LateError,
    LatePolicy,
    file_time,
    not_computed,
    parse_time,
    unread_time,
)
from lablib.grading.gradebook.roster import Roster, RosterMatch, Student
from lablib.grading.results import PersonScore, SubmissionResult
from lablib.grading.labspec.model import LabSpec, WrittenQuestion
from lablib.grading.submissions import Found

__all__ = ["Gradebook", "Row", "feedback_stems"]

#: A row's written questions with the grade a person gave each (an ungraded one: 0).
Written = tuple[tuple[WrittenQuestion, PersonScore], ...]


@dataclasses.dataclass(frozen=True)
class Row:
    """One row's points beside its tests': the one place the total is computed.

    Attributes:
        result: the :class:`SubmissionResult`.
        written: ``(question, PersonScore)`` for each written question (:meth:`Gradebook.written`).
        late: the row's :class:`~lablib.grading.gradebook.late.Late`, or None
            (:meth:`Gradebook.late`); a group's: its first member's.
        members: a group's ``(identity, Late or None)`` per member, each under their own
            extension or due date (:meth:`Gradebook.lates`); () for one student's row.
    """

    result: SubmissionResult
    written: Written = ()
    late: Late | None = None
    members: tuple[tuple[dict, Late | None], ...] = ()

    @property
    def given(self) -> float:
        """The people's points."""
        return sum(score.score for _, score in self.written)

    @property
    def possible(self) -> float:
        """The written questions' points."""
        return sum(q.points for q, _ in self.written)

    @property
    def pending(self) -> int:
        """Written answers that still need a person (never graded, or graded before the
        answer changed)."""
        return sum(score.pending for _, score in self.written)

    @property
    def penalty(self) -> float:
        """The late penalty, in points (0: none)."""
        return self.late.penalty if self.late is not None else 0.0

    @property
    def total(self) -> float:
        """Tests + the people's points - the late penalty, never below 0."""
        return max(0.0, self.result.score + self.given - self.penalty)

    @property
    def max_total(self) -> float:
        """The points possible: the tests' maximum + the written questions' points."""
        return self.result.max_score + self.possible

    def member_total(self, late: Late | None) -> float:
        """The total of a member whose lateness is ``late``: tests + the people's points -
        their own penalty, never below 0."""
        return max(0.0, self.result.score + self.given - (late.penalty if late else 0.0))

    def members_dict(self) -> list[dict]:
        """A group's members as ``grades.json`` keeps them: ``{"key", "name", "late",
        "total"}`` each, in the identity's order (the row's identity first); [] for one
        student's row. ``lablib export`` gives each member their own ``total``."""
        return [
            {
                "key": str(member.get("key") or ""),
                "name": str(member.get("name") or ""),
                "late": None if late is None else late.to_dict(),
                "total": self.member_total(late),
            }
            for member, late in self.members
        ]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Gradebook:
    """The class gradebook: what every writer reads and what ``grades.json`` keeps.

    Built with :meth:`of` (which sorts the rows, names their feedback files and matches
    the roster); every field is given by keyword.

    Attributes:
        lab: the :class:`~lablib.grading.spec.LabSpec` graded (name, title, pieces, tests).
        results: one :class:`SubmissionResult` per submission, sorted by name.
        stems: submission name -> its feedback file stem (:func:`feedback_stems`).
        roster: the :class:`~lablib.grading.gradebook.roster.RosterMatch` of the rows'
            identities (resolved at grading, kept in the gradebook) with the class list,
            when one was given (``--roster``, or the copy kept in the output folder), else None.
        skipped: ``(path, reason)`` of each path among the submissions given that was
            not graded (not a notebook, a folder without one, a link leading out of the
            folder); kept in ``grades.json``, so that reports written again list them too.
        person: submission name -> written question id -> the
            :class:`~lablib.grading.results.PersonScore` a person gave (``lablib review``);
            a question missing there is still to grade.
        reviews_through: the last change of the people's grades this gradebook includes
            (the review log's id; 0: none).
        reviews_log: which log and which change that is (``{"log", "through",
            "change"}``: :meth:`~lablib.grading.review.store.ReviewStore.for_gradebook`),
            so that a log restored from an older backup, or made anew, is never taken for
            it; None without a log.
        late_policy: the :class:`~lablib.grading.gradebook.late.LatePolicy`, or None (no
            late penalties).
        similarity: ``{"pairs": [Pair], "identical": [[names]], ...}``: the similarity
            hints (:mod:`lablib.grading.gradebook.similarity`), or None.
        kept: what the output folder keeps for later regrades, written with the rows in
            one file (:class:`~lablib.grading.gradebook.store.GradebookFolder`):
            ``{"layout": "auto" | "plain" | None, "roster": the roster copy's entry
            (:meth:`~lablib.grading.gradebook.store.GradebookFolder.keep_roster`) or
            None}``; None: what the folder keeps already.
    """

    lab: LabSpec
    results: tuple[SubmissionResult, ...]
    stems: dict[str, str]
    roster: RosterMatch | None = None
    skipped: tuple[tuple[str, str], ...] = ()
    person: dict[str, dict[str, PersonScore]] = dataclasses.field(default_factory=dict)
    reviews_through: int = 0
    reviews_log: dict | None = None
    late_policy: LatePolicy | None = None
    similarity: dict | None = None
    kept: dict | None = None

    @classmethod
    def of(
        cls,
        lab: LabSpec,
        results: Sequence[SubmissionResult],
        *,
        roster: Roster | None = None,
        skipped: Iterable[tuple[object, object]] = (),
        person: dict[str, dict[str, PersonScore]] | None = None,
        reviews_through: int = 0,
        reviews_log: dict | None = None,
        late_policy: LatePolicy | None = None,
        similarity: dict | None = None,
        kept: dict | None = None,
    ) -> Gradebook:
        """The gradebook of ``results``; ``roster`` names the students of their identities
        (a result without one, made outside ``lablib grade``, is resolved here);
        ``skipped`` lists the paths not graded (``(path, reason)``); ``person`` holds the
        people's grades of the written answers."""
        ordered = tuple(sorted(results, key=lambda r: r.submission))
        match = None
        if roster is not None:
            for r in ordered:  # results made without `lablib grade` (scripts, tests): resolved here
                if not r.identity:
                    r.identity = resolve(Found(r.submission, pathlib.Path(r.path)), roster, lab=lab)
            match = roster.match_of({r.submission: r.identity for r in ordered})
        return cls(
            lab=lab,
            results=ordered,
            stems=feedback_stems(r.submission for r in ordered),
            roster=match,
            skipped=tuple((str(p), str(why)) for p, why in skipped),
            person=dict(person or {}),
            reviews_through=reviews_through,
            reviews_log=reviews_log,
            late_policy=late_policy,
            similarity=similarity,
            kept=kept,
        )

    @property
    def questions(self) -> list[WrittenQuestion]:
        """The lab's written questions, in order."""
        return list(getattr(self.lab, "answers", {}).values())  # a spec without written answers

    def written(self, result: SubmissionResult) -> list[tuple[WrittenQuestion, PersonScore]]:
        """``(question, PersonScore)`` for each written question of the lab, for one row
        (an ungraded :class:`PersonScore` where no person has graded it yet)."""
        given = self.person.get(result.submission, {})
        return [(q, given.get(q.id) or PersonScore(q.id, 0.0, q.points)) for q in self.questions]

    def late(self, result: SubmissionResult) -> Late | None:
        """The row's lateness under the late policy, or None: no policy, or no submission
        time. The time is the one resolved at grading (the LMS download's, the times
        file's, the roster's: the row's ``identity``), else, with the policy's
        ``from_files``, the notebook's file time. A group's row is its first member's
        (the identity's extension or due date), its text then giving each member's own
        where they differ (:meth:`lates`)."""
        return self._row_late(result, self.lates(result))

    def lates(self, result: SubmissionResult) -> list[tuple[dict, Late | None]]:
        """Each member's lateness, ``(identity, Late or None)``: the row's identity first,
        then a group's other members (``identity["others"]``), each under their own
        extension or due date from the roster; [] without a late policy. A time that
        cannot be read, or a student's extension or due date that cannot be read, gives a
        :class:`Late` that is not ``computed`` (no deduction, never "on time")."""
        policy = self.late_policy
        if policy is None:
            return []
        identity = result.identity or {}
        members = [(identity, self.student(result))] + [
            (other, student_of(other))
            for other in identity.get("others") or []
            if isinstance(other, dict)
        ]
        submitted = self._submitted(result)
        if not submitted and identity.get("time_unknown"):  # a time known to be wrong
            unknown = not_computed("", str(identity["time_unknown"]))
            return [(member, unknown) for member, _ in members]
        if not submitted:
            return [(member, None) for member, _ in members]
        try:
            when = parse_time(submitted)
        except LateError:
            unread = unread_time(submitted, str(identity.get("time_source") or ""))
            return [(member, unread) for member, _ in members]
        possible = result.max_score + sum(q.points for q in self.questions)
        return [
            (member, self._lateness(identity, when, possible, student))
            for member, student in members
        ]

    def _submitted(self, result: SubmissionResult):
        """The row's submission time (text or a datetime), or "" (none found)."""
        student = self.student(result)
        identity = result.identity or {}
        submitted = identity.get("submitted_at") or (
            student.submitted_at if student and not identity else ""
        )
        if not submitted and self.late_policy.from_files:
            # the file's time when it was graded; a row of an older gradebook: its time now,
            # as it was read then
            return identity.get("file_time") or file_time(result.path)
        return submitted

    def _lateness(self, identity: dict, when, possible: float, student: Student | None) -> Late:
        """One member's :class:`Late` at ``when``, under their own extension or due date."""
        try:
            late = self.late_policy.penalty(
                when,
                possible,
                extension=student.extension if student else None,
                due=student.due if student else None,
                extended_until=getattr(student, "extended_until", "") or None,
            )
        except LateError as exc:
            who = f" of {student.name or student.key}" if student else ""
            return not_computed(
                when.isoformat(timespec="minutes"),
                f"Lateness not computed: the roster's extension or due date{who} cannot be "
                f"read ({exc}): fix it in the roster and run `lablib report` with --roster "
                f"again; no deduction computed.",
            )
        lms = identity.get("lms") or {}
        if lms.get("late") and late.late_seconds <= 0:  # the LMS's word against the time given
            who = lms.get("lms", "The LMS").capitalize()
            late = dataclasses.replace(
                late,
                text=f"{late.text} {who} marks it late: check its due "
                f"date and this submission time.",
            )
        elif (
            lms.get("lms") == "canvas"
            and "late" in lms
            and not lms["late"]
            and late.penalty
            and self._canvas_marks_late()
        ):
            # Canvas names a file LATE_ exactly when it is late by the student's own due
            # date (overrides and extensions given in Canvas included); a download with no
            # LATE at all (an assignment without a due date in Canvas) tells nothing
            late = dataclasses.replace(
                late,
                text=f"{late.text} Canvas's download does not mark this file late: an "
                f"extension given in Canvas and not known here? The instructor can give it "
                f"in the roster (extension or due column).",
            )
        return late

    def _canvas_marks_late(self) -> bool:
        """Whether any row of the gradebook is a Canvas file marked LATE."""
        return any(
            ((r.identity or {}).get("lms") or {}).get("lms") == "canvas"
            and ((r.identity or {}).get("lms") or {}).get("late")
            for r in self.results
        )

    def _row_late(self, result: SubmissionResult, lates) -> Late | None:
        """The first member's :class:`Late`; for a group whose members' lateness differs,
        its text also gives each member's own and their totals."""
        if not lates:
            return None
        own = lates[0][1]
        if own is None or all(late == own for _, late in lates[1:]):
            return own
        given = sum(score.score for _, score in self.written(result))
        parts = []
        for member, late in lates:
            name = str(member.get("name") or member.get("key") or "a member")
            total = max(0.0, result.score + given - (late.penalty if late else 0.0))
            if late is None or not late.computed:
                said = "lateness not computed, no deduction"
            elif late.penalty:
                said = f"due {late.due}: -{late.penalty:g} points"
            else:
                said = f"due {late.due}: no deduction"
            parts.append(f"{name}: {said}, total {total:g}")
        return dataclasses.replace(
            own,
            text=f"{own.text} Each member's own due date counts (the roster's extension or "
            f"due date): {'; '.join(parts)}.",
        )

    def marked_late_without_time(self, result: SubmissionResult) -> bool:
        """The LMS download marks the submission late (Canvas's ``LATE``) but no time was
        found for it: no deduction can be computed (give its time with ``--times``)."""
        identity = result.identity or {}
        return (
            bool((identity.get("lms") or {}).get("late"))
            and self.late_policy is not None
            and self.late(result) is None
        )

    def row(self, result: SubmissionResult) -> Row:
        """The row's points: the people's grades, the lateness and the total, computed once
        (a group's: each member's lateness too, :attr:`Row.members`)."""
        lates = self.lates(result)
        return Row(
            result,
            tuple(self.written(result)),
            self._row_late(result, lates),
            tuple(lates) if len(lates) > 1 else (),
        )

    def student(self, result: SubmissionResult) -> Student | None:
        """The roster's student of ``result`` as resolved at grading (its ``identity``), or
        None (no roster, or no match)."""
        if result.identity:
            return student_of(result.identity)
        return None if self.roster is None else self.roster.students.get(result.submission)

    @property
    def pieces(self) -> list[str]:
        """The lab's graded pieces, in order."""
        return list(self.lab.pieces)


def _safe(name: str) -> str:
    """``name`` as a file stem: letters, digits and ``-_.@`` kept (nothing that shows
    nothing), no leading dot, at most 120 characters and :data:`STEM_BYTES` bytes, never
    a Windows device name nor a leading dash (:mod:`lablib.grading.filenames`)."""
    name = shown(unicodedata.normalize("NFC", name))
    safe = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name)
    safe = ("_" + safe[1:] if safe.startswith(".") else safe)[:120]
    return portable(cap_bytes(safe, STEM_BYTES)) or "submission"


def feedback_stems(names: Iterable[str]) -> dict[str, str]:
    """A feedback file stem per submission name, no two alike (also ignoring case and
    Unicode's forms, as macOS and Windows do: :func:`~lablib.grading.filenames.same_file`).

    Names are made file-safe (``"Smith, John"`` -> ``Smith__John``; a name too long for
    a file name cut to 150 bytes, ``CON`` -> ``_CON``: :mod:`lablib.grading.filenames`);
    names whose safe stems coincide each get the first 8 hex digits of their SHA-1 appended
    (``Smith__John-1d2c3b4a``), so ``"Smith, John"`` and ``"Smith_ John"``, or
    ``alice/hw`` and ``alice_hw``, never write one file. The feedback itself names the
    submission exactly, and ``grades.json`` gives each one's file.
    """
    names = sorted(set(names))
    safe = {name: _safe(name) for name in names}
    shared: dict[str, int] = {}
    for stem in safe.values():
        shared[same_file(stem)] = shared.get(same_file(stem), 0) + 1

    def hashed(name: str, digits: int) -> str:
        digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{safe[name]}-{digest[:digits]}"

    stems, used = {}, set()
    for name in names:
        digits = 8
        stem = hashed(name, digits) if shared[same_file(safe[name])] > 1 else safe[name]
        while same_file(stem) in used:  # taken by another name's stem: a longer digest
            digits += 4
            stem = hashed(name, digits)
        used.add(same_file(stem))
        stems[name] = stem
    return stems
