"""``instructor/<stem>.md``: the instructor's view of each submission whose status is not ``ok``.

Every message in full (hidden tests included), how each failed attempt ended, the exit
status, the tail of what the submission printed, and the judge's traceback of a grader
error; text from the submission is literal or fenced (as in the feedback). A submission
that is ``ok`` has no view, and no view of a submission that left
the gradebook stays.
"""

from __future__ import annotations

import json
import pathlib

from lablib.grading.gradebook import Gradebook
from lablib.grading.report.base import write_per_submission
from lablib.grading.report.text import md_code_block, md_text, num, status_text
from lablib.grading.results import SubmissionResult

__all__ = ["InstructorViews", "instructor_markdown"]


def instructor_markdown(lab_title: str, result: SubmissionResult) -> str:
    """The instructor's view of one submission (markdown)."""
    lines = [
        f"# {lab_title}: {md_text(result.submission)} (instructor view)",
        "",
        f"Status: `{status_text(result.status)}`; score {num(result.score)} / {num(result.max_score)}; "
        f"{result.seconds:g} s",
        "",
    ]
    lines += [f"- note: {md_text(n)}" for n in result.notes]
    lines += ["", "## Tests not passed", ""]
    for t in result.tests:
        if not t.passed:
            head = f"- `{t.id}`{' (hidden)' if t.hidden else ''} [{t.kind}]:"
            if "\n" in t.message:
                lines += [head, *md_code_block(t.message, indent="  ")]
            else:
                lines.append(f"{head} {md_text(t.message)}")
    for d in result.diagnostics:
        lines += ["", f"## {md_text(d.title)}: {md_text(d.ended)}", ""]
        for key, value in (("detail", d.detail), ("exit", d.exit)):
            if value and "\n" in value:
                lines += [f"- {key}:", *md_code_block(value, indent="  ")]
            elif value:
                lines.append(f"- {key}: {md_text(value)}")
        if d.output_tail:
            lines += ["", "Output (tail):", "", *md_code_block(d.output_tail.rstrip())]
    lines += [
        "",
        "## Isolation",
        "",
        *md_code_block(json.dumps(result.isolation.to_dict(), indent=1)),
        "",
    ]
    return "\n".join(lines)


class InstructorViews:
    """Writes ``instructor/<stem>.md`` for every submission that is not ``ok``."""

    name = "instructor views"

    def write(self, out_dir: pathlib.Path, book: Gradebook) -> list[pathlib.Path]:
        folder = pathlib.Path(out_dir) / "instructor"
        if not folder.is_dir() and all(r.status.ok for r in book.results):
            return []
        return write_per_submission(
            folder, book, ".md", instructor_markdown, only=lambda r: not r.status.ok
        )
