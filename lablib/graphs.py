"""Graph batches: padded dense batches and disjoint (sparse) batches, in NumPy.

lablib's graph layers accept two layouts of the same graphs (docs/conventions.md):

* **dense** (small graphs such as molecules): ``x [B, N, F]``, ``adjacency [B, N, N]``
  with ``adjacency[b, target, source] = 1`` and no self loops (the layers add them),
  ``mask [B, N]`` (False marks padding nodes). Memory grows with ``B * N**2``.
* **disjoint** (large graphs, or many graphs at speed): all graphs glued into one
  graph with ``x [V, F]``, ``edge_index [2, E]`` (row 0 source, row 1 target, as in
  PyTorch Geometric; messages flow source -> target) and ``graph_ids [V]``.

Edge features (bond types...) travel beside either layout when ``edge_attr`` (one
``[E_b, D]`` array per graph) is passed: ``[B, N, N, D]`` indexed like the adjacency, or
``[E, D]`` aligned with ``edge_index``; ``GraphAttention(edge_dim=D)`` reads them.

A batch is a named tuple (:class:`DenseBatch`, :class:`DisjointBatch`, and their
``...WithEdges`` forms when ``edge_attr`` is passed): unpack it, or read its fields by
name (``batch.adjacency``). The batch and conversion functions take and return NumPy arrays
(TensorFlow eager tensors are accepted too) and check their input, raising ``ValueError``
that says what was given and what was expected.

The maths the graph layers share is here too, as TensorFlow functions (as PyTorch
Geometric's ``utils``): :func:`segment_softmax` (graph attention's softmax over each node's
incoming edges), :func:`gcn_norm` and :func:`gcn_norm_dense` (the GCN's normalised
adjacency, ``D^-1/2 (A + I) D^-1/2``). TensorFlow is imported when one of them is called.

Example::

    import numpy as np
    from lablib import graphs

    x1 = np.ones((3, 4)); e1 = np.array([[0, 1], [1, 2]])      # 0 -> 1, 1 -> 2
    x2 = np.ones((2, 4)); e2 = np.array([[0], [1]])            # 0 -> 1
    x, adjacency, mask = graphs.dense_batch([x1, x2], [e1, e2])
    x.shape, adjacency.shape, mask.shape     # (2, 3, 4), (2, 3, 3), (2, 3)
    xs, edge_index, graph_ids = graphs.disjoint_batch([x1, x2], [e1, e2])
    edge_index                               # [[0, 1, 3], [1, 2, 4]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from lablib._deprecation import pop_renamed, refuse_unknown

__all__ = [
    "DenseBatch",
    "DenseBatchWithEdges",
    "DisjointBatch",
    "DisjointBatchWithEdges",
    "dense_batch",
    "disjoint_batch",
    "edge_index_to_adjacency",
    "adjacency_to_edge_index",
    "to_undirected",
    "remove_self_loops",
    "segment_softmax",
    "gcn_norm",
    "gcn_norm_dense",
]


# --------------------------------------------------------------------------- batch types


class DenseBatch(NamedTuple):
    """Padded graphs: ``x [B, N, F]``, ``adjacency [B, N, N]`` (``[b, target, source]``),
    ``mask [B, N]`` (True for real nodes)."""

    x: np.ndarray
    adjacency: np.ndarray
    mask: np.ndarray


class DenseBatchWithEdges(NamedTuple):
    """:class:`DenseBatch` and ``edge_attr [B, N, N, D]`` indexed like the adjacency."""

    x: np.ndarray
    adjacency: np.ndarray
    mask: np.ndarray
    edge_attr: np.ndarray


class DisjointBatch(NamedTuple):
    """Graphs glued into one: ``x [V, F]``, ``edge_index [2, E]``, ``graph_ids [V]``."""

    x: np.ndarray
    edge_index: np.ndarray
    graph_ids: np.ndarray


class DisjointBatchWithEdges(NamedTuple):
    """:class:`DisjointBatch` and ``edge_attr [E, D]`` aligned with ``edge_index``."""

    x: np.ndarray
    edge_index: np.ndarray
    graph_ids: np.ndarray
    edge_attr: np.ndarray


# --------------------------------------------------------------------------- checks


def _as_edge_index(edge_index, where: str) -> np.ndarray:
    """``edge_index`` as an integer array of shape [2, E], or a clear ValueError."""
    array = np.asarray(edge_index)
    if array.size == 0:
        return np.zeros((2, 0), dtype=array.dtype if array.dtype.kind in "iu" else np.int64)
    if array.ndim != 2 or array.shape[0] != 2:
        hint = ""
        if array.ndim == 2 and array.shape[1] == 2:
            hint = " It looks like [E, 2] (one row per edge): pass its transpose, edge_index.T."
        raise ValueError(
            f"{where}: edge_index must have shape [2, E] (row 0 source nodes, row 1 target "
            f"nodes), got shape {list(array.shape)}.{hint}"
        )
    if array.dtype.kind not in "iu":
        if array.dtype.kind == "f" and np.all(np.equal(np.mod(array, 1), 0)):
            array = array.astype(np.int64)
        else:
            raise ValueError(
                f"{where}: edge_index must hold integer node indices, got dtype {array.dtype}."
            )
    return array


def _check_indices(edge_index: np.ndarray, num_nodes: int, where: str) -> None:
    if edge_index.size == 0:
        return
    low, high = int(edge_index.min()), int(edge_index.max())
    if low < 0 or high >= num_nodes:
        raise ValueError(
            f"{where}: edge_index refers to node {low if low < 0 else high}, but the graph "
            f"has {num_nodes} nodes (valid indices are 0..{num_nodes - 1})."
        )


def _as_node_features(x, where: str) -> np.ndarray:
    array = np.asarray(x)
    if array.ndim != 2:
        raise ValueError(
            f"{where}: node features must have shape [num_nodes, num_features], got shape "
            f"{list(array.shape)}. For a single feature per node use x[:, None]."
        )
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise ValueError(f"{where}: node features must be numeric, got dtype {array.dtype}.")
    return array


def _check_lists(node_features, edge_indices, function: str):
    if isinstance(node_features, np.ndarray) or not isinstance(node_features, Sequence):
        raise ValueError(
            f"{function}: node_features must be a list with one [n_i, F] array per graph, "
            f"got {type(node_features).__name__}. For one graph, pass [x]."
        )
    if isinstance(edge_indices, np.ndarray) or not isinstance(edge_indices, Sequence):
        raise ValueError(
            f"{function}: edge_indices must be a list with one [2, E_i] array per graph, "
            f"got {type(edge_indices).__name__}. For one graph, pass [edge_index]."
        )
    if len(node_features) != len(edge_indices):
        raise ValueError(
            f"{function}: got {len(node_features)} node feature arrays but "
            f"{len(edge_indices)} edge_index arrays; pass one of each per graph."
        )
    if len(node_features) == 0:
        raise ValueError(f"{function}: got an empty list of graphs; pass at least one graph.")
    features, edges = [], []
    num_features = None
    for i, (x, e) in enumerate(zip(node_features, edge_indices)):
        x = _as_node_features(x, f"{function}, graph {i}")
        if num_features is None:
            num_features = x.shape[1]
        elif x.shape[1] != num_features:
            raise ValueError(
                f"{function}: graph {i} has {x.shape[1]} features per node but graph 0 has "
                f"{num_features}; all graphs in a batch need the same number of features."
            )
        e = _as_edge_index(e, f"{function}, graph {i}")
        _check_indices(e, x.shape[0], f"{function}, graph {i}")
        features.append(x)
        edges.append(e)
    return features, edges, num_features


def _check_edge_attrs(edge_attrs, edges, function: str):
    """One float32 ``[E_b, D]`` array per graph, aligned with its edge_index, or ValueError."""
    if isinstance(edge_attrs, np.ndarray) or not isinstance(edge_attrs, Sequence):
        raise ValueError(
            f"{function}: edge_attr must be a list with one [E_i, D] array per graph (row k: "
            f"features of edge k of edge_index), got {type(edge_attrs).__name__}. For one "
            f"graph, pass [edge_attr]."
        )
    if len(edge_attrs) != len(edges):
        raise ValueError(
            f"{function}: got {len(edge_attrs)} edge_attr arrays for {len(edges)} graphs; pass "
            f"one per graph."
        )
    arrays, num_features = [], None
    for i, (attr, e) in enumerate(zip(edge_attrs, edges)):
        array = np.asarray(attr)
        if array.size == 0 and e.shape[1] == 0:
            arrays.append(None)  # a graph without edges: any empty array will do
            continue
        if array.ndim != 2:
            raise ValueError(
                f"{function}, graph {i}: edge_attr must have shape [num_edges, D], got shape "
                f"{list(array.shape)}. For a single feature per edge use edge_attr[:, None]."
            )
        if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
            raise ValueError(
                f"{function}, graph {i}: edge_attr must be numeric, got dtype {array.dtype}."
            )
        if array.shape[0] != e.shape[1]:
            raise ValueError(
                f"{function}, graph {i}: edge_attr has {array.shape[0]} rows but edge_index "
                f"has {e.shape[1]} edges; pass one row of features per edge, in edge_index's "
                f"column order."
            )
        if num_features is None:
            num_features, first = array.shape[1], i
        elif array.shape[1] != num_features:
            raise ValueError(
                f"{function}: graph {i} has {array.shape[1]} features per edge but graph "
                f"{first} has {num_features}; all graphs in a batch need the same number of "
                f"edge features."
            )
        arrays.append(array.astype(np.float32))
    if num_features is None:
        shapes = {tuple(np.shape(a)) for a in edge_attrs}
        num_features = max((s[-1] for s in shapes if len(s) == 2), default=0)
    empty = np.zeros((0, num_features), dtype=np.float32)
    return [empty if a is None else a for a in arrays], num_features


# --------------------------------------------------------------------------- batches


def dense_batch(
    node_features, edge_indices, max_nodes: int | None = None, edge_attr=None, **deprecated
):
    """Pad a list of graphs into a dense batch for lablib's graph layers.

    Memory is ``B * max_nodes**2`` for the adjacency: fine for molecules (tens of
    nodes); for graphs with thousands of nodes use :func:`disjoint_batch`.

    Args:
        node_features: list of ``B`` arrays, graph ``b`` of shape ``[n_b, F]``.
        edge_indices: list of ``B`` integer arrays of shape ``[2, E_b]`` (row 0 source,
            row 1 target, node indices local to each graph). Repeated edges count once;
            self loops given here are kept (none are added: the layers add them).
        max_nodes: pad every graph to this many nodes (a fixed shape avoids retracing
            a ``tf.function`` for every batch). Default: the largest ``n_b``.
        edge_attr: optional list of ``B`` arrays ``[E_b, D]``, row ``k`` holding the
            features of edge ``k`` of graph ``b`` (e.g. ``MoleculeDataset.edge_attr``).
            (``edge_attrs``, its name before lablib 0.2, warns until 0.3.)

    Returns:
        a :class:`DenseBatch` ``(x, adjacency, mask)``: ``x [B, N, F]`` float32 (zeros at padding),
        ``adjacency [B, N, N]`` float32 with ``adjacency[b, target, source] = 1``,
        ``mask [B, N]`` bool (True for real nodes). With ``edge_attr``: a
        :class:`DenseBatchWithEdges` ``(x, adjacency, mask, edge_attr)``, ``edge_attr
        [B, N, N, D]`` float32 with
        ``edge_attr[b, target, source]`` the features of that edge (zeros where there
        is none; a repeated edge keeps its last row). Memory ``B * N**2 * D``.

    Raises:
        ValueError: mismatched lists, bad shapes, node indices out of range, or a graph
            with more than ``max_nodes`` nodes.

    Example::

        x, adjacency, mask = dense_batch([x1, x2], [e1, e2], max_nodes=32)
    """
    edge_attrs = _edge_attr_argument(edge_attr, deprecated, "dense_batch")
    features, edges, num_features = _check_lists(node_features, edge_indices, "dense_batch")
    if edge_attrs is not None:
        attrs, num_edge_features = _check_edge_attrs(edge_attrs, edges, "dense_batch")
    sizes = [x.shape[0] for x in features]
    if max_nodes is None:
        max_nodes = max(sizes)
    else:
        if isinstance(max_nodes, bool) or not isinstance(max_nodes, (int, np.integer)):
            raise ValueError(f"dense_batch: max_nodes must be an int or None, got {max_nodes!r}.")
        largest = int(np.argmax(sizes))
        if sizes[largest] > max_nodes:
            raise ValueError(
                f"dense_batch: graph {largest} has {sizes[largest]} nodes, more than "
                f"max_nodes={max_nodes}. Raise max_nodes to at least {max(sizes)} or drop "
                f"the larger graphs."
            )
    batch = len(features)
    x = np.zeros((batch, max_nodes, num_features), dtype=np.float32)
    adjacency = np.zeros((batch, max_nodes, max_nodes), dtype=np.float32)
    mask = np.zeros((batch, max_nodes), dtype=bool)
    for b, (features_b, edges_b) in enumerate(zip(features, edges)):
        n = features_b.shape[0]
        x[b, :n] = features_b
        mask[b, :n] = True
        adjacency[b, edges_b[1], edges_b[0]] = 1.0
    if edge_attrs is None:
        return DenseBatch(x, adjacency, mask)
    dense_attr = np.zeros((batch, max_nodes, max_nodes, num_edge_features), dtype=np.float32)
    for b, (edges_b, attrs_b) in enumerate(zip(edges, attrs)):
        dense_attr[b, edges_b[1], edges_b[0]] = attrs_b
    return DenseBatchWithEdges(x, adjacency, mask, dense_attr)


def _edge_attr_argument(edge_attr, deprecated: dict, function: str):
    """``edge_attr``, or its old name ``edge_attrs`` (warned); any other keyword: TypeError."""
    edge_attr = pop_renamed(deprecated, function, "edge_attrs", edge_attr, stacklevel=4)
    refuse_unknown(deprecated, f"{function}()")
    return edge_attr


def disjoint_batch(
    node_features, edge_indices, edge_attr=None, max_nodes=None, max_edges=None, **deprecated
):
    """Glue a list of graphs into one disjoint graph (the sparse batch layout).

    Node indices of graph ``b`` are shifted by the number of nodes in graphs
    ``0..b-1``, so no edge joins two graphs. Memory is linear in nodes + edges.

    Args:
        node_features: list of ``B`` arrays, graph ``b`` of shape ``[n_b, F]``.
        edge_indices: list of ``B`` integer arrays of shape ``[2, E_b]`` (row 0 source,
            row 1 target, local node indices).
        edge_attr: optional list of ``B`` arrays ``[E_b, D]``, row ``k`` holding the
            features of edge ``k`` of graph ``b`` (e.g. ``MoleculeDataset.edge_attr``).
            (``edge_attrs``, its name before lablib 0.2, warns until 0.3.)
        max_nodes, max_edges: pad the batch to exactly this many nodes and edges (both
            or neither), for fixed shapes under XLA (``jit_compile=True``, TPUs).
            Padding nodes have zero features and graph id ``-1``, which
            :class:`lablib.layers.GraphReadout` ignores; padding edges are self loops
            of the last padding node, which the graph layers ignore (they replace
            input self loops by their own), so no real node's output changes.
            ``max_nodes`` must leave room for at least one padding node when edges
            are padded.

    Returns:
        a :class:`DisjointBatch` ``(x, edge_index, graph_ids)``: ``x [V, F]`` float32 with ``V = sum n_b``,
        ``edge_index [2, E]`` int32 with offsets applied, ``graph_ids [V]`` int32
        (the graph each node belongs to, for :class:`lablib.layers.GraphReadout`).
        With ``edge_attr``: a :class:`DisjointBatchWithEdges` ``(x, edge_index,
        graph_ids, edge_attr)``, ``edge_attr [E, D]`` float32 aligned with the columns of ``edge_index``. Padded:
        ``V = max_nodes``, ``E = max_edges``.

    Raises:
        ValueError: mismatched lists, bad shapes, node indices out of range, or a batch
            larger than ``max_nodes`` / ``max_edges``.

    Example::

        x, edge_index, graph_ids = disjoint_batch([x1, x2], [e1, e2])
        x, edge_index, graph_ids = disjoint_batch([x1, x2], [e1, e2], max_nodes=8, max_edges=8)
    """
    edge_attrs = _edge_attr_argument(edge_attr, deprecated, "disjoint_batch")
    features, edges, _ = _check_lists(node_features, edge_indices, "disjoint_batch")
    if edge_attrs is not None:
        attrs, _ = _check_edge_attrs(edge_attrs, edges, "disjoint_batch")
    sizes = np.array([x.shape[0] for x in features], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    if sizes.sum() > np.iinfo(np.int32).max:
        raise ValueError(f"disjoint_batch: {sizes.sum()} nodes do not fit int32 indices.")
    x = np.concatenate(features, axis=0).astype(np.float32)
    edge_index = np.concatenate(
        [e.astype(np.int64) + offset for e, offset in zip(edges, offsets)], axis=1
    ).astype(np.int32)
    graph_ids = np.repeat(np.arange(len(features), dtype=np.int32), sizes)
    edge_attr = np.concatenate(attrs, axis=0) if edge_attrs is not None else None
    if max_nodes is not None or max_edges is not None:
        x, edge_index, graph_ids, edge_attr = _pad_disjoint(
            x, edge_index, graph_ids, edge_attr, max_nodes, max_edges
        )
    if edge_attrs is None:
        return DisjointBatch(x, edge_index, graph_ids)
    return DisjointBatchWithEdges(x, edge_index, graph_ids, edge_attr)


def _pad_disjoint(x, edge_index, graph_ids, edge_attr, max_nodes, max_edges):
    """Pad a disjoint batch to ``max_nodes`` nodes and ``max_edges`` edges (see disjoint_batch)."""
    for value in (max_nodes, max_edges):
        if value is None or isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(
                f"disjoint_batch: pass both max_nodes and max_edges as ints (a fixed shape "
                f"needs both), got max_nodes={max_nodes!r}, max_edges={max_edges!r}."
            )
    num_nodes, num_edges = x.shape[0], edge_index.shape[1]
    pad_edges = max_edges - num_edges
    if num_nodes > max_nodes or pad_edges < 0 or (pad_edges and num_nodes == max_nodes):
        raise ValueError(
            f"disjoint_batch: this batch has {num_nodes} nodes and {num_edges} edges, which "
            f"do not fit max_nodes={max_nodes}, max_edges={max_edges} (padding edges need "
            f"at least one padding node). Raise them to at least max_nodes={num_nodes + 1}, "
            f"max_edges={num_edges}, or use smaller batches."
        )
    pad_node = max_nodes - 1
    x = np.concatenate([x, np.zeros((max_nodes - num_nodes, x.shape[1]), x.dtype)])
    edge_index = np.concatenate(
        [edge_index, np.full((2, pad_edges), pad_node, dtype=edge_index.dtype)], axis=1
    )
    graph_ids = np.concatenate([graph_ids, np.full(max_nodes - num_nodes, -1, np.int32)])
    if edge_attr is not None:
        edge_attr = np.concatenate(
            [edge_attr, np.zeros((pad_edges, edge_attr.shape[1]), edge_attr.dtype)]
        )
    return x, edge_index, graph_ids, edge_attr


# --------------------------------------------------------------------------- conversions


def edge_index_to_adjacency(edge_index, num_nodes: int) -> np.ndarray:
    """Dense adjacency ``[N, N]`` float32 with ``a[target, source] = 1``.

    Args:
        edge_index: integer array ``[2, E]`` (row 0 source, row 1 target).
        num_nodes: ``N``, the number of nodes (isolated nodes included).

    Returns:
        ``[num_nodes, num_nodes]`` float32 array; repeated edges count once.

    Example::

        edge_index_to_adjacency(np.array([[0], [1]]), 2)   # [[0, 0], [1, 0]]
    """
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, (int, np.integer)) or num_nodes < 0:
        raise ValueError(
            f"edge_index_to_adjacency: num_nodes must be a non-negative int, got {num_nodes!r}."
        )
    edge_index = _as_edge_index(edge_index, "edge_index_to_adjacency")
    _check_indices(edge_index, int(num_nodes), "edge_index_to_adjacency")
    adjacency = np.zeros((num_nodes, num_nodes), dtype=np.float32)
    adjacency[edge_index[1], edge_index[0]] = 1.0
    return adjacency


def adjacency_to_edge_index(adjacency) -> np.ndarray:
    """Edge index ``[2, E]`` (row 0 source, row 1 target) of a dense ``[N, N]`` adjacency.

    The inverse of :func:`edge_index_to_adjacency`: every non-zero ``a[target, source]``
    becomes one edge. Edges are sorted by source, then target.

    Args:
        adjacency: square array ``[N, N]`` with ``adjacency[target, source] != 0`` for
            each edge ``source -> target``.

    Returns:
        int64 array ``[2, E]``.

    Example::

        adjacency_to_edge_index(np.array([[0, 0], [1, 0]]))   # [[0], [1]]
    """
    adjacency = np.asarray(adjacency)
    if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1]:
        raise ValueError(
            f"adjacency_to_edge_index: adjacency must be a square [N, N] array, got shape "
            f"{list(adjacency.shape)}. For a dense batch [B, N, N] convert one graph at a time."
        )
    sources, targets = np.nonzero(adjacency.T)
    return np.stack([sources, targets]).astype(np.int64)


def _unique_edges(edge_index: np.ndarray) -> np.ndarray:
    if edge_index.shape[1] == 0:
        return edge_index
    unique = np.unique(edge_index.T, axis=0)  # sorted by source, then target
    return np.ascontiguousarray(unique.T)


def to_undirected(edge_index) -> np.ndarray:
    """Add the reverse of every edge and remove duplicates.

    Args:
        edge_index: integer array ``[2, E]`` (row 0 source, row 1 target).

    Returns:
        integer array ``[2, E']`` (same dtype), sorted by source then target, in which
        ``j -> i`` is present whenever ``i -> j`` is.

    Example::

        to_undirected(np.array([[0, 1], [1, 0]]))   # [[0, 1], [1, 0]]
    """
    edge_index = _as_edge_index(edge_index, "to_undirected")
    both = np.concatenate([edge_index, edge_index[::-1]], axis=1)
    return _unique_edges(both)


def remove_self_loops(edge_index) -> np.ndarray:
    """Drop edges ``i -> i``, keeping the order of the other edges.

    Args:
        edge_index: integer array ``[2, E]`` (row 0 source, row 1 target).

    Returns:
        integer array ``[2, E']`` (same dtype) without self loops.

    Example::

        remove_self_loops(np.array([[0, 0], [0, 1]]))   # [[0], [1]]
    """
    edge_index = _as_edge_index(edge_index, "remove_self_loops")
    return edge_index[:, edge_index[0] != edge_index[1]]


# --------------------------------------------------------------------------- the layers' maths
# TensorFlow functions (imported when called, so that ``import lablib.graphs`` stays NumPy
# only), as PyTorch Geometric's ``utils.softmax`` and ``gcn_norm``: the graph layers call
# them, and they can be read, tested and reused alone.


def segment_softmax(logits, segment_ids, num_segments, mask=None):
    """Softmax within segments: ``alpha_k = exp(l_k) / sum_{j: s(j) = s(k)} exp(l_j)``.

    The softmax of graph attention over each target's incoming edges (``segment_ids`` =
    the edges' targets, ``edge_index[1]``), as PyTorch Geometric's ``utils.softmax``. It
    is computed stably (each segment's maximum is subtracted first) and in float32, also
    for float16 logits (mixed precision); the result has the dtype of ``logits``. Runs
    under ``tf.function(jit_compile=True)``.

    Args:
        logits: float tensor ``[E, ...]`` (e.g. ``[E, heads]``), one row per entry.
        segment_ids: int tensor ``[E]``, the segment of each row, in ``[0, num_segments)``.
        num_segments: number of segments (int or scalar int tensor), e.g. the number of
            nodes.
        mask: optional bool ``[E]`` or broadcastable to ``logits`` (``[E, 1]``): False
            entries get weight 0 and do not count in their segment's sum. A segment whose
            entries are all masked gets zeros, never NaN.

    Returns:
        Tensor shaped like ``logits``: in each segment, the weights of its entries sum
        to 1 (0 for a fully masked segment).

    Example:

    >>> from lablib.graphs import segment_softmax
    >>> alpha = segment_softmax([0.0, 0.0, 1.0, 5.0], [0, 0, 1, 2], num_segments=3)
    >>> alpha.numpy()
    array([0.5, 0.5, 1. , 1. ], dtype=float32)
    """
    import tensorflow as tf

    logits = tf.convert_to_tensor(logits)
    if not logits.dtype.is_floating:
        logits = tf.cast(logits, tf.float32)
    dtype = logits.dtype
    segment_ids = tf.convert_to_tensor(segment_ids)
    x = tf.cast(logits, tf.float32)
    allowed = None
    if mask is not None:
        allowed = tf.cast(mask, tf.bool)
        if allowed.shape.rank == 1 and x.shape.rank is not None and x.shape.rank > 1:
            allowed = tf.reshape(allowed, [-1] + [1] * (x.shape.rank - 1))
        x = tf.where(allowed, x, tf.constant(-1e9, tf.float32))
    maximum = tf.math.unsorted_segment_max(x, segment_ids, num_segments)
    weights = tf.exp(x - tf.gather(maximum, segment_ids))
    if allowed is not None:
        weights = weights * tf.cast(allowed, tf.float32)
    total = tf.math.unsorted_segment_sum(weights, segment_ids, num_segments)
    return tf.cast(tf.math.divide_no_nan(weights, tf.gather(total, segment_ids)), dtype)


def gcn_norm(edge_index, num_nodes, edge_weight=None):
    """The GCN's normalised edges (Kipf & Welling): ``D^-1/2 (A + I) D^-1/2`` as an edge list.

    One self loop per node is appended to the edges, and every edge ``j -> i`` gets the
    weight ``w_ji / sqrt(d_i d_j)``, where ``d_i`` is the (weighted) number of edges into
    ``i``, its self loop included. Self loops already in ``edge_index`` get weight 0:
    they are replaced by the appended ones, not doubled. The same numbers as PyTorch
    Geometric's ``gcn_norm`` (``add_self_loops=True``); :class:`lablib.layers.GraphConv`
    (``normalization="symmetric"``) aggregates with them. For a dense batch see
    :func:`gcn_norm_dense`.

    Args:
        edge_index: int ``[2, E]``, row 0 source, row 1 target.
        num_nodes: the number of nodes ``V`` (int or scalar int tensor).
        edge_weight: optional float ``[E]`` edge weights (default 1).

    Returns:
        ``(edge_index, edge_weight)``: int32 ``[2, E + V]`` (the edges, then the self
        loops ``0 -> 0, 1 -> 1...``) and float32 ``[E + V]``.

    Example:

    >>> from lablib.graphs import gcn_norm
    >>> edges, weights = gcn_norm(np.array([[0], [1]]), num_nodes=2)    # 0 -> 1
    >>> edges.numpy()
    array([[0, 0, 1],
           [1, 0, 1]], dtype=int32)
    >>> weights.numpy().round(4)      # 1/sqrt(1*2), node 0: 1/1, node 1: 1/2
    array([0.7071, 1.    , 0.5   ], dtype=float32)
    """
    import tensorflow as tf

    edge_index = tf.cast(edge_index, tf.int32)
    sources, targets = edge_index[0], edge_index[1]
    num_nodes = tf.cast(num_nodes, tf.int32)
    weight = tf.cast(tf.not_equal(sources, targets), tf.float32)
    if edge_weight is not None:
        weight = weight * tf.cast(edge_weight, tf.float32)
    loops = tf.range(num_nodes, dtype=tf.int32)
    sources = tf.concat([sources, loops], axis=0)
    targets = tf.concat([targets, loops], axis=0)
    weight = tf.concat([weight, tf.ones_like(loops, dtype=tf.float32)], axis=0)
    degree = tf.math.unsorted_segment_sum(weight, targets, num_nodes)
    inv_sqrt = tf.math.divide_no_nan(tf.ones_like(degree), tf.sqrt(degree))
    weight = weight * tf.gather(inv_sqrt, sources) * tf.gather(inv_sqrt, targets)
    return tf.stack([sources, targets]), weight


def gcn_norm_dense(adjacency, mask=None):
    """The GCN's propagation matrix ``D^-1/2 (A + I) D^-1/2`` of a dense batch.

    As :func:`gcn_norm`, for ``adjacency [B, N, N]`` (``adjacency[b, i, j] != 0`` when
    ``j`` sends to ``i``; its values act as edge weights): the diagonal is replaced by
    self loops of weight 1 (for the real nodes only when ``mask`` is given), and
    ``d_i = sum_j (A + I)[i, j]``. Padding nodes (``mask`` False) get zero rows and
    columns, so they never send or receive. Computed in the adjacency's float dtype.

    Args:
        adjacency: float ``[B, N, N]`` (or ``[N, N]``).
        mask: optional bool ``[B, N]`` (``[N]``), False for padding nodes.

    Returns:
        The propagation matrix, shaped and typed like ``adjacency``.

    Example:

    >>> from lablib.graphs import gcn_norm_dense
    >>> adjacency = np.array([[0, 0], [1, 0]], "float32")       # 0 -> 1
    >>> gcn_norm_dense(adjacency).numpy().round(4)
    array([[1.    , 0.    ],
           [0.7071, 0.5   ]], dtype=float32)
    """
    import tensorflow as tf

    adjacency = tf.convert_to_tensor(adjacency)
    if not adjacency.dtype.is_floating:
        adjacency = tf.cast(adjacency, tf.float32)
    dtype = adjacency.dtype
    eye = tf.eye(tf.shape(adjacency)[-1], dtype=dtype)
    self_loops = eye
    if mask is not None:
        node = tf.cast(mask, dtype)
        adjacency = adjacency * node[..., :, None] * node[..., None, :]
        self_loops = eye * node[..., :, None]
    adjacency = adjacency * (1.0 - eye) + self_loops
    degree = tf.reduce_sum(adjacency, axis=-1)  # incoming edges + self loop
    inv_sqrt = tf.math.divide_no_nan(tf.ones_like(degree), tf.sqrt(degree))
    return adjacency * inv_sqrt[..., :, None] * inv_sqrt[..., None, :]
