"""What a lab's process sets before TensorFlow starts, and the dependencies' messages it
silences: TensorFlow's environment variables and the known harmless log noise.

Standard library only; nothing here imports TensorFlow (the variables must be set before
it is imported, and the filters work whether it is loaded or not).
"""

from __future__ import annotations

import logging
import os
import re
import warnings

__all__ = ["set_tensorflow_environment", "KNOWN_NOISE", "quiet_known_noise"]


def set_tensorflow_environment(environ=None, has_gpu=None) -> None:
    """The environment variables a lab sets before TensorFlow starts; a value already set
    (by the user, a grader, CI) is kept. Its child processes inherit them.

    * ``TF_FORCE_GPU_ALLOW_GROWTH=true``: TensorFlow takes GPU memory as it needs it
      instead of nearly the whole card at start, so a second TensorFlow process (Lab 2's
      Keras 3 run, another notebook on the same runtime, a grader) can share the card.
      On an H100, Lab 2 ran out of memory beside another lab's kernel started without it.
    * ``TF_CPP_MIN_LOG_LEVEL``: TensorFlow's C++ log prints its start-up lines (CPU
      instruction sets, oneDNN, CUDA libraries, the devices it created) into the first
      cell that imports it, where a student reads them as errors. ``2`` keeps its
      errors and drops the INFO and WARNING lines; on a machine without an NVIDIA GPU
      (no ``/dev/nvidiactl``) ``3``, because TensorFlow's CUDA build then logs
      "failed call to cuInit" as an error at every start. An error that stops a
      computation still reaches the student as a Python exception; Python-level
      warnings are not affected.

    Args:
        environ: the mapping to set (default ``os.environ``; tests pass a dict).
        has_gpu: whether an NVIDIA GPU is present (default: ``/dev/nvidiactl`` exists).
    """
    environ = os.environ if environ is None else environ
    if has_gpu is None:
        has_gpu = os.path.exists("/dev/nvidiactl")
    environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2" if has_gpu else "3")


# Messages of the labs' dependencies that a student can do nothing about, each matched
# narrowly: (logger or warning category, text the message contains, why it is harmless).
KNOWN_NOISE = (
    (
        "tensorflow",
        "triggered tf.function retracing",
        "the labs build several models and evaluate batches of several lengths by design; "
        "benchmarks/retracing.py measures what retracing costs",
    ),
    (
        UserWarning,
        "pkg_resources is deprecated as an API",
        "tensorflow_hub (imported by TF Model Garden) imports pkg_resources",
    ),
    (
        "absl",
        "Detected incompatible Protobuf Gencode/Runtime versions",
        "tensorflow_datasets, imported by TF Model Garden, cannot load tensorflow_metadata's "
        "protos with Colab's older protobuf runtime (an ERROR line and a traceback); the labs "
        "do not use tensorflow_datasets, and replacing Colab's protobuf would need a restart",
    ),
    (
        FutureWarning,
        "which Google will stop supporting in new releases of google.api_core",
        "google.api_core, loaded with TensorFlow, announces the end of this Python version's "
        "support; nothing a lab can do",
    ),
)


class _DropKnownNoise(logging.Filter):
    """Drops the log records that :data:`KNOWN_NOISE` lists for its logger."""

    def __init__(self, texts):
        super().__init__()
        self.texts = tuple(texts)

    def filter(self, record):
        message = record.getMessage()
        return not any(text in message for text in self.texts)


def quiet_known_noise() -> None:
    """Silences the messages in :data:`KNOWN_NOISE`, and only those, for this process.

    Idempotent (a first cell run twice adds nothing). Other warnings and log records
    pass as before.
    """
    by_logger = {}
    for source, text, _why in KNOWN_NOISE:
        if isinstance(source, str):
            by_logger.setdefault(source, []).append(text)
        else:
            warnings.filterwarnings("ignore", message=".*" + re.escape(text), category=source)
    for name, texts in by_logger.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropKnownNoise) for f in logger.filters):
            logger.addFilter(_DropKnownNoise(texts))
