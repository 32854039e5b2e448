"""Moves of tasks between machine groups after the projection, then the
exact placement on PEs.

After the coarse mapping every task inherits its cluster's group (a subtree
of the machine).  A group may hold more tasks than it has PEs: whole
clusters rarely pack exactly.  Rounds of moves, synchronous like the label
propagation (``coarsen``), so the result does not depend on the owners:
  1. every task learns its neighbours' groups; the group loads are summed
     over the owners (one vector of k numbers);
  2. a task proposes to the neighbouring group with room that lowers J the
     most (D between groups: the distance of their lowest common ancestor);
     a task of an overfull group proposes even when J rises (the cheapest
     way out first); the others only where J falls, half of them per round;
  3. the owner of a group accepts by gain while the group has room.
Then each group's owner lays its tasks on its PEs, ordered by the coarse
cluster they came from, then by id; what still does not fit goes to the free
PEs of the nearest groups (in tree order) by a matching every owner computes
alike from the loads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .coarsen import MOVER_FRACTION
from .protocol import OwnerProtocol
from .swap_rounds import Labels, _best_per_group, _hash_pairs, block_owner, block_tasks, expand_rows, label_distance


@dataclass
class Groups:
    """The machine's groups at one depth: PE range [start, stop) of each,
    and the label of its first PE (the distance between two groups is the
    distance between any two of their PEs)."""

    start: np.ndarray
    stop: np.ndarray
    anc: np.ndarray
    dist: np.ndarray
    n_pes: int
    parent: np.ndarray | None = None  # the tree node above each group (siblings share it)

    @property
    def cap(self) -> np.ndarray:
        return self.stop - self.start

    def distance(self, a, b) -> np.ndarray:
        d = label_distance(self.anc[a], self.dist[a], self.anc[b])
        return np.where(a == b, 0.0, d)


def overflow_matching(load: np.ndarray, cap: np.ndarray) -> list[tuple[int, int, int, int]]:
    """(group, to group, tasks, first free slot in it) for the tasks that do
    not fit their group: the free PEs of the nearest groups in tree order.
    A function of the loads only, so every owner computes the same."""
    free = np.maximum(cap - load, 0).astype(np.int64)
    used = np.zeros(len(cap), dtype=np.int64)
    out = []
    for g in np.flatnonzero(load > cap).tolist():
        left = int(load[g] - cap[g])
        while left > 0:
            room = np.flatnonzero(free > used)
            if len(room) == 0:
                raise ValueError("more tasks than PEs")
            h = int(room[np.argmin(np.abs(room - g))])
            take = min(left, int(free[h] - used[h]))
            out.append((g, h, take, int(used[h])))
            used[h] += take
            left -= take
    return out


class GroupMoves(OwnerProtocol):
    """One owner's part of the moves between groups and the placement."""

    def __init__(self, rows, group, order_key, groups: Groups, exchange, *, seed: int = 0,
                 weight=None, slack: float = 0.0):
        super().__init__(exchange)
        self.rows, self.groups, self.seed = rows, groups, seed
        # vertex weights (tasks per cluster above the task level) and the
        # room a group may take beyond its PEs at this level
        self.weight = np.ones(len(rows.tasks)) if weight is None else np.asarray(weight, dtype=np.float64)
        self.limit = np.floor(groups.cap * (1.0 + slack))
        self.group = np.asarray(group, dtype=np.int64).copy()
        # the clusters around each task, coarsest first: its order within the group
        self.order_key = np.asarray(order_key, dtype=np.int64)  # one row per task (maybe no column)
        self.k = len(groups.start)
        self.turn = 0

    def _group_owner(self, g) -> np.ndarray:
        return block_owner(g, self.k, self.ex.size)

    def loads(self) -> np.ndarray:
        return self._allreduce(np.bincount(self.group, weights=self.weight, minlength=self.k))

    def round(self, load: np.ndarray) -> int:
        rows, groups = self.rows, self.groups
        self.turn += 1
        nbg = self.neighbour_ids(rows, self.group)
        room = self.limit - load
        state = {}

        def proposals():
            r = rows.row_of_entry
            pairs = np.unique(np.column_stack([r, nbg]), axis=0)
            u, h = pairs[:, 0], pairs[:, 1]
            ok = (h != self.group[u]) & (room[h] >= self.weight[u])
            u, h = u[ok], h[ok]
            # cost of each task's row where it is and with the task moved to h
            here = np.bincount(r, weights=rows.weights * groups.distance(self.group[r], nbg),
                               minlength=len(rows.tasks))
            pair, ent = expand_rows(rows.indptr, u)
            there = np.bincount(pair, weights=rows.weights[ent] * groups.distance(h[pair], nbg[ent]),
                                minlength=len(u))
            gain = here[u] - there
            drawn = _hash_pairs(rows.tasks, np.full(len(rows.tasks), self.turn), self.seed + 0x6B1)
            mover = drawn < MOVER_FRACTION * 2.0 ** 53
            over = load[self.group[u]] > self.limit[self.group[u]]
            ok = over | ((gain > 0) & mover[u])
            u, h, gain = u[ok], h[ok], gain[ok]
            tb = _hash_pairs(rows.tasks[u], h, self.seed + 0x2F7 * self.turn)
            best = _best_per_group(u, [gain, tb, -h.astype(np.float64)])
            u, h, gain, tb = u[best], h[best], gain[best], tb[best]
            return self._group_owner(h), np.column_stack([h, rows.tasks[u], gain, tb, self.weight[u]])

        props = self._send(proposals)

        def accept():
            h = props[:, 0].astype(np.int64)
            o = np.lexsort((props[:, 1], -props[:, 3], -props[:, 2], h))
            p, h = props[o], h[o]
            first = np.searchsorted(h, h)
            csum = np.cumsum(p[:, 4])
            upto = csum - np.where(first > 0, csum[first - 1], 0.0)  # weight accepted so far
            fits = upto <= room[h]
            # a prefix per group: the first proposal that does not fit closes it
            bad = np.flatnonzero(~fits)
            closed = np.zeros(len(h), dtype=bool)
            if len(bad):
                first_bad = np.full(len(h), len(h))
                np.minimum.at(first_bad, first[bad], bad)
                closed = np.arange(len(h)) >= first_bad[first]
            acc = p[fits & ~closed]
            return self._owner(acc[:, 1]), acc[:, :2]

        accepted = self._send(accept)

        def move():
            lu = rows.local_index(accepted[:, 1].astype(np.int64))
            self.group[lu] = accepted[:, 0].astype(np.int64)
            state["moved"] = len(lu)

        self._local(move)
        return state.get("moved", 0)

    def run(self, rounds: int) -> list[int]:
        """Rounds until no group is overfull and nothing moved (at most
        ``rounds``); returns the tasks moved per round."""
        moved = []
        load = self.loads()
        for _ in range(rounds):
            if np.all(load <= self.limit) and moved and moved[-1] == 0:
                break
            moved.append(int(self._allreduce([self.round(load)])[0]))
            load = self.loads()
        self.final_load = load
        return moved

    def place(self, pe_labels: np.ndarray, levels: int) -> Labels:
        """PE labels for this owner's tasks; ``pe_labels``: the packed labels
        of this owner's block of PEs (``block_tasks(rank, n_pes, owners)``)."""
        rows, groups = self.rows, self.groups
        load = self.final_load
        matching = overflow_matching(load, groups.cap)
        got = self._send(lambda: (self._group_owner(self.group),
                                  np.column_stack([self.group, rows.tasks, self.order_key])))

        def positions():
            g = got[np.lexsort((got[:, 1], *got[:, 2:].T[::-1], got[:, 0]))]
            gid = g[:, 0].astype(np.int64)
            nth = np.arange(len(gid)) - np.searchsorted(gid, gid)
            pe = groups.start[gid] + nth
            # the tasks beyond a group's PEs, in order, go where the matching says
            done = {}
            for src, dst, count, first in matching:
                over = np.flatnonzero((gid == src) & (nth >= groups.cap[src]))
                t = over[done.get(src, 0):done.get(src, 0) + count]
                pe[t] = groups.start[dst] + load[dst] + first + np.arange(len(t))
                done[src] = done.get(src, 0) + count
            return block_owner(pe, groups.n_pes, self.ex.size), np.column_stack([pe, g[:, 1]])

        asked = self._send(positions)

        def answer():
            block = block_tasks(self.ex.rank, groups.n_pes, self.ex.size)
            at = asked[:, 0].astype(np.int64) - (block[0] if len(block) else 0)
            return self._owner(asked[:, 1]), np.column_stack([asked[:, 1], pe_labels[at]])

        got_labels = self._send(answer)

        def mine():
            g = got_labels[np.argsort(got_labels[:, 0], kind="stable")]
            if not np.array_equal(g[:, 0].astype(np.int64), rows.tasks):
                raise RuntimeError("the placement did not give every task one PE")
            return Labels.unpack(g[:, 1:], levels)

        out = self._local(mine)
        self._allreduce([0])
        return out
