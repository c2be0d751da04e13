"""Written answers graded by people: the store of their grades and the review page.

=====================  ================================================================
``store.py``           the people's grades in SQLite (``<out>/reviews.sqlite``): rubric
                       items, which apply to which answer, comments, a log of changes
``render.py``          a student's markdown and LaTeX as HTML (MathML), an allowlist
                       sanitiser (nh3) after every step, long answers bounded
``server.py``          ``lablib review``: the local page that grades one question across
                       the class, behind a per-run token (``page/`` holds its HTML,
                       script and style; answers in shadow roots under a strict CSP)
``printout.py``        ``lablib written``: a PDF of the written answers per student for
                       Gradescope's manual grading (sanitised HTML printed by headless
                       Chromium), the people's points as CSV, Gradescope's evaluations
                       export brought back into the store
=====================  ================================================================

The answers themselves are found in the notebooks when grading
(:func:`lablib.grading.notebook.written_answers`) and kept in ``grades.json``; the
gradebook's writers (:mod:`lablib.grading.report`) add the people's points to the totals.
"""
