"""Written answers survive into submissions and are found however the student edited them."""

from __future__ import annotations

import copy
import pathlib

import nbformat
import pytest

from lablib.grading.author.assignment import make_assignment
from lablib.grading.notebook import ANSWER_PLACEHOLDER, answer_tag, read_notebook, written_answers
from lablib.grading.spec import LabSpec, load_lab

ROOT = pathlib.Path(__file__).resolve().parents[2]
LABS_WITH_ANSWERS = ["lab2_transformer_reuters", "lab4_gat"]


@pytest.mark.parametrize("name", LABS_WITH_ANSWERS)
def test_assign_keeps_named_markers_and_tags_each_answer_cell(name):
    solution, _ = read_notebook(ROOT / "solutions" / f"{name}.ipynb")
    blank = make_assignment(solution)
    spec = load_lab(name)
    tagged = {answer_tag(c): c for c in blank.cells if answer_tag(c)}
    assert list(tagged) == list(spec.answers)
    for q, cell in tagged.items():
        assert f"<!-- BEGIN ANSWER {q} -->" in cell.source and "<!-- END ANSWER -->" in cell.source
        assert ANSWER_PLACEHOLDER in cell.source
    assert all(
        a.text == "" and a.found == "marker"
        for a in written_answers(blank, spec.answers, template=blank).values()
    )
    model = written_answers(solution, spec.answers, template=blank)
    assert all(len(a.text) > 200 for a in model.values()), (
        "the model answers are found in the solution"
    )
    released = read_notebook(ROOT / "labs" / f"{name}.ipynb")[0]
    assert [answer_tag(c) for c in released.cells if answer_tag(c)] == list(spec.answers), (
        "labs/ is up to date"
    )


def _blank():
    return read_notebook(ROOT / "labs" / "lab2_transformer_reuters.ipynb")[0]


def _cell(nb, q):
    return next(i for i, c in enumerate(nb.cells) if answer_tag(c) == q)


def test_answers_found_however_the_cell_was_edited():
    blank = _blank()
    nb = copy.deepcopy(blank)
    metric, study, error = (_cell(nb, q) for q in ("metric", "study", "find_error"))
    nb.cells[
        metric
    ].source = "Macro-F1, because the topics are unbalanced."  # markers and prompt deleted
    nb.cells[study].source = nb.cells[study].source.replace(
        ANSWER_PLACEHOLDER, "Three variants: ..."
    )
    nb.cells[study].metadata.clear()  # tag lost: found by its marker
    nb.cells[error].source = nb.cells[error].source.replace(ANSWER_PLACEHOLDER, "The exponent.")
    nb.cells.insert(error + 1, nbformat.v4.new_markdown_cell("A second cell of mine, $2i/d$."))
    found = written_answers(nb, ["metric", "study", "find_error"], template=blank)
    assert (
        found["metric"].text == "Macro-F1, because the topics are unbalanced."
        and found["metric"].found == "tag"
    )
    assert found["study"].text == "Three variants: ..." and found["study"].found == "marker"
    assert found["find_error"].text == "The exponent.\n\nA second cell of mine, $2i/d$."
    assert "added below" in found["find_error"].notes[0]


def test_a_deleted_or_duplicated_answer_cell_is_said():
    blank = _blank()
    nb = copy.deepcopy(blank)
    del nb.cells[_cell(nb, "metric")]
    study = _cell(nb, "study")
    nb.cells[study].source = nb.cells[study].source.replace(ANSWER_PLACEHOLDER, "First try.")
    twin = copy.deepcopy(nb.cells[study])
    twin.source = twin.source.replace("First try.", "Second try.")
    twin.id = "my-copy"
    nb.cells.insert(study + 5, twin)
    found = written_answers(nb, ["metric", "study"], template=blank)
    assert (
        found["metric"].text == ""
        and found["metric"].found == ""
        and "deleted" in found["metric"].notes[0]
    )
    assert (
        found["study"].text == "First try.\n\nSecond try."
        and "2 cells hold this answer" in found["study"].notes[-1]
    )


def test_found_by_the_released_cell_id_when_tag_and_markers_are_gone():
    blank = _blank()
    nb = copy.deepcopy(blank)
    i = _cell(nb, "find_error")
    nb.cells[i].metadata.clear()
    nb.cells[i].source = "It is the exponent."
    found = written_answers(nb, ["find_error"], template=blank)
    assert (
        found["find_error"].text == "It is the exponent." and found["find_error"].found == "cell id"
    )


def test_spec_refuses_bad_written_questions():
    lab = LabSpec("labz")
    with pytest.raises(ValueError, match="not a valid id"):
        lab.answer("Bad Id", points=2, title="x")
    with pytest.raises(ValueError, match="positive number of points"):
        lab.answer("fine", points=0, title="x")


def test_assign_refuses_two_answers_in_one_cell():
    nb = nbformat.v4.new_notebook()
    nb.cells.append(
        nbformat.v4.new_markdown_cell(
            "<!-- BEGIN ANSWER a -->\nx\n<!-- END ANSWER -->\n<!-- BEGIN ANSWER b -->\ny\n<!-- END ANSWER -->"
        )
    )
    with pytest.raises(ValueError, match="its own cell"):
        make_assignment(nb)


def test_many_regions_of_one_answer_never_copy_the_cells_below_them():
    """One markdown cell holding thousands of regions of one question, each a different
    line, then a large cell the student added: the added cell was copied once per region
    (a 0.3 MB notebook made a 500 MB answer, in the grader's own process, without a
    limit). The cell's regions are joined and the cells below follow them once; an answer
    past ``MAX_ANSWER_CHARS`` is cut, with a note."""
    from lablib.grading.notebook import MAX_ANSWER_CHARS

    blank = _blank()
    nb = copy.deepcopy(blank)
    metric = _cell(nb, "metric")
    nb.cells[metric].source = "".join(
        f"<!-- BEGIN ANSWER metric -->\nline {i}\n<!-- END ANSWER -->\n" for i in range(2000)
    )
    nb.cells.insert(metric + 1, nbformat.v4.new_markdown_cell("x" * 20_000))
    found = written_answers(nb, ["metric"], template=blank)["metric"]
    assert found.text.startswith("line 0\n\nline 1\n\n") and found.text.count("x" * 20_000) == 1
    assert len(found.text) < 45_000 and "line 1999" in found.text  # 40 MB before
    nb.cells[metric + 1].source = "y" * (MAX_ANSWER_CHARS + 5)
    cut = written_answers(nb, ["metric"], template=blank)["metric"]
    assert len(cut.text) == MAX_ANSWER_CHARS
    assert any(f"only its first {MAX_ANSWER_CHARS:,} are kept" in n for n in cut.notes), cut.notes
