"""Scaled dot-product attention and the masks that go with it.

The functions here are plain TensorFlow: they take NumPy arrays or tensors, work
inside ``tf.function(jit_compile=True)`` and under the ``mixed_float16`` policy, and
are what lablib's transformer blocks use inside their multi-head attention.

Mask convention (the same as Keras' ``attention_mask``): **True (or 1) where a query
may attend to a key**, False where it may not. A mask only has to be broadcastable to
the attention weights ``[..., T_q, T_k]``, so a causal mask ``[T, T]`` and a padding
mask ``[B, 1, T]`` can be combined with ``&`` and used directly.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from lablib.layers._common import large_negative

__all__ = ["scaled_dot_product_attention", "causal_mask", "padding_mask", "masked_softmax"]


def _as_float_tensor(value, name, dtype=None):
    """``value`` as a floating tensor (integers become float32, or ``dtype``)."""
    if isinstance(value, (tf.Tensor, tf.Variable)) or tf.is_tensor(value):
        tensor = tf.convert_to_tensor(value)
    else:
        try:
            array = np.asarray(value)
        except Exception as error:  # pragma: no cover - exotic inputs
            raise TypeError(
                f"scaled_dot_product_attention: `{name}` must be a NumPy array or a "
                f"tensor, got {type(value).__name__} ({error})."
            ) from None
        if array.dtype == object or not (
            np.issubdtype(array.dtype, np.number) or array.dtype == bool
        ):
            raise TypeError(
                f"scaled_dot_product_attention: `{name}` must hold numbers, got an "
                f"array of dtype {array.dtype}."
            )
        tensor = tf.convert_to_tensor(array)
    if dtype is not None:
        return tf.cast(tensor, dtype)
    if not tensor.dtype.is_floating:
        tensor = tf.cast(tensor, tf.float32)
    return tensor


def _shape_text(tensor) -> str:
    return str(tensor.shape.as_list()) if tensor.shape.rank is not None else "unknown"


def _check_shapes(query, key, value, mask):
    """Static shape checks with errors that name the shapes and the rule broken."""
    fn = "scaled_dot_product_attention"
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.shape.rank is not None and tensor.shape.rank < 2:
            raise ValueError(
                f"{fn}: `{name}` must have shape [..., T, d] (rank >= 2), got shape "
                f"{_shape_text(tensor)}. Add a sequence axis, e.g. `x[None, :]` for a "
                f"single vector."
            )
    # (first, second, axis, the rule): two inputs whose sizes on one axis must agree.
    pairs = (
        ("query", "key", -1, "the same last dimension d (the dot product q.k needs it)"),
        ("key", "value", -2, "the same number of positions T_k (one value per key)"),
    )
    tensors = {"query": query, "key": key, "value": value}
    for first, second, axis, rule in pairs:
        size_a, size_b = tensors[first].shape[axis], tensors[second].shape[axis]
        if size_a is not None and size_b is not None and size_a != size_b:
            raise ValueError(
                f"{fn}: `{first}` and `{second}` must have {rule}, got {first} "
                f"{_shape_text(tensors[first])} and {second} {_shape_text(tensors[second])}."
            )
    t_k = key.shape[-2]
    if mask is None or mask.shape.rank is None:
        return
    t_q = query.shape[-2]
    for axis, size, label in ((-2, t_q, "T_q"), (-1, t_k, "T_k")):
        if mask.shape.rank < -axis:
            continue  # a missing leading axis broadcasts
        got = mask.shape[axis]
        if got is not None and size is not None and got not in (1, size):
            raise ValueError(
                f"{fn}: `mask` must be broadcastable to [..., T_q, T_k] = "
                f"[..., {t_q}, {t_k}], but its axis {axis} has size {got} where "
                f"{label} = {size} (or 1) is needed; mask shape {_shape_text(mask)}. "
                f"A padding mask over keys has shape [B, 1, T_k] "
                f"(lablib.layers.padding_mask)."
            )


def masked_softmax(logits, mask=None, axis=-1):
    """Softmax along ``axis`` over the entries ``mask`` allows; the others get weight 0.

    The softmax of attention (over the keys a query may attend to, lablib's transformer
    blocks and :func:`scaled_dot_product_attention`) and of dense graph attention (over a
    node's senders, :class:`GraphAttention`). Masked entries are set to a large finite
    negative value (no inf, so no NaN in the gradients), the row's maximum is subtracted,
    and masked entries are zeroed after the exponential: a row with no allowed entry gets
    all-zero weights, never NaN. Computed in float32, also for float16 logits (mixed
    precision); the result has the dtype of ``logits``.

    Args:
        logits: float tensor ``[..., T]`` (any rank; ``axis`` picks the softmax axis).
        mask: optional, True/1 where an entry counts, False/0 where it does not; any
            shape broadcastable to ``logits`` (e.g. ``[B, 1, T_k]`` for key padding).
        axis: the axis the weights sum to 1 along.

    Returns:
        Tensor shaped and typed like ``logits``.

    Example:

    >>> masked_softmax([[1.0, 1.0, 5.0], [2.0, 3.0, 4.0]], mask=[[1, 1, 0], [0, 0, 0]]).numpy()
    array([[0.5, 0.5, 0. ],
           [0. , 0. , 0. ]], dtype=float32)
    """
    logits = tf.convert_to_tensor(logits)
    if not logits.dtype.is_floating:
        logits = tf.cast(logits, tf.float32)
    dtype = logits.dtype
    x = tf.cast(logits, tf.float32)
    if mask is None:
        return tf.cast(tf.nn.softmax(x, axis=axis), dtype)
    allowed = tf.cast(mask, tf.bool)
    x = tf.where(allowed, x, tf.constant(large_negative(tf.float32), tf.float32))
    weights = tf.exp(x - tf.reduce_max(x, axis=axis, keepdims=True))
    weights = weights * tf.cast(allowed, tf.float32)
    total = tf.reduce_sum(weights, axis=axis, keepdims=True)
    return tf.cast(tf.math.divide_no_nan(weights, total), dtype)


def attend(query, key, value, allowed=None, dropout=None):
    """The attention computation itself, on tensors already checked (internal).

    ``query [..., T_q, d]``, ``key [..., T_k, d]``, ``value [..., T_k, d_v]``;
    ``allowed`` bool, broadcastable to ``[..., T_q, T_k]``; ``dropout`` an optional
    callable applied to the weights before they mix the values.

    The softmax (:func:`masked_softmax`) runs in float32, also under mixed precision. A
    query whose row of ``allowed`` is all False gets all-zero weights (and a zero output)
    instead of NaN.
    """
    depth = query.shape[-1]
    if depth is None:
        depth = tf.shape(query)[-1]
        scale = tf.math.rsqrt(tf.cast(depth, query.dtype))
    else:
        scale = tf.cast(1.0 / math.sqrt(depth), query.dtype)
    logits = tf.matmul(query * scale, key, transpose_b=True)
    weights = masked_softmax(tf.cast(logits, tf.float32), allowed)
    weights = tf.cast(weights, value.dtype)
    mixing = dropout(weights) if dropout is not None else weights
    outputs = tf.matmul(mixing, value)
    return outputs, weights


def scaled_dot_product_attention(query, key, value, mask=None):
    """Scaled dot-product attention, ``softmax(q k^T / sqrt(d)) v``.

    For each query ``q_i`` the energies are ``e_ij = q_i . k_j / sqrt(d)``, the
    attention weights ``alpha_i = softmax_j(e_ij)`` (over the keys a query may attend
    to), and the output ``o_i = sum_j alpha_ij v_j`` (Vaswani et al., 2017).

    Args:
        query: NumPy array or tensor ``[..., T_q, d]``.
        key: NumPy array or tensor ``[..., T_k, d]`` (same ``d`` as ``query``).
        value: NumPy array or tensor ``[..., T_k, d_v]`` (same ``T_k`` as ``key``).
            Leading ``...`` axes (batch, heads) must broadcast against each other.
            Integer inputs are converted to float32; ``key`` and ``value`` are cast
            to the dtype of ``query``.
        mask: optional, True/1 where query ``i`` may attend to key ``j``, False/0
            where it may not; any shape broadcastable to ``[..., T_q, T_k]``, e.g.
            :func:`causal_mask` ``[T, T]`` or :func:`padding_mask` ``[B, 1, T_k]``.

    Returns:
        ``(outputs, attention_weights)``: ``outputs [..., T_q, d_v]`` and
        ``attention_weights [..., T_q, T_k]`` (each row sums to 1). A query that may
        attend to no key at all gets a row of zeros and a zero output, never NaN.

    Raises:
        ValueError: the shapes do not fit together (the message shows them).
        TypeError: an input is not numeric.

    Example:

    >>> import numpy as np
    >>> x = np.array([[1, 2, 3, 4], [4, 5, 9, 1], [6, 2, 1, 4]], dtype="float32")
    >>> outputs, weights = scaled_dot_product_attention(x, x, x)
    >>> weights.numpy()[0]   # the worked example of the lecture Transformers and GNNs, query 1
    array([5.52...e-04, 9.9911...e-01, 3.35...e-04], dtype=float32)
    >>> outputs.numpy()[0]   # the slide truncates it to [3.99, 4.99, 8.99, 1.00]
    array([3.999..., 4.997..., 8.994..., 1.002...], dtype=float32)
    """
    query = _as_float_tensor(query, "query")
    key = _as_float_tensor(key, "key", dtype=query.dtype)
    value = _as_float_tensor(value, "value", dtype=query.dtype)
    if mask is not None:
        mask = tf.convert_to_tensor(mask)
        if not (mask.dtype.is_bool or mask.dtype.is_integer or mask.dtype.is_floating):
            raise TypeError(
                f"scaled_dot_product_attention: `mask` must be boolean or 0/1 numbers, "
                f"got dtype {mask.dtype.name}."
            )
        if not mask.dtype.is_bool:
            mask = tf.not_equal(mask, tf.zeros([], mask.dtype))
    _check_shapes(query, key, value, mask)
    return attend(query, key, value, allowed=mask)


def causal_mask(length):
    """A ``[length, length]`` boolean lower-triangular mask: query i sees keys j <= i.

    Used for decoders so that a position cannot attend to later positions.

    Args:
        length: the sequence length T, a positive int or a scalar integer tensor
            (e.g. ``tf.shape(x)[1]`` when T is only known at run time).

    Returns:
        bool tensor ``[T, T]`` with ``mask[i, j] = (j <= i)``.

    Raises:
        ValueError: ``length`` is not a positive integer.

    Example:

    >>> causal_mask(3).numpy().astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    if tf.is_tensor(length):
        if length.shape.rank not in (None, 0) or not length.dtype.is_integer:
            raise ValueError(
                f"causal_mask: `length` must be a scalar integer, got a tensor of shape "
                f"{length.shape} and dtype {length.dtype.name}."
            )
        positions = tf.range(length)
    else:
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
            raise ValueError(
                f"causal_mask: `length` must be a positive integer (the sequence length "
                f"T), got {length!r} ({type(length).__name__})."
            )
        if length <= 0:
            raise ValueError(f"causal_mask: `length` must be a positive integer, got {length}.")
        positions = tf.range(int(length))
    return positions[:, None] >= positions[None, :]


def padding_mask(token_ids, pad_id=0):
    """A key-padding mask ``[B, 1, T]``: True for real tokens, False for padding.

    The singleton axis lets it broadcast over the queries, so it can be passed as
    ``mask`` to :func:`scaled_dot_product_attention` directly, or combined with a
    :func:`causal_mask` (``padding_mask(ids) & causal_mask(T)`` is ``[B, T, T]``).

    Args:
        token_ids: integer NumPy array or tensor ``[B, T]`` (any leading axes work).
        pad_id: the id used for padding (0 by default, as Keras' ``pad_sequences``).

    Returns:
        bool tensor ``[B, 1, T]`` (``[..., 1, T]`` for other leading axes).

    Raises:
        ValueError: ``token_ids`` is a scalar or not an integer array.

    Example:

    >>> padding_mask([[5, 7, 0, 0]]).numpy()
    array([[[ True,  True, False, False]]])
    """
    ids = tf.convert_to_tensor(token_ids)
    if not ids.dtype.is_integer:
        raise ValueError(
            f"padding_mask: `token_ids` must be integer token ids, got dtype "
            f"{ids.dtype.name}. Pass the padded id sequences (e.g. from "
            f"keras.utils.pad_sequences), not embeddings."
        )
    if ids.shape.rank is not None and ids.shape.rank < 1:
        raise ValueError("padding_mask: `token_ids` must have shape [B, T] (or [T]), got a scalar.")
    return tf.not_equal(ids, tf.cast(pad_id, ids.dtype))[..., None, :]
