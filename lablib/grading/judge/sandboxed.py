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

import dataclasses
import sys
import traceback

from lablib.grading.expect import Mistake, TestFailure
from lablib.grading.judge.tests import failed_message, failure_text, judge_error, judged
from lablib.grading.results import Kind, TestResult
from lablib.grading.run import Limits, ProbeRequest, run_submission
from lablib.grading.labspec.model import HIDDEN_NAMESPACE

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
            return {"failed": failure_text(exc), "mistake": isinstance(exc, Mistake)}
        except MemoryError:  # the limit, reported as such by the process (kind memory)
            raise
        except Exception as exc:  # noqa: BLE001 - the judge's bug, reported as such
            return {
                "error": f"{type(exc).__name__}: {exc}",
                "detail": "".join(traceback.format_exception(exc))[-4000:],
            }
        if returned is None or returned is True:
            return {"returned": None}
        return {"returned": returned if type(returned) in (int, float) else repr(returned)[:200]}


def _by_value(judge) -> None:
    """A judge from a module the sandboxed process cannot import (hidden tests, a spec
    given by path: masked or unknown there) travels by value, as their probes do. Only
    such modules are registered: an installed or standard module is imported there."""
    import functools

    import cloudpickle

    while isinstance(judge, functools.partial):
        judge = judge.func
    name = getattr(judge, "__module__", None) or ""
    if name.startswith((HIDDEN_NAMESPACE, "lablib_lab_files")) and name in sys.modules:
        try:
            cloudpickle.register_pickle_by_value(sys.modules[name])
        except ValueError:
            pass


def _unsendable(call) -> str | None:
    """Why ``call`` cannot travel to the judging process (None when it can)."""
    import cloudpickle

    try:
        cloudpickle.dumps(call)
    except Exception as exc:  # noqa: BLE001 - any pickling failure is the spec's bug
        return f"{type(exc).__name__}: {exc}"
    return None


def _result(test, reply, diagnostics: str) -> TestResult:
    error = str(reply.error)
    if not reply.ok and reply.kind in (Kind.TIMEOUT, Kind.MEMORY):  # what the model cost
        if error.startswith("not run: "):
            return TestResult.failed(
                test,
                f"judging this test (it rebuilds and runs your model in a sandboxed "
                f"process) did not run: {error.removeprefix('not run: ')}",
                reply.kind,
            )
        return TestResult.failed(
            test,
            f"judging this test rebuilds and runs your model in a sandboxed process, "
            f"and that {error.removeprefix('this test ')}",
            reply.kind,
        )
    if not reply.ok:  # no code of the student's runs there: the grader's problem
        return judge_error(test, f"the sandboxed judging process failed ({error})", diagnostics)
    value = reply.value if isinstance(reply.value, dict) else {}
    if "failed" in value:
        return failed_message(test, str(value["failed"]), bool(value.get("mistake")))
    if "error" in value or "returned" not in value:
        return judge_error(
            test,
            str(value.get("error", "the sandboxed judge sent no result")),
            str(value.get("detail", "")),
        )
    try:
        return judged(test, test.fraction(value["returned"]))
    except TypeError as exc:
        return judge_error(test, str(exc), "")


def judge_in_sandbox(
    pending, *, limits: Limits = Limits(), mask=(), seconds_left=None
) -> tuple[dict, float]:
    """Run the judges of ``pending`` in one sandboxed process.

    Args:
        pending: ``(test, raw)`` pairs: a test whose judge called
            :func:`~lablib.grading.spec.sandbox_only` in the grader, and the
            :class:`~lablib.grading.run.ProbeResult` (ok) its probe returned.
        limits: the submission's :class:`~lablib.grading.run.Limits`.
        mask: paths the process must not see (as for the student's process).
        seconds_left: what is left of the submission's total time budget (None: all
            of it): the judges' time counts in that budget too.

    Returns:
        ``(results, seconds)``: ``{test id: TestResult}`` for every pending test, and the
        seconds the judging process took. A judge that cannot be sent there, or a
        judging process that fails for another reason than its time or memory, gives
        that test ``grader-error`` (not cached; the instructor sees the detail).
    """
    results, requests = {}, []
    for test, raw in pending:
        _by_value(test.judge_fn)
        call = _JudgeCall(test.judge_fn, raw.value)
        why = _unsendable(call)
        if why is not None:
            results[test.id] = judge_error(
                test, f"the judge could not be sent to the sandboxed judging process ({why})", ""
            )
            continue
        requests.append(ProbeRequest(test.id, call, (), test.timeout))
    if not requests:
        return results, 0.0
    if seconds_left is not None:
        limits = dataclasses.replace(limits, total=max(0.0, seconds_left))
    outcome = run_submission([], [], requests, limits=limits, mask=mask)
    diagnostics = "\n".join(
        f"{d.ended} while running {d.running}: {d.detail} ({d.exit}); "
        f"output: {d.output_tail[-1500:]}"
        for d in outcome.diagnostics
    )
    for test, _ in pending:
        if test.id not in results:
            results[test.id] = _result(test, outcome.results[test.id], diagnostics)
    return results, outcome.seconds
