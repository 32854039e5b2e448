"""Profile the first iterations, then reorder on what was recorded.

    mpiexec -n 16 python -m rankmap.profile examples/profile_then_reorder.py \\
        --hierarchy 2:2:4 --distances 1:10:100

The program exchanges data along a ring whose order has nothing to do with
the launch order (the kind of pattern a graph partitioner produces).  It runs
a few warm-up iterations under the profiler, calls
``reorder_comm(comm, traffic="profile")`` once, and continues on the new
communicator: each process takes over the role of its new rank, the data of
its old role reaches it with ``newcomm.carry``.  Without the profiler (plain
``python``) the reorder falls back to the launch order with a warning and the
program still runs.
"""

from __future__ import annotations

import argparse

import numpy as np
from mpi4py import MPI

import rankmap


def ring_neighbours(role: int, size: int) -> tuple[int, int]:
    order = np.random.default_rng(42).permutation(size)  # the application's ring
    at = int(np.flatnonzero(order == role)[0])
    return int(order[(at - 1) % size]), int(order[(at + 1) % size])


def iterate(comm, role: int, value: np.ndarray, steps: int) -> np.ndarray:
    left, right = ring_neighbours(role, comm.Get_size())
    for _ in range(steps):
        from_left = comm.sendrecv(value, dest=right, source=left)
        from_right = comm.sendrecv(value, dest=left, source=right)
        value = (value + from_left + from_right) / 3.0
    return value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hierarchy", help="pretend machine, innermost level first (e.g. 2:2:4)")
    ap.add_argument("--distances", default=None)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    topology = rankmap.topology_from_strings(args.hierarchy, args.distances) if args.hierarchy else None
    role = comm.Get_rank()
    value = np.full(1000, float(role))                     # 8 kB per message
    value = iterate(comm, role, value, args.warmup)        # recorded by the profiler

    newcomm = rankmap.reorder_comm(comm, traffic="profile", topology=topology)
    value = newcomm.carry(value)                            # data of the role I now play
    role = newcomm.Get_rank()
    value = iterate(newcomm, role, value, args.steps)

    # the same computation without reordering, to check the numbers
    reference = iterate(comm, comm.Get_rank(),
                        iterate(comm, comm.Get_rank(), np.full(1000, float(comm.Get_rank())),
                                args.warmup), args.steps)
    mine = newcomm.gather((role, float(value.sum())), root=0)
    ref = comm.gather((comm.Get_rank(), float(reference.sum())), root=0)
    if comm.Get_rank() == 0:
        info = newcomm.reorder
        if info.fallback:
            print(f"kept the launch order: {info.reason}")
        else:
            print(f"J {info.J_before:.6g} -> {info.J_after:.6g} ({100 * info.improvement:.1f}% less "
                  f"bytes x distance) by {info.method}")
        same = np.allclose(sorted(mine), sorted(ref), rtol=1e-12)
        print(f"results per role {'identical' if same else 'DIFFERENT'} with and without reordering")
    newcomm.Free()


if __name__ == "__main__":
    main()
