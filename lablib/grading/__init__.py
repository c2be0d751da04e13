"""The autograder: lab specs, in-notebook checks, sandboxed runner, judge, reports.

See :mod:`lablib.grading.spec` for how tests are written.
"""
