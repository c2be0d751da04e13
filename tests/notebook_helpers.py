"""The two ways the tests run a lab notebook, written once.

* :func:`execute_notebook` - top to bottom in a fresh Jupyter kernel (nbclient), in fast
  mode, importing this checkout's lablib: what a student's "Run all" does.
* :func:`exec_lab_cells` - only the ``# SETUP`` and ``# GRADED:`` cells, in this process
  (or a child that imports this module): what the grader runs, without the sandbox.
* :func:`with_graded_cells` - a released lab with some graded cells' code replaced (a
  submission made from the blank lab).
"""

from __future__ import annotations

import os
import pathlib
import re
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"


def fast_budget(name: str) -> float:
    """A lab's fast-mode budget in seconds on 2 CPU cores (the lab registry's): a notebook
    far slower than this has stopped being a few-minute lab in CI."""
    from lablib.labs import resolve_lab

    return resolve_lab(name).fast_seconds


def execute_solution(name: str, workdir, monkeypatch, shared_data, env=None):
    """``solutions/<name>.ipynb`` run by :func:`execute_notebook` within its fast-mode
    budget; fails when a cell's output holds a line a student would read as a failure
    (:func:`noise_lines`)."""
    nb, seconds = execute_notebook(
        SOLUTIONS / f"{name}.ipynb",
        workdir,
        monkeypatch,
        timeout=fast_budget(name),
        shared_data=shared_data,
        env=env,
    )
    noise = noise_lines(nb)
    assert not noise, (
        f"{name}: a successful run printed {len(noise)} line(s) a student reads as "
        "an error or a warning; silence them at their source:\n" + "\n".join(noise[:40])
    )
    return nb, seconds


# What a successful run must not print: Python's logging and warnings, tracebacks, the
# C++ log lines of TensorFlow (glog and absl formats) and matplotlib's font lookups.
NOISE = re.compile(
    r"^(?:WARNING|ERROR|CRITICAL)\b"  # logging (WARNING:tensorflow:..., ERROR:absl:...)
    r"|Traceback \(most recent call last\)"
    r"|^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] "  # TensorFlow's C++ log
    r"|^[IWEF]\d{4} \d\d:\d\d:\d\d"  # absl's C++ log
    r"|^\S+:\d+: \w*Warning: "  # warnings.warn
    r"|^findfont: ",
    re.MULTILINE,
)


def noise_lines(nb) -> list[str]:
    """``"cell N: line"`` for every line of the notebook's text outputs (stdout, stderr,
    displayed values) that :data:`NOISE` matches, and every error output."""
    found = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":  # a cell that raised: always reported
                found.append(
                    f"cell {index}: {output.get('ename')}: {output.get('evalue', '')[:300]}"
                )
                continue
            if output.get("output_type") == "stream":
                text = output.get("text", "")
            else:
                text = output.get("data", {}).get("text/plain", "")
            found += [
                f"cell {index}: {line[:300]}" for line in text.splitlines() if NOISE.search(line)
            ]
    return found


def execute_notebook(path, workdir, monkeypatch, *, timeout: float, shared_data=None, env=None):
    """Run the notebook at ``path`` top to bottom in a fresh kernel, working in ``workdir``.

    Fast mode (``LABLIB_FAST=1``), this checkout's lablib first on ``PYTHONPATH``, the
    Keras mode left to the notebook; ``env`` adds or overrides variables (``None`` removes
    one). Raises nbclient's ``CellExecutionError`` on a failing cell and its timeout
    error past ``timeout`` seconds for one cell.

    Returns:
        ``(notebook with outputs, seconds)``.
    """
    import nbclient
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    monkeypatch.setenv("LABLIB_FAST", "1")
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)  # the lab's first cell sets it
    monkeypatch.setenv(
        "MPLCONFIGDIR", str(pathlib.Path(workdir) / ".matplotlib")
    )  # a fresh font cache
    # The kernel works in ``workdir``: a relative data folder would point elsewhere there.
    data_dir = shared_data if shared_data is not None else os.environ.get("LABLIB_DATA_DIR")
    if data_dir:
        monkeypatch.setenv("LABLIB_DATA_DIR", os.path.abspath(data_dir))
    monkeypatch.setenv(
        "PYTHONPATH",
        os.pathsep.join(
            [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    )
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)  # the notebook chooses
    for key, value in (env or {}).items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    client = nbclient.NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    print(f"{pathlib.Path(path).stem}: executed in {elapsed:.1f} s (fast mode)")
    return nb, elapsed


def outputs_text(nb) -> str:
    """Everything the notebook's cells printed or displayed as text, in order: stream
    chunks joined as printed (a line may be split over several chunks), a displayed
    value on lines of its own, a line break after each cell."""
    text = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                text.append(output.get("text", ""))
            elif "data" in output:
                text.append("\n" + output["data"].get("text/plain", "") + "\n")
        text.append("\n")
    return "".join(text)


def exec_lab_cells(path) -> dict:
    """The namespace after running the notebook's ``# SETUP`` cells and then its graded
    cells, in this process (tracebacks name ``<graded cell NAME>``)."""
    from lablib.grading.notebook import graded_cells, read_notebook, setup_sources

    nb, _ = read_notebook(path)
    ns = {"__name__": "__main__"}
    for source in setup_sources(nb):
        exec(compile(source, "<setup>", "exec"), ns)
    for name, cell in graded_cells(nb)[0].items():
        exec(compile(cell.source, f"<graded cell {name}>", "exec"), ns)
    return ns


def with_graded_cells(notebook, sources: dict) -> tuple[bytes, int]:
    """The notebook at ``notebook`` (a released lab) with the code of its graded cells named
    in ``sources`` (piece -> source) replaced, everything else kept (set-up, checks,
    markers, metadata): what a student hands in. Returns ``(notebook bytes, cells replaced)``."""
    import json

    from lablib.grading.notebook import GRADED_RE, first_line

    nb = json.loads(pathlib.Path(notebook).read_text(encoding="utf-8"))
    replaced = 0
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        match = GRADED_RE.match(first_line(source)) if cell["cell_type"] == "code" else None
        if match and match.group(1) in sources:
            cell["source"] = sources[match.group(1)].splitlines(keepends=True)
            replaced += 1
    return json.dumps(nb, indent=1).encode(), replaced
