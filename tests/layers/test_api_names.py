"""One API dialect, Keras's: every public layer's constructor and call arguments are
read here, and the names lablib used before 0.2 (Model Garden's, PyG's, its own) fail
the test unless they are the deprecated aliases listed in ``lablib._deprecation.RENAMED``,
each of which must warn and still work."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from lablib import LablibDeprecationWarning, graphs, layers
from lablib._deprecation import REMOVED_IN, RENAMED
from lablib.data.cora import CoraData
from lablib.data.graph_dataset import GraphDataset

#: Names of the old dialects that no signature may carry (aliases live in **kwargs).
OLD_DIALECT = {
    "num_attention_heads",  # Model Garden's; Keras says num_heads
    "return_attention_coefficients",  # lablib 0.1's; Keras says return_attention_scores
    "edge_attrs",  # edge features are edge_attr everywhere
    "decoder_inputs",  # a layer's first call argument is inputs
    "decoder_inputs_mask",
    "dense",  # one return type per method
}

ATTENTION_LAYERS = ("TransformerEncoderBlock", "TransformerDecoderBlock", "GraphAttention")


def _public_layers():
    from lablib.backend import get_keras

    keras = get_keras()
    found = [getattr(layers, name) for name in layers.__all__]
    return [obj for obj in found if inspect.isclass(obj) and issubclass(obj, keras.layers.Layer)]


def _parameters(function):
    return [
        p
        for p in inspect.signature(function).parameters.values()
        if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]


def _places():
    """Every public callable whose argument names users type: ``(where, function)``."""
    for cls in _public_layers():
        yield f"{cls.__name__}.__init__", cls.__init__
        yield f"{cls.__name__}.call", cls.call
    for name in graphs.__all__:
        if inspect.isfunction(getattr(graphs, name)):
            yield name, getattr(graphs, name)
    for method in ("dense_dataset", "disjoint_dataset"):
        yield f"GraphDataset.{method}", getattr(GraphDataset, method)
    yield "CoraData.adjacency", CoraData.adjacency
    yield "CoraData.sparse_adjacency", CoraData.sparse_adjacency


def test_no_signature_speaks_an_old_dialect():
    places = dict(_places())
    assert len(_public_layers()) == 8
    assert len(places) >= 2 * len(_public_layers()) + 6
    offences = []
    for where, function in places.items():
        names = {p.name for p in _parameters(function)}
        renamed_here = set(RENAMED.get(where, {}))
        for name in sorted(names & (OLD_DIALECT | renamed_here)):
            offences.append(f"{where}({name}=...)")
    assert not offences, "old argument names in signatures: " + ", ".join(offences)


def test_every_rename_points_at_a_real_place():
    places = dict(_places())
    for where, renames in RENAMED.items():
        assert where in places, where
        names = {p.name for p in _parameters(places[where])}
        for new in renames.values():
            if new.isidentifier():
                assert new in names, f"{where}: the new name {new} is not an argument"


@pytest.mark.parametrize("cls", _public_layers(), ids=lambda cls: cls.__name__)
def test_every_layer_is_called_keras_style(cls):
    parameters = _parameters(cls.call)
    assert parameters[0].name == "inputs", f"{cls.__name__}.call starts with {parameters[0].name}"
    names = [p.name for p in parameters]
    assert "training" in names, f"{cls.__name__}.call has no training argument"
    if cls.__name__ in ATTENTION_LAYERS:
        assert "return_attention_scores" in names
        assert "return_attention_scores" not in [p.name for p in _parameters(cls.__init__)]
        assert "num_heads" in [p.name for p in _parameters(cls.__init__)]


# --------------------------------------------------------------------------- arity


def _graph():
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(n, 3)).astype("float32") for n in (4, 3)]
    es = [np.array([[0, 1, 2, 3], [1, 2, 3, 0]]), np.array([[0, 1], [1, 2]])]
    return xs, es


def test_return_arity_is_set_by_the_flag_alone():
    import tensorflow as tf

    xs, es = _graph()
    dense, disjoint = graphs.dense_batch(xs, es), graphs.disjoint_batch(xs, es)
    gat = layers.GraphAttention(2, num_heads=2)
    for call in (
        lambda **k: gat(dense.x, adjacency=dense.adjacency, mask=dense.mask, **k),
        lambda **k: gat(disjoint.x, edge_index=disjoint.edge_index, **k),
    ):
        assert tf.is_tensor(call())
        assert tf.is_tensor(call(return_attention_scores=False))
        out, scores = call(return_attention_scores=True)
        assert tf.is_tensor(out)
    _, scores = gat(disjoint.x, edge_index=disjoint.edge_index, return_attention_scores=True)
    edge_index, alpha = scores  # sparse scores: (edge_index with the self loops, alpha)
    assert edge_index.shape[1] == alpha.shape[0] == disjoint.edge_index.shape[1] + len(disjoint.x)

    x = np.random.default_rng(1).normal(size=(2, 4, 8)).astype("float32")
    encoder = layers.TransformerEncoderBlock(num_heads=2, inner_dim=8, inner_activation="relu")
    assert tf.is_tensor(encoder(x))
    assert len(encoder(x, return_attention_scores=True)) == 2
    decoder = layers.TransformerDecoderBlock(num_heads=2, inner_dim=8, inner_activation="relu")
    assert tf.is_tensor(decoder(x, x))
    assert len(decoder(x, x, return_attention_scores=True)) == 3


# --------------------------------------------------------------------------- aliases


def _alias_calls():
    """``(where, old, call with the old name, call with the new one)`` for every alias."""
    xs, es = _graph()
    fs = [np.ones((e.shape[1], 2), "float32") for e in es]
    x = np.random.default_rng(2).normal(size=(2, 4, 8)).astype("float32")
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], bool)
    dataset = GraphDataset(xs, es, np.array([0.5, 1.5], "float32"), edge_attr=fs)
    disjoint = graphs.disjoint_batch(xs, es)
    edge_index = disjoint.edge_index
    cora = CoraData(
        x=np.eye(3, dtype="float32"),
        y=np.zeros(3, "int64"),
        edge_index=np.array([[0, 1], [1, 2]]),
        train_mask=np.ones(3, bool),
        val_mask=np.zeros(3, bool),
        test_mask=np.zeros(3, bool),
    )

    def block(cls, **k):
        return cls(inner_dim=8, inner_activation="relu", **k)

    gat = layers.GraphAttention(2, num_heads=2)
    decoder = layers.TransformerDecoderBlock(2, 8, "relu")
    return [
        (
            "TransformerEncoderBlock.__init__",
            "num_attention_heads",
            lambda: block(layers.TransformerEncoderBlock, num_attention_heads=2).num_heads,
            lambda: block(layers.TransformerEncoderBlock, num_heads=2).num_heads,
        ),
        (
            "TransformerDecoderBlock.__init__",
            "num_attention_heads",
            lambda: block(layers.TransformerDecoderBlock, num_attention_heads=2).num_heads,
            lambda: block(layers.TransformerDecoderBlock, num_heads=2).num_heads,
        ),
        (
            "TransformerEncoderBlock.__init__",
            "return_attention_scores",
            lambda: len(
                block(layers.TransformerEncoderBlock, num_heads=2, return_attention_scores=True)(x)
            ),
            lambda: len(
                block(layers.TransformerEncoderBlock, num_heads=2)(x, return_attention_scores=True)
            ),
        ),
        (
            "TransformerDecoderBlock.__init__",
            "return_attention_scores",
            lambda: len(
                block(layers.TransformerDecoderBlock, num_heads=2, return_attention_scores=True)(
                    x, x
                )
            ),
            lambda: len(
                block(layers.TransformerDecoderBlock, num_heads=2)(
                    x, x, return_attention_scores=True
                )
            ),
        ),
        (
            "TransformerDecoderBlock.call",
            "decoder_inputs_mask",
            lambda: decoder(x, x, decoder_inputs_mask=mask),
            lambda: decoder(x, x, inputs_mask=mask),
        ),
        (
            "GraphAttention.call",
            "return_attention_coefficients",
            lambda: gat(disjoint.x, edge_index=edge_index, return_attention_coefficients=True),
            lambda: (lambda out, s: (out, s.alpha, s.edge_index))(
                *gat(disjoint.x, edge_index=edge_index, return_attention_scores=True)
            ),
        ),
        (
            "dense_batch",
            "edge_attrs",
            lambda: graphs.dense_batch(xs, es, edge_attrs=fs),
            lambda: graphs.dense_batch(xs, es, edge_attr=fs),
        ),
        (
            "disjoint_batch",
            "edge_attrs",
            lambda: graphs.disjoint_batch(xs, es, edge_attrs=fs),
            lambda: graphs.disjoint_batch(xs, es, edge_attr=fs),
        ),
        (
            "GraphDataset.dense_dataset",
            "edge_attr",
            lambda: next(iter(dataset.dense_dataset(2, edge_attr=True)))[0],
            lambda: next(iter(dataset.dense_dataset(2, with_edge_attr=True)))[0],
        ),
        (
            "GraphDataset.disjoint_dataset",
            "edge_attr",
            lambda: next(iter(dataset.disjoint_dataset(2, edge_attr=True)))[0],
            lambda: next(iter(dataset.disjoint_dataset(2, with_edge_attr=True)))[0],
        ),
        (
            "CoraData.adjacency",
            "dense",
            lambda: cora.adjacency(dense=False).toarray(),
            lambda: cora.sparse_adjacency().toarray(),
        ),
    ]


def _same(old, new):
    if isinstance(old, (tuple, list)):
        assert len(old) == len(new)
        for a, b in zip(old, new):
            _same(a, b)
    else:
        np.testing.assert_allclose(np.asarray(old), np.asarray(new), atol=1e-6)


def test_every_alias_warns_and_gives_what_the_new_name_gives():
    calls = _alias_calls()
    covered = {(where, old) for where, old, _, _ in calls}
    listed = {(where, old) for where, renames in RENAMED.items() for old in renames}
    assert covered == listed, f"aliases without a test: {listed - covered}"
    for _where, old, old_call, new_call in calls:
        with pytest.warns(LablibDeprecationWarning, match=f"`{old}` is deprecated") as record:
            got = old_call()
        assert f"lablib {REMOVED_IN}" in str(record[0].message)
        _same(got, new_call())


def test_the_old_names_are_gone_by_the_release_their_warning_names():
    """The deprecation promise is kept: while the old names exist, the package's version
    is below the release the warning announces (bump REMOVED_IN, or remove the names and
    RENAMED's entries, before releasing that version)."""
    from lablib._version import __version__

    release = tuple(int(part) for part in __version__.split(".")[:2])
    removed_in = tuple(int(part) for part in REMOVED_IN.split(".")[:2])
    assert RENAMED and release < removed_in, (__version__, REMOVED_IN)
