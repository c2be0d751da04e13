"""Which characters of a printout no installed font draws.

Headless Chromium prints with the fonts the machine has, found through fontconfig (on
Linux). A character no installed font covers prints as an empty box, and nothing in the
PDF says so: a student's name or answer in Chinese, Japanese or Korean on a machine with
only Latin fonts prints as a row of boxes that the person grading cannot read. Before the
PDFs are made, :func:`font_gaps` asks fontconfig (``fc-list``) which characters its
fonts cover, once per run; each printout's text is then checked against that set, and
``lablib written pdf`` names the students whose PDFs hold such characters and the font to
install.

Example::

    gaps = font_gaps()
    if gaps is not None:
        gaps.missing("Zhang Wei 张伟")  # "张伟" where no installed font has them, else ""
"""

from __future__ import annotations

import bisect
import shutil
import subprocess
import unicodedata

__all__ = ["FontGaps", "font_gaps", "FONT_HINT"]

#: What to install, said where a printout holds characters no font draws.
FONT_HINT = (
    "install a font that covers them (Debian/Ubuntu: apt install fonts-noto-cjk for Chinese, "
    "Japanese and Korean, fonts-noto for most other scripts; elsewhere the Noto fonts) and "
    "make the PDFs again"
)
# Characters that draw nothing of their own: controls, format characters, separators.
_NOTHING_TO_DRAW = {"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me"}


class FontGaps:
    """The code points the installed fonts cover, as sorted ``[start, end]`` ranges."""

    def __init__(self, ranges):
        merged: list[list[int]] = []
        for start, end in sorted(ranges):
            if merged and start <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self._starts = [start for start, _ in merged]
        self._ends = [end for _, end in merged]

    def covers(self, char: str) -> bool:
        """Whether some installed font has a glyph for ``char``."""
        point = ord(char)
        i = bisect.bisect_right(self._starts, point) - 1
        return i >= 0 and point <= self._ends[i]

    def missing(self, text: str, limit: int = 12) -> str:
        """The distinct characters of ``text`` that no installed font draws, in order of
        first appearance, at most ``limit`` of them ("" when every one is drawn).
        Characters that draw nothing themselves (spaces, controls, joiners, combining
        marks) are not counted."""
        seen: list[str] = []
        for char in dict.fromkeys(text):
            if (
                ord(char) > 0x7E
                and unicodedata.category(char) not in _NOTHING_TO_DRAW
                and not self.covers(char)
            ):
                seen.append(char)
                if len(seen) == limit:
                    break
        return "".join(seen)


def parse_charsets(text: str) -> list[tuple[int, int]]:
    """fontconfig's charsets (``fc-list --format '%{charset}\\n'``: hexadecimal code points
    and ranges, ``20-7e a0-17f 192``) as ``(start, end)`` pairs; a word that is neither
    is passed over."""
    ranges = []
    for word in text.split():
        start, _, end = word.partition("-")
        try:
            ranges.append((int(start, 16), int(end or start, 16)))
        except ValueError:
            continue
    return ranges


def font_gaps(timeout: float = 30) -> FontGaps | None:
    """What the installed outline fonts cover, from fontconfig's ``fc-list`` (bitmap fonts
    left out: Chromium does not print with them); None where there is no ``fc-list`` or
    it fails (a machine whose browser does not use fontconfig, such as
    macOS or Windows: nothing can be said there)."""
    tool = shutil.which("fc-list")
    if tool is None:
        return None
    try:
        done = subprocess.run(
            [tool, ":scalable=true", "--format", "%{charset}\n"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return FontGaps(parse_charsets(done.stdout))
