"""Written answers for Gradescope's manual grading: a PDF per student, the people's points
as CSV, and Gradescope's graded evaluations brought back into the review store.

What otter-grader offers for notebooks (its PDF export, a page break after each
question), made from what ``lablib grade`` already keeps: each student's written answers,
in the order of Gradescope's manual questions (the lab's order, or the one given), drawn
as the review page draws them (markdown, LaTeX as MathML: :mod:`.render`, with an
allowlist sanitiser after every step, and links reduced to their text for print), one
question to a page or more, after a cover page with the student's name and id (what
Gradescope's name and ID regions read). Headless Chromium prints the HTML: through
Playwright when it is installed (one browser for the class, a tenth of a second a
student), else ``chromium --headless --print-to-pdf`` once per student (a second or two
each). Scripts never run in it: the HTML has none, its CSP refuses any, Playwright's page
runs with JavaScript off and offline. Each answer is drawn in a box of its own that clips
what it draws (no formula reaches the cover's ID or another question), and each student
has :data:`PRINT_TIMEOUT_S` seconds and the cover plus :data:`PAGES_PER_QUESTION` pages a
question: past either, no PDF is written for them, they are listed with why, and the
class goes on.

Files (``write_printouts``): ``<dest>/<student>.pdf``, named by the student's identity as
the gradebook holds it (the roster's id, else e-mail, else name; the submission's name
without a roster), made safe as a file name and unique; ``<dest>/manifest.json`` (each
file's student, submission, pages, and the digest of every answer printed: an import
from Gradescope grades that text, so an answer changed since is flagged stale; the
students not printed, with why); ``<dest>/html/<student>.html`` with ``html=True`` (the
page printed).

The way back (:func:`import_gradescope`): Gradescope's *Review Grades > Export
Evaluations* gives a zip of one CSV per question (``<number>_<title>.csv``): one row per
submission (``Assignment Submission ID``, ``Question Submission ID``, ``Name`` or
``First Name``/``Last Name``, ``SID``, ``Email``, ``Sections``, ``Score``, ``Submission
Time``, ``Adjustment``, ``Comments``, ``Grader``, ``Tags``, then one ``true``/``false``
column per rubric item), closed by rows ``Point Values`` (each item's points), ``Rubric
Type`` and ``Scoring Method``. Each question's rubric items become (or reuse) the lablib
question's items, each student's applied items and comment are stored as a grade, and
the adjustment is set so that the score is Gradescope's ``Score``. Students are matched
by SID, e-mail or name to the gradebook's rows.

Example::

    write_printouts("grades/lab2", load_lab("lab2"), "written-pdfs")
    write_points_csv("grades/lab2", load_lab("lab2"), "written_points.csv")
    import_gradescope("grades/lab2", load_lab("lab2"), "evaluations.zip", printout="written-pdfs")
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import csv
import dataclasses
import html
import html.parser
import io
import json
import math
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import unicodedata
import zipfile

from lablib.grading.atomic import atomic_write
from lablib.grading.filenames import STEM_BYTES, cap_bytes, portable, same_file, shown
from lablib.grading.gradebook import GradebookError, GradebookFolder
from lablib.grading.report.feedback_markdown import cap_note
from lablib.grading.report.text import html_text
from lablib.grading.report.gradebook_csv import SpreadsheetWriter
from lablib.grading.report.text import num, person_lines
from lablib.grading.results import Kind
from lablib.grading.review.fonts import font_gaps
from lablib.grading.review.render import render_answer
from lablib.grading.review.store import (
    DB_NAME,
    MISSING_DIGEST,
    ReviewError,
    ReviewStore,
    check_log_kept,
)

__all__ = [
    "PrintoutError",
    "Student",
    "class_students",
    "import_gradescope",
    "printout_html",
    "write_points_csv",
    "write_printouts",
]

#: Browsers looked for on PATH, in this order.
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
#: Seconds one student's PDF may take to print (a tenth of a second through Playwright, a
#: second or two through Chromium's command line): past it, Chromium is stopped and the
#: student is listed as not printed.
PRINT_TIMEOUT_S = 60
#: Pages a student's PDF may have: the cover and this many a question (a 50,000-character
#: answer of short lines prints some 35). A longer PDF is not written; its student is listed.
PAGES_PER_QUESTION = 40
#: The rows that close a Gradescope evaluations CSV (they describe the rubric, not a student).
_FOOTER_ROWS = ("Point Values", "Rubric Type", "Scoring Method")
#: A Gradescope evaluations CSV's own columns; every other column is a rubric item.
_GRADESCOPE_COLUMNS = {
    "Assignment Submission ID",
    "Question Submission ID",
    "Name",
    "First Name",
    "Last Name",
    "SID",
    "Email",
    "Sections",
    "Section",
    "Score",
    "Submission Time",
    "Adjustment",
    "Comments",
    "Grader",
    "Tags",
    "Lateness (H:M:S)",
    "Status",
}


class PrintoutError(ValueError):
    """What cannot be printed or imported, in words: what was given, what was expected,
    how to fix it."""


#: What a wait past its time raises (one class from Python 3.11 on, three before).
_TIMEOUTS = (TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError)


class _NotPrinted(Exception):
    """One student's PDF that could not be made (too slow, too long, Chromium failed):
    the student is listed, the class goes on."""


@dataclasses.dataclass
class Student:
    """One gradebook row as printed: who (``key``: the identity the file is named by),
    the row's submission, its written answers and whether its notebook could be read."""

    key: str
    name: str
    student_id: str
    email: str
    submission: str
    answers: dict
    unreadable: bool
    stem: str = ""


def _norm(text) -> str:
    return unicodedata.normalize("NFC", str(text or "")).strip().casefold()


def _identity(entry: dict) -> tuple[str, str, str, str]:
    """``(key, name, student id, e-mail)`` of a gradebook entry: its ``identity`` (a
    string or a mapping) where the gradebook keeps one, else its roster ``student``, else
    the submission's name."""
    given = entry.get("identity")
    student = entry.get("student")
    if isinstance(given, dict) and (given.get("matched") or not isinstance(student, dict)):
        student = given  # the identity resolved at grading (grade.py), unless only the roster's row names one
    if isinstance(student, dict):
        sid, name, email = (str(student.get(k) or "") for k in ("student_id", "name", "email"))
        key = str(
            student.get("key")
            or sid
            or student.get("lms_id")
            or email
            or name
            or entry["submission"]
        )
        return key, name, sid, email
    if isinstance(given, str) and given.strip():
        return given.strip(), "", "", ""
    return str(entry["submission"]), "", "", ""


_UNSAFE = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]+')


def _file_stem(key: str) -> str:
    """``key`` as a file name on every system: NFC, no separators, control or reserved
    characters, nothing that shows nothing, no leading dot, at most 120 characters and
    :data:`~lablib.grading.filenames.STEM_BYTES` bytes, never a Windows device name nor a
    leading dash."""
    stem = shown(_UNSAFE.sub("_", unicodedata.normalize("NFC", key))).strip().lstrip(".")
    stem = cap_bytes(re.sub(r"\s+", " ", stem)[:120], STEM_BYTES).rstrip(" .")
    return portable(stem) or "student"


def class_students(out_dir, lab, data: dict | None = None) -> list[Student]:
    """The gradebook's rows as :class:`Student` entries, ordered by their key, each with a
    unique file stem (a key shared by two rows gets ``-2``...); ``data``: ``grades.json``
    as already read (read here otherwise)."""
    data = GradebookFolder(out_dir).read() if data is None else data
    if data.get("lab") != lab.name:
        raise PrintoutError(
            f"{pathlib.Path(out_dir) / 'grades.json'} is the gradebook of {data.get('lab')!r}, not of "
            f"{lab.name!r}: give the output folder of `lablib grade {lab.name} ...`."
        )
    try:  # a row that cannot be read is an error, never a student left unprinted unsaid
        rows = GradebookFolder(out_dir).results(lab.name, data)
    except GradebookError as exc:
        raise PrintoutError(str(exc)) from None
    students = []
    for entry, row in zip(data["submissions"], rows):
        key, name, sid, email = _identity(entry)
        unreadable = row.status.has(Kind.INVALID_NOTEBOOK) or not row.answers
        students.append(
            Student(key, name, sid, email, row.submission, dict(row.answers), unreadable)
        )
    students.sort(key=lambda s: (_norm(s.key), s.submission))
    taken: set[str] = set()
    for student in students:
        stem, k = _file_stem(student.key), 1
        while same_file(stem) in taken:  # one file where case or forms are ignored
            k += 1
            stem = f"{_file_stem(student.key)}-{k}"
        taken.add(same_file(stem))
        student.stem = stem
    return students


def _question_order(lab, questions) -> list:
    """The lab's written questions in Gradescope's order (``questions``: their ids, all
    of them; None: the lab's order)."""
    if not lab.answers:
        raise PrintoutError(
            f"Lab {lab.name!r} has no written answers (its spec declares none with lab.answer(...))."
        )
    if questions is None:
        return list(lab.answers.values())
    ids = [
        q.strip()
        for q in (questions.split(",") if isinstance(questions, str) else questions)
        if q.strip()
    ]
    unknown = [q for q in ids if q not in lab.answers]
    missing = [q for q in lab.answers if q not in ids]
    if unknown or missing or len(set(ids)) != len(ids):
        raise PrintoutError(
            f"--questions lists the written questions of {lab.name} once each, in Gradescope's order; "
            f"got {ids}: unknown {unknown}, missing {missing}. The lab's questions: "
            f"{','.join(lab.answers)}."
        )
    return [lab.answers[q] for q in ids]


_STYLE = """
@page { size: A4; margin: 16mm 15mm; }
body { font-family: "DejaVu Serif", "Noto Serif", serif; font-size: 11pt; line-height: 1.4; color: #000; }
.cover h1 { font-size: 16pt; margin: 0 0 0.6em; }
.cover table { border-collapse: collapse; margin: 1em 0; table-layout: fixed; width: 100%; }
.cover th { width: 8em; }
.cover td, .cover th { border: 1px solid #444; padding: 0.4em 0.8em; text-align: left;
  height: 1.3em; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.cover ol { margin-top: 1em; }
section.question { break-before: page; }
h2.question-title { font-size: 13pt; border-bottom: 1px solid #888; padding-bottom: 0.2em; }
.answer { overflow-wrap: anywhere; overflow: hidden; contain: paint; border-left: 2pt solid #bbb;
  padding: 0.1em 0.3em 0.1em 0.8em; }
.answer h1, .answer h2, .answer h3, .answer h4, .answer h5, .answer h6 { font-size: 11pt;
  font-style: italic; margin: 0.8em 0 0.3em; padding: 0; border: 0; }
code.tex[title]::after, pre.tex[title]::after { content: " (" attr(title) ")"; color: #555;
  font-family: serif; font-style: italic; font-size: 9pt; }
pre { white-space: pre-wrap; background: #f4f4f4; padding: 0.3em; font-size: 9.5pt; }
pre.tex, code.tex { color: #a00; }
p.cut, span.image, span.link, .none { color: #555; font-style: italic; }
table { border-collapse: collapse; }
th, td { border: 1px solid #999; padding: 0.1em 0.4em; }
blockquote { border-left: 3px solid #bbb; margin-left: 0; padding-left: 0.8em; }
math[display="block"] { margin: 0.5em 0; }
"""


def printout_html(lab, student: Student, questions) -> str:
    """The page printed for one student: a cover (the lab, the student's name and id, the
    questions in order), then each question on a new page with the answer as sanitised
    HTML (no script, style, image, link or frame can come from the student).

    Each answer is drawn inside its own box (``.answer``: a bar on its left, nothing of it
    painted outside, so no formula reaches the cover's ID or another question), and a
    student's own headings are drawn small within it: only lablib's question headers
    (``h2.question-title``, a class no answer can carry) look like one."""
    esc = html_text  # control characters shown as symbols: a file an instructor may cat
    rows = [("Name", student.name or student.key), ("ID", student.student_id or student.key)]
    if student.email:
        rows.append(("E-mail", student.email))
    rows.append(("Submission", student.submission))
    cover = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    listed = "".join(
        f"<li>{esc(q.id)}: {esc(q.title)} ({num(q.points)} points)</li>" for q in questions
    )
    sections = []
    for k, q in enumerate(questions, 1):
        answer = student.answers.get(q.id)
        if student.unreadable or answer is None:
            body = (
                "<p class='none'>The notebook could not be read: there is no answer to show. Its status is in "
                "the gradebook.</p>"
            )
        elif not answer.text.strip():
            body = "<p class='none'>No answer written.</p>"
        else:
            body = render_answer(answer.text, None)  # sanitised: the review page's allowlist
        if answer is not None and answer.notes:  # as the review page says them (cells joined)
            body = (
                "".join(f"<p class='none'>Note: {esc(str(n)[:300])}.</p>" for n in answer.notes[:5])
                + body
            )
        sections.append(
            f"<section class='question' data-question='{esc(q.id)}'><h2 class='question-title'>"
            f"Question {k}: {esc(q.id)}: "
            f"{esc(q.title)} ({num(q.points)} points)</h2><div class='answer'>{body}</div></section>"
        )
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{esc(lab.title)}: written answers of {esc(student.key)}</title><style>{_STYLE}</style></head>"
        f"<body><div class='cover'><h1>{esc(lab.title)}: written answers</h1><table>{cover}</table>"
        f"<p>Each question below starts on a new page, in this order:</p><ol>{listed}</ol></div>"
        f"{''.join(sections)}</body></html>\n"
    )


def _find_browser(chromium) -> str:
    if chromium:
        path = shutil.which(str(chromium)) or (
            str(chromium) if os.access(str(chromium), os.X_OK) else None
        )
        if not path:
            raise PrintoutError(
                f"--chromium {chromium!r} is not an executable: give the path of Chromium or Chrome."
            )
        return path
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    raise PrintoutError(
        f"No Chromium or Chrome on PATH (looked for {', '.join(BROWSERS)}): the PDFs are printed by a "
        f"headless Chromium. Install it (Debian/Ubuntu: apt install chromium) or give --chromium PATH."
    )


def _page_count(pdf: bytes) -> int:
    """Pages of a PDF Chromium printed (its page objects; Chromium writes no object streams)."""
    return len(re.findall(rb"/Type\s*/Page\b", pdf))


class _Printer:
    """Headless Chromium printing HTML to PDF bytes: one Playwright browser for all when
    Playwright is installed (driven from a thread of its own, so that a page that prints
    too long can be given up: the browser is then closed and started again), else
    Chromium's own ``--print-to-pdf`` per page (its process group killed past the time).

    :meth:`pdf` raises :class:`_NotPrinted` for a page it could not print in time or
    within its pages; the next page prints as before."""

    def __init__(self, browser: str, engine: str = "auto"):
        self.browser = browser
        self.engine = engine
        self._playwright = self._chromium = self._context = self._loop = None
        self._broken = ""
        if engine not in ("auto", "playwright", "cli"):
            raise PrintoutError(f"engine is auto, playwright or cli; got {engine!r}.")
        if engine in ("auto", "playwright"):
            try:
                import playwright.async_api  # noqa: F401 - is Playwright there?
            except ImportError:
                if engine == "playwright":
                    raise PrintoutError(
                        "engine='playwright' needs the playwright package (pip install playwright); "
                        "the 'cli' engine needs only Chromium."
                    ) from None
                self.engine = "cli"
            else:
                self.engine = "playwright"
                self._loop = asyncio.new_event_loop()
                threading.Thread(
                    target=self._loop.run_forever, name="lablib-printer", daemon=True
                ).start()
                try:
                    self._call(self._launch(), 120)
                except BaseException:
                    self.close()
                    raise

    def _call(self, coroutine, timeout: float):
        """Run ``coroutine`` on the printer's thread; TimeoutError past ``timeout`` s."""
        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coroutine, timeout), self._loop)
        return future.result(timeout + 15)  # wait_for gives up first, unless Chromium hangs

    async def _launch(self) -> None:
        from playwright.async_api import async_playwright

        if self._playwright is None:
            self._playwright = await async_playwright().start()
        args = [
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--disable-sync",
        ] + (["--no-sandbox"] if os.geteuid() == 0 else [])
        self._chromium = await self._playwright.chromium.launch(
            executable_path=self.browser, args=args
        )
        self._context = await self._chromium.new_context(java_script_enabled=False, offline=True)

        async def local_only(route):
            if route.request.url.startswith(("about:", "data:")):
                await route.continue_()
            else:
                await route.abort()

        await self._context.route("**/*", local_only)

    async def _print(self, page_html: str, max_pages: int) -> bytes:
        page = await self._context.new_page()
        try:
            await page.set_content(page_html, wait_until="load")
            return await page.pdf(
                format="A4",
                print_background=True,
                prefer_css_page_size=True,
                page_ranges=f"1-{max_pages + 1}",  # one more tells a PDF too long
            )
        finally:
            await page.close()

    def _relaunch(self) -> None:
        """A new browser after one that was given up (a page printing past its time)."""
        try:
            self._call(self._chromium.close(), 20)
        except Exception:  # noqa: BLE001 - it is replaced whatever state it is in
            pass
        try:
            self._call(self._launch(), 120)
        except Exception as exc:  # noqa: BLE001 - every page after says why
            self._broken = f"Chromium could not be started again after a page was given up ({exc})"

    def pdf(self, page_html: str, max_pages: int, timeout: float = PRINT_TIMEOUT_S) -> bytes:
        """``page_html`` printed, or :class:`_NotPrinted` where it takes more than
        ``timeout`` seconds or more than ``max_pages`` pages."""
        if self._broken:
            raise _NotPrinted(self._broken)
        if self.engine == "playwright":
            try:
                pdf = self._call(self._print(page_html, max_pages), timeout)
            except _TIMEOUTS:
                self._relaunch()
                raise _NotPrinted(
                    f"not printed in {timeout:g} s (Chromium was stopped): an answer lays out too "
                    f"slowly"
                ) from None
            except Exception as exc:  # noqa: BLE001 - Chromium's own error, for this page only
                if not self._chromium.is_connected():
                    self._relaunch()
                raise _NotPrinted(f"Chromium could not print it: {str(exc)[:300]}") from None
        else:
            pdf = self._print_cli(page_html, timeout)
        if _page_count(pdf) > max_pages:
            raise _NotPrinted(
                f"more than {max_pages} pages, the most a PDF may have (the cover and "
                f"{PAGES_PER_QUESTION} a question): an answer draws too much"
            )
        return pdf

    def _print_cli(self, page_html: str, timeout: float) -> bytes:
        """``chromium --headless --print-to-pdf`` of ``page_html``, in a process group of
        its own that is killed past ``timeout`` seconds."""
        with tempfile.TemporaryDirectory(prefix="lablib-print-") as folder:
            source, target = pathlib.Path(folder) / "page.html", pathlib.Path(folder) / "page.pdf"
            source.write_text(page_html, encoding="utf-8")
            command = [
                self.browser,
                "--headless",
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-sync",
                f"--user-data-dir={folder}/profile",
                "--no-pdf-header-footer",
                f"--print-to-pdf={target}",
                source.as_uri(),
            ]
            if os.geteuid() == 0:
                command.insert(1, "--no-sandbox")  # Chromium refuses to start as root otherwise
            run = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            try:
                _, stderr = run.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)
                run.communicate()
                raise _NotPrinted(
                    f"not printed in {timeout:g} s (Chromium was stopped): an answer lays out too "
                    f"slowly"
                ) from None
            if not target.is_file() or not target.read_bytes().startswith(b"%PDF"):
                raise _NotPrinted(
                    f"{self.browser} did not print a PDF (exit {run.returncode}): "
                    f"{stderr.strip()[-600:]}"
                )
            return target.read_bytes()

    def close(self) -> None:
        if self._loop is None:
            return
        for owner, closing in ((self._chromium, "close"), (self._playwright, "stop")):
            if owner is not None:
                try:
                    self._call(getattr(owner, closing)(), 30)
                except Exception:  # noqa: BLE001 - closing what may already be gone
                    pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop = None


class _PageText(html.parser.HTMLParser):
    """The text of a printed page: what its text nodes show (names, titles, answers, and
    the characters MathML draws for LaTeX, such as U+1D524 for ``\\mathfrak{g}``), not
    the markup, the style sheet or the title bar's text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("style", "title", "script")

    def handle_endtag(self, tag):
        self._skip -= tag in ("style", "title", "script") and self._skip > 0

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def _printed_text(page: str) -> str:
    """What a printout's page shows as text (see :class:`_PageText`)."""
    reader = _PageText()
    reader.feed(page)
    reader.close()
    return "".join(reader.parts)


def write_printouts(
    out_dir,
    lab,
    dest,
    *,
    questions=None,
    chromium=None,
    engine: str = "auto",
    html: bool = False,
    timeout: float = PRINT_TIMEOUT_S,
) -> dict:
    """Print every student's written answers to ``dest/<student>.pdf`` (see the module's
    docstring) and write ``dest/manifest.json``.

    A student whose PDF takes more than ``timeout`` seconds to print, or more than the
    cover and :data:`PAGES_PER_QUESTION` pages a question, or that Chromium fails to
    print, gets no PDF (an earlier one of theirs in ``dest`` is removed: it is not of these
    answers) and is listed in ``not_printed``; the class goes on.

    Args:
        out_dir: the output folder of ``lablib grade`` (its ``grades.json``).
        lab: the :class:`~lablib.grading.spec.LabSpec`.
        dest: the folder for the PDFs (created).
        questions: the question ids in Gradescope's order (a list or ``"a,b,c"``); None:
            the lab's order.
        chromium: the browser's path (None: the first of :data:`BROWSERS` on PATH).
        engine: ``auto`` (Playwright when installed), ``playwright`` or ``cli``.
        html: also write the HTML printed, ``dest/html/<student>.html`` (for every
            student, printed or not).
        timeout: seconds one student's PDF may take (:data:`PRINT_TIMEOUT_S`).

    Returns:
        The manifest: ``lab``, ``questions``, ``engine``, ``fonts_checked`` (whether
        fontconfig said which characters the fonts cover: :mod:`.fonts`), ``students``
        (file, key, name, student_id, email, submission, pages, unreadable,
        ``missing_glyphs``: the characters of that PDF no installed font draws, printed
        as boxes; digests), ``not_printed`` (file, key, name, student_id, email,
        submission, ``why``), ``limits`` (``seconds`` and ``pages`` a student).
    """
    order = _question_order(lab, questions)
    students = class_students(out_dir, lab)
    dest = pathlib.Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if html:
        (dest / "html").mkdir(exist_ok=True)
    printer = _Printer(_find_browser(chromium), engine)
    max_pages = 1 + PAGES_PER_QUESTION * len(order)
    gaps = font_gaps()
    try:
        entries, not_printed = _print_class(
            printer,
            lab,
            students,
            order,
            dest,
            gaps,
            html=html,
            max_pages=max_pages,
            timeout=timeout,
        )
    finally:
        printer.close()
    manifest = {
        "lab": lab.name,
        "questions": [q.id for q in order],
        "engine": printer.engine,
        "fonts_checked": gaps is not None,
        "limits": {"seconds": timeout, "pages": max_pages},
        "students": entries,
        "not_printed": not_printed,
    }
    # every character past ASCII escaped, as in grades.json: names come from the roster and
    # the submissions, and a C1 control or a bidirectional one is never raw in a file an
    # instructor may print in a terminal
    atomic_write(dest / "manifest.json", json.dumps(manifest, indent=1) + "\n")
    return manifest


def _print_class(
    printer, lab, students, order, dest, gaps, *, html: bool, max_pages: int, timeout: float
) -> tuple[list[dict], list[dict]]:
    """Each student's PDF written to ``dest``: ``(manifest entries, students not printed)``;
    ``gaps``: :func:`~.fonts.font_gaps` (None: not checked)."""
    entries, not_printed = [], []
    for student in students:
        page = printout_html(lab, student, order)
        if html:
            atomic_write(dest / "html" / f"{student.stem}.html", page)
        who = _who(student)
        try:
            pdf = printer.pdf(page, max_pages, timeout)
        except _NotPrinted as exc:
            (dest / who["file"]).unlink(missing_ok=True)
            not_printed.append({**who, "why": str(exc)})
            continue
        atomic_write(dest / who["file"], pdf)
        entries.append(
            {
                **who,
                "pages": _page_count(pdf),
                "unreadable": student.unreadable,
                "missing_glyphs": gaps.missing(_printed_text(page)) if gaps is not None else "",
                "digests": {
                    q.id: (
                        student.answers[q.id].digest if q.id in student.answers else MISSING_DIGEST
                    )
                    for q in order
                },
            }
        )
    return entries, not_printed


def _who(student: Student) -> dict:
    """A manifest entry's file and student."""
    return {
        "file": f"{student.stem}.pdf",
        "key": student.key,
        "name": student.name,
        "student_id": student.student_id,
        "email": student.email,
        "submission": student.submission,
    }


def write_points_csv(out_dir, lab, path, *, questions=None) -> int:
    """Write the people's points of every written answer to ``path`` (CSV, one row per
    student and question: ``student``, ``name``, ``submission``, ``question``,
    ``points``, ``max_points``, ``status`` (``graded``, ``changed since graded``, ``not
    graded``, ``unreadable``), ``comment`` (the rubric items, adjustment and comment the
    student reads, and the cap when one applied)); returns the number of rows."""
    order = _question_order(lab, questions)
    data = GradebookFolder(out_dir).read()  # once: the rows and the log they were written from
    students = class_students(out_dir, lab, data)
    store = _review_store(out_dir, lab, data)
    digests = {
        s.submission: {
            q.id: s.answers[q.id].digest if q.id in s.answers else MISSING_DIGEST for q in order
        }
        for s in students
    }
    scores = store.person_scores([s.submission for s in students], digests)
    with atomic_write(path, newline="") as file:
        writer = SpreadsheetWriter(file)  # every text cell inert, numbers as numbers
        writer.writerow(
            [
                "student",
                "name",
                "submission",
                "question",
                "points",
                "max_points",
                "status",
                "comment",
            ]
        )
        for s in students:
            for q in order:
                score = scores[s.submission][q.id]
                if s.unreadable and not score.graded:
                    status = "unreadable"
                else:
                    status = (
                        "changed since graded"
                        if score.stale
                        else ("graded" if score.graded else "not graded")
                    )
                lines = person_lines(score) + ([cap_note(score)] if cap_note(score) else [])
                writer.writerow(
                    [
                        s.key,
                        s.name,
                        s.submission,
                        q.id,
                        float(score.score) if score.graded else "",
                        float(q.points),
                        status,
                        "; ".join(" ".join(line.split()) for line in lines),
                    ]
                )
    return len(students) * len(order)


# ---------------------------------------------------------------------------- Gradescope back


def _evaluation_files(source) -> list[tuple[str, str]]:
    """``(file name, text)`` of each CSV of an evaluations export: a zip, a folder or one CSV."""
    source = pathlib.Path(source)
    if not source.exists():
        raise PrintoutError(
            f"{source} does not exist: give Gradescope's 'Export Evaluations' zip, the folder it "
            f"unzips to, or one of its CSV files."
        )
    files = []
    if source.is_dir():
        for path in sorted(source.rglob("*.csv")):
            files.append((path.name, path.read_text(encoding="utf-8-sig")))
    elif zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            for info in sorted(archive.infolist(), key=lambda i: i.filename):
                name = pathlib.PurePosixPath(info.filename).name
                if name.lower().endswith(".csv") and not info.is_dir():
                    if info.file_size > 64 * 1024 * 1024:
                        raise PrintoutError(
                            f"{source}: {info.filename} is {info.file_size:,} bytes: not an "
                            f"evaluations CSV."
                        )
                    files.append((name, archive.read(info).decode("utf-8-sig")))
    else:
        files.append((source.name, source.read_text(encoding="utf-8-sig")))
    if not files:
        raise PrintoutError(
            f"{source} holds no CSV file: expected Gradescope's 'Export Evaluations' (one CSV per "
            f"question)."
        )
    return files


def _question_of(name: str, lab, order, mapping) -> str:
    """The lablib question of an evaluations file ``<number>_<title>.csv``."""
    stem = name[:-4] if name.lower().endswith(".csv") else name
    match = re.match(r"(\d+(?:\.\d+)*)_?(.*)$", stem)
    number, title = (match.group(1), match.group(2)) if match else ("", stem)
    for key in (number, title, stem):
        if key and key in mapping:
            return mapping[key]
    squash = lambda text: re.sub(r"[^0-9a-z]+", "_", _norm(text)).strip("_")
    for q in order:
        if title and squash(title) in (squash(q.id), squash(q.title)):
            return q.id
    if number.isdigit() and 1 <= int(number) <= len(order):
        return order[int(number) - 1].id
    raise PrintoutError(
        f"Evaluations file {name!r}: no written question of {lab.name} for Gradescope's question "
        f"{number or '?'} ({title!r}). Map it with --question {number or stem}=<id> (the lab's "
        f"questions: {', '.join(q.id for q in order)})."
    )


def _number(value, what: str):
    value = (value or "").strip()
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        raise PrintoutError(f"{what} is {value!r}, not a number.") from None
    if not math.isfinite(number):  # "nan", "inf": read by float(), no grade
        raise PrintoutError(f"{what} is {value!r}, not a finite number.")
    return number


def _read_evaluations(
    name: str, text: str
) -> tuple[list[str], dict[str, float | None], list[dict]]:
    """``(rubric columns, their points, student rows)`` of one evaluations CSV."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if (
        not header
        or "Score" not in header
        or not ({"SID", "Email", "Name", "First Name"} & set(header))
    ):
        raise PrintoutError(
            f"{name} is not a Gradescope evaluations CSV: expected a header with Score and SID, Email "
            f"or Name (Review Grades > Export Evaluations); got {header[:8] if header else 'nothing'}."
        )
    header = [h.strip() for h in header]
    items = [h for h in header if h and h not in _GRADESCOPE_COLUMNS]
    points: dict[str, float | None] = {h: None for h in items}
    rows = []
    for cells in reader:
        if not cells or not any(c.strip() for c in cells):
            continue
        first = cells[0].strip()
        if first in _FOOTER_ROWS:
            if first == "Point Values":
                for h, value in zip(header, cells):
                    if h in points:
                        points[h] = _number(value, f"{name}: the points of rubric item {h!r}")
            continue
        rows.append(dict(zip(header, (c.strip() for c in cells))))
    return items, points, rows


def _match_rows(students: list[Student]):
    """A function from an evaluations row to the gradebook's submission (or None, reason).
    A name that only the rows' names match (case and Unicode forms folded) names each row
    given that name at grading, ``erin-2`` too (``erin.ipynb`` beside ``Erin.ipynb``): two
    rows, refused, never the first's."""
    by: dict[str, dict[str, set[str]]] = {"sid": {}, "email": {}, "name": {}, "submission": {}}
    for s in students:
        for kind, value in (
            ("sid", s.student_id),
            ("email", s.email),
            ("name", s.name),
            ("submission", s.submission),
            ("sid", s.key),
        ):
            if value:
                by[kind].setdefault(_norm(value), set()).add(s.submission)
    named = {_norm(s.submission) for s in students if s.submission}
    for s in students:  # "erin-2", named so because "Erin" was taken: "erin" names both
        base = re.fullmatch(r"(.+)-\d+", s.submission or "")
        if base and _norm(base.group(1)) in named:
            by["submission"].setdefault(_norm(base.group(1)), set()).add(s.submission)

    def match(row: dict):
        name = row.get("Name") or " ".join(
            filter(None, (row.get("First Name"), row.get("Last Name")))
        )
        email = row.get("Email", "")
        tries = [
            ("sid", row.get("SID")),
            ("email", email),
            ("name", name),
            ("submission", row.get("SID")),
            ("submission", email.split("@")[0] if email else ""),
            ("submission", name),
        ]
        for kind, value in tries:
            found = by[kind].get(_norm(value)) if value else None
            if found and len(found) == 1:
                submission = next(iter(found))
                clash = _clash(row, rows_of[submission], kind)
                if clash:  # a name shared with another person, never theirs by the name
                    return None, f"{kind} {value!r} is the row {submission!r}'s, but {clash}"
                return submission, ""
            if found:
                return None, f"{kind} {value!r} names {len(found)} rows of the gradebook"
        return None, "no gradebook row has this SID, e-mail or name"

    rows_of = {s.submission: s for s in students}
    return match


def _clash(row: dict, student: Student, kind: str) -> str:
    """What of an evaluations row contradicts the student it was matched to by ``kind``
    ("" where nothing does): an id both have that differ, stronger than the one matched
    by (an SID for a match by e-mail; an SID or an e-mail for one by name)."""
    fields = {"sid": (), "email": ("SID",)}.get(kind, ("SID", "Email"))
    for field in fields:
        given = row.get(field, "")
        theirs = student.student_id if field == "SID" else student.email
        if given and theirs and _norm(given) != _norm(theirs):
            return f"its {field} {given!r} is not theirs ({theirs!r})"
    return ""


def name_of(row: dict) -> str:
    """How an evaluations row names its student, for messages."""
    name = row.get("Name") or " ".join(filter(None, (row.get("First Name"), row.get("Last Name"))))
    return ", ".join(filter(None, (name, row.get("SID"), row.get("Email")))) or "(no name)"


def import_gradescope(
    out_dir,
    lab,
    source,
    *,
    questions=None,
    question_map=None,
    printout=None,
    grader: str = "",
    replace: bool = False,
) -> dict:
    # Over 80 lines for its signature and docstring; code: 60 lines.
    """Bring Gradescope's graded evaluations of the written answers into the review store.

    Args:
        out_dir: the output folder of ``lablib grade`` (``grades.json``, ``reviews.sqlite``).
        lab: the :class:`~lablib.grading.spec.LabSpec`.
        source: the ``Export Evaluations`` zip, its folder, or one of its CSV files.
        questions: the question ids in Gradescope's order, as printed (None: the lab's).
        question_map: Gradescope question (number, title or file stem) -> question id,
            for files whose number or title does not say.
        printout: the folder :func:`write_printouts` wrote: each grade is given to the text
            printed (an answer changed since is then stale); None: to the text now.
        grader: who imports (the log names ``"<grader> (Gradescope: <their grader>)"``).
        replace: replace a different grade already given in lablib (default: keep it and
            list it as a conflict).

    Returns:
        ``{"imported": {question: n}, "unchanged": n, "conflicts": [...], "unmatched": [...],
        "ungraded": n, "items_added": n, "capped": [...], "refused": [...]}``: ``conflicts``
        the rows kept as graded in lablib, ``refused`` those the review log refused (not
        imported).

    Raises:
        PrintoutError: a Score or Adjustment that is no finite number (the rows before it
            are imported; correct it and import again: those are then unchanged).
    """
    order = _question_order(lab, questions)
    mapping = _question_map(lab, question_map)
    data = GradebookFolder(out_dir).read()  # once: the rows and the log they were written from
    students = class_students(out_dir, lab, data)
    by_submission = {s.submission: s for s in students}
    printed = _printed_digests(printout, lab)
    store = _review_store(out_dir, lab, data)
    match = _match_rows(students)
    report = dict(
        imported={},
        unchanged=0,
        conflicts=[],
        unmatched=[],
        ungraded=0,
        items_added=0,
        capped=[],
        refused=[],
    )
    plan = _evaluations_plan(_evaluation_files(source), lab, order, mapping)
    for name, question, items, points, rows in plan:
        q = lab.answers[question]
        item_ids = _rubric_items(store, question, items, points, grader, report)
        now = {
            s.submission: (s.answers[question].digest if question in s.answers else MISSING_DIGEST)
            for s in students
        }
        state = store.answers(question, now)
        count = 0
        for row in rows:
            submission, why = match(row)
            if submission is None:
                report["unmatched"].append(f"{name}: {name_of(row)}: {why}")
                continue
            applied = [
                c for c in items if row.get(c, "").strip().lower() in ("true", "1", "yes", "x")
            ]
            score = _number(row.get("Score"), f"{name}: the Score of {name_of(row)}")
            if score is None and not applied:
                report["ungraded"] += 1
                continue
            noted = len(report["capped"])
            wanted = _wanted_grade(name, row, q, score, applied, item_ids, points, report)
            current = state.get(submission)
            if (
                current
                and current["graded"]
                and not _replaces(question, row, submission, current, wanted, replace, report)
            ):
                continue
            student = by_submission[submission]
            digest = _printed_digest(printed, student, question, now[submission])
            text = student.answers[question].text if question in student.answers else None
            who = f"{grader} (Gradescope: {row.get('Grader') or 'no grader named'})".strip()
            try:
                store.apply(
                    [submission],
                    question,
                    wanted,
                    digest={submission: digest},
                    versions={submission: current["version"] if current else 0},
                    grader=who,
                    texts={now[submission]: text} if text is not None else None,
                )
            except ReviewError as exc:  # not imported: never "kept as graded in lablib"
                report["refused"].append(f"{question}: {name_of(row)} ({submission}): {exc}")
                del report["capped"][noted:]  # nothing was kept within the points
                continue
            count += 1
        report["imported"][question] = report["imported"].get(question, 0) + count
    return report


def _review_store(out_dir, lab, stored: dict) -> ReviewStore:
    """The folder's review log, once it is the one its gradebook (``stored``, as the
    caller read it) was written from (never
    one made here in place of a log that is gone: its people's grades would read as
    none, and a grade imported into it would be refused by every other command).

    Raises:
        PrintoutError: it is not (missing, empty, made anew, restored from an older backup).
    """
    try:
        check_log_kept(pathlib.Path(out_dir) / DB_NAME, stored)
    except ReviewError as exc:
        raise PrintoutError(str(exc)) from None
    return ReviewStore(pathlib.Path(out_dir) / DB_NAME, lab)


def _question_map(lab, question_map) -> dict:
    """``--question`` KEY=ID pairs with their keys stripped, each ID a written question.

    Raises:
        PrintoutError: an ID that is not a written question of ``lab``.
    """
    mapping = {str(k).strip(): v for k, v in (question_map or {}).items()}
    bad = sorted(v for v in mapping.values() if v not in lab.answers)
    if bad:
        raise PrintoutError(
            f"--question maps to {bad}, not written questions of {lab.name} "
            f"({', '.join(lab.answers)})."
        )
    return mapping


def _printed_digest(printed: dict | None, student: Student, question: str, now: str) -> str:
    """The digest of the answer a Gradescope grade was given to: as printed in the
    printout (``printed``: :func:`_printed_digests`), found by the row's submission, else
    by its student (a resubmission graded since under another name); ``MISSING_DIGEST``
    (the grade is stale at once, for a person to look again) where the printout has
    neither; the text now (``now``) where no printout is given."""
    if printed is None:
        return now
    entry = printed["submission"].get(student.submission)
    if entry is None:
        for value in (student.key, student.student_id, student.email):
            found = printed["person"].get(_norm(value)) if value else None
            if found is not None and len(found) == 1:
                entry = found[0]
                break
    return (entry or {}).get(question, MISSING_DIGEST)


def _printed_digests(printout, lab) -> dict | None:
    """The answers' digests as printed in ``printout`` (the folder :func:`write_printouts`
    wrote): ``{"submission": {submission: {question: digest}}, "person": {key, student id
    or e-mail (normalized): [their entries' digests]}}``; None when ``printout`` is None."""
    if printout is None:
        return None
    manifest_path = pathlib.Path(printout) / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PrintoutError(
            f"{manifest_path} cannot be read ({exc}): give the folder `lablib written pdf` wrote "
            f"(it holds manifest.json), or leave --printout out."
        ) from None
    if manifest.get("lab") != lab.name:
        raise PrintoutError(f"{manifest_path} is of lab {manifest.get('lab')!r}, not {lab.name!r}.")
    printed: dict = {"submission": {}, "person": {}}
    for e in manifest.get("students", []):
        digests = e.get("digests", {})
        printed["submission"][e["submission"]] = digests
        for value in {_norm(e.get(k)) for k in ("key", "student_id", "email") if e.get(k)}:
            printed["person"].setdefault(value, []).append(digests)
    return printed


def _evaluations_plan(files, lab, order, mapping) -> list[tuple]:
    """Each evaluations file read: ``(name, question, items, points, rows)``; two files of
    one question are refused."""
    plan = []
    for name, text in files:
        question = _question_of(name, lab, order, mapping)
        items, points, rows = _read_evaluations(name, text)
        plan.append((name, question, items, points, rows))
    seen_questions = [p[1] for p in plan]
    twice = sorted({q for q in seen_questions if seen_questions.count(q) > 1})
    if twice:
        raise PrintoutError(
            f"Two evaluations files are of the same question(s) {twice}: map each file to its own "
            f"question with --question."
        )
    return plan


def _rubric_items(store, question: str, items, points, grader: str, report: dict) -> dict:
    """``{Gradescope rubric column: lablib rubric item id}``: an item of the same points and
    comment, or one added now (counted in ``report["items_added"]``)."""
    rubric = {(round(r.points, 6), r.comment): r.id for r in store.rubric(question)}
    item_ids = {}
    for column in items:
        key = (round(points[column] or 0.0, 6), column)
        if key not in rubric:
            rubric[key] = store.save_item(
                question, points[column] or 0.0, column, grader=f"{grader} (Gradescope)".strip()
            ).id
            report["items_added"] += 1
        item_ids[column] = rubric[key]
    return item_ids


def _wanted_grade(
    name: str, row: dict, q, score, applied, item_ids: dict, points, report: dict
) -> dict:
    """The grade one evaluations row gives: its rubric items, the adjustment that makes
    Gradescope's score and the comment (a score outside the question's points is noted)."""
    ids = [item_ids[c] for c in applied]
    total = sum(points[c] or 0.0 for c in applied)
    adjustment = _number(row.get("Adjustment"), f"{name}: the Adjustment of {name_of(row)}") or 0.0
    if score is not None and min(max(total + adjustment, 0.0), q.points) != score:
        adjustment = score - total  # the score is Gradescope's whatever its rubric's scoring
    if score is not None and not 0 <= score <= q.points:
        report["capped"].append(
            f"{name}: {name_of(row)}: Gradescope's {num(score)} kept within 0-{num(q.points)}"
        )
    comment = row.get("Comments", "")
    return {"items": sorted(ids), "adjustment": adjustment, "comment": comment}


def _replaces(
    question: str,
    row: dict,
    submission: str,
    current: dict,
    wanted: dict,
    replace: bool,
    report: dict,
) -> bool:
    """Whether Gradescope's grade replaces one already given in lablib: not when it is the
    same (counted unchanged) or differs without ``replace`` (listed as a conflict)."""
    have = {
        "items": sorted(current["items"]),
        "adjustment": current["adjustment"],
        "comment": current["comment"],
    }
    if have == wanted:
        report["unchanged"] += 1
        return False
    if not replace:
        report["conflicts"].append(
            f"{question}: {name_of(row)} ({submission}): graded differently in "
            f"lablib; kept (--replace takes Gradescope's)"
        )
        return False
    return True
