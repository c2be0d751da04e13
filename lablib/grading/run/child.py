"""The submission's process: runs set-up cells, graded cells and probes on request.

Started by the supervisor as ``python -m lablib.grading.run.child RESULT_FD MEMORY_MB``
(through the sandbox stage when the grader is root). It answers one :class:`Command` at
a time, in order, on the result pipe; the grader owns every deadline, so nothing the
child sends can extend one. Probes arrive only after the graded cells have run.

What this module uses after student code has run (the frame writer, the command reader,
``os.read``, ``os._exit``) is bound to private names when it is imported, before any
student code runs. That stops casual patching (``json.dumps = ...``); it cannot stop
code in the same process from reaching into this one, which is why judges compare
values that take the real computation to produce (see ISOLATION.md).

:func:`run_probe` is shared with ``lablib.check``, which runs the same probes in the
student's notebook; a probe of a piece written by hand runs there and here in the crib
guard's window (:mod:`lablib.grading.run.guard`).
"""

from __future__ import annotations

import os
import struct
import sys
import traceback
import types
from typing import Any
from collections.abc import Mapping

from lablib.backend import full_float32
from lablib.grading.magics import get_ipython, graded_python
from lablib.grading.results import Kind
from lablib.grading.run.guard import Crib, Window, message as crib_message, protect, verify
from lablib.grading.run.guard import read_command, seal
from lablib.grading.run.protocol import (
    ProbeRequest,
    ProbeResult,
    encode_value,
    to_plain,
    write_frame,
)
from lablib.session import NOT_IMPLEMENTED, not_done_text, unfinished_piece

__all__ = ["run_probe", "describe_exception", "compile_cell", "child_main"]


def describe_exception(exc: BaseException, limit: int = 1500) -> str:
    """What a student's exception says, with the graded cell's lines where it happened."""
    if isinstance(exc, SystemExit):
        return f"the code called sys.exit({exc.code!r})"
    piece = unfinished_piece(exc)
    if piece is not None:
        return not_done_text(piece)  # the blank lab's stub: where it is, everyone knows
    if isinstance(exc, NotImplementedError):
        text = f"{NOT_IMPLEMENTED}: {exc})"
    else:
        text = f"{type(exc).__name__}: {exc}"
    places: list[str] = []
    for f in traceback.extract_tb(exc.__traceback__):
        if f.filename.startswith("<graded cell"):
            place = f"{f.filename[1:-1]}, line {f.lineno}: {f.line or ''}".strip()
            if not places or places[-1] != place:  # a comprehension repeats its line
                places.append(place)
    if places:
        text += f" (at {'; '.join(places[-3:])})"
    if isinstance(exc, NameError) and places:
        name = getattr(exc, "name", None) or "it"
        text += (
            f". If {name} is defined in another cell of your notebook: the grader runs "
            f"only the lab's # SETUP cells and your # GRADED: cells, so define it inside "
            f"the graded cell that uses it"
        )
    return text if len(text) <= limit else text[: limit - 3] + "..."


def compile_cell(source: str, filename: str, *, magics: bool = False):
    """``compile`` a cell's code, its lines kept for tracebacks (``describe_exception``
    quotes the line that failed). ``magics``: a graded cell, its IPython magics and shell
    lines turned into calls of :func:`lablib.grading.magics.get_ipython` first (line for
    line: the lines quoted and numbered are the cell's own)."""
    import linecache

    code = graded_python(source).code if magics else source
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(code, filename, "exec")


def _kind(exc: BaseException) -> Kind:
    if isinstance(exc, MemoryError):
        return Kind.MEMORY
    if isinstance(exc, (SystemExit, KeyboardInterrupt)):
        return Kind.CRASHED
    return Kind.ERROR


def run_probe(request: ProbeRequest, ns: Mapping[str, Any], *, _verify=verify) -> ProbeResult:
    """Call one probe on the student's names and convert its result to plain values.

    A probe whose request carries a guard (a piece written by hand) runs in the crib
    guard's :class:`~lablib.grading.run.guard.Window`: lablib's implementations and the
    ready-made layers are disarmed from the probe's call until its value is plain, and a
    crib found (before or while it runs) is the result, whatever the probe returned.

    Args:
        request: the probe and the names it needs.
        ns: the names the student's cells defined (a read-only view is passed on).

    Returns:
        :class:`ProbeResult`: ``ok`` with the plain value, or ``kind``/``error``.
    """
    missing = [name for name in request.objects if name not in ns]
    if missing:
        return ProbeResult.failed(
            Kind.ERROR, f"the graded cell does not define {', '.join(missing)}"
        )
    changed = (
        _verify() if request.guard else None
    )  # bound at import: the guard's names as protect() saw them
    if changed is not None:
        return ProbeResult.failed(Kind.ERROR, crib_message(Crib(changed, "tamper")))
    window = Window(request.guard, {name: ns[name] for name in request.objects}, request.probe, ns)
    try:
        with full_float32(), window:
            if window.found is None:  # the graded names already hold lablib's code: not run
                plain = to_plain(request.probe(types.MappingProxyType(dict(ns))))
    except KeyboardInterrupt:  # a student stopping lablib.check in the notebook
        raise
    except BaseException as exc:  # noqa: BLE001 - the student's error is the report
        if window.found is None:  # described after the window: tracebacks read files
            return ProbeResult.failed(_kind(exc), describe_exception(exc))
    if window.found is not None:
        return ProbeResult.failed(Kind.ERROR, crib_message(window.found))
    return ProbeResult(True, plain)


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


def child_main(
    result_fd: int,
    memory_mb: float,
    *,
    _send=write_frame,
    _unpack=struct.unpack,
    _read=os.read,
    _exit=os._exit,
    _encode=encode_value,
    _run_probe=run_probe,
    _describe=describe_exception,
    _kind_of=_kind,
    _read_command=read_command,
    _seal=seal,
) -> None:
    # Over 80 lines for its signature: the private references, bound before any student
    # code runs (run/ISOLATION.md); code: about 75 lines, the command loop.
    """Serve the grader's commands until ``exit`` or the end of stdin."""
    import cloudpickle  # noqa: F401  (the grader's probes are cloudpickled)

    from lablib.grading.run.isolation import die_with_parent

    die_with_parent()  # the grader gone, this run goes too: its limits were the grader's
    try:  # the machine out of memory: the kernel ends this run first, never the grader
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as f:
            f.write("1000")
    except OSError:
        pass
    _set_limits(memory_mb)
    protect()  # before any student code: the crib guard's code and names are kept as they are now

    def read_exact(n):
        chunks = []
        while n:
            chunk = _read(0, min(n, 1 << 20))
            if not chunk:
                _exit(0)
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    ns: dict[str, Any] = {
        "__name__": "__main__",
        "__builtins__": __builtins__,
        "get_ipython": get_ipython,  # what graded cells' magics call
    }
    _send(result_fd, {"event": "ready", "seq": 0})
    while True:
        (size,) = _unpack(">Q", read_exact(8))
        command = _read_command(read_exact(size))  # from the grader, never from the student
        reply: dict[str, Any] = {"seq": command.seq}
        blobs: list[bytes] = []
        if command.op == "setup":
            reply["event"] = "setup_done"
            for index, source in enumerate(command.sources):
                try:
                    exec(compile_cell(source, f"<setup cell {index + 1}>"), ns)
                except BaseException as exc:  # noqa: BLE001 - reported to the grader
                    reply.update(
                        event="setup_error", error=f"set-up cell {index + 1}: {_describe(exc)}"
                    )
                    break
        elif command.op == "cell":
            reply.update(event="cell_done", error=None, kind=None)
            try:
                exec(
                    compile_cell(command.source, f"<graded cell {command.piece}>", magics=True),
                    ns,
                )
            except BaseException as exc:  # noqa: BLE001
                reply.update(error=_describe(exc), kind=_kind_of(exc), exception=type(exc).__name__)
        elif command.op == "seal":  # before the first by-hand probe (guard.seal)
            reply["event"] = "sealed"
            try:
                _seal(ns)
            except BaseException as exc:  # noqa: BLE001 - reported to the grader
                reply.update(event="seal_error", error=_describe(exc))
        elif command.op == "probe":
            result = _run_probe(command.probe, ns)
            reply.update(event="result", ok=result.ok)
            if result.ok:
                try:
                    reply["value"], blobs = _encode(result.value)
                except BaseException as exc:  # noqa: BLE001
                    reply.update(ok=False, kind=Kind.ERROR, error=_describe(exc))
            else:
                reply.update(kind=result.kind, error=result.error)
        else:  # exit
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                _exit(0)  # skip the student's atexit handlers
        _send(result_fd, reply, blobs)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(
            "usage: python -m lablib.grading.run.child RESULT_FD MEMORY_MB "
            "(started by the grader, not by hand)"
        )
    child_main(int(sys.argv[1]), float(sys.argv[2]))
