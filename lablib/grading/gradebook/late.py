"""Late work: a due date, a late policy, and the penalty of each submission.

A :class:`LatePolicy` says when the lab was due and what lateness costs: a deduction per
started day or per started hour (``10%``: of the points possible, tests and written
answers together, as Canvas's late policy counts; ``2``: points), an optional cap on the
total deduction, and a grace period (a submission within it is on time; past it, the
lateness counts from the due date). Per-student extensions come from the roster: an
``extension`` column (``2d``, ``36h``, ``90m``) or a ``due`` column (that student's own
due date). Submission times are resolved at grading (:mod:`~lablib.grading.gradebook.identity`):
the LMS download's (a Gradescope export's metadata), else a times file (``--times``), else
the roster's ``submitted_at:<lab>`` or ``submitted_at`` column (Gradescope's roster calls
it ``Submission Time``, Moodle's grading worksheet ``Last modified (submission)``); with
``from_files``, a row without any of them takes its notebook's file time (as copied from
the LMS download: check that the copy kept them). Canvas's ``LATE`` marker carries no
time: such a row without a time gets no deduction and is listed. A time that cannot be
read (a non-English Moodle worksheet's ``Freitag, 27. November 2026, 14:14``), or a
roster's extension or due date that cannot be read, is never taken for "on time": its
:class:`Late` is not ``computed`` (:func:`not_computed`), says why and what to do, and is
counted and listed apart; ``lablib export`` refuses it unless told to export it anyway.

Times are ISO 8601 (``2026-11-20T23:59``, ``2026-11-20 23:59:00 -0800``); a time without
a zone is in the grading machine's local zone. Reports show every time with its offset.

The policy is kept in the output folder (in ``grades.json``,
:class:`~lablib.grading.gradebook.store.GradebookFolder`): ``lablib report`` and later
regrades apply the same one.

Example::

    policy = LatePolicy.parse(due="2026-11-20T23:59+01:00", per_day="10%", cap="50%", grace="15m")
    late = policy.penalty("2026-11-22T08:00+01:00", possible=28)   # 2 days: -5.6 points
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import re

__all__ = [
    "LatePolicy",
    "Late",
    "LateError",
    "TIME_FORMS",
    "not_computed",
    "unread_time",
    "parse_deadline",
    "parse_time",
    "parse_duration",
]

#: The submission times lablib reads, in every message about one it cannot read.
TIME_FORMS = (
    "ISO 8601, e.g. 2026-11-20T23:59 or 2026-11-20 23:59:00 -0800, or an English Moodle "
    "worksheet's 'Friday, 27 November 2026, 2:14 PM'"
)

_DURATION = re.compile(
    r"^\s*(?:(\d+(?:\.\d+)?)\s*d)?\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*(?:(\d+(?:\.\d+)?)\s*m(?:in)?)?\s*$",
    re.IGNORECASE,
)


class LateError(ValueError):
    """A due date, a duration or an amount that cannot be read (the message says what was
    given and what is expected)."""


def file_time(path) -> str:
    """The modification time of the file at ``path``, ISO 8601 with this machine's offset,
    or "" where it cannot be read (no file, a time out of range)."""
    try:
        when = dt.datetime.fromtimestamp(os.stat(path).st_mtime).astimezone()
    except (OSError, OverflowError, ValueError):
        return ""
    return when.isoformat()


def parse_time(text) -> dt.datetime:
    """An aware datetime from ISO 8601 text (a naive one is in the local zone)."""
    if isinstance(text, dt.datetime):
        value = text
    else:
        raw = str(text).strip()
        cleaned = re.sub(r"\s+([+-]\d{2}:?\d{2})$", r"\1", raw).replace("Z", "+00:00")
        try:
            value = dt.datetime.fromisoformat(cleaned)
        except ValueError:
            raise LateError(
                f"{raw!r} is not a time: use ISO 8601, e.g. 2026-11-20T23:59 or "
                f"2026-11-20 23:59:00 -0800 (a time without a zone is in this machine's zone)."
            ) from None
    value = value if value.tzinfo else value.astimezone()
    offset = value.utcoffset() or dt.timedelta(0)
    if not -_LONGEST_BEHIND <= offset <= _LONGEST_AHEAD or offset.total_seconds() % 900:
        raise LateError(
            f"{text!r} has the offset {value:%z}, which no time zone has (they run from -12:00 "
            f"to +14:00, in quarter hours): check the time's zone."
        )
    return value


#: How far the time zones in use run from UTC (Baker Island, the Line Islands).
_LONGEST_BEHIND = dt.timedelta(hours=12)
_LONGEST_AHEAD = dt.timedelta(hours=14)
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_deadline(text, what: str = "The due date") -> dt.datetime:
    """:func:`parse_time` for a deadline, which must say its time: a date alone would be
    read as its first minute, where most deadlines mean its last (students who handed in
    at 21:00 on the day lost 2.3 points each)."""
    date = "" if isinstance(text, dt.datetime) else str(text).strip()
    if _DATE_ONLY.fullmatch(date):
        raise LateError(
            f"{what} {date!r} has no time: a date alone would be read as its first minute "
            f"(00:00 in this machine's zone), not its last. Write the time too, e.g. "
            f"{date}T23:59 (or with its zone, {date}T23:59-08:00)."
        )
    return parse_time(text)


def parse_duration(text) -> dt.timedelta:
    """``2d``, ``36h``, ``90m``, ``1d 12h`` as a timedelta (a bare number is refused: say
    the unit)."""
    if isinstance(text, dt.timedelta):
        return text
    match = _DURATION.match(str(text or ""))
    if not str(text or "").strip() or not match or not any(match.groups()):
        raise LateError(
            f"{text!r} is not a duration: write it with its unit, e.g. 15m, 36h, 2d or 1d12h."
        )
    days, hours, minutes = (float(g or 0) for g in match.groups())
    return dt.timedelta(days=days, hours=hours, minutes=minutes)


def _amount(text, what: str) -> tuple[float, bool]:
    """``"10%"`` -> (10, True); ``"2"`` -> (2, False)."""
    raw = str(text).strip()
    percent = raw.endswith("%")
    try:
        value = float(raw.rstrip("%").strip())
    except ValueError:
        raise LateError(
            f"{what} {raw!r} is not an amount: give a percentage of the points possible (10%) "
            f"or a number of points (2)."
        ) from None
    if value < 0 or (percent and value > 100):
        raise LateError(
            f"{what} {raw!r} is out of range: 0 to 100% or a non-negative number of points."
        )
    return value, percent


def _human(delta: dt.timedelta) -> str:
    minutes = int(round(delta.total_seconds() / 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [
        f"{days} d" if days else "",
        f"{hours} h" if hours else "",
        f"{minutes} min" if minutes else "",
    ]
    return " ".join(p for p in parts if p) or "0 min"


@dataclasses.dataclass(frozen=True)
class Late:
    """One submission's lateness.

    Attributes:
        submitted_at, due: the times compared (ISO 8601 with offset; ``due`` includes the
            student's extension).
        late_seconds: how late past the due date (0: on time or within the grace period).
        units: started days (or hours) late, the policy's unit.
        penalty: the points deducted.
        text: the same in words, for the student.
        computed: False where the lateness could not be computed (a submission time, an
            extension or a due date that cannot be read; :func:`not_computed`): no
            deduction, but never "on time"; ``text`` says why and what to do.
    """

    submitted_at: str
    due: str
    late_seconds: float
    units: int
    penalty: float
    text: str
    computed: bool = True

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def not_computed(submitted, why: str) -> Late:
    """The :class:`Late` of a submission whose lateness could not be computed: no
    deduction, not ``computed``, ``why`` (what was given, what was expected, what to do)
    as its text."""
    return Late(str(submitted), "", 0.0, 0, 0.0, why, computed=False)


def unread_time(submitted, source: str = "") -> Late:
    """The :class:`Late` of a submission time that cannot be read (``source``: where the
    time came from, e.g. "the roster's submitted_at column")."""
    where = f" (from {source})" if source else ""
    return not_computed(
        submitted,
        f"Lateness not computed: the time {str(submitted)!r}{where} could not be read "
        f"(expected {TIME_FORMS}): give the times with --times or an English worksheet; "
        f"no deduction computed.",
    )


@dataclasses.dataclass(frozen=True)
class LatePolicy:
    """A due date and what lateness costs (see the module's docstring)."""

    due: str
    per: str = "day"
    deduction: str = "0"
    cap: str = ""
    grace: str = "0m"
    from_files: bool = False

    @classmethod
    def parse(
        cls, *, due, per_day=None, per_hour=None, cap=None, grace=None, from_files=False
    ) -> LatePolicy:
        """A checked policy: ``due`` a time, ``per_day`` or ``per_hour`` an amount
        (``10%`` or points), ``cap`` an amount, ``grace`` a duration.

        Raises:
            LateError: anything unreadable, or both ``per_day`` and ``per_hour``.
        """
        if per_day is not None and per_hour is not None:
            raise LateError("Give either a deduction per day or per hour, not both.")
        per, deduction = ("hour", per_hour) if per_hour is not None else ("day", per_day or "0")
        policy = cls(
            parse_deadline(due).isoformat(timespec="minutes"),
            per,
            str(deduction),
            str(cap or ""),
            str(grace or "0m"),
            bool(from_files),
        )
        policy.check()
        return policy

    def check(self) -> None:
        parse_time(self.due)
        if self.per not in ("day", "hour"):
            raise LateError(f"A late deduction is per 'day' or per 'hour', not {self.per!r}.")
        _amount(self.deduction, "The deduction")
        if self.cap:
            _amount(self.cap, "The cap")
        parse_duration(self.grace)

    def penalty(
        self, submitted, possible: float, *, extension=None, due=None, extended_until=None
    ) -> Late:
        """The lateness of a submission made at ``submitted`` (a time), for a row with
        ``possible`` points; ``extension`` (a duration) or ``due`` (a time) from the
        student's roster row move the due date; ``extended_until`` (an extension granted
        in the LMS) moves it only later."""
        when = parse_time(submitted)
        deadline = parse_deadline(due, "The roster's due date") if due else parse_time(self.due)
        if extension:
            deadline = deadline + parse_duration(extension)
        if extended_until:
            deadline = max(deadline, parse_time(extended_until))
        late = when - deadline
        times = f"submitted {when:%Y-%m-%d %H:%M %z}, due {deadline:%Y-%m-%d %H:%M %z}"

        def lateness(late_seconds: float, units: int, penalty: float, text: str) -> Late:
            """This submission's :class:`Late`: its times and what they cost."""
            return Late(
                when.isoformat(timespec="minutes"),
                deadline.isoformat(timespec="minutes"),
                late_seconds,
                units,
                penalty,
                text,
            )

        if late.total_seconds() <= 0:
            return lateness(0.0, 0, 0.0, f"On time ({times}).")
        if late <= parse_duration(self.grace):
            return lateness(
                0.0,
                0,
                0.0,
                f"Within the grace period of {_human(parse_duration(self.grace))} ({times}): no deduction.",
            )
        unit = dt.timedelta(days=1) if self.per == "day" else dt.timedelta(hours=1)
        units = math.ceil(late / unit)
        value, percent = _amount(self.deduction, "The deduction")
        deduction = units * (value / 100 * possible if percent else value)
        if self.cap:
            cap, cap_percent = _amount(self.cap, "The cap")
            deduction = min(deduction, cap / 100 * possible if cap_percent else cap)
        deduction = round(min(deduction, possible), 4)
        rule = f"{self.deduction} of the points possible" if percent else f"{self.deduction} points"
        text = (
            f"Late by {_human(late)} ({times}): "
            f"{units} {self.per}{'s' if units != 1 else ''} started, {rule} per {self.per}"
            f"{f' (at most {self.cap})' if self.cap else ''}: -{deduction:g} points."
        )
        return lateness(late.total_seconds(), units, deduction, text)

    def describe(self) -> str:
        """The policy in words (for the summary)."""
        grace = parse_duration(self.grace)
        return (
            f"due {parse_time(self.due):%Y-%m-%d %H:%M %z}; {self.deduction} per started {self.per} late"
            f"{f', at most {self.cap}' if self.cap else ''}{f', grace {_human(grace)}' if grace else ''}; "
            f"times from the LMS download, the times file or the roster"
            f"{', else the notebooks’ file times' if self.from_files else ''}"
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> LatePolicy:
        policy = cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})
        policy.check()
        return policy
