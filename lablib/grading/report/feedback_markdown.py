"""``feedback/<stem>.md``: each student's feedback, as markdown (the rules of :mod:`.text`).

Text that comes from the submission (its name, messages, notes) is written as literal
text or inside a code block whose fence it cannot close (:func:`.text.md_text`,
:func:`.text.md_code_block`): it never becomes a heading, a link or HTML.
"""

from __future__ import annotations


from lablib.grading.report.base import FeedbackWriter
from lablib.grading.report.text import (
    explain_status,
    md_code_block,
    md_text,
    num,
    person_lines,
    status_text,
    student_detail,
    verdict,
)
from lablib.grading.results import Kind, SubmissionResult

__all__ = ["MarkdownFeedback", "cap_note", "feedback_markdown", "written_markdown"]


def cap_note(score) -> str:
    """What a student reads when a person's grade (a graded
    :class:`~lablib.grading.results.PersonScore`) was held within the question's points:
    ``"5 items add to +5; capped at the question's 4 points."``, or that the score is never
    below 0; "" when the items and adjustment add to the score as shown."""
    if not score.graded:
        return ""
    raw = sum(points for points, _ in score.items) + score.adjustment
    if -1e-9 <= raw <= score.max_score + 1e-9:
        return ""
    count = len(score.items)
    parts = f"{count} item{'s' if count != 1 else ''}" if count else ""
    if score.adjustment:
        parts = f"{parts} and the adjustment" if parts else "the adjustment"
    verb = (
        "adds" if not count and score.adjustment or (count == 1 and not score.adjustment) else "add"
    )
    total = f"{'+' if raw >= 0 else ''}{num(raw)}"
    if raw > score.max_score:
        return f"{parts[0].upper() + parts[1:]} {verb} to {total}; capped at the question's {num(score.max_score)} points."
    return f"{parts[0].upper() + parts[1:]} {verb} to {total}; a score is never below 0."


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
        lines += [f"  - {md_text(' '.join(line.split()))}" for line in person_lines(score)]
        if cap_note(score):
            lines.append(f"  - {cap_note(score)}")
    return [*lines, ""]


def feedback_markdown(lab_title: str, result: SubmissionResult, row=None) -> str:
    """The feedback text for one student (markdown); ``row``: the row's
    :class:`~lablib.grading.report.base.Row` (written answers, lateness, total), or None."""
    written = row.written if row is not None else ()
    late = row.late if row is not None else None
    if written or late is not None:
        parts = [f"tests {num(result.score)} / {num(result.max_score)}"]
        if written:
            parts.append(
                f"written answers {num(row.given)} / {num(row.possible)}"
                f"{f', {row.pending} still to grade' if row.pending else ''}"
            )
        if row.penalty:
            parts.append(f"late penalty -{num(row.penalty)}")
        score_line = f"**Total: {num(row.total)} / {num(row.max_total)}** ({'; '.join(parts)})  "
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
        lines.append(
            f"| {md_text(t.piece)} | {label} | {num(t.score)} / {num(t.max_score)} | {verdict(t)} |"
        )
    lines.append("")
    failed = [
        t for t in result.tests if not t.passed and t.kind != Kind.INVALID_NOTEBOOK
    ]  # said once above
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


class MarkdownFeedback(FeedbackWriter):
    """Writes ``feedback/<stem>.md`` for every submission."""

    name = "feedback (markdown)"
    suffix = ".md"
    render = staticmethod(feedback_markdown)
