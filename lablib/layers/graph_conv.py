"""Graph convolution (GCN) for dense padded batches and sparse (disjoint) batches.

Two layouts of the same graphs are accepted by one layer instance (README, "Conventions"):

* dense: ``layer(x, adjacency=a, mask=m)`` with ``x [B, N, F]``, ``a [B, N, N]``
  (``a[b, i, j] = 1`` when node ``j`` sends to node ``i``; no self loops, the layer adds
  them) and the optional ``m [B, N]`` (False for padding nodes);
* sparse: ``layer(x, edge_index=e)`` with ``x [V, F]`` and ``e [2, E]`` (row 0 source,
  row 1 target, as PyTorch Geometric), messages flowing source -> target.

The helpers at the top of this module (reading and checking graph inputs) are shared
with :mod:`lablib.layers.graph_attention` and :mod:`lablib.layers.readout`.
"""

from __future__ import annotations

import tensorflow as tf

from lablib.layers._common import check_choice, check_positive_int, keras, register

__all__ = ["GraphConv"]


# --------------------------------------------------------------------------- graph inputs


def _rank(tensor):
    return tensor.shape.rank


def _shape(tensor):
    return "unknown" if tensor.shape.rank is None else str(tensor.shape.as_list())


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
            if inputs.shape.rank is not None and inputs.shape.rank != 2:
                raise ValueError(
                    f"{name}: sparse node features must be a 2-D tf.SparseTensor [V, F], "
                    f"got shape {_shape(inputs)}."
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
        if _rank(x) is not None and _rank(x) != 3:
            raise ValueError(
                f"{name}: with `adjacency` (dense batch) x must have shape [B, N, F], got "
                f"shape {_shape(x)}. For a single graph add a batch axis (x[None], "
                f"adjacency[None]); for x [V, F] pass edge_index=... instead of adjacency."
            )
        if _rank(adjacency) is not None and _rank(adjacency) != 3:
            raise ValueError(
                f"{name}: adjacency must have shape [B, N, N] (adjacency[b, target, source] "
                f"= 1), got shape {_shape(adjacency)}."
            )
        n_x = x.shape[1] if _rank(x) == 3 else None
        a_shape = adjacency.shape.as_list() if _rank(adjacency) == 3 else [None] * 3
        for size in a_shape[1:]:
            if n_x is not None and size is not None and size != n_x:
                raise ValueError(
                    f"{name}: adjacency shape {a_shape} does not match x shape "
                    f"{_shape(x)}; expected adjacency [B, N, N] with N = {n_x}."
                )
        adjacency = tf.cast(adjacency, dtype)
        if mask is not None:
            mask = tf.convert_to_tensor(mask)
            if _rank(mask) is not None and _rank(mask) != 2:
                raise ValueError(
                    f"{name}: mask must have shape [B, N] (True for real nodes), got shape "
                    f"{_shape(mask)}."
                )
            if n_x is not None and mask.shape[1] is not None and mask.shape[1] != n_x:
                raise ValueError(
                    f"{name}: mask shape {_shape(mask)} does not match x shape {_shape(x)}; "
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
        if _rank(x) is not None and _rank(x) != 2:
            raise ValueError(
                f"{name}: with `edge_index` (sparse batch) x must have shape [V, F], got "
                f"shape {_shape(x)}. For a padded batch x [B, N, F] pass adjacency=... "
                f"instead (lablib.graphs.dense_batch builds one)."
            )
        shape = edge_index.shape
        if shape.rank is not None and (shape.rank != 2 or shape[0] not in (None, 2)):
            hint = ""
            if shape.rank == 2 and shape[1] == 2:
                hint = " It looks like [E, 2] (one row per edge): pass tf.transpose(edge_index)."
            raise ValueError(
                f"{name}: edge_index must have shape [2, E] (row 0 source nodes, row 1 "
                f"target nodes), got shape {_shape(edge_index)}.{hint}"
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

        return bool(
            control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())
        )
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


def _serialize(module, value):
    return None if value is None else module.serialize(value)


def clone_initializer(initializer):
    """A fresh copy of ``initializer``: tf_keras returns identical values when one
    unseeded initializer instance creates two weights."""
    return initializer.__class__.from_config(initializer.get_config())


# --------------------------------------------------------------------------- layer


@register
class GraphConv(keras.layers.Layer):
    """Graph convolution: every node mixes its neighbours' features (GCN).

    Two forms (``normalization``):

    * ``"symmetric"`` (Kipf & Welling, 2017):
      ``H' = act(D^-1/2 (A + I) D^-1/2 H W + b)``, where ``D`` counts each node's incoming
      edges plus its self loop. Same numbers as PyTorch Geometric's ``GCNConv``.
    * ``"mean"`` (the course's form): ``h_i' = act(mean_{j -> i} h_j W + h_i B + b)``;
      a node without incoming edges gets a zero mean. Same numbers as PyTorch
      Geometric's ``SAGEConv(aggr="mean")`` (``lin_l`` = ``kernel``, ``lin_r`` =
      ``self_kernel``).

    One instance accepts a dense padded batch or a sparse (disjoint) batch. Dense
    memory and time grow as ``B * N**2``: fine for molecules (N up to ~100); for a
    graph with more than a few hundred nodes (Cora: 2708) use the sparse form, whose
    cost is linear in nodes + edges. Self loops are added by the layer (``symmetric``)
    or replaced by the separate self term (``mean``); pass adjacency without them.
    Non-binary adjacency values act as edge weights.

    Both layouts run under ``tf.function(jit_compile=True)`` and mixed precision. On
    CPU, XLA's scatter makes the sparse layout slower than plain ``tf.function``; use
    ``jit_compile`` for it on GPU only. Sparse speed: inside a ``tf.function`` the
    normalised graph is computed once for an ``edge_index`` tensor the function closes
    over (full-graph training, e.g. Cora), and once per step, shared by all layers,
    for an ``edge_index`` passed in as an argument.

    Args:
        units: output features per node.
        normalization: ``"symmetric"`` (default) or ``"mean"``.
        activation: activation applied to the output (name or callable), default none.
        use_bias: add a learned bias ``b``.
        kernel_initializer, bias_initializer: initializers for ``kernel``/``self_kernel``
            and ``bias``.
        kernel_regularizer, bias_regularizer, kernel_constraint, bias_constraint:
            optional regularizers and constraints.
        **kwargs: standard layer arguments (``name``, ``dtype``...).

    Call arguments:
        inputs: node features, ``[B, N, F]`` (dense) or ``[V, F]`` (sparse); in the
            sparse layout also a ``tf.SparseTensor [V, F]`` (bag-of-words features such
            as Cora's: only the non-zeros are multiplied; drop them out with
            :class:`lablib.layers.SparseDropout`).
        adjacency: ``[B, N, N]``, ``adjacency[b, i, j] = 1`` when node ``j`` sends to
            node ``i`` (dense batches).
        mask: optional ``[B, N]`` bool, False for padding nodes (dense batches); padding
            nodes send nothing and their outputs are zero.
        edge_index: ``[2, E]`` int, row 0 source, row 1 target (sparse batches).

    Returns:
        ``[B, N, units]`` (dense) or ``[V, units]`` (sparse).

    Weights: ``kernel [F, units]``, ``self_kernel [F, units]`` (``"mean"`` only),
    ``bias [units]``.

    Example::

        from lablib import graphs
        from lablib.layers import GraphConv

        x, a, m = graphs.dense_batch(features, edge_indices)
        h = GraphConv(32, activation="relu")(x, adjacency=a, mask=m)      # [B, N, 32]
        xs, e, g = graphs.disjoint_batch(features, edge_indices)
        h = GraphConv(32, normalization="mean")(xs, edge_index=e)        # [V, 32]
    """

    def __init__(
        self,
        units,
        normalization="symmetric",
        activation=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units, "GraphConv")
        self.normalization = check_choice(
            "normalization", normalization, ("symmetric", "mean"), "GraphConv"
        )
        self.activation = keras.activations.get(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.supports_masking = True

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        features = input_shape[-1] if input_shape else None
        if features is None:
            raise ValueError(
                f"GraphConv needs the number of node features (last axis of x) to build, "
                f"got input shape {input_shape}."
            )
        features = int(features)
        self.kernel = self.add_weight(
            name="kernel",
            shape=(features, self.units),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        if self.normalization == "mean":
            self.self_kernel = self.add_weight(
                name="self_kernel",
                shape=(features, self.units),
                initializer=clone_initializer(self.kernel_initializer),
                regularizer=self.kernel_regularizer,
                constraint=self.kernel_constraint,
            )
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias",
                shape=(self.units,),
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        self._features = features
        super().build(input_shape)

    # -- helpers ---------------------------------------------------------------------

    def _transform_first(self):
        # Aggregation is linear, so it commutes with x W: transform first when it
        # shrinks the features (the usual case: Cora has 1433 inputs, 16 units).
        return self.units <= self._features

    def _check_features(self, x):
        features = x.shape[-1]
        if features is not None and features != self._features:
            raise ValueError(
                f"GraphConv was built for {self._features} node features but got x with "
                f"{features} (shape {_shape(x)})."
            )

    def _dense(self, graph, kernel, dtype):
        x, adjacency = graph.x, graph.adjacency
        if self.normalization == "symmetric":
            eye = tf.eye(tf.shape(adjacency)[-1], dtype=dtype)
            self_loops = eye[None]
            if graph.mask is not None:
                self_loops = self_loops * tf.cast(graph.mask, dtype)[:, :, None]
            adjacency = adjacency * (1.0 - eye) + self_loops
            degree = tf.reduce_sum(adjacency, axis=-1)  # incoming edges + self loop
            inv_sqrt = tf.math.divide_no_nan(tf.ones_like(degree), tf.sqrt(degree))
            propagate = adjacency * inv_sqrt[:, :, None] * inv_sqrt[:, None, :]
        else:
            degree = tf.reduce_sum(adjacency, axis=-1, keepdims=True)
            propagate = tf.math.divide_no_nan(adjacency, degree)
        if self._transform_first():
            out = tf.matmul(propagate, tf.matmul(x, kernel))
        else:
            out = tf.matmul(tf.matmul(propagate, x), kernel)
        return out

    def _sparse_operator(self, sources, targets, num_nodes, use_xla):
        if self.normalization == "symmetric":
            # Existing self loops get weight 0; one self loop per node is added apart.
            weight = tf.cast(tf.not_equal(sources, targets), tf.float32)
            degree = tf.math.unsorted_segment_sum(weight, targets, num_nodes) + 1.0
            inv_sqrt = tf.math.rsqrt(degree)
            norm = weight * tf.gather(inv_sqrt, sources) * tf.gather(inv_sqrt, targets)
            self_weight = inv_sqrt * inv_sqrt
            return edge_operator(sources, targets, norm, num_nodes, use_xla), self_weight
        count = tf.math.unsorted_segment_sum(
            tf.ones_like(targets, dtype=tf.float32), targets, num_nodes
        )
        weight = tf.gather(1.0 / count, targets)  # count >= 1 for every target
        return edge_operator(sources, targets, weight, num_nodes, use_xla), None

    def _sparse(self, graph, kernel, dtype):
        operator, self_weight = graph.cached(
            f"graph_conv_{self.normalization}", self._sparse_operator
        )
        # Sparse features are always transformed first (then aggregated dense).
        transform_first = self._transform_first() or graph.sparse_features
        values = features_matmul(graph.x, kernel) if transform_first else graph.x
        out = aggregate(operator, values)
        if self_weight is not None:
            out = out + values * tf.cast(self_weight, dtype)[:, None]
        if not transform_first:
            out = tf.matmul(out, kernel)
        return out

    # -- call ------------------------------------------------------------------------

    def call(self, inputs, adjacency=None, mask=None, edge_index=None):
        dtype = self.compute_dtype
        graph = GraphInputs(self, inputs, adjacency, mask, edge_index, dtype)
        self._check_features(graph.x)
        kernel = tf.cast(self.kernel, dtype)
        if graph.mode == "dense":
            out = self._dense(graph, kernel, dtype)
        else:
            out = self._sparse(graph, kernel, dtype)
        if self.normalization == "mean":
            out = out + features_matmul(graph.x, tf.cast(self.self_kernel, dtype))
        if self.use_bias:
            out = out + tf.cast(self.bias, dtype)
        if self.activation is not None:
            out = self.activation(out)
        node = graph.node_mask(dtype)
        if node is not None:
            out = out * node
        return out

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)[:-1] + (self.units,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "normalization": self.normalization,
                "activation": keras.activations.serialize(self.activation),
                "use_bias": self.use_bias,
                "kernel_initializer": _serialize(keras.initializers, self.kernel_initializer),
                "bias_initializer": _serialize(keras.initializers, self.bias_initializer),
                "kernel_regularizer": _serialize(keras.regularizers, self.kernel_regularizer),
                "bias_regularizer": _serialize(keras.regularizers, self.bias_regularizer),
                "kernel_constraint": _serialize(keras.constraints, self.kernel_constraint),
                "bias_constraint": _serialize(keras.constraints, self.bias_constraint),
            }
        )
        return config
