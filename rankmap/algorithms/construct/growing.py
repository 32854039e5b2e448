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
(``_kernels.improve_split``), within a work bound per task.  The loops
are compiled (``_kernels.grow``, ``_kernels.grow_blocks``).

Blocks grown over the whole graph (``grow_blocks``, the top cut a deadline
refused and ``tree_growing``'s construction) grow one after the other, on
one core by nature; ``grow_and_split`` grows them in stretches and splits
each stretch on the other cores while the next grows.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...deadline import Deadline


def grow_split(adj, groups: list[np.ndarray], sizes: list[np.ndarray], threads: int = 1,
               search_work: float = 0.0, deadline: Deadline | None = None) -> list[np.ndarray]:
    """The child index of every task of every sub-problem: ``groups[i]``
    (task ids, rows of the symmetric CSR ``adj``) into children of
    ``sizes[i]`` tasks (``split_grown`` on the sub-problems laid end to
    end)."""
    if not groups:
        return []
    tasks = np.concatenate(groups)
    child = split_grown(adj, tasks, _offsets([g.size for g in groups]), np.concatenate(sizes),
                        _offsets([s.size for s in sizes]), threads, search_work, deadline)
    return np.split(child, np.cumsum([g.size for g in groups])[:-1])


def split_grown(adj, tasks: np.ndarray, sub_ptr: np.ndarray, sizes: np.ndarray, size_ptr: np.ndarray,
                threads: int = 1, search_work: float = 0.0, deadline: Deadline | None = None) -> np.ndarray:
    """The child index of ``tasks[j]`` for every j: sub-problem i, the tasks
    ``tasks[sub_ptr[i]:sub_ptr[i + 1]]`` (rows of the symmetric CSR
    ``adj``), split into children of ``sizes[size_ptr[i]:size_ptr[i + 1]]``
    tasks by greedy growing (module docstring), each split then searched
    with ``search_work`` swap evaluations per task
    (``_kernels.improve_split``; 0: none).  Flat arrays, so that a
    hundred thousand sub-problems cost no Python object each.
    Sub-problems run in chunks on ``threads`` threads; the result does not
    depend on the count.  A chunk that starts after the ``deadline`` is
    grown without the search (a cut: the splits searched so far kept).
    """
    runs = _SplitRuns(adj, np.asarray(tasks, dtype=np.int64), sub_ptr, sizes, size_ptr, search_work, deadline)
    runs.place(0, runs.tasks.size)
    runs.split(0, runs.sub_ptr.size - 1, threads)
    return runs.child[runs.tasks]


def grow_and_split(adj, sizes, counts: np.ndarray | None = None, count_ptr: np.ndarray | None = None,
                   threads: int = 1, search_work: float = 0.0,
                   deadline: Deadline | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """The tasks in the order ``grow_blocks`` grows them (block after block,
    each task next to those placed just before it) and, where ``counts``
    are given, the child index of every task in that order, each block
    split into children of ``counts[count_ptr[b]:count_ptr[b + 1]]`` tasks
    as ``split_grown`` splits: the same results as one after the other.
    The blocks are grown in stretches (``_kernels.BlockGrowth``); with
    several ``threads`` each stretch is split on the others while the next
    grows (the growing takes one thread by nature).  The ``deadline`` is
    checked between stretches: once it has passed, the tasks not grown
    follow in their given order, each block's cut into its children in
    that order (a cut: the blocks grown so far kept)."""
    from ._kernels import BlockGrowth

    n, sizes = adj.shape[0], _block_sizes(adj, sizes)
    order, block = np.empty(n, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    sub_ptr = _offsets(sizes)
    runs = None if counts is None else _SplitRuns(adj, order, sub_ptr, counts, count_ptr, search_work, deadline)
    growth = BlockGrowth(np.asarray(adj.indptr, dtype=np.int64), np.asarray(adj.indices, dtype=np.int64),
                         np.asarray(adj.data, dtype=np.float64))
    helpers = max(int(threads) - 1, 1)
    cuts = np.linspace(0, sizes.size, min(STRETCHES, sizes.size) + 1).astype(np.int64)
    with ThreadPoolExecutor(1) as pool:  # the splits, one stretch after the other, beside the growing
        pending = []
        for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            if deadline is not None and deadline.expired():
                _in_given_order(order, block, sub_ptr[a], runs)
                break
            growth.grow(sizes[a:b], block, order)
            if runs is not None:
                runs.place(sub_ptr[a], sub_ptr[b])
                pending.append(pool.submit(runs.split, a, b, helpers))
        for done in pending:
            done.result()
    return order, None if runs is None else runs.child[order]


def _in_given_order(order: np.ndarray, block: np.ndarray, start: int, runs) -> None:
    """The tasks not grown (``block`` -1) from position ``start`` of
    ``order`` on, in their given order, and (``runs``) each block's
    children filled in that order."""
    rest = np.flatnonzero(block < 0)
    order[start:] = rest
    if runs is None:
        return
    position = np.arange(start, order.size)
    first_child = np.searchsorted(np.cumsum(runs.sizes), position, side="right")  # children laid end to end
    owner = np.searchsorted(runs.sub_ptr, position, side="right") - 1
    runs.child[rest] = first_child - runs.size_ptr[owner]


STRETCHES = 64  # stretches of blocks grown before their split starts (the last one's split is not overlapped)
CHUNKS_PER_THREAD = 16  # chunks of a searched split under a deadline, per thread: the deadline checked between


class _SplitRuns:
    """The kernel's arrays for splitting the sub-problems laid end to end
    in ``tasks`` (``split_grown``), some runs of them at a time: where each
    task stands (``at``, set by ``place`` once its sub-problem's tasks are
    known) and each task's child (``child``), both shared by all runs."""

    def __init__(self, adj, tasks, sub_ptr, sizes, size_ptr, search_work: float, deadline: Deadline | None):
        n = adj.shape[0]
        self.indptr = np.asarray(adj.indptr, dtype=np.int64)
        self.indices = np.asarray(adj.indices, dtype=np.int64)
        self.w = np.asarray(adj.data, dtype=np.float64)
        self.tasks = tasks
        self.sub_ptr, self.size_ptr = np.asarray(sub_ptr, dtype=np.int64), np.asarray(size_ptr, dtype=np.int64)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.search_work, self.deadline = float(search_work), deadline
        self.at = np.full(n, -1, dtype=np.int64)
        self.child = np.full(n, -1, dtype=np.int64)

    def place(self, lo: int, hi: int) -> None:
        """Positions ``lo`` to ``hi`` of ``tasks`` are known."""
        self.at[self.tasks[lo:hi]] = np.arange(lo, hi)

    def split(self, first: int, last: int, threads: int) -> None:
        """Sub-problems ``first`` to ``last`` split, in chunks on ``threads``
        threads (more chunks under a deadline, which is checked between
        them)."""
        from ._kernels import grow

        count = last - first
        threads = max(min(int(threads), count), 1)
        searched = self.deadline is not None and self.search_work > 0
        chunks = min(CHUNKS_PER_THREAD * threads, count) if searched else threads
        cuts = first + np.linspace(0, count, max(chunks, 1) + 1).astype(np.int64)

        def run(c):
            a, b = cuts[c], cuts[c + 1]
            work = 0.0 if searched and self.deadline.expired() else self.search_work
            grow(self.indptr, self.indices, self.w, self.tasks, self.sub_ptr[a:b + 1], self.sizes,
                 self.size_ptr[a:b + 1], self.at, self.child, work)

        if threads > 1:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(run, range(cuts.size - 1)))
        else:
            for c in range(cuts.size - 1):
                run(c)


def _block_sizes(adj, sizes) -> np.ndarray:
    """``sizes`` as int64, checked to sum to the task count."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if int(sizes.sum()) != adj.shape[0]:
        raise ValueError(f"block sizes sum to {int(sizes.sum())}, not the {adj.shape[0]} tasks")
    return sizes


def _offsets(counts) -> np.ndarray:
    """Where each of the runs of ``counts`` entries begins, and the end."""
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


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
    n, sizes = adj.shape[0], _block_sizes(adj, sizes)
    from ._kernels import grow_blocks as grow

    block = np.full(n, -1, dtype=np.int64)
    grow(np.asarray(adj.indptr, dtype=np.int64), np.asarray(adj.indices, dtype=np.int64),
         np.asarray(adj.data, dtype=np.float64), sizes, block, np.empty(n, dtype=np.int64))
    return block
