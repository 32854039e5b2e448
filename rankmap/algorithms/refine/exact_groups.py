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
HiGHS (scipy's ``milp``) solves it exactly; its LP relaxation first tells
whether any split beats the current one (often not), which skips the
branch and bound.  On the one-node benchmark rows it proved the best J
optimal or found a lower one that swaps, kicks and cycles had not reached
(data/64, crack/64; docs/quality.md).

The branch and bound is limited by a node count (repeatable) and by the
deadline (a cut keeps the best split found, if it is better).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, linear_sum_assignment, linprog, milp

from ...deadline import Deadline
from ...graph import CommGraph
from ...topology import Topology
from .cycles import leaf_groups

MAX_GROUP = 4          # cores per group at most (the packing rule below holds up to four)
MAX_NODE_TASKS = 256   # tasks of a node at most (its weights are held dense)
MAX_PIECES = 80_000    # pieces (columns) of a node at most: a denser node is left as it is (traffic:btmz
                       # 75k pieces, 2.9 s; add20/64 72k, 6.4 s; traffic:amg 677k, 69 s)
NODE_LIMIT = 2_000     # branch-and-bound nodes per solve


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
        grown = np.unique(grown, axis=0) if grown.size else grown.reshape(0, cur.shape[1] + 1)
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


def best_split(weights: np.ndarray, levels: list[np.ndarray], a0: int, a1: int, deadline: Deadline | None = None,
               node_limit: int = NODE_LIMIT, current: float | None = None):
    """Groups (a list of a1 arrays of a0 local indices) keeping the most
    weight inside them, built from the connected ``levels``
    (``connected_pieces``), their inside weight and HiGHS's bound on it
    (equal when proven optimal, higher where ``node_limit`` or the deadline
    cut the search); None when no split was found in time, or when the LP
    relaxation shows that none keeps more than ``current`` inside (then the
    branch and bound, 1-10x the LP's time, is not run; asking HiGHS for a
    better split instead, by a constraint on the objective, took 1.6x as
    long over the benchmark rows)."""
    deadline = Deadline.of(deadline)
    pieces = [row for level in levels for row in level]
    size = np.concatenate([np.full(level.shape[0], level.shape[1]) for level in levels])
    value = np.concatenate([_piece_weights(weights, level) for level in levels])
    m = weights.shape[0]
    cols = np.repeat(np.arange(len(pieces)), size)
    cover = sp.csr_array((np.ones(cols.size), (np.concatenate(pieces), cols)), shape=(m, len(pieces)))
    # every piece of a0 - 1 tasks needs a single task beside it (a0 = 3, 4; any pieces pack into pairs)
    pack = ((size == 1).astype(float) - (size == a0 - 1))[None, :] if a0 > 2 else np.zeros((0, size.size))
    if current is not None:  # the LP relaxation first: often no split beats the current one
        lp = linprog(-value, A_ub=-pack, b_ub=np.zeros(pack.shape[0]), A_eq=cover, b_eq=np.ones(m), bounds=(0, 1),
                     method="highs")
        if lp.status == 0 and -lp.fun <= current * (1 + 1e-9) + 1e-9:
            return None
    options = {"node_limit": node_limit, "presolve": False}  # presolve took 9x the solve on 35k pieces
    if deadline.end is not None:
        options["time_limit"] = max(deadline.remaining(), 1e-3)
    rules = [LinearConstraint(cover, 1, 1), LinearConstraint(pack, 0, np.inf)]
    res = milp(-value, constraints=rules, integrality=np.ones(len(pieces)), bounds=Bounds(0, 1), options=options)
    if res.x is None:
        return None
    chosen = np.flatnonzero(res.x > 0.5)
    inside = float(value[chosen].sum())
    bound = inside if res.status == 0 else max(-float(res.mip_dual_bound), inside)
    return _pack([pieces[i] for i in chosen], a0, a1), inside, bound


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


def exact_group_refine(graph: CommGraph, topology: Topology, pe_of_task, *, max_pieces: int | None = None,
                       deadline: Deadline | None = None) -> tuple[np.ndarray, float, int]:
    """Full nodes' tasks split optimally into their leaf groups, the nodes
    with the most weight between their groups first, while the pieces
    solved stay within ``max_pieces`` (a node that does not fit is passed
    over, and one of more than MAX_PIECES pieces always); returns the mapping,
    the J removed and the pieces solved (the work done).  A task that stays
    in its group keeps its PE; nothing moves between nodes.  One-to-one on
    a uniform tree whose groups hold 2..MAX_GROUP cores; otherwise the
    mapping comes back unchanged."""
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
    removed, pieces = 0.0, 0
    for p in order[loss[order] > 0]:
        if deadline.expired():
            break
        room = MAX_PIECES if max_pieces is None else min(MAX_PIECES, max_pieces - pieces)
        if room < per_node:
            break
        tasks = np.flatnonzero(node == p)
        tasks = tasks[np.argsort(pe[tasks])]            # local index order = PE order
        weights = adj[tasks][:, tasks].toarray()
        levels = connected_pieces(weights, a0, limit=room)
        if len(levels) < a0:
            continue                                    # too dense, or more than the budget has left
        pieces += sum(level.shape[0] for level in levels)
        old_group = np.arange(per_node) // a0            # local task i sits in local group i // a0
        now_inside = float(np.sum(np.triu(weights, 1)[old_group[:, None] == old_group[None, :]]))
        found = best_split(weights, levels, a0, a1, deadline, current=now_inside)
        if found is None:
            continue
        groups, inside, _ = found
        if inside > now_inside * (1 + 1e-12):
            pe[tasks] = _regroup(pe[tasks], groups, old_group, a0, a1)
            removed += factor * (inside - now_inside)
    return pe, removed, pieces


def _regroup(local_pe: np.ndarray, groups: list[np.ndarray], old_group: np.ndarray, a0: int, a1: int):
    """PEs of a node's tasks (in PE order) for the new groups: each new
    group takes the old group it shares most tasks with, so the fewest
    tasks change PE."""
    overlap = np.zeros((a1, a1))
    for g, members in enumerate(groups):
        np.add.at(overlap[g], old_group[members], 1)
    _, slot = linear_sum_assignment(-overlap)
    new_pe = np.empty(local_pe.size, dtype=np.int64)
    for g, members in enumerate(groups):
        cores = local_pe[slot[g] * a0:(slot[g] + 1) * a0]
        stay = members[old_group[members] == slot[g]]
        new_pe[stay] = local_pe[stay]
        new_pe[np.setdiff1d(members, stay)] = np.setdiff1d(cores, local_pe[stay])
    return new_pe
