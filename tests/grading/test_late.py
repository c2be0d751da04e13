"""Late work: the policy's arithmetic, and penalties in every report and in the export."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os

import pytest

from lablib.grading import report
from lablib.grading.export import ExportError, export
from lablib.grading.grade import rewrite_reports
from lablib.grading.gradebook.late import LateError, LatePolicy, parse_duration, parse_time
from lablib.grading.results import PieceScore, Status, SubmissionResult
from lablib.grading.gradebook.roster import Roster
from lablib.grading.spec import LabSpec

DUE = "2026-11-20T23:59+01:00"


def test_penalty_per_started_day_with_cap_grace_and_extensions():
    policy = LatePolicy.parse(due=DUE, per_day="10%", cap="30%", grace="15m")
    assert policy.penalty("2026-11-20T23:00+01:00", 20).penalty == 0
    within = policy.penalty("2026-11-21T00:10+01:00", 20)
    assert within.penalty == 0 and "grace period of 15 min" in within.text
    one = policy.penalty("2026-11-21T00:20+01:00", 20)
    assert one.units == 1 and one.penalty == 2.0 and "Late by 21 min" in one.text
    two = policy.penalty("2026-11-22T08:00+01:00", 20)
    assert two.units == 2 and two.penalty == 4.0
    assert policy.penalty("2026-12-20T08:00+01:00", 20).penalty == 6.0, "the cap"
    assert policy.penalty("2026-11-22T08:00+01:00", 20, extension="2d").penalty == 0
    assert policy.penalty("2026-11-22T08:00+01:00", 20, due="2026-11-22T07:00+01:00").units == 1
    # the same instant written in another zone
    assert policy.penalty("2026-11-21T07:20+08:00", 20).penalty == 2.0


def test_penalty_per_hour_in_points_and_never_more_than_the_points():
    policy = LatePolicy.parse(due=DUE, per_hour="1.5")
    assert (
        policy.penalty("2026-11-21T02:30+01:00", 20).penalty == 4.5
    )  # 2 h 31 min: 3 started hours
    assert policy.penalty("2026-11-30T02:30+01:00", 20).penalty == 20


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"due": "next friday"}, "not a time"),
        ({"due": DUE, "per_day": "ten"}, "not an amount"),
        ({"due": DUE, "per_day": "150%"}, "out of range"),
        ({"due": DUE, "per_day": "1", "per_hour": "1"}, "not both"),
        ({"due": DUE, "grace": "15"}, "with its unit"),
    ],
)
def test_bad_policies_are_refused_with_what_to_write(kwargs, message):
    with pytest.raises(LateError, match=message):
        LatePolicy.parse(**kwargs)


def test_times_and_durations():
    assert parse_time("2026-11-20 23:58:12 -0800").utcoffset() == dt.timedelta(hours=-8)
    assert parse_time("2026-11-20T23:58Z").utcoffset() == dt.timedelta(0)
    assert parse_time("2026-11-20T23:58").tzinfo is not None, "a naive time is in the local zone"
    assert parse_duration("1d12h") == dt.timedelta(hours=36) and parse_duration(
        "90m"
    ) == dt.timedelta(minutes=90)


def _lab():
    lab = LabSpec("lab8_late", "Lab 8: late work")
    lab.piece("f", objects=["f"])
    lab.answer("why", points=5, title="why", rubric=[(5, "Right.")])
    return lab


def _class(tmp_path, times):
    results = [
        SubmissionResult(
            name,
            str(tmp_path / f"{name}.ipynb"),
            Status(),
            10.0,
            15.0,
            {"f": PieceScore(10.0, 15.0)},
            [],
        )
        for name in times
    ]
    roster = tmp_path / "roster.csv"
    with open(roster, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["student_id", "name", "email", "section", "submission", "submitted_at", "extension"]
        )
        for k, (name, when) in enumerate(times.items()):
            writer.writerow(
                [
                    f"{k}",
                    name.title(),
                    f"{name}@x.edu",
                    "A",
                    name,
                    when,
                    "2d" if name == "dan" else "",
                ]
            )
    return results, roster


def test_penalties_reach_every_report_and_the_export(tmp_path):
    lab = _lab()
    times = {
        "ann": "2026-11-20T22:00+01:00",
        "bob": "2026-11-21T10:00+01:00",
        "cat": "",
        "dan": "2026-11-22T10:00+01:00",
    }
    results, roster_path = _class(tmp_path, times)
    out = tmp_path / "out"
    policy = LatePolicy.parse(due=DUE, per_day="10%", cap="50%")
    report.write_reports(out, lab, results, roster=Roster.load(roster_path), late_policy=policy)
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    assert rows["ann"]["late_penalty"] == "0" and rows["ann"]["total"] == "10"
    assert rows["bob"]["late_penalty"] == "2" and rows["bob"]["total"] == "8", (
        "10% of 20 points possible"
    )
    assert rows["bob"]["late_hours"] == "10.02"
    assert rows["cat"]["late_penalty"] == "" and rows["cat"]["total"] == "10", "no time: no penalty"
    assert rows["dan"]["late_penalty"] == "0", "the roster's extension"
    feedback = (out / "feedback" / "bob.md").read_text()
    assert "late penalty -2" in feedback and "Late by 10 h 1 min" in feedback
    assert "Late by 10 h 1 min" in (out / "feedback" / "bob.html").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["late"]["late"] == 1 and summary["late"]["no_time"] == ["cat"]
    assert summary["late"]["total"]["mean"] == 9.5, "the totals the gradebook gives: 10, 8, 10, 10"
    assert "Late work" in (out / "summary.html").read_text()
    entry = next(
        e
        for e in json.loads((out / "grades.json").read_text())["submissions"]
        if e["submission"] == "bob"
    )
    assert entry["late"]["penalty"] == 2 and entry["total"] == 8
    with pytest.raises(
        ExportError, match="4 written answers never graded"
    ):  # nobody graded them yet
        export("canvas", [out], Roster.load(roster_path), tmp_path / "canvas.csv")
    done = export(
        "canvas", [out], Roster.load(roster_path), tmp_path / "canvas.csv", allow_ungraded=True
    )
    assert (
        len(done["ungraded"][lab.name]) == 4
        and "4 with written answers not graded" in done["summary"]
    )
    # Canvas's own late policy, where on, deducts again at the import: the summary says so
    assert done["late_deducted"] == {lab.name: ["1"]}
    assert "1 total(s) with lablib's late penalty deducted: turn off Canvas's" in done["summary"]
    moodle = export("moodle", [out], Roster.load(roster_path), tmp_path / "m.csv",
                    allow_ungraded=True)  # fmt: skip
    assert moodle["late_deducted"] == {lab.name: ["1"]} and "Canvas" not in moodle["summary"]
    header, possible, *students = list(csv.reader(open(tmp_path / "canvas.csv", encoding="utf-8")))
    assert possible[header.index(lab.title)] == "20"
    assert {r[0]: r[header.index(lab.title)] for r in students} == {
        "Ann": "10",
        "Bob": "8",
        "Cat": "10",
        "Dan": "10",
    }


def test_the_kept_policy_applies_to_rewrites_and_file_times_work(tmp_path):
    lab = _lab()
    results, roster_path = _class(tmp_path, {"eve": "", "fay": ""})
    for r, hours in zip(results, (-1, 30)):
        open(r.path, "w").close()
        when = parse_time(DUE).timestamp() + hours * 3600
        os.utime(r.path, (when, when))
    out = tmp_path / "out"
    report.write_reports(out, lab, results)
    rewrite_reports(
        out,
        lab=lab,
        late_policy=LatePolicy.parse(due=DUE, per_day="2", from_files=True),
        roster=Roster.load(roster_path),
    )
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    assert rows["eve"]["late_penalty"] == "0" and rows["fay"]["late_penalty"] == "4", (
        "30 h: 2 started days"
    )
    rewrite_reports(out, lab=lab)  # no policy or roster given: the kept ones
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    assert rows["fay"]["total"] == "6"
    assert rows["fay"]["name"] == "Fay", "resolved with the roster's kept copy"


GROUP_ROSTER = """First Name,Last Name,SID,Email,Role,extension
Erin,Doe,S001,erin@uni.edu,Student,3d
Frank,Roe,S002,frank@uni.edu,Student,
Gina,Poe,S003,gina@uni.edu,Student,
"""


def _group_book(tmp_path, out, first: str, extension="3d"):
    """A Gradescope group submission of Erin (3-day extension) and Frank (none), ``first``
    the first submitter, 1.4 days late for Frank; Gina alone, as late."""
    from lablib.grading.gradebook.identity import resolve_all
    from lablib.grading.results import PersonScore, WrittenAnswer
    from lablib.grading.submissions import Found

    roster_path = tmp_path / "roster.csv"
    roster_path.write_text(GROUP_ROSTER.replace(",3d\n", f",{extension}\n"))
    roster = Roster.load(roster_path)
    people = {
        "erin": {"name": "Erin Doe", "sid": "S001", "email": "erin@uni.edu"},
        "frank": {"name": "Frank Roe", "sid": "S002", "email": "frank@uni.edu"},
        "gina": {"name": "Gina Poe", "sid": "S003", "email": "gina@uni.edu"},
    }
    pair = [people[first], people["frank" if first == "erin" else "erin"]]
    found = [
        Found(
            name,
            tmp_path / name / "lab.ipynb",
            f"{name}/lab.ipynb",
            name,
            {"lms": "gradescope", "submitters": who, "submitted_at": "2026-11-22T10:00+00:00"},
        )
        for name, who in (("submission_1", pair), ("submission_2", [people["gina"]]))
    ]
    lab = _lab()
    identities = resolve_all(found, roster, lab=lab)
    results = []
    for f in found:
        r = SubmissionResult(
            f.name,
            str(f.path),
            Status(),
            10.0,
            15.0,
            {"f": PieceScore(10.0, 15.0)},
            [],
            answers={"why": WrittenAnswer("because", "tag")},
        )
        r.identity = identities[f.name]
        results.append(r)
    person = {r.submission: {"why": PersonScore("why", 4.0, 5.0, graded=True)} for r in results}
    policy = LatePolicy.parse(due="2026-11-20T23:59+00:00", per_day="10%")
    report.write_reports(out, lab, results, roster=roster, person=person, late_policy=policy)
    return lab, roster


@pytest.mark.parametrize("first", ["erin", "frank"])
def test_each_group_member_has_their_own_late_penalty(tmp_path, first):
    """Erin has a 3-day extension, Frank none; their group submitted 1.4 days late: Erin
    is on time (14 of 20), Frank loses 2 days x 10% (14 - 4 = 10), whoever submitted."""
    out = tmp_path / "out"
    lab, roster = _group_book(tmp_path, out, first)
    done = export("canvas", [out], roster, tmp_path / "c.csv")
    header, _possible, *rows = list(csv.reader(open(tmp_path / "c.csv", encoding="utf-8")))
    totals = {r[0]: r[header.index(lab.title)] for r in rows}
    assert totals == {"Erin Doe": "14", "Frank Roe": "10", "Gina Poe": "10"}
    # Canvas's import grades a group assignment once per group unless graded individually:
    # members' totals that differ are said, with what to set in Canvas
    assert done["group_totals_differ"] == {lab.name: ["submission_1"]}
    assert "1 group submission(s) whose members' totals differ" in done["summary"]
    notes = (tmp_path / "c.notes.csv").read_text(encoding="utf-8")
    assert "group submission 'submission_1', whose members' totals differ" in notes
    assert "this member's is 14" in notes and "this member's is 10" in notes
    entry = json.loads((out / "grades.json").read_text())["submissions"][0]
    members = {m["name"]: (m["total"], m["late"]["penalty"]) for m in entry["members"]}
    assert members == {"Erin Doe": (14, 0), "Frank Roe": (10, 4)}
    # where the group's row is shown: its feedback and grades.csv give each member's own
    feedback = (out / "feedback" / "submission_1.md").read_text()
    said = "Each member's own due date counts"
    assert (
        said in feedback
        and "Erin Doe: due 2026-11-23T23:59+00:00: no deduction, total 14" in feedback
    )
    assert "Frank Roe: due 2026-11-20T23:59+00:00: -4 points, total 10" in feedback
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    assert said in rows["submission_1"]["lateness"] and said not in rows["submission_2"]["lateness"]
    # the summary counts people: Erin on time, Frank and Gina late (not the first member's
    # lateness for both of the group)
    late = json.loads((out / "summary.json").read_text())["late"]
    assert (late["late"], late["on_time"]) == (2, 1), late
    assert [r["submission"] for r in late["rows"]] == ["submission_1 (Frank Roe)", "submission_2"]
    assert "2 late, 1 on time" in (out / "summary.html").read_text()


def _graded_with_roster(tmp_path, lab, rows: str):
    """The reports of a class graded 10/15 each, one student per roster row (``rows``:
    student_id,name,email,submission,submitted_at), under a 10%-a-day late policy."""
    submissions = [line.split(",")[3] for line in rows.splitlines()]
    results = [
        SubmissionResult(
            n, str(tmp_path / f"{n}.ipynb"), Status(), 10.0, 15.0, {"f": PieceScore(10.0, 15.0)}, []
        )
        for n in submissions
    ]
    roster_path = tmp_path / "roster.csv"
    roster_path.write_text("student_id,name,email,submission,submitted_at\n" + rows)
    out = tmp_path / "out"
    policy = LatePolicy.parse(due=DUE, per_day="10%")
    report.write_reports(out, lab, results, roster=Roster.load(roster_path), late_policy=policy)
    return out


def test_a_time_that_cannot_be_read_is_never_on_time(tmp_path, capsys):
    """A German Moodle worksheet's time: the row's lateness is not computed (no penalty,
    never "on time"): grades.csv leaves the penalty empty and says why, the summary counts
    it apart, `lablib grade` prints it and the export refuses it unless allowed (then
    noted, and printed)."""
    from lablib.cli import _print_roster_lists, main

    lab = _lab()
    out = _graded_with_roster(
        tmp_path,
        lab,
        'S001,Erin Doe,erin@uni.edu,erin,"Freitag, 27. November 2026, 14:14"\n'
        "S002,Frank Roe,frank@uni.edu,frank,2026-11-21T10:00+01:00\n",
    )
    roster_path = tmp_path / "roster.csv"
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    erin = rows["erin"]
    assert erin["late_penalty"] == "" and erin["late_hours"] == "", "never 0: on time"
    expected = (
        "Lateness not computed: the time 'Freitag, 27. November 2026, 14:14' (from the roster's "
        "submitted_at column) could not be read (expected ISO 8601"
    )
    assert erin["lateness"].startswith(expected)
    assert "give the times with --times or an English worksheet" in erin["lateness"]
    late = json.loads((out / "summary.json").read_text())["late"]
    assert (late["late"], late["on_time"], late["no_time"]) == (1, 0, [])
    assert [x["submission"] for x in late["not_computed"]] == ["erin"]
    assert "Lateness not computed (1)" in (out / "summary.html").read_text()
    assert expected in (out / "feedback" / "erin.md").read_text()
    _print_roster_lists(out)  # what `lablib grade` prints after grading
    assert f"lablib grade: late: erin: {expected}" in capsys.readouterr().err
    with pytest.raises(
        ExportError, match=r"lateness could not be computed.*erin.*--allow-unknown-lateness"
    ):
        export("canvas", [out], Roster.load(roster_path), tmp_path / "c.csv", allow_ungraded=True)
    assert not (tmp_path / "c.csv").exists()
    args = [
        "export",
        "moodle",
        str(out),
        "--roster",
        str(roster_path),
        "-o",
        str(tmp_path / "m.csv"),
    ]
    assert main([*args, "--allow-ungraded"]) == 2
    assert "--allow-unknown-lateness" in capsys.readouterr().err
    assert main([*args, "--allow-ungraded", "--allow-unknown-lateness"]) == 0
    captured = capsys.readouterr()
    assert "1 students whose lateness was not computed" in captured.err and "S001" in captured.err
    assert "1 with lateness not computed (no late penalty, noted)" in captured.out
    moodle = {r["Full name"]: r for r in csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8"))}
    assert (
        moodle["Erin Doe"][lab.title] == "10"
        and "lateness not computed" in moodle["Erin Doe"]["Notes"]
    )
    assert moodle["Frank Roe"][lab.title] == "8"


def test_an_extension_that_cannot_be_read_is_never_on_time(tmp_path):
    """A roster's extension "3 days" (no unit lablib reads): that member's lateness is not
    computed, the other member's is; the export refuses the row."""
    out = tmp_path / "out"
    _lab_, roster = _group_book(tmp_path, out, "frank", extension="3 days")
    entry = json.loads((out / "grades.json").read_text())["submissions"][0]
    erin = next(m for m in entry["members"] if m["name"] == "Erin Doe")
    assert (
        erin["late"]["computed"] is False
        and "extension or due date of Erin Doe" in erin["late"]["text"]
    )
    with pytest.raises(ExportError, match="submission_1"):
        export("canvas", [out], roster, tmp_path / "c.csv")


def test_a_deduction_canvas_does_not_mark_late_says_so(tmp_path):
    """Canvas names a file LATE_ exactly when it is late by the student's own due date
    (overrides and extensions given in Canvas): a deduction for a file Canvas does not
    mark late (an extension the roster lacks) was made without a word. Its text says
    so; a file Canvas marks late, or one on time, says nothing more."""
    lab = _lab()
    times = {"ann": "2026-11-20T22:00+01:00", "bob": "2026-11-21T10:00+01:00",
             "cat": "2026-11-21T10:00+01:00", "dan": "2026-11-22T10:00+01:00"}  # fmt: skip
    from lablib.grading.gradebook.identity import resolve
    from lablib.grading.submissions import Found

    results, roster_path = _class(tmp_path, times)
    roster = Roster.load(roster_path)
    for r in results:
        late = r.submission == "cat"  # bob and cat are both a day late by the time given
        lms = {"lms": "canvas", "name": r.submission, "user_id": None, "late": late}
        found = Found(r.submission, tmp_path / f"{r.submission}.ipynb", r.path, "", lms)
        r.identity = resolve(found, roster, lab=lab)
    out = tmp_path / "out"
    policy = LatePolicy.parse(due=DUE, per_day="10%")
    report.write_reports(out, lab, results, roster=Roster.load(roster_path), late_policy=policy)
    said = "Canvas's download does not mark this file late"
    assert said in (out / "feedback" / "bob.md").read_text()
    for other in ("ann", "cat", "dan"):
        assert said not in (out / "feedback" / f"{other}.md").read_text(), other
    # a download with no LATE at all (no due date in Canvas) tells nothing: no remark
    for r in results:
        r.identity["lms"]["late"] = False
    report.write_reports(out, lab, results, roster=roster, late_policy=policy)
    assert said not in (out / "feedback" / "bob.md").read_text()


def test_grade_names_the_rows_with_no_submission_time(tmp_path, capsys):
    """With a late policy, rows with no submission time get no penalty: summary.html
    listed them, the terminal said nothing (a regrade by path without the row's time gave
    full marks without a word). One line names them and says how to give their times."""
    from lablib.cli import _print_roster_lists

    out = _graded_with_roster(
        tmp_path,
        _lab(),
        "S001,Erin Doe,erin@uni.edu,erin,2026-11-21T10:00+01:00\n"
        "S002,Frank Roe,frank@uni.edu,frank,\n"
        "S003,Gus Poe,gus@uni.edu,gus,\n",
    )
    assert json.loads((out / "summary.json").read_text())["late"]["no_time"] == ["frank", "gus"]
    _print_roster_lists(out)  # what `lablib grade` prints after grading
    err = capsys.readouterr().err
    assert "lablib grade: late: no submission time for 2: frank, gus (no late penalty" in err, err
    assert "--times FILE" in err and "erin" not in err.split("no submission time")[1]


def test_a_deadline_says_its_time_and_a_zone_that_exists():
    """``--due 2026-11-20`` was read as that day's 00:00: students who handed in at 21:00
    on the 20th lost 2.3 points each. A date alone is refused, for the policy's due date
    and a roster's per-student one (that student's lateness is then not computed); so is
    an offset no zone has."""
    with pytest.raises(LateError, match="'2026-11-20' has no time.*2026-11-20T23:59"):
        LatePolicy.parse(due="2026-11-20", per_day="10%")
    policy = LatePolicy.parse(due="2026-11-20T23:59+05:45", per_day="10%")  # Nepal: exists
    assert policy.due == "2026-11-20T23:59+05:45"
    with pytest.raises(LateError, match="roster's due date '2026-11-22' has no time"):
        policy.penalty("2026-11-21T10:00+00:00", 10.0, due="2026-11-22")
    for odd in ("2026-11-20T23:59+14:30", "2026-11-20T23:59-23:59", "2026-11-20T23:59+01:07"):
        with pytest.raises(LateError, match="which no time zone has"):
            LatePolicy.parse(due=odd, per_day="10%")
    assert parse_time("2026-11-20T23:59+14:00").utcoffset().total_seconds() == 14 * 3600
