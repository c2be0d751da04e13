"""Gradescope autograder zip, run against a simulated /autograder layout."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

from lablib.cli import main
from grading_paths import CORPUS, FIXTURE_HIDDEN, FIXTURE_LAB, FIXTURE_SOLUTION

pytestmark = pytest.mark.integration  # builds autograder zips and runs them


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
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), LABLIB_PYTHON=sys.executable)
    env["PYTHON"] = "/nonexistent/python"  # an image's own PYTHON (node-gyp's) changes nothing
    result = subprocess.run(
        ["bash", str(root / "run_autograder")], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads((root / "results" / "results.json").read_text())


def _setup_installs_only_the_shipped_wheel(setup_sh: str, wheel_name: str) -> None:
    """No pip command in setup.sh may name lablib except the wheel file shipped in the zip."""
    installs = [line for line in setup_sh.splitlines() if "pip install" in line]
    assert any(f'"$HERE/wheels/{wheel_name}' in line for line in installs), installs
    for line in installs:
        words = line.replace('"', " ").split()
        named = [w for w in words if "lablib" in w.lower()]
        assert all(w.startswith("$HERE/wheels/lablib-") and ".whl" in w for w in named), line
        assert "--index-url" not in line and "--extra-index-url" not in line, line


def test_zip_contents(tmp_path):
    import hashlib
    import base64

    import lablib

    zip_path = tmp_path / "autograder.zip"
    assert (
        main(
            [
                "gradescope",
                str(FIXTURE_LAB),
                "-o",
                str(zip_path),
                "--tests",
                str(FIXTURE_HIDDEN),
                "--lab-notebook",
                str(FIXTURE_SOLUTION),
            ]
        )
        == 0
    )
    wheel_name = f"lablib-{lablib.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(zip_path) as zf:
        names = set(zf.namelist())
        assert {
            "setup.sh",
            "run_autograder",
            "config.json",
            "lab.ipynb",
            "tests/lab0_fixture.py",
            "spec/lab0_fixture.py",
            f"wheels/{wheel_name}",
        } <= names
        setup_sh = zf.read("setup.sh").decode()
        _setup_installs_only_the_shipped_wheel(setup_sh, wheel_name)
        assert "lablib==" not in setup_sh
        lab = zf.read("lab.ipynb").decode()
        assert "### BEGIN SOLUTION" not in lab and "e / e.sum" not in lab  # no solutions shipped
        assert (zf.getinfo("run_autograder").external_attr >> 16) & 0o111
        wheel_bytes = zf.read(f"wheels/{wheel_name}")
    (tmp_path / wheel_name).write_bytes(wheel_bytes)
    with zipfile.ZipFile(tmp_path / wheel_name) as wz:  # the running lablib, with a valid RECORD
        package = pathlib.Path(lablib.__file__).parent
        assert (
            wz.read("lablib/grading/gradescope.py")
            == (package / "grading" / "gradescope.py").read_bytes()
        )
        assert "lablib/grading/labs/lab1_attention.ipynb" in wz.namelist()
        assert not [n for n in wz.namelist() if "__pycache__" in n or n.startswith("solutions/")]
        info = f"lablib-{lablib.__version__}.dist-info"
        assert "Name: lablib" in wz.read(f"{info}/METADATA").decode()
        assert "lablib = lablib.cli:main" in wz.read(f"{info}/entry_points.txt").decode()
        rows = [line.split(",") for line in wz.read(f"{info}/RECORD").decode().splitlines()]
        assert {row[0] for row in rows} == set(wz.namelist())
        for name, digest, size in rows:
            if name != f"{info}/RECORD":
                data = wz.read(name)
                expected = (
                    base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                )
                assert digest == f"sha256={expected}" and int(size) == len(data), name
    again = tmp_path / "again.zip"
    main(
        [
            "gradescope",
            str(FIXTURE_LAB),
            "-o",
            str(again),
            "--tests",
            str(FIXTURE_HIDDEN),
            "--lab-notebook",
            str(FIXTURE_SOLUTION),
        ]
    )
    assert again.read_bytes() == zip_path.read_bytes()  # deterministic
    # --wheel ships the file given, as it is
    given = tmp_path / "given" / wheel_name
    given.parent.mkdir()
    given.write_bytes(wheel_bytes)
    third = tmp_path / "third.zip"
    assert (
        main(
            [
                "gradescope",
                str(FIXTURE_LAB),
                "-o",
                str(third),
                "--lab-notebook",
                str(FIXTURE_SOLUTION),
                "--wheel",
                str(given),
            ]
        )
        == 0
    )
    with zipfile.ZipFile(third) as zf:
        assert zf.read(f"wheels/{wheel_name}") == wheel_bytes


def test_results_without_hidden_tests_are_visible_at_once():
    from lablib.grading.report.gradescope import to_gradescope_json
    from lablib.grading.results import Status, SubmissionResult, TestResult

    public = TestResult(
        id="softmax::worked_example",
        piece="softmax",
        name="worked_example",
        score=2.0,
        max_score=2.0,
        passed=True,
        hidden=False,
    )
    hidden = TestResult(
        id="softmax::large",
        piece="softmax",
        name="large",
        score=0.0,
        max_score=3.0,
        passed=False,
        hidden=True,
        message="wrong",
    )

    def result(*tests):
        return SubmissionResult(
            submission="a",
            path="a.ipynb",
            status=Status(),
            score=sum(t.score for t in tests),
            max_score=sum(t.max_score for t in tests),
            pieces={},
            tests=list(tests),
        )

    data = to_gradescope_json(result(public))
    assert data["visibility"] == "visible" and data["score"] == 2.0
    result = result(public, hidden)
    assert to_gradescope_json(result)["visibility"] == "after_published"


def _unpacked_autograder(tmp_path):
    """The fixture lab's autograder zip (no hidden tests), built and unpacked: its folder."""
    zip_path, source = tmp_path / "autograder.zip", tmp_path / "source"
    argv = ["gradescope", str(FIXTURE_LAB), "-o", str(zip_path)]
    assert main([*argv, "--lab-notebook", str(FIXTURE_SOLUTION)]) == 0
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(source)
    return source


def test_setup_sh_installs_into_its_own_venv_never_the_system_python(tmp_path):
    """An externally managed system Python (PEP 668) refuses `pip install`: setup.sh makes
    (or reuses) a venv and every pip command runs that venv's Python; run_autograder uses it."""
    source = _unpacked_autograder(tmp_path)
    setup_sh = (source / "setup.sh").read_text()
    run_autograder = (source / "run_autograder").read_text()
    pip_lines = [line.strip().removeprefix("if ! ") for line in setup_sh.splitlines()]
    pip_lines = [line for line in pip_lines if " pip " in line and not line.startswith("echo ")]
    assert len(pip_lines) == 2 and all(
        line.startswith('"$VENV/bin/python" -m pip') for line in pip_lines
    ), pip_lines
    assert 'python3 -m venv "$VENV"' in setup_sh and "python3-venv" in setup_sh
    assert "${LABLIB_VENV:-/autograder/lablib-venv}/bin/python" in run_autograder

    # Run it: a fresh venv is made at LABLIB_VENV; pip is stubbed to record what it is asked.
    venv = tmp_path / "gs-venv"
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    (fake / "apt-get").write_text('#!/bin/sh\necho apt-get "$@" >> "$LOG"\n')
    (fake / "apt-get").chmod(0o755)
    log = tmp_path / "log"
    stub = (
        '#!/bin/sh\necho "$0 $*" >> "$LOG"\n'
        "case \"$*\" in *'import lablib'*) exit 0;; esac\nexit 0\n"
    )
    # Make the venv first with a stub python that records every call (pip included).
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(stub)
    (venv / "bin" / "python").chmod(0o755)
    env = dict(os.environ, LABLIB_VENV=str(venv), LOG=str(log), PATH=f"{fake}:{os.environ['PATH']}")
    result = subprocess.run(
        ["bash", str(source / "setup.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    assert all(c.startswith(f"{venv}/bin/python ") for c in calls), (
        calls
    )  # the venv reused, apt untouched
    assert any("-m pip install" in c and "/wheels/lablib-" in c for c in calls), calls


def test_wrong_wheel_is_refused(tmp_path, capsys):
    bogus = tmp_path / "lablib-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(bogus, "w") as zf:
        zf.writestr("other/__init__.py", "")
    cases = [
        (bogus, "is not a lablib wheel (no lablib-0.1.0.dist-info/METADATA"),
        (tmp_path / "missing.whl", "does not exist"),
        (FIXTURE_SOLUTION, "not named like a lablib wheel"),
    ]
    for wheel, words in cases:
        assert (
            main(
                [
                    "gradescope",
                    str(FIXTURE_LAB),
                    "-o",
                    str(tmp_path / "ag.zip"),
                    "--lab-notebook",
                    str(FIXTURE_SOLUTION),
                    "--wheel",
                    str(wheel),
                ]
            )
            == 2
        )
        assert words in capsys.readouterr().err
    assert not (tmp_path / "ag.zip").exists()


def test_run_autograder_writes_gradescope_results(tmp_path):
    zip_path = tmp_path / "autograder.zip"
    main(
        [
            "gradescope",
            str(FIXTURE_LAB),
            "-o",
            str(zip_path),
            "--tests",
            str(FIXTURE_HIDDEN),
            "--lab-notebook",
            str(FIXTURE_SOLUTION),
            "--timeout",
            "10",
        ]
    )
    root = tmp_path / "autograder"
    _install(zip_path, root)
    shutil.copy(FIXTURE_SOLUTION, root / "submission" / "my_lab.ipynb")
    data = _run(root)
    assert data["score"] == 8 and data["stdout_visibility"] == "hidden"
    assert {t["name"] for t in data["tests"]} >= {
        "softmax: worked_example",
        "softmax: large_logits (hidden)",
    }
    hidden = next(t for t in data["tests"] if t["name"].endswith("(hidden)"))
    assert hidden["visibility"] == "after_published" and hidden["max_score"] > 0
    assert all(
        set(t) == {"name", "score", "max_score", "output", "visibility"} for t in data["tests"]
    )
    # Students see no total (it counts the hidden points) until the instructor publishes;
    # the public tests are shown at once.
    assert data["visibility"] == "after_published"
    assert all(
        t["visibility"] == "visible" for t in data["tests"] if not t["name"].endswith("(hidden)")
    )
    # The same writers as `lablib grade` ran: the gradebook and feedback stay beside results.json.
    results = root / "results"
    assert (results / "grades.csv").read_text().splitlines()[1].startswith("my_lab,ok,8,")
    assert (results / "feedback" / "my_lab.md").is_file() and (results / "summary.html").is_file()

    (root / "submission" / "my_lab.ipynb").unlink()
    shutil.copy(CORPUS / "infinite_loop.ipynb", root / "submission" / "lab.ipynb")
    data = _run(root)
    assert data["score"] == 4 and "timeout" in data["output"]
    loop = next(t for t in data["tests"] if t["name"] == "softmax: worked_example")
    assert loop["score"] == 0 and "time limit" in loop["output"]

    (root / "submission" / "lab.ipynb").unlink()
    data = _run(root)
    assert data["score"] == 0 and "No .ipynb" in data["output"]


def test_one_notebook_of_an_upload_is_graded_never_the_best_of_several(tmp_path):
    """An upload of several notebooks is not graded all with the best kept (a student
    could hedge, one variant per notebook, against the hidden tests): the one named as the
    lab's is graded and the others named; with none so named nothing is graded and the
    student is told what to upload. Jupyter's checkpoint copies and links are not read;
    the results folder is the grading user's alone (its cache holds the hidden tests'
    messages)."""
    from lablib.grading.gradescope import run_autograder

    zip_path = tmp_path / "autograder.zip"
    main(["gradescope", str(FIXTURE_LAB), "-o", str(zip_path), "--tests", str(FIXTURE_HIDDEN)]
         + ["--lab-notebook", str(FIXTURE_SOLUTION), "--timeout", "10"])  # fmt: skip
    root = tmp_path / "autograder"
    _install(zip_path, root)
    upload = root / "submission"
    shutil.copy(FIXTURE_SOLUTION, upload / "variant_a.ipynb")
    shutil.copy(CORPUS / "infinite_loop.ipynb", upload / "variant_b.ipynb")
    data = run_autograder(root)
    assert data["score"] == 0 and data["tests"] == [], data
    assert "2 notebooks were uploaded (variant_a.ipynb, variant_b.ipynb)" in data["output"]
    assert "Upload only your lab notebook, lab0_fixture.ipynb" in data["output"]
    assert data["output_format"] == "text"

    (upload / "variant_a.ipynb").rename(upload / "Lab0_Fixture.ipynb")
    (upload / ".ipynb_checkpoints").mkdir()
    shutil.copy(CORPUS / "infinite_loop.ipynb", upload / ".ipynb_checkpoints" / "x.ipynb")
    (upload / "link.ipynb").symlink_to(FIXTURE_SOLUTION)
    data = run_autograder(root)
    assert data["score"] == 8, data["output"]
    assert "Graded Lab0_Fixture.ipynb" in data["output"] and "variant_b.ipynb" in data["output"]
    assert "x.ipynb" not in data["output"] and "link.ipynb" not in data["output"]
    assert (root / "results").stat().st_mode & 0o077 == 0


def test_uploaded_names_reach_results_json_without_control_characters(tmp_path):
    from lablib.grading.gradescope import chosen_notebook

    (tmp_path / "a\x1b[2J\x1b[31mx.ipynb").write_text("{}")
    (tmp_path / "b.ipynb").write_text("{}")
    books, why = chosen_notebook(tmp_path, "lab0_fixture")
    assert books == [] and "\x1b" not in why and "a\u241b[2J\u241b[31mx.ipynb" in why, why


def test_results_are_written_before_gradescopes_own_time_limit(tmp_path, monkeypatch, capsys):
    """Gradescope ends a run at its own limit (10 minutes by default) and the student then
    gets nothing; lablib's budget (10 times --timeout, restarts and TensorFlow's imports
    outside it) could outlast it. The student's code gets half the limit, and a watchdog
    stops every run before the limit so that results.json is written, the tests not run
    said to be the grader's (here the limit is made to come at once)."""
    from lablib.grading import gradescope
    from lablib.grading.run.supervisor import STOPPING

    zip_path = tmp_path / "autograder.zip"
    args = ["gradescope", str(FIXTURE_LAB), "-o", str(zip_path), "--tests", str(FIXTURE_HIDDEN)]
    args += ["--lab-notebook", str(FIXTURE_SOLUTION), "--timeout", "20"]
    for wrong in ("inf", "0.01", "nan", "1000"):  # the timer would never start, or at once
        assert main([*args, "--gradescope-minutes", wrong]) == 2
        assert "from 1 to 240 minutes" in capsys.readouterr().err
    assert main([*args, "--gradescope-minutes", "1"]) == 0
    root = tmp_path / "autograder"
    source = _install(zip_path, root)
    assert json.loads((source / "config.json").read_text())["gradescope_seconds"] == 60
    assert gradescope.budget(600) == 300 and gradescope.budget(60) == 30
    shutil.copy(CORPUS / "infinite_loop.ipynb", root / "submission" / "lab.ipynb")
    monkeypatch.setattr(gradescope, "_margin", lambda limit: limit - 2)  # the limit is near
    began = time.monotonic()
    data = gradescope.run_autograder(root)
    # not serial: the limit given (60 s); the whole test takes about 4 s in the parallel pass
    assert time.monotonic() - began < 60 and not STOPPING.is_set()
    stopped = [
        t for t in data["tests"] if "an error in the grader, not in your code" in t["output"]
    ]
    assert stopped and all(t["score"] == 0 for t in stopped), data["tests"]
    assert "grader-error" in data["output"]  # the student's: the grader's, to be regraded
    book = (root / "results" / "grades.json").read_text()  # the instructor's: why
    assert "Gradescope's time limit for the autograder (1 min) was near" in book


def test_a_grader_that_fails_still_tells_the_student(tmp_path, monkeypatch, capsys):
    """An exception anywhere in the grader (a report writer, a full disk) left no
    results.json: Gradescope showed the student only its own "autograder failed". The
    student is told it is not their submission's doing, and the log has the traceback."""
    from lablib.grading import gradescope

    def fails(root=None, elapsed=0.0):
        raise RuntimeError("a report writer failed")

    monkeypatch.setattr(gradescope, "run_autograder", fails)
    assert gradescope.main(["run", "--root", str(tmp_path)]) == 1
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    assert data["score"] == 0 and "The grader failed (RuntimeError)" in data["output"]
    assert "not because of your submission" in data["output"]
    assert "a report writer failed" in capsys.readouterr().err

    def fails_after_results(root=None, elapsed=0.0):  # results.json is written first
        (pathlib.Path(root) / "results" / "results.json").write_text('{"score": 7}')
        raise RuntimeError("the summary page failed")

    monkeypatch.setattr(gradescope, "run_autograder", fails_after_results)
    assert gradescope.main(["run", "--root", str(tmp_path)]) == 1
    kept = json.loads((tmp_path / "results" / "results.json").read_text())
    assert kept == {"score": 7}, "the student's results, written before the failure, are kept"


def test_a_file_not_under_version_control_is_not_shipped_in_the_wheel(tmp_path, monkeypatch):
    """A wheel of a lablib installed from a checkout took every file of its package folder:
    a hidden test an instructor kept there went to Gradescope inside the wheel, where the
    students' code can read it. Only the files under version control are shipped, and
    those left out are named; outside a git checkout every file is the package's."""
    import types
    import warnings

    from lablib.grading.author import distwheel

    package = tmp_path / "checkout" / "lablib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text("x = 1\n")
    monkeypatch.setattr(distwheel, "_package_dir", lambda: package)
    monkeypatch.setattr(distwheel, "_distribution", lambda: types.SimpleNamespace(files=None))
    files, _ = distwheel.wheel_files()  # not a checkout: everything
    assert sorted(files) == ["lablib/__init__.py", "lablib/layers.py"]
    git = ["git", "-C", str(package.parent), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "lablib"], check=True)
    (package / "lab1_hidden.py").write_text("EXPECTED = [0.25, 0.5]\n")  # not committed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        files, _ = distwheel.wheel_files()
    assert sorted(files) == ["lablib/__init__.py", "lablib/layers.py"]
    said = " ".join(str(w.message) for w in caught)
    assert "lab1_hidden.py" in said and "not shipped" in said


def test_setup_sh_names_the_python_and_what_tensorflow_supports_when_pip_fails(tmp_path):
    """A base image whose Python TensorFlow has no wheel for: pip's "No matching
    distribution found for tensorflow" alone does not say what to change. setup.sh stops
    at once with the image's Python version, what lablib and TensorFlow need, and what to
    choose; it never goes on to the version check of a lablib that is not there."""
    import importlib.metadata

    source = _unpacked_autograder(tmp_path)
    venv, log = tmp_path / "gs-venv", tmp_path / "log"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(
        '#!/bin/sh\necho "$*" >> "$LOG"\n'
        'case "$*" in *sys.version_info*) echo 3.14; exit 0;; esac\n'
        "case \"$*\" in *'pip install -q --upgrade pip'*) exit 0;; esac\n"
        "case \"$*\" in *'pip install'*) echo 'ERROR: No matching distribution found for "
        "tensorflow>=2.19' >&2; exit 1;; esac\nexit 0\n"
    )
    (venv / "bin" / "python").chmod(0o755)
    env = dict(os.environ, LABLIB_VENV=str(venv), LOG=str(log))
    result = subprocess.run(
        ["bash", str(source / "setup.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    message = result.stderr.splitlines()[-1]
    tensorflow = importlib.metadata.version("tensorflow")
    assert message.startswith("setup.sh: pip could not install wheels/lablib-"), message
    assert f"into Python 3.14 ({venv})" in message and "lablib needs Python >=3.10" in message
    assert (
        f"the TensorFlow this zip was built beside ({tensorflow}) has wheels for Python 3."
        in message
    )
    assert "3.14" not in message.split("has wheels for")[1].split("(pip")[0]
    assert not any("import lablib" in line for line in log.read_text().splitlines())
