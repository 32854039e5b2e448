"""Move refinement for many tasks per PE (label propagation on the mapping).

Schulz & Traff's swap search is "also usable for many-to-one mappings as
moves under the balance constraint": here a task moves alone to another PE
when that lowers J and the PE stays within its capacity
(L_max = floor((1 + eps) * ceil(c(V) / k))).  Candidate PEs are those of the
task's neighbours (a task gains only by coming closer to a neighbour) and,
when such a PE is full, the roomiest PE of the smallest subtree around it
that has room (found in O(depth * arity) from the most room below every
node, kept up to date after each move).  With distances that grow towards
the root no other PE can be better, so a pass without moves leaves a
mapping no single feasible move improves.

Gains are exact and cost O(deg(u) * depth) per task on a tree: the
neighbours' weights are accumulated on the ancestors of their PEs
(``acc[node]`` = weight of u's neighbours placed below ``node``), then the
cost of u on any PE q is

    sum over depths d of (acc[anc_d(q)] - acc[anc_{d+1}(q)]) * dist(anc_d(q)),

O(depth) per candidate, from the tree's own ancestor table: no k x k
matrix.  A pass visits every task once in random order and applies each
improving move at once (sequential label propagation, compiled:
``_kernels.move_pass``); passes repeat until one gains less than ``min_gain``
of J.  One pass is O(m * depth), far cheaper than a swap pass over N_C^d
balls (measured in benchmarks/quality_peers.py --only-many), which is what
lets auto afford more multisection starts many-to-one.
"""

from __future__ import annotations

import time

import numpy as np

from ...cost import mapping_cost
from ...deadline import Deadline
from ...graph import CommGraph
from ...mapping import DEFAULT_EPS, balance_report
from ...topology import Topology
from .swaps import RefineStats

MIN_GAIN = 1e-4      # stop when a pass lowers J by less than this fraction


def _tree_arrays(topology: Topology):
    """(parent, child_ptr, child_idx, leaf_of_pe, leaf_pe) as int64 for the kernel."""
    leaf_pe = np.full(topology.n_nodes, -1, dtype=np.int64)
    leaf_pe[topology.leaf_of_pe] = np.arange(topology.n_pes)
    return tuple(np.ascontiguousarray(a, dtype=np.int64) for a in
                 (topology.parent, topology.child_ptr, topology.child_idx, topology.leaf_of_pe, leaf_pe))


def _room(topology: Topology, cap: np.ndarray, load: np.ndarray) -> np.ndarray:
    """Most room (capacity - load) of a PE below every node."""
    room = np.full(topology.n_nodes, -np.inf)
    room[topology.leaf_of_pe] = cap - load
    depth, parent = topology.node_depth, topology.parent
    for d in range(topology.max_depth, 0, -1):
        nodes = np.flatnonzero(depth == d)
        np.maximum.at(room, parent[nodes], room[nodes])
    return room

def loads_and_capacity(graph: CommGraph, topology, pe_of_task, eps: float | None):
    """Task loads and per-PE capacity.  Many-to-one: vertex weights and L_max
    for ``eps`` (default 3%), never below a PE's load in ``pe_of_task`` (a
    start that breaks L_max is not made worse).  One-to-one (``eps`` None
    and no more tasks than PEs): one task per PE, so moves go to free PEs."""
    k = topology.n_pes
    if eps is None and graph.n <= k:
        return np.ones(graph.n), np.ones(k)
    vw = np.asarray(graph.vertex_weights, dtype=np.float64)
    e = DEFAULT_EPS if eps is None else eps
    l_max = balance_report(np.zeros(0, dtype=np.int64), vw, k, e)["L_max"]
    load = np.bincount(pe_of_task, weights=vw, minlength=k)
    return vw, np.maximum(np.full(k, float(l_max)), load)


def refine_moves(graph: CommGraph, topology: Topology, pe_of_task, *, eps: float | None = None,
                 seed: int = 0, max_passes: int | None = None, deadline: Deadline | None = None,
                 min_gain: float = MIN_GAIN):
    """Move local search on a tree topology; returns ``(pe_of_task, RefineStats)``
    (``swaps`` counts moves).  ``deadline`` is checked between passes (one
    pass is O(m depth))."""
    from ._kernels import move_pass
    from .kernel import tree_oracle

    if not isinstance(topology, Topology):
        raise ValueError("move refinement needs a tree topology (hierarchy, hwloc or tleaf)")
    start = time.perf_counter()
    deadline = Deadline.of(deadline)
    pos = np.asarray(pe_of_task, dtype=np.int64).copy()
    adj = graph.symmetric
    indptr, indices = adj.indptr.astype(np.int64), adj.indices.astype(np.int64)
    w = np.asarray(adj.data, dtype=np.float64)
    vw, cap = loads_and_capacity(graph, topology, pos, eps)
    load = np.bincount(pos, weights=vw, minlength=topology.n_pes)
    paths, dist_ext = tree_oracle(topology)
    tree = _tree_arrays(topology)
    room = _room(topology, cap, load)
    acc = np.zeros(dist_ext.size, dtype=np.float64)
    stamp = np.zeros(topology.n_pes, dtype=np.int64)
    j = float(mapping_cost(graph, topology, pos))
    stats = RefineStats(j_start=j)
    tol = 1e-12 * max(j, 1.0)
    rng = np.random.default_rng(seed)
    tick = 0
    while (max_passes is None or stats.passes < max_passes) and not deadline.expired():
        stats.passes += 1
        moves, change, tick = move_pass(indptr, indices, w, pos, paths, dist_ext,
                                        rng.permutation(graph.n).astype(np.int64), vw, load, cap,
                                        tree, room, acc, stamp, tick, tol)
        stats.evaluated += graph.n
        stats.swaps += moves
        j += change
        if moves == 0 or -change < min_gain * max(j, 1e-300):
            break
    stats.j_end = float(mapping_cost(graph, topology, pos))
    stats.seconds = time.perf_counter() - start
    return pos, stats


def move_refine(graph: CommGraph, topology: Topology, pe_of_task, *, eps: float | None = None,
                seed: int = 0, deadline: Deadline | None = None, **_) -> np.ndarray:
    """``pe_of_task`` improved by single-task moves within the PE capacities."""
    pe, _ = refine_moves(graph, topology, pe_of_task, eps=eps, seed=seed, deadline=deadline)
    return pe
