"""Paths of the autograder's test fixtures, and the processes a test's grading runs left
(imported by the tests in this folder)."""

import os
import pathlib

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
