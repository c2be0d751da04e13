"""lablib.session: "Run all" on a lab with unfinished graded pieces, in a real IPython shell."""

import pytest

from lablib import session

STUB = f"raise NotImplementedError({session.STUB_MESSAGE.format(piece='readout')!r})"


@pytest.fixture()
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    session._WAITING.clear()
    shell = InteractiveShell()
    assert session.start(shell) and session.start(shell)  # installed once
    assert sum(isinstance(t, session.SkipUnfinished) for t in shell.ast_transformers) == 1
    shell.run_cell(f"def readout(H, mask):\n    # YOUR CODE HERE\n    {STUB}\n")
    yield shell
    session._WAITING.clear()


def _run(shell, capsys, code):
    result = shell.run_cell(code, store_history=True)
    return result, capsys.readouterr().out


def test_a_cell_calling_an_unfinished_piece_skips_with_one_line(shell, capsys):
    result, out = _run(
        shell,
        capsys,
        "before = 1\nwith open(__file__ if False else '/dev/null'):\n"
        "    pooled = readout(2, 3)\nafter = 2\nprint('never')",
    )
    assert result.success and result.error_in_exec is None
    assert out.strip() == (
        "lablib: skipped the rest of this cell: it needs the graded piece "
        "'readout', which is not written yet."
    )
    names = shell.user_ns
    assert names["before"] == 1 and "pooled" not in names and "after" not in names
    # A later cell that needs what the skipped cell would have made skips too, saying why.
    result, out = _run(shell, capsys, "print(pooled.shape)")
    assert result.success
    assert (
        "needs `pooled`, which a cell skipped earlier did not finish making (waiting for "
        "the graded piece 'readout')"
        in out
        and out.count("\n") == 1
    )
    # What the interrupted cell did bind is incomplete too: any error that uses it skips.
    result, out = _run(shell, capsys, "before['key']")
    assert result.success and "needs `before`" in out
    # A cell that binds it again and finishes ends the wait.
    result, out = _run(shell, capsys, "before = {'key': 1}\nbefore['key']")
    assert result.result == 1 and "skipped" not in out
    result, _ = _run(shell, capsys, "before['other']")
    assert isinstance(result.error_in_exec, KeyError)
    # An ungraded exercise's stub, and what its cell would have defined (its message says).
    message = session.exercise_message("METRIC = 'val accuracy'\nVARIANTS, more = {}, 1\n")
    assert message == "Write your code here. It defines METRIC, VARIANTS, more."
    assert session.exercise_message("") == session.EXERCISE_MESSAGE
    result, out = _run(shell, capsys, f"raise NotImplementedError({message!r})")
    assert result.success and "it reaches an exercise not written yet" in out
    result, out = _run(shell, capsys, "print(METRIC)")
    assert result.success and "needs `METRIC`" in out and "waiting for an exercise" in out
    result, out = _run(
        shell, capsys, f"VARIANTS = 1\nraise NotImplementedError({session.EXERCISE_MESSAGE!r})"
    )
    assert result.success and out.strip() == (
        "lablib: skipped the rest of this cell: it reaches an "
        "exercise not written yet (`# YOUR CODE HERE`)."
    )


def test_other_errors_keep_their_traceback(shell, capsys):
    result, _ = _run(shell, capsys, "print(pooled_typo)")  # a student's typo: a real NameError
    assert not result.success and isinstance(result.error_in_exec, NameError)
    result, _ = _run(shell, capsys, "raise NotImplementedError('my own')")
    assert isinstance(result.error_in_exec, NotImplementedError)
    result, _ = _run(shell, capsys, "1 / 0")
    assert isinstance(result.error_in_exec, ZeroDivisionError)


def test_cells_behave_as_before_otherwise(shell, capsys):
    result, _ = _run(shell, capsys, "x = 20\nx + 1")
    assert result.result == 21  # the last expression is still the cell's value
    result, out = _run(shell, capsys, "x + 2;")
    assert result.result is None and out == ""  # a trailing semicolon still hides it
    result, _ = _run(shell, capsys, "from __future__ import annotations\ny: int = 3\ny")
    assert result.success and result.result == 3
    result, _ = _run(
        shell, capsys, "def twice(v):\n    return 2 * v\n\nclass K:\n    pass\ntwice(4)"
    )
    assert result.result == 8 and "K" in shell.user_ns
    # Once the piece is written, the same cells run.
    shell.run_cell("def readout(H, mask):\n    return H + mask\n")
    result, _ = _run(shell, capsys, "pooled = readout(2, 3)\npooled")
    assert result.result == 5
    result, out = _run(shell, capsys, "print(pooled)")
    assert out == "5\n"


def test_outside_ipython_nothing_changes():
    assert session.start() is False  # pytest runs no IPython shell
    assert session.unfinished_piece(NotImplementedError("something else")) is None
    assert session.unfinished_piece(ValueError(session.STUB_MESSAGE.format(piece="x"))) is None
    assert (
        session.unfinished_piece(NotImplementedError(session.STUB_MESSAGE.format(piece="masks")))
        == "masks"
    )
