"""Cora (Planetoid split) on the real files in shared/data/cora."""

import numpy as np
import pytest

from lablib.data import CoraData, load_cora
from lablib.data import cora as cora_module


@pytest.fixture(scope="module")
def cora(shared_data):
    return load_cora(data_dir=shared_data)


def test_sizes_match_the_published_statistics(cora):
    assert isinstance(cora, CoraData)
    assert cora.x.shape == (2708, 1433) and cora.x.dtype == np.float32
    assert cora.y.shape == (2708,) and np.issubdtype(cora.y.dtype, np.integer)
    assert cora.num_classes == 7 and len(cora.class_names) == 7
    assert set(np.unique(cora.y)) == set(range(7))
    assert cora.edge_index.shape == (2, 10556)
    assert cora.num_edges == 2 * 5278
    assert "num_nodes=2708" in repr(cora)


def test_features_are_raw_binary_bag_of_words(cora):
    assert set(np.unique(cora.x)) == {0.0, 1.0}
    assert (cora.x.sum(axis=1) > 0).all()


def test_edges_are_undirected_without_self_loops_or_duplicates(cora):
    source, target = cora.edge_index
    assert not np.any(source == target)
    pairs = set(zip(source.tolist(), target.tolist()))
    assert len(pairs) == cora.num_edges
    assert all((t, s) in pairs for s, t in pairs)
    assert source.min() >= 0 and max(source.max(), target.max()) == 2707


def test_standard_split(cora):
    assert cora.train_mask.sum() == 140
    assert cora.val_mask.sum() == 500
    assert cora.test_mask.sum() == 1000
    assert np.flatnonzero(cora.train_mask).tolist() == list(range(140))
    assert np.flatnonzero(cora.val_mask).tolist() == list(range(140, 640))
    assert not (cora.train_mask & cora.val_mask).any()
    assert not ((cora.train_mask | cora.val_mask) & cora.test_mask).any()
    # Planetoid's training set: 20 nodes per class
    assert np.bincount(cora.y[cora.train_mask], minlength=7).tolist() == [20] * 7


def test_test_nodes_are_reordered_the_planetoid_way(cora, shared_data):
    folder = shared_data / "cora"
    test_index = np.loadtxt(folder / "ind.cora.test.index", dtype=int)
    assert (np.diff(test_index) < 0).any()  # the file really is unsorted
    tx = cora_module._read_pickle(folder / "ind.cora.tx").to_dense()
    ty = np.asarray(cora_module._read_pickle(folder / "ind.cora.ty")).argmax(axis=1)
    # row k of tx / ty describes node test_index[k]
    np.testing.assert_array_equal(cora.x[test_index], tx)
    np.testing.assert_array_equal(cora.y[test_index], ty)
    assert np.flatnonzero(cora.test_mask).tolist() == sorted(test_index.tolist())


def test_class_names_follow_the_class_sizes(cora):
    sizes = dict(zip(cora.class_names, np.bincount(cora.y).tolist()))
    assert sizes == {
        "Theory": 351,
        "Reinforcement_Learning": 217,
        "Genetic_Algorithms": 418,
        "Neural_Networks": 818,
        "Probabilistic_Methods": 426,
        "Case_Based": 298,
        "Rule_Learning": 180,
    }


def test_normalize_features(cora, shared_data):
    normalized = cora.normalize_features()
    np.testing.assert_allclose(normalized.x.sum(axis=1), 1.0, rtol=1e-5)
    assert set(np.unique(cora.x)) == {0.0, 1.0}  # the original is unchanged
    loaded = load_cora(data_dir=shared_data, normalize_features=True)
    np.testing.assert_array_equal(loaded.x, normalized.x)


def test_adjacency_dense_and_sparse(cora):
    dense = cora.adjacency()
    assert dense.shape == (2708, 2708) and dense.dtype == np.float32
    assert dense.sum() == 10556
    np.testing.assert_array_equal(dense, dense.T)
    assert np.trace(dense) == 0
    source, target = cora.edge_index[:, 7]
    assert dense[target, source] == 1
    sparse = cora.sparse_adjacency(self_loops=True)
    assert sparse.shape == (2708, 2708) and sparse.nnz == 10556 + 2708
    np.testing.assert_array_equal(sparse.toarray(), dense + np.eye(2708, dtype=np.float32))
    # One return type per method; the 0.1 flag still works, with a warning, until 0.3.
    from lablib import LablibDeprecationWarning

    with pytest.warns(LablibDeprecationWarning, match="sparse_adjacency"):
        old = cora.adjacency(dense=False, self_loops=True)
    assert (old != sparse).nnz == 0
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        cora.adjacency(selfloops=True)


def test_tampered_pickle_is_refused(shared_data, tmp_path):
    import pickle
    import shutil

    folder = tmp_path / "cora"
    shutil.copytree(shared_data / "cora", folder)
    with open(folder / "ind.cora.graph", "wb") as handle:
        pickle.dump(print, handle)  # a global that is not a dataset container
    with pytest.warns(UserWarning, match="match no published checksum"):
        with pytest.raises(pickle.UnpicklingError, match="Refusing to load builtins.print"):
            load_cora(data_dir=tmp_path)
