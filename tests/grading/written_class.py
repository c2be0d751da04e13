"""A class of Lab 2 submissions with varied written answers, for the written-answer flow.

Every notebook is the solution (fast-mode model code, so the tests pass and one run
serves the whole class through the grading cache); what varies is what students do to
their answer cells: a plain answer, an empty placeholder, markers deleted, an extra cell
added below, LaTeX, raw HTML that must stay text, the cell's tag lost, nested folders.
``make_class`` also writes a lablib roster (``roster.csv``) naming every student, with
submission times around :data:`DUE` (every fourth student late by ``k`` hours; one of
them with a two-day extension).
"""

from __future__ import annotations

import copy
import csv
import datetime as dt
import pathlib
import random

import nbformat

from lablib.grading.author.assignment import dumps_notebook, make_assignment
from lablib.grading.notebook import ANSWER_METADATA, ANSWER_PLACEHOLDER, answer_tag, read_notebook

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solutions" / "lab2_transformer_reuters.ipynb"
QUESTIONS = ("metric", "study", "find_error")
DUE = "2026-11-20T23:59+00:00"

_SENTENCES = [
    "Accuracy is dominated by `earn` and `acq`, more than half of the wires.",
    "Macro-F1 weighs the 46 topics equally, so small topics count.",
    "The exponent should be $2\\lfloor j/2 \\rfloor / d_{model}$, not $2j/d_{model}$.",
    "With $2j$ the pair $(\\sin, \\cos)$ no longer shares a frequency, so $PE_{p+k} \\neq PE_p R_k$.",
    "My table shows width 128 is within a point of the base: noise, not a finding.",
    "Adam at 1e-3 beats SGD, which is still under-trained at the last epoch.",
    "$$\\mathrm{F1}_{macro} = \\frac{1}{K}\\sum_k \\frac{2 P_k R_k}{P_k + R_k}$$",
    "Half of the columns hardly move over 256 positions.",
]


def _answer(rng: random.Random, student: int) -> str:
    picked = rng.sample(_SENTENCES, rng.randint(1, 3))
    return f"(student {student}) " + " ".join(picked)


def make_class(folder, n: int = 32, seed: int = 0) -> dict:
    """Write ``n`` submissions under ``folder`` (some in nested folders) and
    ``folder/../roster.csv``; returns ``{"paths": [...], "answers": {name: {q: text}},
    "roster": path}`` (name: the path relative to ``folder`` without ``.ipynb``)."""
    folder = pathlib.Path(folder)
    rng = random.Random(seed)
    solution, _ = read_notebook(SOLUTION)
    blank = make_assignment(solution)  # the tagged answer cells, as students receive them
    out = {"paths": [], "answers": {}, "roster": folder.parent / "roster.csv"}
    rows = []
    for k in range(n):
        nb = copy.deepcopy(solution)
        # students start from the blank lab's answer cells (tag + markers + placeholder)
        tagged = {answer_tag(c): c for c in blank.cells if answer_tag(c)}
        for i, cell in enumerate(nb.cells):
            for q in QUESTIONS:
                if f"BEGIN ANSWER {q} " in cell.source:
                    nb.cells[i] = copy.deepcopy(tagged[q])
        written = {}
        for q in QUESTIONS:
            index = next(i for i, c in enumerate(nb.cells) if answer_tag(c) == q)
            cell = nb.cells[index]
            case = (k + QUESTIONS.index(q)) % 8
            text = _answer(rng, k)
            if case == 0:  # left blank
                text = ""
            elif case == 1:  # markers deleted, answer typed into the cell
                cell.source = f"**Your answer:** {text}"
                text = cell.source
            elif case == 2:  # an extra cell added below
                cell.source = cell.source.replace(ANSWER_PLACEHOLDER, text)
                more = "And a second paragraph in a cell of my own."
                nb.cells.insert(index + 1, nbformat.v4.new_markdown_cell(more))
                text = text + "\n\n" + more
            elif case == 3:  # raw HTML that must stay text
                text = text + " <script>alert('x')</script> <b>bold?</b>"
                cell.source = cell.source.replace(ANSWER_PLACEHOLDER, text)
            elif case == 4:  # the tag lost (pasted into a copy of the notebook)
                cell.metadata.pop(ANSWER_METADATA, None)
                cell.source = cell.source.replace(ANSWER_PLACEHOLDER, text)
            else:
                cell.source = cell.source.replace(ANSWER_PLACEHOLDER, text)
            written[q] = text
        name = f"s{k:02d}" if k % 5 else f"section{k % 3}/s{k:02d}"
        path = folder / f"{name}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dumps_notebook(nb), encoding="utf-8")
        out["paths"].append(path)
        out["answers"][name] = written
        hours = k if k % 4 == 3 else -k - 1
        submitted = (dt.datetime.fromisoformat(DUE) + dt.timedelta(hours=hours)).isoformat(
            timespec="minutes"
        )
        rows.append(
            [
                f"{1000 + k}",
                f"Student {k:02d}",
                f"s{k:02d}@example.edu",
                f"S{k % 3}",
                f"{name}.ipynb",
                submitted,
                "2d" if k == 11 else "",
            ]
        )
    with open(out["roster"], "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["student_id", "name", "email", "section", "submission", "submitted_at", "extension"]
        )
        writer.writerows(rows)
    return out


if __name__ == "__main__":  # python tests/grading/written_class.py FOLDER [N]
    import sys

    made = make_class(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 32)
    print(f"wrote {len(made['paths'])} submissions and {made['roster']}")
