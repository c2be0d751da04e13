"""Similarity hints: pairs of submissions whose graded code is near-identical.

Hints for the instructor to read, never verdicts: the class summary lists the pairs with
their similarity and the two codes side by side, the shared passages marked. Students
solving a small exercise from the same lecture write alike; what matters is a long
shared passage, including its oddities.

How (winnowing, Schleimer, Wilkerson and Aiken, SIGMOD 2003, as MOSS and copydetect do
it, written here so that it is deterministic and reads Python as Python):

1. **Normalise** each submission's graded code with :mod:`ast`: code hidden as
   ``exec(zlib.decompress(base64.b64decode(...)))`` (or ``eval``, ``codecs``, ``bytes.fromhex``,
   string concatenation...) is decoded where that needs no run of the student's code and
   compared in its place; statements with no effect are dropped (docstrings, bare
   expressions, ``pass``, and assignments of a value without calls to a name nothing
   reads, such as ``_ = 0`` after every line); parentheses, spacing and comments vanish
   by unparsing.
2. **Tokenise** the result: names the code binds (variables, parameters, its own
   functions) become ``V``, so renaming hides nothing; names it uses without binding
   (``np``, ``len``, the lab's helpers), attributes and called methods stay as written,
   so ``np.mean`` is not ``np.sum``; an imported module counts as its full name
   (``import numpy as N`` is ``numpy``, like the labs' ``np``); strings are ``S``,
   numbers ``N``.
3. **Fingerprint**: every run of :data:`NOISE_TOKENS` tokens is hashed with BLAKE2b (never
   Python's ``hash()``, which ``PYTHONHASHSEED`` randomises: the same gradebook gave other
   pairs from one run to the next), and each window of
   ``GUARANTEE_TOKENS - NOISE_TOKENS + 1`` hashes keeps its smallest: a shared passage of
   :data:`GUARANTEE_TOKENS` tokens or more is always found.
4. **Remove what everyone has**: the released lab's own code (its stubs, signatures,
   comments), and passages found in the code of more than half of the students once
   there are :data:`COMMON_MIN` of them (the common way to write a line, like MOSS's
   ``-m``); a student counts once, however many rows (notebooks) they handed in.
5. **Compare**: a submission's share is the part of its fingerprinted code found in the
   other's; a pair's similarity is the *smaller* share, so a partial submission contained
   in a complete one is not 100%. Pairs at :data:`THRESHOLD` or more are listed, most
   similar first, at most :data:`MAX_PAIRS` (the summary says how many were found).

Byte-identical notebooks, and graded code that is the same text, are grouped apart. A
graded cell that runs code built at run time (``exec``, ``eval``, ``compile``,
``__import__``, ``marshal.loads``...) is flagged in any case (:func:`dynamic_code`), also
through a name given to it (``e = exec``, ``f = getattr(builtins, "exec")``: :func:`_aliases`),
and decoded as through its own name: a lab needs none of them; :func:`dynamic_code` reads
the comparison's own analysis of the cells (kept, not made again) and says what its
decoding did. Decoding reads hostile code in the grader's own process, so each
submission has one budget for it: at most :data:`MAX_DYNAMIC_CALLS` calls decoded,
:data:`MAX_SUBMISSION_STEPS` steps, :data:`MAX_BUILT` characters of values built (a name's
value is built once and reused) and :data:`MAX_DECODED` characters of decoded code. Past
any of them decoding stops for that submission: its code is compared as written, and
:func:`dynamic_code` says of each call left that it was not decoded, and why. Marking the
shared passages is bounded too (:data:`MAX_ALIGN_WORK`), and so is dropping dead stores
(one pass per block).

Example::

    pairs, groups = similar_pairs({"ann": code_a, "bob": code_b}, template_code)
"""

from __future__ import annotations

import ast
import base64
import binascii
import bisect
import bz2
import codecs
import collections
import copy
import dataclasses
import difflib
import hashlib
import io
import keyword
import lzma
import re
import sys
import threading
import tokenize
import types
import typing
import unicodedata
import zlib

from lablib.grading.notebook import InvalidNotebook, read_notebook_bytes

__all__ = [
    "Pair",
    "similar_pairs",
    "similarity_hints",
    "dynamic_code",
    "identical_files",
    "graded_code",
    "THRESHOLD",
    "NOISE_TOKENS",
    "GUARANTEE_TOKENS",
    "MAX_PAIRS",
    "COMMON_MIN",
    "COMMON_SHARE",
]

#: Pairs whose smaller share is at least this are listed.
THRESHOLD = 0.6
#: Passages shorter than this many tokens are ignored (the k of the k-grams).
NOISE_TOKENS = 12
#: Passages at least this many tokens long are always found.
GUARANTEE_TOKENS = 16
#: At most this many pairs are listed, most similar first.
MAX_PAIRS = 40
#: A passage found in more than this share of the students is common, not copied...
COMMON_SHARE = 0.5
#: ...once there are at least this many students (each counted once, whatever their rows).
COMMON_MIN = 10
#: Graded code longer than this (characters) is compared by its beginning only, and
#: :func:`dynamic_code` says so (a lab's graded cells hold a few thousand).
MAX_CODE = 500_000
#: At most this much decoded text per submission (decompression bombs stay small).
MAX_DECODED = 1_000_000
#: Names a course's set-up cells give modules, counted as the modules' names.
KNOWN_ALIASES = {
    "np": "numpy",
    "tf": "tensorflow",
    "pd": "pandas",
    "plt": "matplotlib.pyplot",
    "nx": "networkx",
    "sp": "scipy",
    "tfm": "tensorflow_models",
}
#: Calls that run (or import) code given as data.
DYNAMIC = {
    "exec",
    "eval",
    "compile",
    "__import__",
    "builtins.exec",
    "builtins.eval",
    "builtins.compile",
    "builtins.__import__",
    "importlib.import_module",
    "marshal.loads",
    "pickle.loads",
    "dill.loads",
    "cloudpickle.loads",
    "types.FunctionType",
    "types.CodeType",
    "runpy.run_path",
    "runpy.run_module",
    "runpy._run_code",
    "code.InteractiveInterpreter",
    "code.interact",
}
_DYNAMIC_WORDS = {"exec", "eval", "compile", "__import__", "import_module"}
# Names a cell that does not parse must hold to be said not inspected: a call that runs
# code, by its bare name (``exec(``, not ``model.compile(``) or its whole dotted name
# (``pickle.loads``), and the ways to reach one by name. Such a cell cannot run as
# Python; it is said only where the notebook's own rewriting of lines could make it run one.
_MAY_RUN_CODE = re.compile(
    r"(?<![\w.])(?:"
    + "|".join(
        sorted(
            {re.escape(name) for name in DYNAMIC}
            | {"getattr", "globals", "locals", "vars", "builtins", "__builtins__", "importlib"}
            | {"import_module", "__dict__"}
        )
    )
    + r")\b"
)


def _may_run_code(text: str) -> bool:
    """Whether ``text`` (a cell that does not parse) names a way to run code given as
    data; identifiers compared as Python reads them (NFKC: ``ｅｘｅｃ`` is ``exec``)."""
    return _MAY_RUN_CODE.search(unicodedata.normalize("NFKC", text)) is not None


_RUNS_SOURCE = {"exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile"}


@dataclasses.dataclass(frozen=True)
class Pair:
    """Two submissions with much graded code in common.

    Attributes:
        a, b: the submissions' names (``a < b``).
        similarity: the smaller of the two shares, in [0, 1].
        share_a, share_b: the share of ``a``'s (``b``'s) code found in the other.
        tokens: how many tokens they share (the smaller count of the two sides).
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


# --------------------------------------------------------------------------- decoding


class _NotStatic(Exception):
    """A value that cannot be known without running the student's code."""


def _dotteds(node, aliases, limit: int | None = None) -> tuple[str, ...]:
    """Every dotted name ``node`` may stand for, the name's own meaning first
    (``base64.b64decode`` for ``b.b64decode`` after ``import base64 as b``; with ``e = exec``
    anywhere, ``e`` is both ``e`` and ``exec``: :func:`_aliases`); () for anything but a name
    or a chain of attributes, or a chain of more than ``limit`` attributes."""
    parts = []
    while isinstance(node, ast.Attribute):
        if limit is not None and len(parts) >= limit:
            return ()
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ()
    suffix = "".join("." + part for part in reversed(parts))
    return _extended(aliases.get(node.id, (node.id,)), suffix, len(parts))


def _extended(meanings, suffix: str, steps: int) -> tuple[str, ...]:
    """``meanings`` (the own meaning first) each followed by ``suffix`` (``steps``
    attributes): the own meaning always, the others only where the result may be a
    followed name (no more than :data:`_STEPS` dots; :data:`_ANY` gives what it may be,
    :data:`_TAILS`), so a long chain costs its length once."""
    if not steps:
        return tuple(meanings)
    meanings = iter(meanings)
    out = [next(meanings) + suffix]
    for meaning in meanings if steps <= _STEPS else ():
        if meaning == _ANY:
            out += _TAILS.get(suffix, ())
        elif meaning.count(".") + steps <= _STEPS:
            out.append(meaning + suffix)
    return tuple(out)


def _rank(name: str) -> int:
    """Which of a name's meanings a call of it is read as, lowest first: a way to run code
    whose code can be decoded, any other way to run code, ``getattr`` or ``vars``, a
    decoder, a module holding them; anything else last."""
    if name in _RUNS_SOURCE:
        return 0
    if name in _RUNS:
        return 1
    if name in _REACH:
        return 2
    if name in _DECODERS:
        return 3
    return 4 if name in _FOLLOWED else 5


def _dotted(node, aliases) -> str | None:
    """The one of :func:`_dotteds` a call of ``node`` is read as (:func:`_rank`: with
    ``e = chr`` and ``e = exec``, ``e(s)`` is exec's call); None for anything but a name or
    a chain of attributes."""
    return min(_dotteds(node, aliases), key=_rank, default=None)


def _decoder(node, aliases) -> str | None:
    """The decoder ``node`` names where it can stand for no other followed name: a name
    given ``chr`` here and ``exec`` there has no known value."""
    followed = {name for name in _dotteds(node, aliases) if name in _FOLLOWED or name == _ANY}
    name = followed.pop() if len(followed) == 1 else None
    return name if name in _DECODERS else None


def _zlib(data, wbits=zlib.MAX_WBITS):
    d = zlib.decompressobj(wbits)
    out = d.decompress(data, MAX_DECODED + 1)
    if len(out) > MAX_DECODED or d.unconsumed_tail:
        raise _NotStatic("decoded text too large")
    return out


def _bounded(factory):
    def run(data):
        out = factory().decompress(data, max_length=MAX_DECODED + 1)
        if len(out) > MAX_DECODED:
            raise _NotStatic("decoded text too large")
        return out

    return run


_TEXT_CODECS = {
    "rot13",
    "rot_13",
    "base64",
    "base_64",
    "hex",
    "hex_codec",
    "zlib",
    "zip",
    "zlib_codec",
    "bz2",
    "utf-8",
    "utf8",
    "ascii",
    "latin-1",
    "latin1",
    "utf-16",
    "unicode_escape",
    "raw_unicode_escape",
}


def _codecs_decode(data, encoding="utf-8", errors="strict"):
    name = str(encoding).lower()
    if name not in _TEXT_CODECS:
        raise _NotStatic(f"codec {encoding}")
    if name in ("zlib", "zip", "zlib_codec"):
        return _zlib(data)
    if name == "bz2":
        return _bounded(bz2.BZ2Decompressor)(data)
    return codecs.decode(data, name, errors)


#: Functions that decode data without running anything, by their dotted name.
_DECODERS = {
    "base64.b64decode": base64.b64decode,
    "base64.standard_b64decode": base64.standard_b64decode,
    "base64.urlsafe_b64decode": base64.urlsafe_b64decode,
    "base64.b32decode": base64.b32decode,
    "base64.b16decode": base64.b16decode,
    "base64.b85decode": base64.b85decode,
    "base64.a85decode": base64.a85decode,
    "base64.decodebytes": base64.decodebytes,
    "binascii.a2b_base64": binascii.a2b_base64,
    "binascii.unhexlify": binascii.unhexlify,
    "binascii.a2b_hex": binascii.a2b_hex,
    "zlib.decompress": _zlib,
    "gzip.decompress": lambda data: _zlib(data, 31),
    "bz2.decompress": _bounded(bz2.BZ2Decompressor),
    "lzma.decompress": _bounded(lzma.LZMADecompressor),
    "codecs.decode": _codecs_decode,
    "bytes.fromhex": bytes.fromhex,
    "bytearray.fromhex": bytes.fromhex,
    "chr": chr,
    "str": lambda *a: str(*a) if len(a) != 1 or isinstance(a[0], (str, int, float)) else _no(),
    "bytes": lambda *a: bytes(*a) if a and isinstance(a[0], (bytes, list, tuple, str)) else _no(),
}


def _no():
    raise _NotStatic("not a plain value")


#: Most steps one decoding may take (a chain of names each doubling the last is cut short).
MAX_FOLD_STEPS = 100_000
#: Per submission (all its graded cells, and the code decoded from them), at most this many
#: calls that run code given as data are decoded...
MAX_DYNAMIC_CALLS = 50
#: ...in at most this many steps in all...
MAX_SUBMISSION_STEPS = 2 * MAX_FOLD_STEPS
#: ...building at most this many characters of values in all (every concatenation, slice,
#: join and decoder's result counts; a name's value is built once and reused). Beyond any
#: of these, or :data:`MAX_DECODED` characters of decoded code, decoding stops for the
#: submission and :func:`dynamic_code` says so.
MAX_BUILT = 4 * MAX_DECODED


class _Exhausted(_NotStatic):
    """A submission's decoding budget is spent: nothing more of it is decoded."""


class _Budget:
    """What the decoding of one submission may still spend, shared by all its dynamic
    calls (the code decoded from them included). Once a limit is passed, ``stopped`` is
    the sentence saying which, and nothing more of the submission is decoded."""

    def __init__(self):
        self.calls = MAX_DYNAMIC_CALLS
        self.steps = MAX_SUBMISSION_STEPS
        self.built = MAX_BUILT
        self.decoded = MAX_DECODED
        self.stopped: str | None = None

    def stop(self, reason: str) -> str:
        if self.stopped is None:
            self.stopped = f"not decoded: {reason}; decoding stopped for this submission"
        return self.stopped

    def step(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise _Exhausted(
                self.stop(
                    f"too large to decode (more than the {MAX_SUBMISSION_STEPS:,} steps "
                    "decoding may take per submission)"
                )
            )

    def build(self, size: int) -> None:
        """Count ``size`` characters built; raises :class:`_Exhausted` past the budget."""
        if size > self.built:
            raise _Exhausted(
                self.stop(
                    f"too large to decode (the values built to decode it pass the "
                    f"{MAX_BUILT:,} characters decoding may build per submission)"
                )
            )
        self.built -= size


def _fold(node, aliases, constants, depth=0, state=None):
    """The value of ``node`` when it is built from literals by decoding functions only
    (never running the student's code); raises :class:`_NotStatic` otherwise. Bounded in
    depth, steps (``state``: ``steps`` counts one decoding's, ``names`` holds the names
    already folded, reused by every decoding of the same code, and ``budget`` is the
    submission's :class:`_Budget`, whose steps and built characters it spends) and size
    (:data:`MAX_DECODED` per value): the code is hostile."""
    if state is None:
        state = {"steps": 0, "names": {}, "budget": _Budget()}
    state["steps"] += 1
    state["budget"].step()
    if depth > 40 or state["steps"] > MAX_FOLD_STEPS:
        raise _NotStatic("too deep or too long")
    value = _fold_node(node, aliases, constants, depth, state)
    if isinstance(value, (str, bytes)) and not isinstance(node, (ast.Constant, ast.Name)):
        state["budget"].build(len(value))  # text built here (a constant or a name's is not)
    return value


def _fold_node(node, aliases, constants, depth, state):
    """:func:`_fold`'s one step: the value of ``node`` from the values of its parts."""
    fold = lambda n: _fold(n, aliases, constants, depth + 1, state)  # noqa: E731
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes, int)):
        return node.value
    if isinstance(node, ast.Name) and node.id in constants:
        names = state["names"]
        if node.id not in names:
            names[node.id] = None  # a name defined through itself is not static
            try:
                names[node.id] = ("value", fold(constants[node.id]))
            except BaseException:
                del names[node.id]  # only values are kept: a failure depends on where it was
                raise
        if names[node.id] is None:
            raise _NotStatic("circular")
        return names[node.id][1]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [fold(e) for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = fold(node.left), fold(node.right)
        if type(left) is not type(right) or not isinstance(left, (str, bytes)):
            raise _NotStatic("not text")
        if len(left) + len(right) > MAX_DECODED:
            raise _NotStatic("too large")
        return left + right
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        value = fold(node.value)
        parts = [
            None if p is None else fold(p)
            for p in (node.slice.lower, node.slice.upper, node.slice.step)
        ]
        if not isinstance(value, (str, bytes)) or any(
            p is not None and not isinstance(p, int) for p in parts
        ):
            raise _NotStatic("not a slice of text")
        return value[slice(*parts)]
    if isinstance(node, ast.Call) and not any(isinstance(a, ast.Starred) for a in node.args):
        kwargs = {k.arg: fold(k.value) for k in node.keywords if k.arg}
        if len(kwargs) != len(node.keywords):
            raise _NotStatic("**kwargs")
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("decode", "encode", "join"):
            target = fold(func.value)
            args = [fold(a) for a in node.args]
            if func.attr == "join" and isinstance(target, (str, bytes)) and len(args) == 1:
                parts = args[0] if isinstance(args[0], list) else _no()
                if (
                    sum(len(x) if isinstance(x, (str, bytes)) else 0 for x in parts)
                    + len(target) * len(parts)
                    > MAX_DECODED
                ):
                    raise _NotStatic("too large")
                return target.join(parts)
            if func.attr == "decode" and isinstance(target, bytes):
                return (
                    _codecs_decode(target, *args, **kwargs) if args or kwargs else target.decode()
                )
            if func.attr == "encode" and isinstance(target, str):
                return target.encode(*[str(a) for a in args])
            raise _NotStatic("method")
        name = _decoder(func, aliases)
        if name is not None:
            try:
                return _DECODERS[name](*[fold(a) for a in node.args], **kwargs)
            except _NotStatic:
                raise
            except Exception as exc:  # noqa: BLE001 - bad data is simply not decodable
                raise _NotStatic(str(exc)) from None
    raise _NotStatic(type(node).__name__)


def _source_of(value) -> str | None:
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def _imported(node) -> list[tuple[str, str]]:
    """``(local name, the module or module attribute it binds)`` for each name an import
    statement binds; [] for any other node."""
    if isinstance(node, ast.Import):
        return [(a.asname, a.name) if a.asname else (a.name.split(".")[0],) * 2 for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [
            (a.asname or a.name, f"{node.module}.{a.name}") for a in node.names if a.name != "*"
        ]
    return []


def _imports(tree) -> dict[str, str]:
    """Local name -> the module (or module attribute) an import binds to it."""
    return {name: target for node in ast.walk(tree) for name, target in _imported(node)}


_GETATTR = {"getattr", "builtins.getattr"}
_VARS = {"vars", "builtins.vars"}
#: ``getattr`` and ``vars``: they reach a module's attributes by name.
_REACH = _GETATTR | _VARS
#: Names an alias is followed to: the ways to run code, the decoders, the modules holding
#: them (``b = builtins``), and ``getattr`` and ``vars``, which reach them by name.
_FOLLOWED = (
    DYNAMIC
    | set(_DECODERS)
    | {name.rsplit(".", 1)[0] for name in DYNAMIC | set(_DECODERS) if "." in name}
    | _REACH
)
#: The most attributes (or constant keys) below a name that can still make a followed name
#: (``builtins.exec``: 1). Past it only a name's own meaning is extended (:func:`_extended`).
_STEPS = max(name.count(".") for name in _FOLLOWED)
#: A name given more than this many followed names (besides its own meaning) stands for any
#: of them (:data:`_ANY`): what :func:`_aliases` keeps per name, and the times a name's
#: meanings grow, stay bounded whatever the code.
MAX_MEANINGS = 8
#: The meaning that stands for every followed name: a call of it is flagged as one that
#: runs code, not decoded (its words are the sentence's).
_ANY = (
    f"any of them: a name given more than {MAX_MEANINGS} ways to run code, decoders or "
    "their modules"
)


def _tails() -> dict[str, tuple[str, ...]]:
    """:data:`_TAILS`, from :data:`_FOLLOWED`."""
    tails: dict[str, tuple[str, ...]] = {}
    for name in sorted(_FOLLOWED):
        for cut in [i for i, c in enumerate(name) if c == "."]:
            if name[:cut] in _FOLLOWED:
                tails[name[cut:]] = (*tails.get(name[cut:], ()), name)
    return tails


#: ``.exec`` -> ``("builtins.exec",)``: what a followed name and then these attributes may
#: be (what :data:`_ANY` extended by them stands for).
_TAILS = _tails()
#: Meanings that change the way :func:`_callees` reads a value (``g(b, "exec")`` is
#: ``getattr``'s only where ``g`` may be it), not only what it gives: a name that gains one
#: has every value hanging on it read again whole.
_CHECKED = _REACH | {"builtins", _ANY}
#: How deep below a value's top :func:`_callees` may read a name, and more: a binding hangs
#: on every name this near (:func:`_near`).
_NEAR = 2 * _STEPS + 3
#: The ways :func:`_Decoder` counts as running code: :data:`DYNAMIC` and :data:`_ANY`.
_RUNS = DYNAMIC | {_ANY}


def _means(node, aliases, wanted) -> bool:
    """Whether ``node`` (a name, or at most :data:`_STEPS` attributes of one) may stand for
    one of ``wanted`` (followed names), as :func:`_dotteds` reads it: a look-up per name
    wanted, whatever the name's meanings."""
    suffix = ""
    for _ in range(_STEPS):
        if isinstance(node, ast.Attribute):
            suffix, node = "." + node.attr + suffix, node.value
    if not isinstance(node, ast.Name):
        return False
    meanings = aliases.get(node.id, (node.id,))
    if _ANY in meanings and (not suffix or not wanted.isdisjoint(_TAILS.get(suffix, ()))):
        return True
    return any(w.endswith(suffix) and w[: len(w) - len(suffix)] in meanings for w in wanted)


def _callees(node, aliases, steps: int | None = None, roots=None) -> tuple[str, ...]:
    """What ``node`` may stand for, as :func:`_dotteds` reads it, and also
    ``getattr(builtins, "exec")``, ``__builtins__["exec"]``, ``vars(builtins)["exec"]`` and
    ``builtins.__dict__["exec"]`` (``builtins.exec``) when the attribute's name is written
    as a constant; only what may be a followed name (at most :data:`_STEPS` attributes or
    keys below a name, so this reads a few nodes of ``node``, however large), () for
    anything else. Which way it is read (is ``g`` in ``g(b, "exec")`` ``getattr``?) follows
    ``aliases``; the names it extends take their meanings from ``roots`` (``aliases``
    unless given: :func:`_aliases` gives a name's meanings just found)."""
    steps = _STEPS if steps is None else steps
    roots = aliases if roots is None else roots
    names = _dotteds(node, roots, steps)
    if names or steps <= 0:
        return names
    if (
        isinstance(node, ast.Call)
        and len(node.args) in (2, 3)
        and not node.keywords
        and _means(node.func, aliases, _GETATTR)
    ):
        owner, key = node.args[0], node.args[1]
    elif isinstance(node, ast.Subscript):
        owner, key = node.value, node.slice
        if (
            isinstance(owner, ast.Call)
            and len(owner.args) == 1
            and not owner.keywords
            and _means(owner.func, aliases, _VARS)
        ):
            owner = owner.args[0]  # vars(builtins)["exec"]
        elif isinstance(owner, ast.Attribute) and owner.attr == "__dict__":
            owner = owner.value  # builtins.__dict__["exec"]
        elif not _means(owner, aliases, {"builtins"}):  # __builtins__["exec"]; a dict is not
            return ()
    else:
        return ()
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
        return ()
    bases = _callees(owner, aliases, steps - 1, roots)
    return _extended(bases, "." + key.value, 1) if bases else ()


def _callee(node, aliases) -> str | None:
    """The one of :func:`_callees` a call of ``node`` is read as (:func:`_rank`)."""
    return min(_callees(node, aliases), key=_rank, default=None)


def _near(node) -> set[str]:
    """The names :func:`_callees` may read to tell what ``node`` stands for, and more: every
    name within :data:`_NEAR` attributes, subscripts, calls or first arguments of its top."""
    names, todo = set(), [(node, 0)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif depth < _NEAR and isinstance(node, (ast.Attribute, ast.Subscript)):
            todo.append((node.value, depth + 1))
        elif depth < _NEAR and isinstance(node, ast.Call):
            todo += [(child, depth + 1) for child in (node.func, *node.args[:1])]
    return names


def _given(node) -> list:
    """The ``(target, value)`` pairs a binding statement or signature gives: plain, annotated
    and ``:=`` assignments, loops over a literal (``for run in (exec,)``) and parameters'
    defaults (``def f(run=exec)``); [] for any other node."""
    if isinstance(node, ast.Assign):
        return [(target, node.value) for target in node.targets]
    if isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
        return [(node.target, node.value)]
    if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and isinstance(
        node.iter, (ast.Tuple, ast.List, ast.Set)
    ):
        return [(node.target, element) for element in node.iter.elts]
    if isinstance(node, ast.arguments):
        positional = node.posonlyargs + node.args
        pairs = list(zip(positional[len(positional) - len(node.defaults) :], node.defaults))
        return pairs + [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d]
    return []


def _branches(value) -> list[ast.AST]:
    """What ``value`` may be: either branch of ``x if c else exec``, any part of
    ``x or exec``; only names, attributes, calls and subscripts."""
    out, todo = [], [value]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.IfExp):
            todo += [node.orelse, node.body]
        elif isinstance(node, ast.BoolOp):
            todo += reversed(node.values)
        elif isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
            out.append(node)
    return out


def _bindings(node) -> list[tuple[list[str], list[ast.AST]]]:
    """``(names, values)`` for a binding statement or signature: names it gives one value to
    (:func:`_given`), and what that value may be (:func:`_branches`). Each value comes once
    with all its names: ``a = b = exec`` gives one value to two names; ``x, run = 0, exec``
    pairs the parts."""
    todo = _given(node)[::-1]
    if not todo:
        return []
    named: dict[int, tuple[ast.AST, list[str]]] = {}
    while todo:
        target, value = todo.pop()
        if (
            isinstance(target, (ast.Tuple, ast.List))
            and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)
        ):
            todo += list(zip(target.elts, value.elts))[::-1]
        elif isinstance(target, (ast.Name, ast.arg)):
            name = target.id if isinstance(target, ast.Name) else target.arg
            named.setdefault(id(value), (value, []))[1].append(name)
    out = [(names, _branches(value)) for value, names in named.values()]
    return [(names, values) for names, values in out if values]


class _Gained:
    """``aliases`` where ``name`` stands for ``gained`` only: what :func:`_aliases` extends
    when a name has just gained meanings (what it had before was extended already)."""

    def __init__(self, aliases, name: str, gained: list[str]):
        self.aliases, self.name, self.gained = aliases, name, gained

    def get(self, key, default=None):
        return self.gained if key == self.name else self.aliases.get(key, default)


class _Meanings:
    """What each name may stand for while :func:`_aliases` reads the bindings: ``table``
    (name -> its own meaning, then each followed name given to it, in the order found; a
    dict, so asking whether a name may be ``getattr`` is one look-up) and ``gained`` (name
    -> the meanings it gained since they were last passed on)."""

    def __init__(self, inherited):
        self.table: dict[str, dict[str, None]] = {}
        self.gained: dict[str, list[str]] = {}
        for name, meanings in {"__builtins__": ("builtins",), **(inherited or {})}.items():
            self.table[name] = dict.fromkeys(meanings)

    def imported(self, name: str, target: str) -> None:
        """An import binds ``target`` to ``name``: its own meaning from now on (the last
        import's, as :func:`_imports`), the earlier meanings kept where they are followed."""
        before = [m for m in self.table.get(name, ()) if m in _FOLLOWED or m == _ANY]
        self.table[name] = {target: None}
        self.add(name, before)

    def give(self, names: list[str], given: set[str], values) -> None:
        """``values`` (what a value may stand for) given to ``names``; ``given`` is what this
        binding gave them before, so each meaning passes each binding once."""
        new = [v for v in dict.fromkeys(values) if (v in _FOLLOWED or v == _ANY) and v not in given]
        if new:
            given.update(new)
            for name in names:
                self.add(name, new)

    def add(self, name: str, values) -> None:
        """``values`` (followed names) given to ``name``: those it did not have are gained
        (:data:`_ANY` alone past :data:`MAX_MEANINGS`)."""
        meanings = self.table.get(name) or {name: None}
        if _ANY in meanings:
            return  # it stands for all of them already
        gained = [v for v in values if v not in meanings]
        if not gained:
            return
        self.table[name] = meanings
        if _ANY in gained or len(meanings) - 1 + len(gained) > MAX_MEANINGS:
            own = next(iter(meanings))
            meanings.clear()
            meanings.update({own: None, _ANY: None})
            gained = [_ANY]
        else:
            meanings.update(dict.fromkeys(gained))
        self.gained.setdefault(name, []).extend(gained)

    def result(self) -> dict[str, tuple[str, ...]]:
        """Name -> its own meaning, then the others sorted (names that stand for
        themselves alone left out)."""
        out = {}
        for name, meanings in self.table.items():
            own, *rest = meanings
            if rest or own != name:
                out[name] = (own, *sorted(rest))
        return out


def _aliases(trees, inherited=None) -> dict[str, tuple[str, ...]]:
    """Local name -> every dotted name it may stand for, its own meaning first, for the
    decoding of ``trees``: what ``inherited`` says (the code that decoded them), their
    imports (:func:`_imports`), ``__builtins__`` as ``builtins``, and each way to run code,
    decoder or their module (:data:`_FOLLOWED`) the code binds the name to (``e = exec``,
    ``f = getattr(builtins, "exec")``, ``d = base64.b64decode``, ``for e in (exec,)``,
    ``def f(e=exec)``), or to an alias of one (``g = e``), in any order. Any binding anywhere
    counts, whatever else the name holds elsewhere (``e = chr`` here, ``e = exec`` there:
    ``e`` is both, and ``e(s)`` is exec's call): a way to run code stays flagged. A name
    given more than :data:`MAX_MEANINGS` of them stands for any (:data:`_ANY`).

    Linear in the code's size: each binding's value is read once whole (its names near the
    top, :func:`_near`); after that it is read again, a few nodes of it (:func:`_callees`),
    only when a name near its top gains meanings, with those meanings alone (each name
    gains meanings at most :data:`MAX_MEANINGS` + 1 times), or whole when the gain changes
    the way it reads (:data:`_CHECKED`, a few times)."""
    meanings = _Meanings(inherited)
    bindings: list[tuple[list[str], set[str], list[ast.AST]]] = []
    hanging: dict[str, list[tuple[int, ast.AST]]] = {}  # name -> the values near it
    for node in (node for tree in trees for node in ast.walk(tree)):
        for name, target in _imported(node):
            meanings.imported(name, target)
        for names, values in _bindings(node):
            bindings.append((names, set(), values))
            for value in values:
                for name in _near(value):
                    hanging.setdefault(name, []).append((len(bindings) - 1, value))
    for names, given, values in bindings:
        for value in values:
            meanings.give(names, given, _callees(value, meanings.table))
    while meanings.gained:
        gained, meanings.gained = meanings.gained, {}
        for name, new in gained.items():
            roots = None if _CHECKED.intersection(new) else _Gained(meanings.table, name, new)
            for i, value in hanging.get(name, ()):
                names, given, _ = bindings[i]
                meanings.give(names, given, _callees(value, meanings.table, roots=roots))
    return meanings.result()


def _constants(tree) -> dict[str, ast.AST]:
    """Names stored exactly once in the whole code, by a plain assignment
    (``payload = "eJy..."``): name -> the value's expression."""
    stores: dict[str, int] = {}
    values: dict[str, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            values[node.targets[0].id] = node.value
    return {name: value for name, value in values.items() if stores.get(name) == 1}


def _where(node) -> int:
    return getattr(node, "lineno", 0)


class _Finding(typing.NamedTuple):
    """A call that runs code given as data, as :class:`_Decoder` records it."""

    #: The call's line in the code read; for a call inside decoded code, the line of the
    #: call in the student's own code that runs it (``nested``).
    line: int
    callee: str
    text: str  # the call, shortened (:func:`_short`)
    #: The decoded code's lines; None where it cannot be decoded without running it; the
    #: sentence saying why it was not decoded.
    decoded: int | str | None
    #: Where that call of the student's own code ends: (line, UTF-8 column).
    end: tuple[int, int]
    nested: bool = False


def _end(node) -> tuple[int, int]:
    return (getattr(node, "end_lineno", None) or 0, getattr(node, "end_col_offset", None) or 0)


class _Shorten(ast.NodeTransformer):
    def visit_Constant(self, node):
        if isinstance(node.value, (str, bytes)) and len(node.value) > 12:
            return ast.copy_location(ast.Constant(...), node)  # shown as ...
        return node


def _short(node) -> str:
    """``node`` as one line of text, long literals shown as ``...``."""
    long = any(
        isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes)) and len(n.value) > 12
        for n in ast.walk(node)
    )
    try:
        text = ast.unparse(_Shorten().visit(copy.deepcopy(node)) if long else node)
    except (RecursionError, ValueError, AttributeError, TypeError):
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= 90 else text[:87] + "..."


class _Decoder(ast.NodeTransformer):
    """Inlines the code that ``exec``/``eval`` of statically decodable data would run, and
    records every call that runs code given as data (``findings``), by its own name or an
    alias of it (``aliases``, from :func:`_aliases`: ``e = exec; e(s)`` is exec's call)."""

    def __init__(self, aliases, constants, depth=0, budget=None):
        self.aliases, self.constants, self.depth = aliases, constants, depth
        self.budget = budget if budget is not None else _Budget()  # the submission's
        self.names: dict = {}  # the names folded so far, reused by every call's decoding
        self.findings: list[_Finding] = []

    def _decoded(self, call: ast.Call, mode: str):
        """The parsed code of ``call``'s first argument; None where it cannot be decoded
        without running the student's code; once the submission's budget is spent, the
        :class:`_Budget`'s sentence (a string): nothing more is decoded."""
        if self.depth >= 4 or not call.args:
            return None
        budget = self.budget
        if budget.calls <= 0:
            budget.stop(
                f"too many to decode (at most {MAX_DYNAMIC_CALLS} calls that run code given "
                "as data are decoded per submission)"
            )
        if budget.stopped is not None:
            return budget.stopped
        budget.calls -= 1
        state = {"steps": 0, "names": self.names, "budget": budget}
        try:
            source = _source_of(_fold(call.args[0], self.aliases, self.constants, state=state))
        except _Exhausted:
            return budget.stopped
        except (_NotStatic, RecursionError, MemoryError, ValueError, TypeError, OverflowError):
            return None
        if source is None:
            return None
        if len(source) > budget.decoded:
            return budget.stop(
                f"too large to decode (more than the {MAX_DECODED:,} characters of code "
                "decoded per submission)"
            )
        budget.decoded -= len(source)
        try:
            tree = ast.parse(source, mode=mode)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        inner = _Decoder(
            _aliases([tree], self.aliases),
            {**self.constants, **_constants(tree)},
            self.depth + 1,
            budget,
        )
        tree = inner.visit(tree)
        # a call in the decoded code is said where the student's code runs it
        self.findings += [
            f._replace(line=_where(call), end=_end(call), nested=True) for f in inner.findings
        ]
        return tree

    def _note(self, call, name, decoded_lines):
        self.findings.append(_Finding(_where(call), name, _short(call), decoded_lines, _end(call)))

    def visit_Call(self, node):
        if isinstance(node.func, ast.Call) and _callee(node.func, self.aliases) in _RUNS:
            # getattr(builtins, "exec")(...) is one call that runs code: said once, as exec
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
        else:
            self.generic_visit(node)
        func = node.func
        name = _dotted(func, self.aliases)
        if name is None:
            reached = _callee(func, self.aliases)  # __builtins__["exec"], getattr(b, "exec")
            name = reached if reached in _RUNS else None
        if name is None:
            # __builtins__["exec"](...), vars(builtins)["eval"](...), obj().exec(...)
            key = (
                func.slice.value
                if isinstance(func, ast.Subscript) and isinstance(func.slice, ast.Constant)
                else func.attr
                if isinstance(func, ast.Attribute)
                else None
            )
            if key in _DYNAMIC_WORDS:
                self._note(node, _short(func), None)
            return node
        if (
            name in ("getattr", "builtins.getattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in _DYNAMIC_WORDS
        ):
            self._note(node, f"getattr(..., {node.args[1].value!r})", None)
            return node
        if name not in _RUNS:
            return node
        if name in ("eval", "builtins.eval"):
            tree = self._decoded(node, "eval")
            if not isinstance(tree, ast.AST):
                self._note(node, name, tree)
                return node
            self._note(node, name, ast.unparse(tree).count("\n") + 1)
            return ast.copy_location(tree.body, node)
        if name in _RUNS_SOURCE:
            tree = self._decoded(node, "exec")
            if not isinstance(tree, ast.AST):
                self._note(node, name, tree)
                return node
            self._note(node, name, len(ast.unparse(tree).splitlines()))
            node._lablib_decoded = tree.body  # inlined by _inline
            return node
        self._note(node, name, None)
        return node


class _Inline(ast.NodeTransformer):
    """``exec(<decodable>)`` as a statement becomes the statements it would run (placed at
    the ``exec``'s position); ``compile(...)`` elsewhere adds them after its statement."""

    def generic_visit(self, node):
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                continue
            out = []
            for stmt in body:
                keep = not (isinstance(stmt, ast.Expr) and hasattr(stmt.value, "_lablib_decoded"))
                decoded = []
                for n in ast.walk(stmt):
                    if hasattr(n, "_lablib_decoded"):
                        decoded.append(n._lablib_decoded)
                        del n._lablib_decoded  # inlined once, at the innermost statement list
                if keep:
                    out.append(stmt)
                for statements in decoded:
                    for new in statements:
                        for child in ast.walk(new):  # the decoded code is marked where the exec is
                            for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
                                if attr in child._attributes:
                                    setattr(child, attr, getattr(stmt, attr))
                            child._lablib_decoded_from = True
                        out.append(new)
            setattr(node, field, out)
        return node


# --------------------------------------------------------------------------- dead code


def _pure(node) -> bool:
    """An expression whose evaluation has no effect worth keeping (no call, no await...)."""
    return not any(
        isinstance(n, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr))
        for n in ast.walk(node)
    )


def _read_names(tree) -> set[str]:
    read = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            read.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            read.update(node.names)
    return read


def _targets(stmt) -> list | None:
    if isinstance(stmt, ast.Assign):
        return stmt.targets
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return [stmt.target]
    return None


def _names_only(target) -> list[str] | None:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        names = [_names_only(e) for e in target.elts]
        return None if any(n is None for n in names) else [x for n in names for x in n]
    return None


def _loads(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _stored_names(stmt) -> list[str] | None:
    """The names a plain assignment of a pure value stores (``x = 0``, ``a, b = 1, 2``,
    ``x += 1``, ``x: int``), or None for any other statement."""
    targets = _targets(stmt)
    if targets is None or not (stmt.value is None or _pure(stmt.value)):
        return None
    names = [_names_only(t) for t in targets]
    return None if any(n is None for n in names) else [x for n in names for x in n]


def _overwritten(body: list) -> list[bool]:
    """For each statement of ``body`` that stores names (:func:`_stored_names`), whether
    every one of them is assigned again in the statements that follow in the same block
    before anything reads it (the first value is never used); False for the others. One
    pass from the end, so a block of many assignments costs its length, not its square."""
    out = [False] * len(body)
    assigned_first: dict[str, bool] = {}  # name -> its next use below is an assignment
    for i in range(len(body) - 1, -1, -1):
        stmt = body[i]
        names = _stored_names(stmt)
        if names is not None:
            out[i] = all(assigned_first.get(n, False) for n in names) and i + 1 < len(body)
        if isinstance(stmt, _COMPOUND) or isinstance(
            stmt, (ast.Return, ast.Raise, ast.Break, ast.Continue)
        ):
            assigned_first = {}  # a loop may come back, a branch may not run: keep it
            continue
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                assigned_first.update(dict.fromkeys(_names_only(target) or (), True))
        for name in _loads(stmt):  # read before its own assignment: the value is used
            assigned_first[name] = False
    return out


def _drop_dead(tree) -> None:
    """Remove statements without effect, until none is left: bare pure expressions
    (docstrings included), ``pass`` beside other statements, and assignments of a pure
    value (no call) to names nothing reads, or that the same block assigns again before
    reading (``_ = 0`` after every line). Class bodies keep their assignments (they are
    attributes)."""
    for _ in range(50):
        read = _read_names(tree)
        changed = False
        for node in ast.walk(tree):
            for field in ("body", "orelse", "finalbody"):
                body = getattr(node, field, None)
                if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                    continue
                kept = []
                overwritten = _overwritten(body) if not isinstance(node, ast.ClassDef) else None
                for i, stmt in enumerate(body):
                    if (
                        isinstance(stmt, ast.Expr)
                        and _pure(stmt.value)
                        or isinstance(stmt, ast.Pass)
                    ):
                        continue
                    names = None if isinstance(node, ast.ClassDef) else _stored_names(stmt)
                    if names is not None and (not read.intersection(names) or overwritten[i]):
                        continue
                    kept.append(stmt)
                if not kept and field == "body" and not isinstance(node, ast.Module):
                    if len(body) == 1 and isinstance(body[0], ast.Pass):
                        continue  # already as small as a block can be
                    kept = [ast.copy_location(ast.Pass(), body[0])]
                if len(kept) != len(body) or kept[:1] != body[:1]:
                    changed = True
                    setattr(node, field, kept)
        if not changed:
            return


# --------------------------------------------------------------------------- tokens


def _bound_names(tree) -> set[str]:
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return bound


_SKIP = {tokenize.NL, tokenize.COMMENT, tokenize.ENCODING, tokenize.ENDMARKER}
_FSTRING = {getattr(tokenize, n) for n in ("FSTRING_START",) if hasattr(tokenize, n)}
_FSTRING_SKIP = {
    getattr(tokenize, n) for n in ("FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, n)
}


class _Words:
    """Turns source text into the compared tokens (module docstring, step 2)."""

    def __init__(self, bound: set[str], modules: dict[str, str]):
        self.bound = bound
        self.modules = modules  # name -> module it stands for (imports, then the known aliases)

    def __call__(self, text: str) -> list[str]:
        return self.detailed(text)[0]

    def detailed(self, text: str) -> tuple[list[str], list[int], list[str | None]]:
        """``(tokens, raw, keys)``: the compared tokens, for each the index of the source
        token it comes from (``import numpy as N``'s ``N`` gives three tokens), and each
        source token's key for aligning it with the student's own text (:func:`_lex`)."""
        out: list[str] = []
        raw: list[int] = []
        keys: list[str | None] = []
        previous = None
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            kind, value = tok.type, tok.string
            if kind in _SKIP or kind in _FSTRING_SKIP:
                continue
            key = value
            if kind == tokenize.NAME:
                if keyword.iskeyword(value) or previous == ".":
                    words = [value]
                elif value in self.modules:
                    words = re.split(r"(\.)", self.modules[value])
                elif value in self.bound:
                    words = ["V"]
                else:
                    words = [value]
            elif kind == tokenize.STRING or kind in _FSTRING:
                words, key = ["S"], "S"
            elif kind == tokenize.NUMBER:
                words, key = ["N"], "N"
            elif kind == tokenize.NEWLINE:
                words, key = [";"], None
            elif kind == tokenize.INDENT:
                words, key = [_BEGIN], None
            elif kind == tokenize.DEDENT:
                words, key = [_END], None
            else:
                words = [value]
            out += words
            raw += [len(keys)] * len(words)
            keys.append(key)
            previous = value
        return out, raw, keys


_LEX = re.compile(
    r"""(?P<comment>\#[^\n]*)
  |(?P<string>[rRbBuUfF]{0,2}(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  |(?P<name>[^\W\d]\w*)
  |(?P<number>\d[\w.]*(?:[eE][-+]?\d+)?|\.\d\w*)
  |(?P<op>\*\*=?|//=?|>>=?|<<=?|->|:=|\.\.\.|[-+*/%@&|^=<>!]=|\S)""",
    re.VERBOSE,
)


def _lex(text: str) -> list[tuple[str, int, int]]:
    """The student's own tokens in ``text``: ``(key, start, end)``, keys as
    :meth:`_Words.detailed`'s (strings ``S``, numbers ``N``); comments left out."""
    out = []
    for m in _LEX.finditer(text):
        kind = m.lastgroup
        if kind == "comment":
            continue
        out.append(({"string": "S", "number": "N"}.get(kind, m.group()), m.start(), m.end()))
    return out


#: Aligning a submission's normalised tokens with its own text (to mark the shared
#: passages) takes at most this many steps of difflib's search; past it, a statement whose
#: tokens differ from the student's is marked as a whole.
MAX_ALIGN_WORK = 5_000_000


class _AlignSpent(Exception):
    """A submission's alignment budget is spent."""


class _Matcher(difflib.SequenceMatcher):
    """difflib's matcher (no junk), its work counted in ``budget`` (a one-item list): each
    longest-match search visits every position of ``b`` that holds each token of ``a``'s
    range, quadratic or worse in a long statement of one repeated token that unparsing
    changes (``[((0)), ((0)), ...]``)."""

    def __init__(self, a, b, budget: list[int]):
        self.budget = budget
        super().__init__(None, a, b, autojunk=False)

    def find_longest_match(self, alo=0, ahi=None, blo=0, bhi=None):
        ahi = len(self.a) if ahi is None else ahi
        work = ahi - alo + sum(len(self.b2j.get(self.a[i], ())) for i in range(alo, ahi))
        if work > self.budget[0]:
            raise _AlignSpent
        self.budget[0] -= work
        return super().find_longest_match(alo, ahi, blo, bhi)


def _aligned(
    keys: list[str | None], original: str, base: int, budget: list[int]
) -> list[tuple[int, int] | None]:
    """Each source token's character span in the student's ``original`` text (which starts
    at ``base`` in the whole code), or None where the normalised text has a token the
    student did not write (a parenthesis unparsing added). Once the submission's
    ``budget`` (:data:`MAX_ALIGN_WORK`) is spent, every token of a statement whose tokens
    differ from the student's has the whole statement's span."""
    theirs = _lex(original)
    wanted = [(i, k) for i, k in enumerate(keys) if k is not None]
    spans: list[tuple[int, int] | None] = [None] * len(keys)
    a, b = [k for _, k in wanted], [k for k, _, _ in theirs]
    if a == b:  # what difflib finds, without its search
        blocks = [difflib.Match(0, 0, len(a))]
    else:
        try:
            blocks = _Matcher(a, b, budget).get_matching_blocks()
        except _AlignSpent:
            budget[0] = 0
            return [(base, base + len(original))] * len(keys)
    for block in blocks:
        for j in range(block.size):
            _, start, end = theirs[block.b + j]
            spans[wanted[block.a + j][0]] = (base + start, base + end)
    return spans


_COMPOUND = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


_BEGIN, _END = "<indent>", "<dedent>"


def _header(text_tokens: list[str]) -> list[str]:
    """The tokens of a compound statement's first clause (up to its ``:``)."""
    depth = 0
    for i, t in enumerate(text_tokens):
        if t in ("(", "[", "{"):
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
        elif t == ":" and depth == 0:
            return text_tokens[: i + 1]
    return text_tokens


class _Offsets:
    """Character offsets of ``(line, UTF-8 column)`` positions of a text (ast's positions)."""

    def __init__(self, code: str):
        self.code = code
        self.align_work = [MAX_ALIGN_WORK]  # what aligning this code's tokens may still take
        # lines as ast numbers them (line feed, CR LF, CR): str.splitlines also breaks at
        # U+2028, form feeds, \x1c...: a comment of them moved every mark onto other text
        self.lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", code)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def at(self, line: int, col: int | None) -> int:
        if line < 1:
            return 0
        if line > len(self.lines):
            return self.starts[-1]
        text = self.lines[line - 1]
        if col is None:
            return self.starts[line - 1] + len(text.rstrip("\r\n"))
        return self.starts[line - 1] + len(
            text.encode("utf-8", "surrogatepass")[:col].decode("utf-8", "ignore")
        )

    def span(self, node, whole: bool = True) -> tuple[int, int]:
        line = getattr(node, "lineno", None)
        if line is None:
            return (0, 0)
        decorators = [d.lineno for d in getattr(node, "decorator_list", [])]
        start_line = min([line, *decorators])
        start = self.at(start_line, getattr(node, "col_offset", 0) if start_line == line else None)
        if start_line != line:
            start = self.starts[start_line - 1]
        if whole:
            return (start, self.at(node.end_lineno or line, node.end_col_offset))
        return (start, self.at(line, None))


def _emit(
    text: str,
    node,
    whole: bool,
    words: _Words,
    offsets: _Offsets,
    out_tokens,
    out_spans,
    header: bool = False,
) -> None:
    """Append ``text``'s tokens (the normalised form of ``node``, or of its first clause),
    each with the span of the student's own token it matches; code decoded from an
    ``exec`` is marked where the ``exec`` is."""
    tokens, raw, keys = words.detailed(text)
    if header:
        tokens = _header(tokens)
    start, end = offsets.span(node, whole=whole)
    if getattr(node, "_lablib_decoded_from", False):
        spans = [(start, end)] * len(keys)
    else:
        spans = _aligned(keys, offsets.code[start:end], start, offsets.align_work)
    out_tokens += tokens
    out_spans += [spans[raw[i]] or (0, 0) for i in range(len(tokens))]


def _units(body, words: _Words, offsets: _Offsets, out_tokens: list, out_spans: list) -> None:
    """Append the tokens of ``body``'s statements and the character span each came from."""
    for stmt in body:
        if isinstance(stmt, _COMPOUND):
            head = copy.copy(stmt)  # the first clause alone: its blocks emptied
            for field in ("body", "orelse", "finalbody", "handlers"):
                if hasattr(head, field):
                    setattr(head, field, [] if field != "body" else [ast.Pass()])
            _emit(
                ast.unparse(head), stmt, False, words, offsets, out_tokens, out_spans, header=True
            )
            _units(stmt.body, words, offsets, out_tokens, out_spans)
            out_tokens.append(_END)
            out_spans.append((0, 0))
            for handler in getattr(stmt, "handlers", []):
                head = copy.copy(handler)
                head.body = [ast.Pass()]
                _emit(
                    ast.unparse(head),
                    handler,
                    False,
                    words,
                    offsets,
                    out_tokens,
                    out_spans,
                    header=True,
                )
                _units(handler.body, words, offsets, out_tokens, out_spans)
                out_tokens.append(_END)
                out_spans.append((0, 0))
            for field, word in (("orelse", "else"), ("finalbody", "finally")):
                rest = getattr(stmt, field, None)
                if rest:
                    out_tokens += [word, ":"]
                    out_spans += [(0, 0), (0, 0)]
                    _units(rest, words, offsets, out_tokens, out_spans)
                    out_tokens.append(_END)
                    out_spans.append((0, 0))
        else:
            try:
                _emit(ast.unparse(stmt), stmt, True, words, offsets, out_tokens, out_spans)
            except (tokenize.TokenError, IndentationError, SyntaxError, ValueError, RecursionError):
                continue


def _lexical(code: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Tokens of code that does not parse as Python (a magic, a syntax error): names kept
    as written except those assigned somewhere (``x =``), which become ``V``."""
    pieces = list(re.finditer(r"[A-Za-z_]\w*|\d[\w.]*|'[^'\n]*'|\"[^\"\n]*\"|#[^\n]*|\S", code))
    assigned = {
        m.group()
        for i, m in enumerate(pieces[:-1])
        if re.match(r"[A-Za-z_]", m.group()) and pieces[i + 1].group() == "="
    }
    tokens, spans = [], []
    for i, m in enumerate(pieces):
        text = m.group()
        if text.startswith("#"):
            continue
        if re.match(r"[A-Za-z_]", text):
            after_dot = i > 0 and pieces[i - 1].group() == "."
            text = text if keyword.iskeyword(text) or after_dot or text not in assigned else "V"
            text = KNOWN_ALIASES.get(text, text) if text != "V" and not after_dot else text
        elif text[0].isdigit():
            text = "N"
        elif text[0] in "'\"":
            text = "S"
        tokens.append(text)
        spans.append(m.span())
    return tokens, spans


@dataclasses.dataclass(frozen=True)
class _Analysis:
    """One submission's graded code as compared; kept and shared (:class:`_Kept`), so
    nothing in it is ever changed."""

    tokens: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    findings: tuple[_Finding, ...]  # the calls that run code given as data, and what was decoded
    #: Why the code is compared as text, nothing of it decoded (None where it is not).
    as_text: str | None = None
    #: The names its decoding followed (:func:`_aliases`), kept only where the code parsed
    #: but could not be normalised: :func:`dynamic_code` then inspects the cells one by one
    #: with this map instead of making it again.
    aliases: typing.Mapping[str, tuple[str, ...]] | None = dataclasses.field(
        default=None, compare=False
    )


#: A magic whose statement the grader runs (``%time stmt``, ``%timeit -n 3 stmt``, the
#: set-up of ``%%timeit``): the statement is compared and read, as the grader runs it.
_RUN_MAGIC = re.compile(
    r"(?m)^([ \t]*)(%%?time(?:it)?(?:[ \t]+-(?:[nrp][ \t]*[\d.]+|[tcqov]+))*)(?=[ \t]|$)"
)


#: The other lines IPython turns into calls (:mod:`lablib.grading.magics`), which the
#: grader runs as nothing: a magic's or shell line's value assigned (``x = !ls``,
#: ``y = %who_ls``) and a help request (``np.mean?``, ``?np.mean``, ``np.mean??``). Used
#: only where the code does not parse as it is: there, a line with a string's ``"a=%s"``
#: is blanked too (it is then not compared).
_IPYTHON_LINE = re.compile(
    r"(?m)^[^\n\r]*?=[ \t]*[%!][^\n\r]*$|^[ \t]*\?[^\n\r]*$|^[^\n\r]*\?[ \t]*$"
)


def _blank_magic(code: str) -> str:
    """``code`` with its IPython magic and shell lines (``!ls``, ``%matplotlib``, ``x =
    !ls``, ``np.mean?``) blanked (spaces: every position stays where it was), but a
    ``%time``/``%timeit`` line's statement (and ``%%timeit``'s set-up) kept in its place:
    the grader runs it, so the comparison and the code-given-as-data check read it (``0;``
    stands for the magic). One such line (``np.mean?`` in a copied notebook) made the
    whole code unparsable, compared as raw text with no classmate's."""
    code = _RUN_MAGIC.sub(lambda m: m.group(1) + "0;" + " " * (len(m.group(2)) - 2), code)
    code = re.sub(r"(?m)^([ \t]*)[%!].*$", lambda m: " " * len(m.group()), code)
    return _IPYTHON_LINE.sub(lambda m: " " * len(m.group()), code)


def _parse(code: str) -> ast.Module | None:
    """``code``'s tree as the hints read it: as written, else with the IPython magic and
    shell lines (``%time``, ``!ls``) blanked; None where neither parses."""
    for attempt in (code, _blank_magic(code)):
        try:
            return ast.parse(attempt)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


#: The analyses kept to be read again (:func:`dynamic_code` reads the comparison's own): at
#: most this many, a class of hundreds and its template...
MAX_KEPT = 1_000
#: ...holding at most this many bytes in all, as :func:`_kept_bytes` counts them (some 55
#: bytes per character of a lab's graded code, which holds a few thousand; the code decoded
#: into an analysis counts too: a few hundred characters can decode to :data:`MAX_DECODED`,
#: some 40 bytes each).
MAX_KEPT_BYTES = 256 * 2**20
#: A span's (or a finding's end's) two offsets, in bytes, counted as if none were shared.
_SPAN_BYTES = sys.getsizeof((2**40, 2**40)) + 2 * sys.getsizeof(2**40)


def _kept_bytes(code: str, analysis: _Analysis) -> int:
    """The bytes keeping ``analysis`` of ``code`` holds, counted high (as if no token, span
    or text were shared): the code, every token and its span (the code decoded into it
    included), the findings and the alias map."""
    size = sys.getsizeof
    total = size(code) + size(analysis.tokens) + size(analysis.spans)
    total += sum(map(size, analysis.tokens)) + _SPAN_BYTES * len(analysis.spans)
    for f in analysis.findings:
        total += size(f) + size(f.text) + size(f.callee) + size(f.decoded) + _SPAN_BYTES
    if analysis.as_text is not None:
        total += size(analysis.as_text)
    if analysis.aliases is not None:
        total += size(analysis.aliases.copy())
        for name, meanings in analysis.aliases.items():
            total += size(name) + size(meanings) + sum(map(size, meanings))
    return total


class _Kept:
    """The latest analyses, by the code they read: the comparison analyses each submission,
    then :func:`dynamic_code` reads the same analysis instead of decoding the code a second
    time. The least recently read is dropped first, past :data:`MAX_KEPT` analyses or
    :data:`MAX_KEPT_BYTES` bytes (:func:`_kept_bytes`); one larger than that alone is not
    kept (it is made again where it is read again)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items: collections.OrderedDict[str, tuple[_Analysis, int]] = collections.OrderedDict()
        self.bytes = 0

    def get(self, code: str) -> _Analysis | None:
        with self.lock:
            item = self.items.get(code)
            if item is None:
                return None
            self.items.move_to_end(code)
            return item[0]

    def put(self, code: str, analysis: _Analysis) -> None:
        size = _kept_bytes(code, analysis)
        with self.lock:
            if code in self.items:
                return
            self.items[code] = (analysis, size)
            self.bytes += size
            while len(self.items) > MAX_KEPT or self.bytes > MAX_KEPT_BYTES:
                _, (_, dropped) = self.items.popitem(last=False)
                self.bytes -= dropped

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.bytes = 0


_KEPT = _Kept()


def _analyse(code: str) -> _Analysis:
    """Normalise ``code`` (steps 1 and 2 of the module docstring): its first
    :data:`MAX_CODE` characters, decoded within one :class:`_Budget`. The same code is
    analysed once (:class:`_Kept`): :func:`dynamic_code` describes this very analysis."""
    code = code[:MAX_CODE]
    analysis = _KEPT.get(code)
    if analysis is None:
        analysis = _analysed_anew(code)
        _KEPT.put(code, analysis)
    return analysis


def _analysed_anew(code: str) -> _Analysis:
    """:func:`_analyse`'s work, for code not analysed yet."""
    offsets = _Offsets(code)
    tree = _parse(code)
    if tree is None:
        tokens, spans = _lexical(code)
        return _Analysis(tuple(tokens), tuple(spans), (), "does not parse as Python")
    aliases = None
    try:
        aliases = _aliases([tree])
        decoder = _Decoder(aliases, _constants(tree))
        tree = decoder.visit(tree)
        if any(isinstance(f.decoded, int) for f in decoder.findings):
            tree = _Inline().visit(tree)
        _drop_dead(tree)
        bound = _bound_names(tree)
        modules = {**{k: v for k, v in KNOWN_ALIASES.items() if k not in bound}, **_imports(tree)}
        tokens, spans = [], []
        _units(tree.body, _Words(bound - set(modules), modules), offsets, tokens, spans)
        return _Analysis(tuple(tokens), tuple(spans), tuple(decoder.findings))
    except Exception as exc:  # noqa: BLE001 - hostile code must never stop a batch's reports: compare its text
        tokens, spans = _lexical(code)
        why = f"could not be normalised ({type(exc).__name__})"
        kept = None if aliases is None else types.MappingProxyType(aliases)
        return _Analysis(tuple(tokens), tuple(spans), (), why, kept)  # the map for dynamic_code


# --------------------------------------------------------------------------- fingerprints


def _hash(tokens) -> int:
    data = "\x1f".join(tokens).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def _kgram_hashes(tokens: list[str], k: int = NOISE_TOKENS) -> list[int]:
    return [_hash(tokens[i : i + k]) for i in range(len(tokens) - k + 1)]


def _winnow(
    hashes: list[int], window: int = GUARANTEE_TOKENS - NOISE_TOKENS + 1
) -> dict[int, list[int]]:
    """Robust winnowing: in every window of ``window`` hashes, the smallest (the rightmost
    of equal ones); hash -> the positions selected."""
    selected: dict[int, list[int]] = {}
    if not hashes:
        return selected
    if len(hashes) < window:
        window = len(hashes)
    last = -1
    for start in range(len(hashes) - window + 1):
        best = min(range(start, start + window), key=lambda i: (hashes[i], -i))
        if best != last:
            selected.setdefault(hashes[best], []).append(best)
            last = best
    return selected


@dataclasses.dataclass
class _Print:
    analysis: _Analysis
    selected: dict[int, list[int]]

    def covered(self, keep=None) -> set[int]:
        """Token positions inside the selected k-grams (those whose hash is in ``keep``)."""
        out = set()
        for h, positions in self.selected.items():
            if keep is None or h in keep:
                for p in positions:
                    out.update(range(p, p + NOISE_TOKENS))
        return out


def _marks(
    code: str, spans: list[tuple[int, int]], positions: set[int]
) -> tuple[tuple[int, int], ...]:
    """Character ranges of the tokens at ``positions``, joined across the spaces, commas and
    brackets between them (one mark per passage, not one per token)."""
    ranges = sorted({spans[p] for p in positions if p < len(spans) and spans[p][1] > spans[p][0]})
    merged: list[list[int]] = []
    for start, end in ranges:
        if merged and (
            start <= merged[-1][1] or not code[merged[-1][1] : start].strip(" \t\n()[],")
        ):
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return tuple((s, e) for s, e in merged)


def _normal(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


def similarity_hints(
    codes: dict,
    template: str = "",
    *,
    threshold: float = THRESHOLD,
    limit: int = MAX_PAIRS,
    owners: dict | None = None,
) -> dict:
    """Everything :func:`similar_pairs` finds, with the counts the summary states.

    ``owners``: row name -> who it belongs to (any hashable; :func:`~lablib.grading.gradebook
    .identity.owner_of`), so that a student with several rows counts once in the common
    passages, and alike rows of one student are not listed as a pair of two; a row not in
    it is its own student.

    Returns:
        ``{"pairs": [Pair], "same_code": [[names]], "same_student": [[names]], "found":
        pairs at the threshold before the cap, "threshold", "cap", "common": passages left
        out as common (fingerprints), "compared": submissions compared}``; ``same_student``
        lists the pairs and same-code groups whose rows are all one student's (several
        notebooks of one student, not copying), apart from ``pairs`` and ``same_code``.
    """
    owners = owners or {}
    by_text: dict[str, list[str]] = {}
    for name in sorted(codes):
        if codes[name] and codes[name].strip():
            by_text.setdefault(_normal(codes[name]), []).append(name)
    boilerplate = set(_kgram_hashes(_analyse(template).tokens)) if template.strip() else set()
    prints: dict[str, _Print] = {}
    who: dict[str, set] = {}  # a print's name -> the owners of its rows (same text)
    for members in by_text.values():
        analysis = _analyse(codes[members[0]])
        selected = {
            h: p for h, p in _winnow(_kgram_hashes(analysis.tokens)).items() if h not in boilerplate
        }
        if selected:
            prints[members[0]] = _Print(analysis, selected)
            who[members[0]] = {_owner(owners, m) for m in members}
    common = _common_passages(prints, who)
    for name in list(prints):
        prints[name].selected = {h: p for h, p in prints[name].selected.items() if h not in common}
        if not prints[name].selected:
            del prints[name]
    groups = [m for m in by_text.values() if len(m) > 1 and m[0] in who]
    pairs = _compared(prints, codes, threshold)
    one = [[p.a, p.b] for p in pairs if len(who[p.a] | who[p.b]) == 1]
    one += [g for g in groups if len(who[g[0]]) == 1]
    pairs = [p for p in pairs if len(who[p.a] | who[p.b]) > 1]
    groups = [g for g in groups if len(who[g[0]]) > 1]
    return {
        "pairs": pairs[:limit],
        "same_code": sorted(groups, key=lambda g: (-len(g), g)),
        "same_student": sorted(one, key=lambda g: (-len(g), g))[:limit],
        "found": len(pairs),
        "threshold": threshold,
        "cap": limit,
        "common": len(common),
        "compared": len(prints),
    }


def _owner(owners: dict, name: str) -> tuple:
    """Who row ``name`` belongs to; a row without a known owner is its own."""
    return ("owner", owners[name]) if owners.get(name) is not None else ("row", name)


def _common_passages(prints: dict[str, _Print], who: dict[str, set]) -> set[int]:
    """The fingerprints found in the code of more than :data:`COMMON_SHARE` of the class's
    students, once it has :data:`COMMON_MIN` of them: a student counts once per passage
    however many rows they handed in (``who``: a print's name -> its rows' owners), so
    extra rows of one student cannot make a passage common."""
    students = set().union(*who.values()) if who else set()
    if len(students) < COMMON_MIN:
        return set()
    holders: dict[int, set] = {}
    for name, fp in prints.items():
        for h in fp.selected:
            holders.setdefault(h, set()).update(who[name])
    return {h for h, held in holders.items() if len(held) > COMMON_SHARE * len(students)}


def _compared(prints: dict[str, _Print], codes: dict, threshold: float) -> list[Pair]:
    """Every pair of ``prints`` whose similarity (the smaller share) is at least
    ``threshold``, most similar first."""
    names = sorted(prints)
    coverage = {n: len(prints[n].covered()) for n in names}
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared = prints[a].selected.keys() & prints[b].selected.keys()
            if not shared:
                continue
            covered_a, covered_b = prints[a].covered(shared), prints[b].covered(shared)
            share_a, share_b = len(covered_a) / coverage[a], len(covered_b) / coverage[b]
            similarity = min(share_a, share_b)
            if similarity >= threshold:
                pairs.append(
                    Pair(
                        a,
                        b,
                        round(similarity, 4),
                        round(share_a, 4),
                        round(share_b, 4),
                        min(len(covered_a), len(covered_b)),
                        codes[a],
                        codes[b],
                        _marks(codes[a], prints[a].analysis.spans, covered_a),
                        _marks(codes[b], prints[b].analysis.spans, covered_b),
                    )
                )
    pairs.sort(key=lambda p: (-p.similarity, -p.tokens, p.a, p.b))
    return pairs


def similar_pairs(
    codes: dict, template: str = "", *, threshold: float = THRESHOLD, limit: int = MAX_PAIRS
) -> tuple[list[Pair], list[list[str]]]:
    """The near-identical submissions among ``codes`` (name -> graded code); ``template``
    is the released lab's graded code (removed from every submission).

    Returns:
        ``(pairs, groups)``: ``groups`` lists the submissions whose graded code is the
        same text (blank lines and trailing spaces aside), largest first, each sorted;
        ``pairs`` compares one submission of each group (its first name) with every
        other submission, keeps those whose similarity (the smaller share) is at least
        ``threshold``, most similar first, at most ``limit``. Code with nothing beyond the
        template (a blank lab) is in neither. The same input gives the same output in
        every process (no randomised hashing).
    """
    hints = similarity_hints(codes, template, threshold=threshold, limit=limit)
    return hints["pairs"], hints["same_code"]


#: The most calls :func:`dynamic_code` describes one by one; the rest are counted in one
#: sentence, so a submission of thousands of calls cannot fill the class's reports.
MAX_DYNAMIC_SENTENCES = 60

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what ends a line for ast
_UNREAD = "\x00not decoded"  # dynamic_code's own inspection: the comparison decoded nothing


def _line_starts(text: str) -> list[int]:
    """The character offset where each line of ``text`` starts, lines as ast numbers them."""
    return [0] + [m.end() for m in _LINE_BREAK.finditer(text)]


def _char_at(text: str, starts: list[int], line: int, col: int) -> int:
    """The character offset in ``text`` of ast's ``(line, UTF-8 column)``."""
    if line < 1:
        return 0
    if line > len(starts):
        return len(text)
    start = starts[line - 1]
    end = starts[line] if line < len(starts) else len(text)
    return start + len(
        text[start:end].encode("utf-8", "surrogatepass")[:col].decode("utf-8", "ignore")
    )


def _why_not_parsed(code: str) -> str:
    """Why ``code`` does not parse (with its magic and shell lines blanked, as read)."""
    blanked = _blank_magic(code)
    try:
        ast.parse(blanked)
    except SyntaxError as exc:
        return f"it does not parse as Python: line {exc.lineno}, {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"it does not parse as Python ({type(exc).__name__})"
    return "it does not parse as Python"


def dynamic_code(cells: dict) -> list[str]:
    """Sentences for the instructor about graded cells (piece -> source) that run code
    built at run time: where, what, and whether the grader could decode it; and cells the
    hints could not read or inspect.

    The sentences describe the comparison itself: the cells are read as
    :func:`similarity_hints` reads them, joined as :func:`graded_code` joins them (the
    first :data:`MAX_CODE` characters, IPython magic and shell lines blanked), and decoded
    in the same order within the same budget (the comparison's own analysis, kept, where it
    made one: each submission is analysed once), so a call said decoded is the one compared
    in its place, and a call past the budget is said not decoded, and why. Where the
    comparison reads the code as text (it does not parse, or could not be normalised) or
    stops at :data:`MAX_CODE`, each cell is still inspected on its own for such calls, and
    they are said not decoded; a cell that does not parse either is said not inspected.
    At most :data:`MAX_DYNAMIC_SENTENCES` calls are described one by one, the rest counted
    in one sentence."""
    code = graded_code(cells)
    analysis = _analyse(code)
    read = min(len(code), MAX_CODE)
    layout = _cell_layout(cells)
    calls: dict[str, list[tuple[int, _Finding, str | None]]] = {p: [] for p, *_ in layout}
    firsts = [first for _, _, first, _ in layout]
    for finding in analysis.findings:
        at = max(bisect.bisect_right(firsts, finding.line) - 1, 0)
        piece, _, first, _ = layout[at]
        calls[piece].append((finding.line - first + 1, finding, None))
    heads: dict[str, str] = {}  # piece -> what is said of the cell itself
    if analysis.as_text is not None or read < len(code):
        heads = _cells_read_apart(code, analysis, read, layout, calls)
    return _dynamic_sentences(layout, heads, calls)


def _cell_layout(cells: dict) -> list[tuple[str, str, int, int]]:
    """Each piece's text in the graded code (:func:`graded_code`), its first line (as ast
    numbers them) and its first character."""
    layout = []
    line, char = 1, 0
    for piece, source in cells.items():
        text = source.rstrip()
        layout.append((piece, text, line, char))
        line += len(_LINE_BREAK.findall(text)) + 2
        char += len(text) + 2
    return layout


def _cells_read_apart(code: str, analysis, read: int, layout, calls: dict) -> dict[str, str]:
    """Where the comparison read the graded code as text or stopped at :data:`MAX_CODE`:
    each cell inspected on its own, its calls added to ``calls`` (said not decoded, and
    why); returns what is said of each such cell itself (piece -> sentence)."""
    as_text = (
        "not decoded: the graded code"
        + (f" the hints read (its first {MAX_CODE:,} characters)" if read < len(code) else "")
        + f" {analysis.as_text}, so it is compared as text"
    )
    unread = (
        f"not decoded: past the first {MAX_CODE:,} characters of graded code, which is all "
        "the hints read"
    )
    trees = {piece: _parse(text) if len(text) <= MAX_CODE else None for piece, text, *_ in layout}
    aliases = analysis.aliases  # the comparison's own, where it read all the code as one
    if aliases is None or read < len(code):
        aliases = _aliases(tree for tree in trees.values() if tree is not None)
    heads = {}
    for piece, text, _, start in layout:
        if not text.strip() or (analysis.as_text is None and start + len(text) <= read):
            continue  # read and decoded by the comparison: said by the caller
        why = None
        if len(text) > MAX_CODE:
            why = "is not inspected for code run as data (too long)"
        elif trees[piece] is None:
            if _may_run_code(text):  # a syntax error in honest work cannot run: not flagged
                why = f"could not be inspected for code run as data ({_why_not_parsed(text)})"
        else:
            budget = _Budget()
            budget.stopped = _UNREAD  # nothing is decoded: the comparison decoded nothing here
            decoder = _Decoder(aliases, {}, budget=budget)
            try:
                decoder.visit(trees[piece])
            except Exception as exc:  # noqa: BLE001 - hostile code must never stop a batch's reports
                why = f"could not be inspected for code run as data ({type(exc).__name__})"
            else:
                starts = _line_starts(text)
                for finding in decoder.findings:
                    whole = start + _char_at(text, starts, *finding.end) <= read
                    if analysis.as_text is None and whole:
                        continue  # the comparison read it: said by the caller
                    reason = (as_text if whole else unread) if finding.decoded == _UNREAD else None
                    calls[piece].append((finding.line, finding, reason))
                calls[piece].sort(key=lambda c: c[0])
        head = _cell_head(piece, code, read, start, len(text), why, analysis.as_text is None)
        if head:
            heads[piece] = head
    return heads


def _cell_head(piece, code, read, start, length, why, parsed) -> str | None:
    """What is said of one cell itself where the comparison did not read it whole."""
    if start < read < start + length:
        head = (
            f"{piece}: the graded code runs to {len(code):,} characters, more than the "
            f"{MAX_CODE:,} the hints read: this cell is compared by its first "
            f"{read - start:,} characters only"
        )
        return head + (f"; {'the rest of it' if parsed else 'it'} {why}" if why else "")
    if start >= read:
        head = (
            f"{piece}: past the first {MAX_CODE:,} characters of graded code the hints "
            "read: not compared"
        )
        return head + (f"; it {why}" if why else "")
    return f"{piece}: {why}; compared as text" if why else None


def _dynamic_sentences(layout, heads: dict, calls: dict) -> list[str]:
    """The sentences, cell by cell, at most :data:`MAX_DYNAMIC_SENTENCES` one by one."""
    out: list[str] = []
    unlisted: dict[str, int] = {}  # piece -> calls past MAX_DYNAMIC_SENTENCES
    for piece, *_ in layout:
        if piece in heads:
            out.append(heads[piece])
        for line, finding, reason in calls[piece]:
            if len(out) >= MAX_DYNAMIC_SENTENCES:
                unlisted[piece] = unlisted.get(piece, 0) + 1
                continue
            decoded = finding.decoded if reason is None else reason
            if isinstance(decoded, int):
                what = (
                    "decoded without running it and compared in its place"
                    f" ({decoded} line{'s' if decoded != 1 else ''})"
                )
            else:
                what = decoded or "not decodable without running it"
            where = f"{piece}, line {line}" + (", in the code it decodes" if finding.nested else "")
            out.append(
                f"{where}: {finding.text} runs code given as data ({finding.callee}); {what}"
            )
    if unlisted:  # one sentence for the rest: a report's size is bounded, whatever the code
        total = sum(unlisted.values())
        where = ", ".join(f"{piece} {n:,}" for piece, n in unlisted.items())
        out.append(
            f"{total:,} more call{'s' if total != 1 else ''} that run code given as data, not "
            f"listed (at most {MAX_DYNAMIC_SENTENCES} are): {where}"
        )
    return out


def identical_files(paths: dict, digests: dict | None = None) -> list[list[str]]:
    """Groups of submissions (name -> notebook path) whose files are byte-identical, each
    sorted, largest group first. ``digests`` (name -> SHA-256 of the bytes graded, kept
    at grading; "" where none were read) are compared where given; a file is read only for
    a name without one (a row of an older gradebook), as a notebook is read (a regular
    file within the size limit: a pipe or a device put in its place since is left out,
    never waited on); files that cannot be read, and rows not read, are left out."""
    groups: dict[str, list[str]] = {}
    for name, path in sorted(paths.items()):
        digest = (digests or {}).get(name)
        if digest == "":  # graded, nothing read: no file stands for it
            continue
        if digest is None:
            try:
                digest = hashlib.sha256(read_notebook_bytes(path)).hexdigest()
            except (InvalidNotebook, OSError):
                continue
        groups.setdefault(digest, []).append(name)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: (-len(g), g))
