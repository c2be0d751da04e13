"""Run lab notebooks top to bottom (full mode by default) and record what they print.

Each solution notebook runs in a fresh Jupyter kernel (nbclient) in an empty working
folder, with ``LABLIB_FAST`` unset (full mode: all the data, all the epochs) or set to 1
with ``--fast``. The report gives, per lab, the minutes it took and every code cell's
printed output (stdout and the plain-text form of displayed values, e.g. tables), with
the cell's section and seconds, so that a notebook's text can be checked against its own
run. The executed notebooks are kept with ``--keep DIR``.

Run::

    .venv/bin/python benchmarks/labs_full.py                        # all labs, writes results/labs_full.md
    .venv/bin/python benchmarks/labs_full.py --labs lab3_gcn_molecules,lab4_gat --output results/labs_full_graph.md
    .venv/bin/python benchmarks/labs_full.py --fast --labs lab1_attention   # a quick check, no file
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("LABLIB_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))

from _report import write_report  # noqa: E402  (benchmarks/ is sys.path[0])

LABS = ("lab1_attention", "lab2_transformer_reuters", "lab3_gcn_molecules", "lab4_gat")
MAX_LINES = 40  # per cell in the report; longer outputs keep their first and last lines


def commit() -> str:
    """The checkout's commit (with "+ changes" when the tree differs from it)."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def cell_text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "stream" and output.get("name") == "stdout":
            parts.append(output.get("text", ""))
        elif kind in ("execute_result", "display_data") and "text/plain" in output.get("data", {}):
            if "image/png" in output["data"]:
                parts.append("[figure]\n")
            else:
                parts.append(output["data"]["text/plain"].rstrip("\n") + "\n")
        elif kind == "error":
            parts.append(f"ERROR {output.get('ename')}: {output.get('evalue')}\n")
    lines = "".join(parts).rstrip("\n").splitlines()
    if len(lines) > MAX_LINES:
        half = MAX_LINES // 2
        lines = lines[:half] + [f"... ({len(lines) - MAX_LINES} lines left out) ..."] + lines[-half:]
    return "\n".join(lines)


def seconds(cell) -> float | None:
    timing = cell.get("metadata", {}).get("execution", {})
    try:
        start = datetime.datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
        end = datetime.datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None
    return (end - start).total_seconds()


def run_lab(name: str, fast: bool, keep: str | None, timeout: int):
    import nbclient
    import nbformat

    nb = nbformat.read(os.path.join(ROOT, "solutions", f"{name}.ipynb"), as_version=4)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_USE_LEGACY_KERAS", None)  # the notebook chooses its Keras mode
    env.pop("MPLBACKEND", None)
    if fast:
        env["LABLIB_FAST"] = "1"
    else:
        env.pop("LABLIB_FAST", None)
    # The kernel imports this checkout's lablib, whatever else is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the kernel inherits this process's environment
    error = None
    try:
        with tempfile.TemporaryDirectory(prefix=f"{name}-") as workdir:
            client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                             resources={"metadata": {"path": workdir}})
            start = time.perf_counter()
            try:
                client.execute()
            except nbclient.exceptions.CellExecutionError as failure:
                error = str(failure).splitlines()[-1] if str(failure) else repr(failure)
            minutes = (time.perf_counter() - start) / 60
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if keep:
        os.makedirs(keep, exist_ok=True)
        nbformat.write(nb, os.path.join(keep, f"{name}.ipynb"))
    return nb, minutes, error


def render(name, nb, minutes, error, fast) -> str:
    lines = [f"## {name}: {minutes:.1f} min, {'fast' if fast else 'full'} mode"
             + (f", STOPPED at an error: {error}" if error else ""), ""]
    section = "(before the first section)"
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("## "):
                    section = line[3:].strip()
            continue
        text = cell_text(cell)
        if not text:
            continue
        took = seconds(cell)
        lines.append(f"**cell {index}** ({section}; {took:.1f} s)" if took is not None
                     else f"**cell {index}** ({section})")
        lines += ["", "```text", text, "```", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--labs", default=",".join(LABS), help=f"comma-separated subset of {', '.join(LABS)}")
    parser.add_argument("--fast", action="store_true", help="LABLIB_FAST=1 (a check; no file unless --output)")
    parser.add_argument("--output", default=None, help="report file (default results/labs_full.md in full mode)")
    parser.add_argument("--keep", default=None, help="folder to keep the executed notebooks in")
    parser.add_argument("--timeout", type=int, default=4 * 3600, help="seconds per cell")
    args = parser.parse_args(argv)
    labs = [lab.strip() for lab in args.labs.split(",") if lab.strip()]
    unknown = sorted(set(labs) - set(LABS))
    if unknown:
        parser.error(f"--labs: unknown {unknown}; choose from {', '.join(LABS)}")
    sections, failed, started_at = [], [], commit()  # the code the notebooks ran
    for name in labs:
        nb, minutes, error = run_lab(name, args.fast, args.keep, args.timeout)
        print(f"{name}: {minutes:.1f} min" + (f", error: {error}" if error else ""), file=sys.stderr, flush=True)
        sections.append(render(name, nb, minutes, error, args.fast))
        if error:
            failed.append(name)
    output = args.output or (None if args.fast else os.path.join(ROOT, "benchmarks", "results", "labs_full.md"))
    body = (f"Solution notebooks run top to bottom in {'fast' if args.fast else 'full'} mode, each in a fresh "
            f"kernel, at commit {started_at}; no GPU unless the machine line says so. Per code cell: "
            "what it printed (stdout and the plain-text form of displayed values; figures as [figure]).\n\n"
            + "\n\n".join(sections))
    write_report(output, "Labs run top to bottom" + (" (--fast)" if args.fast else ""), body)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
