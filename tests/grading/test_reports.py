"""The writers: whatever a submission says stays text in the markdown the instructor and
the student read (rendered here by a CommonMark parser with raw HTML allowed)."""

import pytest

from lablib.grading.judge import summarise
from lablib.grading.report.feedback_markdown import feedback_markdown
from lablib.grading.report.instructor import instructor_markdown
from lablib.grading.results import Diagnostic, Kind, Status, TestResult

markdown_it = pytest.importorskip("markdown_it")

EVIL = (
    "```\n# Forged heading\n<img src=x onerror=alert(1)> [click](javascript:alert(1)) "
    "![i](http://x/y.png) &amp; | cell ` code"
)


def _evil_result(lab):
    tests = [
        TestResult.failed(t, EVIL if i % 2 else EVIL.replace("\n", " "), Kind.ERROR)
        for i, t in enumerate(lab.tests)
        if not t.hidden
    ]
    diagnostics = [
        Diagnostic(
            ended="crashed",
            running="cell <b>x</b>",
            attempt=1,
            detail=EVIL,
            exit="exited with code 1",
            output_tail="hello\n" + EVIL,
        )
    ]
    return summarise(
        lab,
        "<b>eve</b> [x](javascript:1)",
        "/subs/eve.ipynb",
        tests,
        Status.of([Kind.CRASHED]),
        notes=[EVIL],
        output=EVIL,
        diagnostics=diagnostics,
    )


@pytest.mark.parametrize("render", [feedback_markdown, instructor_markdown])
def test_student_text_never_becomes_markup(fixture_lab, render):
    text = render(fixture_lab.title, _evil_result(fixture_lab))
    page = markdown_it.MarkdownIt("commonmark").render(text)
    assert "<img" not in page and "<b>" not in page  # no HTML passes through
    assert "href=" not in page  # no link, whatever the scheme
    assert page.count("<h1>") == 1  # only the title: no forged heading
    assert "Forged heading" in page and "onerror" in page  # the text is all still there, as text


def test_a_graded_cell_that_raised_is_a_status_of_its_own(fixture_lab, tmp_path):
    """Not ``ok``: the status names the piece and the exception, in every writer's words,
    and survives the gradebook's JSON (regrade merges read it back)."""
    from lablib.grading.gradebook.store import result_from_entry
    from lablib.grading.report.summary import class_summary
    from lablib.grading.report.text import explain_status, status_text

    status = Status.of(
        [Kind.TIMEOUT], ["running_mean"], ["softmax (NameError)", "softmax (NameError)"]
    )
    assert not status.ok and status.raised == ("softmax (NameError)",)
    assert status.kinds == (Kind.TIMEOUT, Kind.ERROR, Kind.MISSING)
    assert status_text(status) == "timeout; error: softmax (NameError); missing: running_mean"
    assert "A graded cell raised an error" in explain_status(status)
    assert Status.from_dict(status.to_dict()) == status
    assert Status.from_dict({"problems": [], "missing": []}).ok  # a cached result of before

    tests = [
        TestResult.failed(t, "NameError: name 'my_temperature' is not defined", Kind.ERROR)
        if t.piece == "softmax"
        else TestResult(t.id, t.piece, t.name, t.points, t.points, True, t.hidden)
        for t in fixture_lab.tests
    ]
    result = summarise(
        fixture_lab, "ada", "/subs/ada.ipynb", tests, Status.of(raised=["softmax (NameError)"])
    )
    entry = dict(result.to_dict(), problems=[], missing=[], raised=["softmax (NameError)"])
    assert result_from_entry(entry).status == result.status
    summary = class_summary(fixture_lab, [result])
    assert summary["statuses"]["error"] == 1 and summary["statuses"]["ok"] == 0
    assert [s["submission"] for s in summary["needs_attention"]["error"]] == ["ada"]


def test_the_childs_exception_name_enters_the_status_only_as_a_plain_identifier():
    """The name comes from the student's process: one that could be a formula, markup or a
    terminal control code is not taken (the status then says "an exception")."""
    from lablib.grading.run.supervisor import _identifier

    assert _identifier("NameError") == "NameError" and _identifier("_My_Error2") == "_My_Error2"
    for forged in [
        '=HYPERLINK("x")',
        "\x1b[2J",
        "<b>x</b>",
        "a b",
        "Érreur",
        "",
        None,
        42,
        "E" * 101,
    ]:
        assert _identifier(forged) == "", forged


def test_a_long_line_of_a_message_wraps_in_the_feedback_page(fixture_lab):
    """A 5,000-character line of an exception's message drew the student's feedback page
    10,419 px wide (its Details column a <pre> that never wrapped)."""
    from lablib.grading.report.feedback_html import feedback_html
    from review_fixtures import chromium

    tests = [TestResult.failed(t, "x" * 5_000, Kind.ERROR) for t in fixture_lab.tests]
    result = summarise(fixture_lab, "carol", "/subs/carol.ipynb", tests, Status())
    with chromium() as (browser, _):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_content(feedback_html(fixture_lab.title, result))
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        assert "x" * 5_000 in page.inner_text("body").replace("\n", "")
