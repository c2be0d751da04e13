"""Notebook transforms: normalise, extract graded/set-up cells, make the blank lab."""

import json
import pathlib
import subprocess
import sys

import nbformat

import pytest

from lablib.grading import notebook as nbt
from lablib.grading.author import assignment

from grading_paths import CORPUS, FIXTURE_SOLUTION


def _nb(*sources, cell_type="code"):
    return nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(s)
            if cell_type == "code"
            else nbformat.v4.new_markdown_cell(s)
            for s in sources
        ]
    )


def test_invalid_json_raises_invalid_notebook():
    with pytest.raises(nbt.InvalidNotebook, match="not valid JSON"):
        nbt.read_notebook(b'{"cells": [')
    with pytest.raises(nbt.InvalidNotebook, match="nbformat"):
        nbt.read_notebook(b'{"nbformat": 2, "cells": []}')
    with pytest.raises(nbt.InvalidNotebook, match="JSON object"):
        nbt.read_notebook(b"[1, 2]")


def test_a_number_past_pythons_digit_limit_is_an_invalid_notebook():
    """json.loads raises a plain ValueError for an integer longer than Python's limit
    (4,300 digits): it read as the grader's own failure (grader-error, "not your doing",
    the class's export refused) where the file is what is wrong."""
    raw = json.dumps(_nb("x = 1")).replace('"execution_count": null', '"execution_count": 7')
    assert '"execution_count": 7' in raw
    digits = sys.get_int_max_str_digits() + 1
    with pytest.raises(nbt.InvalidNotebook, match=f"more than {digits - 1:,} digits"):
        nbt.read_notebook(raw.replace('"execution_count": 7', '"execution_count": ' + "9" * digits))
    nb, _ = nbt.read_notebook(raw.replace('"execution_count": 7', '"execution_count": ' + "9" * 40))
    assert nb.cells[0].execution_count == int("9" * 40)


def test_a_note_quotes_a_long_value_short_and_keeps_what_it_says():
    """A note quotes what the notebook holds: 5 MB of nbformat_minor made 5 MB notes in
    the terminal, grades.json and every feedback file."""
    nb = json.loads(json.dumps(_nb("x = 1", "y = 2")))
    nb["nbformat_minor"] = "A" * 5_000_000
    nb["cells"][0]["cell_type"] = "<b>" + "C" * 3_000_000
    nb["cells"][1]["metadata"]["tags"] = "<b>" + "T" * 3_000_000
    _, notes = nbt.read_notebook(json.dumps(nb))
    assert len(notes) == 3 and all(len(n) < 400 for n in notes), [n[:200] for n in notes]
    unknown, upgraded, schema = notes
    assert (
        upgraded.startswith("upgraded nbformat 4.'AAA") and "4,999,922 more characters" in upgraded
    )
    assert upgraded.endswith(" to 4.5")
    assert unknown.startswith("cell 0: unknown cell_type '<b>CCC") and unknown.endswith(
        "read as raw"
    )
    assert "'<b>TTT" in schema and schema.endswith("is not of type 'array'")
    assert "characters left out" in schema
    with pytest.raises(
        nbt.InvalidNotebook, match="unsupported nbformat '4'; expected the number 4"
    ):
        nbt.read_notebook(json.dumps({**nb, "nbformat": "4"}))


def test_colab_notebook_is_upgraded_and_valid():
    nb, notes = nbt.read_notebook(CORPUS / "colab.ipynb")
    assert nb.nbformat_minor == 5 and "widgets" not in nb.metadata
    assert any("widgets" in n for n in notes) and any("4.0" in n for n in notes)
    assert all("executionInfo" not in c.metadata and "outputId" not in c.metadata for c in nb.cells)
    nbformat.validate(nb)
    assert list(nbt.graded_cells(nb)[0]) == ["normalize", "softmax", "running_mean"]


def test_nbformat3_is_converted():
    nb, notes = nbt.read_notebook(CORPUS / "nbformat3.ipynb")
    assert nb.nbformat == 4 and "converted from nbformat 3" in notes
    cells, _ = nbt.graded_cells(nb)
    assert "def softmax" in cells["softmax"].source


def test_huge_outputs_are_stripped():
    raw = json.loads((CORPUS / "huge_output.ipynb").read_text())
    assert max(len(json.dumps(c.get("outputs", []))) for c in raw["cells"]) > nbt.MAX_OUTPUT_CHARS
    nb, notes = nbt.read_notebook(CORPUS / "huge_output.ipynb")
    assert all(len(json.dumps(c.get("outputs", []))) <= nbt.MAX_OUTPUT_CHARS for c in nb.cells)
    assert any("stripped" in n for n in notes)


def test_graded_cells_by_marker_last_duplicate_wins_with_note():
    nb = _nb(
        "# GRADED: a\nx = 1", "print('no marker')", "\n# GRADED: b\ny = 2", "# GRADED: a\nx = 3"
    )
    cells, notes = nbt.graded_cells(nb)
    assert cells["a"].source.endswith("x = 3") and cells["a"].occurrences == 2
    assert cells["b"].index == 2
    assert len(notes) == 1 and "appears in 2 cells" in notes[0]
    # the marker must be the first line: a later mention does not count
    cells, _ = nbt.graded_cells(_nb("x = 1\n# GRADED: c"))
    assert cells == {}


def test_setup_cells_have_magics_removed():
    nb = _nb(
        "# SETUP\n%matplotlib inline\n!pip install foo\nimport numpy as np",
        "%%bash\n# SETUP\necho",
        "# GRADED: a\nx=1",
    )
    assert nbt.setup_sources(nb) == ["# SETUP\nimport numpy as np\n"]
    assert nbt.strip_magics("%%time\nx = 1") == ""


def test_make_assignment_stubs_regions_keeps_indentation_and_context():
    source = (
        "# GRADED: f\ndef f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n"
        "    ### END SOLUTION\n\nZ = 3"
    )
    md = "Why?\n<!-- BEGIN ANSWER -->\nBecause.\n<!-- END ANSWER -->\nEnd."
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                source, execution_count=4, outputs=[nbformat.v4.new_output("stream", text="hi")]
            ),
            nbformat.v4.new_markdown_cell(md),
        ]
    )
    blank = assignment.make_assignment(nb)
    code = blank.cells[0]
    assert code.source.splitlines() == [
        "# GRADED: f",
        "def f(x):",
        "    y = 1",
        "    # YOUR CODE HERE",
        "    raise NotImplementedError(\"Write your code for the graded piece 'f' here.\")",
        "",
        "Z = 3",
    ]
    assert code.outputs == [] and code.execution_count is None
    assert (
        "Because" not in blank.cells[1].source
        and assignment.ANSWER_PLACEHOLDER in blank.cells[1].source
    )
    assert blank.cells[1].source.endswith("End.")
    ns = {}
    exec(code.source, ns)
    with pytest.raises(NotImplementedError):
        ns["f"](1)


@pytest.mark.parametrize(
    "bad, match",
    [
        ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
        ("x = 1\n### END SOLUTION\n", "without a matching"),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "inside another region"),
    ],
)
def test_make_assignment_rejects_unbalanced_regions(bad, match):
    with pytest.raises(ValueError, match=match):
        assignment.make_assignment(_nb(bad))


def test_assign_is_deterministic(tmp_path):
    first = assignment.assign_notebook(FIXTURE_SOLUTION, tmp_path / "a")
    second = assignment.assign_notebook(FIXTURE_SOLUTION, tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()
    assert first.read_text() == assignment.expected_assignment_text(FIXTURE_SOLUTION)
    text = first.read_text()
    assert "### BEGIN SOLUTION" not in text and "e / e.sum" not in text
    assert "YOUR CODE HERE" in text and "# SETUP" in text


def test_reading_is_bounded_and_a_path_is_never_json(tmp_path, monkeypatch):
    deep = b'{"nbformat": 4, "cells": [], "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(nbt.InvalidNotebook, match="nested too deeply"):
        nbt.read_notebook(deep)
    folder = tmp_path / "{odd name}"
    folder.mkdir()
    good = folder / "lab.ipynb"
    good.write_text(nbformat.writes(_nb("# GRADED: f\ndef f(): pass")))
    for source in (good, str(good)):
        assert "f" in nbt.graded_cells(nbt.read_notebook(source)[0])[0]
    monkeypatch.setattr(nbt, "MAX_NOTEBOOK_BYTES", 100)
    with pytest.raises(
        nbt.InvalidNotebook, match=r"reads notebooks of up to 0 MB. Clear the outputs"
    ):
        nbt.read_notebook(good)


@pytest.mark.serial  # timed: run alone (.ci/run's serial pass)
def test_a_notebook_of_millions_of_tiny_objects_is_refused_before_parsing():
    """The red team's 12 MB of tiny objects cost 47.6 s and 0.93 GB to read: the count of
    '{' and '[' is checked on the bytes first, and the file is an invalid notebook."""
    import time

    tiny = (
        b'{"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {"x": ['
        + b"{}," * 3_000_000
        + b"{}]}}"
    )
    start = time.perf_counter()
    with pytest.raises(nbt.InvalidNotebook, match=r"holds 3,000,00\d JSON objects and lists"):
        nbt.read_notebook(tiny)
    assert time.perf_counter() - start < 2.0  # counted, never parsed
    assert nbt.MAX_JSON_CONTAINERS >= 100 * max(
        path.read_bytes().count(b"{") + path.read_bytes().count(b"[")
        for path in (pathlib.Path(__file__).resolve().parents[2] / "solutions").glob("*.ipynb")
    )


def test_an_unreadable_notebook_says_why_once(fixture_lab):
    from lablib.grading.judge import unreadable
    from lablib.grading.report.feedback_markdown import feedback_markdown

    result = unreadable(
        fixture_lab, "alice", "/subs/alice.ipynb", "not valid JSON (Expecting value)"
    )
    text = feedback_markdown(fixture_lab.title, result)
    assert text.count("Expecting value") == 1 and result.score == 0
    assert "## What to fix" not in text and "invalid-notebook" in text


def test_released_labs_describe_the_cells_students_get():
    """The blank labs' header tells students what their graded cells hold (the solution
    markers are not in them), and every graded cell holds it."""
    import nbformat as nbf

    from lablib._version import PACKAGE_DIR
    from lablib.labs import all_labs

    for lab in all_labs():
        path = PACKAGE_DIR / "grading" / "labs" / f"{lab.name}.ipynb"
        nb = nbf.read(path, as_version=4)
        text = "\n".join(cell.source for cell in nb.cells)
        assert "BEGIN SOLUTION" not in text, lab.name
        header = next(c.source for c in nb.cells if "**Grading.**" in c.source)
        assert "`# YOUR CODE HERE`" in header and "`raise NotImplementedError" in header, lab.name
        graded = [c.source for c in nb.cells if c.source.startswith("# GRADED:")]
        assert graded and all("# YOUR CODE HERE" in source for source in graded), lab.name


def test_reading_a_notebook_does_not_build_the_iri_grammars():
    """nbformat imports jsonschema, whose format checkers import rfc3987_syntax where it is
    installed (Jupyter brings it), and that module built 39 parsers as it was imported:
    about 2.5 s of CPU in every grading, export or review process. lablib.grading defers
    it to its first use; the IRI checks still give jsonschema's answers once used."""
    import importlib.util

    assert importlib.util.find_spec("rfc3987_syntax"), "the dev environment has Jupyter's"
    code = (
        "import sys\n"
        "from lablib.grading.notebook import read_notebook\n"
        f"read_notebook({str(CORPUS / 'solution.ipynb')!r})\n"
        "import jsonschema\n"
        "assert 'lark' not in sys.modules and 'rfc3987_syntax.syntax_helpers' not in sys.modules\n"
        "check = jsonschema.Draft7Validator.FORMAT_CHECKER\n"
        "assert check.conforms('https://example.org/\\u00e4', 'iri')\n"
        "assert not check.conforms('not an iri', 'iri')\n"
        "assert check.conforms('a/b', 'iri-reference')\n"
        "assert 'rfc3987_syntax.syntax_helpers' in sys.modules  # built once used\n"
        "import rfc3987_syntax\n"
        "assert rfc3987_syntax.is_valid_syntax_iri('https://example.org/')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


def test_defer_import_leaves_a_module_imported_or_missing_alone():
    from lablib._lazy import defer_import

    assert defer_import("json") is False and type(sys.modules["json"]).__name__ == "module"
    assert defer_import("lablib_no_such_module_anywhere") is False
    assert "lablib_no_such_module_anywhere" not in sys.modules
