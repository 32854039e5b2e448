"""Is the tie the optimum?  On the one-to-one rows where auto and the best
peer reach the same J (within TIED), try what else might find a lower J:
auto with other seeds and with a long time limit, VieM and SharedMap strong
with other seeds.  Reads the rows from quality_peers.py's --json files,
prints and appends one JSON line per row (every J found, and those below
the tie), so a cut run keeps its rows and a rerun skips them.

    RANKMAP_PEERS_DIR=/work/peers python benchmarks/quality_ties.py \\
        --from benchmarks/results/quality_one_to_one.jsonl --json ties.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.quality_peers import (DATA, TIED, TRAFFIC, load_json_rows, peer_binary, read_matrix,  # noqa: E402
                                      read_metis, sharedmap_peer, viem_peer)
from rankmap.algorithms import map_tasks  # noqa: E402
from rankmap.cost import mapping_cost  # noqa: E402
from rankmap.modelgen import model_graph  # noqa: E402
from rankmap.topology.hierarchy import hierarchy_topology  # noqa: E402


def tie_rows(rows: list[dict]) -> list[tuple[str, int, float]]:
    """(instance, n, J) of the rows where auto is within TIED of the best
    peer either way, smallest first."""
    out = []
    for r in rows:
        res = r["results"]
        best = min(res[p]["J"] for p in r["peers"] if p in res)
        if abs(res["auto"]["J"] / best - 1) <= TIED - 1:
            out.append((r["instance"], r["n"], min(best, res["auto"]["J"])))
    return sorted(out, key=lambda t: t[1])


def instance(label: str):
    """The communication graph and k of a quality_peers row label."""
    if label.startswith("traffic:"):
        rel = next(x for x in TRAFFIC if Path(x).parent.name.replace("CMatrices", "") == label.split(":", 1)[1])
        return read_matrix(DATA / "traffic" / rel), 1
    name, size = label.rsplit("/", 1)
    folder = "kahip-examples" if name.startswith(("delaunay", "rgg")) else "walshaw"
    app = read_metis((DATA / "graphs" / folder / name).with_suffix(".graph"))
    return model_graph(app, int(size), seed=0), int(size) // 64


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="from_json", required=True, type=lambda v: [x for x in v.split(",") if x],
                    metavar="JSONL[,JSONL]", help="quality_peers.py --json files (a later line of an instance wins)")
    ap.add_argument("--json", required=True, help="append one line per tie row here; rows already in it are skipped")
    ap.add_argument("--only", type=lambda v: {x for x in v.split(",") if x}, default=None,
                    help="comma-separated instances (default: every tie row)")
    ap.add_argument("--seeds", type=int, default=4, help="VieM seeds 1..N (SharedMap strong and auto: half)")
    ap.add_argument("--long", type=float, default=60.0, help="auto's long time limit, seconds")
    args = ap.parse_args(argv)
    done = set()
    if Path(args.json).exists():
        done = {json.loads(line)["instance"] for line in Path(args.json).read_text().splitlines() if line}
    ties = tie_rows(load_json_rows(args.from_json))
    print(len(ties), "tie rows:", " ".join(t[0] for t in ties), flush=True)
    for label, n, tie in ties:
        if label in done or (args.only and label not in args.only):
            continue
        g, k = instance(label)
        arities, dists = [4, 16, k], [1.0, 10.0, 100.0]
        topo = hierarchy_topology(arities, dists)
        runs = {f"auto-s{s}": (lambda s=s: map_tasks(g, topo, method="auto", seed=s, objective="sum").pe_of_task)
                for s in range(1, max(args.seeds // 2, 1) + 1)}
        runs[f"auto@{args.long:g}"] = lambda: map_tasks(g, topo, method="auto", seed=0, time_limit=args.long,
                                                          objective="sum").pe_of_task
        if peer_binary("viem"):
            runs.update({f"viem-s{s}": (lambda s=s: viem_peer(g, arities, dists, seed=s)[0])
                         for s in range(1, args.seeds + 1)})
        if peer_binary("sharedmap"):
            runs.update({f"sm-strong-s{s}": (lambda s=s: sharedmap_peer(g, arities, dists, "strong", seed=s)[0])
                         for s in range(1, max(args.seeds // 2, 1) + 1)})
        found = {}
        for name, fn in runs.items():
            t = time.perf_counter()
            pe = fn()
            found[name] = [float(mapping_cost(g, topo, np.asarray(pe))), round(time.perf_counter() - t, 2)]
        line = {"instance": label, "n": n, "tie_J": tie, "found": found,
                "lower": {m: v[0] for m, v in found.items() if v[0] < tie * (1 - 1e-9)},
                "load": Path("/proc/loadavg").read_text().split()[:3]}
        print(json.dumps(line), flush=True)
        with open(args.json, "a") as f:
            f.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
