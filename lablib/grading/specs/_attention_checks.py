"""Checks of attention shared by the labs' specs: the judges' own attention, and the
step-by-step diagnosis of a student's attention weights and output.

:func:`attention_stages` names the first step of attention that went wrong (NaN,
masked keys, rows not summing to 1, the softmax's scale, scores that are not a softmax of
q.k at all, an output that does not follow from the weights); Lab 1's ``attention`` and
``multi_head_attention`` and Lab 2's ``encoder_block`` call it after their known-mistake
lists (:func:`lablib.grading.expect.diagnose`) found nothing.
"""

from __future__ import annotations

import numpy as np

from lablib.grading.expect import Mistake

__all__ = [
    "OUTPUT_NOT_WEIGHTED_SUM",
    "attention_stages",
    "centred_rows",
    "large_score_mistakes",
    "reference_attention",
]


def reference_attention(query, key, value, mask=None, scale=None):
    """The grading process's own attention: masked keys get weight 0, empty rows 0.
    ``scale`` replaces 1 / sqrt(d_k) (to compute what a mistaken scaling gives)."""
    query, key, value = (np.asarray(a, dtype=np.float64) for a in (query, key, value))
    scale = 1.0 / np.sqrt(query.shape[-1]) if scale is None else scale
    scores = query @ np.swapaxes(key, -1, -2) * scale
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool), scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    exp = np.exp(scores - top)
    total = exp.sum(axis=-1, keepdims=True)
    weights = exp / np.where(total > 0, total, 1.0)
    return weights @ value, weights


def large_score_mistakes(weights, output, allowed, where, lead=()):
    """The numerics of a student's attention on scores around 1e3, where a softmax without
    each row's own maximum subtracted overflows (or underflows): ``weights`` and ``output``
    (the student's, already checked for shape) must be finite and each query's weights over
    its ``allowed`` keys (bool over the last axis, or None for all) must sum to 1. ``where``
    names the call in the messages; ``lead`` names the weights' axes before the queries
    (Lab 2's ``("head",)``). Raises :class:`Mistake` naming the first that fails. Shared by
    Lab 1's ``attention`` and Lab 2's ``encoder_block``, which then compare with the
    reference loosely enough for float32."""
    shift = (
        "Subtract each query's own largest allowed score (max over axis -1, keepdims=True) "
        "before np.exp: the softmax stays the same and every row's largest exponential is 1."
    )
    for values, name in ((weights, "weights"), (output, "output")):
        if not np.all(np.isfinite(values)):
            raise Mistake(
                f"With scores around 1e3 ({where}) your {name} hold NaN or inf: np.exp "
                "overflows to inf beyond a score of about 709 (inf / inf is NaN), or, with one "
                "maximum subtracted for the whole array, a row far below it underflows to 0 "
                f"(0 / 0 is NaN). {shift}"
            )
    weights = np.asarray(weights, dtype=np.float64)
    keys = np.ones(weights.shape[-1], bool) if allowed is None else np.asarray(allowed, bool)
    totals = np.where(keys, weights, 0.0).sum(axis=-1)
    # a query with no allowed key has weights 0 (checked elsewhere), not a sum of 1
    off = np.where(np.broadcast_to(keys, weights.shape).any(axis=-1), np.abs(totals - 1.0), 0.0)
    if np.any(off > 1e-3):
        index = np.unravel_index(int(np.argmax(off)), totals.shape)
        names = (*lead, "query")[-len(index) :] if index else ()
        if len(names) < len(index):
            names = (*("axis",) * (len(index) - len(names)), *names)
        row = ", ".join(f"{n} {int(i)}" for n, i in zip(names, index))
        raise Mistake(
            f"With scores around 1e3 ({where}) the weights of {row} sum to "
            f"{totals[index]:.4g}, not 1: its exponentials underflowed to 0 (a maximum "
            f"subtracted that is not its own, far above its scores). {shift}"
        )


def centred_rows(values, usable):
    """``values`` minus their mean over each row's ``usable`` entries (last axis), 0
    elsewhere: a softmax's log-weights and its scores agree up to one constant per row,
    so centred they can be compared (or a scale fitted between them)."""
    values = np.where(usable, values, 0.0)
    count = np.maximum(usable.sum(axis=-1, keepdims=True), 1)
    return np.where(usable, values - values.sum(axis=-1, keepdims=True) / count, 0.0)


def _rows(values, count: int = 3) -> str:
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    shown = ", ".join(f"{v:.4g}" for v in flat[:count])
    return shown + (", ..." if flat.size > count else "")


OUTPUT_NOT_WEIGHTED_SUM = (
    "Your weights are right, but the output is not their weighted sum "
    "of the values: return weights @ value (each query's weights times "
    "the value rows)."
)


def _weights_finite(weights, live):
    """Whether all weights are finite; raise if a query with keys to attend to has NaN/inf."""
    if not np.all(np.isfinite(weights[live])):
        raise Mistake(
            "Some weights are NaN or infinite for queries that have keys to attend to: in a "
            "softmax, exp(score - the row's largest score) lies in (0, 1] and each row's total "
            "is at least 1, so nothing overflows or divides by 0. Check the exponential and "
            "that you subtract each query's own largest score (max over axis -1, keepdims=True)."
        )
    return bool(np.all(np.isfinite(weights)))


def _check_masked_and_totals(weights, allowed, live):
    """Check that masked keys get weight 0 and each live query's weights sum to 1 over keys."""
    if np.any(weights[~allowed] != 0.0):
        raise Mistake(
            "Keys the mask blocks got non-zero weights: where the mask is False set the "
            "score to -inf before the softmax (np.where(mask, scores, -np.inf)), so that "
            "exp gives exactly 0 there."
        )
    totals = weights.sum(axis=-1)
    if not np.allclose(totals[live], 1.0, atol=1e-6):
        if np.allclose(weights.sum(axis=-2)[..., allowed.any(axis=-2)], 1.0, atol=1e-6):
            raise Mistake(
                "Your weights sum to 1 over the queries (axis -2), not over the keys: "
                "each query's weights must sum to 1, so normalise over the last axis."
            )
        raise Mistake(
            f"Each query's weights must sum to 1 over the keys; yours sum to {_rows(totals[live])}."
            " Divide each row's exponentials by that row's own total: "
            "exponentials.sum(axis=-1, keepdims=True)."
        )


def _softmax_scale_fit(weights, query, key, allowed, live):
    """Fit log(weights) = a * q.k/sqrt(d_k) + c per row: (a, misfit, largest centred log)."""
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1])
    with np.errstate(divide="ignore"):
        logs = np.log(weights)
    usable = allowed & live[..., None] & (weights > 1e-12)
    centred_logs = centred_rows(logs, usable)
    centred_scores = centred_rows(scores, usable)
    denominator = float(np.sum(centred_scores**2))
    factor = float(np.sum(centred_logs * centred_scores)) / denominator if denominator else 0.0
    misfit = float(np.max(np.abs(centred_logs - factor * centred_scores), initial=0.0))
    return factor, misfit, float(np.max(np.abs(centred_logs), initial=0.0))


def _name_wrong_softmax(weights, query, key, allowed, live, d_k_name, rtol):
    """Name why weights that sum to 1 are not the right softmax: sign, scale or scores."""
    # Softmax weights are exp(a * score + c) per row: find the factor a that fits.
    factor, misfit, largest = _softmax_scale_fit(weights, query, key, allowed, live)
    d_k = query.shape[-1]
    if misfit < max(1e-3, 10 * rtol) * max(1.0, largest):
        if abs(factor + 1) < 1e-3:
            raise Mistake(
                "Your weights are the softmax of minus the scaled scores: the most "
                "similar key gets the least weight. Check the sign of q.k/sqrt(d_k) "
                "and of the max you subtract (exp(score - max), not exp(max - score))."
            )
        raise Mistake(
            f"Your weights are the softmax of {factor:.4g} times q.k/sqrt({d_k_name}) "
            f"({d_k_name} = {d_k}): the products of queries and keys are right, their scale "
            f"is not. Divide q.k by sqrt({d_k_name}) = {np.sqrt(d_k):.4g} once, {d_k_name} "
            "being the size of each query and key."
        )
    raise Mistake(
        "Your weights sum to 1 over the keys but are not a softmax of the scaled scores "
        "q.k/sqrt(d_k), not even of a multiple of them: the scores are wrong before the "
        "softmax (each query times every key: query @ key.swapaxes(-1, -2)), or the value "
        "subtracted before exp is not each query's own largest score (max over axis -1, "
        "keepdims=True)."
    )


def attention_stages(
    got,
    query,
    key,
    value,
    mask=None,
    output_of=None,
    output_sentence=OUTPUT_NOT_WEIGHTED_SUM,
    d_k_name="d_k",
    rtol=1e-5,
):
    """Name the first step of attention that went wrong, from the weights and output a
    student's ``attention`` returned (called after :func:`diagnose` found no known
    mistake). Each step is checked on what the step itself must give, so the sentence
    names where the mistake is, not only that the arrays differ. Returns quietly when
    every step looks right (the caller's comparisons then report the difference).

    ``output_of(weights)``: the output the student's own weights must give (default
    ``weights @ value``; multi-head attention merges the heads and projects them; False:
    the output is not checked here), and
    ``output_sentence`` what to say when the output does not follow from the weights."""
    query, key, value = (np.asarray(a, dtype=np.float64) for a in (query, key, value))
    weights, output = got["weights"], got["output"]
    _, right = reference_attention(query, key, value, mask)
    allowed = (
        np.ones(right.shape, dtype=bool)
        if mask is None
        else np.broadcast_to(np.asarray(mask, dtype=bool), right.shape)
    )
    live = allowed.any(axis=-1)  # queries with at least one key to attend to
    if not _weights_finite(weights, live):
        return  # only fully masked queries: the test of that case names it
    _check_masked_and_totals(weights, allowed, live)
    if not np.allclose(weights, right, rtol=rtol, atol=rtol * 1e-2):
        _name_wrong_softmax(weights, query, key, allowed, live, d_k_name, rtol)
    if output_of is False:  # the caller checks the output itself
        return
    expected = output_of(weights) if output_of else weights @ value
    if np.shape(output) == np.shape(expected) and not np.allclose(
        output, expected, rtol=rtol, atol=rtol * 0.1
    ):
        raise Mistake(output_sentence)
