"""Where Lab 2's training step spends its time, kernel by kernel: TensorFlow's profiler.

``lab2_step.py`` times whole steps. This script opens one: for the model of negligible
width (d = 8, 1 head, 16 tokens, 100 words: its step is almost all fixed cost) and for the
lab's own model (the lab now: its wires in buckets, topic weights, the schedule), both at
the lab's ``steps_per_execution=32``, it trains one epoch (compiling), then records a
second with ``tf.profiler.experimental`` and sums the trace's events on TensorFlow's
compute threads:

* each kernel type TensorFlow ran (the name after the node's, as the trace gives it:
  ``_MklEinsum`` is oneDNN's einsum, ``Einsum`` Eigen's), its calls per step, microseconds
  per call and milliseconds per step, and its share of the traced kernels' time;
* the rest of the executor's time per step (``ExecutorState::Process`` less the kernels
  traced in it): scheduling the graph's nodes, and the small kernels it runs inline
  once it has measured them as cheap (after the first steps TensorFlow traces only the
  others: about 240 kernels a step of the negligible-width model's 1,300 are traced).
  Keras' Python loop, which 32 steps per execution take out of the step, is not in the
  table.

Times are CPU time summed over the compute threads (two kernels running at once on two
cores both count), and the profiler's own cost inflates them a little; the wall time per
step of the profiled epoch and of the one before it (not profiled) are printed beside
them. On a GPU the kernels' rows are the host's side (launching them); the device's
kernels are not summed here. Each Keras mode runs in its own process (section 9's
Keras 3 twin: ``lablib.layers.TransformerEncoderBlock``).

Run::

    .venv/bin/python benchmarks/step_profile.py                      # prints the tables
    .venv/bin/python benchmarks/step_profile.py --output benchmarks/results/lab2_step_profile.md
    .venv/bin/python benchmarks/step_profile.py --quick               # tiny data, CI
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("LABLIB_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MODELS = ("tiny", "lab")
TOP = 12  # kernel types listed per table; the rest are summed in one row


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="400 wires of 64 tokens")
    parser.add_argument("--output", help="also write the tables to this markdown file")
    parser.add_argument(
        "--modes",
        default="legacy,keras3",
        help="which Keras, comma-separated: legacy (tf_keras + tfm), keras3",
    )
    parser.add_argument(
        "--models", default="tiny,lab", help="comma-separated: tiny (negligible width), lab"
    )
    parser.add_argument(
        "--onednn",
        choices=["on", "off", "both"],
        default="on",
        help="oneDNN's kernels on (TensorFlow's default on x86 Linux), off "
        "(TF_ENABLE_ONEDNN_OPTS=0: Eigen's), or both, one process each",
    )
    parser.add_argument("--child", choices=["legacy", "keras3"], help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# --------------------------------------------------------------------------- child process


def kernel_times(logdir: str) -> dict:
    """Sums the trace in ``logdir`` (one ``.xplane.pb``): kernel type -> [calls,
    picoseconds] over the compute threads' events named ``node:type``, and the
    executor's envelope (``ExecutorState::Process``) in picoseconds."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    if len(files) != 1:
        raise SystemExit(f"the profiler wrote {len(files)} traces in {logdir}; expected one")
    space = xplane_pb2.XSpace()
    with open(files[0], "rb") as handle:
        space.ParseFromString(handle.read())
    kernels: dict = collections.defaultdict(lambda: [0, 0])
    executor = 0
    for plane in space.planes:
        names = plane.event_metadata
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = names[event.metadata_id].name
                if name == "ExecutorState::Process":
                    executor += event.duration_ps
                elif ":" in name:
                    kind = name.rsplit(":", 1)[1]
                    kernels[kind][0] += 1
                    kernels[kind][1] += event.duration_ps
    return {"kernels": dict(kernels), "executor_ps": executor}


def profile_one(keras, tf, build, data, steps, class_weight=None, schedule=False):
    """Trains ``build``'s model one epoch, then profiles a second; returns the trace's sums
    and both epochs' wall milliseconds per step."""
    from lab2_step import EpochClock
    from lablib.training import no_xla_update, warmup_cosine

    keras.utils.set_random_seed(0)
    rate = warmup_cosine(1e-3, steps_per_epoch=steps, epochs=10) if schedule else 1e-3
    model = build(rate, 0.1)
    model.compile(
        optimizer=no_xla_update(keras.optimizers.Adam(rate)),
        metrics=["accuracy"],
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=32,
    )
    clock = EpochClock(keras)
    fit = dict(verbose=0, class_weight=class_weight, callbacks=[clock.callback])
    model.fit(data, epochs=2, **fit)  # the first compiles; the second is the plain one
    with tempfile.TemporaryDirectory(prefix="step-profile-") as logdir:
        tf.profiler.experimental.start(
            logdir, options=tf.profiler.experimental.ProfilerOptions(host_tracer_level=3)
        )
        try:
            model.fit(data, epochs=1, **fit)
        finally:
            tf.profiler.experimental.stop()
        sums = kernel_times(logdir)
    sums["plain_ms"] = 1000 * clock.wall[1] / steps
    sums["profiled_ms"] = 1000 * clock.wall[2] / steps
    sums["steps"] = steps
    return sums


def run_child(args) -> dict:
    import lablib

    (lablib.use_legacy_keras if args.child == "legacy" else lablib.use_keras3)()
    import tensorflow as tf

    from lab2_step import NUM_CLASSES, lab_data, lab_model, sizes, synthetic
    from lablib.backend import get_keras
    from lablib.training import topic_weights

    keras = get_keras()
    size = sizes(argparse.Namespace(quick=args.quick, epochs=2))
    data = lab_data(size)
    steps = len(data["train"])
    results = {}
    if "tiny" in args.models.split(","):
        tiny = lab_model(keras, tf, args.child, 100, 16, width=8, heads=1, inner=8)
        results["tiny"] = profile_one(keras, tf, tiny, synthetic(tf, 100, 16, steps, 1), steps)
    if "lab" in args.models.split(","):
        build = lab_model(keras, tf, args.child, size["num_words"], size["max_length"])
        weights = topic_weights(data["y_train"], NUM_CLASSES, power=0.5)
        results["lab"] = profile_one(
            keras, tf, build, data["train"], steps, class_weight=weights, schedule=True
        )
    return {
        "mode": "tf_keras + tfm"
        if args.child == "legacy"
        else f"Keras {keras.__version__} + lablib",
        "tensorflow": tf.__version__,
        "onednn": "off" if os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0" else "on",
        "gpu": bool(tf.config.list_logical_devices("GPU")),
        "results": results,
    }


# --------------------------------------------------------------------------- parent


def child_results(args, mode: str, onednn: str) -> dict:
    from lab2_step import child_env

    env = child_env(mode, onednn_off=onednn == "off")
    command = [sys.executable, os.path.abspath(__file__), "--child", mode, "--models", args.models]
    done = subprocess.run(
        command + (["--quick"] if args.quick else []),
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"the {mode} child process failed (exit code {done.returncode})")
    return json.loads(lines[-1][len("RESULT ") :])


def table(sums: dict) -> str:
    """One model's kernels, most time first: calls, us per call, ms per step, share."""
    steps = sums["steps"]
    kernels = sorted(sums["kernels"].items(), key=lambda item: -item[1][1])
    total = sum(ps for _calls, ps in sums["kernels"].values())
    executor = max(sums["executor_ps"] - total, 0)
    lines = [
        "| kernel | calls per step | us per call | ms per step | share of traced kernels |",
        "|---|---:|---:|---:|---:|",
    ]

    def row(name, calls, ps):
        per_call = ps / 1e6 / calls if calls else 0.0
        lines.append(
            f"| {name} | {calls / steps:.1f} | {per_call:.1f} | {ps / 1e9 / steps:.3f} | "
            f"{100 * ps / total:.1f}% |"
        )

    for name, (calls, ps) in kernels[:TOP]:
        row(f"`{name}`", calls, ps)
    rest = kernels[TOP:]
    if rest:
        row(
            f"{len(rest)} other kernel types",
            sum(c for _n, (c, _p) in rest),
            sum(p for _n, (_c, p) in rest),
        )
    lines.append(
        f"| all traced kernels | {sum(c for c, _p in sums['kernels'].values()) / steps:.1f} | | "
        f"{total / 1e9 / steps:.3f} | 100% |"
    )
    lines.append(
        f"| the executor's other work (scheduling, cheap kernels run inline) | | | {executor / 1e9 / steps:.3f} | |"
    )
    return "\n".join(lines)


def shares(sums: dict) -> tuple[float, float]:
    """The share of the traced kernels' time spent in matrix products (einsum, batched and
    plain matrix products, oneDNN's or Eigen's), and in oneDNN's kernels (``_Mkl...``)."""
    total = sum(ps for _calls, ps in sums["kernels"].values()) or 1
    kernels = {name: ps for name, (_calls, ps) in sums["kernels"].items()}
    products = sum(ps for n, ps in kernels.items() if "Einsum" in n or "MatMul" in n)
    onednn = sum(ps for n, ps in kernels.items() if n.startswith("_Mkl"))
    return products / total, onednn / total


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(run_child(args)))
        return 0
    modes = [m for m in args.modes.split(",") if m]
    models = [m for m in args.models.split(",") if m]
    if not modes or set(modes) - {"legacy", "keras3"}:
        raise SystemExit(f"--modes is {args.modes!r}; expected legacy, keras3 or legacy,keras3")
    if not models or set(models) - set(MODELS):
        raise SystemExit(f"--models is {args.models!r}; expected tiny, lab or tiny,lab")
    words = {
        "tiny": "the negligible-width model (d = 8, 1 head, 16 tokens, 100 words)",
        "lab": "the lab's model, the lab now (its wires in buckets, topic weights, the schedule)",
    }
    sections, summary = [], []
    runs = [
        (mode, o)
        for mode in modes
        for o in (("on", "off") if args.onednn == "both" else (args.onednn,))
    ]
    for mode, onednn in runs:
        part = child_results(args, mode, onednn)
        for model in models:
            sums = part["results"][model]
            sections.append(
                f"### {part['mode']}, oneDNN {part['onednn']}: {words[model]}\n\n"
                f"{sums['steps']} steps of 32 at steps_per_execution=32; wall {sums['plain_ms']:.1f} "
                f"ms/step (the epoch before, not profiled), {sums['profiled_ms']:.1f} ms/step "
                f"profiled. Kernel and executor times are CPU time over TensorFlow's compute "
                f"threads, per step.\n\n{table(sums)}\n"
            )
            products, onednn = shares(sums)
            summary.append(
                f"{part['mode']}, oneDNN {part['onednn']}, {model}: matrix products "
                f"{100 * products:.0f}% of the traced kernels' time"
                + (f" (oneDNN's kernels, all: {100 * onednn:.0f}%)" if onednn else "")
            )
    body = (
        f"TensorFlow {part['tensorflow']}, {'GPU (host side)' if part['gpu'] else 'CPU only'}; "
        f"{'quick: 400 wires of at most 64 tokens' if args.quick else 'the lab full: up to 256 tokens'}."
        f"\n\n" + "\n".join(sections) + "\n" + "; ".join(summary) + ".\n"
    )
    from _report import write_report

    title = "Lab 2's training step, kernel by kernel" + (" (--quick)" if args.quick else "")
    write_report(args.output, title, body)
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"# {time.perf_counter() - started:.0f} s", file=sys.stderr)
    raise SystemExit(code)
