"""Pencil-decomposed 3-D FFT: transposes are Alltoall on the rows and columns
of a 2-D process grid (Cartesian Sub communicators)."""
import argparse

import numpy as np
from mpi4py import MPI

p = argparse.ArgumentParser()
p.add_argument("--n", type=int, default=32, help="global cube edge")
p.add_argument("--iters", type=int, default=5)
a = p.parse_args()
world = MPI.COMM_WORLD
dims = MPI.Compute_dims(world.Get_size(), 2)
grid = world.Create_cart(dims, periods=[False, False])
rows, cols = grid.Sub([False, True]), grid.Sub([True, False])
chunk = max(1, a.n // max(dims)) ** 2 * a.n  # local elements (rounded)
x = np.random.default_rng(world.Get_rank()).random(chunk * cols.Get_size() * rows.Get_size()) + 0j
for _ in range(a.iters):
    x = np.fft.fft(x.reshape(-1, 8), axis=1).ravel()
    y = np.empty_like(x)
    rows.Alltoall(x, y)      # transpose within the row
    y = np.fft.fft(y.reshape(-1, 8), axis=1).ravel()
    cols.Alltoall(y, x)      # transpose within the column
energy = world.allreduce(float(np.vdot(x, x).real))
if world.Get_rank() == 0:
    print(f"fft_transpose: grid {dims} energy {energy:.6e}")
