"""Gradescope's side: grade ``/autograder/submission`` into ``/autograder/results``.

The zip that ``lablib gradescope`` builds (:mod:`lablib.grading.author.autograder`) runs
``python -m lablib.grading.gradescope run``. It grades every notebook of the upload with
the same pipeline and writers as ``lablib grade`` into ``ROOT/results`` (root
``/autograder`` unless ``AUTOGRADER_ROOT`` says otherwise): Gradescope reads
``results/results.json`` (:class:`~lablib.grading.report.GradescopeResults`); the
gradebook, the feedback and the instructor's views are kept beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

from lablib.grading.grade import grade
from lablib.grading.options import GradeOptions
from lablib.grading.report import DEFAULT_WRITERS, GradescopeResults, write_reports
from lablib.grading.labspec.registry import load_spec
from lablib.labs import find_lab

__all__ = ["run_autograder", "main"]


def run_autograder(root=None) -> dict:
    """Grade ``ROOT/submission`` and write ``ROOT/results/results.json`` (and the other
    reports beside it); returns the content of ``results.json``."""
    root = pathlib.Path(root or os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    source = root / "source"
    config = json.loads((source / "config.json").read_text())
    hidden = [source / "tests"] if (source / "tests" / f"{config['lab']}.py").is_file() else []
    if hidden:
        os.chmod(source / "tests", 0o700)  # unreadable for the unprivileged grading uid
    lab = load_spec(
        find_lab(source / config["spec"] if config.get("spec") else config["lab"]), hidden
    )  # the lab resolved once, passed down
    results_dir = root / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    submission = root / "submission"
    books = sorted(submission.rglob("*.ipynb")) if submission.is_dir() else []
    writers = (*DEFAULT_WRITERS, GradescopeResults())
    if not books:
        write_reports(results_dir, lab, [], writers=writers)
    else:
        options = GradeOptions(
            hidden_dirs=hidden,
            jobs=1,
            timeout=config["timeout"],
            memory_mb=config["memory_mb"],
            lab_notebook=source / "lab.ipynb",
            progress=False,
            writers=writers,
            fresh=True,
        )  # one upload is the whole gradebook
        grade(lab, books, results_dir, options)
    return json.loads((results_dir / "results.json").read_text())


def main(argv=None) -> int:
    """``python -m lablib.grading.gradescope run [--root ROOT]`` (used by run_autograder)."""
    parser = argparse.ArgumentParser(prog="python -m lablib.grading.gradescope")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="grade /autograder/submission into /autograder/results")
    p.add_argument(
        "--root", default=None, help="autograder root (default $AUTOGRADER_ROOT or /autograder)"
    )
    args = parser.parse_args(argv)
    data = run_autograder(args.root)
    print(f"score {data['score']:g}; {len(data['tests'])} tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
