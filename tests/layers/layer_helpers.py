"""Helpers shared by the layer tests (imported as ``layer_helpers``; pytest puts tests/ on
sys.path). The checks every layer gets are in harness.py."""

import numpy as np

from lablib import graphs


def random_graph(rng, num_nodes, num_features=3, edge_probability=0.4):
    """Random directed graph without self loops: (x [n, F], edge_index [2, E])."""
    x = rng.normal(size=(num_nodes, num_features)).astype(np.float32)
    adjacency = rng.random((num_nodes, num_nodes)) < edge_probability
    np.fill_diagonal(adjacency, False)
    return x, graphs.adjacency_to_edge_index(adjacency.astype(np.float32))


def two_graphs(seed=0, num_features=3):
    """Two random graphs (5 and 3 nodes) as lists of node features and edge indices."""
    rng = np.random.default_rng(seed)
    g1 = random_graph(rng, 5, num_features)
    g2 = random_graph(rng, 3, num_features)
    return [g1[0], g2[0]], [g1[1], g2[1]]


def dense_inputs(seed=5, num_features=3, max_nodes=5):
    """Two random graphs as a dense batch, by call argument: x [2, 5, F], adjacency
    [2, 5, 5], mask [2, 5] (for a harness case's ``inputs``)."""
    x, adjacency, mask = graphs.dense_batch(*two_graphs(seed, num_features), max_nodes=max_nodes)
    return {"inputs": x, "adjacency": adjacency, "mask": mask}


def sparse_inputs(seed=5, num_features=3):
    """The same two graphs as a disjoint batch, by call argument: x [8, F], edge_index
    [2, E] (for a harness case's ``inputs``)."""
    x, edge_index, _ = graphs.disjoint_batch(*two_graphs(seed, num_features))
    return {"inputs": x, "edge_index": edge_index}
