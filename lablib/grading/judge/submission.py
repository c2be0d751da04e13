"""Judge one submission: every test, the status, the notes and the diagnostics.

:func:`judge_submission` takes what the run stage produced (a
:class:`~lablib.grading.run.RunOutcome`) and the graded cells the notebook had, judges
every test of the lab and sums the points (:func:`summarise`). A notebook that could not
be read at all is judged by :func:`unreadable`.
"""

from __future__ import annotations

from lablib.grading.judge.tests import hold_diagnoses, judge_test
from lablib.grading.results import (
    Diagnostic,
    Kind,
    PieceScore,
    Status,
    SubmissionResult,
    TestResult,
)
from lablib.grading.labspec.model import LabSpec
from lablib.session import NOT_DONE

#: Ends a result's note where the result must be graded again next time (never cached).
NOT_CACHED = "this result is not cached"

__all__ = ["judge_submission", "summarise", "unreadable"]


def summarise(
    lab: LabSpec, name: str, path: str, results: list[TestResult], status: Status, **extra
) -> SubmissionResult:
    """A :class:`SubmissionResult` (per-piece sums in the lab's order, totals) of judged tests."""
    sums = {p: [0.0, 0.0] for p in lab.pieces}
    for r in results:
        entry = sums.setdefault(r.piece, [0.0, 0.0])
        entry[0] += r.score
        entry[1] += r.max_score
    pieces = {p: PieceScore(round(s, 6), round(m, 6)) for p, (s, m) in sums.items()}
    score = round(sum(r.score for r in results), 6)
    max_score = round(sum(r.max_score for r in results), 6)
    return SubmissionResult(name, path, status, score, max_score, pieces, results, **extra)


def unreadable(
    lab: LabSpec, name: str, path: str, reason: str, kind: Kind = Kind.INVALID_NOTEBOOK
) -> SubmissionResult:
    """The result of a notebook that could not be read: every test 0, ``invalid-notebook``
    (or ``kind``: ``grader-error`` where the grader could not read what it listed), the
    reason said once (in the notes), not once per test."""
    results = [
        TestResult.failed(
            t, "not graded: the notebook could not be read (the reason is in the note)", kind
        )
        for t in lab.tests
    ]
    label = "invalid notebook" if kind == Kind.INVALID_NOTEBOOK else "grader error"
    return summarise(lab, name, path, results, Status.of([kind]), notes=[f"{label}: {reason}"])


def _one_reason_for_stubs(results: list[TestResult]) -> None:
    """A piece still the blank lab's stub fails each of its tests for one reason: every
    failed test of it says "not done yet", not a symptom of its own ("expected a
    ValueError, got NotImplementedError" from a test that calls it with bad input)."""
    reasons = {r.piece: r.message for r in results if r.message.startswith(NOT_DONE)}
    for r in results:
        if r.piece in reasons and not r.passed:
            r.message = reasons[r.piece]


def _raised(lab: LabSpec, cell_errors) -> dict:
    """The graded cells that raised (an error, not a time, memory or crash limit, which
    are problems of their own), piece -> :class:`CellError`, in the lab's order; a blank
    lab's stub is "not done yet", not an error."""
    return {
        piece: cell_errors[piece]
        for piece in lab.pieces
        if piece in cell_errors
        and cell_errors[piece].kind == Kind.ERROR
        and not cell_errors[piece].text.startswith(NOT_DONE)
    }


def judge_submission(
    lab: LabSpec, name: str, path: str, found, outcome, notes=(), sandbox=None, budget=None
) -> SubmissionResult:
    # Over 80 lines for its docstring: the status rules, every argument; code: 69 lines.
    """Judge every test of ``lab`` for one submission.

    Args:
        lab: the :class:`LabSpec`.
        name, path: the submission's name in the gradebook and its notebook.
        found: the graded cells the notebook has (piece -> cell); a piece without a cell
            scores 0 as ``missing``.
        outcome: the :class:`~lablib.grading.run.RunOutcome` of its run.
        notes: what reading the notebook noticed.
        budget: the submission's total seconds (``Limits.total_seconds``): the sandboxed
            judges get what the student's run left of it.
        sandbox: ``sandbox(pending, seconds_left=...) -> (results, seconds)`` (:func:`.sandboxed.judge_in_sandbox`
            with the submission's limits): judges run in the grader's own process, and
            those that would rebuild or run a submitted model run through it. None: every
            judge runs here, unrestricted (a check in the student's own notebook).

    Returns:
        The :class:`SubmissionResult`; its status lists the run's problems, a judge that
        failed (``grader-error``: such a result is not cached), the graded cells that
        raised (``error``, with the exception's name) and the missing cells.
    """
    missing = [p for p in lab.pieces if p not in found]
    results, pending = [], []
    for t in lab.tests:
        if t.piece not in found:
            results.append(
                TestResult.failed(
                    t,
                    f"no cell starts with `# GRADED: {t.piece}`; restore the graded cell from the lab",
                    Kind.MISSING,
                )
            )
        else:
            raw = outcome.results.get(t.id)
            result = judge_test(
                t, raw, outcome.cell_errors.get(t.piece), in_grader=sandbox is not None
            )
            if result is None:
                pending.append((len(results), t, raw))
            results.append(result)
    seconds = outcome.seconds
    if pending:
        judged, took = sandbox(
            [(t, raw) for _, t, raw in pending],
            seconds_left=None if budget is None else budget - outcome.student_seconds,
        )
        seconds += took
        for index, t, _ in pending:
            results[index] = judged[t.id]
    _one_reason_for_stubs(results)
    hold_diagnoses(results)
    notes = list(notes)
    problems = [p.kind for p in outcome.problems]
    limited = [
        (results[i].kind, t.id)
        for i, t, _ in pending
        if results[i].kind in (Kind.TIMEOUT, Kind.MEMORY, Kind.CRASHED)
    ]
    problems += [kind for kind, _ in limited]
    if any(r.kind == Kind.GRADER_ERROR for r in results):
        problems.append(Kind.GRADER_ERROR)
        notes.append(f"grader-error: a judge failed (see diagnostics); {NOT_CACHED}")
    notes += [f"{p.kind}: {p.where}" for p in outcome.problems]
    if any(p.where in ("startup", "set-up") for p in outcome.problems):
        notes.append(  # the grader's environment (a load, a data folder), never the student's code
            f"the run stopped before the submission's code ran (the process's start or the lab's "
            f"set-up cells); {NOT_CACHED}"
        )
    notes += [
        f"{kind}: judging test {test_id} (the model, rebuilt in a sandboxed process)"
        for kind, test_id in limited
    ]
    raised = _raised(lab, outcome.cell_errors)
    # What raised, said once: its tests may all pass (the line that failed came after
    # what they use), and then no test message quotes it.
    notes += [f"graded cell {piece} raised {error.text}" for piece, error in raised.items()]
    diagnostics = list(outcome.diagnostics)
    diagnostics += [
        Diagnostic(ended=Kind.GRADER_ERROR.value, test=r.id, detail=r.detail)
        for r in results
        if r.kind == Kind.GRADER_ERROR
    ]
    labels = [f"{piece} ({error.exception or 'an exception'})" for piece, error in raised.items()]
    return summarise(
        lab,
        name,
        path,
        results,
        Status.of(problems, missing, labels),
        notes=notes,
        output=outcome.output,
        isolation=outcome.isolation,
        diagnostics=diagnostics,
        seconds=round(seconds, 3),
    )
