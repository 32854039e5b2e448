"""Greedy growing along the tree as a construction of its own (``grow``).

For instances too large for any partitioner in the time given (2^24 tasks:
KaMinPar's top cut alone took 389 s on one core), compiled passes: the
blocks of the top level's subtrees grown one after the other over the
whole graph (``growing.growth_order``), each block grown into its
subtree's children where the time allows (``growing.grow_split``), and
the PEs taken in the order the tasks were grown.
"""

from __future__ import annotations

import numpy as np

from ...cores import default_workers
from ...deadline import Deadline
from ..registry import register
from .growing import grow_split, growth_order
from .multisection import grow_seconds, task_counts


@register("grow", "greedy graph growing along the tree, one task per PE: the top level's subtrees "
                  "filled one after the other by growing over the whole graph, each subtree's tasks "
                  "grown into its children where the time allows, PEs in the order of growth; "
                  "compiled O(m log m) passes for the largest instances")
def grow(graph, topology, *, eps=None, deadline=None, **_):
    """The construction for instances too large for any partitioner in the
    time given: blocks for the subtrees of the first splitting node
    (``growth_order``), each block grown into the subtree's children
    (``growing.grow_split``, where the ``deadline`` allows its price), and
    the tasks of each on its PEs in the order they were grown, so tasks
    placed one after the other, mostly neighbours, share the lower levels
    (PEs in the tree's leaf order).  On a scrambled 2-D stencil onto
    4:16:16384 the second split lowers J by 3 %.  Growing cannot be cut:
    where the deadline does not allow its price, the given order is
    returned."""
    n, k = graph.n, topology.n_pes
    if n > k:
        raise ValueError(f"method grow places one task per PE: {n} tasks onto {k} PEs "
                         "(use multisection or auto for several tasks per PE)")
    deadline = Deadline.of(deadline)
    nnz = graph.symmetric.nnz
    if not deadline.allows(grow_seconds(n, nnz)):
        return np.arange(n, dtype=np.int64)
    children = topology.children(topology.splitting_node())
    if children.size == 0:  # a single PE
        return np.zeros(n, dtype=np.int64)
    sizes = task_counts(n, topology.leaf_stop[children] - topology.leaf_start[children])
    order = growth_order(graph.symmetric, sizes)
    # where the tree splits below the top level: each subtree's children (a PE child: itself)
    if np.any(np.diff(topology.child_ptr)[children] > 0) and deadline.allows(_PER_SPLIT_ENTRY * (n + nnz)):
        below = [topology.children(topology.splitting_node(int(c))) for c in children]
        below = [kids if kids.size else children[i:i + 1] for i, kids in enumerate(below)]
        counts = [task_counts(size, topology.leaf_stop[kids] - topology.leaf_start[kids])
                  for size, kids in zip(sizes.tolist(), below)]
        split = grow_split(graph.symmetric, np.split(order, np.cumsum(sizes)[:-1]), counts, default_workers())
        offsets = np.cumsum([kids.size for kids in below]) - [kids.size for kids in below]
        part = np.concatenate([offset + child for offset, child in zip(offsets.tolist(), split)])
        order = order[np.argsort(part, kind="stable")]  # by the subtrees' children, each in the order of growth
        children = np.concatenate(below)
        sizes = np.bincount(part, minlength=children.size)
    pe_of_task = np.empty(n, dtype=np.int64)
    first = np.cumsum(sizes) - sizes  # where each part begins in the order
    pe_of_task[order] = np.repeat(topology.leaf_start[children] - first, sizes) + np.arange(n)
    return pe_of_task


_PER_SPLIT_ENTRY = 1.5e-7  # grow_split of the top level's blocks, per task and adjacency entry (2^20 tasks in
                           # 16384 blocks of 64: 0.65 s, 2^24: 8.9 s on an idle core)
