"""Pairwise re-bisection of the top-level subtrees (one-to-one, uniform trees).

A peer's better mapping can differ from auto's by one large connected
group of tasks traded between two nodes (add32/256 against Mt-KaHyPar,
``benchmarks/quality_witness.py add32 4 --peer mtkahypar``): a better cut between
two nodes that neither swaps nor the V-cycles' FM exchanges (clusters of at
most a quarter of a node, loads drifting by a few tasks) reach.  A strong bisection of the two
nodes' tasks together does: KaHIP on the union with a little slack
(SLACK), the split then brought back to the old counts exactly, the tasks that
stay on their node keep their PEs, the others take the freed ones, and a
swap refinement around the union settles them.  Between two children of
the root every other node is equally far away, so the cut between the two
is the whole top-level gain.  A new split is kept only when J drops.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...cost import mapping_cost
from ...deadline import Deadline
from ...graph import CommGraph
from ...topology import Topology
from ..construct.partition import partition_graph
from ..construct.slots import place_in_leaves
from .swaps import refine_around

SLACK = 0.03  # imbalance KaHIP may use on a pair before the exact counts are restored: on auto's mapping of
              # add32/256 the heaviest pair re-bisected with it gave J 0.951-0.967 x (strong, eco, fast, most
              # seeds), with exact counts only strong found a gain (0.966 x)


def top_subtree_size(topology: Topology) -> int | None:
    """PEs under each child of the root of a uniform tree with at least two
    levels, else None (nothing to re-bisect)."""
    uniform = topology.uniform_hierarchy()
    if uniform is None or len(uniform[0]) < 2 or uniform[0][-1] < 2:
        return None
    return int(np.prod(uniform[0][:-1]))


def subtree_pairs(graph: CommGraph, pe_of_task: np.ndarray, size: int) -> list[tuple[int, int]]:
    """Pairs of top-level subtrees that exchange traffic, heaviest first."""
    sym = graph.symmetric
    node = np.asarray(pe_of_task, dtype=np.int64) // size
    rows = np.repeat(np.arange(graph.n), np.diff(sym.indptr))
    a, b = node[rows], node[sym.indices]
    cross = a < b
    pair_w = sp.coo_array((sym.data[cross], (a[cross], b[cross])),
                          shape=(int(node.max(initial=0)) + 1,) * 2).tocsr()
    pair_w.sum_duplicates()
    c = pair_w.tocoo()
    order = np.argsort(-c.data, kind="stable")
    return [(int(c.row[i]), int(c.col[i])) for i in order]


def _exact_split(adj: sp.csr_array, part: np.ndarray, count_b: int) -> np.ndarray:
    """``part`` (0/1) with exactly ``count_b`` ones: the surplus side gives up
    the tasks that lose least by crossing."""
    part = np.asarray(part, dtype=np.int64).copy()
    extra = int(part.sum()) - count_b
    if extra:
        src = 1 if extra > 0 else 0
        to_one = adj @ (part == 1).astype(np.float64)
        to_zero = adj @ (part == 0).astype(np.float64)
        loss = (to_one - to_zero) if src == 1 else (to_zero - to_one)
        tasks = np.flatnonzero(part == src)
        part[tasks[np.argsort(loss[tasks], kind="stable")[:abs(extra)]]] = 1 - src
    return part


def rebisect_pairs(graph: CommGraph, topology: Topology, pe_of_task, *, preset: str = "strong", seed: int = 0,
                   seeds: int = 1, eps: float = SLACK, max_pairs: int | None = None,
                   max_scans: int | None = None, deadline: Deadline | None = None) -> np.ndarray:
    """Re-bisect the tasks of the top-level subtree pairs (heaviest traffic
    first, at most ``max_pairs``) with KaHIP ``preset`` and imbalance
    ``eps``, ``seeds`` seeds from ``seed``, both orientations, and keep a
    split when J after a swap refinement around the pair's tasks (at most
    ``max_scans`` task scans per orientation) drops; never returns a higher
    J than ``pe_of_task``."""
    deadline = Deadline.of(deadline)
    pe = np.asarray(pe_of_task, dtype=np.int64).copy()
    size = top_subtree_size(topology)
    if size is None or graph.n > topology.n_pes:
        return pe
    j = mapping_cost(graph, topology, pe)
    pairs = subtree_pairs(graph, pe, size)
    for a, b in pairs[:max_pairs]:
        for s in range(seed, seed + seeds):
            if deadline.expired():
                return pe
            # the pair's tasks now: a kept split's refinement may have swapped some with other nodes
            node = pe // size
            union = np.flatnonzero((node == a) | (node == b))
            sub = sp.csr_array(graph.symmetric[union][:, union])
            count_b = int(np.count_nonzero(node[union] == b))
            part = partition_graph(sub, np.ones(union.size), np.array([union.size - count_b, count_b]), eps,
                                   preset=preset, seed=s)
            part = _exact_split(sub, part, count_b)
            base = pe
            for flip in (0, 1):
                if flip:  # the other orientation: the same cut with the halves' nodes exchanged
                    part = _exact_split(sub, 1 - part, count_b)
                leaf = base // size
                leaf[union] = np.where(part == 1, b, a)
                cand = place_in_leaves(leaf, size, topology.n_pes, base)
                cand, _, cj = refine_around(graph, topology, cand, union, seed=s, max_scans=max_scans,
                                             deadline=deadline)
                if cj < j * (1 - 1e-12):
                    pe, j = cand, cj
    return pe
