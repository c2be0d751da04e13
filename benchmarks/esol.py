"""ESOL solubility regression: a lablib GNN beside the mean predictor and a fingerprint MLP.

ESOL (Delaney 2004, MoleculeNet): 1,128 molecules, log solubility in mol/L. Random
80/10/10 split per seed (``MoleculeDataset.split("random", seed=seed)``), test RMSE as
mean ± std over seeds. MoleculeNet's random-split figures: MPNN 0.58, graph convolution
0.97 (Wu et al. 2018).

Models (all trained on standardised targets with Adam, batches of 32, at most 300
epochs, early stopping with patience 30 on validation RMSE and the best epoch's weights
restored):

* ``mean``: predicts the training mean (the floor any model must beat).
* ``fingerprint MLP``: Morgan fingerprints (radius 2, 2048 bits,
  ``lablib.data.molecules.morgan_fingerprints``) -> Dense 512 -> Dense 128 -> 1, dropout
  0.2, learning rate halved after 15 epochs without improvement.
* ``GNN GraphAttention`` (the lablib GNN): atom features -> Dense 64 (ELU) -> 3 x
  ``GraphAttention(16, num_heads=4, activation="elu", edge_dim=6)`` (heads concatenated,
  64 units; the six bond features, type / conjugated / in ring, enter every layer's
  attention scores), each layer's output updating the atom states through its own
  ``keras.layers.GRUCell`` (``h = GRUCell(layer(h), h)``, as in AttentiveFP) ->
  ``GraphReadout("sum")`` -> Dense 64 ReLU -> 1, dropout 0.2 after every graph and dense
  layer, Adam 1e-3 (constant), on disjoint (sparse ``edge_index`` + ``edge_attr``)
  batches: the Lab 4 "GAT + bond features" regressor (solutions/lab4_gat.ipynb) plus
  dropout and the gated (GRU) update. The row is an ensemble of ``--ensemble`` K such
  models per split (default 3; standard practice, e.g. Chemprop's ensembles): identical
  settings, initialisation and batch order seeded ``seed + 1000 k`` (k = 0..K-1; the
  split stays that of ``seed``), each with its own early stopping on the same validation
  set; their standardised predictions are averaged and the RMSE is that of the averaged
  prediction. Member k = 0 alone (the model without ensembling) is reported too, as the
  single-model row.
* ``GNN GraphAttention no bonds``: one such model without the bond features (what they
  add).
* ``GNN GraphConv``: the same model with ``GraphConv(64, normalization="mean",
  activation="elu")`` in place of each attention layer, no bond features.

``GNN_SPECS`` holds the GNN settings. They were chosen on the mean validation RMSE of
seeds 0-2 only (test RMSE never computed while choosing: ``--validation-only`` puts the
validation set where the test set goes), starting from the Lab 4 recipe. Without bond
features or GRU: dropout 0.2 beat no dropout, dropout 0.1 and 0.3, a learning-rate
halving schedule, width 128, 4 layers, a sum ‖ mean ‖ max readout and Adam 5e-4; the
3-model ensemble beat the single model (validation RMSE 0.574 ± 0.057 against 0.585 ±
0.060). Then, single models, validation RMSE of seeds 0 / 1 / 2 (mean):

* bond features in the scores: 0.541 / 0.536 / 0.604 (0.560, against 0.585 without);
  as an ensemble of 3: 0.481 / 0.516 / 0.590 (0.529);
* with bond features, and also: residual connections 0.676 / 0.547 / 0.615; dropout
  0.1 0.551 / 0.549 / 0.640; width 128 0.611 on seed 0 (stopped); batches of 16 0.584 /
  0.527 / 0.619; jumping knowledge (readout of all layers' outputs) 0.656 / 0.535 /
  0.682; patience 60 and at most 600 epochs 0.541 / 0.531 / 0.596 (0.556); Adam 5e-4
  with patience 60 0.514 / 0.549 (stopped); bond features also added to the mixed values
  (a prototype, ``h_i = sum_j alpha_ij (z_j + f_ij W_e)``, not kept in the layer) 0.617
  / 0.558 (stopped); **a Dense embedding and a GRU-cell update after every layer 0.507
  / 0.521 / 0.555 (0.528): kept**.

A first full run with bond features but without the GRU update (test RMSE computed
once, 2026-11-23): ensemble of 3 0.596 ± 0.044, single model 0.624 ± 0.041, without bond
features 0.614 ± 0.053.

Run::

    .venv/bin/python benchmarks/esol.py           # full: 3 seeds, writes results/esol.md
    .venv/bin/python benchmarks/esol.py --quick   # 1 seed, 2 epochs, seconds
    .venv/bin/python benchmarks/esol.py --models "GNN GraphAttention" --validation-only --set dropout=0.3
                                                  # exploration: validation RMSE only, no file written
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("LABLIB_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))

import numpy as np  # noqa: E402
from _report import write_report  # noqa: E402  (benchmarks/ is sys.path[0])

CONFIG = {
    "batch_size": 32,
    "max_epochs": 300,
    "patience": 30,  # epochs without a better validation RMSE
    "plateau": 15,  # epochs without improvement before the learning rate is halved
}

# The GNNs, one spec per row; the two differ only in the graph layer.
GNN_SPECS = {
    "GNN GraphAttention": {
        "layer": "gat",
        "hidden": 64,
        "heads": 4,
        "num_layers": 3,
        "activation": "elu",
        "readout": ("sum",),
        "head": (64,),
        "dropout": 0.2,
        "learning_rate": 1e-3,
        "plateau": None,
        "edge_features": True,
        "residual": False,
        "jk": False,
        "gru": True,
        "batch_size": None,
        "max_epochs": None,
        "patience": None,
    },
    "GNN GraphAttention no bonds": {
        "layer": "gat",
        "hidden": 64,
        "heads": 4,
        "num_layers": 3,
        "activation": "elu",
        "readout": ("sum",),
        "head": (64,),
        "dropout": 0.2,
        "learning_rate": 1e-3,
        "plateau": None,
        "edge_features": False,
        "residual": False,
        "jk": False,
        "gru": True,
        "batch_size": None,
        "max_epochs": None,
        "patience": None,
    },
    "GNN GraphConv": {
        "layer": "graphconv",
        "hidden": 64,
        "heads": 4,
        "num_layers": 3,
        "activation": "elu",
        "readout": ("sum",),
        "head": (64,),
        "dropout": 0.2,
        "learning_rate": 1e-3,
        "plateau": None,
        "edge_features": False,
        "residual": False,
        "jk": False,
        "gru": True,
        "batch_size": None,
        "max_epochs": None,
        "patience": None,
    },
}
MLP_LEARNING_RATE = 1e-3
ENSEMBLED = "GNN GraphAttention"  # the model --ensemble applies to
SINGLE = " (single model)"  # suffix of the row holding an ensemble's member 0


# --------------------------------------------------------------------------- reporting


def mean_std(values, digits=3) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


# --------------------------------------------------------------------------- models


def build_gnn(spec, edge_dim=None):
    """The GNN regressor: ``num_layers`` graph layers -> GraphReadout(s) -> Dense head -> 1.

    ``spec["layer"]`` is "gat" (``GraphAttention(hidden // heads, num_heads=heads)``, heads
    concatenated; with ``spec["edge_features"]`` the bond features enter the attention
    scores, ``edge_dim=edge_dim``) or "graphconv" (``GraphConv(hidden,
    normalization="mean")``). ``spec["residual"]``: every graph layer after the first adds
    its input to its output.
    """
    import tensorflow as tf

    from lablib.backend import keras
    from lablib.layers import GraphAttention, GraphConv, GraphReadout

    hidden, activation = spec["hidden"], spec["activation"]

    use_edges = reads_bonds(spec)

    def graph_layer():
        if spec["layer"] == "graphconv":
            return GraphConv(hidden, normalization="mean", activation=activation)
        return GraphAttention(
            hidden // spec["heads"],
            num_heads=spec["heads"],
            activation=activation,
            edge_dim=edge_dim if use_edges else None,
        )

    class GNNRegressor(keras.Model):
        def __init__(self):
            super().__init__()
            self.convs = [graph_layer() for _ in range(spec["num_layers"])]
            self.drop = keras.layers.Dropout(spec["dropout"])
            self.readouts = [GraphReadout(mode) for mode in spec["readout"]]
            self.head = [keras.layers.Dense(units, activation="relu") for units in spec["head"]]
            self.out = keras.layers.Dense(1)
            if spec.get("gru"):  # AttentiveFP-style gated update of each atom's state
                self.embed = keras.layers.Dense(hidden, activation=activation)
                self.cells = [keras.layers.GRUCell(hidden) for _ in range(spec["num_layers"])]

        def call(self, x, edge_index, graph_ids, num_graphs, edge_attr=None, training=False):
            h = self.embed(x) if spec.get("gru") else x
            outputs = []
            for i, conv in enumerate(self.convs):
                extra = {"edge_attr": edge_attr} if use_edges else {}
                new = self.drop(conv(h, edge_index=edge_index, **extra), training=training)
                if spec.get("gru"):
                    new, _ = self.cells[i](new, [h], training=training)
                h = h + new if spec.get("residual") and i > 0 else new
                outputs.append(h)
            if spec.get("jk"):  # jumping knowledge: the readout sees every layer's output
                h = tf.concat(outputs, axis=-1)
            g = tf.concat(
                [r(h, graph_ids=graph_ids, num_graphs=num_graphs) for r in self.readouts], axis=-1
            )
            for dense in self.head:
                g = self.drop(dense(g), training=training)
            return self.out(g)[:, 0]

    return GNNRegressor()


def reads_bonds(spec) -> bool:
    """Whether the GNN of ``spec`` takes the bond features (only GraphAttention has edge_dim)."""
    return spec["layer"] == "gat" and bool(spec.get("edge_features"))


def describe_gnn(spec, edge_dim) -> str:
    """One sentence saying what ``build_gnn(spec, edge_dim)`` builds and how it is trained."""
    if spec["layer"] == "gat":
        bonds = f", edge_dim={edge_dim}" if reads_bonds(spec) else ""
        layer = (
            f"GraphAttention({spec['hidden'] // spec['heads']}, num_heads={spec['heads']}{bonds}) "
            f"(heads concatenated: {spec['hidden']} units)"
        )
    else:
        layer = f'GraphConv({spec["hidden"]}, normalization="mean")'
    embed = (
        f"atom features -> Dense {spec['hidden']} ({spec['activation'].upper()}) -> "
        if spec.get("gru")
        else ""
    )
    text = (
        f"{embed}{spec['num_layers']} x {layer}, {spec['activation'].upper()} -> "
        f"{' ‖ '.join(spec['readout'])} readout -> Dense {'-'.join(map(str, spec['head']))} (ReLU) -> 1"
    )
    if reads_bonds(spec):
        text += f", the {edge_dim} bond features entering every layer's attention scores"
    if spec.get("gru"):
        text += (
            ", each graph layer's output updating the atom states through a GRU cell (one per layer, "
            "AttentiveFP-style: h = GRUCell(layer(h), h))"
        )
    if spec.get("residual"):
        text += ", residual connections between graph layers"
    if spec["dropout"]:
        text += f", dropout {spec['dropout']:g} after every graph and dense layer"
    text += f"; Adam {spec['learning_rate']:g}"
    text += (
        f", learning rate halved after {spec['plateau']} epochs without improvement"
        if spec["plateau"]
        else ", constant learning rate"
    )
    return text + "."


def build_mlp():
    from lablib.backend import keras

    return keras.Sequential(
        [
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(1),
        ]
    )


# --------------------------------------------------------------------------- training


def fit(
    model,
    train_batches,
    val_batches,
    test_batches,
    predict,
    y_mean,
    y_std,
    seed,
    max_epochs,
    learning_rate,
    plateau=CONFIG["plateau"],
    patience=CONFIG["patience"],
):
    """Adam on standardised targets; keeps the best validation epoch; returns RMSEs and timing.

    ``*_batches`` are callables returning an iterable of ``(inputs tuple, y)``;
    ``predict(model, inputs, training)`` gives standardised predictions.
    """
    import tensorflow as tf

    from lablib.backend import keras

    optimizer = keras.optimizers.Adam(learning_rate)
    variables = None
    # one trace for every batch size and graph size
    first_inputs, first_y = next(iter(train_batches()))
    inputs_spec = tuple(tf.TensorSpec([None] * t.shape.rank, t.dtype) for t in first_inputs)
    y_spec = tf.TensorSpec([None], tf.float32)
    predict(model, first_inputs, False)  # build the weights with the real feature sizes

    @tf.function(input_signature=[inputs_spec, y_spec])
    def train_step(inputs, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(predict(model, inputs, True) - (y - y_mean) / y_std))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    @tf.function(input_signature=[inputs_spec])
    def predict_step(inputs):
        return predict(model, inputs, False) * y_std + y_mean

    def predictions(batches):
        return np.concatenate([np.asarray(predict_step(inputs)) for inputs, _ in batches()])

    def rmse(batches):
        return float(np.sqrt(np.mean((predictions(batches) - targets(batches)) ** 2)))

    best, best_epoch, best_weights, waited, since_improvement = np.inf, 0, None, 0, 0
    epoch_seconds = []
    for epoch in range(max_epochs):
        start = time.perf_counter()
        for inputs, y in train_batches():
            train_step(inputs, y)
        epoch_seconds.append(time.perf_counter() - start)
        score = rmse(val_batches)
        if variables is None:
            variables = model.trainable_variables
        if score < best:
            best, best_epoch, waited, since_improvement = score, epoch + 1, 0, 0
            best_weights = [v.numpy() for v in variables]
        else:
            waited += 1
            since_improvement += 1
            if plateau and since_improvement >= plateau:
                optimizer.learning_rate.assign(optimizer.learning_rate * 0.5)
                since_improvement = 0
            if waited >= patience:
                break
    for variable, value in zip(variables, best_weights):
        variable.assign(value)
    return {
        "val": best,
        "test": rmse(test_batches),
        "predictions": {"val": predictions(val_batches), "test": predictions(test_batches)},
        "best_epoch": best_epoch,
        "epochs": epoch + 1,
        "seconds": float(sum(epoch_seconds)),
        "seconds_per_epoch": statistics.median(epoch_seconds[1:] or epoch_seconds),
    }


def targets(batches) -> np.ndarray:
    return np.concatenate([np.asarray(y) for _, y in batches()])


def graph_batches(dataset, shuffle, seed, edges=False, batch_size=None):
    """A callable giving disjoint batches ``((x, edge_index, graph_ids, num_graphs[, edge_attr]), y)``."""
    import tensorflow as tf

    from lablib import graphs

    batch_size = batch_size or CONFIG["batch_size"]
    rng = np.random.default_rng(seed)

    def make(indices):
        batch = graphs.disjoint_batch(
            [dataset.x[i] for i in indices],
            [dataset.edge_index[i] for i in indices],
            edge_attr=[dataset.edge_attr[i] for i in indices] if edges else None,
        )
        x, edge_index, graph_ids = batch[:3]
        inputs = (
            tf.constant(x, tf.float32),
            tf.constant(edge_index, tf.int32),
            tf.constant(graph_ids, tf.int32),
            tf.constant(len(indices), tf.int32),
        ) + ((tf.constant(batch[3], tf.float32),) if edges else ())
        return inputs, tf.constant(dataset.y[indices], tf.float32)

    if not shuffle:
        order = np.arange(len(dataset))
        fixed = [make(order[i : i + batch_size]) for i in range(0, len(order), batch_size)]
        return lambda: fixed

    def batches():
        order = rng.permutation(len(dataset))
        for i in range(0, len(order), batch_size):
            yield make(order[i : i + batch_size])

    return batches


def array_batches(x, y, shuffle, seed, batch_size=64):
    import tensorflow as tf

    rng = np.random.default_rng(seed)

    def batches():
        order = rng.permutation(len(y)) if shuffle else np.arange(len(y))
        for i in range(0, len(order), batch_size):
            part = order[i : i + batch_size]
            yield (tf.constant(x[part]),), tf.constant(y[part], tf.float32)

    return batches


def run_seed(
    dataset, fingerprints, seed, models, max_epochs, ensemble=1, validation_only=False, quick=False
):
    """Trains ``models`` on the split of ``seed``; returns ``{model name: result}``.

    "GNN GraphAttention" is an ensemble of ``ensemble`` models (initialisation and batch
    order seeded ``seed + 1000 * k``; member 0 is the single model, reported as
    "GNN GraphAttention (single model)" beside the ensemble). ``validation_only`` puts
    the validation set where the test set goes (for choosing settings without test RMSE).
    ``quick``: ``max_epochs`` (2) also overrides a spec's own ``max_epochs``.
    """
    from lablib.backend import keras

    train, val, test = dataset.split(method="random", fractions=(0.8, 0.1, 0.1), seed=seed)
    if validation_only:
        test = val
    y_mean, y_std = float(np.mean(train.y)), float(np.std(train.y))
    results = {"mean": {"test": float(np.sqrt(np.mean((test.y - y_mean) ** 2))), "seconds": 0.0}}

    # the split's index order, recovered for the fingerprints (split() returns subsets)
    position = {s: i for i, s in enumerate(dataset.smiles)}
    fp = {
        name: fingerprints[[position[s] for s in part.smiles]]
        for name, part in (("train", train), ("val", val), ("test", test))
    }

    for name in models:
        keras.utils.set_random_seed(seed)
        if name == "fingerprint MLP":
            model = build_mlp()
            result = fit(
                model,
                array_batches(fp["train"], train.y, True, seed),
                array_batches(fp["val"], val.y, False, seed),
                array_batches(fp["test"], test.y, False, seed),
                lambda m, inputs, t: m(inputs[0], training=t)[:, 0],
                y_mean,
                y_std,
                seed,
                max_epochs,
                MLP_LEARNING_RATE,
            )
        else:
            spec = GNN_SPECS[name]
            members = []
            for k in range(ensemble if name == ENSEMBLED else 1):
                member_seed = seed + 1000 * k
                keras.utils.set_random_seed(member_seed)
                model = build_gnn(spec, dataset.num_edge_features)
                edges = reads_bonds(spec)
                member = fit(
                    model,
                    graph_batches(train, True, member_seed, edges, spec.get("batch_size")),
                    graph_batches(val, False, seed, edges),
                    graph_batches(test, False, seed, edges),
                    lambda m, inputs, t: m(*inputs, training=t),
                    y_mean,
                    y_std,
                    member_seed,
                    max_epochs if quick else spec.get("max_epochs") or max_epochs,
                    spec["learning_rate"],
                    spec["plateau"],
                    spec.get("patience") or CONFIG["patience"],
                )
                members.append(member)
                if ensemble > 1 and name == ENSEMBLED:
                    print(
                        f"member {k} of seed {seed} {name}: { {key: v for key, v in member.items() if key != 'predictions'} }",
                        file=sys.stderr,
                        flush=True,
                    )
            result = members[0]
            if len(members) > 1:
                results[name + SINGLE] = {
                    key: v for key, v in members[0].items() if key != "predictions"
                }
                print(
                    f"seed {seed} {name + SINGLE}: {results[name + SINGLE]}",
                    file=sys.stderr,
                    flush=True,
                )
                val_y, test_y = np.asarray(val.y, np.float32), np.asarray(test.y, np.float32)
                average = {
                    part: np.mean([m["predictions"][part] for m in members], axis=0)
                    for part in ("val", "test")
                }
                result = {
                    "val": float(np.sqrt(np.mean((average["val"] - val_y) ** 2))),
                    "test": float(np.sqrt(np.mean((average["test"] - test_y) ** 2))),
                    "best_epoch": statistics.mean([m["best_epoch"] for m in members]),
                    "epochs": sum(m["epochs"] for m in members),
                    "seconds": float(sum(m["seconds"] for m in members)),
                    "seconds_per_epoch": statistics.median(
                        [m["seconds_per_epoch"] for m in members]
                    ),
                }
        result = {key: v for key, v in result.items() if key != "predictions"}
        results[name] = result
        print(f"seed {seed} {name}: {result}", file=sys.stderr, flush=True)
    return results


def parse_log(path, dataset) -> list:
    """Per-seed results from an earlier run's stderr (``seed 0 GNN GraphConv: {...}``), in seed order.

    Only seeds whose every logged model finished are kept; the mean predictor needs no
    training and is recomputed from the same split.
    """
    import re

    pattern = re.compile(r"^seed (\d+) (.+?): (\{.*\})\s*$")
    by_seed = {}
    with open(path, errors="replace") as handle:
        for line in handle:
            match = pattern.match(line)
            if match:
                by_seed.setdefault(int(match.group(1)), {})[match.group(2)] = ast.literal_eval(
                    match.group(3)
                )
    names = set().union(*by_seed.values()) if by_seed else set()
    runs = []
    for seed in sorted(by_seed):
        if set(by_seed[seed]) != names:
            continue
        train, _, test = dataset.split(method="random", fractions=(0.8, 0.1, 0.1), seed=seed)
        run = dict(by_seed[seed])
        run["mean"] = {"test": float(np.sqrt(np.mean((test.y - float(np.mean(train.y))) ** 2)))}
        runs.append(run)
    if not runs:
        raise SystemExit(f"--from-log: no seed with all its models finished in {path}")
    return runs


# --------------------------------------------------------------------------- main


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="1 seed, 2 epochs: checks the script runs"
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--seed-list",
        default=None,
        help="comma-separated seeds to run instead of 0..SEEDS-1, e.g. to split a run over processes "
        "whose stderr logs are then joined and rendered with --from-log",
    )
    parser.add_argument(
        "--models",
        default=",".join([*GNN_SPECS, "fingerprint MLP"]),
        help="comma-separated, from "
        + ", ".join(repr(m) for m in [*GNN_SPECS, "fingerprint MLP"])
        + " "
        "(default: all of them; the mean predictor is always reported)",
    )
    parser.add_argument(
        "--output",
        default=None,
        help="where to write the table (default results/esol.md; none with --quick)",
    )
    parser.add_argument(
        "--ensemble",
        type=int,
        default=3,
        help="models averaged in the GNN GraphAttention row (initialisation seeds seed + 1000 k); "
        "with more than 1, member 0 is also reported alone as the single-model row (default 3)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a GNN GraphAttention setting (exploration, repeatable), e.g. --set edge_features=1 "
        "--set dropout=0.1; keys: " + ", ".join(GNN_SPECS[ENSEMBLED]),
    )
    parser.add_argument(
        "--validation-only",
        action="store_true",
        help="exploration: the validation set stands in for the test set, so no test RMSE is computed "
        "(writes no results file unless --output is given)",
    )
    parser.add_argument(
        "--from-log",
        default=None,
        help="render the table from an earlier run's stderr (no training)",
    )
    args = parser.parse_args(argv)
    for item in args.set:
        key, _, value = item.partition("=")
        spec = GNN_SPECS[ENSEMBLED]
        if key not in spec or not value:
            parser.error(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(spec)}")
        try:  # a Python literal (0.1, True, ("sum", "max"), None), else the text itself ("graphconv")
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            parsed = value
        GNN_SPECS[ENSEMBLED] = {**spec, key: parsed}
    if args.ensemble < 1:
        parser.error("--ensemble must be at least 1")

    import tensorflow as tf

    from lablib.data import load_molecules
    from lablib.data.molecules import morgan_fingerprints

    tf.config.threading.set_inter_op_parallelism_threads(1)
    dataset = load_molecules("esol")
    fingerprints = morgan_fingerprints(dataset.smiles, radius=2, n_bits=2048)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = sorted(set(models) - {"fingerprint MLP", *GNN_SPECS})
    if unknown:
        parser.error(
            f"--models: unknown {unknown}; choose from {', '.join(map(repr, [*GNN_SPECS, 'fingerprint MLP']))}"
        )
    seeds = [0] if args.quick else list(range(args.seeds))
    if args.seed_list and not args.quick:
        seeds = [int(seed) for seed in args.seed_list.split(",") if seed.strip()]
    max_epochs = 2 if args.quick else CONFIG["max_epochs"]
    note = ""
    if args.from_log:
        runs = parse_log(args.from_log, dataset)
        models = [m for m in models if all(m in run for run in runs)]
        note = (
            f" Rendered from the per-seed lines logged in `{os.path.basename(args.from_log)}` (`--from-log`: the stderr "
            f"of one run, or of processes that split a run with `--seed-list` / `--models`, joined); a seed is shown "
            f"only when every model finished on it."
        )
        seeds = list(range(len(runs)))
    else:
        runs = [
            run_seed(
                dataset,
                fingerprints,
                seed,
                models,
                max_epochs,
                args.ensemble,
                args.validation_only,
                args.quick,
            )
            for seed in seeds
        ]
    if args.validation_only:
        note += (
            " Exploration run (`--validation-only`): the validation set stands in for the test set, so the "
            "test column repeats validation RMSE."
        )
    ensembled = ENSEMBLED in models and all(ENSEMBLED + SINGLE in run for run in runs)
    if ensembled:
        models.insert(models.index(ENSEMBLED) + 1, ENSEMBLED + SINGLE)

    c = CONFIG
    lines = [
        f"ESOL: {len(dataset)} molecules, {dataset.num_node_features} atom features; random 80/10/10 split per seed "
        f"(seeds 0..{len(seeds) - 1}); test RMSE in log(mol/L), mean ± std over {len(seeds)} seed(s).",
        "",
    ]
    for name in models:
        if name in GNN_SPECS:
            lines += [f"{name}: {describe_gnn(GNN_SPECS[name], dataset.num_edge_features)}", ""]
    if ensembled:
        k = args.ensemble
        lines += [
            f"GNN GraphAttention row: an ensemble of {k} such models per split, trained alike from different "
            "initialisation seeds (seed + 1000 k, which also seeds the batch order); their standardised predictions "
            "are averaged (validation RMSE of the averaged prediction; best epoch = mean over members; training "
            "time = sum over members). The single-model row is member k = 0 alone (the model without ensembling).",
            "",
        ]
    lines += [
        f"Training: standardised targets, Adam, ≤ {max_epochs} epochs, early stopping with patience {c['patience']} on "
        f"validation RMSE, best epoch restored; GNNs: batches of {c['batch_size']} molecules (disjoint edge_index batches)"
        + (
            f"; fingerprint MLP: Adam {MLP_LEARNING_RATE:g}, batches of 64, learning rate halved after {c['plateau']} epochs "
            "without improvement"
            if "fingerprint MLP" in models
            else ""
        )
        + ".",
        "",
        "| model | test RMSE | validation RMSE | best epoch (mean) | training time (s, mean) | s / epoch (median) |",
        "|---|---|---|---|---|---|",
    ]
    for name in ["mean"] + models:
        rows = [run[name] for run in runs]
        if name == "mean":
            lines.append(
                f"| mean of the training targets | {mean_std([r['test'] for r in rows])} | | | | |"
            )
            continue
        label = {
            "fingerprint MLP": "Morgan fingerprint MLP (r = 2, 2048 bits)",
            "GNN GraphConv": 'lablib GNN, GraphConv(normalization="mean"), no bond features',
            "GNN GraphAttention no bonds": f"lablib GNN, GraphAttention ({GNN_SPECS[ENSEMBLED]['heads']} heads), no bond features, single model",
            ENSEMBLED: f"lablib GNN, GraphAttention ({GNN_SPECS[ENSEMBLED]['heads']} heads)"
            + (", bond features" if reads_bonds(GNN_SPECS[ENSEMBLED]) else "")
            + (f", ensemble of {args.ensemble}" if ensembled else ""),
            ENSEMBLED
            + SINGLE: f"lablib GNN, GraphAttention ({GNN_SPECS[ENSEMBLED]['heads']} heads)"
            + (", bond features" if reads_bonds(GNN_SPECS[ENSEMBLED]) else "")
            + ", single model",
        }.get(name, name)
        lines.append(
            f"| {label} | {mean_std([r['test'] for r in rows])} | {mean_std([r['val'] for r in rows])} | "
            f"{statistics.mean([r['best_epoch'] for r in rows]):.0f} | {statistics.mean([r['seconds'] for r in rows]):.0f} | "
            f"{statistics.median([r['seconds_per_epoch'] for r in rows]):.2f} |"
        )
    lines += [
        "",
        "Target (from the issue): test RMSE ≤ 0.58 (MoleculeNet, random split: MPNN 0.58, graph convolution 0.97)."
        + note,
    ]
    output = args.output or (
        None
        if args.quick or args.validation_only
        else os.path.join(ROOT, "benchmarks", "results", "esol.md")
    )
    write_report(
        output,
        "ESOL: lablib GNN regression" + (" (--quick)" if args.quick else ""),
        "\n".join(lines),
    )


if __name__ == "__main__":
    main()
