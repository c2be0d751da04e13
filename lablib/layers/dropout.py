"""Dropout that also takes sparse node features (``tf.SparseTensor``)."""

from __future__ import annotations

import tensorflow as tf

from lablib.layers._common import check_rate, keras, register

__all__ = ["SparseDropout"]


@register
class SparseDropout(keras.layers.Layer):
    """Dropout for dense tensors and ``tf.SparseTensor`` node features.

    On a ``tf.SparseTensor`` only the stored values are dropped, each with probability
    ``rate``, and the kept ones are scaled by ``1 / (1 - rate)``, as Kipf & Welling's
    GCN code does for Cora's bag-of-words features: the cost is linear in the number
    of non-zeros (1.3 % of Cora's 2708 x 1433 entries), and the zeros, which dropout
    would leave at zero anyway, are never touched. The result is a ``tf.SparseTensor``
    with the same indices (dropped values are stored as zeros). Dense inputs get
    ordinary dropout. Training only.

    Args:
        rate: fraction of the (stored) values to drop, in ``[0, 1)``.
        seed: optional int seed of the dropout masks.
        **kwargs: standard layer arguments (``name``...).

    Call arguments:
        inputs: a dense tensor or a ``tf.SparseTensor``.
        training: drop only when True.

    Returns:
        The same kind of tensor as ``inputs``, same shape.

    Example::

        from lablib.data import load_cora
        from lablib.layers import GraphConv, SparseDropout

        cora = load_cora(normalize_features=True, sparse_features=True)
        h = SparseDropout(0.5)(cora.x, training=True)                   # tf.SparseTensor
        h = GraphConv(16, activation="relu")(h, edge_index=cora.edge_index)
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = check_rate("rate", rate, "SparseDropout")
        self.seed = seed
        self.dropout = keras.layers.Dropout(self.rate, seed=seed, name="dropout")
        self.supports_masking = True

    def call(self, inputs, training=None):
        if not isinstance(inputs, tf.SparseTensor):
            return self.dropout(inputs, training=training)
        if not training or self.rate == 0.0:
            return inputs
        values = self.dropout(inputs.values, training=training)
        return tf.SparseTensor(inputs.indices, values, inputs.dense_shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config
