"""Submission names and feedback file names: unique, collision-free, symlinks kept inside."""

import json
import os
import pathlib
import shutil
import unicodedata

import pytest

from lablib.grading.submissions import NOT_A_NOTEBOOK, SubmissionSkipped, collect_submissions
from lablib.grading.filenames import same_file
from lablib.grading.gradebook import feedback_stems
from lablib.grading.report import write_reports
from grading_paths import FIXTURE_SOLUTION


def _book(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    return path


def test_names_unique_across_folders(tmp_path):
    _book(tmp_path / "d1" / "alice.ipynb")
    _book(tmp_path / "d2" / "alice.ipynb")
    _book(tmp_path / "d3" / "alice-2.ipynb")
    _book(tmp_path / "d4" / "Alice.ipynb")
    found = collect_submissions(
        [tmp_path / "d1", tmp_path / "d2", tmp_path / "d3", tmp_path / "d4"]
    )
    names = [name for name, _ in found]
    assert names == ["alice", "alice-3", "alice-2", "Alice-4"]  # alice-2 keeps its own name
    assert len({n.casefold() for n in names}) == len(names)
    assert [p.parent.name for _, p in found] == ["d1", "d2", "d3", "d4"]


def test_feedback_stems_never_collide():
    names = [
        "Smith, John",
        "Smith_ John",
        "alice/hw",
        "alice_hw",
        "bob",
        "Bob",
        "carol",
        ".hidden",
        "x" * 300,
        "x" * 300 + "y",
        "alıce",  # Turkish dotless i: NTFS upper-cases it to I, one file with "alice"
        "alice",
        "José",
        "JOSÉ",
    ]
    stems = feedback_stems(names)
    assert len({same_file(s) for s in stems.values()}) == len(names)
    assert same_file("alıce") == same_file("ALICE") == same_file("alice")
    assert same_file("Jose\u0301") == same_file("josé") != same_file("jose")
    assert stems["carol"] == "carol"  # a safe, unshared name is kept as it is
    assert stems["Smith, John"].startswith("Smith__John-") and stems["Smith_ John"].startswith(
        "Smith__John-"
    )
    assert stems["alice/hw"] != stems["alice_hw"]
    assert not stems[".hidden"].startswith(".")
    assert all("/" not in s and len(s) < 140 for s in stems.values())
    assert feedback_stems(reversed(names)) == stems  # independent of the order


def test_write_reports_one_file_per_submission(fixture_lab, tmp_path):
    from lablib.grading.judge import summarise
    from lablib.grading.results import Status, TestResult

    names = ["Smith, John", "Smith_ John", "alice/hw", "alice_hw"]
    results = []
    for i, name in enumerate(names):
        tests = [
            TestResult(
                t.id, t.piece, t.name, t.points if i % 2 else 0.0, t.points, bool(i % 2), t.hidden
            )
            for t in fixture_lab.tests
        ]
        results.append(summarise(fixture_lab, name, f"/subs/{i}.ipynb", tests, Status()))
    write_reports(tmp_path, fixture_lab, results)
    files = sorted(p.name for p in (tmp_path / "feedback").glob("*.md"))
    assert len(files) == 4
    import json

    data = json.loads((tmp_path / "grades.json").read_text())
    for entry in data["submissions"]:  # each entry names its own file, which is about it
        text = (tmp_path / (entry["feedback"] + ".md")).read_text()
        assert f"feedback for {entry['submission']}" in text


@pytest.mark.parametrize(
    "name, listed",
    [
        ("José", lambda n: unicodedata.normalize("NFD", n)),  # macOS's HFS+
        ("Alice", str.lower),  # case-insensitive, keeping the case a file had first
    ],
)
def test_a_report_listed_under_another_form_of_its_name_stays(
    fixture_lab, tmp_path, monkeypatch, name, listed
):
    """A file system that opens a name in any of its forms but lists another form than the
    one written: the feedback just written was listed as another file, about no
    submission, and removed (José's on an HFS+ drive; a row whose name changed case).
    Emulated: the folder lists each name in the other form, and either form opens the
    one file."""
    from lablib.grading.judge import summarise
    from lablib.grading.results import Status

    def key(n):
        return unicodedata.normalize("NFC", n).casefold()

    def on_disk(path):  # the entry the name opens, as such a file system finds it
        entries = os.listdir(path.parent) if path.parent.is_dir() else []
        same = [e for e in entries if key(e) == key(path.name)]
        return path.with_name(same[0]) if same else path

    glob, lstat, unlink = pathlib.Path.glob, pathlib.Path.lstat, pathlib.Path.unlink
    monkeypatch.setattr(
        pathlib.Path, "glob", lambda self, p: [q.with_name(listed(q.name)) for q in glob(self, p)]
    )
    monkeypatch.setattr(pathlib.Path, "lstat", lambda self: lstat(on_disk(self)))
    monkeypatch.setattr(
        pathlib.Path, "unlink", lambda self, missing_ok=False: unlink(on_disk(self), missing_ok)
    )
    results = [summarise(fixture_lab, n, f"/subs/{n}.ipynb", [], Status()) for n in (name, "bob")]
    write_reports(tmp_path, fixture_lab, results)
    monkeypatch.undo()
    stems = {r["submission"]: r["feedback"] for r in json.loads(
        (tmp_path / "grades.json").read_text())["submissions"]}  # fmt: skip
    for submission, stem in stems.items():
        assert (tmp_path / f"{stem}.md").is_file(), (submission, os.listdir(tmp_path / "feedback"))
        assert (tmp_path / f"{stem}.html").is_file()


@pytest.fixture()
def tree(tmp_path):
    """subs/ (given to the grader) and outside/ (must never be graded through a link)."""
    subs, outside = tmp_path / "subs", tmp_path / "outside"
    _book(subs / "alice.ipynb")
    _book(subs / "bob" / "lab.ipynb")
    _book(outside / "solutions" / "lab1.ipynb")
    _book(outside / "secret.ipynb")
    return subs, outside


def test_symlinks_leading_outside_are_refused(tree):
    subs, outside = tree
    os.symlink(outside / "solutions", subs / "eve")  # a folder
    os.symlink(outside / "secret.ipynb", subs / "mallory.ipynb")  # a notebook
    os.symlink(outside / "secret.ipynb", subs / "bob" / "extra.ipynb")  # one level down
    os.symlink(subs / "nowhere.ipynb", subs / "broken.ipynb")
    refused = []
    found = collect_submissions([subs], refused=refused)
    assert [name for name, _ in found] == ["alice", "bob"]
    assert all(str(outside) not in str(path) for _, path in found)
    reasons = {path.name: reason for path, reason in refused}
    assert set(reasons) == {"eve", "mallory.ipynb", "extra.ipynb", "broken.ipynb"}
    assert (
        "outside the submissions folder" in reasons["eve"] and "broken" in reasons["broken.ipynb"]
    )
    with pytest.warns(SubmissionSkipped) as caught:  # without a list to fill: one warning each
        collect_submissions([subs])
    assert sorted(str(w.message).split(" is not graded")[0] for w in caught) == sorted(
        str(p) for p, _ in refused
    )
    # a notebook given by path: its own folder is the limit
    refused = []
    assert collect_submissions([subs / "mallory.ipynb"], refused=refused) == []
    assert refused and refused[0][0] == subs / "mallory.ipynb"


def test_symlinks_at_the_top_are_resolved_and_none_inside_a_students_folder(tree):
    """A link at the top of the folder given (the instructor's) is followed, but a
    notebook is graded once: a second path to a notebook graded by its own path (carol ->
    alice's, dave -> bob's folder) is no submission. A link inside a student's folder (a
    repository keeps them) is never followed: erin's link to a file at the top, bob's
    link back up the tree, and what frank's folder (a link to erin's) holds."""
    subs, _ = tree
    (subs / "erin" / "notes").mkdir(parents=True)
    _book(subs / "shared.ipynb.real")
    os.symlink(subs / "alice.ipynb", subs / "carol.ipynb")
    os.symlink(subs / "bob", subs / "dave")
    os.symlink(subs, subs / "bob" / "loop")  # a link back up the tree
    os.symlink(subs, subs / "everyone")
    os.symlink(subs / "shared.ipynb.real", subs / "erin" / "notes" / "lab.ipynb")
    os.symlink(subs / "erin" / "notes", subs / "frank")
    refused = []
    found = dict(collect_submissions([subs], refused=refused))
    assert found == {"alice": subs / "alice.ipynb", "bob": subs / "bob" / "lab.ipynb"}
    reasons = {str(p.relative_to(subs)): r for p, r in refused}
    assert reasons["everyone"] == "a symbolic link to the submissions folder itself"
    assert reasons["carol.ipynb"] == (
        f"a second path to the notebook {subs / 'alice.ipynb'}, through a symbolic link: "
        f"a notebook is graded once"
    )
    assert reasons["dave/lab.ipynb"].startswith(
        f"a second path to the notebook {subs / 'bob' / 'lab.ipynb'}"
    )
    inside = "a symbolic link inside a student's folder (to "
    assert reasons["erin/notes/lab.ipynb"].startswith(inside + str(subs / "shared.ipynb.real"))
    assert reasons["bob/loop"].startswith(inside)
    # frank's folder is erin's notes (the walk reads it where it is): its link refused
    # again, and frank, like erin, holds no notebook
    assert [str(p.relative_to(subs)) for p, r in refused if r.startswith(inside)] == [
        "bob/loop",
        "bob/loop",
        "erin/notes/lab.ipynb",
        "erin/notes/lab.ipynb",
    ]
    assert "no row in the gradebook" in reasons["frank"] and "erin" in reasons
    assert "shared.ipynb.real" in reasons  # not a notebook by its name


def test_a_link_to_a_classmates_notebook_is_not_their_grade(tmp_path):
    """The red-team cases: a student's repository links its notebook to a classmate's
    (git keeps links), to a classmate's checkpoint or macOS copy (folders never listed),
    or to another file of theirs; graded, the link would be the classmate's work under
    the link's name. Also where the instructor's folder holds links to the clones."""
    repos = tmp_path / "repos"
    _book(repos / "alice" / "lab1.ipynb")
    _book(repos / "alice" / ".ipynb_checkpoints" / "lab1-checkpoint.ipynb")
    _book(repos / "alice" / "__MACOSX" / "lab1.ipynb")
    _book(repos / "alice" / "backup.json")
    for name, target in (
        ("aaron", "../alice/lab1.ipynb"),
        ("bea", "../alice/.ipynb_checkpoints/lab1-checkpoint.ipynb"),
        ("cody", "../alice/__MACOSX/lab1.ipynb"),
        ("dina", "../alice/backup.json"),
    ):
        (repos / name).mkdir()
        os.symlink(target, repos / name / "lab1.ipynb")
    for layout in ("plain", "auto"):
        refused = []
        found = collect_submissions([repos], refused=refused, layout=layout)
        assert [name for name, _ in found] == ["alice"], layout
        reasons = {str(p.relative_to(repos)): r for p, r in refused}
        for name in ("aaron", "bea", "cody", "dina"):
            reason = reasons[f"{name}/lab1.ipynb"]
            assert reason.startswith("a symbolic link inside a student's folder (to "), reason
    # the instructor's folder of links to the clones: a link among them is still refused
    subs = tmp_path / "subs"
    clones = subs / ".clones"  # hidden: not listed, reached through the links
    _book(clones / "alice" / "lab1.ipynb")
    (clones / "aaron").mkdir()
    os.symlink(clones / "alice" / "lab1.ipynb", clones / "aaron" / "lab1.ipynb")
    for name in ("aaron", "alice"):
        os.symlink(clones / name, subs / name)
    refused = []
    found = dict(collect_submissions([subs], refused=refused, layout="plain"))
    assert found == {"alice": (clones / "alice" / "lab1.ipynb").resolve()}
    assert {str(p.relative_to(subs)): r.split(" (")[0] for p, r in refused} == {
        ".clones/aaron/lab1.ipynb": "a symbolic link inside a student's folder",
        "aaron": "a folder without a notebook",
    }


def test_a_link_a_student_made_is_theirs_to_fix_never_a_second_row(tmp_path):
    """A convenience link inside a student's own folder (``lab1.ipynb ->
    notebooks/lab1.ipynb``) is not followed either: one row, the notebook itself, named
    by the student's repository (plain layout)."""
    subs = tmp_path / "subs"
    _book(subs / "alice" / "notebooks" / "lab1.ipynb")
    os.symlink("notebooks/lab1.ipynb", subs / "alice" / "lab1.ipynb")
    _book(subs / "bob" / "lab1.ipynb")
    refused = []
    found = dict(collect_submissions([subs], refused=refused, layout="plain"))
    assert found == {
        "alice": subs / "alice" / "notebooks" / "lab1.ipynb",
        "bob": subs / "bob" / "lab1.ipynb",
    }
    assert [str(p.relative_to(subs)) for p, _ in refused] == ["alice/lab1.ipynb"]


def test_a_link_planted_in_a_section_or_as_a_folder_takes_no_classmate(tmp_path):
    """The second review's cases (auto layout): a student who keeps no notebook of their
    own and links a folder to a classmate's (``aaron/aaron -> ../alice``), in a section
    (where the walk used to claim alice's folder through aaron's link and leave hers
    unlisted), or to a classmate's checkpoints: no row for aaron, alice graded."""
    subs = tmp_path / "subs"
    _book(subs / "Sec-01" / "alice" / "lab1.ipynb")
    _book(subs / "Sec-01" / "alice" / ".ipynb_checkpoints" / "lab1-checkpoint.ipynb")
    _book(subs / "Sec-01" / "bob" / "lab1.ipynb")
    (subs / "Sec-01" / "aaron").mkdir()
    os.symlink("../alice", subs / "Sec-01" / "aaron" / "aaron")
    (subs / "Sec-01" / "bea").mkdir()
    os.symlink("../alice/.ipynb_checkpoints", subs / "Sec-01" / "bea" / "bea")
    refused = []
    found = dict(collect_submissions([subs], refused=refused))
    assert found == {
        "alice": subs / "Sec-01" / "alice" / "lab1.ipynb",
        "bob": subs / "Sec-01" / "bob" / "lab1.ipynb",
    }
    reasons = {str(p.relative_to(subs)): r for p, r in refused}
    for link in ("Sec-01/aaron/aaron", "Sec-01/bea/bea"):
        assert reasons[link].startswith("a symbolic link inside a student's folder"), reasons


def test_a_glob_that_lists_a_link_first_grades_the_notebook_itself(tmp_path):
    """``lablib grade lab1 subs/*.ipynb`` where ``aaron.ipynb`` links to ``alice.ipynb``:
    the notebook is graded as alice's (the path given that is no link), not as the
    first path given."""
    subs = tmp_path / "subs"
    _book(subs / "alice.ipynb")
    os.symlink("alice.ipynb", subs / "aaron.ipynb")
    refused = []
    found = collect_submissions(sorted(subs.glob("*.ipynb")), refused=refused)
    assert [name for name, _ in found] == ["alice"]
    assert refused == [
        (
            subs / "aaron.ipynb",
            f"the same notebook as {subs / 'alice.ipynb'}, given again: graded once",
        )
    ]


def test_the_same_notebook_given_twice_is_graded_once(tree):
    subs, _ = tree
    refused = []
    found = collect_submissions(
        [subs, subs / "alice.ipynb", subs / "bob" / "lab.ipynb"], refused=refused
    )
    assert [name for name, _ in found] == ["alice", "bob"]
    assert [p for p, _ in refused] == [subs / "alice.ipynb", subs / "bob" / "lab.ipynb"]
    assert all("given again: graded once" in r for _, r in refused)


def test_symlinked_folder_is_not_graded_end_to_end(tmp_path, fixture_lab):
    """The red-team case: a symlinked folder made other notebooks graded as submissions."""
    from lablib.grading.grade import grade

    subs, outside = tmp_path / "subs", tmp_path / "outside"
    subs.mkdir()
    outside.mkdir()
    shutil.copy(FIXTURE_SOLUTION, outside / "solution.ipynb")
    shutil.copy(FIXTURE_SOLUTION, subs / "alice.ipynb")
    os.symlink(outside, subs / "eve")
    (subs / "alice-notes.txt").write_text("my answers are in the notebook")
    with pytest.warns(SubmissionSkipped, match="eve is not graded"):
        results = grade(
            fixture_lab,
            [subs],
            tmp_path / "out",
            lab_notebook=FIXTURE_SOLUTION,
            jobs=1,
            timeout=20,
            progress=False,
        )
    assert [r.submission for r in results] == ["alice"]
    summary = json.loads(
        (tmp_path / "out" / "summary.json").read_text()
    )  # the instructor sees both
    assert [
        (pathlib.Path(s["path"]).name, s["reason"].split(":")[0]) for s in summary["skipped"]
    ] == [
        ("alice-notes.txt", "not a notebook"),
        (
            "eve",
            "a symbolic link leading outside the submissions folder "
            f"{subs.resolve()} (to {outside.resolve()}); copy the notebook "
            "into the folder to grade it",
        ),
    ]
    assert "Not graded (2)" in (tmp_path / "out" / "summary.html").read_text()


def test_every_visible_file_that_is_not_graded_is_listed(tmp_path):
    """A PDF handed in instead of the notebook, or a student's folder without a notebook,
    must not vanish from the instructor's view; hidden files (.DS_Store) are passed over."""
    subs = tmp_path / "subs"
    (subs / "bob").mkdir(parents=True)
    (subs / "carol" / "drafts").mkdir(parents=True)
    shutil.copy(FIXTURE_SOLUTION, subs / "alice.IPYNB")
    (subs / "bob" / "lab1.pdf").write_bytes(b"%PDF-1.4")
    shutil.copy(FIXTURE_SOLUTION, subs / "carol" / "lab.ipynb")
    (subs / "carol" / "drafts" / "idea.py").write_text("x = 1")
    (subs / ".DS_Store").write_bytes(b"\0")
    (subs / "README.txt").write_text("exported from Canvas")
    refused = []
    found = collect_submissions([subs], refused=refused)
    assert [name for name, _ in found] == ["alice", "carol"]
    assert [(str(p.relative_to(subs)), r) for p, r in refused] == [
        ("README.txt", NOT_A_NOTEBOOK),
        ("bob/lab1.pdf", NOT_A_NOTEBOOK),
        ("bob", "a folder without a notebook (.ipynb): no row in the gradebook"),
        ("carol/drafts/idea.py", NOT_A_NOTEBOOK),
    ]


def test_grade_command_reports_skipped_links(tmp_path, capsys):
    from lablib.cli import main

    subs, outside = tmp_path / "subs", tmp_path / "outside"
    _book(outside / "secret.ipynb")
    subs.mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "alice.ipynb")
    os.symlink(outside / "secret.ipynb", subs / "mallory.ipynb")
    from grading_paths import FIXTURE_LAB

    assert (
        main(
            [
                "grade",
                str(FIXTURE_LAB),
                str(subs),
                "-o",
                str(tmp_path / "out"),
                "--lab-notebook",
                str(FIXTURE_SOLUTION),
                "--jobs",
                "1",
                "--timeout",
                "20",
                "--quiet",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert f"lablib grade: skipped: {subs / 'mallory.ipynb'} is not graded" in captured.err
    assert "mallory" not in captured.out and "alice" in captured.out


def test_nested_folders_keep_the_student(tmp_path):
    """A row is named by the student's folder: the first folder on the way down that holds
    a notebook itself; section and team folders above it (even a section of one student)
    are not students."""
    for rel in (
        "section A/team 3/erin/lab1.ipynb",
        "section A/team 3/frank/lab1.ipynb",
        "section A/team 4/gina/LAB1.IPYNB",
        "carol/submission.ipynb",
        "carol/drafts/idea.ipynb",
        "Sec-03/mivanova/lab4_gat.ipynb",
        "Sec-01/zoe/lab.ipynb",
        "Sec-02/zoe/lab.ipynb",
        "W04.IPYNB",
    ):
        _book(tmp_path / rel)
    found = dict(collect_submissions([tmp_path]))
    assert sorted(found) == [
        "Sec-01/zoe",
        "Sec-02/zoe",
        "W04",
        "carol/drafts/idea",
        "carol/submission",
        "erin",
        "frank",
        "gina",
        "mivanova",
    ]
    assert found["frank"] == tmp_path / "section A" / "team 3" / "frank" / "lab1.ipynb"
    assert found["mivanova"] == tmp_path / "Sec-03" / "mivanova" / "lab4_gat.ipynb"


def test_names_are_nfc_and_free_of_control_characters(tmp_path):
    """A folder in NFD (as macOS zips write it) names its row in NFC; characters that would
    rewrite a terminal line or reorder text are shown as '?'; NFD and NFC twins are one name."""
    import unicodedata

    nfd = unicodedata.normalize("NFD", "josé.núñez")
    _book(tmp_path / nfd / "lab1.ipynb")
    _book(tmp_path / "evil\x1b[2Jname\u202egnp.ipynb")
    _book(tmp_path / "NFC" / "ü.ipynb")
    _book(tmp_path / "NFC" / unicodedata.normalize("NFD", "ü.ipynb"))
    names = [name for name, _ in collect_submissions([tmp_path])]
    assert "josé.núñez" in names and unicodedata.is_normalized("NFC", "".join(names))
    assert "evil?[2Jname?gnp" in names
    assert all(c.isprintable() for n in names for c in n)
    assert sorted(n for n in names if n.startswith("NFC")) == [
        "NFC/ü",
        "NFC/ü-2",
    ]  # one name, made unique


def _fits(name: str) -> bool:
    """A file name that most file systems take (255 bytes) with room for the temporary
    file's affix of atomic_write (``.<name>.<8 random>.lablib-tmp``)."""
    return len(f".{name}.12345678.lablib-tmp".encode("utf-8", "surrogateescape")) <= 255


def test_long_non_ascii_names_are_cut_by_bytes(fixture_lab, tmp_path):
    """A name of 80 CJK characters (240 bytes, a legal file name) stopped the reports of
    the whole class: cut at 120 characters, its stem was still too long a file name."""
    from lablib.grading.judge import summarise
    from lablib.grading.results import Status, TestResult

    names = ["alice", "学" * 80, "学" * 100 + "x", "学" * 100 + "y", "é" * 119 + "🙂" * 3]
    results = [
        summarise(
            fixture_lab,
            name,
            f"/subs/{i}.ipynb",
            [TestResult.judged(t, 1.0) for t in fixture_lab.tests],
            Status(),
        )
        for i, name in enumerate(names)
    ]
    write_reports(tmp_path, fixture_lab, results)
    assert (tmp_path / "summary.html").exists()
    files = sorted(p.name for p in (tmp_path / "feedback").iterdir())
    assert len(files) == 2 * len(names) and "alice.md" in files and "alice.html" in files
    assert all(_fits(name) for name in files), files
    alone = feedback_stems(["学" * 80, "é" * 119 + "🙂" * 3])
    assert alone["学" * 80] == "学" * 50  # 150 bytes, not cut inside a character
    assert alone["é" * 119 + "🙂" * 3] == "é" * 75
    stems = feedback_stems(names)  # three names, one start: a digest each
    long = [stems[n] for n in names if n.startswith("学")]
    assert len(set(long)) == 3 and all(s.startswith("学" * 50 + "-") for s in long)


def test_feedback_stems_are_no_windows_device_and_show_every_character():
    names = ["CON", "con.txt", "nul", "Aux", "COM1", "lpt9.tar.gz", "COM¹", "conference", "alice"]
    names += ["al\u200bice", "alice\u2060", "\ufeffalice", "alice\U000e0041\U000e007f"]
    names += ["alice\u3164", "alic\u202ee", "ali\u00adce", "al\ufe0fice"]
    stems = feedback_stems(names)
    assert stems["alice"] == "alice" and stems["conference"] == "conference"
    for name in ("CON", "con.txt", "nul", "Aux", "COM1", "lpt9.tar.gz", "COM¹"):
        assert stems[name] == "_" + name
    looks = {}  # what each stem shows: no two names may show one stem
    for name, stem in stems.items():
        assert stem.isprintable() and "\u3164" not in stem, stem
        looks.setdefault(stem.casefold(), []).append(name)
    assert all(len(v) == 1 for v in looks.values()), looks
    assert all(stems[n] != "alice" for n in names if n != "alice")


def test_no_feedback_file_starts_with_a_dash():
    """``-rf.md`` in a feedback folder is an option to ``ls *`` or ``rm *``."""
    stems = feedback_stems(["-rf", "--help", " -2+3", "a-b", "_rf"])
    assert not any(stem.startswith("-") for stem in stems.values()), stems
    assert stems["a-b"] == "a-b" and stems["--help"] == "_-help"
    assert len(set(map(same_file, stems.values()))) == 5, stems  # "-rf" is not "_rf"'s file


def test_error_messages_reach_the_terminal_printable(tmp_path, capsys):
    """A folder named with escape sequences (clear the screen, set the window title) and a
    line break reached the terminal raw through the command's error message."""
    from lablib.cli import main

    folder = tmp_path / "a\x1b[2J\x1b]0;owned\x07x\nlablib report: all done"
    folder.mkdir()
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "?[2J?]0;owned?x" in err
    assert err.startswith("lablib report: error: ")
    assert "\n  lablib report: all done" in err  # a line of the name is no line of lablib's


def test_names_that_show_nothing_are_shown_in_the_terminal():
    from lablib.cli import _printable

    for name in ("al\u200bice", "alice\u2060", "\ufeffalice", "alice\U000e0041", "alice\u3164"):
        assert _printable(name) != "alice" and "?" in _printable(name)
    assert _printable("José Núñez 学") == "José Núñez 学"


@pytest.mark.parametrize(
    "name",
    [
        "علی\u200cرضا",  # a Persian name: the zero-width non-joiner shapes its letters
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # an emoji family: zero-width joiners
        "Team \u2764\ufe0f",  # an emoji's colour form: a variation selector
        "葛\U000e0100飾",  # an ideographic variant in a Japanese name
        "\U0001f3f3\ufe0f\u200d\U0001f308",  # a rainbow flag: flag, selector, joiner, rainbow
        "\u2764\ufe0f\u200d\U0001f525",  # a heart on fire
        "Team \u00a9\ufe0f",  # the copyright sign's emoji form
        "Team 1\ufe0f\u20e3",  # a keycap
    ],
)
def test_characters_that_shape_a_name_are_kept(name):
    """What shapes its neighbours is part of the name: the terminal, the row's name and
    the reports show it as written (only characters that show nothing become '?')."""
    from lablib.cli import _printable
    from lablib.grading.lms import clean_label

    assert _printable(name) == name and clean_label(name) == name


@pytest.mark.parametrize("name", ["al\u200dice", "al\u200cice", "alice\ufe0f", "\u200dalice"])
def test_a_shaping_character_that_shapes_nothing_shows(name):
    """A joiner or a selector beside Latin letters changes nothing a reader sees: kept,
    it would make a second 'alice'."""
    from lablib.cli import _printable
    from lablib.grading.lms import clean_label

    assert "?" in _printable(name) and "?" in clean_label(name)
    assert len(set(feedback_stems(["alice", name]).values())) == 2


def test_a_file_name_that_is_not_utf8_names_a_row_the_reports_can_write(fixture_lab, tmp_path):
    """A zip made on Windows may hold Latin-1 file names: Python reads their bytes as lone
    surrogates, which no writer can encode. The row's name shows them as '?', and every
    report of the class is written (they all failed, the file named in no message)."""
    from lablib.grading.judge import summarise
    from lablib.grading.results import Status, TestResult

    subs = tmp_path / "subs"
    subs.mkdir()
    _book(subs / "alice.ipynb")
    _book(pathlib.Path(os.fsdecode(bytes(subs) + b"/Jos\xe9.ipynb")))
    _book(subs / "al\u200bice.ipynb")  # looks like alice, and is not
    names = [name for name, _ in collect_submissions([subs])]
    assert sorted(names) == ["Jos?", "al?ice", "alice"]
    results = [
        summarise(
            fixture_lab,
            name,
            str(path),
            [TestResult.judged(t, 1.0) for t in fixture_lab.tests],
            Status(),
        )
        for name, path in collect_submissions([subs])
    ]
    out = tmp_path / "out"
    write_reports(out, fixture_lab, results)
    for report in ("grades.csv", "grades.json", "summary.html"):
        assert "Jos?" in (out / report).read_text(encoding="utf-8")
    assert len(list((out / "feedback").iterdir())) == 2 * 3
