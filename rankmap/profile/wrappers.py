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
The communicator classes are replaced too (by stand-ins that still pass
``isinstance`` for plain communicators), so class-level calls
(``MPI.Comm.Get_parent()``, ``Join``, ``MPI.Intracomm.Create_from_group``,
``f2py``, ``fromhandle``) return recording communicators, and unbound calls
such as ``MPI.Comm.Send(comm, ...)`` (``mpi4py.util.pkl5``) record.  A
communicator built outside Python (a C extension's handle turned into an
mpi4py object there) is not seen: pass it through ``rankmap.profile.wrap``.

Every method records after the MPI call returned (a failing call records
nothing) into ``recorder.active``; destinations are translated to COMM_WORLD
ranks through a per-communicator table built once.

The event log (``recorder.log``, see ``eventlog``) gets each send and receive
post, each collective (a COLL naming the communicator's world ranks, then
the flows the model gives the counters) and each wait the rank is seen to
finish: a blocking call is its post and a wait; a non-blocking one returns a
recording ``Request`` (same handle) that remembers its post's event, and the
``MPI.Request`` stand-in's Wait/Test calls (all forms) log a wait for each
such request that completed, in the order given.  An ANY_SOURCE receive is
rewritten when it completes with the source its status names (the wrappers
ask for a status only while such a receive is pending).  Not logged:
one-sided traffic, matched receives (Mprobe/Mrecv), partitioned receives,
traffic with processes outside COMM_WORLD.  A buffered send is a post
without a wait (it completes locally); non-blocking and persistent
collectives are logged at their post (the replay holds the rank there).

The hot path: each recording method is generated with exactly the signature
of the mpi4py method it wraps (mpi4py's own default objects), so a call
costs one extra Python frame without ``*args``/``**kwargs`` packing, plus a
short function that counts; collective plans are cached per communicator
and (operation, root, algorithm).  Pickled sizes are captured per thread.
"""

from __future__ import annotations

import inspect
import pickle as _pickle
import threading

from mpi4py import MPI

from ..trace import EVENT_COLL, EVENT_RECV, EVENT_SEND
from .buffers import buffer_bytes, raw_nbytes, vector_bytes
from .collectives import choose as _algorithm
from .collectives import intercomm_plan as _intercomm_plan
from .collectives import plan as _model_plan
from .recorder import Recorder

_REC: Recorder | None = None  # the recorder every wrapper adds to
_EXTERNAL = 0                 # row index for peers outside COMM_WORLD (= world size)
_WORLD_GROUP = None
_ORIGINAL = {}                # mpi4py.MPI attributes replaced by install()

_Comm = MPI.Comm
_BaseRequest = MPI.Request    # install() replaces the module attributes
_BasePrequest = MPI.Prequest
_Status = MPI.Status
_IN_PLACE = MPI.IN_PLACE
_ROOT = MPI.ROOT
_ANY = MPI.ANY_SOURCE
_PROC_NULL = MPI.PROC_NULL
_PENDING = 0                  # ANY_SOURCE/pickled receives posted and not yet seen complete

# how a send completes in the log: its wait follows (blocking), it has none
# (buffered: completes locally), its request is waited for (non-blocking)
_BLOCKING, _BUFFERED, _NONBLOCKING = range(3)


# ------------------------------------------------------- method generation
class _Name:
    """A default value that prints as the name it is bound to in the
    generated method's namespace."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


def _forward(base, after, args: str = "", capture: bool = False, pre: str = "", **consts):
    """A method with ``base``'s signature that returns
    ``after(self, base(self, ...)<args>)``.

    ``args``: source text of further arguments (", dest" or
    ", _unit(self, sendbuf, recvbuf), _KEY"), over ``base``'s parameter
    names and ``consts``.  ``capture``: the pickled sizes of the call are
    passed to ``after`` before ``args``.  ``pre``: a statement run first
    (e.g. giving a receive a status).  A name ``args`` uses that is
    neither a parameter nor given fails here, at import, not in a run.
    """
    sig = inspect.signature(base)
    ns = {"_base": base, "_after": after, "_arm": _arm, "_disarm": _disarm, "_status_for": _status_for,
          "_ANY": _ANY, **consts}
    params, call = [], []
    for i, p in enumerate(sig.parameters.values()):
        if p.default is not p.empty:
            ns[f"_d{i}"] = p.default
            p = p.replace(default=_Name(f"_d{i}"))
        params.append(p.replace(annotation=p.empty))
        call.append({p.VAR_POSITIONAL: "*{0}", p.KEYWORD_ONLY: "{0}={0}",
                     p.VAR_KEYWORD: "**{0}"}.get(p.kind, "{0}").format(p.name))
    head = f"def {base.__name__}{sig.replace(parameters=params, return_annotation=sig.empty)}:\n"
    if pre:
        head += f"    {pre}\n"
    call = ", ".join(call)
    if capture:
        body = (f"    _sizes = _arm()\n    try:\n        _returned = _base({call})\n"
                f"    finally:\n        _disarm()\n    return _after(self, _returned, _sizes{args})\n")
    else:
        body = f"    return _after(self, _base({call}){args})\n"
    ns["__name__"] = __name__
    exec(compile(head + body, f"<rankmap.profile {base.__qualname__}>", "exec"), ns)  # noqa: S102
    method = ns[base.__name__]
    unknown = [n for n in method.__code__.co_names if n not in ns]
    if unknown:
        raise TypeError(f"{base.__qualname__} has no parameter {', '.join(unknown)}: "
                        f"this mpi4py is not supported by rankmap.profile")
    method.__doc__ = getattr(base, "__doc__", None)
    return method


# ------------------------------------------------------------ world tables
def _world_table(group) -> list[int]:
    ranks = group.Translate_ranks(None, _WORLD_GROUP)
    return [r if r >= 0 else _EXTERNAL for r in ranks]  # UNDEFINED is negative


def _peer_table(comm) -> list[int]:
    """World rank of each peer addressable by rank (the remote group of an
    intercommunicator)."""
    group = comm.Get_remote_group() if comm.Is_inter() else comm.Get_group()
    table = _world_table(group)
    group.Free()
    return table


def _comm_index(comm) -> tuple:
    """(the log, the log's index of ``comm``): its world ranks (an
    intercommunicator's two groups, the one holding the lower world rank
    first, so that both sides name it alike); -1 (not logged) when a member
    is outside COMM_WORLD or nothing is logged.  Cached per communicator
    with the log it indexes (``_cid``): a later session has a log of its own."""
    events = _REC.events
    if events is None:
        return events, -1
    members = _attr(comm, "_rmw")
    if comm.Is_inter():
        group = comm.Get_group()
        local = _world_table(group)
        group.Free()
        members = local + members if min(local, default=0) < min(members, default=0) else members + local
    if _EXTERNAL in members:
        return events, -1
    return events, events.comm(tuple(members))


def _cid(comm) -> int:
    """The log's index of ``comm`` (``_comm_index``), made again for a new log."""
    try:
        log, c = comm._cid
    except AttributeError:
        log, c = _attr(comm, "_cid")
    if log is not _REC.events:
        log, c = _comm_index(comm)
        try:
            comm.__dict__["_cid"] = (log, c)
        except AttributeError:
            pass
    return c


_LAZY = {  # per-communicator tables, built at first use
    "_rmw": _peer_table,
    "_me": lambda comm: -1 if comm.Is_inter() else comm.Get_rank(),
    "_plans": lambda comm: {},  # (op, root, algorithm) -> [(world rank, factor, messages)]
    "_nbrs": lambda comm: _out_neighbours(comm),
    "_cid": _comm_index,
}


class _StandIn(type):
    """Metaclass of the recording classes ``install`` puts in ``mpi4py.MPI``
    in place of mpi4py's own (``MPI.Comm``, ``MPI.Intracomm``, ``MPI.Win``...):
    ``isinstance``/``issubclass`` answer as for the mpi4py class it stands in
    for (``__mpi4py__``), so a plain communicator still is an
    ``MPI.Intracomm``.  Subclasses (e.g. ``mpi4py.util.pkl5.Comm`` defined
    after ``install``) check as usual."""

    def __instancecheck__(cls, obj):
        original = cls.__dict__.get("__mpi4py__")
        return isinstance(obj, original) if original else type.__instancecheck__(cls, obj)

    def __subclasscheck__(cls, sub):
        original = cls.__dict__.get("__mpi4py__")
        return issubclass(sub, original) if original else type.__subclasscheck__(cls, sub)


class _Recording:
    """Mixin for every recording communicator class: lazily built tables
    (``_LAZY``), stored in the instance on first use."""

    def __getattr__(self, name):
        make = _LAZY.get(name)
        if make is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        value = self.__dict__[name] = make(self)
        return value


def _attr(comm, name):
    """``comm.<name>`` (a ``_LAZY`` table), also for a communicator whose
    class profiling did not make, reached through an unbound call such as
    ``MPI.Comm.Send(comm, ...)`` (as ``mpi4py.util.pkl5`` does)."""
    try:
        return getattr(comm, name)
    except AttributeError:
        value = _LAZY[name](comm)
    try:
        comm.__dict__[name] = value
    except AttributeError:  # no instance dict: built again next time
        pass
    return value


def _count_now(result, b_attr, m_attr, sends):
    """Add ``(world rank, bytes, messages)`` sends to the active counters."""
    c = _REC.active
    bs, ms = getattr(c, b_attr), getattr(c, m_attr)
    for w, n, m in sends:
        bs[w] += n
        ms[w] += m
    return result


# ----------------------------------------------------------- point-to-point
def _world(comm, rank):
    try:
        return comm._rmw[rank]
    except AttributeError:
        return _attr(comm, "_rmw")[rank]


def _count_p2p(comm, dest, nbytes):
    """Count a send; returns the destination's world rank."""
    try:
        w = comm._rmw[dest]
    except AttributeError:
        w = _attr(comm, "_rmw")[dest]
    c = _REC.active
    c.pb[w] += nbytes  # nbytes computed beforehand: no thread switch inside +=
    c.pm[w] += 1
    return w


def _sent(comm, result, buf, dest, mode):
    """Count a send and log its post as ``mode`` completes it; returns
    ``result`` (a non-blocking send's request: a recording one when logged);
    ``buf``: the buffer, or the bytes of a pickled send."""
    if dest >= 0:
        n = buf if type(buf) is int else buffer_bytes(buf)
        w = _count_p2p(comm, dest, n)
        log = _REC.log
        if log is not None and w != _EXTERNAL:
            if mode == _BLOCKING:
                log.post_wait(EVENT_SEND, w, n)
            elif mode == _NONBLOCKING:
                i = log.add(EVENT_SEND, w, n)
                if i >= 0:  # _tracked(result, i), inline: the hot path
                    result = Request(result)
                    result._rm_ev = i
            else:
                log.add(EVENT_SEND, w, n)
    return result


def _pickled_sent(comm, result, sizes, dest, mode):
    if dest >= 0:
        dumps = sizes[0]
        return _sent(comm, result, dumps[0] if dumps else 0, dest, mode)
    return result


def _status_for(status, source):
    """A status for a receive whose source the log must learn (ANY_SOURCE)."""
    if status is None and source == _ANY and _REC.log is not None:
        return _Status()
    return status


def _source(comm, status):
    """(world rank, bytes) of a completed receive from its status; the world
    rank is -1 for a process outside COMM_WORLD."""
    src = status.Get_source()
    table = _attr(comm, "_rmw")
    w = table[src] if 0 <= src < len(table) else -1
    return (-1 if w == _EXTERNAL else w), status.Get_count()


def _recv_post(log, comm, buf, source, status):
    """Log a receive post; its index, or -1 (not logged).  ``status``: the
    completed receive's (blocking), or None (not yet completed: an
    ANY_SOURCE receive is logged from -1, rewritten at completion)."""
    if source == _PROC_NULL:
        return -1
    if source == _ANY:
        if status is None:
            return log.add(EVENT_RECV, -1, buf if type(buf) is int else buffer_bytes(buf))
        w, n = _source(comm, status)
        return log.add(EVENT_RECV, w, n) if w >= 0 else -1
    w = _world(comm, source)
    if w == _EXTERNAL:
        return -1
    return log.add(EVENT_RECV, w, buf if type(buf) is int else buffer_bytes(buf))


def _received(comm, result, buf, source, status):
    """Recv: the post and its wait (the source from the status for ANY_SOURCE)."""
    log = _REC.log
    if log is not None:
        if source >= 0:  # neither ANY_SOURCE nor PROC_NULL
            w = _world(comm, source)
            if w != _EXTERNAL:
                log.post_wait(EVENT_RECV, w, buf if type(buf) is int else buffer_bytes(buf))
        else:
            i = _recv_post(log, comm, buf, source, status)
            if i >= 0:
                log.wait(i)
    return result


def _ireceived(comm, req, buf, source):
    log = _REC.log
    if log is not None:
        if source >= 0:  # neither ANY_SOURCE nor PROC_NULL
            w = _world(comm, source)
            if w != _EXTERNAL:
                i = log.add(EVENT_RECV, w, buffer_bytes(buf))
                if i >= 0:  # _tracked(req, i), inline
                    req = Request(req)
                    req._rm_ev = i
            return req
        i = _recv_post(log, comm, buf, source, None)
        if i >= 0:
            return _tracked(req, i, -1, _attr(comm, "_rmw") if source == _ANY else None)
    return req


def _sendrecv(comm, result, sendbuf, dest, recvbuf, source, status):
    """Sendrecv: send post, receive post, then the waits for both."""
    w = n = None
    if dest >= 0:
        n = sendbuf if type(sendbuf) is int else buffer_bytes(sendbuf)
        w = _count_p2p(comm, dest, n)
    log = _REC.log
    if log is not None:
        if source >= 0 and w is not None and w != _EXTERNAL:
            v = _world(comm, source)
            if v != _EXTERNAL:
                log.exchange(w, n, v, recvbuf if type(recvbuf) is int else buffer_bytes(recvbuf))
                return result
        s = log.add(EVENT_SEND, w, n) if w is not None and w != _EXTERNAL else -1
        r = _recv_post(log, comm, recvbuf, source, status)
        for i in (s, r):
            if i >= 0:
                log.wait(i)
    return result


def _isendrecv(comm, req, sendbuf, dest, recvbuf, source):
    """Isendrecv: both posts; their request's wait waits for both."""
    w = n = None
    if dest >= 0:
        n = buffer_bytes(sendbuf)
        w = _count_p2p(comm, dest, n)
    log = _REC.log
    if log is None:
        return req
    s = log.add(EVENT_SEND, w, n) if w is not None and w != _EXTERNAL else -1
    r = _recv_post(log, comm, recvbuf, source, None)
    if r >= 0:
        return _tracked(req, s if s >= 0 else r, r, _attr(comm, "_rmw") if source == _ANY else None)
    return _tracked(req, s) if s >= 0 else req


def _pickled_received(comm, result, sizes, source, status):
    """recv: the size is the pickle it unpickled."""
    loads = sizes[1]
    return _received(comm, result, loads[0] if loads else 0, source, status)


def _pickled_ireceived(comm, req, source):
    """irecv: the size (and an ANY_SOURCE peer) is known at completion."""
    log = _REC.log
    if log is not None:
        i = _recv_post(log, comm, 0, source, None)
        if i >= 0:
            return _tracked(req, i, -1, _attr(comm, "_rmw"))
    return req


def _pickled_sendrecv(comm, result, sizes, dest, source, status):
    dumps, loads = sizes
    return _sendrecv(comm, result, dumps[0] if dumps else 0, dest, loads[0] if loads else 0, source, status)


def _send_init(comm, req, buf, dest):
    """Send_init & co.: the whole buffer goes to ``dest`` at each Start."""
    if dest < 0:
        return _persistent(req, "pb", "pm", [])
    w, n = _attr(comm, "_rmw")[dest], buffer_bytes(buf)
    return _persistent(req, "pb", "pm", [(w, n, 1)], (EVENT_SEND, w, n) if w != _EXTERNAL else None)


def _recv_init(comm, req, buf, source):
    """Recv_init: a receive post at each Start."""
    if source == _PROC_NULL:
        return req
    w = -1 if source == _ANY else _attr(comm, "_rmw")[source]
    if w == _EXTERNAL:
        return req
    out = _persistent(req, "pb", "pm", [], (EVENT_RECV, w, buffer_bytes(buf)))
    if source == _ANY:
        out._rm_fix = _attr(comm, "_rmw")
    return out


_SEND_MODES = {"Send": _BLOCKING, "Ssend": _BLOCKING, "Rsend": _BLOCKING, "Bsend": _BUFFERED,
               "Isend": _NONBLOCKING, "Issend": _NONBLOCKING, "Irsend": _NONBLOCKING, "Ibsend": _BUFFERED,
               "send": _BLOCKING, "ssend": _BLOCKING, "bsend": _BUFFERED,
               "isend": _NONBLOCKING, "issend": _NONBLOCKING, "ibsend": _BUFFERED}
_ANY_STATUS = "if status is None and source == _ANY: status = _status_for(status, source)"


def _p2p(name: str):
    base = getattr(_Comm, name)
    if name in _SEND_MODES:
        return _forward(base, _sent, ", buf, dest, _MODE", _MODE=_SEND_MODES[name])
    if name == "Recv":
        return _forward(base, _received, ", buf, source, status", pre=_ANY_STATUS)
    if name == "Irecv":
        return _forward(base, _ireceived, ", buf, source")
    recv = "buf" if "replace" in name else "recvbuf"
    send = "buf" if "replace" in name else "sendbuf"
    if name.startswith("Sendrecv"):
        return _forward(base, _sendrecv, f", {send}, dest, {recv}, source, status", pre=_ANY_STATUS)
    return _forward(base, _isendrecv, f", {send}, dest, {recv}, source")


def _p2p_pickled(name: str):
    base = getattr(_Comm, name)
    if name in _SEND_MODES:
        return _forward(base, _pickled_sent, ", dest, _MODE", capture=True, _MODE=_SEND_MODES[name])
    if name == "recv":
        return _forward(base, _pickled_received, ", source, status", capture=True, pre=_ANY_STATUS)
    if name == "irecv":
        return _forward(base, _pickled_ireceived, ", source")
    return _forward(base, _pickled_sendrecv, ", dest, source, status", capture=True, pre=_ANY_STATUS)


def _p2p_persistent(name: str):
    if name == "Recv_init":
        return _forward(getattr(_Comm, name), _recv_init, ", buf, source")
    return _forward(getattr(_Comm, name), _send_init, ", buf, dest")


# -------------------------------------------------------------- collectives
def _log_collective(comm, sends, unit=1):
    """A COLL on ``comm``, then its flows (``(world rank, factor,
    messages)``: ``factor x unit`` bytes in that many messages)."""
    log = _REC.log
    if log is not None:
        c = _cid(comm)
        if c >= 0:
            log.collective(c, sends, unit)


def _collective_sent(comm, result, unit, key):
    """Count one collective: ``unit`` bytes (or an exact list per peer) along
    the plan for ``key`` = (op, root) at that unit."""
    if type(unit) is list:
        sends = _exact_sends(comm, unit)
        _log_collective(comm, sends)
        return _count_now(result, "cb", "cm", sends)
    plan = _plan_of(comm, key, unit)
    if plan:
        c = _REC.active
        cb, cm = c.cb, c.cm
        for w, f, m in plan:
            cb[w] += f * unit
            cm[w] += m
    _log_collective(comm, plan, unit)
    return result


def _collective_persistent(comm, req, unit, key):
    """A persistent collective counts (and logs) its sends at each Start."""
    if type(unit) is list:
        sends = _exact_sends(comm, unit)
    else:
        sends = [(w, f * unit, m) for w, f, m in _plan_of(comm, key, unit)]
    return _persistent(req, "cb", "cm", sends, (EVENT_COLL, _cid(comm), sends))


def _barrier(comm, result):
    """A barrier: a COLL whose flows carry no bytes (the ``mpi`` model's
    messages: they cost latency), or none (it synchronises)."""
    return _collective_sent(comm, result, 0, _BARRIER)


def _barrier_init(comm, req):
    return _collective_persistent(comm, req, 0, _BARRIER)


_BARRIER = ("barrier", 0)


def _exact_sends(comm, per_peer):
    """(world rank, bytes, 1 message) from exact bytes per comm rank (alltoallv & co.)."""
    if _REC.collectives == "none":
        return []
    table, me = _attr(comm, "_rmw"), _attr(comm, "_me")
    return [(table[q], n, 1) for q, n in enumerate(per_peer) if n and q != me]


def _plan_of(comm, key, unit):
    """The plan of ``key`` = (op, root) for ``unit`` bytes, cached per
    communicator and algorithm (the ``mpi`` model picks one by the size)."""
    plans = _attr(comm, "_plans")
    if _REC.collectives == "mpi":
        alg = _algorithm(key[0], len(_attr(comm, "_rmw")), unit, _REC.library)
        whole = key + (alg,)
    else:
        whole = key
    plan = plans.get(whole)
    if plan is None:
        plan = plans[whole] = _plan(comm, *key, unit)
    return plan


def _plan(comm, op, root, unit):
    """(world rank, factor, messages) this rank sends in ``op`` under the model."""
    table = _attr(comm, "_rmw")
    model = _REC.collectives
    if model == "none" or (op == "barrier" and model != "mpi"):
        return []
    if comm.Is_inter():
        edges = _intercomm_plan(op, len(table), root, root == _ROOT)
    else:
        edges = _model_plan(model, op, comm.Get_rank(), comm.Get_size(), root, unit, _REC.library)
    return [(table[q], f, m) for q, f, m in edges]


def _collective(name: str, op: str, unit, persistent: bool):
    """Wrap collective ``name``; ``unit(comm, <its parameters>)`` reads the
    unit bytes (or an exact per-peer list) from the call's own arguments."""
    base = getattr(_Comm, name, None) or getattr(MPI.Intracomm, name)
    reads = ", ".join(list(inspect.signature(unit).parameters)[1:])
    key = "(_OP, root)" if "root" in inspect.signature(base).parameters else "_KEY"
    after = _collective_persistent if persistent else _collective_sent
    return _forward(base, after, f", _unit(self, {reads}), {key}", _unit=unit, _OP=op, _KEY=(op, 0))


def _pickled_collective(comm, result, sizes, op, root):
    dumps, loads = sizes
    size = len(_attr(comm, "_rmw"))
    if op in ("alltoall", "scatter") and len(dumps) == size:
        unit = dumps  # one pickle per peer
        if op == "scatter" and _REC.collectives != "root":
            unit = sum(unit) / size
    else:  # what this rank pickled, else (bcast non-root) what it received
        unit = dumps[0] if dumps else (loads[0] if loads else 0)
    return _collective_sent(comm, result, unit, (op, root))


def _coll_pickled(name: str, op: str):
    base = getattr(_Comm, name, None) or getattr(MPI.Intracomm, name)
    root = "root" if "root" in inspect.signature(base).parameters else "0"
    return _forward(base, _pickled_collective, f", _OP, {root}", capture=True, _OP=op)


def _peers(comm):
    """Ranks addressable in a collective: the remote group's size on an
    intercommunicator."""
    return len(_attr(comm, "_rmw"))


def _in_place(buf):
    return buf is _IN_PLACE or buf is None


def _u_bcast(comm, buf):
    return buffer_bytes(buf)


def _u_vector(comm, sendbuf, recvbuf):  # reduce/allreduce/scan: whole vector
    return buffer_bytes(recvbuf) / 1 if _in_place(sendbuf) else buffer_bytes(sendbuf)


def _u_gather(comm, sendbuf, recvbuf):
    return buffer_bytes(recvbuf) / _peers(comm) if _in_place(sendbuf) else buffer_bytes(sendbuf)


def _u_gatherv(comm, sendbuf):
    return 0 if sendbuf is _IN_PLACE else buffer_bytes(sendbuf)  # IN_PLACE: the root, sends nothing


def _u_scatter(comm, sendbuf, recvbuf):
    return buffer_bytes(sendbuf) / _peers(comm) if _in_place(recvbuf) else buffer_bytes(recvbuf)


def _u_scatterv(comm, sendbuf, recvbuf, root):
    if root == _ROOT or (not comm.Is_inter() and root == comm.Get_rank()):
        per_peer = vector_bytes(sendbuf, _peers(comm))
        if _REC.collectives == "root" or comm.Is_inter():
            return per_peer
        return sum(per_peer) / len(per_peer)
    return 0 if _in_place(recvbuf) else buffer_bytes(recvbuf)


def _u_allgather(comm, sendbuf, recvbuf):
    return _u_gather(comm, sendbuf, recvbuf)


def _u_allgatherv(comm, sendbuf, recvbuf):
    if sendbuf is _IN_PLACE:
        return vector_bytes(recvbuf, comm.Get_size())[comm.Get_rank()]
    return buffer_bytes(sendbuf)


def _u_alltoall(comm, sendbuf, recvbuf):
    size = _peers(comm)
    return [_u_vector(comm, sendbuf, recvbuf) / size] * size


def _u_alltoallv(comm, sendbuf, recvbuf):
    return vector_bytes(recvbuf if sendbuf is _IN_PLACE else sendbuf, _peers(comm))


def _u_reduce_scatter_block(comm, sendbuf, recvbuf):
    n = buffer_bytes(recvbuf)
    return n / _peers(comm) if sendbuf is _IN_PLACE else n


def _u_reduce_scatter(comm, sendbuf, recvbuf):
    return _u_vector(comm, sendbuf, recvbuf) / _peers(comm)


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

_PICKLED_COLLECTIVES = [  # (name, model op)
    ("bcast", "bcast"), ("reduce", "reduce"), ("allreduce", "allreduce"),
    ("gather", "gather"), ("scatter", "scatter"), ("allgather", "allgather"),
    ("alltoall", "alltoall"), ("scan", "scan"), ("exscan", "scan"),
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
    table = _attr(comm, "_rmw")
    return [table[p] if p >= 0 else None for p in peers]


def _neighbour_sent(comm, result, done, per_peer):
    """``done`` (count now, or at each Start) the bytes per out-neighbour
    (nothing under the model ``none``: it records no collective)."""
    if _REC.collectives == "none":
        sends = []
    else:
        sends = [(w, n, 1) for w, n in zip(_attr(comm, "_nbrs"), per_peer) if w is not None]
    if done is _persistent:
        return _persistent(result, "cb", "cm", sends, (EVENT_COLL, _cid(comm), sends))
    _log_collective(comm, sends)
    return done(result, "cb", "cm", sends)


def _neighbour(name: str, unit, persistent: bool = False):
    return _forward(getattr(MPI.Topocomm, name), _neighbour_sent, ", _DONE, _unit(self, sendbuf)",
                    _DONE=_persistent if persistent else _count_now, _unit=unit)


def _n_allgather(comm, sendbuf):
    return [buffer_bytes(sendbuf)] * len(_attr(comm, "_nbrs"))


def _n_alltoall(comm, sendbuf):
    k = len(_attr(comm, "_nbrs"))
    return [buffer_bytes(sendbuf) / k if k else 0] * k


def _n_alltoallv(comm, sendbuf):
    return vector_bytes(sendbuf, len(_attr(comm, "_nbrs")))


_NEIGHBOUR = [("Neighbor_allgather", _n_allgather), ("Neighbor_allgatherv", _n_allgather),
              ("Neighbor_alltoall", _n_alltoall), ("Neighbor_alltoallv", _n_alltoallv),
              ("Neighbor_alltoallw", _n_alltoallv)]


def _pickled_neighbour(comm, result, sizes):
    dumps = sizes[0]
    k = len(_attr(comm, "_nbrs"))
    per_peer = dumps if len(dumps) == k else [dumps[0] if dumps else 0] * k
    return _neighbour_sent(comm, result, _count_now, per_peer)


def _neighbour_pickled(name: str):
    return _forward(getattr(MPI.Topocomm, name), _pickled_neighbour, capture=True)


# ------------------------------------------------------ requests: completion
def _tracked(req, first, last=-1, fix=None):
    """The recording version of ``req`` (same handle), whose completion logs
    waits for the posts ``first..last`` (``last`` -1: ``first`` alone);
    ``fix``: the world table of the communicator of a receive (the last
    post) to rewrite from its status at completion."""
    out = Request(req)
    out._rm_ev = first
    if last > first:
        out._rm_to = last
    if fix is not None:
        global _PENDING
        out._rm_fix = fix
        _PENDING += 1
    return out


def _done(req, status) -> None:
    """``req`` completed (with ``status``, or None): log the waits for its
    posts, rewriting its receive from the status first."""
    first = getattr(req, "_rm_ev", -1)
    if first < 0:
        return
    req._rm_ev = -1
    last = req._rm_to
    fix = req._rm_fix
    if fix is not None:
        global _PENDING
        _PENDING -= 1
        if status is not None and _REC.events is not None:
            src = status.Get_source()
            w = fix[src] if 0 <= src < len(fix) else -1
            _REC.events.fix(max(first, last), -1 if w == _EXTERNAL else w, status.Get_count())
    log = _REC.log
    if log is not None:
        log.wait(first)
        if last > first:
            log.waits(first + 1, last)


def _done_all(requests, statuses) -> None:
    if _REC.events is None:  # no log: no request is tracked
        return
    for k, req in enumerate(requests):
        if getattr(req, "_rm_ev", -1) >= 0:
            req._waited(statuses[k] if statuses and k < len(statuses) else None)


def _done_some(requests, indices, statuses) -> None:
    """Waitsome/Testsome: ``statuses[j]`` belongs to ``indices[j]``; waits
    logged in the order of ``requests``."""
    if indices and _REC.events is not None:
        for j in sorted(range(len(indices)), key=indices.__getitem__):
            _done(requests[indices[j]], statuses[j] if statuses and j < len(statuses) else None)


class _Completion:
    """Wait/Test in all forms, logging the waits of recording requests
    (mixed into the ``Request`` and ``Prequest`` stand-ins)."""

    _rm_ev = -1     # first post event of this request (-1: none to wait for)
    _rm_to = -1     # last one when it posted more (an Isendrecv: two)
    _rm_fix = None  # world table of a receive rewritten at completion
    _rm_start = None  # persistent: what each Start posts

    def _status(self, status):
        """A status where a receive is to be rewritten from it."""
        return _Status() if self._rm_fix is not None and status is None else status

    def _waited(self, status) -> None:
        i = self._rm_ev
        if i >= 0:
            if self._rm_to < 0 and self._rm_fix is None:  # the usual case, inline: the hot path
                self._rm_ev = -1
                log = _REC.log
                if log is not None:
                    log.wait(i)
            else:
                _done(self, status)

    def Wait(self, status=None):
        status = self._status(status)
        result = _BaseRequest.Wait(self, status)
        self._waited(status)
        return result

    def wait(self, status=None):
        status = self._status(status)
        result = _BaseRequest.wait(self, status)
        self._waited(status)
        return result

    def Test(self, status=None):
        status = self._status(status)
        flag = _BaseRequest.Test(self, status)
        if flag:
            self._waited(status)
        return flag

    def test(self, status=None):
        status = self._status(status)
        result = _BaseRequest.test(self, status)
        if result[0]:
            self._waited(status)
        return result


def _completion(name: str, kind: str, completed):
    """mpi4py's classmethod ``Request.<name>`` (``kind``: all, any or some of
    the requests), logging the waits of the requests it completed;
    ``completed(result)``: (whether any completed, which: an index or the
    indices)."""
    base = getattr(_BaseRequest, name)
    if kind == "any":
        def method(cls, requests, status=None):
            if status is None and _PENDING:  # a receive to rewrite: its status is needed
                status = _Status()
            result = base(requests, status)
            ok, index = completed(result)
            if ok and index >= 0:
                _done(requests[index], status)
            return result
    else:
        def method(cls, requests, statuses=None):
            if statuses is None and _PENDING:
                statuses = []
            result = base(requests, statuses)
            ok, which = completed(result)
            if ok:
                _done_all(requests, statuses) if kind == "all" else _done_some(requests, which, statuses)
            return result
    method.__name__ = method.__qualname__ = name
    method.__doc__ = base.__doc__
    return classmethod(method)


_COMPLETIONS = (("Waitall", "all", lambda r: (True, None)), ("Testall", "all", lambda r: (r, None)),
                ("waitall", "all", lambda r: (True, None)), ("testall", "all", lambda r: (r[0], None)),
                ("Waitany", "any", lambda r: (True, r)), ("Testany", "any", lambda r: (r[1], r[0])),
                ("waitany", "any", lambda r: (True, r[0])), ("testany", "any", lambda r: (r[1], r[0])),
                ("Waitsome", "some", lambda r: (True, r)), ("Testsome", "some", lambda r: (True, r)),
                ("waitsome", "some", lambda r: (True, r[0])), ("testsome", "some", lambda r: (True, r[0])))
for _name, _kind, _completed in _COMPLETIONS:
    setattr(_Completion, _name, _completion(_name, _kind, _completed))
for _name in ("Wait", "Test", "wait", "test"):
    _Completion.__dict__[_name].__doc__ = getattr(_BaseRequest, _name).__doc__


class Request(_Completion, _BaseRequest, metaclass=_StandIn):
    """A request whose completion the event log sees."""

    __mpi4py__ = _BaseRequest


# ------------------------------------------------ persistent requests (Start)
class Prequest(_Completion, _BasePrequest, metaclass=_StandIn):
    """A persistent request that records its sends each time it starts."""

    __mpi4py__ = _BasePrequest

    def Start(self) -> None:
        _BasePrequest.Start(self)
        _record_start(self)

    @classmethod
    def Startall(cls, requests) -> None:
        _BasePrequest.Startall(requests)
        for req in requests:
            _record_start(req)


def _persistent(req, b_attr, m_attr, sends, post=None):
    """A persistent request counting ``sends`` and logging ``post`` (op,
    peer or communicator, bytes or flows) at each Start."""
    out = Prequest(req)
    out._rm_sends = (b_attr, m_attr, sends)
    out._rm_start = post
    return out


def _record_start(req):
    spec = getattr(req, "_rm_sends", None)
    if spec is not None:
        _count_now(None, *spec)
    post = getattr(req, "_rm_start", None)
    log = _REC.log
    if post is None or log is None:
        return
    op, peer, what = post
    if op == EVENT_COLL:
        if peer >= 0:
            log.collective(peer, what)
        return
    i = log.add(op, peer, what)
    if i >= 0:
        if req._rm_fix is not None:
            global _PENDING
            _PENDING += 1
        req._rm_ev = i


# ------------------------------------------------------------------ pickles
_LOCAL = threading.local()  # .sizes: ([pickled], [unpickled]) of this thread's lowercase call


def _arm():
    """Capture the sizes this thread pickles until ``_disarm`` (only during a
    lowercase call: plain recv calls cost nothing and keep nothing)."""
    sizes = _LOCAL.sizes = ([], [])
    return sizes


def _disarm():
    _LOCAL.sizes = None


def _dumps(obj, protocol=None):
    data = _pickle.dumps(obj, protocol)
    sizes = getattr(_LOCAL, "sizes", None)
    if sizes is not None:
        sizes[0].append(len(data))
    return data


def _loads(data):
    sizes = getattr(_LOCAL, "sizes", None)
    if sizes is not None:
        sizes[1].append(raw_nbytes(data))
    return _pickle.loads(data)


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

    method.__name__ = base.__name__
    method.__doc__ = base.__doc__
    return method


def _class_creator(base, name: str):
    """A classmethod (Get_parent, Join, Create_from_group, f2py, ...) that
    returns the recording version of what mpi4py's returns."""
    create = getattr(base, name)

    def method(cls, *args, **kwargs):
        return wrap(create(*args, **kwargs))

    method.__name__ = name
    method.__doc__ = create.__doc__
    return classmethod(method)


# communicators made by class-level calls: MPI.Comm.Get_parent(), MPI.Intracomm.Create_from_group(...)
_CLASS_CREATORS = ("Get_parent", "Join", "Create_from_group", "Create_from_groups", "f2py", "fromhandle")

_CREATORS = {
    _Comm: ("Dup", "Dup_with_info", "Idup", "Idup_with_info", "Clone", "Split"),
    MPI.Intracomm: ("Create", "Create_group", "Split_type", "Create_cart", "Create_graph",
                    "Create_dist_graph", "Create_dist_graph_adjacent", "Create_intercomm",
                    "Accept", "Connect", "Spawn", "Spawn_multiple"),
    MPI.Intercomm: ("Merge", "Create", "Split"),
    MPI.Cartcomm: ("Sub",),
}


def _comm_methods() -> dict:
    ns = {}
    for name in ("Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend", "Irsend",
                 "Recv", "Irecv", "Sendrecv", "Sendrecv_replace", "Isendrecv", "Isendrecv_replace"):
        if hasattr(_Comm, name):
            ns[name] = _p2p(name)
    for name in ("send", "ssend", "bsend", "isend", "issend", "ibsend", "recv", "irecv", "sendrecv"):
        ns[name] = _p2p_pickled(name)
    for name in ("Send_init", "Ssend_init", "Bsend_init", "Rsend_init", "Psend_init", "Recv_init"):
        if hasattr(_Comm, name):
            ns[name] = _p2p_persistent(name)
    for name in ("Barrier", "Ibarrier", "barrier"):
        ns[name] = _forward(getattr(_Comm, name), _barrier)
    if hasattr(_Comm, "Barrier_init"):
        ns["Barrier_init"] = _forward(_Comm.Barrier_init, _barrier_init)
    for name, op, unit in _COLLECTIVES:
        for variant, persistent in ((name, False), ("I" + name.lower()[0] + name[1:], False),
                                    (name + "_init", True)):
            if hasattr(_Comm, variant) or hasattr(MPI.Intracomm, variant):
                ns[variant] = _collective(variant, op, unit, persistent)
    for name, op in _PICKLED_COLLECTIVES:
        if hasattr(_Comm, name) or hasattr(MPI.Intracomm, name):
            ns[name] = _coll_pickled(name, op)
    for name in _CREATORS[_Comm]:
        if hasattr(_Comm, name):
            ns[name] = _creator(_Comm, name)
    return ns


def _topo_methods() -> dict:
    ns = {}
    for name, unit in _NEIGHBOUR:
        ns[name] = _neighbour(name, unit)
        ns["I" + name.lower()[0] + name[1:]] = _neighbour("I" + name.lower()[0] + name[1:], unit)
        if hasattr(MPI.Topocomm, name + "_init"):
            ns[name + "_init"] = _neighbour(name + "_init", unit, persistent=True)
    for name in ("neighbor_allgather", "neighbor_alltoall"):
        ns[name] = _neighbour_pickled(name)
    return ns


_COMM_METHODS = _comm_methods()  # generated once, shared by every class
_TOPO_METHODS = _topo_methods()


def _make(name, base, *extra):
    ns = dict(_COMM_METHODS)
    for owner in (MPI.Intracomm, MPI.Intercomm, MPI.Cartcomm):
        if issubclass(base, owner) and owner is not _Comm:
            for meth in _CREATORS[owner]:
                if hasattr(base, meth):
                    ns[meth] = _creator(owner, meth)
    for more in extra:
        ns.update(more)
    ns = {k: v for k, v in ns.items() if hasattr(base, k)}
    ns.update({meth: _class_creator(base, meth) for meth in _CLASS_CREATORS if hasattr(base, meth)})
    ns["__doc__"] = f"{base.__name__} that records the traffic it sends (rankmap.profile)."
    ns["__module__"] = __name__
    ns["__mpi4py__"] = base
    return _StandIn(name, (_Recording, base), ns)


Comm = _make("Comm", MPI.Comm)  # MPI.Comm.Send(comm, ...) & co. record too (mpi4py.util.pkl5)
Intracomm = _make("Intracomm", MPI.Intracomm)
Intercomm = _make("Intercomm", MPI.Intercomm)
Cartcomm = _make("Cartcomm", MPI.Cartcomm, _TOPO_METHODS)
Graphcomm = _make("Graphcomm", MPI.Graphcomm, _TOPO_METHODS)
Distgraphcomm = _make("Distgraphcomm", MPI.Distgraphcomm, _TOPO_METHODS)


# ---------------------------------------------------------------- one-sided
def _rma_done(win, result, put, fetch, target):
    """Put-like calls send ``put`` to the target; Get-like calls fetch
    ``fetch``'s size from it; accumulate-and-fetch calls do both."""
    if target >= 0:
        w = win._rmw[target]
        if put is not None:
            n = buffer_bytes(put)
            c = _REC.active
            c.rb[w] += n
            c.rm[w] += 1
        if fetch is not None:
            n = buffer_bytes(fetch)
            c = _REC.active
            c.gb[w] += n
            c.gm[w] += 1
    return result


class Win(MPI.Win, metaclass=_StandIn):
    """A window that records Put/Get/Accumulate bytes per target."""

    __mpi4py__ = MPI.Win

    def __getattr__(self, name):
        if name != "_rmw":
            raise AttributeError(f"'Win' object has no attribute {name!r}")
        group = self.Get_group()
        self.__dict__["_rmw"] = table = _world_table(group)
        group.Free()
        return table


for _name, _args in {"Put": "origin, None", "Rput": "origin, None", "Accumulate": "origin, None",
                     "Raccumulate": "origin, None", "Get": "None, origin", "Rget": "None, origin",
                     "Get_accumulate": "origin, result", "Rget_accumulate": "origin, result",
                     "Fetch_and_op": "origin, result", "Compare_and_swap": "origin, result"}.items():
    setattr(Win, _name, _forward(getattr(MPI.Win, _name), _rma_done, f", {_args}, target_rank"))


# ------------------------------------------------------------------ install
_STAND_INS = {"Comm": Comm, "Intracomm": Intracomm, "Intercomm": Intercomm, "Cartcomm": Cartcomm,
              "Graphcomm": Graphcomm, "Distgraphcomm": Distgraphcomm, "Win": Win,
              "Request": Request, "Prequest": Prequest}


def install(recorder: Recorder, pcontrol=None):
    """Make ``recorder`` the target of all recording and replace the mpi4py
    module attributes (COMM_WORLD, COMM_SELF, the communicator classes, Win,
    Request, Prequest, Pcontrol, the pickler's hooks).  Returns the recording
    COMM_WORLD."""
    global _REC, _EXTERNAL, _WORLD_GROUP
    _REC = recorder
    if _ORIGINAL:
        return MPI.COMM_WORLD
    _EXTERNAL = recorder.world_size
    _WORLD_GROUP = MPI.COMM_WORLD.Get_group()
    for attr, replacement in _STAND_INS.items():
        _ORIGINAL[attr] = getattr(MPI, attr)
        setattr(MPI, attr, replacement)
    for attr in ("COMM_WORLD", "COMM_SELF", "Pcontrol"):
        _ORIGINAL[attr] = getattr(MPI, attr)
    MPI.COMM_WORLD = Intracomm(_ORIGINAL["COMM_WORLD"])
    MPI.COMM_SELF = Intracomm(_ORIGINAL["COMM_SELF"])
    if pcontrol is not None:
        MPI.Pcontrol = pcontrol
    MPI.pickle.__init__(_dumps, _loads, MPI.pickle.PROTOCOL)
    return MPI.COMM_WORLD


def active_recorder() -> Recorder | None:
    return _REC


def original(attr: str):
    """The mpi4py attribute ``install`` replaced (e.g. the plain COMM_WORLD)."""
    return _ORIGINAL.get(attr, getattr(MPI, attr))
