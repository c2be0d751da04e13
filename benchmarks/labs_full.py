"""Run lab notebooks top to bottom (full mode by default) and record what they print.

Each solution notebook runs in a fresh Jupyter kernel (nbclient) in an empty working
folder, with ``LABLIB_FAST`` unset (full mode: all the data, all the epochs) or set to 1
with ``--fast``. The report gives, per lab, the minutes it took and every code cell's
printed output (stdout and the plain-text form of displayed values, e.g. tables), with
the cell's section and seconds, so that a notebook's text can be checked against its own
run. The executed notebooks are kept with ``--keep DIR`` (written after every cell).
``--budget MIN`` stops a lab after MIN minutes of its cells and keeps what it printed,
for a machine lent for a fixed time (a GPU): its row says "stopped at the time limit".

The report has one row per lab (mode, minutes, date, commit, machine, command) and one
section per lab. Running some labs updates their rows and sections in an existing report
and keeps the others' as they were (a lab takes from minutes to most of an hour, so labs
are often re-run one at a time); a paragraph of notes written by hand between the table
and the first section is kept too. ``--replace`` starts the file afresh. A file that is
not such a report is never overwritten without ``--replace``.

Run::

    .venv/bin/python benchmarks/labs_full.py                        # all labs, writes results/labs_full.md
    .venv/bin/python benchmarks/labs_full.py --labs lab2_transformer_reuters   # updates Lab 2's row and section
    .venv/bin/python benchmarks/labs_full.py --labs lab3_gcn_molecules,lab4_gat --output results/labs_full_graph.md
    .venv/bin/python benchmarks/labs_full.py --fast --labs lab1_attention   # a quick check, no file
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("LABLIB_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))

from _report import run_description  # noqa: E402  (benchmarks/ is sys.path[0])

from lablib.labs import lab_names  # noqa: E402

LABS = tuple(lab_names())  # the lab registry's, in course order
MAX_LINES = 40  # per cell in the report; longer outputs keep their first and last lines
TITLE = "# Labs run top to bottom"
INTRO = (
    "Solution notebooks run top to bottom by `benchmarks/labs_full.py`, each in a fresh kernel; "
    "no GPU unless the machine column names one (nvidia-smi's list). One row per lab, from the run that wrote its "
    "section (a run of some labs keeps the other labs' rows and sections). Per code cell: what "
    "it printed (stdout and the plain-text form of displayed values; figures as [figure])."
)
TABLE_HEADER = "| lab | mode | minutes | date | commit | machine | command |"
SECTION = re.compile(r"^## (" + "|".join(LABS) + r"): ", re.MULTILINE)


class ReportFormatError(ValueError):
    """An existing output file is not a report this script can update."""


def commit() -> str:
    """The checkout's commit (with "+ changes" when the tree differs from it), or the one
    LABLIB_COMMIT names: a GPU machine gets a copy of the tree whose .git may be older."""
    named = os.environ.get("LABLIB_COMMIT", "").strip()
    if named:
        return f"{named} (named by LABLIB_COMMIT)"
    try:
        head = subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        return head + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout; LABLIB_COMMIT can name it)"


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
        lines = (
            lines[:half] + [f"... ({len(lines) - MAX_LINES} lines left out) ..."] + lines[-half:]
        )
    return "\n".join(lines)


def seconds(cell) -> float | None:
    timing = cell.get("metadata", {}).get("execution", {})
    try:
        start = datetime.datetime.fromisoformat(
            timing["iopub.execute_input"].replace("Z", "+00:00")
        )
        end = datetime.datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None
    return (end - start).total_seconds()


def run_lab(name: str, fast: bool, keep: str | None, timeout: int, budget: float | None = None):
    """Run one solution notebook; return (notebook, minutes, why it stopped early or None).

    Cells run one at a time so that ``budget`` (minutes for the whole lab) is enforced:
    the cell running when it is spent is interrupted and the lab stops there, with every
    output printed so far kept (the budget counts from the started kernel). With ``keep``, the notebook is written after each cell,
    so a run killed from outside still leaves what it had done.
    """
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
    kept = None
    if keep:
        os.makedirs(keep, exist_ok=True)
        kept = os.path.join(keep, f"{name}.ipynb")
    error = None
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix=f"{name}-") as workdir:
            client = nbclient.NotebookClient(
                nb,
                timeout=timeout,
                kernel_name="python3",
                resources={"metadata": {"path": workdir}},
            )
            client.reset_execution_trackers()
            with client.setup_kernel():
                # The budget counts from a started kernel: the lab's cells, not the start-up.
                deadline = None if budget is None else time.perf_counter() + budget * 60
                for index, cell in enumerate(nb.cells):
                    if cell.cell_type != "code":
                        continue
                    if deadline is not None:
                        left = deadline - time.perf_counter()
                        if left <= 0:
                            error = f"time limit of {budget:g} min reached before cell {index}"
                            break
                        client.timeout = max(1, int(min(timeout, left)))
                    try:
                        client.execute_cell(
                            cell, index, execution_count=client.code_cells_executed + 1
                        )
                    except nbclient.exceptions.CellTimeoutError:
                        error = (
                            f"time limit of {budget:g} min reached in cell {index}"
                            if deadline is not None and client.timeout < timeout
                            else f"cell {index} ran past --timeout {timeout} s"
                        )
                        break
                    except nbclient.exceptions.CellExecutionError as failure:
                        error = str(failure).splitlines()[-1] if str(failure) else repr(failure)
                        break
                    finally:
                        if kept:
                            nbformat.write(nb, kept)
    finally:
        minutes = (time.perf_counter() - start) / 60
        os.environ.clear()
        os.environ.update(saved)
    if kept:
        nbformat.write(nb, kept)
    return nb, minutes, error


def render(name, nb, minutes, error, fast) -> str:
    lines = [
        f"## {name}: {minutes:.1f} min, {'fast' if fast else 'full'} mode"
        + (
            (
                f", STOPPED: {error}"
                if error.startswith("time limit")
                else f", STOPPED at an error: {error}"
            )
            if error
            else ""
        ),
        "",
    ]
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
        lines.append(
            f"**cell {index}** ({section}; {took:.1f} s)"
            if took is not None
            else f"**cell {index}** ({section})"
        )
        lines += ["", "```text", text, "```", ""]
    return "\n".join(lines)


def parse_report(text: str):
    """``(rows, notes, sections)`` of a report: rows and sections keyed by lab name."""
    if TABLE_HEADER not in text:
        raise ReportFormatError(
            f"it has no table starting {TABLE_HEADER!r} (an older or a hand-made layout)"
        )
    _, _, rest = text.partition(TABLE_HEADER)
    starts = list(SECTION.finditer(rest))
    table_and_notes = rest[: starts[0].start()] if starts else rest
    rows, notes = {}, []
    lines = table_and_notes.splitlines()[2:]  # the header's remainder and the |---| line
    for index, line in enumerate(lines):
        if not line.startswith("|"):
            notes = lines[index:]
            break
        name = line.strip("|").split("|")[0].strip()
        if name not in LABS:
            raise ReportFormatError(
                f"its table has a row for {name!r}, not one of {', '.join(LABS)}"
            )
        rows[name] = line
    sections = {}
    for match, following in zip(starts, starts[1:] + [None]):
        end = following.start() if following else len(rest)
        sections[match.group(1)] = rest[match.start() : end].strip("\n")
    return rows, "\n".join(notes).strip("\n"), sections


def merge_report(existing: str | None, runs: dict) -> str:
    """The report with ``runs`` (lab -> (row, section)) in place of those labs' rows and sections.

    ``existing`` is the current file's text, or None to start afresh. Labs appear in the
    course's order; hand-written notes between the table and the first section are kept.
    """
    rows, notes, sections = parse_report(existing) if existing is not None else ({}, "", {})
    for name, (row, section) in runs.items():
        rows[name], sections[name] = row, section
    order = [name for name in LABS if name in rows or name in sections]
    parts = [TITLE, "", INTRO, "", TABLE_HEADER, "|---|---|---|---|---|---|---|"]
    parts += [rows[name] for name in order if name in rows]
    if notes:
        parts += ["", notes]
    for name in order:
        if name in sections:
            parts += ["", sections[name]]
    return "\n".join(parts).rstrip() + "\n"


def visible_gpus() -> str:
    """The GPUs nvidia-smi lists ("" when there is none or no nvidia-smi)."""
    if not shutil.which("nvidia-smi"):
        return ""
    try:
        listed = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return ", ".join(line.strip() for line in listed.splitlines() if line.strip())


def existing_report(path: str | None, replace: bool) -> str | None:
    """The text of the report to update (None: start afresh); ReportFormatError if it is not one."""
    if not path or replace or not os.path.exists(path):
        return None
    with open(path) as handle:
        text = handle.read()
    parse_report(text)
    return text


def table_row(
    name: str,
    fast: bool,
    minutes: float,
    error: str | None,
    started_at: str,
    arguments: list | None,
) -> str:
    """One row of the report's table: what ran, where, when and with which command."""
    run = run_description(arguments)
    cells = [
        name,
        "fast" if fast else "full",
        f"{minutes:.1f}"
        + (
            (
                " (stopped at the time limit)"
                if error.startswith("time limit")
                else " (stopped at an error)"
            )
            if error
            else ""
        ),
        run["date"],
        started_at,
        run["machine"] + (f"; GPU: {gpus}" if (gpus := visible_gpus()) else ""),
        f"`{run['command']}`",
    ]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--labs", default=",".join(LABS), help=f"comma-separated subset of {', '.join(LABS)}"
    )
    parser.add_argument(
        "--fast", action="store_true", help="LABLIB_FAST=1 (a check; no file unless --output)"
    )
    parser.add_argument(
        "--output", default=None, help="report file (default results/labs_full.md in full mode)"
    )
    parser.add_argument("--keep", default=None, help="folder to keep the executed notebooks in")
    parser.add_argument("--timeout", type=int, default=4 * 3600, help="seconds per cell")
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="minutes per lab: stop a lab when they are spent, keeping what it printed",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="write the report afresh instead of updating the labs run in an existing one",
    )
    args = parser.parse_args(argv)
    labs = [lab.strip() for lab in args.labs.split(",") if lab.strip()]
    unknown = sorted(set(labs) - set(LABS))
    if unknown:
        parser.error(f"--labs: unknown {unknown}; choose from {', '.join(LABS)}")
    output = args.output or (
        None if args.fast else os.path.join(ROOT, "benchmarks", "results", "labs_full.md")
    )
    try:
        existing_report(output, args.replace)  # refused before hours of running, not after
    except ReportFormatError as problem:
        parser.error(
            f"--output {output}: cannot update this file: {problem}. "
            "Pass --replace to overwrite it, or --output to write elsewhere."
        )
    runs, failed, started_at = {}, [], commit()  # the code the notebooks ran
    for name in labs:
        nb, minutes, error = run_lab(name, args.fast, args.keep, args.timeout, args.budget)
        print(
            f"{name}: {minutes:.1f} min" + (f", error: {error}" if error else ""),
            file=sys.stderr,
            flush=True,
        )
        runs[name] = (
            table_row(name, args.fast, minutes, error, started_at, argv),
            render(name, nb, minutes, error, args.fast),
        )
        if error:
            failed.append(name)
    print(merge_report(None, runs))
    if output:
        # Read again: another run may have updated other labs in the meantime.
        try:
            existing = existing_report(output, args.replace)
        except ReportFormatError as problem:
            output, existing = output + ".new", None
            print(
                f"the report changed into another layout while the labs ran ({problem}); "
                f"this run's report goes to {output} instead",
                file=sys.stderr,
            )
            failed.append("report")
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        with open(output, "w") as handle:
            handle.write(merge_report(existing, runs))
        print(f"written: {output}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
