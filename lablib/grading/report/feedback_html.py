"""``feedback/<stem>.html``: each student's feedback as a standalone page."""

from __future__ import annotations

import html
import pathlib

from lablib.grading.report.base import Gradebook, write_per_submission
from lablib.grading.report.text import explain_status, num, status_text, student_detail, verdict
from lablib.grading.results import SubmissionResult

__all__ = ["HtmlFeedback", "feedback_html"]


def feedback_html(lab_title: str, result: SubmissionResult) -> str:
    """The feedback page for one student (standalone HTML)."""
    esc = html.escape
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
table{{border-collapse:collapse}}.passed td:nth-child(4){{color:#080}}.failed td:nth-child(4){{color:#b00}}.note{{color:#555}}</style>
</head><body>
<h1>{esc(lab_title)}: feedback for {esc(result.submission)}</h1>
<p><b>Score: {num(result.score)} / {num(result.max_score)}</b>. Status: <code>{esc(status_text(result.status))}</code></p>
{explain}{notes}
<table><tr><th>Piece</th><th>Test</th><th>Points</th><th>Result</th><th>Details</th></tr>
{''.join(rows)}
</table></body></html>
"""


class HtmlFeedback:
    """Writes ``feedback/<stem>.html`` for every submission."""

    name = "feedback (HTML)"

    def write(self, out_dir: pathlib.Path, book: Gradebook) -> list[pathlib.Path]:
        return write_per_submission(pathlib.Path(out_dir) / "feedback", book, ".html", feedback_html)
