"""Lab 2's ``encoder_block`` piece (the encoder block by hand in NumPy): which step of
the block went wrong.

The student's ``encoder_block(x, weights, mask, epsilon)`` returns its output and its
attention weights, nothing in between. To see inside, the probe also runs it on two
*ablated* copies of the weights (:data:`ABLATIONS`): with the feed-forward network's
weights zeroed the block's output is ``LayerNorm(Z)``, the attention sublayer alone;
with the attention's value and output projections zeroed it is the feed-forward
sublayer on ``LayerNorm(X)``. :func:`block_stages` compares each with the judge's own
block on the same weights and names the first step that is wrong: the attention
weights (via :func:`~lablib.grading.specs._attention_checks.attention_stages`), the
final layer normalisation, the attention sublayer, the feed-forward sublayer, or the
way the two are joined.
"""

from __future__ import annotations

import numpy as np

from lablib.grading.expect import Mistake, real_array
from lablib.grading.specs._attention_checks import attention_stages

__all__ = ["ABLATIONS", "ablated", "ablation_outputs", "block_stages"]

#: The weights each ablation zeroes.
ABLATIONS = {
    "without_ffn": ("intermediate_kernel", "intermediate_bias", "output_kernel", "output_bias"),
    "without_attention": (
        "value_kernel",
        "value_bias",
        "attention_output_kernel",
        "attention_output_bias",
    ),
}


def ablated(weights, name):
    """A copy of the block's ``weights`` with :data:`ABLATIONS` ``[name]`` zeroed."""
    return {
        k: (np.zeros_like(v) if k in ABLATIONS[name] else np.array(v, copy=True))
        for k, v in weights.items()
    }


def ablation_outputs(block, x, weights, mask, epsilon):
    """(Probe side.) The student's block output on each ablated copy of the weights, or
    None where it raised (the full run reports the error)."""
    outputs = {}
    for name in ABLATIONS:
        try:
            result = block(
                np.array(x, copy=True),
                ablated(weights, name),
                mask=None if mask is None else np.array(mask, copy=True),
                epsilon=epsilon,
            )
            outputs[name] = np.asarray(result[0], dtype=float)
        except Exception:  # noqa: BLE001 - the un-ablated run shows the student's error
            outputs[name] = None
    return outputs


def _close(got, expected, tolerance=1e-4):
    got = real_array(got) if isinstance(got, np.ndarray) else None
    return (
        got is not None
        and got.shape == np.shape(expected)
        and bool(np.allclose(got, expected, rtol=tolerance, atol=tolerance))
    )


def _check_output_normalised(output, right, weights):
    """Check that the output, its final gamma and beta undone, has mean 0, variance 1 per token."""
    gamma, beta = (np.asarray(weights[f"output_norm_{k}"], np.float64) for k in ("gamma", "beta"))
    if output.shape == right.shape and np.all(np.abs(gamma) > 1e-6):
        normalised = (output - beta) / gamma
        if not (
            np.allclose(normalised.mean(axis=-1), 0.0, atol=1e-4)
            and np.allclose((normalised**2).mean(axis=-1), 1.0, atol=1e-3)
        ):
            raise Mistake(
                "Your attention weights are right, but the block's output is not layer-normalised: "
                "(output - output_norm_beta) / output_norm_gamma must have mean 0 and variance 1 "
                "over each token's features. Check layer_norm: (x - mean) / sqrt(variance + "
                "epsilon) * gamma + beta, with the mean and variance over the last axis "
                "(keepdims=True), the variance of (x - mean) itself."
            )


def _name_wrong_sublayer(got, x, weights, mask, reference):
    """Name the wrong sublayer (or their joining) from the outputs on the ablated weights."""
    ablations = got.get("ablations")
    ablations = ablations if isinstance(ablations, dict) else {}
    attention_alone = _close(
        ablations.get("without_ffn"), reference(x, ablated(weights, "without_ffn"), mask)[0]
    )
    ffn_alone = _close(
        ablations.get("without_attention"),
        reference(x, ablated(weights, "without_attention"), mask)[0],
    )
    if attention_alone and ffn_alone:
        raise Mistake(
            "Each sublayer is right on its own, but not the two together: the feed-forward "
            "network reads Z = LayerNorm(X + MultiHead(X)), the attention sublayer's output, and "
            "its residual adds that same Z: output = LayerNorm(FFN(Z) + Z)."
        )
    if ffn_alone:
        raise Mistake(
            "Your attention weights and feed-forward sublayer are right, but the attention "
            "sublayer is not: each head's output is its weights @ V, the heads are projected back "
            "with attention_output_kernel (einsum 'htk,hkd->td') plus attention_output_bias, and "
            "Z = LayerNorm(X + MultiHead(X))."
        )
    if attention_alone:
        raise Mistake(
            "Your attention sublayer is right, but the feed-forward sublayer is not: "
            "FFN(Z) = ReLU(Z @ intermediate_kernel + intermediate_bias) @ output_kernel + "
            "output_bias, and the block's output is LayerNorm(FFN(Z) + Z)."
        )
    if ablations:
        raise Mistake(
            "Your attention weights are right, but neither sublayer gives the right output even "
            "alone: check what they share, the layer normalisation (each token over its "
            "features, with the weights' gamma and beta) and the residuals (X + MultiHead(X), "
            "FFN(Z) + Z)."
        )


def _name_mask_over_queries(attention, mask):
    """Name a padding mask put over the queries: NaN exactly in the padding tokens' rows
    (every score of a padding query set to -inf), in every head."""
    if mask is None or attention.ndim != 3 or attention.shape[-1] != np.size(mask):
        return
    broken = ~np.isfinite(attention).all(axis=-1)  # [heads, T]: rows with NaN or inf
    padding = ~np.asarray(mask, dtype=bool).reshape(-1)
    if padding.any() and np.array_equal(broken, np.broadcast_to(padding, broken.shape)):
        raise Mistake(
            "Your mask blocks the padding tokens as queries (rows of the scores), not as keys: "
            "a padding query's row has no score left but -inf, hence NaN, while the real "
            "queries still attend to the padding. mask[t] False means no query attends to "
            "token t: block column t of every row, np.where(mask[None, None, :], scores, "
            "-np.inf)."
        )


def block_stages(got, x, weights, mask, reference):
    """(Judge side.) Name the first step of the block that went wrong.

    Args:
        got: the probe's values: ``output`` [T, d], ``attention`` [heads, T, T] and
            ``ablations`` (:func:`ablation_outputs`).
        x, weights, mask: the test's case (mask: [T] real tokens, or None).
        reference: ``reference(x, weights, mask) -> (output, attention)``, the judge's block.
    Returns quietly when no step can be named (the caller's comparisons report it).
    """
    attention, output = got["attention"], got["output"]
    if not np.all(np.isfinite(attention)):
        _name_mask_over_queries(attention, mask)
        raise Mistake(
            "Some attention weights are NaN or infinite: every query has a real key "
            "here, so a softmax over the keys (the last axis) never divides by 0; "
            "subtract each row's maximum before np.exp."
        )
    x = np.asarray(x, dtype=np.float64)

    def per_head(name):  # [T, d] @ [d, h, k] + [h, k] -> [h, T, k]
        return (
            np.einsum("td,dhk->htk", x, weights[f"{name}_kernel"])
            + weights[f"{name}_bias"][:, None, :]
        )

    allowed = (
        None
        if mask is None
        else np.broadcast_to(np.asarray(mask, bool)[None, None, :], attention.shape)
    )
    attention_stages(
        {"weights": attention, "output": output},
        per_head("query"),
        per_head("key"),
        per_head("value"),
        allowed,
        output_of=False,
        rtol=1e-4,
    )
    right = reference(x, weights, mask)[0]
    if _close(output, right):
        return
    _check_output_normalised(output, right, weights)
    _name_wrong_sublayer(got, x, weights, mask, reference)
