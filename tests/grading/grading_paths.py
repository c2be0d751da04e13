"""Paths of the autograder's test fixtures (imported by the tests in this folder)."""

import pathlib

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIXTURE_LAB = HERE / "fixtures" / "lab0_fixture"
FIXTURE_SOLUTION = FIXTURE_LAB / "solutions" / "lab0_fixture.ipynb"
FIXTURE_HIDDEN = FIXTURE_LAB / "hidden"
CORPUS = HERE / "corpus"
