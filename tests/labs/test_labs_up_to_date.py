"""labs/*.ipynb must be exactly what `lablib assign` makes from solutions/*.ipynb, and the
copies shipped in the package (lablib/grading/labs/) exactly labs/."""

import pathlib
import shutil

import pytest

from lablib.grading.author.assignment import assign_notebook, expected_assignment_text

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
FIXTURE_SOLUTION = (
    ROOT / "tests" / "grading" / "fixtures" / "lab0_fixture" / "solutions" / "lab0_fixture.ipynb"
)


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
    assert not problems, (
        f"{problems[0]}: run `lablib assign` from the project root and commit labs/."
    )


def test_package_ships_exactly_the_released_labs():
    package = ROOT / "lablib" / "grading" / "labs"
    released = {p.name: p.read_bytes() for p in (ROOT / "labs").glob("*.ipynb")}
    shipped = {p.name: p.read_bytes() for p in package.glob("*.ipynb")}
    assert released, "labs/ holds no notebooks"
    assert sorted(shipped) == sorted(released), (
        "run `lablib assign` from the project root and commit lablib/grading/labs/"
    )
    stale = [name for name in released if shipped[name] != released[name]]
    assert not stale, (
        f"lablib/grading/labs/{stale[0]} differs from labs/: run `lablib assign` from the project root"
    )
    for name, data in shipped.items():  # blank labs only: students install the same package
        assert data != (ROOT / "solutions" / name).read_bytes(), (
            f"lablib/grading/labs/{name} is a solution"
        )
    assert not [p for p in package.iterdir() if p.suffix != ".ipynb"], (
        "only released notebooks belong there"
    )


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
