"""Transformer encoder and decoder blocks written with TensorFlow ops.

Both blocks run on Keras 3 and on tf_keras (legacy mode); the encoder has the weights of
``tfm.nlp.layers.TransformerEncoderBlock`` (same names' order and shapes), so weights copy
from one to the other. What they share (arguments, weights, multi-head attention) is in
``lablib/layers/_transformer_base.py``; the attention of every head is computed by
``_compute_attention``, the override point for another attention (see the blocks'
"Subclassing" notes).
"""

from __future__ import annotations

import tensorflow as tf

from lablib._deprecation import pop_renamed, refuse_unknown
from lablib.layers._common import register
from lablib.layers._transformer_base import _as_bool_mask, _keras_mask, _TransformerBlock

__all__ = ["TransformerEncoderBlock", "TransformerDecoderBlock"]


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

    Subclassing: the attention of every head is computed by ``_compute_attention(query,
    key, value, attention_mask=None, training=None)`` (projected ``[B, H, T, k]`` queries,
    ``[B, H, S, k]`` keys, ``[B, H, S, v]`` values, a bool mask broadcastable to
    ``[B, H, T, S]``; returns ``(attention_output [B, H, T, v], attention_scores [B, H, T,
    S])``), the override point of ``keras.layers.MultiHeadAttention``'s name: a subclass
    that overrides it changes how the block attends and keeps its weights, projections,
    residuals and normalisation.

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

    def __init__(
        self,
        num_heads=None,
        inner_dim=None,
        inner_activation=None,
        use_query_residual=True,
        **kwargs,
    ):
        super().__init__(num_heads, inner_dim, inner_activation, **kwargs)
        if not isinstance(use_query_residual, bool):
            raise ValueError(
                f"TransformerEncoderBlock: `use_query_residual` must be True or False, "
                f"got {use_query_residual!r}."
            )
        self.use_query_residual = use_query_residual

    def build(self, input_shape):
        if (
            isinstance(input_shape, (list, tuple))
            and input_shape
            and isinstance(input_shape[0], (list, tuple, tf.TensorShape))
        ):
            input_shape = input_shape[0]  # [inputs, attention_mask] as tfm
        dim = self._check_input_shape(input_shape, "TransformerEncoderBlock", "inputs")
        self._self_attention = self._build_attention("self_attention", dim, dim)
        self._attention_norm = self._build_norm("self_attention_layer_norm", dim)
        self._build_feed_forward(dim)
        self._output_norm = self._build_norm("output_layer_norm", dim)
        self._model_dim = dim
        super().build(input_shape)

    def call(
        self, inputs, attention_mask=None, mask=None, training=None, return_attention_scores=None
    ):
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

    Subclassing: as :class:`TransformerEncoderBlock`, ``_compute_attention`` computes the
    attention of every head, in the masked self-attention and in the cross-attention.

    The constructor takes the arguments of :class:`TransformerEncoderBlock`, with the
    same meanings and defaults, but ``use_query_residual`` (every sub-layer here has its
    residual connection).

    Args:
        num_heads, inner_dim, inner_activation: as for the encoder (heads, hidden size
            and activation of the feed-forward network).
        kernel_initializer, bias_initializer, attention_initializer: as for the encoder.
        kernel_regularizer, bias_regularizer, kernel_constraint, bias_constraint: as
            for the encoder.
        use_bias, norm_first, norm_epsilon: as for the encoder; ``norm_first`` places
            the normalisation of all three sub-layers.
        output_dropout, attention_dropout, inner_dropout: as for the encoder (both
            attentions drop their weights with ``attention_dropout``).
        key_dim, value_dim: as for the encoder, for both attentions.
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

    def call(
        self,
        inputs,
        encoder_outputs=None,
        inputs_mask=None,
        encoder_outputs_mask=None,
        training=None,
        return_attention_scores=None,
        **kwargs,
    ):
        layer = "TransformerDecoderBlock"
        # tf_keras passes the inputs' Keras mask as `mask` to a call that takes **kwargs.
        passed_mask = kwargs.pop("mask", None)
        inputs_mask = pop_renamed(kwargs, f"{layer}.call", "decoder_inputs_mask", inputs_mask)
        if inputs_mask is None and not isinstance(passed_mask, (list, tuple)):
            inputs_mask = passed_mask
        refuse_unknown(
            kwargs,
            f"{layer}.call()",
            "the block is called as block(inputs, "
            "encoder_outputs, inputs_mask=None, encoder_outputs_mask=None, "
            "training=None, return_attention_scores=False)",
        )
        if encoder_outputs is None:
            raise ValueError(
                f"{layer}: call it as block(inputs, encoder_outputs); encoder_outputs is None."
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
            decoder_inputs,
            self._self_attention_norm,
            lambda h: self._attention(self._self_attention, h, h, self_allowed, training),
            training,
        )
        x, (_, cross_scores) = self._sublayer(
            x,
            self._cross_attention_norm,
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
