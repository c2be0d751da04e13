"""The grader's side of a run: start the child, send requests, own every deadline, clean up.

:func:`run_submission` runs the lab's set-up cells, the student's graded cells and then
each probe, one request at a time. Each request's deadline is set by the grader when it
sends the request; no message from the child moves it. A request that overruns, runs out
of memory or ends the process costs only itself: the child is killed and a new one
replays the set-up and the graded cells (except one that caused the failure) and goes on
with the probes still to run.

At the end of every attempt every process of the run is ended, detached or not: with
the sandbox (root on Linux) the run has its own PID namespace and uid, so ending the
namespace's first process ends them all, and a sweep of the uid checks that none is
left; without it, the child's process tree and every process carrying the run's token
in its environment are swept until none is left. Pipes are read from raw descriptors,
so a process that keeps one open can never block the grader.

Memory counts every process of the run (by uid with the sandbox, else the process
tree) plus the run's scratch tmpfs: only the tmpfs the sandbox stage itself mounted as
the child's root, and only when it did (the stage says so, and the file system found
there must be that tmpfs: its size, not the host's root device). Where no private root
could be made (a chroot, a container without CAP_SYS_ADMIN: ``mount /: Invalid
argument``), the child's root is the host's file system, whose used blocks are no
measure of the run: they are never counted, and the gradebook's isolation notes say
what memory was measured.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import json
import os
import queue
import re
import secrets
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from lablib.grading.results import Diagnostic, Isolation, Kind
from lablib.grading.run import cgroups as _cgroups
from lablib.grading.run import isolation as _isolation
from lablib.grading.run.protocol import (
    Command,
    FrameReader,
    ProbeResult,
    ProtocolError,
    decode_value,
)

__all__ = ["run_submission", "RunOutcome", "Limits", "CellError", "Problem"]

OUTPUT_HEAD = 8_000
OUTPUT_TAIL = 8_000
#: Set while grading is being stopped (Ctrl-C, a signal to end): every run still waiting
#: on its child ends at once as the grader's error (never cached), its processes ended.
STOPPING = threading.Event()
#: Why grading stops, by default (see :func:`stop_all`).
STOPPED_WHY = "grading was interrupted (Ctrl-C or a signal to end)"
_why_stopped = [STOPPED_WHY]


def stop_all(why: str = STOPPED_WHY) -> None:
    """Stop every run of this process now (:data:`STOPPING`), each run saying ``why``."""
    _why_stopped[0] = why
    STOPPING.set()


def stopped_why() -> str:
    """Why grading was stopped (:func:`stop_all`)."""
    return _why_stopped[0]


#: Why a run the kernel ended for memory while under its own limit is the grader's error.
OUT_OF_MACHINE_MEMORY = (
    "was ended by the kernel while under its memory limit: the machine ran out of memory "
    "(its other processes, or the notebooks graded beside this one), not the student's doing"
)
STARTUP_TIMEOUT = 120.0
SETUP_TIMEOUT = 300.0
MAX_ATTEMPTS = 6
#: The default total budget of a submission's cells and probes, in per-request timeouts.
TOTAL_FACTOR = 10
#: Most bytes of test values (arrays) one submission's replies may leave in the grader, in
#: all of its attempts together (each attempt's pipe is capped on its own as well): past
#: it, later tests fail with a reason, and the values are not kept.
MAX_KEPT_BYTES = 256 * 2**20
MAX_TEXT = 2_000  # characters kept of any text the child sends (error messages)
SCRATCH_MB = 512


@dataclasses.dataclass(frozen=True)
class Limits:
    """Per-run limits: seconds per graded cell and per probe (a probe's own timeout wins),
    memory in MB for all the run's processes and its scratch space, the sandbox's use, and
    ``total``: seconds the submission's graded cells and probes may take in all, over every
    attempt (None: :data:`TOTAL_FACTOR` times ``timeout``). Without it, cells that each
    stop just short of ``timeout`` and a crash that replays them cost up to
    :data:`MAX_ATTEMPTS` times their sum."""

    timeout: float = 60.0
    memory_mb: float = 4096.0
    isolate: bool = True
    total: float | None = None

    @property
    def total_seconds(self) -> float:
        return float(self.total) if self.total is not None else TOTAL_FACTOR * self.timeout


@dataclasses.dataclass(frozen=True)
class CellError:
    """A graded cell that did not run to its end: how (:class:`Kind`), what happened, and
    the name of the exception it raised ("" when none or not a plain identifier)."""

    kind: Kind
    text: str
    exception: str = ""


@dataclasses.dataclass(frozen=True)
class Problem:
    """A request whose end counts in the submission's status (timeout, memory, crashed)
    and where it happened (``graded cell <piece>``, ``test <id>``, ``set-up``, ``startup``)."""

    kind: Kind
    where: str


@dataclasses.dataclass
class RunOutcome:
    """What one submission's run produced.

    Attributes:
        results: test id -> :class:`ProbeResult`.
        cell_errors: piece -> :class:`CellError` for graded cells that failed to run.
        problems: :class:`Problem` entries for the status (timeout, memory, crashed).
        output: the child's stdout and stderr, capped (head and tail kept).
        isolation: what isolation was in effect (recorded by the grader, never the child).
        diagnostics: for the instructor: one :class:`Diagnostic` per attempt that did not
            end normally (what it was running, how it ended, the exit status, the tail of
            its output).
        attempts: how many child processes were started.
        seconds: wall time.
    """

    results: dict[str, ProbeResult] = dataclasses.field(default_factory=dict)
    cell_errors: dict[str, CellError] = dataclasses.field(default_factory=dict)
    problems: list[Problem] = dataclasses.field(default_factory=list)
    output: str = ""
    isolation: Isolation = dataclasses.field(default_factory=Isolation)
    diagnostics: list[Diagnostic] = dataclasses.field(default_factory=list)
    attempts: int = 0
    seconds: float = 0.0
    kept_bytes: int = 0
    student_seconds: float = 0.0


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MB" if n >= 2**20 else f"{n} bytes"


class _Capped:
    """Keeps the first and last bytes of a stream."""

    def __init__(self):
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes):
        room = OUTPUT_HEAD - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > OUTPUT_TAIL:
                self.dropped += len(self.tail) - OUTPUT_TAIL
                del self.tail[: len(self.tail) - OUTPUT_TAIL]

    def text(self) -> str:
        middle = f"\n[... {self.dropped} bytes of output dropped ...]\n" if self.dropped else ""
        return (bytes(self.head) + middle.encode() + bytes(self.tail)).decode("utf-8", "replace")


def _identifier(value: Any) -> str:
    """``value`` when it is a plain ASCII identifier of at most 100 characters (an
    exception's name as the child reports it), else "": the child's word goes into the
    status column unescaped only when it cannot be markup, a formula or a control code."""
    return (
        value
        if isinstance(value, str) and re.fullmatch(r"[A-Za-z_]\w{0,99}", value, re.ASCII)
        else ""
    )


def _text(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def _describe_status(status: int | None) -> str:
    if status is None:
        return "exit status unknown"
    if status < 0:
        try:
            return f"killed by signal {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited with code {status}"


def _child_env(token: str) -> dict:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        # Unbuffered: what the student's code printed before a crash, a kill at the time
        # limit or os._exit still reaches the feedback.
        "PYTHONUNBUFFERED": "1",
        "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        # A GPU shared by the notebooks graded at once (--jobs): each takes the memory it
        # uses, not the whole card, which would leave the others none (TensorFlow's default).
        "TF_FORCE_GPU_ALLOW_GROWTH": os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH", "true"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "MPLBACKEND": "Agg",
        "LABLIB_GRADING": "1",
        "LABLIB_RUN_TOKEN": token,
    }
    # LABLIB_BATCH: an operator's (or a test's) label for one batch's processes.
    for key in ("PYTHONPATH", "LABLIB_FAST", "LABLIB_BATCH"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def _pickle_probes_by_value(probes) -> None:
    """Probes from modules the child cannot import (hidden tests, spec files, test
    modules) travel by value; lablib's own modules are imported by the child."""
    import cloudpickle

    for request in probes:
        name = getattr(request.probe, "__module__", None) or ""
        module = sys.modules.get(name)
        if module is None or name == "__main__" or name.split(".")[0] == "lablib":
            continue
        try:
            cloudpickle.register_pickle_by_value(module)
        except ValueError:
            pass


# --------------------------------------------------------------------------- cleanup


def _sweep(match, *, rounds: int = 100, pause: float = 0.02) -> bool:
    """Kill every process ``match(process)`` accepts, again and again until none is
    left (a process that forks in a loop gets a new pid every few ms). True when none
    is left."""
    import psutil

    for _ in range(rounds):
        victims = []
        for process in psutil.process_iter(["uids"]):
            try:
                if match(process):
                    victims.append(process)
            except psutil.Error:
                pass
        if not victims:
            return True
        for process in victims:
            try:
                process.kill()
            except psutil.Error:
                pass
        time.sleep(pause)
    return False


def _remove_tree(path: str) -> None:
    """Remove the folder ``path`` and all it holds, links never followed, however deep a
    submission nested its folders (Python's ``shutil.rmtree`` recurses once per level
    and fails past about a thousand; ``rm`` walks any depth).

    Raises:
        OSError: something is left."""
    import shutil

    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        return
    except (RecursionError, OSError):
        subprocess.run(["rm", "-rf", "--", path], capture_output=True, check=False)
        if os.path.lexists(path):
            raise OSError(errno.ENOTEMPTY, f"{path} could not be removed") from None


def _started(process) -> float | None:
    """``process``'s start time, or None where it cannot be read (it ended): on Linux the
    kernel's count of clock ticks since boot (``/proc/<pid>/stat``), which a change of the
    wall clock leaves as it is; elsewhere psutil's."""
    try:
        with open(f"/proc/{process.pid}/stat", "rb") as f:
            return float(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        pass
    try:
        return process.create_time()
    except Exception:  # noqa: BLE001 - psutil's errors: the process ended or is not ours
        return None


def _by_uid(uid):
    def match(process):
        uids = process.info.get("uids")
        return uids is not None and uid in (uids.real, uids.effective)

    return match


def _by_token(token, tree: dict):
    """A match of the run's processes without a uid of their own: those seen in its tree
    (``tree``: pid -> start time; a pid another process has since been given is not the
    run's) and those carrying its token. A zombie is ended already: its parent reaps it."""
    import psutil

    me = os.getpid()

    def match(process):
        if process.pid == me or process.status() == psutil.STATUS_ZOMBIE:
            return False
        if process.pid in tree:
            return _started(process) == tree[process.pid]
        try:
            return process.environ().get("LABLIB_RUN_TOKEN") == token
        except Exception:  # noqa: BLE001 - other users' processes, zombies
            return False

    return match


#: Folders every user may write in, where a run without a private root leaves files on
#: the host (each attempt's uid is its own, so what that uid owns there is the run's).
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
#: Where :func:`shared_folders` looks for other folders every user may write in.
_WRITABLE_ROOTS = ("/var", "/run", "/dev", "/srv", "/opt", "/home", "/mnt", "/media", "/usr/local")


@functools.cache
def shared_folders(roots=_WRITABLE_ROOTS, depth: int = 3, limit: int = 20_000) -> tuple[str, ...]:
    """:data:`SHARED_FOLDERS` and every other folder any user may write in (mode o+w, as
    ``/var/crash`` or a course folder made world-writable), found under ``roots`` down to
    ``depth`` levels (links not followed, at most ``limit`` folders read): what one attempt
    could leave there for the next one to read, where the sandbox gives no private root,
    is swept after each attempt. Read once per grading process."""
    found, seen = list(SHARED_FOLDERS), 0
    todo = [(root, 0) for root in roots]
    while todo and seen < limit:
        folder, level = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                if not entry.is_dir(follow_symlinks=False) or entry.path.startswith("/proc"):
                    continue
                if entry.stat(follow_symlinks=False).st_mode & 0o002:
                    found.append(entry.path)
            except OSError:
                continue
            if level + 1 < depth:
                todo.append((entry.path, level + 1))
    return tuple(dict.fromkeys(found))


_IPC = (("shm", "shmid"), ("sem", "semid"), ("msg", "msqid"))  # /proc/sysvipc/<file>: its id column


def _ipc_objects(uid: int, unread: list | None = None) -> list[tuple[str, int]]:
    """``(kind, id)`` of the System V shared memory segments, semaphore sets and message
    queues ``uid`` owns or made, in this IPC namespace; ``unread`` gets the kinds whose
    list could not be read (``/proc/sysvipc`` hidden: systemd's ProcSubset=pid)."""
    found = []
    for kind, id_column in _IPC:
        try:
            with open(f"/proc/sysvipc/{kind}", encoding="ascii") as f:
                header, *rows = f.read().splitlines()
        except (OSError, ValueError):
            if unread is not None:
                unread.append(kind)
            continue
        names = header.split()
        for row in rows:
            values = dict(zip(names, row.split()))
            try:
                if uid in (int(values["uid"]), int(values["cuid"])):
                    found.append((kind, int(values[id_column])))
            except (KeyError, ValueError):
                continue
    return found


#: Removes System V IPC objects given as ``kind:id`` arguments; exits with how many it
#: could not remove (EINVAL: already gone). Run by the grader, and as a run's uid.
_REMOVE_IPC = """
import ctypes, ctypes.util, sys
libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
left = 0
for arg in sys.argv[1:]:
    kind, ident = arg.split(":")
    rc = {"shm": lambda i: libc.shmctl(i, 0, None), "sem": lambda i: libc.semctl(i, 0, 0),
          "msg": lambda i: libc.msgctl(i, 0, None)}[kind](int(ident))
    left += rc != 0 and ctypes.get_errno() != 22
sys.exit(min(left, 100))
"""


def _remove_ipc(objects, uid=None) -> None:
    """Remove System V IPC objects ``(kind, id)`` in a small process (as ``uid`` when
    given: a grader without CAP_SYS_ADMIN may remove only its own); raises
    ``CalledProcessError`` when some could not be removed."""
    subprocess.run(
        [sys.executable, "-I", "-S", "-c", _REMOVE_IPC, *(f"{k}:{i}" for k, i in objects)],
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
        timeout=30,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        **({} if uid is None else {"user": uid, "group": uid, "extra_groups": []}),
    )


def sweep_leftovers(uid: int, folders=None) -> list[str]:
    """Remove what the run's ``uid`` left outside its processes where the sandbox could not
    give it private ones (no private root or IPC namespace: a chroot, a container without
    CAP_SYS_ADMIN): files and folders it owns at the top of the shared writable folders
    (:func:`shared_folders`; links removed, never followed), and its System V IPC
    objects (removed as ``uid`` itself where the grader may not). Run once every process of
    ``uid`` is ended. Returns notes on what could not be removed."""

    notes = []
    for folder in shared_folders() if folders is None else folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    _remove_tree(entry.path)
                else:
                    os.unlink(entry.path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                notes.append(
                    f"could not remove {entry.path}, left by the submission: {exc.strerror}"
                )
    unread: list = []
    objects = _ipc_objects(uid, unread)
    if unread:
        notes.append(
            f"System V IPC objects ({', '.join(unread)}) the submission may have made were not "
            f"looked for: /proc/sysvipc cannot be read here (a /proc mounted with "
            f"subset=pid); what it made there outlives the run"
        )
    if objects:
        try:  # as the owner itself (CAP_SETUID is in Docker's default set; CAP_SYS_ADMIN is not)
            _remove_ipc(objects, uid)
        except (OSError, subprocess.SubprocessError):
            try:
                _remove_ipc(objects)
            except (OSError, subprocess.SubprocessError) as exc:
                notes.append(
                    f"System V IPC objects the submission made could not be removed ({exc})"
                )
    return notes


# --------------------------------------------------------------------------- one attempt


class _Attempt:
    """One child process serving requests (see :func:`run_submission`)."""

    def __init__(self, limits: Limits, mask, sandbox: bool):
        import psutil  # imported here, before any worker needs it

        self.limits = limits
        self.sandbox = sandbox
        self.token = secrets.token_hex(16)
        self.output = _Capped()
        self.events: queue.Queue = queue.Queue()
        self.control: dict = {}
        self.control_done = threading.Event()
        self.isolation_seen = threading.Event()
        self.result_eof = threading.Event()
        self.outgoing: queue.Queue = queue.Queue()
        self.seq = 0
        self.tree: dict[int, float | None] = {}  # pid -> start time, of every process seen
        self.uid = None
        self.init_pid = None
        self.scratch_fd = (
            None  # the sandbox's scratch tmpfs (the child's root), when it mounted one
        )
        self.scratch_note = ""
        self._scratch_lock = threading.Lock()
        self.scratch = tempfile.mkdtemp(prefix="lablib-run-")
        result_r, result_w = os.pipe()
        control_r = control_w = None
        self.cgroup, self.cgroup_note = None, ""
        if sandbox:
            control_r, control_w = os.pipe()
            argv, env, prefix = self._sandbox_command(mask, result_w, control_w)
        else:
            self.isolation_seen.set()
            argv, env, prefix = self._plain_command(result_w)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=tuple(fd for fd in (result_w, control_w) if fd is not None),
            cwd=self.scratch,
            env=env,
            start_new_session=True,
        )
        self.tree[self.proc.pid] = _started(psutil.Process(self.proc.pid))
        os.close(result_w)
        if control_w is not None:
            os.close(control_w)
        self.outgoing.put(prefix)
        self._start_threads(result_r, control_r)

    def _sandbox_command(self, mask, result_w: int, control_w: int):
        """``(argv, env, prefix)`` of a sandboxed child: the isolation stage
        (:mod:`.isolation`) under a fresh uid and cgroup, its configuration (root,
        exposed and masked paths, uid, environment, scratch size, cgroup) sent first on
        its stdin as ``prefix``."""
        env = _child_env(self.token)
        self.uid = 1_000_000 + secrets.randbelow(1_000_000_000)
        os.chmod(self.scratch, 0o755)
        self.cgroup, self.cgroup_note = _cgroups.create(
            f"lablib-{self.token[:16]}", self.limits.memory_mb
        )
        config = json.dumps(
            {
                "root": self.scratch,
                "expose": _isolation.needed_paths(masked=mask),
                "mask": sorted(set(mask)),
                "uid": self.uid,
                "env": env,
                "tmpfs_mb": SCRATCH_MB,
                "cgroup_procs": self.cgroup.procs_files if self.cgroup else [],
            }
        ).encode()
        argv = [sys.executable, "-m", "lablib.grading.run.isolation"]
        argv += [str(control_w), str(result_w), str(self.limits.memory_mb)]
        return argv, env, struct.pack(">I", len(config)) + config

    def _plain_command(self, result_w: int):
        """``(argv, env, prefix)`` of a child without the sandbox (``sandbox=False``): the
        child itself, its home and temporary folder the scratch folder, no prefix."""
        env = dict(_child_env(self.token), HOME=self.scratch, TMPDIR=self.scratch)
        argv = [sys.executable, "-m", "lablib.grading.run.child"]
        return argv + [str(result_w), str(self.limits.memory_mb)], env, b""

    def _start_threads(self, result_r: int, control_r: int | None) -> None:
        """The threads that feed the child's stdin and read its results, its output and
        (sandboxed) the isolation stage's control pipe."""
        self.threads = [
            threading.Thread(target=self._write_stdin, daemon=True),
            threading.Thread(target=self._read_results, args=(result_r,), daemon=True),
            threading.Thread(
                target=self._read_output, args=(self.proc.stdout.fileno(),), daemon=True
            ),
        ]
        if control_r is not None:
            self.threads.append(
                threading.Thread(target=self._read_control, args=(control_r,), daemon=True)
            )
        else:
            self.control_done.set()
        for t in self.threads:
            t.start()

    # threads ----------------------------------------------------------------
    def _write_stdin(self):
        fd = self.proc.stdin.fileno()
        try:
            while True:
                data = self.outgoing.get()
                if data is None:
                    break
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
        except OSError:
            pass

    def _read_results(self, fd):
        reader = FrameReader(fd)
        try:
            while True:
                try:
                    header, blobs = reader.read()
                except EOFError:
                    self.result_eof.set()
                    self.events.put(("eof", None, None))
                    return
                except (ProtocolError, ValueError, struct.error) as exc:
                    self.events.put(("bad", str(exc), None))
                    return
                self.events.put(("reply", header, blobs))
        finally:
            os.close(fd)

    def _read_output(self, fd):
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output.feed(chunk)

    def _read_control(self, fd):
        buffer = b""
        try:
            while chunk := os.read(fd, 65536):
                buffer += chunk
                while len(buffer) >= 4:
                    (size,) = struct.unpack(">I", buffer[:4])
                    if len(buffer) < 4 + size:
                        break
                    message = json.loads(buffer[4 : 4 + size])
                    buffer = buffer[4 + size :]
                    if message.get("event") == "isolation":
                        self.init_pid = message.get("init_pid")
                        self.control["stage_ok"] = message.get("ok") is True
                        self._open_scratch(message)
                        self.control["isolation"] = {
                            k: message[k]
                            for k in ("uid", "network", "filesystem", "processes", "notes")
                        }
                        self.isolation_seen.set()
                    elif message.get("event") == "exit":
                        self.control["status"] = message.get("status")
        finally:
            os.close(fd)
            self.isolation_seen.set()
            self.control_done.set()

    def _open_scratch(self, message: dict) -> None:
        """Hold the child's root file system when the stage reports it mounted its scratch
        tmpfs there and the file system found is that tmpfs (its size as asked, another
        device than the grader's root); else say in ``scratch_note`` why it is not counted."""
        if not message.get("scratch_tmpfs"):
            self.scratch_note = (
                "memory measured: the run's processes only (no private scratch tmpfs: the "
                "child's files are on the host's disk)"
            )
            return
        try:
            fd = os.open(
                f"/proc/{int(message['init_pid'])}/root",
                os.O_RDONLY | getattr(os, "O_DIRECTORY", 0),
            )
        except (OSError, KeyError, TypeError, ValueError) as exc:
            self.scratch_note = f"memory measured: the run's processes only (its scratch tmpfs not reachable: {exc})"
            return
        try:
            st, own = os.fstatvfs(fd), os.fstat(fd)
            expected = int(message.get("scratch_mb", SCRATCH_MB)) * 2**20
            if st.f_blocks * st.f_frsize != expected or own.st_dev == os.stat("/").st_dev:
                raise OSError(
                    f"the file system found there is not the run's {expected >> 20} MB tmpfs"
                )
        except OSError as exc:
            os.close(fd)
            self.scratch_note = (
                f"memory measured: the run's processes only (its scratch tmpfs not counted: "
                f"{exc.strerror or exc})"
            )
            return
        with self._scratch_lock:
            self.scratch_fd = fd

    def _close_scratch(self) -> None:
        with self._scratch_lock:
            fd, self.scratch_fd = self.scratch_fd, None
        if fd is not None:
            os.close(fd)

    # requests ---------------------------------------------------------------
    def send(self, command: Command) -> None:
        import cloudpickle

        payload = cloudpickle.dumps(command)
        self.outgoing.put(struct.pack(">Q", len(payload)) + payload)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def wait(self, seq: int, budget: float):
        """The reply to request ``seq`` within ``budget`` seconds, or how the wait ended:
        ``("reply", header, blobs)`` or ``(kind, detail, None)`` with kind in timeout,
        memory, crashed."""
        deadline = time.monotonic() + budget
        next_poll = 0.0
        while True:
            if STOPPING.is_set():
                return (Kind.GRADER_ERROR, f"was stopped: {stopped_why()}", None)
            now = time.monotonic()
            try:
                if now >= deadline:  # a reply already queued (the grader was slow) counts
                    kind, header, blobs = self.events.get_nowait()
                else:
                    kind, header, blobs = self.events.get(
                        timeout=min(0.05, max(deadline - now, 0.001))
                    )
            except queue.Empty:
                if now >= deadline:
                    return (Kind.TIMEOUT, f"{budget:g} s", None)
                kind = None
            if kind == "reply":
                if header.get("seq") != seq:
                    return (Kind.CRASHED, "sent a message the grader did not ask for", None)
                return ("reply", header, blobs)
            if kind == "bad":
                return (Kind.CRASHED, f"sent a malformed message ({_text(header)})", None)
            if kind == "eof":
                cause = self.cgroup.oom_cause() if self.cgroup is not None else ""
                if cause == "limit":
                    return (
                        Kind.MEMORY,
                        f"used more than {self.limits.memory_mb:g} MB; the kernel's "
                        f"limit stopped it",
                        None,
                    )
                if cause == "outside":
                    return (Kind.GRADER_ERROR, OUT_OF_MACHINE_MEMORY, None)
                return (Kind.CRASHED, "ended", None)
            if now >= next_poll:
                next_poll = now + 0.2
                used = self.memory_bytes()
                if self.limits.memory_mb and used > self.limits.memory_mb * 1024 * 1024:
                    return (Kind.MEMORY, f"used more than {self.limits.memory_mb:g} MB", None)

    def memory_bytes(self) -> int:
        """Resident memory of every process of the run, plus its scratch tmpfs when the
        sandbox mounted one (never another file system: see the module's docstring)."""
        import psutil

        total = 0
        if self.uid is not None:
            for process in psutil.process_iter(["uids", "memory_info"]):
                uids, info = process.info.get("uids"), process.info.get("memory_info")
                if (
                    uids is not None
                    and info is not None
                    and self.uid in (uids.real, uids.effective)
                ):
                    total += info.rss
            with self._scratch_lock:
                if self.scratch_fd is not None:
                    st = os.fstatvfs(self.scratch_fd)
                    total += (st.f_blocks - st.f_bfree) * st.f_frsize
            return total
        try:
            parent = psutil.Process(self.proc.pid)
            processes = [parent, *parent.children(recursive=True)]
        except psutil.Error:
            return 0
        for process in processes:
            if process.pid not in self.tree:
                self.tree[process.pid] = _started(process)
            try:
                total += process.memory_info().rss
            except psutil.Error:
                pass
        return total

    # end ----------------------------------------------------------------------
    def finish(self) -> tuple[int | None, list[str]]:
        """End every process of the run, close what is left; returns the child's exit
        status (negative: signal) and notes on anything that would not end."""
        notes = []
        self.outgoing.put(None)
        if self.sandbox:
            self.isolation_seen.wait(timeout=2)  # the stage's report (and the pid to kill)
            if self.result_eof.is_set():  # the child ended by itself: let the stage say how
                self.control_done.wait(timeout=2)
        if self.init_pid:
            try:
                os.kill(self.init_pid, signal.SIGKILL)  # ends the whole PID namespace
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        match = _by_uid(self.uid) if self.uid is not None else _by_token(self.token, self.tree)
        if not _sweep(match):
            notes.append("some of the submission's processes could not be ended")
        elif self.uid is not None:  # its files and IPC objects, where they were not private
            notes += sweep_leftovers(self.uid)
        if self.cgroup is not None:
            self.cgroup.destroy()
            notes.append(self.cgroup.describe())
        elif self.cgroup_note:
            notes.append(self.cgroup_note)
        self.proc.wait()
        self.control_done.wait(timeout=5)
        self._close_scratch()  # the tmpfs goes with the last reference to it
        if self.sandbox and self.scratch_note:
            notes.append(self.scratch_note)
        for t in self.threads:
            t.join(timeout=2)
        if any(t.is_alive() for t in self.threads):
            # Never close a descriptor a thread may still use (its number could be
            # reused); the daemon thread and the pipe are left to the end of the batch.
            notes.append("a process of the submission kept a pipe open; the grader moved on")
        else:
            for stream in (self.proc.stdout, self.proc.stdin):
                try:
                    stream.close()
                except OSError:
                    pass
        try:
            _remove_tree(self.scratch)
        except OSError as exc:
            notes.append(f"the run's scratch folder could not be removed ({exc.strerror or exc})")
        status = self.control.get("status")
        if status is not None:
            status = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        elif not self.sandbox:
            status = self.proc.returncode
        return status, notes


# --------------------------------------------------------------------------- runs


def run_submission(setup, cells, probes, *, limits: Limits = Limits(), mask=()) -> RunOutcome:
    """Run set-up and graded cells, then each probe, in child processes.

    Args:
        setup: set-up cell sources (from the released lab).
        cells: ``(piece, source)`` graded cells (from the submission), in order.
        probes: :class:`ProbeRequest` objects, run in order after the cells.
        limits: :class:`Limits`.
        mask: paths the child must not see even where they lie inside a folder it needs.

    Returns:
        :class:`RunOutcome`.

    Example::

        outcome = run_submission(["import numpy as np"], [("double", "def double(x): return 2 * x")],
                                 [ProbeRequest("double::t", lambda ns: ns["double"](2), ("double",))])
        outcome.results["double::t"]   # ProbeResult(ok=True, value=4)
    """
    started = time.monotonic()
    outcome = RunOutcome()
    sandbox = limits.isolate and _isolation.sandbox_possible()
    _pickle_probes_by_value(probes)
    remaining_cells = list(cells)
    remaining = list(probes)
    outputs = []
    while remaining and outcome.attempts < MAX_ATTEMPTS:
        if outcome.student_seconds >= limits.total_seconds or STOPPING.is_set():
            break
        outcome.attempts += 1
        attempt = _Attempt(limits, mask, sandbox)
        end = None
        try:
            end = _serve(attempt, setup, remaining_cells, remaining, limits, outcome)
        finally:
            status, notes = attempt.finish()
        outputs.append(attempt.output.text())
        outcome.isolation = _isolation_of(attempt, sandbox, notes)
        done = {pid for pid in outcome.results}
        remaining = [p for p in remaining if p.id not in done]
        if end is None:
            break
        remaining, remaining_cells = _record_end(
            outcome, attempt, end, status, sandbox, remaining, remaining_cells
        )
    _fail_not_run(outcome, remaining, limits)
    outcome.output = "\n".join(o for o in outputs if o)
    if len(outcome.output) > 2 * (OUTPUT_HEAD + OUTPUT_TAIL):
        outcome.output = outcome.output[:OUTPUT_HEAD] + "\n[...]\n" + outcome.output[-OUTPUT_TAIL:]
    outcome.seconds = time.monotonic() - started
    return outcome


def _isolation_of(attempt: _Attempt, sandbox: bool, notes: list[str]) -> Isolation:
    """What isolated an attempt: the sandbox stage's report, or the shared machine."""
    if sandbox:
        report = attempt.control.get("isolation") or {"notes": ["the sandbox stage did not report"]}
    else:
        report = {
            "uid": os.getuid() if hasattr(os, "getuid") else None,
            "network": "shared",
            "filesystem": "shared",
            "processes": "shared",
            "notes": ["sandbox stage not used (not root, not Linux, or --no-sandbox)"],
        }
    return Isolation.from_report(report, notes)


def _record_end(
    outcome: RunOutcome,
    attempt: _Attempt,
    end,
    status,
    sandbox: bool,
    remaining: list,
    remaining_cells: list,
) -> tuple[list, list]:
    """An attempt that ended early (``end``: kind, detail, step), written into ``outcome``
    (a diagnostic; the failed start-up, set-up, graded cell or probe); returns what the
    next attempt still runs: ``(probes, cells)``."""
    kind, detail, step = end
    outcome.diagnostics.append(
        Diagnostic(
            ended=str(kind),
            running=step,
            attempt=outcome.attempts,
            detail=str(detail),
            exit=_describe_status(status),
            output_tail=attempt.output.text()[-2000:],
        )
    )
    what = {
        Kind.TIMEOUT: f"ran past the time limit ({detail})",
        Kind.MEMORY: f"ran out of memory ({detail})",
        Kind.GRADER_ERROR: f"{detail}",
        "setup": f"failed: {detail}",
        Kind.CRASHED: f"ended the grader's process ({_describe_status(status)})"
        if detail == "ended"
        else f"broke the grader's protocol: it {detail}",
    }[kind]
    if step in ("startup", "setup"):
        reason = (
            "the grader's process did not start: it " + what
            if step == "startup"
            else "the lab's set-up cells " + what
        )
        # the grader's own failure stays one (the machine out of memory, grading stopped)
        kind_of = Kind.GRADER_ERROR if kind == Kind.GRADER_ERROR else Kind.CRASHED
        if step == "startup" and sandbox and attempt.control.get("stage_ok") is False:
            # the sandbox could not start the child: the grader's environment, never the student
            failed = [n for n in outcome.isolation.notes if n.startswith("sandbox failed")]
            reason = (
                "the grader could not start the submission's process (not the student's doing): "
                + (failed[-1] if failed else "the sandbox stage failed; see the isolation notes")
            )
            kind_of = Kind.GRADER_ERROR
        for p in remaining:
            outcome.results[p.id] = ProbeResult.failed(kind_of, reason)
        outcome.problems.append(Problem(kind_of, "startup" if step == "startup" else "set-up"))
        return [], remaining_cells
    if step.startswith("cell "):
        piece = step[5:]
        outcome.cell_errors[piece] = CellError(Kind(kind), f"running the graded cell {what}")
        outcome.problems.append(Problem(Kind(kind), f"graded cell {piece}"))
        return remaining, [c for c in remaining_cells if c[0] != piece]
    test_id = step[5:]  # a probe
    outcome.results[test_id] = ProbeResult.failed(Kind(kind), f"this test {what}")
    outcome.problems.append(Problem(Kind(kind), f"test {test_id}"))
    return [p for p in remaining if p.id != test_id], remaining_cells


def _fail_not_run(outcome: RunOutcome, remaining: list, limits: Limits) -> None:
    """The probes no attempt ran: grading stopped, the total time budget spent, or too many
    restarts."""
    if remaining and STOPPING.is_set():
        for p in remaining:
            outcome.results.setdefault(
                p.id, ProbeResult.failed(Kind.GRADER_ERROR, f"not run: {stopped_why()}")
            )
    if remaining and outcome.student_seconds >= limits.total_seconds:
        outcome.problems.append(Problem(Kind.TIMEOUT, "the submission's total time"))
        for p in remaining:
            outcome.results.setdefault(
                p.id,
                ProbeResult.failed(
                    Kind.TIMEOUT,
                    f"not run: the submission's graded cells and tests used their whole "
                    f"time budget ({limits.total_seconds:g} s in all)",
                ),
            )
    for p in remaining:
        outcome.results.setdefault(
            p.id,
            ProbeResult.failed(Kind.CRASHED, "not run: too many restarts of the grader's process"),
        )


def _reply_kind(header: dict) -> Kind:
    """The kind of a failed reply: ``memory`` or ``crashed`` as the child says, else
    ``error`` (the child's word is taken for nothing more serious than that)."""
    kind = header.get("kind")
    return Kind(kind) if kind in (Kind.MEMORY, Kind.CRASHED) else Kind.ERROR


def _student_wait(attempt: _Attempt, seq: int, budget: float, limits: Limits, outcome: RunOutcome):
    """``attempt.wait`` for a graded cell or a probe, within what is left of the
    submission's total budget; the time is added to ``outcome.student_seconds``."""
    left = limits.total_seconds - outcome.student_seconds
    start = time.monotonic()
    try:
        if left < budget:
            kind, header, blobs = attempt.wait(seq, max(left, 0.0))
            if kind == Kind.TIMEOUT:
                return (
                    Kind.TIMEOUT,
                    f"the submission's total time budget, {limits.total_seconds:g} s "
                    f"for all its cells and tests",
                    None,
                )
            return kind, header, blobs
        return attempt.wait(seq, budget)
    finally:
        outcome.student_seconds += time.monotonic() - start


def _serve(attempt: _Attempt, setup, cells, probes, limits: Limits, outcome: RunOutcome):
    # Over 80 lines: the protocol's order (ready, setup, cells, probes, seal, by-hand
    # probes) in one place, each step's failure returned where it happens.
    """Drive one attempt; returns None when every probe was answered, else
    ``(kind, detail, step)`` for the request that failed."""
    kind, header, _ = attempt.wait(0, STARTUP_TIMEOUT)
    if kind != "reply" or header.get("event") != "ready":
        return (
            kind if kind != "reply" else Kind.CRASHED,
            header if kind != "reply" else "did not start",
            "startup",
        )
    seq = attempt.next_seq()
    attempt.send(Command(seq, "setup", sources=tuple(setup)))
    kind, header, _ = attempt.wait(seq, SETUP_TIMEOUT)
    if kind != "reply":
        return (kind, header, "setup")
    if header.get("event") == "setup_error":
        return ("setup", _text(header.get("error")), "setup")
    for piece, source in cells:
        seq = attempt.next_seq()
        attempt.send(Command(seq, "cell", piece=piece, source=source))
        kind, header, _ = _student_wait(attempt, seq, limits.timeout, limits, outcome)
        if kind != "reply":
            return (kind, header, f"cell {piece}")
        if header.get("error"):
            error_kind = _reply_kind(header)
            outcome.cell_errors[piece] = CellError(
                error_kind, _text(header.get("error")), _identifier(header.get("exception"))
            )
            if error_kind != Kind.ERROR:
                outcome.problems.append(Problem(error_kind, f"graded cell {piece}"))
    # the probes of pieces not written by hand first (they may use lablib's layers), then
    # the seal (guard.seal: lablib's code disarmed until the process ends), then the rest
    sealed = False
    for request in sorted(probes, key=lambda r: bool(r.guard)):
        if request.guard and not sealed:
            sealed = True
            seq = attempt.next_seq()
            attempt.send(Command(seq, "seal"))
            kind, header, _ = _student_wait(attempt, seq, limits.timeout, limits, outcome)
            if kind != "reply":
                return (kind, header, f"test {request.id}")
            if header.get("event") != "sealed":
                why = _text(header.get("error") or "no reply")
                for p in probes:
                    if p.guard:
                        outcome.results[p.id] = ProbeResult.failed(
                            Kind.ERROR,
                            f"not run: the crib guard of the pieces written by hand could "
                            f"not be set up ({why})",
                        )
                break
        seq = attempt.next_seq()
        attempt.send(Command(seq, "probe", probe=request))
        kind, header, blobs = _student_wait(
            attempt, seq, request.timeout or limits.timeout, limits, outcome
        )
        if kind != "reply":
            return (kind, header, f"test {request.id}")
        size = sum(len(blob) for blob in blobs)
        if header.get("ok") is True and outcome.kept_bytes + size > MAX_KEPT_BYTES:
            outcome.results[request.id] = ProbeResult.failed(
                Kind.ERROR,
                f"the values this submission returned to the tests passed "
                f"{_size(MAX_KEPT_BYTES)} in all (this one {_size(size)}); "
                f"the tests need small arrays",
            )
        elif header.get("ok") is True:
            outcome.kept_bytes += size
            try:
                outcome.results[request.id] = ProbeResult(
                    True, decode_value(header.get("value"), blobs)
                )
            except ProtocolError as exc:
                outcome.results[request.id] = ProbeResult.failed(
                    Kind.ERROR, f"the result could not be read back ({_text(exc)})"
                )
        else:
            error_kind = _reply_kind(header)
            outcome.results[request.id] = ProbeResult.failed(error_kind, _text(header.get("error")))
            if error_kind != Kind.ERROR:
                outcome.problems.append(Problem(error_kind, f"test {request.id}"))
    seq = attempt.next_seq()
    attempt.send(Command(seq, "exit"))
    return None
