"""Traces and XLA compilations per epoch of the labs' training loops, and what bounds them.

``model.fit`` runs a ``tf.function``; a new input signature can retrace it and, with
XLA (``jit_compile=True``, which Keras 3 switches on by itself on a GPU), every new
input *shape* compiles a new executable (seconds each for a transformer step). A loop
whose batch shapes keep changing pays that during every epoch. This script trains each
row below for a few epochs in its own child process (a fresh XLA cache; with ``--quick``,
which only checks that the script runs, the rows of one Keras mode share one) and counts,
per epoch:

* traces of ``train_step`` and ``test_step`` (Python calls of them: each one is a trace)
  and of the loop functions ``fit`` runs them in (``experimental_get_tracing_count``);
* XLA compilations: the lines ``Compilation of XLA executable`` that TensorFlow logs with
  ``TF_CPP_VMODULE=device_compiler=1``, attributed to the epoch they fall in;
* seconds (epoch 1 includes tracing and compiling).

Rows (all compiled with ``jit_compile=True``, as on a GPU):

* Lab 2, Reuters (the first ``--wires`` training wires, 10% of them for validation,
  truncated to 256 tokens, batch 32), the Lab 2 classifier of ``benchmarks/reuters.py``
  with ``tfm.nlp.layers.TransformerEncoderBlock`` on tf_keras (legacy mode) and with
  ``lablib.layers.TransformerEncoderBlock`` on Keras 3, fed by
  ``reuters_dataset(..., bucket=False)`` (each batch padded to its longest wire) and by
  ``bucket=True`` (batches padded to fixed bucket lengths);
* Lab 3, ESOL molecules, a GCN regressor (3 ``GraphConv`` + sum readout), in the dense
  layout padded to the largest molecule (what Lab 3 and Lab 4 do), in the disjoint layout
  as it comes (every batch its own node and edge count), and in the disjoint layout padded
  to fixed counts (``disjoint_padding`` + ``drop_remainder``);
* Lab 4, Cora, the GAT on the whole graph (one batch of one shape).

Run::

    .venv/bin/python benchmarks/retracing.py            # writes results/retracing.md
    .venv/bin/python benchmarks/retracing.py --quick    # tiny data, 2 epochs, no file
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("LABLIB_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))

from _report import process_groups, write_report  # noqa: E402  (benchmarks/ is sys.path[0])

ROWS = {
    # name: (lab, model, Keras mode, batches)
    "reuters-tfm-batch": (
        "Lab 2",
        "tfm TransformerEncoderBlock",
        "legacy",
        "padded to each batch's longest wire",
    ),
    "reuters-tfm-bucket": (
        "Lab 2",
        "tfm TransformerEncoderBlock",
        "legacy",
        "bucket=True (fixed lengths)",
    ),
    "reuters-lablib-batch": (
        "Lab 2",
        "lablib TransformerEncoderBlock",
        "keras3",
        "padded to each batch's longest wire",
    ),
    "reuters-lablib-bucket": (
        "Lab 2",
        "lablib TransformerEncoderBlock",
        "keras3",
        "bucket=True (fixed lengths)",
    ),
    "esol-dense": (
        "Lab 3/4",
        "GCN, dense layout",
        "keras3",
        "dense, padded to the largest molecule",
    ),
    "esol-disjoint": ("Lab 3/4", "GCN, disjoint layout", "keras3", "disjoint, as they come"),
    "esol-disjoint-fixed": (
        "Lab 3/4",
        "GCN, disjoint layout",
        "keras3",
        "disjoint, fixed node/edge counts",
    ),
    "cora-gat": ("Lab 4", "GAT (8 heads x 8)", "keras3", "the whole graph"),
}
MARK = "@@retracing"
COMPILED = "Compilation of XLA executable"


# --------------------------------------------------------------------------- child


def mark(*fields) -> None:
    print(MARK, *fields, file=sys.stderr, flush=True)


def counting_callback(keras, counts):
    class Count(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()
            self.before = dict(counts)
            mark("begin", epoch + 1)

        def on_epoch_end(self, epoch, logs=None):
            seconds = time.perf_counter() - self.start
            counts["loop"] = outer_traces(self.model)
            traces = {k: counts[k] - self.before.get(k, 0) for k in counts}
            mark("end", epoch + 1, json.dumps({"seconds": seconds, **traces}))

    return Count()


def outer_traces(model) -> int:
    """Traces of the tf.functions ``fit`` loops with (train and test): tf_keras keeps
    them as ``model.train_function``; Keras 3 wraps them in a closure."""
    total = 0
    for name in ("train_function", "test_function"):
        function = getattr(model, name, None)
        candidates = [function] + [
            cell.cell_contents for cell in getattr(function, "__closure__", None) or ()
        ]
        total += sum(
            c.experimental_get_tracing_count()
            for c in candidates
            if hasattr(c, "experimental_get_tracing_count")
        )
    return total


def count_traces(model, counts):
    """Count Python calls of train_step/test_step: under tf.function each one is a trace."""
    for name in ("train_step", "test_step"):
        original = getattr(model, name)

        def step(data, _original=original, _name=name):
            counts[_name] += 1
            return _original(data)

        setattr(model, name, step)


def reuters_data(args, bucket):
    from lablib.data import load_reuters, reuters_dataset

    (x, y), _ = load_reuters(num_words=20000)
    x, y = x[: args.wires], y[: args.wires]
    held = len(y) // 10
    maxlen = 64 if args.quick else 256
    train = reuters_dataset(x[held:], y[held:], batch_size=32, maxlen=maxlen, seed=0, bucket=bucket)
    val = reuters_dataset(
        x[:held], y[:held], batch_size=256, maxlen=maxlen, shuffle=False, bucket=bucket
    )
    return train, val


def child(args) -> None:
    """Train the rows of ``args.child`` (comma-separated, one Keras mode) one after another."""
    import lablib

    rows = args.child.split(",")
    modes = {ROWS[row][2] for row in rows}
    if len(modes) != 1:
        raise SystemExit(f"--child {args.child}: rows of one Keras mode only, got {sorted(modes)}")
    if modes == {"legacy"}:
        lablib.use_legacy_keras()
    else:
        lablib.use_keras3()
    import tensorflow as tf

    from lablib.backend import keras

    tf.config.threading.set_inter_op_parallelism_threads(1)
    for row in rows:
        mark("row", row)
        train_row(row, args, keras, tf)


def train_row(row: str, args, keras, tf) -> None:  # Over 80 lines: one branch per dataset
    keras.utils.set_random_seed(0)
    counts = {"train_step": 0, "test_step": 0}
    if row.startswith("reuters"):
        import reuters  # benchmarks/reuters.py: the Lab 2 classifier

        train, val = reuters_data(args, bucket=row.endswith("bucket"))
        if "tfm" in row:
            from lablib.backend import import_tfm

            block_class = import_tfm().nlp.layers.TransformerEncoderBlock
        else:
            from lablib.layers import TransformerEncoderBlock as block_class
        block = block_class(
            2, inner_dim=128, inner_activation="relu", output_dropout=0.1, attention_dropout=0.1
        )
        model = reuters.build_transformer(keras, tf, block)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        model.compile(keras.optimizers.Adam(1e-3), loss, metrics=["accuracy"], jit_compile=True)
    elif row.startswith("esol"):
        from lablib.data import load_molecules
        from lablib.layers import GraphConv, GraphReadout

        esol = load_molecules("esol")
        if args.quick:
            esol = esol[:160]
        train, valid = esol[: len(esol) * 9 // 10], esol[len(esol) * 9 // 10 :]
        features = esol.x[0].shape[1]
        if row == "esol-dense":
            make = lambda part, shuffle: part.dense_dataset(  # noqa: E731
                32, shuffle=shuffle, seed=0, max_nodes=esol.max_nodes
            )
            x_in = keras.Input((None, features))
            a_in = keras.Input((None, None))
            m_in = keras.Input((None,), dtype="bool")
            h = x_in
            for _ in range(3):
                h = GraphConv(64, activation="relu")(h, adjacency=a_in, mask=m_in)
            g = GraphReadout("sum")(h, mask=m_in)
            model = keras.Model(
                [x_in, a_in, m_in],
                keras.layers.Dense(1)(keras.layers.Dense(64, activation="relu")(g)),
            )
        else:
            fixed = row == "esol-disjoint-fixed"
            if fixed:
                max_nodes, max_edges = esol.disjoint_padding(32)
                make = lambda part, shuffle: part.disjoint_dataset(  # noqa: E731
                    32,
                    shuffle=shuffle,
                    seed=0,
                    drop_remainder=True,
                    max_nodes=max_nodes,
                    max_edges=max_edges,
                )
            else:
                make = lambda part, shuffle: part.disjoint_dataset(32, shuffle=shuffle, seed=0)  # noqa: E731

            class DisjointGCN(keras.Model):
                def __init__(self):
                    super().__init__()
                    self.convs = [GraphConv(64, activation="relu") for _ in range(3)]
                    self.readout = GraphReadout("sum")
                    self.hidden = keras.layers.Dense(64, activation="relu")
                    self.out = keras.layers.Dense(1)

                def call(self, inputs):
                    h, edge_index, graph_ids = inputs
                    for conv in self.convs:
                        h = conv(h, edge_index=edge_index)
                    g = self.readout(h, graph_ids=graph_ids, num_graphs=32 if fixed else None)
                    return self.out(self.hidden(g))

            model = DisjointGCN()
        train, val = make(train, True), make(valid, False)
        model.compile(keras.optimizers.Adam(1e-3), "mse", jit_compile=True)
    elif row == "cora-gat":
        from lablib.data import load_cora
        from lablib.layers import GraphAttention

        cora = load_cora()
        weights = cora.train_mask.astype("float32")
        train = tf.data.Dataset.from_tensors(
            ((cora.x.astype("float32"), cora.edge_index.astype("int32")), cora.y, weights)
        )
        val = tf.data.Dataset.from_tensors(
            (
                (cora.x.astype("float32"), cora.edge_index.astype("int32")),
                cora.y,
                cora.val_mask.astype("float32"),
            )
        )
        x_in = keras.Input((cora.num_features,))
        e_in = keras.Input((None,), dtype="int32")
        h = GraphAttention(8, num_heads=8, activation="elu", attention_dropout=0.6)(
            keras.layers.Dropout(0.6)(x_in), edge_index=e_in
        )
        logits = GraphAttention(cora.num_classes, num_heads=1, attention_dropout=0.6)(
            keras.layers.Dropout(0.6)(h), edge_index=e_in
        )
        model = keras.Model([x_in, e_in], logits)
        model.compile(
            keras.optimizers.Adam(5e-3),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=True,
        )
    else:
        raise SystemExit(f"unknown row {row!r}")
    count_traces(model, counts)
    mark("start")
    model.fit(
        train,
        validation_data=val,
        epochs=args.epochs,
        verbose=0,
        callbacks=[counting_callback(keras, counts)],
    )
    mark(
        "done",
        json.dumps(
            {
                "tensorflow": tf.__version__,
                "keras": f"{keras.__name__} {keras.__version__}",
                "device": tf.config.list_logical_devices()[-1].device_type,
            }
        ),
    )


# --------------------------------------------------------------------------- parent


def parse(stderr: str) -> dict:
    """Per row, per epoch: seconds, traces, XLA compilations and their seconds, from a
    child's stderr (its rows one after another, each begun by a ``row`` mark)."""
    rows, result, compiled, compile_seconds, current = {}, None, 0, 0.0, None
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}
    for line in stderr.splitlines():
        if COMPILED in line:
            compiled += 1
            took = re.search(r"time: ([0-9.]+) (us|ms|s|min) ", line)
            compile_seconds += float(took.group(1)) * units[took.group(2)] if took else 0.0
            continue
        if not line.startswith(MARK):
            continue
        fields = line.split(" ", 3)
        if fields[1] == "row":
            result = rows[fields[2]] = {"row": fields[2], "epochs": []}
        elif fields[1] == "begin":
            compiled, compile_seconds, current = 0, 0.0, int(fields[2])
        elif fields[1] == "end":
            result["epochs"].append(
                {
                    "epoch": current,
                    "xla_compilations": compiled,
                    "xla_seconds": compile_seconds,
                    **json.loads(fields[3]),
                }
            )
            compiled, compile_seconds = 0, 0.0
        elif fields[1] == "done":
            result.update(json.loads(line.split(" ", 2)[2]))
    return rows


def run_rows(rows: list, args) -> list:
    """The rows in one child process (one Keras mode): their results, in order."""
    env = dict(
        os.environ,
        TF_CPP_VMODULE="device_compiler=1",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONPATH=os.pathsep.join(
            filter(None, [ROOT, os.path.join(ROOT, "benchmarks"), os.environ.get("PYTHONPATH")])
        ),
    )
    env.pop("TF_USE_LEGACY_KERAS", None)  # the child chooses its Keras mode
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        ",".join(rows),
        "--epochs",
        str(args.epochs),
        "--wires",
        str(args.wires),
    ] + (["--quick"] if args.quick else [])
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    parsed = parse(done.stderr)
    finished = [r for r in rows if len(parsed.get(r, {}).get("epochs", ())) == args.epochs]
    if done.returncode != 0 or finished != rows:
        raise RuntimeError(
            f"rows {', '.join(rows)} failed (exit code {done.returncode}; finished: "
            f"{', '.join(finished) or 'none'}):\n{done.stderr[-3000:]}"
        )
    for row in rows:
        print(json.dumps(parsed[row]), file=sys.stderr, flush=True)
    return [parsed[row] for row in rows]


def render(results, args) -> str:
    epochs = args.epochs
    head = (
        "| lab | model | Keras | batches | "
        + " | ".join(
            f"epoch {e}: traces / XLA compilations (their s) / s" for e in range(1, epochs + 1)
        )
        + " |"
    )
    lines = [head, "|" + "---|" * (4 + epochs)]
    for result in results:
        lab, model, _, batches = ROWS[result["row"]]
        cells = [
            f"{e['train_step'] + e['test_step'] + e.get('loop', 0)} / {e['xla_compilations']} ({e['xla_seconds']:.1f}) / "
            f"{e['seconds']:.1f}"
            for e in result["epochs"]
        ]
        lines.append(
            f"| {lab} | {model} | {result['keras']} | {batches} | " + " | ".join(cells) + " |"
        )
    versions = sorted(
        {f"TensorFlow {r['tensorflow']}" for r in results} | {r["device"] for r in results}
    )
    where = (
        "(--quick: the rows of each Keras mode in one process)"
        if args.quick
        else "in a fresh process"
    )
    return (
        f"Each row trains {epochs} epochs with `jit_compile=True` {where} "
        f"({', '.join(versions)}). traces: calls of `train_step` + `test_step` (each is a trace) + "
        "traces of the loop functions `fit` runs them in (train and validation); "
        "XLA compilations: TensorFlow's `Compilation of XLA executable` log lines "
        "(`TF_CPP_VMODULE=device_compiler=1`) during that epoch, training and validation, with "
        "the seconds they took; "
        "s: the epoch's seconds, validation included. Reuters: the first "
        f"{args.wires} training wires (10% of them for validation), "
        f"{'64' if args.quick else '256'} tokens at most, batch 32 (validation 256).\n\n"
        + "\n".join(lines)
        + "\n"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny data, 2 epochs: checks the script runs"
    )
    parser.add_argument(
        "--epochs", type=int, default=None, help="epochs per row (default 3; 2 with --quick)"
    )
    parser.add_argument(
        "--wires",
        type=int,
        default=None,
        help="Reuters training wires (default 3000; 300 with --quick)",
    )
    parser.add_argument(
        "--rows", default=",".join(ROWS), help=f"comma-separated subset of {', '.join(ROWS)}"
    )
    parser.add_argument(
        "--output",
        default=None,
        help="the table's file (default results/retracing.md; none with --quick)",
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.epochs = args.epochs or (2 if args.quick else 3)
    args.wires = args.wires or (300 if args.quick else 3000)
    if args.child:
        child(args)
        return 0
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = sorted(set(rows) - set(ROWS))
    if unknown:
        parser.error(f"--rows: unknown {unknown}; choose from {', '.join(ROWS)}")
    # with --quick, the rows of a Keras mode in one child (the measurement: a fresh process,
    # a fresh XLA cache, per row)
    groups = process_groups(rows, lambda row: ROWS[row][2], args.quick)
    results = [result for group in groups for result in run_rows(group, args)]
    output = (
        None
        if args.quick
        else (args.output or os.path.join(ROOT, "benchmarks", "results", "retracing.md"))
    )
    title = "Traces and XLA compilations per epoch" + (" (--quick)" if args.quick else "")
    write_report(output, title, render(results, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
