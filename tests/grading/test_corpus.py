"""The corpus of broken and hostile submissions, graded in ONE batch with --jobs 2.

Each notebook in tests/grading/corpus/ (made by make_corpus.py from the fixture lab's
solution) must get its expected status and score, without affecting the others.
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from lablib.grading.run.isolation import sandbox_possible as _sandbox_possible
from grading_paths import CORPUS, FIXTURE_HIDDEN, FIXTURE_LAB, ROOT, batch_leftovers

pytestmark = [
    pytest.mark.integration,  # grades the hostile corpus as one batch
    pytest.mark.serial,  # time limits: run alone (.ci/run's serial pass)
]

EXPECTED = json.loads((CORPUS / "expected.json").read_text())


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corpus")
    out = tmp / "out"
    # The instructor's folders, world-readable, outside the repository (the repository's
    # copy of the fixture's hidden tests is public by nature; the grader hides the
    # --tests folder, a spec given by path, the output and the submission folders).
    hidden = tmp / "instructor" / "hidden"
    shutil.copytree(FIXTURE_HIDDEN, hidden)
    lab = tmp / "instructor" / "lab0_fixture"
    shutil.copytree(FIXTURE_LAB, lab, ignore=shutil.ignore_patterns("hidden"))
    for path in (tmp, tmp / "instructor"):
        os.chmod(path, 0o755)
    started = time.time()
    command = [
        sys.executable,
        "-m",
        "lablib.cli",
        "grade",
        str(lab),
        str(CORPUS),
        "-o",
        str(out),
        "--tests",
        str(hidden),
        "--lab-notebook",
        str(lab / "solutions" / "lab0_fixture.ipynb"),
        "--jobs",
        "2",
        "--timeout",
        "5",
        "--memory",
        "400",
        "--quiet",
    ]
    batch = f"corpus-{os.getpid()}-{started}"
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=dict(os.environ, LABLIB_BATCH=batch),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out / "grades.csv", newline="") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    data = {
        s["submission"]: s for s in json.loads((out / "grades.json").read_text())["submissions"]
    }
    return out, rows, data, batch


def test_corpus_is_up_to_date():
    names = {p.stem for p in CORPUS.glob("*.ipynb")}
    assert names == set(EXPECTED), "run: .venv/bin/python tests/grading/corpus/make_corpus.py"


def test_every_submission_has_one_row(graded):
    _, rows, _, _ = graded
    assert set(rows) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_status_and_score(graded, name):
    _, rows, data, _ = graded
    expect = EXPECTED[name]
    if expect.get("needs_sandbox") and not _sandbox_possible():
        pytest.skip("this attack is only stopped by the sandbox (root on Linux); see ISOLATION.md")
    row = rows[name]
    assert row["status"] == expect["status"], data[name]["notes"]
    assert float(row["score"]) == expect["score"], [
        (t["id"], t["message"]) for t in data[name]["tests"]
    ]
    assert float(row["max_score"]) == 8
    if "message" in expect:  # every test that failed says it
        failed = [t for t in data[name]["tests"] if not t["passed"]]
        assert failed and all(expect["message"] in t["message"] for t in failed), failed
    if "note" in expect:
        assert any(expect["note"] in n for n in data[name]["notes"])
    if row["status"] != "ok":  # never an unexplained 0: failing tests say why
        failed = [t for t in data[name]["tests"] if not t["passed"]]
        assert failed and all(t["message"] for t in failed)


def test_output_folder_was_not_written_by_students(graded):
    out, rows, _, _ = graded
    assert not (out / "HACKED.txt").exists()
    for path in [out / "grades.csv", *(out / "feedback").iterdir()]:
        assert "HACKED" not in path.read_text()
    book = json.loads(
        (out / "grades.json").read_text()
    )  # it quotes each submission's code, HACKED included
    for entry in book["submissions"]:
        entry.pop("code")
    assert "HACKED" not in json.dumps(book)
    assert rows["solution"]["score"] == "8"


def test_no_process_outlives_the_batch(graded):
    assert batch_leftovers(graded[3]) == []


def test_no_file_or_segment_outlives_the_batch(graded):
    import ctypes

    for folder in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock"):
        assert not os.path.exists(os.path.join(folder, "lablib-litter")), folder
    if _sandbox_possible():  # without the sandbox the grading user's own folders are writable
        assert ctypes.CDLL("libc.so.6").shmget(0x11AB, 0, 0) == -1


def test_huge_output_is_capped(graded):
    _, _, data, _ = graded
    assert 1000 < len(data["huge_output"]["output"]) < 40_000
    assert "bytes of output dropped" in data["huge_output"]["output"]


def test_isolation_recorded(graded):
    _, _, data, _ = graded
    isolation = data["solution"]["isolation"]
    assert set(isolation) >= {"uid", "network", "filesystem", "notes"}
    if _sandbox_possible():
        assert isolation["uid"] != 0 and "network namespace" in isolation["network"]
