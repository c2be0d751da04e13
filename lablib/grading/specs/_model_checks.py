"""Model tests that do not trust what the student's process reports.

A probe runs in the student's process, and code there can send any plain value in its
place (see ISOLATION.md, "What a forged value can still score"). A judge that only reads
reported properties ("compiled", "the loss fell", "the output did not change") can be
fooled by sending the right constants. The model tests of the graph labs therefore
have the probe send the model itself, as its architecture (``model.to_json()``) and
weights, and the judge:

* rebuilds the model in a fresh process of the grader's (:func:`rebuild_model`: Keras'
  ``model_from_json`` in safe mode, so no Lambda code is run; lablib's layers are
  registered serializables, so it imports ``lablib.layers`` first). That process runs
  none of the student's code, but it is sandboxed with the submission's limits all
  the same (:func:`lablib.grading.spec.sandbox_only`): what it rebuilds is the
  student's choice;
* runs the rebuilt model on the test's inputs and recomputes every property there;
* checks that the outputs the student's process reported match the rebuilt model's
  (so the weights sent are the ones that produced them);
* for training tests, evaluates the compiled loss at the weights before and after
  training (:func:`judge_training_weights`).

What the rebuilt model does is the student's choice, not the grader's: an exception
from running it, asking its inputs or computing its loss is the student's failed test
(:func:`students_model`), never the grader's error.

A model that contains a layer class of the student's own (or a Lambda layer, which
safe mode refuses) cannot be rebuilt here; only then does the judge fall back to the
properties the probe reported, and :func:`rebuild_model` returns None. Not a lab
(``known_labs`` lists ``lab*.py`` only); probe-side helpers live in ``_graph_inputs``.
"""

from __future__ import annotations

import contextlib
import json

import numpy as np

from lablib.grading.expect import (
    NONFINITE_CAUSE,
    Mistake,
    describe,
    expect_fields,
    expect_finite,
    is_number,
)
from lablib.grading.spec import TestFailure, expect, expect_close, get_lab, sandbox_only

#: Largest integer a rebuilt model's config may hold (layer widths, heads, ...), and
#: the most layers it may have: the grader allocates the weights of what it rebuilds,
#: so a forged architecture must not make it allocate gigabytes.
MAX_CONFIG_INT = 1024
MAX_LAYERS = 64

#: The longest architecture text (``model.to_json()``) the grader reads, in characters,
#: and the deepest nesting of its lists and objects. The tests' models are described in
#: about 7,000 characters, 10 levels deep; a model nested in another adds a few levels.
#: The judges walk the parsed text recursively: a text nested 100,000 deep (a to_json
#: replaced by the student's code) would exhaust Python's recursion.
MAX_ARCHITECTURE_CHARS = 1_000_000
MAX_ARCHITECTURE_DEPTH = 50

#: Keras classes that load files or foreign code when rebuilt (a SavedModel from a path,
#: a pickled torch module, JAX/Flax functions): never rebuilt in the grader.
REFUSED_CLASSES = ("TFSMLayer", "TorchModuleWrapper", "JaxLayer", "FlaxLayer")

#: Keys whose integers are not sizes (random seeds, axes).
_NOT_SIZES = ("seed", "axis")

#: What the judge tells when it cannot rebuild the model (only the properties the
#: student's process reported are checked then).
FALLBACK_NOTE = (
    "the grader could not rebuild this model from model.to_json() (a layer "
    "class of your own, a Lambda layer, or a Keras layer it does not rebuild, "
    "such as UpSampling2D); only the properties your process reported were checked"
)


def model_lab(name):
    """The lab ``name`` (title and short name: lablib/labs.py) whose judges rebuild the
    student's models in the grading process: they import Keras and lablib's layers."""
    lab = get_lab(name)
    lab.judge_imports = ("keras", *LAYER_MODULES)
    return lab


def add_model_piece(lab, name, builder, description):
    """Declare ``lab``'s piece ``name`` whose graded function ``builder`` builds a
    compiled Keras model: from lablib's (or Model Garden's) layers, so not a piece
    written by hand (``by_hand=False``: calling lablib's layers there is allowed)."""
    lab.piece(name, objects=[builder], description=description, by_hand=False)


def describe_model(model):
    """Probe side: the model as plain values, ``{"architecture": str, "weights": [arrays]}``."""
    try:
        architecture = model.to_json()
    except Exception as error:  # noqa: BLE001 - a model Keras cannot describe is reported
        architecture = f"not serializable: {type(error).__name__}: {error}"
    return {"architecture": architecture, "weights": [np.asarray(w) for w in model.get_weights()]}


def _check_sizes(node, path="config", key=""):
    """Every integer of the config, in dicts and in lists alike (a layer's ``size: [S, S]``
    or ``kernel_size``), at most :data:`MAX_CONFIG_INT`, and a list of them multiplying to
    at most ``MAX_CONFIG_INT ** 2`` (a target shape); ``key`` is the dict key a list
    hangs from, so seeds and axes are left alone inside lists too."""
    if isinstance(node, dict):
        for name, value in node.items():
            _check_sizes(value, f"{path}.{name}", str(name))
        return
    if isinstance(node, list):
        numbers = [v for v in node if isinstance(v, int) and not isinstance(v, bool)]
        if len(numbers) > 1 and not any(word in key for word in _NOT_SIZES):
            product = 1
            for value in numbers:
                product *= max(1, abs(value))
            if product > MAX_CONFIG_INT**2:
                raise TestFailure(
                    f"The model's configuration holds {path} = {numbers[:8]}, a size of {product}; "
                    f"the grader rebuilds models with sizes up to {MAX_CONFIG_INT} only (these "
                    f"tests build small models)."
                )
        for i, value in enumerate(node):
            _check_sizes(value, f"{path}[{i}]", key)
        return
    if (
        isinstance(node, int)
        and not isinstance(node, bool)
        and not any(word in key for word in _NOT_SIZES)
        and abs(node) > MAX_CONFIG_INT
    ):
        raise TestFailure(
            f"The model's configuration holds {path} = {node}; the grader "
            f"rebuilds models with sizes up to {MAX_CONFIG_INT} only (these tests "
            f"build small models)."
        )


#: The Keras layer classes the grader rebuilds (besides lablib's): those whose cost is
#: bounded by their weights, which the submission's own process must report, or that
#: keep their input's size. A weightless layer that multiplies its input's size by a
#: number of the config (UpSampling2D, RepeatVector, ZeroPadding2D, Conv2DTranspose's
#: strides, Resizing...) is not rebuilt: the judge then checks the reported properties
#: only, as for a layer class of the student's own.
REBUILT_KERAS_LAYERS = frozenset(
    (
        "Functional",
        "Sequential",
        "Model",
        "InputLayer",
        "Dense",
        "EinsumDense",
        "Embedding",
        "Dropout",
        "SpatialDropout1D",
        "GaussianDropout",
        "GaussianNoise",
        "AlphaDropout",
        "LayerNormalization",
        "BatchNormalization",
        "UnitNormalization",
        "GroupNormalization",
        "Activation",
        "ReLU",
        "LeakyReLU",
        "ELU",
        "PReLU",
        "Softmax",
        "Identity",
        "Masking",
        "Add",
        "Subtract",
        "Multiply",
        "Average",
        "Maximum",
        "Minimum",
        "Concatenate",
        "Dot",
        "GlobalAveragePooling1D",
        "GlobalMaxPooling1D",
        "Flatten",
        "Rescaling",
        "Reshape",
        "Permute",
        "MultiHeadAttention",
        "Attention",
        "AdditiveAttention",
        "GRU",
        "LSTM",
        "SimpleRNN",
        "GRUCell",
        "LSTMCell",
        "SimpleRNNCell",
        "RNN",
        "Bidirectional",
        "TimeDistributed",
    )
)


def _serialized(node):
    """Every Keras-serialized object of a model description (a dict with a string
    ``class_name``), in tree order: the model, its layers, layers wrapped in others
    (``TimeDistributed``, ``Bidirectional``), initializers, dtype policies..."""
    if isinstance(node, dict):
        if isinstance(node.get("class_name"), str):
            yield node
        for value in node.values():
            yield from _serialized(value)
    elif isinstance(node, list):
        for value in node:
            yield from _serialized(value)


def _not_rebuilt(config):
    """The Keras layers (module ``keras.layers``) of ``config`` outside
    :data:`REBUILT_KERAS_LAYERS`."""
    return sorted(
        {
            f"{item.get('module')}.{item['class_name']}"
            for item in _serialized(config)
            if "config" in item
            and str(item.get("module") or "").startswith("keras.layers")
            and item["class_name"] not in REBUILT_KERAS_LAYERS
        }
    )


def _count_layers(node):
    if isinstance(node, dict):
        own = 1 if "class_name" in node and "config" in node else 0
        return own + sum(_count_layers(v) for v in node.values())
    if isinstance(node, list):
        return sum(_count_layers(v) for v in node)
    return 0


#: lablib's layer modules (``lablib.layers`` exports them lazily): importing them
#: registers their layers, which deserialization finds by registered name.
LAYER_MODULES = tuple(
    f"lablib.layers.{name}"
    for name in (
        "attention",
        "positional",
        "transformer",
        "graph_conv",
        "graph_attention",
        "readout",
    )
)


def register_lablib_layers():
    """Import every lablib layer module, so that a model using them can be rebuilt."""
    import importlib

    for module in LAYER_MODULES:
        importlib.import_module(module)


def _class_names(node):
    return [item["class_name"] for item in _serialized(node)]


def _foreign_classes(node):
    """Classes of a model description that the grader cannot rebuild: those defined
    outside Keras and lablib (the student's own), and Lambda layers (safe mode)."""
    found = []
    for item in _serialized(node):
        module, name = item.get("module"), item["class_name"]
        if "config" in item and not name.startswith("__"):
            package = str(module or "").split(".", 1)[0]
            if package not in ("keras", "lablib") or name == "Lambda":
                found.append(f"{module}.{name}")
    return found


def _nesting_depth(text: str) -> int:
    """How deep the lists and objects of a JSON text nest (brackets inside its strings
    not counted), found in one pass without parsing it: a text far too deep for the
    parser is measured all the same, in time linear in its length."""
    if text.count("{") + text.count("[") <= MAX_ARCHITECTURE_DEPTH:
        return 0  # too few brackets to nest past the limit
    # UTF-8 keeps the ASCII bytes of quotes, backslashes and brackets for themselves only
    codes = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
    positions = np.arange(codes.size)
    backslash = codes == ord("\\")
    # a quote ends or starts a string unless an odd run of backslashes escapes it
    last_other = np.maximum.accumulate(np.where(backslash, -1, positions))
    run_before = np.concatenate(([0], positions[:-1] - last_other[:-1]))
    quote = (codes == ord('"')) & (run_before % 2 == 0)
    outside = np.cumsum(quote) % 2 == 0  # a bracket's own byte is never a quote
    step = (np.isin(codes, (ord("{"), ord("["))) & outside).astype(np.int64)
    step -= np.isin(codes, (ord("}"), ord("]"))) & outside
    return int(np.cumsum(step).max(initial=0))


def _parsed_architecture(architecture, what):
    """The model description a probe's ``model.to_json()`` text holds, parsed, after
    its length and nesting are checked: a :class:`Mistake` past
    :data:`MAX_ARCHITECTURE_CHARS` or :data:`MAX_ARCHITECTURE_DEPTH` (the text is the
    student's choice: a replaced ``to_json`` can return anything)."""
    override = (
        "a Keras model built from Keras or lablib layers is described in a few thousand "
        "characters, about 10 levels deep. Did you override model.to_json (or "
        "get_config), or nest models inside models?"
    )
    if len(architecture) > MAX_ARCHITECTURE_CHARS:
        raise Mistake(
            f"{what}: the model's architecture (model.to_json()) is "
            f"{len(architecture) / 1e6:.1f} MB of text; the grader reads at most "
            f"{MAX_ARCHITECTURE_CHARS / 1e6:g} MB: {override}"
        )
    depth = _nesting_depth(architecture)
    if depth > MAX_ARCHITECTURE_DEPTH:
        raise Mistake(
            f"{what}: the model's architecture (model.to_json()) is {depth:,} levels deep; "
            f"the grader reads at most {MAX_ARCHITECTURE_DEPTH}: {override}"
        )
    try:
        config = json.loads(architecture)
    except ValueError:
        raise TestFailure(f"{what}: the reported architecture is not JSON.") from None
    except RecursionError:  # nested past what the parser follows: the text's, not the grader's
        raise Mistake(
            f"{what}: the model's architecture (model.to_json()) is nested too deep to "
            f"read: {override}"
        ) from None
    if not isinstance(config, dict) or "class_name" not in config or "config" not in config:
        raise TestFailure(f"{what}: the reported architecture is not a Keras model description.")
    return config


#: The most likely cause of weights that training made NaN or inf.
_DIVERGED = (
    "Training made them NaN or inf: the most likely cause is a learning rate so large "
    "that the loss diverged, or a division by zero (or a log of 0) in a layer or the loss."
)


def _checked_weights(weights, what, cause=NONFINITE_CAUSE):
    """Fail unless ``weights`` is a list of arrays of finite real numbers (``cause``:
    what the message gives as the likely cause of NaN or inf)."""
    if not isinstance(weights, list) or not all(
        isinstance(w, np.ndarray) and w.dtype.kind in "biuf" for w in weights
    ):
        raise TestFailure(f"{what}: the reported weights are not a list of arrays of numbers.")
    for i, w in enumerate(weights):
        shape = tuple(w.shape)
        expect_finite(w, f"{what}: its weight array {i} of {len(weights)} (shape {shape})", cause)


def rebuild_model(architecture, weights, what="the model"):
    """Judge side: a Keras model rebuilt from a probe's :func:`describe_model` values.

    Args:
        architecture: the JSON text of ``model.to_json()``.
        weights: the arrays of ``model.get_weights()``, in order.
        what: how messages name the model.

    Returns:
        The rebuilt model with ``weights`` set (compiled when the student's model was),
        or None when the architecture names a class the grader cannot rebuild (a layer
        class of the student's own, a Lambda layer) or does not (a Keras layer outside
        :data:`REBUILT_KERAS_LAYERS`): the caller then falls back to the reported
        properties.

    Raises:
        TestFailure: the architecture is not a model description, is implausibly large
            (its text too long or too deeply nested: :func:`_parsed_architecture`), or
            the weights are not finite or do not fit it.
        NeedsSandbox: called by a judge in the grader's own process (the grader then
            runs the judge in a sandboxed process).
    """
    sandbox_only(f"rebuilding {what} from its architecture and weights")
    if not isinstance(architecture, str) or architecture.startswith("not serializable"):
        raise TestFailure(
            f"{what}: Keras could not describe the model with model.to_json() "
            f"({str(architecture)[:200]}); build it from Keras or lablib layers."
        )
    config = _parsed_architecture(architecture, what)
    _check_sizes(config)
    refused = sorted(set(_class_names(config)) & set(REFUSED_CLASSES))
    if refused:
        raise TestFailure(
            f"{what}: the grader does not rebuild {refused} layers (they load "
            f"files or code); build the model from Keras or lablib layers."
        )
    if _count_layers(config) > 4 * MAX_LAYERS:
        raise TestFailure(
            f"{what}: the model has more than {MAX_LAYERS} layers; these tests build small models."
        )
    _checked_weights(weights, what)
    import keras

    register_lablib_layers()
    foreign = _foreign_classes(config)  # before Keras, which edits the config it reads
    if _not_rebuilt(config):  # cost chosen by the config, not bounded by the weights
        return None
    try:
        model = keras.saving.deserialize_keras_object(json.loads(architecture), safe_mode=True)
    except Exception as error:  # noqa: BLE001 - judged below
        if foreign:
            return None
        raise TestFailure(
            f"{what}: the grader could not rebuild the model from its "
            f"architecture ({type(error).__name__}: {str(error)[:300]})."
        ) from None
    if not isinstance(model, keras.Model):
        raise TestFailure(
            f"{what}: the reported architecture describes a "
            f"{type(model).__name__}, not a Keras model."
        )
    shapes = [tuple(w.shape) for w in model.get_weights()]
    got = [tuple(w.shape) for w in weights]
    if shapes != got:
        raise TestFailure(
            f"{what}: the weights reported ({len(got)} arrays, shapes {got[:8]}) "
            f"do not fit the reported architecture (shapes {shapes[:8]})."
        )
    model.set_weights(weights)
    return model


def rebuild_compiled_model(got, builder, num_inputs, inputs_hint, compile_hint):
    """The model a probe reported, rebuilt, compiled and taking ``num_inputs`` inputs.

    Returns None where it cannot be rebuilt (a layer class of the student's own); the
    properties the student's process reported are then checked instead.
    """
    model = rebuild_model(got["architecture"], got["weights"], f"{builder}'s model")
    compiled = f"{builder} must return a compiled model ({compile_hint} before returning it)."
    inputs = f"The model should take {num_inputs} inputs ({inputs_hint}), it has"
    if model is None:
        expect(got["compiled"] is True, compiled)
        expect(got["num_inputs"] == num_inputs, f"{inputs} {got['num_inputs']}; {FALLBACK_NOTE}.")
        return None
    expect(getattr(model, "optimizer", None) is not None and model.loss is not None, compiled)
    with students_model(f"{builder}'s model, rebuilt from model.to_json(), has no defined inputs"):
        count = len(model.inputs)
    expect(count == num_inputs, f"{inputs} {count}.")
    return model


def _first_line(error):
    """``error`` as its type and the first line of its message (300 characters at most)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:300]}" if lines else type(error).__name__


def _shapes(arrays):
    """The shapes of ``arrays`` (a list of arrays, or one), as ``[6, 7, 4], [6, 7]``."""
    listed = arrays if isinstance(arrays, (list, tuple)) else [arrays]
    return ", ".join(str(list(np.shape(a))) for a in listed)


@contextlib.contextmanager
def students_model(failure):
    """Judge side: around a call on a model rebuilt from the student's reply.

    The architecture and weights are whatever the student's process sent (its model's,
    or another's in their place), so an exception raised while running the model, asking
    its inputs or computing its loss is the student's failed test: a :class:`Mistake`
    saying ``failure`` and the exception's type and first line. A :class:`TestFailure`
    raised inside goes on as it is, and so do a ``MemoryError`` (the submission's limit,
    reported as such) and TensorFlow's errors of the machine (out of memory, a failed
    kernel: :data:`_ENVIRONMENT_ERRORS`, a grader-error graded again). Only calls on the rebuilt model belong inside: the grader's own
    code outside stays the grader's error.
    """
    try:
        yield
    except (TestFailure, MemoryError):
        raise
    except Exception as error:  # noqa: BLE001 - the student's model, judged as their failure
        if _environment_error(error):
            raise  # the grading machine's (out of device memory, a failed kernel): graded again
        raise Mistake(f"{failure} ({_first_line(error)}).") from None


#: TensorFlow's errors that say the machine failed, not the model: out of (device) memory,
#: a kernel or driver failure, a device that went away.
_ENVIRONMENT_ERRORS = frozenset(
    {"ResourceExhaustedError", "InternalError", "UnknownError", "UnavailableError", "DataLossError"}
)


def _environment_error(error: BaseException) -> bool:
    kind = type(error)
    return kind.__name__ in _ENVIRONMENT_ERRORS and kind.__module__.startswith("tensorflow")


def run_model(model, inputs, training=False):
    """The rebuilt model's output on ``inputs`` (a list of arrays) as float64 NumPy.

    Raises:
        Mistake: the model cannot run on ``inputs`` (:func:`students_model`).
    """
    mode = ", training=True" if training else ""
    with students_model(
        "The model your build function returns (rebuilt from model.to_json() and its "
        f"weights) cannot run on the test's inputs (shapes {_shapes(inputs)}{mode}); it "
        "should take the inputs the lab describes, in that order"
    ):
        out = model(inputs[0] if len(inputs) == 1 else inputs, training=training)
        out = out[0] if isinstance(out, (list, tuple)) and len(out) == 1 else out
        return np.asarray(out, dtype=np.float64)


def expect_reported(got, recomputed, what):
    """The output the student's process reported equals the rebuilt model's."""
    scale = max(1.0, float(np.max(np.abs(recomputed))) if recomputed.size else 1.0)
    expect_close(
        got,
        recomputed,
        rtol=1e-4,
        atol=1e-4 * scale,
        what=f"{what} (the output your process reported vs the same model rebuilt "
        f"from its architecture and weights in the grader)",
    )


def compiled_loss(model, inputs, targets):
    """The compiled loss (with regularization) of a rebuilt model, training off.

    Raises:
        Mistake: the model cannot run on ``inputs``, or its loss cannot be computed
            against ``targets`` (:func:`students_model`).
    """
    with students_model(
        "The model your build function returns (rebuilt from model.to_json() and its "
        f"weights) cannot compute its compiled loss on the test's training batch (inputs "
        f"of shapes {_shapes(inputs)}, targets {_shapes(targets)}); it should take the "
        "inputs the lab describes, in that order, and be compiled with a loss that fits "
        "its output"
    ):
        y_pred = model(inputs, training=False)
        loss = model.compute_loss(x=inputs, y=targets, y_pred=y_pred, training=False)
        return float(np.asarray(loss))


def training_values(model, inputs, targets, steps=60):
    """Probe side: train ``model`` for ``steps`` batches on one batch.

    Returns:
        ``{"architecture", "weights_before", "weights_after", "losses"}``: what
        :func:`judge_training_weights` reads.
    """
    before = describe_model(model)
    losses = []
    for _ in range(steps):
        out = model.train_on_batch(inputs, targets)
        losses.append(
            float(np.ravel(np.asarray(out[0] if isinstance(out, (list, tuple)) else out))[0])
        )
    return {
        "architecture": before["architecture"],
        "weights_before": before["weights"],
        "weights_after": [np.asarray(w) for w in model.get_weights()],
        "losses": losses,
    }


def add_learning_test(lab, piece, name, hint, case):
    """Declare ``lab``'s test ``name`` of ``piece`` (2 points, up to 300 s) that the
    student's model learns: ``case = (model, data, what)``, the probe trains
    ``model(ns)`` on ``data() = (inputs, targets)`` (:func:`training_values`) and the
    judge checks the weights it sent (:func:`judge_training_weights`, ``what`` naming
    the data)."""
    model, data, what = case

    def probe(ns):
        student_model = model(ns)
        inputs, targets = data()
        return training_values(student_model, inputs, targets)

    def judge(got):
        return judge_training_weights(got, *data(), what)

    # A test belongs to the lab module that defines its model (a hidden test module's
    # tests are hidden), not to this helper's; its judge too, so that a judge sent to a
    # sandboxed process takes that module (and ``data``) by value when the sandbox cannot
    # import it (hidden tests, a spec file given by path).
    probe.__module__ = judge.__module__ = model.__module__
    lab.test(piece, points=2, timeout=300, hint=hint, name=name)(probe).judge(judge)


def judge_training_weights(got, inputs, targets, data):
    """Judge :func:`training_values`: every weight array moved, and the compiled loss
    the grader computes at the weights after training is below 0.6 times the loss at
    the weights before (the rebuilt model's loss, not the one the process reported).

    When the model cannot be rebuilt (a layer class of the student's own), the loss
    trend is read from the reported losses (mean of the last 5 below 0.6 times the
    mean of the first 3): the only case judged on reported values.

    Args:
        got: the probe's dict.
        inputs, targets: the training batch (rebuilt here by the test's helpers).
        data: how messages name the training data, e.g. ``"a tiny graph"``.
    """
    expect_fields(got, ("architecture", "weights_before", "weights_after", "losses"))
    before, after = got["weights_before"], got["weights_after"]
    expect(
        isinstance(before, list)
        and isinstance(after, list)
        and len(before) == len(after)
        and all(
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.shape == b.shape
            and a.dtype.kind in "biuf"
            and b.dtype.kind in "biuf"
            for a, b in zip(after, before)
        ),
        "The weights reported before and after training do not match in number or shape "
        "(or are not arrays of numbers).",
    )
    losses = got["losses"]
    expect(
        isinstance(losses, list) and all(is_number(loss) for loss in losses),
        f"The training losses: expected a list of numbers, got {describe(losses)}.",
    )
    expect(len(before) > 0, "The model has no weights.")
    unchanged = sum(not bool(np.any(a != b)) for a, b in zip(after, before))
    expect(
        unchanged == 0,
        f"{unchanged} weight arrays did not change during training (is every layer trainable?).",
    )
    _checked_weights(before, "the model before training")
    _checked_weights(after, "the model after training", _DIVERGED)
    model = rebuild_model(got["architecture"], before, "the trained model")
    if model is None:
        losses = np.asarray(losses, float)
        expect(
            losses.ndim == 1 and losses.size >= 8 and bool(np.all(np.isfinite(losses))),
            f"The training loss is not finite: {losses[:5]}",
        )
        first, last = losses[:3].mean(), losses[-5:].mean()
        expect(
            last < 0.6 * first,
            f"The loss did not go down enough in {len(losses)} steps "
            f"on {data}: from {first:.3f} to {last:.3f} (expected below {0.6 * first:.3f}); "
            f"{FALLBACK_NOTE}.",
        )
        return
    expect(
        getattr(model, "optimizer", None) is not None and model.loss is not None,
        "The model must be compiled (model.compile(optimizer=..., loss=...)).",
    )
    expect(len(model.trainable_weights) > 0, "The model has no trainable weights.")
    first = compiled_loss(model, inputs, targets)
    model.set_weights(after)
    last = compiled_loss(model, inputs, targets)
    expect(
        bool(np.isfinite(first) and np.isfinite(last)),
        f"The loss is not finite: {first} before and {last} after training.",
    )
    expect(
        last < 0.6 * first,
        f"The loss did not go down enough in {len(got['losses'])} "
        f"steps on {data}: from {first:.3f} to {last:.3f} (expected below "
        f"{0.6 * first:.3f}; losses computed by the grader from the weights before and "
        f"after training).",
    )
