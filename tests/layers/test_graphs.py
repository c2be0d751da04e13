"""Tests for lablib.graphs: dense and disjoint batches, edge-index conversions."""

import numpy as np
import pytest

from lablib import graphs


def _two_graphs():
    rng = np.random.default_rng(0)
    x1 = rng.normal(size=(3, 2))
    e1 = np.array([[0, 1, 2], [1, 2, 0]])  # 0->1, 1->2, 2->0
    x2 = rng.normal(size=(2, 2))
    e2 = np.array([[1], [0]])  # 1->0
    return [x1, x2], [e1, e2]


def test_dense_batch_layout():
    xs, es = _two_graphs()
    x, adjacency, mask = graphs.dense_batch(xs, es)
    assert x.shape == (2, 3, 2) and x.dtype == np.float32
    assert adjacency.shape == (2, 3, 3) and adjacency.dtype == np.float32
    assert mask.dtype == bool
    np.testing.assert_array_equal(mask, [[True, True, True], [True, True, False]])
    np.testing.assert_allclose(x[0], xs[0], rtol=1e-6)
    np.testing.assert_allclose(x[1, :2], xs[1], rtol=1e-6)
    assert np.all(x[1, 2] == 0)
    # adjacency[b, target, source] = 1
    expected0 = np.zeros((3, 3))
    expected0[1, 0] = expected0[2, 1] = expected0[0, 2] = 1
    np.testing.assert_array_equal(adjacency[0], expected0)
    expected1 = np.zeros((3, 3))
    expected1[0, 1] = 1
    np.testing.assert_array_equal(adjacency[1], expected1)
    assert np.trace(adjacency[0]) == 0  # no self loops added


def test_dense_batch_max_nodes():
    xs, es = _two_graphs()
    x, adjacency, mask = graphs.dense_batch(xs, es, max_nodes=5)
    assert x.shape == (2, 5, 2) and adjacency.shape == (2, 5, 5) and mask.sum() == 5
    with pytest.raises(ValueError, match=r"graph 0 has 3 nodes, more than max_nodes=2"):
        graphs.dense_batch(xs, es, max_nodes=2)


def test_disjoint_batch_offsets():
    xs, es = _two_graphs()
    x, edge_index, graph_ids = graphs.disjoint_batch(xs, es)
    assert x.shape == (5, 2) and x.dtype == np.float32
    assert edge_index.dtype == np.int32 and graph_ids.dtype == np.int32
    np.testing.assert_array_equal(edge_index, [[0, 1, 2, 4], [1, 2, 0, 3]])
    np.testing.assert_array_equal(graph_ids, [0, 0, 0, 1, 1])


def test_dense_and_disjoint_describe_same_graphs():
    xs, es = _two_graphs()
    _, adjacency, mask = graphs.dense_batch(xs, es)
    _, edge_index, graph_ids = graphs.disjoint_batch(xs, es)
    big = graphs.edge_index_to_adjacency(edge_index, 5)
    np.testing.assert_array_equal(big[:3, :3], adjacency[0])
    np.testing.assert_array_equal(big[3:, 3:], adjacency[1, :2, :2])
    assert big[:3, 3:].sum() == 0 and big[3:, :3].sum() == 0


def test_conversions_round_trip():
    edge_index = np.array([[0, 2, 1, 0], [1, 1, 0, 2]])
    adjacency = graphs.edge_index_to_adjacency(edge_index, 4)
    assert adjacency.shape == (4, 4) and adjacency[1, 0] == 1 and adjacency[0, 1] == 1
    back = graphs.adjacency_to_edge_index(adjacency)
    assert back.shape == (2, 4)
    assert {tuple(c) for c in back.T} == {tuple(c) for c in edge_index.T}
    np.testing.assert_array_equal(graphs.edge_index_to_adjacency(back, 4), adjacency)


def test_to_undirected_and_self_loops():
    edge_index = np.array([[0, 0, 1, 2, 2], [1, 1, 0, 2, 0]])
    undirected = graphs.to_undirected(edge_index)
    pairs = {tuple(c) for c in undirected.T}
    assert pairs == {(0, 1), (1, 0), (2, 2), (2, 0), (0, 2)}
    assert undirected.shape[1] == len(pairs)  # duplicates removed
    no_loops = graphs.remove_self_loops(edge_index)
    np.testing.assert_array_equal(no_loops, [[0, 0, 1, 2], [1, 1, 0, 0]])
    assert graphs.to_undirected(np.zeros((2, 0), dtype=np.int64)).shape == (2, 0)


def test_edge_features_in_both_batch_layouts():
    x1, e1 = np.ones((3, 2)), np.array([[0, 1, 2], [1, 2, 0]])
    x2, e2 = np.ones((2, 2)), np.zeros((2, 0), np.int64)  # a graph without edges
    x3, e3 = np.ones((2, 2)), np.array([[1], [0]])
    f1 = np.arange(6, dtype=np.float64).reshape(3, 2)
    f3 = np.array([[7, 8]])
    x, edge_index, graph_ids, f = graphs.disjoint_batch(
        [x1, x2, x3], [e1, e2, e3], edge_attr=[f1, np.zeros(0), f3]
    )
    assert f.dtype == np.float32 and f.shape == (4, 2)
    np.testing.assert_array_equal(f, [[0, 1], [2, 3], [4, 5], [7, 8]])  # aligned with edge_index
    np.testing.assert_array_equal(edge_index[:, 3], [6, 5])
    xd, adjacency, mask, fd = graphs.dense_batch(
        [x1, x2, x3], [e1, e2, e3], edge_attr=[f1, np.zeros((0, 2)), f3]
    )
    assert fd.shape == (3, 3, 3, 2) and fd.dtype == np.float32
    np.testing.assert_array_equal(fd[0, 1, 0], [0, 1])  # edge 0 -> 1 at [target, source]
    np.testing.assert_array_equal(fd[0, 0, 2], [4, 5])
    np.testing.assert_array_equal(fd[2, 0, 1], [7, 8])
    assert fd[adjacency == 0].sum() == 0 and not fd[1].any()
    # Named tuples whose length is set by the edge_attr argument alone.
    plain_disjoint, plain_dense = graphs.disjoint_batch([x1], [e1]), graphs.dense_batch([x1], [e1])
    assert isinstance(plain_disjoint, graphs.DisjointBatch) and len(plain_disjoint) == 3
    assert isinstance(plain_dense, graphs.DenseBatch) and len(plain_dense) == 3
    np.testing.assert_array_equal(plain_dense.adjacency, plain_dense[1])
    with_edges = graphs.disjoint_batch([x1], [e1], edge_attr=[f1])
    assert isinstance(with_edges, graphs.DisjointBatchWithEdges)
    np.testing.assert_array_equal(with_edges.edge_attr, f1.astype(np.float32))
    assert graphs.dense_batch([x1], [e1], edge_attr=[f1])._fields[-1] == "edge_attr"


def test_old_edge_attrs_name_warns_and_still_works():
    from lablib import LablibDeprecationWarning

    x1, e1 = np.ones((3, 2)), np.array([[0, 1, 2], [1, 2, 0]])
    f1 = np.arange(6, dtype=np.float32).reshape(3, 2)
    for function in (graphs.dense_batch, graphs.disjoint_batch):
        expected = function([x1], [e1], edge_attr=[f1])
        with pytest.warns(
            LablibDeprecationWarning, match=r"`edge_attrs` is deprecated .* use `edge_attr`"
        ):
            old = function([x1], [e1], edge_attrs=[f1])
        for got, want in zip(old, expected):
            np.testing.assert_array_equal(got, want)
        with pytest.raises(TypeError, match="got both `edge_attrs`"):
            function([x1], [e1], edge_attr=[f1], edge_attrs=[f1])
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            function([x1], [e1], edge_features=[f1])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: graphs.dense_batch([np.ones((2, 3))], [np.array([[0, 1]])]), r"shape \[2, E\]"),
        (
            lambda: graphs.dense_batch([np.ones((2, 3))], [np.array([[0, 1], [1, 0], [0, 0]])]),
            r"transpose",
        ),
        (
            lambda: graphs.dense_batch([np.ones((2, 3))], [np.array([[0], [2]])]),
            r"refers to node 2.*2 nodes",
        ),
        (
            lambda: graphs.dense_batch([np.ones((2, 3)), np.ones((2, 4))], [np.zeros((2, 0))] * 2),
            r"4 features.*3",
        ),
        (lambda: graphs.dense_batch([np.ones((2, 3))], []), r"1 node feature arrays but 0"),
        (lambda: graphs.dense_batch(np.ones((2, 3)), [np.zeros((2, 0))]), r"list with one"),
        (
            lambda: graphs.disjoint_batch([np.ones(3)], [np.zeros((2, 0))]),
            r"\[num_nodes, num_features\]",
        ),
        (lambda: graphs.disjoint_batch([np.ones((2, 3))], [np.array([[0.5], [1.0]])]), r"integer"),
        (lambda: graphs.edge_index_to_adjacency(np.array([[0], [3]]), 3), r"refers to node 3"),
        (lambda: graphs.adjacency_to_edge_index(np.ones((2, 3))), r"square"),
        (
            lambda: graphs.disjoint_batch(
                [np.ones((2, 3))], [np.array([[0], [1]])], edge_attr=np.ones((1, 2))
            ),
            r"edge_attr must be a list with one \[E_i, D\] array per graph",
        ),
        (
            lambda: graphs.disjoint_batch([np.ones((2, 3))], [np.array([[0], [1]])], edge_attr=[]),
            r"got 0 edge_attr arrays for 1 graphs",
        ),
        (
            lambda: graphs.disjoint_batch(
                [np.ones((2, 3))], [np.array([[0], [1]])], edge_attr=[np.ones((2, 2))]
            ),
            r"graph 0: edge_attr has 2 rows but edge_index has 1 edges",
        ),
        (
            lambda: graphs.dense_batch(
                [np.ones((2, 3))], [np.array([[0], [1]])], edge_attr=[np.ones(2)]
            ),
            r"graph 0: edge_attr must have shape \[num_edges, D\], got shape \[2\]",
        ),
        (
            lambda: graphs.dense_batch(
                [np.ones((2, 3))] * 2,
                [np.array([[0], [1]])] * 2,
                edge_attr=[np.ones((1, 2)), np.ones((1, 3))],
            ),
            r"graph 1 has 3 features per edge but graph 0 has 2",
        ),
        (
            lambda: graphs.dense_batch(
                [np.ones((2, 3))], [np.array([[0], [1]])], edge_attr=[np.array([["a", "b"]])]
            ),
            r"edge_attr must be numeric",
        ),
    ],
)
def test_errors_are_clear(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --------------------------------------------------------------------------- the layers' maths


def _np_segment_softmax(logits, segments, num_segments, mask):
    """Independent reference: one segment at a time."""
    out = np.zeros_like(logits, dtype=np.float64)
    for segment in range(num_segments):
        rows = (segments == segment) & mask
        if rows.any():
            values = np.exp(logits[rows] - logits[rows].max(axis=0))
            out[rows] = values / values.sum(axis=0)
    return out


def test_segment_softmax_matches_reference_and_masks():
    import tensorflow as tf

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(9, 2)).astype(np.float32) * 5
    segments = np.array([0, 0, 1, 1, 1, 3, 3, 2, 2])
    mask = np.array([True, True, True, False, True, False, False, True, True])
    alpha = graphs.segment_softmax(logits, segments, 4, mask=mask).numpy()
    np.testing.assert_allclose(alpha, _np_segment_softmax(logits, segments, 4, mask), atol=1e-6)
    assert np.all(alpha[~mask] == 0)
    np.testing.assert_array_equal(alpha[5:7], 0)  # segment 3 fully masked: zeros, no NaN
    # [E, 1] masks as well; no mask: every segment sums to 1
    same = graphs.segment_softmax(logits, segments, 4, mask=mask[:, None]).numpy()
    np.testing.assert_array_equal(same, alpha)
    full = graphs.segment_softmax(logits, segments, 4).numpy()
    np.testing.assert_allclose(
        tf.math.unsorted_segment_sum(full, segments, 4).numpy(), np.ones((4, 2)), atol=1e-6
    )
    # float16 logits: computed in float32, returned in float16, finite for large logits
    half = graphs.segment_softmax((logits * 1e3).astype(np.float16), segments, 4, mask=mask)
    assert half.dtype == tf.float16 and np.all(np.isfinite(half.numpy()))


def test_segment_softmax_gradients_finite_and_xla():
    import tensorflow as tf

    logits = tf.constant([[1.0], [2.0], [3.0]])
    segments, mask = tf.constant([0, 0, 1]), tf.constant([True, True, False])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        alpha = graphs.segment_softmax(logits, segments, 2, mask=mask)
        loss = tf.reduce_sum(alpha * tf.constant([[1.0], [3.0], [5.0]]))
    assert np.all(np.isfinite(tape.gradient(loss, logits).numpy()))
    compiled = tf.function(
        lambda l, s, m: graphs.segment_softmax(l, s, 2, mask=m), jit_compile=True
    )
    np.testing.assert_allclose(compiled(logits, segments, mask).numpy(), alpha.numpy(), atol=1e-6)


def _np_gcn_propagation(edge_index, num_nodes):
    """D^-1/2 (A + I) D^-1/2 as a dense matrix, input self loops replaced (Kipf & Welling)."""
    a = graphs.edge_index_to_adjacency(graphs.remove_self_loops(edge_index), num_nodes)
    a = a + np.eye(num_nodes)
    inv_sqrt = 1 / np.sqrt(a.sum(axis=1))
    return a * inv_sqrt[:, None] * inv_sqrt[None, :]


def test_gcn_norm_is_the_symmetric_normalisation():
    edge_index = np.array([[0, 1, 1, 2, 3, 2], [1, 0, 2, 3, 1, 2]])  # 2 -> 2 a self loop
    edges, weights = graphs.gcn_norm(edge_index, 5)  # node 4 isolated
    assert edges.shape == (2, 6 + 5) and weights.shape == (6 + 5,)
    np.testing.assert_array_equal(edges.numpy()[:, 6:], np.stack([np.arange(5)] * 2))
    propagation = np.zeros((5, 5))
    np.add.at(propagation, (edges.numpy()[1], edges.numpy()[0]), weights.numpy())
    np.testing.assert_allclose(propagation, _np_gcn_propagation(edge_index, 5), atol=1e-6)
    assert weights.numpy()[5] == 0  # the input's self loop, replaced by the added one
    # edge weights scale the edges (and the degrees)
    _, weighted = graphs.gcn_norm(np.array([[0], [1]]), 2, edge_weight=[3.0])
    np.testing.assert_allclose(weighted.numpy(), [3 / np.sqrt(4), 1.0, 1 / 4], atol=1e-6)


def test_gcn_norm_dense_matches_the_edge_list_and_masks_padding():
    edge_index = np.array([[0, 1, 1, 2, 3, 2], [1, 0, 2, 3, 1, 2]])
    adjacency = graphs.edge_index_to_adjacency(edge_index, 5)
    propagation = graphs.gcn_norm_dense(adjacency[None]).numpy()[0]
    np.testing.assert_allclose(propagation, _np_gcn_propagation(edge_index, 5), atol=1e-6)
    mask = np.array([[True, True, True, False, False]])
    masked = graphs.gcn_norm_dense(adjacency[None], mask).numpy()[0]
    np.testing.assert_array_equal(masked[3:], 0)
    np.testing.assert_array_equal(masked[:, 3:], 0)
    kept = graphs.edge_index_to_adjacency(np.array([[0, 1, 1], [1, 0, 2]]), 3)
    np.testing.assert_allclose(masked[:3, :3], graphs.gcn_norm_dense(kept).numpy(), atol=1e-6)
    assert np.all(np.isfinite(masked))


def test_graphs_imports_no_tensorflow():
    import subprocess
    import sys

    code = "import sys, lablib.graphs; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr[-2000:]
