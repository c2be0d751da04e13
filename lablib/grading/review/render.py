"""A student's markdown and LaTeX as HTML that is safe to show in the review page.

Everything a student writes is hostile. The text goes through three steps, and the
HTML of each step passes an allowlist sanitiser (nh3, the Python binding of the Rust
``ammonia`` crate) before it is used:

1. markdown-it-py parses the markdown (CommonMark, tables, strikethrough) with raw HTML
   turned off: ``<script>`` or ``<img onerror=...>`` typed by a student is text. Images
   are shown as their description and address, never loaded.
2. ``$...$``, ``$$...$$`` and ``\\begin{equation}...`` (mdit-py-plugins' math rules, the
   notebooks' own syntax) become MathML through latex2mathml's element tree, serialised
   here with every text escaped (latex2mathml's own ``convert()`` unescapes what
   ``\\text{...}`` holds, so ``$\\text{<b id=x>}$`` would come out as markup). A formula it
   cannot read is shown as its TeX source, flagged. Each formula is sanitised alone.
3. The whole answer is sanitised once more: only the elements and attributes markdown
   and MathML need (:data:`TAGS`, :data:`ATTRIBUTES`), no ``id``, ``class`` (other than
   the page's own ``tex``), ``style`` or event handler, links to ``http``, ``https`` and
   ``mailto`` only (absolute, opened in a new tab without opener or referrer).

Every browser draws MathML without a script, a font download or a network.

Long answers are bounded: :func:`render_answer` shows the first ``limit`` characters
(the page's preview; "show all" asks for the rest), renders at most
:data:`FULL_RENDER_CHARS` characters as markdown, the rest of a huge answer as plain text,
and no more than :data:`MAX_SHOWN_CHARS` characters in all.

Example::

    render_markdown("The exponent is $2i/d$, not $2j/d$.")
"""

from __future__ import annotations

import functools
import html
import xml.etree.ElementTree as ElementTree

__all__ = [
    "ATTRIBUTES",
    "CLEAN_CONTENT_TAGS",
    "FULL_RENDER_CHARS",
    "MAX_SHOWN_CHARS",
    "TAGS",
    "render_answer",
    "render_markdown",
    "sanitise",
]

#: What markdown-it emits for CommonMark, tables and strikethrough (no images: shown as text).
MARKDOWN_TAGS = frozenset(
    {
        "p",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "ul",
        "ol",
        "li",
        "pre",
        "code",
        "em",
        "strong",
        "a",
        "hr",
        "br",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "s",
        "span",
    }
)
#: The MathML elements latex2mathml writes (MathML Core's presentation elements).
MATHML_TAGS = frozenset(
    {
        "math",
        "mrow",
        "mi",
        "mn",
        "mo",
        "ms",
        "mtext",
        "mspace",
        "msub",
        "msup",
        "msubsup",
        "munder",
        "mover",
        "munderover",
        "mfrac",
        "msqrt",
        "mroot",
        "mstyle",
        "mtable",
        "mtr",
        "mtd",
        "mpadded",
        "mphantom",
        "menclose",
    }
)
#: Every element an answer may contain once sanitised.
TAGS = MARKDOWN_TAGS | MATHML_TAGS
_MATH_ATTRIBUTES = frozenset(
    {
        "display",
        "mathvariant",
        "displaystyle",
        "scriptlevel",
        "stretchy",
        "fence",
        "form",
        "separator",
        "accent",
        "accentunder",
        "lspace",
        "rspace",
        "minsize",
        "maxsize",
        "movablelimits",
        "largeop",
        "symmetric",
        "linethickness",
        "notation",
        "width",
        "height",
        "depth",
        "voffset",
        "columnalign",
        "columnspacing",
        "columnlines",
        "rowspacing",
        "rowlines",
        "mathsize",
    }
)
#: The attributes kept, per element (``href`` further limited to absolute http, https, mailto).
ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "code": {"title"},
    "pre": {"title"},
    **{tag: set(_MATH_ATTRIBUTES) for tag in MATHML_TAGS},
}
_CLASSES = {"code": {"tex"}, "pre": {"tex", "rest"}, "span": {"image"}, "p": {"cut"}}
#: The elements removed with their content (a script's or style's text is no answer's
#: text): the same for the review page and the graders' printout.
CLEAN_CONTENT_TAGS = frozenset(
    {
        "script",
        "style",
        "template",
        "noscript",
        "textarea",
        "xmp",
        "title",
        "iframe",
        "noembed",
        "noframes",
        "object",
        "select",
    }
)

#: An answer longer than this is rendered as markdown up to here, the rest shown as plain
#: text (a 1 MB answer of formulas takes the server some 12 s to turn into MathML; this
#: much, some 2,000 words, a fifth of a second).
FULL_RENDER_CHARS = 12_000
#: The most characters of one answer the page is sent, even on "show all" (a 1 MB answer
#: laid out in the browser takes seconds and no grader reads it there): past this, the
#: page says how much more there is and that the notebook holds it.
MAX_SHOWN_CHARS = 50_000


@functools.lru_cache(maxsize=1)
def _cleaner():
    import nh3

    return nh3.Cleaner(
        tags=set(TAGS),
        attributes={k: set(v) for k, v in ATTRIBUTES.items()},
        allowed_classes={k: set(v) for k, v in _CLASSES.items()},
        clean_content_tags=set(CLEAN_CONTENT_TAGS),
        url_schemes={"http", "https", "mailto"},
        url_relative="deny",
        link_rel="noopener noreferrer",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )


def sanitise(fragment: str) -> str:
    """``fragment`` with only :data:`TAGS` and :data:`ATTRIBUTES` left (everything else
    removed, its text kept; a script's or style's text removed too)."""
    return _cleaner().clean(fragment)


@functools.lru_cache(maxsize=8192)
def _math(tex: str, display: bool) -> str:
    """One formula as sanitised MathML (cached: answers repeat their formulas)."""
    from latex2mathml.converter import convert_to_element

    try:
        element = convert_to_element(tex, display="block" if display else "inline")
        # latex2mathml writes characters as entity text ("&#x0211D;") and its convert()
        # unescapes the whole serialisation, markup in \text{} included: decode the
        # entities in each text here, then let ElementTree escape every one of them
        for node in element.iter():
            if node.text:
                node.text = html.unescape(node.text)
            if node.tail:
                node.tail = html.unescape(node.tail)
            for key, value in node.attrib.items():
                node.attrib[key] = html.unescape(value)
        mathml = ElementTree.tostring(element, encoding="unicode")
    except Exception:  # noqa: BLE001 - any formula the converter cannot read is shown as typed
        tag = "pre" if display else "code"
        return f"<{tag} class='tex' title='formula shown as typed'>{html.escape(tex)}</{tag}>"
    return sanitise(mathml)


def _image(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    alt = "".join(child.content for child in (token.children or [])) or token.content
    return (
        f"<span class='image'>[image: {html.escape(alt)} ({html.escape(str(token.attrGet('src') or ''))}), "
        f"not loaded]</span>"
    )


@functools.lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.use(dollarmath_plugin, allow_space=True, allow_digits=True, double_inline=True)
    md.use(amsmath_plugin)
    md.add_render_rule(
        "math_inline", lambda self, tokens, idx, options, env: _math(tokens[idx].content, False)
    )
    md.add_render_rule(
        "math_inline_double",
        lambda self, tokens, idx, options, env: _math(tokens[idx].content, True),
    )
    md.add_render_rule(
        "math_block", lambda self, tokens, idx, options, env: _math(tokens[idx].content, True)
    )
    md.add_render_rule(
        "math_block_label", lambda self, tokens, idx, options, env: _math(tokens[idx].content, True)
    )
    md.add_render_rule(
        "amsmath", lambda self, tokens, idx, options, env: _math(tokens[idx].content, True)
    )
    md.add_render_rule("image", _image)
    # links keep their text and address but never run script (the sanitiser drops the rest)
    md.validateLink = lambda url: (
        not url.strip().lower().startswith(("javascript:", "vbscript:", "data:"))
    )
    return md


def render_markdown(text: str) -> str:
    """``text`` (a notebook's markdown) as sanitised HTML, formulas as MathML."""
    return sanitise(_parser().render(text or ""))


def _cut(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, ended at a line or word break when
    one is near."""
    head = text[:limit]
    for sep in ("\n\n", "\n", " "):
        at = head.rfind(sep)
        if at > limit * 0.8:
            return head[:at]
    return head


def render_answer(text: str, limit: int | None = None) -> str:
    """An answer as sanitised HTML: its first ``limit`` characters (None: all of it;
    past :data:`FULL_RENDER_CHARS` the rest is plain text)."""
    text = text or ""
    if limit is not None and len(text) > limit:
        shown = _cut(text, limit)
        return sanitise(
            _parser().render(shown)
            + f"<p class='cut'>… {len(text) - len(shown):,} more characters: “show all”.</p>"
        )
    if len(text) <= FULL_RENDER_CHARS:
        return render_markdown(text)
    shown = _cut(text, FULL_RENDER_CHARS)
    rest = text[len(shown) : MAX_SHOWN_CHARS]
    unshown = len(text) - len(shown) - len(rest)
    more = (
        f"<p class='cut'>… and {unshown:,} more characters, not shown here (the answer has {len(text):,}): "
        f"the student's notebook holds them.</p>"
        if unshown
        else ""
    )
    return sanitise(
        _parser().render(shown) + f"<p class='cut'>The next {len(rest):,} characters, as typed:</p>"
        f"<pre class='rest'>{html.escape(rest)}</pre>" + more
    )
