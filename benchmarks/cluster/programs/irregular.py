"""An irregular exchange: the ranks own the cells of an unstructured mesh
(random points in the unit square, each joined to its nearest neighbours),
numbered in a random order, and every iteration each rank swaps one
message with each neighbour, the message size growing with the length of
their shared border (a random weight here).  Everything is drawn from
``--seed``, the same on every rank.

  mpiexec -n 16 python irregular.py --seed 3 --kib 256 --iters 20
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid import Timer, add_reorder_arguments, start  # noqa: E402


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=3, help="the mesh and the numbering (default 3)")
    p.add_argument("--near", type=int, default=3, help="nearest neighbours joined to each cell (default 3)")
    p.add_argument("--kib", type=float, default=256, help="KiB of the largest message (default 256)")
    p.add_argument("--iters", type=int, default=20, help="exchanges (default 20)")
    return add_reorder_arguments(p)


def pattern(size: int, seed: int, near: int, kib: float) -> np.ndarray:
    """``nbytes[a, b]``: one message from rank a to rank b (symmetric, 0 where no border)."""
    rng = np.random.default_rng(seed)
    pts = rng.random((size, 2))
    dist = np.linalg.norm(pts[:, None] - pts[None], axis=2)
    np.fill_diagonal(dist, np.inf)
    joined = np.zeros((size, size), dtype=bool)
    for a in range(size):
        joined[a, np.argsort(dist[a])[:near]] = True
    joined |= joined.T
    weight = np.triu(rng.uniform(0.25, 1.0, (size, size)), 1)
    weight = weight + weight.T
    return np.where(joined, np.round(weight * kib * 1024 / 8) * 8, 0.0)


def row(args, dims, rank):
    """This rank's traffic over the run."""
    nbytes = pattern(dims[0], args.seed, args.near, args.kib)[rank]
    peers = np.flatnonzero(nbytes)
    return peers.tolist(), (nbytes[peers] * args.iters).tolist()


def main() -> None:
    from mpi4py import MPI

    args = parser().parse_args()
    size = MPI.COMM_WORLD.size
    args.grid = str(size)
    comm, reorder_s = start(MPI.COMM_WORLD, args, (size,), row)
    nbytes = pattern(size, args.seed, args.near, args.kib)
    peers = np.flatnonzero(nbytes[comm.rank]).tolist()
    send = {p: np.full(int(nbytes[comm.rank, p]) // 8, float(comm.rank)) for p in peers}
    recv = {p: np.empty(int(nbytes[p, comm.rank]) // 8) for p in peers}
    local = np.ones(4096)
    comm.Barrier()
    timer = Timer()
    for _ in range(args.iters):
        reqs = [comm.Irecv(recv[p], source=p) for p in peers] + [comm.Isend(send[p], dest=p) for p in peers]
        with timer.waiting():
            MPI.Request.Waitall(reqs)
        for p in peers:
            if recv[p][0] != p:
                raise SystemExit(f"rank {comm.rank}: got data of {recv[p][0]}, not {p}")
        local = np.sqrt(local + 1.0)
    timer.report(comm, reorder_s=reorder_s, size=comm.size)


if __name__ == "__main__":
    main()
