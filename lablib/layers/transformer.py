"""Transformer encoder and decoder blocks written with TensorFlow ops.

Both blocks create all their weights in ``build`` with ``add_weight`` and compute
multi-head attention themselves (einsum projections + :func:`attend`), so the same
code runs on Keras 3 and on tf_keras (legacy mode), and the encoder's weights have
the shapes of ``tfm.nlp.layers.TransformerEncoderBlock``'s, so they can be copied
from one to the other (see ``tests/layers/test_transformer.py``).

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

from lablib._deprecation import pop_renamed, refuse_unknown
from lablib.layers._common import (
    check_positive_int,
    check_rate,
    clone_initializer,
    keras,
    keras_option,
    register,
    weight_option,
    weight_options_config,
)
from lablib.layers.attention import attend

__all__ = ["TransformerEncoderBlock", "TransformerDecoderBlock"]

_LEGACY = keras.__name__.startswith("tf_keras")

#: The constructor's weight options, saved by ``get_config``.
_WEIGHT_OPTIONS = (
    "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer",
    "kernel_constraint", "bias_constraint", "attention_initializer",
)

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
            kwargs, where, "return_attention_scores", False, False, stacklevel=4,
            note="The constructor flag will go; ask per call: block(x, "
                 "return_attention_scores=True).")
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
        self.kernel_initializer = weight_option("kernel_initializer", kernel_initializer, name)
        self.bias_initializer = weight_option("bias_initializer", bias_initializer, name)
        self.attention_initializer = weight_option(
            "attention_initializer", attention_initializer, name
        )
        self.kernel_regularizer = weight_option("kernel_regularizer", kernel_regularizer, name)
        self.bias_regularizer = weight_option("bias_regularizer", bias_regularizer, name)
        self.kernel_constraint = weight_option("kernel_constraint", kernel_constraint, name)
        self.bias_constraint = weight_option("bias_constraint", bias_constraint, name)
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
            name=f"{prefix}_gamma", shape=(dim,), initializer="ones",
            **({"experimental_autocast": False} if _LEGACY else {"autocast": False}),
        )
        beta = self.add_weight(
            name=f"{prefix}_beta", shape=(dim,), initializer="zeros",
            **({"experimental_autocast": False} if _LEGACY else {"autocast": False}),
        )
        return gamma, beta

    def _build_feed_forward(self, dim):
        self.intermediate_kernel = self._weight("intermediate_kernel", (dim, self.inner_dim), "kernel")
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
        """Multi-head attention: project, attend per head, concatenate, project."""
        query = tf.einsum("btd,dhk->bhtk", query_input, weights["query_kernel"])
        key = tf.einsum("bsd,dhk->bhsk", source_input, weights["key_kernel"])
        value = tf.einsum("bsd,dhv->bhsv", source_input, weights["value_kernel"])
        if self.use_bias:
            query += weights["query_bias"][:, None, :]
            key += weights["key_bias"][:, None, :]
            value += weights["value_bias"][:, None, :]

        def dropout(scores):
            return self._attention_dropout_layer(scores, training=training)

        heads, scores = attend(
            query, key, value, allowed,
            dropout=dropout if self.attention_dropout > 0 else None,
        )
        output = tf.einsum("bhtv,hvd->btd", heads, weights["output_kernel"])
        if self.use_bias:
            output += weights["output_bias"]
        return output, scores

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


@register
class TransformerEncoderBlock(_TransformerBlock):
    """One transformer encoder block: multi-head self-attention and feed-forward.

    Post-norm (default, the course's encoder summary and Vaswani et al.)::

        z = LayerNorm(x + Dropout(MultiHead(x, x, x)))
        y = LayerNorm(z + Dropout(W2 act(W1 z + b1) + b2))

    Pre-norm (``norm_first=True``): ``z = x + MultiHead(LN(x))``,
    ``y = z + FFN(LN(z))``. The constructor follows
    ``tfm.nlp.layers.TransformerEncoderBlock`` (same argument names and defaults,
    same weight shapes, so weights copied from a tfm block give the same outputs) but for
    the heads, named ``num_heads`` as in ``keras.layers.MultiHeadAttention``.
    tfm-only options (``use_rms_norm``, ``linformer_dim``...) are refused unless they
    have tfm's default value. One difference: tfm applies ``attention_dropout`` also
    to the attention output; here ``output_dropout`` is used there, as its tfm
    docstring describes.

    Args:
        num_heads: number of attention heads H (``num_attention_heads``, tfm's name,
            is accepted, with a warning, until lablib 0.4); the model size d (last
            axis of the inputs) must be divisible by it unless ``key_dim`` is given.
        inner_dim: hidden size of the two-layer feed-forward network.
        inner_activation: activation of the feed-forward hidden layer ("relu",
            "gelu", or a function).
        kernel_initializer: initializer of all kernels ("glorot_uniform").
        bias_initializer: initializer of all biases ("zeros").
        kernel_regularizer, bias_regularizer: optional regularizers.
        kernel_constraint, bias_constraint: optional constraints.
        use_bias: whether the attention projections have biases (True). The
            feed-forward layers always do, as in tfm.
        norm_first: False (default): post-norm, ``LayerNorm(x + sublayer(x))``, as
            in Vaswani et al. and the course; True: pre-norm,
            ``x + sublayer(LayerNorm(x))``.
        norm_epsilon: layer-normalisation epsilon (1e-12, tfm's default).
        output_dropout: dropout on each sub-layer's output before the residual
            addition (Vaswani et al., section 5.4).
        attention_dropout: dropout on the attention weights.
        inner_dropout: dropout after the feed-forward activation.
        attention_initializer: initializer of the attention kernels (defaults to
            ``kernel_initializer``).
        key_dim: size per head of queries and keys (default ``d // H``).
        value_dim: size per head of values (default ``key_dim``).
        use_query_residual: whether the attention sub-layer has a residual
            connection (True, as tfm).
        **kwargs: standard layer arguments (``name``, ``dtype``...).

    Call arguments:
        inputs: float tensor ``[B, T, d]``; or ``[inputs, attention_mask]`` as tfm.
        attention_mask: optional ``[B, T, T]`` bool/0-1, True where query i may attend
            to key j.
        mask: Keras padding mask ``[B, T]`` (True for real tokens), passed
            automatically from e.g. ``Embedding(mask_zero=True)`` or
            :class:`TokenAndPositionEmbedding`; padding keys get no attention, so
            padding never changes the outputs of real tokens. Combined with
            ``attention_mask`` if both are given. The mask is passed on.
        training: whether dropout is active (set by Keras).
        return_attention_scores: False (default): return the outputs only; True:
            also return the attention weights, as ``keras.layers.MultiHeadAttention``.

    Returns:
        ``[B, T, d]``; with ``return_attention_scores=True``: ``(outputs,
        attention_scores [B, H, T, T])``.

    Raises:
        ValueError: bad constructor arguments (the message names the argument, the
            value given and what is expected), or inputs not of shape ``[B, T, d]``.

    Example:

    >>> tokens = keras.Input(shape=(128,), dtype="int32")
    >>> x = TokenAndPositionEmbedding(20000, 128, 64)(tokens)     # mask_zero=True
    >>> x = TransformerEncoderBlock(4, 128, "relu", output_dropout=0.1)(x)
    >>> x = keras.layers.GlobalAveragePooling1D()(x)              # ignores padding
    >>> model = keras.Model(tokens, keras.layers.Dense(46, "softmax")(x))
    """

    _layer_name = "TransformerEncoderBlock"

    def __init__(self, num_heads=None, inner_dim=None, inner_activation=None,
                 use_query_residual=True, **kwargs):
        super().__init__(num_heads, inner_dim, inner_activation, **kwargs)
        if not isinstance(use_query_residual, bool):
            raise ValueError(
                f"TransformerEncoderBlock: `use_query_residual` must be True or False, "
                f"got {use_query_residual!r}."
            )
        self.use_query_residual = use_query_residual

    def build(self, input_shape):
        if isinstance(input_shape, (list, tuple)) and input_shape and isinstance(
            input_shape[0], (list, tuple, tf.TensorShape)
        ):
            input_shape = input_shape[0]  # [inputs, attention_mask] as tfm
        dim = self._check_input_shape(input_shape, "TransformerEncoderBlock", "inputs")
        self._self_attention = self._build_attention("self_attention", dim, dim)
        self._attention_norm = self._build_norm("self_attention_layer_norm", dim)
        self._build_feed_forward(dim)
        self._output_norm = self._build_norm("output_layer_norm", dim)
        self._model_dim = dim
        super().build(input_shape)

    def call(self, inputs, attention_mask=None, mask=None, training=None,
             return_attention_scores=None):
        if isinstance(inputs, (list, tuple)):
            if len(inputs) != 2:
                raise ValueError(
                    f"TransformerEncoderBlock: list inputs must be [inputs, "
                    f"attention_mask] (tfm's form), got a list of {len(inputs)} tensors."
                )
            if attention_mask is not None:
                raise ValueError(
                    "TransformerEncoderBlock: `attention_mask` was given twice (in the "
                    "inputs list and as an argument); pass it once."
                )
            inputs, attention_mask = inputs
            if isinstance(mask, (list, tuple)):
                mask = mask[0]
        if mask is None:
            mask = _keras_mask(inputs)
        allowed = None
        if mask is not None:
            allowed = _as_bool_mask(mask, "mask", "TransformerEncoderBlock", 2)[:, None, None, :]
        if attention_mask is not None:
            explicit = _as_bool_mask(attention_mask, "attention_mask", "TransformerEncoderBlock", 3)
            explicit = explicit[:, None, :, :]
            allowed = explicit if allowed is None else tf.logical_and(allowed, explicit)

        x = inputs
        target = self._norm(x, self._attention_norm) if self.norm_first else x
        attended, scores = self._attention(self._self_attention, target, target, allowed, training)
        attended = self._output_dropout_layer(attended, training=training)
        if self.norm_first:
            z = x + attended if self.use_query_residual else attended
        else:
            z = target + attended if self.use_query_residual else attended
            z = self._norm(z, self._attention_norm)
        inner_input = self._norm(z, self._output_norm) if self.norm_first else z
        layer_output = self._feed_forward(inner_input, training)
        layer_output = self._output_dropout_layer(layer_output, training=training)
        if self.norm_first:
            outputs = z + layer_output
        else:
            outputs = self._norm(z + layer_output, self._output_norm)
        if self._want_scores(return_attention_scores):
            return outputs, scores
        return outputs

    def get_config(self):
        config = super().get_config()
        config["use_query_residual"] = self.use_query_residual
        return config


@register
class TransformerDecoderBlock(_TransformerBlock):
    """One transformer decoder block: causal self-attention, cross-attention, FFN.

    As the course describes the decoder (three sub-layers, each with a residual
    connection and layer normalisation; Vaswani et al., section 3.1), post-norm::

        a = LayerNorm(y + Dropout(MultiHead(y, y, y, causal)))     # masked self-attn
        c = LayerNorm(a + Dropout(MultiHead(a, enc, enc)))         # cross-attention
        out = LayerNorm(c + Dropout(FFN(c)))

    Queries of the cross-attention come from the decoder, keys and values from the
    encoder outputs. Position t of the decoder sees decoder positions <= t only, so
    changing a later decoder token never changes earlier outputs. With
    ``norm_first=True`` each sub-layer is ``x + sublayer(LayerNorm(x))`` instead.

    Args:
        num_heads: number of attention heads H (``num_attention_heads``, tfm's name,
            is accepted, with a warning, until lablib 0.4); the model size d (last
            axis of the inputs) must be divisible by it unless ``key_dim`` is given.
        inner_dim: hidden size of the two-layer feed-forward network.
        inner_activation: activation of the feed-forward hidden layer ("relu",
            "gelu", or a function).
        kernel_initializer: initializer of all kernels ("glorot_uniform").
        bias_initializer: initializer of all biases ("zeros").
        kernel_regularizer, bias_regularizer: optional regularizers.
        kernel_constraint, bias_constraint: optional constraints.
        use_bias: whether the attention projections have biases (True). The
            feed-forward layers always do, as in tfm.
        norm_first: False (default): post-norm, ``LayerNorm(x + sublayer(x))``, as
            in Vaswani et al. and the course; True: pre-norm,
            ``x + sublayer(LayerNorm(x))``.
        norm_epsilon: layer-normalisation epsilon (1e-12, tfm's default).
        output_dropout: dropout on each sub-layer's output before the residual
            addition (Vaswani et al., section 5.4).
        attention_dropout: dropout on the attention weights.
        inner_dropout: dropout after the feed-forward activation.
        attention_initializer: initializer of the attention kernels (defaults to
            ``kernel_initializer``).
        key_dim: size per head of queries and keys (default ``d // H``).
        value_dim: size per head of values (default ``key_dim``).
        **kwargs: standard layer arguments (``name``, ``dtype``...).

    Call arguments:
        inputs: the decoder's inputs, float tensor ``[B, T_dec, d]``.
        encoder_outputs: float tensor ``[B, T_enc, d_enc]`` (``d_enc`` may differ
            from ``d``; in tf_keras mode call ``block.build(decoder_shape,
            encoder_shape)`` first if it does, since tf_keras builds from the first
            input only).
        inputs_mask: Keras mask ``[B, T_dec]`` of the decoder inputs (passed
            automatically from e.g. :class:`TokenAndPositionEmbedding`); padding
            decoder keys get no attention. Passed on as the output mask. (Named
            ``decoder_inputs_mask`` before lablib 0.2; that name warns until 0.4.)
        encoder_outputs_mask: Keras mask ``[B, T_enc]`` of the encoder outputs (also
            read automatically); padding encoder positions get no cross-attention.
        training: whether dropout is active (set by Keras).
        return_attention_scores: False (default): return the outputs only; True:
            also return both attention weights.

    Returns:
        ``[B, T_dec, d]``; with ``return_attention_scores=True``: ``(outputs,
        self_attention_scores [B, H, T_dec, T_dec], cross_attention_scores
        [B, H, T_dec, T_enc])``.

    Raises:
        ValueError: bad constructor arguments, or inputs of the wrong shape.

    Example:

    >>> source = keras.Input(shape=(None,), dtype="int32")
    >>> target = keras.Input(shape=(None,), dtype="int32")
    >>> encoded = TokenAndPositionEmbedding(8000, 64, 32)(source)
    >>> encoded = TransformerEncoderBlock(2, 64, "relu")(encoded)
    >>> decoded = TokenAndPositionEmbedding(8000, 64, 32)(target)
    >>> decoded = TransformerDecoderBlock(2, 64, "relu")(decoded, encoded)
    >>> logits = keras.layers.Dense(8000)(decoded)
    """

    _layer_name = "TransformerDecoderBlock"

    def build(self, inputs_shape, encoder_outputs_shape=None):
        # Keras 3 passes one shape per tensor argument of ``call``, named after it.
        dim = self._check_input_shape(inputs_shape, "TransformerDecoderBlock", "inputs")
        if encoder_outputs_shape is None:
            source_dim = dim  # tf_keras passes the first input's shape only
        else:
            source_dim = self._check_input_shape(
                encoder_outputs_shape, "TransformerDecoderBlock", "encoder_outputs"
            )
        self._self_attention = self._build_attention("self_attention", dim, dim)
        self._self_attention_norm = self._build_norm("self_attention_layer_norm", dim)
        self._cross_attention = self._build_attention("cross_attention", dim, source_dim)
        self._cross_attention_norm = self._build_norm("cross_attention_layer_norm", dim)
        self._build_feed_forward(dim)
        self._output_norm = self._build_norm("output_layer_norm", dim)
        self._model_dim, self._source_dim = dim, source_dim
        self.built = True

    def _sublayer(self, x, norm, compute, training):
        if self.norm_first:
            result = compute(self._norm(x, norm))
            update = result[0] if isinstance(result, tuple) else result
            return x + self._output_dropout_layer(update, training=training), result
        result = compute(x)
        update = result[0] if isinstance(result, tuple) else result
        update = self._output_dropout_layer(update, training=training)
        return self._norm(x + update, norm), result

    def call(self, inputs, encoder_outputs=None, inputs_mask=None,
             encoder_outputs_mask=None, training=None, return_attention_scores=None,
             **kwargs):
        layer = "TransformerDecoderBlock"
        # tf_keras passes the inputs' Keras mask as `mask` to a call that takes **kwargs.
        passed_mask = kwargs.pop("mask", None)
        inputs_mask = pop_renamed(kwargs, f"{layer}.call", "decoder_inputs_mask", inputs_mask)
        if inputs_mask is None and passed_mask is not None and not isinstance(passed_mask, (list, tuple)):
            inputs_mask = passed_mask
        refuse_unknown(kwargs, f"{layer}.call()", "the block is called as block(inputs, "
                       "encoder_outputs, inputs_mask=None, encoder_outputs_mask=None, "
                       "training=None, return_attention_scores=False)")
        if encoder_outputs is None:
            raise ValueError(
                f"{layer}: call it as block(inputs, encoder_outputs); "
                f"encoder_outputs is None."
            )
        decoder_inputs = inputs
        if encoder_outputs_mask is None:
            encoder_outputs_mask = _keras_mask(encoder_outputs)
        if inputs_mask is None:
            inputs_mask = _keras_mask(decoder_inputs)
        encoder_outputs = tf.cast(encoder_outputs, self.compute_dtype)
        got = encoder_outputs.shape[-1]
        if got is not None and got != self._source_dim:
            raise ValueError(
                f"{layer}: encoder_outputs have size {got} on their last axis but the "
                f"block was built for {self._source_dim}. Build the block for both "
                f"inputs with block.build(decoder_shape, encoder_shape), or give the "
                f"encoder and decoder the same model size."
            )

        length = tf.shape(decoder_inputs)[1]
        positions = tf.range(length)
        self_allowed = (positions[:, None] >= positions[None, :])[None, None, :, :]
        if inputs_mask is not None:
            keys = _as_bool_mask(inputs_mask, "inputs_mask", layer, 2)
            self_allowed = tf.logical_and(self_allowed, keys[:, None, None, :])
        cross_allowed = None
        if encoder_outputs_mask is not None:
            keys = _as_bool_mask(encoder_outputs_mask, "encoder_outputs_mask", layer, 2)
            cross_allowed = keys[:, None, None, :]

        x, (_, self_scores) = self._sublayer(
            decoder_inputs, self._self_attention_norm,
            lambda h: self._attention(self._self_attention, h, h, self_allowed, training),
            training,
        )
        x, (_, cross_scores) = self._sublayer(
            x, self._cross_attention_norm,
            lambda h: self._attention(
                self._cross_attention, h, encoder_outputs, cross_allowed, training
            ),
            training,
        )
        x, _ = self._sublayer(
            x, self._output_norm, lambda h: self._feed_forward(h, training), training
        )
        if self._want_scores(return_attention_scores):
            return x, self_scores, cross_scores
        return x
