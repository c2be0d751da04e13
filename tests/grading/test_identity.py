"""Who submitted what (lablib.grading.gradebook.identity): the roster layouts of each LMS, the times
file, the matching rules in order, NFC + case-folded comparison, and the submission time's
sources in order."""

from __future__ import annotations

import pathlib
import unicodedata

import pytest

from lablib.grading.gradebook.identity import lms_person, resolve, resolve_all, student_of
from lablib.grading.gradebook.roster import Roster, RosterError, Student, SubmissionTimes
from lablib.grading.lms import moodle_name
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


def test_a_times_row_is_the_time_of_the_one_student_it_names(tmp_path):
    """John's login is ``jsmith``; Jane's address is ``jsmith@gmail.com``. The times file's
    row for ``jsmith`` (John's late time) was also Jane's, whose latest row it then was:
    she was penalised for his lateness; and a folder named ``jsmith`` was no one's. The
    start of an address is a student's key only where no classmate has it as theirs."""
    roster = _roster(tmp_path, "student_id,name,email,login\nS001,John Smith,john.smith@uni.edu,"
                     "jsmith\nS002,Jane Smith,jsmith@gmail.com,janes\n")  # fmt: skip
    path = tmp_path / "times.csv"
    path.write_text(
        "student,lab,submitted_at\njsmith,lab1,2026-11-25T10:00+00:00\n"
        "janes,lab1,2026-11-19T10:00+00:00\nS002,lab2,2026-11-20T10:00+00:00\n"
    )
    times = SubmissionTimes.load(path)
    when = {}
    for name in ("S001", "janes"):  # their folders
        got = resolve(_found(name), roster, times=times, lab="lab1")
        when[got["student_id"]] = got["submitted_at"]
    assert when == {"S001": "2026-11-25T10:00+00:00", "S002": "2026-11-19T10:00+00:00"}
    # a folder named by John's login is John's, the start of Jane's address though it is
    got = resolve(_found("jsmith"), roster, times=times, lab="lab1")
    assert got["student_id"] == "S001" and got["submitted_at"] == "2026-11-25T10:00+00:00"
    # a row by the start of an address no one else has is still that student's
    path.write_text("student,lab,submitted_at\njohn.smith,lab1,2026-11-21T10:00+00:00\n")
    got = resolve(_found("S001"), roster, times=SubmissionTimes.load(path), lab="lab1")
    assert got["submitted_at"] == "2026-11-21T10:00+00:00"


def test_matching_rules_in_order(tmp_path):
    canvas = _roster(tmp_path, CANVAS)
    # Canvas's user id, with the name Canvas writes for that student
    got = resolve(
        _found("roefrank", {"lms": "canvas", "name": "roefrank", "user_id": "1003", "late": True}),
        canvas,
    )
    assert got["student_id"] == "S003" and got["matched_by"] == "Canvas user id 1003"
    # a user id whose student the name in the file is not: no one's, never by the name
    got = resolve(
        _found("doeerin", {"lms": "canvas", "name": "doeerin", "user_id": "1003", "late": True}),
        canvas,
    )
    assert not got["matched"] and got["lms_id"] == "" and "group" in got["why_unmatched"]
    # a Canvas name alone, for a student the roster gives no Canvas user id; never for a
    # student with another user id, nor when two students have the name
    ours = _roster(tmp_path, "student_id,name\nS1,Ann Lee\n", "ours-canvas.csv")
    ann = resolve(_found("leeann", {"lms": "canvas", "name": "leeann", "user_id": "9"}), ours)
    assert ann["student_id"] == "S1" and ann["matched_by"] == "Canvas name leeann"
    jose = resolve(
        _found("núñezjosé", {"lms": "canvas", "name": "núñezjosé", "user_id": "9"}), canvas
    )
    assert not jose["matched"] and "whose Canvas user id is 1002" in jose["why_unmatched"]
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


def test_a_notebook_in_a_students_folder_is_never_named_by_its_own_file(tmp_path):
    """A folder per student (GitHub Classroom, a plain layout): ``lab9-erindoe/frank.ipynb``
    was matched to Frank by its file's name (his login), Frank's own folder to no one, and
    the export gave Erin's work to Frank. The folder names every notebook in it; the
    names a student gave a file or a subfolder name no one."""
    roster = _roster(tmp_path, "student_id,name,email,login\nS1,Erin Doe,e@x.edu,erin\n"
                     "S2,Frank Roe,f@x.edu,frank\n")  # fmt: skip
    for where in ("lab9-erindoe/frank.ipynb", "lab9-erindoe/frank/lab9.ipynb"):
        got = resolve(_found("lab9-erindoe", where=where, folder="lab9-erindoe"), roster)
        assert not got["matched"], (where, got)
        assert "in the folder 'lab9-erindoe', which names no student" in got["why_unmatched"]
        assert "'frank' inside it (the name of Frank Roe) names no one" in got["why_unmatched"]
    # a section's folder given whole (each notebook named after its student) says how to
    # grade it: each such folder itself
    got = resolve(_found("Sec-01/erin", where="Sec-01/erin.ipynb", folder="Sec-01"), roster)
    assert not got["matched"] and "give each such folder itself" in got["why_unmatched"]
    # a folder that names two students is not said to name none
    two = _roster(tmp_path, "student_id,name,email\nS1,A,jsmith@a.edu\nS2,B,jsmith@b.edu\n"
                  "S3,Frank,frank@x.edu\n", "two.csv")  # fmt: skip
    got = resolve(_found("jsmith", where="jsmith/frank.ipynb", folder="jsmith"), two)
    assert not got["matched"] and "names no student" not in (got.get("why_unmatched") or "")
    # the folder still names its notebooks, whatever their names
    got = resolve(_found("erin", where="erin/frank.ipynb", folder="erin"), roster)
    assert got["student_id"] == "S1" and got["matched_by"] == "the name 'erin'"
    got = resolve(_found("sec-1/erin", where="sec-1/erin/frank.ipynb", folder="sec-1/erin"), roster)
    assert got["student_id"] == "S1"
    # a notebook at the top of the folder given is named by its file
    assert resolve(_found("frank", where="frank.ipynb"), roster)["student_id"] == "S2"


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


def test_a_gradescope_sid_naming_another_student_than_the_e_mail_matches_no_one(tmp_path):
    """Mallory's account with Bob's SID typed in Gradescope: her notebook was Bob's (her
    name and e-mail on it), she got 0 and nothing said so. Ids that name different
    students leave the row unmatched, saying which; ids that agree, or a name the roster
    does not have, match as before."""
    gs = _roster(
        tmp_path,
        "First Name,Last Name,SID,Email,Role\nMallory,Evil,111,mallory@uni.edu,Student\n"
        "Bob,Good,222,bob@uni.edu,Student\nCarol,Sun,333,carol@uni.edu,Student\n",
        "gs.csv",
    )

    def one(*people):
        lms = {
            "lms": "gradescope",
            "submitters": [dict(zip(("name", "sid", "email"), p)) for p in people],
        }
        return resolve(_found(people[0][0], lms), gs, lab="lab1")

    wrong = one(("Mallory Evil", "222", "mallory@uni.edu"))
    assert not wrong["matched"] and wrong.get("student_id", "") != "222", wrong
    why = wrong["why_unmatched"]
    assert "SID 222 is Bob Good's" in why and "e-mail mallory@uni.edu is Mallory Evil's" in why
    assert "correct the SID in Gradescope" in why
    by_name = one(("Carol Sun", "222", ""))  # no e-mail: the name is another student's
    assert not by_name["matched"] and "name Carol Sun is Carol Sun's" in by_name["why_unmatched"]
    agree = one(("Bobby", "222", "BOB@uni.edu"))  # a nickname the roster lacks: no conflict
    assert agree["matched"] and agree["matched_by"] == "Gradescope SID 222"
    group = one(("Carol Sun", "333", "carol@uni.edu"), ("Mallory Evil", "222", "mallory@uni.edu"))
    assert group["matched"] and group["student_id"] == "333"
    (member,) = group["others"]
    assert not member.get("matched") and "SID 222 is Bob Good's" in member["why_unmatched"]
    match = gs.match_of({"Carol Sun": group})
    assert {s.name for s in match.without_submission} == {"Bob Good", "Mallory Evil"}
    # the group's first submitter the one whose ids conflict: the matched member's row
    first = one(("Mallory Evil", "222", "mallory@uni.edu"), ("Carol Sun", "333", "carol@uni.edu"))
    assert first["matched"] and first["student_id"] == "333"
    assert [(o["name"], o.get("matched")) for o in first["others"]] == [("Mallory Evil", False)]
    match = gs.match_of({"Mallory Evil": first})
    assert {s.name for s in match.without_submission} == {"Bob Good", "Mallory Evil"}
    # the unmatched row is no LMS person of Bob's (a later grade would take it for his
    # newer submission and drop his row)
    assert lms_person(wrong) is None and lms_person(one(("Bob Good", "222", ""))) is not None
    # a SID and an e-mail that agree outweigh a display name that is another student's
    assert one(("Bob Good", "111", "mallory@uni.edu"))["student_id"] == "111"
    # an account no id of the roster names, with a classmate's display name: no one's (it
    # was Bob's by the name alone, his grade her notebook's), saying what speaks against
    posing = one(("Bob Good", "999", "mallory@elsewhere.org"))
    assert not posing["matched"] and lms_person(posing) is None, posing
    why = posing["why_unmatched"]
    assert "SID '999' is not Bob Good's ('222')" in why and "e-mail 'mallory@elsewhere.org'" in why
    assert one(("Bob Good", "", ""))["matched"], "a name alone, nothing against it"
    # a group whose first submitter no roster names: its matched member has a submission
    # (she was listed without one, yet her grade was exported)
    group = one(("Zed Unknown", "", "zed@elsewhere.org"), ("Carol Sun", "333", "carol@uni.edu"))
    match = gs.match_of({"Zed Unknown": group})
    assert "Carol Sun" not in {s.name for s in match.without_submission}, match


def test_a_gradescope_name_with_its_own_shared_sid_is_that_students(tmp_path):
    """The name-only rule's other side: the roster gives two students one SID (a typo in
    the roster), so the SID names no one, and the name names Bob; the submitter's SID is
    Bob's own (written otherwise: spaces, case), so nothing speaks against the name and
    the row is Bob's. A SID that is not his still refuses it."""
    gs = _roster(
        tmp_path,
        "First Name,Last Name,SID,Email,Role\nBob,Good,A222,bob@uni.edu,Student\n"
        "Dan,Twin,A222,dan@uni.edu,Student\n",
        "gs.csv",
    )

    def one(name, sid, email):
        lms = {"lms": "gradescope", "submitters": [{"name": name, "sid": sid, "email": email}]}
        return resolve(_found(name, lms), gs, lab="lab1")

    same = one("Bob Good", " a222 ", "")
    assert same["matched"] and same["email"] == "bob@uni.edu", same
    assert same["matched_by"].startswith("Gradescope name"), same
    other = one("Bob Good", "B999", "")
    assert (
        not other["matched"] and "SID 'B999' is not Bob Good's ('A222')" in other["why_unmatched"]
    )


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


# A team assignment's grading worksheet: its Group column names each student's group as
# Moodle names the group's download folder. Participant 42 (Frank) shares his number with
# the id of the group "Team_Rocket ⚡"; the group names are hostile on purpose.
TEAM_SHEET = """Identifier,Full name,Email address,Status,Group,Grade,Maximum Grade,Grade can be changed,Last modified (submission),Last modified (grade),Feedback comments
Participant 7300000,Emma Anderson,emma@uni.example,Submitted for grading,Team_Rocket ⚡,,23.00,Yes,"Friday, 20 November 2026, 10:59 PM",-,
Participant 7300017,José Núñez,jose@uni.example,Submitted for grading,Team_Rocket ⚡,,23.00,Yes,"Saturday, 21 November 2026, 9:00 AM",-,
Participant 42,Frank Roe,frank@uni.example,Submitted for grading,R&D-Erin Doe,,23.00,Yes,-,-,
Participant 7300034,Erin Doe,erin@uni.example,Submitted for grading,Default group,,23.00,Yes,-,-,
Participant 7300051,Gina Poe,gina@uni.example,Submitted for grading,Default group,,23.00,Yes,-,-,
Participant 7300068,Hal Poe,hal@uni.example,Submitted for grading,Emma Anderson,,23.00,Yes,-,-,
"""


def _moodle(folder: str, roster, **kw) -> dict:
    from lablib.grading.lms import moodle_name

    lms = moodle_name(folder)
    return resolve(
        _found(lms["name"], lms, where=f"{folder}/lab1.ipynb", folder=folder), roster, **kw
    )


def test_a_moodle_team_folder_is_each_members(tmp_path):
    sheet = _roster(tmp_path, TEAM_SHEET)
    assert [s.group for s in sheet.students][:3] == [
        "Team_Rocket ⚡",
        "Team_Rocket ⚡",
        "R&D-Erin Doe",
    ]
    team = _moodle("Team Rocket ⚡_42_assignsubmission_file", sheet, lab="lab1")
    assert team["matched"] and team["email"] == "emma@uni.example"
    assert [o["email"] for o in team["others"]] == ["jose@uni.example"]
    assert all(o["matched"] for o in team["others"]), "each member is the roster's student"
    assert team["matched_by"].startswith("Moodle group 'Team_Rocket ⚡' (group id 42)")
    assert team["lms"]["group_id"] == "42" and team["lms"]["participant_id"] == ""
    assert team["submitted_at"].startswith("2026-11-20T22:59"), "the worksheet's time"
    # format_string's "&amp;", a "-" in the name that looks like a member's copy of Erin's
    rnd = _moodle("Ramp;D-Erin Doe_9_assignsubmission_file", sheet)
    assert rnd["email"] == "frank@uni.example" and rnd["others"] == []
    default = _moodle("Default group_assignsubmission_file", sheet)
    assert [default["email"], *(o["email"] for o in default["others"])] == [
        "erin@uni.example",
        "gina@uni.example",
    ]
    # a group named like a student is its members', not that student's
    hal = _moodle("Emma Anderson_77_assignsubmission_file", sheet)
    assert hal["email"] == "hal@uni.example" and hal["others"] == []
    match = sheet.match_of({"team": team, "rnd": rnd, "default": default, "hal": hal})
    assert match.unmatched == () and match.without_submission == ()


def test_a_moodle_members_copy_is_theirs_in_their_group(tmp_path):
    """locallib.php before Moodle 4.1: one copy per member, ``<group>-<Full name>_<participant
    id>``; the group it names must be the member's."""
    sheet = _roster(tmp_path, TEAM_SHEET)
    jose = _moodle("Team Rocket ⚡-José Núñez_7300017_assignsubmission_file_", sheet)
    assert jose["email"] == "jose@uni.example" and jose["others"] == []
    assert jose["matched_by"] == "Moodle participant id 7300017 (group Team Rocket ⚡'s copy)"
    wrong = _moodle("Default group-José Núñez_7300017_assignsubmission_file_", sheet)
    assert (
        not wrong["matched"] and "7300017 is José Núñez's participant id" in wrong["why_unmatched"]
    )
    assert wrong["participant_id"] == "", "a number the roster gives another is not kept"
    # without a group column: the participant id, the group unchecked
    plain = _roster(tmp_path, WORKSHEET, "plain.csv")
    emma = _moodle("Team 3-Emma Anderson_7300000_assignsubmission_file_", plain)
    assert emma["email"] == "emma@uni.example" and emma["matched_by"].startswith(
        "Moodle participant id 7300000"
    )


def test_unmatched_moodle_teams_say_why(tmp_path):
    sheet = _roster(tmp_path, TEAM_SHEET)
    # the folder is both Emma's own (her participant id) and the group "Emma Anderson"'s,
    # a group she is in with Hal: her own or the group's, lablib does not guess
    shared = _roster(
        tmp_path,
        TEAM_SHEET.replace('Team_Rocket ⚡,,23.00,Yes,"Friday', 'Emma Anderson,,23.00,Yes,"Friday'),
        "shared.csv",
    )
    both = _moodle("Emma Anderson_7300000_assignsubmission_file", shared)
    assert not both["matched"] and "does not guess" in both["why_unmatched"]
    nobody = _moodle("Nobody_5_assignsubmission_file", sheet)
    assert not nobody["matched"] and nobody["key"] == "Nobody_5"
    assert nobody["participant_id"] == "" and nobody["lms"]["participant_id"] == "5", (
        "the download's own words kept, for another roster to decide"
    )
    assert "'Nobody_5'" in nobody["why_unmatched"] and "'Team_Rocket ⚡'" in nobody["why_unmatched"]
    assert "Group column" in nobody["why_unmatched"]
    match = shared.match_of({"both": both, "nobody": nobody})
    assert match.unmatched == ("both", "nobody") and "Group column" in match.reasons["nobody"]
    alike = _roster(
        tmp_path,
        "student_id,name,group\nS1,Ann,Team_A\nS2,Bob,Team A\nS3,Cy,Team A\n",
        "alike.csv",
    )
    got = _moodle("Team A_5_assignsubmission_file", alike)
    assert (
        not got["matched"]
        and "'Team_A', 'Team A' are all written 'Team A'" in (got["why_unmatched"])
    )


def test_without_groups_a_team_folder_claims_no_one(tmp_path):
    """A worksheet without a Group column: a team folder whose group id is some student's
    participant id is not that student's, and says what to give instead."""
    plain = _roster(tmp_path, WORKSHEET)
    got = _moodle("Team Rocket_7300017_assignsubmission_file", plain)
    assert (
        not got["matched"] and got["participant_id"] == "" and got["key"] == "Team Rocket_7300017"
    )
    assert "7300017 is the participant id of José Núñez" in got["why_unmatched"]
    assert "Group column" in got["why_unmatched"]
    default = _moodle("Default group_assignsubmission_file", plain)
    assert not default["matched"] and "gives no student a group" in default["why_unmatched"]
    stranger = _moodle("Zed Zed_999_assignsubmission_file", plain)
    assert not stranger["matched"] and stranger["participant_id"] == "999"
    assert "999 is not in the roster's Identifier column" in stranger["why_unmatched"]
    # lablib's own roster with a group column: the same rules
    ours = _roster(
        tmp_path,
        "student_id,name,email,group\nS1,Ann,ann@x.edu,Team Rocket\nS2,Bob,bob@x.edu,Team Rocket\n",
        "ours.csv",
    )
    team = _moodle("Team Rocket_7300017_assignsubmission_file", ours)
    assert team["student_id"] == "S1" and [o["student_id"] for o in team["others"]] == ["S2"]


def test_hostile_group_names_match_as_moodle_writes_them(tmp_path):
    """Group names are student or teacher text: Moodle drops "/" and control characters
    from the folder's name and keeps a bidi override, which lablib shows as "?"."""
    ours = _roster(
        tmp_path,
        "student_id,name,group\nS1,Ann,A/B\x07 \u202eC\nS2,Bob,A/B\x07 \u202eC\nS3,Cy,Other\n",
        "hostile.csv",
    )
    team = _moodle("AB \u202eC_5_assignsubmission_file", ours)
    assert team["student_id"] == "S1" and [o["student_id"] for o in team["others"]] == ["S2"]
    assert (
        team["matched_by"]
        == "Moodle group 'A_B? ?C' (group id 5), 2 member(s) in the roster's group column"
    )
    lost = _moodle("A?B_5_assignsubmission_file", ours)
    assert not lost["matched"] and "\u202e" not in lost["why_unmatched"]


def test_the_lms_person_of_a_moodle_team_is_its_group(tmp_path):
    """A later download's folder replaces the row of the same LMS person: a team's is its
    group (by id; the Default group by name), never the participant its group id equals."""
    from lablib.grading.grade import _lms_person

    sheet = _roster(tmp_path, TEAM_SHEET)
    team = _moodle("Team Rocket ⚡_42_assignsubmission_file", sheet)
    assert _lms_person(team) == ("moodle", "group 42")
    default = _moodle("Default group_assignsubmission_file", sheet)
    assert _lms_person(default) == ("moodle", "group default group")
    assert _lms_person(_moodle("Frank Roe_42_assignsubmission_file", sheet)) == ("moodle", "42")
    doubted = _moodle("Team Rocket_7300017_assignsubmission_file", _roster(tmp_path, WORKSHEET))
    assert _lms_person(doubted) is None, "not José's, though his participant id"
    stranger = _moodle("Zed Zed_999_assignsubmission_file", _roster(tmp_path, WORKSHEET))
    assert _lms_person(stranger) == ("moodle", "999"), "an unknown student's own: kept"


@pytest.mark.parametrize("column", ["group", "team", "group name"])
def test_a_group_column_leaves_a_students_own_moodle_folder_to_the_name_rules(tmp_path, column):
    """Only a folder named as one of the roster's groups is a team's: a student's own
    folder of an individual assignment is matched by name as without the column."""
    ours = _roster(
        tmp_path,
        f"student_id,name,email,{column}\nS1,Alice Smith,a@x.edu,Red\nS2,Bob Jones,b@x.edu,Red\n",
    )
    alice = _moodle("Alice Smith_7300001_assignsubmission_file", ours)
    assert alice["matched"] and alice["student_id"] == "S1" and alice["others"] == []
    assert alice["matched_by"] == "Moodle name Alice Smith"
    assert "why_unmatched" not in alice
    red = _moodle("Red_55_assignsubmission_file", ours)
    assert [red["student_id"], *(o["student_id"] for o in red["others"])] == ["S1", "S2"]
    # a member's copy (before Moodle 4.1) is a student's only in their own group
    wrong = _moodle("Blue-Alice Smith_77_assignsubmission_file", ours)
    assert (
        not wrong["matched"]
        and "not the folder of any of the roster's groups" in (wrong["why_unmatched"])
    )
    assert wrong["participant_id"] == "", "maybe a group's id: not kept as a participant's"
    copy = _moodle("Red-Alice Smith_77_assignsubmission_file", ours)
    assert copy["student_id"] == "S1" and copy["others"] == []


def test_moodle_groups_are_told_apart_by_their_exact_name(tmp_path):
    """ "Team Red" and "team  red" are two Moodle groups, and Moodle keeps case and
    spacing in their folders' names: each folder is its own group's; a folder that only
    folded is like both is neither's, never both teams' (each would get the other's
    grade)."""
    ours = _roster(
        tmp_path,
        "student_id,name,group\nS1,Ann,Team Red\nS2,Bob,Team Red\nS3,Mal,team  red\n"
        f"S4,Eve,{unicodedata.normalize('NFD', 'Équipe')}\nS5,Dan,Équipe\n",
    )
    red = _moodle("Team Red_5_assignsubmission_file", ours)
    assert [red["student_id"], *(o["student_id"] for o in red["others"])] == ["S1", "S2"]
    mal = _moodle("team  red_9_assignsubmission_file", ours)
    assert mal["student_id"] == "S3" and mal["others"] == []
    for folder in ("TEAM RED_6_assignsubmission_file", "team red_7_assignsubmission_file"):
        got = _moodle(folder, ours)
        assert not got["matched"] and got["others"] == []
        assert (
            "the roster's groups 'Team Red', 'team  red' are all written" in (got["why_unmatched"])
        )
    # no group written exactly so: the folded comparison, one group
    low = _roster(tmp_path, "student_id,name,group\nS1,Ann,Team Red\nS2,Bob,Blue\n", "low.csv")
    assert _moodle("team red_5_assignsubmission_file", low)["student_id"] == "S1"
    same = _moodle("Équipe_3_assignsubmission_file", ours)
    assert [same["student_id"], *(o["student_id"] for o in same["others"])] == ["S4", "S5"], (
        "one group, its name in NFD and NFC"
    )


def test_a_blind_worksheets_team_folder_is_its_groups(tmp_path):
    """A worksheet of anonymous submissions has no full names: a team folder whose group
    id equals a participant id cannot be told to be that student's own by its name, and
    is its group's (renaming the group could not change that)."""
    blind = _roster(
        tmp_path,
        "Identifier,Status,Group,Grade\nParticipant 42,Submitted,Team 1,\n"
        "Participant 7300001,Submitted,Team 1,\nParticipant 7300002,Submitted,Team 2,\n",
    )
    team = _moodle("Team 1_42_assignsubmission_file", blind)
    assert team["matched"] and team["participant_id"] == "42"
    assert [o["participant_id"] for o in team["others"]] == ["7300001"]
    assert team["lms"]["group_id"] == "42" and team["lms"]["participant_id"] == ""
    own = _moodle("Participant_7300002_assignsubmission_file", blind)
    assert own["matched"] and own["participant_id"] == "7300002"
    # a named student's own folder that is also her group's: the message names the student
    sheet = _roster(
        tmp_path,
        TEAM_SHEET.replace('Team_Rocket ⚡,,23.00,Yes,"Friday', 'Emma Anderson,,23.00,Yes,"Friday'),
        "sheet.csv",
    )
    both = _moodle("Emma Anderson_7300000_assignsubmission_file", sheet)
    assert both["why_unmatched"].startswith(
        "Moodle's folder 'Emma Anderson_7300000' is named as Emma Anderson, whose participant "
        "id is 7300000, and as Emma Anderson's own group 'Emma Anderson', which has other members"
    )
    assert "submission column" in both["why_unmatched"]


def test_a_group_folder_is_its_groups_as_moodle_41_writes_it(tmp_path):
    """Moodle 4.1 writes a group's folder through format_string ("R&D" is "Ramp;D"), the
    copies per member before 4.1 the name as it is ("RD"): the honest group "RD" keeps
    its folder."""
    ours = _roster(
        tmp_path,
        "student_id,name,group,Identifier\nS1,Ann,R&D,Participant 101\nS2,Bob,RD,Participant 102\n",
    )
    rd = _moodle("RD_5_assignsubmission_file", ours)
    assert rd["student_id"] == "S2" and rd["others"] == []
    rnd = _moodle("Ramp;D_6_assignsubmission_file", ours)
    assert rnd["student_id"] == "S1" and rnd["others"] == []
    ann = _moodle("RD-Ann_101_assignsubmission_file_", ours)
    assert ann["student_id"] == "S1" and ann["matched_by"].endswith("(group RD's copy)")
    bob = _moodle("RD-Bob_102_assignsubmission_file_", ours)
    assert bob["student_id"] == "S2"


def test_a_regrade_keeps_no_identity_the_new_resolution_refuses(tmp_path):
    """An earlier version gave the team folder "Team 1_42" to the student whose
    participant id is 42; graded again, the new resolution (unmatched, with why) stands.
    A notebook given by its path, with nothing of its own to go by, keeps its student."""
    from lablib.grading.grade import _merged
    from lablib.grading.results import PieceScore, Status, SubmissionResult

    sheet = _roster(tmp_path, WORKSHEET.replace("7300017", "42"))
    folder = "Team 1_42_assignsubmission_file"
    path = tmp_path / folder / "lab1.ipynb"

    def result(identity):
        r = SubmissionResult(
            "Team 1", str(path), Status(), 5.0, 10.0, {"f": PieceScore(5.0, 10.0)}, []
        )
        r.identity = identity
        return r

    new = _moodle(folder, sheet)
    assert not new["matched"] and "42 is the participant id of José Núñez" in new["why_unmatched"]
    old = new | {
        "matched": True,
        "matched_by": "Moodle participant id 42",
        "email": "jose@uni.example",
    }
    [merged] = _merged([result(old)], [result(new)])
    assert not merged.identity["matched"] and merged.identity["email"] == ""
    assert "42 is the participant id" in merged.identity["why_unmatched"]
    # a plain notebook given by its path: the student its row was matched to is kept
    plain = resolve(_found("lab1", path=str(path)), sheet)
    assert not plain["matched"] and "why_unmatched" not in plain
    [kept] = _merged([result(old)], [result(plain)])
    assert kept.identity["matched"] and kept.identity["email"] == "jose@uni.example"


def test_a_blind_folder_is_its_students_though_a_group_is_named_participant(tmp_path):
    """A worksheet of anonymous submissions: a student's own folder is "Participant" (or
    "<their group>-Participant", a member's copy before Moodle 4.1) with their
    participant id, theirs though some student names a group so (its id would have to be
    that participant id); refused, with why, only when that group is the student's own
    with others in it (then it may be the group's)."""
    blind = _roster(
        tmp_path,
        "Identifier,Status,Group\nParticipant 101,Submitted,G1\nParticipant 102,Submitted,G1\n"
        "Participant 103,Submitted,Participant\nParticipant 104,Submitted,Participant\n",
    )
    for n in ("101", "102"):
        got = _moodle(f"Participant_{n}_assignsubmission_file", blind)
        assert got["participant_id"] == n and got["others"] == []
        assert got["matched_by"] == f"Moodle participant id {n}"
    for n in ("103", "104"):
        got = _moodle(f"Participant_{n}_assignsubmission_file", blind)
        assert not got["matched"] and got["others"] == [] and got["participant_id"] == ""
        assert got["why_unmatched"].startswith(
            f"Moodle's folder 'Participant_{n}' is named as the anonymous submission of "
            f"participant {n} (the roster gives no full name), and as participant {n}'s own "
            f"group 'Participant', which has other members: it may be participant {n}'s own "
            f"or the whole group's; lablib does not guess"
        )
        assert "rename the group in Moodle" in got["why_unmatched"]
    # the group's own folder (its id no participant's) is the group's
    group = _moodle("Participant_55_assignsubmission_file", blind)
    assert [group["participant_id"], *(o["participant_id"] for o in group["others"])] == [
        "103",
        "104",
    ]
    g1 = _moodle("G1_56_assignsubmission_file", blind)
    assert [g1["participant_id"], *(o["participant_id"] for o in g1["others"])] == ["101", "102"]
    # alone in the group named so: hers either way
    alone = _roster(
        tmp_path,
        "Identifier,Status,Group\nParticipant 101,Submitted,G1\nParticipant 103,Submitted,Participant\n",
        "alone.csv",
    )
    assert _moodle("Participant_103_assignsubmission_file", alone)["participant_id"] == "103"
    # copies per member before 4.1, a group named "<group>-Participant"
    copies = _roster(
        tmp_path,
        "Identifier,Status,Group\nParticipant 101,Submitted,Team Red\n"
        "Participant 102,Submitted,Team Red\nParticipant 103,Submitted,Team Red-Participant\n",
        "copies.csv",
    )
    for n in ("101", "102"):
        got = _moodle(f"Team Red-Participant_{n}_assignsubmission_file_", copies)
        assert got["participant_id"] == n and got["others"] == []
        assert got["matched_by"].endswith("(group Team Red's copy)")
    plain = _roster(
        tmp_path,
        "Identifier,Status,Group\nParticipant 101,Submitted,Team Red\n"
        "Participant 102,Submitted,Team Red\n",
        "plain.csv",
    )
    own = _moodle("Team Red-Participant_101_assignsubmission_file_", plain)
    assert own["participant_id"] == "101" and own["matched_by"].endswith("(group Team Red's copy)")
    assert _moodle("Participant_102_assignsubmission_file", plain)["participant_id"] == "102"


def test_a_student_without_a_name_owns_the_folder_with_their_participant_id(tmp_path):
    """A roster that gives a student no full name (a blind worksheet, a roster of ids):
    nothing to compare, so a folder with their participant id is theirs whatever its
    name (Moodle's "Participant" in another language too), unless it is written exactly
    as a roster group's: then the group's."""
    ids = Roster([Student("S1", "", email="alice@uni.edu", participant_id="7300001")])
    alice = _moodle("Alice Smith_7300001_assignsubmission_file", ids)
    assert alice["student_id"] == "S1" and alice["matched_by"] == "Moodle participant id 7300001"
    blind = _roster(
        tmp_path,
        "Identifier,Status,Group\nParticipant 101,Submitted,G1\nParticipant 102,Submitted,G1\n"
        "Participant 103,Submitted,Team Red\n",
    )
    for folder in ("Teilnehmerin_101", "Zed_101", "TEAM RED_101"):  # the last only folded
        got = _moodle(f"{folder}_assignsubmission_file", blind)
        assert got["participant_id"] == "101" and got["others"] == [], folder
    team = _moodle("Team Red_101_assignsubmission_file", blind)  # exactly the group's
    assert team["participant_id"] == "103" and team["lms"]["group_id"] == "101"


def test_a_folder_not_a_named_students_says_what_was_expected(tmp_path):
    """A named student's participant id on a folder not named as them: the message says
    the folder names that were expected and what to do with the roster given."""
    sheet = _roster(tmp_path, WORKSHEET)
    got = _moodle("Alice Smith_7300017_assignsubmission_file", sheet)
    why = got["why_unmatched"]
    assert not got["matched"] and why.startswith(
        "Moodle's folder 'Alice Smith_7300017': 7300017 is the participant id of José Núñez in "
        "the roster, but José Núñez's own folder is 'José Núñez_7300017' or "
        "'Participant_7300017'"
    )
    assert "not 'Alice Smith'" in why and "another assignment's grading worksheet, give" in why
    teams = _roster(tmp_path, TEAM_SHEET, "teams.csv")
    got = _moodle("Alice Smith_7300017_assignsubmission_file", teams)
    assert (
        "not José Núñez's own: 7300017 is José Núñez's participant id, but" in got["why_unmatched"]
    )
    assert "'José Núñez_7300017' or 'Participant_7300017'" in got["why_unmatched"]


#: A team assignment's worksheet where a student named a group "Default group": it writes
#: "Default group" for that group's member (Mal) and for the students in no group alike.
DEFAULT_SHEET = """Identifier,Full name,Email address,Status,Group
Participant 101,Ann Ames,ann@uni.edu,Submitted,Default group
Participant 102,Ben Bell,ben@uni.edu,Submitted,Default group
Participant 103,Mal Moe,mal@uni.edu,Submitted,Default group
Participant 104,Tom Tay,tom@uni.edu,Submitted,Team Red
"""


def test_a_group_named_default_group_takes_no_ones_folder(tmp_path):
    sheet = _roster(tmp_path, DEFAULT_SHEET)
    folders = [
        "Default group_assignsubmission_file",
        "Default group_55_assignsubmission_file",
        "Team Red_56_assignsubmission_file",
    ]
    found = [
        _found(moodle_name(f)["name"] + str(i), moodle_name(f), f"{f}/lab1.ipynb", f)
        for i, f in enumerate(folders)
    ]
    default, named, red = resolve_all(found, sheet).values()
    assert not named["matched"] and named["others"] == [] and named["participant_id"] == ""
    assert (
        "a group named 'Default group' (Moodle writes no id for its own Default group)"
        in (named["why_unmatched"])
    )
    assert "rename that group in Moodle" in named["why_unmatched"]
    assert not default["matched"] and default["others"] == []
    assert (
        "this download also has 'Default group_55', a group named like it"
        in (default["why_unmatched"])
    )
    assert red["email"] == "tom@uni.edu"
    # one folder at a time: the numbered one is refused all the same
    assert not _moodle("Default group_55_assignsubmission_file", sheet)["matched"]
    # a download without such a group: the Default group's folder is its students'
    honest = resolve_all([found[0], found[2]], sheet)
    got = honest[found[0].name]
    assert [got["email"], *(o["email"] for o in got["others"])] == [
        "ann@uni.edu",
        "ben@uni.edu",
        "mal@uni.edu",
    ]


def test_a_kept_default_group_row_is_resolved_again_when_a_group_is_named_so(tmp_path):
    """A regrade that grades a numbered "Default group" folder: the kept row of the
    Default group's own folder, matched before, is resolved again and refused."""
    from lablib.grading.grade import _identify, _reidentify
    from lablib.grading.gradebook.identity import RosterIndex
    from lablib.grading.results import PieceScore, Status, SubmissionResult

    sheet = _roster(tmp_path, DEFAULT_SHEET)
    folder = "Default group_assignsubmission_file"
    kept = SubmissionResult(
        "Default group",
        str(tmp_path / folder / "lab1.ipynb"),
        Status(),
        5.0,
        10.0,
        {"f": PieceScore(5.0, 10.0)},
        [],
    )
    kept.identity = _identify(
        _found("Default group", moodle_name(folder), f"{folder}/lab1.ipynb", folder),
        sheet,
        None,
        "lab1",
    )
    assert kept.identity["matched"]
    index = RosterIndex(sheet)
    index.note([moodle_name("Default group_55_assignsubmission_file")])
    _reidentify([kept], sheet, None, "lab1", new_roster=False, index=index)
    assert (
        not kept.identity["matched"] and "a group named like it" in kept.identity["why_unmatched"]
    )


def test_a_gradebook_written_before_the_default_group_rule_is_resolved_again(tmp_path):
    """A gradebook written before a group named "Default group" was refused kept its
    numbered folder matched as that group's (the number as its group id, no participant
    id), the Default group's folder matched too: a regrade without a new roster (the
    kept one; nothing new graded) resolves both again, and both are refused."""
    from lablib.grading.grade import _identify, _reidentify, _roster_index
    from lablib.grading.results import PieceScore, Status, SubmissionResult

    sheet = _roster(tmp_path, DEFAULT_SHEET)

    def kept(name, folder):
        path = str(tmp_path / folder / "lab1.ipynb")
        r = SubmissionResult(name, path, Status(), 5.0, 10.0, {"f": PieceScore(5.0, 10.0)}, [])
        # as that version stored it: the Default group's members, the number a group id
        own = "Default group_assignsubmission_file"
        r.identity = _identify(
            _found(name, moodle_name(own), f"{folder}/lab1.ipynb", folder), sheet, None, "lab1"
        )
        if "_55_" in folder:
            r.identity["lms"]["group_id"] = "55"
        return r

    rows = [
        kept("Default group", "Default group_assignsubmission_file"),
        kept("Default group_55", "Default group_55_assignsubmission_file"),
    ]
    assert all(r.identity["matched"] and len(r.identity["others"]) == 2 for r in rows)
    index = _roster_index(sheet, [], rows)
    assert index.names_default(rows[1].identity["lms"]) == "Default group_55"
    _reidentify(rows, sheet, None, "lab1", new_roster=False, index=index)
    default, named = (r.identity for r in rows)
    assert not default["matched"] and default["others"] == []
    assert (
        "but the kept gradebook also has 'Default group_55', a group named like it"
        in default["why_unmatched"]
    )
    assert not named["matched"] and named["others"] == []
    assert "a group named 'Default group'" in named["why_unmatched"]


def test_a_students_exact_name_and_participant_id_beat_a_group_named_so(tmp_path):
    """A group named as a student ("Ann A", exactly or only folded) does not block that
    student's own folder: its id would have to be her participant id."""
    for group in ("Ann A", "ann  a"):
        ours = _roster(
            tmp_path,
            f"Identifier,Full name,Group\nParticipant 101,Ann A,G\nParticipant 103,Mal M,{group}\n",
            "ann.csv",
        )
        ann = _moodle("Ann A_101_assignsubmission_file", ours)
        assert ann["participant_id"] == "101" and ann["others"] == []
        assert ann["matched_by"] == "Moodle participant id 101"
        # the group's folder (its own id) is still the group's
        mal = _moodle(f"{group}_77_assignsubmission_file", ours)
        assert mal["participant_id"] == "103"
    # only folded like her name, exactly the group's: the group's
    ours = _roster(
        tmp_path,
        "Identifier,Full name,Group\nParticipant 101,Ann A,G\nParticipant 103,Mal M,ANN A\n",
        "caps.csv",
    )
    got = _moodle("ANN A_101_assignsubmission_file", ours)
    assert got["participant_id"] == "103" and got["lms"]["group_id"] == "101"
    # her group named as her, alone in it: hers either way
    alone = _roster(
        tmp_path, "Identifier,Full name,Group\nParticipant 101,Ann A,Ann A\n", "alone.csv"
    )
    assert _moodle("Ann A_101_assignsubmission_file", alone)["participant_id"] == "101"


# Students who chose sortable names Canvas writes with "_<digits>" (where an account lets
# students edit their names): Canvas collapses "_<digits>_" in a name, not a final "_1002".
CANVAS_DIGITS = """Student,ID,SIS User ID,SIS Login ID,Section
"Doe, Erin",1001,S001,erin,A
"Roe, Frank",1002,S002,frank,A
Mallory_1002,1005,S005,mallory,A
"""


def _canvas_files(tmp_path, *names) -> dict:
    """Canvas download files (empty notebooks) as find_submissions finds them, by name."""
    from lablib.grading.submissions import find_submissions

    subs = tmp_path / f"canvas-download-{len(list(tmp_path.glob('canvas-download-*')))}"
    subs.mkdir()
    for name in names:
        (subs / name).write_text("{}")
    return {f.where: f for f in find_submissions([subs], refused=[])}


def _result(found, identity):
    from lablib.grading.results import SubmissionResult, Status

    r = SubmissionResult(found.name, str(found.path), Status(), 1.0, 10.0, {}, [])
    r.identity = identity
    return r


def test_a_canvas_name_ending_in_digits_takes_no_other_students_user_id(tmp_path):
    """Mallory (user 1005), named "Mallory_1002", gets mallory_1002_1005_9000005_lab.ipynb,
    which also reads as user 1002 (Frank) named "mallory": the reading whose user id is
    the roster's student of that name is taken, hers; a regrade of her file alone keeps
    Frank's row; without a roster no reading is taken."""
    from lablib.grading.grade import _lms_person, _replaced

    canvas = _roster(tmp_path, CANVAS_DIGITS)
    files = _canvas_files(
        tmp_path, "roefrank_1002_9000002_lab.ipynb", "mallory_1002_1005_9000005_lab.ipynb"
    )
    spoof, own = (
        files["mallory_1002_1005_9000005_lab.ipynb"],
        files["roefrank_1002_9000002_lab.ipynb"],
    )
    mallory, frank = resolve(spoof, canvas), resolve(own, canvas)
    assert mallory["student_id"] == "S005" and mallory["lms"]["user_id"] == "1005"
    assert "1 other reading(s) refused" in mallory["matched_by"]
    assert frank["student_id"] == "S002" and frank["matched_by"] == "Canvas user id 1002"
    kept, now = _result(own, frank), _result(spoof, mallory)
    assert _replaced([kept, now], {id(now)}) == [kept, now], "Frank's row is not replaced"
    alone = resolve(spoof)
    assert not alone["matched"] and alone["lms_id"] == "" and _lms_person(alone) is None
    assert "user id 1002" in alone["why_unmatched"] and "user id 1005" in alone["why_unmatched"]
    assert "mallory_1002_1005_9000005_lab.ipynb" in alone["why_unmatched"]
    # two readings that each agree with the roster: no one's, with why
    both = _roster(tmp_path, CANVAS_DIGITS.replace('"Roe, Frank",1002', "Mallory,1002"), "both.csv")
    got = resolve(spoof, both)
    assert not got["matched"] and got["lms_id"] == "" and "More than one" in got["why_unmatched"]
    assert both.match_of({"mallory": got}).reasons["mallory"] == got["why_unmatched"]


def test_a_late_marker_in_any_reading_of_a_canvas_name_counts(tmp_path):
    """ "Mallory_1005-_000" is written mallory_1005_000 (the "-" removed after "_<digits>_"
    is collapsed), so her late file mallory_1005_000_LATE_1005_9000006_lab.ipynb also reads
    as the same user named "mallory", not late: the LATE marker stays, and is said."""
    name = "mallory_1005_000_LATE_1005_9000006_lab.ipynb"
    (found,) = _canvas_files(tmp_path, name).values()
    assert found.lms["late"] and found.lms["late_disputed"]
    own = _roster(tmp_path, CANVAS_DIGITS.replace("Mallory_1002,", "Mallory_1005-_000,"), "o.csv")
    got = resolve(found, own)
    assert got["student_id"] == "S005" and got["lms"]["late"] is True
    assert "counted late" in got["matched_by"] and got["lms"]["attachment_id"] == "9000006"
    # no reading agrees with this roster's name for user 1005: no one's, and still late
    other = resolve(found, _roster(tmp_path, CANVAS_DIGITS))
    assert not other["matched"] and other["lms"]["late"] is True and other["lms_id"] == ""
    assert "it counts as late" in other["why_unmatched"]


def test_a_canvas_group_file_is_its_groups_or_no_ones(tmp_path):
    """A group assignment graded as a group: Canvas names each group's file after the
    group, under one member's user id. Without the roster's group column the file is no
    one's (never the member's alone, and lab_group_3 is not user 3); with it, every
    member's; a group written as its member's own name (with others in it) is refused."""
    names = ("team7_1001_9000001_lab.ipynb", "lab_group_3_1003_9000003_lab.ipynb")
    files = _canvas_files(tmp_path, *names)
    plain = _roster(
        tmp_path,
        'Student,ID,SIS User ID,SIS Login ID,Section\n"Doe, Erin",1001,S001,erin,A\n'
        '"Roe, Frank",1002,S002,frank,A\n"Poe, Gina",1003,S003,gina,A\n',
    )
    team, lab_group = (resolve(files[n], plain) for n in names)
    assert not team["matched"] and team["lms_id"] == "" and team["key"] == "team7_1001"
    assert "In a group assignment" in team["why_unmatched"] and "'team7'" in team["why_unmatched"]
    assert not lab_group["matched"] and lab_group["lms_id"] == "" and lab_group["key"] != "3"
    assert "no student of the roster has Canvas user id 3" in lab_group["why_unmatched"]
    match = plain.match_of({"team7": team, "lab_group": lab_group})
    assert match.unmatched == ("team7", "lab_group") and len(match.without_submission) == 3
    grouped = _roster(
        tmp_path,
        'Student,ID,SIS User ID,SIS Login ID,Section,group\n"Doe, Erin",1001,S001,erin,A,Team 7\n'
        '"Roe, Frank",1002,S002,frank,A,Team 7\n"Poe, Gina",1003,S003,gina,A,lab_group_3\n',
        "grouped.csv",
    )
    team, lab_group = (resolve(files[n], grouped) for n in names)
    assert team["student_id"] == "S001" and [o["student_id"] for o in team["others"]] == ["S002"]
    assert team["matched_by"].startswith("Canvas group 'Team 7' (its file, under user id 1001)")
    assert lab_group["student_id"] == "S003" and lab_group["lms"]["user_id"] == "1003"
    assert grouped.match_of({"t": team, "g": lab_group}).without_submission == ()
    alike = _roster(
        tmp_path,
        'Student,ID,group\n"Doe, Erin",1001,"Doe, Erin"\n"Roe, Frank",1002,"Doe, Erin"\n',
        "alike.csv",
    )
    (erin,) = _canvas_files(tmp_path, "doeerin_1001_9000009_lab.ipynb").values()
    got = resolve(erin, alike)
    assert not got["matched"] and "their own file or the group's" in got["why_unmatched"]


MOODLE_GRADES_3 = """First name,Last name,ID number,Email address
Erin,Doe,S001,erin@uni.edu
Frank,Roe,S002,frank@uni.edu
Mallory,Moe,S005,mallory@uni.edu
"""


def test_a_students_own_file_names_never_name_another_student(tmp_path):
    """In an LMS download only what the LMS wrote names the student: Mallory's frank.ipynb
    (or erin/lab.ipynb) in her Moodle folder is hers, not Frank's by his e-mail's local
    part; in a Gradescope folder whose submitters the roster lacks, no one's."""
    from lablib.grading.submissions import find_submissions

    subs = tmp_path / "moodle"
    folder = subs / "Mallory Moe_7300005_assignsubmission_file"
    for name in ("lab.ipynb", "frank.ipynb", "erin/lab.ipynb"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("{}")
    grades = _roster(tmp_path, MOODLE_GRADES_3)
    found = find_submissions([subs], refused=[])
    got = resolve_all(found, grades)
    assert {n: i["student_id"] for n, i in got.items()} == {
        "Mallory Moe/erin/lab": "S005",
        "Mallory Moe/frank": "S005",
        "Mallory Moe/lab": "S005",
    }
    # the roster's submission column names Frank's own notebook "frank": not Mallory's
    ours = _roster(
        tmp_path,
        "student_id,name,email,submission\nS002,Frank Roe,frank@uni.edu,frank\n"
        "S005,Mallory Moe,mallory@uni.edu,\n",
        "ours.csv",
    )
    assert resolve_all(found, ours)["Mallory Moe/frank"]["student_id"] == "S005"
    export = tmp_path / "gradescope"
    (export / "submission_2").mkdir(parents=True)
    (export / "submission_2" / "frank.ipynb").write_text("{}")
    (export / "submission_metadata.yml").write_text(
        "submission_2:\n  :submitters:\n  - :name: Yan Late\n    :sid: S008\n"
        "    :email: yan@uni.edu\n"
    )
    (yan,) = find_submissions([export], refused=[])
    got = resolve(yan, grades)
    assert not got["matched"] and got["student_id"] == "S008"


def test_an_unmatched_group_member_is_kept_and_listed(tmp_path):
    """A Gradescope group's second submitter the roster lacks keeps their name, SID and
    e-mail in ``others`` and is listed with the unmatched submissions, with why."""
    gs = _roster(
        tmp_path,
        "First Name,Last Name,SID,Email,Role\nErin,Doe,S001,erin@uni.edu,Student\n"
        "Frank,Roe,S002,frank@uni.edu,Student\n",
    )
    group = {
        "lms": "gradescope",
        "submitted_at": "",
        "submitters": [
            {"name": "Erin Doe", "sid": "S001", "email": "erin@uni.edu"},
            {"name": "Zed Late", "sid": "S009", "email": "zed@uni.edu"},
        ],
    }
    got = resolve(_found("Erin Doe", group), gs)
    assert got["student_id"] == "S001"
    (zed,) = got["others"]
    assert (zed["name"], zed["student_id"], zed["email"], zed["key"]) == (
        "Zed Late",
        "S009",
        "zed@uni.edu",
        "S009",
    )
    assert not zed["matched"] and "S009" in zed["why_unmatched"]
    match = gs.match_of({"Erin Doe": got})
    assert match.unmatched == ("Erin Doe (group member Zed Late)",)
    assert match.reasons["Erin Doe (group member Zed Late)"] == zed["why_unmatched"]


def test_a_canvas_roster_of_first_and_last_names_matches_multi_word_surnames(tmp_path):
    """A Canvas gradebook exported with Last Name and First Name columns is joined as
    "First Last": Canvas's file of "van der Berg, Jan" is vanderbergjan_..., which the
    last word moved first (bergjanvander) missed; every split of the words is tried."""
    roster = _roster(
        tmp_path,
        "Last Name,First Name,ID,SIS User ID,SIS Login ID,Section\n"
        "van der Berg,Jan,1001,S001,jan,A\n"
        "García Márquez,Gabriel José,1002,S002,gabo,A\n"
        "Smith-Jones,Mary Ann,1003,S003,mary,A\n",
    )
    files = _canvas_files(
        tmp_path,
        "vanderbergjan_1001_9000001_lab.ipynb",
        "garcíamárquezgabrieljosé_1002_9000002_lab.ipynb",
        "smithjonesmaryann_LATE_1003_9000003_lab.ipynb",
    )
    got = {where.split("_")[0]: resolve(found, roster) for where, found in files.items()}
    assert {k: v["student_id"] for k, v in got.items()} == {
        "vanderbergjan": "S001",
        "garcíamárquezgabrieljosé": "S002",
        "smithjonesmaryann": "S003",
    }, {k: v.get("why_unmatched") for k, v in got.items()}


# A roster without the LMS's ids (lablib's own layout): a student with a single name
# ("Aditi", whom Canvas writes aditi) beside one whose e-mail is aditi@..., and "Kim, Min"
# (Canvas's kimmin) beside one whose login is kimmin.
DISPLAY_NAMES = """student_id,name,email,login
S20,Aditi,aditi.k@uni.edu,akumar
S21,Aditi Sharma,aditi@uni.edu,asharma
S22,"Kim, Min",mkim@uni.edu,mkim
S23,Kimmin Park,kpark@uni.edu,kimmin
"""


def test_a_canvas_name_is_compared_with_the_rosters_names_not_its_logins(tmp_path):
    """The name Canvas writes in a file is a display name: aditi_1020_... is Aditi's
    (not Aditi Sharma's, whose e-mail is aditi@...) and kimmin_1022_... is Kim, Min's
    (not Kimmin Park's, whose login is kimmin); the match says whose identifier the name
    also is. A plain notebook named by a login is still that login's."""
    roster = _roster(tmp_path, DISPLAY_NAMES)
    files = _canvas_files(tmp_path, "aditi_1020_9000020_lab.ipynb", "kimmin_1022_9000022_lab.ipynb")
    aditi = resolve(files["aditi_1020_9000020_lab.ipynb"], roster)
    kim = resolve(files["kimmin_1022_9000022_lab.ipynb"], roster)
    assert aditi["student_id"] == "S20" and aditi["matched_by"].startswith("Canvas name aditi")
    assert "Aditi Sharma's e-mail address's local part" in aditi["matched_by"]
    assert "gradebook export" in aditi["matched_by"]
    assert kim["student_id"] == "S22" and kim["matched_by"].startswith("Canvas name kimmin")
    assert "Kimmin Park's login" in kim["matched_by"]
    match = roster.match_of({"aditi": aditi, "kimmin": kim})
    assert [s.student_id for s in match.without_submission] == ["S21", "S23"]
    # not an LMS download: a notebook's stem is its student's login (rule 3)
    plain = resolve(_found("kimmin"), roster)
    assert plain["student_id"] == "S23" and plain["matched_by"] == "the name 'kimmin'"


def test_a_moodle_folders_full_name_is_compared_with_the_rosters_names_only(tmp_path):
    """Moodle's grade export has no participant ids: the folder Aditi_1020_... is the
    student named Aditi's, not Aditi Sharma's (e-mail aditi@...)."""
    from lablib.grading.submissions import find_submissions

    subs = tmp_path / "moodle"
    (subs / "Aditi_1020_assignsubmission_file_").mkdir(parents=True)
    (subs / "Aditi_1020_assignsubmission_file_" / "lab.ipynb").write_text("{}")
    grades = _roster(
        tmp_path,
        "First name,Last name,ID number,Email address\nAditi,,S20,aditi.k@uni.edu\n"
        "Aditi,Sharma,S21,aditi@uni.edu\n",
    )
    (found,) = find_submissions([subs], refused=[])
    got = resolve(found, grades)
    assert got["student_id"] == "S20" and got["matched_by"].startswith("Moodle name Aditi")
    assert "Aditi Sharma's e-mail address's local part" in got["matched_by"]
    assert "grading worksheet" in got["matched_by"]


def test_a_display_name_that_is_only_a_login_or_several_names_is_no_ones(tmp_path):
    """A name the LMS writes that no student of the roster has, but that is a student's
    login or e-mail's local part, is no one's, with why; so is a name two students have."""
    from lablib.grading.submissions import find_submissions

    roster = _roster(tmp_path, DISPLAY_NAMES)
    files = _canvas_files(tmp_path, "asharma_1021_9000021_lab.ipynb")
    got = resolve(files["asharma_1021_9000021_lab.ipynb"], roster)
    assert not got["matched"] and got["lms_id"] == "1021"
    why = got["why_unmatched"]
    assert "no student of the roster is named 'asharma'" in why and "Aditi Sharma's login" in why
    assert "gradebook export" in why and "submission column" in why
    assert roster.match_of({"asharma": got}).reasons["asharma"] == why
    subs = tmp_path / "moodle"
    (subs / "kpark_7_assignsubmission_file_").mkdir(parents=True)
    (subs / "kpark_7_assignsubmission_file_" / "lab.ipynb").write_text("{}")
    (found,) = find_submissions([subs], refused=[])
    got = resolve(found, roster)
    assert (
        not got["matched"] and "Kimmin Park's e-mail address's local part" in got["why_unmatched"]
    )
    assert "'kpark_7'" in got["why_unmatched"]
    # two students named Aditi: neither, and not the one whose e-mail is aditi@...
    two = _roster(tmp_path, DISPLAY_NAMES + "S24,Aditi,aditi.r@uni.edu,arao\n", "two.csv")
    got = resolve(_canvas_files(tmp_path, "aditi_1020_9000020_lab.ipynb").popitem()[1], two)
    assert not got["matched"] and "'aditi' is the name of 2 students" in got["why_unmatched"]
    assert "Aditi Sharma's e-mail address's local part" in got["why_unmatched"]
