"""Speed and memory of lablib's graph layers, dense and sparse, beside PyTorch Geometric.

Part 1 (ratios, one process): forward + backward time of ``GraphConv`` and
``GraphAttention`` (sparse ``edge_index`` mode and dense ``adjacency`` mode) beside
PyG's ``GCNConv`` / ``GATConv`` (and ``DenseGCNConv`` / ``DenseGATConv``) on the same
random graph, same feature sizes, the same number of threads in TensorFlow and PyTorch.
The implementations are timed in interleaved rounds; the table reports medians.

Part 2 (scaling, one child process per cell so memory is measured alone): time and peak
resident memory of one forward + backward from 1k to 100k edges, sparse and dense. The
peak is the growth of the process' resident set (sampled every 0.5 ms in a thread) from
just before the graph tensors (the dense adjacency
included), the layer and the compiled step are made, to the end of the timed calls; it
includes a roughly constant cost of compiling the step (tens of MiB). A dense
size is skipped when the memory measured at the previous size, grown quadratically in the
number of nodes, would exceed ``--dense-memory-limit`` GiB.

Run::

    .venv/bin/python benchmarks/graph_speed.py           # full, writes results/graph_speed.md
    .venv/bin/python benchmarks/graph_speed.py --quick   # tiny graphs, part 2 for GCN only
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault(
    "OMP_WAIT_POLICY", "PASSIVE"
)  # no spinning OpenMP threads (PyTorch) on a shared machine
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
from _report import write_report  # noqa: E402  (benchmarks/ is sys.path[0])

FEATURES = 64  # input features; GCN output 64, GAT 8 heads x 8 units
EDGE_FEATURES = (
    8  # edge features of the "gat_edges" rows (GraphAttention(edge_dim) vs GATConv(edge_dim))
)


def random_edge_attr(num_edges: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(num_edges, EDGE_FEATURES)).astype(np.float32)


# --------------------------------------------------------------------------- reporting


# --------------------------------------------------------------------------- graphs and steps


def random_graph(num_nodes: int, num_edges: int, seed: int = 0):
    """Features [N, 64] and a random directed edge_index [2, E] without self loops or repeats."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, num_nodes, size=(2, int(num_edges * 1.2) + 8))
    edges = edges[:, edges[0] != edges[1]]
    edges = np.unique(edges, axis=1)
    edges = edges[:, rng.permutation(edges.shape[1])[:num_edges]]
    x = rng.normal(size=(num_nodes, FEATURES)).astype(np.float32)
    return x, edges.astype(np.int64)


def set_threads(threads: int):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    try:
        import torch

        torch.set_num_threads(threads)
        torch.set_num_interop_threads(1)
    except (ImportError, RuntimeError):
        pass


def lablib_step(layer_name: str, mode: str, x: np.ndarray, edge_index: np.ndarray):
    """A compiled forward + backward (gradients for the input and the weights) of a lablib layer."""
    import tensorflow as tf

    from lablib import graphs
    from lablib.layers import GraphAttention, GraphConv

    if layer_name == "gcn":
        layer = GraphConv(FEATURES)
    else:
        layer = GraphAttention(
            8, num_heads=8, edge_dim=EDGE_FEATURES if layer_name == "gat_edges" else None
        )
    if mode == "sparse":
        features = tf.constant(x)
        graph = {"edge_index": tf.constant(edge_index.astype(np.int32))}
        if layer_name == "gat_edges":
            graph["edge_attr"] = tf.constant(random_edge_attr(edge_index.shape[1]))
    else:
        features = tf.constant(x[np.newaxis])
        adjacency = graphs.edge_index_to_adjacency(edge_index, len(x)).astype(np.float32)
        graph = {
            "adjacency": tf.constant(adjacency[np.newaxis]),
            "mask": tf.ones((1, len(x)), tf.bool),
        }
    layer(features, **graph)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch(features)
            loss = tf.reduce_sum(layer(features, **graph))
        gradients = tape.gradient(loss, [features] + list(layer.trainable_variables))
        return tf.add_n([tf.reduce_sum(g) for g in gradients])

    return lambda: float(step())


def pyg_step(layer_name: str, mode: str, x: np.ndarray, edge_index: np.ndarray):
    """The same forward + backward with PyG's GCNConv / GATConv (or their dense versions)."""
    import torch
    from torch_geometric.nn import DenseGATConv, DenseGCNConv, GATConv, GCNConv

    torch.manual_seed(0)
    if mode == "sparse":
        if layer_name == "gcn":
            layer = GCNConv(FEATURES, FEATURES)
        else:
            layer = GATConv(
                FEATURES, 8, heads=8, edge_dim=EDGE_FEATURES if layer_name == "gat_edges" else None
            )
        features = torch.tensor(x, requires_grad=True)
        graph = (torch.tensor(edge_index),)
        if layer_name == "gat_edges":
            graph += (torch.tensor(random_edge_attr(edge_index.shape[1])),)
    else:
        layer = (
            DenseGCNConv(FEATURES, FEATURES)
            if layer_name == "gcn"
            else DenseGATConv(FEATURES, 8, heads=8)
        )
        features = torch.tensor(x[np.newaxis], requires_grad=True)
        adjacency = torch.zeros((1, len(x), len(x)))
        adjacency[0, edge_index[1], edge_index[0]] = 1.0
        graph = (adjacency, torch.ones((1, len(x)), dtype=torch.bool))

    def step():
        layer.zero_grad(set_to_none=True)
        features.grad = None
        layer(features, *graph).sum().backward()
        return float(features.grad.sum())

    return step


def make_step(implementation, layer_name, mode, x, edge_index):
    maker = lablib_step if implementation == "lablib" else pyg_step
    return maker(layer_name, mode, x, edge_index)


def time_interleaved(steps: dict, repeats: int, rounds: int) -> dict:
    """Median seconds per call of each step, measured in interleaved rounds."""
    for step in steps.values():
        step()
        step()
    samples = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(repeats):
                step()
            samples[name].append((time.perf_counter() - start) / repeats)
    return {name: statistics.median(values) for name, values in samples.items()}


# --------------------------------------------------------------------------- memory (child)


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


class _PeakSampler:
    """Samples the resident set every half millisecond in a thread; ``stop()`` gives the peak (KiB)."""

    def __init__(self):
        import threading

        self.peak = _rss_kib("VmRSS")
        self._running = True
        self._page_kib = os.sysconf("SC_PAGE_SIZE") // 1024
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        with open("/proc/self/statm") as handle:
            while self._running:
                handle.seek(0)
                self.peak = max(self.peak, int(handle.read().split()[1]) * self._page_kib)
                time.sleep(0.0005)

    def stop(self) -> int:
        self._running = False
        self._thread.join()
        return max(self.peak, _rss_kib("VmRSS"))


def child(args) -> None:
    """Measure one (implementation, layer, mode, size): time and peak memory; print JSON."""
    set_threads(args.threads)
    x, edge_index = random_graph(args.nodes, args.edges)
    import tensorflow  # noqa: F401  (imported before the baseline, as is torch below)

    if args.implementation == "pyg":
        import torch_geometric.nn  # noqa: F401
    before = _rss_kib("VmRSS")
    sampler = _PeakSampler()
    step = make_step(args.implementation, args.layer, args.mode, x, edge_index)
    step()  # compile, allocate the weights
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    peak = sampler.stop()
    print(
        json.dumps(
            {
                "seconds": statistics.median(times),
                "peak_mib": max(peak - before, 0) / 1024.0,
                "edges": int(edge_index.shape[1]),
            }
        )
    )


def run_child(implementation, layer, mode, nodes, edges, threads, repeats) -> dict:
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        implementation,
        layer,
        mode,
        "--nodes",
        str(nodes),
        "--edges",
        str(edges),
        "--threads",
        str(threads),
        "--repeats",
        str(repeats),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {
            "error": done.stderr.strip().splitlines()[-1]
            if done.stderr.strip()
            else f"exit {done.returncode}"
        }
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- main


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny graphs: checks the script runs")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="threads for TensorFlow and PyTorch (default 1: on a shared, oversubscribed machine "
        "multi-threaded kernels mostly measure how long their threads wait for each other)",
    )
    parser.add_argument(
        "--dense-memory-limit", type=float, default=3.0, help="GiB; larger dense cells are skipped"
    )
    parser.add_argument(
        "--output",
        default=None,
        help="where to write the table (default results/graph_speed.md; none with --quick)",
    )
    parser.add_argument(
        "--parts", default="speed,scaling", help="speed and/or scaling (comma-separated)"
    )
    parser.add_argument(
        "--child", nargs=3, metavar=("IMPLEMENTATION", "LAYER", "MODE"), help=argparse.SUPPRESS
    )
    parser.add_argument("--nodes", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--edges", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        args.implementation, args.layer, args.mode = args.child
        child(args)
        return

    set_threads(args.threads)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or parts - {"speed", "scaling"}:
        parser.error(f"--parts must name speed and/or scaling, got {args.parts!r}")
    nodes, edges = (200, 1000) if args.quick else (2708, 10556)  # part 1: Cora-sized
    repeats, rounds = (2, 1) if args.quick else (10, 7)
    x, edge_index = random_graph(nodes, edges)
    lines = (
        []
        if "speed" not in parts
        else [
            f"## Forward + backward on one random graph ({nodes} nodes, {edge_index.shape[1]} directed edges, "
            f"{FEATURES} input features; GCN → {FEATURES}, GAT 8 heads × 8), {args.threads} threads in both "
            f"frameworks, median of {rounds} interleaved rounds of {repeats} calls",
            "",
            "| layer | mode | lablib (ms) | PyG (ms) | lablib / PyG |",
            "|---|---|---|---|---|",
        ]
    )
    for layer in ("gcn", "gat", "gat_edges") if "speed" in parts else ():
        for mode in (
            ("sparse", "dense") if layer != "gat_edges" else ("sparse",)
        ):  # PyG's DenseGATConv has no edge_dim
            steps = {
                impl: make_step(impl, layer, mode, x, edge_index) for impl in ("lablib", "pyg")
            }
            t = time_interleaved(
                steps, repeats if mode == "sparse" else max(1, repeats // 5), rounds
            )
            pyg_name = {
                ("gcn", "sparse"): "GCNConv",
                ("gat", "sparse"): "GATConv",
                ("gcn", "dense"): "DenseGCNConv",
                ("gat", "dense"): "DenseGATConv",
                ("gat_edges", "sparse"): f"GATConv(edge_dim={EDGE_FEATURES})",
            }[(layer, mode)]
            lablib_name = {
                "gcn": "GraphConv",
                "gat": "GraphAttention",
                "gat_edges": f"GraphAttention(edge_dim={EDGE_FEATURES})",
            }[layer]
            lines.append(
                f"| {lablib_name} vs {pyg_name} | {mode} | {1e3 * t['lablib']:.2f} | {1e3 * t['pyg']:.2f} | {t['lablib'] / t['pyg']:.2f} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)

    sizes = [] if "scaling" not in parts else [1000] if args.quick else [1000, 10000, 100000]
    degree = 4  # edges per node
    lines += (
        []
        if not sizes
        else [
            "",
            f"## Scaling: one forward + backward, average in-degree {degree} (nodes = edges / {degree}), "
            f"median of {3 if args.quick else 5} calls, each cell in a fresh process",
            "",
            "Peak memory = growth of the resident set from before the graph tensors (dense adjacency included), the layer "
            "and the compiled step were made; it includes a roughly constant compilation cost.",
            "",
            "| edges | nodes | layer | lablib sparse (ms) | lablib sparse peak (MiB) | PyG sparse (ms) | PyG sparse peak (MiB) | lablib dense (ms) | lablib dense peak (MiB) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
    )
    limit_mib = args.dense_memory_limit * 1024
    skipped_from = {}
    # --quick checks that the script runs: the scaling part's child processes (a
    # TensorFlow and torch start-up each) for one layer; the speed part above has both
    for layer in (("gcn",) if args.quick else ("gcn", "gat")) if sizes else ():
        previous_dense = None
        for num_edges in sizes:
            num_nodes = num_edges // degree
            cells = {}
            for impl, mode in (("lablib", "sparse"), ("pyg", "sparse"), ("lablib", "dense")):
                if mode == "dense" and previous_dense is not None:
                    estimate = previous_dense[1] * (num_nodes / previous_dense[0]) ** 2
                    if estimate > limit_mib:
                        cells[(impl, mode)] = {"skipped": estimate}
                        skipped_from.setdefault(layer, num_nodes)
                        continue
                cells[(impl, mode)] = run_child(
                    impl, layer, mode, num_nodes, num_edges, args.threads, 3 if args.quick else 5
                )
                if mode == "dense" and "peak_mib" in cells[(impl, mode)]:
                    previous_dense = (num_nodes, max(cells[(impl, mode)]["peak_mib"], 1.0))

            def show(cell):
                if "error" in cell:
                    return "error", cell["error"][:60]
                if "skipped" in cell:
                    return "skipped", f"≈ {cell['skipped'] / 1024:.0f} GiB (est.)"
                return f"{1e3 * cell['seconds']:.1f}", f"{cell['peak_mib']:.1f}"

            row = [
                show(cells[k])
                for k in (("lablib", "sparse"), ("pyg", "sparse"), ("lablib", "dense"))
            ]
            lines.append(
                f"| {num_edges} | {num_nodes} | {'GraphConv' if layer == 'gcn' else 'GraphAttention'} | "
                + " | ".join(f"{a} | {b}" for a, b in row)
                + " |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    lines += (
        []
        if not sizes
        else [
            "",
            f"Dense cells were skipped above {args.dense_memory_limit:g} GiB of estimated peak memory"
            + (
                ": " + ", ".join(f"{k.upper()} from {v} nodes" for k, v in skipped_from.items())
                if skipped_from
                else " (none reached it)."
            ),
        ]
    )
    default = (
        "graph_speed.md"
        if parts == {"speed", "scaling"}
        else f"graph_speed_{'_'.join(sorted(parts))}.md"
    )
    output = args.output or (
        None if args.quick else os.path.join(ROOT, "benchmarks", "results", default)
    )
    write_report(
        output,
        "Graph layer speed: lablib vs PyTorch Geometric" + (" (--quick)" if args.quick else ""),
        "\n".join(lines),
    )


if __name__ == "__main__":
    main()
