"""LMS download names read as the LMS writes them (lablib.grading.lms) and found among the
submissions (find_submissions): Canvas's "Download Submissions" files, Moodle's "Download
all submissions" folders, Gradescope's "Export Submissions" with its metadata, mixed with
plain folders; hostile names made harmless."""

from __future__ import annotations

import unicodedata

import pytest

from lablib.grading.lms import (
    LmsDownloadError,
    canvas_name,
    canvas_slug,
    canvas_splits,
    clean_label,
    moodle_file_forms,
    moodle_name,
    moodle_time,
    read_gradescope_metadata,
)
from lablib.grading.submissions import LayoutWarning, find_submissions


def _book(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    return path


@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "andersonemma_184001_9000001_lab4_gat.ipynb",
            {
                "name": "andersonemma",
                "user_id": "184001",
                "attachment_id": "9000001",
                "late": False,
                "file": "lab4_gat.ipynb",
            },
        ),
        (
            "andersonemma_LATE_184001_9000001_lab4_gat.ipynb",
            {"late": True, "user_id": "184001", "name": "andersonemma"},
        ),
        (
            "o_brienpat_12_345_x_1_2_y.ipynb",
            {"name": "o_brienpat", "user_id": "12", "file": "x_1_2_y.ipynb"},
        ),
        ("anon_ab3d9_9000001_lab.ipynb", {"name": "", "anonymous_id": "ab3d9", "late": False}),
        ("LATE_anon_ab3d9_9000001_lab.ipynb", {"name": "", "anonymous_id": "ab3d9", "late": True}),
        (
            unicodedata.normalize("NFD", "núñezjosé_7_800_lab.ipynb"),
            {"name": "núñezjosé", "user_id": "7"},
        ),
        ("王小明_55_1234_lab-1.ipynb", {"name": "王小明", "file": "lab-1.ipynb"}),
    ],
)
def test_canvas_download_names(name, expected):
    found = canvas_name(name)
    assert found is not None and found["lms"] == "canvas"
    assert {k: found.get(k) for k in expected} == expected


@pytest.mark.parametrize(
    "name",
    [
        "s01.ipynb",
        "lab1_2_3.ipynb",
        "hw_1_22_final.ipynb",
        "erin_lab1.ipynb",
        "andersonemma_184001_lab1.ipynb",
    ],
)
def test_other_names_are_not_canvas_downloads(name):
    assert canvas_name(name) is None  # an attachment id has at least 3 digits


def test_a_canvas_name_read_in_several_ways_gives_every_reading():
    """content_zipper.rb collapses "_<digits>_" in a sortable name but not a final
    "_1002" (nor one the removal of "-" makes): such a file name reads in several ways,
    each kept, none taken (the roster decides), and a LATE marker in any counts."""
    found = canvas_name("mallory_1002_1005_9000005_lab.ipynb")
    assert found["name"] == "mallory" and "user_id" not in found and not found["late"]
    assert [
        (c["name"], c["user_id"], c["attachment_id"], c["file"]) for c in found["candidates"]
    ] == [
        ("mallory", "1002", "1005", "9000005_lab.ipynb"),
        ("mallory_1002", "1005", "9000005", "lab.ipynb"),
    ]
    late = canvas_name("mallory_1005_000_LATE_1005_9000006_lab.ipynb")
    assert late["late"] and late["late_disputed"]
    assert [(c["name"], c["late"]) for c in late["candidates"]] == [
        ("mallory", False),
        ("mallory_1005_000", True),
    ]
    assert canvas_slug("Mallory_1005-_000") == "mallory_1005_000"
    assert canvas_slug("Mallory_1002") == "mallory_1002" and canvas_slug("a_12_b") == "a12b"
    assert canvas_slug("Doe, Erin") == "doeerin" and canvas_slug("हिन्दी, राम") == "हिन्दीराम"
    # only readings Canvas can have written: its names are lower case, without spaces
    assert [c["name"] for c in canvas_splits("doeerin_1001_9000001_Lab_3_2024_x.ipynb")] == [
        "doeerin"
    ]
    assert canvas_name("Erin Doe_12_345_lab.ipynb") is None
    assert [c.get("anonymous_id") for c in canvas_splits("anon_ab3d9_9000001_x_1_234_y")] == [
        "ab3d9",
        None,
    ]
    assert len(canvas_splits("LATE_anon_ab3d9_9000001_x_1_234_y")) == 1, "LATE is no name"


def test_moodle_download_names():
    folder = moodle_name("Emma Anderson_1234567_assignsubmission_file_")
    assert folder == {
        "lms": "moodle",
        "name": "Emma Anderson",
        "participant_id": "1234567",
        "plugin": "file",
        "file": "",
    }
    flat = moodle_name("Emma Anderson_1234567_assignsubmission_file_lab1.ipynb")
    assert flat["file"] == "lab1.ipynb" and flat["participant_id"] == "1234567"
    assert (
        moodle_name("Team 3-Emma Anderson_42_assignsubmission_onlinetext_")["plugin"]
        == "onlinetext"
    )
    assert moodle_name("Participant_99_assignsubmission_file_")["name"] == "Participant"
    assert moodle_name("Emma Anderson_1234567_assignsubmission_file") == folder, (
        "downloader.php: no last '_'"
    )
    assert moodle_name("Emma Anderson") is None and moodle_name("lab1.ipynb") is None
    assert moodle_time("Wednesday, 10 June 2026, 2:14 PM").startswith("2026-06-10T14:14")
    assert moodle_time("Wednesday, September 23, 2020, 9:00 PM").startswith("2020-09-23T21:00")
    assert (
        moodle_time("-") == "" and moodle_time("next week") == "next week"
    )  # unread: the late policy says so


def test_moodle_team_download_names():
    """A team assignment's download (mod/assign/classes/downloader.php): one folder per
    group, ``<group name>_<group id>``, "Default group" without an id; which number is a
    group's is decided against the roster, so the name alone keeps it as written."""
    team = moodle_name("Team Rocket_42_assignsubmission_file")
    assert (team["name"], team["participant_id"], team["file"]) == ("Team Rocket", "42", "")
    assert "group" not in team, "a number alone does not say whose it is"
    default = moodle_name("Default group_assignsubmission_file")
    assert default == {
        "lms": "moodle",
        "name": "Default group",
        "participant_id": "",
        "plugin": "file",
        "file": "",
        "group": "Default group",
        "group_id": "",
    }
    flat = moodle_name("Default group_assignsubmission_file_lab1.ipynb")
    assert flat["file"] == "lab1.ipynb" and flat["group"] == "Default group"
    # locallib.php before 4.1: one copy per member, "<group>-<Full name>_<participant id>"
    copy = moodle_name("Team-3 - Ω-Emma Anderson_7300000_assignsubmission_file_")
    assert copy["name"] == "Team-3 - Ω-Emma Anderson" and copy["participant_id"] == "7300000"
    assert moodle_name("2024_55_assignsubmission_file")["name"] == "2024", "a group named 2024"


@pytest.mark.parametrize(
    "group, written, formatted",
    [
        ("Team_A", "Team A", False),  # "_" is the prefix's separator: Moodle writes a space
        ("Team_A", "Team A", True),
        ("R&D", "RD", False),  # locallib.php's copies: the name as it is, "&" dropped
        ("R&D", "Ramp;D", True),  # downloader.php: format_string writes "&amp;" first
        ('<b>Bold</b> "q" a|b:c/d', "bBoldb q abcd", False),  # copies: tags' <, > dropped
        ("<b>Bold</b>", "Bold", True),  # format_string removes the tags
        ("O'Brien's", "OBriens", False),
        ("Équipe\u0301 é", unicodedata.normalize("NFD", "ÉQUIPE\u0301 É"), True),  # NFD, case
        ("Tab\there\x07", "Tabhere", True),  # control characters removed
        ("Bidi \u202eevil", "Bidi ?evil", False),  # as lablib shows the download's names
    ],
)
def test_moodle_writes_group_names_as_the_forms_say(group, written, formatted):
    from lablib.grading.lms import fold

    assert moodle_file_forms(group, formatted=formatted) == {
        fold(clean_label(unicodedata.normalize("NFC", written)))
    }


def test_moodle_file_forms_tell_names_apart():
    assert moodle_file_forms("Team A") == {"team a"}
    assert moodle_file_forms("Team A") & moodle_file_forms("Team B") == set()
    assert moodle_file_forms("Team_A") == moodle_file_forms("Team A"), "Moodle writes both alike"
    assert moodle_file_forms("") == set() and moodle_file_forms("\x00") == set()
    # Moodle 4.1's group folders write the name through format_string, the copies per
    # member before 4.1 as it is: "R&D" is "Ramp;D" in one and "RD" in the other, and
    # never the honest group "RD"'s folder
    assert moodle_file_forms("R&D", formatted=True) == {"ramp;d"}
    assert moodle_file_forms("RD", formatted=True) == {"rd"}
    assert moodle_file_forms("R&D") == {"rd"}


GRADESCOPE = """submission_409194023:
  :submitters:
  - :name: First Last
    :sid: '123456789'
    :email: first@uni.example
  :created_at: 2026-04-26 17:34:00.861687000 Z
  :score: 2.0
  :history:
  - :created_at: 2026-04-25 10:00:00.000000000 -0700
    :score: 1.0
submission_500000001:
  :submitters:
  - :name: Alice A
    :sid: '111'
    :email: alice@uni.example
  - :name: Bob B
    :sid: '222'
    :email: bob@uni.example
  :created_at: 2026-04-26 09:00:00.000000000 -0700
submission_600000002:
  :submitters: []
"""


def test_gradescope_metadata_is_parsed_once_per_content(tmp_path, monkeypatch):
    """An export lists a student's 3,000 data files, and each was placed by reading the
    class's metadata again (about 0.1 s each: six minutes for one student). The same
    bytes are parsed once; what a caller changes in the answer changes no later one; a
    file rewritten is read anew."""
    import yaml

    path = tmp_path / "submission_metadata.yml"
    path.write_text(GRADESCOPE)
    parsed = []
    real = yaml.safe_load
    monkeypatch.setattr(yaml, "safe_load", lambda text: parsed.append(1) or real(text))
    first = read_gradescope_metadata(path)
    first["submission_409194023"]["submitters"].clear()
    again = read_gradescope_metadata(path)
    assert len(parsed) == 1 and again["submission_409194023"]["submitters"][0]["sid"] == "123456789"
    path.write_text(GRADESCOPE.replace("123456789", "987654321"))
    changed = read_gradescope_metadata(path)
    assert (
        len(parsed) == 2 and changed["submission_409194023"]["submitters"][0]["sid"] == "987654321"
    )


def test_gradescope_metadata(tmp_path):
    path = tmp_path / "submission_metadata.yml"
    path.write_text(GRADESCOPE)
    meta = read_gradescope_metadata(path)
    first = meta["submission_409194023"]
    assert first["submitters"] == [
        {"name": "First Last", "sid": "123456789", "email": "first@uni.example"}
    ]
    assert first["submitted_at"] == "2026-04-26T17:34:00+00:00" and first["history"] == [
        "2026-04-25T10:00:00-07:00"
    ]
    assert [p["sid"] for p in meta["submission_500000001"]["submitters"]] == ["111", "222"]
    assert meta["submission_500000001"]["submitted_at"] == "2026-04-26T09:00:00-07:00"
    assert (
        meta["submission_600000002"]["submitters"] == []
        and meta["submission_600000002"]["submitted_at"] == ""
    )
    path.write_text("submission_1:\n  :submitters: [\n")
    with pytest.raises(
        LmsDownloadError,
        match="cannot be read as Gradescope's submission metadata.*download the export again",
    ):
        read_gradescope_metadata(path)
    path.write_text("- a list\n")
    with pytest.raises(LmsDownloadError, match="expected a mapping"):
        read_gradescope_metadata(path)
    with open(path, "wb") as f:  # sparse: no disk used
        f.truncate(65 * 2**20)
    with pytest.raises(LmsDownloadError, match="is 65 MB, more than"):
        read_gradescope_metadata(path)


def test_a_broken_gradescope_export_is_an_error_not_a_class_of_strangers(tmp_path):
    _book(tmp_path / "export" / "submission_1" / "lab.ipynb")
    (tmp_path / "export" / "submission_metadata.yml").write_text("{{{")
    with pytest.raises(LmsDownloadError):
        find_submissions([tmp_path / "export"])


def test_find_submissions_in_every_layout_at_once(tmp_path):
    subs = tmp_path / "subs"
    _book(subs / "Sec-03" / "ivanovazoë_LATE_184003_9000003_lab1_attention.ipynb")
    _book(subs / "andersonemma_184000_9000000_lab1_attention.ipynb")
    _book(
        subs
        / "moodle"
        / unicodedata.normalize("NFD", "José Núñez_7300017_assignsubmission_file_")
        / "lab1.ipynb"
    )
    _book(
        subs / "moodle" / "Sec-03" / "Emma Anderson_7300000_assignsubmission_file_" / "lab1.ipynb"
    )
    export = subs / "gs" / "assignment_777_export"
    (export / "Sec-03" / "submission_409194023").mkdir(parents=True)
    _book(export / "Sec-03" / "submission_409194023" / "lab1.ipynb")
    _book(export / "submission_500000001" / "lab1.ipynb")
    (export / "submission_metadata.yml").write_text(GRADESCOPE)
    _book(subs / "Sec-01" / "mivanova" / "lab1.ipynb")  # a section folder of one student
    _book(subs / "__MACOSX" / "._lab1.ipynb")
    refused = []
    with pytest.warns(LayoutWarning) as caught:  # a plain folder among the downloads: said
        found = {f.name: f for f in find_submissions([subs], refused)}
    [warning] = caught
    assert "students' own folders (Sec-01)" in str(warning.message), warning.message
    assert "(the top), Sec-03, gs/assignment_777_export and 2 more" in str(warning.message)
    assert sorted(found) == [
        "Alice A",
        "Emma Anderson",
        "First Last",
        "José Núñez",
        "andersonemma",
        "ivanovazoë",
        "mivanova",
    ]
    assert found["ivanovazoë"].lms["late"] and found["ivanovazoë"].lms["user_id"] == "184003"
    assert found["José Núñez"].lms["participant_id"] == "7300017" and unicodedata.is_normalized(
        "NFC", "José Núñez"
    )
    assert found["First Last"].lms["submitted_at"] == "2026-04-26T17:34:00+00:00"
    assert found["First Last"].folder.endswith("Sec-03/submission_409194023")
    assert found["mivanova"].folder == "Sec-01/mivanova" and found["mivanova"].lms == {}
    assert refused == [], "the metadata is read, not listed; __MACOSX is passed over"
    # a notebook given by its path carries what its download says
    one = find_submissions([export / "submission_500000001" / "lab1.ipynb"])[0]
    assert one.name == "Alice A" and [p["sid"] for p in one.lms["submitters"]] == ["111", "222"]
    assert (
        find_submissions([subs / "andersonemma_184000_9000000_lab1_attention.ipynb"])[0].lms[
            "user_id"
        ]
        == "184000"
    )


def test_hostile_names_are_made_harmless(tmp_path):
    """Names from an LMS download reach the gradebook, the terminal and the exports: no
    control or bidi characters, no path separators."""
    assert clean_label("evil\x1b[2J\u202ename") == "evil?[2J?name"
    assert clean_label("../../etc/passwd") == ".._.._etc_passwd"
    meta = tmp_path / "export" / "submission_metadata.yml"
    _book(tmp_path / "export" / "submission_1" / "lab.ipynb")
    meta.write_text(
        "submission_1:\n  :submitters:\n  - :name: \"../../x\\e[31m\\u202Eevil\"\n    :sid: '=1+1'\n"
    )
    found = find_submissions([tmp_path / "export"])[0]
    assert found.name == ".._.._x?[31m?evil" and found.lms["submitters"][0]["sid"] == "=1+1"
    assert found.path == tmp_path / "export" / "submission_1" / "lab.ipynb"


def test_find_submissions_in_a_moodle_team_download(tmp_path):
    """downloader.php's team folders are found as Moodle's, named by their group; before,
    a "Default group" folder (no number) was taken for a student's folder of that name."""
    subs = tmp_path / "subs"
    _book(subs / "Team Rocket_42_assignsubmission_file" / "lab1.ipynb")
    _book(subs / "Default group_assignsubmission_file" / "lab1.ipynb")
    _book(subs / "R;D-x_7_assignsubmission_file" / "drafts" / "lab1.ipynb")
    found = {f.name: f for f in find_submissions([subs])}
    assert sorted(found) == ["Default group", "R;D-x", "Team Rocket"]
    assert found["Default group"].lms["group"] == "Default group"
    assert found["Default group"].lms["participant_id"] == ""
    assert found["Team Rocket"].lms["participant_id"] == "42"
    assert found["R;D-x"].folder == "R;D-x_7_assignsubmission_file"
    one = find_submissions([subs / "Default group_assignsubmission_file" / "lab1.ipynb"])[0]
    assert one.name == "Default group" and one.lms["group_id"] == ""


def test_an_archive_given_as_a_path_is_refused_saying_to_unzip_it(tmp_path, capsys):
    """The LMS's download zip given as the path was graded as one notebook,
    ``invalid-notebook`` 0 points, and the command succeeded: refused (exit status 2),
    saying to unzip it and give the folder; nothing is graded. A zip archive named
    otherwise is one too; a student's ``.ipynb`` that is no notebook is still graded (as
    unreadable), and a zip inside a folder given is listed as not graded, as before. The
    output folder is not made before the path is refused."""
    import zipfile

    from lablib.cli import main
    from grading_paths import FIXTURE_HIDDEN, FIXTURE_LAB, FIXTURE_SOLUTION

    download = tmp_path / "submissions.zip"
    with zipfile.ZipFile(download, "w") as z:
        z.writestr("ann_1001_9001_lab0.ipynb", "{}")
    unnamed = tmp_path / "download"
    unnamed.write_bytes(download.read_bytes())
    (tmp_path / "class.tar.gz").write_bytes(b"\x1f\x8b")
    for path, says in (
        (download, "is a zip archive, not a notebook"),
        (unnamed, "is a zip archive, not a notebook"),
        (tmp_path / "class.tar.gz", "is an archive, not a notebook"),
    ):
        with pytest.raises(ValueError) as caught:
            find_submissions([path])
        assert says in str(caught.value) and "give the folder" in str(caught.value)
    assert "unzip submissions.zip -d submissions" in str(
        pytest.raises(ValueError, find_submissions, [download]).value
    )
    out = tmp_path / "out"
    given = ["--tests", str(FIXTURE_HIDDEN), "--lab-notebook", str(FIXTURE_SOLUTION)]
    assert main(["grade", str(FIXTURE_LAB), str(download), "-o", str(out), *given]) == 2
    said = capsys.readouterr().err
    assert "lablib grade: error:" in said and "Unzip the LMS's download" in said, said
    assert not out.exists()  # nothing made: no folder, no lock left behind
    posing = tmp_path / "w03.ipynb"  # a student's file: graded, as unreadable
    posing.write_bytes(download.read_bytes())
    assert [f.name for f in find_submissions([posing])] == ["w03"]
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "ann.zip").write_bytes(download.read_bytes())
    refused: list = []
    assert find_submissions([folder], refused) == [] and len(refused) == 1
