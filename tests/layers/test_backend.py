"""lablib.backend: choosing the Keras mode, and the errors for mixed set-ups.

Each scenario needs a fresh interpreter (TensorFlow binds its Keras at import), so the
scenarios run as child processes that print a verdict.
"""

import os
import pathlib
import subprocess
import sys
import textwrap


ROOT = pathlib.Path(__file__).resolve().parents[2]


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    environment.update(env)
    environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def lines(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return [line for line in result.stdout.splitlines() if line.strip()]


def test_import_lablib_does_not_import_tensorflow():
    out = lines(
        run_python("""
        import sys, lablib
        print("tensorflow" in sys.modules, "keras" in sys.modules)
        lablib.check, lablib.use_keras3, lablib.use_legacy_keras
        print("tensorflow" in sys.modules)
    """)
    )
    assert out == ["False False", "False"]


def test_default_is_keras3_and_legacy_switch_before_import():
    out = lines(
        run_python("""
        import lablib
        from lablib import backend
        print(backend.keras.__name__, lablib.keras_mode())
    """)
    )
    assert out == ["keras keras3"]
    out = lines(
        run_python("""
        import lablib
        print(lablib.use_legacy_keras())
        import tensorflow as tf
        from tensorflow.keras import layers
        from lablib.backend import keras
        print(keras.__name__, tf.keras.layers.Dense.__module__.split(".")[0],
              layers.Dense.__module__.split(".")[0], lablib.is_legacy())
    """)
    )
    assert out == ["legacy", "tf_keras tf_keras tf_keras True"]


def test_exact_float32_turns_tf32_off_for_the_session_and_full_float32_restores():
    """The switch is the same on a CPU (where it changes no result) as on a GPU; an H100
    run of the layer tests with it passed where TF32 had failed 34 of them."""
    out = lines(
        run_python("""
        import lablib
        from lablib import backend
        lablib.use_keras3()
        import tensorflow as tf
        config = tf.config.experimental
        print(config.tensor_float_32_execution_enabled())   # TensorFlow's default
        print(lablib.exact_float32(), config.tensor_float_32_execution_enabled())
        print(lablib.exact_float32(), config.tensor_float_32_execution_enabled())
        config.enable_tensor_float_32_execution(True)
        with backend.full_float32():
            print("inside", config.tensor_float_32_execution_enabled())
        print("after", config.tensor_float_32_execution_enabled())
    """)
    )
    assert out == ["True", "True False", "False False", "inside False", "after True"]


def test_full_float32_never_imports_tensorflow():
    out = lines(
        run_python("""
        import sys
        from lablib import backend
        with backend.full_float32():
            pass
        print("tensorflow" in sys.modules)
    """)
    )
    assert out == ["False"]


def test_switching_after_tensorflow_import_is_refused():
    out = lines(
        run_python("""
        import tensorflow as tf
        import lablib
        try:
            lablib.use_legacy_keras()
        except lablib.KerasModeError as error:
            print("refused:", error)
        print(lablib.keras_mode())
    """)
    )
    assert out[0].startswith("refused:")
    assert "already been imported in Keras 3 mode" in out[0]
    assert "Restart" in out[0] and "use_legacy_keras()" in out[0]
    assert out[1] == "keras3"
    # Choosing the mode that is already active is fine.
    out = lines(
        run_python("""
        import tensorflow as tf
        import lablib
        print(lablib.use_keras3())
    """)
    )
    assert out == ["keras3"]


def test_variable_set_after_tensorflow_import_is_detected():
    out = lines(
        run_python("""
        import os
        import tensorflow as tf
        os.environ["TF_USE_LEGACY_KERAS"] = "1"   # too late: half-working state
        from lablib import backend
        try:
            backend.get_keras()
        except backend.KerasModeError as error:
            print("refused:", error)
    """)
    )
    assert len(out) == 1 and out[0].startswith("refused:")
    assert "changed after TensorFlow was imported" in out[0]


def test_tfm_layer_inside_keras3_model_is_reported():
    out = lines(
        run_python("""
        import lablib
        from lablib import backend
        keras = backend.keras
        try:
            backend.import_tfm()
        except backend.KerasModeError as error:
            print("import_tfm refused")
        import tensorflow_models as tfm   # a student importing it directly

        class Classifier(keras.Model):
            def __init__(self):
                super().__init__()
                self.block = tfm.nlp.layers.TransformerEncoderBlock(2, 16, "relu")
                self.head = keras.layers.Dense(3)

            def call(self, x):
                return self.head(self.block(x))

        try:
            backend.check_model(Classifier())
        except backend.KerasModeError as error:
            print("check_model refused:", error)
        clean = keras.Sequential([keras.layers.Dense(2)])
        backend.check_model(clean)
        print("clean ok")
        try:
            backend.check_model(42)
        except TypeError as error:
            print("TypeError:", error)
    """)
    )
    assert out[0] == "import_tfm refused"
    assert out[1].startswith("check_model refused:")
    assert "TransformerEncoderBlock" in out[1] and "never change" in out[1]
    assert out[2] == "clean ok"
    assert out[3].startswith("TypeError:") and "int" in out[3]


def test_legacy_model_with_tfm_block_passes_check_and_trains():
    out = lines(
        run_python("""
        import lablib
        lablib.use_legacy_keras()
        import numpy as np
        import tensorflow as tf
        from lablib import backend
        tfm = backend.import_tfm()
        inputs = tf.keras.Input((6,), dtype="int32")
        x = tf.keras.layers.Embedding(20, 8)(inputs)
        block = tfm.nlp.layers.TransformerEncoderBlock(2, 16, "relu")
        x = block(x)
        outputs = tf.keras.layers.Dense(2)(tf.keras.layers.GlobalAveragePooling1D()(x))
        model = tf.keras.Model(inputs, outputs)
        backend.check_model(model)
        model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        # The key projection's bias gets no gradient: softmax ignores a constant added
        # to every score of a query. Every other weight of the block must train.
        weights = [w for w in block.trainable_weights
                   if not ("key" in w.name and "bias" in w.name)]
        before = [w.numpy().copy() for w in weights]
        data = np.random.default_rng(0).integers(1, 20, (16, 6))
        model.fit(data, data[:, 0] % 2, epochs=2, verbose=0)
        changed = all(not np.allclose(b, w.numpy()) for b, w in zip(before, weights))
        print("ok", len(weights) >= 10, changed)
    """)
    )
    assert out == ["ok True True"]


def test_the_private_keras_method_wrapped_for_strategies():
    """lablib.backend wraps Keras 3's private ``TensorFlowTrainer._maybe_symbolic_build``
    (why: ``lablib.backend._fix_distributed_build``). This fails when Keras changes what
    the wrapper was written for: the method gone or its signature changed (the wrapper is
    then silently not applied: read the new method and adapt it), or Keras no longer
    averaging the replicas' batches (the wrapper is then needless: drop it). A fake
    trainer and strategy stand in for a multi-device run; the real one, a bool mask
    under two replicas, is test_distribute's
    ``test_dense_graph_model_with_bool_mask_under_mirrored_strategy``."""
    out = lines(
        run_python("""
        import contextlib, inspect
        from lablib import backend
        keras = backend.get_keras()  # Keras 3: applies the wrapper
        import tensorflow as tf
        from keras.src.backend.tensorflow.trainer import TensorFlowTrainer

        method = getattr(TensorFlowTrainer, "_maybe_symbolic_build", None)
        print("wrapped", getattr(method, "_lablib_fix", False))
        original = getattr(method, "__wrapped__", method)
        print("signature", original and inspect.signature(original, follow_wrapped=False))
        if not getattr(method, "_lablib_fix", False):
            raise SystemExit(0)  # the asserts below say what changed

        class PerReplica(tf.distribute.DistributedValues):
            def __init__(self, *values):
                self.values = values

        class Strategy:
            def __init__(self):
                self.reduced = []
            def reduce(self, op, value, axis=None):
                self.reduced.append(op)
                return value
            def scope(self):
                return contextlib.nullcontext()
            def experimental_local_results(self, value):
                return value.values

        class Trainer:
            def __init__(self):
                self._distribute_strategy, self.built = Strategy(), []
            distribute_strategy = property(lambda self: self._distribute_strategy)
            def _symbolic_build(self, data_batch=None):
                self.built.append(data_batch)

        # Two replicas, of different sizes, with a bool mask: what AddN cannot average.
        first = (tf.zeros((2, 3)), tf.constant([[True, False, True]] * 2))
        batch = tuple(PerReplica(value, value[:1]) for value in first)
        def epoch(arity):  # Keras 3.10 yields (step, batches), 3.11 on (first, last, batches)
            return iter([(0,) * (arity - 1) + (iter([batch]),)])

        version = tuple(int(part) for part in keras.__version__.split(".")[:2])
        keras_trainer = Trainer()
        original(keras_trainer, iterator=epoch(2 if version < (3, 11) else 3))
        print("keras averages", keras_trainer._distribute_strategy.reduced,
              keras_trainer.built == [batch])
        for arity in (2, 3):
            wrapped = Trainer()
            method(wrapped, iterator=epoch(arity))
            print("wrapper", arity, wrapped._distribute_strategy.reduced,
                  [a is b for a, b in zip(wrapped.built[0], first)])
    """)
    )
    assert out[1] == "signature (self, iterator=None, data_batch=None)", (
        f"Keras changed the private method lablib.backend wraps: {out[1]}; read it, then "
        "adapt or drop lablib.backend._fix_distributed_build"
    )
    assert out[0] == "wrapped True", f"lablib's wrapper is not applied: {out}"
    assert out[2] == "keras averages ['MEAN'] True", (
        f"Keras no longer averages the replicas' batches before the build ({out[2]}): "
        "lablib.backend._fix_distributed_build is no longer needed; drop it"
    )
    assert out[3:] == ["wrapper 2 [] [True, True]", "wrapper 3 [] [True, True]"]
