"""Node features as a ``tf.SparseTensor`` (Cora's bag of words) in the sparse layout."""

import numpy as np
import pytest
import tensorflow as tf

from lablib import graphs
from lablib.backend import keras
from lablib.data import load_cora
from lablib.layers import GraphAttention, GraphConv, SparseDropout
from harness import LayerCase, layer_tests


def sparse_graph(seed=0, num_nodes=12, num_features=20, density=0.2):
    rng = np.random.default_rng(seed)
    x = (rng.random((num_nodes, num_features)) < density) * rng.normal(
        size=(num_nodes, num_features)
    )
    x = x.astype(np.float32)
    x[3] = 0.0  # a node without any feature
    src = rng.integers(0, num_nodes, size=3 * num_nodes)
    dst = (src + rng.integers(1, num_nodes, size=3 * num_nodes)) % num_nodes
    edge_index = graphs.to_undirected(np.stack([src, dst])).astype(np.int32)
    return x, tf.sparse.from_dense(x), edge_index


LAYERS = [
    lambda: GraphConv(4, activation="relu"),
    lambda: GraphConv(30, normalization="mean"),  # units > features: aggregated first if dense
    lambda: GraphAttention(3, num_heads=2),
]


@pytest.mark.parametrize("make_layer", LAYERS, ids=["gcn", "mean_wide", "gat"])
@pytest.mark.parametrize("jit", [False, True], ids=["graph", "xla"])
def test_sparse_features_give_the_dense_results(make_layer, jit):
    dense, sparse, edge_index = sparse_graph()
    keras.utils.set_random_seed(0)
    layer = make_layer()

    def forward_and_gradients(x):
        with tf.GradientTape() as tape:
            out = layer(x, edge_index=edge_index)
            loss = tf.reduce_sum(out**2)
        return out, tape.gradient(loss, layer.trainable_variables)

    layer(dense, edge_index=edge_index)  # build
    want_out, want_grads = forward_and_gradients(tf.constant(dense))
    step = tf.function(forward_and_gradients, jit_compile=jit)
    got_out, got_grads = step(sparse)
    np.testing.assert_allclose(got_out.numpy(), want_out.numpy(), rtol=1e-5, atol=1e-5)
    for got, want in zip(got_grads, want_grads):
        got = tf.convert_to_tensor(got)  # IndexedSlices under XLA (a gather of kernel rows)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def test_sparse_dropout_drops_only_stored_values():
    dense, sparse, _ = sparse_graph(seed=1, num_nodes=200, num_features=100, density=0.05)
    layer = SparseDropout(0.5, seed=3)
    assert layer(sparse, training=False) is sparse
    dropped = layer(sparse, training=True)
    assert isinstance(dropped, tf.SparseTensor)
    np.testing.assert_array_equal(dropped.indices.numpy(), sparse.indices.numpy())
    before, after = sparse.values.numpy(), dropped.values.numpy()
    kept = after != 0
    np.testing.assert_allclose(
        after[kept], 2.0 * before[kept], rtol=1e-6
    )  # scaled by 1 / (1 - rate)
    assert 0.4 < 1.0 - kept.mean() < 0.6, kept.mean()  # ~1000 values: 0.5 +- 0.1 is > 6 sigma
    # dense inputs: ordinary dropout, zeros stay zeros
    out = layer(tf.constant(dense), training=True).numpy()
    assert out.shape == dense.shape and np.all(out[dense == 0] == 0)


# SparseDropout on dense inputs through the harness (tests/layers/harness.py): config,
# .keras saving, shapes, mixed precision and XLA, in both Keras modes.
CASES = [
    LayerCase(
        "sparse-dropout-dense-inputs",
        SparseDropout,
        {"rate": 0.3, "seed": 2, "name": "input_dropout"},
        {"inputs": np.random.default_rng(4).normal(size=(6, 5)).astype("float32")},
        (6, 5),
        0,
    ),
]
test_layer, test_layer_legacy = layer_tests(CASES)


def test_sparse_dropout_errors():
    with pytest.raises(ValueError, match="rate"):
        SparseDropout(1.0)


def test_sparse_features_in_the_dense_layout_are_refused():
    _, sparse, _ = sparse_graph()
    adjacency = np.zeros((1, 12, 12), np.float32)
    for layer in (GraphConv(4), GraphAttention(2)):
        with pytest.raises(ValueError, match="tf.SparseTensor need the sparse layout.*edge_index"):
            layer(sparse, adjacency=adjacency)
    cube = tf.sparse.from_dense(np.ones((2, 3, 4), np.float32))
    with pytest.raises(ValueError, match=r"2-D tf.SparseTensor \[V, F\]"):
        GraphConv(4)(cube, edge_index=np.zeros((2, 0), np.int32))


def test_load_cora_sparse_features(shared_data):
    dense = load_cora(shared_data, normalize_features=True)
    sparse = load_cora(shared_data, normalize_features=True, sparse_features=True)
    assert (
        isinstance(sparse.x, tf.SparseTensor)
        and sparse.sparse_features
        and not dense.sparse_features
    )
    assert sparse.num_nodes == 2708 and sparse.num_features == 1433
    assert int(tf.size(sparse.x.values)) == int(np.count_nonzero(dense.x))  # 1.3 % of the entries
    np.testing.assert_allclose(tf.sparse.to_dense(sparse.x).numpy(), dense.x, rtol=1e-6)
    # normalising after densifying or before gives the same rows
    late = load_cora(shared_data, sparse_features=True).normalize_features()
    np.testing.assert_allclose(tf.sparse.to_dense(late.x).numpy(), dense.x, rtol=1e-6)
    # a GCN reads the sparse features to the same logits as the dense ones
    keras.utils.set_random_seed(0)
    layer = GraphConv(7)
    np.testing.assert_allclose(
        layer(sparse.x, edge_index=sparse.edge_index).numpy(),
        layer(dense.x, edge_index=dense.edge_index).numpy(),
        rtol=1e-5,
        atol=1e-6,
    )
