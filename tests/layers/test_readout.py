"""Tests for lablib.layers.GraphReadout (dense with mask, disjoint with graph_ids).

Legacy (tf_keras) tests: ``TF_USE_LEGACY_KERAS=1 .venv/bin/pytest -q -m legacy
tests/layers/test_readout.py``.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lablib import graphs
from lablib.backend import get_keras
from lablib.layers import GraphConv, GraphReadout
from harness import LayerCase, layer_tests

keras = get_keras()
MODES = ["sum", "mean", "max"]
NUMPY = {"sum": np.sum, "mean": np.mean, "max": np.max}


def _graphs(seed=0, sizes=(4, 2, 3), num_features=3, shift=0.0):
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=(n, num_features)).astype(np.float32) + shift for n in sizes]
    es = [np.zeros((2, 0), np.int64) for _ in sizes]
    return xs, es


@pytest.mark.parametrize("mode", MODES)
def test_dense_and_disjoint_match_numpy(mode):
    # All real values negative: the max must still ignore the zero padding.
    xs, es = _graphs(shift=-10.0)
    expected = np.stack([NUMPY[mode](x, axis=0) for x in xs])
    x, _, mask = graphs.dense_batch(xs, es, max_nodes=6)
    layer = GraphReadout(mode)
    dense = layer(x, mask=mask).numpy()
    np.testing.assert_allclose(dense, expected, rtol=1e-5)
    xd, _, graph_ids = graphs.disjoint_batch(xs, es)
    np.testing.assert_allclose(layer(xd, graph_ids=graph_ids).numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(
        layer(xd, graph_ids=graph_ids, num_graphs=3).numpy(), expected, rtol=1e-5
    )


@pytest.mark.parametrize("mode", MODES)
def test_padding_values_never_reach_the_readout(mode):
    xs, es = _graphs(seed=1)
    x, _, mask = graphs.dense_batch(xs, es, max_nodes=6)
    reference = GraphReadout(mode)(x, mask=mask).numpy()
    noisy = x.copy()
    noisy[~mask] = np.random.default_rng(2).normal(size=noisy[~mask].shape) * 1e3
    np.testing.assert_allclose(GraphReadout(mode)(noisy, mask=mask).numpy(), reference, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_without_mask_all_nodes_count(mode):
    x = np.random.default_rng(3).normal(size=(2, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(GraphReadout(mode)(x).numpy(), NUMPY[mode](x, axis=1), rtol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_empty_graphs_read_out_zeros(mode):
    x = -np.ones((2, 3, 2), np.float32)
    mask = np.array([[True, False, False], [False, False, False]])
    out = GraphReadout(mode)(x, mask=mask).numpy()
    np.testing.assert_array_equal(out[1], [0, 0])
    np.testing.assert_array_equal(out[0], [-1, -1])
    # Disjoint: graph 1 has no nodes.
    out = GraphReadout(mode)(-np.ones((2, 2), np.float32), graph_ids=[0, 2], num_graphs=4).numpy()
    np.testing.assert_array_equal(out, [[-1, -1], [0, 0], [-1, -1], [0, 0]])


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), num_nodes=st.integers(1, 6))
def test_readout_is_invariant_to_node_order(seed, num_nodes):
    """Relabelling the nodes of a graph leaves a GraphConv + readout model unchanged."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_nodes, 3)).astype(np.float32)
    adjacency = (rng.random((num_nodes, num_nodes)) < 0.5).astype(np.float32)
    np.fill_diagonal(adjacency, 0)
    edge_index = graphs.adjacency_to_edge_index(adjacency)
    permutation = rng.permutation(num_nodes)
    x_new = np.empty_like(x)
    x_new[permutation] = x
    edge_new = permutation[edge_index]
    for readout in _READOUTS.values():
        h = _CONV(x, edge_index=edge_index)
        h_new = _CONV(x_new, edge_index=edge_new)
        ids = np.zeros(num_nodes, np.int32)
        np.testing.assert_allclose(
            readout(h_new, graph_ids=ids).numpy(), readout(h, graph_ids=ids).numpy(), atol=1e-5
        )
        dense = readout(_CONV(x[None], adjacency=adjacency[None])).numpy()
        np.testing.assert_allclose(dense, readout(h, graph_ids=ids).numpy(), atol=1e-5)


_CONV = GraphConv(4, activation="tanh")
_READOUTS = {mode: GraphReadout(mode) for mode in MODES}


def _case_inputs(layout, seed=4):
    xs, es = _graphs(seed=seed, shift=-3.0)
    if layout == "dense":
        x, _, mask = graphs.dense_batch(xs, es, max_nodes=5)
        return {"inputs": x, "mask": mask}
    x, _, graph_ids = graphs.disjoint_batch(xs, es)
    return {"inputs": x, "graph_ids": graph_ids}


# Config, .keras saving, shapes, mixed precision and XLA, in both Keras modes
# (tests/layers/harness.py); num_graphs given, as XLA needs it.
CASES = [
    LayerCase(
        f"{layout}-{mode}",
        GraphReadout,
        {"mode": mode},
        _case_inputs(layout),
        (3, 3),
        0,
        call_kwargs={} if layout == "dense" else {"num_graphs": 3},
    )
    for mode in MODES
    for layout in ("dense", "disjoint")
]
test_layer, test_layer_legacy = layer_tests(CASES)


def test_bad_arguments_and_inputs():
    with pytest.raises(ValueError, match=r"`mode` must be one of 'sum', 'mean', 'max', got 'avg'"):
        GraphReadout("avg")
    layer = GraphReadout("sum")
    with pytest.raises(
        ValueError, match=r"x must be a dense batch \[B, N, F\];.* Got shape \[4, 3\]"
    ):
        layer(np.ones((4, 3), np.float32))
    with pytest.raises(
        ValueError, match=r"x must be a disjoint batch \[V, F\];.* Got shape \[1, 4, 3\]"
    ):
        layer(np.ones((1, 4, 3), np.float32), graph_ids=np.zeros(4, np.int32))
    with pytest.raises(ValueError, match=r"graph_ids has 3 entries but x has 4 nodes"):
        layer(np.ones((4, 3), np.float32), graph_ids=np.zeros(3, np.int32))
    with pytest.raises(ValueError, match=r"graph_ids must be integers"):
        layer(np.ones((4, 3), np.float32), graph_ids=np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"got both `mask`"):
        layer(np.ones((4, 3), np.float32), mask=np.ones(4, bool), graph_ids=np.zeros(4, np.int32))
    with pytest.raises(ValueError, match=r"num_graphs must be a positive integer, got 0"):
        layer(np.ones((4, 3), np.float32), graph_ids=np.zeros(4, np.int32), num_graphs=0)
    with pytest.raises(ValueError, match=r"graph_ids holds 2, outside 0..1 for num_graphs=2"):
        layer(np.ones((3, 3), np.float32), graph_ids=np.array([0, 1, 2]), num_graphs=2)
    with pytest.raises(ValueError, match=r"`num_graphs` is for disjoint batches"):
        layer(np.ones((1, 4, 3), np.float32), num_graphs=2)
    with pytest.raises(ValueError, match=r"mask must have shape \[B, N\].* Got shape \[4\]"):
        layer(np.ones((1, 4, 3), np.float32), mask=np.ones(4, bool))


def test_compute_output_shape():
    """Keras asks the layer for its output shape (e.g. model.summary, compute_output_spec)."""
    layer = GraphReadout("mean")
    assert tuple(layer.compute_output_shape((None, 7, 5))) == (None, 5)
    assert tuple(layer.compute_output_shape((None, 5))) == (None, 5)
