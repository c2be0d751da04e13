"""A corpus of typical mistakes: each is a solution's graded cell with one edit a student
really makes; the piece's public check must name that mistake in one sentence, on every
test it fails, with no unrelated hint, and the unedited solution must pass.

The checks diagnose by probing (known wrong answers computed on the test's inputs, see
``lablib.grading.expect.diagnose``), never by reading the code."""

from __future__ import annotations

import nbformat
import pytest

import lablib
from notebook_helpers import SOLUTIONS

SCALED = "energies = query @ key.swapaxes(-1, -2) / np.sqrt(query.shape[-1])"
SPLIT = (
    "            x = ops.reshape(x, (ops.shape(x)[0], ops.shape(x)[1], self.num_heads, "
    "self.key_dim))\n            return ops.transpose(x, (0, 2, 1, 3))"
)
ANGLES = "angles = positions / np.power(10000.0, 2 * pair / depth)"
COLUMNS = "encoding = np.where(np.arange(depth) % 2 == 0, np.sin(angles), np.cos(angles))"
F1_MEAN = "return float(np.mean(2 * true_positives[present] / denominator[present]))"
MEAN = (
    "    inverse_degree = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)\n"
    "    D_inv = np.diag(inverse_degree)\n"
    "    return activation(D_inv @ A @ H @ W.T + H @ B.T)"
)

#: (case, lab, piece, [(text in the solution's graded cell, what the student wrote)],
#:  words the check must say).
MISTAKES = [
    (
        "attention without 1/sqrt(d_k)",
        "lab1_attention",
        "attention",
        [(SCALED, "energies = query @ key.swapaxes(-1, -2)")],
        "The scores are not scaled",
    ),
    (
        "attention divided by d_k",
        "lab1_attention",
        "attention",
        [(SCALED, "energies = query @ key.swapaxes(-1, -2) / query.shape[-1]")],
        "divided by d_k = ",
    ),
    (
        "mask applied after the softmax",
        "lab1_attention",
        "attention",
        [
            (
                "        energies = np.where(np.asarray(mask, dtype=bool), energies, -np.inf)",
                "        pass",
            ),
            (
                "    return weights @ value, weights",
                "    if mask is not None:\n        weights = weights * np.asarray(mask, dtype=bool)\n"
                "    return weights @ value, weights",
            ),
        ],
        "set to 0 after the softmax",
    ),
    (
        "masking with -1e9 (a fully masked query)",
        "lab1_attention",
        "attention",
        [("energies, -np.inf)", "energies, -1e9)")],
        "got equal weights 1/3",
    ),
    (
        "attention without the max shift (scores around 1e3 overflow)",
        "lab1_attention",
        "attention",
        [("exponentials = np.exp(energies - row_max)", "exponentials = np.exp(energies)")],
        "np.exp overflows",
    ),
    (
        "multi-head attention without scaling",
        "lab1_attention",
        "multi_head_attention",
        [("        scores = scores / ops.sqrt(ops.cast(self.key_dim, scores.dtype))\n", "")],
        "The scores are not scaled",
    ),
    (
        "multi-head attention scaled by d_model (lecture 003's slip)",
        "lab1_attention",
        "multi_head_attention",
        [("ops.cast(self.key_dim, scores.dtype)", "ops.cast(ops.shape(inputs)[-1], scores.dtype)")],
        "scaled by sqrt(d_model)",
    ),
    (
        "heads split by a plain reshape",
        "lab1_attention",
        "multi_head_attention",
        [
            (
                SPLIT,
                "            return ops.reshape(x, (ops.shape(x)[0], self.num_heads, "
                "ops.shape(x)[1], self.key_dim))",
            )
        ],
        "split with a reshape straight",
    ),
    (
        "multi-head attention masking the scores with 0",
        "lab1_attention",
        "multi_head_attention",
        [
            (
                "scores = ops.where(allowed, scores, ops.cast(-1e4, scores.dtype))",
                "scores = ops.where(allowed, scores, ops.zeros_like(scores))",
            )
        ],
        "The masked scores are set to 0 before the softmax",
    ),
    (
        "multi-head attention with dropout left on at inference",
        "lab1_attention",
        "multi_head_attention",
        [
            (
                "        weights = ops.softmax(scores, axis=-1)\n",
                "        weights = ops.softmax(scores, axis=-1)\n"
                "        weights = keras.layers.Dropout(0.1)(weights, training=True)\n",
            )
        ],
        "that is dropout",
    ),
    (
        "positional encoding as the slide writes it",
        "lab1_attention",
        "positional_encoding",
        [
            (
                ANGLES,
                "angles = positions / np.power(10000.0, 2 * np.arange(depth)[np.newaxis, :] / depth)",
            )
        ],
        "the exponent as the lecture's slide writes it",
    ),
    (
        "macro-F1 averaged over all num_classes",
        "lab2_transformer_reuters",
        "macro_f1",
        [
            (
                F1_MEAN,
                "return float(np.sum(2 * true_positives[present] / denominator[present]) / num_classes)",
            )
        ],
        "Your mean runs over all num_classes classes",
    ),
    (
        "macro-F1 weighted by support",
        "lab2_transformer_reuters",
        "macro_f1",
        [
            (
                F1_MEAN,
                "support = confusion.sum(axis=1)\n    f1 = 2 * true_positives[present] / denominator[present]\n"
                "    return float(np.sum(support[present] * f1) / support.sum())",
            )
        ],
        "weighs each class by its number of true labels",
    ),
    (
        "accuracy instead of macro-F1",
        "lab2_transformer_reuters",
        "macro_f1",
        [(F1_MEAN, "return float(np.mean(y_true == y_pred))")],
        "returns the accuracy",
    ),
    (
        "macro-F1 over the true labels' classes only",
        "lab2_transformer_reuters",
        "macro_f1",
        [("present = denominator > 0", "present = confusion.sum(axis=1) > 0")],
        "leaves out the classes that are predicted but never true",
    ),
    (
        "sine and cosine swapped",
        "lab2_transformer_reuters",
        "positional_encoding",
        [
            (
                COLUMNS,
                COLUMNS.replace("np.sin(angles), np.cos(angles)", "np.cos(angles), np.sin(angles)"),
            )
        ],
        "Sine and cosine are swapped",
    ),
    (
        "encoder block without 1/sqrt(d_k)",
        "lab2_transformer_reuters",
        "encoder_block",
        [(" / np.sqrt(Q.shape[-1])", "")],
        "The attention scores are not scaled",
    ),
    (
        "encoder block without the max shift (scores around 1e3 overflow)",
        "lab2_transformer_reuters",
        "encoder_block",
        [("    scores = scores - scores.max(axis=-1, keepdims=True)\n", "")],
        "np.exp overflows",
    ),
    (
        "encoder block's padding mask over the queries",
        "lab2_transformer_reuters",
        "encoder_block",
        [
            (
                "np.asarray(mask, dtype=bool)[None, None, :]",
                "np.asarray(mask, dtype=bool)[None, :, None]",
            )
        ],
        "blocks the padding tokens as queries",
    ),
    (
        "encoder block in pre-norm form",
        "lab2_transformer_reuters",
        "encoder_block",
        [
            (
                'np.einsum("td,dhk->htk", X, ',  # every projection of the normalised X
                'np.einsum("td,dhk->htk", layer_norm(X, w["attention_norm_gamma"], w["attention_norm_beta"], epsilon), ',
            ),
            (
                '    Z = layer_norm(X + multi_head, w["attention_norm_gamma"], w["attention_norm_beta"], epsilon)',
                "    Z = X + multi_head",
            ),
            (
                '    inner = np.maximum(Z @ w["intermediate_kernel"]',
                '    inner = np.maximum(layer_norm(Z, w["output_norm_gamma"], w["output_norm_beta"], epsilon) @ w["intermediate_kernel"]',
            ),
            (
                '    return layer_norm(ffn + Z, w["output_norm_gamma"], w["output_norm_beta"], epsilon), attention',
                "    return ffn + Z, attention",
            ),
        ],
        "pre-norm",
    ),
    (
        "encoder block without the attention residual",
        "lab2_transformer_reuters",
        "encoder_block",
        [("layer_norm(X + multi_head,", "layer_norm(multi_head,")],
        "The residual around the attention is missing",
    ),
    (
        "layer norm over the tokens",
        "lab2_transformer_reuters",
        "encoder_block",
        [
            (
                "    mean = x.mean(axis=-1, keepdims=True)\n    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
                "    mean = x.mean(axis=0, keepdims=True)\n    variance = ((x - mean) ** 2).mean(axis=0, keepdims=True)",
            )
        ],
        "taken over the tokens",
    ),
    (
        "layer norm with np.var(ddof=1)",
        "lab2_transformer_reuters",
        "encoder_block",
        [
            (
                "variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
                "variance = x.var(axis=-1, ddof=1, keepdims=True)",
            )
        ],
        "divides by d - 1",
    ),
    (
        "feed-forward without its ReLU",
        "lab2_transformer_reuters",
        "encoder_block",
        [
            (
                'np.maximum(Z @ w["intermediate_kernel"] + w["intermediate_bias"], 0.0)',
                '(Z @ w["intermediate_kernel"] + w["intermediate_bias"])',
            )
        ],
        "has no ReLU",
    ),
    (
        "weights multiplied the wrong way round",
        "lab3_gcn_molecules",
        "gcn_matrix",
        [("H @ W.T + H @ B.T", "H @ W + H @ B")],
        "shapes do not fit",
    ),
    (
        "an axis the scores do not have",
        "lab2_transformer_reuters",
        "encoder_block",
        [("K.transpose(0, 2, 1)", "K.transpose(0, 2, 3)")],
        "An axis number is out of range",
    ),
    (
        "the lecture's Kipf & Welling normalisation with self-loops",
        "lab3_gcn_molecules",
        "gcn_matrix",
        [
            (
                "    return activation(D_inv @ A @ H @ W.T + H @ B.T)",
                "    A_hat = A + np.eye(len(A))\n"
                "    D_hat = np.diag(1.0 / np.sqrt(A_hat.sum(axis=1)))\n"
                "    return activation(D_hat @ A_hat @ D_hat @ H @ W.T + H @ B.T)",
            )
        ],
        "D~^-1/2 (A + I) D~^-1/2 (Kipf & Welling's GCN",
    ),
    (
        "A transposed, the degree of row v kept",
        "lab3_gcn_molecules",
        "gcn_matrix",
        [("D_inv @ A @ H", "D_inv @ A.T @ H")],
        "taken from column v of A",
    ),
    (
        "each message gathered at the receiving node",
        "lab3_gcn_molecules",
        "gcn_edges",
        [("messages = H[source]", "messages = H[target]")],
        "Each message is the receiving node's own features",
    ),
    (
        "GAT projection the wrong way round",
        "lab4_gat",
        "gat_attention",
        [("H @ W.T", "H @ W")],
        "Z = H @ W.T, not H @ W",
    ),
    (
        "the node itself in its neighbours' mean",
        "lab3_gcn_molecules",
        "gcn_scalar",
        [("            if A[v, u] != 0:", "            if A[v, u] != 0 or u == v:")],
        "The mean includes the node itself",
    ),
    (
        "symmetric normalisation",
        "lab3_gcn_molecules",
        "gcn_matrix",
        [
            (
                MEAN,
                "    inverse_sqrt = np.divide(1.0, np.sqrt(degree), out=np.zeros_like(degree), "
                "where=degree > 0)\n    D = np.diag(inverse_sqrt)\n"
                "    return activation(D @ A @ D @ H @ W.T + H @ B.T)",
            )
        ],
        "normalised symmetrically",
    ),
    (
        "a sum instead of a mean",
        "lab3_gcn_molecules",
        "gcn_matrix",
        [
            (
                "return activation(D_inv @ A @ H @ W.T + H @ B.T)",
                "return activation(A @ H @ W.T + H @ B.T)",
            )
        ],
        "summed, not averaged",
    ),
    (
        "messages summed at the source node",
        "lab3_gcn_molecules",
        "gcn_edges",
        [("    source, target = edge_index\n", "    target, source = edge_index\n")],
        "summed at the source node",
    ),
    (
        "edge messages summed, not averaged",
        "lab3_gcn_molecules",
        "gcn_edges",
        [
            (
                "    return activation(mean @ W.T + H @ B.T)",
                "    return activation(sums @ W.T + H @ B.T)",
            )
        ],
        "summed, not averaged",
    ),
    (
        "an N x N matrix built from the edge list",
        "lab3_gcn_molecules",
        "gcn_edges",
        [
            (
                "    sums = np.zeros_like(H)\n    np.add.at(sums, target, messages)",
                "    A = np.zeros((len(H), len(H)))\n    A[target, source] = 1.0\n    sums = A @ H",
            )
        ],
        "it builds an N x N matrix",
    ),
    (
        "readout over the padding too",
        "lab3_gcn_molecules",
        "readout",
        [
            (
                "    real = mask[..., None]",
                '    return {"sum": H.sum(1), "mean": H.mean(1), "max": H.max(1)}[mode]',
            )
        ],
        "The padding nodes (mask False) were pooled too",
    ),
    (
        "max readout with zeros in the padding",
        "lab3_gcn_molecules",
        "readout",
        [
            (
                "pooled = np.where(real, H, -np.inf).max(axis=1)",
                "pooled = np.where(real, H, 0.0).max(axis=1)",
            )
        ],
        "set to 0 before the maximum",
    ),
    (
        "max readout of a graph without real nodes left at -inf",
        "lab3_gcn_molecules",
        "readout",
        [
            (
                "        return np.where(mask.any(axis=1)[:, None], pooled, 0.0)",
                "        return pooled",
            )
        ],
        "has no real nodes (its mask is all False) and your max readout",
    ),
    (
        "mean readout of a graph without real nodes left at 0 / 0",
        "lab3_gcn_molecules",
        "readout",
        [("    return total / np.maximum(count, 1)", "    return total / count")],
        "divided by a count of 0 is 0 / 0, NaN",
    ),
    (
        "mean over the padded size",
        "lab3_gcn_molecules",
        "readout",
        [("    return total / np.maximum(count, 1)", "    return total / mask.shape[1]")],
        "divided by the padded size N",
    ),
    (
        "heads summed instead of averaged",
        "lab4_gat",
        "multi_head_gat",
        [("    return np.mean(outputs, axis=0)", "    return np.sum(outputs, axis=0)")],
        "The heads are summed",
    ),
    (
        "heads averaged when concat=True",
        "lab4_gat",
        "multi_head_gat",
        [
            (
                "        return np.concatenate(outputs, axis=1)",
                "        return np.mean(outputs, axis=0)",
            )
        ],
        "with concat=True they are concatenated",
    ),
    (
        "every head with the first head's weights",
        "lab4_gat",
        "multi_head_gat",
        [("for W, a in zip(Ws, As)]", "for W, a in zip([Ws[0]] * len(Ws), [As[0]] * len(As))]")],
        "Every head gives the first head's output",
    ),
    (
        "an ELU on each head's output",
        "lab4_gat",
        "multi_head_gat",
        [
            (
                "[gat_attention(H, A, W, a)[1] for",
                "[np.where(gat_attention(H, A, W, a)[1] > 0, gat_attention(H, A, W, a)[1], "
                "np.expm1(gat_attention(H, A, W, a)[1])) for",
            )
        ],
        "went through an ELU",
    ),
    (
        "attention without self loops",
        "lab4_gat",
        "gat_attention",
        [("allowed = (A != 0) | np.eye(len(H), dtype=bool)", "allowed = A != 0")],
        "does not attend to itself",
    ),
    (
        "scores without the LeakyReLU",
        "lab4_gat",
        "gat_attention",
        [("    scores = np.where(scores > 0, scores, negative_slope * scores)   # (2)\n", "")],
        "skip the LeakyReLU",
    ),
    (
        "LeakyReLU with PyTorch's slope 0.01",
        "lab4_gat",
        "gat_attention",
        [("negative_slope * scores)", "0.01 * scores)")],
        "slope of 0.01 (PyTorch's LeakyReLU default) where negative_slope=",
    ),
]

_NAMESPACES: dict = {}


def _namespace(lab, piece, edits):
    """The lab's graded cells up to ``piece``'s, that one with ``edits``, run in this
    process beside NumPy and Keras 3 (what these cells use; the labs' set-up cells would
    choose each lab's Keras mode, which one process cannot change)."""
    import numpy as np
    import tensorflow as tf

    from lablib.backend import get_keras

    nb = nbformat.read(SOLUTIONS / f"{lab}.ipynb", as_version=4)
    keras = get_keras()
    # tf: Lab 2's build_model cell defines a tf.keras layer class on the way to a later piece
    ns = {"__name__": "__main__", "np": np, "tf": tf, "keras": keras, "ops": keras.ops}
    for cell in nb.cells:  # the graded cells before it too (a piece may call an earlier one)
        if not cell.source.startswith("# GRADED: "):
            continue
        name, source = cell.source.split("\n", 1)[0][len("# GRADED: ") :].strip(), cell.source
        if name == piece:
            for old, new in edits:
                assert old in source, f"the solution of {piece} no longer has {old!r}"
                source = source.replace(old, new)
        exec(compile(source, f"<graded cell {name}>", "exec"), ns)
        if name == piece:
            return ns
    raise AssertionError(f"{lab} has no graded cell {piece}")


def _check(lab, piece, ns):
    from lablib.grading.spec import load_lab

    objects = load_lab(lab).pieces[piece].objects
    return lablib.check(lab, piece, quiet=True, **{name: ns[name] for name in objects})


@pytest.mark.parametrize("case, lab, piece, edits, words", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_the_check_names_the_mistake(case, lab, piece, edits, words, tmp_path):
    result = _check(lab, piece, _namespace(lab, piece, edits))
    failed = [r for r in result.results if not r.passed]
    assert failed, f"{case}: every public test passed"
    for r in failed:
        assert words in r.message, f"{case}: {r.name} says {r.message!r}"
        assert r.hint == "", f"{case}: {r.name} adds the unrelated hint {r.hint!r}"
    report = result.summary()
    assert words in report and "hint:" not in report, report


@pytest.mark.parametrize("lab, piece", sorted({(m[1], m[2]) for m in MISTAKES}))
def test_the_solution_gets_no_diagnosis(lab, piece, tmp_path):
    result = _check(lab, piece, _namespace(lab, piece, []))
    assert result.passed, [(r.name, r.message) for r in result.results]
