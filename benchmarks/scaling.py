"""Training throughput with 1 and 2 replicas of ``tf.distribute.MirroredStrategy``.

Training examples per second of ``model.fit`` for

* Lab 2's Keras 3 model: ``TokenAndPositionEmbedding`` + lablib's
  ``TransformerEncoderBlock`` classifier at Lab 2's sizes (20,000 words, 256 tokens,
  width 64, 2 heads, inner 128, 46 topics), on random token ids (the speed does not
  depend on the words);
* a molecule GNN (Lab 4's regressor: 3 x ``GraphAttention(16, 4 heads)``, sum readout,
  dense head) on ESOL, in the disjoint layout (``disjoint_dataset(..., strategy=)``, each
  replica gluing its own graphs) and in the padded dense layout (``dense_dataset(...,
  strategy=, max_nodes=)``, the bool mask as it comes).

The global batch is the same for 1 and 2 replicas (each replica gets half). Every
configuration runs in its own process (TensorFlow takes its logical devices at start);
configurations are interleaved over ``--rounds`` and the table reports medians. ``--quick``
(a check that the script runs) runs each once, a model's replica counts in one process.

On a CPU the replicas are *logical* devices that share the same cores: this shows that
the multi-replica path runs (and what it costs), not a speed-up; on several GPUs the
same command measures real scaling (``--devices gpu``).

Run::

    .venv/bin/python benchmarks/scaling.py              # writes results/scaling.md
    .venv/bin/python benchmarks/scaling.py --quick      # seconds, no file
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("LABLIB_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))

import numpy as np  # noqa: E402
from _report import process_groups, write_report  # noqa: E402  (benchmarks/ is sys.path[0])

MODELS = ("transformer", "gnn-disjoint", "gnn-dense")


# --------------------------------------------------------------------------- child


def child(
    model_name: str, replicas: int, devices: str, batch_size: int, epochs: int, quick: bool
) -> dict:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    if devices == "cpu" and tf.config.get_logical_device_configuration(cpu) is None:
        # Two logical CPU devices in every run, so 1 and 2 replicas see the same set-up
        # (set once per process: a later run of --quick's one process finds them).
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
    names = [d.name for d in tf.config.list_logical_devices(devices.upper())][:replicas]
    if len(names) < replicas:
        raise SystemExit(f"{replicas} replicas asked, but only {len(names)} {devices} devices")
    strategy = tf.distribute.MirroredStrategy(names)

    from lablib.backend import keras
    from lablib.layers import (
        GraphAttention,
        GraphReadout,
        TokenAndPositionEmbedding,
        TransformerEncoderBlock,
    )

    keras.utils.set_random_seed(0)
    if model_name == "transformer":
        num_examples, length = (128, 64) if quick else (256, 256)
        rng = np.random.default_rng(0)
        ids = rng.integers(1, 20000, size=(num_examples, length)).astype(np.int32)
        labels = rng.integers(0, 46, size=num_examples).astype(np.int32)
        with strategy.scope():
            inputs = keras.Input(shape=(length,), dtype="int32")
            h = TokenAndPositionEmbedding(20000, 256, 64)(inputs)
            h = TransformerEncoderBlock(2, 128, "relu", output_dropout=0.1, attention_dropout=0.1)(
                h
            )
            h = keras.layers.GlobalAveragePooling1D()(h)
            model = keras.Model(inputs, keras.layers.Dense(46)(h))
            model.compile(
                keras.optimizers.Adam(1e-3),
                keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            )
        data = tf.data.Dataset.from_tensor_slices((ids, labels)).batch(batch_size).prefetch(2)
        make_data = lambda: data  # noqa: E731
    else:
        from lablib.data import load_molecules

        esol = load_molecules("esol")
        if quick:
            esol = esol[:128]
        num_examples = len(esol)
        layout = model_name.split("-")[1]
        with strategy.scope():
            if layout == "disjoint":
                x_in = keras.Input(shape=(esol.num_node_features,), name="x")
                e_in = keras.Input(shape=(None,), batch_size=2, dtype="int32", name="edge_index")
                ids_in = keras.Input(shape=(), dtype="int32", name="graph_ids")
                inputs, graph, readout = (
                    [x_in, e_in, ids_in],
                    {"edge_index": e_in},
                    {"graph_ids": ids_in},
                )
            else:
                x_in = keras.Input(shape=(None, esol.num_node_features), name="x")
                a_in = keras.Input(shape=(None, None), name="adjacency")
                m_in = keras.Input(shape=(None,), dtype="bool", name="mask")
                inputs, graph, readout = (
                    [x_in, a_in, m_in],
                    {"adjacency": a_in, "mask": m_in},
                    {"mask": m_in},
                )
            h = x_in
            for _ in range(3):
                h = GraphAttention(16, num_heads=4, activation="elu")(h, **graph)
            g = GraphReadout("sum")(h, **readout)
            g = keras.layers.Dense(64, activation="relu")(g)
            model = keras.Model(inputs, keras.layers.Dense(1)(g))
            model.compile(keras.optimizers.Adam(1e-3), "mse")
        if layout == "disjoint":
            make_data = lambda: esol.disjoint_dataset(
                batch_size, shuffle=True, seed=0, strategy=strategy
            )  # noqa: E731
        else:
            make_data = lambda: esol.dense_dataset(  # noqa: E731
                batch_size, shuffle=True, seed=0, max_nodes=esol.max_nodes, strategy=strategy
            )
    dataset = make_data()
    model.fit(dataset, epochs=1, verbose=0)  # traces the step
    started = time.perf_counter()
    history = model.fit(dataset, epochs=epochs, verbose=0)
    seconds = time.perf_counter() - started
    return {
        "model": model_name,
        "replicas": replicas,
        "examples": num_examples,
        "epochs": epochs,
        "seconds": seconds,
        "examples_per_second": num_examples * epochs / seconds,
        "final_loss": float(history.history["loss"][-1]),
    }


# --------------------------------------------------------------------------- parent


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="small data, 1 round: checks the script runs"
    )
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--replicas", default="1,2")
    parser.add_argument("--devices", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument(
        "--batch-size", type=int, default=32, help="global batch (split over the replicas)"
    )
    parser.add_argument(
        "--epochs", type=int, default=2, help="timed epochs per run (after one warm-up epoch)"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--output", default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:  # one run per model:replicas, one after another
        for spec in args.child.split(","):
            model_name, replicas = spec.split(":")
            result = child(
                model_name, int(replicas), args.devices, args.batch_size, args.epochs, args.quick
            )
            print("RESULT " + json.dumps(result), flush=True)
        return

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not models or set(models) - set(MODELS):
        parser.error(f"--models must name some of {', '.join(MODELS)}, got {args.models!r}")
    replica_counts = [int(r) for r in args.replicas.split(",")]
    rounds = 1 if args.quick else args.rounds
    epochs = 1 if args.quick else args.epochs
    # Each run in a process of its own. --quick (a check that the script runs) runs each
    # model's replica counts in one process, without a TensorFlow start-up per run; not every
    # model in one: a second MirroredStrategy over two devices in a process fails in its
    # collectives ("Shape mismatch in the collective instance"; TensorFlow 2.20).
    specs = [f"{m}:{r}" for m in models for r in replica_counts]
    groups = process_groups(specs, lambda spec: spec.split(":")[0], args.quick)
    runs = {}
    for round_ in range(rounds):
        for group in groups:
            command = [
                sys.executable,
                os.path.abspath(__file__),
                "--child",
                ",".join(group),
                "--devices",
                args.devices,
                "--batch-size",
                str(args.batch_size),
                "--epochs",
                str(epochs),
            ] + (["--quick"] if args.quick else [])
            done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if done.returncode != 0 or len(lines) != len(group):
                raise SystemExit(
                    f"{', '.join(group)} (model:replicas) failed after {len(lines)} of "
                    f"{len(group)} runs:\n{done.stderr[-4000:]}"
                )
            for line in lines:
                result = json.loads(line[len("RESULT ") :])
                runs.setdefault((result["model"], result["replicas"]), []).append(result)
                print(f"round {round_}: {result}", file=sys.stderr, flush=True)

    labels = {
        "transformer": "Lab 2 Keras 3 transformer (TokenAndPositionEmbedding + TransformerEncoderBlock), Lab 2 sizes",
        "gnn-disjoint": "molecule GAT (3 x GraphAttention 16x4), ESOL, disjoint batches",
        "gnn-dense": "molecule GAT (3 x GraphAttention 16x4), ESOL, padded dense batches + bool mask",
    }
    where = (
        "logical CPU devices sharing the same cores (this shows that the path runs, not a speed-up)"
        if args.devices == "cpu"
        else "GPUs"
    )
    lines = [
        f"`tf.distribute.MirroredStrategy` over {where}. Global batch {args.batch_size} (split over the "
        f"replicas); training examples per second of `model.fit`, median of {rounds} interleaved runs of "
        f"{epochs} epochs after one warm-up epoch, "
        + (
            "each model's runs in one process (--quick)."
            if args.quick
            else "each run in its own process."
        ),
        "",
        "| model | "
        + " | ".join(f"{r} replica{'s' if r > 1 else ''} (examples/s)" for r in replica_counts)
        + (" | 2 / 1 |" if replica_counts == [1, 2] else " |"),
        "|---|" + "---|" * len(replica_counts) + ("---|" if replica_counts == [1, 2] else ""),
    ]
    for model_name in models:
        medians = [
            statistics.median(r["examples_per_second"] for r in runs[(model_name, k)])
            for k in replica_counts
        ]
        row = f"| {labels[model_name]} | " + " | ".join(f"{m:.0f}" for m in medians)
        if replica_counts == [1, 2]:
            row += f" | {medians[1] / medians[0]:.2f}"
        lines.append(row + " |")
    output = args.output or (
        None if args.quick else os.path.join(ROOT, "benchmarks", "results", "scaling.md")
    )
    write_report(
        output, "Scaling: 1 and 2 replicas" + (" (--quick)" if args.quick else ""), "\n".join(lines)
    )


if __name__ == "__main__":
    main()
