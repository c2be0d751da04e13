"""Grade a batch of submissions: discover -> read -> run -> judge -> report.

Each stage has its own place: :mod:`~lablib.grading.submissions` (which notebooks),
:mod:`~lablib.grading.notebook` (read, normalise, find graded cells),
:mod:`~lablib.grading.run` (the sandboxed run), :mod:`~lablib.grading.judge` and
:mod:`~lablib.grading.report` (the writers); the released lab's set-up cells come from
:mod:`~lablib.grading.author.catalog`. This module only wires them together, runs
submissions in parallel and caches results by content hash.

Example::

    from lablib.grading.grade import grade
    from lablib.grading.options import GradeOptions
    results = grade("lab1", ["submissions/"], "out", GradeOptions(hidden_dirs=["hidden/"], jobs=2))
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import hashlib
import importlib
import importlib.metadata
import json
import os
import pathlib
import sys
import time
import warnings

from lablib._version import PACKAGE_DIR, __version__
from lablib.labs import find_lab
from lablib.grading import report
from lablib.grading.author import catalog
from lablib.grading.gradebook import GradebookError, GradebookFolder
from lablib.grading.gradebook.identity import RosterIndex, owner_of, resolve
from lablib.grading.gradebook.late import file_time, parse_time
from lablib.grading.gradebook.identity import lms_person as _lms_person
from lablib.grading.gradebook.similarity import (
    dynamic_code,
    graded_code,
    identical_files,
    similarity_hints,
)
from lablib.grading.judge import judge_in_sandbox, judge_submission, summarise, unreadable
from lablib.grading.judge.submission import NOT_CACHED
from lablib.grading.notebook import (
    InvalidNotebook,
    NotebookMoved,
    graded_cells,
    read_notebook,
    read_notebook_bytes,
    setup_sources,
    written_answers,
)
from lablib.grading.atomic import atomic_write
from lablib.grading.filenames import shown
from lablib.grading.results import Kind, Status, SubmissionResult, TestResult
from lablib.grading.review.store import DB_NAME, ReviewError, ReviewStore, check_log_kept
from lablib.grading.run import Limits, ProbeRequest, RunOutcome, run_submission
from lablib.grading.run.guard import BY_HAND
from lablib.grading.run.supervisor import STOPPING, stop_all
from lablib.grading.run.isolation import sandbox_possible
from lablib.grading.options import GradeOptions
from lablib.grading.labspec.model import LabSpec
from lablib.grading.labspec.registry import PUBLIC_TESTS_DIR, load_spec, with_hidden_tests
from lablib.grading.submissions import Found, LayoutWarning, find_submissions, warn_skipped

__all__ = [
    "grade",
    "grade_one",
    "rewrite_reports",
    "ResourcesWarning",
    "SubmissionRemoved",
    "SubmissionReplaced",
]

CACHE_VERSION = "8"


#: What the child's environment takes from the grader's and may change a run's outcome
#: (:func:`lablib.grading.run.supervisor._child_env`): part of the cache's key.
_KEYED_ENVIRONMENT = (
    "LABLIB_FAST",
    "PYTHONPATH",
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "TF_FORCE_GPU_ALLOW_GROWTH",
)
#: Distributions whose versions decide what a run computes (the references the judges
#: compare with run on them too, scikit-learn's macro-F1 among them; cloudpickle carries
#: the probes): part of the cache's key.
_KEYED_DISTRIBUTIONS = (
    "numpy",
    "scipy",
    "scikit-learn",
    "cloudpickle",
    "tensorflow",
    "keras",
    "tf-keras",
    "tf-models-official",
)
#: Files beside the spec and hidden tests are read into the key up to this many bytes in
#: all (then keyed by their size and time), and at most this many files are looked at.
_KEYED_BYTES = 256 * 2**20
_KEYED_FILES = 5_000


def _tests_fingerprint(lab: LabSpec, setup: list[str], limits: Limits, skip=()) -> str:
    """A hash of everything that decides a grade but the submission: lablib's version and
    every module of the package (runner, judges, the layers the judges' references use),
    Python's and the numerical distributions' versions, the child's environment, every
    file in the folders of the lab's spec and hidden tests (data a test loads included),
    its set-up cells and the limits. ``skip``: folders not to read there (the output
    folder and the submissions', where a course keeps them beside its tests)."""
    h = hashlib.sha256()
    h.update(
        f"{CACHE_VERSION}|{__version__}|{json.dumps(dataclasses.asdict(limits), sort_keys=True)}".encode()
    )
    # and whether the sandbox can run here (its limits differ from the grader's own)
    sandboxed = limits.isolate and sandbox_possible()
    h.update(f"|{sys.version}|{_versions()}|{_environment()}|sandbox={sandboxed}".encode())
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE_DIR)).encode() + b"\0" + path.read_bytes())
    for path in lab.source_files:
        h.update(b"spec\0" + pathlib.Path(path).read_bytes())
    skipped = {os.path.realpath(p) for p in skip}
    for folder in _course_folders(lab):
        _hash_folder(h, pathlib.Path(folder), skipped)
    for source in setup:
        h.update(b"setup\0" + source.encode())
    return h.hexdigest()


def _course_folders(lab: LabSpec) -> list[str]:
    """The real folders (links followed) of the lab's spec and hidden-test files that are
    not lablib's own: what the cache key reads and the sandbox hides."""
    package = os.path.realpath(PACKAGE_DIR) + os.sep
    folders = {os.path.dirname(os.path.realpath(p)) for p in lab.source_files}
    return sorted(f for f in folders if not (f + os.sep).startswith(package))


def _versions() -> str:
    found = []
    for name in _KEYED_DISTRIBUTIONS:
        try:
            found.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name}=none")
    return ",".join(found)


def _environment() -> str:
    return json.dumps({k: os.environ.get(k) for k in _KEYED_ENVIRONMENT}, sort_keys=True)


#: Folders beside the hidden tests whose files no judge reads: version control's stores
#: (their working files are keyed), Jupyter's autosaves, byte-code and tools' caches,
#: editors' settings, and Python environments (also any folder with a ``pyvenv.cfg``). Other
#: hidden folders are keyed (a ``.data/`` of expected values: changed, the class is graded
#: again).
_UNKEYED_FOLDERS = frozenset(
    {".git", ".hg", ".svn", ".ipynb_checkpoints", "__pycache__", ".pytest_cache", ".mypy_cache",
     ".ruff_cache", ".hypothesis", ".cache", ".tox", ".nox", ".venv", "venv", ".idea", ".vscode",
     "node_modules", ".Trash"}
)  # fmt: skip


def _hash_folder(h, folder: pathlib.Path, skipped: set) -> None:
    """Every file in ``folder`` and below (not in :data:`_UNKEYED_FOLDERS` or the
    ``skipped`` folders): its path and its bytes, within ``_KEYED_BYTES`` in all (after
    that: its size and time), the first ``_KEYED_FILES`` files."""
    budget, count = _KEYED_BYTES, 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in _UNKEYED_FOLDERS
            and not os.path.isfile(os.path.join(root, d, "pyvenv.cfg"))
            and os.path.realpath(os.path.join(root, d)) not in skipped
        )
        for name in sorted(files):
            count += 1
            if count > _KEYED_FILES:
                h.update(b"more files\0")
                return
            path = pathlib.Path(root, name)
            try:
                info = path.stat()
                if info.st_size <= budget:
                    data, budget = path.read_bytes(), budget - info.st_size
                else:
                    data = f"{info.st_size}|{info.st_mtime_ns}".encode()
            except OSError as exc:  # unreadable now: keyed by why, so a fix regrades
                data = f"unreadable: {exc.strerror}".encode()
            h.update(b"file\0" + str(path.relative_to(folder)).encode() + b"\0" + data)


def grade_one(
    lab: LabSpec,
    name: str,
    path: pathlib.Path,
    setup: list[str],
    *,
    limits: Limits = Limits(),
    mask=(),
    template=None,
    cache=None,
    force: bool = False,
    expect: str = "",
    alone: bool = True,
) -> SubmissionResult:
    # Over 80 lines for its signature and docstring: the read, the cache and the run's
    # outcomes in one place, each failure a result of its own; code: about 45 lines.
    """Grade one notebook (read, run, judge) and return its :class:`SubmissionResult`, with
    the answers to the lab's written questions and the graded code (``template``: the
    released notebook, to find answers by cell id and to tell the student's added cells).
    The file is read once (:func:`~lablib.grading.notebook.read_notebook_bytes`; ``expect``:
    the real path the listing saw), and the SHA-256 of the bytes graded is kept as
    ``identity["sha256"]`` ("" where nothing was read): what later steps compare, never
    the file read again. A path that led elsewhere when read than when listed is the
    grader's error (graded again, never scored as the student's).

    ``cache`` (a ``_Cache``): reuse the judged run of the same graded code unless ``force``;
    the answers and code are always this notebook's. ``alone``: nothing else was graded
    meanwhile; a run past a time limit beside others is not cached (:func:`grade` runs
    it again alone)."""
    try:
        raw = read_notebook_bytes(path, expect)
        nb, notes = read_notebook(raw)
    except NotebookMoved as exc:
        return _unread(unreadable(lab, name, str(path), str(exc), kind=Kind.GRADER_ERROR))
    except InvalidNotebook as exc:
        return _unread(unreadable(lab, name, str(path), str(exc)))
    except OSError as exc:  # the file system's doing (a file moved away, no permission, EIO)
        said = (
            f"the file could not be read ({exc.strerror or exc}); not the student's doing: make "
            f"it readable to the grading user and grade again"
        )
        return _unread(unreadable(lab, name, str(path), said, kind=Kind.GRADER_ERROR))
    found, cell_notes = graded_cells(nb)
    notes = [*notes, *cell_notes]
    key = cache.key(found, notes) if cache is not None else None
    result = cache.get(name, path, key) if cache is not None and not force else None
    if result is None:
        cells = [(piece, cell.source) for piece, cell in found.items()]
        probes = [
            ProbeRequest(
                t.id,
                t.probe,
                tuple(lab.pieces[t.piece].objects),
                t.timeout,
                BY_HAND if lab.pieces[t.piece].by_hand else (),
            )
            for t in lab.tests
            if t.piece in found
        ]
        outcome = (
            run_submission(setup, cells, probes, limits=limits, mask=mask)
            if probes
            else RunOutcome()
        )
        judging = time.monotonic()
        result = judge_submission(
            lab,
            name,
            str(path),
            found,
            outcome,
            notes=notes,
            sandbox=functools.partial(judge_in_sandbox, limits=limits, mask=mask),
            budget=limits.total_seconds,
        )
        # the judges' time (their sandboxed process's included) is the submission's too
        result.seconds = round(outcome.seconds + time.monotonic() - judging, 3)
        if cache is not None and (alone or not _timed_out(result)):
            cache.put(key, result)
    result.answers = written_answers(nb, lab.answers, template=template)
    result.code = {piece: cell.source for piece, cell in found.items()}
    # resolved at the merge; what was read of the file now is kept with it
    result.identity = {"sha256": hashlib.sha256(raw).hexdigest(), **_file_time(path)}
    return result


#: What a row's identity keeps from its grading (never read again from the file, which
#: may have changed since): the SHA-256 of the bytes graded, the file's modification time
#: then (``--late-from-file-times`` dates the row by it), and the version of the tests it
#: was graded with (:func:`tests_version`).
_READ_AT_GRADING = ("sha256", "file_time", "tests")


def tests_version(lab: LabSpec) -> str:
    """A short hash of the tests a row is graded with: every test's piece, name, points
    and whether it is hidden, each written question's points, and the files that define
    them (the lab's spec and hidden tests). Rows of one gradebook graded with different
    versions cannot be added up: :func:`grade` refuses to keep such rows beside new ones."""
    h = hashlib.sha256()
    for t in lab.tests:
        h.update(f"{t.piece}\0{t.name}\0{float(t.points)!r}\0{t.hidden}\n".encode())
    for q in lab.answers.values():
        h.update(f"answer\0{q.id}\0{float(q.points)!r}\n".encode())
    digests = sorted(
        hashlib.sha256(pathlib.Path(p).read_bytes()).digest() for p in lab.source_files
    )
    for digest in digests:  # by content only: the same files elsewhere are the same tests
        h.update(b"file\0" + digest)
    return h.hexdigest()[:16]


def _file_time(path) -> dict:
    """``{"file_time": ISO 8601 with the offset}`` of the file at ``path`` as graded, or {}
    where it cannot be read (a time out of range)."""
    when = file_time(path)
    return {"file_time": when} if when else {}


#: What ``lablib grade`` and the review page write at the top of an output folder (its
#: hidden files are never listed): left out of the skipped list where the output folder
#: is a submissions folder given.
_OWN_OUTPUTS = frozenset(
    {"grades.csv", "grades.json", "summary.html", "summary.json", "feedback", "instructor",
     "reviews.sqlite", "reviews.sqlite-wal", "reviews.sqlite-shm"}
)  # fmt: skip


def _without_output_folder(skipped: list, out, submissions) -> list:
    """``skipped`` less the grader's own files: everything in the output folder where it
    lies inside a submissions folder given (``-o subs/out``), lablib's own reports where
    it is one (``cd subs; -o .``). An output folder holding the submissions (``-o .``
    above them) hides nothing: a student's zip there is still named."""
    real = os.path.realpath(out)
    roots = [os.path.realpath(p) for p in submissions if os.path.isdir(p)]
    if any(real.startswith(root + os.sep) for root in roots):
        return [
            s for s in skipped if not (os.path.realpath(s[0]) + os.sep).startswith(real + os.sep)
        ]
    if real in roots:
        return [
            s
            for s in skipped
            if os.path.relpath(os.path.realpath(s[0]), real).split(os.sep)[0] not in _OWN_OUTPUTS
        ]
    return skipped


class ResourcesWarning(UserWarning):
    """The limits given ask for more than the machine has (``--jobs`` times ``--memory``
    beyond its memory): grading goes on, but a run under its own limit may be killed."""


def _warn_memory(jobs: int, limits: Limits, progress: bool) -> None:
    """A :class:`ResourcesWarning` where ``jobs`` runs at their memory limit would need
    more than the machine's memory (or the grader's cgroup's, in a container); with
    ``progress``, said on stderr at once, before grading."""
    import psutil

    from lablib.grading.run.cgroups import own_memory_limit

    try:
        machine = psutil.virtual_memory().total
    except OSError:  # /proc/meminfo hidden (systemd's ProcSubset=pid): advice only, none given
        machine = None
    known = [m for m in (machine, own_memory_limit()) if m]
    if not known:
        return
    total = min(known)
    asked = jobs * (limits.memory_mb or 0) * 2**20
    if jobs > 1 and asked > total:
        fits = max(1, int(total // (limits.memory_mb * 2**20)))
        said = (
            f"{jobs} notebooks graded at once, each allowed {limits.memory_mb:g} MB, may need "
            f"{asked / 2**30:.1f} GB; this machine has {total / 2**30:.1f} GB. A notebook under "
            f"its own limit can then be killed when the machine runs out (a grader error, "
            f"graded again alone at the end): give --jobs {fits} or a lower --memory."
        )
        if progress:
            print(f"memory: {said}", file=sys.stderr)
        else:
            warnings.warn(said, ResourcesWarning, stacklevel=3)


def _timed_out(result: SubmissionResult) -> bool:
    """Whether the run of ``result`` was stopped by a time limit (a cell's, a test's or
    the submission's whole budget): what the machine's load can decide."""
    return result.status.has(Kind.TIMEOUT) and not result.status.has(Kind.GRADER_ERROR)


#: Added to the notes of a notebook graded again alone (see :func:`_again_alone`).
AGAIN_ALONE = (
    "{what} while {jobs} notebooks were graded at once; graded again alone, and this second "
    "run is the one graded"
)


def _again_alone(spec, graded: list, items, work, jobs: int, progress: bool) -> list:
    """``graded`` with every notebook that ran past a time limit, or failed for the
    grader's own reasons (a grader error, or a run stopped before the submission's code
    ran: a start or set-up past its limit on a busy machine), while others were graded
    beside it (``jobs`` > 1) graded again,
    one at a time after the rest. A limit is wall time, and a machine busy with the
    class's other notebooks can make a notebook that fits its limits alone run past them,
    or run out of memory as a whole (the kernel then ends a run under its own limit: a
    grader error). The second run stands (it is the one a student graded alone would
    get), noted; a notebook graded from the cache is not run again (only a run alone is
    cached). ``items``: the ``(name, path, real path)`` graded."""
    why = {}
    for r in graded if jobs > 1 else ():
        if r.cached:
            continue
        if _timed_out(r):
            why[r.submission] = "ran past a time limit"
        elif r.status.has(Kind.GRADER_ERROR) or any(n.endswith(NOT_CACHED) for n in r.notes):
            why[r.submission] = "failed for the grader's own reasons (see its diagnostics)"
    if not why:
        return graded
    if progress:
        print(
            f"{len(why)} notebook(s) ran past a time limit or failed for the grader's own "
            f"reasons beside others: graded again alone",
            file=sys.stderr,
        )
    todo = [item for item in items if item[0] in why]
    redone = {r.submission: r for r in _in_parallel(spec, todo, work, 1, progress)}
    for r in redone.values():
        r.notes.append(AGAIN_ALONE.format(what=why[r.submission], jobs=jobs))
    return [redone.get(r.submission, r) for r in graded]


def _unread(result: SubmissionResult) -> SubmissionResult:
    """A result of a notebook not read: no bytes graded (``sha256`` ""), so nothing
    later reads its file to stand for them."""
    result.identity = {"sha256": ""}
    return result


class SubmissionRemoved(UserWarning):
    """A submission of the existing gradebook whose notebook no longer exists: its row is dropped."""


def _merged(
    previous: list[SubmissionResult],
    new: list[SubmissionResult],
    suffixed: dict | None = None,
    carried: set | None = None,
) -> list[SubmissionResult]:
    """The gradebook after grading ``new`` into ``previous``: a notebook graded again keeps
    its row's name and gets the new result; every other row stays, under its name, while
    its notebook exists; a new notebook whose name a kept row has gets the next free
    ``name-<k>`` (the people's grades of written answers are kept by name: a kept row
    renamed would hand them to the newcomer); rows whose notebook is gone are dropped with
    a :class:`SubmissionRemoved` warning (never silently). A notebook is one row: the
    kept rows graded on a notebook graded now (:func:`_graded_file`: the real path kept
    at grading, so a row whose path became a link to a classmate's notebook is not one
    of them), and the row of the same path as written (a folder given through a link
    that now leads to a new download), are its row only by :func:`_same_notebook`; the
    other rows graded on that notebook are dropped with the warning. A kept row is taken
    by one new row at most. ``suffixed`` gets ``{id(row): the name it had}`` of each new
    row so named; ``carried`` the ids of the new rows that kept their row's identity
    without a roster (:func:`_carry_identity`)."""
    by_path: dict[str, list] = {}
    for r in previous:
        by_path.setdefault(_graded_file(r), []).append(r)
    written = {os.path.abspath(r.path): r for r in previous}
    again, graded_as, matched = {}, {}, set()
    for r in new:
        real = _graded_file(r)
        candidates = [o for o in by_path.get(real, []) if id(o) not in matched]
        same_path = written.get(os.path.abspath(r.path))  # a link given that leads elsewhere now
        if (
            same_path is not None
            and id(same_path) not in matched
            and all(same_path is not o for o in candidates)
        ):
            candidates.append(same_path)
        match = _same_notebook(r, candidates)
        if match is not None:
            matched.add(id(match))
        again[id(r)], graded_as[real] = match, r
    kept = []
    for real, rows in by_path.items():
        for old in rows:
            if id(old) in matched:
                continue
            if real in graded_as:
                warnings.warn(
                    f"{old.submission} was in the gradebook for {old.path}, which is graded "
                    f"now as another row's notebook (a notebook is graded once): its row was "
                    f"dropped.",
                    SubmissionRemoved,
                    stacklevel=3,
                )
            elif _still_there(old):
                kept.append(old)
            else:
                warnings.warn(
                    f"{old.submission} was in the gradebook but {old.path} no longer exists: "
                    f"its row was dropped.",
                    SubmissionRemoved,
                    stacklevel=3,
                )
    taken = {r.submission.casefold() for r in kept}
    taken |= {old.submission.casefold() for old in again.values() if old is not None}
    for r in new:
        old = again[id(r)]
        if old is not None:
            r.submission = old.submission
            if _carry_identity(r, old) and carried is not None:
                carried.add(id(r))
    taken_by_new = {n.submission.casefold() for n in new}
    for r in new:
        if again[id(r)] is None and r.submission.casefold() in taken:
            name, k = r.submission, 2
            while f"{name}-{k}".casefold() in taken or f"{name}-{k}".casefold() in taken_by_new:
                k += 1
            if suffixed is not None:
                suffixed[id(r)] = r.submission
            r.submission = f"{name}-{k}"
        taken.add(r.submission.casefold())
    return [*new, *kept]


def _note_from_output(rows: list[SubmissionResult], out: pathlib.Path) -> None:
    """Each row's notebook as a path from the output folder (``from_output`` in its
    identity, both as given: an output folder reached through a link moves with the
    course), by which :func:`_relocated` finds it after the course folder (the
    submissions and the output folder in it) moved."""
    base = os.path.abspath(out)
    for r in rows:
        file = (r.identity or {}).get("file")
        if file and os.path.exists(file) and os.path.exists(r.path):
            try:
                r.identity["from_output"] = os.path.relpath(os.path.abspath(r.path), base)
            except ValueError:  # another drive (Windows): no path from the output folder
                r.identity.pop("from_output", None)


def _relocated(previous: list[SubmissionResult], out: pathlib.Path) -> None:
    """The kept rows whose notebook is no longer where it was graded but is where it was
    from the output folder (a course folder moved, graded again from anywhere): their
    ``file`` and path are that place now. A row graded with a relative path, the course
    moved and a regrade run from another folder, was dropped as gone and exported 0. Only
    the bytes the row was graded on, at a file no other row has: a notebook replaced since
    by a link to a classmate's is no longer the row's."""
    base = os.path.abspath(out)
    claimed = {(r.identity or {}).get("file") for r in previous}
    for r in previous:
        identity = r.identity or {}
        file, step = identity.get("file"), identity.get("from_output")
        if not file or not step or os.path.exists(file) or os.path.exists(r.path):
            continue
        there = os.path.normpath(os.path.join(base, step))
        real = os.path.realpath(there)
        if real in claimed or not identity.get("sha256") or not _no_link_below(base, step):
            continue
        try:
            digest = hashlib.sha256(read_notebook_bytes(there)).hexdigest()
        except (OSError, ValueError):
            continue
        if digest == identity["sha256"]:
            identity["file"], r.path = real, there
            claimed.add(real)


def _no_link_below(base: str, step: str) -> bool:
    """Whether the path ``step`` from the folder ``base`` leads to a regular file through
    no symbolic link once it goes down (``../subs/aaron/lab1.ipynb``: none at ``subs``,
    ``aaron`` or the file; the folders above, the course's, may be links)."""
    parts = pathlib.PurePath(step).parts
    ups = next((i for i, part in enumerate(parts) if part != ".."), len(parts))
    anchor = os.path.realpath(os.path.normpath(os.path.join(base, *parts[:ups])))
    there = os.path.normpath(os.path.join(base, step))
    return os.path.isfile(there) and os.path.realpath(there) == os.path.join(anchor, *parts[ups:])


def _still_there(row: SubmissionResult) -> bool:
    """Whether a kept row's notebook still exists: the file graded (its real path, kept at
    grading: a regrade run from another folder dropped every row graded with a relative
    path as gone), or its path as written (a course folder moved, graded again from its
    new place)."""
    return any(os.path.exists(path) for path in (_graded_file(row), row.path))


def _graded_file(result: SubmissionResult) -> str:
    """The notebook a row was graded on: the real path its identity kept at grading
    (``file``), or for a row of a gradebook without it, where its path leads now."""
    return str((result.identity or {}).get("file") or os.path.realpath(result.path))


def _crosses_link(path) -> bool:
    """Whether ``path`` (made absolute as written) passes through a symbolic link: the
    file or any folder above it."""
    absolute = pathlib.Path(os.path.abspath(path))
    return any(p.is_symlink() for p in (absolute, *absolute.parents))


def _same_notebook(new: SubmissionResult, rows: list) -> SubmissionResult | None:
    """Of the kept ``rows`` whose path leads to ``new``'s notebook, the one that is its
    row: the only one with its path as written, else the only one of its name, else the
    only one known to have been graded on it (its identity's ``file``: a regrade
    through another path to the same folder) or, of a gradebook without ``file``, whose
    path crosses no symbolic link; None where none or several are (``new`` is then a row
    of its own). A row whose path became a link, or passes through
    a folder that became one, to a classmate's notebook (``aaron/lab1.ipynb ->
    ../alice/lab1.ipynb``, ``aaron/sub -> ../alice``) is never taken for the classmate's
    at a regrade, whatever the rows' order."""
    tests = (
        lambda o: os.path.abspath(o.path) == os.path.abspath(new.path),
        lambda o: o.submission == new.submission,
        lambda o: bool((o.identity or {}).get("file")) or not _crosses_link(o.path),
    )
    for same in tests:
        hits = [o for o in rows if same(o)]
        if len(hits) == 1:
            return hits[0]
    return None


class SubmissionReplaced(UserWarning):
    """A row of the existing gradebook replaced by a newer submission of the same student
    from the same LMS (a new download graded into the gradebook): its row is dropped."""


def _carry_identity(new: SubmissionResult, old: SubmissionResult) -> bool:
    """The same notebook graded again (given by its path, without the folder that named
    its student): it keeps the student its row was matched to, with its time where none
    is known now; without a roster, the row's name and identity (it took the file's
    name, ``lab``, and a second student's regrade by path merged them). Not when the
    new resolution decided for itself: an LMS download's folder or file (what the
    download says is resolved again, so a row an earlier version matched wrongly is not
    kept matched) or a reason it matches no one. True where an unmatched row's identity
    was carried (its time is looked up again under it: :func:`_gradebook_after`)."""
    if new.identity.get("matched"):
        return False
    if (new.identity.get("lms") or {}).get("lms") or new.identity.get("why_unmatched"):
        return False
    if not old.identity.get("matched") and (
        (old.identity.get("lms") or {}).get("lms")
        or old.identity.get("why_unmatched")
        or new.identity.get("folder")  # found in a student's folder now: that names it
    ):
        return False
    carried = {
        k: v for k, v in old.identity.items() if k not in ("lms", "submitted_at", "time_source")
    }
    carried["lms"] = new.identity.get("lms") or old.identity.get("lms", {})
    if new.identity.get("submitted_at"):
        carried["submitted_at"], carried["time_source"] = (
            new.identity["submitted_at"],
            new.identity["time_source"],
        )
    else:
        carried["submitted_at"] = old.identity.get("submitted_at", "")
        carried["time_source"] = old.identity.get("time_source", "")
    if new.identity.get("file"):  # the notebook graded now
        carried["file"] = new.identity["file"]
    for key in _READ_AT_GRADING:  # its bytes ("": none read) and its file time, never the
        carried.pop(key, None)  # old notebook's
        if key in new.identity:
            carried[key] = new.identity[key]
    new.identity = carried
    return not carried.get("matched")


def _keep_file_times(previous: list[SubmissionResult], graded: list[SubmissionResult]) -> None:
    """The same bytes of the same student graded again keep the file time kept when they
    were first graded (the earliest, where several rows held them): a ``touch``, or the
    class's folder copied without its times (``cp -r``) and graded again from anywhere,
    under any path, gives the file a new time, which ``--late-from-file-times`` would
    have taken for a late submission. By the student resolved at grading (its
    ``identity.key``) and the SHA-256 of the bytes graded."""
    first: dict = {}
    for row in previous:
        identity = row.identity or {}
        key, digest, when = identity.get("key"), identity.get("sha256"), identity.get("file_time")
        if key and digest and when:
            known = first.get((key, digest))
            try:
                if known is None or parse_time(when) < parse_time(known):
                    first[(key, digest)] = when
            except ValueError:  # a time no longer readable: the time read now stands
                continue
    for row in graded:
        identity = row.identity or {}
        when = first.get((identity.get("key"), identity.get("sha256")))
        if when and identity.get("file_time"):
            identity["file_time"] = when


def _replaced(
    results: list[SubmissionResult], now: set, suffixed: dict | None = None
) -> list[SubmissionResult]:
    """``results`` less the kept rows (not graded now) of a student whose newer submission
    from the same LMS was graded now, each dropped with a :class:`SubmissionReplaced`
    warning (never silently). A newer row named ``name-<k>`` because the dropped row had
    its name (``suffixed``: :func:`_merged`'s) takes that name back: the same student's."""
    newer = {}
    for r in results:
        if id(r) in now and (person := _lms_person(r.identity)) is not None:
            newer.setdefault(person, r)
    out = []
    for r in results:
        person = _lms_person(r.identity) if id(r) not in now else None
        if (
            person is not None
            and person in newer
            and os.path.realpath(newer[person].path) != os.path.realpath(r.path)
        ):
            warnings.warn(
                f"{r.submission} ({r.path}) was replaced by the newer submission of the same student, "
                f"{newer[person].submission} ({newer[person].path}): its row was dropped.",
                SubmissionReplaced,
                stacklevel=3,
            )
            if (suffixed or {}).get(id(newer[person])) == r.submission:
                newer[person].submission = r.submission
            continue
        out.append(r)
    return out


def _found_of(result: SubmissionResult) -> Found:
    """A kept row as :func:`~lablib.grading.submissions.find_submissions` found it (what
    its identity recorded), to resolve it again."""
    identity = result.identity or {}
    return Found(
        result.submission,
        pathlib.Path(result.path),
        str(identity.get("where", "")),
        str(identity.get("folder", "")),
        dict(identity.get("lms") or {}),
    )


def _identify(found: Found, roster, times, spec, index=None) -> dict:
    """Who submitted ``found`` (:func:`~lablib.grading.gradebook.identity.resolve`), with
    where it was found and ``file``: the notebook's real path when it was graded, by
    which a regrade knows its row (:func:`_merged`) even after a link changed what a
    path leads to."""
    identity = resolve(found, roster, times=times, lab=spec, index=index)
    identity["where"], identity["folder"] = found.where, found.folder
    identity["file"] = found.real or os.path.realpath(found.path)
    return identity


def _again(result: SubmissionResult, roster, times, spec, index=None) -> dict:
    """A kept row's identity resolved again (a new roster or times file); a time its
    identity had from elsewhere (the download, an earlier times file) is kept when none
    is found now."""
    old = result.identity or {}
    identity = _identify(_found_of(result), roster, times, spec, index)
    # the notebook it was graded on, never what its path leads to now (a row of an older
    # gradebook without it stays without: its path may be a link a student made since)
    if old.get("file"):
        identity["file"] = old["file"]
        if old.get("from_output"):
            identity["from_output"] = old["from_output"]
    else:
        identity.pop("file", None)
    for key in _READ_AT_GRADING:  # of the bytes it was graded on ("" sha256: none read)
        if key in old:
            identity[key] = old[key]
    timed_by_file = str(old.get("time_source") or "").startswith(TIMES_FILE_SOURCE)
    outranked = timed_by_file and not str(identity.get("time_source") or "").startswith(
        (TIMES_FILE_SOURCE, "Gradescope")
    )  # a times file's time outranks the roster's (the same bytes: the row is not regraded)
    if old.get("submitted_at") and (not identity.get("submitted_at") or outranked):
        identity.update(submitted_at=old["submitted_at"], time_source=old.get("time_source", ""))
    return identity


@dataclasses.dataclass(frozen=True)
class _Cache:
    """Results by what decides them: a run's judged result is reused while the graded
    cells' code, what reading the notebook noticed and everything else that decides a
    grade (the fingerprint) are unchanged. Markdown (written answers) is not part of the
    key: editing an answer never runs the code again, and two notebooks with the same
    graded code share one run."""

    out_dir: pathlib.Path
    fingerprint: str

    def key(self, found, notes) -> str:
        """The key of graded cells ``found`` (piece -> cell) and what reading noticed."""
        h = hashlib.sha256(self.fingerprint.encode())
        fields = [("cell", piece, cell.source) for piece, cell in found.items()]
        fields += [("note", "", note) for note in notes]
        for kind, piece, text in fields:  # each field framed by its length: no two cuts of
            for part in (kind, piece, text):  # one text (a cell holding "\0cell\0") collide
                data = part.encode("utf-8", "surrogatepass")
                h.update(len(data).to_bytes(8, "big") + data)
        return h.hexdigest()

    def _path(self, key: str) -> pathlib.Path:
        return self.out_dir / ".cache" / f"{key[:32]}.json"

    def get(self, name: str, path, key: str) -> SubmissionResult | None:
        try:
            stored = json.loads(self._path(key).read_text())
            if stored.get("key") == key:
                result = SubmissionResult.from_dict(stored["result"])
                result.submission, result.path, result.cached = name, str(path), True
                return result
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def put(self, key: str, result: SubmissionResult) -> None:
        if result.status.has(Kind.GRADER_ERROR) or any(
            n.endswith(NOT_CACHED) for n in result.notes
        ):
            return  # the grader's fault or its environment's: grade it again next time
        cache = self._path(key)
        cache.parent.mkdir(parents=True, exist_ok=True)
        data = result.to_dict()
        data["answers"], data["code"], data["identity"] = {}, {}, {}
        atomic_write(
            cache, json.dumps({"key": key, "result": data}, default=str)
        )  # never half a file


def _masked_paths(spec: LabSpec, hidden_dirs, out: pathlib.Path, submissions) -> list[str]:
    """What the sandbox hides from the child even where it lies inside a folder the child
    sees (a venv inside the submissions folder): hidden tests, a spec given by path, the
    output folder and the submissions' folders."""
    spec_dirs = [spec.spec_dir] if spec.spec_dir and spec.spec_dir != PUBLIC_TESTS_DIR else []
    spec_dirs += _course_folders(spec)  # where a hidden test or spec file really lies (a link)
    folders = [
        pathlib.Path(p) if pathlib.Path(p).is_dir() else pathlib.Path(p).parent for p in submissions
    ]
    return sorted({os.path.realpath(p) for p in [*hidden_dirs, *spec_dirs, out, *folders]} - {"/"})


def _in_parallel(spec: LabSpec, items, work, jobs: int, progress: bool) -> list[SubmissionResult]:
    """``work(item)`` for every ``(name, path, ...)`` on ``jobs`` threads; a grader bug costs
    only its own submission (``grader-error``), never the batch. Interrupted (Ctrl-C,
    ``KeyboardInterrupt``): no further item starts, the runs going end at once
    (:data:`~lablib.grading.run.supervisor.STOPPING`), their processes ended, and the
    interruption goes on up; what was judged before is in the cache."""
    results: list[SubmissionResult] = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(items), desc=f"grading {spec.name}", unit="nb", file=sys.stderr)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        _collect(spec, pool, items, work, results, bar)
    except BaseException:  # Ctrl-C: nothing more is started, and the runs going end now
        if not STOPPING.is_set():
            stop_all()
        pool.shutdown(wait=False, cancel_futures=True)
        while True:  # a second Ctrl-C while the runs end changes nothing: they end
            try:
                pool.shutdown(wait=True)
                break
            except BaseException:  # noqa: BLE001 - KeyboardInterrupt again
                continue
        STOPPING.clear()  # every run has ended: a later one in this process may start
        raise
    pool.shutdown(wait=True)
    if bar is not None:
        bar.close()
    return results


def _collect(spec: LabSpec, pool, items, work, results: list, bar) -> None:
    """Submit ``work(item)`` for every item to ``pool`` and add each result to ``results``
    as it comes (a grader bug: a ``grader-error`` result for its submission)."""
    futures = {pool.submit(work, item): item for item in items}
    for future in concurrent.futures.as_completed(futures):
        name, path = futures[future][:2]
        try:
            results.append(future.result())
        except Exception as exc:  # noqa: BLE001 - a grader bug must not lose the batch
            tests = [
                TestResult.failed(
                    t, f"internal grader error: {type(exc).__name__}: {exc}", Kind.GRADER_ERROR
                )
                for t in spec.tests
            ]
            results.append(
                _unread(
                    summarise(
                        spec,
                        name,
                        str(path),
                        tests,
                        Status.of([Kind.GRADER_ERROR]),
                        notes=[f"grader error: {type(exc).__name__}: {exc}"],
                    )
                )
            )
        if bar is not None:
            bar.update(1)


def grade(
    lab, submissions, out_dir, options: GradeOptions | None = None, **settings
) -> list[SubmissionResult]:
    # Over 80 lines for its docstring: what a regrade keeps, every argument; code: 57 lines.
    """Grade submissions and write the reports into ``out_dir``.

    Grading into a folder that already holds this lab's gradebook updates it: the
    submissions graded now get new rows and feedback, every other row is kept while its
    notebook exists (a regrade of one student keeps the class), and a row whose notebook
    is gone is dropped with a :class:`SubmissionRemoved` warning.

    Args:
        lab: lab name (``"lab1"``), or path of a spec module/folder, a
            :class:`lablib.labs.Lab`, or a :class:`LabSpec`: resolved once, here. The
            hidden tests of ``options.hidden_dirs`` join a copy of the lab's spec for this
            call (a spec given gets those it lacks); the process's spec stays public.
        submissions: notebooks and/or folders of them.
        out_dir: where ``grades.csv``, ``grades.json``, ``feedback/`` and ``.cache/`` go.
        options: the :class:`~lablib.grading.options.GradeOptions` (hidden tests, limits,
            roster, late policy...; default: the defaults).
        **settings: options by name, replacing those of ``options``
            (``grade(lab, subs, out, jobs=1, timeout=20)``). A roster given resolves
            every row's identity (the kept ones' too; a copy stays in ``out_dir``, so a
            later regrade without one resolves its new rows with it); times are looked
            up again for every row; a late policy is kept in ``out_dir`` (in
            ``grades.json``, with the layout and the roster's copy).

    Returns:
        One :class:`SubmissionResult` per row of the gradebook written (those graded now
        and those kept).
    """
    options = GradeOptions.of(options, **settings)
    spec = (  # a spec given gets the hidden tests of options.hidden_dirs it lacks
        with_hidden_tests(lab, options.hidden_dirs)
        if isinstance(lab, LabSpec)
        else load_spec(find_lab(lab), options.hidden_dirs)
    )
    template, _ = read_notebook(catalog.find_lab_notebook(spec, lab_notebook=options.lab_notebook))
    setup = setup_sources(template)
    out = pathlib.Path(out_dir)
    folder = GradebookFolder(out)
    if not options.fresh:  # a gradebook that cannot be read is said before grading
        folder.results(spec.name)
    roster, times, late_policy = options.roster, options.times, options.late_policy
    if roster is None and not options.fresh:
        roster = folder.roster()  # a regrade keeps the class's roster
    if late_policy is None and not options.fresh:
        late_policy = folder.late_policy()
    layout = _layout(options, folder)
    skipped: list = []  # found before the output folder is made: a path refused (an
    found = find_submissions(submissions, refused=skipped, layout=layout)  # archive) leaves none
    skipped = _without_output_folder(skipped, out, submissions)
    out.mkdir(parents=True, exist_ok=True)
    folder.check_writable()  # before grading: its rows are written under the lock
    if spec.answers:  # and again there: the people's grades' log (--fresh too: see there)
        _check_review_log(out, spec.name)
    _close_to_others(out)
    warn_skipped(skipped, stacklevel=3)  # the CLI prints these; the summary lists them too
    version = tests_version(spec)
    limits = options.limits
    mask = _masked_paths(spec, options.hidden_dirs, out, submissions)
    cache = _Cache(out, _tests_fingerprint(spec, setup, limits, skip=mask))
    for module in spec.judge_imports:  # before any worker thread exists
        importlib.import_module(module)

    items = [(f.name, f.path, f.real) for f in found]
    jobs = min(options.workers, max(len(items), 1))
    _warn_memory(jobs, limits, options.progress)

    def work(item, alone=jobs == 1):
        name, path, real = item
        return grade_one(
            spec,
            name,
            path,
            setup,
            limits=limits,
            mask=mask,
            template=template,
            cache=cache,
            force=options.force,
            expect=real,
            alone=alone,
        )

    graded = _in_parallel(spec, items, work, jobs, options.progress)
    graded = _again_alone(
        spec, graded, items, functools.partial(work, alone=True), jobs, options.progress
    )
    for r in graded:
        r.identity["tests"] = version
    try:
        return _write_graded(out, folder, spec, graded, found, roster, times, late_policy,
                             layout, skipped, template, options, version)  # fmt: skip
    except KeyboardInterrupt:
        raise KeyboardInterrupt(INTERRUPTED_WRITING) from None


#: What a KeyboardInterrupt raised by :func:`grade` while it wrote says (before that, no
#: file of the gradebook was touched).
INTERRUPTED_WRITING = "while writing the gradebook"


def _write_graded(
    out, folder, spec, graded, found, roster, times, late_policy, layout, skipped, template,
    options, version,
) -> list[SubmissionResult]:  # fmt: skip
    """The gradebook written from ``graded`` and the rows kept (see :func:`grade`); its
    rows, sorted. ``version``: :func:`tests_version` of ``spec``, as ``graded`` keep it."""
    with folder.writing():  # the gradebook as it is now: another writer may have added rows
        previous = [] if options.fresh else folder.results(spec.name)
        _check_kept_unchanged(folder, options, roster, late_policy, layout)
        _relocated(previous, out)
        results = _gradebook_after(previous, graded, found, roster, times, spec, options)
        _note_from_output(results, out)
        now = {id(r) for r in graded}
        kept_rows = [r for r in results if id(r) not in now]
        _check_same_tests(folder, kept_rows, version, spec)
        # Kept for later regrades, in grades.json with the rows (one write: a run stopped
        # before it leaves the gradebook as it was): the layout given, the roster's copy.
        given = options.layout is not None or options.fresh
        kept = {
            "layout": options.layout if given else folder.layout(),
            "roster": folder.keep_roster(roster),
        }
        _write(
            out,
            spec,
            results,
            writers=options.writers,
            roster=roster,
            skipped=skipped,
            late_policy=late_policy,
            template=template,
            kept=kept,
        )
    return sorted(results, key=lambda r: r.submission)


def _check_kept_unchanged(
    folder: GradebookFolder, options: GradeOptions, roster, policy, layout: str
) -> None:
    """Under the writers' lock: the roster, late policy and layout this run took from the
    folder (none given) are still the ones it keeps. Another command may have written the
    folder while this run graded (``lablib report --roster``, a grade run with ``--due``
    or ``--layout``); its rows were resolved or read with the new ones, this run's with
    the old.

    Raises:
        GradebookError: they changed; nothing is written.
    """
    if options.fresh:
        return
    changed = []
    if options.roster is None and _roster_bytes(folder.roster()) != _roster_bytes(roster):
        changed.append("roster")
    if options.late_policy is None and folder.late_policy() != policy:
        changed.append("late policy")
    if options.layout is None and (folder.layout() or "auto") != layout:
        changed.append("layout")
    if changed:
        raise GradebookError(
            f"The {', '.join(changed)} kept in {folder.out} changed while this run graded "
            f"(another lablib command wrote the folder). Nothing was written: run the command "
            f"again (the notebooks already graded are not run again)."
        )


def _other_tests(row: SubmissionResult, version: str, lab: LabSpec) -> bool:
    """Whether ``row`` was graded with other tests than ``lab``'s (``version``): by its
    ``identity.tests``, or for a row of a gradebook graded before that was kept, by its
    tests' ids and points (a row with no test results, a notebook not read, is taken as
    it is)."""
    kept = (row.identity or {}).get("tests")
    if kept:
        return kept != version
    if not row.tests:
        return False
    now = {(f"{t.piece}::{t.name}", float(t.points)) for t in lab.tests}
    return {(t.id, float(t.max_score)) for t in row.tests} != now


def _check_same_tests(folder: GradebookFolder, kept: list, version: str, lab: LabSpec) -> None:
    """Rows kept beside the new ones must have been graded with the same tests
    (:func:`_other_tests`): scores out of other tests, or other points, cannot be added
    up in one gradebook, nor exported as one column.

    Raises:
        GradebookError: some were not; nothing is written.
    """
    other = [r for r in kept if _other_tests(r, version, lab)]
    if not other:
        return
    names = ", ".join(repr(shown(r.submission)[:60]) for r in other[:5])
    more = f" and {len(other) - 5} more" if len(other) > 5 else ""
    then = sorted({f"{r.max_score:g}" for r in other})
    hidden = sum(t.hidden for t in lab.tests)
    raise GradebookError(
        f"{len(other)} row(s) of the gradebook in {folder.out} ({names}{more}) were graded "
        f"with other tests than this run's (out of {' or '.join(then)} points then; now "
        f"{len(lab.tests)} tests out of {lab.max_score:g} points, {hidden} of them hidden: "
        f"the lab's spec or hidden tests changed since, or --tests differs: give the same "
        f"--tests as then). Grading only some notebooks "
        f"would keep their scores beside scores out of these tests. Nothing was written to "
        f"the gradebook: grade every submission again (the same folders; the notebooks this "
        f"run graded are not run again), or start a new gradebook with --fresh."
    )


def _roster_bytes(roster) -> bytes | None:
    return None if roster is None else roster.raw


def _gradebook_after(previous, graded, found, roster, times, spec, options) -> list:
    """The gradebook's rows after ``graded``: each new row's student resolved, the kept
    rows' again where a roster or times were given, merged (:func:`_merged`) and less
    the rows replaced by the same student's newer submission (:func:`_replaced`)."""
    by_name = {f.name: f for f in found}
    index = _roster_index(roster, found, previous)
    for r in graded:  # who submitted it: resolved once, here, and kept in the gradebook
        read = {k: v for k, v in (r.identity or {}).items() if k in _READ_AT_GRADING}
        r.identity = _identify(by_name[r.submission], roster, times, spec, index)
        r.identity.update(read)
    dated = _dated_before(previous)
    from_times = _times_file_times(previous) if times is None else None
    _keep_file_times(previous, graded)
    _reidentify(previous, roster, times, spec, new_roster=options.roster is not None, index=index)
    suffixed: dict = {}
    now = {id(r) for r in graded}
    carried: set = set()
    results = _replaced(_merged(previous, graded, suffixed, carried), now, suffixed)
    for r in results:  # its time under the row's name (it was looked up under the file's)
        if id(r) in carried and times is not None:
            fresh = _identify(_found_of(r), roster, times, spec, index)
            if str(fresh.get("time_source") or "").startswith(TIMES_FILE_SOURCE):
                r.identity.update(
                    submitted_at=fresh["submitted_at"], time_source=fresh["time_source"]
                )
    if options.roster is not None:  # the roster given dates the notebooks as graded
        _date_by_roster(results)
    else:
        _check_kept_times([r for r in results if id(r) in now], dated)
    if from_times is not None:  # no times file given now: the times of the ones given before
        _keep_times_file_times([r for r in results if id(r) in now], from_times)
    return results


#: Where a time read from a ``--times`` file came from (``identity.time_source``).
TIMES_FILE_SOURCE = "the times file"

#: Why a notebook graded without ``--times`` has no time, though a times file given to an
#: earlier grading run timed another version of it (lateness not computed).
KEPT_TIMES_FILE = (
    "Lateness not computed: this notebook was graded without --times, and the only "
    "submission time known for this student ({time}, {source}) was given for another "
    "version of their notebook (a times file given to an earlier grading run): a "
    "resubmission would count at the earlier time. Grade it again with its time "
    "(lablib grade --times FILE, the new time in FILE)."
)


def _times_file_times(previous) -> dict:
    """The times a ``--times`` file gave the kept rows, for a regrade without one: by
    ``("file", real path, sha256)`` and ``("key", student key, sha256)`` of the bytes
    they timed, ``(time, source)``; and by ``("file", real path)`` and
    ``("key", student key)`` alone, the same, to say that another version was timed."""
    timed: dict = {}
    for r in previous:
        identity = r.identity or {}
        if isinstance(earlier := identity.get("times_file_time"), list) and len(earlier) == 2:
            for kind in ("file", "key"):  # a resubmission's row: still not dated by it
                if value := str(identity.get(kind) or ""):
                    timed.setdefault((kind, value), (str(earlier[0]), str(earlier[1])))
        when, source = identity.get("submitted_at"), str(identity.get("time_source") or "")
        if not when or not source.startswith(TIMES_FILE_SOURCE):
            continue
        digest = str(identity.get("sha256") or "")
        for kind in ("file", "key"):
            if value := str(identity.get(kind) or ""):
                timed.setdefault((kind, value), (when, source))
                if digest:
                    timed[(kind, value, digest)] = (when, source)
    return timed


def _keep_times_file_times(rows, timed: dict) -> None:
    """Rows graded now without ``--times``: a time a times file gave the same bytes of the
    same notebook or student at an earlier run (``timed``: :func:`_times_file_times`) is
    kept, with its source (a times file outranks the roster; the download's own time,
    Gradescope's, stands). A row of that notebook or student with other bytes, and no
    time now, is a resubmission the earlier time does not date: its lateness is not
    computed (``time_unknown`` says why, ``times_file_time`` keeps the earlier time for the
    regrades after), never counted on time."""
    for r in rows:
        identity = r.identity or {}
        if str(identity.get("time_source") or "").startswith("Gradescope"):
            continue
        digest = str(identity.get("sha256") or "")
        places = [
            (kind, str(identity.get(kind) or "")) for kind in ("file", "key") if identity.get(kind)
        ]
        same = [timed[(*place, digest)] for place in places if digest and (*place, digest) in timed]
        if same:
            identity["submitted_at"], identity["time_source"] = same[0]
            identity.pop("time_unknown", None)
            identity.pop("dated", None)
            continue
        other = [timed[place] for place in places if place in timed]
        if other and not identity.get("submitted_at"):
            identity["time_unknown"] = KEPT_TIMES_FILE.format(time=other[0][0], source=other[0][1])
            identity["times_file_time"] = list(other[0])  # for the regrades after this one


#: Why a notebook graded without a roster given now has no time (lateness not computed).
KEPT_TIME = (
    "Lateness not computed: the only submission time known for this notebook ({time}, "
    "{source}) comes from the roster kept from an earlier grading run, which dated another "
    "version of it (or none): a resubmission would count at the earlier time. Grade it "
    "again with the LMS's new worksheet or roster (lablib grade --roster) or the times "
    "(--times)."
)


def _roster_timed(identity: dict) -> bool:
    """The row's time is the roster's (a worksheet's "Last modified", a submitted_at
    column), not the download's own or a times file's."""
    return bool(identity.get("submitted_at")) and str(identity.get("time_source") or "").startswith(
        "the roster's"
    )


def _digest(row) -> str:
    """The SHA-256 (hex) of the notebook a row was graded on: kept at grading
    (``identity.sha256``); for a row of an older gradebook, its file's now (read as a
    notebook is: a regular file within the size limit), or "" where it cannot be read."""
    identity = row.identity or {}
    if "sha256" in identity:  # kept at grading ("": nothing was read, nothing to date)
        return str(identity["sha256"] or "")
    try:
        return hashlib.sha256(read_notebook_bytes(row.path)).hexdigest()
    except (InvalidNotebook, OSError):
        return ""


def _dated_before(previous) -> set:
    """``(student key, notebook digest)`` of every kept row whose roster time dated that
    very notebook (``identity.dated``, written where the roster was given)."""
    return {
        (str(r.identity.get("key", "")), r.identity["dated"])
        for r in previous
        if r.identity and r.identity.get("dated")
    }


def _date_by_roster(rows) -> None:
    """A roster given now dates the notebooks as graded: each row timed by it records the
    digest of the bytes it was graded on (``dated``; a row of an older gradebook, without
    one: its file's now), for later regrades without a roster. A notebook changed since
    it was graded is dated only when it is graded again with the roster."""
    for r in rows:
        identity = r.identity or {}
        identity.pop("time_unknown", None)
        identity.pop("dated", None)
        if _roster_timed(identity) and (digest := _digest(r)):
            identity["dated"] = digest


def _check_kept_times(rows, dated: set) -> None:
    """Rows graded now without a roster given: a time from the roster kept in the output
    folder holds only for the notebook it dated (``dated``: the same student's notebook
    with the same digest). A resubmission (a new file, a file unzipped over the old one,
    a notebook after a zip) would count at the earlier submission's time, so the time is
    dropped and the row's lateness is not computed (``time_unknown`` says why), never
    counted on time. Times from the download itself (Gradescope's metadata) or from a
    times file given now stay."""
    for r in rows:
        identity = r.identity or {}
        if not _roster_timed(identity):
            continue
        digest = _digest(r)
        if digest and (str(identity.get("key", "")), digest) in dated:
            identity["dated"] = digest
            identity.pop("time_unknown", None)
            continue
        identity.pop("dated", None)
        identity["time_unknown"] = KEPT_TIME.format(
            time=identity["submitted_at"], source=identity["time_source"]
        )
        identity["submitted_at"], identity["time_source"] = "", ""


def _close_to_others(out: pathlib.Path) -> None:
    """The output folder closed to other users (``o-rwx``): it holds every student's code,
    grades and the hidden tests' messages, and where the sandbox has no private root only
    the folders' permissions keep a submission's code out of it. Only as root (where the
    submissions run as other users); not the owner's: the sandbox stage names the folder
    when a submission's user can open it."""
    if not sandbox_possible():  # no uid drop: the submission runs as this user anyway
        return
    try:
        mode = out.stat().st_mode
        if mode & 0o007:
            os.chmod(out, mode & ~0o007)
    except OSError:
        pass


def _layout(options: GradeOptions, folder: GradebookFolder) -> str:
    """How the submissions are read: as given, else as the kept gradebook's were (a
    :class:`LayoutWarning` says so where that is ``plain``), else ``auto``."""
    if options.layout is not None:
        return options.layout
    kept = None if options.fresh else folder.layout()
    if kept == "plain":
        warnings.warn(
            "each folder given is read as one student's (--layout plain), as this gradebook's "
            "submissions were; give --layout auto to read LMS downloads by their shapes.",
            LayoutWarning,
            stacklevel=3,
        )
    return kept or "auto"


def _reidentify(previous, roster, times, spec: LabSpec, *, new_roster: bool, index=None) -> None:
    """The kept rows' identities: all resolved again with a new roster (or where a row has
    none, or its folder is one the rules refuse as a Moodle Default group's:
    :func:`_default_doubted`); with new times only, each row's time looked up again."""
    for r in previous:
        if new_roster or not r.identity or _default_doubted(r, index):
            r.identity = _again(r, roster, times, spec, index)
        elif times is not None:  # new times: the same student, the time looked up again
            again = _identify(_found_of(r), roster, times, spec)
            if again.get("submitted_at"):
                r.identity.update(
                    submitted_at=again["submitted_at"], time_source=again["time_source"]
                )


def _default_doubted(result: SubmissionResult, index) -> bool:
    """A kept row whose folder the rules refuse as a Moodle Default group's
    (:meth:`~lablib.grading.gradebook.identity.RosterIndex.default_refused`): a numbered
    folder named as the Default group (kept matched as that group's by a gradebook
    written before this rule), or the Default group's own while a folder named like it
    is graded with it."""
    return index is not None and index.default_refused((result.identity or {}).get("lms"))


def _roster_index(roster, found, previous) -> RosterIndex | None:
    """The roster's index, with what the whole download says (a group named like Moodle's
    Default group), and the kept rows' folders too; None without a roster."""
    if roster is None:
        return None
    index = RosterIndex(roster)
    index.note([f.lms for f in found], "this download")
    index.note([(r.identity or {}).get("lms") for r in previous], "the kept gradebook")
    return index


def _write(
    out: pathlib.Path, spec: LabSpec, results, *, writers=None, template=None, **given
) -> None:
    """The reports of ``results``, with the people's grades of the written answers, the
    late penalties and the similarity hints (``template``: the released notebook, whose
    graded cells' code is left out of the comparison; ``given``: the ``roster``,
    ``skipped`` paths and ``late_policy``, as :func:`lablib.grading.report.write_reports`
    takes them)."""
    blank = (
        {piece: cell.source for piece, cell in graded_cells(template)[0].items()}
        if template
        else {}
    )
    similarity = similarity_hints(
        {r.submission: graded_code(r.code) for r in results if r.code},
        graded_code(blank) if blank else "",
        owners={r.submission: owner_of(r) for r in results},
    )
    similarity["identical"] = identical_files(
        {r.submission: r.path for r in results},
        digests={r.submission: (r.identity or {}).get("sha256") for r in results},
    )
    similarity["dynamic_code"] = {
        r.submission: found for r in results if r.code and (found := dynamic_code(r.code))
    }
    person, position = {}, None
    if spec.answers:
        _check_review_log(out, spec.name)
        if (out / DB_NAME).is_file():
            person, position = ReviewStore(out / DB_NAME, spec).for_gradebook(results)
    report.write_reports(
        out,
        spec,
        results,
        writers,
        person=person,
        reviews_through=position["through"] if position else 0,
        reviews_log=position,
        similarity=similarity,
        **given,
    )


def _check_review_log(out: pathlib.Path, lab_name: str) -> None:
    """Before ``grades.json`` is written again: where the gradebook there includes the
    people's grades, the review log they came from is still there (not missing, empty,
    made anew or restored from an older backup). ``--fresh`` too: its new gradebook takes
    the people's grades from the log, and would drop those only the old one holds. A
    gradebook that cannot be read is replaced only with ``--fresh``, which the caller
    checked.

    Raises:
        GradebookError: it is not; nothing is written.
    """
    try:
        stored = GradebookFolder(out).read()
    except (FileNotFoundError, GradebookError):
        return
    if stored.get("lab") != lab_name:  # another lab's, replaced (--fresh): nothing carries over
        return
    try:
        check_log_kept(out / DB_NAME, stored)
    except ReviewError as exc:
        raise GradebookError(str(exc)) from None


def rewrite_reports(
    out_dir, *, lab=None, roster=None, hidden_dirs=(), writers=None, late_policy=None
) -> list[SubmissionResult]:
    """Write the reports of an existing grading output again, without grading: the
    gradebook of ``grades.json`` with the people's latest grades (``lablib report``, the
    review page's "Write the gradebook").

    Args:
        out_dir: a folder ``lablib grade`` wrote.
        lab: the lab (name, spec path or :class:`LabSpec`); default: the one in ``grades.json``.
        roster: a :class:`~lablib.grading.gradebook.roster.Roster`; default: the one the folder was
            graded with (its copy, named in ``grades.json``), if any.
        hidden_dirs: the hidden tests' folders (their tests' names in the reports).
        late_policy: a :class:`~lablib.grading.gradebook.late.LatePolicy` (then kept); default: the
            one kept in the folder, if any.

    Raises:
        ValueError: ``out_dir`` holds no gradebook, or the gradebook of another lab;
            :class:`~lablib.grading.gradebook.GradebookError` (a ValueError):
            its ``grades.json`` cannot be read (nothing is written then).
    """
    out = pathlib.Path(out_dir)
    folder = GradebookFolder(out)
    if not folder.path.is_file():
        raise ValueError(
            f"{out} holds no gradebook (grades.json) written by `lablib grade`; pass "
            f"the output folder of a graded lab."
        )
    with folder.writing():  # one writer at a time: a grade run's rows are never dropped
        stored = folder.read()
        spec = (
            lab
            if isinstance(lab, LabSpec)
            else load_spec(find_lab(lab or stored["lab"]), hidden_dirs)
        )
        return _rewrite(folder, stored, spec, roster, writers, late_policy)


def _rewrite(folder, stored: dict, spec: LabSpec, roster, writers, late_policy) -> list:
    """:func:`rewrite_reports`'s work, under the writers' lock."""
    out = folder.out
    results = folder.results(spec.name, stored)
    skipped = folder.skipped(stored)  # kept in the gradebook: the summary lists them again
    roster_given = roster is not None
    if roster is None:
        roster = folder.roster()
    for r in results:  # identities are kept; a roster given now resolves them all again
        if roster_given or not r.identity:
            r.identity = _again(r, roster, None, spec)
    if late_policy is None:
        late_policy = folder.late_policy()
    kept = {"roster": folder.keep_roster(roster)}  # the layout kept is carried as it is
    try:
        template = read_notebook(catalog.find_lab_notebook(spec))[0]
    except (catalog.LabNotebookNotFound, InvalidNotebook, OSError):
        template = None  # the similarity hints then compare the template's code too
    _write(
        out,
        spec,
        results,
        writers=writers,
        roster=roster,
        skipped=skipped,
        late_policy=late_policy,
        template=template,
        kept=kept,
    )
    return sorted(results, key=lambda r: r.submission)
