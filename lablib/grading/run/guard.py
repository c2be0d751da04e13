"""Cribs: a graded piece the lab asks students to write by hand must not be passed by
calling lablib's own implementation of it, or a judge's reference.

Students install lablib, so ``lablib.layers.scaled_dot_product_attention`` or
``lablib.grading.specs.lab3_gcn_molecules.reference_gcn`` are importable from their
cells; wrapping them scored points. While the child runs a probe of such a
piece, :class:`Watch` (a ``sys.setprofile`` hook) notes the first call into a guarded part
of lablib that enters it from outside lablib with a graded cell on the stack: the
student's code reached it, directly or through a helper of theirs. The probe then fails
with one sentence naming what was called (:func:`message`). Probes calling lablib's
helpers themselves (the judges', the hidden tests') are not calls from a graded cell, and
a function a probe hands to the student's code as an input is named ``handed_*``.
Pieces that build models with lablib's layers (the labs' ``build_*`` pieces) are not
guarded (:attr:`lablib.grading.spec.Piece.by_hand`).
"""

from __future__ import annotations

import os
import sys

__all__ = ["BY_HAND", "HANDED_PREFIX", "Watch", "borrowed", "code_files", "message", "run_watched"]

#: What a by-hand piece's code may not call, relative to lablib's package folder: its
#: layers and the grader (the judges' references among them). lablib's graph utilities
#: (``lablib.graphs``: edge lists to matrices and back) stay allowed: they implement no
#: graded piece.
BY_HAND = ("layers" + os.sep, "grading" + os.sep)

#: The name that marks a spec's function the probes hand to the student's code as an
#: input (Lab 1's ``equivariance_gap(attention_fn, ...)`` receives an attention function,
#: Lab 3's layers an activation): calling those is what the piece asks for. A naming rule,
#: so that specs (below this module) import nothing from here.
HANDED_PREFIX = "handed_"

_GRADED = "<graded cell "


def _package_dirs() -> tuple[str, ...]:
    """lablib's folder as its modules' code names it: as imported (this file's path, three
    levels up) and resolved (links followed), which differ where lablib lies behind a link."""
    from lablib._version import PACKAGE_DIR

    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return tuple(dict.fromkeys((here + os.sep, os.path.abspath(str(PACKAGE_DIR)) + os.sep)))


class Watch:
    """``with Watch(BY_HAND) as watch: ...``; afterwards ``watch.found`` is the dotted name
    of the first guarded function student code called, or None.

    Student code is a graded cell as the grader's child runs it (``<graded cell ...>``),
    and, for ``lablib.check`` in a notebook, the files (notebook cells) that define the
    objects being checked: ``student_files``.
    """

    def __init__(self, guarded, student_files=()):
        self.roots = _package_dirs()
        self.guarded = tuple(root + part for root in self.roots for part in guarded)
        self.student = (_GRADED, *(f for f in student_files if f and not f.startswith(self.roots)))
        self.found: str | None = None
        self._previous = None

    def _profile(self, frame, event, arg):
        if event != "call" or self.found is not None:
            return
        code = frame.f_code
        if not code.co_filename.startswith(self.guarded) or code.co_name.startswith(HANDED_PREFIX):
            return
        caller = frame.f_back
        if caller is None or caller.f_code.co_filename.startswith(self.roots):
            return  # lablib calling itself
        while caller is not None:
            if caller.f_code.co_filename.startswith(self.student):
                module = frame.f_globals.get("__name__", "?")
                self.found = f"{module}.{getattr(frame.f_code, 'co_qualname', frame.f_code.co_name)}"
                return
            caller = caller.f_back

    def __enter__(self):
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._previous)
        return False


def _functions(obj):
    """The plain functions behind ``obj``: itself (unwrapped) or, for a class, every
    method, static/class method and property of it and of its bases."""
    import inspect

    if isinstance(obj, type):
        members = [v for klass in inspect.getmro(obj) if klass is not object
                   for v in vars(klass).values()]
    else:
        members = [obj]
    found = []
    for member in members:
        if isinstance(member, property):
            found += [f for f in (member.fget, member.fset, member.fdel) if f is not None]
            continue
        member = getattr(member, "__func__", member)  # staticmethod, classmethod, bound method
        if callable(member):
            try:
                member = inspect.unwrap(member)
            except ValueError:
                pass
            if getattr(member, "__code__", None) is not None:
                found.append(member)
    return found


def code_files(objects) -> tuple[str, ...]:
    """The source files of ``objects``' code: a function's, a class's methods' (its
    bases' included), unwrapped (what ``lablib.check`` hands to :class:`Watch` as the
    student's code)."""
    return tuple(dict.fromkeys(f.__code__.co_filename for obj in objects for f in _functions(obj)))


def borrowed(objects: dict, guarded) -> str | None:
    """The dotted name of lablib's guarded code that a graded name *is* (bound to it, or
    a class built on it), e.g. ``readout = reference_readout``, or None. The probe then
    calls lablib itself, which :class:`Watch` cannot tell from lablib's own calls.

    A function is judged by the file of its code, a class by the modules of it and its
    bases (a class defined in a graded cell names the child's ``__main__``, whose file
    is lablib's own: files would mislead there).
    """
    parts = tuple(root + part for root in _package_dirs() for part in guarded)
    modules = tuple("lablib." + part.rstrip(os.sep).replace(os.sep, ".") + "." for part in guarded)
    for obj in objects.values():
        try:
            found = _lablib_code(obj, parts, modules)
        except Exception:  # noqa: BLE001 - a hostile object's attributes: not lablib's code
            found = None
        if found is not None:
            return found
    return None


def _lablib_code(obj, parts, modules) -> str | None:
    """:func:`borrowed` for one object."""
    import inspect

    if isinstance(obj, type):
        for klass in inspect.getmro(obj):
            if (klass.__module__ + ".").startswith(modules):
                return f"{klass.__module__}.{klass.__qualname__}"
        return None
    function = getattr(obj, "__func__", obj)
    try:
        function = inspect.unwrap(function)
    except ValueError:
        pass
    code = getattr(function, "__code__", None)
    if code is not None and os.path.abspath(code.co_filename).startswith(parts):
        return f"{function.__module__}.{getattr(function, '__qualname__', function.__name__)}"
    return None


def run_watched(run, guard, objects: dict, student_files=()):
    """``run()`` under the crib guard ``guard`` (empty: no guard): ``(value, None)``, or
    ``(value or None, found)`` with the dotted name of the lablib code a graded name is
    (:func:`borrowed`, and then ``run`` is not called) or the student's code called
    (:class:`Watch`). The grader's child and ``lablib.check`` both run probes this way."""
    if not guard:
        return run(), None
    found = borrowed(objects, guard)
    if found is not None:
        return None, found
    with Watch(guard, student_files) as watch:
        value = run()
    return value, watch.found


def message(found: str) -> str:
    """The failure a cribbed probe gets."""
    what = "the grader's own reference" if ".grading." in f".{found}" else "lablib's own implementation"
    return (f"your code calls {found}, {what}; this piece asks you to write it yourself "
            f"(NumPy or Keras operations), so this test gives no points for it.")
