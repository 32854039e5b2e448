"""The optimal split of a tree node's tasks into its leaf groups (one-to-one, uniform trees).

Inside a node every task elsewhere is equally far away and inside a group
all cores are, so once the node's tasks are fixed the only J left to win
is the weight between its groups: the split of the node's a0 * a1 tasks
into a1 groups of a0 that keeps the most weight inside the groups.  For a
group of at most four cores that is a small set-partitioning problem:
every group is a union of connected pieces of at most a0 tasks (a piece's
weight is the weight inside it), so the pieces form the columns, every
task is covered once, and the pieces must pack into full groups (for
a0 = 4 every 3-piece needs a single beside it; for a0 = 3 every 2-piece).
HiGHS (``highs.py``) solves it exactly; its LP relaxation first tells
whether any split beats the current one (often not), and where its
optimum is integral it is the optimal split: either way the branch and
bound is skipped.  On the one-node benchmark rows it proved the best J
optimal or found a lower one that swaps, kicks and cycles had not reached
(data/64, crack/64; docs/results/quality-one-to-one.md).

The branch and bound is limited by a node count (repeatable) and by the
deadline (a cut keeps the best split found, if it is better).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ...deadline import Deadline
from ...graph import CommGraph
from ...topology import Topology
from .cycles import leaf_groups
from .highs import solve

MAX_GROUP = 4          # cores per group at most (the packing rule below holds up to four)
MAX_NODE_TASKS = 256   # tasks of a node at most (its weights are held dense)
MAX_PIECES = 80_000    # pieces (columns) of a node at most: a denser node is left as it is (its enumeration and LP
                       # grow with its pieces: add20/128's node of 73k took 0.4 s; traffic:amg's has 677k)
NODE_LIMIT = 2_000     # branch-and-bound nodes per solve
COLUMNS_PER_TASK = 64  # column generation of the LP: the heaviest pieces to start from, and the most a round adds
                       # (each round solves afresh: 0.62 x the time of 32 over the LPs of bcsstk29/128, wing_nodal/128,
                       # bcsstk33/128, add20/128, 3elt/256, vibrobox/128, where 32 took up to 10 rounds)
BRANCH_WORK = 20       # a branch and bound counts this many times the pieces it branches over on top of its node's
                       # LP: the pieces' enumeration and the LP took 2-8e-6 s per piece (3elt/2048's, wing_nodal/256's,
                       # bcsstk33/128's nodes, add20/64's, traffic:btmz's), the branch and bound 0.9-5.5e-4 s per piece
                       # kept (1.4e-4 over the 19 of uk/2048, 3elt/1024 and rgg/2048; whitaker3/256, rgg/256)


def connected_pieces(weights: np.ndarray, size: int, limit: float = MAX_PIECES) -> list[np.ndarray]:
    """The connected task sets of 1..``size`` tasks of a dense symmetric
    weight matrix, one (count, k) array of sorted local indices per k;
    stops early (returns what it has) past ``limit`` sets."""
    adj = weights > 0
    m = weights.shape[0]
    levels = [np.arange(m, dtype=np.int64)[:, None]]
    total = m
    for _ in range(1, size):
        cur = levels[-1]
        reach = adj[cur].any(axis=1)                     # neighbours of any member
        reach[np.arange(cur.shape[0])[:, None], cur] = False
        r, c = np.nonzero(reach)
        if total + r.size / (cur.shape[1] + 1) > limit:  # a set of k tasks is grown from at most k others
            break
        grown = np.sort(np.hstack([cur[r], c[:, None]]), axis=1)
        # one integer per set (at most 4 tasks of at most MAX_NODE_TASKS: below 2^32), in the sets' lexicographic
        # order: np.unique on rows took 10x as long (2.5 s of bcsstk33/1024's 7 s)
        key = grown @ (m ** np.arange(grown.shape[1] - 1, -1, -1, dtype=np.int64))
        grown = grown[np.unique(key, return_index=True)[1]]
        total += grown.shape[0]
        if total > limit:
            break
        levels.append(grown)
    return levels


def _piece_weights(weights: np.ndarray, piece: np.ndarray) -> np.ndarray:
    """Weight inside each piece (rows of local indices)."""
    k = piece.shape[1]
    out = np.zeros(piece.shape[0])
    for i in range(k):
        for j in range(i + 1, k):
            out += weights[piece[:, i], piece[:, j]]
    return out


class SetPartitioning(NamedTuple):
    """A node's set partitioning: the pieces (columns; ``levels`` as from
    ``connected_pieces``, numbered level after level), their inside
    weights, the cover rows (every task once) and the packing row."""
    levels: list[np.ndarray]
    value: np.ndarray
    cover: sp.csr_array
    pack: np.ndarray

    def piece(self, i: int) -> np.ndarray:
        """The local tasks of column ``i`` (a split chooses at most a node's tasks' worth)."""
        for level in self.levels:
            if i < level.shape[0]:
                return level[i]
            i -= level.shape[0]
        raise IndexError(i)

    def columns(self, keep: np.ndarray) -> SetPartitioning:
        """The model over the pieces ``keep`` alone (sorted column numbers)."""
        sizes = np.array([level.shape[0] for level in self.levels])
        ends = np.cumsum(sizes)
        levels = [level[keep[(keep >= end - size) & (keep < end)] - (end - size)]
                  for level, size, end in zip(self.levels, sizes, ends)]
        return SetPartitioning(levels, self.value[keep], self.cover[:, keep], self.pack[:, keep])


def set_partitioning(weights: np.ndarray, levels: list[np.ndarray], a0: int) -> SetPartitioning:
    """The model of a node (dense ``weights``) over its connected ``levels``
    (``connected_pieces``)."""
    size = np.concatenate([np.full(level.shape[0], level.shape[1]) for level in levels])
    value = np.concatenate([_piece_weights(weights, level) for level in levels])
    tasks = np.concatenate([level.ravel() for level in levels])  # piece after piece
    cover = sp.csr_array((np.ones(tasks.size), (tasks, np.repeat(np.arange(size.size), size))),
                         shape=(weights.shape[0], size.size))
    # every piece of a0 - 1 tasks needs a single task beside it (a0 = 3, 4; any pieces pack into pairs)
    pack = ((size == 1).astype(float) - (size == a0 - 1))[None, :] if a0 > 2 else np.zeros((0, size.size))
    return SetPartitioning(levels, value, cover, pack)


def _split(model: SetPartitioning, x: np.ndarray, a0: int, a1: int):
    chosen = np.flatnonzero(x > 0.5)
    return _pack([model.piece(i) for i in chosen], a0, a1), float(model.value[chosen].sum())


def relaxed_split(model: SetPartitioning, a0: int, a1: int, deadline: Deadline | None = None):
    """The LP relaxation: (its bound on the weight inside the groups, the
    groups and their inside weight when the LP's optimum is integral (then
    they are optimal), else None, every piece's reduced cost at the LP's
    optimum); (None, None, None) when the LP was not solved.  A split that
    takes a piece keeps at most the bound less the piece's reduced cost
    inside, so the pieces that cost more than a split can win are in no
    better split (``exact_group_refine`` branches without them).
    Often it shows that no split beats the current one, or is the optimum
    itself (traffic:btmz, bcsstk33/128).  Solved by column generation: the
    LP over every single and the heaviest pieces, then again with the
    pieces whose reduced cost (from its duals) says they would raise it,
    until none would: the LP over all pieces, 4-18x faster than solving it
    at once on the dense nodes of add20/64, bcsstk33/128 and the traffic
    matrices."""
    deadline = Deadline.of(deadline)
    m, n = model.cover.shape
    chunk = COLUMNS_PER_TASK * m
    active = np.zeros(n, dtype=bool)
    active[np.diff(model.cover.tocsc().indptr) == 1] = True  # the singles: a split always exists
    active[np.argsort(-model.value, kind="stable")[:chunk]] = True
    across = model.cover.T.tocsr()
    tolerance = 1e-9 * max(1.0, float(np.abs(model.value).max(initial=0.0)))
    pack_rows = model.pack.shape[0]
    while True:
        if deadline.expired():
            return None, None, None
        cols = np.flatnonzero(active)
        lp = solve(-model.value[cols], sp.vstack([-model.pack[:, cols], model.cover[:, cols]]),
                   np.concatenate([np.full(pack_rows, -np.inf), np.ones(m)]),
                   np.concatenate([np.zeros(pack_rows), np.ones(m)]), deadline=deadline)
        if not lp.optimal:
            return None, None, None
        pack_dual, cover_dual = lp.row_dual[:pack_rows], lp.row_dual[pack_rows:]
        reduced = -model.value - across @ cover_dual + model.pack.T @ pack_dual
        better = np.flatnonzero((reduced < -tolerance) & ~active)
        if better.size == 0:
            break
        active[better[np.argsort(reduced[better], kind="stable")[:chunk]]] = True
    x = np.zeros(n)
    x[cols] = lp.x
    integral = np.all(np.abs(x - np.round(x)) < 1e-7)
    return -lp.objective, (_split(model, x, a0, a1) if integral else None), np.maximum(reduced, 0.0)


def pieces_within(reduced: np.ndarray, gap: float) -> np.ndarray:
    """The pieces (column numbers) a split keeping more than the LP bound
    less ``gap`` inside can take: those whose ``reduced`` cost (from
    ``relaxed_split``) is within the gap."""
    return np.flatnonzero(reduced <= gap * (1 + 1e-9) + 1e-9)


def best_split(model: SetPartitioning, a0: int, a1: int, deadline: Deadline | None = None,
               node_limit: int = NODE_LIMIT):
    """Groups (a list of a1 arrays of a0 local indices) keeping the most
    weight inside them, their inside weight and HiGHS's bound on it (equal
    when proven optimal, higher where ``node_limit`` or the deadline cut
    the branch and bound); None when no split was found in time."""
    deadline = Deadline.of(deadline)
    res = solve(-model.value, sp.vstack([model.cover, model.pack]),
                np.concatenate([np.ones(model.cover.shape[0]), np.zeros(model.pack.shape[0])]),
                np.concatenate([np.ones(model.cover.shape[0]), np.full(model.pack.shape[0], np.inf)]),
                col_upper=1.0, integer=True, node_limit=node_limit, deadline=deadline)
    if res.x is None:
        return None
    groups, inside = _split(model, res.x, a0, a1)
    return groups, inside, (inside if res.optimal else max(-res.dual_bound, inside))


def _pack(pieces: list[np.ndarray], a0: int, a1: int) -> list[np.ndarray]:
    """Pieces of at most a0 tasks into a1 full groups: whole pieces first,
    each (a0 - 1)-piece with a single, then the rest in size order."""
    by = {k: [p for p in pieces if len(p) == k] for k in range(1, a0 + 1)}
    groups, singles, smaller = list(by[a0]), by[1], []
    if a0 > 2:
        groups += [np.concatenate([p, singles.pop()]) for p in by[a0 - 1]]
        smaller = [p for k in range(a0 - 2, 1, -1) for p in by[k]]
    rest = np.concatenate(smaller + singles + [np.zeros(0, dtype=np.int64)])
    groups += [rest[i:i + a0] for i in range(0, rest.size, a0)]
    assert len(groups) == a1 and all(len(g) == a0 for g in groups)
    return groups


def exact_group_refine(graph: CommGraph, topology: Topology, pe_of_task, *, max_work: float | None = None,
                       deadline: Deadline | None = None) -> tuple[np.ndarray, float, int]:
    """Full nodes' tasks split optimally into their leaf groups while the
    work stays within ``max_work``: first the LP relaxation of each node
    (its pieces' worth of work), the nodes with the most weight between
    their groups first, then a branch and bound for the nodes whose LP is
    fractional (BRANCH_WORK units per piece it branches over: those whose
    reduced cost is below the gap between LP and current split, a tenth
    to a third of them on mesh nodes), the largest gap first (on uk/2048,
    3elt/2048 and rgg/2048 this order won 0.03-0.13 % more than branching
    in the first order); a node
    or a branch and bound that does not fit is passed over, a node of more
    than MAX_PIECES pieces always.  Returns the mapping, the J removed and
    the work done.  A task that stays in its group keeps its
    PE; nothing moves between nodes.  One-to-one on a uniform tree whose
    groups hold 2..MAX_GROUP cores; otherwise the mapping comes back
    unchanged."""
    deadline = Deadline.of(deadline)
    pe = np.asarray(pe_of_task, dtype=np.int64).copy()
    shape = leaf_groups(topology)
    if shape is None or graph.n > topology.n_pes:
        return pe, 0.0, 0
    a0, a1, factor = shape
    per_node = a0 * a1
    if not 2 <= a0 <= MAX_GROUP or per_node > MAX_NODE_TASKS:
        return pe, 0.0, 0
    adj = graph.symmetric
    node = pe // per_node
    full = np.flatnonzero(np.bincount(node, minlength=topology.n_pes // per_node) == per_node)
    rows = np.repeat(np.arange(graph.n), np.diff(adj.indptr))
    between = (node[rows] == node[adj.indices]) & (pe[rows] // a0 != pe[adj.indices] // a0)
    loss = np.bincount(node[rows][between], weights=adj.data[between], minlength=node.max() + 1)
    order = full[np.argsort(-loss[full], kind="stable")]
    removed, work = 0.0, 0
    task_at = np.full(topology.n_pes, -1, dtype=np.int64)  # the task on every PE: a full node's tasks
    task_at[pe] = np.arange(graph.n)                       # are its PEs' (nothing moves between nodes)
    old_group = np.arange(per_node) // a0               # local task i sits in local group i // a0
    same = np.triu(old_group[:, None] == old_group[None, :], 1)
    fractional = []                                     # (bound - inside now, node, pieces) for the branch and bound
    for p in order[loss[order] > 0]:                    # the LPs first: an integral optimum is the split
        if deadline.expired():
            break
        room = MAX_PIECES if max_work is None else min(MAX_PIECES, max_work - work)
        if room < per_node:
            break
        tasks = task_at[p * per_node:(p + 1) * per_node].copy()  # in PE order (a copy: _apply rewrites task_at)
        weights, now_inside = _node(adj, tasks, same)
        levels = connected_pieces(weights, a0, limit=room)
        if len(levels) < a0:
            continue                                    # too dense, or more than the budget has left
        model = set_partitioning(weights, levels, a0)
        work += model.value.size
        bound, found, reduced = relaxed_split(model, a0, a1, deadline)
        gap = None if bound is None else bound - now_inside
        if gap is None or gap <= now_inside * 1e-9 + 1e-9:
            continue                                    # no split keeps more inside
        if found is None:                               # branch over the pieces a better split can take
            fractional.append((gap, tasks, now_inside, model.columns(pieces_within(reduced, gap))))
            continue
        removed += factor * _apply(pe, task_at, tasks, found, now_inside, old_group, a0, a1)
    # then the branch and bounds, the node whose LP promises most first, while the work pays for them
    for _, tasks, now_inside, model in sorted(fractional, key=lambda f: -f[0]):
        if deadline.expired():
            break
        if max_work is not None and max_work - work < BRANCH_WORK * model.value.size:
            continue
        work += BRANCH_WORK * model.value.size
        found = best_split(model, a0, a1, deadline)
        if found is not None:
            removed += factor * _apply(pe, task_at, tasks, found[:2], now_inside, old_group, a0, a1)
    return pe, removed, work


def _node(adj, tasks: np.ndarray, same: np.ndarray):
    """The dense weights among a node's ``tasks`` (in PE order) and the
    weight inside their groups now (``same``: pairs of local indices in
    one group)."""
    weights = adj[tasks][:, tasks].toarray()
    return weights, float(weights[same].sum())


def _apply(pe: np.ndarray, task_at: np.ndarray, tasks: np.ndarray, found, now_inside: float, old_group,
           a0: int, a1: int) -> float:
    """Regroup the node's ``tasks`` by ``found`` (groups, inside weight)
    when it keeps more inside (``task_at``, the task on every PE, follows);
    the weight won."""
    groups, inside = found
    if inside <= now_inside * (1 + 1e-12):
        return 0.0
    pe[tasks] = _regroup(pe[tasks], groups, old_group, a0, a1)
    task_at[pe[tasks]] = tasks
    return inside - now_inside


def _regroup(local_pe: np.ndarray, groups: list[np.ndarray], old_group: np.ndarray, a0: int, a1: int):
    """PEs of a node's tasks (in PE order) for the new groups: each new
    group takes the old group it shares most tasks with, so the fewest
    tasks change PE."""
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    overlap = np.zeros((a1, a1))
    for g, members in enumerate(groups):
        np.add.at(overlap[g], old_group[members], 1)
    # one more everywhere: every pair an edge, so a full matching exists (its optimum unchanged)
    _, slot = min_weight_full_bipartite_matching(sp.csr_array(overlap + 1), maximize=True)
    new_pe = np.empty(local_pe.size, dtype=np.int64)
    for g, members in enumerate(groups):
        cores = local_pe[slot[g] * a0:(slot[g] + 1) * a0]
        stay = members[old_group[members] == slot[g]]
        new_pe[stay] = local_pe[stay]
        new_pe[np.setdiff1d(members, stay)] = np.setdiff1d(cores, local_pe[stay])
    return new_pe
