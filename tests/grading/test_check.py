"""lablib.check: public checks inside the notebook."""

import numpy as np
import pytest

import lablib
from grading_paths import FIXTURE_SOLUTION, course_copy, run_python
from notebook_helpers import exec_lab_cells


@pytest.fixture()
def solution_ns(fixture_lab):
    return exec_lab_cells(FIXTURE_SOLUTION)


def test_check_passes_solution_and_never_claims_all_passed(fixture_lab, solution_ns, capsys):
    result = lablib.check("lab0_fixture", "softmax", solution_ns["softmax"])
    out = capsys.readouterr().out
    assert result.passed and result.score == result.max_score == 2
    assert "public checks passed; more tests run at grading" in out.lower()
    assert "all checks passed" not in out.lower()
    assert len(result.results) == 1  # the hidden test is not run in the notebook


def test_a_check_cell_shows_its_report_once(fixture_lab, solution_ns, capsys):
    """Jupyter displays the cell's value (the CheckResult) after check() printed the
    report; IPython's display machinery must show nothing more then, and the report
    again when the result is displayed on its own later."""
    from IPython.core.formatters import DisplayFormatter

    formatter = DisplayFormatter()
    result = lablib.check("lab0_fixture", "softmax", solution_ns["softmax"])
    printed = capsys.readouterr().out
    assert printed.count("public checks") == 1
    assert formatter.format(result) == ({}, {})  # handled by _ipython_display_: no repr
    assert capsys.readouterr().out == ""
    formatter.format(result)
    assert capsys.readouterr().out.strip() == result.summary()
    assert "CheckResult(" not in printed
    quiet = lablib.check("lab0_fixture", "softmax", solution_ns["softmax"], quiet=True)
    assert capsys.readouterr().out == ""
    formatter.format(quiet)
    assert capsys.readouterr().out.strip() == quiet.summary()


def test_check_reports_wrong_values_with_expected_got_and_hint(fixture_lab, capsys):
    result = lablib.check("lab0_fixture", "normalize", normalize=lambda x: x)
    out = capsys.readouterr().out
    assert not result.passed and result.score == 0
    assert "FAIL" in out and "expected" in out and "got" in out and "hint: Divide each row" in out


def test_check_reports_exceptions_instead_of_raising(fixture_lab, capsys):
    def broken(x):
        raise NotImplementedError("write me")

    class Bad:
        def update(self, x):
            raise ZeroDivisionError("oops")

    assert not lablib.check("lab0_fixture", "softmax", broken).passed
    assert "not implemented yet" in capsys.readouterr().out
    result = lablib.check("lab0_fixture", "running_mean", Bad)
    assert "ZeroDivisionError: oops" in result.results[0].message


def test_check_partial_credit_and_argument_errors(fixture_lab):
    class HalfRight:
        def __init__(self):
            self.n = 0

        def update(self, x):
            self.n += 1

        @property
        def mean(self):
            return 1.0 if self.n == 1 else 0.0

    result = lablib.check("lab0_fixture", "running_mean", HalfRight, quiet=True)
    assert 0 < result.score < result.max_score and not result.passed
    with pytest.raises(KeyError, match="no graded piece"):
        lablib.check("lab0_fixture", "nope", np.sum)
    with pytest.raises(TypeError, match="declares 1"):
        lablib.check("lab0_fixture", "softmax", np.sum, np.max)


def test_probes_run_without_tensorfloat32_and_the_setting_comes_back():
    """On Ampere+ GPUs TF32 would put correct answers ~1e-3 off the references: the probes
    run in full float32 (TensorFlow's switch, which a CPU accepts too), then the
    notebook's own setting is restored, also when the probe raises."""
    import tensorflow as tf

    from lablib.grading.run.child import run_probe
    from lablib.grading.run.protocol import ProbeRequest

    config = tf.config.experimental
    seen = []

    def probe(ns):
        seen.append(config.tensor_float_32_execution_enabled())
        if ns["fail"]:
            raise ValueError("student error")
        return 1

    original = config.tensor_float_32_execution_enabled()  # tests/conftest.py turns it off
    try:
        for before in (True, False):
            config.enable_tensor_float_32_execution(before)
            for fail in (False, True):
                result = run_probe(ProbeRequest("t", probe, ("fail",), 10.0), {"fail": fail})
                assert result.ok is not fail
                assert config.tensor_float_32_execution_enabled() is before
    finally:
        config.enable_tensor_float_32_execution(original)
    assert seen == [False] * 4


def test_an_unfinished_piece_gets_one_not_done_yet_line(fixture_lab, capsys):
    from lablib.session import STUB_MESSAGE

    def softmax(x):
        # YOUR CODE HERE
        raise NotImplementedError(STUB_MESSAGE.format(piece="softmax"))

    result = lablib.check("lab0_fixture", "softmax", softmax)
    out = capsys.readouterr().out
    assert not result.passed and result.score == 0
    assert out.splitlines() == [
        "lab0_fixture / softmax: public checks",
        "  not done yet: the graded piece 'softmax' still raises NotImplementedError. Replace "
        "`# YOUR CODE HERE` and the `raise` line in its graded cell with your code, run that "
        "cell, then this check again.",
    ]


def test_judges_run_without_tensorfloat32_too():
    """The judges build Keras references in the grader (Lab 1's multi-head attention, the
    models): on a TF32 GPU they would be ~1e-3 off, so they run in full float32 as the
    probes do (issue 19 item 10), and the grader's setting comes back."""
    import tensorflow as tf

    from lablib.grading.judge.tests import judge_test
    from lablib.grading.run.protocol import ProbeResult
    from lablib.grading.spec import Test

    config = tf.config.experimental
    seen = []

    def judge(value):
        seen.append(config.tensor_float_32_execution_enabled())

    test = Test(lab="lab0", piece="p", name="t", probe=lambda ns: 1)
    test.judge(judge)
    original = config.tensor_float_32_execution_enabled()
    try:
        config.enable_tensor_float_32_execution(True)
        assert judge_test(test, ProbeResult(True, 1.0)).passed
        assert seen == [False] and config.tensor_float_32_execution_enabled() is True
    finally:
        config.enable_tensor_float_32_execution(original)


def test_an_error_in_a_graded_cell_quotes_its_line_and_the_setup_rule():
    """What a student reads when a graded cell uses a helper from another cell: the line
    that failed (once, though a comprehension repeats it), and the # SETUP rule."""
    from lablib.grading.run.child import compile_cell, describe_exception

    source = "def pool(xs):\n    return [helper(x) for x in xs]\n"
    ns = {}
    exec(compile_cell(source, "<graded cell readout>"), ns)
    try:
        ns["pool"]([1])
    except NameError as error:
        text = describe_exception(error)
    assert (
        "NameError: name 'helper' is not defined (at graded cell readout, line 2: "
        "return [helper(x) for x in xs]). If helper is defined in another cell"
    ) in text
    assert text.count("line 2") == 1 and "# SETUP cells and your # GRADED: cells" in text


def test_a_crib_is_named_in_the_notebook_check_too():
    """lablib.check runs the grader's crib guard: wrapping the grader's reference (or a
    lablib layer) in a by-hand piece fails there with the same sentence, not only at grading."""
    import numpy as np

    import lablib
    from lablib.grading.specs.lab3_gcn_molecules import reference_gcn

    def gcn_layer_matrix(H, A, W, B, activation=np.tanh):  # a student's crib
        return reference_gcn(H, A, W, B, activation)

    def honest(H, A, W, B, activation=np.tanh):
        H, A, W, B = (np.asarray(m, dtype=float) for m in (H, A, W, B))
        degree = A.sum(axis=1, keepdims=True)
        mean = np.divide(A @ H, degree, out=np.zeros((len(H), H.shape[1])), where=degree > 0)
        return activation(mean @ W.T + H @ B.T)

    cribbed = lablib.check("lab3", "gcn_matrix", gcn_layer_matrix, quiet=True)
    assert not cribbed.passed and cribbed.score == 0
    assert all(
        "your code calls lablib.grading.specs.lab3_gcn_molecules.reference_gcn" in r.message
        for r in cribbed.results
    )
    assert lablib.check("lab3", "gcn_matrix", honest, quiet=True).passed
    aliased = lablib.check(
        "lab3", "gcn_matrix", reference_gcn, quiet=True
    )  # the name *is* the reference
    assert not aliased.passed and all(
        "your code calls lablib.grading.specs.lab3_gcn_molecules.reference_gcn" in r.message
        for r in aliased.results
    )


def test_objects_not_passed_are_named_in_every_test(fixture_lab, capsys):
    result = lablib.check("lab0_fixture", "softmax")
    assert result.results and not result.passed
    for r in result.results:
        assert r.message == "pass softmax to check()" and r.kind == "error", r
    assert "pass softmax to check()" in capsys.readouterr().out


def test_spec_of_resolves_a_lab_once_in_any_form(fixture_lab):
    from lablib.grading.labspec.registry import spec_of
    from lablib.grading.spec import load_lab
    from lablib.labs import UnknownLab, find_lab

    lab1 = load_lab("lab1")
    assert spec_of("lab1") is spec_of("lab1_attention") is spec_of(find_lab("lab1")) is lab1
    assert spec_of(lab1) is lab1
    # loaded by path, unknown to the registry: the process's spec, with its public tests
    # (the hidden tests fixture_lab was loaded with belong to that call's copy)
    assert spec_of("lab0_fixture") is load_lab(fixture_lab.source_files[0])
    assert [t.id for t in spec_of("lab0_fixture").tests] == [
        t.id for t in fixture_lab.tests if not t.hidden
    ]
    with pytest.raises(UnknownLab, match="lab9"):
        spec_of("lab9")


def test_a_shipped_lab_loaded_from_another_file_first_stays_that_lab(tmp_path):
    """A course's copy of a shipped spec file, loaded by path under the shipped lab's
    name, is that lab in this process (as :func:`lablib.check` always took it): the
    shipped file is not imported on top of it, which would replace its tests."""
    from lablib.grading.spec import PUBLIC_TESTS_DIR

    def mark(text):
        assert text.count('hint="') >= 3
        return text.replace('hint="', 'hint="(course copy) ')

    copy = course_copy(tmp_path, "lab1_attention", mark)
    code = (
        "import lablib.labs as labs\n"
        "from lablib.grading.spec import load_lab, load_spec\n"
        f"own = load_spec(labs.Lab('lab1_attention', 'lab1', 'L1', spec={str(copy)!r}))\n"
        "copied = sum(t.hint.startswith('(course copy)') for t in own.tests)\n"
        "assert load_lab('lab1') is own and own.spec_dir is not None\n"
        f"assert own.source_files[0] == own.spec_dir / 'lab1_attention.py' != {str(PUBLIC_TESTS_DIR / 'lab1_attention.py')!r}\n"
        "print(copied, sum(t.hint.startswith('(course copy)') for t in own.tests))\n"
    )
    out = run_python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    before, after = map(int, out.stdout.split())
    assert before >= 3 and after == before
