"""File names made from what students hand in: short enough, portable, never look-alikes.

A feedback file (``feedback/<stem>.md``) or a written-answers PDF (``<student>.pdf``) is
named after its student, and a student's name is whatever the submission's file, folder
or LMS metadata says. The rules every such stem follows, whatever else its writer does
to it (:func:`~lablib.grading.gradebook.book.feedback_stems`,
:func:`~lablib.grading.review.printout.class_students`):

* at most :data:`STEM_BYTES` bytes of UTF-8, cut between characters (:func:`cap_bytes`):
  most file systems allow 255 *bytes* per name, and the stem still takes a digest or a
  counter that tells two students apart, the extension, and the affix of
  :func:`~lablib.grading.atomic.atomic_write`'s temporary file
  (``.<name>.<8 random>.lablib-tmp``); 80 CJK characters are 240 bytes;
* no character that shows nothing (:func:`shown`): zero-width spaces, word joiners,
  byte-order marks, soft hyphens, Unicode tag characters, bidirectional controls,
  control characters, lone surrogates (a file name that was not UTF-8), fillers; each
  becomes ``_``, so ``al\\u200bice`` is never a second ``alice``. The characters that
  shape what is shown stay where they shape a character of a script that uses them
  (:data:`SHAPING`): zero-width (non-)joiners in Persian and Indic names and emoji, and
  variation selectors (an emoji's colour form, an ideograph's variant in a Japanese
  name); ``al\\u200dice`` and ``alice\\ufe0f`` get ``_`` too;
* never one file with another stem where a file system ignores case or Unicode's forms
  (:func:`same_file`): ``Alice``, ``alice`` and Turkish ``alıce`` (NTFS upper-cases
  ``ı`` to ``I``) are one name there, so the writers tell such stems apart;
* not a name Windows keeps for a device (:func:`windows_safe`), since instructors copy
  the output folder there: ``CON``, ``PRN``, ``AUX``, ``NUL``, ``COM0``-``COM9``,
  ``LPT0``-``LPT9`` (and the superscript digits), ``CONIN$``, ``CONOUT$``, in any case,
  with or without an extension, get ``_`` in front;
* never a leading ``-`` (:func:`shell_safe`): ``-rf.md`` in a feedback folder is an
  option to ``ls *``, ``wc -c *`` or ``rm *``; the dash becomes ``_``.

A stem already within these rules (``alice``, ``Smith__John``) is kept as it is.

Example::

    portable(cap_bytes(shown(name), STEM_BYTES))
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "STEM_BYTES",
    "SHAPING",
    "cap_bytes",
    "portable",
    "same_file",
    "shell_safe",
    "shown",
    "windows_safe",
]

#: The most UTF-8 bytes of a stem made from a student's name, before its writer adds a
#: digest or counter (``-1d2c3b4a``, ``-2``), the extension (``.html``) and the temporary
#: file's affix (about 21 bytes): 150 leaves room for all of them under 255.
STEM_BYTES = 150

# Unicode's Default_Ignorable_Code_Point (characters a renderer shows as nothing),
# besides the categories that shown() replaces whole.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
# Control, format, surrogate, private-use and unassigned characters; line and
# paragraph separators.
_UNSHOWN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_WINDOWS_DEVICE = re.compile(r"(?:con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³]|conin\$|conout\$)")


#: Invisible characters that change how their neighbours are shown: zero-width non-joiner
#: and joiner (Persian, Indic scripts, emoji sequences) and the variation selectors (emoji
#: presentation, ideographic variants). :func:`shown` keeps one only where it shapes a
#: character of a script that uses it (:func:`_shapes`), so ``al\u200dice`` is not
#: ``alice`` to a reader.
SHAPING = re.compile("[\u200c\u200d\ufe00-\ufe0f\U000e0100-\U000e01ef]")
# From here on, the scripts that shape with joiners and selectors: Hebrew, Arabic, Syriac,
# the Indic scripts, ..., CJK, emoji; not Latin, Greek or Cyrillic, where a joiner or a
# selector changes nothing a reader sees.
_SHAPED_FROM = 0x0590


def _unshown(c: str) -> bool:
    """Whether ``c`` shows nothing (shaping characters aside: see :func:`_shapes`)."""
    return bool(_IGNORABLE.match(c)) or unicodedata.category(c) in _UNSHOWN_CATEGORIES


def _shapes(text: str, i: int) -> bool:
    """Whether the shaping character ``text[i]`` shapes something. Its base is the
    character before it, past other selectors (``🏳️‍🌈``: flag, selector, joiner, rainbow).
    A selector shapes a base of a script that uses it, ``©`` or ``®``, or a keycap (``1️⃣``:
    digit, selector, U+20E3); a joiner joins two such characters. A base or a joined
    character that shows nothing itself shapes nothing. A selector shapes the character
    right before it only, and a joiner looks back past one selector at most: a second
    selector in a row shapes nothing (no writing needs one; a run of them can carry hidden
    bytes, and looking back over a long run for each of its selectors made a submission's
    32,000 of them cost the reports 99 s)."""
    joiner = text[i] in "\u200c\u200d"
    j = i - 1
    while j >= 0 and SHAPING.match(text[j]) and text[j] not in "\u200c\u200d":
        if not joiner or j < i - 1:
            return False
        j -= 1
    base = text[j] if j >= 0 else ""
    if not base or SHAPING.match(base) or _unshown(base):
        return False
    following = text[i + 1] if i + 1 < len(text) else ""
    if joiner:
        return (
            ord(base) >= _SHAPED_FROM
            and following != ""
            and ord(following) >= _SHAPED_FROM
            and not SHAPING.match(following)
            and not _unshown(following)
        )
    return ord(base) >= _SHAPED_FROM or base in "\u00a9\u00ae" or following == "\u20e3"


def shown(text: str, replacement: str = "_") -> str:
    """``text`` with every character that shows nothing replaced by ``replacement``
    (a character of :data:`SHAPING` kept where it shapes its neighbours)."""
    return "".join(
        c if (_shapes(text, i) if SHAPING.match(c) else not _unshown(c)) else replacement
        for i, c in enumerate(text)
    )


def cap_bytes(text: str, limit: int = STEM_BYTES) -> str:
    """The longest start of ``text`` whose UTF-8 takes at most ``limit`` bytes, cut
    between characters (a lone surrogate, a byte of a name that was not UTF-8, counts as
    the one byte it stands for)."""
    used = 0
    for i, c in enumerate(text):
        used += len(
            c.encode("utf-8", "surrogateescape" if "\udc80" <= c <= "\udcff" else "surrogatepass")
        )
        if used > limit:
            return text[:i]
    return text


def windows_safe(stem: str) -> str:
    """``stem`` with ``_`` in front where Windows would take it for a device (``CON``,
    ``nul.txt``, ``Com1 .x``: the part before the first dot, less trailing spaces)."""
    if _WINDOWS_DEVICE.fullmatch(stem.split(".", 1)[0].rstrip(" ").casefold()):
        return "_" + stem
    return stem


def portable(stem: str) -> str:
    """``stem`` made a name every system and shell takes (:func:`windows_safe`,
    :func:`shell_safe`): the last step of every stem made from a student's name."""
    return windows_safe(shell_safe(stem))


def shell_safe(stem: str) -> str:
    """``stem`` with ``_`` for a leading ``-``, which a command given the folder's files
    (``ls *``, ``rm *``) reads as an option."""
    return "_" + stem[1:] if stem.startswith("-") else stem


def same_file(stem: str) -> str:
    """The key under which file systems that ignore case or Unicode's canonical forms
    (macOS, Windows) may take two stems for one file: alike keys, possibly one file.
    Coarser than any of them (it folds case both ways, ``ı`` and ``İ`` with ``i``): two
    stems it keeps apart are two files everywhere. ``COM¹`` stays apart from ``COM1``:
    no file system folds compatibility forms."""
    folded = unicodedata.normalize("NFC", stem).upper().casefold()
    return unicodedata.normalize("NFC", folded.replace("i\u0307", "i"))
