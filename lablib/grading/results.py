"""The values every grading stage passes on: kinds, a submission's status, test results.

The run stage (:mod:`~lablib.grading.run`) says how each request ended with a
:class:`Kind`; the judge (:mod:`~lablib.grading.judge`) turns probe values into
:class:`TestResult` objects and a :class:`SubmissionResult` whose :class:`Status` is a
typed value (the problems met, most serious first, and the graded cells missing);
the writers (:mod:`~lablib.grading.report`) are the only place a status becomes text.

Everything here is plain data (standard library only) and round-trips through
``to_dict``/``from_dict`` (the grading cache stores it as JSON).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from typing import Any
from collections.abc import Iterable

__all__ = [
    "Kind",
    "PROBLEMS",
    "Status",
    "TestResult",
    "PieceScore",
    "Diagnostic",
    "Isolation",
    "WrittenAnswer",
    "PersonScore",
    "SubmissionResult",
    "cell_failed",
]


def cell_failed(piece: str) -> str:
    """How a test's message begins where its graded cell raised: the cell's error (as the
    grader describes it) follows, then the test's own."""
    return f"your graded cell `{piece}` failed: "


class Kind(str, enum.Enum):
    """How a test (or a request of the run) ended. A ``str``: ``Kind.TIMEOUT == "timeout"``,
    and JSON writes the value."""

    PASSED = "passed"
    #: The code ran and its values were wrong.
    FAILED = "failed"
    #: The student's code raised.
    ERROR = "error"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    #: The code ended the grader's process (``sys.exit``, ``os._exit``, a crash).
    CRASHED = "crashed"
    #: The graded cell was not found in the notebook.
    MISSING = "missing"
    INVALID_NOTEBOOK = "invalid-notebook"
    #: The grader itself failed (a judge raised): never the student's doing.
    GRADER_ERROR = "grader-error"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


#: The kinds that make up a submission's status, most serious first (``missing`` is
#: carried apart, with the names of the cells).
PROBLEMS = (Kind.GRADER_ERROR, Kind.INVALID_NOTEBOOK, Kind.MEMORY, Kind.TIMEOUT, Kind.CRASHED)


@dataclasses.dataclass(frozen=True)
class Status:
    """A submission's status: the problems its run met and the graded cells it lacks.

    Attributes:
        problems: kinds among :data:`PROBLEMS`, most serious first, each once.
        raised: graded cells that raised when they ran, as ``"piece (ExceptionName)"``,
            in the lab's order (a blank lab's stub is "not done", not listed here).
        missing: graded pieces whose cell was not found, in the lab's order.

    Build with :meth:`of`; ``Status()`` is ``ok``. Text is the writers' business
    (:func:`lablib.grading.report.text.status_text`).
    """

    problems: tuple[Kind, ...] = ()
    missing: tuple[str, ...] = ()
    raised: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, problems: Iterable = (), missing: Iterable[str] = (), raised: Iterable[str] = ()
    ) -> Status:
        """The status of ``problems`` (kinds or their values, any order, repeats allowed),
        ``missing`` pieces and graded cells that ``raised``; kinds outside
        :data:`PROBLEMS` are ignored."""
        given = {Kind(p) for p in problems}
        return cls(
            tuple(k for k in PROBLEMS if k in given),
            tuple(dict.fromkeys(missing)),
            tuple(dict.fromkeys(raised)),
        )

    @property
    def ok(self) -> bool:
        """No problem, no graded cell that raised and nothing missing."""
        return not self.problems and not self.raised and not self.missing

    @property
    def kinds(self) -> tuple[Kind, ...]:
        """Every kind that applies, most serious first: the problems, ``error`` (a graded
        cell raised), then ``missing``."""
        return (
            self.problems
            + ((Kind.ERROR,) if self.raised else ())
            + ((Kind.MISSING,) if self.missing else ())
        )

    def has(self, kind) -> bool:
        """Whether ``kind`` (a :class:`Kind` or its value) applies."""
        return Kind(kind) in self.kinds

    def text(self) -> str:
        """The status in one line: ``ok``, or the problems, most serious first, the graded
        cells that raised, then the missing cells: ``"timeout; error: attention (NameError);
        missing: softmax"`` (the gradebook's status column)."""
        if self.ok:
            return "ok"
        parts = [kind.value for kind in self.problems]
        if self.raised:
            parts.append("error: " + ", ".join(self.raised))
        if self.missing:
            parts.append("missing: " + ", ".join(self.missing))
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return {
            "problems": [k.value for k in self.problems],
            "missing": list(self.missing),
            "raised": list(self.raised),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Status:
        return cls.of(data.get("problems", ()), data.get("missing", ()), data.get("raised", ()))


@dataclasses.dataclass
class TestResult:
    """The judged result of one test.

    Attributes:
        id: ``"piece::name"``.
        piece, name: the graded piece and the test's name.
        score, max_score: points earned and available.
        passed: full marks.
        hidden: a hidden test (its message is not shown to students).
        message: why it failed ("" when passed).
        hint: the test's hint for students.
        kind: how it ended (:class:`Kind`).
        detail: for the instructor only (the judge's traceback of a grader error).
        mistake: the message names the student's mistake (a check's diagnosis, such as
            "The scores are not scaled by 1/sqrt(d_k)"), not only a symptom; the class
            summary ranks these by how many students made each.
    """

    __test__ = False

    id: str
    piece: str
    name: str
    score: float
    max_score: float
    passed: bool
    hidden: bool
    message: str = ""
    hint: str = ""
    kind: Kind = Kind.PASSED
    detail: str = ""
    mistake: bool = False

    def __post_init__(self):
        self.kind = Kind(self.kind)

    @classmethod
    def failed(
        cls, test, message: str, kind, *, mistake: bool = False, detail: str = ""
    ) -> TestResult:
        """A zero-score result of ``test`` (a :class:`~lablib.grading.spec.Test`);
        ``mistake``: ``message`` names the student's mistake, so the test's fixed hint
        (about other mistakes) is left out; ``detail``: for the instructor only."""
        return cls(
            test.id,
            test.piece,
            test.name,
            0.0,
            test.points,
            False,
            test.hidden,
            message,
            "" if mistake else test.hint,
            Kind(kind),
            detail,
            mistake,
        )

    @classmethod
    def judged(cls, test, fraction: float) -> TestResult:
        """The result of ``test`` whose judge gave ``fraction`` of the points."""
        score = round(test.points * fraction, 6)
        passed = fraction >= 1.0
        message = "" if passed else f"partial credit: {fraction:.0%} of the points"
        return cls(
            test.id,
            test.piece,
            test.name,
            score,
            test.points,
            passed,
            test.hidden,
            message,
            test.hint,
            Kind.PASSED if passed else Kind.FAILED,
        )

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["kind"] = self.kind.value
        return data


@dataclasses.dataclass(frozen=True)
class PieceScore:
    """Points of one graded piece: the sum over its tests."""

    score: float = 0.0
    max_score: float = 0.0


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    """For the instructor: one run attempt that did not end normally, or a judge that failed.

    Attributes:
        ended: how it ended (``timeout``, ``memory``, ``crashed``, ``setup`` for the lab's
            set-up cells, ``grader-error`` for a judge).
        running: what was running (``startup``, ``setup``, ``cell <piece>``, ``test <id>``);
            empty for a judge.
        test: the test whose judge failed (judge diagnostics only).
        attempt: the attempt's number (run diagnostics only).
        detail: what happened (the judge's traceback, the limit that was hit).
        exit: the process's exit status, in words.
        output_tail: the end of what the attempt printed.
    """

    ended: str
    running: str = ""
    test: str = ""
    attempt: int = 0
    detail: str = ""
    exit: str = ""
    output_tail: str = ""

    @property
    def title(self) -> str:
        """What it is about: the step that was running, or the test."""
        return self.running or self.test


@dataclasses.dataclass(frozen=True)
class Isolation:
    """What isolation the run had, recorded by the grader (never by the student's process).

    Attributes:
        uid: the uid the submission ran as (None: unknown).
        network, filesystem, processes: what was private and what shared, in words.
        notes: anything that was not as asked (a namespace that could not be made...).
    """

    uid: int | None = None
    network: str = "unknown"
    filesystem: str = "unknown"
    processes: str = "unknown"
    notes: tuple[str, ...] = ()

    @classmethod
    def from_report(cls, report: dict, notes: Iterable[str] = ()) -> Isolation:
        """From the sandbox stage's report (extra keys ignored) plus the grader's ``notes``."""
        return cls(
            report.get("uid"),
            str(report.get("network", "unknown")),
            str(report.get("filesystem", "unknown")),
            str(report.get("processes", "unknown")),
            tuple(str(n) for n in report.get("notes", ())) + tuple(notes),
        )

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["notes"] = list(self.notes)
        return data


@dataclasses.dataclass(frozen=True)
class WrittenAnswer:
    """What a student wrote for one written question, as found in the notebook.

    Attributes:
        text: the answer (markdown), "" when the placeholder was left or nothing was found.
        found: how the cell was found: ``tag`` (its ``metadata.lablib.answer``), ``marker``
            (``<!-- BEGIN ANSWER <id> -->``), ``cell id`` (the released cell's id), or ""
            (not found: the student deleted the cell).
        notes: anything the reader noticed (several cells, markers removed...).
    """

    text: str = ""
    found: str = ""
    notes: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        """A short hash of the text: a person's score of another text is flagged as stale."""
        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "found": self.found,
            "notes": list(self.notes),
            "digest": self.digest,
        }

    @classmethod
    def from_dict(cls, data: dict) -> WrittenAnswer:
        return cls(
            str(data.get("text", "")), str(data.get("found", "")), tuple(data.get("notes", ()))
        )


@dataclasses.dataclass(frozen=True)
class PersonScore:
    """A person's grade of one written answer (``lablib review``).

    Attributes:
        question: the written question's id.
        score: the points given (rubric items + adjustment, within [0, max_score]).
        max_score: the question's points.
        items: ``(points, comment)`` of the rubric items applied.
        comment: the grader's own comment for this student.
        adjustment: points added (or removed) beyond the items.
        graded: a person graded it; False: still to grade (score 0).
        stale: graded, but the answer's text changed since (a resubmission): to look at again.
        grader: who gave the grade.
    """

    question: str
    score: float = 0.0
    max_score: float = 0.0
    items: tuple[tuple[float, str], ...] = ()
    comment: str = ""
    adjustment: float = 0.0
    graded: bool = False
    stale: bool = False
    grader: str = ""

    @property
    def pending(self) -> bool:
        """Still needs a person: never graded, or graded before the answer changed."""
        return not self.graded or self.stale

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["items"] = [{"points": p, "comment": c} for p, c in self.items]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> PersonScore:
        items = tuple((float(i["points"]), str(i["comment"])) for i in data.get("items", ()))
        return cls(
            str(data["question"]),
            float(data.get("score", 0.0)),
            float(data.get("max_score", 0.0)),
            items,
            str(data.get("comment", "")),
            float(data.get("adjustment", 0.0)),
            bool(data.get("graded", False)),
            bool(data.get("stale", False)),
            str(data.get("grader", "")),
        )


@dataclasses.dataclass
class SubmissionResult:
    """Everything the reports need about one graded submission.

    Attributes:
        submission: its name in the gradebook (unique in the batch).
        path: the notebook graded.
        status: a :class:`Status`.
        score, max_score: the total.
        pieces: piece -> :class:`PieceScore`, in the lab's order.
        tests: one :class:`TestResult` per test.
        notes: what the reader of the notebook and the run noticed, in words.
        output: what the submission printed (capped).
        isolation: an :class:`Isolation`.
        diagnostics: :class:`Diagnostic` entries for the instructor.
        seconds: wall time of the run and of judging it in the grader.
        cached: taken from the grading cache.
        answers: written question id -> the :class:`WrittenAnswer` found (graded by a
            person: their scores are not part of ``score``, see ``lablib review``).
        code: graded piece -> its cell's code as graded (for the similarity hints).
        identity: who submitted it, resolved once at grading and kept in the gradebook
            (:func:`lablib.grading.gradebook.identity.resolve`): the roster's student, or what the
            LMS download says (Canvas user id, Moodle participant id, Gradescope
            submitters), the submission time and where it came from; {} before grading.
    """

    submission: str
    path: str
    status: Status
    score: float
    max_score: float
    pieces: dict[str, PieceScore]
    tests: list[TestResult]
    notes: list[str] = dataclasses.field(default_factory=list)
    output: str = ""
    isolation: Isolation = dataclasses.field(default_factory=Isolation)
    diagnostics: list[Diagnostic] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    answers: dict[str, WrittenAnswer] = dataclasses.field(default_factory=dict)
    code: dict[str, str] = dataclasses.field(default_factory=dict)
    identity: dict = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready) of the result, tests included."""
        return {
            "submission": self.submission,
            "path": self.path,
            "status": self.status.to_dict(),
            "score": self.score,
            "max_score": self.max_score,
            "pieces": {p: dataclasses.asdict(s) for p, s in self.pieces.items()},
            "tests": [t.to_dict() for t in self.tests],
            "notes": list(self.notes),
            "output": self.output,
            "isolation": self.isolation.to_dict(),
            "diagnostics": [dataclasses.asdict(d) for d in self.diagnostics],
            "seconds": self.seconds,
            "cached": self.cached,
            "answers": {q: a.to_dict() for q, a in self.answers.items()},
            "code": dict(self.code),
            "identity": dict(self.identity),
        }

    @classmethod
    def from_dict(cls, data: dict) -> SubmissionResult:
        """Inverse of :meth:`to_dict` (used by the grading cache)."""
        return cls(
            data["submission"],
            data["path"],
            Status.from_dict(data["status"]),
            data["score"],
            data["max_score"],
            {p: PieceScore(**s) for p, s in data["pieces"].items()},
            [TestResult(**t) for t in data["tests"]],
            list(data.get("notes", [])),
            data.get("output", ""),
            Isolation.from_report(data.get("isolation", {})),
            [Diagnostic(**d) for d in data.get("diagnostics", [])],
            data.get("seconds", 0.0),
            data.get("cached", False),
            {q: WrittenAnswer.from_dict(a) for q, a in (data.get("answers") or {}).items()},
            {str(p): str(c) for p, c in (data.get("code") or {}).items()},
            dict(data.get("identity") or {}),
        )
