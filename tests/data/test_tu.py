"""TU-format graph datasets (MUTAG) on the real files in shared/data/molecules/MUTAG."""

import numpy as np
import pytest

from lablib.data import DataNotFoundError, load_tu_dataset
from lablib.data.graph_dataset import GraphDataset
from lablib.data.tu import TUDataset, read_tu_folder


@pytest.fixture(scope="module")
def mutag(shared_data):
    return load_tu_dataset("MUTAG", data_dir=shared_data)


@pytest.fixture(scope="module")
def raw(shared_data):
    folder = shared_data / "molecules" / "MUTAG"
    return {
        suffix: np.loadtxt(folder / f"MUTAG_{suffix}.txt", delimiter=",", dtype=int, ndmin=2)
        for suffix in ("A", "graph_indicator", "graph_labels", "node_labels", "edge_labels")
    }


def test_published_sizes_and_labels(mutag):
    assert isinstance(mutag, TUDataset) and isinstance(mutag, GraphDataset)
    assert len(mutag) == 188
    assert mutag.num_nodes.sum() == 3371
    assert mutag.label_values.tolist() == [-1, 1]
    assert mutag.num_classes == 2
    assert mutag.y.dtype == np.int64
    assert np.bincount(mutag.y).tolist() == [63, 125]  # 125 mutagenic (label 1)


def test_graphs_follow_the_indicator(mutag, raw):
    indicator = raw["graph_indicator"][:, 0]
    np.testing.assert_array_equal(mutag.num_nodes, np.bincount(indicator)[1:])
    labels = raw["graph_labels"][:, 0]
    np.testing.assert_array_equal(mutag.label_values[mutag.y], labels)


def test_node_features_are_one_hot_atom_types(mutag, raw):
    assert mutag.num_node_features == 7
    assert mutag.feature_names[:3] == ("node_label=C", "node_label=N", "node_label=O")
    x = np.concatenate(mutag.x)
    assert x.shape == (3371, 7)
    np.testing.assert_array_equal(x.sum(axis=1), 1)
    np.testing.assert_array_equal(x.argmax(axis=1), raw["node_labels"][:, 0])


def test_edges_are_local_symmetric_and_labelled(mutag, raw):
    assert sum(e.shape[1] for e in mutag.edge_index) == len(raw["A"]) == 7442
    for x, edge_index in zip(mutag.x, mutag.edge_index):
        assert edge_index.min() >= 0 and edge_index.max() < x.shape[0]
        pairs = set(zip(*edge_index.tolist()))
        assert all((t, s) in pairs for s, t in pairs)
        assert not any(s == t for s, t in pairs)
    # graph 0: its edges are the first lines of MUTAG_A.txt, shifted to 0-based ids
    first = raw["A"][: mutag.edge_index[0].shape[1]] - 1
    np.testing.assert_array_equal(mutag.edge_index[0], first.T)
    assert mutag.edge_feature_names == (
        "edge_label=aromatic",
        "edge_label=single",
        "edge_label=double",
        "edge_label=triple",
    )
    edge_attr = np.concatenate(mutag.edge_attr)
    np.testing.assert_array_equal(
        edge_attr.argmax(axis=1),
        np.concatenate(
            [
                raw["edge_labels"][:, 0][
                    np.argsort(raw["graph_indicator"][raw["A"][:, 0] - 1, 0], kind="stable")
                ]
            ]
        ),
    )


def test_split_and_batches(mutag):
    train, valid, test = mutag.split("random", seed=0)
    assert (len(train), len(valid), len(test)) == (150, 18, 20)
    assert isinstance(train, TUDataset) and train.num_classes == 2
    with pytest.raises(ValueError, match="scaffold split needs the molecules' SMILES"):
        mutag.split("scaffold")
    (x, adjacency, mask), y = next(iter(mutag.dense_dataset(batch_size=32)))
    assert x.shape == (32, int(mutag.num_nodes[:32].max()), 7)
    assert y.dtype.name == "int64"
    np.testing.assert_array_equal(y.numpy(), mutag.y[:32])
    np.testing.assert_array_equal(mask.numpy().sum(axis=1), mutag.num_nodes[:32])
    (x, edge_index, graph_ids), y = next(iter(mutag.disjoint_dataset(batch_size=10)))
    assert x.shape == (mutag.num_nodes[:10].sum(), 7)
    assert edge_index.shape == (2, sum(e.shape[1] for e in mutag.edge_index[:10]))
    assert int(graph_ids[-1]) == 9


def test_inconsistent_files_are_explained(shared_data, tmp_path):
    source = shared_data / "molecules" / "MUTAG"
    for path in source.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    with open(tmp_path / "MUTAG_A.txt", "a") as handle:
        handle.write("1, 9999\n")
    with pytest.raises(ValueError, match=r"node ids must be within 1..3371"):
        read_tu_folder(tmp_path, "MUTAG")
    (tmp_path / "MUTAG_graph_labels.txt").unlink()
    with pytest.raises(FileNotFoundError, match="MUTAG_graph_labels.txt is missing"):
        read_tu_folder(tmp_path, "MUTAG")


def test_other_tu_datasets_come_from_data_dir(shared_data, tmp_path):
    folder = tmp_path / "TINY"
    folder.mkdir()
    (folder / "TINY_A.txt").write_text("1, 2\n2, 1\n3, 4\n4, 3\n4, 5\n5, 4\n")
    (folder / "TINY_graph_indicator.txt").write_text("1\n1\n2\n2\n2\n")
    (folder / "TINY_graph_labels.txt").write_text("3\n7\n")
    tiny = load_tu_dataset("TINY", data_dir=tmp_path)
    assert len(tiny) == 2 and tiny.y.tolist() == [0, 1] and tiny.label_values.tolist() == [3, 7]
    assert tiny.feature_names == ("constant",)
    assert tiny.edge_index[1].tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]
    with pytest.raises(DataNotFoundError, match="not in lablib's registry"):
        load_tu_dataset("PROTEINS")
