"""Two-way FM on pairs of adjacent blocks of a k-way partition of exact sizes.

KaMinPar's label propagation leaves block boundaries that no single move
or swap improves under exact sizes, and the chains that restore the
sizes (``rebalance.py``) bend them further.  A boundary between two blocks
is straightened by a bisection of their union that keeps both sizes:
Fiduccia-Mattheyses passes (every task moved once, from the larger side
while the sizes differ, the best balanced prefix kept), KaHIP's
quotient-graph refinement in its simplest form.  The pairs come from a
greedy matching of the quotient graph, heaviest boundary first; the
pairs of a matching are disjoint, so they run on threads at once, each
on its own small copy of the graph (``_kernels.refine_matched``, compiled),
the tasks renumbered block by block first (on scrambled ids every look-up
in the whole graph is a cache miss).  Each round matches the blocks anew.
On a 2^20-task stencil's 16384 blocks of 64 after the chains, three rounds
took the cut from 14.40 % to 14.26 % of the edges in 1.0 s on two threads,
J 0.5 % lower (six rounds: 14.24 %, ten 14.22 %).

The tasks have unit weight (one-to-one); only the weight between the two
blocks of a pair changes, the edges to other blocks cost the same from
either side.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from ...deadline import Deadline
from ...graph import renumbered_rows

ROUNDS = 3          # matchings, each followed by FM on all its pairs (a round that gains nothing ends them)
MAX_PASSES = 8      # FM passes per pair at most (a pass that gains nothing ends them)
MATCH_NOISE = 0.5   # the matching's random spread of boundary weights (2^20 stencil, node cut after three rounds:
                    # exact weights 14.28 %, this 14.26 %; after six 14.27 and 14.24 %)
# seconds per round and per task plus adjacency entry: a part on one thread (the matching, the renumbering)
# and a part the threads share (the pairs' FM); 2-D stencils into blocks of 64, three rounds: 2^17 tasks
# 0.16 s, 2^20 1.37 s on one core, 1.0 s on two
_PER_ENTRY_ROUND = (3.6e-8, 5e-8)


def pair_seconds(n: int, nnz: int, rounds: int = ROUNDS, threads: int = 1) -> float:
    """Estimated seconds of ``refine_pairs`` on ``n`` tasks with ``nnz``
    adjacency entries."""
    serial, shared = _PER_ENTRY_ROUND
    return rounds * (n + nnz) * (serial + shared / max(int(threads), 1))


def _matching(rows, indices, w, block: np.ndarray, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A greedy matching of the blocks, heaviest boundary first, each
    boundary's weight scaled by a seeded random factor in [1 - MATCH_NOISE,
    1 + MATCH_NOISE] so that the rounds match other pairs as well: the
    pairs' first and second blocks."""
    a, b = block[rows], block[indices]
    cross = a < b  # each boundary once; coarsen.contract's sparse product took 0.56 s for this at 2^20, this 0.08
    quotient = sp.coo_array((w[cross], (a[cross], b[cross])), shape=(k, k)).tocsr()
    qa = np.repeat(np.arange(k), np.diff(quotient.indptr))
    from ._kernels import greedy_matching

    key = quotient.data * rng.uniform(1 - MATCH_NOISE, 1 + MATCH_NOISE, qa.size)
    return greedy_matching(qa, quotient.indices.astype(np.int64), np.argsort(-key, kind="stable"), k)


def refine_pairs(adj, block, k: int, *, rounds: int = ROUNDS, seed: int = 0, threads: int = 1,
                 deadline: Deadline | None = None) -> np.ndarray:
    """``block`` (k blocks of a symmetric CSR ``adj``'s tasks) with the
    boundaries of matched pairs of adjacent blocks improved by two-way FM
    in up to ``rounds`` rounds (module docstring); every block keeps its
    size.  A new array; the result does not depend on ``threads``; a round
    starts only where the ``deadline`` allows its price."""
    deadline = Deadline.of(deadline)
    from ._kernels import refine_matched

    block = np.asarray(block, dtype=np.int64)
    # tasks renumbered block by block: a pair's tasks and their neighbours lie together in memory (at 2^20
    # tasks the copies of the pairs took 0.7 s on the scrambled ids)
    task = np.argsort(block, kind="stable")
    indptr, indices, w, _ = renumbered_rows(adj.indptr, adj.indices, np.asarray(adj.data, dtype=np.float64), task)
    local = block[task]
    at = np.zeros(local.size, dtype=np.int64)
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(local.size), np.diff(indptr))
    sizes = np.bincount(local, minlength=k)
    member_ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(sizes, out=member_ptr[1:])
    for _ in range(rounds):
        if deadline.expired() or not deadline.allows(pair_seconds(adj.shape[0], adj.nnz, 1, threads)):
            break
        first, second = _matching(rows, indices, w, local, k, rng)
        if first.size == 0:
            break
        members = np.argsort(local, kind="stable")
        cuts = np.linspace(0, first.size, max(min(int(threads), first.size), 1) + 1).astype(np.int64)

        def run(c):
            lo, hi = cuts[c], cuts[c + 1]
            return refine_matched(indptr, indices, w, local, first[lo:hi], second[lo:hi], members, member_ptr, at,
                                 MAX_PASSES)

        if cuts.size > 2:
            with ThreadPoolExecutor(cuts.size - 1) as pool:
                removed = sum(pool.map(run, range(cuts.size - 1)))
        else:
            removed = run(0)
        if removed <= 0:
            break
    out = np.empty_like(block)
    out[task] = local
    return out
