"""lablib: Keras layers, datasets and an autograder for a course on Transformers and GNNs.

Importing ``lablib`` does not import TensorFlow, so a notebook's first cell can choose
the Keras mode::

    import lablib
    lablib.use_legacy_keras()   # or lablib.use_keras3()

Sub-packages (imported on first use): ``lablib.layers``, ``lablib.data``,
``lablib.graphs``, ``lablib.grading``.
"""

from lablib._deprecation import LablibDeprecationWarning
from lablib._version import __version__
from lablib.backend import (
    KerasModeError,
    exact_float32,
    is_legacy,
    keras_mode,
    use_keras3,
    use_legacy_keras,
)

__all__ = [
    "KerasModeError",
    "__version__",
    "LablibDeprecationWarning",
    "check",
    "exact_float32",
    "fast_mode",
    "is_legacy",
    "keras_mode",
    "use_keras3",
    "use_legacy_keras",
]


def fast_mode() -> bool:
    """True when ``LABLIB_FAST=1``: notebooks shrink data and epochs (used by CI)."""
    import os

    return os.environ.get("LABLIB_FAST", "").strip().lower() in {"1", "true", "yes", "on"}


def check(lab, piece, *objects, **named):
    """Run the public checks of one graded piece inside a notebook and print a report.

    Example: ``lablib.check("lab1", "attention", attention)``. See
    :func:`lablib.grading.check.check`.
    """
    from lablib.grading.check import check as _check

    return _check(lab, piece, *objects, **named)


def __getattr__(name):
    import importlib

    if name in {"layers", "data", "graphs", "grading", "backend", "labs", "install"}:
        return importlib.import_module(f"lablib.{name}")
    raise AttributeError(f"module 'lablib' has no attribute {name!r}")
