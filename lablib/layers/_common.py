"""Helpers shared by lablib's layers: registration, argument checks, the weight options
(initializers, regularizers, constraints: read, cloned, serialized in one way), mask values.

A layer's constructor takes each weight option as an argument of its own and assigns it
by name: the three options of one kind of weight (``kernel``, ``bias``) with
:func:`weight_options` (``self.kernel_initializer, self.kernel_regularizer,
self.kernel_constraint = weight_options(name, "kernel", kernel_initializer,
kernel_regularizer, kernel_constraint)``), any other with :func:`weight_option`. ``build``
creates a weight with its kind's options by :func:`add_weight_of_kind`, and ``get_config``
lists the option names (:func:`weight_option_names`) for :func:`weight_options_config`."""

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
    if (
        isinstance(value, bool)
        or not isinstance(value, (int,))
        and not (hasattr(value, "__index__"))
    ):
        raise ValueError(
            f"{layer}: `{name}` must be a positive integer, got {value!r} ({type(value).__name__})."
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


# --------------------------------------------------------------------------- weight options

#: An option's kind, from the end of its argument name -> (Keras module, example value).
_OPTION_KINDS = {
    "_initializer": (keras.initializers, "glorot_uniform"),
    "_regularizer": (keras.regularizers, "l2"),
    "_constraint": (keras.constraints, "max_norm"),
}


def _option_kind(argument: str):
    for suffix, kind in _OPTION_KINDS.items():
        if argument.endswith(suffix):
            return kind
    raise ValueError(
        f"{argument!r} is not a weight option (its name ends with none of {list(_OPTION_KINDS)})."
    )


def keras_option(module, value, argument: str, layer: str, example):
    """``module.get(value)`` (``module``: ``keras.activations``, ``keras.initializers``...).

    Raises:
        ValueError: saying which argument of which layer got what, and an example.
    """
    try:
        return module.get(value)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"{layer}: `{argument}` must be a Keras {module.__name__.rsplit('.', 1)[-1][:-1]} "
            f"or its name (e.g. {example!r}), got {value!r} ({error})."
        ) from None


def weight_option(argument: str, value, layer: str):
    """``value`` (a Keras initializer, regularizer or constraint, its name or config, or
    None) as the object, the kind read from ``argument``'s name (``kernel_initializer``)."""
    module, example = _option_kind(argument)
    return keras_option(module, value, argument, layer, example)


#: The options each kind of weight has, in the order of Keras' arguments.
_OPTIONS_OF_A_KIND = ("initializer", "regularizer", "constraint")


def weight_options(layer: str, kind: str, initializer, regularizer, constraint) -> tuple:
    """``(initializer, regularizer, constraint)`` of the weights of one ``kind``
    (``"kernel"``, ``"bias"``), each read and checked by :func:`weight_option` under its
    argument's name (``f"{kind}_initializer"``...), so an error names the argument."""
    values = (initializer, regularizer, constraint)
    return tuple(
        weight_option(f"{kind}_{option}", value, layer)
        for option, value in zip(_OPTIONS_OF_A_KIND, values)
    )


def weight_option_names(*kinds: str) -> tuple:
    """The argument names of the options of ``kinds``, as Keras orders them (initializers,
    then regularizers, then constraints): ``weight_option_names("kernel", "bias")`` is
    ``("kernel_initializer", "bias_initializer", "kernel_regularizer", ...)``."""
    return tuple(f"{kind}_{option}" for option in _OPTIONS_OF_A_KIND for kind in kinds)


def add_weight_of_kind(layer, name: str, shape, kind: str, clone: bool = False):
    """``layer.add_weight(name=name, shape=shape)`` with the layer's options of ``kind``:
    its ``{kind}_initializer`` and, where it has them, ``{kind}_regularizer`` and
    ``{kind}_constraint`` (a kind with an initializer only, such as ``attention``, gets
    None). ``clone``: initialize from a fresh copy of the initializer
    (:func:`clone_initializer`), for every weight of a kind but the first."""
    initializer = getattr(layer, f"{kind}_initializer")
    return layer.add_weight(
        name=name,
        shape=shape,
        initializer=clone_initializer(initializer) if clone else initializer,
        regularizer=getattr(layer, f"{kind}_regularizer", None),
        constraint=getattr(layer, f"{kind}_constraint", None),
    )


def serialize_option(argument: str, value):
    """The config of one weight option (None stays None)."""
    module, _ = _option_kind(argument)
    return None if value is None else module.serialize(value)


def weight_options_config(layer, names) -> dict:
    """``{name: config}`` of the weight options ``names`` (attributes of ``layer`` set with
    :func:`weight_option`), for ``get_config``."""
    return {name: serialize_option(name, getattr(layer, name)) for name in names}


def clone_initializer(initializer):
    """A fresh copy of ``initializer`` for each weight: tf_keras returns identical values
    when one unseeded initializer instance creates two weights."""
    return initializer.__class__.from_config(initializer.get_config())
