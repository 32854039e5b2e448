"""A snapshot of the interposition library's counters, read into the
profiler's own record of one rank.

The C library keeps rows of bytes and messages per COMM_WORLD peer (point-
to-point, exact collective sends, one-sided put and get) and, for the
collectives that go through a model, events (phase, group, operation,
root) -> (sum of unit bytes, calls).  ``recorder`` spreads each event over
pairs with ``rankmap.profile.collectives`` (the same models as for mpi4py
programs: a plan is linear in the unit, so the summed units give the exact
per-call result; the ``mpi`` model picks its algorithm by the mean unit of
the calls and the library the snapshot names) and returns a ``Recorder``,
whose ``edges()`` are what a trace part holds.  The snapshot also says how
far the event log's file (``events``) goes.  The layout of the file is
described at the top of ``rankmap_pmpi.c``; the file is the library's own,
written atomically, but a damaged one is still one clear error
(``ValueError``), never a crash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..collectives import intercomm_plan, plan
from ..recorder import Recorder

MAGIC, END, VERSION = b"RMCOUNTS", b"RMCEND\0\0", 2
STATUSES = ("started", "flushed", "finalized", "exited")
#: the library's row kinds and the recorder's (bytes, messages) attributes
ROWS = (("pb", "pm"), ("cb", "cm"), ("rb", "rm"), ("gb", "gm"))
ROOT_HERE = -2  # MPI_ROOT on an intercommunicator: this rank is the root


@dataclass
class Group:
    inter: bool
    me: int           # rank in the communicator (-1 on an intercommunicator)
    ranks: np.ndarray  # world rank of each member (the remote group of an intercommunicator)


@dataclass
class Snapshot:
    """One rank's counters as the library wrote them."""

    status: str
    rank: int
    size: int
    leader: bool      # the first rank on its host: it records the host's machine tree
    pid: int
    t_start: float
    t_end: float
    host: str
    mpi_library: str
    mpi_standard: str
    cpus: list
    ops: list
    phases: list
    rows: list = field(default_factory=list)    # per kind: (phase, peer, bytes, msgs) arrays
    groups: list = field(default_factory=list)
    events: dict = field(default_factory=dict)  # phase, group, op, root, unit, calls arrays
    log: dict = field(default_factory=dict)     # the event log: cap, truncated, file_bytes, file_records


class _Reader:
    def __init__(self, data: bytes, path: Path):
        self.data, self.at, self.path = data, 0, path

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise ValueError(f"{self.path}: truncated counters snapshot")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def array(self, dtype, count: int) -> np.ndarray:
        dtype = np.dtype(dtype)
        return np.frombuffer(self.take(int(count) * dtype.itemsize), dtype=dtype)

    def i64(self) -> int:
        return int(self.array(np.int64, 1)[0])

    def f64(self) -> float:
        return float(self.array(np.float64, 1)[0])

    def text(self) -> str:
        return self.take(self.i64()).decode("utf-8", "replace")


def read_snapshot(path) -> Snapshot:
    """Read a counters snapshot (``ValueError`` naming the file when damaged)."""
    path = Path(path)
    r = _Reader(path.read_bytes(), path)
    if r.take(8) != MAGIC:
        raise ValueError(f"{path}: not a rankmap counters snapshot")
    version, status = (int(x) for x in r.array(np.uint32, 2))
    if version != VERSION or status >= len(STATUSES):
        raise ValueError(f"{path}: counters snapshot version {version}, status {status}: "
                         f"not written by this rankmap's library")
    rank, size, leader, pid = (r.i64() for _ in range(4))
    t_start, t_end = r.f64(), r.f64()
    host, library, standard = r.text(), r.text(), r.text()
    cpus = r.array(np.int32, r.i64()).tolist()
    ops = [r.text() for _ in range(r.i64())]
    phases = [r.text() for _ in range(r.i64())]
    if not 0 <= rank < size:
        raise ValueError(f"{path}: rank {rank} of {size}")
    snap = Snapshot(STATUSES[status], rank, size, bool(leader), pid, t_start, t_end, host, library,
                    standard, cpus, ops, phases)
    for _kind in ROWS:
        k = r.i64()
        row = (r.array(np.int32, k), r.array(np.int32, k), r.array(np.float64, k), r.array(np.int64, k))
        if k and (row[0].max() >= len(phases) or row[1].min() < 0 or row[1].max() > size):
            raise ValueError(f"{path}: a row names a phase or peer that does not exist")
        snap.rows.append(row)
    for _ in range(r.i64()):
        inter, me, members = (int(x) for x in r.array(np.int32, 3))
        ranks = r.array(np.int32, members)
        if members and (ranks.min() < 0 or ranks.max() > size):
            raise ValueError(f"{path}: a group names a rank outside 0..{size}")
        snap.groups.append(Group(bool(inter), me, ranks))
    k = r.i64()
    snap.events = {name: r.array(dtype, k) for name, dtype in
                   (("phase", np.int32), ("group", np.int32), ("op", np.int32), ("root", np.int32),
                    ("unit", np.float64), ("calls", np.int64))}
    if k and (snap.events["phase"].max() >= len(phases) or snap.events["group"].max() >= len(snap.groups)
              or snap.events["op"].max() >= len(ops)):
        raise ValueError(f"{path}: an event names a phase, group or operation that does not exist")
    snap.log = dict(zip(("cap", "truncated", "file_bytes", "file_records"), (r.i64() for _ in range(4))))
    if min(snap.log.values()) < 0 or snap.log["file_records"] > snap.log["cap"]:
        raise ValueError(f"{path}: the event log's sizes do not add up")
    if r.take(8) != END:
        raise ValueError(f"{path}: counters snapshot does not end where it should")
    return snap


def flows(snap: Snapshot, model: str, library: str, group: int, op: int, root: int,
          unit: float) -> list[tuple[int, float, int]]:
    """``(world rank, factor, messages)`` this rank sends in a collective the
    library recorded on ``group`` (the peers it addresses), by ``model`` at
    ``unit`` bytes a call (the ``mpi`` model chooses its algorithm by it and
    ``library``'s rules): the mpi4py profiler's plan (``wrappers._plan``: a
    barrier has flows under the ``mpi`` model alone)."""
    name = snap.ops[op]
    if model == "none" or (name == "barrier" and model != "mpi"):
        return []
    g = snap.groups[group]
    if g.inter:
        edges = intercomm_plan(name, len(g.ranks), root, root == ROOT_HERE)
    else:
        edges = plan(model, name, g.me, len(g.ranks), root, unit, library)
    return [(int(g.ranks[q]), f, m) for q, f, m in edges]


def recorder(snap: Snapshot, model: str) -> Recorder:
    """The snapshot as the mpi4py profiler's ``Recorder`` of that rank, the
    collective events spread over pairs by ``model``."""
    rec = Recorder(snap.size, snap.rank, model, max_events=0, library=snap.mpi_library)  # the log: events.py
    per_phase = {name: [[np.zeros(snap.size + 1), np.zeros(snap.size + 1, dtype=np.int64)]
                        for _ in ROWS] for name in snap.phases}
    for kind, (phase, peer, nbytes, msgs) in enumerate(snap.rows):
        for p, name in enumerate(snap.phases):
            keep = phase == p
            np.add.at(per_phase[name][kind][0], peer[keep], nbytes[keep])
            np.add.at(per_phase[name][kind][1], peer[keep], msgs[keep])
    ev = snap.events
    for phase, group, op, root, unit, calls in zip(*(ev[k].tolist() for k in
                                                     ("phase", "group", "op", "root", "unit", "calls"))):
        b, m = per_phase[snap.phases[phase]][1]
        for w, factor, messages in flows(snap, model, rec.library, group, op, root, unit / max(calls, 1)):
            b[w] += factor * unit
            m[w] += messages * calls
    for name in snap.phases:
        counters = rec.counters(name)
        for (b_attr, m_attr), (b, m) in zip(ROWS, per_phase[name]):
            setattr(counters, b_attr, b.tolist())
            setattr(counters, m_attr, m.tolist())
    return rec
