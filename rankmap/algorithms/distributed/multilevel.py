"""Distributed multilevel mapping: coarsen across the owners, map the small
coarse graph centrally, project back, refine with the swap rounds.

Swap rounds alone move a task one swap at a time: from a poor placement they
need many rounds and cannot move a whole group of tasks to another node
(ParHIPMap is multilevel for this reason).  Here:
  1. coarsen (``coarsen.Coarsening``): size-constrained label propagation
     whose size caps follow the machine, smallest groups first (clusters
     never hold more tasks than a group of that level has PEs), one level per
     cap, until the graph has at most ``coarse_max`` vertices;
  2. the coarse graph goes to one owner (``exchange.central``), which maps
     it onto the machine cut at the groups of the last cap (``auto``, many
     tasks per group, balanced by task count) and lays the clusters out
     along the PEs: each group takes its clusters, what does not fit goes to
     free PEs of the groups that follow in tree order;
  3. projection: each cluster hands consecutive positions of that layout to
     its members (ordered by id), level by level down to the tasks; a task
     learns its PE's label from the owner of its position;
  4. the swap rounds (``swap_rounds.SwapRounds``) refine the tasks' PEs.
Every step is a function of the global state (sorted records, seeded
hashes), so the result is the same for any number of owners; no owner holds
more than its rows, its neighbours' labels, its clusters' members and its
block of positions, except the one that maps the coarse graph.  The result
is never worse than the start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .coarsen import Coarsening, Level
from .protocol import OwnerProtocol
from .swap_rounds import (MAX_ROUNDS, REPLICAS, Labels, LocalExchange, RoundsResult, SwapRounds,
                          block_tasks, pe_labels, rows_of_graph, symmetric_rows)

if TYPE_CHECKING:
    from ...graph import CommGraph
    from ...topology import Topology

#: the coarse graph is gathered once it has at most this many vertices
COARSE_MAX = 4096
#: label propagation rounds per level
LP_ROUNDS = 4
#: auto's budget (seconds of its work model) for the coarse graph
COARSE_TIME_LIMIT = 1.0
#: room above its PE count a group may get in the coarse mapping, tried in turn
SLACKS = (0.03, 0.1, 0.25, 0.5, 1.0, 4.0)
#: clusters hold at most this fraction of a group's PEs (room to pack them)
CAP_FRACTION = 0.5
#: rounds of the swap refinement after the projection
REFINE_ROUNDS = 16


# ------------------------------------------------------------ the machine


def level_caps(topology: Topology) -> list[tuple[int, int]]:
    """(depth, cap) per machine level from the leaves up: the groups at that
    depth hold at least ``cap`` PEs (the smallest such group); levels that
    add nothing (one child per group) and the whole machine are left out."""
    out = []
    sizes = topology.leaf_stop - topology.leaf_start
    inner = topology.child_ptr[1:] > topology.child_ptr[:-1]
    for d in range(topology.max_depth - 1, 0, -1):
        nodes = np.flatnonzero((topology.node_depth == d) & inner)
        if len(nodes) == 0:
            continue
        cap = int(sizes[nodes].min())
        if cap > 1 and (not out or cap > out[-1][1]):
            out.append((d, cap))
    return out


def machine_groups(topology: Topology, depth: int) -> tuple[Topology, np.ndarray, np.ndarray]:
    """The machine cut at ``depth``: a topology whose leaves are the groups
    at that depth (and PEs above it), with the distances above; and each
    group's PE range [start, stop)."""
    from ...topology import Topology as Topo, TreeNode

    t = topology
    nodes = [TreeNode(t.node_kind[0], float(t.node_distance[0]))]
    groups = []
    stack = [(0, nodes[0])]
    while stack:
        nid, tn = stack.pop()
        kids = t.children(nid)
        if t.node_depth[nid] >= depth or len(kids) == 0:
            tn.children, tn.distance = [], 0.0
            groups.append(nid)
            continue
        tn.children = [TreeNode(t.node_kind[k], float(t.node_distance[k]), name=t.node_name[k])
                       for k in kids.tolist()]
        stack.extend(reversed(list(zip(kids.tolist(), tn.children))))
    groups = np.asarray(groups, dtype=np.int64)  # DFS preorder: the coarse leaves' order
    return Topo(nodes[0]), t.leaf_start[groups], t.leaf_stop[groups]


def layout(group_of: np.ndarray, weight: np.ndarray, start: np.ndarray, stop: np.ndarray):
    """PEs for clusters (``weight`` tasks each) mapped to groups: each group
    takes its clusters in order up to its PE count; the rest go to the free
    PEs of the groups in tree order, nearest first.  Returns (``pe_seq``,
    ``first``): cluster c holds ``pe_seq[first[c]:first[c] + weight[c]]``."""
    k = len(start)
    used = np.zeros(k, dtype=np.int64)
    pieces: list[list[tuple[int, int]]] = [[] for _ in range(len(weight))]
    over = []
    for c in np.lexsort((np.arange(len(weight)), group_of)).tolist():
        g, w = int(group_of[c]), int(weight[c])
        take = min(w, int(stop[g] - start[g] - used[g]))
        if take > 0:
            pieces[c].append((int(start[g] + used[g]), take))
            used[g] += take
        if take < w:
            over.append((c, g, w - take))
    free = stop - start - used
    for c, g, left in over:  # nearest groups with room in tree order
        while left > 0:
            room = np.flatnonzero(free > 0)
            if len(room) == 0:
                raise ValueError("more tasks than PEs")
            h = int(room[np.argmin(np.abs(room - g))])
            take = min(left, int(free[h]))
            pieces[c].append((int(stop[h] - free[h]), take))
            free[h] -= take
            left -= take
    seq = [np.arange(a, a + b) for p in pieces for a, b in p]
    pe_seq = np.concatenate(seq) if seq else np.zeros(0, dtype=np.int64)
    first = np.concatenate([[0], np.cumsum(weight)[:-1]]).astype(np.int64)
    return pe_seq.astype(np.int64), first


def map_coarse(records: np.ndarray, topology: Topology, depth: int, n_tasks: int, n_owners: int, *,
               seed: int = 0, time_limit: float = COARSE_TIME_LIMIT):
    """On one owner: map the gathered coarse graph (records: kind 0 = vertex
    (id, weight), kind 1 = edge (id, id, bytes)) onto the groups at
    ``depth`` and lay it out (``layout``).  Returns (the coarse vertex ids
    and their first positions, for every owner the packed PE labels of its
    block of positions)."""
    from ...algorithms import map_tasks
    from ...graph import CommGraph

    vert = records[records[:, 0] == 0]
    vert = vert[np.argsort(vert[:, 1], kind="stable")]
    ids = vert[:, 1].astype(np.int64)
    weight = np.rint(vert[:, 2]).astype(np.int64)
    e = records[records[:, 0] == 1]
    e = e[np.lexsort((e[:, 3], e[:, 2], e[:, 1]))]
    graph = CommGraph.from_edges(np.searchsorted(ids, e[:, 1].astype(np.int64)),
                                 np.searchsorted(ids, e[:, 2].astype(np.int64)), e[:, 3], n=len(ids),
                                 vertex_weights=weight)
    groups, start, stop = machine_groups(topology, depth)
    if groups.n_pes == 1:
        group_of = np.zeros(len(ids), dtype=np.int64)
    else:
        # many clusters per group, balanced by task count: a group of s PEs
        # may take up to s (1 + slack) tasks, what it cannot hold moves on;
        # no partition may fit a tight limit, so the slack grows until one does
        base = np.ceil(weight.sum() / groups.n_pes)
        for slack in SLACKS:
            eps = max(float(np.max(stop - start)) * (1 + slack) / base - 1.0, 0.0)
            try:
                group_of = map_tasks(graph, groups, method="auto", seed=seed, eps=eps,
                                     time_limit=time_limit).pe_of_task
                break
            except ValueError:
                if slack == SLACKS[-1]:
                    raise
    pe_seq, first = layout(group_of, weight, start, stop)
    if len(pe_seq) != n_tasks:
        raise ValueError(f"the coarse graph holds {len(pe_seq)} tasks, not {n_tasks}")
    anc, dist = pe_labels(topology, pe_seq)
    packed = Labels(pe_seq, anc, dist).pack()
    blocks = [packed[block_tasks(r, n_tasks, n_owners)] for r in range(n_owners)]
    return (ids, first), blocks


# ------------------------------------------------------------ the driver


@dataclass
class MultilevelResult:
    labels: Labels          # this owner's tasks' PE labels
    J_before: float
    J_after: float
    J_projected: float      # after the projection, before the swap rounds
    rounds: int             # all rounds: label propagation and swap rounds
    coarsening_rounds: list = field(default_factory=list)  # per level
    level_sizes: list = field(default_factory=list)        # vertices per level, finest first
    refine: RoundsResult | None = None
    kept_start: bool = False


class Multilevel(OwnerProtocol):
    """One owner's part of the multilevel mapping (see the module docstring).
    ``topology`` is needed only where ``exchange.central`` runs its function
    (None elsewhere); ``caps`` is ``level_caps(topology)`` on every owner."""

    def __init__(self, rows, start: Labels, exchange, caps, topology=None, *, seed: int = 0,
                 coarse_max: int = COARSE_MAX, lp_rounds: int = LP_ROUNDS,
                 coarse_time_limit: float = COARSE_TIME_LIMIT, refine_rounds: int = REFINE_ROUNDS,
                 replicas: int = REPLICAS, kicks: int = 0, min_improvement: float = 1e-4,
                 cap_fraction: float = CAP_FRACTION):
        super().__init__(exchange)
        self.rows, self.start, self.caps, self.topology = rows, start, list(caps), topology
        self.seed, self.coarse_max, self.lp_rounds = seed, coarse_max, lp_rounds
        self.coarse_time_limit, self.refine_rounds = coarse_time_limit, refine_rounds
        self.replicas, self.kicks, self.min_improvement = replicas, kicks, min_improvement
        self.cap_fraction = cap_fraction

    def run(self) -> MultilevelResult:
        n = self.rows.n_tasks
        level = Level(self.rows, np.ones(len(self.rows.tasks)))
        sizes = [int(self._allreduce([len(level.rows.tasks)])[0])]
        contractions, lp_rounds = [], []
        caps = self.caps or [(0, n)]
        depth = caps[0][0]
        for i in range(64):  # a level per cap; the last cap again while still too big
            if i and sizes[-1] <= self.coarse_max:
                break
            depth, cap = caps[min(i, len(caps) - 1)]
            co = Coarsening(level, self.ex, cap=max(np.floor(cap * self.cap_fraction), 1.0),
                            seed=self.seed + 7919 * i)
            con, moved = co.run(self.lp_rounds)
            contractions.append(con)
            lp_rounds.append(len(moved))
            level = con.coarse
            sizes.append(int(self._allreduce([len(level.rows.tasks)])[0]))
            if i >= len(caps) - 1 and sizes[-1] > 0.9 * sizes[-2]:
                break  # the top cap no longer shrinks the graph: map what there is
        first = self._central(level, depth, n)
        # projection: clusters hand positions to their members, level by level
        for con in reversed(contractions):
            first = self._project(con, first)
        labels = self._labels_of_positions(first, n)
        j_start = float(self._allreduce(SwapRounds(self.rows, self.start, self.ex, replicas=1).cost())[0])
        sr = SwapRounds(self.rows, labels, self.ex, seed=self.seed, replicas=self.replicas)
        res = sr.run(max_rounds=self.refine_rounds, min_improvement=self.min_improvement,
                     kicks=self.kicks)
        kept = res.J_after >= j_start  # the same on every owner: allreduced values
        out = self.start if kept else res.labels
        return MultilevelResult(out, j_start, min(res.J_after, j_start), res.J_before,
                                sum(lp_rounds) + res.rounds, lp_rounds, sizes, res, bool(kept))

    def _central(self, level: Level, depth: int, n: int) -> np.ndarray:
        """Gather the coarse graph on one owner, map and lay it out there;
        returns the first position of each coarse vertex held here."""
        rows = level.rows

        def records():
            r = rows.row_of_entry
            vert = np.column_stack([np.zeros(len(rows.tasks)), rows.tasks, level.weight,
                                    np.zeros(len(rows.tasks))])
            edge = np.column_stack([np.ones(len(r)), rows.tasks[r], rows.cols, rows.weights])
            return np.vstack([vert, edge])

        rec = self._local(records)
        self._allreduce([0])
        fn = lambda got: map_coarse(got, self.topology, depth, n, self.ex.size, seed=self.seed,  # noqa: E731
                                    time_limit=self.coarse_time_limit)
        (ids, first), self.position_labels = self.ex.central(rec, fn)
        return first[np.searchsorted(ids, rows.tasks)].astype(np.float64)

    def _project(self, con, first_of_cluster) -> np.ndarray:
        """First positions of the members of this owner's clusters, sent to
        the members' owners; returns those of the vertices held here."""
        got = self._send(lambda: self._member_positions(con, first_of_cluster))

        def mine():
            g = got[np.argsort(got[:, 0], kind="stable")]
            return g[:, 1]

        out = self._local(mine)
        self._allreduce([0])
        return out

    def _member_positions(self, con, first_of_cluster):
        mem = con.members  # sorted by cluster, then member
        c = mem[:, 0].astype(np.int64)
        at = np.searchsorted(con.coarse.rows.tasks, c)
        start = np.searchsorted(c, c)
        csum = np.cumsum(mem[:, 2])
        before = csum - mem[:, 2] - np.where(start > 0, csum[start - 1], 0.0)
        pos = first_of_cluster[at] + before
        return self._owner(mem[:, 1]), np.column_stack([mem[:, 1], pos])

    def _labels_of_positions(self, position, n: int) -> Labels:
        """Each task asks the owner of its position for that PE's label."""
        rows, levels = self.rows, None
        asked = self._send(lambda: (self._owner(position),
                                    np.column_stack([position, rows.tasks])))

        def answer():
            block = block_tasks(self.ex.rank, n, self.ex.size)
            p = asked[:, 0].astype(np.int64) - (block[0] if len(block) else 0)
            return self._owner(asked[:, 1]), np.column_stack([asked[:, 1], self.position_labels[p]])

        got = self._send(answer)
        levels = self.start.anc.shape[1]

        def mine():
            g = got[np.argsort(got[:, 0], kind="stable")]
            if not np.array_equal(g[:, 0].astype(np.int64), rows.tasks):
                raise RuntimeError("the projection did not give every task one position")
            return Labels.unpack(g[:, 1:], levels)

        out = self._local(mine)
        self._allreduce([0])
        return out


def multilevel_map(graph: CommGraph, topology: Topology, start=None, *, seed: int = 0,
                   **options) -> tuple[np.ndarray, MultilevelResult]:
    """The distributed multilevel mapping run in one process (the same
    decisions as under MPI with any number of ranks).  ``start``: the
    current placement (default: task t on PE t); one-to-one only."""
    n = graph.n
    if n > topology.n_pes:
        raise ValueError(f"one-to-one only: {n} tasks on {topology.n_pes} PEs")
    pe = np.arange(n) if start is None else np.asarray(start, dtype=np.int64)
    if len(np.unique(pe)) != n:
        raise ValueError("the start must be a one-to-one mapping")
    ex = LocalExchange(n)
    tasks = np.arange(n, dtype=np.int64)
    rows = symmetric_rows(tasks, *rows_of_graph(graph, tasks), ex)
    ml = Multilevel(rows, Labels.of(topology, pe), ex, level_caps(topology), topology, seed=seed,
                    **options)
    res = ml.run()
    return res.labels.pe.copy(), res
