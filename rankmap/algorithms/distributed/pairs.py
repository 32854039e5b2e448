"""Exchanges between sets of sibling groups, each set solved on one owner.

Moves of single clusters (``balance.GroupMoves``) stop where every group
is full: a better cut is then an *exchange* of several vertices between
groups, which no single move gains.  Groups with the same parent are
equally far from every other group, so an exchange inside a set of sibling
groups changes J only through the traffic inside the set: a problem local
to the set.  One round:
  1. every owner sums the traffic between sibling groups over its rows and
     sends it to the first owner, which forms the sets, heaviest traffic
     first (a greedy agglomeration of groups into sets of at most
     ``set_size``; pairs that were in different sets the round before go
     first, so the sets move across the last round's borders; ties by a
     seeded hash of the pair and the round) and shares the leader (first
     group) of every group's set: one vector of k numbers, as the loads;
  2. the vertices of a set send themselves and their entries to vertices
     of the same set to the owner of the set's leader;
  3. that owner solves the set and sends every vertex its result back.
``PairExchange`` (sets of two groups, any level): two-way FM
(``refine.exchange.pair_fm``: loads drift during a pass, the best prefix
that fits the capacities is kept).  ``SetRemap`` (the tasks' level, after
the placement): the centralised ``auto`` maps the set's tasks one per PE
onto the PEs they hold (a machine rebuilt from their labels), kept where
it lowers the set's J: the node-level cut of a set of several nodes at
once, which pairwise FM reaches only in many rounds.
The sets are disjoint, so their gains add up; every step is a function of
the global state (sorted records, ``auto``'s counted budget), so the result
is the same for any number of owners.  An owner holds the vertices of the
sets it solves: at most ``set_size`` groups' members (O(P / owners) when
the groups are spread over the owners).
"""

from __future__ import annotations

import numpy as np

from ...cores import workers_option
from ..pool import fork_server_pool, without_main
from .protocol import OwnerProtocol
from .swap_rounds import Labels, _hash_pairs, block_owner

#: groups per set of ``SetRemap`` (at most: as many as the traffic joins)
SET_SIZE = 8
#: auto's counted budget (seconds of its work model) for one set
SET_TIME_LIMIT = 1.0


def greedy_sets(a, b, w, k: int, seed: int, size: int = 2, apart=None) -> np.ndarray:
    """Leader (smallest group) of the set of each of ``k`` groups (-1:
    alone) from candidate pairs (a < b, traffic w): heaviest first (the
    pairs marked ``apart`` before the others), two sets joined while they
    have at most ``size`` groups together; ties by a seeded hash."""
    lead = np.arange(k)
    count = np.ones(k, dtype=np.int64)

    def find(x):
        while lead[x] != x:
            lead[x] = lead[lead[x]]
            x = lead[x]
        return x

    first = np.zeros(len(a), dtype=bool) if apart is None else ~np.asarray(apart, dtype=bool)
    order = np.lexsort((b, a, -_hash_pairs(a, b, seed).astype(np.float64), -w, first))
    for i in order.tolist():
        x, y = find(int(a[i])), find(int(b[i]))
        if x != y and count[x] + count[y] <= size:
            x, y = min(x, y), max(x, y)
            lead[y] = x
            count[x] += count[y]
    out = np.array([find(g) for g in range(k)], dtype=np.int64)
    return np.where(count[out] > 1, out, -1)


def greedy_pairs(a, b, w, k: int, seed: int) -> np.ndarray:
    """Partner of each of ``k`` groups (-1: none): ``greedy_sets`` of two."""
    lead = greedy_sets(a, b, w, k, seed, 2)
    partner = np.full(k, -1, dtype=np.int64)
    for x in np.flatnonzero(lead >= 0).tolist():
        if lead[x] != x:
            partner[x], partner[lead[x]] = lead[x], x
    return partner


class PairExchange(OwnerProtocol):
    """One owner's part of the pair rounds on a level (``group`` of its
    vertices, their ``weight``); ``limit``: the most weight a group may hold."""

    set_size = 2

    def __init__(self, rows, group, weight, groups, limit, exchange, *, seed: int = 0):
        super().__init__(exchange)
        self.rows, self.groups, self.seed = rows, groups, seed
        self.group = np.asarray(group, dtype=np.int64).copy()
        self.weight = np.asarray(weight, dtype=np.float64)
        self.limit = np.asarray(limit, dtype=np.float64)
        self.k = len(groups.start)
        self.turn = 0
        self.previous = None  # the leaders of the last round's sets

    def _sets(self) -> np.ndarray:
        """The leader of every group's set this round (-1: none), the same on every owner."""
        rows, k = self.rows, self.k
        nbg = self.neighbour_ids(rows, self.group)
        parent = self.groups.parent
        self._nbg = nbg

        def summed(rec):
            """(a, b, traffic) summed per pair, in a fixed order."""
            key = rec[:, 0].astype(np.int64) * k + rec[:, 1].astype(np.int64)
            o = np.lexsort((rec[:, 2], key))
            key, w = key[o], rec[o, 2]
            uk, at = np.unique(key, return_index=True)
            tot = np.add.reduceat(w, at) if len(at) else np.zeros(0)
            return np.column_stack([uk // k, uk % k, tot])

        def pair_traffic():
            r = rows.row_of_entry
            a, b = self.group[r], nbg
            keep = (a < b) & (parent[a] == parent[b])
            rec = np.column_stack([a[keep], b[keep], rows.weights[keep]])
            return block_owner(rec[:, 0].astype(np.int64), k, self.ex.size), rec

        got = self._send(pair_traffic)

        def to_first():  # each pair summed whole at one owner (a fixed order), then sent to owner 0
            s = summed(got)
            return np.zeros(len(s), dtype=np.int64), s

        got = self._send(to_first)

        def form():
            if self.ex.rank != 0 or len(got) == 0:
                return np.zeros(k)
            s = got[np.lexsort((got[:, 1], got[:, 0]))]
            a, b = s[:, 0].astype(np.int64), s[:, 1].astype(np.int64)
            apart = None if self.previous is None else \
                (self.previous[a] != self.previous[b]) | (self.previous[a] < 0)
            return greedy_sets(a, b, s[:, 2], k, self.seed + 0x5A1 * self.turn, self.set_size, apart) + 1.0

        vec = self._local(form)
        lead = self._allreduce(np.zeros(k) if vec is None else vec).astype(np.int64) - 1
        self.previous = lead
        return lead

    def _vertex_columns(self, mine) -> np.ndarray:
        """What a set's owner needs of each of its vertices beyond id, group, weight."""
        return np.zeros((int(mine.sum()), 1))

    def round(self) -> float:
        """One round; returns what it gained here (traffic off the cuts for pairs)."""
        rows = self.rows
        self.turn += 1
        lead = self._sets()
        nbg = self._nbg

        def send_sets():
            r = rows.row_of_entry
            mine = lead[self.group] >= 0
            extra = self._vertex_columns(mine)
            vert = np.column_stack([np.zeros(mine.sum()), rows.tasks[mine], self.group[mine],
                                    self.weight[mine], extra])
            e = mine[r] & (lead[np.maximum(nbg, 0)] == lead[self.group[r]])
            edge = np.zeros((int(e.sum()), vert.shape[1]))
            edge[:, :5] = np.column_stack([np.ones(e.sum()), rows.tasks[r[e]], self.group[r[e]],
                                           rows.cols[e], rows.weights[e]])
            rec = np.vstack([vert, edge])
            return block_owner(lead[rec[:, 2].astype(np.int64)], self.k, self.ex.size), rec

        recs = self._send(send_sets)
        state = {}

        def solve_all():
            vert = recs[recs[:, 0] == 0]
            vert = vert[np.argsort(vert[:, 1], kind="stable")]
            ids = vert[:, 1].astype(np.int64)
            e = recs[recs[:, 0] == 1]
            u = np.searchsorted(ids, e[:, 1].astype(np.int64))
            v = np.searchsorted(ids, e[:, 3].astype(np.int64))
            o = np.lexsort((v, u))
            u, v, w = u[o], v[o].astype(np.int64), e[o, 4]
            indptr = np.searchsorted(u, np.arange(len(ids) + 1)).astype(np.int64)
            out, gained = self._solve(vert, indptr, v, w, lead)
            state["gained"] = gained
            return self._owner(ids), np.column_stack([ids, out])

        back = self._send(solve_all)
        self._local(lambda: self._update(back))
        return state.get("gained", 0.0)

    def _solve(self, vert, indptr, v, w, lead):
        """FM on every pair held here; returns the vertices' groups and the gain."""
        from ..refine.exchange import drifts_for, pair_passes

        block = vert[:, 2].astype(np.int64)
        vw = vert[:, 3].copy()
        u = np.repeat(np.arange(len(block)), np.diff(indptr))
        gained = 0.0
        for a in np.unique(lead[block]).tolist():
            b = int(np.flatnonzero(lead == a)[-1])  # the pair (a, b): a leads
            inside = (block == a) | (block == b)  # the pair's own values: alike on any owner
            drifts = drifts_for(vw[inside])
            tol = 1e-12 * max(float(w[inside[u]].sum()), 1.0)
            block, g = pair_passes(indptr, v, w, vw, block, a, b, self.limit[a], self.limit[b], drifts, tol)
            gained += g
        return block[:, None], gained

    def _update(self, back):
        self.group[self.rows.local_index(back[:, 0].astype(np.int64))] = back[:, 1].astype(np.int64)

    def _round_seconds(self) -> float:
        """What one round may take on the slowest owner (for the deadline)."""
        return 0.0

    def run(self, rounds: int, deadline=None) -> list[float]:
        """Up to ``rounds`` rounds while one gains; returns the gain per
        round (the same on every owner).  A round starts only while owner
        0's ``deadline`` (the others' is ignored) leaves it room, agreed by
        an allreduce, so all owners stop alike."""
        gains = []
        for _ in range(rounds):
            late = self.ex.rank == 0 and deadline is not None and not deadline.allows(self._round_seconds())
            if self._allreduce([late])[0]:
                break
            gains.append(float(self._allreduce([self.round()])[0]))
            if gains[-1] <= 0:
                break
        return gains


def labels_machine(anc: np.ndarray, dist: np.ndarray):
    """The machine spanned by some PEs, from their labels (rows sorted by
    PE: ancestor ids root first, distances): its leaves are these PEs in
    that order, its inner nodes the ancestors with two or more of them."""
    from ...topology import Topology, TreeNode

    def build(lo, hi, d):
        while hi - lo > 1:
            col = anc[lo:hi, d + 1]
            cut = (np.flatnonzero(col[1:] != col[:-1]) + 1 + lo).tolist()
            if cut:
                ends = [lo, *cut, hi]
                return TreeNode("group", float(dist[lo, d]),
                                [build(x, y, d + 1) for x, y in zip(ends[:-1], ends[1:])])
            d += 1  # one child: the same node further down
        return TreeNode("pe", 0.0)

    return Topology(build(0, len(anc), 0))


def _remap_set(job) -> tuple[np.ndarray, float]:
    """One set: ``auto`` maps its tasks onto its PEs (one process, its
    counted budget); returns the new PE index of every task and what J fell
    by (0 where ``auto`` does not beat the set's current order)."""
    from ...cost import mapping_cost
    from ...graph import CommGraph
    from .. import map_tasks

    src, dst, w, n, anc, dist, seed, work_limit = job
    graph = CommGraph.from_edges(src, dst, w, n=n)
    machine = labels_machine(anc, dist)
    pe = map_tasks(graph, machine, method="auto", seed=seed, work_limit=work_limit, workers=1,
                   objective="sum").pe_of_task  # a step of a J descent
    before, after = mapping_cost(graph, machine, np.arange(n)), mapping_cost(graph, machine, pe)
    return (pe, before - after) if after < before else (np.arange(n), 0.0)


class SetRemap(PairExchange):
    """One owner's part of the set rounds on the tasks' level: each set of
    sibling groups is mapped again by ``auto`` onto the PEs its tasks hold.
    ``labels``: this owner's tasks' PE labels (one task per PE)."""

    def __init__(self, rows, labels: Labels, groups, exchange, *, seed: int = 0, set_size: int = SET_SIZE,
                 time_limit: float = SET_TIME_LIMIT, workers: int | None = None):
        self.labels, self.set_size, self.time_limit = labels, set_size, time_limit
        self.workers = workers_option(workers)
        self._pool = None  # worker processes for the sets held here, while ``run`` lasts
        group = np.searchsorted(groups.start, labels.pe, side="right") - 1
        n = len(rows.tasks)
        super().__init__(rows, group, np.ones(n), groups, groups.cap, exchange, seed=seed)

    def _vertex_columns(self, mine) -> np.ndarray:
        return self.labels.pack(mine)

    def _solve(self, vert, indptr, v, w, lead):
        """``auto`` on every set held here (in ``workers`` processes when
        there are several: each set's result depends on the set alone);
        returns the vertices' packed labels and what J fell by."""
        levels = (vert.shape[1] - 5) // 2
        lab = Labels.unpack(vert[:, 4:], levels)
        out = vert[:, 4:].copy()
        u = np.repeat(np.arange(len(vert)), np.diff(indptr))
        set_of = lead[vert[:, 2].astype(np.int64)]
        members, jobs = [], []
        for a in np.unique(set_of).tolist():
            mine = np.flatnonzero(set_of == a)
            mine = mine[np.argsort(lab.pe[mine], kind="stable")]  # leaf i of the machine: the i-th PE
            at = np.full(len(vert), -1)
            at[mine] = np.arange(len(mine))
            e = at[u] >= 0
            members.append(mine)
            jobs.append((at[u[e]], at[v[e]], w[e], len(mine), lab.anc[mine], lab.dist[mine],
                         self.seed + a, self.time_limit))
        if len(jobs) > 1 and self.workers > 1:
            if self._pool is None:
                self._pool = fork_server_pool(min(self.workers, len(jobs)), __name__)
            with without_main():
                solved = list(self._pool.map(_remap_set, jobs, chunksize=1))
        else:
            solved = [_remap_set(job) for job in jobs]
        gained = 0.0
        for mine, (pe, fell) in zip(members, solved):  # in set order: the float sum repeats
            if fell > 0:
                out[mine] = vert[mine[pe], 4:]
                gained += fell
        return out, gained

    def run(self, rounds: int, deadline=None) -> list[float]:
        try:
            return super().run(rounds, deadline)
        finally:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None

    def _round_seconds(self) -> float:
        return float(self.time_limit or SET_TIME_LIMIT)  # one set's auto

    def _update(self, back):
        at = self.rows.local_index(back[:, 0].astype(np.int64))
        got = Labels.unpack(back[:, 1:], self.labels.anc.shape[1])
        self.labels.pe[at], self.labels.anc[at], self.labels.dist[at] = got.pe, got.anc, got.dist
        self.group[at] = np.searchsorted(self.groups.start, got.pe, side="right") - 1
