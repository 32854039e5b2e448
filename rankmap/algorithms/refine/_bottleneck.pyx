# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The link-time search's scoring of candidate swaps on a tree, compiled
(``bottleneck._Search.score``; a mesh keeps the numpy scoring).

A batch holds a few hundred candidates of a few pairs each: in numpy the
calls' own cost, not the work, sets the pace.  The floats are numpy's: every sum
adds its terms in the order ``np.bincount`` adds them there (a candidate's
pairs as ``_Pairs.of`` lists them; on a link, the old routes' terms before
the new ones', each level by level from the leaves, pairs in order), so the
search takes the same swaps.  The tree is read through its parents (the
lowest common ancestor by walking up), so no table grows with the PEs.

Both passes release the GIL.
"""

from libc.stdint cimport int64_t
from libcpp cimport bool as cbool
from libcpp.algorithm cimport sort
from libcpp.vector cimport vector

import numpy as np


cdef class TreeSwapScores:
    """The scoring of one search: its tree, its pairs, and a scratch entry
    per link (allocated once, reset per candidate), so a call's memory is
    O(candidates + pairs touched)."""

    cdef const int64_t[::1] parent, depth, leaf, start, stop
    cdef const double[::1] distance
    cdef const int64_t[::1] src, dst, out_ptr, in_ptr, in_pairs
    cdef const double[::1] w
    cdef int64_t n_nodes
    cdef vector[double] delta          # per link: the change of the candidate in hand ...
    cdef vector[int64_t] stamp         # ... valid where stamp is the candidate's
    cdef int64_t now
    cdef vector[int64_t] touched       # the links the candidate in hand changes
    cdef vector[int64_t] pairs, old_src, old_dst, new_src, new_dst, node, stop_depth

    def __init__(self, topology, src, dst, w, out_ptr, in_ptr, in_pairs):
        as_int = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
        self.parent, self.depth, self.leaf = as_int(topology.parent), as_int(topology.node_depth), \
            as_int(topology.leaf_of_pe)
        self.start, self.stop = as_int(topology.leaf_start), as_int(topology.leaf_stop)
        self.distance = np.ascontiguousarray(topology.node_distance, dtype=np.float64)
        self.src, self.dst = as_int(src), as_int(dst)
        self.out_ptr, self.in_ptr, self.in_pairs = as_int(out_ptr), as_int(in_ptr), as_int(in_pairs)
        self.w = np.ascontiguousarray(w, dtype=np.float64)
        self.n_nodes = topology.n_nodes
        self.delta.assign(2 * self.n_nodes, 0.0)
        self.stamp.assign(2 * self.n_nodes, -1)
        self.now = 0

    cdef inline int64_t lca(self, int64_t p, int64_t q) noexcept nogil:
        """The lowest common ancestor of PEs p and q, walking up from their leaves."""
        cdef int64_t a = self.leaf[p], b = self.leaf[q]
        while self.depth[a] > self.depth[b]:
            a = self.parent[a]
        while self.depth[b] > self.depth[a]:
            b = self.parent[b]
        while a != b:
            a, b = self.parent[a], self.parent[b]
        return a

    cdef inline double dist(self, int64_t p, int64_t q) noexcept nogil:
        """``topology.distance``: the lowest common ancestor's, 0 on one PE."""
        return 0.0 if p == q else self.distance[self.lca(p, q)]

    cdef void gather(self, int64_t u, int64_t v, int64_t pu, int64_t pv, const int64_t[::1] pe) noexcept nogil:
        """The pairs the swap of u (on pu) and v (on pv; -1: an empty slot)
        changes, in ``_Pairs.of``'s order (u's out- then in-pairs, then v's
        without those with u), with their PEs before and after."""
        cdef Py_ssize_t i, n, j
        cdef int64_t e, s, d, t
        self.pairs.clear()
        for j in range(2):
            t = u if j == 0 else v
            if t < 0:
                continue
            for e in range(self.out_ptr[t], self.out_ptr[t + 1]):
                if j == 0 or (self.src[e] != u and self.dst[e] != u):
                    self.pairs.push_back(e)
            for i in range(self.in_ptr[t], self.in_ptr[t + 1]):
                e = self.in_pairs[i]
                if j == 0 or (self.src[e] != u and self.dst[e] != u):
                    self.pairs.push_back(e)
        n = self.pairs.size()
        self.old_src.resize(n)
        self.old_dst.resize(n)
        self.new_src.resize(n)
        self.new_dst.resize(n)
        for i in range(n):
            e = self.pairs[i]
            s, d = self.src[e], self.dst[e]
            self.old_src[i], self.old_dst[i] = pe[s], pe[d]
            self.new_src[i] = pv if s == u else (pu if s == v else pe[s])
            self.new_dst[i] = pv if d == u else (pu if d == v else pe[d])

    cdef void walk(self, const vector[int64_t]& here, const vector[int64_t]& there, int64_t offset,
                   double sign) noexcept nogil:
        """Add ``sign`` x bytes on every link from each pair's PE ``here``
        up to below its common ancestor with ``there`` (link id: node +
        ``offset``), level by level from the leaves, pairs in order."""
        cdef Py_ssize_t i, n = self.pairs.size()
        cdef int64_t x, link
        cdef bint left = True
        self.node.resize(n)
        self.stop_depth.resize(n)
        for i in range(n):
            if here[i] == there[i]:
                self.node[i] = -1
            else:
                self.node[i] = self.leaf[here[i]]
                self.stop_depth[i] = self.depth[self.lca(here[i], there[i])]
        while left:
            left = False
            for i in range(n):
                x = self.node[i]
                if x < 0:
                    continue
                if self.depth[x] <= self.stop_depth[i]:
                    self.node[i] = -1
                    continue
                link = x + offset
                if self.stamp[link] != self.now:
                    self.stamp[link] = self.now
                    self.delta[link] = 0.0
                    self.touched.push_back(link)
                self.delta[link] += sign * self.w[self.pairs[i]]
                self.node[i] = self.parent[x]
                left = True

    def changes(self, const int64_t[::1] us, const int64_t[::1] slots, const int64_t[::1] pe,
                const int64_t[::1] task_of_slot, const int64_t[::1] slot_pe, int64_t lowers):
        """``(d_j, falls)`` per candidate (task ``us[c]`` into slot
        ``slots[c]``): J's change, and whether the load of link ``lowers``
        falls (all True for ``lowers`` < 0)."""
        cdef Py_ssize_t k = slots.shape[0], c, i
        d_j_arr, falls_arr = np.empty(k), np.ones(k, dtype=bool)
        cdef double[::1] d_j = d_j_arr
        cdef cbool[::1] falls = falls_arr
        cdef int64_t u, node, lo = 0, hi = 0, ps, pd, ns, nd
        cdef bint down = lowers >= self.n_nodes
        cdef double s, cross, we
        if lowers >= 0:
            node = lowers % self.n_nodes
            lo, hi = self.start[node], self.stop[node]
        with nogil:
            for c in range(k):
                u = us[c]
                self.gather(u, task_of_slot[slots[c]], pe[u], slot_pe[slots[c]], pe)
                s = cross = 0.0
                for i in range(<Py_ssize_t>self.pairs.size()):
                    we = self.w[self.pairs[i]]
                    ps, pd, ns, nd = self.old_src[i], self.old_dst[i], self.new_src[i], self.new_dst[i]
                    s += we * (self.dist(ns, nd) - self.dist(ps, pd))
                    if lowers >= 0:  # bytes into the subtree (down link) after minus before ...
                        if not down:  # ... or out of it (up link): the ends swapped
                            ps, pd, ns, nd = pd, ps, nd, ns
                        cross += we * (<double>(lo <= nd < hi and not lo <= ns < hi)
                                       - <double>(lo <= pd < hi and not lo <= ps < hi))
                d_j[c] = s
                if lowers >= 0:
                    falls[c] = cross < 0
        return d_j_arr, falls_arr

    def routes(self, const int64_t[::1] us, const int64_t[::1] slots, const cbool[::1] viable,
               const int64_t[::1] pe, const int64_t[::1] task_of_slot, const int64_t[::1] slot_pe,
               const double[::1] loads):
        """``(cand, link, new_load)``: every link whose load a viable
        candidate changes, sorted by candidate, then link."""
        cdef vector[int64_t] out_cand, out_link
        cdef vector[double] out_load
        cdef Py_ssize_t c, i
        cdef int64_t u, link
        with nogil:
            for c in range(slots.shape[0]):
                if not viable[c]:
                    continue
                u = us[c]
                self.gather(u, task_of_slot[slots[c]], pe[u], slot_pe[slots[c]], pe)
                self.now += 1
                self.touched.clear()
                self.walk(self.old_src, self.old_dst, 0, -1.0)
                self.walk(self.old_dst, self.old_src, self.n_nodes, -1.0)
                self.walk(self.new_src, self.new_dst, 0, 1.0)
                self.walk(self.new_dst, self.new_src, self.n_nodes, 1.0)
                sort(self.touched.begin(), self.touched.end())
                for i in range(<Py_ssize_t>self.touched.size()):
                    link = self.touched[i]
                    if self.delta[link] != 0:
                        out_cand.push_back(c)
                        out_link.push_back(link)
                        out_load.push_back(loads[link] + self.delta[link])
        cdef Py_ssize_t size = out_cand.size()
        cand, link_arr, new_load = np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64), np.empty(size)
        cdef int64_t[::1] cand_v = cand, link_v = link_arr
        cdef double[::1] load_v = new_load
        with nogil:
            for i in range(size):
                cand_v[i], link_v[i], load_v[i] = out_cand[i], out_link[i], out_load[i]
        return cand, link_arr, new_load
