"""What the review page's tests share: a small lab with written questions, a graded class
written as ``lablib grade`` writes it, a running review server, requests to it, and the
machine's headless Chromium (Playwright drives it)."""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import threading

import pytest

from lablib.grading import report
from lablib.grading.results import PieceScore, Status, SubmissionResult, WrittenAnswer
from lablib.grading.review.server import ReviewApp, make_server
from lablib.grading.spec import LabSpec

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def written_lab() -> LabSpec:
    """Lab 9: two written questions, with a "-1" item in the second's rubric."""
    lab = LabSpec("lab9_written", "Lab 9: written answers")
    lab.piece("f", objects=["f"])
    lab.answer("why", points=4, title="why it works", rubric=[(2, "Names the cause."), (2, "Gives numbers."),
                                                              (0, "No answer.")])
    lab.answer("how", points=3, title="how to fix it", rubric=[(3, "A fix that works."), (-1, "Off topic.")])
    return lab


def result(name: str, answers: dict) -> SubmissionResult:
    """A graded submission whose written answers are ``answers`` (question -> text; a
    question left out has no record, as for a notebook that could not be read)."""
    return SubmissionResult(name, f"/class/{name}.ipynb", Status(), 5.0, 10.0, {"f": PieceScore(5.0, 10.0)}, [],
                            answers={q: WrittenAnswer(text, "tag") for q, text in answers.items()})


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
    conn.request(method, path, body=data, headers={"Content-Type": "application/json", **auth, **(headers or {})})
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
        pytest.fail("Playwright is not installed: the review page is tested in a real headless browser. Install "
                    "the dev extra (pip install -e '.[dev]').")
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("No Chromium on PATH: the review page is tested in a real headless browser. "
                    "Install Debian's chromium package (`bash .ci/run setup` does).")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser, playwright.expect
        finally:
            browser.close()
