"""Run a submission's code in a fresh, limited process and bring back plain values.

Parent side: :func:`run_submission` starts ``python -m lablib.grading.runner`` per
attempt, sends it the lab's set-up cells, the student's graded cells and the probes
(cloudpickle over stdin; hidden probes by value, so the child never needs, nor gets,
the hidden tests' folder), and reads back one framed message per event on a separate
pipe. It enforces a wall-clock limit per phase (set-up, each graded cell, each test)
and a memory limit (RSS polled with psutil, plus ``RLIMIT_DATA`` in the child), and
restarts the child past a test or cell that killed it, so one bad function costs only
its own tests.

Child side (``--child``): executes set-up and graded cells in one namespace, calls
each probe, converts the result with :func:`~lablib.grading.spec.to_plain` and sends
it as JSON plus ``np.save`` bytes (``allow_pickle=False``). Nothing the child sends is
ever unpickled; :func:`decode_value` accepts only plain types.

Sandbox stage (``--sandbox``, only when the grader runs as root): a new network and
mount namespace, fresh tmpfs on /tmp, /var/tmp and /dev/shm, the hidden tests and the
output/submission folders hidden under empty read-only mounts, then an unprivileged
uid; then it ``exec``s the child. See ``ISOLATION.md``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import queue
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from typing import Any

import numpy as np

__all__ = ["encode_value", "decode_value", "run_submission", "RunOutcome", "ProtocolError"]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
OUTPUT_HEAD = 8_000
OUTPUT_TAIL = 8_000
SETUP_TIMEOUT = 300.0
STARTUP_TIMEOUT = 120.0
MAX_ATTEMPTS = 6


class ProtocolError(ValueError):
    """The child sent something that is not a well-formed plain value or event."""


# --------------------------------------------------------------------------- wire format


def encode_value(value: Any) -> tuple[Any, list[bytes]]:
    """Encode a plain value as a JSON tree plus ``np.save`` blobs (no pickle).

    Lists stay lists; tuples become ``{"t": [...]}``, dicts ``{"d": [[key, value]...]}``
    and arrays ``{"a": blob index}``.
    """
    blobs: list[bytes] = []

    def enc(v, depth=0):
        if depth > 25:
            raise TypeError("value nested too deeply")
        if v is None or type(v) in (bool, int, str):
            return v
        if type(v) is float:
            return v if np.isfinite(v) else {"f": repr(v)}
        if type(v) is list:
            return [enc(x, depth + 1) for x in v]
        if type(v) is tuple:
            return {"t": [enc(x, depth + 1) for x in v]}
        if type(v) is dict:
            return {"d": [[str(k), enc(x, depth + 1)] for k, x in v.items()]}
        if type(v) is np.ndarray and v.dtype != object:
            buf = io.BytesIO()
            np.save(buf, v, allow_pickle=False)
            blobs.append(buf.getvalue())
            return {"a": len(blobs) - 1}
        raise TypeError(f"not a plain value: {type(v).__name__}")

    return enc(value), blobs


def decode_value(tree: Any, blobs: list[bytes]) -> Any:
    """Inverse of :func:`encode_value`, with strict type checks (raises ProtocolError)."""

    def dec(v, depth=0):
        if depth > 25:
            raise ProtocolError("value nested too deeply")
        if v is None or type(v) in (bool, int, str, float):
            return v
        if type(v) is list:
            return [dec(x, depth + 1) for x in v]
        if type(v) is dict and len(v) == 1:
            (tag, body), = v.items()
            if tag == "t" and type(body) is list:
                return tuple(dec(x, depth + 1) for x in body)
            if tag == "d" and type(body) is list:
                out = {}
                for item in body:
                    if type(item) is not list or len(item) != 2 or type(item[0]) is not str:
                        raise ProtocolError("bad dict item")
                    out[item[0]] = dec(item[1], depth + 1)
                return out
            if tag == "f" and body in ("nan", "inf", "-inf"):
                return float(body)
            if tag == "a" and type(body) is int and 0 <= body < len(blobs):
                try:
                    arr = np.load(io.BytesIO(blobs[body]), allow_pickle=False)
                except Exception as exc:
                    raise ProtocolError(f"bad array: {exc}") from None
                if type(arr) is not np.ndarray or arr.dtype.hasobject:
                    raise ProtocolError("bad array type")
                return arr
        raise ProtocolError(f"unexpected item of type {type(v).__name__}")

    return dec(tree)


def _write_frame(fd: int, header: dict, blobs: list[bytes] = ()) -> None:
    header = dict(header, blobs=[len(b) for b in blobs])
    data = json.dumps(header).encode()
    payload = struct.pack(">I", len(data)) + data + b"".join(blobs)
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(stream, n: int) -> bytes:
    chunks, remaining = [], n
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _read_frame(stream) -> tuple[dict, list[bytes]]:
    (size,) = struct.unpack(">I", _read_exact(stream, 4))
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message header of {size} bytes")
    header = json.loads(_read_exact(stream, size))
    if type(header) is not dict or type(header.get("blobs")) is not list:
        raise ProtocolError("bad header")
    sizes = header["blobs"]
    if any(type(s) is not int or s < 0 for s in sizes) or sum(sizes) > MAX_MESSAGE_BYTES:
        raise ProtocolError("bad or oversized blobs")
    return header, [_read_exact(stream, s) for s in sizes]


# --------------------------------------------------------------------------- child side


def _describe_exception(exc: BaseException, limit: int = 1500) -> str:
    if isinstance(exc, SystemExit):
        return f"the code called sys.exit({exc.code!r})"
    if isinstance(exc, NotImplementedError):
        text = f"not implemented yet (NotImplementedError: {exc})"
    else:
        text = f"{type(exc).__name__}: {exc}"
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<graded cell")
    ]
    if frames:
        where = "; ".join(f"{f.filename[1:-1]}, line {f.lineno}: {f.line or ''}".strip() for f in frames[-3:])
        text += f" (at {where})"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, (SystemExit, KeyboardInterrupt)):
        return "crashed"
    return "error"


def _set_limits(memory_mb: float) -> None:
    import resource

    def lower(which, value):
        try:
            soft, hard = resource.getrlimit(which)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass

    if memory_mb and memory_mb > 0:
        lower(resource.RLIMIT_DATA, int(memory_mb * 1024 * 1024))
    lower(resource.RLIMIT_CORE, 0)
    lower(resource.RLIMIT_FSIZE, 1024 * 1024 * 1024)


def child_main(result_fd: int, memory_mb: float) -> None:
    """Entry point of the child process (``python -m lablib.grading.runner --child FD MB``)."""
    import cloudpickle  # noqa: F401  (needed to unpickle the payload)
    import pickle

    from lablib.grading.spec import to_plain

    _set_limits(memory_mb)
    send, encode, describe, kind_of = _write_frame, encode_value, _describe_exception, _kind
    stdin = sys.stdin.buffer
    (size,) = struct.unpack(">Q", _read_exact(stdin, 8))
    payload = pickle.loads(_read_exact(stdin, size))  # from the grader, never from the student
    stdin.close()
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    send(result_fd, {"event": "phase", "phase": "setup"})
    for index, source in enumerate(payload["setup"]):
        try:
            exec(compile(source, f"<setup cell {index + 1}>", "exec"), ns)
        except BaseException as exc:  # noqa: BLE001 - reported to the grader
            send(result_fd, {"event": "setup_error", "error": f"set-up cell {index + 1}: {describe(exc)}"})
            os._exit(3)
    for piece, source in payload["cells"]:
        send(result_fd, {"event": "cell_start", "piece": piece})
        error = kind = None
        try:
            exec(compile(source, f"<graded cell {piece}>", "exec"), ns)
        except BaseException as exc:  # noqa: BLE001
            error, kind = describe(exc), kind_of(exc)
        send(result_fd, {"event": "cell_done", "piece": piece, "error": error, "kind": kind})
    view = types.MappingProxyType(ns)
    for test in payload["tests"]:
        send(result_fd, {"event": "test_start", "test": test["id"]})
        missing = [name for name in test["objects"] if name not in ns]
        if missing:
            send(result_fd, {"event": "result", "test": test["id"], "ok": False, "kind": "error",
                             "error": f"the graded cell does not define {', '.join(missing)}"})
            continue
        try:
            plain = to_plain(test["probe"](view))
            tree, blobs = encode(plain)
        except BaseException as exc:  # noqa: BLE001
            send(result_fd, {"event": "result", "test": test["id"], "ok": False,
                             "kind": kind_of(exc), "error": describe(exc)})
            continue
        send(result_fd, {"event": "result", "test": test["id"], "ok": True, "value": tree}, blobs)
    send(result_fd, {"event": "done"})
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)  # skip the student's atexit handlers


# --------------------------------------------------------------------------- sandbox stage


def _libc():
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE, MS_BIND = 1, 2, 4, 16384, 1 << 18, 4096


def sandbox_main(result_fd: int, memory_mb: float) -> None:
    """Root-only stage: namespaces, masks, unprivileged uid, then exec the child.

    Reads a length-prefixed JSON config from stdin (exactly, so the payload that follows
    stays in the pipe for the child).
    """
    import ctypes

    (size,) = struct.unpack(">I", os.read(0, 4))
    raw = b""
    while len(raw) < size:
        raw += os.read(0, size - len(raw))
    config = json.loads(raw)
    libc = _libc()
    isolation = {"uid": os.getuid(), "network": "shared", "filesystem": "shared", "notes": []}

    def mount(src, target, fstype, flags, data=None):
        rc = libc.mount(src and src.encode(), target.encode(), fstype and fstype.encode(),
                        ctypes.c_ulong(flags), data and data.encode())
        if rc != 0:
            raise OSError(ctypes.get_errno(), f"mount {target}: {os.strerror(ctypes.get_errno())}")

    if libc.unshare(CLONE_NEWNET) == 0:
        isolation["network"] = "none (new network namespace)"
    else:
        isolation["notes"].append(f"no network namespace: {os.strerror(ctypes.get_errno())}")
    workdir = None
    if libc.unshare(CLONE_NEWNS) == 0:
        try:
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            for path in ("/tmp", "/var/tmp", "/dev/shm"):
                if os.path.isdir(path):
                    mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={config['tmpfs_mb']}m,mode=1777")
            exposed = _expose_paths(config["expose"], mount)
            if exposed:
                isolation["notes"].append(f"exposed {exposed} to the unprivileged uid")
            hidden = 0
            for path in config["mask"]:
                if os.path.isdir(path):
                    mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=000")
                    hidden += 1
                elif os.path.exists(path):
                    mount("/dev/null", path, None, MS_BIND)
                    hidden += 1
            workdir = "/tmp/work"
            os.mkdir(workdir, 0o700)
            isolation["filesystem"] = (
                f"private /tmp, /var/tmp, /dev/shm; {hidden} grader folder(s) hidden"
            )
        except OSError as exc:
            isolation["notes"].append(f"mount namespace incomplete: {exc}")
    else:
        isolation["notes"].append(f"no mount namespace: {os.strerror(ctypes.get_errno())}")
    if workdir is None:
        workdir = config["workdir"]
    uid, gid = config["uid"], config["gid"]
    try:
        import resource

        # threads count too (TensorFlow starts dozens); the uid is this child's alone
        resource.setrlimit(resource.RLIMIT_NPROC, (1024, 1024))
    except (ValueError, OSError):
        isolation["notes"].append("RLIMIT_NPROC not set")
    os.chown(workdir, uid, gid)
    os.chdir(workdir)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    isolation["uid"] = os.getuid()
    _write_frame(result_fd, {"event": "isolation", **isolation})
    env = dict(config["env"], HOME=workdir, TMPDIR=workdir)
    os.execve(sys.executable, [sys.executable, "-m", "lablib.grading.runner", "--child",
                               str(result_fd), str(memory_mb)], env)


def _expose_paths(paths, mount) -> list[str]:
    """Make ``paths`` reachable for an unprivileged uid inside the mount namespace.

    The Python install may sit under a folder others cannot enter (pyenv under /root).
    For each such folder ``A`` (first ancestor without o+x), the needed path is
    bind-mounted aside, ``A`` is covered by an empty tmpfs (mode 755; the rest of ``A``
    stays invisible) and the path is bind-mounted back inside it.
    """
    done = []
    for index, path in enumerate(dict.fromkeys(os.path.realpath(p) for p in paths)):
        parts = path.strip("/").split("/")
        blocked = None
        for depth in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:depth])
            if not os.stat(ancestor).st_mode & 0o001:
                blocked = ancestor
                break
        if blocked is None:
            continue
        stage = f"/tmp/.expose{index}"
        os.mkdir(stage)
        mount(path, stage, None, MS_BIND | MS_REC)
        mount("tmpfs", blocked, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
        os.makedirs(path, mode=0o755, exist_ok=True)
        mount(stage, path, None, MS_BIND | MS_REC)
        done.append(path)
    return done


# --------------------------------------------------------------------------- parent side


@dataclasses.dataclass
class RunOutcome:
    """What one submission's run produced.

    Attributes:
        results: test id -> ``{"ok": True, "value": plain}`` or
            ``{"ok": False, "kind": "error|timeout|memory|crashed", "error": text}``.
        cell_errors: piece -> ``(kind, text)`` for graded cells that failed to run.
        problems: ``(kind, detail)`` pairs for the status (timeout, memory, crashed).
        output: the child's stdout+stderr, capped (head and tail kept).
        isolation: what isolation was active.
        attempts: how many child processes were started.
        seconds: wall time.
    """

    results: dict = dataclasses.field(default_factory=dict)
    cell_errors: dict = dataclasses.field(default_factory=dict)
    problems: list = dataclasses.field(default_factory=list)
    output: str = ""
    isolation: dict = dataclasses.field(default_factory=dict)
    attempts: int = 0
    seconds: float = 0.0


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


def _next_uid() -> int:
    """A fresh unprivileged uid for one child, drawn at random from a range no account
    uses, so children of concurrent graders (other jobs, other grading processes on the
    machine) never share a uid: they cannot signal each other, and cleaning up one uid's
    processes never touches another child's."""
    import secrets

    return 1_000_000 + secrets.randbelow(1_000_000_000)


def _sandbox_possible() -> bool:
    return hasattr(os, "getuid") and os.getuid() == 0 and sys.platform.startswith("linux")


def _rss(proc) -> int:
    import psutil

    try:
        parent = psutil.Process(proc.pid)
        total = parent.memory_info().rss
        for child in parent.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                pass
        return total
    except psutil.Error:
        return 0


def _attempt(setup, cells, tests, *, timeout, memory_mb, mask, sandbox, log):
    """One child process. Returns (events, end) where end describes how it ended."""
    import cloudpickle

    read_fd, write_fd = os.pipe()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        # Unbuffered: what the student's code printed before a crash, a kill at the time
        # limit or os._exit still reaches the feedback.
        "PYTHONUNBUFFERED": "1",
        "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "MPLBACKEND": "Agg",
        "LABLIB_GRADING": "1",
    }
    for key in ("PYTHONPATH", "LABLIB_FAST"):
        if key in os.environ:
            env[key] = os.environ[key]
    tmp = tempfile.mkdtemp(prefix="lablib-run-")
    _pickle_probes_by_value(tests)
    payload = cloudpickle.dumps({"setup": setup, "cells": cells, "tests": tests})
    if sandbox:
        argv = [sys.executable, "-m", "lablib.grading.runner", "--sandbox", str(write_fd), str(memory_mb)]
        uid = own_uid = _next_uid()
        import lablib

        expose = [sys.base_prefix, sys.prefix, os.path.dirname(os.path.dirname(lablib.__file__)),
                  os.path.dirname(os.path.realpath(sys.executable))]
        config = json.dumps({"mask": mask, "expose": expose, "uid": uid, "gid": uid, "env": env, "workdir": tmp,
                             "tmpfs_mb": 512}).encode()
        prefix = struct.pack(">I", len(config)) + config
    else:
        argv = [sys.executable, "-m", "lablib.grading.runner", "--child", str(write_fd), str(memory_mb)]
        prefix = b""
        own_uid = None
        env = dict(env, HOME=tmp, TMPDIR=tmp)
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        pass_fds=(write_fd,), cwd=tmp, env=env, start_new_session=True,
    )
    os.close(write_fd)
    events: queue.Queue = queue.Queue()
    output = _Capped()

    def feed_stdin():
        try:
            proc.stdin.write(prefix + struct.pack(">Q", len(payload)) + payload)
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def read_events():
        with os.fdopen(read_fd, "rb") as stream:
            while True:
                try:
                    header, blobs = _read_frame(stream)
                except EOFError:
                    events.put(("eof", None, None))
                    return
                except (ProtocolError, ValueError, struct.error) as exc:
                    events.put(("bad", str(exc), None))
                    return
                events.put(("event", header, blobs))

    def read_output():
        for chunk in iter(lambda: proc.stdout.read1(65536), b""):
            output.feed(chunk)

    threads = [threading.Thread(target=f, daemon=True) for f in (feed_stdin, read_events, read_output)]
    for t in threads:
        t.start()
    received = []
    phase = ("startup", None)
    deadline = time.monotonic() + STARTUP_TIMEOUT + SETUP_TIMEOUT
    test_timeouts = {t["id"]: t["timeout"] for t in tests}
    end = None
    next_poll = 0.0
    eof = False
    while True:
        try:
            kind, header, blobs = events.get(timeout=0.05)
        except queue.Empty:
            kind = None
        now = time.monotonic()
        if kind == "event":
            received.append((header, blobs))
            event = header.get("event")
            if event == "phase":
                phase = ("setup", None)
            elif event == "cell_start":
                phase, deadline = ("cell", header.get("piece")), now + timeout
            elif event == "test_start":
                tid = header.get("test")
                phase, deadline = ("test", tid), now + (test_timeouts.get(tid) or timeout)
            elif event in ("cell_done", "result"):
                phase = ("between", None)
            elif event == "done":
                end = ("done", None)
        elif kind == "bad":
            end = ("crashed", f"sent a malformed message ({header})")
        elif kind == "eof":
            eof = True
        if end is not None:
            break
        if eof:
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            if code is not None and code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = str(-code)
                detail = f"killed by signal {name}"
            else:
                detail = f"exited with code {code}"
            end = ("crashed", detail)
            break
        if now > deadline:
            end = ("timeout", None)
            break
        if now >= next_poll:
            next_poll = now + 0.1
            if memory_mb and _rss(proc) > memory_mb * 1024 * 1024:
                end = ("memory", f"used more than {memory_mb:g} MB")
                break
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if own_uid is not None:
        _kill_uid(own_uid)  # processes that left the group with setsid()
    proc.wait()
    for t in threads[1:]:
        t.join(timeout=2)
    try:
        proc.stdout.close()
    except OSError:
        pass
    _rmtree(tmp)
    return received, end, phase, output.text()


def _kill_uid(uid: int) -> None:
    """Kill every process owned by ``uid`` (a uid used by one child only)."""
    import psutil

    for process in psutil.process_iter(["uids"]):
        try:
            if process.info["uids"] is not None and process.info["uids"].real == uid:
                process.kill()
        except psutil.Error:
            pass


def _pickle_probes_by_value(tests) -> None:
    """Probes from modules the child cannot import (hidden tests, spec files, test
    modules) travel by value; lablib's own modules are imported by the child."""
    import cloudpickle

    for test in tests:
        name = getattr(test["probe"], "__module__", None) or ""
        module = sys.modules.get(name)
        if module is None or name == "__main__" or name.split(".")[0] == "lablib":
            continue
        try:
            cloudpickle.register_pickle_by_value(module)
        except ValueError:
            pass


def _rmtree(path):
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def run_submission(setup, cells, tests, *, timeout=60.0, memory_mb=4096.0, mask=(), isolate=True,
                   log=None) -> RunOutcome:
    """Run set-up and graded cells, then each test's probe, in child processes.

    Args:
        setup: list of set-up cell sources (from the released lab).
        cells: list of ``(piece, source)`` graded cells (from the submission), in order.
        tests: list of dicts ``{"id", "probe", "objects", "timeout"}``.
        timeout: seconds allowed per graded cell and per test without its own timeout.
        memory_mb: memory limit of the child (RSS, and RLIMIT_DATA).
        mask: paths the child must not see (hidden tests, output and submission folders);
            hidden under empty mounts when the sandbox is available.
        isolate: use the sandbox stage when running as root on Linux.

    Returns:
        :class:`RunOutcome`.

    Example::

        outcome = run_submission(["import numpy as np"], [("double", "def double(x): return 2 * x")],
                                 [{"id": "double::t", "probe": lambda ns: ns["double"](2),
                                   "objects": ["double"], "timeout": None}])
        outcome.results["double::t"]   # {"ok": True, "value": 4}
    """
    started = time.monotonic()
    outcome = RunOutcome()
    sandbox = isolate and _sandbox_possible()
    remaining_cells = list(cells)
    remaining_tests = list(tests)
    outputs = []
    while remaining_tests and outcome.attempts < MAX_ATTEMPTS:
        outcome.attempts += 1
        received, end, phase, text = _attempt(
            setup, remaining_cells, remaining_tests, timeout=timeout, memory_mb=memory_mb,
            mask=list(mask), sandbox=sandbox, log=log,
        )
        outputs.append(text)
        done_tests = set()
        for header, blobs in received:
            event = header.get("event")
            if event == "isolation":
                outcome.isolation = {k: v for k, v in header.items() if k not in ("event", "blobs")}
            elif event == "setup_error":
                end, phase = ("setup", str(header.get("error"))), ("setup", None)
            elif event == "cell_done" and header.get("error"):
                outcome.cell_errors[str(header.get("piece"))] = (
                    str(header.get("kind") or "error"), str(header.get("error")))
                if header.get("kind") in ("memory", "crashed"):
                    outcome.problems.append((header.get("kind"), f"graded cell {header.get('piece')}"))
            elif event == "result":
                tid = header.get("test")
                if tid not in _test_ids(remaining_tests):
                    continue
                done_tests.add(tid)
                if header.get("ok") is True:
                    try:
                        value = decode_value(header.get("value"), blobs)
                        outcome.results[tid] = {"ok": True, "value": value}
                    except ProtocolError as exc:
                        outcome.results[tid] = {"ok": False, "kind": "error",
                                                "error": f"the result could not be read back ({exc})"}
                else:
                    kind = header.get("kind") if header.get("kind") in ("memory", "crashed") else "error"
                    outcome.results[tid] = {"ok": False, "kind": kind, "error": str(header.get("error"))}
                    if kind != "error":
                        outcome.problems.append((kind, f"test {tid}"))
        if not outcome.isolation:
            outcome.isolation = {"uid": os.getuid() if hasattr(os, "getuid") else None,
                                 "network": "shared", "filesystem": "shared",
                                 "notes": ["sandbox stage not used (not root or not Linux)"]}
        remaining_tests = [t for t in remaining_tests if t["id"] not in done_tests]
        if end[0] == "done" or not remaining_tests:
            break
        kind, detail = end
        if kind == "setup":
            for t in remaining_tests:
                outcome.results[t["id"]] = {"ok": False, "kind": "crashed",
                                            "error": f"the lab's set-up failed: {detail}"}
            outcome.problems.append(("crashed", f"set-up: {detail}"))
            remaining_tests = []
            break
        what = {
            "timeout": "ran past the time limit",
            "memory": f"ran out of memory ({detail})",
            "crashed": f"crashed the grader's process ({detail})",
        }[kind]
        where, name = phase
        if where == "test":
            t_limit = next((t["timeout"] for t in remaining_tests if t["id"] == name), None) or timeout
            msg = f"{what}" + (f" ({t_limit:g} s)" if kind == "timeout" else "")
            outcome.results[name] = {"ok": False, "kind": kind, "error": f"this test {msg}"}
            outcome.problems.append((kind, f"test {name}"))
            remaining_tests = [t for t in remaining_tests if t["id"] != name]
        elif where == "cell":
            msg = f"running the graded cell {what}" + (f" ({timeout:g} s)" if kind == "timeout" else "")
            outcome.cell_errors[name] = (kind, msg)
            outcome.problems.append((kind, f"graded cell {name}"))
            remaining_cells = [c for c in remaining_cells if c[0] != name]
        else:
            reason = f"the grader's process {what} during {where}"
            for t in remaining_tests:
                outcome.results[t["id"]] = {"ok": False, "kind": kind, "error": reason}
            outcome.problems.append((kind, where))
            remaining_tests = []
    for t in remaining_tests:
        outcome.results.setdefault(t["id"], {"ok": False, "kind": "crashed",
                                             "error": "not run: too many restarts of the grader's process"})
    outcome.output = "\n".join(o for o in outputs if o)
    if len(outcome.output) > 2 * (OUTPUT_HEAD + OUTPUT_TAIL):
        outcome.output = outcome.output[: OUTPUT_HEAD] + "\n[...]\n" + outcome.output[-OUTPUT_TAIL:]
    outcome.seconds = time.monotonic() - started
    return outcome


def _test_ids(tests) -> set:
    return {t["id"] for t in tests}


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child_main(int(sys.argv[2]), float(sys.argv[3]))
    elif len(sys.argv) == 4 and sys.argv[1] == "--sandbox":
        sandbox_main(int(sys.argv[2]), float(sys.argv[3]))
    else:
        sys.exit("usage: python -m lablib.grading.runner (--child|--sandbox) RESULT_FD MEMORY_MB "
                 "(started by the grader, not by hand)")
