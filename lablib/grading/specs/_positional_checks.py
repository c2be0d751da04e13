"""The ``positional_encoding`` piece's tests, shared by Labs 1 and 2.

:func:`add_encoding_piece` declares the piece and its tests on a lab; the judges run in the grading process
and compare with lablib's own implementation of Vaswani et al.'s formula.
"""

from __future__ import annotations

import numpy as np

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
        (table(2 * columns),
         "Your table follows the exponent as the lecture's slide writes it, not the paper's "
         "formula (section 3 of Lab 2, section 4 of Lab 1): compute row 1 of "
         "positional_encoding(2, 4) by hand from the paper's two formulas (pos = 1, "
         "d_model = 4) and compare the frequency each of your columns uses."),
        (table(columns),
         "Your columns' frequencies are not the paper's: compute row 1 of "
         "positional_encoding(2, 4) by hand from the paper's two formulas (pos = 1, "
         "d_model = 4) and compare the frequency each of your columns uses."),
        (table(paper, swap=True),
         "Sine and cosine are swapped: even columns 2i hold sin(p / 10000^(2i/d_model)), odd "
         "columns 2i + 1 hold cos of the same angle."),
        (np.sin(positions / np.power(10000.0, paper / depth)),
         "Every column is a sine: odd columns 2i + 1 hold the cosine of the same angle."),
    ]


def judge_encoding_table(got, length, depth):
    """The table has the right shape, row 0 is (0, 1, 0, 1, ...), and it matches the paper."""
    call = f"positional_encoding({length}, {depth})"
    expect_shape(got, (length, depth), call)
    diagnose(got, encoding_mistakes(length, depth), right=reference_encoding(length, depth),
             rtol=1e-4, atol=1e-5)
    expect_close(got[0], np.tile([0.0, 1.0], depth // 2), atol=1e-6, what="row of position 0")
    expect_close(got, reference_encoding(length, depth), rtol=1e-4, atol=1e-5, what=call)


def judge_float32_encoding(got, length, depth):
    """``got`` = {"dtype", "values"}: a float32 table matching the paper (odd depth too)."""
    call = f"positional_encoding({length}, {depth})"
    expect(got["dtype"] == "float32", f"expected a float32 array, got dtype {got['dtype']}")
    expect_shape(got["values"], (length, depth), call)
    diagnose(got["values"], encoding_mistakes(length, depth),
             right=reference_encoding(length, depth), rtol=1e-4, atol=1e-5)
    expect_close(got["values"], reference_encoding(length, depth), rtol=1e-4, atol=1e-5, what=call)


PAPER_HINT = ("Work out row 1 of positional_encoding(2, 4) by hand from the paper's two "
              "formulas (pos = 1, d_model = 4) and compare it with yours, column by column.")


def add_encoding_piece(lab, table: tuple[int, int], odd: tuple[int, int], odd_hint: str) -> None:
    """Declare the ``positional_encoding`` piece on ``lab`` with its two tests:
    ``matches_the_paper`` (2 points), the ``table = (length, depth)`` table against the
    formula, and ``float32_and_odd_depth`` (1 point), a float32 table of odd depth
    ``odd``. The names are the tests' ids in gradebooks: the same in both labs."""
    lab.piece("positional_encoding", objects=["positional_encoding"],
              description="the sinusoidal positional encoding of Vaswani et al. (2017)")

    def matches_the_paper(ns):
        return np.asarray(ns["positional_encoding"](*table))

    def float32_and_odd_depth(ns):
        pe = np.asarray(ns["positional_encoding"](*odd))
        return {"dtype": str(pe.dtype), "values": pe}

    lab.test("positional_encoding", points=2, hint=PAPER_HINT)(matches_the_paper).judge(
        lambda got: judge_encoding_table(got, *table))
    lab.test("positional_encoding", points=1, hint=odd_hint)(float32_and_odd_depth).judge(
        lambda got: judge_float32_encoding(got, *odd))
