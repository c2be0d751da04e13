"""Grading speed: `lablib grade` (--jobs 1 and 2) beside otter-grader's `otter run`.

Both grade N copies of the same reference solution of the autograder's fixture lab
(tests/grading/fixtures/lab0_fixture: NumPy normalise, softmax, running mean; 5 tests,
2 of them hidden) on the same machine in the same run:

* lablib: ``lablib grade <fixture> <N copies> --tests <hidden> --jobs J --force``
  (sandboxed child process per submission, judge in the grader).
* otter: an otter autograder zip built here, in a temporary folder, with equivalent
  OK-format doctest tests (same inputs, same tolerances, same points), and a notebook
  holding the same set-up and graded cells; ``otter run -a autograder.zip`` once per
  copy (``otter run`` grades one submission per call, without Docker).

Prints a markdown table of wall-clock seconds (total and per submission).

Run: ``nice .venv/bin/python benchmarks/grading_speed.py --copies 8``
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import pprint
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

import nbformat

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "grading" / "fixtures" / "lab0_fixture"
SOLUTION = FIXTURE / "solutions" / "lab0_fixture.ipynb"
HIDDEN = FIXTURE / "hidden"
BIN = pathlib.Path(sys.executable).parent

# Equivalent OK-format tests (otter), one per lablib test, same points.
OTTER_TESTS = {
    "normalize_rows": (
        1,
        False,
        """
>>> import numpy as np
>>> bool(np.allclose(normalize(np.array([[1.0, 3.0], [2.0, 2.0]])), [[0.25, 0.75], [0.5, 0.5]], rtol=1e-5, atol=1e-6))
True
""",
    ),
    "softmax_worked": (
        2,
        False,
        """
>>> import numpy as np
>>> e = np.exp([0.0, 1.0, 2.0])
>>> bool(np.allclose(softmax(np.array([[0.0, 1.0, 2.0]])), [e / e.sum()], atol=1e-6))
True
""",
    ),
    "running_mean": (
        2,
        False,
        """
>>> rm = RunningMean()
>>> means = []
>>> for x in [1.0, 2.0, 6.0]:
...     rm.update(x)
...     means.append(float(rm.mean))
>>> means == [1.0, 1.5, 3.0]
True
""",
    ),
    "softmax_large_hidden": (
        2,
        True,
        """
>>> import numpy as np
>>> L = np.array([[1000.0, 1001.0, 1002.0], [-5.0, 0.0, 5.0]])
>>> z = L - L.max(axis=-1, keepdims=True)
>>> bool(np.allclose(softmax(L.copy()), np.exp(z) / np.exp(z).sum(-1, keepdims=True), atol=1e-6))
True
""",
    ),
    "normalize_3d_hidden": (
        1,
        True,
        """
>>> import numpy as np
>>> x = np.arange(1.0, 13.0).reshape(2, 3, 2)
>>> bool(np.allclose(normalize(x.copy()), x / x.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6))
True
""",
    ),
}


def otter_test_file(name: str, points: int, hidden: bool, doctest: str) -> str:
    test = {
        "name": name,
        "points": points,
        "suites": [
            {
                "cases": [{"code": doctest.strip("\n"), "hidden": hidden, "locked": False}],
                "scored": True,
                "setup": "",
                "teardown": "",
                "type": "doctest",
            }
        ],
    }
    return "OK_FORMAT = True\n\ntest = " + pprint.pformat(test, indent=1, width=100) + "\n"


def otter_notebook(path: pathlib.Path) -> None:
    """The solution's set-up and graded cells only (what lablib's grader executes)."""
    nb = nbformat.read(SOLUTION, as_version=4)
    keep = [
        c
        for c in nb.cells
        if c.cell_type == "code" and c.source.lstrip().startswith(("# SETUP", "# GRADED"))
    ]
    nb.cells = keep
    nbformat.write(nb, path)


def build_otter_zip(folder: pathlib.Path) -> pathlib.Path:
    zip_path = folder / "autograder.zip"
    with zipfile.ZipFile(zip_path, "w") as zf:
        zf.writestr("otter_config.json", json.dumps({"lang": "python"}))
        zf.writestr("requirements.txt", "")
        for name, (points, hidden, code) in OTTER_TESTS.items():
            zf.writestr(f"tests/{name}.py", otter_test_file(name, points, hidden, code))
    return zip_path


def time_lablib(subs: pathlib.Path, out: pathlib.Path, jobs: int) -> tuple[float, list]:
    command = [
        str(BIN / "lablib"),
        "grade",
        str(FIXTURE),
        str(subs),
        "-o",
        str(out),
        "--tests",
        str(HIDDEN),
        "--lab-notebook",
        str(FIXTURE / "solutions" / "lab0_fixture.ipynb"),
        "--jobs",
        str(jobs),
        "--force",
        "--quiet",
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    seconds = time.perf_counter() - start
    data = json.loads((out / "grades.json").read_text())
    return seconds, [s["score"] for s in data["submissions"]]


def time_otter(
    books: list[pathlib.Path], zip_path: pathlib.Path, out: pathlib.Path
) -> tuple[float, list]:
    scores = []
    start = time.perf_counter()
    for i, book in enumerate(books):
        target = out / f"run{i}"
        target.mkdir(parents=True)
        subprocess.run(
            [
                str(BIN / "otter"),
                "run",
                "-a",
                str(zip_path),
                "-o",
                str(target),
                "--no-logo",
                str(book),
            ],
            check=True,
            capture_output=True,
        )
        result = json.loads((target / "results.json").read_text())
        scores.append(sum(t.get("score") or 0 for t in result["tests"]))
    return time.perf_counter() - start, scores


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--copies", type=int, default=8, help="N copies of the solution (default 8)"
    )
    args = parser.parse_args(argv)
    if not (BIN / "otter").exists():
        print("otter-grader is not installed: .venv/bin/pip install otter-grader", file=sys.stderr)
        return 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    rows = []
    with tempfile.TemporaryDirectory(prefix="lablib-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        subs = tmp / "subs"
        subs.mkdir()
        for i in range(args.copies):
            shutil.copy(SOLUTION, subs / f"student{i:02d}.ipynb")
        for jobs in (1, 2):
            seconds, scores = time_lablib(subs, tmp / f"out{jobs}", jobs)
            rows.append((f"lablib grade --jobs {jobs}", seconds, scores))
        otter_dir = tmp / "otter"
        otter_dir.mkdir()
        zip_path = build_otter_zip(otter_dir)
        books = []
        for i in range(args.copies):
            book = otter_dir / f"student{i:02d}" / "lab0_fixture.ipynb"
            book.parent.mkdir()
            otter_notebook(book)
            books.append(book)
        seconds, scores = time_otter(books, zip_path, otter_dir / "results")
        rows.append(("otter run (one call per submission)", seconds, scores))
    print(
        f"Grading {args.copies} copies of the fixture lab's solution (5 tests, 8 points; "
        f"{os.cpu_count()} CPU cores, same machine, same run)\n"
    )
    print("| grader | total s | s / submission | scores |")
    print("|---|---:|---:|---|")
    for name, seconds, scores in rows:
        distinct = sorted(set(scores))
        print(
            f"| {name} | {seconds:.1f} | {seconds / args.copies:.2f} | {'/'.join(f'{s:g}' for s in distinct)} of 8 |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
