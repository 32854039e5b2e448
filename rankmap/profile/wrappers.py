"""Recording subclasses of mpi4py's communicator, request and window types.

mpi4py's types cannot be patched, but they can be subclassed, and a subclass
instance built from a communicator (``Intracomm(comm)``) shares its handle.
``install`` replaces ``MPI.COMM_WORLD`` and ``MPI.COMM_SELF`` in the
``mpi4py.MPI`` module by recording subclasses before the program runs, so
``MPI.COMM_WORLD`` and ``from mpi4py.MPI import COMM_WORLD`` both see them;
every method that creates a communicator (Dup, Split, Create_cart, Sub,
Merge, Create_intercomm, ...) returns a recording subclass again, so the whole
family derived from COMM_WORLD records, wherever it is passed.  ``MPI.Win``
and ``MPI.Prequest`` are replaced likewise, so windows created with
``MPI.Win.Create(..., comm=...)`` record one-sided traffic and
``MPI.Prequest.Startall`` counts persistent sends when they start.
A communicator made from a raw handle (``Comm.f2py``, ``fromhandle``) is not
derived from a recording one: pass it through ``rankmap.profile.wrap``.

Every method records after the MPI call returned (a failing call records
nothing) into ``recorder.active``; destinations are translated to COMM_WORLD
ranks through a per-communicator table built once.
"""

from __future__ import annotations

import pickle as _pickle

from mpi4py import MPI

from .buffers import buffer_bytes, raw_nbytes, vector_bytes
from .collectives import plan as _model_plan
from .recorder import Recorder

_REC: Recorder | None = None  # the recorder every wrapper adds to
_EXTERNAL = 0                 # row index for peers outside COMM_WORLD (= world size)
_WORLD_GROUP = None
_ORIGINAL = {}                # mpi4py.MPI attributes replaced by install()

_Comm = MPI.Comm
_BasePrequest = MPI.Prequest  # install() replaces the module attribute
_IN_PLACE = MPI.IN_PLACE
_ROOT = MPI.ROOT


# ------------------------------------------------------------ world tables
def _world_table(group) -> list[int]:
    ranks = group.Translate_ranks(None, _WORLD_GROUP)
    return [r if r >= 0 else _EXTERNAL for r in ranks]  # UNDEFINED is negative


class _Recording:
    """Mixin for every recording communicator class: lazily built tables.

    ``_rmw``: world rank of each peer addressable by rank (the remote group of
    an intercommunicator); ``_plans``: cached collective plans per (op, root).
    """

    def __getattr__(self, name):
        if name == "_rmw":
            group = self.Get_remote_group() if self.Is_inter() else self.Get_group()
            value = _world_table(group)
            group.Free()
        elif name == "_plans":
            value = {}
        elif name == "_nbrs":
            value = _out_neighbours(self)
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self.__dict__[name] = value
        return value


# ----------------------------------------------------------- point-to-point
def _p2p(name: str):
    base = getattr(_Comm, name)

    def method(self, buf, dest, *args, **kwargs):
        result = base(self, buf, dest, *args, **kwargs)
        if dest >= 0:
            c = _REC.active
            w = self._rmw[dest]
            c.pb[w] += buffer_bytes(buf)
            c.pm[w] += 1
        return result

    return _named(method, base)


def _p2p_pickled(name: str):
    base = getattr(_Comm, name)

    def method(self, obj, dest, *args, **kwargs):
        dumps, _ = _CAPTURE.arm()
        try:
            result = base(self, obj, dest, *args, **kwargs)
        finally:
            _CAPTURE.disarm()
        if dest >= 0:
            c = _REC.active
            w = self._rmw[dest]
            c.pb[w] += dumps[0] if dumps else 0
            c.pm[w] += 1
        return result

    return _named(method, base)


def _p2p_persistent(name: str, dest_pos: int = 1):
    """Send_init & co. (dest second) and Psend_init (buf, partitions, dest):
    the whole buffer goes to ``dest`` at each Start."""
    base = getattr(_Comm, name)

    def method(self, *args, **kwargs):
        req = base(self, *args, **kwargs)
        dest = _arg(args, kwargs, dest_pos, "dest")
        nbytes = buffer_bytes(_arg(args, kwargs, 0, "buf"))
        sends = [(self._rmw[dest], nbytes)] if dest >= 0 else []
        return _persistent(req, "pb", "pm", sends)

    return _named(method, base)


# -------------------------------------------------------------- collectives
def _coll(name: str, op: str, unit, persistent: bool = False):
    """Wrap collective ``name``: ``unit(self, args, kwargs)`` gives
    (unit bytes or per-peer list, root)."""
    base = getattr(_Comm, name, None) or getattr(MPI.Intracomm, name)

    def method(self, *args, **kwargs):
        result = base(self, *args, **kwargs)
        return _collective_done(result, _coll_sends(self, op, *unit(self, args, kwargs)), persistent)

    return _named(method, base)


def _collective_done(result, sends, persistent=False):
    """Count a collective's ``(world rank, bytes)`` sends now, or, for a
    persistent collective, at each Start of the returned request."""
    if persistent:
        return _persistent(result, "cb", "cm", sends)
    c = _REC.active
    for w, n in sends:
        c.cb[w] += n
        c.cm[w] += 1
    return result


def _coll_pickled(name: str, op: str, root_pos: int | None):
    base = getattr(_Comm, name, None) or getattr(MPI.Intracomm, name)

    def method(self, *args, **kwargs):
        dumps, loads = _CAPTURE.arm()
        try:
            result = base(self, *args, **kwargs)
        finally:
            _CAPTURE.disarm()
        root = 0 if root_pos is None else _arg(args, kwargs, root_pos, "root", 0)
        size = self.Get_remote_size() if self.Is_inter() else self.Get_size()
        if op in ("alltoall", "scatter") and len(dumps) == size:
            unit = dumps  # one pickle per peer
            if op == "scatter" and _REC.collectives != "root":
                unit = sum(unit) / size
        else:  # what this rank pickled, else (bcast non-root) what it received
            unit = dumps[0] if dumps else (loads[0] if loads else 0)
        return _collective_done(result, _coll_sends(self, op, unit, root))

    return _named(method, base)


def _coll_sends(comm, op, unit, root):
    """(world rank, bytes) pairs this rank sends in one collective."""
    if isinstance(unit, list):  # exact bytes per peer (alltoallv & co.)
        if _REC.collectives == "none":
            return []
        table, me = comm._rmw, (-1 if comm.Is_inter() else comm.Get_rank())
        return [(table[q], n) for q, n in enumerate(unit) if n and q != me]
    key = (op, root)
    plan = comm._plans.get(key)
    if plan is None:
        plan = comm._plans[key] = _plan(comm, op, root)
    return [(w, f * unit) for w, f in plan]


def _plan(comm, op, root):
    table = comm._rmw
    model = _REC.collectives
    if model == "none":
        return []
    if comm.Is_inter():  # the only sensible model: straight to the other group
        if op in ("bcast", "scatter"):
            peers = range(len(table)) if root == _ROOT else ()
        elif op in ("gather", "reduce"):
            peers = (root,) if root >= 0 else ()
        else:
            peers = range(len(table))
        return [(table[q], 1.0) for q in peers]
    return [(table[q], f) for q, f in _model_plan(model, op, comm.Get_rank(), comm.Get_size(), root)]


def _arg(args, kwargs, pos, name, default=None):
    return args[pos] if len(args) > pos else kwargs.get(name, default)


def _size(comm):
    return comm.Get_remote_size() if comm.Is_inter() else comm.Get_size()


def _send_or_recv(args, kwargs, share):
    """Unit bytes of the send buffer, or of the receive buffer / ``share``
    when the send buffer is IN_PLACE."""
    send = _arg(args, kwargs, 0, "sendbuf")
    if send is _IN_PLACE or send is None:
        return buffer_bytes(_arg(args, kwargs, 1, "recvbuf")) / share
    return buffer_bytes(send)


def _u_bcast(comm, args, kwargs):
    return buffer_bytes(_arg(args, kwargs, 0, "buf")), _arg(args, kwargs, 1, "root", 0)


def _u_vector(comm, args, kwargs):  # reduce/allreduce/scan: whole vector
    return _send_or_recv(args, kwargs, 1), _arg(args, kwargs, 3, "root", 0)


def _u_gather(comm, args, kwargs):
    return _send_or_recv(args, kwargs, _size(comm)), _arg(args, kwargs, 2, "root", 0)


def _u_gatherv(comm, args, kwargs):
    send = _arg(args, kwargs, 0, "sendbuf")
    if send is _IN_PLACE:  # only the root, which sends nothing in a gather
        return 0, _arg(args, kwargs, 2, "root", 0)
    return buffer_bytes(send), _arg(args, kwargs, 2, "root", 0)


def _u_scatter(comm, args, kwargs):
    root = _arg(args, kwargs, 2, "root", 0)
    recv = _arg(args, kwargs, 1, "recvbuf")
    if recv is _IN_PLACE or recv is None:
        return buffer_bytes(_arg(args, kwargs, 0, "sendbuf")) / _size(comm), root
    return buffer_bytes(recv), root


def _u_scatterv(comm, args, kwargs):
    root = _arg(args, kwargs, 2, "root", 0)
    is_root = root == _ROOT or (not comm.Is_inter() and root == comm.Get_rank())
    if is_root:
        per_peer = vector_bytes(_arg(args, kwargs, 0, "sendbuf"), _size(comm))
        if _REC.collectives == "root" or comm.Is_inter():
            return per_peer, root
        return sum(per_peer) / len(per_peer), root
    recv = _arg(args, kwargs, 1, "recvbuf")
    return (0 if recv is _IN_PLACE or recv is None else buffer_bytes(recv)), root


def _u_allgather(comm, args, kwargs):
    return _send_or_recv(args, kwargs, _size(comm)), 0


def _u_allgatherv(comm, args, kwargs):
    send = _arg(args, kwargs, 0, "sendbuf")
    if send is _IN_PLACE:
        return vector_bytes(_arg(args, kwargs, 1, "recvbuf"), comm.Get_size())[comm.Get_rank()], 0
    return buffer_bytes(send), 0


def _u_alltoall(comm, args, kwargs):
    size = _size(comm)
    each = _send_or_recv(args, kwargs, 1) / size
    return [each] * size, 0


def _u_alltoallv(comm, args, kwargs):
    send = _arg(args, kwargs, 0, "sendbuf")
    if send is _IN_PLACE:
        send = _arg(args, kwargs, 1, "recvbuf")
    return vector_bytes(send, _size(comm)), 0


def _u_reduce_scatter_block(comm, args, kwargs):
    send = _arg(args, kwargs, 0, "sendbuf")
    recv = _arg(args, kwargs, 1, "recvbuf")
    if send is _IN_PLACE:
        return buffer_bytes(recv) / _size(comm), 0
    return buffer_bytes(recv), 0


def _u_reduce_scatter(comm, args, kwargs):
    return _send_or_recv(args, kwargs, 1) / _size(comm), 0


_COLLECTIVES = [  # (blocking name, model op, unit function)
    ("Bcast", "bcast", _u_bcast),
    ("Reduce", "reduce", _u_vector),
    ("Allreduce", "allreduce", _u_vector),
    ("Gather", "gather", _u_gather),
    ("Gatherv", "gather", _u_gatherv),
    ("Scatter", "scatter", _u_scatter),
    ("Scatterv", "scatter", _u_scatterv),
    ("Allgather", "allgather", _u_allgather),
    ("Allgatherv", "allgather", _u_allgatherv),
    ("Alltoall", "alltoall", _u_alltoall),
    ("Alltoallv", "alltoall", _u_alltoallv),
    ("Alltoallw", "alltoall", _u_alltoallv),
    ("Reduce_scatter_block", "reduce_scatter", _u_reduce_scatter_block),
    ("Reduce_scatter", "reduce_scatter", _u_reduce_scatter),
    ("Scan", "scan", _u_vector),
    ("Exscan", "scan", _u_vector),
]

_PICKLED_COLLECTIVES = [  # (name, model op, position of root or None)
    ("bcast", "bcast", 1), ("reduce", "reduce", 2), ("allreduce", "allreduce", None),
    ("gather", "gather", 1), ("scatter", "scatter", 1), ("allgather", "allgather", None),
    ("alltoall", "alltoall", None), ("scan", "scan", None), ("exscan", "scan", None),
]


# ------------------------------------------------------ neighbourhood (exact)
def _out_neighbours(comm) -> list[int | None]:
    """World rank of each out-neighbour in MPI's order (None for PROC_NULL)."""
    topo = comm.Get_topology()
    if topo == MPI.CART:
        peers = []
        for d in range(comm.Get_dim()):
            peers.extend(comm.Shift(d, 1))
    elif topo == MPI.GRAPH:
        peers = comm.Get_neighbors(comm.Get_rank())
    elif topo == MPI.DIST_GRAPH:
        peers = comm.Get_dist_neighbors()[1]
    else:
        raise ValueError("neighbourhood collective on a communicator without a topology")
    table = comm._rmw
    return [table[p] if p >= 0 else None for p in peers]


def _neighbour(name: str, per_peer, persistent: bool = False):
    base = getattr(MPI.Topocomm, name)

    def method(self, *args, **kwargs):
        result = base(self, *args, **kwargs)
        peers = self._nbrs
        sends = [(w, n) for w, n in zip(peers, per_peer(args, kwargs, len(peers)))
                 if w is not None]
        return _collective_done(result, sends, persistent)

    return _named(method, base)


def _n_allgather(args, kwargs, k):
    return [buffer_bytes(_arg(args, kwargs, 0, "sendbuf"))] * k


def _n_alltoall(args, kwargs, k):
    return [buffer_bytes(_arg(args, kwargs, 0, "sendbuf")) / k if k else 0] * k


def _n_alltoallv(args, kwargs, k):
    return vector_bytes(_arg(args, kwargs, 0, "sendbuf"), k)


_NEIGHBOUR = [("Neighbor_allgather", _n_allgather), ("Neighbor_allgatherv", _n_allgather),
              ("Neighbor_alltoall", _n_alltoall), ("Neighbor_alltoallv", _n_alltoallv),
              ("Neighbor_alltoallw", _n_alltoallv)]


def _neighbour_pickled(name: str):
    base = getattr(MPI.Topocomm, name)

    def method(self, sendobj, *args, **kwargs):
        dumps, _ = _CAPTURE.arm()
        try:
            result = base(self, sendobj, *args, **kwargs)
        finally:
            _CAPTURE.disarm()
        peers = self._nbrs
        sizes = dumps if len(dumps) == len(peers) else [dumps[0] if dumps else 0] * len(peers)
        return _collective_done(result, [(w, n) for w, n in zip(peers, sizes) if w is not None])

    return _named(method, base)


# ------------------------------------------------ persistent requests (Start)
class Prequest(_BasePrequest):
    """A persistent request that records its sends each time it starts."""

    def Start(self) -> None:
        _BasePrequest.Start(self)
        _record_start(self)

    @classmethod
    def Startall(cls, requests) -> None:
        _BasePrequest.Startall(requests)
        for req in requests:
            _record_start(req)


def _persistent(req, b_attr, m_attr, sends):
    out = Prequest(req)
    out._rm_sends = (b_attr, m_attr, sends)
    return out


def _record_start(req):
    spec = getattr(req, "_rm_sends", None)
    if spec is None:
        return
    b_attr, m_attr, sends = spec
    c = _REC.active
    bs, ms = getattr(c, b_attr), getattr(c, m_attr)
    for w, n in sends:
        bs[w] += n
        ms[w] += 1


# ------------------------------------------------------------- constructors
def wrap(comm):
    """The recording version of ``comm`` (same handle); COMM_NULL and
    already-recording communicators are returned as they are."""
    if not isinstance(comm, _Comm) or isinstance(comm, _Recording) or comm == MPI.COMM_NULL:
        return comm
    if comm.Is_inter():
        return Intercomm(comm)
    topo = comm.Get_topology()
    cls = {MPI.CART: Cartcomm, MPI.GRAPH: Graphcomm, MPI.DIST_GRAPH: Distgraphcomm}.get(topo, Intracomm)
    return cls(comm)


def _creator(owner, name: str):
    base = getattr(owner, name)

    def method(self, *args, **kwargs):
        result = base(self, *args, **kwargs)
        if isinstance(result, tuple):  # Idup & co.: (comm, request)
            return (wrap(result[0]),) + result[1:]
        return wrap(result)

    return _named(method, base)


_CREATORS = {
    _Comm: ("Dup", "Dup_with_info", "Idup", "Idup_with_info", "Clone", "Split"),
    MPI.Intracomm: ("Create", "Create_group", "Split_type", "Create_cart", "Create_graph",
                    "Create_dist_graph", "Create_dist_graph_adjacent", "Create_intercomm",
                    "Accept", "Connect", "Spawn", "Spawn_multiple"),
    MPI.Intercomm: ("Merge", "Create", "Split"),
    MPI.Cartcomm: ("Sub",),
}


def _named(method, base):
    method.__name__ = getattr(base, "__name__", method.__name__)
    method.__doc__ = getattr(base, "__doc__", None)
    return method


def _comm_methods() -> dict:
    ns = {}
    for name in ("Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend", "Irsend",
                 "Sendrecv", "Sendrecv_replace", "Isendrecv", "Isendrecv_replace"):
        if hasattr(_Comm, name):
            ns[name] = _p2p(name)
    for name in ("send", "ssend", "bsend", "isend", "issend", "ibsend", "sendrecv"):
        ns[name] = _p2p_pickled(name)
    for name in ("Send_init", "Ssend_init", "Bsend_init", "Rsend_init"):
        ns[name] = _p2p_persistent(name)
    if hasattr(_Comm, "Psend_init"):
        ns["Psend_init"] = _p2p_persistent("Psend_init", dest_pos=2)
    for name, op, unit in _COLLECTIVES:
        for variant, persistent in ((name, False), ("I" + name.lower()[0] + name[1:], False),
                                    (name + "_init", True)):
            if hasattr(_Comm, variant) or hasattr(MPI.Intracomm, variant):
                ns[variant] = _coll(variant, op, unit, persistent)
    for name, op, root_pos in _PICKLED_COLLECTIVES:
        if hasattr(_Comm, name) or hasattr(MPI.Intracomm, name):
            ns[name] = _coll_pickled(name, op, root_pos)
    for name in _CREATORS[_Comm]:
        if hasattr(_Comm, name):
            ns[name] = _creator(_Comm, name)
    return ns


def _topo_methods() -> dict:
    ns = {}
    for name, per_peer in _NEIGHBOUR:
        ns[name] = _neighbour(name, per_peer)
        ns["I" + name.lower()[0] + name[1:]] = _neighbour("I" + name.lower()[0] + name[1:], per_peer)
        if hasattr(MPI.Topocomm, name + "_init"):
            ns[name + "_init"] = _neighbour(name + "_init", per_peer, persistent=True)
    for name in ("neighbor_allgather", "neighbor_alltoall"):
        ns[name] = _neighbour_pickled(name)
    return ns


def _make(name, base, *extra):
    ns = _comm_methods()
    for owner in (MPI.Intracomm, MPI.Intercomm, MPI.Cartcomm):
        if issubclass(base, owner) and owner is not _Comm:
            for meth in _CREATORS[owner]:
                if hasattr(base, meth):
                    ns[meth] = _creator(owner, meth)
    for more in extra:
        ns.update(more)
    ns = {k: v for k, v in ns.items() if hasattr(base, k)}
    ns["__doc__"] = f"{base.__name__} that records the traffic it sends (rankmap.profile)."
    ns["__module__"] = __name__
    return type(name, (_Recording, base), ns)


Intracomm = _make("Intracomm", MPI.Intracomm)
Intercomm = _make("Intercomm", MPI.Intercomm)
Cartcomm = _make("Cartcomm", MPI.Cartcomm, _topo_methods())
Graphcomm = _make("Graphcomm", MPI.Graphcomm, _topo_methods())
Distgraphcomm = _make("Distgraphcomm", MPI.Distgraphcomm, _topo_methods())


# ---------------------------------------------------------------- one-sided
def _rma(name: str, origin_pos: int, target_pos: int, out: bool, fetch_pos: int | None):
    """Put-like calls send ``origin`` to the target; Get-like calls fetch
    ``origin``'s size from it; accumulate-and-fetch calls do both."""
    base = getattr(MPI.Win, name)

    def method(self, *args, **kwargs):
        result = base(self, *args, **kwargs)
        target = _arg(args, kwargs, target_pos, "target_rank")
        if target is not None and target >= 0:
            c = _REC.active
            w = self._rmw[target]
            if out:
                c.rb[w] += buffer_bytes(_arg(args, kwargs, origin_pos, "origin"))
                c.rm[w] += 1
            if fetch_pos is not None:
                c.gb[w] += buffer_bytes(_arg(args, kwargs, fetch_pos, "result"))
                c.gm[w] += 1
        return result

    return _named(method, base)


class Win(MPI.Win):
    """A window that records Put/Get/Accumulate bytes per target."""

    def __getattr__(self, name):
        if name != "_rmw":
            raise AttributeError(f"'Win' object has no attribute {name!r}")
        group = self.Get_group()
        self.__dict__["_rmw"] = table = _world_table(group)
        group.Free()
        return table


for _name, _spec in {"Put": (0, 1, True, None), "Rput": (0, 1, True, None),
                     "Accumulate": (0, 1, True, None), "Raccumulate": (0, 1, True, None),
                     "Get": (0, 1, False, 0), "Rget": (0, 1, False, 0),
                     "Get_accumulate": (0, 2, True, 1), "Rget_accumulate": (0, 2, True, 1),
                     "Fetch_and_op": (0, 2, True, 1), "Compare_and_swap": (0, 3, True, 2)}.items():
    setattr(Win, _name, _rma(_name, *_spec))


# ------------------------------------------------------------------ pickles
class _Capture:
    """Sizes mpi4py pickles/unpickles while a lowercase call is in progress
    (armed only then, so plain recv calls cost nothing and keep nothing)."""

    def __init__(self):
        self.dumps = self.loads = None

    def arm(self):
        self.dumps, self.loads = [], []
        return self.dumps, self.loads

    def disarm(self):
        self.dumps = self.loads = None


_CAPTURE = _Capture()


def _dumps(obj, protocol=None):
    data = _pickle.dumps(obj, protocol)
    if _CAPTURE.dumps is not None:
        _CAPTURE.dumps.append(len(data))
    return data


def _loads(data):
    if _CAPTURE.loads is not None:
        _CAPTURE.loads.append(raw_nbytes(data))
    return _pickle.loads(data)


# ------------------------------------------------------------------ install
def install(recorder: Recorder, pcontrol=None):
    """Make ``recorder`` the target of all recording and replace the mpi4py
    module attributes (COMM_WORLD, COMM_SELF, Win, Prequest, Pcontrol, the
    pickler's hooks).  Returns the recording COMM_WORLD."""
    global _REC, _EXTERNAL, _WORLD_GROUP
    _REC = recorder
    if _ORIGINAL:
        return MPI.COMM_WORLD
    _EXTERNAL = recorder.world_size
    _WORLD_GROUP = MPI.COMM_WORLD.Get_group()
    for attr in ("COMM_WORLD", "COMM_SELF", "Win", "Prequest", "Pcontrol"):
        _ORIGINAL[attr] = getattr(MPI, attr)
    MPI.COMM_WORLD = Intracomm(_ORIGINAL["COMM_WORLD"])
    MPI.COMM_SELF = Intracomm(_ORIGINAL["COMM_SELF"])
    MPI.Win = Win
    MPI.Prequest = Prequest
    if pcontrol is not None:
        MPI.Pcontrol = pcontrol
    MPI.pickle.__init__(_dumps, _loads, MPI.pickle.PROTOCOL)
    return MPI.COMM_WORLD


def active_recorder() -> Recorder | None:
    return _REC


def original(attr: str):
    """The mpi4py attribute ``install`` replaced (e.g. the plain COMM_WORLD)."""
    return _ORIGINAL.get(attr, getattr(MPI, attr))
