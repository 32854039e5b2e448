"""The interposition library's event log, read into the trace's
``EventLog``: the arrays the mpi4py profiler writes into part files.

At each snapshot the library appends to its events file what it logged
since the last one: the new records and the ANY_SOURCE receives completed
since (fixes: the source and size they matched); the snapshot says how far
the file goes.  ``NativeEvents.update`` reads only what is new, so a long
run's log is read once, however often its part is written.

A record is one event of the log, except a collective with a model: one
record that becomes its COLL and this rank's flows by the counters' plan
(``counts.flows``) at the call's unit, one a message of
``int(factor x unit / messages + 0.5)`` bytes, as the mpi4py profiler logs
them (``eventlog.EventRecorder.collective``).  A WAIT names
its post's record, renumbered here to the post's event.  The first ``cap``
events are kept and ``truncated`` says there were more, as in the mpi4py
profiler's log.  The file is the library's own, but a damaged one is one
clear error (``ValueError`` naming it), never a crash.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...trace import EVENT_COLL, EVENT_CSEND, EVENT_RECV, EVENT_SEND, EVENT_WAIT, EventLog
from ..collectives import choose, library_family
from .counts import Snapshot, flows

#: rankmap_pmpi.c's rec_t and fix_t
RECORD = np.dtype([("kind", "i1"), ("op", "i1"), ("unused", "i2"), ("peer", "i4"), ("root", "i4"),
                   ("members", "i4"), ("value", "i8")])
FIX = np.dtype([("record", "i8"), ("peer", "i8"), ("bytes", "i8")])
CHUNK = b"RMEVENTS"
_HEAD = 8 + 3 * 8
#: a collective with a model (the kinds below it are rankmap.trace's EVENT_*)
MODEL = 5
assert (EVENT_SEND, EVENT_RECV, EVENT_WAIT, EVENT_COLL, EVENT_CSEND) == tuple(range(MODEL))


class NativeEvents:
    """One rank's event log as read so far from ``path`` (COUNTS.events),
    for a job of ``nranks`` with at most ``cap`` events a rank and the
    collective model ``model``."""

    def __init__(self, path, nranks: int, rank: int, cap: int, model: str):
        self.path, self.nranks, self.rank, self.cap, self.model = Path(path), nranks, rank, cap, model
        self.offset = 0                               # bytes of the file read
        self.first = np.zeros(0, dtype=np.int64)      # each record's (first) event: records[:nrec]
        self.nrec = 0
        self.total = 0                                # events of the records read, kept or not
        self.op = np.zeros(0, dtype=np.int8)          # the kept events: [:n]
        self.peer = np.zeros(0, dtype=np.int64)
        self.nbytes = np.zeros(0, dtype=np.int64)
        self.n = 0
        self.cut = False                              # more than cap events
        self.comms: list[tuple] = []                  # members of each communicator the log names
        self._comm_index: dict = {}                   # members -> index in comms
        self._group_comm: dict = {}                   # the library's group -> index in comms
        self._plans: dict = {}                        # (group, op, root, algorithm) -> flows a message
        self._library = None                          # whose algorithms the ``mpi`` model follows

    # ------------------------------------------------------------- reading
    def update(self, snap: Snapshot) -> None:
        """Read the chunks the events file holds up to what ``snap`` covers."""
        end = snap.log["file_bytes"]
        if end <= self.offset:
            return
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(end - self.offset)
        except OSError as exc:
            raise ValueError(f"{self.path}: {exc.strerror or exc}") from None
        at = 0
        while at < len(data):  # chunk by chunk: a damaged one leaves the log as it was before it
            if len(data) - at < _HEAD or data[at:at + 8] != CHUNK:
                raise ValueError(f"{self.path}: not an event log chunk at byte {self.offset + at}")
            first, nrec, nfix = (int(x) for x in np.frombuffer(data, np.int64, 3, at + 8))
            size = _HEAD + nrec * RECORD.itemsize + nfix * FIX.itemsize
            if first != self.nrec:
                raise ValueError(f"{self.path}: event log chunk at byte {self.offset + at} does not follow "
                                 f"the one before it")
            if nrec < 0 or nfix < 0 or at + size > len(data):
                raise ValueError(f"{self.path}: event log chunk at byte {self.offset + at} is cut short")
            records = np.frombuffer(data, RECORD, nrec, at + _HEAD)
            fixes = np.frombuffer(data, FIX, nfix, at + _HEAD + nrec * RECORD.itemsize)
            self._check(snap, records, fixes, at)
            self._add(snap, records)
            self._fix(fixes)
            at += size
            self.offset += size

    def _check(self, snap: Snapshot, rec: np.ndarray, fixes: np.ndarray, at: int) -> None:
        kind, peer, value = rec["kind"], rec["peer"], rec["value"]
        index = self.nrec + np.arange(rec.size)
        p2p = (kind == EVENT_SEND) | (kind == EVENT_RECV) | (kind == EVENT_CSEND)
        coll = (kind == EVENT_COLL) | (kind == MODEL)
        model = kind == MODEL
        bad = ((kind < 0) | (kind > MODEL)
               | (p2p & ((peer < np.where(kind == EVENT_RECV, -1, 0)) | (peer >= self.nranks) | (value < 0)))
               | ((kind == EVENT_WAIT) & ((value < 0) | (value >= index)))
               | (coll & ((rec["members"] < 0) | (rec["members"] >= len(snap.groups))))
               | (model & ((peer < 0) | (peer >= len(snap.groups))
                           | (rec["op"] < 0) | (rec["op"] >= len(snap.ops)))))
        total = self.nrec + rec.size
        if bad.any() or (fixes.size and ((fixes["record"] < 0).any() or (fixes["record"] >= total).any()
                                         or (fixes["peer"] < -1).any() or (fixes["peer"] >= self.nranks).any())):
            raise ValueError(f"{self.path}: event log chunk at byte {self.offset + at} names an event, "
                             f"rank, group or operation that does not exist")

    def _comm(self, snap: Snapshot, group: int) -> int:
        """The log's index of the communicator whose world ranks are ``group``'s."""
        c = self._group_comm.get(group)
        if c is None:
            members = tuple(snap.groups[group].ranks.tolist())
            c = self._group_comm[group] = self._comm_index.setdefault(members, len(self.comms))
            if c == len(self.comms):
                self.comms.append(members)
        return c

    def _plan(self, snap: Snapshot, group: int, op: int, root: int, unit: float) -> tuple[np.ndarray, ...]:
        """(world rank, factor, messages) of each message of the plan at
        ``unit`` bytes, remembered per algorithm (as the mpi4py profiler's)."""
        if self._library is None:
            self._library = library_family(snap.mpi_library)
        alg = choose(snap.ops[op], len(snap.groups[group].ranks), unit, self._library) \
            if self.model == "mpi" else None
        key = (group, op, root, alg)
        if key not in self._plans:
            per = [(w, f, m) for w, f, m in flows(snap, self.model, self._library, group, op, root, unit)
                   for _ in range(m)]
            self._plans[key] = tuple(np.array([x[i] for x in per], dtype=t)
                                     for i, t in enumerate((np.int64, np.float64, np.int64)))
        return self._plans[key]

    def _add(self, snap: Snapshot, rec: np.ndarray) -> None:
        """The events of new records: a modelled collective's flows after its
        COLL, WAITs renumbered to their post's event; the first cap kept."""
        kind = rec["kind"].astype(np.int64)
        size = np.ones(rec.size, dtype=np.int64)
        model = np.flatnonzero(kind == MODEL)
        if model.size:
            unit = np.ascontiguousarray(rec["value"][model]).view(np.float64)
            keys, inverse = np.unique(np.stack([rec["peer"][model], rec["op"][model], rec["root"][model], unit],
                                               axis=1), axis=0, return_inverse=True)
            inverse = inverse.ravel()
            plans = [self._plan(snap, int(g), int(o), int(r), float(u)) for g, o, r, u in keys]
            count = np.array([len(p[0]) for p in plans], dtype=np.int64)
            size[model] = 1 + count[inverse]
        at = np.cumsum(size) - size  # each record's first event within the new ones
        self.first = _room(self.first, self.nrec, rec.size)
        self.first[self.nrec:self.nrec + rec.size] = self.total + at
        self.nrec += rec.size
        m = int(size.sum())
        op = np.where(kind == MODEL, EVENT_COLL, kind).astype(np.int8)
        wait = kind == EVENT_WAIT
        peer = rec["peer"].astype(np.int64)
        peer[wait] = self.first[rec["value"][wait]]
        nbytes = np.where((kind == EVENT_SEND) | (kind == EVENT_RECV) | (kind == EVENT_CSEND), rec["value"], 0)
        coll = np.flatnonzero((kind == EVENT_COLL) | (kind == MODEL))
        if coll.size:
            groups = rec["members"][coll]
            comm = {g: self._comm(snap, g) for g in dict.fromkeys(groups.tolist())}
            peer[coll] = [comm[g] for g in groups.tolist()]
        events = (np.empty(m, dtype=np.int8), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64))
        for out, value in zip(events, (op, peer, nbytes)):
            out[at] = value
        if model.size:  # the flows, after each modelled collective's COLL
            per = count[inverse]
            within = np.arange(int(per.sum())) - np.repeat(np.cumsum(per) - per, per)
            offsets = np.concatenate([[0], np.cumsum(count)[:-1]])
            which = np.repeat(offsets[inverse], per) + within
            world, factor, messages = (np.concatenate([p[i] for p in plans]) for i in range(3))
            where = np.repeat(at[model] + 1, per) + within
            events[0][where] = EVENT_CSEND
            events[1][where] = world[which]
            events[2][where] = (factor[which] * np.repeat(unit, per) / messages[which] + 0.5).astype(np.int64)
        self.total += m
        keep = min(m, self.cap - self.n)
        if keep < m:
            self.cut = True
        if keep > 0:
            self.op, self.peer, self.nbytes = (_room(a, self.n, keep, self.cap)
                                               for a in (self.op, self.peer, self.nbytes))
            for store, new in zip((self.op, self.peer, self.nbytes), events):
                store[self.n:self.n + keep] = new[:keep]
            self.n += keep

    def _fix(self, fixes: np.ndarray) -> None:
        """ANY_SOURCE receives that completed: the source and size they matched."""
        event = self.first[fixes["record"]]
        kept = event < self.n
        self.peer[event[kept]] = fixes["peer"][kept]
        self.nbytes[event[kept]] = fixes["bytes"][kept]

    # ------------------------------------------------------------ the log
    def event_log(self, snap: Snapshot) -> EventLog:
        """The log read so far as a one-rank ``EventLog`` (a part file's):
        truncated when it reached the cap, here or in the library (which
        says its cap: one below this one's could not be held)."""
        truncated = self.cut or bool(snap.log["truncated"]) or \
            (snap.status != "started" and snap.log["cap"] < self.cap)
        n = self.n
        return EventLog.of_rank(self.nranks, self.rank, self.op[:n].copy(), self.peer[:n].copy(),
                                self.nbytes[:n].copy(), list(self.comms), truncated)


def _room(a: np.ndarray, used: int, more: int, cap: int | None = None) -> np.ndarray:
    """``a`` with room for ``more`` items after its first ``used`` (doubled
    when it grows, at most ``cap``): appending stays linear in all."""
    if used + more <= a.size:
        return a
    size = max(used + more, 2 * a.size, 1024)
    out = np.zeros(size if cap is None else min(size, max(cap, used + more)), dtype=a.dtype)
    out[:used] = a[:used]
    return out
