"""The code conventions of docs/development/layout.md that a reader can check by rule."""

import ast
import functools
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
LONGEST = 80  # lines, signature and docstring included
WHY = "# Over 80 lines"
CLOCKS = frozenset(
    {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns"}
)
NOT_SERIAL = "# not serial:"


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


def _marks(decorators) -> set[str]:
    """The names of ``pytest.mark.<name>`` found in decorators or a ``pytestmark`` value."""
    return {
        sub.attr
        for decorator in decorators
        for sub in ast.walk(decorator)
        if isinstance(sub, ast.Attribute)
        and isinstance(sub.value, ast.Attribute)
        and sub.value.attr == "mark"
    }


def _reads_a_clock(node, clocked: set[str]) -> bool:
    """Whether ``node`` calls ``time.<clock>()`` (or a clock imported by name) or reads a
    local name assigned from one."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            function = sub.func
            if (
                isinstance(function, ast.Attribute)
                and function.attr in CLOCKS
                and isinstance(function.value, ast.Name)
                and function.value.id == "time"
            ):
                return True
            if isinstance(function, ast.Name) and function.id in CLOCKS - {"time"}:
                return True
        if isinstance(sub, ast.Name) and sub.id in clocked:
            return True
    return False


def _ordered(node) -> list:
    return [
        c
        for c in ast.walk(node)
        if isinstance(c, ast.Compare)
        and any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in c.ops)
    ]


def _assigned(test, reads) -> set[str]:
    """The local names assigned (to, or into: ``timings[what] = ...``) from an expression
    for which ``reads(expression, names so far)`` holds, followed to a fixed point."""
    names: set[str] = set()
    grew = True
    while grew:
        grew = False
        for node in ast.walk(test):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value:
                if reads(node.value, names):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for name in (n for t in targets for n in ast.walk(t)):
                        if isinstance(name, ast.Name) and name.id not in names:
                            names.add(name.id)
                            grew = True
    return names


def _picks_by_time(value, names, clocked) -> bool:
    """Whether ``value`` orders a clock's reading (or reads a name in ``names``)."""
    return (_reads_a_clock(value, clocked) and bool(_ordered(value))) or any(
        isinstance(n, ast.Name) and n.id in names for n in ast.walk(value)
    )


def time_bounds_outside_the_serial_pass(source: str) -> list[tuple[str, int]]:
    """``(test, line)`` of each assert in a test function that orders a clock's reading
    (``assert time.monotonic() - began < 10``, ``assert seconds < 1.0`` where ``seconds``
    came from a clock), or reads what such an order picked out (``slow = [w for w, s in
    timings.items() if s > BOUND]``, ``assert not slow``), in a test not marked ``serial``
    without a ``# not serial: ...`` comment on the assert or the line above it saying why
    the bound holds under load. Asserts in helpers outside the test are not read."""
    lines = source.splitlines()
    tree = ast.parse(source)
    module_marks = _marks(
        [
            node.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        ]
    )
    if "serial" in module_marks:
        return []
    found = []
    for test in ast.walk(tree):
        if not isinstance(test, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not test.name.startswith("test") or "serial" in _marks(test.decorator_list):
            continue
        clocked = _assigned(test, _reads_a_clock)
        bounded = _assigned(test, functools.partial(_picks_by_time, clocked=clocked))
        for node in ast.walk(test):
            if not isinstance(node, ast.Assert):
                continue
            if not any(_reads_a_clock(c, clocked) for c in _ordered(node.test)) and not any(
                isinstance(n, ast.Name) and n.id in bounded for n in ast.walk(node.test)
            ):
                continue
            said = "\n".join(lines[max(node.lineno - 2, 0) : node.end_lineno])
            if NOT_SERIAL not in said:
                found.append((test.name, node.lineno))
    return found


def test_a_time_bound_runs_in_the_serial_pass():
    missing = [
        f"{path.relative_to(ROOT)}:{line} {name}"
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        for name, line in time_bounds_outside_the_serial_pass(path.read_text("utf-8"))
    ]
    assert not missing, (
        "tests asserting a time bound without the serial mark (docs/development/tests.md: "
        ".ci/run runs them alone, after the parallel pass): mark them "
        "@pytest.mark.serial, or say beside the assert why the bound holds on a loaded "
        f"machine ('{NOT_SERIAL} ...'):\n" + "\n".join(missing)
    )


def test_the_rule_finds_a_time_bound_and_accepts_the_mark_or_a_reason():
    bound = (
        "import time\n\n\ndef test_fast():\n    began = time.monotonic()\n"
        "    seconds = time.monotonic() - began\n    assert seconds < 1.0\n"
    )
    assert time_bounds_outside_the_serial_pass(bound) == [("test_fast", 7)]
    direct = "def test_fast():\n    assert perf_counter() - 0 < 1.0\n"
    assert time_bounds_outside_the_serial_pass(direct) == [("test_fast", 2)]
    marked = bound.replace("def test_fast", "@pytest.mark.serial\ndef test_fast")
    assert time_bounds_outside_the_serial_pass(marked) == []
    module = "pytestmark = [pytest.mark.slow, pytest.mark.serial]\n" + bound
    assert time_bounds_outside_the_serial_pass(module) == []
    reason = bound.replace("    assert", "    # not serial: 0.01 s against 1.0\n    assert")
    assert time_bounds_outside_the_serial_pass(reason) == []
    untimed = bound.replace("assert seconds < 1.0", "assert len('ab') < 3")
    assert time_bounds_outside_the_serial_pass(untimed) == []
    equal = bound.replace("seconds < 1.0", "seconds == seconds")
    assert time_bounds_outside_the_serial_pass(equal) == []
    picked = bound.replace(
        "    assert seconds < 1.0\n",
        "    slow = [s for s in [seconds] if s > 1.0]\n    assert not slow\n",
    )
    assert time_bounds_outside_the_serial_pass(picked) == [("test_fast", 8)]
