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
    x, y, batch_size=32, maxlen=None, shuffle=True, seed=None, bucket=False, drop_remainder=False
):
    """``reuters_dataset(x, y, ...)`` as it was built before: see the module's docstring."""
    import numpy as np
    import tensorflow as tf

    from lablib.data.reuters import _bucket_lengths, truncate_sequences

    sequences = truncate_sequences(list(x), maxlen) if maxlen else list(x)
    labels = np.asarray(y).astype(np.int64)
    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    with tf.device("/CPU:0"):
        tokens = tf.constant(np.concatenate([np.asarray(s, np.int32) for s in sequences]))
        starts = tf.constant(np.cumsum(lengths) - lengths)
        sizes, targets = tf.constant(lengths), tf.constant(labels)
    dataset = tf.data.Dataset.range(len(labels))
    if shuffle:
        dataset = dataset.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)

    def one_wire(i):
        return tokens[starts[i] : starts[i] + sizes[i]], targets[i]

    dataset = dataset.map(one_wire, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    shapes, padding = ([None], []), (0, np.int64(0))
    if not bucket:
        return dataset.padded_batch(
            batch_size, shapes, padding, drop_remainder=drop_remainder
        ).prefetch(tf.data.AUTOTUNE)
    padded = _bucket_lengths(lengths, bucket)

    def wire_length(wire, label):
        return tf.shape(wire)[0]

    counts = np.bincount(np.searchsorted(padded, lengths))
    batches = int((counts // batch_size if drop_remainder else -(-counts // batch_size)).sum())
    dataset = dataset.bucket_by_sequence_length(
        element_length_func=wire_length,
        bucket_boundaries=[int(n) + 1 for n in padded],
        bucket_batch_sizes=[batch_size] * (len(padded) + 1),
        padded_shapes=shapes,
        padding_values=padding,
        pad_to_bucket_boundary=True,
        drop_remainder=drop_remainder,
    )
    return dataset.apply(tf.data.experimental.assert_cardinality(batches)).prefetch(
        tf.data.AUTOTUNE
    )
