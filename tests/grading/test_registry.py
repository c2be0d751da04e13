"""The lab registry (lablib/labs.py): one entry is enough for a lab to be assigned,
checked in a notebook and graded, by its short name."""

import csv
import shutil

import numpy as np
import pytest

import lablib
from lablib import install, labs
from lablib.cli import main
from lablib.grading import spec
from grading_paths import FIXTURE_HIDDEN, FIXTURE_LAB, FIXTURE_SOLUTION


@pytest.fixture()
def fixture_entry():
    """The fixture lab registered as a course would register its own lab."""
    entry = labs.register(
        labs.Lab(
            "lab0_fixture",
            "lab0",
            "Fixture lab (registered)",
            spec=str(FIXTURE_LAB / "lab0_fixture.py"),
        )
    )
    yield entry
    labs.unregister("lab0")


def test_shipped_labs_are_resolved_by_either_name():
    for lab in labs.all_labs():
        assert labs.resolve_lab(lab.short) is labs.resolve_lab(lab.name) is lab
        assert lab.spec_path.is_file() and lab.keras in labs.KERAS_MODES
        assert spec.resolve_lab_name(lab.short) == lab.name
    assert [lab.short for lab in labs.all_labs()] == ["lab1", "lab2", "lab3", "lab4"]
    assert labs.resolve_lab("lab2").legacy and not labs.resolve_lab("lab1").legacy
    with pytest.raises(labs.UnknownLab, match=r"Unknown lab 'lab9'.*lab1 \(lab1_attention\)"):
        labs.resolve_lab("lab9")


def test_register_refuses_clashes_and_shipped_labs_stay():
    with pytest.raises(ValueError, match="clashes with the registered lab 'lab1_attention'"):
        labs.register(labs.Lab("lab1_other", "lab1", "Another lab 1"))
    with pytest.raises(ValueError, match="cannot be unregistered"):
        labs.unregister("lab1")
    with pytest.raises(ValueError, match="keras='tf2'"):
        labs.Lab("x", "y", "z", keras="tf2")
    with pytest.raises(TypeError, match=r"write \('tfm',\)"):
        labs.Lab("x", "y", "z", extras="tfm")


def test_a_registered_lab_is_assigned_checked_and_graded(
    fixture_entry, tmp_path, monkeypatch, capsys
):
    # assign: `lablib assign lab0` in a course folder finds solutions/<name>.ipynb
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copy(FIXTURE_SOLUTION, course / "solutions" / "lab0_fixture.ipynb")
    monkeypatch.chdir(course)
    assert main(["assign", "lab0"]) == 0
    blank = course / "labs" / "lab0_fixture.ipynb"
    assert blank.is_file() and "raise NotImplementedError" in blank.read_text()

    # check: the short name reaches the lab's public tests through the registry
    def softmax(x, axis=-1):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    result = lablib.check("lab0", "softmax", softmax, quiet=True)
    assert result.lab == "lab0_fixture" and result.passed and result.score > 0
    assert install.lab_extras("lab0") == ()  # the registry's extras

    # grade: `lablib grade lab0` with the course folder's released lab
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "alice.ipynb")
    shutil.copy(blank, subs / "bob.ipynb")
    out = tmp_path / "out"
    assert (
        main(
            [
                "grade",
                "lab0",
                str(subs),
                "-o",
                str(out),
                "--course",
                str(course),
                "--tests",
                str(FIXTURE_HIDDEN),
                "--timeout",
                "20",
                "--jobs",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    with open(out / "grades.csv", newline="") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert (rows["alice"]["status"], rows["alice"]["score"], rows["alice"]["max_score"]) == (
        "ok",
        "8",
        "8",
    )
    assert (rows["bob"]["status"], rows["bob"]["score"]) == ("ok", "0")
    assert "Fixture lab" in (out / "feedback" / "alice.md").read_text()


def test_assign_in_a_checkout_that_is_not_the_running_lablib_says_so(tmp_path, monkeypatch, capsys):
    # A project checkout (it has lablib/grading/labs/) whose lablib is not the one running:
    # the package copy the grader falls back to is not written, and assign says so.
    course = tmp_path / "checkout"
    (course / "solutions").mkdir(parents=True)
    (course / "lablib" / "grading" / "labs").mkdir(parents=True)
    shutil.copy(FIXTURE_SOLUTION, course / "solutions" / "lab0_fixture.ipynb")
    monkeypatch.chdir(course)
    assert main(["assign", "solutions/lab0_fixture.ipynb"]) == 0
    err = capsys.readouterr().err
    assert "lablib/grading/labs/ here is NOT updated" in err and "pip install -e ." in err
    assert (course / "labs" / "lab0_fixture.ipynb").is_file()
    assert not any((course / "lablib" / "grading" / "labs").iterdir())
    # with -o, only that folder is meant: no warning
    assert main(["assign", "solutions/lab0_fixture.ipynb", "-o", "elsewhere"]) == 0
    assert "NOT updated" not in capsys.readouterr().err
