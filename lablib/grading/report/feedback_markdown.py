"""``feedback/<stem>.md``: each student's feedback, as markdown (the rules of :mod:`.text`).

Text that comes from the submission (its name, messages, notes) is written as literal
text or inside a code block whose fence it cannot close (:func:`.text.md_text`,
:func:`.text.md_code_block`): it never becomes a heading, a link or HTML.
"""

from __future__ import annotations

import pathlib

from lablib.grading.report.base import Gradebook, write_per_submission
from lablib.grading.report.text import (
    explain_status,
    md_code_block,
    md_text,
    num,
    status_text,
    student_detail,
    verdict,
)
from lablib.grading.results import Kind, SubmissionResult

__all__ = ["MarkdownFeedback", "feedback_markdown", "written_markdown"]


def written_markdown(written) -> list[str]:
    """The lines about the written answers: ``written`` is ``[(question, PersonScore)]``."""
    if not written:
        return []
    lines = ["## Written answers (graded by a person)", ""]
    for question, score in written:
        title = f"**{md_text(question.id)}** ({md_text(question.title)})"
        if not score.graded:
            lines.append(f"- {title}: not graded yet ({num(question.points)} points)")
            continue
        lines.append(f"- {title}: {num(score.score)} / {num(score.max_score)}")
        for points, comment in score.items:
            lines.append(f"  - {'+' if points >= 0 else ''}{num(points)}: {md_text(comment)}")
        if score.adjustment:
            lines.append(f"  - {'+' if score.adjustment >= 0 else ''}{num(score.adjustment)}: adjustment")
        if score.comment.strip():
            lines.append(f"  - Comment: {md_text(' '.join(score.comment.split()))}")
    return [*lines, ""]


def feedback_markdown(lab_title: str, result: SubmissionResult, written=(), late=None) -> str:
    """The feedback text for one student (markdown); ``written``: ``[(question,
    PersonScore)]`` of the lab's written answers (:meth:`Gradebook.written`); ``late``: the
    row's :class:`~lablib.grading.late.Late` (:meth:`Gradebook.late`)."""
    if written or late is not None:
        given = sum(score.score for _, score in written)
        possible = sum(q.points for q, _ in written)
        pending = sum(score.pending for _, score in written)
        penalty = late.penalty if late is not None else 0.0
        parts = [f"tests {num(result.score)} / {num(result.max_score)}"]
        if written:
            parts.append(f"written answers {num(given)} / {num(possible)}{f', {pending} still to grade' if pending else ''}")
        if penalty:
            parts.append(f"late penalty -{num(penalty)}")
        total = max(0.0, result.score + given - penalty)
        score_line = f"**Total: {num(total)} / {num(result.max_score + possible)}** ({'; '.join(parts)})  "
    else:
        score_line = f"**Score: {num(result.score)} / {num(result.max_score)}**  "
    lines = [
        f"# {lab_title}: feedback for {md_text(result.submission)}",
        "",
        score_line,
        f"Status: `{status_text(result.status)}`",
        "",
    ]
    if late is not None:
        lines += [f"Submission time: {md_text(late.text)}", ""]
    if not result.status.ok:
        lines += [explain_status(result.status), ""]
    for note in result.notes:
        lines.append(f"> Note: {md_text(note)}")
    if result.notes:
        lines.append("")
    lines += ["| Piece | Test | Points | Result |", "|---|---|---|---|"]
    for t in result.tests:
        label = md_text(f"{t.name} (hidden)" if t.hidden else t.name)
        lines.append(f"| {md_text(t.piece)} | {label} | {num(t.score)} / {num(t.max_score)} | {verdict(t)} |")
    lines.append("")
    failed = [t for t in result.tests if not t.passed and t.kind != Kind.INVALID_NOTEBOOK]  # said once above
    if failed:
        lines += ["## What to fix", ""]
        for t in failed:
            detail = student_detail(t, with_hint=False)
            label = f"**{t.piece} / {t.name}**" + (" (hidden test)" if t.hidden else "")
            if "\n" in detail:
                lines.append(f"- {label}:")
                lines += md_code_block(detail, indent="  ")
            else:
                lines.append(f"- {label}: {md_text(detail)}")
            if t.hint and not t.hidden and t.kind != Kind.GRADER_ERROR:
                lines.append(f"  - Hint: {t.hint}")
        lines.append("")
    lines += written_markdown(written)
    return "\n".join(lines)


class MarkdownFeedback:
    """Writes ``feedback/<stem>.md`` for every submission."""

    name = "feedback (markdown)"

    def write(self, out_dir: pathlib.Path, book: Gradebook) -> list[pathlib.Path]:
        return write_per_submission(pathlib.Path(out_dir) / "feedback", book, ".md",
                                    lambda title, r: feedback_markdown(title, r, book.written(r), book.late(r)))
