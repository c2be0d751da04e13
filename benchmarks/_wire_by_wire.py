"""Lab 2's input pipeline as it was up to 2026-11-27, kept to measure against and to test by.

``lablib.data.reuters_dataset`` used to slice each wire out on its own (a ``map`` over
the wires' indices), then let ``Dataset.bucket_by_sequence_length`` (or ``padded_batch``)
group the wires into batches one wire at a time: 32 calls of a function and a grouping
window per batch of 32. It now gathers each batch at once from the epoch's order of the
wires and makes the same batches, in the same order, bit for bit:
``tests/data/test_reuters.py`` checks that against :func:`wire_by_wire`, and
``lab2_step.py`` times the rows of the lab before on it.
"""

from __future__ import annotations


def wire_by_wire(
    x,
    y,
    batch_size=32,
    maxlen=None,
    shuffle=True,
    seed=None,
    bucket=False,
    keep="first",
    drop_remainder=False,
):
    """``reuters_dataset(x, y, ...)`` as it was built before (its checks of the arguments
    left out): see the module's docstring."""
    import numpy as np
    import tensorflow as tf

    from lablib.data.reuters import _bucket_lengths, truncate_sequences

    sequences = list(x)
    labels = np.asarray(y).reshape(-1).astype(np.int64)
    if maxlen is not None:
        sequences = truncate_sequences(sequences, maxlen, keep=keep)
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    flat = np.fromiter((t for s in sequences for t in s), dtype=np.int32, count=int(lengths.sum()))
    with tf.device("/CPU:0"):
        tokens = tf.constant(flat)
        starts = tf.constant(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64))
        sizes = tf.constant(lengths)
        targets = tf.constant(labels)

    def one_wire(i):
        return tokens[starts[i] : starts[i] + sizes[i]], targets[i]

    def wire_length(tokens, label):
        return tf.shape(tokens)[0]

    dataset = tf.data.Dataset.range(len(labels))
    if shuffle:
        dataset = dataset.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.map(one_wire, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if bucket is not False and bucket is not None:
        padded = _bucket_lengths(lengths, bucket)
        counts = np.bincount(np.searchsorted(padded, lengths), minlength=len(padded))
        per_bucket = counts // batch_size if drop_remainder else -(-counts // batch_size)
        dataset = dataset.bucket_by_sequence_length(
            element_length_func=wire_length,
            bucket_boundaries=[int(n) + 1 for n in padded],
            bucket_batch_sizes=[batch_size] * (len(padded) + 1),
            padded_shapes=([None], []),
            padding_values=(0, np.int64(0)),
            pad_to_bucket_boundary=True,
            drop_remainder=drop_remainder,
        )
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(int(per_bucket.sum())))
    else:
        dataset = dataset.padded_batch(
            batch_size,
            padded_shapes=([None], []),
            padding_values=(0, np.int64(0)),
            drop_remainder=drop_remainder,
        )
    return dataset.prefetch(tf.data.AUTOTUNE)
