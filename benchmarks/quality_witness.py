"""Why auto loses to a peer on an instance: the peer's mapping is a witness
of a better local optimum.  This compares the two mappings level by level
and tries the move sequences that lead from auto's mapping towards it.

    RANKMAP_PEERS_DIR=/work/peers python benchmarks/quality_witness.py fe_4elt2 8 --peer viem

Prints: bytes crossing each level for both; how many tasks sit on another
node / another group of 4 after the best relabelling of the peer's nodes
(Hungarian matching: the nodes are interchangeable); J of auto's mapping
refined from the peer's node partition (does the peer win at the top cut
or inside the nodes?); J of the peer's mapping after our refinement; and
the moved tasks as connected groups per node pair with the J change of
each exchange applied alone to auto's mapping.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality_peers as qp  # noqa: E402
from rankmap.algorithms import map_tasks  # noqa: E402
from rankmap.algorithms.construct.slots import place_in_leaves  # noqa: E402
from rankmap.algorithms.refine.budgeted import refine_cost, refine_start  # noqa: E402
from rankmap.cost import evaluate, mapping_cost  # noqa: E402
from rankmap.deadline import Deadline  # noqa: E402
from rankmap.modelgen import model_graph  # noqa: E402
from rankmap.topology.hierarchy import hierarchy_topology  # noqa: E402


def relabel(ours: np.ndarray, theirs: np.ndarray, size: int) -> np.ndarray:
    """The peer's PEs with its subtrees of ``size`` PEs renamed to best
    match ours (offsets inside a subtree kept)."""
    a, b = ours // size, theirs // size
    m = int(max(a.max(), b.max())) + 1
    overlap = np.zeros((m, m))
    np.add.at(overlap, (b, a), 1)
    rows, cols = linear_sum_assignment(-overlap)
    new = np.empty(m, dtype=np.int64)
    new[rows] = cols
    return new[b] * size + theirs % size


def exchange_groups(graph, moved, src, dst):
    """Connected groups (in the graph restricted to ``moved``) per (src, dst) node pair."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    sub = graph.symmetric[moved][:, moved]
    same = (src[:, None] == src[None, :]) & (dst[:, None] == dst[None, :]) if moved.size < 4000 else None
    if same is not None:
        sub = sp.csr_array(sub.multiply(same))
    _, comp = connected_components(sub, directed=False)
    return comp


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graph")
    ap.add_argument("k", type=int)
    ap.add_argument("--peer", default="viem", choices=["viem", "sm-strong", "sm-eco", "mtkahypar", "scotch",
                                                       "treematch"])
    ap.add_argument("--time-limit", type=float, default=None, help="auto's budget (default: its own)")
    args = ap.parse_args(argv)
    app = qp.read_metis((qp.DATA / "graphs" / f"walshaw/{args.graph}").with_suffix(".graph"))
    g = model_graph(app, 64 * args.k, seed=0)
    arities, dists = [4, 16, args.k], [1.0, 10.0, 100.0]
    topo = hierarchy_topology(arities, dists)
    peer = {**qp.external_peers(0),
            "mtkahypar": lambda g, t, a, d: qp.mtkahypar_peer(g, a, d, 0),
            "scotch": lambda g, t, a, d: qp.scotch_peer(g, a, d),
            "treematch": lambda g, t, a, d: (map_tasks(g, t, method="treematch").pe_of_task, 0)}.get(args.peer)
    if peer is None:
        print(f"{args.peer} is not built under RANKMAP_PEERS_DIR (or not installed): nothing to compare")
        return 1
    theirs, _ = peer(g, topo, arities, dists)
    ours = map_tasks(g, topo, method="auto", time_limit=args.time_limit, objective="sum").pe_of_task
    j_ours, j_theirs = mapping_cost(g, topo, ours), mapping_cost(g, topo, theirs)
    print(f"{args.graph}/{g.n}: auto J {j_ours:.0f}, {args.peer} J {j_theirs:.0f} ({j_ours / j_theirs:.4f})")
    for label, pe in (("auto", ours), (args.peer, theirs)):
        rep = evaluate(g, topo, pe)
        print(f"  {label:>10} bytes per level: " + "  ".join(
            f"{lv.get('name', lv.get('level', '?'))}={lv.get('bytes', 0):.0f}" for lv in rep.bytes_per_level))
    theirs = relabel(ours, theirs, 64)
    node_moved = np.flatnonzero(ours // 64 != theirs // 64)
    group_moved = np.flatnonzero(ours // 4 != relabel(ours, theirs, 4) // 4)
    print(f"  after relabelling: {node_moved.size} tasks on another node, {group_moved.size} in another group of 4")
    start = place_in_leaves(theirs // 64, 64, topo.n_pes, ours)
    budget = refine_cost(g, topo, True)
    mixed, _ = refine_start(g, topo, start, budget, 0, Deadline())
    print(f"  peer's node partition + auto's placement inside nodes, refined: J {mapping_cost(g, topo, mixed):.0f}")
    polished, _ = refine_start(g, topo, theirs, budget, 0, Deadline())
    print(f"  peer's mapping after our swap refinement: J {mapping_cost(g, topo, polished):.0f}")
    if node_moved.size:
        src, dst = ours[node_moved] // 64, theirs[node_moved] // 64
        comp = exchange_groups(g, node_moved, src, dst)
        sizes = np.bincount(comp)
        print(f"  moved tasks form {sizes.size} connected groups per node pair, sizes "
              + " ".join(str(s) for s in sorted(sizes.tolist(), reverse=True)[:20]))
        pairs = {}
        for t, s, d in zip(node_moved.tolist(), src.tolist(), dst.tolist()):
            pairs.setdefault((min(s, d), max(s, d)), []).append(t)
        gains = []
        for (a, b), tasks in sorted(pairs.items()):
            tasks = np.asarray(tasks)
            leaf = ours // 64
            leaf[tasks] = theirs[tasks] // 64
            if np.bincount(leaf, minlength=topo.n_pes // 64).max() > 64:
                continue  # not an exchange on its own: part of a longer cycle
            cand, _ = refine_start(g, topo, place_in_leaves(leaf, 64, topo.n_pes, ours), budget, 0, Deadline())
            gains.append((a, b, tasks.size, mapping_cost(g, topo, cand) - j_ours))
        for a, b, size, d in gains:
            print(f"  exchange between nodes {a} and {b} ({size} tasks) alone, refined: J change {d:+.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
