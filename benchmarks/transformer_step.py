"""Train-step time of transformer encoder blocks: lablib vs Keras 3 MHA vs tfm.

Times one training step (forward, backward, Adam update) of a model
``block -> GlobalAveragePooling1D -> Dense(1)`` on random data, for

(a) ``lablib.layers.TransformerEncoderBlock`` in Keras 3,
(b) a post-norm block built from ``keras.layers.MultiHeadAttention`` +
    ``LayerNormalization`` + ``Dense`` in Keras 3,
(c) ``tfm.nlp.layers.TransformerEncoderBlock`` in legacy mode (tf_keras),
(d) lablib's block in legacy mode,

all with the same configuration and post-norm. One Python process holds one Keras
mode, so (c) and (d) run in a child process with ``TF_USE_LEGACY_KERAS=1``. The
measurement alternates between the two processes for ``--rounds`` rounds (so that a
burst of load on a shared machine hits all rows alike); each round times ``--steps``
steps after ``--warmup`` untimed ones (the first ones trace and compile). A row
reports the median and the minimum over all its timed steps; ratios are to (c)
from the same run. Prints a markdown table.

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
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two processes")
    parser.add_argument("--jit", action="store_true", help="tf.function(jit_compile=True)")
    parser.add_argument("--child", choices=["legacy"], help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def make_step(keras, tf, model, args):
    """A function that runs ``n`` compiled train steps of ``model``, returning ms each."""
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

    def run(n):
        times = []
        for _ in range(n):
            start = time.perf_counter()
            train_step(x, y).numpy()  # .numpy() waits for the step to finish
            times.append(1000 * (time.perf_counter() - start))
        return times

    run(args.warmup)
    return run


def wrap(keras, block, args):
    inputs = keras.Input(shape=(args.length, args.dim))
    x = block(inputs)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(inputs, keras.layers.Dense(1)(x))


def keras_mha_block(keras, args):
    """Post-norm encoder block from Keras 3's own layers (what a student would write)."""
    inputs = keras.Input(shape=(args.length, args.dim))
    attended = keras.layers.MultiHeadAttention(args.heads, key_dim=args.dim // args.heads)(
        inputs, inputs
    )
    z = keras.layers.LayerNormalization(epsilon=1e-12)(inputs + attended)
    hidden = keras.layers.Dense(args.inner, activation="relu")(z)
    out = keras.layers.LayerNormalization(epsilon=1e-12)(z + keras.layers.Dense(args.dim)(hidden))
    return keras.Model(inputs, out)


def block_kwargs(args):
    """The same block for tfm and lablib: the heads go first (tfm calls them
    num_attention_heads, lablib num_heads, as Keras)."""
    return dict(inner_dim=args.inner, inner_activation="relu")


def keras3_steps(args):
    import lablib

    lablib.use_keras3()
    import tensorflow as tf

    from lablib.backend import get_keras
    from lablib.layers.transformer import TransformerEncoderBlock

    keras = get_keras()
    mode = f"Keras {keras.__version__}"
    return tf.__version__, [
        (
            "(a) lablib TransformerEncoderBlock",
            mode,
            make_step(
                keras,
                tf,
                wrap(keras, TransformerEncoderBlock(args.heads, **block_kwargs(args)), args),
                args,
            ),
        ),
        (
            "(b) keras.layers.MultiHeadAttention + LayerNorm + Dense",
            mode,
            make_step(keras, tf, wrap(keras, keras_mha_block(keras, args), args), args),
        ),
    ]


def run_legacy(args):
    """Child process: time (c) and (d) once, return [(name, mode, times)]."""
    import lablib

    lablib.use_legacy_keras()
    import tensorflow as tf

    from lablib.backend import get_keras, import_tfm
    from lablib.layers.transformer import TransformerEncoderBlock

    keras = get_keras()
    tfm = import_tfm()
    blocks = [
        (
            "(c) tfm.nlp.layers.TransformerEncoderBlock",
            tfm.nlp.layers.TransformerEncoderBlock(args.heads, **block_kwargs(args)),
        ),
        (
            "(d) lablib TransformerEncoderBlock",
            TransformerEncoderBlock(args.heads, **block_kwargs(args)),
        ),
    ]
    steps = [(name, make_step(keras, tf, wrap(keras, block, args), args)) for name, block in blocks]
    return [(name, "tf_keras (legacy)", run(args.steps)) for name, run in steps]


def legacy_round(args, argv):
    child = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", "legacy"] + list(argv),
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(
            os.environ,
            TF_USE_LEGACY_KERAS="1",  # prepend: PYTHONPATH may find TF itself
            PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
        ),
    )
    lines = [line for line in child.stdout.splitlines() if line.startswith("RESULT ")]
    if child.returncode != 0 or not lines:
        sys.stderr.write(child.stdout[-3000:] + child.stderr[-3000:])
        raise SystemExit(f"legacy-mode child process failed (exit code {child.returncode})")
    return [tuple(row) for row in json.loads(lines[-1][len("RESULT ") :])]


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.child == "legacy":
        print("RESULT " + json.dumps(run_legacy(args)))
        return 0
    os.environ["TF_USE_LEGACY_KERAS"] = "0"
    tf_version, keras3 = keras3_steps(args)
    times, modes = {}, {}
    for _ in range(args.rounds):
        for name, mode, run in keras3:
            times.setdefault(name, []).extend(run(args.steps))
            modes[name] = mode
        for name, mode, measured in legacy_round(args, argv):
            times.setdefault(name, []).extend(measured)
            modes[name] = mode
    reference = statistics.median(times["(c) tfm.nlp.layers.TransformerEncoderBlock"])
    reference_min = min(times["(c) tfm.nlp.layers.TransformerEncoderBlock"])

    print(
        f"Train step, batch {args.batch}, T={args.length}, d={args.dim}, {args.heads} heads, "
        f"inner {args.inner}, post-norm, Adam; {args.rounds} rounds x {args.steps} steps "
        f"after {args.warmup} warm-up steps; jit_compile={args.jit}; TensorFlow "
        f"{tf_version}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} at the end.\n"
    )
    print("| block | Keras | median step (ms) | min step (ms) | median / tfm | min / tfm |")
    print("|---|---|---:|---:|---:|---:|")
    for name in sorted(times):
        median, fastest = statistics.median(times[name]), min(times[name])
        print(
            f"| {name} | {modes[name]} | {median:.1f} | {fastest:.1f} | "
            f"{median / reference:.2f} | {fastest / reference_min:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    raise SystemExit(main())
