"""The time a program's recorded message order takes on the machine's links.

The link time (the busiest link's bytes over its bandwidth) prices a run's
traffic as if every message could go at once; a pipelined program (a
wavefront sweep) waits for its messages in order, so mappings that load the
links alike can run apart.  Here each rank walks its recorded posts and waits
(``trace.EventLog``): a send starts a flow at once (eager), the flows share
the tree links max-min fair (progressive filling, recomputed whenever a flow
starts or ends), each message arrives the latency of the level it crosses
after its last byte (``topology.message_cost``'s alpha; a message without
bytes takes that alone), and a wait holds its rank until the request's
message is delivered.  Where no link's bandwidth is given the times are
relative (distance units) and carry no latency.  No compute time, and a
collective's modelled messages all start when its last member arrives (its
steps overlap): a lower bound, as the link time is, in its units.  numpy,
Python and one compiled kernel (the rates, ``_kernels.fair_rates``); it
never imports MPI.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple

import numpy as np

from ._kernels import fair_rates
from .topology import Topology
from .topology.bandwidth import link_bandwidths
from .topology.message_cost import message_costs
from .trace import EVENT_COLL, EVENT_CSEND, EVENT_RECV, EVENT_SEND, EVENT_WAIT

#: flows ending within this fraction of the next end end with it
_TIE = 1e-9
#: flows delivered between two looks at the deadline
_CHECK_EVERY = 256


class Replay(NamedTuple):
    """``seconds``: when the last event replayed completed, the last flow
    delivered included (relative units when the topology gives no
    bandwidths); ``replayed`` of ``total`` events; ``stalled``: ranks left
    waiting for a partner that never came (a truncated log)."""

    seconds: float
    replayed: int
    total: int
    stalled: int


def replay_time(events, pe_of_rank, topology, *, deadline=None) -> Replay | None:
    """Replay ``events`` (a ``trace.EventLog``) with world rank r on PE
    ``pe_of_rank[r]`` of the tree ``topology``.  None when ``deadline``
    expires first (its ``hit`` is then set): the caller falls back to the
    link time, as it does for a mesh (ValueError)."""
    if not isinstance(topology, Topology):
        raise ValueError(f"the replay follows tree links; a {type(topology).__name__} has none "
                         "(use the link time)")
    ptr = np.asarray(events.ptr, dtype=np.int64)
    n = ptr.size - 1
    pe = np.asarray(pe_of_rank, dtype=np.int64)
    if pe.shape != (n,) or (n and (pe.min() < 0 or pe.max() >= topology.n_pes)):
        raise ValueError(f"pe_of_rank: need one PE in [0, {topology.n_pes}) for each of the log's "
                         f"{n} ranks, got shape {pe.shape}")
    return _Replayer(events, pe, topology).run(deadline)


def _ranked(keys: np.ndarray) -> np.ndarray:
    """How many earlier entries share each entry's key."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    first = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    seq = np.empty(keys.size, dtype=np.int64)
    seq[order] = np.arange(keys.size) - np.repeat(first, np.diff(np.r_[first, keys.size]))
    return seq


def _match(send_idx, send_key, recv_idx, recv_key) -> np.ndarray:
    """The receive each send meets, else -1: the k-th send of a key (an
    ordered rank pair) meets the k-th receive of that key.  ``send_idx``
    ascending."""
    seq = np.concatenate([_ranked(send_key), _ranked(recv_key)])
    key = np.concatenate([send_key, recv_key])
    is_recv = np.r_[np.zeros(send_key.size, np.int8), np.ones(recv_key.size, np.int8)]
    idx = np.concatenate([send_idx, recv_idx])
    o = np.lexsort((is_recv, seq, key))
    key, seq, is_recv, idx = key[o], seq[o], is_recv[o], idx[o]
    pair = np.flatnonzero((key[1:] == key[:-1]) & (seq[1:] == seq[:-1]) & (is_recv[1:] > is_recv[:-1]))
    out = np.full(send_idx.size, -1, dtype=np.int64)
    out[np.searchsorted(send_idx, idx[pair])] = idx[pair + 1]
    return out


def _paths(topology: Topology, src, dst) -> tuple[np.ndarray, np.ndarray]:
    """The links of each PE pair that take time, as rows of indices into
    the returned capacities (bytes/s), padded with the last index (an
    infinite link).  Up from the source's leaf to just below the LCA, down
    from there to the destination's leaf (``cost.all_link_loads``' numbering)."""
    inverse = link_bandwidths(topology).inverse
    parent, nn = topology.parent, topology.n_nodes
    inner = src != dst
    top = np.full(src.size, -1, dtype=np.int64)
    top[inner] = topology.lca(src[inner], dst[inner])
    x, y = topology.leaf_of_pe[src], topology.leaf_of_pe[dst]
    cols = []
    for _ in range(topology.max_depth):
        up, down = inner & (x != top), inner & (y != top)
        if not (up.any() or down.any()):
            break
        cols += [np.where(up, x, -1), np.where(down, nn + y, -1)]
        x, y = np.where(up, parent[x], x), np.where(down, parent[y], y)
    links = np.stack(cols, axis=1) if cols else np.full((src.size, 1), -1, dtype=np.int64)
    links[(links >= 0) & (inverse[np.maximum(links, 0)] <= 0)] = -1
    used = np.unique(links[links >= 0])
    local = np.where(links >= 0, np.searchsorted(used, links), used.size)
    local.sort(axis=1)  # the pads last, then as few columns as the longest path
    width = max(int((local < used.size).sum(axis=1).max(initial=0)), 1)
    return local[:, :width], np.r_[1.0 / inverse[used], np.inf]


class _Replayer:
    """One replay: the log's matching and paths worked out once (numpy),
    then the ranks' walk and the flows' progress in time.  Per event: its
    op, ``arg`` (WAIT: the request's global index, ``total`` when it names
    none; SEND: the matched RECV, -1 if none; COLL: its collective), whether
    its flow moves no bytes over a link, its latency, its PE pair (flows)
    and bytes left."""

    def __init__(self, events, pe: np.ndarray, topology: Topology):
        ptr = np.asarray(events.ptr, dtype=np.int64)
        op = np.asarray(events.op, dtype=np.int64)
        peer = np.asarray(events.peer, dtype=np.int64)
        nbytes = np.asarray(events.nbytes, dtype=np.int64)
        n, total = ptr.size - 1, int(ptr[-1])
        rank = np.repeat(np.arange(n), np.diff(ptr))
        arg = np.zeros(total, dtype=np.int64)
        wait = op == EVENT_WAIT
        arg[wait] = total
        ok = wait & (peer >= 0) & (peer < np.arange(total) - ptr[rank])
        arg[ok] = ptr[rank[ok]] + peer[ok]
        # point-to-point: per ordered pair, the k-th send meets the k-th receive
        to_world = (peer >= 0) & (peer < n)
        sends = np.flatnonzero((op == EVENT_SEND) & to_world)
        recvs = np.flatnonzero((op == EVENT_RECV) & to_world)
        arg[op == EVENT_SEND] = -1
        arg[sends] = _match(sends, rank[sends] * n + peer[sends], recvs, peer[recvs] * n + rank[recvs])
        # collectives: a rank's k-th COLL on a communicator meets every member's k-th
        comm_ptr = np.asarray(events.comm_ptr, dtype=np.int64)
        colls = np.flatnonzero(op == EVENT_COLL)
        comm = peer[colls]
        if colls.size and (comm.min() < 0 or comm.max() >= comm_ptr.size - 1):
            raise ValueError("event log: a collective names a communicator the log does not have")
        nth = _ranked(rank[colls] * max(comm_ptr.size - 1, 1) + comm)
        keys, inst = np.unique(np.stack([comm, nth]), axis=1, return_inverse=True)
        arg[colls] = inst.ravel()
        # flows: the path of their PE pair; same PE, free links, no bytes or no world destination: instant
        flows = np.flatnonzero((op == EVENT_SEND) | (op == EVENT_CSEND))
        src, dst = pe[rank[flows]], pe[np.clip(peer[flows], 0, max(n - 1, 0))]
        pairs, pair = np.unique(np.stack([src, dst]), axis=1, return_inverse=True)
        self.paths, self.capacity = _paths(topology, pairs[0], pairs[1])
        self.pair = np.zeros(total, dtype=np.int64)
        self.pair[flows] = pair.ravel()
        instant = np.zeros(total, dtype=bool)
        instant[flows] = ((self.paths[self.pair[flows]] == self.capacity.size - 1).all(axis=1)
                          | (nbytes[flows] <= 0) | ~to_world[flows])
        latency = np.zeros(total)
        if link_bandwidths(topology).unit == "s":  # seconds: each message also waits its level's alpha
            meet = topology.lca(pairs[0], pairs[1])
            latency[flows] = np.where(to_world[flows], message_costs(topology).alpha[meet][pair.ravel()], 0.0)
        self.left = nbytes.astype(np.float64)
        self.n, self.total, self.ptr = n, total, ptr
        self.op, self.arg, self.instant = op.tolist(), arg.tolist(), instant.tolist()
        self.latency = latency.tolist()
        self.need = events.sizes()[keys[0]].tolist()

    def run(self, deadline) -> Replay | None:
        op, arg, instant, need, latency = self.op, self.arg, self.instant, self.need, self.latency
        done = [o not in (EVENT_SEND, EVENT_RECV) for o in op] + [True]
        waiter: dict[int, int] = {}                      # request -> the rank waiting for it
        pc, end = self.ptr[:-1].tolist(), self.ptr[1:].tolist()
        arrived: list[list] = [[] for _ in need]         # each collective's (rank, COLL event) so far
        outstanding = [0] * len(need)                    # its flows not yet delivered
        flow_inst: dict[int, int] = {}
        ready, delivered, started = list(range(self.n)), [], []
        landing: list[tuple[float, int]] = []           # (when, event): bytes through, latency to go
        now, active = 0.0, np.empty(0, dtype=np.int64)
        checked = 0

        def after(r, i):
            """The end of the CSEND events after event i of rank r."""
            i += 1
            while i < end[r] and op[i] == EVENT_CSEND:
                i += 1
            return i

        def start(e):
            if instant[e]:
                arrive(e)
            else:
                started.append(e)

        def arrive(e):
            """The flow's last byte is through: delivered after its latency."""
            if latency[e] > 0:
                heapq.heappush(landing, (now + latency[e], e))
            else:
                delivered.append(e)

        def complete(q):
            done[q] = True
            r = waiter.pop(q, None)
            if r is not None:
                ready.append(r)

        def deliver(e):
            if op[e] == EVENT_SEND:
                complete(e)
                if arg[e] >= 0:
                    complete(arg[e])
                return
            c = flow_inst[e]
            outstanding[c] -= 1
            if not outstanding[c]:
                release(c)

        def release(c):
            for r, i in arrived[c]:
                pc[r] = after(r, i)
                ready.append(r)

        def walk(r):
            i, stop = pc[r], end[r]
            while i < stop:
                o = op[i]
                if o == EVENT_SEND:
                    start(i)
                elif o == EVENT_WAIT:
                    if not done[arg[i]]:
                        waiter[arg[i]] = r
                        break
                elif o == EVENT_COLL:  # held here until the collective's flows are delivered
                    pc[r] = i
                    c = arg[i]
                    arrived[c].append((r, i))
                    if len(arrived[c]) == need[c]:
                        for q, j in arrived[c]:
                            for e in range(j + 1, after(q, j)):
                                flow_inst[e] = c
                                start(e)
                                outstanding[c] += 1
                        if not outstanding[c]:
                            release(c)
                    return
                i += 1
            pc[r] = i

        while True:
            while ready or delivered:
                if delivered:
                    deliver(delivered.pop())
                else:
                    walk(ready.pop())
            if started:
                active = np.concatenate([active, started])
                started.clear()
            if not active.size and not landing:
                break
            dt, rate = np.inf, None
            if active.size:
                rate = fair_rates(self.paths, self.pair[active], self.capacity)
                t = self.left[active] / rate
                dt = float(t.min())
            if landing and landing[0][0] < now + dt:  # a message lands before the next flow ends
                dt = landing[0][0] - now
                now = landing[0][0]
                while landing and landing[0][0] <= now * (1 + _TIE):
                    delivered.append(heapq.heappop(landing)[1])
                if rate is not None:
                    self.left[active] -= rate * dt
            else:
                now += dt
                end_now = t <= dt * (1 + _TIE)
                self.left[active] -= rate * dt
                for e in active[end_now].tolist():
                    arrive(e)
                active = active[~end_now]
            checked += len(delivered)
            if deadline is not None and checked >= _CHECK_EVERY:
                checked = 0
                if deadline.expired():
                    return None
        stalled = sum(p < e for p, e in zip(pc, end))
        return Replay(now, sum(pc) - int(self.ptr[:-1].sum()), self.total, stalled)
