"""Shared fixtures of the autograder tests: the tiny fixture lab (pure NumPy), and lablib
installed from a wheel into a fresh venv (built once per session, for the tests that
need it: tests/grading/wheel_venv.py)."""

import pytest
from grading_paths import FIXTURE_HIDDEN, FIXTURE_LAB


@pytest.fixture(scope="session")
def fixture_lab():
    """The fixture lab's spec with its hidden tests loaded."""
    from lablib.grading.spec import load_lab

    return load_lab(FIXTURE_LAB, hidden_dirs=[FIXTURE_HIDDEN])


@pytest.fixture(scope="session")
def installed_lablib(tmp_path_factory):
    """(python of a fresh venv with lablib installed from a wheel of this checkout, the wheel)."""
    from wheel_venv import install_from_wheel

    return install_from_wheel(tmp_path_factory.mktemp("wheel"))
