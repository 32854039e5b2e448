"""Per-rank traffic counters: what this rank sent to each COMM_WORLD rank.

Counting must cost almost nothing and never communicate, so each phase keeps
plain Python lists indexed by world rank (a list item increment is the
cheapest mutable counter CPython has); the interception code adds to
``recorder.active``.  Index ``world_size`` collects traffic to processes
outside COMM_WORLD (spawned or connected jobs).  Switching phase or pausing
only rebinds ``active`` (and ``log``: the event log, None while paused).
"""

from __future__ import annotations

import numpy as np

from ..trace import DEFAULT_MAX_EVENTS
from .collectives import DEFAULT_MODEL, MODELS, library_family
from .eventlog import EventRecorder

DEFAULT_PHASE = "main"


class Counters:
    """One phase's rows: bytes/messages this rank sent (p2p ``pb``/``pm``,
    collective model ``cb``/``cm``, one-sided ``rb``/``rm``) and one-sided
    bytes it fetched from each target (``gb``/``gm``: traffic target -> me)."""

    __slots__ = ("pb", "pm", "cb", "cm", "rb", "rm", "gb", "gm")

    def __init__(self, n: int):
        for name in self.__slots__:
            setattr(self, name, [0] * n)


class Recorder:
    """Counters of one rank, per phase, with a pause switch, and its event
    log (``events``; None when ``max_events`` is 0)."""

    def __init__(self, world_size: int, world_rank: int, collectives: str = DEFAULT_MODEL,
                 max_events: int = DEFAULT_MAX_EVENTS, library: str = ""):
        if collectives not in MODELS:
            raise ValueError(f"unknown collective model {collectives!r}: choose from {', '.join(MODELS)}")
        self.world_size = world_size
        self.world_rank = world_rank
        self.collectives = collectives
        self.library = library_family(library)  # whose algorithms the ``mpi`` model follows
        self.phases: dict[str, Counters] = {}
        self.phase_name = DEFAULT_PHASE
        self.paused = False
        self.pcontrol_base = DEFAULT_PHASE  # phase to return to after Pcontrol(k >= 2)
        self._scratch = Counters(world_size + 1)  # receives counts while paused
        self.active = self._phase(DEFAULT_PHASE)
        if not isinstance(max_events, int) or isinstance(max_events, bool) or max_events < 0:
            raise ValueError(f"max_events must be an integer >= 0, not {max_events!r}")
        self.events = EventRecorder(max_events) if max_events else None
        self.log = self.events  # where events go now: None while paused

    def counters(self, name: str) -> Counters:
        """Phase ``name``'s counters (made, after the phases seen so far, when new)."""
        return self._phase(name)

    def _phase(self, name: str) -> Counters:
        counters = self.phases.get(name)
        if counters is None:
            counters = self.phases[name] = Counters(self.world_size + 1)
        return counters

    def set_phase(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a phase name must be a non-empty string")
        self.phase_name = name
        if not self.paused:
            self.active = self._phase(name)

    def pause(self) -> None:
        self.paused = True
        self.active = self._scratch
        self.log = None

    def resume(self) -> None:
        self.paused = False
        self.active = self._phase(self.phase_name)
        self.log = self.events

    # ------------------------------------------------------------ read-outs
    def edges(self) -> dict[str, dict[str, np.ndarray]]:
        """Sparse per-kind arrays (src, dst, phase, bytes, msgs) in world ranks;
        dst = -1 is traffic to processes outside COMM_WORLD."""
        me, n = self.world_rank, self.world_size
        names = list(self.phases)
        out = {}
        for kind, rows in (("p2p", (("pb", "pm", False),)),
                           ("collective", (("cb", "cm", False),)),
                           ("rma", (("rb", "rm", False), ("gb", "gm", True)))):
            parts = []
            for pi, name in enumerate(names):
                c = self.phases[name]
                for b_attr, m_attr, incoming in rows:
                    b = np.asarray(getattr(c, b_attr), dtype=np.float64)
                    m = np.asarray(getattr(c, m_attr), dtype=np.int64)
                    peers = np.flatnonzero((b != 0) | (m != 0))
                    other = np.where(peers == n, -1, peers)
                    mine = np.full(peers.size, me, dtype=np.int64)
                    src, dst = (other, mine) if incoming else (mine, other)
                    parts.append((src, dst, np.full(peers.size, pi, dtype=np.int32), b[peers], m[peers]))
            out[kind] = {key: np.concatenate([p[i] for p in parts]) if parts else np.zeros(0)
                         for i, key in enumerate(("src", "dst", "phase", "bytes", "msgs"))}
        return out

    def row(self, kind: str = "p2p") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(world ranks, bytes, messages) this rank exchanged, summed over phases.

        ``p2p`` counts point-to-point and one-sided traffic (a Get counts
        against its target), ``collective`` the collective model, ``all`` both.
        """
        attrs = {"p2p": ("pb", "pm", "rb", "rm", "gb", "gm"), "collective": ("cb", "cm"),
                 "all": ("pb", "pm", "rb", "rm", "gb", "gm", "cb", "cm")}.get(kind)
        if attrs is None:
            raise ValueError(f"unknown traffic kind {kind!r}: choose p2p, collective or all")
        n = self.world_size
        b = np.zeros(n + 1)
        m = np.zeros(n + 1, dtype=np.int64)
        for c in self.phases.values():
            for i in range(0, len(attrs), 2):
                b += np.asarray(getattr(c, attrs[i]), dtype=np.float64)
                m += np.asarray(getattr(c, attrs[i + 1]), dtype=np.int64)
        b, m = b[:n], m[:n]
        b[self.world_rank] = 0
        m[self.world_rank] = 0
        dst = np.flatnonzero((b != 0) | (m != 0))
        return dst, b[dst], m[dst]
