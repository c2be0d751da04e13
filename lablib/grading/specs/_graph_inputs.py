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

from lablib.grading.spec import expect

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
        [[1.0, 0.0, 2.0], [0.5, -1.0, 0.0], [0.0, 1.0, 1.0],
         [2.0, 0.5, -1.0], [-1.0, 0.0, 0.5], [0.0, -0.5, 1.5]]
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


def training_probe(model, inputs, targets, steps=60):
    """Train ``model`` for ``steps`` batches on one batch; report losses and weight changes.

    Returns:
        ``{"losses": [float], "weights_changed": [bool per weight array],
        "num_trainable": int}``, the plain values :func:`judge_training` reads.
    """
    before = [np.array(w) for w in model.get_weights()]
    losses = []
    for _ in range(steps):
        out = model.train_on_batch(inputs, targets)
        losses.append(float(np.ravel(to_numpy(out))[0]))
    after = [np.array(w) for w in model.get_weights()]
    return {"losses": losses,
            "weights_changed": [bool(np.any(a != b)) for a, b in zip(after, before)],
            "num_trainable": len(model.trainable_weights)}


def judge_training(got, data):
    """Judge a :func:`training_probe` result: finite loss, every weight moves, and the
    mean of the last 5 losses is below 0.6 times the mean of the first 3.

    Args:
        got: the probe's dict.
        data: how the messages name the training data, e.g. ``"a tiny graph"``.
    """
    losses = np.asarray(got["losses"], float)
    expect(bool(np.all(np.isfinite(losses))), f"The training loss is not finite: {losses[:5]}")
    expect(got["num_trainable"] > 0, "The model has no trainable weights.")
    expect(all(got["weights_changed"]), f"{got['weights_changed'].count(False)} weight "
           f"arrays did not change during training (is every layer trainable?).")
    first, last = losses[:3].mean(), losses[-5:].mean()
    expect(last < 0.6 * first, f"The loss did not go down enough in {len(losses)} steps on "
           f"{data}: from {first:.3f} to {last:.3f} (expected below {0.6 * first:.3f}).")
