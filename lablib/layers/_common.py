"""Helpers shared by lablib's layers: registration, argument checks, mask values."""

from __future__ import annotations

import tensorflow as tf

from lablib.backend import get_keras

keras = get_keras()

PACKAGE = "lablib"


def register(cls):
    """Register a layer for ``.keras`` saving under the ``lablib`` package name."""
    return keras.saving.register_keras_serializable(package=PACKAGE)(cls)


def check_positive_int(name: str, value, layer: str) -> int:
    """Return ``value`` as int, or raise ValueError saying what was given and expected."""
    if isinstance(value, bool) or not isinstance(value, (int,)) and not (
        hasattr(value, "__index__")
    ):
        raise ValueError(
            f"{layer}: `{name}` must be a positive integer, got {value!r} "
            f"({type(value).__name__})."
        )
    value = int(value)
    if value <= 0:
        raise ValueError(f"{layer}: `{name}` must be a positive integer, got {value}.")
    return value


def check_rate(name: str, value, layer: str) -> float:
    """Return a dropout rate in [0, 1), or raise ValueError."""
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{layer}: `{name}` must be a float in [0, 1), got {value!r}.") from None
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"{layer}: `{name}` must be in [0, 1), got {rate}.")
    return rate


def check_choice(name: str, value, choices, layer: str) -> str:
    """Return ``value`` if it is one of ``choices`` (strings), else raise ValueError."""
    if value not in choices:
        raise ValueError(
            f"{layer}: `{name}` must be one of {', '.join(repr(c) for c in choices)}, "
            f"got {value!r}."
        )
    return value


def large_negative(dtype) -> float:
    """A large negative number that is finite in ``dtype`` (float16-safe mask value).

    Adding it to a logit drives its softmax weight to 0 without producing inf or NaN,
    also under mixed precision (float16's most negative finite value is -65504).
    """
    dtype = tf.as_dtype(dtype)
    if dtype == tf.float16:
        return -3.0e4
    if dtype == tf.bfloat16:
        return -1.0e9
    return -1.0e9


def masked_fill(logits, allowed, dtype=None):
    """``logits`` where ``allowed`` is True, a large finite negative value elsewhere."""
    dtype = dtype or logits.dtype
    fill = tf.cast(large_negative(dtype), logits.dtype)
    return tf.where(tf.cast(allowed, tf.bool), logits, fill)
