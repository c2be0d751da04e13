"""Where a lab's released (blank) notebook is found: an explicit search path.

The grader takes a lab's ``# SETUP`` cells from the released notebook, never from a
submission, and the Gradescope zip ships it. It is looked for, in this order:

1. ``lab_notebook``: a notebook given explicitly (``--lab-notebook PATH``);
2. the course folder (``--course DIR``, else the environment variable
   ``LABLIB_COURSE_DIR``): ``DIR/labs/<lab>.ipynb``;
3. the copy shipped inside lablib (package data, ``lablib/grading/labs/<lab>.ipynb``,
   written by ``lablib assign`` together with the project's ``labs/``).

Nothing is derived from where a checkout of lablib happens to be, so an installed wheel
behaves like a checkout. Only blank labs ship in the package: students install the same
package, so solutions inside it would hand them the answers.

Example::

    from lablib.grading.author import catalog
    path = catalog.find_lab_notebook("lab1_attention", course_dir="~/course")
"""

from __future__ import annotations

import os
import pathlib

from lablib._version import PACKAGE_DIR
from lablib.grading.notebook import read_notebook, setup_sources

__all__ = [
    "COURSE_DIR_ENV",
    "PACKAGE_LABS_DIR",
    "LabNotebookNotFound",
    "search_path",
    "find_lab_notebook",
    "find_solution_notebook",
    "lab_setup",
    "packaged_labs",
]

#: Environment variable naming the course folder (``<dir>/labs/<lab>.ipynb``).
COURSE_DIR_ENV = "LABLIB_COURSE_DIR"
#: The released labs shipped inside lablib (package data).
PACKAGE_LABS_DIR = PACKAGE_DIR / "grading" / "labs"


class LabNotebookNotFound(FileNotFoundError):
    """No released notebook was found for a lab; the message lists every place looked."""


def _lab_name(lab) -> str:
    return lab if isinstance(lab, str) else lab.name


def search_path(lab, *, lab_notebook=None, course_dir=None) -> list[tuple[str, pathlib.Path]]:
    """The places looked at for ``lab``'s released notebook, in order.

    Args:
        lab: the lab's full name (``"lab1_attention"``) or its :class:`LabSpec`.
        lab_notebook: a notebook given explicitly; when set, it is the only place.
        course_dir: the course folder; default: ``$LABLIB_COURSE_DIR`` when set.

    Returns:
        ``(where, path)`` pairs; ``where`` says why the place is searched.

    Example::

        [str(p) for _, p in search_path("lab1_attention")]
    """
    if lab_notebook is not None:
        return [("--lab-notebook", pathlib.Path(lab_notebook).expanduser())]
    name = _lab_name(lab)
    places = []
    if course_dir is not None:
        places.append(
            ("--course", pathlib.Path(course_dir).expanduser() / "labs" / f"{name}.ipynb")
        )
    elif os.environ.get(COURSE_DIR_ENV):
        places.append(
            (
                f"${COURSE_DIR_ENV}",
                pathlib.Path(os.environ[COURSE_DIR_ENV]).expanduser() / "labs" / f"{name}.ipynb",
            )
        )
    places.append(("shipped with lablib", PACKAGE_LABS_DIR / f"{name}.ipynb"))
    return places


def find_lab_notebook(lab, *, lab_notebook=None, course_dir=None) -> pathlib.Path:
    """The released notebook of ``lab``: the first existing place of :func:`search_path`.

    Raises:
        LabNotebookNotFound: none exists; the message lists each place and how to fix it.
    """
    places = search_path(lab, lab_notebook=lab_notebook, course_dir=course_dir)
    for _, path in places:
        if path.is_file():
            return path
    name = _lab_name(lab)
    looked = "; ".join(f"{where}: {path}" for where, path in places)
    if lab_notebook is not None:
        raise LabNotebookNotFound(
            f"Lab notebook {str(places[0][1])!r} (given with --lab-notebook) does not "
            f"exist; pass the released notebook of lab {name!r}."
        )
    raise LabNotebookNotFound(
        f"No released notebook found for lab {name!r} (looked in {looked}). Pass "
        f"--lab-notebook PATH, or --course DIR (or set {COURSE_DIR_ENV}) for a folder holding "
        f"labs/{name}.ipynb; labs shipped with lablib: {packaged_labs() or 'none'}."
    )


def lab_setup(lab, *, lab_notebook=None, course_dir=None) -> list[str]:
    """The ``# SETUP`` cell sources (magics removed) of ``lab``'s released notebook."""
    nb, _ = read_notebook(find_lab_notebook(lab, lab_notebook=lab_notebook, course_dir=course_dir))
    return setup_sources(nb)


def packaged_labs() -> list[str]:
    """Names of the labs whose released notebook ships with lablib."""
    return sorted(p.stem for p in PACKAGE_LABS_DIR.glob("*.ipynb"))


def find_solution_notebook(lab, *, solution=None, course_dir=None) -> pathlib.Path | None:
    """The solution notebook of ``lab`` (its model answers, for the review page), or None.

    ``solution`` when given (it must exist), else ``<course>/solutions/<lab>.ipynb`` of the
    course folder (``course_dir`` or ``$LABLIB_COURSE_DIR``). Never the package: only blank
    labs ship in lablib.

    Raises:
        LabNotebookNotFound: ``solution`` was given and does not exist.
    """
    if solution is not None:
        path = pathlib.Path(solution).expanduser()
        if not path.is_file():
            raise LabNotebookNotFound(
                f"Solution notebook {str(path)!r} (given with --solution) does not exist."
            )
        return path
    course = course_dir or os.environ.get(COURSE_DIR_ENV)
    if course:
        path = pathlib.Path(course).expanduser() / "solutions" / f"{_lab_name(lab)}.ipynb"
        if path.is_file():
            return path
    return None
