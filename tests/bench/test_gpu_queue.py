"""The GPU queue (benchmarks/gpu_queue.sh) runs on a CPU and writes its tables.

A GPU machine is lent for minutes, so the queue must work the first time it meets one:
here it runs with ``--quick`` (tiny data) on the CI machine, the labs left out (their
fast-mode runs are tests/labs' job) and so are the Cora timing and the retracing table
(test_benchmarks_quick.py runs those scripts' quick modes), and every other step must
finish and leave its table in the results folder, never in the repository's
benchmarks/results.
"""

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLES = {
    "lab2_step_gpu.md": "| Keras | row | ms/step (wall) | ms/step (CPU) | wall / model alone |",
    "lab2_study_gpu.md": "| variant | full: val accuracy |",
    "transformer_step_gpu.md": "| block | Keras | median step (ms) |",
}


def test_queue_runs_every_benchmark_and_writes_its_tables(shared_data, tmp_path):
    results = tmp_path / "results"
    committed = {
        p.name: p.stat().st_mtime_ns for p in (ROOT / "benchmarks" / "results").glob("*.md")
    }
    env = dict(os.environ, LABLIB_DATA_DIR=str(shared_data), PYTHON=sys.executable)
    env.pop("TF_USE_LEGACY_KERAS", None)
    done = subprocess.run(
        [
            "bash",
            str(ROOT / "benchmarks" / "gpu_queue.sh"),
            "--quick",
            "--minutes",
            "20",
            "--skip",
            "lab2,labs134,cora_timing,retracing",
            "--results",
            str(results),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    log = (results / "queue.log").read_text()
    assert done.returncode == 0, done.stderr[-2000:] + log
    for step in ("lab2_step", "lab2_study", "transformer_step"):
        assert f"{step}: done" in log, log
    for step in ("lab2", "labs134", "cora_timing", "retracing"):
        assert f"{step}: skipped (--skip)" in log, log
    for name, header in TABLES.items():
        text = (results / name).read_text()
        assert header in text, f"{name} lacks its table:\n{text[-1500:]}"
    step = (results / "lab2_step_gpu.md").read_text()
    assert "each batch gathered at once: the lab now" in step and "negligible width" in step
    assert "the lab's loop at negligible width" in step
    assert "Spearman" in (results / "lab2_study_gpu.md").read_text()
    after = {p.name: p.stat().st_mtime_ns for p in (ROOT / "benchmarks" / "results").glob("*.md")}
    assert after == committed  # the committed measurements are untouched
