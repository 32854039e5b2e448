# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Compiled local searches over a distance oracle: swap refinement on trees
and meshes, the one-to-one best-swap scan, move refinement, FM between two
blocks, and pairwise exchange.

The Schulz-Traff search is sequential by nature: a swap is taken the moment
it gains, and the next pair is judged on the changed mapping.  The vectorised
numpy search in ``swaps.py`` has to batch pairs and defer the ones whose
neighbourhoods collide, which on small dense graphs costs many
re-evaluations; these loops evaluate each pair once, exactly, in
O(deg(u) + deg(v)) oracle calls (see benchmarks/quality_scale.py, pairs/s).

The distance oracle is the machine's own (``Oracle``): on a tree
``paths[d, p]`` is the ancestor of PE p at depth d (padded with ids unique
to p below a short leaf), so D(p, q) is ``dist_ext`` of the deepest common
entry, O(depth), no k x k matrix; on a mesh or torus every PE's node
coordinates and an integer table of hops per coordinate difference and
dimension (``mesh.kernel.mesh_oracle``).  One search serves both: the tree
and mesh entry points differ only in the oracle they build.

Every function releases the GIL (``refine.parallel`` runs passes on threads).
"""

from libc.stdint cimport int64_t
from libcpp cimport bool as cbool
from libcpp.algorithm cimport sort
from libcpp.pair cimport pair
from libcpp.vector cimport vector

import numpy as np

cdef double INF = float("inf")


# ---------------------------------------------------------------------------
# The distance oracle

cdef struct Oracle:
    bint mesh
    const int64_t* table     # tree: paths (depth x PEs); mesh: coordinates (PEs x ndim)
    Py_ssize_t rows, cols    # the table's shape
    const double* dist_ext   # tree: the distance of each node as a lowest common ancestor
    const int64_t* hops      # mesh: (ndim + 1) x hop_cols hops per coordinate difference
    Py_ssize_t hop_cols


cdef Oracle tree_oracle(const int64_t[:, ::1] paths, const double[::1] dist_ext) noexcept:
    cdef Oracle o
    o.mesh = False
    o.table = &paths[0, 0] if paths.shape[0] * paths.shape[1] else NULL
    o.rows, o.cols = paths.shape[0], paths.shape[1]
    o.dist_ext = &dist_ext[0] if dist_ext.shape[0] else NULL
    o.hops = NULL
    o.hop_cols = 0
    return o


cdef Oracle mesh_oracle(const int64_t[:, ::1] coords, const int64_t[:, ::1] hops) noexcept:
    cdef Oracle o
    o.mesh = True
    o.table = &coords[0, 0] if coords.shape[0] * coords.shape[1] else NULL
    o.rows, o.cols = coords.shape[0], coords.shape[1]
    o.dist_ext = NULL
    o.hops = &hops[0, 0] if hops.shape[0] * hops.shape[1] else NULL
    o.hop_cols = hops.shape[1]
    return o


cdef inline double dist(const Oracle* o, int64_t p, int64_t q) noexcept nogil:
    """D(p, q): the tree's distance of the deepest common ancestor, or the
    mesh's hop count (the intra-node distance between two PEs of a node)."""
    cdef Py_ssize_t d, k
    cdef int64_t a, h, diff
    if p == q:
        return 0.0
    if not o.mesh:
        for d in range(o.rows - 1, -1, -1):
            a = o.table[d * o.cols + p]
            if a == o.table[d * o.cols + q]:
                return o.dist_ext[a]
        return 0.0  # unreachable: the root is common to every PE
    h = 0
    for k in range(o.cols):
        diff = o.table[p * o.cols + k] - o.table[q * o.cols + k]
        h += o.hops[k * o.hop_cols + (diff if diff >= 0 else -diff)]
    if h == 0:
        return <double>o.hops[o.cols * o.hop_cols]
    return <double>h


def mesh_distance(const int64_t[:, ::1] coords, const int64_t[:, ::1] hops, int64_t p, int64_t q):
    """The mesh oracle's D(p, q) (``mesh.kernel.mesh_oracle``'s arrays)."""
    cdef Oracle o = mesh_oracle(coords, hops)
    return dist(&o, p, q)


# ---------------------------------------------------------------------------
# Swap refinement (one pass over a stream of pairs)

cdef inline double move_delta(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                              const int64_t[::1] pos, const Oracle* o, int64_t u, int64_t p_from, int64_t p_to,
                              int64_t partner, double* w_partner) noexcept nogil:
    """J change of moving u from p_from to p_to with ``partner`` left out;
    the weight of the edge u -- partner into ``w_partner``."""
    cdef double s = 0.0
    cdef int64_t e, x, px
    w_partner[0] = 0.0
    for e in range(indptr[u], indptr[u + 1]):
        x = indices[e]
        if x == partner:
            w_partner[0] += w[e]
            continue
        px = pos[x]
        s += w[e] * (dist(o, p_to, px) - dist(o, p_from, px))
    return s


cdef object _swap_pass(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w, int64_t[::1] pos,
                       const Oracle* o, const int64_t[::1] U, const int64_t[::1] V, bint many,
                       const double[::1] vw, double[::1] load, double l_max, double tol):
    cdef int64_t evaluated = 0, applied = 0, u, v, pu, pv
    cdef Py_ssize_t i
    cdef int act
    cdef double change = 0.0, gu, gv, w_uv, w_vu, best, d_uv
    with nogil:
        for i in range(U.shape[0]):
            u = U[i]
            v = V[i]
            pu = pos[u]
            pv = pos[v]
            if pu == pv:
                continue
            evaluated += 1
            gu = move_delta(indptr, indices, w, pos, o, u, pu, pv, v, &w_uv)
            gv = move_delta(indptr, indices, w, pos, o, v, pv, pu, u, &w_vu)
            best = INF
            act = -1
            if not many or (load[pu] - vw[u] + vw[v] <= l_max and load[pv] - vw[v] + vw[u] <= l_max):
                best = gu + gv  # the edge u -- v keeps its length
                act = 0
            if many:
                d_uv = w_uv * dist(o, pu, pv)
                if load[pv] + vw[u] <= l_max and gu - d_uv < best:
                    best = gu - d_uv
                    act = 1
                if load[pu] + vw[v] <= l_max and gv - d_uv < best:
                    best = gv - d_uv
                    act = 2
            if best >= -tol:
                continue
            if act != 2:
                pos[u] = pv
                if many:
                    load[pu] -= vw[u]
                    load[pv] += vw[u]
            if act != 1:
                pos[v] = pu
                if many:
                    load[pv] -= vw[v]
                    load[pu] += vw[v]
            applied += 1
            change += best
    return evaluated, applied, change


def swap_pass(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w, int64_t[::1] pos,
              const int64_t[:, ::1] paths, const double[::1] dist_ext, const int64_t[::1] U, const int64_t[::1] V,
              bint many, const double[::1] vw, double[::1] load, double l_max, double tol):
    """One sweep over the pairs (U[i], V[i]) in order on a tree
    (``kernel.tree_oracle``): each improving swap (or, when ``many``,
    single move within ``l_max``) is applied at once.  Updates ``pos`` and
    ``load`` in place; returns (pairs evaluated, actions applied, total J
    change)."""
    cdef Oracle o = tree_oracle(paths, dist_ext)
    return _swap_pass(indptr, indices, w, pos, &o, U, V, many, vw, load, l_max, tol)


def mesh_swap_pass(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w, int64_t[::1] pos,
                   const int64_t[:, ::1] coords, const int64_t[:, ::1] hops, const int64_t[::1] U,
                   const int64_t[::1] V, bint many, const double[::1] vw, double[::1] load, double l_max, double tol):
    """``swap_pass`` on a mesh or torus (``mesh.kernel.mesh_oracle``)."""
    cdef Oracle o = mesh_oracle(coords, hops)
    return _swap_pass(indptr, indices, w, pos, &o, U, V, many, vw, load, l_max, tol)


# ---------------------------------------------------------------------------
# One-to-one: every partner, the best one per task

cdef inline double gamma_of(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                            const int64_t[::1] pos, const Oracle* o, int64_t t) noexcept nogil:
    cdef double s = 0.0
    cdef int64_t e
    for e in range(indptr[t], indptr[t + 1]):
        s += w[e] * dist(o, pos[t], pos[indices[e]])
    return s


def gammas(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w, const int64_t[::1] pos,
           const int64_t[:, ::1] paths, const double[::1] dist_ext):
    """Every task's contribution Gamma_t = sum_x S_tx D(p_t, p_x)."""
    cdef Oracle o = tree_oracle(paths, dist_ext)
    cdef Py_ssize_t n = pos.shape[0], t
    gamma_arr = np.empty(n)
    cdef double[::1] gamma = gamma_arr
    with nogil:
        for t in range(n):
            gamma[t] = gamma_of(indptr, indices, w, pos, &o, t)
    return gamma_arr


cdef inline void accumulate(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                            const int64_t[::1] pos, const int64_t[:, ::1] paths, double[::1] acc, int64_t u,
                            bint clear) noexcept nogil:
    """u's traffic below every node on its partners' paths into ``acc``
    (``clear``: those entries back to 0)."""
    cdef int64_t e, px
    cdef Py_ssize_t d
    for e in range(indptr[u], indptr[u + 1]):
        px = pos[indices[e]]
        for d in range(paths.shape[0]):
            if clear:
                acc[paths[d, px]] = 0.0
            else:
                acc[paths[d, px]] += w[e]


cdef inline double cost_at(const int64_t[:, ::1] paths, const double[::1] dist_ext, const double[::1] acc,
                           int64_t q) noexcept nogil:
    """C_u(q) = sum_x S_ux D(q, p_x), from u's ``accumulate``d weights."""
    cdef double c = 0.0
    cdef Py_ssize_t d
    cdef int64_t a
    for d in range(paths.shape[0] - 1):
        a = paths[d, q]
        c += (acc[a] - acc[paths[d + 1, q]]) * dist_ext[a]
    return c


cdef inline void scatter(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                         const int64_t[::1] pos, const int64_t[:, ::1] paths, int64_t u, double[::1] wnode,
                         double[::1] wu, bint clear) noexcept nogil:
    """``accumulate`` plus u's traffic to each partner (``wu``)."""
    cdef int64_t e
    accumulate(indptr, indices, w, pos, paths, wnode, u, clear)
    for e in range(indptr[u], indptr[u + 1]):
        wu[indices[e]] = 0.0 if clear else wu[indices[e]] + w[e]


cdef inline double cached_cost(const double[:, ::1] cache, const double[::1] total, const int64_t[:, ::1] paths,
                               const double[::1] dist_ext, const int64_t[::1] col, int64_t v, int64_t q,
                               double w_at_q) noexcept nogil:
    """C_v(q) = sum_x S_vx D(q, p_x) from v's cache row: ``w_at_q`` is the
    traffic of v to the task on PE q (0 when v is on q)."""
    cdef double prev = total[v], s = 0.0, now
    cdef Py_ssize_t d
    cdef int64_t a, c
    for d in range(1, paths.shape[0]):
        a = paths[d, q]
        c = col[a]
        now = cache[v, c] if c >= 0 else w_at_q
        s += dist_ext[paths[d - 1, q]] * (prev - now)
        prev = now
    return s


cdef inline void move_in_cache(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                               double[:, ::1] cache, const int64_t[:, ::1] paths, const int64_t[::1] col, int64_t t,
                               int64_t p_from, int64_t p_to) noexcept nogil:
    """Task t moved from PE p_from to p_to: its neighbours' cache rows."""
    cdef int64_t e, x, a, b
    cdef Py_ssize_t d
    for e in range(indptr[t], indptr[t + 1]):
        x = indices[e]
        for d in range(1, paths.shape[0]):
            a, b = paths[d, p_from], paths[d, p_to]
            if a == b:
                continue
            if col[a] >= 0:
                cache[x, col[a]] -= w[e]
            if col[b] >= 0:
                cache[x, col[b]] += w[e]


def best_swaps_of(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w, int64_t[::1] pos,
                  const int64_t[:, ::1] paths, const double[::1] dist_ext, double[::1] gamma,
                  const int64_t[::1] order, double tol, int64_t[::1] moved, double[:, ::1] cache,
                  const double[::1] total, const int64_t[::1] col):
    """One-to-one swap search, all partners, best partner per task, for the
    tasks ``order`` in turn.  For a task u every swap gain is O(1) after
    O(n depth + m) shared work: y[x] = D(p_u, p_x) for all x, the
    matrix-vector product C_v(p_u) = sum_x S_vx y[x] for all v, and C_u(q) =
    sum_x S_ux D(q, p_x) read off per-node neighbour weights of u along q's
    path; the gain of swapping u and v is C_u(p_v) + C_v(p_u) - Gamma_u -
    Gamma_v + 2 S_uv D(p_u, p_v).  A task that gains swaps with its best
    partner.  Updates ``pos`` and ``gamma`` in place and writes the swapped
    tasks to ``moved`` (room for 2 per task); returns how many.  Each task
    is one scan, so a caller can hand over a bounded slice of a round and
    check the clock between slices: the result does not depend on the
    slicing.

    With a connection cache (``connection_cache``: ``cache`` has a column
    per inner node; kept up to date here) C_v(p_u) is read off v's cache
    row in O(depth) instead: a scan costs O(n depth + deg(u) depth), a swap
    O((deg(u) + deg(v)) depth), the same gains (exactly, for integer bytes).
    Without one (``cache`` of no columns) the O(n depth + m) pass above."""
    cdef Oracle o = tree_oracle(paths, dist_ext)
    cdef Py_ssize_t n = pos.shape[0], i, j
    cdef bint cached = cache.shape[1] > 0
    y_arr, cv_arr, wu_arr = np.empty(n), np.empty(n), np.zeros(n)
    wnode_arr = np.zeros(dist_ext.shape[0])
    cdef double[::1] y = y_arr, cv = cv_arr, wnode = wnode_arr, wu = wu_arr
    cdef int64_t n_moved = 0, u, v, x, t, pu, pv, best_v, e
    cdef double best, s, cu, g
    with nogil:
        for i in range(order.shape[0]):
            u = order[i]
            pu = pos[u]
            if not cached:
                for x in range(n):
                    y[x] = dist(&o, pu, pos[x])
                for v in range(n):
                    s = 0.0
                    for e in range(indptr[v], indptr[v + 1]):
                        s += w[e] * y[indices[e]]
                    cv[v] = s
            scatter(indptr, indices, w, pos, paths, u, wnode, wu, False)
            best = -tol
            best_v = -1
            for v in range(n):
                pv = pos[v]
                if pv == pu:
                    continue
                cu = cost_at(paths, dist_ext, wnode, pv)
                if cached:
                    g = cu + cached_cost(cache, total, paths, dist_ext, col, v, pu, wu[v]) - gamma[u] - gamma[v] \
                        + 2.0 * wu[v] * dist(&o, pu, pv)
                else:
                    g = cu + cv[v] - gamma[u] - gamma[v] + 2.0 * wu[v] * y[v]
                if g < best:
                    best = g
                    best_v = v
            scatter(indptr, indices, w, pos, paths, u, wnode, wu, True)
            if best_v < 0:
                continue
            v = best_v
            pv = pos[v]
            pos[u], pos[v] = pv, pu
            if cached:
                move_in_cache(indptr, indices, w, cache, paths, col, u, pu, pv)
                move_in_cache(indptr, indices, w, cache, paths, col, v, pv, pu)
            for j in range(2):
                t = u if j == 0 else v
                moved[n_moved] = t
                n_moved += 1
                for e in range(indptr[t] - 1, indptr[t + 1]):  # t, then its partners
                    x = t if e < indptr[t] else indices[e]
                    if cached:
                        gamma[x] = cached_cost(cache, total, paths, dist_ext, col, x, pos[x], 0.0)
                    else:
                        gamma[x] = gamma_of(indptr, indices, w, pos, &o, x)
    return n_moved


cdef inline int64_t push_unmarked(const int64_t[::1] indptr, const int64_t[::1] indices, int64_t x,
                                  int64_t[::1] mark, int64_t stamp, int64_t[::1] buf, int64_t count) noexcept nogil:
    """Append the neighbours y of x with ``mark[y] != stamp`` to
    ``buf[count:]``, marking them; returns the new count."""
    cdef int64_t e, y
    for e in range(indptr[x], indptr[x + 1]):
        y = indices[e]
        if mark[y] != stamp:
            mark[y] = stamp
            buf[count] = y
            count += 1
    return count


def ball_pairs(const int64_t[::1] indptr, const int64_t[::1] indices, const int64_t[::1] sources, int64_t depth,
               int64_t cap, int64_t[::1] mark, int64_t stamp, int64_t[::1] queue, int64_t[::1] out_u,
               int64_t[::1] out_v):
    """Pairs (s, v), s < v, of every source s of ``sources`` in turn with
    the tasks v of its ball: BFS from s up to ``depth`` levels, whole levels
    kept, no further level once the ball holds ``cap`` tasks.  ``mark``
    (n entries, below ``stamp`` on the first call) and ``queue`` (n
    entries) are work space.  Stops at a source whose pairs do not fit in
    ``out_u``/``out_v``; returns (sources done, pairs written, the next
    stamp).  O(the balls' edges)."""
    cdef int64_t written = 0, s, head, tail, level_end, v, level
    cdef Py_ssize_t i, j, done = sources.shape[0]
    with nogil:
        for i in range(sources.shape[0]):
            s = sources[i]
            stamp += 1
            mark[s] = stamp
            queue[0] = s
            head, tail = 0, 1
            for level in range(depth):
                if tail >= cap:
                    break
                level_end = tail
                while head < level_end:
                    tail = push_unmarked(indptr, indices, queue[head], mark, stamp, queue, tail)
                    head += 1
                if tail == level_end:
                    break
            if written + tail > out_u.shape[0]:
                done = i
                break
            for j in range(tail):
                v = queue[j]
                if s < v:
                    out_u[written] = s
                    out_v[written] = v
                    written += 1
    return done, written, stamp


# The connection cache of ``best_swaps_of`` (dense graphs).
#
# Without it a scan pays O(n depth + m): C_v(p_u) for every v is a pass over
# all edges.  With W[v, a] = the traffic of v's neighbours placed below node
# a, kept for every task and every inner node of the tree (n x inner nodes),
# C_v(p_u) is O(depth) per v and a swap updates the cache of the two tasks'
# neighbours in O((deg(u) + deg(v)) depth): the cost of evaluating a pair no
# longer grows with the degree, and a move costs its own edges only.

def connection_cache(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                     const int64_t[::1] pos, const int64_t[:, ::1] paths, const int64_t[::1] col, int64_t n_cols):
    """W[v, col[a]]: the traffic of v's neighbours placed below inner node a;
    and every task's total traffic."""
    cdef Py_ssize_t n = pos.shape[0], v, d
    cache_arr, total_arr = np.zeros((n, n_cols)), np.zeros(n)
    cdef double[:, ::1] cache = cache_arr
    cdef double[::1] total = total_arr
    cdef int64_t e, px, c
    with nogil:
        for v in range(n):
            for e in range(indptr[v], indptr[v + 1]):
                px = pos[indices[e]]
                total[v] += w[e]
                for d in range(1, paths.shape[0]):
                    c = col[paths[d, px]]
                    if c >= 0:
                        cache[v, c] += w[e]
    return cache_arr, total_arr


# ---------------------------------------------------------------------------
# Move refinement (many tasks per PE; ``moves.py``)

cdef inline void update_room(const int64_t[::1] parent, const int64_t[::1] child_ptr, const int64_t[::1] child_idx,
                             const int64_t[::1] leaf_of_pe, double[::1] room, const double[::1] cap,
                             const double[::1] load, int64_t pe) noexcept nogil:
    """Room (capacity - load) of ``pe`` changed: refresh the maxima above it."""
    cdef int64_t node = leaf_of_pe[pe], c
    cdef double r
    room[node] = cap[pe] - load[pe]
    node = parent[node]
    while node >= 0:
        r = -INF
        for c in range(child_ptr[node], child_ptr[node + 1]):
            if room[child_idx[c]] > r:
                r = room[child_idx[c]]
        room[node] = r
        node = parent[node]


cdef inline int64_t nearest_room(const int64_t[::1] parent, const int64_t[::1] child_ptr,
                                 const int64_t[::1] child_idx, const int64_t[::1] leaf_pe, const double[::1] room,
                                 int64_t leaf, double need) noexcept nogil:
    """A PE with at least ``need`` room in the smallest subtree around the
    leaf node ``leaf`` that has one (the roomiest child at every step
    down), or -1."""
    cdef int64_t node = parent[leaf], best, c
    while node >= 0 and room[node] < need:
        node = parent[node]
    if node < 0:
        return -1
    while child_ptr[node + 1] > child_ptr[node]:
        best = child_idx[child_ptr[node]]
        for c in range(child_ptr[node] + 1, child_ptr[node + 1]):
            if room[child_idx[c]] > room[best]:
                best = child_idx[c]
        node = best
    return leaf_pe[node]


def move_pass(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w, int64_t[::1] pos,
              const int64_t[:, ::1] paths, const double[::1] dist_ext, const int64_t[::1] order,
              const double[::1] vw, double[::1] load, const double[::1] cap, tuple tree, double[::1] room,
              double[::1] acc, int64_t[::1] stamp, int64_t tick, double tol):
    """One label-propagation sweep over the tasks in ``order``: each task
    moves to its best PE with room when that gains more than ``tol``.
    ``tree`` = (parent, child_ptr, child_idx, leaf_of_pe, leaf_pe) of the
    topology, ``room`` the most room of a PE below every node.  Updates
    ``pos``, ``load`` and ``room``; returns (moves, J change, next tick)."""
    cdef const int64_t[::1] parent = tree[0], child_ptr = tree[1], child_idx = tree[2]
    cdef const int64_t[::1] leaf_of_pe = tree[3], leaf_pe = tree[4]
    cdef int64_t moves = 0, u, p, q, best_q, e
    cdef Py_ssize_t i
    cdef double change = 0.0, here, best_gain, g
    with nogil:
        for i in range(order.shape[0]):
            u = order[i]
            if indptr[u] == indptr[u + 1]:
                continue
            tick += 1
            p = pos[u]
            accumulate(indptr, indices, w, pos, paths, acc, u, False)
            here = cost_at(paths, dist_ext, acc, p)
            best_gain = tol
            best_q = -1
            for e in range(indptr[u], indptr[u + 1]):
                q = pos[indices[e]]
                if q == p or stamp[q] == tick:
                    continue
                stamp[q] = tick
                if load[q] + vw[u] > cap[q]:  # full: the nearest PE with room
                    q = nearest_room(parent, child_ptr, child_idx, leaf_pe, room, leaf_of_pe[q], vw[u])
                    if q < 0 or q == p or stamp[q] == tick:
                        continue
                    stamp[q] = tick
                g = here - cost_at(paths, dist_ext, acc, q)
                if g > best_gain:
                    best_gain = g
                    best_q = q
            accumulate(indptr, indices, w, pos, paths, acc, u, True)
            if best_q >= 0:
                pos[u] = best_q
                load[p] -= vw[u]
                load[best_q] += vw[u]
                update_room(parent, child_ptr, child_idx, leaf_of_pe, room, cap, load, p)
                update_room(parent, child_ptr, child_idx, leaf_of_pe, room, cap, load, best_q)
                moves += 1
                change -= best_gain
    return moves, change, tick


# ---------------------------------------------------------------------------
# Two-way FM between two blocks under exact capacity (``exchange.py``)

cdef enum:
    PATIENCE = 32  # moves without a new best prefix before a pass stops


def pair_fm(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w, const double[::1] vw,
            int64_t[::1] block, const int64_t[::1] tasks, int64_t a, int64_t b, double cap_a, double cap_b,
            double drift_max, double tol):
    """One FM pass between blocks ``a`` and ``b`` over ``tasks`` (their
    members, weights ``vw``): the load of ``a`` may drift by ``drift_max``
    during the pass; updates ``block`` to the best prefix whose loads fit
    ``cap_a``/``cap_b``; returns the traffic no longer crossing between
    them (>= 0)."""
    cdef Py_ssize_t m = tasks.shape[0], i, step, s
    cdef vector[double] gain = vector[double](m)
    cdef vector[cbool] locked = vector[cbool](m, False)
    cdef vector[int64_t] moved = vector[int64_t](m)
    cdef double load_a = 0.0, load_b = 0.0, ca, cb, start_a, cum = 0.0, best = tol, wt, drift
    cdef int64_t best_len = 0, n_moves = 0, pick, u, x, e, c
    cdef bint from_a
    with nogil:
        for i in range(m):
            u = tasks[i]
            ca = 0.0
            cb = 0.0
            for e in range(indptr[u], indptr[u + 1]):
                c = block[indices[e]]
                if c == a:
                    ca += w[e]
                elif c == b:
                    cb += w[e]
            if block[u] == a:
                gain[i] = cb - ca
                load_a += vw[u]
            else:
                gain[i] = ca - cb
                load_b += vw[u]
        start_a = load_a
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


# ---------------------------------------------------------------------------
# Pairwise exchange (``mesh.heuristics.pairwise_exchange``, Bokhari's search)

cdef inline void stable_argsort(vector[pair[double, int64_t]]& keyed) noexcept nogil:
    """Sorted by key, ties in index order: numpy's stable argsort of the keys."""
    sort(keyed.begin(), keyed.end())


cdef int64_t weighted_median(const int64_t* vals, const double* w, Py_ssize_t size,
                             vector[pair[double, int64_t]]& keyed) noexcept nogil:
    """The first of ``vals`` in sorted order (stable) at which the running
    sum of ``w`` reaches half its total (``construct.slots._weighted_centre``,
    the same sums in the same order)."""
    cdef Py_ssize_t j
    cdef int64_t i
    cdef double total = 0.0, half, cum = 0.0
    keyed.resize(size)
    for j in range(size):
        keyed[j] = pair[double, int64_t](<double>vals[j], j)
    stable_argsort(keyed)
    for j in range(size):
        total += w[keyed[j].second]
    half = total / 2
    for j in range(size):
        i = keyed[j].second
        cum += w[i]
        if cum >= half:
            return vals[i]
    return vals[keyed[size - 1].second]


cdef void heaviest(const double[::1] w, int64_t lo, int64_t hi, Py_ssize_t most,
                   vector[pair[double, int64_t]]& keyed) noexcept nogil:
    """The first ``most`` of the entries ``lo``..``hi`` of ``w`` by weight,
    heaviest first, ties in order (into ``keyed``: (-weight, entry - lo))."""
    cdef int64_t j
    keyed.resize(hi - lo)
    for j in range(hi - lo):
        keyed[j] = pair[double, int64_t](-w[lo + j], j)
    stable_argsort(keyed)
    if <Py_ssize_t>keyed.size() > most:
        keyed.resize(most)


cdef Py_ssize_t mesh_candidates(const int64_t[::1] indices, const double[::1] w, int64_t lo, int64_t hi,
                                const int64_t[::1] pe, const int64_t[:, ::1] coords, const int64_t[::1] dims,
                                const cbool[::1] wrap, int64_t cores, int64_t cap, int64_t[::1] out,
                                vector[int64_t]& vals, vector[int64_t]& nodes,
                                vector[pair[double, int64_t]]& keyed) noexcept nogil:
    """``construct.slots.candidate_slots`` on a mesh, into ``out``
    (truncated at its size): the slots of the nodes on and around the
    byte-weighted median of the neighbours (the entries ``lo``..``hi``)
    and of the 4 heaviest neighbours' nodes, node by node in id order;
    returns the count."""
    cdef Py_ssize_t ndim = dims.shape[0], k, j, r, size = 0, count = 0
    cdef int64_t deg = hi - lo, node, x, p, s
    cdef vector[int64_t] ctr = vector[int64_t](ndim)
    cdef bint inside
    vals.resize(deg)
    for k in range(ndim):
        for j in range(deg):
            vals[j] = coords[pe[indices[lo + j]], k]
        ctr[k] = weighted_median(vals.data(), &w[lo], deg, keyed)
    nodes.resize(1 + 2 * ndim + 4)
    for r in range(1 + 2 * ndim):  # the centre, then +1 and -1 along each dimension
        node = 0
        inside = True
        for k in range(ndim):
            x = ctr[k]
            if r == 1 + k:
                x += 1
            elif r == 1 + ndim + k:
                x -= 1
            if wrap[k]:
                x = (x % dims[k] + dims[k]) % dims[k]  # Python's modulo: -1 wraps to the last
            elif x < 0 or x >= dims[k]:
                inside = False
                break
            node = node * dims[k] + x
        if inside:
            nodes[count] = node
            count += 1
    heaviest(w, lo, hi, 4, keyed)
    for j in range(<Py_ssize_t>keyed.size()):
        nodes[count] = pe[indices[lo + keyed[j].second]] // cores
        count += 1
    sort(nodes.begin(), nodes.begin() + count)
    for j in range(count):
        node = nodes[j]
        if j > 0 and node == nodes[j - 1]:
            continue
        for p in range(node * cores, (node + 1) * cores):
            for s in range(p * cap, (p + 1) * cap):
                if size == out.shape[0]:
                    return size
                out[size] = s
                size += 1
    return size


cdef Py_ssize_t graph_candidates(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                                 int64_t lo, int64_t hi, const int64_t[::1] slot, int64_t[::1] mark, int64_t stamp,
                                 int64_t[::1] buf, int64_t[::1] out, vector[int64_t]& slots,
                                 vector[pair[double, int64_t]]& keyed) noexcept nogil:
    """``candidate_slots`` off a mesh: the slots of the neighbours (the
    entries ``lo``..``hi``) and of the 8 heaviest neighbours' neighbours,
    lowest slot ids first, into ``out`` (truncated at its size);
    ``mark``/``stamp`` dedupe the tasks (``buf`` holds them); returns the
    count."""
    cdef int64_t count = 0, x, e
    cdef Py_ssize_t j, size
    for e in range(lo, hi):
        x = indices[e]
        if mark[x] != stamp:
            mark[x] = stamp
            buf[count] = x
            count += 1
    heaviest(w, lo, hi, 8, keyed)
    for j in range(<Py_ssize_t>keyed.size()):
        count = push_unmarked(indptr, indices, indices[lo + keyed[j].second], mark, stamp, buf, count)
    slots.resize(count)
    for j in range(count):
        slots[j] = slot[buf[j]]
    sort(slots.begin(), slots.end())
    size = count if count < out.shape[0] else out.shape[0]
    for j in range(size):
        out[j] = slots[j]
    return size


cdef int64_t _exchange_rounds(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                              const int64_t[::1] order, int64_t[::1] pe, int64_t[::1] slot,
                              int64_t[::1] task_of_slot, const int64_t[::1] slot_pe, const Oracle* o,
                              const int64_t[:, ::1] coords, const int64_t[::1] dims, const cbool[::1] wrap,
                              int64_t cores, int64_t cap, int64_t[::1] cand, int64_t[::1] mark, int64_t[::1] buf,
                              int64_t rounds, bint on_mesh) noexcept nogil:
    cdef Py_ssize_t n_slots = slot_pe.shape[0], size, i, j
    cdef int64_t limit = cand.shape[0]
    cdef bint every_slot = n_slots <= limit, improved
    cdef int64_t stamp = 0, passes = 0, r, u, lo, hi, pu, su, pv, v, y, py, c, best_slot, other, e
    cdef double old_u, best, gain, delta_v, s_uv
    cdef vector[int64_t] vals, nodes
    cdef vector[pair[double, int64_t]] keyed
    for r in range(rounds):
        passes += 1
        improved = False
        for j in range(order.shape[0]):
            u = order[j]
            lo, hi = indptr[u], indptr[u + 1]
            if lo == hi:
                continue
            if every_slot:
                size = n_slots
            elif on_mesh:
                size = mesh_candidates(indices, w, lo, hi, pe, coords, dims, wrap, cores, cap, cand, vals, nodes,
                                       keyed)
            else:
                stamp += 1
                size = graph_candidates(indptr, indices, w, lo, hi, slot, mark, stamp, buf, cand, vals, keyed)
            pu = pe[u]
            su = slot[u]
            old_u = 0.0
            for e in range(lo, hi):
                old_u += w[e] * dist(o, pu, pe[indices[e]])
            best = INF
            best_slot = -1
            for i in range(size):
                c = cand[i]
                if c == su:
                    continue
                pv = slot_pe[c]
                gain = 0.0  # u moves to pv
                for e in range(lo, hi):
                    gain += w[e] * dist(o, pv, pe[indices[e]])
                gain -= old_u
                v = task_of_slot[c]
                if v >= 0:  # v moves to pu
                    delta_v = 0.0
                    s_uv = 0.0
                    for e in range(indptr[v], indptr[v + 1]):
                        y = indices[e]
                        py = pe[y]
                        delta_v += w[e] * (dist(o, pu, py) - dist(o, pv, py))
                        if y == u:
                            s_uv = w[e]
                    gain += delta_v
                    gain += 2 * s_uv * dist(o, pu, pv)  # the u-v edge keeps its length
                if gain < best:
                    best = gain
                    best_slot = c
            if best_slot >= 0 and best < -1e-9 * (old_u if old_u > 1.0 else 1.0):
                other = task_of_slot[best_slot]
                task_of_slot[su] = other
                task_of_slot[best_slot] = u
                slot[u] = best_slot
                pe[u] = slot_pe[best_slot]
                if other >= 0:
                    slot[other] = su
                    pe[other] = slot_pe[su]
                improved = True
        if not improved:
            break
    return passes


cdef object _exchange_call(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                           const int64_t[::1] order, int64_t[::1] pe, int64_t[::1] slot, int64_t[::1] task_of_slot,
                           const int64_t[::1] slot_pe, Oracle o, const int64_t[:, ::1] coords,
                           const int64_t[::1] dims, const cbool[::1] wrap, int64_t cores, int64_t cap, int64_t limit,
                           int64_t rounds, bint on_mesh):
    cdef Py_ssize_t n = pe.shape[0]
    cdef int64_t passes
    cand_arr = np.arange(slot_pe.shape[0], dtype=np.int64) if slot_pe.shape[0] <= limit else \
        np.empty(limit, dtype=np.int64)
    mark_arr = np.zeros(0 if on_mesh else n, dtype=np.int64)
    buf_arr = np.empty(0 if on_mesh else n, dtype=np.int64)
    cdef int64_t[::1] cand = cand_arr, mark = mark_arr, buf = buf_arr
    with nogil:
        passes = _exchange_rounds(indptr, indices, w, order, pe, slot, task_of_slot, slot_pe, &o, coords, dims,
                                  wrap, cores, cap, cand, mark, buf, rounds, on_mesh)
    return passes


def exchange_rounds(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                    const int64_t[::1] order, int64_t[::1] pe, int64_t[::1] slot, int64_t[::1] task_of_slot,
                    const int64_t[::1] slot_pe, const int64_t[:, ::1] oracle_a, const int64_t[:, ::1] oracle_b,
                    const int64_t[:, ::1] coords, const int64_t[::1] dims, const cbool[::1] wrap, int64_t cores,
                    int64_t cap, int64_t limit, int64_t rounds, bint on_mesh):
    """Pairwise exchange (``mesh_heuristics.pairwise_exchange``) on a mesh
    (``oracle_a``/``oracle_b``: ``mesh.kernel.mesh_oracle``'s coordinates
    and hops): up to ``rounds`` passes over the tasks in ``order``, each
    task swapped into the candidate slot of largest J decrease (first on
    ties), until a pass swaps nothing.  Candidates: every slot when there
    are at most ``limit``, else the slots around the neighbours' weighted
    median (``on_mesh``) or the neighbours' and the heaviest neighbours'
    neighbours' slots.  Updates the slot table (``pe``, ``slot``,
    ``task_of_slot``) in place; returns the passes run."""
    return _exchange_call(indptr, indices, w, order, pe, slot, task_of_slot, slot_pe,
                          mesh_oracle(oracle_a, oracle_b), coords, dims, wrap, cores, cap, limit, rounds, on_mesh)


def tree_exchange_rounds(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                         const int64_t[::1] order, int64_t[::1] pe, int64_t[::1] slot, int64_t[::1] task_of_slot,
                         const int64_t[::1] slot_pe, const int64_t[:, ::1] oracle_a, const double[::1] oracle_b,
                         const int64_t[:, ::1] coords, const int64_t[::1] dims, const cbool[::1] wrap,
                         int64_t cores, int64_t cap, int64_t limit, int64_t rounds, bint on_mesh):
    """``exchange_rounds`` on a tree (``oracle_a``/``oracle_b``:
    ``kernel.tree_oracle``'s paths and distances)."""
    return _exchange_call(indptr, indices, w, order, pe, slot, task_of_slot, slot_pe,
                          tree_oracle(oracle_a, oracle_b), coords, dims, wrap, cores, cap, limit, rounds, on_mesh)
