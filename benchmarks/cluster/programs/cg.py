"""Conjugate gradients on the 3-D Poisson equation (7-point Laplacian, zero
Dirichlet boundary), the domain split over a 1-, 2- or 3-D process grid:
each iteration one halo exchange and two allreduces.  Each rank holds an
n x ... x n x depth block (the process grid splits the first axes; axes it
does not split are ``depth`` long), so faces are n x depth: a deep, thin
block keeps the messages large and the arithmetic small on a small machine.

  mpiexec -n 32 python cg.py --grid 16x2 --n 1 --depth 8192 --iters 40 [--reorder]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid import Timer, add_reorder_arguments, exchange, face_row, neighbours, parse_grid, start  # noqa: E402


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default="8x2", help="process grid over the first axes (default 8x2)")
    p.add_argument("--n", type=int, default=16, help="local points along split axes (default 16)")
    p.add_argument("--depth", type=int, default=512,
                   help="local points along axes the grid does not split (default 512)")
    p.add_argument("--iters", type=int, default=40, help="CG iterations (default 40)")
    return add_reorder_arguments(p)


def row(args, dims, rank):
    """This rank's traffic: its face messages (the allreduces move 8 bytes
    per rank per call and do not depend on the order)."""
    shape = local_shape(args, dims)
    face_bytes = [8 * int(np.prod(shape)) // shape[axis] for axis in range(len(dims))]
    return face_row(dims, rank, face_bytes, args.iters)


def local_shape(args, dims) -> tuple[int, int, int]:
    return tuple([args.n] * len(dims) + [args.depth] * (3 - len(dims)))


def main() -> None:
    from mpi4py import MPI

    args = parser().parse_args()
    dims = parse_grid(args.grid)
    if len(dims) > 3:
        raise SystemExit(f"--grid {args.grid}: at most 3 dimensions")
    comm, reorder_s = start(MPI.COMM_WORLD, args, dims, row)
    shape = local_shape(args, dims)
    faces = neighbours(dims, comm.rank)
    inner = (slice(1, -1),) * 3

    def face(axis, index):
        sl = [slice(1, -1)] * 3
        sl[axis] = index
        return tuple(sl)

    send = [np.empty([s for a, s in enumerate(shape) if a != axis]) for axis, _, _ in faces]
    recv = [np.empty_like(buf) for buf in send]

    def apply_laplacian(p_pad: np.ndarray) -> np.ndarray:
        for buf, (axis, step, _) in zip(send, faces):
            buf[...] = p_pad[face(axis, 1 if step < 0 else -2)]
        exchange(comm, faces, send, recv, timer)
        for buf, (axis, step, _) in zip(recv, faces):
            p_pad[face(axis, 0 if step < 0 else -1)] = buf
        c = p_pad[inner]
        return (6.0 * c - p_pad[:-2, 1:-1, 1:-1] - p_pad[2:, 1:-1, 1:-1]
                - p_pad[1:-1, :-2, 1:-1] - p_pad[1:-1, 2:, 1:-1]
                - p_pad[1:-1, 1:-1, :-2] - p_pad[1:-1, 1:-1, 2:])

    def dot(a, b) -> float:
        local = float(np.vdot(a, b))
        with timer.waiting():
            return comm.allreduce(local)

    x = np.zeros(shape)
    r = np.ones(shape)                        # b = 1, x0 = 0
    p_pad = np.zeros([s + 2 for s in shape])  # ghost layer stays 0 on the physical boundary
    p_pad[inner] = r
    comm.Barrier()
    timer = Timer()                           # apply_laplacian and dot use it
    rr = rr0 = dot(r, r)
    for _ in range(args.iters):
        q = apply_laplacian(p_pad)
        alpha = rr / dot(p_pad[inner], q)
        x += alpha * p_pad[inner]
        r -= alpha * q
        rr_new = dot(r, r)
        p_pad[inner] = r + (rr_new / rr) * p_pad[inner]
        rr = rr_new
    timer.report(comm, reorder_s=reorder_s, size=comm.size,
                 relative_residual=float(np.sqrt(rr / rr0)))


if __name__ == "__main__":
    main()
