"""What lablib's transformer blocks share: arguments, weights, multi-head attention,
feed-forward, layer normalisation (:class:`_TransformerBlock`); the blocks themselves are
in :mod:`lablib.layers.transformer`.

The blocks create all their weights in ``build`` with ``add_weight`` and compute
multi-head attention themselves (einsum projections, then :meth:`_TransformerBlock.
_compute_attention`, then the output projection), so the same code runs on Keras 3 and on
tf_keras (legacy mode), and the encoder's weights have the shapes of
``tfm.nlp.layers.TransformerEncoderBlock``'s, so they can be copied from one to the other
(see ``tests/layers/test_transformer.py``).

Weight shapes (``d`` model size, ``H`` heads, ``k``/``v`` key/value size per head)::

    {attention}_query_kernel  [d, H, k]    {attention}_query_bias  [H, k]
    {attention}_key_kernel    [d_kv, H, k] {attention}_key_bias    [H, k]
    {attention}_value_kernel  [d_kv, H, v] {attention}_value_bias  [H, v]
    {attention}_output_kernel [H, v, d]    {attention}_output_bias [d]
    {norm}_gamma [d], {norm}_beta [d]      (layer normalisation, kept in float32)
    intermediate_kernel [d, inner_dim], intermediate_bias [inner_dim]
    output_kernel [inner_dim, d], output_bias [d]
"""

from __future__ import annotations

import tensorflow as tf

from lablib._deprecation import pop_renamed
from lablib.layers._common import (
    check_positive_int,
    check_rate,
    clone_initializer,
    keras,
    keras_option,
    weight_option,
    weight_option_names,
    weight_options,
    weight_options_config,
)
from lablib.layers.attention import attend

_LEGACY = keras.__name__.startswith("tf_keras")

#: The constructor's weight options, saved by ``get_config``.
_WEIGHT_OPTIONS = (*weight_option_names("kernel", "bias"), "attention_initializer")

# Options of tfm.nlp.layers.TransformerEncoderBlock that lablib's block does not
# implement, with the tfm default: passing the default is accepted (so a tfm config
# loads), anything else is refused with an explanation.
_TFM_ONLY_OPTIONS = {
    "output_range": None,
    "use_rms_norm": False,
    "attention_axes": None,
    "output_last_dim": None,
    "diff_q_kv_att_layer_norm": False,
    "num_kv_heads": None,
    "src_block_size": None,
    "tgt_block_size": None,
    "use_sigmoid_attn": False,
    "sigmoid_attn_bias": None,
    "linformer_dim": None,
    "linformer_shared_kv_projection": True,
}


def _layer_norm(x, gamma, beta, epsilon):
    """Layer normalisation over the last axis, computed in float32."""
    x = tf.cast(x, tf.float32)
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + epsilon) * gamma + beta


def _as_bool_mask(mask, name, layer, rank):
    mask = tf.convert_to_tensor(mask)
    if mask.shape.rank is not None and mask.shape.rank != rank:
        expected = "[batch, T]" if rank == 2 else "[batch, T_query, T_key]"
        raise ValueError(
            f"{layer}: `{name}` must have shape {expected} (True where attention is "
            f"allowed), got shape {mask.shape.as_list()}."
        )
    return mask if mask.dtype.is_bool else tf.not_equal(mask, tf.zeros([], mask.dtype))


def _keras_mask(tensor):
    return getattr(tensor, "_keras_mask", None)


def _refuse_tfm_only_options(layer, kwargs):
    """Pop the tfm-only options from ``kwargs``: their tfm default is accepted (a tfm
    config loads), any other value is refused with an explanation."""
    for option, default in _TFM_ONLY_OPTIONS.items():
        if option in kwargs:
            value = kwargs.pop(option)
            if value != default:
                raise ValueError(
                    f"{layer}: the tfm option `{option}` is not supported by lablib's "
                    f"block (got {option}={value!r}; only the default {default!r} "
                    f"is accepted). Use tfm.nlp.layers.TransformerEncoderBlock in "
                    f"legacy mode if you need it."
                )


def _activation(value, layer):
    """``(config value, function)`` of ``inner_activation``: a name is kept as given."""
    if value is None:
        raise ValueError(
            f"{layer}: `inner_activation` must be an activation name or function "
            f"(e.g. 'relu' or 'gelu'), got None."
        )
    function = keras_option(keras.activations, value, "inner_activation", layer, "relu")
    return (value if isinstance(value, str) else keras.activations.serialize(function)), function


def _check_flag(argument, value, layer):
    if not isinstance(value, bool):
        raise ValueError(f"{layer}: `{argument}` must be True or False, got {value!r}.")
    return value


def _check_epsilon(value, layer):
    try:
        epsilon = float(value)
    except (TypeError, ValueError):
        epsilon = -1.0
    if not epsilon > 0:
        raise ValueError(
            f"{layer}: `norm_epsilon` must be a small positive float (e.g. 1e-12 "
            f"as tfm, 1e-6), got {value!r}."
        )
    return epsilon


class _TransformerBlock(keras.layers.Layer):
    """Arguments, weights and sub-layers shared by the encoder and decoder blocks."""

    _layer_name = "TransformerBlock"

    def __init__(
        self,
        num_heads=None,
        inner_dim=None,
        inner_activation=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        use_bias=True,
        norm_first=False,
        norm_epsilon=1e-12,
        output_dropout=0.0,
        attention_dropout=0.0,
        inner_dropout=0.0,
        attention_initializer=None,
        key_dim=None,
        value_dim=None,
        **kwargs,
    ):
        name = self._layer_name
        where = f"{name}.__init__"
        num_heads = pop_renamed(kwargs, where, "num_attention_heads", num_heads, stacklevel=4)
        return_attention_scores = pop_renamed(
            kwargs,
            where,
            "return_attention_scores",
            False,
            False,
            stacklevel=4,
            note="The constructor flag will go; ask per call: block(x, "
            "return_attention_scores=True).",
        )
        for required, value in (("num_heads", num_heads), ("inner_dim", inner_dim)):
            if value is None:
                raise TypeError(
                    f"{name}: `{required}` is required, e.g. {name}(num_heads=4, "
                    f"inner_dim=128, inner_activation='relu')."
                )
        _refuse_tfm_only_options(name, kwargs)
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads, name)
        self.inner_dim = check_positive_int("inner_dim", inner_dim, name)
        self.inner_activation, self._inner_activation_fn = _activation(inner_activation, name)
        self.kernel_initializer, self.kernel_regularizer, self.kernel_constraint = weight_options(
            name, "kernel", kernel_initializer, kernel_regularizer, kernel_constraint
        )
        self.bias_initializer, self.bias_regularizer, self.bias_constraint = weight_options(
            name, "bias", bias_initializer, bias_regularizer, bias_constraint
        )
        self.attention_initializer = weight_option(
            "attention_initializer", attention_initializer, name
        )
        self.use_bias = _check_flag("use_bias", use_bias, name)
        self.norm_first = _check_flag("norm_first", norm_first, name)
        # the deprecated constructor flag: scores returned when a call does not ask
        self._scores_by_default = _check_flag(
            "return_attention_scores", return_attention_scores, name
        )
        self.norm_epsilon = _check_epsilon(norm_epsilon, name)
        self.output_dropout = check_rate("output_dropout", output_dropout, name)
        self.attention_dropout = check_rate("attention_dropout", attention_dropout, name)
        self.inner_dropout = check_rate("inner_dropout", inner_dropout, name)
        self.key_dim = None if key_dim is None else check_positive_int("key_dim", key_dim, name)
        self.value_dim = (
            None if value_dim is None else check_positive_int("value_dim", value_dim, name)
        )
        self._attention_dropout_layer = keras.layers.Dropout(self.attention_dropout)
        self._output_dropout_layer = keras.layers.Dropout(self.output_dropout)
        self._inner_dropout_layer = keras.layers.Dropout(self.inner_dropout)
        self.supports_masking = True

    # -- weights -------------------------------------------------------------

    def _initializer(self, kind):
        """A fresh initializer per weight (unseeded tf_keras instances repeat values)."""
        source = {
            "kernel": self.kernel_initializer,
            "bias": self.bias_initializer,
            "attention": self.attention_initializer or self.kernel_initializer,
        }[kind]
        return clone_initializer(source)

    def _weight(self, name, shape, kind, autocast=True):
        kwargs = dict(name=name, shape=tuple(shape), initializer=self._initializer(kind))
        if kind in ("kernel", "attention"):
            kwargs.update(regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        elif kind == "bias":
            kwargs.update(regularizer=self.bias_regularizer, constraint=self.bias_constraint)
        if not autocast:
            kwargs["experimental_autocast" if _LEGACY else "autocast"] = False
        return self.add_weight(**kwargs)

    def _head_sizes(self, model_dim):
        heads = self.num_heads
        key_dim = self.key_dim
        if key_dim is None:
            if model_dim % heads:
                raise ValueError(
                    f"{self._layer_name}: the model size d={model_dim} (last axis of the "
                    f"inputs) is not divisible by num_heads={heads}. Choose a "
                    f"number of heads that divides d, or pass key_dim explicitly."
                )
            key_dim = model_dim // heads
        return key_dim, self.value_dim or key_dim

    def _build_attention(self, prefix, query_dim, source_dim):
        key_dim, value_dim = self._head_sizes(query_dim)
        heads = self.num_heads
        shapes = {
            "query": ((query_dim, heads, key_dim), (heads, key_dim)),
            "key": ((source_dim, heads, key_dim), (heads, key_dim)),
            "value": ((source_dim, heads, value_dim), (heads, value_dim)),
            "output": ((heads, value_dim, query_dim), (query_dim,)),
        }
        weights = {}
        # Created in tfm's order (kernel, bias per projection), so that
        # ``block.set_weights(tfm_block.get_weights())`` copies a tfm block.
        for part, (kernel_shape, bias_shape) in shapes.items():
            weights[f"{part}_kernel"] = self._weight(
                f"{prefix}_{part}_kernel", kernel_shape, "attention"
            )
            if self.use_bias:
                weights[f"{part}_bias"] = self._weight(f"{prefix}_{part}_bias", bias_shape, "bias")
        return weights

    def _build_norm(self, prefix, dim):
        gamma = self.add_weight(
            name=f"{prefix}_gamma",
            shape=(dim,),
            initializer="ones",
            **({"experimental_autocast": False} if _LEGACY else {"autocast": False}),
        )
        beta = self.add_weight(
            name=f"{prefix}_beta",
            shape=(dim,),
            initializer="zeros",
            **({"experimental_autocast": False} if _LEGACY else {"autocast": False}),
        )
        return gamma, beta

    def _build_feed_forward(self, dim):
        self.intermediate_kernel = self._weight(
            "intermediate_kernel", (dim, self.inner_dim), "kernel"
        )
        self.intermediate_bias = self._weight("intermediate_bias", (self.inner_dim,), "bias")
        self.output_kernel = self._weight("output_kernel", (self.inner_dim, dim), "kernel")
        self.output_bias = self._weight("output_bias", (dim,), "bias")

    @staticmethod
    def _check_input_shape(shape, layer, argument):
        shape = tf.TensorShape(shape)
        if shape.rank != 3 or shape[-1] is None:
            raise ValueError(
                f"{layer}: `{argument}` must have shape [batch, T, d] with a known model "
                f"size d, got shape {shape}. Embed token ids first (e.g. with "
                f"lablib.layers.TokenAndPositionEmbedding)."
            )
        return int(shape[-1])

    # -- computation ---------------------------------------------------------

    def _norm(self, x, params):
        gamma, beta = params
        return tf.cast(_layer_norm(x, gamma, beta, self.norm_epsilon), self.compute_dtype)

    def _attention(self, weights, query_input, source_input, allowed, training):
        """Multi-head attention: project, attend per head (:meth:`_compute_attention`),
        project the concatenated heads back to ``d``; ``(output [B, T, d], scores)``."""
        query = tf.einsum("btd,dhk->bhtk", query_input, weights["query_kernel"])
        key = tf.einsum("bsd,dhk->bhsk", source_input, weights["key_kernel"])
        value = tf.einsum("bsd,dhv->bhsv", source_input, weights["value_kernel"])
        if self.use_bias:
            query += weights["query_bias"][:, None, :]
            key += weights["key_bias"][:, None, :]
            value += weights["value_bias"][:, None, :]
        heads, scores = self._compute_attention(query, key, value, allowed, training)
        output = tf.einsum("bhtv,hvd->btd", heads, weights["output_kernel"])
        if self.use_bias:
            output += weights["output_bias"]
        return output, scores

    def _compute_attention(self, query, key, value, attention_mask=None, training=None):
        """The attention of every head, from projected queries, keys and values: the
        override point of the blocks, as ``keras.layers.MultiHeadAttention``'s
        ``_compute_attention``.

        The default is scaled dot-product attention (``attend`` in
        ``lablib/layers/attention.py``): weights ``masked_softmax(q k^T / sqrt(k))``
        (:func:`lablib.layers.masked_softmax`) over the keys ``attention_mask`` allows, then
        ``attention_dropout`` on the weights (training only), then the weighted sum of the
        values. A subclass that overrides it (relative positions, another score, a fused
        kernel) changes the attention of the self- and cross-attention of both blocks, and
        nothing else: projections, residuals, normalisation and weights stay as they are.

        Args:
            query: ``[B, H, T, k]``, the projected queries, in the compute dtype.
            key: ``[B, H, S, k]``, the projected keys.
            value: ``[B, H, S, v]``, the projected values.
            attention_mask: optional bool, broadcastable to ``[B, H, T, S]``: True where
                query ``t`` may attend to key ``s`` (padding, causal and explicit masks
                combined already).
            training: whether dropout is active.

        Returns:
            ``(attention_output [B, H, T, v], attention_scores [B, H, T, S])``; the
            scores are what ``return_attention_scores=True`` returns (before dropout).
        """

        def dropout(scores):
            return self._attention_dropout_layer(scores, training=training)

        return attend(
            query,
            key,
            value,
            attention_mask,
            dropout=dropout if self.attention_dropout > 0 else None,
        )

    def _feed_forward(self, x, training):
        hidden = tf.matmul(x, self.intermediate_kernel) + self.intermediate_bias
        hidden = self._inner_activation_fn(hidden)
        hidden = self._inner_dropout_layer(hidden, training=training)
        return tf.matmul(hidden, self.output_kernel) + self.output_bias

    def _want_scores(self, return_attention_scores):
        if return_attention_scores is None:  # not asked: the deprecated constructor flag
            return self._scores_by_default
        return bool(return_attention_scores)

    @property
    def num_attention_heads(self):
        """Deprecated name of :attr:`num_heads` (read-only; removed in lablib 0.4)."""
        return self.num_heads

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)):
            return mask[0] if mask else None
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "inner_dim": self.inner_dim,
                "inner_activation": self.inner_activation,
                **weight_options_config(self, _WEIGHT_OPTIONS),
                "use_bias": self.use_bias,
                "norm_first": self.norm_first,
                "norm_epsilon": self.norm_epsilon,
                "output_dropout": self.output_dropout,
                "attention_dropout": self.attention_dropout,
                "inner_dropout": self.inner_dropout,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
            }
        )
        if self._scores_by_default:  # saved so that a model built that way loads the same
            config["return_attention_scores"] = True
        return config
