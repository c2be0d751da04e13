"""Written answers graded by people: the store, the rendering, the review server and page,
and the gradebook they feed (a lab of its own, no TensorFlow: these run in the unit tier).

The page itself is driven in headless Chromium (Playwright, with the machine's Chromium):
a rubric item clicked and keyed, a reload, a second browser, an item edited.
"""

from __future__ import annotations

import csv
import http.client
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import threading

import pytest

from lablib.grading import report
from lablib.grading.gradebook import Gradebook
from lablib.grading.grade import rewrite_reports
from lablib.grading.results import PieceScore, Status, SubmissionResult, WrittenAnswer
from lablib.grading.review import render
from lablib.grading.review.render import render_answer, render_markdown
from lablib.grading.review.server import ReviewApp, make_server
from lablib.grading.review.store import DB_NAME, ReviewError, ReviewStore
from lablib.grading.spec import LabSpec
from review_fixtures import written_lab

QUESTIONS = ("why", "how")


def _results(n: int = 6) -> list[SubmissionResult]:
    results = []
    for k in range(n):
        answers = {
            "why": WrittenAnswer(f"Because $x_{k}^2$ grows, student {k}." if k % 3 else "", "tag"),
            "how": WrittenAnswer(f"Fix {k}: <script>alert({k})</script>", "marker"),
        }
        results.append(
            SubmissionResult(
                f"student{k:02d}",
                f"/class/student{k:02d}.ipynb",
                Status(),
                5.0,
                10.0,
                {"f": PieceScore(5.0, 10.0)},
                [],
                answers=answers,
            )
        )
    return results


@pytest.fixture
def graded(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    report.write_reports(out, lab, _results())
    return lab, out


# --------------------------------------------------------------------------- store


def test_store_scores_items_adjustments_and_keeps_them_in_bounds(graded):
    lab, out = graded
    store = ReviewStore(out / DB_NAME, lab)
    why = {r.comment: r.id for r in store.rubric("why")}
    store.apply(["student01"], "why", {"items": [why["Names the cause."], why["Gives numbers."]]})
    store.apply(
        ["student02"],
        "why",
        {"items": [why["Names the cause."]], "adjustment": 5, "comment": "good"},
    )
    store.apply(["student03"], "why", {"items": [why["No answer."]]})
    scores = store.person_scores(["student01", "student02", "student03", "student04"])
    assert scores["student01"]["why"].score == 4 and scores["student01"]["why"].graded
    assert scores["student02"]["why"].score == 4, (
        "items + adjustment are capped at the question's points"
    )
    assert scores["student02"]["why"].comment == "good"
    assert scores["student03"]["why"].graded and scores["student03"]["why"].score == 0
    assert not scores["student04"]["why"].graded and scores["student04"]["why"].pending
    how = store.rubric("how")
    store.apply(["student01"], "how", {"items": [next(r.id for r in how if r.points < 0)]})
    assert store.person_scores(["student01"])["student01"]["how"].score == 0, "never below 0"


def test_editing_an_item_rescores_every_answer_it_is_on(graded):
    lab, out = graded
    store = ReviewStore(out / DB_NAME, lab)
    cause = store.rubric("why")[0]
    store.apply(["student01", "student02", "student04"], "why", {"add": cause.id})
    store.save_item("why", 1.5, "Names the cause (half).", item=cause.id)
    scores = store.person_scores(["student01", "student02", "student04"])
    assert [scores[s]["why"].score for s in scores] == [1.5, 1.5, 1.5]
    assert scores["student01"]["why"].items == ((1.5, "Names the cause (half)."),)
    assert next(r for r in store.rubric("why") if r.id == cause.id).uses == 3


def test_store_refuses_bad_changes_and_loses_nothing(graded):
    lab, out = graded
    store = ReviewStore(out / DB_NAME, lab)
    cause = store.rubric("why")[0]
    store.apply(["student01"], "why", {"add": cause.id})
    with pytest.raises(ReviewError, match="applied to 1 answer"):
        store.delete_item("why", cause.id)
    with pytest.raises(ReviewError, match="no written question 'nope'"):
        store.apply(["student01"], "nope", {"add": cause.id})
    with pytest.raises(ReviewError, match="not an item of question 'how'"):
        store.apply(["student01"], "how", {"add": cause.id})
    with pytest.raises(ReviewError, match="number of points"):
        store.save_item("why", "lots", "x")
    with pytest.raises(ReviewError, match="needs a comment"):
        store.save_item("why", 1, "  ")
    # a failed change in the middle of a bulk apply changes none of the answers
    with pytest.raises(ReviewError):
        store.apply(["student02", "student03"], "why", {"add": cause.id, "adjustment": "x"})
    scores = store.person_scores(["student01", "student02", "student03"])
    assert scores["student01"]["why"].score == 2 and not scores["student02"]["why"].graded
    assert not scores["student03"]["why"].graded
    with pytest.raises(ReviewError, match="reviews of lab 'lab9_written'"):
        ReviewStore(out / DB_NAME, LabSpec("other"))


def test_a_grade_of_another_text_is_stale_until_graded_again(graded):
    lab, out = graded
    store = ReviewStore(out / DB_NAME, lab)
    results = {r.submission: r for r in _results()}
    old = results["student01"].answers["why"]
    store.set_items("student01", "why", [store.rubric("why")[0].id], digest=old.digest)
    results["student01"].answers["why"] = WrittenAnswer("A new text after a resubmission.", "tag")
    scores, _ = store.for_gradebook(results.values())
    assert scores["student01"]["why"].stale and scores["student01"]["why"].score == 2, (
        "kept, flagged"
    )
    store.set_items(
        "student01",
        "why",
        [store.rubric("why")[0].id],
        digest=results["student01"].answers["why"].digest,
    )
    assert not store.for_gradebook(results.values())[0]["student01"]["why"].stale


def test_two_graders_at_once_lose_nothing(graded):
    lab, out = graded
    first, second = ReviewStore(out / DB_NAME, lab), ReviewStore(out / DB_NAME, lab)
    why, how = first.rubric("why")[0].id, second.rubric("how")[0].id
    names = [r.submission for r in _results()]

    def grade(store, question, item):
        for _ in range(10):
            for name in names:
                store.apply([name], question, {"items": [item]}, grader=question)

    threads = [
        threading.Thread(target=grade, args=(first, "why", why)),
        threading.Thread(target=grade, args=(second, "how", how)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    scores = first.person_scores(names)
    assert all(scores[n]["why"].score == 2 and scores[n]["how"].score == 3 for n in names)
    assert len(first.events(limit=10_000)) == 2 * 10 * len(names) + 0
    with sqlite3.connect(out / DB_NAME) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --------------------------------------------------------------------------- rendering


def test_markdown_renders_math_and_never_runs_student_html():
    html = render_markdown(
        "**Bold** and $\\frac{a}{b}$\n\n$$x^2$$\n\n<script>alert(1)</script>"
        "<img src=x onerror=alert(1)> [x](javascript:alert(1)) $\\notamacro{$"
    )
    assert "<strong>Bold</strong>" in html
    assert html.count("<math") == 2 and "<mfrac>" in html
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in html
    assert 'class="tex"' in html, "a formula the converter cannot read is shown as typed"


#: Formulas whose macros grow: one without end (1.4 GB at 70 MB/s in the red team's run),
#: one of 414 characters that made 814 KB of MathML in 3 s (8 copies a level, 5 levels).
MACRO_BOMBS = {
    "self": r"Easy: $\def\a#1{\a{#1#1}}\a{x}$",
    "newcommand": r"$\newcommand{\a}[1]{\a{#1#1}}\a{x}$",
    "nested": "$\\newcommand{\\zz}{x}"
    + "".join(
        f"\\newcommand{{\\zz{'q' * (i + 1)}}}{{{('{' + chr(92) + 'zz' + 'q' * i + '}') * 8}}}"
        for i in range(5)
    )
    + "\\zzqqqqq$",
    "environment": r"$\newenvironment{foo}{\begin{foo}}{}\begin{foo}x\end{foo}$",
    "in hbox": r"\begin{equation}\hbox{$\def\a#1{\a{#1#1}}\a{x}$}\end{equation}",
    "after verb": r"$\verb\x\\def\a#1{\a{#1#1}}\a{x}$",
}

_RENDER_CHILD = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))
from lablib.grading.review.render import render_answer
out = {}
for name, text in json.loads(sys.stdin.read()).items():
    start = time.monotonic()
    html = render_answer(text, None)
    out[name] = [time.monotonic() - start, html]
print(json.dumps(out))
"""


@pytest.mark.serial  # timed: run alone (.ci/run's serial pass)
def test_a_formula_that_defines_macros_is_shown_as_typed():
    """latex2mathml expands \\def, \\newcommand, \\newenvironment with no bound but a
    depth of 100: each is shown as typed, never expanded (in a process of its own,
    its memory bounded: the first grew without end)."""
    run = subprocess.run(
        [sys.executable, "-c", _RENDER_CHILD],
        input=json.dumps(MACRO_BOMBS),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    for name, (seconds, html) in json.loads(run.stdout).items():
        assert seconds < 1 and len(html) < 2 * len(MACRO_BOMBS[name]) + 300, (name, seconds)
        assert "<math" not in html and 'class="tex"' in html, (name, html)
        assert "it defines macros" in html, (name, html)
    mixed = render_markdown(
        r"Easy: $\def\a{b}\a$, then $x^2$ and $a \\ def$, $\mathrm{undefined}$."
    )
    assert mixed.count("<math") == 3 and mixed.count('class="tex"') == 1, mixed


def test_formula_lengths_and_sizes_stay_within_bounds():
    """\\rule{1pt}{2000000pt} printed 2,664 pages, \\raise{728pt} drew over the cover:
    each length within 10 em up or down and 40 em across, a part moved up or down within
    1 em, sizes within 2.5 times the text's, no box given less room than its content
    (zero or negative widths, heights and depths: \\rlap, \\smash, a negative kern);
    honest ones kept as written, what is no length dropped."""

    def attrs(tex: str) -> list[dict]:
        found = re.findall(r"<(m\w+)((?: [a-z]+=\"[^\"]*\")*)>", render_markdown(f"${tex}$"))
        return [
            dict(re.findall(r'([a-z]+)="([^"]*)"', a), tag=t) for t, a in found if a and t != "math"
        ]

    assert attrs(r"\rule{1pt}{2000000pt}") == [{"tag": "mspace", "width": "1pt", "height": "10em"}]
    raised = attrs(r"\hspace{48pt}\smash{\raise{728pt}{\text{S3}}}")
    assert raised == [
        {"tag": "mspace", "width": "48pt"},
        {"tag": "mpadded", "voffset": "1em", "height": "+1em"},
    ], raised
    assert attrs(r"\lower{200cm}{x}")[0]["voffset"] == "-1em"
    assert attrs(r"\hspace{-3000cm}x") == []
    assert attrs(r"\hspace{1e9pt}x") == [] and attrs(r"\rule{1pt}{x}") == [
        {"tag": "mspace", "width": "1pt"}
    ]
    sizes = [float(a["mathsize"][:-2]) for a in attrs(r"\Huge{\Huge{\Huge{\Huge{x}}}}")]
    scale = 1.0
    for size in sizes:
        scale *= size
    assert sizes[0] == 2.49 and 2.49 <= scale <= 2.5, sizes
    tiny = [float(a["mathsize"][:-2]) for a in attrs(r"\tiny{\tiny{\tiny{\tiny{x}}}}")]
    assert 0.25 <= tiny[0] * tiny[1] * tiny[2] * tiny[3] < 0.26, tiny
    # what honest answers write is kept as written
    assert attrs(r"\rule{10cm}{0.4pt}") == [{"tag": "mspace", "width": "10cm", "height": "0.4pt"}]
    assert attrs(r"\raise{0.5ex}{x}")[0]["voffset"] == "0.5ex"
    assert attrs(r"\Huge x")[0]["mathsize"] == "2.49em"
    assert attrs(r"a\quad b\!c")[0]["width"] == "1em"
    assert attrs(r"\clap{x}") == [] and attrs(r"a\!b") == []
    small = attrs(r"\begin{smallmatrix}a&b\\c&d\end{smallmatrix}\big(\Bigg(")
    assert {"tag": "mtable", "rowspacing": "0.1em", "columnspacing": "0.2778em"} in small
    assert {"tag": "mo", "minsize": "2.470em", "maxsize": "2.470em"} in small


def test_a_formula_that_draws_too_much_is_shown_as_typed(monkeypatch):
    """A formula's MathML is at most 40 times its TeX, plus 1,000 characters (200,000 at
    most): past it, the formula is shown as typed, and says why."""
    cases = r"\begin{cases}" + r"a&b\\" * 200 + r"\end{cases}"
    render._math.cache_clear()
    try:
        assert "<math" in render_answer(f"$${cases}$$")  # 18 characters of MathML a character
        monkeypatch.setattr(render, "MATHML_PER_TEX_CHAR", 5)
        render._math.cache_clear()
        shown = render_answer(f"Cases: $${cases}$$ and $x$.")
        assert (
            shown.count("<math") == 1
            and 'class="tex" title="formula shown as typed: too large' in shown
        )
        monkeypatch.setattr(render, "MAX_MATHML_CHARS", 40)
        render._math.cache_clear()
        assert "<math" not in render_answer("$x$") and "too large to draw" in render_answer("$x$")
    finally:
        render._math.cache_clear()


# --------------------------------------------------------------------------- gradebook


def test_gradebook_adds_the_peoples_points_everywhere(graded):
    lab, out = graded
    store = ReviewStore(out / DB_NAME, lab)
    why = store.rubric("why")
    store.apply(
        ["student01"], "why", {"items": [why[0].id, why[1].id], "comment": "Clear & <right>."}
    )
    store.apply(["student02"], "how", {"adjustment": 1.5})
    rewrite_reports(out, lab=lab)
    rows = {
        row["submission"]: row for row in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))
    }
    assert rows["student01"]["written: why"] == "4" and rows["student01"]["written: how"] == ""
    assert rows["student01"]["total"] == "9" and rows["student01"]["max_total"] == "17"
    assert rows["student01"]["ungraded"] == "1" and rows["student00"]["ungraded"] == "2"
    assert rows["student02"]["total"] == "6.5"
    data = json.loads((out / "grades.json").read_text())
    entry = next(e for e in data["submissions"] if e["submission"] == "student01")
    assert entry["written"]["why"]["items"][0] == {"points": 2.0, "comment": "Names the cause."}
    assert data["reviews_through"] == store.last_change()
    feedback = (out / "feedback" / "student01.md").read_text()
    assert "**Total: 9 / 17**" in feedback and "Names the cause." in feedback
    assert "**how** (how to fix it): not graded yet" in feedback
    assert "Clear &amp; &lt;right&gt;." in (out / "feedback" / "student01.html").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert (
        summary["written"]["questions"][0]["graded"] == 1 and summary["written"]["to_grade"] == 10
    )
    assert "Written answers (graded by a person)" in (out / "summary.html").read_text()
    results = report.gradescope.to_gradescope_json(
        entry_result := next(
            r for r in rewrite_reports(out, lab=lab) if r.submission == "student01"
        ),
        written=Gradebook.of(
            lab, [entry_result], person=store.person_scores(["student01"])
        ).written(entry_result),
    )
    assert results["score"] == 9 and "how (3 points)" in results["output"]


def test_export_refuses_a_gradebook_older_than_its_reviews(graded, tmp_path):
    from lablib.grading.export import ExportError, export
    from lablib.grading.gradebook.roster import Roster

    lab, out = graded
    roster_path = tmp_path / "roster.csv"
    roster_path.write_text(
        "student_id,name,email,section,submission\n"
        + "".join(f"{k},S {k},s{k}@x.edu,A,student{k:02d}\n" for k in range(6))
    )
    store = ReviewStore(out / DB_NAME, lab)
    store.apply(["student03"], "how", {"items": [store.rubric("how")[0].id]})
    with pytest.raises(ExportError, match="changed 1 time"):
        export("canvas", [out], Roster.load(roster_path), tmp_path / "c.csv")
    rewrite_reports(out, lab=lab)
    with pytest.raises(
        ExportError, match="written answers never graded"
    ):  # most answers are still to grade
        export("canvas", [out], Roster.load(roster_path), tmp_path / "c.csv", pieces=True)
    export(
        "canvas",
        [out],
        Roster.load(roster_path),
        tmp_path / "c.csv",
        pieces=True,
        allow_ungraded=True,
    )
    rows = list(csv.reader(open(tmp_path / "c.csv", encoding="utf-8")))
    header, possible, *students = rows
    assert possible[header.index(lab.title)] == "17"
    three = next(r for r in students if r[0] == "S 3")
    assert (
        three[header.index(lab.title)] == "8"
        and three[header.index(f"{lab.title}: written how")] == "3"
    )


# --------------------------------------------------------------------------- server


@pytest.fixture
def server(graded):
    lab, out = graded
    app = ReviewApp(
        out,
        lab,
        grader="tester",
        on_write=lambda: f"wrote {len(rewrite_reports(out, lab=lab))} rows",
    )
    srv = make_server(app, port=0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv, app, lab, out
    srv.shutdown()
    srv.server_close()


def _request(srv, method, path, body=None, headers=None, token=True):
    """One request to the review server, with its token unless ``token`` is False."""
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    data = None if body is None else json.dumps(body).encode()
    auth = {"Authorization": f"Bearer {srv.token}"} if token else {}
    conn.request(
        method,
        path,
        body=data,
        headers={"Content-Type": "application/json", **auth, **(headers or {})},
    )
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response.status, json.loads(payload) if payload.startswith(b"{") else payload


def test_the_page_sees_no_names_and_answers_are_shuffled_per_question(server):
    srv, app, lab, out = server
    status, why = _request(srv, "GET", "/api/question/why")
    assert status == 200 and len(why["answers"]) == 6
    text = json.dumps(why)
    assert "student0" not in text.replace("student 0", "").replace("student 1", ""), (
        "no names reach the page"
    )
    _, how = _request(srv, "GET", "/api/question/how")
    assert [a["token"] for a in why["answers"]] != [a["token"] for a in how["answers"]]
    # the order: the page's answers, named through the server's own tokens, are in the
    # keyed shuffle of each question; with a fixed key (the database's secret, random in
    # use) the two questions' orders are known to differ from each other and from the names'
    app.store.secret = "a fixed key for this test"
    orders = {}
    for q in ("why", "how"):
        _, page = _request(srv, "GET", f"/api/question/{q}")
        orders[q] = app._by_token(q, [a["token"] for a in page["answers"]])
        assert orders[q] == app._ordered(q)
    names = sorted(r.submission for r in _results())
    assert orders["why"] != names and orders["how"] != names and orders["why"] != orders["how"], (
        orders
    )
    _, how = _request(srv, "GET", "/api/question/how")  # the tokens under the fixed key
    assert "html" not in how["answers"][0] and "Fix" not in json.dumps(how), (
        "the list carries no answer text"
    )
    status, texts = _request(srv, "GET", f"/api/texts/how?answers={how['answers'][0]['token']}")
    assert status == 200 and "&lt;script&gt;" in texts["answers"][0]["html"]
    assert texts["answers"][0]["digest"] == how["answers"][0]["digest"]
    assert sum(a["empty"] for a in why["answers"]) == 2


def test_the_server_refuses_other_hosts_sites_and_bad_changes(server):
    srv, app, lab, out = server
    assert _request(srv, "GET", "/api/questions", headers={"Host": "evil.example:80"})[0] == 403
    assert (
        _request(
            srv, "POST", "/api/change", {"action": "write"}, {"Origin": "http://evil.example"}
        )[0]
        == 403
    )
    assert (
        _request(srv, "POST", "/api/change", {"action": "write"}, {"Content-Type": "text/plain"})[0]
        == 415
    )
    status, body = _request(
        srv, "POST", "/api/change", {"action": "grade", "question": "why", "answers": ["nope"]}
    )
    assert status == 400 and "reload the page" in body["error"]
    status, body = _request(srv, "POST", "/api/change", {"action": "explode", "question": "why"})
    assert status == 400 and "Unknown action" in body["error"]
    assert _request(srv, "GET", "/api/question/../../etc")[0] == 404
    status, body = _request(srv, "POST", "/api/change", {"action": "write"})
    assert status == 200 and body["message"] == "wrote 6 rows"


def test_review_page_in_headless_chromium(server, tmp_path):
    """Click a rubric item, key another, reload: the scores are there; a second browser
    sees them; an edited item re-scores; a bulk apply grades every answer selected."""
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail(
            "No Chromium on PATH: the review page is tested in a real headless browser. "
            "Install Debian's chromium package (`bash .ci/run setup` does)."
        )
    srv, app, lab, out = server
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                "--disable-sync",
            ],
        )
        try:
            expect = playwright.expect
            page = browser.new_page()
            errors = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(srv.url)
            page.wait_for_selector(".answer.focused")
            assert page.locator(".answer").count() == 6
            assert page.locator("#questions button").count() == 2
            expect(page.locator(".answer[data-text]")).to_have_count(6)  # every text drawn
            assert page.locator(".answer math").count() >= 1, "formulas are drawn as MathML"
            first = page.locator(".answer").nth(0)
            token = first.get_attribute("data-token")
            page.locator("#items li button.apply").nth(0).click()  # +2 "Names the cause."
            page.wait_for_selector(f".answer[data-token='{token}'] .badge.done")
            page.keyboard.press("2")  # +2 "Gives numbers." on the focused answer
            expect(page.locator(f".answer[data-token='{token}'] .badge")).to_have_text("4 / 4")
            page.keyboard.press("j")
            second = page.locator(".answer.focused").get_attribute("data-token")
            assert second != token
            page.locator(".answer.focused textarea").fill("See the lecture's slide 12.")
            page.keyboard.press("Tab")  # leaving the box saves the comment
            expect(page.locator("#status")).to_have_text("saved")
            page.reload()
            page.wait_for_selector(f".answer[data-token='{token}'] .badge.done")
            assert page.locator(f".answer[data-token='{token}'] .badge").text_content() == "4 / 4"
            assert (
                page.locator(f".answer[data-token='{second}'] textarea").input_value()
                == "See the lecture's slide 12."
            )
            other = browser.new_context().new_page()  # a second grader
            other.goto(srv.url + "#why")
            other.wait_for_selector(f".answer[data-token='{token}'] .badge.done")
            assert other.locator(f".answer[data-token='{token}'] .badge").text_content() == "4 / 4"
            # the second grader selects every answer still to grade and applies "No answer." (key 3)
            other.keyboard.press("u")
            other.keyboard.press("3")
            expect(other.locator(".badge.todo")).to_have_count(0)
            # the first grader edits item 1's points: every answer with it is re-scored
            replies = iter(["1", None])  # the points, then the comment as it was
            page.on("dialog", lambda d: d.accept(next(replies) or d.default_value))
            page.locator("#items li .edit").nth(0).click()
            expect(page.locator(f".answer[data-token='{token}'] .badge")).to_have_text("3 / 4")
            expect(page.locator("#progress-text")).to_have_text("6/6 graded")
            page.screenshot(path=str(tmp_path / "review.png"), full_page=False)
            assert not errors, errors
        finally:
            browser.close()
    scores = ReviewStore(out / DB_NAME, lab).person_scores([r.submission for r in _results()])
    graded = [s["why"] for s in scores.values()]
    assert all(s.graded for s in graded) and sorted(s.score for s in graded) == [0, 0, 0, 0, 0, 3]
    assert sum(s.comment == "See the lecture's slide 12." for s in graded) == 1
