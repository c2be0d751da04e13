"""Shared fixtures of the autograder tests: the tiny fixture lab (pure NumPy)."""

import pytest
from grading_paths import FIXTURE_HIDDEN, FIXTURE_LAB


@pytest.fixture(scope="session")
def fixture_lab():
    """The fixture lab's spec with its hidden tests loaded."""
    from lablib.grading.spec import load_lab

    return load_lab(FIXTURE_LAB, hidden_dirs=[FIXTURE_HIDDEN])
