"""Public tests of Lab 1: attention from first principles (Keras 3).

Probes run in the student's process and return plain values; judges run in the
grading process and compute every expected value there (NumPy references, Keras'
own ``MultiHeadAttention``, lablib's ``positional_encoding``). Only the
``multi_head_attention`` piece needs TensorFlow in the student's process.
"""

from __future__ import annotations

import numpy as np

from lablib.grading.expect import (
    Mistake,
    describe,
    expect_array,
    expect_finite,
    numbers,
    real_array,
)
from lablib.grading.specs._attention_checks import attention_stages as _attention_stages
from lablib.grading.specs._attention_checks import large_score_mistakes
from lablib.grading.specs._attention_checks import reference_attention as _reference_attention
from lablib.grading.specs._cases import add_case_tests
from lablib.grading.spec import diagnose, expect, expect_close, expect_equal, expect_shape, get_lab
from lablib.grading.specs._model_checks import expect_fields
from lablib.grading.specs._positional_checks import add_encoding_piece

lab = get_lab("lab1_attention")  # title and short name: lablib/labs.py
lab.judge_imports = ("keras",)  # judges compare with Keras layers in the grading process


# The course's worked example (lecture part 002): q, k, v rows are the same vectors.
WORKED = [[1.0, 2.0, 3.0, 4.0], [4.0, 5.0, 9.0, 1.0], [6.0, 2.0, 1.0, 4.0]]


def _rng_arrays(seed, *shapes):
    rng = np.random.RandomState(seed)
    return [rng.normal(size=shape) for shape in shapes]


def _attention_mistakes(query, key, value, mask=None):
    """``(weights, sentence)`` of the typical mistakes in ``attention`` on these inputs."""
    query, key, value = (np.asarray(a, dtype=np.float64) for a in (query, key, value))
    d_k, d_v = query.shape[-1], value.shape[-1]
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool), scores, -np.inf)
    with np.errstate(all="ignore"):  # a fully masked column gives NaN: it matches nothing
        over_queries = np.exp(scores - np.max(scores, axis=-2, keepdims=True))
        over_queries = over_queries / over_queries.sum(axis=-2, keepdims=True)
    mistakes = [
        (
            _reference_attention(query, key, value, mask, scale=1.0)[1],
            f"The scores are not scaled: divide q.k by sqrt(d_k) (here sqrt({d_k}), d_k being "
            f"the last dimension of the query and key) before the softmax.",
        ),
        (
            _reference_attention(query, key, value, mask, scale=1.0 / d_k)[1],
            f"The scores are divided by d_k = {d_k}; the formula divides by its square root, "
            f"sqrt(d_k) = {np.sqrt(d_k):.4g}.",
        ),
        (
            over_queries,
            "The softmax runs over the queries (axis -2); each query's weights must sum to 1 "
            "over the keys: take the softmax over the last axis.",
        ),
    ]
    if d_v != d_k:
        mistakes.append(
            (
                _reference_attention(query, key, value, mask, scale=1 / np.sqrt(d_v))[1],
                f"The scores are scaled by sqrt(d_v) = sqrt({d_v}), the values' size; "
                f"scale by sqrt(d_k) = sqrt({d_k}), the size of queries and keys.",
            )
        )
    if mask is not None:
        unmasked = _reference_attention(query, key, value)[1]
        mistakes.append(
            (
                unmasked * np.asarray(mask, dtype=bool),
                "The masked weights were set to 0 after the softmax, so the others no "
                "longer sum to 1: mask the scores before the softmax (-inf where the "
                "mask is False).",
            )
        )
        mistakes.append(
            (
                unmasked,
                "The mask was ignored: keys where the mask is False must get "
                "weight 0 (set their scores to -inf before the softmax).",
            )
        )
    return mistakes


def _pair(result, what):
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise TypeError(f"{what} must return a pair (output, weights), got {type(result).__name__}")
    return np.asarray(result[0], dtype=np.float64), np.asarray(result[1], dtype=np.float64)


# --------------------------------------------------------------------- attention

lab.piece(
    "attention",
    objects=["attention"],
    description="scaled dot-product attention in NumPy, with boolean masks",
    error_hints=[
        (
            r"matmul: Input operand \d has a mismatch in its core dimension|shapes .* not aligned",
            "Two arrays multiplied with @ do not fit: the scores are query @ key.swapaxes(-1, -2) "
            "([..., n_q, d_k] @ [..., d_k, n_k]) and the output is weights @ value "
            "([..., n_q, n_k] @ [..., n_k, d_v]). Print both operands' shapes.",
        ),
        (
            r"AxisError|axis -?\d+ is out of bounds",
            "An axis number is out of range for these arrays: attention works on the last two "
            "axes (-2: the queries, -1: the keys), which holds for any number of leading "
            "batch or head axes; count axes from the end.",
        ),
        (
            r"operands could not be broadcast together",
            "Two arrays do not broadcast: a row's max or total must keep its axis "
            "(keepdims=True) to broadcast against the scores, and a mask [.., 1, n_k] "
            "broadcasts over the queries of scores [.., n_q, n_k].",
        ),
    ],
)


def _worked_inputs():
    """(q, k, v, mask): the worked example's rows as query, key and value, no mask."""
    x = np.array(WORKED)
    return x, x, x, None


def _batch_inputs():
    """(q, k, v, mask): batch and head axes, values of another size than the keys."""
    return (*_rng_arrays(1, (2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 7)), None)


def _masked_inputs():
    """(q, k, v, mask): a [2, 1, 5] key mask."""
    mask = np.array([[[True, True, False, True, False]], [[True, False, False, False, True]]])
    return (*_rng_arrays(2, (2, 4, 3), (2, 5, 3), (2, 5, 2)), mask)


def _fully_masked_inputs():
    """(q, k, v, mask): query 1 may attend to no key."""
    mask = np.array([[True, False, False], [False, False, False], [True, True, True]])
    return (*_rng_arrays(3, (3, 2), (3, 2), (3, 2)), mask)


def _large_score_inputs():
    """(q, k, v, mask): scores of about 500, 1000 and 2000 (one row each, and one more
    of 1000), a few units apart within a row: np.exp of them overflows, so only a softmax
    that subtracts each row's own largest score gets them right."""
    rng = np.random.RandomState(5)
    direction = rng.normal(size=4)
    direction /= np.linalg.norm(direction)
    query = np.array([[0.5], [1.0], [2.0], [1.0]]) * 45 * direction + rng.normal(size=(4, 4))
    key = 45 * direction + 0.05 * rng.normal(size=(5, 4))
    return query, key, rng.normal(size=(5, 2)), None


def run_attention(ns, inputs, large=None):
    """Probe side: the student's ``attention`` on ``inputs() = (q, k, v, mask)`` (given
    no mask argument when mask is None), as {"output", "weights"}; with ``large`` (inputs
    of the same form whose scores are around 1e3) also {"large": its output and weights}."""
    query, key, value, mask = inputs()
    if mask is None:
        out, weights = _pair(ns["attention"](query, key, value), "attention(q, k, v)")
    else:
        call = "attention(q, k, v, mask=...)"
        out, weights = _pair(ns["attention"](query, key, value, mask=mask), call)
    if large is None:
        return {"output": out, "weights": weights}
    return {"output": out, "weights": weights, "large": run_attention(ns, large)}


def judge_attention(got, inputs, large, checks, whats):
    """One attention test's judge on ``inputs() = (q, k, v, mask)``, with ``reference =
    (output, weights)`` of :func:`_reference_attention`: the shapes of both (and that they
    are numbers, :func:`_attention_reply`), the case's first checks
    (``checks[0](got, inputs, reference)``, which returns mistakes of its own to name
    first), the known mistakes (:func:`_attention_mistakes`) and the first wrong step
    (:func:`_attention_stages`) named, the case's checks of particular values
    (``checks[1]``, same arguments), then the weights and the output against the
    reference (``whats``: what the messages call them). With ``large`` (None or inputs
    whose scores are around 1e3), the same on those last (:func:`_judge_large_scores`)."""
    extra = got.get("large") if isinstance(got, dict) else None
    inputs = inputs()
    reference = out, weights = _reference_attention(*inputs)
    got = _attention_reply(got, inputs, reference)
    first, particular = checks
    mistakes = first(got, inputs, reference)
    diagnose(got["weights"], [*mistakes, *_attention_mistakes(*inputs)], right=weights)
    _attention_stages(got, *inputs)
    particular(got, inputs, reference)
    expect_close(got["weights"], weights, rtol=1e-5, atol=1e-7, what=whats[0])
    expect_close(got["output"], out, rtol=1e-5, atol=1e-6, what=whats[1])
    if large is not None:
        _judge_large_scores(extra, large())


def _judge_large_scores(got, inputs):
    """``attention`` on scores around 1e3 (:func:`_large_score_inputs`): the weights and
    output finite, each query's weights summing to 1, close to the reference. Only the
    numerics are judged here (the other inputs judge the steps), loosely enough for
    float32 (its rounding at scores of 2,000 is about 2e-5 of a weight)."""
    reference = out, weights = _reference_attention(*inputs)
    got = _attention_reply(got, inputs, reference)
    call = _attention_call(inputs)
    mask = inputs[3]
    allowed = None if mask is None else np.broadcast_to(np.asarray(mask, bool), weights.shape)
    large_score_mistakes(got["weights"], got["output"], allowed, call)
    expect_close(got["weights"], weights, rtol=1e-3, atol=1e-6, what=f"weights of {call}")
    expect_close(got["output"], out, rtol=1e-3, atol=1e-5, what=f"output of {call}")


def _attention_call(inputs) -> str:
    """How the messages name the call: ``attention(q [3, 4], k [3, 4], v [3, 4])``."""
    query, key, value, mask = inputs
    named = ", ".join(f"{n} {list(np.shape(a))}" for n, a in zip("qkv", (query, key, value)))
    return f"attention({named}{'' if mask is None else f', mask {list(np.shape(mask))}'})"


def _attention_reply(got, inputs, reference):
    """The reply's output and weights as float64 arrays, checked first: both arrays of
    numbers of the reference's shapes (the output one row per query and the value's
    width, the weights one row per query and one column per key). Anything else names
    what ``attention`` returned instead, before any step of the judge indexes them."""
    out, weights = reference
    call = _attention_call(inputs)
    expect_fields(got, ("output", "weights"), f"{call}'s (output, weights)")
    wanted = (
        f"expected the output {list(out.shape)} (one row per query, as wide as v) and the "
        f"weights {list(weights.shape)} (one row per query, one column per key)"
    )
    shapes = []
    for name in ("output", "weights"):
        value = None if isinstance(got[name], bool) else numbers(got[name])
        if value is None:
            raise Mistake(f"{call} returned {describe(got[name])} as its {name}: {wanted}.")
        shapes.append(value.shape)
    if tuple(shapes) != (out.shape, weights.shape):
        sizes = [f"of shape {shape}" if shape else "holding a single number" for shape in shapes]
        returned = (
            f"an array {sizes[0]} for both"
            if shapes[0] == shapes[1]
            else f"an output {sizes[0]} and weights {sizes[1]}"
        )
        raise Mistake(f"{call} returned {returned}: {wanted}.")
    return {name: real_array(got[name]) for name in ("output", "weights")}


def _no_check(got, inputs, reference):
    return []


def _worked_first_query(got, inputs, reference):
    """The lecture's numbers for the first query."""
    expect_close(
        got["weights"][0],
        [0.00055, 0.99911, 0.00033],
        atol=5e-5,
        what="weights of the first query (the lecture's alpha_1)",
    )
    expect_close(
        got["output"][0],
        [3.99, 4.99, 8.99, 1.00],
        atol=1.5e-2,
        what="output of the first query (the lecture's o_1)",
    )


def _rows_sum_to_one(got, inputs, reference):
    expect_close(
        got["weights"].sum(-1),
        np.ones(reference[1].shape[:-1]),
        atol=1e-6,
        what="sum of each row of weights",
    )


def _masked_keys_zero(got, inputs, reference):
    blocked = np.broadcast_to(~inputs[3], (2, 4, 5))
    expect(
        bool(np.all(got["weights"][blocked] == 0.0)),
        f"masked keys must get weight exactly 0; got weights {got['weights'][blocked]}",
    )


def _fully_masked_finite(got, inputs, reference):
    """A NaN or infinite row where every key is masked is named; equal weights there
    are a mistake of its own."""
    for name in ("output", "weights"):
        if not np.all(np.isfinite(got[name][[0, 2]])):
            break  # the other queries are wrong too: _attention_stages says where
        if not np.all(np.isfinite(got[name])):
            raise Mistake(
                f"The {name} of the query whose keys are all masked (row 1) is NaN or infinite: "
                "all its scores are -inf, so its exponentials are all 0 and the softmax divides "
                "0 by 0. Give such a query all-zero weights and a zero output: divide by the "
                "total only where it is positive (np.where(total > 0, total, 1))."
            )
    uniform = reference[1].copy()
    uniform[1] = 1.0 / 3
    return [
        (
            uniform,
            "The query whose keys are all masked got equal weights "
            "1/3 (the softmax of equal large negative scores, e.g. "
            "-1e9 or -1e4): give such a query all-zero weights and a "
            "zero output, e.g. multiply the weights by mask.any(-1).",
        )
    ]


add_case_tests(
    lab,
    "attention",
    run_attention,
    judge_attention,
    [
        (
            "worked_example",
            2,
            "Energies are q.k / sqrt(d_k) = 15, 22.5, 14.5 for the "
            "first query; softmax each row over the keys, then take the weighted sum of values.",
            [_worked_inputs, None],
            [(_no_check, _worked_first_query), ("all attention weights", "all outputs")],
        ),
        (
            "batch_dims_and_shapes",
            1,
            "Use key.swapaxes(-1, -2) (not .T) and @ so that leading "
            "batch/head axes are kept; scale by the query's last dimension d_k.",
            [_batch_inputs, None],
            [(_no_check, _rows_sum_to_one), ("attention weights", "attention output")],
        ),
        (
            "masked_keys_get_zero_weight",
            1,
            "Where the mask is False the weight must be exactly 0: "
            "set those scores to -inf (or drop them) before the softmax, not after.",
            [_masked_inputs, None],
            [
                (_no_check, _masked_keys_zero),
                ("masked attention weights", "masked attention output"),
            ],
        ),
        (
            "fully_masked_query_is_safe",
            1,
            "A query whose every key is masked gets all-zero weights "
            "and a zero output: not NaN (the softmax of all -inf is 0/0) and not equal weights; "
            "and scores around 1e3 must not overflow np.exp (subtract each query's own "
            "largest allowed score first).",
            [_fully_masked_inputs, _large_score_inputs],
            [
                (_fully_masked_finite, _no_check),
                ("weights (row 1 is fully masked)", "output (row 1 is fully masked)"),
            ],
        ),
    ],
)


# ------------------------------------------------------------------------- masks

lab.piece(
    "masks",
    objects=["padding_mask", "causal_mask"],
    description="padding and causal (look-ahead) masks",
    error_hints=[
        (
            r"unsupported operand type\(s\)|too many indices|IndexError",
            "Indexing the mask went wrong: token_ids != pad_id is [B, T]; add the query axis "
            "before the last one with [..., np.newaxis, :] (or [:, np.newaxis, :]) to get "
            "[B, 1, T].",
        ),
    ],
)


@lab.test(
    "masks",
    points=1,
    hint="padding_mask returns token_ids != pad_id with a new axis "
    "before the last one: shape [B, 1, T], so it broadcasts over the queries.",
)
def padding_mask_shape_and_values(ns):
    ids = np.array([[5, 7, 2, 0, 0], [3, 0, 0, 0, 0]])
    return {
        "default": np.asarray(ns["padding_mask"](ids)),
        "pad_id_3": np.asarray(ns["padding_mask"](ids, pad_id=3)),
    }


@padding_mask_shape_and_values.judge
def _(got):
    ids = np.array([[5, 7, 2, 0, 0], [3, 0, 0, 0, 0]])
    expect_fields(got, ("default", "pad_id_3"), "padding_mask's two masks")
    for key, pad in (("default", 0), ("pad_id_3", 3)):
        expect_shape(
            got[key], (2, 1, 5), f"padding_mask(ids [2, 5]{'' if pad == 0 else ', pad_id=3'})"
        )
        expect(
            got[key].dtype == np.bool_, f"padding_mask must return booleans, got {got[key].dtype}"
        )
        if np.array_equal(got[key], (ids == pad)[:, None, :]):
            raise Mistake(
                "Your mask is True at the padding and False at the real tokens: the "
                "mask says which keys may be attended to, so it is True where "
                "token_ids != pad_id."
            )
        expect_equal(got[key], (ids != pad)[:, None, :], f"padding_mask with pad_id={pad}")


@lab.test("masks", points=1, hint="causal_mask(T)[i, j] is True when j <= i (np.tril).")
def causal_mask_values(ns):
    return {str(n): np.asarray(ns["causal_mask"](n)) for n in (1, 4, 7)}


@causal_mask_values.judge
def _(got):
    expect_fields(got, ("1", "4", "7"), "causal_mask(1), causal_mask(4) and causal_mask(7)")
    for n in (1, 4, 7):
        expect_shape(got[str(n)], (n, n), f"causal_mask({n})")
        expect(
            got[str(n)].dtype == np.bool_,
            f"causal_mask must return booleans, got {got[str(n)].dtype}",
        )
        expect_equal(got[str(n)], np.tril(np.ones((n, n), dtype=bool)), f"causal_mask({n})")


@lab.test(
    "masks",
    points=1,
    hint="padding_mask(ids) & causal_mask(T) must broadcast to "
    "[B, T, T]: query i sees real tokens j <= i only.",
)
def masks_combine_by_broadcasting(ns):
    ids = np.array([[4, 9, 2, 0], [8, 0, 0, 0]])
    return np.asarray(ns["padding_mask"](ids) & ns["causal_mask"](4))


@masks_combine_by_broadcasting.judge
def _(got):
    ids = np.array([[4, 9, 2, 0], [8, 0, 0, 0]])
    expected = (ids != 0)[:, None, :] & np.tril(np.ones((4, 4), dtype=bool))
    expect_shape(got, (2, 4, 4), "padding_mask(ids [2, 4]) & causal_mask(4)")
    expect_equal(got, expected, "combined padding and causal mask")


# ---------------------------------------------------------- multi-head attention

lab.piece(
    "multi_head_attention",
    objects=["MultiHeadSelfAttention"],
    description="multi-head self-attention as a Keras layer with four Dense projections",
    error_hints=[
        (
            r"Input to reshape is a tensor with \d+ values, but the requested shape|"
            r"cannot reshape|[Rr]eshape.*(incompatible|size)",
            "A reshape asks for a shape of another size than the tensor's: split the heads "
            "by reshaping [B, T, h * d_k] to [B, T, h, d_k] (then transpose to [B, h, T, d_k]); "
            "merge them by transposing back to [B, T, h, d_k] and reshaping to [B, T, h * d_k].",
        ),
        (
            r"transpose expects a vector of size|perm|axes don't match|"
            r"axis -?\d+ is out of bounds for an array",
            "A transpose's axis order does not fit the tensor: the per-head tensors have 4 axes "
            "(0-3), [B, T, h, d_k] -> [B, h, T, d_k] is (0, 2, 1, 3), and the key's last two "
            "axes swap with (0, 1, 3, 2).",
        ),
        (
            r"Tshape' of float|allowed values: int32, int64",
            "A reshape got a size that is a float: `/` divides to a float; sizes are integers "
            "(num_heads * key_dim, or // where you divide).",
        ),
        (
            r"[Mm]atrix size-incompatible|Dimensions must be equal|[Ii]ncompatible shapes|"
            r"mismatch in its core dimension",
            "Two tensors multiplied do not fit: per head, the scores are query [B, h, T, d_k] "
            "@ key transposed [B, h, d_k, T], and the output is weights [B, h, T, T] @ value "
            "[B, h, T, d_k].",
        ),
        (
            r"invalid value for `units`",
            "A Dense layer got a number of units that is not a positive integer: the query, "
            "key and value projections have num_heads * key_dim units (integers: use *), "
            "the output projection the input's width.",
        ),
    ],
)

_PROJECTIONS = ("query_dense", "key_dense", "value_dense", "output_dense")


def _mha_setup(num_heads, key_dim, width, seed):
    """Inputs and Dense weights (kernel [in, out], bias [out]) as NumPy float32."""
    rng = np.random.RandomState(seed)
    inner = num_heads * key_dim
    x = rng.normal(size=(2, 5, width)).astype(np.float32)
    weights = {}
    for name in _PROJECTIONS:
        shape = (inner, width) if name == "output_dense" else (width, inner)
        weights[name] = (
            (rng.normal(size=shape) / np.sqrt(shape[0])).astype(np.float32),
            (0.1 * rng.normal(size=shape[1])).astype(np.float32),
        )
    return x, weights


def _mha_mask():
    ids = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 0, 0]])
    return (ids != 0)[:, None, :] & np.tril(np.ones((5, 5), dtype=bool))


def _student_mha(ns, num_heads, key_dim, width, seed, mask=None):
    x, weights = _mha_setup(num_heads, key_dim, width, seed)
    layer = ns["MultiHeadSelfAttention"](num_heads=num_heads, key_dim=key_dim)
    layer(x)  # builds the projections
    for name in _PROJECTIONS:
        getattr(layer, name).set_weights(list(weights[name]))
    result = layer(x, attention_mask=mask, return_attention_scores=True)
    out, scores = result
    return {"output": np.asarray(out), "scores": np.asarray(scores)}


def _keras_mha(num_heads, key_dim, width, seed, mask=None):
    """Keras' MultiHeadAttention with the same weights, in the grading process."""
    import keras  # Keras 3: its layers also work when tf.keras is tf_keras

    x, weights = _mha_setup(num_heads, key_dim, width, seed)
    mha = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim)
    mha(x, x)
    for name in _PROJECTIONS:
        kernel, bias = weights[name]
        if name == "output_dense":
            kernel = kernel.reshape(num_heads, key_dim, width)
        else:
            kernel = kernel.reshape(width, num_heads, key_dim)
            bias = bias.reshape(num_heads, key_dim)
        getattr(mha, name).set_weights([kernel, bias])
    out, scores = mha(x, x, attention_mask=mask, return_attention_scores=True)
    return np.asarray(out, dtype=np.float64), np.asarray(scores, dtype=np.float64)


def _mha_score_mistakes(num_heads, key_dim, width, seed, mask=None):
    """``(scores, sentence)`` of the typical mistakes in ``MultiHeadSelfAttention``."""
    x, weights = _mha_setup(num_heads, key_dim, width, seed)
    x = np.asarray(x, dtype=np.float64)
    batch, length = x.shape[:2]

    def project(name):
        kernel, bias = weights[name]
        return x @ kernel + bias

    def heads(h):  # [B, T, h * d_k] -> [B, h, T, d_k]
        return h.reshape(batch, length, num_heads, key_dim).transpose(0, 2, 1, 3)

    def scores(query, key, scale):
        allowed = None if mask is None else np.asarray(mask, dtype=bool)[:, None]
        return _reference_attention(query, key, key, allowed, scale=scale)[1]

    query, key = project("query_dense"), project("key_dense")
    # A reshape straight to [B, h, T, d_k] mixes positions and heads (no transpose).
    scrambled = [h.reshape(batch, num_heads, length, key_dim) for h in (query, key)]
    return [
        *_mask_fill_mistakes(heads(query), heads(key), key_dim, mask),
        (
            scores(heads(query), heads(key), 1.0),
            f"The scores are not scaled: divide each head's q.k by sqrt(key_dim) = "
            f"sqrt({key_dim}) before the softmax.",
        ),
        (
            scores(heads(query), heads(key), 1 / np.sqrt(width)),
            f"The scores are scaled by sqrt(d_model) = sqrt({width}); each head scales by "
            f"sqrt(key_dim) = sqrt({key_dim}), the size of its own queries and keys.",
        ),
        (
            scores(*scrambled, 1 / np.sqrt(key_dim)),
            "The heads are split with a reshape straight to [B, h, T, d_k], which mixes "
            "positions and heads: reshape to [B, T, h, d_k], then transpose to [B, h, T, d_k].",
        ),
    ]


def _mask_fill_mistakes(query, key, key_dim, mask):
    """``(weights, sentence)`` of masked scores set to 0 instead of a large negative number,
    with the masked weights zeroed after the softmax or not (none without a mask)."""
    if mask is None:
        return []
    allowed = np.asarray(mask, dtype=bool)[:, None]
    scores = np.where(allowed, query @ np.swapaxes(key, -1, -2) / np.sqrt(key_dim), 0.0)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    sentence = (
        "The masked scores are set to 0 before the softmax: 0 is not small, exp(0) = 1, so "
        "the masked keys still take a share of each query's total{}. Set them to a large "
        "negative number instead (ops.where(mask, scores, -1e4) in float32, or -inf), so "
        "that exp gives 0 there."
    )
    return [
        (
            np.where(allowed, weights, 0.0),
            sentence.format(" and the allowed weights no longer sum to 1"),
        ),
        (weights, sentence.format(" (they get non-zero weights)")),
    ]


def _judge_mha(got, num_heads, key_dim, width, seed, mask=None, what=""):
    expect_fields(got, ("output", "scores"), "the layer's (output, attention scores)")
    out, scores = _keras_mha(num_heads, key_dim, width, seed, mask)
    got = {
        "output": expect_array(got["output"], out.shape, f"output {what}"),
        "scores": expect_array(
            got["scores"], scores.shape, f"attention scores {what} ([batch, heads, T, T])"
        ),
    }
    diagnose(
        got["scores"],
        _mha_score_mistakes(num_heads, key_dim, width, seed, mask),
        right=scores,
        rtol=1e-4,
        atol=1e-5,
    )
    _mha_stages(got, *_mha_setup(num_heads, key_dim, width, seed), num_heads, key_dim, mask)
    expect_close(got["scores"], scores, rtol=1e-4, atol=1e-5, what=f"attention scores {what}")
    expect_close(got["output"], out, rtol=1e-4, atol=1e-4, what=f"output {what}")


def _projection_inputs():
    """x [1, 4, 6] for the layer and its q/k/v projections; m [1, 4, 6] for output_dense."""
    rng = np.random.RandomState(13)
    return (
        rng.normal(size=(1, 4, 6)).astype(np.float32),
        rng.normal(size=(1, 4, 6)).astype(np.float32),
    )


def _mha_heads(x, weights, num_heads, key_dim):
    """The per-head query, key and value [B, h, T, d_k] and the function that turns
    per-head attention weights into the layer's output (merge the heads, project)."""
    x = np.asarray(x, dtype=np.float64)

    def dense(name, h):
        kernel, bias = (np.asarray(w, dtype=np.float64) for w in weights[name])
        return h @ kernel + bias

    def split(h):
        return h.reshape(h.shape[0], h.shape[1], num_heads, key_dim).transpose(0, 2, 1, 3)

    query, key, value = (split(dense(n, x)) for n in ("query_dense", "key_dense", "value_dense"))

    def output_of(attention_weights):
        heads = np.asarray(attention_weights, dtype=np.float64) @ value
        merged = heads.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[1], num_heads * key_dim)
        return dense("output_dense", merged)

    return query, key, value, output_of


_MHA_OUTPUT_SENTENCE = (
    "Your attention weights are right for every head, but the output does not follow from them: "
    "each head's output is weights @ value; merge the heads back by transposing [B, h, T, d_k] "
    "to [B, T, h, d_k] before reshaping to [B, T, h * d_k], then apply output_dense."
)


def _mha_stages(got, x, weights, num_heads, key_dim, mask=None):
    """The steps of multi-head attention checked one by one (see _attention_stages), from
    the weights per head the layer returned and its output; the reference uses the
    layer's own projection weights."""
    query, key, value, output_of = _mha_heads(x, weights, num_heads, key_dim)
    allowed = None if mask is None else np.asarray(mask, dtype=bool)[:, None]
    _name_dropout(got["scores"], query, key, allowed)
    _attention_stages(
        {"weights": np.asarray(got["scores"], np.float64), "output": got["output"]},
        query,
        key,
        value,
        allowed,
        output_of=output_of,
        output_sentence=_MHA_OUTPUT_SENTENCE,
        d_k_name="key_dim",
        rtol=1e-4,
    )


def _name_dropout(weights, query, key, allowed):
    """Name dropout left on at inference: the right weights per head with some set to 0
    and all the others multiplied by one factor above 1 (1 / (1 - rate))."""
    right = _reference_attention(query, key, key, allowed)[1]
    weights = real_array(weights) if isinstance(weights, np.ndarray) else None
    if weights is None or weights.shape != right.shape or not np.all(np.isfinite(weights)):
        return
    kept, large = np.abs(weights) > 1e-9, right > 1e-4
    if not np.any(kept & large):
        return
    factor = float(np.median(weights[kept & large] / right[kept & large]))
    if factor > 1.001 and np.allclose(weights[kept], factor * right[kept], rtol=1e-3, atol=1e-5):
        raise Mistake(
            f"Your attention weights are the right ones with {int(np.sum(~kept & large))} of "
            f"them set to 0 and all the others multiplied by {factor:.4g}: that is dropout "
            "(it zeroes weights at random and scales the rest by 1 / (1 - rate)), applied "
            "when the layer is called for inference. This layer's weights are the softmax "
            "alone: take the dropout out (or apply it only when training)."
        )


def _numpy_mha(x, weights, num_heads, key_dim, scale=None, scrambled=False):
    """Multi-head self-attention in NumPy from the four projections' (kernel, bias).
    ``scale`` (instead of 1 / sqrt(key_dim)) and ``scrambled`` (heads split by a plain
    reshape) compute what the typical mistakes give."""

    def dense(name, h):
        kernel, bias = weights[name]
        return h @ kernel + bias

    def split(h):  # [B, T, h * d_k] -> [B, h, T, d_k]
        if scrambled:
            return h.reshape(h.shape[0], num_heads, h.shape[1], key_dim)
        return h.reshape(h.shape[0], h.shape[1], num_heads, key_dim).transpose(0, 2, 1, 3)

    x = np.asarray(x, dtype=np.float64)
    query, key, value = (split(dense(n, x)) for n in ("query_dense", "key_dense", "value_dense"))
    heads, _ = _reference_attention(query, key, value, scale=scale)
    merged = heads.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[1], num_heads * key_dim)
    return dense("output_dense", merged)


@lab.test(
    "multi_head_attention",
    points=1,
    hint="Create four keras.layers.Dense layers as "
    "self.query_dense, self.key_dense, self.value_dense (num_heads * key_dim units) and "
    "self.output_dense (back to the input width); do not use keras.layers.MultiHeadAttention.",
)
def four_dense_projections(ns):
    layer = ns["MultiHeadSelfAttention"](num_heads=2, key_dim=3)
    x, merged = _projection_inputs()
    output = np.asarray(layer(x))
    info = {}
    for name in _PROJECTIONS:
        sub = getattr(layer, name, None)
        weights = [np.asarray(w) for w in sub.get_weights()] if sub is not None else []
        # The projection's own output on a fixed input: x @ kernel + bias, checked here.
        inner = merged if name == "output_dense" else x
        fits = len(weights) == 2 and np.shape(weights[0])[0] == inner.shape[-1]
        info[name] = {
            "class": type(sub).__name__,
            "weights": weights,
            "output": np.asarray(sub(inner)) if fits else None,
        }
    sublayers = [type(s).__name__ for s in layer._flatten_layers(include_self=False)]
    try:  # the weights per head, for the judge's diagnosis (the Keras comparisons test the option)
        scores = np.asarray(layer(x, return_attention_scores=True)[1])
    except Exception:  # noqa: BLE001 - an option not written yet: the output is judged alone
        scores = None
    return {
        "projections": info,
        "sublayers": sublayers,
        "output": output,
        "scores": scores,
        "weights": [np.asarray(w) for w in layer.get_weights()],
    }


def _check_projection_kernel_shape(name, kernel):
    """Name a projection kernel of the wrong shape: each of the four maps 6 values to 6."""
    if isinstance(kernel, np.ndarray) and kernel.ndim == 2 and kernel.shape != (6, 6):
        if name == "output_dense":
            raise Mistake(
                f"self.output_dense's kernel has shape {kernel.shape}; it maps the merged heads "
                "(num_heads * key_dim = 6 values per token) back to the input's width "
                "(input_shape[-1] = 6 here), so its kernel is (6, 6): give it as many units "
                "as the input's last dimension."
            )
        raise Mistake(
            f"self.{name}'s kernel has shape {kernel.shape}; it maps each token (width 6) to "
            "num_heads * key_dim = 2 * 3 = 6 values, so its kernel is (6, 6): give it "
            "num_heads * key_dim units."
        )


def _checked_projection(name, info):
    """Check one Dense projection (class, weights, its output); its (kernel, bias) in float64."""
    expect_fields(info, ("class", "weights", "output"), f"self.{name}")
    expect(
        isinstance(info["class"], str) and info["class"] == "Dense",
        f"self.{name} must be a keras.layers.Dense, got "
        f"{info['class'] if isinstance(info['class'], str) else describe(info['class'])}",
    )
    expect(
        isinstance(info["weights"], list) and len(info["weights"]) == 2,
        f"self.{name} must have a kernel and a bias",
    )
    kernel, bias = info["weights"]
    _check_projection_kernel_shape(name, kernel)
    kernel = expect_array(
        kernel, (6, 6), f"self.{name} kernel for num_heads=2, key_dim=3 on width 6"
    )
    bias = expect_array(bias, (6,), f"self.{name} bias")
    # Every reference below is computed from these weights: NaN there would make it NaN.
    expect_finite(kernel, f"self.{name}'s kernel")
    expect_finite(bias, f"self.{name}'s bias")
    expect(
        bool(np.std(kernel) > 1e-3),
        f"self.{name} kernel is constant: a Dense layer's kernel starts random (glorot_uniform).",
    )
    # The projection is x @ kernel + bias, recomputed here from its own weights.
    expect_shape(info["output"], (1, 4, 6), f"self.{name}(x) for x [1, 4, 6]")
    inner = _projection_inputs()[1 if name == "output_dense" else 0].astype(np.float64)
    expect_close(
        info["output"],
        inner @ kernel + bias,
        rtol=1e-4,
        atol=1e-5,
        what=f"self.{name}(x) vs x @ kernel + bias",
    )
    return kernel, bias


def _check_owned_weights(got, weights):
    """Check that the layer owns exactly its four projections' weights, no MultiHeadAttention."""
    sublayers = got["sublayers"]
    expect(
        isinstance(sublayers, list) and all(isinstance(s, str) for s in sublayers),
        f"the layer's sublayers: expected a list of class names, got {describe(sublayers)}",
    )
    expect(
        "MultiHeadAttention" not in sublayers,
        "build multi-head attention from the Dense projections; do not wrap "
        "keras.layers.MultiHeadAttention",
    )
    expect(
        isinstance(got["weights"], list) and len(got["weights"]) == 8,
        f"the layer should own exactly 8 weights (4 kernels, 4 biases), got "
        f"{len(got['weights']) if isinstance(got['weights'], list) else got['weights']}",
    )
    own = [real_array(w) for w in got["weights"]]
    expect(
        all(w is not None for w in own),
        "the layer's weights: expected 8 arrays of numbers, got "
        f"{[describe(w) for w in got['weights']][:8]}",
    )
    own = sorted(w.tobytes() for w in own)
    parts = sorted(w.tobytes() for pair in weights.values() for w in pair)
    expect(
        own == parts,
        "the layer's 8 weights must be the kernels and biases of its four Dense projections",
    )


def _check_mha_output(got, weights):
    """Check the layer's output is attention computed from its four projections' weights."""
    x = _projection_inputs()[0]
    expected = _numpy_mha(x, weights, num_heads=2, key_dim=3)
    output = expect_array(got["output"], expected.shape, "layer output for x [1, 4, 6]")
    scores = real_array(got.get("scores"))
    sentences = [sentence for _, sentence in _mha_score_mistakes(2, 3, 6, 10)]
    diagnose(
        output,
        zip(
            [
                _numpy_mha(x, weights, 2, 3, scale=1.0),
                _numpy_mha(x, weights, 2, 3, scale=1 / np.sqrt(6)),
                _numpy_mha(x, weights, 2, 3, scrambled=True),
            ],
            sentences,
        ),
        right=expected,
        rtol=1e-4,
        atol=1e-4,
    )
    if scores is not None and scores.shape == (1, 2, 4, 4):
        _mha_stages({"scores": scores, "output": output}, x, weights, 2, 3)
    expect_close(
        output,
        expected,
        rtol=1e-4,
        atol=1e-4,
        what="layer output vs multi-head attention computed from the four projections' weights",
    )


@four_dense_projections.judge
def _(got):
    expect_fields(got, ("projections", "sublayers", "output", "weights"))
    expect_fields(got["projections"], _PROJECTIONS, "the four projections")
    weights = {name: _checked_projection(name, got["projections"][name]) for name in _PROJECTIONS}
    _check_owned_weights(got, weights)
    # The layer's output is attention computed from those four projections.
    _check_mha_output(got, weights)


# Compared with keras.layers.MultiHeadAttention holding the same weights:
# (name, points, hint, num_heads, key_dim, width, seed, masked, what).
_KERAS_CASES = [
    (
        "matches_keras_multi_head_attention",
        2,
        "Split heads with reshape [B, T, h, d_k] then transpose to [B, h, T, d_k]; merge them "
        "back the same way before output_dense.",
        2,
        3,
        6,
        10,
        False,
        "for num_heads=2, key_dim=3, width 6 (d_k = d/h)",
    ),
    (
        "matches_keras_with_mask",
        1,
        "attention_mask [B, T, T] is shared by all heads: add a head axis (expand_dims at "
        "axis 1) before masking the scores.",
        2,
        3,
        6,
        11,
        True,
        "with a padding & causal mask",
    ),
    (
        "matches_keras_other_key_dim",
        1,
        "key_dim need not be width / num_heads: the projections have num_heads * key_dim "
        "units and output_dense maps back to the width.",
        4,
        2,
        5,
        12,
        False,
        "for num_heads=4, key_dim=2, width 5",
    ),
]


def _add_keras_comparison(name, points, hint, num_heads, key_dim, width, seed, masked, what):
    def probe(ns):
        mask = _mha_mask() if masked else None
        return _student_mha(
            ns, num_heads=num_heads, key_dim=key_dim, width=width, seed=seed, mask=mask
        )

    lab.test("multi_head_attention", points=points, hint=hint, name=name)(probe).judge(
        lambda got: _judge_mha(
            got, num_heads, key_dim, width, seed, _mha_mask() if masked else None, what=what
        )
    )


for _case in _KERAS_CASES:
    _add_keras_comparison(*_case)


# ----------------------------------------------------------- positional encoding

add_encoding_piece(
    lab,
    table=(50, 16),
    odd=(7, 5),
    odd_hint="Return a float32 array [length, depth]; for an odd depth the last column is a sine.",
)


# ------------------------------------------------------------------- permutation

lab.piece(
    "permutation",
    objects=["equivariance_gap"],
    description="attention alone is permutation-equivariant; positions break that",
    error_hints=[
        (
            r"operands could not be broadcast together",
            "Two arrays of different shapes meet in one operation: f(h) is attention_fn(h, h, h)[0], "
            "the output [T, d] (index 0 of the pair; index 1 is the weights [T, T]).",
        ),
        (
            r"index \d+ is out of bounds for axis",
            "An index is out of range: shuffle with the permutation array itself, x[perm] "
            "and output[perm] (perm holds each position 0..T-1 once).",
        ),
    ],
)


def handed_attention(query, key, value, mask=None):
    """An attention function handed to the student's equivariance_gap (an input)."""
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ value, weights


def handed_causal_attention(query, key, value, mask=None):
    n = query.shape[-2]
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1])
    scores = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ value, weights


#: How close a gap must be to the judge's: it is one float computed the same way.
GAP_TOLERANCE = {"rtol": 1e-6, "atol": 1e-9}


def _permutation_inputs():
    rng = np.random.RandomState(7)
    x = rng.normal(size=(6, 8))
    permutation = np.array([3, 0, 5, 1, 4, 2])
    depth, length = 8, 6
    i = np.arange(depth) // 2
    angles = np.arange(length)[:, None] / np.power(10000.0, 2 * i / depth)
    encoding = np.where(np.arange(depth) % 2 == 0, np.sin(angles), np.cos(angles))
    return x, permutation, encoding


def _student_gap(ns, attention, with_encoding=False):
    """Probe side: the student's ``equivariance_gap`` of ``attention`` on
    :func:`_permutation_inputs`, given the encoding only ``with_encoding``."""
    x, permutation, encoding = _permutation_inputs()
    extra = (encoding,) if with_encoding else ()
    return float(ns["equivariance_gap"](attention, x, permutation, *extra))


def _expect_gap(got, expected, what):
    """The student's gap against the judge's, within :data:`GAP_TOLERANCE`."""
    expect_close(got, expected, **GAP_TOLERANCE, what=what)


def _expected_gap(attention, with_encoding):
    x, permutation, encoding = _permutation_inputs()
    if not with_encoding:
        encoding = np.zeros_like(x)
    h, h_perm = x + encoding, x[permutation] + encoding
    out = attention(h, h, h)[0]
    out_perm = attention(h_perm, h_perm, h_perm)[0]
    return float(np.max(np.abs(out_perm - out[permutation])))


def _biased_attention(bias):
    """Attention plus a fixed score bias per (query position, key position), as a
    learned position bias would add: not permutation-equivariant, so its gap is not 0."""

    def handed_biased_attention(query, key, value, mask=None):
        scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1]) + bias
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        return weights @ value, weights

    return handed_biased_attention


def _recorded(attention):
    """``attention`` that also keeps the (query, key, value) of each call, so the judge
    can check each step of the student's ``equivariance_gap`` (what it fed the attention)."""
    calls = []

    def handed_recorded_attention(query, key, value, mask=None):
        calls.append([np.array(a, dtype=np.float64, copy=True) for a in (query, key, value)])
        return attention(query, key, value, mask)

    return handed_recorded_attention, calls


def _same_array(a, b) -> bool:
    a, b = real_array(a), real_array(b)
    return (
        a is not None
        and b is not None
        and a.shape == b.shape
        and bool(np.allclose(a, b, rtol=1e-9, atol=1e-12))
    )


def _gap_stages(calls, gap, attention, encoding):
    """Name the step of ``equivariance_gap`` that went wrong, from the inputs it gave the
    attention (``calls``) and the gap it returned; quiet when every step is right."""
    x, permutation, _ = _permutation_inputs()
    if not isinstance(calls, list) or len(calls) != 2:
        count = len(calls) if isinstance(calls, list) else 0
        raise Mistake(
            f"Your function called attention_fn {count} time(s); it needs exactly two "
            "calls: one on the tokens in their order, one on the shuffled tokens."
        )
    expect(
        all(isinstance(call, list) and len(call) == 3 for call in calls),
        "the calls of attention_fn recorded by the test are not (query, key, value) "
        f"triples: got {[describe(call) for call in calls]}",
    )
    for call in calls:
        if not (_same_array(call[0], call[1]) and _same_array(call[1], call[2])):
            raise Mistake(
                "Self-attention gives the same array as query, key and value: call "
                "attention_fn(h, h, h) with h the tokens plus their positions."
            )
    first, second = calls[0][0], calls[1][0]
    original, shuffled = x + encoding, x[permutation] + encoding
    if _same_array(first, shuffled) and _same_array(second, original):
        first, second = second, first  # the shuffled call came first: the order does not matter
    if _same_array(second, (x + encoding)[permutation]) and not _same_array(second, shuffled):
        raise Mistake(
            "Your shuffled input moves the positions along with the tokens "
            "((x + encoding)[perm]): positions stay where they are, so add the "
            "encoding after shuffling: x[perm] + encoding."
        )
    if not _same_array(first, original):
        if _same_array(first, x) and np.any(encoding):
            raise Mistake(
                "The input in the tokens' own order has no positional encoding: "
                "add the encoding to x as well (x + encoding)."
            )
        raise Mistake(
            "The input in the tokens' own order is not x + encoding (the encoding "
            "added once, at positions 0..T-1): check what you pass to attention_fn."
        )
    if not _same_array(second, shuffled):
        if _same_array(second, x[permutation]) and np.any(encoding):
            raise Mistake(
                "The shuffled input has no positional encoding: add it after "
                "shuffling, x[perm] + encoding."
            )
        raise Mistake(
            "The shuffled input is not x[perm] + encoding (the tokens shuffled, then "
            "the encoding added at positions 0..T-1): check what you pass to "
            "attention_fn the second time."
        )
    output = np.asarray(attention(original, original, original)[0])
    moved = np.asarray(attention(shuffled, shuffled, shuffled)[0])
    expected = float(np.max(np.abs(moved - output[permutation])))
    if not (isinstance(gap, float) and np.isclose(gap, expected, **GAP_TOLERANCE)):
        unpermuted = float(np.max(np.abs(moved - output)))
        if isinstance(gap, float) and np.isclose(gap, unpermuted, **GAP_TOLERANCE):
            raise Mistake(
                "Your gap compares the shuffled output with the original output in its "
                "own order: permute the original output the same way first, "
                "output[perm], then take the largest absolute difference."
            )
        raise Mistake(
            "Both inputs are right, but the gap is not the largest absolute "
            "difference between the two outputs: return "
            "max |f(x[perm] + encoding) - f(x + encoding)[perm]| over all entries."
        )


@lab.test(
    "permutation",
    points=1,
    hint="Without positions, self-attention of x[perm] equals "
    "the self-attention of x, permuted the same way: the gap is ~1e-16. (The test also "
    "hands your function an attention with a position bias, whose gap is not 0.)",
)
def no_encoding_gap_is_zero(ns):
    # Drawn afresh at every run: the gap the judge expects is computed from it, so a
    # function (or a forged reply) that always answers 0 does not pass.
    bias = np.random.default_rng().normal(size=(6, 6))
    recording, calls = _recorded(handed_attention)
    return {
        "gap": _student_gap(ns, recording),
        "calls": calls,
        "bias": bias,
        "biased_gap": _student_gap(ns, _biased_attention(bias)),
    }


@no_encoding_gap_is_zero.judge
def _(got):
    expect_fields(got, ("gap", "bias", "biased_gap"))
    gap, bias = got["gap"], got["bias"]
    expect(isinstance(gap, float), f"equivariance_gap must return a number, got {describe(gap)}")
    x = _permutation_inputs()[0]
    _gap_stages(got.get("calls"), gap, _reference_attention, np.zeros_like(x))
    expect(
        abs(gap) < 1e-9,
        f"without positional encoding the gap should be ~0 (equivariance), got {gap}",
    )
    bias = expect_array(bias, (6, 6), "the position bias drawn by the test")
    expect(
        bool(np.all(np.isfinite(bias)) and 0.3 < np.std(bias) < 3.0),
        "the position bias drawn by the test is not a standard normal draw",
    )
    expected = _expected_gap(_biased_attention(bias), with_encoding=False)
    expect(
        expected > 1e-6,
        f"the position bias drawn by the test must break equivariance (its gap is {expected:.3g})",
    )
    if isinstance(got["biased_gap"], float) and not np.isclose(
        got["biased_gap"], expected, **GAP_TOLERANCE
    ):
        raise Mistake(  # the inputs were checked above: what is left is the gap's formula
            f"For an attention that is not permutation-equivariant (a position bias) your gap is "
            f"{got['biased_gap']:.4g}, where the largest absolute difference between "
            f"f(x[perm]) and f(x)[perm] is {expected:.4g}: return the maximum over all entries "
            "of the absolute difference (np.max(np.abs(...)))."
        )
    _expect_gap(
        got["biased_gap"],
        expected,
        "gap of an attention with a position bias (not permutation-equivariant)",
    )


@lab.test(
    "permutation",
    points=1,
    hint="Positions do not move with the tokens: add the encoding "
    "to x[perm] at positions 0..T-1, then compare with the permuted original output.",
)
def encoding_breaks_equivariance(ns):
    recording, calls = _recorded(handed_attention)
    return {"gap": _student_gap(ns, recording, with_encoding=True), "calls": calls}


@encoding_breaks_equivariance.judge
def _(got):
    expect_fields(got, ("gap", "calls"))
    _gap_stages(got["calls"], got["gap"], _reference_attention, _permutation_inputs()[2])
    got = got["gap"]
    expected = _expected_gap(_reference_attention, with_encoding=True)
    expect(expected > 1e-3, "internal: the reference gap should be positive")
    _expect_gap(got, expected, "gap with positional encoding")


@lab.test(
    "permutation",
    points=1,
    hint="Call the attention_fn you are given (self-attention: "
    "query = key = value = x + encoding) and return max |f(x[perm]) - f(x)[perm]|.",
)
def uses_the_given_attention(ns):
    return _student_gap(ns, handed_causal_attention)


@uses_the_given_attention.judge
def _(got):
    causal = lambda q, k, v: _reference_attention(q, k, v, np.tril(np.ones((6, 6), dtype=bool)))
    expected = _expected_gap(causal, with_encoding=False)
    _expect_gap(got, expected, "gap of a causal attention (which is not permutation-equivariant)")


lab.answer(
    "positions",
    points=4,
    title="section 5: why attention needs positions",
    rubric=[
        (
            1,
            "(a) Why the layer's outputs for 'man bites dog' are those of 'dog bites man' in another order: the "
            "embedding is a per-token lookup and the query, key and value projections act on each token "
            "separately, so they commute with reordering; attention itself is permutation-equivariant (the "
            "measured gap is 0). Citing the gap alone, without the per-token steps, does not earn this point: "
            "the gap was measured without projections.",
        ),
        (
            1,
            "(a) Averaging over the tokens is invariant to that order, so the pooled vector, and the prediction, "
            "are the same for both sentences.",
        ),
        (
            1,
            "(a) With the encoding added, the vector at a position depends on the position too: swapping tokens "
            "changes what enters each position, the outputs change (the gap is not 0) and the sentences can be "
            "told apart.",
        ),
        (
            1,
            "(b) One valid reason, any of: a raw index grows without bound and swamps embedding values of order 1 "
            "(and meets positions never trained on); the sinusoids stay bounded and differ for every position; "
            "an offset k is one fixed linear map (relative positions through dot products). The question asks "
            "for one: one correct reason earns the point, more earn nothing more.",
        ),
        (0, "No answer."),
    ],
)
