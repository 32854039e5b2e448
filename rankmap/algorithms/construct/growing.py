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
threads in chunks (the kernel releases the GIL).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..jit import njit


@njit(cache=True, nogil=True)
def _grow(indptr, indices, w, tasks, sub_ptr, sizes, size_ptr, sub_of, first_sub, child, to_child, to_free):
    """For each sub-problem i (global id ``first_sub + i``): its tasks
    ``tasks[sub_ptr[i]:sub_ptr[i + 1]]`` into children of the sizes
    ``sizes[size_ptr[i]:size_ptr[i + 1]]`` (summing to the task count);
    ``child[t]`` gets the child's index.  ``sub_of[t]`` names the
    sub-problem of every task (others: another value); ``to_child`` and
    ``to_free`` are work space indexed by task."""
    for i in range(sub_ptr.size - 1):
        me = first_sub + i
        lo, hi = sub_ptr[i], sub_ptr[i + 1]
        for a in range(lo, hi):
            t = tasks[a]
            child[t] = -1
            s = 0.0
            for e in range(indptr[t], indptr[t + 1]):
                if sub_of[indices[e]] == me:
                    s += w[e]
            to_free[t] = s
        m = size_ptr[i + 1] - size_ptr[i]
        for j in range(m):
            if j == m - 1:  # the last child takes what is left
                for a in range(lo, hi):
                    if child[tasks[a]] < 0:
                        child[tasks[a]] = j
                break
            for a in range(lo, hi):
                to_child[tasks[a]] = 0.0
            for _ in range(sizes[size_ptr[i] + j]):
                best, best_gain = -1, -np.inf
                for a in range(lo, hi):
                    t = tasks[a]
                    if child[t] < 0 and to_child[t] - to_free[t] > best_gain:
                        best, best_gain = t, to_child[t] - to_free[t]
                child[best] = j
                for e in range(indptr[best], indptr[best + 1]):
                    x = indices[e]
                    if sub_of[x] == me and child[x] < 0:
                        to_free[x] -= w[e]
                        to_child[x] += w[e]


def grow_split(adj, groups: list[np.ndarray], sizes: list[np.ndarray], threads: int = 1) -> list[np.ndarray]:
    """The child index of every task of every sub-problem: ``groups[i]``
    (task ids, rows of the symmetric CSR ``adj``) into children of
    ``sizes[i]`` tasks, by greedy growing (module docstring) inside the
    sub-problem.  Sub-problems run in ``threads`` chunks at once; the
    result does not depend on the count."""
    if not groups:
        return []
    n = adj.shape[0]
    tasks = np.concatenate(groups).astype(np.int64, copy=False)
    sub_ptr = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum([g.size for g in groups], out=sub_ptr[1:])
    flat_sizes = np.concatenate(sizes).astype(np.int64, copy=False)
    size_ptr = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum([s.size for s in sizes], out=size_ptr[1:])
    sub_of = np.full(n, -1, dtype=np.int64)
    sub_of[tasks] = np.repeat(np.arange(len(groups), dtype=np.int64), np.diff(sub_ptr))
    child = np.full(n, -1, dtype=np.int64)
    to_child, to_free = np.zeros(n), np.zeros(n)
    indptr, indices = np.asarray(adj.indptr, dtype=np.int64), np.asarray(adj.indices, dtype=np.int64)
    w = np.asarray(adj.data, dtype=np.float64)
    cuts = np.linspace(0, len(groups), max(min(int(threads), len(groups)), 1) + 1).astype(np.int64)

    def run(c):
        a, b = cuts[c], cuts[c + 1]
        _grow(indptr, indices, w, tasks, sub_ptr[a:b + 1], flat_sizes, size_ptr[a:b + 1], sub_of, a, child,
              to_child, to_free)

    if cuts.size > 2:
        with ThreadPoolExecutor(cuts.size - 1) as pool:
            list(pool.map(run, range(cuts.size - 1)))
    else:
        run(0)
    return [child[g] for g in groups]
