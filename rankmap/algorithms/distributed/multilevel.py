"""Distributed multilevel mapping: coarsen across the owners, map the small
coarse graph centrally, project back with moves between groups, refine with
the swap rounds.

Swap rounds alone move a task one swap at a time: from a poor placement they
need many rounds and cannot move a whole group of tasks to another node
(ParHIPMap is multilevel for this reason).  Here:
  1. coarsen (``coarsen.Coarsening``): size-constrained label propagation
     whose size caps follow the machine, smallest groups first (a cluster
     holds at most ``cap_fraction`` of the PEs of a group of that level), one
     level per cap, while the graph has more than ``coarse_max`` vertices
     (none when it is that small to begin with: then step 2 maps the tasks
     themselves, one per PE);
  2. the coarse graph goes to one owner (``exchange.central``), which maps
     it onto the machine cut at the groups of the last cap (``auto``, many
     clusters per group, balanced by task count);
  3. uncoarsening (``balance.GroupMoves``): at every level, moves of
     clusters between neighbouring groups that lower J (a few percent of
     room above a group's PEs on the coarse levels, none on the tasks';
     the tasks of an overfull group move out where it costs least)
     (optionally FM between pairs of sibling groups, ``pairs.PairExchange``);
     members inherit their cluster's group; on the task level each group
     lays its tasks on its PEs, ordered by the clusters of every level
     around them, then sets of up to eight sibling groups (or of their
     ancestors where groups come few per parent: ``set_depth``) are mapped again
     by ``auto`` on one owner each (``pairs.SetRemap``: which tasks share a
     node, where a coarse graph of a few clusters per group packs poorly),
     round after round while they gain and the round budget lasts;
  4. the swap rounds (``swap_rounds.SwapRounds``) refine the tasks' PEs.
Every step is a function of the global state (sorted records, seeded
hashes), so the result is the same for any number of owners; no owner holds
more than its rows, its neighbours' labels, its clusters' members, a vector
of group loads and its block of PE labels, except the one that maps the
coarse graph.  The result is never worse than the start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ...deadline import Deadline
from .balance import GroupMoves, Groups
from .coarsen import Coarsening, Level
from .pairs import SET_SIZE, SET_TIME_LIMIT, PairExchange, SetRemap
from .protocol import OwnerProtocol
from .swap_rounds import (REPLICAS, Labels, LocalExchange, RoundsResult, SwapRounds,
                          block_tasks, pe_labels, rows_of_graph, symmetric_rows)

if TYPE_CHECKING:
    from ...graph import CommGraph
    from ...topology import Topology

#: the coarse graph is gathered once it has at most this many vertices
COARSE_MAX = 4096
#: label propagation rounds per level
LP_ROUNDS = 3
#: auto's budget (seconds of its work model) for the coarse graph: its own default
COARSE_TIME_LIMIT = 10.0
#: room above its PE count a group may get in the coarse mapping, tried in turn
SLACKS = (0.03, 0.1, 0.25, 0.5, 1.0, 4.0)
#: clusters hold at most this fraction of a group's PEs (room to pack them)
CAP_FRACTION = 0.5
#: rounds of moves between groups after the projection
BALANCE_ROUNDS = 2
#: rounds of FM between pairs of sibling groups per coarse level (``pairs``);
#: off by default: on the forced-coarsening instances a round of the set
#: rounds below takes off more of the node-level cut than a pair round
PAIR_ROUNDS = 0
#: rounds of ``auto`` on sets of sibling groups on the tasks' level
#: (``pairs.SetRemap``): at most this many; the round budget ends them sooner
SET_ROUNDS = 30
#: room above its PEs a group may take on the coarse levels of the uncoarsening
LEVEL_SLACK = 0.05
#: rounds of all levels together: the swap rounds get what the levels leave,
#: at least MIN_REFINE_ROUNDS
ROUND_BUDGET = 30
MIN_REFINE_ROUNDS = 2
#: rounds of the swap refinement after the projection
REFINE_ROUNDS = 12


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


def machine_groups(topology: Topology, depth: int) -> tuple[Topology, np.ndarray, np.ndarray, np.ndarray]:
    """The machine cut at ``depth``: a topology whose leaves are the groups
    at that depth (and PEs above it), with the distances above; each
    group's PE range [start, stop) and the tree node above it."""
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
    return Topo(nodes[0]), t.leaf_start[groups], t.leaf_stop[groups], t.parent[groups]


def set_depth(topology: Topology, depth: int, set_size: int) -> int:
    """The depth of the groups the set rounds join (``pairs.SetRemap``):
    the groups at ``depth``, or their ancestors while a parent has fewer
    than ``set_size`` children (on 24:2:k with sockets as the coarse groups,
    a set of sibling sockets is one node and never changes which tasks
    share a node; sets of sibling nodes do)."""
    while depth > 1:
        parent = machine_groups(topology, depth)[3]
        if np.bincount(parent).max() >= set_size:
            break
        depth -= 1
    return depth


def groups_at(topology: Topology, depth: int, anc: np.ndarray, dist: np.ndarray) -> Groups:
    """The ``Groups`` of the machine cut at ``depth`` (``anc``, ``dist``: the labels of all PEs)."""
    _, start, stop, parent = machine_groups(topology, depth)
    return Groups(start, stop, anc[start], dist[start], topology.n_pes, parent)


def map_coarse(records: np.ndarray, topology: Topology, depth: int, n_owners: int, *,
               seed: int = 0, time_limit: float = COARSE_TIME_LIMIT, set_size: int = SET_SIZE,
               deadline: Deadline | None = None):
    """On one owner: map the gathered coarse graph (records: kind 0 = vertex
    (id, weight), kind 1 = edge (id, id, bytes)) onto the groups at
    ``depth`` (None: the graph is the tasks', mapped one-to-one onto PEs).
    Returns ((coarse vertex ids, their groups, the ``Groups``, the
    ``Groups`` the set rounds join: ``set_depth``), for every owner the
    packed labels of its block of PEs).  ``time_limit``
    is auto's counted budget (``work_limit``): the same coarse mapping
    whatever the machine or the number of owners, unless the call's
    ``deadline`` cuts it (then ``deadline.hit``, as in every stage)."""
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
    cut = topology.max_depth if depth is None else depth
    machine, start, stop, _ = machine_groups(topology, cut)
    group_of = np.zeros(len(ids), dtype=np.int64)
    if depth is None:  # the tasks themselves: one task per PE
        group_of = map_tasks(graph, machine, method="auto", seed=seed, deadline=deadline,
                             work_limit=time_limit, objective="sum").pe_of_task  # the coarse graph's J
    elif machine.n_pes > 1:
        # many clusters per group, balanced by task count: a group of s PEs
        # may take up to s (1 + slack) tasks (the moves after the projection
        # even it out); no partition may fit a tight limit, so the slack
        # grows until one does
        base = np.ceil(weight.sum() / machine.n_pes)
        for slack in SLACKS:
            eps = max(float(np.max(stop - start)) * (1 + slack) / base - 1.0, 0.0)
            try:
                group_of = map_tasks(graph, machine, method="auto", seed=seed, eps=eps, deadline=deadline,
                                     work_limit=time_limit, objective="sum").pe_of_task
                break
            except ValueError:
                if slack == SLACKS[-1]:
                    raise
    all_pes = np.arange(topology.n_pes)
    anc, dist = pe_labels(topology, all_pes)
    groups = groups_at(topology, cut, anc, dist)
    units = groups if depth is None else groups_at(topology, set_depth(topology, depth, set_size), anc, dist)
    packed = Labels(all_pes, anc, dist).pack()
    blocks = [packed[block_tasks(r, topology.n_pes, n_owners)] for r in range(n_owners)]
    return (ids, group_of, groups, units), blocks


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
    group_moves: list = field(default_factory=list)        # tasks moved per round
    pair_rounds: list = field(default_factory=list)        # FM rounds between group pairs, per level
    set_gains: list = field(default_factory=list)          # J taken off per round of the set rounds

    @property
    def deadline_hit(self) -> bool:
        """Owner 0's deadline ended the swap rounds (the same on every owner)."""
        return self.refine is not None and self.refine.deadline_hit


class Multilevel(OwnerProtocol):
    """One owner's part of the multilevel mapping (see the module docstring).
    ``topology`` is needed only where ``exchange.central`` runs its function
    (None elsewhere); ``caps`` is ``level_caps(topology)`` on every owner."""

    def __init__(self, rows, start: Labels, exchange, caps, topology=None, *, seed: int = 0,
                 coarse_max: int = COARSE_MAX, lp_rounds: int = LP_ROUNDS,
                 coarse_time_limit: float = COARSE_TIME_LIMIT, refine_rounds: int = REFINE_ROUNDS,
                 replicas: int = REPLICAS, kicks: int = 0, min_improvement: float = 1e-4,
                 cap_fraction: float = CAP_FRACTION, balance_rounds: int = BALANCE_ROUNDS,
                 level_slack: float = LEVEL_SLACK, pair_rounds: int = PAIR_ROUNDS, set_rounds: int = SET_ROUNDS,
                 set_size: int = SET_SIZE, set_time_limit: float = SET_TIME_LIMIT,
                 workers: int | None = None, deadline: Deadline | None = None):
        super().__init__(exchange)
        self.deadline = deadline  # owner 0's ends the swap rounds (see SwapRounds.run)
        self.rows, self.start, self.caps, self.topology = rows, start, list(caps), topology
        self.seed, self.coarse_max, self.lp_rounds = seed, coarse_max, lp_rounds
        self.coarse_time_limit, self.refine_rounds = coarse_time_limit, refine_rounds
        self.replicas, self.kicks, self.min_improvement = replicas, kicks, min_improvement
        self.cap_fraction, self.balance_rounds = cap_fraction, balance_rounds
        self.level_slack, self.pair_rounds = level_slack, pair_rounds
        self.set_rounds, self.set_size, self.set_time_limit = set_rounds, set_size, set_time_limit
        self.workers = workers  # processes for the sets an owner holds (default: rankmap.cores)

    def run(self) -> MultilevelResult:
        n = self.rows.n_tasks
        level = Level(self.rows, np.ones(len(self.rows.tasks)))
        sizes = [int(self._allreduce([len(level.rows.tasks)])[0])]
        contractions, lp_rounds = [], []
        caps = self.caps or [(0, n)]
        depth = caps[0][0]
        for i in range(len(caps) + 1):  # a level per cap; the last cap once more if still too big
            if sizes[-1] <= self.coarse_max:
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
        group, key = self._central(level, depth if contractions else None)
        if not contractions:  # the coarse graph is the tasks': their ids order them
            key = np.zeros((len(self.rows.tasks), 2), dtype=np.int64)
        # uncoarsening: moves between groups at every level (a little room
        # above the groups' PEs on the coarse levels, none on the tasks'),
        # then the members inherit their cluster's group
        moved, paired = [], []
        levels = [self.rows] + [c.coarse.rows for c in contractions]
        weights = [None] + [c.coarse.weight for c in contractions]
        used = sum(lp_rounds)
        for i in range(len(contractions), -1, -1):
            # this level's share of the rounds the swap rounds leave
            share = max((ROUND_BUDGET - MIN_REFINE_ROUNDS - used) // (i + 1), 1)
            moves = GroupMoves(levels[i], group, key[:, :-1], self.groups, self.ex, seed=self.seed + i,
                               weight=weights[i], slack=self.level_slack if i else 0.0)
            got = moves.run(min(self.balance_rounds, share))
            moved += got
            used += len(got)
            # on the tasks' level the set rounds (after the placement) do the pairs' work
            pair_rounds = min(self.pair_rounds, share - len(got)) if i else 0
            if pair_rounds > 0:
                pairs = PairExchange(levels[i], moves.group, moves.weight, self.groups, moves.limit,
                                     self.ex, seed=self.seed + i)
                gains = pairs.run(pair_rounds, self.deadline)
                paired.append(len(gains))
                used += len(gains)
                moves.group = pairs.group
                moves.final_load = moves.loads()
            if i:
                group, key = self._project(contractions[i - 1], moves.group, key)
        labels = moves.place(self.pe_labels, self.start.anc.shape[1])
        set_gains = []
        set_rounds = min(self.set_rounds, share - len(got)) if contractions else 0
        if set_rounds > 0:
            sets = SetRemap(self.rows, labels, self.set_groups, self.ex, seed=self.seed,
                            set_size=self.set_size, time_limit=self.set_time_limit, workers=self.workers)
            set_gains = sets.run(set_rounds, self.deadline)
            used += len(set_gains)
        j_start = float(self._allreduce(SwapRounds(self.rows, self.start, self.ex, replicas=1).cost())[0])
        sr = SwapRounds(self.rows, labels, self.ex, seed=self.seed, replicas=self.replicas)
        res = sr.run(max_rounds=max(min(self.refine_rounds, ROUND_BUDGET - used), MIN_REFINE_ROUNDS),
                     min_improvement=self.min_improvement, kicks=self.kicks, deadline=self.deadline)
        kept = res.J_after >= j_start  # the same on every owner: allreduced values
        out = self.start if kept else res.labels
        return MultilevelResult(out, j_start, min(res.J_after, j_start), res.J_before,
                                sum(lp_rounds) + len(moved) + sum(paired) + len(set_gains) + res.rounds, lp_rounds,
                                sizes, res, bool(kept), moved, paired, set_gains)

    def _central(self, level: Level, depth: int):
        """Gather the coarse graph on one owner and map it there; returns
        the group of each coarse vertex held here and its id (the order key
        of its tasks within their group)."""
        rows = level.rows

        def records():
            r = rows.row_of_entry
            vert = np.column_stack([np.zeros(len(rows.tasks)), rows.tasks, level.weight,
                                    np.zeros(len(rows.tasks))])
            edge = np.column_stack([np.ones(len(r)), rows.tasks[r], rows.cols, rows.weights])
            return np.vstack([vert, edge])

        rec = self._local(records)
        self._allreduce([0])
        fn = lambda got: map_coarse(got, self.topology, depth, self.ex.size, seed=self.seed,  # noqa: E731
                                    time_limit=self.coarse_time_limit, set_size=self.set_size,
                                    deadline=self.deadline)
        (ids, group_of, self.groups, self.set_groups), self.pe_labels = self.ex.central(rec, fn)
        return group_of[np.searchsorted(ids, rows.tasks)], rows.tasks[:, None].copy()

    def _project(self, con, group, key):
        """The group and order key of this owner's clusters, sent to their
        members' owners; returns those of the vertices held here.  A
        member's key is its cluster's followed by its own id, so the tasks
        of a group are ordered by the clusters of every level around them."""
        def build():
            mem = con.members  # (cluster, member, weight), sorted by cluster
            at = np.searchsorted(con.coarse.rows.tasks, mem[:, 0].astype(np.int64))
            return self._owner(mem[:, 1]), np.column_stack([mem[:, 1], group[at], key[at], mem[:, 1]])

        got = self._send(build)
        out = self._local(lambda: got[np.argsort(got[:, 0], kind="stable")])
        self._allreduce([0])
        return out[:, 1].astype(np.int64), out[:, 2:].astype(np.int64)


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
