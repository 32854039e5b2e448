"""The compiled halves of ``pair_fm.py``: two-way FM on each pair of a
matching, every pair on its own small copy of the graph, and the greedy
matching itself."""

from __future__ import annotations

import numpy as np

from ...heap_kernel import pop, push
from ..jit import njit


@njit(cache=True, nogil=True)
def _top(keys, vals, size, gain, locked):
    """The valid top of one side's heap (-gain, task), stale entries dropped:
    (task or -1, gain, new size)."""
    while size:
        if not locked[vals[0]] and keys[0] == -gain[vals[0]]:
            return vals[0], gain[vals[0]], size
        _, _, size = pop(keys, vals, size)
    return -1, -np.inf, size


@njit(cache=True, nogil=True)
def _fm(ptr, nbr, wt, k, side, max_passes, gain, locked, moved, keys, vals):
    """FM passes on the local CSR of ``k`` tasks split by ``side`` (0/1, sizes
    kept); ``side`` is changed in place.  The tasks of each side wait in a
    heap by gain (``keys``/``vals``: two halves of room k + entries, stale
    entries skipped).  Returns the cut weight removed."""
    ones = 0
    for a in range(k):
        ones += side[a]
    half = keys.size // 2
    removed = 0.0
    for _ in range(max_passes):
        sizes = np.zeros(2, dtype=np.int64)
        for a in range(k):
            g = 0.0
            for e in range(ptr[a], ptr[a + 1]):
                g += wt[e] if side[nbr[e]] != side[a] else -wt[e]
            gain[a] = g
            locked[a] = False
            h = side[a] * half
            sizes[side[a]] = push(keys[h:], vals[h:], sizes[side[a]], -g, a)
        now, best, best_at, made, count = 0.0, 0.0, 0, 0, ones
        for i in range(k):
            pick0, gain0, sizes[0] = _top(keys[:half], vals[:half], sizes[0], gain, locked)
            pick1, gain1, sizes[1] = _top(keys[half:], vals[half:], sizes[1], gain, locked)
            if count > ones or (count == ones and pick1 >= 0 and (gain1 > gain0 or (gain1 == gain0 and pick1 < pick0))):
                pick, pick_gain = pick1, gain1  # the larger side gives; at equal sizes the better task
            else:
                pick, pick_gain = pick0, gain0
            if pick < 0:
                break
            locked[pick] = True
            moved[i] = pick
            made = i + 1
            now += pick_gain
            was = side[pick]
            side[pick] = 1 - was
            count += 1 if was == 0 else -1
            gain[pick] = -gain[pick]
            for e in range(ptr[pick], ptr[pick + 1]):
                x = nbr[e]
                if locked[x]:
                    continue
                gain[x] += 2.0 * wt[e] if side[x] == was else -2.0 * wt[e]
                h = side[x] * half
                sizes[side[x]] = push(keys[h:], vals[h:], sizes[side[x]], -gain[x], x)
            if count == ones and now > best + 1e-9:
                best, best_at = now, made
        for j in range(made - 1, best_at - 1, -1):  # back to the best balanced prefix
            side[moved[j]] = 1 - side[moved[j]]
        removed += best
        if best <= 1e-9:
            break
    return removed


@njit(cache=True, nogil=True)
def refine_matched(indptr, indices, w, block, first, second, members, member_ptr, at, max_passes):
    """FM on each pair (``first[p]``, ``second[p]``) of blocks, whose tasks are
    ``members[member_ptr[b]:member_ptr[b + 1]]``; ``block`` is updated for
    the tasks that change sides, ``at`` is scratch (a task's place in its
    pair's copy).
    Returns the cut weight removed."""
    most = 0
    for p in range(first.size):
        most = max(most, member_ptr[first[p] + 1] - member_ptr[first[p]]
                   + member_ptr[second[p] + 1] - member_ptr[second[p]])
    tasks = np.empty(most, dtype=np.int64)
    ptr = np.zeros(most + 1, dtype=np.int64)
    entries = 8 * most
    nbr, wt = np.empty(entries, dtype=np.int64), np.empty(entries)
    side = np.empty(most, dtype=np.int64)
    gain, locked, moved = np.empty(most), np.empty(most, dtype=np.bool_), np.empty(most, dtype=np.int64)
    keys, vals = np.empty(0), np.empty(0, dtype=np.int64)
    removed = 0.0
    for p in range(first.size):
        k = 0
        for which in range(2):
            b = first[p] if which == 0 else second[p]
            for i in range(member_ptr[b], member_ptr[b + 1]):
                tasks[k] = members[i]
                side[k] = which
                at[members[i]] = k
                k += 1
        fill = 0
        for a in range(k):
            t = tasks[a]
            for e in range(indptr[t], indptr[t + 1]):
                b = block[indices[e]]  # another thread's pairs write ``at`` and ``block`` of other blocks only
                if b != first[p] and b != second[p]:
                    continue
                x = at[indices[e]]
                if fill == nbr.size:
                    nbr, wt = np.concatenate((nbr, np.empty(nbr.size, dtype=np.int64))), np.concatenate((wt, wt))
                nbr[fill] = x
                wt[fill] = w[e]
                fill += 1
            ptr[a + 1] = fill
        if keys.size < 2 * (k + fill):
            keys, vals = np.empty(2 * (k + fill)), np.empty(2 * (k + fill), dtype=np.int64)
        removed += _fm(ptr, nbr, wt, k, side, max_passes, gain, locked, moved, keys, vals)
        for a in range(k):
            block[tasks[a]] = first[p] if side[a] == 0 else second[p]
    return removed


@njit(cache=True)
def greedy_matching(qa, qb, order, k):
    """The pairs (qa[i], qb[i]) taken in ``order`` when both blocks are still free."""
    used = np.zeros(k, dtype=np.bool_)
    first, second = np.empty(k // 2, dtype=np.int64), np.empty(k // 2, dtype=np.int64)
    made = 0
    for i in order:
        x, y = qa[i], qb[i]
        if not used[x] and not used[y]:
            used[x] = used[y] = True
            first[made], second[made] = x, y
            made += 1
    return first[:made], second[:made]
