"""Lab 2's ``encoder_block`` judges compare with one NumPy block (``encoder_block_math``):
it must be tfm's ``TransformerEncoderBlock`` and lablib's, weight for weight, or the lab's
claim ("your block matches Model Garden's") and its grades would not hold."""

import numpy as np
import pytest

from lablib.grading.specs import lab2_transformer_reuters as spec

CASE = (7, 7, 8, 4, 2, 16)  # seed, tokens, width, heads, key size, inner size
MASK = np.array([1, 1, 1, 1, 1, 0, 0], dtype=bool)


def _inputs():
    x, weights = spec.block_case(*CASE)
    return x, weights, [weights[name].astype("float32") for name in spec.BLOCK_NAMES]


@pytest.mark.parametrize("mask", [None, MASK], ids=["no mask", "padding"])
def test_reference_block_is_lablibs_block(mask):
    from lablib.layers import TransformerEncoderBlock

    x, weights, arrays = _inputs()
    block = TransformerEncoderBlock(num_heads=CASE[3], inner_dim=CASE[5], inner_activation="relu")
    block(x[None].astype("float32"))
    block.set_weights(arrays)
    out, attention = block(
        x[None].astype("float32"),
        mask=None if mask is None else mask[None],
        return_attention_scores=True,
    )
    want_out, want_attention = spec.reference_block(x, weights, mask)
    rows = slice(None) if mask is None else mask  # padded queries: compared by neither lab nor tfm
    assert np.abs(np.asarray(out)[0][rows] - want_out[rows]).max() < 2e-5
    assert np.abs(np.asarray(attention)[0][:, rows] - want_attention[:, rows]).max() < 2e-6


@pytest.mark.legacy
def test_reference_block_is_model_gardens_block():
    from lablib.backend import import_tfm

    tfm = import_tfm()
    x, weights, arrays = _inputs()
    block = tfm.nlp.layers.TransformerEncoderBlock(
        num_attention_heads=CASE[3], inner_dim=CASE[5], inner_activation="relu"
    )
    allowed = np.broadcast_to(MASK[None, None, :], (1, len(MASK), len(MASK))).astype("float32")
    block([x[None].astype("float32"), allowed])
    block.set_weights(arrays)
    out = block([x[None].astype("float32"), allowed], training=False).numpy()[0]
    want, _ = spec.reference_block(x, weights, MASK)
    assert np.abs(out - want).max() < 2e-5
