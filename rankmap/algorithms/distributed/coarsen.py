"""Size-constrained label propagation and contraction over owners.

The coarsening half of the distributed multilevel mapping (``multilevel``).
A level is a symmetric traffic graph whose vertices carry weights (tasks
per vertex) and are spread over owners by id (``Rows``, ids in 0..n-1 at
every level: a cluster is named after one of its members, so it stays with
that member's owner and nobody needs a renumbering).

One round of label propagation, synchronous, so its result is a function of
the global state only (the same for any number of owners):
  1. every vertex sends its cluster label to its neighbours;
  2. the vertices drawn this round (a seeded hash of vertex and round: half
     of them, so two neighbours rarely swap clusters instead of merging)
     sum their traffic per neighbouring cluster and propose to join the
     cluster they are most connected to, when it beats their own;
  3. the owner of a cluster accepts proposals by gain (then hash, then id)
     while the cluster stays within the size cap (departures this round are
     not counted, so the cap holds whatever the others decide);
  4. accepted vertices take the label and tell their old cluster's owner.
A last round (the *lone* round) moves only the vertices left alone in their
cluster: each joins the neighbouring cluster with more members it exchanges
the most bytes with, within the cap (a vertex alone would otherwise stay a
coarse vertex of weight 1 next to full clusters, which packs badly).  Each
vertex learns its cluster's weight from the cluster's owner every round.
Contraction sums the traffic between clusters at the owner of the cluster
(sorted before summing, so the float sums are the same for any spread) and
keeps the members of each cluster there for the projection back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .protocol import OwnerProtocol
from .swap_rounds import Rows, _best_per_group, _hash_pairs, rows_from_entries

#: fraction of the vertices that may move in a round (see the module docstring)
MOVER_FRACTION = 0.5


@dataclass
class Level:
    """One owner's part of a level: its vertices' rows and weights."""

    rows: Rows
    weight: np.ndarray


@dataclass
class Contraction:
    """One owner's part of the coarse level and, for every coarse vertex it
    holds, its members at the finer level: ``members`` rows are (cluster,
    member, member weight), sorted by cluster then member."""

    coarse: Level
    members: np.ndarray


class Coarsening(OwnerProtocol):
    """One owner's part of label propagation on a level, then contraction."""

    def __init__(self, level: Level, exchange, *, cap: float, seed: int = 0):
        super().__init__(exchange)
        self.rows, self.weight, self.cap, self.seed = level.rows, level.weight, float(cap), seed
        self.label = self.rows.tasks.copy()             # every vertex its own cluster
        self.cluster_weight = self.weight.astype(np.float64).copy()  # of the cluster named after it
        self.turn = 0

    def _drawn(self, ids) -> np.ndarray:
        """The vertices that may move this round (a seeded hash of id and round)."""
        h = _hash_pairs(ids, np.full(len(ids), self.turn), self.seed + 0x1A9)
        return h < MOVER_FRACTION * 2.0 ** 53

    def _cluster_weights(self) -> np.ndarray | None:
        """The weight of each local vertex's cluster (asked of its owner)."""
        rows = self.rows
        asked = self._send(lambda: (self._owner(self.label), np.column_stack([self.label, rows.tasks])))
        got = self._send(lambda: (self._owner(asked[:, 1]), np.column_stack(
            [asked[:, 1], self.cluster_weight[rows.local_index(asked[:, 0].astype(np.int64))]])))
        return self._local(lambda: got[np.argsort(got[:, 0], kind="stable"), 1])

    def round(self, lone: bool = False) -> int:
        """One round of label propagation (``lone``: the vertices alone in
        their cluster join a neighbouring cluster that has more members);
        returns the vertices moved here."""
        rows = self.rows
        self.turn += 1
        own_w = self._cluster_weights()
        nb = self.neighbour_values(self.rows, np.column_stack([self.label, own_w, self.weight]))
        state = {}

        def proposals():
            r = rows.row_of_entry
            lab = nb[:, 0].astype(np.int64)
            if lone:  # movers: the vertices alone; targets: through a neighbour not alone
                mover = own_w <= self.weight
                target = nb[:, 1] > nb[:, 2]
            else:  # movers: half of the vertices, drawn by a hash of vertex and round
                mover = self._drawn(rows.tasks)
                target = np.ones(len(rows.cols), dtype=bool)
            # traffic of each row to each neighbouring cluster (and its weight)
            o = np.lexsort((lab, r))
            rr, cc, ww, cw, tg = r[o], lab[o], rows.weights[o], nb[o, 1], target[o]
            first = np.ones(len(rr), dtype=bool)
            first[1:] = (rr[1:] != rr[:-1]) | (cc[1:] != cc[:-1])
            seg = np.cumsum(first) - 1
            conn = np.bincount(seg, weights=ww) if len(ww) else np.zeros(0)
            reach = np.bincount(seg, weights=tg, minlength=len(conn)) > 0
            rr, cc, cw = rr[first], cc[first], cw[first]
            mine = cc == self.label[rr]
            own = np.zeros(len(rows.tasks))
            own[rr[mine]] = conn[mine]
            gain = conn - own[rr]
            ok = ~mine & (gain > 0) & reach & mover[rr] & (cw + self.weight[rr] <= self.cap)
            rr, cc, gain = rr[ok], cc[ok], gain[ok]
            tb = _hash_pairs(rows.tasks[rr], cc, self.seed + 0x3C1 * self.turn)
            best = _best_per_group(rr, [gain, tb, -cc.astype(np.float64)])
            rr, cc, gain, tb = rr[best], cc[best], gain[best], tb[best]
            rec = np.column_stack([cc, rows.tasks[rr], self.weight[rr], gain, tb])
            return self._owner(cc), rec

        props = self._send(proposals)

        def accept():
            c = props[:, 0].astype(np.int64)
            o = np.lexsort((props[:, 1], -props[:, 4], -props[:, 3], c))
            p, c = props[o], c[o]
            lc = rows.local_index(c)
            start = np.searchsorted(c, c)  # first proposal to the same cluster
            csum = np.cumsum(p[:, 2])
            before = csum - p[:, 2] - np.where(start > 0, csum[start - 1], 0.0)
            fits = self.cluster_weight[lc] + before + p[:, 2] <= self.cap
            # a prefix per cluster: the first proposal that does not fit closes it
            closed = np.zeros(len(c), dtype=bool)
            bad = np.flatnonzero(~fits)
            if len(bad):
                first_bad = np.full(len(c), len(c))
                np.minimum.at(first_bad, start[bad], bad)
                closed = np.arange(len(c)) >= first_bad[start]
            ok = fits & ~closed
            np.add.at(self.cluster_weight, lc[ok], p[ok, 2])
            acc = p[ok]
            return self._owner(acc[:, 1]), acc[:, :3]

        accepted = self._send(accept)

        def move():
            u = accepted[:, 1].astype(np.int64)
            lu = rows.local_index(u)
            old = self.label[lu]
            self.label[lu] = accepted[:, 0].astype(np.int64)
            state["moved"] = len(u)
            return self._owner(old), np.column_stack([old, accepted[:, 2]])

        left = self._send(move)

        def leave():
            np.subtract.at(self.cluster_weight, rows.local_index(left[:, 0].astype(np.int64)),
                           left[:, 1])

        self._local(leave)
        return state.get("moved", 0)

    def contract(self) -> Contraction | None:
        """The coarse level (clusters as vertices, named by their label) and
        the members of the clusters this owner holds."""
        rows = self.rows
        n = rows.n_tasks
        nb = self.neighbour_ids(self.rows, self.label)

        def edges():
            r = rows.row_of_entry
            lab = self.label[r]
            cut = lab != nb
            # kind 0: a member (cluster, member, weight); kind 1: an edge
            mem = np.column_stack([np.zeros(len(rows.tasks)), self.label, rows.tasks, self.weight])
            edg = np.column_stack([np.ones(cut.sum()), lab[cut], nb[cut], rows.weights[cut]])
            rec = np.vstack([mem, edg])
            return self._owner(rec[:, 1]), rec

        got = self._send(edges)

        def build():
            mem = got[got[:, 0] == 0][:, 1:]
            mem = mem[np.lexsort((mem[:, 1], mem[:, 0]))]
            clusters, first = np.unique(mem[:, 0].astype(np.int64), return_index=True)
            weight = np.add.reduceat(mem[:, 2], first) if len(first) else np.zeros(0)
            e = got[got[:, 0] == 1]
            coarse = rows_from_entries(clusters, e[:, 1].astype(np.int64), e[:, 2].astype(np.int64),
                                       e[:, 3], n)
            return Contraction(Level(coarse, weight), mem)

        return self._local(build)

    def run(self, rounds: int, min_moved: float = 0.0, lone: bool = True) -> tuple[Contraction, list[int]]:
        """``rounds`` rounds (fewer when a round moves at most ``min_moved``
        of the vertices), then the contraction; returns it and the vertices
        moved per round (the same on every owner)."""
        n_vertices = self._allreduce([len(self.rows.tasks)])[0]
        moved = []
        for _ in range(rounds):
            got = int(self._allreduce([self.round()])[0])
            moved.append(got)
            if got <= min_moved * n_vertices:
                break
        if lone:
            moved.append(int(self._allreduce([self.round(lone=True)])[0]))
        out = self.contract()
        self._allreduce([0])
        return out, moved
