"""Files written whole or not at all: the write-then-rename rule.

Every file the grader writes for people to read or import (``grades.json``,
``grades.csv``, the summary, each student's feedback, the LMS exports, Gradescope's
``results.json``) goes through :func:`atomic_write`: the text is written to a temporary
file in the same folder, flushed and ``fsync``-ed, then ``os.replace``-d over the old
file (one rename, atomic on POSIX and Windows), and the folder is ``fsync``-ed where the
system allows it. A grader killed at any moment, a full disk or a power cut leaves either
the old file or the new one, never half of one; a reader (the review page, a script, a
regrade) never sees a file being written.

The new file gets the old file's permission bits, or, for a new file, what ``open()``
would give (0o666 less the umask); the temporary file's own (0o600) never show.

Example::

    from lablib.grading.atomic import atomic_write
    atomic_write("out/grades.json", json.dumps(data))
    with atomic_write("out/grades.csv", newline="") as f:   # as a context manager
        csv.writer(f).writerow(["submission", "score"])
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import stat
import tempfile
import threading

__all__ = ["atomic_write", "TEMP_SUFFIX"]

#: Suffix of the temporary files (``.<name>.<random>.lablib-tmp``); one left by a
#: killed grader is never read as the file itself.
TEMP_SUFFIX = ".lablib-tmp"


def _umask() -> int:
    """The process's umask, read without changing it where the system says it
    (``/proc/self/status``, Linux 4.7+): setting it to read it back, as the fallback does,
    is a moment in which another thread's new file would get no mask at all. The
    fallback runs under a lock, so two writers never interleave there."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)  # the strictest while it is read back
        os.umask(mask)
    return mask


_UMASK_LOCK = threading.Lock()


def _fsync_folder(folder: pathlib.Path) -> None:
    """Make the rename itself durable (POSIX); a system without directory handles
    (Windows) or a file system that refuses is left as it is."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(folder, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class _Writer:
    """``atomic_write``'s result: call it done with data, or use it with ``with``."""

    def __init__(self, path, mode: str, encoding: str | None, newline: str | None):
        self.path = pathlib.Path(path)
        self.mode = mode
        self.encoding = encoding
        self.newline = newline

    @contextlib.contextmanager
    def _open(self):
        path = self.path
        folder = path.parent if str(path.parent) else pathlib.Path(".")
        try:
            permissions = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            permissions = 0o666 & ~_umask()
        handle, temp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
        try:
            kwargs = (
                {} if "b" in self.mode else {"encoding": self.encoding, "newline": self.newline}
            )
            with os.fdopen(handle, self.mode, **kwargs) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.chmod(temp, permissions)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        _fsync_folder(folder)

    def __enter__(self):
        self._context = self._open()
        return self._context.__enter__()

    def __exit__(self, *exc):
        return self._context.__exit__(*exc)


def atomic_write(
    path, data=None, *, binary: bool = False, encoding: str = "utf-8", newline: str | None = None
):
    """Replace ``path`` with ``data`` (str or bytes) in one step, or, without ``data``,
    return a context manager giving a file object whose content replaces ``path`` when
    the ``with`` block ends without an exception (an exception leaves ``path`` as it was).

    Args:
        path: the file to write; its folder must exist.
        data: the whole content; None to use the result with ``with``.
        binary: with ``with``, a binary file object (``"wb"``: a zip archive...).
        encoding: for text.
        newline: as ``open()``'s (``""`` for the ``csv`` module).

    Returns:
        ``path`` as a :class:`pathlib.Path` when ``data`` is given, else the context manager.

    Raises:
        OSError: the folder is missing or not writable, the disk is full...; the old
            file is then untouched and no temporary file is left.
    """
    if data is None:
        return _Writer(path, "wb" if binary else "w", encoding, newline)
    writer = _Writer(
        path, "wb" if isinstance(data, (bytes, bytearray, memoryview)) else "w", encoding, newline
    )
    with writer as f:
        f.write(data)
    return pathlib.Path(path)
