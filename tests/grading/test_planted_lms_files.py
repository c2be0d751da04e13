"""What a student uploads cannot speak for the LMS: a ``submission_metadata.yml`` inside a
student's submission is never read (it could forge who submitted and when, or stop the
whole class with a file that does not parse), and a student's file named as Canvas names
its files does not take the notebook out of the student's Moodle or Gradescope folder."""

from __future__ import annotations

import pytest

from lablib.grading.submissions import (
    PLAIN_METADATA,
    PLANTED_METADATA,
    LayoutWarning,
    find_submissions,
)

EXPORT = """submission_1:
  :submitters:
  - :name: Alice Smith
    :sid: S001
    :email: alice@uni.example
  :created_at: 2026-11-25 10:00:00.000000000 Z
submission_2:
  :submitters:
  - :name: Mallory Jones
    :sid: S002
    :email: mallory@uni.example
  :created_at: 2026-11-26 23:00:00.000000000 Z
"""

# Mallory's own file: her submission made a week earlier, Alice in her group.
FORGED = """sub:
  :submitters:
  - :name: Mallory Jones
    :sid: S002
  - :name: Alice Smith
    :sid: S001
  :created_at: 2026-11-01 10:00:00.000000000 Z
"""


def _book(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    return path


def _export(root, planted_at, planted=FORGED):
    _book(root / "submission_1" / "lab1.ipynb")
    (root / "submission_metadata.yml").write_text(EXPORT)
    _book(root / "submission_2" / "sub" / "lab1.ipynb")
    (root / planted_at).parent.mkdir(parents=True, exist_ok=True)
    (root / planted_at / "submission_metadata.yml").write_text(planted)


@pytest.mark.parametrize("where", ["export", "classes/export", "classes/Sec-01/export"])
@pytest.mark.parametrize("planted_at", ["submission_2", "submission_2/sub"])
def test_a_metadata_file_in_a_submission_forges_nothing(tmp_path, where, planted_at):
    root = tmp_path / where
    _export(root, planted_at)
    refused = []
    found = {f.name: f for f in find_submissions([tmp_path / where.split("/")[0]], refused)}
    assert sorted(found) == ["Alice Smith", "Mallory Jones"]
    mallory = found["Mallory Jones"].lms
    assert mallory["submitted_at"].startswith("2026-11-26T23:00")  # the export's time
    assert [p["sid"] for p in mallory["submitters"]] == ["S002"]  # Alice not in her group
    assert found["Mallory Jones"].folder.endswith("submission_2")
    [(path, reason)] = refused
    assert path == root / planted_at / "submission_metadata.yml"
    assert reason == PLANTED_METADATA.format(folder=f"{where}/submission_2".split("/", 1)[1])


@pytest.mark.parametrize("planted_at", ["submission_2", "submission_2/sub"])
def test_a_broken_metadata_file_in_a_submission_does_not_stop_the_class(tmp_path, planted_at):
    _export(tmp_path / "export", planted_at, planted=": [")
    refused = []
    found = find_submissions([tmp_path / "export"], refused)
    assert sorted(f.name for f in found) == ["Alice Smith", "Mallory Jones"]
    assert [p.name for p, _ in refused] == ["submission_metadata.yml"]


def test_a_metadata_file_in_a_moodle_or_plain_student_folder_is_not_read(tmp_path):
    subs = tmp_path / "subs"
    _book(subs / "Mallory Jones_102_assignsubmission_file_" / "lab1.ipynb")
    (subs / "Mallory Jones_102_assignsubmission_file_" / "submission_metadata.yml").write_text(
        ": ["
    )
    _book(subs / "carol" / "lab1.ipynb")  # a student's folder: it holds a notebook itself
    _book(subs / "carol" / "sub" / "submission_3" / "lab1.ipynb")
    (subs / "carol" / "sub" / "submission_metadata.yml").write_text(
        "submission_3:\n  :submitters:\n  - :name: Alice Smith\n"
    )
    refused = []
    with pytest.warns(LayoutWarning, match=r"students' own folders \(carol\)"):
        found = {f.name: f for f in find_submissions([subs], refused)}
    assert "Alice Smith" not in found and "Mallory Jones" in found
    assert found["Mallory Jones"].lms["participant_id"] == "102"
    assert sorted(str(p.relative_to(subs)) for p, _ in refused) == [
        "Mallory Jones_102_assignsubmission_file_/submission_metadata.yml",
        "carol/sub/submission_metadata.yml",
    ]


def test_a_notebook_given_by_path_reads_only_its_exports_metadata(tmp_path):
    export = tmp_path / "export"
    _export(export, "submission_2")
    _book(export / "submission_2" / "submission_9" / "lab1.ipynb")
    (export / "submission_2" / "submission_metadata.yml").write_text(
        "submission_9:\n  :submitters:\n  - :name: Alice Smith\n"
    )
    refused = []
    [found] = find_submissions([export / "submission_2" / "submission_9" / "lab1.ipynb"], refused)
    assert found.name == "lab1" and found.lms == {}
    assert [p for p, _ in refused] == [export / "submission_2" / "submission_metadata.yml"]
    [honest] = find_submissions([export / "submission_1" / "lab1.ipynb"])
    assert honest.name == "Alice Smith" and honest.lms["submitters"][0]["sid"] == "S001"


@pytest.mark.parametrize("file", ["Alice Smith_1_123_lab1.ipynb", "lab1_2_100_final.ipynb"])
def test_a_canvas_like_file_name_stays_in_its_lms_folder(tmp_path, file):
    subs = tmp_path / "subs"
    _book(subs / "Mallory Jones_102_assignsubmission_file_" / file)
    _book(subs / "export" / "submission_2" / file)
    (subs / "export" / "submission_metadata.yml").write_text(EXPORT)
    found = {f.name: f for f in find_submissions([subs], [])}
    assert sorted(found) == ["Mallory Jones", "Mallory Jones-2"]
    assert {f.lms["lms"] for f in found.values()} == {"moodle", "gradescope"}
    moodle = next(f for f in found.values() if f.lms["lms"] == "moodle")
    assert moodle.lms["participant_id"] == "102"
    # given by its path, the same notebook is the folder's too
    [given] = find_submissions([subs / "Mallory Jones_102_assignsubmission_file_" / file])
    assert given.name == "Mallory Jones" and given.lms["participant_id"] == "102"
    [given] = find_submissions([subs / "export" / "submission_2" / file])
    assert given.name == "Mallory Jones" and given.lms["lms"] == "gradescope"


def test_a_moodle_flat_file_whose_name_looks_like_canvas_is_moodles(tmp_path):
    name = "Alice Smith_7300001_assignsubmission_file_hw_1_2023_final.ipynb"
    _book(tmp_path / "subs" / name)
    [found] = find_submissions([tmp_path / "subs"], [])
    assert found.name == "Alice Smith" and found.lms["lms"] == "moodle"
    assert found.lms["participant_id"] == "7300001"
    [given] = find_submissions([tmp_path / "subs" / name])
    assert given.name == "Alice Smith" and given.lms["participant_id"] == "7300001"


def test_a_canvas_file_that_names_a_moodle_file_stays_the_canvas_students(tmp_path):
    """Canvas's prefix is the LMS's, the rest the student's own file name: a name that
    also parses as a Moodle flat file is the Canvas student's, late marker kept."""
    subs = tmp_path / "subs"
    _book(subs / "andersonemma_184001_9000001_lab1.ipynb")
    hostile = (
        "smithmallory_LATE_184002_9000002_x-andersonemma_1234_assignsubmission_file_lab1.ipynb"
    )
    _book(subs / hostile)
    found = {f.name: f for f in find_submissions([subs], [])}
    assert sorted(found) == ["andersonemma", "smithmallory"]
    mallory = found["smithmallory"].lms
    assert mallory["lms"] == "canvas" and mallory["user_id"] == "184002" and mallory["late"]
    [given] = find_submissions([subs / hostile])
    assert given.name == "smithmallory" and given.lms["user_id"] == "184002"


def test_a_moodle_flat_file_of_a_group_named_by_digits_is_moodles(tmp_path):
    """Canvas's prefix always has a name or anon_<id>: a Moodle flat file of group "1"
    (``1_5001_assignsubmission_file_lab.ipynb``) is not a nameless Canvas file."""
    _book(tmp_path / "subs" / "1_5001_assignsubmission_file_lab.ipynb")
    _book(tmp_path / "subs" / "anon_k2x9_9000001_lab.ipynb")
    found = {f.name: f.lms for f in find_submissions([tmp_path / "subs"], [])}
    assert found["1"]["lms"] == "moodle" and found["1"]["participant_id"] == "5001"
    assert found["anon_k2x9"]["lms"] == "canvas"


def _plain_class(root):
    """A plain layout of one folder per student (a course that clones students'
    repositories): alice and bob honest."""
    _book(root / "alice" / "lab1.ipynb")
    _book(root / "bob" / "lab1.ipynb")


PLANTED = [
    "smithalice_184002_9000002_lab1.ipynb",  # Canvas's flat name, Alice's user id
    "smithalice_LATE_184002_9000002_lab1.ipynb",
    "Alice Smith_7300001_assignsubmission_file_lab1.ipynb",  # Moodle's flat name
    "Alice Smith_7300001_assignsubmission_file_/lab1.ipynb",  # Moodle's folder
    "submission_1/lab1.ipynb",  # with a forged export's metadata beside it
]


def _plant(folder, planted):
    _book(folder / planted)
    if planted.startswith("submission_1/"):
        (folder / "submission_metadata.yml").write_text(FORGED.replace("sub:", "submission_1:"))


@pytest.mark.parametrize("planted", PLANTED)
@pytest.mark.parametrize("where", ["top", "sections", "deep"])
def test_lms_shapes_in_a_plain_layout_are_the_students_with_layout_plain(tmp_path, planted, where):
    """Nothing in a plain layout tells a student's folder from a section of LMS downloads:
    with --layout plain no LMS's shape is read, each folder at the top of a folder given
    names every notebook in it, and a metadata file is not read."""
    root = tmp_path / "subs"
    if where == "sections":  # given as folders of their own
        _plain_class(root / "Sec-01")
        _plant(root / "Sec-02" / "mallory", planted)
        paths = [root / "Sec-01", root / "Sec-02"]
    else:
        _plain_class(root)
        _plant(root / "mallory" / ("work" if where == "deep" else ""), planted)
        paths = [root]
    refused = []
    found = {f.name: f for f in find_submissions(paths, refused, layout="plain")}
    assert sorted(found) == ["alice", "bob", "mallory"]
    assert all(f.lms == {} for f in found.values())
    assert found["mallory"].folder == "mallory"
    if planted.startswith("submission_1/"):
        assert [(p.name, why) for p, why in refused] == [
            ("submission_metadata.yml", PLAIN_METADATA)
        ]
    else:
        assert refused == []


def test_a_folder_named_as_a_classmate_inside_a_students_folder_is_theirs(tmp_path):
    """By the plain rule a student's folder is the first that holds a notebook, so a
    student could nest one named as a classmate; with --layout plain the top folder names
    it all."""
    root = tmp_path / "subs"
    _plain_class(root)
    _book(root / "mallory" / "alice" / "lab1.ipynb")
    _book(root / "mallory" / "lab1.ipynb")
    found = sorted(f.name for f in find_submissions([root], [], layout="plain"))
    assert found == ["alice", "bob", "mallory/alice/lab1", "mallory/lab1"]


@pytest.mark.parametrize("planted", PLANTED)
def test_a_plain_layout_with_lms_shapes_is_named_in_a_warning(tmp_path, planted):
    """Read by their shapes (the default), the LMS-shaped files of a plain layout are read
    as the LMS's, and the command says so, naming both, and what to pass."""
    root = tmp_path / "subs"
    _plain_class(root)
    _plant(root / "mallory", planted)
    with pytest.warns(LayoutWarning) as caught:
        found = find_submissions([root], [])
    [warning] = caught
    message = str(warning.message)
    assert "students' own folders (alice, bob)" in message, message
    assert "in mallory" in message and "--layout plain" in message, message
    assert any(f.lms for f in found)  # read as the LMS's, as the warning says


def test_lms_downloads_alone_give_no_layout_warning(tmp_path, recwarn):
    """An LMS download by itself, or sorted into section folders, says nothing."""
    moodle = tmp_path / "moodle"
    _book(moodle / "Sec-01" / "Alice Smith_7300001_assignsubmission_file_" / "lab1.ipynb")
    _book(moodle / "Sec-02" / "Bob Lee_7300002_assignsubmission_file_lab1.ipynb")
    canvas = tmp_path / "canvas"
    _book(canvas / "smithalice_184002_9000002_lab1.ipynb")
    gradescope = tmp_path / "gradescope"
    _export(gradescope, "submission_2", planted=EXPORT)
    found = {f.name: f.lms.get("lms") for f in find_submissions([moodle, canvas, gradescope], [])}
    assert found["Alice Smith"] == found["Bob Lee"] == "moodle"
    assert found["smithalice"] == "canvas" and found["Mallory Jones"] == "gradescope"
    assert not [w for w in recwarn if issubclass(w.category, LayoutWarning)]


def test_an_honest_mixed_folder_keeps_its_lms_rows_and_is_named(tmp_path):
    """A late student's plain folder beside a section of LMS downloads: the downloads stay
    the LMS's (user ids, the LATE marker), and the warning names both."""
    root = tmp_path / "subs"
    _book(root / "carol" / "lab1.ipynb")
    _book(root / "Sec-01" / "smithalice_184002_9000002_lab1.ipynb")
    _book(root / "Sec-01" / "leebob_LATE_184003_9000003_lab1.ipynb")
    with pytest.warns(LayoutWarning, match=r"students' own folders \(carol\).*in Sec-01"):
        found = {f.name: f.lms for f in find_submissions([root], [])}
    assert found["smithalice"]["user_id"] == "184002"
    assert found["leebob"]["late"] is True and found["carol"] == {}


def test_layout_plain_for_a_notebook_given_by_path_and_a_bad_layout(tmp_path):
    export = tmp_path / "export"
    _export(export, "submission_2", planted=EXPORT)
    [given] = find_submissions([export / "submission_1" / "lab1.ipynb"], [], layout="plain")
    assert given.name == "lab1" and given.lms == {}
    with pytest.raises(ValueError, match="expected one of auto, plain"):
        find_submissions([export], [], layout="canvas")
