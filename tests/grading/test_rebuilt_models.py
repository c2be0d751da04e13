"""A rebuilt model that cannot run on the test's inputs is the student's failed test.

The graph labs' model judges rebuild the model from the architecture and weights the
student's process sent, then run it, ask its inputs and compute its compiled loss. What
was sent is the student's choice: a build function that puts another model's
``to_json`` and ``get_weights`` in place of its own (a Dense model taking inputs of
another shape) made the judges raise ValueError, reported as ``grader-error`` ("not your
doing; your instructor will re-grade"), so any wrong model could hide behind it. Each
such judge must fail the test instead, with a message that names the mistake.
"""

import numpy as np
import pytest

from lablib.grading.judge.tests import judge_test
from lablib.grading.results import Kind
from lablib.grading.run import ProbeResult
from lablib.grading.spec import load_lab


def _decoy(num_inputs, sequential=False):
    """A valid compiled Keras model whose inputs fit none of the labs' tests: Dense on
    ``num_inputs`` inputs of 2 features (or a Sequential model with no defined inputs)."""
    import keras

    if sequential:
        model = keras.Sequential([keras.layers.Dense(1)])
    else:
        inputs = [keras.Input((2,)) for _ in range(num_inputs)]
        model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Concatenate()(inputs)))
    model.compile(optimizer="adam", loss="mse")
    return model


def _structure_reply(model, names, num_inputs):
    reply = {name: np.zeros((6, 1), np.float32) for name in names}
    reply.update(
        architecture=model.to_json(),
        weights=model.get_weights(),
        compiled=True,
        num_inputs=num_inputs,
    )
    return reply


def _learning_reply(model):
    weights = model.get_weights()
    return {
        "architecture": model.to_json(),
        "weights_before": weights,
        "weights_after": [w + 1.0 for w in weights],
        "losses": [1.0] * 60,
    }


def _failed(lab_name, test_id, reply):
    """The test judged on ``reply`` as the grader judges it: it asks for the sandboxed
    process (it rebuilds a model), whose judging is run here."""
    test = load_lab(lab_name).test_by_id(test_id)
    assert judge_test(test, ProbeResult(True, reply), in_grader=True) is None
    result = judge_test(test, ProbeResult(True, reply))
    assert result.kind == Kind.FAILED, (result.kind, result.message)
    assert result.mistake, result.message
    return result.message


def _lab3_structure_names():
    from lablib.grading.specs.lab3_gcn_molecules import structure_inputs

    return list(structure_inputs())


def _lab4_structure_names():
    from lablib.grading.specs.lab4_gat import structure_inputs

    features, _ = structure_inputs()
    return [*features, "repeat", "training_a", "training_b"]


STRUCTURE = [
    ("lab3_gcn_molecules", "build_gcn::gcn_structure", _lab3_structure_names, 3),
    ("lab4_gat", "build_gat::gat_structure", _lab4_structure_names, 2),
]
LEARNING = [
    ("lab3_gcn_molecules", "build_gcn::gcn_learns", 3),
    ("lab4_gat", "build_gat::gat_learns", 2),
]


@pytest.mark.parametrize("lab_name, test_id, names, num_inputs", STRUCTURE)
def test_a_model_that_cannot_run_on_the_graphs_fails_the_structure_test(
    lab_name, test_id, names, num_inputs
):
    reply = _structure_reply(_decoy(num_inputs), names(), num_inputs)
    message = _failed(lab_name, test_id, reply)
    assert "The model your build function returns" in message, message
    assert "cannot run on the test's inputs (shapes [" in message, message
    assert "(ValueError: " in message and "incompatible" in message, message


@pytest.mark.parametrize("lab_name, test_id, names, num_inputs", STRUCTURE)
def test_a_model_without_defined_inputs_fails_the_structure_test(
    lab_name, test_id, names, num_inputs
):
    reply = _structure_reply(_decoy(num_inputs, sequential=True), names(), num_inputs)
    message = _failed(lab_name, test_id, reply)
    assert "rebuilt from model.to_json(), has no defined inputs (AttributeError: " in message


@pytest.mark.parametrize("lab_name, test_id, num_inputs", LEARNING)
def test_a_model_that_cannot_run_on_the_batch_fails_the_learning_test(
    lab_name, test_id, num_inputs
):
    message = _failed(lab_name, test_id, _learning_reply(_decoy(num_inputs)))
    assert "cannot compute its compiled loss on the test's training batch" in message, message
    assert "(ValueError: " in message and "incompatible" in message, message


def test_the_machines_errors_stay_the_graders():
    """Out of device memory or a failed kernel while running a correct model is the
    grading machine's failure (a grader-error, graded again), never the student's."""
    import tensorflow as tf

    from lablib.grading.specs._model_checks import Mistake, students_model

    for error in (
        tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor"),
        tf.errors.InternalError(None, None, "cuDNN launch failure"),
    ):
        with pytest.raises(type(error)), students_model("the model cannot run"):
            raise error
    with (
        pytest.raises(Mistake, match="the model cannot run"),
        students_model("the model cannot run"),
    ):
        raise tf.errors.InvalidArgumentError(None, None, "Incompatible shapes")
