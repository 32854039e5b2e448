"""End-to-end proof on an emulated cluster: the same MPI programs, launched
with the launcher's default orders and with rankmap's, on network namespaces
joined by rate-limited links (root needed).

The pipeline is the user's: for each program

1. profile: ``mpiexec (round-robin) python -m rankmap.profile -o TRACE app.py``;
2. map: ``rankmap map TRACE --topology cluster.topo -o app.hydra --as hydra``;
3. relaunch: ``mpiexec -f app.hydra python app.py`` (order "rankmap");

and separately the in-program path ("in-program": round-robin launch,
``rankmap.reorder_comm`` at start-up on the slots it discovers).  Baselines:
hydra's block (``-hosts node0:S,...``) and round-robin (``node0:1,...``)
orders.  Reported per order, medians over repeats (orders interleaved within
each repeat): wall and communication time (max over ranks of the time spent
waiting in MPI), bytes that crossed the network (tc byte counters), J of the
order the ranks really ran in (from each rank's reported host, on the trace's
traffic), and the network bound (the link time: the busiest link's bytes
over its rate, ``cost.link_time`` on the cluster's topology, which carries
the emulated rates).  The "bound" row is that bound for rankmap's order.  The goal lines use the median of the
per-repeat ratios (paired: the orders of a repeat run back to back), since
on a shared 2-core machine the load drifts between repeats; identical launch
orders were measured up to 16% apart in medians of 5.

Why ``--topology``: inside the namespaces the trace records the right hosts
(node0.. from ``unshare --uts``), but every namespace reports the same 2-core
hardware and hydra leaves ranks unbound, so the trace's own machine is S
slots per host on 2 cores (distance 0 between slots of one core).  The
cluster file (``rankmap cluster topology NAME``) says what the emulation
means: S slots per node, distance 1 within a node, 100 across the switch,
the links' rates.
``reorder_comm`` discovers the hosts itself and, ranks being unbound, places
at node granularity (it warns), which is exactly this model.

Sizing, so that communication dominates on a 2-core machine:
- 4 nodes x 8 ranks, 50mbit links: the 3-D halo needs 8 ranks per node for
  round-robin to be 2x worse at all (with 4 per node its bound ratio is at
  most 1.33: a 16-rank 3-D grid has one axis whose neighbours round-robin
  keeps on one node).  Grids: halo2d (P/2)x2, halo3d 2x(P/4)x2, CG (P/2)x2.
- CG blocks are 1 x 1 x 8192 pencils (64 KiB faces, the least arithmetic
  per byte sent): with thicker blocks (2 x 2 x 4096, or the 16 x 16 x 512 of
  the first version) the 2 shared cores spend the iteration computing for 32
  ranks, and every rank's "communication" is mostly waiting in the
  allreduces for the others' arithmetic (measured on 4 x 8, 50mbit, block
  vs round-robin: 6.3 s vs 15.0 s comm at 2 x 2 x 4096, 2.1 s vs 15.3 s at
  1 x 1 x 8192).
- ``MPIR_CVAR_ENABLE_HEAVY_YIELD=1`` (``--busy-poll`` turns it off): mpi4py
  asks for MPI_THREAD_MULTIPLE, and MPICH then yields its lock with a
  nanosleep while waiting instead of spinning, so 32 waiting ranks do not
  starve the few that have work (on a real cluster each rank has its core).

  python benchmarks/cluster/run.py                    # 4 nodes x 8 ranks, 50mbit, 5 repeats (~12 min)
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
PROGRAMS = HERE / "programs"
sys.path.insert(0, str(ROOT))

from rankmap import evaluate  # noqa: E402
from rankmap import trace as tracefmt  # noqa: E402
from rankmap.cost import link_time  # noqa: E402
from rankmap.emulate import ClusterSpec, EmulatedCluster  # noqa: E402
from rankmap.formats import read_graph  # noqa: E402

ORDERS = ["block", "round-robin", "rankmap", "in-program"]
YIELD_ENV = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"}


def cases(nodes: int, slots: int, quick: bool) -> list[tuple[str, str, list[str]]]:
    """(label, program file, argv): grids whose row-major ranks block order
    keeps together and round-robin scatters."""
    p = nodes * slots
    if p % 4:
        raise SystemExit("--nodes x --slots must be a multiple of 4 (the grids are Px2 and 2xP/4x2)")
    iters = 8 if quick else 20
    grid2, grid3 = f"{p // 2}x2", f"2x{p // 4}x2"
    return [
        (f"halo2d {grid2}", "halo.py", ["--grid", grid2, "--kib", "64", "--iters", str(iters)]),
        (f"halo3d {grid3}", "halo.py", ["--grid", grid3, "--kib", "64", "--iters", str(iters)]),
        (f"cg {grid2}", "cg.py", ["--grid", grid2, "--n", "1", "--depth", "8192",
                                  "--iters", str(2 * iters)]),
    ]


def pe_of_hosts(hosts: list[str], topo, slots: int) -> np.ndarray:
    """PE of each rank from the host it ran on: the next free slot of that
    host (all slots of a node are alike in the cluster's topology)."""
    index = {h: i for i, h in enumerate(topo.hosts())}
    used = dict.fromkeys(index, 0)
    pe = np.empty(len(hosts), dtype=np.int64)
    for r, h in enumerate(hosts):
        if h not in index or used[h] >= slots:
            raise SystemExit(f"rank {r} ran on {h!r}: not a free slot of the cluster {topo.hosts()}")
        pe[r] = index[h] * slots + used[h]
        used[h] += 1
    return pe


class Bench:
    """One emulated cluster and the environment of every run on it."""

    def __init__(self, cluster: EmulatedCluster, args):
        self.cluster, self.args = cluster, args
        self.env = {**os.environ,
                    "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.mpi_env = {} if args.busy_poll else YIELD_ENV
        self.out = Path(args.out)

    def mpiexec(self, order: str, machinefile=None) -> list[str]:
        c = self.cluster
        if machinefile is not None:
            return c.mpiexec(machinefile=machinefile, n=c.spec.nodes * c.spec.slots, env=self.mpi_env)
        return c.mpiexec(order=order, env=self.mpi_env)

    def call(self, cmd: list[str], what: str) -> subprocess.CompletedProcess:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=self.env)
        if proc.returncode != 0:
            raise SystemExit(f"{what} failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
        return proc

    def profile_and_map(self, name: str, program: list[str], topo_file: Path) -> tuple[Path, Path]:
        """Steps 1 and 2: trace a round-robin run, map the trace onto the cluster."""
        trace = self.out / f"{name}.rmtrace.npz"
        hydra = self.out / f"{name}.hydra"
        self.call(self.mpiexec("round-robin") + [sys.executable, "-m", "rankmap.profile", "-o",
                                                 str(trace), *program[1:]], f"profiling {name}")
        self.call([sys.executable, "-m", "rankmap", "map", str(trace), "--topology", str(topo_file),
                   "--method", self.args.method, "--seed", str(self.args.seed),
                   "-o", str(hydra), "--as", "hydra"], f"rankmap map {trace}")
        return trace, hydra

    def run_once(self, program: list[str], order: str, machinefile: Path) -> dict:
        if order == "rankmap":
            cmd = self.mpiexec(order, machinefile)
        else:
            cmd = self.mpiexec("block" if order == "block" else "round-robin")
            if order == "in-program":
                program = program + ["--reorder", "--method", self.args.method]
        before = self.cluster.traffic()
        start = time.perf_counter()
        proc = self.call(cmd + program, f"{order} run")
        launch_s = time.perf_counter() - start
        after = self.cluster.traffic()
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        result["net_bytes"] = sum(after["node_tx"]) - sum(before["node_tx"])
        result["launch_s"] = launch_s
        return result


def describe_trace_machine(trace: Path) -> str:
    """What the trace itself says about the machine (see the docstring)."""
    t = tracefmt.read_trace(trace)
    topo, placement = t.topology_and_placement()
    bound = sum(1 for b in t.bindings if b and len(b) == 1)
    hosts = list(dict.fromkeys(t.hosts))
    machine = f"{topo.n_pes} PEs on {len(topo.hosts())} hosts" if topo is not None else "none"
    return (f"trace: hosts {', '.join(hosts)}; {bound}/{t.nranks} ranks bound to one CPU; "
            f"its machine: {machine}; placement: {'known' if placement is not None else 'unknown'}")


def benchmark(args) -> list[dict]:
    spec = ClusterSpec(nodes=args.nodes, slots=args.slots, bandwidth=args.bandwidth)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    topo_file = out_dir / "cluster.topo"
    topo_file.write_text(spec.topology_file_text())
    rows = []
    with EmulatedCluster(spec) as cluster:
        bench = Bench(cluster, args)
        topo = cluster.topology()
        log(f"# cluster {cluster.name}: {spec.nodes} nodes x {spec.slots} slots, {spec.bandwidth} "
            f"links, {'busy polling' if args.busy_poll else 'heavy yield'}; load {loadavg()}")
        for label, program_file, argv in cases(spec.nodes, spec.slots, args.quick):
            name = label.split()[0]
            program = [sys.executable, str(PROGRAMS / program_file), *argv]
            trace, hydra = bench.profile_and_map(name, program, topo_file)
            log(f"  {label}: {describe_trace_machine(trace)}")
            graph = read_graph(str(trace))
            runs = {o: [] for o in ORDERS}
            for rep in range(args.repeats):
                for order in ORDERS:
                    r = bench.run_once(program, order, hydra)
                    r["pe"] = pe_of_hosts(r["hosts"], topo, spec.slots)
                    runs[order].append(r)
                    log(f"  {label} {order} #{rep}: comm {r['comm_s']:.3f} s wall {r['wall_s']:.3f} s "
                        f"net {r['net_bytes'] / 1e6:.1f} MB; load {loadavg()}")
            for order in ORDERS:
                rs = runs[order]
                row = {"program": label, "order": order, "repeats": len(rs),
                       **{k: statistics.median(r[k] for r in rs)
                          for k in ("wall_s", "comm_s", "net_bytes", "launch_s")},
                       "comm_runs": [r["comm_s"] for r in rs],
                       # the order of the last run (the same every run: launch orders and
                       # mappings are deterministic)
                       "J": evaluate(graph, topo, rs[-1]["pe"]).J,
                       "bound_s": link_time(graph, topo, rs[-1]["pe"])}
                if order == "in-program":
                    row["reorder_s"] = statistics.median(r["reorder_s"] for r in rs)
                rows.append(row)
            best = runs["rankmap"][-1]["pe"]
            rows.append({"program": label, "order": "bound",
                         "comm_s": link_time(graph, topo, best),
                         "J": evaluate(graph, topo, best).J})
    return rows


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def loadavg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def ratio(rows, program, a, b) -> float:
    get = {r["order"]: r["comm_s"] for r in rows if r["program"] == program}
    return get[a] / get[b] if get[b] else float("nan")


def paired_ratio(rows, program, a, b) -> float:
    """Median over repeats of a's / b's communication time in the same
    repeat: the orders of one repeat ran back to back, so this ratio is
    robust to the machine's load drifting between repeats."""
    runs = {r["order"]: r["comm_runs"] for r in rows if r["program"] == program and "comm_runs" in r}
    return statistics.median(x / y for x, y in zip(runs[a], runs[b]))


def print_table(rows: list[dict]) -> None:
    print(f"{'program':16} {'order':12} {'wall s':>8} {'comm s':>8} {'net MB':>8} "
          f"{'J':>11} {'bound s':>8} {'comm/rankmap':>12}")
    for r in rows:
        wall = f"{r['wall_s']:8.3f}" if "wall_s" in r else f"{'':8}"
        net = f"{r['net_bytes'] / 1e6:8.2f}" if "net_bytes" in r else f"{'':8}"
        bound = f"{r['bound_s']:8.3f}" if "bound_s" in r else f"{'':8}"
        print(f"{r['program']:16} {r['order']:12} {wall} {r['comm_s']:8.3f} {net} "
              f"{r['J']:11.4g} {bound} {ratio(rows, r['program'], r['order'], 'rankmap'):12.2f}")
    print("\ngoals (communication time, median of the per-repeat ratios):")
    for program in dict.fromkeys(r["program"] for r in rows):
        rr = paired_ratio(rows, program, "round-robin", "rankmap")
        blk = paired_ratio(rows, program, "rankmap", "block")
        inp = paired_ratio(rows, program, "in-program", "rankmap")
        print(f"  {program:16} round-robin/rankmap {rr:5.2f} (>= 2: {'met' if rr >= 2 else 'MISSED'})"
              f"   rankmap/block {blk:5.3f} (<= 1.02: {'met' if blk <= 1.02 else 'MISSED'})"
              f"   in-program/rankmap {inp:5.3f} (<= 1.05: {'met' if inp <= 1.05 else 'MISSED'})")


def plot(rows: list[dict], path: Path, title: str) -> None:
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
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--slots", type=int, default=8, help="ranks per node")
    p.add_argument("--bandwidth", default="50mbit", help="node link rate, each direction")
    p.add_argument("--repeats", type=int, default=5,
                   help="runs of each order, interleaved; medians reported (default 5)")
    p.add_argument("--method", default="auto", help="rankmap mapping method (map and in-program)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--busy-poll", action="store_true",
                   help="leave MPICH busy polling (no MPIR_CVAR_ENABLE_HEAVY_YIELD)")
    p.add_argument("--quick", action="store_true", help="1 repeat, shorter runs")
    p.add_argument("--out", default=str(HERE / "results"), help="directory for JSON, plot, traces, launch files")
    args = p.parse_args()
    if args.quick:
        args.repeats = 1
    load_before = loadavg()
    rows = benchmark(args)
    print_table(rows)
    out = Path(args.out)
    (out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    title = (f"{args.nodes} nodes x {args.slots} ranks, {args.bandwidth}, "
             f"{'busy poll' if args.busy_poll else 'heavy yield'}; load {load_before} -> {loadavg()}")
    plot(rows, out / "comm_time.png", title)
    print(f"# wrote {out / 'results.json'} and {out / 'comm_time.png'}; load before {load_before}, "
          f"after {loadavg()}")


if __name__ == "__main__":
    main()
