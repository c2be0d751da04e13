"""Tests for lablib.layers.GraphConv (dense and sparse batches, both normalisations).

Legacy (tf_keras) tests: ``TF_USE_LEGACY_KERAS=1 .venv/bin/pytest -q -m legacy
tests/layers/test_graph_conv.py``.
"""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from lablib import graphs
from lablib.backend import get_keras
from lablib.layers import GraphConv
from harness import LayerCase, layer_tests
from layer_helpers import dense_inputs, random_graph, sparse_inputs, two_graphs

keras = get_keras()
NORMALIZATIONS = ["symmetric", "mean"]


# --------------------------------------------------------------------------- numbers


def test_mean_form_equals_scalar_formula():
    """h_i' = mean_{j -> i} x_j W + x_i B + b, computed node by node in Python."""
    x = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0], [-2.0, 1.0]], dtype=np.float32)
    edge_index = np.array([[0, 2, 1, 0], [1, 1, 2, 2]])  # node 0 and 3 receive nothing
    layer = GraphConv(3, normalization="mean", bias_initializer="random_normal")
    out = layer(x, edge_index=edge_index).numpy()
    w, b_self, bias = (layer.kernel.numpy(), layer.self_kernel.numpy(), layer.bias.numpy())
    expected = np.zeros((4, 3))
    for i in range(4):
        senders = [int(s) for s, t in edge_index.T if t == i]
        neighbour_mean = sum(x[j] for j in senders) / len(senders) if senders else np.zeros(2)
        for k in range(3):
            expected[i, k] = (
                sum(neighbour_mean[f] * w[f, k] for f in range(2))
                + sum(x[i, f] * b_self[f, k] for f in range(2))
                + bias[k]
            )
    np.testing.assert_allclose(out, expected, atol=1e-5)
    # The same numbers from a dense batch.
    dense = layer(x[None], adjacency=graphs.edge_index_to_adjacency(edge_index, 4)[None])
    np.testing.assert_allclose(dense.numpy()[0], expected, atol=1e-5)


def test_symmetric_form_equals_matrix_formula():
    """act(D^-1/2 (A + I) D^-1/2 X W + b) with D counting incoming edges + self loop."""
    rng = np.random.default_rng(1)
    x, edge_index = random_graph(rng, 6, 4)
    adjacency = graphs.edge_index_to_adjacency(edge_index, 6)
    layer = GraphConv(5, activation="tanh", bias_initializer="random_normal")
    out = layer(x[None], adjacency=adjacency[None]).numpy()[0]
    a_hat = adjacency + np.eye(6)
    d_inv_sqrt = np.diag(1.0 / np.sqrt(a_hat.sum(axis=1)))
    expected = np.tanh(
        d_inv_sqrt @ a_hat @ d_inv_sqrt @ x @ layer.kernel.numpy() + layer.bias.numpy()
    )
    np.testing.assert_allclose(out, expected, atol=1e-5)
    sparse = layer(x, edge_index=edge_index).numpy()
    np.testing.assert_allclose(sparse, expected, atol=1e-5)


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize("units", [2, 7])  # fewer / more units than features (order of ops)
def test_dense_and_sparse_batches_agree(normalization, units):
    xs, es = two_graphs(num_features=4)
    x, adjacency, mask = graphs.dense_batch(xs, es, max_nodes=7)
    xd, edge_index, _ = graphs.disjoint_batch(xs, es)
    layer = GraphConv(units, normalization=normalization, activation="relu")
    dense = layer(x, adjacency=adjacency, mask=mask).numpy()
    sparse = layer(xd, edge_index=edge_index).numpy()
    assert dense.shape == (2, 7, units) and sparse.shape == (8, units)
    np.testing.assert_allclose(dense[mask], sparse, atol=1e-5)
    assert np.all(dense[~mask] == 0)


def test_existing_self_loops_are_not_counted_twice():
    rng = np.random.default_rng(2)
    x, edge_index = random_graph(rng, 4)
    with_loops = np.concatenate([edge_index, [[1, 3], [1, 3]]], axis=1)
    layer = GraphConv(2)
    np.testing.assert_allclose(
        layer(x, edge_index=with_loops).numpy(), layer(x, edge_index=edge_index).numpy(), atol=1e-6
    )
    a = graphs.edge_index_to_adjacency(with_loops, 4)[None]
    np.testing.assert_allclose(
        layer(x[None], adjacency=a).numpy()[0], layer(x, edge_index=edge_index).numpy(), atol=1e-6
    )


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_padding_nodes_change_nothing(normalization):
    xs, es = two_graphs(seed=3)
    x, adjacency, mask = graphs.dense_batch(xs, es)
    layer = GraphConv(4, normalization=normalization, bias_initializer="ones")
    reference = layer(x, adjacency=adjacency, mask=mask).numpy()
    rng = np.random.default_rng(4)
    pad = 3
    n = x.shape[1] + pad
    x_pad = rng.normal(size=(2, n, 3)).astype(np.float32) * 100
    x_pad[:, : x.shape[1]] = x
    x_pad[~np.pad(mask, ((0, 0), (0, pad)))] *= 1.0  # padding keeps its random values
    a_pad = (rng.random((2, n, n)) < 0.5).astype(np.float32)  # random edges everywhere...
    a_pad[:, : x.shape[1], : x.shape[1]] = adjacency  # ...except among the real nodes
    mask_pad = np.pad(mask, ((0, 0), (0, pad)))
    padded = layer(x_pad, adjacency=a_pad, mask=mask_pad).numpy()
    np.testing.assert_allclose(padded[:, : x.shape[1]][mask], reference[mask], atol=1e-5)
    assert np.all(padded[~mask_pad] == 0)


def _permutation_case(seed, num_nodes):
    rng = np.random.default_rng(seed)
    x, edge_index = random_graph(rng, num_nodes)
    permutation = rng.permutation(num_nodes)  # new label of old node i is permutation[i]
    x_new = np.empty_like(x)
    x_new[permutation] = x
    return x, edge_index, x_new, permutation[edge_index], permutation


_PERMUTATION_LAYERS = {n: GraphConv(3, normalization=n, activation="relu") for n in NORMALIZATIONS}


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), num_nodes=st.integers(2, 6))
def test_relabelling_nodes_permutes_outputs(seed, num_nodes):
    x, edge_index, x_new, edge_new, permutation = _permutation_case(seed, num_nodes)
    for layer in _PERMUTATION_LAYERS.values():
        out = layer(x, edge_index=edge_index).numpy()
        out_new = layer(x_new, edge_index=edge_new).numpy()
        np.testing.assert_allclose(out_new[permutation], out, atol=1e-5)
        a = graphs.edge_index_to_adjacency(edge_new, num_nodes)[None]
        dense_new = layer(x_new[None], adjacency=a).numpy()[0]
        np.testing.assert_allclose(dense_new[permutation], out, atol=1e-5)


# --------------------------------------------------------------------------- Keras (harness)

# Config, .keras saving, shapes, weights, training, mixed precision and XLA, in both Keras
# modes (tests/layers/harness.py), for each form in each layout.
CASES = [
    LayerCase(
        f"{layout}-{normalization}",
        GraphConv,
        {
            "units": 4,
            "normalization": normalization,
            "activation": "relu",
            "kernel_regularizer": "l2",
            "bias_initializer": "random_normal",
        },
        inputs,
        (2, 5, 4) if layout == "dense" else (8, 4),
        num_trainable_weights=2 if normalization == "symmetric" else 3,
    )
    for normalization in NORMALIZATIONS
    for layout, inputs in (("dense", dense_inputs()), ("sparse", sparse_inputs()))
] + [
    LayerCase(
        "dense-no-bias-wide",
        GraphConv,  # more units than features: aggregate first
        {"units": 7, "use_bias": False, "name": "gc"},
        dense_inputs(),
        (2, 5, 7),
        1,
    ),
]
test_layer, test_layer_legacy = layer_tests(CASES)


def test_weight_names():
    layer = GraphConv(6, normalization="mean", activation="elu", use_bias=False, name="gc")
    layer.build((None, 3))
    assert [w.name.split("/")[-1].split(":")[0] for w in layer.weights] == ["kernel", "self_kernel"]


def test_activity_regularizer_adds_a_loss_and_is_saved():
    """As keras.layers.Dense: a regularizer of the outputs, in the signature and the config."""
    from lablib.layers import GraphAttention

    xs, es = two_graphs(seed=2)
    x, adjacency, mask = graphs.dense_batch(xs, es)
    for layer in (
        GraphConv(3, activity_regularizer="l2"),
        GraphAttention(3, num_heads=2, activity_regularizer="l2"),
    ):
        plain = type(layer).from_config({**layer.get_config(), "activity_regularizer": None})
        out = layer(x, adjacency=adjacency, mask=mask)
        plain(x, adjacency=adjacency, mask=mask)
        assert len(layer.losses) == 1 and not plain.losses
        # tf_keras and Keras >= 3.14 divide an activity loss by the batch size (here 2
        # graphs); earlier Keras 3 releases (Colab's 3.10 to 3.13) do not.
        total = 0.01 * float(np.sum(np.square(out)))
        assert float(layer.losses[0]) in (
            pytest.approx(total, rel=1e-4),
            pytest.approx(total / out.shape[0], rel=1e-4),
        )
        config = layer.get_config()
        assert config["activity_regularizer"]["class_name"] in ("L2", "l2")
        assert type(layer).from_config(config).activity_regularizer is not None


def _count_ops(function, *args, op_type):
    graph = function.get_concrete_function(*args).graph
    return sum(op.type == op_type for op in graph.get_operations())


def test_layers_sharing_edge_index_normalise_once_per_trace():
    xs, es = two_graphs(seed=11)
    xd, edge_index, _ = graphs.disjoint_batch(xs, es)
    first, second = GraphConv(4, activation="relu"), GraphConv(2)
    two_layers = tf.function(lambda x, e: second(first(x, edge_index=e), edge_index=e))
    out = two_layers(xd, edge_index)
    eager = second(first(xd, edge_index=edge_index), edge_index=edge_index)
    np.testing.assert_allclose(out.numpy(), eager.numpy(), atol=1e-6)
    # One degree computation (a segment sum) for both layers, and one sparse matmul each.
    assert _count_ops(two_layers, xd, edge_index, op_type="UnsortedSegmentSum") == 1
    assert _count_ops(two_layers, xd, edge_index, op_type="SparseTensorDenseMatMul") == 2
    # Different edge tensors are normalised separately.
    other = tf.function(lambda x, e1, e2: second(first(x, edge_index=e1), edge_index=e2))
    assert _count_ops(other, xd, edge_index, edge_index, op_type="UnsortedSegmentSum") == 2


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_graph_captured_by_a_function_is_normalised_once(normalization):
    xs, es = two_graphs(seed=12)
    xd, edge_index, _ = graphs.disjoint_batch(xs, es)
    edges = tf.constant(edge_index)  # closed over, as in a full-graph training step
    layer = GraphConv(3, normalization=normalization)
    step = tf.function(lambda x: layer(x, edge_index=edges))
    eager = layer(xd, edge_index=edge_index).numpy()
    np.testing.assert_allclose(step(xd).numpy(), eager, atol=1e-6)
    np.testing.assert_allclose(
        step(2 * xd).numpy(), layer(2 * xd, edge_index=edge_index), atol=1e-6
    )
    assert _count_ops(step, xd, op_type="UnsortedSegmentSum") == 0  # precomputed
    jitted = tf.function(lambda x: layer(x, edge_index=edges), jit_compile=True)
    np.testing.assert_allclose(jitted(xd).numpy(), eager, atol=1e-5)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(units=0), r"`units` must be a positive integer, got 0"),
        (dict(units=2.5), r"`units` must be a positive integer, got 2.5"),
        (dict(units=3, normalization="sum"), r"'symmetric', 'mean', got 'sum'"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GraphConv(**kwargs)


def test_bad_inputs_are_explained():
    layer = GraphConv(2)
    x3 = np.ones((1, 4, 3), np.float32)
    x2 = np.ones((4, 3), np.float32)
    a = np.zeros((1, 4, 4), np.float32)
    e = np.array([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match=r"got neither `adjacency` nor `edge_index`"):
        layer(x3)
    with pytest.raises(ValueError, match=r"got both `adjacency` and `edge_index`"):
        layer(x3, adjacency=a, edge_index=e)
    with pytest.raises(ValueError, match=r"x must have shape \[B, N, F\], got shape \[4, 3\]"):
        layer(x2, adjacency=a)
    with pytest.raises(
        ValueError, match=r"adjacency must have shape \[B, N, N\].*got shape \[4, 4\]"
    ):
        layer(x3, adjacency=a[0])
    with pytest.raises(ValueError, match=r"does not match x shape"):
        layer(x3, adjacency=np.zeros((1, 5, 5), np.float32))
    with pytest.raises(ValueError, match=r"mask must have shape \[B, N\]"):
        layer(x3, adjacency=a, mask=np.ones((4,), bool))
    with pytest.raises(ValueError, match=r"x must have shape \[V, F\], got shape \[1, 4, 3\]"):
        layer(x3, edge_index=e)
    with pytest.raises(
        ValueError, match=r"edge_index must have shape \[2, E\].*\[3, 2\].*transpose"
    ):
        layer(x2, edge_index=np.array([[0, 1], [1, 2], [2, 3]]))
    with pytest.raises(ValueError, match=r"integer node indices"):
        layer(x2, edge_index=e.astype(np.float32))
    with pytest.raises(ValueError, match=r"`mask` is only for dense batches"):
        layer(x2, edge_index=e, mask=np.ones(4, bool))
    with pytest.raises(ValueError, match=r"edge_index refers to node 4, but x has 4 nodes"):
        layer(x2, edge_index=np.array([[0, 4], [1, 2]]))
    with pytest.raises(ValueError, match=r"built for 3 node features but got x with 5"):
        layer(np.ones((4, 5), np.float32), edge_index=e)


# --------------------------------------------------------------------------- tf_keras


def _kernels_start_different():
    layer = GraphConv(4, normalization="mean")
    layer.build((None, 4))
    return not np.allclose(layer.kernel.numpy(), layer.self_kernel.numpy())


def test_kernel_and_self_kernel_start_different():
    assert _kernels_start_different()


@pytest.mark.legacy
def test_legacy_kernel_and_self_kernel_start_different():
    assert _kernels_start_different()
