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
children of one tree node).  O(size of the pair's tasks x moves) per pair,
compiled (``_kernels.pair_fm``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

MAX_DRIFT = 8        # tasks a block may hold above or below its load during one FM pass (at least)
MAX_ROUNDS = 4       # passes over the block pairs


def pair_passes(indptr, indices, w, vw, block, a, b, cap_a, cap_b, drifts, tol) -> tuple[np.ndarray, float]:
    """One FM pass between blocks ``a`` and ``b`` per drift in ``drifts``,
    each from the same blocks; returns the best result and its gain."""
    from ._kernels import pair_fm

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
