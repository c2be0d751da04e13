"""How well do the public checks catch and name mistakes? Measured by mutation.

For every by-hand graded piece of a lab, the solution's graded cell is mutated one
change at a time by an AST transformer (lablib's own; the mutation tools for Python
mutate files and run test suites, not one cell against a notebook check):

* arithmetic operators swapped (``+``/``-``, ``*``/``/``, ``**`` -> ``*``, ``@`` operands
  swapped), a unary minus dropped, comparisons flipped;
* ``axis=`` moved to a neighbouring axis, ``keepdims=True`` dropped;
* ``.T`` dropped, ``np.sqrt(x)`` -> ``x`` (a scale left out);
* reductions and elementwise functions replaced by a neighbour (``sum``/``mean``,
  ``max``/``min``, ``exp``/``log``, ``sin``/``cos``, ``maximum``/``minimum``);
* numeric constants perturbed (``n`` -> ``n + 1``, ``x`` -> ``2 x``, 0 <-> 1);
* subscripts shifted by one (``a[:n]`` -> ``a[:n - 1]``, ``a[i]`` -> ``a[i + 1]``).

A mutant whose probes return what the solution's return (every public test's probe,
compared value by value) is *equivalent* and dropped; a mutant that fails to run at
all (a syntax or name error) counts as caught. For the rest, ``lablib.check`` runs the
piece's public checks, and the table gives per piece: mutants, equivalent ones, caught
(a public test fails), named (the first failing test's message is a diagnosis naming
the mistake, not only a mismatch), and the share that print a fixed hint (after a
diagnosis, a hint about another mistake would mislead; without one the hint may or may
not fit). Each lab runs in its own process (its first cell chooses the Keras mode).

Run::

    .venv/bin/python benchmarks/mutation.py --output benchmarks/results/mutation.md
    .venv/bin/python benchmarks/mutation.py --labs lab1_attention --limit 20
    .venv/bin/python benchmarks/mutation.py --labs lab1 --messages  # short names work too
    .venv/bin/python benchmarks/mutation.py --quick       # one lab, a few mutants (CI)
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("LABLIB_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SWAP_BINOP = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.Pow: ast.Mult,
    ast.FloorDiv: ast.Div,
}
SWAP_CMP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}
SWAP_NAME = {
    "sum": "mean",
    "mean": "sum",
    "max": "min",
    "min": "max",
    "exp": "log",
    "log": "exp",
    "sin": "cos",
    "cos": "sin",
    "maximum": "minimum",
    "minimum": "maximum",
    "argmax": "argmin",
    "argmin": "argmax",
    "reduce_sum": "reduce_mean",
    "reduce_mean": "reduce_sum",
    "reduce_max": "reduce_min",
}


def parse_args(argv=None):
    from lablib.labs import UnknownLab, all_labs, lab_names, resolve_lab

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--labs",
        default=",".join(lab_names()),
        help="comma-separated labs, full or short names (lab1_attention or lab1); default: all",
    )
    parser.add_argument(
        "--limit", type=int, default=80, help="mutants per piece at most (spread over the cell)"
    )
    parser.add_argument("--quick", action="store_true", help="Lab 1, 6 mutants per piece")
    parser.add_argument("--output", help="also write the table to this markdown file")
    parser.add_argument("--json", help="also write the rows (one per piece) to this JSON file")
    parser.add_argument("--pieces", help="only these pieces (comma-separated names)")
    parser.add_argument(
        "--messages",
        action="store_true",
        help="print each caught mutant's first failing message to stderr (what a student reads)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = []
    for lab in filter(None, (lab.strip() for lab in args.labs.split(","))):
        try:  # the full name: each lab's solution is solutions/<full name>.ipynb
            names.append(resolve_lab(lab).name)
        except UnknownLab:
            known = ", ".join(f"{each.short} ({each.name})" for each in all_labs())
            parser.error(f"--labs: unknown lab {lab!r}; expected one of: {known}")
    args.labs = ",".join(names)
    return args


# --------------------------------------------------------------------------- mutations


class _Sites(ast.NodeVisitor):
    """Every place a mutation applies, in source order: (node index, kind)."""

    def __init__(self):
        self.sites, self.index = [], 0

    def generic_visit(self, node):
        node._mutation_index = self.index
        self.index += 1
        for kind in _kinds(node):
            self.sites.append((node._mutation_index, kind))
        super().generic_visit(node)


def _kinds(node) -> list[str]:
    kinds = []
    if isinstance(node, ast.BinOp):
        if type(node.op) in SWAP_BINOP:
            kinds.append("binop")
        if isinstance(node.op, ast.MatMult):
            kinds.append("matmul-swap")
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        kinds.append("drop-minus")
    elif isinstance(node, ast.Compare) and type(node.ops[0]) in SWAP_CMP:
        kinds.append("compare")
    elif (
        isinstance(node, ast.keyword)
        and node.arg == "axis"
        and isinstance(node.value, (ast.Constant, ast.UnaryOp))
    ):
        kinds.append("axis")
    elif isinstance(node, ast.keyword) and node.arg == "keepdims":
        kinds.append("keepdims")
    elif isinstance(node, ast.Attribute) and node.attr == "T":
        kinds.append("drop-T")
    elif (
        isinstance(node, ast.Attribute)
        and node.attr in SWAP_NAME
        and isinstance(node.ctx, ast.Load)
    ):
        kinds.append("function")
    elif (
        isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", "")) == "sqrt"
        and node.args
    ):
        kinds.append("drop-sqrt")
    elif (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        kinds.append("constant")
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        kinds.append("index")
    return kinds


class _Apply(ast.NodeTransformer):
    def __init__(self, index, kind):
        self.target, self.kind, self.done = index, kind, None

    def generic_visit(self, node):
        node = super().generic_visit(node)
        if getattr(node, "_mutation_index", None) != self.target or self.done:
            return node
        self.done = self.kind
        k = self.kind
        if k == "binop":
            node.op = SWAP_BINOP[type(node.op)]()
        elif k == "matmul-swap":
            node.left, node.right = node.right, node.left
        elif k == "drop-minus":
            return node.operand
        elif k == "compare":
            node.ops = [SWAP_CMP[type(node.ops[0])]()] + node.ops[1:]
        elif k == "axis":
            value = ast.literal_eval(node.value)
            node.value = ast.Constant(value - 1 if value != 0 else 1)
        elif k == "keepdims":
            node.value = ast.Constant(False)
        elif k == "drop-T":
            return node.value
        elif k == "function":
            node.attr = SWAP_NAME[node.attr]
        elif k == "drop-sqrt":
            return node.args[0]
        elif k == "constant":
            v = node.value
            node.value = (
                (1 if v == 0 else 0 if v == 1 else v + 1)
                if isinstance(v, int)
                else (v * 2 if v else 1.0)
            )
        elif k == "index":
            node.slice = _shift(node.slice)
        return node


def _shift(index):
    """``a[:n]`` -> ``a[:n - 1]``; ``a[i]`` -> ``a[i + 1]``; tuples: the first entry."""
    one = ast.Constant(1)
    if isinstance(index, ast.Slice):
        if index.upper is not None:
            index.upper = ast.BinOp(index.upper, ast.Sub(), one)
        elif index.lower is not None:
            index.lower = ast.BinOp(index.lower, ast.Add(), one)
        else:
            index.lower = one
        return index
    if isinstance(index, ast.Tuple) and index.elts:
        index.elts[0] = _shift(index.elts[0])
        return index
    return ast.BinOp(index, ast.Add(), one)


def mutants(source: str, limit: int) -> list[tuple[str, str, int]]:
    """``(description, mutated source, line)`` for up to ``limit`` single mutations of
    the code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (the student's part),
    spread evenly over the sites."""
    tree = ast.parse(source)
    lines = source.splitlines()
    student = set()
    inside = False
    for number, line in enumerate(lines, 1):
        if "### BEGIN SOLUTION" in line:
            inside = True
        elif "### END SOLUTION" in line:
            inside = False
        elif inside:
            student.add(number)
    finder = _Sites()
    finder.visit(tree)
    nodes = {n._mutation_index: n for n in ast.walk(tree) if hasattr(n, "_mutation_index")}
    sites = [(i, k) for i, k in finder.sites if getattr(nodes[i], "lineno", 0) in student]
    if len(sites) > limit:
        step = len(sites) / limit
        sites = [sites[int(j * step)] for j in range(limit)]
    out = []
    for index, kind in sites:
        mutated = copy.deepcopy(tree)
        applier = _Apply(index, kind)
        mutated = ast.fix_missing_locations(applier.visit(mutated))
        if not applier.done:
            continue
        line = nodes[index].lineno
        text = ast.unparse(mutated)
        out.append((f"{kind} at line {line}: {lines[line - 1].strip()[:70]}", text, line))
    return out


# --------------------------------------------------------------------------- child: one lab


def _same(a, b) -> bool:
    import numpy as np

    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        x, y = np.asarray(a), np.asarray(b)
        if x.dtype.kind in "fc" or y.dtype.kind in "fc":
            return x.shape == y.shape and bool(
                np.allclose(x, y, rtol=1e-6, atol=1e-7, equal_nan=True)
            )
        return x.shape == y.shape and bool(np.all(x == y))
    except Exception:  # noqa: BLE001 - values that do not compare are not the same
        return False


def _seed_everything():
    """The same random draws for the solution and each mutant (layers start from random
    weights: two runs of the same layer must give the same probe values)."""
    import random

    import numpy as np

    random.seed(0)
    np.random.seed(0)
    for name in ("keras", "tf_keras"):
        module = sys.modules.get(name)
        if module is not None and hasattr(getattr(module, "utils", None), "set_random_seed"):
            module.utils.set_random_seed(0)


def _probe_values(tests, ns):
    values = []
    for test in tests:
        _seed_everything()
        try:
            values.append(("ok", test.probe(dict(ns))))
        except BaseException as error:  # noqa: BLE001 - a mutant may raise anything
            values.append(("raised", type(error).__name__))
    return values


def run_lab(lab: str, limit: int, pieces=None, messages=False) -> dict:
    import io
    import contextlib

    import nbformat

    import lablib
    from lablib.grading.spec import load_lab

    notebook = nbformat.read(os.path.join(ROOT, "solutions", f"{lab}.ipynb"), as_version=4)
    spec = load_lab(lab)
    ns = {"__name__": "__main__"}
    by_piece = {}
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet):
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            first = cell.source.lstrip().splitlines()[0] if cell.source.strip() else ""
            if first.startswith("# SETUP"):
                exec(compile(cell.source, f"<setup {lab}>", "exec"), ns)
            elif first.startswith("# GRADED:"):
                piece = first.split(":", 1)[1].strip()
                by_piece[piece] = (cell.source, dict(ns))  # the namespace before the cell
                exec(compile(cell.source, f"<graded {piece}>", "exec"), ns)
    rows = []
    for piece, (source, before) in by_piece.items():
        if piece not in spec.pieces or not spec.pieces[piece].by_hand:
            continue  # model-building pieces are judged by training: not mutated here
        if pieces and piece not in pieces:
            continue
        objects = spec.pieces[piece].objects
        tests = spec.tests_for(piece, hidden=False)
        solution_ns = dict(before)
        exec(compile(source, f"<graded {piece}>", "exec"), solution_ns)
        reference = _probe_values(tests, solution_ns)
        row = {
            "lab": lab,
            "piece": piece,
            "mutants": 0,
            "equivalent": 0,
            "caught": 0,
            "named": 0,
            "hint": 0,
            "missed": [],
        }
        for description, text, _ in mutants(source, limit):
            row["mutants"] += 1
            mutant_ns = dict(before)
            try:
                with contextlib.redirect_stdout(quiet):
                    exec(compile(text, f"<mutant {piece}>", "exec"), mutant_ns)
            except BaseException:  # noqa: BLE001 - the cell itself fails: caught at once
                row["caught"] += 1
                continue
            if _same(_probe_values(tests, mutant_ns), reference):
                row["equivalent"] += 1
                continue
            with contextlib.redirect_stdout(quiet):
                try:
                    result = lablib.check(
                        lab,
                        piece,
                        quiet=True,
                        **{o: mutant_ns[o] for o in objects if o in mutant_ns},
                    )
                except BaseException as error:  # noqa: BLE001
                    row["caught"] += 1
                    row["missed"].append(f"{description} (check raised {type(error).__name__})")
                    continue
            failed = [r for r in result.results if not r.passed]
            if not failed:
                row["missed"].append(description)
                continue
            row["caught"] += 1
            row["named"] += bool(
                getattr(failed[0], "mistake", False) or getattr(failed[0], "named", False)
            )
            if messages:
                mark = "NAMED" if failed[0].mistake else "plain"
                print(
                    f"## {piece} | {description}\n   [{mark}] {failed[0].name}: {' '.join(failed[0].message.split())[:600]}"
                    + (f"\n   hint: {failed[0].hint[:200]}" if failed[0].hint else ""),
                    file=sys.stderr,
                    flush=True,
                )
            row["hint"] += any(r.hint for r in failed)
        rows.append(row)
        print(
            f"# {lab}/{piece}: {json.dumps({k: v for k, v in row.items() if k != 'missed'})}",
            file=sys.stderr,
            flush=True,
        )
    return {"rows": rows}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.child:
        pieces = set(args.pieces.split(",")) if args.pieces else None
        print("RESULT " + json.dumps(run_lab(args.child, args.limit, pieces, args.messages)))
        return 0
    labs = (
        ["lab1_attention"]
        if args.quick
        else [lab.strip() for lab in args.labs.split(",") if lab.strip()]
    )
    limit = 6 if args.quick else args.limit
    env = dict(
        os.environ,
        LABLIB_FAST="1",
        PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
    )
    env.pop("TF_USE_LEGACY_KERAS", None)
    rows = []
    for lab in labs:
        extra = (["--pieces", args.pieces] if args.pieces else []) + (
            ["--messages"] if args.messages else []
        )
        child = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child", lab, "--limit", str(limit)]
            + extra,
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
        )
        if args.messages:
            sys.stderr.write(
                "".join(
                    line + "\n"
                    for line in child.stderr.splitlines()
                    if line.startswith(("## ", "   "))
                )
            )
        lines = [line for line in child.stdout.splitlines() if line.startswith("RESULT ")]
        if child.returncode != 0 or not lines:
            sys.stderr.write(child.stdout[-3000:] + child.stderr[-3000:])
            raise SystemExit(f"{lab}: the child process failed (exit code {child.returncode})")
        rows += json.loads(lines[-1][len("RESULT ") :])["rows"]
    if args.json:
        import tempfile

        folder = os.path.dirname(os.path.abspath(args.json))
        with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp") as handle:
            json.dump(rows, handle, indent=1)
        os.replace(handle.name, args.json)
    table = [
        "| lab | piece | mutants | equivalent | caught | caught / non-equivalent | named first | named / caught | printed a fixed hint |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    totals = {k: 0 for k in ("mutants", "equivalent", "caught", "named", "hint")}
    for row in rows:
        live = row["mutants"] - row["equivalent"]
        table.append(
            f"| {row['lab']} | {row['piece']} | {row['mutants']} | {row['equivalent']} | {row['caught']} | "
            f"{row['caught'] / live:.0%} | {row['named']} | "
            f"{(row['named'] / row['caught']) if row['caught'] else 0:.0%} | {row['hint']} |"
            if live
            else f"| {row['lab']} | {row['piece']} | {row['mutants']} | {row['equivalent']} | 0 | - | 0 | - | 0 |"
        )
        for key in totals:
            totals[key] += row[key]
    live = totals["mutants"] - totals["equivalent"]
    missed = [f"- {row['lab']}/{row['piece']}: {m}" for row in rows for m in row["missed"]]
    body = (
        f"{'Quick: Lab 1, ' if args.quick else ''}at most {limit} mutants per piece, spread over the "
        f"student's part of the solution's graded cell (fast mode data).\n\n"
        + "\n".join(table)
        + "\n\n"
        f"All pieces: {live} non-equivalent mutants, {totals['caught']} caught "
        f"({totals['caught'] / max(live, 1):.0%}), {totals['named']} named in the first failing test "
        f"({totals['named'] / max(totals['caught'], 1):.0%} of the caught), {totals['hint']} printed a fixed hint.\n\n"
        "Not caught by the public checks:\n\n" + ("\n".join(missed) or "- none") + "\n"
    )
    from _report import write_report

    write_report(
        args.output, "The public checks under mutation" + (" (--quick)" if args.quick else ""), body
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
