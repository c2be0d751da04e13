"""Finding the submissions to grade: notebooks and folders -> ``(name, path)`` pairs.

A path given is a notebook (its name: the stem), a folder of notebooks (one submission
each), or a folder of per-student folders (the name: the student's folder; when it holds
several notebooks, each is a submission named ``folder/stem``). Names are unique in the
batch. Symbolic links are followed only while they stay inside the folder given.

Example::

    from lablib.grading.submissions import collect_submissions
    for name, path in collect_submissions(["submissions/"]):
        ...
"""

from __future__ import annotations

import os
import pathlib
import warnings

__all__ = ["collect_submissions", "warn_skipped", "SubmissionSkipped", "NOT_A_NOTEBOOK"]


class SubmissionSkipped(UserWarning):
    """A path among the submissions that is not graded: a file that is not a notebook, a
    student's folder without one, a symbolic link leading out of its folder."""


#: Why a visible file in a submissions folder is not graded.
NOT_A_NOTEBOOK = "not a notebook: only .ipynb files are graded"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _resolve_inside(entry: pathlib.Path, root: str, refused: list) -> pathlib.Path | None:
    """``entry`` resolved, or None (and a note in ``refused``) when it is a link leading
    outside ``root`` (the submissions folder given) or a broken one."""
    if not entry.is_symlink():
        return entry
    real = os.path.realpath(entry)
    if not os.path.exists(real):
        refused.append((entry, "a broken symbolic link"))
        return None
    if not _inside(real, root):
        refused.append((entry, f"a symbolic link leading outside the submissions folder {root} "
                               f"(to {real}); copy the notebook into the folder to grade it"))
        return None
    return pathlib.Path(real)


def _is_notebook(entry: pathlib.Path, target: pathlib.Path) -> bool:
    return target.is_file() and entry.suffix.lower() == ".ipynb"  # Windows uploads: .IPYNB


def _entries(folder: pathlib.Path, root: str, refused: list):
    """``(entry, target)`` for each visible entry of ``folder`` (sorted), links resolved
    while they stay inside ``root``; the others are noted in ``refused``."""
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        target = _resolve_inside(entry, root, refused)
        if target is not None:
            yield entry, target


def _notebooks_in(folder: pathlib.Path, root: str, refused: list, seen: set,
                  where: tuple = ()) -> list[tuple[tuple, pathlib.Path]]:
    """The notebooks under ``folder`` (sorted) as ``(path parts below the folder, file)``;
    links followed only while they stay in ``root``."""
    found = []
    for entry, target in _entries(folder, root, refused):
        if target.is_dir():
            real = os.path.realpath(target)
            if real not in seen:  # a link back up the tree is walked once
                seen.add(real)
                found.extend(_notebooks_in(target, root, refused, seen, where + (entry.name,)))
        elif _is_notebook(entry, target):
            found.append((where + (entry.name,), target))
        else:
            refused.append((entry, NOT_A_NOTEBOOK))
    return found


def _folder_names(folder: str, books: list[tuple[tuple, pathlib.Path]]) -> list[tuple[str, pathlib.Path]]:
    """Names of the notebooks found in a student's folder: the folder's name when it holds
    one notebook; else each notebook's path below it without ``.ipynb``, except that a
    sub-folder holding a single notebook names it (``section A/team 3/erin`` and
    ``section A/team 3/frank`` for ``.../erin/lab1.ipynb`` and ``.../frank/lab1.ipynb``)."""
    if len(books) == 1:
        return [(folder, books[0][1])]
    per_parent: dict[tuple, int] = {}
    for parts, _ in books:
        per_parent[parts[:-1]] = per_parent.get(parts[:-1], 0) + 1
    names = []
    for parts, path in books:
        parent = parts[:-1]
        if parent and per_parent[parent] == 1:
            names.append(("/".join((folder, *parent)), path))
        else:
            names.append(("/".join((folder, *parent, pathlib.PurePath(parts[-1]).stem)), path))
    return names


def _unique_names(found: list[tuple[str, pathlib.Path]]) -> list[tuple[str, pathlib.Path]]:
    """Names made unique: a repeated name gets ``-2``, ``-3``... skipping every name that is
    taken, by another submission's own name too (``d2/alice`` + ``d3/alice-2`` + ``d1/alice``
    give ``alice``, ``alice-2`` and ``alice-3``)."""
    taken = {name.casefold() for name, _ in found}
    seen: set[str] = set()
    out = []
    for name, path in found:
        unique = name
        if name.casefold() in seen:
            k = 2
            while f"{name}-{k}".casefold() in taken:
                k += 1
            unique = f"{name}-{k}"
            taken.add(unique.casefold())
        seen.add(unique.casefold())
        out.append((unique, path))
    return out


def collect_submissions(paths, refused: list | None = None) -> list[tuple[str, pathlib.Path]]:
    """``(name, notebook path)`` for each submission among ``paths``.

    A path is a notebook (name: its stem), a folder of notebooks (one submission each),
    or a folder of per-student folders (name: the student's folder; when it holds several
    notebooks, each is a submission named by its path below the folder given, so nested
    folders keep the student: ``section A/team 3/erin``; see :func:`_folder_names`).
    ``.ipynb`` is matched in any case. Names are unique (a repeated one gets ``-2``,
    ``-3``... never another submission's name; compared ignoring case).

    Symbolic links are followed only while they stay inside the folder given (for a
    notebook given by path: the folder holding it): a link leading elsewhere, or a broken
    one, is not graded. Neither is a visible file that is not a notebook, nor a student's
    folder that holds none (hidden entries, starting with ".", are passed over). Each is
    appended to ``refused`` as ``(path, reason)``, or, when ``refused`` is None, reported
    as a :class:`SubmissionSkipped` warning.
    """
    skipped: list = []
    found: list[tuple[str, pathlib.Path]] = []
    for path in map(pathlib.Path, paths):
        if path.is_dir():
            root = os.path.realpath(path)
            for entry, target in _entries(path, root, skipped):
                if _is_notebook(entry, target):
                    found.append((entry.stem, target))
                elif target.is_dir() and os.path.realpath(target) == root:
                    skipped.append((entry, "a symbolic link to the submissions folder itself"))
                elif target.is_dir():
                    books = _notebooks_in(target, root, skipped, {root, os.path.realpath(target)})
                    if not books:
                        skipped.append((entry, "a folder without a notebook (.ipynb): no row in the gradebook"))
                    found.extend(_folder_names(entry.name, books))
                else:
                    skipped.append((entry, NOT_A_NOTEBOOK))
        elif path.is_file():
            target = _resolve_inside(path, os.path.realpath(path.parent), skipped)
            if target is not None:
                found.append((path.stem, target))
        elif path.is_symlink():
            skipped.append((path, "a broken symbolic link"))
        else:
            raise FileNotFoundError(f"Submission {str(path)!r} does not exist; pass .ipynb files or folders.")
    if refused is not None:
        refused.extend(skipped)
    else:
        warn_skipped(skipped, stacklevel=3)
    return _unique_names(found)


def warn_skipped(skipped, stacklevel: int = 2) -> None:
    """One :class:`SubmissionSkipped` warning per ``(path, reason)`` (the CLI prints them)."""
    for path, reason in skipped:
        warnings.warn(f"{path} is not graded: {reason}.", SubmissionSkipped, stacklevel=stacklevel)
