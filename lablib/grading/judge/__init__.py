"""Judging: plain values from the run -> test results -> a submission's result.

* :mod:`.tests` - one test: its judge on the probe's plain values (:func:`judge_test`).
* :mod:`.submission` - one submission: every test judged, the status, the notes and the
  instructor's diagnostics from the run (:func:`judge_submission`, :func:`summarise`).

Judges run in the grader's own process: nothing the student defined exists here.
"""

from lablib.grading.judge.submission import judge_submission, summarise, unreadable
from lablib.grading.judge.tests import judge_test

__all__ = ["judge_test", "judge_submission", "summarise", "unreadable"]
