"""The writers: whatever a submission says stays text in the markdown the instructor and
the student read (rendered here by a CommonMark parser with raw HTML allowed)."""

import pytest

from lablib.grading.judge import summarise
from lablib.grading.report.feedback_markdown import feedback_markdown
from lablib.grading.report.instructor import instructor_markdown
from lablib.grading.results import Diagnostic, Kind, Status, TestResult

markdown_it = pytest.importorskip("markdown_it")

EVIL = ("```\n# Forged heading\n<img src=x onerror=alert(1)> [click](javascript:alert(1)) "
        "![i](http://x/y.png) &amp; | cell ` code")


def _evil_result(lab):
    tests = [TestResult.failed(t, EVIL if i % 2 else EVIL.replace("\n", " "), Kind.ERROR)
             for i, t in enumerate(lab.tests) if not t.hidden]
    diagnostics = [Diagnostic(ended="crashed", running="cell <b>x</b>", attempt=1, detail=EVIL,
                              exit="exited with code 1", output_tail="hello\n" + EVIL)]
    return summarise(lab, "<b>eve</b> [x](javascript:1)", "/subs/eve.ipynb", tests,
                     Status.of([Kind.CRASHED]), notes=[EVIL], output=EVIL, diagnostics=diagnostics)


@pytest.mark.parametrize("render", [feedback_markdown, instructor_markdown])
def test_student_text_never_becomes_markup(fixture_lab, render):
    text = render(fixture_lab.title, _evil_result(fixture_lab))
    page = markdown_it.MarkdownIt("commonmark").render(text)
    assert "<img" not in page and "<b>" not in page  # no HTML passes through
    assert "href=" not in page  # no link, whatever the scheme
    assert page.count("<h1>") == 1  # only the title: no forged heading
    assert "Forged heading" in page and "onerror" in page  # the text is all still there, as text
