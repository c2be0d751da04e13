"""Running a submission: the wire (:mod:`.protocol`), the submission's process
(:mod:`.child`), the root-only sandbox stage (:mod:`.isolation`) and the grader's side
(:mod:`.supervisor`). Knows nothing of specs, judges or reports; how a request ended is a
:class:`~lablib.grading.results.Kind`.

Names resolve on first use, so ``python -m lablib.grading.run.child`` (and
``.isolation``) start without importing the grader's side.
"""

from lablib._lazy import lazy_exports

_MODULES = {
    "protocol": ("ProbeRequest", "ProbeResult"),
    "supervisor": ("Limits", "RunOutcome", "CellError", "Problem", "run_submission"),
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _MODULES, globals())
