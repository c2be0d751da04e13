"""Grade a batch of submissions: discover -> read -> run -> judge -> report.

Each stage has its own place: :mod:`~lablib.grading.submissions` (which notebooks),
:mod:`~lablib.grading.notebook` (read, normalise, find graded cells),
:mod:`~lablib.grading.run` (the sandboxed run), :mod:`~lablib.grading.judge` and
:mod:`~lablib.grading.report` (the writers); the released lab's set-up cells come from
:mod:`~lablib.grading.author.catalog`. This module only wires them together, runs
submissions in parallel and caches results by content hash.

Example::

    from lablib.grading.grade import grade
    results = grade("lab1", ["submissions/"], "out", hidden_dirs=["hidden/"], jobs=2)
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import importlib
import json
import os
import pathlib
import sys
import warnings

from lablib._version import PACKAGE_DIR, __version__
from lablib.grading import report
from lablib.grading.author import catalog
from lablib.grading.judge import judge_submission, summarise, unreadable
from lablib.grading.notebook import InvalidNotebook, graded_cells, read_notebook
from lablib.grading.report.gradebook_json import read_gradebook, result_from_entry
from lablib.grading.results import Kind, Status, SubmissionResult, TestResult
from lablib.grading.run import Limits, ProbeRequest, RunOutcome, run_submission
from lablib.grading.spec import PUBLIC_TESTS_DIR, LabSpec, load_lab
from lablib.grading.submissions import collect_submissions, warn_skipped

__all__ = ["grade", "grade_one", "SubmissionRemoved", "previous_results"]

CACHE_VERSION = "4"


def _tests_fingerprint(lab: LabSpec, setup: list[str], limits: Limits) -> str:
    """A hash of everything that decides a grade but the submission: lablib's version,
    every file of the grading package (runner, judges, reports, the shipped specs), the
    lab's spec and hidden-test files, its set-up cells and the limits."""
    h = hashlib.sha256()
    h.update(f"{CACHE_VERSION}|{__version__}|{json.dumps(dataclasses.asdict(limits), sort_keys=True)}".encode())
    package = PACKAGE_DIR / "grading"
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    for path in lab.source_files:
        h.update(b"spec\0" + pathlib.Path(path).read_bytes())
    for source in setup:
        h.update(b"setup\0" + source.encode())
    return h.hexdigest()


def grade_one(lab: LabSpec, name: str, path: pathlib.Path, setup: list[str], *, limits: Limits = Limits(),
              mask=()) -> SubmissionResult:
    """Grade one notebook (read, run, judge) and return its :class:`SubmissionResult`."""
    try:
        nb, notes = read_notebook(path)
    except (InvalidNotebook, OSError) as exc:
        return unreadable(lab, name, str(path), str(exc))
    found, cell_notes = graded_cells(nb)
    cells = [(piece, cell.source) for piece, cell in found.items()]
    probes = [ProbeRequest(t.id, t.probe, tuple(lab.pieces[t.piece].objects), t.timeout)
              for t in lab.tests if t.piece in found]
    outcome = run_submission(setup, cells, probes, limits=limits, mask=mask) if probes else RunOutcome()
    return judge_submission(lab, name, str(path), found, outcome, notes=[*notes, *cell_notes])


class SubmissionRemoved(UserWarning):
    """A submission of the existing gradebook whose notebook no longer exists: its row is dropped."""


def previous_results(out_dir, lab_name: str) -> list[SubmissionResult]:
    """The results of the gradebook already in ``out_dir`` (``grades.json``), or [].

    Raises:
        ValueError: the folder holds the gradebook of another lab.
    """
    try:
        data = read_gradebook(out_dir)
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("lab") != lab_name:
        raise ValueError(
            f"{out_dir} holds the gradebook of {data.get('lab') if isinstance(data, dict) else 'something else'!r}, "
            f"not of {lab_name!r}: grade into another folder (-o), or pass --fresh to replace it.")
    results = []
    for entry in data.get("submissions", []):
        try:
            results.append(result_from_entry(entry))
        except (KeyError, TypeError, ValueError):
            continue  # an entry this version cannot read is graded again when its notebook is
    return results


def _merged(previous: list[SubmissionResult], new: list[SubmissionResult]) -> list[SubmissionResult]:
    """The gradebook after grading ``new`` into ``previous``: a notebook graded again keeps
    its row's name and gets the new result; every other row stays while its notebook
    exists; rows whose notebook is gone are dropped with a :class:`SubmissionRemoved`
    warning (never silently)."""
    by_path = {os.path.realpath(r.path): r for r in previous}
    names = {r.submission.casefold() for r in new}
    out = []
    for r in new:
        old = by_path.pop(os.path.realpath(r.path), None)
        if old is not None and old.submission.casefold() not in names - {r.submission.casefold()}:
            names.discard(r.submission.casefold())
            r.submission = old.submission
            names.add(r.submission.casefold())
        out.append(r)
    for old in by_path.values():
        if not os.path.exists(old.path):
            warnings.warn(f"{old.submission} was in the gradebook but {old.path} no longer exists: "
                          f"its row was dropped.", SubmissionRemoved, stacklevel=3)
            continue
        name, k = old.submission, 2
        while name.casefold() in names:  # a new submission took the name: keep both rows
            name, k = f"{old.submission}-{k}", k + 1
        old.submission = name
        names.add(name.casefold())
        out.append(old)
    return out


def _cache_path(out_dir: pathlib.Path, name: str) -> pathlib.Path:
    return out_dir / ".cache" / (hashlib.sha1(name.encode()).hexdigest()[:16] + ".json")


@dataclasses.dataclass(frozen=True)
class _Cache:
    """Results by content: a submission's stored result is reused while its notebook's
    bytes and everything else that decides a grade (the fingerprint) are unchanged."""

    out_dir: pathlib.Path
    fingerprint: str

    def key(self, path: pathlib.Path) -> str:
        try:
            content = path.read_bytes()
        except OSError:
            content = b""
        return hashlib.sha256(self.fingerprint.encode() + b"|" + content).hexdigest()

    def get(self, name: str, key: str) -> SubmissionResult | None:
        cache = _cache_path(self.out_dir, name)
        try:
            stored = json.loads(cache.read_text())
            if stored.get("key") == key:
                result = SubmissionResult.from_dict(stored["result"])
                result.cached = True
                return result
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def put(self, name: str, key: str, result: SubmissionResult) -> None:
        if result.status.has(Kind.GRADER_ERROR):  # the grader's fault: grade it again next time
            return
        cache = _cache_path(self.out_dir, name)
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"key": key, "result": result.to_dict()}, default=str))


def _masked_paths(spec: LabSpec, hidden_dirs, out: pathlib.Path, submissions) -> list[str]:
    """What the sandbox hides from the child even where it lies inside a folder the child
    sees (a venv inside the submissions folder): hidden tests, a spec given by path, the
    output folder and the submissions' folders."""
    spec_dirs = [spec.spec_dir] if spec.spec_dir and spec.spec_dir != PUBLIC_TESTS_DIR else []
    folders = [pathlib.Path(p) if pathlib.Path(p).is_dir() else pathlib.Path(p).parent for p in submissions]
    return sorted({os.path.realpath(p) for p in [*hidden_dirs, *spec_dirs, out, *folders]} - {"/"})


def _in_parallel(spec: LabSpec, items, work, jobs: int, progress: bool) -> list[SubmissionResult]:
    """``work(item)`` for every ``(name, path)`` on ``jobs`` threads; a grader bug costs
    only its own submission (``grader-error``), never the batch."""
    results: list[SubmissionResult] = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(items), desc=f"grading {spec.name}", unit="nb", file=sys.stderr)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(work, item): item for item in items}
        for future in concurrent.futures.as_completed(futures):
            name, path = futures[future]
            try:
                results.append(future.result())
            except Exception as exc:  # noqa: BLE001 - a grader bug must not lose the batch
                tests = [TestResult.failed(t, f"internal grader error: {type(exc).__name__}: {exc}",
                                           Kind.GRADER_ERROR) for t in spec.tests]
                results.append(summarise(spec, name, str(path), tests, Status.of([Kind.GRADER_ERROR]),
                                         notes=[f"grader error: {type(exc).__name__}: {exc}"]))
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return results


def grade(lab, submissions, out_dir, *, hidden_dirs=(), jobs: int | None = None, timeout: float = 60.0,
          memory_mb: float = 4096.0, force: bool = False, lab_notebook=None, progress: bool = True,
          isolate: bool = True, writers=None, fresh: bool = False, roster=None) -> list[SubmissionResult]:
    """Grade submissions and write the reports into ``out_dir``.

    Grading into a folder that already holds this lab's gradebook updates it: the
    submissions graded now get new rows and feedback, every other row is kept while its
    notebook exists (a regrade of one student keeps the class), and a row whose notebook
    is gone is dropped with a :class:`SubmissionRemoved` warning.

    Args:
        lab: lab name (``"lab1"``), or path of a spec module/folder, or a :class:`LabSpec`.
        submissions: notebooks and/or folders of them.
        out_dir: where ``grades.csv``, ``grades.json``, ``feedback/`` and ``.cache/`` go.
        hidden_dirs: folders with hidden tests (``<lab>.py``).
        jobs: submissions graded in parallel (default: number of CPU cores).
        timeout: seconds per graded cell and per test (a test's own ``timeout`` wins).
        memory_mb: memory limit of each submission's process.
        force: re-grade even when the submission and the tests are unchanged.
        lab_notebook: the released lab notebook to take set-up cells from.
        progress: show a tqdm progress bar on stderr.
        isolate: use the sandbox (namespaces, unprivileged uid) when running as root.
        writers: the report writers (default :data:`lablib.grading.report.DEFAULT_WRITERS`).
        fresh: start a new gradebook: drop the rows of submissions not graded now.
        roster: a :class:`~lablib.grading.roster.Roster`: each row names its student and
            the summary lists the submissions and students that matched nothing.

    Returns:
        One :class:`SubmissionResult` per row of the gradebook written (those graded now
        and those kept).
    """
    spec = lab if isinstance(lab, LabSpec) else load_lab(lab, hidden_dirs)
    setup = catalog.lab_setup(spec, lab_notebook=lab_notebook)
    out = pathlib.Path(out_dir)
    previous = [] if fresh else previous_results(out, spec.name)
    out.mkdir(parents=True, exist_ok=True)
    skipped: list = []
    items = collect_submissions(submissions, refused=skipped)
    warn_skipped(skipped, stacklevel=3)  # the CLI prints these; the summary lists them too
    limits = Limits(timeout=timeout, memory_mb=memory_mb, isolate=isolate)
    cache = _Cache(out, _tests_fingerprint(spec, setup, limits))
    mask = _masked_paths(spec, hidden_dirs, out, submissions)
    for module in spec.judge_imports:  # before any worker thread exists
        importlib.import_module(module)

    def work(item):
        name, path = item
        key = cache.key(path)
        result = None if force else cache.get(name, key)
        if result is None:
            result = grade_one(spec, name, path, setup, limits=limits, mask=mask)
            cache.put(name, key, result)
        return result

    results = _merged(previous, _in_parallel(spec, items, work, max(1, jobs or os.cpu_count() or 1), progress))
    report.write_reports(out, spec, results, writers=writers, roster=roster, skipped=skipped)
    return sorted(results, key=lambda r: r.submission)
