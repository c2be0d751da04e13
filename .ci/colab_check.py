"""Run each lab's first cell in the Colab-like venv, as a student's fresh runtime would.

Used by ``bash .ci/run colab``; run it with that venv's Python (standard library only)::

    .venv-colab/bin/python .ci/colab_check.py --baseline .venv-colab/baseline.json [--record-baseline]

For each lab, from the venv's recorded baseline (what was installed before lablib):
run the lab's first code cell in a fresh process with ``LABLIB_PIP`` = this checkout,
time it, and assert that tensorflow, keras, numpy, protobuf, ml-dtypes and h5py kept
their versions (Lab 2: tf-models-official and tf-keras of the installed TensorFlow
minor arrive, and TF Model Garden's TransformerEncoderBlock builds in legacy mode).
Then the cell runs again: with everything present it must install nothing. Finally the
cells of Labs 2 and 3 leave the venv with everything the labs import, for the tests.
"""

import argparse
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _registry():
    """lablib's lab registry, read from this checkout's lablib/labs.py (standard library
    only) without importing lablib: the Colab-like venv must not hold lablib yet."""
    spec = importlib.util.spec_from_file_location(
        "lablib_labs_registry", ROOT / "lablib" / "labs.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


# Every registered lab; those needing TF Model Garden last (they leave it installed).
LABS = sorted(_registry().all_labs(), key=lambda lab: "tfm" in lab.extras)
KEPT = ("tensorflow", "keras", "numpy", "protobuf", "ml-dtypes", "h5py")
PYTHON = sys.executable
VERSIONS = (
    "import importlib.metadata as m, json, re\n"
    "print(json.dumps({re.sub(r'[-_.]+', '-', d.metadata['Name']).lower(): d.version"
    " for d in m.distributions() if d.metadata['Name']}))"
)
TFM_BUILDS = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
import tensorflow_models as tfm
block = tfm.nlp.layers.TransformerEncoderBlock(num_attention_heads=2, inner_dim=16, inner_activation="relu")
out = block(tf.zeros([2, 5, 8]))
assert tuple(out.shape) == (2, 5, 8), out.shape
import tf_keras
assert isinstance(block, tf_keras.layers.Layer), type(block).__mro__
print("TransformerEncoderBlock built in legacy mode:", tf.__version__, tfm.__name__)
"""


def versions(python: str = PYTHON) -> dict:
    """A venv's installed distributions (-I: not the checkout's lablib.egg-info in cwd)."""
    out = subprocess.run([python, "-I", "-c", VERSIONS], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def pip(*args, python: str = PYTHON):
    subprocess.run([python, "-m", "pip", *args], check=True, stdout=subprocess.DEVNULL)


def restore(baseline: dict) -> None:
    """Back to the baseline: remove what the cells added, reinstall what they changed."""
    now = versions()
    added = sorted(set(now) - set(baseline))
    changed = sorted(
        f"{name}=={baseline[name]}" for name in baseline if now.get(name) != baseline[name]
    )
    if added:
        pip("uninstall", "-y", "-q", *added)
    if changed:
        pip("install", "-q", "--no-deps", *changed)


def first_cell(name: str) -> str:
    nb = json.loads((ROOT / "labs" / f"{name}.ipynb").read_text())
    source = "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])
    assert source.startswith("# SETUP"), f"{name}: the first code cell is not a # SETUP cell"
    return source


def cell_process(source: str, folder: str, python: str = PYTHON, drop=(), extra_env=None):
    """A first cell run in a fresh process in an empty folder, like a new runtime (lablib is
    found only once installed), ``LABLIB_PIP`` = this checkout: ``(CompletedProcess,
    seconds)``. ``drop``: more variables to leave out; ``extra_env``: variables to set."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TF_USE_LEGACY_KERAS", *drop)
    }
    env["LABLIB_PIP"] = str(ROOT)
    env.update(extra_env or {})
    start = time.perf_counter()
    result = subprocess.run(
        [python, "-c", source], cwd=folder, env=env, capture_output=True, text=True
    )
    return result, time.perf_counter() - start


def builds_model_garden(folder: str, python: str = PYTHON) -> str:
    """TF Model Garden's TransformerEncoderBlock built in legacy mode (:data:`TFM_BUILDS`)."""
    check = subprocess.run([python, "-c", TFM_BUILDS], cwd=folder, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr[-3000:]
    return check.stdout.strip()


def run_cell(source: str, folder: str):
    result, seconds = cell_process(source, folder)
    if result.returncode != 0:
        raise SystemExit(
            f"first cell failed (exit {result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
        )
    return seconds, result.stdout


def check_kept(before: dict, after: dict, lab: str) -> None:
    for name in KEPT:
        assert after.get(name) == before.get(name), (
            f"{lab}: {name} {before.get(name)} -> {after.get(name)}"
        )


def add_grading(baseline: dict) -> None:
    """lablib's ``grading`` extra (setup.cfg) into the venv, KEPT pinned at the baseline."""
    import configparser

    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    extra = [
        line.strip()
        for line in parser["options.extras_require"]["grading"].splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    with tempfile.TemporaryDirectory(prefix="lablib-colab-") as folder:
        pins = pathlib.Path(folder) / "pins.txt"
        pins.write_text("".join(f"{name}=={baseline[name]}\n" for name in KEPT if name in baseline))
        pip("install", "-q", "-c", str(pins), *extra)
    check_kept(baseline, versions(), "the grading extra")
    print("grading extra installed:", ", ".join(extra))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline", required=True, help="JSON of the venv's versions before lablib"
    )
    parser.add_argument(
        "--record-baseline",
        action="store_true",
        help="write the venv's versions to --baseline (once, after building it)",
    )
    parser.add_argument(
        "--add-grading",
        action="store_true",
        help="install lablib's grading extra, Colab's versions of KEPT pinned (for grading there)",
    )
    args = parser.parse_args()
    if args.add_grading:
        add_grading(json.loads(pathlib.Path(args.baseline).read_text()))
        return
    if args.record_baseline:
        found = versions()
        assert "lablib" not in found, (
            "the Colab-like venv must not hold lablib before the cells run"
        )
        pathlib.Path(args.baseline).write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        return
    baseline = json.loads(pathlib.Path(args.baseline).read_text())
    rows = []
    with tempfile.TemporaryDirectory(prefix="lablib-colab-") as folder:
        for entry in LABS:
            lab, name = entry.short, entry.name
            restore(baseline)
            assert "lablib" not in versions(), "restore left lablib installed"
            source = first_cell(name)
            seconds, out = run_cell(source, folder)
            after = versions()
            check_kept(baseline, after, lab)
            assert "lablib" in after, f"{lab}: the first cell did not install lablib"
            added = sorted(f"{n} {after[n]}" for n in set(after) - set(baseline))
            if "tfm" in entry.extras:
                tf_minor = ".".join(baseline["tensorflow"].split(".")[:2])
                for pkg in ("tf-models-official", "tf-keras"):
                    assert after.get(pkg, "").startswith(tf_minor + "."), (
                        f"{lab}: {pkg} {after.get(pkg)} for TF {tf_minor}"
                    )
                print(builds_model_garden(folder))
            print(
                f"{lab}: the first cell printed:\n"
                + "\n".join("    " + line for line in out.strip().splitlines())
            )
            again, out_again = run_cell(source, folder)
            assert "Installing" not in out_again and versions() == after, (
                f"{lab}: second run installed:\n{out_again}"
            )
            rows.append((lab, seconds, again, len(added)))
            print(
                f"{lab}: first cell {seconds:.1f} s, again {again:.1f} s; kept "
                + ", ".join(f"{n} {after.get(n)}" for n in KEPT)
                + f"; added {len(added)}: "
                + ", ".join(
                    a
                    for a in added
                    if a.split()[0]
                    in ("lablib", "rdkit", "tf-models-official", "tf-keras", "setuptools")
                )
            )
        # Everything the labs import, for the tests that follow: the state the last lab
        # left (TF Model Garden) plus the first cell of each lab with other extras (RDKit).
        for entry in LABS:
            if entry.extras and "tfm" not in entry.extras:
                run_cell(first_cell(entry.name), folder)
        check_kept(baseline, versions(), "every lab")
    print("\n| lab | first cell, fresh runtime (s) | again (s) | distributions added |")
    print("|---|---|---|---|")
    for lab, seconds, again, added in rows:
        print(f"| {lab} | {seconds:.0f} | {again:.1f} | {added} |")


if __name__ == "__main__":
    main()
