"""Judge one test: the plain values its probe returned, in the grading process.

The probe ran in the student's process; here, in the grader's own process, each test's
judge compares the plain values it returned with the expected ones. Nothing the student
defined (a patched ``np.allclose``, an object whose ``==`` is always true) exists here.
A judge that would rebuild or run a model the submission described stops here
(:class:`~lablib.grading.spec.NeedsSandbox`) and is run again by :mod:`.sandboxed`.
"""

from __future__ import annotations

import contextlib
import threading
import traceback

from lablib.grading.results import Kind, TestResult, cell_failed
from lablib.grading.expect import Mistake
from lablib.backend import full_float32
from lablib.grading.expect import TestFailure
from lablib.grading.labspec.model import NeedsSandbox, Test, judging_in_grader

__all__ = ["judge_test", "judged", "failed_message", "failure_text", "judge_error"]

# Judges may import TensorFlow or Keras on first use; two grader threads doing that at
# once deadlock or half-register TensorFlow's ops. Judging is cheap: one at a time.
_JUDGE_LOCK = threading.Lock()


def judge_test(test: Test, raw, cell_error=None, *, in_grader: bool = False) -> TestResult | None:
    """Judge one test from what its probe returned.

    Args:
        test: the test (with its judge or ``expected``).
        raw: a :class:`~lablib.grading.run.ProbeResult`; None when the test did not run.
        cell_error: a :class:`~lablib.grading.run.CellError` when the piece's graded
            cell failed to run.
        in_grader: the judge runs in the grader's own process (``lablib grade``): one
            that calls :func:`~lablib.grading.spec.sandbox_only` is stopped there.

    Returns:
        :class:`~lablib.grading.results.TestResult`, or None (only with ``in_grader``)
        when the judge must run in a sandboxed process (:mod:`.sandboxed`). A judge
        that raises anything but :class:`TestFailure` or ``AssertionError`` is the
        grader's error (kind ``grader-error``), never a failure of the student's.

    Example::

        judge_test(test, ProbeResult(True, 4.0)).score
    """
    # The test is asked first (its name for the error raised, its judge's verdict), the
    # result written after: the judge reads the Test, then writes a TestResult.
    named = None
    if raw is not None and not raw.ok and (raw.kind or Kind.ERROR) == Kind.ERROR:
        named = test.named_error(str(raw.error))
    if raw is not None and raw.ok:
        try:
            grader_only = judging_in_grader() if in_grader else contextlib.nullcontext()
            with _JUDGE_LOCK, full_float32(), grader_only:
                fraction = test.run_judge(raw.value)
        except NeedsSandbox:
            return None
        except (TestFailure, AssertionError) as exc:
            return TestResult.failed(
                test, failure_text(exc), Kind.FAILED, mistake=isinstance(exc, Mistake)
            )
        except Exception as exc:  # noqa: BLE001 - a bug or a broken install in the grader
            return judge_error(
                test, f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc))
            )
        return TestResult.judged(test, fraction)
    prefix = ""
    if cell_error is not None:
        prefix = f"{cell_failed(test.piece)}{cell_error.text}. "
    if raw is None:
        return TestResult.failed(test, prefix + "the test did not run", Kind.ERROR)
    if named is None:
        return TestResult.failed(test, prefix + str(raw.error), raw.kind or Kind.ERROR)
    # the sentence names the mistake; the fixed hint is about others
    return TestResult.failed(
        test, f"{prefix}{named} (Your code raised {raw.error})", Kind.ERROR, mistake=True
    )


def failure_text(exc: BaseException) -> str:
    """What a judge's :class:`TestFailure` or ``AssertionError`` says."""
    return getattr(exc, "message", None) or str(exc) or type(exc).__name__


def failed_judgement(test: Test, exc: BaseException) -> TestResult:
    """The result of a judge that raised :class:`TestFailure` or ``AssertionError``."""
    return failed_message(test, failure_text(exc), isinstance(exc, Mistake))


def failed_message(test: Test, message: str, mistake: bool) -> TestResult:
    """A failed test with the judge's message; a named mistake drops the fixed hint."""
    return TestResult.failed(test, message, Kind.FAILED, mistake=mistake)


def hold_diagnoses(results: list[TestResult]) -> None:
    """A diagnosis holds for the whole piece: once one of a piece's tests names the
    student's mistake, the piece's other failed tests that name none do not print their
    fixed hints (about other mistakes: Lab 1's masked attention tests would point at the
    mask when the scale is wrong) but say that the named mistake may be why they fail.
    A test that names a mistake of its own keeps it. Changes ``results`` in place."""
    named = {}
    for r in results:
        if r.mistake and not r.passed:
            named.setdefault(r.piece, r.name)
    for r in results:
        first = named.get(r.piece)
        if first is None or r.passed or r.mistake or r.kind not in (Kind.FAILED, Kind.ERROR):
            continue
        r.hint = ""
        r.message = (
            f"{r.message} (the mistake named in {first} may be why this test fails "
            "too: fix that one first)"
        )


def judge_error(test: Test, what: str, detail: str) -> TestResult:
    """A judge that failed (the grader's error, not the student's)."""
    return TestResult.failed(
        test, f"the judge failed: {what}", Kind.GRADER_ERROR, detail=detail[-4000:]
    )


def judged(test: Test, fraction: float) -> TestResult:
    """The result of a judge that gave ``fraction`` of the points."""
    return TestResult.judged(test, fraction)
