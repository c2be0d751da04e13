"""Renamed arguments: the old name kept for one release, with a warning (stdlib only).

lablib speaks Keras's dialect (``num_heads``, ``return_attention_scores``, ``edge_attr``
for edge features everywhere). Names from before 0.2 still work until 0.4 (announced for 0.3, kept one release
longer: see CHANGELOG.md) and warn with
:class:`LablibDeprecationWarning`, a ``FutureWarning`` so that a student sees it in a
notebook (Python hides a plain ``DeprecationWarning`` raised inside a library).

Every rename is listed once, in :data:`RENAMED`; ``tests/layers/test_api_names.py`` reads
it to tell an alias from the old dialect creeping back into a signature.
"""

from __future__ import annotations

import warnings

__all__ = ["LablibDeprecationWarning", "RENAMED", "pop_renamed", "refuse_unknown", "REMOVED_IN"]

#: The release that drops the old names.
REMOVED_IN = "0.4"

#: ``{where: {old name: new name}}``; ``where`` is ``Class.method`` or a function's name.
RENAMED = {
    "TransformerEncoderBlock.__init__": {
        "num_attention_heads": "num_heads",
        "return_attention_scores": "the call argument `return_attention_scores=True`",
    },
    "TransformerDecoderBlock.__init__": {
        "num_attention_heads": "num_heads",
        "return_attention_scores": "the call argument `return_attention_scores=True`",
    },
    "TransformerDecoderBlock.call": {"decoder_inputs_mask": "inputs_mask"},
    "GraphAttention.call": {"return_attention_coefficients": "return_attention_scores"},
    "dense_batch": {"edge_attrs": "edge_attr"},
    "disjoint_batch": {"edge_attrs": "edge_attr"},
    "GraphDataset.dense_dataset": {"edge_attr": "with_edge_attr"},
    "GraphDataset.disjoint_dataset": {"edge_attr": "with_edge_attr"},
    "CoraData.adjacency": {"dense": "adjacency() (dense) or sparse_adjacency() (CSR)"},
}


class LablibDeprecationWarning(FutureWarning):
    """An argument name from before lablib 0.2 was used; the message names the new one."""


def pop_renamed(
    kwargs: dict,
    where: str,
    old: str,
    new_value=None,
    default=None,
    *,
    note: str = "",
    stacklevel: int = 3,
):
    """Take the deprecated argument ``old`` out of ``kwargs`` (a ``**kwargs`` dict).

    ``new_value`` is what the caller got under the new name, whose default is
    ``default``. Returns the old argument's value, warning
    :class:`LablibDeprecationWarning`, when it was given; else ``new_value``. Raises
    TypeError when both names were given (the new one differs from its default).
    ``note`` adds a sentence to the warning (what changed besides the name).
    """
    new = RENAMED[where][old]
    if old not in kwargs:
        return new_value
    value = kwargs.pop(old)
    if new_value is not default and new_value != default:
        raise TypeError(
            f"{where.replace('.__init__', '')}: got both `{old}` (its old name) and its new "
            f"form, {_named(new)}; pass the new one only."
        )
    warnings.warn(
        f"{where.replace('.__init__', '')}: `{old}` is deprecated and will be removed in "
        f"lablib {REMOVED_IN}; use {_named(new)} instead.{(' ' + note) if note else ''}",
        LablibDeprecationWarning,
        stacklevel=stacklevel,
    )
    return value


def refuse_unknown(kwargs: dict, where: str, takes: str = "") -> None:
    """TypeError when ``kwargs`` (a ``**kwargs`` dict, the renamed arguments already taken
    out by :func:`pop_renamed`) still holds anything: ``where`` names the callable,
    ``takes`` says what it accepts."""
    if kwargs:
        raise TypeError(
            f"{where} got unexpected keyword argument(s) "
            f"{', '.join(map(repr, kwargs))}" + (f"; {takes}" if takes else "") + "."
        )


def _named(new: str) -> str:
    return f"`{new}`" if new.isidentifier() else new
