"""The compiled searches of the chain repair (``rebalance.py``)."""

from __future__ import annotations

import numpy as np

from ...heap_kernel import pop, push
from ..jit import njit


@njit(cache=True, nogil=True)
def _best_moves(indptr, indices, data, block, members, count, i, touched_by, listed, conn, local, seen,
                best_gain, best_vertex):
    """The best move of a task of block ``i`` into each adjacent block (the
    blocks ``seen[:ns]``, ns returned, with ``best_gain``/``best_vertex``),
    and the task that loses least when moved anywhere."""
    ns = 0
    cheapest, cheapest_loss = -1, np.inf
    for m in range(count[i]):
        u = members[i, m]
        inside = 0.0
        nl = 0
        for e in range(indptr[u], indptr[u + 1]):
            c = block[indices[e]]
            if c == i:
                inside += data[e]
            elif touched_by[c] != u:
                touched_by[c] = u
                conn[c] = data[e]
                local[nl] = c
                nl += 1
            else:
                conn[c] += data[e]
        if inside < cheapest_loss:
            cheapest, cheapest_loss = u, inside
        for t in range(nl):
            c = local[t]
            gain = conn[c] - inside
            if listed[c] != i:
                listed[c] = i
                seen[ns] = c
                ns += 1
                best_gain[c], best_vertex[c] = gain, u
            elif gain > best_gain[c]:
                best_gain[c], best_vertex[c] = gain, u
    for t in range(ns):
        touched_by[seen[t]] = -1
        listed[seen[t]] = -1
    return ns, cheapest


@njit(cache=True, nogil=True)
def _relocate(members, count, position, block, u, source, target):
    """Task ``u`` moved from block ``source`` to ``target``."""
    p = position[u]
    last = members[source, count[source] - 1]
    members[source, p] = last
    position[last] = p
    count[source] -= 1
    members[target, count[target]] = u
    position[u] = count[target]
    count[target] += 1
    block[u] = target


@njit(cache=True, nogil=True)
def _expand(i, indptr, indices, data, block, members, count, scratch, known, known_block, known_gain,
            known_vertex, seen, best_gain, best_vertex):
    """The best moves from block ``i`` into its neighbours (``seen[:ns]``,
    ns returned): kept from an earlier expansion while no task of or next to
    the block has moved since (``known``), else found anew."""
    if known[i] >= 0:
        ns = known[i]
        for t in range(ns):
            c = known_block[i, t]
            seen[t], best_gain[c], best_vertex[c] = c, known_gain[i, t], known_vertex[i, t]
        return ns
    touched_by, listed, conn, local = scratch
    ns, _ = _best_moves(indptr, indices, data, block, members, count, i, touched_by, listed, conn, local, seen,
                        best_gain, best_vertex)
    if ns <= known_block.shape[1]:
        known[i] = ns
        for t in range(ns):
            c = seen[t]
            known_block[i, t], known_gain[i, t], known_vertex[i, t] = c, best_gain[c], best_vertex[c]
    return ns


@njit(cache=True, nogil=True)
def _make_chain(goal, start, prev, via, indptr, indices, members, count, position, block, known):
    """The moves of the chain found from ``start`` to ``goal``, the last
    first: no block but the goal ever holds more than before."""
    j = goal
    while j != start:
        u = via[j]
        _relocate(members, count, position, block, u, prev[j], j)
        known[prev[j]] = known[j] = -1  # their moves, and those of the blocks around u, change
        for e in range(indptr[u], indptr[u + 1]):
            known[block[indices[e]]] = -1
        j = prev[j]


@njit(cache=True, nogil=True)
def _room_for(keys, vals, size, extra):
    """The heap's arrays with room for ``extra`` more entries."""
    if size + extra <= keys.size:
        return keys, vals
    grown_keys, grown_vals = np.empty(2 * (size + extra)), np.empty(2 * (size + extra), np.int64)
    grown_keys[:size], grown_vals[:size] = keys[:size], vals[:size]
    return grown_keys, grown_vals


@njit(cache=True, nogil=True)
def move_along_chains(indptr, indices, data, block, capacity, order, hop, max_expand, known_width):
    """Every block of ``block`` (changed in place) within its ``capacity``:
    one search per task too many, the blocks taken in ``order``; a step
    costs its lost cut weight plus ``hop``; a search expands at most
    ``max_expand`` blocks; blocks of at most ``known_width`` neighbours keep
    their moves between searches."""
    n, k = block.size, capacity.size
    count = np.zeros(k, np.int64)
    for v in range(n):
        count[block[v]] += 1
    width = max(int(count.max()), int(capacity.max())) + 1
    members = np.empty((k, width), np.int64)
    position = np.empty(n, np.int64)
    filled = np.zeros(k, np.int64)
    for v in range(n):
        b = block[v]
        members[b, filled[b]] = v
        position[v] = filled[b]
        filled[b] += 1
    max_degree = 1
    for v in range(n):
        max_degree = max(max_degree, indptr[v + 1] - indptr[v])
    scratch = (np.full(k, -1, np.int64), np.full(k, -1, np.int64), np.zeros(k), np.empty(max_degree, np.int64))
    seen = np.empty(k, np.int64)
    best_gain = np.zeros(k)
    best_vertex = np.full(k, -1, np.int64)
    known = np.full(k, -1, np.int64)
    known_block = np.empty((k, known_width), np.int64)
    known_gain = np.empty((k, known_width))
    known_vertex = np.empty((k, known_width), np.int64)
    dist = np.full(k, np.inf)
    prev = np.full(k, -1, np.int64)  # the block a chain comes from ...
    via = np.full(k, -1, np.int64)   # ... and the task it hands on
    done = np.zeros(k, np.bool_)
    reached = np.empty(k, np.int64)
    keys = np.empty(64, np.float64)
    vals = np.empty(64, np.int64)
    left = np.empty(k, np.int64)  # blocks whose own searches found no chain
    n_left = 0
    # each block's tasks too many, one search each
    for a in order:
        while count[a] > capacity[a]:
            n_reached, size, expanded = 1, 0, 0
            reached[0], dist[a] = a, 0.0
            size = push(keys, vals, size, 0.0, a)
            goal, goal_cost = -1, np.inf
            while size > 0 and expanded < max_expand:
                d, i, size = pop(keys, vals, size)
                if done[i] or d > dist[i]:
                    continue
                if d >= goal_cost:
                    break
                done[i] = True
                expanded += 1
                ns = _expand(i, indptr, indices, data, block, members, count, scratch, known, known_block,
                             known_gain, known_vertex, seen, best_gain, best_vertex)
                keys, vals = _room_for(keys, vals, size, ns)
                for t in range(ns):
                    c = seen[t]
                    cost = d + max(-best_gain[c], 0.0) + hop
                    if done[c] or cost >= dist[c]:
                        continue
                    if dist[c] == np.inf:
                        reached[n_reached] = c
                        n_reached += 1
                    dist[c], prev[c], via[c] = cost, i, best_vertex[c]
                    size = push(keys, vals, size, cost, c)
                    if count[c] < capacity[c] and cost < goal_cost:
                        goal, goal_cost = c, cost
            if goal >= 0:
                _make_chain(goal, a, prev, via, indptr, indices, members, count, position, block, known)
            for t in range(n_reached):
                c = reached[t]
                dist[c], prev[c], via[c], done[c] = np.inf, -1, -1, False
            if goal < 0:
                left[n_left] = a
                n_left += 1
                break
    # blocks whose searches found no block with room: the task that loses least to any block with room
    room = 0
    for t in range(n_left):
        a = left[t]
        while count[a] > capacity[a]:
            while count[room] >= capacity[room]:
                room += 1
            touched_by, listed, conn, local = scratch
            _, cheapest = _best_moves(indptr, indices, data, block, members, count, a, touched_by, listed, conn,
                                      local, seen, best_gain, best_vertex)
            _relocate(members, count, position, block, cheapest, a, room)
