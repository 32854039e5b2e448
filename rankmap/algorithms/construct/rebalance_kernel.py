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
def _moved(indptr, indices, members, count, position, block, known, u, source, target):
    """Task ``u`` moved from ``source`` to ``target``; the moves kept for
    both blocks and for the blocks around ``u`` are forgotten."""
    _relocate(members, count, position, block, u, source, target)
    known[source] = known[target] = -1
    for e in range(indptr[u], indptr[u + 1]):
        known[block[indices[e]]] = -1


@njit(cache=True, nogil=True)
def _make_chain(goal, start, prev, via, indptr, indices, members, count, position, block, known):
    """The moves of the chain found from ``start`` to ``goal``, the last
    first: no block but the goal ever holds more than before."""
    j = goal
    while j != start:
        _moved(indptr, indices, members, count, position, block, known, via[j], prev[j], j)
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
def _gain_into(i, c, indptr, indices, data, block, members, count, scratch, known, known_block, known_gain,
               known_vertex, seen, best_gain, best_vertex):
    """What the best move of a task of block ``i`` into block ``c`` gains
    (-inf where they are not adjacent), from the kept moves where it can."""
    if known[i] >= 0:
        for t in range(known[i]):
            if known_block[i, t] == c:
                return known_gain[i, t]
        return -np.inf
    ns = _expand(i, indptr, indices, data, block, members, count, scratch, known, known_block, known_gain,
                 known_vertex, seen, best_gain, best_vertex)
    for t in range(ns):
        if seen[t] == c:
            return best_gain[c]
    return -np.inf


@njit(cache=True, nogil=True)
def _costs_to_room(indptr, indices, data, block, members, count, capacity, hop, scratch, known, known_block,
                   known_gain, known_vertex, near, near_gain, near_vertex, far, far_gain, far_vertex, stale, dist,
                   toward, settled, keys, vals):
    """The cheapest chain from every ``stale`` block to a block with room
    (``dist``, and ``toward``: the block it hands a task to), by Dijkstra
    back from the rooms; the other blocks keep theirs and start the
    stale ones next to them.  Returns the heap's arrays."""
    k = count.size
    size = 0
    for b in range(k):
        if not stale[b]:
            continue
        settled[b] = False
        dist[b], toward[b] = np.inf, -1
        if count[b] < capacity[b]:
            dist[b] = 0.0
        else:
            ns = _expand(b, indptr, indices, data, block, members, count, scratch, known, known_block, known_gain,
                         known_vertex, far, far_gain, far_vertex)
            for t in range(ns):
                c = far[t]
                if not stale[c] and dist[c] < np.inf:
                    cost = dist[c] + max(-far_gain[c], 0.0) + hop
                    if cost < dist[b]:
                        dist[b], toward[b] = cost, c
        if dist[b] < np.inf:
            keys, vals = _room_for(keys, vals, size, 1)
            size = push(keys, vals, size, dist[b], b)
    while size > 0:
        d, c, size = pop(keys, vals, size)
        if settled[c] or d > dist[c]:
            continue
        settled[c] = True
        nc = _expand(c, indptr, indices, data, block, members, count, scratch, known, known_block, known_gain,
                     known_vertex, near, near_gain, near_vertex)
        for t in range(nc):
            i = near[t]
            if settled[i] or not stale[i]:
                continue
            gain = _gain_into(i, c, indptr, indices, data, block, members, count, scratch, known, known_block,
                              known_gain, known_vertex, far, far_gain, far_vertex)
            cost = d + max(-gain, 0.0) + hop
            if cost < dist[i]:
                dist[i], toward[i] = cost, c
                keys, vals = _room_for(keys, vals, size, 1)
                size = push(keys, vals, size, cost, i)
    return keys, vals


@njit(cache=True, nogil=True)
def _rooms(toward, dist, room):
    """``room``: the block with room each block's chain ends in (-1: none)."""
    k = toward.size
    room[:] = -2  # not yet known; -3: on the path being followed
    for b in range(k):
        x = b
        while room[x] == -2:
            if toward[x] < 0:
                room[x] = x if dist[x] == 0.0 else -1
                break
            room[x] = -3
            x = toward[x]
        end = room[x] if room[x] != -3 else -1
        x = b
        while room[x] == -3:
            room[x] = end
            x = toward[x]


@njit(cache=True, nogil=True)
def _plant(indptr, indices, data, block, members, count, position, capacity, x, scratch, known, seen, best_gain,
           best_vertex):
    """The task of block ``x`` that loses least moved to an empty block
    with room (else any block with room): the empty block, which no chain
    reaches, now lies next to ``x``."""
    target = -1
    for b in range(count.size):
        if count[b] < capacity[b] and (target < 0 or count[b] == 0):
            target = b
            if count[b] == 0:
                break
    touched_by, listed, conn, local = scratch
    _, cheapest = _best_moves(indptr, indices, data, block, members, count, x, touched_by, listed, conn, local, seen,
                              best_gain, best_vertex)
    _moved(indptr, indices, members, count, position, block, known, cheapest, x, target)


@njit(cache=True, nogil=True)
def _chains_to_room(indptr, indices, data, block, members, count, position, capacity, left, hop, max_work, scratch,
                    known, known_block, known_gain, known_vertex):
    """The tasks too many of the blocks in ``left`` handed along the
    cheapest chains to any block with room, found back from the rooms at
    once and found again only for the blocks whose chains have changed: a
    room that filled, a step that no longer exists.  Stops when the
    searches have visited ``max_work`` blocks (a scan of all blocks counts
    a sixteenth)."""
    k = count.size
    dist, toward, room = np.empty(k), np.empty(k, np.int64), np.empty(k, np.int64)
    settled = np.zeros(k, np.bool_)
    stale = np.ones(k, np.bool_)
    keys, vals = np.empty(64), np.empty(64, np.int64)
    near, near_gain, near_vertex = np.empty(k, np.int64), np.zeros(k), np.full(k, -1, np.int64)
    far, far_gain, far_vertex = np.empty(k, np.int64), np.zeros(k), np.full(k, -1, np.int64)
    work = k
    keys, vals = _costs_to_room(indptr, indices, data, block, members, count, capacity, hop, scratch, known,
                                known_block, known_gain, known_vertex, near, near_gain, near_vertex, far, far_gain,
                                far_vertex, stale, dist, toward, settled, keys, vals)
    for a in left:
        while count[a] > capacity[a] and work < max_work:
            x, searched = a, False
            while x == a or count[x] > capacity[x]:
                y = toward[x]
                if y >= 0:
                    ns = _expand(x, indptr, indices, data, block, members, count, scratch, known, known_block,
                                 known_gain, known_vertex, near, near_gain, near_vertex)
                    adjacent = False
                    for t in range(ns):
                        adjacent = adjacent or near[t] == y
                    if not adjacent:
                        y = -1
                if y < 0 and searched:  # no room within reach (the only ones left are empty): one is planted here
                    _plant(indptr, indices, data, block, members, count, position, capacity, x, scratch, known,
                           near, near_gain, near_vertex)
                    break
                if y < 0 or (dist[y] == 0.0 and count[y] >= capacity[y]):
                    # x's step is gone, or the room it led to has filled: the blocks whose chains
                    # end there, or pass through x, search again
                    if y < 0:
                        toward[x], dist[x] = -1, np.inf
                    _rooms(toward, dist, room)
                    for b in range(k):
                        stale[b] = room[b] == -1 or (y >= 0 and room[b] == y)
                        work += stale[b]
                    work += k // 16
                    keys, vals = _costs_to_room(indptr, indices, data, block, members, count, capacity, hop,
                                                scratch, known, known_block, known_gain, known_vertex, near,
                                                near_gain, near_vertex, far, far_gain, far_vertex, stale, dist,
                                                toward, settled, keys, vals)
                    searched = True
                    continue
                _moved(indptr, indices, members, count, position, block, known, near_vertex[y], x, y)
                searched = False
                x = y


@njit(cache=True, nogil=True)
def move_along_chains(indptr, indices, data, block, capacity, order, hop, max_expand, known_width, max_work):
    """Every block of ``block`` (changed in place) within its ``capacity``:
    one search per task too many, the blocks taken in ``order``; a step
    costs its lost cut weight plus ``hop``; a search expands at most
    ``max_expand`` blocks; blocks of at most ``known_width`` neighbours keep
    their moves between searches.  The tasks of the blocks whose searches
    found no room then go along chains searched back from every room
    (``_chains_to_room``, up to ``max_work`` blocks visited)."""
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
    if n_left > 0 and max_work > 0:
        _chains_to_room(indptr, indices, data, block, members, count, position, capacity, left[:n_left], hop,
                        max_work, scratch, known, known_block, known_gain, known_vertex)
    # what is still too many: the task that loses least, to the first block with room
    room = 0
    for a in range(k):
        while count[a] > capacity[a]:
            while count[room] >= capacity[room]:
                room += 1
            touched_by, listed, conn, local = scratch
            _, cheapest = _best_moves(indptr, indices, data, block, members, count, a, touched_by, listed, conn,
                                      local, seen, best_gain, best_vertex)
            _relocate(members, count, position, block, cheapest, a, room)
