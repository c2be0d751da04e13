"""The crib guard without tracing (issue 29, item 6): every bypass the red team used on the
setprofile tracer, played on Lab 1's by-hand pieces through the code path the grader's
child runs for a probe (``lablib.grading.run.child.run_probe``, then the judge).

Each crib is first graded without the guard, to show it is a real crib (it scores),
then with it: every public test of the piece scores 0 and names what was used. The
honest solution beside it keeps full marks, and lablib's functions work again afterwards.
(``tests/grading/test_cribs.py`` grades such notebooks with the real grader; the four
labs' solutions under the guard are ``test_crib_guard_labs.py``.)
"""

import _thread
import os
import re
import sys
import threading
import time

import numpy as np
import pytest

from notebook_helpers import SOLUTIONS, exec_lab_cells
from lablib.grading.judge import judge_test
from lablib.grading.run import guard
from lablib.grading.run.child import run_probe
from lablib.grading.run.guard import BY_HAND, Window, catalogue, fingerprint, message
from lablib.grading.run.protocol import ProbeRequest
from lablib.grading.spec import load_lab

LAB = "lab1_attention"


@pytest.fixture(autouse=True)
def keras_registry_kept():
    """A crib that loads lablib's positional.py again under another name (run without the
    guard, to show it scores) registers that copy's layers under lablib's Keras names; the
    registry is put back after each test, so later tests in this process (a `.keras` round
    trip of lablib's PositionalEncoding) load lablib's own classes."""
    from keras.src.saving import object_registration

    objects = dict(object_registration.GLOBAL_CUSTOM_OBJECTS)
    names = dict(object_registration.GLOBAL_CUSTOM_NAMES)
    yield
    object_registration.GLOBAL_CUSTOM_OBJECTS.clear()
    object_registration.GLOBAL_CUSTOM_OBJECTS.update(objects)
    object_registration.GLOBAL_CUSTOM_NAMES.clear()
    object_registration.GLOBAL_CUSTOM_NAMES.update(names)


@pytest.fixture
def as_graded(monkeypatch):
    """The scan of every function object, which runs in the grader's child only
    (guard.protect() turns it on there; lablib.check in a notebook leaves it out)."""
    monkeypatch.setattr(guard._running_lablib_code, "__defaults__", (True,))


def test_the_scan_of_every_function_runs_where_grades_are_decided_only(as_graded):
    """A function made on lablib's code and kept in a deque: the scan finds it in the
    grader's child; in the student's process (lablib.check) the scan is left out."""
    import collections

    from lablib.layers import scaled_dot_product_attention as sdpa

    kept = collections.deque([type(sdpa)(sdpa.__code__, sdpa.__globals__)])
    assert any(f is kept[0] for f in guard._running_lablib_code(catalogue()))
    assert guard._running_lablib_code(catalogue(), False) == []
    import subprocess  # the grader's child turns it on (a fresh process: protect() is final)

    turned_on = subprocess.run(
        [sys.executable, "-c", "from lablib.grading.run import guard; guard.protect(); "
         "print(guard._running_lablib_code.__defaults__, guard._processes_started.__defaults__)"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert turned_on.stdout.split() == ["(True,)", "(True,)"], turned_on.stderr[-2000:]


_KEPT_BY_THE_SEAL = """
import sys, types, weakref
import numpy as np
import keras
import keras.src.backend.tensorflow.nn as knn
import tf_keras  # Lab 2's Keras: its Dropout's lambda is written like Attention's
from lablib.grading.run import guard

guard._running_lablib_code.__defaults__ = (True,)  # the grader's child's scan
guard.protect(child=None)
# kept in a graded cell, before the seal: the code, and a function made on it
KEPT = knn.dot_product_attention.__code__
CLONE = types.FunctionType(KEPT, vars(knn), "clone", knn.dot_product_attention.__defaults__)
CLONE.__kwdefaults__ = knn.dot_product_attention.__kwdefaults__
guard.seal({})


def attempts():  # what a by-hand function reads, by names the search does not follow
    guard = sys.modules["lablib.grading.run." + "guard"]
    nn, cell = vars(sys.modules["keras.src.backend.tensorflow." + "nn"]), vars(sys.modules["__main__"])
    seal = guard._SEAL[0]
    codes = [c for _, c in seal._saved] + [v[1] for v in guard._GATED.values()]
    codes += [v[0]() for v in guard._CODE_SEEN.values()] + [cell["KE" + "PT"]]
    for code in codes:
        if isinstance(code, types.CodeType) and code.co_name == "dot_product_attention":
            yield lambda: types.FunctionType(code, nn, "f", (None, None, False, None))
    yield lambda: cell["CLO" + "NE"]
    yield lambda: nn["_dot_product_attention" + "_xla"]
    yield lambda: [b for _, _, b, _ in seal._builtins if b is not None][0]


q = np.random.RandomState(0).rand(1, 4, 1, 8).astype("float32")
ran, refused = [], 0
with guard.Window(guard.BY_HAND, {"f": attempts}, None, {}) as window:
    assert window.found is None, window.found
    for attempt in attempts():
        try:
            function = attempt()
            xla = function.__name__ == "_dot_product_attention_xla"
            args = (q, q, q, None, None, False, 1.0) if xla else (q, q, q)
            ran.append(np.asarray(function(*args)).shape)
        except guard.CribCall:
            refused += 1
        except (IndexError, TypeError):
            pass
# honest code in the window: tf_keras's Dropout, and a function of the student's written
# like a ready-made one's (instructions and names alike, not its code)
def compute_output_shape(shapes):
    q = shapes[0]
    v = shapes[1]
    return (*q[:-1], v[-1])


x = np.ones((2, 3), "float32")
with guard.Window(guard.BY_HAND, {"compute_output_shape": compute_output_shape}, None, {}) as w:
    dropped = np.asarray(tf_keras.layers.Dropout(0.5)(x, training=False))
assert w.found is None and (dropped == x).all(), w.found
strong = sum(not isinstance(v[0], weakref.ref) for v in guard._CODE_SEEN.values())
print("RAN", ran, refused, len([c for f, c in guard._SEAL[0]._saved if c is None]), strong)
"""


def test_the_seal_keeps_no_ready_made_original():
    """Sealed, no ready-made implementation can be had again by reading: its original code
    (and a ready-made builtin) is not kept in the guard's lists (read from the seal's
    list, Keras's attention's original was made into a working function: no lablib code,
    so the audit hook let it be made), the scan's cache holds code weakly (it held
    Keras's), a function made on a ready-made function's code or a code object kept in a
    graded cell is disarmed or refused like lablib's, and Keras's helper that computes the
    whole attention is a ready-made row; tf_keras's Dropout (a lambda written like
    Attention's) and a student's function written like a ready-made one's still run. A
    fresh process: protect() and seal() are final."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _KEPT_BY_THE_SEAL], capture_output=True, text=True, timeout=600
    )
    line = [x for x in done.stdout.splitlines() if x.startswith("RAN ")]
    assert line, done.stderr[-3000:]
    ran, refused, forgotten, strong = re.fullmatch(
        r"RAN (\[.*\]) (\d+) (\d+) (\d+)", line[0]
    ).groups()
    assert ran == "[]", line  # nothing of Keras's ran
    assert strong == "0", line  # the scan's cache holds no code object
    assert int(refused) >= 3, line  # the clone, the helper, the kept code: each refused
    assert int(forgotten) > 0, line  # the seal disarmed Keras's rows, keeping no original


@pytest.fixture(scope="module")
def solution_ns():
    """Lab 1's set-up and graded cells, run as the grader's child runs them."""
    return exec_lab_cells(SOLUTIONS / f"{LAB}.ipynb")


def with_cell(ns, piece, source):
    """A copy of ``ns`` after the graded cell ``piece`` ran ``source`` (as the child runs it)."""
    ns = dict(ns)
    exec(compile(source, f"<graded cell {piece}>", "exec"), ns)
    return ns


def grade_piece(ns, piece, guard=BY_HAND):
    """The public tests of ``piece`` on ``ns``: what the grader's child and judge give."""
    spec = load_lab(LAB)
    objects = tuple(spec.pieces[piece].objects)
    return [
        judge_test(t, run_probe(ProbeRequest(t.id, t.probe, objects, t.timeout, guard), ns))
        for t in spec.tests_for(piece, hidden=False)
    ]


def assert_crib(ns, piece, named, *, scores_without_guard=True):
    """Without the guard the crib scores (it is a real one); with it every test of the piece
    gets 0 and its message names ``named``."""
    if scores_without_guard:
        plain = grade_piece(ns, piece, guard=())
        assert sum(r.score for r in plain) > 0, [(r.id, r.message) for r in plain]
    guarded = grade_piece(ns, piece)
    assert guarded and all(r.score == 0 for r in guarded), [
        (r.id, r.score, r.message) for r in guarded
    ]
    for r in guarded:
        assert named in r.message and "no points" in r.message, (r.id, r.message)
    return guarded


def lablib_still_works():
    from lablib.layers import scaled_dot_product_attention
    from lablib.layers.positional import positional_encoding

    x = np.eye(3, 4, dtype="float32")[None]
    output, weights = scaled_dot_product_attention(x, x, x)
    assert np.asarray(weights).shape == (1, 3, 3)
    assert np.asarray(positional_encoding(4, 6)).shape == (4, 6)


SDPA = "lablib.layers.attention.scaled_dot_product_attention"


ATTENTION_PARTIAL = """# GRADED: attention
import functools
import numpy as np
from lablib.layers import scaled_dot_product_attention

_attend = functools.partial(scaled_dot_product_attention)


def attention(query, key, value, mask=None):
    output, weights = _attend(query, key, value, mask=mask)
    return np.asarray(output), np.asarray(weights)
"""

# The same partial, found only when the function runs (no name in its code leads to it):
# the disarmed function itself raises.
ATTENTION_PARTIAL_HIDDEN = """# GRADED: attention
import functools
import numpy as np
import lablib.layers

globals()["_" + "a"] = functools.partial(getattr(lablib.layers, "scaled_dot_product_" + "attention"))


def attention(query, key, value, mask=None):
    output, weights = globals()["_" + "a"](query, key, value, mask=mask)
    return np.asarray(output), np.asarray(weights)
"""

ATTENTION_NO_PROFILER = """# GRADED: attention
import sys
import numpy as np
from lablib.layers import scaled_dot_product_attention


def attention(query, key, value, mask=None):
    sys.setprofile(None)
    sys.settrace(None)
    output, weights = scaled_dot_product_attention(query, key, value, mask=mask)
    return np.asarray(output), np.asarray(weights)
"""

ATTENTION_THREAD = """# GRADED: attention
import threading
import numpy as np
import lablib.layers


def attention(query, key, value, mask=None):
    box = {}

    def work():
        function = getattr(lablib.layers, "scaled_dot_product_" + "attention")
        box["result"] = function(query, key, value, mask=mask)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    output, weights = box["result"]
    return np.asarray(output), np.asarray(weights)
"""

POSITIONAL_REIMPORTED = """# GRADED: positional_encoding
import importlib.util
import os
import numpy as np
import lablib

_path = os.path.join(os.path.dirname(lablib.__file__), ".", "layers", ".", "positional.py")
_spec = importlib.util.spec_from_file_location("my_positional", _path)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)


def positional_encoding(length, depth):
    return np.asarray(_module.positional_encoding(length, depth))
"""

# Loaded again while the test runs: the audit hook refuses to read the file.
POSITIONAL_REIMPORTED_LATE = """# GRADED: positional_encoding
import importlib.util
import os
import numpy as np
import lablib


def positional_encoding(length, depth):
    path = os.path.join(os.path.dirname(lablib.__file__), ".", "layers", "positional.py")
    spec = importlib.util.spec_from_file_location("late_positional", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return np.asarray(module.positional_encoding(length, depth))
"""

ATTENTION_GETSOURCE = """# GRADED: attention
import inspect
import numpy as np
import lablib.layers.attention as _impl

_scope = dict(vars(_impl))
exec(inspect.getsource(_impl.scaled_dot_product_attention), _scope)
_copy = _scope["scaled_dot_product_attention"]
del _scope


def attention(query, key, value, mask=None):
    output, weights = _copy(query, key, value, mask=mask)
    return np.asarray(output), np.asarray(weights)
"""

# getsource + exec while the test runs: lablib's lines are out of linecache and its file
# cannot be opened (a disarmed function's own source is the raiser's, not lablib's).
ATTENTION_GETSOURCE_LATE = """# GRADED: attention
import inspect
import numpy as np
import lablib.layers.attention as _impl

inspect.getsource(_impl)  # its lines now sit in linecache


def attention(query, key, value, mask=None):
    scope = {"__name__": "copied_attention"}
    exec(inspect.getsource(_impl), scope)
    output, weights = scope["scaled_dot_product_attention"](query, key, value, mask=mask)
    return np.asarray(output), np.asarray(weights)
"""

# The module's source read in the cell, run while the test runs: the code it compiles is
# lablib's own, so running it is refused.
ATTENTION_SOURCE_KEPT = """# GRADED: attention
import inspect
import numpy as np
import lablib.layers.attention as _impl

_SOURCE = inspect.getsource(_impl)


def attention(query, key, value, mask=None):
    scope = {"__name__": "copied_attention"}
    exec(_SOURCE, scope)
    output, weights = scope["scaled_dot_product_attention"](query, key, value, mask=mask)
    return np.asarray(output), np.asarray(weights)
"""

# Traced into a TensorFlow graph in the cell: calling the traced function later runs the
# graph, not lablib's Python; the search finds lablib's function behind the tf.function.
ATTENTION_TRACED = """# GRADED: attention
import numpy as np
import tensorflow as tf
from lablib.layers import scaled_dot_product_attention

_traced = tf.function(lambda q, k, v: scaled_dot_product_attention(q, k, v))
_worked = np.array([[1.0, 2.0, 3.0, 4.0], [4.0, 5.0, 9.0, 1.0], [6.0, 2.0, 1.0, 4.0]])
_traced(_worked, _worked, _worked)


def attention(query, key, value, mask=None):
    output, weights = _traced(np.asarray(query, float), np.asarray(key, float), np.asarray(value, float))
    return np.asarray(output), np.asarray(weights)
"""

# Traced into TensorFlow graphs in the cell, and only the ConcreteFunctions kept: no Python
# function of lablib's is left to find, and running them runs no disarmed code. The graphs'
# operations record the code they were made from: lablib's own.
ATTENTION_CONCRETE = """# GRADED: attention
import numpy as np
import tensorflow as tf
from lablib.layers import scaled_dot_product_attention as _sdpa

_spec = tf.TensorSpec(None, tf.float64)
_plain = tf.function(lambda q, k, v: _sdpa(q, k, v)).get_concrete_function(_spec, _spec, _spec)
_masked = tf.function(lambda q, k, v, m: _sdpa(q, k, v, m)).get_concrete_function(
    _spec, _spec, _spec, tf.TensorSpec(None, tf.bool)
)
del _sdpa


def attention(query, key, value, mask=None):
    q, k, v = (tf.constant(np.asarray(a, np.float64)) for a in (query, key, value))
    if mask is None:
        output, weights = _plain(q, k, v)
    else:
        output, weights = _masked(q, k, v, tf.constant(np.asarray(mask, bool)))
    return output.numpy(), weights.numpy()
"""

# The same ConcreteFunctions kept in a list and a tuple in a dict in a tf.Module, which
# only a closure holds.
ATTENTION_CONCRETE_HELD = """# GRADED: attention
import numpy as np
import tensorflow as tf
from lablib.layers import scaled_dot_product_attention as _sdpa


def _make():
    spec = tf.TensorSpec(None, tf.float64)
    box = tf.Module()
    box.traced = {
        "plain": [tf.function(lambda q, k, v: _sdpa(q, k, v)).get_concrete_function(spec, spec, spec)],
        "masked": (
            tf.function(lambda q, k, v, m: _sdpa(q, k, v, m)).get_concrete_function(
                spec, spec, spec, tf.TensorSpec(None, tf.bool)
            ),
        ),
    }

    def attention(query, key, value, mask=None):
        q, k, v = (tf.constant(np.asarray(a, np.float64)) for a in (query, key, value))
        if mask is None:
            output, weights = box.traced["plain"][0](q, k, v)
        else:
            output, weights = box.traced["masked"][0](q, k, v, tf.constant(np.asarray(mask, bool)))
        return output.numpy(), weights.numpy()

    return attention


attention = _make()
del _make, _sdpa
"""

ATTENTION_LABLIB_FILENAME = """# GRADED: attention
import os
import numpy as np
import lablib.layers
from lablib.layers import scaled_dot_product_attention

_file = os.path.join(os.path.dirname(lablib.layers.__file__), "attention.py")
exec(compile("def attention(query, key, value, mask=None):\\n"
             "    output, weights = scaled_dot_product_attention(query, key, value, mask=mask)\\n"
             "    return np.asarray(output), np.asarray(weights)\\n", _file, "exec"), globals())
"""

# lablib's package held only by a closure: no global name reaches it. The gate on lablib's
# function scored it 0 at call time before the search followed such a module too
# (test_a_module_the_function_holds_is_followed_like_a_global): kept here end to end.
ATTENTION_MODULE_IN_A_CLOSURE = """# GRADED: attention
import importlib
import numpy as np


def _make():
    m = importlib.import_module("lablib.layers")

    def attention(query, key, value, mask=None):
        output, weights = m.scaled_dot_product_attention(query, key, value, mask=mask)
        return np.asarray(output), np.asarray(weights)

    return attention


attention = _make()
del _make
"""

# lablib's function traced and saved as a SavedModel in the cell, loaded only inside the
# graded function, while the test runs (a red team: Lab 3's gcn_edges 4/4 and Lab 4's
# gat_attention 6/6 so; the search saw nothing held, and the graph records no code).
ATTENTION_SAVED_LOADED_IN_THE_TEST = """# GRADED: attention
import tempfile
import numpy as np
import tensorflow as tf
from lablib.layers import scaled_dot_product_attention as _sdpa

_spec = tf.TensorSpec(None, tf.float64)
_box = tf.Module()
_box.plain = tf.function(lambda q, k, v: _sdpa(q, k, v), input_signature=[_spec] * 3)
_box.masked = tf.function(
    lambda q, k, v, m: _sdpa(q, k, v, m), input_signature=[_spec] * 3 + [tf.TensorSpec(None, tf.bool)]
)
_DIR = tempfile.mkdtemp()
tf.saved_model.save(_box, _DIR)
del _box, _sdpa


def attention(query, key, value, mask=None):
    loaded = tf.saved_model.load(_DIR)
    q, k, v = (tf.constant(np.asarray(a, np.float64)) for a in (query, key, value))
    if mask is None:
        output, weights = loaded.plain(q, k, v)
    else:
        output, weights = loaded.masked(q, k, v, tf.constant(np.asarray(mask, bool)))
    return output.numpy(), weights.numpy()
"""

MHA_IN_A_DICT = """# GRADED: multi_head_attention
_READY = {"mha": keras.layers.MultiHeadAttention}


class MultiHeadSelfAttention(keras.layers.Layer):
    def __init__(self, num_heads, key_dim, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.key_dim = key_dim

    def build(self, input_shape):
        inner = self.num_heads * self.key_dim
        self.query_dense = keras.layers.Dense(inner)
        self.key_dense = keras.layers.Dense(inner)
        self.value_dense = keras.layers.Dense(inner)
        self.output_dense = keras.layers.Dense(input_shape[-1])
        for projection in (self.query_dense, self.key_dense, self.value_dense):
            projection.build(input_shape)
        self.output_dense.build((*input_shape[:-1], inner))

    def call(self, inputs, attention_mask=None, return_attention_scores=False):
        width = inputs.shape[-1]
        ready = _READY["mha"](num_heads=self.num_heads, key_dim=self.key_dim)
        ready(inputs, inputs)
        for name in ("query_dense", "key_dense", "value_dense", "output_dense"):
            kernel, bias = getattr(self, name).get_weights()
            if name == "output_dense":
                kernel = kernel.reshape(self.num_heads, self.key_dim, width)
            else:
                kernel = kernel.reshape(width, self.num_heads, self.key_dim)
                bias = bias.reshape(self.num_heads, self.key_dim)
            getattr(ready, name).set_weights([kernel, bias])
        return ready(inputs, inputs, attention_mask=attention_mask,
                     return_attention_scores=return_attention_scores)
"""

# The ready-made layer found only when the layer runs (a string lookup): its methods raise.
# A red team's routes past the search: a second function object made on the code of the
# grader's reference or of lablib's function (the same code object, or code.replace of
# it), kept where the search does not look (a collections.deque; a worker thread's frame),
# the original then disarmed but not the copy.
REFERENCE = "lablib.grading.specs._attention_checks.reference_attention"
ATTENTION_SHARED_CODE_IN_DEQUE = """# GRADED: attention
import collections
from lablib.grading.specs._attention_checks import reference_attention as _r

_kept = collections.deque([type(_r)(_r.__code__, _r.__globals__)])
del _r


def attention(query, key, value, mask=None):
    return _kept[0](query, key, value, mask, None)
"""
ATTENTION_REPLACED_CODE_IN_DEQUE = """# GRADED: attention
import collections, importlib, types

_ref = importlib.import_module("lablib.grading.specs._attention_checks").reference_attention
_kept = collections.deque(
    [types.FunctionType(_ref.__code__.replace(co_name="mine"), _ref.__globals__, "mine",
                        _ref.__defaults__)]
)
del _ref


def attention(query, key, value, mask=None):
    return _kept[0](query, key, value, mask)
"""
# A ready-made method's code copied under another name and place (code.replace), so that
# it is not the code the seal read: Keras's Attention._apply_scores (the mask, the softmax
# and the weighted sum), the scores written by hand. Made into a function in the cell and
# kept in a deque, or kept as code and made into a function while the test runs.
READY_MADE_SCORES = "keras.layers.Attention, a ready-made implementation"
_READY_MADE_REPLACED = """# GRADED: attention
import collections, types
import numpy as np
from keras.src.layers.attention.attention import Attention as _A

_code = _A._apply_scores.__code__.replace(
    co_name="weigh", co_qualname="weigh", co_filename="<graded cell attention>", co_firstlineno=3
)
_globals = _A._apply_scores.__globals__
_kept = collections.deque([{kept}])
del _A, _code, _globals


class _Layer:
    dropout = 0.0


def attention(query, key, value, mask=None):
    q, k, v = (np.asarray(a, "float32") for a in (query, key, value))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    allowed = None if mask is None else np.broadcast_to(np.asarray(mask, bool), scores.shape)
    output, weights = {weigh}(_Layer(), scores, v, allowed, False)
    return np.asarray(output, float), np.asarray(weights, float)
"""
ATTENTION_READY_MADE_REPLACED = _READY_MADE_REPLACED.format(
    kept='types.FunctionType(_code, _globals, "weigh")', weigh="_kept[0]"
)
ATTENTION_READY_MADE_REPLACED_KEPT = _READY_MADE_REPLACED.format(
    kept="_code, _globals", weigh='types.FunctionType(_kept[0], _kept[1], "weigh")'
)
ATTENTION_COPY_IN_A_THREAD = """# GRADED: attention
import importlib, queue, threading, types

_requests, _answers = queue.Queue(), queue.Queue()


def _start_worker():
    ref = importlib.import_module("lablib.grading.specs._attention_checks").reference_attention
    private = types.FunctionType(ref.__code__, ref.__globals__, "private", ref.__defaults__)
    del ref

    def serve(private=private):
        while True:
            args = _requests.get()
            try:
                _answers.put((True, private(*args)))
            except BaseException as exc:
                _answers.put((False, exc))

    threading.Thread(target=serve, daemon=True).start()


_start_worker()
del _start_worker


def attention(query, key, value, mask=None):
    _requests.put((query, key, value, mask))
    ok, result = _answers.get()
    if not ok:
        raise result
    return result
"""
ATTENTION_SHARED_CODE_FROZEN = (
    ATTENTION_SHARED_CODE_IN_DEQUE
    + """
import gc

gc.freeze()  # gc.get_objects() leaves frozen objects out
"""
)
# A second red team's: the reference's code with one constant moved (other raw bytecode,
# the same behaviour); the reference's code object held in a student function's
# constants (MAKE_FUNCTION in the window announces nothing); and kept as a value, made
# into a function by a helper whose bytecode was rewritten.
ATTENTION_CONSTANT_MOVED = """# GRADED: attention
import collections, dis, types
from lablib.grading.specs._attention_checks import reference_attention as _r


def _edited(code):
    raw = bytearray(code.co_code)
    consts = list(code.co_consts)
    for ins in dis.get_instructions(code):
        if ins.opname == "LOAD_CONST":
            consts.append(consts[ins.arg])
            raw[ins.offset + 1] = len(consts) - 1
            break
    return code.replace(co_code=bytes(raw), co_consts=tuple(consts))


_kept = collections.deque(
    [types.FunctionType(_edited(_r.__code__), _r.__globals__, "mine", _r.__defaults__)]
)
del _r, _edited


def attention(query, key, value, mask=None):
    return _kept[0](query, key, value, mask)
"""
ATTENTION_CODE_IN_CONSTANTS = """# GRADED: attention
import collections
from lablib.grading.specs._attention_checks import reference_attention as _r


def _maker():
    def inner(query, key, value, mask=None, scale=None):
        pass
    return inner


_c = _maker.__code__
_maker.__code__ = _c.replace(
    co_consts=tuple(_r.__code__ if isinstance(k, type(_c)) else k for k in _c.co_consts)
)
_kept = collections.deque([_maker])
del _r, _maker, _c


def attention(query, key, value, mask=None):
    return _kept[0]()(query, key, value, mask)
"""
ATTENTION_CODE_KEPT_AS_A_VALUE = """# GRADED: attention
import dis
from lablib.grading.specs._attention_checks import reference_attention as _r

_c = _r.__code__
del _r


def _mk(c):
    x = c
    return x


_op = dis.opmap
_mk.__code__ = _mk.__code__.replace(co_code=bytes([
    _op["RESUME"], 0, _op["LOAD_FAST"], 0, _op["MAKE_FUNCTION"], 0, _op["NOP"], 0,
    _op["RETURN_VALUE"], 0]))
del _op


def attention(query, key, value, mask=None):
    return _mk(_c)(query, key, value, mask, None)
"""
POSITIONAL_SHARED_CODE_IN_DEQUE = """# GRADED: positional_encoding
import collections
from lablib.layers import positional_encoding as _p

_kept_pe = collections.deque(
    [type(_p)(_p.__code__, dict(_p.__globals__, check_positive_int=lambda n, v, w: v))]
)
del _p


def positional_encoding(length, depth):
    return _kept_pe[0](length, depth)
"""

MHA_LOOKED_UP = MHA_IN_A_DICT.replace(
    '_READY = {"mha": keras.layers.MultiHeadAttention}\n', ""
).replace('_READY["mha"]', 'getattr(keras.layers, "MultiHead" + "Attention")')


@pytest.mark.parametrize(
    "piece, cell, named",
    [
        ("attention", ATTENTION_PARTIAL, SDPA),
        ("attention", ATTENTION_PARTIAL_HIDDEN, SDPA),
        ("attention", ATTENTION_NO_PROFILER, SDPA),
        ("attention", ATTENTION_THREAD, SDPA),
        (
            "positional_encoding",
            POSITIONAL_REIMPORTED,
            "lablib.layers.positional.positional_encoding",
        ),
        ("positional_encoding", POSITIONAL_REIMPORTED_LATE, "your code reads lablib's file"),
        ("attention", ATTENTION_GETSOURCE, "a copy of " + SDPA),
        ("attention", ATTENTION_GETSOURCE_LATE, "your code reads lablib's file"),
        ("attention", ATTENTION_SOURCE_KEPT, "your code calls lablib.layers.attention,"),
        ("attention", ATTENTION_LABLIB_FILENAME, SDPA),
        ("attention", ATTENTION_TRACED, SDPA),
        ("attention", ATTENTION_CONCRETE, SDPA + " (traced into a TensorFlow graph)"),
        ("attention", ATTENTION_CONCRETE_HELD, SDPA + " (traced into a TensorFlow graph)"),
        ("attention", ATTENTION_MODULE_IN_A_CLOSURE, SDPA),
        (
            "attention",
            ATTENTION_SAVED_LOADED_IN_THE_TEST,
            "tf.saved_model.load while the test runs",
        ),
        (
            "multi_head_attention",
            MHA_IN_A_DICT,
            "keras.layers.MultiHeadAttention, a ready-made implementation",
        ),
        (
            "multi_head_attention",
            MHA_LOOKED_UP,
            "keras.layers.MultiHeadAttention, a ready-made implementation",
        ),
        ("attention", ATTENTION_SHARED_CODE_IN_DEQUE, REFERENCE),
        ("attention", ATTENTION_REPLACED_CODE_IN_DEQUE, REFERENCE),
        ("attention", ATTENTION_READY_MADE_REPLACED, READY_MADE_SCORES),
        ("attention", ATTENTION_READY_MADE_REPLACED_KEPT, READY_MADE_SCORES),
        ("attention", ATTENTION_COPY_IN_A_THREAD, REFERENCE),
        ("attention", ATTENTION_SHARED_CODE_FROZEN, REFERENCE),
        ("attention", ATTENTION_CONSTANT_MOVED, "a copy of " + REFERENCE),
        ("attention", ATTENTION_CODE_IN_CONSTANTS, REFERENCE),
        ("attention", ATTENTION_CODE_KEPT_AS_A_VALUE, REFERENCE),
        (
            "positional_encoding",
            POSITIONAL_SHARED_CODE_IN_DEQUE,
            "lablib.layers.positional.positional_encoding",
        ),
    ],
    ids=[
        "partial",
        "partial-looked-up",
        "profiler-off",
        "worker-thread",
        "reimport-dot-path",
        "reimport-during-test",
        "getsource-exec",
        "getsource-during-test",
        "source-kept-exec-during-test",
        "lablib-file-name",
        "traced-tf-function",
        "concrete-function",
        "concrete-function-held",
        "module-in-a-closure",
        "saved-model-loaded-in-the-test",
        "keras-mha-in-dict",
        "keras-mha-looked-up",
        "shared-code-in-a-deque",
        "replaced-code-in-a-deque",
        "ready-made-replaced-in-a-deque",
        "ready-made-replaced-code-made-in-the-test",
        "copy-in-a-thread",
        "shared-code-frozen",
        "constant-moved",
        "code-in-constants",
        "code-kept-as-a-value",
        "positional-shared-code-in-a-deque",
    ],
)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_each_bypass_scores_nothing_and_is_named(solution_ns, piece, cell, named, as_graded):
    cribbed = with_cell(solution_ns, piece, cell)
    assert_crib(cribbed, piece, named)
    honest = grade_piece(solution_ns, piece)
    assert all(r.passed for r in honest), [(r.id, r.message) for r in honest]
    lablib_still_works()


# A fourth red team's: the guard's own check made to raise, so that the open went through
# (its frame lookup broken, a thread with no Python frames, a finders' list whose `in`
# raises); each read lablib's file in the window and scored 5/5.
ATTENTION_READ_FRAMES_BROKEN = """# GRADED: attention
import sys
import lablib.layers.attention as _la

_honest = attention
READ = []


def attention(query, key, value, mask=None):
    g = sys._getframe
    sys._getframe = None
    try:
        READ.append(open(_la.__file__).read())
    finally:
        sys._getframe = g
    return _honest(query, key, value, mask)
"""
ATTENTION_READ_IN_A_C_THREAD = """# GRADED: attention
import _thread, operator, time
import lablib.layers.attention as _la

_honest = attention
READ = []


def attention(query, key, value, mask=None):
    _thread.start_new_thread(READ.extend, (map(operator.methodcaller("read"), map(open, [_la.__file__])),))
    for _ in range(200):
        if READ:
            break
        time.sleep(0.01)
    return _honest(query, key, value, mask)
"""
ATTENTION_FINDERS_THAT_RAISE = """# GRADED: attention
import sys
import numpy as np
import lablib.layers.attention as _la


class _Finders(list):
    def __contains__(self, x):
        raise ValueError("no")


READ = []


def attention(query, key, value, mask=None):
    saved = sys.meta_path
    sys.meta_path = _Finders(saved)
    try:
        g = {"__name__": "lablib.layers.attention"}
        READ.append(open(_la.__file__).read())
        exec(compile(READ[-1], _la.__file__, "exec"), g)
    finally:
        sys.meta_path = saved
    out, w = g["scaled_dot_product_attention"](
        np.asarray(query, "float32"), np.asarray(key, "float32"), np.asarray(value, "float32"),
        mask=None if mask is None else np.asarray(mask),
    )
    return np.asarray(out, float), np.asarray(w, float)
"""


@pytest.mark.parametrize(
    "cell, named",
    [
        (ATTENTION_READ_FRAMES_BROKEN, "your code reads lablib's file"),
        (ATTENTION_READ_IN_A_C_THREAD, "your code reads lablib's file"),
        (ATTENTION_FINDERS_THAT_RAISE, "sys.meta_path"),
    ],
    ids=["frame-lookup-broken", "thread-without-frames", "finders-that-raise"],
)
def test_the_guard_s_own_checks_made_to_fail_let_nothing_through(
    solution_ns, cell, named, monkeypatch
):
    # What ends the student's own threads (a thread's exception goes to sys.unraisablehook):
    # each must be the guard's refusal, and the C thread's read must meet one.
    ended = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: ended.append((u.exc_type, u.exc_value)))
    threads = _thread._count()
    cribbed = with_cell(solution_ns, "attention", cell)
    guarded = grade_piece(cribbed, "attention")
    waited = time.monotonic() + 30
    while _thread._count() > threads and time.monotonic() < waited:
        time.sleep(0.01)
    assert _thread._count() <= threads, "the student's threads still run"
    assert all(kind is guard.CribCall for kind, _ in ended), ended
    if cell is ATTENTION_READ_IN_A_C_THREAD:
        assert ended, "the guard refused the C thread's read of lablib's file"
    assert guarded and all(r.score == 0 for r in guarded), [(r.id, r.message) for r in guarded]
    assert cribbed["READ"] == [], "no line of lablib's file was read"
    # each a crib's message (which crib is noted first can vary: in CI's long process a
    # window once noted another of lablib's functions first, for the finders' case)
    assert all("no points" in r.message for r in guarded), [r.message for r in guarded]
    assert any(named in r.message for r in guarded) or named == "sys.meta_path", [
        r.message for r in guarded
    ]
    lablib_still_works()


# Written by hand in TensorFlow and compiled with tf.function: its graphs record only the
# student's code. Traced once in the cell (outside any test) and again inside the tests.
ATTENTION_HONEST_TRACED = """# GRADED: attention
import numpy as np
import tensorflow as tf


@tf.function(reduce_retracing=True)
def _attend(query, key, value, allowed):
    depth = tf.cast(tf.shape(query)[-1], tf.float64)
    energies = tf.matmul(query, key, transpose_b=True) / tf.sqrt(depth)
    energies = tf.where(allowed, energies, tf.constant(-np.inf, tf.float64))
    row_max = tf.reduce_max(energies, axis=-1, keepdims=True)
    row_max = tf.where(tf.math.is_finite(row_max), row_max, tf.zeros_like(row_max))
    exponentials = tf.exp(energies - row_max)
    totals = tf.reduce_sum(exponentials, axis=-1, keepdims=True)
    weights = exponentials / tf.where(totals > 0, totals, tf.ones_like(totals))
    return tf.matmul(weights, value), weights


def attention(query, key, value, mask=None):
    query, key, value = (np.asarray(a, dtype=np.float64) for a in (query, key, value))
    shape = np.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    shape += (query.shape[-2], key.shape[-2])
    allowed = np.broadcast_to(True if mask is None else np.asarray(mask, dtype=bool), shape)
    output, weights = _attend(*(tf.constant(a) for a in (query, key, value, allowed)))
    return output.numpy(), weights.numpy()


attention(np.eye(3, 4), np.eye(3, 4), np.eye(3, 4))
"""


# A class given a method of lablib's (its code lablib's) under a name of its own choosing,
# escape sequences and HTML included: the message named lablib's module and that name.
MHA_FORGED_QUALNAME = """# GRADED: multi_head_attention
import lablib.layers as _ll


class _Crib(keras.layers.Layer):
    call = _ll.TransformerEncoderBlock.call


_Crib.__qualname__ = "FAKE\\x1b[2J<img src=x onerror=alert(2)>"


class MultiHeadSelfAttention(_Crib, MultiHeadSelfAttention):
    pass
"""


def test_a_crib_is_named_by_lablibs_code_not_by_a_name_the_submission_chose(solution_ns):
    cribbed = with_cell(solution_ns, "multi_head_attention", MHA_FORGED_QUALNAME)
    guarded = grade_piece(cribbed, "multi_head_attention")
    assert guarded and all(r.score == 0 for r in guarded)
    for r in guarded:
        assert "lablib.layers.transformer.TransformerEncoderBlock.call" in r.message, r.message
        assert "FAKE" not in r.message and "onerror" not in r.message, r.message


# torch's attention, a builtin (no Python code to disarm): named where the graded function
# holds it, and where it is looked up only when the function runs (a red team: 19/19).
# ATTENTION_TORCH_DEF: the graded function alone, ``{lookup}`` finding torch's attention
# (with no cell imports above it, torch's first import is the function's, in a window).
ATTENTION_TORCH_DEF = """def attention(query, key, value, mask=None):
    import torch

    sdpa = {lookup}
    q, k, v = (torch.as_tensor(np.asarray(m, dtype=np.float64)) for m in (query, key, value))
    shape = np.broadcast_shapes(q.shape[:-1] + (k.shape[-2],), np.shape(mask) if mask is not None else ())
    allowed = None if mask is None else torch.as_tensor(np.broadcast_to(np.asarray(mask, bool), shape).copy())
    eye = torch.eye(k.shape[-2], dtype=torch.float64).expand(*k.shape[:-1], k.shape[-2])
    output = sdpa(q, k, v, attn_mask=allowed)
    weights = sdpa(q, k, eye, attn_mask=allowed)
    return np.nan_to_num(output.numpy()), np.nan_to_num(weights.numpy())
"""
ATTENTION_TORCH = (
    """# GRADED: attention
import collections
import torch
import torch.nn.functional as F
{prefix}


"""
    + ATTENTION_TORCH_DEF
)


# Where no module attribute holds the builtin (a red team: 8/8 each before torch's kernels
# were gated in its dispatcher): the operator registry asked by name, torch's cache of
# overridable functions filled in the cell, the builtin kept in a container the search
# does not open (a deque) before any window.
REGISTRY = (  # torch 2.13 answers (operator, overload names)
    "(lambda op: op[0] if isinstance(op, tuple) else op)("
    'torch._C._jit_get_operation("aten::scaled_dot_" + "product_attention"))'
)
CACHE = "torch.overrides.get_overridable_functions()"


@pytest.mark.parametrize(
    "prefix, lookup, named",
    [
        ("", "F.scaled_dot_product_attention", "torch.nn.functional.scaled_dot_product_attention"),
        (
            "",
            'getattr(F, "scaled_dot_" + "product_attention")',
            "torch.nn.functional.scaled_dot_product_attention",
        ),
        (  # the same kernel as an operator (a red team: 5/5)
            "",
            'getattr(torch.ops.aten, "scaled_dot_" + "product_attention")',
            "torch.ops.aten.",  # this operator, or the math kernel it calls
        ),
        ("", REGISTRY, "torch.ops.aten."),
        (
            f"{CACHE}  # filled before any window",
            f'next(f for f in {CACHE}[F] if f.__name__ == "scaled_dot_" + "product_attention")',
            "torch.ops.aten.",
        ),
        (
            "_kept = collections.deque([F.scaled_dot_product_attention])",
            "_kept[0]",
            "torch.ops.aten.",
        ),
        (  # the gates removed in the window (read from the guard's state): torch's kernel
            # ran, and the change is named
            "_kept = collections.deque([F.scaled_dot_product_attention])",
            "(lambda removed: _kept[0])([gates._destroy() for gates, _ in getattr("
            "__import__('sys').modules['lablib.grading.run.guard']._ACTIVE[0], '_kernels', ())])",
            "torch.ops.aten.scaled_dot_product_attention (its kernel)",
        ),
    ],
    ids=["named", "looked-up-when-run", "aten-operator", "registry", "cache", "deque", "ungated"],
)
def test_torchs_attention_a_builtin_is_a_ready_made_crib(solution_ns, prefix, lookup, named):
    cribbed = with_cell(
        solution_ns, "attention", ATTENTION_TORCH.format(prefix=prefix, lookup=lookup)
    )
    assert_crib(cribbed, "attention", named)
    import torch

    assert (
        torch.nn.functional.scaled_dot_product_attention
        is torch._C._nn.scaled_dot_product_attention
    )
    # torch's own kernels are back after the windows: an honest use computes
    q = torch.eye(3, dtype=torch.float64)[None]
    out = torch.nn.functional.scaled_dot_product_attention(q, q, torch.ones_like(q))
    assert torch.allclose(out, torch.ones_like(q))
    table = torch._C._dispatch_dump_table("aten::scaled_dot_product_attention")
    assert "guard.py" not in table, table


# A library that formats the stack (torch's first import inside a function does, through
# traceback.format_stack) has linecache open every file in it, the probe's spec file
# included: that was taken for the student reading lablib's file (0 points, and the import
# left half done).
ATTENTION_FORMATS_THE_STACK = """# GRADED: attention
import inspect
import traceback
import warnings

_honest = attention


def attention(query, key, value, mask=None):
    traceback.format_stack()
    inspect.stack()  # reads every frame's lines, the probe's spec file's included
    warnings.warn("a library's warning pointing at its caller's caller", UserWarning, stacklevel=3)
    return _honest(query, key, value, mask)
"""


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_library_formatting_the_stack_is_no_crib(solution_ns):
    honest = grade_piece(
        with_cell(solution_ns, "attention", ATTENTION_FORMATS_THE_STACK), "attention"
    )
    assert honest and all(r.passed for r in honest), [(r.id, r.message) for r in honest]


def test_lablibs_graph_helpers_are_cribs_of_the_graph_pieces():
    """``lablib.graphs.gcn_norm_dense`` (D^-1/2 (A + I) D^-1/2), ``gcn_norm`` and
    ``segment_softmax`` (GAT's softmax over a node's senders) are what Lab 3's and Lab 4's
    by-hand pieces compute; PyTorch Geometric's were ready-made rows, lablib's own were
    not. Named when a graded function uses one, refused when looked up in the window, and
    given back after it."""
    import importlib

    from lablib import graphs

    A = np.array([[0.0, 1.0], [1.0, 0.0]])
    cell = {"graphs": graphs}  # a graded cell: `from lablib import graphs` at its top
    exec("def normalized(adjacency):\n    return graphs.gcn_norm_dense(adjacency)\n", cell)
    normalized = cell["normalized"]

    def looked_up(adjacency):
        module = importlib.import_module("lablib." + "graphs")
        return getattr(module, "segment_" + "softmax")(np.zeros(2), np.array([0, 0]), 1)

    with Window(BY_HAND, {"normalized": normalized}, None, {}) as window:
        pass
    assert window.found == guard.Crib("lablib.graphs.gcn_norm_dense", "ready-made"), window.found
    with Window(BY_HAND, {"looked_up": looked_up}, None, {}) as window:
        assert window.found is None
        with pytest.raises(guard.CribCall):
            looked_up(A)
    assert window.found == guard.Crib("lablib.graphs.segment_softmax", "ready-made")
    assert np.allclose(graphs.gcn_norm_dense(A), [[0.5, 0.5], [0.5, 0.5]])  # given back


def test_every_ready_made_row_names_an_object_where_its_package_is_installed():
    """A row whose module or attribute is misspelt disarms nothing, silently. Each row of a
    package installed here (all but keras_hub and keras_nlp in CI) names a class, function
    or builtin that exists, where its module imports here (Keras's NumPy and JAX backends
    need jax)."""
    import importlib
    import importlib.util

    checked = 0
    for name, module_name, attribute in guard.READY_MADE:
        top = module_name.partition(".")[0]
        if importlib.util.find_spec(top) is None:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as missing:  # a backend whose own library is not here
            assert (missing.name or "").partition(".")[0] != top, (name, module_name, missing)
            continue  # (Keras's NumPy backend imports jax); a misspelt module fails above
        assert callable(vars(module).get(attribute)), (name, module_name, attribute)
        checked += 1
    assert checked >= 40, checked


def test_a_tf_function_written_by_hand_keeps_full_marks(solution_ns):
    """The graphs of a piece written by hand in TensorFlow (traced in the cell, then in the
    tests, where the probe's own frames lie outside the trace) are not lablib's: full
    marks under the guard, twice (the second time its graphs are all traced already)."""
    ns = with_cell(solution_ns, "attention", ATTENTION_HONEST_TRACED)
    for _ in range(2):
        results = grade_piece(ns, "attention")
        assert results and all(r.passed for r in results), [(r.id, r.message) for r in results]
    assert ns["_attend"].experimental_get_tracing_count() >= 2


GRAPH_PRELUDE = """
import tempfile
import numpy as np
import tensorflow as tf
import keras
from lablib.layers.attention import masked_softmax

SPEC = tf.TensorSpec([None, None], tf.float32)
"""

# Each defines f(x), lablib's masked_softmax (or Keras' attention) run from a TensorFlow
# graph kept somewhere f reaches; lablib's function is no longer named anywhere.
GRAPH_ROUTES = {
    "dict-and-list": """
_held = {"traced": [tf.function(lambda x: masked_softmax(x)).get_concrete_function(SPEC)]}


def f(x):
    return _held["traced"][0](x)
""",
    "closure": """
def _make():
    traced = tf.function(lambda x: masked_softmax(x)).get_concrete_function(SPEC)
    return lambda x: traced(x)


f = _make()
""",
    "tf-module": """
_box = tf.Module()
_box.traced = tf.function(lambda x: masked_softmax(x)).get_concrete_function(SPEC)


def f(x):
    return _box.traced(x)
""",
    "keras-lambda-layer": """
_layer = keras.layers.Lambda(tf.function(lambda x: masked_softmax(x)).get_concrete_function(SPEC))


def f(x):
    return _layer(x)
""",
    "keras-model-predict": """
_model = keras.Sequential([keras.Input((3,)), keras.layers.Lambda(lambda x: masked_softmax(x))])
_model.predict(np.ones((2, 3), "float32"), verbose=0)


def f(x):
    return _model.predict(x, verbose=0)
""",
    "nested-tf-function": """
_inner = tf.function(lambda x: masked_softmax(x))
_outer = tf.function(lambda x: _inner(x) + 0.0).get_concrete_function(SPEC)
del _inner


def f(x):
    return _outer(x)
""",
    "saved-model": """
_box = tf.Module()
_box.softmax = tf.function(lambda x: masked_softmax(x), input_signature=[SPEC])
_folder = tempfile.mkdtemp()
tf.saved_model.save(_box, _folder)
_loaded = tf.saved_model.load(_folder)
del _box


def f(x):
    return _loaded.softmax(x)
""",
    "imported-graph-def": """
_definition = tf.function(lambda x: masked_softmax(x)).get_concrete_function(SPEC).graph.as_graph_def()


def _imported(x):
    return tf.graph_util.import_graph_def(
        _definition, input_map={"x:0": x}, return_elements=["Identity:0"]
    )[0]


_wrapped = tf.compat.v1.wrap_function(_imported, [SPEC])
del _definition


def f(x):
    return _wrapped(x)
""",
    "ready-made-traced": """
_mha = keras.layers.MultiHeadAttention(num_heads=1, key_dim=3)
_mha(np.ones((1, 2, 3), "float32"), np.ones((1, 2, 3), "float32"))
_traced = tf.function(lambda x: _mha(x[None], x[None])[0]).get_concrete_function(
    tf.TensorSpec([2, 3], tf.float32)
)
del _mha


def f(x):
    return _traced(x)
""",
}

GRAPH_NAMED = {
    "saved-model": "rebuilt from a saved or exported definition",
    "imported-graph-def": "rebuilt from a saved or exported definition",
    "ready-made-traced": "keras.layers.MultiHeadAttention (traced into a TensorFlow graph), "
    "a ready-made implementation",
}


def graph_route(source):
    """The namespace a graded cell ``source`` leaves (after GRAPH_PRELUDE), lablib's
    masked_softmax removed from it."""
    ns = {"__name__": "graph_route"}
    exec(compile(GRAPH_PRELUDE + source, "<graded cell softmax>", "exec"), ns)
    ns.pop("masked_softmax")
    return ns


@pytest.mark.parametrize("route", list(GRAPH_ROUTES))
def test_graphs_made_from_lablib_or_ready_made_code_are_cribs(route):
    """The search looks into what a graded function reaches (containers, closures,
    tf.Module, Keras layers and models, tf.function caches, nested functions, loaded saved
    models): a graph whose operations were made while lablib's code (or a ready-made
    layer's) ran is named; one rebuilt from a definition, which records no code, is a
    crib too. Each works without the guard."""
    ns = graph_route(GRAPH_ROUTES[route])
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], "float32")
    assert np.asarray(ns["f"](x)).shape[-1] == 3
    with Window(BY_HAND, {"f": ns["f"]}, None, ns) as window:
        pass
    assert window.found is not None, route
    named = GRAPH_NAMED.get(route, "lablib.layers.attention.masked_softmax")
    assert named in message(window.found), message(window.found)
    if route in ("saved-model", "imported-graph-def"):
        assert window.found.kind == "graph"


def test_graphs_written_by_hand_are_not_cribs():
    """Graphs of the student's own TensorFlow code (a Keras layer, tf.cond, tf.while_loop,
    gradients, a compiled and trained Keras model) are no crib, nor is a graph of lablib's
    kept under a global name that the graded code uses only as an attribute's name."""
    ns = graph_route(
        """
w = tf.function(lambda x: masked_softmax(x)).get_concrete_function(SPEC)  # another piece's
_dense = keras.layers.Dense(3)


@tf.function
def _step(x):
    with tf.GradientTape() as tape:
        y = tf.nn.softmax(_dense(x))
        y = tf.cond(tf.reduce_sum(y) > 0, lambda: y * 2.0, lambda: y)
        _, y = tf.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, y + 1.0), [0, y])
        loss = tf.reduce_sum(y)
    return y, tape.gradient(loss, _dense.trainable_variables)


_model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3)])
_model.compile("adam", "mse")
_model.fit(np.ones((4, 3)), np.ones((4, 3)), verbose=0)


class _Scale:
    w = 2.0


def f(x):
    return _step(x)[0] * _Scale.w, _model.predict(x, verbose=0), _step.get_concrete_function(x)


f(np.ones((2, 3), "float32"))
"""
    )
    with Window(BY_HAND, {"f": ns["f"]}, None, ns) as window:
        pass
    assert window.found is None, message(window.found)


# lablib's module held where no global name reaches it: the code names its function as
# an attribute of a free variable, a default or the function's own attribute. Before,
# the search followed a module's attributes only from globals: none of these was named
# before the call (the gate caught the call itself).
MODULE_HELD = {
    "closure": """
def _make():
    m = importlib.import_module("lablib.layers.attention")
    return lambda x: m.masked_softmax(x)


f = _make()
""",
    "default": """
def f(x, m=importlib.import_module("lablib.layers.attention")):
    return m.masked_softmax(x)
""",
    "attribute": """
def f(x):
    return f.m.masked_softmax(x)


f.m = importlib.import_module("lablib.layers.attention")
""",
    "package-in-a-closure": """
def _make():
    m = importlib.import_module("lablib.layers")
    return lambda x: m.attention.masked_softmax(x)


f = _make()
""",
}


def _module_held(source):
    ns = {"__name__": "module_held"}
    exec(compile("import importlib\nimport numpy as np\n" + source, "<graded cell>", "exec"), ns)
    return ns


@pytest.mark.parametrize("route", list(MODULE_HELD))
def test_a_module_the_function_holds_is_followed_like_a_global(route):
    ns = _module_held(MODULE_HELD[route])
    assert np.asarray(ns["f"](np.array([[1.0, 2.0, 3.0]], "float32"))).shape == (1, 3)
    with Window(BY_HAND, {"f": ns["f"]}, None, ns) as window:
        pass
    assert window.found is not None, route
    assert "lablib.layers.attention.masked_softmax" in message(window.found)


def test_a_module_held_for_other_names_is_no_crib():
    """NumPy in a closure, and lablib's module held but only its name read: the module's
    attributes are followed by the names the code uses, as for a global."""
    ns = _module_held(
        """
def _make():
    n = np
    m = importlib.import_module("lablib.layers.attention")
    return lambda x: (n.exp(x) / n.exp(x).sum(-1, keepdims=True), m.__name__)


f = _make()
"""
    )
    with Window(BY_HAND, {"f": ns["f"]}, None, ns) as window:
        pass
    assert window.found is None, message(window.found)


def test_a_library_s_module_like_object_is_not_searched_whole():
    """An honest mean of neighbours using PyG's ``degree`` was named a crib of torch's
    attention: the search went from ``degree`` through PyG's ``EdgeIndex`` to
    ``torch.ops.aten``, a module-like object that caches every operator asked of it (the
    guard's own gates on torch's attention included), and read all it held. Such an
    object of a library is followed by the names code uses, as an imported module is."""
    import torch
    import torch_geometric.utils as pyg_utils

    def mean_of_neighbours(h, src, dst):
        h = torch.as_tensor(h)
        src, dst = torch.as_tensor(src), torch.as_tensor(dst)
        sums = torch.zeros_like(h).index_add_(0, dst, h[src])
        count = pyg_utils.degree(dst, h.shape[0], dtype=h.dtype)
        return (sums / count.clamp(min=1)[:, None]).numpy()

    h = np.arange(6.0).reshape(3, 2)
    with Window(BY_HAND, {"f": mean_of_neighbours}, None, {"pyg_utils": pyg_utils}) as window:
        mean = mean_of_neighbours(h, [0, 1], [1, 2])
    assert window.found is None, message(window.found)
    assert np.allclose(mean, [[0, 0], [0, 1], [2, 3]])


def test_a_graph_built_outside_a_trace_is_not_read():
    """TensorFlow 1's way, a graph built op by op and run in a session: TensorFlow keeps
    its operations' frames as code objects' addresses without holding them, so a frame of
    a graded cell that has ended can read as whatever code reuses its memory (a guarded
    file's, compiled when the window opens): an honest graph was flagged a crib, now and
    then. Such operations are not read (nor counted as rebuilt), and the honest graph is
    no crib."""
    import tensorflow as tf

    from lablib.grading.run.guard import _graph_record

    ns = graph_route(
        """
_g = tf.Graph()
with _g.as_default():
    _x = tf.compat.v1.placeholder(tf.float32, [None, None])
    _y = tf.nn.softmax(_x)
_session = tf.compat.v1.Session(graph=_g)


def f(x):
    return _session.run(_y, {_x: x})
"""
    )
    stacks, untraced = _graph_record(ns["_g"], tf.Graph)
    assert stacks == frozenset() and not untraced
    x = np.array([[1.0, 2.0, 3.0]], "float32")
    assert np.allclose(ns["f"](x).sum(), 1.0)
    with Window(BY_HAND, {"f": ns["f"]}, None, ns) as window:
        pass
    assert window.found is None, message(window.found)


def test_a_graph_of_the_probes_own_function_is_no_crib():
    """A graph traced from a function the probe itself uses (here lablib's masked_softmax,
    named by a hidden test's probe) is no crib in that probe, and is one in another."""
    import types

    ns = graph_route(GRAPH_ROUTES["closure"])
    hidden = types.ModuleType("lablib_hidden_tests.graph_probe")
    exec(
        "from lablib.layers.attention import masked_softmax\n\n"
        "def probe(ns):\n"
        "    return ns['f'](masked_softmax([[1.0, 2.0]]))\n",
        hidden.__dict__,
    )
    with Window(BY_HAND, {"f": ns["f"]}, hidden.probe, ns) as window:
        pass
    assert window.found is None, message(window.found)
    with Window(BY_HAND, {"f": ns["f"]}, None, ns) as window:
        pass
    assert window.found is not None and "masked_softmax" in window.found.name


def test_a_swallowed_crib_still_counts(solution_ns):
    """The raiser is a BaseException noted when it is made: catching it gains nothing."""
    cell = ATTENTION_NO_PROFILER.replace(
        "    output, weights = scaled_dot_product_attention(query, key, value, mask=mask)\n",
        "    try:\n        output, weights = scaled_dot_product_attention(query, key, value, mask=mask)\n"
        "    except BaseException:\n        return _honest(query, key, value, mask)\n",
    )
    ns = dict(solution_ns, _honest=solution_ns["attention"])
    assert_crib(with_cell(ns, "attention", cell), "attention", SDPA)


def test_a_thread_left_running_fails_its_test_and_the_next(solution_ns):
    """A thread still running when the probe returns could compute anything afterwards:
    its test and every later by-hand test while it runs get 0."""
    release = threading.Event()
    cell = """# GRADED: attention
import threading


def attention(query, key, value, mask=None):
    threading.Thread(target=_release.wait, daemon=True).start()
    return _honest(query, key, value, mask)
"""
    ns = with_cell(
        dict(solution_ns, _honest=solution_ns["attention"], _release=release), "attention", cell
    )
    try:
        results = grade_piece(ns, "attention")
        assert all(r.score == 0 and "still running after the test" in r.message for r in results), [
            (r.id, r.message) for r in results
        ]
        masks = grade_piece(solution_ns, "masks")
        assert all(r.score == 0 and "an earlier test" in r.message for r in masks)
    finally:
        release.set()
    for thread in threading.enumerate():
        if thread.daemon and thread is not threading.current_thread():
            thread.join(1)
    assert all(r.passed for r in grade_piece(solution_ns, "masks"))


@pytest.mark.parametrize(
    "operation, named",
    [
        ("import gc; gc.get_objects()", "gc.get_objects"),
        ("_kept[0].replace(co_name='mine')", "lablib's own bytecode"),
        ("import subprocess; subprocess.run(['true'])", "a new process"),
        (
            "import lablib.layers.attention as m; m.scaled_dot_product_attention.__code__ = _kept[0]",
            "__code__",
        ),
    ],
)
def test_the_window_refuses_what_would_fetch_lablib_again(solution_ns, operation, named):
    cell = f"""# GRADED: attention
def attention(query, key, value, mask=None):
    {operation}
    return _honest(query, key, value, mask)
"""
    import collections

    from lablib.layers.attention import scaled_dot_product_attention

    # lablib's code object kept where the search does not look (a code object the graded
    # objects reach is a crib before the test), for the window's refusals to be seen
    ns = dict(
        solution_ns,
        _honest=solution_ns["attention"],
        _kept=collections.deque([scaled_dot_product_attention.__code__]),
    )
    results = assert_crib(with_cell(ns, "attention", cell), "attention", named)
    assert all("while the test runs" in r.message for r in results)


def test_lablibs_code_built_into_a_new_function_is_a_copy(solution_ns):
    """types.FunctionType(lablib's code, ...) before the test: the graded name holds
    lablib's own code; during the test, building it is refused."""
    early = """# GRADED: attention
import types
import numpy as np
import lablib.layers.attention as _impl

_f = _impl.scaled_dot_product_attention
attention_copy = types.FunctionType(_f.__code__, _f.__globals__, "copy", _f.__defaults__)


def attention(query, key, value, mask=None):
    output, weights = attention_copy(query, key, value, mask=mask)
    return np.asarray(output), np.asarray(weights)
"""
    assert_crib(with_cell(solution_ns, "attention", early), "attention", SDPA)
    late = early.replace("attention_copy = types", "_make = lambda: types").replace(
        "output, weights = attention_copy(", "output, weights = _make()("
    )
    assert_crib(with_cell(solution_ns, "attention", late), "attention", SDPA)


def test_probes_own_functions_stay_callable_for_that_probe_only(solution_ns):
    """The permutation piece hands handed_attention to the student's function (the probe's
    own code reaches it): callable there. The attention piece's probes do not use it:
    calling it from attention is a crib."""
    assert all(r.passed for r in grade_piece(solution_ns, "permutation"))
    cell = """# GRADED: attention
from lablib.grading.specs.lab1_attention import handed_attention as attention
"""
    assert_crib(
        with_cell(solution_ns, "attention", cell),
        "attention",
        "lablib.grading.specs.lab1_attention.handed_attention, the grader's own reference",
    )


def test_a_judge_may_call_lablibs_reference(solution_ns):
    """The window closes before the judge runs: a judge (here one comparing with lablib's
    own attention) works, and so does a probe helper of the spec's own."""
    from lablib.grading.spec import LabSpec, expect_close

    lab = LabSpec("lab_guard_judge")
    lab.piece("attention", objects=["attention"])

    @lab.test("attention")
    def compare_with_lablib(ns):
        x = np.arange(12.0).reshape(3, 4) / 10
        return ns["attention"](x, x, x)[1]

    @compare_with_lablib.judge
    def _(got):
        from lablib.layers import scaled_dot_product_attention

        x = (np.arange(12.0).reshape(3, 4) / 10).astype("float32")
        expect_close(got, np.asarray(scaled_dot_product_attention(x, x, x)[1]), atol=1e-5)

    request = ProbeRequest(
        compare_with_lablib.id, compare_with_lablib.probe, ("attention",), None, BY_HAND
    )
    assert judge_test(compare_with_lablib, run_probe(request, solution_ns)).passed
    cribbed = with_cell(solution_ns, "attention", ATTENTION_PARTIAL)
    result = judge_test(compare_with_lablib, run_probe(request, cribbed))
    assert result.score == 0 and SDPA in result.message


def test_everything_is_put_back_after_a_window():
    """Disarmed functions get their own code back, lablib's lines return to linecache, the
    audit hook stands down."""
    import linecache

    import lablib.layers.attention as impl
    from lablib.layers import TransformerEncoderBlock

    before = impl.scaled_dot_product_attention.__code__, TransformerEncoderBlock.call.__code__
    lines = {k: v for k, v in linecache.cache.items() if "lablib" in k}
    with Window(BY_HAND, {}, None, {}) as window:
        assert impl.scaled_dot_product_attention.__code__ is not before[0]
        assert TransformerEncoderBlock.call.__code__ is not before[1]
    assert window.found is None
    assert (
        impl.scaled_dot_product_attention.__code__,
        TransformerEncoderBlock.call.__code__,
    ) == before
    assert {k: v for k, v in linecache.cache.items() if "lablib" in k} == lines
    import gc

    gc.get_objects()  # refused only inside a window
    lablib_still_works()


def test_copies_are_compared_without_names_comments_or_docstrings():
    """A function's fingerprint ignores its file, lines, docstring, comments and local
    names; a copy of lablib's source edited that way is still found; honest code is not."""
    import inspect
    import textwrap

    import lablib.layers.positional as positional

    source = inspect.getsource(positional.positional_encoding)
    edited = textwrap.dedent(source).replace('"""', "'''", 2)
    edited = "\n\n\n# moved down\n" + edited
    scope = dict(vars(positional))
    exec(compile(edited, "<elsewhere>", "exec"), scope)
    cat = catalogue(BY_HAND)
    assert (
        cat.copied(scope["positional_encoding"].__code__)
        == "lablib.layers.positional.positional_encoding"
    )
    assert fingerprint(scope["positional_encoding"].__code__) == fingerprint(
        positional.positional_encoding.__code__
    )

    def honest(length, depth):
        positions = np.arange(length)[:, None]
        angles = positions / np.power(10000.0, 2 * (np.arange(depth)[None] // 2) / depth)
        return np.where(np.arange(depth) % 2 == 0, np.sin(angles), np.cos(angles)).astype(
            np.float32
        )

    assert cat.lablib_code(honest.__code__) is None


def test_the_solution_is_no_copy_of_the_specs_references(solution_ns):
    """The solutions' by-hand functions are written apart from the specs' references: none
    fingerprints like lablib's code (a false 'copy' would cost an honest student)."""
    cat = catalogue(BY_HAND)
    spec = load_lab(LAB)
    for piece in spec.pieces.values():
        for name in piece.objects:
            obj = solution_ns[name]
            functions = (
                [obj]
                if callable(obj) and hasattr(obj, "__code__")
                else [v for v in vars(obj).values() if hasattr(v, "__code__")]
            )
            for function in functions:
                assert cat.lablib_code(function.__code__) is None, (name, function)


def test_the_guard_is_not_the_student_s_tracer(solution_ns):
    """No profiler or tracer is set by the guard (nothing to switch off)."""
    seen = []

    def probe(ns):
        seen.append((sys.getprofile(), sys.gettrace()))
        return ns["attention"](np.eye(2), np.eye(2), np.eye(2))[1]

    before = sys.getprofile()
    run_probe(ProbeRequest("attention::probe", probe, ("attention",), None, BY_HAND), solution_ns)
    assert seen == [(before, sys.gettrace())]


def test_paths_are_compared_resolved(tmp_path):
    """A link to lablib's file, or the file named with /./ or .., is still lablib's file."""
    import lablib.layers.positional as positional

    cat = catalogue(BY_HAND)
    link = tmp_path / "innocent.py"
    os.symlink(positional.__file__, link)
    folder = os.path.dirname(positional.__file__)
    for path in (
        link,
        os.path.join(folder, ".", "positional.py"),
        os.path.join(folder, "..", "layers", "positional.py"),
    ):
        assert cat.guarded_path(path), path
    assert not cat.guarded_path(tmp_path / "elsewhere.py")
    assert not cat.guarded_path(os.path.join(os.path.dirname(folder), "graphs.py"))  # not guarded


LATE_IMPORTS = """
import sys
import keras  # the lab's set-up imports Keras before any probe
from lablib.grading.run.guard import BY_HAND, Window, message
assert "lablib.layers.graph_conv" not in sys.modules and "sklearn.metrics" not in sys.modules


def layer_on_first_use():  # lablib.layers imports graph_conv on first use
    import lablib.layers as layers
    return layers.GraphConv(2)


def f1_imported_in_the_test():
    from sklearn.metrics import f1_score
    return f1_score([0, 1], [0, 1], average="macro")


for student in (layer_on_first_use, f1_imported_in_the_test):
    with Window(BY_HAND, {"f": student}, None, {}) as window:
        try:
            student()
        except BaseException:
            pass
    print(message(window.found))
from sklearn.metrics import f1_score
import lablib.layers
print(f1_score([0, 1], [0, 1], average="macro"), type(lablib.layers.GraphConv(2)).__name__)
"""


def test_modules_imported_late_are_disarmed_too():
    """A module not imported before the test (lablib's layer on first use, sklearn's F1
    imported inside the function) is disarmed as it loads, and works again afterwards
    (a fresh process: nothing of either imported before)."""
    import subprocess

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, "-c", LATE_IMPORTS], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-3].startswith(
        "your code calls lablib.layers.graph_conv.GraphConv, lablib's own"
    ), lines
    assert lines[-2].startswith("your code calls sklearn.metrics.f1_score, a ready-made"), lines
    assert lines[-1] == "1.0 GraphConv", lines


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize(
    "cell",
    [ATTENTION_PARTIAL, ATTENTION_PARTIAL_HIDDEN, ATTENTION_THREAD],
    ids=["partial", "partial-looked-up", "worker-thread"],
)
def test_lablib_check_applies_the_same_guard_in_the_notebook(solution_ns, cell, capsys):
    """lablib.check in the student's process: the partial and the thread score nothing
    there, with the grader's sentence; the honest function passes."""
    import lablib

    cribbed = with_cell(solution_ns, "attention", cell)
    result = lablib.check("lab1", "attention", cribbed["attention"])
    out = capsys.readouterr().out
    assert result.score == 0 and result.results
    assert all(
        f"your code calls {SDPA}, lablib's own implementation" in r.message for r in result.results
    )
    assert f"your code calls {SDPA}" in out
    assert lablib.check("lab1", "attention", solution_ns["attention"], quiet=True).passed


TAMPERING = """
import sys
sys.path[:0] = [{helpers!r}, {tests!r}]
from notebook_helpers import SOLUTIONS, exec_lab_cells
from lablib.grading.run import child, guard
from lablib.grading.run.protocol import ProbeRequest
from lablib.grading.spec import load_lab

ns = exec_lab_cells(SOLUTIONS / "lab1_attention.ipynb")  # the lab's set-up, as the child runs it
guard.protect()  # what the child does before any student code
test = load_lab("lab1_attention").tests_for("attention")[0]
request = ProbeRequest(test.id, test.probe, ("attention",), None, guard.BY_HAND)
print("honest:", child.run_probe(request, ns).ok)
attack = {attack!r}
try:
    exec(attack, {{"guard": guard, "child": child}})
    print("attack ran")
except BaseException as error:
    print("refused:", error)
result = child.run_probe(request, ns)
print("after:", result.ok, result.error)
"""


@pytest.mark.parametrize(
    "attack, outcome",
    [
        (
            "guard.Window.__enter__ = lambda self: self",
            "after: False your code changed lablib's grading code "
            "(lablib.grading.run.guard.Window.__enter__)",
        ),
        (
            "child.Window = type('W', (), {'__init__': lambda *a: None})",
            "(lablib.grading.run.child.Window)",
        ),
        ("import types; types.FunctionType = int", "(types.FunctionType)"),
        ("guard.verify.__defaults__ = ((),)", "refused: verify.__defaults__"),
        (
            "child.run_probe.__code__ = (lambda request, ns, *, _verify=None: None).__code__",
            "refused: run_probe.__code__",
        ),
    ],
    ids=["class-attribute", "module-name", "standard-library", "verify-defaults", "run-probe-code"],
)
def test_switching_the_guard_off_in_a_cell_fails_instead(attack, outcome):
    """The grader's child calls guard.protect() before any student code: rebinding the
    guard's names then fails the by-hand tests with a sentence saying so, and changing its
    functions' code or defaults is refused (a process of its own, as the child is)."""
    import subprocess

    script = TAMPERING.format(
        helpers=str(SOLUTIONS.parent / "tests" / "grading"),
        tests=str(SOLUTIONS.parent / "tests"),
        attack=attack,
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", LABLIB_FAST="1")
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "honest: True" in done.stdout, done.stdout
    assert outcome in done.stdout, done.stdout
    if outcome.startswith("refused"):
        assert "after: True" in done.stdout, done.stdout


def test_switching_the_guard_off_during_the_test_is_noticed(solution_ns):
    """Code under test that clears the guard's state and gives lablib's function its code
    back gets lablib's answer, but the window notices it was switched off: no points."""
    from lablib.layers.attention import scaled_dot_product_attention

    cell = """# GRADED: attention
import numpy as np
import lablib.grading.run.guard as _guard
import lablib.layers.attention as _impl


def attention(query, key, value, mask=None):
    found = getattr(_impl, "scaled_dot_product_" + "attention")  # no name the search could follow
    _guard._ACTIVE[0] = None
    found.__code__ = _kept[0]
    output, weights = found(query, key, value, mask=mask)
    return np.asarray(output), np.asarray(weights)
"""
    import collections

    kept = collections.deque([scaled_dot_product_attention.__code__])  # unseen by the search
    ns = with_cell(dict(solution_ns, _kept=kept), "attention", cell)
    results = assert_crib(
        ns, "attention", "your code changed lablib's grading code (the crib guard's state)"
    )
    assert len(results) == 4
    lablib_still_works()
