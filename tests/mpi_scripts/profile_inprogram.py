"""rankmap.profile.start() from inside a program: warm up, read the row, phases."""
import sys

import numpy as np
from mpi4py import MPI

import rankmap.profile as rp

try:
    rp.recorded_row()
    raise SystemExit("recorded_row must fail before start()")
except RuntimeError as exc:
    assert "not active" in str(exc)
comm = rp.start(output=sys.argv[1], collectives="tree", flush_interval=0.05)
me, n = comm.Get_rank(), comm.Get_size()
for _ in range(3):
    comm.Sendrecv(np.zeros(10), (me + 1) % n, 0, np.zeros(10), (me - 1) % n, 0)
dst, nbytes, nmsgs = rp.recorded_row()
assert list(dst) == [(me + 1) % n] and list(nbytes) == [240] and list(nmsgs) == [3], (dst, nbytes, nmsgs)
comm.Bcast(np.zeros(4), root=0)  # tree: rank 0 -> 1, 2 on 4 ranks... binomial children
cdst, cbytes, _ = rp.recorded_row("collective")
kids = {0: [1, 2], 1: [], 2: [3], 3: []}[me] if n == 4 else None
assert kids is None or list(cdst) == kids, (me, cdst)
assert all(b == 32 for b in cbytes)
print(f"rank {me}: ok")
