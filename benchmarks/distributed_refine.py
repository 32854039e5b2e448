"""Distributed swap refinement against the centralised swap refinement.

    python benchmarks/distributed_refine.py [--shared ../shared] [--sizes 16,32,64,128,256]
        [--starts 3] [--central-seeds 5] [--replicas 8] [--kicks 0]
        [--mpi 16,32,64] [--mpi-only] [--in-program] [--plot FILE.png] [--mpi-json FILE]
    python benchmarks/distributed_refine.py --simulate 9,10,11,12,13,14,15,16 [--sim-plot FILE.png]
        [--sim-instances lulesh,stencil2d] [--sim-starts launch,random] [--auto-max 4096] [--forced]
        [--sim-json FILE] [--workers N]
    python benchmarks/distributed_refine.py --sim-from A.json,B.json [--sim-plot FILE.png]   # B's rows replace A's
    python benchmarks/distributed_refine.py --thousand      # the ~1000-rank instances

Part 1 (quality): from the same start (the launch order, and --starts random
orders), J of the distributed swap rounds (run serially: the decisions do not
depend on the number of ranks, part 2 checks that; --replicas copies in
lockstep, best kept, and --kicks) against
``rankmap.algorithms.refine.swaps.swap_refine`` (the centralised Schulz-Traff
refinement, when this build has it).  Instances: the real traffic matrices
of MapLib (64 ranks, S = 4:16:1) and the standard instances: 3elt cut into n
blocks by KaHIP (seed 0), mapped onto S = 4:16:n/64 (4:n/4 below 64),
D = 1:10:100.  Column "left": what the centralised refinement still gains
from the distributed result (0: the rounds ended at a swap local optimum, and
dist/cent compares two local optima of the same neighbourhood).  Columns
"cent spread", "dist/med" and "dist/min": the centralised refinement run with
--central-seeds seeds from the same start (max/min of its J, the spread of
local search itself) and the distributed J against the median and the best
of those runs.
Part 2 (scaling): the same rounds under ``mpiexec -n P`` with one task per
rank (what ``reorder_comm`` does), rank 0 reading the graph and sending each
rank its rows: J (must equal part 1), rounds, wall time of the refinement and
of the whole mpiexec, per-rank state (rows and labels of all replicas, the
neighbour labels of a round, the largest exchange buffer), peak RSS and
private memory (RSS also counts the pages of shared libraries and of MPICH's
shared-memory segments that every rank maps), max over ranks 1..P-1.  Runs
with MPIR_CVAR_ENABLE_HEAVY_YIELD=1 (OVERSUBSCRIBED_ENV).
With --in-program, part 2 runs what a program calls instead:
``rankmap.reorder_comm(comm, traffic=my_row, distributed=True, replicas=,
kicks=)`` (the multilevel path), rank r on slot r holding only its own row.  The same random start
is made the launch order by renaming the tasks (task t is played by rank
start[t]), so "J start" is part 2's; the ranks' tie-breaks see other task
ids, so the result is compared with the serial multilevel run on the
renamed graph.
Wall: the reorder_comm call (agreement steps, rounds, Split), max over ranks.

Simulation (--simulate, log2 P per size): the distributed multilevel mapping
(``algorithms.distributed.multilevel``) run in one process (the sets of a
round in --workers processes) at P = 2^9 ... 2^16 tasks, whose decisions
do not depend on the number of ranks (the MPI tests check that at 2-16
ranks), so rounds and J are those of P ranks.  Instances:
"lulesh", a LULESH-like 27-point stencil on a near-cubic grid of P ranks
with the byte counts of the recorded 64-rank LULESH traffic (faces, edges,
corners: the median of each class in tests/data/traffic/lulesh64.size.csv)
onto 24:2:k (4:20:100, k = ceil(P / 48) nodes of 2 x 24 cores, the machine
of the 1000-rank LULESH case); "stencil2d", a 2-D 5-point stencil onto 4:16:P/64
(1:10:100).  Starts: the launch order (task t on PE t) and a random launch
order (the tasks renamed, as ``--in-program`` does).  Columns: the vertices
per level, label propagation rounds per level, swap rounds, all rounds,
J / J start, J / J of the centralised ``auto`` (default time limit) for
P <= --auto-max.  With --forced, P <= 4096 also runs with coarse_max =
P / 16, so the coarsening itself is measured where the default would map
the whole graph centrally.
--thousand: the ~1000-task graphs (LULESH-like 10 x 10 x 10 onto 24:2:21,
4:20:100; 3elt cut into 1000 blocks by KaHIP (``rankmap.modelgen``) onto
24:2:21; delaunay_n10 (1024 tasks) onto 4:16:16), from the block order
(identity), the launch order of the renamed graph and a random one: J of
the multilevel path, of the swap rounds alone, of centralised auto.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The MPI workers of part 2 import this file too: the rest of rankmap (scipy,
# the graph readers, the mapping methods) is imported where it is used, so a
# worker rank other than 0 loads numpy, mpi4py and the rounds only.

#: MPICH settings for oversubscribed runs (P ranks on 2 cores): a waiting rank
#: sleeps in nanosleep instead of spinning on sched_yield (collectives ~1.7x
#: faster at P = 64, see the report)
OVERSUBSCRIBED_ENV = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"}


def shared_folder() -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from mesh_common import SHARED  # the shared data folder, wherever the checkout is

    return SHARED


def machine(n: int):
    from rankmap import topology_from_strings

    return topology_from_strings(f"4:16:{n // 64}" if n >= 64 else f"4:{max(n // 4, 1)}",
                                 "1:10:100" if n >= 64 else "1:10")


def quotient_of(graph_path: Path, n: int):
    """The Schulz-Traff model: a graph cut into n blocks by KaHIP, as the
    n-task communication graph."""
    import kahip

    from rankmap.formats import read_graph

    g = read_graph(str(graph_path))
    s = g.symmetric
    xadj = s.indptr.astype(np.int64).tolist()
    adjncy = s.indices.astype(np.int64).tolist()
    weights = np.maximum(np.rint(s.data / 2), 1).astype(np.int64).tolist()
    _cut, part = kahip.kaffpa([1] * g.n, xadj, weights, adjncy, n, 0.03, True, 0, 0)
    q = g.quotient(np.asarray(part), n)
    q.name = f"3elt/q{n}"
    return q


def instances(shared: Path, sizes: list[int]):
    from rankmap.formats import read_graph

    traffic = shared / "data" / "traffic" / "maplib-mapping-matters"
    for app in ("amg", "btmz", "cg", "lulesh"):
        path = traffic / f"{app}CMatrices" / "comm_matrix.p2p.size.csv"
        if path.exists():
            yield f"maplib-{app}", read_graph(str(path))
    graph = ROOT / "tests" / "data" / "graphs" / "3elt.graph"
    for n in sizes:
        yield f"3elt/q{n}", quotient_of(graph, n)


def centralised():
    try:
        from rankmap.algorithms.refine.swaps import swap_refine
    except ImportError:
        return None
    return swap_refine


def quality(args) -> list[dict]:
    from rankmap import mapping_cost
    from rankmap.algorithms.distributed.swap_rounds import refine_rounds

    swap_refine = centralised()
    print(f"part 1: quality; load average {os.getloadavg()[0]:.2f}; centralised reference: "
          f"{'rankmap.algorithms.refine.swaps.swap_refine' if swap_refine else 'NOT AVAILABLE in this build'}")
    print(f"{'instance':14s}{'n':>5s} {'start':>8s}{'J start':>12s}{'J dist':>12s}{'J central':>12s}"
          f"{'dist/cent':>10s}{'left':>7s}{'cent spread':>12s}{'dist/med':>9s}{'dist/min':>9s}{'rounds':>7s}"
          f"{'swaps':>7s}"
          f"{'t dist':>8s}{'t cent':>8s}")
    print(f"(distributed: replicas={args.replicas}, kicks={args.kicks}; centralised: swap_refine, "
          f"seed 0 in 'J central', seeds 0..{args.central_seeds - 1} in 'cent spread' and 'dist/med')")
    rows = []
    for name, g in instances(Path(args.shared), args.sizes):
        topo = machine(g.n)
        for start_name in ["launch"] + [f"random{s}" for s in range(args.starts)]:
            start = np.arange(g.n) if start_name == "launch" else \
                np.random.default_rng(int(start_name[6:])).permutation(g.n)
            j0 = mapping_cost(g, topo, start)
            t = time.perf_counter()
            pe, res = refine_rounds(g, topo, start, seed=0, replicas=args.replicas, kicks=args.kicks)
            t_dist = time.perf_counter() - t
            j_dist = mapping_cost(g, topo, pe)
            j_cent = t_cent = left = j_med = j_min = spread = float("nan")
            if swap_refine is not None:
                t = time.perf_counter()
                j_cent = mapping_cost(g, topo, swap_refine(g, topo, start, seed=0))
                t_cent = time.perf_counter() - t
                j_seeds = [j_cent] + [mapping_cost(g, topo, swap_refine(g, topo, start, seed=s))
                                      for s in range(1, args.central_seeds)]
                j_med, j_min = float(np.median(j_seeds)), min(j_seeds)
                spread = max(j_seeds) / j_min
                # what the centralised search still finds from the distributed
                # result: 0 = the rounds ended at a swap local optimum
                left = 1 - mapping_cost(g, topo, swap_refine(g, topo, pe, seed=0)) / j_dist
            rows.append(dict(instance=name, n=g.n, start=start_name, J_start=j0, J_dist=j_dist,
                             J_central=j_cent, J_central_median=j_med, J_central_min=j_min, left=left, rounds=res.rounds, swaps=res.swaps,
                             t_dist=t_dist, t_central=t_cent))
            print(f"{name:14s}{g.n:5d} {start_name:>8s}{j0:12.4g}{j_dist:12.4g}{j_cent:12.4g}"
                  f"{j_dist / j_cent:10.4f}{left:7.3f}{spread:12.3f}{j_dist / j_med:9.4f}{j_dist / j_min:9.4f}{res.rounds:7d}{res.swaps:7d}{t_dist:8.2f}{t_cent:8.2f}")
    for label, key in (("dist/central", "J_central"), ("dist/central median", "J_central_median"),
                       ("dist/central best", "J_central_min")):
        ratios = np.array([r["J_dist"] / r[key] for r in rows if np.isfinite(r[key])])
        if len(ratios):
            print(f"{label}: geometric mean {np.exp(np.mean(np.log(ratios))):.4f}, "
                  f"best {ratios.min():.4f}, worst {ratios.max():.4f}, above 1.02 on "
                  f"{int((ratios > 1.02).sum())} of {len(ratios)} (target: within 1.02)")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return rows


def private_mib() -> float:
    """This process' private memory (what P processes really add up to;
    RSS also counts the shared library pages every rank maps)."""
    with open("/proc/self/smaps_rollup") as f:
        return sum(int(line.split()[1]) for line in f
                   if line.startswith(("Private_Clean:", "Private_Dirty:"))) / 1024


def renamed(graph, start):
    """The graph on ranks when rank start[t] plays task t (so the launch
    order, rank r on PE r, is the placement ``start``)."""
    from rankmap import CommGraph

    src, dst, nbytes = graph.coo()[:3]
    return CommGraph.from_edges(start[src], start[dst], nbytes, n=graph.n)


def scaling(args) -> list[dict]:
    from rankmap import mapping_cost
    from rankmap.algorithms.distributed.swap_rounds import refine_rounds
    from rankmap.formats import read_graph, write_graph

    from rankmap.emulate.cluster import default_mpiexec

    exe = default_mpiexec()
    env = dict(os.environ, **OVERSUBSCRIBED_ENV,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    how = "reorder_comm(distributed=True) in the program" if args.in_program else "refine_distributed"
    print(f"\npart 2: {how} under mpiexec, one task per rank (3elt/qP on {{4:16:P/64 | 4:P/4}}, "
          f"random start, {' '.join(f'{k}={v}' for k, v in OVERSUBSCRIBED_ENV.items())}, "
          f"replicas={args.replicas}, kicks={args.kicks})")
    print(f"{'P':>5s}{'J start':>12s}{'J dist':>12s}{'ratio':>7s}{'= serial':>9s}{'rounds':>7s}"
          f"{'wall s':>8s}{'total s':>8s}{'state B/rank':>13s}{'RSS MiB':>8s}{'priv MiB':>9s}"
          f"{'RSS0':>7s}{'priv0':>7s}{'load':>6s}")
    print(f"(wall: {'the reorder_comm call' if args.in_program else 'the refinement'}; ratio: "
          "J dist / J start; total: mpiexec start to end; state, RSS and private memory: max "
          "over ranks 1..P-1; RSS0, priv0: rank 0's, MiB; = serial: the one-process run with the same "
          "options; 'cut': the call's wall-clock limit ended its search, so it need not)")
    rows = []
    graph = ROOT / "tests" / "data" / "graphs" / "3elt.graph"
    with tempfile.TemporaryDirectory() as tmp:
        for p in args.mpi:
            g = quotient_of(graph, p)
            path = Path(tmp) / f"q{p}.edges"
            write_graph(g, str(path))
            g = read_graph(str(path))  # what rank 0 of the workers reads
            start = np.random.default_rng(0).permutation(p)
            if args.in_program:  # the ranks' graph, launched in order
                g, start = renamed(g, start), np.arange(p)
            if args.in_program:  # reorder_comm(distributed=True): the multilevel path, its options
                from rankmap.algorithms.distributed.multilevel import multilevel_map
                from rankmap.reorder.api import multilevel_tuning

                serial, _ = multilevel_map(g, machine(p), start, seed=0, kicks=args.kicks,
                                           replicas=args.replicas, **multilevel_tuning({}))
            else:
                serial, _ = refine_rounds(g, machine(p), start, seed=0, kicks=args.kicks,
                                          replicas=args.replicas)
            cmd = [str(exe), "-n", str(p), sys.executable, __file__, "--worker", str(path),
                   "--kicks", str(args.kicks), "--replicas", str(args.replicas)]
            cmd += ["--in-program"] if args.in_program else []
            t = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
            total = time.perf_counter() - t
            load = os.getloadavg()[0]
            if proc.returncode != 0:
                print(f"{p:5d}  failed: {proc.stderr.strip()[-300:]}")
                continue
            out = json.loads(proc.stdout.strip().splitlines()[-1])
            same = np.array_equal(np.asarray(out["pe"]), serial)
            rows.append(dict(P=p, **{k: v for k, v in out.items() if k != "pe"}, same=same,
                             J_serial=mapping_cost(g, machine(p), serial), total_s=total, load=load))
            cut = "cut" if out.get("deadline_hit") else ""  # the clock ended it: need not equal the serial run
            print(f"{p:5d}{out['J_start']:12.4g}{out['J']:12.4g}{out['J'] / out['J_start']:7.3f}"
                  f"{str(same) + cut:>9s}{out['rounds']:7d}"
                  f"{out['wall_s']:8.2f}{total:8.1f}{out['state_bytes'] or '-':>13}{out['rss_mib']:8.1f}"
                  f"{out['private_mib']:9.1f}{out['rss0_mib']:7.0f}{out['private0_mib']:7.0f}{load:6.1f}",
                  flush=True)
            if args.mpi_json:
                Path(args.mpi_json).write_text(json.dumps(rows, indent=1))
    return rows


def worker(path: str, kicks: int, replicas: int) -> None:
    """One rank of part 2: rank 0 reads the graph and the start, every rank
    refines its one task; rank 0 reports."""
    from mpi4py import MPI

    from rankmap.reorder.offline import refine_distributed

    comm = MPI.COMM_WORLD
    g = topo = start = None
    if comm.Get_rank() == 0:
        from rankmap.formats import read_graph

        g = read_graph(path)
        topo = machine(g.n)
        start = np.random.default_rng(0).permutation(g.n)
    comm.Barrier()
    t = time.perf_counter()
    pe, res, state = refine_distributed(comm, g, topo, start, seed=0, kicks=kicks, replicas=replicas)
    wall = comm.allreduce(time.perf_counter() - t, op=MPI.MAX)
    report(comm, g, topo, pe, dict(J_start=res.J_before, rounds=res.rounds, swaps=res.swaps,
                                   wall_s=wall, state_bytes=int(comm.allreduce(state, op=MPI.MAX))))


def in_program_worker(path: str, kicks: int, replicas: int) -> None:
    """One rank of part 2 --in-program: rank 0 reads the graph and hands
    every rank its own row (untimed); then every rank calls reorder_comm
    as a program would; rank 0 reports."""
    from mpi4py import MPI

    from rankmap.reorder import reorder_comm  # imported at start-up, as a program would

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    rows = g = None
    if comm.Get_rank() == 0:
        from rankmap.formats import read_graph

        g = renamed(read_graph(path), np.random.default_rng(0).permutation(size))
        b = g.bytes
        rows = [(b.indices[b.indptr[r]:b.indptr[r + 1]].astype(np.int64),
                 b.data[b.indptr[r]:b.indptr[r + 1]].astype(np.float64)) for r in range(size)]
    row = comm.scatter(rows, root=0)
    topo = machine(size)  # rank r on PE r
    comm.Barrier()
    t = time.perf_counter()
    new = reorder_comm(comm, traffic=row, topology=topo, distributed=True, seed=0,
                               replicas=replicas, kicks=kicks)
    wall = comm.allreduce(time.perf_counter() - t, op=MPI.MAX)
    info = new.reorder
    if info.fallback:
        raise RuntimeError(info.reason)
    pe = None
    pairs = comm.gather((new.Get_rank(), comm.Get_rank()), root=0)  # new rank t runs on PE r
    if pairs is not None:
        pe = np.empty(size, dtype=np.int64)
        for task, slot in pairs:
            pe[task] = slot
    new.Free()
    report(comm, g, topo, pe, dict(J_start=info.J_before, rounds=info.rounds, swaps=info.swaps,
                                   wall_s=wall, state_bytes=None, deadline_hit=info.deadline_hit))


def report(comm, g, topo, pe, fields: dict) -> None:
    """Collective: memory of ranks 1..P-1; rank 0 prints one JSON line."""
    from mpi4py import MPI

    # ranks other than 0 (rank 0 also read the file and computed the start)
    others = comm.Get_rank() > 0 or comm.Get_size() == 1
    rss = comm.allreduce(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 if others else 0,
                         op=MPI.MAX)
    private = comm.allreduce(private_mib() if others else 0, op=MPI.MAX)
    if comm.Get_rank() == 0:  # rank 0 also read the graph, and maps it when P <= coarse_max
        from rankmap import mapping_cost

        print(json.dumps(dict(fields, J=mapping_cost(g, topo, pe), rss_mib=rss, private_mib=private,
                              rss0_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                              private0_mib=private_mib(), pe=pe.tolist())))


def plot(path: str, quality_rows, scaling_rows) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    rs = [r for r in quality_rows if np.isfinite(r["J_central"])]
    for start, marker in (("launch", "o"), ("random", "s")):
        at = [i for i, r in enumerate(rs) if r["start"].startswith(start)]
        a.plot(at, [rs[i]["J_dist"] / rs[i]["J_central"] for i in at], marker, label=start)
    a.set_xticks(range(len(rs)), [r["instance"] for r in rs], rotation=60, fontsize=7)
    a.axhline(1.02, color="r", ls="--", lw=1, label="+2%")
    a.set_ylabel("J distributed / J centralised")
    a.legend()
    if scaling_rows:
        b.plot([r["P"] for r in scaling_rows], [r["wall_s"] for r in scaling_rows], "o-", label="wall s")
        b.set_xscale("log", base=2)
        b.set_xlabel("ranks P (one task each, oversubscribed)")
        b.set_ylabel("wall s")
        if all(r["state_bytes"] is not None for r in scaling_rows):  # not measured --in-program
            b2 = b.twinx()
            b2.plot([r["P"] for r in scaling_rows], [r["state_bytes"] / 1024 for r in scaling_rows],
                    "s--", color="C1", label="KiB/rank")
            b2.set_ylabel("algorithm state, KiB per rank")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


# ------------------------------------------------------------- simulation


def stencil(dims, weight):
    """Stencil traffic on a grid of ``dims``: ``weight[k - 1]`` bytes each
    way between cells k steps apart in Manhattan distance, along the axes
    only (5-/7-point) when ``weight`` has one entry, else to all 3^d - 1
    neighbours (27-point in 3-D)."""
    from rankmap import CommGraph

    dims = tuple(int(d) for d in dims)
    idx = np.arange(int(np.prod(dims))).reshape(dims)
    src, dst, nbytes = [], [], []
    for off in np.ndindex(*(3,) * len(dims)):
        o = np.array(off) - 1
        k = int(np.abs(o).sum())
        if k == 0 or k > len(weight):
            continue
        a = idx[tuple(slice(max(0, -x), d - max(0, x)) for x, d in zip(o, dims))].ravel()
        b = idx[tuple(slice(max(0, x), d - max(0, -x)) for x, d in zip(o, dims))].ravel()
        src.append(a)
        dst.append(b)
        nbytes.append(np.full(len(a), float(weight[k - 1])))
    return CommGraph.from_edges(np.concatenate(src), np.concatenate(dst), np.concatenate(nbytes),
                                n=idx.size)


def lulesh_weights() -> list[float]:
    """Median bytes per neighbour class (face, edge, corner) of the recorded
    64-rank LULESH traffic (a 4 x 4 x 4 grid of ranks, x fastest)."""
    from rankmap.formats import read_graph

    b = read_graph(str(ROOT / "tests" / "data" / "traffic" / "lulesh64.size.csv")).bytes.tocoo()
    a = np.stack(np.unravel_index(b.row, (4, 4, 4)))
    c = np.stack(np.unravel_index(b.col, (4, 4, 4)))
    k = np.abs(a - c).sum(axis=0)
    return [float(np.median(b.data[k == i])) for i in (1, 2, 3)]


def near_cube(p: int) -> tuple[int, int, int]:
    """Three factors of ``p`` as equal as possible (the largest first)."""
    best = None
    for x in range(1, int(round(p ** (1 / 3))) + 2):
        if p % x:
            continue
        for y in range(x, int(np.sqrt(p // x)) + 2):
            if (p // x) % y or p // x // y < y:
                continue
            cand = (p // x // y, y, x)
            if best is None or max(cand) - min(cand) < max(best) - min(best):
                best = cand
    return best


def sim_instance(kind: str, p: int):
    from rankmap import topology_from_strings

    if kind == "lulesh":
        return stencil(near_cube(p), lulesh_weights()), \
            topology_from_strings(f"24:2:{-(-p // 48)}", "4:20:100")
    rows = 1 << (int(np.log2(p)) // 2)
    return stencil((rows, p // rows), [100.0]), machine(p)


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children; not of the
    worker processes of multisection and of the sets (a fork server starts
    them, so they are not this process's children)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def sim_run(graph, topo, start_name: str, coarse_max: int, replicas: int, workers: int | None) -> dict:
    from rankmap import mapping_cost
    from rankmap.algorithms.distributed.multilevel import multilevel_map

    if start_name == "random":
        graph = renamed(graph, np.random.default_rng(0).permutation(graph.n))
    start = np.arange(graph.n)
    t, cpu = time.perf_counter(), cpu_seconds()
    pe, res = multilevel_map(graph, topo, start, coarse_max=coarse_max, replicas=replicas, workers=workers)
    wall, cpu = time.perf_counter() - t, cpu_seconds() - cpu
    return dict(graph=graph, pe=pe, J_start=mapping_cost(graph, topo, start), J=mapping_cost(graph, topo, pe),
                rounds=res.rounds, lp=res.coarsening_rounds, swap_rounds=res.refine.rounds,
                moves=len(res.group_moves), pairs=res.pair_rounds, sets=len(res.set_gains), set_gains=res.set_gains,
                levels=res.level_sizes, J_projected=res.J_projected, wall=wall, cpu=cpu)


def simulate(args) -> list[dict]:
    from rankmap import map_tasks, mapping_cost
    from rankmap.cores import workers_option

    print(f"simulation: the multilevel mapping run serially (decisions independent of P); "
          f"replicas={args.sim_replicas}; the sets of a round in {workers_option(args.workers)} processes; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'instance':10s}{'P':>7s}{'start':>8s}{'coarse_max':>11s}  {'levels':28s}{'LP':>10s}"
          f"{' mv+pr+set+swap':>16s}{'all':>5s}{'J/Jstart':>9s}{'J/auto':>8s}{'t s':>7s}{'t auto':>7s}")
    out = []
    for kind in args.sim_instances:
        for lg in args.simulate:
            p = 1 << lg
            graph, topo = sim_instance(kind, p)
            for start_name in args.sim_starts:
                autos = {}
                maxes = ([] if args.forced_only and p <= 4096 else [4096]) + \
                    ([p // 16] if (args.forced or args.forced_only) and p <= 4096 else [])
                for cmax in maxes:
                    r = sim_run(graph, topo, start_name, cmax, args.sim_replicas, args.workers)
                    j_auto = t_auto = float("nan")
                    if p <= args.auto_max:
                        if start_name not in autos:
                            t = time.perf_counter()
                            m = map_tasks(r["graph"], topo, method="auto", seed=0, objective="sum")
                            autos[start_name] = (mapping_cost(r["graph"], topo, m.pe_of_task),
                                                 time.perf_counter() - t)
                        j_auto, t_auto = autos[start_name]
                    row = dict(instance=kind, P=p, start=start_name, coarse_max=cmax,
                               levels=r["levels"], lp_rounds=r["lp"], swap_rounds=r["swap_rounds"],
                               move_rounds=r["moves"], pair_rounds=r["pairs"], set_rounds=r["sets"],
                               set_gains=r["set_gains"],
                               rounds=r["rounds"], J_start=r["J_start"], J=r["J"],
                               J_projected=r["J_projected"], J_auto=j_auto, wall_s=r["wall"], cpu_s=r["cpu"],
                               auto_s=t_auto, load=os.getloadavg()[0], workers=workers_option(args.workers))
                    out.append(row)
                    print(f"{kind:10s}{p:7d}{start_name:>8s}{cmax:11d}  "
                          f"{'>'.join(map(str, r['levels'])):28s}{'+'.join(map(str, r['lp'])) or '-':>10s}"
                          f"{r['moves']:3d}+{sum(r['pairs'])}+{r['sets']}+{r['swap_rounds']:<3d}{r['rounds']:5d}"
                          f"{r['J'] / r['J_start']:9.4f}"
                          f"{r['J'] / j_auto:8.4f}{r['wall']:7.1f}{t_auto:7.1f}  cpu {r['cpu']:.0f} s", flush=True)
                    if args.sim_json:
                        Path(args.sim_json).write_text(json.dumps(out, indent=1))
    sim_summary(out)
    return out


def sim_summary(rows: list[dict]) -> None:
    for label, forced in (("default (coarse_max 4096)", False), ("forced coarsening (P/16)", True)):
        for start in (None, "launch", "random"):  # both starts, then each (the goal holds for each)
            ratios = np.array([r["J"] / r["J_auto"] for r in rows if np.isfinite(r["J_auto"])
                               and (r["coarse_max"] != 4096) == forced and start in (None, r["start"])])
            if len(ratios):
                print(f"J / auto, {label}, {start or 'both starts'}: geometric mean "
                      f"{np.exp(np.mean(np.log(ratios))):.4f}, worst {ratios.max():.4f} over {len(ratios)} "
                      "runs (target: geometric mean <= 1.02)")
    print(f"most rounds at any P: {max(r['rounds'] for r in rows)} (target: <= 30); "
          f"load average {os.getloadavg()[0]:.2f}")


def sim_plot(path: str, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for i, kind in enumerate(sorted({r["instance"] for r in rows})):
        for start, ls in (("launch", "-"), ("random", "--")):
            rs = [r for r in rows if r["instance"] == kind and r["start"] == start and r["coarse_max"] == 4096]
            if not rs:
                continue
            ps = [r["P"] for r in rs]
            a.plot(ps, [r["rounds"] for r in rs], ls, marker="o", color=f"C{i}", label=f"{kind}, {start}")
            b.plot(ps, [r["J"] / r["J_start"] for r in rs], ls, marker="o", color=f"C{i}",
                   label=f"{kind}, {start}: J / J start")
            ra = [r for r in rs if np.isfinite(r["J_auto"])]
            if ra:
                b.plot([r["P"] for r in ra], [r["J"] / r["J_auto"] for r in ra], ls, marker="s",
                       color=f"C{i + 2}", label=f"{kind}, {start}: J / J auto")
        for start, ls in (("launch", "-"), ("random", "--")):  # coarsening forced (coarse_max P / 16)
            rf = [r for r in rows if r["instance"] == kind and r["start"] == start and r["coarse_max"] != 4096]
            if rf:
                a.plot([r["P"] for r in rf], [r["rounds"] for r in rf], ls, marker="x", color=f"C{i + 4}",
                       label=f"{kind}, {start}, forced")
                b.plot([r["P"] for r in rf], [r["J"] / r["J_auto"] for r in rf], ls, marker="x",
                       color=f"C{i + 4}", label=f"{kind}, {start}, forced: J / J auto")
    a.axhline(30, color="r", lw=1, ls=":", label="target 30")
    a.set_ylim(0, max([35] + [r["rounds"] + 5 for r in rows]))
    for ax in (a, b):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("P (tasks = ranks), serial simulation")
    a.set_ylabel("rounds, all levels")
    b.set_ylabel("J ratio")
    a.legend(fontsize=7)
    b.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def thousand(args) -> list[dict]:
    """The ~1000-task graphs: multilevel, swap rounds alone and centralised
    auto from the block order and two launch orders."""
    from rankmap import map_tasks, mapping_cost, topology_from_strings
    from rankmap.algorithms.distributed.swap_rounds import refine_rounds
    from rankmap.formats import read_graph
    from rankmap.modelgen import model_graph

    big = topology_from_strings("24:2:21", "4:20:100")
    cases = [("lulesh-like 10^3", stencil((10, 10, 10), lulesh_weights()), big),
             ("3elt/q1000", model_graph(read_graph(str(ROOT / "tests" / "data" / "graphs" / "3elt.graph")),
                                        1000), big),
             ("delaunay_n10", read_graph(str(ROOT / "tests" / "data" / "graphs" / "delaunay_n10.graph")),
              machine(1024))]
    print(f"\n~1000-task graphs; load average {os.getloadavg()[0]:.2f}")
    print(f"{'instance':18s}{'start':>8s}{'J start':>12s}{'multilevel':>11s}{'rounds':>7s}{'rounds-only':>12s}"
          f"{'rounds':>7s}{'auto':>9s}{'ml/auto':>8s}{'t ml':>7s}{'t auto':>7s}")
    out = []
    for name, graph, topo in cases:
        for start_name in ("block", "launch", "random"):
            g = graph
            if start_name == "launch":  # a round-robin launch over the nodes renames the tasks
                nodes = len(topo.hosts())
                g = renamed(graph, np.argsort(np.arange(graph.n) % nodes, kind="stable"))
            elif start_name == "random":
                g = renamed(graph, np.random.default_rng(0).permutation(graph.n))
            r = sim_run(g, topo, "launch", 4096, args.replicas)
            pe_rounds, rres = refine_rounds(g, topo, np.arange(g.n), seed=0, replicas=args.replicas)
            t = time.perf_counter()
            j_auto = mapping_cost(g, topo, map_tasks(g, topo, method="auto", seed=0, objective="sum").pe_of_task)
            t_auto = time.perf_counter() - t
            j_rounds = mapping_cost(g, topo, pe_rounds)
            out.append(dict(instance=name, start=start_name, J_start=r["J_start"], J=r["J"],
                            rounds=r["rounds"], J_rounds=j_rounds, rounds_only=rres.rounds,
                            J_auto=j_auto, wall_s=r["wall"], auto_s=t_auto))
            print(f"{name:18s}{start_name:>8s}{r['J_start']:12.4g}{r['J'] / r['J_start']:11.4f}{r['rounds']:7d}"
                  f"{j_rounds / r['J_start']:12.4f}{rres.rounds:7d}{j_auto / r['J_start']:9.4f}"
                  f"{r['J'] / j_auto:8.4f}{r['wall']:7.1f}{t_auto:7.1f}  cpu {r['cpu']:.0f} s", flush=True)
    print("(J columns: / J start; ml/auto: multilevel / centralised auto, target <= 1.05 from the block "
          f"order); load average {os.getloadavg()[0]:.2f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=None, help="the shared data folder (default: found)")
    ap.add_argument("--sizes", default="16,32,64,128,256")
    ap.add_argument("--starts", type=int, default=3, help="random starts per instance")
    ap.add_argument("--central-seeds", type=int, default=5,
                    help="seeds of the centralised refinement per start (its own spread)")
    ap.add_argument("--mpi", default="16,32,64", help="rank counts for part 2 ('' to skip)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--replicas", type=int, default=8,
                    help="copies run in lockstep, best kept (swap_rounds.REPLICAS, the default)")
    ap.add_argument("--kicks", type=int, default=0,
                    help="kicks (perturbation + rounds, kept when J falls) after the first descent")
    ap.add_argument("--in-program", action="store_true",
                    help="part 2 through reorder_comm(distributed=True), as a program calls it")
    ap.add_argument("--plot", metavar="FILE")
    ap.add_argument("--mpi-only", action="store_true", help="skip part 1")
    ap.add_argument("--simulate", default="", metavar="LOG2S",
                    help="serial simulation of the multilevel path at P = 2^k for these k")
    ap.add_argument("--sim-instances", default="lulesh,stencil2d")
    ap.add_argument("--sim-starts", default="launch,random", help="launch orders of the simulation")
    ap.add_argument("--sim-replicas", type=int, default=1,
                    help="copies in the multilevel path's swap rounds in the simulation")
    ap.add_argument("--auto-max", type=int, default=4096, help="centralised auto up to this P")
    ap.add_argument("--forced", action="store_true",
                    help="also coarse_max = P / 16 at P <= 4096 (the coarsening measured)")
    ap.add_argument("--forced-only", action="store_true",
                    help="at P <= 4096 the forced coarsening only (no default row)")
    ap.add_argument("--sim-json", metavar="FILE", help="write the simulation rows as JSON")
    ap.add_argument("--workers", type=int, default=None,
                    help="processes for the sets of a round in the simulation (default: the cores; "
                         "the same result for any number)")
    ap.add_argument("--mpi-json", metavar="FILE", help="write part 2's rows as JSON")
    ap.add_argument("--sim-plot", metavar="FILE", help="plot rounds and J against P")
    ap.add_argument("--sim-from", metavar="JSON[,JSON]", help="summarise and plot rows of --sim-json files")
    ap.add_argument("--thousand", action="store_true", help="the ~1000-task graphs only")
    ap.add_argument("--worker", metavar="GRAPH", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        (in_program_worker if args.in_program else worker)(args.worker, args.kicks, args.replicas)
        return
    if args.thousand:
        thousand(args)
        return
    if args.sim_from:  # rows of earlier runs: the summary and the plot; a later file's row of
        # the same instance, P, start and coarse_max replaces an earlier one (a re-run of a newer version)
        latest = {(r["instance"], r["P"], r["start"], r["coarse_max"]): r
                  for f in args.sim_from.split(",") for r in json.loads(Path(f).read_text())}
        rows = sorted(latest.values(), key=lambda r: (r["instance"], r["start"], r["coarse_max"], r["P"]))
        sim_summary(rows)
        if args.sim_plot:
            sim_plot(args.sim_plot, rows)
        return
    if args.simulate:
        args.simulate = [int(x) for x in args.simulate.split(",") if x]
        args.sim_instances = [x for x in args.sim_instances.split(",") if x]
        args.sim_starts = [x for x in args.sim_starts.split(",") if x]
        rows = simulate(args)
        if args.sim_plot:
            sim_plot(args.sim_plot, rows)
        return
    args.shared = args.shared or shared_folder()
    args.sizes = [int(x) for x in args.sizes.split(",") if x]
    args.mpi = [int(x) for x in args.mpi.split(",") if x]
    q = [] if args.mpi_only else quality(args)
    s = scaling(args) if args.mpi else []
    if args.plot:
        plot(args.plot, q, s)


if __name__ == "__main__":
    main()
