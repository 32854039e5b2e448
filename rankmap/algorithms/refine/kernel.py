"""Compiled inner loop of swap refinement on tree machines (numba).

The Schulz-Traff search is sequential by nature: a swap is taken the moment
it gains, and the next pair is judged on the changed mapping.  The vectorised
numpy search in ``swaps.py`` has to batch pairs and defer the ones whose
neighbourhoods collide, which on small dense graphs costs many re-evaluations
(about 2e4 pairs/s on a 128-task model); this loop evaluates each pair once,
exactly, in O(deg(u) + deg(v)) oracle calls, some 100x faster (see
benchmarks/quality_scale.py, pairs/s).

The distance oracle is the tree's own: ``paths[d, p]`` is the ancestor of PE
p at depth d (padded with ids unique to p below a short leaf), so D(p, q) is
``dist_ext`` of the deepest common entry, O(depth), no k x k matrix.
"""

from __future__ import annotations

import numpy as np
from ..jit import njit


@njit(cache=True, nogil=True)
def _dist(paths, dist_ext, p, q):
    if p == q:
        return 0.0
    for d in range(paths.shape[0] - 1, -1, -1):
        a = paths[d, p]
        if a == paths[d, q]:
            return dist_ext[a]
    return 0.0  # unreachable: the root is common to every PE


@njit(cache=True, nogil=True)
def _move_delta(indptr, indices, w, pos, paths, dist_ext, u, p_from, p_to, partner):
    """J change of moving u from p_from to p_to with ``partner`` left out,
    and the weight of the edge u -- partner."""
    s = 0.0
    w_partner = 0.0
    for e in range(indptr[u], indptr[u + 1]):
        x = indices[e]
        if x == partner:
            w_partner += w[e]
            continue
        px = pos[x]
        s += w[e] * (_dist(paths, dist_ext, p_to, px) - _dist(paths, dist_ext, p_from, px))
    return s, w_partner


@njit(cache=True, nogil=True)
def swap_pass(indptr, indices, w, pos, paths, dist_ext, U, V, many, vw, load, l_max, tol):
    """One sweep over the pairs (U[i], V[i]) in order: each improving swap
    (or, when ``many``, single move within ``l_max``) is applied at once.
    Updates ``pos`` and ``load`` in place; returns (pairs evaluated,
    actions applied, total J change)."""
    evaluated = 0
    applied = 0
    change = 0.0
    for i in range(U.size):
        u = U[i]
        v = V[i]
        pu = pos[u]
        pv = pos[v]
        if pu == pv:
            continue
        evaluated += 1
        gu, w_uv = _move_delta(indptr, indices, w, pos, paths, dist_ext, u, pu, pv, v)
        gv, _ = _move_delta(indptr, indices, w, pos, paths, dist_ext, v, pv, pu, u)
        best = np.inf
        act = -1
        if not many or (load[pu] - vw[u] + vw[v] <= l_max and load[pv] - vw[v] + vw[u] <= l_max):
            best = gu + gv  # the edge u -- v keeps its length
            act = 0
        if many:
            d_uv = w_uv * _dist(paths, dist_ext, pu, pv)
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


def tree_oracle(topology):
    """The arrays of the compiled distance oracle of a tree topology."""
    return (np.ascontiguousarray(topology._paths, dtype=np.int64),
            np.ascontiguousarray(topology._dist_ext, dtype=np.float64))


@njit(cache=True, nogil=True)
def _gamma_of(indptr, indices, w, pos, paths, dist_ext, t):
    s = 0.0
    for e in range(indptr[t], indptr[t + 1]):
        s += w[e] * _dist(paths, dist_ext, pos[t], pos[indices[e]])
    return s


@njit(cache=True, nogil=True)
def gammas(indptr, indices, w, pos, paths, dist_ext):
    """Every task's contribution Gamma_t = sum_x S_tx D(p_t, p_x)."""
    n = pos.size
    gamma = np.empty(n)
    for t in range(n):
        gamma[t] = _gamma_of(indptr, indices, w, pos, paths, dist_ext, t)
    return gamma


@njit(cache=True, nogil=True)
def accumulate(indptr, indices, w, pos, paths, acc, u, clear):
    """u's traffic below every node on its partners' paths into ``acc``
    (``clear``: those entries back to 0)."""
    for e in range(indptr[u], indptr[u + 1]):
        px = pos[indices[e]]
        for d in range(paths.shape[0]):
            if clear:
                acc[paths[d, px]] = 0.0
            else:
                acc[paths[d, px]] += w[e]


@njit(cache=True, nogil=True)
def cost_at(paths, dist_ext, acc, q):
    """C_u(q) = sum_x S_ux D(q, p_x), from u's ``accumulate``d weights."""
    c = 0.0
    for d in range(paths.shape[0] - 1):
        a = paths[d, q]
        c += (acc[a] - acc[paths[d + 1, q]]) * dist_ext[a]
    return c


@njit(cache=True, nogil=True)
def _scatter(indptr, indices, w, pos, paths, u, wnode, wu, clear):
    """``accumulate`` plus u's traffic to each partner (``wu``)."""
    accumulate(indptr, indices, w, pos, paths, wnode, u, clear)
    for e in range(indptr[u], indptr[u + 1]):
        wu[indices[e]] = 0.0 if clear else wu[indices[e]] + w[e]


@njit(cache=True, nogil=True)
def best_swaps_of(indptr, indices, w, pos, paths, dist_ext, gamma, order, tol, moved, cache, total, col):
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
    n = pos.size
    cached = cache.shape[1] > 0
    y = np.empty(n)
    cv = np.empty(n)
    wnode = np.zeros(dist_ext.size)
    wu = np.zeros(n)
    n_moved = 0
    for u in order:
        pu = pos[u]
        if not cached:
            for x in range(n):
                y[x] = _dist(paths, dist_ext, pu, pos[x])
            for v in range(n):
                s = 0.0
                for e in range(indptr[v], indptr[v + 1]):
                    s += w[e] * y[indices[e]]
                cv[v] = s
        _scatter(indptr, indices, w, pos, paths, u, wnode, wu, False)
        best = -tol
        best_v = -1
        for v in range(n):
            pv = pos[v]
            if pv == pu:
                continue
            cu = cost_at(paths, dist_ext, wnode, pv)
            if cached:
                g = cu + _cached_cost(cache, total, paths, dist_ext, col, v, pu, wu[v]) - gamma[u] - gamma[v] \
                    + 2.0 * wu[v] * _dist(paths, dist_ext, pu, pv)
            else:
                g = cu + cv[v] - gamma[u] - gamma[v] + 2.0 * wu[v] * y[v]
            if g < best:
                best = g
                best_v = v
        _scatter(indptr, indices, w, pos, paths, u, wnode, wu, True)
        if best_v < 0:
            continue
        v = best_v
        pv = pos[v]
        pos[u], pos[v] = pv, pu
        if cached:
            _move_in_cache(indptr, indices, w, cache, paths, col, u, pu, pv)
            _move_in_cache(indptr, indices, w, cache, paths, col, v, pv, pu)
        for t in (u, v):
            moved[n_moved] = t
            n_moved += 1
            for x in _with_partners(indptr, indices, t):
                if cached:
                    gamma[x] = _cached_cost(cache, total, paths, dist_ext, col, x, pos[x], 0.0)
                else:
                    gamma[x] = _gamma_of(indptr, indices, w, pos, paths, dist_ext, x)
    return n_moved


@njit(cache=True, nogil=True)
def _with_partners(indptr, indices, t):
    """t followed by its partners."""
    out = np.empty(indptr[t + 1] - indptr[t] + 1, dtype=np.int64)
    out[0] = t
    out[1:] = indices[indptr[t]:indptr[t + 1]]
    return out



@njit(cache=True, nogil=True)
def push_unmarked(indptr, indices, x, mark, stamp, buf, count):
    """Append the neighbours y of x with ``mark[y] != stamp`` to
    ``buf[count:]``, marking them; returns the new count."""
    for e in range(indptr[x], indptr[x + 1]):
        y = indices[e]
        if mark[y] != stamp:
            mark[y] = stamp
            buf[count] = y
            count += 1
    return count


@njit(cache=True, nogil=True)
def ball_pairs(indptr, indices, sources, depth, cap, mark, stamp, queue, out_u, out_v):
    """Pairs (s, v), s < v, of every source s of ``sources`` in turn with
    the tasks v of its ball: BFS from s up to ``depth`` levels, whole levels
    kept, no further level once the ball holds ``cap`` tasks.  ``mark``
    (n entries, below ``stamp`` on the first call) and ``queue`` (n
    entries) are work space.  Stops at a source whose pairs do not fit in
    ``out_u``/``out_v``; returns (sources done, pairs written, the next
    stamp).  O(the balls' edges)."""
    written = 0
    for i in range(sources.size):
        s = sources[i]
        stamp += 1
        mark[s] = stamp
        queue[0] = s
        head, tail = 0, 1
        for _ in range(depth):
            if tail >= cap:
                break
            level_end = tail
            while head < level_end:
                tail = push_unmarked(indptr, indices, queue[head], mark, stamp, queue, tail)
                head += 1
            if tail == level_end:
                break
        if written + tail > out_u.size:
            return i, written, stamp
        for j in range(tail):
            v = queue[j]
            if s < v:
                out_u[written] = s
                out_v[written] = v
                written += 1
    return sources.size, written, stamp


# ---------------------------------------------------------------------------
# The connection cache of ``best_swaps_of`` (dense graphs).
#
# Without it a scan pays O(n depth + m): C_v(p_u) for every v is a pass over
# all edges.  With W[v, a] = the traffic of v's neighbours placed below node
# a, kept for every task and every inner node of the tree (n x inner nodes),
# C_v(p_u) is O(depth) per v and a swap updates the cache of the two tasks'
# neighbours in O((deg(u) + deg(v)) depth): the cost of evaluating a pair no
# longer grows with the degree, and a move costs its own edges only.


def cache_columns(topology) -> np.ndarray:
    """Column of every inner node below the root in the connection cache,
    -1 for the root, the leaves and the padding ids of the paths."""
    inner = np.flatnonzero((topology.child_ptr[1:] > topology.child_ptr[:-1]) & (topology.parent >= 0))
    col = np.full(topology.n_nodes + topology.n_pes, -1, dtype=np.int64)
    col[inner] = np.arange(inner.size)
    return col


@njit(cache=True, nogil=True)
def connection_cache(indptr, indices, w, pos, paths, col, n_cols):
    """W[v, col[a]]: the traffic of v's neighbours placed below inner node a;
    and every task's total traffic."""
    n = pos.size
    cache = np.zeros((n, n_cols))
    total = np.zeros(n)
    for v in range(n):
        for e in range(indptr[v], indptr[v + 1]):
            px = pos[indices[e]]
            total[v] += w[e]
            for d in range(1, paths.shape[0]):
                c = col[paths[d, px]]
                if c >= 0:
                    cache[v, c] += w[e]
    return cache, total


@njit(cache=True, nogil=True)
def _cached_cost(cache, total, paths, dist_ext, col, v, q, w_at_q):
    """C_v(q) = sum_x S_vx D(q, p_x) from v's cache row: ``w_at_q`` is the
    traffic of v to the task on PE q (0 when v is on q)."""
    prev = total[v]
    s = 0.0
    for d in range(1, paths.shape[0]):
        a = paths[d, q]
        c = col[a]
        now = cache[v, c] if c >= 0 else w_at_q
        s += dist_ext[paths[d - 1, q]] * (prev - now)
        prev = now
    return s


@njit(cache=True, nogil=True)
def _move_in_cache(indptr, indices, w, cache, paths, col, t, p_from, p_to):
    """Task t moved from PE p_from to p_to: its neighbours' cache rows."""
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
