"""Which Keras lablib uses, decided in one place.

TensorFlow 2.16+ ships with two Keras implementations:

* **Keras 3** (the ``keras`` package), the default;
* **tf_keras** (Keras 2), which TF Model Garden (``tensorflow_models``, ``tfm``) is
  written against. TensorFlow uses it for ``tf.keras`` only when the environment
  variable ``TF_USE_LEGACY_KERAS=1`` is set *before* TensorFlow is imported.

Mixing the two fails badly: a ``tfm.nlp.layers.TransformerEncoderBlock`` inside a Keras 3
functional model fails at build time, and inside a Keras 3 subclassed model ``fit()``
runs while the block's weights never change. lablib therefore resolves the Keras it
builds its layers with here, and raises :class:`KerasModeError` with instructions as
soon as it can see a mixed set-up.

Usage, in the first cell of a notebook, before anything imports TensorFlow::

    import lablib
    lablib.use_legacy_keras()      # Lab 2: TF Model Garden + tf_keras
    # or lablib.use_keras3()       # the other labs (the default)
    lablib.exact_float32()         # float32 products in full float32 on GPUs too

How float32 is computed is decided here as well: :func:`exact_float32` for a whole
session, :func:`full_float32` around one computation (the graders' probes).

Everywhere else::

    from lablib.backend import keras   # the Keras that lablib's layers subclass
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = [
    "KerasModeError",
    "use_legacy_keras",
    "use_keras3",
    "is_legacy",
    "keras_mode",
    "get_keras",
    "layer_family",
    "check_model",
    "import_tfm",
    "exact_float32",
    "full_float32",
]

_ENV = "TF_USE_LEGACY_KERAS"
_TRUE = {"1", "true", "yes", "on"}

_RESTART = (
    "Restart the Python process (on Colab: Runtime > Restart session), then run "
    "`import lablib; lablib.{call}` as the very first code, before anything imports "
    "TensorFlow, Keras or tensorflow_models."
)


class KerasModeError(RuntimeError):
    """Raised when Keras 3 and tf_keras (Keras 2) are mixed or chosen too late."""


def _env_says_legacy() -> bool:
    return os.environ.get(_ENV, "").strip().lower() in _TRUE


def _tensorflow_keras_family() -> str | None:
    """'legacy' or 'keras3' for the Keras that TensorFlow bound at import, or None.

    ``tensorflow.keras`` is bound once, when TensorFlow is imported; setting the
    environment variable later changes ``tf.keras`` (a lazy loader) but not
    ``from tensorflow.keras import layers``, which is the half-working state
    that this module refuses.
    """
    if "tensorflow" not in sys.modules:
        return None
    module = sys.modules.get("tensorflow.keras")
    if module is None:
        import tensorflow.keras as module  # noqa: F401  (binds it)
    try:
        layer_module = module.layers.Layer.__module__
    except Exception:  # pragma: no cover - very old TensorFlow
        return None
    return "legacy" if layer_module.startswith("tf_keras") else "keras3"


def _switch(legacy: bool) -> str:
    wanted = "legacy" if legacy else "keras3"
    current = _tensorflow_keras_family()
    call = "use_legacy_keras()" if legacy else "use_keras3()"
    if current is not None and current != wanted:
        raise KerasModeError(
            f"lablib.{call} was called after TensorFlow had already been imported in "
            f"{_describe(current)} mode; the Keras mode can only be chosen before "
            f"TensorFlow is imported. " + _RESTART.format(call=call)
        )
    os.environ[_ENV] = "1" if legacy else "0"
    loaded = _loaded_lablib_family()
    if loaded is not None and loaded != wanted:
        raise KerasModeError(
            f"lablib's layers were already built on {_describe(loaded)}; "
            f"lablib.{call} cannot change that. " + _RESTART.format(call=call)
        )
    return wanted


def use_legacy_keras() -> str:
    """Choose tf_keras (Keras 2), needed by TF Model Garden layers. Call it first.

    Sets ``TF_USE_LEGACY_KERAS=1`` so that ``tf.keras``, ``tensorflow.keras`` and
    ``lablib.backend.keras`` all resolve to tf_keras.

    Returns:
        ``"legacy"``.

    Raises:
        KerasModeError: TensorFlow was already imported with Keras 3.
    """
    return _switch(True)


def use_keras3() -> str:
    """Choose Keras 3 (the default). Call it first, before TensorFlow is imported.

    Returns:
        ``"keras3"``.

    Raises:
        KerasModeError: TensorFlow was already imported in legacy (tf_keras) mode.
    """
    return _switch(False)


def _tf32_config():
    """``tf.config.experimental`` when TensorFlow is loaded and has the TF32 switch."""
    tf = sys.modules.get("tensorflow")
    config = getattr(getattr(tf, "config", None), "experimental", None)
    if config is None or not hasattr(config, "enable_tensor_float_32_execution"):
        return None
    return config


def exact_float32() -> bool:
    """Compute float32 matrix products in full float32 for the rest of the session.

    On Ampere and later NVIDIA GPUs (Colab's A100 and L4, an H100) TensorFlow runs
    float32 matrix products and convolutions in TensorFloat-32 by default: 10-bit
    mantissas, relative errors near 1e-3. The labs compare layers with computations
    written by hand in NumPy; on an H100 with TF32 on, Lab 3's ``GraphConv`` differed
    from the by-hand layer by 6.6e-4 and Lab 4's ``GraphAttention`` by 1.3e-3, where a
    CPU gives 1e-7. Calling this (the labs' first cell does) turns TF32 off, eager and
    XLA-compiled code alike, so a GPU agrees with NumPy as a CPU does. On a CPU or an
    older GPU it changes nothing. The cost is speed on large float32 matrix products,
    which the labs' small models do not notice.

    Call it after :func:`use_keras3` / :func:`use_legacy_keras`: it imports TensorFlow.

    Returns:
        True when TF32 was on before the call.
    """
    import tensorflow  # noqa: F401 - after the Keras mode is chosen

    config = _tf32_config()
    if config is None:
        return False
    before = bool(config.tensor_float_32_execution_enabled())
    config.enable_tensor_float_32_execution(False)
    return before


@contextlib.contextmanager
def full_float32() -> Iterator[None]:
    """TensorFloat-32 off inside the block, when TensorFlow is loaded; restored after.

    The graders' probes run in it (``lablib.check`` in a notebook and the grader's
    sandbox alike): their references are float32/float64 NumPy at tolerances down to
    1e-5, so a correct answer must not fail on a TF32 GPU and pass on a CPU. The
    notebook's own setting is put back afterwards. TensorFlow is never imported just
    for this.
    """
    config = _tf32_config()
    if config is None:
        yield
        return
    before = config.tensor_float_32_execution_enabled()
    config.enable_tensor_float_32_execution(False)
    try:
        yield
    finally:
        config.enable_tensor_float_32_execution(before)


def is_legacy() -> bool:
    """True when lablib (and ``tf.keras``) use tf_keras."""
    current = _tensorflow_keras_family()
    if current is not None:
        return current == "legacy"
    return _env_says_legacy()


def keras_mode() -> str:
    """``"legacy"`` (tf_keras) or ``"keras3"``."""
    return "legacy" if is_legacy() else "keras3"


def _describe(mode: str) -> str:
    return "tf_keras (Keras 2, legacy)" if mode == "legacy" else "Keras 3"


_KERAS = None


def _loaded_lablib_family() -> str | None:
    if _KERAS is None:
        return None
    return "legacy" if _KERAS.__name__.startswith("tf_keras") else "keras3"


def get_keras():
    """The Keras module lablib builds on: ``keras`` (3.x) or ``tf_keras``.

    Raises:
        KerasModeError: ``TF_USE_LEGACY_KERAS`` was set after TensorFlow was imported,
            or unset after it was imported in legacy mode.
    """
    global _KERAS
    if _KERAS is not None:
        return _KERAS
    env_legacy = _env_says_legacy()
    current = _tensorflow_keras_family()
    if current is not None and (current == "legacy") != env_legacy:
        call = "use_legacy_keras()" if env_legacy else "use_keras3()"
        raise KerasModeError(
            f"{_ENV}={os.environ.get(_ENV)!r} now, but TensorFlow was imported in "
            f"{_describe(current)} mode: the variable was changed after TensorFlow was "
            f"imported, which leaves tf.keras and tensorflow.keras on different Keras "
            f"versions. " + _RESTART.format(call=call)
        )
    if env_legacy:
        import tf_keras as module
    else:
        import keras as module

        if not module.__version__.startswith("3."):  # pragma: no cover
            raise KerasModeError(
                f"lablib needs Keras 3 but found keras {module.__version__}. "
                f"Run `pip install -U 'keras>=3'`, or call lablib.use_legacy_keras()."
            )
    if not env_legacy:
        _fix_distributed_build()
    _KERAS = module
    return module


def _fix_distributed_build() -> bool:
    """Let Keras 3's ``fit`` / ``evaluate`` / ``predict`` under a ``tf.distribute`` strategy
    take bool inputs and per-replica batches of different shapes. Returns True if applied.

    Before its first step, Keras 3's TensorFlow trainer (``_maybe_symbolic_build``)
    builds the model from one input batch; under a strategy it gets that batch by
    *averaging* every input over the replicas (``strategy.reduce("MEAN", ...)``). The
    average needs an ``AddN``, which TensorFlow has no kernel for on bool tensors (the
    ``mask`` of :func:`lablib.graphs.dense_batch`: ``InvalidArgumentError ... AddN``),
    and which fails for per-replica batches of different shapes (disjoint graph
    batches, where every replica glues its own graphs). Only shapes and dtypes matter
    for the build, so lablib hands Keras the first replica's batch instead: the same
    build, without the average. The layers never see the average; nothing else of
    ``fit`` changes. Applied once, when lablib resolves Keras 3; a Keras without that
    method is left alone.

    A private Keras method, wrapped on purpose: Keras has no public hook for how a model
    is built under a strategy, and without the wrapper a graph model cannot be fitted
    under ``MirroredStrategy`` on a dense batch (its bool mask) or on per-replica disjoint
    batches. Read in Keras 3.10 to 3.15 (Colab has 3.13):
    ``_maybe_symbolic_build(self, iterator=None, data_batch=None)``, where ``iterator``
    yields ``(step, batches)`` (3.10) or ``(first step, last step, batches)`` (3.11 on)
    and a batch of ``DistributedValues`` is reduced with ``strategy.reduce("MEAN", ...)``.
    A Keras whose method has another signature is left alone here (a student's notebook
    must not break on it), and
    ``tests/layers/test_backend.py::test_the_private_keras_method_wrapped_for_strategies``
    fails instead: when the method is gone or its signature changed (read the new one and
    adapt the wrapper), and when Keras stops averaging (drop the wrapper).
    """
    try:
        import tensorflow as tf
        from keras.src import tree
        from keras.src.backend.tensorflow import trainer
    except ImportError:  # another Keras backend, or the layout moved: nothing to fix
        return False
    cls = getattr(trainer, "TensorFlowTrainer", None)
    original = getattr(cls, "_maybe_symbolic_build", None)
    if original is None:
        return False
    if getattr(original, "_lablib_fix", False):
        return True
    import functools
    import inspect

    if list(inspect.signature(original).parameters) != ["self", "iterator", "data_batch"]:
        return False  # a Keras whose method we have not read: leave it alone

    @functools.wraps(original)  # its __doc__, and __wrapped__: the original, for the test
    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = getattr(self, "_distribute_strategy", None)
        if strategy is None or iterator is None:
            return original(self, iterator=iterator, data_batch=data_batch)

        def first_replica(value):
            if isinstance(value, tf.distribute.DistributedValues):
                return strategy.experimental_local_results(value)[0]
            return value

        # as Keras does: the first batch builds the model. The last item of what the epoch
        # iterator yields: (step, batches) in Keras 3.10, (first, last step, batches) after.
        for *_, batches in iterator:
            data_batch = tree.map_structure(first_replica, next(batches))
            break
        return original(self, iterator=None, data_batch=data_batch)

    _maybe_symbolic_build._lablib_fix = True
    cls._maybe_symbolic_build = _maybe_symbolic_build
    return True


def layer_family(obj) -> str | None:
    """``"legacy"``, ``"keras3"`` or None (not a Keras layer/model) for an object."""
    for cls in type(obj).__mro__:
        module = cls.__module__ or ""
        if cls.__name__ in ("Layer", "Operation") and module.startswith("tf_keras"):
            return "legacy"
        if cls.__name__ in ("Layer", "Operation") and module.startswith("keras"):
            return "keras3"
    return None


def _sublayers(model):
    seen = set()
    stack = [model]
    while stack:
        layer = stack.pop()
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        yield layer
        for attr in ("layers", "_layers", "_self_tracked_trackables"):
            children = getattr(layer, attr, None)
            if isinstance(children, (list, tuple)):
                stack.extend(c for c in children if layer_family(c) is not None)
        for value in list(vars(layer).values()):
            if layer_family(value) is not None:
                stack.append(value)
            elif isinstance(value, (list, tuple)):
                stack.extend(v for v in value if layer_family(v) is not None)


def check_model(model) -> None:
    """Raise :class:`KerasModeError` if ``model`` mixes Keras 3 and tf_keras layers.

    A tf_keras layer (such as ``tfm.nlp.layers.TransformerEncoderBlock``) inside a
    Keras 3 model is never trained: ``fit()`` runs and its weights stay as they were.
    Call this after building a model, before training it.

    Args:
        model: a Keras 3 or tf_keras layer or model.

    Raises:
        KerasModeError: naming the offending layers and the fix.
        TypeError: ``model`` is not a Keras layer or model.
    """
    outer = layer_family(model)
    if outer is None:
        raise TypeError(f"check_model expects a Keras model or layer, got {type(model).__name__}.")
    mixed = [
        f"{layer.name} ({type(layer).__module__}.{type(layer).__name__})"
        for layer in _sublayers(model)
        if layer_family(layer) != outer
    ]
    if mixed:
        other = "legacy" if outer == "keras3" else "keras3"
        raise KerasModeError(
            f"The {_describe(outer)} model {getattr(model, 'name', '')!r} contains "
            f"{_describe(other)} layers: {', '.join(mixed[:5])}. Keras does not train "
            f"layers of the other Keras version (fit() runs but their weights never "
            f"change). TF Model Garden layers are tf_keras layers: build the whole "
            f"model with tf.keras after lablib.use_legacy_keras(), or use lablib's "
            f"own layers with Keras 3. " + _RESTART.format(call="use_legacy_keras()")
        )


def import_tfm():
    """Import ``tensorflow_models`` after checking that legacy mode is active.

    Raises:
        KerasModeError: Keras 3 is active; TF Model Garden layers would not train.
    """
    if not is_legacy():
        raise KerasModeError(
            "TF Model Garden (tensorflow_models) layers are tf_keras (Keras 2) layers, "
            "but Keras 3 is active: they would fail to build or silently not train in "
            "a Keras 3 model. " + _RESTART.format(call="use_legacy_keras()")
        )
    import tensorflow_models as tfm

    return tfm


def __getattr__(name):
    if name == "keras":
        return get_keras()
    raise AttributeError(f"module 'lablib.backend' has no attribute {name!r}")
