"""lablib installed from a wheel into a fresh venv, as an instructor has it (no checkout).

Only lablib comes from the wheel. Its dependencies (TensorFlow and the rest) are not
reinstalled: a `.pth` line in each fresh venv puts the running environment's
site-packages after the venv's own (a plain path line, so that environment's `.pth`
files, its editable lablib included, are not processed), and pip runs with
`--no-index` / `PIP_NO_INDEX=1`, so nothing at all is fetched. The fixture
``installed_lablib`` (tests/grading/conftest.py) builds it once per test session.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile

from grading_paths import ROOT

__all__ = ["env", "run", "fresh_venv", "wheel_files", "install_from_wheel"]


def env(**extra):
    """This process's environment for a command of the installed lablib: no checkout
    path, fast mode, ``extra`` added."""
    out = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    out.update(LABLIB_FAST="1", TF_CPP_MIN_LOG_LEVEL="2", MPLBACKEND="Agg", **extra)
    out.pop("TF_USE_LEGACY_KERAS", None)
    out.pop("LABLIB_COURSE_DIR", None)
    return out


def run(command, cwd, timeout=600, **extra):
    result = subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def fresh_venv(path: pathlib.Path, with_pip: bool) -> pathlib.Path:
    """A new venv whose lablib can only come from what is installed into it."""
    run(
        [sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), path],
        cwd=path.parent,
    )
    python = path / "bin" / "python"
    purelib = pathlib.Path(
        run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=path.parent,
        ).strip()
    )
    (purelib / "zz_running_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def wheel_files(path) -> dict:
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist() if n.startswith("lablib/")}


def install_from_wheel(tmp: pathlib.Path):
    """(python of a fresh venv in ``tmp`` with lablib installed from a wheel, that wheel)."""
    source = tmp / "source"  # a clean copy: setuptools' build/ folder may hold stale files
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            "build",
            "dist",
            "*.egg-info",
            "__pycache__",
            ".pytest_cache",
            ".hypothesis",
            "grading-out",
            "cache",
        ),
    )
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            tmp / "dist",
            source,
        ],
        cwd=tmp,
    )
    (wheel,) = (tmp / "dist").glob("lablib-*.whl")
    python = fresh_venv(tmp / "venv", with_pip=False)
    run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "-q", wheel],
        cwd=tmp,
    )
    where = run(
        [python, "-c", "import lablib, sys; print(lablib.__file__); print(sys.path)"], cwd=tmp
    )
    assert where.startswith(str(tmp / "venv")), (
        where
    )  # lablib from the wheel, not from the checkout
    assert (
        f"'{ROOT}'" not in where and f"'{ROOT}/lablib'" not in where
    )  # the checkout is not on the path
    return python, wheel
