"""Judge-side assertions: a mismatch says where, by how much, and against what tolerance."""

import numpy as np
import pytest

from lablib.grading.expect import TestFailure, expect_close, expect_equal


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
