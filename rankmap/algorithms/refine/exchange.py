"""Exchanges between two blocks under exact capacity: two-way FM
(Fiduccia-Mattheyses) on the tasks of a pair of subtrees.

A one-to-one mapping keeps every subtree full, so a better top-level cut is
often only an *exchange* away: six tightly coupled tasks of node A for six
of node B (what VieM's mapping of fe_4elt2/512 shows against auto's, see
docs/methods.md).  No single swap gains there; FM does: it moves tasks one
at a time between the two blocks, the best gain first, lets the loads
drift from their capacity (by one task, and in a second pass by up to
MAX_DRIFT tasks), locks every moved task,
and keeps the best prefix of the move sequence whose loads fit again.  The
gain of a move is the traffic to the other block minus the traffic to the
own one, which is the J change when all blocks are equally far apart (the
children of one tree node).  O(size of the pair's tasks x moves) per pair.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit

MAX_DRIFT = 8        # tasks a block may hold above or below its load during one FM pass (at least)
PATIENCE = 32        # moves without a new best prefix before a pass stops
MAX_ROUNDS = 4       # passes over the block pairs


@njit(cache=True, nogil=True)
def _conn(indptr, indices, w, block, u, a, b):
    ca = 0.0
    cb = 0.0
    for e in range(indptr[u], indptr[u + 1]):
        x = block[indices[e]]
        if x == a:
            ca += w[e]
        elif x == b:
            cb += w[e]
    return ca, cb


@njit(cache=True, nogil=True)
def pair_fm(indptr, indices, w, vw, block, tasks, a, b, cap_a, cap_b, drift_max, tol):
    """One FM pass between blocks ``a`` and ``b`` over ``tasks`` (their
    members, weights ``vw``): the load of ``a`` may drift by ``drift_max``
    during the pass; updates ``block`` to the best prefix whose loads fit
    ``cap_a``/``cap_b``; returns the traffic no longer crossing between
    them (>= 0)."""
    m = tasks.size
    gain = np.empty(m)
    locked = np.zeros(m, dtype=np.bool_)
    load_a = 0.0
    load_b = 0.0
    for i in range(m):
        u = tasks[i]
        ca, cb = _conn(indptr, indices, w, block, u, a, b)
        if block[u] == a:
            gain[i] = cb - ca
            load_a += vw[u]
        else:
            gain[i] = ca - cb
            load_b += vw[u]
    start_a = load_a
    moved = np.empty(m, dtype=np.int64)
    cum, best, best_len, n_moves = 0.0, tol, 0, 0
    for step in range(m):
        pick = -1
        for i in range(m):
            if locked[i]:
                continue
            from_a = block[tasks[i]] == a
            wt = vw[tasks[i]]
            drift = (load_a - wt - start_a) if from_a else (load_a + wt - start_a)
            if drift > drift_max or drift < -drift_max:
                continue
            if pick < 0 or gain[i] > gain[pick]:
                pick = i
        if pick < 0:
            break
        u = tasks[pick]
        locked[pick] = True
        cum += gain[pick]
        if block[u] == a:
            block[u] = b
            load_a -= vw[u]
            load_b += vw[u]
        else:
            block[u] = a
            load_a += vw[u]
            load_b -= vw[u]
        moved[step] = pick
        n_moves += 1
        for i in range(m):  # neighbours' gains (the pair's tasks only)
            if locked[i]:
                continue
            x = tasks[i]
            for e in range(indptr[x], indptr[x + 1]):
                if indices[e] == u:
                    # u left x's side: x's traffic to u changed sides
                    if block[x] == block[u]:
                        gain[i] -= 2.0 * w[e]
                    else:
                        gain[i] += 2.0 * w[e]
        if load_a <= cap_a + 1e-9 and load_b <= cap_b + 1e-9 and cum > best:
            best = cum
            best_len = step + 1
        if step - best_len > PATIENCE:
            break
    for s in range(n_moves - 1, best_len - 1, -1):  # roll back the moves after the best prefix
        u = tasks[moved[s]]
        block[u] = a if block[u] == b else b
    return best if best_len > 0 else 0.0


def pair_passes(indptr, indices, w, vw, block, a, b, cap_a, cap_b, drifts, tol) -> tuple[np.ndarray, float]:
    """One FM pass between blocks ``a`` and ``b`` per drift in ``drifts``,
    each from the same blocks; returns the best result and its gain."""
    tasks = np.flatnonzero((block == a) | (block == b)).astype(np.int64)
    best, best_gain = block, 0.0
    for drift in drifts:
        cand = block.copy()
        g = pair_fm(indptr, indices, w, vw, cand, tasks, a, b, cap_a, cap_b, drift, tol)
        if g > best_gain:
            best, best_gain = cand, g
    return best, best_gain


def drifts_for(vw) -> tuple[float, float]:
    """The two drifts of a pair (see ``exchange_refine``)."""
    heaviest = float(np.max(vw, initial=0.0))
    return heaviest, max(float(MAX_DRIFT), 2.0 * heaviest)


def exchange_refine(adj: sp.csr_array, block, capacity, *, weights=None, parent=None,
                    rounds: int = MAX_ROUNDS) -> tuple[np.ndarray, float]:
    """FM between every pair of blocks that share traffic and, when
    ``parent`` (of every block) is given, the same parent, heaviest pairs
    first, for up to ``rounds`` passes while one gains; ``capacity`` per
    block (the loads never end above it).  Siblings are equally far from
    every other block, so between them the cut gain is the J gain divided
    by their parent's distance.  ``weights``: vertex weights (ones), e.g.
    the sizes of coarse clusters.  Each pair gets two passes, the better
    kept: loads drifting by at most the heaviest vertex (moves alternate
    between the blocks), and by MAX_DRIFT or twice the heaviest (a group
    can leave before its counterpart comes back; a greedy pass with only
    this one drifts off one-sidedly on a random start).  Returns the new blocks and the traffic
    taken off the cut."""
    block = np.asarray(block, dtype=np.int64).copy()
    capacity = np.asarray(capacity, dtype=np.float64)
    vw = np.ones(block.size) if weights is None else np.asarray(weights, dtype=np.float64)
    drifts = drifts_for(vw)
    parent = None if parent is None else np.asarray(parent, dtype=np.int64)
    indptr, indices = adj.indptr.astype(np.int64), adj.indices.astype(np.int64)
    w = np.asarray(adj.data, dtype=np.float64)
    tol = 1e-12 * max(float(w.sum()), 1.0)
    total = 0.0
    for _ in range(rounds):
        rows = np.repeat(np.arange(block.size), np.diff(indptr))
        bu, bv = block[rows], block[indices]
        cross = bu < bv
        if parent is not None:
            cross &= parent[bu] == parent[bv]
        pair_w = sp.coo_array((w[cross], (bu[cross], bv[cross])), shape=(capacity.size,) * 2).tocsr()
        pair_w.sum_duplicates()
        c = pair_w.tocoo()
        order = np.argsort(-c.data, kind="stable")
        gained = 0.0
        for i in order.tolist():
            a, b = int(c.row[i]), int(c.col[i])
            block, g = pair_passes(indptr, indices, w, vw, block, a, b, capacity[a], capacity[b], drifts, tol)
            gained += g
        total += gained
        if gained <= tol:
            break
    return block, total
