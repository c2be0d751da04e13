"""``lablib.check``: run the public tests of one graded piece inside the notebook.

Runs in the student's own process (Colab), so it is a help, not a grade: the grader
runs the same probes in a sandbox and judges outside it, plus hidden tests. The report
therefore never says "all passed" when hidden tests may exist.
"""

from __future__ import annotations

import dataclasses

from lablib.grading.judge import judge_test
from lablib.grading.judge.tests import hold_diagnoses
from lablib.grading.results import Kind, TestResult
from lablib.grading.run.child import run_probe
from lablib.grading.run.guard import BY_HAND
from lablib.grading.run.protocol import ProbeRequest, ProbeResult
from lablib.grading.labspec.registry import spec_of
from lablib.session import NOT_DONE

__all__ = ["check", "CheckResult"]


@dataclasses.dataclass
class CheckResult:
    """What :func:`check` found.

    Attributes:
        lab, piece: what was checked.
        results: one :class:`~lablib.grading.results.TestResult` per public test.
        passed: every public test passed.
        score, max_score: public points earned and available.
        hidden_tests: whether more tests run at grading.
    """

    lab: str
    piece: str
    results: list[TestResult]
    hidden_tests: bool = True
    #: True while the report :func:`check` printed is the last thing the student saw, so
    #: that the notebook does not show the result a second time as the cell's value.
    printed: bool = dataclasses.field(default=False, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        """Every public test of the piece passed."""
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def score(self) -> float:
        """Public points earned."""
        return round(sum(r.score for r in self.results), 6)

    @property
    def max_score(self) -> float:
        """Public points available."""
        return round(sum(r.max_score for r in self.results), 6)

    def summary(self) -> str:
        """The report text (what :func:`check` prints)."""
        lines = [f"{self.lab} / {self.piece}: public checks"]
        stub = next((r for r in self.results if r.message.startswith(NOT_DONE)), None)
        if stub is not None:  # the piece is still the blank lab's stub: one line, not a list
            lines.append(f"  {stub.message}")  # of failures and hints about code not written
            return "\n".join(lines)
        said = set()  # one mistake found by several tests is told once
        for r in self.results:
            mark = "PASS" if r.passed else "FAIL"
            lines.append(f"  [{mark}] {r.name} ({r.score:g}/{r.max_score:g} points)")
            if r.passed:
                continue
            if r.message in said:
                lines.append("         the same mistake as above")
                continue
            said.add(r.message)
            lines.append(f"         {r.message}")
            if r.hint:
                lines.append(f"         hint: {r.hint}")
        if not self.results:
            lines.append("  (this piece has no public checks)")
        elif self.passed and self.hidden_tests:
            lines.append("Public checks passed; more tests run at grading.")
        elif self.passed:
            lines.append("All checks passed.")
        else:
            failed = sum(not r.passed for r in self.results)
            lines.append(f"{failed} of {len(self.results)} public checks failed.")
        return "\n".join(lines)

    def _ipython_display_(self):
        """A check cell shows its report once: Jupyter displays a cell's last value, which
        is this result, right after :func:`check` printed the report. Displayed again
        later (``result`` alone in a cell), it prints the report."""
        if self.printed:
            self.printed = False
            return
        print(self.summary())

    def __repr__(self) -> str:
        return f"CheckResult({self.lab!r}, {self.piece!r}, passed={self.passed}, score={self.score:g}/{self.max_score:g})"


def check(lab, piece: str, *objects, quiet: bool = False, **named) -> CheckResult:
    """Run the public checks of ``piece`` on the given objects and print a report.

    Args:
        lab: the lab (``"lab1"`` or ``"lab1_attention"``, a spec file path, a
            :class:`lablib.labs.Lab` or a :class:`~lablib.grading.spec.LabSpec`).
        piece: the graded piece (the name after ``# GRADED:``).
        *objects: the piece's objects, in the order the lab declares them.
        quiet: do not print the report.
        **named: objects by name.

    Returns:
        :class:`CheckResult` (``.passed``, ``.score``).

    Example::

        lablib.check("lab1", "attention", attention)
    """
    spec = spec_of(lab)
    if piece not in spec.pieces:
        raise KeyError(
            f"Lab {spec.name!r} has no graded piece {piece!r}; expected one of {sorted(spec.pieces)}."
        )
    declared = spec.pieces[piece].objects
    if len(objects) > len(declared):
        raise TypeError(
            f"check({spec.name!r}, {piece!r}, ...) got {len(objects)} objects but the piece "
            f"declares {len(declared)}: {list(declared)}. Pass them in that order or by name."
        )
    ns = dict(zip(declared, objects))
    ns.update(named)
    missing = [name for name in declared if name not in ns]
    tests = spec.tests_for(piece, hidden=False)
    results: list[TestResult] = []
    for test in tests:
        # A piece written by hand gets the grader's crib guard here too, so a student
        # learns in the notebook, not from the grade, that calling lablib's own layer, the
        # grader's reference or a ready-made layer gives no points. The judge runs after
        # the probe's window has closed: it may use any reference.
        if missing:  # the test cannot run: the report says what to pass
            raw = ProbeResult.failed(Kind.ERROR, f"pass {', '.join(missing)} to check()")
        else:
            by_hand = BY_HAND if spec.pieces[piece].by_hand else ()
            raw = run_probe(
                ProbeRequest(test.id, test.probe, tuple(declared), test.timeout, by_hand), ns
            )
        results.append(judge_test(test, raw))
    hold_diagnoses(results)  # one named mistake explains the piece's other failures
    # Hidden tests are never in the student's lablib, so the report always says that
    # more tests may run at grading.
    result = CheckResult(spec.name, piece, results, hidden_tests=True)
    if not quiet:
        print(result.summary())
        result.printed = True
    return result
