"""How a lab's tests are written: graded pieces, probes and judges.

Every test has two halves that run in different processes:

* the **probe** runs where the student's code lives (the sandboxed student process
  when grading, the notebook itself for ``lablib.check``). It receives ``ns``, a
  mapping from the names the graded cell defines to the student's objects, calls them
  on the test's inputs and returns *plain values*: numbers, strings, booleans, None,
  NumPy arrays (tensors are converted), and lists/tuples/dicts of these.
* the **judge** runs in the grading process on those plain values and raises
  :class:`TestFailure` (or ``AssertionError``) with a message when they are wrong.
  Expected values are computed here, never in the student's process, so a submission
  that patches NumPy or returns objects whose ``==`` is always true gains nothing.

A lab's public tests live in ``lablib/grading/specs/<lab name>.py`` (the lab itself is
declared in the registry, :mod:`lablib.labs`); hidden tests are modules of the same form
in a folder the instructor passes with ``--tests``. :func:`load_lab` imports those under
the module namespace ``lablib_hidden_tests``, and a test whose probe is defined in such a
module is hidden (or any test declared with ``hidden=True``): no switch is flipped while
importing. Example::

    from lablib.grading.spec import get_lab, expect_close

    lab = get_lab("lab1_attention")
    lab.piece("attention", objects=["attention"], description="scaled dot-product attention")

    @lab.test("attention", points=2, hint="Scale the scores by 1/sqrt(d_k).")
    def worked_example(ns):
        out, weights = ns["attention"](Q, K, V)
        return {"weights": weights, "output": out}

    @worked_example.judge
    def _(got):
        expect_close(got["weights"][0], [0.00055, 0.99911, 0.00033], atol=5e-5,
                     what="attention weights of the first query")

A test without a judge compares with ``expected=`` (a value or a zero-argument
callable evaluated in the grading process) using ``rtol``/``atol``.

A judge that builds or runs something the submission described (a Keras model rebuilt
from its architecture and weights) calls :func:`sandbox_only` first. When the grader
judges (:func:`judging_in_grader`), that raises :class:`NeedsSandbox`, and the grader
runs the judge again in a sandboxed process with the submission's limits (memory,
time, no network), never in its own; ``lablib.check`` in a notebook and direct calls
of :meth:`Test.run_judge` run it where they are.

The API is defined in :mod:`lablib.grading.labspec` (``model``: what a test is;
``registry``: where a lab's tests come from) and imported from here.
"""

from lablib.grading.expect import Mistake, TestFailure, diagnose, expect
from lablib.grading.expect import expect_close, expect_equal, expect_shape
from lablib.grading.run.protocol import to_plain
from lablib.grading.labspec.model import ANSWER_ID_RE, HIDDEN_NAMESPACE, LabSpec, NeedsSandbox
from lablib.grading.labspec.model import Piece, RubricItem, Test, WrittenQuestion
from lablib.grading.labspec.model import judging_in_grader, sandbox_only
from lablib.grading.labspec.registry import PUBLIC_TESTS_DIR, get_lab, known_labs, load_lab
from lablib.grading.labspec.registry import load_spec, loaded_spec, resolve_lab_name, spec_of

__all__ = [
    "LabSpec", "Piece", "WrittenQuestion", "RubricItem", "ANSWER_ID_RE", "Test",
    "HIDDEN_NAMESPACE", "NeedsSandbox", "sandbox_only", "judging_in_grader",
    "PUBLIC_TESTS_DIR", "get_lab", "known_labs", "load_lab", "load_spec", "loaded_spec",
    "spec_of", "resolve_lab_name", "Mistake", "TestFailure", "diagnose", "expect",
    "expect_close", "expect_equal", "expect_shape", "to_plain",
]  # fmt: skip
