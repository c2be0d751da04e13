"""Grade a batch of submissions: normalise -> extract -> execute -> judge -> report.

Each stage is its own module (:mod:`~lablib.grading.notebooks`,
:mod:`~lablib.grading.execute`, :mod:`~lablib.grading.judge`,
:mod:`~lablib.grading.report`); this module only wires them together, runs submissions
in parallel and caches results by content hash.

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

import lablib
from lablib.grading import catalog, notebooks, report
from lablib.grading.execute import Limits, ProbeRequest, RunOutcome, run_submission
from lablib.grading.judge import SubmissionResult, TestResult, judge_test, status_of, summarise
from lablib.grading.spec import LabSpec, load_lab

__all__ = ["grade", "collect_submissions", "find_lab_notebook", "lab_setup", "SubmissionSkipped"]

CACHE_VERSION = "2"


def find_lab_notebook(lab: LabSpec, explicit=None, course_dir=None) -> pathlib.Path:
    """The released lab notebook: see :func:`lablib.grading.catalog.find_lab_notebook`.

    Set-up cells are taken from it, never from a submission.
    """
    return catalog.find_lab_notebook(lab, lab_notebook=explicit, course_dir=course_dir)


def lab_setup(lab: LabSpec, lab_notebook=None, course_dir=None) -> list[str]:
    """The lab's ``# SETUP`` cell sources (magics removed)."""
    return catalog.lab_setup(lab, lab_notebook=lab_notebook, course_dir=course_dir)


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


def _tests_fingerprint(lab: LabSpec, setup: list[str], limits: Limits) -> str:
    """A hash of everything that decides a grade but the submission: lablib's version,
    every file of the grading package (runner, judges, reports, the shipped specs), the
    lab's spec and hidden-test files, its set-up cells and the limits."""
    h = hashlib.sha256()
    h.update(f"{CACHE_VERSION}|{lablib.__version__}|{json.dumps(dataclasses.asdict(limits), sort_keys=True)}".encode())
    package = pathlib.Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    for path in lab.source_files:
        h.update(b"spec\0" + pathlib.Path(path).read_bytes())
    for source in setup:
        h.update(b"setup\0" + source.encode())
    return h.hexdigest()


def grade_one(lab: LabSpec, name: str, path: pathlib.Path, setup: list[str], *, limits: Limits = Limits(),
              mask=()) -> SubmissionResult:
    """Grade one notebook (all stages) and return its :class:`SubmissionResult`."""
    try:
        nb, notes = notebooks.read_notebook(path)
    except (notebooks.InvalidNotebook, OSError) as exc:
        results = [TestResult.failed(t, f"the notebook could not be read: {exc}", "invalid-notebook")
                   for t in lab.tests]
        return summarise(lab, name, str(path), results, "invalid-notebook",
                         notes=[f"invalid notebook: {exc}"])
    found, cell_notes = notebooks.graded_cells(nb)
    notes = list(cell_notes)
    missing = [p for p in lab.pieces if p not in found]
    cells = [(piece, cell.source) for piece, cell in found.items()]
    probes = [ProbeRequest(t.id, t.probe, tuple(lab.pieces[t.piece].objects), t.timeout)
              for t in lab.tests if t.piece in found]
    outcome = run_submission(setup, cells, probes, limits=limits, mask=mask) if probes else RunOutcome()
    results = []
    for t in lab.tests:
        if t.piece not in found:
            results.append(TestResult.failed(
                t, f"no cell starts with `# GRADED: {t.piece}`; restore the graded cell from the lab", "missing"))
        else:
            results.append(judge_test(t, outcome.results.get(t.id), outcome.cell_errors.get(t.piece)))
    kinds = {kind for kind, _ in outcome.problems}
    if any(r.kind == "grader-error" for r in results):
        kinds.add("grader-error")
        notes.append("grader-error: a judge failed (see diagnostics); this result is not cached")
    status = status_of(kinds, missing)
    for kind, where in outcome.problems:
        notes.append(f"{kind}: {where}")
    diagnostics = list(outcome.diagnostics)
    diagnostics += [{"test": r.id, "ended": "grader-error", "detail": r.detail}
                    for r in results if r.kind == "grader-error"]
    return summarise(lab, name, str(path), results, status, notes=notes, output=outcome.output,
                     isolation=outcome.isolation, diagnostics=diagnostics, seconds=round(outcome.seconds, 3))


def _cache_path(out_dir: pathlib.Path, name: str) -> pathlib.Path:
    return out_dir / ".cache" / (hashlib.sha1(name.encode()).hexdigest()[:16] + ".json")


def grade(lab, submissions, out_dir, *, hidden_dirs=(), jobs: int | None = None, timeout: float = 60.0,
          memory_mb: float = 4096.0, force: bool = False, lab_notebook=None, progress: bool = True,
          isolate: bool = True) -> list[SubmissionResult]:
    """Grade submissions and write the reports into ``out_dir``.

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

    Returns:
        One :class:`SubmissionResult` per submission.
    """
    spec = lab if isinstance(lab, LabSpec) else load_lab(lab, hidden_dirs)
    setup = lab_setup(spec, lab_notebook)
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    items = collect_submissions(submissions)
    limits = Limits(timeout=timeout, memory_mb=memory_mb, isolate=isolate)
    fingerprint = _tests_fingerprint(spec, setup, limits)
    from lablib.grading.spec import PUBLIC_TESTS_DIR

    spec_dirs = [spec.spec_dir] if spec.spec_dir and spec.spec_dir != PUBLIC_TESTS_DIR else []
    # The sandbox shows the child only the system and Python folders; these are masked
    # even where they lie inside one of those (a venv inside the submissions folder).
    mask = sorted({os.path.realpath(p) for p in [
        *hidden_dirs, *spec_dirs, out, *(pathlib.Path(p) if pathlib.Path(p).is_dir()
                                         else pathlib.Path(p).parent for p in submissions)]} - {"/"})
    for module in spec.judge_imports:  # before any worker thread exists
        importlib.import_module(module)
    jobs = max(1, jobs or os.cpu_count() or 1)

    def work(item):
        name, path = item
        try:
            content = path.read_bytes()
        except OSError:
            content = b""
        key = hashlib.sha256(fingerprint.encode() + b"|" + content).hexdigest()
        cache = _cache_path(out, name)
        if not force and cache.is_file():
            try:
                stored = json.loads(cache.read_text())
                if stored.get("key") == key:
                    result = SubmissionResult.from_dict(stored["result"])
                    result.cached = True
                    return result
            except (ValueError, KeyError, TypeError):
                pass
        result = grade_one(spec, name, path, setup, limits=limits, mask=mask)
        if "grader-error" not in result.status:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({"key": key, "result": result.to_dict()}, default=str))
        return result

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
                                           "grader-error") for t in spec.tests]
                results.append(summarise(spec, name, str(path), tests, "grader-error",
                                         notes=[f"grader error: {type(exc).__name__}: {exc}"]))
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    report.write_reports(out, spec, results)
    return sorted(results, key=lambda r: r.submission)
