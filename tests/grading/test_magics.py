"""IPython magics and shell lines in graded cells: the grader runs the Python of a cell
written in IPython (``%time``, ``%%time``, ``!pip install``, ``%matplotlib inline``), its
lines where the student wrote them, and says which lines it did not run."""

import json
import shutil
import sys

import nbformat
import pytest

from grading_paths import FIXTURE_HIDDEN, FIXTURE_LAB, FIXTURE_SOLUTION
from lablib.cli import main
from lablib.grading.magics import get_ipython, graded_python, not_run_note
from lablib.grading.notebook import graded_cells
from lablib.grading.run.child import compile_cell


def _run(source: str) -> dict:
    """``source`` run as the child runs a graded cell; its names."""
    ns = {"__name__": "__main__", "get_ipython": get_ipython}
    exec(compile_cell(source, "<graded cell demo>", magics=True), ns)
    return ns


def test_magics_keep_every_line_where_it_was():
    source = (
        "# GRADED: demo\n"
        "!pip install nothing\n"
        "%matplotlib inline\n"
        "x = !ls\n"
        "%time y = \\\n"
        "    3\n"
        "if True:\n"
        "    %time z = 4\n"
        "text = '''\n"
        "%time not a magic: in a string\n"
        "'''\n"
    )
    graded = graded_python(source)
    assert len(graded.code.splitlines()) == len(source.splitlines())
    assert graded.code.splitlines()[9] == "%time not a magic: in a string"
    assert graded.not_run == (
        (2, "!pip install nothing"),
        (3, "%matplotlib inline"),
        (4, "x = !ls"),
    )
    ns = _run(source)
    assert (ns["x"], ns["y"], ns["z"]) == ([], 3, 4)


def test_time_timeit_and_capture_run_their_code_once():
    ns = _run(
        "%%time\n# GRADED: demo\ncalls = []\ncalls.append(1)\n%timeit -n 3 -r 1 calls.append(2)\n"
    )
    assert ns["calls"] == [1, 2]
    assert _run("%%capture out\n# GRADED: demo\nv = 5\n")["v"] == 5
    assert _run("%%timeit -n 2 w = 1\n# GRADED: demo\nv = w + 1\n")["v"] == 2
    assert _run("# GRADED: demo\nv = %time 1 + 1\n")["v"] == 2
    assert not_run_note("demo", "%%time\n# GRADED: demo\n%time f()\n") is None


def test_a_cell_magic_not_run_runs_nothing_and_says_so():
    source = "%%bash\n# GRADED: demo\necho hi\n"
    assert "v" not in _run(source + "v = 1\n")
    note = not_run_note("demo", source)
    assert "`%%bash` (line 1) and the code under it were not run by the grader" in note


def test_without_ipython_magic_lines_are_still_turned_into_calls(monkeypatch):
    """A grader installed without IPython: lines starting with a magic or ``!`` are
    transformed by the regular expression, every line kept where it was."""
    monkeypatch.setitem(sys.modules, "IPython.core.inputtransformer2", None)
    source = "%%time\n# GRADED: demo\n!pip install x\n%time y = 2\n%matplotlib inline\n"
    graded = graded_python(source)
    assert graded.not_run == ((3, "!pip install x"), (5, "%matplotlib inline"))
    assert len(graded.code.splitlines()) == 5 and _run(source)["y"] == 2


def test_an_error_in_a_magic_points_at_the_students_line():
    with pytest.raises(SyntaxError) as raised:
        _run("# GRADED: demo\nx = 1\n%time f(\n")
    assert raised.value.lineno == 3 and raised.value.filename == "<graded cell demo>"


def test_the_marker_under_a_cell_magic_is_found_and_lines_not_run_are_noted():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%%time\n# GRADED: a\na = 1\n"),
        nbformat.v4.new_code_cell("# GRADED: b\n%matplotlib inline\n!pip install x\nb = 2\n"),
    ]
    cells, notes = graded_cells(nb)
    assert list(cells) == ["a", "b"]
    assert notes == [
        "graded cell b: line 2 `%matplotlib inline` and line 3 `!pip install x` were not run "
        "by the grader (it runs graded cells as Python: %time, %timeit, %%time, %%timeit and "
        "%%capture run their code; other magics and ! shell lines do nothing, and nothing is "
        "installed at grading)"
    ]


def _with_softmax(nb, edit):
    """A copy of the fixture solution whose softmax cell's source is ``edit(source)``."""
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if source.startswith("# GRADED: softmax"):
            cell["source"] = edit(source)
    return nb


@pytest.mark.integration  # grades a batch: child processes
def test_correct_cells_with_magics_score_full_marks(tmp_path):
    """An honest, correct softmax with magics scores as the plain one does, the lines not
    run named; a magic that is not Python once transformed gives the student's own error."""
    solution = json.loads(FIXTURE_SOLUTION.read_text())
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "plain.ipynb")
    variants = {
        "line_magics": lambda s: (
            s + "\n!pip install nothing\n%matplotlib inline\n%time softmax(np.zeros((2, 3)))\n"
        ),
        "cell_magic": lambda s: "%%time\n" + s,
        "broken": lambda s: s + "\n%time softmax(\n",
        "misplaced": lambda s: s.replace("def softmax(x):\n", "def softmax(x):\n%time 1\n"),
    }
    for name, edit in variants.items():
        (subs / f"{name}.ipynb").write_text(json.dumps(_with_softmax(solution, edit)))
    out = tmp_path / "out"
    args = ["grade", str(FIXTURE_LAB), str(subs), "-o", str(out), "--quiet", "--no-sandbox"]
    assert (
        main(args + ["--tests", str(FIXTURE_HIDDEN), "--lab-notebook", str(FIXTURE_SOLUTION)]) == 0
    )
    rows = {
        r["submission"]: r for r in json.loads((out / "grades.json").read_text())["submissions"]
    }
    full = rows["plain"]["max_score"]
    assert rows["plain"]["score"] == full
    for name in ("line_magics", "cell_magic"):
        assert (rows[name]["score"], rows[name]["status"]) == (full, "ok"), rows[name]
    assert rows["cell_magic"]["notes"] == []
    assert rows["line_magics"]["notes"] == [
        "graded cell softmax: line 9 `!pip install nothing` and line 10 `%matplotlib inline` "
        "were not run by the grader (it runs graded cells as Python: %time, %timeit, %%time, "
        "%%timeit and %%capture run their code; other magics and ! shell lines do nothing, and "
        "nothing is installed at grading)"
    ]
    # softmax is defined before the broken line, as in the notebook: its tests pass
    assert rows["broken"]["status"] == "error: softmax (SyntaxError)"
    assert any(
        "SyntaxError: '(' was never closed (<graded cell softmax>, line 9)" in n
        and "line 9: %time softmax(" in n
        for n in rows["broken"]["notes"]
    ), rows["broken"]["notes"]
    assert rows["misplaced"]["status"] == "error: softmax (IndentationError)"
    assert rows["misplaced"]["pieces"]["softmax"]["score"] == 0
    assert any(
        "IndentationError: expected an indented block after function definition on line 2 "
        "(<graded cell softmax>, line 3)" in n
        for n in rows["misplaced"]["notes"]
    ), rows["misplaced"]["notes"]


def test_python_that_only_looks_like_a_magic_runs_as_it_is():
    """A long cell (past IPython's budget) whose string formatting continues on a line
    starting with '%', and a docstring line starting with '!': Python as written, run as
    written (the fallback rewrote them and the cell raised SyntaxError)."""
    from lablib.grading.magics import graded_python

    comments = "".join(f"# what is step {i}?\n" for i in range(30))
    source = (
        comments
        + 'def report(epochs):\n    """Print it.\n!important: once.\n    """\n'
        + '    print("epoch %d loss %.3f"\n          % (epochs, 0.5))\n' * 40
    )
    graded = graded_python(source)
    assert graded.code == source and graded.not_run == ()
    compile(graded.code, "<cell>", "exec")


def test_a_long_magic_line_or_many_blank_lines_cost_linear_time():
    """The grading process reads every graded cell (with the GIL held): a magic line of
    120,000 spaces took 71 s and 40,000 blank lines 11 s through two quadratic patterns,
    stalling every other submission's deadlines. Now each is a fraction of a second (the
    bound here is ten times the old cost of the shorter case, far above the new one)."""
    import time

    from lablib.grading.magics import graded_python, not_run_note

    for source in ("%time" + " " * 120_000 + "x\n", "\n" * 40_000 + "%time 1\n"):
        started = time.monotonic()
        graded_python(source)
        note = not_run_note("softmax", source + "!ls" + " " * 50_000 + "\n")
        # not serial: ten times the old quadratic cost; the whole test takes 0.03 s in CI
        assert time.monotonic() - started < 5.0
        assert note is not None and len(note) < 1_000  # the long line quoted short
