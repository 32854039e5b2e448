"""Score-P OTF2 traces (``traces.otf2`` + ``traces.def`` + ``traces/``),
read with the ``otf2`` package (optional extra ``rankmap[otf2]``).

Only the events that carry traffic reach Python (MPI send, isend,
collective end, RMA put/get), so the many enter/leave events stay in the C
library.  Point-to-point sends give exact bytes and message counts; the
receiver is a rank of the event's communicator, resolved through that
communicator's group to COMM_WORLD (the ``COMM_LOCATIONS`` group).  Every
location (thread) of a process counts for that process's rank.
Collectives carry only Score-P's bytes sent and received per rank, from
which the unit the profiler's models need is recovered (see ``_unit``) and
attributed to pairs with ``--collectives``.  The system tree's node names
give each rank's host.
"""

from __future__ import annotations

import contextlib
import io
import os

from ..trace import Trace
from .common import FormatError
from .traffic_table import PairTable, Progress, add_collective

_BATCH = 100_000  # events per call into the C reader
_PASS_EVENTS = 1 << 22  # events per pass over a group of locations


def _import():
    try:
        import _otf2
        import otf2
    except ImportError:
        raise FormatError('reading OTF2 traces needs the otf2 package: pip install "rankmap[otf2]"') \
            from None
    _quiet_library()
    return otf2, _otf2


_QUIET = []  # the installed error callback, kept alive as long as the library may call it


def _quiet_library() -> None:
    """The OTF2 library prints each error of a broken trace on stderr as it
    unwinds (a dozen lines for one bad chunk) and then returns the error to
    the bindings, which raise it: install an error callback that prints
    nothing, so the reader's one line is all the user sees."""
    if _QUIET:
        return
    import ctypes

    from _otf2.Config import conf

    # OTF2_ErrorCallback(userData, file, line, function, errorCode, msgFormat, va_list)
    callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64,
                                ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
    register = conf.lib.OTF2_Error_RegisterCallback
    register.argtypes = [callback, ctypes.c_void_p]
    register.restype = ctypes.c_void_p
    _QUIET.append(callback(lambda user, file, line, function, code, message, args: code))
    register(_QUIET[0], None)


def anchor_file(path: str) -> str:
    if os.path.isdir(path):
        anchors = sorted(f for f in os.listdir(path) if f.endswith(".otf2"))
        if not anchors:
            raise FormatError(f"{path}: no OTF2 anchor file (*.otf2) in this directory")
        return os.path.join(path, anchors[0])
    return path


def is_otf2(path: str) -> bool:
    if os.path.isdir(path):
        return any(f.endswith(".otf2") for f in os.listdir(path))
    return path.lower().endswith(".otf2")


def read_otf2(path: str, collectives: str = "tree") -> Trace:
    otf2, _otf2 = _import()
    anchor = anchor_file(path)
    reader = _open(anchor, otf2)
    try:
        run = _Run(reader.definitions, anchor, otf2)
        passes = _passes(reader.definitions.locations)
    finally:
        reader.close()
    return _read(run, passes, anchor, collectives, otf2, _otf2)


def _open(anchor, otf2):
    printed = io.StringIO()
    try:
        with _bindings_quiet(printed):
            return otf2.reader.Reader(anchor)
    except Exception as exc:  # the C library's errors, missing definitions
        raise FormatError(f"{anchor}: not a readable OTF2 trace ({_why(exc)}"
                          f"{_callback_failure(printed)})") from None


def _bindings_quiet(printed: io.StringIO):
    """The otf2 bindings print the traceback of a record callback that
    raised (a name that is not UTF-8 in a damaged file) before the library
    gives up: keep it out of the user's terminal, for ``_callback_failure``."""
    return contextlib.redirect_stderr(printed)


def _callback_failure(printed: io.StringIO) -> str:
    lines = [line for line in printed.getvalue().splitlines() if line.strip()]
    return f"; a record could not be read: {lines[-1].strip()[:120]}" if lines else ""


def _passes(locations) -> list[list[int]]:
    """Location refs in groups of about ``_PASS_EVENTS`` events: the C
    reader's buffers grow with the events of the locations it has open, so
    a long trace is read a group at a time."""
    out, size = [[]], 0
    for loc in locations:
        if out[-1] and size + loc.number_of_events > _PASS_EVENTS:
            out.append([])
            size = 0
        out[-1].append(loc._ref)
        size += loc.number_of_events
    return out


def _why(exc) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class _Run:
    """COMM_WORLD as the trace defines it: rank and host of every location,
    world ranks of every communicator and RMA window."""

    def __init__(self, defs, anchor, otf2):
        world = [g for g in defs.groups if g.group_type == otf2.GroupType.COMM_LOCATIONS
                 and g.paradigm == otf2.Paradigm.MPI]
        if not world:
            raise FormatError(f"{anchor}: no MPI COMM_WORLD group (COMM_LOCATIONS) in the "
                              "definitions: not an MPI trace")
        members = world[0].members
        self.n = len(members)
        rank_of_group = {}
        for r, loc in enumerate(members):
            rank_of_group.setdefault(loc.group, r)
        self.rank_of_location = {loc._ref: rank_of_group.get(loc.group, -1) for loc in defs.locations}
        self.hosts = [_host(loc.group) for loc in members]
        self.comms = {}
        for c in defs.comms:
            g = getattr(c, "group", None)
            if g is None:  # an inter-communicator: two groups, no single rank space
                continue
            if g.group_type == otf2.GroupType.COMM_SELF:
                self.comms[c._ref] = None  # the caller alone
            else:
                self.comms[c._ref] = tuple(rank_of_group.get(m.group, -1) for m in g.members)
        self.windows = {w._ref: self.comms.get(w.comm._ref) for w in defs.rma_wins}
        self.events = sum(loc.number_of_events for loc in defs.locations)


def _host(location_group) -> str | None:
    node = location_group.system_tree_parent
    first = node
    while node is not None and str(node.class_name).lower() != "node":
        node = node.parent
    node = node or first
    return None if node is None else node.name


# Score-P's bytes per collective -> the profiler's unit; p = comm size,
# r = the caller's comm rank (see Score-P's scorep_mpi_coll byte counts:
# every rank "sends" as if directly to all, itself included).
def _unit(op: str, is_root: bool, sent: float, received: float, p: int, r: int):
    if op in ("bcast", "scatter"):
        return sent / p if is_root else received
    if op in ("gather", "reduce"):
        return received / p if is_root else sent
    if op == "scan":
        return sent / (p - r) if p > r else 0.0
    if op == "exscan":
        return sent / (p - r - 1) if p - r - 1 > 0 else 0.0
    return sent / p  # allreduce, allgather(v), alltoall(v/w), reduce_scatter(_block)


_OPS = {"BCAST": "bcast", "SCATTER": "scatter", "SCATTERV": "scatter", "GATHER": "gather",
        "GATHERV": "gather", "REDUCE": "reduce", "ALLREDUCE": "allreduce",
        "ALLGATHER": "allgather", "ALLGATHERV": "allgather", "ALLTOALL": "alltoall",
        "ALLTOALLV": "alltoall", "ALLTOALLW": "alltoall", "REDUCE_SCATTER": "reduce_scatter",
        "REDUCE_SCATTER_BLOCK": "reduce_scatter", "SCAN": "scan", "EXSCAN": "exscan"}


def _read(run, passes, anchor, model, otf2, _otf2) -> Trace:
    table = PairTable()
    problems: list[str] = []  # an exception must not unwind through the C reader
    seen = [0]
    ops = {getattr(otf2.CollectiveOp, k).value: v for k, v in _OPS.items()}
    undefined = _otf2.UNDEFINED_UINT32.value
    rank_of, comms = run.rank_of_location, run.comms

    def world_of(comm, me):
        members = comms.get(comm, ())
        return (me,) if members is None else members

    def p2p(location, _time, _data, _attrs, receiver, comm, _tag, length, *_request):
        me = rank_of[location]
        members = world_of(comm, me)
        if me < 0 or receiver >= len(members) or members[receiver] < 0:
            problems.append(f"send from location {location} to rank {receiver} of communicator "
                            f"{comm}, which the definitions do not resolve to COMM_WORLD")
            return
        table.add("p2p", me, members[receiver], float(length))

    def coll_end(location, _time, _data, _attrs, op, comm, root, sent, received):
        name = ops.get(getattr(op, "value", op))
        if name is None or model == "none":
            return  # barrier, handle creation: no data
        me = rank_of[location]
        members = world_of(comm, me)
        if me not in members:
            problems.append(f"collective on communicator {comm} by location {location}, which "
                            "is not a member of it")
            return
        r = members.index(me)
        p = len(members)
        root_op = root != undefined
        is_root = root_op and root == r
        unit = _unit(name, is_root, float(sent), float(received), p, r)
        if name == "alltoall":
            add_collective(table, model, "alltoall", r, members, per_peer=[unit] * p)
        else:
            add_collective(table, model, "scan" if name == "exscan" else name, r, members,
                           root if root_op else 0, unit=unit)

    def rma(location, win, remote, nbytes, get):
        me = rank_of[location]
        members = run.windows.get(win)
        members = (me,) if members is None else members
        if remote >= len(members):
            problems.append(f"RMA to rank {remote} of window {win}, outside its communicator")
            return
        src, dst = (members[remote], me) if get else (me, members[remote])
        table.add("rma", src, dst, float(nbytes))

    def put(location, _time, _data, _attrs, win, remote, nbytes, _matching):
        rma(location, win, remote, nbytes, False)

    def get(location, _time, _data, _attrs, win, remote, nbytes, _matching):
        rma(location, win, remote, nbytes, True)

    def guarded(callback):
        """The C reader ignores a callback's exception: keep it for later."""
        def call(*args):
            try:
                callback(*args)
            except Exception as exc:  # noqa: BLE001 - reported after the batch
                problems.append(f"{type(exc).__name__}: {exc}")
        return call

    with Progress(run.events, "reading OTF2", unit="ev") as bar:
        for refs in passes:
            reader = _open(anchor, otf2)
            try:
                # the otf2 package's own reader set-up, for these locations only
                handle = reader._get_global_evt_reader_handle(
                    [reader.definitions.locations[ref] for ref in refs])
                cbs = _otf2.GlobalEvtReaderCallbacks_New()
                # one distinct callable per event type: the binding keeps one per object
                keep = [guarded(f) for f in (p2p, p2p, coll_end, put, get)]
                _otf2.GlobalEvtReaderCallbacks_SetMpiSendCallback(cbs, keep[0])
                _otf2.GlobalEvtReaderCallbacks_SetMpiIsendCallback(cbs, keep[1])
                _otf2.GlobalEvtReaderCallbacks_SetMpiCollectiveEndCallback(cbs, keep[2])
                _otf2.GlobalEvtReaderCallbacks_SetRmaPutCallback(cbs, keep[3])
                _otf2.GlobalEvtReaderCallbacks_SetRmaGetCallback(cbs, keep[4])
                _otf2.GlobalEvtReader_SetCallbacks(handle, cbs, None)
                _otf2.GlobalEvtReaderCallbacks_Delete(cbs)
                while True:
                    printed = io.StringIO()
                    with _bindings_quiet(printed):
                        got = _otf2.GlobalEvtReader_ReadEvents(handle, _BATCH)
                    if _callback_failure(printed):
                        raise FormatError(f"{anchor}: near event {seen[0] + got}"
                                          f"{_callback_failure(printed)}")
                    seen[0] += got
                    bar.update(got)
                    if seen[0] > run.events:  # a damaged record can make the reader run on forever
                        raise FormatError(f"{anchor}: damaged: the event files yield more than the "
                                          f"{run.events} events the definitions announce")
                    if problems:
                        raise FormatError(f"{anchor}: near event {seen[0]}: {problems[0]}")
                    if got < _BATCH:
                        break
            except FormatError:
                raise
            except Exception as exc:
                raise FormatError(f"{anchor}: unreadable after {seen[0]} events ({_why(exc)})") \
                    from None
            finally:
                reader.close()
    if seen[0] != run.events:
        raise FormatError(f"{anchor}: truncated: the definitions announce {run.events} events, "
                          f"the event files hold {seen[0]}")
    return table.to_trace(run.n, run.hosts, anchor, "Score-P OTF2", model)

