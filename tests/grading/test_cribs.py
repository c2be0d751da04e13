"""Cribs (issue 19): a graded piece written by hand cannot be passed by calling lablib's
own implementation or the grader's reference, both importable by students.

Each case is the released (blank) lab with graded cells that wrap lablib's function or a
judge's reference, graded by the real grader in its child process: every test of those
pieces gets 0 and says what was called; the pieces that build models from lablib's layers
are not affected, and the solution keeps full marks beside the cribs
(``lablib.grading.run.guard``).
"""

import sys

import nbformat
import pytest

from grading_paths import ROOT
from notebook_helpers import with_graded_cells
from lablib.grading.author.assignment import assign_notebook
from lablib.grading.grade import grade
from lablib.grading.spec import load_lab

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # grades notebooks in child processes

LAB1 = {
    "attention": """# GRADED: attention
import numpy as np
from lablib.layers import scaled_dot_product_attention


def attention(query, key, value, mask=None):
    output, weights = scaled_dot_product_attention(query, key, value, mask=mask)
    return np.asarray(output), np.asarray(weights)
""",
    "masks": """# GRADED: masks
import numpy as np
import lablib.layers as layers


def padding_mask(token_ids, pad_id=0):
    return np.asarray(layers.padding_mask(token_ids, pad_id))


def causal_mask(length):
    return np.asarray(layers.causal_mask(length))
""",
    "positional_encoding": """# GRADED: positional_encoding
import numpy as np
from lablib.layers.positional import positional_encoding as lablibs


def _helper(length, depth):  # a helper of the student's own in between
    return lablibs(length, depth)


def positional_encoding(length, depth):
    return np.asarray(_helper(length, depth))
""",
}

LAB3 = {
    "gcn_scalar": """# GRADED: gcn_scalar
import numpy as np
from lablib.grading.specs.lab3_gcn_molecules import reference_gcn


def gcn_layer_scalar(H, A, W, B, activation=np.tanh):
    return reference_gcn(H, A, W, B, activation)
""",
    "gcn_matrix": """# GRADED: gcn_matrix
import numpy as np


def gcn_layer_matrix(H, A, W, B, activation=np.tanh):
    from lablib.grading.specs import lab3_gcn_molecules as spec  # imported at call time
    return spec.reference_gcn(H, A, W, B, activation)
""",
    "gcn_edges": """# GRADED: gcn_edges
import numpy as np
import lablib.layers as layers


def gcn_layer_edges(H, edge_index, W, B, activation=np.tanh):  # lablib's sparse layer
    H = np.asarray(H, dtype="float32")
    conv = layers.GraphConv(len(W), normalization="mean")
    conv(H, edge_index=edge_index)
    conv.set_weights([np.asarray(W, "float32").T, np.asarray(B, "float32").T, np.zeros(len(W), "float32")])
    return activation(np.asarray(conv(H, edge_index=edge_index), dtype=float))
""",
    "readout": """# GRADED: readout
from lablib.grading.specs.lab3_gcn_molecules import reference_readout as readout  # no code of its own
""",
}


@pytest.mark.parametrize(
    "lab, cells, called",
    [
        (
            "lab1_attention",
            LAB1,
            {
                "attention": "lablib.layers.attention.scaled_dot_product_attention",
                "masks": "lablib.layers.attention.",
                "positional_encoding": "lablib.layers.positional.positional_encoding",
            },
        ),
        (
            "lab3_gcn_molecules",
            LAB3,
            {
                "gcn_scalar": "lablib.grading.specs.lab3_gcn_molecules.reference_gcn",
                "gcn_matrix": "lablib.grading.specs.lab3_gcn_molecules.reference_gcn",
                "gcn_edges": "lablib.layers.graph_conv.",
                "readout": "lablib.grading.specs.lab3_gcn_molecules.reference_readout",
            },
        ),
    ],
)
def test_each_crib_gets_nothing_and_is_named(
    lab, cells, called, shared_data, tmp_path, monkeypatch
):
    monkeypatch.setenv("LABLIB_FAST", "1")
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    solution = ROOT / "solutions" / f"{lab}.ipynb"
    blank = assign_notebook(solution, tmp_path / "labs")
    subs = tmp_path / "subs"
    subs.mkdir()
    cribbed, replaced = with_graded_cells(blank, cells)
    assert replaced == len(cells)
    (subs / "crib.ipynb").write_bytes(cribbed)
    (subs / "solution.ipynb").write_bytes(solution.read_bytes())
    results = {
        r.submission: r
        for r in grade(lab, [subs], tmp_path / "out", jobs=1, progress=False, lab_notebook=blank)
    }
    crib, honest = results["crib"], results["solution"]
    for piece, name in called.items():
        tests = [t for t in crib.tests if t.piece == piece]
        assert tests and all(t.score == 0 for t in tests), [
            (t.id, t.score, t.message) for t in tests
        ]
        for t in tests:
            assert f"your code calls {name}" in t.message and "write it yourself" in t.message, (
                t.id,
                t.message,
            )
    public = [t for t in honest.tests if not t.hidden]
    assert honest.status.ok and all(t.passed for t in public), [
        (t.id, t.message) for t in public if not t.passed
    ]
    assert (
        "grader's own reference" in " ".join(t.message for t in crib.tests)
        or lab == "lab1_attention"
    )


MASKS_PROFILER_OFF = """# GRADED: masks
import sys
import numpy as np
import lablib.layers as layers


def padding_mask(token_ids, pad_id=0):
    sys.setprofile(None)
    return np.asarray(layers.padding_mask(token_ids, pad_id))


def causal_mask(length):
    sys.setprofile(None)
    return np.asarray(layers.causal_mask(length))
"""


# A process forked in the graded cell, before any window, keeps lablib's code armed and
# serves the grader's reference over pipes (a red team's route: 19/19 on Lab 1).
ATTENTION_FORK_SERVER = """# GRADED: attention
import os, pickle, struct
from lablib.grading.specs._attention_checks import reference_attention as _r

_to_srv_r, _to_srv_w = os.pipe()
_from_srv_r, _from_srv_w = os.pipe()


def _read(fd, n):
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def _send(fd, obj):
    data = pickle.dumps(obj)
    os.write(fd, struct.pack("<Q", len(data)) + data)


def _recv(fd):
    (n,) = struct.unpack("<Q", _read(fd, 8))
    return pickle.loads(_read(fd, n))


if os.fork() == 0:
    os.close(_to_srv_w)
    os.close(_from_srv_r)
    import ctypes  # its name, as the messages show it: a line break and a forged line

    ctypes.CDLL(None).prctl(15, b"srv)\\nok 5/5", 0, 0, 0)  # PR_SET_NAME
    try:
        while True:
            args = _recv(_to_srv_r)
            _send(_from_srv_w, _r(*args))
    finally:
        os._exit(0)
del _r


def attention(query, key, value, mask=None):
    _send(_to_srv_w, (query, key, value, mask))
    return _recv(_from_srv_r)
"""


# A thread started in the graded cell runs a function holding the reference's code in its
# constants and makes a fresh, armed function of it on request (MAKE_FUNCTION is not
# audited): a frame that began before the window (a third red team's route, 19/19).
ATTENTION_FRAME_SERVER = """# GRADED: attention
import threading as _th, types as _types, importlib as _il

_req, _done, _box = _th.Event(), _th.Event(), []


def _server():
    while True:
        _req.wait()
        _req.clear()

        def made(query, key, value, mask=None, scale=None):
            pass

        _box.append(made)
        made = None
        _done.set()


def _start():
    checks = _il.import_module("lablib.grading.specs._attention_checks")
    original = getattr(checks, "reference_" + "attention").__code__
    placeholder = next(c for c in _server.__code__.co_consts if isinstance(c, _types.CodeType))
    consts = tuple(original if c is placeholder else c for c in _server.__code__.co_consts)
    server = _types.FunctionType(_server.__code__.replace(co_consts=consts), globals())
    _th.Thread(target=server, daemon=True).start()


_start()


def attention(query, key, value, mask=None):
    _done.clear()
    _req.set()
    _done.wait()
    fn = _box.pop()
    return fn(query, key, value, mask)
"""


def test_the_red_teams_bypasses_get_nothing_from_the_real_grader(
    shared_data, tmp_path, monkeypatch
):
    """Issue 29's bypasses of the old tracer, graded by the real grader in its child
    process (the in-process versions, with their variants: test_crib_guard.py): a worker
    thread, the profiler switched off, positional.py loaded again by a /./ path (in the cell
    and during the test), functools.partial, getsource + exec, a wrapper compiled under
    lablib's file name, keras.layers.MultiHeadAttention kept in a dict or looked up by name."""
    import test_crib_guard as bypass

    monkeypatch.setenv("LABLIB_FAST", "1")
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    lab = "lab1_attention"
    blank = assign_notebook(ROOT / "solutions" / f"{lab}.ipynb", tmp_path / "labs")
    sdpa = "your code calls lablib.layers.attention.scaled_dot_product_attention"
    mha = "your code calls keras.layers.MultiHeadAttention, a ready-made implementation"
    cases = {
        "thread": (
            {
                "attention": bypass.ATTENTION_THREAD,
                "masks": MASKS_PROFILER_OFF,
                "positional_encoding": bypass.POSITIONAL_REIMPORTED,
                "multi_head_attention": bypass.MHA_IN_A_DICT,
            },
            {
                "attention": sdpa,
                "masks": "your code calls lablib.layers.attention.",
                "positional_encoding": "your code calls lablib.layers.positional.positional_encoding",
                "multi_head_attention": mha,
            },
        ),
        "partial": (
            {
                "attention": bypass.ATTENTION_PARTIAL_HIDDEN,
                "positional_encoding": bypass.POSITIONAL_REIMPORTED_LATE,
                "multi_head_attention": bypass.MHA_LOOKED_UP,
            },
            {
                "attention": sdpa,
                "positional_encoding": "your code reads lablib's file",
                "multi_head_attention": mha,
            },
        ),
        "getsource": (
            {"attention": bypass.ATTENTION_GETSOURCE},
            {
                "attention": "your code runs a copy of lablib.layers.attention.scaled_dot_product_attention"
            },
        ),
        "filename": ({"attention": bypass.ATTENTION_LABLIB_FILENAME}, {"attention": sdpa}),
        "deque": (  # the scan of every function object, in the grader's child only
            {"attention": bypass.ATTENTION_SHARED_CODE_IN_DEQUE},
            {"attention": f"your code calls {bypass.REFERENCE}"},
        ),
        "edited-copy": (
            {"attention": bypass.ATTENTION_CONSTANT_MOVED},
            {"attention": f"your code runs a copy of {bypass.REFERENCE}"},
        ),
        "fork": (  # its name chosen by the submission, shown on the message's one line
            {"attention": ATTENTION_FORK_SERVER},
            {"attention": "a process your code started (pid "},
        ),
        "frame": (
            {"attention": ATTENTION_FRAME_SERVER},
            {"attention": "a thread your code started was running lablib.grading.specs."},
        ),
        # torch's attention where no module attribute holds it, the child sealed: the
        # registry asked by name with torch first imported inside the window (its kernels
        # are gated as torch.library loads), and kept in a deque before any window
        "torch-first-import": (
            {
                "attention": "# GRADED: attention\n"
                + bypass.ATTENTION_TORCH_DEF.format(lookup=bypass.REGISTRY)
            },
            {"attention": "your code calls torch.ops.aten."},
        ),
        "torch-deque": (
            {
                "attention": bypass.ATTENTION_TORCH.format(
                    prefix="_kept = collections.deque([F.scaled_dot_product_attention])",
                    lookup="_kept[0]",
                )
            },
            {"attention": "your code calls torch.ops.aten."},
        ),
    }
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, (cells, _) in cases.items():  # the solution, with these pieces cribbed
        cribbed, replaced = with_graded_cells(ROOT / "solutions" / f"{lab}.ipynb", cells)
        assert replaced == len(cells)
        (subs / f"{name}.ipynb").write_bytes(cribbed)
    results = {
        r.submission: r
        for r in grade(lab, [subs], tmp_path / "out", jobs=1, progress=False, lab_notebook=blank)
    }
    for name, (cells, named) in cases.items():
        result = results[name]
        for piece, sentence in named.items():
            tests = [t for t in result.tests if t.piece == piece]
            assert tests and all(t.score == 0 for t in tests), (
                name,
                [(t.id, t.score, t.message) for t in tests],
            )
            for t in tests:
                assert sentence in t.message and "no points" in t.message, (name, t.id, t.message)
                assert "\n" not in t.message, (name, t.id, t.message)
        if name == "fork":
            assert all("srv)?ok 5/5)" in t.message for t in tests if t.piece == "attention")
        untouched = [t for t in result.tests if t.piece not in cells and not t.hidden]
        if name in ("fork", "frame"):  # it could serve any piece: every by-hand piece's tests
            untouched = [
                t
                for t in untouched
                if "a process your code started" not in t.message
                and "a thread your code started was running" not in t.message
            ]
        assert all(t.passed for t in untouched), (
            name,
            [(t.id, t.message) for t in untouched if not t.passed],
        )


# What the rewriting cribs below share: the by-hand probe's reply to `attention`, found
# from a frame inside the probe once its window has closed and before the reply is sent,
# and made again from lablib's reference in its place.
_REPLY_IN_FLIGHT = """
import sys as _s, types as _t, numpy as _np

_done = set()


def _reply_in_flight(frame):
    while frame is not None and frame.f_code.co_name != "run_probe":
        frame = frame.f_back
    if frame is None:
        return None
    local = frame.f_locals
    plain, request, window = local.get("plain"), local.get("request"), local.get("window")
    if type(plain) is not dict or request is None or window is None or window._open:
        return None
    if tuple(request.objects) != ("attention",) or id(plain) in _done:
        return None
    return local


def _send_instead(local, reference):
    protocol = _s.modules["lablib.grading.run.protocol"]
    ns = dict(local["ns"])
    ns["attention"] = lambda q, k, v, mask=None: tuple(
        map(_np.asarray, reference(q, k, v, mask))
    )
    new = protocol.to_plain(local["request"].probe(_t.MappingProxyType(ns)))
    local["plain"].clear()
    local["plain"].update(new)
    _done.add(id(local["plain"]))
"""

# Code a submission leaves running that acts between a by-hand probe's window and its reply
# (or before the next window): it ran the probe again on lablib's reference and rewrote the
# reply in place, hidden tests included (a blank Lab 1: 16 of 24 points). The grader's child
# seals lablib's code before the first by-hand probe (guard.seal): nothing is put back.
_REWRITE = """
import sys as _s, importlib as _il, importlib.util as _ilu


def attention(query, key, value, mask=None):  # the work not done
    return 0.0, 0.0


_tries = [0]


def _reference():
    if {clear}:
        _s.modules["lablib.grading.run.guard"]._ACTIVE[0] = None
    if {fresh}:
        base = _il.import_module("lablib").__path__[0]
        spec = _ilu.spec_from_file_location("_x", base + "/grading/specs/_attention_checks.py")
        module = _ilu.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.reference_attention
    return _il.import_module("lablib.grading.specs._attention_checks").reference_attention


def _rewrite(frame):
    try:
        local = _reply_in_flight(frame)
        if local is None:
            return
        _tries[0] += 1
        if _tries[0] > 2000:  # tried at every collection while the window was put back
            return
        _send_instead(local, _reference())
    except BaseException:
        pass
"""

_TRIGGERS = {
    "gc-callback": """
import gc as _gc
_gc.callbacks.append(lambda phase, info: phase == "stop" and _rewrite(_s._getframe(1)))
_gc.set_threshold(1, 10**6, 10**6)
""",
    "tensorflow-patched": """
import tensorflow as _tf
_config = _tf.config.experimental
_tf32 = _config.enable_tensor_float_32_execution


def _after_the_window(enabled):  # called as full_float32() ends, after the window
    _tf32(enabled)
    _rewrite(_s._getframe(1))


_config.enable_tensor_float_32_execution = _after_the_window
""",
    "signal-timer": """
import signal as _signal
_signal.signal(_signal.SIGALRM, lambda signum, frame: _rewrite(frame))
_signal.setitimer(_signal.ITIMER_REAL, 0.001, 0.001)
""",
    "watcher-thread": """
import threading as _threading, time as _time
_main = _threading.main_thread().ident


def _watch():
    while True:
        _rewrite(_s._current_frames().get(_main))
        _time.sleep(0.0005)


_s.setswitchinterval(1e-4)
_threading.Thread(target=_watch, daemon=True).start()
""",
}

# the reply rewritten where the child sends it, computed with lablib's implementations
_PROFILE_HOOK = """
import sys as _s, types as _t, importlib as _il, numpy as _np


def _hook(frame, event, arg):
    if event != "call" or frame.f_code.co_name != "write_frame":
        return
    up = frame.f_back
    command = up.f_locals.get("command") if up is not None else None
    if command is None or command.op != "probe" or tuple(command.probe.objects) != ("attention",):
        return
    try:
        reference = _il.import_module("lablib.grading.specs._attention_checks").reference_attention
        protocol = _il.import_module("lablib.grading.run.protocol")
        ns = dict(up.f_locals["ns"])
        ns["attention"] = lambda q, k, v, mask=None: tuple(
            map(_np.asarray, reference(q, k, v, mask))
        )
        tree, blobs = protocol.encode_value(
            protocol.to_plain(command.probe.probe(_t.MappingProxyType(ns)))
        )
    except BaseException:
        return
    header = frame.f_locals["header"]
    seq = header["seq"]
    header.clear()
    header.update(seq=seq, event="result", ok=True, value=tree)
    frame.f_locals["blobs"][:] = blobs


_s.setprofile(_hook)
"""

# While the child reads a command, the unpickler may make functions of lablib's code (the
# probes travel by value); a gc callback firing then read the command again and made an
# armed function of lablib's reference for the hidden test (the public tests from a table
# made in the cell: a known gap, hidden tests are the answer to it).
_WHILE_READING = """
import gc as _gc, sys as _s, pickle as _pk, types as _t, collections as _co, numpy as _np
from lablib.grading.specs import _attention_checks as _ac
from lablib.grading.spec import get_lab as _get_lab
import lablib.grading.specs.lab1_attention as _l1

_KEEP = _co.deque([_ac.reference_attention.__code__])  # code objects: not gc-tracked
_TABLE = {}
_SEEN = set()
_BUSY = [False]


def _key(q, k, v, m):
    parts = [q, k, v] + ([] if m is None else [m])
    return tuple((_np.asarray(a).shape, _np.asarray(a).tobytes()) for a in parts)


def _recorder(ref):
    def rec(query, key, value, mask=None):
        out, w = ref(query, key, value, mask)
        _TABLE[_key(query, key, value, mask)] = (out, w)
        return out, w
    return rec


# public tests: a table computed in the cell (the documented, known gap)
for _test in _get_lab("lab1_attention").tests_for("attention"):
    try:
        _test.probe(_t.MappingProxyType({"attention": _recorder(_ac.reference_attention)}))
    except Exception:
        pass


def _cb(phase, info):
    if phase != "start" or _BUSY[0]:
        return
    f = _s._getframe(1)
    while f is not None and f.f_code.co_name != "read_command":
        f = f.f_back
    if f is None:
        return
    data = f.f_locals.get("data")
    if not isinstance(data, bytes) or hash(data) in _SEEN:
        return
    _SEEN.add(hash(data))
    _BUSY[0] = True
    try:
        cmd = _pk.loads(data)  # the same command, read again (a nested unpickling)
        if cmd.op != "probe" or tuple(cmd.probe.objects) != ("attention",):
            return
        fn = cmd.probe.probe
        mod = getattr(getattr(fn, "func", fn), "__module__", "") or ""
        if not mod.startswith("lablib_hidden_tests"):
            return  # public probes are lablib's spec code (sealed): the table has them
        ref = _t.FunctionType(_KEEP[0], {"np": _np, "__builtins__": __builtins__}, "r", (None, None))
        fn(_t.MappingProxyType({"attention": _recorder(ref)}))
    except BaseException:
        pass
    finally:
        _BUSY[0] = False


_gc.callbacks.append(_cb)
_gc.set_threshold(1, 10**6, 10**6)


def attention(query, key, value, mask=None):
    return _TABLE[_key(query, key, value, mask)]
"""

# A seal of the submission's own put where the guard keeps its seal.
_FAKE_SEAL = """
# rewrites the reply (the earlier red team's rewrite: _REPLY_IN_FLIGHT).
import sys as _s, importlib as _il, gc as _gc

_guard = _il.import_module("lablib.grading.run.guard")


class _Fake:
    found = None

    def __init__(self):
        self._saved, self._builtins, self._lines, self._arming = [], [], {}, None

    def note_tampering(self):
        pass

    def note(self, crib):
        pass

    def refused(self, event, args):
        return None


_FAKE = _Fake()
_guard._SEAL[0] = _FAKE


def attention(query, key, value, mask=None):  # the work not done
    return 0.0, 0.0


def _rewrite(frame):
    try:
        local = _reply_in_flight(frame)
        if local is None or _guard._ACTIVE[0] is not _FAKE:
            return
        for function, code in list(_FAKE._saved):  # lablib's code back (the fake judges)
            function.__code__ = code
        checks = _il.import_module("lablib.grading.specs._attention_checks")
        _send_instead(local, checks.reference_attention)
    except BaseException:
        pass


_gc.callbacks.append(lambda phase, info: phase == "stop" and _rewrite(_s._getframe(1)))
_gc.set_threshold(1, 10**6, 10**6)
"""

# A loader of the submission's own, answering through the window's import gate for a
# name under lablib's guarded packages with a copy of lablib's module compiled elsewhere:
# the gate ran it unjudged and disarmed nothing (no file of lablib's).
_THROUGH_THE_GATE = """
import sys as _s, collections as _co, importlib as _il, importlib.util as _iu
import lablib.grading.specs._attention_checks as _ac
import lablib.layers.positional as _lp

_CODES = _co.deque([  # module code objects (not gc-tracked; a deque is not searched)
    compile(open(_ac.__file__).read(), "<not lablib a>", "exec"),
    compile("import numpy as np\n"  # lablib's function as it is, its helper ours
            "def check_positive_int(what, value, where):\n    return int(value)\n"
            + __import__("inspect").getsource(_lp.positional_encoding),
            "<not lablib p>", "exec"),
])
del _ac, _lp


class _Loader:
    def __init__(self, code):
        self.code = code

    def create_module(self, spec):
        return None

    def exec_module(self, module):  # never called: the gate's loader calls get_code
        raise ImportError(module.__name__)

    def get_code(self, name):
        return self.code


class _Finder:
    def __init__(self, name, code):
        self.name, self.code = name, code

    def find_spec(self, name, path=None, target=None):
        if name == self.name:
            return _iu.spec_from_loader(name, _Loader(self.code))  # no origin: no __file__
        return None


_COUNT = [0]


def _armed(which):
    _COUNT[0] += 1
    name = f"lablib.grading.specs.zz_mine_{_COUNT[0]}"
    finder = _Finder(name, _CODES[which])
    _s.meta_path.insert(1, finder)  # after the window's gate, before the seal's
    try:
        return _il.import_module(name)
    finally:
        _s.meta_path.remove(finder)
        _s.modules.pop(name, None)


def attention(query, key, value, mask=None):
    return _armed(0).reference_attention(query, key, value, mask)

"""

# Honest: a library imported inside the by-hand function, not yet loaded (the window's
# import gate and the seal's asked each other without end).
_LAZY_IMPORT = """
_attention_lazy = attention


def attention(query, key, value, mask=None):
    import sklearn.metrics  # noqa: F401

    return _attention_lazy(query, key, value, mask)
"""

_SECRET_TEST = """
import numpy as np
from lablib.grading.spec import expect_close, get_lab

lab = get_lab("lab1_attention")


def _secret():
    rng = np.random.RandomState(987654)
    q, k, v = rng.normal(size=(3, 5, 6)), rng.normal(size=(3, 7, 6)), rng.normal(size=(3, 7, 4))
    return q, k, v


@lab.test("attention", points=3)
def secret_attention(ns):
    out, weights = ns["attention"](*_secret())
    return {"output": np.asarray(out, float), "weights": np.asarray(weights, float)}


@secret_attention.judge
def _(got):
    q, k, v = _secret()
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    expect_close(got["weights"], weights, atol=1e-6, what="secret weights")
    expect_close(got["output"], weights @ v, atol=1e-6, what="secret output")
"""


def test_code_left_running_between_windows_gets_nothing(shared_data, tmp_path, monkeypatch):
    """A blank Lab 1 whose graded cell leaves code behind that runs between the by-hand
    probes' windows (a gc callback, a TensorFlow function replaced, a signal timer, a
    watcher thread, a profile hook rewriting the reply as it is sent; one clears the
    guard's state first, one loads lablib's file afresh): every test of the piece scores 0,
    hidden test included, and the deterministic ones are named. The solution graded beside
    them keeps full marks with the hidden test."""
    monkeypatch.setenv("LABLIB_FAST", "1")
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    lab = "lab1_attention"
    blank_path = ROOT / "labs" / f"{lab}.ipynb"
    blank = assign_notebook(ROOT / "solutions" / f"{lab}.ipynb", tmp_path / "labs")
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / f"{lab}.py").write_text(_SECRET_TEST, encoding="utf-8")
    rewrite = _REPLY_IN_FLIGHT + _REWRITE
    cases = {
        name: rewrite.format(clear=False, fresh=False) + trigger
        for name, trigger in _TRIGGERS.items()
    }
    cases["gc-fresh-file"] = rewrite.format(clear=False, fresh=True) + _TRIGGERS["gc-callback"]
    cases["gc-state-cleared"] = rewrite.format(clear=True, fresh=True) + _TRIGGERS["gc-callback"]
    cases["profile-hook"] = _PROFILE_HOOK
    cases["while-reading"] = _WHILE_READING
    cases["fake-seal"] = _REPLY_IN_FLIGHT + _FAKE_SEAL
    cases["through-the-gate"] = _THROUGH_THE_GATE
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, code in cases.items():
        cell = "# GRADED: attention\n" + code
        notebook, replaced = with_graded_cells(blank_path, {"attention": cell})
        assert replaced == 1
        (subs / f"{name}.ipynb").write_bytes(notebook)
    (subs / "honest.ipynb").write_bytes((ROOT / "solutions" / f"{lab}.ipynb").read_bytes())
    solution = nbformat.read(ROOT / "solutions" / f"{lab}.ipynb", as_version=4)
    (attention_cell,) = (
        c.source for c in solution.cells if c.source.startswith("# GRADED: attention\n")
    )
    lazy, _ = with_graded_cells(
        ROOT / "solutions" / f"{lab}.ipynb", {"attention": attention_cell + "\n" + _LAZY_IMPORT}
    )
    (subs / "honest-lazy-import.ipynb").write_bytes(lazy)
    # the hidden tests are this call's (a copy of Lab 1's spec has them; this process's
    # Lab 1 keeps its public tests, checked after); the module they load is taken out after
    public, modules = list(load_lab(lab).tests), set(sys.modules)
    try:
        results = {
            r.submission: r
            for r in grade(
                lab,
                [subs],
                tmp_path / "out",
                jobs=1,
                progress=False,
                lab_notebook=blank,
                hidden_dirs=[str(hidden)],
            )
        }
    finally:
        for name in set(sys.modules) - modules:
            if name.startswith("lablib_hidden_tests"):
                del sys.modules[name]
    assert list(load_lab(lab).tests) == public
    for name in ("honest", "honest-lazy-import"):
        honest = results[name]
        assert honest.score == honest.max_score, (name, [(t.id, t.message) for t in honest.tests])
        assert any(t.hidden and t.passed for t in honest.tests)
    for name in cases:
        tests = [t for t in results[name].tests if t.piece == "attention"]
        assert any(t.hidden for t in tests)
        if name == "while-reading":  # its public answers are a table made in the cell
            tests = [t for t in tests if t.hidden]
        assert all(t.score == 0 for t in tests), (name, [(t.id, t.message) for t in tests])
        if name in ("gc-callback", "tensorflow-patched", "gc-fresh-file", "profile-hook"):
            named = [t.message for t in results[name].tests if "no points" in t.message]
            assert named, (name, [(t.id, t.message) for t in results[name].tests])
    cleared = [t.message for t in results["gc-state-cleared"].tests]
    assert any("changed lablib's grading code" in m for m in cleared), cleared
