"""Weights that are NaN or inf fail the judges that compute their expected values from
them.

A judge that recomputes a student's layer or model from the weights it reported (Lab 1's
projections, Lab 2's traced model, the graph labs' rebuilt models) compares the reported
output with what those weights give. With a NaN weight both are NaN, and
``expect_close`` took NaN for NaN as equal: a layer with a NaN bias and no attention at
all passed ``four_dense_projections``, and a model whose blocks ignore padding passed
``padding_does_not_change_predictions`` with a NaN classifier bias (0 with a finite one).
The judges now require the weights finite, and ``expect_close`` fails an expected value
that is not finite (:mod:`test_expect`).
"""

import numpy as np
import pytest

from lablib.grading.judge.tests import judge_test
from lablib.grading.results import Kind
from lablib.grading.run import ProbeResult
from lablib.grading.spec import load_lab
from test_malformed_replies import numpy_trace

NAN = float("nan")


def _judged(lab_name, test_id, value):
    return judge_test(load_lab(lab_name).test_by_id(test_id), ProbeResult(True, value))


def _projections_reply(value_bias):
    """Lab 1's four_dense_projections reply from a layer that computes no attention:
    four real Dense projections, the value's bias ``value_bias``, an output of NaN."""
    from lablib.grading.specs.lab1_attention import _projection_inputs

    x, merged = _projection_inputs()
    rng = np.random.default_rng(0)
    projections, flat = {}, []
    for name in ("query_dense", "key_dense", "value_dense", "output_dense"):
        kernel = rng.normal(size=(6, 6)).astype(np.float32)
        bias = np.full(6, value_bias if name == "value_dense" else 0.0, np.float32)
        inner = merged if name == "output_dense" else x
        projections[name] = {"class": "Dense", "weights": [kernel, bias], "output": inner @ kernel}
        projections[name]["output"] = projections[name]["output"] + bias
        flat += [kernel, bias]
    return {
        "projections": projections,
        "sublayers": ["Dense"] * 4,
        "output": np.full((1, 4, 6), NAN, np.float32),
        "scores": None,
        "weights": flat,
    }


def test_a_nan_projection_bias_fails_four_dense_projections():
    result = _judged(
        "lab1_attention", "multi_head_attention::four_dense_projections", _projections_reply(NAN)
    )
    assert result.kind == Kind.FAILED and result.mistake, (result.kind, result.message)
    assert result.message.startswith(
        "self.value_dense's bias is not finite: NaN or inf at [0], [1], [2], [3], [4], and 1 "
        "more (6 of 6 entries). The most likely cause is an initialiser"
    )
    finite = _judged(
        "lab1_attention", "multi_head_attention::four_dense_projections", _projections_reply(0.0)
    )
    assert finite.kind == Kind.FAILED  # no attention: the output check fails it


def _padding_reply(bias, traced=True):
    """Lab 2's padding test's reply from a model whose blocks do not mask padding, its
    classifier's bias ``bias`` (the trace recomputes as the judge does)."""
    from lablib.grading.specs.lab2_transformer_reuters import _padding_batches

    trace = numpy_trace(_padding_batches(), 16, 2, 8, 32, blocks=2)
    trace["weights"]["head"]["bias"] = np.full(4, bias, np.float32)
    for step in trace["batches"].values():
        for key in ("head_out", "logits"):
            step[key] = step[key] + bias
    reply = {name: trace["batches"][name]["logits"] for name in ("plain", "padded")}
    reply["trace"] = trace if traced else None
    return reply


@pytest.mark.parametrize("traced", [True, False], ids=["traced", "reported values"])
def test_a_nan_classifier_bias_does_not_hide_unmasked_padding(traced):
    test_id = "build_model::padding_does_not_change_predictions"
    finite = _judged("lab2_transformer_reuters", test_id, _padding_reply(0.0, traced))
    assert finite.kind == Kind.FAILED and "6 extra padding tokens" in finite.message
    result = _judged("lab2_transformer_reuters", test_id, _padding_reply(NAN, traced))
    assert result.kind == Kind.FAILED and result.mistake, (result.kind, result.message)
    if traced:
        assert result.message.startswith(
            "the weight head/bias of your model is not finite: NaN or inf at [0], [1], [2], "
            "[3] (4 of 4 entries)."
        )
    else:  # no trace: the predictions are compared as the process reported them
        assert "the expected value, which the grader computes from your own weights" in (
            result.message
        )
        assert "your weights or outputs are not finite (NaN or inf)" in result.message


#: A model description ``rebuild_model`` reads up to its weights (they are checked
#: before Keras is asked to build anything).
_ARCHITECTURE = '{"class_name": "Functional", "config": {"name": "m", "layers": []}}'


def test_a_rebuilt_models_weights_must_be_finite():
    from lablib.grading.expect import Mistake
    from lablib.grading.specs._model_checks import rebuild_model

    weights = [np.ones((3, 2), np.float32), np.array([0.0, np.inf], np.float32)]
    with pytest.raises(Mistake) as info:
        rebuild_model(_ARCHITECTURE, weights, "build_gcn_regressor's model")
    assert info.value.message.startswith(
        "build_gcn_regressor's model: its weight array 1 of 2 (shape (2,)) is not finite: "
        "NaN or inf at [1] (1 of 2 entries). The most likely cause is an initialiser"
    )


def test_weights_that_training_made_nan_are_named_as_such():
    """The graph labs' learning tests: weights NaN after training say that training
    diverged; NaN before training, that an initialiser (or a division) made them."""
    from lablib.grading.expect import Mistake
    from lablib.grading.specs._model_checks import judge_training_weights

    def reply(before, after):
        return {
            "architecture": _ARCHITECTURE,
            "weights_before": [np.asarray(before, np.float32)],
            "weights_after": [np.asarray(after, np.float32)],
            "losses": [1.0] * 10,
        }

    batch = ([np.zeros((2, 3))], np.zeros((2, 1)))
    with pytest.raises(Mistake, match="learning rate so large that the loss diverged"):
        judge_training_weights(reply([1.0, 2.0], [1.5, NAN]), *batch, "a tiny batch")
    with pytest.raises(Mistake, match="the model before training: .* an initialiser"):
        judge_training_weights(reply([NAN, 2.0], [1.5, 2.5]), *batch, "a tiny batch")


def test_a_course_test_compares_expected_infinities_and_may_allow_nan():
    """``lab.test(expected=...)``: masked logits (-inf by design) pass as they are; an
    expected NaN fails unless the test says ``nonfinite_ok``."""
    from lablib.grading.expect import Mistake, TestFailure
    from lablib.grading.labspec.model import Test

    masked = np.array([[0.3, -np.inf], [0.1, 0.2]])
    test = Test("labX", "mask_logits", "masked", probe=lambda ns: None, expected=lambda: masked)
    assert test.run_judge(masked.copy()) == 1.0
    with pytest.raises(TestFailure, match=r"inf or -inf was expected at \[0, 1\]"):
        test.run_judge(np.where(np.isinf(masked), -1e9, masked))
    with_nan = np.array([1.0, np.nan])
    strict = Test("labX", "p", "strict", probe=lambda ns: None, expected=with_nan)
    with pytest.raises(Mistake, match="holds NaN at"):
        strict.run_judge(with_nan.copy())
    allowed = Test(
        "labX", "p", "allowed", probe=lambda ns: None, expected=with_nan, nonfinite_ok=True
    )
    assert allowed.run_judge(with_nan.copy()) == 1.0
    with pytest.raises(TestFailure):
        allowed.run_judge(np.array([1.0, 0.0]))
