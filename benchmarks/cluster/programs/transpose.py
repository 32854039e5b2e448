"""A collective-heavy program: the transposes of a 2-D FFT on a process
grid, every iteration an all-to-all within each row of the grid
(``--row-kib`` to every other rank of the row), one within each column
(``--col-kib``), and a small allreduce over all ranks (a norm).  The
all-to-all moves each block straight to its rank, as the profiler records
it.

  mpiexec -n 16 python transpose.py --grid 4x4 --row-kib 256 --col-kib 128 --iters 20
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid import Timer, add_reorder_arguments, parse_grid, start  # noqa: E402


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default="4x4", help="2-D process grid, row-major ranks (default 4x4)")
    p.add_argument("--row-kib", type=float, default=256, help="KiB to each rank of the row (default 256)")
    p.add_argument("--col-kib", type=float, default=128, help="KiB to each rank of the column (default 128)")
    p.add_argument("--iters", type=int, default=20, help="iterations (default 20)")
    return add_reorder_arguments(p)


def row(args, dims, rank):
    """This rank's traffic: its row's and its column's all-to-all blocks
    (the allreduce moves 8 bytes and does not depend on the order)."""
    r, c = divmod(rank, dims[1])
    peers, nbytes = [], []
    for k in range(dims[1]):
        if k != c:
            peers.append(r * dims[1] + k)
            nbytes.append(int(args.row_kib * 1024) // 8 * 8 * args.iters)
    for k in range(dims[0]):
        if k != r:
            peers.append(k * dims[1] + c)
            nbytes.append(int(args.col_kib * 1024) // 8 * 8 * args.iters)
    return peers, [float(b) for b in nbytes]


def main() -> None:
    from mpi4py import MPI

    args = parser().parse_args()
    dims = parse_grid(args.grid)
    if len(dims) != 2:
        raise SystemExit(f"--grid {args.grid}: the transposes here are of a 2-D grid")
    comm, reorder_s = start(MPI.COMM_WORLD, args, dims, row)
    r, c = divmod(comm.rank, dims[1])
    rows, cols = comm.Split(r, c), comm.Split(c, r)
    row_send = np.full(rows.size * (int(args.row_kib * 1024) // 8), float(comm.rank))
    col_send = np.full(cols.size * (int(args.col_kib * 1024) // 8), float(comm.rank))
    row_recv, col_recv = np.empty_like(row_send), np.empty_like(col_send)
    comm.Barrier()
    timer = Timer()
    for _ in range(args.iters):
        with timer.waiting():
            rows.Alltoall(row_send, row_recv)
            cols.Alltoall(col_send, col_recv)
            norm = comm.allreduce(float(row_recv[0] + col_recv[0]))
    timer.report(comm, reorder_s=reorder_s, size=comm.size, norm=norm)


if __name__ == "__main__":
    main()
