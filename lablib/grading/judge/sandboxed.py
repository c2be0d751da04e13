"""Judges that rebuild or run what a submission described, in a sandboxed process.

Some judges do more than compare numbers: the graph labs' model tests rebuild the
student's Keras model from the architecture and weights its process reported and run it
(:mod:`lablib.grading.specs._model_checks`). What gets built is the student's choice, so
that work never runs in the grader's own process: such a judge calls
:func:`~lablib.grading.spec.sandbox_only`, :func:`~lablib.grading.judge.tests.judge_test`
stops it there, and :func:`judge_in_sandbox` runs every such judge of one submission
again, in one fresh process started like the student's (the same sandbox, memory limit,
cgroup, time limit per test and total budget: :func:`lablib.grading.run.run_submission`),
which runs none of the student's code. A judge that runs out of memory or time there
fails its test with that kind (``memory``, ``timeout``), as a graded cell would; the
grader's own memory does not move.
"""

from __future__ import annotations

import sys
import traceback

from lablib.grading.expect import Mistake, TestFailure
from lablib.grading.judge.tests import failed_message, judge_error, judged
from lablib.grading.results import Kind, TestResult
from lablib.grading.run import Limits, ProbeRequest, run_submission

__all__ = ["judge_in_sandbox"]


class _JudgeCall:
    """The probe run in the judging process: one judge on the values the student's
    process reported. Returns what became of it as plain values (a judge's exception
    cannot travel back as itself)."""

    def __init__(self, judge, value):
        self.judge = judge
        self.value = value

    def __call__(self, ns):
        try:
            returned = self.judge(self.value)
        except (TestFailure, AssertionError) as exc:
            message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            return {"failed": message, "mistake": isinstance(exc, Mistake)}
        except MemoryError:  # the limit, reported as such by the process (kind memory)
            raise
        except Exception as exc:  # noqa: BLE001 - the judge's bug, reported as such
            return {"error": f"{type(exc).__name__}: {exc}",
                    "detail": "".join(traceback.format_exception(exc))[-4000:]}
        if returned is None or returned is True:
            return {"returned": None}
        return {"returned": returned if type(returned) in (int, float) else repr(returned)[:200]}


def _by_value(judge) -> None:
    """A judge from a module the sandboxed process cannot import (hidden tests, a spec
    given by path: masked there) travels by value, as their probes do."""
    import cloudpickle

    name = getattr(judge, "__module__", None) or ""
    module = sys.modules.get(name)
    if module is not None and name != "__main__" and name.split(".")[0] != "lablib":
        try:
            cloudpickle.register_pickle_by_value(module)
        except ValueError:
            pass


def _result(test, reply) -> TestResult:
    if not reply.ok:  # the judging process ran out of time or memory, or crashed
        kind = reply.kind if reply.kind in (Kind.TIMEOUT, Kind.MEMORY) else Kind.CRASHED
        what = str(reply.error).removeprefix("this test ")
        return TestResult.failed(
            test, f"judging this test rebuilds and runs your model in a sandboxed process, "
                  f"and that {what}", kind)
    value = reply.value if isinstance(reply.value, dict) else {}
    if "failed" in value:
        return failed_message(test, str(value["failed"]), bool(value.get("mistake")))
    if "error" in value or "returned" not in value:
        return judge_error(test, str(value.get("error", "the sandboxed judge sent no result")),
                           str(value.get("detail", "")))
    try:
        return judged(test, test.fraction(value["returned"]))
    except TypeError as exc:
        return judge_error(test, str(exc), "")


def judge_in_sandbox(pending, *, limits: Limits = Limits(), mask=()) -> tuple[dict, float]:
    """Run the judges of ``pending`` in one sandboxed process.

    Args:
        pending: ``(test, raw)`` pairs: a test whose judge called
            :func:`~lablib.grading.spec.sandbox_only` in the grader, and the
            :class:`~lablib.grading.run.ProbeResult` (ok) its probe returned.
        limits: the submission's :class:`~lablib.grading.run.Limits`.
        mask: paths the process must not see (as for the student's process).

    Returns:
        ``(results, seconds)``: ``{test id: TestResult}`` for every pending test, and the
        seconds the judging process took.
    """
    requests = []
    for test, raw in pending:
        judge = test.judge_fn
        _by_value(judge)
        requests.append(ProbeRequest(test.id, _JudgeCall(judge, raw.value), (), test.timeout))
    outcome = run_submission([], [], requests, limits=limits, mask=mask)
    return ({test.id: _result(test, outcome.results[test.id]) for test, _ in pending},
            outcome.seconds)
