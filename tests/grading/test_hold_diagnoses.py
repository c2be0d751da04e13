"""A diagnosis holds for the whole piece (issue 31): once one test of a piece names the
student's mistake, the piece's other failures do not print hints about other mistakes."""

import json
import pathlib

import numpy as np

import lablib
from lablib.grading.judge.tests import hold_diagnoses
from lablib.grading.results import Kind, TestResult

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _result(
    piece, name, passed=False, mistake=False, hint="a hint about something else", kind=Kind.FAILED
):
    return TestResult(
        f"{piece}::{name}",
        piece,
        name,
        1.0 if passed else 0.0,
        1.0,
        passed,
        False,
        "" if passed else f"{name} failed",
        "" if mistake else hint,
        kind,
        mistake=mistake,
    )


def test_a_named_mistake_replaces_the_other_failures_hints_in_its_piece_only():
    results = [
        _result("attention", "masked"),
        _result("attention", "worked", mistake=True),
        _result("attention", "shapes", passed=True),
        _result("attention", "safe", kind=Kind.ERROR),
        _result("masks", "padding"),
        _result("attention", "other", mistake=True),
    ]
    hold_diagnoses(results)
    masked, worked, shapes, safe, padding, other = results
    assert masked.hint == "" and "the mistake named in worked may be why" in masked.message
    assert safe.hint == "" and "named in worked" in safe.message
    assert (
        worked.message == "worked failed" and other.message == "other failed"
    )  # their own diagnoses
    assert shapes.passed and shapes.hint == "a hint about something else"
    assert padding.hint == "a hint about something else" and "named in" not in padding.message


def test_lablib_check_and_the_grader_hold_a_diagnosis(monkeypatch):
    """Wiring: lablib.check applies hold_diagnoses to a piece's results (here the first
    test's failure is made a named mistake; the real diagnoses are the corpus' job, and
    the mutation benchmark measures how many mistakes they name), and so does the
    grader's judge_submission (its source calls it after the stubs' reason)."""
    import inspect

    from lablib.grading import check as check_module
    from lablib.grading.judge import submission

    real = check_module.judge_test
    calls = []

    def judged(test, raw):
        result = real(test, raw)
        calls.append(result)
        if len(calls) == 1:
            result.passed, result.score, result.mistake, result.hint = False, 0.0, True, ""
            result.message, result.kind = (
                "The scores are not scaled (a named mistake).",
                Kind.FAILED,
            )
        elif len(calls) == 2:
            result.passed, result.score, result.message, result.kind = (
                False,
                0.0,
                "2 of 3 entries differ",
                Kind.FAILED,
            )
            result.hint = "Where the mask is False the weight must be exactly 0"
        return result

    monkeypatch.setattr(check_module, "judge_test", judged)
    notebook = json.loads((ROOT / "solutions" / "lab1_attention.ipynb").read_text())
    source = next(
        "".join(c["source"])
        for c in notebook["cells"]
        if "".join(c["source"]).startswith("# GRADED: attention")
    )
    namespace = {"np": np}
    exec(compile(source, "<graded attention>", "exec"), namespace)
    result = lablib.check("lab1", "attention", namespace["attention"], quiet=True)
    first, second = result.results[:2]
    assert first.mistake and second.hint == "" and f"named in {first.name}" in second.message
    assert "mask is False" not in result.summary()
    assert "hold_diagnoses(results)" in inspect.getsource(submission.judge_submission)
