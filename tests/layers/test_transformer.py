"""Tests of lablib.layers.transformer: encoder and decoder blocks (both Keras modes)."""

import numpy as np
import pytest
import tensorflow as tf

from lablib.backend import get_keras
from lablib.layers.positional import TokenAndPositionEmbedding
from lablib.layers.transformer import TransformerDecoderBlock, TransformerEncoderBlock
from harness import LayerCase, layer_tests

keras = get_keras()
RNG = np.random.default_rng(0)


# -- an independent NumPy reference of the encoder block ---------------------


def np_layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_multi_head(w, prefix, q_in, kv_in, allowed):
    q = (
        np.einsum("btd,dhk->bhtk", q_in, w[f"{prefix}_query_kernel"])
        + w[f"{prefix}_query_bias"][:, None]
    )
    k = (
        np.einsum("btd,dhk->bhtk", kv_in, w[f"{prefix}_key_kernel"])
        + w[f"{prefix}_key_bias"][:, None]
    )
    v = (
        np.einsum("btd,dhk->bhtk", kv_in, w[f"{prefix}_value_kernel"])
        + w[f"{prefix}_value_bias"][:, None]
    )
    e = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.where(allowed, e, -np.inf)
    a = np.exp(e - e.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    heads = a @ v
    return (
        np.einsum("bhtv,hvd->btd", heads, w[f"{prefix}_output_kernel"]) + w[f"{prefix}_output_bias"]
    )


def np_encoder(block, x, key_mask, norm_first):
    w = {v.name.split("/")[-1].split(":")[0]: v.numpy().astype(np.float64) for v in block.weights}
    eps = block.norm_epsilon
    allowed = key_mask[:, None, None, :]

    def ln(h, name):
        return np_layer_norm(h, w[f"{name}_gamma"], w[f"{name}_beta"], eps)

    def ffn(h):
        return (
            np.maximum(h @ w["intermediate_kernel"] + w["intermediate_bias"], 0)
            @ w["output_kernel"]
            + w["output_bias"]
        )

    if norm_first:
        h = ln(x, "self_attention_layer_norm")
        z = x + np_multi_head(w, "self_attention", h, h, allowed)
        return z + ffn(ln(z, "output_layer_norm"))
    z = ln(x + np_multi_head(w, "self_attention", x, x, allowed), "self_attention_layer_norm")
    return ln(z + ffn(z), "output_layer_norm")


def randomize(layer, seed=1):
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(0, 0.5, w.shape).astype("float32") for w in layer.get_weights()])


def encoder_decoder_model(vocabulary=20, length=6, dim=8):
    source = keras.Input(shape=(None,), dtype="int32", name="source")
    target = keras.Input(shape=(None,), dtype="int32", name="target")
    encoded = TokenAndPositionEmbedding(vocabulary, length, dim, name="source_embedding")(source)
    encoded = TransformerEncoderBlock(2, 16, "relu", name="encoder")(encoded)
    decoded = TokenAndPositionEmbedding(vocabulary, length, dim, name="target_embedding")(target)
    decoded = TransformerDecoderBlock(2, 16, "gelu", norm_first=True, name="decoder")(
        decoded, encoded
    )
    pooled = keras.layers.GlobalAveragePooling1D()(decoded)
    return keras.Model([source, target], keras.layers.Dense(3, dtype="float32")(pooled))


def token_batch(batch=8, length=6, vocabulary=20, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocabulary, size=(batch, length))
    lengths = rng.integers(2, length + 1, size=batch)
    ids[np.arange(length)[None, :] >= lengths[:, None]] = 0
    return ids


# -- encoder -------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_matches_numpy_reference(norm_first):
    block = TransformerEncoderBlock(2, 12, "relu", norm_first=norm_first, norm_epsilon=1e-6)
    x = RNG.normal(size=(2, 5, 8)).astype("float32")
    key_mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    block(x)
    randomize(block)
    got = block(x, mask=tf.constant(key_mask)).numpy()
    want = np_encoder(block, x.astype(np.float64), key_mask, norm_first)
    np.testing.assert_allclose(got, want, atol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_padding_does_not_change_real_tokens(norm_first):
    block = TransformerEncoderBlock(2, 16, "relu", norm_first=norm_first)
    real = RNG.normal(size=(1, 3, 8)).astype("float32")
    padded = np.concatenate([real, RNG.normal(size=(1, 4, 8)).astype("float32")], axis=1)
    other_padding = np.concatenate(
        [real, 100 * RNG.normal(size=(1, 4, 8)).astype("float32")], axis=1
    )
    mask = tf.constant([[True] * 3 + [False] * 4])
    alone = block(real).numpy()
    np.testing.assert_allclose(block(padded, mask=mask).numpy()[:, :3], alone, atol=1e-5)
    np.testing.assert_allclose(block(other_padding, mask=mask).numpy()[:, :3], alone, atol=1e-5)
    # An explicit [B, T, T] attention mask and tfm's list form say the same thing.
    attention_mask = tf.cast(tf.tile(mask[:, None, :], [1, 7, 1]), tf.float32)
    np.testing.assert_allclose(
        block(padded, attention_mask=attention_mask).numpy()[:, :3], alone, atol=1e-5
    )
    np.testing.assert_allclose(block([padded, attention_mask]).numpy()[:, :3], alone, atol=1e-5)
    # Without a mask the padding does change them (so the test above can fail).
    assert np.abs(block(padded).numpy()[:, :3] - alone).max() > 1e-3


def test_encoder_in_model_takes_mask_from_embedding_and_passes_it_on():
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = TokenAndPositionEmbedding(20, 10, 8)(inputs)
    x = TransformerEncoderBlock(2, 16, "relu", name="encoder")(x)
    assert getattr(x, "_keras_mask", None) is not None
    model = keras.Model(inputs, keras.layers.GlobalAveragePooling1D()(x))
    short = model.predict(np.array([[4, 5, 6]]), verbose=0)
    long = model.predict(np.array([[4, 5, 6, 0, 0, 0]]), verbose=0)
    np.testing.assert_allclose(short, long, atol=1e-5)


def test_encoder_attention_scores():
    block = TransformerEncoderBlock(2, 16, "relu")
    x = RNG.normal(size=(2, 4, 8)).astype("float32")
    mask = tf.constant([[True] * 4, [True, True, False, False]])
    outputs, scores = block(x, mask=mask, return_attention_scores=True)
    assert outputs.shape == (2, 4, 8) and scores.shape == (2, 2, 4, 4)
    np.testing.assert_allclose(scores.numpy().sum(-1), 1, atol=1e-5)
    np.testing.assert_array_equal(scores.numpy()[1, :, :, 2:], 0)
    np.testing.assert_allclose(block(x, mask=mask).numpy(), outputs.numpy())
    # The 0.1 constructor flag: warned, still honoured, kept through a config round trip.
    from lablib import LablibDeprecationWarning

    with pytest.warns(LablibDeprecationWarning, match="ask per call"):
        old = TransformerEncoderBlock(2, 16, "relu", return_attention_scores=True)
    assert len(old(x)) == 2 and not isinstance(old(x, return_attention_scores=False), tuple)
    with pytest.warns(LablibDeprecationWarning):
        assert len(TransformerEncoderBlock.from_config(old.get_config())(x)) == 2
    assert "return_attention_scores" not in block.get_config()


def test_key_and_value_dims_set_the_head_sizes():
    block = TransformerEncoderBlock(4, 32, "gelu", use_bias=False, key_dim=3, value_dim=5)
    assert block(np.ones((1, 3, 8), "float32")).shape == (1, 3, 8)
    shapes = {w.name.split("/")[-1].split(":")[0]: tuple(w.shape) for w in block.weights}
    assert shapes["self_attention_query_kernel"] == (8, 4, 3)
    assert shapes["self_attention_value_kernel"] == (8, 4, 5)
    assert len(block.weights) == 4 + 2 + 4 + 2  # no attention biases


def test_defaults_follow_tfm():
    block = TransformerEncoderBlock(2, 8, "relu")
    config = block.get_config()
    assert config["norm_first"] is False and config["norm_epsilon"] == 1e-12
    assert config["use_bias"] is True and config["output_dropout"] == 0.0
    assert config["attention_dropout"] == 0.0 and config["inner_dropout"] == 0.0
    assert config["kernel_initializer"]["class_name"] == "GlorotUniform"


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(num_heads=0), ["num_heads", "positive integer", "got 0"]),
        (dict(inner_dim=2.5), ["inner_dim", "positive integer", "2.5"]),
        (dict(inner_activation="swishy"), ["inner_activation", "swishy"]),
        (dict(inner_activation=None), ["inner_activation", "got None"]),
        (dict(output_dropout=1.5), ["output_dropout", "[0, 1)", "1.5"]),
        (dict(attention_dropout="high"), ["attention_dropout", "high"]),
        (dict(norm_epsilon=0), ["norm_epsilon", "positive", "0"]),
        (dict(norm_first="yes"), ["norm_first", "True or False", "yes"]),
        (dict(kernel_initializer="nope"), ["kernel_initializer", "nope"]),
        (dict(use_rms_norm=True), ["use_rms_norm", "not supported", "True"]),
        (dict(key_dim=-3), ["key_dim", "-3"]),
    ],
)
def test_encoder_bad_arguments(kwargs, words):
    arguments = dict(num_heads=2, inner_dim=8, inner_activation="relu")
    arguments.update(kwargs)
    with pytest.raises(ValueError) as info:
        TransformerEncoderBlock(**arguments)
    for word in words:
        assert word in str(info.value)


def test_encoder_bad_inputs():
    with pytest.raises(ValueError, match=r"d=10 .*not divisible by num_heads=3"):
        TransformerEncoderBlock(3, 8, "relu")(np.ones((1, 4, 10), "float32"))
    with pytest.raises(ValueError, match=r"\[batch, T, d\].*got shape \(4, 10\)"):
        TransformerEncoderBlock(2, 8, "relu")(np.ones((4, 10), "float32"))
    with pytest.raises(
        ValueError, match=r"attention_mask` must have shape \[batch, T_query, T_key\]"
    ):
        TransformerEncoderBlock(2, 8, "relu")(
            np.ones((1, 4, 8), "float32"), attention_mask=np.ones((1, 4))
        )
    # tfm-only options at their default values are accepted (a tfm config loads).
    TransformerEncoderBlock(2, 8, "relu", output_range=None, use_rms_norm=False)


def test_encoder_trains_in_keras_model():
    # Seeded, and judged on the loss in inference mode before and after training: the
    # per-epoch training loss of a 3-epoch run with dropout is too noisy to compare (it
    # once rose by 4e-4 in CI).
    keras.utils.set_random_seed(0)
    inputs = keras.Input(shape=(6,), dtype="int32")
    x = TokenAndPositionEmbedding(20, 6, 8)(inputs)
    x = TransformerEncoderBlock(
        2, 16, "relu", output_dropout=0.1, attention_dropout=0.1, inner_dropout=0.1, name="encoder"
    )(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(x))
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    ids = token_batch(16)
    labels = (ids[:, 0] > 10).astype(int)
    block = model.get_layer("encoder")
    before = [w.numpy().copy() for w in block.trainable_weights]
    loss_before = model.evaluate(ids, labels, verbose=0)
    model.fit(ids, labels, epochs=30, batch_size=8, verbose=0)
    loss_after = model.evaluate(ids, labels, verbose=0)
    assert len(block.trainable_weights) == 16
    changed = [not np.allclose(b, w.numpy()) for b, w in zip(before, block.trainable_weights)]
    assert all(changed), changed
    assert loss_after < 0.5 * loss_before, (loss_before, loss_after)


def test_dropout_only_in_training():
    block = TransformerEncoderBlock(
        2, 16, "relu", output_dropout=0.5, attention_dropout=0.5, inner_dropout=0.5
    )
    x = RNG.normal(size=(2, 4, 8)).astype("float32")
    np.testing.assert_allclose(block(x, training=False).numpy(), block(x).numpy())
    assert np.abs(block(x, training=True).numpy() - block(x).numpy()).max() > 1e-3


# -- decoder -------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_is_causal(norm_first):
    block = TransformerDecoderBlock(2, 16, "relu", norm_first=norm_first)
    decoder_inputs = RNG.normal(size=(1, 5, 8)).astype("float32")
    encoder_outputs = RNG.normal(size=(1, 4, 8)).astype("float32")
    before = block(decoder_inputs, encoder_outputs).numpy()
    changed = decoder_inputs.copy()
    changed[:, 3:] += 5.0
    after = block(changed, encoder_outputs).numpy()
    np.testing.assert_allclose(after[:, :3], before[:, :3], atol=1e-5)
    assert np.abs(after[:, 3:] - before[:, 3:]).max() > 1e-2


def test_decoder_uses_encoder_and_honours_its_padding():
    block = TransformerDecoderBlock(2, 16, "relu")
    decoder_inputs = RNG.normal(size=(1, 3, 8)).astype("float32")
    encoder_outputs = RNG.normal(size=(1, 5, 8)).astype("float32")
    encoder_mask = tf.constant([[True, True, True, False, False]])
    out, self_scores, cross_scores = block(
        decoder_inputs,
        encoder_outputs,
        encoder_outputs_mask=encoder_mask,
        return_attention_scores=True,
    )
    assert self_scores.shape == (1, 2, 3, 3) and cross_scores.shape == (1, 2, 3, 5)
    np.testing.assert_array_equal(cross_scores.numpy()[..., 3:], 0)
    assert np.all(np.triu(self_scores.numpy()[0, 0], 1) == 0)
    noisy = encoder_outputs.copy()
    noisy[:, 3:] = 50.0
    out_noisy = block(decoder_inputs, noisy, encoder_outputs_mask=encoder_mask)
    np.testing.assert_allclose(out_noisy.numpy(), out.numpy(), atol=1e-5)
    alone = block(decoder_inputs, encoder_outputs[:, :3])
    np.testing.assert_allclose(alone.numpy(), out.numpy(), atol=1e-5)
    # Real encoder positions do matter (cross-attention is wired in).
    real_changed = encoder_outputs.copy()
    real_changed[:, 0] += 3.0
    out_changed = block(decoder_inputs, real_changed, encoder_outputs_mask=encoder_mask)
    assert np.abs(out_changed.numpy() - out.numpy()).max() > 1e-3


def test_decoder_reads_keras_masks_in_a_model():
    model = encoder_decoder_model()
    source = token_batch(4, seed=1)
    target = token_batch(4, seed=2)
    source[:, 4:] = 0
    target[:, 5:] = 0
    base = model.predict([source, target], verbose=0)
    # Trailing padding of the source (encoder) or target (decoder) does not matter:
    # the Keras masks reach both attentions of the decoder and the pooling.
    np.testing.assert_allclose(model.predict([source[:, :4], target], verbose=0), base, atol=1e-5)
    np.testing.assert_allclose(model.predict([source, target[:, :5]], verbose=0), base, atol=1e-5)


def test_decoder_encoder_padding_in_model_is_honoured():
    source = keras.Input(shape=(None, 8))
    target = keras.Input(shape=(None, 8))
    masked_source = keras.layers.Masking(0.0)(source)
    decoded = TransformerDecoderBlock(2, 16, "relu", name="decoder")(target, masked_source)
    model = keras.Model([source, target], decoded)
    enc = RNG.normal(size=(1, 3, 8)).astype("float32")
    dec = RNG.normal(size=(1, 4, 8)).astype("float32")
    padded = np.concatenate([enc, np.zeros((1, 2, 8), "float32")], axis=1)
    np.testing.assert_allclose(
        model.predict([padded, dec], verbose=0), model.predict([enc, dec], verbose=0), atol=1e-5
    )


def test_decoder_with_different_encoder_size():
    block = TransformerDecoderBlock(2, 16, "relu", name="dec")
    out = block(np.ones((2, 3, 8), "float32"), np.ones((2, 5, 6), "float32"))
    assert out.shape == (2, 3, 8)
    shapes = {w.name.split("/")[-1].split(":")[0]: tuple(w.shape) for w in block.weights}
    assert shapes["cross_attention_key_kernel"] == (6, 2, 4)  # from d_enc = 6
    assert shapes["cross_attention_query_kernel"] == (8, 2, 4)  # from d = 8
    with pytest.raises(ValueError, match=r"encoder_outputs have size 7 .*built for 6"):
        block(np.ones((2, 3, 8), "float32"), np.ones((2, 5, 7), "float32"))
    with pytest.raises(ValueError, match="num_heads"):
        TransformerDecoderBlock(-1, 16, "relu")


# -- the attention hook ----------------------------------------------------------


class _UniformAttention(TransformerEncoderBlock):
    """Every allowed key gets the same weight; records the shapes the hook is given."""

    seen = []

    def _compute_attention(self, query, key, value, attention_mask=None, training=None):
        self.seen.append((query.shape.as_list(), key.shape.as_list(), value.shape.as_list()))
        allowed = tf.broadcast_to(
            attention_mask, tf.concat([tf.shape(query)[:-1], tf.shape(key)[-2:-1]], 0)
        )
        scores = tf.cast(allowed, query.dtype)
        scores /= tf.reduce_sum(scores, axis=-1, keepdims=True)
        return tf.matmul(scores, value), scores


class _DecoderTwice(TransformerDecoderBlock):
    """Delegates to the default attention and counts the calls."""

    calls = 0

    def _compute_attention(self, query, key, value, attention_mask=None, training=None):
        type(self).calls += 1
        return super()._compute_attention(query, key, value, attention_mask, training)


def test_compute_attention_is_the_override_point():
    x = RNG.normal(size=(2, 5, 8)).astype("float32")
    keys = tf.constant([[True] * 5, [True] * 3 + [False] * 2])
    default = TransformerEncoderBlock(2, 16, "relu", key_dim=3, value_dim=5)
    uniform = _UniformAttention(2, 16, "relu", key_dim=3, value_dim=5)
    out, scores = uniform(x, mask=keys, return_attention_scores=True)
    default(x, mask=keys)
    assert list(uniform.seen[-1]) == [[2, 2, 5, 3], [2, 2, 5, 3], [2, 2, 5, 5]]
    np.testing.assert_allclose(scores.numpy()[1, :, :, :3], 1 / 3, atol=1e-6)
    np.testing.assert_array_equal(scores.numpy()[1, :, :, 3:], 0)
    uniform.set_weights(default.get_weights())  # same weights, another attention
    assert [w.name for w in uniform.weights] == [w.name for w in default.weights]
    assert np.abs(uniform(x, mask=keys).numpy() - default(x, mask=keys).numpy()).max() > 1e-3
    decoder = _DecoderTwice(2, 16, "relu")
    plain = TransformerDecoderBlock(2, 16, "relu")
    dec, enc = RNG.normal(size=(2, 4, 8)).astype("float32"), x
    plain(dec, enc)
    decoder(dec, enc)
    decoder.set_weights(plain.get_weights())
    _DecoderTwice.calls = 0
    np.testing.assert_allclose(decoder(dec, enc).numpy(), plain(dec, enc).numpy(), atol=1e-6)
    assert _DecoderTwice.calls == 2  # masked self-attention and cross-attention


# -- legacy (tf_keras) mode ------------------------------------------------------


def _tfm():
    from lablib.backend import import_tfm

    return import_tfm()


@pytest.mark.legacy
@pytest.mark.parametrize("norm_first", [False, True])
def test_legacy_parity_with_tfm_block(norm_first):
    tfm = _tfm()
    kwargs = dict(inner_dim=16, inner_activation="relu", norm_first=norm_first)
    reference = tfm.nlp.layers.TransformerEncoderBlock(num_attention_heads=2, **kwargs)
    block = TransformerEncoderBlock(num_heads=2, **kwargs)
    x = RNG.normal(size=(2, 6, 8)).astype("float32")
    real = np.array([[1] * 6, [1] * 4 + [0] * 2], "float32")
    attention_mask = np.repeat(real[:, None, :], 6, axis=1)
    reference([x, attention_mask])
    block(x)
    randomize(reference, seed=7)  # non-trivial layer-norm and bias values too
    block.set_weights(reference.get_weights())
    want = reference([x, attention_mask]).numpy()
    for got in (
        block(x, attention_mask=attention_mask),
        block([x, attention_mask]),
        block(x, mask=tf.constant(real > 0)),
    ):
        difference = np.abs(got.numpy() - want).max()  # padded query rows included
        print(f"norm_first={norm_first}: max |lablib - tfm| = {difference:.2e}")
        assert difference < 1e-5


@pytest.mark.legacy
def test_legacy_decoder_reads_the_encoder_mask():
    assert keras.__name__ == "tf_keras"
    model = encoder_decoder_model()
    source, target = token_batch(8, seed=3), token_batch(8, seed=4)
    # tf_keras passes only the first input's mask; the decoder reads the encoder's.
    source[:, 4:] = 0
    np.testing.assert_allclose(
        model.predict([source[:, :4], target], verbose=0),
        model.predict([source, target], verbose=0),
        atol=1e-5,
    )


@pytest.mark.legacy
def test_legacy_encoder_ignores_padding():
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = TokenAndPositionEmbedding(20, 8, 8)(inputs)
    x = TransformerEncoderBlock(2, 16, "relu", norm_first=True)(x)
    model = keras.Model(inputs, keras.layers.GlobalAveragePooling1D()(x))
    short = model.predict(np.array([[4, 5, 6]]), verbose=0)
    long = model.predict(np.array([[4, 5, 6, 0, 0]]), verbose=0)
    np.testing.assert_allclose(short, long, atol=1e-5)


# -- the harness: config, .keras saving, shapes, weights, training, mixed precision and XLA,
# in both Keras modes (tests/layers/harness.py) ------------------------------------------

_X = RNG.normal(size=(2, 5, 8)).astype("float32")
_KEYS = np.array([[True] * 5, [True] * 3 + [False] * 2])
CASES = [
    LayerCase(
        "encoder-post-norm-mask",
        TransformerEncoderBlock,
        {
            "num_heads": 2,
            "inner_dim": 16,
            "inner_activation": "relu",
            "output_dropout": 0.1,
            "attention_dropout": 0.1,
            "inner_dropout": 0.1,
        },
        {"inputs": _X, "mask": _KEYS},
        (2, 5, 8),
        16,
    ),
    LayerCase(
        "encoder-pre-norm-options",
        TransformerEncoderBlock,
        {
            "num_heads": 4,
            "inner_dim": 32,
            "inner_activation": "gelu",
            "norm_first": True,
            "norm_epsilon": 1e-6,
            "use_bias": False,
            "kernel_initializer": "he_normal",
            "kernel_regularizer": "l2",
            "key_dim": 3,
            "value_dim": 5,
            "use_query_residual": False,
            "name": "blk",
        },
        {"inputs": _X, "attention_mask": _KEYS[:, None, :] & _KEYS[:, :, None]},
        (2, 5, 8),
        12,
    ),
    LayerCase(
        "decoder",
        TransformerDecoderBlock,
        {"num_heads": 2, "inner_dim": 16, "inner_activation": "relu", "norm_first": True},
        {
            "inputs": RNG.normal(size=(2, 4, 8)).astype("float32"),
            "encoder_outputs": _X,
            "encoder_outputs_mask": _KEYS,
        },
        (2, 4, 8),
        26,
    ),
]
test_layer, test_layer_legacy = layer_tests(CASES)
