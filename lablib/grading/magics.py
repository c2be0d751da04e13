"""IPython's magics and shell lines in graded cells: what the grader runs of them.

In the notebook a graded cell runs in IPython, where ``%time f(x)``, ``%%time``,
``!pip install ...`` and ``%matplotlib inline`` are part of the language; the grader runs
it as Python. :func:`graded_python` turns a cell into that Python with IPython's own cell
transformation (``%time f(x)`` becomes ``get_ipython().run_line_magic('time', 'f(x)')``),
every line kept where it was, so that an error's line number is the student's line.
:class:`Shell` is the ``get_ipython()`` the child process provides: ``%time``/``%timeit``
run their statement once and ``%%time``/``%%timeit``/``%%capture`` their cell's body; any
other magic and every shell line do nothing (nothing is installed at grading, the sandbox
has no network). :func:`not_run_note` says which lines of a cell the grader did not run.

Without IPython (a grader installed without Jupyter), or for a cell too long for IPython's
transformation to be quick, magic and shell lines starting a line are transformed by a
regular expression instead.
"""

from __future__ import annotations

import dataclasses
import re
import sys

__all__ = ["graded_python", "not_run_note", "get_ipython", "Shell", "RUN_LINE", "RUN_CELL"]

#: The line magics whose statement the grader runs (once).
RUN_LINE = frozenset({"time", "timeit"})
#: The cell magics whose body the grader runs (once), as Python.
RUN_CELL = frozenset({"time", "timeit", "capture"})
#: IPython transforms one magic at a time and reads the whole cell again after each (some
#: 5 microseconds a character): a cell of more characters times magics than this (half a
#: second) is transformed by the regular expression. A cell of 3,000 characters with ten
#: magics is a third of it.
MAX_WORK = 100_000
#: The lines a note lists (then "and N more").
NOTE_LINES = 5

# A line IPython may transform: a magic or shell line, ``x = %magic``/``x = !cmd``, ``name?``.
_SPECIAL = re.compile(r"^[ \t]*[%!]|=[ \t]*[%!]|\?[ \t]*$", re.M)
_CELL_MAGIC = re.compile(r"\s*%%(\S*)[ \t]*(.*)")
_LINE_MAGIC = re.compile(r"([ \t]*)(%{1,2}|!{1,2})(\S*)[ \t]?(.*)")  # linear: no lazy run
_CALL = re.compile(r"get_ipython\(\)\.(run_line_magic|run_cell_magic|system|getoutput)\(")
_NAME = re.compile(r"run_line_magic\((['\"])(%?\w*)\1")
_TIMEIT_OPTIONS = re.compile(r"\s*(?:-(?:[nrp]\s*\d+(?:\.\d+)?|[tcqov]+)\s+)*")


@dataclasses.dataclass(frozen=True)
class GradedPython:
    """A graded cell as the grader runs it.

    Attributes:
        code: the Python compiled, one line for each line of the cell.
        not_run: ``(line, the cell's line)`` of each magic or shell line not run.
        whole_cell: the cell starts with a cell magic not run (``%%bash``): nothing ran.
    """

    code: str
    not_run: tuple[tuple[int, str], ...] = ()
    whole_cell: bool = False


def _blank_leading(lines: list[str]) -> int:
    """How many of ``lines`` come before the first that is not blank."""
    for index, line in enumerate(lines):
        if line.strip():
            return index
    return len(lines)


def _padded(cls):
    """IPython's token transformer ``cls``, keeping the line count: a magic continued over
    several lines with ``\\`` becomes one line, followed by blank lines for the others."""

    def transform(self, lines):
        new = cls.transform(self, lines)
        lost = len(lines) - len(new)
        if lost > 0:
            at = self.start_line + 1
            new = new[:at] + ["\n"] * lost + new[at:]
        return new

    return type(cls.__name__, (cls,), {"transform": transform})


def _ipython_transform(lines: list[str]) -> list[str] | None:
    """IPython's transformation of ``lines`` (no cell magic), or None where IPython is not
    installed or fails."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager, cell_magic
    except ImportError:
        return None
    manager = TransformerManager()
    manager.line_transforms = [t for t in manager.line_transforms if t is not cell_magic]
    manager.token_transformers = [_padded(t) for t in manager.token_transformers]
    try:
        return manager.transform_cell("".join(lines)).splitlines(True)
    except Exception:  # noqa: BLE001 - IPython's own limits (its loop limit): the fallback
        return None


def _regex_transform(lines: list[str]) -> list[str]:
    """Magic and shell lines starting a line, transformed as IPython would (strings and
    assignments of a magic's value not told apart)."""
    out = []
    for line in lines:
        match = _LINE_MAGIC.match(line)
        if not match:
            out.append(line)
            continue
        indent, escape, name, rest = match.groups()
        rest = rest.rstrip()
        if escape.startswith("!"):
            call = f"get_ipython().system({(name + ' ' + rest).strip()!r})"
        else:
            call = f"get_ipython().run_line_magic({escape[1:] + name!r}, {rest!r})"
        out.append(f"{indent}{call}\n")
    return out


def _transform(lines: list[str]) -> list[str]:
    """``lines`` (no cell magic) with IPython's syntax turned into calls, as many lines."""
    special = len(_SPECIAL.findall("".join(lines)))
    if not special:
        return lines
    lead = _blank_leading(lines)  # IPython drops leading blank lines: kept here
    body = lines[lead:]
    new = None
    if (special + 1) * sum(map(len, body)) <= MAX_WORK:
        new = _ipython_transform(body)
    if new is None or len(new) != len(body):
        new = _regex_transform(body)
    return lines[:lead] + new


def _runs(line: str) -> bool:
    """Whether the grader runs the code of the magic called on ``line`` (transformed)."""
    match = _NAME.search(line)
    if not match:
        return False  # a shell line, or a call written by hand
    name = match.group(2)
    # ``%%time`` below the first line is a line magic ``%time`` to IPython: the lines
    # after it run as the cell's other lines do
    return name in RUN_LINE or (name.startswith("%") and name[1:] in RUN_CELL)


def _compiles(source: str) -> bool:
    try:
        compile(source, "<graded cell>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError):
        return False
    return True


def graded_python(source: str) -> GradedPython:
    """The Python the grader runs for a graded cell's ``source``, and the lines it does not
    run; line ``n`` of the code is line ``n`` of the cell. Code that is Python as it is
    runs as it is: a line IPython would turn into a call never compiles, and a line that
    only looks like a magic (``% (a, b))`` continuing a string formatting, a docstring's
    ``!``) is left alone."""
    if _compiles(source):
        return GradedPython(source, ())
    lines = source.splitlines(True)
    lead = _blank_leading(lines)
    first = _CELL_MAGIC.fullmatch(lines[lead].rstrip("\r\n")) if lead < len(lines) else None
    if first and first.group(1) not in RUN_CELL:  # %%bash, %%writefile...: nothing runs
        blank = "\n" * len(lines)
        return GradedPython(blank, ((lead + 1, lines[lead].rstrip()),), whole_cell=True)
    if first:  # %%time, %%timeit, %%capture: the body runs (%%timeit's set-up line too)
        setup = (
            _TIMEIT_OPTIONS.sub("", first.group(2), count=1) if first.group(1) == "timeit" else ""
        )
        lines = lines[:lead] + [setup + "\n"] + lines[lead + 1 :]
    new = _transform(lines)
    not_run = tuple(
        (number, old.rstrip())
        for number, (old, line) in enumerate(zip(lines, new), start=1)
        if old != line and _CALL.search(line) and not _runs(line)
    )
    return GradedPython("".join(new), not_run)


def _short(line: str, most: int = 80) -> str:
    """A quoted line, at most ``most`` characters (a note is not the place for a long one)."""
    return line if len(line) <= most else line[: most - 3] + "..."


def not_run_note(piece: str, source: str) -> str | None:
    """The note saying which magic and shell lines of graded cell ``piece`` the grader did
    not run, or None where it ran them all."""
    graded = graded_python(source)
    not_run = graded.not_run
    if not not_run:
        return None
    if graded.whole_cell:
        return (
            f"graded cell {piece}: its cell magic `{_short(not_run[0][1].strip())}` (line "
            f"{not_run[0][0]}) and the code under it were not run by the grader (it runs "
            f"graded cells as Python: of the cell magics, %%time, %%timeit and %%capture run "
            f"their code)"
        )
    said = [f"line {number} `{_short(text.strip())}`" for number, text in not_run[:NOTE_LINES]]
    if len(not_run) > NOTE_LINES:
        said.append(f"{len(not_run) - NOTE_LINES} more")
    listed = said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]
    verb = "was" if len(not_run) == 1 else "were"
    return (
        f"graded cell {piece}: {listed} {verb} not run by the grader (it runs graded "
        f"cells as Python: %time, %timeit, %%time, %%timeit and %%capture run their code; "
        f"other magics and ! shell lines do nothing, and nothing is installed at grading)"
    )


class Shell:
    """``get_ipython()`` in the grader's child process: runs what :data:`RUN_LINE` and
    :data:`RUN_CELL` name, in the namespace of the code that called it; anything else does
    nothing."""

    def __repr__(self) -> str:
        return "<lablib grader: not IPython>"

    def run_line_magic(self, magic_name, line, _stack_depth=1):
        if magic_name not in RUN_LINE:
            return None
        caller = sys._getframe(_stack_depth)
        if magic_name == "timeit":
            line = _TIMEIT_OPTIONS.sub("", line, count=1)
        return _run_statement(line, caller)

    def run_cell_magic(self, magic_name, line, cell):
        if magic_name in RUN_CELL:
            caller = sys._getframe(1)
            code = graded_python(cell).code
            exec(compile(code, caller.f_code.co_filename, "exec"), caller.f_globals)
        return None

    def system(self, cmd):
        return None

    def getoutput(self, cmd, split=True, depth=0):
        return []


def _run_statement(statement: str, caller) -> object:
    """Run ``statement`` (``%time``'s) where its caller runs, its errors at the caller's
    line; an expression's value is returned, as IPython's ``%time`` returns it."""
    padded = "\n" * (caller.f_lineno - 1) + statement.strip()
    filename = caller.f_code.co_filename
    try:
        code = compile(padded, filename, "eval")
    except SyntaxError:
        exec(compile(padded, filename, "exec"), caller.f_globals, caller.f_locals)
        return None
    return eval(code, caller.f_globals, caller.f_locals)


_SHELL = Shell()


def get_ipython() -> Shell:
    """The grader's stand-in for IPython's ``get_ipython()``."""
    return _SHELL
