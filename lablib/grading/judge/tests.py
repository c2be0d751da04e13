"""Judge one test: the plain values its probe returned, in the grading process.

The probe ran in the student's process; here, in the grader's own process, each test's
judge compares the plain values it returned with the expected ones. Nothing the student
defined (a patched ``np.allclose``, an object whose ``==`` is always true) exists here.
"""

from __future__ import annotations

import threading
import traceback

from lablib.grading.results import Kind, TestResult
from lablib.grading.expect import Mistake
from lablib.backend import full_float32
from lablib.grading.spec import Test, TestFailure

__all__ = ["judge_test"]

# Judges may import TensorFlow or Keras on first use; two grader threads doing that at
# once deadlock or half-register TensorFlow's ops. Judging is cheap: one at a time.
_JUDGE_LOCK = threading.Lock()


def judge_test(test: Test, raw, cell_error=None) -> TestResult:
    """Judge one test from what its probe returned.

    Args:
        test: the test (with its judge or ``expected``).
        raw: a :class:`~lablib.grading.run.ProbeResult`; None when the test did not run.
        cell_error: a :class:`~lablib.grading.run.CellError` when the piece's graded
            cell failed to run.

    Returns:
        :class:`~lablib.grading.results.TestResult`. A judge that raises anything but
        :class:`TestFailure` or ``AssertionError`` is the grader's error (kind
        ``grader-error``), never a failure of the student's.

    Example::

        judge_test(test, ProbeResult(True, 4.0)).score
    """
    prefix = ""
    if cell_error is not None:
        prefix = f"your graded cell `{test.piece}` failed: {cell_error.text}. "
    if raw is None:
        return TestResult.failed(test, prefix + "the test did not run", Kind.ERROR)
    if not raw.ok:
        return TestResult.failed(test, prefix + str(raw.error), raw.kind or Kind.ERROR)
    try:
        with _JUDGE_LOCK, full_float32():  # Keras references exact on TF32 GPUs too
            fraction = test.run_judge(raw.value)
    except (TestFailure, AssertionError) as exc:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        result = TestResult.failed(test, message, Kind.FAILED)
        if isinstance(exc, Mistake):
            result.hint = ""  # the message names the mistake; the fixed hint is about others
        return result
    except Exception as exc:  # noqa: BLE001 - a bug or a broken install in the grader
        result = TestResult.failed(test, f"the judge failed: {type(exc).__name__}: {exc}", Kind.GRADER_ERROR)
        result.detail = "".join(traceback.format_exception(exc))[-4000:]
        return result
    score = round(test.points * fraction, 6)
    passed = fraction >= 1.0
    message = "" if passed else f"partial credit: {fraction:.0%} of the points"
    return TestResult(test.id, test.piece, test.name, score, test.points, passed, test.hidden,
                      message, test.hint, Kind.PASSED if passed else Kind.FAILED)
