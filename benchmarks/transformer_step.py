"""Train-step time of transformer encoder blocks: lablib vs Keras 3 MHA vs tfm.

Times one training step (forward, backward, Adam update) of a model
``block -> GlobalAveragePooling1D -> Dense(1)`` on random data, for

(a) ``lablib.layers.TransformerEncoderBlock`` in Keras 3,
(b) a post-norm block built from ``keras.layers.MultiHeadAttention`` +
    ``LayerNormalization`` + ``Dense`` in Keras 3,
(c) ``tfm.nlp.layers.TransformerEncoderBlock`` in legacy mode (tf_keras),
(d) lablib's block in legacy mode,

all with the same configuration and post-norm. One Python process holds one Keras
mode, so (c) and (d) run in a child process with ``TF_USE_LEGACY_KERAS=1``. Each
row is the median of ``--steps`` steps after ``--warmup`` steps (the first ones
trace and compile); ratios are to (c) from the same run. Prints a markdown table.

Usage::

    nice .venv/bin/python benchmarks/transformer_step.py             # defaults below
    nice .venv/bin/python benchmarks/transformer_step.py --jit --steps 30
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=256, help="sequence length T")
    parser.add_argument("--dim", type=int, default=64, help="model size d")
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--inner", type=int, default=128, help="feed-forward inner size")
    parser.add_argument("--steps", type=int, default=20, help="timed steps (median)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed first steps")
    parser.add_argument("--jit", action="store_true", help="tf.function(jit_compile=True)")
    parser.add_argument("--child", choices=["legacy"], help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def time_steps(keras, tf, model, args):
    """Median and spread (ms) of a compiled train step of ``model``."""
    import numpy as np

    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(args.batch, args.length, args.dim)), tf.float32)
    y = tf.constant(rng.normal(size=(args.batch, 1)), tf.float32)
    optimizer = keras.optimizers.Adam(1e-3)
    variables = model.trainable_variables
    optimizer.build(variables)

    @tf.function(jit_compile=args.jit)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        gradients = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(gradients, variables))
        return loss

    for _ in range(args.warmup):
        train_step(x, y).numpy()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        train_step(x, y).numpy()  # .numpy() waits for the step to finish
        times.append(1000 * (time.perf_counter() - start))
    quartiles = statistics.quantiles(times, n=4) if len(times) > 1 else times * 3
    return {"median_ms": statistics.median(times), "q1_ms": quartiles[0], "q3_ms": quartiles[2]}


def wrap(keras, block, args):
    inputs = keras.Input(shape=(args.length, args.dim))
    x = block(inputs)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(inputs, keras.layers.Dense(1)(x))


def keras_mha_block(keras, args):
    """Post-norm encoder block from Keras 3's own layers (what a student would write)."""
    inputs = keras.Input(shape=(args.length, args.dim))
    attended = keras.layers.MultiHeadAttention(args.heads, key_dim=args.dim // args.heads)(inputs, inputs)
    z = keras.layers.LayerNormalization(epsilon=1e-12)(inputs + attended)
    hidden = keras.layers.Dense(args.inner, activation="relu")(z)
    out = keras.layers.LayerNormalization(epsilon=1e-12)(z + keras.layers.Dense(args.dim)(hidden))
    return keras.Model(inputs, out)


def block_kwargs(args):
    return dict(num_attention_heads=args.heads, inner_dim=args.inner, inner_activation="relu")


def run_keras3(args):
    import lablib

    lablib.use_keras3()
    import tensorflow as tf

    from lablib.backend import get_keras
    from lablib.layers.transformer import TransformerEncoderBlock

    keras = get_keras()
    return tf.__version__, keras.__version__, [
        ("(a) lablib TransformerEncoderBlock", f"Keras {keras.__version__}",
         time_steps(keras, tf, wrap(keras, TransformerEncoderBlock(**block_kwargs(args)), args), args)),
        ("(b) keras.layers.MultiHeadAttention + LayerNorm + Dense", f"Keras {keras.__version__}",
         time_steps(keras, tf, wrap(keras, keras_mha_block(keras, args), args), args)),
    ]


def run_legacy(args):
    import lablib

    lablib.use_legacy_keras()
    import tensorflow as tf

    from lablib.backend import get_keras, import_tfm
    from lablib.layers.transformer import TransformerEncoderBlock

    keras = get_keras()
    tfm = import_tfm()
    return [
        ("(c) tfm.nlp.layers.TransformerEncoderBlock", "tf_keras (legacy)",
         time_steps(keras, tf, wrap(keras, tfm.nlp.layers.TransformerEncoderBlock(**block_kwargs(args)), args), args)),
        ("(d) lablib TransformerEncoderBlock", "tf_keras (legacy)",
         time_steps(keras, tf, wrap(keras, TransformerEncoderBlock(**block_kwargs(args)), args), args)),
    ]


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.child == "legacy":
        print("RESULT " + json.dumps(run_legacy(args)))
        return 0
    os.environ["TF_USE_LEGACY_KERAS"] = "0"
    child_argv = [sys.executable, os.path.abspath(__file__), "--child", "legacy"] + [
        a for a in (argv if argv is not None else sys.argv[1:])
    ]
    child = subprocess.run(
        child_argv, cwd=ROOT, capture_output=True, text=True,
        env=dict(os.environ, TF_USE_LEGACY_KERAS="1", PYTHONPATH=ROOT),
    )
    lines = [line for line in child.stdout.splitlines() if line.startswith("RESULT ")]
    if child.returncode != 0 or not lines:
        sys.stderr.write(child.stdout[-3000:] + child.stderr[-3000:])
        raise SystemExit(f"legacy-mode child process failed (exit code {child.returncode})")
    legacy_rows = [tuple(row) for row in json.loads(lines[-1][len("RESULT "):])]
    tf_version, keras_version, rows = run_keras3(args)
    rows += legacy_rows
    reference = next(r for r in rows if r[0].startswith("(c)"))[2]["median_ms"]

    print(
        f"Train step, batch {args.batch}, T={args.length}, d={args.dim}, {args.heads} heads, "
        f"inner {args.inner}, post-norm, Adam; median of {args.steps} steps after "
        f"{args.warmup} warm-up steps; jit_compile={args.jit}; TensorFlow {tf_version}, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs.\n"
    )
    print("| block | Keras | median step (ms) | IQR (ms) | time / tfm |")
    print("|---|---|---:|---:|---:|")
    for name, mode, result in rows:
        print(
            f"| {name} | {mode} | {result['median_ms']:.1f} | "
            f"{result['q1_ms']:.1f}-{result['q3_ms']:.1f} | {result['median_ms'] / reference:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    raise SystemExit(main())
