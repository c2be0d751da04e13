"""lablib.training: Lab 2's schedule, topic weights and best-epoch callback."""

import numpy as np
import pytest

from lablib.backend import keras
from lablib.training import BestValidationEpoch, no_xla_update, topic_weights, warmup_cosine


def test_warmup_cosine_rises_to_the_peak_then_decays_to_zero():
    schedule = warmup_cosine(1e-3, steps_per_epoch=10, epochs=5)
    values = [float(schedule(step)) for step in (0, 5, 10, 30, 50)]
    assert values[0] == 0.0 and values[1] == pytest.approx(5e-4, rel=1e-5)
    assert values[2] == pytest.approx(1e-3, rel=1e-5)  # the end of the warm-up epoch
    assert 0 < values[3] < 1e-3 and values[4] == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="pass len\\(train_ds\\) as steps_per_epoch"):
        warmup_cosine(1e-3, steps_per_epoch=0, epochs=5)
    with pytest.raises(ValueError, match="peak must be a positive learning rate"):
        warmup_cosine(0.0, steps_per_epoch=10, epochs=5)


def test_topic_weights_keep_the_average_example_at_one():
    labels = np.array([0] * 90 + [1] * 9 + [3])
    weights = topic_weights(labels, num_classes=4)
    assert weights[2] == 0.0  # absent from the training labels
    assert np.mean([weights[c] for c in labels]) == pytest.approx(1.0)
    assert weights[3] / weights[0] == pytest.approx(np.sqrt(90))  # n_c ** -0.5
    assert topic_weights(labels, 4, power=0) is None
    assert topic_weights(labels, 4, power=1.0)[3] / topic_weights(labels, 4, power=1.0)[
        0
    ] == pytest.approx(90)
    with pytest.raises(ValueError, match=r"class ids in \[0, 3\)"):
        topic_weights(labels, num_classes=3)


class _FakeModel:
    def __init__(self):
        self.weights, self.stop_training = 0, False

    def get_weights(self):
        return self.weights

    def set_weights(self, weights):
        self.weights = weights


def test_best_validation_epoch_stops_and_restores_the_best_epoch():
    model = _FakeModel()
    keeper = BestValidationEpoch(patience=2, metrics={"val_extra": lambda m: m.weights * 10})
    keeper.set_model(model)
    keeper.on_train_begin()
    seen = []
    for epoch, accuracy in enumerate([0.5, 0.7, 0.6, 0.65, 0.9]):
        if model.stop_training:
            break
        model.weights = epoch  # what "training" left after this epoch
        keeper.on_epoch_begin(epoch)
        logs = {"val_accuracy": accuracy}
        keeper.on_epoch_end(epoch, logs)
        seen.append(logs["val_extra"])
    keeper.on_train_end()
    assert seen == [0, 10, 20, 30]  # the metric is in the logs; epoch 5 never ran
    assert keeper.best_epoch == 2 and keeper.best == 0.7 and model.weights == 1
    assert len(keeper.epoch_seconds) == 4


def test_best_validation_epoch_in_fit_says_what_the_logs_lack():
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(
        "adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"]
    )
    keeper = BestValidationEpoch(patience=5, metrics={"val_score": lambda m: 0.25})
    history = model.fit(x, y, validation_data=(x, y), epochs=3, verbose=0, callbacks=[keeper])
    assert history.history["val_score"] == [0.25] * 3 and 1 <= keeper.best_epoch <= 3
    with pytest.raises(KeyError, match="fit with validation_data"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[BestValidationEpoch()])


def test_one_validation_pass_matches_keras_validation_and_feeds_prediction_metrics():
    """validation=(x, y) scores the set with one predict: its val_loss and val_accuracy are
    Keras' own validation figures for the same weights, and the prediction metrics see the
    labels and the predicted classes of that pass."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(96, 4)).astype("float32")
    y = (x[:, 0] + 0.3 * rng.normal(size=96) > 0).astype("int32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(
        "adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"]
    )
    seen = []
    keeper = BestValidationEpoch(
        patience=5,
        validation=(x, y),
        prediction_metrics={
            "val_errors": lambda labels, predicted: (
                seen.append((labels, predicted)) or float(np.sum(labels != predicted))
            )
        },
    )
    history = model.fit(x, y, epochs=2, verbose=0, callbacks=[keeper]).history
    loss, accuracy = model.evaluate(x, y, verbose=0)
    assert history["val_loss"][-1] == pytest.approx(loss, rel=1e-5)
    assert history["val_accuracy"][-1] == pytest.approx(accuracy, abs=1e-6)
    labels, predicted = seen[-1]
    np.testing.assert_array_equal(labels, y)
    assert history["val_errors"][-1] == np.sum(predicted != y) == round((1 - accuracy) * 96)
    with pytest.raises(ValueError, match="pass validation=\\(inputs, labels\\) too"):
        BestValidationEpoch(prediction_metrics={"f": lambda y, p: 0.0})
    wrong = BestValidationEpoch(validation=(x[:10], y))
    wrong.set_model(model)
    wrong.on_train_begin()
    wrong.on_epoch_begin(0)
    with pytest.raises(
        ValueError, match="predictions of shape \\(10, 3\\) for 96 validation labels"
    ):
        wrong.on_epoch_end(0, {})


def test_no_xla_update_stops_one_compilation_per_sparse_gradient_shape():
    """tf_keras compiles an optimizer's update with XLA on a GPU; an embedding's gradient has
    one row per distinct id of the batch, so each new count of distinct ids is traced and
    compiled afresh (Lab 2 on an H100: epochs of 28.5 to 10.9 s instead of about 1 s)."""
    import tensorflow as tf
    import tf_keras

    def traces(optimizer):
        table = tf.Variable(tf.zeros([50, 4]))
        for distinct in (3, 5, 7, 9, 5):  # the last count was seen before: no new trace
            ids = tf.constant(list(range(distinct)) + [0, 1])  # with repeated ids, as in text
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.gather(table, ids))
            gradient = tape.gradient(loss, table)
            assert isinstance(gradient, tf.IndexedSlices)
            optimizer.apply_gradients([(gradient, table)])
        return optimizer._update_step_xla.experimental_get_tracing_count()

    as_on_a_gpu = tf_keras.optimizers.Adam(1e-3)
    as_on_a_gpu.jit_compile = True  # tf_keras sets it only where it finds a GPU
    assert traces(as_on_a_gpu) == 4
    fixed = tf_keras.optimizers.Adam(1e-3)
    fixed.jit_compile = True
    assert no_xla_update(fixed) is fixed and fixed.jit_compile is False
    assert traces(fixed) == 0
    import keras as keras_3  # the Keras 3 package, whatever lablib's mode

    keras3 = keras_3.optimizers.Adam(
        1e-3
    )  # no such flag (Keras 3 compiles the whole step): unchanged
    assert no_xla_update(keras3) is keras3 and not hasattr(keras3, "jit_compile")
