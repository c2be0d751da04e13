"""Gradebook and feedback files: ``grades.csv``, ``grades.json``, ``feedback/<name>.md|html``.

Students' feedback follows :mod:`~lablib.grading.feedback` (hidden tests by name, score
and a reason that reveals nothing; grader errors never shown as the student's mistake).
The instructor's view, ``instructor/<name>.md``, is written for every submission whose
status is not ``ok``: how each failed attempt ended, the exit status, the tail of what the
submission printed, and the judge's traceback of a grader error.
"""

from __future__ import annotations

import csv
import hashlib
import html
import json
import pathlib
import unicodedata

from lablib.grading import summary
from lablib.grading.feedback import student_detail, verdict
from lablib.grading.judge import SubmissionResult

__all__ = ["write_reports", "feedback_markdown", "feedback_html", "instructor_markdown", "feedback_stems"]


def _num(x: float) -> str:
    return f"{x:g}"


def feedback_markdown(lab_title: str, result: SubmissionResult) -> str:
    """The feedback text for one student (markdown)."""
    lines = [
        f"# {lab_title}: feedback for {result.submission}",
        "",
        f"**Score: {_num(result.score)} / {_num(result.max_score)}**  ",
        f"Status: `{result.status}`",
        "",
    ]
    if result.status != "ok":
        lines += [_explain_status(result.status), ""]
    for note in result.notes:
        lines.append(f"> Note: {note}")
    if result.notes:
        lines.append("")
    lines += ["| Piece | Test | Points | Result |", "|---|---|---|---|"]
    for t in result.tests:
        label = f"{t.name} (hidden)" if t.hidden else t.name
        lines.append(f"| {t.piece} | {label} | {_num(t.score)} / {_num(t.max_score)} | {verdict(t)} |")
    lines.append("")
    failed = [t for t in result.tests if not t.passed]
    if failed:
        lines += ["## What to fix", ""]
        for t in failed:
            detail = student_detail(t, with_hint=False)
            label = f"**{t.piece} / {t.name}**" + (" (hidden test)" if t.hidden else "")
            if "\n" in detail:
                lines.append(f"- {label}:")
                lines += ["  ```", *("  " + line for line in detail.splitlines()), "  ```"]
            else:
                lines.append(f"- {label}: {detail}")
            if t.hint and not t.hidden and t.kind != "grader-error":
                lines.append(f"  - Hint: {t.hint}")
        lines.append("")
    return "\n".join(lines)


def _explain_status(status: str) -> str:
    words = {
        "grader-error": "The grader itself failed on some tests (not your doing); your instructor will re-grade them.",
        "invalid-notebook": "The file could not be read as a Jupyter notebook; nothing was graded.",
        "memory": "Some code used more memory than allowed; those tests scored 0.",
        "timeout": "Some code ran past the time limit; those tests scored 0.",
        "crashed": "Some code ended the grader's process (sys.exit, os._exit, a crash); those tests scored 0.",
    }
    out = [words[w] for w in words if w in status]
    if "missing:" in status:
        out.append("Graded cells were not found: every graded cell must start with its "
                   "`# GRADED: <name>` line, exactly as in the lab.")
    return " ".join(out)


def feedback_html(lab_title: str, result: SubmissionResult) -> str:
    """The feedback page for one student (standalone HTML)."""
    esc = html.escape
    rows = []
    for t in result.tests:
        detail = student_detail(t)
        rows.append(
            f"<tr class='{verdict(t)}'><td>{esc(t.piece)}</td><td>{esc(t.name)}{' (hidden)' if t.hidden else ''}"
            f"</td><td>{_num(t.score)} / {_num(t.max_score)}</td><td>{verdict(t)}</td><td><pre>{esc(detail)}</pre></td></tr>"
        )
    notes = "".join(f"<p class='note'>{esc(n)}</p>" for n in result.notes)
    explain = f"<p>{esc(_explain_status(result.status))}</p>" if result.status != "ok" else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(lab_title)}: {esc(result.submission)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}td,th{{border:1px solid #ccc;padding:4px 8px;vertical-align:top}}
table{{border-collapse:collapse}}.passed td:nth-child(4){{color:#080}}.failed td:nth-child(4){{color:#b00}}.note{{color:#555}}</style>
</head><body>
<h1>{esc(lab_title)}: feedback for {esc(result.submission)}</h1>
<p><b>Score: {_num(result.score)} / {_num(result.max_score)}</b>. Status: <code>{esc(result.status)}</code></p>
{explain}{notes}
<table><tr><th>Piece</th><th>Test</th><th>Points</th><th>Result</th><th>Details</th></tr>
{''.join(rows)}
</table></body></html>
"""


def _safe(name: str) -> str:
    name = unicodedata.normalize("NFC", name)
    safe = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name)
    return ("_" + safe[1:] if safe.startswith(".") else safe)[:120] or "submission"


def feedback_stems(names) -> dict[str, str]:
    """A feedback file stem per submission name, no two alike (also ignoring case).

    Names are made file-safe (``"Smith, John"`` -> ``Smith__John``); names whose safe
    stems coincide each get the first 8 hex digits of their SHA-1 appended
    (``Smith__John-1d2c3b4a``), so ``"Smith, John"`` and ``"Smith_ John"``, or
    ``alice/hw`` and ``alice_hw``, never write one file. The feedback itself names the
    submission exactly, and ``grades.json`` gives each one's file.
    """
    names = sorted(set(names))
    safe = {name: _safe(name) for name in names}
    shared: dict[str, int] = {}
    for stem in safe.values():
        shared[stem.casefold()] = shared.get(stem.casefold(), 0) + 1

    def hashed(name: str, digits: int) -> str:
        return f"{safe[name]}-{hashlib.sha1(name.encode('utf-8', 'surrogatepass')).hexdigest()[:digits]}"

    stems, used = {}, set()
    for name in names:
        digits = 8
        stem = hashed(name, digits) if shared[safe[name].casefold()] > 1 else safe[name]
        while stem.casefold() in used:  # taken by another name's stem: a longer digest
            digits += 4
            stem = hashed(name, digits)
        used.add(stem.casefold())
        stems[name] = stem
    return stems


def write_reports(out_dir, lab, results: list[SubmissionResult]) -> dict[str, pathlib.Path]:
    """Write ``grades.csv``, ``grades.json``, the feedback files, the instructor views and
    the class summary (``summary.json``, ``summary.html``) under ``out_dir``.

    Returns:
        The paths written: ``{"csv", "json", "feedback", "instructor", "summary_json",
        "summary_html"}``.
    """
    out = pathlib.Path(out_dir)
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    pieces = list(lab.pieces)
    results = sorted(results, key=lambda r: r.submission)
    stems = feedback_stems(r.submission for r in results)
    with open(out / "grades.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", "status", "score", "max_score", *pieces])
        for r in results:
            writer.writerow([r.submission, r.status, _num(r.score), _num(r.max_score),
                             *(_num(r.pieces.get(p, {}).get("score", 0.0)) for p in pieces)])
    data = {
        "lab": lab.name,
        "pieces": {p: {"objects": list(lab.pieces[p].objects), "description": lab.pieces[p].description}
                   for p in pieces},
        "submissions": [{**r.to_dict(), "feedback": f"feedback/{stems[r.submission]}"} for r in results],
    }
    (out / "grades.json").write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    for r in results:
        stem = stems[r.submission]
        (out / "feedback" / f"{stem}.md").write_text(feedback_markdown(lab.title, r), encoding="utf-8")
        (out / "feedback" / f"{stem}.html").write_text(feedback_html(lab.title, r), encoding="utf-8")
    instructor = out / "instructor"
    for r in results:
        view = instructor / f"{stems[r.submission]}.md"
        if r.status != "ok":
            instructor.mkdir(exist_ok=True)
            view.write_text(instructor_markdown(lab.title, r), encoding="utf-8")
        elif view.exists():
            view.unlink()
    return {"csv": out / "grades.csv", "json": out / "grades.json", "feedback": out / "feedback",
            "instructor": instructor, **summary.write_summary(out, lab, results)}


def instructor_markdown(lab_title: str, result: SubmissionResult) -> str:
    """The instructor's view of one submission whose status is not ``ok``: every
    message in full (hidden tests included), how each failed attempt ended, the exit
    status, the tail of what it printed, and judge tracebacks."""
    lines = [f"# {lab_title}: {result.submission} (instructor view)", "",
             f"Status: `{result.status}`; score {_num(result.score)} / {_num(result.max_score)}; "
             f"{result.seconds:g} s", ""]
    lines += [f"- note: {n}" for n in result.notes]
    lines += ["", "## Tests not passed", ""]
    for t in result.tests:
        if not t.passed:
            lines.append(f"- `{t.id}`{' (hidden)' if t.hidden else ''} [{t.kind}]: {t.message}")
    for d in result.diagnostics:
        lines += ["", f"## {d.get('running') or d.get('test')}: {d.get('ended')}", ""]
        for key in ("detail", "exit"):
            if d.get(key):
                lines.append(f"- {key}: {d[key]}")
        if d.get("output_tail"):
            lines += ["", "Output (tail):", "", "```", d["output_tail"].rstrip(), "```"]
    lines += ["", "## Isolation", "", "```", json.dumps(result.isolation, indent=1), "```", ""]
    return "\n".join(lines)
