"""End-to-end proof on an emulated cluster: the same MPI programs, launched
with the launcher's default orders and with rankmap's, on network namespaces
joined by rate-limited links (root needed).

For each program: block order, round-robin order, rankmap's order relaunched
from a hydra machinefile (``--as hydra`` launch file), and the in-program path
(round-robin launch, ranks reordered at start-up).  Reports the median over
repeats of wall and communication time, the bytes that crossed the network
(tc counters), J of each order, and the network bound of the best order
(its busiest link's bytes / link rate).  The communication graph is the one
each program declares (its ``graph()``: face messages of its process grid).

  python benchmarks/cluster/run.py                    # 4 nodes x 4 ranks, 50mbit, 3 repeats
  python benchmarks/cluster/run.py --quick            # 1 repeat, shorter runs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(HERE / "programs")]

import cg  # noqa: E402
import halo  # noqa: E402

from rankmap import evaluate, map_tasks  # noqa: E402
from rankmap.cost import link_loads  # noqa: E402
from rankmap.emulate import ClusterSpec, EmulatedCluster, parse_rate  # noqa: E402
from rankmap.formats import write_launch_file  # noqa: E402

ORDERS = ["block", "round-robin", "rankmap", "in-program"]


def cases(nodes: int, slots: int, quick: bool) -> list[tuple[str, object, list[str]]]:
    """(label, program module, argv): process grids shaped so that block order
    puts whole 2-D tiles on a node and round-robin scatters neighbours."""
    if slots % 2:
        raise SystemExit("--slots must be even (the grids put 2 x slots/2 tiles on a node)")
    iters = 8 if quick else 20
    grid2 = f"{2 * nodes}x{slots // 2}"
    grid3 = f"{nodes}x{slots // 2}x2"
    return [
        (f"halo2d {grid2}", halo, ["--grid", grid2, "--kib", "64", "--iters", str(iters)]),
        (f"halo3d {grid3}", halo, ["--grid", grid3, "--kib", "64", "--iters", str(iters)]),
        (f"cg {grid2}", cg, ["--grid", grid2, "--n", "16", "--depth", "512",
                                   "--iters", str(2 * iters)]),
    ]


def round_robin(n_tasks: int, nodes: int, slots: int) -> np.ndarray:
    """PE of each rank when the launcher deals ranks to nodes in turn."""
    r = np.arange(n_tasks)
    return (r % nodes) * slots + r // nodes


def network_bound_s(graph, topo, pe_of_task, spec: ClusterSpec) -> float:
    """Seconds the busiest rate-limited link needs for the bytes this mapping
    sends across it (each direction is its own link)."""
    src, dst, w = graph.coo()
    pe = np.asarray(pe_of_task)
    up, down = link_loads(topo, pe[src], pe[dst], w)
    node_rate = parse_rate(spec.bandwidth) / 8
    rack_rate = parse_rate(spec.rack_bandwidth or spec.bandwidth) / 8
    rate = np.array([node_rate if k == "node" else rack_rate if k == "rack" else np.inf
                     for k in topo.node_kind])
    return float(np.max(np.maximum(up, down) / rate))


def run_once(cluster, module, argv, order, machinefile, env) -> dict:
    program = [sys.executable, module.__file__, *argv]
    if order == "rankmap":
        cmd = cluster.mpiexec(machinefile=machinefile, n=cluster.spec.nodes * cluster.spec.slots)
    else:
        cmd = cluster.mpiexec(order="block" if order == "block" else "round-robin")
        if order == "in-program":
            program.append("--reorder")
    before = cluster.traffic()
    start = time.perf_counter()
    proc = subprocess.run(cmd + program, capture_output=True, text=True, timeout=600, env=env)
    launch_s = time.perf_counter() - start
    after = cluster.traffic()
    if proc.returncode != 0:
        raise SystemExit(f"{order} run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["net_bytes"] = sum(after["node_tx"]) - sum(before["node_tx"])
    result["launch_s"] = launch_s
    return result


def median_rows(runs: list[dict]) -> dict:
    keys = ["wall_s", "comm_s", "net_bytes", "launch_s"]
    return {k: statistics.median(r[k] for r in runs) for k in keys}


def benchmark(args) -> list[dict]:
    spec = ClusterSpec(nodes=args.nodes, slots=args.slots, bandwidth=args.bandwidth)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    with EmulatedCluster(spec) as cluster:
        topo = cluster.topology()
        print(f"# cluster {cluster.name}: {spec.nodes} nodes x {spec.slots} slots, "
              f"{spec.bandwidth} links; load {os.getloadavg()}", file=sys.stderr)
        for label, module, argv in cases(spec.nodes, spec.slots, args.quick):
            graph = module.graph(module.parser().parse_args(argv))
            n = graph.n
            mapping = map_tasks(graph, topo, method=args.method, seed=args.seed)
            machinefile = out_dir / f"{label.split()[0]}.hydra"
            write_launch_file(mapping.pe_of_task, topo, str(machinefile), "hydra")
            pe = {"block": np.arange(n), "round-robin": round_robin(n, spec.nodes, spec.slots),
                  "rankmap": mapping.pe_of_task}
            runs = {o: [] for o in ORDERS}
            for rep in range(args.repeats):
                for order in ORDERS:
                    runs[order].append(run_once(cluster, module, argv, order, machinefile, env))
                    print(f"  {label} {order} #{rep}: comm {runs[order][-1]['comm_s']:.3f} s",
                          file=sys.stderr)
            for order in ORDERS:
                row = {"program": label, "order": order, **median_rows(runs[order]),
                       "repeats": args.repeats}
                if order == "in-program":
                    row["J"] = runs[order][0]["J"]
                    row["reorder_s"] = statistics.median(r["reorder_s"] for r in runs[order])
                else:
                    row["J"] = evaluate(graph, topo, pe[order]).J
                    row["bound_s"] = network_bound_s(graph, topo, pe[order], spec)
                rows.append(row)
            rows.append({"program": label, "order": "bound",
                         "comm_s": network_bound_s(graph, topo, mapping.pe_of_task, spec),
                         "J": evaluate(graph, topo, mapping.pe_of_task).J})
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"{'program':16} {'order':12} {'wall s':>8} {'comm s':>8} {'net MB':>8} "
          f"{'J':>12} {'vs rankmap':>10}")
    for r in rows:
        ref = next(x for x in rows if x["program"] == r["program"] and x["order"] == "rankmap")
        ratio = r["comm_s"] / ref["comm_s"] if ref["comm_s"] else float("nan")
        wall = f"{r['wall_s']:8.3f}" if "wall_s" in r else f"{'':8}"
        net = f"{r['net_bytes'] / 1e6:8.2f}" if "net_bytes" in r else f"{'':8}"
        print(f"{r['program']:16} {r['order']:12} {wall} {r['comm_s']:8.3f} {net} "
              f"{r['J']:12.4g} {ratio:10.2f}")


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    programs = list(dict.fromkeys(r["program"] for r in rows))
    orders = ORDERS + ["bound"]
    width = 0.8 / len(orders)
    fig, ax = plt.subplots(figsize=(8, 4))
    for k, order in enumerate(orders):
        values = [next(r["comm_s"] for r in rows if r["program"] == p and r["order"] == order)
                  for p in programs]
        ax.bar(np.arange(len(programs)) + k * width, values, width, label=order)
    ax.set_xticks(np.arange(len(programs)) + width * (len(orders) - 1) / 2, programs)
    ax.set_ylabel("communication time, s (median)")
    ax.set_title("Default orders vs rankmap on an emulated cluster")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--slots", type=int, default=4, help="ranks per node (even)")
    p.add_argument("--bandwidth", default="50mbit", help="node link rate, each direction")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--method", default="auto", help="rankmap mapping method")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="1 repeat, shorter runs")
    p.add_argument("--out", default=str(HERE / "results"), help="directory for JSON, plot, launch files")
    args = p.parse_args()
    if args.quick:
        args.repeats = 1
    rows = benchmark(args)
    print_table(rows)
    out = Path(args.out)
    (out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    plot(rows, out / "comm_time.png")
    print(f"# wrote {out / 'results.json'} and {out / 'comm_time.png'}; load {os.getloadavg()}")


if __name__ == "__main__":
    main()
