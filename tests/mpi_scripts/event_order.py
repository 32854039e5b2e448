"""The mpi4py twin of tests/mpi_programs/event_order.c and .f90, call for
call (same peers, tags, sizes and order): its event log, recorded by the
mpi4py profiler, is what the compiled program's must equal on every rank.
Argument ``isendrecv``: with MPI-4's Isendrecv, as the C program has it
where its MPI does."""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
me, n = comm.Get_rank(), comm.Get_size()
assert n % 2 == 0, "an even number of ranks"
right, left, across = (me + 1) % n, (me - 1) % n, (me + n // 2) % n
inbuf, outbuf = np.zeros(4096, dtype=np.uint8), np.zeros(4096, dtype=np.uint8)


def buf(nbytes, at=0, into=inbuf):
    return into[at:at + nbytes]


def out(nbytes, at=0):
    return buf(nbytes, at, outbuf)


for _ in range(3):  # ring pipeline
    r = [comm.Irecv(buf(80), left, 1), comm.Isend(out(80), right, 1)]
    MPI.Request.Waitall(r)
if me > 0:  # chain
    comm.Recv(buf(24), me - 1, 2)
if me < n - 1:
    comm.Send(out(24), me + 1, 2)

dims = MPI.Compute_dims(n, 2)  # halo
grid = comm.Create_cart(dims, periods=[False, True], reorder=False)
r = []
for d in range(2):
    lo, hi = grid.Shift(d, 1)
    r += [grid.Irecv(buf(48), lo, 3), grid.Irecv(buf(48, 48), hi, 3),
          grid.Isend(out(48), hi, 3), grid.Isend(out(48, 48), lo, 3)]
MPI.Request.Waitall(r)

comm.Sendrecv(out(16), left, 4, buf(16), right, 4)

r0 = comm.Irecv(buf(40), MPI.ANY_SOURCE, 5)  # only `across` sends tag 5
comm.Send(out(32), across, 5)
r0.Wait()
if me % 2 == 0:
    comm.Recv(buf(8), MPI.ANY_SOURCE, 6)
else:
    comm.Send(out(8), me - 1, 6)

p = [comm.Send_init(out(8), right, 7), comm.Recv_init(buf(8), left, 7)]  # persistent
for _ in range(2):
    MPI.Prequest.Startall([p[1], p[0]])
    MPI.Request.Waitall(p)
p[0].Free()
p[1].Free()

r = [comm.Irecv(buf(16), right, 9), comm.Irecv(buf(24, 16), left, 8)]  # Waitany, Waitsome
comm.Send(out(8), right, 8)
MPI.Request.Waitany(r)
comm.Send(out(1), right, 10)
comm.Recv(buf(1), left, 10)
comm.Send(out(16), left, 9)
MPI.Request.Waitany(r)
r = [comm.Irecv(buf(16), right, 12), comm.Irecv(buf(24, 16), MPI.ANY_SOURCE, 11)]
statuses = [MPI.Status(), MPI.Status()]
comm.Send(out(8), right, 11)
MPI.Request.Waitsome(r, statuses)
comm.Send(out(1), right, 13)
comm.Recv(buf(1), left, 13)
comm.Send(out(16), left, 12)
MPI.Request.Waitsome(r, statuses)

r0 = comm.Irecv(buf(8), left, 14)  # Test, Testall, Testany
comm.Send(out(8), right, 14)
while not r0.Test():
    pass
r = [comm.Isend(out(8), right, 15), comm.Irecv(buf(8), left, 15)]
while not MPI.Request.Testall(r):
    pass
r = [comm.Irecv(buf(40), MPI.ANY_SOURCE, 16)]
comm.Send(out(24), across, 16)
while not MPI.Request.Testany(r)[1]:
    pass

MPI.Attach_buffer(bytearray(1 << 16))  # buffered: completes locally
comm.Bsend(out(8), right, 17)
comm.Recv(buf(8), left, 17)
MPI.Detach_buffer()
if "isendrecv" in sys.argv[1:]:
    comm.Isendrecv(out(16), right, 18, buf(16), left, 18).Wait()

MPI.Pcontrol(0)  # paused: nothing logged
comm.Sendrecv(out(1000), right, 19, buf(1000), left, 19)
comm.Barrier()
MPI.Pcontrol(1)

v, w = np.arange(1.0, 9.0), np.zeros(64)
sub = comm.Split(me % 2, me)
sub.Allreduce(v[:1], w[:1])
sub.Barrier()
comm.Bcast(out(64), root=0)
comm.Reduce(v[:2], w[:2], root=1)
comm.Allgather(v[:1], w[:n])
comm.Scatter(w[:n], v[:1], root=0)
comm.Gather(v[:1], w[:n], root=0)
counts = [(me + q) % 3 for q in range(n)]
displs = [3 * q for q in range(n)]
a, b = np.zeros(3 * n), np.zeros(3 * n)
comm.Alltoallv([a, (counts, displs), MPI.DOUBLE], [b, (counts, displs), MPI.DOUBLE])
grid.Neighbor_alltoall(v[:4], w[:4])
inter = sub.Create_intercomm(0, comm, 0 if me % 2 else 1, 20)
root = 0 if me % 2 else (MPI.ROOT if sub.Get_rank() == 0 else MPI.PROC_NULL)
inter.Bcast(out(24), root=root)
comm.Iallreduce(v[:4], w[:4]).Wait()

inter.Free()
sub.Free()
grid.Free()
print(f"event_order: rank {me}: ok\n", end="", flush=True)
