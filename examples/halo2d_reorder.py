"""A 2-D Jacobi halo exchange that reorders its ranks once at start-up.

    mpiexec -n 16 python examples/halo2d_reorder.py --dims 2,8 --hierarchy 2:2:4 --distances 1:10:100

``rankmap.reorder_cart`` is ``Create_cart(dims, periods, reorder=True)`` that
really reorders (MPICH and Intel MPI ignore the flag).  Without --hierarchy
the machine is discovered; --hierarchy pretends a multi-node machine with one
slot per rank (rank r on PE r), e.g. to try it on a laptop.  The program runs
the same iterations on the launch order and on the reordered grid and checks
that both give the same numbers.
"""

from __future__ import annotations

import argparse

import numpy as np
from mpi4py import MPI

import rankmap


def jacobi(cart, n: int, iterations: int) -> float:
    """Each rank owns an n x n block of a periodic grid; returns the global sum."""
    coords = cart.Get_coords(cart.Get_rank())
    dims = cart.Get_topo()[0]
    rng = np.random.default_rng(coords[0] * dims[1] + coords[1])  # data follows the grid position
    u = np.zeros((n + 2, n + 2))
    u[1:-1, 1:-1] = rng.random((n, n))
    for _ in range(iterations):
        for dim, (lo, hi) in ((0, (slice(1, 2), slice(-2, -1))), (1, (slice(1, 2), slice(-2, -1)))):
            src, dst = cart.Shift(dim, 1)
            take = (lambda s: u[s, 1:-1]) if dim == 0 else (lambda s: u[1:-1, s])
            put = (lambda s, v: u.__setitem__((s, slice(1, -1)), v)) if dim == 0 else \
                (lambda s, v: u.__setitem__((slice(1, -1), s), v))
            put(slice(0, 1), cart.sendrecv(take(hi).copy(), dest=dst, source=src))
            put(slice(-1, None), cart.sendrecv(take(lo).copy(), dest=src, source=dst))
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return cart.allreduce(float(u[1:-1, 1:-1].sum()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hierarchy", help="pretend machine, innermost level first (e.g. 2:2:2)")
    ap.add_argument("--distances", default=None, help="its distances (e.g. 1:10:100)")
    ap.add_argument("--dims", default="0,0", help="process grid (0 = let MPI choose)")
    ap.add_argument("--block", type=int, default=64, help="grid points per rank and dimension")
    ap.add_argument("--iterations", type=int, default=20)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    topology = rankmap.topology_from_strings(args.hierarchy, args.distances) if args.hierarchy else None

    dims = MPI.Compute_dims(comm.Get_size(), [int(d) for d in args.dims.split(",")])
    plain = comm.Create_cart(dims, [True, True], reorder=True)
    before = jacobi(plain, args.block, args.iterations)

    cart = rankmap.reorder_cart(comm, dims=dims, periods=[True, True], topology=topology)
    after = jacobi(cart, args.block, args.iterations)

    info = cart.reorder
    if comm.Get_rank() == 0:
        if info.fallback:
            print(f"kept the launch order: {info.reason}")
        else:
            print(f"{info.path} {info.method}: J {info.J_before:.6g} -> {info.J_after:.6g} "
                  f"({100 * info.improvement:.1f}% less bytes x distance) in {info.time_s:.3f} s")
        print(f"checksum launch order {before:.12g}, reordered {after:.12g}: "
              f"{'same' if np.isclose(before, after, rtol=1e-12) else 'DIFFERENT'}")
    moved = comm.gather((comm.Get_rank(), cart.Get_rank()), root=0)
    if comm.Get_rank() == 0:
        print("old rank -> new rank:", " ".join(f"{o}->{n}" for o, n in moved))
    cart.Free()
    plain.Free()


if __name__ == "__main__":
    main()
