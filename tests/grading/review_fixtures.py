"""What the review page's tests share: a small lab with written questions, a graded class
written as ``lablib grade`` writes it, a running review server (in the test's process, or
``lablib review`` itself in a child process, with the token its printed address carries),
requests to it, the machine's headless Chromium (Playwright drives it), and a grader's pass
over one question on the page (:func:`grade_question`: keys and clicks)."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import shutil
import signal
import subprocess
import sys
import threading

import pytest

from lablib.grading import report
from lablib.grading.results import PieceScore, Status, SubmissionResult, WrittenAnswer
from lablib.grading.review.server import ReviewApp, make_server
from lablib.grading.spec import LabSpec

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def written_lab() -> LabSpec:
    """Lab 9: two written questions, with a "-1" item in the second's rubric."""
    lab = LabSpec("lab9_written", "Lab 9: written answers")
    lab.piece("f", objects=["f"])
    lab.answer(
        "why",
        points=4,
        title="why it works",
        rubric=[(2, "Names the cause."), (2, "Gives numbers."), (0, "No answer.")],
    )
    lab.answer(
        "how",
        points=3,
        title="how to fix it",
        rubric=[(3, "A fix that works."), (-1, "Off topic.")],
    )
    return lab


def result(name: str, answers: dict) -> SubmissionResult:
    """A graded submission whose written answers are ``answers`` (question -> text; a
    question left out has no record, as for a notebook that could not be read)."""
    return SubmissionResult(
        name,
        f"/class/{name}.ipynb",
        Status(),
        5.0,
        10.0,
        {"f": PieceScore(5.0, 10.0)},
        [],
        answers={q: WrittenAnswer(text, "tag") for q, text in answers.items()},
    )


def write_class(out, lab, answers: dict) -> None:
    """Write the gradebook of a class: ``answers`` maps each name to its answers."""
    report.write_reports(out, lab, [result(name, given) for name, given in answers.items()])


@contextlib.contextmanager
def running(out, lab, *, grader: str = "tester", token: str | None = None, **options):
    """A review server on a free port for ``out``; yields ``(server, app)``."""
    app = ReviewApp(out, lab, grader=grader, **options)
    server = make_server(app, port=0, token=token)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, app
    finally:
        server.shutdown()
        server.server_close()


def request(server, method: str, path: str, body=None, headers=None, token=True):
    """``(status, parsed JSON body)`` of one request, with the server's token unless
    ``token`` is False (or the token given)."""
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=30)
    data = None if body is None else json.dumps(body).encode()
    auth = {}
    if token:
        auth = {"Authorization": f"Bearer {server.token if token is True else token}"}
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


@contextlib.contextmanager
def chromium():
    """The machine's Chromium, headless, through Playwright."""
    try:
        import playwright.sync_api as playwright
    except ImportError:
        pytest.fail(
            "Playwright is not installed: the review page is tested in a real headless browser. Install "
            "the dev extra (pip install -e '.[dev]')."
        )
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail(
            "No Chromium on PATH: the review page is tested in a real headless browser. "
            "Install Debian's chromium package (`bash .ci/run setup` does)."
        )
    # 30 s for each expectation (Playwright's default is 5 s): under a full machine's load the
    # review page's saves took longer than 5 s (a wait that ends as soon as the page is right)
    playwright.expect.set_options(timeout=30_000)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser, playwright.expect
        finally:
            browser.close()


class ReviewCommand:
    """A running ``lablib review`` child process (:func:`lablib_review`): ``url`` is the
    address it printed (with this run's token); ``server_address`` and ``token`` let
    :func:`request` call its API. Once the command has ended: ``returncode``, ``stdout``
    (its first line included) and ``stderr``."""

    def __init__(self, process: subprocess.Popen, line: str):
        match = re.search(
            r"open (http://(127\.0\.0\.1):(\d+)/\?token=([A-Za-z0-9_-]{16,128}))\s", line
        )
        if match is None:
            process.kill()
            out, err = process.communicate(timeout=60)
            pytest.fail(f"`lablib review` printed no address with a token: {line!r}\n{out}\n{err}")
        self.process = process
        self.first_line = line
        self.url = match.group(1)
        self.server_address = (match.group(2), int(match.group(3)))
        self.token = match.group(4)
        self.returncode: int | None = None
        self.stdout = ""
        self.stderr = ""


@contextlib.contextmanager
def lablib_review(
    lab: str, out, *options, grader: str = "ta", command=None, cwd=None, timeout: float = 300
):
    """``lablib review <lab> <out> --no-browser --grader <grader> <options>`` as an instructor
    starts it (a child process: its own per-run token, its signal handlers); yields a
    :class:`ReviewCommand`. On leaving, SIGTERM (as a service manager or ``kill`` stops it):
    the command writes the gradebook and ends; what it printed is then on the object.

    ``command``: the ``lablib`` command as a list (default: this Python's ``-m lablib.cli``).
    """
    command = list(command or [sys.executable, "-m", "lablib.cli"])
    process = subprocess.Popen(
        [
            *command,
            "review",
            str(lab),
            str(out),
            "--no-browser",
            "--grader",
            grader,
            *map(str, options),
        ],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    review = ReviewCommand(process, process.stdout.readline())
    try:
        yield review
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        review.returncode, review.stdout, review.stderr = (
            process.returncode,
            review.first_line + stdout,
            stderr,
        )


def _number(text: str) -> float:
    return float(text.replace("\u2212", "-"))


def page_rubric(page) -> list[tuple[float, str]]:
    """The open question's rubric as the page lists it: ``(points, comment)`` per item, in
    the order of their keys (item 1 first)."""
    items = page.locator("#items li button.apply")
    return [
        (
            _number(items.nth(k).locator(".points").inner_text()),
            items.nth(k).locator(".comment").inner_text(),
        )
        for k in range(items.count())
    ]


def answer_text(card) -> str:
    """The text of an answer's card as the page shows it (in the card's shadow root)."""
    return (
        card.locator(".text")
        .evaluate("(host) => host.shadowRoot ? host.shadowRoot.textContent : ''")
        .strip()
    )


def _press_item(page, number: int, count: int) -> None:
    """Rubric item ``number`` by keys: its digits, then Enter past 9 items."""
    for digit in str(number):
        page.keyboard.press(digit)
    if count > 9:
        page.keyboard.press("Enter")


def grade_question(page, expect, question: str, choose, *, clicks: bool = True) -> dict[str, dict]:
    """Grade every answer to ``question`` on the open review page as a grader does.

    The empty answers first: their checkboxes ticked, then the number key of each item
    ``choose("", rubric)`` names (applied to all of them at once). Then ``n`` to each
    answer still to grade, its text read off the page, and the items ``choose(text,
    rubric)`` names (1-based numbers of the page's rubric, as ``(points, comment)``
    pairs): the first by its number key, the others by a click on the rubric's button
    (``clicks``; else by keys too). Each answer's badge must then show the sum of the
    items' points as the page lists them.

    Returns token -> ``{"text", "score", "items"}``: what the page showed and applied.
    """
    page.locator(f"#questions button[data-question='{question}']").click()
    expect(page.locator("#q-title")).to_contain_text(question)
    cards = page.locator(".answer")
    progress = re.compile(r"^(\d+)/(\d+) graded")
    expect(page.locator("#progress-text")).to_have_text(progress)
    total = int(progress.match(page.locator("#progress-text").inner_text()).group(2))
    expect(cards).to_have_count(total)  # one page of answers (at most 50)
    expect(page.locator(".answer[data-text]")).to_have_count(total)  # every text shown
    rubric = page_rubric(page)
    points = page.locator("#q-title").inner_text().rsplit("(", 1)[1].split()[0]  # "(4 points)"
    applied: dict[str, dict] = {}

    def check(token, text, chosen):
        score = sum(rubric[n - 1][0] for n in chosen)
        card = page.locator(f".answer[data-token='{token}']")
        expect(card.locator(".chips span")).to_have_count(len(chosen))
        expect(card.locator(".badge")).to_have_text(f"{score:g} / {points}")
        applied[token] = {"text": text, "score": score, "items": [rubric[n - 1][1] for n in chosen]}

    empty = [
        cards.nth(k).get_attribute("data-token")
        for k in range(total)
        if cards.nth(k).locator(".empty").count()
    ]
    if empty:
        for k, number in enumerate(choose("", rubric)):
            for token in empty:
                page.locator(f".answer[data-token='{token}'] input[type=checkbox]").check()
            _press_item(page, number, len(rubric))
            expect(page.locator(f".answer[data-token='{empty[-1]}'] .chips span")).to_have_count(
                k + 1
            )
        for token in empty:
            check(token, "", choose("", rubric))
    for _ in range(total - len(empty)):
        page.keyboard.press("n")
        card = page.locator(".answer.focused")
        expect(card.locator(".badge")).to_have_text("to grade")
        token = card.get_attribute("data-token")
        card = page.locator(f".answer[data-token='{token}']")
        text = answer_text(card)
        chosen = list(choose(text, rubric))
        assert chosen, f"no rubric item chosen for {text!r}"
        for k, number in enumerate(chosen):
            if k and clicks:
                page.locator("#items li button.apply").nth(number - 1).click()
            else:
                _press_item(page, number, len(rubric))
            # saved before the next (the rubric's buttons are drawn again with each answer)
            expect(card.locator(".chips span")).to_have_count(k + 1)
        check(token, text, chosen)
    expect(page.locator(".answer .badge.todo")).to_have_count(0)
    expect(page.locator("#progress-text")).to_contain_text(f"{total}/{total} graded")
    return applied
