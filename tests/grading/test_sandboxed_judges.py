"""Judges that build what a submission described run in a sandboxed process, with the
submission's limits, never in the grader's own (issue 19, item 2)."""

import resource

import nbformat
import pytest
from grading_paths import course_copy, run_python

from lablib.grading.grade import grade_one
from lablib.grading.judge import judge_test
from lablib.grading.results import Kind
from lablib.grading.run import Limits, ProbeResult
from lablib.grading.spec import load_lab

SPEC = '''
"""A lab whose judges do what the graph labs' model judges do: work the grader must not do."""
import os
import threading
import time

import numpy as np

from lablib.grading.spec import expect, get_lab, sandbox_only

lab = get_lab("lab9_sandboxed_judges", title="judges in a sandbox")
lab.piece("double", objects=["double"], description="twice its input")
GRADER = os.getpid()  # the grader's process, captured when the spec is loaded
LOCK = threading.Lock()  # a judge using it cannot travel to another process


def doubled(ns, x=2.0):  # every test's probe: the student's double(x)
    return float(ns["double"](x))


def judge(name, x=2.0):
    """Register a test named ``name`` (probe: double(x)) with the decorated judge."""
    return lab.test("double", points=1, name=name)(lambda ns: doubled(ns, x)).judge


@judge("elsewhere")
def _(got):
    sandbox_only("checking where it runs")
    expect(os.getpid() != GRADER, "the judge ran in the grader's own process")
    expect(got == 4.0, f"double(2.0) gave {got}, expected 4.0")


@judge("memory_bomb")
def _(got):
    sandbox_only("building something huge")
    hog = np.ones(3 * 2**30 // 8)  # 3 GB, every page written
    expect(hog.sum() > 0, "unreachable")


@lab.test("double", points=1, timeout=4)
def endless(ns):
    return doubled(ns)


@endless.judge
def _(got):
    sandbox_only("running for ever")
    time.sleep(600)


@judge("wrong_in_sandbox", x=3.0)
def _(got):
    sandbox_only("judging a value")
    expect(got == 7.0, f"double(3.0) gave {got}; this judge wants 7.0")


@judge("unsendable")
def _(got):
    sandbox_only("judging under a lock")
    with LOCK:
        expect(got == 4.0, "unreachable")


@judge("judge_crashes")
def _(got):
    sandbox_only("a judge with a bug that ends its process")
    os._exit(3)


@judge("plain", x=5.0)
def _(got):
    expect(os.getpid() == GRADER, "a plain judge left the grader's process")
    expect(got == 10.0, f"double(5.0) gave {got}")
'''


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spec")
    (folder / "lab9_sandboxed_judges.py").write_text(SPEC)
    return load_lab(str(folder / "lab9_sandboxed_judges.py"))


def _notebook(path, source):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("# GRADED: double\n" + source)])
    nbformat.write(nb, path)
    return path


@pytest.mark.integration
def test_sandboxed_judges_keep_the_grader_small_and_count_their_time(lab, tmp_path):
    path = _notebook(tmp_path / "student.ipynb", "def double(x):\n    return 2 * x\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    result = grade_one(lab, "student", path, [], limits=Limits(timeout=20, memory_mb=1500))
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    by_name = {t.name: t for t in result.tests}
    assert by_name["elsewhere"].passed, by_name["elsewhere"].message
    assert by_name["plain"].passed, by_name["plain"].message
    bomb = by_name["memory_bomb"]
    assert not bomb.passed and bomb.kind == Kind.MEMORY, (bomb.kind, bomb.message)
    assert "rebuilds and runs your model in a sandboxed process" in bomb.message
    endless = by_name["endless"]
    assert endless.kind == Kind.TIMEOUT and "time limit (4 s)" in endless.message, endless.message
    wrong = by_name["wrong_in_sandbox"]
    assert (
        wrong.kind == Kind.FAILED and wrong.message == "double(3.0) gave 6.0; this judge wants 7.0"
    )
    for name in ("unsendable", "judge_crashes"):  # the grader's fault, not the student's
        assert by_name[name].kind == Kind.GRADER_ERROR, (
            name,
            by_name[name].kind,
            by_name[name].message,
        )
    assert "could not be sent" in by_name["unsendable"].message
    assert "the sandboxed judging process failed" in by_name["judge_crashes"].message
    assert grown_mb < 200, f"the grader grew by {grown_mb:.0f} MB"
    assert result.seconds >= 4, result.seconds  # the endless judge's 4 s are the submission's
    assert set(result.status.problems) == {Kind.MEMORY, Kind.TIMEOUT, Kind.GRADER_ERROR}, (
        result.status
    )
    assert any("judging test double::memory_bomb" in note for note in result.notes), result.notes
    assert result.score == 2 and result.max_score == 7


def _build_gcn_regressor(num_features, hidden_units=64, num_layers=3):
    """Lab 3's solution builder (as in solutions/lab3_gcn_molecules.ipynb)."""
    import keras

    from lablib import layers

    x_in = keras.Input(shape=(None, num_features), name="x")
    adjacency_in = keras.Input(shape=(None, None), name="adjacency")
    mask_in = keras.Input(shape=(None,), dtype="bool", name="mask")
    h = x_in
    for i in range(num_layers):
        h = layers.GraphConv(
            hidden_units, normalization="mean", activation="relu", name=f"graph_conv_{i}"
        )(h, adjacency=adjacency_in, mask=mask_in)
    g = layers.GraphReadout("sum", name="readout")(h, mask=mask_in)
    g = keras.layers.Dense(hidden_units, activation="relu")(g)
    out = keras.layers.Dense(1, name="prediction")(g)
    model = keras.Model([x_in, adjacency_in, mask_in], out, name="gcn_regressor")
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    return model


def test_a_judge_that_rebuilds_a_model_is_stopped_in_the_grader():
    """Lab 3's model test: rebuild_model refuses in the grader's own process (the grader
    then runs the judge sandboxed); the same judge in a notebook's lablib.check, where
    in_grader is off, rebuilds the model and passes."""
    lab3 = load_lab("lab3")
    test = next(t for t in lab3.tests if t.id == "build_gcn::gcn_structure")
    raw = ProbeResult(True, test.probe({"build_gcn_regressor": _build_gcn_regressor}))
    assert judge_test(test, raw, in_grader=True) is None
    assert judge_test(test, raw).passed


@pytest.mark.parametrize("lab_name", ["lab3_gcn_molecules", "lab4_gat", "lab1_attention"])
def test_judges_of_a_course_copy_travel_to_a_process_that_cannot_import_it(lab_name, tmp_path):
    """A course's copy of a shipped spec file, loaded by path, is no module the sandboxed
    judging process can import: every judge of it (the learning judges and the judges
    that helpers declare from tables of cases too) must travel by value, or the test is
    a grader error. Pickled in one process, unpickled in another."""
    copy = course_copy(tmp_path / "course", lab_name)
    blobs = tmp_path / "judges.pkl"
    dump = (
        "import pickle, cloudpickle\n"
        "from lablib.grading.labspec.registry import load_spec\n"
        "from lablib.grading.judge.sandboxed import _by_value\n"
        "from lablib.labs import Lab\n"
        f"own = load_spec(Lab({lab_name!r}, 'labx', 'copy', spec={str(copy)!r}))\n"
        "import sys\n"
        "copies = [m for n, m in sys.modules.items() if n.startswith('lablib_lab_files.')]\n"
        "judges = {}\n"
        "for t in own.tests:\n"
        "    if t.judge_fn is not None:  # each judge alone, as when it is the one sent\n"
        "        for module in copies:\n"
        "            try:\n"
        "                cloudpickle.unregister_pickle_by_value(module)\n"
        "            except ValueError:\n"
        "                pass\n"
        "        _by_value(t.judge_fn)\n"
        "        judges[t.id] = cloudpickle.dumps(t.judge_fn)\n"
        f"pickle.dump(judges, open({str(blobs)!r}, 'wb'))\n"
        "print(len(judges))\n"
    )
    done = run_python(dump)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) >= 3
    copy.unlink()  # the other process cannot import it from anywhere
    load = (
        "import pickle, cloudpickle\n"
        f"judges = pickle.load(open({str(blobs)!r}, 'rb'))\n"
        "bad = []\n"
        "for name, blob in judges.items():\n"
        "    try:\n"
        "        assert callable(cloudpickle.loads(blob))\n"
        "    except Exception as exc:\n"
        "        bad.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "print(bad)\n"
        "raise SystemExit(1 if bad else 0)\n"
    )
    done = run_python(load)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
