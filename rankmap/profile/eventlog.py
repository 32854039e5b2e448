"""This rank's event log: its point-to-point posts, waits and collectives in
program order, as ``rankmap.trace.EventLog`` stores them.

The interception code appends three ints per event (op, peer, bytes) to one
plain list: one C call per event or per blocking call's post and wait, and
no object per event beyond the ints (the cheapest growing store CPython
has: about 150 ns an event on the development machine).  The part-file
flush turns the list into numpy arrays, only the events added since the
last flush, from another thread: a list slice is taken whole under the
GIL, and the ANY_SOURCE receives completed since (``fix``) are written
again over the converted part.  At ``cap`` events the log stops and says
so (``truncated``); the counters go on.
"""

from __future__ import annotations

import numpy as np

from ..trace import EVENT_COLL, EVENT_CSEND, EVENT_RECV, EVENT_SEND, EVENT_WAIT, EventLog


class EventRecorder:
    """Events of one rank (``ev``: op, peer, bytes of each in turn) and the
    communicators its collectives name (member tuples, local indices)."""

    __slots__ = ("ev", "cap", "_room", "truncated", "comms", "_index", "fixes", "_arrays", "_fixes_done")

    def __init__(self, cap: int):
        self.ev: list[int] = []
        self.cap = int(cap)
        self._room = 3 * self.cap  # list items the log may hold
        self.truncated = False
        self.comms: list[tuple] = []
        self._index: dict = {}
        self.fixes: list[int] = []  # events rewritten after they were logged
        self._arrays = (np.zeros(0, dtype=np.int8), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        self._fixes_done = 0

    def __len__(self) -> int:
        return len(self.ev) // 3

    # ---------------------------------------------------------- hot path
    def add(self, op: int, peer: int, nbytes: int) -> int:
        """Log one event; its index, or -1 once the log is full."""
        ev = self.ev
        k = len(ev)
        if k < self._room:
            ev += (op, peer, nbytes)
            return k // 3
        self.truncated = True
        return -1

    def post_wait(self, op: int, peer: int, nbytes: int) -> int:
        """A blocking call: the post, then the wait for it."""
        ev = self.ev
        k = len(ev)
        if k + 6 > self._room:
            i = self.add(op, peer, nbytes)
            if i >= 0:
                self.add(EVENT_WAIT, i, 0)
            return i
        i = k // 3
        ev += (op, peer, nbytes, EVENT_WAIT, i, 0)
        return i

    def wait(self, i: int) -> None:
        """The rank waits for the request of post ``i``."""
        ev = self.ev
        if len(ev) < self._room:
            ev += (EVENT_WAIT, i, 0)
        else:
            self.truncated = True

    def waits(self, first: int, last: int) -> None:
        """The rank waits for the posts ``first..last`` (one request)."""
        for i in range(first, last + 1):
            self.wait(i)

    def exchange(self, dest: int, sent: int, source: int, received: int) -> None:
        """A blocking send-receive: both posts, then the waits for both."""
        ev = self.ev
        k = len(ev)
        if k + 12 > self._room:
            s, r = self.add(EVENT_SEND, dest, sent), self.add(EVENT_RECV, source, received)
            for j in (s, r):
                if j >= 0:
                    self.wait(j)
            return
        i = k // 3
        ev += (EVENT_SEND, dest, sent, EVENT_RECV, source, received, EVENT_WAIT, i, 0, EVENT_WAIT, i + 1, 0)

    def collective(self, comm: int, sends, unit=1) -> None:
        """A collective on local communicator ``comm`` and its flows:
        ``(world rank, factor, messages)``, ``factor x unit`` bytes in that
        many messages, one flow each."""
        if self.add(EVENT_COLL, comm, 0) < 0:
            return
        for w, f, m in sends:
            nbytes = int(f * unit / m + 0.5) if m else 0
            for _ in range(m):
                if self.add(EVENT_CSEND, w, nbytes) < 0:
                    return

    def fix(self, i: int, peer: int, nbytes: int) -> None:
        """Rewrite a receive when it completes (the source it matched, its size)."""
        self.ev[3 * i + 1] = peer
        self.ev[3 * i + 2] = nbytes
        self.fixes.append(i)

    # ------------------------------------------------------------- tables
    def comm(self, members: tuple) -> int:
        """Local index of the communicator of these world ranks."""
        c = self._index.get(members)
        if c is None:
            c = self._index[members] = len(self.comms)
            self.comms.append(members)
        return c

    # ----------------------------------------------------------- read-outs
    def stamp(self) -> tuple:
        """Changes when the log does (a part file is rewritten then)."""
        return len(self.ev), len(self.fixes), self.truncated

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(op, peer, nbytes) as numpy arrays: the events logged so far."""
        op, peer, nbytes = self._arrays
        done, n = op.size, len(self.ev) // 3
        if n > done:
            new = np.array(self.ev[3 * done:3 * n], dtype=np.int64).reshape(-1, 3)
            op = np.concatenate([op, new[:, 0].astype(np.int8)])
            peer = np.concatenate([peer, new[:, 1]])
            nbytes = np.concatenate([nbytes, new[:, 2]])
        m = len(self.fixes)
        if m > self._fixes_done:  # on copies: logs handed out earlier stay as they were
            peer, nbytes = peer.copy(), nbytes.copy()
            ev = self.ev
            for i in self.fixes[self._fixes_done:m]:
                if i < n:  # a later event is converted, fixed, next time
                    peer[i], nbytes[i] = ev[3 * i + 1], ev[3 * i + 2]
        self._arrays, self._fixes_done = (op, peer, nbytes), m
        return op, peer, nbytes

    def event_log(self, nranks: int, rank: int) -> EventLog:
        """This rank's log as a one-rank ``EventLog`` (a part file's)."""
        op, peer, nbytes = self.arrays()
        return EventLog.of_rank(nranks, rank, op, peer, nbytes, list(self.comms), self.truncated)
