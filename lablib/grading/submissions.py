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

__all__ = ["collect_submissions", "SubmissionSkipped"]


class SubmissionSkipped(UserWarning):
    """A path among the submissions that is not graded (a symlink leading out of its folder)."""


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


def _notebooks_in(folder: pathlib.Path, root: str, refused: list, seen: set) -> list[pathlib.Path]:
    """The notebooks under ``folder`` (sorted); links followed only while they stay in ``root``."""
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        target = _resolve_inside(entry, root, refused)
        if target is None:
            continue
        if target.is_dir():
            real = os.path.realpath(target)
            if real not in seen:  # a link back up the tree is walked once
                seen.add(real)
                found.extend(_notebooks_in(target, root, refused, seen))
        elif target.is_file() and entry.suffix == ".ipynb":
            found.append(target)
    return found


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
    notebooks, each is a submission named ``folder/stem``). Names are unique (a repeated
    one gets ``-2``, ``-3``... never another submission's name; compared ignoring case).

    Symbolic links are followed only while they stay inside the folder given (for a
    notebook given by path: the folder holding it): a link leading elsewhere, or a broken
    one, is not graded. Each is appended to ``refused`` as ``(path, reason)``, or, when
    ``refused`` is None, reported as a :class:`SubmissionSkipped` warning.
    """
    skipped: list = []
    found: list[tuple[str, pathlib.Path]] = []
    for path in map(pathlib.Path, paths):
        if path.is_dir():
            root = os.path.realpath(path)
            for entry in sorted(path.iterdir()):
                if entry.name.startswith(".") or entry.name == "__pycache__":
                    continue
                target = _resolve_inside(entry, root, skipped)
                if target is None:
                    continue
                if target.is_file() and entry.suffix == ".ipynb":
                    found.append((entry.stem, target))
                elif target.is_dir() and os.path.realpath(target) == root:
                    skipped.append((entry, "a symbolic link to the submissions folder itself"))
                elif target.is_dir():
                    books = _notebooks_in(target, root, skipped, {root, os.path.realpath(target)})
                    if len(books) == 1:
                        found.append((entry.name, books[0]))
                    else:
                        found.extend((f"{entry.name}/{b.stem}", b) for b in books)
        elif path.is_file():
            target = _resolve_inside(path, os.path.realpath(path.parent), skipped)
            if target is not None:
                found.append((path.stem, target))
        elif path.is_symlink():
            skipped.append((path, "a broken symbolic link"))
        else:
            raise FileNotFoundError(f"Submission {str(path)!r} does not exist; pass .ipynb files or folders.")
    for path, reason in skipped:
        if refused is not None:
            refused.append((path, reason))
        else:
            warnings.warn(f"{path} is not graded: {reason}.", SubmissionSkipped, stacklevel=2)
    return _unique_names(found)
