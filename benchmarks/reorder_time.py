"""``reorder_comm`` inside a program: the call's wall time against its budget.

Under ``mpiexec -n P`` (oversubscribed where P exceeds the cores), every rank
declares its row of a 2-D periodic stencil whose ranks were launched in a
scrambled order, and calls
``reorder_comm(comm, traffic=row, topology=4:16:P/64, options={"time_limit": L})``
on the centralised path (rank 0 maps with auto) and on the distributed path
(the distributed multilevel mapping), one launch per P, the calls in the
order given (``default``: no ``time_limit``, the in-program default; first
in the list, it is the process's first auto call and its budget includes
auto's start).  Printed per P, path and L: the budget (``call_seconds``), the
call's wall time (max over ranks) against the goal 1.1 L + 0.3 s, whether
the deadline cut (the same on every rank), J after / J before, the CPU time
of rank 0 and of the waiting ranks during the call (mean share of the wall
time per rank), the peak RSS of one rank (max over ranks) and of all ranks,
and the load average before and after each launch.

    python benchmarks/reorder_time.py --sizes 16,64,256 --limits default,0.5,2,10
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def stencil_row(rank: int, size: int):
    """This rank's row: the 2-D periodic stencil over a scrambled launch order."""
    import numpy as np

    rows = int(round(size ** 0.5))
    while size % rows:
        rows -= 1
    cols = size // rows
    order = np.random.default_rng(11).permutation(size)  # grid cell i is played by rank order[i]
    cell = int(np.flatnonzero(order == rank)[0])
    r, c = divmod(cell, cols)
    nbrs = {((r + dr) % rows) * cols + (c + dc) % cols for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1))}
    nbrs.discard(cell)
    return np.array([order[x] for x in sorted(nbrs)], dtype=np.int64), np.full(len(nbrs), 1e6)


def worker(limits: list[str], paths: list[str]) -> None:
    from mpi4py import MPI

    import rankmap
    from rankmap.algorithms import auto_loaded
    from rankmap.reorder.api import call_seconds

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    topo = rankmap.topology_from_strings(f"4:16:{max(size // 64, 1)}" if size >= 64 else f"4:{size // 4}",
                                         "1:10:100" if size >= 64 else "1:10")
    row = stencil_row(rank, size)
    for path in paths:
        for limit in limits:
            options = {} if limit == "default" else {"time_limit": float(limit)}
            budget = call_seconds(options, "auto")  # rank 0's: its clock decides
            first = not auto_loaded()
            comm.Barrier()
            t, cpu = time.perf_counter(), time.process_time()
            new = rankmap.reorder_comm(comm, traffic=row, topology=topo, distributed=(path == "distributed"),
                                       options=options)
            t, cpu = time.perf_counter() - t, time.process_time() - cpu
            spent = comm.gather((t, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss), root=0)
            info = new.reorder
            if rank == 0:
                wall = max(w for w, _c, _m in spent)
                rss = [m / 1024 for _w, _c, m in spent]  # KiB on Linux
                print(json.dumps({"P": size, "path": path, "limit": limit, "budget_s": budget,
                                  "first_call": first, "wall_s": wall,
                                  "deadline_hit": info.deadline_hit, "fallback": info.fallback,
                                  "J_ratio": info.J_after / info.J_before, "root_cpu_s": spent[0][1],
                                  "wait_cpu_share": sum(c / w for w, c, _m in spent[1:]) / max(size - 1, 1),
                                  "rss_max_mb": max(rss), "rss_sum_mb": sum(rss)}), flush=True)
            new.Free()


def mem_available_gb() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    return float("inf")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="16,64", help="comma-separated numbers of ranks")
    ap.add_argument("--limits", default="default,0.5,2",
                    help="comma-separated time limits in seconds, 'default' for none given")
    ap.add_argument("--paths", default="centralised,distributed")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per launch")
    ap.add_argument("--min-free-gb", type=float, default=6.0,
                    help="skip a launch when less memory than this (plus 60 MB per rank) is available")
    ap.add_argument("--heavy-yield", action="store_true",
                    help="MPICH: MPIR_CVAR_ENABLE_HEAVY_YIELD=1 (MPI's own waits yield; default: as launched)")
    ap.add_argument("--json", help="also append the rows to this file (JSON lines)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    limits = args.limits.split(",")
    for x in limits:
        if x != "default":
            float(x)
    if args.worker:
        worker(limits, args.paths.split(","))
        return 0
    mpiexec = Path(sys.executable).with_name("mpiexec")  # the mpich wheel's, else the one on PATH
    mpiexec = mpiexec if mpiexec.exists() else Path(shutil.which("mpiexec") or "mpiexec")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    if args.heavy_yield:
        env["MPIR_CVAR_ENABLE_HEAVY_YIELD"] = "1"
    print(f"# {ROOT}, {len(os.sched_getaffinity(0))} cores (ranks oversubscribed beyond that), "
          f"heavy yield {'on' if args.heavy_yield else 'off'}")
    print(f"{'P':>5s} {'path':12s} {'L':>7s} {'budget':>6s} | {'wall s':>7s} {'goal':>6s} {'hit':>4s} | "
          f"{'J after/before':>14s} | {'cpu 0':>6s} {'wait cpu':>8s} | {'MB/rank':>7s} {'MB all':>7s} | load")
    for p in [int(x) for x in args.sizes.split(",")]:
        free = mem_available_gb()
        if free < args.min_free_gb + p * 0.06:
            print(f"{p:5d} skipped: {free:.1f} GB available")
            continue
        load = os.getloadavg()[0]
        try:
            proc = subprocess.run([str(mpiexec), "-n", str(p), sys.executable, __file__, "--worker",
                                   "--limits", args.limits, "--paths", args.paths],
                                  capture_output=True, text=True, env=env, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"{p:5d} timed out after {args.timeout:g} s")
            continue
        load = f"{load:.1f}-{os.getloadavg()[0]:.1f}"
        if proc.returncode:
            print(f"{p:5d} failed: {proc.stderr.strip()[-400:]}")
        for line in proc.stdout.splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            r["load"] = load
            goal = 1.1 * r["budget_s"] + 0.3
            limit = r["limit"] + ("*" if r["first_call"] else "")
            print(f"{r['P']:5d} {r['path']:12s} {limit:>7s} {r['budget_s']:6g} | {r['wall_s']:7.2f} "
                  f"{'met' if r['wall_s'] <= goal else 'over':>6s} {'y' if r['deadline_hit'] else '-':>4s} | "
                  f"{r['J_ratio']:14.4f}{' (fallback)' if r['fallback'] else ''} | {r['root_cpu_s']:6.2f} "
                  f"{r['wait_cpu_share']:8.3f} | {r['rss_max_mb']:7.0f} {r['rss_sum_mb']:7.0f} | {load}",
                  flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
    print("# *: the process's first auto call (its budget includes auto's start); "
          "goal: wall <= 1.1 budget + 0.3 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
