"""The wire between the grader and a submission's process: typed requests, plain values.

Parent -> child (stdin): length-prefixed cloudpickle frames of :class:`Command`, written by
the grader only; the child never sends anything that the grader unpickles.

Child -> parent (the result pipe): length-prefixed JSON headers plus raw ``np.save``
blobs (``allow_pickle=False``). :func:`decode_value` accepts plain types only. Every
frame is capped (:data:`MAX_MESSAGE_BYTES`), and so is what one child may send in all
(:data:`MAX_TOTAL_BYTES`, :data:`MAX_MESSAGES`): a child that floods the pipe is ended.

This module knows nothing of labs, specs, judges or reports.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import struct
from typing import Any
from collections.abc import Callable

import numpy as np

from lablib.grading.results import Kind

__all__ = [
    "Command",
    "ProbeRequest",
    "ProbeResult",
    "ProtocolError",
    "FrameReader",
    "encode_value",
    "decode_value",
    "to_plain",
    "write_frame",
    "MAX_MESSAGE_BYTES",
    "MAX_TOTAL_BYTES",
    "MAX_MESSAGES",
]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024
MAX_MESSAGES = 10_000
_MAX_HEADER_BYTES = 1024 * 1024


class ProtocolError(ValueError):
    """The child sent something that is not a well-formed plain value or reply."""


@dataclasses.dataclass(frozen=True)
class ProbeRequest:
    """One probe to run in the child after the graded cells.

    Attributes:
        id: the test's id (``"piece::name"``).
        probe: ``probe(ns) -> value``; called with a read-only view of the names the
            graded cells defined.
        objects: names the graded cell must define for the probe to run.
        timeout: seconds allowed (None: the run's default).
        guard: parts of lablib the student's code may not reach while this probe runs
            (:data:`lablib.grading.run.guard.BY_HAND` for a piece written by hand: the
            probe runs in a :class:`~lablib.grading.run.guard.Window`; empty: none).
    """

    id: str
    probe: Callable[[Any], Any]
    objects: tuple[str, ...] = ()
    timeout: float | None = None
    guard: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """What came back for one probe (or why nothing did).

    Attributes:
        ok: the probe returned a plain value.
        value: that value (arrays, numbers, strings, containers of them).
        kind: when not ok: ``error`` (the code raised), ``timeout``, ``memory``, ``crashed``.
        error: when not ok: what happened, for the report.
    """

    ok: bool
    value: Any = None
    kind: Kind | None = None
    error: str = ""

    @classmethod
    def failed(cls, kind, error: str) -> ProbeResult:
        """A result without a value; ``kind`` a :class:`~lablib.grading.results.Kind` (or its value)."""
        return cls(False, None, Kind(kind), error)


@dataclasses.dataclass(frozen=True)
class Command:
    """One request from the grader to the child; the child answers with ``seq``."""

    seq: int
    op: str  # "setup" | "cell" | "seal" | "probe" | "exit"
    sources: tuple[str, ...] = ()
    piece: str = ""
    source: str = ""
    probe: ProbeRequest | None = None


# --------------------------------------------------------------------------- values


def to_plain(value: Any, _depth: int = 0) -> Any:
    """Convert a probe's result to plain values (arrays, numbers, str, containers).

    Tensors and array-likes become NumPy arrays; anything else that is not plain raises
    TypeError, so an object with a custom ``__eq__`` never reaches a judge.
    """
    if _depth > 20:
        raise TypeError("Probe result nested too deeply (more than 20 levels).")
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, (np.generic,)):
        return value.item()
    if type(value) in (list, tuple):
        return type(value)(to_plain(v, _depth + 1) for v in value)
    if type(value) is dict:
        return {str(k): to_plain(v, _depth + 1) for k, v in value.items()}
    if type(value) is np.ndarray:
        if value.dtype == object:
            raise TypeError("Object arrays are not plain values; return numbers.")
        return np.array(value, copy=True)
    if hasattr(value, "numpy") and callable(value.numpy):  # tf.Tensor / Variable
        return to_plain(np.asarray(value.numpy()), _depth + 1)
    if hasattr(value, "__array__"):
        return to_plain(np.asarray(value), _depth + 1)
    raise TypeError(
        f"Probe returned a {type(value).__module__}.{type(value).__name__}; expected "
        f"numbers, strings, arrays or lists/dicts of them."
    )


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
            ((tag, body),) = v.items()
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


# --------------------------------------------------------------------------- frames


def write_frame(
    fd: int, header: dict, blobs=(), *, _dumps=json.dumps, _pack=struct.pack, _write=os.write
) -> None:
    """Write one reply frame: 4-byte length, JSON header (with blob sizes), the blobs.

    The defaults are bound when this module is imported, before any student code runs,
    so replacing ``json.dumps`` or ``os.write`` in the child's modules does not reach here.
    """
    header = dict(header, blobs=[len(b) for b in blobs])
    data = _dumps(header).encode()
    payload = _pack(">I", len(data)) + data + b"".join(blobs)
    view = memoryview(payload)
    while view:
        written = _write(fd, view)
        view = view[written:]


class FrameReader:
    """Reads reply frames from a raw file descriptor, within the caps.

    ``read()`` returns ``(header, blobs)``, raises EOFError at the end of the stream and
    ProtocolError for a malformed or oversized frame, or when the child has sent more
    than :data:`MAX_TOTAL_BYTES` or :data:`MAX_MESSAGES` in all.
    """

    def __init__(self, fd: int):
        self.fd = fd
        self.total = 0
        self.count = 0

    def _exact(self, n: int) -> bytes:
        chunks, remaining = [], n
        while remaining:
            chunk = os.read(self.fd, min(remaining, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def read(self) -> tuple[dict, list[bytes]]:
        (size,) = struct.unpack(">I", self._exact(4))
        if size > _MAX_HEADER_BYTES:
            raise ProtocolError(f"a message header of {size} bytes (at most {_MAX_HEADER_BYTES})")
        data = self._exact(size)
        try:
            header = json.loads(data)
        except Exception as exc:  # noqa: BLE001 - whatever the child wrote: not JSON, nested
            # past the parser's recursion (RecursionError), ...: the child's fault, never
            # an exception that ends the thread reading the pipe
            raise ProtocolError(
                f"a message header that is not JSON ({type(exc).__name__}: "
                f"{str(exc)[:160]}): the submission broke the result channel, which only "
                "lablib's own replies may use"
            ) from None
        if type(header) is not dict or type(header.get("blobs")) is not list:
            raise ProtocolError("a header without its blob sizes")
        sizes = header["blobs"]
        if any(type(s) is not int or s < 0 for s in sizes) or sum(sizes) > MAX_MESSAGE_BYTES:
            raise ProtocolError(f"a message of more than {MAX_MESSAGE_BYTES} bytes")
        self.count += 1
        self.total += size + sum(sizes)
        if self.count > MAX_MESSAGES or self.total > MAX_TOTAL_BYTES:
            raise ProtocolError(
                f"more than {MAX_MESSAGES} messages or {MAX_TOTAL_BYTES} bytes in all"
            )
        return header, [self._exact(s) for s in sizes]
