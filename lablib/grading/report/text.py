"""What a reader sees of a result, in words: the one place statuses and tests become text.

Students see a public test's message and hint. Of a hidden test they see its name, its
points and a reason that reveals nothing of its inputs or expected values: that it ran
past the time limit, ran out of memory, crashed, that its graded cell is missing, or
that its details are not shown. A failure inside the grader itself is never presented as
the student's mistake. Every writer of this package follows these rules, and so does
``lablib.check`` for public tests. What a submission wrote reaches no file with its
control characters (:func:`visible_controls`): a report shown in a terminal cannot be
rewritten by an escape sequence in a student's message.
"""

from __future__ import annotations

import functools
import html
import re

from lablib.grading.filenames import SHAPING, _shapes, _unshown
from lablib.grading.results import Kind, Status

__all__ = [
    "verdict",
    "student_detail",
    "status_text",
    "explain_status",
    "num",
    "visible_controls",
    "md_text",
    "md_code_block",
    "person_lines",
    "HIDDEN_REASONS",
    "GRADER_ERROR_MESSAGE",
]

HIDDEN_REASONS = {
    Kind.TIMEOUT: "it ran past the time limit",
    Kind.MEMORY: "it ran out of memory",
    Kind.CRASHED: "it crashed",
    Kind.MISSING: "the graded cell is missing",
    Kind.INVALID_NOTEBOOK: "the notebook could not be read",
}
GRADER_ERROR_MESSAGE = (
    "the grader could not judge this test: an error in the grader, not in "
    "your code. Your instructor sees the details and will re-grade it."
)

_STATUS_EXPLAINED = {
    Kind.GRADER_ERROR: "The grader itself failed on some tests (not your doing); your instructor will re-grade them.",
    Kind.INVALID_NOTEBOOK: "The file could not be read as a Jupyter notebook; nothing was graded.",
    Kind.MEMORY: "Some code used more memory than allowed; those tests scored 0.",
    Kind.TIMEOUT: "Some code ran past the time limit; those tests scored 0.",
    Kind.CRASHED: "Some code ended the grader's process (sys.exit, os._exit, a crash); those tests scored 0.",
    Kind.ERROR: "A graded cell raised an error when it ran (the note below quotes it): the code "
    "after the line that failed did not run, so the tests saw only what came before it.",
    Kind.MISSING: "Graded cells were not found: every graded cell must start with its "
    "`# GRADED: <name>` line, exactly as in the lab.",
}


def num(x: float) -> str:
    """A score as people write it: ``4``, ``2.5``."""
    return f"{x:g}"


def person_lines(score) -> list[str]:
    """What a student reads of a person's grade (a graded
    :class:`~lablib.grading.results.PersonScore`), as plain lines: each rubric item
    applied (``+2: comment``), the adjustment, the grader's comment."""
    lines = [
        f"{'+' if points >= 0 else ''}{num(points)}: {comment}" for points, comment in score.items
    ]
    if score.adjustment:
        lines.append(f"{'+' if score.adjustment >= 0 else ''}{num(score.adjustment)}: adjustment")
    if score.comment.strip():
        lines.append(f"Comment: {score.comment}")
    return lines


def status_text(status: Status) -> str:
    """The status in one line (:meth:`~lablib.grading.results.Status.text`): ``ok``, or
    the problems, most serious first, the graded cells that raised, then the missing
    cells (the gradebook's status column)."""
    return status.text()


def explain_status(status: Status) -> str:
    """What a status means for the student, in sentences ("" when ``ok``)."""
    return " ".join(_STATUS_EXPLAINED[kind] for kind in status.kinds)


def verdict(test) -> str:
    """``passed``, ``partial`` or ``failed``."""
    return "passed" if test.passed else ("partial" if test.score > 0 else "failed")


def student_detail(test, *, with_hint: bool = True) -> str:
    """The text a student sees for ``test`` (a :class:`~lablib.grading.results.TestResult`):
    empty when it passed."""
    if test.passed:
        return ""
    if test.kind == Kind.GRADER_ERROR:
        return GRADER_ERROR_MESSAGE
    if test.hidden:
        return f"hidden test: {HIDDEN_REASONS.get(test.kind, 'details are not shown')}"
    text = test.message
    if with_hint and test.hint:
        text += f"\nHint: {test.hint}"
    return text


#: What can start markup that hides or forges content inside a line: code spans, links
#: and images, HTML and autolinks, entities, table cells (and the escape itself).
#: Emphasis is left alone: it can only restyle text, and test names hold underscores.
_INLINE_MARKUP = re.compile(r"([\\`\[\]<>!&|])")


#: Each control character that a file could carry to a terminal or a page (C0 controls
#: but line feed and tab, DEL, C1 controls) -> what shows in its place: the symbol the
#: U+2400 block draws for it (``␛`` for ESC, ``␇`` for BEL, ``␡`` for DEL), ``?`` for a C1
#: control, which has no symbol.
_CONTROL_SYMBOLS = {c: chr(0x2400 + c) for c in range(0x20) if chr(c) not in "\n\t"}
_CONTROL_SYMBOLS[0x7F] = "\u2421"
_CONTROL_SYMBOLS.update(dict.fromkeys(range(0x80, 0xA0), "?"))
#: Unicode's bidirectional embeddings, overrides and isolates: a text holding them is
#: shown reordered (a message could show "8 / 8" where "8 / 3" is written), so they are
#: shown by their code points.
_CONTROL_SYMBOLS.update(
    {c: f"[U+{c:04X}]" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}
)
#: Characters that draw nothing but can hide or reorder what a reader sees: the
#: zero-width space, the left-to-right, right-to-left and Arabic letter marks, the
#: zero-width no-break space (a byte-order mark), the word joiner and invisible
#: operators, the Mongolian vowel separator, and the line and paragraph separators
#: (which break a line in some viewers and not in others). Shown by their code points.
#: The zero-width joiner and non-joiner are left: they shape emoji and Persian words.
_CONTROL_SYMBOLS.update(
    {
        c: f"[U+{c:04X}]"
        for c in (0x061C, 0x180E, 0x200B, 0x200E, 0x200F, 0x2028, 0x2029, 0xFEFF)
        + tuple(range(0x2060, 0x2065))
    }
)
#: Lone surrogates: the bytes of a file name that was not UTF-8 (``os.fsdecode`` keeps
#: them so), which no UTF-8 file can hold: a report naming such a file could not be
#: written at all. Shown as ``?``, as the submissions' names show them.
_CONTROL_SYMBOLS.update(dict.fromkeys(range(0xD800, 0xE000), "?"))


#: A run of Unicode tag characters that spell printable ASCII (U+E0020-U+E007E, each the
#: tag form of the character 0xE0000 below it): text that shows nothing, read by a
#: program that is given it (an AI assistant asked to summarise an answer). Shown spelled
#: out, so a reader sees what it says, not a row of code points.
_TAG_RUN = re.compile("[\U000e0020-\U000e007e]{2,}")


def _spell_tags(match: re.Match) -> str:
    spelled = "".join(chr(ord(c) - 0xE0000) for c in match.group())
    return f'[hidden text in tag characters: "{spelled}"]'


#: :data:`_CONTROL_SYMBOLS` by character.
_SHOWN = {chr(c): shown for c, shown in _CONTROL_SYMBOLS.items()}


def _char_class(chars) -> str:
    """A regular expression's class matching ``chars``, consecutive code points as ranges."""
    points, parts = sorted({ord(c) for c in chars}), []
    for point in points:
        if parts and parts[-1][1] == point - 1:
            parts[-1][1] = point
        else:
            parts.append([point, point])
    ranges = (re.escape(chr(a)) + (f"-{re.escape(chr(b))}" if b > a else "") for a, b in parts)
    return "[" + "".join(ranges) + "]"


@functools.lru_cache(maxsize=8)
def _controls(keep: str) -> re.Pattern:
    """The characters :data:`_CONTROL_SYMBOLS` shows, less ``keep``: a pattern, so that a
    long text is scanned in C and only what it finds is replaced (``str.translate`` with a
    table looks every character up: 0.25 s for a 1 MB answer)."""
    return re.compile(_char_class(c for c in _SHOWN if c not in keep))


def visible_controls(text: str, keep: str = "") -> str:
    """``text`` with every control character shown as a symbol: C0 controls (but line feed
    and tab) as the U+2400 block draws them (``␛`` for ESC, ``␇`` for BEL), DEL as ``␡``,
    C1 controls (U+0080-U+009F, which have no symbol) as ``?``, and the bidirectional
    embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069, which reorder what a
    line shows) as ``[U+202E]``, the characters that draw nothing but hide or reorder
    (zero-width space, the direction marks, the byte-order mark, the line separator) by
    their code points too, and lone surrogates (the bytes of a file name that was not
    UTF-8, which no UTF-8 file can hold) as ``?``; so is, by its code point, every other
    character that draws nothing as the file names' rule judges it (tag characters that
    spell a hidden sentence, a soft hyphen in "pass\\u00aded"), a joiner or variation
    selector only where it shapes nothing (an emoji's and a Persian name's stay); a run of
    two or more tag characters is spelled out (``[hidden text in tag characters: "..."]``).
    ``keep``: characters left as they are (the review page keeps right-to-left direction
    marks and what honest copied text holds: ``render.py``'s ``_KEPT_ON_PAGE``). What a
    submission wrote (an exception's message, what it printed, its notebook's metadata)
    cannot clear a terminal that shows a report, set its
    title or clipboard (escape sequences), ring its bell or overwrite a line (carriage
    return), and a reader still sees that the characters were there. Line feeds and tabs stay; a line break
    written as CR LF is one line feed. Every report writer passes submission text
    through it (:func:`md_text`, :func:`md_code_block`, the HTML feedback, ``results.json``);
    the command line's messages go further (one line, ``?`` for anything unprintable)."""
    text = str(text).replace("\r\n", "\n")
    if not text.isascii():
        text = _TAG_RUN.sub(_spell_tags, text)
        odd = {  # line feed and tab are controls that stay
            c
            for c in set(text) - {"\n", "\t"}
            if ord(c) not in _CONTROL_SYMBOLS and c not in keep and _draws_nothing(c)
        }
        if any(SHAPING.match(c) for c in odd):  # kept where they shape (an emoji, a Persian name)
            text = SHAPING.sub(
                lambda m: m.group() if _shapes(text, m.start()) else f"[U+{ord(m.group()):04X}]",
                text,
            )
        unshaping = [c for c in odd if not SHAPING.match(c)]
        if unshaping:
            text = re.sub(_char_class(unshaping), lambda m: f"[U+{ord(m.group()):04X}]", text)
    return _controls(keep).sub(lambda m: _SHOWN[m.group()], text)


@functools.lru_cache(maxsize=4096)
def _draws_nothing(c: str) -> bool:
    """Whether ``c`` shows nothing where it stands, as the file names' rule judges it
    (:mod:`lablib.grading.filenames`: Unicode's default-ignorable characters, format,
    private-use and unassigned characters, line and paragraph separators): the tag
    characters that spell a hidden sentence, a soft hyphen inside "pass\\u00aded"."""
    return _unshown(c) or bool(SHAPING.match(c))


def html_text(text: str) -> str:
    """``text`` escaped for HTML, its control characters shown as symbols first
    (:func:`visible_controls`): HTML escaping alone leaves an escape sequence that rewrites
    a terminal showing the file."""
    return html.escape(visible_controls(text))


#: Where a renderer that links bare addresses (GitHub's, an LMS's) would start a link:
#: the colon of ``https://``, the dot of ``www.``, the ``@`` of an e-mail address.
_BARE_LINK = re.compile(r":(?=//)|(?:(?<=^www)|(?<=[^\w.]www))\.|(?<=\w)@(?=\w)", re.I)


def md_text(text: str) -> str:
    """Text that came from a submission (its name, a message, a note) as literal markdown,
    on one line, placed after other text (never at a line's start): control characters
    are shown as symbols (:func:`visible_controls`), the characters that can start inline
    markup are backslash-escaped (CommonMark allows it for any ASCII punctuation), so
    nothing becomes a link, an image, HTML, code or a table cell break; so are the colon
    of ``https://``, the dot of ``www.`` and the ``@`` of an e-mail address, which
    renderers that link bare addresses would make a link of (the text reads the same);
    line breaks become spaces, so nothing becomes a heading or a list."""
    text = _INLINE_MARKUP.sub(r"\\\1", " ".join(visible_controls(text).splitlines()))
    return _BARE_LINK.sub(lambda m: "\\" + m.group(0), text)


def md_code_block(text: str, indent: str = "") -> list[str]:
    """The lines of a fenced code block holding ``text``, its control characters shown as
    symbols (:func:`visible_controls`), the rest verbatim: the fence is longer than any
    run of backticks inside, so the text cannot close it (CommonMark)."""
    text = visible_controls(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [indent + fence, *(indent + line for line in text.splitlines()), indent + fence]
