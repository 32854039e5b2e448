"""Greedy growing along the tree as a construction of its own (``grow``).

For instances too large for any partitioner in the time given (2^24 tasks:
KaMinPar's top cut alone took 389 s on one core), compiled passes: the
blocks of the top level's subtrees grown one after the other over the
whole graph (``growing.grow_and_split``), each block grown into its
subtree's children and the split searched where the time allows
(``growing.split_grown``), and the PEs taken in the order the tasks were grown.
"""

from __future__ import annotations

import numpy as np

from ...cores import default_workers
from ...deadline import Deadline
from ..registry import register
from .growing import grow_and_split, split_grown
from .multisection import GROWN_SEARCH_WORK, grown_seconds, search_work_allowed, splitting_nodes, task_counts


@register("grow", "greedy graph growing along the tree, one task per PE: the top level's subtrees "
                  "filled one after the other by growing over the whole graph, each subtree's tasks "
                  "grown into its children where the time allows, PEs in the order of growth; "
                  "compiled O(m log m) passes for the largest instances")
def grow(graph, topology, *, eps=None, deadline=None, **_):
    """The construction for instances too large for any partitioner in the
    time given: blocks for the subtrees of the first splitting node grown
    one after the other, each block grown into the subtree's children and
    the split searched as far as the ``deadline`` pays, up to
    GROWN_SEARCH_WORK (``growing.grow_and_split``: with several cores
    beside the growing, which takes one; else after it,
    ``growing.split_grown``, where the deadline allows its price), and the
    tasks of each child on its PEs in the order they were grown, so tasks
    placed one after the other, mostly neighbours, share the lower levels
    (PEs in the tree's leaf order).  The growing stops where the deadline
    passes: the tasks not grown by then follow in their given order."""
    n, k = graph.n, topology.n_pes
    if n > k:
        raise ValueError(f"method grow places one task per PE: {n} tasks onto {k} PEs "
                         "(use multisection or auto for several tasks per PE)")
    deadline = Deadline.of(deadline)
    if deadline.expired():
        return np.arange(n, dtype=np.int64)
    children = topology.children(topology.splitting_node())
    if children.size == 0:  # a single PE
        return np.zeros(n, dtype=np.int64)
    sizes = task_counts(n, topology.leaf_stop[children] - topology.leaf_start[children])
    sym, threads = graph.symmetric, default_workers()
    below = bool(np.any(np.diff(topology.child_ptr)[children] > 0))  # the tree splits below the top level
    if below:  # each subtree's children (a PE child: itself)
        kids, kid_ptr = _children_below(topology, children)
        counts = _counts_below(sizes, topology.leaf_stop[kids] - topology.leaf_start[kids], kid_ptr)
    split = below and threads > 1 and deadline.allows(grown_seconds(n, 0.0, threads - 1))
    if split:  # on the other cores while the growing goes on: its time the growing's
        work = search_work_allowed(n, GROWN_SEARCH_WORK, threads - 1, deadline)
        order, child = grow_and_split(sym, sizes, counts, kid_ptr, threads, work, deadline)
    else:
        order, _ = grow_and_split(sym, sizes, deadline=deadline)
        split = below and deadline.allows(grown_seconds(n, 0.0, threads))
        if split:
            work = search_work_allowed(n, GROWN_SEARCH_WORK, threads, deadline)
            child = split_grown(sym, order, np.concatenate([[0], np.cumsum(sizes)]), counts, kid_ptr, threads,
                                work, deadline)
    if split:
        part = np.repeat(kid_ptr[:-1], sizes) + child  # every task's child, in the order of growth
        order = order[np.argsort(part, kind="stable")]  # by the subtrees' children, each in the order of growth
        children, sizes = kids, counts
    pe_of_task = np.empty(n, dtype=np.int64)
    first = np.cumsum(sizes) - sizes  # where each part begins in the order
    pe_of_task[order] = np.repeat(topology.leaf_start[children] - first, sizes) + np.arange(n)
    return pe_of_task


def _children_below(topology, children: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The children of every node of ``children`` where it splits (a PE:
    itself), laid end to end, and where each node's run begins (and the end)."""
    split = splitting_nodes(topology, children)
    count = topology.child_ptr[split + 1] - topology.child_ptr[split]
    leaf = count == 0
    count[leaf] = 1
    kid_ptr = np.concatenate([[0], np.cumsum(count)])
    owner = np.repeat(np.arange(children.size), count)
    at = np.where(leaf[owner], 0, topology.child_ptr[split][owner] + np.arange(kid_ptr[-1]) - kid_ptr[owner])
    return np.where(leaf[owner], children[owner], topology.child_idx[at]), kid_ptr


def _counts_below(sizes: np.ndarray, pes: np.ndarray, kid_ptr: np.ndarray) -> np.ndarray:
    """The tasks of each child: every node's ``sizes[i]`` tasks over its
    children (``pes``, runs of ``kid_ptr``) as ``task_counts`` shares them;
    a node with as many tasks as PEs fills every child (the one-to-one
    case, at once), the others computed once per distinct node."""
    counts = pes.copy()
    full = np.add.reduceat(pes, kid_ptr[:-1]) == sizes
    shared: dict = {}
    for i in np.flatnonzero(~full).tolist():
        lo, hi = kid_ptr[i], kid_ptr[i + 1]
        key = (int(sizes[i]), pes[lo:hi].tobytes())
        if key not in shared:
            shared[key] = task_counts(int(sizes[i]), pes[lo:hi])
        counts[lo:hi] = shared[key]
    return counts
