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
    x, edge_index, graph_ids, f = graphs.disjoint_batch([x1, x2, x3], [e1, e2, e3],
                                                        edge_attr=[f1, np.zeros(0), f3])
    assert f.dtype == np.float32 and f.shape == (4, 2)
    np.testing.assert_array_equal(f, [[0, 1], [2, 3], [4, 5], [7, 8]])  # aligned with edge_index
    np.testing.assert_array_equal(edge_index[:, 3], [6, 5])
    xd, adjacency, mask, fd = graphs.dense_batch([x1, x2, x3], [e1, e2, e3],
                                                 edge_attr=[f1, np.zeros((0, 2)), f3])
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
        with pytest.warns(LablibDeprecationWarning, match=r"`edge_attrs` is deprecated .* use `edge_attr`"):
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
        (lambda: graphs.dense_batch([np.ones((2, 3))], [np.array([[0, 1], [1, 0], [0, 0]])]), r"transpose"),
        (lambda: graphs.dense_batch([np.ones((2, 3))], [np.array([[0], [2]])]), r"refers to node 2.*2 nodes"),
        (lambda: graphs.dense_batch([np.ones((2, 3)), np.ones((2, 4))], [np.zeros((2, 0))] * 2), r"4 features.*3"),
        (lambda: graphs.dense_batch([np.ones((2, 3))], []), r"1 node feature arrays but 0"),
        (lambda: graphs.dense_batch(np.ones((2, 3)), [np.zeros((2, 0))]), r"list with one"),
        (lambda: graphs.disjoint_batch([np.ones(3)], [np.zeros((2, 0))]), r"\[num_nodes, num_features\]"),
        (lambda: graphs.disjoint_batch([np.ones((2, 3))], [np.array([[0.5], [1.0]])]), r"integer"),
        (lambda: graphs.edge_index_to_adjacency(np.array([[0], [3]]), 3), r"refers to node 3"),
        (lambda: graphs.adjacency_to_edge_index(np.ones((2, 3))), r"square"),
        (lambda: graphs.disjoint_batch([np.ones((2, 3))], [np.array([[0], [1]])], edge_attr=np.ones((1, 2))),
         r"edge_attr must be a list with one \[E_i, D\] array per graph"),
        (lambda: graphs.disjoint_batch([np.ones((2, 3))], [np.array([[0], [1]])], edge_attr=[]),
         r"got 0 edge_attr arrays for 1 graphs"),
        (lambda: graphs.disjoint_batch([np.ones((2, 3))], [np.array([[0], [1]])], edge_attr=[np.ones((2, 2))]),
         r"graph 0: edge_attr has 2 rows but edge_index has 1 edges"),
        (lambda: graphs.dense_batch([np.ones((2, 3))], [np.array([[0], [1]])], edge_attr=[np.ones(2)]),
         r"graph 0: edge_attr must have shape \[num_edges, D\], got shape \[2\]"),
        (lambda: graphs.dense_batch([np.ones((2, 3))] * 2, [np.array([[0], [1]])] * 2,
                                    edge_attr=[np.ones((1, 2)), np.ones((1, 3))]),
         r"graph 1 has 3 features per edge but graph 0 has 2"),
        (lambda: graphs.dense_batch([np.ones((2, 3))], [np.array([[0], [1]])], edge_attr=[np.array([["a", "b"]])]),
         r"edge_attr must be numeric"),
    ],
)
def test_errors_are_clear(call, message):
    with pytest.raises(ValueError, match=message):
        call()
