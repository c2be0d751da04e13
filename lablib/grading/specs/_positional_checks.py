"""Judges of a student's ``positional_encoding``, shared by Labs 1 and 2.

They run in the grading process; the reference is lablib's own implementation of
Vaswani et al.'s formula.
"""

from __future__ import annotations

import numpy as np

from lablib.grading.spec import expect, expect_close, expect_shape


def reference_encoding(length, depth):
    """lablib's positional encoding as a float64 NumPy array [length, depth]."""
    from lablib.layers import positional_encoding  # NumPy; works in either Keras mode

    return np.asarray(positional_encoding(length, depth), dtype=np.float64)


def judge_encoding_table(got, length, depth):
    """The table has the right shape, row 0 is (0, 1, 0, 1, ...), and it matches the paper."""
    call = f"positional_encoding({length}, {depth})"
    expect_shape(got, (length, depth), call)
    expect_close(got[0], np.tile([0.0, 1.0], depth // 2), atol=1e-6, what="row of position 0")
    expect_close(got, reference_encoding(length, depth), rtol=1e-4, atol=1e-5, what=call)


def judge_float32_encoding(got, length, depth):
    """``got`` = {"dtype", "values"}: a float32 table matching the paper (odd depth too)."""
    call = f"positional_encoding({length}, {depth})"
    expect(got["dtype"] == "float32", f"expected a float32 array, got dtype {got['dtype']}")
    expect_shape(got["values"], (length, depth), call)
    expect_close(got["values"], reference_encoding(length, depth), rtol=1e-4, atol=1e-5, what=call)
