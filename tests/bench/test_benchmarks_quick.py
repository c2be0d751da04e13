"""The benchmark scripts still run: each ``benchmarks/<name>.py --quick`` prints its table.

The scripts run in child processes two at a time (on a loaded 2-core machine seven at
once pushed two of them past their time limit), with ``--quick`` (tiny data, a few
epochs) and no results file written; each gets its own time limit. The
full measurements are in ``benchmarks/results/`` (see ``benchmarks/README.md``).
"""

import concurrent.futures
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.integration  # runs the benchmark scripts

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Longest first (seconds each on 2 cores, two at a time, 2026-11-29: retracing 135, scaling
# 64, esol 59, graph_speed 56, positions 48, reuters 51, cora 34, mutation 15, step_profile
# 51), so that two at a time finish close together.
SCRIPTS = (
    "retracing",
    "scaling",
    "esol",
    "graph_speed",
    "positions",
    "reuters",
    "cora",
    "mutation",
    "step_profile",
)
# The header row each script's table must contain.
HEADERS = {
    "cora": "| model | implementation | seeds | test accuracy (%) |",
    "esol": "| model | test RMSE | validation RMSE |",
    "reuters": "| model | seeds | test accuracy | macro-F1 |",
    "positions": "| positions | seeds | test accuracy | macro-F1 |",
    "graph_speed": "| layer | mode | lablib (ms) | PyG (ms) | lablib / PyG |",
    "scaling": "| model | 1 replica (examples/s) | 2 replicas (examples/s) | 2 / 1 |",
    "retracing": "| lab | model | Keras | batches | epoch 1: traces / XLA compilations (their s) / s |",
    "mutation": "| lab | piece | mutants | equivalent | caught |",
    "step_profile": "| kernel | calls per step | us per call | ms per step | share of traced kernels |",
}


RESULTS = ROOT / "benchmarks" / "results"
QUICK_TIMEOUT = 600  # seconds per script


@pytest.fixture(scope="module")
def results_before():
    return {path.name: path.stat().st_mtime_ns for path in RESULTS.glob("*.md")}


#: Scripts running at once: two, one per core of CI's machine (each --quick run takes
#: 40 to 90 s alone there; seven at once pushed two past their time limit).
AT_ONCE = 2


@pytest.fixture(scope="module")
def quick_runs(shared_data, results_before):
    env = dict(os.environ, LABLIB_DATA_DIR=str(shared_data), TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_USE_LEGACY_KERAS", None)  # each script chooses the Keras mode of its children
    results, waiting, running, killed = {}, list(SCRIPTS), {}, set()
    readers = concurrent.futures.ThreadPoolExecutor(max_workers=AT_ONCE)
    while waiting or running:
        while waiting and len(running) < AT_ONCE:
            name = waiting.pop(0)
            process = subprocess.Popen(  # its own session: a kill reaches the script's children
                [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), "--quick"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            # a reader per process, so that neither blocks on a full pipe while we wait
            future = readers.submit(process.communicate)
            running[name] = (process, future, time.perf_counter())
        done = [name for name, (_, future, _) in running.items() if future.done()]
        for name, (process, _future, started) in list(running.items()):
            if name not in done and time.perf_counter() - started > QUICK_TIMEOUT:
                os.killpg(process.pid, signal.SIGKILL)
                killed.add(name)
                done.append(name)
        for name in done:
            process, future, started = running.pop(name)
            stdout, stderr = future.result()
            if name in killed:
                stderr += f"\n[killed after {QUICK_TIMEOUT} s]"
            print(f"benchmarks/{name}.py --quick: {time.perf_counter() - started:.0f} s")
            results[name] = (process.returncode, stdout, stderr)
        time.sleep(0.2)
    readers.shutdown()
    return results


@pytest.mark.slow
@pytest.mark.parametrize("name", SCRIPTS)
def test_quick_run_prints_a_table(quick_runs, name):
    returncode, stdout, stderr = quick_runs[name]
    assert returncode == 0, f"benchmarks/{name}.py --quick failed:\n{stderr[-3000:]}"
    assert HEADERS[name] in stdout, (
        f"no table header in the output of {name}.py --quick:\n{stdout[-2000:]}"
    )
    table = [line for line in stdout.splitlines() if line.startswith("| ")]
    body = [
        line
        for line in table
        if not line.startswith(
            ("| model |", "| layer |", "| edges |", "| lab |", "| positions |", "| kernel |")
        )
    ]
    assert body, f"{name}.py --quick printed a table header but no rows"
    assert "(--quick)" in stdout  # the title says it is not a full measurement
    if name == "graph_speed":
        # every cell of the speed table holds a number: both frameworks ran
        rows = [line for line in body if " vs " in line]
        assert len(rows) == 5  # GCN and GAT sparse and dense, GAT with edge features sparse
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert all(float(c) > 0 for c in cells[2:]), row
    if name == "step_profile":
        # four tables (two Keras modes, two models): kernels' times that add up, and the
        # attention's einsums among the kernels of each (oneDNN's or Eigen's)
        totals = [line for line in body if line.startswith("| all traced kernels |")]
        assert len(totals) == 4, stdout[-3000:]
        for total in totals:
            assert float(total.split("|")[4]) > 0, total
        shares = [float(line.split("|")[5].strip(" %")) for line in body if "%" in line]
        assert abs(sum(shares) - 100 * len(totals) * 2) < 0.5 * len(totals) + 1, shares
        assert stdout.count("Einsum` |") >= 4, stdout[-3000:]


@pytest.mark.slow
def test_fixed_batch_shapes_compile_in_the_first_epoch_only(quick_runs):
    """retracing.py --quick: rows whose batches have a fixed set of shapes trace and
    compile during epoch 1 only; disjoint batches as they come recompile in epoch 2 (the
    counter sees recompilations when there are some)."""
    returncode, stdout, stderr = quick_runs["retracing"]
    assert returncode == 0, stderr[-3000:]
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("| Lab"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            epochs = [tuple(float(v) for v in re.findall(r"[0-9.]+", cell)) for cell in cells[4:]]
            rows[(cells[1], cells[3])] = epochs  # (traces, compilations, their s, s) per epoch
    assert len(rows) == 8, stdout[-3000:]
    for (model, batches), epochs in rows.items():
        assert epochs[0][0] >= 2 and epochs[0][1] >= 1, (model, batches, epochs)  # counted at all
        later = [e[:2] for e in epochs[1:]]
        if batches == "disjoint, as they come":
            assert any(compilations > 0 for _, compilations in later), (model, batches, epochs)
        elif (
            batches != "padded to each batch's longest wire"
        ):  # (--quick wires all reach 64 tokens)
            assert all(e == (0, 0) for e in later), (model, batches, epochs)


@pytest.mark.slow
def test_quick_runs_write_no_results_file(quick_runs, results_before):
    # --quick must not overwrite the committed full measurements
    after = {path.name: path.stat().st_mtime_ns for path in RESULTS.glob("*.md")}
    assert after == results_before


@pytest.mark.slow
def test_committed_esol_table_comes_from_its_committed_log(shared_data, tmp_path):
    """results/esol.md is what --from-log renders from results/esol_seeds.log: the
    reported figures are the logged per-seed ones."""
    env = dict(os.environ, LABLIB_DATA_DIR=str(shared_data), TF_CPP_MIN_LOG_LEVEL="2")
    output = tmp_path / "esol.md"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "esol.py"),
            "--from-log",
            str(RESULTS / "esol_seeds.log"),
            "--output",
            str(output),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    def rows(text):
        return [line for line in text.splitlines() if line.startswith("| ")]

    rendered, committed = rows(output.read_text()), rows((RESULTS / "esol.md").read_text())
    assert len(committed) >= 7 and rendered == committed
