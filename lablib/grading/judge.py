"""Judge plain values in the grading process and sum a submission's score.

The probe ran in the student's process; here, in the grader's own process, each test's
judge compares the plain values it returned with the expected ones. Nothing the student
defined (a patched ``np.allclose``, an object whose ``==`` is always true) exists here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import threading
import traceback

from lablib.grading.spec import LabSpec, Test, TestFailure

__all__ = ["TestResult", "SubmissionResult", "judge_test", "status_of", "STATUS_ORDER"]

#: Status words, most serious first; a submission's status lists those that apply.
STATUS_ORDER = ("grader-error", "invalid-notebook", "memory", "timeout", "crashed", "missing")

# Judges may import TensorFlow or Keras on first use; two grader threads doing that at
# once deadlock or half-register TensorFlow's ops. Judging is cheap: one at a time.
_JUDGE_LOCK = threading.Lock()


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
        kind: ``passed``, ``failed`` (wrong values), ``error`` (the code raised),
            ``timeout``, ``memory``, ``crashed``, ``missing``, ``invalid-notebook``, or
            ``grader-error`` (the judge itself failed: not the student's doing).
        detail: for the instructor only (the judge's traceback of a grader error).
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
    kind: str = "passed"
    detail: str = ""

    @classmethod
    def failed(cls, test: Test, message: str, kind: str) -> "TestResult":
        """A zero-score result of ``test`` with ``message`` and ``kind``."""
        return cls(test.id, test.piece, test.name, 0.0, test.points, False, test.hidden,
                   message, test.hint, kind)


def judge_test(test: Test, raw, cell_error: tuple[str, str] | None = None) -> TestResult:
    """Judge one test from what its probe returned.

    Args:
        test: the test (with its judge or ``expected``).
        raw: a :class:`~lablib.grading.execute.ProbeResult`; None when the test did not run.
        cell_error: ``(kind, message)`` when the piece's graded cell failed to run.

    Returns:
        :class:`TestResult`. A judge that raises anything but :class:`TestFailure` or
        ``AssertionError`` is the grader's error (kind ``grader-error``), never a
        failure of the student's.

    Example::

        judge_test(test, ProbeResult(True, 4.0)).score
    """
    prefix = ""
    if cell_error is not None:
        prefix = f"your graded cell `{test.piece}` failed: {cell_error[1]}. "
    if raw is None:
        return TestResult.failed(test, prefix + "the test did not run", "error")
    if not raw.ok:
        return TestResult.failed(test, prefix + str(raw.error), raw.kind or "error")
    try:
        with _JUDGE_LOCK:
            fraction = test.run_judge(raw.value)
    except (TestFailure, AssertionError) as exc:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        return TestResult.failed(test, message, "failed")
    except Exception as exc:  # noqa: BLE001 - a bug or a broken install in the grader
        result = TestResult.failed(test, f"the judge failed: {type(exc).__name__}: {exc}", "grader-error")
        result.detail = "".join(traceback.format_exception(exc))[-4000:]
        return result
    score = round(test.points * fraction, 6)
    passed = fraction >= 1.0
    message = "" if passed else f"partial credit: {fraction:.0%} of the points"
    return TestResult(test.id, test.piece, test.name, score, test.points, passed, test.hidden,
                      message, test.hint, "passed" if passed else "failed")


@dataclasses.dataclass
class SubmissionResult:
    """Everything the reports need about one graded submission."""

    submission: str
    path: str
    status: str
    score: float
    max_score: float
    pieces: dict  # piece -> {"score", "max_score"}
    tests: list  # of TestResult
    notes: list = dataclasses.field(default_factory=list)
    output: str = ""
    isolation: dict = dataclasses.field(default_factory=dict)
    diagnostics: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready) of the result, tests included."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SubmissionResult":
        """Inverse of :meth:`to_dict` (used by the grading cache)."""
        data = dict(data)
        data["tests"] = [TestResult(**t) for t in data["tests"]]
        return cls(**data)


def status_of(problem_kinds, missing) -> str:
    """The status text: ``ok`` or the problems, most serious first.

    Example: ``status_of({"timeout"}, ["softmax"]) == "timeout; missing: softmax"``.
    """
    parts = [kind for kind in STATUS_ORDER[:-1] if kind in set(problem_kinds)]
    if missing:
        parts.append("missing: " + ", ".join(missing))
    return "; ".join(parts) if parts else "ok"


def summarise(lab: LabSpec, name: str, path: str, results: list[TestResult], status: str,
              **extra) -> SubmissionResult:
    """Build a :class:`SubmissionResult` (per-piece sums, totals) from judged tests."""
    pieces = {p: {"score": 0.0, "max_score": 0.0} for p in lab.pieces}
    for r in results:
        entry = pieces.setdefault(r.piece, {"score": 0.0, "max_score": 0.0})
        entry["score"] = round(entry["score"] + r.score, 6)
        entry["max_score"] = round(entry["max_score"] + r.max_score, 6)
    score = round(sum(r.score for r in results), 6)
    max_score = round(sum(r.max_score for r in results), 6)
    return SubmissionResult(name, path, status, score, max_score, pieces, results, **extra)
