"""The class at a glance: ``summary.json`` and ``summary.html`` of one graded batch.

Written by every ``lablib grade`` next to ``grades.csv``. The headline is the class's
totals, as the LMS export counts them (automatic points + the people's points for the
written answers - the late penalty, floored at 0; each student's best row, a student with
several rows counted once): their histogram, mean and median, with the automatic points
alone beside them, and how many rows from how many students. Then per-piece histograms, each
test's pass rate (the tests the class fails most first) over all submissions and over
those that attempted the piece, its most common failure among those who attempted it,
the named mistakes (the checks' diagnoses, such as "The scores are not scaled by
1/sqrt(d_k)") ranked by how many students made each, status counts, the submissions of
every status other than ``ok`` with links to their feedback and instructor views, and
the slowest submissions. A piece left as the blank lab's stub ("not done yet"), a missing
graded cell or an unreadable notebook is "not attempted": never an error, never a
failure of the piece's tests. The page is static and self-contained (no network, no
script): the plots are inline SVG drawn with matplotlib's SVG backend (no display needed).
It is the instructor's view: hidden tests are named there.

Example::

    from lablib.grading.report.summary import class_summary, write_summary
    data = class_summary(lab, results, roster)          # plain dict, as in summary.json
    write_summary("out", data)                  # out/summary.json, out/summary.html
"""

from __future__ import annotations

import io
import json
import pathlib
import re
from urllib.parse import quote

import numpy as np

from lablib.grading.atomic import atomic_write
from lablib.grading.gradebook import Gradebook, feedback_stems
from lablib.grading.report.text import html_text, status_text
from lablib.grading.results import PROBLEMS, Kind, cell_failed
from lablib.grading.gradebook.identity import owner_of
from lablib.grading.gradebook.similarity import MAX_PAIRS, THRESHOLD
from lablib.session import NOT_DONE, NOT_IMPLEMENTED

#: How the hints are made, in one line (summary.json).
METHOD = (
    "winnowing (BLAKE2b fingerprints, deterministic) of the graded cells' tokens after normalising them "
    "(decodable exec/eval inlined, dead statements dropped, own names as V, called names as written); "
    "the released lab's code and passages in more than half the students (each once, whatever their rows) "
    "removed; similarity = the smaller share"
)

__all__ = ["ClassSummary", "class_summary", "summary_html", "write_summary"]

#: How many of the slowest submissions are listed.
SLOWEST = 10
#: Characters of a failure message kept in the summary (its first line).
MESSAGE_CHARS = 160
#: The rows of the status table, always present (``grader-error`` only when it happened).
_STATUS_ROWS = (
    "ok",
    *(k.value for k in PROBLEMS if k != Kind.GRADER_ERROR),
    Kind.ERROR.value,
    Kind.MISSING.value,
)


def _histogram(scores, max_score: float) -> dict:
    """Counts of ``scores`` in bins over ``[0, max_score]`` (one bin per point when points
    are whole and few, else 10 equal bins); ``labels`` name the bins."""
    scores = np.asarray(scores, dtype=float)
    whole = max_score == int(max_score) and 0 < max_score <= 30
    if whole:
        edges = np.arange(int(max_score) + 2) - 0.5
        labels = [f"{k}" for k in range(int(max_score) + 1)]
    else:
        top = max_score if max_score > 0 else 1.0
        edges = np.linspace(0.0, top, 11)
        labels = [f"{a:g}-{b:g}" for a, b in zip(edges[:-1], edges[1:])]
    clipped = np.clip(scores, edges[0], edges[-1]) if scores.size else scores
    counts, _ = np.histogram(clipped, bins=edges)
    return {
        "edges": [round(float(e), 6) for e in edges],
        "labels": labels,
        "counts": [int(c) for c in counts],
    }


def _stats(scores) -> dict:
    scores = np.asarray(scores, dtype=float)
    if not scores.size:
        return {"mean": None, "median": None, "min": None, "max": None}
    return {
        "mean": round(float(scores.mean()), 3),
        "median": round(float(np.median(scores)), 3),
        "min": round(float(scores.min()), 3),
        "max": round(float(scores.max()), 3),
    }


#: How a test of a piece the student did not attempt is counted (never ``error``).
NOT_ATTEMPTED = "not attempted"
#: How many named mistakes the class-wide ranking lists.
MISTAKES_SHOWN = 20


def _attempted(test) -> bool:
    """Whether a test's run says anything about the student's work on its piece: not when
    the graded cell is missing, the notebook unreadable, the piece still the blank lab's
    stub ("not done yet") or raising ``NotImplementedError`` itself. Read from how the
    grader begins a message, never from what the message holds: a message quotes the
    student's values and exceptions (``got 'NotImplementedError'`` is a wrong answer)."""
    if test.kind in (Kind.MISSING, Kind.INVALID_NOTEBOOK):
        return False
    message = test.message.removeprefix(cell_failed(test.piece))  # the cell's error first
    return not message.startswith((NOT_DONE, NOT_IMPLEMENTED))


def _message_key(message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    return first if len(first) <= MESSAGE_CHARS else first[: MESSAGE_CHARS - 3] + "..."


def _piece_rows(lab, results):
    """Per graded piece: points, statistics, histogram, how many attempted it."""
    pieces = []
    for piece in lab.pieces:
        got = [r.pieces[piece].score if piece in r.pieces else 0.0 for r in results]
        top = max(
            [r.pieces[piece].max_score if piece in r.pieces else 0.0 for r in results]
            or [sum(t.points for t in lab.tests if t.piece == piece)]
        )
        attempted = sum(any(_attempted(t) for t in r.tests if t.piece == piece) for r in results)
        pieces.append(
            {
                "piece": piece,
                "description": lab.pieces[piece].description,
                "max_score": top,
                **_stats(got),
                "full_marks": sum(1 for s in got if top > 0 and s >= top),
                "zero": sum(1 for s in got if s <= 0),
                "histogram": _histogram(got, top),
                "attempted": attempted,
                "not_attempted": len(results) - attempted,
            }
        )
    return pieces


def _mistake_rows(lab, results) -> list[dict]:
    """The named mistakes (the checks' diagnoses), most students first: each with its
    piece, how many students made it and the tests that named it. One mistake named by
    several tests with their own numbers ("here sqrt(2)", "here sqrt(4)") is one row (the
    sentence shown is the commonest wording); a student who makes it on several tests
    counts once."""
    order = {p: i for i, p in enumerate(lab.pieces)}
    found: dict[tuple, dict] = {}
    for r in results:
        for t in r.tests:
            if t.passed or not t.mistake or not _attempted(t):
                continue
            text = _message_key(t.message)
            row = found.setdefault(
                (t.piece, re.sub(r"\d+(?:\.\d+)?", "#", text)),
                {"piece": t.piece, "wordings": {}, "students": set(), "tests": set()},
            )
            row["wordings"][text] = row["wordings"].get(text, 0) + 1
            row["students"].add(r.submission)
            row["tests"].add(t.name)
    rows = [
        {
            "piece": v["piece"],
            "mistake": min(v["wordings"].items(), key=lambda kv: (-kv[1], kv[0]))[0],
            "students": len(v["students"]),
            "tests": sorted(v["tests"]),
            "who": sorted(v["students"]),
        }
        for v in found.values()
    ]
    rows.sort(key=lambda v: (-v["students"], order.get(v["piece"], len(order)), v["mistake"]))
    return rows


def _test_rows(lab, results):
    """Per test, most failed first: pass rates (all, attempted), failures by kind, the most common message."""
    order = {t.id: i for i, t in enumerate(lab.tests)}
    tests: dict[str, dict] = {}
    for r in results:
        for t in r.tests:
            row = tests.setdefault(
                t.id,
                {
                    "id": t.id,
                    "piece": t.piece,
                    "name": t.name,
                    "hidden": t.hidden,
                    "points": t.max_score,
                    "runs": 0,
                    "passed": 0,
                    "score_sum": 0.0,
                    "attempted": 0,
                    "passed_attempted": 0,
                    "failures": {},
                    "messages": {},
                    "mistakes": {},
                },
            )
            row["runs"] += 1
            row["passed"] += bool(t.passed)
            row["score_sum"] += t.score
            attempted = _attempted(t)
            if attempted:
                row["attempted"] += 1
                row["passed_attempted"] += bool(t.passed)
            if not t.passed:
                kind = t.kind.value if attempted else NOT_ATTEMPTED
                row["failures"][kind] = row["failures"].get(kind, 0) + 1
                if attempted:  # the most common failure among those who tried the piece
                    key = _message_key(t.message)
                    row["messages"][key] = row["messages"].get(key, 0) + 1
                    if t.mistake:
                        row["mistakes"][key] = row["mistakes"].get(key, 0) + 1
    test_rows = []
    for row in tests.values():
        runs = row.pop("runs")
        score_sum = row.pop("score_sum")
        row["failed"] = runs - row["passed"]
        row["pass_rate"] = round(row["passed"] / runs, 4) if runs else None
        row["mean_score"] = round(score_sum / runs, 4) if runs else None
        attempted, passed_attempted = row.pop("attempted"), row.pop("passed_attempted")
        row["attempted"] = attempted
        row["pass_rate_attempted"] = round(passed_attempted / attempted, 4) if attempted else None
        row["failures"] = dict(sorted(row["failures"].items(), key=lambda kv: (-kv[1], kv[0])))
        messages = sorted(row.pop("messages").items(), key=lambda kv: (-kv[1], kv[0]))
        row["common_failure"] = (
            {"message": messages[0][0], "count": messages[0][1]} if messages else None
        )
        row["mistakes"] = [
            {"mistake": m, "count": c}
            for m, c in sorted(row["mistakes"].items(), key=lambda kv: (-kv[1], kv[0]))
        ]
        test_rows.append(row)
    test_rows.sort(key=lambda row: (row["pass_rate"], order.get(row["id"], len(order)), row["id"]))
    return test_rows


def _attention(results):
    """The submissions of each status other than ``ok``, with their files."""
    stems = feedback_stems(r.submission for r in results)
    needs_attention: dict[str, list] = {}
    for r in results:
        for kind in r.status.kinds:
            needs_attention.setdefault(kind.value, []).append(
                {
                    "submission": r.submission,
                    "status": status_text(r.status),
                    "score": r.score,
                    "feedback": f"feedback/{stems[r.submission]}.html",
                    "instructor": f"instructor/{stems[r.submission]}.md",
                }
            )
    return needs_attention


def class_summary(
    lab,
    results,
    roster=None,
    skipped=(),
    written=None,
    late=None,
    similarity=None,
    totals=None,
    lms_late=(),
    late_members=None,
) -> dict:
    # Over 80 lines for its signature and docstring: every section of summary.json; code: 59 lines.
    """The batch's summary as plain values (the content of ``summary.json``).

    Args:
        lab: the :class:`~lablib.grading.spec.LabSpec` graded.
        results: the :class:`~lablib.grading.results.SubmissionResult` of each submission.
        skipped: ``(path, reason)`` of the paths given that were not graded.
        roster: the :class:`~lablib.grading.gradebook.roster.RosterMatch` of the rows, when a roster
            was given: ``roster`` then lists the submissions that matched no student and the
            students without a submission.
        written: submission -> ``[(question, PersonScore)]`` for a lab with written
            answers: ``written`` then sums up the people's grading.
        late: ``(policy, {submission: Late or None})`` with a late policy: ``late`` then
            counts the late submissions and their penalties.
        similarity: ``{"pairs": [Pair], "identical": [[names]]}`` and optionally
            ``same_code``, ``found`` (pairs at the threshold before the cap), ``cap``,
            ``threshold``, ``common`` and ``dynamic_code`` (submission -> sentences)
            (:func:`lablib.grading.gradebook.similarity.similarity_hints`): the pairs of near-identical
            graded code, and the graded cells that run code given as data.
        totals: ``{submission: total}``, the gradebook's totals (tests + written answers -
            late penalty, as in grades.csv): the headline and the written and late
            sections sum these (default: tests + the people's points in ``written``).
        lms_late: submissions the LMS marks late (Canvas's ``LATE``) without a time: no
            deduction was computed for them; the late section lists them.
        late_members: ``{submission: [(member name, Late or None)]}`` for group rows, each
            member under their own extension or due date: the late section then counts and
            lists each member (a group's row counts once per person, as the export
            deducts), not the group's first member for all.

    Returns:
        ``{"lab", "title", "submissions", "students", "several_rows", "total", "max_score",
        "score", "histogram", "pieces", "mistakes", "tests", "statuses", "needs_attention",
        "slowest", "roster", "skipped", "written", "late", "similarity"}``: ``submissions``
        counts the rows, ``students`` their students; ``total`` is the headline (the totals'
        statistics and histogram out of ``total["possible"]``, over each student's best row,
        as the LMS export takes it: :func:`_best_rows`), ``score`` and ``histogram`` the
        automatic points alone of those rows; ``several_rows`` the students with several
        rows (several notebooks), the best one named; ``mistakes`` the named mistakes, most
        students first; ``tests`` is sorted by failure rate, highest first; ``needs_attention``
        maps each status other than ``ok`` to its submissions with their feedback and
        instructor files.
    """
    results = sorted(results, key=lambda r: r.submission)
    written = written or {}
    n = len(results)
    max_score = max([r.max_score for r in results] or [float(lab.max_score)])
    questions = [q for q, _ in next(iter(written.values()), [])] or list(
        getattr(lab, "answers", {}).values()
    )
    max_total = max_score + sum(q.points for q in questions)
    if totals is None:  # tests + the people's points, when no gradebook totals were given
        totals = {
            r.submission: r.score + sum(s.score for _, s in written.get(r.submission, []))
            for r in results
        }
    best, several = _best_rows(results, totals)
    total_values = [float(totals.get(r.submission, r.score)) for r in best]
    scores = [r.score for r in best]
    pending = sum(s.pending for r in results for _, s in written.get(r.submission, []))
    pieces = _piece_rows(lab, results)
    test_rows = _test_rows(lab, results)
    statuses = _status_counts(results)
    needs_attention = _attention(results)
    slowest = sorted(results, key=lambda r: (-r.seconds, r.submission))[:SLOWEST]
    return {
        "lab": lab.name,
        "title": lab.title,
        "submissions": n,
        "students": len(best),
        "several_rows": several,
        "max_score": max_score,
        "total": {
            "possible": max_total,
            **_stats(total_values),
            "histogram": _histogram(total_values, max_total),
            "what": "automatic + written - late penalty (floored at 0) of each student's best row, as the LMS export",
            "written_to_grade": pending,
            "late_applied": late is not None,
        },
        "score": _stats(scores),
        "histogram": _histogram(scores, max_score),
        "pieces": pieces,
        "mistakes": _mistake_rows(lab, results),
        "tests": test_rows,
        "statuses": statuses,
        "needs_attention": needs_attention,
        "slowest": [
            {
                "submission": r.submission,
                "seconds": r.seconds,
                "status": status_text(r.status),
                "cached": r.cached,
            }
            for r in slowest
        ],
        "skipped": [{"path": str(path), "reason": str(reason)} for path, reason in skipped],
        "roster": _roster_values(roster),
        "written": _written_rows(results, written, totals, late_applied=late is not None),
        "late": _late_rows(results, late, totals, lms_late, late_members or {}),
        "similarity": _similarity_values(similarity),
    }


def _best_rows(results, totals: dict) -> tuple[list, list[dict]]:
    """Each student's best row (the highest total, as ``lablib export`` takes it; a row
    without a known owner is a student of its own: :func:`~lablib.grading.gradebook.identity.owner_of`),
    and the students with several rows: ``{"student", "rows", "best", "submissions"}``."""
    by_owner: dict[tuple, list] = {}
    for r in results:
        by_owner.setdefault(owner_of(r), []).append(r)
    best, several = [], []
    for owner, rows in by_owner.items():
        top = max(rows, key=lambda r: float(totals.get(r.submission, r.score)))  # first of equals
        best.append(top)
        if len(rows) > 1:
            identity = rows[0].identity or {}
            who = owner[1] if owner[0] == "folder" else identity.get("name") or identity.get("key")
            several.append(
                {
                    "student": str(who or rows[0].submission),
                    "rows": len(rows),
                    "best": top.submission,
                    "submissions": [r.submission for r in rows],
                }
            )
    return best, several


def _status_counts(results) -> dict[str, int]:
    """How many submissions have each status (``ok`` when none), every status listed."""
    statuses = {word: 0 for word in _STATUS_ROWS}
    for r in results:
        for word in [k.value for k in r.status.kinds] or ["ok"]:
            statuses[word] = statuses.get(word, 0) + 1
    return statuses


def _roster_values(roster) -> dict | None:
    """The summary's ``roster``: matched students, unmatched submissions, students without
    a submission (None without a roster)."""
    if roster is None:
        return None
    return {
        "matched": len(roster.students),
        "unmatched_submissions": list(roster.unmatched),
        "unmatched_reasons": dict(roster.reasons),
        "students_without_submission": [
            {"student": s.key, "name": s.name, "section": s.section}
            for s in roster.without_submission
        ],
    }


def _similarity_values(similarity) -> dict | None:
    """The summary's ``similarity``: the pairs without their code, the identical files, the
    graded cells that run code given as data (None when similarity was not computed)."""
    if similarity is None:
        return None
    return {
        "threshold": similarity.get("threshold", THRESHOLD),
        "method": METHOD,
        "pairs": [
            {k: v for k, v in p.to_dict().items() if not k.startswith(("code_", "marks_"))}
            for p in similarity["pairs"]
        ],
        "found": similarity.get("found", len(similarity["pairs"])),
        "cap": similarity.get("cap", MAX_PAIRS),
        "common_passages": similarity.get("common", 0),
        "same_code": [list(g) for g in similarity.get("same_code", [])],
        "same_student": [list(g) for g in similarity.get("same_student", [])],
        "identical_files": [list(g) for g in similarity["identical"]],
        "dynamic_code": {
            name: list(lines) for name, lines in sorted(similarity.get("dynamic_code", {}).items())
        },
    }


def _marked(code: str, marks) -> str:
    """``code`` as HTML with the ``(start, end)`` ranges in ``<mark>``."""
    out, at = [], 0
    for start, end in sorted(marks):
        start = max(start, at)
        if end <= start:
            continue
        out += [html_text(code[at:start]), "<mark>", html_text(code[start:end]), "</mark>"]
        at = end
    out.append(html_text(code[at:]))
    return "".join(out)


def _similarity_section(similarity) -> str:
    if similarity is None:
        return ""
    esc = html_text
    identical = "".join(f"<li>{esc(', '.join(group))}</li>" for group in similarity["identical"])
    identical = (
        f"<h3>Byte-identical notebooks</h3><ul>{identical}</ul>"
        if identical
        else "<p>No two notebooks are byte-identical.</p>"
    )
    same = "".join(
        f"<li>{len(group)} submissions: {esc(', '.join(group))}</li>"
        for group in similarity.get("same_code", [])
    )
    same = (
        f"<h3>The same graded code, character for character</h3><p>Each group is compared with the others "
        f"through its first submission.</p><ul>{same}</ul>"
        if same
        else ""
    )
    own = "; ".join(esc(", ".join(g)) for g in similarity.get("same_student", []))
    same += (
        f"<h3>Alike rows of one student</h3><p>Several notebooks of one student, not copying "
        f"between students (not among the pairs below): {own}.</p>"
        if own
        else ""
    )
    threshold = similarity.get("threshold", THRESHOLD)
    found, cap = similarity.get("found", len(similarity["pairs"])), similarity.get("cap", MAX_PAIRS)
    if not similarity["pairs"]:
        pairs = f"<p>No pair shares {threshold:.0%} or more of each one's graded code.</p>"
    else:
        shown = len(similarity["pairs"])
        count = (
            f"<p class='cap'>Showing the {shown} most similar of {found} pairs at {threshold:.0%} or more "
            f"(at most {cap} are listed).</p>"
            if found > shown
            else f"<p class='cap'>{found} pair{'s' if found != 1 else ''} at {threshold:.0%} or more.</p>"
        )
        pairs = count + "".join(
            f"<details><summary>{esc(p.a)} and {esc(p.b)}: {p.similarity:.0%} "
            f"({p.share_a:.0%} of {esc(p.a)}'s code is in {esc(p.b)}'s, {p.share_b:.0%} the other way; "
            f"{p.tokens} tokens)</summary><div class='pair'><div><h4>{esc(p.a)}</h4><pre>"
            f"{_marked(p.code_a, p.marks_a)}</pre></div><div><h4>{esc(p.b)}</h4><pre>"
            f"{_marked(p.code_b, p.marks_b)}</pre></div></div></details>"
            for p in similarity["pairs"]
        )
    dynamic = similarity.get("dynamic_code") or {}
    dynamic = (
        (
            "<h3>Graded code that runs code given as data</h3><p>No lab needs <code>exec</code>, "
            "<code>eval</code>, <code>compile</code> or <code>__import__</code>: read these cells. Code that "
            "could be decoded without running it is compared above in its decoded form.</p><ul>"
            + "".join(
                f"<li>{esc(name)}: {esc('; '.join(lines))}</li>"
                for name, lines in sorted(dynamic.items())
            )
            + "</ul>"
        )
        if dynamic
        else ""
    )
    common = similarity.get("common", 0)
    common = (
        f" Passages found in the code of more than half of the students ({common} fingerprints; a student "
        f"with several notebooks counts once) are the common way to write them and are left out too."
        if common
        else ""
    )
    return (
        f"<h2>Similar code (hints, not verdicts)</h2><p>Pairs whose graded cells share {threshold:.0%} or "
        f"more of each one's code (the smaller of the two shares, so a partial submission inside a complete "
        f"one is not 100%), most similar first. The code is compared as the program it is: the names it "
        f"defines count as their kind, so renaming hides nothing, while the functions and attributes it calls "
        f"count as written (<code>np.mean</code> is not <code>np.sum</code>); strings and numbers count as "
        f"their kind; parentheses, comments and statements with no effect are left out; the released lab's "
        f"own code is removed first.{common} Small exercises from one lecture look alike: read the shared "
        f"passages (marked) before concluding anything.</p>{dynamic}{same}{pairs}{identical}"
    )


def _late_rows(results, late, totals=None, lms_late=(), members=None) -> dict | None:
    """The late section's values: late (a penalty), on time, no time, and apart, those
    whose lateness was not computed (a time or an extension that cannot be read: no
    deduction, never counted on time). A group's row counts each member under their own
    lateness (``members``), named ``submission (member)``."""
    if late is None:
        return None
    policy, rows = late
    members = members or {}
    found = [  # (who, Late or None): one per student, a group's members each, in row order
        (who, x)
        for r in results
        for who, x in (
            [(f"{r.submission} ({name})", x) for name, x in members[r.submission]]
            if r.submission in members
            else [(r.submission, rows.get(r.submission))]
        )
    ]
    penalties = [x.penalty for _, x in found if x is not None and x.penalty > 0]
    return {
        "policy": policy.describe(),
        "late": len(penalties),
        "on_time": sum(x is not None and x.computed and x.penalty == 0 for _, x in found),
        "no_time": [who for who, x in found if x is None],
        "not_computed": [
            {"submission": who, "text": x.text}
            for who, x in found
            if x is not None and not x.computed
        ],
        "marked_late_no_time": sorted(lms_late),
        "penalty": _stats(penalties) if penalties else None,
        "total": _stats([totals.get(r.submission, r.score) for r in results]) if totals else None,
        "rows": [
            {"submission": who, "text": x.text, "penalty": x.penalty}
            for who, x in found
            if x is not None and x.penalty > 0
        ],
    }


def _late_section(late) -> str:
    if not late:
        return ""
    esc = html_text
    rows = _table(
        ["submission", "penalty", "lateness"],
        [[r["submission"], r["penalty"], r["text"]] for r in late["rows"]],
    )
    missing = (
        f"<p>No submission time for {len(late['no_time'])}: {esc(', '.join(late['no_time'][:20]))}"
        f"{' ...' if len(late['no_time']) > 20 else ''} (no penalty applied).</p>"
        if late["no_time"]
        else ""
    )
    unread = late.get("not_computed") or []
    if unread:
        missing += (
            f"<p><b>Lateness not computed ({len(unread)})</b>: no penalty applied, not counted "
            f"on time; <code>lablib export</code> refuses these rows unless "
            f"<code>--allow-unknown-lateness</code>.</p>"
            + _table(["submission", "why"], [[r["submission"], r["text"]] for r in unread])
        )
    marked = late.get("marked_late_no_time") or []
    if marked:
        missing += (
            f"<p><b>Marked late by the LMS but without a time ({len(marked)})</b>: "
            f"{esc(', '.join(marked[:20]))}{' ...' if len(marked) > 20 else ''}. No deduction was computed: "
            f"give their times with <code>--times</code> (student,lab,submitted_at).</p>"
        )
    total = (
        f" Totals after the penalties: mean <b>{_fmt(late['total']['mean'])}</b>, median "
        f"{_fmt(late['total']['median'])}."
        if late.get("total")
        else ""
    )
    counted = f", {len(unread)} lateness not computed" if unread else ""
    return (
        f"<h2>Late work</h2><p>Policy: {esc(late['policy'])}. {late['late']} late, {late['on_time']} on "
        f"time{counted}.{total}</p>{missing}{rows if late['rows'] else ''}"
    )


def _written_rows(results, written, totals=None, late_applied=False) -> dict | None:
    """The people's grading of the written answers: per question, how many are graded,
    still to grade or stale (the answer changed since), their mean; and the totals
    (``totals``, the gradebook's, late penalties applied; else tests + written)."""
    questions = [q for q, _ in next(iter(written.values()), [])]
    if not questions:
        return None
    rows = []
    for i, q in enumerate(questions):
        scores = [written[r.submission][i][1] for r in results if r.submission in written]
        graded = [s.score for s in scores if s.graded]
        rows.append(
            {
                "question": q.id,
                "title": q.title,
                "points": q.points,
                "graded": sum(s.graded and not s.stale for s in scores),
                "to_grade": sum(not s.graded for s in scores),
                "stale": sum(s.stale for s in scores),
                "mean": round(float(np.mean(graded)), 3) if graded else None,
            }
        )
    totals = totals or {}
    sums = [
        totals.get(r.submission, r.score + sum(s.score for _, s in written.get(r.submission, [])))
        for r in results
    ]
    return {
        "questions": rows,
        "total": _stats(sums),
        "late_applied": late_applied,
        "max_total": max([r.max_score for r in results] or [0.0])
        + sum(q.points for q in questions),
        "to_grade": sum(row["to_grade"] + row["stale"] for row in rows),
    }


def _written_section(written) -> str:
    if not written:
        return ""
    rows = _table(
        ["question", "points", "graded", "still to grade", "changed since graded", "mean", "about"],
        [
            [
                w["question"],
                w["points"],
                w["graded"],
                w["to_grade"],
                w["stale"],
                "-" if w["mean"] is None else w["mean"],
                w["title"],
            ]
            for w in written["questions"]
        ],
    )
    total = written["total"]
    late = " (late penalties applied, as in grades.csv)" if written.get("late_applied") else ""
    return (
        f"<h2>Written answers (graded by a person)</h2>{rows}<p>Totals with the written answers{late}: mean "
        f"<b>{_fmt(total['mean'])}</b> / {_fmt(written['max_total'])}, median {_fmt(total['median'])}; "
        f"{written['to_grade']} answers still to grade (<code>lablib review</code>).</p>"
    )


# --------------------------------------------------------------------------- page


def _svg(fig) -> str:
    """``fig`` as inline SVG text (no XML prolog), ids stable from run to run."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "lablib-summary", "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _bars(ax, hist: dict, color: str) -> None:
    x = np.arange(len(hist["counts"]))
    ax.bar(x, hist["counts"], color=color, width=0.85)
    step = max(1, len(x) // 10)
    ax.set_xticks(x[::step], hist["labels"][::step])
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.spines[["top", "right"]].set_visible(False)


def _plots(summary: dict) -> dict[str, str]:
    from matplotlib.figure import Figure

    plots = {}
    total = summary["total"]
    fig = Figure(figsize=(7, 2.8))
    ax = fig.subplots()
    _bars(ax, total["histogram"], "#3b6ea8")
    ax.set_xlabel("total: automatic + written - late penalty")
    ax.set_ylabel("submissions")
    ax.set_title(f"Totals (out of {total['possible']:g})", fontsize=11)
    plots["total"] = _svg(fig)

    pieces = summary["pieces"]
    if pieces:
        cols = min(3, len(pieces))
        rows = -(-len(pieces) // cols)
        fig = Figure(figsize=(3.2 * cols, 2.3 * rows))
        axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
        for ax, piece in zip(axes, pieces):
            _bars(ax, piece["histogram"], "#5a9e6f")
            ax.set_title(f"{piece['piece']} (/{piece['max_score']:g})", fontsize=10)
            ax.tick_params(labelsize=8)
        for ax in axes[len(pieces) :]:
            ax.set_visible(False)
        fig.tight_layout()
        plots["pieces"] = _svg(fig)

    tests = [t for t in summary["tests"] if t["pass_rate"] is not None]
    if tests:
        fig = Figure(figsize=(7, 0.3 * len(tests) + 1.0))
        ax = fig.subplots()
        y = np.arange(len(tests))[::-1]  # hardest at the top
        rates = [100 * t["pass_rate"] for t in tests]
        colors = ["#c0504d" if r < 50 else "#e0a030" if r < 80 else "#5a9e6f" for r in rates]
        ax.barh(y, rates, color=colors)
        ax.set_yticks(
            y,
            [f"{t['piece']}: {t['name']}" + (" (hidden)" if t["hidden"] else "") for t in tests],
            fontsize=8,
        )
        ax.set_xlim(0, 100)
        ax.set_xlabel("submissions passing (%)")
        ax.set_title("Pass rate per test, hardest first", fontsize=11)
        ax.spines[["top", "right"]].set_visible(False)
        plots["tests"] = _svg(fig)
    return plots


def _fmt(value) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def _table(header, rows) -> str:
    esc = html_text
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(_fmt(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _skipped_section(skipped) -> str:
    if not skipped:
        return ""
    esc = html_text
    rows = "".join(f"<li><code>{esc(s['path'])}</code>: {esc(s['reason'])}</li>" for s in skipped)
    return (
        f"<h2>Not graded ({len(skipped)})</h2><p>Paths among the submissions given that have no "
        f"row in the gradebook:</p><ul>{rows}</ul>"
    )


def _roster_section(roster) -> str:
    if roster is None:
        return ""
    esc = html_text
    why = roster.get("unmatched_reasons") or {}
    unmatched = "".join(
        f"<li>{esc(name)}" + (f": {esc(why[name])}" if why.get(name) else "") + "</li>"
        for name in roster["unmatched_submissions"]
    )
    missing = "".join(
        f"<li>{esc(s['name'] or s['student'])} ({esc(s['student'])}"
        f"{', ' + esc(s['section']) if s['section'] else ''})</li>"
        for s in roster["students_without_submission"]
    )
    return (
        f"<h2>Roster</h2><p>{roster['matched']} submissions matched a student.</p>"
        f"<h3>Submissions that match no student ({len(roster['unmatched_submissions'])})</h3>"
        f"<ul>{unmatched}</ul><h3>Students without a submission "
        f"({len(roster['students_without_submission'])})</h3><ul>{missing}</ul>"
    )


def _tests_table(tests) -> str:
    """The page's table of tests: pass rates, failures by kind, the commonest failure."""
    rate = lambda value: "-" if value is None else f"{100 * value:.0f}%"
    return _table(
        [
            "piece",
            "test",
            "points",
            "pass rate",
            "pass rate of those who attempted it",
            "passed",
            "failed",
            "failures by kind",
            "most common failure of those who attempted it",
            "named mistakes",
        ],
        [
            [
                t["piece"],
                t["name"] + (" (hidden)" if t["hidden"] else ""),
                t["points"],
                rate(t["pass_rate"]),
                f"{rate(t['pass_rate_attempted'])} of {t['attempted']}",
                t["passed"],
                t["failed"],
                ", ".join(f"{k}: {v}" for k, v in t["failures"].items()),
                ""
                if not t["common_failure"]
                else f"{t['common_failure']['count']}x: {t['common_failure']['message']}",
                "; ".join(f"{m['count']}x: {m['mistake']}" for m in t.get("mistakes", [])),
            ]
            for t in tests
        ],
    )


def _mistakes_table(named) -> str:
    """The page's named mistakes, most students first (the first :data:`MISTAKES_SHOWN`)."""
    if not named:
        return "<p>No check named a mistake.</p>"
    return _table(
        ["piece", "mistake (the check's diagnosis)", "students", "tests that named it"],
        [
            [m["piece"], m["mistake"], m["students"], ", ".join(m["tests"])]
            for m in named[:MISTAKES_SHOWN]
        ],
    ) + (
        f"<p>Showing {MISTAKES_SHOWN} of {len(named)} named mistakes.</p>"
        if len(named) > MISTAKES_SHOWN
        else ""
    )


def _attention_lists(needs_attention: dict) -> str:
    """The submissions needing attention, a list per status, with links to their files."""
    esc = html_text
    return (
        "".join(
            f"<h3>{esc(kind)} ({len(rows)})</h3><ul>"
            + "".join(
                f"<li>{esc(row['submission'])}: <code>{esc(row['status'])}</code>, {_fmt(row['score'])} points "
                f'(<a href="{esc(quote(row["feedback"]))}">feedback</a>, '
                f'<a href="{esc(quote(row["instructor"]))}">instructor view</a>)</li>'
                for row in rows
            )
            + "</ul>"
            for kind, rows in needs_attention.items()
        )
        or "<p>Every submission is <code>ok</code>.</p>"
    )


#: The class summary page's style sheet.
_PAGE_STYLE = """
body{font-family:sans-serif;max-width:64em;margin:2em auto;padding:0 1em;color:#222}
h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:0.6em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f2f2f2}.plot svg{max-width:100%;height:auto}.facts span{margin-right:2em}
.pair{display:flex;gap:1em}.pair>div{flex:1;min-width:0}.pair pre{overflow-x:auto;background:#f8f8f8;padding:0.5em}
mark{background:#fde68a}
"""

_PIECE_COLUMNS = {
    "piece": "piece",
    "points": "max_score",
    "mean": "mean",
    "median": "median",
    "full marks": "full_marks",
    "zero": "zero",
    "attempted": "attempted",
    "what it is": "description",
}


def _several_rows(several: list[dict]) -> str:
    """The students with several rows, each with how many and the one counted."""
    if not several:
        return ""
    said = "; ".join(
        f"{html_text(s['student'])}: {s['rows']} notebooks, the best counted "
        f"({html_text(s['best'])})"
        for s in several
    )
    return f"<p class='facts'>Students with several rows (the headline counts each once): {said}.</p>\n"


def _pieces_table(pieces: list[dict]) -> str:
    """The graded pieces' table: points, mean, median, full marks, zero, attempted."""
    return _table(list(_PIECE_COLUMNS), [[p[k] for k in _PIECE_COLUMNS.values()] for p in pieces])


def summary_html(summary: dict, similarity=None) -> str:
    """The static page of ``summary`` (a :func:`class_summary` dict): no network, inline SVG;
    ``similarity``: the pairs with their code, shown side by side."""
    esc = html_text
    plots = _plots(summary) if summary["submissions"] else {}
    score, total = summary["score"], summary["total"]
    pieces = _pieces_table(summary["pieces"])
    tests = _tests_table(summary["tests"])
    mistakes = _mistakes_table(summary.get("mistakes") or [])
    pending = (
        f"<span>{total['written_to_grade']} written answers still to grade (counted 0 here)</span>"
        if total.get("written_to_grade")
        else ""
    )
    statuses = _table(["status", "submissions"], [[k, v] for k, v in summary["statuses"].items()])
    attention = _attention_lists(summary["needs_attention"])
    slowest = _table(
        ["submission", "seconds", "status", "cached"],
        [
            [s["submission"], s["seconds"], s["status"], "yes" if s["cached"] else ""]
            for s in summary["slowest"]
        ],
    )
    empty = "" if summary["submissions"] else "<p class='empty'>No submissions were graded.</p>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(summary["title"])}: class summary</title>
<style>{_PAGE_STYLE}</style></head><body>
<h1>{esc(summary["title"])}: class summary</h1>
<p class="facts"><span><b>{summary["submissions"]}</b> submissions from <b>{summary.get("students", summary["submissions"])}</b>
students</span>
<span>total: mean <b>{_fmt(total["mean"])}</b> / {_fmt(total["possible"])}</span>
<span>median {_fmt(total["median"])}</span><span>min {_fmt(total["min"])}</span>
<span>max {_fmt(total["max"])}</span>
{pending}</p>
<p class="facts"><span>Totals are automatic + written - late penalty (at least 0) of each student's best row, as the
LMS export takes it{"" if total.get("late_applied") else "; no late policy"}.</span>
<span>Automatic points alone: mean {_fmt(score["mean"])} / {_fmt(summary["max_score"])}, median
{_fmt(score["median"])}</span></p>
{_several_rows(summary.get("several_rows") or [])}{empty}
<h2>Totals</h2>
<div class="plot">{plots.get("total", "")}</div>
<h2>Named mistakes, most students first</h2>
<p>What the checks recognised and named, among the students who attempted the piece; a student counts once per
mistake.</p>
{mistakes}
<h2>Graded pieces</h2>
{pieces}
<div class="plot">{plots.get("pieces", "")}</div>
<h2>Tests, most failed first</h2>
<p>A piece left as the blank lab's stub, a missing graded cell or an unreadable notebook counts as
<i>not attempted</i>, never as an error or a failure of the piece.</p>
<div class="plot">{plots.get("tests", "")}</div>
{tests}
<h2>Statuses</h2>
{statuses}
<h2>Submissions needing attention</h2>
{attention}
{_written_section(summary.get("written"))}
{_late_section(summary.get("late"))}
{_similarity_section(similarity)}
{_roster_section(summary["roster"])}
{_skipped_section(summary.get("skipped", []))}
<h2>Slowest submissions</h2>
{slowest}
</body></html>
"""


def write_summary(out_dir, summary: dict, similarity=None) -> dict[str, pathlib.Path]:
    """Write ``summary.json`` and ``summary.html`` into ``out_dir``.

    Args:
        out_dir: the folder (made if missing).
        summary: what :func:`class_summary` returned.
        similarity: the similarity report given to :func:`class_summary`, for the page's
            similar pairs' code side by side (None: no such section).

    Returns:
        ``{"summary_json": path, "summary_html": path}``.
    """
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "summary.json", json.dumps(summary, indent=1) + "\n")
    atomic_write(out / "summary.html", summary_html(summary, similarity))
    return {"summary_json": out / "summary.json", "summary_html": out / "summary.html"}


class ClassSummary:
    """Writes ``summary.json`` and ``summary.html`` (the class at a glance)."""

    name = "class summary"

    def write(self, out_dir: pathlib.Path, book: Gradebook) -> list[pathlib.Path]:
        rows = {r.submission: book.row(r) for r in book.results}  # each computed once
        written = {name: row.written for name, row in rows.items()} if book.questions else None
        late = (
            None
            if book.late_policy is None
            else (book.late_policy, {name: row.late for name, row in rows.items()})
        )
        totals = {name: row.total for name, row in rows.items()}
        lms_late = [r.submission for r in book.results if book.marked_late_without_time(r)]
        members = {
            name: [(str(m.get("name") or m.get("key") or "?"), x) for m, x in row.members]
            for name, row in rows.items()
            if book.late_policy is not None and row.members
        }
        summary = class_summary(
            book.lab,
            book.results,
            book.roster,
            book.skipped,
            written,
            late,
            book.similarity,
            totals,
            lms_late,
            members,
        )
        return list(write_summary(out_dir, summary, book.similarity).values())
