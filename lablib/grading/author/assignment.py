"""Course authoring: the blank lab students get, made from the solution notebook.

A solution notebook marks what students write:

* in code cells, ``### BEGIN SOLUTION`` ... ``### END SOLUTION``: replaced by
  ``# YOUR CODE HERE`` and ``raise NotImplementedError(...)`` at the same indentation;
* in markdown cells, ``<!-- BEGIN ANSWER <id> -->`` ... ``<!-- END ANSWER -->``: the model
  answer between the markers is replaced by a placeholder; the markers stay, and a cell
  whose region names a written question (``<id>``, declared with
  :meth:`~lablib.grading.spec.LabSpec.answer`) is tagged ``metadata.lablib.answer = <id>``:
  that is how the grader finds the student's answer
  (:func:`~lablib.grading.notebook.written_answers`). A region without an id is an
  ungraded answer.

:func:`make_assignment` is the transform, :func:`dumps_notebook` the deterministic JSON
text, :func:`assign_notebook` writes the file (``lablib assign``).

Example::

    from lablib.grading.author.assignment import assign_notebook
    assign_notebook("solutions/lab1_attention.ipynb", "labs")
"""

from __future__ import annotations

import ast
import copy
import json
import pathlib
import re

import nbformat

from lablib.grading.atomic import atomic_write
from lablib.grading.notebook import (
    ANSWER_BEGIN_RE,
    ANSWER_END,
    ANSWER_METADATA,
    ANSWER_PLACEHOLDER,
    GRADED_RE,
    cell_source,
    first_line,
    read_notebook,
)
from lablib.session import STUB_MESSAGE, exercise_message

__all__ = [
    "BEGIN_SOLUTION",
    "END_SOLUTION",
    "BEGIN_ANSWER",
    "END_ANSWER",
    "ANSWER_PLACEHOLDER",
    "make_assignment",
    "dumps_notebook",
    "assign_notebook",
    "expected_assignment_text",
    "check_lablib_pip",
    "pin_lablib_pip",
]

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_ANSWER = "<!-- BEGIN ANSWER -->"
END_ANSWER = ANSWER_END


def _replace_regions(
    source: str, begin, end: str, stub, where: str, *, keep_markers: bool = False
) -> str:
    """``source`` with each ``begin`` ... ``end`` region replaced by ``stub(indent, region)``;
    ``begin`` is a line or a compiled pattern; ``keep_markers`` keeps both marker lines."""
    lines = source.split("\n")
    out: list[str] = []
    inside = False
    indent = ""
    region: list[str] = []
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if begin.match(stripped) if hasattr(begin, "match") else stripped == begin:
            if inside:
                raise ValueError(
                    f"{where}, line {number}: {_name(begin)!r} inside another region; close it with "
                    f"{end!r} first."
                )
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            region = []
            if keep_markers:
                out.append(line)
            continue
        if stripped == end:
            if not inside:
                raise ValueError(
                    f"{where}, line {number}: {end!r} without a matching {_name(begin)!r}."
                )
            inside = False
            out.extend(stub(indent, "\n".join(region)))
            if keep_markers:
                out.append(line)
            continue
        if inside:
            region.append(line)
        else:
            out.append(line)
    if inside:
        raise ValueError(
            f"{where}: {_name(begin)!r} is never closed; add {end!r} after the solution."
        )
    return "\n".join(out)


def _name(begin) -> str:
    return BEGIN_ANSWER if hasattr(begin, "match") else begin


def make_assignment(nb) -> nbformat.NotebookNode:
    """The blank lab for students from a solution notebook.

    Solution regions in code cells become ``# YOUR CODE HERE`` plus a
    ``raise NotImplementedError`` at the region's indentation; answer regions in markdown
    become a placeholder; outputs and execution counts are cleared; all else is kept.

    Example::

        blank = make_assignment(read_notebook("solutions/lab1_attention.ipynb")[0])
    """
    nb = copy.deepcopy(nb)
    for index, cell in enumerate(nb.cells):
        source = cell_source(cell)
        where = f"cell {index + 1}"
        if cell.cell_type == "code":
            match = GRADED_RE.match(first_line(source))
            piece = match.group(1) if match else None

            def stub(indent, solution, piece=piece):
                if piece:
                    message = STUB_MESSAGE.format(piece=piece)
                else:  # an exercise at the top level says what it defines (lablib.session)
                    message = exercise_message(solution if not indent else "")
                return [
                    f"{indent}# YOUR CODE HERE",
                    f"{indent}raise NotImplementedError({message!r})",
                ]

            cell.source = _replace_regions(source, BEGIN_SOLUTION, END_SOLUTION, stub, where)
            cell.outputs = []
            cell.execution_count = None
            for key in ("executionInfo", "outputId", "colab", "execution"):
                cell.metadata.pop(key, None)
        elif cell.cell_type == "markdown":
            ids = [
                m.group(1)
                for m in map(ANSWER_BEGIN_RE.match, (line.strip() for line in source.split("\n")))
                if m and m.group(1)
            ]
            if len(ids) > 1:
                raise ValueError(
                    f"{where}: one cell holds the answers of {ids}; give each written question "
                    f"its own cell (the grader finds an answer by its cell)."
                )
            cell.source = _replace_regions(
                source,
                ANSWER_BEGIN_RE,
                END_ANSWER,
                lambda indent, _answer: [indent + ANSWER_PLACEHOLDER],
                where,
                keep_markers=True,
            )
            if ids:
                cell.metadata[ANSWER_METADATA] = {"answer": ids[0]}
    nb.metadata.pop("widgets", None)
    return nb


#: The first cell's default of ``LABLIB_PIP`` (where lablib is installed from when the
#: variable is unset): group 2 is the string literal :func:`pin_lablib_pip` replaces.
_LABLIB_PIP_DEFAULT_RE = re.compile(
    r'(LABLIB_PIP = \(os\.environ\.get\("LABLIB_PIP", ""\)\.strip\(\)\s+or )'
    r'("(?:[^"\\\n]|\\.)*")(\))'
)


def check_lablib_pip(target: str) -> str:
    """``target`` stripped, if a lab's first cell can install lablib from it: a requirement
    naming lablib (``lablib==0.3.0``, ``lablib @ git+https://.../lablib@v0.3.0``) or a
    lablib wheel (a path or a URL ending in ``lablib-<version>-...whl``); else ValueError."""
    from lablib.install.plan import _packaging, normalize

    text = target.strip()
    example = (
        "a requirement naming lablib (lablib @ git+https://github.com/<you>/lablib@v0.3.0) "
        "or a lablib wheel (/content/lablib-0.3.0-py3-none-any.whl)"
    )
    if not text or not text.isprintable():  # controls, line separators, bidi overrides
        raise ValueError(
            f"--lablib-pip {target!r} holds characters that do not print (or is empty); "
            f"expected {example}."
        )
    if text.startswith("-"):  # pip would take it for an option (-r URL: a requirements file)
        raise ValueError(
            f"--lablib-pip {target!r} starts with '-', which pip reads as an option; "
            f"expected {example}."
        )
    if text.endswith(".whl"):
        if not re.match(r"lablib-[^-/\\]+-", re.split(r"[/\\]", text)[-1]):
            raise ValueError(
                f"--lablib-pip {target!r} is a wheel of another package; expected {example}."
            )
        return text
    Requirement, _ = _packaging()
    try:
        name = normalize(Requirement(text).name)
    except Exception:  # noqa: BLE001 - packaging's InvalidRequirement, with its reason
        name = None
    if name != "lablib":
        raise ValueError(
            f"--lablib-pip {target!r} is not a requirement naming lablib; expected {example}."
        )
    return text


def pin_lablib_pip(nb, target: str) -> None:
    """Make ``target`` (checked by :func:`check_lablib_pip`) the default ``LABLIB_PIP`` of
    the lab's first code cell, in place: handouts that install the release the course is
    graded with, whatever changes on the repository's main branch during the term. The
    variable, where a student sets it, still wins."""
    target = check_lablib_pip(target)
    cell = next((c for c in nb.cells if c.cell_type == "code"), None)
    source = cell_source(cell) if cell is not None else ""
    found = _LABLIB_PIP_DEFAULT_RE.findall(source)
    if len(found) != 1:
        raise ValueError(
            f"the notebook's first code cell holds {len(found)} default LABLIB_PIP lines, "
            'expected one (`LABLIB_PIP = (os.environ.get("LABLIB_PIP", "").strip() or '
            '"...")`, as lablib\'s labs have); is it a lab of this course?'
        )
    literal = json.dumps(target, ensure_ascii=False)
    assert ast.literal_eval(literal) == target  # a JSON string is a Python literal too
    cell.source = _LABLIB_PIP_DEFAULT_RE.sub(
        lambda m: m.group(1) + literal + m.group(3), source, count=1
    )


def dumps_notebook(nb) -> str:
    """Deterministic JSON text of a notebook, as Jupyter writes it (sources as lists of
    lines, sorted keys, indent 1), with a final newline."""
    text = nbformat.writes(nbformat.from_dict(json.loads(json.dumps(nb))), version=4)
    return text if text.endswith("\n") else text + "\n"


def assign_notebook(
    solution: pathlib.Path | str, out_dir: pathlib.Path | str, *, lablib_pip: str | None = None
) -> pathlib.Path:
    """Write the blank lab of ``solution`` to ``out_dir/<same name>``; returns its path.
    ``lablib_pip``: the first cell's default ``LABLIB_PIP`` (:func:`pin_lablib_pip`).

    Re-running on an unchanged solution writes identical bytes.
    """
    solution = pathlib.Path(solution)
    nb, _ = read_notebook(solution)
    blank = make_assignment(nb)
    if lablib_pip is not None:
        pin_lablib_pip(blank, lablib_pip)
    text = dumps_notebook(blank)
    out = pathlib.Path(out_dir) / solution.name
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.is_file() or out.read_text(encoding="utf-8") != text:
        atomic_write(out, text, newline="")
    return out


def expected_assignment_text(solution: pathlib.Path | str) -> str:
    """The exact text :func:`assign_notebook` writes for ``solution`` (for up-to-date checks)."""
    nb, _ = read_notebook(pathlib.Path(solution))
    return dumps_notebook(make_assignment(nb))
