"""The autograder: it runs students' notebooks in a child process (sandboxed when the
grader is root), judges the plain values their probes return in its own process, and
keeps the class gradebook, the reports and the LMS imports (``lablib grade``,
``review``, ``report``, ``export``, ``gradescope``, and ``lablib.check`` in the
notebook).

Its modules are arranged in floors, each importing only from the floors below it; the
map of every module and floor is docs/development/layout.md. See
:mod:`lablib.grading.spec` for how tests are written.
"""

from lablib._lazy import defer_import

# Reading a notebook imports nbformat, which imports jsonschema, whose format checkers
# import rfc3987_syntax where it is installed (jupyter-events, which Jupyter brings, asks
# for it): that module builds 39 Earley parsers as it is imported, about 2.5 s of CPU on
# a 2-core machine, in every grading, export or review process, for the "iri" format
# checks nbformat never makes. It is imported when first used instead.
defer_import("rfc3987_syntax", ("is_valid_syntax",))
