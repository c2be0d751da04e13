"""An instructor's path with no checkout: lablib installed from a wheel into a fresh venv.

From an empty folder, `lablib grade` grades Lab 1 (solution 19/19, blank lab 0) and
`lablib gradescope` builds a zip that carries a wheel of that installed lablib; a
simulated Gradescope (`setup.sh` then `run_autograder` on a temporary AUTOGRADER_ROOT)
installs the wheel and scores Lab 1's solution 19.

Only lablib comes from the wheel. Its dependencies (TensorFlow and the rest) are not
reinstalled: a `.pth` line in each fresh venv puts the running environment's
site-packages after the venv's own (a plain path line, so that environment's `.pth`
files, its editable lablib included, are not processed), and pip runs with
`--no-index` / `PIP_NO_INDEX=1`, so nothing at all is fetched.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from grading_paths import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.integration]  # builds and installs a wheel, runs a simulated Gradescope

LAB = "lab1_attention"
SOLUTION = ROOT / "solutions" / f"{LAB}.ipynb"
TIMEOUT = 300  # seconds per graded cell: generous, the CI box is shared


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(LABLIB_FAST="1", TF_CPP_MIN_LOG_LEVEL="2", MPLBACKEND="Agg", **extra)
    env.pop("TF_USE_LEGACY_KERAS", None)
    env.pop("LABLIB_COURSE_DIR", None)
    return env


def _run(command, cwd, timeout=600, **env):
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=_env(**env), capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def _fresh_venv(path: pathlib.Path, with_pip: bool) -> pathlib.Path:
    """A new venv whose lablib can only come from what is installed into it."""
    _run([sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), path], cwd=path.parent)
    python = path / "bin" / "python"
    purelib = pathlib.Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                cwd=path.parent).strip())
    (purelib / "zz_running_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _wheel_files(path) -> dict:
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist() if n.startswith("lablib/")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python of a fresh venv with lablib installed from a wheel, that wheel)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # a clean copy: setuptools' build/ folder may hold stale files
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis",
        "grading-out", "cache"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
          "-w", tmp / "dist", source], cwd=tmp)
    (wheel,) = (tmp / "dist").glob("lablib-*.whl")
    python = _fresh_venv(tmp / "venv", with_pip=False)
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "-q", wheel], cwd=tmp)
    where = _run([python, "-c", "import lablib, sys; print(lablib.__file__); print(sys.path)"], cwd=tmp)
    assert where.startswith(str(tmp / "venv")), where  # lablib from the wheel, not from the checkout
    assert f"'{ROOT}'" not in where and f"'{ROOT}/lablib'" not in where  # the checkout is not on the path
    return python, wheel


def test_grade_from_an_empty_folder(installed, tmp_path):
    python, _ = installed
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(SOLUTION, subs / "solution.ipynb")
    shutil.copy(ROOT / "labs" / f"{LAB}.ipynb", subs / "blank.ipynb")
    empty = tmp_path / "empty"
    empty.mkdir()
    _run([python.parent / "lablib", "grade", LAB, subs / "solution.ipynb", subs / "blank.ipynb", "-o", "out",
          "--jobs", "1", "--timeout", TIMEOUT, "--quiet"], cwd=empty, timeout=1500)
    data = {s["submission"]: s for s in json.loads((empty / "out" / "grades.json").read_text())["submissions"]}
    assert data["solution"]["status"] == "ok", data["solution"]["notes"]
    assert (data["solution"]["score"], data["solution"]["max_score"]) == (19, 19)
    assert data["blank"]["score"] == 0


def test_gradescope_zip_from_an_installed_wheel(installed, tmp_path):
    python, wheel = installed
    empty = tmp_path / "empty"
    empty.mkdir()
    _run([python.parent / "lablib", "gradescope", LAB, "-o", "ag.zip", "--timeout", TIMEOUT], cwd=empty)
    root = tmp_path / "autograder"
    with zipfile.ZipFile(empty / "ag.zip") as zf:
        shipped = [n for n in zf.namelist() if n.startswith("wheels/lablib-") and n.endswith(".whl")]
        assert len(shipped) == 1, zf.namelist()
        zf.extractall(root / "source")
    setup_sh = (root / "source" / "setup.sh").read_text()
    for line in (line for line in setup_sh.splitlines() if "pip install" in line):
        named = [w for w in line.replace('"', " ").split() if "lablib" in w.lower()]
        assert all(w.startswith("$HERE/wheels/lablib-") for w in named), line  # never lablib by name
    # the zip's wheel is the installed lablib, rebuilt from its RECORD: same package files
    assert _wheel_files(root / "source" / shipped[0]) == _wheel_files(wheel)

    # Gradescope: run setup.sh (python3 = a second fresh venv; apt-get and the index left out)
    target = _fresh_venv(tmp_path / "gradescope-venv", with_pip=True)
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    (fake_bin / "apt-get").write_text("#!/bin/sh\nexit 0\n")
    os.chmod(fake_bin / "apt-get", 0o755)
    path = f"{fake_bin}:{target.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    _run(["bash", root / "source" / "setup.sh"], cwd=root / "source", PATH=path, PIP_NO_INDEX="1")
    where = _run([target, "-c", "import lablib; print(lablib.__file__)"], cwd=tmp_path)
    assert where.startswith(str(tmp_path / "gradescope-venv")), where

    for name in ("submission", "results"):
        (root / name).mkdir()
    shutil.copy(SOLUTION, root / "submission" / f"{LAB}.ipynb")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    _run(["bash", root / "run_autograder"], cwd=root, timeout=1500, PATH=path, AUTOGRADER_ROOT=str(root))
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 19, results["output"]
    assert all(t["score"] == t["max_score"] for t in results["tests"]), results["tests"]
