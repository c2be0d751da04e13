"""Judge-side assertions: what a test's judge calls on the plain values a probe returned.

Each raises :class:`TestFailure` with a message that says what was expected, what was
got and, for numbers, the largest difference and the tolerance. They run in the grading
process (or in the notebook for ``lablib.check``), never trusting the values' types.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "TestFailure",
    "Mistake",
    "diagnose",
    "expect",
    "expect_close",
    "expect_equal",
    "expect_shape",
]


class TestFailure(AssertionError):
    """A failed check: ``message`` says what was expected, what was got, and why."""

    __test__ = False  # not a pytest test class

    def __init__(self, message: str, *, expected: Any = None, got: Any = None):
        super().__init__(message)
        self.message = message
        self.expected = expected
        self.got = got


class Mistake(TestFailure):
    """A failure whose message names the student's mistake in plain words (found by
    :func:`diagnose`): the test's fixed hint, about some other mistake, is not shown."""


def _same(got: Any, wrong: Any, rtol: float, atol: float) -> bool:
    try:
        g, w = np.asarray(got, dtype=float), np.asarray(wrong, dtype=float)
    except (TypeError, ValueError):
        return False
    return (
        g.shape == w.shape
        and bool(np.all(np.isfinite(g)))
        and bool(np.all(np.isfinite(w)))
        and bool(np.allclose(g, w, rtol=rtol, atol=atol))
    )


def diagnose(
    got: Any, wrong_answers, *, right: Any = None, rtol: float = 1e-5, atol: float = 1e-6
) -> None:
    """Raise :class:`Mistake` when ``got`` is one of the known wrong answers.

    ``wrong_answers``: ``(value, sentence)`` pairs, each the value a typical mistake
    produces on the test's inputs and the sentence that names it. Judges call this before
    comparing with the right answer, so a student sees what went wrong, not an array.
    ``right``: the right answer; a mistake that gives it on these inputs (a LeakyReLU
    left out where every score is positive) tells nothing and is passed over.
    """
    for wrong, sentence in wrong_answers:
        if wrong is None or (right is not None and _same(wrong, right, rtol, atol)):
            continue
        if _same(got, wrong, rtol, atol):
            raise Mistake(sentence)


def _fmt(value: Any, limit: int = 300) -> str:
    if isinstance(value, np.ndarray):
        with np.printoptions(precision=5, suppress=True, threshold=20, edgeitems=3):
            text = np.array2string(value, separator=", ")
        text = f"array(shape={value.shape}) {' '.join(text.split())}"  # one line
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: Arrays up to this many entries are shown whole in a mismatch message; larger ones by
#: their first differing entries only (a cut dump would hide where they differ).
SMALL_ARRAY = 8
#: How many differing entries a mismatch message lists.
SHOWN_ENTRIES = 5


def _number(value) -> str:
    """One entry, short: floats to 6 significant digits, anything else as its repr."""
    value = value.item() if hasattr(value, "item") else value
    return f"{value:.6g}" if isinstance(value, float) else repr(value)


def _where(index) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _first(places, describe, separator: str) -> str:
    """The first :data:`SHOWN_ENTRIES` of ``places`` (indices), each ``describe``d, and how
    many more there are."""
    text = separator.join(describe(i) for i in places[:SHOWN_ENTRIES])
    if len(places) > SHOWN_ENTRIES:
        text += f"{separator}and {len(places) - SHOWN_ENTRIES} more"
    return text


def _mismatch(got: np.ndarray, expected: np.ndarray, bad: np.ndarray) -> str:
    """Where two same-shaped arrays differ: the count, the first differing entries with
    their indices, and both arrays in full when they are small."""
    places = np.argwhere(bad)
    shown = _first(
        places,
        lambda i: (
            f"{_where(i)}: expected {_number(expected[tuple(i)])}, got {_number(got[tuple(i)])}"
        ),
        "; ",
    )
    text = f"{len(places)} of {bad.size} entries differ ({shown})"
    if expected.size <= SMALL_ARRAY:
        text += f"; expected {_fmt(expected)}, got {_fmt(got)}"
    return text


def expect(condition: Any, message: str) -> None:
    """Fail with ``message`` unless ``condition`` is a true Python bool."""
    if not (type(condition) in (bool, np.bool_) and bool(condition)):
        raise TestFailure(message)


def expect_shape(got: Any, shape, what: str = "value") -> None:
    """Fail unless ``got`` is an array of exactly ``shape`` (None matches any size)."""
    if not isinstance(got, np.ndarray):
        raise TestFailure(f"{what}: expected an array of shape {tuple(shape)}, got {_fmt(got)}")
    ok = len(got.shape) == len(shape) and all(s is None or s == g for s, g in zip(shape, got.shape))
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
        if g.shape != e.shape:
            raise TestFailure(
                f"{what}: expected shape {e.shape}, got shape {g.shape}", expected=e, got=g
            )
        if not np.array_equal(g, e):
            detail = _mismatch(g, e, g != e) if e.ndim else f"expected {_fmt(e)}, got {_fmt(g)}"
            raise TestFailure(f"{what}: {detail}", expected=e, got=g)
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
        raise TestFailure(
            f"{what}: expected {_fmt(expected)}, got {_fmt(got)}", expected=expected, got=got
        )


def expect_close(
    got: Any, expected: Any, *, rtol: float = 1e-5, atol: float = 1e-6, what: str = "value"
) -> None:
    """Numerical closeness for numbers, arrays and (nested) lists/dicts of them."""
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            raise TestFailure(f"{what}: expected keys {sorted(expected)}, got {_fmt(got)}")
        for key in expected:
            expect_close(got[key], expected[key], rtol=rtol, atol=atol, what=f"{what}[{key!r}]")
        return
    if isinstance(expected, (list, tuple)) and any(
        isinstance(e, dict)
        or (isinstance(e, (list, tuple, np.ndarray)) and not isinstance(got, np.ndarray))
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
    not_finite = ~np.isfinite(g) & np.isfinite(e)
    if np.any(not_finite):
        places = np.argwhere(not_finite)
        where = _first(places, _where, ", ") or "the value"
        raise TestFailure(
            f"{what}: got NaN or infinite values at {where} ({len(places)} of {g.size} entries)",
            expected=e,
            got=g,
        )
    close = np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    if not bool(np.all(close)):
        difference = np.where(close, 0.0, np.abs(g - e))
        worst = np.unravel_index(int(np.argmax(difference)), e.shape)
        tolerance = f"tolerance rtol={rtol:g}, atol={atol:g}"
        if e.ndim == 0:
            detail = (
                f"expected {_number(e[()])}, got {_number(g[()])} (difference "
                f"{float(difference):.3g}; {tolerance})"
            )
        else:
            detail = (
                f"{_mismatch(g, e, ~close)}; largest difference "
                f"{float(difference[worst]):.3g} at {_where(worst)} ({tolerance})"
            )
        raise TestFailure(f"{what}: {detail}", expected=e, got=g)
