"""The lab catalog: --lab-notebook, then the course folder, then the labs shipped with lablib."""

import shutil

import pytest

from lablib.cli import main
from lablib.grading.author import catalog
from grading_paths import FIXTURE_SOLUTION


def test_shipped_labs_are_found_without_any_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(catalog.COURSE_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # an empty folder: nothing found through the working directory
    assert "lab1_attention" in catalog.packaged_labs()
    path = catalog.find_lab_notebook("lab1_attention")
    assert path == catalog.PACKAGE_LABS_DIR / "lab1_attention.ipynb" and path.is_file()
    setup = catalog.lab_setup("lab1_attention")
    assert setup and all(
        not line.lstrip().startswith("%") for s in setup for line in s.splitlines()
    )


def test_search_order_explicit_then_course_then_package(monkeypatch, tmp_path):
    course, other = tmp_path / "course", tmp_path / "other"
    for folder in (course, other):
        (folder / "labs").mkdir(parents=True)
        shutil.copy(
            catalog.PACKAGE_LABS_DIR / "lab1_attention.ipynb",
            folder / "labs" / "lab1_attention.ipynb",
        )
    monkeypatch.setenv(catalog.COURSE_DIR_ENV, str(other))
    assert catalog.find_lab_notebook("lab1_attention") == other / "labs" / "lab1_attention.ipynb"
    # --course wins over the environment, --lab-notebook over both
    assert (
        catalog.find_lab_notebook("lab1_attention", course_dir=course)
        == course / "labs" / "lab1_attention.ipynb"
    )
    assert (
        catalog.find_lab_notebook(
            "lab1_attention", course_dir=course, lab_notebook=FIXTURE_SOLUTION
        )
        == FIXTURE_SOLUTION
    )
    # a course folder without the lab falls through to the package copy
    (course / "labs" / "lab1_attention.ipynb").unlink()
    assert (
        catalog.find_lab_notebook("lab1_attention", course_dir=course).parent
        == catalog.PACKAGE_LABS_DIR
    )


def test_missing_notebook_lists_every_place(monkeypatch, tmp_path):
    monkeypatch.setenv(catalog.COURSE_DIR_ENV, str(tmp_path / "course"))
    with pytest.raises(catalog.LabNotebookNotFound) as info:
        catalog.find_lab_notebook("lab9_unknown")
    message = str(info.value)
    assert str(tmp_path / "course" / "labs" / "lab9_unknown.ipynb") in message
    assert str(catalog.PACKAGE_LABS_DIR / "lab9_unknown.ipynb") in message
    assert "--lab-notebook" in message and "--course" in message and "lab1_attention" in message
    with pytest.raises(catalog.LabNotebookNotFound, match="given with --lab-notebook"):
        catalog.find_lab_notebook("lab1_attention", lab_notebook=tmp_path / "nope.ipynb")


def test_grade_command_reports_the_places_looked(monkeypatch, tmp_path, capsys):
    from grading_paths import FIXTURE_LAB

    monkeypatch.delenv(catalog.COURSE_DIR_ENV, raising=False)
    assert (
        main(
            [
                "grade",
                str(FIXTURE_LAB),
                str(FIXTURE_SOLUTION),
                "-o",
                str(tmp_path / "out"),
                "--course",
                str(tmp_path / "course"),
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "No released notebook found for lab 'lab0_fixture'" in err
    assert str(tmp_path / "course" / "labs" / "lab0_fixture.ipynb") in err
    assert not (tmp_path / "out").exists()  # nothing graded without the set-up cells


def test_grade_with_a_course_folder(monkeypatch, tmp_path):
    from lablib.grading.author.assignment import assign_notebook
    from grading_paths import FIXTURE_HIDDEN, FIXTURE_LAB

    course = tmp_path / "course"
    assign_notebook(FIXTURE_SOLUTION, course / "labs")
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "grade",
                str(FIXTURE_LAB),
                str(FIXTURE_SOLUTION),
                "-o",
                "out",
                "--course",
                str(course),
                "--tests",
                str(FIXTURE_HIDDEN),
                "--timeout",
                "20",
                "--quiet",
            ]
        )
        == 0
    )
    assert "lab0_fixture,ok,8," in (tmp_path / "out" / "grades.csv").read_text()
