"""Conjugate gradient on (graph Laplacian + I) of a METIS graph, rows split in
contiguous blocks: each SpMV exchanges the needed vector entries with the
owning ranks (Alltoallv), each dot product is an Allreduce."""
import argparse
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

p = argparse.ArgumentParser()
p.add_argument("--graph", default=str(Path(__file__).parent / "data" / "3elt.graph"))
p.add_argument("--iters", type=int, default=30)
a = p.parse_args()
comm = MPI.COMM_WORLD
me, P = comm.Get_rank(), comm.Get_size()

lines = [ln.split() for ln in Path(a.graph).read_text().splitlines() if not ln.startswith("%")]
n = int(lines[0][0])
rows = [np.array(ln, dtype=np.int64) - 1 for ln in lines[1:n + 1]]
bounds = np.linspace(0, n, P + 1).astype(np.int64)
lo, hi = bounds[me], bounds[me + 1]
owner = np.searchsorted(bounds, np.arange(n), side="right") - 1
src = np.repeat(np.arange(lo, hi), [len(rows[i]) for i in range(lo, hi)])
dst = np.concatenate([rows[i] for i in range(lo, hi)]) if hi > lo else np.zeros(0, np.int64)
deg = np.bincount(src - lo, minlength=hi - lo)
A = sp.csr_array((np.full(dst.size, -1.0), (src - lo, dst)), shape=(hi - lo, n)) \
    + sp.csr_array((deg + 1.0, (np.arange(hi - lo), np.arange(lo, hi))), shape=(hi - lo, n))
need = np.unique(dst[owner[dst] != me])           # remote entries this rank reads
need_by = [need[owner[need] == q] for q in range(P)]
counts = np.array([x.size for x in need_by], dtype=np.int64)
their_counts = np.empty(P, dtype=np.int64)
comm.Alltoall(counts, their_counts)
wanted = np.empty(their_counts.sum(), dtype=np.int64)   # entries others read from me
comm.Alltoallv([np.concatenate(need_by) if need.size else np.zeros(0, np.int64), counts],
               [wanted, their_counts])


def spmv(x_local):
    full = np.zeros(n)
    full[lo:hi] = x_local
    got = np.empty(need.size)
    comm.Alltoallv([x_local[wanted - lo], their_counts], [got, counts])
    full[need] = got
    return A @ full


b = np.sin(np.arange(lo, hi) * 0.37)  # not an eigenvector of L + I
x = np.zeros(hi - lo)
r = b - spmv(x)
d = r.copy()
rr = comm.allreduce(float(r @ r))
for _ in range(a.iters):
    if rr < 1e-24:  # converged
        break
    Ad = spmv(d)
    alpha = rr / comm.allreduce(float(d @ Ad))
    x += alpha * d
    r -= alpha * Ad
    rr_new = comm.allreduce(float(r @ r))
    d = r + (rr_new / rr) * d
    rr = rr_new
if me == 0:
    print(f"cg: n={n} residual {np.sqrt(rr):.3e}")
