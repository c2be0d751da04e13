"""Written answers for Gradescope (issue 30, item 8): a PDF per student printed by headless
Chromium from sanitised HTML, in the order of Gradescope's manual questions, named by the
student's identity; the people's points as CSV; Gradescope's evaluations export brought
back into the review store.

The PDFs are read back with pdftotext (poppler-utils; `bash .ci/run setup` installs it).
"""

from __future__ import annotations

import csv
import html
import html.parser
import io
import json
import pathlib
import re
import shutil
import subprocess
import zipfile

import pytest

from lablib import cli
from lablib.grading import report
from lablib.grading.atomic import atomic_write
from lablib.grading.filenames import same_file
from lablib.grading.results import Kind, Status
from lablib.grading.review import printout
from lablib.grading.review.fonts import FontGaps, parse_charsets
from lablib.grading.review.render import TAGS
from lablib.grading.review.store import DB_NAME, ReviewStore, text_digest
from review_fixtures import result, write_class, written_lab

HOSTILE = (
    '<script>window.pwned=1</script> <img src=x onerror="window.pwned=1"> '
    '[click](javascript:window.pwned=1) <iframe src="http://127.0.0.2:9/"></iframe> '
    '$\\text{<b id="x">bold</b>}$ and $x_1^2 + \\frac{a}{b}$'
)


def _pdftotext(path) -> str:
    tool = shutil.which("pdftotext")
    if tool is None:
        pytest.fail(
            "pdftotext is not on PATH: the printed PDFs are read back with it. Install poppler-utils "
            "(`bash .ci/run setup` does)."
        )
    return subprocess.run(
        [tool, "-layout", str(path), "-"], capture_output=True, text=True, check=True
    ).stdout


def _pages(path) -> int:
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"Pages:\s+(\d+)", info).group(1))


def _raster(path, page: int) -> bytes:
    """Page ``page`` of a PDF as it is seen: a grey-level image (PGM) at 50 dpi."""
    return subprocess.run(
        ["pdftoppm", "-r", "50", "-gray", "-f", str(page), "-l", str(page), str(path)],
        capture_output=True,
        check=True,
    ).stdout


def _words(path) -> list[tuple[int, str, float, float]]:
    """Each word of a PDF: ``(page, text, left, height)`` in points."""
    layout = subprocess.run(
        ["pdftotext", "-bbox", str(path), "-"], capture_output=True, text=True, check=True
    ).stdout
    words = []
    for number, page in enumerate(layout.split("<page ")[1:], 1):
        for x0, y0, _, y1, text in re.findall(
            r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)</word>',
            page,
        ):
            words.append((number, html.unescape(text), float(x0), float(y1) - float(y0)))
    return words


def _class(n: int) -> dict:
    """``n`` students; student 3 writes hostile HTML, student 4 leaves ``how`` empty."""
    answers = {}
    for k in range(n):
        why = f"Answer of student {k}: the cause is the learning rate, $\\eta = 0.{k}$."
        how = f"Lower it to 0.0{k}, student {k}."
        if k == 3:
            why = HOSTILE
        if k == 4:
            how = ""
        answers[f"s{k:02d}"] = {"why": why, "how": how}
    return answers


def _with_roster(out, names: dict) -> None:
    """The gradebook's rows named by their roster students, as `lablib grade --roster` writes them."""
    path = out / "grades.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    for entry in data["submissions"]:
        if entry["submission"] in names:
            sid, name, email = names[entry["submission"]]
            entry["student"] = {"student_id": sid, "name": name, "email": email}
    atomic_write(path, json.dumps(data))


def _roster(n: int) -> dict:
    people = {
        f"s{k:02d}": (f"20{k:04d}", f"Student {k} Lastname", f"s{k}@uni.example") for k in range(n)
    }
    people["s01"] = ("200001", "José Núñez", "jose@uni.example")
    people["s02"] = (
        "../../etc/passwd",
        "Path Tricks",
        "p@uni.example",
    )  # an id that is no file name
    return people


class _Elements(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


#: The printed page's own elements (the cover and the sections); the answers' come from render.TAGS.
PAGE_TAGS = {
    "html",
    "head",
    "meta",
    "title",
    "style",
    "body",
    "div",
    "h1",
    "h2",
    "table",
    "tr",
    "th",
    "td",
    "p",
    "ol",
    "li",
    "section",
}


def _check_printed_html(page: str) -> None:
    """Nothing live from a student: only the allowlist's elements, no script, link,
    image, frame or event handler; one style element (the page's)."""
    parser = _Elements()
    parser.feed(page)
    tags = [t for t, _ in parser.tags]
    assert tags.count("style") == 1 and tags.count("meta") == 2, tags
    for tag, attrs in parser.tags:
        assert tag in TAGS | PAGE_TAGS and tag != "a", tag
        for name, value in attrs.items():
            assert not name.startswith("on") and name not in (
                "src",
                "href",
                "srcdoc",
                "style",
                "id",
                "action",
            ), (tag, name, value)
    assert (
        "<script" not in page and "<img" not in page and "<iframe" not in page and "<a " not in page
    )


def test_a_pdf_per_student_in_gradescopes_order(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    n = 30
    rows = [result(name, answers) for name, answers in _class(n).items()]
    broken = result("s99", {})
    broken.status = Status.of([Kind.INVALID_NOTEBOOK])
    report.write_reports(out, lab, rows + [broken])
    people = _roster(n)
    people["s99"] = ("209999", "Broken Notebook", "b@uni.example")
    _with_roster(out, people)
    dest = tmp_path / "pdfs"
    manifest = printout.write_printouts(
        out, lab, dest, questions="how,why", html=True, engine="playwright"
    )
    assert manifest["questions"] == ["how", "why"] and manifest["engine"] == "playwright"
    files = sorted(p.name for p in dest.glob("*.pdf"))
    assert len(files) == n + 1 == len(manifest["students"])
    assert (
        "200001.pdf" in files
        and ".._.._etc_passwd.pdf" not in files
        and "_.._etc_passwd.pdf" in files
    ), files
    assert not list(tmp_path.glob("etc*")) and all(p.parent == dest for p in dest.glob("*.pdf"))
    by_submission = {e["submission"]: e for e in manifest["students"]}
    for submission, entry in by_submission.items():
        pdf = dest / entry["file"]
        assert pdf.read_bytes().startswith(b"%PDF")
        assert _pages(pdf) == entry["pages"] == 3, (
            submission,
            entry,
        )  # a cover, then a page per question
    # one student's pages: the cover names the student, then the answers in Gradescope's order
    jose = _pdftotext(dest / by_submission["s01"]["file"])
    pages = jose.split("\f")
    assert "José Núñez" in pages[0] and "200001" in pages[0] and "s01" in pages[0]
    assert "Question 1: how" in pages[1] and "Lower it to 0.01, student 1." in pages[1]
    assert (
        "Question 2: why" in pages[2]
        and "Answer of student 1: the cause is the learning rate" in pages[2]
    )
    assert "𝜂" in pages[2] or "η" in pages[2], "the formula is drawn (MathML), not left as TeX"
    assert "\\eta" not in jose
    # the hostile answer: shown as text, nothing of it live in what was printed
    hostile = _pdftotext(dest / by_submission["s03"]["file"])
    assert '<b id="x">bold</b>' in hostile and "click" in hostile
    page = (dest / "html" / by_submission["s03"]["file"].replace(".pdf", ".html")).read_text(
        encoding="utf-8"
    )
    _check_printed_html(page)
    assert "<math" in page and "&lt;b" in page and "bold&lt;/b&gt;" in page
    for entry in manifest["students"]:
        _check_printed_html(
            (dest / "html" / entry["file"].replace(".pdf", ".html")).read_text(encoding="utf-8")
        )
    assert "No answer written." in _pdftotext(dest / by_submission["s04"]["file"]).split("\f")[1]
    unreadable = _pdftotext(dest / by_submission["s99"]["file"])
    assert "Broken Notebook" in unreadable and unreadable.count("could not be read") == 2
    assert by_submission["s99"]["unreadable"] and by_submission["s99"]["digests"] == {
        "how": "missing",
        "why": "missing",
    }


def test_the_chromium_command_line_prints_the_same_without_playwright(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(
        out,
        lab,
        {
            "alice": {"why": "Because $a^2$.", "how": "Like this."},
            "bob": {"why": HOSTILE, "how": ""},
        },
    )
    manifest = printout.write_printouts(out, lab, tmp_path / "pdfs", engine="cli")
    assert manifest["engine"] == "cli" and sorted(e["file"] for e in manifest["students"]) == [
        "alice.pdf",
        "bob.pdf",
    ]
    text = _pdftotext(tmp_path / "pdfs" / "bob.pdf")
    assert _pages(tmp_path / "pdfs" / "bob.pdf") == 3 and '<b id="x">bold</b>' in text
    assert "file:" not in text and "lablib-print" not in text, (
        "no header or footer with the temporary file's path"
    )
    assert "Because" in _pdftotext(tmp_path / "pdfs" / "alice.pdf")


def test_errors_say_what_to_do(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, {"alice": {"why": "a", "how": "b"}})
    with pytest.raises(printout.PrintoutError, match="unknown \\['nope'\\], missing \\['how'\\]"):
        printout.write_printouts(out, lab, tmp_path / "pdfs", questions="why,nope")
    with pytest.raises(printout.PrintoutError, match="is not an executable"):
        printout.write_printouts(out, lab, tmp_path / "pdfs", chromium="/no/such/chromium")


def test_file_names_fit_every_file_system(tmp_path):
    """A student's key of 84 CJK characters (252 bytes) made a PDF name too long; a key
    like CON names a device on Windows; invisible characters made look-alike names."""
    lab = written_lab()
    out = tmp_path / "out"
    keys = ["alice", "学" * 84, "学" * 84 + "x", "CON", "nul.txt", "al\u200bice", "alice\U000e0020"]
    keys += ["alıce", "ALİCE"]  # one file with alice where case is ignored (NTFS, macOS)
    keys += ["-rf", " -2+3"]  # an option to `ls *` or `rm *` in the folder of PDFs
    write_class(out, lab, {key: {"why": "w", "how": "h"} for key in keys})
    stems = {s.submission: s.stem for s in printout.class_students(out, lab)}
    assert stems["alice"] == "alice" and stems["学" * 84] == "学" * 50
    assert stems["学" * 84 + "x"] == "学" * 50 + "-2"
    assert stems["CON"] == "_CON" and stems["nul.txt"] == "_nul.txt"
    assert stems["-rf"] == "_rf" and stems[" -2+3"] == "_2+3"
    assert len({same_file(s) for s in stems.values()}) == len(keys)
    assert all(s.isprintable() for s in stems.values()) and "alice" not in (
        stems["al\u200bice"],
        stems["alice\U000e0020"],
    )
    dest = tmp_path / "pdfs"
    (dest / "html").mkdir(parents=True)
    for stem in stems.values():  # the names write_printouts writes, through the temporary file
        atomic_write(dest / f"{stem}.pdf", b"%PDF")
        atomic_write(dest / "html" / f"{stem}.html", "<p>")
    assert len(list(dest.glob("*.pdf"))) == len(keys)


def test_the_peoples_points_as_csv(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(
        out, lab, {"alice": {"why": "a", "how": "b"}, "=HYPERLINK(1)": {"why": "c", "how": "d"}}
    )
    store = ReviewStore(out / DB_NAME, lab)
    cause, numbers, _ = [r.id for r in store.rubric("why")]
    extra = store.save_item("why", 1, "Clear.").id
    from lablib.grading.results import WrittenAnswer

    store.apply(
        ["alice"],
        "why",
        {"items": [cause, numbers, extra], "comment": "Well put."},
        digest={"alice": WrittenAnswer("a").digest},
    )
    path = tmp_path / "points.csv"
    assert printout.write_points_csv(out, lab, path) == 4
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert [r["question"] for r in rows] == ["why", "how", "why", "how"]
    alice = next(r for r in rows if r["student"] == "alice" and r["question"] == "why")
    assert (alice["points"], alice["max_points"], alice["status"]) == ("4", "4", "graded")
    assert alice["comment"] == (
        "'+2: Names the cause.; +2: Gives numbers.; +1: Clear.; Comment: Well put.; "
        "3 items add to +5; capped at the question's 4 points."
    ), "text, never a formula"
    assert (
        next(r for r in rows if r["question"] == "how" and r["student"] == "alice")["status"]
        == "not graded"
    )
    assert any(r["student"] == "'=HYPERLINK(1)" for r in rows), (
        "a name that looks like a formula stays text"
    )


# ---------------------------------------------------------------------------- Gradescope's evaluations


def _evaluations_csv(rows, items) -> str:
    """A CSV as Gradescope's Export Evaluations writes one question's: its columns, one
    row per submission, the rubric's points, type and scoring method below."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    head = [
        "Assignment Submission ID",
        "Question Submission ID",
        "Name",
        "SID",
        "Email",
        "Sections",
        "Score",
        "Submission Time",
        "Adjustment",
        "Comments",
        "Grader",
        "Tags",
    ]
    writer.writerow(head + [name for name, _ in items])
    for k, (name, sid, email, score, adjustment, comment, applied) in enumerate(rows):
        writer.writerow(
            [
                f"30{k}",
                f"40{k}",
                name,
                sid,
                email,
                "",
                score,
                "2026-11-20 23:10:00 +0100",
                adjustment,
                comment,
                "TA One" if score != "" else "",
                "",
            ]
            + ["true" if item in applied else "false" for item, _ in items]
        )
    writer.writerow(["Point Values"] + [""] * (len(head) - 1) + [points for _, points in items])
    writer.writerow(["Rubric Type"] + [""] * (len(head) - 1) + ["positive"] * len(items))
    writer.writerow(["Scoring Method"] + [""] * (len(head) - 1) + ["Sum"] * len(items))
    return buffer.getvalue()


def test_gradescopes_evaluations_come_back_into_the_review_store(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    n = 6
    write_class(out, lab, _class(n))
    _with_roster(out, _roster(n))
    printed = tmp_path / "pdfs"
    printout.write_printouts(out, lab, printed, questions="how,why")
    # s05 resubmits after the PDFs were made: Gradescope's grade is for the text printed
    changed = dict(_class(n), s05={"why": "A new answer.", "how": "A new fix."})
    write_class(out, lab, changed)
    _with_roster(out, _roster(n))
    store = ReviewStore(out / DB_NAME, lab)
    local = store.rubric("why")[0].id
    store.apply(["s02"], "why", {"items": [local]}, grader="ta2")  # graded in lablib meanwhile
    why_items = [
        ("Names the cause.", 2.0),
        ("Gives numbers.", 2.0),
        ("Bonus: cites the paper", 1.0),
    ]
    how_items = [("A fix that works.", 3.0), ("Off topic.", -1.0)]
    roster = _roster(n)
    why_rows = [
        (roster[s][1], roster[s][0], roster[s][2], score, adj, comment, applied)
        for s, score, adj, comment, applied in [
            ("s00", 4, "", "Good.", {"Names the cause.", "Gives numbers."}),
            ("s01", 4, "", "", {"Names the cause.", "Gives numbers.", "Bonus: cites the paper"}),
            ("s02", 2, "", "", {"Gives numbers."}),
            ("s03", 1.5, -0.5, "Half.", {"Names the cause."}),
            ("s04", "", "", "", set()),
            ("s05", 2, "", "", {"Names the cause."}),
        ]
    ]
    why_rows.append(("Not In Class", "999", "ghost@uni.example", 4, "", "", {"Names the cause."}))
    how_rows = [
        (roster[s][1], "", roster[s][2], score, "", "", applied)
        for s, score, applied in [
            ("s00", 3, {"A fix that works."}),
            ("s01", 2, {"A fix that works.", "Off topic."}),
            ("s03", 0, {"Off topic."}),
        ]
    ]
    archive = tmp_path / "assignment_123_export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("assignment_123_export/2_Question_2.csv", _evaluations_csv(why_rows, why_items))
        z.writestr(
            "assignment_123_export/1_How_to_fix_it.csv", _evaluations_csv(how_rows, how_items)
        )
    summary = printout.import_gradescope(
        out, lab, archive, questions="how,why", printout=printed, grader="prof"
    )
    assert summary["imported"] == {"why": 4, "how": 3}, summary
    assert summary["ungraded"] == 1 and summary["items_added"] == 1
    assert len(summary["unmatched"]) == 1 and "Not In Class" in summary["unmatched"][0]
    assert len(summary["conflicts"]) == 1 and "s02" in summary["conflicts"][0]
    store = ReviewStore(out / DB_NAME, lab)
    digests = {
        s: {q: a.digest for q, a in result(s, t).answers.items()} for s, t in changed.items()
    }
    scores = store.person_scores(list(changed), digests)
    assert scores["s00"]["why"].score == 4 and scores["s00"]["why"].comment == "Good."
    assert scores["s01"]["why"].score == 4, "Gradescope's 5 within the question's 4 points"
    assert scores["s03"]["why"].score == 1.5 and scores["s03"]["why"].adjustment == -0.5
    assert scores["s01"]["how"].score == 2 and scores["s03"]["how"].score == 0
    assert [c for _, c in scores["s01"]["how"].items] == ["A fix that works.", "Off topic."]
    assert scores["s02"]["why"].score == 2 and scores["s02"]["why"].grader == "ta2", (
        "lablib's grade kept"
    )
    assert scores["s05"]["why"].stale, "graded for the text printed; the student changed it since"
    assert not scores["s00"]["why"].stale
    assert any(r.comment == "Bonus: cites the paper" and r.points == 1 for r in store.rubric("why"))
    assert all(
        e["grader"] == "prof (Gradescope: TA One)"
        for e in store.events()
        if e["what"] == "grade" and e["submission"] != "s02"
    )
    # again: nothing changes; with --replace (from the command line) lablib's grade of s02 is Gradescope's
    again = printout.import_gradescope(
        out, lab, archive, questions="how,why", printout=printed, grader="prof"
    )
    assert again["imported"] == {"why": 0, "how": 0} and again["unchanged"] == 7
    spec = (
        tmp_path / "lab9_written.py"
    )  # the lab as a spec file, as a course's own lab is given to lablib
    spec.write_text(
        "from review_fixtures import written_lab\nlab = written_lab()\n", encoding="utf-8"
    )
    assert (
        cli.main(
            [
                "written",
                "import",
                str(spec),
                str(out),
                str(archive),
                "--questions",
                "how,why",
                "--printout",
                str(printed),
                "--grader",
                "prof",
                "--replace",
            ]
        )
        == 0
    )
    assert (
        ReviewStore(out / DB_NAME, lab).person_scores(["s02"])["s02"]["why"].grader
        == "prof (Gradescope: TA One)"
    )


def test_a_gradescope_row_named_like_two_rows_and_a_refused_grade_are_said(tmp_path, capsys):
    """``Erin.ipynb`` and ``erin.ipynb`` graded as rows ``Erin`` and ``erin-2``: a row named
    ``erin`` was imported into ``Erin`` (the name folded named one row); it names both
    now, and is unmatched. A grade the review log refuses is "refused" (it was counted as
    "kept as graded in lablib", with a note that Gradescope's score was kept within the
    points) and the command exits 1; a Score of ``nan`` is no number."""
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, {n: {"why": n, "how": "h"} for n in ("Erin", "erin-2", "zed")})
    items = [("Names the cause.", 2.0)]
    rows = [
        ("erin", "", "", 2, "", "", {"Names the cause."}),
        ("erin-2", "", "", 2, "", "", {"Names the cause."}),
        ("zed", "", "", 1e308, "", "", {"Names the cause."}),
    ]
    evaluations = tmp_path / "2_why.csv"
    evaluations.write_text(_evaluations_csv(rows, items), encoding="utf-8")
    got = printout.import_gradescope(
        out, lab, evaluations, questions="how,why", grader="prof", question_map={"2": "why"}
    )
    assert got["imported"] == {"why": 1}, got  # erin-2 by its own name
    (unmatched,) = got["unmatched"]
    assert "'erin' names 2 rows" in unmatched, unmatched
    (refused,) = got["refused"]
    assert "zed" in refused and got["conflicts"] == [] and got["capped"] == [], got
    scores = ReviewStore(out / DB_NAME, lab).person_scores(["Erin", "erin-2"])
    assert scores["erin-2"]["why"].score == 2 and not scores["Erin"]["why"].graded
    spec = tmp_path / "lab9_written.py"
    spec.write_text(
        "from review_fixtures import written_lab\nlab = written_lab()\n", encoding="utf-8"
    )
    command = ["written", "import", str(spec), str(out), str(evaluations), "--question", "2=why"]
    assert cli.main(command) == 1
    said = capsys.readouterr()
    assert "not imported: why: zed" in said.err and "1 refused" in said.out, said
    evaluations.write_text(
        _evaluations_csv([("zed", "", "", "nan", "", "", set())], items), encoding="utf-8"
    )
    with pytest.raises(printout.PrintoutError, match="not a finite number"):
        printout.import_gradescope(out, lab, evaluations, question_map={"2": "why"})


def test_a_gradescope_row_is_never_matched_by_a_name_its_ids_contradict(tmp_path):
    """Gradescope's John Smith (SID 9999, another address) shares a name with the
    gradebook's John Smith (2001): matched by the name, his 0 ("Plagiarised") was given
    to the other John Smith. A row whose SID or e-mail contradicts the name's student is
    unmatched; one whose ids agree, or that has none, is matched by the name."""
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, {"js_2001": {"why": "John's answer", "how": "h"}})
    _with_roster(out, {"js_2001": ("2001", "John Smith", "jsmith@uni.example")})
    path = tmp_path / "1_why.csv"
    items = [("Names the cause.", 2.0)]
    for sid, email, matched in [
        ("9999", "other.john@uni.example", False),
        ("", "other.john@uni.example", False),
        ("", "", True),
        ("2001", "", True),
    ]:
        row = ("John Smith", sid, email, 0, "", "Plagiarised: 0", {"Names the cause."})
        path.write_text(_evaluations_csv([row], items), encoding="utf-8")
        got = printout.import_gradescope(out, lab, path, question_map={"1": "why"}, replace=True)
        assert (not got["unmatched"]) is matched, (sid, email, got)
        if not matched:
            assert "is the row 'js_2001''s, but its" in got["unmatched"][0], got


def test_a_gradescope_grade_is_for_the_text_printed_even_under_a_new_row_name(tmp_path):
    """Alice's answer was printed as row alice_100; she resubmitted, and the regrade named
    her row alice_300. Her Gradescope grade, given to the printed text, was stored against
    the text she has now (the row was not in the printout): never stale. It is stored
    against the printed text, found by her student id; a row the printout has neither
    under its name nor its student's gets a grade stale at once."""
    lab = written_lab()
    out = tmp_path / "out"
    printed_text = "The original answer, printed."
    write_class(
        out,
        lab,
        {"alice_300": {"why": "A new answer.", "how": "h"}, "bob": {"why": "b", "how": "h"}},
    )
    _with_roster(out, {"alice_300": ("1001", "Alice A", "alice@uni.example"),
                       "bob": ("1002", "Bob B", "bob@uni.example")})  # fmt: skip
    printed = tmp_path / "pdfs"
    printed.mkdir()
    entry = {"file": "1001.pdf", "key": "1001", "name": "Alice A", "student_id": "1001",
             "email": "alice@uni.example", "submission": "alice_100",
             "digests": {"why": text_digest(printed_text)}}  # fmt: skip
    (printed / "manifest.json").write_text(
        json.dumps({"lab": lab.name, "students": [entry]}), encoding="utf-8"
    )
    rows = [
        ("Alice A", "1001", "alice@uni.example", 2, "", "", {"Names the cause."}),
        ("Bob B", "1002", "bob@uni.example", 2, "", "", {"Names the cause."}),
    ]
    path = tmp_path / "1_why.csv"
    path.write_text(_evaluations_csv(rows, [("Names the cause.", 2.0)]), encoding="utf-8")
    got = printout.import_gradescope(out, lab, path, question_map={"1": "why"}, printout=printed)
    assert got["imported"] == {"why": 2}, got
    store = ReviewStore(out / DB_NAME, lab)
    digests = {"alice_300": {"why": text_digest("A new answer.")}, "bob": {"why": text_digest("b")}}
    scores = store.person_scores(["alice_300", "bob"], digests)
    assert scores["alice_300"]["why"].stale, "graded for the text printed, not the new one"
    assert scores["bob"]["why"].stale, "not in the printout at all: for a person to look again"


def test_an_evaluations_file_that_names_no_question_is_refused(tmp_path):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, {"alice": {"why": "a", "how": "b"}})
    path = tmp_path / "7_Something_else.csv"
    path.write_text(
        _evaluations_csv([("alice", "", "", 1, "", "", set())], [("x", 1.0)]), encoding="utf-8"
    )
    with pytest.raises(printout.PrintoutError, match=r"--question 7=<id>"):
        printout.import_gradescope(out, lab, path)
    report_ = printout.import_gradescope(out, lab, path, question_map={"7": "how"})
    assert report_["imported"] == {"how": 1}
    bad = tmp_path / "1_x.csv"
    bad.write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(printout.PrintoutError, match="not a Gradescope evaluations CSV"):
        printout.import_gradescope(out, lab, bad)


def test_the_command_line(tmp_path, capsys):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(
        out,
        lab,
        {"alice": {"why": "Because $a^2$.", "how": "Like this."}, "bob": {"why": "No.", "how": ""}},
    )
    spec = tmp_path / "lab9_written.py"
    spec.write_text(
        "from review_fixtures import written_lab\nlab = written_lab()\n", encoding="utf-8"
    )
    assert (
        cli.main(["written", "pdf", str(spec), str(out), "-o", str(tmp_path / "pdfs"), "--html"])
        == 0
    )
    said = capsys.readouterr().out
    assert "wrote 2 PDFs (6 pages, questions why, how)" in said, said
    assert sorted(p.name for p in (tmp_path / "pdfs").iterdir()) == [
        "alice.pdf",
        "bob.pdf",
        "html",
        "manifest.json",
    ]
    assert (
        cli.main(["written", "points", str(spec), str(out), "-o", str(tmp_path / "points.csv")])
        == 0
    )
    assert "4 rows" in capsys.readouterr().out
    assert (
        cli.main(
            ["written", "pdf", str(spec), str(out), "-o", str(tmp_path / "x"), "--questions", "why"]
        )
        == 2
    )
    assert "missing ['how']" in capsys.readouterr().err


def test_font_coverage_from_fontconfigs_charsets():
    gaps = FontGaps(parse_charsets("20-7e a0-17f 391-3c9 zz 4e00-4e0f"))
    assert gaps.covers("é") and gaps.covers("λ") and gaps.covers("丁")
    assert not gaps.covers("张") and not gaps.covers("ж")
    # in order, once each, nothing that draws nothing (a zero-width joiner, a combining accent)
    assert gaps.missing("Zhang Wei 张伟, ж\u200d\u0301 张") == "张伟ж"
    assert gaps.missing("plain café, λ") == ""
    assert (
        gaps.missing("ж" + "".join(chr(0x4E10 + k) for k in range(30)), limit=3) == "ж\u4e10\u4e11"
    )


def _latin_fonts_only(tmp_path, monkeypatch):
    """fontconfig (and the Chromium it serves) made to see DejaVu's fonts alone, as on a
    machine without CJK fonts."""
    match = subprocess.run(
        ["fc-match", "-f", "%{file}", "DejaVu Sans"], capture_output=True, text=True, check=True
    )
    assert "DejaVu" in match.stdout, f"fc-match found no DejaVu Sans: {match.stdout!r}"
    conf = tmp_path / "fonts.conf"
    conf.write_text(
        "<?xml version='1.0'?>\n<!DOCTYPE fontconfig SYSTEM 'fonts.dtd'>\n<fontconfig>"
        f"<dir>{pathlib.Path(match.stdout).parent}</dir>"
        f"<cachedir>{tmp_path / 'fc-cache'}</cachedir></fontconfig>\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("FONTCONFIG_FILE", str(conf))


def test_a_pdf_with_characters_no_font_draws_is_named(tmp_path, monkeypatch, capsys):
    lab = written_lab()
    out = tmp_path / "out"
    write_class(
        out,
        lab,
        {
            "alice": {"why": "Because $a^2$, café.", "how": "Like this."},
            "wei": {"why": "注意力 is attention.", "how": "\u202eevil"},
        },
    )
    _with_roster(out, {"wei": ("2001", "张伟", "wei@uni.example")})
    spec = tmp_path / "lab9_written.py"
    spec.write_text(
        "from review_fixtures import written_lab\nlab = written_lab()\n", encoding="utf-8"
    )
    _latin_fonts_only(tmp_path, monkeypatch)
    assert printout.font_gaps().missing("张 é") == "张"
    assert cli.main(["written", "pdf", str(spec), str(out), "-o", str(tmp_path / "pdfs")]) == 0
    said = capsys.readouterr().err
    assert "1 PDF(s) hold characters that no font on this machine draws" in said, said
    assert "2001.pdf (张伟注意力)" in said and "fonts-noto-cjk" in said and "alice" not in said
    raw = (tmp_path / "pdfs" / "manifest.json").read_bytes()
    assert raw.isascii(), "names (the roster's, the students') are escaped, never raw"
    manifest = json.loads(raw)
    assert manifest["fonts_checked"] is True
    assert {e["file"]: e["missing_glyphs"] for e in manifest["students"]} == {
        "2001.pdf": "张伟注意力",
        "alice.pdf": "",
    }


def test_the_text_checked_for_fonts_is_the_page_as_printed():
    """What Chromium draws: the answer's text and what MathML draws for its LaTeX (U+1D524
    for \\mathfrak{g}, never in the markdown), the question titles; not the markup."""
    lab = written_lab()
    [row] = [result("wei", {"why": "张 $\\mathfrak{g}$ <b>x</b>", "how": ""})]
    student = printout.Student("wei", "Wei", "", "", "wei", dict(row.answers), False)
    text = printout._printed_text(printout.printout_html(lab, student, list(lab.answers.values())))
    assert "张" in text and "\U0001d524" in text and "why it works" in text
    assert "<b>x</b>" in text  # shown as written: the student's markup is text on the page
    assert "<section" not in text and "data-question" not in text and "font-family" not in text
    assert "mathfrak" not in text


def test_a_printout_says_what_the_review_page_says_of_an_answer():
    """An answer split over two cells (joined) carried a note on the review page only: the
    printout joined them without a word, and a grader on Gradescope never saw it. Its
    notes now head its box, escaped."""
    from lablib.grading.results import WrittenAnswer

    lab = written_lab()
    joined = WrittenAnswer(
        "first part\n\nsecond part",
        "tag",
        ("2 cells hold this answer (cells 3, 9); their texts are joined",),
    )
    hostile = WrittenAnswer("x", "tag", ("<img src=x onerror=alert(1)>",))
    student = printout.Student("wei", "Wei", "", "", "wei", {"why": joined, "how": hostile}, False)
    page = printout.printout_html(lab, student, list(lab.answers.values()))
    assert "Note: 2 cells hold this answer (cells 3, 9); their texts are joined." in page
    assert "<img" not in page and "&lt;img" in page


#: An answer that painted a fake ID over the cover's ID cell (a formula raised a page).
COVER_ATTACK = r"Intro.$\hspace{48pt}\smash{\raise{728pt}{\text{█████████ S3}}}$"


def test_an_answer_stays_in_its_own_box_and_pages(tmp_path):
    """\\rule{1pt}{2000000pt} printed 2,664 pages; \\raise{728pt} drew a fake ID on the
    cover. The lengths are bounded and each answer is drawn only inside its own box: the
    cover is the same, to the pixel, as that of the same student with honest answers."""
    lab = written_lab()
    hostile = {
        "why": r"Tall: $\rule{1pt}{2000000pt}$, wide: $\hspace{-3000cm}x$, $\lower{900pt}{y}$.",
        "how": COVER_ATTACK,
    }
    honest = {"why": "Tall.", "how": "Intro."}
    for name, answers in (("hostile", hostile), ("honest", honest)):
        write_class(tmp_path / name, lab, {"mallory": answers})
        manifest = printout.write_printouts(
            tmp_path / name, lab, tmp_path / f"{name}-pdfs", engine="playwright"
        )
        assert [e["pages"] for e in manifest["students"]] == [3] and not manifest["not_printed"]
    printed = tmp_path / "hostile-pdfs" / "mallory.pdf"
    assert _pages(printed) == 3
    assert _raster(printed, 1) == _raster(tmp_path / "honest-pdfs" / "mallory.pdf", 1), (
        "the cover shows nothing of an answer"
    )
    cover = _pdftotext(printed).split("\f")[0]
    assert "S3" not in cover and "█" not in cover and "mallory" in cover


def test_a_students_heading_is_part_of_the_answer(tmp_path):
    """A student's "## Question 2: ..." moved to the top of a page looked like lablib's
    header: lablib's headers have a class of their own, a student's are drawn small,
    inside the answer's box (indented by its bar)."""
    lab = written_lab()
    out = tmp_path / "out"
    why = (
        "The cause is the learning rate.\n\n$\\rule{0pt}{672pt}$\n\n"
        "## Question 2: how: how to fix it (3 points)\n\nLower the learning rate to 1e-4.\n"
    )
    write_class(out, lab, {"mallory": {"why": why, "how": "idk"}})
    printout.write_printouts(out, lab, tmp_path / "pdfs", engine="playwright", html=True)
    page = (tmp_path / "pdfs" / "html" / "mallory.html").read_text(encoding="utf-8")
    assert page.count("<h2 class='question-title'>") == 2
    assert "<div class='answer'><p>The cause" in page and "<h2>Question 2: how" in page
    words = _words(tmp_path / "pdfs" / "mallory.pdf")
    headers = [w for w in words if w[1] == "Question"]
    assert len(headers) == 3, headers
    (fake,) = [w for w in headers if w[0] == 2 and w is not headers[0]]
    real = [w for w in headers if w is not fake]
    assert all(abs(w[3] - real[0][3]) < 0.1 and abs(w[2] - real[0][2]) < 0.1 for w in real)
    assert fake[3] < 0.9 * real[0][3], ("a student's heading is smaller", fake, real)
    assert fake[2] > real[0][2] + 5, ("and inside the answer's box", fake, real)
    assert [w[0] for w in real] == [2, 3], "lablib's headers start the questions' pages"


def _planted(real):
    """``printout_html`` with what no answer can write any more planted in two students':
    a formula Chromium lays out for ever (mallory), 200 pages (bob)."""

    def page(lab, student, questions):
        text = real(lab, student, questions)
        if student.submission == "mallory":
            bomb = "<math><mspace width='1pt' height='20000000pt'></mspace></math>"
            return text.replace("</body>", bomb + "</body>")
        if student.submission == "bob":
            return text.replace(
                "</body>", "<section class='question'>more</section>" * 200 + "</body>"
            )
        return text

    return page


def test_a_pdf_not_made_in_time_or_pages_is_listed_and_the_class_goes_on(
    tmp_path, monkeypatch, capsys
):
    """Playwright's page.pdf had no time limit (a formula 20,000,000 pt tall printed for
    over 400 s), the command line's TimeoutExpired stopped the class: now each student has
    its time and pages, and one past them is listed, its PDF not written."""
    lab = written_lab()
    out = tmp_path / "out"
    fine = {"why": "Because $a^2$.", "how": "Like this."}
    write_class(out, lab, {"alice": fine, "bob": fine, "mallory": fine, "zoe": fine})
    monkeypatch.setattr(printout, "printout_html", _planted(printout.printout_html))
    dest = tmp_path / "pdfs"
    dest.mkdir()
    for engine, timeout in (("playwright", 5), ("cli", 12)):
        (dest / "mallory.pdf").write_bytes(b"%PDF-1.4 of an earlier run")
        manifest = printout.write_printouts(
            out, lab, dest, engine=engine, timeout=timeout, html=True
        )
        assert [e["submission"] for e in manifest["students"]] == ["alice", "zoe"], engine
        why = {e["submission"]: e["why"] for e in manifest["not_printed"]}
        assert sorted(why) == ["bob", "mallory"], why
        # Chromium ends the tall formula by time or by pages, as fast as the machine is
        assert why["mallory"].startswith(f"not printed in {timeout} s (Chromium was stopped)") or (
            "more than 81 pages" in why["mallory"]
        ), why
        assert "more than 81 pages" in why["bob"], why
        assert sorted(p.name for p in dest.glob("*.pdf")) == ["alice.pdf", "zoe.pdf"]
        assert all(_pages(dest / f) == 3 for f in ("alice.pdf", "zoe.pdf"))
        assert (dest / "html" / "mallory.html").is_file()
        assert manifest["limits"] == {"seconds": timeout, "pages": 81}
        saved = json.loads((dest / "manifest.json").read_text(encoding="utf-8"))
        assert saved["not_printed"] == manifest["not_printed"]
    # a browser that never ends one page (a stand-in that sleeps for the tall formula's
    # page): stopped at the time limit, whatever the machine's speed
    real = shutil.which("chromium") or shutil.which("chromium-browser")
    slow = tmp_path / "slow-chromium"
    slow.write_text(
        "#!/bin/sh\n"
        'for a; do case "$a" in file://*) grep -q 20000000pt "${a#file://}" && exec sleep 60;; '
        "esac; done\n"
        f'exec "{real}" "$@"\n'
    )
    slow.chmod(0o755)
    manifest = printout.write_printouts(out, lab, dest, engine="cli", chromium=str(slow), timeout=4)
    why = {e["submission"]: e["why"] for e in manifest["not_printed"]}
    assert why["mallory"].startswith("not printed in 4 s (Chromium was stopped)"), why
    assert [e["submission"] for e in manifest["students"]] == ["alice", "zoe"]
    # the command line names who and why, and says so in its exit status
    write_class(tmp_path / "out2", lab, {"alice": fine, "bob": fine})
    spec = tmp_path / "lab9_written.py"
    spec.write_text(
        "from review_fixtures import written_lab\nlab = written_lab()\n", encoding="utf-8"
    )
    code = cli.main(
        ["written", "pdf", str(spec), str(tmp_path / "out2"), "-o", str(tmp_path / "x")]
    )
    said = capsys.readouterr()
    assert code == 1 and "wrote 1 PDFs (3 pages" in said.out, said
    assert "lablib written: not printed: bob (bob), no bob.pdf: more than 81 pages" in said.err
    assert "lablib review" in said.err


@pytest.mark.parametrize("damage", ["a test record of another shape", "two rows of one name"])
def test_a_gradebook_row_that_cannot_be_read_is_an_error_not_a_missing_student(tmp_path, damage):
    """A row of grades.json that cannot be read (a hand edit, a newer lablib's field) was
    left off the review page, the PDFs and points.csv without a word: the class looked
    smaller and no one was told. The page, the printouts and the points refuse, naming
    the row, as lablib report does; and so do two rows of one name (the page kept one)."""
    from lablib.grading.gradebook import GradebookError, GradebookFolder
    from lablib.grading.review.server import ReviewApp
    from lablib.grading.review.store import ReviewError

    lab = written_lab()
    out = tmp_path / "out"
    write_class(out, lab, {n: {"why": "w", "how": "h"} for n in ("alice", "bob", "carol")})
    data = json.loads((out / "grades.json").read_text(encoding="utf-8"))
    if damage == "two rows of one name":
        data["submissions"][2] = dict(data["submissions"][0])
        said = "several rows named \\['alice'\\]"
    else:
        data["submissions"][0]["tests"] = [{"no such field": 1}]
        said = "submission 1 \\('alice'\\) cannot be read"
    (out / "grades.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(GradebookError, match=said):
        GradebookFolder(out).results(lab.name)
    with pytest.raises(printout.PrintoutError, match=said):
        printout.class_students(out, lab)
    with pytest.raises(printout.PrintoutError, match=said):
        printout.write_points_csv(out, lab, tmp_path / "points.csv")
    with pytest.raises(ReviewError, match=said):
        ReviewApp(out, lab)


def test_the_cover_rows_stay_where_gradescope_reads_them_and_carry_no_control(tmp_path):
    """A name a student controls (a file name, an LMS display name) that wrapped pushed
    the cover's ID row down, and put the digits it holds where the ID region of an honest
    cover is read; the HTML printout kept escape sequences, clear-screen and bidi
    overrides byte for byte. Each cover cell is one line now, cut where it does not fit,
    and the printout shows control characters as symbols."""
    lab = written_lab()
    hostile = "_" * 66 + " 1001 mallory\x1b]0;owned\x07\x1b[2J\u202e"
    for folder, name in (("honest", "mallory"), ("hostile", hostile)):
        write_class(tmp_path / folder, lab, {name: {"why": "Tall.\x1b[2J\x9b31m", "how": "x"}})
        printout.write_printouts(
            tmp_path / folder, lab, tmp_path / f"{folder}-pdfs", engine="playwright", html=True
        )
    pages = [
        p.read_text(encoding="utf-8") for p in (tmp_path / "hostile-pdfs" / "html").glob("*.html")
    ]
    assert len(pages) == 1 and not set(pages[0]) & set("\x1b\x07\x9b\u202e"), "no raw control"
    assert "␛" in pages[0] and "[U+202E]" in pages[0]

    def cover_rows(folder):
        (pdf,) = (tmp_path / f"{folder}-pdfs").glob("*.pdf")
        layout = subprocess.run(
            ["pdftotext", "-bbox", "-f", "1", "-l", "1", str(pdf), "-"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return {
            text: float(y0)
            for y0, text in re.findall(
                r'<word xMin="[\d.]+" yMin="([\d.]+)"[^>]*>([^<]*)</word>', layout
            )
        }

    honest, forged = cover_rows("honest"), cover_rows("hostile")
    assert forged["ID"] == honest["ID"] and forged["Submission"] == honest["Submission"]
    assert forged.get("1001", forged["Name"]) == forged["Name"], "the name stays in its row"


def test_an_answer_renders_as_written_with_only_its_hostile_characters_shown():
    """Showing every control as a symbol turned an answer saved with CR line breaks into
    one heading, and a zero-width space inside a formula into "[U+200B]" in the MathML:
    line breaks are line feeds, and only escape sequences' characters and bidirectional
    overrides are shown as symbols; a script's marks and joiners stay."""
    from lablib.grading.review.render import render_answer

    page = render_answer("# Result\r- first point\r- second point")
    assert "<h1>Result</h1>" in page and page.count("<li>") == 2
    assert "U+200B" not in render_answer("$L = \\sum_i\u200b y_i$")
    assert "\u200f" in render_answer("אב\u200f") and "\u200d" in render_answer("👩\u200d💻")
    shown = render_answer("x\x1b[2J\x9b y \u202egnp.exe")
    assert "\x1b" not in shown and "\u202e" not in shown and "␛" in shown and "[U+202E]" in shown


def test_an_answer_nested_too_deep_is_shown_whole():
    """A list or quote nested past markdown's limit (20 levels) lost everything after it,
    the rest of the answer included, on the review page and in the printout, without a
    word: from 8 lists (16 quotes) deep, that nested part is shown as typed, said so, and
    what follows it renders as before (a paragraph, its formula drawn); an ordinary nested
    list renders as before."""
    from lablib.grading.review.render import render_answer

    for answer in (
        "- " * 25 + "x\n\nthe rest of the answer, $x^2$",
        ">" * 25 + " q\n\nthe rest of the answer, $x^2$",
        "".join("  " * i + f"- item {i}\n" for i in range(30)) + "\nthe rest of the answer, $x^2$",
    ):
        page = render_answer(answer)
        assert "as typed" in page, page[-300:]
        assert "<p>the rest of the answer, <math" in page, page[-300:]  # not in the <pre>
        assert page.index("<pre") < page.index("<p>the rest")
    listed = render_answer("".join("  " * i + f"- item {i}\n" for i in range(30)))
    assert all(f"item {i}" in listed for i in range(30)), "every item shown, as typed or drawn"
    honest = render_answer("".join("  " * i + "- item\n" for i in range(6)) + "\nend")
    assert honest.count("<li>") == 6 and "as typed" not in honest and "<p>end</p>" in honest


def test_a_matrix_row_ending_in_an_empty_cell_is_drawn_not_dropped():
    """latex2mathml dropped a whole row that ends in "&" (an empty last cell, as LaTeX
    allows): the review page and the printout showed a student's matrix without it, and
    the grader graded what they could not see."""
    from lablib.grading.review.render import render_answer

    page = render_answer(
        "$\\begin{pmatrix}1 & 2 \\\\ 3 & 4 & \\end{pmatrix}$ and $\\begin{matrix}a&b&\\end{matrix}$"
    )
    assert all(f"<mn>{n}</mn>" in page for n in (1, 2, 3, 4)), page
    assert "<mi>a</mi>" in page and "<mi>b</mi>" in page, page
    assert "<mi>&amp;</mi>" in render_answer("$a \\& b \\\\ c$")  # an escaped & stays one
