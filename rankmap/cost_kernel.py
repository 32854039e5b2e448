"""The report of a mapping on a uniform hierarchy in one compiled pass (numba).

On a tree built by ``Topology.uniform`` the PEs of a depth-d group are a
range of s_d PEs (s_d: PEs per group at depth d), so whether PE q shares
PE p's depth-d group is two comparisons: no ancestor paths, no division per
pair.  One pass over the graph's rows keeps, per PE, the bytes it sends to
other PEs and to those of each of its groups (a row's pairs share their
sender: summed in place, no scattered write per pair), and what it receives
follows from its tasks' column sums.  J, bytes per level, hops, the links'
loads (``group_loads``) and the PEs' bytes all follow from these O(n_pes x
depth) sums (``cost._uniform_breakdown``).  The numpy path in
``cost.evaluate`` makes a dozen arrays of m entries and scatters over them:
at 2^22 tasks (16.7 M pairs) on one loaded core 4.1 s, this path 1.5 s.
"""

from __future__ import annotations

import numpy as np

from .algorithms.jit import njit


@njit(cache=True, nogil=True)
def uniform_pass(indptr, indices, w, pe, sizes):
    """One pass over the CSR pairs (u -> indices[e], bytes w[e]) mapped by
    ``pe``; ``sizes[d]``: PEs per group at depth d, root first, leaves (1)
    last.  Returns (within[p, 0]: the bytes PE p sends to other PEs,
    within[p, d]: those to other PEs of its depth-d group, same[p]: the
    bytes between tasks on PE p, received[p]: the bytes PE p receives from
    other PEs, the same-PE pairs)."""
    levels = sizes.size - 1
    within = np.zeros((sizes[0], levels))
    same = np.zeros(sizes[0])
    row = np.zeros(levels)
    lo = np.empty(levels, np.int64)
    hi = np.empty(levels, np.int64)
    same_pairs = 0
    for u in range(indptr.size - 1):
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
    # what each PE receives: its tasks' column sums (one sequential pass, no
    # gather per pair) less the bytes between tasks on the PE
    into = np.zeros(indptr.size - 1)
    for e in range(indices.size):
        into[indices[e]] += w[e]
    received = -same
    for v in range(into.size):
        received[pe[v]] += into[v]
    return within, same, received, same_pairs


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
