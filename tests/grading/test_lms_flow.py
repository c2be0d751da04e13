"""Every student reaches the LMS (issue 30, done-when): a class of Lab 1 submissions laid
out as each LMS's bulk download lays it out (Canvas, Moodle, Gradescope; 31-32 notebooks
each, with a section folder of one student, NFD names, a CJK name, LATE markers, a group
submission, a student without a submission, and a resubmission made after review) and a
roster in that LMS's own export layout, through the instructor's commands:

    lablib grade -> lablib export (refused: written answers not graded) -> lablib review
    (the command, in a child process with its per-run token), every written answer graded
    on its page in headless Chromium, then "Write the gradebook" -> lablib report -> one
    student resubmits and is regraded -> lablib export

and every roster student is in the export with the expected total (automatic points +
the points the page applied - the late penalty, from the time the LMS or the roster/times
file gives), none lost or unmatched.

On the page the grader reads each answer (anonymised, shuffled) and applies rubric items
as a person does (tests/grading/review_fixtures.py's grade_question): the empty answers
ticked together and given "No answer." by its key, then ``n`` to each answer still to
grade, its first item by its number key and the others by clicks on the rubric. What the
answer says decides the items (student k's answer begins "(student k)": the first 1 +
k % 4 items); the points each answer got are read off the page's badges, and the
gradebook the page wrote must give each of them to the student who wrote that answer.

Grading cost: the classes are made of four graded codes (the solution, the blank lab, two
named mistakes; tests/grading/lms_classes.py), graded once into a seed folder whose grading
cache each class's output starts with (the cache is keyed by the graded code, so the 95
notebooks are read, matched and reported for real, and run four times in all). One
module-scoped fixture per LMS runs its flow once; the tests read what it left.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shutil

import pytest
from wcwidth import wcswidth

from lablib.cli import main
from lablib.grading.gradebook.late import LatePolicy
from lablib.grading.review.store import DB_NAME, ReviewStore
from lablib.grading.spec import load_lab
from lms_classes import (
    DUE,
    QUESTION,
    SOLUTION,
    make_canvas,
    make_gradescope,
    make_moodle,
    make_moodle_teams,
    resubmit,
    write_variants,
)
from review_fixtures import chromium, grade_question, lablib_review

pytestmark = [pytest.mark.integration, pytest.mark.slow]

POLICY = ["--due", DUE.isoformat(timespec="minutes"), "--late-per-day", "10%", "--late-cap", "30%"]
POSSIBLE = 23.0  # 19 automatic + 4 written
RESUBMITS = 4  # an "unscaled" student, resubmitting the solution 40 h late


def _cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    """The four graded codes graded once: the cache every class starts with, and each
    code's automatic points."""
    folder = tmp_path_factory.mktemp("seed")
    code, out, err = _cli(
        "grade",
        "lab1",
        write_variants(folder / "variants"),
        "-o",
        folder / "out",
        "--jobs",
        "2",
        "--quiet",
    )
    assert code == 0, err
    auto = {
        r["submission"]: float(r["score"])
        for r in csv.DictReader(open(folder / "out" / "grades.csv"))
    }
    assert (
        auto["full"] == 19
        and auto["blank"] == 0
        and 0 < auto["unscaled"] < 19
        and 0 < auto["slide"] < 19
    ), auto
    return folder / "out" / ".cache", auto


def _person(made: dict, identity: dict) -> dict:
    """The class's student an identity names (by SID, else e-mail: Moodle's worksheet has no SID)."""
    found = [
        p
        for p in made["people"]
        if identity.get("student_id") == p["sid"]
        or (not identity.get("student_id") and identity.get("email") == p["email"])
    ]
    assert len(found) == 1, identity
    return found[0]


def _choose(text: str, rubric: list) -> list[int]:
    """The grader's choice of rubric items (numbers, from 1) for an answer as the page shows
    it: "No answer." for an empty one, else student k's first 1 + k % 4 scoring items."""
    if not text:
        return [
            next(
                n
                for n, (points, comment) in enumerate(rubric, 1)
                if points == 0 and "No answer" in comment
            )
        ]
    k = int(re.match(r"\(student (\d+)\)", text).group(1))
    scored = [n for n, (points, _) in enumerate(rubric, 1) if points > 0]
    return scored[: 1 + k % len(scored)]


def _written(made: dict, applied: dict) -> dict:
    """Student k -> the points the page gave their answer (an empty answer's: every
    student who handed in an empty one)."""
    written, empty = {}, set()
    for shown in applied.values():
        if shown["text"]:
            k = int(re.match(r"\(student (\d+)\)", shown["text"]).group(1))
            assert k not in written, f"student {k}'s answer shown twice"
            written[k] = shown["score"]
        else:
            empty.add(shown["score"])
    blank = [
        p
        for p in made["people"]
        if not p["answer"] and p is not made["absent"] and "group_of" not in p
    ]
    assert len(empty) == 1 and len(applied) - len(written) == len(blank), (empty, len(blank))
    (score,) = empty
    written.update({p["k"]: score for p in blank})
    return written


def _flow(made: dict, tmp, seed, fmt: str) -> dict:
    cache, auto = seed
    out = tmp / "out"
    shutil.copytree(cache, out / ".cache")
    extra = ["--times", made["times"]] if "times" in made else []
    graded = _cli(
        "grade",
        "lab1",
        made["subs"],
        "-o",
        out,
        "--roster",
        made["roster"],
        "--jobs",
        "2",
        "--quiet",
        *POLICY,
        *extra,
    )
    assert graded[0] == 0, graded[2]
    first = json.loads((out / "grades.json").read_text())
    early = _cli("export", fmt, out, "--roster", made["roster"], "-o", tmp / "early.csv")

    # the written answers graded on the review page, as a grader grades them
    with (
        lablib_review("lab1", out, "--solution", SOLUTION, grader="ta-lms", cwd=tmp) as review,
        chromium() as (browser, expect),
    ):
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(review.url)
        applied = grade_question(page, expect, QUESTION, _choose)
        page.locator("#write").click()
        expect(page.locator("#status")).to_contain_text("0 written answers still to grade")
        assert not errors, errors
    assert review.returncode == 0 and "0 written answers still to grade" in review.stdout, (
        review.stderr
    )
    written = _written(made, applied)
    reviewed = json.loads((out / "grades.json").read_text())
    assert len(reviewed["submissions"]) == len(first["submissions"])
    for entry in reviewed["submissions"]:  # each answer's points went to the student who wrote it
        person = _person(made, entry["identity"])
        given = entry["written"][QUESTION]
        assert given["graded"] and not given["stale"] and entry["ungraded"] == 0, entry[
            "submission"
        ]
        assert given["score"] == pytest.approx(written[person["k"]]), (
            entry["submission"],
            person["k"],
        )
    assert {e["grader"] for e in ReviewStore(out / DB_NAME, load_lab("lab1")).events()} == {
        "ta-lms"
    }
    reported = _cli("report", out)
    assert reported[0] == 0, reported[2]

    again = resubmit(made, RESUBMITS)
    regraded = _cli("grade", "lab1", again["path"], "-o", out, "--quiet", *again["args"])
    assert regraded[0] == 0, regraded[2]
    exported = _cli("export", fmt, out, "--roster", made["roster"], "-o", tmp / "export.csv")
    refused = None
    if fmt == "canvas":  # a LATE marker without a time: no penalty computed, refused until allowed
        refused = exported
        exported = _cli(
            "export", fmt, out, "--roster", made["roster"], "-o", tmp / "export.csv",
            "--allow-unknown-lateness",
        )  # fmt: skip
    assert exported[0] == 0, exported[2]
    return {
        "refused": refused,
        "made": made,
        "out": out,
        "auto": auto,
        "graded": graded,
        "first": first,
        "early": early,
        "written": written,
        "regraded": regraded,
        "exported": exported,
        "export": tmp / "export.csv",
        "fmt": fmt,
        "book": json.loads((out / "grades.json").read_text()),
        "summary": json.loads((out / "summary.json").read_text()),
    }


@pytest.fixture(scope="module")
def canvas(tmp_path_factory, seed):
    tmp = tmp_path_factory.mktemp("canvas")
    return _flow(make_canvas(tmp), tmp, seed, "canvas")


@pytest.fixture(scope="module")
def moodle(tmp_path_factory, seed):
    tmp = tmp_path_factory.mktemp("moodle")
    return _flow(make_moodle(tmp), tmp, seed, "moodle")


@pytest.fixture(scope="module")
def gradescope(tmp_path_factory, seed):
    tmp = tmp_path_factory.mktemp("gradescope")
    return _flow(make_gradescope(tmp), tmp, seed, "canvas")


FLOWS = ["canvas", "moodle", "gradescope"]


def _expected(flow, person) -> float:
    """A roster student's total: the automatic points of what they handed in + the
    people's points - the late penalty of the time the LMS or roster gave (0 without a
    submission)."""
    if person is flow["made"]["absent"]:
        return 0.0
    k = person.get("group_of", person["k"])  # a Gradescope group's partner: the group's submission
    policy = LatePolicy.parse(due=DUE.isoformat(), per_day="10%", cap="30%")
    penalty = policy.penalty(person["time"], POSSIBLE).penalty if person.get("time") else 0.0
    return max(0.0, flow["auto"][person["variant"]] + flow["written"][k] - penalty)


def _export_rows(flow) -> dict:
    rows = list(csv.reader(open(flow["export"], encoding="utf-8")))
    header, body = rows[0], rows[2:] if flow["fmt"] == "canvas" else rows[1:]
    key = header.index("SIS User ID") if flow["fmt"] == "canvas" else header.index("Email address")
    return header, {r[key]: r for r in body}


@pytest.mark.parametrize("lms", FLOWS)
def test_every_roster_student_is_exported_with_the_expected_total(lms, request):
    flow = request.getfixturevalue(lms)
    header, rows = _export_rows(flow)
    title = load_lab("lab1").title
    column = header.index(title)
    people = flow["made"]["people"]
    key = "sid" if flow["fmt"] == "canvas" else "email"
    assert sorted(rows) == sorted(p[key] for p in people), "every roster student, no one else"
    for person in people:
        assert float(rows[person[key]][column]) == pytest.approx(_expected(flow, person)), (
            lms,
            person["k"],
        )
    summary = flow["exported"][1]
    assert f"{len(people)} students" in summary and "0 not in the roster" in summary
    assert (
        "0 with written answers not graded" in summary
        and "1 missing one or more (0, noted)" in summary
    )
    assert flow["book"]["roster"]["unmatched_submissions"] == []
    assert [s["name"] for s in flow["book"]["roster"]["students_without_submission"]] == [
        f"{flow['made']['absent']['first']} {flow['made']['absent']['last']}"
        if lms != "canvas"
        else f"{flow['made']['absent']['last']}, {flow['made']['absent']['first']}"
    ]


@pytest.mark.parametrize("lms", FLOWS)
def test_export_before_review_is_refused(lms, request):
    flow = request.getfixturevalue(lms)
    code, out, err = flow["early"]
    assert code == 2 and "written answers never graded" in err and "--allow-ungraded" in err
    assert "lablib review lab1_attention" in err


@pytest.mark.parametrize("lms", FLOWS)
def test_identities_are_resolved_once_and_kept(lms, request):
    flow = request.getfixturevalue(lms)
    entries = flow["first"]["submissions"]
    assert all(e["identity"]["matched"] for e in entries), [
        e["submission"] for e in entries if not e["identity"]["matched"]
    ]
    by_k = {_person(flow["made"], e["identity"])["k"]: e for e in entries}
    # the section folder holding one student is not the student; names NFC
    assert by_k[3]["submission"] in ("ivanovazoë", "Zoë Ivanova")
    assert by_k[1]["submission"] in ("núñezjosé", "José Núñez")
    how = {
        "canvas": "Canvas user id",
        "moodle": "Moodle participant id",
        "gradescope": "Gradescope SID",
    }[lms]
    assert all(e["identity"]["matched_by"].startswith(how) for e in entries)
    # the regrade kept every other row's identity
    after = {
        e["submission"]: _person(flow["made"], e["identity"])["k"]
        for e in flow["book"]["submissions"]
    }
    assert after == {e["submission"]: _person(flow["made"], e["identity"])["k"] for e in entries}


@pytest.mark.parametrize("lms", FLOWS)
def test_the_resubmission_replaces_the_row_and_its_time(lms, request):
    flow = request.getfixturevalue(lms)
    person = flow["made"]["people"][RESUBMITS]
    entry = next(
        e for e in flow["book"]["submissions"] if _person(flow["made"], e["identity"]) is person
    )
    assert entry["score"] == 19 and entry["late"]["late_seconds"] == 40 * 3600
    assert entry["written"][QUESTION]["graded"] and not entry["written"][QUESTION]["stale"]
    assert (
        sum(_person(flow["made"], e["identity"]) is person for e in flow["book"]["submissions"])
        == 1
    )
    if lms != "moodle":  # a new file: the old row is replaced, with a word
        assert "lablib grade: replaced:" in flow["regraded"][2]
    # a regrade of one names, again, the student without a submission (from the gradebook)
    assert "lablib grade: roster: no submission from" in flow["regraded"][2]


@pytest.fixture(scope="module")
def moodle_teams(tmp_path_factory, seed):
    """A Moodle team assignment (one folder per group, the worksheet's Group column)
    through grade, the written answers graded through the review store (the page is the
    individual classes' test), report and export."""
    cache, auto = seed
    tmp = tmp_path_factory.mktemp("moodle_teams")
    made = make_moodle_teams(tmp)
    out = tmp / "out"
    shutil.copytree(cache, out / ".cache")
    graded = _cli(
        "grade", "lab1", made["subs"], "-o", out, "--roster", made["roster"], "--quiet", *POLICY
    )
    assert graded[0] == 0, graded[2]
    store = ReviewStore(out / DB_NAME, load_lab("lab1"))
    rubric = store.rubric(QUESTION)
    book = json.loads((out / "grades.json").read_text())
    written = {}
    for entry in book["submissions"]:
        text = entry["answers"][QUESTION]["text"] if entry.get("answers") else ""
        chosen = _choose(text.strip(), [(r.points, r.comment) for r in rubric])
        store.apply([entry["submission"]], QUESTION, {"items": [rubric[n - 1].id for n in chosen]})
        first = _person(made, entry["identity"])["group_of"]
        written[first] = sum(rubric[n - 1].points for n in chosen)
    reported = _cli("report", out)
    assert reported[0] == 0, reported[2]
    exported = _cli("export", "moodle", out, "--roster", made["roster"], "-o", tmp / "export.csv")
    assert exported[0] == 0, exported[2]
    return {
        "out": out,
        "terminal": [*graded[1:], *reported[1:], *exported[1:]],
        "made": made,
        "auto": auto,
        "written": written,
        "graded": graded,
        "exported": exported,
        "export": tmp / "export.csv",
        "fmt": "moodle",
        "book": json.loads((out / "grades.json").read_text()),
    }


def test_a_moodle_team_submission_reaches_every_member(moodle_teams):
    flow = moodle_teams
    people, absent = flow["made"]["people"], flow["made"]["absent"]
    entries = flow["book"]["submissions"]
    assert len(entries) == 4 and all(e["identity"]["matched"] for e in entries)
    assert all(e["identity"]["matched_by"].startswith("Moodle group '") for e in entries)
    members = {
        e["submission"]: [e["identity"]["email"], *(o["email"] for o in e["identity"]["others"])]
        for e in entries
    }
    for e in entries:  # each folder's members are its group's, by the worksheet
        group = _person(flow["made"], e["identity"])["group"]
        assert sorted(members[e["submission"]]) == sorted(
            p["email"] for p in people if p["group"] == group
        ), e["submission"]
    assert flow["book"]["roster"]["unmatched_submissions"] == []
    assert sorted(s["email"] for s in flow["book"]["roster"]["students_without_submission"]) == (
        sorted(p["email"] for p in absent)
    )
    header, rows = _export_rows(flow)
    column = header.index(load_lab("lab1").title)
    assert sorted(rows) == sorted(p["email"] for p in people)
    policy = LatePolicy.parse(due=DUE.isoformat(), per_day="10%", cap="30%")
    for p in people:
        if p in absent:
            expected = 0.0
        else:
            penalty = policy.penalty(p["time"], POSSIBLE).penalty
            expected = max(
                0.0, flow["auto"][p["variant"]] + flow["written"][p["group_of"]] - penalty
            )
        assert float(rows[p["email"]][column]) == pytest.approx(expected), p["k"]
    assert any(policy.penalty(p["time"], POSSIBLE).penalty > 0 for p in people if p["time"])
    assert (
        f"{len(people)} students" in flow["exported"][1]
        and "0 not in the roster" in (flow["exported"][1])
    )


def test_a_group_name_s_hidden_characters_reach_no_output(moodle_teams):
    """The hostile group name (a bidi override, a terminal escape, a formula) matched its
    folder, and neither the terminal nor any file written for people or the LMS holds its
    control characters; no exported cell starts a formula."""
    flow = moodle_teams
    assert any(
        "Les<_i> Bleus ?" in e["identity"]["matched_by"] for e in flow["book"]["submissions"]
    )
    written = [  # not lablib's own records (the roster's copy kept as given: ".roster-*")
        p
        for p in flow["out"].rglob("*")
        if p.is_file() and p.suffix in {".md", ".csv", ".html"} and not p.name.startswith(".")
    ]
    exported = sorted(flow["export"].parent.glob("export*.csv"))  # with its notes file
    assert written and len(exported) == 2, (written, exported)
    for where, text in [
        *((f"terminal {n}", t) for n, t in enumerate(flow["terminal"])),
        *((str(p), p.read_text(encoding="utf-8")) for p in [*written, *exported]),
    ]:
        assert "\u202e" not in text and "\x1b" not in text, where
    for row in csv.reader(open(flow["export"], encoding="utf-8")):
        assert not [c for c in row if c[:1] in ("=", "+", "@")], row


def test_canvas_late_markers_without_a_time_are_listed(canvas):
    entries = {e["identity"]["student_id"]: e for e in canvas["book"]["submissions"]}
    marked = next(p for p in canvas["made"]["people"] if p["k"] == 7)
    assert (
        entries[marked["sid"]]["identity"]["lms"]["late"] and entries[marked["sid"]]["late"] is None
    )
    assert (
        f"{entries[marked['sid']]['submission']} is marked LATE by Canvas but has no submission time"
        in canvas["graded"][2]
    )
    assert canvas["summary"]["late"]["marked_late_no_time"] == [
        entries[marked["sid"]]["submission"]
    ]
    timed = [e for e in entries.values() if e["identity"]["lms"]["late"] and e["late"]]
    assert timed and all(e["identity"]["time_source"].startswith("the times file") for e in timed)
    # never exported as on time unnoticed: refused, then (allowed) noted as not computed
    code, _, err = canvas["refused"]
    name = entries[marked["sid"]]["submission"]
    assert code == 2 and "marks it late (Canvas's LATE)" in err and name in err, err
    assert (
        "--allow-unknown-lateness" in err
        and "1 with lateness not computed" in canvas["exported"][1]
    )


def test_gradescope_group_and_times(gradescope):
    people = gradescope["made"]["people"]
    group = next(
        e
        for e in gradescope["book"]["submissions"]
        if e["identity"]["student_id"] == people[5]["sid"]
    )
    assert [o["student_id"] for o in group["identity"]["others"]] == [people[6]["sid"]]
    assert group["identity"]["time_source"] == "Gradescope's submission_metadata.yml"


def test_moodle_times_come_from_the_worksheet(moodle):
    entries = moodle["book"]["submissions"]
    assert all(e["identity"]["time_source"] == "the roster's submitted_at column" for e in entries)
    assert sum(e["late"]["penalty"] > 0 for e in entries) >= 5


@pytest.mark.parametrize("lms", FLOWS)
def test_terminal_table_is_aligned(lms, request):
    flow = request.getfixturevalue(lms)
    score = re.compile(r"  +\d+(?:\.\d+)?(/)\d+ +\S")  # the scores' slashes line up
    lines = [line for line in flow["graded"][1].splitlines() if score.search(line)]
    columns = {wcswidth(line[: score.search(line).start(1)]) for line in lines}
    assert len(lines) >= 30 and len(columns) == 1, columns


def test_summary_headline_and_named_mistakes(canvas):
    summary = canvas["summary"]
    rows = canvas["book"]["submissions"]
    assert summary["total"]["possible"] == POSSIBLE
    assert summary["total"]["mean"] == pytest.approx(
        round(sum(e["total"] for e in rows) / len(rows), 3)
    )
    assert sum(summary["total"]["histogram"]["counts"]) == len(rows)
    assert summary["statuses"]["error"] == 0, "a stub is not attempted, never an error"
    first = summary["mistakes"][0]
    assert first["piece"] in ("attention", "positional_encoding") and first["students"] >= 5
    named = [m["mistake"] for m in summary["mistakes"]]
    assert len(named) == 2, "each mistake once, whatever numbers each test's wording carries"
    assert any("not scaled" in m for m in named) and any("slide" in m for m in named), named
    attention = next(t for t in summary["tests"] if t["id"] == "attention::worked_example")
    assert "not attempted" in attention["failures"] and "error" not in attention["failures"]
    assert not attention["common_failure"]["message"].startswith("not done yet")
    page = (canvas["out"] / "summary.html").read_text()
    assert (
        "Named mistakes, most students first" in page
        and "automatic + written - late penalty" in page
    )
