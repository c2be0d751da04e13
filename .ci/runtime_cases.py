"""The runtimes a student may pick besides Colab's default, each in a small venv of its own.

Used by ``bash .ci/run colab`` after ``.ci/colab_check.py``; standard library only::

    python .ci/runtime_cases.py --python3.12 PY312 --python3.13 PY313 [--keep DIR] [CASE ...]

Cases (all by default), each running a lab's first cell in a fresh process with
``LABLIB_PIP`` = this checkout, as ``.ci/colab_check.py`` does:

* ``setuptools84``: Python 3.12, tensorflow 2.19.0 and keras 3.10.0 with setuptools
  84.2.1 preinstalled (what ``pip install tensorflow`` brought there in 2026). First a
  forced install failure (an unreachable package index): the cell must fail printing
  pip's error and the package index it could not reach, with TensorFlow and Keras
  untouched and nothing of TF Model Garden installed. Then, online, Lab 2's first cell
  must succeed (tf-models-official 2.19.x, its source package seqeval built, TensorFlow
  kept, the setuptools change listed) and TF Model Garden's block builds in legacy mode;
  then the layer tests (``--tests``) run there in Keras 3: lablib's lower bounds
  (tensorflow>=2.19, keras>=3.10) are tested.
* ``tf221``: Python 3.13 with tensorflow 2.21.0, for which no TF Model Garden exists.
  Lab 2's first cell must say so and install nothing; with
  ``LABLIB_ALLOW_TENSORFLOW_CHANGE=1`` it installs the newest tf-models-official with the
  TensorFlow it needs and asks for a restart; after the "restart" the cell installs
  nothing and the block builds.
* ``tpu``: Python 3.13 with Colab's TPU runtime's Keras and NumPy and no TensorFlow (as
  ``pip-freeze.tpu.txt`` lists), ``COLAB_RELEASE_TAG`` set as Colab sets it: every lab's
  first cell must end with the one sentence saying to change the runtime type, and
  install no TensorFlow.
"""

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".ci"))
from colab_check import builds_model_garden, cell_process, first_cell, pip, versions  # noqa: E402

# Read from lablib/install/startup.py's source, not imported: this script runs outside any venv
# with lablib.
_INSTALL = (ROOT / "lablib" / "install" / "startup.py").read_text(encoding="utf-8")
NO_TENSORFLOW_ON_COLAB = (
    "This Colab runtime has no TensorFlow (Colab's TPU runtimes come without it)"
)
assert NO_TENSORFLOW_ON_COLAB in _INSTALL, (
    "lablib.install.NO_TENSORFLOW_ON_COLAB changed: update this script"
)

# pip's configuration files ignored (this machine's add local indexes), its index a closed port.
# pip's own retries kept: its retry warnings are what it prints about a refused connection.
UNREACHABLE = {
    "PIP_CONFIG_FILE": os.devnull,
    "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
    "PIP_TIMEOUT": "3",
}


def log(text):
    print(f"\n-- {text}", flush=True)


class Venv:
    def __init__(self, python: str, folder: pathlib.Path):
        self.folder = folder
        subprocess.run([python, "-m", "venv", str(folder)], check=True)
        self.python = str(folder / "bin" / "python")
        self.pip("install", "-q", "--upgrade", "pip")

    def pip(self, *args):
        pip(*args, python=self.python)

    def versions(self) -> dict:
        return versions(self.python)

    def cell(self, lab: str, cwd: str, extra_env=None):
        """Lab ``lab``'s first cell in a fresh process: (exit code, output, seconds)."""
        drop = ("VIRTUAL_ENV",)
        if (
            extra_env and "PIP_INDEX_URL" in extra_env
        ):  # only that index: no other source of packages
            drop += ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX")
        path = {"PATH": f"{self.folder / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
        result, seconds = cell_process(
            first_cell(lab), cwd, self.python, drop, {**path, **(extra_env or {})}
        )
        output = result.stdout + result.stderr
        print(f"[{lab}: exit {result.returncode}, {seconds:.1f} s]\n" + output[-2500:], flush=True)
        return result.returncode, output, seconds

    def builds_model_garden(self, cwd: str) -> str:
        return builds_model_garden(cwd, self.python)


def case_setuptools84(py312: str, work: pathlib.Path, cwd: str) -> str:
    venv = Venv(py312, work / "setuptools84")
    venv.pip("install", "-q", "tensorflow==2.19.0", "keras==3.10.0")
    venv.pip("install", "-q", "setuptools==84.2.1")
    venv.pip(
        "install", "-q", "--no-deps", str(ROOT)
    )  # lablib, so the offline cell gets to prepare()
    before = venv.versions()
    assert before["setuptools"] == "84.2.1" and "seqeval" not in before, before.get("setuptools")

    log("setuptools84: Lab 2's first cell with the package index unreachable")
    code, output, _ = venv.cell("lab2_transformer_reuters", cwd, UNREACHABLE)
    after = venv.versions()
    assert code != 0, "the cell succeeded with no package index"
    assert "InstallError: pip could not" in output, output[-3000:]
    assert "the package index could not be reached (is this runtime online?)" in output, output[
        -3000:
    ]
    assert "127.0.0.1" in output and "no release for TensorFlow" not in output, output[-3000:]
    assert "Nothing was replaced: tensorflow 2.19.0, keras 3.10.0 as before" in output, output[
        -3000:
    ]
    assert after == before, sorted(set(after.items()) ^ set(before.items()))

    log("setuptools84: Lab 2's first cell online (seqeval builds from source)")
    code, output, seconds = venv.cell("lab2_transformer_reuters", cwd)
    after = venv.versions()
    assert code == 0, output[-4000:]
    assert after["tensorflow"] == "2.19.0" and after["keras"] == "3.10.0", (
        after["tensorflow"],
        after["keras"],
    )
    assert after["tf-models-official"].startswith("2.19.") and "seqeval" in after, after.get(
        "tf-models-official"
    )
    assert f"setuptools 84.2.1 -> {after['setuptools']}" in output, output[-3000:]
    print(venv.builds_model_garden(cwd))

    tested = ""
    if TESTS:  # lablib's lower bounds (tensorflow>=2.19, keras>=3.10) hold: its layer tests there
        log(
            f"setuptools84: the layer tests on TensorFlow 2.19.0 and Keras 3.10.0 ({len(TESTS)} files)"
        )
        venv.pip("install", "-q", "pytest", "hypothesis")
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "TF_USE_LEGACY_KERAS", "VIRTUAL_ENV")
        }
        result = subprocess.run(
            [venv.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        last = (result.stdout.strip().splitlines() or ["(no output)"])[-1]
        print(result.stdout[-1500:])
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
        tested = f"; layer tests: {last}"
    return (
        f"Python 3.12, setuptools 84.2.1: unreachable index reported, TF kept; online, Lab 2's "
        f"first cell {seconds:.0f} s, tf-models-official {after['tf-models-official']}, "
        f"setuptools -> {after['setuptools']}{tested}"
    )


def case_tf221(py313: str, work: pathlib.Path, cwd: str) -> str:
    venv = Venv(py313, work / "tf221")
    venv.pip("install", "-q", "tensorflow==2.21.0")
    before = venv.versions()

    log("tf221: Lab 2's first cell on TensorFlow 2.21 (no TF Model Garden for it)")
    code, output, _ = venv.cell("lab2_transformer_reuters", cwd)
    after = venv.versions()
    assert code != 0, "the cell succeeded on TensorFlow 2.21 without Model Garden"
    assert (
        "no release for TensorFlow 2.21" in output and "LABLIB_ALLOW_TENSORFLOW_CHANGE=1" in output
    ), output[-3000:]
    assert after["tensorflow"] == "2.21.0" and "tf-models-official" not in after, after.get(
        "tf-models-official"
    )
    assert set(after) - set(before) == {"lablib"}, sorted(set(after) - set(before))

    log("tf221: again, with LABLIB_ALLOW_TENSORFLOW_CHANGE=1")
    code, output, seconds = venv.cell(
        "lab2_transformer_reuters", cwd, {"LABLIB_ALLOW_TENSORFLOW_CHANGE": "1"}
    )
    after = venv.versions()
    assert code != 0 and "RestartRequired" in output and "Restart session" in output, output[-3000:]
    newest = after["tf-models-official"]
    minor = ".".join(newest.split(".")[:2])
    assert after["tensorflow"].startswith(minor + "."), (after["tensorflow"], newest)
    assert (
        f"TensorFlow was replaced for TF Model Garden: 2.21.0 -> {after['tensorflow']}" in output
    ), output[-3000:]

    log("tf221: after the restart")
    code, output, _ = venv.cell("lab2_transformer_reuters", cwd)
    assert code == 0 and "Installing" not in output, output[-3000:]
    print(venv.builds_model_garden(cwd))
    return (
        f"TensorFlow 2.21.0: refused with the variable to set; allowed, {seconds:.0f} s to "
        f"tf-models-official {newest} with TensorFlow {after['tensorflow']} and a restart"
    )


def case_tpu(py313: str, work: pathlib.Path, cwd: str) -> str:
    venv = Venv(py313, work / "tpu")
    venv.pip("install", "-q", "keras==3.13.2", "numpy==2.1.3", "protobuf==7.35.1", "packaging")
    before = venv.versions()
    labs = sorted(path.stem for path in (ROOT / "labs").glob("lab*.ipynb"))
    for lab in labs:
        log(f"tpu: {lab}'s first cell on a Colab runtime without TensorFlow")
        code, output, _ = venv.cell(lab, cwd, {"COLAB_RELEASE_TAG": "release-colab-tpu"})
        assert code != 0, f"{lab}: the cell went on without TensorFlow"
        last = output.strip().splitlines()[-1]
        assert last.startswith("lablib.install.InstallError: " + NO_TENSORFLOW_ON_COLAB), last
        assert "tensorflow" not in venv.versions(), f"{lab}: TensorFlow was installed"
    assert set(venv.versions()) - set(before) == {"lablib"}
    return f"Colab TPU-like runtime (no TensorFlow): all {len(labs)} labs' first cells said to change the runtime"


CASES = {"setuptools84": case_setuptools84, "tf221": case_tf221, "tpu": case_tpu}
TESTS: list = []  # --tests: the layer tests the setuptools84 case runs (Keras 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python3.12", dest="py312", required=True)
    parser.add_argument("--python3.13", dest="py313", required=True)
    parser.add_argument(
        "--keep", help="build the venvs here and keep them (default: a temporary folder)"
    )
    parser.add_argument(
        "--tests", default="", help="test files (space-separated) the setuptools84 case runs"
    )
    parser.add_argument("cases", nargs="*", help=f"some of {', '.join(CASES)} (default: all)")
    args = parser.parse_args()
    TESTS[:] = [
        t for t in args.tests.split() if t.startswith("tests/layers/")
    ]  # not the Colab env's install tests
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; the cases are {', '.join(CASES)}")
    work = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="lablib-runtimes-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="lablib-runtime-cwd-") as cwd:
            for name in args.cases or CASES:
                start = time.perf_counter()
                python = args.py312 if name == "setuptools84" else args.py313
                summary = CASES[name](python, work, cwd)
                results.append((name, summary, time.perf_counter() - start))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\n| case | result | seconds |\n|---|---|---|")
    for name, summary, seconds in results:
        print(f"| {name} | {summary} | {seconds:.0f} |")


if __name__ == "__main__":
    main()
