"""Reading notebooks: normalise a submission, find its graded cells and a lab's set-up.

Each function is one small transform, testable alone (the nbgrader idea):

* :func:`read_notebook` - bytes/path -> a validated nbformat 4 notebook (Colab's
  nbformat 4.0, ``metadata.widgets`` without ``state``, ``executionInfo`` cell metadata,
  huge outputs and nbformat 3 are all handled); invalid JSON raises
  :class:`InvalidNotebook`.
* :func:`graded_cells` - the cells whose first line is ``# GRADED: <name>`` (or whose
  second, under a cell magic such as ``%%time``), and which of their magic and shell
  lines the grader does not run (:mod:`lablib.grading.magics`).
* :func:`setup_sources` - the ``# SETUP`` cells of the released lab, magics removed.
* :func:`written_answers` - the answers to the written questions a person grades.

Making the blank lab from a solution is course authoring:
:mod:`lablib.grading.author.assignment`.

Graded cells are found by the marker in their text, never by cell ids or metadata:
Colab and copy/paste rewrite those. Written answers are found by the tag ``lablib assign``
puts in their cell's metadata (Colab, Jupyter and VS Code keep custom cell metadata), by
their markers when the tag is gone (a cell pasted into another notebook), then by the
released cell's id.
"""

from __future__ import annotations

import copy
import dataclasses
import errno
import hashlib
import json
import os
import pathlib
import re
import stat
import sys
import warnings

import nbformat

from lablib.grading.magics import not_run_note
from lablib.grading.results import WrittenAnswer

__all__ = [
    "InvalidNotebook",
    "GradedCell",
    "read_notebook",
    "read_notebook_bytes",
    "listed_path",
    "NotebookMoved",
    "normalize_notebook",
    "cell_source",
    "first_line",
    "graded_cells",
    "setup_sources",
    "strip_magics",
    "GRADED_RE",
    "SETUP_RE",
    "ANSWER_BEGIN_RE",
    "ANSWER_END",
    "ANSWER_PLACEHOLDER",
    "ANSWER_METADATA",
    "answer_tag",
    "written_answers",
]

GRADED_RE = re.compile(r"^#\s*GRADED:\s*([A-Za-z0-9_.\-]+)\s*$")
SETUP_RE = re.compile(r"^#\s*SETUP\b")
#: ``<!-- BEGIN ANSWER -->`` or ``<!-- BEGIN ANSWER <id> -->`` (a written question's id).
ANSWER_BEGIN_RE = re.compile(r"^<!--\s*BEGIN ANSWER(?:\s+([a-z][a-z0-9_]*))?\s*-->$")
ANSWER_END = "<!-- END ANSWER -->"
_ANSWER_END_RE = re.compile(r"^<!--\s*END ANSWER\s*-->$")
#: What the blank lab holds between the markers.
ANSWER_PLACEHOLDER = "_YOUR ANSWER HERE_"
#: The cell metadata key of a written answer's tag: ``{"lablib": {"answer": "<id>"}}``.
ANSWER_METADATA = "lablib"
#: Outputs larger than this (characters of JSON) are dropped while normalising.
MAX_OUTPUT_CHARS = 100_000
#: Larger files are not read at all (checked before reading): ``invalid-notebook``.
MAX_NOTEBOOK_BYTES = 64 * 2**20
#: A written answer is kept and shown up to this many characters (about 15,000 words,
#: far beyond any answer a lab asks for), with a note where it was cut.
MAX_ANSWER_CHARS = 100_000
#: Most ``{`` and ``[`` a file may hold, counted on its bytes before parsing (strings
#: included, so an upper bound on its JSON objects and lists). The four solution notebooks
#: hold 358 to 653; one saved with outputs a few thousand. Parsing millions of tiny
#: objects costs the grader seconds and gigabytes: ``invalid-notebook`` instead.
MAX_JSON_CONTAINERS = 200_000


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


def first_line(source: str) -> str:
    for line in source.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _marker_line(source: str) -> str:
    """The line a graded cell's marker is on: its first, or its second under a cell magic
    (``%%time`` must be a cell's first line, so a student timing a graded cell puts it
    above the marker)."""
    lines = [line.strip() for line in source.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("%%"):
        return lines[1]
    return lines[0] if lines else ""


#: The most characters of a value from the notebook that a note quotes (the rest is
#: counted): a note is read in the terminal, the reports and every feedback file.
QUOTED_CHARS = 80


def _quoted(value) -> str:
    """``repr(value)``, cut to :data:`QUOTED_CHARS` characters with how many were left out."""
    text = repr(value)
    if len(text) <= QUOTED_CHARS:
        return text
    return f"{text[:QUOTED_CHARS]}... ({len(text) - QUOTED_CHARS:,} more characters)"


def _first_line(exc) -> str:
    """The first line of a schema error, which quotes the offending value: a long one keeps
    its start and its end (``... is not of type 'array'``), the middle counted."""
    text = str(exc)
    line = text.splitlines()[0] if text else type(exc).__name__
    if len(line) <= 3 * QUOTED_CHARS:
        return line
    cut = len(line) - 2 * QUOTED_CHARS
    return f"{line[:QUOTED_CHARS]}... ({cut:,} characters left out) ...{line[-QUOTED_CHARS:]}"


def _as_v4(data, notes: list) -> dict:
    """``data`` as an nbformat 4 dict (version 3 converted), or :class:`InvalidNotebook`."""
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
            f"unsupported nbformat {_quoted(major)}; expected the number 4 (or 3). Save the notebook again "
            f"from Jupyter or Colab (File > Download > .ipynb)."
        )
    if not isinstance(data.get("cells"), list):
        raise InvalidNotebook("the notebook has no 'cells' list")
    return copy.deepcopy(dict(data))


def _normal_cell(index: int, cell, notes: list) -> dict | None:
    """One cell as nbformat 4.5 wants it (Colab's metadata dropped, huge outputs
    stripped), or None for an entry that is not a cell."""
    if not isinstance(cell, dict):
        notes.append(f"dropped cell {index}: not an object")
        return None
    cell_type = cell.get("cell_type")
    if cell_type not in ("code", "markdown", "raw"):
        notes.append(f"cell {index}: unknown cell_type {_quoted(cell_type)} read as raw")
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
        cid
        if isinstance(cid, str) and re.fullmatch(r"[a-zA-Z0-9-_]{1,64}", cid)
        else hashlib.sha1(f"{index}:{new['source']}".encode()).hexdigest()[:8]
    )
    return new


def _validated(nb, notes: list):
    """``nb`` validated; outputs the schema rejects are dropped (the grader never reads them)."""
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
            notes.append(f"dropped outputs that failed validation ({_first_line(exc)})")
        except nbformat.ValidationError as exc2:
            notes.append(f"schema warning: {_first_line(exc2)}")
    return nb


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
    data = _as_v4(data, notes)
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    widgets = metadata.pop("widgets", None)
    if widgets is not None:
        notes.append("removed metadata.widgets")
    cells = [
        new
        for index, cell in enumerate(data["cells"])
        if (new := _normal_cell(index, cell, notes)) is not None
    ]
    if len({c["id"] for c in cells}) != len(cells):
        for index, cell in enumerate(cells):
            cell["id"] = f"cell-{index}"
    minor = data.get("nbformat_minor")
    if minor != 5:
        notes.append(
            f"upgraded nbformat 4.{_quoted(minor) if type(minor) is not int else minor} to 4.5"
        )
    nb = nbformat.from_dict(
        {"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": cells}
    )
    return _validated(nb, notes), notes


class NotebookMoved(InvalidNotebook):
    """The path of a notebook listed led to another file when it was read (a symbolic
    link or a folder put in its place while the class was graded): not graded, and not
    the student's mistake to be scored as such (the grader reports it as its own error,
    to be graded again)."""


#: What :class:`NotebookMoved` says.
MOVED = (
    "not graded: when it was read, this notebook's path led to another file than when the "
    "submissions were listed (a symbolic link or a folder put in its place while the class "
    "was graded); the instructor grades it again"
)


def listed_path(path) -> str:
    """The real path of the notebook file ``path`` names now (every link resolved): what
    a listing saw, for :func:`read_notebook_bytes` to check that it reads the file there."""
    return os.path.realpath(path)


def read_notebook_bytes(path, expect: str = "") -> bytes:
    """The bytes of the notebook file at ``path``, from one open file: never through a
    symbolic link at ``path`` itself (a listing resolves the links it follows), only a
    regular file (a pipe, a device or a folder is refused, never waited on or read), at
    most :data:`MAX_NOTEBOOK_BYTES` (the limit holds while reading: a file that grows
    after its size was looked at is cut and refused), and, where ``expect`` gives the real
    path a listing saw (:func:`listed_path`), the file opened must be there (as the
    system names the open file): one reached through a link or folder put in the way
    since is refused (:class:`NotebookMoved`), while the same path saved again (a new
    file renamed over the old, as editors and git do) is read.

    Raises:
        NotebookMoved: the file opened is not at the real path listed, or ``path`` is now
            a symbolic link.
        InvalidNotebook: not a regular file, or too large.
        OSError: the file cannot be opened or read.
    """
    flags = (
        os.O_RDONLY
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_NOCTTY", 0)
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symbolic link where a file was listed
            raise NotebookMoved(MOVED) from None
        raise
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidNotebook(
                "not a regular file (a pipe, a device or a folder named like a notebook); "
                "save the notebook as a file and hand it in again"
            )
        if expect and _opened_path(fd, path) != expect:
            raise NotebookMoved(MOVED)
        _check_size(info.st_size)
        raw = bytearray()
        while len(raw) <= MAX_NOTEBOOK_BYTES:  # what is there, never a 64 MB buffer at once
            block = f.read(min(1 << 20, MAX_NOTEBOOK_BYTES + 1 - len(raw)))
            if not block:
                break
            raw += block
    _check_size(len(raw))
    return bytes(raw)


def _opened_path(fd: int, path) -> str:
    """The real path of the file open as ``fd``, as the system names it (Linux's
    ``/proc/self/fd``); elsewhere the real path ``path`` names now."""
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
    return opened.removesuffix(" (deleted)")  # renamed over since it was opened


def read_notebook(source, expect: str = "") -> tuple[nbformat.NotebookNode, list[str]]:
    """Read and normalise a notebook from a path, bytes or str.

    A path is read by :func:`read_notebook_bytes` (``expect``: the real path a listing saw).

    Returns:
        ``(notebook, notes)`` as :func:`normalize_notebook`.

    Raises:
        InvalidNotebook: the content is not JSON or not a notebook.

    Example::

        nb, notes = read_notebook("submissions/alice.ipynb")
    """
    if isinstance(source, pathlib.Path) or (
        isinstance(source, str) and not source.lstrip().startswith("{")
    ):
        raw = read_notebook_bytes(source, expect)  # a path is never parsed as JSON
    else:
        raw = source.encode() if isinstance(source, str) else bytes(source)
        _check_size(len(raw))
    _check_containers(raw)
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidNotebook(
            f"not valid JSON ({exc}); the file is damaged or not a notebook"
        ) from None
    except ValueError:  # Python's own limit on an integer's digits (sys.get_int_max_str_digits)
        raise InvalidNotebook(
            f"a number in it has more than {sys.get_int_max_str_digits():,} digits, which no "
            "notebook holds; the file is damaged or not a notebook"
        ) from None
    except RecursionError:
        raise InvalidNotebook(_TOO_DEEP) from None
    try:
        return normalize_notebook(data)
    except RecursionError:
        raise InvalidNotebook(_TOO_DEEP) from None


_TOO_DEEP = "its JSON is nested too deeply to be a notebook; the file is damaged or not a notebook"


def _check_size(size: int) -> None:
    if size > MAX_NOTEBOOK_BYTES:
        raise InvalidNotebook(
            f"the file is {size / 2**20:.0f} MB; the grader reads notebooks of up to "
            f"{MAX_NOTEBOOK_BYTES // 2**20} MB. Clear the outputs (Edit > Clear all outputs) and "
            f"save the notebook again."
        )


def _check_containers(raw: bytes) -> None:
    count = raw.count(b"{") + raw.count(b"[")
    if count > MAX_JSON_CONTAINERS:
        raise InvalidNotebook(
            f"the file holds {count:,} JSON objects and lists ('{{' and '['); a notebook holds a "
            f"few thousand and the grader reads up to {MAX_JSON_CONTAINERS:,}. The file is damaged "
            f"or not a notebook; if it is your lab, clear the outputs (Edit > Clear all outputs) "
            f"and save it again."
        )


def graded_cells(nb) -> tuple[dict[str, GradedCell], list[str]]:
    """Find graded cells by their first line ``# GRADED: <name>`` (their second under a
    cell magic such as ``%%time``).

    When a name appears in several cells the last one counts (a note says so). A cell's
    magic and shell lines the grader does not run are named in a note
    (:func:`lablib.grading.magics.not_run_note`).

    Returns:
        ``(cells by name in notebook order, notes)``.
    """
    found: dict[str, list[tuple[int, str]]] = {}
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        source = cell_source(cell)
        match = GRADED_RE.match(_marker_line(source))
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
    notes += [note for name, cell in cells.items() if (note := not_run_note(name, cell.source))]
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
            if SETUP_RE.match(first_line(source)):
                out.append(strip_magics(source))
    return out


def answer_tag(cell) -> str | None:
    """The written question a cell is tagged with (``metadata.lablib.answer``), or None."""
    meta = cell.get("metadata", {}).get(ANSWER_METADATA)
    tag = meta.get("answer") if isinstance(meta, dict) else None
    return tag if isinstance(tag, str) else None


def _answer_regions(source: str) -> list[tuple[str | None, str, bool]]:
    """``(id or None, text, closed)`` of each ``BEGIN ANSWER`` region of a cell; a region
    the student left open runs to the end of the cell."""
    regions = []
    current: list[str] | None = None
    rid = None
    for line in source.split("\n"):
        stripped = line.strip()
        match = ANSWER_BEGIN_RE.match(stripped)
        if match:
            if current is not None:
                regions.append((rid, "\n".join(current), False))
            rid, current = match.group(1), []
        elif _ANSWER_END_RE.match(stripped) and current is not None:
            regions.append((rid, "\n".join(current), True))
            current = None
        elif current is not None:
            current.append(line)
    if current is not None:
        regions.append((rid, "\n".join(current), False))
    return regions


def _clean(text: str) -> str:
    """The answer without the placeholder and the markers, stripped."""
    lines = [
        line
        for line in text.split("\n")
        if line.strip() != ANSWER_PLACEHOLDER
        and not ANSWER_BEGIN_RE.match(line.strip())
        and not _ANSWER_END_RE.match(line.strip())
    ]
    return "\n".join(lines).strip()


def written_answers(nb, questions, *, template=None) -> dict[str, WrittenAnswer]:
    # Over 80 lines for its docstring: how a cell is matched to a question; code: 65 lines.
    """Each written question's answer in ``nb``, found however the student edited the cell.

    A cell belongs to question ``q`` when it holds ``<!-- BEGIN ANSWER q -->`` or is tagged
    ``q`` (``metadata.lablib.answer``); failing both, when its id is the id of ``q``'s cell
    in ``template`` (the released lab). The answer is the text between the markers (all of
    the tagged cell when the student removed them), without the placeholder, followed by
    the markdown cells the student added right below it (cells whose text is not in the
    template). Several cells claiming one question are joined, with a note.

    Args:
        nb: the submission (a normalised notebook).
        questions: the written question ids to look for.
        template: the released lab notebook, or None.

    Returns:
        id -> :class:`~lablib.grading.results.WrittenAnswer`, for every id in ``questions``.
    """
    questions = list(questions)
    cells = list(nb.get("cells", []))
    template_cells = list((template or {}).get("cells", []))
    template_texts = {
        cell_source(c).strip() for c in template_cells if c.get("cell_type") == "markdown"
    }
    template_ids = {}
    for c in template_cells:
        tag = answer_tag(c) or next(
            (rid for rid, _, _ in _answer_regions(cell_source(c)) if rid), None
        )
        if tag and c.get("id"):
            template_ids[tag] = c["id"]
    hits: dict[str, list[tuple[int, str, str]]] = {q: [] for q in questions}
    for index, cell in enumerate(cells):
        source = cell_source(cell)
        regions = _answer_regions(source) if cell.get("cell_type") != "code" else []
        tag = answer_tag(cell)
        named = [(rid, text) for rid, text, _ in regions if rid in hits]
        for rid, text in named:
            hits[rid].append((index, "marker", _clean(text)))
        if tag in hits and not named:
            if regions:
                text = "\n\n".join(_clean(t) for _, t, _ in regions)
            else:
                text = _clean(source)
            hits[tag].append((index, "tag", text))
    for q in questions:
        if not hits[q] and q in template_ids:
            for index, cell in enumerate(cells):
                if cell.get("id") == template_ids[q] and cell.get("cell_type") != "code":
                    hits[q].append((index, "cell id", _clean(cell_source(cell))))
    below: dict[int, list[str]] = {}  # each answer cell's added cells, found once

    def added_below(index: int) -> list[str]:
        if index not in below:
            below[index] = _added_below(cells, index, template_texts) if template else []
        return below[index]

    answers = {}
    for q in questions:
        if not hits[q]:
            answers[q] = WrittenAnswer("", "", ("no answer cell was found (was it deleted?)",))
            continue
        notes = []
        parts = []
        by_cell: dict[int, list[str]] = {}  # a cell's regions, then its added cells once
        for index, _how, text in hits[q]:
            by_cell.setdefault(index, []).append(text)
        for index, texts in by_cell.items():
            added = added_below(index)
            if added:
                notes.append(
                    f"{len(added)} markdown cell(s) added below the answer cell are part of the answer"
                )
            if any(texts) or added:
                parts.append("\n\n".join(p for p in [*dict.fromkeys(texts), *added] if p))
        if len(by_cell) > 1:
            notes.append(
                f"{len(hits[q])} cells hold this answer (cells "
                f"{', '.join(str(i + 1) for i, _, _ in hits[q])}); their texts are joined"
            )
        text = "\n\n".join(dict.fromkeys(parts))
        if len(text) > MAX_ANSWER_CHARS:
            notes.append(
                f"the answer holds {len(text):,} characters; only its first "
                f"{MAX_ANSWER_CHARS:,} are kept and read"
            )
            text = text[:MAX_ANSWER_CHARS]
        answers[q] = WrittenAnswer(text, hits[q][0][1], tuple(notes))
    return answers


def _added_below(cells: list, index: int, template_texts: set) -> list[str]:
    """The markdown cells the student added right below answer cell ``index``: up to the
    first cell that is code, the released lab's, or another answer's."""
    added = []
    for cell in cells[index + 1 :]:
        extra = cell_source(cell).strip()
        if (
            cell.get("cell_type") != "markdown"
            or extra in template_texts
            or answer_tag(cell)
            or _answer_regions(extra)
        ):
            break
        added.append(extra)
    return added
