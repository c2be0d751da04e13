"""MoleculeNet loaders and molecule featurisation on the real CSV files (RDKit)."""

import csv
import warnings

import numpy as np
import pytest
import tensorflow as tf

from lablib.data import GraphDataset, MoleculeDataset, load_molecules, smiles_to_graph
from lablib.data.molecules import (
    ATOM_FEATURE_NAMES,
    BOND_FEATURE_NAMES,
    morgan_fingerprints,
    murcko_scaffold,
)

F = len(ATOM_FEATURE_NAMES)


def column(name):
    return ATOM_FEATURE_NAMES.index(name)


@pytest.fixture(scope="module")
def esol(shared_data):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the real file has no bad SMILES, no checksum warning
        return load_molecules("esol", data_dir=shared_data)


@pytest.fixture(scope="module")
def freesolv(shared_data):
    return load_molecules("freesolv", data_dir=shared_data)


def read_csv(path, target):
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [r["smiles"] for r in rows], np.array([float(r[target]) for r in rows], dtype=np.float32)


# --------------------------------------------------------------------------- featurisation


def test_ethanol_by_hand():
    x, edge_index, edge_attr = smiles_to_graph("CCO")
    assert x.shape == (3, F) and x.dtype == np.float32
    assert edge_index.tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]
    assert edge_attr.shape == (4, len(BOND_FEATURE_NAMES))
    elements = [ATOM_FEATURE_NAMES[i] for i in x[:, :13].argmax(axis=1)]
    assert elements == ["element=C", "element=C", "element=O"]
    assert x[:, column("degree=1")].tolist() == [1, 0, 1]
    assert x[:, column("degree=2")].tolist() == [0, 1, 0]
    assert x[:, column("total_hydrogens=3")].tolist() == [1, 0, 0]
    assert x[:, column("total_hydrogens=2")].tolist() == [0, 1, 0]
    assert x[:, column("total_hydrogens=1")].tolist() == [0, 0, 1]
    assert x[:, column("hybridisation=SP3")].tolist() == [1, 1, 1]
    assert x[:, column("formal_charge=0")].tolist() == [1, 1, 1]
    assert not x[:, column("aromatic")].any() and not x[:, column("in_ring")].any()
    # five one-hot groups, each with exactly one column set per atom
    assert x[:, : column("aromatic")].sum(axis=1).tolist() == [5, 5, 5]
    assert edge_attr[:, BOND_FEATURE_NAMES.index("bond=single")].tolist() == [1, 1, 1, 1]
    assert edge_attr[:, 1:].sum() == 0


def test_benzene_charges_and_other_elements():
    x, edge_index, edge_attr = smiles_to_graph("c1ccccc1")
    assert x.shape == (6, F) and edge_index.shape == (2, 12)
    assert x[:, column("aromatic")].all() and x[:, column("in_ring")].all()
    assert x[:, column("hybridisation=SP2")].all()
    assert edge_attr[:, BOND_FEATURE_NAMES.index("bond=aromatic")].all()
    assert edge_attr[:, BOND_FEATURE_NAMES.index("conjugated")].all()
    x, edge_index, _ = smiles_to_graph("[Na+].[Cl-]")
    assert edge_index.shape == (2, 0)
    assert x[0, column("element=other")] == 1 and x[1, column("element=Cl")] == 1
    assert x[0, column("formal_charge=+1")] == 1 and x[1, column("formal_charge=-1")] == 1
    x, _, edge_attr = smiles_to_graph("C#N")
    assert edge_attr[0, BOND_FEATURE_NAMES.index("bond=triple")] == 1
    assert x[:, column("hybridisation=SP")].all()
    # every bond gives its two directions with the same features
    x, edge_index, edge_attr = smiles_to_graph("CC(=O)Nc1ccc(O)cc1")
    np.testing.assert_array_equal(edge_index[:, 0::2], edge_index[::-1, 1::2])
    np.testing.assert_array_equal(edge_attr[0::2], edge_attr[1::2])


def test_invalid_smiles_raises_a_clear_error():
    with pytest.raises(ValueError, match="could not parse the SMILES 'C1CC'"):
        smiles_to_graph("C1CC")
    with pytest.raises(ValueError, match="could not parse"):
        smiles_to_graph("")


# --------------------------------------------------------------------------- loaders


@pytest.mark.parametrize(
    "name, file_name, target, rows",
    [
        ("esol", "delaney-processed.csv", "measured log solubility in mols per litre", 1128),
        ("freesolv", "SAMPL.csv", "expt", 642),
    ],
)
def test_rows_and_targets_match_the_csv(shared_data, esol, freesolv, name, file_name, target, rows):
    dataset = {"esol": esol, "freesolv": freesolv}[name]
    smiles, values = read_csv(shared_data / "molecules" / file_name, target)
    assert len(dataset) == len(smiles) == rows
    assert dataset.skipped == []
    assert dataset.smiles == [s.strip() for s in smiles]  # one ESOL SMILES ends in a space
    assert not any(s.endswith("\r") for s in dataset.smiles)  # CRLF files
    assert dataset.y.dtype == np.float32
    np.testing.assert_array_equal(dataset.y, values)
    assert dataset.target_name == target


def test_lipophilicity(shared_data):
    dataset = load_molecules("Lipophilicity", data_dir=shared_data)
    assert len(dataset) == 4200 and dataset.skipped == []
    assert dataset.y[0] == np.float32(3.54)  # first row: CHEMBL596271, 3.54
    assert dataset.max_nodes == 115


def test_feature_shapes(esol):
    assert esol.num_node_features == F == 37
    assert esol.num_edge_features == 6
    assert esol.feature_names == ATOM_FEATURE_NAMES
    for x, edge_index, edge_attr in zip(esol.x, esol.edge_index, esol.edge_attr):
        assert x.ndim == 2 and x.shape[1] == F
        assert edge_index.shape[0] == 2 and edge_index.shape[1] % 2 == 0
        assert edge_attr.shape == (edge_index.shape[1], 6)
        assert edge_index.size == 0 or edge_index.max() < x.shape[0]
    assert sum(x.shape[0] for x in esol.x) == esol.num_nodes.sum()
    first = esol[0]
    assert first[0] is esol.x[0] and first[2] == esol.y[0]


def test_bad_smiles_are_skipped_and_reported(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_bytes(
        b"name,smiles,logS\r\n"
        b"ethanol,CCO,1.1\r\n"
        b"broken,C1CC,2.2\r\n"
        b"benzene,c1ccccc1,3.3\r\n"
        b"nonsense,not_a_molecule,4.4\r\n"
        b"water,O,5.5\r\n"
    )
    with pytest.warns(UserWarning, match=r"2 of 5 SMILES could not be parsed.*row 2: 'C1CC'"):
        dataset = MoleculeDataset.from_csv(path, target_column="logS")
    assert len(dataset) == 3
    assert dataset.skipped == [(2, "C1CC"), (4, "not_a_molecule")]
    assert dataset.smiles == ["CCO", "c1ccccc1", "O"]
    np.testing.assert_allclose(dataset.y, [1.1, 3.3, 5.5])
    assert [x.shape[0] for x in dataset.x] == [3, 6, 1]


def test_bad_csv_columns_and_names(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("smiles,value\nCCO,abc\n")
    with pytest.raises(
        ValueError, match=r"no column 'logS'; its columns are \['smiles', 'value'\]"
    ):
        MoleculeDataset.from_csv(path, target_column="logS")
    with pytest.raises(ValueError, match="data row 1: target 'value' is 'abc'"):
        MoleculeDataset.from_csv(path, target_column="value")
    with pytest.raises(ValueError, match="choose one of esol, freesolv, lipophilicity"):
        load_molecules("tox21")


# --------------------------------------------------------------------------- splits


def test_random_split(esol):
    train, valid, test = esol.split("random", seed=0)
    assert (len(train), len(valid), len(test)) == (902, 112, 114)
    assert isinstance(train, MoleculeDataset)
    together = train.smiles + valid.smiles + test.smiles
    assert sorted(together) == sorted(esol.smiles)
    again = esol.split("random", seed=0)
    assert again[0].smiles == train.smiles
    assert esol.split("random", seed=1)[0].smiles != train.smiles
    # targets travel with their molecules
    position = {s: i for i, s in enumerate(esol.smiles)}
    assert all(esol.y[position[s]] == y for s, y in zip(test.smiles, test.y))
    with pytest.raises(ValueError, match="summing to 1"):
        esol.split("random", fractions=(0.8, 0.3, 0.1))
    with pytest.raises(ValueError, match='method must be "random" or "scaffold"'):
        esol.split("stratified")


@pytest.mark.parametrize("name", ["esol", "freesolv"])
def test_scaffold_split_shares_no_scaffold(esol, freesolv, name):
    dataset = {"esol": esol, "freesolv": freesolv}[name]
    parts = dataset.split("scaffold")
    n = len(dataset)
    assert sum(len(p) for p in parts) == n
    assert len(parts[0]) <= int(0.8 * n) and len(parts[1]) <= int(0.1 * n)
    assert len(parts[0]) >= int(0.8 * n) - 20  # filled up to (nearly) its share
    scaffolds = [{murcko_scaffold(s) for s in part.smiles} for part in parts]
    assert not scaffolds[0] & scaffolds[1]
    assert not scaffolds[0] & scaffolds[2]
    assert not scaffolds[1] & scaffolds[2]
    assert [p.smiles for p in dataset.split("scaffold")] == [p.smiles for p in parts]


# --------------------------------------------------------------------------- batches


def test_dense_dataset(esol):
    small = esol[:40]
    batches = list(small.dense_dataset(batch_size=16).as_numpy_iterator())
    assert [len(b[1]) for b in batches] == [16, 16, 8]
    assert int(small.dense_dataset(batch_size=16).cardinality()) == 3  # known to Keras' fit
    assert int(small.disjoint_dataset(batch_size=16, drop_remainder=True).cardinality()) == 2
    (x, adjacency, mask), y = batches[0]
    n = max(g.shape[0] for g in small.x[:16])
    assert x.shape == (16, n, F) and adjacency.shape == (16, n, n) and mask.shape == (16, n)
    assert mask.dtype == bool and y.dtype == np.float32
    np.testing.assert_array_equal(y, small.y[:16])
    np.testing.assert_array_equal(mask.sum(axis=1), small.num_nodes[:16])
    source, target = small.edge_index[3]
    assert adjacency[3, target, source].all()
    assert adjacency[3].sum() == small.edge_index[3].shape[1]
    np.testing.assert_array_equal(x[3, : small.x[3].shape[0]], small.x[3])
    assert not x[~mask].any()
    fixed = next(iter(small.dense_dataset(batch_size=8, max_nodes=esol.max_nodes)))
    assert fixed[0][0].shape == (8, esol.max_nodes, F)
    with pytest.raises(ValueError, match="max_nodes=5 but the largest graph has"):
        small.dense_dataset(batch_size=8, max_nodes=5)


def test_shuffled_batches_cover_every_graph_once_per_epoch(esol):
    small = esol[:50]
    dataset = small.dense_dataset(batch_size=16, shuffle=True, seed=3)
    first = np.concatenate([y for _, y in dataset.as_numpy_iterator()])
    second = np.concatenate([y for _, y in dataset.as_numpy_iterator()])
    assert sorted(first.tolist()) == sorted(small.y.tolist()) == sorted(second.tolist())
    assert not np.array_equal(first, second)  # a new order every epoch
    again = np.concatenate(
        [y for _, y in small.dense_dataset(16, shuffle=True, seed=3).as_numpy_iterator()]
    )
    np.testing.assert_array_equal(first, again)


def test_disjoint_dataset(esol):
    small = esol[:20]
    (x, edge_index, graph_ids), y = next(
        iter(small.disjoint_dataset(batch_size=8).as_numpy_iterator())
    )
    sizes = small.num_nodes[:8]
    assert x.shape == (sizes.sum(), F)
    assert graph_ids.tolist() == np.repeat(np.arange(8), sizes).tolist()
    assert edge_index.shape == (2, sum(e.shape[1] for e in small.edge_index[:8]))
    assert (graph_ids[edge_index[0]] == graph_ids[edge_index[1]]).all()
    offset = sizes[0]
    np.testing.assert_array_equal(
        edge_index[:, small.edge_index[0].shape[1] :][:, :4], small.edge_index[1][:, :4] + offset
    )
    np.testing.assert_array_equal(y, small.y[:8])


def test_edge_feature_names_default_to_the_width_of_edge_attr():
    x = [np.ones((2, 3)), np.ones((1, 3))]
    e = [np.array([[0, 1], [1, 0]]), np.zeros((2, 0))]
    f = [np.ones((2, 4)), np.zeros((0, 4))]
    dataset = GraphDataset(x, e, np.zeros(2), edge_attr=f)
    assert dataset.num_edge_features == 4 and dataset.edge_feature_names[-1] == "edge_feature_3"
    with pytest.raises(ValueError, match="2 edge feature names for 4 edge features"):
        GraphDataset(x, e, np.zeros(2), edge_attr=f, edge_feature_names=["a", "b"])
    with pytest.raises(
        ValueError, match=r"every edge_attr\[i\] must be \[E_i, D\] with the same D"
    ):
        GraphDataset(x, e, np.zeros(2), edge_attr=[np.ones((2, 4)), np.ones((1, 3))])


def test_datasets_with_edge_features(esol):
    small = esol[:12]
    D = small.num_edge_features
    assert D == len(small.edge_feature_names) == 6
    (x, edge_index, graph_ids, f), _ = next(
        iter(small.disjoint_dataset(batch_size=5, with_edge_attr=True))
    )
    assert f.shape == (edge_index.shape[1], D) and f.dtype == tf.float32
    np.testing.assert_array_equal(f.numpy(), np.concatenate(small.edge_attr[:5]))
    (x, adjacency, mask, fd), _ = next(iter(small.dense_dataset(batch_size=5, with_edge_attr=True)))
    assert fd.shape == adjacency.shape + (D,)
    source, target = small.edge_index[2]
    np.testing.assert_array_equal(fd.numpy()[2, target, source], small.edge_attr[2])
    assert int(small.dense_dataset(batch_size=5, with_edge_attr=True).cardinality()) == 3
    no_edges = GraphDataset(small.x, small.edge_index, small.y)
    with pytest.raises(
        ValueError, match=r"with_edge_attr=True but this dataset has no edge features"
    ):
        no_edges.disjoint_dataset(4, with_edge_attr=True)
    from lablib import LablibDeprecationWarning

    with pytest.warns(LablibDeprecationWarning, match="use `with_edge_attr`"):
        (_, _, _, old), _ = next(iter(small.dense_dataset(batch_size=5, edge_attr=True)))
    np.testing.assert_array_equal(old.numpy(), fd.numpy())


# --------------------------------------------------------------------------- fingerprints


def test_morgan_fingerprints(esol):
    fingerprints = morgan_fingerprints(esol.smiles[:20], radius=2, n_bits=1024)
    assert fingerprints.shape == (20, 1024) and fingerprints.dtype == np.float32
    assert set(np.unique(fingerprints)) <= {0.0, 1.0}
    assert (fingerprints.sum(axis=1) > 0).all()
    same = morgan_fingerprints(["CCO", "OCC", "c1ccccc1"], n_bits=256)
    np.testing.assert_array_equal(same[0], same[1])  # same molecule, other spelling
    assert not np.array_equal(same[0], same[2])
    assert morgan_fingerprints(esol[:3]).shape == (3, 2048)
    assert morgan_fingerprints("CCO").shape == (1, 2048)
    with pytest.raises(ValueError, match=r"1 SMILES could not be parsed, e.g. \[\(1, 'C1CC'\)\]"):
        morgan_fingerprints(["CCO", "C1CC"])
