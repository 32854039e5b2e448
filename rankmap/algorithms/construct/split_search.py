"""Iterated local search of one small split into children of fixed sizes (compiled).

Greedy growing (``growing.py``) fills the children of a sub-problem one
after the other, and the last ones take what is left: ragged shapes that
no single swap repairs.  On the 16384 nodes of 64 tasks of a 2^20-task
stencil (KaMinPar's top cut) growing left 44 % of the weight between the
groups of 4; swaps until none gains took it to 42 %, the iterated local
search below to 40 % (KaHIP strong, best of five seeds, on a sample of
those nodes: 40 %), where every group cut costs 10 and a node cut 100.

The search: pairwise swaps between children (a task and the best partner
in a child it has traffic to), first gain taken, until none gains; then
rounds of a kick (a few random swaps of a task with a task it talks to)
followed by the swaps again, kept when the cut is not higher (plateaus
are walked), else undone from the round's log.  The work (swap
evaluations, swaps and kicks) is bounded per task, so the cost grows with
the sub-problem, not with its shape; the random stream is seeded per
sub-problem, so the result does not depend on the threads.
"""

from __future__ import annotations

import numpy as np

from ..jit import njit

# random swaps of one kick, at most (and at most a quarter of the tasks): on the nodes of the 2^20-task
# stencil, in the same 1.5-1.7 s on two threads, 2 swaps left J 7.92e7, 4 7.90e7, 12 7.897e7
KICK_SWAPS = 12


@njit(cache=True, nogil=True)
def _random(state) -> np.uint64:
    """The next number of a splitmix64 stream kept in ``state[0]``."""
    state[0] += np.uint64(0x9e3779b97f4a7c15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def _rebuild(ptr, nbr, wt, k, mine, conn, members, slot, fill):
    """The weight of every task to every child (``conn``) and the children's
    member lists, from ``mine``."""
    conn[:k, :] = 0.0
    fill[:] = 0
    for a in range(k):
        j = mine[a]
        members[j, fill[j]] = a
        slot[a] = fill[j]
        fill[j] += 1
        for e in range(ptr[a], ptr[a + 1]):
            conn[nbr[e], j] += wt[e]


@njit(cache=True, nogil=True)
def _gain(ptr, nbr, wt, mine, conn, a, c):
    """The cut removed by swapping tasks ``a`` and ``c`` (different children)."""
    big_a, big_c = mine[a], mine[c]
    g = conn[a, big_c] - conn[a, big_a] + conn[c, big_a] - conn[c, big_c]
    for e in range(ptr[a], ptr[a + 1]):
        if nbr[e] == c:
            g -= 2.0 * wt[e]
    return g


@njit(cache=True, nogil=True)
def _swap(ptr, nbr, wt, mine, conn, members, slot, a, c):
    big_a, big_c = mine[a], mine[c]
    for e in range(ptr[a], ptr[a + 1]):
        conn[nbr[e], big_a] -= wt[e]
        conn[nbr[e], big_c] += wt[e]
    for e in range(ptr[c], ptr[c + 1]):
        conn[nbr[e], big_c] -= wt[e]
        conn[nbr[e], big_a] += wt[e]
    members[big_a, slot[a]], members[big_c, slot[c]] = c, a
    slot[a], slot[c] = slot[c], slot[a]
    mine[a], mine[c] = big_c, big_a


@njit(cache=True, nogil=True)
def _descend(ptr, nbr, wt, k, mine, conn, members, slot, fill, log, n_log, seen, stamp, to_a):
    """Swaps until none gains: each task in turn with its best partner in
    the children it has traffic to (each child once: ``seen`` holds the
    ``stamp`` of the task that last looked at it), passes over all tasks
    until one swaps none.  On the nodes of 64 tasks this beat a queue of
    the tasks next to the last swaps: it found more per evaluation but
    took 2.5 times as long per evaluation.  Swaps are written to ``log``
    from ``n_log`` and stop when it is full (a negative ``n_log``: not
    written, no end).  Returns (cut removed, evaluations, swaps logged)."""
    removed, evaluations = 0.0, 0
    improved = True
    while improved:
        improved = False
        for a in range(k):
            big_a = mine[a]
            stamp[0] += 1
            best, best_gain = -1, 1e-9
            for e in range(ptr[a], ptr[a + 1]):
                to_a[nbr[e]] += wt[e]
            for e in range(ptr[a], ptr[a + 1]):
                big_c = mine[nbr[e]]
                if big_c == big_a or seen[big_c] == stamp[0]:
                    continue
                seen[big_c] = stamp[0]
                out = conn[a, big_c] - conn[a, big_a]  # _gain, with a's side and its traffic to c at hand
                for s in range(fill[big_c]):
                    c = members[big_c, s]
                    g = out + conn[c, big_a] - conn[c, big_c] - 2.0 * to_a[c]
                    evaluations += 1
                    if g > best_gain:
                        best, best_gain = c, g
            for e in range(ptr[a], ptr[a + 1]):
                to_a[nbr[e]] = 0.0
            if best >= 0 and n_log < log.shape[0]:
                _swap(ptr, nbr, wt, mine, conn, members, slot, a, best)
                n_log = _logged(log, n_log, a, best)
                removed += best_gain
                improved = True
    return removed, evaluations, n_log


@njit(cache=True, nogil=True)
def _logged(log, n_log, a, c):
    if 0 <= n_log < log.shape[0]:
        log[n_log, 0], log[n_log, 1] = a, c
    return n_log + 1


@njit(cache=True, nogil=True)
def improve_split(ptr, nbr, wt, k, mine, m, max_work, seed):
    """``mine`` (the child, 0..m-1, of each of the ``k`` tasks of a local
    CSR ``ptr``/``nbr``/``wt``) improved in place by the module's search
    within ``max_work`` evaluations; the children keep their sizes.
    Returns the cut weight removed."""
    cap = 1
    fill = np.zeros(m, dtype=np.int64)
    for a in range(k):
        fill[mine[a]] += 1
    for j in range(m):
        cap = max(cap, fill[j])
    conn = np.zeros((k, m))
    members = np.empty((m, cap), dtype=np.int64)
    slot = np.empty(k, dtype=np.int64)
    _rebuild(ptr, nbr, wt, k, mine, conn, members, slot, fill)
    seen, stamp = np.full(m, -1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    to_a = np.zeros(k)  # the traffic of the task being looked at to each task
    log = np.empty((4 * k, 2), dtype=np.int64)  # a round's swaps, undone in reverse when it is not kept
    removed, work, _ = _descend(ptr, nbr, wt, k, mine, conn, members, slot, fill, log, -(1 << 62), seen,
                                stamp, to_a)  # the first descent is never undone: not logged
    work += k * m
    state = np.array([np.uint64(seed)], dtype=np.uint64)
    total, kept = removed, removed  # the cut removed now, and by the best split
    kick = max(min(KICK_SWAPS, k // 4), 1)
    while work < max_work:
        n_log = 0
        for _ in range(kick):
            a = np.int64(_random(state) % np.uint64(k))
            if ptr[a + 1] == ptr[a]:
                continue
            c = nbr[ptr[a] + np.int64(_random(state) % np.uint64(ptr[a + 1] - ptr[a]))]
            if mine[a] != mine[c]:
                total += _gain(ptr, nbr, wt, mine, conn, a, c)
                _swap(ptr, nbr, wt, mine, conn, members, slot, a, c)
                n_log = _logged(log, n_log, a, c)
        removed, evaluations, n_log = _descend(ptr, nbr, wt, k, mine, conn, members, slot, fill, log, n_log, seen,
                                               stamp, to_a)
        total += removed
        work += evaluations + n_log + kick  # the kick's draws count: no task may have a partner
        if total >= kept - 1e-9:  # not worse: kept (a plateau is walked)
            kept = total
        else:  # back to the best split: the round's swaps undone
            total = kept
            for i in range(n_log - 1, -1, -1):
                _swap(ptr, nbr, wt, mine, conn, members, slot, log[i, 0], log[i, 1])
    return kept
