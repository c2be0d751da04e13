"""``feedback/<stem>.html``: each student's feedback as a standalone page.

Every text is HTML-escaped with its control characters shown as symbols
(:func:`.text.visible_controls`): escaping alone leaves an escape sequence that rewrites
the terminal of whoever prints the file.
"""

from __future__ import annotations


from lablib.grading.report.base import FeedbackWriter
from lablib.grading.report.feedback_markdown import cap_note
from lablib.grading.report.text import (
    explain_status,
    num,
    person_lines,
    status_text,
    student_detail,
    verdict,
    html_text,
)
from lablib.grading.results import SubmissionResult

__all__ = ["HtmlFeedback", "feedback_html"]


def _esc(text: str) -> str:
    """HTML text of a submission's text (:func:`~lablib.grading.report.text.html_text`)."""
    return html_text(text)


def _written_html(row) -> tuple[str, str]:
    """(the score line, the written answers' section) of a :class:`~.base.Row`."""
    esc = _esc
    if not row.written:
        return "", ""
    rows = []
    for q, score in row.written:
        if not score.graded:
            detail, points = "not graded yet", f"– / {num(q.points)}"
        else:
            detail = "<br>".join(esc(line) for line in person_lines(score))
            if cap_note(score):
                detail += f"<br><i class='cap'>{esc(cap_note(score))}</i>"
            points = f"{num(score.score)} / {num(score.max_score)}"
        rows.append(
            f"<tr><td>{esc(q.id)}</td><td>{esc(q.title)}</td><td>{points}</td><td>{detail}</td></tr>"
        )
    line = (
        f" Written answers: {num(row.given)} / {num(row.possible)}"
        f"{f' ({row.pending} still to grade)' if row.pending else ''}."
    )
    section = (
        "<h2>Written answers (graded by a person)</h2><table><tr><th>Question</th><th>About</th>"
        f"<th>Points</th><th>Rubric and comments</th></tr>{''.join(rows)}</table>"
    )
    return line, section


def feedback_html(lab_title: str, result: SubmissionResult, row=None) -> str:
    """The feedback page for one student (standalone HTML); ``row``: the row's
    :class:`~lablib.grading.report.base.Row` (written answers, lateness, total), or None."""
    esc = _esc
    written_line, written_section = _written_html(row) if row is not None else ("", "")
    total = ""
    if row is not None and (row.written or row.late is not None):
        total = (
            f"<p><b>Total: {num(row.total)} / {num(row.max_total)}</b>"
            f"{f' (late penalty -{num(row.penalty)})' if row.penalty else ''}</p>"
        )
    if row is not None and row.late is not None:
        total += f"<p class='late'>Submission time: {esc(row.late.text)}</p>"
    rows = []
    for t in result.tests:
        detail = student_detail(t)
        rows.append(
            f"<tr class='{verdict(t)}'><td>{esc(t.piece)}</td><td>{esc(t.name)}{' (hidden)' if t.hidden else ''}"
            f"</td><td>{num(t.score)} / {num(t.max_score)}</td><td>{verdict(t)}</td><td><pre>{esc(detail)}</pre></td></tr>"
        )
    notes = "".join(f"<p class='note'>{esc(n)}</p>" for n in result.notes)
    explain = "" if result.status.ok else f"<p>{esc(explain_status(result.status))}</p>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(lab_title)}: {esc(result.submission)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}td,th{{border:1px solid #ccc;padding:4px 8px;vertical-align:top}}
table{{border-collapse:collapse}}pre{{white-space:pre-wrap;overflow-wrap:anywhere;margin:0}}.passed td:nth-child(4){{color:#080}}.failed td:nth-child(4){{color:#b00}}.note{{color:#555}}</style>
</head><body>
<h1>{esc(lab_title)}: feedback for {esc(result.submission)}</h1>
{total}<p><b>Tests: {num(result.score)} / {num(result.max_score)}</b>.{written_line} Status: <code>{esc(status_text(result.status))}</code></p>
{explain}{notes}
<table><tr><th>Piece</th><th>Test</th><th>Points</th><th>Result</th><th>Details</th></tr>
{"".join(rows)}
</table>{written_section}</body></html>
"""


class HtmlFeedback(FeedbackWriter):
    """Writes ``feedback/<stem>.html`` for every submission."""

    name = "feedback (HTML)"
    suffix = ".html"
    render = staticmethod(feedback_html)
