"""Execute the transformer labs' solution notebooks top to bottom in fast mode.

Each notebook runs in a fresh Jupyter kernel (nbclient) with ``LABLIB_FAST=1`` (small
data, few epochs) and ``LABLIB_DATA_DIR`` pointing at the shared datasets, so a cell
that raises fails the test with the cell's traceback. Slow (a few minutes): marked
``slow``.
"""

import re
import sys

import pytest

pytestmark = pytest.mark.integration  # runs the solution notebooks in Jupyter kernels

pytest.importorskip("nbclient")

from notebook_helpers import execute_solution, fast_budget, outputs_text  # noqa: E402


def _execute(name, shared_data, tmp_path, monkeypatch):
    return execute_solution(
        name, tmp_path, monkeypatch, shared_data, env={"MPLBACKEND": None}
    )  # the kernel's inline backend


@pytest.mark.slow
def test_lab1_attention_solution_runs(shared_data, tmp_path, monkeypatch):
    nb, elapsed = _execute("lab1_attention", shared_data, tmp_path, monkeypatch)
    assert elapsed < fast_budget("lab1_attention")
    text = outputs_text(nb)
    assert "CheckResult(" not in text  # a check cell shows its report once, not its value
    # The worked example of the lecture, computed by the solution.
    assert "0.99911" in text, text[:2000]
    assert "gap without positions" in text
    # The optional encoder-decoder (section 7) learns to reverse digits even in fast mode:
    # greedy decoding gets whole sequences right and cross-attention finds the mirror.
    exact = re.search(r"exact sequence accuracy on \d+ new sequences: ([\d.]+)", text)
    assert exact and float(exact.group(1)) >= 0.9, text[-3000:]
    mirrored = re.search(r"average cross-attention weight on the mirrored position: ([\d.]+)", text)
    assert mirrored and float(mirrored.group(1)) >= 0.5, text[-3000:]


@pytest.mark.slow
def test_lab2_transformer_reuters_solution_runs(shared_data, tmp_path, monkeypatch):
    nb, elapsed = _execute("lab2_transformer_reuters", shared_data, tmp_path, monkeypatch)
    assert elapsed < fast_budget("lab2_transformer_reuters")
    text = outputs_text(nb)
    assert "CheckResult(" not in text  # a check cell shows its report once, not its value
    assert "padding changes predictions by" in text
    assert "Keras 3 run finished" in text
    # The Keras 3 child process wrote its results beside the notebook.
    assert (tmp_path / "reuters_keras3.json").is_file()
    # Optional sections 10-12: both position encodings and the class token train; the
    # learned table refuses a wire longer than its rows while the sinusoidal model reads
    # it; the head ablation ran (the notebook asserts that the weights were restored).
    for name in (
        "sinusoidal positions, mean pooling",
        "learned positions, mean pooling",
        "sinusoidal positions, class token",
    ):
        assert re.search(re.escape(name) + r": \{'test accuracy': [\d.]+", text), name
    assert re.search(r"learned positions: the table has (\d+) rows.*\n.*max_length=\1", text), text[
        -3000:
    ]
    assert "sinusoidal, first 2 * MAX_LENGTH tokens" in text
    assert "block 0: without head 1" in text and "block 0: no head at all" in text


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q", "-s"]))
