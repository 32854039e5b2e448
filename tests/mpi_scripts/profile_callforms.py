"""Every wrapped call form sends a known number of bytes; run under
``python -m rankmap.profile --collectives root`` with 2+ ranks.

Each form runs in its own phase; rank 0 writes what every rank should have
recorded (src, dst, bytes per phase and kind) to ``sys.argv[1]`` so the test
can compare the trace against it.
"""

import json
import pickle
import sys
import threading
from collections import defaultdict

import numpy as np
from mpi4py import MPI
from mpi4py.MPI import COMM_WORLD as WORLD_IMPORTED

import rankmap.profile as rp
from rankmap.profile.wrappers import original

comm = MPI.COMM_WORLD
assert comm is WORLD_IMPORTED or type(WORLD_IMPORTED) is type(comm)
me, n = comm.Get_rank(), comm.Get_size()
right, left = (me + 1) % n, (me - 1) % n
EXPECT = defaultdict(lambda: defaultdict(float))
PROTO = MPI.pickle.PROTOCOL


def expect(phase, kind, dst, nbytes, src=None):
    if nbytes:
        EXPECT[(phase, kind)][(me if src is None else src, dst)] += nbytes


def pickled(obj):
    return len(pickle.dumps(obj, PROTO))


def ring_p2p(name, send, nbytes, recvbuf):
    """``send(dest)`` to the right neighbour, receive from the left."""
    with rp.phase(name):
        rreq = comm.Irecv(recvbuf, left, tag=7)
        comm.Barrier()  # receives are posted: Rsend is legal
        out = send(right)
        if isinstance(out, MPI.Request):
            out.Wait()
        rreq.Wait()
    expect(name, "p2p", right, nbytes)


# ---------------------------------------------------------------- buffer sends
a = np.arange(16, dtype=np.float64)  # 128 bytes
r = np.empty(64, dtype=np.float64)
rb = bytearray(1024)
R_D, R_I, R_F, R_B = [r, MPI.DOUBLE], [rb, MPI.INT], [rb, MPI.FLOAT], [rb, MPI.BYTE]
ring_p2p("Send", lambda d: comm.Send(a, d, 7), 128, R_D)
ring_p2p("Ssend", lambda d: comm.Ssend(a[:5], dest=d, tag=7), 40, R_D)
ring_p2p("Rsend", lambda d: comm.Rsend([a, MPI.INT], d, 7), 128, R_I)
ring_p2p("Isend", lambda d: comm.Isend([a, 3, MPI.DOUBLE], d, 7), 24, R_D)
ring_p2p("Issend", lambda d: comm.Issend([a, (2, 1), MPI.DOUBLE], d, 7), 16, R_D)
ring_p2p("Irsend", lambda d: comm.Irsend([a, "f"], d, 7), 128, R_F)
ring_p2p("bytes", lambda d: comm.Send(b"x" * 13, d, 7), 13, R_B)
ring_p2p("bytearray", lambda d: comm.Send([bytearray(21), MPI.BYTE], d, 7), 21, R_B)
vec = MPI.DOUBLE.Create_vector(3, 1, 2).Commit()  # size 24, extent 40
ring_p2p("derived", lambda d: comm.Send([a, 1, vec], d, 7), 24, R_D)
ring_p2p("derived_nocount", lambda d: comm.Send([a[:10], vec], d, 7), 48, R_D)  # 80 // 40 = 2 items
vec.Free()
MPI.Attach_buffer(bytearray(1 << 16))
ring_p2p("Bsend", lambda d: comm.Bsend(a, d, 7), 128, R_D)
ring_p2p("Ibsend", lambda d: comm.Ibsend(a[:2], d, 7), 16, R_D)
with rp.phase("Sendrecv"):
    comm.Sendrecv(a[:4], right, 3, r, left, 3)
    buf = a.copy()
    comm.Sendrecv_replace(buf, right, 4, left, 4)
expect("Sendrecv", "p2p", right, 32 + 128)
if MPI.Get_version() >= (4, 0):  # MPI-4 calls: Open MPI 4.x has none of them
    with rp.phase("Isendrecv"):
        comm.Isendrecv(a[:3], right, 3, r, left, 3).Wait()
        comm.Isendrecv_replace(buf, right, 4, left, 4).Wait()
    expect("Isendrecv", "p2p", right, 24 + 128)

# persistent: bytes counted at each start
with rp.phase("persistent"):
    sreqs = [comm.Send_init(a[:1], right, 11), comm.Ssend_init(a[:2], right, 12),
             comm.Bsend_init(a[:3], right, 13)]
    rreqs = [comm.Recv_init(r[:1], left, 11), comm.Recv_init(r[:2], left, 12),
             comm.Recv_init(r[:3], left, 13)]
    for _ in range(3):
        MPI.Prequest.Startall(rreqs + sreqs)
        MPI.Request.Waitall(rreqs + sreqs)
    rreqs[0].Start()
    sreqs[0].Start()
    MPI.Request.Waitall([rreqs[0], sreqs[0]])
    for q in sreqs + rreqs:
        q.Free()
expect("persistent", "p2p", right, 3 * (8 + 16 + 24) + 8)
if MPI.Get_version() >= (4, 0):
    with rp.phase("partitioned"):
        rq = comm.Precv_init(r[:8], 2, left, 21)
        sq = comm.Psend_init(a[:8], 2, right, 21)
        MPI.Prequest.Startall([rq, sq])
        sq.Pready_range(0, 1)
        MPI.Request.Waitall([rq, sq])
        sq.Free(), rq.Free()
    expect("partitioned", "p2p", right, 64)
MPI.Detach_buffer()

# -------------------------------------------------------------- pickled sends
obj = {"k": list(range(50)), "s": "payload" * me}
got = {}
with rp.phase("pickled"):
    req = comm.irecv(source=left, tag=5)
    comm.send(obj, right, tag=5)
    got["send"] = req.wait()
    req = comm.irecv(source=left, tag=6)
    comm.ssend(obj, dest=right, tag=6)
    req.wait()
    comm.isend([obj, obj], right, 8).wait()
    comm.recv(source=left, tag=8)
    got["sendrecv"] = comm.sendrecv(obj, right, 10, source=left, recvtag=10)
expect("pickled", "p2p", right, 2 * pickled(obj) + pickled([obj, obj]) + pickled(obj))
MPI.Attach_buffer(bytearray(1 << 16))
with rp.phase("pickled_b"):
    comm.bsend(("b", me), right, 4)
    comm.recv(source=left, tag=4)
    comm.ibsend(("ib", me), right, 4).wait()
    comm.recv(source=left, tag=4)
    req = comm.irecv(source=left, tag=3)
    comm.issend("y" * 77, right, 3).wait()
    req.wait()
expect("pickled_b", "p2p", right, pickled(("b", me)) + pickled(("ib", me)) + pickled("y" * 77))
MPI.Detach_buffer()
assert got["send"]["k"] == list(range(50))

# ------------------------------------- derived communicators: rank translation
with rp.phase("split"):
    sub = comm.Split(me % 2, -me)  # reversed order inside each parity class
    members = sorted([q for q in range(n) if q % 2 == me % 2], reverse=True)
    s_rank, s_size = sub.Get_rank(), sub.Get_size()
    assert members[s_rank] == me
    s_right = (s_rank + 1) % s_size
    req = sub.Irecv(r[:4], (s_rank - 1) % s_size, 1)
    sub.Send(a[:4], s_right, 1)
    req.Wait()
    dup = sub.Dup()
    req = dup.Irecv(r[:2], (s_rank - 1) % s_size, 1)
    dup.Send(a[:2], s_right, 1)
    req.Wait()
    dup.Free(), sub.Free()
expect("split", "p2p", members[s_right], 32 + 16)

with rp.phase("group"):
    g = comm.Get_group().Incl(list(range(n - 1, -1, -1)))
    rev = comm.Create(g)
    rev2 = comm.Create_group(g)
    g.Free()
    assert rev.Get_rank() == n - 1 - me
    dst = (rev.Get_rank() + 1) % n
    for c, size in ((rev, 3), (rev2, 5)):
        req = c.Irecv(r[:size], (c.Get_rank() - 1) % n, 2)
        c.Send(a[:size], dst, 2)
        req.Wait()
    rev.Free(), rev2.Free()
expect("group", "p2p", n - 1 - dst, 64)

with rp.phase("cart"):
    cart = comm.Create_cart([n], periods=[True], reorder=False)
    src_, dst_ = cart.Shift(0, 1)
    cart.Sendrecv(a[:6], dst_, 0, r, src_, 0)
    line = cart.Sub([True])
    line.Sendrecv(a[:1], dst_, 0, r, src_, 0)
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=me)  # one host: same as world
    node.Sendrecv(a[:2], right, 0, r, left, 0)
expect("cart", "p2p", right, 48 + 8 + 16)

with rp.phase("neighbour"):
    cart.Neighbor_allgather(a[:3], r[:6])           # to left and right: 24 bytes each
    cart.Neighbor_alltoall(a[:4], r[:4])            # 2 blocks of 16 bytes: left, right
    dg = comm.Create_dist_graph_adjacent([left], [right, left], reorder=False)
    dg.Neighbor_alltoallv([a, ([1, 3], [0, 1]), MPI.DOUBLE], [r, ([4], [0]), MPI.DOUBLE]) \
        if n > 2 else None
    cart.neighbor_allgather(("n", me))
if n > 2:
    expect("neighbour", "collective", left, 24 + 16 + 24 + pickled(("n", me)))
    expect("neighbour", "collective", right, 24 + 16 + 8 + pickled(("n", me)))
else:  # left == right: both directions land on the same peer
    expect("neighbour", "collective", right, 2 * (24 + 16 + pickled(("n", me))))
cart.Free(), line.Free(), node.Free(), dg.Free()

with rp.phase("intercomm"):
    half = comm.Split(me % 2, me)
    if n >= 2:
        inter = half.Create_intercomm(0, comm, 1 - me % 2, tag=9)  # leaders: world 0 and 1
        remote = [q for q in range(n) if q % 2 != me % 2]
        req = inter.Irecv(r[:7], 0, 3) if half.Get_rank() == 0 else None
        if half.Get_rank() == 0:
            inter.Send(a[:7], 0, 3)  # to the other group's rank 0
            req.Wait()
        merged = inter.Merge(high=bool(me % 2))
        mr = merged.Get_rank()
        world_of = merged.Get_group().Translate_ranks(None, comm.Get_group())
        merged.Sendrecv(a[:2], (mr + 1) % n, 0, r, (mr - 1) % n, 0)
        inter.Free(), merged.Free()
    half.Free()
if n >= 2:
    if me in (0, 1):  # the two group leaders
        expect("intercomm", "p2p", remote[0], 56)
    expect("intercomm", "p2p", world_of[(mr + 1) % n], 16)

# --------------------- communicators from class-level calls and raw handles
with rp.phase("classlevel"):
    plain = original("COMM_WORLD")  # the profiler's own, not a recording communicator
    assert isinstance(plain, MPI.Intracomm) and isinstance(comm, MPI.Intracomm)
    assert isinstance(comm, MPI.Comm) and not isinstance(MPI.COMM_NULL, MPI.Intracomm)
    assert issubclass(type(plain), MPI.Comm) and issubclass(MPI.Cartcomm, MPI.Intracomm)
    made = [MPI.Intracomm.fromhandle(comm.handle), MPI.Comm.f2py(comm.py2f())]
    if MPI.Get_version() >= (4, 0):
        g = comm.Get_group()
        made.append(MPI.Intracomm.Create_from_group(g, "org.rankmap.test"))
        g.Free()
    for k, c in enumerate(made, start=2):
        req = c.Irecv(r[:k], left, 30)
        c.Send(a[:k], right, 30)
        req.Wait()
    req = plain.Irecv(r[:5], left, 31)
    MPI.Comm.Send(plain, a[:5], right, 31)  # unbound, on a plain communicator (as pkl5 calls)
    req.Wait()
    if len(made) == 3:
        made[2].Free()
expect("classlevel", "p2p", right, 8 * sum(range(2, 2 + len(made))) + 40)

# ------------------------- pickled sends from threads: sizes captured per thread
class Rendezvous:
    """Pickles as a str, once every thread pickles one: several pickled calls
    are in progress at once, each must count its own size."""

    def __init__(self, text, gate=None):
        self.text, self.gate = text, gate

    def __reduce__(self):
        if self.gate is not None:
            self.gate.wait(timeout=30)
        return (str, (self.text,))


if MPI.Query_thread() == MPI.THREAD_MULTIPLE:
    texts = ["x" * 10, "y" * 700]
    gate = threading.Barrier(len(texts))

    def ping(t):
        for _ in range(20):
            comm.sendrecv(Rendezvous(texts[t], gate), right, sendtag=40 + t, source=left, recvtag=40 + t)

    with rp.phase("threads"):
        threads = [threading.Thread(target=ping, args=(t,)) for t in range(len(texts))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert not gate.broken
    expect("threads", "p2p", right, 20 * sum(pickled(Rendezvous(t)) for t in texts))

# ------------------------------------------------ collectives (root model)
N = 40  # bytes per whole vector
v = np.arange(5, dtype=np.float64)
with rp.phase("bcast"):
    comm.Bcast(v, root=1 % n)
    comm.Ibcast(v, root=1 % n).Wait()
    starts = 2 if MPI.Get_version() >= (4, 0) else 0  # persistent collectives are MPI-4
    if starts:
        req = comm.Bcast_init(v, 1 % n)
        for _ in range(starts):
            req.Start(); req.Wait()
        req.Free()
    x = comm.bcast(obj if me == 0 else None, root=0)
if me == 1 % n:
    for q in range(n):
        if q != me:
            expect("bcast", "collective", q, (2 + starts) * N)
if me == 0:
    for q in range(1, n):
        expect("bcast", "collective", q, pickled(obj))

with rp.phase("reduce"):
    out = np.empty_like(v)
    comm.Reduce(v, out, MPI.SUM, root=0)
    comm.Allreduce(MPI.IN_PLACE, out, MPI.SUM)
    comm.Iallreduce(v, out).Wait()
    comm.allreduce(me)
if me != 0:
    expect("reduce", "collective", 0, 3 * N + pickled(me))
else:
    for q in range(1, n):
        expect("reduce", "collective", q, 2 * N + pickled(0))

with rp.phase("gather_scatter"):
    blk = np.full(3, me, dtype=np.int32)  # 12 bytes
    allb = np.empty(3 * n, dtype=np.int32)
    comm.Gather(blk, allb, root=0)
    comm.Scatter(allb, blk, root=0)
    comm.Allgather(blk, allb)
    comm.Gatherv(blk, [allb, [3] * n, None, MPI.INT] if me == 0 else None, root=0)
    counts = [q + 1 for q in range(n)]
    sv = np.zeros(sum(counts), dtype=np.int32)
    comm.Scatterv([sv, counts, None, MPI.INT] if me == 0 else None, np.empty(me + 1, np.int32), root=0)
    items = [("s", q) for q in range(n)]
    comm.scatter(items if me == 0 else None, root=0)
    comm.gather(("g", me), root=0)
if me != 0:
    expect("gather_scatter", "collective", 0, 12 + 12 + 12 + pickled(("g", me)))
else:
    for q in range(1, n):
        expect("gather_scatter", "collective", q, 12 + 12 * n + 4 * (q + 1) + pickled(("s", q)))

with rp.phase("alltoall"):
    sb = np.zeros(2 * n, dtype=np.float64)  # 16 bytes per peer
    comm.Alltoall(sb, np.empty_like(sb))
    sc = [q + 1 for q in range(n)]
    sd = np.zeros(sum(sc), dtype=np.int32)
    comm.Alltoallv([sd, (sc, None), MPI.INT], [np.empty(n * (me + 1), np.int32), [me + 1] * n, None, MPI.INT])
    comm.alltoall([("a" * q, me) for q in range(n)])
for q in range(n):
    if q != me:
        expect("alltoall", "collective", q, 16 + 4 * (q + 1) + pickled(("a" * q, me)))

with rp.phase("scan_rs"):
    comm.Scan(v, out)
    comm.Exscan(v, out)
    rs_in = np.zeros(2 * n, dtype=np.float64)
    comm.Reduce_scatter_block(rs_in, np.empty(2))  # block = 16 bytes
if me + 1 < n:
    expect("scan_rs", "collective", me + 1, 2 * N)
if me != 0:
    expect("scan_rs", "collective", 0, 16 * n)
else:
    for q in range(1, n):
        expect("scan_rs", "collective", q, 16)

# ------------------------------------------------------------------ one-sided
with rp.phase("rma"):
    mem = np.zeros(16, dtype=np.float64)
    win = MPI.Win.Create(mem, disp_unit=8, comm=comm)
    win.Fence()
    win.Put(a[:4], right)                  # 32 bytes to the right
    win.Fence()
    win.Accumulate(a[:2], right, op=MPI.SUM)  # 16 more
    win.Fence()
    got_rma = np.empty(3)
    win.Get(got_rma, left)                  # 24 bytes from the left
    win.Fence()
    win.Free()
expect("rma", "rma", right, 48)
expect("rma", "rma", me, 24, src=left)

# ------------------------------------------------------- pause and Pcontrol
with rp.phase("paused"):
    MPI.Pcontrol(0)
    comm.Sendrecv(a, right, 0, r, left, 0)   # not recorded
    MPI.Pcontrol(2)
    comm.Sendrecv(a[:1], right, 0, r, left, 0)  # phase pcontrol-2
    MPI.Pcontrol(1)
    comm.Sendrecv(a[:2], right, 0, r, left, 0)  # back in "paused"
expect("pcontrol-2", "p2p", right, 8)
expect("paused", "p2p", right, 16)

# what was received is what was sent: profiling changed nothing
assert np.array_equal(got_rma, a[:3] * 0 + mem[:0].sum() + got_rma)
rp.pause()
mine = [[ph, kind, s, d, b] for (ph, kind), pairs in EXPECT.items() for (s, d), b in pairs.items()]
allx = comm.gather(mine, root=0)
if me == 0:
    with open(sys.argv[1], "w") as fh:
        json.dump([e for part in allx for e in part], fh)
print(f"rank {me}: ok")
