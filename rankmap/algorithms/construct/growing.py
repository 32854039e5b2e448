"""Greedy graph growing of many small sub-problems at once (compiled).

Below the top cuts of a large instance a multisection has thousands of
small sub-problems: at 2^20 tasks on 4:16:16384, 16384 nodes of 64 tasks
each to split into 16 groups of 4.  A KaHIP fast call on such a node took
3.8 ms (load 8 on the 2-core machine), a minute for 16384, most of it the
call, not the split; growing all 2048 nodes of a 2^17-task stencil took
0.11 s, and under the same KaMinPar top cut left J 0.5 % above KaMinPar on
every node (28 s).  Those cuts cost 10 and 1 against 100 between nodes,
and the refinement that follows sees them.

Growing (Karypis & Kumar's GGGP, the initial partitioner of METIS): the
children of a sub-problem are filled one after the other; a child starts
from the free task with the least traffic to the other free tasks (the
rim of what is left) and takes, until it is full, the free task whose
traffic to the child minus its traffic to the other free tasks is
largest.  Ties go to the task that comes first, so the result is
deterministic; the sub-problems of a call are independent and run on
threads in chunks (the kernel releases the GIL).  Each grown split can
then be improved by an iterated local search of swaps
(``split_search.py``), within a work bound per task.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...heap_kernel import pop, push
from ..jit import njit
from .split_search import improve_split  # compiled into _grow: numba's cache of _grow keys on this file alone


@njit(cache=True, nogil=True)
def _grow(indptr, indices, w, tasks, sub_ptr, sizes, size_ptr, at, child, search_work):
    """For each sub-problem i: its tasks ``tasks[sub_ptr[i]:sub_ptr[i + 1]]``
    into children of the sizes ``sizes[size_ptr[i]:size_ptr[i + 1]]``
    (summing to the task count); ``child[t]`` gets the child's index, and
    ``at[t]`` is where task t stands in ``tasks`` (-1: in none).  A
    sub-problem is first copied into a small CSR of its own (local ids in
    task order): with scrambled ids every look-up in an array of n tasks
    is a cache miss, so the scans for the best task run on the copy."""
    most, entries = 0, 0  # the most tasks and adjacency entries of one sub-problem: room for its copy
    for i in range(sub_ptr.size - 1):
        most = max(most, sub_ptr[i + 1] - sub_ptr[i])
        here = 0
        for a in range(sub_ptr[i], sub_ptr[i + 1]):
            here += indptr[tasks[a] + 1] - indptr[tasks[a]]
        entries = max(entries, here)
    ptr = np.zeros(most + 1, dtype=np.int64)
    nbr, wt = np.empty(entries, dtype=np.int64), np.empty(entries)
    mine = np.empty(most, dtype=np.int64)
    to_child, to_free = np.empty(most), np.empty(most)
    for i in range(sub_ptr.size - 1):
        lo, hi = sub_ptr[i], sub_ptr[i + 1]
        k = hi - lo
        fill = 0
        for a in range(k):
            t = tasks[lo + a]
            s = 0.0
            for e in range(indptr[t], indptr[t + 1]):
                x = at[indices[e]] - lo
                if x < 0 or x >= k:
                    continue  # a task of another sub-problem
                nbr[fill] = x
                wt[fill] = w[e]
                fill += 1
                s += w[e]
            ptr[a + 1] = fill
            to_free[a] = s
            mine[a] = -1
        m = size_ptr[i + 1] - size_ptr[i]
        for j in range(m):
            if j == m - 1:  # the last child takes what is left
                for a in range(k):
                    if mine[a] < 0:
                        mine[a] = j
                break
            to_child[:k] = 0.0
            for _ in range(sizes[size_ptr[i] + j]):
                best, best_gain = -1, -np.inf
                for a in range(k):
                    if mine[a] < 0 and to_child[a] - to_free[a] > best_gain:
                        best, best_gain = a, to_child[a] - to_free[a]
                mine[best] = j
                for e in range(ptr[best], ptr[best + 1]):
                    x = nbr[e]
                    if mine[x] < 0:
                        to_free[x] -= wt[e]
                        to_child[x] += wt[e]
        if search_work > 0 and m > 1:
            improve_split(ptr, nbr, wt, k, mine, m, search_work * k, tasks[lo])
        for a in range(k):
            child[tasks[lo + a]] = mine[a]


def grow_split(adj, groups: list[np.ndarray], sizes: list[np.ndarray], threads: int = 1,
               search_work: float = 0.0) -> list[np.ndarray]:
    """The child index of every task of every sub-problem: ``groups[i]``
    (task ids, rows of the symmetric CSR ``adj``) into children of
    ``sizes[i]`` tasks, by greedy growing (module docstring) inside the
    sub-problem, each split then searched with ``search_work`` swap
    evaluations per task (``split_search.improve_split``; 0: none).
    Sub-problems run in ``threads`` chunks at once; the result does not
    depend on the count."""
    if not groups:
        return []
    n = adj.shape[0]
    tasks = np.concatenate(groups).astype(np.int64, copy=False)
    sub_ptr = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum([g.size for g in groups], out=sub_ptr[1:])
    flat_sizes = np.concatenate(sizes).astype(np.int64, copy=False)
    size_ptr = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum([s.size for s in sizes], out=size_ptr[1:])
    at = np.full(n, -1, dtype=np.int64)
    at[tasks] = np.arange(tasks.size)
    child = np.full(n, -1, dtype=np.int64)
    indptr, indices = np.asarray(adj.indptr, dtype=np.int64), np.asarray(adj.indices, dtype=np.int64)
    w = np.asarray(adj.data, dtype=np.float64)
    cuts = np.linspace(0, len(groups), max(min(int(threads), len(groups)), 1) + 1).astype(np.int64)

    def run(c):
        a, b = cuts[c], cuts[c + 1]
        _grow(indptr, indices, w, tasks, sub_ptr[a:b + 1], flat_sizes, size_ptr[a:b + 1], at, child,
              float(search_work))

    if cuts.size > 2:
        with ThreadPoolExecutor(cuts.size - 1) as pool:
            list(pool.map(run, range(cuts.size - 1)))
    else:
        run(0)
    return [child[g] for g in groups]


_MIX = np.uint64(0x9e3779b97f4a7c15)    # odd: x -> x * _MIX is a bijection of the 64-bit integers ...
_UNMIX = np.uint64(0xf1de83e19937733d)  # ... and this its inverse (x * _MIX * _UNMIX == x, mod 2^64)


@njit(cache=True)
def _mix(x):
    """A task's place among equal gains: a scrambled id, so that ties do not
    follow the numbering (in row-major order they grew 1 x 64 strips)."""
    return np.uint64(x) * _MIX


@njit(cache=True)
def _unmix(v):
    return np.int64(v * _UNMIX)


@njit(cache=True)
def _doubled(keys, vals):
    """A full heap's arrays with room for as many entries again."""
    more_keys, more_vals = np.empty(2 * keys.size), np.empty(2 * keys.size, dtype=np.uint64)
    more_keys[:keys.size], more_vals[:keys.size] = keys, vals
    return more_keys, more_vals


@njit(cache=True)
def _grow_blocks(indptr, indices, w, sizes, block, order):
    """Blocks 0, 1, ... of ``sizes[b]`` tasks grown one after the other over
    the whole graph; ``block[t]`` gets the block of every task and
    ``order`` the tasks in the order they were placed.  What the
    growing reads of a neighbour (its traffic to the placed tasks and to
    the block, its degree, whether it is placed) shares one row of
    ``state``: with scrambled ids each neighbour is a cache miss, one
    instead of four.  A block starts from the next free task of a fixed
    stride through the ids (a scattered start, whatever the numbering)."""
    n = indptr.size - 1
    state = np.zeros((n, 4))  # traffic to the placed tasks, to the block being grown; degree; placed (1)
    for t in range(n):
        for e in range(indptr[t], indptr[t + 1]):
            state[t, 2] += w[e]
    stride = np.int64(0.6180339887 * n) | 1  # coprime to n: i * stride % n visits every task once
    while np.gcd(stride, n) != 1:
        stride += 2
    # (-gain, scrambled task) of the free tasks next to the block being grown
    keys, vals, n_heap = np.empty(1024), np.empty(1024, dtype=np.uint64), 0
    touched = np.empty(n, dtype=np.int64)
    scan = 0
    placed = 0
    for b in range(sizes.size):
        n_touched = 0
        for _ in range(sizes[b]):
            t = -1
            while n_heap:
                key, v, n_heap = pop(keys, vals, n_heap)
                x = _unmix(v)
                if state[x, 3] == 0.0 and -key == 2.0 * state[x, 1] + state[x, 0] - state[x, 2]:
                    t = x
                    break
            while t < 0:  # nothing free touches the block: a new start
                x = scan * stride % n
                if state[x, 3] == 0.0:
                    t = x
                scan += 1
            block[t] = b
            order[placed] = t
            placed += 1
            state[t, 3] = 1.0
            for e in range(indptr[t], indptr[t + 1]):
                x = indices[e]
                if state[x, 3] != 0.0:
                    continue
                state[x, 0] += w[e]
                if state[x, 1] == 0.0:
                    touched[n_touched] = x
                    n_touched += 1
                state[x, 1] += w[e]
                # the gain: traffic into the block minus traffic to the tasks still free
                if n_heap == keys.size:
                    keys, vals = _doubled(keys, vals)
                n_heap = push(keys, vals, n_heap, -(2.0 * state[x, 1] + state[x, 0] - state[x, 2]), _mix(x))
        for i in range(n_touched):
            state[touched[i], 1] = 0.0
        n_heap = 0


def grow_blocks(adj, sizes) -> np.ndarray:
    """The block of every task of the symmetric CSR ``adj``: blocks of
    ``sizes[b]`` tasks (summing to the task count) grown one after the other
    over the whole graph, O(m log m).  Each block starts from a scattered
    free task and takes the free neighbour with the largest gain (traffic
    into the block minus traffic to the tasks still free, GGGP's), ties in
    a scrambled order.  The split a top cut falls back to when the deadline
    leaves no time for a partitioner: on a 2-D stencil of 2^20 tasks into
    16384 blocks of 64 it took 0.7 s, its cut 1.4 x the regular tiling's
    (KaMinPar's 1.2 x, the given order's 8 x; starting each block where the
    blocks before enclose most, 1.7 x, and on a 3-D stencil 1.3 x this)."""
    return _grown(adj, sizes)[0]


def growth_order(adj, sizes) -> np.ndarray:
    """The tasks of ``adj`` in the order ``grow_blocks`` places them: block
    after block, and inside a block each task next to those placed just
    before it."""
    return _grown(adj, sizes)[1]


def _grown(adj, sizes) -> tuple[np.ndarray, np.ndarray]:
    n = adj.shape[0]
    sizes = np.asarray(sizes, dtype=np.int64)
    if int(sizes.sum()) != n:
        raise ValueError(f"block sizes sum to {int(sizes.sum())}, not the {n} tasks")
    block = np.full(n, -1, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    _grow_blocks(np.asarray(adj.indptr, dtype=np.int64), np.asarray(adj.indices, dtype=np.int64),
                 np.asarray(adj.data, dtype=np.float64), sizes, block, order)
    return block, order
