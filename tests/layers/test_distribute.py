"""Training under ``tf.distribute``: two logical CPU devices stand in for two GPUs.

A ``MirroredStrategy`` over two logical CPU devices runs the code path of two GPUs
(replicas, per-replica inputs, gradient all-reduce). TensorFlow accepts logical devices
only before it initialises its devices, so the tests marked ``distributed`` run in a
child process started by :func:`test_two_replica_suite` with
``LABLIB_TEST_LOGICAL_CPUS=2`` (``tests/conftest.py`` splits the CPU there). The
unmarked tests here check the fixed-shape (XLA/TPU) batches on one device.

Tolerances: one SGD step under the strategy and on one device start from the same
weights and see the same global batch; they differ only in the order of float32 sums
(per replica, then across replicas), so losses agree to ``rtol=1e-5`` and updated
weights to ``atol=1e-5``.
"""

import functools
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from lablib import graphs
from lablib.backend import keras
from lablib.data import load_molecules
from lablib.layers import (
    GraphAttention,
    GraphConv,
    GraphReadout,
    TokenAndPositionEmbedding,
    TransformerEncoderBlock,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
LOSS_RTOL = 1e-5
WEIGHT_ATOL = 1e-5


# --------------------------------------------------------------------------- models


def transformer_model():
    """Lab 2's Keras 3 model in miniature: token ids -> encoder block -> pooled logits."""
    inputs = keras.Input(shape=(8,), dtype="int32")
    x = TokenAndPositionEmbedding(30, 8, 16)(inputs)
    x = TransformerEncoderBlock(2, 32, "relu")(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(inputs, keras.layers.Dense(2)(x))


def dense_graph_model(num_nodes, num_features):
    """GraphAttention -> GraphConv -> GraphReadout on a padded batch with its bool mask."""
    x_in = keras.Input(shape=(num_nodes, num_features))
    a_in = keras.Input(shape=(num_nodes, num_nodes))
    m_in = keras.Input(shape=(num_nodes,), dtype="bool")
    h = GraphAttention(4, num_heads=2, activation="elu")(x_in, adjacency=a_in, mask=m_in)
    h = GraphConv(8, activation="relu")(h, adjacency=a_in, mask=m_in)
    h = GraphReadout("mean")(h, mask=m_in)
    return keras.Model([x_in, a_in, m_in], keras.layers.Dense(1)(h))


class DisjointGraphModel(keras.Model):
    """The same layers on a disjoint batch ``(x, edge_index, graph_ids)``."""

    def __init__(self, num_graphs=None, **kwargs):
        super().__init__(**kwargs)
        self.num_graphs = num_graphs  # fixed shapes (XLA): graphs per replica batch
        self.attention = GraphAttention(4, num_heads=2, activation="elu")
        self.conv = GraphConv(8, activation="relu")
        self.readout = GraphReadout("mean")
        self.head = keras.layers.Dense(1)

    def call(self, inputs):
        x, edge_index, graph_ids = inputs
        h = self.attention(x, edge_index=edge_index)
        h = self.conv(h, edge_index=edge_index)
        h = self.readout(h, graph_ids=graph_ids, num_graphs=self.num_graphs)
        # [B, 1], not squeezed to [B]: with a rank-1 prediction Keras 3.15's "mse"
        # averages the batch to a scalar before its per-replica scaling, which then
        # does not happen, and under a strategy the gradients are R times too large.
        return self.head(h)


def small_graphs(count, seed=0, num_features=5, max_nodes=7):
    rng = np.random.default_rng(seed)
    xs, es = [], []
    for _ in range(count):
        n = int(rng.integers(2, max_nodes + 1))
        xs.append(rng.normal(size=(n, num_features)).astype(np.float32))
        src = rng.integers(0, n, size=2 * n)
        dst = (src + rng.integers(1, n, size=2 * n)) % n  # no self loops
        es.append(graphs.to_undirected(np.stack([src, dst])))
    return xs, es


# --------------------------------------------------------------------------- one device: fixed shapes


def test_padded_disjoint_batch_leaves_real_outputs_unchanged():
    xs, es = small_graphs(4, seed=1)
    x, e, ids = graphs.disjoint_batch(xs, es)
    px, pe, pids = graphs.disjoint_batch(xs, es, max_nodes=len(x) + 3, max_edges=e.shape[1] + 5)
    assert px.shape == (len(x) + 3, 5) and pe.shape == (2, e.shape[1] + 5)
    assert (pids[len(x) :] == -1).all() and (pe[:, e.shape[1] :] == len(x) + 2).all()
    keras.utils.set_random_seed(0)
    model = DisjointGraphModel()
    plain = model((x, e, ids)).numpy()
    padded = model((px, pe, pids)).numpy()
    np.testing.assert_allclose(padded, plain, rtol=1e-5, atol=1e-6)


def test_padded_disjoint_batch_errors():
    xs, es = small_graphs(2, seed=2)
    with pytest.raises(ValueError, match="both"):
        graphs.disjoint_batch(xs, es, max_nodes=50)
    total = sum(len(x) for x in xs)
    with pytest.raises(ValueError, match=f"at least max_nodes={total + 1}"):
        graphs.disjoint_batch(xs, es, max_nodes=total, max_edges=10_000)


def test_fixed_shape_disjoint_fit_under_jit_compile():
    """TPU-style batches (static shapes, drop_remainder) train an XLA-compiled step to the
    same weights as the unpadded batches without XLA."""
    esol = load_molecules("esol")[:96]
    max_nodes, max_edges = esol.disjoint_padding(32)
    fixed = esol.disjoint_dataset(32, drop_remainder=True, max_nodes=max_nodes, max_edges=max_edges)
    (x, e, ids), y = fixed.element_spec
    assert x.shape == (max_nodes, 37) and e.shape == (2, max_edges) and y.shape == (32,)
    weights, losses = {}, {}
    for name, dataset, jit, num_graphs in (
        ("plain", esol.disjoint_dataset(32), False, None),
        ("fixed", fixed, True, 32),
    ):
        keras.utils.set_random_seed(0)
        model = DisjointGraphModel(num_graphs=num_graphs)
        model.compile(keras.optimizers.SGD(0.01), "mse", jit_compile=jit)
        # (fit's per-epoch loss is not compared: Keras weights each step's loss by the
        # first input's length, the number of nodes, which padding makes constant.)
        losses[name] = model.fit(dataset, epochs=2, verbose=0).history["loss"]
        weights[name] = model.get_weights()
    for a, b in zip(weights["fixed"], weights["plain"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert losses["fixed"][1] < losses["fixed"][0]


def test_disjoint_padding_fits_every_batch():
    esol = load_molecules("esol")
    max_nodes, max_edges = esol.disjoint_padding(16)
    nodes, edges = (
        np.sort(esol.num_nodes)[::-1],
        np.sort([e.shape[1] for e in esol.edge_index])[::-1],
    )
    assert max_nodes == nodes[:16].sum() + 1 and max_edges == edges[:16].sum()
    with pytest.raises(ValueError, match="positive int"):
        esol.disjoint_padding(0)


# --------------------------------------------------------------------------- two replicas (child)


@pytest.mark.slow
@pytest.mark.integration  # the distributed tests, in a child process with two logical CPUs
def test_two_replica_suite():
    env = dict(os.environ, LABLIB_TEST_LOGICAL_CPUS="2")
    env.pop("TF_USE_LEGACY_KERAS", None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-m",
            "distributed",
            "-p",
            "no:cacheprovider",
            str(pathlib.Path(__file__).resolve()),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    tail = (result.stdout + result.stderr)[-6000:]
    print(tail)
    assert result.returncode == 0, f"two-replica tests failed:\n{tail}"
    assert " passed" in tail and "deselected" in tail


@functools.cache
def _strategy():
    # One strategy per process: a second MirroredStrategy over the same devices can
    # mix up the collective all-reduce of the first one's models (shape mismatch).
    devices = tf.config.list_logical_devices("CPU")
    assert len(devices) == 2, f"expected 2 logical CPU devices, got {devices}"
    return tf.distribute.MirroredStrategy([d.name for d in devices])


def _compare_one_step(
    build,
    loss,
    fit_single,
    fit_distributed,
    jit_compile=False,
    reported_loss=None,
    sample=None,
    build_mirrored=None,
):
    """One SGD step on one device and under the strategy, from the same weights: same
    loss, same updated weights. ``reported_loss(model)``: the loss that fit under the
    strategy reports, computed on one device before the step (default: the one-device
    fit's loss); ``sample``: inputs that build a subclassed model."""
    strategy = _strategy()
    keras.utils.set_random_seed(0)
    single = build()
    single.compile(keras.optimizers.SGD(0.1), loss, jit_compile=False)
    with strategy.scope():
        mirrored = (build_mirrored or build)()
        mirrored.compile(keras.optimizers.SGD(0.1), loss, jit_compile=jit_compile)
    if sample is not None:
        single(sample)
        with strategy.scope():
            mirrored(sample)
    assert single.weights and len(single.weights) == len(mirrored.weights)
    expected = None if reported_loss is None else reported_loss(single)
    mirrored.set_weights(single.get_weights())
    loss_single = fit_single(single).history["loss"][0]
    loss_mirrored = fit_distributed(mirrored, strategy).history["loss"][0]
    np.testing.assert_allclose(
        loss_mirrored, loss_single if expected is None else expected, rtol=LOSS_RTOL
    )
    for a, b in zip(mirrored.get_weights(), single.get_weights()):
        np.testing.assert_allclose(a, b, atol=WEIGHT_ATOL)
    return strategy


def _fit_moves_every_weight(strategy, build, loss, fit):
    keras.utils.set_random_seed(1)
    with strategy.scope():
        model = build()
        model.compile(keras.optimizers.Adam(0.01), loss)
    fit(model)  # builds the weights on the first step
    before = [w.copy() for w in model.get_weights()]
    fit(model)
    after = model.get_weights()
    unchanged = [w.path for w, b, a in zip(model.weights, before, after) if np.array_equal(b, a)]
    assert not unchanged, f"weights not trained under the strategy: {unchanged}"


@pytest.mark.distributed
def test_transformer_under_mirrored_strategy():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 30, size=(16, 8)).astype(np.int32)
    labels = (ids[:, 0] > 15).astype(np.int32)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    fit = lambda model, *_: model.fit(
        ids, labels, batch_size=16, epochs=1, shuffle=False, verbose=0
    )  # noqa: E731
    strategy = _compare_one_step(transformer_model, loss, fit, fit)
    _fit_moves_every_weight(
        strategy,
        transformer_model,
        loss,
        lambda m: m.fit(ids, labels, batch_size=8, epochs=2, verbose=0),
    )


@pytest.mark.distributed
def test_dense_graph_model_with_bool_mask_under_mirrored_strategy():
    xs, es = small_graphs(16, seed=3)
    x, a, m = graphs.dense_batch(xs, es, max_nodes=7)
    assert m.dtype == bool  # exactly as dense_batch returns it
    y = np.random.default_rng(4).normal(size=(16, 1)).astype(np.float32)
    build = lambda: dense_graph_model(7, 5)  # noqa: E731
    fit = lambda model, *_: model.fit(
        [x, a, m], y, batch_size=16, epochs=1, shuffle=False, verbose=0
    )  # noqa: E731
    strategy = _compare_one_step(build, "mse", fit, fit)
    _fit_moves_every_weight(
        strategy,
        build,
        "mse",
        lambda model: model.fit([x, a, m], y, batch_size=8, epochs=2, verbose=0),
    )


@pytest.mark.distributed
def test_disjoint_graph_model_under_mirrored_strategy():
    esol = load_molecules("esol")
    strategy = _strategy()
    # Each replica glues its own consecutive half of the global batch.
    (x, e, ids), y = next(iter(esol.disjoint_dataset(32, strategy=strategy)))
    x1, y1 = next(iter(esol.disjoint_dataset(32)))
    xs = strategy.experimental_local_results(x)
    es = strategy.experimental_local_results(e)
    np.testing.assert_array_equal(np.concatenate([v.numpy() for v in xs]), x1[0].numpy())
    np.testing.assert_array_equal(
        np.concatenate([v.numpy() for v in strategy.experimental_local_results(y)]), y1.numpy()
    )
    for xr, er in zip(xs, es):
        assert er.shape[0] == 2 and int(tf.reduce_max(er)) < xr.shape[0]
    assert (
        esol.disjoint_dataset(32, strategy=strategy).cardinality == 36
    )  # 1128 graphs: 35 + 1 smaller

    _compare_one_step(
        DisjointGraphModel,
        "mse",
        lambda model: model.fit(esol.disjoint_dataset(32), epochs=1, steps_per_epoch=1, verbose=0),
        lambda model, strategy: model.fit(
            esol.disjoint_dataset(32, strategy=strategy), epochs=1, steps_per_epoch=1, verbose=0
        ),
        reported_loss=lambda model: _node_weighted_loss(model, esol[:16], esol[16:32]),
        sample=x1,
    )
    subset = esol[:128]
    _fit_moves_every_weight(
        strategy,
        DisjointGraphModel,
        "mse",
        lambda model: model.fit(
            subset.disjoint_dataset(32, shuffle=True, seed=0, strategy=strategy),
            epochs=2,
            verbose=0,
        ),
    )


def _node_weighted_loss(model, *parts):
    """What Keras reports as the loss of one step whose replicas get ``parts``: it
    averages the replicas' losses weighted by the first input's length, here the number
    of nodes (the gradient step itself weights every replica equally: the same as one
    device on the whole batch when the replicas get equal numbers of graphs)."""
    losses, nodes = [], []
    for part in parts:
        (x, e, ids), y = next(iter(part.disjoint_dataset(len(part))))
        losses.append(float(tf.reduce_mean((model((x, e, ids))[:, 0] - y) ** 2)))
        nodes.append(int(x.shape[0]))
    return np.average(losses, weights=nodes)


@pytest.mark.distributed
def test_fixed_shape_disjoint_under_strategy():
    """The TPU input recipe (static shapes) on two replicas: same step as one device.

    Not under ``jit_compile=True`` here: XLA on two *logical* CPU devices of one
    process fails ("Trying to access resource ... located in device CPU:1 from device
    CPU:0"); the fixed-shape batches are tested under XLA on one device in
    :func:`test_fixed_shape_disjoint_fit_under_jit_compile`.
    """
    esol = load_molecules("esol")[:128]
    max_nodes, max_edges = esol.disjoint_padding(16)
    strategy = _strategy()
    fixed = esol.disjoint_dataset(
        32, strategy=strategy, drop_remainder=True, max_nodes=max_nodes, max_edges=max_edges
    )
    (x, e, ids), y = fixed.element_spec
    assert all(s.shape == (max_nodes, 37) for s in x._value_specs)
    assert all(s.shape == (16,) for s in y._value_specs)
    _compare_one_step(
        DisjointGraphModel,
        "mse",
        lambda model: model.fit(esol.disjoint_dataset(32), epochs=1, steps_per_epoch=1, verbose=0),
        lambda model, strategy: model.fit(fixed, epochs=1, steps_per_epoch=1, verbose=0),
        sample=next(iter(esol.disjoint_dataset(16)))[0],
        build_mirrored=lambda: DisjointGraphModel(num_graphs=16),  # static, as XLA needs
    )  # padded: every replica has max_nodes nodes, so fit reports a plain mean


@pytest.mark.distributed
def test_dense_dataset_under_strategy_and_errors():
    esol = load_molecules("esol")[:40]
    strategy = _strategy()
    dataset = esol.dense_dataset(16, strategy=strategy, max_nodes=esol.max_nodes)
    assert dataset.cardinality == 3  # 16 + 16 + 8 (4 per replica)
    (x, a, m), y = next(iter(dataset))
    assert [tuple(v.shape) for v in strategy.experimental_local_results(x)] == [
        (8, esol.max_nodes, 37)
    ] * 2
    assert all(v.dtype == tf.bool for v in strategy.experimental_local_results(m))
    with pytest.raises(ValueError, match="multiple of 2"):
        esol.disjoint_dataset(15, strategy=strategy)
