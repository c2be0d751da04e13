"""Running submissions: the plain-value wire, the child, the sandbox, the supervisor.

The hostile cases here are the red-team attacks on the execution layer (each would
have hung a batch, outlived it, moved a deadline or forged a result before); the
notebook-level ones are in the corpus (test_corpus.py).
"""

import errno
import io
import os
import queue
import time

import numpy as np
import pytest

from lablib.grading.run import Limits, ProbeRequest, ProbeResult, run_submission
from lablib.grading.run import protocol
from lablib.grading.run.isolation import sandbox_possible
from grading_paths import batch_leftovers

pytestmark = [
    pytest.mark.integration,  # runs submissions in sandboxed child processes
    pytest.mark.serial,  # time limits: run alone (.ci/run's serial pass)
]

needs_root = pytest.mark.skipif(
    not sandbox_possible(), reason="the sandbox stage needs root on Linux"
)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        -2.5,
        float("nan"),
        float("inf"),
        "text",
        [1, [2.0, "x"]],
        (1, (2, 3)),
        {"a": np.arange(3), "b": (np.ones((2, 2), np.float32), None)},
        {"a": 1, "d": 2, "t": 3},  # keys that look like the format's own tags
        np.array([True, False]),
        np.array(["ab", "c"]),
    ],
)
def test_encode_decode_round_trip(value):
    tree, blobs = protocol.encode_value(value)
    back = protocol.decode_value(tree, blobs)
    assert repr(back) == repr(value) if not isinstance(value, dict) else True
    if isinstance(value, dict):
        assert set(back) == set(value)
        np.testing.assert_equal(back["a"], value["a"])


def test_encode_rejects_non_plain_values():
    class Sneaky(float):
        def __eq__(self, other):
            return True

    for bad in (Sneaky(1.0), np.array([object()], dtype=object), {1, 2}, np.float32(1.0)):
        with pytest.raises(TypeError):
            protocol.encode_value(bad)


def test_decode_is_strict_and_never_unpickles():
    import pickle

    with pytest.raises(protocol.ProtocolError):
        protocol.decode_value({"a": 0}, [pickle.dumps(object())])
    buf = io.BytesIO()
    np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_value({"a": 0}, [buf.getvalue()])
    for bad in ({"zz": 1}, {"a": 5}, {"d": [[1, 2]]}, {"t": 3, "a": 0}, {"f": "1e400"}):
        with pytest.raises(protocol.ProtocolError):
            protocol.decode_value(bad, [])


def test_frame_reader_caps_each_message_and_the_total():
    r, w = os.pipe()
    protocol.write_frame(w, {"seq": 1}, [b"x" * 10])
    os.close(w)
    reader = protocol.FrameReader(r)
    header, blobs = reader.read()
    assert header["seq"] == 1 and blobs == [b"x" * 10]
    with pytest.raises(EOFError):
        reader.read()
    os.close(r)
    r, w = os.pipe()
    os.write(w, (protocol.MAX_MESSAGE_BYTES + 1).to_bytes(4, "big"))
    os.close(w)
    with pytest.raises(protocol.ProtocolError):
        protocol.FrameReader(r).read()
    os.close(r)
    reader = protocol.FrameReader(-1)
    reader.total = protocol.MAX_TOTAL_BYTES
    reader._exact = lambda n, data=iter([b"\0\0\0\x0c", b'{"blobs":[]}']): next(data)  # noqa: B008 - one iterator for both reads
    with pytest.raises(protocol.ProtocolError, match="in all"):
        reader.read()


def _t(name, probe, timeout=None):
    return ProbeRequest(f"f::{name}", probe, ("f",), timeout)


def _double(ns):
    return ns["f"](np.arange(3.0))


def _whoami(ns):
    import socket

    try:
        socket.create_connection(("1.1.1.1", 53), timeout=1).close()
        net = "up"
    except OSError:
        net = "down"
    return {"uid": os.getuid(), "cwd": os.getcwd(), "net": net}


def _segfault(ns):
    import ctypes

    return ctypes.string_at(0)


def _loop(ns):
    while True:
        pass


def _exit(ns):
    os._exit(7)


def test_run_submission_recovers_from_each_failure_and_keeps_later_results():
    tests = [
        _t("double", _double),
        _t("segfault", _segfault),
        _t("loop", _loop, timeout=1.5),
        _t("exit", _exit),
        _t("again", _double),
    ]
    out = run_submission(
        ["import numpy as np\n"],
        [("f", "def f(x):\n    return 2 * x\nprint('hello')")],
        tests,
        limits=Limits(timeout=5, memory_mb=1024),
    )
    assert out.results["f::double"].ok and np.array_equal(out.results["f::double"].value, [0, 2, 4])
    assert (
        out.results["f::segfault"].kind == "crashed"
        and "SIGSEGV" in out.results["f::segfault"].error
    )
    assert out.results["f::loop"].kind == "timeout"
    assert out.results["f::exit"].kind == "crashed" and "code 7" in out.results["f::exit"].error
    assert out.results["f::again"].ok
    assert out.attempts == 4 and "hello" in out.output
    assert sorted(p.kind for p in out.problems) == ["crashed", "crashed", "timeout"]
    # the instructor learns how each attempt ended
    assert [d.running for d in out.diagnostics] == [
        "test f::segfault",
        "test f::loop",
        "test f::exit",
    ]
    assert (
        out.diagnostics[2].exit == "exited with code 7"
        and "hello" in out.diagnostics[2].output_tail
    )


def test_a_slow_loris_ends_within_the_submissions_total_budget():
    """Every graded cell sleeping just under the limit and probes that end the process
    (each restart replays the cells) ran for minutes: the cells' and probes' time is
    counted over all attempts and stops at Limits.total."""
    import time

    cells = [
        (f"c{i}", f"import time\ntime.sleep(1.7)\ndef f{i}(ns=None):\n    return {i}")
        for i in range(4)
    ]
    exits = [ProbeRequest(f"c{i}::exit", lambda ns: os._exit(3), (f"f{i}",)) for i in range(2)]
    later = [ProbeRequest("c3::value", lambda ns: ns["f3"](), ("f3",))]
    start = time.monotonic()
    out = run_submission([], cells, exits + later, limits=Limits(timeout=2, total=8))
    took = time.monotonic() - start
    assert out.student_seconds < 8 + 2.5, (
        out.student_seconds
    )  # at most one request past the budget's end
    assert took < 8 + 4 * 6, took  # plus the start of each attempt, never a replay of everything
    assert out.results["c3::value"].kind == "timeout", out.results["c3::value"]
    assert "whole time budget (8 s in all)" in out.results["c3::value"].error
    assert any(p.where == "the submission's total time" for p in out.problems), out.problems


def test_values_kept_from_one_submission_are_capped_in_all(monkeypatch):
    """Replies are capped per attempt by the pipe, and what the grader keeps of them per
    submission, across attempts: past the budget a test fails with the reason."""
    from lablib.grading.run import supervisor

    monkeypatch.setattr(supervisor, "MAX_KEPT_BYTES", 400)  # one small array's npy blob: 152 bytes
    tests = [_t("first", _double), _t("second", _double), _t("third", _double)]
    out = run_submission(
        [], [("f", "def f(x):\n    return 2 * x")], tests, limits=Limits(timeout=20)
    )
    assert out.results["f::first"].ok and out.results["f::second"].ok
    third = out.results["f::third"]
    assert not third.ok and "passed 400 bytes in all (this one 152 bytes)" in third.error, (
        third.error
    )
    assert "small arrays" in third.error and out.kept_bytes <= 400


def test_cell_errors_and_missing_objects_are_reported_not_raised():
    out = run_submission(
        [], [("f", "raise ValueError('boom')")], [_t("double", _double)], limits=Limits(timeout=5)
    )
    assert out.cell_errors["f"].kind == "error" and "ValueError: boom" in out.cell_errors["f"].text
    assert out.results["f::double"] == ProbeResult(
        False, None, "error", "the graded cell does not define f"
    )


def test_a_cell_printing_then_exiting_leaves_its_output_and_exit_code_for_the_instructor():
    out = run_submission(
        [],
        [("f", "print('last words', flush=True)\nimport os\nos._exit(3)")],
        [_t("double", _double)],
        limits=Limits(timeout=10),
    )
    assert out.cell_errors["f"].kind == "crashed" and "code 3" in out.cell_errors["f"].text
    assert out.diagnostics[0].exit == "exited with code 3"
    assert "last words" in out.diagnostics[0].output_tail and "last words" in out.output


def test_messages_from_the_child_never_move_a_deadline():
    # A graded cell that keeps writing old-style progress messages to the result pipe
    # while it runs for 60 s: the grader ends it at its own deadline, or at the first
    # message it did not ask for, never later.
    cell = """
import json, os, struct, threading, time
def _spam():
    fds = [int(n) for n in os.listdir("/proc/self/fd")]
    while True:
        for fd in fds:
            for event in ({"event": "cell_start", "piece": "f"}, {"event": "test_start", "test": "f::double"}):
                data = json.dumps(dict(event, blobs=[])).encode()
                try:
                    os.write(fd, struct.pack(">I", len(data)) + data) if fd > 2 else None
                except OSError:
                    pass
        time.sleep(1)
threading.Thread(target=_spam, daemon=True).start()
time.sleep(60)
def f(x):
    return 2 * x
"""
    started = time.monotonic()
    out = run_submission([], [("f", cell)], [_t("double", _double)], limits=Limits(timeout=4))
    assert time.monotonic() - started < 30
    assert out.cell_errors["f"].kind in ("timeout", "crashed")
    assert not out.results["f::double"].ok


def test_a_cell_ending_at_its_limit_costs_only_its_own_piece():
    cells = [
        ("slow", "import time\ntime.sleep(3.0)\nslow = 1"),
        ("f", "def f(x):\n    return 2 * x"),
    ]
    probes = [ProbeRequest("slow::t", lambda ns: ns["slow"], ("slow",)), _t("double", _double)]
    out = run_submission([], cells, probes, limits=Limits(timeout=3.0))
    assert out.results["f::double"].ok, out.results
    assert not out.results["slow::t"].ok or out.results["slow::t"].value == 1


def test_memory_limit_reports_memory():
    def hog(ns):
        chunks = []
        while True:
            chunks.append(np.ones(2**22))

    out = run_submission(
        ["import numpy as np\n"],
        [("f", "f = 1")],
        [_t("hog", hog)],
        limits=Limits(timeout=20, memory_mb=300),
    )
    assert out.results["f::hog"].kind == "memory"
    assert [p.kind for p in out.problems] == ["memory"]


def test_a_detached_process_that_keeps_forking_neither_hangs_the_run_nor_outlives_it(monkeypatch):
    cell = """
import os, time
if os.fork() == 0:
    os.setsid()
    while True:          # a new pid every few ms, holding the output pipe
        if os.fork():
            os._exit(0)
        time.sleep(0.005)
def f(x):
    return 2 * x
"""
    batch = f"reforker-{os.getpid()}-{time.time()}"
    monkeypatch.setenv("LABLIB_BATCH", batch)
    started = time.monotonic()
    out = run_submission([], [("f", cell)], [_t("double", _double)], limits=Limits(timeout=10))
    assert out.results["f::double"].ok
    assert time.monotonic() - started < 60
    time.sleep(0.5)
    assert batch_leftovers(batch) == []


@needs_root
def test_memory_counts_detached_helpers_and_scratch_space():
    # Double-forked helpers leave the child's process tree; the sandbox counts the uid.
    cell = """
import os, time
for _ in range(3):
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()
            block = bytearray(200 * 2**20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            time.sleep(60)
        os._exit(0)
time.sleep(30)
f = 1
"""
    out = run_submission(
        [], [("f", cell)], [_t("one", lambda ns: ns["f"])], limits=Limits(timeout=25, memory_mb=450)
    )
    assert out.cell_errors["f"].kind == "memory", out.cell_errors
    scratch = """
import time
with open("/tmp/fill", "wb") as f:
    for _ in range(450):
        f.write(b"x" * 2**20)
time.sleep(30)
f = 1
"""
    out = run_submission(
        [],
        [("f", scratch)],
        [_t("one", lambda ns: ns["f"])],
        limits=Limits(timeout=25, memory_mb=400),
    )
    assert out.cell_errors["f"].kind in ("memory", "error"), (
        out.cell_errors
    )  # killed, or the tmpfs was full


@needs_root
def test_sandbox_drops_privileges_network_and_hides_the_host(tmp_path):
    import json

    secret = tmp_path.parent / f"{tmp_path.name}-secret"
    secret.mkdir()
    (secret / "answers.py").write_text("SECRET = 42")
    probe_cell = f"""
import os, glob
def f(ns=None):
    out = {{}}
    try:
        out["read"] = open({str(secret / "answers.py")!r}).read()
    except OSError as exc:
        out["read"] = type(exc).__name__
    out["root"] = sorted(os.listdir("/"))
    out["procs"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    out["lock"] = os.path.exists("/run/lock")
    try:
        open("/usr/lablib-was-here", "w")
        out["usr"] = "writable"
    except OSError as exc:
        out["usr"] = type(exc).__name__
    return out
"""
    out = run_submission(
        [],
        [("f", probe_cell)],
        [_t("who", _whoami), _t("look", lambda ns: ns["f"]())],
        limits=Limits(timeout=20),
        mask=[str(secret)],
    )
    who, look = out.results["f::who"].value, out.results["f::look"].value
    assert who["uid"] != 0 and who["net"] == "down" and who["cwd"] == "/tmp/work"
    assert look["read"] == "FileNotFoundError"
    assert not look["lock"] and "run" not in look["root"] and "home" not in look["root"]
    assert look["usr"] in ("OSError", "PermissionError")
    assert max(look["procs"]) < 50  # its own PID namespace
    assert out.isolation.uid == who["uid"] and "network namespace" in out.isolation.network
    assert "PID namespace" in out.isolation.processes and "new root" in out.isolation.filesystem
    json.dumps(out.isolation.to_dict())


def test_a_course_folder_on_pythonpath_exposes_its_packages_not_its_files(tmp_path, monkeypatch):
    """The red team graded with PYTHONPATH naming the course folder: the child could read
    the solutions there. Only what Python imports from such a folder is exposed."""
    from lablib.grading.run.isolation import needed_paths

    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    (course / "solutions" / "lab1_attention.ipynb").write_text("{}")
    (course / "helpers").mkdir()
    (course / "helpers" / "__init__.py").write_text("")
    (course / "tools.py").write_text("")
    (course / "notes.txt").write_text("")
    site = tmp_path / "extra-site"
    (site / "pkg-1.0.dist-info").mkdir(parents=True)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(course), str(site)]))
    exposed = needed_paths()
    assert str(course / "helpers") in exposed and str(course / "tools.py") in exposed
    assert str(site) in exposed  # installed distributions: the folder whole
    assert not [
        p for p in exposed if p == str(course) or "solutions" in p or p.endswith("notes.txt")
    ], exposed


@needs_root
def test_the_solutions_in_a_course_folder_on_pythonpath_stay_hidden(tmp_path, monkeypatch):
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    (course / "solutions" / "lab1_attention.ipynb").write_text('{"answers": 42}')
    (course / "helpers").mkdir()
    (course / "helpers" / "__init__.py").write_text("VALUE = 7\n")
    monkeypatch.setenv("PYTHONPATH", str(course))
    cell = f"""
def f():
    out = {{}}
    for key, path in (("solution", {str(course / "solutions" / "lab1_attention.ipynb")!r}),
                      ("package", {str(course / "helpers" / "__init__.py")!r})):
        try:
            out[key] = open(path).read()
        except OSError as exc:
            out[key] = type(exc).__name__
    return out
"""
    out = run_submission(
        [], [("f", cell)], [_t("look", lambda ns: ns["f"]())], limits=Limits(timeout=20)
    )
    look = out.results["f::look"].value
    assert look == {"solution": "FileNotFoundError", "package": "VALUE = 7\n"}, look


@needs_root
def test_memory_the_supervisor_cannot_see_is_stopped_by_the_kernel():
    """memfd files written and never mapped, and a tmpfs mounted in a user namespace of the
    child's, are in no process's RSS: the red team held 2.9 GB under --memory 2000. The
    attempt's cgroup counts them; the run ends as `memory` and the gradebook says which
    limits the kernel enforced."""
    memfd = """
import os
def f():
    fd = os.memfd_create("hold")
    block = b"x" * (16 * 2**20)
    for _ in range(60):  # 960 MB, never mapped
        os.write(fd, block)
    return "held"
"""
    userns = """
import os, subprocess
def f():
    script = "mkdir -p /tmp/m && mount -t tmpfs -o size=2g none /tmp/m && head -c 900000000 /dev/zero > /tmp/m/x && echo held"
    done = subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True)
    return done.stdout.strip() or done.stderr.strip()[:200]
"""
    for cell in (memfd, userns):
        out = run_submission(
            [],
            [("f", cell)],
            [_t("look", lambda ns: ns["f"]())],
            limits=Limits(timeout=60, memory_mb=400),
        )
        result = out.results["f::look"]
        assert any(n.startswith("kernel limits: cgroup") for n in out.isolation.notes), (
            out.isolation.notes
        )
        # held: the kernel stopped it; or the attack could not even start here (no user namespaces)
        assert result.kind == "memory" or (result.ok and result.value != "held"), result
        if result.kind == "memory":
            assert "kernel" in result.error, result.error


@needs_root
def test_a_classmate_starting_busy_loops_does_not_starve_an_honest_run():
    """A graded cell starting 40 detached busy loops beside an honest submission graded at
    the same time (--jobs 2): each attempt's cgroup has the same CPU weight, so the honest
    probe gets about a core, not 2 of 41 shares."""
    import threading

    hog = """
import subprocess, sys, time
LOOPS = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(40)]
def f():
    time.sleep(12)
    return len(LOOPS)
"""
    honest = """
import time
def f():
    start, wall = time.process_time(), time.monotonic()
    total = 0
    for i in range(6_000_000):
        total += i
    return [time.process_time() - start, time.monotonic() - wall]
"""
    outcomes = {}

    def grade(name, cell, timeout):
        outcomes[name] = run_submission(
            [], [("f", cell)], [_t("look", lambda ns: ns["f"]())], limits=Limits(timeout=timeout)
        )

    hogging = threading.Thread(target=grade, args=("hog", hog, 30))
    hogging.start()
    time.sleep(4)  # the loops are running
    grade("honest", honest, 6)
    hogging.join()
    result = outcomes["honest"].results["f::look"]
    assert result.ok, result  # not a timeout
    assert outcomes["hog"].results["f::look"].value == 40  # the loops ran all along
    cpu, wall = result.value
    # Measured: 0.33 s of wall time for 0.22 s of CPU with the cgroups, 2.76 s without.
    assert wall < 4 * cpu + 0.2, (cpu, wall)
    assert any(n.startswith("kernel limits: cgroup") for n in outcomes["honest"].isolation.notes)


@needs_root
def test_the_child_cannot_make_user_namespaces_but_threads_and_forks_work():
    """A tmpfs mounted in a user namespace of its own was how the red team hid memory; the
    sandbox refuses new user namespaces (seccomp: unshare/clone with CLONE_NEWUSER get
    EPERM, clone3 ENOSYS so that libc falls back to clone), nothing else."""
    cell = """
import os, subprocess, threading
def f():
    out = {}
    done = subprocess.run(["unshare", "-Ur", "true"], capture_output=True, text=True)
    out["unshare"] = done.returncode
    try:
        os.unshare(os.CLONE_NEWUSER)
        out["os.unshare"] = "made"
    except (OSError, AttributeError) as exc:
        out["os.unshare"] = type(exc).__name__
    box = []
    thread = threading.Thread(target=lambda: box.append(1))
    thread.start()
    thread.join()
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    out["thread"] = box
    return out
"""
    out = run_submission(
        [], [("f", cell)], [_t("look", lambda ns: ns["f"]())], limits=Limits(timeout=30)
    )
    look = out.results["f::look"].value
    assert look["unshare"] != 0 and look["os.unshare"] in ("PermissionError", "AttributeError"), (
        look
    )
    assert look["thread"] == [1] and look["fork"] == 3, look
    assert (
        "no new user namespaces, no kernel keyrings or message queues (seccomp)"
        in out.isolation.processes
    )


@needs_root
def test_the_child_has_no_kernel_keyrings():
    """Keyrings belong to no namespace: a keyring joined by name passed a hidden test's
    inputs from one attempt to the next and one student's code to another's run, and
    outlived the batch. The sandbox refuses add_key, request_key and keyctl, and POSIX
    message queues (shared where there is no IPC namespace)."""
    cell = """
import ctypes, os, platform
NUMBERS = {"x86_64": (248, 249, 250, 240), "aarch64": (217, 218, 219, 180)}[platform.machine()]
def f():
    libc = ctypes.CDLL(None, use_errno=True)
    add_key, request_key, keyctl, mq_open = NUMBERS
    out = {}
    ring = libc.syscall(keyctl, 1, b"lablib-shared")  # KEYCTL_JOIN_SESSION_KEYRING
    out["join"] = (ring, os.strerror(ctypes.get_errno()))
    key = libc.syscall(add_key, b"user", b"crib", b"inputs", 6, -3)  # into the session keyring
    out["add_key"] = (key, os.strerror(ctypes.get_errno()))
    found = libc.syscall(request_key, b"user", b"crib", None, 0)
    out["request_key"] = (found, os.strerror(ctypes.get_errno()))
    queue = libc.syscall(mq_open, b"crib", os.O_CREAT | os.O_RDWR, 0o666, None)
    out["mq_open"] = (queue, os.strerror(ctypes.get_errno()))
    if platform.machine() == "x86_64":  # i386's keyctl (288) by int 0x80: another ABI
        import mmap
        code = bytes([0x53, 0xB8, 0x20, 0x01, 0, 0, 0xBB, 0, 0, 0, 0, 0xB9, 0xFD, 0xFF, 0xFF, 0xFF])
        code += bytes([0xBA, 1, 0, 0, 0, 0xCD, 0x80, 0x5B, 0xC3])
        page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(code)
        call = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
        out["i386 keyctl"] = call()
    return out
"""
    out = run_submission(
        [], [("f", cell)], [_t("look", lambda ns: ns["f"]())], limits=Limits(timeout=30)
    )
    look = out.results["f::look"].value
    refused = (-1, os.strerror(errno.EPERM))
    i386 = look.pop("i386 keyctl", -errno.ENOSYS)  # x86_64 only
    assert look == {
        "join": refused,
        "add_key": refused,
        "request_key": refused,
        "mq_open": refused,
    }, look
    assert i386 == -errno.ENOSYS, i386
    assert "no kernel keyrings or message queues (seccomp)" in out.isolation.processes


@needs_root
def test_a_masked_folder_on_pythonpath_stays_masked(tmp_path, monkeypatch):
    """The hidden tests' folder on PYTHONPATH: its modules were bound into the child's root
    (and a module file inside a masked folder made the private root fail). They stay out,
    and the root is private."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "lab9_hidden.py").write_text("EXPECTED = 'the hidden answer'\n")
    os.chmod(tmp_path, 0o755)
    monkeypatch.setenv("PYTHONPATH", str(hidden))
    cell = f"""
def f():
    try:
        return open({str(hidden / "lab9_hidden.py")!r}).read()
    except OSError as exc:
        return type(exc).__name__
"""
    out = run_submission(
        [],
        [("f", cell)],
        [_t("look", lambda ns: ns["f"]())],
        limits=Limits(timeout=30),
        mask=[str(hidden)],
    )
    assert out.results["f::look"].value == "FileNotFoundError", out.results["f::look"]
    assert not [n for n in out.isolation.notes if "private root" in n], out.isolation.notes


@needs_root
def test_what_a_run_leaves_in_any_world_writable_folder_is_swept(tmp_path):
    """Without a private root, a run's files in a folder every user may write in would wait
    there for the next attempt (or student) to read: every such folder near the top of
    the tree is found once and swept of what the run's uid owns, not only /tmp."""
    from lablib.grading.run.supervisor import SHARED_FOLDERS, shared_folders, sweep_leftovers

    crash = tmp_path / "var" / "crash"
    deep = tmp_path / "srv" / "a" / "b" / "c"
    for folder in (crash, deep):
        folder.mkdir(parents=True)
        os.chmod(folder, 0o1777)
    (tmp_path / "var" / "closed").mkdir()
    found = shared_folders(roots=(str(tmp_path),), depth=3)
    assert found[: len(SHARED_FOLDERS)] == SHARED_FOLDERS
    assert str(crash) in found and str(deep) not in found  # four levels down: past depth 3
    assert str(tmp_path / "var" / "closed") not in found
    uid = 1_987_654_321
    left, kept = crash / "inputs.txt", crash / "someone-elses.txt"
    left.write_text("the hidden test's inputs")
    kept.write_text("not the run's")
    os.chown(left, uid, uid)
    assert sweep_leftovers(uid, folders=found) == []
    assert not left.exists() and kept.exists()


def _venv_sharing_this_one(path):
    """A new venv at ``path`` that finds this interpreter's packages and lablib through a
    .pth file (as an instructor's venv elsewhere would find them installed)."""
    import subprocess
    import sys
    import sysconfig

    import lablib

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site_dir = subprocess.run(
        [
            str(path / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    lines = [
        sysconfig.get_path("purelib"),
        os.path.dirname(os.path.dirname(os.path.realpath(lablib.__file__))),
    ]
    with open(os.path.join(site_dir, "shared.pth"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


@needs_root
def test_sandbox_runs_a_python_installed_under_tmp(tmp_path):
    """The child's private /tmp must not hide a venv (or lablib) that lives under /tmp."""
    import subprocess

    venv = _venv_sharing_this_one(tmp_path / "venv")
    code = """
import numpy as np
from lablib.grading.run import run_submission, ProbeRequest, Limits
out = run_submission([], [("f", "import sys\\ndef f():\\n    return sys.executable")],
                     [ProbeRequest("f::t", lambda ns: ns["f"](), ("f",))], limits=Limits(timeout=30))
print(out.results["f::t"])
"""
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert "ok=True" in result.stdout and str(venv) in result.stdout, (
        result.stdout + result.stderr[-2000:]
    )


@needs_root
def test_sandbox_hides_host_sockets_the_grader_command_line_and_keeps_shared_memory_private(
    tmp_path,
):
    import ctypes
    import socket

    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "service.sock"))  # a root service's socket on the host
    server.listen(1)
    key = 0x1AB5 + os.getpid() % 1000
    cell = f"""
import ctypes, os, socket
def f():
    out = {{}}
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect({str(tmp_path / "service.sock")!r})
        out["socket"] = "connected"
    except OSError as exc:
        out["socket"] = type(exc).__name__
    out["cmdlines"] = [open(f"/proc/{{p}}/cmdline", "rb").read().decode(errors="replace")
                       for p in os.listdir("/proc") if p.isdigit()]
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    out["big_segment"] = libc.shmget({key + 1}, 2**30, 0o1000 | 0o600)   # 1 GiB: above the cap
    out["segment"] = libc.shmget({key}, 2**20, 0o1000 | 0o600)
    return out
"""
    try:
        out = run_submission(
            [], [("f", cell)], [_t("look", lambda ns: ns["f"]())], limits=Limits(timeout=20)
        )
    finally:
        server.close()
    look = out.results["f::look"].value
    assert look["socket"] in ("FileNotFoundError", "ConnectionRefusedError", "PermissionError")
    assert not any("pytest" in c for c in look["cmdlines"]), look["cmdlines"]
    assert look["big_segment"] == -1 and look["segment"] >= 0
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    assert libc.shmget(key, 0, 0) == -1  # the run's segment did not outlive it


@needs_root
def test_a_venv_inside_a_masked_submissions_folder_still_runs_and_hides_the_rest(tmp_path):
    import subprocess

    subs = tmp_path / "submissions"
    subs.mkdir()
    (subs / "other-student.ipynb").write_text('{"secret": "answers"}')
    venv = _venv_sharing_this_one(subs / ".venv")
    code = f'''
from lablib.grading.run import run_submission, ProbeRequest, Limits
cell = """
import os
def f():
    try:
        return open({str(subs / "other-student.ipynb")!r}).read()
    except OSError as exc:
        return type(exc).__name__
"""
out = run_submission([], [("f", cell)], [ProbeRequest("f::t", lambda ns: ns["f"](), ("f",))],
                     limits=Limits(timeout=60), mask=[{str(subs)!r}])
print("RESULT", out.results["f::t"])
'''
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert "RESULT ProbeResult(ok=True" in result.stdout, result.stdout + result.stderr[-2000:]
    assert "answers" not in result.stdout


def test_floods_and_forged_isolation_reports_are_neither_kept_nor_recorded():
    import psutil

    cell = """
import json, os, struct
def _frame(header, blob=b""):
    data = json.dumps(dict(header, blobs=[len(blob)] if blob else [])).encode()
    return struct.pack(">I", len(data)) + data + blob
fds = [int(n) for n in os.listdir("/proc/self/fd") if int(n) > 2]
for fd in fds:   # a reply claiming the grader runs as root on the host network
    try:
        os.write(fd, _frame({"seq": 2, "event": "isolation", "uid": 0, "network": "host", "notes": ["x" * 10**6]}))
    except OSError:
        pass
f = 1
"""
    flood = """
def flood():
    import json, os, struct
    blob = b"x" * (60 * 2**20)
    data = json.dumps({"seq": 99, "event": "result", "blobs": [len(blob)]}).encode()
    for fd in [int(n) for n in os.listdir("/proc/self/fd") if int(n) > 2]:
        for _ in range(25):
            try:
                os.write(fd, struct.pack(">I", len(data)) + data + blob)
            except OSError:
                break
    return 1
"""
    before = psutil.Process().memory_info().rss
    out = run_submission(
        [],
        [("f", cell), ("flood", flood)],
        [
            ProbeRequest("f::one", lambda ns: ns["f"], ("f",)),
            ProbeRequest("flood::t", lambda ns: ns["flood"](), ("flood",)),
        ],
        limits=Limits(timeout=30),
    )
    assert (
        out.results["flood::t"].kind == "crashed"
        and "did not ask for" in out.results["flood::t"].error
    )
    assert psutil.Process().memory_info().rss - before < 400 * 2**20
    assert out.isolation.network != "host" and "x" * 1000 not in str(out.isolation)
    assert out.isolation.uid != 0 or not sandbox_possible()


@pytest.mark.parametrize(
    "version, files, cause",
    [
        (2, {"memory.events": "low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n"}, "limit"),
        (2, {"memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 1\n"}, "outside"),
        (2, {"memory.events": "low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n"}, ""),
        (1, {"memory.oom_control": "under_oom 0\noom_kill 1\n", "memory.failcnt": "4"}, "limit"),
        (1, {"memory.oom_control": "under_oom 0\noom_kill 1\n", "memory.failcnt": "0"}, "outside"),
        (1, {"memory.oom_control": "under_oom 0\noom_kill 0\n", "memory.failcnt": "4"}, ""),
        (1, {"memory.oom_control": "under_oom 0\n", "memory.failcnt": "2"}, "limit"),  # old kernel
        (  # a kernel that keeps no failcnt: the peak reached the limit
            1,
            {"memory.oom_control": "oom_kill 1\n", "memory.max_usage_in_bytes": str(400 * 2**20)},
            "limit",
        ),
        (2, {"memory.events": "oom 0\noom_kill 1\n", "memory.peak": str(400 * 2**20)}, "outside"),
        (2, {"memory.events": "oom 0\noom_kill 1\n", "memory.peak": str(300 * 2**20)}, "outside"),
    ],
)
def test_an_oom_kill_is_the_students_only_where_their_own_limit_was_reached(
    tmp_path, version, files, cause
):
    """The kernel counts a group's processes killed by any OOM killer: the machine's
    (other processes, the notebooks graded beside it) as well as the group's own limit.
    A run killed while under its limit was recorded as the student's `memory` and cached;
    it is the grader's error now (not cached, graded again alone after a --jobs run)."""
    from lablib.grading.results import Kind
    from lablib.grading.run import supervisor
    from lablib.grading.run.cgroups import Cgroup

    for name, text in files.items():
        (tmp_path / name).write_text(text)
    group = Cgroup({"memory": str(tmp_path)}, version, 400 * 2**20)
    assert group.oom_cause() == cause
    attempt = supervisor._Attempt.__new__(supervisor._Attempt)
    attempt.events, attempt.cgroup, attempt.limits = queue.Queue(), group, Limits(memory_mb=400)
    attempt.events.put(("eof", None, None))
    kind, detail, _ = attempt.wait(1, 5.0)
    expected = {"limit": Kind.MEMORY, "outside": Kind.GRADER_ERROR, "": Kind.CRASHED}[cause]
    assert kind == expected, (kind, detail)
    if cause == "outside":
        assert detail == supervisor.OUT_OF_MACHINE_MEMORY


def test_cleaning_up_never_recurses_nor_kills_a_pid_given_to_another_process(tmp_path):
    """Without the sandbox: a scratch folder nested 3,000 deep made the clean-up raise
    RecursionError (the student's row a grader error, the folder left on disk); a pid seen
    in the run's tree and since given to another process was killed at the end of the
    run; and the run's own child, killed but not yet reaped, was "a process that could not
    be ended" for 2 s of retries."""
    import subprocess
    import sys

    from lablib.grading.run import supervisor

    here = os.open(tmp_path, os.O_RDONLY)
    os.mkdir("top", dir_fd=here)
    fd = os.open("top", os.O_RDONLY, dir_fd=here)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.close(fd)
    os.close(here)
    supervisor._remove_tree(str(tmp_path / "top"))
    assert not (tmp_path / "top").exists()

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = supervisor._started(__import__("psutil").Process(other.pid))
        assert supervisor._sweep(supervisor._by_token("t", {other.pid: started - 5}), rounds=2)
        assert other.poll() is None, "a pid the run saw earlier, now another process's"
        zombie = subprocess.Popen([sys.executable, "-c", "pass"])
        time.sleep(1)  # ended, not reaped: a zombie
        seen = {zombie.pid: supervisor._started(__import__("psutil").Process(zombie.pid))}
        began = time.monotonic()
        assert supervisor._sweep(supervisor._by_token("t", seen)) and time.monotonic() - began < 1
        zombie.wait()
    finally:
        other.kill()
        other.wait()


def test_out_of_memory_the_kernel_ends_the_submission_never_the_grader():
    """The machine out of memory (Gradescope's container of 768 MB by default, two
    TensorFlow processes): the kernel's OOM killer could pick the grader, and then no
    results were written at all. The student's process asks to be picked first."""
    cell = "def f():\n    return open('/proc/self/oom_score_adj').read().strip()\n"
    out = run_submission(
        [], [("f", cell)], [_t("look", lambda ns: ns["f"]())], limits=Limits(timeout=30)
    )
    assert out.results["f::look"].value == "1000", out.results
    with open("/proc/self/oom_score_adj") as f:
        assert int(f.read()) < 1000, "the grader keeps its own"
