"""Execute the graph labs' solution notebooks top to bottom in fast mode.

Each notebook runs in a fresh Jupyter kernel (nbclient) with ``LABLIB_FAST=1`` (a part
of the data, a few epochs) and ``LABLIB_DATA_DIR`` pointing at the shared datasets, so a
cell that raises fails the test with the cell's traceback; the printed checks (the
permutation demo, NumPy forms vs lablib's layers, result tables) are then asserted.
Slow (a minute or two each): marked ``slow``. That the solutions get full marks and the
blank labs zero from the public tests is checked for every lab by
``tests/test_lab_public_checks.py``.
"""

import os
import pathlib
import re
import sys
import time

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

from lablib.labs import all_labs  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"

# Fast-mode budgets (seconds) on 2 CPU cores, from the lab registry (lablib/labs.py); a
# notebook far slower than this has stopped being a few-minute lab in CI.
BUDGETS = {lab.name: lab.fast_seconds for lab in all_labs()}


def _execute(name, shared_data, tmp_path, monkeypatch):
    nb = nbformat.read(SOLUTIONS / f"{name}.ipynb", as_version=4)
    monkeypatch.setenv("LABLIB_FAST", "1")
    monkeypatch.setenv("LABLIB_DATA_DIR", str(shared_data))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # The kernel must import this checkout of lablib, not an installed copy.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)  # the notebook chooses
    client = nbclient.NotebookClient(nb, timeout=BUDGETS[name], kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    print(f"{name}: executed in {elapsed:.1f} s (fast mode)")
    return nb, elapsed


def _outputs_text(nb):
    """All text the cells printed; stream chunks are joined as printed (a line may be
    split over several chunks)."""
    text = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                text.append(output.get("text", ""))
            elif "data" in output:
                text.append("\n" + output["data"].get("text/plain", "") + "\n")
        text.append("\n")
    return "".join(text)


def _max_difference(text, label):
    """The float printed after ``label ... max |difference| =`` (all occurrences)."""
    found = re.findall(re.escape(label) + r".*?max \|difference\| = ([0-9.eE+-]+)", text)
    assert found, f"{label!r} not printed; outputs:\n{text[:3000]}"
    return [float(value) for value in found]


@pytest.mark.slow
def test_lab3_gcn_molecules_solution_runs(shared_data, tmp_path, monkeypatch):
    nb, elapsed = _execute("lab3_gcn_molecules", shared_data, tmp_path, monkeypatch)
    assert elapsed < BUDGETS["lab3_gcn_molecules"]
    text = _outputs_text(nb)
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
    assert elapsed < BUDGETS["lab4_gat"]
    text = _outputs_text(nb)
    # Multi-head NumPy implementation == lablib.layers.GraphAttention, both modes.
    assert max(_max_difference(text, "concat=")) < 1e-5
    assert "| GAT (Velickovic et al.) |" in text and "| GCN (Kipf & Welling) |" in text
    assert "alpha: (" in text and "nats below uniform" in text
    assert "| GAT |" in text and "| GCN (Lab 3) |" in text and "| GAT + bond features |" in text


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q", "-s"]))
