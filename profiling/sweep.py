"""Wavefront sweep (Sweep3D/LU-like): on a 2-D process grid each rank waits
for its upstream neighbours, computes, and passes its outflow downstream; four
sweep directions per iteration."""
import argparse

import numpy as np
from mpi4py import MPI

p = argparse.ArgumentParser()
p.add_argument("--n", type=int, default=64, help="cells per face")
p.add_argument("--iters", type=int, default=4)
a = p.parse_args()
world = MPI.COMM_WORLD
grid = world.Create_cart(MPI.Compute_dims(world.Get_size(), 2), periods=[False, False])
face = np.zeros(a.n)
acc = 0.0
for _ in range(a.iters):
    for sx in (1, -1):
        for sy in (1, -1):
            up_x, down_x = grid.Shift(0, sx)
            up_y, down_y = grid.Shift(1, sy)
            inx, iny = np.zeros(a.n), np.zeros(a.n)
            if up_x != MPI.PROC_NULL:
                grid.Recv(inx, up_x, 1)
            if up_y != MPI.PROC_NULL:
                grid.Recv(iny, up_y, 2)
            out = 0.5 * (inx + iny) + 1.0
            acc += out.sum()
            if down_x != MPI.PROC_NULL:
                grid.Send(out, down_x, 1)
            if down_y != MPI.PROC_NULL:
                grid.Send(out, down_y, 2)
total = world.allreduce(acc)
if world.Get_rank() == 0:
    print(f"sweep: flux {total:.6e}")
