"""Cora citation graph with the Planetoid split (Yang, Cohen & Salakhutdinov, 2016).

2,708 papers (nodes) with 1,433 binary bag-of-words features, 5,278 undirected citation
links and 7 subject classes. The standard semi-supervised split: 140 training nodes
(20 per class), 500 validation nodes, 1,000 test nodes.

The files are the Planetoid release (``ind.cora.x``, ``y``, ``tx``, ``ty``, ``allx``,
``ally``, ``graph``, ``test.index``): Python 2 pickles of NumPy arrays, SciPy CSR
matrices and a ``defaultdict`` of neighbour lists. They are read with a restricted
unpickler (no code in a tampered file can run) and converted to NumPy without SciPy.

Example::

    from lablib.data import load_cora
    cora = load_cora(data_dir="../shared/data")
    cora.x.shape, cora.edge_index.shape      # (2708, 1433), (2, 10556)
    int(cora.train_mask.sum())               # 140
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

from lablib._deprecation import pop_renamed, refuse_unknown
from lablib.data import sources

__all__ = ["load_cora", "CoraData", "CORA_CLASS_NAMES"]

# Planetoid stores labels as one-hot columns without names. The LINQS Cora release
# names the 7 classes; its class sizes (Theory 351, Reinforcement_Learning 217,
# Genetic_Algorithms 418, Neural_Networks 818, Probabilistic_Methods 426, Case_Based
# 298, Rule_Learning 180) are all different, which fixes the column order below.
CORA_CLASS_NAMES = (
    "Theory",
    "Reinforcement_Learning",
    "Genetic_Algorithms",
    "Neural_Networks",
    "Probabilistic_Methods",
    "Case_Based",
    "Rule_Learning",
)
_SUFFIXES = ("x", "y", "tx", "ty", "allx", "ally", "graph")


@dataclasses.dataclass(frozen=True)
class _CsrRecord:
    """What a pickled 2016 ``scipy.sparse.csr_matrix`` holds, read without SciPy."""

    state: dict = dataclasses.field(default_factory=dict)

    def __setstate__(self, state):
        object.__setattr__(self, "state", state)

    def to_dense(self) -> np.ndarray:
        rows_count, columns = self.state["_shape"]
        indptr = np.asarray(self.state["indptr"])
        indices = np.asarray(self.state["indices"])
        data = np.asarray(self.state["data"], dtype=np.float32)
        dense = np.zeros((rows_count, columns), dtype=np.float32)
        rows = np.repeat(np.arange(rows_count), np.diff(indptr))
        dense[rows, indices] = data
        return dense


def _read_pickle(path):
    allowed = sources.numpy_pickle_globals()
    allowed.update(
        {
            ("scipy.sparse.csr", "csr_matrix"): _CsrRecord,
            ("scipy.sparse._csr", "csr_matrix"): _CsrRecord,
            ("collections", "defaultdict"): collections.defaultdict,
            ("__builtin__", "list"): list,
            ("builtins", "list"): list,
        }
    )
    with open(path, "rb") as handle:
        return sources.RestrictedUnpickler(handle, allowed, encoding="latin1").load()


def _dense(value, name: str) -> np.ndarray:
    if isinstance(value, _CsrRecord):
        return value.to_dense()
    array = np.asarray(value)
    if array.ndim != 2:
        raise ValueError(f"ind.cora.{name}: expected a 2-D matrix, got shape {array.shape}.")
    return array.astype(np.float32)


@dataclasses.dataclass
class CoraData:
    """The Cora graph as NumPy arrays, with the standard Planetoid split.

    Attributes:
        x: float32 ``[2708, 1433]`` node features (binary bag of words, or
            row-normalised after :meth:`normalize_features`): a NumPy array, or a
            ``tf.SparseTensor`` (indices in row-major order) from
            ``load_cora(sparse_features=True)`` / :meth:`with_sparse_features`.
        y: int64 ``[2708]`` class ids in ``0..6``.
        edge_index: int64 ``[2, 10556]``: every undirected link in both directions,
            sorted by source then target, no self loops, no duplicates (row 0 source,
            row 1 target).
        train_mask, val_mask, test_mask: bool ``[2708]`` (140 / 500 / 1,000 nodes).
        class_names: the 7 subject names in label order.

    Example::

        cora = load_cora(data_dir="../shared/data").normalize_features()
        a = cora.adjacency()                      # dense [2708, 2708] float32
        cora.y[cora.train_mask]                   # 140 training labels
    """

    x: np.ndarray
    y: np.ndarray
    edge_index: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    class_names: tuple = CORA_CLASS_NAMES

    @property
    def num_nodes(self) -> int:
        """Number of nodes (2,708)."""
        return int(self.x.shape[0])

    @property
    def num_features(self) -> int:
        """Features per node (1,433)."""
        return int(self.x.shape[1])

    @property
    def num_classes(self) -> int:
        """Number of classes (7)."""
        return len(self.class_names)

    @property
    def num_edges(self) -> int:
        """Directed edges in :attr:`edge_index` (each undirected link counts twice)."""
        return int(self.edge_index.shape[1])

    @property
    def sparse_features(self) -> bool:
        """True when :attr:`x` is a ``tf.SparseTensor``."""
        return not isinstance(self.x, np.ndarray)

    def with_sparse_features(self) -> CoraData:
        """A copy whose :attr:`x` is a ``tf.SparseTensor`` (1.3 % of Cora's entries).

        ``GraphConv`` / ``GraphAttention`` take it in the sparse (``edge_index``) layout
        and multiply only the non-zeros; :class:`lablib.layers.SparseDropout` drops
        them out. Imports TensorFlow.

        Returns:
            A new :class:`CoraData`; this one is unchanged.
        """
        if self.sparse_features:
            return dataclasses.replace(self)
        import tensorflow as tf

        rows, columns = np.nonzero(self.x)  # row-major order, as tf.sparse ops expect
        indices = np.stack([rows, columns], axis=1).astype(np.int64)
        values = self.x[rows, columns].astype(np.float32)
        x = tf.SparseTensor(indices, values, dense_shape=self.x.shape)
        return dataclasses.replace(self, x=x)

    def normalize_features(self) -> CoraData:
        """A copy whose feature rows sum to 1 (rows of zeros stay zero), as in Kipf & Welling.

        Returns:
            A new :class:`CoraData` (sparse features stay sparse); this one is unchanged.
        """
        if self.sparse_features:
            import tensorflow as tf

            indices = self.x.indices.numpy()
            values = self.x.values.numpy()
            sums = np.bincount(indices[:, 0], weights=values, minlength=self.num_nodes)
            values = (values / sums[indices[:, 0]]).astype(np.float32)
            x = tf.SparseTensor(indices, values, dense_shape=self.x.dense_shape)
            return dataclasses.replace(self, x=x)
        sums = self.x.sum(axis=1, keepdims=True)
        x = np.divide(self.x, sums, out=np.zeros_like(self.x), where=sums != 0)
        return dataclasses.replace(self, x=x.astype(np.float32))

    def adjacency(self, self_loops: bool = False, **deprecated) -> np.ndarray:
        """The adjacency matrix with ``A[target, source] = 1`` (symmetric for Cora), dense.

        Args:
            self_loops: add the identity (``A + I``).

        Returns:
            A NumPy float32 ``[N, N]`` array (29 MB for Cora). For a
            ``scipy.sparse.csr_matrix`` use :meth:`sparse_adjacency`. (Before lablib 0.2
            ``adjacency(dense=False)`` returned that; the ``dense`` flag warns until 0.3.)
        """
        dense = pop_renamed(deprecated, "CoraData.adjacency", "dense", True, True)
        refuse_unknown(deprecated, "CoraData.adjacency()", "it takes self_loops")
        if not dense:
            return self.sparse_adjacency(self_loops=self_loops)
        source, target = self._edges(self_loops)
        matrix = np.zeros((self.num_nodes, self.num_nodes), dtype=np.float32)
        matrix[target, source] = 1.0
        return matrix

    def sparse_adjacency(self, self_loops: bool = False):
        """:meth:`adjacency` as a ``scipy.sparse.csr_matrix`` (float32, ``[N, N]``)."""
        import scipy.sparse

        source, target = self._edges(self_loops)
        values = np.ones(len(source), dtype=np.float32)
        n = self.num_nodes
        return scipy.sparse.csr_matrix((values, (target, source)), shape=(n, n))

    def _edges(self, self_loops: bool):
        source, target = self.edge_index
        if self_loops:
            loops = np.arange(self.num_nodes)
            source, target = np.concatenate([source, loops]), np.concatenate([target, loops])
        return source, target

    def __repr__(self):
        return (
            f"CoraData(num_nodes={self.num_nodes}, num_features={self.num_features}, "
            f"num_edges={self.num_edges}, num_classes={self.num_classes}, "
            f"train/val/test={int(self.train_mask.sum())}/{int(self.val_mask.sum())}/"
            f"{int(self.test_mask.sum())})"
        )


def load_cora(
    data_dir=None, normalize_features: bool = False, sparse_features: bool = False
) -> CoraData:
    """Load Cora with the standard Planetoid split.

    Long for its docstring and the Planetoid format's steps (read, reorder the test nodes,
    fill the isolated ones, build the masks), which read best in order.

    The Planetoid files store the 1,000 test nodes in the order of ``ind.cora.test.index``
    (not sorted); as in the original code, the features and labels are put back at
    the node ids that file names, so node ``i`` of :attr:`CoraData.x` is node ``i`` of
    the graph. Training nodes are ``0..139``, validation nodes ``140..639``, test nodes
    those of ``test.index``.

    Args:
        data_dir: a folder holding ``cora/`` (see :mod:`lablib.data.sources` for the
            search order: ``LABLIB_DATA_DIR``, the cache, a verified download).
        normalize_features: row-normalise the features (see
            :meth:`CoraData.normalize_features`).
        sparse_features: return the features as a ``tf.SparseTensor`` (see
            :meth:`CoraData.with_sparse_features`): Kipf & Welling's form, faster for
            ``GraphConv`` in the sparse layout. Imports TensorFlow.

    Returns:
        A :class:`CoraData`.

    Raises:
        DataNotFoundError: the files are nowhere and cannot be downloaded.
        ValueError: the files are inconsistent (message says which).

    Example::

        cora = load_cora(data_dir="../shared/data")
        sparse = load_cora(normalize_features=True, sparse_features=True)  # x: tf.SparseTensor
    """
    folder = sources.dataset_path("cora", data_dir)
    parts = {name: _read_pickle(folder / f"ind.cora.{name}") for name in _SUFFIXES}
    test_index = np.loadtxt(folder / "ind.cora.test.index", dtype=np.int64, ndmin=1)

    features = np.concatenate([_dense(parts["allx"], "allx"), _dense(parts["tx"], "tx")])
    onehot = np.concatenate([np.asarray(parts["ally"]), np.asarray(parts["ty"])])
    num_nodes = features.shape[0]
    test_sorted = np.sort(test_index)
    if len(test_index) != len(np.asarray(parts["ty"])) or test_sorted[-1] >= num_nodes:
        raise ValueError(
            f"ind.cora.test.index in {folder} lists {len(test_index)} nodes up to "
            f"{test_sorted[-1]}, but tx/ty hold {len(np.asarray(parts['ty']))} test nodes of "
            f"{num_nodes}; the files do not belong together."
        )
    # Row k of tx belongs to node test_index[k] (the Planetoid convention).
    features[test_index] = features[test_sorted]
    onehot[test_index] = onehot[test_sorted]
    if not np.all(onehot.sum(axis=1) == 1):
        raise ValueError(f"ind.cora.ally/ty in {folder}: every node needs exactly one label.")
    labels = onehot.argmax(axis=1).astype(np.int64)

    graph = parts["graph"]
    pairs = [(node, neighbour) for node, neighbours in graph.items() for neighbour in neighbours]
    raw = np.asarray(pairs, dtype=np.int64).T.reshape(2, -1)
    if raw.size and (raw.min() < 0 or raw.max() >= num_nodes):
        raise ValueError(
            f"ind.cora.graph in {folder} names node {raw.max()}, but there are {num_nodes} nodes."
        )
    from lablib import graphs

    edge_index = graphs.to_undirected(graphs.remove_self_loops(raw))

    train_mask = np.zeros(num_nodes, dtype=bool)
    val_mask = np.zeros(num_nodes, dtype=bool)
    test_mask = np.zeros(num_nodes, dtype=bool)
    num_train = len(np.asarray(parts["y"]))
    train_mask[:num_train] = True
    val_mask[num_train : num_train + 500] = True
    test_mask[test_sorted] = True

    data = CoraData(features, labels, edge_index, train_mask, val_mask, test_mask)
    data = data.normalize_features() if normalize_features else data
    return data.with_sparse_features() if sparse_features else data
