"""The filter behind the solution runs' "no noise" assertion (tests/notebook_helpers.py):
it must catch the lines students saw (issue 20) and let a lab's own output through."""

import pathlib
import sys

import nbformat

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from notebook_helpers import noise_lines  # noqa: E402

SEEN = [  # lines that reached students' notebooks (Colab, 2026) or this project's runs
    "WARNING:tensorflow:5 out of the last 9 calls to <function TensorFlowTrainer.make_predict_function>"
    " triggered tf.function retracing.",
    "ERROR:absl:Detected incompatible Protobuf Gencode/Runtime versions when loading "
    "tensorflow_metadata/proto/v0/anomalies.proto: gencode 6.31.1 runtime 5.29.6",
    "Traceback (most recent call last):",
    "2026-11-25 22:19:18.669702: E external/local_xla/xla/stream_executor/cuda/cuda_platform.cc:51] "
    "failed call to cuInit: INTERNAL: CUDA error",
    "2026-11-25 21:44:23.571631: I tensorflow/core/platform/cpu_feature_guard.cc:210] This TensorFlow "
    "binary is optimized to use available CPU instructions",
    "I0000 00:00:1795643694.702948   11539 gpu_device.cc:2020] Created device /job:localhost/replica:0/task:0/device:GPU:0",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "/usr/lib/python3/site-packages/keras/src/models/functional.py:238: UserWarning: The structure of `inputs` "
    "doesn't match the expected structure.",
    "findfont: Font family ['STIXSizeThreeSym'] not found. Falling back to DejaVu Sans.",
]
FINE = [  # what the labs print on purpose
    "lab1_attention / attention: public checks",
    "  [PASS] worked_example (2/2 points)",
    "  [FAIL] masked_keys_get_zero_weight (0/1 points): the padded keys still get weight",
    "attention not done yet: write the function in its cell, then run the check again.",
    "Epoch 1/5",
    "157/157 - 18s - 118ms/step - accuracy: 0.6255 - loss: 1.0442",
    "| GCN (Lab 3) | 0.696 |",
    "max |ours - keras| output:  2.5331974029541016e-07",
    "Warning signs in the table: the validation loss turns up after epoch 3.",
]


def _notebook(*texts, name="stdout"):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("pass")
    cell.outputs = [nbformat.v4.new_output("stream", name=name, text=text) for text in texts]
    nb.cells = [nbformat.v4.new_markdown_cell("# Lab"), cell]
    return nb


def test_every_line_students_saw_is_caught_on_stdout_and_stderr():
    for stream in ("stdout", "stderr"):
        found = noise_lines(_notebook("\n".join(SEEN) + "\n", name=stream))
        assert found == [f"cell 1: {line[:300]}" for line in SEEN], stream


def test_the_labs_own_output_passes():
    assert noise_lines(_notebook("\n".join(FINE) + "\n")) == []


def test_an_error_output_counts_and_displayed_values_are_read():
    nb = _notebook()
    nb.cells[1].outputs = [
        nbformat.v4.new_output(
            "error", ename="ValueError", evalue="bad", traceback=["ValueError: bad"]
        ),
        nbformat.v4.new_output(
            "execute_result",
            data={"text/plain": "WARNING:root:shown as a value"},
            execution_count=1,
        ),
    ]
    assert noise_lines(nb) == ["cell 1: ValueError: bad", "cell 1: WARNING:root:shown as a value"]
