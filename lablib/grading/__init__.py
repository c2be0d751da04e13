"""The autograder, in stages; each folder is one stage, and each stage imports only the
ones listed before it (docs/development/layout.md numbers them as floors).

=========================  ===========================================================
``results.py``             the values passed between stages: :class:`~.results.Kind`,
                           :class:`~.results.Status`, test and submission results
``notebook.py``            reading a notebook: normalise, find ``# GRADED:`` and
                           ``# SETUP`` cells
``lms.py``                 what Canvas, Moodle and Gradescope downloads say in their
                           names and metadata (user ids, LATE, submitters, times)
``run/``                   running a submission: the sandbox, the child process, the
                           wire, every limit (``run/ISOLATION.md``)
``spec.py``, ``expect.py`` how a lab's tests are written (probe + judge); ``specs/``
                           holds the shipped labs' tests (the labs: :mod:`lablib.labs`)
``submissions.py``         which notebooks a batch grades, and their names
``judge/``                 probe values -> test results -> a submission's result
``author/``                course authoring: blank labs from solutions, the released
                           labs' catalogue, the Gradescope zip and its wheel
``gradebook/``             the class gradebook's one owner: its rows, identities,
                           written scores, lateness and totals, stored atomically
                           (``grades.json``); the roster, late policy and similarity
                           hints beside it
``report/``                one writer per output format (gradebook, feedback,
                           instructor views, class summary, Gradescope's results.json)
``review/``                written answers graded by people: their grades in SQLite
                           and the review page (``lablib review``)
``grade.py``               the batch pipeline (``lablib grade``, ``lablib report``);
                           ``gradescope.py`` the same inside Gradescope; ``check.py``
                           the student's in-notebook check (``lablib.check``);
                           ``export.py`` the LMS import files of graded labs
                           (``lablib export``)
=========================  ===========================================================

See :mod:`lablib.grading.spec` for how tests are written.
"""
