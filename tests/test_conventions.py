"""The code conventions of docs/development/layout.md that a reader can check by rule."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
LONGEST = 80  # lines, signature and docstring included
WHY = "# Over 80 lines"


def long_functions_without_a_reason(source: str) -> list[tuple[str, int, int]]:
    """``(name, first line, lines)`` of each function longer than :data:`LONGEST` lines
    without the ``# Over 80 lines ...`` comment between its ``def`` and its first
    statement after the docstring (under the signature, before or after the docstring)."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        length = node.end_lineno - node.lineno + 1
        code = node.body[1:] if ast.get_docstring(node, clean=False) is not None else node.body
        end = code[0].lineno - 1 if code else node.end_lineno
        head = "\n".join(lines[node.lineno - 1 : end])
        if length > LONGEST and WHY not in head:
            found.append((node.name, node.lineno, length))
    return found


def test_a_long_function_says_why():
    missing = [
        f"{path.relative_to(ROOT)}:{line} {name} ({length} lines)"
        for path in sorted((ROOT / "lablib").rglob("*.py"))
        for name, line, length in long_functions_without_a_reason(path.read_text("utf-8"))
    ]
    assert not missing, (
        f"functions over {LONGEST} lines without a '{WHY} ...' comment under the signature "
        "(docs/development/layout.md, Conventions): say why, or split it into named "
        "helpers:\n" + "\n".join(missing)
    )


def test_the_rule_finds_a_long_function_and_accepts_its_reason():
    body = "".join(f"    x{n} = {n}\n" for n in range(LONGEST))
    long = "def f():\n" + body
    assert long_functions_without_a_reason(long) == [("f", 1, LONGEST + 1)]
    said = "def f():\n    # Over 80 lines: a table.\n" + body
    assert long_functions_without_a_reason(said) == []
    documented = 'def f():\n    """Doc."""\n    # Over 80 lines: a table.\n' + body
    assert long_functions_without_a_reason(documented) == []
    assert long_functions_without_a_reason("def g():\n" + body[: -len("    x79 = 79\n")]) == []
