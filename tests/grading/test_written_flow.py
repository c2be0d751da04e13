"""The instructor's whole flow with written answers, on a class of 32 Lab 2 submissions,
with lablib installed from a wheel (no checkout on the path; tests/grading/wheel_venv.py)
and every command run from a folder outside the checkout.

`lablib grade` (with a roster and a late policy) -> the review page, driven in headless Chromium, scores
every written answer through its rubric -> one student resubmits and is regraded ->
`lablib report` -> `lablib export canvas`. Asserted on the way: every answer was found as
written, no row, score or comment was lost, the resubmitted answer is flagged, and each
student's exported total is the automatic points + the people's points - the late penalty.
"""

from __future__ import annotations

import csv
import json
import random
import re
import shutil
import signal
import subprocess

import pytest

from lablib.grading.review.store import DB_NAME, ReviewStore
from lablib.grading.spec import load_lab

from lablib.grading.gradebook.late import LatePolicy
from wheel_venv import env, run
from written_class import DUE, QUESTIONS, SOLUTION, make_class

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _rows(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_written_answers_from_grading_to_the_lms(installed_lablib, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, (
        "No Chromium on PATH: install Debian's chromium package (`bash .ci/run setup` does)."
    )
    lablib = installed_lablib[0].parent / "lablib"

    def _lablib(*args, cwd):
        return run([lablib, *args], cwd=cwd, timeout=1200)

    made = make_class(tmp_path / "class", n=32)
    out = tmp_path / "out"
    printed = _lablib(
        "grade",
        "lab2",
        "class",
        "-o",
        "out",
        "--roster",
        "roster.csv",
        "--quiet",
        "--due",
        DUE,
        "--late-per-day",
        "10%",
        "--late-cap",
        "30%",
        "--late-grace",
        "30m",
        cwd=tmp_path,
    )
    assert "96 written answers still to grade" in printed

    # 1. every answer found as the student wrote it
    book = json.loads((out / "grades.json").read_text())
    assert len(book["submissions"]) == 32 and all(e["student"] for e in book["submissions"])
    for entry in book["submissions"]:
        for q in QUESTIONS:
            assert entry["answers"][q]["text"] == made["answers"][entry["submission"]][q].strip(), (
                entry["submission"],
                q,
            )
    auto = {e["submission"]: e["score"] for e in book["submissions"]}
    similarity = json.loads((out / "summary.json").read_text())["similarity"]
    assert [len(g) for g in similarity["same_code"]] == [32], (
        "the same model code: one group, no 496 pairs"
    )
    public = load_lab("lab2").max_score  # no hidden tests here: the public points
    possible = public + load_lab("lab2").written_points
    assert set(auto.values()) == {public}, "the fast-mode model code passes every public test"

    # 2. the review page (`lablib review`, the wheel's): every answer scored through the rubric
    lab = load_lab("lab2")
    shutil.copy(SOLUTION, tmp_path / "model.ipynb")
    review = subprocess.Popen(
        [
            lablib,
            "review",
            "lab2",
            "out",
            "--no-browser",
            "--grader",
            "ta-flow",
            "--solution",
            "model.ipynb",
        ],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = review.stdout.readline()
    assert "open http://127.0.0.1:" in line, (
        line,
        review.stderr.read() if review.poll() is not None else "",
    )
    url = re.search(r"http://\S+", line).group(0)  # with its token
    rng = random.Random(7)
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=chromium,
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                ],
            )
            expect = playwright.expect
            page = browser.new_page()
            page.goto(url)
            for q in QUESTIONS:
                page.locator(f"#questions button[data-question='{q}']").click()
                expect(page.locator("#q-title")).to_contain_text(q)
                expect(page.locator(".answer")).to_have_count(32)
                empty = page.locator(".answer .empty").count()
                # the blank answers first: select them all, apply "No answer." (the last item) at once
                items = page.locator("#items li")
                last = items.count()
                for k in range(32):
                    card = page.locator(".answer").nth(k)
                    if card.locator(".empty").count():
                        card.locator("input[type=checkbox]").check()
                if empty:
                    page.keyboard.press(str(last))
                    expect(page.locator(".badge.done")).to_have_count(empty)
                # then every other answer, one at a time, by keys: 'n' to the next to grade, 1-2 items
                for _ in range(32 - empty):
                    page.keyboard.press("n")
                    token = page.locator(".answer.focused").get_attribute("data-token")
                    for key in rng.sample(range(1, last), rng.randint(1, 2)):
                        page.keyboard.press(str(key))
                        expect(page.locator("#status")).to_have_text("saved")
                    expect(
                        page.locator(f".answer[data-token='{token}'] .badge.done")
                    ).to_have_count(1)
                expect(page.locator(".badge.todo")).to_have_count(0)
                expect(page.locator("#progress-text")).to_have_text("32/32 graded")
            page.locator(".answer").nth(3).click()
            page.locator(".answer.focused textarea").fill("Good use of the class counts.")
            page.keyboard.press("Tab")
            expect(page.locator("#status")).to_have_text("saved")
            page.reload()
            expect(page.locator(".badge.todo")).to_have_count(0)
            browser.close()
    finally:
        # SIGTERM (Ctrl-C is SIGINT, which a shell's background job may have ignored): the
        # command writes the gradebook and ends
        review.send_signal(signal.SIGTERM)
        stdout, stderr = review.communicate(timeout=300)
    assert review.returncode == 0 and "0 written answers still to grade" in stdout, (stdout, stderr)
    store = ReviewStore(out / DB_NAME, lab)
    names = [e["submission"] for e in book["submissions"]]
    given = store.person_scores(names)
    assert all(given[n][q].graded for n in names for q in QUESTIONS), (
        "every written answer has a person's score"
    )
    commented = [
        n for n in names if given[n]["find_error"].comment == "Good use of the class counts."
    ]
    assert len(commented) == 1

    # 3. one student resubmits a changed answer: regraded alone, nothing else lost
    student = "s07"
    path = tmp_path / "class" / f"{student}.ipynb"
    path.write_text(
        path.read_text(encoding="utf-8").replace("(student 7)", "(student 7, resubmitted)"),
        encoding="utf-8",
    )
    _lablib("grade", "lab2", f"class/{student}.ipynb", "-o", "out", "--quiet", cwd=tmp_path)
    rows = {r["submission"]: r for r in _rows(out / "grades.csv")}
    assert len(rows) == 32 and all(r["student_id"] for r in rows.values()), (
        "rows and the roster kept"
    )
    regraded = json.loads((out / "grades.json").read_text())
    entry = next(e for e in regraded["submissions"] if e["submission"] == student)
    changed = [q for q in QUESTIONS if "resubmitted" in entry["answers"][q]["text"]]
    assert changed and all(entry["written"][q]["stale"] for q in changed), (
        "a changed answer is flagged"
    )
    assert int(rows[student]["ungraded"]) == len(changed)
    assert all(rows[n]["ungraded"] == "0" for n in names if n != student)
    # the kept roster's time dated s07's earlier notebook, not this one: not computed
    # until the instructor gives the roster (its times) again
    assert rows[student]["late_penalty"] == "", rows[student]
    assert "comes from the roster kept from an earlier grading run" in rows[student]["lateness"]
    _lablib(
        "grade",
        "lab2",
        f"class/{student}.ipynb",
        "-o",
        "out",
        "--quiet",
        "--roster",
        "roster.csv",
        cwd=tmp_path,
    )

    # 4. the people's grades in every report, then the Canvas export
    _lablib("report", "out", cwd=tmp_path)
    now = ReviewStore(out / DB_NAME, lab).person_scores(names)
    assert now == given, "the regrade kept every person's score and comment"
    rows = {r["submission"]: r for r in _rows(out / "grades.csv")}
    policy = LatePolicy.parse(due=DUE, per_day="10%", cap="30%", grace="30m")
    roster = {r["submission"][: -len(".ipynb")]: r for r in _rows(tmp_path / "roster.csv")}
    penalty = {
        n: policy.penalty(
            roster[n]["submitted_at"], possible, extension=roster[n]["extension"] or None
        ).penalty
        for n in names
    }
    assert sum(p > 0 for p in penalty.values()) >= 6 and penalty["s11"] == 0, (
        "late students, one extension"
    )
    for n in names:
        people = sum(now[n][q].score for q in QUESTIONS)
        assert float(rows[n]["total"]) == pytest.approx(max(0, auto[n] + people - penalty[n])), n
        assert float(rows[n]["late_penalty"]) == pytest.approx(penalty[n])
        assert float(rows[n]["max_total"]) == possible
    feedback = (out / "feedback" / f"{commented[0].replace('/', '_')}.md").read_text()
    assert "Good use of the class counts." in feedback
    # s07's changed answer has not been looked at again: the export says so unless told to go on
    refused = subprocess.run(
        [lablib, "export", "canvas", "out", "--roster", "roster.csv", "-o", "canvas.csv"],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert refused.returncode == 2 and "changed since they were graded" in refused.stderr, (
        refused.stderr
    )
    printed = _lablib(
        "export",
        "canvas",
        "out",
        "--roster",
        "roster.csv",
        "-o",
        "canvas.csv",
        "--pieces",
        "--allow-ungraded",
        cwd=tmp_path,
    )
    assert (
        "32 students" in printed and "1 with written answers not graded or changed since" in printed
    )
    header, points, *students = list(csv.reader(open(tmp_path / "canvas.csv", encoding="utf-8")))
    title = lab.title
    assert float(points[header.index(title)]) == possible
    by_id = {r["student_id"]: r["submission"] for r in rows.values()}
    assert len(students) == 32
    for row in students:
        name = by_id[row[header.index("SIS User ID")]]
        people = sum(now[name][q].score for q in QUESTIONS)
        assert float(row[header.index(title)]) == pytest.approx(
            max(0, auto[name] + people - penalty[name])
        ), name
        for q in QUESTIONS:
            assert float(row[header.index(f"{title}: written {q}")]) == pytest.approx(
                now[name][q].score
            )
