"""Reuters-46 newswire topic classification (the Keras dataset), as NumPy and tf.data.

11,228 newswires from Reuters-21578, each a list of word ids (4 = the most frequent
word; 0 padding, 1 start, 2 out-of-vocabulary, 3 unused), labelled with one of 46
topics. :func:`load_reuters` returns exactly what
``keras.datasets.reuters.load_data`` returns for the same arguments, but reads the file
through :mod:`lablib.data.sources` (a data folder, the cache, or a verified download).

Example::

    from lablib.data import load_reuters, reuters_dataset, decode_newswire
    (x_train, y_train), (x_test, y_test) = load_reuters(num_words=10000, data_dir="../shared/data")
    len(x_train), len(x_test)                   # 8982, 2246
    decode_newswire(x_train[0])[:38]            # '? ? ? said as a result of its december'
    train = reuters_dataset(x_train, y_train, batch_size=32, maxlen=200)
"""

from __future__ import annotations

import functools
import json
import os
import zipfile

import numpy as np

from lablib.data import _MODULES, sources

# The names lablib.data exports from this module are listed once, in its lazy table.
__all__ = [*_MODULES["reuters"], "REUTERS_TOPICS"]

# The 46 topics in label order (topics numbered by first appearance in the corpus;
# the same order as keras.datasets.reuters.get_label_names()).
REUTERS_TOPICS = (
    "cocoa",
    "grain",
    "veg-oil",
    "earn",
    "acq",
    "wheat",
    "copper",
    "housing",
    "money-supply",
    "coffee",
    "sugar",
    "trade",
    "reserves",
    "ship",
    "cotton",
    "carcass",
    "crude",
    "nat-gas",
    "cpi",
    "money-fx",
    "interest",
    "gnp",
    "meal-feed",
    "alum",
    "oilseed",
    "gold",
    "tin",
    "strategic-metal",
    "livestock",
    "retail",
    "ipi",
    "iron-steel",
    "rubber",
    "heat",
    "jobs",
    "lei",
    "bop",
    "zinc",
    "orange",
    "pet-chem",
    "dlr",
    "gas",
    "silver",
    "wpi",
    "hog",
    "lead",
)


# --------------------------------------------------------------------------- files


def _read_npy(handle) -> np.ndarray:
    """One ``.npy`` member; object arrays through the restricted unpickler."""
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
    elif version in ((2, 0), (3, 0)):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
    else:
        raise ValueError(f"Unsupported .npy format version {version}.")
    if dtype.hasobject:
        array = sources.RestrictedUnpickler(handle, sources.numpy_pickle_globals()).load()
    else:
        count = int(np.prod(shape)) if shape else 1
        array = np.frombuffer(handle.read(count * dtype.itemsize), dtype=dtype, count=count)
        array = array.reshape(shape, order="F" if fortran else "C")
    return np.asarray(array)


@functools.lru_cache(maxsize=2)
def _read_npz(path: str, stamp) -> tuple[np.ndarray, np.ndarray]:
    del stamp  # part of the cache key only: a changed file is read again
    with zipfile.ZipFile(path) as bundle:
        names = set(bundle.namelist())
        if not {"x.npy", "y.npy"} <= names:
            raise ValueError(
                f"{path} should hold the arrays x and y (Keras' reuters.npz), found "
                f"{sorted(names)}."
            )
        with bundle.open("x.npy") as handle:
            x = _read_npy(handle)
        with bundle.open("y.npy") as handle:
            y = _read_npy(handle)
    if len(x) != len(y):
        raise ValueError(f"{path}: {len(x)} wires but {len(y)} labels.")
    return x, y


def _raw(data_dir) -> tuple[np.ndarray, np.ndarray]:
    path = sources.dataset_path("reuters", data_dir) / "reuters.npz"
    stat = os.stat(path)
    return _read_npz(str(path), (stat.st_mtime_ns, stat.st_size))


# --------------------------------------------------------------------------- loading


def load_reuters(
    num_words=None,
    skip_top=0,
    maxlen=None,
    test_split=0.2,
    seed=113,
    start_char=1,
    oov_char=2,
    index_from=3,
    data_dir=None,
):
    # Over 80 lines for its docstring: every argument of keras.datasets.reuters.load_data.
    """Load the Reuters newswires, split into training and test sets.

    Same arguments and results as ``keras.datasets.reuters.load_data``: the wires are
    shuffled with ``np.random.RandomState(seed)``, every word id is shifted by
    ``index_from`` and each wire starts with ``start_char``; then wires that are too
    long are dropped (``maxlen``), ids outside ``[skip_top, num_words)`` become
    ``oov_char`` (or are removed when ``oov_char`` is None), and the first
    ``1 - test_split`` of the wires form the training set. Keras' details are kept on
    purpose so that results agree with code written for Keras: ``maxlen`` keeps only
    wires *shorter* than ``maxlen`` (start token included) rather than truncating
    them (use :func:`truncate_sequences` or ``reuters_dataset(maxlen=...)`` to
    truncate); ``skip_top`` and ``num_words`` are compared with the shifted ids; and
    with ``num_words=None`` the single largest id becomes ``oov_char``.

    Args:
        num_words: keep the ``num_words - index_from`` most frequent words (ids below
            ``num_words``); None keeps all.
        skip_top: ids below this become ``oov_char``.
        maxlen: drop wires of ``maxlen`` tokens or more; None keeps all.
        test_split: fraction of the wires in the test set.
        seed: shuffling seed.
        start_char: id put at the start of every wire (None: none).
        oov_char: id of words cut by ``num_words``/``skip_top`` (None: drop them).
        index_from: shift of the word ids (ids ``0..index_from-1`` are reserved: 0
            padding, 1 start, 2 out-of-vocabulary).
        data_dir: a folder holding ``reuters/reuters.npz`` (see
            :mod:`lablib.data.sources` for the search order).

    Returns:
        ``(x_train, y_train), (x_test, y_test)``: ``x_*`` object arrays of lists of int
        (one list per wire), ``y_*`` int64 arrays of topic ids ``0..45``.

    Raises:
        ValueError: bad arguments (e.g. ``test_split`` outside ``[0, 1]``, or a
            ``maxlen`` that drops every wire).
        DataNotFoundError: the file is nowhere and cannot be downloaded.

    Example::

        (x_train, y_train), (x_test, y_test) = load_reuters(num_words=10000)
    """
    if not 0.0 <= float(test_split) <= 1.0:
        raise ValueError(f"test_split must be between 0 and 1, got {test_split!r}.")
    if maxlen is not None and (isinstance(maxlen, bool) or int(maxlen) != maxlen):
        raise ValueError(f"maxlen must be a positive int or None, got {maxlen!r}.")
    xs, labels = _raw(data_dir)

    indices = np.arange(len(xs))
    np.random.RandomState(seed).shuffle(indices)
    xs, labels = xs[indices], labels[indices]

    lengths = np.fromiter((len(x) for x in xs), dtype=np.int64, count=len(xs))
    words = np.fromiter((w for x in xs for w in x), dtype=np.int64, count=int(lengths.sum()))
    if start_char is not None:
        words = words + index_from
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        words = np.insert(words, starts, start_char)
        lengths = lengths + 1
    elif index_from:
        words = words + index_from

    if maxlen:
        keep = lengths < maxlen
        if not keep.any():
            raise ValueError(
                f"maxlen={maxlen} drops every wire (the shortest has {lengths.min()} "
                f"tokens with the start token). Use a larger maxlen."
            )
        words = words[np.repeat(keep, lengths)]
        lengths, labels = lengths[keep], labels[keep]

    if not num_words:
        num_words = int(words.max())
    inside = (words >= skip_top) & (words < num_words)
    if oov_char is not None:
        words = np.where(inside, words, oov_char)
    else:
        owner = np.repeat(np.arange(len(lengths)), lengths)
        lengths = np.bincount(owner[inside], minlength=len(lengths))
        words = words[inside]

    sequences = [piece.tolist() for piece in np.split(words, np.cumsum(lengths)[:-1])]
    cut = int(len(sequences) * (1 - test_split))
    x_train = np.array(sequences[:cut], dtype="object")
    x_test = np.array(sequences[cut:], dtype="object")
    return (x_train, np.array(labels[:cut])), (x_test, np.array(labels[cut:]))


def truncate_sequences(sequences, maxlen: int, keep: str = "first") -> list:
    """Cut every sequence to at most ``maxlen`` tokens.

    Args:
        sequences: iterable of sequences (lists or 1-D arrays of token ids).
        maxlen: the longest length kept (positive int).
        keep: ``"first"`` keeps the first ``maxlen`` tokens (and the start token);
            ``"last"`` keeps the last ones (what ``keras.utils.pad_sequences`` does by
            default).

    Returns:
        A list of lists of int.

    Example::

        truncate_sequences([[1, 5, 6, 7], [1, 8]], 3)           # [[1, 5, 6], [1, 8]]
        truncate_sequences([[1, 5, 6, 7]], 3, keep="last")      # [[5, 6, 7]]
    """
    if isinstance(maxlen, bool) or not isinstance(maxlen, (int, np.integer)) or maxlen < 1:
        raise ValueError(f"maxlen must be a positive int, got {maxlen!r}.")
    if keep not in ("first", "last"):
        raise ValueError(f'keep must be "first" or "last", got {keep!r}.')
    if keep == "first":
        return [list(s[:maxlen]) for s in sequences]
    return [list(s[-maxlen:]) for s in sequences]


# --------------------------------------------------------------------------- words, topics


@functools.lru_cache(maxsize=4)
def _word_index_at(path: str, stamp) -> dict:
    del stamp
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def reuters_word_index(data_dir=None) -> dict:
    """The vocabulary: ``{word: rank}``, rank 1 for the most frequent word.

    In the sequences of :func:`load_reuters` a word appears as ``rank + index_from``.

    Args:
        data_dir: a folder holding ``reuters/reuters_word_index.json``.

    Returns:
        A new dict (30,979 words for Reuters-46).

    Example::

        reuters_word_index()["the"]     # 1
    """
    path = sources.dataset_path("reuters", data_dir) / "reuters_word_index.json"
    stat = os.stat(path)
    return dict(_word_index_at(str(path), (stat.st_mtime_ns, stat.st_size)))


@functools.lru_cache(maxsize=4)
def _reverse_index(path: str, stamp) -> dict:
    return {rank: word for word, rank in _word_index_at(path, stamp).items()}


def reuters_topic_names() -> list:
    """The 46 topic names, ``names[label]`` being the topic of label ``label``.

    Example::

        reuters_topic_names()[3]     # 'earn'
    """
    return list(REUTERS_TOPICS)


def decode_newswire(sequence, index_from: int = 3, word_index=None, data_dir=None) -> str:
    """Turn a sequence of ids back into words; reserved ids become ``'?'``.

    Args:
        sequence: list or 1-D array of ids as returned by :func:`load_reuters`.
        index_from: the ``index_from`` the sequence was loaded with; ids below it
            (padding, start, out-of-vocabulary) and unknown ids are shown as ``'?'``.
        word_index: a ``{word: rank}`` dict to use instead of the dataset's.
        data_dir: where to find the word index (when ``word_index`` is None).

    Returns:
        The words joined by spaces.

    Example::

        decode_newswire([1, 4, 2, 8])     # '? the ? said'
    """
    if word_index is None:
        path = sources.dataset_path("reuters", data_dir) / "reuters_word_index.json"
        stat = os.stat(path)
        reverse = _reverse_index(str(path), (stat.st_mtime_ns, stat.st_size))
    else:
        reverse = {rank: word for word, rank in word_index.items()}
    tokens = np.asarray(sequence).reshape(-1).tolist()
    return " ".join(
        reverse.get(token - index_from, "?") if token >= index_from else "?" for token in tokens
    )


# --------------------------------------------------------------------------- tf.data


def reuters_dataset(
    x,
    y,
    batch_size: int = 32,
    maxlen=None,
    shuffle: bool = True,
    seed=None,
    bucket=False,
    keep: str = "first",
    drop_remainder: bool = False,
):
    # Over 80 lines for its docstring: what padding, bucketing and shuffling cost, measured.
    """A ``tf.data.Dataset`` of padded batches ``(tokens [B, T], labels [B])``.

    Two ways to pad (wires longer than ``maxlen`` are truncated first):

    - ``bucket=False`` (default): each batch is padded with 0 to its own longest wire
      (``padded_batch``). Batches of short wires stay short, but ``T`` changes from
      batch to batch and from epoch to epoch (the shuffle draws new batches).
    - ``bucket=True`` or a sequence of lengths: wires are grouped into length buckets
      and every batch is padded to its bucket's length, so all batches have one of a
      few fixed shapes ``[batch_size, L]`` (plus, per bucket, one last smaller batch
      unless ``drop_remainder``), the same shapes every epoch. Use it when the model is
      compiled with XLA (``jit_compile=True``; Keras 3 turns XLA on by itself on a GPU):
      XLA compiles once per input shape, so per-batch padding may compile again in any
      epoch that draws a batch of a new length, while buckets compile during the first
      epoch only. It also pads less (at Reuters' ``maxlen=256`` nearly every batch of
      32 holds a wire that long, so per-batch padding pads almost every wire to 256).
      ``True`` picks four lengths from the data (the quartiles of the wires' lengths,
      rounded up to a multiple of 8, the last one the longest wire: on Reuters at
      ``maxlen=256`` a wire is padded to 148 tokens on average instead of 256, with at
      most 8 batch shapes); pass the lengths yourself, e.g. ``bucket=(64, 128, 256)``,
      to give several datasets the same shapes. Bucketing reorders the wires (batches
      come bucket by bucket as they fill): read the labels from the batches, not from
      ``y``, when ``shuffle=False`` order matters.

    The dataset's length (``len(dataset)``, ``dataset.cardinality()``) is the number of
    batches per epoch in both modes, so ``fit`` shows progress and learning-rate
    schedules can count steps.

    Each batch is gathered at once: the pipeline draws the epoch's order of the wires
    (one shuffle), cuts it into batches (with buckets: the batches grouping the wires
    in that order one at a time by bucket would make, full batches in the order their
    last wires come, then each bucket's short one), and gathers each batch's rows in one
    op. It costs the host a fifth or less of what slicing out every wire and grouping
    them one at a time did, for the same batches in the same order
    (``benchmarks/lab2_step.py`` measures it in Lab 2's training).

    Args:
        x: sequences of token ids (as from :func:`load_reuters`).
        y: integer labels, one per sequence.
        batch_size: wires per batch.
        maxlen: truncate every wire to this many tokens (None: no truncation).
        shuffle: reshuffle the wires every epoch.
        seed: shuffling seed (None: a different order every run).
        bucket: False, True, or an increasing sequence of padded lengths whose last
            entry is at least the longest (truncated) wire.
        keep: which end of a long wire to keep, ``"first"`` or ``"last"``.
        drop_remainder: drop the last batch (per bucket when bucketing) if it holds
            fewer than ``batch_size`` wires: every batch then has ``batch_size`` rows
            (what a TPU needs).

    Returns:
        A ``tf.data.Dataset`` yielding ``(int32 [B, T], int64 [B])`` with ``T <= maxlen``
        (with buckets: ``T`` one of the bucket lengths, see :func:`reuters_bucket_lengths`).

    Example::

        train = reuters_dataset(x_train, y_train, batch_size=32, maxlen=256, seed=0, bucket=True)
        len(train)                                  # batches per epoch
        model.fit(train, epochs=3)
    """
    import tensorflow as tf

    sequences = list(x)
    labels = np.asarray(y).reshape(-1).astype(np.int64)
    if len(sequences) != len(labels):
        raise ValueError(f"x has {len(sequences)} sequences but y has {len(labels)} labels.")
    if not len(labels):
        raise ValueError("x holds no wires: give reuters_dataset at least one sequence.")
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, (int, np.integer))
        or batch_size < 1
    ):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    if maxlen is not None:
        sequences = truncate_sequences(sequences, maxlen, keep=keep)
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    flat = np.fromiter((t for s in sequences for t in s), dtype=np.int32, count=int(lengths.sum()))
    bucketed = bucket is not False and bucket is not None
    padded = _bucket_lengths(lengths, bucket) if bucketed else None
    # The wires live in host memory, where tf.data runs its functions. Made eagerly on a
    # machine with a GPU, a constant would be placed on the GPU, and every batch the map
    # below gathers out of it would then cross to the host.
    with tf.device("/CPU:0"):
        wires = tf.RaggedTensor.from_row_lengths(tf.constant(flat), tf.constant(lengths))
        targets = tf.constant(labels)
        plan = _bucket_plan(tf, lengths, padded, batch_size, drop_remainder) if bucketed else None

    # One element per epoch: the order of the wires (shuffled anew each epoch).
    order = tf.data.Dataset.range(len(labels))
    if shuffle:
        order = order.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
    if plan is None:  # each batch padded to its own longest wire
        batches = order.batch(batch_size, drop_remainder=drop_remainder)
        count = len(labels) // batch_size if drop_remainder else -(-len(labels) // batch_size)
    else:  # the whole epoch's order at once, cut into its bucketed batches
        batches = order.batch(len(labels)).flat_map(plan)
        count = plan.batches

    def one_batch(rows, length=None, size=None):
        if size is not None:  # a bucket's batch: its wires, then padded to the bucket's length
            rows = rows[:size]
        tokens = tf.gather(wires, rows).to_tensor()  # padded to the batch's longest wire
        tokens.set_shape([rows.shape[0], None])  # [batch_size, None] where known (dropping)
        if length is not None:
            tokens = tf.pad(tokens, [[0, 0], [0, length - tf.shape(tokens, tf.int64)[1]]])
        return tokens, tf.gather(targets, rows)

    dataset = batches.map(one_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(int(count)))
    return dataset.prefetch(tf.data.AUTOTUNE)


def _bucket_plan(tf, lengths, padded, batch_size: int, drop_remainder: bool):
    """A function from one epoch's order of the wires (int64 ``[n]``) to that epoch's
    bucketed batches, a dataset of ``(rows, padded length, size)`` (``rows``: the batch's
    wires, filled up to ``batch_size`` with its first one; ``size``: how many are its
    own): the batches ``Dataset.bucket_by_sequence_length`` makes from the wires in that
    order, computed at once. A bucket's batch leaves when its last wire comes, so full
    batches come in the order their last wires do; the short batches come at the end,
    bucket by bucket in the order of the buckets, as TensorFlow 2's grouping flushes them
    (none with ``drop_remainder``; ``tests/data/test_reuters.py`` compares the two
    batch by batch). ``plan.batches``: the number of batches per epoch."""
    keys = np.searchsorted(padded, lengths).astype(np.int64)  # each wire's bucket
    counts = np.bincount(keys, minlength=len(padded)).astype(np.int64)
    full = counts // batch_size
    n = len(lengths)
    bucket_of, first_of_bucket = tf.constant(keys), tf.constant(np.cumsum(counts) - counts)
    full_batches, bucket_length = tf.constant(full), tf.constant(padded.astype(np.int64))

    def plan(order):
        key = tf.gather(bucket_of, order)  # the bucket of the wire at each place in the order
        place = tf.range(n, dtype=tf.int64)
        # rank: how many wires of its bucket come before it in the order
        start = tf.gather(first_of_bucket, key)  # its bucket's first place in `grouped`
        grouped = tf.cast(tf.argsort(key, stable=True), tf.int64)
        rank = tf.scatter_nd(grouped[:, tf.newaxis], place - tf.gather(start, grouped), [n])
        batch = rank // batch_size
        is_full = batch < tf.gather(full_batches, key)
        # the place of a full batch's last wire: in `grouped` (places by bucket, in order)
        closing = start + (batch + 1) * batch_size - 1
        last = tf.gather(grouped, tf.minimum(closing, n - 1))  # a short batch's: unused
        leaves = tf.where(is_full, last, n + key)  # when the wire's batch leaves
        kept = is_full if drop_remainder else tf.ones_like(is_full)
        leaves, place, order, key = (tf.boolean_mask(t, kept) for t in (leaves, place, order, key))
        by_leaving = tf.argsort(leaves * (n + 1) + place, stable=True)
        _, _, sizes = tf.unique_with_counts(tf.gather(leaves, by_leaving), out_idx=tf.int64)
        first = tf.cumsum(sizes, exclusive=True)  # each batch's first place in by_leaving
        length = tf.gather(bucket_length, tf.gather(tf.gather(key, by_leaving), first))
        # The batches as the rows of one matrix [batches, batch_size], a short one's row
        # filled up with its first wire (one_batch keeps its first `size` entries).
        wires = tf.gather(order, by_leaving)
        batch_of = tf.repeat(tf.range(tf.size(sizes, tf.int64)), sizes)
        column = tf.range(tf.size(by_leaving, tf.int64)) - tf.gather(first, batch_of)
        rows = tf.tensor_scatter_nd_update(
            tf.repeat(tf.gather(wires, first)[:, tf.newaxis], batch_size, 1),
            tf.stack([batch_of, column], axis=1),
            wires,
        )
        return tf.data.Dataset.from_tensor_slices((rows, length, sizes))

    plan.batches = int((full if drop_remainder else -(-counts // batch_size)).sum())
    return plan


def reuters_bucket_lengths(x, maxlen=None, bucket=True, keep: str = "first") -> tuple:
    """The padded lengths ``reuters_dataset(x, maxlen=maxlen, bucket=bucket)`` uses.

    Example::

        reuters_bucket_lengths(x_train, maxlen=256)   # (64, 96, 184, 256) for Reuters' training wires
    """
    sequences = truncate_sequences(list(x), maxlen, keep=keep) if maxlen is not None else list(x)
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    return tuple(int(n) for n in _bucket_lengths(lengths, bucket))


def _bucket_lengths(lengths: np.ndarray, bucket) -> np.ndarray:
    """Increasing padded lengths for ``bucket`` (True: from the data's quantiles)."""
    longest = max(1, int(lengths.max())) if len(lengths) else 1
    if bucket is True:
        if not len(lengths):
            return np.array([longest], dtype=np.int64)
        points = np.quantile(lengths, [0.25, 0.5, 0.75, 1.0])
        padded = np.maximum(8, -(-np.ceil(points).astype(np.int64) // 8) * 8)
        return np.unique(np.minimum(padded, longest))  # the last one is the longest wire
    try:
        padded = np.asarray([int(n) for n in bucket], dtype=np.int64)
    except (TypeError, ValueError):
        raise ValueError(
            f"bucket must be True, False or a sequence of lengths (ints), got {bucket!r}."
        ) from None
    if not len(padded) or (padded < 1).any() or (np.diff(padded) <= 0).any():
        raise ValueError(
            f"bucket lengths must be positive and strictly increasing, got {list(padded)}."
        )
    if padded[-1] < longest:
        raise ValueError(
            f"the longest wire has {longest} tokens but the largest bucket length is "
            f"{int(padded[-1])}: add a length >= {longest} to bucket, or pass maxlen="
            f"{int(padded[-1])} to truncate the wires to it."
        )
    return padded
