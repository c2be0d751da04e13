"""The class summary (summary.json, summary.html), rendered by a real headless browser."""

import json
import random
import re
import shutil
import subprocess

import numpy as np
import pytest

from lablib.grading.judge import summarise
from lablib.grading.report.summary import SLOWEST, class_summary, write_summary
from lablib.grading.results import Status, TestResult

#: Debian packages the browser test needs (CI installs them).
CHROMIUM_PACKAGES = "chromium"


def _class(lab, n=14, seed=0):
    """``n`` seeded submissions: each test passes with its own rate, some time out or miss a piece."""
    rng = random.Random(seed)
    rates = {t.id: 0.15 + 0.8 * i / max(1, len(lab.tests) - 1) for i, t in enumerate(lab.tests)}
    results = []
    for k in range(n):
        missing = ["running_mean"] if k % 7 == 3 else []
        kinds = {"timeout"} if k % 5 == 1 else set()
        tests = []
        for t in lab.tests:
            if t.piece in missing:
                tests.append(TestResult.failed(t, "no cell", "missing"))
            elif rng.random() < rates[t.id]:
                tests.append(TestResult(t.id, t.piece, t.name, t.points, t.points, True, t.hidden))
            else:
                tests.append(TestResult.failed(t, "wrong", "timeout" if kinds else "failed"))
        results.append(
            summarise(
                lab,
                f"student{k:02d}",
                f"/subs/student{k:02d}.ipynb",
                tests,
                Status.of(kinds, missing),
                seconds=round(rng.uniform(1, 30), 3),
            )
        )
    return results


def test_summary_counts(fixture_lab):
    results = _class(fixture_lab)
    data = class_summary(fixture_lab, results)
    n = len(results)
    assert data["submissions"] == n and data["max_score"] == fixture_lab.max_score
    assert sum(data["histogram"]["counts"]) == n
    totals = sorted(r.score for r in results)
    assert data["score"]["median"] == pytest.approx(float(np.median(totals)))
    assert [p["piece"] for p in data["pieces"]] == list(fixture_lab.pieces)
    for piece in data["pieces"]:
        assert sum(piece["histogram"]["counts"]) == n
        got = [r.pieces[piece["piece"]].score for r in results]
        assert piece["mean"] == pytest.approx(np.mean(got), abs=1e-3)
        assert piece["full_marks"] == sum(s >= piece["max_score"] for s in got)
    rates = [t["pass_rate"] for t in data["tests"]]
    assert rates == sorted(rates) and len(rates) == len(fixture_lab.tests)  # most failed first
    for row in data["tests"]:
        passed = sum(t.passed for r in results for t in r.tests if t.id == row["id"])
        assert row["passed"] == passed and row["failed"] == n - passed
        assert sum(row["failures"].values()) == n - passed
    assert any(row["hidden"] for row in data["tests"])
    assert data["statuses"]["timeout"] == sum(r.status.has("timeout") for r in results) > 0
    assert data["statuses"]["missing"] == sum(r.status.has("missing") for r in results) > 0
    assert data["statuses"]["ok"] == sum(r.status.ok for r in results) > 0
    # the submissions behind each status, with their files
    timed_out = [r.submission for r in results if r.status.has("timeout")]
    assert [row["submission"] for row in data["needs_attention"]["timeout"]] == timed_out
    assert data["needs_attention"]["timeout"][0]["feedback"] == f"feedback/{timed_out[0]}.html"
    assert "ok" not in data["needs_attention"]
    # a missing cell does not count as an attempt: the rate over attempts is the higher one
    missing = sum(r.status.has("missing") for r in results)
    for row in data["tests"]:
        runs = row["passed"] + row["failed"]
        assert row["attempted"] == runs - (missing if row["piece"] == "running_mean" else 0)
        assert row["pass_rate_attempted"] >= row["pass_rate"]
        if row["failed"]:
            assert row["common_failure"]["message"] in ("wrong", "no cell")
            assert row["common_failure"]["count"] == max(
                sum(
                    t.message == m
                    for r in results
                    for t in r.tests
                    if t.id == row["id"] and not t.passed
                )
                for m in ("wrong", "no cell")
            )
    seconds = [s["seconds"] for s in data["slowest"]]
    assert (
        len(seconds) == min(SLOWEST, n)
        and seconds == sorted((r.seconds for r in results), reverse=True)[:SLOWEST]
    )
    empty = class_summary(fixture_lab, [])
    assert empty["submissions"] == 0 and empty["score"]["mean"] is None and empty["slowest"] == []


def test_summary_page_is_static_and_names_every_piece(fixture_lab, tmp_path):
    paths = write_summary(tmp_path, class_summary(fixture_lab, _class(fixture_lab)))
    page = paths["summary_html"].read_text()
    assert "Submissions needing attention" in page and 'href="feedback/student01.html"' in page
    assert json.loads(paths["summary_json"].read_text())["lab"] == fixture_lab.name
    for piece in fixture_lab.pieces:
        assert f"<td>{piece}</td>" in page
    for test in fixture_lab.tests:
        assert test.name in page
    assert page.count("<svg") == 3  # total, per-piece and per-test plots, inline
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\((?!#)", page, re.I)
    # only in-page references, and relative links to the batch's own feedback and instructor files
    assert not re.search(r"(?:src|href)\s*=\s*[\"'](?!#|feedback/|instructor/)", page)
    assert not re.search(r"href=\"(?:feedback|instructor)/[^\"]*(?:\.\.|//|:)", page)
    assert (
        "No submissions"
        in write_summary(tmp_path / "none", class_summary(fixture_lab, []))[
            "summary_html"
        ].read_text()
    )


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(
        f"No Chromium found on PATH: the summary page is checked in a real headless browser. "
        f"Install the Debian package(s) `{CHROMIUM_PACKAGES}` (apt-get install -y {CHROMIUM_PACKAGES})."
    )


def test_summary_page_renders_in_headless_chromium(fixture_lab, tmp_path):
    from PIL import Image

    page = write_summary(tmp_path / "out", class_summary(fixture_lab, _class(fixture_lab)))[
        "summary_html"
    ]
    shot = tmp_path / "summary.png"
    width, height = 1200, 2200
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        f"--window-size={width},{height}",
        page.resolve().as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    image = np.asarray(Image.open(shot).convert("RGB"))
    assert image.shape == (height, width, 3)
    colours = np.unique(image.reshape(-1, 3), axis=0)
    assert len(colours) > 50, f"only {len(colours)} colours: the page looks blank"
    ink = (image.sum(axis=2) < 600).mean()
    assert 0.01 < ink < 0.6, f"{ink:.1%} of the pixels are not near white"

    def pixels(rgb):
        return int(np.all(np.abs(image.astype(int) - rgb) <= 8, axis=2).sum())

    # the plots' bars are drawn: the total histogram's blue and the pieces' green
    assert pixels((0x3B, 0x6E, 0xA8)) > 500, (
        "the total score histogram (inline SVG) was not rendered"
    )
    assert pixels((0x5A, 0x9E, 0x6F)) > 500, (
        "the per-piece histograms (inline SVG) were not rendered"
    )


def test_summary_headline_is_the_totals_and_mistakes_are_ranked(fixture_lab, tmp_path):
    """The headline counts what the LMS gets (automatic + written - penalty); a stub is
    'not attempted', never an error; the named mistakes are ranked by how many students
    made each, one mistake named with different numbers by different tests counted once."""
    from lablib.grading.report.summary import summary_html
    from lablib.session import not_done_text

    tests = list(fixture_lab.tests)
    piece = tests[0].piece
    same_piece = [t for t in tests if t.piece == piece]
    results = []
    for k in range(10):
        out = []
        for t in tests:
            if k < 3 and t.piece == piece:  # the blank lab's stub
                out.append(TestResult.failed(t, not_done_text(piece), "error"))
            elif (
                3 <= k < 7 and t.piece == piece
            ):  # the same named mistake, worded with each test's numbers
                r = TestResult.failed(
                    t,
                    f"The scores are not scaled (here sqrt({same_piece.index(t) + 2})).",
                    "failed",
                )
                r.mistake = True
                out.append(r)
            elif k == 7 and t.piece == piece:
                r = TestResult.failed(t, "Self loops were added twice.", "failed")
                r.mistake = True
                out.append(r)
            elif k == 8 and t.piece == piece:
                out.append(TestResult.failed(t, "values differ at [0, 1]", "failed"))
            else:
                out.append(TestResult(t.id, t.piece, t.name, t.points, t.points, True, t.hidden))
        results.append(summarise(fixture_lab, f"s{k}", f"/subs/s{k}.ipynb", out, Status()))
    totals = {
        r.submission: r.score + 2.0 for r in results
    }  # as if every written answer got 2 points
    data = class_summary(fixture_lab, results, totals=totals)
    assert data["total"]["mean"] == pytest.approx(round(sum(totals.values()) / 10, 3))
    assert sum(data["total"]["histogram"]["counts"]) == 10 and data["total"]["max"] == max(
        totals.values()
    )
    assert data["score"]["mean"] == pytest.approx(round(sum(r.score for r in results) / 10, 3))
    assert [(m["mistake"], m["students"]) for m in data["mistakes"]] == [
        ("The scores are not scaled (here sqrt(2)).", 4),
        ("Self loops were added twice.", 1),
    ]
    assert sorted(data["mistakes"][0]["tests"]) == sorted(t.name for t in same_piece)
    row = next(t for t in data["tests"] if t["id"] == same_piece[0].id)
    assert row["failures"] == {"not attempted": 3, "failed": 6} and row["attempted"] == 7
    assert row["common_failure"] == {
        "message": "The scores are not scaled (here sqrt(2)).",
        "count": 4,
    }
    assert row["mistakes"][0]["count"] == 4 and data["statuses"]["error"] == 0
    assert next(p for p in data["pieces"] if p["piece"] == piece)["not_attempted"] == 3
    page = summary_html(data)
    assert (
        "Named mistakes, most students first" in page
        and "automatic + written - late penalty" in page
    )
    assert page.index("Named mistakes") < page.index("Graded pieces")
    assert f"total: mean <b>{data['total']['mean']:g}</b>" in page


def test_not_attempted_is_read_from_the_grader_words_never_the_students(fixture_lab):
    """A piece counts as not attempted where the grader says so at the start of a
    message: the blank lab's stub, the student's own ``NotImplementedError`` (raised by
    the test's call or by the graded cell). A wrong answer that holds the words
    (``got 'NotImplementedError'``, an exception whose text quotes them) is a failure:
    before, any message holding "NotImplementedError" moved a failure out of the
    failure counts, the pass rates of those who attempted and the named mistakes."""
    from lablib.grading.results import cell_failed
    from lablib.grading.run.child import describe_exception
    from lablib.session import not_done_text

    tests = list(fixture_lab.tests)
    piece = tests[0].piece
    first = next(t for t in tests if t.piece == piece)
    own = describe_exception(NotImplementedError("the masked case"))
    messages = {
        "stub": (not_done_text(piece), False),
        "own": (own, False),
        "own, in the cell": (f"{cell_failed(piece)}{own}. the test did not run", False),
        "a returned string": ("expected array([4.]), got 'NotImplementedError'", True),
        "a quoting exception": ("ValueError: not NotImplementedError, not done yet", True),
        "a cell quoting it": (f"{cell_failed(piece)}ValueError: NotImplementedError. x", True),
    }
    results = []
    for name, (message, _attempted) in messages.items():
        out = [
            TestResult.failed(t, message, "failed")
            if t is first
            else TestResult(t.id, t.piece, t.name, t.points, t.points, True, t.hidden)
            for t in tests
        ]
        results.append(summarise(fixture_lab, name, f"/subs/{name}.ipynb", out, Status()))
    row = next(t for t in class_summary(fixture_lab, results)["tests"] if t["id"] == first.id)
    attempted = sum(a for _m, a in messages.values())
    assert row["attempted"] == attempted == 3
    assert row["failures"] == {"not attempted": 3, "failed": 3}, row["failures"]
