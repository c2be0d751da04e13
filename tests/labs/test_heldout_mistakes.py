"""Held-out mistakes: student-style edits written after the mutation-measured diagnoses
(benchmarks/mutation.py), without changing a check to fit them. Each must be caught, and
the first failing test must name it (a diagnosis, not an array diff) in words that point
at the step that is wrong. The corpus of test_mistakes.py asks more of its cases (every
failing test says the same words); these check that the step-by-step diagnoses carry
over to mistakes the mutation operators do not make."""

from __future__ import annotations

import pytest

from test_mistakes import _check, _namespace

#: (case, lab, piece, [(text in the solution's graded cell, what the student wrote)],
#:  words the first failing test must say).
HELD_OUT = [
    (
        "key.T instead of swapaxes",
        "lab1_attention",
        "attention",
        [("query @ key.swapaxes(-1, -2)", "query @ key.T")],
        "do not fit",
    ),
    (
        "output projection forgotten",
        "lab1_attention",
        "multi_head_attention",
        [("        outputs = self.output_dense(merged)", "        outputs = merged")],
        "the output does not follow from them",
    ),
    (
        "heads merged without transposing back",
        "lab1_attention",
        "multi_head_attention",
        [
            (
                "heads = ops.transpose(ops.matmul(weights, value), (0, 2, 1, 3))",
                "heads = ops.matmul(weights, value)",
            )
        ],
        "transposing back",
    ),
    (
        "tanh instead of ReLU in the feed-forward network",
        "lab2_transformer_reuters",
        "encoder_block",
        [
            (
                'inner = np.maximum(Z @ w["intermediate_kernel"] + w["intermediate_bias"], 0.0)',
                'inner = np.tanh(Z @ w["intermediate_kernel"] + w["intermediate_bias"])',
            )
        ],
        "the feed-forward sublayer is not",
    ),
    (
        "attention output bias forgotten",
        "lab2_transformer_reuters",
        "encoder_block",
        [(' + w["attention_output_bias"]', "")],
        "the attention sublayer is not",
    ),
    (
        "feed-forward residual adds X",
        "lab2_transformer_reuters",
        "encoder_block",
        [("layer_norm(ffn + Z,", "layer_norm(ffn + X,")],
        "the residuals",
    ),
    (
        "+1 in the F1 denominator",
        "lab2_transformer_reuters",
        "macro_f1",
        [
            (
                "denominator = 2 * true_positives + false_positives + false_negatives",
                "denominator = 2 * true_positives + false_positives + false_negatives + 1",
            )
        ],
        "not 1",
    ),
    (
        "A D^-1 instead of D^-1 A",
        "lab3_gcn_molecules",
        "gcn_matrix",
        [("D_inv @ A @ H", "A @ D_inv @ H")],
        "the count you divide it by",
    ),
    (
        "degree counted with the node itself",
        "lab3_gcn_molecules",
        "gcn_matrix",
        [("degree = A.sum(axis=1)", "degree = A.sum(axis=1) + 1")],
        "the count you divide it by",
    ),
    (
        "mean readout divided by the batch's nodes",
        "lab3_gcn_molecules",
        "readout",
        [("return total / np.maximum(count, 1)", "return total / mask.sum()")],
        "the mean over its real nodes only",
    ),
    (
        "no maximum subtracted before exp",
        "lab4_gat",
        "gat_attention",
        [("    scores = scores - scores.max(axis=1, keepdims=True)    # stable softmax\n", "")],
        "subtract each row's largest allowed score",
    ),
    (
        "ReLU instead of LeakyReLU",
        "lab4_gat",
        "gat_attention",
        [("np.where(scores > 0, scores, negative_slope * scores)", "np.maximum(scores, 0.0)")],
        "LeakyReLU",
    ),
    (
        "output from a rescaled projection",
        "lab4_gat",
        "gat_attention",
        [("return alpha, alpha @ Z", "return alpha, 1.5 * (alpha @ Z)")],
        "the output is not alpha @ Z",
    ),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the overflow the second-to-last case makes
@pytest.mark.parametrize("case, lab, piece, edits, words", HELD_OUT, ids=[m[0] for m in HELD_OUT])
def test_the_first_failure_names_the_mistake(case, lab, piece, edits, words):
    result = _check(lab, piece, _namespace(lab, piece, edits))
    failed = [r for r in result.results if not r.passed]
    assert failed, f"{case}: every public test passed"
    first = failed[0]
    assert first.mistake, f"{case}: {first.name} gives no diagnosis: {first.message!r}"
    assert words in first.message, f"{case}: {first.name} says {first.message!r}"
    assert all(r.hint == "" for r in failed), [(r.name, r.hint) for r in failed if r.hint]
