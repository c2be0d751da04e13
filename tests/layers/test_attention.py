"""Tests of lablib.layers.attention: scaled dot-product attention and masks."""

import numpy as np
import pytest
import tensorflow as tf

from lablib.layers.attention import causal_mask, padding_mask, scaled_dot_product_attention

# The course's worked example (002): q, k, v rows are the same three vectors.
ROWS = np.array([[1, 2, 3, 4], [4, 5, 9, 1], [6, 2, 1, 4]])


def reference_attention(q, k, v, mask=None):
    """Independent NumPy implementation, one query row at a time."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    batch_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    t_q, t_k = q.shape[-2], k.shape[-2]
    q = np.broadcast_to(q, batch_shape + q.shape[-2:])
    k = np.broadcast_to(k, batch_shape + k.shape[-2:])
    v = np.broadcast_to(v, batch_shape + v.shape[-2:])
    allowed = np.ones(batch_shape + (t_q, t_k), bool)
    if mask is not None:
        allowed = np.broadcast_to(np.asarray(mask, bool), allowed.shape)
    out = np.zeros(batch_shape + (t_q, v.shape[-1]))
    weights = np.zeros(batch_shape + (t_q, t_k))
    for index in np.ndindex(*batch_shape):
        for i in range(t_q):
            keep = allowed[index][i]
            if not keep.any():
                continue
            energies = np.array(
                [q[index][i] @ k[index][j] / np.sqrt(q.shape[-1]) for j in range(t_k)]
            )
            energies = np.where(keep, energies, -np.inf)
            alpha = np.exp(energies - energies.max())
            alpha /= alpha.sum()
            weights[index][i] = alpha
            out[index][i] = alpha @ v[index]
    return out, weights


def test_course_worked_example():
    outputs, weights = scaled_dot_product_attention(ROWS, ROWS, ROWS)
    weights = weights.numpy()
    # e = [15, 22.5, 14.5] for q1: the log-weight differences are the energy differences.
    np.testing.assert_allclose(np.log(weights[0, 1] / weights[0, 0]), 22.5 - 15.0, rtol=1e-5)
    np.testing.assert_allclose(np.log(weights[0, 1] / weights[0, 2]), 22.5 - 14.5, rtol=1e-5)
    # The slide's rounded values.
    np.testing.assert_allclose(weights[0], [0.00055, 0.99911, 0.00033], atol=1e-5)
    np.testing.assert_allclose(outputs.numpy()[0], [3.99, 4.99, 8.99, 1.00], atol=1e-2)
    # And the exact values, row by row.
    ref_out, ref_w = reference_attention(ROWS, ROWS, ROWS)
    np.testing.assert_allclose(weights, ref_w, atol=1e-6)
    np.testing.assert_allclose(outputs.numpy(), ref_out, atol=1e-5)
    assert outputs.dtype == tf.float32


def test_matches_reference_with_batch_heads_and_mask():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, 3, 4, 5)).astype("float32")
    k = rng.normal(size=(2, 3, 6, 5)).astype("float32")
    v = rng.normal(size=(2, 3, 6, 7)).astype("float32")
    mask = rng.random((2, 1, 4, 6)) > 0.3
    mask[..., 0] = True
    outputs, weights = scaled_dot_product_attention(q, tf.constant(k), v, mask=mask)
    ref_out, ref_w = reference_attention(q, k, v, mask)
    np.testing.assert_allclose(outputs.numpy(), ref_out, atol=1e-5)
    np.testing.assert_allclose(weights.numpy(), ref_w, atol=1e-6)
    assert outputs.shape == (2, 3, 4, 7) and weights.shape == (2, 3, 4, 6)
    assert np.all(weights.numpy()[np.broadcast_to(~mask, weights.shape)] == 0)


def test_rank_one_mask_broadcasts_over_queries():
    x = np.random.default_rng(5).normal(size=(3, 4)).astype("float32")
    _, weights = scaled_dot_product_attention(x, x, x, mask=[True, True, False])
    np.testing.assert_array_equal(weights.numpy()[:, 2], 0)


def test_integer_mask_and_padding_mask_broadcast():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 4, 3)).astype("float32")
    ids = np.array([[5, 6, 0, 0], [7, 0, 0, 0]])
    mask = padding_mask(ids)
    assert mask.shape == (2, 1, 4) and mask.dtype == tf.bool
    _, weights = scaled_dot_product_attention(x, x, x, mask=mask)
    np.testing.assert_array_equal(weights.numpy()[0, :, 2:], 0)
    np.testing.assert_array_equal(weights.numpy()[1, :, 1:], 0)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1, atol=1e-6)
    out_int, _ = scaled_dot_product_attention(x, x, x, mask=mask.numpy().astype(int))
    out_bool, _ = scaled_dot_product_attention(x, x, x, mask=mask)
    np.testing.assert_allclose(out_int.numpy(), out_bool.numpy())


def test_causal_and_padding_combined():
    x = np.random.default_rng(2).normal(size=(1, 4, 2)).astype("float32")
    combined = padding_mask([[3, 4, 5, 0]]) & causal_mask(4)
    assert combined.shape == (1, 4, 4)
    _, weights = scaled_dot_product_attention(x, x, x, mask=combined)
    w = weights.numpy()[0]
    assert np.all(np.triu(w, 1) == 0)  # no attention to later keys
    assert np.all(w[:, 3] == 0)  # nor to the padding key


def test_fully_masked_row_is_zero_not_nan():
    x = np.random.default_rng(3).normal(size=(3, 4)).astype("float32")
    mask = np.ones((3, 3), bool)
    mask[1] = False
    outputs, weights = scaled_dot_product_attention(x, x, x, mask=mask)
    assert np.isfinite(outputs.numpy()).all() and np.isfinite(weights.numpy()).all()
    np.testing.assert_array_equal(weights.numpy()[1], 0)
    np.testing.assert_array_equal(outputs.numpy()[1], 0)
    np.testing.assert_allclose(weights.numpy()[[0, 2]].sum(-1), 1, atol=1e-6)
    half, half_w = scaled_dot_product_attention(x.astype("float16"), x, x, mask=mask)
    assert half.dtype == tf.float16
    assert np.isfinite(half.numpy()).all() and np.isfinite(half_w.numpy()).all()
    np.testing.assert_allclose(half.numpy(), outputs.numpy(), atol=2e-2)


def test_float16_large_logits_stay_finite():
    x = np.full((1, 3, 8), 40.0, "float16")  # q.k / sqrt(d) = 4525, fine in float32 softmax
    outputs, weights = scaled_dot_product_attention(x, x, x, mask=causal_mask(3))
    assert np.isfinite(outputs.numpy()).all()
    np.testing.assert_allclose(weights.numpy().astype("float32").sum(-1), 1, atol=1e-3)


def test_jit_compiled_function_matches_eager():
    rng = np.random.default_rng(4)
    q, k, v = (tf.constant(rng.normal(size=(2, 5, 4)), tf.float32) for _ in range(3))
    mask = causal_mask(5)

    @tf.function(jit_compile=True)
    def compiled(q, k, v):
        return scaled_dot_product_attention(q, k, v, mask=mask)

    for got, want in zip(compiled(q, k, v), scaled_dot_product_attention(q, k, v, mask=mask)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)


@pytest.mark.parametrize(
    "q_shape, k_shape, v_shape, mask_shape, words",
    [
        ((3, 4), (3, 5), (3, 5), None, ["same last dimension", "[3, 4]", "[3, 5]"]),
        ((3, 4), (3, 4), (2, 4), None, ["same number of positions", "[3, 4]", "[2, 4]"]),
        ((4,), (3, 4), (3, 4), None, ["rank >= 2", "[4]"]),
        ((2, 3, 4), (2, 5, 4), (2, 5, 4), (2, 3, 4), ["broadcastable", "T_k = 5", "[2, 3, 4]"]),
        ((2, 3, 4), (2, 5, 4), (2, 5, 4), (4,), ["broadcastable", "T_k = 5", "padding_mask"]),
    ],
)
def test_shape_errors_are_clear(q_shape, k_shape, v_shape, mask_shape, words):
    mask = None if mask_shape is None else np.ones(mask_shape, bool)
    with pytest.raises(ValueError) as info:
        scaled_dot_product_attention(
            np.ones(q_shape), np.ones(k_shape), np.ones(v_shape), mask=mask
        )
    for word in words:
        assert word in str(info.value)


def test_non_numeric_inputs_are_refused():
    with pytest.raises(TypeError, match="must hold numbers"):
        scaled_dot_product_attention([["a", "b"]], [["a", "b"]], [["a", "b"]])


def test_causal_mask():
    np.testing.assert_array_equal(causal_mask(4).numpy(), np.tril(np.ones((4, 4), bool)))
    assert causal_mask(4).dtype == tf.bool
    np.testing.assert_array_equal(
        causal_mask(tf.constant(3)).numpy(), np.tril(np.ones((3, 3), bool))
    )
    for bad in (0, -2, 2.5, "3", True):
        with pytest.raises(ValueError, match="positive integer"):
            causal_mask(bad)


def test_padding_mask_values_and_errors():
    mask = padding_mask(np.array([[1, 2, 9, 9]]), pad_id=9)
    np.testing.assert_array_equal(mask.numpy(), [[[True, True, False, False]]])
    with pytest.raises(ValueError, match="integer token ids"):
        padding_mask(np.ones((2, 3), "float32"))
    with pytest.raises(ValueError, match="scalar"):
        padding_mask(3)


def test_layer_tests_run_in_full_float32():
    """tests/conftest.py turns TensorFloat-32 off, so the float32 tolerances of these
    tests hold on Ampere and later GPUs as on a CPU (see its full_float32_on_gpus)."""
    assert tf.config.experimental.tensor_float_32_execution_enabled() is False


def test_masked_softmax_rows_and_fully_masked_rows():
    from lablib.layers import masked_softmax

    rng = np.random.default_rng(6)
    logits = rng.normal(size=(2, 3, 4)).astype("float32") * 4
    mask = rng.random((2, 3, 4)) > 0.4
    mask[0, 1] = False  # a fully masked row
    weights = masked_softmax(logits, mask).numpy()
    for index in np.ndindex(2, 3):
        keep = mask[index]
        expected = np.zeros(4)
        if keep.any():
            expected[keep] = np.exp(logits[index][keep] - logits[index][keep].max())
            expected /= expected.sum()
        np.testing.assert_allclose(weights[index], expected, atol=1e-6)
    np.testing.assert_array_equal(weights[0, 1], 0)
    # broadcast masks, integer masks, another axis, no mask
    key_mask = np.array([[1, 1, 0, 1]])
    np.testing.assert_array_equal(masked_softmax(logits, key_mask).numpy()[..., 2], 0)
    np.testing.assert_allclose(masked_softmax(logits, axis=1).numpy().sum(1), 1, atol=1e-6)
    np.testing.assert_allclose(
        masked_softmax(logits).numpy(), tf.nn.softmax(logits).numpy(), atol=1e-6
    )


def test_masked_softmax_float16_gradients_and_xla():
    from lablib.layers import masked_softmax

    logits = tf.constant([[3e4, 1.0, -3e4], [5.0, 6.0, 7.0]], tf.float16)
    mask = tf.constant([[True, True, False], [False, False, False]])
    half = masked_softmax(logits, mask)
    assert half.dtype == tf.float16 and np.all(np.isfinite(half.numpy()))
    np.testing.assert_array_equal(half.numpy()[1], 0)
    x = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(masked_softmax(x, mask) * tf.constant([1.0, 2.0, 3.0]))
    assert np.all(np.isfinite(tape.gradient(loss, x).numpy()))
    compiled = tf.function(lambda x, m: masked_softmax(x, m), jit_compile=True)
    np.testing.assert_allclose(
        compiled(x, mask).numpy(), masked_softmax(x, mask).numpy(), atol=1e-6
    )
