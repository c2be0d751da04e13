"""Lab 3's graph-convolution pieces (node by node, matrix form, edge list): which part of
the student's layer went wrong.

The layer is ``act(mean_{u in N(v)} h_u W^T + h_v B^T)``. The probe runs the student's
function four more times on one small directed graph (:data:`STAGE_GRAPH`: row sums and
column sums of A differ, node 3 has no neighbours), each time with weights that show one
part of the layer alone: ``W = 0`` leaves the self term ``H B^T``, ``W = I, B = 0`` the
neighbours' mean itself, both random the linear layer, and ``tanh`` its activation.
:func:`layer_stages` compares each with the judge's own and names the first part that
is wrong, and the usual mistake in it where it is one of them.
"""

from __future__ import annotations

import numpy as np

from lablib.grading.expect import Mistake, real_array

__all__ = ["STAGE_GRAPH", "handed_linear", "layer_stages", "stage_outputs"]

#: A[v, u] = 1: u is a neighbour of v (u sends to v). Node 3 has none; degrees by row
#: (2, 1, 3, 0, 1) differ from those by column (2, 2, 2, 1, 0).
STAGE_GRAPH = np.array(
    [[0, 1, 1, 0, 0], [0, 0, 1, 0, 0], [1, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]],
    dtype=float,
)


def handed_linear(x):  # the activation handed to the student's layer: none
    return x


def _inputs():
    rng = np.random.default_rng(31)
    features = rng.normal(size=(5, 3))
    w, b = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    return features, w, b


#: The probe's runs: (name, W, B, activation) built from :func:`_inputs`.
def _runs():
    features, w, b = _inputs()
    zero, eye = np.zeros((3, 3)), np.eye(3)
    return features, [
        ("self", zero, b, handed_linear),
        ("neighbours", eye, zero, handed_linear),
        ("linear", w, b, handed_linear),
        ("activated", w, b, np.tanh),
    ]


def stage_outputs(call):
    """(Probe side.) ``call(H, A, W, B, activation)`` runs the student's layer in its own
    form (an edge list is built from A by the caller); returns each run's output, or the
    error's type name."""
    features, runs = _runs()
    outputs = {}
    for name, w, b, activation in runs:
        try:
            outputs[name] = np.asarray(
                call(features.copy(), STAGE_GRAPH.copy(), w.copy(), b.copy(), activation),
                dtype=float,
            )
        except Exception as error:  # noqa: BLE001 - the value tests report the error itself
            outputs[name] = type(error).__name__
    return outputs


def _mean(adjacency, features, degree=None):
    degree = adjacency.sum(axis=1) if degree is None else degree
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    return inverse[:, None] * (adjacency @ features)


def _close(a, b):
    return np.shape(a) == np.shape(b) and bool(np.allclose(a, b, rtol=1e-6, atol=1e-8))


def layer_stages(outputs, form="matrix"):
    """(Judge side.) Name the part of the layer that is wrong; quiet when every run is
    right or one raised (the value tests report errors with their hints). ``form``:
    "edges" words the neighbours as an edge list's messages."""
    runs = ("self", "neighbours", "linear", "activated")
    if not isinstance(outputs, dict) or set(outputs) != set(runs):
        return  # not what the probe sends: the value tests judge the reply
    outputs = {
        name: real_array(v) if isinstance(v, np.ndarray) else None for name, v in outputs.items()
    }
    if any(v is None for v in outputs.values()):
        return
    _shape_stage(outputs)
    features, w, b = _inputs()
    mean = _mean(STAGE_GRAPH, features)
    _self_stage(outputs["self"], features, b, mean)
    _neighbour_stage(outputs["neighbours"], features, mean, form)
    _linear_stage(outputs["linear"], features, w, b, mean)
    _activation_stage(outputs["activated"], features, w, b, mean)


def _first_match(got, candidates):
    """Raise the sentence of the first ``(wrong, sentence)`` whose value ``got`` is."""
    for wrong, sentence in candidates:
        if wrong is not None and _close(got, wrong):
            raise Mistake(sentence)


def _shape_stage(outputs):
    shape = next((v.shape for v in outputs.values() if v.shape != (5, 3)), None)
    if shape is None:
        return
    if len(shape) != 2 or shape[0] != 5:
        raise Mistake(
            f"Your layer returns an array of shape {shape} for a graph of 5 nodes: one "
            "row per node (H.shape[0] rows), one column per output feature."
        )
    raise Mistake(
        f"Your layer returns {shape[1]} columns where W has 3 rows: the output has "
        "one column per output feature, W.shape[0]."
    )


def _self_stage(got, features, b, mean):
    """The run with W = 0: the self term H @ B.T alone."""
    if _close(got, features @ b.T):
        return
    _first_match(
        got,
        [
            (
                np.zeros_like(got),
                "With W = 0 your layer returns 0: the self term B h_v (H @ B.T) "
                "is missing from the sum.",
            ),
            (
                features @ b,
                "B is applied transposed: the self term of node v is B @ h_v, which "
                "is row v of H @ B.T.",
            ),
            (
                mean @ b.T,
                "B multiplies the neighbours' mean: it belongs to the node's own "
                "features, H @ B.T, and W to the mean.",
            ),
        ],
    )
    raise Mistake(
        "With W = 0 (no neighbour term) your layer's output is not H @ B.T, the "
        "self term B h_v of each node: check that term."
    )


def _neighbour_stage(got, features, mean, form):
    """The run with W = I and B = 0: the neighbours' mean itself."""
    if _close(got, mean):
        return
    a = STAGE_GRAPH
    if not np.all(np.isfinite(got)):
        raise Mistake(
            "Node 3 has no neighbours and your layer gives it NaN or inf: its "
            "neighbours' mean is 0 (divide only where the degree is above 0)."
        )
    degree = a.sum(axis=1)
    inverse_sqrt = np.divide(1.0, np.sqrt(degree), out=np.zeros_like(degree), where=degree > 0)
    looped_sqrt = 1.0 / np.sqrt(degree + 1.0)  # the degrees of A~ = A + I
    reversed_sentence = (
        "The messages were summed at the source node (edge_index[0]); edge e goes from "
        "edge_index[0, e] to edge_index[1, e], and each node averages the messages that arrive "
        "at it."
        if form == "edges"
        else "The neighbours are taken from column v of A (the nodes v sends to); "
        "N(v) = {u : A[v, u] != 0} is row v."
    )
    _first_match(
        got,
        [
            (
                a @ features,
                "The neighbours are summed, not averaged: divide the sum of row v's "
                "neighbours by their number, the degree (D^-1 A).",
            ),
            (
                _mean(a + np.eye(5), features),
                "The mean includes the node itself (A + I): the layer "
                "averages the neighbours u in N(v) only; the node "
                "enters through its own weight B.",
            ),
            (_mean(a.T, features), reversed_sentence),
            (
                _mean(a, features, a.sum(axis=0)),
                "The sum over row v's neighbours is divided by column "
                "v's total (how many nodes v sends to); divide by row "
                "v's, v's own number of neighbours.",
            ),
            (
                inverse_sqrt[:, None] * a * inverse_sqrt[None, :] @ features,
                "The neighbours are normalised symmetrically (D^-1/2 A D^-1/2, Kipf & Welling's form); "
                "this layer takes their plain mean, D^-1 A.",
            ),
            (
                looped_sqrt[:, None] * (a + np.eye(5)) * looped_sqrt[None, :] @ features,
                "The node and its neighbours are normalised symmetrically, D~^-1/2 (A + I) "
                "D~^-1/2 (Kipf & Welling's GCN, as the lecture writes it); this layer takes "
                "the plain mean of the neighbours alone, D^-1 A, and adds the node through "
                "its own weight B.",
            ),
            (_mean(a.T, features, degree), reversed_sentence),  # the degree of row v kept
            (
                np.where(degree[:, None] > 0, features, 0.0) if form == "edges" else None,
                "Each message is the receiving node's own features (H[edge_index[1]]): the "
                "message on edge e is its source's features, H[edge_index[0, e]], summed at "
                "its target edge_index[1, e].",
            ),
            (
                features,
                "W multiplies the node's own features: it must multiply the mean of its "
                "neighbours' (row v of A).",
            ),
        ],
    )
    node = int(np.argmax(np.abs(got - mean).max(axis=1)))
    raise Mistake(
        f"With W = I and B = 0 the layer's output is each node's neighbour mean: for node "
        f"{node} of this graph (neighbours {[int(u) for u in np.flatnonzero(a[node])]}) it is "
        f"{np.round(mean[node], 4).tolist()}, yours {np.round(got[node], 4).tolist()}: "
        "check the sum over row v of A and the count you divide it by."
    )


def _linear_stage(got, features, w, b, mean):
    """The run with both weights and no activation: the sum of the two terms."""
    if _close(got, mean @ w.T + features @ b.T):
        return
    _first_match(
        got,
        [
            (
                mean @ w + features @ b.T,
                "W is applied transposed: the neighbour term of node v is "
                "W @ mean_v, row v of mean @ W.T.",
            ),
            (
                mean @ b.T + features @ w.T,
                "W and B are swapped: W weighs the neighbours' mean, B the node's own features.",
            ),
        ],
    )
    raise Mistake(
        "Each term is right alone (with W = 0, and with B = 0), but not their sum: "
        "the layer is act(mean @ W.T + H @ B.T), one sum of the two terms."
    )


def _activation_stage(got, features, w, b, mean):
    """The run with tanh: the activation, once, on the sum."""
    linear = mean @ w.T + features @ b.T
    if _close(got, np.tanh(linear)):
        return
    _first_match(
        got,
        [
            (linear, "The activation passed in is not applied: return activation(...) of the sum."),
            (
                np.tanh(np.tanh(linear)),
                "The activation is applied twice: once, to the sum of both terms.",
            ),
            (
                np.tanh(mean @ w.T) + features @ b.T,
                "The activation is applied to the neighbour term "
                "only: apply it to the sum, "
                "act(mean @ W.T + H @ B.T).",
            ),
        ],
    )
    raise Mistake(
        "The layer is right without an activation but not with tanh: apply the "
        "activation passed in once, to the sum of both terms."
    )
