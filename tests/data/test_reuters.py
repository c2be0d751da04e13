"""Reuters-46 on the real file in shared/data/reuters, checked against Keras' own loader."""

import json

import numpy as np
import pytest

from lablib.data import (
    decode_newswire,
    load_reuters,
    reuters_dataset,
    reuters_topic_names,
    reuters_word_index,
)
from lablib.data.reuters import truncate_sequences


@pytest.fixture(scope="module")
def default_split(shared_data):
    return load_reuters(data_dir=shared_data)


@pytest.fixture
def keras_load_data(shared_data, monkeypatch):
    """Keras 3's reuters.load_data reading the same file (its get_file patched)."""
    from keras.src.datasets import reuters as keras_reuters

    path = str(shared_data / "reuters" / "reuters.npz")
    monkeypatch.setattr(keras_reuters, "get_file", lambda *args, **kwargs: path)
    return keras_reuters.load_data


def assert_same_split(ours, theirs):
    for (x_ours, y_ours), (x_keras, y_keras) in zip(ours, theirs):
        assert x_ours.dtype == x_keras.dtype == object
        assert x_ours.shape == x_keras.shape
        assert x_ours.tolist() == x_keras.tolist()
        assert y_ours.dtype == y_keras.dtype
        np.testing.assert_array_equal(y_ours, y_keras)


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"num_words": 10000, "maxlen": 200},
        {"num_words": 1000, "skip_top": 20, "seed": 7, "test_split": 0.3},
        {"start_char": None, "index_from": 0, "oov_char": None, "num_words": 500},
        {"num_words": None, "skip_top": 2, "maxlen": 50, "oov_char": None},
    ],
    ids=["defaults", "vocab+maxlen", "skip_top+seed", "no-start-no-oov", "maxlen-drop-oov"],
)
def test_matches_keras_load_data(shared_data, keras_load_data, arguments):
    ours = load_reuters(data_dir=shared_data, **arguments)
    theirs = keras_load_data(**arguments)
    assert_same_split(ours, theirs)


def test_published_statistics(default_split):
    (x_train, y_train), (x_test, y_test) = default_split
    assert len(x_train) + len(x_test) == 11228
    assert (len(x_train), len(x_test)) == (8982, 2246)
    assert y_train[:10].tolist() == [3, 4, 3, 4, 4, 4, 4, 3, 3, 16]
    names = reuters_topic_names()
    counts = dict(zip(names, np.bincount(y_train, minlength=46).tolist()))
    assert counts["earn"] == 3159 and counts["acq"] == 1949
    assert set(np.unique(np.concatenate([y_train, y_test]))) == set(range(46))
    assert all(seq[0] == 1 for seq in x_train[:100])  # start_char


def test_num_words_caps_the_ids(shared_data):
    (x_train, _), (x_test, _) = load_reuters(num_words=1000, data_dir=shared_data)
    largest = max(max(seq) for seq in list(x_train) + list(x_test))
    assert largest == 999


def test_maxlen_drops_long_wires(shared_data, default_split):
    (x_train, _), (x_test, _) = load_reuters(maxlen=100, data_dir=shared_data)
    assert max(len(seq) for seq in list(x_train) + list(x_test)) == 99
    everything = list(default_split[0][0]) + list(default_split[1][0])
    assert len(x_train) + len(x_test) == sum(len(seq) < 100 for seq in everything)


def test_bad_arguments_are_explained(shared_data):
    with pytest.raises(ValueError, match="test_split must be between 0 and 1, got 1.5"):
        load_reuters(test_split=1.5, data_dir=shared_data)
    with pytest.raises(ValueError, match="maxlen=2 drops every wire"):
        load_reuters(maxlen=2, data_dir=shared_data)


def test_word_index_and_topics(shared_data):
    index = reuters_word_index(data_dir=shared_data)
    assert len(index) == 30979
    assert sorted(index.values()) == list(range(1, 30980))
    assert index["the"] == 1  # the most frequent words agree with Keras' file
    names = reuters_topic_names()
    assert len(names) == 46 and len(set(names)) == 46
    with open(shared_data / "reuters" / "reuters_topics.json") as handle:
        assert names == json.load(handle)


def test_decode_newswire(shared_data, default_split):
    index = reuters_word_index(data_dir=shared_data)
    words = ["the", "of", "said"]
    sequence = [0, 1, 2] + [index[w] + 3 for w in words]
    assert decode_newswire(sequence, data_dir=shared_data) == "? ? ? the of said"
    assert decode_newswire(np.array([index["said"]]), index_from=0, data_dir=shared_data) == "said"
    text = decode_newswire(default_split[0][0][0], data_dir=shared_data)
    assert text.startswith("? ") and len(text.split()) == len(default_split[0][0][0])
    assert decode_newswire([4, 5], word_index={"x": 1, "y": 2}) == "x y"


def test_truncate_sequences():
    assert truncate_sequences([[1, 5, 6, 7], [1, 8]], 3) == [[1, 5, 6], [1, 8]]
    assert truncate_sequences([np.array([1, 5, 6, 7])], 3, keep="last") == [[5, 6, 7]]
    with pytest.raises(ValueError, match='keep must be "first" or "last"'):
        truncate_sequences([[1]], 3, keep="end")
    with pytest.raises(ValueError, match="maxlen must be a positive int, got 0"):
        truncate_sequences([[1]], 0)


def test_reuters_dataset_pads_each_batch(default_split):
    (x_train, y_train), _ = default_split
    x, y = x_train[:100], y_train[:100]
    dataset = reuters_dataset(x, y, batch_size=16, maxlen=120, shuffle=False)
    batches = list(dataset.as_numpy_iterator())
    assert len(batches) == 7
    assert int(dataset.cardinality()) == 7
    tokens, labels = batches[0]
    assert tokens.dtype == np.int32 and labels.dtype == np.int64
    assert tokens.shape == (16, min(120, max(len(s) for s in x[:16])))
    for row, sequence in zip(tokens, x[:16]):
        kept = sequence[:120]
        assert row[: len(kept)].tolist() == kept
        assert not row[len(kept) :].any()  # padded with 0
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), y)
    assert max(b[0].shape[1] for b in batches) <= 120


def test_reuters_dataset_shuffle_and_bucket(default_split):
    (x_train, y_train), _ = default_split
    x, y = x_train[:200], y_train[:200]
    first = np.concatenate([b[1] for b in reuters_dataset(x, y, batch_size=32, seed=1)])
    again = np.concatenate([b[1] for b in reuters_dataset(x, y, batch_size=32, seed=1)])
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, y)
    assert sorted(first.tolist()) == sorted(y.tolist())
    bucketed = list(reuters_dataset(x, y, batch_size=32, bucket=True, seed=0).as_numpy_iterator())
    assert sum(len(b[1]) for b in bucketed) == 200
    padding = sum(int((b[0] == 0).sum()) for b in bucketed)
    plain = list(reuters_dataset(x, y, batch_size=32, seed=0).as_numpy_iterator())
    assert padding < sum(int((b[0] == 0).sum()) for b in plain)


def _rows(batches):
    """(label, wire without its padding) for every row of every batch."""
    return sorted(
        (int(label), tuple(int(t) for t in row[row != 0]))
        for tokens, labels in batches
        for row, label in zip(tokens, labels)
    )


def test_bucketed_batches_have_a_fixed_set_of_shapes_every_epoch(default_split):
    """bucket=True: every batch is padded to its bucket's length, so the set of batch
    shapes is small and the same in every epoch (XLA compiles once per shape)."""
    from lablib.data import reuters_bucket_lengths

    (x_train, y_train), _ = default_split
    x, y = x_train[:1000], y_train[:1000]
    lengths = reuters_bucket_lengths(x, maxlen=256)
    assert list(lengths) == sorted(set(lengths)) and lengths[-1] == 256 and len(lengths) <= 4
    assert all(n % 8 == 0 for n in lengths[:-1])
    dataset = reuters_dataset(x, y, batch_size=32, maxlen=256, seed=0, bucket=True)
    epochs = [list(dataset.as_numpy_iterator()) for _ in range(3)]
    shapes = [{b[0].shape for b in epoch} for epoch in epochs]
    assert shapes[0] == shapes[1] == shapes[2]
    assert {t for _, t in shapes[0]} <= set(lengths)
    assert sum(1 for b in epochs[0] if len(b[1]) < 32) <= len(lengths)  # one short batch per bucket
    assert len(dataset) == len(epochs[0]) == len(epochs[2])  # the cardinality fit sees is exact
    # nothing lost, nothing repeated, each wire in a bucket that holds it, padding after it
    expected = sorted((int(label), tuple(wire[:256])) for wire, label in zip(x, y))
    assert _rows(epochs[1]) == expected
    for tokens, _ in epochs[1]:
        t = tokens.shape[1]
        longest = int((tokens != 0).sum(axis=1).max())
        assert longest <= t and (t == lengths[0] or longest > lengths[lengths.index(t) - 1])
    # the batches' order changes between epochs (reshuffled), the shapes do not
    assert [b[1].tolist() for b in epochs[0]] != [b[1].tolist() for b in epochs[1]]
    # unbucketed batches at the same truncation pad more
    plain = list(reuters_dataset(x, y, batch_size=32, maxlen=256, seed=0).as_numpy_iterator())
    assert sum(b[0].size for b in epochs[0]) < sum(b[0].size for b in plain)


def test_bucket_lengths_given_and_drop_remainder(default_split):
    (x_train, y_train), _ = default_split
    x, y = x_train[:500], y_train[:500]
    dataset = reuters_dataset(
        x, y, batch_size=16, maxlen=128, bucket=(32, 64, 128), drop_remainder=True, seed=0
    )
    batches = list(dataset.as_numpy_iterator())
    assert {b[0].shape for b in batches} <= {(16, 32), (16, 64), (16, 128)}
    truncated = [min(len(w), 128) for w in x]
    counts = np.bincount(np.searchsorted([32, 64, 128], truncated), minlength=3)
    assert len(batches) == len(dataset) == int((counts // 16).sum())
    unbucketed = list(
        reuters_dataset(x, y, batch_size=16, maxlen=128, drop_remainder=True).as_numpy_iterator()
    )
    assert len(unbucketed) == len(x) // 16 and all(b[0].shape[0] == 16 for b in unbucketed)


def _pipeline_before():
    """benchmarks/_wire_by_wire.py: reuters_dataset's pipeline before it gathered each batch
    at once (one wire at a time through a map and bucket_by_sequence_length)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "_wire_by_wire.py"
    spec = importlib.util.spec_from_file_location("_wire_by_wire", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.wire_by_wire


@pytest.mark.parametrize(
    "options",
    [
        dict(maxlen=256, bucket=True, seed=0),
        dict(maxlen=128, bucket=True, seed=3, batch_size=16),
        dict(maxlen=256, bucket=(64, 128, 256), seed=1, drop_remainder=True),
        dict(maxlen=256, shuffle=False, bucket=True),
        dict(bucket=True, seed=5, batch_size=7),
        dict(maxlen=256, seed=0),
        dict(maxlen=64, seed=2, drop_remainder=True, batch_size=100),
        dict(maxlen=256, shuffle=False, batch_size=256),
        dict(maxlen=200, keep="last", bucket=True, seed=4, batch_size=1),
        dict(maxlen=256, bucket=(8, 16, 24, 32, 1000, 2000), seed=6),  # buckets left empty
        dict(maxlen=256, bucket=True, seed=7, batch_size=5000),  # one short batch per bucket
    ],
    ids=lambda options: ",".join(f"{k}={v}" for k, v in options.items()),
)
def test_batches_gathered_at_once_are_the_batches_made_one_wire_at_a_time(default_split, options):
    """reuters_dataset gathers each batch at once from the epoch's order of the wires; it
    must make exactly the batches the pipeline before made one wire at a time (same wires,
    same order, same padding, same order of batches, every epoch), so that the lab's
    figures, measured on the pipeline before, still hold: only the cost changed."""
    (x_train, y_train), _ = default_split
    before = _pipeline_before()
    for x, y in ((x_train[:3000], y_train[:3000]), (x_train[:37], y_train[:37])):
        old, new = before(x, y, **options), reuters_dataset(x, y, **options)
        assert len(new) == len(old) and new.element_spec == old.element_spec
        for _epoch in range(2):  # the second epoch reshuffles: both must follow the same order
            old_batches = list(old.as_numpy_iterator())
            new_batches = list(new.as_numpy_iterator())
            assert len(new_batches) == len(old_batches) == len(new)
            for (old_tokens, old_labels), (tokens, labels) in zip(old_batches, new_batches):
                assert tokens.dtype == old_tokens.dtype and labels.dtype == old_labels.dtype
                np.testing.assert_array_equal(tokens, old_tokens)
                np.testing.assert_array_equal(labels, old_labels)


def test_without_a_seed_the_global_seed_gives_the_same_order_as_before(default_split):
    """seed=None under tf.keras.utils.set_random_seed (as the lab seeds): the shuffle's
    seed comes from the global one, the same way for both pipelines."""
    import tensorflow as tf

    (x_train, y_train), _ = default_split
    x, y = x_train[:500], y_train[:500]
    labels = []
    for make in (_pipeline_before(), reuters_dataset):
        tf.keras.utils.set_random_seed(3)
        dataset = make(x, y, batch_size=32, maxlen=128, bucket=True)
        labels.append([b[1].tolist() for _ in range(2) for b in dataset.as_numpy_iterator()])
    assert labels[0] == labels[1]


def test_short_and_empty_wires_and_no_wires():
    """Wires of no tokens are padded like the rest; no wires at all is refused, with the fix."""
    before = _pipeline_before()
    x, y = [[4, 5], [], [6], [7, 8, 9]] * 5, [0, 1, 2, 3] * 5
    for options in (
        dict(bucket=True, seed=0, batch_size=3),
        dict(bucket=(2, 8), batch_size=4, seed=1),
    ):
        old = list(before(x, y, **options).as_numpy_iterator())
        new = list(reuters_dataset(x, y, **options).as_numpy_iterator())
        assert [b[0].tolist() for b in new] == [b[0].tolist() for b in old]
        assert [b[1].tolist() for b in new] == [b[1].tolist() for b in old]
    with pytest.raises(ValueError, match="x holds no wires: give reuters_dataset at least one"):
        reuters_dataset([], [])


@pytest.mark.parametrize(
    "bucket, message",
    [
        ((32, 64), "the longest wire has 128 tokens but the largest bucket length is 64"),
        ((64, 32, 128), "strictly increasing"),
        (("short",), "sequence of lengths"),
    ],
)
def test_bad_bucket_lengths_are_refused_with_the_fix(default_split, bucket, message):
    (x_train, y_train), _ = default_split
    long_enough = [w for w in x_train[:200] if len(w) >= 128][:20]
    with pytest.raises(ValueError, match=message):
        reuters_dataset(long_enough, np.zeros(len(long_enough), "int64"), maxlen=128, bucket=bucket)


@pytest.mark.legacy
def test_reuters_batches_train_a_tf_keras_model_in_legacy_mode(shared_data):
    """Lab 2 runs on tf_keras (TF_USE_LEGACY_KERAS=1): the batches must feed tf.keras."""
    import tensorflow as tf

    assert tf.keras.layers.Layer.__module__.startswith("tf_keras")
    (x_train, y_train), _ = load_reuters(num_words=1000, data_dir=shared_data)
    train = reuters_dataset(x_train[:64], y_train[:64], batch_size=16, maxlen=50, seed=0)
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Embedding(1000, 8),
            tf.keras.layers.GlobalAveragePooling1D(),
            tf.keras.layers.Dense(46),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    history = model.fit(train, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    assert np.isfinite(history.history["loss"]).all()


_DEVICE_CHECK = r"""
import tensorflow as tf
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
from lablib.data import reuters_dataset

with tf.device("/CPU:1"):  # stands for a GPU: the device eager constants go to by default
    dataset = reuters_dataset([[4, 5, 6], [7, 8], [9]] * 8, [0, 1, 2] * 8, batch_size=4, bucket=True)
devices, node = [], dataset
while node is not None:
    function = getattr(node, "_map_func", None)
    if function is not None:
        devices += [t.device for t in function.function.captured_inputs]
    node = getattr(node, "_input_dataset", None)
print("DEVICES", devices)
assert devices and all(d.endswith("CPU:0") for d in devices), devices
assert sum(len(t) for t, _ in dataset) == 24
"""


def test_the_wires_stay_in_host_memory_whatever_the_default_device():
    """reuters_dataset's map slices each wire out of constants it captures; created on a
    GPU (the default device of eager code on a GPU machine) every slice would cross to the
    host. Two logical CPUs stand in for a host and a GPU: built under the second, the
    captured constants must still be on the first."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _DEVICE_CHECK], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "DEVICES" in done.stdout
