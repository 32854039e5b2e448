"""How far from the optimum are the one-node rows?  On a single node of
4:16:1 (64 tasks, distances 1:10:100) J = d0 * W + (d1 - d0) * (weight
between groups), so the optimal J is the optimal split of the 64 tasks into
16 groups of 4: ``refine/exact_groups.py`` solves it exactly (HiGHS, set
partitioning over connected pieces).  For every such row of
quality_peers.py's --json files: HiGHS's lower bound on J (the optimum
where it closed the gap; cut by --seconds, --node-limit), and the best
peer's and auto's J over it, as a markdown table.  One JSON line per row
with --json.

    python benchmarks/quality_bounds.py --from benchmarks/results/quality_one_to_one.jsonl \\
        --seconds 120 --json quality_bounds.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.quality_peers import load_json_rows  # noqa: E402
from benchmarks.quality_ties import instance  # noqa: E402
from rankmap.algorithms.refine.exact_groups import best_split, connected_pieces, set_partitioning  # noqa: E402
from rankmap.cost import mapping_cost  # noqa: E402
from rankmap.deadline import Deadline  # noqa: E402
from rankmap.topology.hierarchy import hierarchy_topology  # noqa: E402

ARITIES, DISTANCES = [4, 16, 1], [1.0, 10.0, 100.0]


def optimum(graph, node_limit: int, seconds: float) -> tuple[float | None, float, float]:
    """(J of the best split found, None where HiGHS found none in ``seconds``;
    lower bound on J; seconds) of one full node."""
    a0, a1 = ARITIES[0], ARITIES[1]
    topo = hierarchy_topology(ARITIES, DISTANCES)
    weights = graph.symmetric.toarray()
    np.fill_diagonal(weights, 0.0)  # a task's traffic with itself costs nothing
    t = time.perf_counter()
    found = best_split(set_partitioning(weights, connected_pieces(weights, a0, limit=math.inf), a0), a0, a1,
                       Deadline(seconds), node_limit=node_limit)
    secs = time.perf_counter() - t
    trivial = DISTANCES[0] * np.triu(weights, 1).sum()  # every pair inside a group: where HiGHS has no bound yet
    if found is None:
        return None, trivial, secs
    groups, inside, bound = found
    pe = np.empty(graph.n, dtype=np.int64)
    for g, members in enumerate(groups):
        pe[members] = np.arange(g * a0, (g + 1) * a0)
    j = mapping_cost(graph, topo, pe)
    return j, max(j - (DISTANCES[1] - DISTANCES[0]) * (bound - inside), trivial), secs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="from_json", required=True, type=lambda v: [x for x in v.split(",") if x],
                    metavar="JSONL[,JSONL]", help="quality_peers.py --json files (a later line of an instance wins)")
    ap.add_argument("--also", default="", help="a later auto-only --json file whose auto J is shown beside")
    ap.add_argument("--node-limit", type=int, default=20_000, help="HiGHS branch-and-bound nodes per row")
    ap.add_argument("--seconds", type=float, default=300.0, help="HiGHS's time per row (then its bound counts)")
    ap.add_argument("--json", default=None, help="append one line per row here")
    args = ap.parse_args(argv)
    later = {r["instance"]: r["results"]["auto"]["J"] for r in load_json_rows([args.also])} if args.also else {}
    rows = [r for r in load_json_rows(args.from_json) if r["n"] == ARITIES[0] * ARITIES[1]]
    print("| instance | lower bound | best known J | best peer / bound | auto (stored) / bound | auto now / bound "
          "| proven | HiGHS s |\n|---|---:|---:|---:|---:|---:|---|---:|", flush=True)
    for r in rows:  # 64 tasks: the k = 1 rows
        g, _ = instance(r["instance"])
        best_peer = min(r["results"][p]["J"] for p in r["peers"] if p in r["results"])
        auto = r["results"]["auto"]["J"]
        j, low, secs = optimum(g, args.node_limit, args.seconds)
        new = later.get(r["instance"])
        known = min(x for x in (j, best_peer, auto, new) if x is not None)
        print(f"| {r['instance']} | {low:.10g} | {known:.10g} | {best_peer / low:.4f} | {auto / low:.4f} | "
              + (f"{new / low:.4f}" if new else "-") + f" | {'yes' if low >= known else 'no'} | {secs:.1f} |",
              flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps({"instance": r["instance"], "n": g.n, "highs_best": j, "lower_bound": low,
                                    "best_peer": best_peer, "auto": auto, "auto_now": new, "seconds": secs}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
