"""A program whose event log is known exactly on 4 ranks (see
tests/test_profile_events.py, which spells out every rank's log): ring
Isend/Irecv/Waitall, blocking Send/Recv, Sendrecv, ANY_SOURCE receives
(non-blocking, shorter than the buffer, and blocking), pickled isend/irecv
with waitall, persistent Start, Isendrecv, a paused stretch, and an
allreduce, a barrier and a bcast on a split communicator and COMM_WORLD."""

import pickle

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
me, n = comm.Get_rank(), comm.Get_size()
assert n == 4
right, left, across = (me + 1) % n, (me - 1) % n, (me + 2) % n


def buf(nbytes):
    return np.zeros(nbytes, dtype=np.uint8)


r = comm.Irecv(buf(80), left, 1)
s = comm.Isend(buf(80), right, 1)
MPI.Request.Waitall([r, s])

if me % 2 == 0:
    comm.Send(buf(24), me + 1, 2)
else:
    comm.Recv(buf(24), me - 1, 2)

comm.Sendrecv(buf(16), left, 3, buf(16), right, 3)

r = comm.Irecv(buf(40), MPI.ANY_SOURCE, 4)  # only `across` sends tag 4 here, 32 of 40 bytes
comm.Send(buf(32), across, 4)
r.Wait()

if me % 2 == 0:
    comm.Recv(buf(8), MPI.ANY_SOURCE, 5)
else:
    comm.Send(buf(8), me - 1, 5)

obj = {"rank": me, "payload": list(range(20))}
sr = comm.isend(obj, right, 6)
rr = comm.irecv(source=left, tag=6)
got, _ = MPI.Request.waitall([rr, sr])
assert got["rank"] == left

p = comm.Send_init(buf(8), right, 7)
q = comm.Recv_init(buf(8), left, 7)
MPI.Prequest.Startall([q, p])
MPI.Request.Waitall([p, q])
p.Free()
q.Free()

if hasattr(comm, "Isendrecv"):
    comm.Isendrecv(buf(16), right, 8, buf(16), left, 8).Wait()

MPI.Pcontrol(0)
comm.Sendrecv(buf(1000), right, 9, buf(1000), left, 9)
comm.Barrier()
MPI.Pcontrol(1)

sub = comm.Split(me % 2, me)
sub.Allreduce(np.ones(1), np.zeros(1))
sub.Barrier()
comm.Bcast(buf(64), root=0)

if me == 0:  # one write per line: the ranks' output interleaves
    size = len(pickle.dumps({"rank": 0, "payload": list(range(20))}, MPI.pickle.PROTOCOL))
    print(f"pickled {size} isendrecv {hasattr(comm, 'Isendrecv')}\n", end="", flush=True)
print(f"rank {me}: ok\n", end="", flush=True)
