"""lablib export cannot silently lose or under-count: the identity kept at grading is the
student; an export roster only adds; every roster student is written (0 and a note, or
blank); written answers not graded or changed since are refused unless allowed (then
noted); a group's members each get the grade; names stay text in spreadsheets."""

from __future__ import annotations

import csv
import json

import pytest

from lablib.cli import main
from lablib.grading.export import ExportError, export
from lablib.grading.gradebook.identity import resolve, resolve_all
from lablib.grading.report import write_reports
from lablib.grading.results import PersonScore, PieceScore, Status, SubmissionResult, WrittenAnswer
from lablib.grading.gradebook.roster import Roster, RosterError
from lablib.grading.spec import LabSpec
from lablib.grading.submissions import Found

CANVAS = """Student,ID,SIS User ID,SIS Login ID,Section
"Doe, Erin",1001,S001,erin,A
"Roe, Frank",1002,S002,frank,A
"Poe, Gina",1003,S003,gina,B
"""
OURS = """student_id,name,email,section
S001,Erin Doe,erin@uni.edu,A
S002,Frank Roe,frank@uni.edu,A
S003,Gina Poe,gina@uni.edu,B
"""


def _lab():
    lab = LabSpec("lab9_export", "Lab 9: export")
    lab.piece("f", objects=["f"])
    lab.answer("why", points=4, title="why", rubric=[(4, "Right.")])
    return lab


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _book(tmp_path, out, rows, roster=None, graded=True, changed=()):
    """A gradebook of ``rows`` (name -> (automatic points, Canvas user id or None)), the
    identities resolved as `lablib grade` does, each answer graded 3 (or not)."""
    lab = _lab()
    results, person = [], {}
    for name, (points, user) in rows.items():
        lms = {"lms": "canvas", "name": name, "user_id": user, "late": False} if user else {}
        r = SubmissionResult(
            name,
            str(tmp_path / f"{name}.ipynb"),
            Status(),
            points,
            10.0,
            {"f": PieceScore(points, 10.0)},
            [],
            answers={"why": WrittenAnswer("because", "tag")},
        )
        r.identity = resolve(
            Found(name, tmp_path / f"{name}.ipynb", f"{name}.ipynb", "", lms), roster, lab=lab
        )
        results.append(r)
        person[name] = {"why": PersonScore("why", 3.0, 4.0, graded=graded, stale=name in changed)}
    write_reports(out, lab, results, roster=roster, person=person)
    return lab


def test_the_identity_kept_at_grading_is_the_student(tmp_path):
    """Graded with Canvas's roster from a Canvas download (files named by user id), exported
    with lablib's roster holding the same SIS ids: nobody drops out."""
    canvas = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    lab = _book(
        tmp_path,
        tmp_path / "out",
        {"doeerin": (10, "1001"), "roefrank": (4, "1002"), "zed": (7, "1999")},
        roster=canvas,
    )
    ours = Roster.load(_write(tmp_path, "ours.csv", OURS))
    done = export("moodle", [tmp_path / "out"], ours, tmp_path / "moodle.csv")
    rows = {
        r["Full name"]: r for r in csv.DictReader(open(tmp_path / "moodle.csv", encoding="utf-8"))
    }
    assert rows["Erin Doe"][lab.title] == "13" and rows["Frank Roe"][lab.title] == "7"
    assert rows["Gina Poe"][lab.title] == "0" and "no submission" in rows["Gina Poe"]["Notes"]
    # zed (not in the roster, no e-mail): never a row Moodle would give to the row above's
    # student, and never dropped: listed with the grade, in the notes too
    assert "zed" not in rows and "" not in {r["Email address"] for r in rows.values()}
    assert [(x["name"], x["grades"]) for x in done["left_out"]] == [("zed", {lab.title: "10"})]
    notes = open(tmp_path / "moodle.notes.csv", encoding="utf-8").read()
    assert "not written to moodle.csv: no Email address" in notes and "export 10" in notes
    assert done["not_in_roster"] == ["1999"] and done["unmatched"][lab.name] == ["zed"]
    assert done["students"] == 4 and done["with_totals"] == 3
    # without a roster: the gradebook's identities, Canvas's columns filled from them
    export("canvas", [tmp_path / "out"], None, tmp_path / "canvas.csv", missing="blank")
    table = {r[0]: r for r in csv.reader(open(tmp_path / "canvas.csv", encoding="utf-8"))}
    assert (
        table["Doe, Erin"][1:5] == ["1001", "S001", "erin", "A"] and table["Doe, Erin"][5] == "13"
    )
    assert table["zed"][1] == "1999", "the Canvas user id of the download"


def test_ungraded_and_changed_answers_are_refused_unless_allowed(tmp_path):
    roster = Roster.load(_write(tmp_path, "ours.csv", OURS))
    _book(
        tmp_path,
        tmp_path / "out",
        {"S001": (10, None), "S002": (4, None)},
        roster=roster,
        graded=False,
    )
    with pytest.raises(
        ExportError,
        match=r"2 submissions have 2 written answers never graded and 0 changed.*"
        r"lablib review lab9_export",
    ):
        export("canvas", [tmp_path / "out"], roster, tmp_path / "x.csv")
    assert not (tmp_path / "x.csv").exists()
    _book(
        tmp_path,
        tmp_path / "out2",
        {"S001": (10, None), "S002": (4, None)},
        roster=roster,
        changed={"S002"},
    )
    with pytest.raises(ExportError, match="1 changed since they were graded"):
        export("canvas", [tmp_path / "out2"], roster, tmp_path / "x.csv")
    done = export("canvas", [tmp_path / "out2"], roster, tmp_path / "x.csv", allow_ungraded=True)
    assert (
        done["ungraded"] == {"lab9_export": ["S002"]}
        and "1 with written answers not graded" in done["summary"]
    )
    notes = list(csv.DictReader(open(tmp_path / "x.notes.csv", encoding="utf-8")))
    assert [(n["SIS User ID"], n["Note"]) for n in notes if "written" in n["Note"]] == [
        (
            "S002",
            "Lab 9: export: 1 written answer(s) changed since graded, the earlier grade counted",
        )
    ]
    assert main(["export", "canvas", str(tmp_path / "out"), "-o", str(tmp_path / "y.csv")]) == 2


def test_missing_rule_summary_line_and_stale_notes(tmp_path, capsys):
    roster_path = _write(tmp_path, "ours.csv", OURS)
    roster = Roster.load(roster_path)
    _book(tmp_path, tmp_path / "out", {"S001": (10, None)}, roster=roster)
    assert (
        main(
            [
                "export",
                "moodle",
                str(tmp_path / "out"),
                "--roster",
                str(roster_path),
                "-o",
                str(tmp_path / "m.csv"),
                "--missing",
                "blank",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "3 students (1 with a submission for every lab; 2 missing one or more (left empty); 0 with written "
        "answers not graded or changed since (noted); 0 not in the roster)" in out
    )
    # an empty cell clears a grade in Moodle's import (one entered by hand too): a student
    # with no grade at all is left out of the file, noted, and nothing changes for them
    assert "2 without any grade left out of the file (Moodle's import clears" in out
    rows = {r["Full name"]: r for r in csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8"))}
    assert sorted(rows) == ["Erin Doe"], rows
    notes = (tmp_path / "m.notes.csv").read_text(encoding="utf-8")
    left, why = [line for line in notes.splitlines() if line.startswith("Frank Roe,")]
    assert "no grade to import" in left and "Nothing changes in Moodle for them" in left
    assert why.endswith("no submission (left empty)")
    # everyone graded later: the notes file of the earlier export does not stay behind
    _book(
        tmp_path,
        tmp_path / "all",
        {"S001": (10, None), "S002": (1, None), "S003": (2, None)},
        roster=roster,
    )
    (tmp_path / "m.notes.csv").write_text("stale")
    done = export("moodle", [tmp_path / "all"], roster, tmp_path / "m.csv")
    assert done["notes"] is None and not (tmp_path / "m.notes.csv").exists()


def test_names_stay_text_and_groups_share_the_grade(tmp_path):
    lab = _lab()
    gs = Roster.load(
        _write(
            tmp_path,
            "gs.csv",
            "First Name,Last Name,SID,Email,Role\nAlice,A,111,a@x.edu,Student\n"
            "Bob,B,222,b@x.edu,Student\n=cmd|' /C calc'!A0,X,333,c@x.edu,Student\n",
        )
    )
    group = {
        "lms": "gradescope",
        "submitted_at": "",
        "submitters": [
            {"name": "Alice A", "sid": "111", "email": ""},
            {"name": "Bob B", "sid": "222", "email": ""},
        ],
    }
    hostile = {
        "lms": "gradescope",
        "submitted_at": "",
        "submitters": [{"name": "=cmd", "sid": "333", "email": ""}],
    }
    results = []
    for name, lms, points in (("Alice A", group, 8.0), ("=cmd", hostile, 5.0)):
        r = SubmissionResult(
            name,
            str(tmp_path / f"{name}.ipynb"),
            Status(),
            points,
            10.0,
            {"f": PieceScore(points, 10.0)},
            [],
            answers={"why": WrittenAnswer("x", "tag")},
        )
        r.identity = resolve(Found(name, tmp_path / "x.ipynb", "", "", lms), gs, lab=lab)
        results.append(r)
    write_reports(
        tmp_path / "out",
        lab,
        results,
        roster=gs,
        person={r.submission: {"why": PersonScore("why", 1.0, 4.0, graded=True)} for r in results},
    )
    export("canvas", [tmp_path / "out"], gs, tmp_path / "c.csv")
    rows = list(csv.reader(open(tmp_path / "c.csv", encoding="utf-8")))
    table = {r[2]: r for r in rows[2:]}
    assert table["111"][5] == "9" and table["222"][5] == "9", "both members of the group"
    assert table["333"][0] == "'=cmd|' /C calc'!A0 X" and table["333"][5] == "6"


def test_the_ids_the_lms_matches_by_are_written_as_it_gave_them(tmp_path):
    """A leading ' (a formula made inert) in the column the import matches students by made
    the row no one's: Moodle found no user '-ann@x.org. The identifier columns (Moodle's
    Email address and ID number, Canvas's ID, SIS User ID and SIS Login ID) are written as
    the LMS gave them, each such cell noted in the notes file and counted in the summary;
    names and the other cells stay inert."""
    ours = "student_id,name,email,submission\n+S1,=Ann One,-ann@x.org,ann\nS2,Bo Two,bo@x.org,\n"
    roster = Roster.load(_write(tmp_path, "ours.csv", ours))
    _book(tmp_path, tmp_path / "out", {"ann": (7, None), "S2": (5, None)}, roster=roster)
    done = export("moodle", [tmp_path / "out"], roster, tmp_path / "m.csv")
    rows = list(csv.reader(open(tmp_path / "m.csv", encoding="utf-8")))
    assert rows[1][:4] == ["'=Ann One", "-ann@x.org", "+S1", "10"], rows
    assert done["identifiers_as_given"] == ["+S1"]
    assert "1 with an id or e-mail starting with = + - or @" in done["summary"]
    notes = (tmp_path / "m.notes.csv").read_text(encoding="utf-8")
    assert "Email address '-ann@x.org' starts with '-'" in notes, notes
    assert "ID number '+S1' starts with '+'" in notes and "written as the LMS gave it" in notes
    assert "starts with" not in rows[1][-1], "the Moodle file's Notes (feedback) say nothing"
    canvas = "Student,ID,SIS User ID,SIS Login ID,Section\n=Ann,1001,-S1,@ann,A\n"
    roster = Roster.load(_write(tmp_path, "canvas.csv", canvas))
    _book(tmp_path, tmp_path / "out2", {"ann": (7, "1001")}, roster=roster)
    done = export("canvas", [tmp_path / "out2"], roster, tmp_path / "c.csv")
    rows = list(csv.reader(open(tmp_path / "c.csv", encoding="utf-8")))
    assert rows[2][:4] == ["'=Ann", "1001", "-S1", "@ann"] and rows[2][5] == "10", rows
    notes = (tmp_path / "c.notes.csv").read_text(encoding="utf-8")
    assert "SIS User ID '-S1'" in notes and "SIS Login ID '@ann'" in notes, notes


TEAM_SHEET = """Identifier,Full name,Email address,Status,Group,Grade,Maximum Grade,Grade can be changed,Last modified (submission),Last modified (grade),Feedback comments
Participant 7300000,Erin Doe,erin@uni.edu,Submitted for grading,Team_1 ⚡,,14.00,Yes,-,-,
Participant 7300017,Frank Roe,frank@uni.edu,Submitted for grading,Team_1 ⚡,,14.00,Yes,-,-,
Participant 7300034,Gina Poe,gina@uni.edu,Submitted for grading,Default group,,14.00,Yes,-,-,
Participant 42,Ivy Lee,ivy@uni.edu,No submission,Solo,,14.00,Yes,-,-,
"""
#: The download of a team assignment (downloader.php): one folder per group; group 42's
#: id is Ivy's participant id, and "Lost" is a group the worksheet does not know.
TEAM_FOLDERS = {
    "Team 1 ⚡_42_assignsubmission_file": 8.0,
    "Default group_assignsubmission_file": 5.0,
    "Lost_9_assignsubmission_file": 3.0,
}


def _team_book(tmp_path, out, roster, folders=None, resolving=resolve_all):
    """A gradebook of ``folders`` (TEAM_FOLDERS), identities resolved with ``roster`` as
    `lablib grade` resolves them (or by ``resolving``), each written answer graded 3."""
    from lablib.grading.lms import moodle_name

    lab = _lab()
    results, found = [], []
    for folder, points in (folders or TEAM_FOLDERS).items():
        lms = moodle_name(folder)
        name = lms["name"]
        if any(f.name == name for f in found):  # "Default group" and "Default group_55"
            name += f"_{lms['participant_id']}"
        r = SubmissionResult(
            name,
            str(tmp_path / folder / "lab.ipynb"),
            Status(),
            points,
            10.0,
            {"f": PieceScore(points, 10.0)},
            [],
            answers={"why": WrittenAnswer("because", "tag")},
        )
        found.append(
            Found(name, tmp_path / folder / "lab.ipynb", f"{folder}/lab.ipynb", folder, lms)
        )
        results.append(r)
    identities = resolving(found, roster, lab=lab)  # the whole download, as grading does
    for r in results:
        r.identity = identities[r.submission]
    person = {r.submission: {"why": PersonScore("why", 3.0, 4.0, graded=True)} for r in results}
    write_reports(out, lab, results, roster=roster, person=person)
    return lab


def test_a_moodle_team_submission_reaches_every_member(tmp_path):
    sheet = Roster.load(_write(tmp_path, "sheet.csv", TEAM_SHEET))
    lab = _team_book(tmp_path, tmp_path / "out", sheet)
    book = json.loads((tmp_path / "out" / "grades.json").read_text())
    assert book["roster"]["unmatched_submissions"] == ["Lost"]
    assert "Group column" in book["roster"]["unmatched_reasons"]["Lost"]
    assert [s["name"] for s in book["roster"]["students_without_submission"]] == ["Ivy Lee"]
    page = (tmp_path / "out" / "summary.html").read_text(encoding="utf-8")
    assert (
        "<li>Lost: Moodle&#x27;s folder &#x27;Lost_9&#x27; is not the folder of any of the "
        "roster&#x27;s groups" in page
    )
    done = export("moodle", [tmp_path / "out"], sheet, tmp_path / "m.csv")
    rows = {
        r["Email address"]: r for r in csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8"))
    }
    totals = {k: r[lab.title] for k, r in rows.items()}
    assert totals == {
        "erin@uni.edu": "11",
        "frank@uni.edu": "11",
        "gina@uni.edu": "8",
        "ivy@uni.edu": "0",  # her participant id is group 42's id: not her submission
    }
    # the group the worksheet does not know: no e-mail, so not in the import file (Moodle
    # would give its grade to the row above's student), never dropped: listed apart
    assert [(x["name"], x["grades"]) for x in done["left_out"]] == [("Lost", {lab.title: "6"})]
    assert done["unmatched"][lab.name] == ["Lost"]
    assert "Group column" in done["unmatched_reasons"][lab.name]["Lost"]


def test_a_team_graded_without_a_roster_joins_its_members_at_export(tmp_path, capsys):
    lab = _team_book(tmp_path, tmp_path / "out", None)
    sheet = _write(tmp_path, "sheet.csv", TEAM_SHEET)
    export("moodle", [tmp_path / "out"], Roster.load(sheet), tmp_path / "m.csv")
    rows = {
        r["Email address"]: r for r in csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8"))
    }
    assert rows["erin@uni.edu"][lab.title] == rows["frank@uni.edu"][lab.title] == "11"
    assert rows["ivy@uni.edu"][lab.title] == "0"
    # a worksheet without the Group column: group 42 is not participant 42's (Ivy's)
    plain = _write(
        tmp_path,
        "plain.csv",
        "\n".join(",".join(line.split(",")[:4]) for line in TEAM_SHEET.splitlines()) + "\n",
    )
    assert (
        main(
            [
                "export",
                "moodle",
                str(tmp_path / "out"),
                "--roster",
                str(plain),
                "-o",
                str(tmp_path / "p.csv"),
            ]
        )
        == 0
    )
    rows = {r["Full name"]: r for r in csv.DictReader(open(tmp_path / "p.csv", encoding="utf-8"))}
    assert rows["Ivy Lee"][lab.title] == "0" and "Team 1 ⚡" not in rows, "no e-mail: left out"
    err = capsys.readouterr().err
    assert "left out: Team 1 ⚡" in err and f"grades: {lab.title} 11" in err
    assert "submission Team 1 ⚡ matched no roster student" in err
    assert "42 is the participant id of Ivy Lee" in err and "Group column" in err


#: Groups whose names differ only where Moodle's download writes them alike ("Team Red",
#: "team  red"), or where it does not ("R&D" is "Ramp;D" in Moodle 4.1's folders, "RD" is
#: "RD"); each team's folder is graded differently.
ALIKE_SHEET = """Identifier,Full name,Email address,Status,Group
Participant 101,Ann Ames,ann@uni.edu,Submitted for grading,R&D
Participant 102,Bob Bell,bob@uni.edu,Submitted for grading,RD
Participant 103,Cy Cole,cy@uni.edu,Submitted for grading,Team Red
Participant 104,Dee Dunn,dee@uni.edu,Submitted for grading,team  red
"""
ALIKE_FOLDERS = {
    "Ramp;D_6_assignsubmission_file": 4.0,
    "RD_5_assignsubmission_file": 8.0,
    "Team Red_7_assignsubmission_file": 9.0,
    "team  red_8_assignsubmission_file": 2.0,
    "TEAM RED_9_assignsubmission_file": 1.0,
}


#: A worksheet where a student named a group "Default group" (Mal): the worksheet writes
#: it for Mal and for the students in no group (Erin, Gina) alike.
DEFAULT_SHEET = """Identifier,Full name,Email address,Status,Group
Participant 101,Erin Doe,erin@uni.edu,Submitted for grading,Default group
Participant 102,Gina Poe,gina@uni.edu,Submitted for grading,Default group
Participant 103,Mal Moe,mal@uni.edu,Submitted for grading,Default group
Participant 104,Tom Tay,tom@uni.edu,Submitted for grading,Team Red
"""


def test_a_group_named_default_group_gives_no_one_a_grade(tmp_path):
    """Mal's group "Default group" (folder Default group_55) and Moodle's Default group
    (no number): the roster cannot tell their students apart, so neither folder is
    anyone's; without Mal's folder the Default group's is its students' as before."""
    sheet = Roster.load(_write(tmp_path, "sheet.csv", DEFAULT_SHEET))
    folders = {
        "Default group_assignsubmission_file": 5.0,
        "Default group_55_assignsubmission_file": 9.0,
        "Team Red_56_assignsubmission_file": 8.0,
    }
    lab = _team_book(tmp_path, tmp_path / "out", sheet, folders)
    done = export("moodle", [tmp_path / "out"], sheet, tmp_path / "m.csv")
    rows = list(csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8")))
    totals = {r["Email address"]: r[lab.title] for r in rows}
    assert totals == {
        "erin@uni.edu": "0",
        "gina@uni.edu": "0",
        "mal@uni.edu": "0",
        "tom@uni.edu": "11",
    }
    assert sorted((x["name"], x["grades"][lab.title]) for x in done["left_out"]) == [
        ("Default group", "12"),
        ("Default group", "8"),
    ], "no one's, no e-mail: listed apart"
    reasons = done["unmatched_reasons"][lab.name]
    assert sorted(done["unmatched"][lab.name]) == ["Default group", "Default group_55"]
    assert "rename that group in Moodle" in reasons["Default group_55"]
    assert "a group named like it" in reasons["Default group"]
    honest = {k: v for k, v in folders.items() if "_55_" not in k}
    lab = _team_book(tmp_path, tmp_path / "out2", sheet, honest)
    export("moodle", [tmp_path / "out2"], sheet, tmp_path / "h.csv")
    rows = list(csv.DictReader(open(tmp_path / "h.csv", encoding="utf-8")))
    assert {r["Email address"]: r[lab.title] for r in rows} == {
        "erin@uni.edu": "8",
        "gina@uni.edu": "8",
        "mal@uni.edu": "8",
        "tom@uni.edu": "11",
    }


def _before_the_default_group_rule(found, roster, lab):
    """Identities as lablib kept them before a group named "Default group" was refused:
    its numbered folder matched as that group's (its number the group id, no
    participant id), the Default group's own matched too."""
    identities = resolve_all(found, roster, lab=lab)
    for f in found:
        if f.lms.get("name") == "Default group":
            default = Found(f.name, f.path, f.where, f.folder, f.lms | {"participant_id": ""})
            identity = resolve(default, roster, lab=lab)
            identity["lms"].update(group_id=f.lms["participant_id"])
            identities[f.name] = identity
    return identities


def test_a_gradebook_written_before_the_default_group_rule_gives_no_one_a_grade(tmp_path):
    """Upgraded, the export resolves a kept row of either folder again with the roster
    given: neither gives the Default group's students a grade, each says why and where
    the other folder is."""
    sheet = Roster.load(_write(tmp_path, "sheet.csv", DEFAULT_SHEET))
    folders = {
        "Default group_assignsubmission_file": 5.0,
        "Default group_55_assignsubmission_file": 9.0,
        "Team Red_56_assignsubmission_file": 8.0,
    }
    out = tmp_path / "out"
    lab = _team_book(tmp_path, out, sheet, folders, _before_the_default_group_rule)
    book = json.loads((out / "grades.json").read_text())
    kept = {s["submission"]: s["identity"] for s in book["submissions"]}
    assert kept["Default group"]["matched"] and kept["Default group_55"]["matched"]
    done = export("moodle", [out], sheet, tmp_path / "m.csv")
    rows = list(csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8")))
    totals = {r["Email address"]: r[lab.title] for r in rows if r["Email address"]}
    assert totals == {
        "erin@uni.edu": "0",
        "gina@uni.edu": "0",
        "mal@uni.edu": "0",
        "tom@uni.edu": "11",
    }
    reasons = done["unmatched_reasons"][lab.name]
    assert sorted(done["unmatched"][lab.name]) == ["Default group", "Default group_55"]
    assert "rename that group in Moodle" in reasons["Default group_55"]
    assert f"{lab.name}'s gradebook also has 'Default group_55'" in reasons["Default group"]


def test_each_team_gets_its_own_grade_and_no_other_teams(tmp_path):
    sheet = Roster.load(_write(tmp_path, "sheet.csv", ALIKE_SHEET))
    lab = _team_book(tmp_path, tmp_path / "out", sheet, ALIKE_FOLDERS)
    done = export("moodle", [tmp_path / "out"], sheet, tmp_path / "m.csv")
    rows = list(csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8")))
    totals = {r["Email address"]: r[lab.title] for r in rows}
    assert totals == {
        "ann@uni.edu": "7",  # R&D's folder, written Ramp;D
        "bob@uni.edu": "11",  # the honest RD's own
        "cy@uni.edu": "12",  # "Team Red" and "team  red": Moodle keeps case and spacing
        "dee@uni.edu": "5",
    }
    # only folded like both: neither's, listed apart (no e-mail for Moodle to match)
    assert [(x["name"], x["grades"]) for x in done["left_out"]] == [("TEAM RED", {lab.title: "4"})]
    assert done["unmatched"][lab.name] == ["TEAM RED"]
    assert all("are all written" in why for why in done["unmatched_reasons"][lab.name].values())


def _worksheet(participants: dict) -> str:
    """A Moodle grading worksheet: full name -> (e-mail, participant id)."""
    lines = [
        "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
        "Last modified (submission),Last modified (grade),Feedback comments"
    ]
    for name, (mail, number) in participants.items():
        lines.append(f"Participant {number},{name},{mail},Submitted,,14.00,Yes,-,-,")
    return "\n".join(lines) + "\n"


def _moodle_book(tmp_path, lab, sheet, points: dict):
    """The gradebook of a Moodle download (``<Full name>_<participant id>_assignsubmission_file``
    folder -> automatic points) graded with ``sheet``, each written answer graded 3."""
    from lablib.grading.lms import moodle_name

    found = []
    for folder in points:
        lms = moodle_name(folder)
        path = tmp_path / lab.name / folder / "lab.ipynb"
        found.append(Found(lms["name"], path, f"{folder}/lab.ipynb", folder, lms))
    identities = resolve_all(found, sheet, lab=lab)
    results = []
    for f, value in zip(found, points.values()):
        r = SubmissionResult(
            f.name,
            str(f.path),
            Status(),
            value,
            10.0,
            {"f": PieceScore(value, 10.0)},
            [],
            answers={"why": WrittenAnswer("because", "tag")},
        )
        r.identity = identities[f.name]
        results.append(r)
    person = {r.submission: {"why": PersonScore("why", 3.0, 4.0, graded=True)} for r in results}
    out = tmp_path / f"out_{lab.name}"
    write_reports(out, lab, results, roster=sheet, person=person)
    return out


def test_a_moodle_export_of_several_labs_writes_each_student_once(tmp_path):
    """Moodle gives each student another participant id in each assignment: lab 2's rows,
    graded with lab 2's worksheet, join the students of lab 1's worksheet (the export's
    roster) by their e-mail; a participant id that differs is no other student."""
    outs = []
    for k, (number, title) in enumerate(((1, "Lab 1"), (2, "Lab 2"))):
        lab = LabSpec(f"lab{number}_x", title)
        lab.piece("f", objects=["f"])
        lab.answer("why", points=4, title="why", rubric=[(4, "Right.")])
        ids = {"Erin Doe": 7300001 + k * 100010, "Frank Roe": 7300002 + k * 100010}
        sheet = Roster.load(
            _write(
                tmp_path,
                f"sheet{number}.csv",
                _worksheet({"Erin Doe": ("erin@uni.edu", ids["Erin Doe"])})
                .rstrip("\n")
                .__add__(
                    f"\nParticipant {ids['Frank Roe']},Frank Roe,frank@uni.edu,Submitted,,14.00,Yes,-,-,\n"
                ),
            )
        )
        folders = {f"{name}_{n}_assignsubmission_file": 8.0 + k for name, n in ids.items()}
        outs.append(_moodle_book(tmp_path, lab, sheet, folders))
    roster = Roster.load(tmp_path / "sheet1.csv")
    done = export("moodle", outs, roster, tmp_path / "m.csv")
    rows = [r for r in csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8"))]
    assert [(r["Email address"], r["Lab 1"], r["Lab 2"]) for r in rows] == [
        ("erin@uni.edu", "11", "12"),
        ("frank@uni.edu", "11", "12"),
    ], "one row per student, never a second one setting the other lab to 0"
    assert done["not_in_roster"] == [] and done["with_totals"] == 2
    assert "in Moodle map Email address to the user field Email address" in done["summary"]


def test_two_rows_with_one_e_mail_are_refused(tmp_path):
    """A gradebook row whose student id differs from the roster's student of its e-mail is
    another student: Moodle's file would then have two rows of one e-mail address, the
    second overwriting the first: refused, naming both, nothing written."""
    _book(
        tmp_path,
        tmp_path / "out",
        {"S001": (10, None)},
        roster=Roster.load(_write(tmp_path, "ours.csv", OURS)),
    )
    other = Roster.load(_write(tmp_path, "other.csv", OURS.replace("S001,", "S101,")))
    with pytest.raises(ExportError) as caught:
        export("moodle", [tmp_path / "out"], other, tmp_path / "m.csv")
    said = str(caught.value)
    assert "Two rows of the Moodle import would have the Email address 'erin@uni.edu'" in said
    assert "student_id S101" in said and "student_id S001" in said and "nothing was written" in said
    assert not (tmp_path / "m.csv").exists()


def test_a_moodle_row_without_an_e_mail_is_never_written_and_never_lost(tmp_path, capsys):
    """Moodle's import keeps the previous row's student for a row whose user field is
    blank: a student the worksheet does not know (Zoe, enrolled later) would overwrite
    Frank's grade. Zoe is left out of the file, listed with her grade (the CLI, the
    notes, the summary); the others are written."""
    lab = _lab()
    sheet_path = _write(
        tmp_path,
        "sheet.csv",
        _worksheet(
            {"Erin Doe": ("erin@uni.edu", 7300001), "Frank Roe": ("frank@uni.edu", 7300002)}
        ),
    )
    out = _moodle_book(
        tmp_path,
        lab,
        Roster.load(sheet_path),
        {
            "Erin Doe_7300001_assignsubmission_file": 9.0,
            "Frank Roe_7300002_assignsubmission_file": 8.0,
            "Zoe Late_7300003_assignsubmission_file": 1.0,
        },
    )
    target = tmp_path / "m.csv"
    assert main(["export", "moodle", str(out), "--roster", str(sheet_path), "-o", str(target)]) == 0
    rows = list(csv.reader(open(target, encoding="utf-8")))
    assert [r[:2] + [r[3]] for r in rows[1:]] == [
        ["Erin Doe", "erin@uni.edu", "12"],
        ["Frank Roe", "frank@uni.edu", "11"],
    ]
    assert all(r[1].strip() for r in rows[1:]), "no row without the user field"
    captured = capsys.readouterr()
    assert (
        "lablib export: left out: Zoe Late (7300003): not written to m.csv: no Email address"
        in captured.err
    )
    assert f"grades: {lab.title} 4" in captured.err
    assert "1 left out of the file, without an Email address for Moodle to match" in captured.out
    notes = list(csv.DictReader(open(tmp_path / "m.notes.csv", encoding="utf-8")))
    assert any(n["Student"] == "Zoe Late" and f"grades: {lab.title} 4" in n["Note"] for n in notes)
    # a Canvas roster has no e-mail: the file is matched by ID number, and says so
    canvas = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    _book(tmp_path, tmp_path / "c", {"doeerin": (10, "1001"), "zed": (7, "1999")}, roster=canvas)
    done = export("moodle", [tmp_path / "c"], canvas, tmp_path / "c.csv")
    assert done["matched_by"] == "ID number" and "map ID number" in done["summary"]
    written = list(csv.DictReader(open(tmp_path / "c.csv", encoding="utf-8")))
    assert [r["ID number"] for r in written] == ["S001", "S002", "S003"]
    assert [x["name"] for x in done["left_out"]] == ["zed"]


def test_two_columns_with_one_header_are_refused(tmp_path):
    """Canvas's import finds a column by its name (the first of it): a second lab of the
    same title, or --column giving two labs one header, would lose that lab's grades."""
    canvas = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    for name, out in (("lab1_attention", "o1"), ("lab1_resit", "o2")):
        lab = LabSpec(name, "Lab 1: Attention")
        lab.piece("f", objects=["f"])
        r = SubmissionResult(
            "doeerin",
            str(tmp_path / "e.ipynb"),
            Status(),
            5.0,
            10.0,
            {"f": PieceScore(5.0, 10.0)},
            [],
        )
        r.identity = resolve(
            Found(
                "doeerin",
                tmp_path / "e.ipynb",
                "",
                "",
                {"lms": "canvas", "name": "doeerin", "user_id": "1001"},
            ),
            canvas,
            lab=lab,
        )
        write_reports(tmp_path / out, lab, [r], roster=canvas)
    outs = [tmp_path / "o1", tmp_path / "o2"]
    with pytest.raises(
        ExportError,
        match=r"headed 'Lab 1: Attention': lab lab1_attention's .* and lab lab1_resit's.*--column lab1_resit=",
    ):
        export("canvas", outs, canvas, tmp_path / "c.csv")
    same = {"lab1_attention": "Lab 1 (55)", "lab1_resit": "Lab 1 (55)"}
    with pytest.raises(
        ExportError, match=r"headed 'Lab 1 \(55\)': lab lab1_attention's .* and lab lab1_resit's"
    ):
        export("canvas", outs, canvas, tmp_path / "c.csv", columns=same)
    with pytest.raises(ExportError, match="the file's own column 'Notes'"):
        export("moodle", outs[:1], canvas, tmp_path / "c.csv", columns={"lab1_attention": "Notes"})
    assert not (tmp_path / "c.csv").exists()
    done = export("canvas", outs, canvas, tmp_path / "c.csv", columns={"lab1_resit": "Lab 1 resit"})
    header, _possible, *rows = list(csv.reader(open(tmp_path / "c.csv", encoding="utf-8")))
    assert header[5:] == ["Lab 1: Attention", "Lab 1 resit"] and rows[0][5:] == ["5", "5"]
    assert done["students"] == 3


def _graded(tmp_path, out, rows, roster):
    """A gradebook of ``rows`` (name -> (points, LMS description)), the identities resolved
    as `lablib grade` does, each answer graded 3."""
    lab = _lab()
    results, person = [], {}
    for name, (points, lms) in rows.items():
        r = SubmissionResult(
            name,
            str(tmp_path / f"{name}.ipynb"),
            Status(),
            points,
            10.0,
            {"f": PieceScore(points, 10.0)},
            [],
            answers={"why": WrittenAnswer("because", "tag")},
        )
        where = f"{name}_{lms.get('user_id', '')}_9000000_lab.ipynb"
        r.identity = resolve(Found(name, tmp_path / f"{name}.ipynb", where, "", lms), roster)
        results.append(r)
        person[name] = {"why": PersonScore("why", 3.0, 4.0, graded=True)}
    write_reports(out, lab, results, roster=roster, person=person)
    return lab


def _canvas_exported(tmp_path, folder: str, files: dict):
    """``files`` (row name -> (points, its Canvas file name)) graded with :data:`CANVAS` as
    the roster into ``folder`` and exported: ``(lab, report, rows by Student, notes by
    Student)``."""
    from lablib.grading.lms import canvas_name

    canvas = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    rows = {name: (points, canvas_name(file)) for name, (points, file) in files.items()}
    lab = _graded(tmp_path, tmp_path / folder, rows, canvas)
    done = export("canvas", [tmp_path / folder], canvas, tmp_path / f"{folder}.csv")
    table = {r[0]: r for r in csv.reader(open(tmp_path / f"{folder}.csv", encoding="utf-8"))}
    notes = tmp_path / f"{folder}.notes.csv"
    return lab, done, table, {r[0]: r[4] for r in csv.reader(open(notes, encoding="utf-8"))}


def test_a_notebook_that_may_be_a_students_never_gives_them_0_for_no_submission(tmp_path):
    """Canvas refuses a file under Erin's user id with another name (hers changed since the
    roster was exported): it matches no one, by design. Erin was then given 0 for no
    submission, and her work went to a row Canvas cannot match. A download graded
    anonymously (``anon_<id>``) named no one at all, and the whole class got 0. Such a
    student is left empty, with a note saying why; Frank, whom no such file may be, gets
    his 0."""
    lab, done, table, notes = _canvas_exported(
        tmp_path,
        "out",
        {
            "smithdoeerin": (7, "smithdoeerin_1001_9000001_lab.ipynb"),
            "poegina": (9, "poegina_1003_9000003_lab.ipynb"),
        },
    )
    assert (table["Doe, Erin"][5], table["Roe, Frank"][5], table["Poe, Gina"][5]) == ("", "0", "12")
    assert notes["Doe, Erin"] == (
        f"{lab.title}: no submission (left empty: a graded notebook of this lab is under your "
        "Canvas user id but another name (smithdoeerin); it matched no one)"
    )
    assert notes["Roe, Frank"] == f"{lab.title}: no submission (0)"
    assert (
        done["held"][lab.name] == ["S001"]
        and "1 without a submission left empty" in done["summary"]
    )
    anonymous = {
        "anon_Ab3xY": (7, "anon_Ab3xY_9000001_lab.ipynb"),
        "anon_Qr7zK": (5, "LATE_anon_Qr7zK_9000002_lab.ipynb"),
    }
    _, done, table, notes = _canvas_exported(tmp_path, "anon", anonymous)
    assert [table[n][5] for n in ("Doe, Erin", "Roe, Frank", "Poe, Gina")] == ["", "", ""]
    assert sorted(done["held"][lab.name]) == ["S001", "S002", "S003"]
    assert "downloaded graded anonymously and match no student" in notes["Roe, Frank"]


def test_group_files_and_members_no_roster_names_are_listed_not_lost(tmp_path):
    """Canvas names a group assignment's file after the group, under one member's user id:
    without the roster's group column it matches no one (never that member alone, and
    lab_group_3's file is not user 3's); such a row has no Canvas id, so it is left out of
    the file (Canvas would match it by its name alone) with its grade in the notes. A
    Gradescope group's member the roster lacks is written with the grade (their SID is an
    id Canvas matches) and listed with why, as the first member would be."""
    lab, done, table, notes = _canvas_exported(
        tmp_path,
        "out",
        {
            "team7": (10, "team7_1001_9000001_lab.ipynb"),
            "lab_group": (10, "lab_group_3_1003_9000003_lab.ipynb"),
        },
    )
    # not credited alone, nor given 0 for no submission: the file under their user id
    # matched no one, and is noted to them (left empty)
    assert table["Doe, Erin"][5] == "" and table["Poe, Gina"][5] == "", "not credited alone"
    assert sorted(done["held"][lab.name]) == ["S001", "S003"]
    assert "under your Canvas user id but another name (team7)" in notes["Doe, Erin"]
    assert "team7" not in table and "lab_group" not in table, "left out: no Canvas id"
    assert sorted(x["key"] for x in done["left_out"]) == ["lab_group", "team7"]
    assert all("by its name" in x["why"] and x["grades"] for x in done["left_out"])
    assert done["unmatched"][lab.name] == ["lab_group", "team7"]
    assert "In a group assignment" in done["unmatched_reasons"][lab.name]["team7"]
    gs = Roster.load(
        _write(
            tmp_path,
            "gs.csv",
            "First Name,Last Name,SID,Email,Role\nErin,Doe,S001,erin@uni.edu,Student\n",
        )
    )
    pair = {
        "lms": "gradescope",
        "submitted_at": "",
        "submitters": [
            {"name": "Erin Doe", "sid": "S001", "email": "erin@uni.edu"},
            {"name": "Zed Late", "sid": "S009", "email": "zed@uni.edu"},
        ],
    }
    lab = _graded(tmp_path, tmp_path / "gs-out", {"Erin Doe": (10, pair)}, gs)
    book = json.loads((tmp_path / "gs-out" / "grades.json").read_text(encoding="utf-8"))
    assert book["roster"]["unmatched_submissions"] == ["Erin Doe (group member Zed Late)"]
    done = export("canvas", [tmp_path / "gs-out"], gs, tmp_path / "gs_import.csv")
    table = {r[0]: r for r in csv.reader(open(tmp_path / "gs_import.csv", encoding="utf-8"))}
    assert table["Zed Late"][2] == "S009" and table["Zed Late"][5] == "13"
    assert done["unmatched"][lab.name] == ["Erin Doe (group member Zed Late)"]
    assert "S009" in done["unmatched_reasons"][lab.name]["Erin Doe (group member Zed Late)"]
    assert done["not_in_roster"] == ["S009"]


def test_several_notebooks_of_one_student_are_refused_unless_allowed(tmp_path, capsys):
    """Frank handed in two attachments (one variant each): the best would count, so the
    export is refused, naming him; with --allow-several the best counts and he is noted."""
    canvas = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    out = tmp_path / "out"
    lab, results = LabSpec("lab9_export", "Lab 9: export"), []
    lab.piece("f", objects=["f"])
    for name, points, user in (("doeerin", 10, "1001"), ("roefrank", 4, "1002"),
                               ("roefrank-2", 9, "1002")):  # fmt: skip
        r = SubmissionResult(name, str(tmp_path / f"{name}.ipynb"), Status(), points, 10.0,
                             {"f": PieceScore(points, 10.0)}, [])  # fmt: skip
        lms = {"lms": "canvas", "name": name.split("-")[0], "user_id": user, "late": False}
        r.identity = resolve(Found(name, tmp_path / f"{name}.ipynb", "", "", lms), canvas, lab=lab)
        results.append(r)
    write_reports(out, lab, results, roster=canvas)
    with pytest.raises(ExportError, match="several rows in one lab") as refused:
        export("canvas", [out], canvas, tmp_path / "c.csv")
    assert "roefrank, roefrank-2" in str(refused.value) and "--allow-several" in str(refused.value)
    assert "someone else" not in str(refused.value)  # both Frank's, by the download
    assert not (tmp_path / "c.csv").exists()
    args = ["export", "canvas", str(out), "--roster", str(tmp_path / "canvas.csv")]
    assert main(args + ["-o", str(tmp_path / "c.csv")]) == 2
    assert "several rows in one lab" in capsys.readouterr().err
    assert main(args + ["-o", str(tmp_path / "c.csv"), "--allow-several"]) == 0
    header, _possible, *rows = list(csv.reader(open(tmp_path / "c.csv", encoding="utf-8")))
    totals = {r[0]: r[header.index("Lab 9: export")] for r in rows}
    assert totals["Roe, Frank"] == "9"
    notes = (tmp_path / "c.notes.csv").read_text()
    assert "2 notebooks handed in, the best counted (roefrank-2)" in notes
    assert "--" not in notes  # a note may reach the student (Moodle's Notes column)


def test_a_canvas_column_out_of_other_points_is_refused_unless_scaled(tmp_path, capsys):
    """Canvas's gradebook export (the roster) says assignment 'Lab 9 (55)' is out of 100;
    the lab is out of 14 (10 automatic + 4 written): raw points would show 13/100. Refused,
    naming both, unless --scale-to-points-possible (13/14 -> 92.86 of 100)."""
    path = _write(
        tmp_path,
        "canvas.csv",
        CANVAS.replace("Section\n", "Section,Lab 9 (55),Lab 8 (54)\n", 1).replace(
            '"Doe, Erin"', '    Points Possible,,,,,100.00,(read only)\n"Doe, Erin"', 1
        ),
    )
    canvas = Roster.load(path)
    assert canvas.points_possible == {"Lab 9 (55)": "100.00", "Lab 8 (54)": "(read only)"}
    assert len(canvas) == 3, "the Points Possible row is no student"
    _book(tmp_path, tmp_path / "out", {"doeerin": (10, "1001"), "roefrank": (4, "1002")}, canvas)
    column = {"lab9_export": "Lab 9 (55)"}
    with pytest.raises(ExportError) as refused:
        export("canvas", [tmp_path / "out"], canvas, tmp_path / "c.csv", columns=column)
    said = str(refused.value)
    assert "'Lab 9 (55)' is out of 100" in said and "out of 14" in said
    assert "--scale-to-points-possible" in said and not (tmp_path / "c.csv").exists()
    args = ["export", "canvas", str(tmp_path / "out"), "--roster", str(path), "--column"]
    args += ["lab9_export=Lab 9 (55)", "-o", str(tmp_path / "c.csv")]
    assert main(args) == 2 and "Points Possible" in capsys.readouterr().err
    assert main([*args, "--scale-to-points-possible"]) == 0
    assert "Lab 9 (55) scaled from 14 to its Points Possible 100" in capsys.readouterr().out
    header, possible, *rows = list(csv.reader(open(tmp_path / "c.csv", encoding="utf-8")))
    assert header[5] == "Lab 9 (55)" and possible[5] == "100"
    assert {r[0]: r[5] for r in rows} == {
        "Doe, Erin": "92.86",
        "Roe, Frank": "50",
        "Poe, Gina": "0",
    }
    # a column the roster has no points for (a new assignment), or the same points: as it is
    done = export("canvas", [tmp_path / "out"], canvas, tmp_path / "c.csv")
    assert done["scaled"] == {}
    # and never for Moodle, which has no Points Possible row
    export("moodle", [tmp_path / "out"], canvas, tmp_path / "m.csv", columns=column)


def test_canvas_rows_without_an_id_sharing_a_name_are_refused(tmp_path):
    """A Canvas row without an ID, SIS User ID or SIS Login ID (here: a Moodle worksheet as
    the roster) is matched by Canvas by its name: two John Smiths would reach one student.
    Refused, naming both; a row without an id and a name of its own is noted."""
    lab = LabSpec("lab9_export", "Lab 9")
    lab.piece("f", objects=["f"])
    lab.answer("why", points=4, title="why", rubric=[(4, "Right.")])
    people = {"John Smith": ("js1@uni.edu", 101), "Ann Lee": ("al@uni.edu", 103)}
    sheet_text = (
        _worksheet(people) + "Participant 102,John Smith,js2@uni.edu,Submitted,,14.00,Yes,-,-,\n"
    )
    sheet = Roster.load(_write(tmp_path, "sheet.csv", sheet_text))
    out = _moodle_book(tmp_path, lab, sheet, {"Ann Lee_103_assignsubmission_file": 5.0})
    with pytest.raises(ExportError) as refused:
        export("canvas", [out], sheet, tmp_path / "c.csv")
    said = str(refused.value)
    assert (
        "js1@uni.edu" in said
        and "js2@uni.edu" in said
        and "matches a row without an id by its name" in said
    )
    assert "Canvas's gradebook export (Grades > Export) as --roster" in said
    assert not (tmp_path / "c.csv").exists()
    one = Roster.load(_write(tmp_path, "one.csv", _worksheet(people)))
    done = export(
        "canvas",
        [_moodle_book(tmp_path, lab, one, {"Ann Lee_103_assignsubmission_file": 5.0})],
        one,
        tmp_path / "c.csv",
    )
    assert done["matched_by_name"] == ["js1@uni.edu", "al@uni.edu"]
    notes = list(csv.DictReader(open(tmp_path / "c.notes.csv", encoding="utf-8")))
    assert any(
        n["Student"] == "Ann Lee"
        and n["Note"].startswith(
            "no ID, SIS User ID or SIS Login ID: Canvas's import matches this row by its name 'Ann Lee'"
        )
        for n in notes
    )
    assert "2 without an ID, SIS User ID or SIS Login ID" in done["summary"]


def test_without_a_roster_no_row_is_noted_as_not_in_it(tmp_path):
    """Exported without --roster, every row is 'not in the roster': saying so in each
    student's Moodle Notes cell tells nothing."""
    _book(
        tmp_path,
        tmp_path / "out",
        {"S001": (10, None), "S002": (4, None)},
        roster=Roster.load(_write(tmp_path, "ours.csv", OURS)),
    )
    done = export("moodle", [tmp_path / "out"], None, tmp_path / "m.csv")
    rows = list(csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8")))
    assert [r["Notes"] for r in rows] == ["", ""] and done["notes"] is None
    assert done["not_in_roster"] == ["S001", "S002"]


def test_without_a_roster_rows_matched_at_grading_are_not_said_unmatched(tmp_path, capsys):
    """Exported without --roster, a gradebook whose rows all matched the roster at grading
    printed "submission X matched no roster student" for every row and "N not in the
    roster": only a row that matched no one at grading is listed, and the last line says
    that no roster was given."""
    _book(
        tmp_path,
        tmp_path / "out",
        {"S001": (10, None), "S002": (4, None), "zed": (6, None)},
        roster=Roster.load(_write(tmp_path, "ours.csv", OURS)),
    )
    done = export("moodle", [tmp_path / "out"], None, tmp_path / "m.csv")
    assert done["unmatched"] == {"lab9_export": ["zed"]}, done["unmatched"]
    assert "no roster given: each student as identified at grading" in done["summary"]
    assert "not in the roster" not in done["summary"]
    out = tmp_path / "out"
    assert main(["export", "moodle", str(out), "-o", str(tmp_path / "m2.csv")]) == 0
    said = capsys.readouterr().err
    assert said.count("matched no roster student") == 1 and "submission zed" in said, said


def test_canvas_rows_with_neither_a_name_nor_an_id_are_refused(tmp_path):
    """A roster of e-mail addresses only: Canvas's import matches a row by its ID, SIS
    User ID, SIS Login ID or name, so a row with none of them reaches no student. Refused,
    naming the rows by their e-mail, not as rows sharing the name ''."""
    lab = LabSpec("lab9_export", "Lab 9")
    lab.piece("f", objects=["f"])
    people = {"John Smith": ("js1@uni.edu", 101), "Ann Lee": ("al@uni.edu", 103)}
    sheet = Roster.load(_write(tmp_path, "sheet.csv", _worksheet(people)))
    out = _moodle_book(tmp_path, lab, sheet, {"Ann Lee_103_assignsubmission_file": 5.0})
    emails = Roster.load(_write(tmp_path, "emails.csv", "email\njs1@uni.edu\nal@uni.edu\n"))
    with pytest.raises(ExportError) as refused:
        export("canvas", [out], emails, tmp_path / "c.csv")
    said = str(refused.value)
    assert said.startswith(
        "Refusing to write Canvas rows with neither a Student name nor an ID, SIS User ID or "
        "SIS Login ID: a roster row with email js1@uni.edu, a roster row with email al@uni.edu."
    )
    assert "Canvas's gradebook export (Grades > Export) as --roster" in said
    assert "another row has" not in said and "''" not in said
    assert not (tmp_path / "c.csv").exists()


def test_canvas_rows_its_import_would_misread_are_left_out_with_their_grades(tmp_path):
    """Canvas's import matches a row without an id by its Student name alone, the display
    name as well as the sortable one the roster holds: a notebook that matched no roster
    student, written without an id, could overwrite the grade of a classmate of that
    name. And it reads any row whose Student cell holds "Points Possible" as its points
    row. Both are left out of the file, their grades in the notes and the report."""
    gradescope = {"lms": "gradescope", "submitted_at": ""}
    who = {
        "Mallory Stray": {**gradescope, "submitters": [{"name": "Mallory Stray"}]},
        "pp": {**gradescope, "submitters": [{"name": "Points Possible Pat"}]},
        "erin": {"lms": "canvas", "name": "doeerin", "user_id": "1001", "late": False},
    }
    canvas = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    rows = {name: (7, lms) for name, lms in who.items()}
    _graded(tmp_path, tmp_path / "out", rows, canvas)
    done = export("canvas", [tmp_path / "out"], canvas, tmp_path / "c.csv")
    table = {r[0]: r for r in csv.reader(open(tmp_path / "c.csv", encoding="utf-8"))}
    assert set(table) == {"Student", "    Points Possible", "Doe, Erin", "Roe, Frank", "Poe, Gina"}
    left = {x["name"]: x for x in done["left_out"]}
    assert set(left) == {"Mallory Stray", "Points Possible Pat"}
    assert "by its name 'Mallory Stray' alone" in left["Mallory Stray"]["why"]
    assert "reads as its points row" in left["Points Possible Pat"]["why"]
    assert all(x["grades"] for x in left.values()) and "2 left out of the file" in done["summary"]
    alone = export("canvas", [tmp_path / "out"], None, tmp_path / "n.csv")  # without a roster
    assert [x["name"] for x in alone["left_out"]] == ["Points Possible Pat"]


def test_an_empty_cell_of_a_moodle_row_written_is_noted_and_counted(tmp_path):
    """Moodle's import clears the grade of an empty cell (one entered by hand too): a
    written answer not graded yet, exported by piece, is an empty cell in a row written
    for its other grades; each such cell is noted for its student and counted in the
    summary."""
    roster_path = _write(tmp_path, "ours.csv", OURS)
    roster = Roster.load(roster_path)
    _book(tmp_path, tmp_path / "out", {"S001": (7, None), "S002": (5, None)}, roster=roster,
          graded=False)  # fmt: skip
    done = export("moodle", [tmp_path / "out"], roster, tmp_path / "m.csv", pieces=True,
                  allow_ungraded=True)  # fmt: skip
    rows = {r["Full name"]: r for r in csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8"))}
    empty = [h for h, v in rows["Erin Doe"].items() if v == ""]
    assert len(empty) == 1 and "why" in empty[0].lower(), rows["Erin Doe"]
    assert done["empty_cells"] == 4 and "4 empty cell(s) in rows written" in done["summary"]
    notes = (tmp_path / "m.notes.csv").read_text(encoding="utf-8")
    assert f"empty in the Moodle file: {empty[0]}; Moodle's import clears the grade" in notes


def test_a_student_excused_in_canvas_stays_excused(tmp_path):
    """Canvas's gradebook export writes EX where an assignment is excused, and its import
    takes any other value as a grade: the export wrote 0 (no submission) or a grade over
    the excuse. The roster's EX is written back, with a note holding lablib's grade."""
    sheet = CANVAS.replace("Section\n", "Section,Lab 9 (5501)\n")
    sheet = sheet.replace(",A\n", ",A,\n", 1).replace("frank,A\n", "frank,A,EX\n")
    sheet = sheet.replace(",B\n", ",B,ex\n")
    sheet += "    Points Possible,,,,,14\n"
    roster = Roster.load(_write(tmp_path, "canvas.csv", sheet))
    _book(tmp_path, tmp_path / "out", {"S001": (7, None), "S002": (5, None)}, roster=roster)
    done = export("canvas", [tmp_path / "out"], roster, tmp_path / "c.csv",
                  columns={"lab9_export": "Lab 9 (5501)"})  # fmt: skip
    rows = {r["Student"]: r for r in csv.DictReader(open(tmp_path / "c.csv", encoding="utf-8"))}
    assert rows["Doe, Erin"]["Lab 9 (5501)"] == "10"
    assert rows["Roe, Frank"]["Lab 9 (5501)"] == "EX"  # graded 8, excused in Canvas
    assert rows["Poe, Gina"]["Lab 9 (5501)"] == "EX"  # no submission: not 0
    assert done["excused"] == {"lab9_export": ["S002", "S003"]}
    assert "2 cell(s) excused in Canvas kept as EX" in done["summary"]
    notes = (tmp_path / "c.notes.csv").read_text(encoding="utf-8")
    assert "Lab 9 (5501): excused in Canvas (EX in the roster given): written as EX" in notes
    assert "lablib's grade, not exported: 8" in notes and "not exported: 0" in notes
    assert "Poe, Gina" in notes and "no submission" not in notes  # excused, not missing
    assert done["missing"] == {"lab9_export": []}
    # the column given as Canvas's header matches as the Points Possible row does (folded)
    done = export("canvas", [tmp_path / "out"], roster, tmp_path / "c.csv",
                  columns={"lab9_export": "lab 9 (5501)"})  # fmt: skip
    assert done["excused"] == {"lab9_export": ["S002", "S003"]}


def test_a_student_listed_twice_in_a_canvas_roster_is_one_row(tmp_path):
    """Section exports put together list a student of two sections twice (Canvas's own
    export writes them once, "A and B"): the export wrote two rows with one ID, 0 and the
    grade, and grading with it matched the student's file to no one. Rows of one person
    are one student; rows sharing an id and differing otherwise are refused, naming both."""
    from lablib.grading.gradebook.roster import RosterError

    twice = CANVAS + '"Roe, Frank",1002,S002,frank,B\n'
    roster = Roster.load(_write(tmp_path, "canvas.csv", twice))
    assert [(s.name, s.section) for s in roster.students] == [
        ("Doe, Erin", "A"),
        ("Roe, Frank", "A and B"),
        ("Poe, Gina", "B"),
    ]
    _book(tmp_path, tmp_path / "out", {"roefrank": (4, "1002")}, roster=roster)
    export("canvas", [tmp_path / "out"], roster, tmp_path / "c.csv", allow_ungraded=True)
    rows = list(csv.DictReader(open(tmp_path / "c.csv", encoding="utf-8")))
    frank = [r for r in rows if r["ID"] == "1002"]
    assert len(frank) == 1 and frank[0]["Section"] == "A and B", rows
    assert frank[0]["Lab 9: export"] == "7", frank  # 4 + 3 written, not 0
    for changed in ('"Roe, Frank",1002,S002,,B\n', '"Roe, Frank",1009,S002,frank,B\n'):
        with pytest.raises(RosterError) as caught:
            Roster.load(_write(tmp_path, "canvas.csv", CANVAS + changed))
        said = str(caught.value)
        assert "lists one student twice with different details: row 3" in said, said
        assert "and row 5 ('Roe, Frank'" in said and "Keep one row per student" in said, said


def test_two_rows_of_one_student_handed_in_by_two_people_are_said_to_be(tmp_path):
    """Gradescope: Amara typed Frank's SID, so her notebook matched Frank and he had two
    rows; the refusal suggested --allow-several, which would export Frank's best and
    leave Amara without a grade. The message names the two people the download says
    handed them in, and what to fix first."""
    roster = Roster.load(_write(tmp_path, "ours.csv", OURS))
    lab, results = LabSpec("lab9_export", "Lab 9: export"), []
    lab.piece("f", objects=["f"])
    erin = {"name": "Erin Doe", "sid": "S001", "email": "erin@uni.edu"}
    for name, email in (("Frank Roe", "frank@uni.edu"), ("Amara Chen", "amara@uni.edu"),
                        ("Group", "")):  # fmt: skip
        r = SubmissionResult(name, str(tmp_path / f"{name}.ipynb"), Status(), 5.0, 10.0,
                             {"f": PieceScore(5.0, 10.0)}, [])  # fmt: skip
        frank = {"name": "Frank Roe", "sid": "S002", "email": "frank@uni.edu"}
        lms = {"lms": "gradescope", "submitters": [{"name": name, "sid": "S002", "email": email}]}
        if name == "Group":  # Erin's group, Frank a member: his too, no one else's
            lms["submitters"] = [erin, frank]
        r.identity = resolve(Found(name, tmp_path / f"{name}.ipynb", "", "", lms), roster, lab=lab)
        results.append(r)
    write_reports(tmp_path / "out", lab, results, roster=roster)
    with pytest.raises(ExportError, match="several rows in one lab") as refused:
        export("moodle", [tmp_path / "out"], roster, tmp_path / "m.csv")
    said = str(refused.value)
    assert "handed in by someone else, the LMS download says (S002: amara@uni.edu)" in said
    assert "the roster's submission column" in said and "then grade again" in said


def test_a_moodle_summary_says_nothing_of_canvas(tmp_path):
    """A Moodle export with students left out (no e-mail to match) and no empty cell
    ended its summary with Canvas's reason for leaving rows out, counting them twice."""
    roster = Roster.load(_write(tmp_path, "ours.csv", OURS.replace("frank@uni.edu", "")))
    _book(tmp_path, tmp_path / "out", {"S001": (7, None), "S002": (5, None), "S003": (6, None)},
          roster=roster)  # fmt: skip
    done = export("moodle", [tmp_path / "out"], roster, tmp_path / "m.csv")
    assert done["matched_by"] == "Email address" and len(done["left_out"]) == 1
    assert "1 left out of the file, without an Email address" in done["summary"]
    assert "Canvas" not in done["summary"], done["summary"]


# --------------------------------------------------------------------------- a red team's
# Canvas user ids, rosters that changed since grading, and -o naming an input


def test_canvas_s_user_id_keeps_one_row_when_other_ids_changed_since_grading(tmp_path):
    """Erin graded with the roster's SIS Login ID ``erin``, exported with a roster where it
    is ``erin.doe`` (renamed in the SIS) or where a spreadsheet dropped her SIS User ID's
    leading zeros: the file had two rows of Canvas user 1001, one empty and one with her
    grade (Canvas's import applies both). Her Canvas ID is Canvas's own key: one row,
    the difference noted for the instructor."""
    from lablib.grading.lms import canvas_name

    graded_with = CANVAS.replace("1001,S001,erin", "1001,00123,erin")
    canvas = Roster.load(_write(tmp_path, "canvas.csv", graded_with))
    erin = canvas_name("doeerin_1001_9000001_lab.ipynb")
    lab = _graded(tmp_path, tmp_path / "out", {"doeerin": (10, erin)}, canvas)
    for name, text in {
        "renamed": graded_with.replace("00123,erin,", "00123,erin.doe,"),
        "spreadsheet": graded_with.replace(",00123,", ",123,"),
    }.items():
        roster = Roster.load(_write(tmp_path, f"{name}.csv", text))
        done = export("canvas", [tmp_path / "out"], roster, tmp_path / f"{name}_import.csv")
        rows = list(csv.reader(open(tmp_path / f"{name}_import.csv", encoding="utf-8")))
        erins = [r for r in rows if r[1] == "1001"]
        assert len(erins) == 1 and erins[0][5] == "13", (name, rows)
        assert done["not_in_roster"] == [], (name, done["not_in_roster"])
        notes = open(tmp_path / f"{name}_import.notes.csv", encoding="utf-8").read()
        assert "matched by the LMS user id '1001' although" in notes, (name, notes)
    assert lab.name in done["labs"]


def test_two_canvas_rows_with_one_id_are_refused(tmp_path):
    """The last guard before the file: a gradebook row kept as graded (another Canvas user
    id, Erin's SIS Login ID) next to the roster's Erin would be two rows that Canvas's
    import both gives to ``erin``."""
    from lablib.grading.lms import canvas_name

    graded_with = CANVAS.replace("1001,S001,erin", "1009,S009,erin")
    lab_roster = Roster.load(_write(tmp_path, "graded.csv", graded_with))
    erin = canvas_name("doeerin_1009_9000001_lab.ipynb")
    _graded(tmp_path, tmp_path / "out", {"doeerin": (10, erin)}, lab_roster)
    roster = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    with pytest.raises(ExportError, match="two Canvas rows with one SIS Login ID 'erin'"):
        export("canvas", [tmp_path / "out"], roster, tmp_path / "import.csv")
    assert not (tmp_path / "import.csv").exists()


def test_a_roster_row_twice_is_one_student_and_a_repeated_header_is_refused(tmp_path):
    """A lablib list with one row twice left its student matched to no one and wrote two
    rows of 0; a Moodle worksheet with its header pasted again read the header as a
    student (and its Maximum Grade as "10.00; Maximum Grade", unchecked); people named
    "Points Possible" or "Test Student" in a Moodle worksheet were dropped as if they were
    Canvas's points row and test student."""
    twice = Roster.load(_write(tmp_path, "twice.csv", OURS + "S001,Erin Doe,erin@uni.edu,A\n"))
    assert [s.student_id for s in twice.students] == ["S001", "S002", "S003"]
    assert resolve(Found("S001", tmp_path / "S001.ipynb", "S001.ipynb", ""), twice)["matched"]
    sheet = (
        "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
        "Last modified (submission),Last modified (grade),Feedback comments\n"
        "Participant 7300001,Erin Doe,erin@uni.edu,Submitted,,10.00,Yes,,,\n"
        "Participant 7300006,Points Possible,pp@uni.edu,Submitted,,10.00,Yes,,,\n"
        "Participant 7300007,Test Student,ts@uni.edu,Submitted,,10.00,Yes,,,\n"
    )
    people = Roster.load(_write(tmp_path, "sheet.csv", sheet))
    assert [s.name for s in people.students] == ["Erin Doe", "Points Possible", "Test Student"]
    header = sheet.splitlines()[0] + "\n"
    pasted = sheet.replace("Participant 7300006", header + "Participant 7300006", 1)
    with pytest.raises(RosterError, match="row 3 repeats the header"):
        Roster.load(_write(tmp_path, "pasted.csv", pasted))
    canvas_test = CANVAS + '"Student, Test",999999,,,A\n    Points Possible,,,,\n'
    assert len(Roster.load(_write(tmp_path, "c.csv", canvas_test)).students) == 3


def test_the_import_file_never_replaces_what_the_export_reads(tmp_path, capsys):
    """``-o`` naming the roster replaced it; a file in the grading output folder
    (``grades.json``) replaced the gradebook; a folder ended in a traceback."""
    from lablib.grading.lms import canvas_name

    canvas_path = _write(tmp_path, "canvas.csv", CANVAS)
    canvas = Roster.load(canvas_path)
    erin = canvas_name("doeerin_1001_9000001_lab.ipynb")
    _graded(tmp_path, tmp_path / "out", {"doeerin": (10, erin)}, canvas)
    book = (tmp_path / "out" / "grades.json").read_bytes()
    for destination, said in {
        canvas_path: "would replace the roster given",
        tmp_path / "canvas.notes.csv": None,  # its notes file is another name: allowed
        tmp_path / "out" / "grades.json": "inside the grading output folder",
        tmp_path / "out": "is a folder",
    }.items():
        args = ["export", "canvas", str(tmp_path / "out"), "--roster", str(canvas_path)]
        code = main([*args, "-o", str(destination)])
        err = capsys.readouterr().err
        if said is None:
            assert code == 0, err
            continue
        assert code == 2 and said in err and "Nothing was written" in err, err
        assert "Traceback" not in err
    assert canvas_path.read_text(encoding="utf-8") == CANVAS
    assert (tmp_path / "out" / "grades.json").read_bytes() == book
