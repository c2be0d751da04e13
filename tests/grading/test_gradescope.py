"""Gradescope autograder zip, run against a simulated /autograder layout."""

import json
import os
import shutil
import subprocess
import sys
import zipfile

from lablib.cli import main
from grading_paths import CORPUS, FIXTURE_HIDDEN, FIXTURE_LAB, FIXTURE_SOLUTION


def _install(zip_path, root):
    source = root / "source"
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(source)
    for name in ("run_autograder", "setup.sh"):
        os.chmod(source / name, 0o755)
    shutil.copy(source / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    (root / "results").mkdir()
    return source


def _run(root):
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PYTHON=sys.executable)
    result = subprocess.run(["bash", str(root / "run_autograder")], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads((root / "results" / "results.json").read_text())


def test_zip_contents(tmp_path):
    zip_path = tmp_path / "autograder.zip"
    assert main(["gradescope", str(FIXTURE_LAB), "-o", str(zip_path), "--tests", str(FIXTURE_HIDDEN),
                 "--lab-notebook", str(FIXTURE_SOLUTION),
                 "--lablib-spec", "git+https://example.org/lablib.git@v0.1.0"]) == 0
    with zipfile.ZipFile(zip_path) as zf:
        names = set(zf.namelist())
        assert {"setup.sh", "run_autograder", "config.json", "lab.ipynb", "tests/lab0_fixture.py",
                "spec/lab0_fixture.py"} <= names
        assert "git+https://example.org/lablib.git@v0.1.0" in zf.read("setup.sh").decode()
        lab = zf.read("lab.ipynb").decode()
        assert "### BEGIN SOLUTION" not in lab and "e / e.sum" not in lab  # no solutions shipped
        assert (zf.getinfo("run_autograder").external_attr >> 16) & 0o111
    again = tmp_path / "again.zip"
    main(["gradescope", str(FIXTURE_LAB), "-o", str(again), "--tests", str(FIXTURE_HIDDEN),
          "--lab-notebook", str(FIXTURE_SOLUTION),
          "--lablib-spec", "git+https://example.org/lablib.git@v0.1.0"])
    assert again.read_bytes() == zip_path.read_bytes()  # deterministic


def test_run_autograder_writes_gradescope_results(tmp_path):
    zip_path = tmp_path / "autograder.zip"
    main(["gradescope", str(FIXTURE_LAB), "-o", str(zip_path), "--tests", str(FIXTURE_HIDDEN),
          "--lab-notebook", str(FIXTURE_SOLUTION), "--timeout", "10"])
    root = tmp_path / "autograder"
    _install(zip_path, root)
    shutil.copy(FIXTURE_SOLUTION, root / "submission" / "my_lab.ipynb")
    data = _run(root)
    assert data["score"] == 8 and data["stdout_visibility"] == "hidden"
    assert {t["name"] for t in data["tests"]} >= {"softmax: worked_example", "softmax: large_logits (hidden)"}
    hidden = next(t for t in data["tests"] if t["name"].endswith("(hidden)"))
    assert hidden["visibility"] == "after_published" and hidden["max_score"] > 0
    assert all(set(t) == {"name", "score", "max_score", "output", "visibility"} for t in data["tests"])

    (root / "submission" / "my_lab.ipynb").unlink()
    shutil.copy(CORPUS / "infinite_loop.ipynb", root / "submission" / "lab.ipynb")
    data = _run(root)
    assert data["score"] == 4 and "timeout" in data["output"]
    loop = next(t for t in data["tests"] if t["name"] == "softmax: worked_example")
    assert loop["score"] == 0 and "time limit" in loop["output"]

    (root / "submission" / "lab.ipynb").unlink()
    data = _run(root)
    assert data["score"] == 0 and "No .ipynb" in data["output"]
