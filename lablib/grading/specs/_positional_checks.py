"""The ``positional_encoding`` piece's tests, shared by Labs 1 and 2.

:func:`add_encoding_piece` declares the piece and its tests on a lab; the judges run in the grading process
and compare with lablib's own implementation of Vaswani et al.'s formula.
"""

from __future__ import annotations

import numpy as np

from lablib.grading.expect import Mistake, describe, expect_fields, real_array
from lablib.grading.spec import diagnose, expect, expect_close, expect_shape


def reference_encoding(length, depth):
    """lablib's positional encoding as a float64 NumPy array [length, depth]."""
    from lablib.layers import positional_encoding  # NumPy; works in either Keras mode

    return np.asarray(positional_encoding(length, depth), dtype=np.float64)


def encoding_mistakes(length, depth):
    """``(table, sentence)`` of the typical mistakes in the sinusoidal encoding."""
    positions = np.arange(length)[:, None]
    columns = np.arange(depth)[None, :]
    even = columns % 2 == 0

    def table(exponent, swap=False):
        angles = positions / np.power(10000.0, exponent / depth)
        first, second = (np.cos, np.sin) if swap else (np.sin, np.cos)
        return np.where(even, first(angles), second(angles))

    paper = 2 * (columns // 2)
    return [
        # These two name the place of the mistake, not its fix: why the slide's exponent
        # is wrong is Lab 2's written question (section 8, `find_error`), and a check
        # that stated it would answer that question before it is asked.
        (
            table(2 * columns),
            "Your table follows the exponent as the lecture's slide writes it, not the paper's "
            "formula (section 3 of Lab 2, section 4 of Lab 1): compute row 1 of "
            "positional_encoding(2, 4) by hand from the paper's two formulas (pos = 1, "
            "d_model = 4) and compare the frequency each of your columns uses.",
        ),
        (
            table(columns),
            "Your columns' frequencies are not the paper's: compute row 1 of "
            "positional_encoding(2, 4) by hand from the paper's two formulas (pos = 1, "
            "d_model = 4) and compare the frequency each of your columns uses.",
        ),
        (
            table(paper, swap=True),
            "Sine and cosine are swapped: even columns 2i hold sin(p / 10000^(2i/d_model)), odd "
            "columns 2i + 1 hold cos of the same angle.",
        ),
        (
            np.sin(positions / np.power(10000.0, paper / depth)),
            "Every column is a sine: odd columns 2i + 1 hold the cosine of the same angle.",
        ),
    ]


def _columns(indices, limit: int = 6) -> str:
    shown = ", ".join(str(int(i)) for i in indices[:limit])
    return shown + (f" and {len(indices) - limit} more" if len(indices) > limit else "")


def _frequency(column, use_sine):
    """The frequency w with column[p] = sin(p w) (or cos), from rows 1 and 2, or None."""
    if column.size < 3 or not np.all(np.abs(column) <= 1 + 1e-6):
        return None
    first = float(np.clip(column[1], -1.0, 1.0))
    candidates = (
        [np.arcsin(first), np.pi - np.arcsin(first)]
        if use_sine
        else [np.arccos(first), 2 * np.pi - np.arccos(first)]
    )
    wave = np.sin if use_sine else np.cos
    positions = np.arange(column.size)
    for w in candidates:
        if np.allclose(wave(positions * w), column, atol=1e-4):
            return float(w)
    return None


def encoding_stages(got, length, depth):
    """Name what is wrong in a positional-encoding table the known mistakes do not
    explain: its size, row 0 (sin 0 = 0 in even columns, cos 0 = 1 in odd ones),
    columns that are not a sine or cosine of the position, or columns whose frequency is
    not the paper's. Like the known mistakes it says where to look and what to
    recompute, never the formula's exponent (Lab 2's written question `find_error`)."""
    got = real_array(got)
    if got is None:  # not numbers: the shape and value checks say what came
        return
    if got.ndim == 2 and got.shape != (length, depth):
        if got.shape[0] != length:
            raise Mistake(
                f"positional_encoding({length}, {depth}) has {got.shape[0]} rows: one "
                f"row per position 0, 1, ..., {length - 1} (np.arange(length))."
            )
        raise Mistake(
            f"positional_encoding({length}, {depth}) has {got.shape[1]} columns: one "
            f"column per dimension of the model, {depth}."
        )
    if got.shape != (length, depth) or not np.all(np.isfinite(got)):
        return
    right = reference_encoding(length, depth)
    row0 = right[0]
    wrong0 = np.flatnonzero(~np.isclose(got[0], row0, atol=1e-6))
    if wrong0.size:
        raise Mistake(
            f"Row 0 (position 0) differs in column(s) {_columns(wrong0)}: at position 0 "
            "every sine is 0 and every cosine 1, so row 0 is 0, 1, 0, 1, ... when even "
            "columns hold sines and odd columns cosines."
        )
    wrong = np.flatnonzero(~np.all(np.isclose(got, right, rtol=1e-4, atol=1e-5), axis=0))
    if not wrong.size:
        return
    shapeless = [j for j in wrong if _frequency(got[:, j], j % 2 == 0) is None]
    if shapeless:
        raise Mistake(
            f"Column(s) {_columns(shapeless)} are not a {'sine' if shapeless[0] % 2 == 0 else 'cosine'} "
            "of the position times one fixed frequency: each column j is sin or cos of "
            "position x frequency_j, with the positions as a column [length, 1] and the "
            "frequencies as a row [1, depth] (broadcasting gives the angles [length, depth])."
        )
    raise Mistake(
        f"Column(s) {_columns(wrong)} are sinusoids of the position with frequencies other "
        "than the paper's: compute row 1 of positional_encoding(2, 4) by hand from the paper's "
        "two formulas (pos = 1, d_model = 4) and compare the frequency each of your columns "
        "uses."
    )


def _wrong_table_shape(got, length, depth) -> bool:
    """Whether ``got`` is a table of numbers [rows, columns] of another size than
    [length, depth] (which :func:`encoding_stages` names)."""
    table = real_array(got)
    return table is not None and table.ndim == 2 and table.shape != (length, depth)


def judge_encoding_table(got, length, depth):
    """The table has the right shape, row 0 is (0, 1, 0, 1, ...), and it matches the paper."""
    call = f"positional_encoding({length}, {depth})"
    if _wrong_table_shape(got, length, depth):
        encoding_stages(got, length, depth)
    expect_shape(got, (length, depth), call)
    diagnose(
        got,
        encoding_mistakes(length, depth),
        right=reference_encoding(length, depth),
        rtol=1e-4,
        atol=1e-5,
    )
    encoding_stages(got, length, depth)
    expect_close(got[0], np.tile([0.0, 1.0], depth // 2), atol=1e-6, what="row of position 0")
    expect_close(got, reference_encoding(length, depth), rtol=1e-4, atol=1e-5, what=call)


def judge_float32_encoding(got, length, depth):
    """``got`` = {"dtype", "values"}: a float32 table matching the paper (odd depth too)."""
    call = f"positional_encoding({length}, {depth})"
    expect_fields(got, ("dtype", "values"), f"{call}'s dtype and values")
    dtype = got["dtype"] if isinstance(got["dtype"], str) else describe(got["dtype"])
    expect(dtype == "float32", f"expected a float32 array, got dtype {dtype}")
    if _wrong_table_shape(got["values"], length, depth):
        encoding_stages(got["values"], length, depth)
    expect_shape(got["values"], (length, depth), call)
    diagnose(
        got["values"],
        encoding_mistakes(length, depth),
        right=reference_encoding(length, depth),
        rtol=1e-4,
        atol=1e-5,
    )
    encoding_stages(got["values"], length, depth)
    expect_close(got["values"], reference_encoding(length, depth), rtol=1e-4, atol=1e-5, what=call)


PAPER_HINT = (
    "Work out row 1 of positional_encoding(2, 4) by hand from the paper's two "
    "formulas (pos = 1, d_model = 4) and compare it with yours, column by column."
)


def add_encoding_piece(lab, table: tuple[int, int], odd: tuple[int, int], odd_hint: str) -> None:
    """Declare the ``positional_encoding`` piece on ``lab`` with its two tests:
    ``matches_the_paper`` (2 points), the ``table = (length, depth)`` table against the
    formula, and ``float32_and_odd_depth`` (1 point), a float32 table of odd depth
    ``odd``. The names are the tests' ids in gradebooks: the same in both labs."""
    lab.piece(
        "positional_encoding",
        objects=["positional_encoding"],
        description="the sinusoidal positional encoding of Vaswani et al. (2017)",
        error_hints=[
            (
                r"unsupported operand type\(s\) for .*'NoneType'",
                "np.newaxis is None: it adds an axis only inside an index, as in "
                "np.arange(length)[:, np.newaxis] (a column [length, 1]); it cannot take "
                "part in arithmetic.",
            ),
            (
                r"operands could not be broadcast together",
                "The positions and the frequencies do not broadcast: make the positions a "
                "column [length, 1] and the frequencies a row [1, depth], so that their "
                "product is the table of angles [length, depth].",
            ),
        ],
    )

    def matches_the_paper(ns):
        return np.asarray(ns["positional_encoding"](*table))

    def float32_and_odd_depth(ns):
        pe = np.asarray(ns["positional_encoding"](*odd))
        return {"dtype": str(pe.dtype), "values": pe}

    lab.test("positional_encoding", points=2, hint=PAPER_HINT)(matches_the_paper).judge(
        lambda got: judge_encoding_table(got, *table)
    )
    lab.test("positional_encoding", points=1, hint=odd_hint)(float32_and_odd_depth).judge(
        lambda got: judge_float32_encoding(got, *odd)
    )
