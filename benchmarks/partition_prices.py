"""Does ``partition_seconds`` price a partitioning call?  CPU seconds of
KaHIP fast calls against their price.

A partitioning call cannot be interrupted, so the multisection weighs its
price against the deadline before it (``construct/partition.py``); a price
far below the real time lets a call run past the limit.  Instances: model
graphs of Walshaw graphs (``quality_peers.py``'s set cut into 64-2048
blocks: weighted, denser than the meshes) and the Walshaw graphs
themselves (sparse meshes of 2k-45k vertices), each into 2-64 parts, and
2-D stencils of 2^16-2^20 tasks into 2, 32 and 64 parts.  CPU
seconds of the call (the best of two seeds), its price, their ratio, and a
least-squares fit of ``a (n + nnz)^b parts^c`` in log space: the form
``partition_seconds`` uses up to a few hundred thousand entries (beyond, a
linear rate: the stencils).

    nice -n 10 python benchmarks/partition_prices.py --json prices.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality_peers import DATA, read_metis  # noqa: E402
from quality_scale import stencil_graph  # noqa: E402

from rankmap.algorithms.construct.partition import partition_graph, partition_seconds  # noqa: E402
from rankmap.modelgen import model_graph  # noqa: E402

GRAPHS = ["add20", "data", "3elt", "uk", "add32", "bcsstk33", "whitaker3", "crack", "wing_nodal", "vibrobox",
          "bcsstk29", "kahip-examples/rgg_n_2_15_s0"]
BLOCKS, PARTS = (64, 256, 1024, 2048), (2, 4, 16, 32, 64)
STENCILS = (16, 18, 20)  # and 2-D stencils of 2^16-2^20 tasks (one seed: seconds a call)


def timed_calls(label: str, graph, parts_list, seeds=(0, 1)) -> list[dict]:
    import scipy.sparse as sp

    adj = sp.csr_array(graph.symmetric)
    weights = np.asarray(graph.vertex_weights, dtype=np.int64)
    rows = []
    for parts in parts_list:
        if parts >= graph.n:
            continue
        cpu = []
        for seed in seeds:
            t = time.process_time()
            partition_graph(adj, weights, np.ones(parts, dtype=np.int64), 0.03, backend="kahip", preset="fast",
                            seed=seed)
            cpu.append(time.process_time() - t)
        rows.append({"instance": label, "n": graph.n, "nnz": int(adj.nnz), "parts": parts, "cpu": min(cpu),
                     "price": partition_seconds(graph.n, adj.nnz, parts)})
    return rows


FIT_MAX_ENTRIES = 400_000  # the power law's range (beyond it partition_seconds' linear rate is larger)


def fit(rows: list[dict]) -> tuple[float, float, float]:
    """(a, b, c) of cpu = a (n + nnz)^b parts^c, least squares in log space
    over the calls up to FIT_MAX_ENTRIES."""
    rows = [r for r in rows if r["n"] + r["nnz"] <= FIT_MAX_ENTRIES]
    x = np.array([[1.0, np.log(r["n"] + r["nnz"]), np.log(r["parts"])] for r in rows])
    y = np.log([max(r["cpu"], 1e-6) for r in rows])
    (la, b, c), *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(np.exp(la)), float(b), float(c)


def summarize(rows: list[dict]) -> None:
    """The spread of measured over priced (the current ``partition_seconds``,
    so rows measured before a refit show it), and the fit."""
    ratio = np.array([r["cpu"] / partition_seconds(r["n"], r["nnz"], r["parts"]) for r in rows])
    print(f"# {len(rows)} calls: measured / priced min {ratio.min():.2f}, median {np.median(ratio):.2f}, "
          f"90 % below {np.quantile(ratio, 0.9):.2f}, max {ratio.max():.2f}")
    a, b, c = fit(rows)
    print(f"# fit up to {FIT_MAX_ENTRIES} entries: cpu = {a:.3g} (n + nnz)^{b:.3f} parts^{c:.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--from", dest="from_json", metavar="JSON",
                    help="summarise the rows of a --json file against the current prices")
    args = ap.parse_args(argv)
    if args.from_json:
        summarize(json.loads(Path(args.from_json).read_text()))
        return 0
    print(f"# load {os.getloadavg()[0]:.1f}; CPU seconds of KaHIP fast (best of 2 seeds)")
    print(f"{'instance':22s} {'n':>6s} {'nnz':>7s} {'parts':>5s} {'cpu s':>7s} {'priced':>7s} {'ratio':>6s}")
    rows = []
    for name in GRAPHS:
        path = (DATA / "graphs" / (name if "/" in name else f"walshaw/{name}")).with_suffix(".graph")
        base = read_metis(path)
        cases = [(f"{path.stem}/{b}", model_graph(base, b, seed=0)) for b in BLOCKS] + [(path.stem, base)]
        for label, graph in cases:
            for r in timed_calls(label, graph, PARTS):
                rows.append(r)
                print(f"{label:22s} {r['n']:6d} {r['nnz']:7d} {r['parts']:5d} {r['cpu']:7.4f} {r['price']:7.4f} "
                      f"{r['cpu'] / r['price']:6.2f}", flush=True)
    for log2n in STENCILS:
        for r in timed_calls(f"stencil 2^{log2n}", stencil_graph(log2n), (2, 32, 64), seeds=(0,)):
            rows.append(r)
            print(f"{r['instance']:22s} {r['n']:6d} {r['nnz']:7d} {r['parts']:5d} {r['cpu']:7.4f} {r['price']:7.4f} "
                  f"{r['cpu'] / r['price']:6.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    summarize(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
