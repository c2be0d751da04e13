"""Public tests of Lab 3: graph convolution on molecules.

Graded pieces (the notebook cells marked ``# GRADED: <piece>``):

* ``gcn_scalar``: ``gcn_layer_scalar(H, A, W, B, activation=np.tanh)``, one graph
  convolution written node by node: ``h_v' = act(W mean_{u in N(v)} h_u + B h_v)``.
* ``gcn_matrix``: ``gcn_layer_matrix(H, A, W, B, activation=np.tanh)``, the same layer
  as ``act(D^-1 A H W^T + H B^T)``.
* ``gcn_edges``: ``gcn_layer_edges(H, edge_index, W, B, activation=np.tanh)``, the same
  layer as message passing on an edge list (gather, scatter-add, divide by the
  in-degree), with no ``N x N`` matrix: its size test runs it on 3,000 nodes under
  ``tracemalloc`` and refuses a peak above 8 MB, and on 150,000 nodes, where no N x N
  matrix can be allocated (one built in TensorFlow or torch, unseen by tracemalloc).
* ``readout``: ``readout(H, mask, mode)``, sum / mean / max over the real nodes of a
  padded batch.
* ``build_gcn``: ``build_gcn_regressor(num_features, hidden_units, num_layers)``, a
  compiled Keras model on dense batches ``(x, adjacency, mask)``.

Conventions shared with the notebook: node features are rows (``H`` is ``[N, F]``),
``A[v, u] = 1`` when ``u`` is a neighbour of ``v`` (``u`` sends a message to ``v``),
``W`` and ``B`` have shape ``[F_out, F_in]`` so that ``W h`` for a row vector ``h`` is
``h @ W.T``. Inputs are made by the deterministic helpers below, which both halves of a
test call: the probe in the student's process, the judge (with its reference) here.
The ``build_gcn`` judges rebuild the student's model from its architecture and weights
(``_model_checks``), in a sandboxed process of the grader's, and recompute what they
judge there.
"""

from __future__ import annotations

import numpy as np

from lablib.grading.expect import describe, expect_array, expect_number, real_array
from lablib.grading.spec import Mistake, TestFailure, diagnose, expect, expect_close, expect_shape
from lablib.grading.specs._graph_inputs import (
    course_graph,
    graph_from_edges,
    seeded_model,
    to_numpy,
)
from lablib.grading.specs import _model_checks as models
from lablib.grading.specs._cases import add_case_tests
from lablib.grading.specs._gcn_checks import layer_stages, stage_outputs

lab = models.model_lab("lab3_gcn_molecules")


# --------------------------------------------------------------------------- inputs


def layer_weights(f_in=3, f_out=2, seed=3):
    """W, B of shape [f_out, f_in] (different from each other and not square)."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(f_out, f_in)), rng.normal(size=(f_out, f_in))


def isolated_graph():
    """5 nodes, node 4 has no neighbours; features [5, 4]."""
    return graph_from_edges(5, [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)], 4, seed=11)


def directed_graph():
    """A directed graph: A[v, u] = 1 means u sends to v (A is not symmetric)."""
    return graph_from_edges(4, [(0, 1), (0, 2), (1, 2), (3, 2), (2, 0)], 3, seed=5, directed=True)


def random_graph(num_nodes=9, num_features=5, seed=21, p=0.35):
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((num_nodes, num_nodes)) < p, k=1)
    adjacency = (upper | upper.T).astype(float)
    return rng.normal(size=(num_nodes, num_features)), adjacency


def handed_identity(x):  # passed to the student's layer as its activation
    return x


def reference_gcn(features, adjacency, w, b, activation=np.tanh):
    """The judge's reference: act(D^-1 A H W^T + H B^T), isolated nodes get a zero mean."""
    features, adjacency = np.asarray(features, float), np.asarray(adjacency, float)
    degree = adjacency.sum(axis=1, keepdims=True)
    mean = np.divide(
        adjacency @ features, degree, out=np.zeros_like(adjacency @ features), where=degree > 0
    )
    return activation(mean @ np.asarray(w).T + features @ np.asarray(b).T)


#: A product of W (or B) written the wrong way round: NumPy's error, named in plain words.
#: Tied to the tests' weight sizes (F_in -> F_out: 3 -> 2, 4 -> 3, 5 -> 7), so that another
#: product's mismatch is not given this sentence.
TRANSPOSED_WEIGHTS = (
    (
        r"\(size (2 is different from 3|3 is different from 4|7 is different from 5)\)"
        r"|(3 \(dim [01]\) != 2|4 \(dim [01]\) != 3|5 \(dim [01]\) != 7) \(dim 0\)",
        "A matrix product's shapes do not fit: W and B have shape [F_out, F_in] (the "
        "lecture's W h for a column vector h), so a node's row h is multiplied as "
        "h @ W.T (all nodes: H @ W.T), not H @ W.",
    ),
    (
        r"mismatch in its core dimension|shapes .* not aligned",
        "A matrix product's shapes do not fit: the mean of the neighbours is "
        "D^-1 [N, N] @ A [N, N] @ H [N, F_in], and each term then meets its weights "
        "as [N, F_in] @ W.T [F_in, F_out]; check the order of the factors.",
    ),
    (
        r"could not broadcast input array from shape",
        "A row of your output has the wrong length: the output has one row per node "
        "and one column per output feature, np.zeros((N, W.shape[0])), and row v is "
        "W @ mean_v + B @ h_v.",
    ),
    (
        r"tuple index out of range|index \d+ is out of bounds for axis",
        "An index runs past the last node or axis: nodes are 0..N-1 with N = H.shape[0] "
        "(loop over range(N)), features H.shape[1], and edge_index holds node ids "
        "0..N-1.",
    ),
    (
        r"operands could not be broadcast together",
        "Two arrays do not broadcast: a node's neighbour sum has H.shape[1] entries, "
        "and the counts of neighbours divide the sums as a column [N, 1] "
        "(np.bincount(target, minlength=N)[:, None]), one count per node.",
    ),
)

#: Layer cases: (graph builder, layer_weights arguments, activation).
COURSE = (course_graph, (3, 2, 3), np.tanh)
ISOLATED = (isolated_graph, (4, 3, 8), np.tanh)
DIRECTED = (directed_graph, (3, 2, 4), handed_identity)
RANDOM = (random_graph, (5, 7, 9), np.tanh)


def case_inputs(case):
    """(H, A, W, B, activation) of a layer case."""
    graph, weight_args, activation = case
    features, adjacency = graph()
    w, b = layer_weights(*weight_args)
    return features, adjacency, w, b, activation


def run_layer(ns, name, case):
    """Probe side: the student's layer function ``ns[name]`` on a layer case, and on the
    stage graph of :mod:`._gcn_checks` (its output alone, and its parts' runs)."""
    features, adjacency, w, b, activation = case_inputs(case)
    output = ns[name](features, adjacency, w, b, activation=activation)
    return {
        "output": output,
        "stages": stage_outputs(lambda h, a, w_, b_, act: ns[name](h, a, w_, b_, activation=act)),
    }


def _output(got):
    """The layer's output from a probe's value, its parts' runs first checked."""
    if isinstance(got, dict) and "stages" in got:
        models.expect_fields(got, ("output", "stages"), "the layer's output and its parts' runs")
        form = got.get("form") if isinstance(got.get("form"), str) else "matrix"
        layer_stages(got["stages"], form="edges" if form == "edges" else "matrix")
        return got["output"]
    return got


def gcn_mistakes(features, adjacency, w, b, activation=np.tanh):
    """``(output, sentence)`` of the typical mistakes in a mean-aggregation GCN layer."""
    features, adjacency = np.asarray(features, float), np.asarray(adjacency, float)
    w, b = np.asarray(w, float), np.asarray(b, float)
    looped = reference_gcn(features, adjacency + np.eye(len(adjacency)), w, b, activation)
    degree = adjacency.sum(axis=1)
    inverse_sqrt = np.divide(1.0, np.sqrt(degree), out=np.zeros_like(degree), where=degree > 0)
    symmetric = inverse_sqrt[:, None] * adjacency * inverse_sqrt[None, :]
    return [
        (
            looped,
            "The mean includes the node itself (A + I): the course's layer averages the "
            "neighbours u in N(v) only, and adds the node through its own weight B.",
        ),
        (
            activation(symmetric @ features @ w.T + features @ b.T),
            "The neighbours are normalised symmetrically (D^-1/2 A D^-1/2, Kipf & Welling's "
            "form); this layer takes their plain mean, D^-1 A (each row of A divided by its "
            "node's degree).",
        ),
        (
            activation(adjacency @ features @ w.T + features @ b.T),
            "The neighbours are summed, not averaged: divide the sum by the node's degree "
            "(D^-1 A).",
        ),
        (
            activation(features @ w.T + features @ b.T) if w.shape == b.shape else None,
            "The neighbours' mean is missing: W multiplies the node's own features; it must "
            "multiply the mean of its neighbours' (row v of A).",
        ),
        (  # the edge-list form's messages gathered at their targets (after the above: on
            # a graph without isolated nodes the two are one)
            activation(np.where(degree[:, None] > 0, features, 0.0) @ w.T + features @ b.T),
            "Each message is the receiving node's own features (H[edge_index[1]]): the "
            "message on edge e is its source's features, H[edge_index[0, e]], summed at "
            "its target edge_index[1, e].",
        ),
    ]


def judge_course_graph(got):
    """Judge of a layer's output on the course's graph G."""
    got = _output(got)
    expect_shape(got, (6, 2), "output on the course's graph G")
    expect_layer(got, COURSE, "output on the course's graph G")


def expect_layer(got, case, what):
    """A layer's output on ``case``: its known mistakes named (:func:`diagnose_layer`),
    then its values against :func:`reference_gcn`'s (``what`` names it)."""
    diagnose_layer(got, case)
    expect_close(got, reference_gcn(*case_inputs(case)), atol=1e-6, what=what)


def diagnose_layer(got, case) -> None:
    """:func:`diagnose` a layer's output on ``case`` against :func:`gcn_mistakes`."""
    features, adjacency, w, b, activation = case_inputs(case)
    diagnose(
        got,
        gcn_mistakes(features, adjacency, w, b, activation),
        right=reference_gcn(features, adjacency, w, b, activation),
    )


def judge_isolated(got, nan_message):
    """Judge of a layer's output on the graph with an isolated node."""
    got = expect_array(_output(got), (5, 3), "output")
    expect(bool(np.all(np.isfinite(got))), nan_message)
    expect_layer(got, ISOLATED, "output with an isolated node (node 4)")


def padded_batch():
    """Node features [3, 5, 4] and mask [3, 5]: graphs of 5, 3 and 2 real nodes.

    Padding rows hold large values (so a readout that forgets the mask is caught), and
    graph 2's real features are all negative (so a max that lets padding zeros in is
    caught too).
    """
    rng = np.random.default_rng(7)
    features = rng.normal(size=(3, 5, 4))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]], dtype=bool)
    features[2, :2] = -np.abs(features[2, :2]) - 0.5
    features[~mask] = 100.0
    return features, mask


#: The graph of :func:`padded_batch` that :func:`run_readout` empties (all its nodes padding).
EMPTY = 1


def run_readout(ns, mode, empty=False):
    """Probe side: the student's readout of :func:`padded_batch` in ``mode``; with
    ``empty``, {"readout": that, "empty": the readout of the same batch with graph
    :data:`EMPTY` made of padding only (or the name and text of what it raised)}."""
    features, mask = padded_batch()
    pooled = ns["readout"](features, mask, mode)
    if not empty:
        return pooled
    mask[EMPTY] = False
    try:
        without = ns["readout"](features, mask, mode)
    except Exception as error:  # noqa: BLE001 - the judge names what was raised
        without = {"error": type(error).__name__, "text": str(error)[:200]}
    return {"readout": pooled, "empty": without}


def reference_readout(features, mask, mode):
    out = []
    for h, m in zip(features, mask):
        real = h[m]
        out.append({"sum": real.sum(0), "mean": real.mean(0), "max": real.max(0)}[mode])
    return np.stack(out)


def readout_mistakes(features, mask, mode):
    """``(readout, sentence)`` of the typical mistakes in a masked readout."""
    features, mask = np.asarray(features, float), np.asarray(mask, bool)
    zeroed = np.where(mask[..., None], features, 0.0)
    mistakes = [
        (
            {"sum": features.sum(1), "mean": features.mean(1), "max": features.max(1)}[mode],
            "The padding nodes (mask False) were pooled too: leave them out with the mask.",
        ),
    ]
    if mode == "mean":
        mistakes.append(
            (
                zeroed.sum(1) / mask.shape[1],
                "The masked sum is divided by the padded size N; divide by each "
                "graph's number of real nodes (mask.sum(axis=1)).",
            )
        )
    if mode == "max":
        mistakes.append(
            (
                zeroed.max(1),
                "The padding rows were set to 0 before the maximum, so a graph whose "
                "real features are all negative gets 0: use -inf there.",
            )
        )
    return mistakes


def layer_probe(function):
    """Probe side of a layer form on an adjacency matrix: ``run(ns, case)`` runs
    ``ns[function]`` through :func:`run_layer`."""
    return lambda ns, case: run_layer(ns, function, case)


def add_shared_layer_tests(piece, run, prefix, course_hint, isolated_hint, isolated_failure):
    """The two tests the three forms of the layer share, with ``run(ns, case)`` their
    probe side: ``<prefix>_course_graph`` (2 points, the course's worked graph) and
    ``<prefix>_isolated_node`` (1 point, a node of degree 0 must not give NaN);
    ``isolated_failure`` ends the message of the latter."""

    def course_graph(ns):
        return run(ns, COURSE)

    def isolated_node(ns):
        return run(ns, ISOLATED)

    lab.test(piece, points=2, hint=course_hint, name=f"{prefix}_course_graph")(course_graph).judge(
        judge_course_graph
    )
    lab.test(piece, points=1, hint=isolated_hint, name=f"{prefix}_isolated_node")(
        isolated_node
    ).judge(
        lambda got: judge_isolated(
            got, f"The isolated node's output contains NaN or inf: {isolated_failure}"
        )
    )


# --------------------------------------------------------------------------- gcn_scalar

lab.piece(
    "gcn_scalar",
    objects=["gcn_layer_scalar"],
    description="one graph-convolution layer, node by node (mean of neighbours)",
    error_hints=TRANSPOSED_WEIGHTS,
)


add_shared_layer_tests(
    "gcn_scalar",
    layer_probe("gcn_layer_scalar"),
    "scalar",
    course_hint="For every node v, average the rows H[u] of its neighbours (A[v, u] == 1), "
    "then return act(mean @ W.T + H[v] @ B.T).",
    isolated_hint="A node without neighbours has a zero neighbour mean (do not divide by "
    "zero): its output is act(H[v] @ B.T).",
    isolated_failure="its neighbour mean must be zero, not 0/0.",
)


@lab.test(
    "gcn_scalar",
    points=1,
    hint="A[v, u] = 1 means u sends to v: the neighbours of v are the ones in ROW v "
    "of A, not column v. Also apply the activation that is passed in.",
)
def scalar_directed_identity(ns):
    return run_layer(ns, "gcn_layer_scalar", DIRECTED)


@scalar_directed_identity.judge
def _(got):
    got = _output(got)
    features, adjacency, w, b, _ = case_inputs(DIRECTED)
    got = expect_array(got, (4, 2), "output")
    expected = reference_gcn(features, adjacency, w, b, handed_identity)
    if np.allclose(got, reference_gcn(features, adjacency.T, w, b, handed_identity), atol=1e-6):
        raise TestFailure(
            "You aggregated over column v of A (the nodes v sends to); the "
            "neighbours of v are the nodes u with A[v, u] = 1 (row v)."
        )
    if np.allclose(got, np.tanh(expected), atol=1e-6):
        raise TestFailure(
            "activation=identity was passed but tanh was applied: use the `activation` argument."
        )
    expect_layer(got, DIRECTED, "output on a directed graph, no activation")


# --------------------------------------------------------------------------- gcn_matrix

lab.piece(
    "gcn_matrix",
    objects=["gcn_layer_matrix"],
    description="the same layer in matrix form, act(D^-1 A H W^T + H B^T)",
    error_hints=TRANSPOSED_WEIGHTS,
)


add_shared_layer_tests(
    "gcn_matrix",
    layer_probe("gcn_layer_matrix"),
    "matrix",
    course_hint="D is the diagonal matrix of degrees (row sums of A); compute "
    "act(D^-1 @ A @ H @ W.T + H @ B.T).",
    isolated_hint="An isolated node has degree 0: use 1/degree only where degree > 0 and 0 "
    "elsewhere (np.divide(..., where=degree > 0) or np.where).",
    isolated_failure="D^-1 must be 0 (not 1/0) for a node of degree 0.",
)


@lab.test(
    "gcn_matrix",
    points=1,
    hint="Check the convention: A[v, u] = 1 means u sends to v (D^-1 A, not A D^-1 "
    "or A^T), W and B have shape [F_out, F_in], and `activation` is applied.",
)
def matrix_directed_random(ns):
    return [run_layer(ns, "gcn_layer_matrix", case) for case in (DIRECTED, RANDOM)]


@matrix_directed_random.judge
def _(got):
    expect(isinstance(got, list) and len(got) == 2, f"expected two outputs, got {type(got)}")
    got = [_output(g) for g in got]
    expect_layer(got[0], DIRECTED, "output on a directed graph, no activation")
    expect_shape(got[1], (9, 7), "output of a layer with 5 input and 7 output features")
    expect_layer(got[1], RANDOM, "output on a random graph (9 nodes, 5 -> 7 features)")


# --------------------------------------------------------------------------- gcn_edges

#: The graph of ``edges_directed_no_dense``'s size test: many nodes, few edges per node
#: (a molecule's or a citation graph's proportions), where an N x N matrix is the cost.
SPARSE_NODES, SPARSE_EDGES = 3000, 6000
#: What an edge-list layer may allocate on that graph (it needs well under 1 MB; one
#: float64 N x N matrix is 72 MB, an int8 one 9 MB).
SPARSE_PEAK_BYTES = 8 * 2**20
#: The graph the same test runs the layer on besides, where any N x N matrix cannot be
#: allocated (90 GB in float32): tracemalloc sees NumPy's allocations only, and a dense
#: matrix built in TensorFlow or torch passed the size test. The grader's child refuses
#: such an allocation at once (its data limit), as a machine without 40 GB does.
HUGE_NODES, HUGE_EDGES = 150_000, 300_000
#: The rows of the huge graph's output the probe sends back (with the column sums).
HUGE_ROWS = np.arange(0, HUGE_NODES, 997)


def to_edge_index(adjacency):
    """The edge list of a dense adjacency: edge u -> v for every A[v, u] != 0 (row 0
    sources u, row 1 targets v), as lablib and PyTorch Geometric store graphs."""
    target, source = np.nonzero(np.asarray(adjacency))
    return np.stack([source, target]).astype(np.int64)


def sparse_case(nodes=SPARSE_NODES, edges=SPARSE_EDGES):
    """(H, edge_index, W, B) of the size test: random edges, no N x N matrix anywhere."""
    rng = np.random.default_rng(11)
    source = rng.integers(0, nodes, edges)
    target = (source + rng.integers(1, nodes, edges)) % nodes  # no self loops
    pairs = np.unique(np.stack([source, target], axis=1), axis=0)  # no repeated edge
    features = rng.normal(size=(nodes, 3))
    w, b = layer_weights(3, 2, 5)
    return features, pairs.T.copy(), w, b


def run_huge(ns):
    """Probe side: the layer on the graph of :data:`HUGE_NODES` nodes, as {"rows": its
    output's :data:`HUGE_ROWS`, "sums": its column sums}, or {"error": the name and text
    of what it raised} (an N x N matrix cannot be allocated there)."""
    features, edge_index, w, b = sparse_case(HUGE_NODES, HUGE_EDGES)
    try:
        out = np.asarray(ns["gcn_layer_edges"](features, edge_index, w, b), dtype=float)
    except Exception as error:  # noqa: BLE001 - the judge names what was raised
        return {"error": f"{type(error).__name__}: {str(error)[:200]}"}
    if out.ndim != 2 or out.shape[0] != HUGE_NODES:
        return {"shape": list(out.shape)}
    return {"rows": out[HUGE_ROWS], "sums": out.sum(axis=0)}


def judge_huge(got) -> None:
    """The layer on the huge graph: it ran (no N x N matrix) and gave the reference's rows."""
    what = f"a graph of {HUGE_NODES:,} nodes and about {HUGE_EDGES:,} edges"
    if isinstance(got, dict) and isinstance(got.get("error"), str):
        raise Mistake(
            f"Your layer failed on {what} ({got['error'][:200]}): an N x N matrix of it "
            f"needs {HUGE_NODES**2 * 4 / 1e9:.0f} GB even in float32, whether NumPy, "
            "TensorFlow or torch builds it. Work on the edges only: gather "
            "H[edge_index[0]], add the messages at edge_index[1] (np.add.at, or "
            "tf.math.unsorted_segment_sum), count each node's in-degree (np.bincount)."
        )
    if isinstance(got, dict) and "shape" in got:
        raise Mistake(
            f"On {what} your layer returned an array of shape {str(got['shape'])[:100]}: one "
            f"row per node ({HUGE_NODES:,}), one column per output feature."
        )
    models.expect_fields(got, ("rows", "sums"), f"the layer's output on {what}")
    features, edge_index, w, b = sparse_case(HUGE_NODES, HUGE_EDGES)
    right = reference_gcn_edges(features, edge_index, w, b)
    rows = expect_array(got["rows"], right[HUGE_ROWS].shape, f"rows of the output on {what}")
    sums = expect_array(got["sums"], (right.shape[1],), f"column sums of the output on {what}")
    expect_close(rows, right[HUGE_ROWS], atol=1e-6, what=f"rows of the output on {what}")
    expect_close(sums, right.sum(axis=0), rtol=1e-6, atol=1e-5, what=f"column sums on {what}")


def reference_gcn_edges(features, edge_index, w, b, activation=np.tanh):
    """The judge's reference on an edge list (no N x N matrix): the same layer as
    :func:`reference_gcn`."""
    features = np.asarray(features, float)
    source, target = np.asarray(edge_index)
    sums = np.zeros_like(features)
    np.add.at(sums, target, features[source])
    degree = np.bincount(target, minlength=len(features)).astype(float)[:, None]
    mean = np.divide(sums, degree, out=np.zeros_like(sums), where=degree > 0)
    return activation(mean @ np.asarray(w).T + features @ np.asarray(b).T)


def run_edges(ns, case):
    """Probe side: the student's ``gcn_layer_edges`` on a layer case, given as an edge list
    (and on :mod:`._gcn_checks`' stage graph)."""
    features, adjacency, w, b, activation = case_inputs(case)
    output = ns["gcn_layer_edges"](features, to_edge_index(adjacency), w, b, activation=activation)
    return {
        "output": output,
        "form": "edges",
        "stages": stage_outputs(
            lambda h, a, w_, b_, act: ns["gcn_layer_edges"](
                h, to_edge_index(a), w_, b_, activation=act
            )
        ),
    }


lab.piece(
    "gcn_edges",
    objects=["gcn_layer_edges"],
    description="the same layer as message passing on an edge list (gather, scatter-add)",
    error_hints=TRANSPOSED_WEIGHTS,
)


add_shared_layer_tests(
    "gcn_edges",
    run_edges,
    "edges",
    course_hint="messages = H[edge_index[0]] (gather), np.add.at(sums, edge_index[1], messages) "
    "(scatter-add at the targets), divide by np.bincount(edge_index[1], minlength=N), "
    "then act(mean @ W.T + H @ B.T).",
    isolated_hint="A node that no edge points to has a zero neighbour mean: divide only where "
    "its count of incoming edges is above 0.",
    isolated_failure="a node no edge points to has a zero neighbour mean, not 0/0.",
)


@lab.test(
    "gcn_edges",
    points=1,
    timeout=120,
    hint="Edge e goes from edge_index[0, e] to edge_index[1, e]: sum the messages at the "
    "target. Build no N x N matrix: gather, np.add.at and np.bincount need memory "
    "for the edges only.",
)
def edges_directed_no_dense(ns):
    import tracemalloc

    directed = run_edges(ns, DIRECTED)["output"]
    features, edge_index, w, b = sparse_case()
    tracemalloc.start()
    try:
        large = ns["gcn_layer_edges"](features, edge_index, w, b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {"directed": directed, "large": large, "peak": peak, "huge": run_huge(ns)}


@edges_directed_no_dense.judge
def _(got):
    models.expect_fields(got, ("directed", "large", "peak", "huge"))
    features, adjacency, w, b, _ = case_inputs(DIRECTED)
    directed = expect_array(got["directed"], (4, 2), "output on a directed graph")
    peak = expect_number(got["peak"], "the peak memory of the call on the large graph")
    if np.allclose(
        directed, reference_gcn(features, adjacency.T, w, b, handed_identity), atol=1e-6
    ):
        raise Mistake(
            "The messages were summed at the source node (edge_index[0]); edge e "
            "goes from edge_index[0, e] to edge_index[1, e], and each node averages "
            "the messages that arrive at it."
        )
    expect_layer(got["directed"], DIRECTED, "output on a directed graph, no activation")
    features, edge_index, w, b = sparse_case()
    expect_shape(got["large"], (SPARSE_NODES, 2), f"output on a graph of {SPARSE_NODES:,} nodes")
    expect_close(
        got["large"],
        reference_gcn_edges(features, edge_index, w, b),
        atol=1e-6,
        what=f"output on a graph of {SPARSE_NODES:,} nodes and {edge_index.shape[1]:,} edges",
    )
    if peak > SPARSE_PEAK_BYTES:
        raise Mistake(
            f"On a graph of {SPARSE_NODES:,} nodes and {edge_index.shape[1]:,} edges your "
            f"function allocated up to {peak / 2**20:.1f} MB: it builds an N x N matrix "
            f"({SPARSE_NODES:,}² float64 entries are {SPARSE_NODES**2 * 8 / 2**20:.0f} MB; "
            f"100,000 nodes would need 75 GB). Work on the edges only: gather "
            f"H[edge_index[0]], np.add.at at edge_index[1], np.bincount for the counts (an "
            f"edge-list layer needs under 1 MB here)."
        )
    judge_huge(got["huge"])


# --------------------------------------------------------------------------- readout


def readout_stages(got, mode):
    """Name what is wrong in the ``mode`` readout of :func:`padded_batch` (after the
    known mistakes): the axis pooled over, the branch the mode took, the mask, the
    division of the mean, the -inf of the max; quiet when right."""
    features, mask = padded_batch()
    right = reference_readout(features, mask, mode)
    got = real_array(got) if isinstance(got, np.ndarray) else None
    if got is None:
        return
    if got.shape == right.shape and np.allclose(got, right, atol=1e-6):
        return
    if got.ndim == 2 and got.shape != right.shape:
        axis = {(3, 5): "the features (axis -1)", (5, 4): "the graphs of the batch (axis 0)"}.get(
            got.shape
        )
        if axis:
            raise Mistake(
                f"Your {mode} readout has shape {got.shape}: it pools over {axis}; pool "
                "over the nodes of each graph, axis 1, for one vector per graph [batch, F]."
            )
        return
    if got.shape != right.shape:
        return
    if not np.all(np.isfinite(got)):
        raise Mistake(
            f"Your {mode} readout holds NaN or inf: every graph here has real nodes, so "
            "only padding rows may be set to -inf (for the max), and the mean divides by "
            "at least 1."
        )
    real = mask.sum(axis=1, keepdims=True)
    total = reference_readout(features, mask, "sum")
    if mode == "mean":
        for wrong, sentence in [
            (
                total,
                "Your mean readout is the sum of the real nodes: divide it by each graph's "
                "number of real nodes, mask.sum(axis=1, keepdims=True).",
            ),
            (total / real**2, "Your mean readout divides by the number of real nodes twice."),
            (total * real, "Your mean readout multiplies by the number of real nodes: divide."),
        ]:
            if np.allclose(got, wrong, atol=1e-6):
                raise Mistake(sentence)
    for other in ("sum", "mean", "max"):
        if other != mode and np.allclose(got, reference_readout(features, mask, other), atol=1e-6):
            raise Mistake(
                f"readout(H, mask, {mode!r}) returns the {other} readout: check which "
                "branch each mode takes."
            )
    bad = [int(g) for g in np.flatnonzero(~np.all(np.isclose(got, right, atol=1e-6), axis=1))]
    raise Mistake(
        f"Your {mode} readout differs for graph(s) {bad} of the batch (real nodes: "
        f"{[int(n) for n in mask.sum(axis=1)]}): each graph's vector is the {mode} over its real "
        "nodes only (mask True), taken over the node axis (axis 1)."
    )


def _judge_empty_graph(got, mode):
    """The ``mode`` readout of :func:`padded_batch` with graph :data:`EMPTY` emptied: zeros
    for it (the piece's docstring), the other graphs as before."""
    case = f"a batch whose graph {EMPTY} has no real nodes (its mask all False)"
    if isinstance(got, dict) and isinstance(got.get("error"), str):
        raise Mistake(
            f"Your {mode} readout of {case} raised {got['error']}: {got.get('text')!s:.200}. "
            "A graph without real nodes has nothing to pool; give it zeros, as readout's "
            "docstring says."
        )
    got = expect_array(got, (3, 4), f"{mode} readout of {case}")
    row = got[EMPTY]
    if not np.allclose(row, 0.0, atol=1e-12):
        shown = ", ".join(f"{v:.4g}" for v in row[:3]) + (", ..." if row.size > 3 else "")
        raise Mistake(
            f"Graph {EMPTY} has no real nodes (its mask is all False) and your {mode} readout "
            f"gives it [{shown}]; give it zeros, as readout's docstring says"
            + {
                "max": " (the maximum of no values is -inf: np.where(mask.any(axis=1)[:, None], "
                "pooled, 0.0)).",
                "mean": " (its sum over no nodes divided by a count of 0 is 0 / 0, NaN: divide "
                "by np.maximum(count, 1)).",
            }.get(mode, ".")
        )
    right = np.array(reference_readout(*padded_batch(), mode))
    right[EMPTY] = 0.0
    expect_close(got, right, atol=1e-6, what=f"{mode} readout of {case}")


def judge_readout(got, mode, empty, shape_what, what):
    """One readout test's judge: the shape, the known mistakes, the step-by-step diagnosis
    (:func:`readout_stages`), then the values over the real nodes; with ``empty``, the
    same batch with a graph of padding only last (:func:`_judge_empty_graph`)."""
    if empty:
        models.expect_fields(got, ("readout", "empty"), f"the {mode} readouts")
        got, without = got["readout"], got["empty"]
    features, mask = padded_batch()
    table = real_array(got)
    if table is not None and table.ndim == 2 and table.shape != (3, 4):
        readout_stages(got, mode)
    expect_shape(got, (3, 4), shape_what)
    right = reference_readout(features, mask, mode)
    diagnose(got, readout_mistakes(features, mask, mode), right=right)
    readout_stages(got, mode)
    expect_close(got, right, atol=1e-6, what=what)
    if empty:
        _judge_empty_graph(without, mode)


lab.piece(
    "readout",
    objects=["readout"],
    description="sum / mean / max readout over the real nodes of a padded batch",
    error_hints=[
        (
            r"unsupported operand type\(s\)|too many indices|IndexError",
            "Indexing the mask went wrong: mask is [batch, N]; mask[..., None] (or "
            "mask[:, :, None]) makes it [batch, N, 1] to select node rows of H [batch, N, F].",
        ),
        (
            r"operands could not be broadcast together",
            "Two arrays do not broadcast: the mask [batch, N] meets H [batch, N, F] as "
            "mask[..., None], and a graph's count of real nodes divides its sum as a column "
            "[batch, 1] (mask.sum(axis=1, keepdims=True)).",
        ),
    ],
)


add_case_tests(
    lab,
    "readout",
    run_readout,
    judge_readout,
    [
        (
            "readout_sum",
            1,
            "Zero the padding rows (mask False) before summing over the node axis "
            "(axis 1): the result has shape [batch, features].",
            ["sum", False],
            ["sum readout of a batch of 3 graphs with 4 features", "sum over the real nodes"],
        ),
        (
            "readout_mean",
            1,
            "Divide the masked sum by the number of REAL nodes of each graph "
            "(mask.sum(axis=1)), not by the padded size N.",
            ["mean", True],
            ["mean readout", "mean over the real nodes"],
        ),
        (
            "readout_max",
            1,
            "Replace padding rows by -inf (not 0: real features may all be negative) "
            "before taking the maximum over the node axis.",
            ["max", True],
            ["max readout", "max over the real nodes (graph 2 has only negative features)"],
        ),
    ],
)


@lab.test(
    "readout",
    points=1,
    hint="The readout must not depend on the order of the nodes or on where the "
    "padding is; and an unknown mode should raise ValueError.",
)
def readout_permutation_and_mode(ns):
    features, mask = padded_batch()
    order = np.random.default_rng(2).permutation(features.shape[1])
    results = {
        mode: [
            ns["readout"](features, mask, mode),
            ns["readout"](features[:, order], mask[:, order], mode),
        ]
        for mode in ("sum", "mean", "max")
    }
    try:
        ns["readout"](features, mask, "median")
        results["bad_mode"] = "no error"
    except ValueError:
        results["bad_mode"] = "ValueError"
    except Exception as error:  # noqa: BLE001 - report what was raised
        results["bad_mode"] = type(error).__name__
    return results


@readout_permutation_and_mode.judge
def _(got):
    models.expect_fields(got, ("sum", "mean", "max", "bad_mode"))
    features, mask = padded_batch()
    order = np.random.default_rng(2).permutation(features.shape[1])
    expect(
        isinstance(got["bad_mode"], str),
        f"what readout(..., mode='median') raised: expected the error's name, got "
        f"{describe(got['bad_mode'])}",
    )
    for mode in ("sum", "mean", "max"):
        expect(
            isinstance(got[mode], (list, tuple)) and len(got[mode]) == 2,
            f"{mode}: expected two readouts (original order, shuffled nodes).",
        )
        original, permuted = got[mode]
        diagnose(
            original,
            readout_mistakes(features, mask, mode),
            right=reference_readout(features, mask, mode),
        )
        # Both readouts are compared with the grader's own, so equal constants fail.
        expect_close(
            original,
            reference_readout(features, mask, mode),
            atol=1e-6,
            what=f"{mode} readout over the real nodes",
        )
        expect_close(
            permuted,
            reference_readout(features[:, order], mask[:, order], mode),
            atol=1e-6,
            what=f"{mode} readout of the shuffled nodes",
        )
        expect_close(
            permuted,
            original,
            atol=1e-6,
            what=f"{mode} readout after shuffling the nodes (and the padding)",
        )
    expect(
        got["bad_mode"] == "ValueError",
        f"readout(..., mode='median') should raise ValueError, got {got['bad_mode']}.",
    )


# --------------------------------------------------------------------------- build_gcn

models.add_model_piece(
    lab,
    "build_gcn",
    "build_gcn_regressor",
    "a compiled Keras GCN regressor on dense (x, adjacency, mask) batches",
)

NUM_FEATURES = 4


def synthetic_molecules(seed=0, batch=16, max_nodes=7):
    """A padded batch of small random graphs and a learnable target.

    Returns x [batch, max_nodes, 4], adjacency, mask (bool), y [batch, 1] where y is a
    smooth function of the graph (number of atoms, features and bonds).
    """
    rng = np.random.default_rng(seed)
    x = np.zeros((batch, max_nodes, NUM_FEATURES), np.float32)
    adjacency = np.zeros((batch, max_nodes, max_nodes), np.float32)
    mask = np.zeros((batch, max_nodes), bool)
    y = np.zeros((batch, 1), np.float32)
    for g in range(batch):
        n = int(rng.integers(3, max_nodes + 1))
        mask[g, :n] = True
        x[g, :n] = rng.normal(size=(n, NUM_FEATURES))
        for v in range(1, n):  # a random tree plus a chord: connected graphs
            u = int(rng.integers(0, v))
            adjacency[g, u, v] = adjacency[g, v, u] = 1
        if n > 3:
            adjacency[g, 0, n - 1] = adjacency[g, n - 1, 0] = 1
        y[g, 0] = 0.3 * n + x[g, :n, 0].sum() * 0.5 + 0.1 * adjacency[g].sum()
    y = (y - y.mean()) / y.std()
    return x, adjacency, mask, y


def structure_inputs():
    """The named (x, adjacency, mask) batches of ``gcn_structure``, built by both halves.

    ``output``: 6 synthetic molecules; ``permuted``: the atoms of every molecule (padding
    included) reordered; ``garbage_padding``: padding rows hold 50.0; ``wider_padding``:
    3 more padding nodes; ``edge_removed``: one bond of molecule 0 cut.
    """
    x, adjacency, mask, _ = synthetic_molecules(seed=1, batch=6)
    x, adjacency = x.astype(np.float32), adjacency.astype(np.float32)
    rng = np.random.default_rng(4)
    perm = np.stack([rng.permutation(x.shape[1]) for _ in range(x.shape[0])])
    rows = np.arange(x.shape[0])[:, None]
    xg = x.copy()
    xg[~mask] = 50.0
    ac = adjacency.copy()
    u, v = np.argwhere(np.triu(ac[0]) > 0)[0]
    ac[0, u, v] = ac[0, v, u] = 0
    return {
        "output": (x, adjacency, mask),
        "permuted": (
            x[rows, perm],
            adjacency[rows[:, :, None], perm[:, :, None], perm[:, None, :]],
            mask[rows, perm],
        ),
        "garbage_padding": (xg, adjacency, mask),
        "wider_padding": (
            np.pad(x, ((0, 0), (0, 3), (0, 0))),
            np.pad(adjacency, ((0, 0), (0, 3), (0, 3))),
            np.pad(mask, ((0, 0), (0, 3))),
        ),
        "edge_removed": (x, ac, mask),
    }


@lab.test(
    "build_gcn",
    points=2,
    timeout=300,
    hint="Stack GraphConv layers (pass adjacency= and mask=), then a masked readout "
    "(GraphReadout) and Dense layers; outputs [batch, 1]. Return the model "
    "compiled (optimizer, loss='mse'). The grader rebuilds your model from "
    "model.to_json() and its weights; a layer class of your own cannot be "
    "rebuilt, and is then judged only on what your process reports.",
)
def gcn_structure(ns):
    model = seeded_model(ns["build_gcn_regressor"], NUM_FEATURES, hidden_units=16, num_layers=2)
    got = {
        name: to_numpy(model(list(inputs), training=False))
        for name, inputs in structure_inputs().items()
    }
    got.update(models.describe_model(model))
    got["compiled"] = bool(
        getattr(model, "optimizer", None) is not None and getattr(model, "loss", None) is not None
    )
    got["num_inputs"] = len(model.inputs)
    return got


#: The inputs of :func:`structure_inputs` on which the prediction must not change, and
#: how the judge names each.
INVARIANCES = (
    (
        "permuted",
        "prediction after reordering the atoms of every molecule "
        "(the model must be permutation invariant)",
    ),
    (
        "garbage_padding",
        "prediction when padding nodes hold garbage features (use the mask "
        "in every layer and in the readout)",
    ),
    ("wider_padding", "prediction with 3 more padding nodes per graph"),
)


def judge_structure_values(values):
    """The checks of ``gcn_structure`` on outputs keyed like :func:`structure_inputs`."""
    output = expect_array(values["output"], (6, 1), "model output for a batch of 6 graphs")
    scale = max(1.0, float(np.max(np.abs(output))))
    for key, what in INVARIANCES:
        expect_close(values[key], output, atol=1e-4 * scale, what=what)
    removed = expect_array(values["edge_removed"], (6, 1), "model output after removing a bond")
    change = float(np.max(np.abs(removed[0] - output[0])))
    expect(
        change > 1e-6,
        "Removing a bond did not change the prediction: the model must "
        "use the adjacency matrix (graph convolutions), not only the node features.",
    )
    others = float(np.max(np.abs(removed[1:] - output[1:])))
    expect(
        others < 1e-4 * scale,
        "Removing a bond of molecule 0 changed the predictions for "
        "other molecules: graphs of a batch must not exchange messages.",
    )


@gcn_structure.judge
def _(got):
    inputs = structure_inputs()
    models.expect_fields(got, ("architecture", "weights", "compiled", "num_inputs", *inputs))
    for name in inputs:
        expect(isinstance(got[name], np.ndarray), f"{name}: expected an array of predictions.")
    model = models.rebuild_compiled_model(
        got,
        "build_gcn_regressor",
        3,
        "x, adjacency, mask",
        "call model.compile(optimizer=..., loss='mse')",
    )
    if model is None:  # a layer class of the student's own: reported values only
        judge_structure_values(got)
        return
    recomputed = {name: models.run_model(model, list(batch)) for name, batch in inputs.items()}
    expect_shape(recomputed["output"], (6, 1), "model output for a batch of 6 graphs")
    for name, value in recomputed.items():
        models.expect_reported(got[name], value, f"prediction ({name.replace('_', ' ')})")
    judge_structure_values(recomputed)


def learning_batch():
    """The training batch of ``gcn_learns``: ([x, adjacency, mask], y)."""
    x, adjacency, mask, y = synthetic_molecules(seed=0, batch=32)
    return [x, adjacency, mask], y


def learning_model(ns):
    """The model of ``gcn_learns``: the student's regressor, seeded."""
    return seeded_model(ns["build_gcn_regressor"], NUM_FEATURES, hidden_units=32, num_layers=2)


models.add_learning_test(
    lab,
    "build_gcn",
    "gcn_learns",
    "The model should fit a small synthetic data set: check the loss, the "
    "optimizer (Adam, learning rate around 1e-3) and that every layer is trainable.",
    (learning_model, learning_batch, "a small synthetic batch"),
)


lab.answer(
    "readout_choice",
    points=4,
    title="section 4: sum or mean readout for solubility",
    rubric=[
        (
            1,
            "Solubility depends on the molecule's size: more (carbon) atoms, a larger non-polar surface, a "
            "lower log solubility (section 5's plot: correlation about -0.6 with the number of atoms); it is "
            "not a per-atom average. An answer that argues instead that solubility depends on composition "
            "(the share of polar atoms, which a mean captures) earns this point only if it also says that "
            "size matters, from the plot or from chemistry.",
        ),
        (
            1,
            "A sum readout grows with the number of atoms, so the model can read the size from it.",
        ),
        (
            1,
            "A mean (or max) readout gives the same vector for a molecule and one made of two copies of it: "
            "it cannot see the size unless a feature carries it. (An answer that says the mean captures "
            "composition earns this point when it also names what the mean loses: the count.)",
        ),
        (
            1,
            "A conclusion that follows from the argument: sum (the lab's choice), or a mean with the atom "
            "count as an extra feature, or both readouts concatenated. 'Mean, because it captures "
            "composition' without a way to see the size does not earn it.",
        ),
        (0, "No answer."),
    ],
)
