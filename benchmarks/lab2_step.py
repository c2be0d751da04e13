"""Where Lab 2's training step goes: the lab's recipe against the same-shaped model alone.

Lab 2 trains one ``tfm.nlp.layers.TransformerEncoderBlock`` classifier (20,000 words,
d = 64, 2 heads, inner 128, batch 32, wires of up to 256 tokens in length buckets).
This script times one epoch of training per row, adding one part of the lab's recipe
at a time to the model alone, so that the table accounts for the lab's step:

* ``model alone``: the lab's model on synthetic ids of one fixed shape ``[32, L]``
  (``L``: the average padded length of the lab's buckets), constant learning rate, no
  callback, no validation;
* then the lab's real wires in length buckets read through the input pipeline the lab
  had before (each wire sliced out on its own, then grouped into batches one wire at a
  time: :func:`wire_by_wire`), the topic weights, the warm-up/cosine schedule, the
  validation of every epoch as the lab did it before (Keras' ``validation_data`` pass
  plus a second ``predict`` for the macro-F1), the validation as it does it now (one
  ``predict``: :class:`lablib.training.BestValidationEpoch` with ``validation=``),
  ``steps_per_execution=32``, and the pipeline now (``reuters_dataset`` gathers each
  batch at once; the same batches): the lab now;
* the model alone on the lab's wires through the pipeline now (what the pipeline costs
  the step against synthetic ids);
* the lab now with dropout off and with ``jit_compile=True`` (what those cost or give);
* the lab now with the optimizer's update compiled by XLA, tf_keras's default on a GPU,
  which the lab turns off (:func:`lablib.training.no_xla_update`: the embedding's sparse
  gradient has a new shape nearly every batch, and each new shape is compiled afresh);
  forced on here also on a CPU, where it shows the same cost;
* a model of negligible width (d = 8, 1 head, 16 tokens, 100 words) with
  ``steps_per_execution`` 1 and 32, and 32 with ``jit_compile=True``: its step is almost
  pure host overhead (Keras' loop, callbacks, launching the step), the part that compiled
  steps remove;
* the lab's loop at negligible width (``tiny_lab``): the same model (100 words) on the
  lab's wires cut to 16 tokens (words past the first 100 out of vocabulary), with the lab's recipe as it was before (the pipeline
  before, topic weights, schedule, the two validation passes, one step per execution),
  the recipe now on the pipeline before (one validation pass, ``steps_per_execution=32``),
  and the lab now (the pipeline now): what the lab's own loop costs the host per step,
  side by side;
* the negligible-width model and the lab now again in a process whose TensorFlow runs
  each op on one intra-op thread instead of its pool (``tiny_one_thread``,
  ``now_one_thread``): what handing small ops to the pool costs the host, and what the
  pool gives the lab's matrices;
* the negligible-width model and the lab now again in a process whose TensorFlow runs
  without its oneDNN kernels (``TF_ENABLE_ONEDNN_OPTS=0`` before TensorFlow is imported:
  Eigen's kernels instead; ``tiny_no_onednn``, ``now_no_onednn``): what oneDNN's
  per-op cost adds to a small op, and what its kernels give the lab's matrices;
* the same for section 9's Keras 3 twin (``lablib.layers.TransformerEncoderBlock``), in
  a second process (one Keras mode per process).

Each row trains ``--epochs`` epochs (the first compiles and is not timed) and reports
the median over the timed epochs of the wall time per step and of the CPU time per step
(the process's user + system seconds: on a shared machine it moves much less with the
other jobs' load than the wall time does). Ratios are to ``model alone`` of the same
process and run. On a GPU the rows run on the GPU (the first one found).

Run::

    .venv/bin/python benchmarks/lab2_step.py                      # prints the table
    .venv/bin/python benchmarks/lab2_step.py --output benchmarks/results/lab2_step.md
    .venv/bin/python benchmarks/lab2_step.py --quick               # tiny data, CI
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("LABLIB_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

NUM_CLASSES = 46
# --rows keys: the lab's recipe part by part (tf_keras), section 9's (Keras 3: alone, before,
# now), and the negligible-width model (tiny).
ROW_KEYS = (
    "alone",
    "buckets",
    "weights",
    "schedule",
    "before",
    "one_pass",
    "spe",
    "now",
    "gathered",
    "no_dropout",
    "jit",
    "xla_update",
    "tiny",
    "tiny_lab",
    "tiny_one_thread",
    "now_one_thread",
    "tiny_no_onednn",
    "now_no_onednn",
)
# The rows that run in a child process of their own, with TensorFlow set up otherwise:
# (the child's flag, the words its rows' names end with, its negligible-width row key, its
# lab-now row key). One intra-op thread instead of the pool; oneDNN's kernels off.
VARIANTS = (
    ("--one-intra-op-thread", "one intra-op thread", "tiny_one_thread", "now_one_thread"),
    ("--onednn-off", "oneDNN off", "tiny_no_onednn", "now_no_onednn"),
)
VARIANT_ROWS = {key for _flag, _words, *keys in VARIANTS for key in keys}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--epochs", type=int, default=3, help="epochs per row; the first is not timed"
    )
    parser.add_argument("--quick", action="store_true", help="400 wires of 64 tokens, 2 epochs")
    parser.add_argument("--output", help="also write the table to this markdown file")
    parser.add_argument(
        "--modes",
        default="legacy,keras3",
        help="which Keras to time, comma-separated: legacy (tf_keras + tfm), keras3",
    )
    parser.add_argument(
        "--rows",
        default="all",
        help="which rows, comma-separated keys (all: every row): " + ", ".join(ROW_KEYS),
    )
    parser.add_argument("--child", choices=["legacy", "keras3"], help=argparse.SUPPRESS)
    parser.add_argument("--one-intra-op-thread", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--onednn-off", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def sizes(args):
    if args.quick:
        return dict(num_words=5000, max_length=64, wires=400, epochs=2)
    return dict(num_words=20000, max_length=256, wires=None, epochs=max(2, args.epochs))


# --------------------------------------------------------------------------- child process


def lab_data(size):
    """The lab's split (stratified, seed 0) and datasets, as section 1 builds them."""
    import numpy as np
    from sklearn.model_selection import train_test_split

    from _wire_by_wire import wire_by_wire

    from lablib.data import load_reuters, reuters_dataset

    (x_all, y_all), _ = load_reuters(num_words=size["num_words"])
    train, val = train_test_split(
        np.arange(len(x_all)), test_size=0.1, stratify=y_all, random_state=0
    )
    if size["wires"]:
        train, val = train[: size["wires"]], val[: size["wires"] // 4]
    x_train, y_train = [x_all[i] for i in train], y_all[train]
    x_val, y_val = [x_all[i] for i in val], y_all[val]
    maxlen = size["max_length"]
    train = dict(batch_size=32, maxlen=maxlen, seed=0, bucket=True)
    val = dict(batch_size=256, maxlen=maxlen, shuffle=False)
    return {
        "train": reuters_dataset(x_train, y_train, **train),
        "val": reuters_dataset(x_val, y_val, **val),
        "train_before": wire_by_wire(x_train, y_train, **train),
        "val_before": wire_by_wire(x_val, y_val, **val),
        "y_train": y_train,
        "y_val": y_val,
    }


def padded_length(dataset):
    shapes = [tokens.shape for tokens, _ in dataset]
    return round(sum(b * t for b, t in shapes) / sum(b for b, _ in shapes))


def synthetic(tf, num_words, length, batches, seed=0):
    """``batches`` batches of 32 random ids ``[32, length]``, made whole in memory and
    prefetched: the input pipeline costs the step nothing (batching 32 single wires at
    each step would add about 1 ms, which belongs to no model)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ids = rng.integers(4, num_words, size=(batches, 32, length)).astype("int32")
    labels = rng.integers(0, NUM_CLASSES, size=(batches, 32))
    return tf.data.Dataset.from_tensor_slices((ids, labels)).prefetch(tf.data.AUTOTUNE)


def macro_f1(labels, predicted):
    from sklearn.metrics import f1_score

    return float(
        f1_score(
            labels, predicted, average="macro", labels=list(range(NUM_CLASSES)), zero_division=0
        )
    )


class EpochClock:
    """Wall and CPU seconds of each epoch, validation callbacks included (put it last)."""

    def __init__(self, keras):
        outer = self

        class Clock(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                self.wall, self.cpu = time.perf_counter(), time.process_time()

            def on_epoch_end(self, epoch, logs=None):
                outer.wall.append(time.perf_counter() - self.wall)
                outer.cpu.append(time.process_time() - self.cpu)

        self.wall, self.cpu, self.callback = [], [], Clock()


def time_row(
    keras,
    tf,
    build,
    data,
    *,
    epochs,
    steps,
    validation=None,
    class_weight=None,
    one_pass=False,
    old_validation=False,
    schedule=False,
    spe=1,
    jit=False,
    dropout=0.1,
    xla_update=False,
):
    """Trains build(...) for ``epochs`` epochs; returns (ms/step wall, ms/step CPU) medians
    over the epochs after the first."""
    from lablib.training import BestValidationEpoch, no_xla_update, warmup_cosine

    keras.utils.set_random_seed(0)
    rate = warmup_cosine(1e-3, steps_per_epoch=steps, epochs=10) if schedule else 1e-3
    model = build(rate, dropout)
    optimizer = no_xla_update(
        keras.optimizers.Adam(rate)
    )  # as the lab's fit (tf_keras: XLA on a GPU)
    if xla_update:  # tf_keras's default on a GPU, forced on (also on a CPU, to show its cost there)
        optimizer.jit_compile = True
    model.compile(
        optimizer=optimizer,
        metrics=["accuracy"],
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=spe,
        jit_compile=jit,
    )
    callbacks, fit_validation = [], None
    if old_validation:  # before: Keras' validation pass, then a second pass for the macro-F1
        x_val, y_val = validation
        callbacks.append(
            BestValidationEpoch(
                patience=epochs + 1,
                metrics={
                    "val_macro_f1": lambda m: macro_f1(
                        y_val, m.predict(x_val, verbose=0).argmax(-1)
                    )
                },
            )
        )
        fit_validation = x_val
    elif one_pass:  # now: one pass gives the loss, the accuracy and the macro-F1
        callbacks.append(
            BestValidationEpoch(
                patience=epochs + 1,
                validation=validation,
                prediction_metrics={"val_macro_f1": macro_f1},
            )
        )
    clock = EpochClock(keras)
    model.fit(
        data,
        validation_data=fit_validation,
        epochs=epochs,
        verbose=0,
        class_weight=class_weight,
        callbacks=callbacks + [clock.callback],
    )
    timed_wall, timed_cpu = clock.wall[1:], clock.cpu[1:]
    time_row.epochs = list(clock.wall)  # every epoch's wall seconds, the first included
    return 1000 * statistics.median(timed_wall) / steps, 1000 * statistics.median(timed_cpu) / steps


def lab_model(keras, tf, mode, num_words, max_length, width=64, heads=2, inner=128, blocks=1):
    """The lab's classifier (section 4's solution, or section 9's Keras 3 twin), as
    ``build(rate, dropout) -> uncompiled model`` (``lab2_study.py`` builds with it too)."""
    import numpy as np

    from lablib.layers import positional_encoding

    def build(rate, dropout):
        ids = keras.Input(shape=(None,), dtype="int32")
        if mode == "legacy":
            from lablib.backend import import_tfm

            tfm = import_tfm()
            padding = tf.math.not_equal(ids, 0)
            x = keras.layers.Embedding(num_words, width, mask_zero=True)(ids)
            table = tf.constant(positional_encoding(max_length, width))
            x = keras.layers.Lambda(
                lambda e: e * float(np.sqrt(width)) + table[tf.newaxis, : tf.shape(e)[1]]
            )(x)
            x = keras.layers.Dropout(dropout)(x)
            mask = tfm.nlp.layers.SelfAttentionMask()(x, padding)
            for _ in range(blocks):
                x = tfm.nlp.layers.TransformerEncoderBlock(
                    num_attention_heads=heads,
                    inner_dim=inner,
                    inner_activation="relu",
                    output_dropout=dropout,
                    attention_dropout=dropout,
                )([x, mask])
            x = keras.layers.GlobalAveragePooling1D()(x, mask=padding)
        else:
            from lablib.layers import PositionalEncoding, TransformerEncoderBlock

            class Scale(keras.layers.Layer):  # as section 9's script: times sqrt(d), mask kept
                def __init__(self, **kwargs):
                    super().__init__(**kwargs)
                    self.supports_masking = True

                def call(self, inputs):
                    return inputs * float(np.sqrt(width))

            x = keras.layers.Embedding(num_words, width, mask_zero=True)(ids)
            x = PositionalEncoding(max_length)(Scale()(x))
            x = keras.layers.Dropout(dropout)(x)
            for _ in range(blocks):
                x = TransformerEncoderBlock(
                    heads, inner, "relu", output_dropout=dropout, attention_dropout=dropout
                )(x)
            x = keras.layers.GlobalAveragePooling1D()(x)
        x = keras.layers.Dropout(dropout)(x)
        return keras.Model(ids, keras.layers.Dense(NUM_CLASSES)(x))

    return build


def _recipe_rows(child: str, length: int, fixed, data, weights) -> list:
    """The rows of the lab's recipe, part by part: ``(key, name, time_row options)``
    (tf_keras: the lab's section 5; Keras 3: section 9's twin). The rows up to the lab
    before read the wires through the pipeline before (:func:`wire_by_wire`); the lab now
    and the rows built on it through ``reuters_dataset`` as it is now."""
    train, before = data["train"], data["train_before"]
    val_before = dict(validation=(data["val_before"], data["y_val"]))
    recipe = dict(class_weight=weights, schedule=True)
    lab_now = dict(
        validation=(data["val"], data["y_val"]), one_pass=True, spe=32, data=train, **recipe
    )
    if child == "legacy":
        now_on = {key: value for key, value in lab_now.items() if key != "data"}
        rows = [
            ("alone", f"model alone: synthetic ids [32, {length}], one shape", dict(data=fixed)),
            (
                "buckets",
                "+ the lab's wires in length buckets, sliced and grouped one wire at a time",
                dict(data=before),
            ),
            ("weights", "+ topic weights", dict(data=before, class_weight=weights)),
            ("schedule", "+ warm-up/cosine schedule", dict(data=before, **recipe)),
            (
                "before",
                "+ validation as before (Keras pass + macro-F1 pass): the lab before",
                dict(data=before, old_validation=True, **val_before, **recipe),
            ),
            (
                "one_pass",
                "one validation pass instead (BestValidationEpoch(validation=...))",
                dict(data=before, one_pass=True, **val_before, **recipe),
            ),
            (
                "spe",
                "+ steps_per_execution=32",
                dict(data=before, one_pass=True, spe=32, **val_before, **recipe),
            ),
            ("now", "+ each batch gathered at once: the lab now", dict(lab_now)),
            (
                "gathered",
                "model alone on the lab's wires in buckets, each batch gathered at once",
                dict(data=train),
            ),
            ("no_dropout", "the lab now, dropout 0", dict(lab_now, dropout=0.0)),
            ("jit", "the lab now + jit_compile=True", dict(lab_now, jit=True)),
            (
                "xla_update",
                "the lab now + the optimizer's update under XLA (tf_keras's default on a GPU)",
                dict(data=train, xla_update=True, **now_on),
            ),
        ]
    else:
        rows = [
            ("alone", f"model alone: synthetic ids [32, {length}], one shape", dict(data=fixed)),
            (
                "before",
                "section 9 before: buckets one wire at a time, weights, schedule, "
                "validation_data + predict",
                dict(data=before, old_validation=True, **val_before, **recipe),
            ),
            (
                "now",
                "section 9 now: batches gathered at once, one validation pass, "
                "steps_per_execution=32",
                dict(lab_now),
            ),
        ]
    return rows


def run_child(args):
    import lablib

    (lablib.use_legacy_keras if args.child == "legacy" else lablib.use_keras3)()
    import tensorflow as tf

    if args.one_intra_op_thread:  # before any op runs: the pool is made at the first one
        tf.config.threading.set_intra_op_parallelism_threads(1)

    from lablib.backend import get_keras
    from lablib.training import topic_weights

    keras = get_keras()
    size = sizes(args)
    epochs = size["epochs"]
    data = lab_data(size)
    train, steps = data["train"], len(data["train"])
    length = padded_length(train)
    weights = topic_weights(data["y_train"], NUM_CLASSES, power=0.5)
    build = lab_model(keras, tf, args.child, size["num_words"], size["max_length"])
    fixed = synthetic(tf, size["num_words"], length, steps)
    tiny_steps = steps
    tiny_data = synthetic(tf, 100, 16, tiny_steps, seed=1)
    tiny = lab_model(keras, tf, args.child, 100, 16, width=8, heads=1, inner=8)
    common = dict(epochs=epochs, steps=steps)
    rows = _recipe_rows(args.child, length, fixed, data, weights)
    wanted = set(ROW_KEYS if args.rows == "all" else args.rows.split(","))
    variant = _child_variant(args)
    if variant is not None:  # the negligible-width row and/or the lab now, as asked
        _flag, words, tiny_key, now_key = variant
        wanted = ({"tiny_variant"} if tiny_key in wanted else set()) | (
            {"now"} if now_key in wanted else set()
        )
    else:
        wanted -= VARIANT_ROWS
    results = []
    for key, name, options in rows:
        if key not in wanted:
            continue
        data_option = options.pop("data")
        name += f", {variant[1]}" if variant else ""
        wall, cpu = time_row(keras, tf, build, data_option, **common, **options)
        results.append((name, wall, cpu, time_row.epochs))
        epochs_s = ", ".join(f"{t:.1f}" for t in time_row.epochs)
        print(
            f"# {args.child}: {name}: {wall:.1f} ms/step (epochs, s: {epochs_s})",
            file=sys.stderr,
            flush=True,
        )
    tiny_rows = ((1, False), (32, False), (32, True)) if "tiny" in wanted else ()
    for spe, jit in tiny_rows + (((32, False),) if "tiny_variant" in wanted else ()):
        wall, cpu = time_row(
            keras, tf, tiny, tiny_data, epochs=epochs, steps=tiny_steps, spe=spe, jit=jit
        )
        name = f"negligible width (d=8, 16 tokens), steps_per_execution={spe}"
        name += ", jit_compile=True" if jit else ""
        name += f", {variant[1]}" if variant else ""
        results.append((name, wall, cpu, time_row.epochs))
    if "tiny_lab" in wanted:
        results += _tiny_lab_rows(keras, tf, args.child, size, common, weights)
    device = tf.config.list_logical_devices("GPU")
    gpu = (
        tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0]).get(
            "device_name", "GPU"
        )
        if device
        else None
    )
    return {
        "mode": "tf_keras + tfm"
        if args.child == "legacy"
        else f"Keras {keras.__version__} + lablib",
        "tensorflow": tf.__version__,
        "gpu": gpu,
        "steps": steps,
        "length": length,
        "epochs": epochs,
        "rows": results,
    }


def _tiny_lab_rows(keras, tf, mode, size, common, weights) -> list:
    """The lab's loop at negligible width: the negligible-width model (100 words) on the lab's
    wires cut to 16 tokens (the words past the first 100 out of vocabulary); the recipe before (the pipeline before, two validation
    passes, one step per execution), the recipe now on the pipeline before, and the lab now
    (same weights and schedule)."""
    # The negligible-width model's 100 words, as in the rows above: with the lab's 20,000
    # the optimizer's dense pass over the embedding table (Adam decays every row's moments
    # at every step) is arithmetic of its own, about 1 ms a step at d = 8.
    short = lab_data(dict(size, max_length=16, num_words=100))
    build = lab_model(keras, tf, mode, 100, 16, width=8, heads=1, inner=8)
    y_val, rows = short["y_val"], []
    for words, data, options in (
        (
            "the lab before (wires one at a time, two validation passes, steps_per_execution=1)",
            short["train_before"],
            dict(validation=(short["val_before"], y_val), old_validation=True),
        ),
        (
            "the recipe now (one validation pass, steps_per_execution=32), wires one at a time",
            short["train_before"],
            dict(validation=(short["val_before"], y_val), one_pass=True, spe=32),
        ),
        (
            "the lab now (each batch gathered at once)",
            short["train"],
            dict(validation=(short["val"], y_val), one_pass=True, spe=32),
        ),
    ):
        wall, cpu = time_row(
            keras,
            tf,
            build,
            data,
            **dict(common, steps=len(short["train"])),
            class_weight=weights,
            schedule=True,
            **options,
        )
        rows.append((f"{TINY_LAB}, {words}", wall, cpu, time_row.epochs))
    return rows


#: The name of the rows of the lab's loop at negligible width.
TINY_LAB = "the lab's loop at negligible width (d=8, 100 words, its wires cut to 16 tokens)"


def _child_variant(args):
    """The :data:`VARIANTS` entry of a child process's flag, or None (the default set-up)."""
    flags = {"--one-intra-op-thread": args.one_intra_op_thread, "--onednn-off": args.onednn_off}
    return next((v for v in VARIANTS if flags[v[0]]), None)


def child_env(mode: str, onednn_off: bool = False) -> dict:
    """The environment of a child process that measures one Keras mode (``legacy`` or
    ``keras3``), lablib importable from this checkout; oneDNN's kernels TensorFlow's
    default (on, x86 Linux) or off (read when TensorFlow is imported, so set here).
    ``step_profile.py`` starts its children with it too."""
    env = dict(
        os.environ,
        TF_USE_LEGACY_KERAS="1" if mode == "legacy" else "0",
        PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
    )
    env.pop("TF_ENABLE_ONEDNN_OPTS", None)
    if onednn_off:
        env["TF_ENABLE_ONEDNN_OPTS"] = "0"
    return env


def child_results(args, argv, mode):
    env = child_env(mode, onednn_off="--onednn-off" in argv)
    # The child's rows reach this process's stderr as it measures them, so a run stopped
    # by a deadline (a GPU lent for minutes) keeps what it measured.
    child = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--child", mode] + list(argv),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    errors = []

    def relay():
        for line in child.stderr:
            errors.append(line)
            if line.startswith("# "):
                sys.stderr.write(line)
                sys.stderr.flush()

    import threading

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    stdout = child.stdout.read()
    child.wait()
    reader.join()
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    if child.returncode != 0 or not lines:
        sys.stderr.write(stdout[-3000:] + "".join(errors)[-3000:])
        raise SystemExit(f"the {mode} child process failed (exit code {child.returncode})")
    return json.loads(lines[-1][len("RESULT ") :])


def table(parts):
    lines = [
        "| Keras | row | ms/step (wall) | ms/step (CPU) | wall / model alone | every epoch (s) |",
        "|---|---|---:|---:|---:|---|",
    ]
    for part in parts:
        alone = next((row[1] for row in part["rows"] if row[0].startswith("model alone")), None)
        for name, wall, cpu, epochs in part["rows"]:
            own_model = not name.startswith(("negligible", TINY_LAB))
            ratio = f"{wall / alone:.2f}" if alone and own_model else ""
            walls = ", ".join(f"{t:.1f}" for t in epochs)
            lines.append(
                f"| {part['mode']} | {name} | {wall:.1f} | {cpu:.1f} | {ratio} | {walls} |"
            )
    return "\n".join(lines)


def tiny_summary(part) -> str:
    """The negligible-width rows of one Keras, as one sentence ("" without the first two)."""
    tiny = {
        name[len("negligible width (d=8, 16 tokens), ") :]: wall
        for name, wall, _cpu, _epochs in part["rows"]
        if name.startswith("negligible")
    }
    one, many = tiny.get("steps_per_execution=1"), tiny.get("steps_per_execution=32")
    if not (one and many):
        return ""
    text = f"{part['mode']}: {one:.1f} -> {many:.1f} ms/step ({many / one:.2f})"
    for suffix, words in (
        ("jit_compile=True", "with jit_compile=True too"),
        ("one intra-op thread", "with one intra-op thread instead of the pool"),
        ("oneDNN off", "with oneDNN's kernels off"),
    ):
        wall = tiny.get(f"steps_per_execution=32, {suffix}")
        if wall:
            text += f", {words} {wall:.1f} ms/step ({wall / one:.2f})"
    return text


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(run_child(args)))
        return 0
    child_argv = [
        a for i, a in enumerate(argv) if a != "--output" and (i == 0 or argv[i - 1] != "--output")
    ]
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - {"legacy", "keras3"}:
        raise SystemExit(f"--modes is {args.modes!r}; expected legacy, keras3 or legacy,keras3")
    unknown = set(args.rows.split(",")) - set(ROW_KEYS) - {"all"}
    if unknown:
        raise SystemExit(
            f"--rows names {sorted(unknown)}; the rows are: {', '.join(ROW_KEYS)} (or all)"
        )
    parts = [child_results(args, child_argv, mode) for mode in modes]
    for flag, _words, *keys in VARIANTS:
        if args.rows == "all" or set(keys) & set(args.rows.split(",")):
            for part, mode in zip(parts, modes):  # the same process's rows, one more child each
                part["rows"] += child_results(args, child_argv + [flag], mode)["rows"]
    first = parts[0]
    summary = []
    overhead = "; ".join(filter(None, (tiny_summary(part) for part in parts)))
    lab_rows = {row[0]: row[1] for row in first["rows"]}
    alone = next((v for k, v in lab_rows.items() if k.startswith("model alone")), None)
    before = next((v for k, v in lab_rows.items() if k.endswith("the lab before")), None)
    now = next((v for k, v in lab_rows.items() if k.endswith("the lab now")), None)
    if alone and before and now:
        summary.append(
            f"The lab's step against the model alone: before {before / alone:.2f}, now {now / alone:.2f}."
        )
    elif alone and now:
        summary.append(f"The lab's step against the model alone: {now / alone:.2f}.")
    for _flag, words, _tiny, _now in VARIANTS:  # the lab now in a variant's process
        other = next((v for k, v in lab_rows.items() if k.endswith(f"the lab now, {words}")), None)
        if now and other:
            summary.append(f"The lab now with {words}: {other:.1f} ms/step ({other / now:.2f}).")
    loop = {k: v for k, v in lab_rows.items() if k.startswith(TINY_LAB)}
    if len(loop) == 3:
        loop_before, _middle, loop_now = loop.values()
        summary.append(
            f"The lab's loop at negligible width (the host overhead per step of its recipe), "
            f"before -> now: {loop_before:.1f} -> {loop_now:.1f} ms/step "
            f"({loop_now / loop_before:.2f})."
        )
    if overhead:
        summary.append(
            f"Host overhead per step (the negligible-width model), steps_per_execution 1 -> 32: {overhead}."
        )
    if args.rows != "all" or len(modes) < 2:
        summary.append(f"Rows run: {args.rows}; Keras: {args.modes} (`--rows`, `--modes`).")
    body = (
        f"One epoch of Lab 2's training per row ({first['steps']} steps of 32 wires, "
        f"{'quick: 400 wires of at most 64 tokens' if args.quick else 'the lab full: up to 256 tokens'}, "
        f"buckets padded to {first['length']} tokens on average), median of the "
        f"{first['epochs'] - 1} epoch(s) after the first; TensorFlow {first['tensorflow']}, "
        f"{'GPU: ' + first['gpu'] if first['gpu'] else 'CPU only'}.\n\n"
        f"{table(parts)}\n\n" + " ".join(summary) + "\n"
    )
    from _report import write_report

    write_report(args.output, "Lab 2's training step, part by part", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
