"""The course's labs, declared once: the lab registry.

Every part of lablib that needs to know a lab reads it here: ``lablib.install`` (what a
lab's first cell installs), the grader (``lablib grade``, ``lablib gradescope``, the spec
of a lab), ``lablib.check`` (short names), ``lablib assign``, the CI scripts, the
benchmarks and the tests (fast-mode time budgets). Adding a lab is one :class:`Lab`
entry here, one solution notebook (``solutions/<name>.ipynb``) and one spec file
(``lablib/grading/specs/<name>.py``). A course's own lab outside lablib is added at run
time with :func:`register` (its spec given by path).

This module imports only the standard library: the first cell of a notebook reads it
before TensorFlow is imported.

Example::

    from lablib.labs import resolve_lab
    lab = resolve_lab("lab2")
    lab.name, lab.keras, lab.extras     # ('lab2_transformer_reuters', 'legacy', ('tfm',))
"""

from __future__ import annotations

import dataclasses
import pathlib

__all__ = [
    "Lab",
    "UnknownLab",
    "KERAS_MODES",
    "all_labs",
    "lab_names",
    "resolve_lab",
    "find_lab",
    "register",
    "unregister",
]

#: The Keras a lab runs on: Keras 3, or tf_keras (``TF_USE_LEGACY_KERAS=1``, TF Model Garden).
KERAS_MODES = ("keras3", "legacy")


class UnknownLab(KeyError):
    """No registered lab has that name; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


@dataclasses.dataclass(frozen=True)
class Lab:
    """One lab of the course.

    Attributes:
        name: the full name: the notebooks' file stem (``solutions/<name>.ipynb``,
            ``labs/<name>.ipynb``) and the spec's lab name (``"lab1_attention"``).
        short: the short name students type (``lablib.check("lab1", ...)``).
        title: shown in feedback, summaries and the Gradescope zip.
        keras: ``"keras3"`` or ``"legacy"`` (tf_keras, for TF Model Garden).
        extras: lablib's setup.cfg extras the notebook needs (``"tfm"``, ``"molecules"``).
        imports: further requirements of the notebook's own cells (``"matplotlib>=3.7"``).
        fast_seconds: the budget of a fast-mode run top to bottom on 2 CPU cores
            (``LABLIB_FAST=1``); the notebook tests fail a lab that needs longer.
        spec: where the lab's tests are: empty for the spec shipped with lablib
            (``lablib/grading/specs/<name>.py``), else the path of a spec file.
    """

    name: str
    short: str
    title: str
    keras: str = "keras3"
    extras: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    fast_seconds: float = 300.0
    spec: str = ""

    def __post_init__(self):
        if self.keras not in KERAS_MODES:
            raise ValueError(
                f"Lab {self.name!r}: keras={self.keras!r}; expected one of {KERAS_MODES}."
            )
        if not self.name or not self.short or "/" in self.name or "/" in self.short:
            raise ValueError(
                f"Lab name {self.name!r} / short name {self.short!r}: both must be "
                f"non-empty plain names (no '/')."
            )
        for field in ("extras", "imports"):
            value = getattr(self, field)
            if isinstance(value, str):
                raise TypeError(
                    f"Lab {self.name!r}: {field} must be a tuple of strings, got the "
                    f"string {value!r}; write ({value!r},)."
                )

    @property
    def notebook(self) -> str:
        """The notebook's file name: ``<name>.ipynb``."""
        return f"{self.name}.ipynb"

    @property
    def legacy(self) -> bool:
        """The lab runs on tf_keras (``TF_USE_LEGACY_KERAS=1``)."""
        return self.keras == "legacy"

    @classmethod
    def from_spec(cls, path) -> Lab:
        """A course's own lab given by the path of its spec file, outside the registry:
        named after the file (``lab7_gin.py`` -> ``lab7_gin``, short ``lab7``).

        Raises:
            ValueError: a file name that gives no short name (``_draft.py``).
        """
        path = pathlib.Path(path)
        short = path.stem.split("_", 1)[0]
        if not short:
            raise ValueError(
                f"The spec file {str(path)!r} gives no lab name: its name starts with '_'. "
                f"Name a lab's spec file after the lab, e.g. lab7_gin.py (short name lab7)."
            )
        return cls(path.stem, short, "", spec=str(path))

    @property
    def spec_path(self) -> pathlib.Path:
        """The spec file: :attr:`spec`, or the one shipped in ``lablib/grading/specs``."""
        if self.spec:
            return pathlib.Path(self.spec)
        return pathlib.Path(__file__).resolve().parent / "grading" / "specs" / f"{self.name}.py"


_PLOTS = ("matplotlib>=3.7",)

_REGISTRY: dict[str, Lab] = {
    lab.name: lab
    for lab in (
        Lab(
            "lab1_attention",
            "lab1",
            "Lab 1: Attention from first principles",
            imports=_PLOTS,
            fast_seconds=180,
        ),
        Lab(
            "lab2_transformer_reuters",
            "lab2",
            "Lab 2: Transformer encoder on Reuters newswires",
            keras="legacy",
            extras=("tfm",),
            imports=(*_PLOTS, "pandas>=2.0"),
            fast_seconds=480,
        ),
        Lab(
            "lab3_gcn_molecules",
            "lab3",
            "Lab 3: Graph convolution on molecules",
            extras=("molecules",),
            imports=_PLOTS,
            fast_seconds=240,
        ),
        Lab(
            "lab4_gat",
            "lab4",
            "Lab 4: Graph attention networks",
            extras=("molecules",),
            imports=_PLOTS,
            fast_seconds=240,
        ),
    )
}
_SHIPPED = frozenset(_REGISTRY)


def all_labs() -> tuple[Lab, ...]:
    """Every registered lab, in course order (the shipped ones first)."""
    return tuple(_REGISTRY.values())


def lab_names() -> list[str]:
    """The full names of every registered lab, in course order."""
    return list(_REGISTRY)


def resolve_lab(name) -> Lab:
    """The lab called ``name``: its full name (``"lab1_attention"``) or its short name
    (``"lab1"``); a :class:`Lab` passes through.

    Raises:
        UnknownLab: no registered lab has that name (the message lists them).
    """
    if isinstance(name, Lab):
        return name
    text = str(name).strip()
    for lab in _REGISTRY.values():
        if text in (lab.name, lab.short):
            return lab
    known = ", ".join(f"{lab.short} ({lab.name})" for lab in _REGISTRY.values())
    raise UnknownLab(
        f"Unknown lab {text!r}. Expected one of: {known}; or, for a course's own "
        f"lab, the path of its spec file (or lablib.labs.register(Lab(...)) first)."
    )


def _spec_file(text: str) -> pathlib.Path | None:
    """``text`` as a spec file's path when it is one (a ``.py`` file, or a folder holding
    exactly one ``lab*.py``), else None (a lab's name)."""
    if not (text.endswith(".py") or "/" in text or "\\" in text or pathlib.Path(text).is_dir()):
        return None
    path = pathlib.Path(text)
    if path.is_dir():
        candidates = sorted(path.glob("lab*.py"))
        if len(candidates) != 1:
            raise FileNotFoundError(
                f"Spec folder {text!r} holds {len(candidates)} lab*.py files "
                f"({[p.name for p in candidates]}); expected exactly one. Pass the file itself."
            )
        return candidates[0]
    if not path.is_file():
        raise FileNotFoundError(
            f"Spec file {text!r} does not exist; pass a lab name "
            f"({', '.join(lab_names())}) or the path of a spec module."
        )
    return path


def find_lab(lab) -> Lab:
    """The lab that ``lab`` means, resolved once for whoever passes it on: a
    :class:`Lab` passes through; the path of a spec file (or of a folder holding one
    ``lab*.py``) is a course's own lab (:meth:`Lab.from_spec`); anything else is a
    registered lab's full or short name (:func:`resolve_lab`).

    Raises:
        FileNotFoundError: a path that is no spec file (the message says what to pass).
        UnknownLab: no registered lab has that name (the message lists them).

    Example::

        find_lab("lab1").name                       # 'lab1_attention'
        find_lab("course/lab7_gin.py").short        # 'lab7'
    """
    if isinstance(lab, Lab):
        return lab
    path = _spec_file(str(lab).strip())
    return Lab.from_spec(path) if path is not None else resolve_lab(lab)


def register(lab: Lab) -> Lab:
    """Add ``lab`` to the registry (a course's own lab, a test's fixture lab).

    Registering the same entry again is a no-op; a different lab under a name or short
    name already taken raises ``ValueError``.
    """
    if not isinstance(lab, Lab):
        raise TypeError(f"register() takes a lablib.labs.Lab, got {type(lab).__name__}.")
    for other in _REGISTRY.values():
        if other == lab:
            return other
        if {lab.name, lab.short} & {other.name, other.short}:
            raise ValueError(
                f"Lab {lab.name!r} ({lab.short!r}) clashes with the registered lab "
                f"{other.name!r} ({other.short!r}); choose other names."
            )
    _REGISTRY[lab.name] = lab
    return lab


def unregister(name: str) -> None:
    """Remove a lab added with :func:`register` (the shipped labs cannot be removed)."""
    lab = resolve_lab(name)
    if lab.name in _SHIPPED:
        raise ValueError(f"{lab.name!r} ships with lablib and cannot be unregistered.")
    del _REGISTRY[lab.name]
