"""Tests declared as data: one probe and one judge serve a table of cases.

A lab whose tests differ only in their inputs and wording writes the probe and the judge
once, with the case's values as arguments, and lists the cases as rows;
:func:`add_case_tests` declares one test per row, in the rows' order.
"""

from __future__ import annotations


def add_case_tests(lab, piece, probe, judge, cases):
    """Declare one test of ``piece`` on ``lab`` per row of ``cases``.

    Each row is ``(name, points, hint, args, wording)``: the test ``name``, worth
    ``points`` and with ``hint``, runs ``probe(ns, *args)`` in the student's process and
    ``judge(got, *args, *wording)`` in the grader's (``wording``: what the judge's
    messages call the case).
    """
    for name, points, hint, args, wording in cases:
        test = lab.test(piece, points=points, hint=hint, name=name)
        test(_case_probe(probe, args)).judge(_case_judge(judge, (*args, *wording)))


def _case_probe(probe, args):
    def case_probe(ns):
        return probe(ns, *args)

    # A test belongs to the module that defines its probe (a hidden test module's tests
    # are hidden), not to this helper's.
    case_probe.__module__ = probe.__module__
    return case_probe


def _case_judge(judge, args):
    def case_judge(got):
        return judge(got, *args)

    # Sent to a sandboxed process, the judge takes its module by value when the sandbox
    # cannot import it (hidden tests, a spec file given by path), as the probe does.
    case_judge.__module__ = judge.__module__
    return case_judge
