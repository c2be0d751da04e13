"""Graph classification datasets in the TU Dortmund format (MUTAG and friends).

A TU dataset ``DS`` is a folder of comma-separated text files with 1-based ids:

* ``DS_A.txt``: one line ``source, target`` per directed edge (all graphs together);
* ``DS_graph_indicator.txt``: line ``i`` is the graph of node ``i``;
* ``DS_graph_labels.txt``: line ``g`` is the class of graph ``g``;
* optional ``DS_node_labels.txt``, ``DS_edge_labels.txt`` (categorical, one-hot
  encoded here) and ``DS_node_attributes.txt`` (real-valued, appended to the
  node features).

The result is a :class:`TUDataset`, a :class:`lablib.data.graph_dataset.GraphDataset`:
the same ``len``, ``x``, ``edge_index``, ``edge_attr``, ``y``, ``split`` and
``dense_dataset`` / ``disjoint_dataset`` as the molecule datasets.

Example::

    from lablib.data import load_tu_dataset
    mutag = load_tu_dataset("MUTAG", data_dir="../shared/data")
    len(mutag), mutag.num_node_features, mutag.num_classes     # 188, 7, 2
"""

from __future__ import annotations

import pathlib

import numpy as np

from lablib.data import sources
from lablib.data.graph_dataset import GraphDataset

__all__ = ["load_tu_dataset", "read_tu_folder", "TUDataset"]

# Label meanings from the MUTAG README.txt.
_KNOWN_NAMES = {
    "MUTAG": {
        "node": ("C", "N", "O", "F", "I", "Cl", "Br"),
        "edge": ("aromatic", "single", "double", "triple"),
    }
}


class TUDataset(GraphDataset):
    """Graphs of a TU dataset, with integer class labels.

    Attributes (besides those of :class:`lablib.data.graph_dataset.GraphDataset`):
        y: int64 ``[num_graphs]`` class ids ``0..num_classes-1``.
        label_values: the original label of each class id (MUTAG: ``[-1, 1]``, so class
            1 is "mutagenic").
        num_classes: number of classes.

    Example::

        train, valid, test = load_tu_dataset("MUTAG").split("random", seed=0)
    """

    _target_dtype = np.int64

    def __init__(
        self,
        x,
        edge_index,
        y,
        label_values,
        edge_attr=None,
        feature_names=None,
        edge_feature_names=None,
        name=None,
    ):
        super().__init__(x, edge_index, y, edge_attr, feature_names, edge_feature_names, name)
        self.label_values = np.asarray(label_values)

    @property
    def num_classes(self) -> int:
        """Number of graph classes."""
        return len(self.label_values)


def _read_ints(path: pathlib.Path, columns: int | None = None) -> np.ndarray:
    try:
        values = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=2)
    except ValueError as error:
        raise ValueError(f"{path}: expected comma-separated integers ({error}).") from None
    if columns is not None and values.shape[1] != columns:
        raise ValueError(f"{path}: expected {columns} column(s) per line, found {values.shape[1]}.")
    return values


def _one_hot(values: np.ndarray, names, prefix: str):
    """One-hot encode every column of ``values`` [rows, k]; return (matrix, names)."""
    blocks, labels = [], []
    for column in range(values.shape[1]):
        categories, codes = np.unique(values[:, column], return_inverse=True)
        block = np.zeros((len(values), len(categories)), dtype=np.float32)
        block[np.arange(len(values)), codes] = 1.0
        blocks.append(block)
        known = (
            names
            if (
                names is not None
                and values.shape[1] == 1
                and categories.min() >= 0
                and categories.max() < len(names)
            )
            else None
        )
        labels += [f"{prefix}={known[c] if known else c}" for c in categories]
    return np.concatenate(blocks, axis=1), labels


def read_tu_folder(folder, name: str) -> TUDataset:
    """Parse the TU files ``folder/name_*.txt`` into a :class:`TUDataset`.

    Node features: the one-hot node labels (one block per label column), then the
    node attributes if present; graphs with neither get a constant feature 1.
    Edge features: the one-hot edge labels, if present. Edges are kept as listed
    (TU lists an undirected bond in both directions).

    Args:
        folder: the folder holding the files.
        name: the dataset prefix (``"MUTAG"`` for ``MUTAG_A.txt``...).

    Returns:
        A :class:`TUDataset`.

    Raises:
        FileNotFoundError: a required file is missing.
        ValueError: the files disagree (sizes, ids out of range, an edge between graphs).

    Example::

        dataset = read_tu_folder("../shared/data/molecules/MUTAG", "MUTAG")
    """
    folder = pathlib.Path(folder)

    def path(suffix):
        return folder / f"{name}_{suffix}.txt"

    edges, indicator, raw_labels = _read_structure(path, name)
    num_nodes, num_graphs = len(indicator), len(raw_labels)
    edge_graph = indicator[edges[:, 0]]
    known = _KNOWN_NAMES.get(name, {})
    features, feature_names = _node_features(path, known, num_nodes)
    edge_features, edge_names = None, ()
    if path("edge_labels").is_file():
        edge_labels = _read_ints(path("edge_labels"))
        if len(edge_labels) != len(edges):
            raise ValueError(
                f"{path('edge_labels')} has {len(edge_labels)} lines for {len(edges)} edges."
            )
        edge_features, edge_names = _one_hot(edge_labels, known.get("edge"), "edge_label")

    label_values, y = np.unique(raw_labels, return_inverse=True)
    node_counts = np.bincount(indicator, minlength=num_graphs)
    starts = np.concatenate([[0], np.cumsum(node_counts)[:-1]])
    order = np.argsort(edge_graph, kind="stable")
    edge_cuts = np.cumsum(np.bincount(edge_graph, minlength=num_graphs))[:-1]
    node_cuts = np.cumsum(node_counts)[:-1]
    x = np.split(features, node_cuts)
    edge_lists = [(part - starts[g]).T for g, part in enumerate(np.split(edges[order], edge_cuts))]
    edge_attr = None if edge_features is None else np.split(edge_features[order], edge_cuts)
    return TUDataset(
        x,
        edge_lists,
        y,
        label_values,
        edge_attr=edge_attr,
        feature_names=feature_names,
        edge_feature_names=edge_names,
        name=name,
    )


def _read_structure(path, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The TU files every dataset has, checked: ``(edges [E, 2], graph of each node,
    graph labels)``, ids from 0 (``path(suffix)``: the file ``<name>_<suffix>.txt``)."""
    for suffix in ("A", "graph_indicator", "graph_labels"):
        if not path(suffix).is_file():
            raise FileNotFoundError(
                f"{path(suffix)} is missing: a TU dataset needs {name}_A.txt, "
                f"{name}_graph_indicator.txt and {name}_graph_labels.txt."
            )
    edges = _read_ints(path("A"), 2) - 1
    indicator = _read_ints(path("graph_indicator"), 1)[:, 0] - 1
    raw_labels = _read_ints(path("graph_labels"), 1)[:, 0]
    num_nodes, num_graphs = len(indicator), len(raw_labels)
    if indicator.min() < 0 or indicator.max() >= num_graphs or np.any(np.diff(indicator) < 0):
        raise ValueError(
            f"{path('graph_indicator')}: graph ids must be sorted and within 1..{num_graphs} "
            f"(the number of lines of {path('graph_labels').name})."
        )
    if edges.size and (edges.min() < 0 or edges.max() >= num_nodes):
        raise ValueError(
            f"{path('A')}: node ids must be within 1..{num_nodes}, found {edges.min() + 1}..{edges.max() + 1}."
        )
    crossing = np.flatnonzero(indicator[edges[:, 0]] != indicator[edges[:, 1]])
    if crossing.size:
        raise ValueError(
            f"{path('A')}: line {crossing[0] + 1} joins nodes of two different graphs."
        )
    return edges, indicator, raw_labels


def _node_features(path, known: dict, num_nodes: int) -> tuple[np.ndarray, list[str]]:
    """The node features and their names: one-hot node labels, then node attributes; a
    constant 1 when the dataset has neither."""
    feature_blocks, feature_names = [], []
    if path("node_labels").is_file():
        node_labels = _read_ints(path("node_labels"))
        if len(node_labels) != num_nodes:
            raise ValueError(
                f"{path('node_labels')} has {len(node_labels)} lines for {num_nodes} nodes."
            )
        block, labels = _one_hot(node_labels, known.get("node"), "node_label")
        feature_blocks.append(block)
        feature_names += labels
    if path("node_attributes").is_file():
        attributes = np.loadtxt(path("node_attributes"), delimiter=",", dtype=np.float32, ndmin=2)
        feature_blocks.append(attributes)
        feature_names += [f"node_attribute_{i}" for i in range(attributes.shape[1])]
    if not feature_blocks:
        feature_blocks.append(np.ones((num_nodes, 1), dtype=np.float32))
        feature_names.append("constant")
    return np.concatenate(feature_blocks, axis=1), feature_names


def load_tu_dataset(name: str = "MUTAG", data_dir=None) -> TUDataset:
    """Load a TU graph classification dataset.

    ``"MUTAG"`` (188 nitro compounds, mutagenic or not, 3,371 atoms) is in lablib's
    registry and found or downloaded like every dataset (see
    :mod:`lablib.data.sources`). Any other TU dataset is read from ``data_dir``: its
    files in ``data_dir/NAME/``, ``data_dir/molecules/NAME/`` or ``data_dir`` itself.

    Args:
        name: the dataset name as in the file names, e.g. ``"MUTAG"``.
        data_dir: a data folder (for MUTAG: holding ``molecules/MUTAG/``).

    Returns:
        A :class:`TUDataset` with int64 class ids ``y``.

    Raises:
        DataNotFoundError: the files are nowhere (and, for MUTAG, cannot be downloaded).
        ValueError: the files are inconsistent.

    Example::

        mutag = load_tu_dataset("MUTAG", data_dir="../shared/data")
        for (x, adjacency, mask), y in mutag.dense_dataset(batch_size=32):
            ...
    """
    registry = sources.load_registry()
    key = str(name).strip()
    if key.lower() in registry and registry[key.lower()]["folder"].endswith(key.upper()):
        key = key.upper()
        folder = sources.dataset_path(key.lower(), data_dir)
        return read_tu_folder(folder, key)
    if data_dir is not None:
        root = pathlib.Path(data_dir).expanduser()
        for folder in (root / key, root / "molecules" / key, root):
            if (folder / f"{key}_A.txt").is_file():
                return read_tu_folder(folder, key)
    raise sources.DataNotFoundError(
        f"TU dataset {name!r} is not in lablib's registry (which has MUTAG) and was not "
        f"found in data_dir={str(data_dir) if data_dir is not None else None!r}. Download "
        f"{key}.zip from https://chrsmrrs.github.io/datasets/, extract it and pass "
        f"data_dir= the folder holding {key}/."
    )
