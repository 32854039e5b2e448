"""A 2-D wavefront sweep (KBA-style transport sweep) on a process grid:
from each of the four corners in turn, every rank waits for its upstream
neighbours in x and y, works a little and passes its outgoing faces
downstream, ``--blocks`` times per corner (the pipelined angle blocks).  The
ranks wait for the wave as well as for the bytes, and the corners use the
links in turn: under ``python -m rankmap.profile`` each corner is recorded
as a phase of its own (``rankmap.profile.phase``).

  mpiexec -n 16 python sweep.py --grid 4x4 --kib 128 --blocks 8 --iters 4
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid import Timer, add_reorder_arguments, neighbours, parse_grid, start  # noqa: E402

CORNERS = ((1, 1), (-1, 1), (1, -1), (-1, -1))  # the direction of the wave along x and y


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default="4x4", help="2-D process grid, row-major ranks (default 4x4)")
    p.add_argument("--kib", type=float, default=128, help="KiB per face message (default 128)")
    p.add_argument("--blocks", type=int, default=8, help="angle blocks per corner (default 8)")
    p.add_argument("--iters", type=int, default=4, help="sweeps from all four corners (default 4)")
    return add_reorder_arguments(p)


def row(args, dims, rank):
    """This rank's traffic: every corner sends each face downstream once per block."""
    nbytes = int(args.kib * 1024) // 8 * 8
    peers = [peer for _, _, peer in neighbours(dims, rank)]
    # of the 4 corners, half send across each face in its direction
    return peers, [float(nbytes) * args.blocks * args.iters * len(CORNERS) / 2] * len(peers)


def corner_phase(corner: int):
    """The corner's phase while the profiler records, else nothing."""
    try:
        from rankmap import profile
    except ImportError:
        return contextlib.nullcontext()
    return profile.phase(f"corner {corner}") if profile.is_active() else contextlib.nullcontext()


def main() -> None:
    from mpi4py import MPI

    args = parser().parse_args()
    dims = parse_grid(args.grid)
    if len(dims) != 2:
        raise SystemExit(f"--grid {args.grid}: a sweep here is 2-D")
    comm, reorder_s = start(MPI.COMM_WORLD, args, dims, row)
    count = int(args.kib * 1024) // 8
    faces = neighbours(dims, comm.rank)
    inbox = {peer: np.empty(count) for _, _, peer in faces}
    out = np.full(count, float(comm.rank))
    local = np.ones(4096)
    comm.Barrier()
    timer = Timer()
    for _ in range(args.iters):
        for corner, wave in enumerate(CORNERS):
            up = [peer for axis, step, peer in faces if step == -wave[axis]]
            down = [peer for axis, step, peer in faces if step == wave[axis]]
            with corner_phase(corner):
                for b in range(args.blocks):
                    tag = corner * args.blocks + b
                    with timer.waiting():
                        MPI.Request.Waitall([comm.Irecv(inbox[peer], source=peer, tag=tag) for peer in up])
                    for peer in up:
                        if inbox[peer][0] != peer:
                            raise SystemExit(f"rank {comm.rank}: got data of {inbox[peer][0]}, not {peer}")
                    local = np.sqrt(local + 1.0)
                    sends = [comm.Isend(out, dest=peer, tag=tag) for peer in down]
                    with timer.waiting():
                        MPI.Request.Waitall(sends)
    timer.report(comm, reorder_s=reorder_s, size=comm.size)


if __name__ == "__main__":
    main()
