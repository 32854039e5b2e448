"""The report of a mapping on a uniform hierarchy in one compiled pass (numba).

On a tree built by ``Topology.uniform`` the PEs of a depth-d group are a
range of s_d PEs (s_d: PEs per group at depth d), so whether PE q shares
PE p's depth-d group is two comparisons: no ancestor paths, no division per
pair.  One pass over the graph's rows keeps, per PE, the bytes it sends to
other PEs and to those of each of its groups (a row's pairs share their
sender: summed in place, no scattered write per pair; slices of rows on
threads), and what it receives follows from its tasks' column sums.  J, bytes per level, hops, the links'
loads (``group_loads``) and the PEs' bytes all follow from these O(n_pes x
depth) sums (``cost._uniform_breakdown``).  The numpy path in
``cost.evaluate`` makes a dozen arrays of m entries and scatters over them:
at 2^22 tasks (16.7 M pairs) on one loaded core 4.1 s, this path 1.5 s.
"""

from __future__ import annotations

import numpy as np

from .algorithms.jit import njit


@njit(cache=True, nogil=True)
def uniform_pass(indptr, indices, w, pe, sizes, within, same, first, last):
    """One pass over the rows ``first`` <= u < ``last`` of the CSR pairs
    (u -> indices[e], bytes w[e]) mapped by ``pe``; ``sizes[d]``: PEs per
    group at depth d, root first, leaves (1) last.  Adds to within[p, 0]
    the bytes PE p sends to other PEs, to within[p, d] those to other PEs
    of its depth-d group, to same[p] the bytes between tasks on PE p;
    returns the count of same-PE pairs.  Slices of rows may run at once
    where no two rows share a PE (one task per PE)."""
    levels = sizes.size - 1
    row = np.zeros(levels)
    lo = np.empty(levels, np.int64)
    hi = np.empty(levels, np.int64)
    same_pairs = 0
    for u in range(first, last):
        p = pe[u]
        for d in range(levels):  # the PE range [lo[d], hi[d]) of p's group at depth d
            lo[d] = p // sizes[d] * sizes[d]
            hi[d] = lo[d] + sizes[d]
            row[d] = 0.0
        on_p = 0.0
        for e in range(indptr[u], indptr[u + 1]):
            q = pe[indices[e]]
            b = w[e]
            if p == q:
                same_pairs += 1
                on_p += b
                continue
            row[0] += b
            for d in range(1, levels):  # groups nest: the pair shares p's groups down to its LCA
                if lo[d] <= q and q < hi[d]:
                    row[d] += b
        for d in range(levels):
            within[p, d] += row[d]
        same[p] += on_p
    return same_pairs


@njit(cache=True, nogil=True)
def group_loads(within, received, sizes, offsets):
    """The bytes over every group's link to its parent, up and down, flat
    (depth d's groups from ``offsets[d]``, d >= 1), from ``uniform_pass``'s
    sums: a group sends out what its PEs send less what stays inside it,
    and receives what its PEs receive less what they send each other."""
    levels = sizes.size - 1
    up = np.zeros(offsets[-1])
    down = np.zeros(offsets[-1])
    for p in range(within.shape[0]):
        for d in range(1, levels + 1):
            inside = within[p, d] if d < levels else 0.0  # a leaf holds one PE: nothing stays inside
            g = offsets[d] + p // sizes[d]
            up[g] += within[p, 0] - inside
            down[g] += received[p] - inside
    return up, down


@njit(cache=True, nogil=True)
def row_costs(indptr, indices, w, pe, sizes, dists, out, first, last):
    """``out[u]`` for rows ``first`` <= u < ``last``: the bytes x distance
    of row u's pairs (u -> indices[e],
    bytes w[e]) mapped by ``pe`` on a uniform hierarchy (``sizes[d]`` PEs
    per depth-d group, root first; ``dists[d]`` the distance of a pair
    whose deepest shared group is at depth d).  The J pass and the swap
    search's per-task sums without the m source ids and distances numpy
    would spell out (at 2^24 tasks 2.6 s a pass on an idle core)."""
    levels = sizes.size
    lo = np.empty(levels, np.int64)
    for u in range(first, last):
        p = pe[u]
        for d in range(levels):
            lo[d] = p // sizes[d] * sizes[d]
        s = 0.0
        for e in range(indptr[u], indptr[u + 1]):
            q = pe[indices[e]]
            if q == p:
                continue
            d = 0
            while d + 1 < levels and lo[d + 1] <= q and q < lo[d + 1] + sizes[d + 1]:
                d += 1
            s += w[e] * dists[d]
        out[u] = s
