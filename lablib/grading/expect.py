"""Judge-side assertions: what a test's judge calls on the plain values a probe returned.

Each raises :class:`TestFailure` with a message that says what was expected, what was
got and, for numbers, the largest difference and the tolerance. They run in the grading
process (or in the notebook for ``lablib.check``), never trusting the values' types.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["TestFailure", "expect", "expect_close", "expect_equal", "expect_shape"]


class TestFailure(AssertionError):
    """A failed check: ``message`` says what was expected, what was got, and why."""

    __test__ = False  # not a pytest test class

    def __init__(self, message: str, *, expected: Any = None, got: Any = None):
        super().__init__(message)
        self.message = message
        self.expected = expected
        self.got = got


def _fmt(value: Any, limit: int = 300) -> str:
    if isinstance(value, np.ndarray):
        with np.printoptions(precision=5, suppress=True, threshold=20, edgeitems=3):
            text = np.array2string(value, separator=", ")
        text = f"array(shape={value.shape}) {text}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def expect(condition: Any, message: str) -> None:
    """Fail with ``message`` unless ``condition`` is a true Python bool."""
    if not (type(condition) in (bool, np.bool_) and bool(condition)):
        raise TestFailure(message)


def expect_shape(got: Any, shape, what: str = "value") -> None:
    """Fail unless ``got`` is an array of exactly ``shape`` (None matches any size)."""
    if not isinstance(got, np.ndarray):
        raise TestFailure(f"{what}: expected an array of shape {tuple(shape)}, got {_fmt(got)}")
    ok = len(got.shape) == len(shape) and all(
        s is None or s == g for s, g in zip(shape, got.shape)
    )
    if not ok:
        raise TestFailure(
            f"{what}: expected shape {tuple(shape)}, got shape {got.shape}",
            expected=tuple(shape),
            got=got.shape,
        )


def expect_equal(got: Any, expected: Any, what: str = "value") -> None:
    """Exact equality for plain values (arrays compared element-wise)."""
    if isinstance(expected, np.ndarray) or isinstance(got, np.ndarray):
        g, e = np.asarray(got), np.asarray(expected)
        if g.shape != e.shape or not np.array_equal(g, e):
            raise TestFailure(
                f"{what}: expected {_fmt(e)}, got {_fmt(g)}", expected=e, got=g
            )
        return
    if type(got) is not type(expected) and not (
        isinstance(got, (int, float)) and isinstance(expected, (int, float))
    ):
        raise TestFailure(
            f"{what}: expected a {type(expected).__name__} ({_fmt(expected)}), got a "
            f"{type(got).__name__} ({_fmt(got)})",
            expected=expected,
            got=got,
        )
    if got != expected:
        raise TestFailure(f"{what}: expected {_fmt(expected)}, got {_fmt(got)}",
                          expected=expected, got=got)


def expect_close(got: Any, expected: Any, *, rtol: float = 1e-5, atol: float = 1e-6,
                 what: str = "value") -> None:
    """Numerical closeness for numbers, arrays and (nested) lists/dicts of them."""
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            raise TestFailure(f"{what}: expected keys {sorted(expected)}, got {_fmt(got)}")
        for key in expected:
            expect_close(got[key], expected[key], rtol=rtol, atol=atol, what=f"{what}[{key!r}]")
        return
    if isinstance(expected, (list, tuple)) and any(
        isinstance(e, dict) or (isinstance(e, (list, tuple, np.ndarray)) and not isinstance(got, np.ndarray))
        for e in expected
    ):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            raise TestFailure(f"{what}: expected {len(expected)} items, got {_fmt(got)}")
        for i, (g, e) in enumerate(zip(got, expected)):
            expect_close(g, e, rtol=rtol, atol=atol, what=f"{what}[{i}]")
        return
    e = np.asarray(expected, dtype=float)
    if isinstance(got, (bool, str)) or got is None:
        raise TestFailure(f"{what}: expected numbers {_fmt(e)}, got {_fmt(got)}")
    try:
        g = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        raise TestFailure(f"{what}: expected numbers {_fmt(e)}, got {_fmt(got)}") from None
    if g.shape != e.shape:
        raise TestFailure(
            f"{what}: expected shape {e.shape}, got shape {g.shape}", expected=e, got=g
        )
    if not np.all(np.isfinite(g) | ~np.isfinite(e)):
        raise TestFailure(f"{what}: got NaN or infinite values: {_fmt(g)}", expected=e, got=g)
    close = np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    if not bool(np.all(close)):
        worst = float(np.max(np.abs(g - e)[~close])) if e.size else math.nan
        raise TestFailure(
            f"{what}: expected {_fmt(e)}, got {_fmt(g)} (largest difference {worst:.3g}; "
            f"tolerance rtol={rtol:g}, atol={atol:g})",
            expected=e,
            got=g,
        )
