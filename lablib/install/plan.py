"""What a lab needs, and what of it to install: decisions over ``{name: version}`` maps.

Nothing here runs pip, reads the installed packages or looks at the process: every
function takes the versions it decides on, so the tests give it Colab's list.
:mod:`lablib.install.pip_run` reads the real versions and runs pip;
:func:`lablib.install.prepare` puts the two together in a lab's first cell.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence

from lablib.labs import Lab, UnknownLab, resolve_lab

__all__ = [
    "PINNED",
    "CORE",
    "EXTRAS",
    "TFM_PAIR",
    "InstallError",
    "Plan",
    "normalize",
    "requirement_name",
    "tf_minor",
    "lab_extras",
    "lab_requirements",
    "plan",
    "constraints",
    "changed_imports",
    "install_summary",
]

#: Packages an install must never replace: pinned at their installed versions.
PINNED = ("tensorflow", "keras", "numpy", "protobuf", "ml-dtypes", "h5py")

#: lablib's own requirements (setup.cfg ``install_requires``; a test keeps them equal):
#: what lablib's layers, data loaders and ``lablib.check`` import.
CORE = (
    "tensorflow>=2.19",
    "keras>=3.10",
    "numpy>=1.26",
    "scipy>=1.10",
    "scikit-learn>=1.3",
)

#: setup.cfg extras a lab needs (a test keeps them equal to setup.cfg's).
EXTRAS = {
    "tfm": ("tf-models-official>=2.19", "tf-keras>=2.19", "setuptools<81"),
    "molecules": ("rdkit>=2024.3",),
}

#: TF Model Garden and the tf_keras it runs on: both follow one TensorFlow minor.
TFM_PAIR = ("tf-models-official", "tf-keras")


class InstallError(RuntimeError):
    """An install the lab needs could not be done (the message says what and how to fix it)."""


def _packaging():
    try:
        from packaging.requirements import Requirement
        from packaging.version import Version
    except ImportError:  # pragma: no cover - TensorFlow and Keras both require packaging
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.version import Version
    return Requirement, Version


def normalize(name: str) -> str:
    """A distribution name in its canonical form (PEP 503): ``ML_Dtypes`` -> ``ml-dtypes``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The normalized distribution name of a requirement: ``"tf_keras~=2.19.0"`` ->
    ``"tf-keras"``."""
    Requirement, _ = _packaging()
    return normalize(Requirement(requirement).name)


def tf_minor(version: str) -> str:
    """``"2.19.0"`` -> ``"2.19"`` (the release series tf-models-official follows)."""
    _, Version = _packaging()
    release = Version(version).release
    return f"{release[0]}.{release[1] if len(release) > 1 else 0}"


def lab_extras(name: str) -> tuple:
    """The lablib extras a lab needs, by short name (``"lab2"``) or full name
    (``"lab2_transformer_reuters"``), as the lab registry (:mod:`lablib.labs`) declares
    them; ``()`` for a lab the registry does not know.

    Example:
        >>> lab_extras("lab2_transformer_reuters")
        ('tfm',)
    """
    try:
        return resolve_lab(name).extras
    except UnknownLab:
        return ()


def _lab_needs(lab: str) -> Lab:
    try:
        return resolve_lab(lab)
    except UnknownLab as exc:
        raise ValueError(str(exc)) from None


def lab_requirements(lab: str, tensorflow: str | None) -> list[str]:
    """Every requirement of ``lab``: lablib's core, its extras, the notebook's imports.

    Args:
        lab: a lab's short or full name (``"lab1"``, ``"lab2_transformer_reuters"``).
        tensorflow: the installed TensorFlow version, or None. With a version, the
            ``tfm`` extra becomes ``tf-models-official~=X.Y.0`` and ``tf-keras~=X.Y.0``
            (each pins one TensorFlow minor); without, the extra's own ranges.

    Returns:
        Requirement strings, in a stable order, without duplicates.
    """
    needs = _lab_needs(lab)
    out = list(CORE)
    for extra in needs.extras:
        for requirement in EXTRAS[extra]:
            name = requirement_name(requirement)
            if tensorflow is not None and name in TFM_PAIR:
                requirement = f"{name}~={tf_minor(tensorflow)}.0"
            out.append(requirement)
    out.extend(needs.imports)
    return list(dict.fromkeys(out))


@dataclasses.dataclass
class Plan:
    """What :func:`plan` decided.

    Attributes:
        install: requirements to hand to pip (not installed, or at a version the lab
            does not accept).
        pins: ``name==version`` constraints for the installed :data:`PINNED` packages.
    """

    install: list
    pins: list

    @property
    def nothing_to_do(self) -> bool:
        return not self.install


def plan(requirements: Sequence[str], installed: Mapping[str, str]) -> Plan:
    """Decide what to install.

    Args:
        requirements: requirement strings (``"numpy>=1.26"``).
        installed: installed distributions, ``{name: version}`` (any name spelling).

    Returns:
        A :class:`Plan`.

    Raises:
        InstallError: a :data:`PINNED` package is installed at a version outside the
            lab's range: installing would replace it (for TensorFlow, a 600 MB download
            and a restart), so the student is told instead.
    """
    Requirement, _ = _packaging()
    versions = {normalize(name): version for name, version in installed.items()}
    install, conflicts = [], []
    for text in requirements:
        requirement = Requirement(text)
        name = normalize(requirement.name)
        version = versions.get(name)
        if version is not None and requirement.specifier.contains(version, prereleases=True):
            continue
        if version is not None and name in PINNED:
            conflicts.append(f"{name} {version} is installed; this lab needs {text}")
            continue
        install.append(text)
    if conflicts:
        raise InstallError(
            "This runtime's packages do not fit this lab, and replacing them would need a "
            "download and a restart: " + "; ".join(conflicts) + ". Use a runtime with a "
            "supported TensorFlow (Colab's default runtime), or install the versions "
            "named above yourself and restart."
        )
    return Plan(install=install, pins=constraints(versions))


def constraints(installed: Mapping[str, str], keep: Iterable[str] = PINNED) -> list[str]:
    """``name==version`` lines pinning the installed ones among ``keep``."""
    versions = {normalize(name): version for name, version in installed.items()}
    return [f"{name}=={versions[name]}" for name in map(normalize, keep) if name in versions]


def changed_imports(
    before: Mapping[str, str],
    after: Mapping[str, str],
    providers: Mapping[str, Sequence[str]],
    imported: Iterable[str],
) -> list[tuple]:
    """The installed distributions that changed and that this process had imported.

    Args:
        before, after: ``{distribution: version}`` before and after an install.
        providers: top-level import name -> distributions providing it
            (``importlib.metadata.packages_distributions()``).
        imported: module names this process has imported (``sys.modules``).

    Returns:
        ``[(distribution, old version, new version or None if removed), ...]``, sorted.
    """
    before = {normalize(k): v for k, v in before.items()}
    after = {normalize(k): v for k, v in after.items()}
    loaded = set()
    for module in imported:
        for dist in providers.get(module.partition(".")[0], ()):
            loaded.add(normalize(dist))
    return sorted(
        (name, old, after.get(name))
        for name, old in before.items()
        if name in loaded and after.get(name) != old
    )


def install_summary(
    before: Mapping[str, str],
    after: Mapping[str, str],
    requirers: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """The lines that tell a student what an install did: every distribution added, and
    every one changed or removed (``absl-py 2.5.1 -> 1.4.0 (tensorflow-model-optimization
    requires absl-py~=1.2)``), so no change goes unreported.

    Args:
        before, after: ``{distribution: version}`` around the install.
        requirers: changed distribution -> the requirements of installed distributions that
            exclude its old version (:func:`lablib.install.pip_run.requirers`); shown in
            brackets.
    """
    before = {normalize(k): v for k, v in before.items()}
    after = {normalize(k): v for k, v in after.items()}
    added = sorted(f"{name} {after[name]}" for name in set(after) - set(before))
    changed = []
    for name in sorted(before):
        if after.get(name) == before[name]:
            continue
        why = (requirers or {}).get(name)
        changed.append(
            f"{name} {before[name]} -> {after.get(name) or '(removed)'}"
            + (f" ({'; '.join(why)})" if why else "")
        )
    lines = []
    if added:
        lines.append(f"Added {len(added)}: " + ", ".join(added))
    if changed:
        lines.append(f"Changed {len(changed)}: " + ", ".join(changed))
    return lines
