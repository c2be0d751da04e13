"""Who submitted what (lablib.grading.gradebook.identity): the roster layouts of each LMS, the times
file, the matching rules in order, NFC + case-folded comparison, and the submission time's
sources in order."""

from __future__ import annotations

import pathlib
import unicodedata

import pytest

from lablib.grading.gradebook.identity import resolve, resolve_all, student_of
from lablib.grading.gradebook.roster import Roster, RosterError, SubmissionTimes
from lablib.grading.submissions import Found

CANVAS = """Student,ID,SIS User ID,SIS Login ID,Section,Lab 1 (5501)
    Points Possible,,,,,23
"Doe, Erin",1001,S001,erin,A,
"Núñez, José",1002,S002,jnunez,A,
"Roe, Frank",1003,S003,frank,B,
"Doe, Erin",1004,S004,edoe2,B,
"Student, Test",1005,,,A,
"""
WORKSHEET = """\ufeffIdentifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,Last modified (submission),Last modified (grade),Feedback comments
Participant 7300000,Emma Anderson,emma@uni.example,Submitted for grading,,23.00,Yes,"Friday, 20 November 2026, 10:59 PM",-,
Participant 7300017,José Núñez,jose@uni.example,No submission,,23.00,Yes,-,-,
"""
MOODLE_GRADES = """First name,Last name,ID number,Institution,Department,Email address,Assignment: Lab 1 (Real)
Emma,Anderson,S100,Uni,CS,emma@uni.example,-
"""
OURS = """student_id,name,email,submission,submitted_at,submitted_at:lab1,submitted_at:lab2_transformer_reuters
S1,Ann,ann@x.edu,,2026-11-19T10:00+00:00,2026-11-20T10:00+00:00,
S2,Bob,bob@x.edu,section 2/bob-folder,2026-11-19T11:00+00:00,,2026-11-22T11:00+00:00
"""


def _roster(tmp_path, text, name="roster.csv") -> Roster:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return Roster.load(path)


def _found(name, lms=None, where="", folder="", path=None):
    return Found(
        name, pathlib.Path(path or f"/subs/{where or name + '.ipynb'}"), where, folder, lms or {}
    )


def test_moodle_and_lablib_layouts(tmp_path):
    sheet = _roster(tmp_path, WORKSHEET)
    emma, jose = sheet.students
    assert (emma.participant_id, emma.name, emma.email) == (
        "7300000",
        "Emma Anderson",
        "emma@uni.example",
    )
    assert emma.submitted_at.startswith("2026-11-20T22:59") and jose.submitted_at == ""
    assert emma.key == "emma@uni.example"
    grades = _roster(tmp_path, MOODLE_GRADES, "grades.csv")
    assert (grades.students[0].name, grades.students[0].student_id) == ("Emma Anderson", "S100")
    ours = _roster(tmp_path, OURS, "ours.csv")
    ann, bob = ours.students
    assert ann.time_for(("lab1_attention", "lab1")) == (
        "2026-11-20T10:00+00:00",
        "the roster's submitted_at:lab1 column",
    )
    assert ann.time_for(("lab2_transformer_reuters", "lab2")) == (
        "2026-11-19T10:00+00:00",
        "the roster's submitted_at column",
    )
    assert bob.time_for(("lab2_transformer_reuters", "lab2"))[0] == "2026-11-22T11:00+00:00"


def test_times_file(tmp_path):
    path = tmp_path / "times.csv"
    path.write_text(
        "student,lab,submitted_at\nS1,lab1,2026-11-20T10:00+00:00\nann@x.edu,lab1,2026-11-21T09:00+00:00\n"
        "S1,lab2,2026-11-25T09:00+00:00\nbob,,2026-11-19T09:00+00:00\n"
    )
    times = SubmissionTimes.load(path)
    when, where = times.lookup({"s1", "ann@x.edu"}, ("lab1_attention", "lab1"))
    assert when == "2026-11-21T09:00+00:00" and where == "times.csv, line 3", (
        "the resubmission's time"
    )
    assert times.lookup({"bob"}, ("lab4_gat", "lab4"))[0] == "2026-11-19T09:00+00:00", (
        "no lab: every lab"
    )
    assert times.lookup({"zed"}, ("lab1",)) == ("", "")
    path.write_text("student,lab,submitted_at\nS1,lab1,friday noon\n")
    with pytest.raises(RosterError, match=r"line 2: 'friday noon' is not a time"):
        SubmissionTimes.load(path)
    path.write_text("who,when\nS1,2026-11-20T10:00\n")
    with pytest.raises(RosterError, match="needs a header 'student,lab,submitted_at'"):
        SubmissionTimes.load(path)


def test_matching_rules_in_order(tmp_path):
    canvas = _roster(tmp_path, CANVAS)
    # Canvas's user id wins over a name that would say otherwise
    got = resolve(
        _found("doeerin", {"lms": "canvas", "name": "doeerin", "user_id": "1003", "late": True}),
        canvas,
    )
    assert got["student_id"] == "S003" and got["matched_by"] == "Canvas user id 1003"
    # a Canvas name alone, when one student has it; never when two do
    jose = resolve(
        _found("núñezjosé", {"lms": "canvas", "name": "núñezjosé", "user_id": "9"}), canvas
    )
    assert jose["student_id"] == "S002" and jose["matched_by"].startswith("Canvas name")
    erin = resolve(_found("doeerin", {"lms": "canvas", "name": "doeerin", "user_id": "9"}), canvas)
    assert not erin["matched"] and erin["key"] == "9" and erin["lms_id"] == "9", (
        "two Erin Does: neither"
    )
    # identifiers naming a folder, NFD against NFC, case folded
    nfd = unicodedata.normalize("NFD", "JNuñez")
    assert (
        resolve(_found(nfd, where=f"Sec/{nfd}/lab.ipynb", folder=f"Sec/{nfd}"), canvas)["matched"]
        is False
    )
    folder = resolve(
        _found("JNUNEZ", where="Sec-1/JNUNEZ/lab.ipynb", folder="Sec-1/JNUNEZ"), canvas
    )
    assert folder["student_id"] == "S002" and "jnunez" in folder["matched_by"]
    # the roster's submission column first, by the path below the folder given
    ours = _roster(tmp_path, OURS, "ours.csv")
    bob = resolve(
        _found("bob-folder", where="section 2/bob-folder/lab.ipynb", folder="section 2/bob-folder"),
        ours,
    )
    assert bob["student_id"] == "S2" and bob["matched_by"].startswith(
        "the roster's submission column"
    )
    # a roster folder name in NFD: the roster's NFC login matches
    ours_nfd = _roster(tmp_path, "student_id,name,login\nS9,José,josé.núñez\n", "nfd.csv")
    got = resolve(_found(unicodedata.normalize("NFD", "josé.núñez")), ours_nfd)
    assert got["student_id"] == "S9"


def test_moodle_and_gradescope_ids(tmp_path):
    sheet = _roster(tmp_path, WORKSHEET)
    emma = resolve(
        _found(
            "Emma Anderson", {"lms": "moodle", "name": "Emma Anderson", "participant_id": "7300000"}
        ),
        sheet,
        lab="lab1",
    )
    assert emma["matched_by"] == "Moodle participant id 7300000"
    assert (
        emma["submitted_at"].startswith("2026-11-20T22:59")
        and emma["time_source"] == "the roster's submitted_at column"
    )
    gs = _roster(
        tmp_path,
        "First Name,Last Name,SID,Email,Role\nAlice,A,111,alice@x.edu,Student\n"
        "Bob,B,,bob@x.edu,Student\nIan,S,,ian@x.edu,Instructor\n",
        "gs.csv",
    )
    group = {
        "lms": "gradescope",
        "submitted_at": "2026-11-21T09:00:00+00:00",
        "submitters": [
            {"name": "Alice A", "sid": "111", "email": ""},
            {"name": "Bob B", "sid": "", "email": "BOB@x.edu"},
        ],
    }
    got = resolve(_found("Alice A", group), gs, lab="lab1")
    assert got["student_id"] == "111" and got["matched_by"] == "Gradescope SID 111"
    assert [o["email"] for o in got["others"]] == ["bob@x.edu"] and got["others"][0]["matched"]
    assert got["time_source"] == "Gradescope's submission_metadata.yml"
    match = gs.match_of({"Alice A": got})
    assert list(match.students) == ["Alice A"] and match.without_submission == (), (
        "Bob is in the group"
    )
    # without a roster: what the download says
    alone = resolve(_found("Alice A", group))
    assert (alone["key"], alone["student_id"], alone["matched"]) == ("111", "111", False)
    assert alone["others"][0]["email"] == "BOB@x.edu"


def test_the_time_comes_from_the_first_source_that_has_one(tmp_path):
    ours = _roster(tmp_path, OURS, "ours.csv")
    path = tmp_path / "times.csv"
    path.write_text("student,lab,submitted_at\nS1,lab1,2026-11-23T08:00+00:00\n")
    times = SubmissionTimes.load(path)
    ann = _found("S1")
    assert (
        resolve(ann, ours, lab="lab1_attention")["submitted_at"] == "2026-11-20T10:00+00:00"
    )  # the lab's column
    assert (
        resolve(ann, ours, times=times, lab="lab1_attention")["submitted_at"]
        == "2026-11-23T08:00+00:00"
    )
    download = _found(
        "S1",
        {
            "lms": "gradescope",
            "submitted_at": "2026-11-24T08:00:00+00:00",
            "submitters": [{"name": "Ann", "sid": "S1", "email": ""}],
        },
    )
    got = resolve(download, ours, times=times, lab="lab1_attention")
    assert got["submitted_at"] == "2026-11-24T08:00:00+00:00", "the LMS download first"
    unmatched = resolve(_found("zed"), ours, times=times, lab="lab1")
    assert not unmatched["matched"] and unmatched["submitted_at"] == ""


def test_student_of_and_resolve_all(tmp_path):
    canvas = _roster(tmp_path, CANVAS)
    found = [_found("erin"), _found("frank"), _found("zed")]
    identities = resolve_all(found, canvas)
    assert student_of(identities["erin"], canvas) is canvas.students[0]
    assert student_of(identities["frank"]).name == "Roe, Frank"  # rebuilt from the gradebook alone
    assert student_of(identities["zed"]) is None
    match = canvas.match_of(identities)
    assert match.unmatched == ("zed",) and [s.student_id for s in match.without_submission] == [
        "S002",
        "S004",
    ]
