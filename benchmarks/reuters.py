"""Reuters-46 topic classification: the Lab 2 transformer beside a bag-of-words MLP.

Three models, the same data, validation split and protocol, in one run:

* ``bow``: multi-hot vectors of the 10,000 most frequent words, Dense(64, relu) x 2,
  Dense(46) (Chollet, *Deep Learning with Python*, ch. 4), RMSprop, batches of 512;
  Keras 3.
* ``tfm``: the Lab 2 recipe: ``Embedding`` (scaled by sqrt(d)) + sinusoidal positional
  encoding (``lablib.layers.positional_encoding``) + one
  ``tfm.nlp.layers.TransformerEncoderBlock`` + ``GlobalAveragePooling1D`` with the
  padding mask + Dense(46); TF Model Garden in legacy mode (``TF_USE_LEGACY_KERAS=1``).
  Trained as in the notebook: Adam with one warm-up epoch then cosine decay over the
  epochs, and each wire's loss weighted by ``n_c ** -0.5`` (``n_c``: training wires of its
  topic; the average wire weighs 1). ``--set schedule=constant --set class_weight_power=0``
  gives the plain recipe (constant rate, no weights).
* ``lablib``: the same model with ``lablib.layers.TransformerEncoderBlock`` on Keras 3.

Each (model, seed) is trained in its own child process (the Keras mode is fixed per
process), interleaved seed by seed so the shared machine's load hits all models alike.
The epoch is chosen on a validation split drawn from the training set (never the test
set): training stops when validation accuracy has not improved for ``--patience``
epochs and the best epoch's weights are tested. Test accuracy and macro-F1
(``sklearn.metrics.f1_score(average="macro")``) are reported as mean ± std over seeds.

Run::

    .venv/bin/python benchmarks/reuters.py           # full: 3 seeds, writes results/reuters.md
    .venv/bin/python benchmarks/reuters.py --quick   # 1 seed, tiny subsets, 1 epoch
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
from _report import write_report  # noqa: E402  (benchmarks/ is sys.path[0])

NUM_CLASSES = 46
CONFIG = {
    "num_words": 20000,  # transformer vocabulary (ids below 20,000)
    "bow_words": 10000,  # bag-of-words vocabulary, as in Chollet's book
    "maxlen": 256,
    "d_model": 64,
    "num_heads": 2,
    "inner_dim": 128,
    "dropout": 0.1,
    "batch_size": 32,
    "learning_rate": 1e-3,
    "validation_fraction": 0.1,
    "schedule": "cosine",  # learning rate: constant, or cosine (1 warm-up epoch, then cosine decay over --epochs)
    "class_weight_power": 0.5,  # > 0: weight topic c by (n_c)^-power (mean weight over wires 1)
}


# --------------------------------------------------------------------------- reporting


def macro_f1(labels, predicted) -> float:
    """Macro-averaged F1 over all 46 topics (a topic never seen nor predicted counts 0)."""
    from sklearn.metrics import f1_score

    return float(
        f1_score(labels, predicted, average="macro", labels=np.arange(NUM_CLASSES), zero_division=0)
    )


def mean_std(values, scale=1.0, digits=3) -> str:
    values = [scale * v for v in values]
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


# --------------------------------------------------------------------------- child: one model, one seed


def split_train_validation(x, y, fraction, seed):
    """A random validation split drawn from the training set only."""
    order = np.random.default_rng(seed).permutation(len(y))
    held = int(round(fraction * len(y)))
    val, train = order[:held], order[held:]
    return [x[i] for i in train], y[train], [x[i] for i in val], y[val]


def best_epoch_callback(patience, val_inputs=None, val_labels=None):
    """Lab 2's callback, :class:`lablib.training.BestValidationEpoch` (best validation
    accuracy kept, stop after ``patience``), with the validation macro-F1 as a reported
    metric (never used to choose); ``history`` holds [accuracy, loss, macro-F1] per epoch
    and ``best_macro_f1`` the value at the chosen epoch. Import in the child, after the
    Keras mode is set."""
    from lablib.training import BestValidationEpoch

    class BestEpoch(BestValidationEpoch):
        def __init__(self):
            metrics = {}
            if val_inputs is not None:
                metrics["val_macro_f1"] = lambda model: macro_f1(
                    val_labels, np.argmax(model.predict(val_inputs, verbose=0), axis=-1)
                )
            super().__init__(patience=patience, monitor="val_accuracy", metrics=metrics)
            self.history, self.best_macro_f1 = [], None

        def on_epoch_end(self, epoch, logs=None):
            super().on_epoch_end(epoch, logs)
            row = [round(float(logs["val_accuracy"]), 4), round(float(logs["val_loss"]), 4)]
            if "val_macro_f1" in logs:
                row.append(round(logs["val_macro_f1"], 4))
            self.history.append(row)
            if self.best_epoch == epoch + 1:
                self.best_macro_f1 = row[2] if len(row) > 2 else None

    return BestEpoch()


def learning_rate(keras, steps_per_epoch: int, epochs: int):
    """CONFIG's learning rate: constant, or the lab's schedule (:func:`lablib.training.warmup_cosine`:
    one warm-up epoch, then cosine decay over the rest)."""
    if CONFIG["schedule"] == "constant":
        return CONFIG["learning_rate"]
    if CONFIG["schedule"] != "cosine":
        raise ValueError(f"schedule={CONFIG['schedule']!r}: expected 'constant' or 'cosine'")
    from lablib.training import warmup_cosine

    return warmup_cosine(CONFIG["learning_rate"], steps_per_epoch=steps_per_epoch, epochs=epochs)


def topic_weights(y_train):
    """Keras ``class_weight`` of the lab (:func:`lablib.training.topic_weights`) with
    CONFIG's power (None when 0)."""
    from lablib import training

    return training.topic_weights(y_train, NUM_CLASSES, power=CONFIG["class_weight_power"])


def build_transformer(keras, tf, block):
    """Embedding * sqrt(d) + positional encoding -> encoder block -> masked average -> Dense."""
    from lablib.layers import positional_encoding

    d = CONFIG["d_model"]
    encoding = tf.constant(positional_encoding(CONFIG["maxlen"], d))

    class TransformerClassifier(keras.Model):
        def __init__(self):
            super().__init__()
            self.embedding = keras.layers.Embedding(CONFIG["num_words"], d)
            self.block = block
            self.pool = keras.layers.GlobalAveragePooling1D()
            self.dropout = keras.layers.Dropout(CONFIG["dropout"])
            self.classify = keras.layers.Dense(NUM_CLASSES)

        def call(self, tokens, training=False):
            padding = tf.not_equal(tokens, 0)  # [B, T], True for real tokens
            length = tf.shape(tokens)[1]
            x = self.embedding(tokens) * (d**0.5) + encoding[tf.newaxis, :length]
            x = self.dropout(x, training=training)
            attention_mask = tf.cast(padding[:, tf.newaxis, :], tf.float32) * tf.ones(
                [1, length, 1]
            )
            x = self.block([x, attention_mask], training=training)
            x = self.pool(x, mask=padding)
            return self.classify(self.dropout(x, training=training))

    return TransformerClassifier()


def child(args) -> None:
    """Train one model with one seed; print a JSON line with the scores."""
    import tensorflow as tf

    from lablib.backend import keras
    from lablib.data import load_reuters, reuters_dataset

    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(args.seed)
    words = CONFIG["bow_words"] if args.model == "bow" else CONFIG["num_words"]
    (x_train, y_train), (x_test, y_test) = load_reuters(num_words=words)
    x_train, y_train, x_val, y_val = split_train_validation(
        x_train, y_train, CONFIG["validation_fraction"], args.seed
    )
    if args.quick:  # tiny subsets: checks the code path, not the score
        x_train, y_train, x_val, y_val = x_train[:256], y_train[:256], x_val[:128], y_val[:128]
        x_test, y_test = x_test[:128], y_test[:128]

    if args.model == "bow":

        def multi_hot(sequences):
            out = np.zeros((len(sequences), words), dtype=np.float32)
            for row, sequence in enumerate(sequences):
                out[row, np.asarray(sequence, dtype=np.int64)] = 1.0
            return out

        model = keras.Sequential(
            [
                keras.Input((words,)),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(NUM_CLASSES),
            ]
        )
        optimizer = keras.optimizers.RMSprop(1e-3)
        train_data = (multi_hot(x_train), y_train)
        val_data, test_inputs, batch_size = (multi_hot(x_val), y_val), multi_hot(x_test), 512
        steps_per_epoch = -(-len(y_train) // batch_size)
    else:
        if args.model == "tfm":
            import tensorflow_models as tfm

            block_class = tfm.nlp.layers.TransformerEncoderBlock
        else:
            from lablib.layers import TransformerEncoderBlock as block_class
        block = block_class(
            CONFIG["num_heads"],
            inner_dim=CONFIG["inner_dim"],
            inner_activation="relu",
            output_dropout=CONFIG["dropout"],
            attention_dropout=CONFIG["dropout"],
        )
        model = build_transformer(keras, tf, block)
        batch_size = CONFIG["batch_size"]
        train_data = reuters_dataset(
            x_train,
            y_train,
            batch_size=batch_size,
            maxlen=CONFIG["maxlen"],
            seed=args.seed,
            bucket=True,
        )
        steps_per_epoch = len(train_data)  # exact: the bucketed dataset knows its batches
        optimizer = keras.optimizers.Adam(learning_rate(keras, steps_per_epoch, args.epochs))
        val_data = reuters_dataset(
            x_val, y_val, batch_size=128, maxlen=CONFIG["maxlen"], shuffle=False
        )
        test_inputs = reuters_dataset(
            x_test, y_test, batch_size=128, maxlen=CONFIG["maxlen"], shuffle=False
        )

    from lablib.training import (
        no_xla_update,
    )  # as the lab: no XLA for tf_keras's sparse updates on a GPU

    model.compile(
        optimizer=no_xla_update(optimizer),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    val_inputs = (
        val_data[0] if isinstance(val_data, tuple) else val_data.map(lambda tokens, label: tokens)
    )
    callback = best_epoch_callback(args.patience, val_inputs, y_val)
    if isinstance(train_data, tuple):
        model.fit(
            *train_data,
            batch_size=batch_size,
            epochs=args.epochs,
            validation_data=val_data,
            callbacks=[callback],
            verbose=0,
        )
        logits = model.predict(test_inputs, batch_size=512, verbose=0)
    else:
        model.fit(
            train_data,
            epochs=args.epochs,
            validation_data=val_data,
            callbacks=[callback],
            verbose=0,
            class_weight=topic_weights(y_train),
        )
        logits = model.predict(test_inputs.map(lambda tokens, label: tokens), verbose=0)
    predictions = np.argmax(logits, axis=-1)
    result = {
        "model": args.model,
        "seed": args.seed,
        "keras": keras.__name__ + " " + keras.__version__,
        "test_accuracy": float(np.mean(predictions == y_test)),
        "macro_f1": macro_f1(y_test, predictions),
        "best_epoch": callback.best_epoch,
        "epochs_run": len(callback.epoch_seconds),
        "validation_history": callback.history,  # [accuracy, loss, macro-F1] per epoch
        "val_macro_f1": callback.best_macro_f1,  # at the chosen epoch
        "val_accuracy": callback.best,
        # the first epoch includes tracing; the median of the others is the steady state
        "seconds_per_epoch": statistics.median(
            callback.epoch_seconds[1:] or callback.epoch_seconds
        ),
        "steps_per_epoch": steps_per_epoch,
        "device": (tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU"))[
            0
        ].name,
        "parameters": int(model.count_params()),
    }
    print(json.dumps(result))


def run_script_child(script: str, name: str, seed: int, args, legacy: bool, extra=()) -> dict:
    """Runs ``script --child name --seed seed ...`` in a fresh process (its own Keras mode);
    returns the JSON line it prints last, after echoing it on stderr (the per-seed log)."""
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1" if legacy else "0")
    command = (
        [
            sys.executable,
            os.path.abspath(script),
            "--child",
            name,
            "--seed",
            str(seed),
            "--epochs",
            str(args.epochs),
            "--patience",
            str(args.patience),
        ]
        + list(extra)
        + (["--quick"] if args.quick else [])
    )
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{name} seed {seed} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(result), file=sys.stderr, flush=True)
    return result


def run_child(model: str, seed: int, args) -> dict:
    return run_script_child(
        __file__,
        model,
        seed,
        args,
        legacy=model == "tfm",
        extra=[f"--set={item}" for item in args.set],
    )


# --------------------------------------------------------------------------- main


def rows_from_log(path: str, key: str, names) -> tuple[dict, str]:
    """``--from-log``: the per-seed JSON lines of an earlier run's stderr, grouped by their
    ``key`` field (only the ``names`` asked for, in that order, none left empty), and the
    note that says under the table where they came from."""
    rows = {name: [] for name in names}
    with open(path, errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if line.startswith("{") and f'"{key}"' in line:
                row = json.loads(line)
                if row[key] in rows:
                    rows[row[key]].append(row)
    note = (
        f"Rendered from the per-seed lines logged in `{os.path.basename(path)}` (`--from-log`, no "
        "training); the seeds column says how many finished seeds each row rests on."
    )
    return {name: found for name, found in rows.items() if found}, note


def training_arguments(parser):
    """The options every seed-by-seed Reuters benchmark takes (this script, positions.py)."""
    parser.add_argument(
        "--quick", action="store_true", help="1 seed, tiny subsets, 1 epoch: checks the script runs"
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--epochs", type=int, default=None, help="most epochs (default 10; 1 with --quick)"
    )
    parser.add_argument(
        "--patience",
        type=int,
        default=3,
        help="epochs without a better val accuracy before stopping",
    )
    return parser


def main(argv=None):
    parser = training_arguments(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    parser.add_argument(
        "--models", default="bow,tfm,lablib", help="comma-separated subset of bow,tfm,lablib"
    )
    parser.add_argument(
        "--output",
        default=None,
        help="where to write the table (default results/reuters.md; none with --quick)",
    )
    parser.add_argument(
        "--from-log",
        default=None,
        help="render the table from an earlier run's stderr (no training)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a transformer setting (repeatable); keys: {', '.join(CONFIG)}",
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.epochs is None:
        args.epochs = 1 if args.quick else 10
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in CONFIG or not value:
            parser.error(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(CONFIG)}")
        CONFIG[key] = type(CONFIG[key])(value)
    if args.child:
        args.model = args.child
        child(args)
        return

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = sorted(set(models) - {"bow", "tfm", "lablib"})
    if unknown:
        parser.error(f"--models: unknown {unknown}; choose from bow, tfm, lablib")
    seeds = [0] if args.quick else list(range(args.seeds))
    results = {m: [] for m in models}
    note = ""
    if args.from_log:
        results, note = rows_from_log(args.from_log, "model", models)
        models = list(results)
        total = None
    else:
        started = time.perf_counter()
        for seed in seeds:
            for model in models:
                results[model].append(run_child(model, seed, args))
        total = time.perf_counter() - started

    names = {
        "bow": "bag-of-words MLP (10k multi-hot, 2 × Dense 64), Keras 3",
        "tfm": "tfm.nlp.layers.TransformerEncoderBlock, tf_keras (legacy mode)",
        "lablib": "lablib.layers.TransformerEncoderBlock, Keras 3",
    }
    c = CONFIG
    lines = [
        f"Test set: 2,246 wires (`load_reuters()` default split). Validation: {c['validation_fraction']:.0%} of the "
        f"training wires, drawn per seed; the epoch with the best validation accuracy is tested "
        f"(at most {args.epochs} epochs, patience {args.patience}). Mean ± std over seeds 0..n-1.",
        "",
        f"Transformer: vocabulary {c['num_words']:,}, wires truncated to the first {c['maxlen']} tokens, d = {c['d_model']}, "
        f"{c['num_heads']} heads, inner {c['inner_dim']} (ReLU), dropout {c['dropout']}, Adam {c['learning_rate']:g} "
        f"({'one warm-up epoch, then cosine decay' if c['schedule'] == 'cosine' else 'constant'}), "
        f"topic weights n_c^-{c['class_weight_power']:g} (transformers only), "
        f"batch {c['batch_size']} (length-bucketed).",
        "",
        "| model | seeds | test accuracy | macro-F1 | best epoch (mean) | s / epoch (median) | parameters "
        "| steps / s (median) | device |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for model in models:
        rows = results[model]
        lines.append(
            f"| {names[model]} | {len(rows)} | {mean_std([r['test_accuracy'] for r in rows])} | {mean_std([r['macro_f1'] for r in rows])} | "
            f"{statistics.mean([r['best_epoch'] for r in rows]):.1f} | "
            f"{statistics.median([r['seconds_per_epoch'] for r in rows]):.1f} | {rows[0]['parameters']:,} | "
            + (
                f"{statistics.median([r['steps_per_epoch'] / r['seconds_per_epoch'] for r in rows]):.1f} | "
                f"{rows[0]['device']} |"
                if all("device" in r for r in rows)
                else "— | — (not logged then) |"
            )
        )
    lines += [
        "",
        "Targets (from the issue): transformer test accuracy ≥ 0.83 and macro-F1 ≥ 0.65; "
        "the book's bag-of-words MLP reaches 0.777 (about 0.79 / macro-F1 0.48 expected here).",
        "",
    ] + ([f"Wall time of the whole run: {total / 60:.1f} min."] if total else [note])
    output = args.output or (
        None if args.quick else os.path.join(ROOT, "benchmarks", "results", "reuters.md")
    )
    write_report(
        output,
        "Reuters-46: Lab 2 transformer vs bag-of-words" + (" (--quick)" if args.quick else ""),
        "\n".join(lines),
    )


if __name__ == "__main__":
    main()
