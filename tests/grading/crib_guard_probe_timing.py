"""Grade one lab solution's by-hand pieces under the crib guard, in this process, as the
grader's child probes them (``run_probe`` with the guard, then the judge), and time each
probe with and without the guard. Run as a script (one lab per process: Lab 2 chooses
tf_keras in its set-up cell):

    LABLIB_FAST=1 python tests/grading/crib_guard_probe_timing.py lab2_transformer_reuters [--repeat 3]

Prints one JSON object: ``{"tests": [{"id", "passed", "score", "max_score", "message",
"plain_ms", "guarded_ms"}], "first_window_ms": ...}`` (times: the fastest of ``--repeat``
runs; the first guarded probe, which builds the guard's catalogue of lablib's code, is
reported apart). Used by ``test_crib_guard_labs.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lab")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with contextlib.redirect_stdout(sys.stderr):  # what the set-up cells print: not the report
        report = _grade(args)
    print(json.dumps(report))
    return 0


def _grade(args) -> dict:
    from notebook_helpers import SOLUTIONS, exec_lab_cells

    ns = exec_lab_cells(SOLUTIONS / f"{args.lab}.ipynb")

    from lablib.grading.judge import judge_test
    from lablib.grading.run.child import run_probe
    from lablib.grading.run.guard import BY_HAND
    from lablib.grading.run.protocol import ProbeRequest
    from lablib.grading.spec import load_lab

    spec = load_lab(args.lab)
    tests = [t for t in spec.tests if spec.pieces[t.piece].by_hand]

    def run(test, guard):
        request = ProbeRequest(
            test.id, test.probe, tuple(spec.pieces[test.piece].objects), test.timeout, guard
        )
        started = time.perf_counter()
        raw = run_probe(request, ns)
        return raw, (time.perf_counter() - started) * 1000

    _, first = run(tests[0], BY_HAND)  # builds the catalogue (once per process)
    rows = []
    for test in tests:
        plain, guarded, result = [], [], None
        for _ in range(max(1, args.repeat)):
            raw, ms = run(test, ())
            plain.append(ms)
            raw, ms = run(test, BY_HAND)
            guarded.append(ms)
            result = judge_test(test, raw)
        rows.append(
            {
                "id": test.id,
                "passed": result.passed,
                "score": result.score,
                "max_score": result.max_score,
                "message": result.message,
                "plain_ms": round(min(plain), 2),
                "guarded_ms": round(min(guarded), 2),
            }
        )
    return {"lab": args.lab, "tests": rows, "first_window_ms": round(first, 1)}


if __name__ == "__main__":
    sys.exit(main())
