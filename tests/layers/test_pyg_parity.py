"""Parity of lablib's graph layers with PyTorch Geometric, on random graphs.

Weights are copied from freshly initialised PyG layers (biases randomised) into the
lablib layers; outputs must agree to ``atol=1e-5`` in both the sparse (edge_index) and
the dense (adjacency) batch layout. Needs the ``pyg`` extra (``torch``,
``torch_geometric``); CI installs it, so a missing install fails here, loudly.

Run: ``.venv/bin/pytest -q tests/layers/test_pyg_parity.py -s`` (``-s`` shows the max
differences).
"""

import numpy as np
import pytest
import tensorflow as tf
import torch
from torch_geometric.nn import GATConv, GCNConv, SAGEConv

from lablib import graphs
from lablib.layers import GraphAttention, GraphConv

ATOL = 1e-5


def random_graph(seed, num_nodes=12, num_features=6, edge_probability=0.25):
    """x [n, F] float32 and a random directed edge_index without self loops or
    duplicates; node 0 receives no edges (checks the isolated-node case)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_nodes, num_features)).astype(np.float32)
    adjacency = (rng.random((num_nodes, num_nodes)) < edge_probability).astype(np.float32)
    np.fill_diagonal(adjacency, 0)
    adjacency[0, :] = 0  # adjacency[target, source]: nobody sends to node 0
    return x, graphs.adjacency_to_edge_index(adjacency), adjacency


def _torch(array):
    return torch.as_tensor(np.asarray(array))


def _numpy(tensor):
    return tensor.detach().cpu().numpy()


def _randomise_bias(module):
    with torch.no_grad():
        module.bias.normal_()


def _both_layouts(layer, x, edge_index, adjacency, **kwargs):
    sparse = layer(x, edge_index=edge_index.astype(np.int32), **kwargs)
    dense = layer(x[None], adjacency=adjacency[None], **kwargs)
    return np.asarray(sparse), np.asarray(dense)[0]


def _check(name, reference, *outputs):
    for layout, out in zip(("sparse", "dense"), outputs):
        difference = float(np.max(np.abs(out - reference)))
        print(f"{name} [{layout}]: max |lablib - PyG| = {difference:.2e}")
        np.testing.assert_allclose(out, reference, atol=ATOL, rtol=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_gcn_conv_matches(seed):
    torch.manual_seed(seed)
    x, edge_index, adjacency = random_graph(seed)
    reference_layer = GCNConv(x.shape[1], 5)
    _randomise_bias(reference_layer)
    reference = _numpy(reference_layer(_torch(x), _torch(edge_index)))

    layer = GraphConv(5, normalization="symmetric")
    layer.build(x.shape)
    layer.set_weights([_numpy(reference_layer.lin.weight).T, _numpy(reference_layer.bias)])
    _check(f"GCNConv seed={seed}", reference, *_both_layouts(layer, x, edge_index, adjacency))


@pytest.mark.parametrize("seed", [0, 1])
def test_sage_conv_mean_matches(seed):
    torch.manual_seed(seed)
    x, edge_index, adjacency = random_graph(seed)
    reference_layer = SAGEConv(x.shape[1], 5, aggr="mean")
    _randomise_bias(reference_layer.lin_l)
    reference = _numpy(reference_layer(_torch(x), _torch(edge_index)))

    layer = GraphConv(5, normalization="mean")
    layer.build(x.shape)
    layer.set_weights(
        [
            _numpy(reference_layer.lin_l.weight).T,  # neighbour kernel
            _numpy(reference_layer.lin_r.weight).T,  # self kernel
            _numpy(reference_layer.lin_l.bias),
        ]
    )
    assert np.abs(reference[0]).sum() > 0  # node 0 has no neighbours: self term + bias
    _check(
        f"SAGEConv(mean) seed={seed}", reference, *_both_layouts(layer, x, edge_index, adjacency)
    )


@pytest.mark.parametrize("concat_heads", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_gat_conv_matches(seed, concat_heads):
    torch.manual_seed(seed)
    x, edge_index, adjacency = random_graph(seed)
    heads, units = 3, 4
    reference_layer = GATConv(x.shape[1], units, heads=heads, concat=concat_heads)
    _randomise_bias(reference_layer)
    reference_out, (reference_index, reference_alpha) = reference_layer(
        _torch(x), _torch(edge_index), return_attention_weights=True
    )

    layer = GraphAttention(units, num_heads=heads, concat_heads=concat_heads)
    layer.build(x.shape)
    layer.set_weights(
        [
            _numpy(reference_layer.lin.weight).T,
            _numpy(reference_layer.att_src)[0],
            _numpy(reference_layer.att_dst)[0],
            _numpy(reference_layer.bias),
        ]
    )
    name = f"GATConv heads={heads} concat={concat_heads} seed={seed}"
    _check(name, _numpy(reference_out), *_both_layouts(layer, x, edge_index, adjacency))

    # Attention coefficients, aligned with the edge_index including self loops.
    _, (index_with_loops, alpha) = layer(
        x, edge_index=edge_index.astype(np.int32), return_attention_scores=True
    )
    np.testing.assert_array_equal(np.asarray(index_with_loops), _numpy(reference_index))
    difference = float(np.max(np.abs(np.asarray(alpha) - _numpy(reference_alpha))))
    print(f"{name} attention coefficients: max |lablib - PyG| = {difference:.2e}")
    np.testing.assert_allclose(np.asarray(alpha), _numpy(reference_alpha), atol=ATOL, rtol=0)
    # The dense layout gives the same coefficients in an [heads, N, N] matrix.
    _, dense_alpha = layer(x[None], adjacency=adjacency[None], return_attention_scores=True)
    sources, targets = _numpy(reference_index)
    np.testing.assert_allclose(
        np.asarray(dense_alpha)[0][:, targets, sources].T,
        _numpy(reference_alpha),
        atol=ATOL,
        rtol=0,
    )
    assert tf.is_tensor(alpha)


@pytest.mark.parametrize("concat_heads", [True, False])
def test_gat_conv_with_edge_features_matches(concat_heads):
    """GATConv(edge_dim=D): bond-like edge features in the scores; PyG fills the added
    self loops with the mean features of each node's incoming edges, as lablib does.
    The input has two self loops of its own (replaced by both libraries)."""
    seed = 3
    torch.manual_seed(seed)
    x, edge_index, adjacency = random_graph(seed)
    edge_index = np.concatenate([edge_index, [[2, 5], [2, 5]]], axis=1)
    adjacency[[2, 5], [2, 5]] = 1.0
    edge_dim, heads, units = 4, 2, 3
    edge_attr = (
        np.random.default_rng(seed).normal(size=(edge_index.shape[1], edge_dim)).astype(np.float32)
    )
    reference_layer = GATConv(
        x.shape[1], units, heads=heads, concat=concat_heads, edge_dim=edge_dim
    )
    _randomise_bias(reference_layer)
    reference = _numpy(reference_layer(_torch(x), _torch(edge_index), _torch(edge_attr)))

    layer = GraphAttention(units, num_heads=heads, concat_heads=concat_heads, edge_dim=edge_dim)
    layer.build(x.shape)
    layer.kernel.assign(_numpy(reference_layer.lin.weight).T)
    layer.attention_source.assign(_numpy(reference_layer.att_src)[0])
    layer.attention_target.assign(_numpy(reference_layer.att_dst)[0])
    layer.edge_kernel.assign(_numpy(reference_layer.lin_edge.weight).T)
    layer.attention_edge.assign(_numpy(reference_layer.att_edge)[0])
    layer.bias.assign(_numpy(reference_layer.bias))
    sparse = layer(x, edge_index=edge_index.astype(np.int32), edge_attr=edge_attr)
    _, _, _, dense_attr = graphs.dense_batch([x], [edge_index], edge_attr=[edge_attr])
    dense = layer(x[None], adjacency=adjacency[None], edge_attr=dense_attr)
    _check(
        f"GATConv edge_dim={edge_dim} concat={concat_heads}",
        reference,
        np.asarray(sparse),
        np.asarray(dense)[0],
    )
