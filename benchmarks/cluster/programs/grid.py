"""What the cluster benchmark programs share: the process grid, the program's
own traffic (for the in-program reorder), and the timing report.

Ranks are numbered row-major over the process grid (rank = task), or in the
order a ``grid_numbering`` gives.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager

import numpy as np


def parse_grid(text: str) -> tuple[int, ...]:
    """``"8x4"`` -> (8, 4); ``"4x4x2"`` -> (4, 4, 2)."""
    try:
        dims = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--grid {text!r}: expected e.g. 8x4 or 4x4x2") from None
    if not dims or min(dims) < 1:
        raise SystemExit(f"--grid {text!r}: every dimension must be >= 1")
    return dims


def grid_numbering(dims: tuple[int, ...], seed: int | None = None) -> np.ndarray:
    """``cell[rank]``: the row-major grid cell of each rank; ``seed``: a
    random order (every rank draws the same)."""
    n = int(np.prod(dims))
    return np.arange(n) if seed is None else np.random.default_rng(seed).permutation(n)


def neighbours(dims: tuple[int, ...], rank: int, cell=None) -> list[tuple[int, int, int]]:
    """(axis, direction, neighbour rank) of each face of ``rank`` (not
    periodic); ``cell``: the grid cell of each rank (default row-major)."""
    cell = np.arange(int(np.prod(dims))) if cell is None else np.asarray(cell)
    rank_of = np.argsort(cell)
    coords = list(np.unravel_index(int(cell[rank]), dims))
    out = []
    for axis in range(len(dims)):
        for step in (-1, 1):
            c = list(coords)
            c[axis] += step
            if 0 <= c[axis] < dims[axis]:
                out.append((axis, step, int(rank_of[np.ravel_multi_index(c, dims)])))
    return out


def face_row(dims: tuple[int, ...], rank: int, face_bytes, iterations: int, cell=None):
    """This rank's traffic over the run, ``(neighbour ranks, bytes)``:
    ``face_bytes[axis]`` is one message across a face normal to ``axis``."""
    faces = neighbours(dims, rank, cell)
    return ([peer for _, _, peer in faces],
            [float(face_bytes[axis]) * iterations for axis, _, _ in faces])


def exchange(comm, faces, send, recv, timer: "Timer") -> None:
    """One message per face: ``send[i]``/``recv[i]`` go to/come from
    ``faces[i]`` (from ``neighbours``); the wait counts as communication."""
    from mpi4py import MPI

    reqs = [comm.Irecv(buf, source=peer, tag=2 * axis + (step < 0))
            for buf, (axis, step, peer) in zip(recv, faces)]
    reqs += [comm.Isend(buf, dest=peer, tag=2 * axis + (step > 0))
             for buf, (axis, step, peer) in zip(send, faces)]
    with timer.waiting():
        MPI.Request.Waitall(reqs)


def add_reorder_arguments(p):
    """The options of the in-program path, the same in every program."""
    p.add_argument("--reorder", action="store_true",
                   help="reorder ranks in the program at start-up (in-program path)")
    p.add_argument("--method", default="auto", help="mapping method for --reorder")
    return p


def start(comm, args, dims, row_of):
    """Check the job size against the grid; with ``args.reorder`` take the
    in-program path: ``rankmap.reorder_comm`` with this rank's traffic
    ``row_of(args, dims, rank)`` on the slots it discovers (host names and
    bindings of the running job).  Returns ``(communicator, seconds spent)``."""
    if comm.size != int(np.prod(dims)):
        raise SystemExit(f"--grid {args.grid} needs {int(np.prod(dims))} ranks, got {comm.size}")
    t = time.perf_counter()
    if args.reorder:
        import rankmap

        comm = rankmap.reorder_comm(comm, traffic=row_of(args, dims, comm.rank), method=args.method)
        if comm.reorder.fallback:
            raise SystemExit(f"reorder_comm kept the launch order: {comm.reorder.reason}")
    return comm, time.perf_counter() - t


class Timer:
    """Wall time of the timed loop and the part of it spent waiting in MPI."""

    def __init__(self):
        self.comm_s = 0.0
        self.start = time.perf_counter()

    @contextmanager
    def waiting(self):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.comm_s += time.perf_counter() - t

    def report(self, comm, **extra) -> None:
        """Rank 0 prints one JSON line: max wall and max/mean communication
        time, and the host of each rank (where each task really ran)."""
        from mpi4py import MPI

        wall = time.perf_counter() - self.start
        rows = comm.gather((wall, self.comm_s, MPI.Get_processor_name()))
        if comm.rank == 0:
            walls, comms, hosts = zip(*rows)
            print(json.dumps({"wall_s": max(walls), "comm_s": max(comms),
                              "comm_mean_s": float(np.mean(comms)), "hosts": list(hosts),
                              **extra}), flush=True)
