"""Graph convolution (GCN) for dense padded batches and sparse (disjoint) batches.

Two layouts of the same graphs are accepted by one layer instance (docs/conventions.md):

* dense: ``layer(x, adjacency=a, mask=m)`` with ``x [B, N, F]``, ``a [B, N, N]``
  (``a[b, i, j] = 1`` when node ``j`` sends to node ``i``; no self loops, the layer adds
  them) and the optional ``m [B, N]`` (False for padding nodes);
* sparse: ``layer(x, edge_index=e)`` with ``x [V, F]`` and ``e [2, E]`` (row 0 source,
  row 1 target, as PyTorch Geometric), messages flowing source -> target.

The graph machinery (reading and checking graph inputs, edges as operators) is in
:mod:`lablib.layers._graph_ops`, shared with the other graph layers.
"""

from __future__ import annotations

import tensorflow as tf

from lablib.graphs import gcn_norm, gcn_norm_dense
from lablib.layers._common import (
    add_weight_of_kind,
    check_choice,
    check_positive_int,
    keras,
    register,
    weight_option_names,
    weight_options,
    weight_options_config,
)
from lablib.layers._graph_ops import (
    GraphInputs,
    aggregate,
    check_node_features,
    edge_operator,
    features_matmul,
    node_features,
)

__all__ = ["GraphConv"]

#: The constructor's weight options, saved by ``get_config``.
_WEIGHT_OPTIONS = (*weight_option_names("kernel", "bias"), "activity_regularizer")


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
        kernel_initializer: initializer of ``kernel`` and ``self_kernel``
            (``"glorot_uniform"``).
        bias_initializer: initializer of ``bias`` (``"zeros"``).
        kernel_regularizer, bias_regularizer: optional regularizers of the kernels and
            the bias (a Keras regularizer or its name, e.g. ``"l2"``).
        activity_regularizer: optional regularizer of the layer's output (a loss added
            to the model's, as for ``keras.layers.Dense``).
        kernel_constraint, bias_constraint: optional constraints of the kernels and the
            bias (e.g. ``"max_norm"``).
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
        training: accepted for a uniform call (there is no dropout inside).

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
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        name = "GraphConv"
        # Keras' Layer reads activity_regularizer (keras.regularizers.get, as weight_option).
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self.units = check_positive_int("units", units, name)
        self.normalization = check_choice(
            "normalization", normalization, ("symmetric", "mean"), name
        )
        self.kernel_initializer, self.kernel_regularizer, self.kernel_constraint = weight_options(
            name, "kernel", kernel_initializer, kernel_regularizer, kernel_constraint
        )
        self.bias_initializer, self.bias_regularizer, self.bias_constraint = weight_options(
            name, "bias", bias_initializer, bias_regularizer, bias_constraint
        )
        self.activation = keras.activations.get(activation)
        self.use_bias = bool(use_bias)
        self.supports_masking = True

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        features = node_features(input_shape, "GraphConv")
        self.kernel = add_weight_of_kind(self, "kernel", (features, self.units), "kernel")
        if self.normalization == "mean":
            self.self_kernel = add_weight_of_kind(
                self, "self_kernel", (features, self.units), "kernel", clone=True
            )
        if self.use_bias:
            self.bias = add_weight_of_kind(self, "bias", (self.units,), "bias")
        self._features = features
        super().build(input_shape)

    # -- helpers ---------------------------------------------------------------------

    def _transform_first(self):
        # Aggregation is linear, so it commutes with x W: transform first when it
        # shrinks the features (the usual case: Cora has 1433 inputs, 16 units).
        return self.units <= self._features

    def _dense(self, graph, kernel):
        x, adjacency = graph.x, graph.adjacency
        if self.normalization == "symmetric":
            propagate = gcn_norm_dense(adjacency, graph.mask)  # D^-1/2 (A + I) D^-1/2
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
            # D^-1/2 (A + I) D^-1/2: the edges and one self loop per node, weighted
            edge_index, weight = gcn_norm(tf.stack([sources, targets]), num_nodes)
            return edge_operator(edge_index[0], edge_index[1], weight, num_nodes, use_xla)
        count = tf.math.unsorted_segment_sum(
            tf.ones_like(targets, dtype=tf.float32), targets, num_nodes
        )
        weight = tf.gather(1.0 / count, targets)  # count >= 1 for every target
        return edge_operator(sources, targets, weight, num_nodes, use_xla)

    def _sparse(self, graph, kernel):
        operator = graph.cached(f"graph_conv_{self.normalization}", self._sparse_operator)
        # Sparse features are always transformed first (then aggregated dense).
        transform_first = self._transform_first() or graph.sparse_features
        values = features_matmul(graph.x, kernel) if transform_first else graph.x
        out = aggregate(operator, values)
        if not transform_first:
            out = tf.matmul(out, kernel)
        return out

    # -- call ------------------------------------------------------------------------

    def call(self, inputs, adjacency=None, mask=None, edge_index=None, training=None):
        del training  # no dropout inside; accepted so that every layer is called alike
        dtype = self.compute_dtype
        graph = GraphInputs(self, inputs, adjacency, mask, edge_index, dtype)
        check_node_features(graph.x, self._features, "GraphConv")
        kernel = tf.cast(self.kernel, dtype)
        if graph.mode == "dense":
            out = self._dense(graph, kernel)
        else:
            out = self._sparse(graph, kernel)
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
                **weight_options_config(self, _WEIGHT_OPTIONS),
            }
        )
        return config
