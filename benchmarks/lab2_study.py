"""Does Lab 2's study budget rank the variants as a full training would?

Section 7 of Lab 2 trains each variant of the student's study on a budget
(``STUDY_EPOCHS`` = 3 epochs, the schedule compressed into them, on the first
``STUDY_LENGTH`` = 128 tokens of each wire, scored on the validation wires cut the same
way) instead of section 5's full recipe (up to 10 epochs with patience 3 on 256
tokens). This script trains the base model and the solution's eight variants both
ways, with the same seed, and compares the two rankings on the validation metrics
(Spearman's rank correlation, the top variant, and which variants move by more than
two places). The test set plays no part.

Run::

    .venv/bin/python benchmarks/lab2_study.py --output benchmarks/results/lab2_study_gpu.md
    .venv/bin/python benchmarks/lab2_study.py --quick      # tiny data, CI
    .venv/bin/python benchmarks/lab2_study.py --from-log benchmarks/results/lab2_study_runs.json \
        --output benchmarks/results/lab2_study.md          # the table from two stored lab runs

``--from-log`` reads the two rankings from stored runs of the lab itself (its section 7
table at full length from an earlier full-mode run, and on the budget from a later one,
same seed) instead of training.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("LABLIB_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_USE_LEGACY_KERAS"] = "1"  # the lab's mode: tf_keras + TF Model Garden

NUM_CLASSES = 46
CONFIG = dict(
    embedding_dim=64,
    num_heads=2,
    inner_dim=128,
    num_blocks=1,
    dropout=0.1,
    optimizer="adam",
    learning_rate=1e-3,
    schedule="warmup_cosine",
)
# The solution's study (solutions/lab2_transformer_reuters.ipynb, section 7).
VARIANTS = {
    "base": {},
    "constant learning rate": dict(schedule="constant"),
    "wider: d=128, inner 256": dict(embedding_dim=128, inner_dim=256),
    "4 heads": dict(num_heads=4),
    "2 blocks": dict(num_blocks=2),
    "no topic weights": dict(topic_weights=False),
    "Adam 1e-4": dict(learning_rate=1e-4),
    "RMSprop 1e-3": dict(optimizer="rmsprop"),
    "SGD 0.05": dict(optimizer="sgd", learning_rate=0.05),
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="600 wires, 3 variants, 2/1 epochs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", help="also write the table to this markdown file")
    parser.add_argument(
        "--from-log", help="JSON of stored runs {full: {...}, budget: {...}}: no training"
    )
    return parser.parse_args(argv)


def spearman(a, b):
    """Spearman's rank correlation of two equally long lists of scores (no ties expected)."""
    import numpy as np

    ranks = lambda v: np.argsort(np.argsort(-np.asarray(v, dtype=float)))
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * float(np.sum((ra - rb) ** 2)) / (n * (n * n - 1))


def main(argv=None):
    args = parse_args(argv)
    if args.from_log:
        with open(args.from_log) as handle:
            log = json.load(handle)
        rows = {
            name: {"full": log["full"][name], "budget": log["budget"][name]} for name in log["full"]
        }
        preamble = (
            "From stored runs of the lab itself, one each, seed 0 (no training here): "
            + "; ".join(f"{part}: {text}" for part, text in log.get("source", {}).items())
            + "."
        )
        return render(rows, preamble, args.output)
    import numpy as np
    import tensorflow as tf
    from sklearn.metrics import f1_score
    from sklearn.model_selection import train_test_split

    import lablib
    from lablib.backend import get_keras
    from lablib.data import load_reuters, reuters_dataset
    from lablib.training import BestValidationEpoch, no_xla_update, topic_weights, warmup_cosine
    from lab2_step import lab_model  # the lab's classifier, one builder for both scripts

    lablib.exact_float32()
    keras = get_keras()
    num_words, max_length = (5000, 64) if args.quick else (20000, 256)
    full_epochs, budget_epochs, budget_length = (2, 1, 32) if args.quick else (10, 3, 128)
    variants = dict(list(VARIANTS.items())[:3]) if args.quick else VARIANTS

    (x_all, y_all), _ = load_reuters(num_words=num_words)
    train, val = train_test_split(
        np.arange(len(x_all)), test_size=0.1, stratify=y_all, random_state=0
    )
    if args.quick:
        train, val = train[:600], val[:150]
    x_train, y_train = [x_all[i] for i in train], y_all[train]
    x_val, y_val = [x_all[i] for i in val], y_all[val]
    weights = topic_weights(y_train, NUM_CLASSES, power=0.5)

    def macro_f1(labels, predicted):
        return float(
            f1_score(
                labels, predicted, average="macro", labels=list(range(NUM_CLASSES)), zero_division=0
            )
        )

    def build(config, epochs, steps):
        config = dict(config)
        rate = config["learning_rate"]
        if config["schedule"] == "warmup_cosine":
            rate = warmup_cosine(rate, steps_per_epoch=steps, epochs=epochs)
        model = lab_model(
            keras,
            tf,
            "legacy",
            num_words,
            max_length,
            width=config["embedding_dim"],
            heads=config["num_heads"],
            inner=config["inner_dim"],
            blocks=config["num_blocks"],
        )(rate, config["dropout"])
        optimizer = no_xla_update(
            {
                "adam": keras.optimizers.Adam,
                "sgd": keras.optimizers.SGD,
                "rmsprop": keras.optimizers.RMSprop,
            }[config["optimizer"]](learning_rate=rate)
        )
        model.compile(
            optimizer=optimizer,
            metrics=["accuracy"],
            steps_per_execution=32,
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        return model

    def train_one(change, epochs, length):
        change = dict(change)
        weighted = change.pop("topic_weights", True)
        train_ds = reuters_dataset(
            x_train, y_train, batch_size=32, maxlen=length, seed=0, bucket=True
        )
        val_ds = reuters_dataset(x_val, y_val, batch_size=256, maxlen=length, shuffle=False)
        keras.utils.set_random_seed(args.seed)
        model = build({**CONFIG, **change}, epochs, len(train_ds))
        keeper = BestValidationEpoch(
            patience=3, validation=(val_ds, y_val), prediction_metrics={"val_macro_f1": macro_f1}
        )
        start = time.perf_counter()
        model.fit(
            train_ds,
            epochs=epochs,
            verbose=0,
            callbacks=[keeper],
            class_weight=weights if weighted else None,
        )
        seconds = time.perf_counter() - start
        predicted = model.predict(val_ds, verbose=0).argmax(-1)
        return {
            "val accuracy": float(np.mean(predicted == y_val)),
            "val macro_f1": macro_f1(y_val, predicted),
            "best epoch": keeper.best_epoch,
            "seconds": seconds,
        }

    rows = {}
    for name, change in variants.items():
        rows[name] = {
            "full": train_one(change, full_epochs, max_length),
            "budget": train_one(change, budget_epochs, budget_length),
        }
        print(f"# {name}: {json.dumps(rows[name])}", file=sys.stderr, flush=True)
    gpus = tf.config.list_physical_devices("GPU")
    device = (
        tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
        if gpus
        else "CPU only"
    )
    preamble = (
        f"{len(rows)} configurations, seed {args.seed}, one run each; full recipe: up to {full_epochs} epochs "
        f"(patience 3) on {max_length} tokens; budget: {budget_epochs} epochs on {budget_length} tokens; "
        f"TensorFlow {tf.__version__}, {device}."
    )
    return render(rows, preamble, args.output)


def render(rows, preamble, output):
    """The table, the rank correlations and what moved; printed and written."""
    names = list(rows)
    lines = [
        "| variant | full: val accuracy | full: val macro-F1 | full: best epoch | full: s "
        "| budget: val accuracy | budget: val macro-F1 | budget: s | rank full / budget (macro-F1) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    order = lambda key, part: sorted(names, key=lambda n: -rows[n][part][key])
    rank_full = {n: i + 1 for i, n in enumerate(order("val macro_f1", "full"))}
    rank_budget = {n: i + 1 for i, n in enumerate(order("val macro_f1", "budget"))}
    for name in order("val macro_f1", "full"):
        full, budget = rows[name]["full"], rows[name]["budget"]
        lines.append(
            f"| {name} | {full['val accuracy']:.4f} | {full['val macro_f1']:.4f} | {full['best epoch']} | "
            f"{full['seconds']:.0f} | {budget['val accuracy']:.4f} | {budget['val macro_f1']:.4f} | "
            f"{budget['seconds']:.0f} | {rank_full[name]} / {rank_budget[name]} |"
        )
    summary = []
    for key in ("val macro_f1", "val accuracy"):
        rho = spearman(
            [rows[n]["full"][key] for n in names], [rows[n]["budget"][key] for n in names]
        )
        summary.append(
            f"{key}: Spearman {rho:.2f}, first under the full recipe "
            f"'{order(key, 'full')[0]}', under the budget '{order(key, 'budget')[0]}'"
        )
    moved = [
        f"{n} ({rank_full[n]} -> {rank_budget[n]})"
        for n in names
        if abs(rank_full[n] - rank_budget[n]) > 2
    ]
    full_s = sum(rows[n]["full"]["seconds"] for n in names)
    budget_s = sum(rows[n]["budget"]["seconds"] for n in names)
    body = (
        preamble
        + "\n\n"
        + "\n".join(lines)
        + "\n\n"
        + "; ".join(summary)
        + f". Moved by more than two places: {', '.join(moved) or 'none'}. "
        f"Training time: full {full_s / 60:.1f} min, budget {budget_s / 60:.1f} min "
        f"({budget_s / full_s:.2f} of the full).\n"
    )
    from _report import write_report

    write_report(output, "Lab 2's study: budget vs full training", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
