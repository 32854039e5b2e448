"""GPU nodes: J on the true link distances, three GPU-style workloads, 16 nodes.

Each workload has one rank per GPU (128 ranks on 16 Frontier nodes of 8
GCDs, or on 16 NVSwitch nodes of 8 GPUs), numbered as its framework numbers
them:

- ``halo3d``: a 8 x 4 x 4 process grid, rank = x-major, six neighbours, faces
  of 32, 16 and 8 MiB (x, y, z: an elongated sub-domain);
- ``pipeline``: 8 pipeline stages x 16 data-parallel replicas (rank = stage *
  16 + replica): 64 MiB of activations forward and of gradients back between
  consecutive stages of a replica, and each stage's gradient ring allreduce
  over its 16 replicas (2 x 15/16 x 32 MiB per rank to the next);
- ``ring``: tensor-parallel groups of 8 (rank = tp * 16 + group, the order a
  data-parallel-outermost launch gives) each running ring allreduces of 256
  MiB (2 x 7/8 of it to the next rank of the ring), and one data-parallel
  ring over all 128 ranks of 16 MiB.

Mappings compared, all scored by rankmap's cost model on the true distances
(the link matrix inside each node, the network above):

- ``block``: the launcher's default, rank r on GPU r mod 8 of node r div 8;
- ``tree``: rankmap's auto on the best tree approximation of the node (the
  lowest true J over average-, single- and complete-linkage trees of the
  link matrix, and a flat node), no matrix: what a tree-only mapper can do;
- ``rankmap``: auto with the node's links (``map_tasks`` on the topology).

    python benchmarks/gpu_nodes.py                 # table, results/gpu_nodes.json
    python benchmarks/gpu_nodes.py --plot docs/img/gpu_node_frontier.png
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rankmap import map_tasks  # noqa: E402
from rankmap.cost import mapping_cost  # noqa: E402
from rankmap.graph import CommGraph  # noqa: E402
from rankmap.topology.cluster import compose_cluster  # noqa: E402
from rankmap.topology.gpu_nodes import GPU_NODES  # noqa: E402
from rankmap.topology.links import links_tree  # noqa: E402
from rankmap.topology.tree import Topology, TreeNode  # noqa: E402

MIB = float(1 << 20)
NODES = 16
NETWORK = ([4], [100.0, 400.0])   # 4 nodes per switch, switches joined above


def _graph(src, dst, nbytes, n, name) -> CommGraph:
    g = CommGraph.from_edges(np.asarray(src), np.asarray(dst), np.asarray(nbytes, dtype=np.float64), n=n)
    g.name = name
    return g


def halo3d(dims=(8, 4, 4), faces=(32, 16, 8)) -> CommGraph:
    n = int(np.prod(dims))
    rank = np.arange(n).reshape(dims)
    src, dst, w = [], [], []
    for axis, face in enumerate(faces):
        for step in (1, -1):
            src.append(rank.ravel())
            dst.append(np.roll(rank, step, axis=axis).ravel())
            w.append(np.full(n, face * MIB))
    return _graph(np.concatenate(src), np.concatenate(dst), np.concatenate(w), n, "halo3d")


def _ring(members, nbytes):
    members = np.asarray(members)
    return members, np.roll(members, -1), np.full(members.size, nbytes)


def pipeline(stages=8, replicas=16, activations=64, gradients=32) -> CommGraph:
    n = stages * replicas
    rank = np.arange(n).reshape(stages, replicas)
    src, dst, w = [], [], []
    for s in range(stages - 1):
        for a, b in ((rank[s], rank[s + 1]), (rank[s + 1], rank[s])):
            src.append(a)
            dst.append(b)
            w.append(np.full(replicas, activations * MIB))
    for s in range(stages):
        for part, arr in zip((src, dst, w), _ring(rank[s], 2 * (replicas - 1) / replicas * gradients * MIB)):
            part.append(arr)
    return _graph(np.concatenate(src), np.concatenate(dst), np.concatenate(w), n, "pipeline")


def ring(tp=8, groups=16, tensor=256, data=16) -> CommGraph:
    n = tp * groups
    rank = np.arange(n).reshape(tp, groups)          # rank = tp index * groups + group
    src, dst, w = [], [], []
    for g in range(groups):
        for part, arr in zip((src, dst, w), _ring(rank[:, g], 2 * (tp - 1) / tp * tensor * MIB)):
            part.append(arr)
    for part, arr in zip((src, dst, w), _ring(np.arange(n), 2 * (n - 1) / n * data * MIB)):
        part.append(arr)
    return _graph(np.concatenate(src), np.concatenate(dst), np.concatenate(w), n, "ring")


WORKLOADS = {"halo3d": halo3d, "pipeline": pipeline, "ring": ring}


def cluster(node_type: str, nodes: int = NODES) -> Topology:
    """``nodes`` hosts of a built-in GPU node type under the network."""
    node = GPU_NODES[node_type].node()
    return compose_cluster([(f"{node_type}{i:03d}", node) for i in range(nodes)], *NETWORK)


def tree_approximations(topology: Topology) -> dict[str, tuple[Topology, np.ndarray]]:
    """Tree-only copies of ``topology`` whose nodes approximate their links
    by each linkage and by a flat node; each with the array taking its PEs
    to the PEs of ``topology`` (same host, same GPU)."""
    out = {}
    where = {(h, int(r)): p for p, (h, r) in enumerate(zip(topology.pe_host, topology.pe_link_row))}
    node_ids = sorted(topology.node_links)
    for method in ("average", "single", "complete", "flat"):
        hosts = []
        for n in node_ids:
            lo, hi = topology.leaf_range(n)
            links = topology.node_links[n]
            leaves = [TreeNode("gpu", link_row=int(r)) for r in sorted(topology.pe_link_row[lo:hi])]
            if method == "flat":
                inner = TreeNode("gpus", float(links.distance.max()), leaves)
            else:
                inner = links_tree(links.distance, leaves, method=method)
            hosts.append((topology.pe_host[lo], Topology(TreeNode("machine", inner.distance,
                                                                   inner.children))))
        approx = compose_cluster(hosts, *NETWORK)
        to_true = np.asarray([where[(h, int(r))] for h, r in zip(approx.pe_host, approx.pe_link_row)])
        out[method] = (approx, to_true)
    return out


def run(node_type: str, seed: int = 0) -> list[dict]:
    topo = cluster(node_type)
    approximations = tree_approximations(topo)
    rows = []
    for name, make in WORKLOADS.items():
        g = make()
        block = np.arange(g.n)
        j_block = mapping_cost(g, topo, block)
        tree_j = {}
        for method, (approx, to_true) in approximations.items():
            pe = map_tasks(g, approx, method="auto", seed=seed).pe_of_task
            tree_j[method] = mapping_cost(g, topo, to_true[pe])
        best_tree = min(tree_j, key=tree_j.get)
        start = time.perf_counter()
        mapped = map_tasks(g, topo, method="auto", seed=seed)
        seconds = time.perf_counter() - start
        j = mapping_cost(g, topo, mapped.pe_of_task)
        rows.append({"node": node_type, "workload": name, "tasks": g.n, "J_block": j_block,
                     "J_tree": tree_j[best_tree], "tree": best_tree, "J_tree_each": tree_j,
                     "J_rankmap": j, "vs_block": j / j_block, "vs_tree": j / tree_j[best_tree],
                     "seconds": seconds})
    return rows


def plot_node(path: Path, node_type: str = "frontier", workload: str = "ring") -> None:
    """One node of the mapped cluster: its GPUs where the links put them, the
    links drawn by bandwidth, each GPU labelled with the rank rankmap puts on
    it, the ring's traffic between the ranks of the node drawn over them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    topo = cluster(node_type)
    g = GPU_NODES[node_type]
    mapped = map_tasks(WORKLOADS[workload](), topo, method="auto").pe_of_task
    host = topo.pe_host[mapped[0]]
    on_host = {int(topo.pe_device[p].split(":")[1]): t for t, p in enumerate(mapped.tolist())
               if topo.pe_host[p] == host}
    # MI250X packages in a square, two GCDs each, as in the Frontier node diagram
    pos = {0: (0, 1), 1: (1, 1), 6: (0, 0), 7: (1, 0), 2: (3, 1), 3: (4, 1), 4: (3, 0), 5: (4, 0)}
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for a, b, gbs in g.links:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        ax.plot([xa, xb], [ya, yb], color="0.75", lw=gbs / 25, zorder=1)
    src, dst, w = WORKLOADS[workload]().coo()
    gcd_of = {t: gcd for gcd, t in on_host.items()}
    pairs: dict[tuple[int, int], float] = {}
    for s, d, x in zip(src.tolist(), dst.tolist(), w.tolist()):
        if s in gcd_of and d in gcd_of:
            key = tuple(sorted((gcd_of[s], gcd_of[d])))
            pairs[key] = pairs.get(key, 0.0) + x
    heavy = max(pairs.values())
    for (a, b), x in pairs.items():
        (xa, ya), (xb, yb) = pos[a], pos[b]
        ax.annotate("", (xb, yb), (xa, ya), arrowprops=dict(
            arrowstyle="-", color="tab:red", lw=1 + 4 * x / heavy, alpha=0.6,
            connectionstyle="arc3,rad=0.2"))
    for gcd, (x, y) in pos.items():
        nic = "\nNIC" if g.nic_gpus and gcd in g.nic_gpus else ""
        ax.scatter([x], [y], s=2300, color="tab:blue", zorder=2)
        ax.text(x, y, f"GCD {gcd}\nrank {on_host.get(gcd, '-')}{nic}", ha="center", va="center",
                color="white", fontsize=7, zorder=3)
    ax.set_xlim(-0.6, 4.6)
    ax.set_ylim(-0.5, 1.5)
    ax.axis("off")
    ax.set_title(f"{workload} on {node_type} node {host}: grey = Infinity Fabric links (width = GB/s), "
                 "red = traffic between its ranks", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", nargs="+", default=["frontier", "dgx-h100"], choices=sorted(GPU_NODES))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu_nodes.json"))
    ap.add_argument("--plot", metavar="PNG", help="draw one mapped Frontier node")
    args = ap.parse_args(argv)
    rows = [r for node in args.nodes for r in run(node)]
    print(f"{'node':10s} {'workload':9s} {'J block':>11s} {'J tree':>11s} {'J rankmap':>11s} "
          f"{'/block':>7s} {'/tree':>7s}  best tree")
    for r in rows:
        print(f"{r['node']:10s} {r['workload']:9s} {r['J_block']:11.4g} {r['J_tree']:11.4g} "
              f"{r['J_rankmap']:11.4g} {r['vs_block']:7.4f} {r['vs_tree']:7.4f}  {r['tree']}")
    Path(args.out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "machine": platform.node(),
                                          "command": "python benchmarks/gpu_nodes.py", "rows": rows},
                                         indent=1))
    if args.plot:
        plot_node(Path(args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
