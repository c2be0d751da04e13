"""``results.json`` in Gradescope's format (written in ``/autograder/results``).

Gradescope grades one student's upload at a time, one notebook of it
(:func:`lablib.grading.gradescope.chosen_notebook`); its tests become Gradescope's tests
(hidden tests visible ``after_published``). A gradebook of several rows given to this
writer (lablib's API) gets its best row, and the top-level output says which counted.
With hidden tests the top-level ``visibility`` is ``after_published`` too: Gradescope shows
students no total score while tests are hidden, so the total, which counts the hidden
tests' points, cannot give their results away before the instructor publishes grades;
public tests carry ``"visibility": "visible"`` and are shown at once.

Every text is plain: Gradescope is told so (``output_format``, ``test_output_format`` and
``test_name_format`` are ``"text"``: by default it renders the top-level output as HTML),
and the control characters of what a submission wrote are shown as symbols
(:func:`.text.visible_controls`).
"""

from __future__ import annotations

import json
import pathlib

from lablib.grading.atomic import atomic_write
from lablib.grading.gradebook import Gradebook
from lablib.grading.report.text import (
    num,
    person_lines,
    status_text,
    student_detail,
    verdict,
    visible_controls,
)
from lablib.grading.results import SubmissionResult

__all__ = ["GradescopeResults", "to_gradescope_json", "NO_NOTEBOOK"]

NO_NOTEBOOK = "No .ipynb file was submitted: upload your lab notebook."
#: How Gradescope shows the outputs and the tests' names: as plain text, never as HTML,
#: markdown or ANSI colours (its documented formats; the top-level output's default,
#: ``simple_format``, renders HTML).
PLAIN_TEXT = {"output_format": "text", "test_output_format": "text", "test_name_format": "text"}


def to_gradescope_json(result: SubmissionResult, chosen_note: str = "", written=()) -> dict:
    """Gradescope's results.json content for one :class:`SubmissionResult`.

    ``written``: ``[(question, PersonScore)]``. A written answer a person graded is a
    test with its points and comments; one not graded yet adds nothing to the score and
    is named in the output (on Gradescope people grade them in Gradescope itself, or
    with ``lablib review`` on the downloaded submissions: docs/guide/instructors.md, "With Gradescope")."""
    tests = []
    for t in result.tests:
        output = "passed" if t.passed else f"{verdict(t)}: {student_detail(t)}"
        tests.append(
            {
                "name": f"{t.piece}: {t.name}" + (" (hidden)" if t.hidden else ""),
                "score": t.score,
                "max_score": t.max_score,
                "output": visible_controls(output),
                "visibility": "after_published" if t.hidden else "visible",
            }
        )
    score = result.score
    pending = []
    for q, given in written:
        if not given.graded:
            pending.append(f"{q.id} ({num(q.points)} points)")
            continue
        tests.append(
            {
                "name": f"written answer {q.id}: {q.title}",
                "score": given.score,
                "max_score": given.max_score,
                "output": visible_controls("\n".join(person_lines(given))),
                "visibility": "visible",
            }
        )
        score += given.score
    header = f"Status: {status_text(result.status)}."
    if pending:
        header += f" Written answers graded by a person later: {', '.join(pending)}."
    if chosen_note:
        header += " " + chosen_note
    notes = [n for n in result.notes if not n.startswith(("timeout:", "memory:", "crashed:"))]
    if notes:
        header += "\n" + "\n".join(f"Note: {n}" for n in notes)
    return {
        "score": score,
        "output": visible_controls(header),
        "tests": tests,
        "stdout_visibility": "hidden",
        # Gradescope's documented rule: students see no total while a test is hidden until
        # later. With hidden tests, the whole result waits for publication and each public
        # test (and graded written answer) is shown at once by its own "visible".
        "visibility": "after_published" if any(t.hidden for t in result.tests) else "visible",
        **PLAIN_TEXT,
    }


def ungraded_results(output: str) -> dict:
    """``results.json`` of an upload graded no test: no points, and ``output`` saying why."""
    return {
        "score": 0.0,
        "output": output,
        "tests": [],
        "stdout_visibility": "hidden",
        **PLAIN_TEXT,
    }


class GradescopeResults:
    """Writes ``results.json``: the best of the submission's notebooks, for Gradescope."""

    name = "results.json (Gradescope)"

    def write(self, out_dir: pathlib.Path, book: Gradebook) -> list[pathlib.Path]:
        if not book.results:
            data = ungraded_results(NO_NOTEBOOK)
        else:
            best = max(book.results, key=lambda r: r.score)
            note = ""
            if len(book.results) > 1:
                note = (
                    f"{len(book.results)} notebooks were submitted; graded all and kept the best "
                    f"({pathlib.Path(best.path).name})."
                )
            data = to_gradescope_json(best, note, book.written(best))
        path = pathlib.Path(out_dir) / "results.json"
        atomic_write(path, json.dumps(data, indent=1) + "\n")
        return [path]
