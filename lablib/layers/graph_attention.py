"""Graph attention (GAT, Velickovic et al. 2018) for dense and sparse (disjoint) batches."""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf

from lablib._deprecation import pop_renamed, refuse_unknown
from lablib.layers._common import (
    add_weight_of_kind,
    check_positive_int,
    check_rate,
    keras,
    register,
    weight_option,
    weight_option_names,
    weight_options,
    weight_options_config,
)
from lablib.graphs import segment_softmax
from lablib.layers._graph_ops import (
    GraphInputs,
    check_node_features,
    features_matmul,
    node_features,
    shape_text,
)
from lablib.layers.attention import masked_softmax

__all__ = ["GraphAttention", "EdgeAttention"]

#: The constructor's weight options, saved by ``get_config``.
_WEIGHT_OPTIONS = (
    *weight_option_names("kernel", "bias"),
    "attention_initializer",
    "activity_regularizer",
)


class EdgeAttention(NamedTuple):
    """Attention scores of a sparse (``edge_index``) call, one row per edge attended.

    ``edge_index [2, E']``: the input's edges, then one self loop per node when the
    layer adds them; ``alpha [E', num_heads]``: the weight of ``edge_index[0, k]`` in
    the mix of ``edge_index[1, k]``.
    """

    edge_index: Any
    alpha: Any


def _with_self_loops(sources, targets, num_nodes, use_xla):
    """Edges followed by one self loop per node, and which of them count: input self
    loops are replaced by the added ones (``valid`` False), not doubled."""
    del use_xla  # the same ops everywhere
    loops = tf.range(num_nodes, dtype=tf.int32)
    valid = tf.concat([tf.not_equal(sources, targets), tf.ones_like(loops, dtype=tf.bool)], 0)
    return (
        tf.concat([sources, loops], axis=0),
        tf.concat([targets, loops], axis=0),
        valid[:, None],
    )


def _incoming_edge_counts(sources, targets, num_nodes, use_xla):
    """``[V, 1]`` float32: edges into each node, self loops not counted (they are
    replaced by the added ones); the divisor of the added loops' mean edge features."""
    del use_xla  # the same ops everywhere
    not_loop = tf.cast(tf.not_equal(sources, targets), tf.float32)[:, None]
    return tf.math.unsorted_segment_sum(not_loop, targets, num_nodes)


@register
class GraphAttention(keras.layers.Layer):
    """Graph attention: each node takes a learned, softmax-weighted mix of its senders.

    For every head::

        z = x W                                                  (per head: [.., units])
        e_ij = LeakyReLU(attention_target . z_i + attention_source . z_j)
        alpha_ij = softmax over the senders j of node i (and i itself)
        h_i' = sum_j alpha_ij z_j

    which is ``a^T [z_i || z_j]`` of the paper with ``a`` split into its target and
    source halves. With ``edge_dim`` set, each edge's features ``f_ij`` (bond type,
    distance...) also enter the score, ``e_ij = LeakyReLU(attention_target . z_i +
    attention_source . z_j + attention_edge . (f_ij W_e))``, as in PyTorch Geometric's
    ``GATConv(edge_dim=...)``; an added self loop gets the mean features of the node's
    incoming edges (zeros for a node without any). Heads are concatenated (hidden
    layers) or averaged (output layer), then the bias and the activation are applied.
    The softmax is computed stably (the per-node maximum is subtracted) in float32, also
    under mixed precision. Same numbers as PyTorch Geometric's ``GATConv`` (``kernel`` =
    ``lin.weight.T``, ``attention_source`` = ``att_src``, ``attention_target`` =
    ``att_dst``, and with edge features ``edge_kernel`` = ``lin_edge.weight.T``,
    ``attention_edge`` = ``att_edge``).

    One instance accepts a dense padded batch or a sparse (disjoint) batch. Dense
    attention builds ``[B, heads, N, N]`` scores: fine for molecules (N up to ~100);
    for graphs with more than a few hundred nodes (Cora: 2708) use the sparse form,
    whose cost is linear in the number of edges.

    Both layouts run under ``tf.function(jit_compile=True)`` and mixed precision. On
    CPU, XLA's scatter makes the sparse layout slower than plain ``tf.function``; use
    ``jit_compile`` for it on GPU only.

    Args:
        units: output features per head.
        num_heads: number of attention heads.
        concat_heads: True: concatenate the heads (output ``num_heads * units``
            features); False: average them (``units`` features).
        negative_slope: slope of the LeakyReLU for negative scores.
        attention_dropout: dropout rate on the attention coefficients ``alpha``
            (training only).
        value_dropout: dropout rate on the values ``z = x W`` that are mixed, per node,
            head and unit, after the scores are computed (training only). The GAT
            authors' code drops them with the same rate as the layer's input (0.6 on
            Cora); PyTorch Geometric's ``GATConv`` has no such dropout (0, the default).
        add_self_loops: let each node attend to itself (self loops already in the
            graph are replaced, not doubled).
        edge_dim: number of edge features ``D``; when set, every call takes
            ``edge_attr`` and the edge features enter the attention scores (default
            None: scores from the node features only).
        activation: activation applied to the output (name or callable).
        use_bias: add a learned bias (``[num_heads * units]`` or ``[units]``).
        kernel_initializer: initializer of ``kernel`` and ``edge_kernel``
            (``"glorot_uniform"``).
        attention_initializer: initializer of ``attention_source``,
            ``attention_target`` and ``attention_edge`` (``"glorot_uniform"``).
        bias_initializer, kernel_regularizer, bias_regularizer: as for
            :class:`GraphConv` (here the kernels are ``kernel`` and ``edge_kernel``).
        activity_regularizer, kernel_constraint, bias_constraint: as for :class:`GraphConv`.
        **kwargs: standard layer arguments (``name``, ``dtype``...).

    Call arguments:
        inputs: node features, ``[B, N, F]`` (dense) or ``[V, F]`` (sparse); in the
            sparse layout also a ``tf.SparseTensor [V, F]`` (only the non-zeros are
            multiplied; drop them out with :class:`lablib.layers.SparseDropout`).
        adjacency: ``[B, N, N]``, ``adjacency[b, i, j] = 1`` when node ``j`` sends to
            node ``i`` (dense batches), no self loops.
        mask: optional ``[B, N]`` bool, False for padding nodes (dense batches); padding
            nodes neither attend nor receive attention, and their outputs are zero.
        edge_index: ``[2, E]`` int, row 0 source, row 1 target (sparse batches).
        edge_attr: edge features, only with ``edge_dim``: ``[E, D]`` aligned with the
            columns of ``edge_index`` (sparse), or ``[B, N, N, D]`` with
            ``edge_attr[b, i, j]`` the features of the edge ``j -> i`` (dense, indexed
            like ``adjacency``; entries where there is no edge do not change the output,
            but keep them finite, e.g. the zeros ``dense_batch`` writes: NaN there would
            reach the gradients).
            ``lablib.graphs.disjoint_batch`` / ``dense_batch`` build both from
            per-graph ``[E_b, D]`` arrays.
        training: whether attention and value dropout are active.
        return_attention_scores: also return the attention coefficients ``alpha``
            (before dropout), e.g. to plot which neighbours a node attends to; the name
            and the pair returned are those of ``keras.layers.MultiHeadAttention``.
            (``return_attention_coefficients``, its name before lablib 0.2, warns and
            keeps its old return values until 0.4.)

    Returns:
        ``outputs``: ``[B, N, D]`` (dense) or ``[V, D]`` (sparse), with
        ``D = num_heads * units`` when ``concat_heads`` else ``units``. With
        ``return_attention_scores=True`` always a pair ``(outputs, scores)``: dense
        ``scores`` is ``alpha [B, num_heads, N, N]`` (``alpha[b, h, i, j]``: weight of
        sender ``j`` for node ``i``); sparse ``scores`` is an :class:`EdgeAttention`
        ``(edge_index, alpha)`` with ``alpha [E', num_heads]`` aligned with the
        columns of ``edge_index [2, E']``, the input's edges followed by one self loop
        per node when ``add_self_loops`` (input self loops then get ``alpha = 0``), as
        PyTorch Geometric's ``GATConv`` returns them.

    Weights: ``kernel [F, num_heads * units]``, ``attention_source [num_heads, units]``,
    ``attention_target [num_heads, units]``, ``bias``; with ``edge_dim``: ``edge_kernel
    [edge_dim, num_heads * units]`` and ``attention_edge [num_heads, units]``.

    Example::

        from lablib import graphs
        from lablib.layers import GraphAttention

        x, e, g = graphs.disjoint_batch(features, edge_indices)
        h = GraphAttention(8, num_heads=8, activation="elu")(x, edge_index=e)  # [V, 64]
        out, (e_loops, alpha) = GraphAttention(7, num_heads=1, concat_heads=False)(
            h, edge_index=e, return_attention_scores=True)

        # with bond features (molecules): edge_attr [E, D], one row per edge
        x, e, g, f = graphs.disjoint_batch(features, edge_indices, edge_attr=bond_features)
        h = GraphAttention(16, num_heads=4, edge_dim=f.shape[-1])(x, edge_index=e, edge_attr=f)
    """

    def __init__(
        self,
        units,
        num_heads=1,
        concat_heads=True,
        negative_slope=0.2,
        attention_dropout=0.0,
        value_dropout=0.0,
        add_self_loops=True,
        edge_dim=None,
        activation=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        attention_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        name = "GraphAttention"
        # Keras' Layer reads activity_regularizer (keras.regularizers.get, as weight_option).
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self.kernel_initializer, self.kernel_regularizer, self.kernel_constraint = weight_options(
            name, "kernel", kernel_initializer, kernel_regularizer, kernel_constraint
        )
        self.attention_initializer = weight_option(
            "attention_initializer", attention_initializer, name
        )
        self.bias_initializer, self.bias_regularizer, self.bias_constraint = weight_options(
            name, "bias", bias_initializer, bias_regularizer, bias_constraint
        )
        self.units = check_positive_int("units", units, name)
        self.num_heads = check_positive_int("num_heads", num_heads, name)
        self.concat_heads = bool(concat_heads)
        try:
            self.negative_slope = float(negative_slope)
        except (TypeError, ValueError):
            raise ValueError(
                f"{name}: `negative_slope` must be a number >= 0, got {negative_slope!r}."
            ) from None
        if self.negative_slope < 0:
            raise ValueError(f"{name}: `negative_slope` must be >= 0, got {negative_slope}.")
        self.attention_dropout = check_rate("attention_dropout", attention_dropout, name)
        self.value_dropout = check_rate("value_dropout", value_dropout, name)
        self.add_self_loops = bool(add_self_loops)
        self.edge_dim = None if edge_dim is None else check_positive_int("edge_dim", edge_dim, name)
        self.activation = keras.activations.get(activation)
        self.use_bias = bool(use_bias)
        self.dropout = (
            keras.layers.Dropout(self.attention_dropout, name="attention_dropout")
            if self.attention_dropout > 0
            else None
        )
        self.value_dropout_layer = (
            keras.layers.Dropout(self.value_dropout, name="value_dropout")
            if self.value_dropout > 0
            else None
        )
        self.supports_masking = True

    @property
    def output_units(self):
        """Features per node in the output."""
        return self.num_heads * self.units if self.concat_heads else self.units

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        self._features = node_features(input_shape, "GraphAttention")
        projected = self.num_heads * self.units
        per_head = (self.num_heads, self.units)
        self.kernel = add_weight_of_kind(self, "kernel", (self._features, projected), "kernel")
        self.attention_source = add_weight_of_kind(self, "attention_source", per_head, "attention")
        self.attention_target = add_weight_of_kind(
            self, "attention_target", per_head, "attention", clone=True
        )
        if self.edge_dim is not None:
            self.edge_kernel = add_weight_of_kind(
                self, "edge_kernel", (self.edge_dim, projected), "kernel", clone=True
            )
            self.attention_edge = add_weight_of_kind(
                self, "attention_edge", per_head, "attention", clone=True
            )
        if self.use_bias:
            self.bias = add_weight_of_kind(self, "bias", (self.output_units,), "bias")
        super().build(input_shape)

    # -- helpers ---------------------------------------------------------------------

    def _project(self, x, dtype):
        """``z [.., heads, units]`` and the two halves of the attention scores."""
        check_node_features(x, self._features, "GraphAttention")
        z = features_matmul(x, tf.cast(self.kernel, dtype))
        z = tf.reshape(z, tf.concat([tf.shape(z)[:-1], [self.num_heads, self.units]], axis=0))
        score_source = tf.reduce_sum(z * tf.cast(self.attention_source, dtype), axis=-1)
        score_target = tf.reduce_sum(z * tf.cast(self.attention_target, dtype), axis=-1)
        return z, score_source, score_target

    def _edge_scores(self, graph, edge_attr, dtype):
        """``attention_edge . (f W_e)`` per edge and head, or None without ``edge_dim``.

        ``W_e`` and ``attention_edge`` are folded into one ``[D, heads]`` matrix first
        (the score is linear in ``f``), so the ``[.., heads, units]`` edge projection is
        never built: dense batches stay at ``[B, N, N, heads]``.
        """
        name = type(self).__name__
        if self.edge_dim is None:
            if edge_attr is not None:
                raise ValueError(
                    f"{name}: got `edge_attr` but the layer was created without `edge_dim`, "
                    f"so it has no weights for edge features. Create it as "
                    f"{name}(..., edge_dim=D) with D the number of edge features, or drop "
                    f"edge_attr."
                )
            return None
        if edge_attr is None:
            raise ValueError(
                f"{name}: the layer was created with edge_dim={self.edge_dim} and needs "
                f"`edge_attr` on every call: [E, {self.edge_dim}] with edge_index, or "
                f"[B, N, N, {self.edge_dim}] with adjacency (lablib.graphs.disjoint_batch / "
                f"dense_batch build them with edge_attr=...)."
            )
        edge_attr = tf.convert_to_tensor(edge_attr)
        if (
            not edge_attr.dtype.is_floating
            and not edge_attr.dtype.is_integer
            and (edge_attr.dtype != tf.bool)
        ):
            raise ValueError(
                f"{name}: edge_attr must be numeric, got dtype {edge_attr.dtype.name}."
            )
        shape = edge_attr.shape
        if graph.mode == "dense":
            expected = (
                f"[B, N, N, {self.edge_dim}] (edge_attr[b, i, j]: features of the edge j -> i)"
            )
            rank = 4
            nodes = graph.x.shape[1]
            bad_nodes = (
                shape.rank == 4
                and nodes is not None
                and any(size is not None and size != nodes for size in shape[1:3])
            )
        else:
            expected = f"[E, {self.edge_dim}] (one row per column of edge_index)"
            rank = 2
            bad_nodes = False
        if shape.rank is not None and (
            shape.rank != rank
            or (shape[-1] is not None and shape[-1] != self.edge_dim)
            or bad_nodes
        ):
            raise ValueError(
                f"{name}: edge_attr must have shape {expected}, got shape {shape_text(edge_attr)}"
                f" with x of shape {shape_text(graph.x)}."
            )
        if graph.mode == "sparse" and tf.executing_eagerly():
            edges = int(tf.shape(graph.sources)[0])
            if int(tf.shape(edge_attr)[0]) != edges:
                raise ValueError(
                    f"{name}: edge_attr has {int(tf.shape(edge_attr)[0])} rows but edge_index "
                    f"has {edges} edges; pass one row of edge features per edge, in the order "
                    f"of edge_index's columns."
                )
        edge_attr = tf.cast(edge_attr, dtype)
        folded = tf.reduce_sum(
            tf.reshape(
                tf.cast(self.edge_kernel, dtype), [self.edge_dim, self.num_heads, self.units]
            )
            * tf.cast(self.attention_edge, dtype),
            axis=-1,
        )  # [D, H]
        return tf.tensordot(edge_attr, folded, axes=1)  # [E, H] or [B, N, N, H]

    def _drop(self, alpha, training):
        if self.dropout is None:
            return alpha
        return self.dropout(alpha, training=training)

    def _drop_values(self, z, training):
        if self.value_dropout_layer is None:
            return z
        return self.value_dropout_layer(z, training=training)

    def _dense(self, graph, dtype, training, edge_attr):
        z, score_source, score_target = self._project(graph.x, dtype)  # [B, N, H(, U)]
        # logits[b, h, i, j] = target score of i + source score of j
        logits = (
            tf.transpose(score_target, [0, 2, 1])[:, :, :, None]
            + tf.transpose(score_source, [0, 2, 1])[:, :, None, :]
        )
        allowed = graph.adjacency > 0  # padding rows/columns are already zero
        eye = tf.eye(tf.shape(allowed)[-1], dtype=tf.bool)[None]
        score_edge = self._edge_scores(graph, edge_attr, dtype)  # [B, N, N, H] or None
        if score_edge is not None:
            score_edge = tf.cast(tf.transpose(score_edge, [0, 3, 1, 2]), tf.float32)  # [B, H, N, N]
            if self.add_self_loops:
                # the added loop i -> i scores the mean features of i's incoming edges
                # (tf.where, not a product: off-edge entries, whatever they hold, add nothing)
                incoming = tf.logical_and(allowed, tf.logical_not(eye))[:, None]  # [B, 1, N, N]
                loop = tf.math.divide_no_nan(
                    tf.reduce_sum(tf.where(incoming, score_edge, 0.0), axis=-1),
                    tf.reduce_sum(tf.cast(incoming, tf.float32), axis=-1),
                )  # [B, H, N]
                score_edge = tf.where(eye[:, None], loop[..., None], score_edge)
            logits = tf.cast(logits, tf.float32) + score_edge
        logits = tf.nn.leaky_relu(tf.cast(logits, tf.float32), alpha=self.negative_slope)
        if self.add_self_loops:
            if graph.mask is not None:
                eye = tf.logical_and(eye, graph.mask[:, :, None])
            allowed = tf.logical_or(allowed, eye)
        allowed = allowed[:, None]  # [B, 1, N, N], the same for every head
        alpha = masked_softmax(logits, allowed)  # over the senders j of each node i
        alpha = tf.cast(alpha, dtype)  # [B, H, N, N]
        values = tf.transpose(self._drop_values(z, training), [0, 2, 1, 3])  # [B, H, N, U]
        out = tf.matmul(self._drop(alpha, training), values)  # [B, H, N, U]
        out = tf.transpose(out, [0, 2, 1, 3])  # [B, N, H, U]
        return out, alpha

    def _sparse(self, graph, dtype, training, edge_attr):
        z, score_source, score_target = self._project(graph.x, dtype)  # [V, H(, U)]
        sources, targets, num_nodes = graph.sources, graph.targets, graph.num_nodes
        score_edge = self._edge_scores(graph, edge_attr, dtype)  # [E, H] or None
        valid = None
        if self.add_self_loops:
            sources, targets, valid = graph.cached("graph_attention_self_loops", _with_self_loops)
        logits = tf.gather(score_source, sources) + tf.gather(score_target, targets)
        if score_edge is not None:
            score_edge = tf.cast(score_edge, tf.float32)
            if self.add_self_loops:
                # the added loop i -> i scores the mean features of i's incoming edges
                # (input self loops excluded: they are replaced)
                incoming = tf.cast(valid[: tf.shape(graph.targets)[0]], tf.float32)  # [E, 1]
                loop = tf.math.divide_no_nan(
                    tf.math.unsorted_segment_sum(score_edge * incoming, graph.targets, num_nodes),
                    graph.cached("graph_attention_incoming_edges", _incoming_edge_counts),
                )  # [V, H]
                score_edge = tf.concat([score_edge, loop], axis=0)
            logits = tf.cast(logits, tf.float32) + score_edge
        logits = tf.nn.leaky_relu(tf.cast(logits, tf.float32), alpha=self.negative_slope)
        # Replaced input self loops (valid False) get weight 0; every node keeps its added
        # self loop, so no node's softmax is empty.
        alpha = segment_softmax(logits, targets, num_nodes, mask=valid)  # over i's senders
        alpha = tf.cast(alpha, dtype)  # [E', H]
        values = self._drop_values(z, training)  # [V, H, U]
        messages = tf.gather(values, sources) * self._drop(alpha, training)[:, :, None]
        out = tf.math.unsorted_segment_sum(messages, targets, num_nodes)  # [V, H, U]
        return out, alpha, tf.stack([sources, targets])

    # -- call ------------------------------------------------------------------------

    def call(
        self,
        inputs,
        adjacency=None,
        mask=None,
        edge_index=None,
        edge_attr=None,
        training=None,
        return_attention_scores=False,
        **kwargs,
    ):
        old_style = pop_renamed(
            kwargs,
            "GraphAttention.call",
            "return_attention_coefficients",
            note="return_attention_scores=True returns (outputs, scores) "
            "in both layouts; sparse scores are (edge_index, alpha).",
        )
        refuse_unknown(
            kwargs,
            "GraphAttention.call()",
            "the layer takes inputs, adjacency, "
            "mask, edge_index, edge_attr, training and return_attention_scores",
        )
        dtype = self.compute_dtype
        graph = GraphInputs(self, inputs, adjacency, mask, edge_index, dtype)
        if graph.mode == "dense":
            out, alpha = self._dense(graph, dtype, training, edge_attr)
            scores = alpha
            extra = (alpha,)
        else:
            out, alpha, loops_index = self._sparse(graph, dtype, training, edge_attr)
            scores = EdgeAttention(loops_index, alpha)
            extra = (alpha, loops_index)
        if self.concat_heads:
            out = tf.reshape(
                out, tf.concat([tf.shape(out)[:-2], [self.num_heads * self.units]], axis=0)
            )
        else:
            out = tf.reduce_mean(out, axis=-2)
        if self.use_bias:
            out = out + tf.cast(self.bias, dtype)
        out = self.activation(out)
        node = graph.node_mask(dtype)
        if node is not None:
            out = out * node
        if old_style:
            return (out,) + extra  # the 0.1 return values, until lablib 0.4
        if return_attention_scores:
            return out, scores
        return out

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "num_heads": self.num_heads,
                "concat_heads": self.concat_heads,
                "negative_slope": self.negative_slope,
                "attention_dropout": self.attention_dropout,
                "value_dropout": self.value_dropout,
                "add_self_loops": self.add_self_loops,
                "edge_dim": self.edge_dim,
                "activation": keras.activations.serialize(self.activation),
                "use_bias": self.use_bias,
                **weight_options_config(self, _WEIGHT_OPTIONS),
            }
        )
        return config
