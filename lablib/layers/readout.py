"""Graph readout: one vector per graph from its node vectors (sum, mean or max)."""

from __future__ import annotations

import tensorflow as tf

from lablib.layers._common import check_choice, keras, register
from lablib.layers._graph_ops import require_rank

__all__ = ["GraphReadout"]


@register
class GraphReadout(keras.layers.Layer):
    """Pool node features into one vector per graph: sum, mean or max over its nodes.

    The pooling is permutation invariant: relabelling a graph's nodes leaves the result
    unchanged. Padding nodes never reach the result: ``"max"`` ignores them even when
    every real value is negative, and a graph without any real node reads out zeros.

    Args:
        mode: ``"sum"`` (default), ``"mean"`` or ``"max"``.
        **kwargs: standard layer arguments (``name``, ``dtype``...).

    Call arguments:
        inputs: node features, ``[B, N, F]`` (dense batch) or ``[V, F]`` (disjoint batch).
        mask: optional ``[B, N]`` bool, False for padding nodes (dense batches). Keras
            passes it automatically when the previous layer propagates a mask.
        graph_ids: ``[V]`` int, the graph of each node (disjoint batches), as returned
            by :func:`lablib.graphs.disjoint_batch`; ``-1`` marks a padding node (a
            batch padded to a fixed size), which is ignored.
        num_graphs: number of graphs in a disjoint batch (int or scalar tensor).
            Default: ``max(graph_ids) + 1``. Pass it when trailing graphs may have no
            nodes, and under ``jit_compile=True``: XLA needs the number of graphs as a
            constant, so without it TensorFlow recompiles for every new number of graphs.

    Returns:
        ``[B, F]`` (dense) or ``[num_graphs, F]`` (disjoint).

    Example::

        from lablib import graphs
        from lablib.layers import GraphConv, GraphReadout

        x, a, m = graphs.dense_batch(features, edge_indices)
        h = GraphConv(32, activation="relu")(x, adjacency=a, mask=m)
        g = GraphReadout("mean")(h, mask=m)                          # [B, 32]
        xs, e, ids = graphs.disjoint_batch(features, edge_indices)
        g = GraphReadout("max")(xs, graph_ids=ids, num_graphs=len(features))
    """

    def __init__(self, mode="sum", **kwargs):
        super().__init__(**kwargs)
        self.mode = check_choice("mode", mode, ("sum", "mean", "max"), "GraphReadout")
        self.supports_masking = True

    def call(self, inputs, mask=None, graph_ids=None, num_graphs=None, training=None):
        del training  # a fixed pooling; accepted so that every layer is called alike
        x = tf.convert_to_tensor(inputs)
        if not x.dtype.is_floating or x.dtype != tf.as_dtype(self.compute_dtype):
            x = tf.cast(x, self.compute_dtype)
        if graph_ids is None:
            if num_graphs is not None:
                raise ValueError(
                    f"GraphReadout: `num_graphs` is for disjoint batches and needs "
                    f"`graph_ids`; got num_graphs={num_graphs!r} without graph_ids."
                )
            return self._dense(x, mask)
        if mask is not None:
            raise ValueError(
                "GraphReadout: got both `mask` (dense batches) and `graph_ids` (disjoint "
                "batches); pass mask with x [B, N, F], or graph_ids with x [V, F]."
            )
        return self._disjoint(x, graph_ids, num_graphs)

    def _dense(self, x, mask):
        require_rank(
            x,
            3,
            "GraphReadout: without `graph_ids`, x must be a dense batch "
            "[B, N, F]; for a disjoint batch x [V, F] pass graph_ids=... (from "
            "lablib.graphs.disjoint_batch).",
        )
        if mask is None:
            if self.mode == "sum":
                return tf.reduce_sum(x, axis=1)
            if self.mode == "mean":
                return tf.reduce_mean(x, axis=1)
            return tf.reduce_max(x, axis=1)
        mask = tf.convert_to_tensor(mask)
        require_rank(mask, 2, "GraphReadout: mask must have shape [B, N] (True for real nodes).")
        mask = tf.cast(mask, tf.bool)[:, :, None]  # [B, N, 1]
        if self.mode == "max":
            # The dtype's lowest finite value: never above a real value, finite in float16.
            lowest = tf.constant(x.dtype.min, dtype=x.dtype)
            pooled = tf.reduce_max(tf.where(mask, x, lowest), axis=1)
            any_node = tf.reduce_any(mask, axis=1)
            return tf.where(any_node, pooled, tf.zeros_like(pooled))
        weights = tf.cast(mask, x.dtype)
        total = tf.reduce_sum(x * weights, axis=1)
        if self.mode == "sum":
            return total
        return tf.math.divide_no_nan(total, tf.reduce_sum(weights, axis=1))

    def _disjoint(self, x, graph_ids, num_graphs):
        graph_ids = tf.convert_to_tensor(graph_ids)
        require_rank(
            x,
            2,
            "GraphReadout: with `graph_ids`, x must be a disjoint batch "
            "[V, F]; for a dense batch x [B, N, F] pass mask=... instead.",
        )
        require_rank(
            graph_ids, 1, "GraphReadout: graph_ids must have shape [V] (one graph id per node)."
        )
        if not graph_ids.dtype.is_integer:
            raise ValueError(
                f"GraphReadout: graph_ids must be integers, got dtype {graph_ids.dtype.name}."
            )
        if (
            x.shape.rank == 2
            and x.shape[0] is not None
            and graph_ids.shape[0] is not None
            and x.shape[0] != graph_ids.shape[0]
        ):
            raise ValueError(
                f"GraphReadout: graph_ids has {graph_ids.shape[0]} entries but x has "
                f"{x.shape[0]} nodes; expected one graph id per node."
            )
        graph_ids = tf.cast(graph_ids, tf.int32)
        if num_graphs is None:
            num_graphs = tf.reduce_max(graph_ids) + 1
        elif isinstance(num_graphs, int) and (isinstance(num_graphs, bool) or num_graphs < 1):
            raise ValueError(
                f"GraphReadout: num_graphs must be a positive integer, got {num_graphs!r}."
            )
        num_graphs = tf.cast(num_graphs, tf.int32)
        if tf.executing_eagerly() and graph_ids.shape[0] != 0:
            low, high = int(tf.reduce_min(graph_ids)), int(tf.reduce_max(graph_ids))
            if low < -1 or high >= int(num_graphs):
                raise ValueError(
                    f"GraphReadout: graph_ids holds {low if low < -1 else high}, outside "
                    f"0..{int(num_graphs) - 1} for num_graphs={int(num_graphs)} (-1 marks "
                    f"a padding node)."
                )
        count = tf.math.unsorted_segment_sum(
            tf.ones_like(graph_ids, dtype=x.dtype), graph_ids, num_graphs
        )[:, None]
        if self.mode == "max":
            pooled = tf.math.unsorted_segment_max(x, graph_ids, num_graphs)
            return tf.where(count > 0, pooled, tf.zeros_like(pooled))
        total = tf.math.unsorted_segment_sum(x, graph_ids, num_graphs)
        if self.mode == "sum":
            return total
        return tf.math.divide_no_nan(total, count)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        input_shape = tuple(input_shape)
        if len(input_shape) == 3:
            return (input_shape[0], input_shape[2])
        return (None, input_shape[-1])

    def get_config(self):
        config = super().get_config()
        config.update({"mode": self.mode})
        return config
