"""Who may grade, and grades bound to what was seen (issue 29, items 3 and 4).

The token: the API refuses a request without this run's token, and the log names the
grader the server was started for whatever a request says. The races: a regrade between
the page's read and the grader's click, an answer graded while its notebook could not be
read and then read, two graders on one rubric item and on one answer, in the API and in
the page (headless Chromium).
"""

from __future__ import annotations

import re
import signal
import stat
import subprocess
import sys

import pytest

from lablib.grading.grade import rewrite_reports
from lablib.grading.review.store import DB_NAME, MISSING_DIGEST, ReviewStore
from review_fixtures import chromium, request, running, write_class, written_lab

CLASS = {
    f"student{k:02d}": {"why": f"Because $x_{k}^2$ grows, student {k}.", "how": f"Fix {k}."}
    for k in range(6)
}


def _read(server, question="why"):
    """The page's first reads: the question, then the texts of its answers."""
    status, page = request(server, "GET", f"/api/question/{question}")
    assert status == 200, page
    tokens = ",".join(a["token"] for a in page["answers"])
    status, texts = request(server, "GET", f"/api/texts/{question}?answers={tokens}")
    assert status == 200, texts
    return page, {t["token"]: t for t in texts["answers"]}


def _grade(server, page, texts, token, headers=None, **change):
    """A grade as the page sends it: the digest shown and the version read."""
    answer = next(a for a in page["answers"] if a["token"] == token)
    body = {
        "action": "grade",
        "question": page["id"],
        "answers": [token],
        "seen": {token: texts[token]["digest"]},
        "versions": {token: answer["version"]},
        **change,
    }
    return request(server, "POST", "/api/change", body, headers=headers)


def _name_of(app, question, token):
    return app._by_token(question, [token])[0]


# --------------------------------------------------------------------------- the token


def test_the_api_refuses_requests_without_this_runs_token(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    with running(out, lab) as (server, app):
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]{43}", server.url), (
            server.url
        )
        status, body = request(server, "GET", "/api/questions", token=False)
        assert status == 401 and "?token=" in body["error"], body
        status, body = request(server, "GET", "/api/question/why", token="x" * 43)
        assert status == 403 and "not this review server's" in body["error"], body
        status, body = request(
            server, "GET", "/api/question/why", headers={"Authorization": "Basic abc"}, token=False
        )
        assert status == 401
        page, texts = _read(server)
        token = page["answers"][0]["token"]
        item = page["rubric"][0]["id"]
        for auth in (False, "y" * 43):
            status, body = request(
                server,
                "POST",
                "/api/change",
                {
                    "action": "grade",
                    "question": "why",
                    "answers": [token],
                    "add": item,
                    "seen": {token: texts[token]["digest"]},
                    "versions": {token: 0},
                },
                token=auth,
            )
            assert status in (401, 403), (status, body)
            status, _ = request(server, "GET", f"/api/texts/why?answers={token}", token=auth)
            assert status in (401, 403)
        assert app.store.events() == [], "a refused request changed nothing"
        status, body = request(server, "GET", "/", token=False)
        assert status == 200 and b"student0" not in body and b"Because" not in body, (
            "the page itself holds no data"
        )
        status, _ = _grade(server, page, texts, token, add=item)
        assert status == 200
        assert len(app.store.events()) == 1
    with running(out, lab) as (other, _):
        assert other.token != server.token, "each run makes its own token"


def test_the_log_names_the_servers_grader_whatever_the_request_says(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    with running(out, lab, grader="ta-anna") as (server, app):
        page, texts = _read(server)
        token = page["answers"][0]["token"]
        forged = {
            "X-Grader": "mallory",
            "From": "mallory@example.org",
            "X-Forwarded-User": "mallory",
        }
        status, body = _grade(
            server, page, texts, token, add=page["rubric"][0]["id"], grader="mallory"
        )
        assert status == 400 and "'grader'" in body["error"], (
            "a change naming a grader is refused whole"
        )
        status, body = request(
            server,
            "POST",
            "/api/change",
            {
                "action": "item",
                "question": "why",
                "points": 1,
                "comment": "Half the cause.",
                "grader": "mallory",
            },
        )
        assert status == 400 and app.store.events() == []
        status, _ = _grade(server, page, texts, token, add=page["rubric"][0]["id"], headers=forged)
        assert status == 200
        status, _ = request(
            server,
            "POST",
            "/api/change",
            {"action": "item", "question": "why", "points": 1, "comment": "Half the cause."},
            headers=forged,
        )
        assert status == 200
        events = app.store.events()
        assert [e["grader"] for e in events] == ["ta-anna", "ta-anna"], events
        status, body = request(server, "GET", "/api/questions")
        assert body["grader"] == "ta-anna"
        name = _name_of(app, "why", token)
    assert ReviewStore(out / DB_NAME, lab).person_scores([name])[name]["why"].grader == "ta-anna"


@pytest.mark.integration
def test_lablib_review_prints_an_address_with_its_token(tmp_path):
    """The command itself (a child process): the address it prints carries the token the
    API asks for (each run's is new: make_server's, tested above)."""
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    spec = tmp_path / "lab9_written.py"
    spec.write_text(
        "from lablib.grading.spec import LabSpec\n"
        "lab = LabSpec('lab9_written', 'Lab 9: written answers')\n"
        "lab.piece('f', objects=['f'])\n"
        "lab.answer('why', points=4, title='why it works', rubric=[(2, 'Names the cause.')])\n"
        "lab.answer('how', points=3, title='how to fix it', rubric=[(3, 'A fix that works.')])\n"
    )
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("Why does it work?"),
        nbformat.v4.new_markdown_cell(
            "<!-- BEGIN ANSWER why -->\nYour answer.\n<!-- END ANSWER why -->"
        ),
    ]
    nbformat.write(notebook, str(tmp_path / "lab9_written.ipynb"))
    review = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lablib.cli",
            "review",
            str(spec),
            str(out),
            "--no-browser",
            "--grader",
            "ta-cli",
            "--lab-notebook",
            str(tmp_path / "lab9_written.ipynb"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = review.stdout.readline()
        match = re.search(r"open (http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{43}))\s", line)
        assert match, (line, review.communicate(timeout=60) if not line else "")

        class Server:  # what request() needs of a server
            server_address = ("127.0.0.1", int(match.group(2)))
            token = match.group(3)

        assert request(Server, "GET", "/api/questions", token=False)[0] == 401
        status, body = request(Server, "GET", "/api/questions")
        assert status == 200 and body["grader"] == "ta-cli"
    finally:
        review.send_signal(signal.SIGTERM)
        stdout, stderr = review.communicate(timeout=120)
    assert review.returncode == 0 and "written answers still to grade" in stdout, (stdout, stderr)


def test_the_browser_is_started_without_the_token_on_its_command_line(tmp_path):
    from lablib.cli import _review_opener

    url = "http://127.0.0.1:8765/?token=" + "t" * 43
    opener = _review_opener(url)
    try:
        assert "token" not in str(opener)
        assert stat.S_IMODE(opener.stat().st_mode) == 0o600
        assert stat.S_IMODE(opener.parent.stat().st_mode) == 0o700
        assert f'url={url}"' in opener.read_text(encoding="utf-8")
    finally:
        opener.unlink()
        opener.parent.rmdir()


# --------------------------------------------------------------------------- the races


def test_a_regrade_between_the_read_and_the_click_leaves_a_stale_grade(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    with running(out, lab) as (server, app):
        page, texts = _read(server)
        token = page["answers"][0]["token"]
        name = _name_of(app, "why", token)
        shown = texts[token]["digest"]
        changed = dict(
            CLASS, **{name: {"why": "A resubmitted, different answer.", "how": CLASS[name]["how"]}}
        )
        write_class(out, lab, changed)  # the regrade lands now
        status, body = _grade(server, page, texts, token, add=page["rubric"][0]["id"])
        assert status == 200, body
        (answer,) = body["answers"]
        assert answer["stale"] and answer["graded"] and answer["digest"] != shown
        assert "changed since the page showed" in body["message"] and body["changed_text"] == [
            token
        ]
        status, questions = request(server, "GET", "/api/questions")
        assert next(q for q in questions["questions"] if q["id"] == "why")["stale"] == 1
        rows = rewrite_reports(out, lab=lab)
    scores, _ = ReviewStore(out / DB_NAME, lab).for_gradebook(rows)
    assert scores[name]["why"].stale and scores[name]["why"].pending, (
        "graded for the text seen, flagged"
    )
    # the same click after the page showed the new text: not stale
    with running(out, lab) as (server, app):
        page, texts = _read(server)
        status, body = _grade(server, page, texts, token, add=page["rubric"][1]["id"])
        assert status == 200 and not body["answers"][0]["stale"] and body["message"] == "saved"


def test_an_unreadable_notebook_is_kept_out_of_the_answers_to_grade(tmp_path):
    """Issue 30 item 6: a notebook that could not be read is counted and listed apart, never
    graded as an answer; once read at a regrade it is an answer to grade like the others.
    A grade the store holds for it from before (given to no text) is stale once there is one."""
    lab = written_lab()
    out = tmp_path / "out"
    unreadable = dict(
        CLASS, student03={}
    )  # no record of any answer: the notebook could not be read
    write_class(out, lab, unreadable)
    ReviewStore(out / DB_NAME, lab).apply(
        ["student03"],
        "why",
        {"adjustment": 1},
        digest={"student03": MISSING_DIGEST},
        grader="older page",
    )
    with running(out, lab) as (server, app):
        page, texts = _read(server)
        assert len(page["answers"]) == len(CLASS) - 1 and "student03" not in [
            _name_of(app, "why", t) for t in texts
        ]
        assert page["unreadable"] == [{"number": 1, "reason": page["unreadable"][0]["reason"]}]
        assert "grades.json holds no record" in page["unreadable"][0]["reason"]
        status, info = request(server, "GET", "/api/questions")
        why = next(q for q in info["questions"] if q["id"] == "why")
        assert (why["answers"], why["unreadable"], why["graded"]) == (len(CLASS) - 1, 1, 0)
        hidden = app._token("why", "student03")  # the answer's token, were it shown: refused
        no_answer = next(r["id"] for r in page["rubric"] if r["comment"] == "No answer.")
        body = {
            "action": "grade",
            "question": "why",
            "answers": [hidden],
            "seen": {hidden: MISSING_DIGEST},
            "versions": {hidden: 0},
            "add": no_answer,
        }
        status, refused = request(server, "POST", "/api/change", body)
        assert status == 400 and "Unknown answer" in refused["error"], refused
        write_class(out, lab, CLASS)  # the notebook is read at the next grading: it has an answer
        status, changes = request(
            server,
            "GET",
            f"/api/question/why/changes?since={page['version']}&generation={page['generation']}",
        )
        assert changes == {"reload": True, "generation": page["generation"] + 1}
        page, texts = _read(server)
        assert len(page["answers"]) == len(CLASS) and page["unreadable"] == []
        answer = next(a for a in page["answers"] if _name_of(app, "why", a["token"]) == "student03")
        assert answer["stale"] and not answer["empty"] and not answer["diff"], (
            "no text was graded: no diff"
        )
        rows = rewrite_reports(out, lab=lab)
    scores, _ = ReviewStore(out / DB_NAME, lab).for_gradebook(rows)
    assert scores["student03"]["why"].stale, "a grade given while unreadable is looked at again"


def test_two_graders_on_one_rubric_item_never_undo_each_other(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    with running(out, lab, grader="ta-a") as (a, _), running(out, lab, grader="ta-b") as (b, app_b):
        page_a, _ = _read(a)
        page_b, _ = _read(b)
        item_a = page_a["rubric"][0]
        item_b = page_b["rubric"][0]
        assert item_a == item_b
        status, body = request(
            b,
            "POST",
            "/api/change",
            {
                "action": "item",
                "question": "why",
                "id": item_b["id"],
                "version": item_b["version"],
                "points": 1,
                "comment": item_b["comment"],
            },
        )
        assert status == 200
        # A edits the comment, from the item as A read it (A's old points: 2)
        status, body = request(
            a,
            "POST",
            "/api/change",
            {
                "action": "item",
                "question": "why",
                "id": item_a["id"],
                "version": item_a["version"],
                "points": item_a["points"],
                "comment": "Names the cause, clearly.",
            },
        )
        assert status == 409, body
        assert "changed by another grader" in body["error"] and "now +1" in body["error"]
        now = next(r for r in body["rubric"] if r["id"] == item_a["id"])
        assert now["points"] == 1 and now["comment"] == item_a["comment"], (
            "the page gets the item as it is now"
        )
        stored = next(r for r in app_b.store.rubric("why") if r.id == item_a["id"])
        assert stored.points == 1 and stored.comment == item_a["comment"], "B's points stand"
        # A, having seen B's change, edits again from the item as it is now
        status, body = request(
            a,
            "POST",
            "/api/change",
            {
                "action": "item",
                "question": "why",
                "id": now["id"],
                "version": now["version"],
                "points": now["points"],
                "comment": "Names the cause, clearly.",
            },
        )
        assert status == 200
        stored = next(r for r in app_b.store.rubric("why") if r.id == item_a["id"])
        assert (stored.points, stored.comment) == (1, "Names the cause, clearly.")
        # an edit without a version is refused: every write says what it was based on
        status, body = request(
            a,
            "POST",
            "/api/change",
            {"action": "item", "question": "why", "id": now["id"], "points": 2, "comment": "x"},
        )
        assert status == 400 and "version" in body["error"]
        status, body = request(
            a,
            "POST",
            "/api/change",
            {
                "action": "delete-item",
                "question": "why",
                "id": now["id"],
                "version": now["version"],
            },
        )
        assert status == 409
        graders = [(e["grader"], e["what"]) for e in app_b.store.events()]
        assert graders == [("ta-a", "edit item"), ("ta-b", "edit item")], graders


def test_an_item_another_grader_changed_since_it_was_read_is_not_applied(tmp_path):
    """TA A reads item 1 as "+2 Names the cause."; TA B changes it to "-2 Wrong cause
    named"; A presses its key on an answer. The grade was saved with B's meaning, which A
    never chose. The grade names the item's version as read, and is refused (409) with
    the rubric as it is now; applied again from that, it is saved."""
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    with running(out, lab, grader="ta-a") as (a, app), running(out, lab, grader="ta-b") as (b, _):
        page, texts = _read(a)
        item = page["rubric"][0]
        edit = {"action": "item", "question": "why", "id": item["id"],
                "version": item["version"], "points": -2, "comment": "Wrong cause named."}  # fmt: skip
        assert request(b, "POST", "/api/change", edit)[0] == 200
        token = page["answers"][0]["token"]
        status, body = _grade(a, page, texts, token, add=item["id"], item_version=item["version"])
        assert status == 409 and "changed by someone else since you read it" in body["error"]
        now = next(r for r in body["rubric"] if r["id"] == item["id"])
        assert (now["points"], now["comment"]) == (-2, "Wrong cause named.")
        name = _name_of(app, "why", token)
        assert not app.store.person_scores([name])[name]["why"].graded, "nothing saved"
        status, body = _grade(a, page, texts, token, add=item["id"], item_version=now["version"])
        assert status == 200, body
        status, body = _grade(a, page, texts, token, add=item["id"], item_version="1")
        assert status == 400 and "item_version" in body["error"]


def test_two_graders_on_one_answer_never_undo_each_other(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    with running(out, lab, grader="ta-a") as (a, app), running(out, lab, grader="ta-b") as (b, _):
        page_a, texts_a = _read(a)
        page_b, texts_b = _read(b)
        token = page_a["answers"][0]["token"]
        cause, numbers = page_a["rubric"][0]["id"], page_a["rubric"][1]["id"]
        assert _grade(b, page_b, texts_b, token, add=cause)[0] == 200
        status, body = _grade(a, page_a, texts_a, token, items=[numbers], comment="Numbers only.")
        assert status == 409 and "graded by someone else" in body["error"]
        assert body["answers"][0]["items"] == [cause], "the page gets B's grade"
        name = _name_of(app, "why", token)
        score = app.store.person_scores([name])[name]["why"]
        assert score.items == ((2.0, "Names the cause."),) and score.comment == "", (
            "nothing of A's was saved"
        )
        # a bulk apply with one answer changed since is refused whole
        other = page_a["answers"][1]["token"]
        body = {
            "action": "grade",
            "question": "why",
            "answers": [other, token],
            "add": numbers,
            "seen": {t: texts_a[t]["digest"] for t in (other, token)},
            "versions": {other: 0, token: 0},
        }
        status, refused = request(a, "POST", "/api/change", body)
        assert status == 409 and len(refused["answers"]) == 2
        assert not app.store.person_scores([_name_of(app, "why", other)])[
            _name_of(app, "why", other)
        ]["why"].graded
        status, page_a = request(a, "GET", "/api/question/why")
        assert _grade(a, page_a, texts_a, token, add=numbers)[0] == 200
        assert app.store.person_scores([name])[name]["why"].score == 4


def test_the_refresh_sends_only_what_changed(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    with running(out, lab) as (server, app):
        page, texts = _read(server)
        since = f"/api/question/why/changes?since={page['version']}&generation={page['generation']}"
        status, body = request(server, "GET", since)
        assert status == 200 and body["answers"] == [] and body["rubric"] is None
        token = page["answers"][2]["token"]
        _grade(server, page, texts, token, add=page["rubric"][0]["id"])
        status, body = request(server, "GET", since)
        assert [a["token"] for a in body["answers"]] == [token] and body["rubric"] is None
        assert body["version"] > page["version"]
        status, after = request(
            server,
            "GET",
            f"/api/question/why/changes?since={body['version']}&generation={page['generation']}",
        )
        assert after["answers"] == []
        item = page["rubric"][0]
        request(
            server,
            "POST",
            "/api/change",
            {
                "action": "item",
                "question": "why",
                "id": item["id"],
                "version": item["version"],
                "points": 1,
                "comment": "Half.",
            },
        )
        status, body = request(
            server,
            "GET",
            f"/api/question/why/changes?since={after['version']}&generation={page['generation']}",
        )
        assert len(body["answers"]) == len(CLASS) and body["rubric"][0]["points"] == 1, (
            "an item re-scores all"
        )
        status, body = request(server, "GET", "/api/question/why/changes?since=x&generation=1")
        assert status == 400 and "since=" in body["error"]


def test_the_races_in_the_page(tmp_path):
    """In Chromium: a rubric edit refused (409) reloads the item and says so; a grade of an
    answer someone else graded meanwhile is refused and the card shows theirs; a regrade
    between the read and the key press is graded for the text seen and flagged."""
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    with (
        running(out, lab, grader="ta-a") as (a, app),
        running(out, lab, grader="ta-b") as (b, _),
        chromium() as (browser, expect),
    ):
        page = browser.new_page()
        page.goto(a.url + "#why")
        expect(page.locator(".answer[data-text]")).to_have_count(len(CLASS))
        # B changes item 1's points; A, not yet refreshed, edits its comment
        rubric = request(b, "GET", "/api/question/why")[1]["rubric"]
        request(
            b,
            "POST",
            "/api/change",
            {
                "action": "item",
                "question": "why",
                "id": rubric[0]["id"],
                "version": rubric[0]["version"],
                "points": 1,
                "comment": rubric[0]["comment"],
            },
        )
        replies = iter(["2", "Names the cause, clearly."])
        page.on("dialog", lambda d: d.accept(next(replies)))
        page.locator("#items li .edit").nth(0).click()
        expect(page.locator("#status")).to_contain_text("changed by another grader")
        expect(page.locator("#items li .points").nth(0)).to_have_text("+1")
        assert next(r for r in app.store.rubric("why") if r.id == rubric[0]["id"]).points == 1
        # B grades answer 2; A presses item 2 on it
        page_b, texts_b = _read(b)
        second = page.locator(".answer").nth(1)
        token = second.get_attribute("data-token")
        _grade(b, page_b, texts_b, token, add=rubric[0]["id"])
        second.locator("h3 span").first.click()
        page.keyboard.press("2")
        expect(page.locator("#status")).to_contain_text("graded by someone else")
        expect(second.locator(".badge")).to_have_text("1 / 4")
        expect(second.locator(".chips")).to_contain_text("Names the cause.")
        # a regrade changes answer 3 while A looks at it; A presses item 2
        third = page.locator(".answer").nth(2)
        token = third.get_attribute("data-token")
        name = _name_of(app, "why", token)
        write_class(
            out, lab, dict(CLASS, **{name: {"why": "Rewritten after the deadline.", "how": "x"}})
        )
        third.locator("h3 span").first.click()
        page.keyboard.press("2")
        expect(page.locator("#status")).to_contain_text("changed since the page showed")
        expect(third.locator(".badge")).to_have_text("answer changed since graded")
        expect(third.locator(".text")).to_contain_text("Rewritten after the deadline.")
    score = ReviewStore(out / DB_NAME, lab).for_gradebook(rewrite_reports(out, lab=lab))[0][name][
        "why"
    ]
    assert score.stale and score.items == ((2.0, "Gives numbers."),)


def test_a_review_database_of_the_previous_schema_is_carried_over(tmp_path):
    """A reviews.sqlite written before versions existed (schema 1) opens with every grade
    kept, versions 0 (so the page's first write of each row is accepted once)."""
    import sqlite3

    lab = written_lab()
    path = tmp_path / DB_NAME
    with sqlite3.connect(path) as db:
        db.executescript("""
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE rubric (id INTEGER PRIMARY KEY, question TEXT NOT NULL, points REAL NOT NULL,
                comment TEXT NOT NULL, position INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE grade (submission TEXT NOT NULL, question TEXT NOT NULL, adjustment REAL NOT NULL DEFAULT 0,
                comment TEXT NOT NULL DEFAULT '', digest TEXT NOT NULL DEFAULT '', grader TEXT NOT NULL DEFAULT '',
                updated TEXT NOT NULL, PRIMARY KEY (submission, question));
            CREATE TABLE applied (submission TEXT NOT NULL, question TEXT NOT NULL, item INTEGER NOT NULL,
                PRIMARY KEY (submission, question, item));
            CREATE TABLE event (id INTEGER PRIMARY KEY, at TEXT NOT NULL, grader TEXT NOT NULL, submission TEXT,
                question TEXT, what TEXT NOT NULL, detail TEXT NOT NULL);
            INSERT INTO meta VALUES ('lab', 'lab9_written'), ('schema', '1'), ('secret', 'old'),
                ('rubric:why', 'then'), ('rubric:how', 'then');
            INSERT INTO rubric VALUES (1, 'why', 2, 'Names the cause.', 0, 0), (2, 'how', 3, 'A fix.', 0, 0);
            INSERT INTO grade VALUES ('student01', 'why', 0.5, 'ok', 'abc', 'ta', 'then');
            INSERT INTO applied VALUES ('student01', 'why', 1);
        """)
    store = ReviewStore(path, lab)
    score = store.person_scores(["student01"])["student01"]["why"]
    assert (score.score, score.comment, score.grader) == (2.5, "ok", "ta")
    assert store.answers("why", {"student01": "abc"})["student01"]["version"] == 0
    assert [r.version for r in store.rubric("why")] == [0]
    store.apply(
        ["student01"],
        "why",
        {"adjustment": 1},
        digest={"student01": "abc"},
        versions={"student01": 0},
    )
    assert store.answers("why", {"student01": "abc"})["student01"]["version"] > 0
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == "3"


def test_a_reload_waits_while_a_comment_is_being_typed(tmp_path):
    """In Chromium: a regrade (or another grader's write) makes the page's next refresh
    rebuild every card, and a comment being typed, saved only when its box is left, was
    thrown away without a word. The reload waits, saying why, until the box is left; the
    comment is then saved and the changed answer shown."""
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    with running(out, lab, grader="ta-a") as (a, app), chromium() as (browser, expect):
        page = browser.new_page()
        page.goto(a.url + "#why")
        expect(page.locator(".answer[data-text]")).to_have_count(len(CLASS))
        first, second = page.locator(".answer").nth(0), page.locator(".answer").nth(1)
        typed = first.get_attribute("data-token")
        other = _name_of(app, "why", second.get_attribute("data-token"))
        box = first.locator("textarea")
        box.click()
        box.type("Half a comm")
        write_class(out, lab, dict(CLASS, **{other: {"why": "Rewritten meanwhile.", "how": "x"}}))
        page.evaluate("refresh()")
        expect(page.locator("#status")).to_contain_text("they reload when you leave the box")
        box.type("ent.")
        assert box.input_value() == "Half a comment."
        box.blur()  # leaves the box: the comment is saved (in turn), then a refresh reloads
        rewritten = page.locator(".answer .text").filter(has_text="Rewritten meanwhile.")
        for _ in range(100):
            page.evaluate("refresh()")  # returns at once while the save is under way
            if rewritten.count():
                break
            page.wait_for_timeout(100)
        expect(rewritten).to_have_count(1)
        expect(page.locator(f'.answer[data-token="{typed}"] textarea')).to_have_value(
            "Half a comment."
        )
    grades = ReviewStore(out / DB_NAME, lab).for_gradebook(rewrite_reports(out, lab=lab))[0]
    assert grades[_name_of(app, "why", typed)]["why"].comment == "Half a comment."
