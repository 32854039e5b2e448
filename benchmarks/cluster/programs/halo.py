"""Halo exchange on a 2-D or 3-D process grid: every iteration each rank
swaps one message per face with its grid neighbours, then does a little
local work.  Communication dominates by design (message size is a knob).

  mpiexec -n 32 python halo.py --grid 8x4 --kib 256 --iters 20 [--reorder]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid import Timer, add_reorder_arguments, exchange, face_graph, neighbours, parse_grid, start  # noqa: E402


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default="8x4", help="process grid, row-major ranks (default 8x4)")
    p.add_argument("--kib", type=float, default=256, help="KiB per face message (default 256)")
    p.add_argument("--iters", type=int, default=20, help="exchanges (default 20)")
    return add_reorder_arguments(p)


def graph(args):
    dims = parse_grid(args.grid)
    nbytes = int(args.kib * 1024) // 8 * 8
    return face_graph(dims, [nbytes] * len(dims), args.iters, f"halo{len(dims)}d {args.grid}")


def main() -> None:
    from mpi4py import MPI

    args = parser().parse_args()
    dims = parse_grid(args.grid)
    comm, cost, reorder_s = start(MPI.COMM_WORLD, args, dims, graph)
    faces = neighbours(dims, comm.rank)
    count = int(args.kib * 1024) // 8
    send = [np.full(count, comm.rank, dtype=np.float64) for _ in faces]
    recv = [np.empty(count, dtype=np.float64) for _ in faces]
    local = np.ones(4096)
    comm.Barrier()
    timer = Timer()
    for _ in range(args.iters):
        exchange(comm, faces, send, recv, timer)
        for (axis, step, peer), buf in zip(faces, recv):
            if buf[0] != peer:
                raise SystemExit(f"rank {comm.rank}: face {axis}{step:+d} got data of {buf[0]}, not {peer}")
        local = np.sqrt(local + 1.0)
    timer.report(comm, reorder_s=reorder_s, J=cost, size=comm.size)


if __name__ == "__main__":
    main()
