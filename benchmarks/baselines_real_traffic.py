"""J of the baseline methods on the real traffic matrices of ../shared/data,
mapped one-to-one onto S = 4:16:1, D = 1:10:100.

    python benchmarks/baselines_real_traffic.py [--shared ../shared] [--hierarchy 4:16:1]

Prints J / J(identity) per method and instance, and the geometric mean.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from rankmap import map_tasks, mapping_cost, topology_from_strings
from rankmap.formats import read_graph

METHODS = ["identity", "random", "greedy", "greedy_allc", "auto"]


def instances(shared: Path) -> list[tuple[str, Path]]:
    traffic = shared / "data" / "traffic"
    out = [(f"maplib-{app}", traffic / "maplib-mapping-matters" / f"{app}CMatrices" / "comm_matrix.p2p.size.csv")
           for app in ("amg", "btmz", "cg", "lulesh")]
    out.append(("netloc-app", traffic / "hwloc-netloc-scotch-test" / "app.mat"))
    return [(name, p) for name, p in out if p.exists()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[1].parent / "shared"))
    ap.add_argument("--hierarchy", default="4:16:1")
    ap.add_argument("--distances", default="1:10:100")
    ap.add_argument("--seeds", type=int, default=5, help="seeds for 'random' (mean J reported)")
    args = ap.parse_args()
    topo = topology_from_strings(args.hierarchy, args.distances)
    print(f"machine {args.hierarchy} / {args.distances}; load average {os.getloadavg()[0]:.2f}")
    header = f"{'instance':14s}" + "".join(f"{m:>13s}" for m in METHODS) + "   (J / J identity)"
    print(header)
    ratios = {m: [] for m in METHODS}
    for name, path in instances(Path(args.shared)):
        g = read_graph(path)
        j_id = mapping_cost(g, topo, np.arange(g.n))
        row = f"{name:14s}"
        for m in METHODS:
            seeds = range(args.seeds) if m == "random" else [0]
            t = time.perf_counter()
            js = [mapping_cost(g, topo, map_tasks(g, topo, method=m, seed=s).pe_of_task) for s in seeds]
            r = float(np.mean(js)) / j_id
            ratios[m].append(r)
            row += f"{r:13.4f}"
        print(row)
    print(f"{'geomean':14s}" + "".join(f"{np.exp(np.mean(np.log(ratios[m]))):13.4f}" for m in METHODS))


if __name__ == "__main__":
    main()
