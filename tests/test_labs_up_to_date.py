"""labs/*.ipynb must be exactly what `lablib assign` makes from solutions/*.ipynb."""

import pathlib
import shutil

import pytest

from lablib.grading.notebooks import assign_notebook, expected_assignment_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
FIXTURE_SOLUTION = ROOT / "tests" / "grading" / "fixtures" / "lab0_fixture" / "solutions" / "lab0_fixture.ipynb"


def stale_labs(solutions, labs_dir: pathlib.Path) -> list[str]:
    """Messages for each solution whose blank lab in ``labs_dir`` is missing or differs."""
    problems = []
    for solution in solutions:
        lab = labs_dir / solution.name
        if not lab.is_file():
            problems.append(f"{lab} is missing")
        elif lab.read_text(encoding="utf-8") != expected_assignment_text(solution):
            problems.append(f"{lab} is out of date with {solution}")
    return problems


@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_lab_matches_solution(solution):
    problems = stale_labs([solution], ROOT / "labs")
    assert not problems, f"{problems[0]}: run `lablib assign` from the project root and commit labs/."


def test_stale_check_detects_missing_changed_and_fresh_labs(tmp_path):
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    solution = shutil.copy(FIXTURE_SOLUTION, solutions / FIXTURE_SOLUTION.name)
    solution = pathlib.Path(solution)
    labs = tmp_path / "labs"
    assert stale_labs([solution], labs) == [f"{labs / solution.name} is missing"]
    assign_notebook(solution, labs)
    assert stale_labs([solution], labs) == []
    solution.write_text(solution.read_text().replace("Fixture lab", "Fixture lab (edited)"))
    assert "out of date" in stale_labs([solution], labs)[0]
