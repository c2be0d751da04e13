"""Training helpers of Lab 2's recipe, shared by the notebook and ``benchmarks/reuters.py``.

* :func:`warmup_cosine` - the learning-rate schedule: linear warm-up to the peak, then
  cosine decay to 0;
* :func:`topic_weights` - Keras ``class_weight`` that weighs each class by
  ``n_c ** -power``, the average training example keeping weight 1;
* :class:`BestValidationEpoch` - early stopping on a validation metric that restores the
  best epoch's weights, adds metrics computed from the model to the logs (the validation
  macro-F1) and records the seconds of each epoch. Given ``validation=(inputs, labels)``
  it scores the validation set itself, from one ``predict`` per epoch (loss, accuracy
  and every ``prediction_metrics`` entry from the same logits), instead of Keras'
  ``validation_data`` pass plus a second pass for the macro-F1;
* :func:`no_xla_update` - turns off tf_keras's XLA compilation of an optimizer's update
  (on by default on a GPU), which recompiles for every new shape of a sparse gradient.

They are written against the active Keras (:mod:`lablib.backend`: tf_keras in legacy
mode, as Lab 2 runs, else Keras 3), so choose the mode before importing this module.

Example::

    from lablib.training import BestValidationEpoch, topic_weights, warmup_cosine
    schedule = warmup_cosine(1e-3, steps_per_epoch=len(train_ds), epochs=10)
    keeper = BestValidationEpoch(patience=3, validation=(val_ds, y_val))
    model.fit(train_ds, epochs=10, callbacks=[keeper],
              class_weight=topic_weights(y_train, num_classes=46))
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np

from lablib.backend import get_keras

keras = get_keras()

__all__ = ["BestValidationEpoch", "no_xla_update", "topic_weights", "warmup_cosine"]


def warmup_cosine(peak: float, steps_per_epoch: int, epochs: int, warmup_epochs: int = 1):
    """Linear warm-up from 0 to ``peak`` over ``warmup_epochs``, then cosine decay to 0 over
    the remaining ``epochs`` (a ``keras.optimizers.schedules.CosineDecay``).

    Raises:
        ValueError: a non-positive peak, step count or epoch count.
    """
    if not peak > 0:
        raise ValueError(f"warmup_cosine: peak must be a positive learning rate, got {peak!r}.")
    if int(steps_per_epoch) < 1 or int(epochs) < 1 or int(warmup_epochs) < 0:
        raise ValueError(
            f"warmup_cosine: steps_per_epoch ({steps_per_epoch!r}) and epochs ({epochs!r}) "
            f"must be >= 1 and warmup_epochs ({warmup_epochs!r}) >= 0; pass len(train_ds) "
            f"as steps_per_epoch."
        )
    steps_per_epoch, epochs, warmup_epochs = int(steps_per_epoch), int(epochs), int(warmup_epochs)
    return keras.optimizers.schedules.CosineDecay(
        0.0,
        decay_steps=max(1, (epochs - warmup_epochs) * steps_per_epoch),
        warmup_target=float(peak),
        warmup_steps=warmup_epochs * steps_per_epoch,
    )


def no_xla_update(optimizer):
    """Returns ``optimizer`` with tf_keras's XLA compilation of its update turned off.

    On a GPU, tf_keras's optimizers (``jit_compile=True`` by default) compile each
    variable's update with XLA, and XLA compiles once per tensor shape. An ``Embedding``'s
    gradient is sparse: the optimizer first sums the rows of repeated ids, leaving one row
    per distinct id of the batch, a count that changes nearly every batch of real text.
    Every new count is a new XLA compilation, and shuffled batches keep bringing new
    counts. Measured on an H100 (``benchmarks/results/lab2_step_gpu.md``): Lab 2's model
    trained on its shuffled wires took 28.5, 19.0, 13.0 and 10.9 s for four epochs of 255
    steps, against 1.0 s an epoch on synthetic batches that repeat from one epoch to the
    next. On a CPU tf_keras leaves the flag off, so this changes nothing there; Keras 3's
    optimizers have no such flag (Keras 3 compiles the whole step or none of it) and are
    returned unchanged, and so is a legacy optimizer.

    Example:
        >>> optimizer = no_xla_update(keras.optimizers.Adam(1e-3))
        >>> getattr(optimizer, "jit_compile", False)
        False
    """
    if getattr(optimizer, "jit_compile", None) is True:
        optimizer.jit_compile = False
    return optimizer


def topic_weights(labels, num_classes: int, power: float = 0.5) -> dict | None:
    """Keras ``class_weight``: class ``c`` weighs ``n_c ** -power`` (``n_c``: its training
    examples), scaled so that the average training example keeps weight 1; a class absent
    from ``labels`` weighs 0. ``power=0`` gives None (no weights); ``power=1`` is full
    inverse frequency.

    Example:
        >>> topic_weights([0, 0, 0, 1], num_classes=3)
        {0: 0.8452994616207484, 1: 1.4641016151377546, 2: 0.0}
    """
    if power < 0:
        raise ValueError(f"topic_weights: power must be >= 0, got {power!r}.")
    if power == 0:
        return None
    labels = np.asarray(labels)
    if labels.size == 0 or labels.min() < 0 or labels.max() >= num_classes:
        raise ValueError(
            f"topic_weights: labels must be class ids in [0, {num_classes}); got "
            f"{labels.size} labels"
            + (f" from {labels.min()} to {labels.max()}." if labels.size else ".")
        )
    counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
    weights = np.where(counts > 0, np.maximum(counts, 1.0) ** -power, 0.0)
    weights /= np.sum(weights * counts) / counts.sum()
    return {c: float(w) for c, w in enumerate(weights)}


class BestValidationEpoch(keras.callbacks.Callback):
    """Stops when ``monitor`` has not improved for ``patience`` epochs and restores the
    weights of its best epoch (chosen on validation data, never on the test set).

    Args:
        patience: epochs without improvement before training stops.
        monitor: the log entry to maximise (``"val_accuracy"``).
        metrics: ``{name: function(model) -> float}`` computed after each epoch and added
            to the logs (so to the history) before ``monitor`` is read.
        validation: ``(inputs, labels)``: score this validation set after each epoch with
            one ``model.predict(inputs)`` (a dataset of token batches, or an array, in
            the order of ``labels``), adding ``val_loss`` (the mean sparse cross-entropy
            of the logits, unweighted as Keras' own), ``val_accuracy`` and each entry of
            ``prediction_metrics`` to the logs. Use it instead of ``fit(validation_data=...)``
            when a metric needs the predictions too: one pass over the data instead of two.
        prediction_metrics: ``{name: function(labels, predicted_classes) -> float}``
            computed from that one pass, e.g. ``{"val_macro_f1": lambda y, p:
            macro_f1(y, p, 46)}``. Needs ``validation``.

    Attributes:
        best: the best value of ``monitor``; ``best_epoch``: its epoch (1-based);
        epoch_seconds: the wall time of each epoch (validation included).
    """

    def __init__(
        self,
        patience: int = 3,
        monitor: str = "val_accuracy",
        metrics: Mapping[str, Callable] | None = None,
        validation=None,
        prediction_metrics: Mapping[str, Callable] | None = None,
    ):
        super().__init__()
        if int(patience) < 1:
            raise ValueError(f"BestValidationEpoch: patience must be >= 1 epoch, got {patience!r}.")
        if prediction_metrics and validation is None:
            raise ValueError(
                "BestValidationEpoch: prediction_metrics are computed from the "
                "validation predictions; pass validation=(inputs, labels) too."
            )
        if validation is not None:
            if not (isinstance(validation, (tuple, list)) and len(validation) == 2):
                raise ValueError(
                    "BestValidationEpoch: validation must be a pair (inputs, labels), "
                    f"got {type(validation).__name__}."
                )
            labels = np.asarray(validation[1]).reshape(-1)
            validation = (validation[0], labels)
        self.patience, self.monitor = int(patience), monitor
        self.metrics = dict(metrics or {})
        self.validation = validation
        self.prediction_metrics = dict(prediction_metrics or {})

    def _score_validation(self, logs):
        inputs, labels = self.validation
        logits = np.asarray(self.model.predict(inputs, verbose=0), dtype=np.float64)
        if logits.ndim != 2 or len(logits) != len(labels):
            raise ValueError(
                f"BestValidationEpoch: the model gave predictions of shape "
                f"{logits.shape} for {len(labels)} validation labels; pass the "
                "validation inputs unshuffled and in the order of the labels."
            )
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probabilities = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        predicted = logits.argmax(axis=1)
        logs["val_loss"] = float(-log_probabilities[np.arange(len(labels)), labels].mean())
        logs["val_accuracy"] = float(np.mean(predicted == labels))
        for name, metric in self.prediction_metrics.items():
            logs[name] = float(metric(labels, predicted))

    def on_train_begin(self, logs=None):
        self.best, self.best_epoch, self.best_weights, self.wait = -np.inf, 0, None, 0
        self.epoch_seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self._started = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_seconds.append(time.perf_counter() - self._started)
        logs = logs if logs is not None else {}
        if self.validation is not None:
            self._score_validation(logs)
        for name, metric in self.metrics.items():
            logs[name] = float(metric(self.model))
        if self.monitor not in logs:
            raise KeyError(
                f"BestValidationEpoch monitors {self.monitor!r}, which the logs lack "
                f"(they hold {sorted(logs)}); fit with validation_data=... or pass "
                f"monitor= one of those."
            )
        score = float(logs[self.monitor])
        if score > self.best:
            self.best, self.best_epoch, self.wait = score, epoch + 1, 0
            self.best_weights = self.model.get_weights()
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.best_weights is not None:
            self.model.set_weights(self.best_weights)
