"""Public tests of Lab 4: graph attention networks.

Graded pieces (the notebook cells marked ``# GRADED: <piece>``):

* ``gat_attention``: ``gat_attention(H, A, W, a, negative_slope=0.2) -> (alpha, H_out)``,
  one attention head in NumPy: ``z_i = W h_i``,
  ``e_ij = LeakyReLU(a^T [z_i || z_j])`` for ``j`` in ``N(i) + {i}``,
  ``alpha_ij = softmax_j(e_ij)``, ``h_i' = sum_j alpha_ij z_j`` (no activation).
* ``multi_head_gat``: ``multi_head_gat(H, A, Ws, As, concat=True)``, several heads
  concatenated (hidden layers) or averaged (output layer).
* ``build_gat``: ``build_gat_classifier(num_features, num_classes, hidden_units=8,
  num_heads=8, dropout=0.6)``, a compiled Keras node classifier on sparse inputs
  ``(x [V, F], edge_index [2, E])`` returning one row of class scores per node.

Conventions shared with the notebook: ``H`` is ``[N, F]`` (rows are nodes),
``A[i, j] = 1`` when ``j`` sends to ``i`` (``j`` is a neighbour of ``i``), ``W`` is
``[F', F]`` (so ``Z = H @ W.T``) and ``a`` is ``[2 F']``: ``a[:F']`` multiplies ``z_i``
(the node that attends), ``a[F':]`` multiplies ``z_j``. The judges compare with
lablib's ``GraphAttention`` layer, whose weights are copied from ``W`` and ``a``
(``kernel = W.T``, ``attention_target = a[:F']``, ``attention_source = a[F':]``); this
runs in the grading process. The ``build_gat`` judges rebuild the student's model there
from its architecture and weights (``_model_checks``) and recompute what they judge.
"""

from __future__ import annotations

import numpy as np

from lablib.grading.specs._attention_checks import centred_rows
from lablib.grading.expect import describe, expect_array, expect_fields, real_array
from lablib.grading.spec import Mistake, diagnose, expect, expect_close, expect_shape
from lablib.grading.specs._graph_inputs import (
    course_graph,
    graph_from_edges,
    seeded_model,
    to_numpy,
)
from lablib.grading.specs import _model_checks as models

lab = models.model_lab("lab4_gat")


# --------------------------------------------------------------------------- inputs


def head_weights(f_in=3, f_out=4, seed=0, scale=1.0):
    """W [f_out, f_in] and a [2 f_out]."""
    rng = np.random.default_rng(seed)
    return scale * rng.normal(size=(f_out, f_in)), rng.normal(size=(2 * f_out,))


def isolated_graph():
    """5 nodes; node 4 has no neighbours."""
    return graph_from_edges(5, [(0, 1), (1, 2), (2, 3), (0, 3)], 3, seed=12)


def directed_graph():
    """A[i, j] = 1 when j sends to i; not symmetric."""
    return graph_from_edges(
        5, [(0, 1), (0, 2), (1, 2), (3, 2), (4, 2), (2, 0), (3, 4)], 3, seed=6, directed=True
    )


def head_inputs(graph, **weights):
    """(H, A, W, a): ``graph()`` and ``head_weights(**weights)``."""
    features, adjacency = graph()
    w, a = head_weights(**weights)
    return features, adjacency, w, a


def run_head(ns, graph, weights, **kwargs):
    """Probe side: the student's ``gat_attention`` on ``head_inputs(graph, **weights)``."""
    alpha, out = ns["gat_attention"](*head_inputs(graph, **weights), **kwargs)
    return {"alpha": alpha, "output": out}


def leaky_relu(x, slope):
    return np.where(x > 0, x, slope * x)


def reference_attention(features, adjacency, w, a, negative_slope=0.2, self_loops=True):
    """The judge's NumPy reference (float64): (alpha [N, N], output [N, F']).
    ``self_loops=False`` computes what a head that forgets them gives."""
    features, adjacency, w, a = (np.asarray(m, float) for m in (features, adjacency, w, a))
    z = features @ w.T
    f_out = z.shape[1]
    scores = (z @ a[:f_out])[:, None] + (z @ a[f_out:])[None, :]
    scores = leaky_relu(scores, negative_slope)
    allowed = (adjacency != 0) | (np.eye(len(features), dtype=bool) if self_loops else False)
    scores = np.where(allowed, scores, -np.inf)
    scores = scores - scores.max(axis=1, keepdims=True)
    weights = np.where(allowed, np.exp(scores), 0.0)
    alpha = weights / weights.sum(axis=1, keepdims=True)
    return alpha, alpha @ z


def lablib_attention(features, adjacency, ws, attention_vectors, concat=True, negative_slope=0.2):
    """lablib.layers.GraphAttention with weights copied from (W, a) per head.

    Returns (alpha [heads, N, N], output) from the layer, in float64 NumPy.
    """
    from lablib.layers import GraphAttention

    ws = [np.asarray(w, float) for w in ws]
    heads, f_out = len(ws), ws[0].shape[0]
    layer = GraphAttention(
        f_out, num_heads=heads, concat_heads=concat, negative_slope=negative_slope, dtype="float64"
    )
    x = np.asarray(features, np.float64)[None]
    a = np.asarray(adjacency, np.float64)[None]
    layer(x, adjacency=a)
    set_gat_weights(layer, ws, attention_vectors)
    out, alpha = layer(x, adjacency=a, return_attention_scores=True)
    return _heads_first(np.asarray(alpha)[0], heads), np.asarray(out)[0]


def _heads_first(alpha, heads):
    """Attention coefficients of one graph as [heads, N, N], whatever axis holds heads."""
    if alpha.ndim == 2:
        return alpha[None]
    if alpha.shape[0] == heads and alpha.shape[1] == alpha.shape[2]:
        return alpha
    return np.moveaxis(alpha, -1, 0)


def set_gat_weights(layer, ws, attention_vectors):
    """Copy per-head W [F', F] and a [2F'] into a built lablib GraphAttention layer."""
    f_out = ws[0].shape[0]
    kernel = np.concatenate([w.T for w in ws], axis=1)  # [F, heads * F'], head-major
    target = np.stack([np.asarray(a)[:f_out] for a in attention_vectors])  # [heads, F']
    source = np.stack([np.asarray(a)[f_out:] for a in attention_vectors])
    layer.kernel.assign(np.reshape(kernel, layer.kernel.shape))
    layer.attention_target.assign(np.reshape(target, layer.attention_target.shape))
    layer.attention_source.assign(np.reshape(source, layer.attention_source.shape))
    if getattr(layer, "bias", None) is not None:
        layer.bias.assign(np.zeros(layer.bias.shape))


def head_mistakes(features, adjacency, w, a, negative_slope=0.2):
    """``(alpha, sentence)`` of the typical mistakes in one attention head."""
    with np.errstate(all="ignore"):  # a node without neighbours has no alpha without loops
        no_loops, _ = reference_attention(
            features, adjacency, w, a, negative_slope, self_loops=False
        )
    linear, _ = reference_attention(features, adjacency, w, a, negative_slope=1.0)
    w = np.asarray(w)
    transposed = (
        reference_attention(features, adjacency, w.T, a, negative_slope)[0]
        if w.shape[0] == w.shape[1]
        else None
    )  # a square W: H @ W runs, wrongly
    return [
        (
            no_loops,
            "Node i does not attend to itself: the softmax runs over N(i) + {i}, so "
            "add self loops to A's pattern ((A != 0) | I) before masking.",
        ),
        (
            linear,
            f"The scores skip the LeakyReLU: e_ij = LeakyReLU(a[:F'] . z_i + a[F':] . z_j) "
            f"with negative slope {negative_slope:g}, before the softmax.",
        ),
        (
            transposed,
            PROJECTION_SHAPES[0][1].replace(
                "shapes do not fit", "shapes fit here (W is square) but it is the wrong product"
            ),
        ),
    ]


def _expect_self_loops(alpha, features, adjacency, w, a) -> None:
    """A head without self loops divides 0 by 0 for a node with no neighbour: NaN rows
    exactly there name that mistake."""
    if not isinstance(alpha, np.ndarray) or alpha.shape != adjacency.shape:
        return
    broken = ~np.isfinite(alpha).all(axis=1)
    if broken.any() and np.array_equal(broken, ~(adjacency != 0).any(axis=1)):
        raise Mistake(head_mistakes(features, adjacency, w, a)[0][1])


def _same_alpha(got, candidate) -> bool:
    """True when the student's coefficients are ``candidate`` (a known wrong answer)."""
    return (
        isinstance(got, np.ndarray)
        and got.shape == candidate.shape
        and bool(np.allclose(got, candidate, atol=1e-6))
    )


def _expect_head(got, inputs, case, negative_slope=0.2, output_atol=1e-6):
    """``got`` = {"alpha", "output"} of one head on ``inputs = (H, A, W, a)``: valid
    coefficients and output equal to :func:`reference_attention`'s (``case`` names the
    input in the messages), after naming a head without self loops, :func:`diagnose`
    against :func:`head_mistakes` and :func:`_gat_stages`."""
    adjacency = inputs[1]
    got = _head_reply(got, len(adjacency), case)
    alpha, out = reference_attention(*inputs, negative_slope=negative_slope)
    _expect_self_loops(got["alpha"], *inputs)
    _check_alpha(got["alpha"], adjacency, f"attention coefficients ({case})")
    diagnose(got["alpha"], head_mistakes(*inputs, negative_slope=negative_slope), right=alpha)
    _gat_stages(got, *inputs, negative_slope)
    expect_close(got["alpha"], alpha, atol=1e-6, what=f"attention coefficients ({case})")
    expect_close(got["output"], out, rtol=1e-6, atol=output_atol, what=f"output ({case})")


def _head_reply(got, nodes, case, extra=()):
    """A head's reply checked before anything reads it: ``alpha`` an array of numbers
    [N, N] (anything else names what ``gat_attention`` returned instead, not an error of
    the judge's); ``output`` and the ``extra`` keys as float64 arrays where they are
    numbers, as they came otherwise (the comparisons with the reference say what came,
    after the coefficients are diagnosed)."""
    keys = ("alpha", "output", *extra)
    expect_fields(got, keys, f"gat_attention's (alpha, output) on the {case}")
    checked = {
        "alpha": expect_array(
            got["alpha"],
            (nodes, nodes),
            f"gat_attention's alpha on the {case} (one row and one column per node)",
        )
    }
    for key in keys[1:]:
        value = None if isinstance(got[key], bool) else real_array(got[key])
        checked[key] = got[key] if value is None else value
    return checked


def _check_alpha(alpha, adjacency, what):
    n = adjacency.shape[0]
    expect_shape(alpha, (n, n), what)
    if not np.all(np.isfinite(alpha)):
        raise Mistake(
            f"{what}: some coefficients are NaN or inf. Every node attends at least to "
            "itself, so each softmax has a finite largest score: mask the scores outside "
            "N(i) + {i} with -inf, subtract each row's largest allowed score, then exp."
        )
    allowed = (adjacency != 0) | np.eye(n, dtype=bool)
    outside = float(np.abs(np.where(allowed, 0.0, alpha)).max())
    if outside > 1e-8:
        raise Mistake(
            f"{what}: a node gives weight {outside:.3g} to a node that is not "
            f"its neighbour (nor itself). Mask the scores outside N(i) + {{i}} "
            f"before the softmax."
        )
    totals = alpha.sum(axis=1)
    if not np.allclose(totals, 1.0, atol=1e-6):
        shown = ", ".join(f"{t:.4g}" for t in totals[:3])
        raise Mistake(
            f"{what}: each node's coefficients must sum to 1 over N(i) + {{i}}; yours "
            f"sum to {shown}, ...: divide each row's exponentials by that row's own "
            "total (sum over axis 1, keepdims=True)."
        )


def _gat_stages(got, features, adjacency, w, a, negative_slope=0.2):
    # Over 80 lines: the stages of a head in the order they are computed, each diagnosis
    # by the one before it, which reads best in one piece.
    """Name what is wrong in a head whose coefficients are finite, masked and normalised
    (:func:`_check_alpha`): the scores before the softmax (their LeakyReLU, the halves of
    ``a``, or otherwise), or the output given right coefficients. Quiet when right."""
    alpha = np.asarray(got["alpha"], dtype=float)
    right, out = reference_attention(features, adjacency, w, a, negative_slope)
    if alpha.shape != right.shape:
        return
    if not np.allclose(alpha, right, atol=1e-6):
        z = np.asarray(features, float) @ np.asarray(w, float).T
        f_out = z.shape[1]
        raw = (z @ a[:f_out])[:, None] + (z @ a[f_out:])[None, :]
        allowed = (adjacency != 0) | np.eye(len(features), dtype=bool)
        usable = allowed & (alpha > 1e-12)
        # Scores show through the coefficients only in rows with two usable weights or more
        # (one weight alone is 1 whatever its score): compare those rows, if there are any.
        usable &= usable.sum(axis=1, keepdims=True) >= 2
        with np.errstate(divide="ignore"):
            logs = centred_rows(np.log(np.where(usable, alpha, 1.0)), usable)
        slopes = [
            (
                leaky_relu(raw, slope),
                f"Your scores use a LeakyReLU slope of {slope:g} ({whose}) where "
                f"negative_slope={negative_slope:g} was passed: use the argument.",
            )
            for slope, whose in (
                (0.2, "gat_attention's default"),
                (0.01, "PyTorch's LeakyReLU default"),
                (0.3, "keras.layers.LeakyReLU's default"),
            )
            if not np.isclose(slope, negative_slope)
        ]
        for scores, sentence in [
            *slopes,
            (
                raw.T,
                "Your scores are transposed: e[i, j] belongs to node i attending to j, "
                "a[:F'] . z_i + a[F':] . z_j, with i the row.",
            ),
            (
                leaky_relu((z @ a[f_out:])[:, None] + (z @ a[:f_out])[None, :], negative_slope),
                "The two halves of `a` are swapped: a[:F'] multiplies z_i (the node that attends, "
                "row i) and a[F':] multiplies z_j (its neighbour).",
            ),
            (
                -leaky_relu(raw, negative_slope),
                "Your softmax favours the lowest scores: the "
                "coefficients are exp(e_ij) normalised, not exp(-e_ij).",
            ),
        ]:
            if usable.any() and np.allclose(logs, centred_rows(scores, usable), atol=1e-6):
                raise Mistake(sentence)
        raise Mistake(
            "Your coefficients are a softmax over each node's neighbourhood N(i) + {i}, but not "
            "of the right scores: e_ij = LeakyReLU(a[:F'] . z_i + a[F':] . z_j) with z = H @ W.T "
            f"and negative slope {negative_slope:g}; the value subtracted before exp must be each "
            "row's own largest allowed score (max over axis 1, keepdims=True)."
        )
    output = got.get("output")
    output = real_array(output) if isinstance(output, np.ndarray) else None
    if output is not None and output.shape == out.shape and not np.allclose(output, out, atol=1e-5):
        z = np.asarray(features, float) @ np.asarray(w, float).T
        for wrong, sentence in [
            (
                right @ np.asarray(features, float)
                if np.shape(features)[1] == out.shape[1]
                else None,
                "Your coefficients are right, but the output averages the input features H: it "
                "averages the projected ones, alpha @ (H @ W.T).",
            ),
            (
                right.T @ z,
                "Your coefficients are right, but the output uses them transposed: "
                "node i's output is sum_j alpha[i, j] z_j, row i of alpha @ Z.",
            ),
        ]:
            if wrong is not None and np.allclose(output, wrong, atol=1e-6):
                raise Mistake(sentence)
        raise Mistake(
            "Your coefficients are right, but the output is not alpha @ Z with "
            "Z = H @ W.T: node i's output is the alpha-weighted sum of its neighbours' "
            "projected features."
        )


# --------------------------------------------------------------------------- gat_attention

#: A projection written the wrong way round: NumPy's error, named in plain words.
#: Tied to the tests' sizes (F = 3 features, F' = 2, 4 or 5; a square W runs and is diagnosed
#: by value), so that another product's mismatch (Z @ a with all 2F' entries) is not
#: given this sentence.
PROJECTION_SHAPES = (
    (
        r"\(size [245] is different from 3\)|3 \(dim [01]\) != [245] \(dim 0\)",
        "A matrix product's shapes do not fit: W has shape [F', F] (the lecture's "
        "W h for a column vector h), so the nodes' rows project as Z = H @ W.T, "
        "not H @ W.",
    ),
    (
        r"mismatch in its core dimension|shapes .* not aligned",
        "A product's shapes do not fit: Z = H @ W.T is [N, F']; a has 2 F' entries, "
        "a[:F'] for the node that attends and a[F':] for its neighbour, so the "
        "scores are (Z @ a[:F'])[:, None] + (Z @ a[F':])[None, :] and the output "
        "alpha [N, N] @ Z [N, F'].",
    ),
    (
        r"operands could not be broadcast together",
        "Two arrays do not broadcast: the scores are a column (Z @ a[:F'])[:, None] "
        "plus a row (Z @ a[F':])[None, :], [N, N] in all; the mask and each row's "
        "max and total keep that shape (keepdims=True).",
    ),
    (
        r"tuple index out of range|unsupported operand type\(s\) for .*NoneType",
        "An index went wrong: Z.shape[1] is F', the size of each projected node, "
        "and np.newaxis (None) adds an axis only inside an index: z[:, None].",
    ),
)


lab.piece(
    "gat_attention",
    objects=["gat_attention"],
    description="one graph attention head in NumPy: coefficients and output",
    error_hints=PROJECTION_SHAPES,
)


@lab.test(
    "gat_attention",
    points=2,
    hint="z = H @ W.T; e[i, j] = LeakyReLU(a[:F'] . z_i + a[F':] . z_j); softmax over "
    "j in N(i) + {i} only (row i of A, plus i itself); output = alpha @ z.",
)
def attention_course_graph(ns):
    return run_head(ns, course_graph, {})


@attention_course_graph.judge
def _(got):
    features, adjacency, w, a = head_inputs(course_graph)
    got = _head_reply(got, len(adjacency), "course's graph G")
    alpha, out = reference_attention(features, adjacency, w, a)
    _check_alpha(got["alpha"], adjacency, "attention coefficients on the course's graph G")
    diagnose(got["alpha"], head_mistakes(features, adjacency, w, a), right=alpha)
    f_out = w.shape[0]
    swapped, _ = reference_attention(features, adjacency, w, np.concatenate([a[f_out:], a[:f_out]]))
    if np.allclose(got["alpha"], swapped, atol=1e-6):
        raise Mistake(
            "The two halves of `a` are swapped: a[:F'] multiplies z_i (the node "
            "that attends, row i) and a[F':] multiplies z_j (its neighbour)."
        )
    _gat_stages(got, features, adjacency, w, a)
    expect_close(got["alpha"], alpha, atol=1e-6, what="attention coefficients alpha on G")
    expect_shape(got["output"], (6, 4), "output on G (6 nodes, 4 output features)")
    expect_close(got["output"], out, atol=1e-6, what="output on G")


@lab.test(
    "gat_attention",
    points=1,
    hint="Add self loops with a logical OR (A != 0) | I, not A + I: a node that "
    "already has a self loop must not count twice, and an isolated node attends "
    "only to itself (alpha_ii = 1).",
)
def attention_self_loops(ns):
    features, adjacency, w, a = head_inputs(isolated_graph, f_in=3, f_out=2, seed=1)
    plain = ns["gat_attention"](features, adjacency, w, a)
    looped = ns["gat_attention"](features, adjacency + np.eye(5), w, a)
    return {
        "alpha": plain[0],
        "output": plain[1],
        "alpha_looped": looped[0],
        "output_looped": looped[1],
    }


@attention_self_loops.judge
def _(got):
    features, adjacency, w, a = head_inputs(isolated_graph, f_in=3, f_out=2, seed=1)
    got = _head_reply(
        got, len(adjacency), "graph with an isolated node", ("alpha_looped", "output_looped")
    )
    alpha, out = reference_attention(features, adjacency, w, a)
    _expect_self_loops(got["alpha"], features, adjacency, w, a)
    _check_alpha(got["alpha"], adjacency, "attention coefficients")
    diagnose(got["alpha"], head_mistakes(features, adjacency, w, a), right=alpha)
    _gat_stages(got, features, adjacency, w, a)
    expect_close(
        got["alpha"][4, 4],
        1.0,
        atol=1e-6,
        what="alpha[4, 4] of the isolated node 4 (it can only attend to itself)",
    )
    expect_close(got["alpha"], alpha, atol=1e-6, what="attention coefficients")
    expect_close(got["output"], out, atol=1e-6, what="output")
    expect_close(
        got["alpha_looped"],
        alpha,
        atol=1e-6,
        what="attention coefficients when A already has self loops (the result must not change)",
    )
    expect_close(got["output_looped"], out, atol=1e-6, what="output when A has self loops")


@lab.test(
    "gat_attention",
    points=1,
    hint="A[i, j] = 1 means j sends to i: node i attends over the nodes of ROW i. "
    "And use the `negative_slope` argument in the LeakyReLU.",
)
def attention_directed_slope(ns):
    return run_head(ns, directed_graph, {"f_in": 3, "f_out": 3, "seed": 2}, negative_slope=0.05)


@attention_directed_slope.judge
def _(got):
    inputs = features, adjacency, w, a = head_inputs(directed_graph, f_in=3, f_out=3, seed=2)
    got = _head_reply(got, len(adjacency), "directed graph")
    transposed, _ = reference_attention(features, adjacency.T, w, a, negative_slope=0.05)
    if _same_alpha(got["alpha"], transposed):
        raise Mistake(
            "Node i attended over column i of A (the nodes it sends to); its "
            "neighbours are the nodes j with A[i, j] = 1 (row i)."
        )
    if _same_alpha(got["alpha"], reference_attention(features, adjacency, w, a)[0]):
        raise Mistake(
            "negative_slope=0.05 was passed but 0.2 was used: pass the argument to your LeakyReLU."
        )
    _expect_head(got, inputs, "directed graph, negative_slope=0.05", negative_slope=0.05)


@lab.test(
    "gat_attention",
    points=1,
    hint="Subtract each row's maximum score (over the allowed entries) before exp: "
    "large scores must not overflow to inf / NaN.",
)
def attention_stable(ns):
    return run_head(ns, course_graph, {"seed": 3, "scale": 300.0})


@attention_stable.judge
def _(got):
    inputs = head_inputs(course_graph, seed=3, scale=300.0)
    _expect_head(got, inputs, "scores around 1e3", output_atol=1e-4)


@lab.test(
    "gat_attention",
    points=1,
    hint="Your head should compute exactly what lablib's GraphAttention layer computes "
    "with kernel = W.T, attention_target = a[:F'], attention_source = a[F':].",
)
def attention_matches_layer(ns):
    return run_head(ns, isolated_graph, {"f_in": 3, "f_out": 5, "seed": 4})


@attention_matches_layer.judge
def _(got):
    features, adjacency, w, a = head_inputs(isolated_graph, f_in=3, f_out=5, seed=4)
    got = _head_reply(got, len(adjacency), "graph with an isolated node")
    alpha, out = lablib_attention(features, adjacency, [w], [a])
    _expect_self_loops(got["alpha"], features, adjacency, w, a)
    diagnose(got["alpha"], head_mistakes(features, adjacency, w, a), right=alpha[0], atol=1e-5)
    _gat_stages(got, features, adjacency, w, a)
    expect_close(
        got["alpha"],
        alpha[0],
        atol=1e-5,
        what="attention coefficients vs lablib.layers.GraphAttention",
    )
    expect_close(got["output"], out, atol=1e-5, what="output vs lablib.layers.GraphAttention")


# --------------------------------------------------------------------------- multi_head_gat

lab.piece(
    "multi_head_gat",
    objects=["multi_head_gat"],
    description="several attention heads, concatenated or averaged",
    error_hints=(
        PROJECTION_SHAPES[0],
        (
            r"tuple index out of range",
            "An index went wrong: gat_attention returns a pair (alpha, output), so "
            "a head's output is gat_attention(...)[1].",
        ),
        (
            r"zero-dimensional arrays cannot be concatenated|need at least one array",
            "Nothing to combine: run gat_attention once per head, for W, a in "
            "zip(Ws, As), and collect the outputs in a list.",
        ),
    ),
)

HEADS = 3


def multi_head_weights(f_in=3, f_out=2, heads=HEADS, seed=10):
    pairs = [head_weights(f_in, f_out, seed=seed + k) for k in range(heads)]
    return [w for w, _ in pairs], [a for _, a in pairs]


def run_multi_head(ns, graph, seed, concat):
    """Probe side: the student's ``multi_head_gat`` with 3 heads from ``seed``."""
    features, adjacency = graph()
    ws, attention_vectors = multi_head_weights(seed=seed)
    return ns["multi_head_gat"](features, adjacency, ws, attention_vectors, concat=concat)


def multi_head_mistakes(outputs, concat):
    """``(result, sentence)`` of the typical mistakes in combining the heads' ``outputs``."""
    first = [outputs[0]] * len(outputs)
    mistakes = [
        (
            np.concatenate(first, axis=1) if concat else outputs[0],
            "Every head gives the first head's output: head k must use Ws[k] and As[k].",
        ),
        (
            np.mean(outputs, axis=0),
            "The heads are averaged; with concat=True they are concatenated along the feature "
            "axis, head 0 first: [N, K * F'].",
        ),
        (
            np.concatenate(outputs, axis=1),
            "The heads are concatenated; with concat=False they are averaged (the GAT output "
            "layer): [N, F'].",
        ),
    ]
    mistakes += _elu_mistakes(outputs, concat)
    if concat:
        mistakes.append(
            (
                np.concatenate(outputs[::-1], axis=1),
                "The heads are concatenated in reverse order: head 0 comes first.",
            )
        )
    else:
        mistakes.append(
            (
                np.sum(outputs, axis=0),
                "The heads are summed; with concat=False they are averaged (divide "
                "the sum by the number of heads).",
            )
        )
    return mistakes


def _elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))


#: What :func:`_elu_mistakes` says: the heads' outputs went through the paper's sigma.
ELU_SENTENCE = (
    "Your heads' outputs went through an ELU (the paper's sigma): multi_head_gat combines "
    "the heads' outputs as gat_attention returns them, with no nonlinearity (the model "
    "applies its activation after the layer); leave the ELU out."
)


def _elu_mistakes(outputs, concat):
    """``(result, sentence)`` of an ELU applied to each head's output, or to the result."""
    elu_each = [_elu(o) for o in outputs]
    if concat:  # the ELU of each head or of their concatenation: the same
        return [(np.concatenate(elu_each, axis=1), ELU_SENTENCE)]
    return [
        (np.mean(elu_each, axis=0), ELU_SENTENCE),
        (_elu(np.mean(outputs, axis=0)), ELU_SENTENCE),
    ]


def _multi_head_shape(got, nodes, heads, features, concat):
    """Name the usual wrong shapes of combined heads (the axis, or the coefficients taken
    for the output)."""
    if not isinstance(got, np.ndarray) or got.ndim != 2:
        return
    right = (nodes, heads * features) if concat else (nodes, features)
    if got.shape == right:
        return
    if got.shape == (nodes, heads * nodes if concat else nodes):
        raise Mistake(
            f"Your result has shape {got.shape}: it combines the heads' coefficients "
            "alpha. gat_attention returns (alpha, output); each head's output is "
            "index 1, [N, F']."
        )
    if concat and got.shape == (nodes * heads, features):
        raise Mistake(
            f"Your heads are concatenated along the nodes (axis 0), shape {got.shape}: "
            "concatenate them along the features, axis 1, for [N, K * F']."
        )
    if not concat and got.shape == (heads, features):
        raise Mistake(
            f"Your average has shape {got.shape}: it runs over the nodes; average the "
            "heads' outputs over the heads (axis 0 of the stacked [K, N, F'])."
        )


def judge_multi_head(got, graph, seed, concat, shape, shape_what, what, layer_what):
    """Judge :func:`run_multi_head`: against the NumPy reference and lablib's layer."""
    features, adjacency = graph()
    ws, attention_vectors = multi_head_weights(seed=seed)
    outputs = [
        reference_attention(features, adjacency, w, a)[1] for w, a in zip(ws, attention_vectors)
    ]
    expected = np.concatenate(outputs, axis=1) if concat else np.mean(outputs, axis=0)
    diagnose(got, multi_head_mistakes(outputs, concat), right=expected)
    _multi_head_shape(got, len(features), len(outputs), outputs[0].shape[1], concat)
    expect_shape(got, shape, shape_what)
    expect_close(got, expected, atol=1e-6, what=what)
    _, layer_out = lablib_attention(features, adjacency, ws, attention_vectors, concat=concat)
    expect_close(got, layer_out, atol=1e-5, what=layer_what)


@lab.test(
    "multi_head_gat",
    points=2,
    hint="Run gat_attention once per head (head k uses Ws[k] and As[k]) and "
    "concatenate the outputs along the feature axis, head 0 first: [N, K * F'].",
)
def multi_head_concat(ns):
    return run_multi_head(ns, course_graph, seed=10, concat=True)


@multi_head_concat.judge
def _(got):
    judge_multi_head(
        got,
        course_graph,
        seed=10,
        concat=True,
        shape=(6, HEADS * 2),
        shape_what=f"{HEADS} concatenated heads of 2 features",
        what="concatenated heads on G",
        layer_what="concatenated heads vs lablib.layers.GraphAttention(num_heads=3)",
    )


@lab.test(
    "multi_head_gat",
    points=1,
    hint="concat=False: average the heads' outputs (the GAT output layer), shape [N, F'].",
)
def multi_head_average(ns):
    return run_multi_head(ns, directed_graph, seed=20, concat=False)


@multi_head_average.judge
def _(got):
    judge_multi_head(
        got,
        directed_graph,
        seed=20,
        concat=False,
        shape=(5, 2),
        shape_what="average of 3 heads of 2 features",
        what="averaged heads",
        layer_what="averaged heads vs lablib.layers.GraphAttention(concat_heads=False)",
    )


@lab.test(
    "multi_head_gat",
    points=1,
    hint="With one head, multi_head_gat must equal that head's output for both "
    "concat=True and concat=False; each head has its own attention vector.",
)
def multi_head_single_and_distinct(ns):
    features, adjacency = isolated_graph()
    ws, attention_vectors = multi_head_weights(heads=1, seed=30)
    single = [
        ns["multi_head_gat"](features, adjacency, ws, attention_vectors, concat=c)
        for c in (True, False)
    ]
    # Two heads with the same W but different a: outputs must differ.
    w = ws[0]
    pair = ns["multi_head_gat"](
        features, adjacency, [w, w], [attention_vectors[0], -attention_vectors[0]], concat=True
    )
    return {"single": single, "pair": pair}


@multi_head_single_and_distinct.judge
def _(got):
    expect_fields(got, ("single", "pair"), "multi_head_gat's outputs")
    expect(
        isinstance(got["single"], (list, tuple)) and len(got["single"]) == 2,
        "multi_head_gat with one head: expected its outputs with concat=True and "
        f"concat=False, got {describe(got['single'])}",
    )
    features, adjacency = isolated_graph()
    ws, attention_vectors = multi_head_weights(heads=1, seed=30)
    expected = reference_attention(features, adjacency, ws[0], attention_vectors[0])[1]
    for value, concat in zip(got["single"], (True, False)):
        diagnose(value, _elu_mistakes([expected], concat), right=expected)
        expect_close(value, expected, atol=1e-6, what=f"one head, concat={concat}")
    other = reference_attention(features, adjacency, ws[0], -attention_vectors[0])[1]
    diagnose(
        got["pair"],
        multi_head_mistakes([expected, other], concat=True),
        right=np.concatenate([expected, other], axis=1),
    )
    expect_close(
        got["pair"],
        np.concatenate([expected, other], axis=1),
        atol=1e-6,
        what="two heads sharing W with attention vectors a and -a",
    )


# --------------------------------------------------------------------------- build_gat

models.add_model_piece(
    lab,
    "build_gat",
    "build_gat_classifier",
    "a compiled Keras GAT node classifier on (x, edge_index)",
)

NUM_FEATURES, NUM_CLASSES = 6, 3


def _student_classifier(ns, **hyperparameters):
    """The student's build_gat_classifier(NUM_FEATURES, NUM_CLASSES, ...), seeded."""
    return seeded_model(ns["build_gat_classifier"], NUM_FEATURES, NUM_CLASSES, **hyperparameters)


def tiny_graph(seed=0, num_nodes=24):
    """Two disconnected communities (nodes 0..11 and 12..23) and learnable labels.

    Returns x [V, 6] float32, edge_index [2, E] int32 (both directions), y [V] int.
    """
    rng = np.random.default_rng(seed)
    half = num_nodes // 2
    edges = []
    for start in (0, half):
        for v in range(start + 1, start + half):
            u = int(rng.integers(start, v))
            edges += [(u, v), (v, u)]
        for _ in range(4):
            u, v = rng.choice(np.arange(start, start + half), size=2, replace=False)
            edges += [(int(u), int(v)), (int(v), int(u))]
    edge_index = np.unique(np.array(edges, dtype=np.int32), axis=0).T
    x = rng.normal(size=(num_nodes, NUM_FEATURES)).astype(np.float32)
    # Labels: the largest of the first 3 features averaged over the node and its
    # neighbours (something a graph layer can represent).
    total = x[:, :NUM_CLASSES].copy()
    np.add.at(total, edge_index[1], x[edge_index[0], :NUM_CLASSES])
    y = np.argmax(total / (1 + np.bincount(edge_index[1], minlength=num_nodes))[:, None], axis=1)
    return x, np.ascontiguousarray(edge_index), y.astype(np.int32)


def structure_inputs():
    """The named node features of ``gat_structure`` (all with ``tiny_graph``'s edges).

    ``output``: the tiny graph; ``far_change``: a node of community 2 moved by 5;
    ``near_change``: a direct neighbour of node 0 (an edge j -> 0) moved by 5.
    """
    x, edge_index, _ = tiny_graph()
    far = x.copy()
    far[20] += 5.0
    neighbour = int(edge_index[0][edge_index[1] == 0][0])
    near = x.copy()
    near[neighbour] += 5.0
    return {"output": x, "far_change": far, "near_change": near}, edge_index


@lab.test(
    "build_gat",
    points=2,
    timeout=300,
    hint="Inputs x [V, F] and edge_index [2, E] (int32); two GraphAttention layers "
    "called with edge_index=...; output one row of num_classes scores per node. "
    "Return the model compiled. The grader rebuilds your model from "
    "model.to_json() and its weights; a layer class of your own cannot be "
    "rebuilt, and is then judged only on what your process reports.",
)
def gat_structure(ns):
    model = _student_classifier(ns, hidden_units=4, num_heads=2, dropout=0.6)
    features, edge_index = structure_inputs()

    def run(x, training=False):
        return to_numpy(model([x, edge_index], training=training))

    got = {name: run(x) for name, x in features.items()}
    got["repeat"] = run(features["output"])
    got["training_a"] = run(features["output"], training=True)
    got["training_b"] = run(features["output"], training=True)
    got.update(models.describe_model(model))
    got["compiled"] = bool(getattr(model, "optimizer", None) is not None)
    got["num_inputs"] = len(model.inputs)
    return got


def judge_structure_values(values):
    """The checks of ``gat_structure`` on outputs keyed like :func:`structure_inputs`
    (plus ``repeat``, ``training_a``, ``training_b``)."""
    for key in ("output", "training_a", "training_b"):
        expect_shape(values[key], (24, NUM_CLASSES), f"{key} for 24 nodes and 3 classes")
    values = {
        key: expect_array(values[key], None, key)
        for key in ("output", "repeat", "far_change", "near_change", "training_a", "training_b")
    }
    expect(bool(np.all(np.isfinite(values["output"]))), "The output contains NaN or inf.")
    expect_close(
        values["repeat"],
        values["output"],
        atol=1e-6,
        what="two predictions with training=False (dropout must be off at inference)",
    )
    expect_shape(values["far_change"], (24, NUM_CLASSES), "output after changing node 20")
    expect_close(
        values["far_change"][:12],
        values["output"][:12],
        atol=1e-5,
        what="outputs of community 1 after changing a node of the disconnected "
        "community 2 (messages must only follow edges)",
    )
    expect_shape(values["near_change"], (24, NUM_CLASSES), "output after changing a neighbour")
    change = float(np.max(np.abs(values["near_change"][0] - values["output"][0])))
    expect(
        change > 1e-6,
        "Changing a neighbour of node 0 did not change node 0's output: "
        "the model must pass messages along edge_index.",
    )
    differs = float(np.max(np.abs(values["training_a"] - values["training_b"])))
    expect(
        differs > 1e-6,
        "Two calls with training=True gave identical outputs: apply "
        "dropout (rate `dropout`) to the inputs and/or the attention coefficients.",
    )


@gat_structure.judge
def _(got):
    features, edge_index = structure_inputs()
    models.expect_fields(
        got,
        (
            "architecture",
            "weights",
            "compiled",
            "num_inputs",
            *features,
            "repeat",
            "training_a",
            "training_b",
        ),
    )
    for name in (*features, "repeat", "training_a", "training_b"):
        expect(isinstance(got[name], np.ndarray), f"{name}: expected an array of predictions.")
    model = models.rebuild_compiled_model(
        got, "build_gat_classifier", 2, "x, edge_index", "model.compile(optimizer=..., loss=...)"
    )
    if model is None:  # a layer class of the student's own: reported values only
        judge_structure_values(got)
        return
    recomputed = {name: models.run_model(model, [x, edge_index]) for name, x in features.items()}
    expect_shape(recomputed["output"], (24, NUM_CLASSES), "output for 24 nodes and 3 classes")
    for name, value in recomputed.items():
        models.expect_reported(got[name], value, f"prediction ({name.replace('_', ' ')})")
    recomputed["repeat"] = models.run_model(model, [features["output"], edge_index])
    recomputed["training_a"] = models.run_model(
        model, [features["output"], edge_index], training=True
    )
    recomputed["training_b"] = models.run_model(
        model, [features["output"], edge_index], training=True
    )
    judge_structure_values(recomputed)


def learning_graph():
    """The training data of ``gat_learns``: ([x, edge_index], y)."""
    x, edge_index, y = tiny_graph(seed=1)
    return [x, edge_index], y


def learning_model(ns):
    """The model of ``gat_learns``: the student's classifier without dropout, seeded."""
    return _student_classifier(ns, hidden_units=8, num_heads=4, dropout=0.0)


models.add_learning_test(
    lab,
    "build_gat",
    "gat_learns",
    "The classifier should fit a tiny graph: check the loss (sparse categorical "
    "cross-entropy, from_logits matching your output), the optimizer and that "
    "every layer is trainable.",
    (learning_model, learning_graph, "a tiny graph"),
)


# ------------------------------------------------------------ written answers (a person)
# Found in the submission by its cell's tag or markers (lablib.grading.notebook.
# written_answers); graded with `lablib review`.

lab.answer(
    "gat_vs_transformer",
    points=4,
    title="section 8: GAT attention vs transformer self-attention",
    rubric=[
        # The question asks for two differences: one point each, whichever two the answer picks.
        (
            1,
            "A first difference, correct and explained. Any of: where it looks (a GAT node attends to its graph "
            "neighbours and itself only, masked by the adjacency; a transformer token to every token); how the "
            "score is computed (GAT: LeakyReLU(a^T [W h_i || W h_j]), one shared projection and an additive form; "
            "transformer: a scaled dot product of separate query and key projections); what surrounds attention "
            "in a transformer (value and output projections, residuals, layer normalisation, feed-forward block). "
            "Another correct difference counts too (e.g. GAT averages its output layer's heads). Calling GAT's "
            "ranking 'static' (Brody et al.) is not required: the lab does not teach it.",
        ),
        (
            1,
            "A second difference, another of those above, correct and explained. A third difference earns no "
            "more points (the question asks for two); a wrong third one does not cost a point either.",
        ),
        (
            1,
            "Run on the nodes without the edges, a transformer encoder attends from every node to every node: "
            "a graph network on the complete graph, treating the nodes as a set (permutation-equivariant "
            "without positional encodings).",
        ),
        (
            1,
            "So it cannot tell which atoms are bonded or which papers cite each other unless that is injected: "
            "as features, positional (structural) encodings, or an attention mask (which gives back GAT-style "
            "masked attention).",
        ),
        (0, "No answer."),
    ],
)
