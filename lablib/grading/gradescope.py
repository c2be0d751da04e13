"""Gradescope's side: grade ``/autograder/submission`` into ``/autograder/results``.

The zip that ``lablib gradescope`` builds (:mod:`lablib.grading.author.autograder`) runs
``python -m lablib.grading.gradescope run``. It grades the upload's notebook with the
same pipeline and writers as ``lablib grade`` into ``ROOT/results`` (root
``/autograder`` unless ``AUTOGRADER_ROOT`` says otherwise): Gradescope reads
``results/results.json`` (:class:`~lablib.grading.report.GradescopeResults`); the
gradebook, the feedback and the instructor's views are kept beside it, in a folder only
the grading user may open.

One notebook is graded: the upload's only one, else the one named as the lab's
(``<lab>.ipynb``, any case). An upload of several notebooks none (or more than one) of
which is so named gets no grade and says which to upload: grading them all and keeping
the best would let a student hedge, one variant per notebook, against the hidden
tests. Notebooks in hidden folders (``.ipynb_checkpoints``) and links are not read.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import threading
import time
import traceback

from lablib.grading.atomic import atomic_write
from lablib.grading.author.autograder import gradescope_seconds
from lablib.grading.grade import grade
from lablib.grading.options import GradeOptions
from lablib.grading.report import DEFAULT_WRITERS, GradescopeResults, write_reports
from lablib.grading.report.gradescope import ungraded_results
from lablib.grading.report.text import visible_controls
from lablib.grading.run.supervisor import TOTAL_FACTOR
from lablib.grading.labspec.registry import load_spec
from lablib.labs import find_lab

__all__ = ["run_autograder", "main"]


#: Gradescope's own time limit for an autograder run, by default (its settings allow up
#: to 40 minutes): a run past it is ended and the student gets no results at all.
GRADESCOPE_SECONDS = 600.0
#: Before Gradescope's limit, what is left to write the results when grading is stopped
#: (at most; 15% of a short limit).
_WRITE_MARGIN = 45.0


def _margin(limit: float) -> float:
    return min(_WRITE_MARGIN, 0.15 * limit)


def budget(gradescope_seconds: float) -> float:
    """Seconds a submission's graded cells and tests may take in all, under Gradescope's
    limit ``gradescope_seconds``: half of it, the other half for what the grader does
    outside the student's code (TensorFlow imported by each new process, the judges'
    sandboxed runs, the reports)."""
    return max(30.0, gradescope_seconds / 2)


def run_autograder(root=None, *, elapsed: float = 0.0) -> dict:
    """Grade ``ROOT/submission`` and write ``ROOT/results/results.json`` (and the other
    reports beside it); returns the content of ``results.json``.

    The student's code has :func:`budget` of Gradescope's time limit (``config.json``'s
    ``gradescope_seconds``), and a watchdog stops every run :data:`_WRITE_MARGIN` seconds
    (15% of a short limit) before that limit, whatever is left (a grader error, never the student's), so that the
    results are written in time: a run Gradescope ends itself gives the student nothing.
    ``elapsed``: seconds of Gradescope's run already spent (:func:`main` gives the time
    since its process started)."""
    from lablib.grading.run.supervisor import STOPPING, stop_all

    root = pathlib.Path(root or os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    source = root / "source"
    config = json.loads((source / "config.json").read_text())
    limit = gradescope_seconds(config.get("gradescope_seconds") or GRADESCOPE_SECONDS)
    why = (
        f"Gradescope's time limit for the autograder ({limit / 60:g} min) was near; the "
        f"instructor can raise it (Autograder settings) and regrade"
    )
    if not 0 <= elapsed < limit / 2:  # a process clock that cannot be right: from now
        print(
            f"lablib: {elapsed:.0f} s said spent of {limit:g}; counting from now", file=sys.stderr
        )
        elapsed = 0.0
    watchdog = threading.Timer(max(1.0, limit - _margin(limit) - elapsed), stop_all, (why,))
    watchdog.daemon = True
    watchdog.start()
    try:
        return _run(root, source, config, budget(limit))
    finally:
        watchdog.cancel()
        watchdog.join()  # (a callback already under way sets STOPPING before it is cleared)
        STOPPING.clear()


def _started_ago() -> float:
    """Seconds since this process started (Gradescope's clock starts before Python's)."""
    try:
        import psutil

        return max(0.0, time.time() - psutil.Process().create_time())
    except Exception:  # noqa: BLE001 - psutil's errors: count from now
        return 0.0


def _run(root: pathlib.Path, source: pathlib.Path, config: dict, total: float) -> dict:
    """:func:`run_autograder`'s grading, the student's code given ``total`` seconds."""
    hidden = [source / "tests"] if (source / "tests" / f"{config['lab']}.py").is_file() else []
    for folder in (source / "tests", source / "spec", root / "submission"):
        if folder.is_dir():  # closed to the submission's uid: no private root on Gradescope
            os.chmod(folder, 0o700)
    lab = load_spec(
        find_lab(source / config["spec"] if config.get("spec") else config["lab"]), hidden
    )  # the lab resolved once, passed down
    results_dir = root / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(results_dir, 0o700)  # the cache and the gradebook: never the submission's to read
    uploaded = uploaded_notebooks(root / "submission")
    books, refused = chosen_notebook(root / "submission", config["lab"], uploaded)
    writers = (GradescopeResults(), *DEFAULT_WRITERS)  # what the student sees, first
    if refused:
        write_refusal(results_dir, refused)
    elif not books:
        write_reports(results_dir, lab, [], writers=writers)
    else:
        options = GradeOptions(
            hidden_dirs=hidden,
            jobs=1,
            timeout=config["timeout"],
            memory_mb=config["memory_mb"],
            total=min(total, TOTAL_FACTOR * float(config["timeout"])),
            lab_notebook=source / "lab.ipynb",
            progress=False,
            writers=writers,
            fresh=True,
        )  # one upload is the whole gradebook
        grade(lab, books, results_dir, options)
        if len(uploaded) > 1:  # the one named as the lab's: the others said, not graded
            data = json.loads((results_dir / "results.json").read_text())
            others = [
                visible_controls(str(b.relative_to(root / "submission")))
                for b in uploaded
                if b != books[0]
            ]
            data["output"] += (
                f"\nGraded {visible_controls(books[0].name)}, named as the lab's notebook; not graded: "
                f"{', '.join(others[:10])}{' ...' if len(others) > 10 else ''}."
            )
            atomic_write(results_dir / "results.json", json.dumps(data, indent=1) + "\n")
    return json.loads((results_dir / "results.json").read_text())


def uploaded_notebooks(submission: pathlib.Path) -> list[pathlib.Path]:
    """The upload's notebooks: ``*.ipynb`` files in it and its folders, not in a hidden
    folder (``.ipynb_checkpoints``: Jupyter's copies), not a link."""
    if not submission.is_dir() or submission.is_symlink():
        return []
    found = []
    for folder, dirs, files in os.walk(submission):
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(folder, d))
        )
        for name in sorted(files):
            path = pathlib.Path(folder, name)
            if (
                name.lower().endswith(".ipynb")
                and not name.startswith(".")
                and not path.is_symlink()
            ):
                found.append(path)
    return found


def chosen_notebook(
    submission: pathlib.Path, lab: str, books: list | None = None
) -> tuple[list[pathlib.Path], str]:
    """``([the notebook to grade], "")``, ``([], "")`` for an upload without one, or
    ``([], why)`` where none can be chosen (several, none or several named as the lab's);
    ``books``: the upload's notebooks, if already listed (:func:`uploaded_notebooks`)."""
    books = uploaded_notebooks(submission) if books is None else books
    if len(books) <= 1:
        return books, ""
    named = [b for b in books if b.name.casefold() == f"{lab}.ipynb".casefold()]
    if len(named) == 1:
        return named, ""
    shown = ", ".join(visible_controls(str(b.relative_to(submission))) for b in books[:10])
    more = f" and {len(books) - 10} more" if len(books) > 10 else ""
    return [], (
        f"{len(books)} notebooks were uploaded ({shown}{more}) and "
        f"{'none is' if not named else f'{len(named)} are'} named {lab}.ipynb, so none was "
        f"graded: one notebook is graded, never the best of several. Upload only your lab "
        f"notebook, {lab}.ipynb (or name the one to grade so)."
    )


def write_refusal(results_dir: pathlib.Path, why: str) -> dict:
    """``results.json`` of an upload that is not graded: no points, and why."""
    data = ungraded_results(why)
    atomic_write(results_dir / "results.json", json.dumps(data, indent=1) + "\n")
    return data


def main(argv=None) -> int:
    """``python -m lablib.grading.gradescope run [--root ROOT]`` (used by run_autograder)."""
    parser = argparse.ArgumentParser(prog="python -m lablib.grading.gradescope")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="grade /autograder/submission into /autograder/results")
    p.add_argument(
        "--root", default=None, help="autograder root (default $AUTOGRADER_ROOT or /autograder)"
    )
    args = parser.parse_args(argv)
    root = pathlib.Path(args.root or os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    began = time.time()
    try:
        data = run_autograder(root, elapsed=_started_ago())
    except BaseException as exc:  # noqa: BLE001 - the student gets results whatever failed
        traceback.print_exc()  # the instructor's log (Gradescope shows it to staff)
        results = root / "results" / "results.json"
        try:  # results this run wrote before the failure (a later report's) are kept
            if results.is_file() and results.stat().st_mtime >= began:
                return 1
            results.parent.mkdir(parents=True, exist_ok=True)
            write_refusal(
                results.parent,
                f"The grader failed ({type(exc).__name__}), not because of your submission; "
                f"your instructor has the log and will regrade it.",
            )
        except OSError:
            pass
        return 1
    print(f"score {data['score']:g}; {len(data['tests'])} tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
