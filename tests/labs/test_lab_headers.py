"""Every lab's header tells the student the same things, and tells them right.

The header (the first markdown cell of each solution notebook; labs/ is generated from
it) must list every graded piece with the points of its public tests as the lab's spec
defines them, their total, one row per written answer of the notebook with the points
its spec gives (and their total when there are several), the rule that
only ``# SETUP`` and ``# GRADED`` cells run at grading, that hidden tests run at grading,
and the run time measured in full mode (a recorded run; benchmarks/results/).
"""

import json
import pathlib
import re

import pytest

from lablib.grading.notebook import ANSWER_BEGIN_RE
from lablib.grading.spec import load_lab

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
PIECE_ROW = re.compile(r"^\| `(\w+)` \| .* \| (\d+(?:\.\d+)?) \|$", re.MULTILINE)
TOTAL_ROW = re.compile(
    r"^\| all graded pieces \| public tests \| (\d+(?:\.\d+)?) \|$", re.MULTILINE
)
ANSWER_ROW = re.compile(
    r"^\| written answer `(\w+)`, .* \| (\d+(?:\.\d+)?), graded by a person \|$", re.MULTILINE
)
WRITTEN_TOTAL_ROW = re.compile(
    r"^\| all written answers \| graded by a person \| (\d+(?:\.\d+)?) \|$", re.MULTILINE
)


def _cells(path):
    return [
        (cell["cell_type"], "".join(cell["source"]))
        for cell in json.loads(path.read_text())["cells"]
    ]


def _header(path):
    return next(text for kind, text in _cells(path) if kind == "markdown")


def test_every_lab_is_checked():
    assert len(SOLUTIONS) >= 4, [p.name for p in SOLUTIONS]


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_header_points_match_the_spec(path):
    header = _header(path)
    spec = load_lab(path.stem)
    expected = {}
    for test in spec.tests_for(hidden=False):
        expected[test.piece] = expected.get(test.piece, 0.0) + test.points
    stated = {piece: float(points) for piece, points in PIECE_ROW.findall(header)}
    assert stated == expected, (
        f"{path.name}: the header's points table says {stated}, the spec {expected}"
    )
    total = TOTAL_ROW.findall(header)
    assert total and float(total[0]) == sum(expected.values()), (total, expected)


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_header_lists_every_written_answer(path):
    """Each answer region of the solution names a written question of the spec, once;
    the header lists each with the spec's points."""
    named = [
        m.group(1)
        for kind, text in _cells(path)
        if kind == "markdown"
        for m in map(ANSWER_BEGIN_RE.match, (line.strip() for line in text.split("\n")))
        if m
    ]
    spec = load_lab(path.stem)
    assert None not in named, (
        f"{path.name}: an answer region without a question id (<!-- BEGIN ANSWER <id> -->)"
    )
    assert named == list(spec.answers), (
        f"{path.name}: answer cells {named}, spec's written questions {list(spec.answers)}"
    )
    stated = {q: float(points) for q, points in ANSWER_ROW.findall(_header(path))}
    assert stated == {q.id: q.points for q in spec.answers.values()}, (stated, spec.answers)
    totals = WRITTEN_TOTAL_ROW.findall(_header(path))
    if len(spec.answers) > 1:
        assert totals and float(totals[0]) == spec.written_points, (totals, spec.written_points)


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_header_states_the_grading_rules_and_run_time(path):
    header = " ".join(_header(path).split())  # phrases may wrap across lines
    for phrase in (
        "`# SETUP` cells",
        "`# GRADED` cells",
        "hidden tests run",
        "in full mode",
        "GPU",
        "of work",
    ):
        assert phrase in header, f"{path.name}: the header does not say {phrase!r}"
    assert re.search(
        r"took [\d.]+ (to [\d.]+ )?min.{0,60}? in full mode"
        r"|in full mode.{0,120}?took [\d.]+ (to [\d.]+ )?min",
        header,
    ), header
    assert not re.search(r"\{LAB\d_\w+\}", header), "an unfilled placeholder is left in the header"
