"""A student's markdown and LaTeX as HTML that is safe to show in the review page.

Markdown is parsed by markdown-it-py (CommonMark, tables, strikethrough) with raw HTML
turned off: whatever a student types (``<script>``, ``<img onerror=...>``) is shown as
text. ``$...$``, ``$$...$$`` and ``\\begin{equation}...`` are found by mdit-py-plugins'
math rules (the notebooks' own syntax) and converted to MathML by latex2mathml, which
every current browser draws without a script, a font download or a network; a formula
latex2mathml cannot read is shown as its TeX source, flagged.

Example::

    render_markdown("The exponent is $2i/d$, not $2j/d$.")
"""

from __future__ import annotations

import functools
import html

__all__ = ["render_markdown"]


def _math(tex: str, display: bool) -> str:
    from latex2mathml.converter import convert

    try:
        return convert(tex, display="block" if display else "inline")
    except Exception:  # noqa: BLE001 - any formula the converter cannot read is shown as typed
        tag = "pre" if display else "code"
        return f"<{tag} class='tex' title='formula shown as typed'>{html.escape(tex)}</{tag}>"


@functools.lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.use(dollarmath_plugin, allow_space=True, allow_digits=True, double_inline=True)
    md.use(amsmath_plugin)
    md.add_render_rule("math_inline", lambda self, tokens, idx, options, env: _math(tokens[idx].content, False))
    md.add_render_rule("math_inline_double",
                       lambda self, tokens, idx, options, env: _math(tokens[idx].content, True))
    md.add_render_rule("math_block", lambda self, tokens, idx, options, env: _math(tokens[idx].content, True))
    md.add_render_rule("math_block_label",
                       lambda self, tokens, idx, options, env: _math(tokens[idx].content, True))
    md.add_render_rule("amsmath", lambda self, tokens, idx, options, env: _math(tokens[idx].content, True))
    # links keep their text and address but never run script
    md.validateLink = lambda url: not url.strip().lower().startswith(("javascript:", "vbscript:", "data:"))
    return md


def render_markdown(text: str) -> str:
    """``text`` (a notebook's markdown) as safe HTML, formulas as MathML."""
    return _parser().render(text or "")
