"""Which rank order runs fastest, measured on an emulated cluster, beside
what the link-time model predicts for it.

For each program of its own (halos of two shapes, one numbered in a
scrambled order, a wavefront sweep, an irregular exchange, a collective-
heavy transpose) on 4 nodes x 4 slots joined by 50 Mbit/s links:

1. profile a round-robin launch: ``mpiexec python -m rankmap.profile -o TRACE app.py``;
2. map as a user does: ``rankmap map TRACE --hosts 'node[0-3]' -o F --as hydra``
   (the default objective), and once more with ``--objective sum`` (J alone);
3. run every order through the same launch path, a hydra machinefile and
   ``rankmap-bind`` with its bindings, the line ``map`` prints: block
   (ranks 0-3 on the first node ...), round-robin (rank r on node r mod 4),
   rankmap's, rankmap's J-alone, and a layout by hand where an obvious one
   exists (blocks of the grid on the nodes).  Every order is bound alike.

Measured per order: the communication time (max over ranks of the time
waiting in MPI), median over repeats, the orders interleaved within each
repeat (rotated, so none always runs first).  Predicted, for the order the
ranks really ran in (each rank reports its host): the replay of the message
order the profiler recorded (``rankmap.replay``: every rank's posts and waits
in turn, the node links of 50 Mbit/s shared fairly).  Also reported: the
link time, the busiest node link's bytes over its rate on the recorded
traffic (where the trace has phases, as the sweep's corners, the sum of
the phases' link times).  The goals: rankmap's order within 5 % of the
fastest order measured and never slower than block or round-robin (medians
of the per-repeat ratios, which the load's drift between repeats leaves
alone; orders that put every rank on the same PE are one order, their runs
pooled and their ratio 1), and the predicted ranking the measured one
wherever two predictions differ by more than 5 %.

Sizing: 16 ranks on the machine's 2 cores (``MPIR_CVAR_ENABLE_HEAVY_YIELD``,
see ``run.py``), messages of 128-256 KiB so that the links decide: the
fastest order's predicted time is 3-5 s per run.

  python benchmarks/cluster/orders.py                      # 3 repeats (~15 min)
  python benchmarks/cluster/orders.py --repeats 1 --only halo3d
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "programs"))

from run import PROGRAMS, Bench, loadavg, log, pe_of_hosts  # noqa: E402

from grid import grid_numbering  # noqa: E402
from rankmap.cli import build_parser  # noqa: E402
from rankmap.cli.common import load_machine  # noqa: E402
from rankmap.cost import evaluate, phased_link_time  # noqa: E402
from rankmap.emulate import ClusterSpec, EmulatedCluster  # noqa: E402
from rankmap.formats import read_graph, write_launch_files  # noqa: E402
from rankmap.formats.relaunch import line_argv, relaunch_lines  # noqa: E402
from rankmap.replay import replay_time  # noqa: E402
from rankmap.trace import read_trace  # noqa: E402

NODES, SLOTS = 4, 4
TOLERANCE = 0.05  # rankmap's goal against the fastest order, and predictions this close count as tied


def blocks_2d(rows: int, cols: int, cell=None) -> np.ndarray:
    """Node of each rank of a rows x cols grid cut into 2 x 2 blocks."""
    cell = np.arange(rows * cols) if cell is None else cell
    r, c = np.divmod(cell, cols)
    return (r // 2) * (cols // 2) + c // 2


def blocks_halo3d(cell) -> np.ndarray:
    """Node of each rank of the 2 x 2 x 4 grid cut into 2 x 1 x 2 blocks."""
    _, y, z = np.unravel_index(cell, (2, 2, 4))
    return y * 2 + z // 2


# label, program, argv, node of each rank in the layout by hand (None: no obvious one)
def cases(iters: int) -> list[tuple[str, str, list[str], np.ndarray | None]]:
    scrambled = grid_numbering((2, 2, 4), 5)
    return [
        ("halo3d 2x2x4 scrambled", "halo.py", ["--grid", "2x2x4", "--kib", "256", "--iters", str(iters),
                                               "--scramble", "5"], blocks_halo3d(scrambled)),
        ("halo2d 4x4", "halo.py", ["--grid", "4x4", "--kib", "256", "--iters", str(iters)], blocks_2d(4, 4)),
        ("sweep 4x4", "sweep.py", ["--grid", "4x4", "--kib", "128", "--blocks", "8",
                                   "--iters", str(max(1, iters // 5))], blocks_2d(4, 4)),
        ("irregular 16", "irregular.py", ["--seed", "3", "--kib", "256", "--iters", str(iters)], None),
        ("transpose 4x4", "transpose.py", ["--grid", "4x4", "--row-kib", "256", "--col-kib", "128",
                                           "--iters", str(iters)], None),
    ]


class Orders:
    """The launch files of every order of one program, on the machine the
    user's ``rankmap map TRACE --hosts ...`` maps onto."""

    def __init__(self, bench: Bench, trace: Path, name: str):
        self.bench, self.trace, self.name = bench, trace, name
        hosts = f"{bench.cluster.hosts[0].rstrip('0123456789')}[0-{NODES - 1}]"
        self.map_args = ["--hosts", hosts]
        args = build_parser("map").parse_args(["map", str(trace), *self.map_args])
        self.topology, _ = load_machine(args, graph_source=str(trace))

    def rankmap(self, objective: str | None) -> tuple[Path, str]:
        """``rankmap map`` with ``objective`` (None: the default); its printed hydra line."""
        out = self.bench.out / f"{self.name}.{objective or 'default'}.hydra"
        extra = ["--objective", objective] if objective else []
        proc = self.bench.call([sys.executable, "-m", "rankmap", "map", str(self.trace), *self.map_args,
                                *extra, "-o", str(out), "--as", "hydra", "--json"], f"rankmap map {self.trace}")
        return out, json.loads(proc.stdout)["relaunch"][0]

    def of_nodes(self, node_of_rank) -> tuple[Path, str]:
        """Launch files placing rank r on node ``node_of_rank[r]`` (its next free slot)."""
        hosts = self.topology.hosts()
        pe = np.empty(len(node_of_rank), dtype=np.int64)
        for node in range(len(hosts)):
            ranks = np.flatnonzero(np.asarray(node_of_rank) == node)
            pe[ranks] = np.flatnonzero(self.topology.pe_host == hosts[node])[:ranks.size]
        label = "".join(str(int(x)) for x in node_of_rank)
        out = self.bench.out / f"{self.name}.{label}.hydra"
        written = write_launch_files(pe, self.topology, str(out), "hydra")
        return out, relaunch_lines(written, len(pe), "python PROGRAM")[0]


def launch(bench: Bench, printed: str, program: list[str]) -> list[str]:
    """The printed hydra line with the emulation's launcher options after
    its launcher and this benchmark's program (and Python) at the end."""
    args = line_argv(printed)
    return bench.cluster.launch(args[:args.index("--") + 1] + program, "mpich", bench.mpi_env)[0]


def run_order(bench: Bench, cmd: list[str]) -> dict:
    start = time.perf_counter()
    proc = bench.call(cmd, "run")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["launch_s"] = time.perf_counter() - start
    return result


def benchmark(args) -> list[dict]:
    spec = ClusterSpec(nodes=NODES, slots=SLOTS, bandwidth=args.bandwidth)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    rows = []
    with EmulatedCluster(spec) as cluster:
        bench = Bench(cluster, args)
        judge = cluster.topology()  # the emulated links' rates: predictions in seconds
        log(f"# cluster {cluster.name}: {NODES} nodes x {SLOTS} slots, {spec.bandwidth}; load {loadavg()}")
        for label, program_file, argv, hand in cases(args.iters):
            if args.only and not any(word in label for word in args.only):
                continue
            name = label.split()[0]
            program = [sys.executable, str(PROGRAMS / program_file), *argv]
            trace = bench.out / f"{name}.rmtrace.npz"
            bench.call(bench.mpiexec("round-robin") + [sys.executable, "-m", "rankmap.profile", "-o",
                                                       str(trace), *program[1:]], f"profiling {name}")
            graph = read_graph(str(trace))
            run = read_trace(str(trace))
            phases = [g for g in (run.graph("all", phase=p) for p in run.phases) if g.total_bytes > 0]
            orders = Orders(bench, trace, name)
            p = NODES * SLOTS
            launches = {"block": orders.of_nodes(np.arange(p) // SLOTS),
                        "round-robin": orders.of_nodes(np.arange(p) % NODES),
                        "rankmap": orders.rankmap(None), "rankmap J alone": orders.rankmap("sum")}
            if hand is not None:
                launches["by hand"] = orders.of_nodes(hand)
            runs = {o: [] for o in launches}
            names = list(launches)
            for rep in range(args.repeats):
                for k in range(len(names)):
                    order = names[(k + rep) % len(names)]
                    r = run_order(bench, launch(bench, launches[order][1], program))
                    r["pe"] = pe_of_hosts(r["hosts"], judge, SLOTS)
                    runs[order].append(r)
                    log(f"  {label} {order} #{rep}: comm {r['comm_s']:.2f} s wall {r['wall_s']:.2f} s; "
                        f"load {loadavg()}")
            for order in names:
                rs = runs[order]
                rep = evaluate(graph, judge, rs[-1]["pe"])  # launch orders are the same every run
                phased = phased_link_time(phases, judge, rs[-1]["pe"]) if len(phases) > 1 else rep.link_time
                replayed = replay_time(run.events, rs[-1]["pe"], judge).seconds if run.events is not None else None
                rows.append({"program": label, "order": order, "repeats": len(rs),
                             "comm_s": statistics.median(r["comm_s"] for r in rs),
                             "wall_s": statistics.median(r["wall_s"] for r in rs),
                             "comm_runs": [r["comm_s"] for r in rs],
                             "predicted_s": phased if replayed is None else replayed, "phased_link_time_s": phased,
                             "link_time_s": rep.link_time, "busiest_link_bytes": rep.busiest_link_bytes,
                             "J": rep.J, "load": loadavg(), "pe": rs[-1]["pe"].tolist()})
    return rows


def paired(rows, program, a, b) -> float:
    """Median over repeats of a's / b's communication time in the same
    repeat; 1 where a and b put every rank on the same PE (one order
    launched twice: their ratio is only this machine's noise)."""
    mine = {r["order"]: r for r in rows if r["program"] == program}
    if mine[a]["pe"] == mine[b]["pe"]:
        return 1.0
    return statistics.median(x / y for x, y in zip(mine[a]["comm_runs"], mine[b]["comm_runs"]))


def pooled(mine: dict) -> dict:
    """Each order's median communication time over the runs of every order
    with its placement."""
    return {o: statistics.median(x for p in mine if mine[p]["pe"] == mine[o]["pe"] for x in mine[p]["comm_runs"])
            for o in mine}


def goals(rows) -> list[dict]:
    """Per program: rankmap against the fastest order, block and round-robin;
    the pairs of orders whose measured order contradicts the prediction."""
    out = []
    for program in dict.fromkeys(r["program"] for r in rows):
        mine = {r["order"]: r for r in rows if r["program"] == program}
        times = pooled(mine)
        fastest = min(mine, key=lambda o: (times[o], o != "rankmap"))
        vs_fastest = paired(rows, program, "rankmap", fastest)
        contradicted = []
        for a in mine:
            for b in mine:
                if mine[a]["predicted_s"] > (1 + TOLERANCE) * mine[b]["predicted_s"] \
                        and paired(rows, program, a, b) <= 1.0:
                    contradicted.append(f"{a} > {b}")
        out.append({"program": program, "fastest": fastest, "rankmap_vs_fastest": vs_fastest,
                    "rankmap_vs_block": paired(rows, program, "rankmap", "block"),
                    "rankmap_vs_round_robin": paired(rows, program, "rankmap", "round-robin"),
                    "ranking_contradicted": contradicted})
    return out


def print_table(rows: list[dict]) -> None:
    print(f"{'program':24} {'order':16} {'comm s':>8} {'predicted s':>11} {'link time s':>11} "
          f"{'busiest MiB':>11} {'J':>11} {'wall s':>8}")
    for r in rows:
        print(f"{r['program']:24} {r['order']:16} {r['comm_s']:8.2f} {r['predicted_s']:11.2f} "
              f"{r.get('phased_link_time_s', r.get('link_time_s', r['predicted_s'])):11.2f} "
              f"{r['busiest_link_bytes'] / 2**20:11.2f} "
              f"{r['J']:11.4g} {r['wall_s']:8.2f}")
    print(f"\ngoals (communication time, median of the per-repeat ratios; predictions within "
          f"{TOLERANCE:.0%} count as tied):")
    for g in goals(rows):
        ok = g["rankmap_vs_fastest"] <= 1 + TOLERANCE and g["rankmap_vs_block"] <= 1 \
            and g["rankmap_vs_round_robin"] <= 1
        print(f"  {g['program']:24} rankmap/fastest ({g['fastest']}) {g['rankmap_vs_fastest']:.3f}  "
              f"/block {g['rankmap_vs_block']:.3f}  /round-robin {g['rankmap_vs_round_robin']:.3f}  "
              f"{'met' if ok else 'MISSED'};  ranking "
              + ("as predicted" if not g["ranking_contradicted"] else
                 "contradicted: " + ", ".join(g["ranking_contradicted"])))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bandwidth", default="50mbit", help="node link rate, each direction (default 50mbit)")
    p.add_argument("--repeats", type=int, default=3, help="runs of each order, interleaved (default 3)")
    p.add_argument("--iters", type=int, default=20, help="iterations of the halos (default 20)")
    p.add_argument("--only", nargs="*", default=None, help="programs whose label contains one of these words")
    p.add_argument("--busy-poll", action="store_true", help="leave MPICH busy polling")
    p.add_argument("--out", default=str(HERE / "results-orders"), help="directory for JSON, traces, launch files")
    p.add_argument("--from", dest="source", default=None, metavar="JSON", help="print the table of an earlier run")
    args = p.parse_args()
    if args.source:
        print_table(json.loads(Path(args.source).read_text()))
        return
    load_before = loadavg()
    started = time.strftime("%Y-%m-%d %H:%M")
    rows = benchmark(args)
    print(f"# {started}, load before {load_before}, after {loadavg()}; {' '.join(sys.argv)}")
    print_table(rows)
    out = Path(args.out) / "orders.json"
    out.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"# wrote {out}")


if __name__ == "__main__":
    main()
