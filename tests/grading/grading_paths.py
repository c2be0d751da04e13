"""Paths of the autograder's test fixtures, and the processes a test's grading runs left
(imported by the tests in this folder)."""

import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIXTURE_LAB = HERE / "fixtures" / "lab0_fixture"
FIXTURE_SOLUTION = FIXTURE_LAB / "solutions" / "lab0_fixture.ipynb"
FIXTURE_HIDDEN = FIXTURE_LAB / "hidden"
CORPUS = HERE / "corpus"


def batch_leftovers(batch: str) -> list:
    """``(pid, command line)`` of the processes still alive that a test's grading started:
    the tests label their runs with ``LABLIB_BATCH=<batch>`` in the environment, which
    every process of the run inherits (this process excluded)."""
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and process.environ().get("LABLIB_BATCH") == batch:
                found.append((process.pid, process.cmdline()))
        except psutil.Error:
            pass
    return found


def course_copy(folder: pathlib.Path, lab_name: str, edit=None) -> pathlib.Path:
    """A course's copy of a shipped lab's spec file, ``folder/<lab_name>.py`` (the folder
    made if needed); ``edit(text) -> text`` changes the copy's text first."""
    from lablib.grading.spec import PUBLIC_TESTS_DIR

    text = (PUBLIC_TESTS_DIR / f"{lab_name}.py").read_text()
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / f"{lab_name}.py"
    copy.write_text(edit(text) if edit else text)
    return copy


def run_python(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``code`` run by this test run's Python in a fresh process, its output captured;
    a child still running after ``timeout`` seconds fails the test (TimeoutExpired)."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )
