"""The result channel's frame reader: whatever bytes a child writes there end as a
protocol error (the run's request ``crashed``), never as an exception that ends the
thread reading the pipe (the grader then waited for the request's time limit, reported
``timeout``, and printed a traceback)."""

import os
import struct

import pytest

from lablib.grading.run import protocol


def _reader(tmp_path, data: bytes) -> protocol.FrameReader:
    """A reader of ``data`` (a file: a pipe would not hold a header of 800 kB unread)."""
    path = tmp_path / "frames"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    return protocol.FrameReader(fd)


def _frame(header: bytes) -> bytes:
    return struct.pack(">I", len(header)) + header


def test_a_header_nested_past_the_parser_is_a_protocol_error(tmp_path):
    """The red team's submission wrote 400,000 '[' and as many ']' to the result
    descriptor: json.loads raised RecursionError, which the reader let through."""
    reader = _reader(tmp_path, _frame(b"[" * 400_000 + b"]" * 400_000))
    try:
        with pytest.raises(protocol.ProtocolError) as info:
            reader.read()
    finally:
        os.close(reader.fd)
    message = str(info.value)
    assert "RecursionError" in message and "the submission broke the result channel" in message
    cut = _reader(tmp_path, struct.pack(">I", 100) + b'{"seq": 1')  # still the stream's end
    try:
        with pytest.raises(EOFError):
            cut.read()
    finally:
        os.close(cut.fd)


@pytest.mark.parametrize("header", [b"{not json", b"\xff\xfe\x00", b"[1, 2"])
def test_a_header_that_is_not_json_is_a_protocol_error(tmp_path, header):
    reader = _reader(tmp_path, _frame(header))
    try:
        with pytest.raises(protocol.ProtocolError, match="result channel"):
            reader.read()
    finally:
        os.close(reader.fd)
