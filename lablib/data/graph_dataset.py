"""A list of graphs as a dataset: splits and ``tf.data`` batches in both layouts.

:class:`GraphDataset` holds graphs with node features, directed edges (``[2, E]``, row 0
source, row 1 target), optional edge features and one target per graph, and turns them
into ``tf.data`` batches in the two layouts of :mod:`lablib.graphs` (padded dense, or
disjoint). The molecule datasets (:mod:`lablib.data.molecules`) and the TU datasets
(:mod:`lablib.data.tu`) are its subclasses.

Example::

    from lablib.data.graph_dataset import GraphDataset
    dataset = GraphDataset([np.ones((2, 3))], [np.array([[0, 1], [1, 0]])], np.array([1.0]))
    batches = dataset.disjoint_dataset(batch_size=8)
"""

from __future__ import annotations

import math

import numpy as np

from lablib._deprecation import pop_renamed, refuse_unknown

__all__ = ["GraphDataset"]


def _positive_int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{what} must be a positive int, got {value!r}.")
    return int(value)


class GraphDataset:
    """A list of graphs with node features, directed edges and one target per graph.

    Args:
        x: list of float32 arrays ``[n_i, F]`` (node features of graph ``i``).
        edge_index: list of integer arrays ``[2, E_i]`` (row 0 source, row 1 target;
            an undirected bond appears as two edges).
        y: array ``[num_graphs, ...]`` of targets (float32 regression values or int
            class ids).
        edge_attr: optional list of arrays ``[E_i, D]`` (edge features).
        feature_names: names of the ``F`` node feature columns.
        edge_feature_names: names of the ``D`` edge feature columns.
        name: a label shown by ``repr``.

    Call arguments:
        ``len(dataset)`` is the number of graphs; ``dataset[i]`` is the tuple
        ``(x_i, edge_index_i, y_i)``; ``dataset[indices]`` (a slice, list or array) is
        a new dataset of those graphs.

    Example::

        dataset = GraphDataset([np.ones((2, 3))], [np.array([[0, 1], [1, 0]])], np.array([1.0]))
        batches = dataset.disjoint_dataset(batch_size=8)
    """

    #: The dtype the targets ``y`` are converted to (None: as given); a subclass sets its
    #: own (float32 regression values, int64 class ids).
    _target_dtype = None

    def __init__(
        self,
        x,
        edge_index,
        y,
        edge_attr=None,
        feature_names=None,
        edge_feature_names=None,
        name=None,
    ):
        self.x = [np.asarray(a, dtype=np.float32) for a in x]
        self.edge_index = [np.asarray(e, dtype=np.int64).reshape(2, -1) for e in edge_index]
        self.y = np.asarray(y, dtype=self._target_dtype)
        self.edge_attr = (
            None if edge_attr is None else [np.asarray(a, dtype=np.float32) for a in edge_attr]
        )
        self.name = name or type(self).__name__
        if not (len(self.x) == len(self.edge_index) == len(self.y)):
            raise ValueError(
                f"{self.name}: x, edge_index and y must have one entry per graph, got "
                f"{len(self.x)}, {len(self.edge_index)} and {len(self.y)}."
            )
        if self.edge_attr is not None and len(self.edge_attr) != len(self.x):
            raise ValueError(
                f"{self.name}: edge_attr has {len(self.edge_attr)} entries for {len(self.x)} graphs."
            )
        widths = {a.shape[1] for a in self.x if a.ndim == 2}
        if any(a.ndim != 2 for a in self.x) or len(widths) > 1:
            raise ValueError(
                f"{self.name}: every x[i] must be [n_i, F] with the same F, got widths {sorted(widths)}."
            )
        width = widths.pop() if widths else 0
        self.feature_names = (
            tuple(feature_names)
            if feature_names is not None
            else tuple(f"feature_{i}" for i in range(width))
        )
        if len(self.feature_names) != width:
            raise ValueError(
                f"{self.name}: {len(self.feature_names)} feature names for {width} features."
            )
        edge_widths = {a.shape[1] for a in self.edge_attr or () if a.ndim == 2 and a.size}
        if self.edge_attr is not None and (
            any(a.ndim != 2 for a in self.edge_attr if a.size) or len(edge_widths) > 1
        ):
            raise ValueError(
                f"{self.name}: every edge_attr[i] must be [E_i, D] with the same D, got "
                f"shapes {sorted({a.shape for a in self.edge_attr})}."
            )
        edge_width = edge_widths.pop() if edge_widths else 0
        if edge_feature_names is None:
            edge_feature_names = [f"edge_feature_{i}" for i in range(edge_width)]
        self.edge_feature_names = tuple(edge_feature_names)
        if edge_width and len(self.edge_feature_names) != edge_width:
            raise ValueError(
                f"{self.name}: {len(self.edge_feature_names)} edge feature names for "
                f"{edge_width} edge features."
            )

    # ------------------------------------------------------------------ basics

    def __len__(self) -> int:
        return len(self.x)

    @property
    def num_node_features(self) -> int:
        """Node feature columns ``F``."""
        return len(self.feature_names)

    @property
    def num_edge_features(self) -> int:
        """Edge feature columns ``D`` (0 without edge features)."""
        return 0 if self.edge_attr is None else len(self.edge_feature_names)

    @property
    def num_nodes(self) -> np.ndarray:
        """Nodes per graph, int array ``[num_graphs]``."""
        return np.array([a.shape[0] for a in self.x], dtype=np.int64)

    @property
    def max_nodes(self) -> int:
        """The largest graph's node count (the ``N`` of a full-dataset dense batch)."""
        return int(self.num_nodes.max()) if len(self) else 0

    def __repr__(self):
        return (
            f"{type(self).__name__}(name={self.name!r}, graphs={len(self)}, "
            f"node_features={self.num_node_features}, max_nodes={self.max_nodes})"
        )

    def _extra(self, indices) -> dict:
        """Per-graph attributes of subclasses, restricted to ``indices``."""
        return {}

    def subset(self, indices) -> GraphDataset:
        """A new dataset of the graphs at ``indices`` (in that order)."""
        indices = (
            np.arange(len(self))[indices]
            if isinstance(indices, slice)
            else np.asarray(indices, dtype=np.int64).reshape(-1)
        )
        if indices.size and (indices.min() < -len(self) or indices.max() >= len(self)):
            raise IndexError(
                f"{self.name}: indices must be in [0, {len(self)}), got {indices.min()}..{indices.max()}."
            )
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.x = [self.x[i] for i in indices]
        new.edge_index = [self.edge_index[i] for i in indices]
        new.edge_attr = None if self.edge_attr is None else [self.edge_attr[i] for i in indices]
        new.y = self.y[indices]
        new.__dict__.update(self._extra(indices))
        return new

    def __getitem__(self, index):
        if isinstance(index, (int, np.integer)):
            return self.x[index], self.edge_index[index], self.y[index]
        return self.subset(index)

    # ------------------------------------------------------------------ splits

    def split(self, method: str = "random", fractions=(0.8, 0.1, 0.1), seed: int = 0):
        """Split into training, validation and test datasets.

        Args:
            method: ``"random"`` (a seeded permutation) or ``"scaffold"`` (molecules
                only: graphs grouped by Bemis-Murcko scaffold, largest groups first,
                so no scaffold is in two parts; deterministic, ``seed`` unused).
            fractions: three non-negative numbers summing to 1.
            seed: seed of the random split.

        Returns:
            ``(train, valid, test)`` datasets of the same class. Sizes are
            ``floor(f0 * n)``, ``floor(f1 * n)`` and the rest for ``"random"``; the
            scaffold split fills train, then valid, up to those sizes, whole groups at
            a time.

        Example::

            train, valid, test = dataset.split("random", (0.8, 0.1, 0.1), seed=0)
        """
        fractions = tuple(float(f) for f in fractions)
        if (
            len(fractions) != 3
            or min(fractions) < 0
            or not math.isclose(sum(fractions), 1.0, abs_tol=1e-6)
        ):
            raise ValueError(
                f"fractions must be three non-negative numbers summing to 1 (train, valid, "
                f"test), got {fractions!r}."
            )
        n = len(self)
        train_size, valid_size = int(fractions[0] * n), int(fractions[1] * n)
        if method == "random":
            order = np.random.default_rng(seed).permutation(n)
            parts = (
                order[:train_size],
                order[train_size : train_size + valid_size],
                order[train_size + valid_size :],
            )
        elif method == "scaffold":
            parts = self._scaffold_parts(train_size, valid_size)
        else:
            raise ValueError(f'method must be "random" or "scaffold", got {method!r}.')
        return tuple(self.subset(np.sort(part) if method == "scaffold" else part) for part in parts)

    def _scaffold_parts(self, train_size, valid_size):
        raise ValueError(
            f"{self.name}: a scaffold split needs the molecules' SMILES, which this "
            f'{type(self).__name__} does not have. Use method="random".'
        )

    # ------------------------------------------------------------------ batches

    def disjoint_padding(self, num_graphs: int):
        """``(max_nodes, max_edges)`` that fit any ``num_graphs`` graphs of this dataset.

        For :meth:`disjoint_dataset` with fixed shapes (XLA, TPUs): the node and edge
        counts of the ``num_graphs`` largest graphs, plus one padding node (padding
        edges need one).

        Args:
            num_graphs: graphs per batch; with a strategy, per replica
                (``batch_size / num_replicas``).

        Returns:
            ``(max_nodes, max_edges)`` as ints.

        Example::

            max_nodes, max_edges = dataset.disjoint_padding(16)
            batches = dataset.disjoint_dataset(32, strategy=strategy, drop_remainder=True,
                                               max_nodes=max_nodes, max_edges=max_edges)
        """
        num_graphs = _positive_int(num_graphs, "num_graphs")
        nodes = np.sort(self.num_nodes)[::-1][:num_graphs]
        edges = np.sort([e.shape[1] for e in self.edge_index])[::-1][:num_graphs]
        return int(nodes.sum()) + 1, int(np.sum(edges))

    def _batches(self, batch_size, shuffle, seed, drop_remainder):
        batch_size = _positive_int(batch_size, "batch_size")
        rng = np.random.default_rng(seed)
        n = len(self)

        def order():
            # A new order on every pass (every epoch), reproducible from ``seed``.
            indices = rng.permutation(n) if shuffle else np.arange(n)
            stop = n - n % batch_size if drop_remainder else n
            for start in range(0, stop, batch_size):
                yield indices[start : start + batch_size]

        return order

    def _finish(
        self, tf, make_batch, signature, batch_size, shuffle, seed, drop_remainder, strategy
    ):
        """One ``tf.data`` pipeline of batches, or per-replica pipelines for ``strategy``."""
        if strategy is None:
            order = self._batches(batch_size, shuffle, seed, drop_remainder)

            def generate():
                for indices in order():
                    yield make_batch(indices)

            dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
            # A generator's length is unknown to tf.data; stating it lets Keras' fit() show
            # progress and not warn that the input "ran out of data" at each epoch's end.
            batches = len(self) // batch_size if drop_remainder else -(-len(self) // batch_size)
            dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
            return dataset.prefetch(2)
        return self._distributed(
            tf, make_batch, signature, batch_size, shuffle, seed, drop_remainder, strategy
        )

    def _distributed(
        self, tf, make_batch, signature, batch_size, shuffle, seed, drop_remainder, strategy
    ):
        """Global batches of ``batch_size`` graphs, each replica gluing its own share."""
        replicas = int(strategy.num_replicas_in_sync)
        batch_size = _positive_int(batch_size, "batch_size")
        if batch_size % replicas:
            raise ValueError(
                f"{self.name}: batch_size={batch_size} is the global number of graphs per "
                f"step, split over the strategy's {replicas} replicas; pass a multiple of "
                f"{replicas} (e.g. {replicas * max(1, batch_size // replicas)})."
            )
        steps = len(self) // batch_size
        if not drop_remainder and len(self) % batch_size >= replicas:
            steps += 1  # a last, smaller global batch that every replica gets graphs of

        def dataset_fn(context):
            pipelines = context.num_input_pipelines
            if shuffle and seed is None and pipelines > 1:
                raise ValueError(
                    f"{self.name}: shuffle=True with {pipelines} input pipelines (workers) "
                    f"needs a seed, so that every worker draws the same order of graphs; "
                    f"pass seed=0 (or any int)."
                )
            local = replicas // pipelines  # replicas fed by this pipeline
            first = context.input_pipeline_id * local
            order = self._batches(batch_size, shuffle, seed, drop_remainder)

            def generate():
                for indices in order():
                    if len(indices) < replicas:
                        continue  # too few graphs left for one per replica
                    # Replica r gets the r-th consecutive share; tf.distribute hands a
                    # pipeline's consecutive elements to its consecutive replicas.
                    for share in np.array_split(indices, replicas)[first : first + local]:
                        yield make_batch(share)

            dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
            if local == 1:
                dataset = dataset.apply(tf.data.experimental.assert_cardinality(steps))
            return dataset.prefetch(2)

        distributed = strategy.distribute_datasets_from_function(dataset_fn)
        if hasattr(distributed, "_cardinality"):
            # Keras' fit reads `cardinality` as steps per epoch; TensorFlow reports one
            # pipeline's elements (steps x local replicas) or, as here, unknown, and fit
            # then warns "ran out of data" after the first epoch. State the steps.
            distributed._cardinality = steps
        return distributed

    def _target_spec(self, tf, size=None):
        return tf.TensorSpec(shape=(size,) + self.y.shape[1:], dtype=tf.as_dtype(self.y.dtype))

    def _check_edge_attr_wanted(self, with_edge_attr, deprecated: dict, method: str) -> bool:
        """``with_edge_attr`` (or its old name ``edge_attr``, warned) checked against the data."""
        where = f"GraphDataset.{method}"
        with_edge_attr = pop_renamed(
            deprecated, where, "edge_attr", with_edge_attr, False, stacklevel=4
        )
        refuse_unknown(deprecated, f"{self.name}.{method}()")
        if with_edge_attr and self.edge_attr is None:
            raise ValueError(
                f"{self.name}: with_edge_attr=True but this dataset has no edge features "
                f"(its edge_attr is None); leave with_edge_attr=False."
            )
        return bool(with_edge_attr)

    @staticmethod
    def _fixed_size(batch_size, drop_remainder, strategy):
        """The graphs per yielded batch when every batch has it, else None."""
        if not drop_remainder:
            return None
        replicas = 1 if strategy is None else int(strategy.num_replicas_in_sync)
        return batch_size // replicas if batch_size % replicas == 0 else None

    def dense_dataset(
        self,
        batch_size: int = 32,
        shuffle: bool = False,
        seed=None,
        max_nodes=None,
        drop_remainder: bool = False,
        with_edge_attr: bool = False,
        strategy=None,
        **deprecated,
    ):
        # Over 80 lines for its docstring; code: 36 lines.
        """``tf.data`` batches in the padded dense layout of :func:`lablib.graphs.dense_batch`.

        Args:
            batch_size: graphs per batch; with a ``strategy``, per step over all
                replicas (the global batch), see below.
            shuffle: a new order of the graphs on every pass (epoch).
            seed: seed of that order (None: different every run).
            max_nodes: pad every batch to this many nodes (a fixed shape); None pads
                each batch to its own largest graph.
            drop_remainder: drop the last, smaller batch.
            with_edge_attr: also yield the edge features, ``edge_attr [B, N, N, D]``
                (``edge_attr[b, target, source]``), for ``GraphAttention(edge_dim=D)``
                (the flag was named ``edge_attr`` before lablib 0.2; that warns until 0.3).
            strategy: a ``tf.distribute.Strategy`` (``MirroredStrategy``,
                ``TPUStrategy``, ``MultiWorkerMirroredStrategy``) to train under, or None.
                Given one, the result is a distributed dataset for ``model.fit`` under
                that strategy (built with ``strategy.distribute_datasets_from_function``):
                each step takes the next ``batch_size`` graphs of the order, and replica
                ``r`` of ``R`` gets the ``r``-th consecutive ``batch_size / R`` of them,
                padded as its own batch (so ``batch_size`` must be a multiple of ``R``,
                and one step sees the same graphs as one device with the same
                ``batch_size``). A last, smaller batch is split as evenly as possible,
                or dropped when it has fewer graphs than replicas. With several workers
                and ``shuffle=True`` pass a ``seed``. TPUs (XLA) need static shapes:
                pass ``max_nodes`` and ``drop_remainder=True``.

        Returns:
            A ``tf.data.Dataset`` (a ``tf.distribute.DistributedDataset`` with a
            ``strategy``) of ``((x [B, N, F], adjacency [B, N, N], mask [B, N]), y [B])``
            with ``adjacency[b, target, source] = 1``; with ``with_edge_attr=True`` the
            inputs are ``(x, adjacency, mask, edge_attr)``.

        Example::

            for (x, adjacency, mask), y in dataset.dense_dataset(32, shuffle=True, seed=0):
                ...
            strategy = tf.distribute.MirroredStrategy()
            with strategy.scope():
                model = build_model(); model.compile(...)
            model.fit(dataset.dense_dataset(64, shuffle=True, seed=0, strategy=strategy))
        """
        import tensorflow as tf

        from lablib import graphs

        if max_nodes is not None and max_nodes < self.max_nodes:
            raise ValueError(
                f"{self.name}: max_nodes={max_nodes} but the largest graph has "
                f"{self.max_nodes} nodes; pass max_nodes >= {self.max_nodes} or None."
            )
        with_edges = self._check_edge_attr_wanted(with_edge_attr, deprecated, "dense_dataset")
        batch_size = _positive_int(batch_size, "batch_size")

        def make_batch(indices):
            inputs = graphs.dense_batch(
                [self.x[i] for i in indices],
                [self.edge_index[i] for i in indices],
                max_nodes=max_nodes,
                edge_attr=[self.edge_attr[i] for i in indices] if with_edges else None,
            )
            return tuple(inputs), self.y[indices]  # a plain tuple, as Keras's fit expects

        size = self._fixed_size(batch_size, drop_remainder, strategy)
        features = self.num_node_features
        specs = (
            tf.TensorSpec((size, max_nodes, features), tf.float32),
            tf.TensorSpec((size, max_nodes, max_nodes), tf.float32),
            tf.TensorSpec((size, max_nodes), tf.bool),
        )
        if with_edges:
            specs += (
                tf.TensorSpec((size, max_nodes, max_nodes, self.num_edge_features), tf.float32),
            )
        signature = (specs, self._target_spec(tf, size))
        return self._finish(
            tf, make_batch, signature, batch_size, shuffle, seed, drop_remainder, strategy
        )

    def disjoint_dataset(
        self,
        batch_size: int = 32,
        shuffle: bool = False,
        seed=None,
        drop_remainder: bool = False,
        with_edge_attr: bool = False,
        strategy=None,
        max_nodes=None,
        max_edges=None,
        **deprecated,
    ):
        # Over 80 lines for its docstring; code: 35 lines.
        """``tf.data`` batches in the disjoint layout of :func:`lablib.graphs.disjoint_batch`.

        Args:
            batch_size, shuffle, seed, drop_remainder: as for :meth:`dense_dataset`.
            with_edge_attr: also yield the edge features, ``edge_attr [E, D]`` aligned
                with ``edge_index``, for ``GraphAttention(edge_dim=D)`` (named
                ``edge_attr`` before lablib 0.2; that warns until 0.3).
            strategy: as for :meth:`dense_dataset` (a ``tf.distribute.Strategy`` to train
                under, or None), but replica ``r`` of ``R`` glues the ``r``-th
                consecutive ``batch_size / R`` graphs of each step into its own disjoint
                graph, with its own ``edge_index`` (a strategy splitting one glued batch
                along axis 0 would cut ``edge_index [2, E]``).
            max_nodes, max_edges: pad every (per-replica) batch to exactly this many
                nodes and edges (see :func:`lablib.graphs.disjoint_batch`; padding nodes
                have graph id -1). XLA (``jit_compile=True``) and TPUs need static
                shapes: pass both, ``drop_remainder=True``, and ``num_graphs`` (the
                graphs per replica batch) to :class:`lablib.layers.GraphReadout`.
                Without them every batch has its own shape, and an XLA step is
                recompiled for each new one.

        Returns:
            A ``tf.data.Dataset`` (a ``tf.distribute.DistributedDataset`` with a
            ``strategy``) of ``((x [V, F], edge_index [2, E], graph_ids [V]), y [B])``:
            the batch's graphs glued into one graph, node indices offset, ``graph_ids``
            telling which graph each node belongs to; with ``with_edge_attr=True`` the
            inputs are ``(x, edge_index, graph_ids, edge_attr)``.

        Raises:
            ValueError: a batch larger than ``max_nodes`` / ``max_edges`` (when it is
                built), only one of them given, or a ``batch_size`` that the replicas
                cannot share.

        Example::

            for (x, edge_index, graph_ids), y in dataset.disjoint_dataset(64):
                ...
            model.fit(dataset.disjoint_dataset(64, shuffle=True, seed=0, strategy=strategy))
        """
        import tensorflow as tf

        from lablib import graphs

        with_edges = self._check_edge_attr_wanted(with_edge_attr, deprecated, "disjoint_dataset")
        batch_size = _positive_int(batch_size, "batch_size")
        padded = max_nodes is not None or max_edges is not None
        if padded and (max_nodes is None or max_edges is None):
            raise ValueError(
                f"{self.name}: pass both max_nodes and max_edges (a fixed shape needs both), "
                f"got max_nodes={max_nodes!r}, max_edges={max_edges!r}."
            )

        def make_batch(indices):
            inputs = graphs.disjoint_batch(
                [self.x[i] for i in indices],
                [self.edge_index[i] for i in indices],
                edge_attr=[self.edge_attr[i] for i in indices] if with_edges else None,
                max_nodes=max_nodes,
                max_edges=max_edges,
            )
            return tuple(inputs), self.y[indices]

        size = self._fixed_size(batch_size, drop_remainder, strategy)
        specs = (
            tf.TensorSpec((max_nodes, self.num_node_features), tf.float32),
            tf.TensorSpec((2, max_edges), tf.int32),
            tf.TensorSpec((max_nodes,), tf.int32),
        )
        if with_edges:
            specs += (tf.TensorSpec((max_edges, self.num_edge_features), tf.float32),)
        signature = (specs, self._target_spec(tf, size))
        return self._finish(
            tf, make_batch, signature, batch_size, shuffle, seed, drop_remainder, strategy
        )
