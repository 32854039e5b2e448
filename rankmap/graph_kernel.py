"""The symmetry check of a large graph in one compiled pass (numba).

A METIS graph must list every pair at both ends with the same weight.
Transposing the CSR to compare (scipy's counting sort) scatters all m
entries into new arrays: at 2^24 tasks (67 M pairs, ids scrambled) 5 s on
one core.  Here each pair (u, v) with u < v looks up u in row v (rows are
sorted: a binary search) and the pairs below the diagonal are only
counted, so the pass reads half the entries at random and writes nothing;
slices of rows run on threads (``cores.row_slices``).
"""

from __future__ import annotations

from .algorithms.jit import njit


@njit(cache=True, nogil=True)
def rows_symmetric(indptr, indices, w, first, last):
    """For the rows ``first`` <= u < ``last`` of a canonical CSR (sorted
    rows, no duplicates, no diagonal): whether every pair (u, v, w) above
    the diagonal is found mirrored as (v, u, w), and how many more pairs lie
    above it than below.  The whole graph is symmetric when every slice
    finds its mirrors and the counts sum to 0 (so no mirror is missing
    either way)."""
    above = 0
    below = 0
    for u in range(first, last):
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if v < u:
                below += 1
                continue
            above += 1
            lo, hi = indptr[v], indptr[v + 1]
            while lo < hi:
                mid = (lo + hi) // 2
                if indices[mid] < u:
                    lo = mid + 1
                else:
                    hi = mid
            if lo == indptr[v + 1] or indices[lo] != u or w[lo] != w[e]:
                return False, 0
    return True, above - below
