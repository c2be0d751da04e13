"""Positional information for transformers: sinusoidal encodings and embeddings.

Self-attention is permutation-equivariant (it has no notion of order), so the
position of each token is added to its embedding before the first block.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from lablib.layers._common import (
    check_choice,
    check_positive_int,
    clone_initializer,
    keras,
    register,
)


def not_equal(x, value):
    """``x != value`` for tensors and for Keras 3 symbolic tensors (in compute_mask)."""
    ops = getattr(keras, "ops", None)
    if ops is not None:  # Keras 3: KerasTensors need keras.ops
        return ops.not_equal(x, value)
    return tf.not_equal(x, tf.cast(value, x.dtype))


__all__ = ["positional_encoding", "PositionalEncoding", "TokenAndPositionEmbedding"]


def positional_encoding(length, depth):
    """The sinusoidal positional encoding of Vaswani et al. (2017), ``[length, depth]``.

    For position ``p`` and column pair ``(2i, 2i + 1)``::

        PE[p, 2i]     = sin(p / 10000^(2i / depth))
        PE[p, 2i + 1] = cos(p / 10000^(2i / depth))

    Both columns of a pair share **one** frequency ``w_i = 10000^(-2i/depth)``.

    A note on the lab slide (course part 003): it writes the exponent with the column
    index ``j`` itself, ``10000^(2j/d)``, for even and odd ``j``, and its ``p_1``
    example starts with a cosine. Both differ from the paper, and the paper is right:
    only when the sine and cosine of a pair use the same frequency is
    ``(PE[p+k, 2i], PE[p+k, 2i+1])`` a rotation of ``(PE[p, 2i], PE[p, 2i+1])`` by
    the angle ``k * w_i`` (angle-addition formulas), so that ``PE[p + k]`` is a linear
    function of ``PE[p]`` for every fixed offset ``k`` -- the property the paper
    chose the encoding for ("the model can easily learn to attend by relative
    positions"). With ``2j`` in the exponent the pair's frequencies differ and no such
    linear map exists; with sin/cos swapped the encoding still works but is not the
    one described. Here ``2i = 2 * (j // 2)``: even column ``j`` is a sine, odd column
    ``j`` the cosine of the same frequency.

    An odd ``depth`` is allowed: the last column is then the sine of a pair whose
    cosine would fall outside the table.

    Args:
        length: number of positions (rows), a positive int.
        depth: encoding size (columns), a positive int, usually the embedding size.

    Returns:
        NumPy float32 array ``[length, depth]``, computed in float64 then rounded.

    Raises:
        ValueError: ``length`` or ``depth`` is not a positive integer.

    Example:

    >>> pe = positional_encoding(50, 16)
    >>> pe.shape, pe.dtype
    ((50, 16), dtype('float32'))
    >>> pe[0, :4]          # sin(0), cos(0), sin(0), cos(0)
    array([0., 1., 0., 1.], dtype=float32)
    """
    length = check_positive_int("length", length, "positional_encoding")
    depth = check_positive_int("depth", depth, "positional_encoding")
    positions = np.arange(length, dtype=np.float64)[:, None]
    pair_index = np.arange(depth) // 2  # i for column j = 2i or 2i + 1
    frequencies = np.power(10000.0, -2.0 * pair_index / depth)
    angles = positions * frequencies[None, :]
    encoding = np.where(np.arange(depth) % 2 == 0, np.sin(angles), np.cos(angles))
    return encoding.astype(np.float32)


def _check_length(inputs, max_length, layer, axis):
    """Raise (static T) or assert (run-time T) that the sequence fits max_length.

    Returns the sequence length (an int, or a scalar tensor) and a list of control
    dependencies that must run before the table is sliced.
    """
    static = inputs.shape[axis] if inputs.shape.rank is not None else None
    if static is not None:
        if static > max_length:
            raise ValueError(
                f"{layer}: the inputs have T={static} positions (shape "
                f"{inputs.shape.as_list()}) but the layer was built with "
                f"max_length={max_length}. Create the layer with max_length >= {static}, "
                f"or cut the sequences to at most {max_length} tokens (e.g. "
                f"keras.utils.pad_sequences(..., maxlen={max_length}))."
            )
        return static, []
    length = tf.shape(inputs)[axis]
    check = tf.debugging.assert_less_equal(
        length,
        tf.constant(max_length, length.dtype),
        message=(
            f"{layer}: the inputs have more positions T than max_length={max_length}. "
            f"Create the layer with a larger max_length, or cut the sequences to at "
            f"most {max_length} tokens (e.g. keras.utils.pad_sequences(..., "
            f"maxlen={max_length}))."
        ),
    )
    return length, [check]


def _initializer_config(initializer):
    return keras.initializers.serialize(keras.initializers.get(initializer))


@register
class PositionalEncoding(keras.layers.Layer):
    """Adds the sinusoidal positional encoding to a sequence of embeddings.

    ``outputs = inputs + positional_encoding(max_length, d)[:T]``, the encoding cast
    to the layer's compute dtype (float16 under ``mixed_float16``). The layer has no
    weights; the table is computed once in ``build`` from the input's last axis.

    Args:
        max_length: the largest sequence length T the layer accepts (a positive int).
        **kwargs: standard layer arguments (``name``, ``dtype``...).

    Call arguments:
        inputs: float tensor ``[B, T, d]`` (any ``[..., T, d]`` works), with
            ``T <= max_length``.
        mask: optional Keras mask ``[B, T]``; it is passed on unchanged.

    Returns:
        Tensor of the same shape as ``inputs``.

    Raises:
        ValueError: ``max_length`` is not a positive int, the input's last axis is
            unknown, or T > ``max_length`` (at run time an ``InvalidArgumentError``
            with the same explanation, when T is only known then).

    Example:

    >>> tokens = keras.Input(shape=(None,), dtype="int32")
    >>> x = keras.layers.Embedding(10000, 64, mask_zero=True)(tokens)
    >>> x = PositionalEncoding(max_length=256)(x)   # mask from Embedding kept
    """

    def __init__(self, max_length, **kwargs):
        super().__init__(**kwargs)
        self.max_length = check_positive_int("max_length", max_length, "PositionalEncoding")
        self.supports_masking = True
        self._table = None

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        if len(input_shape) < 2 or input_shape[-1] is None:
            raise ValueError(
                f"PositionalEncoding: inputs must have shape [batch, T, d] with a known "
                f"embedding size d, got shape {input_shape}."
            )
        self._table = positional_encoding(self.max_length, int(input_shape[-1]))
        super().build(input_shape)

    def call(self, inputs, mask=None, training=None):
        del training  # a fixed table; accepted so that every layer is called alike
        length, checks = _check_length(inputs, self.max_length, "PositionalEncoding", -2)
        with tf.control_dependencies(checks):
            table = tf.constant(self._table)[:length]
        return inputs + tf.cast(table, inputs.dtype)

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_length": self.max_length})
        return config


@register
class TokenAndPositionEmbedding(keras.layers.Layer):
    """Token embedding plus position information, the input stage of a transformer.

    ``outputs[b, t] = s * token_embedding[ids[b, t]] + position[t]`` where ``position``
    is the fixed sinusoidal table (:func:`positional_encoding`) or a learned
    ``[max_length, embedding_dim]`` table, and ``s`` is ``sqrt(embedding_dim)`` with
    ``scale_embeddings=True`` (Vaswani et al., section 3.4), 1 otherwise.

    Why the factor matters in training: it changes how fast the token embeddings move,
    not only where they start. With Adam each weight moves by about the learning rate
    per step, whatever the gradient's scale, so ``s * w`` moves ``s`` times faster than
    ``w``; scaling the initializer down by ``s`` instead gives the same start but
    ``s`` times slower token embeddings (8 times at ``embedding_dim=64``).

    Args:
        vocabulary_size: number of token ids (ids are in ``[0, vocabulary_size)``).
        max_length: the largest sequence length T accepted.
        embedding_dim: size of each embedding vector.
        positional: ``"sinusoidal"`` (fixed, Vaswani et al.) or ``"learned"``.
        mask_zero: if True, id 0 is padding: the layer outputs a Keras mask
            (``ids != 0``) that later layers (e.g. :class:`TransformerEncoderBlock`,
            ``GlobalAveragePooling1D``) use to ignore padding.
        embeddings_initializer: initializer of the token (and learned position)
            tables, ``"uniform"`` by default like ``keras.layers.Embedding``.
        scale_embeddings: if True, multiply the token embeddings (not the positions)
            by ``sqrt(embedding_dim)`` before adding the positions, as the paper does
            and as ``Embedding(...)(ids) * sqrt(d) + positional_encoding`` would.
        **kwargs: standard layer arguments (``name``, ``dtype``...).

    Call arguments:
        inputs: integer token ids ``[B, T]``, ``T <= max_length``.

    Returns:
        Float tensor ``[B, T, embedding_dim]`` in the compute dtype.

    Raises:
        ValueError: bad constructor arguments, or T > ``max_length``.

    Example:

    >>> tokens = keras.Input(shape=(200,), dtype="int32")
    >>> x = TokenAndPositionEmbedding(10000, 200, 64)(tokens)
    >>> x = TransformerEncoderBlock(2, 128, "relu")(x)     # padding ignored
    >>> x = keras.layers.GlobalAveragePooling1D()(x)       # masked mean
    """

    def __init__(
        self,
        vocabulary_size,
        max_length,
        embedding_dim,
        positional="sinusoidal",
        mask_zero=True,
        embeddings_initializer="uniform",
        scale_embeddings=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        layer = "TokenAndPositionEmbedding"
        self.vocabulary_size = check_positive_int("vocabulary_size", vocabulary_size, layer)
        self.max_length = check_positive_int("max_length", max_length, layer)
        self.embedding_dim = check_positive_int("embedding_dim", embedding_dim, layer)
        self.positional = check_choice("positional", positional, ("sinusoidal", "learned"), layer)
        if not isinstance(mask_zero, bool):
            raise ValueError(f"{layer}: `mask_zero` must be True or False, got {mask_zero!r}.")
        self.mask_zero = mask_zero
        if not isinstance(scale_embeddings, bool):
            raise ValueError(
                f"{layer}: `scale_embeddings` must be True or False, got {scale_embeddings!r}."
            )
        self.scale_embeddings = scale_embeddings
        try:
            self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        except (ValueError, TypeError) as error:
            raise ValueError(
                f"{layer}: `embeddings_initializer` must be a Keras initializer or its "
                f"name (e.g. 'uniform'), got {embeddings_initializer!r} ({error})."
            ) from None
        self.supports_masking = mask_zero
        self._table = None

    def build(self, input_shape):
        self.token_embeddings = self.add_weight(
            name="token_embeddings",
            shape=(self.vocabulary_size, self.embedding_dim),
            initializer=clone_initializer(self.embeddings_initializer),
        )
        if self.positional == "learned":
            self.position_embeddings = self.add_weight(
                name="position_embeddings",
                shape=(self.max_length, self.embedding_dim),
                initializer=clone_initializer(self.embeddings_initializer),
            )
        else:
            self._table = positional_encoding(self.max_length, self.embedding_dim)
        super().build(input_shape)

    def call(self, inputs, training=None):
        del training  # no dropout inside; accepted so that every layer is called alike
        ids = tf.convert_to_tensor(inputs)
        if not ids.dtype.is_integer:
            ids = tf.cast(ids, tf.int32)
        length, checks = _check_length(ids, self.max_length, "TokenAndPositionEmbedding", -1)
        checks.append(
            tf.debugging.assert_less(
                ids,
                tf.constant(self.vocabulary_size, ids.dtype),
                message=(
                    f"TokenAndPositionEmbedding: a token id is >= vocabulary_size="
                    f"{self.vocabulary_size}. Create the layer with a larger "
                    f"vocabulary_size, or map rare words to an out-of-vocabulary id."
                ),
            )
        )
        with tf.control_dependencies(checks):
            tokens = tf.gather(tf.convert_to_tensor(self.token_embeddings), ids)
            if self.positional == "learned":
                positions = tf.convert_to_tensor(self.position_embeddings)[:length]
            else:
                positions = tf.constant(self._table)[:length]
        tokens = tf.cast(tokens, self.compute_dtype)
        if self.scale_embeddings:
            tokens = tokens * tf.cast(self.embedding_dim**0.5, self.compute_dtype)
        return tokens + tf.cast(positions, self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return not_equal(inputs, 0)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.embedding_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "max_length": self.max_length,
                "embedding_dim": self.embedding_dim,
                "positional": self.positional,
                "mask_zero": self.mask_zero,
                "embeddings_initializer": _initializer_config(self.embeddings_initializer),
                "scale_embeddings": self.scale_embeddings,
            }
        )
        return config
