"""Judge-side assertions: what a test's judge calls on the plain values a probe returned.

Each raises :class:`TestFailure` with a message that says what was expected, what was
got and, for numbers, the largest difference and the tolerance. They run in the grading
process (or in the notebook for ``lablib.check``), never trusting the values' types.
"""

from __future__ import annotations

import reprlib
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
    "expect_array",
    "expect_number",
    "expect_fields",
    "expect_finite",
    "describe",
    "real_array",
    "numbers",
    "is_number",
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


def numbers(value: Any) -> np.ndarray | None:
    """``value`` as an array of real numbers (booleans, integers or floats; an array is
    not copied), or None when it is not that: None, text, a dict, an array of strings,
    complex numbers or records, a ragged list, an integer beyond any array's range. A
    reply can hold any of these (a forged one, or a student's function returning
    something else): judges read values through here (or :func:`real_array`), never by
    ``np.asarray(value, dtype=float)``, which raises on them."""
    if value is None or isinstance(value, (str, bytes, dict)):
        return None
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return array if array.dtype.kind in "biuf" else None


def real_array(value: Any) -> np.ndarray | None:
    """:func:`numbers` as float64 (not copied when it already is), or None."""
    array = numbers(value)
    return None if array is None else array.astype(np.float64, copy=False)


def _same(got: Any, wrong: Any, rtol: float, atol: float) -> bool:
    g, w = numbers(got), numbers(wrong)
    if g is None or w is None or g.shape != w.shape:
        return False
    g, w = real_array(g), real_array(w)
    return (
        bool(np.all(np.isfinite(g)))
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


#: How messages write a reply's lists, dicts and text: as ``repr`` up to 50 items a level,
#: 6 levels deep and 300 characters, "..." beyond (a reply's list of millions of numbers
#: is never written out whole).
_REPR = reprlib.Repr()
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 50
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 6, 300, 300


def _fmt(value: Any, limit: int = 300) -> str:
    if isinstance(value, np.ndarray):
        with np.printoptions(precision=5, suppress=True, threshold=20, edgeitems=3):
            text = np.array2string(value, separator=", ")
        text = f"array(shape={value.shape}) {' '.join(text.split())}"  # one line
    elif isinstance(value, (list, tuple, dict, str, bytes)):
        text = _REPR.repr(value)  # a reply's long lists shortened before they are written
    else:
        try:
            text = repr(value)
        except ValueError:  # an integer too long to write out
            text = f"a {type(value).__name__} too long to show"
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


def describe(value: Any) -> str:
    """What a value is, in words, for a message saying what came instead of what was
    expected: ``an array of shape (1,)``, ``a str ('oops')``, ``None``."""
    if isinstance(value, np.ndarray):
        kinds = {"b": "booleans", "i": "integers", "u": "integers", "f": "numbers"}
        of = kinds.get(value.dtype.kind, f"values of type {value.dtype}")
        if value.ndim == 0:
            return f"a 0-dimensional array ({_fmt(value, 60)})"
        return f"an array of {of} of shape {value.shape}"
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return f"a dict with keys {sorted(map(str, value))[:8]}"
    return f"a {type(value).__name__} ({_fmt(value, 60)})"


def _shape_text(shape) -> str:
    return (
        "("
        + ", ".join("any" if s is None else str(s) for s in shape)
        + ("," if len(shape) == 1 else "")
        + ")"
    )


def expect_array(got: Any, shape=None, what: str = "value") -> np.ndarray:
    """Fail unless ``got`` is an array (or nested list) of real numbers (booleans,
    integers or floats) of ``shape`` (None entries match any size; no shape: any);
    returns it as float64.

    What a judge calls before computing anything from a reply: a reply of another form
    (None, text, a 0-dimensional or empty array, another shape) is then the student's
    failure, named as such (:class:`Mistake`: ``what`` says which value, the message what
    came instead), never an error of the judge's own arithmetic. The shape is checked
    before anything is converted.
    """
    array = None if isinstance(got, bool) else numbers(got)
    wanted = "an array of numbers" if shape is None else f"an array of shape {_shape_text(shape)}"
    if array is None:
        raise Mistake(f"{what}: expected {wanted}, got {describe(got)}", got=got)
    if shape is not None and not (
        array.ndim == len(shape) and all(s is None or s == g for s, g in zip(shape, array.shape))
    ):
        came = describe(got) if isinstance(got, np.ndarray) else f"one of shape {array.shape}"
        raise Mistake(
            f"{what}: expected {wanted}, got {came}", expected=tuple(shape), got=array.shape
        )
    return real_array(array)


def is_number(value: Any) -> bool:
    """Whether ``value`` is one real number a judge can compute with: an int (within
    float's range) or a float, not a bool."""
    if type(value) is float:
        return True
    return type(value) is int and abs(value) < 2**1000


def expect_number(got: Any, what: str = "value") -> float:
    """Fail unless ``got`` is one real number (an int or a float, not a bool); returns it
    as a float (NaN and infinities included: the caller judges those)."""
    if isinstance(got, (int, float, np.integer, np.floating)) and not isinstance(
        got, (bool, np.bool_)
    ):
        try:
            return float(got)
        except OverflowError:
            pass
    raise Mistake(f"{what}: expected a number, got {describe(got)}", got=got)


def expect_fields(got: Any, keys, what: str = "the probe's values") -> None:
    """Fail unless ``got`` is a dict holding every key in ``keys`` (a forged reply of
    another form is the submission's failure, not a judge error)."""
    missing = [key for key in keys if not isinstance(got, dict) or key not in got]
    if missing:
        without = f" without {missing}" if isinstance(got, dict) else ""
        raise TestFailure(
            f"{what}: expected a dict with {list(keys)}, got {type(got).__name__}{without}"
        )


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


def expect_equal(
    got: Any, expected: Any, what: str = "value", *, nonfinite_ok: bool = False
) -> None:
    """Exact equality for plain values (arrays compared element-wise). Expected floats
    (a number, an array, a list) follow the rule of :func:`expect_close`: an expected
    NaN fails unless ``nonfinite_ok`` (which takes NaN for NaN as equal), and an
    expected inf or -inf is compared exactly."""
    floats = _floats(expected)
    if floats is not None:
        _expect_no_nan_expected(floats, what, nonfinite_ok)
        if nonfinite_ok and np.any(np.isnan(floats)) and not isinstance(expected, np.ndarray):
            same = _floats(got)
            if same is not None and same.shape == floats.shape:
                got, expected = same, floats  # compared as arrays, NaN for NaN
    if isinstance(expected, np.ndarray) or isinstance(got, np.ndarray):
        e = np.asarray(expected)
        try:
            g = np.asarray(got)
        except (TypeError, ValueError, OverflowError):  # a ragged list, say
            raise TestFailure(f"{what}: expected {_fmt(e)}, got {_fmt(got)}") from None
        if g.shape != e.shape:
            raise TestFailure(
                f"{what}: expected shape {e.shape}, got shape {g.shape}", expected=e, got=g
            )
        try:
            nan_ok = nonfinite_ok and e.dtype.kind in "fc" and g.dtype.kind in "fc"
            differ = not np.array_equal(g, e, equal_nan=nan_ok)
        except (TypeError, ValueError):  # records or text against numbers
            differ = True
            if g.dtype != e.dtype:
                raise TestFailure(
                    f"{what}: expected values of type {e.dtype}, got {g.dtype}", expected=e, got=g
                ) from None
        if differ:
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
    try:
        differ = bool(got != expected)
    except (TypeError, ValueError):  # an array-like reply compared with a number
        differ = True
    if differ:
        raise TestFailure(
            f"{what}: expected {_fmt(expected)}, got {_fmt(got)}", expected=expected, got=got
        )


#: What a message says is the most likely cause when a student's weights or outputs
#: hold NaN or inf.
NONFINITE_CAUSE = (
    "The most likely cause is an initialiser that gives NaN or inf (a Constant of "
    "float('nan'), say) or a division by zero (a total or a count that can be 0)."
)


def _floats(value: Any) -> np.ndarray | None:
    """``value`` as an array of floats when it is a float or an array or (nested)
    list of floats, else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if not isinstance(value, (float, np.floating, list, tuple, np.ndarray)):
        return None
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError):  # a ragged list, say
        return None
    return array if array.dtype.kind == "f" else None


def _at(bad: np.ndarray) -> str:
    """Where ``bad`` is true, as ``at [2, 1], [3, 0] (2 of 12 entries)``, or ``in the
    value`` for a single number (a 0-d array)."""
    if bad.ndim == 0:
        return "in the value"
    places = np.argwhere(bad)
    return f"at {_first(places, _where, ', ')} ({len(places)} of {bad.size} entries)"


def _nonfinite(array: np.ndarray) -> str | None:
    """Where ``array`` holds NaN or inf, as ``at [2, 1], [3, 0] (2 of 12 entries)``
    (``in the value`` for a single number), or None when every entry is finite."""
    bad = ~np.isfinite(array)
    return _at(bad) if np.any(bad) else None


def expect_finite(got: Any, what: str = "value", cause: str = NONFINITE_CAUSE) -> np.ndarray:
    """Fail (a :class:`Mistake`) unless ``got`` is an array of real numbers that are all
    finite; returns it as float64.

    What a judge calls on a student's weights before it computes anything from them:
    an expected value computed from NaN weights is NaN, and a NaN answer would then
    match it. ``cause``: the most likely cause, said after where the NaN or inf are.
    """
    array = expect_array(got, what=what)
    where = _nonfinite(array)
    if where is not None:
        raise Mistake(f"{what} is not finite: NaN or inf {where}. {cause}", got=array)
    return array


def expect_close(
    got: Any,
    expected: Any,
    *,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    what: str = "value",
    nonfinite_ok: bool = False,
) -> None:
    """Numerical closeness for numbers, arrays and (nested) lists/dicts of them.

    An expected value holding NaN fails (a :class:`Mistake` saying the student's
    weights or outputs are not finite), unless ``nonfinite_ok``: judges compute their
    expected values from the student's own weights and outputs, and where those are NaN
    the expected value is NaN too, which a NaN answer would match. With ``nonfinite_ok``
    (a reference that holds NaN by design), the answer must hold NaN in the same places.
    An expected inf or -inf (masked logits, the log of a zero probability) is compared
    exactly: the answer must hold the same infinity in the same place.
    """
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            raise TestFailure(f"{what}: expected keys {sorted(expected)}, got {_fmt(got)}")
        for key in expected:
            expect_close(
                got[key],
                expected[key],
                rtol=rtol,
                atol=atol,
                what=f"{what}[{key!r}]",
                nonfinite_ok=nonfinite_ok,
            )
        return
    if isinstance(expected, (list, tuple)) and any(
        isinstance(e, dict)
        or (isinstance(e, (list, tuple, np.ndarray)) and not isinstance(got, np.ndarray))
        for e in expected
    ):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            raise TestFailure(f"{what}: expected {len(expected)} items, got {_fmt(got)}")
        for i, (g, e) in enumerate(zip(got, expected)):
            expect_close(g, e, rtol=rtol, atol=atol, what=f"{what}[{i}]", nonfinite_ok=nonfinite_ok)
        return
    e = np.asarray(expected, dtype=float)
    g = None if isinstance(got, bool) else numbers(got)
    if g is None:
        raise TestFailure(f"{what}: expected numbers {_fmt(e)}, got {_fmt(got)}")
    if g.shape != e.shape:
        raise TestFailure(
            f"{what}: expected shape {e.shape}, got shape {g.shape}", expected=e, got=g
        )
    g = real_array(g)
    _expect_no_nan_expected(e, what, nonfinite_ok)
    _expect_same_infinities(g, e, what)
    not_finite = ~np.isfinite(g) & np.isfinite(e)
    if np.any(not_finite):
        raise TestFailure(
            f"{what}: got NaN or infinite values {_at(not_finite)}", expected=e, got=g
        )
    close = np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    if not bool(np.all(close)):
        raise TestFailure(f"{what}: {_difference(g, e, close, rtol, atol)}", expected=e, got=g)


def _expect_no_nan_expected(expected: np.ndarray, what: str, nonfinite_ok: bool) -> None:
    """Fail where the expected value of a comparison holds NaN, unless it may."""
    nan = np.isnan(expected)
    if not nonfinite_ok and np.any(nan):
        raise Mistake(
            f"{what}: the expected value, which the grader computes from your own weights "
            f"or outputs, holds NaN {_at(nan)}, so your weights or outputs are not "
            f"finite (NaN or inf). {NONFINITE_CAUSE}",
            expected=expected,
        )


def _expect_same_infinities(g: np.ndarray, e: np.ndarray, what: str) -> None:
    """Fail unless ``g`` holds the same inf or -inf wherever ``e`` does."""
    wrong = np.isinf(e) & (g != e)
    if not np.any(wrong):
        return
    if e.ndim == 0:
        detail = f"expected {_number(e[()])}, got {_number(g[()])}"
    else:
        shown = _first(
            np.argwhere(wrong),
            lambda i: f"{_where(i)}: expected {_number(e[tuple(i)])}, got {_number(g[tuple(i)])}",
            "; ",
        )
        detail = f"inf or -inf was expected {_at(wrong)} ({shown})"
    raise TestFailure(f"{what}: {detail}", expected=e, got=g)


def _difference(g: np.ndarray, e: np.ndarray, close: np.ndarray, rtol, atol) -> str:
    """Where and by how much ``g`` differs from ``e`` (``close`` marks the entries that
    agree), and the tolerance."""
    with np.errstate(invalid="ignore"):  # inf - inf where both hold the same inf
        difference = np.where(close, 0.0, np.abs(g - e))
    worst = np.unravel_index(int(np.argmax(difference)), e.shape)
    tolerance = f"tolerance rtol={rtol:g}, atol={atol:g}"
    if e.ndim == 0:
        return (
            f"expected {_number(e[()])}, got {_number(g[()])} (difference "
            f"{float(difference):.3g}; {tolerance})"
        )
    return (
        f"{_mismatch(g, e, ~close)}; largest difference "
        f"{float(difference[worst]):.3g} at {_where(worst)} ({tolerance})"
    )
