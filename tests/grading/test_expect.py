"""Judge-side assertions: a mismatch says where, by how much, and against what tolerance."""

import numpy as np
import pytest

from lablib.grading.expect import Mistake, TestFailure, expect_close, expect_equal, expect_finite


def _message(call):
    with pytest.raises(TestFailure) as info:
        call()
    return info.value.message


def test_a_large_array_mismatch_names_the_differing_entries_not_a_cut_dump():
    expected = np.zeros((2, 3, 8, 8))
    got = expected.copy()
    got[1, 2, 5, 7] = 0.5
    got[0, 1, 3, 4] = -0.25
    message = _message(lambda: expect_close(got, expected, what="alpha"))
    assert message.startswith("alpha: 2 of 384 entries differ (")
    assert "[0, 1, 3, 4]: expected 0, got -0.25" in message
    assert "[1, 2, 5, 7]: expected 0, got 0.5" in message
    assert "largest difference 0.5 at [1, 2, 5, 7] (tolerance rtol=1e-05, atol=1e-06)" in message
    assert "..." not in message and "array(" not in message  # no dump of 384 entries


def test_many_differences_are_counted_and_small_arrays_shown_whole():
    expected = np.arange(100.0)
    message = _message(lambda: expect_close(expected + 1, expected, atol=0.1, rtol=0))
    assert message.startswith("value: 100 of 100 entries differ (") and "and 95 more" in message
    small = _message(lambda: expect_close(np.array([1.0, 2.5]), np.array([1.0, 2.0])))
    assert "1 of 2 entries differ ([1]: expected 2, got 2.5)" in small
    assert "expected array(shape=(2,)) [1., 2.], got array(shape=(2,)) [1. , 2.5]" in small


def test_scalars_nan_and_exact_arrays():
    scalar = _message(lambda: expect_close(0.25, 0.5, what="loss"))
    assert (
        scalar == "loss: expected 0.5, got 0.25 (difference 0.25; tolerance rtol=1e-05, atol=1e-06)"
    )
    nan = np.ones((3, 4))
    nan[2, 1] = np.nan
    assert "got NaN or infinite values at [2, 1] (1 of 12 entries)" in _message(
        lambda: expect_close(nan, np.ones((3, 4)))
    )
    exact = _message(
        lambda: expect_equal(np.array([[True, False]]), np.array([[True, True]]), what="mask")
    )
    assert exact.startswith("mask: 1 of 2 entries differ ([0, 1]: expected True, got False)")
    assert "expected shape (2,), got shape (3,)" in _message(
        lambda: expect_equal(np.zeros(3), np.zeros(2))
    )
    expect_close(np.ones((2, 2)) + 1e-9, np.ones((2, 2)))  # within tolerance: no failure


# ------------------------------------------------- expected values that are NaN or inf


def test_a_nan_expected_value_fails_even_against_a_nan_answer():
    """Judges compute expected values from the student's own weights: a NaN weight makes
    the expected value NaN, which a NaN answer matched (``equal_nan``) and passed."""
    expected = np.ones((2, 3))
    expected[1, 2] = np.nan
    with pytest.raises(Mistake) as info:
        expect_close(expected.copy(), expected, what="layer output")
    message = info.value.message
    assert message.startswith("layer output: the expected value, which the grader computes")
    assert "holds NaN at [1, 2] (1 of 6 entries)" in message
    assert "your weights or outputs are not finite (NaN or inf)" in message
    assert "an initialiser" in message and "a division by zero" in message
    with pytest.raises(Mistake, match="not finite"):
        expect_close({"a": [np.nan]}, {"a": [np.nan]})  # inside dicts and lists too
    with pytest.raises(Mistake, match="not finite"):
        expect_equal(np.array([np.nan]), np.array([np.nan]))  # exact equality as well
    with pytest.raises(Mistake, match="not finite"):
        expect_equal([0.0, np.nan], [0.0, np.nan])  # lists as arrays
    with pytest.raises(Mistake, match="not finite"):
        expect_equal(float("nan"), float("nan"))


def test_a_single_number_is_named_the_value_not_an_empty_index():
    with pytest.raises(Mistake) as info:
        expect_close(np.nan, np.float64(np.nan), what="loss")
    assert "holds NaN in the value," in info.value.message and "[]" not in info.value.message
    message = _message(lambda: expect_close(np.nan, 1.0, what="loss"))
    assert message == "loss: got NaN or infinite values in the value"
    assert _message(lambda: expect_close(2.0, -np.inf, what="loss")) == (
        "loss: expected -inf, got 2"
    )


def test_an_expected_infinity_is_compared_exactly():
    """Masked logits and the log of a zero probability hold -inf by design: an answer
    with the same infinities passes; a finite or NaN value where inf belongs fails."""
    mask = np.array([[True, False], [True, True]])
    scores = np.array([[0.3, 0.7], [0.1, 0.2]])
    masked = np.where(mask, scores, -np.inf)
    expect_close(masked.copy(), masked)
    expect_equal(masked.copy(), masked)
    expect_equal([0.0, -np.inf], [0.0, -np.inf])  # lists follow the arrays' rule
    expect_equal(float("inf"), float("inf"))
    with np.errstate(divide="ignore"):
        log_p = np.log(np.array([0.5, 0.5, 0.0]))
    expect_close(log_p.copy(), log_p)
    expect_close({"a": [np.inf]}, {"a": [np.inf]})
    padded = np.where(mask, scores, -1e9)  # a large negative number is not -inf
    message = _message(lambda: expect_close(padded, masked, what="masked"))
    assert message.startswith(
        "masked: inf or -inf was expected at [0, 1] (1 of 4 entries) "
        "([0, 1]: expected -inf, got -1e+09)"
    )
    flipped = masked.copy()
    flipped[0, 1] = np.inf
    assert "[0, 1]: expected -inf, got inf" in _message(lambda: expect_close(flipped, masked))
    nan = masked.copy()
    nan[0, 1] = np.nan
    assert "[0, 1]: expected -inf, got nan" in _message(lambda: expect_close(nan, masked))
    assert "1 of 4 entries differ" in _message(lambda: expect_equal(padded, masked))


def test_a_reference_nonfinite_by_design_is_compared_when_the_judge_says_so():
    logits = np.array([[0.5, -np.inf], [np.nan, 1.0]])
    expect_close(logits.copy(), logits, nonfinite_ok=True)
    expect_close([logits.copy()], [logits], nonfinite_ok=True)
    expect_equal(np.array([-np.inf]), np.array([-np.inf]), nonfinite_ok=True)
    expect_equal(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), nonfinite_ok=True)
    expect_equal([np.nan, 1.0], [float("nan"), 1.0], nonfinite_ok=True)
    expect_equal(float("nan"), float("nan"), nonfinite_ok=True)
    wrong = logits.copy()
    wrong[0, 1] = 0.0  # a masked logit that is not -inf
    assert "inf or -inf was expected at [0, 1]" in _message(
        lambda: expect_close(wrong, logits, nonfinite_ok=True)
    )
    wrong = logits.copy()
    wrong[1, 0] = 0.0  # NaN expected, a number given
    assert "got 0" in _message(lambda: expect_close(wrong, logits, nonfinite_ok=True))


def test_expect_finite_names_the_weights_and_the_likely_cause():
    expect_finite(np.ones(3), "bias")
    bias = np.zeros(4, np.float32)
    bias[[0, 3]] = np.nan
    with pytest.raises(Mistake) as info:
        expect_finite(bias, "self.value_dense's bias")
    assert info.value.message.startswith(
        "self.value_dense's bias is not finite: NaN or inf at [0], [3] (2 of 4 entries). "
        "The most likely cause is an initialiser"
    )
    with pytest.raises(Mistake, match="expected an array of numbers"):
        expect_finite("nan", "bias")
