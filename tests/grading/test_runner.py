"""The runner: plain-value wire format and the limited child process."""

import io
import os

import numpy as np
import pytest

from lablib.grading import runner


@pytest.mark.parametrize("value", [
    None, True, 3, -2.5, float("nan"), float("inf"), "text",
    [1, [2.0, "x"]], (1, (2, 3)), {"a": np.arange(3), "b": (np.ones((2, 2), np.float32), None)},
    {"a": 1, "d": 2, "t": 3},  # keys that look like the format's own tags
    np.array([True, False]), np.array(["ab", "c"]),
])
def test_encode_decode_round_trip(value):
    tree, blobs = runner.encode_value(value)
    back = runner.decode_value(tree, blobs)
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
            runner.encode_value(bad)


def test_decode_is_strict_and_never_unpickles():
    import pickle
    with pytest.raises(runner.ProtocolError):
        runner.decode_value({"a": 0}, [pickle.dumps(object())])
    buf = io.BytesIO()
    np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(runner.ProtocolError):
        runner.decode_value({"a": 0}, [buf.getvalue()])
    for bad in ({"zz": 1}, {"a": 5}, {"d": [[1, 2]]}, {"t": 3, "a": 0}, {"f": "1e400"}):
        with pytest.raises(runner.ProtocolError):
            runner.decode_value(bad, [])


def _t(name, probe, timeout=None):
    return {"id": f"f::{name}", "probe": probe, "objects": ["f"], "timeout": timeout}


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
    tests = [_t("double", _double), _t("segfault", _segfault), _t("loop", _loop, timeout=1.5),
             _t("exit", _exit), _t("again", _double)]
    out = runner.run_submission(["import numpy as np\n"], [("f", "def f(x):\n    return 2 * x\nprint('hello')")],
                                tests, timeout=5, memory_mb=1024)
    assert out.results["f::double"]["ok"] and np.array_equal(out.results["f::double"]["value"], [0, 2, 4])
    assert out.results["f::segfault"]["kind"] == "crashed" and "SIGSEGV" in out.results["f::segfault"]["error"]
    assert out.results["f::loop"]["kind"] == "timeout"
    assert out.results["f::exit"]["kind"] == "crashed" and "code 7" in out.results["f::exit"]["error"]
    assert out.results["f::again"]["ok"]
    assert out.attempts == 4 and "hello" in out.output
    kinds = sorted(k for k, _ in out.problems)
    assert kinds == ["crashed", "crashed", "timeout"]


def test_cell_errors_and_missing_objects_are_reported_not_raised():
    out = runner.run_submission([], [("f", "raise ValueError('boom')")], [_t("double", _double)], timeout=5)
    assert out.cell_errors["f"][0] == "error" and "ValueError: boom" in out.cell_errors["f"][1]
    assert out.results["f::double"] == {"ok": False, "kind": "error",
                                        "error": "the graded cell does not define f"}


@pytest.mark.skipif(not runner._sandbox_possible(), reason="the sandbox stage needs root on Linux")
def test_sandbox_drops_privileges_network_and_hides_paths(tmp_path):
    import json
    secret = tmp_path.parent / f"{tmp_path.name}-secret"
    secret.mkdir()
    (secret / "answers.py").write_text("SECRET = 42")

    probe_source = f'''
def f(ns=None):
    out = {{}}
    try:
        out["read"] = open({str(secret / "answers.py")!r}).read()
    except OSError as exc:
        out["read"] = type(exc).__name__
    return out
'''
    def read_probe(ns):
        return ns["f"]()
    out = runner.run_submission([], [("f", probe_source)], [_t("who", _whoami), _t("read", read_probe)],
                                timeout=10, mask=[str(secret)])
    who = out.results["f::who"]["value"]
    assert who["uid"] != 0 and who["net"] == "down"
    assert out.results["f::read"]["value"]["read"] in ("PermissionError", "FileNotFoundError")
    assert out.isolation["uid"] != 0 and "network namespace" in out.isolation["network"]
    assert "hidden" in out.isolation["filesystem"]
    json.dumps(out.isolation)


def test_memory_limit_reports_memory():
    def hog(ns):
        chunks = []
        while True:
            chunks.append(np.ones(2**22))
    out = runner.run_submission(["import numpy as np\n"], [("f", "f = 1")], [_t("hog", hog)], timeout=20,
                                memory_mb=300)
    assert out.results["f::hog"]["kind"] == "memory"
    assert [k for k, _ in out.problems] == ["memory"]
