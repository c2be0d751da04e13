"""The class list (--roster) and the LMS exports (lablib export canvas|moodle)."""

import csv
import json
import shutil

import pytest

from lablib.cli import main
from lablib.grading.judge import summarise
from lablib.grading.report import write_reports
from lablib.grading.results import Kind, Status, TestResult
from lablib.grading.gradebook.identity import match_roster
from lablib.grading.gradebook.roster import Roster, RosterError
from grading_paths import FIXTURE_HIDDEN, FIXTURE_LAB, FIXTURE_SOLUTION

CANVAS = """Student,ID,SIS User ID,SIS Login ID,Section,Lab 1 (101)
    Points Possible,,,,,20
"Doe, Erin",1001,S001,erin,Section A,
"Roe, Frank",1002,S002,frank,Section A,
"Poe, Gina",1003,S003,gina,Section B,
"Student, Test",1004,,,Section A,
"""
GRADESCOPE = """First Name,Last Name,SID,Email,Role,Sections
Erin,Doe,S001,erin@uni.edu,Student,A
Ian,Structor,,ian@uni.edu,Instructor,
Frank,Roe,S002,frank@uni.edu,Student,A
"""
OURS = """student_id,name,email,section,submission
S001,Erin Doe,erin@uni.edu,A,section A/team 3/erin
S002,Frank Roe,frank@uni.edu,A,section A/team 3/frank/lab1.ipynb
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_three_layouts_are_read(tmp_path):
    canvas = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    assert [s.name for s in canvas.students] == [
        "Doe, Erin",
        "Roe, Frank",
        "Poe, Gina",
    ]  # no points row, no test student
    erin = canvas.students[0]
    assert (erin.lms_id, erin.student_id, erin.login, erin.section) == (
        "1001",
        "S001",
        "erin",
        "Section A",
    )
    gradescope = Roster.load(_write(tmp_path, "gs.csv", GRADESCOPE))
    assert [s.name for s in gradescope.students] == ["Erin Doe", "Frank Roe"]  # students only
    assert gradescope.students[1].email == "frank@uni.edu"
    ours = Roster.load(_write(tmp_path, "ours.csv", OURS))
    assert ours.students[1].submission == "section A/team 3/frank/lab1.ipynb"
    with pytest.raises(
        RosterError, match=r"no column naming a student \(its header: \['x', 'y'\]\)"
    ):
        Roster.load(_write(tmp_path, "bad.csv", "x,y\n1,2\n"))
    with pytest.raises(RosterError, match="lists no student"):
        Roster.load(_write(tmp_path, "empty.csv", "student_id,name\n"))


def test_a_canvas_export_with_semicolons_is_read_as_canvas_reads_it_back(tmp_path):
    """Canvas writes its gradebook with semicolons for a user who chose "Use semicolons to
    separate fields in CSV files" (where a comma is the decimal mark), and its import reads
    them: the roster was refused as having no column naming a student."""
    semicolons = (
        "Student;ID;SIS User ID;SIS Login ID;Section;Lab 1 (101)\n"
        "    Points Possible;;;;;20,00\n"
        '"Doe, Erin";1001;S001;erin;Section A;\n'
        "Roe, Frank;1002;S002;frank;Section A;\n"
        '"Poe, Gina";1003;S003;gina;Section B;\n'
        '"Student, Test";1004;;;Section A;\n'
    )
    canvas = Roster.load(_write(tmp_path, "canvas.csv", semicolons))
    assert [(s.name, s.lms_id, s.student_id) for s in canvas.students] == [
        ("Doe, Erin", "1001", "S001"),
        ("Roe, Frank", "1002", "S002"),  # a comma unquoted in a semicolon file
        ("Poe, Gina", "1003", "S003"),
    ]
    assert canvas.points_possible == {"Lab 1 (101)": "20,00"}
    # blank lines and Excel's trailing separators on data rows change nothing
    spaced = semicolons.replace("\n", "\n\n", 1).replace("Section B;\n", "Section B;;\n")
    assert len(Roster.load(_write(tmp_path, "spaced.csv", spaced)).students) == 3
    # a roster of ours whose rows are shorter than its header stays a comma file
    ragged = Roster.load(_write(tmp_path, "ours.csv", "student_id,name,email\nS001\nS002;x\n"))
    assert [s.student_id for s in ragged.students] == ["S001", "S002;x"]


MOODLE_HEADERS = {
    "de": "ID,Vollständiger Name,E-Mail-Adresse,Status,Bewertung,Bestwertung,"
    "Bewertung kann geändert werden,Zuletzt geändert (Abgabe)",
    "fr": "Identifiant,Nom complet,Adresse de courriel,Statut,Note,Note maximale,"
    "La note peut être modifiée,Dernière modification (travail remis)",
    "es": "Identificador,Nombre completo,Dirección Email,Estatus,Calificación,"
    "Calificación máxima,La calificación puede ser cambiada,Última modificación (entrega)",
}
MOODLE_WORD = {"de": "Teilnehmer/in", "fr": "Participant ", "es": "Participante "}


@pytest.mark.parametrize("language", sorted(MOODLE_HEADERS))
def test_a_moodle_worksheet_not_in_english_is_refused_saying_so(tmp_path, language):
    """A grading worksheet from a Moodle site in German was read as a Canvas gradebook
    export (its ``ID`` as Canvas's user id: every folder unmatched, the exports garbled);
    a French or Spanish one was refused as having no column naming a student, without
    saying why. Its first column (Moodle's participant identifiers in the site's language)
    tells it: refused, naming its headers and what to do."""
    rows = "".join(
        f'{MOODLE_WORD[language]}{7300000 + k},Name {k},s{k}@u.edu,Submitted,,"23,00",Yes,-\n'
        for k in range(3)
    )
    path = _write(tmp_path, "worksheet.csv", MOODLE_HEADERS[language] + "\n" + rows)
    with pytest.raises(RosterError) as caught:
        Roster.load(path)
    said = str(caught.value)
    assert "looks like a Moodle grading worksheet from a site not in English" in said
    assert repr(MOODLE_HEADERS[language].split(",")[:3])[:-1] in said, said
    assert "switch your Moodle language to English" in said and "Identifier, Full name" in said
    # English, and rosters whose first column is a word and digits otherwise, are read
    english = "Identifier,Full name,Email address,Status\nParticipant 7300000,Ann,a@u.edu,-\n"
    assert Roster.load(_write(tmp_path, "en.csv", english)).students[0].participant_id == "7300000"
    ours = "student_id,name\nS001,Ann\nS002,Bo\n"
    assert len(Roster.load(_write(tmp_path, "ours.csv", ours))) == 2


def test_a_canvas_id_that_is_no_number_is_refused(tmp_path):
    """The ``ID`` column is Canvas's user id, a number: a roster whose ``ID`` holds other
    values (a list made by hand, another system's ids) is refused, naming the value."""
    text = CANVAS.replace('"Roe, Frank",1002', '"Roe, Frank",S-1002')
    with pytest.raises(RosterError) as caught:
        Roster.load(_write(tmp_path, "canvas.csv", text))
    said = str(caught.value)
    assert "'ID' column is read as Canvas's user id" in said, said
    assert "'Roe, Frank' has 'S-1002'" in said and "student_id" in said, said


def test_a_line_break_inside_a_name_ends_no_row(tmp_path):
    """U+0085 and U+2028 are line breaks to ``str.splitlines`` but not to CSV: a display
    name holding one split its row in two, leaving the student without an id; a quoted
    cell's own line break (a custom Notes column) was lost."""
    text = CANVAS.replace("Roe, Frank", "Roe\u2028, Frank").replace("Poe, Gina", "Poe\x85, Gina")
    text = text.replace("Section B,", 'Section B,"two\nlines"')
    canvas = Roster.load(_write(tmp_path, "canvas.csv", text))
    assert [(s.name, s.lms_id, s.section) for s in canvas.students] == [
        ("Doe, Erin", "1001", "Section A"),
        ("Roe\u2028, Frank", "1002", "Section A"),
        ("Poe\x85, Gina", "1003", "Section B"),
    ]


def test_submissions_match_by_identifier_or_by_the_submission_column(tmp_path):
    canvas = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    match = match_roster(
        canvas, [("erin", "/s/erin/lab1.ipynb"), ("S002", "/s/S002.ipynb"), ("zed", "/s/zed.ipynb")]
    )
    assert {n: s.name for n, s in match.students.items()} == {
        "erin": "Doe, Erin",
        "S002": "Roe, Frank",
    }
    assert match.unmatched == ("zed",) and [s.name for s in match.without_submission] == [
        "Poe, Gina"
    ]
    gradescope = Roster.load(_write(tmp_path, "gs.csv", GRADESCOPE))
    match = match_roster(
        gradescope,
        [("erin@uni.edu", "/s/erin@uni.edu/x.ipynb"), ("sec/frank", "/s/sec/frank/lab.ipynb")],
    )
    assert {n: s.name for n, s in match.students.items()} == {
        "erin@uni.edu": "Erin Doe",
        "sec/frank": "Frank Roe",
    }
    ours = Roster.load(_write(tmp_path, "ours.csv", OURS))
    rows = [
        ("section A/team 3/erin", "/s/section A/team 3/erin/lab1.ipynb"),
        ("section A/team 3/frank", "/s/section A/team 3/frank/lab1.ipynb"),
    ]
    assert {n: s.student_id for n, s in match_roster(ours, rows).students.items()} == {
        "section A/team 3/erin": "S001",
        "section A/team 3/frank": "S002",
    }
    shared = Roster.load(
        _write(tmp_path, "shared.csv", "student_id,name,email\n1,A,x@u.edu\n2,B,x@u.edu\n")
    )
    assert match_roster(shared, [("x", "/s/x.ipynb")]).unmatched == (
        "x",
    )  # an identifier of two students: neither


def _gradebook(lab, out, scores, roster=None):
    """A written gradebook whose rows score ``scores`` (name -> fraction of every test)."""
    results = []
    for name, fraction in scores.items():
        tests = [
            TestResult(
                t.id,
                t.piece,
                t.name,
                round(t.points * fraction, 6),
                t.points,
                fraction == 1,
                t.hidden,
                kind=Kind.PASSED if fraction == 1 else Kind.FAILED,
            )
            for t in lab.tests
        ]
        results.append(summarise(lab, name, f"/subs/{name}.ipynb", tests, Status()))
    write_reports(out, lab, results, roster=roster)
    return results


def test_gradebook_with_a_roster_names_students_and_lists_the_rest(fixture_lab, tmp_path):
    roster = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    _gradebook(fixture_lab, tmp_path / "out", {"erin": 1.0, "S002": 0.5, "=zed": 0.0}, roster)
    with open(tmp_path / "out" / "grades.csv", newline="") as f:
        rows = {r["submission"]: r for r in csv.DictReader(f)}
    assert (rows["erin"]["student_id"], rows["erin"]["name"], rows["erin"]["section"]) == (
        "S001",
        "Doe, Erin",
        "Section A",
    )
    assert rows["'=zed"]["student_id"] == ""  # no student, and the name stays text
    data = json.loads((tmp_path / "out" / "grades.json").read_text())
    assert data["roster"]["unmatched_submissions"] == ["=zed"]
    assert [s["name"] for s in data["roster"]["students_without_submission"]] == ["Poe, Gina"]
    page = (tmp_path / "out" / "summary.html").read_text()
    assert "Students without a submission (1)" in page and "Poe, Gina" in page


def test_canvas_and_moodle_exports(fixture_lab, tmp_path, capsys):
    canvas_roster = _write(tmp_path, "canvas.csv", CANVAS)
    _gradebook(
        fixture_lab, tmp_path / "lab0", {"erin": 1.0, "S002": 0.5, "frank": 0.25, "zed": 0.0}
    )
    out = tmp_path / "canvas_import.csv"
    args = ["export", "canvas", str(tmp_path / "lab0"), "--roster", str(canvas_roster)]
    args += ["-o", str(out), "--column", "lab0_fixture=Lab 0 (777)", "--pieces"]
    args += ["--missing", "blank"]
    # Frank's two notebooks (S002 and frank): refused, naming them, until allowed
    assert main(args) == 2 and not out.exists()
    refused = capsys.readouterr().err
    assert "several rows in one lab" in refused and "S002, frank" in refused, refused
    assert main(args + ["--allow-several"]) == 0
    captured = capsys.readouterr()
    # graded without a roster: the export's roster matches the rows; zed matches no one,
    # has no Canvas id, and is left out (Canvas would match a row by its name alone)
    assert "submission zed matched no roster student: left out of the file" in captured.err
    assert "lablib export: left out: zed (zed): not written to canvas_import.csv" in captured.err
    assert "1 students without a submission (left empty): S003" in captured.err
    assert "4 students (3 with a submission for every lab; 1 missing" in captured.out
    assert "1 not in the roster" in captured.out and "1 left out of the file" in captured.out
    rows = list(csv.reader(out.open(newline="")))
    assert rows[0][:6] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 0 (777)"]
    assert rows[0][6:] == [f"Lab 0 (777): {p}" for p in fixture_lab.pieces]
    assert rows[1][0].strip() == "Points Possible" and rows[1][5] == f"{fixture_lab.max_score:g}"
    table = {r[0]: r for r in rows[2:]}
    assert table["Doe, Erin"][1:6] == [
        "1001",
        "S001",
        "erin",
        "Section A",
        f"{fixture_lab.max_score:g}",
    ]
    assert (
        table["Roe, Frank"][5] == f"{fixture_lab.max_score * 0.5:g}"
    )  # two notebooks, --allow-several: the best counts
    assert table["Poe, Gina"][5] == ""  # no submission, --missing blank: no grade
    assert "zed" not in table and len(rows) == 5  # zed left out; the test student too
    notes = {r[0]: r[4] for r in csv.reader(open(tmp_path / "canvas_import.notes.csv", newline=""))}
    assert "no submission" in notes["Poe, Gina"] and "not in the roster" in notes["zed"]
    said = [r[4] for r in csv.reader(open(tmp_path / "canvas_import.notes.csv", newline=""))]
    assert any("Canvas's import would match the row by its name 'zed' alone" in n for n in said)
    moodle = tmp_path / "moodle.csv"
    gradescope_roster = _write(tmp_path, "gs.csv", GRADESCOPE)
    assert (
        main(
            [
                "export",
                "moodle",
                str(tmp_path / "lab0"),
                "--roster",
                str(gradescope_roster),
                "-o",
                str(moodle),
                "--allow-several",
            ]
        )
        == 0
    )
    rows = list(csv.reader(moodle.open(newline="")))
    assert rows[0] == [
        "Full name",
        "Email address",
        "ID number",
        "Fixture lab: normalise, softmax, running mean",
        "Notes",
    ]
    assert rows[1] == ["Erin Doe", "erin@uni.edu", "S001", f"{fixture_lab.max_score:g}", ""]
    assert (
        main(["export", "canvas", str(tmp_path), "--roster", str(canvas_roster), "-o", str(out)])
        == 2
    )
    assert "pass the output folders of `lablib grade`" in capsys.readouterr().err


@pytest.mark.integration  # grades the fixture lab with the sandboxed runner
def test_grade_command_with_a_roster(tmp_path, capsys):
    subs = tmp_path / "subs" / "section A" / "team 3"
    for student in ("erin", "frank"):
        (subs / student).mkdir(parents=True)
        shutil.copy(FIXTURE_SOLUTION, subs / student / "lab1.ipynb")
    roster = _write(tmp_path, "ours.csv", OURS)
    out = tmp_path / "out"
    assert (
        main(
            [
                "grade",
                str(FIXTURE_LAB),
                str(tmp_path / "subs"),
                "-o",
                str(out),
                "--tests",
                str(FIXTURE_HIDDEN),
                "--lab-notebook",
                str(FIXTURE_SOLUTION),
                "--roster",
                str(roster),
                "--jobs",
                "2",
                "--timeout",
                "20",
                "--quiet",
            ]
        )
        == 0
    )
    with open(out / "grades.csv", newline="") as f:
        rows = {r["submission"]: r for r in csv.DictReader(f)}
    # rows named by the student's folder, matched by the roster's paths below the folder given
    assert {n: r["student_id"] for n, r in rows.items()} == {"erin": "S001", "frank": "S002"}
    assert "roster:" not in capsys.readouterr().err  # everyone matched


def test_a_moodle_extension_is_the_students_due_date(tmp_path):
    """Moodle writes an extension granted in its worksheet's Status ("Extension granted
    until: <date>"); it was not read, and the late policy deducted for a submission
    Moodle counts on time. It is the student's own due date now (a due column, where the
    roster has one, still moves it), and a late policy reads it, never earlier than the
    lab's due date."""
    from lablib.grading.gradebook.late import LatePolicy, parse_time

    sheet = tmp_path / "worksheet.csv"
    sheet.write_text(
        "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Last modified (submission)\n"
        'Participant 1,Erin Doe,erin@uni.edu,"Submitted for grading - Extension granted until: '
        'Monday, 23 November 2026, 11:59 PM",,14.00,"Sunday, 22 November 2026, 9:00 PM"\n'
        "Participant 2,Frank Roe,frank@uni.edu,Submitted for grading,,14.00,"
        '"Sunday, 22 November 2026, 9:00 PM"\n',
        encoding="utf-8",
    )
    erin, frank = Roster.load(sheet).students
    assert parse_time(erin.extended_until) == parse_time("2026-11-23T23:59").astimezone()
    assert frank.extended_until == "" and erin.due == ""
    policy = LatePolicy.parse(due="2026-11-20T23:59", per_day="10%")
    when = parse_time(erin.submitted_at)
    assert policy.penalty(when, 14, extended_until=erin.extended_until).penalty == 0
    assert policy.penalty(when, 14, extended_until=frank.extended_until or None).penalty > 0
    # an extension granted in Moodle never makes the due date earlier than the lab's
    later = LatePolicy.parse(due="2026-11-25T23:59", per_day="10%")
    assert later.penalty("2026-11-24T12:00", 14, extended_until=erin.extended_until).penalty == 0
