"""Similarity hints: near-identical graded code is paired, the template never counts; the
same input gives the same hints in every process; the red team's two evasions (values in
parentheses with dead lines, code run through exec of encoded data) hide nothing, and
dynamic code is flagged."""

from __future__ import annotations

import base64
import gc
import itertools
import json
import os
import pathlib
import random
import re
import subprocess
import sys
import time
import tracemalloc
import types
import zlib

import pytest

from lablib.grading import report
from lablib.grading.gradebook.identity import owner_of
from lablib.grading.results import PieceScore, Status, SubmissionResult
from lablib.grading.gradebook.similarity import (
    MAX_BUILT,
    MAX_DYNAMIC_CALLS,
    MAX_DYNAMIC_SENTENCES,
    dynamic_code,
    graded_code,
    identical_files,
    similar_pairs,
    similarity_hints,
)
from lablib.grading.spec import LabSpec

# its bounded-time tests time the analysis: run alone (.ci/run's serial pass)
pytestmark = pytest.mark.serial

TEMPLATE = '''# GRADED: attention
def attention(query, key, value, mask=None):
    """Scaled dot-product attention."""
    # YOUR CODE HERE
    raise NotImplementedError("attention: write it")
'''
ANN = '''# GRADED: attention
def attention(query, key, value, mask=None):
    """Scaled dot-product attention."""
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(key.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ value, weights
'''
# Ann's code with every name changed and a comment added: still the same passage
BOB = (
    ANN.replace("scores", "logits")
    .replace("weights", "alpha")
    .replace("    if mask", "    # mask out the padding\n    if mask")
)
CAT = '''# GRADED: attention
def attention(query, key, value, mask=None):
    """Scaled dot-product attention."""
    d_k = key.shape[-1]
    out = []
    for q in query:
        row = [float(np.dot(q, k)) / math.sqrt(d_k) for k in key]
        total = sum(math.exp(r) for r in row)
        out.append([math.exp(r) / total for r in row])
    w = np.array(out)
    return w.dot(value), w
'''


def _pairs(codes):
    return similar_pairs(codes, TEMPLATE)


def test_renamed_copy_is_paired_and_an_own_solution_is_not():
    pairs, groups = _pairs({"ann": ANN, "bob": BOB, "cat": CAT, "dan": TEMPLATE})
    assert [(p.a, p.b) for p in pairs] == [("ann", "bob")]
    assert pairs[0].similarity > 0.8 and pairs[0].marks_a and pairs[0].marks_b
    assert groups == [], "no two codes are the same text; the blank lab (dan) is in nothing"


def test_same_code_is_grouped_and_the_blank_lab_never_counts():
    pairs, groups = _pairs(
        {"ann": ANN, "eve": ANN + "\n\n", "fay": ANN, "cat": CAT, "dan": TEMPLATE, "gus": TEMPLATE}
    )
    assert groups == [["ann", "eve", "fay"]]
    assert pairs == [], "a group is compared through its first member; cat is her own"


def test_byte_identical_files(tmp_path):
    for name, text in {"a": "x", "b": "x", "c": "y", "d": "x"}.items():
        (tmp_path / f"{name}.ipynb").write_text(text)
    paths = {n: tmp_path / f"{n}.ipynb" for n in "abcd"} | {"e": tmp_path / "gone.ipynb"}
    assert identical_files(paths) == [["a", "b", "d"]]


def test_summary_shows_pairs_side_by_side(tmp_path):
    lab = LabSpec("lab7_sim", "Lab 7")
    lab.piece("attention", objects=["attention"])
    codes = {"ann": ANN, "bob": BOB, "cat": CAT}
    results = [
        SubmissionResult(
            n,
            str(tmp_path / f"{n}.ipynb"),
            Status(),
            1.0,
            1.0,
            {"attention": PieceScore(1.0, 1.0)},
            [],
            code={"attention": c},
        )
        for n, c in codes.items()
    ]
    pairs, groups = similar_pairs({r.submission: graded_code(r.code) for r in results}, TEMPLATE)
    report.write_reports(
        tmp_path / "out",
        lab,
        results,
        similarity={"pairs": pairs, "same_code": groups, "identical": []},
    )
    page = (tmp_path / "out" / "summary.html").read_text()
    assert (
        "Similar code (hints, not verdicts)" in page and "<mark>" in page and "ann and bob" in page
    )
    data = json.loads((tmp_path / "out" / "summary.json").read_text())["similarity"]
    assert [(p["a"], p["b"]) for p in data["pairs"]] == [("ann", "bob")] and "code_a" not in data[
        "pairs"
    ][0]


# ---------------------------------------------------------------- issue 29 item 7, issue 30 item 4


def _parenthesised_with_dead_lines(code):
    """The red team's first evasion: every assigned value in parentheses, and a dead
    ``_ = 0`` after each line."""
    out = []
    for line in code.splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        if re.match(r"\s*\w+ = ", line):
            name, value = line.split(" = ", 1)
            out += [f"{name} = ({value})", f"{indent}_ = 0"]
        elif line.lstrip().startswith("return "):
            out += [f"{indent}_ = 0", f"{indent}return ({line.strip()[7:]})"]
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def _encoded(code):
    """The red team's second evasion: the graded cell's code as zlib + base64, run by exec."""
    body = code.split("\n", 1)[1]
    payload = base64.b64encode(zlib.compress(body.encode())).decode()
    return (
        f"# GRADED: attention\nimport base64 as b64, zlib\n"
        f"exec(zlib.decompress(b64.b64decode({payload!r})).decode())\n"
    )


def test_parenthesised_values_and_dead_lines_hide_nothing():
    evasive = _parenthesised_with_dead_lines(ANN)
    assert evasive.count("_ = 0") == 5 and "scores = (query @" in evasive
    pairs, _ = _pairs({"ann": ANN, "cat": CAT, "eve": evasive})
    assert [(p.a, p.b) for p in pairs] == [("ann", "eve")]
    assert pairs[0].similarity == 1.0, pairs[0]


def test_encoded_code_is_decoded_compared_and_flagged():
    encoded = _encoded(ANN)
    assert "swapaxes" not in encoded
    pairs, _ = _pairs({"ann": ANN, "cat": CAT, "eve": encoded})
    assert [(p.a, p.b) for p in pairs] == [("ann", "eve")] and pairs[0].similarity > 0.9, pairs
    assert pairs[0].marks_b, "the exec line is marked: the decoded code is shared"
    flagged = dynamic_code({"attention": encoded})
    assert (
        len(flagged) == 1 and "exec(zlib.decompress(b64.b64decode(...)).decode())" in flagged[0]
    ), flagged
    assert "decoded without running it" in flagged[0] and "line 3" in flagged[0]
    built = (
        "# GRADED: attention\ncodes = [100, 101, 102]\n"
        "exec(''.join(chr(c) for c in codes))\nrun = getattr(__builtins__, 'eval')\n"
    )
    flagged = dynamic_code({"attention": built})
    assert len(flagged) == 2 and "not decodable without running it" in flagged[0], flagged
    assert "getattr(..., 'eval')" in flagged[1], flagged
    assert (
        dynamic_code({"attention": ANN, "model": "history = model.evaluate(x)\nre.compile('a')\n"})
        == []
    )


def test_called_functions_count_as_written_and_renamed_variables_do_not():
    """np.mean is not np.sum (the copydetect filter made every name 'V'); a renamed local
    variable is still the same variable."""
    mean = ANN.replace("weights.sum(axis=-1", "weights.mean(axis=-1")
    pairs, _ = similar_pairs({"ann": ANN, "mean": mean}, TEMPLATE, threshold=0.0)
    assert pairs[0].similarity < 1.0
    line = mean.index("weights.mean")
    assert not any(start <= line < end for start, end in pairs[0].marks_b), (
        "the differing line is not marked"
    )
    pairs, _ = similar_pairs({"ann": ANN, "bob": BOB}, TEMPLATE)
    assert pairs[0].similarity == 1.0


def test_a_partial_submission_inside_a_complete_one_is_not_100_percent():
    half = ANN.split("    weights =")[0] + "    raise NotImplementedError\n"
    pairs, _ = similar_pairs({"ann": ANN, "half": half}, TEMPLATE, threshold=0.0)
    assert (
        pairs[0].share_b > 0.9
        and pairs[0].share_a < 0.7
        and pairs[0].similarity == pairs[0].share_a
    )
    assert similar_pairs({"ann": ANN, "half": half}, TEMPLATE)[0] == []


_VARIANTS = [
    [
        "{d} = key.shape[-1]",
        "{d} = query.shape[-1]",
        "{d} = float(key.shape[-1])",
        "{d} = np.shape(key)[-1]",
    ],
    [
        "{s} = query @ np.swapaxes(key, -1, -2) / np.sqrt({d})",
        "{s} = np.matmul(query, np.swapaxes(key, -2, -1)) / np.sqrt({d})",
        "{s} = np.einsum('...qd,...kd->...qk', query, key) / {d} ** 0.5",
        "{s} = (query @ key.swapaxes(-1, -2)) * (1.0 / np.sqrt({d}))",
    ],
    [
        "if mask is not None:\n        {s} = np.where(mask, {s}, -1e9)",
        "if mask is not None:\n        {s} = {s} + (1.0 - mask) * -1e9",
        "{s} = np.where(mask, {s}, -np.inf) if mask is not None else {s}",
        "if mask is not None:\n        {s} = np.where(mask.astype(bool), {s}, -1e9)",
    ],
    [
        "{e} = np.exp({s} - {s}.max(axis=-1, keepdims=True))\n    {w} = {e} / {e}.sum(axis=-1, keepdims=True)",
        "{s} = {s} - np.max({s}, axis=-1, keepdims=True)\n    {w} = np.exp({s}) / np.sum(np.exp({s}), axis=-1, keepdims=True)",
        "{w} = np.exp({s} - np.amax({s}, -1, keepdims=True))\n    {w} /= {w}.sum(-1, keepdims=True)",
        "{e} = np.exp({s} - {s}.max(-1)[..., None])\n    {w} = {e} / {e}.sum(-1)[..., None]",
    ],
    [
        "return {w} @ value, {w}",
        "return np.matmul({w}, value), {w}",
        "{o} = np.einsum('...qk,...kd->...qd', {w}, value)\n    return {o}, {w}",
        "{o} = {w} @ value\n    return {o}, {w}",
    ],
]
_NAMES = {
    "d": ["d", "d_k", "dk", "depth"],
    "s": ["scores", "logits", "s", "att"],
    "e": ["e", "exps", "num", "z"],
    "w": ["weights", "alpha", "p", "probs"],
    "o": ["out", "output", "context", "result"],
}


def _honest_class(n, seed):
    """``n`` honest solutions to the attention piece: each student picks one way to write
    each of its five steps (no two the same five) and names of their own."""
    rng = random.Random(seed)
    combos = rng.sample(list(itertools.product(range(4), repeat=5)), n)
    codes = {}
    for i, combo in enumerate(combos):
        names = {k: rng.choice(v) for k, v in _NAMES.items()}
        body = "\n    ".join(
            _VARIANTS[step][choice].format(**names) for step, choice in enumerate(combo)
        )
        codes[f"student{i:02d}"] = (
            "# GRADED: attention\ndef attention(query, key, value, mask=None):\n"
            f'    """Scaled dot-product attention."""\n    {body}\n'
        )
    return codes


def test_a_near_copy_among_30_honest_solutions_comes_first():
    codes = _honest_class(30, seed=29)
    original = codes["student07"]
    copy = original
    for old, new in (
        ("scores", "sc"),
        ("logits", "lg"),
        ("weights", "wts"),
        ("alpha", "a_"),
        ("probs", "pr"),
        ("exps", "ex"),
        ("output", "res"),
        ("depth", "dep"),
        ("d_k", "dim"),
    ):
        copy = re.sub(rf"\b{old}\b", new, copy)
    copy = _parenthesised_with_dead_lines(copy).replace('"""Scaled', '"""My own scaled')
    codes["zed"] = copy
    hints = similarity_hints(codes, TEMPLATE)
    first = hints["pairs"][0]
    assert (first.a, first.b) == ("student07", "zed") and first.similarity >= 0.9, hints["pairs"][
        :3
    ]
    others = [p.similarity for p in hints["pairs"][1:]]
    assert all(s < first.similarity for s in others), hints["pairs"][:3]
    assert hints["compared"] == 31 and hints["found"] >= len(hints["pairs"])


def test_the_hints_are_the_same_in_every_process():
    """copydetect hashed with Python's hash(), which PYTHONHASHSEED randomises: the same
    gradebook listed a pair in four of six runs. Two processes with different seeds now
    give the same pairs, scores and marks."""
    script = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})\n"
        "from test_similarity import ANN, BOB, CAT, TEMPLATE, _encoded, _honest_class\n"
        "from lablib.grading.gradebook.similarity import similarity_hints\n"
        "codes = dict(_honest_class(30, seed=3), ann=ANN, bob=BOB, cat=CAT, eve=_encoded(ANN))\n"
        "hints = similarity_hints(codes, TEMPLATE, threshold=0.3)\n"
        "print(json.dumps([p.to_dict() for p in hints['pairs']] + [hints['found'], hints['common']]))\n"
    )
    outputs = []
    for seed in ("1", "2", "12345"):
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=300,
            env=dict(os.environ, PYTHONHASHSEED=seed),
        )
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    listed = json.loads(outputs[0])
    assert len(listed) > 5 and {"a": "ann", "b": "bob"}.items() <= listed[0].items(), listed[0]


def test_summary_states_the_cap_and_flags_dynamic_code(tmp_path):
    lab = LabSpec("lab7_sim", "Lab 7")
    lab.piece("attention", objects=["attention"])
    codes = dict(ann=ANN, bob=BOB, eve=_encoded(ANN), fay=_parenthesised_with_dead_lines(ANN))
    results = [
        SubmissionResult(
            n,
            str(tmp_path / f"{n}.ipynb"),
            Status(),
            1.0,
            1.0,
            {"attention": PieceScore(1.0, 1.0)},
            [],
            code={"attention": c},
        )
        for n, c in codes.items()
    ]
    hints = similarity_hints(
        {n: graded_code({"attention": c}) for n, c in codes.items()}, TEMPLATE, limit=2
    )
    assert hints["found"] == 6 and len(hints["pairs"]) == 2
    hints.update(identical=[], dynamic_code={"eve": dynamic_code({"attention": codes["eve"]})})
    report.write_reports(tmp_path / "out", lab, results, similarity=hints)
    page = (tmp_path / "out" / "summary.html").read_text()
    assert "Showing the 2 most similar of 6 pairs at 60% or more (at most 2 are listed)" in page
    assert (
        "Graded code that runs code given as data" in page
        and "eve: attention, line 3: exec(" in page
    )
    data = json.loads((tmp_path / "out" / "summary.json").read_text())["similarity"]
    assert data["found"] == 6 and data["cap"] == 2 and list(data["dynamic_code"]) == ["eve"]
    assert "deterministic" in data["method"]


def test_hostile_code_cannot_exhaust_the_grader():
    """The hints read hostile code in the grader's own process: decoding is bounded in
    size, steps and depth, and code that cannot be parsed is compared as text."""
    bomb = (
        "import zlib\nexec(zlib.decompress(" + repr(zlib.compress(b"x = 1\n" * 2_000_000)) + "))\n"
    )
    doubling = (
        "a0 = 'x'\n" + "".join(f"a{i + 1} = a{i} + a{i}\n" for i in range(60)) + "exec(a60)\n"
    )
    joined = "a = '" + "y" * 100_000 + "'\nexec(''.join([" + ", ".join(["a"] * 4000) + "]))\n"
    padded = "# " + "x" * 600_000 + "\nexec(code)\n"
    nested = "f = " + "lambda: " * 2000 + "0\n"
    codes = {
        "bomb": bomb,
        "doubling": doubling,
        "joined": joined,
        "padded": padded,
        "nested": nested,
        "magic": "%timeit f()\n!pip install x\n" + ANN,
    }
    started = time.monotonic()
    hints = similarity_hints(codes, TEMPLATE)
    flags = {name: dynamic_code({"p": code}) for name, code in codes.items()}
    assert time.monotonic() - started < 20
    for name in ("bomb", "doubling", "joined"):
        assert "not decodable without running it" in flags[name][0], flags[name]
    assert "more than the 500,000 the hints read" in flags["padded"][0]
    # too deep for the parser (it cannot run either) or for the inspection: said, never a crash
    assert all("could not be inspected" in f for f in flags["nested"]) and flags["magic"] == []
    assert hints["compared"] >= 5


# ---------------------------------------------------------------- decoding budget per submission


def _doubling_bomb(names, calls):
    """8.8 KB of source (at 400 names) whose decoding built 400 values of 921,600 characters
    each (388 MB) for every ``exec(c)``, also in code that never runs (``if False:``)."""
    lines = ['a0 = "' + "x" * 900 + '"'] + [f"a{i} = a{i - 1} + a{i - 1}" for i in range(1, 10)]
    lines += [f"b{i} = a9 + a9" for i in range(names)]
    lines.append("c = [" + ", ".join(f"b{i}" for i in range(names)) + "]")
    lines += ["exec(c)"] * calls + ["if False:"] + ["    exec(c)"] * calls
    return "\n".join(lines) + "\n"


def test_a_decoding_bomb_stops_within_the_submission_budget_and_is_said():
    """Each value was bounded, their total was not: 40 names of 921,600 characters took
    37 MB, 400 names 388 MB, for each of the calls. Now one budget per submission bounds
    what decoding builds, and the report says the calls were not decoded, and why."""
    bomb = _doubling_bomb(names=40, calls=20)
    tracemalloc.start()
    try:
        started = time.monotonic()
        flags = dynamic_code({"attention": bomb})
        hints = similarity_hints({"bomb": bomb, "ann": ANN, "bob": BOB}, TEMPLATE)
        elapsed = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * MAX_BUILT, f"{peak:,} bytes at the peak"
    assert elapsed < 3, elapsed
    assert len(flags) == 40, flags
    said = (
        "runs code given as data (exec); not decoded: too large to decode (the values built "
        "to decode it pass the 4,000,000 characters decoding may build per submission); "
        "decoding stopped for this submission"
    )
    assert all(said in f for f in flags), flags[:2]
    assert flags[0].startswith("attention, line 52: exec(c) runs"), flags[0]
    assert [(p.a, p.b) for p in hints["pairs"]] == [("ann", "bob")]


def test_many_dynamic_calls_are_decoded_up_to_the_cap_then_said():
    """Every exec folded its argument again from scratch: a value built once is now reused,
    and at most MAX_DYNAMIC_CALLS calls are decoded per submission, the rest said."""
    head = "part = 'x = 1' + chr(10)\nc = part + part\n"  # one value for both cells
    flags = dynamic_code({"attention": head + "exec(c)\n" * 150, "model": "exec(c)\n" * 300})
    decoded = [f for f in flags if "decoded without running it and compared" in f]
    assert len(decoded) == MAX_DYNAMIC_CALLS and flags[: len(decoded)] == decoded, flags[-1]
    assert decoded[0] == (
        "attention, line 3: exec(c) runs code given as data (exec); decoded without running "
        "it and compared in its place (2 lines)"
    )
    rest = flags[MAX_DYNAMIC_CALLS:-1]
    assert len(flags) == MAX_DYNAMIC_SENTENCES + 1, len(flags)  # 450 calls, the rest in one
    assert all(
        f.endswith(
            "not decoded: too many to decode (at most 50 calls that run code given as data are "
            "decoded per submission); decoding stopped for this submission"
        )
        for f in rest
    ), rest[0]
    assert MAX_DYNAMIC_SENTENCES == 60 and flags[-1] == (
        "390 more calls that run code given as data, not listed (at most 60 are): "
        "attention 90, model 300"
    )
    # the doubling bomb's values within the budget (3 names): built once for all its calls
    bomb = _doubling_bomb(names=3, calls=2000)
    started = time.monotonic()
    flags = dynamic_code({"attention": bomb})
    hints = similarity_hints({"bomb": bomb, "ann": ANN}, TEMPLATE)
    assert time.monotonic() - started < 3
    assert len(flags) == MAX_DYNAMIC_SENTENCES + 1 and hints["compared"] == 2
    assert all("not decodable without running it" in f for f in flags[:MAX_DYNAMIC_CALLS])
    assert all("too many to decode" in f for f in flags[MAX_DYNAMIC_CALLS:-1])
    assert flags[-1].startswith(f"{4000 - MAX_DYNAMIC_SENTENCES:,} more calls")


def test_long_blocks_and_statements_are_compared_in_bounded_time():
    """Two shapes without any dynamic code: dropping dead stores scanned the rest of the
    block for every assignment (3,000 assignments read at the end: quadratic), and marking
    the shared passages aligned a long statement that unparsing changes with difflib (a
    list of 400 ``((0))``, 2.8 KB: cubic, tens of seconds). Both are bounded now."""
    stores = "".join(f"v{i} = {i}\n" for i in range(3000))
    stores += "print(" + ", ".join(f"v{i}" for i in range(3000)) + ")\n"
    parens = "x = [" + ", ".join(["((0))"] * 400) + "]\nprint(x)\n"
    parens_copy = parens.replace("x", "y")
    started = time.monotonic()
    hints = similarity_hints({"stores": stores, "stores2": stores + "\n"}, TEMPLATE)
    pairs, _ = similar_pairs({"parens": parens, "copy": parens_copy}, TEMPLATE)
    assert time.monotonic() - started < 5
    assert hints["same_code"] == [["stores", "stores2"]] and hints["compared"] == 1
    assert [(p.a, p.b, p.similarity) for p in pairs] == [("copy", "parens", 1.0)]
    assert pairs[0].marks_a == ((0, len(parens_copy) - 1),), "the statements as a whole"


def test_dynamic_code_says_what_the_comparison_decoded():
    """The sentences decoded each cell on its own with the budget spent cell by cell, while
    the comparison decodes the graded code as one: a value built in one cell and run in
    another, and the budget spent in a different order. Now they describe the comparison's
    own decoding, call for call."""
    lines = ['s0 = "x = 1  # ' + "y" * 40 + '\\n"'] + [
        f"s{i} = s{i - 1} + s{i - 1}" for i in range(1, 15)
    ]
    cells = {"a": "\n".join(lines), "b": "exec(s14)\nexec(s14)", "c": "exec('z = 2')"}
    flags = dynamic_code(cells)
    too_large = (
        "not decoded: too large to decode (more than the 1,000,000 characters of code decoded "
        "per submission); decoding stopped for this submission"
    )
    assert flags == [
        "b, line 1: exec(s14) runs code given as data (exec); decoded without running it and "
        "compared in its place (16384 lines)",
        f"b, line 2: exec(s14) runs code given as data (exec); {too_large}",
        f"c, line 1: exec('z = 2') runs code given as data (exec); {too_large}",
    ], flags
    hints = similarity_hints({"eve": graded_code(cells), "ann": ANN}, TEMPLATE)
    assert hints["compared"] == 2
    # a call inside decoded code is said where the student's code runs it
    inner = "y = 1\nexec('import os')\n"
    assert dynamic_code({"a": "x = 0\n\n\nexec(" + repr(inner) + ")"})[0] == (
        "a, line 4, in the code it decodes: exec('import os') runs code given as data (exec); "
        "decoded without running it and compared in its place (1 line)"
    )
    # past the first MAX_CODE characters of graded code the comparison reads nothing
    pad = "# " + "y" * 299_990
    flags = dynamic_code(
        {"a": "exec('x = 1')\n" + pad, "b": pad + "\nexec('y = 2')", "c": "eval('3')"}
    )
    unread = (
        "not decoded: past the first 500,000 characters of graded code, which is all the hints read"
    )
    assert flags == [
        "a, line 1: exec('x = 1') runs code given as data (exec); decoded without running it "
        "and compared in its place (1 line)",
        "b: the graded code runs to 600,026 characters, more than the 500,000 the hints read: "
        "this cell is compared by its first 199,992 characters only",
        f"b, line 2: exec('y = 2') runs code given as data (exec); {unread}",
        "c: past the first 500,000 characters of graded code the hints read: not compared",
        f"c, line 1: eval('3') runs code given as data (eval); {unread}",
    ], flags
    # a cell past the cut is said not compared also when it does not parse
    flags = dynamic_code({"a": pad, "b": pad, "c": "def f(:\n    pass"})
    assert flags[-1] == (
        "c: past the first 500,000 characters of graded code the hints read: not compared"
    ), flags


def test_dynamic_code_reads_magics_and_says_what_it_cannot_parse():
    """A cell with a magic or shell line was skipped, so ``%time x = 1`` above an exec hid it
    from the sentences while the comparison decoded it; a cell that does not parse makes the
    comparison read the whole code as text, which the sentences now say."""
    assert dynamic_code({"c": "%time x = 1\n!ls\nexec('import os')"}) == [
        "c, line 3: exec('import os') runs code given as data (exec); decoded without running "
        "it and compared in its place (1 line)"
    ]
    flags = dynamic_code({"a": "exec('x = 1')", "b": "def f(:\n    ｅｘｅｃ(s)", "c": "y = 2"})
    assert flags == [
        "a, line 1: exec('x = 1') runs code given as data (exec); not decoded: the graded code "
        "does not parse as Python, so it is compared as text",
        "b: could not be inspected for code run as data (it does not parse as Python: line 1, "
        "invalid syntax); compared as text",
    ], flags
    # a syntax error in honest work names no way to run code: nothing to flag (a Keras
    # model's compile, json.loads are not exec's compile, pickle's loads)
    for broken in ("def f(:\n    pass", "model.compile(optimizer='adam'", "json.loads(s"):
        assert dynamic_code({"a": ANN, "b": broken, "c": "y = 2"}) == [], broken
    flags = dynamic_code({"a": ANN, "b": "x = pickle.loads(s"})
    assert flags and flags[0].startswith("b: could not be inspected"), flags
    assert dynamic_code({"a": ANN, "b": "%timeit f()\n!pip install x\ny = 2"}) == []


# ---------------------------------------------------------------- aliases of the ways to run code


def test_aliases_of_the_ways_to_run_code_are_flagged_and_decoded():
    """``e = exec; e(s)`` ran code given as data unseen: only a call by exec's own name
    (or an import's) was flagged and decoded. A name bound to a way to run code, by
    assignment, import or ``getattr`` of builtins, is now followed, a few links deep."""
    decoded = "decoded without running it and compared in its place (1 line)"
    cases = {
        "e = exec\ne('x = 1')": ["p, line 2: e('x = 1') runs code given as data (exec)"],
        "run = eval\ny = run('1 + 2')": ["p, line 2: run('1 + 2') runs code given as data (eval)"],
        "from builtins import exec as run\nrun('x = 1')": ["line 2: run('x = 1') runs"],
        "import builtins as b\nb.exec('x = 1')": ["line 2: b.exec('x = 1') runs"],
        "import builtins\nf = getattr(builtins, 'exec')\nf('x = 1')": [
            "line 2: getattr(builtins, 'exec') runs code given as data (getattr(..., 'exec')); "
            "not decodable without running it",
            "line 3: f('x = 1') runs code given as data (builtins.exec)",
        ],
        "f = getattr(__builtins__, 'exec')\nf('x = 1')": [
            "line 1: getattr(__builtins__, 'exec') runs",
            "line 2: f('x = 1') runs code given as data (builtins.exec)",
        ],
        "import builtins\ngetattr(builtins, 'exec')('x = 1')": [
            "line 2: getattr(builtins, 'exec')('x = 1') runs code given as data (builtins.exec)"
        ],
        "__builtins__.exec('x = 1')": ["line 1: __builtins__.exec('x = 1') runs"],
        "__builtins__['exec']('x = 1')": ["(builtins.exec)"],
        "import builtins\nvars(builtins)['exec']('x = 1')": ["(builtins.exec)"],
        "f = e\ne = exec\ng = f\ng('x = 1')": ["line 4: g('x = 1') runs code given as data (exec)"],
        "x, run = 0, exec\nrun('x = 1')": ["line 2: run('x = 1') runs"],
        # an exception or a loop variable of the same name hides nothing
        "e = exec\ntry:\n    pass\nexcept Exception as e:\n    pass\nfor e in []:\n    pass\n"
        "e('x = 1')": ["line 8: e('x = 1') runs code given as data (exec)"],
    }
    for code, said in cases.items():
        flags = dynamic_code({"p": code})
        assert len(flags) == len(said), (code, flags)
        for flag, part in zip(flags, said):
            assert part in flag and (flag.endswith(decoded) or "getattr(...," in flag), (code, flag)

    # every link of a chain, in any order, in time bounded by the code's size: ten times the
    # links take about ten times as long (a ratio, so that a busy machine does not matter)
    def chain(links):
        code = "".join(f"a{i} = a{i + 1}\n" for i in range(links))
        code += f"a{links} = exec\na0('x = 1')\n"
        code += "print(a0)\n"  # the names stay read: none of the assignments is dropped
        return code

    def timed(code):
        started = time.monotonic()
        flags = dynamic_code({"p": code})
        return time.monotonic() - started, flags

    small = min(timed(chain(500) + f"# {k}\n")[0] for k in range(2))
    elapsed, flags = timed(chain(5000))
    assert elapsed < 40 * max(small, 0.01) + 0.5, (elapsed, small)
    assert flags == ["p, line 5002: a0('x = 1') runs code given as data (exec); " + decoded]
    # a decoder bound to a name is followed too: the code it decodes is compared
    assert dynamic_code({"p": "import base64\nd = base64.b64decode\nexec(d('eCA9IDE='))"}) == [
        "p, line 3: exec(d('eCA9IDE=')) runs code given as data (exec); " + decoded
    ]
    # code run through an alias is compared in its place, as through exec itself
    hidden = _encoded(ANN).replace("exec(", "run = exec\nrun(")
    assert "swapaxes" not in hidden
    pairs, _ = _pairs({"ann": ANN, "cat": CAT, "eve": hidden})
    assert [(p.a, p.b) for p in pairs] == [("ann", "eve")] and pairs[0].similarity > 0.9, pairs


def test_honest_names_that_look_like_the_ways_to_run_code_are_not_flagged():
    """Only a name bound to a way to run code is followed: a model's ``fit`` or
    ``compile``, ``json.loads`` kept in a name, an exception named ``e``, are not."""
    honest = (
        "import json\nloads = json.loads\nrun = model.fit\ncompile_model = model.compile\n"
        "fit = getattr(model, 'fit')\nevaluate = model.evaluate\ne = None\n"
        "try:\n    run(x, y)\n    fit(x, y)\nexcept ValueError as e:\n    print(e)\n"
        "data = loads(s)\ncompile_model(optimizer='adam')\nscore = evaluate(x)\n"
        "pattern = re.compile('a')\nc = pattern\nc.match('a')\n"
    )
    assert dynamic_code({"a": ANN, "b": honest}) == []
    # a name given str, a decoder or re's compile, a loop or a default of harmless functions
    others = (
        "t = str\nv = t(3)\nfrom re import compile\npat = compile('a')\n"
        "for f in (str, repr):\n    f(1)\ndef g(x, cast=str):\n    return cast(x)\n"
        "run = model.fit if a else model.evaluate\nrun(x)\n"
        "import base64\nd = base64.b64decode\ndata = d(s)\n"
    )
    assert dynamic_code({"a": ANN, "b": others}) == []


def test_each_submission_is_analysed_once_for_the_hints_and_the_sentences(monkeypatch):
    """The sentences analysed each submission a second time after the comparison had (the
    4,000-call submission's decoding twice over): the comparison's analysis is now kept
    and read again, so grading a class parses each submission's graded code once."""
    from lablib.grading.gradebook import similarity

    parsed: dict[str, int] = {}
    parse = similarity._parse

    def counted(code):
        parsed[code] = parsed.get(code, 0) + 1
        return parse(code)

    monkeypatch.setattr(similarity, "_parse", counted)
    tag = "# analysed once\n"  # code no earlier test analysed
    cells = {
        "ann": {"attention": tag + ANN},
        "bob": {"attention": tag + BOB},
        "eve": {"attention": tag + _doubling_bomb(names=3, calls=2000)},
    }
    hints = similarity_hints({n: graded_code(c) for n, c in cells.items()}, TEMPLATE)
    flags = {n: dynamic_code(c) for n, c in cells.items()}
    assert hints["compared"] == 3 and len(flags["eve"]) == MAX_DYNAMIC_SENTENCES + 1
    assert flags["ann"] == flags["bob"] == []
    assert {code: n for code, n in parsed.items() if code != TEMPLATE} == {
        graded_code(c): 1 for c in cells.values()
    }, sorted(parsed.values())


def test_every_binding_of_a_name_counts_wherever_it_is_called():
    """A name's first binding to a decoder, a module or getattr hid a later one to exec
    (``e = str`` then ``e = exec``: ``e(s)`` was not flagged). Every binding counts now,
    wherever it is and in any order: a name given a way to run code anywhere is one
    wherever it is called, also when it is given other things elsewhere, and so are loop
    variables over a literal, parameters' defaults and either branch of a choice."""
    decoded = "decoded without running it and compared in its place (1 line)"
    undecoded = "not decodable without running it"
    cases = {
        "e = str\ne = exec\ne('x = 1')": "line 3: e('x = 1') runs code given as data (exec); "
        + decoded,
        "import builtins\nb = builtins\nb = exec\nb('x = 1')": "line 4: b('x = 1') runs code "
        "given as data (exec); " + decoded,
        "import builtins\nb = exec\nb = builtins\nb.eval('1')": "(builtins.eval); " + decoded,
        "e = getattr\ne = exec\ne('x = 1')": "line 3: e('x = 1') runs code given as data (exec)",
        "import base64\nd = base64.b64decode\nd = exec\nd('x = 1')": "line 4: d('x = 1') runs",
        "e = chr\ndef f():\n    e = exec\n    e('x = 1')\n": "line 4: e('x = 1') runs code "
        "given as data (exec); " + decoded,
        "def f():\n    e('x = 1')\ne = chr\ne = exec": "line 2: e('x = 1') runs",
        "import base64 as b\nb = exec\nb('x = 1')": "line 3: b('x = 1') runs",
        "from builtins import exec as run\nrun = chr\nrun('x = 1')": "(builtins.exec)",
        "exec = chr\nexec('x = 1')": "line 2: exec('x = 1') runs code given as data (exec)",
        "f = v(b)['exec']\nf('x = 1')\nv = vars\nimport builtins as b": "line 2: f('x = 1') "
        "runs code given as data (builtins.exec); " + decoded,
        "a, (b, run) = 0, (1, exec)\nrun('x = 1')": "line 2: run('x = 1') runs",
        "for run in (print, exec):\n    run('x = 1')": "line 2: run('x = 1') runs",
        "[run('x = 1') for run in [exec]]": "line 1: run('x = 1') runs",
        "def f(s, run=exec):\n    run(s)": "line 2: run(s) runs code given as data (exec); "
        + undecoded,
        "g = lambda s, *, run=eval: run(s)": "(eval); " + undecoded,
        "run = print if x else exec\nrun('x = 1')": "line 2: run('x = 1') runs",
        "run = x or exec\nrun('x = 1')": "line 2: run('x = 1') runs",
    }
    for code, said in cases.items():
        flags = dynamic_code({"p": code})
        assert len(flags) == 1 and said in flags[0], (code, flags)
    # a name that may be chr or exec has no known value: its call is flagged, not decoded
    assert dynamic_code({"p": "d = chr\nd = exec\nexec(d(120))"}) == [
        f"p, line 3: d(120) runs code given as data (exec); {undecoded}",
        f"p, line 3: exec(d(120)) runs code given as data (exec); {undecoded}",
    ]
    # a name given more than MAX_MEANINGS of them may be any: kept bounded, and flagged
    many = "e = chr\n" + "".join(
        f"e = base64.{n}\n"
        for n in ("b64decode", "b32decode", "b16decode", "b85decode", "a85decode")
        + ("decodebytes", "standard_b64decode", "urlsafe_b64decode")
    )
    flags = dynamic_code({"p": many + "f = e\nf('x = 1')\n"})
    assert flags == [
        "p, line 11: f('x = 1') runs code given as data (any of them: a name given more than 8 "
        f"ways to run code, decoders or their modules); {undecoded}"
    ], flags
    # code run through such a name is compared in its place, as through exec itself
    hidden = _encoded(ANN).replace("exec(", "run = str\nrun = exec\nrun(")
    pairs, _ = _pairs({"ann": ANN, "cat": CAT, "eve": hidden})
    assert [(p.a, p.b) for p in pairs] == [("ann", "eve")] and pairs[0].similarity > 0.9, pairs


def test_a_long_chained_assignment_is_read_in_time_linear_in_its_size(monkeypatch):
    """``a0 = a1 = ... = a9000 = x.y.y...y`` (900 attributes, 55 KB) read the value once per
    name, twice over (the comparison's alias map, then the sentences' own): 8 to 12 s where
    honest code of a tenth of its size takes 0.1 s. Each value is read once now, and the
    sentences reuse the comparison's map: within a few times the honest code's time."""
    from lablib.grading.gradebook import similarity

    tag = f"# linear {time.monotonic()}\n"  # code no earlier run analysed
    honest = tag + "\n".join([ANN, BOB, CAT] * 4)
    hostile = tag + "".join(f"a{i} = " for i in range(9000)) + "x" + ".y" * 900 + "\n"
    assert len(hostile) > 10 * len(honest) > 45_000
    started = time.monotonic()
    dynamic_code({"a": honest})
    baseline = time.monotonic() - started
    started = time.monotonic()
    dynamic_code({"a": hostile})
    elapsed = time.monotonic() - started
    assert elapsed < 30 * baseline + 0.2, (elapsed, baseline)
    # where the code parses but cannot be normalised, the cells are inspected one by one
    # with the alias map the comparison made, not a second one
    made = []
    aliases = similarity._aliases
    monkeypatch.setattr(similarity, "_aliases", lambda *a: made.append(1) or aliases(*a))
    monkeypatch.setattr(similarity, "_drop_dead", lambda tree: 1 / 0)
    flags = dynamic_code({"a": tag + "e = str\ne = exec\ne(s)"})
    assert flags == [
        "a, line 4: e(s) runs code given as data (exec); not decoded: the graded code "
        "could not be normalised (ZeroDivisionError), so it is compared as text"
    ], flags
    assert len(made) == 1, "one alias map for the comparison and the sentences"


def _deep_size(obj) -> int:
    """The bytes of every object reachable from ``obj`` (types, modules and functions
    aside), each counted once."""
    seen, todo, total = set(), [obj], 0
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        todo += gc.get_referents(obj)
    return total


def test_the_kept_analyses_are_bounded_by_what_they_hold(monkeypatch):
    """The kept analyses were bounded by the characters of code they read, while a few
    hundred characters can decode to a million, each of its tokens kept: 12 submissions of
    172 characters (500 lines decoded) held 1.7 MB where the bound was 1 MiB. The bound
    counts what an analysis holds now (its tokens and spans, decoded code included)."""
    from lablib.grading.gradebook import similarity

    def inflated(i):
        inner = f"print(name_{i} + 123456)\n" * 500
        payload = base64.b64encode(zlib.compress(inner.encode(), 9)).decode()
        return f"import base64, zlib\nexec(zlib.decompress(base64.b64decode({payload!r})))\n"

    bound = 2**20  # set on the previous code too, which counted characters (5,000,000)
    monkeypatch.setattr(similarity, "MAX_KEPT_BYTES", bound, raising=False)
    similarity._KEPT.clear()
    for i in range(12):
        flags = dynamic_code({"a": inflated(i)})
        assert "compared in its place (500 lines)" in flags[0], flags
    dynamic_code({"a": ANN})
    held = _deep_size(similarity._KEPT.items)
    similarity._KEPT.clear()
    assert 0 < held <= bound, f"{held:,} bytes kept"


def _canvas_row(tmp_path, name, user_id, code, score):
    """A graded row of a Canvas download (no notebook run): its user id is its student."""
    return SubmissionResult(
        name,
        str(tmp_path / f"{name}.ipynb"),
        Status(),
        score,
        1.0,
        {"attention": PieceScore(score, 1.0)},
        [],
        code={"attention": code},
        identity={"key": user_id, "matched": False, "lms": {"lms": "canvas", "user_id": user_id}},
    )


def test_one_students_extra_rows_neither_hide_a_pair_nor_weigh_in_the_headline(tmp_path):
    """Red team: mallory handed in bob's code and four more attachments of it (other
    comments). Counted per row, the 11 rows made bob's code 'common' (6 of 11): no pair
    listed, and the headline averaged 11 rows for 7 students. A student counts once."""
    honest = _honest_class(5, seed=11)
    codes = dict(zip(["alice", "carol", "dave", "erin", "frank"], honest.values()))
    codes["bob"] = CAT
    codes["mallory"] = CAT.replace("    out = []", "    # my own loop\n    out = []")
    for k in range(2, 6):
        codes[f"mallory-{k}"] = CAT.replace("    w = ", f"    # attempt {k}\n    w = ")
    people = {name: str(1000 + i) for i, name in enumerate(sorted(codes)) if "-" not in name}
    results = [
        _canvas_row(
            tmp_path,
            name,
            people[name.split("-")[0]],
            code,
            1.0 if name == "mallory" else 0.0 if "-" in name else 0.5,
        )
        for name, code in codes.items()
    ]
    hints = similarity_hints(
        {r.submission: graded_code(r.code) for r in results},
        TEMPLATE,
        owners={r.submission: owner_of(r) for r in results},
    )
    listed = {(p.a, p.b) for p in hints["pairs"]}
    assert ("bob", "mallory") in listed and hints["common"] == 0, (listed, hints["common"])
    own = [p for p in listed if all(n.startswith("mallory") for n in p)]
    assert not own, "mallory's own rows are no pair of two students"
    assert ["mallory", "mallory-2"] in hints["same_student"]
    lab = LabSpec("lab7_sim", "Lab 7")
    lab.piece("attention", objects=["attention"])
    hints.update(identical=[])
    report.write_reports(tmp_path / "out", lab, results, similarity=hints)
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert data["submissions"] == 11 and data["students"] == 7
    assert data["total"]["mean"] == round((6 * 0.5 + 1.0) / 7, 3), "each student's best row"
    assert data["several_rows"] == [
        {
            "student": people["mallory"],
            "rows": 5,
            "best": "mallory",
            "submissions": ["mallory", *(f"mallory-{k}" for k in range(2, 6))],
        }
    ]
    assert ("bob", "mallory") in {(p["a"], p["b"]) for p in data["similarity"]["pairs"]}
    page = (tmp_path / "out" / "summary.html").read_text()
    assert "from <b>7</b>\nstudents" in page and "5 notebooks, the best counted" in page
    assert "No pair shares" not in page


def test_code_run_through_a_timing_magic_is_compared_and_flagged():
    """The grader runs `%time stmt` and `%timeit -n 3 stmt` (and %%timeit's set-up): code
    given to exec through them is compared and flagged as code given as data, not blanked
    away with the magic lines."""
    source = ANN.split("\n", 1)[1]
    for magic in ("%time", "%timeit -n 3 -r 1"):
        hidden = f"# GRADED: attention\n{magic} exec({source!r})\n"
        pairs, _ = _pairs({"ann": ANN, "cat": CAT, "eve": hidden})
        assert [(p.a, p.b) for p in pairs] == [("ann", "eve")], (magic, pairs)
        flagged = dynamic_code({"attention": hidden})
        assert len(flagged) == 1 and "exec(" in flagged[0], (magic, flagged)


def test_a_help_request_or_a_shell_value_does_not_take_a_copy_out_of_the_comparison():
    """``np.mean?`` or ``_u = !true`` appended to a copied cell made the whole code
    unparsable, compared as raw text, and the copy was never paired with its original:
    the grader runs such lines as nothing, and the comparison now blanks them as it
    blanks ``!ls``."""
    for line in ("np.mean?", "?np.mean", "np.mean??", "_unused = !true", "_who = %who_ls"):
        copied = BOB + line + "\n"
        pairs, _ = _pairs({"ann": ANN, "cat": CAT, "pia": copied})
        assert [(p.a, p.b) for p in pairs] == [("ann", "pia")], (line, pairs)
        assert pairs[0].similarity > 0.8, (line, pairs[0].similarity)


def test_the_marks_fall_on_the_shared_code_whatever_breaks_a_comment_holds():
    """``str.splitlines`` breaks lines at U+2028, form feeds and ``\\x1c``, which Python's
    own line numbers do not: a comment of them moved every mark of the copy onto stray
    characters of its signature, and off the code it shares."""
    hiding = BOB.replace(
        "# GRADED: attention\n", "# GRADED: attention\n# note" + "\u2028" * 25 + "\x1c" * 5 + "\n"
    )
    honest_pairs, _ = _pairs({"ann": ANN, "cat": CAT, "bob": BOB})
    pairs, _ = _pairs({"ann": ANN, "cat": CAT, "bob": hiding})
    assert [(p.a, p.b) for p in pairs] == [("ann", "bob")]

    def marked(code, marks):
        return "".join(code[start:end] for start, end in marks)

    assert marked(hiding, pairs[0].marks_b) == marked(BOB, honest_pairs[0].marks_b)
    assert "return alpha @ value, alpha" in marked(hiding, pairs[0].marks_b)
