"""Where a lab's tests come from: the specs loaded in this process, the shipped spec
files, a course's own spec file given by path, and the hidden tests of ``--tests``.

A lab is resolved once by the registry (:func:`lablib.labs.find_lab`) and its tests
loaded here (:func:`load_spec`); what a test *is* lives in :mod:`.model`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import pathlib
import sys

from lablib.grading.labspec.model import HIDDEN_NAMESPACE, LabSpec
from lablib.labs import Lab, UnknownLab, all_labs, find_lab, resolve_lab

__all__ = [
    "PUBLIC_TESTS_DIR",
    "get_lab",
    "known_labs",
    "load_lab",
    "load_spec",
    "loaded_spec",
    "spec_of",
    "with_hidden_tests",
    "resolve_lab_name",
]

#: The spec files shipped with lablib, one per lab (``specs/<lab name>.py``).
PUBLIC_TESTS_DIR = pathlib.Path(__file__).resolve().parent.parent / "specs"

_LABS: dict[str, LabSpec] = {}


def get_lab(name: str, title: str = "", aliases: tuple[str, ...] = ()) -> LabSpec:
    """The spec object of a lab, created on first use (used by test modules).

    The title defaults to the registry's (:mod:`lablib.labs`) for a registered lab.
    """
    lab = _LABS.get(name)
    if lab is None:
        if not title:
            try:
                title = resolve_lab(name).title
            except UnknownLab:
                title = ""
        lab = _LABS[name] = LabSpec(name, title, aliases)
    else:
        if title:
            lab.title = title
        if aliases:
            lab.aliases = tuple(dict.fromkeys(lab.aliases + tuple(aliases)))
    return lab


def loaded_spec(name: str) -> LabSpec | None:
    """The spec loaded in this process under ``name`` (its name or one of its aliases: a
    spec imported by path, a test's fixture lab), with its tests, else None. Asks no
    registry: ``name`` is taken as given."""
    lab = _LABS.get(name) or next((spec for spec in _LABS.values() if name in spec.aliases), None)
    return lab if lab is not None and lab.tests else None


def spec_of(lab) -> LabSpec:
    """The spec of ``lab`` for a check in this process (:func:`lablib.check`): a
    :class:`LabSpec` passes through; a name loaded in this process already (a lab
    loaded by path, a test's fixture, or a shipped lab by its full name; a loaded lab's
    alias too, so a lab the process loaded comes before the registry) is that spec;
    anything else is resolved once (:func:`lablib.labs.find_lab`) and loaded
    (:func:`load_spec`, which imports a spec file once per process).

    Raises:
        lablib.labs.UnknownLab: neither this process nor the registry knows ``lab``.
    """
    if isinstance(lab, LabSpec):
        return lab
    loaded = loaded_spec(lab) if isinstance(lab, str) else None
    return loaded or load_spec(find_lab(lab))


def known_labs() -> list[str]:
    """Names of the labs in the registry (:mod:`lablib.labs`), in course order."""
    return [lab.name for lab in all_labs()]


def resolve_lab_name(name: str) -> str:
    """``"lab1"`` -> ``"lab1_attention"``; full names pass through (the registry decides).

    Raises:
        KeyError: no registered lab has that name (:class:`lablib.labs.UnknownLab`).
    """
    return resolve_lab(name).name


def _import_file(path: pathlib.Path, module_name: str):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def _import_spec_file(path: pathlib.Path) -> LabSpec:
    """Import a spec module given by path and return the lab it registers."""
    path = path.resolve()
    module_name = (
        f"lablib_lab_files.{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
    )
    module = sys.modules.get(module_name) or _import_file(path, module_name)
    lab = _LABS.get(path.stem)
    if lab is None:
        lab = getattr(module, "lab", None)
    if not isinstance(lab, LabSpec):
        raise ValueError(
            f"Spec file {str(path)!r} registers no lab named {path.stem!r}: call "
            f"get_lab({path.stem!r}) in it (or name the file after the lab)."
        )
    if path not in lab.source_files:
        lab.source_files.insert(0, path)
    lab.spec_dir = path.parent
    return lab


def load_lab(name, hidden_dirs=()) -> LabSpec:
    """Load a lab's public tests, plus hidden tests from each folder in ``hidden_dirs``.

    Args:
        name: a lab name (``"lab1"`` or ``"lab1_attention"``), or the path of a spec
            module written with this API (a ``.py`` file, or a folder holding exactly
            one ``lab*.py``), e.g. a course's own lab outside lablib; or a
            :class:`lablib.labs.Lab`.
        hidden_dirs: folders holding ``<lab name>.py`` (or ``<short name>.py``) written
            with the same API; their tests are marked hidden.

    Returns:
        The :class:`LabSpec`: :func:`load_spec` of :func:`lablib.labs.find_lab`'s lab.

    Example::

        lab = load_lab("lab1", hidden_dirs=["instructor/hidden"])
    """
    return load_spec(find_lab(name), hidden_dirs)


def _shipped_spec(name: str) -> LabSpec:
    """The spec shipped with lablib (``specs/<name>.py``), imported once; a spec of that
    name loaded in this process already (a course's copy, by path) is that lab."""
    module_name = f"lablib.grading.specs.{name}"
    file = PUBLIC_TESTS_DIR / f"{name}.py"
    if module_name not in sys.modules:
        copy = loaded_spec(name)
        if copy is not None:  # its tests, files and folder stay the copy's
            return copy
        _import_file(file, module_name)
    lab = _LABS.get(name)
    if lab is None:
        raise ValueError(
            f"Spec file {str(file)!r} registers no lab named {name!r}: call "
            f"get_lab({name!r}) in it."
        )
    if file not in lab.source_files:
        lab.source_files.insert(0, file)
    lab.spec_dir = PUBLIC_TESTS_DIR
    return lab


#: The tests each hidden tests module registered (its module name -> its tests), kept out
#: of the lab's spec in the registry: each :func:`load_spec` call gets a spec of its own
#: with the hidden tests of its folders (:meth:`LabSpec.with_hidden`), so that a second
#: grading in one process, with other folders or none, does not grade with the first's.
_HIDDEN_TESTS: dict[str, list] = {}


def _hidden_tests(lab: LabSpec, folder, short: str) -> tuple[list, pathlib.Path]:
    """The hidden tests of ``folder`` (``<name>.py`` or ``<short>.py``) for ``lab``, and
    that file; its module is imported once per process, and what it registers on the lab's
    spec in the registry (its ``get_lab``) is taken off it again."""
    full = lab.name
    home = _LABS.get(full) or lab  # where the module's get_lab() registers
    folder = pathlib.Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"Hidden tests folder {str(folder)!r} does not exist; pass the folder "
            f"that holds {full}.py with --tests."
        )
    for candidate in (folder / f"{full}.py", folder / f"{short}.py"):
        candidate = candidate.resolve()
        digest = hashlib.sha1(str(candidate).encode()).hexdigest()[:10]
        hidden_name = f"{HIDDEN_NAMESPACE}.{full}_{digest}"
        if candidate.is_file():
            if hidden_name not in _HIDDEN_TESTS:
                public = list(home.tests)
                try:
                    _import_file(candidate, hidden_name)
                finally:  # the registry's spec keeps its own tests only
                    added = [t for t in home.tests if not any(t is p for p in public)]
                    home.tests = public
                for test in added:  # a probe defined elsewhere, registered here
                    test.hidden = True
                _HIDDEN_TESTS[hidden_name] = added
            return _HIDDEN_TESTS[hidden_name], candidate
    raise FileNotFoundError(
        f"Hidden tests folder {str(folder)!r} holds neither {full}.py nor {short}.py."
    )


def load_spec(lab: Lab, hidden_dirs=()) -> LabSpec:
    """The tests of ``lab``, a :class:`lablib.labs.Lab` resolved once by the caller
    (:func:`lablib.labs.find_lab`): its spec file's public tests, plus the hidden tests
    of each folder in ``hidden_dirs``. Asks the registry nothing more. With hidden tests
    the spec is a copy for this call (the registry's stays public).

    Raises:
        FileNotFoundError: a hidden tests folder that is missing or holds no tests of
            this lab.
        ValueError: a spec file that registers no lab of its name.
    """
    spec = _import_spec_file(pathlib.Path(lab.spec)) if lab.spec else _shipped_spec(lab.name)
    short = lab.short if spec.name == lab.name else spec.name.split("_", 1)[0]
    return with_hidden_tests(spec, hidden_dirs, short)


def with_hidden_tests(spec: LabSpec, hidden_dirs=(), short: str | None = None) -> LabSpec:
    """``spec`` with the hidden tests of each folder in ``hidden_dirs`` it does not hold
    yet: a copy for the caller (:meth:`LabSpec.with_hidden`), or ``spec`` itself where
    none is new (a spec :func:`load_lab` gave with the same folders). ``short``: the other
    name a folder's file may have (``lab1.py``), by default the registry's short name of
    the lab, else the part of its name before the first ``_``.

    Raises:
        FileNotFoundError: a hidden tests folder that is missing or holds no tests of
            this lab.
    """
    if short is None:  # the registry's short name, where it knows the lab (lab1.py)
        try:
            short = resolve_lab(spec.name).short
        except UnknownLab:
            short = spec.name.split("_", 1)[0]
    tests, files = [], []
    for folder in hidden_dirs:
        found, file = _hidden_tests(spec, folder, short)
        tests += [t for t in found if not any(t is seen for seen in [*spec.tests, *tests])]
        files.append(file)
    if not tests and all(f in spec.source_files for f in files):
        return spec
    return spec.with_hidden(tests, files)
