"""Similarity hints: pairs of submissions whose graded code is near-identical.

Hints for the instructor to read, never verdicts: the class summary lists the pairs with
their similarity and the two codes side by side, the shared passages marked. Students
solving a small exercise from the same lecture write alike; what matters is a long
shared passage, including its oddities.

The method is copydetect's (winnowing, Schleimer et al., 2003): each submission's graded
cells are tokenised by Pygments with names, strings and numbers replaced by their kind
(a renamed variable still matches), every run of ``k`` tokens is hashed, and a window of
hashes keeps its smallest; two submissions share the hashes of their shared passages. The
released lab's own code (stubs, comments, signatures) is fingerprinted too and removed
from every submission first, so that the template never counts. A pair's similarity is
the larger of the two shares: how much of one submission is found in the other.

Byte-identical notebooks are grouped apart (a copied file, or the same blank handed in
twice).

Example::

    pairs, groups = similar_pairs({"ann": code_a, "bob": code_b}, template_code)
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os

__all__ = ["Pair", "similar_pairs", "identical_files", "graded_code", "THRESHOLD", "NOISE_TOKENS",
           "GUARANTEE_TOKENS"]

#: Pairs sharing at least this share of one submission's code are listed.
THRESHOLD = 0.6
#: Passages shorter than this many tokens are ignored (copydetect's noise threshold).
NOISE_TOKENS = 20
#: Passages at least this long are always found (copydetect's guarantee threshold).
GUARANTEE_TOKENS = 25
#: At most this many pairs are listed, most similar first.
MAX_PAIRS = 40


@dataclasses.dataclass(frozen=True)
class Pair:
    """Two submissions with much graded code in common.

    Attributes:
        a, b: the submissions' names (``a < b``).
        similarity: the larger share of one's code found in the other, in [0, 1].
        share_a, share_b: the share of ``a``'s (``b``'s) code found in the other.
        tokens: how many tokens they share.
        code_a, code_b: their graded code, as compared.
        marks_a, marks_b: ``(start, end)`` character ranges of the shared passages.
    """

    a: str
    b: str
    similarity: float
    share_a: float
    share_b: float
    tokens: int
    code_a: str = ""
    code_b: str = ""
    marks_a: tuple[tuple[int, int], ...] = ()
    marks_b: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["marks_a"] = [list(m) for m in self.marks_a]
        data["marks_b"] = [list(m) for m in self.marks_b]
        return data


def graded_code(cells: dict) -> str:
    """A submission's graded cells (piece -> source) as one text, in the lab's order."""
    return "\n\n".join(source.rstrip() for source in cells.values()) + "\n"


def _fingerprint(code: str, boilerplate=None):
    from copydetect import CodeFingerprint

    return CodeFingerprint("submission.py", NOISE_TOKENS, GUARANTEE_TOKENS - NOISE_TOKENS + 1,
                           boilerplate=boilerplate, filter=True, fp=io.StringIO(code))


def _normal(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


def similar_pairs(codes: dict, template: str = "", *, threshold: float = THRESHOLD,
                  limit: int = MAX_PAIRS) -> tuple[list[Pair], list[list[str]]]:
    """The near-identical submissions among ``codes`` (name -> graded code); ``template``
    is the released lab's graded code (removed from every submission).

    Returns:
        ``(pairs, groups)``: ``groups`` lists the submissions whose graded code is the
        same text (blank lines and trailing spaces aside), largest first, each sorted;
        ``pairs`` compares one submission of each group (its first name) with every
        other submission, keeps those whose similarity is at least ``threshold``, most
        similar first, at most ``limit``. Code with nothing beyond the template (a blank
        lab) is in neither.
    """
    from copydetect import compare_files

    import numpy as np

    boilerplate = np.unique(np.array(list(_fingerprint(template).hashes), dtype=np.int64)) if template.strip() else []
    by_text: dict[str, list[str]] = {}
    for name in sorted(codes):
        if codes[name] and codes[name].strip():
            by_text.setdefault(_normal(codes[name]), []).append(name)
    prints, groups = {}, []
    for members in by_text.values():
        fp = _fingerprint(codes[members[0]], boilerplate)
        if len(fp.hashes):
            prints[members[0]] = fp
            if len(members) > 1:
                groups.append(members)
    names = sorted(prints)
    hashes = {n: set(prints[n].hashes) for n in names}
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if not hashes[a] & hashes[b]:
                continue
            tokens, (share_a, share_b), (slices_a, slices_b) = compare_files(prints[a], prints[b])
            similarity = max(share_a, share_b)
            if similarity >= threshold:
                pairs.append(Pair(a, b, round(float(similarity), 4), round(float(share_a), 4),
                                  round(float(share_b), 4), int(tokens), codes[a], codes[b],
                                  tuple((int(s), int(e)) for s, e in zip(*slices_a)),
                                  tuple((int(s), int(e)) for s, e in zip(*slices_b))))
    pairs.sort(key=lambda p: (-p.similarity, -p.tokens, p.a, p.b))
    return pairs[:limit], sorted(groups, key=lambda g: (-len(g), g))


def identical_files(paths: dict) -> list[list[str]]:
    """Groups of submissions (name -> notebook path) whose files are byte-identical, each
    sorted, largest group first; files that cannot be read are left out."""
    groups: dict[str, list[str]] = {}
    for name, path in sorted(paths.items()):
        try:
            if os.path.getsize(path) > 64 * 2**20:
                continue
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            continue
        groups.setdefault(digest, []).append(name)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: (-len(g), g))
