"""The writers' interface: a :class:`~lablib.grading.gradebook.Gradebook` in, files out.

A writer is any object with a ``name`` and ``write(out_dir, book) -> list of paths``
(:class:`Writer`). Every writer gets the same gradebook (:mod:`lablib.grading.gradebook`,
its one owner): the lab, the results sorted by submission, and one feedback file stem per
submission, so that files written by one writer can link to those of another. Writers
only write: nothing reads a report back to learn the gradebook's state.
"""

from __future__ import annotations

import pathlib
from typing import Protocol

from lablib.grading.atomic import atomic_write
from lablib.grading.gradebook import Gradebook

__all__ = ["FeedbackWriter", "Writer", "write_per_submission"]


class Writer(Protocol):
    """One output format. ``write`` creates what it needs under ``out_dir`` and returns
    the paths it wrote (files, or the folder of a file per submission)."""

    name: str

    def write(self, out_dir: pathlib.Path, book: Gradebook) -> list[pathlib.Path]: ...


def write_per_submission(
    folder: pathlib.Path, book: Gradebook, suffix: str, render, *, only=None
) -> list[pathlib.Path]:
    """Write ``render(lab_title, result)`` to ``folder/<stem><suffix>`` for every submission
    (those for which ``only(result)`` is true, when given), and remove every other
    ``*<suffix>`` file there: no file about a submission that left the gradebook stays.

    A file is another's by what it is, not by its name as listed: a file system that
    lists a name otherwise than it was written (macOS's HFS+ lists ``José.md``
    decomposed; a case-insensitive one keeps the case a file had first) shows the file
    just written under a name of its own, and that file stays."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths, written = [], set()
    for r in book.results:
        if only is None or only(r):
            path = folder / f"{book.stems[r.submission]}{suffix}"
            atomic_write(path, render(book.lab.title, r))
            paths.append(path)
            written.add(_file_id(path))
    for listed in folder.glob(f"*{suffix}"):
        if _file_id(listed) not in written:
            listed.unlink(missing_ok=True)
    return paths


def _file_id(path: pathlib.Path):
    """The file at ``path`` (device and inode; the link itself, not where it leads), or
    None where there is none now."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


class FeedbackWriter:
    """A format of the students' feedback: ``feedback/<stem><suffix>`` for every
    submission, the text of ``render(lab_title, result, row)`` (``row``: the gradebook's
    :class:`~lablib.grading.gradebook.Row` of the result, with its total and late penalty).
    A subclass sets ``name``, ``suffix`` and ``render``."""

    name: str
    suffix: str
    render: staticmethod

    def write(self, out_dir: pathlib.Path, book: Gradebook) -> list[pathlib.Path]:
        return write_per_submission(
            pathlib.Path(out_dir) / "feedback",
            book,
            self.suffix,
            lambda title, r: self.render(title, r, book.row(r)),
        )
