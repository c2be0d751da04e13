"""The shared judge of attention on scores around 1e3 (Lab 1's ``attention`` and Lab 2's
``encoder_block``): which softmax mistakes it names, and in which words."""

from __future__ import annotations

import numpy as np
import pytest

from lablib.grading.expect import Mistake
from lablib.grading.specs._attention_checks import large_score_mistakes


def _softmax(scores, shift):
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        exp = np.exp(scores - shift)
        return exp / exp.sum(axis=-1, keepdims=True)


def _scores(shape):
    rng = np.random.RandomState(0)
    scale = np.linspace(500.0, 2000.0, shape[-2])[:, None]
    return scale + rng.normal(size=shape)


def test_a_stable_softmax_passes_with_heads_and_a_fully_masked_query():
    scores = _scores((2, 4, 5))
    allowed = np.array([True, True, False, True, True])
    weights = _softmax(np.where(allowed, scores, -np.inf), scores.max(-1, keepdims=True))
    large_score_mistakes(weights, weights @ np.ones((5, 2)), allowed, "the block", ("head",))
    # a query with no allowed key has weights 0: not a row that must sum to 1
    nothing = np.zeros((2, 4, 5), bool)
    nothing[:, :3] = True
    weights = np.where(nothing, weights, 0.0)
    large_score_mistakes(weights, weights @ np.ones((5, 2)), nothing, "the block", ("head",))


def test_no_shift_is_named_as_overflow():
    scores = _scores((4, 5))
    weights = _softmax(scores, 0.0)
    with pytest.raises(Mistake) as caught:
        large_score_mistakes(weights, np.zeros((4, 2)), None, "attention(q [4, 4])")
    assert "With scores around 1e3 (attention(q [4, 4])) your weights hold NaN or inf" in str(
        caught.value
    )
    assert "np.exp overflows" in str(caught.value)


def test_one_maximum_for_the_whole_array_names_the_head_and_query():
    scores = _scores((2, 4, 5))
    scores[1, 0] -= 800.0  # head 1, query 0 far below the whole array's maximum
    weights = np.exp(scores - scores.max())  # rows do not sum to 1, and none is NaN
    weights[1, 0] = 0.0
    with pytest.raises(Mistake) as caught:
        large_score_mistakes(weights, weights @ np.ones((5, 2)), None, "the block", ("head",))
    message = str(caught.value)
    assert "the weights of head" in message and ", query " in message
    assert "not 1: its exponentials underflowed to 0" in message
    # without names for the leading axes the query is still named, the rest by axis
    with pytest.raises(Mistake) as caught:
        large_score_mistakes(weights, weights @ np.ones((5, 2)), None, "the call")
    assert "the weights of axis " in str(caught.value) and ", query " in str(caught.value)
