"""The grader where instructors run it (issue 29 item 8): the hostile corpus graded as one
batch (as tests/grading/test_corpus.py grades it) in four environments the sandbox meets
outside a full-root Linux host, each built here for real, inside a private mount namespace
of its own (``unshare --mount``: nothing of it reaches the host):

* ``docker-capabilities``: Docker's default capability set (14 capabilities, no
  CAP_SYS_ADMIN, no CAP_SYS_PTRACE; ``setpriv --bounding-set``), in a root file system
  whose Python every user may read (a chroot, as in a container image): no namespace,
  no mount can be made;
* ``chroot``: a chroot with full capabilities (a privileged container, Gradescope-like
  images run by hand): namespaces are made but the private root is not (``mount /:
  Invalid argument``: the chroot's ``/`` is no mount point). The red team's case: the
  child's root was the host's disk, whose used blocks were counted as the run's memory,
  and the solution scored 0 as "out of memory" (Lab 1's solution is graded there too);
* ``no-cgroups``: no cgroup hierarchy at all (an empty ``/sys/fs/cgroup``);
* ``read-only-cgroup2``: ``/sys/fs/cgroup`` a read-only file system laid out as a cgroup
  v2 hierarchy whose memory controller is delegated (Docker mounts the real one read-only;
  this host's own v2 hierarchy has no memory controller to delegate, so the layout is
  made by hand), so making the attempt's cgroup fails with EROFS.

In each, every corpus submission gets its expected status and score (the solution full
marks, the memory blow-up ``memory``: memory is neither misread nor unmeasured); where the
environment cannot give the private root, the two attacks only it stops
(``needs_sandbox``) are not required to fail, and the gradebook of every submission
states what was missing; no process, file or shared memory segment of the run outlives
the batch.
"""

import csv
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from grading_paths import CORPUS, FIXTURE_HIDDEN, FIXTURE_LAB, ROOT, batch_leftovers
from lablib._version import PACKAGE_DIR

pytestmark = [
    pytest.mark.integration,  # grades the hostile corpus once per environment
    pytest.mark.serial,  # time limits: run alone (.ci/run's serial pass)
]

EXPECTED = json.loads((CORPUS / "expected.json").read_text())
DOCKER_CAPABILITIES = (
    "chown",
    "dac_override",
    "fsetid",
    "fowner",
    "mknod",
    "net_raw",
    "setgid",
    "setuid",
    "setfcap",
    "setpcap",
    "net_bind_service",
    "sys_chroot",
    "kill",
    "audit_write",
)
#: environment -> (what its isolation notes must say, whether the sandbox's private root exists there)
ENVIRONMENTS = {
    "docker-capabilities": (
        [
            "no mount namespace: Operation not permitted",
            "no network namespace",
            "memory measured: the run's processes only",
        ],
        False,
    ),
    "chroot": (
        [
            "no private root file system: [Errno 22] mount /: Invalid argument",
            "memory measured: the run's processes only",
        ],
        False,
    ),
    "no-cgroups": (["no kernel limits: no cgroup hierarchy found"], True),
    "read-only-cgroup2": (["no kernel limits: cgroups unavailable", "Read-only file system"], True),
}


def _missing_tools():
    if not (sys.platform.startswith("linux") and os.getuid() == 0):
        return "these environments are made with namespaces and mounts: root on Linux"
    missing = [
        tool for tool in ("unshare", "chroot", "setpriv", "mount") if shutil.which(tool) is None
    ]
    return f"missing {', '.join(missing)} (util-linux, coreutils)" if missing else None


def _chroot_script(new_root, shared) -> str:
    """Shell lines that build a chroot at ``new_root`` from bind mounts of the host's
    folders (run inside ``unshare --mount``) and end with ``CHROOT`` set to enter it.
    A folder closed to other users (``/root``, where pyenv puts Python) gets an open
    folder of its own holding only what the grader needs from it, as an image would."""
    needed = {
        os.path.realpath(p)
        for p in (
            sys.base_prefix,
            sys.prefix,
            os.path.dirname(sys.executable),
            os.path.dirname(os.path.realpath(sys.executable)),
            PACKAGE_DIR,
            ROOT,
        )
    }
    q = shlex.quote
    lines = ["set -e", f"R={q(str(new_root))}", 'mkdir -p "$R"']
    needed.add(os.path.realpath(shared))
    for name in sorted(os.listdir("/")):
        host = "/" + name
        if name == "proc" or not os.path.lexists(host):
            continue
        if os.path.islink(host):
            lines.append(f'ln -s {q(os.readlink(host))} "$R"/{q(name)}')
        elif os.path.isdir(host) and os.stat(host).st_mode & 0o001 and name != "tmp":
            lines.append(f'mkdir -p "$R"/{q(name)} && mount --rbind {q(host)} "$R"/{q(name)}')
        elif os.path.isdir(host):  # /tmp of its own; a closed folder holds only what is needed
            lines.append(
                f'mkdir -p "$R"/{q(name)} && chmod {"1777" if name == "tmp" else "755"} "$R"/{q(name)}'
            )
            inside = sorted(p for p in needed if p.startswith(host + "/"))
            for path in (p for p in inside if not any(p.startswith(o + "/") for o in inside)):
                lines.append(f'mkdir -p "$R"{q(path)} && mount --rbind {q(path)} "$R"{q(path)}')
    lines += ['mkdir -p "$R/proc" && mount -t proc proc "$R/proc"']
    return "\n".join(lines)


def _environment_script(name, work, commands) -> str:
    """The shell script that makes environment ``name`` and runs ``commands`` in it."""
    run = "\n".join(shlex.join(c) for c in commands)
    if name in ("docker-capabilities", "chroot"):
        caps = ",".join(["-all", *(f"+{c}" for c in DOCKER_CAPABILITIES)])
        prefix = (
            ["setpriv", f"--bounding-set={caps}", "--inh-caps=-all", "--"]
            if name != "chroot"
            else []
        )
        inner = f"cd {shlex.quote(str(ROOT))}\n{run}"
        return (
            f"{_chroot_script(work / 'root', work)}\n"
            f'exec chroot "$R" {shlex.join(prefix)} sh -c {shlex.quote(inner)}'
        )
    if name == "no-cgroups":
        make = "mount -t tmpfs -o size=64k,mode=755 no-cgroups /sys/fs/cgroup"
    else:
        make = (
            "mount -t tmpfs -o size=64k,mode=755 read-only-cgroup2 /sys/fs/cgroup\n"
            "for f in cgroup.controllers cgroup.subtree_control; do echo 'cpu memory pids' > /sys/fs/cgroup/$f; done\n"
            ": > /sys/fs/cgroup/cgroup.procs\n"
            "mount -o remount,ro /sys/fs/cgroup\n"
            "if touch /sys/fs/cgroup/x 2>/dev/null; then echo 'not read-only' >&2; exit 3; fi"
        )
    return f"set -e\n{make}\ncd {shlex.quote(str(ROOT))}\n{run}"


@pytest.fixture(scope="module", params=sorted(ENVIRONMENTS))
def graded(request, tmp_path_factory):
    reason = _missing_tools()
    if reason:
        pytest.fail(f"cannot make the environments here: {reason}")
    name = request.param
    work = tmp_path_factory.mktemp(name)
    os.chmod(work, 0o755)
    # the instructor's folders, outside the repository (as in test_corpus.py)
    hidden = work / "instructor" / "hidden"
    shutil.copytree(FIXTURE_HIDDEN, hidden)
    lab = work / "instructor" / "lab0_fixture"
    shutil.copytree(FIXTURE_LAB, lab, ignore=shutil.ignore_patterns("hidden"))
    subs = work / "instructor" / "subs"
    shutil.copytree(CORPUS, subs)
    for folder in (hidden, lab, subs):  # closed to other users, as the docs ask where no
        os.chmod(folder, 0o700)  # private root can be made (ISOLATION.md)
    os.chmod(work / "instructor", 0o755)
    out = work / "out"
    commands = [
        [
            sys.executable,
            "-m",
            "lablib.cli",
            "grade",
            str(lab),
            str(subs),
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
    ]
    batch = f"environments-{name}-{os.getpid()}-{time.time()}"
    started = time.monotonic()
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            _environment_script(name, work, commands),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, LABLIB_BATCH=batch),
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    with open(out / "grades.csv", newline="") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    data = {
        s["submission"]: s for s in json.loads((out / "grades.json").read_text())["submissions"]
    }
    print(f"{name}: graded in {time.monotonic() - started:.0f} s")
    return name, work, rows, data, batch


def test_the_corpus_keeps_its_grades(graded):
    name, _, rows, data, _ = graded
    _, private_root = ENVIRONMENTS[name]
    assert set(rows) == set(EXPECTED)
    wrong = {}
    for submission, expect in EXPECTED.items():
        if expect.get("needs_sandbox") and not private_root:
            continue  # only the private root stops it; the notes say it is missing (next test)
        row = rows[submission]
        if (row["status"], float(row["score"])) != (expect["status"], expect["score"]):
            wrong[submission] = (
                row["status"],
                row["score"],
                data[submission]["notes"],
                [t["message"] for t in data[submission]["tests"] if not t["passed"]],
            )
    assert wrong == {}, wrong
    assert rows["solution"]["score"] == "8" and rows["solution"]["status"] == "ok"
    assert rows["memory_blowup"]["status"] == "memory", "memory is still measured"


def test_the_output_folder_stays_unwritten(graded):
    """Even without the private root the uid drop keeps the output folder the grader's."""
    _, work, _, _, _ = graded
    out = work / "out"
    assert not (out / "HACKED.txt").exists()
    for path in [out / "grades.csv", *(out / "feedback").iterdir()]:
        assert "HACKED" not in path.read_text(), path


def test_the_gradebook_says_what_was_missing(graded):
    name, _, _, data, _ = graded
    expected, private_root = ENVIRONMENTS[name]
    for submission in ("solution", "memory_blowup", "reads_hidden"):
        notes = " | ".join(data[submission]["isolation"]["notes"])
        assert all(text in notes for text in expected), (submission, notes)
        filesystem = data[submission]["isolation"]["filesystem"]
        assert filesystem.startswith("new root") == private_root, filesystem


def test_lab1_solution_scores_full_marks_in_a_chroot(tmp_path):
    """The red team's run: Lab 1's solution in a chroot with full capabilities and the
    default limits scored 0/19, 'crashed ... ran out of memory (used more than 4096 MB)'."""
    reason = _missing_tools()
    if reason:
        pytest.fail(f"cannot make the chroot here: {reason}")
    os.chmod(tmp_path, 0o755)
    (tmp_path / "subs").mkdir(mode=0o700)  # closed to other users: no private root here
    shutil.copy(ROOT / "solutions" / "lab1_attention.ipynb", tmp_path / "subs" / "solution.ipynb")
    command = [
        sys.executable,
        "-m",
        "lablib.cli",
        "grade",
        "lab1",
        str(tmp_path / "subs"),
        "-o",
        str(tmp_path / "out"),
        "--quiet",
    ]
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            _environment_script("chroot", tmp_path, [command]),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    entry = json.loads((tmp_path / "out" / "grades.json").read_text())["submissions"][0]
    assert (entry["score"], entry["max_score"], entry["status"]) == (19, 19, "ok"), (
        entry["notes"],
        entry["diagnostics"],
    )
    notes = entry["isolation"]["notes"]
    assert any("mount /: Invalid argument" in n for n in notes), notes
    assert any(n.startswith("memory measured: the run's processes only") for n in notes), notes


def _fixture_course(tmp_path, *, hidden_mode, subs_mode):
    """The fixture lab's instructor folders under ``tmp_path`` (open to other users, as a
    course folder may be): its hidden tests (``hidden_mode``), the lab folder (a spec given
    by path: it holds the solutions) closed as the docs ask, and an empty submissions
    folder (``subs_mode``). The checkout's own copy may lie anywhere, open or not, so it
    is not used. Returns ``(hidden, lab, subs)``."""
    reason = _missing_tools()
    if reason:
        pytest.fail(f"cannot make the environment here: {reason}")
    os.chmod(tmp_path, 0o755)
    hidden, subs, lab = tmp_path / "hidden", tmp_path / "subs", tmp_path / "lab0_fixture"
    shutil.copytree(FIXTURE_HIDDEN, hidden)
    shutil.copytree(FIXTURE_LAB, lab, ignore=shutil.ignore_patterns("hidden"))
    os.chmod(lab, 0o700)
    os.chmod(hidden, hidden_mode)
    subs.mkdir(mode=subs_mode)
    return hidden, lab, subs


def _grade_without_private_root(tmp_path, hidden, lab, subs):
    """``lablib grade`` of the fixture lab in the docker-capabilities environment (no
    private root: only the folders' permissions hide anything); returns the first row of
    ``grades.json`` and the finished process."""
    command = [sys.executable, "-m", "lablib.cli", "grade", str(lab), str(subs)]
    command += ["-o", str(tmp_path / "out"), "--tests", str(hidden), "--quiet"]
    command += ["--lab-notebook", str(lab / "solutions" / "lab0_fixture.ipynb")]
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
        + [_environment_script("docker-capabilities", tmp_path, [command])],
        capture_output=True,
        text=True,
        timeout=900,
    )
    entry = json.loads((tmp_path / "out" / "grades.json").read_text())["submissions"][0]
    return entry, done


def test_a_folder_the_submissions_user_could_open_stops_the_run(tmp_path):
    """Without a private root nothing hides the hidden tests or the classmates' notebooks
    from a submission's code but the folders' permissions: a hidden tests' folder (and a
    submissions folder) other users may open is named and the run refused as a
    grader-error (never graded with the tests readable); the output folder lablib closes
    itself."""
    hidden, lab, subs = _fixture_course(tmp_path, hidden_mode=0o755, subs_mode=0o755)
    shutil.copy(lab / "solutions" / "lab0_fixture.ipynb", subs / "solution.ipynb")
    entry, done = _grade_without_private_root(tmp_path, hidden, lab, subs)
    assert entry["status"] == "grader-error" and entry["score"] == 0, (entry, done.stderr[-2000:])
    said = json.dumps(entry)
    # both open folders named in one message, with one command that closes them; the
    # closed lab folder is not named
    assert f"can open {hidden}, {subs}," in said, said
    assert f"chmod o-rwx {hidden} {subs};" in said, said
    assert str(lab) not in said.replace(f"{lab}/solutions", ""), said
    assert (tmp_path / "out").stat().st_mode & 0o007 == 0


def test_what_a_run_writes_is_closed_to_other_runs_without_a_private_root(tmp_path):
    """Without a private root a run's work folder (its home and TMPDIR) is a host folder,
    and ``/tmp`` is the host's, shared with a classmate's run graded beside it (``--jobs``)
    under another uid. The sandbox gives the work folder to the run's uid closed (0700; it
    was 0755) and runs the child with umask 077: a file or folder the run makes anywhere,
    the top of ``/tmp`` included, is closed to other users unless its own code opens it
    (a saved model, a cache: it was 0644, which a classmate's code could read)."""
    hidden, lab, subs = _fixture_course(tmp_path, hidden_mode=0o700, subs_mode=0o700)
    notebook = json.loads((lab / "solutions" / "lab0_fixture.ipynb").read_text())
    for cell in notebook["cells"]:
        if "".join(cell["source"]).startswith("# GRADED: normalize"):
            cell["source"] = (
                "# GRADED: normalize\n"
                "import os\n"
                "_probe = f'/tmp/lablib-probe-{os.getpid()}'\n"
                "with open(_probe, 'w') as _f:\n"
                "    _f.write('an answer')\n"
                "os.mkdir(_probe + '.d')\n"
                "_modes = {where: os.stat(where).st_mode & 0o777\n"
                "          for where in (os.getcwd(), _probe, _probe + '.d')}\n"
                "def normalize(x):\n"
                "    _open = {w: oct(m) for w, m in _modes.items() if m & 0o077}\n"
                "    if _open:\n"
                "        raise RuntimeError(f'open to other users: {_open}')\n"
                "    return x / x.sum(axis=-1, keepdims=True)\n"
            )
    (subs / "student.ipynb").write_text(json.dumps(notebook))
    entry, done = _grade_without_private_root(tmp_path, hidden, lab, subs)
    assert not entry["isolation"]["filesystem"].startswith("new root"), entry["isolation"]
    normalize = [t for t in entry["tests"] if t["piece"] == "normalize"]
    said = [t.get("message") for t in normalize]
    assert normalize and all(t["passed"] for t in normalize), (said, done.stderr[-2000:])
    assert entry["score"] == entry["max_score"], entry


def test_nothing_outlives_the_batch(graded):
    """No process, and none of the litterer's files or its shared memory segment, on the
    host or in the environment's own /tmp: where the sandbox cannot make them private, the
    grader removes what the run's uid left (supervisor.sweep_leftovers)."""
    import ctypes

    name, work, _, _, batch = graded
    assert batch_leftovers(batch) == []
    folders = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", str(work / "root" / "tmp")]
    assert [f for f in folders if os.path.exists(os.path.join(f, "lablib-litter"))] == []
    assert ctypes.CDLL("libc.so.6").shmget(0x11AB, 0, 0) == -1, "the litterer's segment is gone"


def test_a_python_the_submissions_user_cannot_reach_is_named():
    """Where the child sees the host's folders (no private root), a Python under a folder
    closed to other users cannot start for the unprivileged uid: the stage says which
    folder, and the grader makes that a grader-error, never the student's crash."""
    from lablib.grading.run.isolation import unreachable

    closed = {"/root"}

    def access(path, mode):  # what the submission's user may do: /root is mode 700
        return not any(path == c or path.startswith(c + "/") for c in closed)

    python = "/root/.pyenv/versions/3.11.7/bin/python3.11"
    assert unreachable(["/usr/lib/python3", "/opt/lablib"], access=access) is None
    message = unreachable(["/usr/lib/python3", python], access=access)
    assert f"cannot use {python}: /root is closed to other users" in message, message
    assert "CAP_SYS_ADMIN" in message and "/usr/local" in message
    inside = unreachable([python], private_root=True, access=access)
    assert "/root is not in the sandbox's root file system" in inside, inside


def test_a_grader_run_under_umask_077_grades_in_the_sandbox(tmp_path):
    """A hardened image's umask (077, 027): the stage made the folders above the Python it
    binds in with the grader's umask, closed to the run's uid, and every test of every
    submission was a grader-error ("No module named '_sysconfigdata...'")."""
    from lablib.cli import main
    from grading_paths import FIXTURE_SOLUTION

    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(FIXTURE_SOLUTION, subs / "alice.ipynb")
    out = tmp_path / "out"
    kept = os.umask(0o077)
    try:
        code = main(["grade", str(FIXTURE_LAB), str(subs), "-o", str(out), "--lab-notebook",
                     str(FIXTURE_SOLUTION), "--jobs", "1", "--timeout", "30", "--quiet"])  # fmt: skip
    finally:
        os.umask(kept)
    assert code == 0
    [row] = json.loads((out / "grades.json").read_text())["submissions"]
    assert row["score"] == row["max_score"] and row["isolation"]["uid"] != 0, row["isolation"]


def test_the_ipc_sweep_says_when_it_cannot_look(monkeypatch):
    """/proc mounted with subset=pid (systemd's ProcSubset=pid) hides /proc/sysvipc: the
    sweep found nothing and said nothing, and a segment the run made outlived it."""
    import builtins

    from lablib.grading.run import supervisor

    real_open = builtins.open

    def hidden(path, *args, **kwargs):
        if str(path).startswith("/proc/sysvipc/"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", hidden)
    [note] = supervisor.sweep_leftovers(1234567, folders=[])
    assert "System V IPC objects (shm, sem, msg)" in note and "were not looked for" in note, note
    monkeypatch.setattr(builtins, "open", real_open)
    assert supervisor.sweep_leftovers(1234567, folders=[]) == []
