"""Reuters-46: learned or sinusoidal positions, the Lab 2 recipe over several seeds.

Lab 2's section 10 trains its classifier twice, once per kind of position information
of lablib's ``TokenAndPositionEmbedding`` (the fixed sinusoidal table of Vaswani et al.
or a learned ``[max_length, d]`` table), one seed each. One seed cannot tell a real
difference from run-to-run noise; this benchmark trains both with the same recipe over
``--seeds`` seeds and reports mean ± std, so that the notebook can quote it.

The model is section 10's ``build_extension``: ``TokenAndPositionEmbedding`` (token
embeddings times sqrt(d) as in section 4, ``scale_embeddings=True``; the learned table
added unscaled) + dropout + one ``tfm.nlp.layers.TransformerEncoderBlock`` with
tfm's ``SelfAttentionMask`` + masked ``GlobalAveragePooling1D`` + dropout + Dense(46), in
legacy mode (tf_keras). The recipe is that of ``benchmarks/reuters.py`` (whose helpers
this script uses): vocabulary 20,000, 256 tokens, d = 64, 2 heads, inner 128, dropout
0.1, Adam 1e-3 with one warm-up epoch then cosine decay, topic weights n_c^-0.5,
length-bucketed batches of 32, a validation split drawn per seed from the training set,
the epoch of best validation accuracy tested (at most 10 epochs, patience 3).

Longer inputs than those trained on: on the test wires longer than 256 tokens, the
learned model reads their first 256 tokens (its table has no rows beyond); the
sinusoidal model's trained weights are put in the same model with a table of 512 rows
(the table is not a weight) and read the first 256, then the first 512 tokens.

Each (variant, seed) trains in its own child process, seeds interleaved so that the
shared machine's load hits both variants alike.

Run::

    .venv/bin/python benchmarks/positions.py           # 3 seeds, writes results/positions.md
    .venv/bin/python benchmarks/positions.py --quick   # 1 seed, tiny subsets, 1 epoch
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
from _report import write_report  # benchmarks/ is sys.path[0]
from reuters import (  # the recipe and its helpers; importing it also sets LABLIB_DATA_DIR's default
    CONFIG,
    NUM_CLASSES,
    ROOT,
    learning_rate,
    macro_f1,
    best_epoch_callback,
    mean_std,
    rows_from_log,
    run_script_child,
    split_train_validation,
    topic_weights,
    training_arguments,
)

VARIANTS = ("sinusoidal", "learned")


def build(keras, tf, positional: str, max_length: int):
    """Lab 2 section 10's classifier (mean pooling) on TokenAndPositionEmbedding."""
    import tensorflow_models as tfm

    from lablib.layers import TokenAndPositionEmbedding

    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    padding = tf.math.not_equal(token_ids, 0)
    x = TokenAndPositionEmbedding(
        CONFIG["num_words"],
        max_length,
        CONFIG["d_model"],
        positional=positional,
        mask_zero=False,
        scale_embeddings=True,
        name="token_and_position",
    )(token_ids)
    x = keras.layers.Dropout(CONFIG["dropout"])(x)
    attention_mask = tfm.nlp.layers.SelfAttentionMask()(x, padding)
    x = tfm.nlp.layers.TransformerEncoderBlock(
        num_attention_heads=CONFIG["num_heads"],
        inner_dim=CONFIG["inner_dim"],
        inner_activation="relu",
        output_dropout=CONFIG["dropout"],
        attention_dropout=CONFIG["dropout"],
    )([x, attention_mask])
    x = keras.layers.GlobalAveragePooling1D()(x, mask=padding)
    x = keras.layers.Dropout(CONFIG["dropout"])(x)
    return keras.Model(token_ids, keras.layers.Dense(NUM_CLASSES)(x))


def child(args) -> None:
    """Train one variant with one seed; print a JSON line with the scores."""
    import tensorflow as tf

    from lablib.backend import check_model, keras
    from lablib.data import load_reuters, reuters_dataset

    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(args.seed)
    maxlen = CONFIG["maxlen"]
    (x_train, y_train), (x_test, y_test) = load_reuters(num_words=CONFIG["num_words"])
    x_train, y_train, x_val, y_val = split_train_validation(
        x_train, y_train, CONFIG["validation_fraction"], args.seed
    )
    if args.quick:  # tiny subsets: checks the code path, not the score
        x_train, y_train, x_val, y_val = x_train[:256], y_train[:256], x_val[:128], y_val[:128]
        x_test, y_test = x_test[:256], y_test[:256]

    model = build(keras, tf, args.variant, maxlen)
    check_model(model)
    train_data = reuters_dataset(
        x_train,
        y_train,
        batch_size=CONFIG["batch_size"],
        maxlen=maxlen,
        seed=args.seed,
        bucket=True,
    )
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate(keras, len(train_data), args.epochs)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    val_data = reuters_dataset(x_val, y_val, batch_size=128, maxlen=maxlen, shuffle=False)
    callback = best_epoch_callback(args.patience, val_data.map(lambda tokens, label: tokens), y_val)
    model.fit(
        train_data,
        epochs=args.epochs,
        validation_data=val_data,
        callbacks=[callback],
        verbose=0,
        class_weight=topic_weights(y_train),
    )

    def scores(a_model, x, y, cut):
        data = reuters_dataset(x, y, batch_size=128, maxlen=cut, shuffle=False).map(
            lambda tokens, label: tokens
        )
        predicted = np.argmax(a_model.predict(data, verbose=0), axis=-1)
        return {"accuracy": float(np.mean(predicted == y)), "macro_f1": macro_f1(y, predicted)}

    long_index = np.array(
        [i for i, wire in enumerate(x_test) if len(wire) > maxlen], dtype=np.int64
    )
    x_long, y_long = [x_test[i] for i in long_index], y_test[long_index]
    longer = {"wires": len(long_index), "first maxlen": scores(model, x_long, y_long, maxlen)}
    if args.variant == "sinusoidal":  # the same weights with a table twice as long
        stretched = build(keras, tf, "sinusoidal", 2 * maxlen)
        stretched.set_weights(model.get_weights())
        longer["stretched, first maxlen"] = scores(stretched, x_long, y_long, maxlen)
        longer["stretched, first 2 maxlen"] = scores(stretched, x_long, y_long, 2 * maxlen)
    test = scores(model, x_test, y_test, maxlen)
    print(
        json.dumps(
            {
                "variant": args.variant,
                "seed": args.seed,
                "keras": keras.__name__ + " " + keras.__version__,
                "test_accuracy": test["accuracy"],
                "macro_f1": test["macro_f1"],
                "best_epoch": callback.best_epoch,
                "epochs_run": len(callback.epoch_seconds),
                "validation_history": callback.history,
                "seconds_per_epoch": statistics.median(
                    callback.epoch_seconds[1:] or callback.epoch_seconds
                ),
                "device": (
                    tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
                )[0].name,
                "parameters": int(model.count_params()),
                "longer": longer,
            }
        )
    )


def run_child(variant: str, seed: int, args) -> dict:
    return run_script_child(
        __file__, variant, seed, args, legacy=True
    )  # tfm's blocks need tf_keras


def render(results: dict, args, total: float | None, note: str) -> str:
    c = CONFIG
    lines = [
        f"Test set: 2,246 wires (`load_reuters()` default split). Validation: {c['validation_fraction']:.0%} of the "
        f"training wires, drawn per seed; the epoch with the best validation accuracy is tested (at most "
        f"{args.epochs} epoch{'s' if args.epochs != 1 else ''}, patience {args.patience}). Mean ± std over seeds 0..n-1; each seed draws the same "
        "split and batches for both variants.",
        "",
        f"Model (Lab 2 section 10's `build_extension`, mean pooling): `TokenAndPositionEmbedding` (vocabulary "
        f"{c['num_words']:,}, d = {c['d_model']}, token embeddings times sqrt(d)), one tfm `TransformerEncoderBlock` "
        f"({c['num_heads']} heads, inner "
        f"{c['inner_dim']}, dropout {c['dropout']}), masked mean, Dense(46); tf_keras (legacy mode). Recipe: wires cut "
        f"to {c['maxlen']} tokens, Adam {c['learning_rate']:g} (one warm-up epoch, then cosine decay), topic weights "
        f"n_c^-{c['class_weight_power']:g}, batch {c['batch_size']} (length-bucketed).",
        "",
        "| positions | seeds | test accuracy | macro-F1 | best epoch (mean) | s / epoch (median) | parameters | device |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for variant, rows in results.items():
        lines.append(
            f"| {variant} | {len(rows)} | {mean_std([r['test_accuracy'] for r in rows])} | "
            f"{mean_std([r['macro_f1'] for r in rows])} | {statistics.mean([r['best_epoch'] for r in rows]):.1f} | "
            f"{statistics.median([r['seconds_per_epoch'] for r in rows]):.1f} | {rows[0]['parameters']:,} | "
            f"{rows[0]['device']} |"
        )
    if all(results.get(v) for v in VARIANTS):
        pairs = [
            (s["test_accuracy"] - l["test_accuracy"], s["macro_f1"] - l["macro_f1"])
            for s, l in zip(results["sinusoidal"], results["learned"])
        ]
        lines += [
            "",
            "Sinusoidal minus learned, seed by seed: accuracy "
            + ", ".join(f"{a:+.3f}" for a, _ in pairs)
            + "; macro-F1 "
            + ", ".join(f"{f:+.3f}" for _, f in pairs)
            + ".",
        ]
    maxlen = c["maxlen"]
    some = next(iter(results.values()))[0]["longer"]["wires"]
    lines += [
        "",
        f"Test wires longer than {maxlen} tokens ({some} of them): both models trained on at most "
        f"{maxlen} tokens. The sinusoidal model's weights in a model whose table has {2 * maxlen} rows "
        "(a learned table has no rows for positions it was not trained on).",
        "",
        "| model | tokens read | seeds | accuracy | macro-F1 |",
        "|---|---|---|---|---|",
    ]
    for variant, key, label, tokens in [
        ("learned", "first maxlen", "learned", maxlen),
        ("sinusoidal", "stretched, first maxlen", "sinusoidal", maxlen),
        ("sinusoidal", "stretched, first 2 maxlen", "sinusoidal", 2 * maxlen),
    ]:
        rows = [r["longer"][key] for r in results.get(variant, []) if key in r["longer"]]
        if rows:
            lines.append(
                f"| {label} | first {tokens} | {len(rows)} | {mean_std([r['accuracy'] for r in rows])} | "
                f"{mean_std([r['macro_f1'] for r in rows])} |"
            )
    rows = results.get("sinusoidal", [])
    if rows:
        gains = [
            r["longer"]["stretched, first 2 maxlen"]["accuracy"]
            - r["longer"]["stretched, first maxlen"]["accuracy"]
            for r in rows
        ]
        lines += [
            "",
            f"Sinusoidal, reading {2 * maxlen} instead of {maxlen} tokens, seed by seed: accuracy "
            + ", ".join(f"{g:+.3f}" for g in gains)
            + ".",
        ]
    lines += ["", f"Wall time of the whole run: {total / 60:.1f} min." if total else note]
    return "\n".join(lines)


def main(argv=None):
    parser = training_arguments(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    parser.add_argument(
        "--output",
        default=None,
        help="where to write the table (default results/positions.md; none with --quick)",
    )
    parser.add_argument(
        "--from-log",
        default=None,
        help="render the table from an earlier run's stderr (no training)",
    )
    parser.add_argument("--child", default=None, choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.epochs is None:
        args.epochs = 1 if args.quick else 10
    if args.seeds < 1:
        parser.error(f"--seeds {args.seeds}: expected at least 1")
    if args.child:
        args.variant = args.child
        child(args)
        return

    results = {variant: [] for variant in VARIANTS}
    total, note = None, ""
    if args.from_log:
        results, note = rows_from_log(args.from_log, "variant", VARIANTS)
    else:
        started = time.perf_counter()
        for seed in [0] if args.quick else range(args.seeds):
            for variant in VARIANTS:
                results[variant].append(run_child(variant, seed, args))
        total = time.perf_counter() - started
    results = {v: rows for v, rows in results.items() if rows}
    if not results:
        raise SystemExit(f"no finished run in {args.from_log}: nothing to report")
    output = args.output or (
        None if args.quick else os.path.join(ROOT, "benchmarks", "results", "positions.md")
    )
    write_report(
        output,
        "Reuters-46: learned or sinusoidal positions (Lab 2, section 10)"
        + (" (--quick)" if args.quick else ""),
        render(results, args, total, note),
    )


if __name__ == "__main__":
    main()
