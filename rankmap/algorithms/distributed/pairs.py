"""Two-way FM between pairs of sibling groups, each pair on one owner.

Moves of single clusters (``balance.GroupMoves``) stop where every group
is full: a better cut is then an *exchange* of several vertices between two
groups, which no single move gains.  Two groups with the same parent are
equally far from every other group, so their exchange changes J by the
change of the traffic crossing between them times the parent's distance,
a problem local to the two groups.  One round:
  1. every owner sums the traffic between sibling groups over its rows and
     sends it to the first owner, which pairs the groups, heaviest traffic
     first (a greedy matching; ties by a seeded hash of the pair and the
     round) and shares the partner of every group (one vector of k
     numbers, as the group loads);
  2. the vertices of a paired group send their entries to vertices of the
     pair to the owner of the pair's first group;
  3. that owner runs FM on the pair (``refine.exchange.pair_fm``: loads
     drift during a pass, the best prefix that fits the capacities is
     kept) and sends every vertex its group back.
The pairs are disjoint, so their gains add up; every step is a function of
the global state (sorted records), so the result is the same for any
number of owners.  An owner holds the vertices of the pairs it runs: two
groups' members (O(P / owners) when the groups are spread over the owners).
"""

from __future__ import annotations

import numpy as np

from .protocol import OwnerProtocol
from .swap_rounds import _hash_pairs, block_owner


def greedy_pairs(a, b, w, k: int, seed: int) -> np.ndarray:
    """Partner of each of ``k`` groups (-1: none) from candidate pairs
    (a < b, traffic w): heaviest first, ties by a seeded hash."""
    partner = np.full(k, -1, dtype=np.int64)
    order = np.lexsort((b, a, -_hash_pairs(a, b, seed).astype(np.float64), -w))
    for i in order.tolist():
        x, y = int(a[i]), int(b[i])
        if partner[x] < 0 and partner[y] < 0:
            partner[x], partner[y] = y, x
    return partner


class PairExchange(OwnerProtocol):
    """One owner's part of the pair rounds on a level (``group`` of its
    vertices, their ``weight``); ``limit``: the most weight a group may hold."""

    def __init__(self, rows, group, weight, groups, limit, exchange, *, seed: int = 0):
        super().__init__(exchange)
        self.rows, self.groups, self.seed = rows, groups, seed
        self.group = np.asarray(group, dtype=np.int64).copy()
        self.weight = np.asarray(weight, dtype=np.float64)
        self.limit = np.asarray(limit, dtype=np.float64)
        self.k = len(groups.start)
        self.turn = 0

    def round(self) -> float:
        """One round; returns the traffic taken off the cuts here."""
        rows, k = self.rows, self.k
        self.turn += 1
        nbg = self.neighbour_ids(rows, self.group)
        parent = self.groups.parent

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

        def match():
            if self.ex.rank != 0 or len(got) == 0:
                return np.zeros(k)
            s = got[np.lexsort((got[:, 1], got[:, 0]))]
            return greedy_pairs(s[:, 0].astype(np.int64), s[:, 1].astype(np.int64), s[:, 2], k,
                                self.seed + 0x5A1 * self.turn) + 1.0

        vec = self._local(match)
        partner = self._allreduce(np.zeros(k) if vec is None else vec)
        partner = partner.astype(np.int64) - 1
        first = np.where(partner >= 0, np.minimum(np.arange(k), partner), -1)

        def send_pairs():
            r = rows.row_of_entry
            mine = first[self.group] >= 0
            vert = np.column_stack([np.zeros(mine.sum()), rows.tasks[mine], self.group[mine],
                                    self.weight[mine], np.zeros(mine.sum())])
            e = mine[r] & (first[np.maximum(nbg, 0)] == first[self.group[r]])
            edge = np.column_stack([np.ones(e.sum()), rows.tasks[r[e]], self.group[r[e]],
                                    rows.cols[e], rows.weights[e]])
            rec = np.vstack([vert, edge])
            dest = block_owner(first[rec[:, 2].astype(np.int64)], k, self.ex.size)
            return dest, rec

        recs = self._send(send_pairs)
        state = {}

        def refine():
            from ..refine.exchange import drifts_for, pair_passes

            vert = recs[recs[:, 0] == 0]
            vert = vert[np.argsort(vert[:, 1], kind="stable")]
            ids = vert[:, 1].astype(np.int64)
            block = vert[:, 2].astype(np.int64)
            vw = vert[:, 3].copy()
            e = recs[recs[:, 0] == 1]
            u = np.searchsorted(ids, e[:, 1].astype(np.int64))
            v = np.searchsorted(ids, e[:, 3].astype(np.int64))
            o = np.lexsort((v, u))
            u, v, w = u[o], v[o].astype(np.int64), e[o, 4]
            indptr = np.searchsorted(u, np.arange(len(ids) + 1)).astype(np.int64)
            gained = 0.0
            for a in np.unique(first[block]).tolist():
                b = int(partner[a])
                inside = (block == a) | (block == b)  # the pair's own values: alike on any owner
                drifts = drifts_for(vw[inside])
                tol = 1e-12 * max(float(w[inside[u]].sum()), 1.0)
                block, g = pair_passes(indptr, v, w, vw, block, a, b, self.limit[a], self.limit[b], drifts, tol)
                gained += g
            state["gained"] = gained
            return self._owner(ids), np.column_stack([ids, block])

        back = self._send(refine)

        def update():
            self.group[rows.local_index(back[:, 0].astype(np.int64))] = back[:, 1].astype(np.int64)

        self._local(update)
        return state.get("gained", 0.0)

    def run(self, rounds: int) -> list[float]:
        """Up to ``rounds`` rounds while one gains; returns the traffic taken
        off the cuts per round (the same on every owner)."""
        gains = []
        for _ in range(rounds):
            gains.append(float(self._allreduce([self.round()])[0]))
            if gains[-1] <= 0:
                break
        return gains
