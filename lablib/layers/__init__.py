"""Keras layers for the course, written once for Keras 3 and tf_keras.

Importing a layer resolves the Keras mode (see :mod:`lablib.backend`); call
``lablib.use_legacy_keras()`` before that if you need tf_keras.

Sequence layers: :func:`scaled_dot_product_attention`, :func:`causal_mask`,
:func:`positional_encoding`, :class:`PositionalEncoding`,
:class:`TokenAndPositionEmbedding`, :class:`TransformerEncoderBlock`,
:class:`TransformerDecoderBlock`.

Graph layers (dense ``x [B, N, F]`` + ``adjacency [B, N, N]`` + ``mask [B, N]``, or
disjoint ``x [V, F]`` + ``edge_index [2, E]``): :class:`GraphConv`,
:class:`GraphAttention`, :class:`GraphReadout`; :class:`SparseDropout` for sparse node
features (``tf.SparseTensor``).
"""

from lablib._lazy import lazy_exports

_EXPORTS = {
    "scaled_dot_product_attention": "attention",
    "causal_mask": "attention",
    "padding_mask": "attention",
    "positional_encoding": "positional",
    "PositionalEncoding": "positional",
    "TokenAndPositionEmbedding": "positional",
    "TransformerEncoderBlock": "transformer",
    "TransformerDecoderBlock": "transformer",
    "GraphConv": "graph_conv",
    "GraphAttention": "graph_attention",
    "GraphReadout": "readout",
    "SparseDropout": "dropout",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports('lablib.layers', _EXPORTS, globals())
