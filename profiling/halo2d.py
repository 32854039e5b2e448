"""2-D 5-point halo exchange on a periodic Cartesian communicator (Sendrecv
along each dimension), the pattern of stencil codes."""
import argparse

import numpy as np
from mpi4py import MPI

p = argparse.ArgumentParser()
p.add_argument("--n", type=int, default=64, help="local grid edge")
p.add_argument("--iters", type=int, default=50)
a = p.parse_args()
world = MPI.COMM_WORLD
cart = world.Create_cart(MPI.Compute_dims(world.Get_size(), 2), periods=[True, True])
u = np.random.default_rng(cart.Get_rank()).random((a.n + 2, a.n + 2))
cart.Barrier()  # the loop time starts together on every rank
t0 = MPI.Wtime()
for _ in range(a.iters):
    for dim in (0, 1):
        lo, hi = cart.Shift(dim, 1)
        first, last = (u[1, :], u[-2, :]) if dim == 0 else (u[:, 1].copy(), u[:, -2].copy())
        ghost_lo, ghost_hi = np.empty_like(first), np.empty_like(first)
        cart.Sendrecv(np.ascontiguousarray(last), hi, 0, ghost_lo, lo, 0)
        cart.Sendrecv(np.ascontiguousarray(first), lo, 1, ghost_hi, hi, 1)
        if dim == 0:
            u[0, :], u[-1, :] = ghost_lo, ghost_hi
        else:
            u[:, 0], u[:, -1] = ghost_lo, ghost_hi
    u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
total = cart.allreduce(float(u[1:-1, 1:-1].sum()))
if cart.Get_rank() == 0:
    print(f"halo2d: sum {total:.6e} time {MPI.Wtime() - t0:.3f}s")
