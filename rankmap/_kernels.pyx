# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled passes of the report, the graph and the replay.

``uniform_pass``/``group_loads``/``row_costs``: a mapping's report on a
uniform hierarchy in one pass over the rows.  On a tree built by
``Topology.uniform`` the PEs of a depth-d group are a range of s_d PEs, so
whether PE q shares PE p's depth-d group is two comparisons: no ancestor
paths, no division per pair.  Per PE it keeps the bytes it sends to other
PEs and to those of each of its groups (a row's pairs share their sender:
summed in place; slices of rows on threads); J, bytes per level, hops, the
links' loads and the PEs' bytes follow from these O(n_pes x depth) sums
(``cost._uniform_breakdown``).  The numpy path makes a dozen arrays of m
entries and scatters over them.

``rows_canonical``: whether a reader's rows can be the graph's arrays as
they are, and their total, in one pass (threads over slices of rows).

``mirror_hash``: the symmetry check of a graph.  Each pair (u, v, w) adds
a hash of (min(u, v), max(u, v), w) when u < v and subtracts it when
u > v, modulo 2^64: a symmetric graph sums to exactly 0, since every term
meets its mirror's, and a graph with a pair unmirrored sums to 0 only by a
chance of about 2^-64.  The pass reads the rows in order (looking up each
pair's mirror reads them at random: one cache miss per pair, and
transposing scatters all m entries into new arrays); slices of rows run on
threads (``cores.row_slices``).

``uniform_tree``: the arrays of a uniform hierarchy's tree in one walk of
its nodes in preorder (ids), each array written in order; numpy's build
scattered every depth's ids into every array (a temporary of the leaves'
count per step: 2^24 PEs, 21 M nodes, in 2-4 s).

``fair_rates``: max-min fair rates of the replay's flows, recomputed at
every flow start and end.  The links wait in a heap by their fair share;
the smallest saturates, its flows take that share and leave their other
links, whose shares can only grow, so an entry found stale at the top goes
back with its share now: one pass over the flows' paths and the heap's work
per step (progressive filling in numpy takes a pass over all flows per
distinct bottleneck share).

Every function releases the GIL.
"""

from libc.stdint cimport int64_t, uint64_t
from libcpp.vector cimport vector

import numpy as np

from rankmap._heap cimport pop, push

cdef double INF = float("inf")


def uniform_pass(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                 const int64_t[::1] pe, const int64_t[::1] sizes, double[:, ::1] within, double[::1] same,
                 int64_t first, int64_t last):
    """One pass over the rows ``first`` <= u < ``last`` of the CSR pairs
    (u -> indices[e], bytes w[e]) mapped by ``pe``; ``sizes[d]``: PEs per
    group at depth d, root first, leaves (1) last.  Adds to within[p, 0]
    the bytes PE p sends to other PEs, to within[p, d] those to other PEs
    of its depth-d group, to same[p] the bytes between tasks on PE p;
    returns the count of same-PE pairs.  Slices of rows may run at once
    where no two rows share a PE (one task per PE)."""
    cdef Py_ssize_t levels = sizes.shape[0] - 1
    cdef vector[double] row = vector[double](levels)
    cdef vector[int64_t] lo = vector[int64_t](levels)
    cdef vector[int64_t] hi = vector[int64_t](levels)
    cdef int64_t same_pairs = 0, u, p, q, e
    cdef Py_ssize_t d
    cdef double on_p, b
    with nogil:
        for u in range(first, last):
            p = pe[u]
            for d in range(levels):  # the PE range [lo[d], hi[d]) of p's group at depth d (p >= 0)
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


def group_loads(const double[:, ::1] within, const double[:] received, const int64_t[::1] sizes,
                const int64_t[::1] offsets, const int64_t[::1] ids, double[::1] loads):
    """The bytes over every group's link to its parent, up and down, from
    ``uniform_pass``'s sums, added to ``loads`` as ``cost.all_link_loads``
    numbers the links (group g's node ``ids[g]``: its up link, and its down
    link ``n_nodes`` further, ``loads`` holding 2 ``n_nodes``; depth d's
    groups from ``offsets[d]``, d >= 1): a group sends out what its PEs send
    less what stays inside it, and receives what its PEs receive less what
    they send each other.  Each group's PEs are summed in order into its
    link's load (as adding PE by PE to ``loads`` would)."""
    cdef Py_ssize_t levels = sizes.shape[0] - 1, p, d
    cdef int64_t n_nodes = loads.shape[0] // 2, node, g, groups
    cdef double inside, up, down
    with nogil:
        for d in range(1, levels + 1):
            groups = within.shape[0] // sizes[d]
            for g in range(groups):
                node = ids[offsets[d] + g]
                up, down = loads[node], loads[n_nodes + node]
                for p in range(g * sizes[d], (g + 1) * sizes[d]):
                    inside = within[p, d] if d < levels else 0.0  # a leaf holds one PE: nothing stays inside
                    up += within[p, 0] - inside
                    down += received[p] - inside
                loads[node], loads[n_nodes + node] = up, down


def row_costs(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
              const int64_t[::1] pe, const int64_t[::1] sizes, const double[::1] dists, double[::1] out,
              int64_t first, int64_t last):
    """``out[u]`` for rows ``first`` <= u < ``last``: the bytes x distance
    of row u's pairs (u -> indices[e], bytes w[e]) mapped by ``pe`` on a
    uniform hierarchy (``sizes[d]`` PEs per depth-d group, root first;
    ``dists[d]`` the distance of a pair whose deepest shared group is at
    depth d).  The J pass and the swap search's per-task sums without the
    m source ids and distances numpy would spell out."""
    cdef Py_ssize_t levels = sizes.shape[0], d
    cdef vector[int64_t] lo = vector[int64_t](levels)
    cdef int64_t u, p, q, e
    cdef double s
    with nogil:
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


cdef inline uint64_t _mix(uint64_t x) noexcept nogil:
    """splitmix64's finaliser: a bijection of 64-bit words that spreads
    every input bit over the output."""
    x ^= x >> 30
    x *= <uint64_t>0xbf58476d1ce4e5b9
    x ^= x >> 27
    x *= <uint64_t>0x94d049bb133111eb
    return x ^ (x >> 31)


def mirror_hash(const int64_t[::1] indptr, const int64_t[::1] indices, const uint64_t[::1] bits,
                int64_t first, int64_t last):
    """For the rows ``first`` <= u < ``last``: the sum, modulo 2^64, of
    +h(u, v, w) over their pairs with u < v and -h(v, u, w) over those with
    u > v (h a hash of the pair's ends, lower first, and the bits of its
    bytes, ``bits`` being the byte array viewed as uint64).  The slices'
    sums add to 0 when the graph is symmetric."""
    cdef uint64_t total = 0, h
    cdef int64_t u, e, v
    with nogil:
        for u in range(first, last):
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if u < v:
                    total += _mix(_mix(_mix(<uint64_t>u + <uint64_t>0x9e3779b97f4a7c15) + <uint64_t>v) ^ bits[e])
                elif v < u:
                    total -= _mix(_mix(_mix(<uint64_t>v + <uint64_t>0x9e3779b97f4a7c15) + <uint64_t>u) ^ bits[e])
    return total


def uniform_tree(const int64_t[::1] arities, const double[::1] dists, int64_t[::1] parent, int64_t[::1] depth,
                 double[::1] distance, int64_t[::1] child_ptr, int64_t[::1] child_idx, int64_t[::1] start,
                 int64_t[::1] stop, int64_t[::1] level_ids, const int64_t[::1] level_ptr):
    """Fills the tree of a uniform hierarchy whose depth-d nodes have
    ``arities[d]`` children (root first; the leaves, at depth L =
    len(arities), none) and distance ``dists[d]`` (leaves 0), nodes
    numbered in preorder: each node's parent, depth, distance, children
    (CSR ``child_ptr``/``child_idx``, in order), the range [start, stop) of
    leaves below it, and the ids of each depth d in preorder, the groups'
    order, at ``level_ids[level_ptr[d]:level_ptr[d + 1]]``."""
    cdef Py_ssize_t levels = arities.shape[0], d
    cdef vector[int64_t] on_path = vector[int64_t](levels + 1)  # the open node of each depth
    cdef vector[int64_t] next_child = vector[int64_t](levels + 1)
    cdef vector[int64_t] filled = vector[int64_t](levels + 1)
    cdef vector[int64_t] below = vector[int64_t](levels + 1)  # leaves below a node of each depth
    cdef int64_t n_nodes = parent.shape[0], x, p, slots = 0, leaves = 0, open_depth = 0
    below[levels] = 1
    for d in range(levels - 1, -1, -1):
        below[d] = below[d + 1] * arities[d]
    with nogil:
        for x in range(n_nodes):
            if x == 0:
                d, p = 0, -1
            else:
                while next_child[open_depth] == arities[open_depth]:  # all its children placed
                    open_depth -= 1
                p = on_path[open_depth]
                child_idx[child_ptr[p] + next_child[open_depth]] = x
                next_child[open_depth] += 1
                d = open_depth + 1
            parent[x] = p
            depth[x] = d
            child_ptr[x] = slots
            start[x] = leaves
            stop[x] = leaves + below[d]
            level_ids[level_ptr[d] + filled[d]] = x
            filled[d] += 1
            if d < levels:
                distance[x] = dists[d]
                slots += arities[d]
                on_path[d], next_child[d], open_depth = x, 0, d
            else:
                distance[x] = 0.0
                leaves += 1
        child_ptr[n_nodes] = slots


def rows_canonical(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w, int64_t n,
                   int64_t first, int64_t last):
    """Whether the rows ``first`` <= u < ``last`` can be a graph's CSR as
    they are (destinations strictly increasing, in 0 .. n - 1, none u
    itself; bytes finite and above 0), and the sum of their bytes: the
    reader's rows checked in one pass, where numpy made an array of row ids
    and three of comparisons."""
    cdef int64_t u, e, prev
    cdef double total = 0.0
    cdef bint ok = True
    with nogil:
        for u in range(first, last):
            prev = -1
            for e in range(indptr[u], indptr[u + 1]):
                if indices[e] <= prev or indices[e] >= n or indices[e] == u or not (0.0 < w[e] < INF):
                    ok = False
                    break
                prev = indices[e]
                total += w[e]
            if not ok:
                break
    return ok, total


def fair_rates(const int64_t[:, :] links, const int64_t[::1] active, const double[::1] capacity):
    """Rates (bytes/s) of the flows ``active``: each entry a row of
    ``links``, the flow's path (indices into ``capacity``, padded with its
    last index, an infinite link; flows may share a row).  Every flow
    crosses at least one finite link."""
    cdef Py_ssize_t pad = capacity.shape[0] - 1, width = links.shape[1], n_active = active.shape[0]
    rate_arr = np.full(n_active, -1.0)
    cdef double[::1] rate = rate_arr
    cdef vector[int64_t] count = vector[int64_t](pad, 0)
    cdef vector[int64_t] start = vector[int64_t](pad + 1, 0)  # the flows of each link (CSR)
    cdef vector[int64_t] fill, flows
    cdef vector[double] left
    cdef vector[double] keys = vector[double](pad)  # a heap of links by their share when pushed: at most one entry per link
    cdef vector[int64_t] vals = vector[int64_t](pad)
    cdef Py_ssize_t size = 0, a, j, k
    cdef int64_t m, o
    cdef double level = 0.0, share, now
    with nogil:
        for a in range(n_active):
            for j in range(width):
                m = links[active[a], j]
                if m < pad:
                    count[m] += 1
        for m in range(pad):
            start[m + 1] = start[m] + count[m]
        fill.assign(start.begin(), start.begin() + pad)
        flows.resize(start[pad])
        for a in range(n_active):
            for j in range(width):
                m = links[active[a], j]
                if m < pad:
                    flows[fill[m]] = a
                    fill[m] += 1
        left.assign(&capacity[0], &capacity[0] + pad)
        for m in range(pad):
            if count[m]:
                size = push(keys.data(), vals.data(), size, left[m] / count[m], m)
        while size:
            size = pop(keys.data(), vals.data(), size, &share, &m)
            if count[m] == 0:
                continue  # its flows all took a smaller share
            now = left[m] / count[m]
            if now != share:  # grown since pushed (shares only grow): back with its share now
                size = push(keys.data(), vals.data(), size, now, m)
                continue
            level = level if level > share else share  # a smaller one is rounding
            for k in range(start[m], start[m + 1]):
                a = flows[k]
                if rate[a] >= 0:
                    continue
                rate[a] = level
                for j in range(width):
                    o = links[active[a], j]
                    if o < pad:
                        left[o] -= level
                        count[o] -= 1
    return rate_arr
