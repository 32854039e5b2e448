"""Greedy growing along the tree as a construction of its own (``grow``).

For instances too large for any partitioner in the time given (2^24 tasks:
KaMinPar's top cut alone took 389 s on one core), one compiled pass: the
blocks of the top level's subtrees grown one after the other over the
whole graph (``growing.growth_order``), each subtree's PEs taken in the
order its tasks were grown.
"""

from __future__ import annotations

import numpy as np

from ..registry import register
from .growing import growth_order
from .multisection import grow_seconds, task_counts


@register("grow", "greedy graph growing along the tree, one task per PE: the top level's subtrees "
                  "filled one after the other by growing over the whole graph, each subtree's PEs in "
                  "the order of growth; one compiled O(m log m) pass for the largest instances")
def grow(graph, topology, *, eps=None, deadline=None, **_):
    """The construction for instances too large for any partitioner in the
    time given: blocks for the subtrees of the first splitting node
    (``growth_order``), and inside each the tasks on its PEs in the order
    they were grown, so tasks placed one after the other, mostly
    neighbours, share the lower levels (PEs in the tree's leaf order).
    On a scrambled 2-D stencil onto 4:16:16384 its J was 3 % above
    growing the groups of each node as well (``grow_split``), at no cost
    beyond the top level's growing.  The growing cannot be cut: where the
    ``deadline`` does not allow its price, the given order is returned."""
    n, k = graph.n, topology.n_pes
    if n > k:
        raise ValueError(f"method grow places one task per PE: {n} tasks onto {k} PEs "
                         "(use multisection or auto for several tasks per PE)")
    if deadline is not None and not deadline.allows(grow_seconds(n, graph.symmetric.nnz)):
        return np.arange(n, dtype=np.int64)
    node = topology.root
    while topology.children(node).size == 1:
        node = int(topology.children(node)[0])
    children = topology.children(node)
    if children.size == 0:  # a single PE
        return np.zeros(n, dtype=np.int64)
    starts = topology.leaf_start[children]
    sizes = task_counts(n, topology.leaf_stop[children] - starts)
    order = growth_order(graph.symmetric, sizes)
    pe_of_task = np.empty(n, dtype=np.int64)
    first = np.cumsum(sizes) - sizes  # where each block begins in the order
    pe_of_task[order] = np.repeat(starts - first, sizes) + np.arange(n)
    return pe_of_task
