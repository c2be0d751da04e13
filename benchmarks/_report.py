"""Shared by the benchmark scripts: the header of every results table, and how their runs
are split over child processes."""

from __future__ import annotations

import datetime
import itertools
import os
import sys


def machine_description() -> str:
    """``"<cores> cores, <CPU model>"`` from /proc/cpuinfo."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {model}"


def run_description(arguments: list | None = None) -> dict:
    """The ``date``, ``machine`` (with the load now) and ``command`` every results file states.

    ``arguments``: the script's arguments (default ``sys.argv[1:]``).
    """
    arguments = sys.argv[1:] if arguments is None else list(arguments)
    return {
        "date": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
        "machine": f"{machine_description()}; load average {os.getloadavg()[0]:.1f} when written",
        "command": " ".join(
            [".venv/bin/python", "benchmarks/" + os.path.basename(sys.argv[0])] + arguments
        ),
    }


def write_report(path: str | None, title: str, body: str) -> str:
    """Prefix ``body`` with date, machine and command; print it; write it to ``path``."""
    run = run_description()
    header = (
        f"# {title}\n\n"
        f"- date: {run['date']}\n"
        f"- machine: {run['machine']} "
        f"(the machine is shared: absolute times move with the load, side-by-side ratios much less)\n"
        f"- command: `{run['command']}`\n\n"
    )
    text = header + body.rstrip() + "\n"
    print(text)
    if path:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)
    return text


def process_groups(runs: list, key, quick: bool) -> list:
    """The runs each child process makes, in the order given: one each (a fresh process for
    each measurement); with ``--quick``, which only checks that the script runs, the
    consecutive runs with the same ``key(run)`` in one (a TensorFlow start-up per group,
    not per run)."""
    if not quick:
        return [[run] for run in runs]
    return [list(group) for _, group in itertools.groupby(runs, key=key)]
