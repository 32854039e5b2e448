"""The report of a mapping on a uniform hierarchy in one compiled pass (numba).

On a tree built by ``Topology.uniform`` the PEs of a depth-d group are a
range of s_d PEs (s_d: PEs per group at depth d), so the depth of the
lowest common ancestor of PEs p and q is the number of p's groups, below
the root, whose range holds q: comparisons, no ancestor paths, no division
per pair.  One pass over the graph's rows then keeps, per PE, the bytes it
sends by LCA depth (a row's pairs share their sender: summed in place) and
the off-PE bytes it receives (one write per pair).  J, bytes per level,
hops, the links' loads and the PEs' bytes all follow from these O(n_pes x
depth) sums (``cost._uniform_breakdown``).  The numpy path in
``cost.evaluate`` makes a dozen arrays of m entries and scatters over them:
at 2^22 tasks (16.7 M pairs) on one loaded core 4.1 s, this path 2.2 s.
"""

from __future__ import annotations

import numpy as np

from .algorithms.jit import njit


@njit(cache=True, nogil=True)
def uniform_pass(indptr, indices, w, pe, sizes):
    """One pass over the CSR pairs (u -> indices[e], bytes w[e]) mapped by
    ``pe``; ``sizes[d]``: PEs per group at depth d, root first, leaves (1)
    last.  Returns (sent[p, d]: bytes PE p sends to other PEs whose LCA
    with p is at depth d, received[p]: bytes PE p receives from other PEs,
    the same-PE pairs' count and bytes)."""
    levels = sizes.size - 1
    sent = np.zeros((sizes[0], levels))
    received = np.zeros(sizes[0])
    row = np.zeros(levels)
    lo = np.empty(levels, np.int64)
    hi = np.empty(levels, np.int64)
    same_pairs = 0
    same_bytes = 0.0
    for u in range(indptr.size - 1):
        p = pe[u]
        for d in range(levels):  # the PE range [lo[d], hi[d]) of p's group at depth d
            lo[d] = p // sizes[d] * sizes[d]
            hi[d] = lo[d] + sizes[d]
            row[d] = 0.0
        for e in range(indptr[u], indptr[u + 1]):
            q = pe[indices[e]]
            b = w[e]
            if p == q:
                same_pairs += 1
                same_bytes += b
                continue
            top = 0  # the LCA's depth: p's groups below the root that hold q (they nest), without branches
            for d in range(1, levels):
                top += (lo[d] <= q) & (q < hi[d])
            row[top] += b
            received[q] += b
        for d in range(levels):
            sent[p, d] += row[d]
    return sent, received, same_pairs, same_bytes
