"""A malformed reply is the student's failure, judged in bounded time and memory.

Judges run in the grader's own process on the plain values a student's process replied
with, and a forged reply can hold anything a plain value can: None, text, a 0-d or empty
array, an array of another shape or of strings, a dict without its keys, a size declared
far beyond the test's inputs. A judge that indexed such a value before checking it raised
IndexError or TypeError, which the grader reports as ``grader-error`` (its own fault: the
student is told it will be re-graded); one that computed on a declared size worked as
long as the reply asked (Lab 2's encoder blocks on a forged 6,000-token input: 550 MB and
seconds of the grader's, all judging stalled behind one lock).

Every test of every lab is judged here as ``lablib grade`` judges it
(``judge_test(..., in_grader=True)``, then, for a judge that asks for it, as the
sandboxed judging process runs it): top-level malformed replies for all of them, and
(with the solutions' real replies as templates) each value inside a reply replaced by
malformed ones, on the real reply and on a wrong but well-formed one (so that the
judges' diagnoses run too). Each must be an ordinary result (not ``grader-error``) within
a bounded time; a huge declared size must not move the grader's memory. The one text
judges parse, a model's architecture (``model.to_json()``), is sent nested 100,000 deep
and 2 MB long.
"""

import time
import tracemalloc

import numpy as np
import pytest

from lablib.grading.judge.tests import judge_test
from lablib.grading.results import Kind
from lablib.grading.run import ProbeResult
from lablib.grading.spec import load_lab

LABS = ("lab1_attention", "lab2_transformer_reuters", "lab3_gcn_molecules", "lab4_gat")

#: Seconds one judgement may take in the grader (a judge that rebuilds a Keras model runs
#: in a sandboxed process, with the submission's limits: it gets more here).
GRADER_SECONDS, SANDBOX_SECONDS = 3.0, 30.0
#: What judging one reply that declares a huge size may allocate (tracemalloc's peak).
HUGE_BYTES = 32 * 2**20


def _structured():
    return np.zeros(3, dtype=[("a", "f4")])


#: Malformed values: (name, factory).
MALFORMED = [
    ("None", lambda: None),
    ("text", lambda: "oops"),
    ("a huge int", lambda: 10**400),
    ("a bool", lambda: True),
    ("NaN", lambda: float("nan")),
    ("an empty list", lambda: []),
    ("an empty dict", lambda: {}),
    ("a pair of floats", lambda: (0.0, 0.0)),
    ("a 0-d array", lambda: np.zeros(())),
    ("an empty array", lambda: np.zeros(0)),
    ("a one-entry array", lambda: np.zeros(1)),
    ("an array of strings", lambda: np.array(["a", "b"])),
    ("an array of records", _structured),
    ("a complex array", lambda: np.zeros((2, 2), complex)),
    ("a ragged list", lambda: [[1.0], [1.0, 2.0]]),
]
#: Inside a reply, a smaller set (each value of each reply gets every one of these).
LEAF = ("None", "text", "a huge int", "a 0-d array", "an empty array", "an array of records")


def _judged(test, value):
    """``(result, where, seconds)``: ``value`` judged as the grader judges it, in its own
    process, or (a judge that must run sandboxed) as the sandboxed process runs it."""
    start = time.perf_counter()
    result = judge_test(test, ProbeResult(True, value), in_grader=True)
    where = "grader"
    if result is None:
        where = "sandbox"
        result = judge_test(test, ProbeResult(True, value))
    return result, where, time.perf_counter() - start


def _problem(test, what, value, huge=False):
    """What is wrong with judging ``value`` (None when nothing)."""
    if huge:
        tracemalloc.start()
    try:
        result, where, seconds = _judged(test, value)
        peak = tracemalloc.get_traced_memory()[1] if huge else 0
    finally:
        if huge:
            tracemalloc.stop()
    limit = GRADER_SECONDS if where == "grader" else SANDBOX_SECONDS
    if result.kind == Kind.GRADER_ERROR:
        return f"{test.id} <- {what}: grader-error ({result.message[:200]})"
    if seconds > limit:
        return f"{test.id} <- {what}: {seconds:.1f} s in the {where}"
    if huge and where == "grader" and peak > HUGE_BYTES:
        return f"{test.id} <- {what}: the grader allocated {peak / 2**20:.0f} MB"
    return None


@pytest.mark.parametrize("lab_name", LABS)
def test_every_judge_fails_a_malformed_reply_plainly(lab_name):
    lab = load_lab(lab_name)
    problems = []
    for test in lab.tests:
        for name, make in MALFORMED:
            problems.append(_problem(test, name, make()))
        problems.append(_problem(test, "a huge array", np.zeros((60000, 4), np.float32), True))
    problems = [p for p in problems if p]
    assert not problems, "\n".join(problems[:40])


# ------------------------------------------------------------ a scalar from Lab 1's attention


@pytest.mark.parametrize("returned", [np.zeros(1), np.asarray(0.0)])
def test_attention_returning_a_scalar_is_the_students_failure(returned):
    """``attention`` returning ``np.zeros(1), np.zeros(1)`` (or ``0.0, 0.0``): a failure
    naming what came and what each test expected, not a grader error."""
    lab = load_lab("lab1_attention")
    for test in lab.tests_for("attention"):
        result, _, _ = _judged(test, {"output": returned, "weights": returned})
        assert result.kind == Kind.FAILED, (test.name, result.kind, result.message)
        assert result.mistake, result.message
        assert "returned an array" in result.message and "expected the output [" in result.message
    fully = lab.test_by_id("attention::fully_masked_query_is_safe")
    message = _judged(fully, {"output": returned, "weights": returned})[0].message
    assert message.startswith("attention(q [3, 2], k [3, 2], v [3, 2], mask [3, 3]) returned")
    assert "expected the output [3, 2] (one row per query" in message
    assert "weights [3, 3] (one row per query, one column per key)" in message


# ------------------------------------------------------- Lab 2's traces: the sizes declared


def _block_weights(width, heads, key_size, inner, rng):
    shapes = {
        "self_attention/attention_output/kernel": (heads, key_size, width),
        "self_attention/attention_output/bias": (width,),
        "intermediate/kernel": (width, inner),
        "intermediate/bias": (inner,),
        "output/kernel": (inner, width),
        "output/bias": (width,),
    }
    for part in ("query", "key", "value"):
        shapes[f"self_attention/{part}/kernel"] = (width, heads, key_size)
        shapes[f"self_attention/{part}/bias"] = (heads, key_size)
    for norm in ("self_attention_layer_norm", "output_layer_norm"):
        shapes[f"{norm}/gamma"] = shapes[f"{norm}/beta"] = (width,)
    weights = {
        k: (rng.normal(size=s) / np.sqrt(s[0])).astype(np.float32) for k, s in shapes.items()
    }
    for norm in ("self_attention_layer_norm", "output_layer_norm"):
        weights[f"{norm}/gamma"] += 1.0
    return weights


def numpy_trace(batches, width, heads, key_size, inner, blocks=1, classes=4, computed=True):
    """A trace of Lab 2's form, of the given sizes, that the judge's own recomputation
    agrees with (a model computed in NumPy: what a forger who runs the blocks sends), or
    (``computed=False``) holding zeros of the right shapes."""
    from lablib.grading.specs._transformer_checks import numpy_encoder_block

    rng = np.random.default_rng(0)
    table = rng.normal(size=(64, width)).astype(np.float32)
    names = [f"block_{k}" for k in range(blocks)]
    weights = {"embedding": {"embeddings": table}}
    weights.update({n: _block_weights(width, heads, key_size, inner, rng) for n in names})
    kernel = rng.normal(size=(width, classes)).astype(np.float32)
    weights["head"] = {"kernel": kernel, "bias": np.zeros(classes, np.float32)}
    steps = {}
    for batch, ids in batches.items():
        x = table[ids].astype(np.float64)
        step = {"embedding": table[ids], "blocks": []}
        for name in names:
            out = (
                numpy_encoder_block(x, None, weights[name], lambda z: np.maximum(z, 0), 1e-12)
                if computed
                else x
            )
            step["blocks"].append({"input": x, "mask": None, "output": out})
            x = out
        real = (ids != 0)[..., None]
        pooled = (x * real).sum(1) / np.maximum(real.sum(1), 1)
        logits = pooled @ kernel
        step.update(pool_in=x, pool_out=pooled, head_in=pooled, head_out=logits, logits=logits)
        steps[batch] = step
    layers = {
        "embedding": "embedding",
        "blocks": names,
        "head": "head",
        "block_configs": [{"inner_activation": "relu"} for _ in names],
        "block_masked": [False] * blocks,
        "head_activation": "linear",
    }
    return {"layers": layers, "weights": weights, "batches": steps}


def _shapes_reply(trace):
    return {"short": [3, 4], "full": [5, 4], "max_length": [2, 4], "compiled": True, "trace": trace}


def _judged_within_bounds(test, value):
    """(result, seconds, tracemalloc's peak in bytes) of judging ``value`` in the grader."""
    tracemalloc.start()
    try:
        start = time.perf_counter()
        result = judge_test(test, ProbeResult(True, value), in_grader=True)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, seconds, peak


@pytest.fixture(scope="module")
def lab2_shapes():
    from lablib.grading.specs.lab2_transformer_reuters import _shape_batches

    lab = load_lab("lab2_transformer_reuters")
    return lab.test_by_id("build_model::output_shapes_and_compiled"), _shape_batches()


def test_a_trace_of_numpy_blocks_passes(lab2_shapes):
    """The helper's trace is one the judge accepts: what the size checks below refuse
    is refused for its sizes, not its form."""
    test, batches = lab2_shapes
    result = judge_test(
        test, ProbeResult(True, _shapes_reply(numpy_trace(batches, 16, 2, 8, 32, 2)))
    )
    assert result.passed, result.message


@pytest.mark.serial  # timed: run alone (.ci/run's serial pass)
@pytest.mark.parametrize("tokens", [6000, 60000])
def test_a_first_block_input_of_another_length_is_refused_before_any_work(lab2_shapes, tokens):
    """The red team's reply: 1 x 1 x 1 kernels, the first block's input (1, T, 1) whatever
    the ids (the old judge took 4.5 s and 550 MB of the grader's at T = 6,000, tens of GB
    at 60,000, and ended as grader-error)."""
    test, batches = lab2_shapes
    trace = numpy_trace(batches, 1, 1, 1, 1)
    for step in trace["batches"].values():
        step["blocks"][0]["input"] = np.ones((1, tokens, 1), np.float32)
    result, seconds, peak = _judged_within_bounds(test, _shapes_reply(trace))
    assert result.kind == Kind.FAILED, (result.kind, result.message)
    assert (
        "the input of encoder block 0 on batch 'short' (token ids [3, 7]) should be an array "
        f"of numbers of shape (3, 7, 1), got an array of numbers of shape (1, {tokens}, 1)"
    ) in result.message
    assert seconds < 1.0 and peak < HUGE_BYTES, (seconds, peak)


@pytest.mark.parametrize(
    "sizes, words",
    [
        ((2048, 1, 1, 1, 1), "width of 2048"),
        ((16, 2, 8, 32, 40), "has 40 encoder blocks"),
        ((1024, 8, 128, 1024, 1), "million multiply-adds"),
        ((16, 1024, 1, 32, 1), "1024 attention heads"),
    ],
)
@pytest.mark.serial  # timed: run alone (.ci/run's serial pass)
def test_sizes_past_the_bounds_are_refused_before_any_work(sizes, words):
    """Traces of the right form whose sizes go past what the grader recomputes (the
    training test's batch: 48 sequences of 12 tokens): a plain failure that says so,
    before anything is computed."""
    from lablib.grading.specs.lab2_transformer_reuters import _training_batch

    test = load_lab("lab2_transformer_reuters").test_by_id(
        "build_model::learns_and_trains_every_weight"
    )
    trace = numpy_trace({"train": _training_batch()[0]}, *sizes, computed=False)
    reply = {
        "loss_before": 2.0,
        "loss_after": 0.1,
        "names": ["w"] * 10,
        "changes": [1.0] * 10,
        "trace_before": trace,
        "trace_after": trace,
    }
    result, seconds, peak = _judged_within_bounds(test, reply)
    assert result.kind == Kind.FAILED and words in result.message, result.message
    assert seconds < 1.0 and peak < HUGE_BYTES, (seconds, peak)


@pytest.mark.serial  # timed: run alone (.ci/run's serial pass)
def test_the_largest_trace_allowed_is_judged_in_bounded_time_and_memory(lab2_shapes):
    """A trace as wide as the work bound allows on the test's batches, every block right:
    recomputed in full, within a second and a few MB of the grader's."""
    from lablib.grading.specs._transformer_checks import MAX_BATCH_WORK, _batch_work

    test, batches = lab2_shapes
    width = max(
        w
        for w in range(16, 1025, 16)
        if max(_batch_work([(w, 4, w // 4, w)], ids.size, ids.shape[1]) for ids in batches.values())
        <= MAX_BATCH_WORK
    )
    reply = _shapes_reply(numpy_trace(batches, width, 4, width // 4, width))
    result, seconds, peak = _judged_within_bounds(test, reply)
    assert result.passed, result.message
    assert seconds < 2 * GRADER_SECONDS and peak < HUGE_BYTES, (width, seconds, peak / 2**20)


# ------------------------------------------ every value of the solutions' real replies


def _paths(value, path=(), depth=0):
    """``(path, leaf)`` of every value inside a reply (a long list: its first 3 and last)."""
    yield path, value
    if depth > 8:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key), depth + 1)
    elif isinstance(value, (list, tuple)):
        indices = range(len(value)) if len(value) <= 4 else [0, 1, 2, len(value) - 1]
        for i in indices:
            yield from _paths(value[i], (*path, i), depth + 1)


def _replaced(value, path, new):
    """A copy of ``value`` with the item at ``path`` replaced by ``new`` (removed when
    ``new`` is :data:`_REMOVED`)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(value) if isinstance(value, dict) else list(value)
    if rest or new is not _REMOVED:
        copy[head] = _replaced(value[head], rest, new)
    else:
        del copy[head]
    return tuple(copy) if isinstance(value, tuple) else copy


_REMOVED = object()


def _wrong(value):
    """A wrong but well-formed reply: every float scaled and shifted (the judges then run
    their diagnoses on it)."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return (value * 1.3 + 0.1).astype(value.dtype)
    if isinstance(value, dict):
        return {k: _wrong(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_wrong(v) for v in value)
    return value * 1.3 + 0.1 if type(value) is float else value


def _variants(reply):
    """``(what, value, huge)`` of the reply with one value inside it malformed."""
    makers = dict(MALFORMED)
    for path, leaf in _paths(reply):
        if not path:
            continue
        for name in LEAF:
            yield f"{list(path)} = {name}", _replaced(reply, path, makers[name]()), False
        yield f"{list(path)} removed", _replaced(reply, path, _REMOVED), False
        if isinstance(leaf, np.ndarray) and leaf.ndim:
            strings = np.full(leaf.shape, "a")
            yield f"{list(path)} = strings {leaf.shape}", _replaced(reply, path, strings), False
            huge = np.zeros((60000, *leaf.shape[1:]), np.float32)
            if huge.size <= 2**22:
                yield f"{list(path)} = zeros {huge.shape}", _replaced(reply, path, huge), True


@pytest.fixture(scope="module")
def replies(tmp_path_factory):
    """The replies of every test's probe on each lab's solution (run in a child process
    per lab, as test_forged_values does), fetched when a lab first asks."""
    from test_forged_values import probe_values

    cache = {}

    def of(lab_name):
        if lab_name not in cache:
            names = [test.name for test in load_lab(lab_name).tests]
            cache[lab_name] = probe_values(lab_name, names, tmp_path_factory)
        return cache[lab_name]

    return of


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("lab_name", LABS)
def test_every_value_inside_a_reply_is_checked_before_it_is_used(lab_name, replies):
    lab = load_lab(lab_name)
    values = replies(lab_name)
    problems = []
    for test in lab.tests:
        real = values[test.name]
        first, _, _ = _judged(test, real)  # also imports what the judge imports, untimed
        assert first.passed, (test.id, first.message)
        # A wrong reply reaches the judges' diagnoses; a model (rebuilt, or Lab 2's trace
        # of hundreds of values, recomputed) fails its first comparison there instead.
        sandboxed = judge_test(test, ProbeResult(True, real), in_grader=True) is None
        small = sum(1 for _ in _paths(real)) <= 100
        bases = [real, _wrong(real)] if small and not sandboxed else [real]
        for base in bases:
            for what, value, huge in _variants(base):
                problems.append(_problem(test, what, value, huge))
    problems = [p for p in problems if p]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:40])


# ------------------------------------- the graph labs' architecture text: nested, long


#: The tests of the graph labs that rebuild the student's model from model.to_json().
MODEL_TESTS = [
    ("lab3_gcn_molecules", "build_gcn::gcn_structure"),
    ("lab3_gcn_molecules", "build_gcn::gcn_learns"),
    ("lab4_gat", "build_gat::gat_structure"),
    ("lab4_gat", "build_gat::gat_learns"),
]


def _model_reply(lab_name, architecture):
    """A reply of the form every test of :data:`MODEL_TESTS` reads (the fields of all of
    them: a judge reads its own), holding ``architecture`` as model.to_json()'s text."""
    import importlib

    inputs = importlib.import_module(f"lablib.grading.specs.{lab_name}").structure_inputs()
    names = [*(inputs[0] if isinstance(inputs, tuple) else inputs), "edge_removed"]
    reply = {name: np.zeros((6, 1), np.float32) for name in names}
    reply.update({name: np.zeros((6, 1), np.float32) for name in ("repeat", "training_a")})
    reply.update(
        architecture=architecture,
        weights=[np.zeros(3, np.float32)],
        weights_before=[np.zeros(3, np.float32)],
        weights_after=[np.ones(3, np.float32)],
        losses=[1.0] * 10,
        compiled=True,
        num_inputs=3 if lab_name == "lab3_gcn_molecules" else 2,
        training_b=np.ones((6, 1), np.float32),
    )
    return reply


@pytest.mark.serial  # timed: run alone (.ci/run's serial pass)
@pytest.mark.parametrize("lab_name, test_id", MODEL_TESTS)
def test_an_architecture_text_nested_or_long_past_the_caps_is_the_students_failure(
    lab_name, test_id
):
    """The red team's build function replaced model.to_json by a lambda returning JSON
    nested 100,000 deep: json.loads raised RecursionError in the judge, which the grader
    reported as ``grader-error`` (its own fault, never cached). The text's nesting and
    length are now checked before it is parsed: a failed test naming the likely mistake."""
    test = load_lab(lab_name).test_by_id(test_id)
    deep = 100_000
    nested = '{"a":' * deep + "1" + "}" * deep
    long_text = '{"class_name": "Functional", "config": {"name": "' + "m" * 2_000_000 + '"}}'
    for architecture, words in ((nested, "is 100,000 levels deep"), (long_text, "is 2.0 MB")):
        result, where, seconds = _judged(test, _model_reply(lab_name, architecture))
        assert result.kind == Kind.FAILED and result.mistake, (result.kind, result.message)
        assert f"the model's architecture (model.to_json()) {words}" in result.message
        assert "Did you override model.to_json" in result.message
        assert seconds < SANDBOX_SECONDS, (where, seconds)


def test_an_architecture_past_the_parsers_recursion_is_the_students_failure(monkeypatch):
    """Were the depth cap ever raised past what json.loads follows, its RecursionError is
    still the student's failed test, not the grader's error."""
    from lablib.grading.expect import Mistake
    from lablib.grading.specs import _model_checks

    monkeypatch.setattr(_model_checks, "MAX_ARCHITECTURE_DEPTH", 10**6)
    deep = 100_000
    with pytest.raises(Mistake, match="nested too deep to read"):
        _model_checks.rebuild_model("[" * deep + "]" * deep, [np.zeros(3)])


# ------------------------------------------------ the fixture lab: the template TAs copy


@pytest.mark.parametrize(
    "reply",
    [[np.zeros(3)] * 3, [10**400, 1.0, 1.0], ["1.0", "1.5", "3.0"], [None, None, None]],
    ids=["arrays", "a huge int", "text", "None"],
)
def test_the_fixture_labs_judge_fails_a_forged_mean_plainly(reply):
    """The fixture lab is the example a teaching assistant starts a judge from: its running
    mean's judge computed on each value as it came (an array made its score an array,
    a huge int overflowed), a grader-error instead of the student's failure."""
    from grading_paths import FIXTURE_HIDDEN, FIXTURE_LAB

    from lablib.grading.labspec.registry import load_spec
    from lablib.labs import find_lab

    spec = load_spec(find_lab(str(FIXTURE_LAB)), [str(FIXTURE_HIDDEN)])
    (test,) = [t for t in spec.tests if t.name == "mean_after_updates"]
    result, _, _ = _judged(test, reply)
    assert result.kind != Kind.GRADER_ERROR and not result.passed, result.message
    assert "expected a number" in result.message
    assert _judged(test, [1.0, 1.5, 3.0])[0].passed
