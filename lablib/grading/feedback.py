"""What a student may see of one test's result: the one rule every report follows.

Students see a public test's message and hint. Of a hidden test they see its name, its
points and a reason that reveals nothing of its inputs or expected values: that it ran
past the time limit, ran out of memory, crashed, that its graded cell is missing, or
that its details are not shown. A failure inside the grader itself is never presented as
the student's mistake. Used by the feedback files (:mod:`.report`), Gradescope's
results (:mod:`.gradescope`) and, for public tests, ``lablib.check``.
"""

from __future__ import annotations

__all__ = ["verdict", "student_detail", "HIDDEN_REASONS", "GRADER_ERROR_MESSAGE"]

HIDDEN_REASONS = {
    "timeout": "it ran past the time limit",
    "memory": "it ran out of memory",
    "crashed": "it crashed",
    "missing": "the graded cell is missing",
    "invalid-notebook": "the notebook could not be read",
}
GRADER_ERROR_MESSAGE = ("the grader could not judge this test: an error in the grader, not in "
                        "your code. Your instructor sees the details and will re-grade it.")


def verdict(test) -> str:
    """``passed``, ``partial`` or ``failed``."""
    return "passed" if test.passed else ("partial" if test.score > 0 else "failed")


def student_detail(test, *, with_hint: bool = True) -> str:
    """The text a student sees for ``test`` (a :class:`~lablib.grading.judge.TestResult`):
    empty when it passed."""
    if test.passed:
        return ""
    if test.kind == "grader-error":
        return GRADER_ERROR_MESSAGE
    if test.hidden:
        return f"hidden test: {HIDDEN_REASONS.get(test.kind, 'details are not shown')}"
    text = test.message
    if with_hint and test.hint:
        text += f"\nHint: {test.hint}"
    return text
