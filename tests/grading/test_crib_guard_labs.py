"""The four labs' solutions keep full marks on every by-hand piece under the crib guard
(issue 29, item 6): each lab's set-up and graded cells run in a process of their own (Lab 2
chooses tf_keras there), and every by-hand test's probe runs as the grader's child runs it,
with and without the guard (``crib_guard_probe_timing.py``), so the guard's cost per probe is
measured on the same run. Probes that need their own helpers (case tables, the functions
handed to the student's code) and Keras layers written by hand must pass."""

import json
import os
import subprocess
import sys

import pytest

from grading_paths import HERE

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # one TensorFlow process per lab


@pytest.mark.parametrize(
    "lab", ["lab1_attention", "lab2_transformer_reuters", "lab3_gcn_molecules", "lab4_gat"]
)
def test_solutions_keep_full_marks_on_by_hand_pieces_under_the_guard(lab):
    env = dict(os.environ, LABLIB_FAST="1", TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_USE_LEGACY_KERAS", None)  # the lab's set-up cell chooses its Keras
    done = subprocess.run(
        [sys.executable, str(HERE / "crib_guard_probe_timing.py"), lab, "--repeat", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["lab"] == lab and report["tests"], report
    failed = [(t["id"], t["message"]) for t in report["tests"] if not t["passed"]]
    assert not failed, failed
    print(
        f"\n{lab}: by-hand probes, ms without / with the guard (first window "
        f"{report['first_window_ms']} ms, builds the catalogue):"
    )
    for t in report["tests"]:
        print(f"  {t['id']:60s} {t['plain_ms']:8.2f} {t['guarded_ms']:8.2f}")
