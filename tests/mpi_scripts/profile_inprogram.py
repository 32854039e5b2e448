"""rankmap.profile.start() from inside a program: warm up, read the row, phases."""
import sys

import numpy as np
from mpi4py import MPI
from mpi4py.util import pkl5  # its classes are made before start(): plain ones

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
with rp.phase("pkl5"):  # pkl5 sends with MPI.Comm.Send(comm, ...): recorded, exact wire bytes
    before = rp.recorded_row()[1].sum()
    payload = np.arange(100, dtype=np.float64)
    pc = pkl5.Intracomm(comm)
    pc.send(payload, (me + 1) % n, tag=3)
    assert np.array_equal(pc.recv(source=(me - 1) % n, tag=3), payload)
data, bufs = pkl5.pickle.dumps_oob(payload)
wire = 8 * (1 + len(bufs)) + len(data) + sum(memoryview(b).nbytes for b in bufs)  # header, pickle, buffers
assert rp.recorded_row()[1].sum() - before == wire, (rp.recorded_row(), before, wire)
print(f"rank {me}: ok")
