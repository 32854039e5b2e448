"""Halo exchange on a 2-D or 3-D process grid: every iteration each rank
swaps one message per face with its grid neighbours, then does a little
local work.  Communication dominates by design (message size is a knob).
``--scramble SEED`` numbers the ranks in a random order over the grid (as a
program whose decomposition does not follow the rank numbers).

  mpiexec -n 32 python halo.py --grid 8x4 --kib 256 --iters 20 [--scramble 5] [--reorder]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid import (Timer, add_reorder_arguments, exchange, face_row, grid_numbering, neighbours,  # noqa: E402
                  parse_grid, start)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default="8x4", help="process grid, row-major ranks (default 8x4)")
    p.add_argument("--kib", type=float, default=256, help="KiB per face message (default 256)")
    p.add_argument("--iters", type=int, default=20, help="exchanges (default 20)")
    p.add_argument("--scramble", type=int, default=None, metavar="SEED",
                   help="number the ranks in a random order over the grid (default: row-major)")
    return add_reorder_arguments(p)


def row(args, dims, rank):
    """This rank's traffic: one message of --kib per face per exchange."""
    return face_row(dims, rank, [int(args.kib * 1024) // 8 * 8] * len(dims), args.iters,
                    grid_numbering(dims, args.scramble))


def main() -> None:
    from mpi4py import MPI

    args = parser().parse_args()
    dims = parse_grid(args.grid)
    comm, reorder_s = start(MPI.COMM_WORLD, args, dims, row)
    faces = neighbours(dims, comm.rank, grid_numbering(dims, args.scramble))
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
    timer.report(comm, reorder_s=reorder_s, size=comm.size)


if __name__ == "__main__":
    main()
