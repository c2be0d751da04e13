"""Judging: plain values from the run -> test results -> a submission's result.

* :mod:`.tests` - one test: its judge on the probe's plain values (:func:`judge_test`).
* :mod:`.sandboxed` - the judges that rebuild or run a model the submission described,
  in a sandboxed process with the submission's limits (:func:`judge_in_sandbox`).
* :mod:`.submission` - one submission: every test judged, the status, the notes and the
  instructor's diagnostics from the run (:func:`judge_submission`, :func:`summarise`).

Judges run in the grader's own process, where nothing the student defined exists,
except those that would build something the student described: they run sandboxed.
"""

from lablib.grading.judge.sandboxed import judge_in_sandbox
from lablib.grading.judge.submission import judge_submission, summarise, unreadable
from lablib.grading.judge.tests import judge_test

__all__ = ["judge_test", "judge_in_sandbox", "judge_submission", "summarise", "unreadable"]
