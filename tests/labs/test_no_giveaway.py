"""No check gives away a written answer (issue 31): Lab 2's `find_error` asks what is
wrong in the lecture's positional-encoding formula; its answer (the exponent's 2i with
i = floor(j/2), the pair of columns sharing one frequency) must appear in no message a
public check can print, before the question is asked."""

import ast
import pathlib
import re

import numpy as np

from lablib.grading.specs import _positional_checks

SPECS = pathlib.Path(_positional_checks.__file__).parent
ANSWER = re.compile(
    r"floor\s*\(\s*j\s*/\s*2\s*\)|share[sd]? (one|the same|its) frequenc"
    r"|shares the frequency|2j\s*/\s*d_model",
    re.IGNORECASE,
)


def test_the_positional_diagnoses_name_the_place_not_the_answer():
    for length, depth in [(2, 4), (50, 16), (7, 5)]:
        for _, sentence in _positional_checks.encoding_mistakes(length, depth):
            assert not ANSWER.search(sentence), sentence
    slide = _positional_checks.encoding_mistakes(2, 4)[0]
    assert "slide" in slide[1] and np.asarray(slide[0]).shape == (2, 4)


def _message_strings(path):
    """The string constants of a spec module that a check can print: all but the rubrics
    of the written answers (``lab.answer(...)``, read by graders) and docstrings."""
    tree = ast.parse(path.read_text())
    hidden = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "answer":
            hidden.update(id(n) for n in ast.walk(node))
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(
            node
        ):
            hidden.add(id(node.body[0].value))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in hidden
        ):
            yield node.lineno, node.value


def test_no_check_message_states_the_answer():
    for path in sorted(SPECS.glob("*.py")):
        for number, text in _message_strings(path):
            assert not ANSWER.search(text), f"{path.name}:{number}: {text}"
