"""Feedback says when a person's grade was held within the question's points (issue 30,
item 7): five "+1" items beside "4 / 4" are explained, in the HTML and the markdown."""

from __future__ import annotations

import html

from lablib.grading.report.feedback_html import feedback_html
from lablib.grading.report.feedback_markdown import cap_note, feedback_markdown
from lablib.grading.gradebook import Gradebook
from lablib.grading.results import PersonScore, PieceScore, Status, SubmissionResult, WrittenAnswer
from lablib.grading.spec import LabSpec


def _lab() -> LabSpec:
    lab = LabSpec("lab9_cap", "Lab 9: caps")
    lab.piece("f", objects=["f"])
    lab.answer("why", points=4, title="why it works", rubric=[(1, f"Point {k}.") for k in range(5)])
    return lab


def _score(items, adjustment=0.0, max_score=4.0) -> PersonScore:
    raw = sum(p for p, _ in items) + adjustment
    return PersonScore(
        "why", min(max(raw, 0.0), max_score), max_score, tuple(items), "", adjustment, True
    )


def test_cap_note_says_what_the_items_add_to_and_the_cap():
    five = [(1.0, f"Point {k}.") for k in range(5)]
    assert cap_note(_score(five)) == "5 items add to +5; capped at the question's 4 points."
    assert cap_note(_score(five[:4])) == "", "items that add to the points need no note"
    assert (
        cap_note(_score(five[:2], adjustment=3))
        == "2 items and the adjustment add to +5; capped at the question's 4 points."
    )
    assert (
        cap_note(_score([(-1.0, "Off topic.")])) == "1 item adds to -1; a score is never below 0."
    )
    assert (
        cap_note(_score([], adjustment=-2))
        == "The adjustment adds to -2; a score is never below 0."
    )
    assert cap_note(PersonScore("why", 0, 4)) == "", "an ungraded answer has no note"


def test_feedback_states_the_cap_in_html_and_markdown():
    lab = _lab()
    result = SubmissionResult(
        "alice",
        "/class/alice.ipynb",
        Status(),
        5.0,
        10.0,
        {"f": PieceScore(5.0, 10.0)},
        [],
        answers={"why": WrittenAnswer("Because.", "tag")},
    )
    five = tuple((1.0, f"Point {k}.") for k in range(5))
    person = {"alice": {"why": PersonScore("why", 4.0, 4.0, five, "", 0.0, True)}}
    book = Gradebook.of(lab, [result], person=person)
    row = book.row(result)
    md = feedback_markdown(lab.title, result, row)
    assert "4 / 4" in md and md.count("+1: Point") == 5
    assert "5 items add to +5; capped at the question's 4 points." in md
    page = feedback_html(lab.title, result, row)
    assert "4 / 4" in page
    assert html.escape("5 items add to +5; capped at the question's 4 points.") in page
    # a grade within the points has no such line
    person = {"alice": {"why": PersonScore("why", 3.0, 4.0, five[:3], "", 0.0, True)}}
    book = Gradebook.of(lab, [result], person=person)
    assert "capped" not in feedback_markdown(lab.title, result, book.row(result))
    assert "capped" not in feedback_html(lab.title, result, book.row(result))
