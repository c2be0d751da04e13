"""Tests for lablib.layers.GraphAttention (dense and sparse batches).

Legacy (tf_keras) tests: ``TF_USE_LEGACY_KERAS=1 .venv/bin/pytest -q -m legacy
tests/layers/test_graph_attention.py``.
"""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from lablib import graphs
from lablib.backend import get_keras
from lablib.layers import GraphAttention
from harness import LayerCase, layer_tests
from layer_helpers import dense_inputs, random_graph, sparse_inputs, two_graphs

keras = get_keras()


# --------------------------------------------------------------------------- numbers


def test_matches_equations_computed_node_by_node():
    """z = xW; e_ij = LeakyReLU(a_t.z_i + a_s.z_j); alpha = softmax_j; h_i = sum alpha z_j."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    edge_index = np.array([[1, 2, 0, 3], [0, 0, 1, 1]])  # 2 and 3 receive nothing
    heads, units = 2, 2
    layer = GraphAttention(
        units, num_heads=heads, negative_slope=0.2, bias_initializer="random_normal"
    )
    out = layer(x, edge_index=edge_index).numpy()
    w = layer.kernel.numpy().reshape(3, heads, units)
    a_source, a_target, bias = (
        layer.attention_source.numpy(),
        layer.attention_target.numpy(),
        layer.bias.numpy(),
    )
    expected = np.zeros((4, heads * units))
    for i in range(4):
        senders = [int(s) for s, t in edge_index.T if t == i] + [i]
        for h in range(heads):
            z = {j: x[j] @ w[:, h] for j in senders}
            scores = {}
            for j in senders:
                e = a_target[h] @ z[i] + a_source[h] @ z[j]
                scores[j] = e if e > 0 else 0.2 * e
            total = sum(np.exp(s) for s in scores.values())
            mix = sum(np.exp(scores[j]) / total * z[j] for j in senders)
            expected[i, h * units : (h + 1) * units] = mix
    expected += bias
    np.testing.assert_allclose(out, expected, atol=1e-5)


@pytest.mark.parametrize("concat_heads", [True, False])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_dense_and_sparse_batches_agree(concat_heads, add_self_loops):
    xs, es = two_graphs(num_features=4)
    x, adjacency, mask = graphs.dense_batch(xs, es, max_nodes=7)
    xd, edge_index, _ = graphs.disjoint_batch(xs, es)
    layer = GraphAttention(
        3,
        num_heads=2,
        concat_heads=concat_heads,
        add_self_loops=add_self_loops,
        activation="elu",
        bias_initializer="ones",
    )
    dense = layer(x, adjacency=adjacency, mask=mask).numpy()
    sparse = layer(xd, edge_index=edge_index).numpy()
    width = 6 if concat_heads else 3
    assert dense.shape == (2, 7, width) and sparse.shape == (8, width)
    np.testing.assert_allclose(dense[mask], sparse, atol=1e-5)
    assert np.all(dense[~mask] == 0)


def test_attention_coefficients():
    xs, es = two_graphs(seed=1)
    x, adjacency, mask = graphs.dense_batch(xs, es, max_nodes=6)
    layer = GraphAttention(2, num_heads=3)
    out, alpha = layer(x, adjacency=adjacency, mask=mask, return_attention_scores=True)
    alpha = alpha.numpy()
    assert alpha.shape == (2, 3, 6, 6)
    allowed = (adjacency + np.eye(6)) * mask[:, :, None] * mask[:, None, :] > 0
    # Each real node's coefficients sum to 1 over its senders and itself, 0 elsewhere.
    np.testing.assert_allclose(alpha.sum(-1)[mask.repeat(3, 0).reshape(2, 3, 6)], 1.0, atol=1e-6)
    assert np.all(alpha[~np.broadcast_to(allowed[:, None], alpha.shape)] == 0)
    assert np.all(alpha > -1e-7)

    xd, edge_index, _ = graphs.disjoint_batch(xs, es)
    out_s, (index, alpha_s) = layer(xd, edge_index=edge_index, return_attention_scores=True)
    index = index.numpy()
    num_nodes, num_edges = xd.shape[0], edge_index.shape[1]
    assert index.shape == (2, num_edges + num_nodes)
    np.testing.assert_array_equal(index[:, :num_edges], edge_index)
    np.testing.assert_array_equal(index[:, num_edges:], np.stack([np.arange(num_nodes)] * 2))
    assert alpha_s.shape == (num_edges + num_nodes, 3)
    sums = tf.math.unsorted_segment_sum(alpha_s, index[1], num_nodes).numpy()
    np.testing.assert_allclose(sums, 1.0, atol=1e-6)
    np.testing.assert_allclose(out_s.numpy(), out.numpy()[mask], atol=1e-5)


def test_existing_self_loops_are_replaced():
    rng = np.random.default_rng(2)
    x, edge_index = random_graph(rng, 4)
    with_loops = np.concatenate([edge_index, [[1, 3], [1, 3]]], axis=1)
    layer = GraphAttention(2, num_heads=2)
    reference = layer(x, edge_index=edge_index).numpy()
    out, (_, alpha) = layer(x, edge_index=with_loops, return_attention_scores=True)
    np.testing.assert_allclose(out.numpy(), reference, atol=1e-6)
    assert np.all(alpha.numpy()[edge_index.shape[1] : edge_index.shape[1] + 2] == 0)
    a = graphs.edge_index_to_adjacency(with_loops, 4)[None]
    np.testing.assert_allclose(layer(x[None], adjacency=a).numpy()[0], reference, atol=1e-6)


def test_without_self_loops_an_isolated_node_gets_the_bias():
    x = np.random.default_rng(3).normal(size=(3, 2)).astype(np.float32)
    edge_index = np.array([[0], [1]])  # only 0 -> 1
    layer = GraphAttention(2, add_self_loops=False, bias_initializer="random_normal")
    out = layer(x, edge_index=edge_index).numpy()
    np.testing.assert_allclose(out[[0, 2]], np.stack([layer.bias.numpy()] * 2), atol=1e-6)
    np.testing.assert_allclose(out[1], x[0] @ layer.kernel.numpy() + layer.bias.numpy(), atol=1e-5)


@pytest.mark.parametrize("concat_heads", [True, False])
def test_padding_nodes_change_nothing(concat_heads):
    xs, es = two_graphs(seed=3)
    x, adjacency, mask = graphs.dense_batch(xs, es)
    layer = GraphAttention(2, num_heads=2, concat_heads=concat_heads, bias_initializer="ones")
    reference, reference_alpha = layer(
        x, adjacency=adjacency, mask=mask, return_attention_scores=True
    )
    rng = np.random.default_rng(4)
    pad = 3
    n = x.shape[1] + pad
    x_pad = rng.normal(size=(2, n, 3)).astype(np.float32) * 100  # large random features
    x_pad[:, : x.shape[1]] = x
    a_pad = (rng.random((2, n, n)) < 0.5).astype(np.float32)  # random edges everywhere...
    a_pad[:, : x.shape[1], : x.shape[1]] = adjacency  # ...except among the real nodes
    mask_pad = np.pad(mask, ((0, 0), (0, pad)))
    padded, alpha = layer(x_pad, adjacency=a_pad, mask=mask_pad, return_attention_scores=True)
    padded, alpha = padded.numpy(), alpha.numpy()
    np.testing.assert_allclose(padded[:, : x.shape[1]][mask], reference.numpy()[mask], atol=1e-5)
    assert np.all(padded[~mask_pad] == 0)
    # Padding nodes receive no attention and give none.
    assert np.all(alpha.transpose(0, 2, 3, 1)[~mask_pad] == 0)
    assert np.all(alpha.transpose(0, 3, 2, 1)[~mask_pad] == 0)
    np.testing.assert_allclose(
        alpha[:, :, : x.shape[1], : x.shape[1]], reference_alpha.numpy(), atol=1e-6
    )


_PERMUTATION_LAYER = GraphAttention(2, num_heads=2, activation="elu")


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), num_nodes=st.integers(2, 6))
def test_relabelling_nodes_permutes_outputs(seed, num_nodes):
    rng = np.random.default_rng(seed)
    x, edge_index = random_graph(rng, num_nodes)
    permutation = rng.permutation(num_nodes)  # new label of old node i
    x_new = np.empty_like(x)
    x_new[permutation] = x
    edge_new = permutation[edge_index]
    layer = _PERMUTATION_LAYER
    out = layer(x, edge_index=edge_index).numpy()
    out_new = layer(x_new, edge_index=edge_new).numpy()
    np.testing.assert_allclose(out_new[permutation], out, atol=1e-5)
    a = graphs.edge_index_to_adjacency(edge_new, num_nodes)[None]
    np.testing.assert_allclose(
        layer(x_new[None], adjacency=a).numpy()[0][permutation], out, atol=1e-5
    )


def _with_dropout_free_twin(**dropout):
    """Two graphs (disjoint and dense), a layer with ``dropout`` and a twin without it, same weights."""
    xs, es = two_graphs(seed=5)
    xd, edge_index, _ = graphs.disjoint_batch(xs, es)
    dense = graphs.dense_batch(xs, es)
    layer = GraphAttention(3, num_heads=2, **dropout)
    plain = GraphAttention(3, num_heads=2)
    plain.build(xd.shape)
    layer.build(xd.shape)
    plain.set_weights(layer.get_weights())
    return layer, plain, xd, edge_index, dense


def test_attention_dropout_only_in_training():
    layer, plain, xd, edge_index, (x, adjacency, mask) = _with_dropout_free_twin(
        attention_dropout=0.5
    )
    inference = layer(xd, edge_index=edge_index, training=False).numpy()
    np.testing.assert_allclose(inference, plain(xd, edge_index=edge_index).numpy(), atol=1e-6)
    trained = layer(xd, edge_index=edge_index, training=True).numpy()
    assert not np.allclose(trained, inference)
    dense_trained = layer(x, adjacency=adjacency, mask=mask, training=True).numpy()
    assert not np.allclose(dense_trained[mask], inference)
    assert np.all(dense_trained[~mask] == 0)


def test_value_dropout_only_in_training():
    """value_dropout drops z = xW (the mixed values), not the scores: alpha is unchanged."""
    layer, plain, xd, edge_index, (x, adjacency, mask) = _with_dropout_free_twin(value_dropout=0.5)
    inference = layer(xd, edge_index=edge_index, training=False).numpy()
    np.testing.assert_allclose(inference, plain(xd, edge_index=edge_index).numpy(), atol=1e-6)
    trained, (_, alpha) = layer(
        xd, edge_index=edge_index, training=True, return_attention_scores=True
    )
    assert not np.allclose(trained.numpy(), inference)
    _, (_, plain_alpha) = plain(xd, edge_index=edge_index, return_attention_scores=True)
    np.testing.assert_allclose(alpha.numpy(), plain_alpha.numpy(), atol=1e-6)
    dense_trained = layer(x, adjacency=adjacency, mask=mask, training=True).numpy()
    assert not np.allclose(dense_trained[mask], inference)
    assert np.all(dense_trained[~mask] == 0)


def test_value_dropout_masks_each_node_once():
    """One mask per (node, head, unit), shared by all the node's out-edges, as the GAT
    authors' code drops z: a node that is the only sender of two nodes gives both the
    same output, each unit either 0 or its value scaled by 1 / (1 - rate)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 4)).astype(np.float32)
    edge_index = np.array([[0, 0, 1], [3, 4, 5]])  # node 0 is the only sender of 3 and 4
    layer = GraphAttention(5, num_heads=2, value_dropout=0.5, add_self_loops=False, use_bias=False)
    plain = GraphAttention(5, num_heads=2, add_self_loops=False, use_bias=False)
    layer.build(x.shape)
    plain.build(x.shape)
    plain.set_weights(layer.get_weights())
    expected = plain(x, edge_index=edge_index).numpy()[3:]
    trained = layer(x, edge_index=edge_index, training=True).numpy()[3:]
    np.testing.assert_array_equal(trained[0], trained[1])
    kept = trained != 0
    assert kept.any() and not kept.all()
    np.testing.assert_allclose(trained[kept], 2.0 * expected[kept], rtol=1e-5)


# --------------------------------------------------------------------------- Keras


def _edge_graphs(seed=0, edge_dim=2, num_features=3):
    """Two random graphs with random edge features: (xs, es, fs), one [E_b, D] per graph."""
    xs, es = two_graphs(seed=seed, num_features=num_features)
    rng = np.random.default_rng(seed + 100)
    fs = [rng.normal(size=(e.shape[1], edge_dim)).astype(np.float32) for e in es]
    return xs, es, fs


def _edge_inputs(layout, seed=7):
    xs, es, fs = _edge_graphs(seed=seed)
    if layout == "dense":
        x, adjacency, mask, f = graphs.dense_batch(xs, es, max_nodes=5, edge_attr=fs)
        return {"inputs": x, "adjacency": adjacency, "mask": mask, "edge_attr": f}
    x, edge_index, _, f = graphs.disjoint_batch(xs, es, edge_attr=fs)
    return {"inputs": x, "edge_index": edge_index, "edge_attr": f}


# Config, .keras saving, shapes, weights, training, mixed precision (scores too) and XLA,
# in both Keras modes (tests/layers/harness.py).
_OPTIONS = {
    "negative_slope": 0.1,
    "attention_dropout": 0.2,
    "value_dropout": 0.3,
    "activation": "elu",
    "bias_initializer": "random_normal",
}
CASES = [
    LayerCase(
        "dense-concat",
        GraphAttention,
        {"units": 3, "num_heads": 2, **_OPTIONS},
        dense_inputs(seed=6),
        (2, 5, 6),
        4,
    ),
    LayerCase(
        "dense-mean-scores",
        GraphAttention,
        {"units": 3, "num_heads": 2, "concat_heads": False, **_OPTIONS},
        dense_inputs(seed=8),
        (2, 5, 3),
        4,
        call_kwargs={"return_attention_scores": True},
    ),
    LayerCase(
        "sparse-scores",
        GraphAttention,
        {"units": 4, "num_heads": 2},
        sparse_inputs(seed=9),
        (8, 8),
        4,
        call_kwargs={"return_attention_scores": True},
    ),
    # Without self loops, a node's target score is added to every logit of its softmax: it
    # only matters through the LeakyReLU's kink, so it may get no gradient at all here.
    LayerCase(
        "sparse-no-self-loops",
        GraphAttention,
        {"units": 2, "add_self_loops": False, "use_bias": False},
        sparse_inputs(seed=7),
        (8, 2),
        3,
        still_weights=("attention_target",),
    ),
    LayerCase(
        "dense-edge-features",
        GraphAttention,
        {"units": 3, "num_heads": 2, "edge_dim": 2, "activation": "elu"},
        _edge_inputs("dense"),
        (2, 5, 6),
        6,
    ),
    LayerCase(
        "sparse-edge-features",
        GraphAttention,
        {"units": 4, "num_heads": 2, "edge_dim": 2, "concat_heads": False},
        _edge_inputs("sparse", seed=8),
        (8, 4),
        6,
    ),
]
test_layer, test_layer_legacy = layer_tests(CASES)


def test_weight_names():
    clone = GraphAttention(4, num_heads=3, concat_heads=True, name="gat")
    clone.build((None, 5))
    shapes = {w.name.split("/")[-1].split(":")[0]: tuple(w.shape) for w in clone.weights}
    assert shapes == {
        "kernel": (5, 12),
        "attention_source": (3, 4),
        "attention_target": (3, 4),
        "bias": (12,),
    }
    assert not np.allclose(clone.attention_source.numpy(), clone.attention_target.numpy())
    layer = GraphAttention(3, num_heads=2, edge_dim=2)
    layer.build((None, 3))
    shapes = {w.name.split("/")[-1].split(":")[0]: tuple(w.shape) for w in layer.weights}
    assert shapes == {
        "kernel": (3, 6),
        "attention_source": (2, 3),
        "attention_target": (2, 3),
        "edge_kernel": (2, 6),
        "attention_edge": (2, 3),
        "bias": (6,),
    }


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(units=0), r"`units` must be a positive integer, got 0"),
        (dict(units=2, num_heads=0), r"`num_heads` must be a positive integer, got 0"),
        (dict(units=2, attention_dropout=1.5), r"`attention_dropout` must be in \[0, 1\)"),
        (dict(units=2, value_dropout=1.0), r"`value_dropout` must be in \[0, 1\)"),
        (dict(units=2, value_dropout="x"), r"`value_dropout` must be a float in \[0, 1\)"),
        (dict(units=2, negative_slope="x"), r"`negative_slope` must be a number"),
        (dict(units=2, negative_slope=-1), r"`negative_slope` must be >= 0"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GraphAttention(**kwargs)


def test_bad_inputs_are_explained():
    layer = GraphAttention(2)
    x3 = np.ones((1, 4, 3), np.float32)
    x2 = np.ones((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"GraphAttention needs the graph's edges"):
        layer(x3)
    with pytest.raises(ValueError, match=r"got both"):
        layer(x3, adjacency=np.zeros((1, 4, 4)), edge_index=np.zeros((2, 1), np.int32))
    with pytest.raises(ValueError, match=r"edge_index must have shape \[2, E\].*got shape \[4\]"):
        layer(x2, edge_index=np.arange(4))
    with pytest.raises(ValueError, match=r"x must have shape \[B, N, F\], got shape \[4, 3\]"):
        layer(x2, adjacency=np.zeros((1, 4, 4)))


# --------------------------------------------------------------------------- edge features


def test_edge_features_match_equations_computed_node_by_node():
    """e_ij = LeakyReLU(a_t.z_i + a_s.z_j + a_e.(f_ij W_e)); the self loop i -> i has
    the mean features of i's incoming edges (zeros when it has none)."""
    rng = np.random.default_rng(11)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    edge_index = np.array([[1, 2, 0, 3], [0, 0, 1, 1]])  # 2 and 3 receive nothing
    f = rng.normal(size=(4, 2)).astype(np.float32)
    heads, units = 2, 2
    layer = GraphAttention(units, num_heads=heads, edge_dim=2, bias_initializer="random_normal")
    out = layer(x, edge_index=edge_index, edge_attr=f).numpy()
    w = layer.kernel.numpy().reshape(3, heads, units)
    w_edge = layer.edge_kernel.numpy().reshape(2, heads, units)
    a_s, a_t, a_e = (
        layer.attention_source.numpy(),
        layer.attention_target.numpy(),
        layer.attention_edge.numpy(),
    )
    expected = np.zeros((4, heads * units))
    for i in range(4):
        incoming = [(int(s), f[k]) for k, (s, t) in enumerate(edge_index.T) if t == i]
        loop = np.mean([feat for _, feat in incoming], axis=0) if incoming else np.zeros(2)
        senders = incoming + [(i, loop)]
        for h in range(heads):
            z = lambda j, h=h: x[j] @ w[:, h]  # noqa: E731
            scores = []
            for j, feat in senders:
                e = a_t[h] @ z(i) + a_s[h] @ z(j) + a_e[h] @ (feat @ w_edge[:, h])
                scores.append(e if e > 0 else 0.2 * e)
            weights = np.exp(scores) / np.sum(np.exp(scores))
            expected[i, h * units : (h + 1) * units] = sum(
                a * z(j) for a, (j, _) in zip(weights, senders)
            )
    np.testing.assert_allclose(out, expected + layer.bias.numpy(), atol=1e-5)
    # The edge features matter: other features, other output.
    assert not np.allclose(layer(x, edge_index=edge_index, edge_attr=f * 3).numpy(), out)


@pytest.mark.parametrize("concat_heads", [True, False])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_edge_features_dense_and_sparse_batches_agree(concat_heads, add_self_loops):
    xs, es, fs = _edge_graphs(seed=1, edge_dim=3, num_features=4)
    x, adjacency, mask, f_dense = graphs.dense_batch(xs, es, max_nodes=7, edge_attr=fs)
    xd, edge_index, _, f_sparse = graphs.disjoint_batch(xs, es, edge_attr=fs)
    layer = GraphAttention(
        3,
        num_heads=2,
        concat_heads=concat_heads,
        edge_dim=3,
        add_self_loops=add_self_loops,
        activation="elu",
    )
    dense, alpha = layer(
        x, adjacency=adjacency, mask=mask, edge_attr=f_dense, return_attention_scores=True
    )
    sparse, (index, alpha_s) = layer(
        xd, edge_index=edge_index, edge_attr=f_sparse, return_attention_scores=True
    )
    np.testing.assert_allclose(dense.numpy()[mask], sparse.numpy(), atol=1e-5)
    assert np.all(dense.numpy()[~mask] == 0)
    # The same coefficients in both layouts ([B, H, N, N] against one row per edge).
    offsets = np.repeat([0, xs[0].shape[0]], [xs[0].shape[0], xs[1].shape[0]])
    graph_of = np.repeat([0, 1], [xs[0].shape[0], xs[1].shape[0]])
    sources, targets = index.numpy()
    picked = alpha.numpy()[
        graph_of[targets], :, targets - offsets[targets], sources - offsets[sources]
    ]
    np.testing.assert_allclose(picked, alpha_s.numpy(), atol=1e-6)


def test_edge_features_of_padding_and_non_edges_change_nothing():
    xs, es, fs = _edge_graphs(seed=2)
    x, adjacency, mask, f = graphs.dense_batch(xs, es, edge_attr=fs)
    layer = GraphAttention(2, num_heads=2, edge_dim=2, bias_initializer="ones")
    reference = layer(x, adjacency=adjacency, mask=mask, edge_attr=f).numpy()
    rng = np.random.default_rng(5)
    pad = 3
    n = x.shape[1] + pad
    x_pad = np.zeros((2, n, 3), np.float32)
    x_pad[:, : x.shape[1]] = x
    a_pad = (rng.random((2, n, n)) < 0.5).astype(np.float32)
    a_pad[:, : x.shape[1], : x.shape[1]] = adjacency
    f_pad = rng.normal(size=(2, n, n, 2)).astype(np.float32) * 100  # garbage everywhere...
    real_edges = np.zeros((2, n, n), bool)
    real_edges[:, : x.shape[1], : x.shape[1]] = adjacency > 0
    f_pad[real_edges] = f[adjacency > 0]  # ...except on the real edges
    mask_pad = np.pad(mask, ((0, 0), (0, pad)))
    padded = layer(x_pad, adjacency=a_pad, mask=mask_pad, edge_attr=f_pad).numpy()
    np.testing.assert_allclose(padded[:, : x.shape[1]][mask], reference[mask], atol=1e-4)
    assert np.all(padded[~mask_pad] == 0)


def test_edge_features_of_input_self_loops_are_ignored():
    """An input self loop is replaced by the added one, whose features are the mean of
    the node's other incoming edges: the loop's own features change nothing."""
    rng = np.random.default_rng(6)
    x, edge_index = random_graph(rng, 4)
    f = rng.normal(size=(edge_index.shape[1], 2)).astype(np.float32)
    with_loops = np.concatenate([edge_index, [[1, 3], [1, 3]]], axis=1)
    f_loops = np.concatenate([f, rng.normal(size=(2, 2)).astype(np.float32) * 50])
    layer = GraphAttention(2, num_heads=2, edge_dim=2)
    reference = layer(x, edge_index=edge_index, edge_attr=f).numpy()
    np.testing.assert_allclose(
        layer(x, edge_index=with_loops, edge_attr=f_loops).numpy(), reference, atol=1e-5
    )
    _, a, _, f_dense = graphs.dense_batch([x], [with_loops], edge_attr=[f_loops])
    np.testing.assert_allclose(
        layer(x[None], adjacency=a, edge_attr=f_dense).numpy()[0], reference, atol=1e-5
    )


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**16), num_nodes=st.integers(2, 6))
def test_edge_features_relabelling_nodes_permutes_outputs(seed, num_nodes):
    rng = np.random.default_rng(seed)
    x, edge_index = random_graph(rng, num_nodes)
    f = rng.normal(size=(edge_index.shape[1], 2)).astype(np.float32)
    permutation = rng.permutation(num_nodes)
    x_new = np.empty_like(x)
    x_new[permutation] = x
    order = rng.permutation(edge_index.shape[1])  # edges listed in another order too
    edge_new, f_new = permutation[edge_index][:, order], f[order]
    layer = _EDGE_PERMUTATION_LAYER
    out = layer(x, edge_index=edge_index, edge_attr=f).numpy()
    np.testing.assert_allclose(
        layer(x_new, edge_index=edge_new, edge_attr=f_new).numpy()[permutation], out, atol=1e-5
    )
    _, a, _, f_dense = graphs.dense_batch([x_new], [edge_new], edge_attr=[f_new])
    np.testing.assert_allclose(
        layer(x_new[None], adjacency=a, edge_attr=f_dense).numpy()[0][permutation], out, atol=1e-5
    )


_EDGE_PERMUTATION_LAYER = GraphAttention(2, num_heads=2, edge_dim=2, activation="elu")


def test_edge_features_bad_inputs_are_explained():
    xs, es, fs = _edge_graphs(seed=9)
    xd, edge_index, _, fd = graphs.disjoint_batch(xs, es, edge_attr=fs)
    x, adjacency, mask, f = graphs.dense_batch(xs, es, edge_attr=fs)
    with pytest.raises(ValueError, match=r"`edge_dim` must be a positive integer, got 0"):
        GraphAttention(2, edge_dim=0)
    with pytest.raises(
        ValueError, match=r"got `edge_attr` but the layer was created without `edge_dim`"
    ):
        GraphAttention(2)(xd, edge_index=edge_index, edge_attr=fd)
    layer = GraphAttention(2, edge_dim=2)
    with pytest.raises(
        ValueError, match=r"created with edge_dim=2 and needs `edge_attr`.*\[E, 2\]"
    ):
        layer(xd, edge_index=edge_index)
    with pytest.raises(
        ValueError, match=r"edge_attr must have shape \[E, 2\].*got shape \[\d+, 3\]"
    ):
        layer(xd, edge_index=edge_index, edge_attr=np.ones((fd.shape[0], 3), np.float32))
    with pytest.raises(ValueError, match=r"edge_attr has 2 rows but edge_index has \d+ edges"):
        layer(xd, edge_index=edge_index, edge_attr=fd[:2])
    with pytest.raises(
        ValueError, match=r"edge_attr must have shape \[B, N, N, 2\].*got shape \[2, 5, 5\]"
    ):
        layer(x, adjacency=adjacency, mask=mask, edge_attr=f[..., 0])
    with pytest.raises(
        ValueError, match=r"edge_attr must have shape \[B, N, N, 2\].*got shape \[2, 4, 4, 2\]"
    ):
        layer(x, adjacency=adjacency, mask=mask, edge_attr=f[:, :4, :4])
