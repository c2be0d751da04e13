"""Similarity hints: near-identical graded code is paired, the template never counts."""

from __future__ import annotations

import json

from lablib.grading import report
from lablib.grading.results import PieceScore, Status, SubmissionResult
from lablib.grading.similarity import graded_code, identical_files, similar_pairs
from lablib.grading.spec import LabSpec

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
BOB = ANN.replace("scores", "logits").replace("weights", "alpha").replace(
    "    if mask", "    # mask out the padding\n    if mask")
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
    pairs, groups = _pairs({"ann": ANN, "eve": ANN + "\n\n", "fay": ANN, "cat": CAT,
                            "dan": TEMPLATE, "gus": TEMPLATE})
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
    results = [SubmissionResult(n, str(tmp_path / f"{n}.ipynb"), Status(), 1.0, 1.0,
                                {"attention": PieceScore(1.0, 1.0)}, [], code={"attention": c}) for n, c in codes.items()]
    pairs, groups = similar_pairs({r.submission: graded_code(r.code) for r in results}, TEMPLATE)
    report.write_reports(tmp_path / "out", lab, results,
                         similarity={"pairs": pairs, "same_code": groups, "identical": []})
    page = (tmp_path / "out" / "summary.html").read_text()
    assert "Similar code (hints, not verdicts)" in page and "<mark>" in page and "ann and bob" in page
    data = json.loads((tmp_path / "out" / "summary.json").read_text())["similarity"]
    assert [(p["a"], p["b"]) for p in data["pairs"]] == [("ann", "bob")] and "code_a" not in data["pairs"][0]
