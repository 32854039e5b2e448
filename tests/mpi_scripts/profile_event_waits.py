"""Every way a rank learns that a request completed, on 2 ranks; each rank
prints (``rank R: {json}``) the completion orders the calls reported and
the pickled size, from which tests/test_profile_events.py spells out its
log: Waitany, Testsome, Testall, Test, pickled test() of an ANY_SOURCE
irecv, Testany of an ANY_SOURCE Irecv, Waitsome with the program's own
statuses, a buffered send."""

import json
import pickle

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
me = comm.Get_rank()
other = 1 - me
seen = {}


def buf(nbytes):
    return np.zeros(nbytes, dtype=np.uint8)


r1, r2 = comm.Irecv(buf(8), other, 1), comm.Irecv(buf(16), other, 2)
comm.Send(buf(8), other, 1)
comm.Send(buf(16), other, 2)
seen["waitany"] = [MPI.Request.Waitany([r1, r2]), MPI.Request.Waitany([r1, r2])]

r1, r2 = comm.Irecv(buf(8), other, 3), comm.Irecv(buf(8), other, 4)
comm.Send(buf(8), other, 3)
comm.Send(buf(8), other, 4)
seen["testsome"] = []
while len(seen["testsome"]) < 2:
    seen["testsome"] += sorted(MPI.Request.Testsome([r1, r2]) or [])

r1, r2 = comm.Isend(buf(8), other, 5), comm.Irecv(buf(8), other, 5)
while not MPI.Request.Testall([r1, r2]):
    pass

r = comm.Irecv(buf(8), other, 6)
comm.Send(buf(8), other, 6)
while not r.Test():
    pass

r = comm.irecv(source=MPI.ANY_SOURCE, tag=7)
comm.send([me] * 5, other, 7)
flag = False
while not flag:
    flag, got = r.test()
assert got == [other] * 5

r = comm.Irecv(buf(40), MPI.ANY_SOURCE, 8)
comm.Send(buf(24), other, 8)
while not MPI.Request.Testany([r])[1]:
    pass

r1, r2 = comm.Irecv(buf(8), MPI.ANY_SOURCE, 9), comm.Irecv(buf(8), other, 10)
comm.Send(buf(8), other, 10)
comm.Send(buf(8), other, 9)
statuses, seen["waitsome"] = [MPI.Status(), MPI.Status()], []
while len(seen["waitsome"]) < 2:
    seen["waitsome"] += sorted(MPI.Request.Waitsome([r1, r2], statuses) or [])

MPI.Attach_buffer(bytearray(1 << 16))
comm.Bsend(buf(8), other, 11)
comm.Recv(buf(8), other, 11)
MPI.Detach_buffer()

seen["pickled"] = len(pickle.dumps([other] * 5, MPI.pickle.PROTOCOL))
print(f"rank {me}: {json.dumps(seen)}\n", end="", flush=True)  # one write: the ranks' output interleaves
