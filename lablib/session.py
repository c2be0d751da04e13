"""lablib in a student's notebook: "Run all" on a lab whose graded pieces are not all
written yet.

In a blank lab, each graded piece is a stub that raises
``NotImplementedError(STUB_MESSAGE.format(piece=...))`` where the code is missing. Its
check cell reports "not done yet"; but a demo cell that calls the stub would stop "Run
all" at the first unfinished piece, and hide every later check. :func:`start` (the lab's
first cell runs it, through :func:`lablib.install.prepare`) gives IPython an AST
transformer, :class:`SkipUnfinished`, that runs each cell so that

* a call that reaches an unfinished piece's stub skips the rest of the cell with one
  line naming the piece, and
* a later cell that fails while using a name such a skipped cell was making (the model
  it would have built, a results table it had only begun) skips with one line naming
  the piece it waits for, until a cell that makes that name again finishes,

while any other error, a student's ``NameError`` from a typo included, keeps its own
traceback. The notebook's variables are never removed or changed. Outside IPython (scripts, the grader's child process) nothing changes.
Standard library only.
"""

from __future__ import annotations

import ast
import re

__all__ = [
    "STUB_MESSAGE",
    "EXERCISE_MESSAGE",
    "exercise_message",
    "NOT_DONE",
    "NOT_IMPLEMENTED",
    "unfinished_piece",
    "not_done_text",
    "start",
    "SkipUnfinished",
    "skip",
    "done",
]

#: What a blank lab's stub raises (``lablib assign`` writes it; :func:`unfinished_piece`
#: reads it back): ``NotImplementedError(STUB_MESSAGE.format(piece="readout"))``.
STUB_MESSAGE = "Write your code for the graded piece {piece!r} here."

#: What the stub of an ungraded exercise (a solution region outside graded cells) raises;
#: at a cell's top level :func:`exercise_message` adds the names the exercise defines.
EXERCISE_MESSAGE = "Write your code here."
_DEFINES = " It defines "

#: How a check and the grader's report begin the message of a piece still a stub.
NOT_DONE = "not done yet"
#: How the grader begins the message of a ``NotImplementedError`` the student's own code
#: raised (not the blank lab's stub): the piece is not finished, not wrong.
NOT_IMPLEMENTED = "not implemented yet (NotImplementedError"

_STUB_RE = re.compile(r"Write your code for the graded piece '([^']+)' here\.")

#: name -> what unfinished work kept a skipped cell from defining it.
_WAITING: dict[str, str] = {}


def exercise_message(solution: str) -> str:
    """The stub message of an ungraded exercise whose solution is ``solution`` (top-level
    code; ``""`` inside a function): the names it defines travel in the message, so that
    a later cell needing them skips instead of stopping "Run all" with a NameError."""
    try:
        names = _assigned_names(ast.parse(solution).body) if solution.strip() else []
    except SyntaxError:
        names = []
    return EXERCISE_MESSAGE + (f"{_DEFINES}{', '.join(names)}." if names else "")


def _exercise_names(error: BaseException) -> list[str] | None:
    """The names an exercise stub's message lists ([] for none); None for another error."""
    text = str(error)
    if not isinstance(error, NotImplementedError) or not text.startswith(EXERCISE_MESSAGE):
        return None
    rest = text[len(EXERCISE_MESSAGE) :]
    if not rest:
        return []
    if not (rest.startswith(_DEFINES) and rest.endswith(".")):
        return None
    names = [n.strip() for n in rest[len(_DEFINES) : -1].split(",")]
    return names if all(n.isidentifier() for n in names) else None


def unfinished_piece(exc: BaseException) -> str | None:
    """The graded piece whose stub raised ``exc``, or None for any other exception."""
    if isinstance(exc, NotImplementedError):
        match = _STUB_RE.search(str(exc))
        return match.group(1) if match else None
    return None


def not_done_text(piece: str) -> str:
    """The one line a check (and the grader's feedback) gives a piece still a stub."""
    return (
        f"{NOT_DONE}: the graded piece {piece!r} still raises NotImplementedError. "
        f"Replace `# YOUR CODE HERE` and the `raise` line in its graded cell with your "
        f"code, run that cell, then this check again."
    )


def skip(error: BaseException, names, used) -> bool:
    """Called by a transformed cell that raised ``error``: True (and one printed line)
    when the cell waits for unfinished work, False to let the error through.

    The cell waits when ``error`` is a blank lab's stub, or when it uses (``used``: the
    names the cell reads) a name that an earlier skipped cell did not finish making: a
    ``NameError`` for it, or any error at all, since what that name holds is incomplete.
    ``names`` (what the cell binds) then wait for the same work, until a cell that binds
    them finishes (:func:`done`). The names' values are the student's: never removed or
    changed.
    """
    piece = unfinished_piece(error)
    if piece is not None:
        work = f"the graded piece {piece!r}"
        print(f"lablib: skipped the rest of this cell: it needs {work}, which is not written yet.")
    elif _exercise_names(error) is not None:
        work = "an exercise not written yet (`# YOUR CODE HERE`)"
        print(f"lablib: skipped the rest of this cell: it reaches {work}.")
    else:
        missing = getattr(error, "name", None) if isinstance(error, NameError) else None
        waiting = [missing] if missing in _WAITING else [n for n in used if n in _WAITING]
        if not waiting:
            return False
        work = _WAITING[waiting[0]]
        print(
            f"lablib: skipped this cell: it needs `{waiting[0]}`, which a cell skipped "
            f"earlier did not finish making (waiting for {work})."
        )
    for name in list(names) + (_exercise_names(error) or []):
        _WAITING[name] = work
    return True


def done(names) -> None:
    """Called when a transformed cell finished: what it bound waits for nothing now."""
    for name in names:
        _WAITING.pop(name, None)


class _Bound(ast.NodeVisitor):
    """The names a cell binds in its own namespace: assignments anywhere outside function,
    class, lambda and comprehension bodies (``with``, ``for``, ``if``, ``try`` blocks
    included), and the names of the functions, classes and imports it defines."""

    def __init__(self):
        self.names: set[str] = set()

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Store):
            self.names.add(node.id)

    def _defines(self, node):
        self.names.add(node.name)  # its body binds names of its own scope

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _defines

    def _own_scope(self, node):
        pass

    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _own_scope

    def visit_Import(self, node):
        self.names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)

    visit_ImportFrom = visit_Import


def _assigned_names(statements) -> list[str]:
    """Names a cell binds at its top level (see :class:`_Bound`)."""
    bound = _Bound()
    for statement in statements:
        bound.visit(statement)
    return sorted(bound.names - {"*"})


_LAST = "_lablib_last_value"

_TEMPLATE = f"""
try:
    pass
except Exception as _lablib_error:
    if not __import__("lablib.session", fromlist=["skip"]).skip(
            _lablib_error, NAMES, USED):
        raise
    {_LAST} = None
else:
    __import__("lablib.session", fromlist=["done"]).done(NAMES)
"""


def _used_names(node) -> list[str]:
    """Every name the cell reads, functions it defines included."""
    return sorted(
        {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    )


class SkipUnfinished(ast.NodeTransformer):
    """IPython AST transformer: a cell's statements run inside ``try``; an unfinished
    piece (or a name it kept from being defined) skips the rest with :func:`skip`'s line.
    The cell's last expression is still displayed (it is evaluated inside the ``try``
    into a variable that ends the cell). Cells with ``from __future__`` imports are left
    as they are (those imports must open a module)."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        body = node.body
        if not body or any(
            isinstance(s, ast.ImportFrom) and s.module == "__future__" for s in body
        ):
            return node
        wrapper = ast.parse(_TEMPLATE).body[0]

        def constant(values):
            return ast.List(elts=[ast.Constant(v) for v in values], ctx=ast.Load())

        assigned, used = _assigned_names(body), _used_names(node)
        wrapper.handlers[0].body[0].test.operand.args[1:3] = [constant(assigned), constant(used)]
        wrapper.orelse[0].value.args[0] = constant(assigned)
        last = body[-1]
        if isinstance(last, ast.Expr):
            store = ast.Assign(targets=[ast.Name(_LAST, ast.Store())], value=last.value)
            wrapper.body = body[:-1] + [ast.copy_location(store, last)]
            tail = [ast.copy_location(ast.Expr(ast.Name(_LAST, ast.Load())), last)]
        else:
            wrapper.body = list(body)
            tail = []
        ast.copy_location(wrapper, body[0])
        node.body = [wrapper] + tail
        return ast.fix_missing_locations(node)


def start(shell=None) -> bool:
    """Install :class:`SkipUnfinished` in the running IPython (once); False outside IPython."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None or not hasattr(shell, "ast_transformers"):
        return False
    if not any(isinstance(t, SkipUnfinished) for t in shell.ast_transformers):
        shell.ast_transformers.append(SkipUnfinished())
    return True
