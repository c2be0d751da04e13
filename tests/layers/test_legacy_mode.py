"""Runs the tests marked ``legacy`` in a child process with TF_USE_LEGACY_KERAS=1."""

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration  # runs the legacy-mode suite in a child process

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_legacy_mode_suite():
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-m",
            "legacy",
            "-p",
            "no:cacheprovider",
            str(ROOT / "tests"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    tail = (result.stdout + result.stderr)[-6000:]
    print(tail)
    assert result.returncode == 0, f"legacy-mode tests failed:\n{tail}"
