"""3-D 7-point halo exchange with nonblocking Isend/Irecv on the six faces of
a non-periodic Cartesian grid."""
import argparse

import numpy as np
from mpi4py import MPI

p = argparse.ArgumentParser()
p.add_argument("--n", type=int, default=16)
p.add_argument("--iters", type=int, default=20)
a = p.parse_args()
world = MPI.COMM_WORLD
cart = world.Create_cart(MPI.Compute_dims(world.Get_size(), 3), periods=[False] * 3)
n = a.n
u = np.ones((n + 2,) * 3) * cart.Get_rank()
for it in range(a.iters):
    reqs, recv = [], []
    for dim in range(3):
        for disp, (inner, ghost) in ((-1, (1, 0)), (1, (n, n + 1))):
            _, peer = cart.Shift(dim, disp)
            if peer == MPI.PROC_NULL:
                continue
            face = np.ascontiguousarray(np.take(u, inner, axis=dim))
            buf = np.empty_like(face)
            reqs.append(cart.Isend(face, peer, tag=dim))
            reqs.append(cart.Irecv(buf, peer, tag=dim))
            recv.append((dim, ghost, buf))
    MPI.Request.Waitall(reqs)
    for dim, ghost, buf in recv:
        idx = [slice(None)] * 3
        idx[dim] = ghost
        u[tuple(idx)] = buf
    c = u[1:-1, 1:-1, 1:-1]
    c[...] = (u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1] + u[1:-1, :-2, 1:-1] + u[1:-1, 2:, 1:-1]
              + u[1:-1, 1:-1, :-2] + u[1:-1, 1:-1, 2:]) / 6.0
norm = cart.allreduce(float((u[1:-1, 1:-1, 1:-1] ** 2).sum()))
if cart.Get_rank() == 0:
    print(f"halo3d: norm {norm:.6e}")
