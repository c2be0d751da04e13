"""The class gradebook: its one owner.

=========================  ===========================================================
``book.py``                :class:`Gradebook` and :class:`Row`: the rows, each row's
                           written scores, lateness and total, computed once
``store.py``               :class:`GradebookFolder`: the stored gradebook of an output
                           folder (``grades.json``, with what regrades keep, and the
                           roster's copy), read and written atomically, there only
``roster.py``              the class list (each LMS's export layout) and times files
``identity.py``            which submission is whose, resolved once at grading, and
                           when it was submitted
``late.py``                due dates, late policies and each submission's penalty
``similarity.py``          similarity hints: near-identical graded code, identical files
=========================  ===========================================================

The report writers (:mod:`lablib.grading.report`) read a :class:`Gradebook` and only
write; nothing reads a report back to learn the gradebook's state.
"""

from lablib.grading.gradebook.book import Gradebook, Row, feedback_stems
from lablib.grading.gradebook.store import GradebookError, GradebookFolder

__all__ = ["Gradebook", "Row", "GradebookFolder", "GradebookError", "feedback_stems"]
