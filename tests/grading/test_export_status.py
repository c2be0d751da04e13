"""lablib export says what a row's status did to its points: a grader-error row (the
grader failed, not the student) is refused unless --allow-grader-errors, and every exported
row whose status is not ok is noted; a file handed in but not graded (a zip, a
.ipynb.txt) is told to its student by its LMS name, and noted as such, not as "no
submission"."""

from __future__ import annotations

import csv
import json
import os
import pathlib

import pytest

from lablib.cli import main
from lablib.grading.export import ExportError, export
from lablib.grading.gradebook import GradebookFolder
from lablib.grading.gradebook.identity import resolve
from lablib.grading.gradebook.roster import Roster
from lablib.grading.report import write_reports
from lablib.grading.results import PieceScore, Status, SubmissionResult
from lablib.grading.spec import LabSpec
from lablib.grading.submissions import NO_NOTEBOOK_FOLDER, NOT_A_NOTEBOOK, Found

CANVAS = """Student,ID,SIS User ID,SIS Login ID,Section
"Doe, Erin",1001,S001,erin,A
"Roe, Frank",1002,S002,frank,A
"Poe, Gina",1003,S003,gina,B
"Lee, Ivy",1004,S004,ivy,B
"""
WORKSHEET = """Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,Last modified (submission),Last modified (grade),Feedback comments
Participant 7300001,Erin Doe,erin@uni.edu,Submitted,,10.00,Yes,-,-,
Participant 7300002,Frank Roe,frank@uni.edu,Submitted,,10.00,Yes,-,-,
Participant 7300003,Gina Poe,gina@uni.edu,Submitted,,10.00,Yes,-,-,
"""


def _lab():
    lab = LabSpec("lab9_export", "Lab 9")
    lab.piece("f", objects=["f"])
    return lab


def _canvas_book(tmp_path, rows, skipped=()):
    """A gradebook of Canvas files graded with :data:`CANVAS`: ``rows`` is name -> (points,
    user id, status); ``skipped`` the ``(path, reason)`` of the paths not graded."""
    roster = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    lab, results = _lab(), []
    for name, (points, user, status) in rows.items():
        path = tmp_path / "subs" / f"{name}_{user}_9000000_lab9.ipynb"  # beside the skipped
        r = SubmissionResult(
            name, str(path), status, points, 10.0, {"f": PieceScore(points, 10.0)}, []
        )  # fmt: skip
        lms = {"lms": "canvas", "name": name, "user_id": user, "late": False}
        r.identity = resolve(Found(name, path, path.name, "", lms), roster, lab=lab)
        results.append(r)
    write_reports(tmp_path / "out", lab, results, roster=roster, skipped=skipped)
    return roster


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _notes(path) -> dict:
    notes: dict = {}
    for row in csv.DictReader(open(path, encoding="utf-8")):
        notes.setdefault(row["Student"], []).append(row["Note"])
    return notes


def test_a_grader_error_is_refused_unless_allowed_and_every_status_is_noted(tmp_path, capsys):
    """Frank's run met a grader error (the grader's fault, he was told it will be
    regraded): the export is refused, naming him, unless --allow-grader-errors; then
    he, Gina (an empty notebook) and Ivy (a timeout, a cell that raised) are noted with
    what their status did; Erin (ok) is not."""
    roster = _canvas_book(
        tmp_path,
        {
            "doeerin": (10, "1001", Status()),
            "roefrank": (6, "1002", Status.of(["grader-error"])),
            "poegina": (0, "1003", Status.of(["invalid-notebook"])),
            "leeivy": (3, "1004", Status.of(["timeout"], missing=["g"], raised=["f (KeyError)"])),
        },
    )
    out = tmp_path / "out"
    with pytest.raises(ExportError) as refused:
        export("canvas", [out], roster, tmp_path / "c.csv")
    said = str(refused.value)
    assert "grader-error" in said and "roefrank" in said and "--allow-grader-errors" in said
    assert "poegina" not in said and not (tmp_path / "c.csv").exists()
    # the instructor's view of the row, by the file name the report gave it
    (view,) = [w.rstrip(",") for w in said.split() if "/instructor/" in w]
    assert view.endswith(".md") and "<submission>" not in view and pathlib.Path(view).is_file()
    args = ["export", "canvas", str(out), "--roster", str(tmp_path / "canvas.csv")]
    assert main([*args, "-o", str(tmp_path / "c.csv")]) == 2
    assert "grader-error" in capsys.readouterr().err
    assert main([*args, "-o", str(tmp_path / "c.csv"), "--allow-grader-errors"]) == 0
    assert "3 with a status other than ok (noted)" in capsys.readouterr().out
    totals = {r[0]: r[5] for r in csv.reader(open(tmp_path / "c.csv", encoding="utf-8"))}
    assert [totals[n] for n in ("Doe, Erin", "Roe, Frank", "Poe, Gina", "Lee, Ivy")] == [
        "10", "6", "0", "3",
    ]  # fmt: skip
    notes = _notes(tmp_path / "c.notes.csv")
    assert "Doe, Erin" not in notes
    assert notes["Roe, Frank"] == [
        "Lab 9: grader error: the grader itself failed on some tests, not the student, who was "
        "told the instructor will regrade them; exported as the grader scored it; scored 6 of 10"
    ]
    assert notes["Poe, Gina"] == [
        "Lab 9: invalid notebook: the file could not be read as a Jupyter notebook (empty or "
        "corrupt), nothing was graded; scored 0 of 10"
    ]
    (ivy,) = notes["Lee, Ivy"]
    assert ivy.startswith("Lab 9: timeout: some code ran past the time limit")
    assert "graded cells raised (f (KeyError))" in ivy and "not found (g)" in ivy
    done = export("moodle", [out], None, tmp_path / "m.csv", allow_grader_errors=True)
    assert set(done["statuses"]["lab9_export"]) == {"S002", "S003", "S004"}
    moodle = {r["Full name"]: r for r in csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8"))}
    assert "invalid notebook" in moodle["Poe, Gina"]["Notes"], "Moodle's Notes column too"
    # the Notes column is shown to the student: no command-line flag in it
    assert all("--" not in row["Notes"] for row in moodle.values())
    assert "exported as the grader scored it; scored 6" in moodle["Roe, Frank"]["Notes"]


def test_a_status_is_read_from_its_text_in_an_older_gradebook():
    """A gradebook written before the status's parts were kept beside its text."""
    from lablib.grading.export import _status

    status = _status({"status": "grader-error; timeout; error: f (NameError); missing: g, h"})
    assert [k.value for k in status.problems] == ["grader-error", "timeout"]
    assert status.raised == ("f (NameError)",) and status.missing == ("g", "h")
    assert _status({"status": "ok"}).ok


def test_a_file_handed_in_but_not_graded_is_told_to_its_student(tmp_path):
    """Frank handed in a zip, Gina a .ipynb.txt (Canvas names both after them): neither
    was graded, and each is noted with what they handed in, not as without a submission;
    a file of a user the roster lacks names no one; Ivy handed in nothing."""
    subs = tmp_path / "subs"
    roster = _canvas_book(
        tmp_path,
        {"doeerin": (10, "1001", Status())},
        skipped=[
            (subs / "roefrank_1002_9000002_lab9.zip", NOT_A_NOTEBOOK),
            (subs / "poegina_1003_9000003_lab9.ipynb.txt", NOT_A_NOTEBOOK),
            (subs / "zedzed_1999_9000009_lab9.zip", NOT_A_NOTEBOOK),
            (subs / "notes.txt", NOT_A_NOTEBOOK),
        ],
    )
    done = export("canvas", [tmp_path / "out"], roster, tmp_path / "c.csv")
    notes = _notes(tmp_path / "c.notes.csv")
    assert notes["Roe, Frank"] == [
        "Lab 9: handed in roefrank_1002_9000002_lab9.zip (not a notebook: only .ipynb files "
        "are graded), nothing graded (0)"
    ]
    assert "handed in poegina_1003_9000003_lab9.ipynb.txt" in notes["Poe, Gina"][0]
    assert notes["Lee, Ivy"] == ["Lab 9: no submission (0)"]
    assert done["not_graded"]["lab9_export"] == {
        "S002": ["roefrank_1002_9000002_lab9.zip"],
        "S003": ["poegina_1003_9000003_lab9.ipynb.txt"],
        "1999": ["zedzed_1999_9000009_lab9.zip"],
    }
    assert done["missing"]["lab9_export"] == ["S004"]
    # user 1999 is no roster student: a row of their own, as a graded notebook of theirs
    # would have (not in the roster, noted); notes.txt names no one
    assert done["skipped_unmatched"]["lab9_export"] == []
    assert done["not_in_roster"] == ["1999"] and done["unmatched"]["lab9_export"] == ["zedzed"]
    assert notes["zedzed"] == [
        "not in the roster given to the export (identity kept at grading)",
        "Lab 9: handed in zedzed_1999_9000009_lab9.zip (not a notebook: only .ipynb files "
        "are graded), nothing graded (0)",
    ]
    assert "3 handed in only files that were not graded (0, noted)" in done["summary"]
    totals = {r[0]: r[5] for r in csv.reader(open(tmp_path / "c.csv", encoding="utf-8"))}
    assert totals["Roe, Frank"] == "0" and totals["Doe, Erin"] == "10"
    assert totals["zedzed"] == "0"
    # graded with --layout plain, file names are the students' own: they name no one
    _graded_plain(tmp_path / "out")
    done = export("canvas", [tmp_path / "out"], roster, tmp_path / "c.csv")
    assert done["not_graded"]["lab9_export"] == {}
    assert _notes(tmp_path / "c.notes.csv")["Roe, Frank"] == ["Lab 9: no submission (0)"]


def test_the_layout_is_the_one_of_the_rows_read(tmp_path, monkeypatch):
    """A grade run writing the folder while the export reads it: the export reads
    ``grades.json`` once, and the layout its skipped paths are read by is the one kept with
    the rows it exports (graded plain: a zip's name names no one), not the newer file's."""
    import lablib.grading.export as export_module

    subs = tmp_path / "subs"
    roster = _canvas_book(
        tmp_path,
        {"doeerin": (10, "1001", Status())},
        skipped=[(subs / "roefrank_1002_9000002_lab9.zip", NOT_A_NOTEBOOK)],
    )
    _graded_plain(tmp_path / "out")
    read = export_module._gradebook

    def read_then_rewritten(folder):
        data = read(folder)
        rewritten = json.loads((tmp_path / "out" / "grades.json").read_text(encoding="utf-8"))
        rewritten["kept"]["layout"] = "auto"  # another run, graded with --layout auto
        (tmp_path / "out" / "grades.json").write_text(json.dumps(rewritten), encoding="utf-8")
        return data

    monkeypatch.setattr(export_module, "_gradebook", read_then_rewritten)
    done = export("canvas", [tmp_path / "out"], roster, tmp_path / "c.csv")
    assert done["not_graded"]["lab9_export"] == {}  # read auto: S002 handed in the zip
    assert _notes(tmp_path / "c.notes.csv")["Roe, Frank"] == ["Lab 9: no submission (0)"]


def _graded_plain(out):
    """The gradebook in ``out`` as `lablib grade --layout plain` keeps it (in grades.json)."""
    data = json.loads((out / "grades.json").read_text(encoding="utf-8"))
    data["kept"]["layout"] = "plain"
    (out / "grades.json").write_text(json.dumps(data), encoding="utf-8")


def _moodle_erin(tmp_path, sheet, lab):
    """Erin's notebook (7 of 10) in her folder of a Moodle download (``subs/``), graded with
    ``sheet``, as ``lablib grade`` keeps its identity."""
    folder = "Erin Doe_7300001_assignsubmission_file_"
    path = tmp_path / "subs" / folder / "e.ipynb"
    r = SubmissionResult(
        "Erin Doe", str(path), Status(), 7.0, 10.0, {"f": PieceScore(7.0, 10.0)}, []
    )
    lms = {"lms": "moodle", "name": "Erin Doe", "participant_id": "7300001", "plugin": "file",
           "file": ""}  # fmt: skip
    r.identity = resolve(Found("Erin Doe", path, f"{folder}/e.ipynb", folder, lms), sheet, lab=lab)
    r.identity["where"], r.identity["folder"] = f"{folder}/e.ipynb", folder
    return r


def test_a_moodle_folder_without_a_notebook_is_told_to_its_student(tmp_path):
    """Moodle's folder of Gina holds only a zip: the zip is named (not the folder too),
    with the worksheet as the export's roster, and without a roster too: her folder's name
    gives her a row of her own, as her notebook would have."""
    sheet = Roster.load(_write(tmp_path, "sheet.csv", WORKSHEET))
    folder = tmp_path / "subs" / "Gina Poe_7300003_assignsubmission_file_"
    lab = _lab()
    r = _moodle_erin(tmp_path, sheet, lab)
    skipped = [
        (folder / "lab9.zip", NOT_A_NOTEBOOK),
        (folder, "a folder without a notebook (.ipynb): no row in the gradebook"),
    ]
    write_reports(tmp_path / "out", lab, [r], roster=sheet, skipped=skipped)
    done = export("moodle", [tmp_path / "out"], sheet, tmp_path / "m.csv", missing="blank")
    rows = {r["Full name"]: r for r in csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8"))}
    # no grade to give (--missing blank): left out, as an empty cell clears Moodle's grade
    assert "Gina Poe" not in rows and "Frank Roe" not in rows and "Erin Doe" in rows
    notes = _notes(tmp_path / "m.notes.csv")
    assert notes["Gina Poe"][1] == (
        "Lab 9: handed in lab9.zip (not a notebook: only .ipynb files are graded), nothing "
        "graded (left empty)"
    )
    assert notes["Frank Roe"][1] == "Lab 9: no submission (left empty)"
    assert done["not_graded"]["lab9_export"] == {"gina@uni.edu": ["lab9.zip"]}
    done = export("moodle", [tmp_path / "out"], None, tmp_path / "m.csv")
    assert done["skipped_unmatched"]["lab9_export"] == []
    assert done["not_graded"]["lab9_export"] == {"7300003": ["lab9.zip"]}
    # Erin matched the worksheet at grading: without a roster she is no unmatched stray
    assert done["students"] == 2 and done["unmatched"]["lab9_export"] == ["Gina Poe"]
    # her folder gives no e-mail or ID number for Moodle to match: left out of the file
    # and named with her grade in the notes, as a graded notebook of hers would be
    assert len(done["left_out"]) == 1 and "1 left out of the file" in done["summary"]
    notes = list(csv.DictReader(open(tmp_path / "m.notes.csv", encoding="utf-8")))
    gina = [n["Note"] for n in notes if n["Student"] == "Gina Poe"]
    assert gina[0].startswith("not written to m.csv") and "grades: Lab 9 0." in gina[0]
    assert gina[1].startswith("Lab 9: handed in lab9.zip (not a notebook")


def _worksheet_book(tmp_path, maximum: str):
    """Erin's notebook (7 of 10) graded with a Moodle worksheet whose Maximum Grade is
    ``maximum``; the worksheet is returned as the export's roster."""
    sheet = Roster.load(
        _write(tmp_path, "sheet.csv", WORKSHEET.replace(",10.00,", f',"{maximum}",'))
    )
    lab = _lab()
    r = _moodle_erin(tmp_path, sheet, lab)
    write_reports(tmp_path / "out", lab, [r], roster=sheet)
    return sheet


@pytest.mark.parametrize(
    "sheet",
    [
        'Student,ID,SIS User ID,SIS Login ID,Section,Lab 9 (5501)\n    Points Possible,,,,,"20,00"\n'
        '"Doe, Erin",1001,S001,erin,A,\n',  # a locale whose decimals take a comma
        "LastName,FirstName,ID,SIS User ID,SIS Login ID,Section,Lab 9 (5501)\n"
        "    Points Possible,,,,,,20.00\nDoe,Erin,1001,S001,erin,A,\n",  # names split
        "ID,SIS User ID,SIS Login ID,FirstName,LastName,Section,Lab 9 (5501)\n"
        ",,,,    Points Possible,,20.00\n1001,S001,erin,Erin,Doe,A,\n",  # elsewhere
        "Student;ID;SIS User ID;SIS Login ID;Section;Lab 9 (5501)\n    Points Possible;;;;;20,00\n"
        '"Doe, Erin";1001;S001;erin;A;\n',  # Canvas's "use semicolons to separate fields"
    ],
    ids=["comma decimals", "split names", "split names elsewhere", "semicolons"],
)
def test_canvas_points_possible_as_canvas_writes_it_in_other_settings(tmp_path, sheet):
    """Canvas writes "20,00" where decimals take a comma, and puts the Points Possible row
    under LastName where names are split: the check of the assignment's points was
    skipped without a word, and 7 out of 10 went into a column out of 20."""
    _canvas_book(tmp_path, {"doeerin": (7, "1001", Status())})
    roster = Roster.load(_write(tmp_path, "sheet.csv", sheet))
    columns = {"lab9_export": "Lab 9 (5501)"}
    with pytest.raises(ExportError, match="'Lab 9 \\(5501\\)' is out of 20 in the roster"):
        export("canvas", [tmp_path / "out"], roster, tmp_path / "c.csv", columns=columns)
    export(
        "canvas", [tmp_path / "out"], roster, tmp_path / "c.csv", columns=columns,
        scale_to_points_possible=True,
    )  # fmt: skip
    rows = list(csv.reader(open(tmp_path / "c.csv", encoding="utf-8")))
    assert rows[2][-1] == "14", rows  # 7 of 10 is 14 of 20


def test_a_points_possible_that_is_no_number_is_refused(tmp_path):
    _canvas_book(tmp_path, {"doeerin": (7, "1001", Status())})
    sheet = (
        "Student,ID,SIS User ID,SIS Login ID,Section,Lab 9 (5501)\n"
        '    Points Possible,,,,,"1,000.00"\n"Doe, Erin",1001,S001,erin,A,\n'
    )
    roster = Roster.load(_write(tmp_path, "sheet.csv", sheet))
    with pytest.raises(ExportError, match="gives 'Lab 9 \\(5501\\)': '1,000.00', not a number"):
        export("canvas", [tmp_path / "out"], roster, tmp_path / "c.csv",
               columns={"lab9_export": "Lab 9 (5501)"})  # fmt: skip


def test_a_moodle_item_out_of_other_points_is_refused_unless_scaled(tmp_path):
    """The worksheet says the assignment is out of 20, the lab's scores out of 10: Moodle's
    import would cap or misread them, so the export is refused (nothing written) unless
    --scale-to-points-possible, which doubles each score; out of 10, nothing changes."""
    sheet = _worksheet_book(tmp_path, "20.00")
    assert sheet.maximum_grade == "20.00"
    with pytest.raises(ExportError) as refused:
        export("moodle", [tmp_path / "out"], sheet, tmp_path / "m.csv")
    message = str(refused.value)
    assert "'Lab 9' scores out of 10; the worksheet's Maximum Grade is 20" in message
    assert "--scale-to-points-possible" in message and "nothing was written" in message
    assert not (tmp_path / "m.csv").exists()
    done = export(
        "moodle", [tmp_path / "out"], sheet, tmp_path / "m.csv", scale_to_points_possible=True
    )
    rows = {r["Full name"]: r for r in csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8"))}
    assert rows["Erin Doe"]["Lab 9"] == "14" and rows["Frank Roe"]["Lab 9"] == "0"
    assert done["scaled"] == {"Lab 9": [10.0, 20.0]}
    assert "Lab 9 scaled from 10 to its Maximum Grade 20" in done["summary"]
    # the CLI refuses too and writes nothing
    (tmp_path / "m.csv").unlink()
    code = main(["export", "moodle", str(tmp_path / "out"), "--roster", str(tmp_path / "sheet.csv"),
                 "-o", str(tmp_path / "m.csv")])  # fmt: skip
    assert code != 0 and not (tmp_path / "m.csv").exists()
    # a worksheet out of the lab's points: written as graded
    other = tmp_path / "ten"
    other.mkdir()
    sheet = _worksheet_book(other, "10.00")
    done = export("moodle", [other / "out"], sheet, other / "m.csv")
    assert done["scaled"] == {} and done["maximum_unchecked"] is None


def test_a_moodle_worksheet_with_several_columns_asks_to_check_each_item(tmp_path):
    """With a column per piece and a written total, the worksheet's one Maximum Grade
    cannot be told to a column: the file is written and the summary names each column's
    points to check against its Moodle grade item."""
    sheet = _worksheet_book(tmp_path, "10.00")
    done = export("moodle", [tmp_path / "out"], sheet, tmp_path / "m.csv", pieces=True)
    assert done["maximum_unchecked"]["maximum_grade"] == "10.00"
    assert len(done["maximum_unchecked"]["columns"]) >= 2
    assert "the roster's Maximum Grade (10.00) is one assignment's" in done["summary"]
    assert "Moodle caps a grade at its item's maximum" in done["summary"]


def _canvas_row(subs, file_name, points, lab, roster=None):
    """A graded Canvas file of ``subs`` (its LMS name read as at grading)."""
    from lablib.grading.submissions import skipped_submission

    found = skipped_submission(subs / file_name)
    r = SubmissionResult(
        found.name, str(subs / file_name), Status(), points, 10.0,
        {"f": PieceScore(points, 10.0)}, [],
    )  # fmt: skip
    r.identity = resolve(found, roster, lab=lab)
    return r


def test_a_graded_students_other_file_gives_them_no_second_row(tmp_path):
    """John's notebook was matched by a roster without Canvas ids (by his name) and
    graded 9; his extra zip carries the same Canvas user: it stays his, not a row of 0
    that Canvas would give the same student after his 9. The same for an anonymous
    student's two files (Canvas anonymous grading)."""
    subs, lab = tmp_path / "subs", _lab()
    roster = Roster.load(
        _write(tmp_path, "r.csv", "student_id,name,email\nS001,John Smith,j@u.edu\n")
    )
    graded = _canvas_row(subs, "smithjohn_1001_9000001_lab9.ipynb", 9.0, lab, roster)
    assert graded.identity["matched"] and not graded.identity["lms_id"]
    skipped = [(subs / "smithjohn_1001_9000002_extra.zip", NOT_A_NOTEBOOK)]
    write_reports(tmp_path / "out", lab, [graded], roster=roster, skipped=skipped)
    for given in (None, roster):
        done = export("canvas", [tmp_path / "out"], given, tmp_path / "c.csv")
        rows = list(csv.reader(open(tmp_path / "c.csv", encoding="utf-8")))[2:]
        assert [(r[0], r[5]) for r in rows] == [("John Smith", "9")], rows
        assert (
            done["not_graded"]["lab9_export"] == {}
            and done["skipped_unmatched"]["lab9_export"] == []
        )
    anonymous = tmp_path / "anonymous"
    graded = _canvas_row(anonymous / "subs", "anon_3kqv8d_9000001_lab9.ipynb", 9.0, lab)
    skipped = [(anonymous / "subs" / "anon_3kqv8d_9000002_extra.zip", NOT_A_NOTEBOOK)]
    write_reports(anonymous / "out", lab, [graded], skipped=skipped)
    export("canvas", [anonymous / "out"], None, anonymous / "c.csv")
    rows = list(csv.reader(open(anonymous / "c.csv", encoding="utf-8")))[2:]
    assert [(r[0], r[5]) for r in rows] == [("anon_3kqv8d", "9")]


def test_a_name_given_to_a_file_in_a_students_own_folder_names_no_one(tmp_path):
    """Plain folders (a student's own): jsmith puts a zip named as Erin's Moodle folder in
    his folder. It is his folder's, not Erin's: no row or note for Erin, listed as naming
    no one. A Canvas file a student named ``..._assignsubmission_file_`` is read by its
    Canvas name, not as a Moodle folder."""
    subs, lab = tmp_path / "subs", _lab()
    results = []
    for who in ("jsmith", "edoe"):
        path = subs / who / "lab9.ipynb"
        r = SubmissionResult(who, str(path), Status(), 8.0, 10.0, {"f": PieceScore(8.0, 10.0)}, [])
        r.identity = resolve(Found(who, path, f"{who}/lab9.ipynb", who, {}), None, lab=lab)
        r.identity["where"], r.identity["folder"] = f"{who}/lab9.ipynb", who  # as grading keeps
        results.append(r)
    planted = subs / "jsmith" / "Erin Doe_7300000_assignsubmission_file_lab9.zip"
    write_reports(tmp_path / "out", lab, results, skipped=[(planted, NOT_A_NOTEBOOK)])
    roster = Roster.load(_write(tmp_path, "sheet.csv", WORKSHEET))
    for given in (None, roster):
        done = export("canvas", [tmp_path / "out"], given, tmp_path / "c.csv")
        assert done["not_graded"]["lab9_export"] == {}
        assert done["skipped_unmatched"]["lab9_export"] == [str(planted)]
        notes = [n for ns in _notes(tmp_path / "c.notes.csv").values() for n in ns]
        assert not any("assignsubmission" in n for n in notes), notes
    # a Canvas-named notebook of jsmith's own beside it changes nothing: still his folder
    extra = _canvas_row(subs / "jsmith", "malx_1099_9000001_lab9.ipynb", 8.0, lab)
    write_reports(tmp_path / "out", lab, [*results, extra], skipped=[(planted, NOT_A_NOTEBOOK)])
    done = export("canvas", [tmp_path / "out"], None, tmp_path / "c.csv")
    assert done["skipped_unmatched"]["lab9_export"] == [str(planted)]
    canvas = tmp_path / "canvas"
    graded = _canvas_row(canvas / "subs", "doeerin_1001_9000001_lab9.ipynb", 9.0, lab)
    odd = canvas / "subs" / "roefrank_1002_9000002_Gina Poe_7300003_assignsubmission_file_"
    write_reports(canvas / "out", lab, [graded], skipped=[(odd, NOT_A_NOTEBOOK)])
    done = export("canvas", [canvas / "out"], None, canvas / "c.csv")
    assert done["not_graded"]["lab9_export"] == {"1002": [odd.name]}
    names = [r[0] for r in csv.reader(open(canvas / "c.csv", encoding="utf-8"))][2:]
    assert sorted(names) == ["doeerin", "roefrank"]


def test_a_moodle_maximum_grade_is_read_as_moodle_writes_it(tmp_path):
    """A decimal comma ("10,00", Moodle on a site set so) is the lab's 10 points: nothing
    refused; "20,50" is refused naming it as written; 0 (an assignment without points) is
    refused even with --scale-to-points-possible; a maximum that is no number (rows that
    differ) is not checked and the summary says so."""
    out, sheet = _book_of(tmp_path, "a", "10,00")
    assert export("moodle", [out], sheet, tmp_path / "a.csv")["scaled"] == {}
    out, sheet = _book_of(tmp_path, "b", "20,50")
    with pytest.raises(ExportError, match="Maximum Grade is 20,50"):
        export("moodle", [out], sheet, tmp_path / "b.csv")
    out, sheet = _book_of(tmp_path, "c", "0.00")
    with pytest.raises(ExportError, match="out of 0.00 points.*expected both above 0"):
        export("moodle", [out], sheet, tmp_path / "c.csv", scale_to_points_possible=True)
    differ = Roster.load(_write(tmp_path, "d.csv", WORKSHEET.replace(",10.00,", ",20.00,", 1)))
    assert differ.maximum_grade == "20.00; 10.00"
    out, _ = _book_of(tmp_path, "d", "10.00")
    done = export("moodle", [out], differ, tmp_path / "d_import.csv")
    assert done["scaled"] == {} and "cannot be read as a number" in done["summary"]
    same = Roster.load(_write(tmp_path, "e.csv", WORKSHEET.replace(",10.00,", ",10,", 1)))
    assert same.maximum_grade == "10"  # "10" and "10.00" agree
    # read as Moodle writes numbers, never guessed: a spreadsheet's thousands separator,
    # Python's own spellings (1_0, infinity, 1e1) and both separators are no number
    from lablib.grading.lms import moodle_number

    assert [moodle_number(t) for t in ("10.00 ", "17,5", "１０")] == [10.0, 17.5, 10.0]
    for text in ("1,000", "10,000", "1_0", "infinity", "nan", "1e1", "1.000,00", "Pass/Fail"):
        assert moodle_number(text) is None, text
    out, sheet = _book_of(tmp_path, "f", "1,000")
    done = export("moodle", [out], sheet, tmp_path / "f.csv")
    assert "Maximum Grade (1,000) cannot be read as a number" in done["summary"]


def _book_of(tmp_path, name: str, maximum: str):
    """``(a gradebook folder of Erin's 7 of 10 graded with a worksheet out of ``maximum``,
    that worksheet)``."""
    folder = tmp_path / name
    folder.mkdir()
    sheet = _worksheet_book(folder, maximum)
    return folder / "out", sheet


def test_moodles_notes_are_html_text(tmp_path):
    """Moodle shows an imported feedback as HTML: a file name a student gave (``<img ...>``)
    is text there, its ``<``, ``>`` and ``&`` escaped; the notes file beside the export,
    read in a spreadsheet, keeps the name as it is."""
    sheet = Roster.load(_write(tmp_path, "sheet.csv", WORKSHEET))
    folder = tmp_path / "subs" / "Gina Poe_7300003_assignsubmission_file_"
    lab = _lab()
    r = _moodle_erin(tmp_path, sheet, lab)
    name = "<img src=x onerror=alert(1)>&co.zip"
    write_reports(
        tmp_path / "out", lab, [r], roster=sheet, skipped=[(folder / name, NOT_A_NOTEBOOK)]
    )
    export("moodle", [tmp_path / "out"], sheet, tmp_path / "m.csv")  # Gina's 0 and note
    rows = {r["Full name"]: r for r in csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8"))}
    note = rows["Gina Poe"]["Notes"]
    assert "handed in &lt;img src=x onerror=alert(1)&gt;&amp;co.zip (not a notebook" in note
    assert "<" not in note and ">" not in note
    assert any(name in n for n in _notes(tmp_path / "m.notes.csv")["Gina Poe"])


def test_a_moodle_team_folder_without_a_notebook_is_noted_for_every_member(tmp_path):
    """Team 1's Moodle folder holds only a zip: both members the worksheet puts in Team 1
    are noted with it (not "no submission"); Lost's graded folder lies beside it."""
    from test_export_rules import TEAM_SHEET, _team_book

    sheet = Roster.load(_write(tmp_path, "sheet.csv", TEAM_SHEET))
    _team_book(tmp_path, tmp_path / "out", sheet, folders={"Lost_9_assignsubmission_file": 3.0})
    team = tmp_path / "Team 1 ⚡_42_assignsubmission_file"
    book = GradebookFolder(tmp_path / "out")
    data = book.read()
    data["skipped"] = [
        {"path": str(team / "lab.zip"), "reason": NOT_A_NOTEBOOK},
        {
            "path": str(team),
            "reason": "a folder without a notebook (.ipynb): no row in the gradebook",
        },
    ]
    (tmp_path / "out" / "grades.json").write_text(json.dumps(data), encoding="utf-8")
    done = export("moodle", [tmp_path / "out"], sheet, tmp_path / "m.csv")
    assert done["not_graded"]["lab9_export"] == {
        "erin@uni.edu": ["lab.zip"],
        "frank@uni.edu": ["lab.zip"],
    }
    assert "erin@uni.edu" not in done["missing"]["lab9_export"]


def test_a_zip_in_another_folder_of_the_download_is_still_told_to_its_student(tmp_path):
    """Canvas downloads kept in one folder per section: Erin's notebook graded in A/,
    Gina's zip in B/ (no graded row beside it). Gina is noted with her zip (with the
    roster, and without: a row of her own), as is a student of a gradebook whose rows
    carry no identity (written by an older lablib)."""
    subs, lab = tmp_path / "subs", _lab()
    roster = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    graded = _canvas_row(subs / "A", "doeerin_1001_9000001_lab9.ipynb", 9.0, lab, roster)
    skipped = [(subs / "B" / "poegina_1003_9000005_lab9.zip", NOT_A_NOTEBOOK)]
    write_reports(tmp_path / "out", lab, [graded], roster=roster, skipped=skipped)
    done = export("canvas", [tmp_path / "out"], roster, tmp_path / "c.csv")
    assert done["not_graded"]["lab9_export"] == {"S003": ["poegina_1003_9000005_lab9.zip"]}
    done = export("canvas", [tmp_path / "out"], None, tmp_path / "c.csv")
    assert done["not_graded"]["lab9_export"] == {"1003": ["poegina_1003_9000005_lab9.zip"]}
    data = json.loads((tmp_path / "out" / "grades.json").read_text(encoding="utf-8"))
    for entry in data["submissions"]:
        entry.pop("identity", None)
    (tmp_path / "out" / "grades.json").write_text(json.dumps(data), encoding="utf-8")
    done = export("canvas", [tmp_path / "out"], roster, tmp_path / "c.csv")
    assert done["not_graded"]["lab9_export"] == {"S003": ["poegina_1003_9000005_lab9.zip"]}


def _grade_folder(subs, out):
    """``lablib grade`` of the fixture lab on ``subs`` into ``out``, without a roster."""
    from grading_paths import FIXTURE_HIDDEN, FIXTURE_LAB, FIXTURE_SOLUTION

    args = ["grade", str(FIXTURE_LAB), str(subs), "-o", str(out), "--tests", str(FIXTURE_HIDDEN)]
    args += ["--lab-notebook", str(FIXTURE_SOLUTION), "--timeout", "20", "--quiet"]
    assert main(args) == 0


@pytest.mark.integration  # grades two notebooks
def test_from_a_download_to_the_import_file_without_a_roster(tmp_path):
    """Through ``lablib grade`` and ``lablib export`` as an instructor runs them, no roster:
    a Canvas download where Gina handed in only a zip gives Gina a row (0, noted); plain
    folders where jsmith put a zip named as Canvas names Frank's file give Frank none."""
    import shutil

    from grading_paths import FIXTURE_SOLUTION

    canvas = tmp_path / "canvas"
    canvas.mkdir()
    shutil.copy(FIXTURE_SOLUTION, canvas / "doeerin_1001_9000001_lab0.ipynb")
    (canvas / "poegina_1003_9000003_lab0.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    _grade_folder(canvas, tmp_path / "out_canvas")
    assert (
        main(["export", "canvas", str(tmp_path / "out_canvas"), "-o", str(tmp_path / "c.csv")]) == 0
    )
    rows = {r[1]: r for r in csv.reader(open(tmp_path / "c.csv", encoding="utf-8"))}
    assert rows["1001"][5] == "8" and rows["1003"][5] == "0"
    assert (
        "handed in poegina_1003_9000003_lab0.zip" in _notes(tmp_path / "c.notes.csv")["poegina"][0]
    )

    plain = tmp_path / "plain"
    for who in ("jsmith", "edoe"):
        (plain / who).mkdir(parents=True)
        shutil.copy(FIXTURE_SOLUTION, plain / who / "lab0.ipynb")
    (plain / "jsmith" / "roefrank_1002_9000002_lab0.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    _grade_folder(plain, tmp_path / "out_plain")
    assert (
        main(["export", "canvas", str(tmp_path / "out_plain"), "-o", str(tmp_path / "p.csv")]) == 0
    )
    names = sorted(r[0] for r in csv.reader(open(tmp_path / "p.csv", encoding="utf-8")))
    assert names == ["    Points Possible", "Student", "edoe", "jsmith"]


def test_a_damaged_review_log_stops_the_export_instead_of_reading_as_no_change(tmp_path):
    """reviews.sqlite holds the people's grades of written answers; one that cannot be read
    was taken as "no change since grades.json", so an out-of-date gradebook exported."""
    from lablib.grading.review.store import DB_NAME, ReviewError, changes_since

    roster = _canvas_book(tmp_path, {"doeerin": (10, "1001", Status())})
    out = tmp_path / "out"
    (out / DB_NAME).write_bytes(b"not a database, " * 100)
    with pytest.raises(ReviewError, match="cannot be read as the written answers' review log"):
        changes_since(out / DB_NAME, 0)
    with pytest.raises(ExportError, match="Restore it from a backup"):
        export("canvas", [out], roster, tmp_path / "c.csv")
    assert not (tmp_path / "c.csv").exists()
    (out / DB_NAME).unlink()  # no log at all: nothing was graded by people
    export("canvas", [out], roster, tmp_path / "c.csv")
    assert (tmp_path / "c.csv").is_file()


def test_a_plain_students_folder_without_a_notebook_is_told_to_that_student(tmp_path):
    """Graded with --layout plain (repositories named by their students' logins): Frank's
    folder held only a zip and Gina's a link the grader did not follow. Each is noted with
    what their folder held, not as without a submission, by their folder (as their graded
    notebook's row would be named), never by a file's name; a file at the top of the
    folder given is in no student's folder; Ivy handed in nothing."""
    subs, lab = tmp_path / "subs", _lab()
    path = subs / "erin" / "lab9.ipynb"
    erin = SubmissionResult(
        "erin", str(path), Status(), 9.0, 10.0, {"f": PieceScore(9.0, 10.0)}, []
    )
    roster = Roster.load(_write(tmp_path, "canvas.csv", CANVAS))
    erin.identity = resolve(Found("erin", path, "erin/lab9.ipynb", "erin", {}), roster, lab=lab)
    erin.identity["where"], erin.identity["folder"] = "erin/lab9.ipynb", "erin"
    (subs / "erin").mkdir(parents=True)
    (subs / "gina").mkdir()
    path.write_text("{}")
    os.symlink("../erin/lab9.ipynb", subs / "gina" / "lab9.ipynb")  # leads into erin's folder
    link = f"a symbolic link inside a student's folder (to {path}): not followed"
    skipped = [
        (subs / "frank" / "roefrank_1002_9000002_lab9.zip", NOT_A_NOTEBOOK),
        (subs / "frank", NO_NOTEBOOK_FOLDER),
        (subs / "gina" / "lab9.ipynb", link),
        (subs / "gina", NO_NOTEBOOK_FOLDER),
        (subs / "poegina_1003_9000003_lab9.zip", NOT_A_NOTEBOOK),  # at the top: no one's
    ]
    write_reports(tmp_path / "out", lab, [erin], roster=roster, skipped=skipped)
    _graded_plain(tmp_path / "out")
    done = export("canvas", [tmp_path / "out"], roster, tmp_path / "c.csv")
    notes = _notes(tmp_path / "c.notes.csv")
    (frank,) = notes["Roe, Frank"]
    assert "roefrank_1002_9000002_lab9.zip" in frank and "nothing graded (0)" in frank
    (gina,) = notes["Poe, Gina"]
    assert "lab9.ipynb" in gina and "symbolic link" in gina and "nothing graded (0)" in gina
    assert "erin" not in gina and str(subs) not in gina  # the note names no classmate, no path
    assert "poegina_1003_9000003_lab9.zip" not in gina  # a file's name names no one
    assert notes["Lee, Ivy"] == ["Lab 9: no submission (0)"]
    assert "Doe, Erin" not in notes
    assert set(done["not_graded"]["lab9_export"]) == {"S002", "S003"}
    totals = {r[0]: r[5] for r in csv.reader(open(tmp_path / "c.csv", encoding="utf-8"))}
    assert totals["Doe, Erin"] == "9" and totals["Roe, Frank"] == "0"


def test_a_review_log_that_cannot_be_opened_for_another_reason_is_not_called_damaged(tmp_path):
    """A log in WAL mode in a folder this user may not write ("attempt to write a readonly
    database") is intact: the message says to fix the folder, not to restore or move it."""
    import sqlite3

    from lablib.grading.review.store import _unreadable_log

    readonly = sqlite3.OperationalError("attempt to write a readonly database")
    readonly.sqlite_errorcode = 8  # SQLITE_READONLY
    said = _unreadable_log(tmp_path / "reviews.sqlite", readonly)
    assert "may read and write that folder" in said and "Restore" not in said
    damaged = sqlite3.DatabaseError("file is not a database")
    damaged.sqlite_errorcode = 26  # SQLITE_NOTADB
    assert "Restore it from a backup" in _unreadable_log(tmp_path / "reviews.sqlite", damaged)


GRADESCOPE_METADATA = """submission_101:
  :submitters:
  - :name: Erin Doe
    :sid: S001
    :email: erin@uni.edu
  :created_at: 2026-11-20 10:00:00.000000000 Z
  :history: []
submission_102:
  :submitters:
  - :name: Frank Roe
    :sid: S002
    :email: frank@uni.edu
  :created_at: 2026-11-20 11:00:00.000000000 Z
  :history: []
"""


@pytest.mark.parametrize("with_roster", [True, False])
def test_a_gradescope_submission_without_a_notebook_is_told_to_its_submitter(tmp_path, with_roster):
    """Frank's Gradescope submission folder holds only a zip: he was told "no submission"
    (and, without a roster, was not in the file at all), as if the export's metadata did
    not name him. It is read as grading reads it; a metadata file a student put inside
    their own submission is not."""
    from lablib.grading.gradebook.identity import resolve_all
    from lablib.grading.submissions import find_submissions

    subs = tmp_path / "subs"
    (subs / "submission_101").mkdir(parents=True)
    (subs / "submission_102").mkdir()
    (subs / "submission_metadata.yml").write_text(GRADESCOPE_METADATA, encoding="utf-8")
    notebook = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (subs / "submission_101" / "lab9.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    (subs / "submission_102" / "lab9.zip").write_bytes(b"PK")
    roster = None
    if with_roster:
        roster = Roster.load(_write(tmp_path, "gs.csv", "First Name,Last Name,SID,Email\n"
                                    "Erin,Doe,S001,erin@uni.edu\nFrank,Roe,S002,frank@uni.edu\n"))  # fmt: skip
    skipped: list = []
    found = find_submissions([subs], refused=skipped)
    lab, ids = _lab(), resolve_all(found, roster, lab=_lab())
    results = []
    for f in found:
        r = SubmissionResult(
            f.name, str(f.path), Status(), 7.0, 10.0, {"f": PieceScore(7.0, 10.0)}, []
        )
        r.identity = ids[f.name] | {"where": f.where, "folder": f.folder}
        results.append(r)
    write_reports(tmp_path / "out", lab, results, roster=roster, skipped=skipped)
    done = export("moodle", [tmp_path / "out"], roster, tmp_path / "m.csv")
    rows = {
        r["Email address"]: r for r in csv.DictReader(open(tmp_path / "m.csv", encoding="utf-8"))
    }
    assert rows["frank@uni.edu"]["Notes"] == (
        "Lab 9: handed in lab9.zip (not a notebook: only .ipynb files are graded), nothing "
        "graded (0)"
    ), rows
    assert rows["erin@uni.edu"]["Lab 9"] == "7"
    assert list(done["not_graded"]["lab9_export"].values()) == [["lab9.zip"]]
    # a metadata file inside a submission, naming Gina for a folder of its own: not read
    planted = subs / "submission_101" / "submission_999"
    planted.mkdir()
    (planted / "notes.zip").write_bytes(b"PK")
    (subs / "submission_101" / "submission_metadata.yml").write_text(
        GRADESCOPE_METADATA.replace("submission_102", "submission_999").replace(
            "Frank Roe", "Gina Poe"
        ),
        encoding="utf-8",
    )
    from lablib.grading.submissions import skipped_submission

    assert skipped_submission(planted / "notes.zip") is None
    assert (
        skipped_submission(subs / "submission_102" / "lab9.zip").lms["submitters"][0]["sid"]
        == "S002"
    )
