"""What the readers of other tools' traces share: a pair table that
accumulates a run's traffic from an event stream in memory bounded by the
number of distinct pairs (never the events), collectives attributed to
pairs with the profiler's ``--collectives`` models, and the ``Trace`` the
result becomes (so ``map``, ``show`` and the recorded "before" placement
treat every recorded run alike)."""

from __future__ import annotations

import os
import sys
from functools import lru_cache

import numpy as np

from ..profile.collectives import plan
from ..limits import MAX_INT
from ..trace import RankInfo, Trace

KINDS = ("p2p", "collective", "rma")
_FLUSH = 1 << 16  # events buffered before they are folded into the table (at least)


class PairTable:
    """Bytes and message counts per (kind, src, dst) over world ranks.

    ``add`` buffers one event; the buffer is folded into per-pair sums once
    it holds ``_FLUSH`` events or as many as there are pairs, so memory
    stays O(pairs + _FLUSH) however long the trace, and each fold's sort is
    paid for by as many new events.  A byte or message count that is
    negative or not a number (a damaged record) is remembered and refused
    by ``to_trace``: summed into its pair it would go unseen."""

    def __init__(self):
        self._sums = {k: (np.zeros(0, np.int64), np.zeros(0), np.zeros(0)) for k in KINDS}
        self._buf = {k: ([], [], [], []) for k in KINDS}
        self._pending = 0
        self._limit = _FLUSH
        self.bad_count: str | None = None  # the first damaged record's count, said as a phrase

    def add(self, kind: str, src: int, dst: int, nbytes: float, msgs: float = 1.0) -> None:
        if self.bad_count is None and not (0 <= nbytes < np.inf and 0 <= msgs < np.inf):
            self.bad_count = f"a recorded message of {nbytes!r} bytes" if not 0 <= nbytes < np.inf \
                else f"a record of {msgs!r} messages"
        s, d, b, m = self._buf[kind]
        s.append(src)
        d.append(dst)
        b.append(nbytes)
        m.append(msgs)
        self._pending += 1
        if self._pending >= self._limit:
            self._fold()

    def _fold(self) -> None:
        for kind in KINDS:
            s, d, b, m = self._buf[kind]
            if not s:
                continue
            keys0, b0, m0 = self._sums[kind]
            # world ranks fit in 31 bits: one int64 key per pair
            keys = np.concatenate([keys0, np.array(s, np.int64) << 31 | np.array(d, np.int64)])
            uniq, inv = np.unique(keys, return_inverse=True)
            self._sums[kind] = (uniq, np.bincount(inv, np.concatenate([b0, b]), uniq.size),
                                np.bincount(inv, np.concatenate([m0, m]), uniq.size))
            self._buf[kind] = ([], [], [], [])
        self._pending = 0
        self._limit = max(_FLUSH, sum(v[0].size for v in self._sums.values()))

    def edges(self, kind: str) -> dict:
        self._fold()
        keys, b, m = self._sums[kind]
        return {"src": keys >> 31, "dst": keys & ((1 << 31) - 1),
                "phase": np.zeros(keys.size, np.int32), "bytes": b, "msgs": np.rint(m).astype(np.int64)}

    def to_trace(self, nranks: int, hosts, source: str, tool: str, collectives: str | None,
                 times=None, argv=None) -> Trace:
        """The run as a rankmap ``Trace``: ``hosts`` per world rank (None
        where the format does not say), ``times`` optional (start, end)
        per rank."""
        if self.bad_count is not None:
            raise ValueError(f"{source}: {self.bad_count}: counts are finite and >= 0 "
                             "(a damaged trace?)")
        self._fold()
        for kind, (_, b, m) in self._sums.items():
            if b.size and not (np.isfinite(b).all() and m.max() < MAX_INT):
                raise ValueError(f"{source}: the {kind} bytes or messages of a pair sum past "
                                 f"{MAX_INT:.3g} (a damaged trace?)")
        edges = {k: self.edges(k) for k in KINDS}
        for e in edges.values():
            if e["src"].size and max(e["src"].max(), e["dst"].max()) >= nranks:
                bad = int(max(e["src"].max(), e["dst"].max()))
                raise ValueError(f"{source}: traffic names rank {bad}, but the run has {nranks} ranks")
        info = {}
        for r in range(nranks):
            t0, t1 = times[r] if times is not None else (0.0, 0.0)
            info[r] = RankInfo(None if hosts is None else hosts[r], [], "complete", t0, t1)
        meta = {"collectives": collectives or "none", "mpi": {"library": f"? (read from {tool})"},
                "argv": list(argv or []), "tool": tool}
        return Trace(nranks, edges, ["run"], info, {}, meta, source)


@lru_cache(maxsize=65536)
def collective_plan(model: str, op: str, rank: int, size: int, root: int, nbytes: float | None = None) -> tuple:
    """``(peer, factor, messages)`` (comm ranks) the calling rank sends in
    ``op`` with a unit of ``nbytes``: the profiler's plan (the ``mpi``
    model as MPICH selects: these traces do not name their library), cached
    because a trace repeats a few collectives millions of times."""
    return tuple(plan(model, op, rank, size, root, nbytes))


class Progress:
    """A progress bar on a terminal for reads that last more than a few
    seconds (tqdm); silent when stderr is not a terminal."""

    def __init__(self, total: float, what: str, unit: str = "B", delay: float = 2.0):
        self._bar = None
        if not sys.stderr.isatty() or os.environ.get("RANKMAP_NO_PROGRESS"):
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=total, desc=what, unit=unit, unit_scale=True, delay=delay,
                         leave=False, mininterval=0.5)

    def update(self, n: float) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def add_collective(table: PairTable, model: str, op: str, rank: int, world, root: int = 0,
                   unit: float = 0.0, per_peer=None) -> None:
    """Attribute one collective call of comm rank ``rank`` to pairs, as the
    profiler does: ``unit`` bytes along the model's plan, or ``per_peer``
    exact bytes per comm rank (alltoall(v/w), a root's scatterv under the
    ``root`` model).  ``world[q]`` is the world rank of comm rank ``q``."""
    if model == "none":
        return
    me = world[rank]
    if per_peer is not None:
        for q, nbytes in enumerate(per_peer):
            if nbytes and q != rank:
                table.add("collective", me, world[q], nbytes)
        return
    if not unit:
        return
    for q, factor, messages in collective_plan(model, op, rank, len(world), root, unit):
        table.add("collective", me, world[q], factor * unit, messages)
