"""Inputs and probe helpers shared by the public tests of the graph labs (Labs 3 and 4).

Not a lab (``known_labs`` only lists ``lab*.py``). The lab modules import it as
``lablib.grading.specs._graph_inputs``, so a probe that calls these helpers finds them in
the student's process too (lablib is installed there).

Conventions: node features are rows (``H`` is ``[N, F]``), ``A[v, u] = 1`` when ``u``
sends a message to ``v``. Every builder is deterministic (fixed seeds), so the probe and
the judge of a test rebuild the same inputs.
"""

from __future__ import annotations

import numpy as np


#: The course's example graph G: nodes A..F and its undirected edges.
NODES = ["A", "B", "C", "D", "E", "F"]
EDGES = [("A", "B"), ("B", "C"), ("C", "D"), ("B", "D"), ("D", "E"), ("D", "F"), ("E", "F")]


def course_graph():
    """The course's graph G as (H [6, 3], A [6, 6]): symmetric A, fixed features."""
    index = {name: i for i, name in enumerate(NODES)}
    adjacency = np.zeros((6, 6))
    for u, v in EDGES:
        adjacency[index[u], index[v]] = adjacency[index[v], index[u]] = 1.0
    features = np.array(
        [
            [1.0, 0.0, 2.0],
            [0.5, -1.0, 0.0],
            [0.0, 1.0, 1.0],
            [2.0, 0.5, -1.0],
            [-1.0, 0.0, 0.5],
            [0.0, -0.5, 1.5],
        ]
    )
    return features, adjacency


def graph_from_edges(num_nodes, edges, num_features, seed, directed=False):
    """(H [num_nodes, num_features] ~ N(0, 1) from ``seed``, A [num_nodes, num_nodes]).

    Args:
        num_nodes: number of nodes.
        edges: ``(u, v)`` pairs. Undirected: both ``A[u, v]`` and ``A[v, u]`` are set.
            Directed: ``(source, target)``, and ``A[target, source] = 1``.
        num_features: columns of ``H``.
        seed: seed of the features.
        directed: whether ``edges`` are directed.

    Example:
        >>> h, a = graph_from_edges(3, [(0, 1)], num_features=2, seed=0)
        >>> a[0, 1], a[1, 0], h.shape
        (1.0, 1.0, (3, 2))
    """
    rng = np.random.default_rng(seed)
    adjacency = np.zeros((num_nodes, num_nodes))
    for u, v in edges:
        if directed:
            adjacency[v, u] = 1.0
        else:
            adjacency[u, v] = adjacency[v, u] = 1.0
    return rng.normal(size=(num_nodes, num_features)), adjacency


def to_numpy(value):
    """A model's output (a tensor, or a one-element list of them) as a NumPy array."""
    value = value[0] if isinstance(value, (list, tuple)) and len(value) == 1 else value
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def seeded_model(builder, *args, **kwargs):
    """``builder(*args, **kwargs)`` after ``keras.utils.set_random_seed(0)`` (probe side)."""
    import keras

    keras.utils.set_random_seed(0)
    return builder(*args, **kwargs)
