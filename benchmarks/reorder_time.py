"""``reorder_comm`` inside a program: the call's wall time against its budget.

Under ``mpiexec -n P`` (oversubscribed where P exceeds the cores; waiting
ranks yield), every rank declares its row of a 2-D periodic stencil whose
ranks were launched in a scrambled order, and calls
``reorder_comm(comm, traffic=row, topology=4:16:P/64, options={"time_limit": L})``
on the centralised path (rank 0 maps with auto) and on the distributed path
(swap rounds).  Printed per P, path and L: the call's wall time (max over
ranks), its ratio to L, whether the deadline cut (the same on every rank),
and J after / J before.

    python benchmarks/reorder_time.py --sizes 16,64,256 --limits 0.5,2
"""

from __future__ import annotations

import argparse
import json
import os
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


def worker(limits: list[float]) -> None:
    from mpi4py import MPI

    import rankmap

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    topo = rankmap.topology_from_strings(f"4:16:{max(size // 64, 1)}" if size >= 64 else f"4:{size // 4}",
                                         "1:10:100" if size >= 64 else "1:10")
    row = stencil_row(rank, size)
    for path in ("centralised", "distributed"):
        for limit in limits:
            comm.Barrier()
            t = time.perf_counter()
            new = rankmap.reorder_comm(comm, traffic=row, topology=topo, distributed=(path == "distributed"),
                                       options={"time_limit": limit})
            wall = comm.allreduce(time.perf_counter() - t, op=MPI.MAX)
            info = new.reorder
            if rank == 0:
                print(json.dumps({"P": size, "path": path, "limit": limit, "wall_s": wall,
                                  "deadline_hit": info.deadline_hit, "fallback": info.fallback,
                                  "J_ratio": info.J_after / info.J_before}), flush=True)
            new.Free()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="16,64", help="comma-separated numbers of ranks")
    ap.add_argument("--limits", default="0.5,2", help="comma-separated time limits in seconds")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    limits = [float(x) for x in args.limits.split(",")]
    if args.worker:
        worker(limits)
        return 0
    mpiexec = Path(sys.executable).with_name("mpiexec")
    env = dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    print(f"# load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores (ranks oversubscribed beyond that)")
    print(f"{'P':>5s} {'path':12s} {'L':>5s} | {'wall s':>7s} {'/L':>6s} {'hit':>4s} | {'J after/before':>14s}")
    for p in [int(x) for x in args.sizes.split(",")]:
        proc = subprocess.run([str(mpiexec), "-n", str(p), sys.executable, __file__, "--worker",
                               "--limits", args.limits], capture_output=True, text=True, env=env, timeout=1800)
        if proc.returncode:
            print(f"{p:5d} failed: {proc.stderr.strip()[-400:]}")
            continue
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                print(f"{r['P']:5d} {r['path']:12s} {r['limit']:5g} | {r['wall_s']:7.2f} "
                      f"{r['wall_s'] / r['limit']:6.2f} {'y' if r['deadline_hit'] else '-':>4s} | "
                      f"{r['J_ratio']:14.4f}{' (fallback)' if r['fallback'] else ''}", flush=True)
    print(f"# load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
