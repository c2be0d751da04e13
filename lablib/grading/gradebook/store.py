"""The stored gradebook: one grading output folder's state, read and written here only.

A folder that ``lablib grade`` wrote keeps the class gradebook in one file,
``grades.json``, written whole or not at all (:func:`~lablib.grading.atomic.atomic_write`):
its writing is the one moment a grading run, ``lablib report`` or the review page
changes the folder's state. Beside it:

======================  ==========================================================
``grades.json``         every row in full (:meth:`GradebookFolder.write`), the paths
                        not graded (``skipped``), the people's grades included
                        (``reviews_through``), the roster match, and what later
                        regrades keep: the late policy (``late_policy``), how the
                        submissions were read (``kept.layout``) and which copy of the
                        roster the rows were resolved with (``kept.roster``)
``.roster-<hex>.csv``   that copy of the roster (:meth:`GradebookFolder.keep_roster`),
                        named by the first 16 hex digits of its SHA-256, which
                        ``grades.json`` records whole: written before ``grades.json``,
                        and a copy of other bytes is never written over, so the copy a
                        ``grades.json`` names is the one its rows were resolved with
``.lock``               the writers' lock (:meth:`GradebookFolder.writing`): one
                        writer at a time reads, merges and writes the gradebook
======================  ==========================================================

A run stopped at any moment (Ctrl-C, a machine gone) leaves the gradebook as it was
before the run or as the run wrote it, never a gradebook with another run's policy,
layout or roster. The reports (``grades.csv``, feedback, the summary) are written from
it, some before and some after it: after a stopped run, ``lablib report`` writes them
again from the gradebook. A gradebook written before ``grades.json`` kept these (no ``kept``
key) had them in files of their own (``late.json``, ``.options.json``, ``.roster.csv``):
they are read from there, and removed once ``grades.json`` keeps them, at its next write.

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
review log's last change included, and ``reviews_log`` which log and which change that is
(``lablib export`` refuses a gradebook older than its reviews, and one whose log is another
or lost that change; writing it again refuses where its log is gone). With a late policy, ``late_policy`` and per entry ``late``
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
import hashlib
import json
import os
import pathlib
import re
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
    "ROSTER_COPY",
]

#: The gradebook's file in a grading output folder.
GRADEBOOK_FILE = "grades.json"
#: The copy of the roster a gradebook was written with (``digest``: the first 16 hex
#: digits of its SHA-256): reports written again later (``lablib report``, the review
#: page) and regrades name the same students.
ROSTER_COPY = ".roster-{digest}.csv"
_COPY_NAME = re.compile(r"\.roster-[0-9a-f]{16}\.csv")
#: The files a gradebook written before ``grades.json`` kept its options had them in:
#: read where its ``grades.json`` has no ``kept``, removed at its next write.
BEFORE_KEPT = {"late_policy": "late.json", "layout": ".options.json", "roster": ".roster.csv"}
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
        self._read_as = None  # (grades.json's inode, mtime, size), its parsed content

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
                JSON, an entry that is not a submission's, two rows of one name).
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
        names = [r.submission for r in results]
        twice = (
            sorted({n for n in names if names.count(n) > 1}) if len(set(names)) < len(names) else []
        )
        if twice:  # a hand edit: lablib writes one row per name
            raise GradebookError(
                f"{self.path} has several rows named {[n[:80] for n in twice[:5]]}; a gradebook "
                f"has one row per submission. {WHAT_TO_DO}"
            )
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
            "reviews_log": book.reviews_log,
            "late_policy": None if book.late_policy is None else book.late_policy.to_dict(),
            "skipped": [{"path": path, "reason": reason} for path, reason in book.skipped],
            "kept": self._kept_for(book),
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
        try:
            before = self._kept() is None
        except (GradebookError, OSError):  # replaced whole (--fresh): its files go with it
            before = True
        path = atomic_write(self.path, json.dumps(data, indent=1, default=str) + "\n")
        self._tidy(data["kept"], before)
        return path

    def _kept_for(self, book: Gradebook) -> dict:
        """``kept`` of the gradebook ``book`` is written as: what the book says it keeps
        (``lablib grade``; a report written again gives the roster only), and for what it
        does not say, what the folder keeps now, carried as it is."""
        given = dict(book.kept or {})
        missing = {"layout", "roster"} - set(given)
        if missing:
            now = self._kept()
            if now is None:  # a gradebook of before: its files' options, kept from now on
                now = {}
                if "layout" in missing:
                    now["layout"] = self.layout()
                if "roster" in missing:
                    now["roster"] = self.keep_roster(self.roster())
            given = {**now, **given}
        return {"layout": given.get("layout"), "roster": given.get("roster")}

    def _tidy(self, kept: dict, before: bool) -> None:
        """After ``grades.json`` is written: remove the roster copies it does not name and,
        where it replaced a gradebook of before (``before``), that gradebook's own files
        (none of them is read again)."""
        roster = (kept.get("roster") or {}).get("file")
        old = [self.out / name for name in BEFORE_KEPT.values()] if before else []
        old += [
            p
            for p in self.out.glob(ROSTER_COPY.format(digest="*"))
            if _COPY_NAME.fullmatch(p.name) and p.name != roster
        ]
        for path in old:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)

    def _stored(self) -> dict | None:
        """The parsed ``grades.json`` (read again only when it changed), or None where
        there is none."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if self._read_as is None or self._read_as[0] != stamp:
            self._read_as = (stamp, self.read())
        return self._read_as[1]

    def _kept(self, data: dict | None = None) -> dict | None:
        """``grades.json``'s ``kept`` (of ``data``, when already read): {} where there is
        no ``grades.json`` (nothing kept), None where it was written before it kept its
        options.

        Raises:
            GradebookError: ``grades.json`` cannot be read, or its ``kept`` is not an object.
        """
        data = self._stored() if data is None else data
        if data is None:
            return {}
        if "kept" not in data:
            return None
        kept = data["kept"]
        if not isinstance(kept, dict):
            raise GradebookError(
                f'{self.path}: "kept" is not an object ({type(kept).__name__}). {WHAT_TO_DO}'
            )
        return kept

    # ------------------------------------------------------- the roster and the policy

    def roster(self) -> Roster | None:
        """The roster the gradebook was written with (its copy, named in ``grades.json``),
        or None.

        Raises:
            GradebookError: the copy ``grades.json`` names is missing or is not the file it
                was written with (its SHA-256 differs), or ``grades.json`` cannot be read.
        """
        kept = self._kept()
        if kept is None:  # a gradebook of before: its own copy
            copy = self.out / BEFORE_KEPT["roster"]
            return Roster.load(copy) if copy.is_file() else None
        entry = kept.get("roster")
        if entry is None:
            return None
        name = entry.get("file") if isinstance(entry, dict) else None
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if not (
            isinstance(digest, str)
            and re.fullmatch("[0-9a-f]{64}", digest)
            and name == ROSTER_COPY.format(digest=digest[:16])
        ):
            raise GradebookError(
                f'{self.path}: "kept.roster" is {str(entry)[:200]}; expected {{"file": '
                f'".roster-<16 hex digits>.csv", "sha256": "<its 64 hex digits>"}}, as lablib '
                f"writes it. Give the roster again (--roster) to lablib grade or lablib report."
            )
        copy = self.out / name
        try:
            if not copy.is_file():  # a folder, a pipe: nothing to wait on
                raise FileNotFoundError(2, "no such file")
            raw = copy.read_bytes()
        except OSError as exc:
            raw, problem = None, f"it cannot be read ({exc.strerror})"
        if raw is not None and hashlib.sha256(raw).hexdigest() != digest:
            problem = "it was changed since"
        elif raw is not None:
            return Roster.load(copy, raw)  # the bytes checked
        raise GradebookError(
            f"{copy} is the copy of the roster {self.path.name} was written with, and "
            f"{problem}. If another lablib command was writing the folder at that moment, "
            f"run this one again; otherwise give the roster again (lablib grade or lablib "
            f"report with --roster): the command keeps a new copy."
        )

    def keep_roster(self, roster: Roster | None) -> dict | None:
        """Copy ``roster``'s file into the folder for the gradebook about to be written
        (``.roster-<digest>.csv``, written once, never over another copy) and return
        ``grades.json``'s ``kept.roster`` for it; None without a roster (or one not read
        from a file). The copy holds the bytes the roster was read from
        (``Roster.raw``), not the file as it is now. The copy counts once ``grades.json``
        names it."""
        raw = None if roster is None else roster.raw
        if raw is None:  # made in code: its file, if it has one
            if roster is None or not roster.source or not os.path.isfile(roster.source):
                return None
            raw = pathlib.Path(roster.source).read_bytes()
        digest = hashlib.sha256(raw).hexdigest()
        name = ROSTER_COPY.format(digest=digest[:16])
        copy = self.out / name
        try:
            same = copy.is_file() and copy.read_bytes() == raw
        except OSError:
            same = False
        if not same:
            atomic_write(copy, raw)
        return {"file": name, "sha256": digest}

    def late_policy(self) -> LatePolicy | None:
        """The late policy the gradebook was written with (``grades.json``'s
        ``late_policy``), or None.

        Raises:
            LateError: the policy kept cannot be read as one.
            GradebookError: ``grades.json`` cannot be read.
        """
        kept = self._kept()
        stored = self._stored() or {}
        if kept is None and "late_policy" not in stored:  # a gradebook of before: its file
            where = self.out / BEFORE_KEPT["late_policy"]
            if not where.is_file():
                return None
            try:
                entry = json.loads(where.read_text(encoding="utf-8"))
            except ValueError as exc:
                entry = exc
        else:  # the one its rows were computed with
            where, entry = f'{self.path} ("late_policy")', stored.get("late_policy")
            if entry is None:
                return None
        try:
            if isinstance(entry, Exception):
                raise entry
            return LatePolicy.from_dict(entry)
        except (ValueError, TypeError) as exc:
            raise LateError(
                f"{where} cannot be read as a late policy ({exc}); give --due again (the "
                f"command keeps the new policy), or grade again with --fresh to start without."
            ) from None

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

    def layout(self, data: dict | None = None) -> str | None:
        """How the kept gradebook's submissions were read (``"auto"`` or ``"plain"``), or
        None where no gradebook kept it (a new folder, or one graded by lablib 0.9 or
        earlier). ``data``: the gradebook already read (:meth:`read`), whose rows the
        layout is wanted for; ``grades.json`` is read again otherwise, and a writer may
        have replaced it since.

        Raises:
            GradebookError: the layout kept cannot be read, or names another layout
                (nothing is guessed: a plain class read by LMS shapes would take files a
                student planted for a classmate's).
        """
        kept = self._kept(data)
        if kept is not None:
            layout, where = kept.get("layout"), f'{self.path} ("kept")'
        else:  # a gradebook of before: its own file
            where = self.out / BEFORE_KEPT["layout"]
            if not where.is_file():
                return None
            try:
                layout = json.loads(where.read_text(encoding="utf-8"))["layout"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                layout = exc
        if layout is None or layout in LAYOUTS:
            return layout
        problem = (
            f"{type(layout).__name__}: {layout}"
            if isinstance(layout, Exception)
            else f"the layout {layout!r}"
        )
        delete = "" if kept is not None else ", or delete the file"
        raise GradebookError(
            f"{where} cannot be read ({problem}); expected the layout auto or plain. Give "
            f"--layout auto or --layout plain to lablib grade (it keeps the one given){delete}."
        )
