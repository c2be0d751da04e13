"""Graph machinery shared by every graph layer: reading a call's graph, edges as operators.

One place for what :class:`~lablib.layers.GraphConv`, :class:`~lablib.layers.GraphAttention`
and :class:`~lablib.layers.GraphReadout` need (as PyTorch Geometric's ``utils`` serve its
convolutions):

* :class:`GraphInputs` - the graph part of a call, checked: a dense padded batch
  (``x [B, N, F]``, ``adjacency [B, N, N]``, ``mask [B, N]``) or a sparse (disjoint) one
  (``x [V, F]``, ``edge_index [2, E]``, row 0 source, row 1 target), with per-graph caches
  of what depends on the edges only;
* :func:`edge_operator` and :func:`aggregate` - ``out[i] = sum_{j -> i} w_ij v_j`` as a
  sparse matmul, or a gather and a segment sum under XLA (:func:`in_xla_context`);
* :func:`features_matmul` - ``x @ W`` for dense or ``tf.SparseTensor`` node features;
* :func:`rank`, :func:`shape_text` - for the layers' error messages;
* :func:`node_features`, :func:`check_node_features` - the node features ``F`` a layer
  is built for, read from the build shape and checked against a call's ``x``.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = [
    "GraphInputs",
    "edge_operator",
    "aggregate",
    "features_matmul",
    "in_xla_context",
    "rank",
    "shape_text",
    "node_features",
    "check_node_features",
]


def rank(tensor):
    """The tensor's static rank (None when unknown)."""
    return tensor.shape.rank


def shape_text(tensor) -> str:
    """The tensor's static shape for an error message (``unknown`` when unknown)."""
    return "unknown" if tensor.shape.rank is None else str(tensor.shape.as_list())


def node_features(input_shape, layer: str) -> int:
    """The number of node features ``F`` (last axis of ``x``) in the shape a graph layer is
    built for, or ValueError when it is unknown."""
    input_shape = tuple(input_shape)
    features = input_shape[-1] if input_shape else None
    if features is None:
        raise ValueError(
            f"{layer} needs the number of node features (last axis of x) to build, "
            f"got input shape {input_shape}."
        )
    return int(features)


def check_node_features(x, built_for: int, layer: str) -> None:
    """ValueError when the last axis of ``x``, where known, is not the ``built_for`` node
    features the layer was built for."""
    features = x.shape[-1]
    if features is not None and features != built_for:
        raise ValueError(
            f"{layer} was built for {built_for} node features but got x with "
            f"{features} (shape {shape_text(x)})."
        )


def require_rank(tensor, expected: int, message: str) -> None:
    """ValueError ``message``, followed by the tensor's shape, when its static rank is known
    and is not ``expected``."""
    if tensor.shape.rank is not None and tensor.shape.rank != expected:
        raise ValueError(f"{message} Got shape {shape_text(tensor)}.")


_EAGER_CACHE = {}  # (id(edge_index), what, xla, num_nodes) -> (edge_index, result)
_EAGER_CACHE_SIZE = 16


def _captured_eager_tensor(graph, internal):
    """The eager tensor that ``internal`` (a placeholder of ``graph``) captures, or None."""
    try:
        captures = graph.captures
    except AttributeError:
        return None
    for external, placeholder in captures:
        if placeholder is internal:
            return external if isinstance(external, tf.__internal__.EagerTensor) else None
    return None


class GraphInputs:
    """The graph part of a call, checked: ``mode`` is ``"dense"`` or ``"sparse"``.

    Dense: ``x [B, N, F]`` (compute dtype), ``adjacency [B, N, N]`` (compute dtype, with
    padding rows and columns zeroed), ``mask [B, N]`` (bool or None).
    Sparse: ``x [V, F]``, ``sources [E]``, ``targets [E]`` (int32), ``num_nodes``
    (scalar int32 tensor).
    """

    def __init__(self, layer, inputs, adjacency, mask, edge_index, dtype):
        name = type(layer).__name__
        self.layer_name = name
        if adjacency is None and edge_index is None:
            raise ValueError(
                f"{name} needs the graph's edges, got neither `adjacency` nor `edge_index`. "
                f"Call it as {name}(...)(x, adjacency=a, mask=m) for a dense batch "
                f"(x [B, N, F], a [B, N, N]) or {name}(...)(x, edge_index=e) for a sparse "
                f"batch (x [V, F], e [2, E]); see lablib.graphs.dense_batch / disjoint_batch."
            )
        if adjacency is not None and edge_index is not None:
            raise ValueError(
                f"{name} got both `adjacency` and `edge_index`; pass exactly one: adjacency "
                f"for a dense batch (x [B, N, F]) or edge_index for a sparse batch (x [V, F])."
            )
        if isinstance(inputs, tf.SparseTensor):
            if adjacency is not None:
                raise ValueError(
                    f"{name}: node features given as a tf.SparseTensor need the sparse "
                    f"layout (x [V, F] with edge_index=...); the dense layout (adjacency, "
                    f"x [B, N, F]) takes dense features. Pass edge_index=..., or densify "
                    f"x with tf.sparse.to_dense(x)."
                )
            require_rank(
                inputs, 2, f"{name}: sparse node features must be a 2-D tf.SparseTensor [V, F]."
            )
            x = inputs if inputs.dtype == dtype else tf.cast(inputs, dtype)
        else:
            x = tf.convert_to_tensor(inputs)
            if not x.dtype.is_floating:
                x = tf.cast(x, dtype)
            elif x.dtype != dtype:
                x = tf.cast(x, dtype)
        self.sparse_features = isinstance(x, tf.SparseTensor)
        if adjacency is not None:
            self.mode = "dense"
            self._read_dense(x, adjacency, mask, dtype)
        else:
            self.mode = "sparse"
            if mask is not None:
                raise ValueError(
                    f"{name}: `mask` is only for dense batches (x [B, N, F] with adjacency); "
                    f"a sparse batch (edge_index) has no padding nodes. Remove the mask, or "
                    f"drop the nodes it masks from x and edge_index."
                )
            self._read_sparse(x, edge_index)

    def _read_dense(self, x, adjacency, mask, dtype):
        name = self.layer_name
        adjacency = tf.convert_to_tensor(adjacency)
        if rank(x) is not None and rank(x) != 3:
            raise ValueError(
                f"{name}: with `adjacency` (dense batch) x must have shape [B, N, F], got "
                f"shape {shape_text(x)}. For a single graph add a batch axis (x[None], "
                f"adjacency[None]); for x [V, F] pass edge_index=... instead of adjacency."
            )
        if rank(adjacency) is not None and rank(adjacency) != 3:
            raise ValueError(
                f"{name}: adjacency must have shape [B, N, N] (adjacency[b, target, source] "
                f"= 1), got shape {shape_text(adjacency)}."
            )
        n_x = x.shape[1] if rank(x) == 3 else None
        a_shape = adjacency.shape.as_list() if rank(adjacency) == 3 else [None] * 3
        for size in a_shape[1:]:
            if n_x is not None and size is not None and size != n_x:
                raise ValueError(
                    f"{name}: adjacency shape {a_shape} does not match x shape "
                    f"{shape_text(x)}; expected adjacency [B, N, N] with N = {n_x}."
                )
        adjacency = tf.cast(adjacency, dtype)
        if mask is not None:
            mask = tf.convert_to_tensor(mask)
            if rank(mask) is not None and rank(mask) != 2:
                raise ValueError(
                    f"{name}: mask must have shape [B, N] (True for real nodes), got shape "
                    f"{shape_text(mask)}."
                )
            if n_x is not None and mask.shape[1] is not None and mask.shape[1] != n_x:
                raise ValueError(
                    f"{name}: mask shape {shape_text(mask)} does not match x shape {shape_text(x)}; "
                    f"expected [B, {n_x}]."
                )
            mask = tf.cast(mask, tf.bool)
            node = tf.cast(mask, dtype)
            adjacency = adjacency * node[:, :, None] * node[:, None, :]
        self.x, self.adjacency, self.mask = x, adjacency, mask

    def _read_sparse(self, x, edge_index):
        name = self.layer_name
        edge_index = tf.convert_to_tensor(edge_index)
        edge_index_given = edge_index
        if rank(x) is not None and rank(x) != 2:
            raise ValueError(
                f"{name}: with `edge_index` (sparse batch) x must have shape [V, F], got "
                f"shape {shape_text(x)}. For a padded batch x [B, N, F] pass adjacency=... "
                f"instead (lablib.graphs.dense_batch builds one)."
            )
        shape = edge_index.shape
        if shape.rank is not None and (shape.rank != 2 or shape[0] not in (None, 2)):
            hint = ""
            if shape.rank == 2 and shape[1] == 2:
                hint = " It looks like [E, 2] (one row per edge): pass tf.transpose(edge_index)."
            raise ValueError(
                f"{name}: edge_index must have shape [2, E] (row 0 source nodes, row 1 "
                f"target nodes), got shape {shape_text(edge_index)}.{hint}"
            )
        if not edge_index.dtype.is_integer:
            raise ValueError(
                f"{name}: edge_index must hold integer node indices, got dtype "
                f"{edge_index.dtype.name}. Cast it with tf.cast(edge_index, 'int32')."
            )
        edge_index = tf.cast(edge_index, tf.int32)
        if tf.executing_eagerly() and edge_index.shape[1] != 0:
            # Eager calls only (inside tf.function this would cost a sync every step):
            # out-of-range indices are silently dropped by segment sums on some devices.
            low = int(tf.reduce_min(edge_index))
            high = int(tf.reduce_max(edge_index))
            num_nodes = int(x.dense_shape[0] if isinstance(x, tf.SparseTensor) else x.shape[0])
            if low < 0 or high >= num_nodes:
                raise ValueError(
                    f"{name}: edge_index refers to node {low if low < 0 else high}, but x "
                    f"has {num_nodes} nodes (valid indices are 0..{num_nodes - 1}). For a "
                    f"batch of graphs, offset each graph's indices (lablib.graphs."
                    f"disjoint_batch does it)."
                )
        self.x = x
        self._edge_key = edge_index_given
        self.sources = edge_index[0]
        self.targets = edge_index[1]
        if isinstance(x, tf.SparseTensor):
            self.num_nodes = tf.cast(x.dense_shape[0], tf.int32)
        else:
            self.num_nodes = tf.shape(x, out_type=tf.int32)[0]

    def cached(self, name, compute):
        """``compute(sources, targets, num_nodes, use_xla)``, computed as rarely as is safe.

        * Inside a ``tf.function`` that captured an eager ``edge_index`` tensor (a graph
          closed over by the training step, as for Cora): computed once, eagerly, and
          reused by every later trace and step: the graph is precomputed.
        * Otherwise inside a ``tf.function``: computed once per trace and shared by all
          layers that get the same ``edge_index`` tensor (a GCN normalises once per
          step, not once per layer).
        * Eager calls: computed every call.
        """
        use_xla = in_xla_context()
        key_tensor = getattr(self, "_edge_key", None)
        if key_tensor is None or tf.executing_eagerly():
            return compute(self.sources, self.targets, self.num_nodes, use_xla)
        graph = tf.compat.v1.get_default_graph()
        if getattr(key_tensor, "graph", None) is not graph:
            return compute(self.sources, self.targets, self.num_nodes, use_xla)
        external = _captured_eager_tensor(graph, key_tensor)
        num_nodes = self.x.shape[0]
        if external is not None and num_nodes is not None:
            key = (id(external), name, use_xla, int(num_nodes))
            hit = _EAGER_CACHE.get(key)
            if hit is not None and hit[0] is external:
                return hit[1]
            with tf.init_scope():
                edges = tf.cast(external, tf.int32)
                result = compute(edges[0], edges[1], tf.constant(int(num_nodes)), use_xla)
            while len(_EAGER_CACHE) >= _EAGER_CACHE_SIZE:
                _EAGER_CACHE.pop(next(iter(_EAGER_CACHE)))
            _EAGER_CACHE[key] = (external, result)  # holding `external` keeps its id
            return result
        # Kept in one of the graph's collections: it lives and dies with the graph.
        collection = graph.get_collection_ref("lablib_graph_cache")
        if not collection:
            collection.append({})
        store = collection[0]
        key = (key_tensor.ref(), name, use_xla)
        if key not in store:
            store[key] = compute(self.sources, self.targets, self.num_nodes, use_xla)
        return store[key]

    def node_mask(self, dtype):
        """``[B, N, 1]`` 1/0 multiplier for dense outputs, or None."""
        if self.mode != "dense" or self.mask is None:
            return None
        return tf.cast(self.mask, dtype)[..., None]


def in_xla_context() -> bool:
    """True while tracing for XLA (``tf.function(jit_compile=True)``).

    Some fast TensorFlow kernels (``tf.sparse.sparse_dense_matmul``) have no XLA
    version; layers then use gathers and segment sums, which compile everywhere.
    """
    try:
        from tensorflow.python.ops import control_flow_util

        return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))
    except Exception:  # pragma: no cover - private API moved: take the safe path
        return True


def edge_operator(sources, targets, weights, num_nodes, use_xla):
    """The weighted edges as an operator for :func:`aggregate`.

    Outside XLA: a ``[V, V]`` ``tf.SparseTensor`` (``[target, source] = weight``), for
    ``tf.sparse.sparse_dense_matmul``, the fastest TensorFlow kernel for this on CPU and
    GPU. Under XLA (which has no sparse kernel): the edge arrays, for a gather and a
    segment sum.
    """
    if use_xla:
        return ("segments", sources, targets, weights, num_nodes)
    compute = tf.float32 if weights.dtype in (tf.float16, tf.bfloat16) else weights.dtype
    size = tf.cast(num_nodes, tf.int64)
    matrix = tf.SparseTensor(
        indices=tf.cast(tf.stack([targets, sources], axis=1), tf.int64),
        values=tf.cast(weights, compute),
        dense_shape=tf.stack([size, size]),
    )
    return ("sparse", matrix)


def aggregate(operator, values):
    """``out[i] = sum over edges j -> i of weight * values[j]``: ``[V, D]``."""
    if operator[0] == "segments":
        _, sources, targets, weights, num_nodes = operator
        messages = tf.gather(values, sources) * tf.cast(weights, values.dtype)[:, None]
        return tf.math.unsorted_segment_sum(messages, targets, num_nodes)
    matrix = operator[1]
    out = tf.sparse.sparse_dense_matmul(matrix, tf.cast(values, matrix.dtype))
    return tf.cast(out, values.dtype)


def features_matmul(x, kernel):
    """``x @ kernel`` for dense node features or a ``tf.SparseTensor`` ``x [V, F]``.

    Sparse features (Cora: 1.3 % of the entries are non-zero) cost one multiply-add
    per stored value and unit (``tf.sparse.sparse_dense_matmul``); under XLA, which
    has no sparse kernel, a gather of kernel rows and a segment sum over the rows.
    """
    if not isinstance(x, tf.SparseTensor):
        return tf.matmul(x, kernel)
    if in_xla_context():
        rows, columns = x.indices[:, 0], x.indices[:, 1]
        products = tf.gather(kernel, columns) * x.values[:, None]
        return tf.math.unsorted_segment_sum(products, rows, x.dense_shape[0])
    return tf.sparse.sparse_dense_matmul(x, kernel)
