"""Tests of lablib.layers.positional: sinusoidal encoding and embedding layers."""

import math

import numpy as np
import pytest
import tensorflow as tf

from lablib.backend import get_keras
from lablib.layers.positional import (
    PositionalEncoding,
    TokenAndPositionEmbedding,
    positional_encoding,
)
from harness import LayerCase, layer_tests

keras = get_keras()


def loop_encoding(length, depth):
    """Vaswani et al. written out with explicit loops over positions and pairs i."""
    table = np.zeros((length, depth))
    for p in range(length):
        for i in range((depth + 1) // 2):
            angle = p / 10000 ** (2 * i / depth)
            table[p, 2 * i] = math.sin(angle)
            if 2 * i + 1 < depth:
                table[p, 2 * i + 1] = math.cos(angle)
    return table


def slide_encoding(length, depth):
    """The lab slide's formula (exponent 2j with the column index j itself)."""
    j = np.arange(depth)
    angles = np.arange(length)[:, None] / 10000 ** (2 * j / depth)
    return np.where(j % 2 == 0, np.sin(angles), np.cos(angles))


@pytest.mark.parametrize("length, depth", [(50, 16), (7, 5), (3, 1), (10, 2)])
def test_matches_loop_implementation(length, depth):
    pe = positional_encoding(length, depth)
    assert pe.shape == (length, depth) and pe.dtype == np.float32
    np.testing.assert_allclose(pe, loop_encoding(length, depth), atol=1e-6)


def test_shift_is_a_rotation_of_each_pair():
    depth, shift = 16, 5
    pe = positional_encoding(60, depth).astype(np.float64)
    for i in range(depth // 2):
        w = 10000 ** (-2 * i / depth)
        c, s = math.cos(shift * w), math.sin(shift * w)
        rotation = np.array([[c, -s], [s, c]])  # [sin, cos](a + b) = [sin, cos](a) @ R(b)
        np.testing.assert_allclose(
            pe[shift:, 2 * i : 2 * i + 2], pe[:-shift, 2 * i : 2 * i + 2] @ rotation, atol=1e-6
        )


def test_shift_is_linear_for_the_paper_but_not_for_the_slide():
    depth, shift = 16, 3
    for table, linear in (
        (positional_encoding(80, depth), True),
        (slide_encoding(80, depth), False),
    ):
        table = np.asarray(table, np.float64)
        before, after = table[:-shift], table[shift:]
        matrix, *_ = np.linalg.lstsq(before, after, rcond=None)
        residual = np.abs(before @ matrix - after).max()
        assert (residual < 1e-5) == linear, residual


@pytest.mark.parametrize("length, depth", [(0, 4), (4, -1), (2.5, 4), (4, "8"), (None, 4)])
def test_encoding_bad_arguments(length, depth):
    with pytest.raises(ValueError, match="positive integer"):
        positional_encoding(length, depth)


def test_positional_encoding_layer_adds_table_and_keeps_mask():
    layer = PositionalEncoding(max_length=10)
    x = np.random.default_rng(0).normal(size=(2, 6, 4)).astype("float32")
    mask = tf.constant([[True] * 6, [True] * 3 + [False] * 3])
    out = layer(x, mask=mask)
    np.testing.assert_allclose(
        out.numpy() - x, np.broadcast_to(positional_encoding(10, 4)[:6], x.shape), atol=1e-6
    )
    np.testing.assert_array_equal(layer.compute_mask(x, mask).numpy(), mask.numpy())
    tokens = keras.Input(shape=(None,), dtype="int32")
    embedded = keras.layers.Embedding(20, 4, mask_zero=True)(tokens)
    encoded = PositionalEncoding(10)(embedded)
    assert encoded._keras_mask is not None


def test_positional_encoding_too_long_static_and_dynamic():
    layer = PositionalEncoding(max_length=4)
    with pytest.raises(ValueError, match=r"T=6 .*max_length=4"):
        layer(np.zeros((1, 6, 2), "float32"))

    @tf.function(input_signature=[tf.TensorSpec([None, None, 2], tf.float32)])
    def run(x):
        return layer(x)

    np.testing.assert_allclose(run(tf.zeros((1, 3, 2))).numpy()[0], positional_encoding(4, 2)[:3])
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_length=4"):
        run(tf.zeros((1, 6, 2)))


def test_positional_encoding_errors():
    with pytest.raises(ValueError, match=r"`max_length` must be a positive integer, got 0"):
        PositionalEncoding(0)
    with pytest.raises(ValueError, match=r"known embedding size"):
        PositionalEncoding(5)(tf.zeros([3]))


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_token_and_position_embedding(positional):
    layer = TokenAndPositionEmbedding(12, 6, 4, positional=positional)
    ids = np.array([[3, 4, 5, 0], [7, 0, 0, 0]])
    out = layer(ids)
    assert out.shape == (2, 4, 4)
    tokens = tf.gather(layer.token_embeddings, ids).numpy()
    expected = (
        positional_encoding(6, 4)[:4]
        if positional == "sinusoidal"
        else layer.position_embeddings.numpy()[:4]
    )
    np.testing.assert_allclose(
        out.numpy() - tokens, np.broadcast_to(expected, out.shape), atol=1e-6
    )
    np.testing.assert_array_equal(layer.compute_mask(ids).numpy(), ids != 0)
    assert len(layer.trainable_weights) == (2 if positional == "learned" else 1)

    inputs = keras.Input(shape=(None,), dtype="int32")
    embedded = TokenAndPositionEmbedding(12, 6, 4, positional=positional, name="embed")(inputs)
    assert embedded._keras_mask is not None
    pooled = keras.layers.GlobalAveragePooling1D()(embedded)
    model = keras.Model(inputs, keras.layers.Dense(2)(pooled))
    # Masked mean: padding positions do not count.
    different_padding = model.predict(np.array([[3, 4, 5, 0, 0, 0]]), verbose=0)
    np.testing.assert_allclose(different_padding, model.predict(ids[:1], verbose=0), atol=1e-5)


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_scale_embeddings_multiplies_the_tokens_not_the_positions(positional):
    layer = TokenAndPositionEmbedding(12, 6, 16, positional=positional, scale_embeddings=True)
    ids = np.array([[3, 4, 5, 0], [7, 0, 0, 0]])
    out = layer(ids).numpy()
    tokens = tf.gather(layer.token_embeddings, ids).numpy()
    positions = (
        positional_encoding(6, 16)[:4]
        if positional == "sinusoidal"
        else layer.position_embeddings.numpy()[:4]
    )
    np.testing.assert_allclose(out, 4.0 * tokens + positions, rtol=1e-6, atol=1e-6)  # sqrt(16) = 4
    assert TokenAndPositionEmbedding(12, 6, 16).get_config()["scale_embeddings"] is False


def test_scale_embeddings_moves_the_tokens_faster_under_adam():
    """The factor is not the same as a larger initial scale: with Adam each weight moves by
    about the learning rate per step, so the scaled token embeddings move sqrt(d) times
    farther per step than unscaled ones started at the same place."""
    d, steps = 16, 5
    ids = np.random.default_rng(0).integers(1, 12, size=(32, 6))
    target = np.random.default_rng(1).normal(size=(32, 6, d)).astype("float32")
    moved, start = {}, None
    for scale in (False, True):  # unscaled first: it sets `start`
        keras.utils.set_random_seed(0)
        layer = TokenAndPositionEmbedding(12, 6, d, mask_zero=False, scale_embeddings=scale)
        layer.build((None, 6))
        if scale:  # start from the unscaled layer's effective embeddings
            layer.token_embeddings.assign(start / np.sqrt(d))
        else:
            start = layer.token_embeddings.numpy().copy()
        optimizer = keras.optimizers.Adam(1e-3)
        for _ in range(steps):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(layer(ids) - target))
            optimizer.apply_gradients(
                zip(tape.gradient(loss, [layer.token_embeddings]), [layer.token_embeddings])
            )
        effective = layer.token_embeddings.numpy() * (np.sqrt(d) if scale else 1.0)
        moved[scale] = np.abs(effective - start)[np.unique(ids)].mean()
    np.testing.assert_allclose(moved[True] / moved[False], np.sqrt(d), rtol=0.05)


def test_token_and_position_embedding_no_mask_and_float_ids():
    layer = TokenAndPositionEmbedding(10, 4, 2, mask_zero=False)
    assert layer.compute_mask(np.array([[1, 0]])) is None
    np.testing.assert_allclose(
        layer(np.array([[1.0, 0.0]], "float32")).numpy(), layer(np.array([[1, 0]])).numpy()
    )


def test_token_and_position_embedding_errors():
    with pytest.raises(
        ValueError, match=r"`positional` must be one of 'sinusoidal', 'learned', got 'rope'"
    ):
        TokenAndPositionEmbedding(10, 4, 2, positional="rope")
    with pytest.raises(ValueError, match=r"`vocabulary_size` must be a positive integer, got -1"):
        TokenAndPositionEmbedding(-1, 4, 2)
    with pytest.raises(ValueError, match="`mask_zero` must be True or False"):
        TokenAndPositionEmbedding(10, 4, 2, mask_zero="yes")
    with pytest.raises(ValueError, match="embeddings_initializer"):
        TokenAndPositionEmbedding(10, 4, 2, embeddings_initializer="not_an_initializer")
    with pytest.raises(ValueError, match="`scale_embeddings` must be True or False, got 'yes'"):
        TokenAndPositionEmbedding(10, 4, 2, scale_embeddings="yes")
    layer = TokenAndPositionEmbedding(10, 4, 2)
    with pytest.raises(ValueError, match=r"T=5 .*max_length=4"):
        layer(np.ones((1, 5), "int32"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="vocabulary_size=10"):
        layer(np.array([[1, 12]]))


def _ids(seed=3, batch=2, length=6, vocabulary=12):
    ids = np.random.default_rng(seed).integers(1, vocabulary, size=(batch, length))
    ids[0, 4:] = 0  # padding
    return {"inputs": ids.astype("int32")}


# Config, .keras saving, shapes, weights, training, mixed precision and XLA, in both Keras
# modes (tests/layers/harness.py).
CASES = [
    LayerCase(
        "positional-encoding",
        PositionalEncoding,
        {"max_length": 9},
        {"inputs": np.random.default_rng(1).normal(size=(2, 5, 6)).astype("float32")},
        (2, 5, 6),
        0,
    ),
    LayerCase(
        "embedding-sinusoidal",
        TokenAndPositionEmbedding,
        {"vocabulary_size": 12, "max_length": 6, "embedding_dim": 4},
        _ids(),
        (2, 6, 4),
        1,
    ),
    LayerCase(
        "embedding-learned-scaled",
        TokenAndPositionEmbedding,
        {
            "vocabulary_size": 12,
            "max_length": 8,
            "embedding_dim": 16,
            "positional": "learned",
            "scale_embeddings": True,
            "mask_zero": False,
            "embeddings_initializer": "glorot_uniform",
        },
        _ids(seed=4),
        (2, 6, 16),
        2,
    ),
]
test_layer, test_layer_legacy = layer_tests(CASES)


@pytest.mark.legacy
def test_legacy_positional_layers_pass_the_mask_on():
    assert keras.__name__ == "tf_keras"
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = TokenAndPositionEmbedding(20, 6, 8, positional="learned", name="embed")(inputs)
    x = PositionalEncoding(6, name="pe")(x)
    assert getattr(x, "_keras_mask", None) is not None
    model = keras.Model(inputs, keras.layers.GlobalAveragePooling1D()(x))
    # Masked mean: padding positions do not count.
    np.testing.assert_allclose(
        model.predict(np.array([[3, 4, 0, 0, 0, 0]]), verbose=0),
        model.predict(np.array([[3, 4]]), verbose=0),
        atol=1e-5,
    )
