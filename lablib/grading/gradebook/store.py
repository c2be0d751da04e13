"""The stored gradebook: one grading output folder's state, read and written here only.

A folder that ``lablib grade`` wrote keeps the class gradebook in four files, each
written whole or not at all (:func:`~lablib.grading.atomic.atomic_write`):

==================  ============================================================
``grades.json``     every row in full (:meth:`GradebookFolder.write`), the paths
                    not graded (``skipped``), the people's grades included
                    (``reviews_through``), the late policy and the roster match
``late.json``       the late policy (:meth:`GradebookFolder.keep_late_policy`)
``.roster.csv``     a copy of the roster (:meth:`GradebookFolder.keep_roster`)
``.options.json``   how the submissions were read (``layout``:
                    :meth:`GradebookFolder.keep_layout`), so that a regrade reads
                    new downloads the same way
``.lock``           the writers' lock (:meth:`GradebookFolder.writing`): one
                    writer at a time reads, merges and writes the gradebook
==================  ============================================================

A regrade, ``lablib report``, the review page, ``lablib export`` and the printouts read
them back through :class:`GradebookFolder`, never through a report: the other reports
(``grades.csv``, ``summary.json``, feedback) are written from the gradebook and never
read again. A ``grades.json`` that exists but cannot be read is a
:class:`GradebookError`, never an empty gradebook: a regrade that took it for one would
drop every other student's row and feedback.

``grades.json``: each submission's entry is its
:meth:`~lablib.grading.results.SubmissionResult.to_dict` with ``status`` as text (as in
``grades.csv``), ``problems`` and ``missing`` as lists, and ``feedback``: the stem of its
feedback files. Its ``identity`` is who submitted it, resolved once at grading and kept
(:mod:`lablib.grading.gradebook.identity`). With a roster, each entry has its
``student`` (or null) and ``roster`` lists what matched nothing (and, in
``unmatched_reasons``, why, where the matching said). A lab with written answers adds
``questions`` (id -> points and title) and, per entry, ``answers``,
``written`` (each question's :class:`~lablib.grading.results.PersonScore`), ``ungraded``,
``total`` (automatic + people's points) and ``max_total``; ``reviews_through`` is the
review log's last change included (``lablib export`` refuses a gradebook older than its
reviews). With a late policy, ``late_policy`` and per entry ``late``
(:class:`~lablib.grading.gradebook.late.Late`, null without a submission time; its
``computed`` false where the time, or the student's extension, could not be read);
``total`` then subtracts the penalty. A group's entry (an identity with ``others``) adds
``members``: each member's ``key``, ``name``, own ``late`` (their own extension or due
date) and ``total``, the row's identity first (``total`` and ``late`` are its).

Example::

    folder = GradebookFolder("out")
    rows = folder.results("lab1_attention")     # [] when nothing was graded there yet
    folder.write(Gradebook.of(lab, rows, skipped=folder.skipped(folder.read())))
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import time

try:
    import fcntl
except ImportError:  # Windows: no writers' lock (one writer at a time is then the user's care)
    fcntl = None

from lablib.grading.atomic import atomic_write
from lablib.grading.gradebook.book import Gradebook
from lablib.grading.gradebook.late import LateError, LatePolicy
from lablib.grading.gradebook.roster import Roster
from lablib.grading.results import SubmissionResult
from lablib.grading.submissions import LAYOUTS

__all__ = [
    "GradebookFolder",
    "GradebookError",
    "result_from_entry",
    "GRADEBOOK_FILE",
    "POLICY_FILE",
    "ROSTER_COPY",
    "OPTIONS_FILE",
]

#: The gradebook's file in a grading output folder.
GRADEBOOK_FILE = "grades.json"
#: The late policy's file: later regrades and ``lablib report`` apply the same one.
POLICY_FILE = "late.json"
#: The roster a gradebook was written with: reports written again later (``lablib
#: report``, the review page) name the same students.
ROSTER_COPY = ".roster.csv"
#: The options a regrade keeps (``layout``): a class of students' own folders is read as
#: one folder per student again, never by LMS shapes a student could plant.
OPTIONS_FILE = ".options.json"
#: The writers' lock (:meth:`GradebookFolder.writing`); empty, never read.
LOCK_FILE = ".lock"
#: How long a writer waits for another's write (seconds).
WRITER_WAIT = 600.0

#: What to do about a gradebook that cannot be read, in every message that says so.
WHAT_TO_DO = (
    "Nothing in the folder was changed. Restore grades.json (from a backup or version "
    "control) and run the command again, or grade every submission again into a new "
    "gradebook with `lablib grade ... --fresh` (rows of submissions not graded in that "
    "run are then dropped)."
)


class GradebookError(ValueError):
    """A ``grades.json`` that exists but cannot be read as a gradebook: cut short (a
    writer stopped midway by an older lablib, a full disk), edited by hand, or another
    file. Never taken for an empty gradebook: a regrade that did so would drop every
    other student's row and feedback."""


def result_from_entry(entry: dict) -> SubmissionResult:
    """The :class:`SubmissionResult` of one ``submissions`` entry: the inverse of
    :meth:`GradebookFolder.write`'s entry (status from ``problems``, ``missing`` and
    ``raised``; the keys the gradebook adds are left aside). Raises KeyError, TypeError or
    ValueError on an entry it cannot read."""
    return SubmissionResult.from_dict(dict(entry, status=entry))  # Status.from_dict reads its keys


def _entry(book: Gradebook, result: SubmissionResult) -> dict:
    """One row of ``grades.json``."""
    entry = result.to_dict()
    entry.update(result.status.to_dict())  # problems, missing, raised: read by result_from_entry
    entry.update(status=result.status.text(), feedback=f"feedback/{book.stems[result.submission]}")
    row = book.row(result)
    if book.questions:
        entry.update(
            written={q.id: score.to_dict() for q, score in row.written}, ungraded=row.pending
        )
    if book.late_policy is not None:
        entry["late"] = None if row.late is None else row.late.to_dict()
        if row.members:  # a group: each member's own lateness and total
            entry["members"] = row.members_dict()
    if book.questions or book.late_policy is not None:
        entry.update(total=row.total, max_total=row.max_total)
    if book.roster is not None:
        student = book.student(result)
        entry["student"] = None if student is None else dataclasses.asdict(student)
    return entry


class GradebookFolder:
    """The stored gradebook of one grading output folder (see the module's docstring).

    Args:
        out_dir: the folder ``lablib grade`` writes (it need not exist yet).
    """

    def __init__(self, out_dir):
        self.out = pathlib.Path(out_dir)

    @property
    def path(self) -> pathlib.Path:
        """``grades.json``."""
        return self.out / GRADEBOOK_FILE

    # ------------------------------------------------------------------ grades.json

    def read(self) -> dict:
        """The parsed ``grades.json``.

        Raises:
            FileNotFoundError: there is no ``grades.json`` (no gradebook yet).
            OSError: it cannot be opened.
            GradebookError: it is not a gradebook (not UTF-8, not JSON, cut short, not an
                object with ``lab`` and ``submissions``): the message names the file,
                what is wrong and what to do.
        """
        path = self.path
        raw = path.read_bytes()
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise GradebookError(
                f"{path} cannot be read: it is not UTF-8 text (byte {exc.start} "
                f"of {len(raw)}). {WHAT_TO_DO}"
            ) from None
        except json.JSONDecodeError as exc:
            if not raw.strip():
                raise GradebookError(
                    f"{path} cannot be read: it is empty ({len(raw)} bytes). {WHAT_TO_DO}"
                ) from None
            cut = (
                ""
                if raw.rstrip().endswith(b"}")
                else (" (it does not end as a gradebook ends: cut short while being written?)")
            )
            raise GradebookError(
                f"{path} cannot be read: not valid JSON at line {exc.lineno}, "
                f"column {exc.colno} ({exc.msg}; {len(raw)} bytes){cut}. "
                f"{WHAT_TO_DO}"
            ) from None
        except RecursionError:
            raise GradebookError(
                f"{path} cannot be read: it is nested too deeply to be a gradebook. {WHAT_TO_DO}"
            ) from None
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("lab"), str)
            or not isinstance(data.get("submissions"), list)
        ):
            raise GradebookError(
                f"{path} is JSON but not a gradebook written by `lablib grade` "
                f'(expected an object with "lab" and a list "submissions"). '
                f"{WHAT_TO_DO}"
            )
        return data

    def results(self, lab_name: str, data: dict | None = None) -> list[SubmissionResult]:
        """The rows of the stored gradebook (of ``data``, when already read); [] only when
        there is no ``grades.json`` at all.

        Raises:
            GradebookError: ``grades.json`` exists but cannot be read (cut short, not
                JSON, an entry that is not a submission's).
            OSError: ``grades.json`` exists but cannot be opened.
            ValueError: the folder holds the gradebook of another lab.
        """
        if data is None:
            try:
                data = self.read()
            except FileNotFoundError:
                return []
        if data.get("lab") != lab_name:
            raise ValueError(
                f"{self.out} holds the gradebook of {data.get('lab')!r}, not of "
                f"{lab_name!r}: grade into another folder (-o), or pass --fresh to "
                f"replace it."
            )
        results = []
        for number, entry in enumerate(data["submissions"], 1):
            try:
                results.append(result_from_entry(entry))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                name = entry.get("submission") if isinstance(entry, dict) else None
                named = f" ({name!r})" if isinstance(name, str) else ""
                raise GradebookError(
                    f"{self.path}: submission {number}{named} cannot be read "
                    f"({type(exc).__name__}: {str(exc)[:200]}). {WHAT_TO_DO}"
                ) from None
        return results

    def skipped(self, data: dict) -> tuple[tuple[str, str], ...]:
        """``(path, reason)`` of the paths the stored gradebook ``data`` lists as not
        graded. A gradebook written before lablib kept them there (no ``skipped`` key)
        had them only in its summary: they are read from ``summary.json`` once, leniently
        (an unreadable summary gives none), and kept in the gradebook from then on.

        Raises:
            GradebookError: ``skipped`` is there but not a list of ``{path, reason}``.
        """
        if "skipped" not in data:
            return self._skipped_before_0_4()
        try:
            return tuple((str(s["path"]), str(s["reason"])) for s in data["skipped"])
        except (TypeError, KeyError) as exc:
            raise GradebookError(
                f'grades.json: "skipped" is not a list of {{"path", '
                f'"reason"}} ({type(exc).__name__}: {exc}). '
                f"{WHAT_TO_DO}"
            ) from None

    def _skipped_before_0_4(self) -> tuple[tuple[str, str], ...]:
        """The skipped paths of a gradebook from lablib 0.3 or earlier, from its summary."""
        try:
            summary = json.loads((self.out / "summary.json").read_text(encoding="utf-8"))
            return tuple((str(s["path"]), str(s["reason"])) for s in summary.get("skipped", []))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return ()

    def write(self, book: Gradebook) -> pathlib.Path:
        """Write ``grades.json`` of ``book`` (the folder must exist); returns its path."""
        lab = book.lab
        data = {
            "lab": lab.name,
            "title": lab.title,
            "pieces": {
                p: {
                    "objects": list(lab.pieces[p].objects),
                    "description": lab.pieces[p].description,
                }
                for p in book.pieces
            },
            "questions": {q.id: {"points": q.points, "title": q.title} for q in book.questions},
            "reviews_through": book.reviews_through,
            "late_policy": None if book.late_policy is None else book.late_policy.to_dict(),
            "skipped": [{"path": path, "reason": reason} for path, reason in book.skipped],
            "submissions": [_entry(book, r) for r in book.results],
        }
        if book.roster is not None:
            data["roster"] = {
                "unmatched_submissions": list(book.roster.unmatched),
                "unmatched_reasons": dict(book.roster.reasons),
                "students_without_submission": [
                    dataclasses.asdict(s) for s in book.roster.without_submission
                ],
            }
        return atomic_write(self.path, json.dumps(data, indent=1, default=str) + "\n")

    # ------------------------------------------------------- the roster and the policy

    def roster(self) -> Roster | None:
        """The roster kept with the gradebook (``.roster.csv``), or None."""
        kept = self.out / ROSTER_COPY
        return Roster.load(kept) if kept.is_file() else None

    def keep_roster(self, roster: Roster | None) -> None:
        """Keep a copy of ``roster``'s file: later regrades and reports use it."""
        kept = self.out / ROSTER_COPY
        if (
            roster is not None
            and roster.source
            and os.path.isfile(roster.source)
            and not (kept.exists() and os.path.samefile(roster.source, kept))
        ):
            atomic_write(kept, pathlib.Path(roster.source).read_bytes())

    def late_policy(self) -> LatePolicy | None:
        """The late policy kept with the gradebook (``late.json``), or None.

        Raises:
            LateError: ``late.json`` exists but cannot be read as a policy.
        """
        path = self.out / POLICY_FILE
        if not path.is_file():
            return None
        try:
            return LatePolicy.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError) as exc:
            raise LateError(
                f"{path} cannot be read as a late policy ({exc}); give --due again or delete it."
            ) from None

    def keep_late_policy(self, policy: LatePolicy | None) -> None:
        """Keep ``policy`` (``late.json``) for later regrades and reports; None removes
        the one kept (a fresh gradebook without a policy)."""
        path = self.out / POLICY_FILE
        if policy is None:
            path.unlink(missing_ok=True)
        else:
            atomic_write(path, json.dumps(policy.to_dict(), indent=1) + "\n")

    # ------------------------------------------------------------------ one writer

    @contextlib.contextmanager
    def writing(self, wait: float = WRITER_WAIT):
        """Hold the folder's writer lock (``.lock``, an exclusive ``flock``) while the
        gradebook is read, merged and written: two ``lablib grade`` runs, or a grade run
        and the review page's write, into one folder take turns instead of each writing
        the gradebook it read, dropping the other's rows and feedback. Waits up to
        ``wait`` seconds for another writer (a write takes seconds: the grading itself
        is done outside the lock).

        Raises:
            GradebookError: another writer held it for ``wait`` seconds.
            FileNotFoundError: the folder does not exist.
        """
        if fcntl is None:
            yield
            return
        fd = self._lock_file()
        try:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if not isinstance(exc, BlockingIOError):  # ENOLCK: a file system without locks
                        raise GradebookError(
                            f"{self.out / LOCK_FILE} cannot be locked ({exc.strerror}): this "
                            f"file system keeps no locks, so two lablib commands writing the "
                            f"folder at once could drop each other's rows. Grade into a folder "
                            f"on a local disk. Nothing was written."
                        ) from None
                    if time.monotonic() >= deadline:
                        raise GradebookError(
                            f"Another lablib command (lablib grade, lablib report or the review "
                            f"page) has been writing {self.out} for {wait:.0f} s; nothing was "
                            f"written. Wait for it to finish and run the command again, or grade "
                            f"into another folder."
                        ) from None
                    time.sleep(0.2)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def _lock_file(self) -> int:
        """The lock file's descriptor: made with the umask's permissions (a folder shared
        by a group of graders: each may lock it), opened read-only where it is another's
        (an exclusive lock needs no write access).

        Raises:
            GradebookError: it can be neither made nor opened.
        """
        path = self.out / LOCK_FILE
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:
            try:
                return os.open(path, os.O_RDONLY)
            except OSError as exc:
                raise GradebookError(
                    f"{path} cannot be opened ({exc.strerror}): lablib needs it to write the "
                    f"folder's gradebook one command at a time. Let this user read it (or the "
                    f"folder), or grade into another folder. Nothing was written."
                ) from None

    def check_writable(self) -> None:
        """Raise :class:`GradebookError` now, before a long grading run, where the writers'
        lock could not be taken later (the lock file cannot be opened)."""
        if fcntl is not None and self.out.is_dir():
            os.close(self._lock_file())

    # ------------------------------------------------------------------ the layout

    def layout(self) -> str | None:
        """How the kept gradebook's submissions were read (``"auto"`` or ``"plain"``), or
        None where no gradebook kept it (a new folder, or one graded by lablib 0.9 or
        earlier).

        Raises:
            GradebookError: ``.options.json`` exists but cannot be read, or names another
                layout (nothing is guessed: a plain class read by LMS shapes would take
                files a student planted for a classmate's).
        """
        path = self.out / OPTIONS_FILE
        if not path.is_file():
            return None
        try:
            layout = json.loads(path.read_text(encoding="utf-8"))["layout"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            layout = exc
        if layout not in LAYOUTS:
            problem = (
                f"{type(layout).__name__}: {layout}"
                if isinstance(layout, Exception)
                else (f"the layout {layout!r}")
            )
            raise GradebookError(
                f'{path} cannot be read ({problem}); expected {{"layout": "auto"}} or '
                f'{{"layout": "plain"}}. Give --layout auto or --layout plain to the '
                f"command (it writes the file again), or delete the file."
            )
        return layout

    def keep_layout(self, layout: str | None) -> None:
        """Keep ``layout`` (``.options.json``) for later regrades; None forgets the one
        kept (a fresh gradebook read by the default)."""
        if layout is None:
            (self.out / OPTIONS_FILE).unlink(missing_ok=True)
            return
        if layout not in LAYOUTS:
            raise ValueError(f"layout is {layout!r}; expected one of {', '.join(LAYOUTS)}")
        atomic_write(self.out / OPTIONS_FILE, json.dumps({"layout": layout}) + "\n")
