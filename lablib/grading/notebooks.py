"""Notebook transforms: read and normalise submissions, extract graded cells, make labs.

Each function is one small transform, testable alone (the nbgrader idea):

* :func:`read_notebook` - bytes/path -> a validated nbformat 4 notebook (Colab's
  nbformat 4.0, ``metadata.widgets`` without ``state``, ``executionInfo`` cell metadata,
  huge outputs and nbformat 3 are all handled); invalid JSON raises
  :class:`InvalidNotebook`.
* :func:`graded_cells` - the cells whose first line is ``# GRADED: <name>``.
* :func:`setup_sources` - the ``# SETUP`` cells of the released lab, magics removed.
* :func:`make_assignment` - a solution notebook -> the blank lab students get.
* :func:`dumps_notebook` / :func:`assign_notebook` - deterministic JSON on disk.

Graded cells are found by the marker in their text, never by cell ids or metadata:
Colab and copy/paste rewrite those.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import pathlib
import re
import warnings
from typing import Iterable

import nbformat

__all__ = [
    "InvalidNotebook",
    "GradedCell",
    "read_notebook",
    "normalize_notebook",
    "cell_source",
    "graded_cells",
    "setup_sources",
    "strip_magics",
    "make_assignment",
    "dumps_notebook",
    "assign_notebook",
    "GRADED_RE",
]

GRADED_RE = re.compile(r"^#\s*GRADED:\s*([A-Za-z0-9_.\-]+)\s*$")
SETUP_RE = re.compile(r"^#\s*SETUP\b")
BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_ANSWER = "<!-- BEGIN ANSWER -->"
END_ANSWER = "<!-- END ANSWER -->"
ANSWER_PLACEHOLDER = "_YOUR ANSWER HERE_"
#: Outputs larger than this (characters of JSON) are dropped while normalising.
MAX_OUTPUT_CHARS = 100_000


class InvalidNotebook(ValueError):
    """The file is not a readable Jupyter notebook (bad JSON, no cells...)."""


@dataclasses.dataclass(frozen=True)
class GradedCell:
    """A graded cell found in a notebook.

    Attributes:
        name: the marker name (``# GRADED: <name>``).
        source: the cell's code (the last occurrence when the marker appears twice).
        index: position of that cell in the notebook.
        occurrences: how many cells carry this marker.
    """

    name: str
    source: str
    index: int
    occurrences: int = 1


def cell_source(cell) -> str:
    """A cell's source as one string (nbformat allows a list of lines)."""
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(str(s) for s in source)
    return str(source)


def _first_line(source: str) -> str:
    for line in source.splitlines():
        if line.strip():
            return line.strip()
    return ""


def normalize_notebook(data: dict) -> tuple[nbformat.NotebookNode, list[str]]:
    """Normalise a parsed notebook dict to a valid nbformat 4.5 notebook.

    Args:
        data: the notebook as parsed JSON (any nbformat 3 or 4 minor version).

    Returns:
        ``(notebook, notes)``: the notebook and a list of what was changed (for logs).

    Example::

        nb, notes = normalize_notebook(json.load(open("colab.ipynb")))
    """
    notes: list[str] = []
    if not isinstance(data, dict):
        raise InvalidNotebook(f"a notebook is a JSON object, got a JSON {type(data).__name__}")
    major = data.get("nbformat")
    if major == 3:
        if not isinstance(data.get("worksheets"), list):
            raise InvalidNotebook("nbformat 3 notebook without 'worksheets'")
        try:
            data = nbformat.reads(json.dumps(data), as_version=4)  # joins v3 line lists
        except Exception as exc:  # nbformat raises several kinds here
            raise InvalidNotebook(f"cannot convert nbformat 3 notebook: {exc}") from None
        notes.append("converted from nbformat 3")
    elif major != 4:
        raise InvalidNotebook(
            f"unsupported nbformat {major!r}; expected 4 (or 3). Save the notebook again "
            f"from Jupyter or Colab (File > Download > .ipynb)."
        )
    if not isinstance(data.get("cells"), list):
        raise InvalidNotebook("the notebook has no 'cells' list")
    data = copy.deepcopy(dict(data))
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    widgets = metadata.pop("widgets", None)
    if widgets is not None:
        notes.append("removed metadata.widgets")
    cells = []
    for index, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict):
            notes.append(f"dropped cell {index}: not an object")
            continue
        cell_type = cell.get("cell_type")
        if cell_type not in ("code", "markdown", "raw"):
            notes.append(f"cell {index}: unknown cell_type {cell_type!r} read as raw")
            cell_type = "raw"
        meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        for key in ("executionInfo", "outputId", "colab", "id"):
            meta.pop(key, None)
        new = {"cell_type": cell_type, "metadata": meta, "source": cell_source(cell)}
        if cell_type == "code":
            outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
            size = len(json.dumps(outputs, default=str))
            if size > MAX_OUTPUT_CHARS:
                notes.append(f"cell {index}: stripped {size} characters of output")
                outputs = []
            new["outputs"] = outputs
            count = cell.get("execution_count")
            new["execution_count"] = count if isinstance(count, int) else None
        elif isinstance(cell.get("attachments"), dict) and cell_type != "code":
            new["attachments"] = cell["attachments"]
        cid = cell.get("id")
        new["id"] = (
            cid if isinstance(cid, str) and re.fullmatch(r"[a-zA-Z0-9-_]{1,64}", cid)
            else hashlib.sha1(f"{index}:{new['source']}".encode()).hexdigest()[:8]
        )
        cells.append(new)
    if len({c["id"] for c in cells}) != len(cells):
        for index, cell in enumerate(cells):
            cell["id"] = f"cell-{index}"
    minor = data.get("nbformat_minor")
    if minor != 5:
        notes.append(f"upgraded nbformat 4.{minor} to 4.5")
    nb = nbformat.from_dict(
        {"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": cells}
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        # Strip what the schema rejects in outputs (the grader never reads them).
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.outputs:
                cell.outputs = []
        try:
            nbformat.validate(nb)
            notes.append(f"dropped outputs that failed validation ({str(exc).splitlines()[0]})")
        except nbformat.ValidationError as exc2:
            notes.append(f"schema warning: {str(exc2).splitlines()[0]}")
    return nb, notes


def read_notebook(source) -> tuple[nbformat.NotebookNode, list[str]]:
    """Read and normalise a notebook from a path, bytes or str.

    Returns:
        ``(notebook, notes)`` as :func:`normalize_notebook`.

    Raises:
        InvalidNotebook: the content is not JSON or not a notebook.

    Example::

        nb, notes = read_notebook("submissions/alice.ipynb")
    """
    if isinstance(source, (str, pathlib.Path)) and not str(source).lstrip().startswith("{"):
        raw = pathlib.Path(source).read_bytes()
    else:
        raw = source.encode() if isinstance(source, str) else bytes(source)
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidNotebook(f"not valid JSON ({exc}); the file is damaged or not a notebook") from None
    return normalize_notebook(data)


def graded_cells(nb) -> tuple[dict[str, GradedCell], list[str]]:
    """Find graded cells by their first line ``# GRADED: <name>``.

    When a name appears in several cells the last one counts (a note says so).

    Returns:
        ``(cells by name in notebook order, notes)``.
    """
    found: dict[str, list[tuple[int, str]]] = {}
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        source = cell_source(cell)
        match = GRADED_RE.match(_first_line(source))
        if match:
            found.setdefault(match.group(1), []).append((index, source))
    cells: dict[str, GradedCell] = {}
    notes = []
    for name, hits in sorted(found.items(), key=lambda kv: kv[1][-1][0]):
        index, source = hits[-1]
        if len(hits) > 1:
            notes.append(
                f"`# GRADED: {name}` appears in {len(hits)} cells (cells "
                f"{', '.join(str(i + 1) for i, _ in hits)}); the last one (cell {index + 1}) was graded."
            )
        cells[name] = GradedCell(name, source, index, len(hits))
    return cells, notes


_MAGIC_RE = re.compile(r"^\s*[%!]")


def strip_magics(source: str) -> str:
    """Remove IPython magics (``%...``, ``%%...``) and shell lines (``!...``)."""
    lines = source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        return ""  # a cell magic: the whole cell is not Python
    return "\n".join(line for line in lines if not _MAGIC_RE.match(line)) + "\n"


def setup_sources(nb) -> list[str]:
    """The code of the ``# SETUP`` cells, in order, with magics and shell lines removed."""
    out = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            source = cell_source(cell)
            if SETUP_RE.match(_first_line(source)):
                out.append(strip_magics(source))
    return out


def _replace_regions(source: str, begin: str, end: str, stub, where: str) -> str:
    lines = source.split("\n")
    out: list[str] = []
    inside = False
    indent = ""
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped == begin:
            if inside:
                raise ValueError(f"{where}, line {number}: {begin!r} inside another region; close it with {end!r} first.")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            continue
        if stripped == end:
            if not inside:
                raise ValueError(f"{where}, line {number}: {end!r} without a matching {begin!r}.")
            inside = False
            out.extend(stub(indent))
            continue
        if not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: {begin!r} is never closed; add {end!r} after the solution.")
    return "\n".join(out)


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
            match = GRADED_RE.match(_first_line(source))
            piece = match.group(1) if match else None
            message = (
                f"Write your code for the graded piece {piece!r} here."
                if piece else "Write your code here."
            )

            def stub(indent, message=message):
                return [f"{indent}# YOUR CODE HERE", f"{indent}raise NotImplementedError({message!r})"]

            cell.source = _replace_regions(source, BEGIN_SOLUTION, END_SOLUTION, stub, where)
            cell.outputs = []
            cell.execution_count = None
            for key in ("executionInfo", "outputId", "colab", "execution"):
                cell.metadata.pop(key, None)
        elif cell.cell_type == "markdown":
            cell.source = _replace_regions(
                source, BEGIN_ANSWER, END_ANSWER, lambda indent: [indent + ANSWER_PLACEHOLDER], where
            )
    nb.metadata.pop("widgets", None)
    return nb


def dumps_notebook(nb) -> str:
    """Deterministic JSON text of a notebook, as Jupyter writes it (sources as lists of
    lines, sorted keys, indent 1), with a final newline."""
    text = nbformat.writes(nbformat.from_dict(json.loads(json.dumps(nb))), version=4)
    return text if text.endswith("\n") else text + "\n"


def assign_notebook(solution: pathlib.Path | str, out_dir: pathlib.Path | str) -> pathlib.Path:
    """Write the blank lab of ``solution`` to ``out_dir/<same name>``; returns its path.

    Re-running on an unchanged solution writes identical bytes.
    """
    solution = pathlib.Path(solution)
    nb, _ = read_notebook(solution)
    text = dumps_notebook(make_assignment(nb))
    out = pathlib.Path(out_dir) / solution.name
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.is_file() or out.read_text(encoding="utf-8") != text:
        out.write_text(text, encoding="utf-8")
    return out


def expected_assignment_text(solution: pathlib.Path | str) -> str:
    """The exact text :func:`assign_notebook` writes for ``solution`` (for up-to-date checks)."""
    nb, _ = read_notebook(pathlib.Path(solution))
    return dumps_notebook(make_assignment(nb))


def iter_notebooks(paths: Iterable) -> list[pathlib.Path]:
    """The .ipynb files among ``paths`` (folders searched recursively, sorted)."""
    out = []
    for path in map(pathlib.Path, paths):
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts))
        else:
            out.append(path)
    return out
