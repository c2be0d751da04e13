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
3. A link is shown as its text and its address (``text [link: https://...]``), never as
   something to click: a link drawn over an invisible formula
   (``[$\\rule{40em}{10em}$](https://...)``) made the blank part of an answer open the
   student's page when a grader clicked the card to focus it. Images are shown so too.
4. The whole answer is sanitised once more: only the elements and attributes markdown
   and MathML need (:data:`TAGS`, :data:`ATTRIBUTES`), no ``a``, ``id``, ``class`` (other
   than the page's own), ``style`` or event handler.

Every browser draws MathML without a script, a font download or a network.

Formulas are bounded, so that no formula makes rendering or printing grow faster than
its text (:func:`_math`):

- a formula that defines macros (``\\def``, ``\\newcommand``, ``\\renewcommand``,
  ``\\DeclareMathOperator``, ``\\newenvironment``... anywhere in it, even in
  ``\\hbox{$...$}``) is shown as its TeX as typed, never expanded: latex2mathml expands
  them with no bound but a depth of 100, so ``\\def\\a#1{\\a{#1#1}}\\a{x}`` grew
  without end and 414 characters of nested ``\\newcommand`` made 814 KB in 3 s;
- a formula whose MathML is longer than :data:`MATHML_PER_TEX_CHAR` times its TeX (plus
  :data:`MATHML_FLOOR`), or than :data:`MAX_MATHML_CHARS`, is shown as its TeX as typed;
- lengths (``\\rule``, ``\\hspace``, ``\\raise``...: MathML's ``width``, ``height``,
  ``depth``, ``voffset``, ``lspace``...) are kept within :data:`MAX_ACROSS_EM` em across
  and :data:`MAX_UPDOWN_EM` em up or down, text sizes (``\\Huge`` in ``\\Huge``) within
  :data:`MAX_SCALE` times the text's; a value that is no length is dropped
  (``\\rule{1pt}{2000000pt}`` printed 2,664 pages; ``\\raise{728pt}`` drew over the
  page above).

A formula shown as typed says why in its ``title``. No part of a formula is drawn out of
sight or over another: a part moves up or down at most :data:`MAX_SHIFT_EM` em
(``\\raise``, ``\\lower``), and a box is never given less room than its content
(``\\rlap``, ``\\smash``, a negative ``\\kern``: :data:`_SHRUNK`).

What markdown and TeX leave out of what they draw (a reference definition, the
``[//]: # "..."`` comment idiom, a link's or image's title, a fence's info string past its
language, a table's cells past its header's, a formula's label or ``%`` comment, a TeX
link's address, ``\\phantom``) is shown after the answer as typed, with its line numbers
(:func:`_undrawn`): text an AI assistant given the answer would read is in front of the
grader too. Direction marks are kept only in an answer that writes right to left.

Long answers are bounded: :func:`render_answer` shows the first ``limit`` characters
(the page's preview; "show all" asks for the rest), renders at most
:data:`FULL_RENDER_CHARS` characters as markdown, the rest of a huge answer as plain text,
and no more than :data:`MAX_SHOWN_CHARS` characters in all.

Example::

    render_markdown("The exponent is $2i/d$, not $2j/d$.")
"""

from __future__ import annotations

import collections
import functools
import html
import re
import unicodedata
import xml.etree.ElementTree as ElementTree

from lablib.grading.report.text import visible_controls

__all__ = [
    "ATTRIBUTES",
    "CLEAN_CONTENT_TAGS",
    "FULL_RENDER_CHARS",
    "MAX_MATHML_CHARS",
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
#: The attributes kept, per element.
ATTRIBUTES = {
    "ol": {"start"},
    "code": {"title"},
    "pre": {"title"},
    **{tag: set(_MATH_ATTRIBUTES) for tag in MATHML_TAGS},
}
_CLASSES = {"code": {"tex"}, "pre": {"tex", "rest"}, "span": {"image", "link"}, "p": {"cut"}}
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


#: A formula's MathML may be this many characters per character of its TeX, plus
#: :data:`MATHML_FLOOR` (honest formulas: at most 53 for one letter, ``$w$``; the worst
#: of every construct repeated, ``\begin{cases}a&b\\...``, 18 per character).
MATHML_PER_TEX_CHAR = 40
#: What any formula's MathML may take whatever its length (``$x$`` takes 53 characters).
MATHML_FLOOR = 1_000
#: The longest MathML of one formula, whatever its TeX (the notebooks' longest: 1,472).
MAX_MATHML_CHARS = 200_000
#: How far a length may reach across (``width``, ``lspace``, ``rspace``), in em:
#: ``\rule{10cm}{0.4pt}`` fits, a page's width does not.
MAX_ACROSS_EM = 40.0
#: How far a length may reach up or down (``height``, ``depth``), in em.
MAX_UPDOWN_EM = 10.0
#: How far a formula's part may be moved up or down (``\raise``, ``\lower``: ``voffset``,
#: and the room ``mpadded`` adds for it, ``height`` and ``depth``), in em: a superscript's
#: height; farther, it is drawn over the line above or below.
MAX_SHIFT_EM = 1.0
#: The largest a formula's text may be drawn, in times the text around it (``\Huge``: 2.49).
MAX_SCALE = 2.5
#: The smallest (``\tiny`` in ``\tiny``...).
MIN_SCALE = 0.25
#: The commands that define macros: latex2mathml's ``\def``, ``\newcommand``,
#: ``\DeclareMathOperator`` and ``\newenvironment``, and their kin (refused alike, whatever
#: a later latex2mathml makes of them). Looked for anywhere a backslash is followed by
#: one (``\\def``, a line break then "def", too): however latex2mathml's tokenizer pairs
#: backslashes (``\verb\x\\def`` is a verbatim "x", then ``\def``), none is missed.
_DEFINES = re.compile(
    r"\\(def|gdef|edef|xdef|let|futurelet|newcommand|renewcommand|providecommand|"
    r"DeclareMathOperator|DeclareRobustCommand|NewDocumentCommand|newenvironment|"
    r"renewenvironment|csname)(?![A-Za-z])"
)
_LENGTH = re.compile(
    r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(em|ex|mu|pt|px|pc|bp|dd|cc|sp|mm|cm|in|width|height|depth)?"
)
#: A unit's size in em (TeX's, for a 10 pt em: what matters here is its order).
_EM = {
    "em": 1.0,
    "ex": 0.5,
    "mu": 1 / 18,
    "pt": 0.1,
    "bp": 0.1,
    "px": 0.075,
    "pc": 1.2,
    "dd": 0.107,
    "cc": 1.28,
    "sp": 0.1 / 65536,
    "mm": 0.2845,
    "cm": 2.845,
    "in": 7.227,
}
_ACROSS = frozenset({"width", "lspace", "rspace", "columnspacing"})
_UPDOWN = frozenset({"height", "depth", "voffset", "rowspacing", "minsize", "maxsize"})


@functools.lru_cache(maxsize=1)
def _cleaner():
    import nh3

    return nh3.Cleaner(
        tags=set(TAGS),
        attributes={k: set(v) for k, v in ATTRIBUTES.items()},
        allowed_classes={k: set(v) for k, v in _CLASSES.items()},
        clean_content_tags=set(CLEAN_CONTENT_TAGS),
        url_schemes=set(),
        url_relative="deny",
        link_rel=None,
        strip_comments=True,
    )


def sanitise(fragment: str) -> str:
    """``fragment`` with only :data:`TAGS` and :data:`ATTRIBUTES` left (everything else
    removed, its text kept; a script's or style's text removed too)."""
    return _cleaner().clean(fragment)


def _as_typed(tex: str, display: bool, why: str) -> str:
    """``tex`` shown as typed (code, or a block for a display formula), ``why`` its title."""
    tag = "pre" if display else "code"
    return f"<{tag} class='tex' title='{html.escape(why)}'>{html.escape(tex)}</{tag}>"


def _bounded_length(value: str, limit: float) -> str | None:
    """``value`` (a MathML length, or a list of them for a table's spacing) with each
    length within ``limit`` em either way; None where it holds anything but lengths."""
    bounded = []
    for part in value.split():
        match = _LENGTH.fullmatch(part)
        if match is None:
            return None
        sign, number, unit = match.groups()
        if unit is None and float(number) != 0:
            return None  # no unit: not a length (MathML Core reads none but 0)
        if unit in ("width", "height", "depth"):  # mpadded's own: a multiple of its content's
            if float(number) > 1:
                return None
        elif float(number) * _EM.get(unit or "em", 1.0) > limit:
            part = f"{sign}{limit:g}em"
        bounded.append(part)
    return " ".join(bounded) or None


def _bounded_scale(value: str, scale: float) -> tuple[str | None, float]:
    """A ``mathsize`` within :data:`MIN_SCALE`-:data:`MAX_SCALE` times the text's, where
    ``scale`` is what its ancestors already make: ``(value or None, the new scale)``."""
    match = _LENGTH.fullmatch(value.strip())
    if match is None or match.group(3) != "em" or match.group(1) == "-":
        return None, scale  # latex2mathml writes em; anything else is dropped
    wanted = scale * float(match.group(2))
    kept = min(max(wanted, MIN_SCALE), MAX_SCALE)
    return f"{kept / scale:.4g}em", kept


def _shrinks(value: str) -> bool:
    """Whether a length is zero or negative (``0px``, ``-1width``, ``-0.17em``)."""
    match = _LENGTH.fullmatch(value.strip())
    return match is None or match.group(1) == "-" or float(match.group(2)) == 0


#: The sizes that, made zero or negative, draw a box's content over its neighbours or
#: outside its line: ``\rlap``/``\llap`` (a box of no width: "OVER" drawn over "XXXX"),
#: ``\smash`` (no height: ``\smash{\lower{10em}{...}}`` drawn below the card, out of
#: sight), a negative ``\kern``. Dropped, so the content takes its own room.
_SHRUNK = {"mpadded": ("width", "height", "depth", "lspace"), "mspace": ("width",)}


def _bound(element, scale: float = 1.0) -> None:
    """Every length of ``element`` and its descendants within bounds (see the module's
    docstring), every ``scriptlevel`` an absolute 0, 1 or 2 (a relative one compounds);
    no box made to take less room than its content (:data:`_SHRUNK`), none moved up or
    down more than :data:`MAX_SHIFT_EM`."""
    for name in _SHRUNK.get(element.tag, ()):
        if name in element.attrib and _shrinks(element.attrib[name]):
            del element.attrib[name]
    for name in list(element.attrib):
        value = element.attrib[name]
        if name in _ACROSS or name in _UPDOWN or name == "linethickness":
            limit = MAX_ACROSS_EM if name in _ACROSS else MAX_UPDOWN_EM
            if name == "voffset" or (element.tag == "mpadded" and name in ("height", "depth")):
                limit = MAX_SHIFT_EM  # \raise's room goes with its shift
            kept = _bounded_length(value, 1.0 if name == "linethickness" else limit)
        elif name == "mathsize":
            kept, scale = _bounded_scale(value, scale)
        elif name == "scriptlevel":
            kept = value if value.strip() in ("0", "1", "2") else None
        else:
            continue
        if kept is None:
            del element.attrib[name]
        else:
            element.attrib[name] = kept
    for child in element:
        _bound(child, scale)


#: An "&" that ends a row of an array or matrix (before ``\\`` or ``\end{...}``).
_EMPTY_LAST_CELL = re.compile(r"&(?=\s*(?:\\\\|\\end\s*\{))")


def _mathml(tex: str, display: bool) -> str:
    """``tex`` as MathML, serialised with every text escaped and its lengths bounded."""
    from latex2mathml.converter import convert_to_element

    # a row that ends in "&" (its last cell empty) is dropped whole by latex2mathml, with
    # what the row held: the empty cell is written as one ({}), as LaTeX reads it
    tex = _EMPTY_LAST_CELL.sub("&{}", tex)
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
    _bound(element)
    return ElementTree.tostring(element, encoding="unicode")


@functools.lru_cache(maxsize=8192)
def _math(tex: str, display: bool) -> str:
    """One formula as sanitised MathML (cached: answers repeat their formulas), or as its
    TeX as typed: where it defines macros, cannot be read or draws too much."""
    defines = _DEFINES.search(tex)
    if defines:
        return _as_typed(
            tex, display, f"formula shown as typed: it defines macros ({defines.group(0)})"
        )
    try:
        mathml = _mathml(tex, display)
    except Exception:  # noqa: BLE001 - any formula the converter cannot read is shown as typed
        return _as_typed(tex, display, "formula shown as typed")
    cap = min(MAX_MATHML_CHARS, MATHML_FLOOR + MATHML_PER_TEX_CHAR * len(tex))
    if len(mathml) > cap:
        return _as_typed(
            tex,
            display,
            f"formula shown as typed: too large to draw ({len(mathml):,} characters of MathML "
            f"for {len(tex):,} of TeX)",
        )
    return sanitise(mathml)


def _image(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    alt = "".join(child.content for child in (token.children or [])) or token.content
    return (
        f"<span class='image'>[image: {html.escape(alt)} ({html.escape(str(token.attrGet('src') or ''))}), "
        f"not loaded]</span>"
    )


def _link_open(self, tokens, idx, options, env) -> str:
    env.setdefault("links", []).append(tokens[idx])
    return ""


def _link_close(self, tokens, idx, options, env) -> str:
    """After a link's text: its address, as text (an autolink's text is its address)."""
    opened = env["links"].pop()
    if opened.markup == "autolink":
        return ""
    address = str(opened.attrGet("href") or "")
    return f" <span class='link'>[link: {html.escape(address)}]</span>"


#: How deep blocks (lists, quotes) nest before the rest of a nested block is shown as typed:
#: markdown-it drops everything past its own limit (20 levels), the rest of the answer
#: included, without a word.
_DEEPEST = 16


def _too_deep(state, start: int, end: int, silent: bool) -> bool:
    """A block rule tried first: at :data:`_DEEPEST` levels of nesting, the rest of the
    nested block (its lines up to the first one indented less than it, blank lines
    aside: a list item's ``end`` is the answer's end) becomes one ``too_deep`` token,
    shown as typed; shallower, other rules decide."""
    if state.level < _DEEPEST:
        return False
    last = start + 1
    while last < end and (state.isEmpty(last) or state.sCount[last] >= state.blkIndent):
        last += 1
    while last > start + 1 and state.isEmpty(last - 1):  # its trailing blank lines
        last -= 1
    if not silent:
        token = state.push("too_deep", "pre", 0)
        token.content = state.getLines(start, last, state.blkIndent, False)
        token.map = [start, last]
    state.line = last
    return True


def _too_deep_html(self, tokens, idx, options, env) -> str:
    return (
        "<p class='cut'>Nested too deep to draw (lists in lists, or quotes in quotes): "
        f"this part as typed:</p><pre class='rest'>{html.escape(tokens[idx].content)}</pre>"
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
    md.block.ruler.before(md.block.ruler.get_all_rules()[0], "too_deep", _too_deep)
    md.add_render_rule("too_deep", _too_deep_html)
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
    md.add_render_rule(  # a fence's language would be a class the sanitiser empties
        "fence",
        lambda self, tokens, idx, options, env: (
            f"<pre><code>{html.escape(tokens[idx].content)}</code></pre>\n"
        ),
    )
    md.add_render_rule("image", _image)
    md.add_render_rule("link_open", _link_open)  # a link: its text, then its address as text
    md.add_render_rule("link_close", _link_close)
    md.validateLink = lambda url: True  # any address is shown as text, never followed
    return md


#: Lone surrogates: a notebook's JSON can hold ``"\\udce9"``, which Python reads as is
#: and no UTF-8 text can hold (the sanitiser, the page and the PDF would all refuse it).
_SURROGATES = re.compile("[\ud800-\udfff]")


#: Characters the page keeps as written although they show nothing, because honest text
#: holds them: the direction marks of right-to-left writing; and what copying from a web
#: page, a PDF or a formula editor brings along, a zero-width space or word joiner, a soft
#: hyphen, a byte-order mark, the invisible operators of MathML, a line or paragraph
#: separator (shown as "[U+200B]", a formula pasted with one would not be drawn). None of
#: them hides a word from a reader; the direction marks can reorder one, and are kept
#: only where the answer writes right to left (:data:`_MARKS`).
_KEPT_ON_PAGE = "\u200e\u200f\u061c\u200b\u2060\u00ad\ufeff\u2061\u2062\u2063\u2064\u2028\u2029"


def readable(text: str | None) -> str:
    """``text`` with each lone surrogate shown as ``?``, its line breaks (CR LF, CR) as
    line feeds, and, as in the reports
    (:func:`~lablib.grading.report.text.visible_controls`), each control character and
    bidirectional override shown as a symbol, a sentence hidden in tag characters spelled
    out, and each other character that shows nothing by its code point (a lone tag
    character, a run of variation selectors or a joiner that shapes nothing, which can
    carry bytes), but those of :data:`_KEPT_ON_PAGE`: an escape sequence in an answer
    reaches no page, printout file or terminal that shows it, and text that an AI
    assistant given the answer would read is in front of the grader too."""
    text = re.sub("\r\n?", "\n", _SURROGATES.sub("?", text or ""))
    keep = _KEPT_ON_PAGE if _right_to_left(text) else _KEPT_ON_PAGE.translate(_NO_MARKS)
    return visible_controls(text, keep=keep)


#: The direction marks (left-to-right, right-to-left, Arabic letter mark): kept on the
#: page only in an answer that holds right-to-left letters, where they are honest; in
#: one that holds none they only reorder ("Answer \u200f1\u200f - \u200f2\u200f" read
#: "Answer 2 - 1") and are shown by their code points.
_MARKS = "\u200e\u200f\u061c"
_NO_MARKS = str.maketrans("", "", _MARKS)


def _right_to_left(text: str) -> bool:
    """Whether ``text`` holds a letter of a right-to-left script (Hebrew, Arabic, ...)."""
    if text.isascii():
        return False
    return any(c.isalpha() and unicodedata.bidirectional(c) in ("R", "AL") for c in set(text))


def render_markdown(text: str) -> str:
    """``text`` (a notebook's markdown) as sanitised HTML, formulas as MathML."""
    return sanitise(_parser().render(readable(text)))


# ----------------------------------------------------------------- text not drawn

#: The most characters of the lines :func:`_undrawn` shows as typed (each line at most
#: :data:`UNDRAWN_LINE_CHARS`, around its first word not drawn).
MAX_UNDRAWN_CHARS = 4_000
UNDRAWN_LINE_CHARS = 600
#: TeX that names no text: a command's name, an environment's, a colour, a length.
_TEX_NAMES = re.compile(
    r"\\(?:begin|end|color|textcolor|mathcolor|colorbox|fcolorbox|rule|hspace|vspace|"
    r"kern|mkern|hskip|mskip|mspace|raise|lower|raisebox|moveleft|moveright)"
    r"\s*(?:[-+]?(?:\d+\.?\d*|\.\d+)\s*(?:em|ex|mu|pt|px|pc|bp|dd|cc|sp|mm|cm|in)"
    r"|\{[^{}]*\}\s*)*|\\[A-Za-z]+"
)
#: A fence's language (```python): the rest of its info string is text not drawn.
_FENCE = re.compile(r"^( {0,3}(?:`{3,}|~{3,})\s*)[^\s`~]*", re.M)
_WORD = re.compile(r"[^\W\d_]{3,}")
#: Any run of letters: what is compared where no word of three letters is missing.
_SHORT = re.compile(r"[^\W\d_]+")
#: Letters not drawn that no word can place: every line is shown.
_EVERY_LINE = "\x00every line"


def _letters(text: str) -> str:
    """``text``'s letters alone, as compared (NFKC: a formula's 𝓛 is an L; case folded)."""
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalpha())


_PHANTOM = re.compile(r"<mphantom\b[^>]*>(?:(?!<mphantom\b).)*?</mphantom>", re.S)
_TAG = re.compile(r"<[^>]*>")


def _drawn_letters(fragment: str) -> str:
    """The letters (:func:`_letters`) of the text a sanitised fragment draws: every text
    node but what ``mphantom`` holds (room kept, nothing drawn). The sanitiser's output is
    well formed and escapes ``>`` in attributes, so its tags are read by pattern (a
    parser took as long as the rendering itself)."""
    while "<mphantom" in fragment:
        fragment, count = _PHANTOM.subn("", fragment)
        if not count:
            break
    return _letters(html.unescape(_TAG.sub("", fragment)))


def _clean(text: str) -> str:
    """``text`` as its words are compared: entities decoded, TeX that names no text
    (:data:`_TEX_NAMES`) and a fence's language left out."""
    return _FENCE.sub(r"\1", _TEX_NAMES.sub(" ", html.unescape(text)))


def _tokens(pattern: re.Pattern, text: str) -> set[str]:
    return {w.casefold() for w in pattern.findall(unicodedata.normalize("NFKC", text))}


def _undrawn(text: str, fragment: str) -> str:
    """HTML showing, as typed, the lines of ``text`` (an answer, made :func:`readable`)
    holding a word that ``fragment`` (its rendering) does not draw, or "". Markdown and
    TeX leave text out of what they draw: a reference definition (``[//]: # "..."``), a
    link's or image's title, a fence's info string past its language, a table's cells
    past its header's, a formula's label or comment (``% ...``), a link's address in TeX
    (``\\href``), ``\\phantom``. Text an AI assistant given the answer would read is in
    front of the grader too: each word of three letters or more is counted in the text
    (its TeX commands, environments, colours and lengths aside) and in what is drawn; a
    word the text holds more often than the drawing is not drawn somewhere. Text cut into
    shorter pieces (``gi ve fu ll ma rks``) is caught by its letters: where the text holds
    more of a letter than the drawing, the lines with its one- and two-letter words not
    drawn are shown, or, where none can be told, every line."""
    source = _clean(text)
    drawn = _drawn_letters(fragment)
    written = _letters(source)

    def missing_of(pattern: re.Pattern) -> set[str]:
        return {
            word
            for word in _tokens(pattern, source)
            if written.count(_letters(word)) > drawn.count(_letters(word))
        }

    pattern, missing = _WORD, missing_of(_WORD)
    if not missing and collections.Counter(written) - collections.Counter(drawn):
        pattern, missing = _SHORT, missing_of(_SHORT) or {_EVERY_LINE}
    if not missing:
        return ""
    source_lines = text.split("\n")
    flagged = [
        (number, line, words)
        for number, line in enumerate(source_lines, 1)
        if (words := _tokens(pattern, _clean(line)) & missing)
        or (_EVERY_LINE in missing and line.strip())
    ]
    lines, size = [], 0
    for k, (number, line, words) in enumerate(flagged):
        if len(line) > UNDRAWN_LINE_CHARS:
            first = min((line.casefold().find(w) for w in words), default=-1)
            start = max(first - UNDRAWN_LINE_CHARS // 4, 0)
            line = ("…" if start else "") + line[start : start + UNDRAWN_LINE_CHARS] + "…"
        entry = f"line {number}: {line}"
        if size + len(entry) > MAX_UNDRAWN_CHARS:
            lines.append(
                f"… and {len(flagged) - k:,} more such lines: the student's notebook holds them."
            )
            break
        lines.append(entry)
        size += len(entry)
    return (
        "<p class='cut'>Not drawn above (a comment, a link's title, a definition, a hidden "
        "formula part...), as typed:</p>"
        f"<pre class='rest'>{html.escape(chr(10).join(lines))}</pre>"
    )


def _cut(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, ended at a line or word break when
    one is near."""
    head = text[:limit]
    for sep in ("\n\n", "\n", " "):
        at = head.rfind(sep)
        if at > limit * 0.8:
            return head[:at]
    return head


def _rendered(text: str, after: str = "") -> str:
    """``text`` rendered and sanitised once, then what it leaves undrawn (:func:`_undrawn`)
    and ``after`` (lablib's own note on what is cut, escaped), sanitised apart."""
    drawn = sanitise(_parser().render(text))
    return drawn + sanitise(_undrawn(text, drawn) + after)


def render_answer(text: str, limit: int | None = None) -> str:
    """An answer as sanitised HTML: its first ``limit`` characters (None: all of it;
    past :data:`FULL_RENDER_CHARS` the rest is plain text); a lone surrogate shows as
    ``?``; what markdown and TeX leave undrawn is listed after it (:func:`_rendered`)."""
    text = readable(text)
    if limit is not None and len(text) > limit:
        shown = _cut(text, limit)
        return _rendered(
            shown, f"<p class='cut'>… {len(text) - len(shown):,} more characters: “show all”.</p>"
        )
    if len(text) <= FULL_RENDER_CHARS:
        return _rendered(text)
    shown = _cut(text, FULL_RENDER_CHARS)
    rest = text[len(shown) : MAX_SHOWN_CHARS]
    unshown = len(text) - len(shown) - len(rest)
    more = (
        f"<p class='cut'>… and {unshown:,} more characters, not shown here (the answer has {len(text):,}): "
        f"the student's notebook holds them.</p>"
        if unshown
        else ""
    )
    return _rendered(
        shown,
        f"<p class='cut'>The next {len(rest):,} characters, as typed:</p>"
        f"<pre class='rest'>{html.escape(rest)}</pre>" + more,
    )
