"""Judges reject values a forger sends without computing them.

A student's process can send any plain value in place of a probe's (code in the same
process can reach the runner). For each judge hardened against that (ISOLATION.md,
"What a forged value can still score"), the values a forger would send without doing
the computation (the right constants, zeros, flags, weights that do not fit the
outputs) fail with :class:`TestFailure`, while the values the real probe returns on
the reference solution pass. Those real values come from running the probes on the
solution's graded cells in a fresh Python process (each lab picks its own Keras mode),
as ``tests/labs/test_lab_public_checks.py`` does.
"""

import copy
import os
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest

from lablib.grading.spec import TestFailure, load_lab

pytestmark = pytest.mark.integration  # runs the real labs' probes and judges in child processes

ROOT = pathlib.Path(__file__).resolve().parents[2]

PROBE_VALUES = r"""
import pickle, sys
from lablib.grading.notebook import graded_cells, read_notebook, setup_sources
from lablib.grading.spec import load_lab, to_plain

solution, spec, out, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
lab = load_lab(spec)
nb, _ = read_notebook(solution)
ns = {"__name__": "__main__"}
for source in setup_sources(nb):
    exec(compile(source, "<setup>", "exec"), ns)
cells, _ = graded_cells(nb)
for name, cell in cells.items():
    exec(compile(cell.source, f"<graded cell {name}>", "exec"), ns)
values = {}
for test in lab.tests:
    if test.name in names:
        objects = {name: ns[name] for name in lab.pieces[test.piece].objects}
        values[test.name] = to_plain(test.probe(objects))
with open(out, "wb") as f:
    pickle.dump(values, f)
"""


def probe_values(lab_name, names, tmp_path_factory, legacy=False):
    """The plain values of the named tests' probes on the lab's solution."""
    out = tmp_path_factory.mktemp(lab_name) / "values.pkl"
    env = dict(os.environ, LABLIB_FAST="1", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_USE_LEGACY_KERAS", None)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE_VALUES,
            str(ROOT / "solutions" / f"{lab_name}.ipynb"),
            lab_name,
            str(out),
            ",".join(names),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=1500,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out, "rb") as f:
        values = pickle.load(f)
    assert sorted(values) == sorted(names)
    return values


def judge(lab, name, value):
    return lab.test_by_id(next(t.id for t in lab.tests if t.name == name)).run_judge(value)


def rejects(lab, name, value):
    with pytest.raises(TestFailure):
        judge(lab, name, value)


# ---------------------------------------------------------------------------- Lab 3

LAB3 = ["gcn_structure", "gcn_learns", "readout_permutation_and_mode"]


@pytest.fixture(scope="module")
def lab3():
    return load_lab("lab3_gcn_molecules")


@pytest.fixture(scope="module")
def lab3_values(tmp_path_factory):
    return probe_values("lab3_gcn_molecules", LAB3, tmp_path_factory)


@pytest.mark.slow
def test_lab3_real_values_pass(lab3, lab3_values):
    for name in LAB3:
        assert judge(lab3, name, lab3_values[name]) == 1.0, name


@pytest.mark.slow
def test_lab3_structure_forgeries_fail(lab3, lab3_values):
    real = lab3_values["gcn_structure"]
    zeros = np.zeros((6, 1))
    constants = {
        "compiled": True,
        "num_inputs": 3,
        "output": zeros,
        "permuted": zeros,
        "garbage_padding": zeros,
        "wider_padding": zeros,
        "edge_removed": np.r_[[[1.0]], np.zeros((5, 1))],
    }
    # The properties alone, with the real model: outputs that model does not produce.
    rejects(lab3, "gcn_structure", {**real, **constants})
    # The properties alone, without a model.
    rejects(lab3, "gcn_structure", {**constants, "architecture": "{}", "weights": []})
    # Real outputs, weights that are not the model's (all zero).
    rejects(lab3, "gcn_structure", {**real, "weights": [np.zeros_like(w) for w in real["weights"]]})
    # Weights that do not fit the architecture.
    rejects(lab3, "gcn_structure", {**real, "weights": real["weights"][:-1]})
    # An architecture that makes the grader allocate gigabytes.
    rejects(
        lab3,
        "gcn_structure",
        {**real, "architecture": real["architecture"].replace('"units": 16', '"units": 1000000')},
    )


@pytest.mark.slow
def test_lab3_training_forgeries_fail(lab3, lab3_values):
    real = lab3_values["gcn_learns"]
    falling = list(np.linspace(1.0, 0.1, 60))
    # Falling losses and moved weights, but the weights after training are noise.
    rng = np.random.default_rng(0)
    noise = [w + rng.normal(size=w.shape).astype(w.dtype) for w in real["weights_before"]]
    rejects(lab3, "gcn_learns", {**real, "losses": falling, "weights_after": noise})
    # The untrained weights sent as trained ones, nudged so that "every weight changed".
    nudged = [w + np.float32(1e-7) for w in real["weights_before"]]
    rejects(lab3, "gcn_learns", {**real, "losses": falling, "weights_after": nudged})
    # A weight array left as it was.
    stuck = copy.deepcopy(real)
    stuck["weights_after"][0] = stuck["weights_before"][0]
    rejects(lab3, "gcn_learns", stuck)


@pytest.mark.slow
def test_lab3_readout_forgeries_fail(lab3, lab3_values):
    real = lab3_values["readout_permutation_and_mode"]
    same = np.zeros((3, 4))
    rejects(
        lab3,
        "readout_permutation_and_mode",
        {**real, **{mode: [same, same] for mode in ("sum", "mean", "max")}},
    )


# ---------------------------------------------------------------------------- Lab 4

LAB4 = ["gat_structure", "gat_learns"]


@pytest.fixture(scope="module")
def lab4():
    return load_lab("lab4_gat")


@pytest.fixture(scope="module")
def lab4_values(tmp_path_factory):
    return probe_values("lab4_gat", LAB4, tmp_path_factory)


@pytest.mark.slow
def test_lab4_real_values_pass(lab4, lab4_values):
    for name in LAB4:
        assert judge(lab4, name, lab4_values[name]) == 1.0, name


@pytest.mark.slow
def test_lab4_structure_forgeries_fail(lab4, lab4_values):
    real = lab4_values["gat_structure"]
    base = np.zeros((24, 3))
    near = base.copy()
    near[0] = 1.0
    constants = {
        "compiled": True,
        "num_inputs": 2,
        "output": base,
        "repeat": base,
        "far_change": base,
        "near_change": near,
        "training_a": base,
        "training_b": base + 1.0,
    }
    rejects(lab4, "gat_structure", {**real, **constants})
    rejects(lab4, "gat_structure", {**constants, "architecture": "{}", "weights": []})
    rejects(lab4, "gat_structure", {**real, "weights": [2 * w for w in real["weights"]]})
    # A model without dropout reported with dropout's two different training outputs.
    no_dropout = (
        real["architecture"]
        .replace('"rate": 0.6', '"rate": 0.0')
        .replace('"attention_dropout": 0.6', '"attention_dropout": 0.0')
    )
    assert no_dropout != real["architecture"]
    rejects(lab4, "gat_structure", {**real, "architecture": no_dropout})


@pytest.mark.slow
def test_lab4_training_forgeries_fail(lab4, lab4_values):
    real = lab4_values["gat_learns"]
    falling = list(np.linspace(1.0, 0.1, 60))
    nudged = [w + np.float32(1e-6) for w in real["weights_before"]]
    rejects(lab4, "gat_learns", {**real, "losses": falling, "weights_after": nudged})
    rejects(lab4, "gat_learns", {**real, "architecture": "not serializable: forged"})


# ---------------------------------------------------------------------------- Lab 1

LAB1 = ["four_dense_projections", "no_encoding_gap_is_zero"]


@pytest.fixture(scope="module")
def lab1():
    return load_lab("lab1_attention")


@pytest.fixture(scope="module")
def lab1_values(tmp_path_factory):
    return probe_values("lab1_attention", LAB1, tmp_path_factory)


@pytest.mark.slow
def test_lab1_real_values_pass(lab1, lab1_values):
    for name in LAB1:
        assert judge(lab1, name, lab1_values[name]) == 1.0, name


@pytest.mark.slow
def test_lab1_projection_forgeries_fail(lab1, lab1_values):
    real = lab1_values["four_dense_projections"]
    eye = np.eye(6, dtype=np.float32)
    # Class names and shapes alone (the old judge's view), without the computation.
    names = {
        name: {
            "class": "Dense",
            "weights": [eye, np.zeros(6, np.float32)],
            "output": np.zeros((1, 4, 6), np.float32),
        }
        for name in ("query_dense", "key_dense", "value_dense", "output_dense")
    }
    rejects(
        lab1,
        "four_dense_projections",
        {
            "projections": names,
            "sublayers": ["Dense"] * 4,
            "output": np.zeros((1, 4, 6)),
            "weights": [eye, np.zeros(6, np.float32)] * 4,
        },
    )
    # Real projections, a layer output that is not attention over them.
    rejects(lab1, "four_dense_projections", {**real, "output": np.zeros_like(real["output"])})
    # A projection whose reported output is not x @ kernel + bias.
    forged = copy.deepcopy(real)
    forged["projections"]["key_dense"]["output"] = forged["projections"]["query_dense"]["output"]
    rejects(lab1, "four_dense_projections", forged)
    # The layer's weights are not the projections' weights.
    forged = copy.deepcopy(real)
    forged["weights"] = [w * 2 for w in forged["weights"]]
    rejects(lab1, "four_dense_projections", forged)


@pytest.mark.slow
def test_lab1_gap_forgeries_fail(lab1, lab1_values):
    real = lab1_values["no_encoding_gap_is_zero"]
    rejects(lab1, "no_encoding_gap_is_zero", 0.0)  # the old answer: always 0
    rejects(lab1, "no_encoding_gap_is_zero", {**real, "biased_gap": 0.0})
    rejects(lab1, "no_encoding_gap_is_zero", {**real, "bias": np.zeros((6, 6)), "biased_gap": 0.0})
    # A bias constant along each row leaves attention equivariant (gap 0): refused.
    rows = np.repeat(np.random.default_rng(1).normal(size=(6, 1)) * 3, 6, axis=1)
    rejects(lab1, "no_encoding_gap_is_zero", {**real, "bias": rows, "biased_gap": 0.0})
    # The gap of another draw than the one reported.
    rejects(lab1, "no_encoding_gap_is_zero", {**real, "bias": real["bias"][::-1]})


# ---------------------------------------------------------------------------- Lab 2

LAB2 = [
    "output_shapes_and_compiled",
    "uses_tfm_blocks_and_masking_embedding",
    "padding_does_not_change_predictions",
    "learns_and_trains_every_weight",
]


@pytest.fixture(scope="module")
def lab2():
    return load_lab("lab2_transformer_reuters")


@pytest.fixture(scope="module")
def lab2_values(tmp_path_factory):
    return probe_values("lab2_transformer_reuters", LAB2, tmp_path_factory)


@pytest.mark.slow
def test_lab2_real_values_pass(lab2, lab2_values):
    for name in LAB2:
        assert (
            lab2_values[name]["trace" if "trace" in lab2_values[name] else "trace_after"]
            is not None
        )
        assert judge(lab2, name, lab2_values[name]) == 1.0, name


def _scaled_block(trace, factor):
    """The trace with the first encoder block's weights scaled (outputs left as they were)."""
    trace = copy.deepcopy(trace)
    block = trace["layers"]["blocks"][0]
    trace["weights"][block] = {k: v * factor for k, v in trace["weights"][block].items()}
    return trace


@pytest.mark.slow
def test_lab2_forgeries_fail(lab2, lab2_values):
    shapes = lab2_values["output_shapes_and_compiled"]
    # Shapes and a flag, with a trace whose logits are not what the classifier computes.
    forged = copy.deepcopy(shapes)
    for step in forged["trace"]["batches"].values():
        step["logits"] = np.zeros_like(step["logits"])
    rejects(lab2, "output_shapes_and_compiled", forged)
    # A trace whose encoder block does not compute its reported output.
    rejects(
        lab2, "output_shapes_and_compiled", {**shapes, "trace": _scaled_block(shapes["trace"], 1.5)}
    )

    blocks = lab2_values["uses_tfm_blocks_and_masking_embedding"]
    rejects(
        lab2,
        "uses_tfm_blocks_and_masking_embedding",
        {**blocks, "trace": _scaled_block(blocks["trace"], 0.5)},
    )

    padding = lab2_values["padding_does_not_change_predictions"]
    same = np.zeros((8, 4))
    # Equal constant predictions: the trace shows what the model really predicts.
    rejects(lab2, "padding_does_not_change_predictions", {**padding, "plain": same, "padded": same})
    # The padded batch's trace replaced by the plain one's (no computation on padding).
    forged = copy.deepcopy(padding)
    forged["trace"]["batches"]["padded"] = forged["trace"]["batches"]["plain"]
    rejects(lab2, "padding_does_not_change_predictions", forged)

    learns = lab2_values["learns_and_trains_every_weight"]
    # Falling losses and moved weights reported, but the trained trace is the untrained one.
    rejects(
        lab2,
        "learns_and_trains_every_weight",
        {
            **learns,
            "loss_before": 2.0,
            "loss_after": 0.1,
            "changes": [1.0] * len(learns["changes"]),
            "trace_after": learns["trace_before"],
        },
    )
    # Weights moved at random after "training": the logits they give do not fit.
    rejects(
        lab2,
        "learns_and_trains_every_weight",
        {**learns, "trace_after": _scaled_block(learns["trace_after"], 1.01)},
    )


# ------------------------------------------------------- rebuilding models in the grader


def _small_model(middle=None):
    import keras

    keras.utils.set_random_seed(0)
    x = keras.Input(shape=(3,))
    h = keras.layers.Dense(4, activation="relu")(x)
    if middle is not None:
        h = middle(h)
    model = keras.Model(x, keras.layers.Dense(1)(h))
    model.compile(optimizer="adam", loss="mse")
    return model


def test_rebuild_model_recomputes_a_keras_model():
    from lablib.grading.specs._model_checks import describe_model, rebuild_model, run_model

    model = _small_model()
    values = describe_model(model)
    rebuilt = rebuild_model(values["architecture"], values["weights"])
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    np.testing.assert_allclose(run_model(rebuilt, [x]), np.asarray(model(x)), atol=1e-6)
    assert rebuilt.optimizer is not None and rebuilt.loss == "mse"


def test_rebuild_model_falls_back_only_for_classes_it_cannot_know():
    import keras

    from lablib.grading.specs._model_checks import describe_model, rebuild_model

    class Doubling(keras.layers.Layer):  # a student's own layer class
        def call(self, inputs):
            return 2 * inputs

    values = describe_model(_small_model(Doubling()))
    assert rebuild_model(values["architecture"], values["weights"]) is None
    values = describe_model(_small_model(keras.layers.Lambda(lambda t: 2 * t)))
    assert rebuild_model(values["architecture"], values["weights"]) is None
    # A class claimed to come from Keras or lablib that does not exist there: a failure.
    values = describe_model(_small_model(Doubling()))
    claimed = values["architecture"].replace('"class_name": "Doubling"', '"class_name": "Nope"')
    import json

    config = json.loads(claimed)
    for layer in config["config"]["layers"]:
        if layer["class_name"] == "Nope":
            layer["module"] = "lablib.layers.graph_conv"
    with pytest.raises(TestFailure):
        rebuild_model(json.dumps(config), values["weights"])


@pytest.mark.parametrize(
    "architecture, weights",
    [
        ("not json", []),
        ('{"a": 1}', []),
        ("not serializable: TypeError", []),
    ],
)
def test_rebuild_model_rejects_what_is_not_a_model(architecture, weights):
    from lablib.grading.specs._model_checks import rebuild_model

    with pytest.raises(TestFailure):
        rebuild_model(architecture, weights)


def test_rebuild_model_rejects_weights_that_do_not_fit_and_huge_sizes():
    from lablib.grading.specs._model_checks import describe_model, rebuild_model

    values = describe_model(_small_model())
    with pytest.raises(TestFailure, match="do not fit"):
        rebuild_model(values["architecture"], values["weights"][:-1])
    with pytest.raises(TestFailure, match="sizes up to"):
        rebuild_model(
            values["architecture"].replace('"units": 4', '"units": 100000000'), values["weights"]
        )


def test_judge_bomb_is_not_rebuilt_and_sizes_in_lists_count():
    """A model whose weightless layers multiply the input's size by numbers of the config
    (the red team's Reshape -> UpSampling2D(S, S) -> Conv2D) is not rebuilt in the grader:
    rebuild_model returns None (the reported properties are judged) without allocating;
    integers inside lists (``size: [S, S]``) are checked like the others."""
    import json

    import psutil

    from lablib.grading.specs._model_checks import _check_sizes, describe_model, rebuild_model

    values = describe_model(_small_model())
    config = json.loads(values["architecture"])
    layers = config["config"]["layers"]
    bomb = {
        "module": "keras.layers",
        "class_name": "UpSampling2D",
        "registered_name": None,
        "config": {
            "name": "up",
            "size": [1000, 1000],
            "data_format": "channels_last",
            "interpolation": "nearest",
            "trainable": True,
            "dtype": "float32",
        },
    }
    wrapped = {
        "module": "keras.layers",
        "class_name": "TimeDistributed",
        "registered_name": None,
        "config": {"name": "td", "layer": dict(bomb, config=dict(bomb["config"], size=[900, 900]))},
    }
    before = psutil.Process().memory_info().rss
    for extra in (bomb, wrapped):
        forged = json.loads(json.dumps(config))
        forged["config"]["layers"] = layers[:1] + [extra] + layers[1:]
        assert rebuild_model(json.dumps(forged), values["weights"]) is None
    assert psutil.Process().memory_info().rss - before < 200 * 2**20
    with pytest.raises(TestFailure, match=r"size\[0\] = 5000"):
        _check_sizes({"config": {"size": [5000, 2]}})
    with pytest.raises(TestFailure, match="a size of 1048576000"):
        _check_sizes({"config": {"target_shape": [1000, 1024, 1024]}})
    _check_sizes({"config": {"kernel_size": [3, 3], "seed": [2**40, 1], "axis": [-1]}})  # fine


def test_rebuild_model_refuses_layers_that_load_files_or_code():
    import json

    from lablib.grading.specs._model_checks import describe_model, rebuild_model

    values = describe_model(_small_model())
    config = json.loads(values["architecture"])
    layer = config["config"]["layers"][1]
    layer.update(class_name="TFSMLayer", module="keras.layers")
    layer["config"]["filepath"] = "/somewhere/saved_model"
    with pytest.raises(TestFailure, match="TFSMLayer"):
        rebuild_model(json.dumps(config), values["weights"])


@pytest.mark.slow
def test_lab3_model_with_a_layer_class_of_its_own_is_judged_on_reported_values(lab3):
    """The grader cannot rebuild a student's own layer class: gcn_structure falls back to
    the properties the process reports, and an honest such model keeps its points."""
    import keras

    from lablib.layers.graph_conv import GraphConv
    from lablib.layers.readout import GraphReadout

    class Halve(keras.layers.Layer):  # the student's own class
        def call(self, inputs):
            return 0.5 * inputs

    def build_gcn_regressor(num_features, hidden_units=64, num_layers=3):
        x_in = keras.Input(shape=(None, num_features))
        adjacency_in = keras.Input(shape=(None, None))
        mask_in = keras.Input(shape=(None,), dtype="bool")
        h = x_in
        for _ in range(num_layers):
            h = GraphConv(hidden_units, activation="relu")(h, adjacency=adjacency_in, mask=mask_in)
        g = Halve()(GraphReadout("sum")(h, mask=mask_in))
        model = keras.Model([x_in, adjacency_in, mask_in], keras.layers.Dense(1)(g))
        model.compile(optimizer="adam", loss="mse")
        return model

    test = lab3.test_by_id("build_gcn::gcn_structure")
    got = test.probe({"build_gcn_regressor": build_gcn_regressor})
    assert got["architecture"].count('"class_name": "Halve"') == 1
    assert test.run_judge(got) == 1.0
    # Still judged on what it reports: an edge that changes nothing fails.
    with pytest.raises(TestFailure, match="Removing a bond"):
        test.run_judge({**got, "edge_removed": got["output"]})
