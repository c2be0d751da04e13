"""Execute the graph labs' solution notebooks top to bottom in fast mode.

Each notebook runs in a fresh Jupyter kernel (nbclient) with ``LABLIB_FAST=1`` (a part
of the data, a few epochs) and ``LABLIB_DATA_DIR`` pointing at the shared datasets, so a
cell that raises fails the test with the cell's traceback; the printed checks (the
permutation demo, NumPy forms vs lablib's layers, result tables) are then asserted.
Slow (a minute or two each): marked ``slow``. That the solutions get full marks and the
blank labs zero from the public tests is checked for every lab by
``tests/labs/test_lab_public_checks.py``.
"""

import re
import sys

import pytest

pytestmark = pytest.mark.integration  # runs the solution notebooks in Jupyter kernels

pytest.importorskip("nbclient")

from notebook_helpers import execute_solution, fast_budget, outputs_text  # noqa: E402


def _execute(name, shared_data, tmp_path, monkeypatch):
    return execute_solution(name, tmp_path, monkeypatch, shared_data, env={"MPLBACKEND": "Agg"})


def _max_difference(text, label):
    """The float printed after ``label ... max |difference| =`` (all occurrences)."""
    found = re.findall(re.escape(label) + r".*?max \|difference\| = ([0-9.eE+-]+)", text)
    assert found, f"{label!r} not printed; outputs:\n{text[:3000]}"
    return [float(value) for value in found]


@pytest.mark.slow
def test_lab3_gcn_molecules_solution_runs(shared_data, tmp_path, monkeypatch):
    nb, elapsed = _execute("lab3_gcn_molecules", shared_data, tmp_path, monkeypatch)
    assert elapsed < fast_budget("lab3_gcn_molecules")
    text = outputs_text(nb)
    assert "CheckResult(" not in text  # a check cell shows its report once, not its value
    # Permutation demo: the graph network is invariant, the MLP is not.
    changes = dict(re.findall(r"(MLP|CNN|GNN): .*change = ([0-9.eE+-]+)", text))
    assert float(changes["GNN"]) < 1e-4 and float(changes["MLP"]) > 1e-4, changes
    # Scalar form == matrix form == lablib.layers.GraphConv(normalization="mean").
    assert max(_max_difference(text, "scalar vs matrix")) < 1e-12
    assert max(_max_difference(text, "matrix vs lablib")) < 1e-5
    assert max(_max_difference(text, "sum") + _max_difference(text, " max:")) < 1e-5
    assert "| GCN (this lab) |" in text and "| mean predictor |" in text

    # Optional section 8: coordinates in the features break rotation/translation invariance
    # (not permutation invariance); bond lengths and an EGNN layer's features are invariant,
    # its coordinates equivariant, and the layer does move them.
    def printed(pattern):
        found = re.search(pattern + r" ([0-9.eE+-]+)", text)
        assert found, f"{pattern!r} not printed; outputs:\n{text[-3000:]}"
        return float(found.group(1))

    assert printed(r"naive model, molecule turned and moved: output changes by") > 1e-3
    assert printed(r"naive model, atoms reordered: +output changes by") < 1e-9
    assert printed(r"molecule turned and moved: change by") < 1e-9
    assert printed(r"EGNN layer, molecule turned and moved: features change by") < 1e-9
    assert printed(r"coordinates differ from the turned and moved output by") < 1e-9
    assert printed(r"EGNN layer: the coordinates themselves moved by") > 1e-3


@pytest.mark.slow
def test_lab4_gat_solution_runs(shared_data, tmp_path, monkeypatch):
    nb, elapsed = _execute("lab4_gat", shared_data, tmp_path, monkeypatch)
    assert elapsed < fast_budget("lab4_gat")
    text = outputs_text(nb)
    assert "CheckResult(" not in text  # a check cell shows its report once, not its value
    # Multi-head NumPy implementation == lablib.layers.GraphAttention, both modes.
    assert max(_max_difference(text, "concat=")) < 1e-5
    assert "| GAT (Velickovic et al.) |" in text and "| GCN (Kipf & Welling) |" in text
    assert "alpha: (" in text and "nats below uniform" in text
    assert "| GAT |" in text and "| GCN (Lab 3) |" in text and "| GAT + bond features |" in text


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q", "-s"]))
