"""An instructor's path with no checkout: lablib installed from a wheel into a fresh venv.

From an empty folder, `lablib grade` grades Lab 1 (solution 19/19, blank lab 0) and
`lablib gradescope` builds a zip that carries a wheel of that installed lablib; a
simulated Gradescope (`setup.sh` then `run_autograder` on a temporary AUTOGRADER_ROOT)
installs the wheel and scores Lab 1's solution 19. The venv: tests/grading/wheel_venv.py.
"""

import json
import os
import shutil
import zipfile

import pytest

from grading_paths import ROOT
from wheel_venv import fresh_venv, run, wheel_files

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
]  # builds and installs a wheel, runs a simulated Gradescope

LAB = "lab1_attention"
SOLUTION = ROOT / "solutions" / f"{LAB}.ipynb"
TIMEOUT = 300  # seconds per graded cell: generous, the CI box is shared


def test_grade_from_an_empty_folder(installed_lablib, tmp_path):
    python, _ = installed_lablib
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(SOLUTION, subs / "solution.ipynb")
    shutil.copy(ROOT / "labs" / f"{LAB}.ipynb", subs / "blank.ipynb")
    empty = tmp_path / "empty"
    empty.mkdir()
    run(
        [
            python.parent / "lablib",
            "grade",
            LAB,
            subs / "solution.ipynb",
            subs / "blank.ipynb",
            "-o",
            "out",
            "--jobs",
            "1",
            "--timeout",
            TIMEOUT,
            "--quiet",
        ],
        cwd=empty,
        timeout=1500,
    )
    data = {
        s["submission"]: s
        for s in json.loads((empty / "out" / "grades.json").read_text())["submissions"]
    }
    assert data["solution"]["status"] == "ok", data["solution"]["notes"]
    assert (data["solution"]["score"], data["solution"]["max_score"]) == (19, 19)
    assert data["blank"]["score"] == 0


def test_gradescope_zip_from_an_installed_wheel(installed_lablib, tmp_path):
    python, wheel = installed_lablib
    empty = tmp_path / "empty"
    empty.mkdir()
    run(
        [python.parent / "lablib", "gradescope", LAB, "-o", "ag.zip", "--timeout", TIMEOUT],
        cwd=empty,
    )
    root = tmp_path / "autograder"
    with zipfile.ZipFile(empty / "ag.zip") as zf:
        shipped = [
            n for n in zf.namelist() if n.startswith("wheels/lablib-") and n.endswith(".whl")
        ]
        assert len(shipped) == 1, zf.namelist()
        zf.extractall(root / "source")
    setup_sh = (root / "source" / "setup.sh").read_text()
    for line in (line for line in setup_sh.splitlines() if "pip install" in line):
        named = [w for w in line.replace('"', " ").split() if "lablib" in w.lower()]
        assert all(w.startswith("$HERE/wheels/lablib-") for w in named), (
            line
        )  # never lablib by name
    # the zip's wheel is the installed lablib, rebuilt from its RECORD: same package files
    assert wheel_files(root / "source" / shipped[0]) == wheel_files(wheel)

    # Gradescope: run setup.sh. Its venv (LABLIB_VENV) is a second fresh venv made here, which
    # setup.sh reuses (one it made itself could not see the dependencies without the index);
    # apt-get and the index left out.
    target = fresh_venv(tmp_path / "gradescope-venv", with_pip=True)
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    (fake_bin / "apt-get").write_text("#!/bin/sh\nexit 0\n")
    os.chmod(fake_bin / "apt-get", 0o755)
    path = f"{fake_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    venv = str(tmp_path / "gradescope-venv")
    run(
        ["bash", root / "source" / "setup.sh"],
        cwd=root / "source",
        PATH=path,
        PIP_NO_INDEX="1",
        LABLIB_VENV=venv,
    )
    where = run([target, "-c", "import lablib; print(lablib.__file__)"], cwd=tmp_path)
    assert where.startswith(venv), where

    for name in ("submission", "results"):
        (root / name).mkdir()
    shutil.copy(SOLUTION, root / "submission" / f"{LAB}.ipynb")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    run(
        ["bash", root / "run_autograder"],
        cwd=root,
        timeout=1500,
        PATH=path,
        AUTOGRADER_ROOT=str(root),
        LABLIB_VENV=venv,
    )
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 19, results["output"]
    assert all(t["score"] == t["max_score"] for t in results["tests"]), results["tests"]
