"""How a batch is graded: every option declared once, with its default and its meaning.

:class:`GradeOptions` is what ``lablib grade`` (:mod:`lablib.cli`), :func:`~lablib.grading.
grade.grade` and Gradescope's run (:mod:`lablib.grading.gradescope`) share: the command
line takes its defaults and help texts from here, ``grade()`` takes one (or the same
names as keywords), and the Gradescope run builds one from the zip's ``config.json``.

Example::

    options = GradeOptions(hidden_dirs=("hidden/",), jobs=2, timeout=30)
    grade("lab1", ["submissions/"], "out", options)
    grade("lab1", ["submissions/"], "out", options, force=True)   # one option changed
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the types only: the command line reads this module before grading
    from lablib.grading.gradebook.late import LatePolicy
    from lablib.grading.gradebook.roster import Roster, SubmissionTimes
    from lablib.grading.report.base import Writer
    from lablib.grading.run import Limits

__all__ = ["GradeOptions"]


def _option(default, help: str, **kwargs):
    return dataclasses.field(default=default, metadata={"help": help}, **kwargs)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GradeOptions:
    """The options of one grading run (each field's ``help`` is the command line's).

    Raises:
        ValueError: a time, memory or job count that is not positive (the message says
            what was given and what is expected).
    """

    hidden_dirs: tuple[str, ...] = _option((), "folders with hidden tests <lab>.py")
    jobs: int | None = _option(None, "submissions graded in parallel (default: CPU cores)")
    timeout: float = _option(60.0, "seconds per graded cell and per test (default 60)")
    memory_mb: float = _option(4096.0, "memory limit per submission in MB (default 4096)")
    total: float | None = _option(
        None,
        "seconds a submission's graded cells and tests may take in all (default: 10 times "
        "the timeout)",
    )
    force: bool = _option(False, "grade again even when the submission and the tests are unchanged")
    lab_notebook: str | None = _option(
        None, "the released lab notebook to take # SETUP cells from (searched first)"
    )
    progress: bool = _option(True, "a progress bar on stderr")
    isolate: bool = _option(True, "the sandbox (namespaces, an unprivileged uid) when run as root")
    writers: tuple[Writer, ...] | None = _option(
        None, "the report writers (default: lablib.grading.report.DEFAULT_WRITERS)"
    )
    fresh: bool = _option(
        False,
        "start a new gradebook in the output folder (default: update "
        "it, keeping the rows of submissions not graded now while "
        "their notebooks exist)",
    )
    roster: Roster | None = _option(
        None, "the class list: each row's student is resolved now and kept in the gradebook"
    )
    times: SubmissionTimes | None = _option(
        None,
        "submission times for the rows whose LMS download carries none (a regrade without "
        "it keeps the time an earlier one gave each notebook, while its bytes are the same)",
    )
    late_policy: LatePolicy | None = _option(
        None, "the late policy (kept in the output folder: later regrades and reports apply it)"
    )
    layout: str | None = _option(
        None,
        "how a submissions folder is read: auto (LMS downloads by their shapes) or plain (one "
        "folder per student, no LMS's shapes read: students' own repositories); default: as "
        "the output folder's gradebook was graded, auto for a new one",
    )

    def __post_init__(self):
        if isinstance(self.hidden_dirs, (str, os.PathLike)):
            path = str(self.hidden_dirs)
            raise TypeError(
                f"GradeOptions(hidden_dirs=...) takes a list of folders, got the "
                f"single path {path!r}; write [{path!r}]."
            )
        object.__setattr__(self, "hidden_dirs", tuple(str(d) for d in self.hidden_dirs))
        if self.lab_notebook is not None:
            object.__setattr__(self, "lab_notebook", str(self.lab_notebook))
        if self.writers is not None:
            object.__setattr__(self, "writers", tuple(self.writers))
        for name, expected in (
            ("timeout", "a positive number"),
            ("memory_mb", "a positive number"),
            ("total", "a positive number of seconds, or None for 10 times the timeout"),
        ):
            value = getattr(self, name)
            if name == "total" and value is None:
                continue
            if (not isinstance(value, numbers.Real) or isinstance(value, bool)) or not value > 0:
                raise ValueError(f"GradeOptions({name}={value!r}): expected {expected}.")
            object.__setattr__(self, name, float(value))  # NumPy numbers too, as before
        if self.jobs == 0 and not isinstance(self.jobs, bool):
            object.__setattr__(self, "jobs", None)  # 0, as before: one per CPU core
        if self.jobs is not None and (
            not isinstance(self.jobs, numbers.Integral)
            or isinstance(self.jobs, bool)
            or self.jobs < 1
        ):
            raise ValueError(
                f"GradeOptions(jobs={self.jobs!r}): expected a whole number >= 1, "
                f"or 0 or None for one per CPU core."
            )
        if self.jobs is not None:
            object.__setattr__(self, "jobs", int(self.jobs))
        if self.layout not in (None, "auto", "plain"):
            raise ValueError(
                f"GradeOptions(layout={self.layout!r}): expected 'auto' (LMS downloads read by "
                f"their shapes) or 'plain' (one folder per student)."
            )

    @classmethod
    def of(cls, options: GradeOptions | None = None, **changes) -> GradeOptions:
        """``options`` (default: the defaults) with ``changes`` (option name -> value).

        Raises:
            TypeError: a name that is no option (the message lists the options).
        """
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"Unknown grading option(s) {unknown}; the options are {cls.names()}.")
        return dataclasses.replace(options or cls(), **changes)

    @classmethod
    def names(cls) -> list[str]:
        """Every option's name, in order."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def help(cls, name: str) -> str:
        """The help text of option ``name``."""
        return next(f.metadata["help"] for f in dataclasses.fields(cls) if f.name == name)

    @classmethod
    def default(cls, name: str):
        """The default of option ``name``."""
        return next(f.default for f in dataclasses.fields(cls) if f.name == name)

    @property
    def limits(self) -> Limits:
        """The run's :class:`~lablib.grading.run.Limits`."""
        from lablib.grading.run import Limits

        return Limits(
            timeout=self.timeout, memory_mb=self.memory_mb, isolate=self.isolate, total=self.total
        )

    @property
    def workers(self) -> int:
        """Submissions graded at once (``jobs``, else one per CPU core)."""
        return max(1, self.jobs or os.cpu_count() or 1)
