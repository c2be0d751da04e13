"""Keras layers for the course, written once for Keras 3 and tf_keras.

Importing a layer resolves the Keras mode (see :mod:`lablib.backend`); call
``lablib.use_legacy_keras()`` before that if you need tf_keras.

Sequence layers: :func:`scaled_dot_product_attention`, :func:`causal_mask`,
:func:`padding_mask`, :func:`masked_softmax` (also dense graph attention's softmax),
:func:`positional_encoding`, :class:`PositionalEncoding`,
:class:`TokenAndPositionEmbedding`, :class:`TransformerEncoderBlock`,
:class:`TransformerDecoderBlock`.

Graph layers (dense ``x [B, N, F]`` + ``adjacency [B, N, N]`` + ``mask [B, N]``, or
disjoint ``x [V, F]`` + ``edge_index [2, E]``): :class:`GraphConv`,
:class:`GraphAttention` (its sparse scores: :class:`EdgeAttention`),
:class:`GraphReadout`; :class:`SparseDropout` for sparse node features
(``tf.SparseTensor``).
"""

from lablib._lazy import lazy_exports

_MODULES = {  # submodule: the names it exports
    "attention": ("scaled_dot_product_attention", "causal_mask", "padding_mask", "masked_softmax"),
    "positional": ("positional_encoding", "PositionalEncoding", "TokenAndPositionEmbedding"),
    "transformer": ("TransformerEncoderBlock", "TransformerDecoderBlock"),
    "graph_conv": ("GraphConv",),
    "graph_attention": ("GraphAttention", "EdgeAttention"),
    "readout": ("GraphReadout",),
    "dropout": ("SparseDropout",),
}

__getattr__, __dir__, __all__ = lazy_exports("lablib.layers", _MODULES, globals())
