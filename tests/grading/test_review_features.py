"""The review page's tools for a whole class (issue 30, item 6), each in headless Chromium:
a word-level diff of a changed answer against the text graded (as text, never as HTML;
bounded in its work on crafted text, computed once per pair of texts);
a flag for a second look; filters by state, rubric item and score; unreadable notebooks
kept out of the answers to grade; more than 9 rubric items from the keyboard; the
instructor's deliberate, logged reveal of one answer's student; progress text that fits
a 320 px window with 300 students.
"""

from __future__ import annotations

import difflib
import json
import random
import re
import time

import pytest

from lablib.grading.atomic import atomic_write
from lablib.grading import report
from lablib.grading.review import server as review_server
from lablib.grading.review import store as review_store
from lablib.grading.results import Kind, Status
from lablib.grading.review.server import revealed_student
from lablib.grading.review.store import DB_NAME, ReviewStore, text_digest, word_diff
from lablib.grading.spec import LabSpec
from review_fixtures import chromium, request, result, running, write_class, written_lab

# the diff's bounded work is timed against honest text: run alone (.ci/run's serial pass)
pytestmark = pytest.mark.serial

CLASS = {
    f"student{k:02d}": {"why": f"The cause is the learning rate, answer {k}.", "how": f"Fix {k}."}
    for k in range(6)
}


def _name_of(app, question, token):
    return app._by_token(question, [token])[0]


def _card_of(page, app, name, question="why"):
    """The card of ``name``'s answer on the page."""
    return page.locator(f".answer[data-token='{app._token(question, name)}']")


def _open(browser, server, question="why", viewport=None):
    page = browser.new_page(viewport=viewport or {"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server.url + "#" + question)
    return page, errors


# --------------------------------------------------------------------------- the diff


def test_word_diff_keeps_spacing_and_is_bounded():
    segments = word_diff("The cause is the learning rate.", "The cause is the batch size <b>x</b>.")
    assert ["-", "learning"] in segments and ["+", "batch"] in segments
    assert "".join(t for op, t in segments if op in "=+") == "The cause is the batch size <b>x</b>."
    assert "".join(t for op, t in segments if op in "=-") == "The cause is the learning rate."
    long = word_diff("word " * 50_000 + "end", "word " * 50_000 + "fin")
    assert long[0][0] == "…" and long[-2:] == [["-", "end"], ["+", "fin"]], (
        "unchanged text is shortened"
    )
    huge = word_diff("a " * 60_000, "b " * 60_000)
    assert sum(len(t) for op, t in huge if op != "…") <= 50_000, (
        "a diff shows at most 50,000 characters"
    )


def _prose(rng, words: int) -> str:
    """``words`` words of honest-looking prose: this package's own words, in sentences and
    paragraphs."""
    vocabulary = re.findall(r"[A-Za-z]+", review_store.__doc__ + review_server.__doc__)
    out = []
    for _ in range(words):
        out.append(rng.choice(vocabulary))
        out.append(rng.choices([" ", ", ", ". ", ".\n\n"], [88, 5, 6, 1])[0])
    return "".join(out)


def _edited(rng, text: str, every: int) -> str:
    words = text.split(" ")
    for k in range(every // 2, len(words), every):
        words[k] = rng.choice(["alpha", "beta.", "gamma,", "", "delta epsilon"])
    return " ".join(words)


def _took(old: str, new: str) -> float:
    start = time.perf_counter()
    word_diff(old, new)
    return time.perf_counter() - start


def test_the_diff_of_crafted_text_costs_what_an_honest_one_does(monkeypatch):
    """Punctuation, one token each, makes a sequence matcher's work grow with the square
    of each token's repeats (two texts of 5,000 random commas and full stops: 20 s, and
    each press of ``d`` paid it again). The diff is bounded in steps of comparison (lines,
    sentences, words, then characters, only within what changed): crafted text costs a
    small multiple of one honest diff of a long answer, and past the bound is shown whole
    with a note."""
    rng = random.Random(7)
    honest = _prose(rng, 7000)  # about 40,000 characters, 15,000 tokens
    assert len(review_store._TOKENS.findall(honest)) <= review_store.DIFF_TOKENS
    one_word = _edited(rng, honest, 10_000)
    baseline = min(_took(honest, one_word) for _ in range(5))  # shared start and end: linear
    crafted = [
        (
            "".join(rng.choice(".,") for _ in range(5000)),
            "".join(rng.choice(".,") for _ in range(5000)),
        ),
        (
            "\n".join(rng.choice(".,;") for _ in range(1500)),
            "\n".join(rng.choice(".,;") for _ in range(1500)),
        ),
        (
            " ".join(rng.choice("ab") for _ in range(1000)),
            " ".join(rng.choice("ab") for _ in range(1000)),
        ),
    ]
    took = max(_took(old, new) for old, new in crafted)
    assert took <= 150 * baseline, f"crafted {took:.3f}s, honest {baseline:.4f}s"
    # the steps of comparison, counted apart from the diff's own count: each search of the
    # sequence matcher looks at a[alo:ahi] and at the positions of their tokens in b before bhi
    searched = []
    search = difflib.SequenceMatcher.find_longest_match

    def counted(self, alo=0, ahi=None, blo=0, bhi=None):
        ahi, bhi = len(self.a) if ahi is None else ahi, len(self.b) if bhi is None else bhi
        searched.append(
            sum(1 + sum(j < bhi for j in self.b2j.get(self.a[i], ())) for i in range(alo, ahi))
        )
        return search(self, alo, ahi, blo, bhi)

    monkeypatch.setattr(difflib.SequenceMatcher, "find_longest_match", counted)
    wide = "".join(rng.choice(".,") for _ in range(12_000))
    crafted.append((wide, "".join(rng.choice(".,") for _ in range(12_000))))
    for old, new in crafted:
        searched.clear()
        diff = review_store.compare_texts(old, new)
        assert diff.work <= review_store.DIFF_WORK, diff.work
        assert sum(searched) <= diff.work, (sum(searched), diff.work)
    assert not diff.word_by_word, "past the bound: shown whole"
    assert "".join(t for op, t in diff.segments if op in "=-") == old
    assert "".join(t for op, t in diff.segments if op in "=+") == new
    for every in (500, 50, 8):  # honest edits, few to many: compared word by word
        searched.clear()
        diff = review_store.compare_texts(honest, _edited(rng, honest, every))
        assert diff.word_by_word and diff.work <= review_store.DIFF_WORK // 2, (every, diff.work)
        assert sum(searched) <= diff.work


def test_a_diff_is_computed_once_and_says_when_it_is_shown_whole(tmp_path, monkeypatch):
    lab = written_lab()
    out = tmp_path / "out"
    rng = random.Random(3)
    graded = {
        "s0": "The cause is the learning rate.",
        "s1": "".join(rng.choice(".,") for _ in range(12_000)),
    }
    write_class(out, lab, {name: {"why": text, "how": "x"} for name, text in graded.items()})
    store = ReviewStore(out / DB_NAME, lab)
    item = store.rubric("why")[0].id
    store.apply(
        list(graded),
        "why",
        {"items": [item]},
        grader="t",
        digest={name: text_digest(text) for name, text in graded.items()},
        texts={text_digest(text): text for text in graded.values()},
    )
    now = {
        "s0": "The cause is the batch size \u202e8 / 3\x1b[2J.",
        "s1": "".join(rng.choice(".,") for _ in range(12_000)),
    }
    write_class(out, lab, {name: {"why": text, "how": "x"} for name, text in now.items()})
    calls = []
    compare = review_server.compare_texts
    monkeypatch.setattr(review_server, "compare_texts", lambda *a: calls.append(1) or compare(*a))
    app = review_server.ReviewApp(out, lab, grader="t")
    honest = app.diff("why", app._token("why", "s0"))
    assert honest["word_by_word"] and not honest["note"] and ["+", "batch"] in honest["segments"]
    shown = "".join(part for op, part in honest["segments"])  # what the page puts in its nodes
    assert "\u202e" not in shown and "\x1b" not in shown, shown  # no reordering, no escape
    assert "[U+202E]" in shown and "\u241b[2J" in shown
    for _ in range(3):
        crafted = app.diff("why", app._token("why", "s1"))
        assert not crafted["word_by_word"] and "too different" in crafted["note"].lower()
    assert len(calls) == 2, "each pair of texts is compared once"


def test_a_changed_answer_shows_what_changed_since_graded(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    changed = (
        'The cause is the batch size <img src=x onerror="window.pwned=1"> <b>bold</b>, answer 2.'
    )
    with running(out, lab) as (server, app), chromium() as (browser, expect):
        page, errors = _open(browser, server)
        card = _card_of(page, app, "student02")
        expect(card).to_have_attribute("data-text", "shown")
        card.locator("h3 span").first.click()
        page.keyboard.press("1")
        expect(card.locator(".badge")).to_have_text("2 / 4")
        expect(card.locator(".changes")).to_be_hidden()
        write_class(out, lab, dict(CLASS, student02={"why": changed, "how": "Fix 2."}))  # a regrade
        page.reload()
        expect(card.locator(".badge")).to_have_text("answer changed since graded")
        card.locator(".changes").click()
        diff = card.locator(".diff")
        expect(diff.locator("del")).to_have_text(["learning", "rate"])
        added = " ".join(diff.locator("ins").all_text_contents())
        assert "batch" in added and "<b>bold</b>" in added and "onerror" in added, added
        assert diff.locator("b, img").count() == 0, "the student's HTML is text in the diff"
        assert page.evaluate("window.pwned === undefined") and not errors, errors
        card.locator("h3 span").first.click()
        page.keyboard.press("d")  # the key hides it again
        expect(diff).to_have_count(0)
        # the API says why there is no diff for a grade of a text that was not kept
        status, listed = request(server, "GET", "/api/question/why")
        token = app._token("why", "student02")
        assert next(a for a in listed["answers"] if a["token"] == token)["diff"]
        status, body = request(server, "GET", f"/api/diff/why/{app._token('why', 'student03')}")
        assert status == 200 and body == {
            "token": app._token("why", "student03"),
            "available": False,
            "reason": "This answer has not been graded yet.",
        }
    digest, text = ReviewStore(out / DB_NAME, lab).graded_text("student02", "why")
    assert text == CLASS["student02"]["why"], "the store keeps the text the grade was given for"


# --------------------------------------------------------------------------- flags and filters


def test_a_flag_for_a_second_look_is_set_listed_filtered_and_cleared(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    with running(out, lab, grader="ta1") as (server, app), chromium() as (browser, expect):
        page, errors = _open(browser, server)
        cards = page.locator(".answer")
        expect(cards).to_have_count(len(CLASS))
        cards.nth(1).locator("h3 span").first.click()
        page.keyboard.press("f")
        expect(cards.nth(1).locator(".flagmark")).to_be_visible()
        expect(page.locator("#progress-text")).to_contain_text("1 flagged")
        cards.nth(4).locator("h3 span").first.click()
        page.keyboard.press("f")
        expect(page.locator("#progress-text")).to_contain_text("2 flagged")
        flagged = {_name_of(app, "why", cards.nth(k).get_attribute("data-token")) for k in (1, 4)}
        assert set(ReviewStore(out / DB_NAME, lab).flagged("why")["why"]) == flagged
        # a second grader's page sees them, and lists only them
        other, _ = _open(browser, server)
        other.locator("#filter").select_option("flagged")
        expect(other.locator(".answer")).to_have_count(2)
        expect(other.locator(".answer .flagmark:visible")).to_have_count(2)
        expect(other.locator("#page-text")).to_contain_text(f"of 2 (of {len(CLASS)})")
        other.locator(".answer").nth(0).locator("h3 span").first.click()
        other.keyboard.press("f")  # cleared there
        expect(other.locator(".answer").nth(0).locator(".flagmark")).to_be_hidden()
        assert not errors
    store = ReviewStore(out / DB_NAME, lab)
    assert len(store.flagged("why")["why"]) == 1
    events = [e for e in store.events() if e["what"] in ("flag", "unflag")]
    assert [e["what"] for e in reversed(events)] == ["flag", "flag", "unflag"]
    assert all(e["grader"] == "ta1" for e in events)
    assert all(not s["why"].graded for s in store.person_scores(list(CLASS)).values()), (
        "a flag is not a grade"
    )


def test_answers_are_filtered_by_state_rubric_item_and_score(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    store = ReviewStore(out / DB_NAME, lab)
    cause, numbers = [r.id for r in store.rubric("why")][:2]
    store.apply(["student00", "student01"], "why", {"items": [cause]}, grader="t")
    store.apply(["student02"], "why", {"items": [cause, numbers]}, grader="t")
    store.apply(["student03"], "why", {"items": [numbers]}, grader="t")
    with running(out, lab) as (server, app), chromium() as (browser, expect):
        page, errors = _open(browser, server)
        expect(page.locator(".answer")).to_have_count(len(CLASS))

        def shown():
            return {
                _name_of(app, "why", t)
                for t in page.locator(".answer").evaluate_all(
                    "(cards) => cards.map((c) => c.dataset.token)"
                )
            }

        cases = {
            f"item:{cause}": {"student00", "student01", "student02"},
            f"noitem:{cause}": {"student03", "student04", "student05"},
            "score:2": {"student00", "student01", "student03"},
            "score:4": {"student02"},
            "todo": {"student04", "student05"},
            "graded": {"student00", "student01", "student02", "student03"},
            "all": set(CLASS),
        }
        for value, expected in cases.items():
            page.locator("#filter").select_option(value)
            expect(page.locator(".answer")).to_have_count(len(expected))
            assert shown() == expected, (value, shown())
        # keys move within the answers listed; a grade does not hide the answer until chosen again
        page.locator("#filter").select_option("todo")
        expect(page.locator(".answer")).to_have_count(2)
        page.locator(".answer").nth(0).locator("h3 span").first.click()
        page.keyboard.press("1")
        expect(page.locator(".answer").nth(0).locator(".badge")).to_have_text("2 / 4")
        expect(page.locator(".answer")).to_have_count(2)
        page.locator("#filter").select_option("graded")
        page.locator("#filter").select_option("todo")
        expect(page.locator(".answer")).to_have_count(1)
        assert not errors


# --------------------------------------------------------------------------- unreadable notebooks


def test_unreadable_notebooks_are_counted_apart_and_never_graded_in_the_page(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    rows = [result(name, given) for name, given in CLASS.items()]
    broken = result("kq7-corrupt", {})
    broken.status = Status.of([Kind.INVALID_NOTEBOOK])
    failed = result("gx5-failed", {})  # the grader failed before reading the answers
    failed.status = Status.of([Kind.GRADER_ERROR])
    rows += [broken, failed, result("zx3-legacy", {})]  # no record: an older lablib
    report.write_reports(out, lab, rows)
    with running(out, lab) as (server, app), chromium() as (browser, expect):
        page, errors = _open(browser, server)
        expect(page.locator(".answer")).to_have_count(len(CLASS))
        box = page.locator("#unreadable")
        expect(box).to_be_visible()
        expect(box.locator("li")).to_have_count(3)
        expect(box).to_contain_text("could not be read (status: invalid-notebook)")
        expect(box).to_contain_text("the grader itself failed on this notebook")
        expect(box).to_contain_text("no record of this answer")
        assert box.inner_text().count("older lablib") == 1, box.inner_text()
        text = box.inner_text()
        assert "kq7" not in text and "zx3" not in text and "gx5" not in text, "anonymised"
        expect(page.locator("#progress-text")).to_have_text(f"0/{len(CLASS)} graded · 3 unreadable")
        page.locator("#filter").select_option("todo")
        expect(page.locator(".answer")).to_have_count(len(CLASS))
        page.keyboard.press("u")  # select every answer still to grade, then one item to all
        page.keyboard.press("3")  # "No answer." (0 points)
        expect(page.locator(".badge.done")).to_have_count(len(CLASS))
        expect(page.locator("#progress-text")).to_have_text(
            f"{len(CLASS)}/{len(CLASS)} graded · 3 unreadable"
        )
        assert not errors
    scores = ReviewStore(out / DB_NAME, lab).person_scores(
        list(CLASS) + ["kq7-corrupt", "gx5-failed", "zx3-legacy"]
    )
    assert not any(scores[n]["why"].graded for n in ("kq7-corrupt", "gx5-failed", "zx3-legacy"))


# --------------------------------------------------------------------------- many rubric items


def _many_items_lab() -> LabSpec:
    lab = LabSpec("lab9_many", "Lab 9: a long rubric")
    lab.piece("f", objects=["f"])
    lab.answer(
        "why", points=20, title="why it works", rubric=[(1, f"Point {k + 1}.") for k in range(12)]
    )
    return lab


def test_more_than_nine_rubric_items_are_reached_by_their_numbers(tmp_path):
    lab = _many_items_lab()
    out = tmp_path / "out"
    write_class(out, lab, {"s0": {"why": "An answer."}, "s1": {"why": "Another."}})
    with running(out, lab) as (server, app), chromium() as (browser, expect):
        page, errors = _open(browser, server)
        card = _card_of(page, app, "s0")
        expect(card).to_have_attribute("data-text", "shown")
        card.locator("h3 span").first.click()

        def applied():
            return {
                c
                for _, c in ReviewStore(out / DB_NAME, lab).person_scores(["s0"])["s0"]["why"].items
            }

        page.keyboard.press("1")
        page.keyboard.press("2")  # item 12
        expect(card.locator(".chips span")).to_have_text(["+1 Point 12."])
        page.keyboard.press("1")
        page.keyboard.press("Enter")  # item 1 at once
        expect(card.locator(".chips span")).to_have_count(2)
        page.keyboard.press("3")  # no item 30-39: item 3 at once
        expect(card.locator(".chips span")).to_have_count(3)
        page.keyboard.press("1")  # a pause: item 1 again, removed
        expect(card.locator(".chips span")).to_have_count(2, timeout=5000)
        assert applied() == {"Point 3.", "Point 12."}
        page.keyboard.press("1")
        page.keyboard.press("9")  # no item 19: item 1, then 9 at once
        expect(card.locator(".chips span")).to_have_count(4)
        assert applied() == {"Point 1.", "Point 3.", "Point 9.", "Point 12."}
        assert (
            page.locator("#items li").nth(11).locator("button.apply").get_attribute("title")
            == "keys 12 Enter"
        )
        assert not errors


# --------------------------------------------------------------------------- the reveal


#: The identities resolved at grading (grades.json's ``identity``) that the reveal shows,
#: rather than the roster's ``student`` field, and what the card then says.
IDENTITIES = {
    # matched to a roster student at grading (by Canvas's user id): the identity's fields
    "student01": (
        {
            "key": "S9001",
            "name": "Zhao, Émilie",
            "student_id": "S9001",
            "email": "emilie.zhao@uni.example",
            "lms_id": "184001",
            "matched": True,
            "matched_by": "Canvas user id 184001",
            "lms": {"lms": "canvas", "user_id": "184001", "name": "zhaoemilie"},
            "others": [],
        },
        "Student: Zhao, Émilie, S9001, emilie.zhao@uni.example",
    ),
    # no roster student matched: what the Canvas download said (its user id, named)
    "student02": (
        {
            "key": "184002",
            "name": "anderssonemma",
            "student_id": "",
            "email": "",
            "lms_id": "184002",
            "matched": False,
            "matched_by": "",
            "lms": {"lms": "canvas", "user_id": "184002"},
            "others": [],
        },
        "Student: anderssonemma, Canvas user id 184002",
    ),
    # a Gradescope group: its other submitter too
    "student04": (
        {
            "key": "S2005",
            "name": "Ava Evans",
            "student_id": "S2005",
            "email": "ava.5@uni.example",
            "matched": True,
            "matched_by": "Gradescope SID S2005",
            "others": [{"name": "Mateo Fischer", "student_id": "S2006", "matched": True}],
        },
        "Student: Ava Evans (a group with Mateo Fischer), S2005, ava.5@uni.example",
    ),
}


def _with_students(out) -> None:
    """Give the gradebook's rows their roster students (as `lablib grade --roster` writes
    them) and, for IDENTITIES's, the identity resolved at grading; student03 keeps none (a
    gradebook written before identities were kept: the reveal shows the roster's field)."""
    path = out / "grades.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    for k, entry in enumerate(data["submissions"]):
        entry["student"] = {
            "student_id": f"900{k}",
            "name": f"Émilie Zhao {k}",
            "email": f"ez{k}@uni.example",
        }
        if entry["submission"] in IDENTITIES:
            entry["identity"] = IDENTITIES[entry["submission"]][0]
        if entry["submission"] == "student02":
            entry["student"] = None  # no roster student matched
    assert (
        not data["submissions"][3].get("identity")
        and data["submissions"][3]["submission"] == "student03"
    )
    atomic_write(path, json.dumps(data))


def test_the_reveal_is_one_logged_request_and_shows_one_name(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, CLASS)
    _with_students(out)
    with (
        running(out, lab) as (server, app),
        chromium() as (browser, expect),
    ):  # a TA's server: no reveal
        page, errors = _open(browser, server)
        expect(page.locator(".answer[data-text]")).to_have_count(len(CLASS))
        expect(page.locator(".answer .who:visible")).to_have_count(0)
        token = app._token("why", "student01")
        status, body = request(
            server, "POST", "/api/change", {"action": "reveal", "question": "why", "answer": token}
        )
        assert status == 400 and "--reveal" in body["error"], body
    with (
        running(out, lab, grader="instructor", reveal=True) as (server, app),
        chromium() as (browser, expect),
    ):
        for path in ("/api/questions", "/api/question/why", "/api/question/how"):
            data = json.dumps(request(server, "GET", path)[1])
            assert "Zhao" not in data and "Evans" not in data and "anderssonemma" not in data, (
                "names stay out of the page's data"
            )
        page, errors = _open(browser, server)
        card = _card_of(page, app, "student01")
        expect(card).to_have_attribute("data-text", "shown")
        page.once(
            "dialog", lambda d: d.dismiss()
        )  # changed their mind: nothing asked, nothing logged
        card.locator(".who").click()
        page.wait_for_timeout(300)
        assert not [e for e in ReviewStore(out / DB_NAME, lab).events() if e["what"] == "reveal"]
        messages = []
        page.once("dialog", lambda d: (messages.append(d.message), d.accept()))
        card.locator(".who").click()
        # the identity resolved at grading, not the roster's field ("Émilie Zhao 1, 9001")
        expect(card.locator(".student")).to_have_text(IDENTITIES["student01"][1])
        assert "recorded in the review log" in messages[0]
        expect(page.locator("#status")).to_contain_text(
            "recorded in the review log under instructor"
        )
        text = page.evaluate("() => document.body.innerText")
        assert text.count("Zhao") == 1, "the name shows for that answer only"
        expect(card.locator(".who")).to_be_hidden()
        shown = {
            "student01": IDENTITIES["student01"][1],
            "student02": IDENTITIES["student02"][1],
            "student04": IDENTITIES["student04"][1],
            "student03": "Student: Émilie Zhao 3, 9003, ez3@uni.example",
        }  # no identity: the roster's field
        for name in ("student02", "student04", "student03"):
            other = _card_of(page, app, name)
            page.once("dialog", lambda d: d.accept())
            other.locator(".who").click()
            expect(other.locator(".student")).to_have_text(shown[name])
        expect(page.locator(".answer .student:visible")).to_have_text(
            [
                shown[_name_of(app, "why", t)]
                for t in page.locator(".answer .student:visible").evaluate_all(
                    "(spans) => spans.map((s) => s.closest('.answer').dataset.token)"
                )
            ]
        )
        assert not errors
    reveals = [e for e in ReviewStore(out / DB_NAME, lab).events() if e["what"] == "reveal"]
    assert [(e["grader"], e["submission"], e["question"]) for e in reversed(reveals)] == [
        ("instructor", name, "why") for name in ("student01", "student02", "student04", "student03")
    ]


def test_revealed_student_prefers_the_identity_and_falls_back_to_the_roster():
    roster = {
        "student_id": "9001",
        "name": "Émilie Zhao",
        "email": "ez@uni.example",
        "section": "A",
    }
    assert revealed_student(IDENTITIES["student01"][0], roster) == {
        "name": "Zhao, Émilie",
        "student_id": "S9001",
        "email": "emilie.zhao@uni.example",
    }
    moodle = {
        "key": "Participant 7300017",
        "name": "José Núñez",
        "participant_id": "7300017",
        "matched": False,
    }
    assert revealed_student(moodle, None) == {
        "name": "José Núñez",
        "student_id": "Moodle participant 7300017",
        "email": "",
    }
    nameless = {"key": "subs/kq7", "name": "", "student_id": "", "email": "", "matched": False}
    for identity in (
        {},
        None,
        nameless,
    ):  # no identity, or one that names no one: the roster's field
        assert revealed_student(identity, roster) == {
            "name": "Émilie Zhao",
            "student_id": "9001",
            "email": "ez@uni.example",
        }
    assert revealed_student(nameless, None) == {} and revealed_student({}, {"name": ""}) == {}


# --------------------------------------------------------------------------- progress text


def test_the_progress_text_fits_at_320_px_with_300_students(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    rows = [result(f"student{k:03d}", {"why": f"Answer {k}.", "how": "Fix."}) for k in range(300)]
    broken = result("broken", {})
    broken.status = Status.of([Kind.INVALID_NOTEBOOK])
    report.write_reports(out, lab, rows + [broken])
    store = ReviewStore(out / DB_NAME, lab)
    item = store.rubric("why")[0].id
    names = [r.submission for r in rows]
    store.apply(
        names[:123],
        "why",
        {"items": [item]},
        grader="t",
        digest={r.submission: r.answers["why"].digest for r in rows},
    )
    store.set_flag(names[200:212], "why", True, grader="t")
    write_class_stale = {
        r.submission: {"why": r.answers["why"].text + (" changed" if k < 17 else ""), "how": "Fix."}
        for k, r in enumerate(rows)
    }
    report.write_reports(out, lab, [result(n, a) for n, a in write_class_stale.items()] + [broken])
    measure = """() => {
      const box = document.getElementById("progress"), text = document.getElementById("progress-text");
      const b = box.getBoundingClientRect(), t = text.getBoundingClientRect();
      return { page: document.documentElement.scrollWidth, width: innerWidth, text: text.textContent,
               overflow: text.scrollWidth - text.clientWidth, boxOverflow: box.scrollWidth - box.clientWidth,
               inside: t.left >= b.left - 0.5 && t.right <= b.right + 0.5 && t.bottom <= b.bottom + 0.5,
               right: b.right };
    }"""
    with running(out, lab) as (server, app), chromium() as (browser, expect):
        for width in (320, 1280):
            page, errors = _open(browser, server, viewport={"width": width, "height": 900})
            expect(page.locator("#progress-text")).to_have_text(
                "106/300 graded · 17 changed · 12 flagged · 1 unreadable"
            )
            got = page.evaluate(measure)
            assert got["overflow"] <= 0 and got["boxOverflow"] <= 0 and got["inside"], got
            assert got["right"] <= width and got["page"] <= width, (
                f"nothing wider than the {width} px window: {got}"
            )
            page.screenshot(path=str(tmp_path / f"review-{width}.png"))
            assert not errors
            page.close()
