"""Hidden tests belong to the call that loaded them: ``load_lab`` with ``--tests`` folders
gives a spec of its own, and the process's registry keeps the lab's public tests, so
that a second grading in one Python process (an instructor's script, a notebook, a
course's tool) grades with its own folders only."""

from grading_paths import FIXTURE_HIDDEN, FIXTURE_LAB

from lablib.grading.spec import get_lab, load_lab

_OTHER = """
from lablib.grading.spec import get_lab

lab = get_lab("lab0_fixture")


@lab.test("softmax", points=5)
def another_teachers_test(ns):
    return ns["softmax"]([[0.0, 1.0]])
"""


def _hidden(spec):
    return sorted(t.name for t in spec.tests if t.hidden)


def test_hidden_tests_belong_to_the_call_that_loaded_them(tmp_path):
    public = load_lab(FIXTURE_LAB)
    public_ids = [t.id for t in public.tests if not t.hidden]
    first = load_lab(FIXTURE_LAB, hidden_dirs=[FIXTURE_HIDDEN])
    assert _hidden(first) == ["large_logits", "three_dims"]
    assert first.max_score > public.max_score
    assert FIXTURE_HIDDEN.resolve() / "lab0_fixture.py" in first.source_files

    # the process's spec is the public one still: a later check or grading without folders
    again = load_lab(FIXTURE_LAB)
    assert _hidden(again) == [] and _hidden(get_lab("lab0_fixture")) == []
    assert [t.id for t in again.tests] == public_ids
    assert FIXTURE_HIDDEN.resolve() / "lab0_fixture.py" not in again.source_files

    # another course's folder: its own hidden test only, worth its own points
    other = tmp_path / "other"
    other.mkdir()
    (other / "lab0_fixture.py").write_text(_OTHER, encoding="utf-8")
    second = load_lab(FIXTURE_LAB, hidden_dirs=[other])
    assert _hidden(second) == ["another_teachers_test"]
    assert second.max_score == public.max_score + 5

    # the first folder again (its module imported once per process): the same tests
    third = load_lab(FIXTURE_LAB, hidden_dirs=[FIXTURE_HIDDEN, other, FIXTURE_HIDDEN])
    assert _hidden(third) == ["another_teachers_test", "large_logits", "three_dims"]
    assert [t for t in third.tests if t.name == "large_logits"][0] is next(
        t for t in first.tests if t.name == "large_logits"
    )


def test_a_spec_given_to_grade_gets_the_hidden_tests_it_lacks(tmp_path):
    """``grade(spec, ..., hidden_dirs=...)``: a spec loaded without the folders is graded
    with their hidden tests (they were ignored); one loaded with them is not given them
    twice."""
    from grading_paths import FIXTURE_SOLUTION

    from lablib.grading.grade import grade

    given = tmp_path / "subs"
    given.mkdir()
    (given / "ann.ipynb").write_bytes(FIXTURE_SOLUTION.read_bytes())
    full = load_lab(FIXTURE_LAB, hidden_dirs=[FIXTURE_HIDDEN]).max_score
    for n, spec in enumerate((load_lab(FIXTURE_LAB), load_lab(FIXTURE_LAB, [FIXTURE_HIDDEN]))):
        (result,) = grade(
            spec,
            [given],
            tmp_path / f"out{n}",
            jobs=1,
            progress=False,
            hidden_dirs=[str(FIXTURE_HIDDEN)],
            lab_notebook=FIXTURE_SOLUTION,
        )
        assert result.max_score == full and result.score == full
        assert sorted(t.name for t in result.tests if t.hidden) == ["large_logits", "three_dims"]
