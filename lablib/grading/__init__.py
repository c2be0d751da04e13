"""The autograder: it runs students' notebooks in a child process (sandboxed when the
grader is root), judges the plain values their probes return in its own process, and
keeps the class gradebook, the reports and the LMS imports (``lablib grade``,
``review``, ``report``, ``export``, ``gradescope``, and ``lablib.check`` in the
notebook).

Its modules are arranged in floors, each importing only from the floors below it; the
map of every module and floor is docs/development/layout.md. See
:mod:`lablib.grading.spec` for how tests are written.
"""
