"""One test harness for every lablib layer, in the spirit of KerasHub's ``run_layer_test``.

A layer's test module describes its layer once per configuration worth checking, as a
:class:`LayerCase` (the constructor's arguments, example inputs, what the output and the
weights must look like), and gets the standard checks from :func:`layer_tests`::

    CASES = [LayerCase("dense", GraphConv, {"units": 4}, dense_inputs(), (2, 5, 4), 2)]
    test_layer, test_layer_legacy = layer_tests(CASES)

:func:`run_layer_test` then checks, for each case and in this order:

1. config: ``from_config(get_config())`` gives the same config, the arguments given
   appear in it, and ``keras.layers.serialize``/``deserialize`` (the registered name)
   gives the same class and config;
2. call: output shape and dtype, finite values, the number of trainable and
   non-trainable weights, a gradient for every trainable weight;
3. training: one Adam step in a functional model changes every trainable weight
   (the trap of a layer of the other Keras: it builds, trains and never changes);
4. saving: the functional model saved to ``.keras`` and loaded gives the same layer
   class, config and outputs;
5. mixed precision: under ``mixed_float16`` the output is float16, finite and close to
   the float32 output with the same weights;
6. XLA: ``tf.function(jit_compile=True)`` gives the eager output.

Both Keras modes: ``test_layer`` runs in the test process (Keras 3); ``test_layer_legacy``
is marked ``legacy``, so a plain run deselects it and ``tests/layers/test_legacy_mode.py``
runs it in a child process with ``TF_USE_LEGACY_KERAS=1`` (tf_keras), as every legacy test.
"""

from __future__ import annotations

import dataclasses
import numpy as np
import pytest
import tensorflow as tf

from lablib.backend import get_keras

keras = get_keras()

#: Constructor arguments whose config holds a serialized object, not the value given.
_SERIALIZED_SUFFIXES = ("_initializer", "_regularizer", "_constraint", "activation")


@dataclasses.dataclass
class LayerCase:
    """One configuration of one layer, and what its output and weights must be.

    Attributes:
        name: the test id.
        layer_class: the layer class.
        init_kwargs: the constructor's arguments.
        inputs: the call's tensors, by argument name, in call order: the first is passed
            positionally (the layer's ``inputs``), the others by name (``adjacency``,
            ``mask``, ``edge_index``, ``encoder_outputs``...). NumPy arrays; the model of
            the saving check gets one ``keras.Input`` per entry, of the array's full shape.
        output_shape: the expected output shape (of the first output).
        num_trainable_weights: the expected number of trainable weights.
        num_non_trainable_weights: the expected number of non-trainable weights.
        call_kwargs: non-tensor call arguments (``num_graphs=3``...).
        output_dtype: the expected output dtype under the float32 policy.
        mixed_tolerance: atol and rtol of the float16 outputs against float32 ones.
        still_weights: names of weights one training step may leave unchanged, for these
            inputs, by the maths (say why in the case).
        run_mixed_precision, run_xla, run_saving, run_training: which checks run.
    """

    name: str
    layer_class: type
    init_kwargs: dict
    inputs: dict
    output_shape: tuple
    num_trainable_weights: int
    num_non_trainable_weights: int = 0
    call_kwargs: dict = dataclasses.field(default_factory=dict)
    output_dtype: str = "float32"
    mixed_tolerance: float = 2e-2
    still_weights: tuple = ()
    run_mixed_precision: bool = True
    run_xla: bool = True
    run_saving: bool = True
    run_training: bool = True

    def __str__(self):
        return self.name


# --------------------------------------------------------------------------- the checks


def _call(layer, tensors: dict, call_kwargs: dict, **extra):
    names = list(tensors)
    first, rest = tensors[names[0]], {name: tensors[name] for name in names[1:]}
    return layer(first, **rest, **call_kwargs, **extra)


def _first(outputs):
    return outputs[0] if isinstance(outputs, (list, tuple)) else outputs


def _numpy(value) -> np.ndarray:
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def _weight_counts(layer):
    return len(layer.trainable_weights), len(layer.non_trainable_weights)


def check_config(case: LayerCase):
    """``from_config(get_config())`` and ``serialize``/``deserialize`` round trips."""
    layer = case.layer_class(**case.init_kwargs)
    config = layer.get_config()
    for argument, value in case.init_kwargs.items():
        if argument.endswith(_SERIALIZED_SUFFIXES) or not isinstance(
            value, (bool, int, float, str, type(None))
        ):
            continue
        assert argument in config, f"{case.name}: `{argument}` is missing from get_config()"
        assert config[argument] == value, (
            f"{case.name}: get_config()[{argument!r}] is {config[argument]!r}, "
            f"the layer was given {value!r}"
        )
    clone = case.layer_class.from_config(config)
    assert type(clone) is case.layer_class
    assert clone.get_config() == config
    revived = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(revived) is case.layer_class, (
        f"{case.name}: the registered name deserialized to {type(revived)}"
    )
    assert revived.get_config() == config


def check_call(case: LayerCase):
    """Shape, dtype, finite values, weight counts, a gradient for each trainable weight.
    Returns the layer, built."""
    layer = case.layer_class(**case.init_kwargs)
    tensors = {name: tf.convert_to_tensor(value) for name, value in case.inputs.items()}
    with tf.GradientTape() as tape:
        outputs = _call(layer, tensors, case.call_kwargs)
        output = _first(outputs)
        projection = tf.constant(np.random.default_rng(0).normal(size=output.shape), output.dtype)
        loss = tf.reduce_sum(output * projection)
    assert tuple(output.shape) == tuple(case.output_shape), (
        f"{case.name}: output shape {tuple(output.shape)}, expected {case.output_shape}"
    )
    assert output.dtype == tf.as_dtype(case.output_dtype)
    assert np.all(np.isfinite(_numpy(output)))
    assert _weight_counts(layer) == (case.num_trainable_weights, case.num_non_trainable_weights), (
        f"{case.name}: (trainable, non-trainable) weights {_weight_counts(layer)}, expected "
        f"{(case.num_trainable_weights, case.num_non_trainable_weights)}"
    )
    gradients = tape.gradient(loss, layer.trainable_weights)
    for weight, gradient in zip(layer.trainable_weights, gradients):
        assert gradient is not None, f"{case.name}: no gradient reaches {weight.name}"
        gradient = _numpy(tf.convert_to_tensor(gradient))
        assert np.all(np.isfinite(gradient)), f"{case.name}: gradient of {weight.name} not finite"
    return layer


def _model(case: LayerCase):
    """A functional model around a fresh layer: one ``keras.Input`` per input tensor."""
    inputs = {
        name: keras.Input(
            batch_shape=np.shape(value), dtype=np.asarray(value).dtype.name, name=name
        )
        for name, value in case.inputs.items()
    }
    outputs = _first(_call(case.layer_class(**case.init_kwargs), inputs, case.call_kwargs))
    return keras.Model(list(inputs.values()), outputs)


def _model_output(model, case):
    return _numpy(model([tf.convert_to_tensor(v) for v in case.inputs.values()]))


def check_training(case: LayerCase):
    """One Adam step on a functional model changes every trainable weight (Adam: a step
    of about the learning rate whatever the gradient's scale, so small gradients count)."""
    model = _model(case)
    assert len(model.trainable_weights) == case.num_trainable_weights
    before = [_numpy(w).copy() for w in model.trainable_weights]
    optimizer = keras.optimizers.Adam(0.01, epsilon=1e-12)
    target = np.random.default_rng(1).normal(size=case.output_shape).astype("float32")
    with tf.GradientTape() as tape:
        output = _first(
            model([tf.convert_to_tensor(v) for v in case.inputs.values()], training=True)
        )
        loss = tf.reduce_mean(tf.square(tf.cast(output, tf.float32) - target))
    gradients = tape.gradient(loss, model.trainable_weights)
    optimizer.apply_gradients(zip(gradients, model.trainable_weights))
    for weight, old in zip(model.trainable_weights, before):
        if weight.name.split("/")[-1].split(":")[0] in case.still_weights:
            continue
        assert not np.allclose(_numpy(weight), old), f"{case.name}: {weight.name} did not train"


def check_saving(case: LayerCase, tmp_path):
    """``.keras`` save and load: same class, config and outputs."""
    model = _model(case)
    path = str(tmp_path / f"{case.name}.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    original = [l for l in model.layers if isinstance(l, case.layer_class)]
    revived = [l for l in loaded.layers if type(l) is case.layer_class]
    assert len(revived) == len(original) == 1, f"{case.name}: the loaded model has {revived}"
    assert revived[0].get_config() == original[0].get_config()
    # Equal up to float32 rounding: a GPU's segment sums add messages in any order.
    np.testing.assert_allclose(
        _model_output(loaded, case), _model_output(model, case), rtol=1e-6, atol=1e-6
    )


def _all_outputs(outputs):
    """Every output tensor, flattened (``(outputs, scores)`` pairs, EdgeAttention...)."""
    return [_numpy(tensor) for tensor in tf.nest.flatten(outputs)]


def check_mixed_precision(case: LayerCase, layer32):
    """Under ``mixed_float16``: float16 output, float32 weights, finite outputs close to
    the float32 ones with the same weights (every output: also attention scores)."""
    tensors = {name: tf.convert_to_tensor(value) for name, value in case.inputs.items()}
    outputs32 = _all_outputs(_call(layer32, tensors, case.call_kwargs))
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        layer16 = case.layer_class(**case.init_kwargs)
        _call(layer16, tensors, case.call_kwargs)
        layer16.set_weights(layer32.get_weights())
        outputs16 = _call(layer16, tensors, case.call_kwargs)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert _first(outputs16).dtype == tf.float16, (
        f"{case.name}: {_first(outputs16).dtype} under mixed_float16"
    )
    for weight in layer16.weights:
        assert tf.as_dtype(weight.dtype) == tf.float32, f"{weight.name} is not float32"
    for got, want in zip(_all_outputs(outputs16), outputs32):
        got = got.astype(np.float32)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, want, atol=case.mixed_tolerance, rtol=case.mixed_tolerance)


def check_xla(case: LayerCase, layer):
    """``tf.function(jit_compile=True)`` gives the eager outputs (all of them)."""
    names = list(case.inputs)
    tensors = [tf.convert_to_tensor(value) for value in case.inputs.values()]

    @tf.function(jit_compile=True)
    def compiled(*tensors):
        return _call(layer, dict(zip(names, tensors)), case.call_kwargs)

    eager = _all_outputs(_call(layer, dict(zip(names, tensors)), case.call_kwargs))
    for got, want in zip(_all_outputs(compiled(*tensors)), eager):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def run_layer_test(case: LayerCase, tmp_path):
    """Every check of the harness on one case, in the active Keras mode. The random seed
    is fixed first, so that a case's initial weights do not depend on the tests before."""
    keras.utils.set_random_seed(0)
    check_config(case)
    layer = check_call(case)
    if case.run_training and case.num_trainable_weights:
        check_training(case)
    if case.run_saving:
        check_saving(case, tmp_path)
    if case.run_mixed_precision:
        check_mixed_precision(case, layer)
    if case.run_xla:
        check_xla(case, layer)


def layer_tests(cases):
    """Two test functions for a module: ``(test_layer, test_layer_legacy)``, each
    parametrized over ``cases``; the second is marked ``legacy`` (tf_keras, run in a child
    process by tests/layers/test_legacy_mode.py)."""
    ids = [case.name for case in cases]

    @pytest.mark.parametrize("case", cases, ids=ids)
    def test_layer(case, tmp_path):
        run_layer_test(case, tmp_path)

    @pytest.mark.legacy
    @pytest.mark.parametrize("case", cases, ids=ids)
    def test_layer_legacy(case, tmp_path):
        assert keras.__name__.startswith("tf_keras")
        run_layer_test(case, tmp_path)

    return test_layer, test_layer_legacy
