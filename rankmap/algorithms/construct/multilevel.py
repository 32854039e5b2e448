"""Integrated multilevel mapping (after Faraj, van der Grinten, Meyerhenke,
Traff, Schulz, "High-Quality Hierarchical Process Mapping", SEA 2020).

Swap refinement on the tasks stops in local optima that a better mapping
is only a *group exchange* away from: on fe_4elt2/512 VieM's mapping
differs from auto's by six coupled tasks of one node traded for six of
another (docs/methods.md); every single swap on the way loses.  A
multilevel scheme makes such exchanges moves of a coarse graph.

Targets.  One-to-one on a uniform hierarchy the coarse levels map onto the
tree without its innermost levels: for 4:16:k first onto the k nodes (a
leaf holds 64 tasks), then onto the groups of 4 cores.  Many-to-one the
target is the PEs themselves, capacity L_max.

V-cycle (on a mapping): (1) subtree swaps: for every depth of a uniform
tree the quotient graph of the subtrees' contents is swap-refined
one-to-one on the tree above; a subtree's tasks move with their offsets, so
gains are exact and loads never change.  (2) For each target, coarsest
first: heavy-edge matching (``coarsen.py``) merges only tasks in the same
target leaf of the current mapping, clusters at most a quarter of a leaf
(one-to-one) or L_max; on the way back every level is refined: one-to-one
by FM exchanges between sibling leaves under exact balance
(``refine/exchange.py``, the J gain there is the cut gain times the
parent's distance), many-to-one by moves and swaps under L_max
(``refine/moves.py``, ``refine/swaps.py``, gains from the O(1) tree
distance oracle).  (3) The task level: auto's one-to-one swap refinement,
or moves and swaps under L_max.  Cycles repeat while J drops, so the
result is never worse than the start.

Start: multisection of the tasks (KaHIP; itself multilevel), or with
``start="coarsest"`` the construction of the paper: coarsen for the
finest target, map the coarsest graph that still packs into its leaves by
multisection, uncoarsen with refinement (J after the V-cycles: 3elt/512
140666 against 128336 from the multisection start, fe_4elt2/512 221716
against 224902: neither wins everywhere).  Irregular trees keep
only the subtree-free steps (start and task level).  All limits are counts,
so the result is deterministic for a seed.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...cost import mapping_cost
from ...deadline import Deadline
from ...graph import CommGraph
from ...mapping import DEFAULT_EPS, balance_report
from ...topology import Topology
from ...topology.hierarchy import hierarchy_topology
from ..refine.budgeted import refine_cost, refine_start
from ..refine.exchange import exchange_refine
from ..refine.moves import refine_moves
from ..refine.rebisect import rebisect_pairs
from ..refine.swaps import DEFAULT_DEPTH, refine_swaps
from ..registry import register
from .coarsen import contract, heavy_edge_matching
from .multisection import multisection_map
from .slots import place_in_leaves

MAX_CYCLES = 8          # V-cycles at most (they stop earlier once J no longer drops)
MAX_LEVELS = 16         # matching rounds at most per hierarchy
MIN_SHRINK = 0.95       # ... and coarsening stops when a round keeps more than this share of vertices
COARSE_DEPTH = 10       # swap neighbourhood N_C^d on every level (depth 1 left J 9% higher many-to-one)
COARSE_PASSES = 4       # passes per coarse level


class _Target:
    """What a coarse level maps onto: ``topology`` whose leaves hold
    ``group`` PEs each (the tree without its ``drop`` innermost levels),
    balance ``eps`` (0: exact, the one-to-one case); its refinements stop at
    ``deadline``."""

    def __init__(self, graph: CommGraph, topology: Topology, eps, drop: int = 1,
                 deadline: Deadline | None = None):
        self.one_to_one = eps is None and graph.n <= topology.n_pes
        self.deadline = Deadline.of(deadline)
        self.topology, self.eps, self.group = topology, eps, 1
        if not self.one_to_one:
            self.eps = DEFAULT_EPS if eps is None else eps  # a coarse graph may have fewer vertices than PEs
            return
        uniform = topology.uniform_hierarchy()
        if uniform is not None and 1 <= drop < len(uniform[0]):
            arities, dists = uniform
            self.topology, self.eps = hierarchy_topology(arities[drop:], dists[drop:]), 0.0
            self.group = int(np.prod(arities[:drop]))

    @property
    def coarsens(self) -> bool:
        return not self.one_to_one or self.group > 1

    def capacity(self, graph: CommGraph) -> float:
        """The largest cluster: a leaf's PEs one-to-one, L_max many-to-one."""
        if self.one_to_one:
            return float(self.group)
        return float(balance_report(np.zeros(0, dtype=np.int64), graph.vertex_weights,
                                    self.topology.n_pes, self.eps)["L_max"])

    def leaf_of(self, pe_of_task: np.ndarray) -> np.ndarray:
        return pe_of_task // self.group

    def refine(self, adj, weights, pos, seed: int) -> np.ndarray:
        """One level of the uncoarsening.  One-to-one: FM exchanges between
        sibling leaves (``refine/exchange.py``; exact balance through the
        best balanced prefix).  Many-to-one: moves and swaps under L_max."""
        if self.deadline.expired():
            return pos
        if not self.one_to_one:
            return _refine_level(_coarse_graph(adj, weights), self, pos, seed)
        tt = self.topology
        pos, _ = exchange_refine(adj, pos, np.full(tt.n_pes, float(self.group)), weights=weights,
                                 parent=tt.parent[tt.leaf_of_pe])
        return pos

    def cluster_bound(self, graph: CommGraph) -> float:
        """The heaviest coarse vertex: L_max many-to-one; one-to-one a
        quarter of a leaf (at least 2), so FM can still exchange clusters."""
        return max(self.group // 4, 2) if self.one_to_one else self.capacity(graph)

    def settle(self, graph: CommGraph, leaf: np.ndarray, topology: Topology, prev_pe=None) -> np.ndarray:
        """PEs from the target leaves of the tasks (one-to-one: a task still
        in its leaf keeps its PE, the others take the free ones)."""
        if not self.one_to_one:
            return leaf
        return place_in_leaves(leaf, self.group, topology.n_pes, prev_pe)


def _targets(graph: CommGraph, topology: Topology, eps, deadline: Deadline | None = None) -> list:
    """The targets of one V-cycle, coarsest first: one-to-one on a uniform
    tree every depth from the root's children down to the innermost groups
    (4:16:k: its nodes, then its groups of 4 cores), many-to-one the PEs."""
    uniform = topology.uniform_hierarchy()
    if eps is not None or graph.n > topology.n_pes:
        return [_Target(graph, topology, eps, deadline=deadline)]
    if uniform is None:
        return []
    return [t for t in (_Target(graph, topology, eps, drop, deadline)
                        for drop in range(len(uniform[0]) - 1, 0, -1))
            if t.group > 1]


def _weights(graph: CommGraph, target: _Target) -> np.ndarray:
    return np.ones(graph.n) if target.one_to_one else np.asarray(graph.vertex_weights, dtype=np.float64)


def coarsen(adj: sp.csr_array, weights, max_weight: float, *, group=None, seed: int = 0):
    """Rounds of heavy-edge matching until a round shrinks the graph by less
    than 1 - MIN_SHRINK: the levels ``[(labels, coarse_adj, coarse_weights,
    coarse_group)]`` from fine to coarse (``labels`` maps the finer level's
    vertices).  Clusters stay within ``max_weight`` and within ``group``."""
    levels = []
    w = np.asarray(weights, dtype=np.float64)
    grp = None if group is None else np.asarray(group, dtype=np.int64)
    for r in range(MAX_LEVELS):
        labels, nc = heavy_edge_matching(adj, w, max_weight, group=grp, seed=seed + r)
        if nc > MIN_SHRINK * adj.shape[0]:
            break
        adj, w = contract(adj, labels, w, nc)
        if grp is not None:
            g = np.empty(nc, dtype=np.int64)
            g[labels] = grp
            grp = g
        levels.append((labels, adj, w, grp))
    return levels


def _coarse_graph(adj, w) -> CommGraph:
    """A CommGraph whose symmetric view is ``adj`` (J counts each pair both ways)."""
    return CommGraph(sp.csr_array(adj * 0.5), vertex_weights=w)


def _refine_level(cg: CommGraph, target: _Target, pos, seed: int, depth: int = COARSE_DEPTH) -> np.ndarray:
    """Moves (label propagation), then swaps and moves on N_C^depth, both
    under the target's capacity: one level of the uncoarsening."""
    pos, _ = refine_moves(cg, target.topology, pos, eps=target.eps, seed=seed, max_passes=COARSE_PASSES,
                          deadline=target.deadline)
    pos, _ = refine_swaps(cg, target.topology, pos, depth=depth, eps=target.eps, seed=seed,
                          max_passes=COARSE_PASSES, deadline=target.deadline)
    return pos


def _uncoarsen(graph: CommGraph, target: _Target, levels, coarse_pos, seed: int) -> np.ndarray:
    """Refine ``coarse_pos`` (target leaf of each coarsest vertex), then
    project it level by level, refining every level above the tasks;
    returns the target leaf of every task."""
    pos = coarse_pos
    for i in range(len(levels) - 1, -1, -1):
        _, adj, w, _ = levels[i]
        pos = target.refine(adj, w, pos, seed + i)[levels[i][0]]
    return pos


def _task_level(graph: CommGraph, topology: Topology, pe, seed: int, eps, deadline: Deadline):
    """The finest level: one-to-one the refinement of ``auto`` (best-partner
    swap scans), many-to-one moves and swaps under L_max."""
    if eps is None and graph.n <= topology.n_pes:
        pe, _ = refine_start(graph, topology, pe, refine_cost(graph, topology, True), seed, deadline)
        return pe
    return _refine_level(graph, _Target(graph, topology, eps, deadline=deadline), pe, seed, depth=DEFAULT_DEPTH)


def _subtree_levels(topology: Topology):
    """(PEs per subtree, quotient topology) for every depth of a uniform tree
    whose quotient still has two levels (a one-level quotient is a complete
    graph of equal distances: swapping whole subtrees there gains nothing)."""
    uniform = topology.uniform_hierarchy()
    if uniform is None:
        return []
    arities, dists = uniform
    out = []
    for i in range(len(arities) - 2, 0, -1):  # drop the i innermost levels, coarsest first
        out.append((int(np.prod(arities[:i])), hierarchy_topology(arities[i:], dists[i:])))
    return out


def subtree_swaps(graph: CommGraph, topology: Topology, pe_of_task, seed: int = 0,
                  deadline: Deadline | None = None) -> np.ndarray:
    """Swap whole subtree contents: for each depth of a uniform tree, the
    quotient graph of the subtrees (one vertex each, empty ones included) is
    mapped one-to-one onto the tree above that depth and swap-refined; a
    subtree's tasks move with their PE offsets kept, so every gain is exact
    and PE loads never change."""
    pe = np.asarray(pe_of_task, dtype=np.int64)
    for size, quotient in _subtree_levels(topology):
        adj, w = contract(graph.symmetric, pe // size, None, quotient.n_pes)
        sigma, _ = refine_swaps(_coarse_graph(adj, w), quotient, np.arange(quotient.n_pes),
                                depth="n2" if quotient.n_pes <= 1024 else COARSE_DEPTH, seed=seed,
                                max_passes=COARSE_PASSES, deadline=deadline)
        pe = sigma[pe // size] * size + pe % size
    return pe


def construct(graph: CommGraph, topology: Topology, *, seed: int = 0, eps=None, preset: str = "fast",
              deadline: Deadline | None = None) -> np.ndarray:
    """Coarsen for the finest target, map the coarsest graph that still
    packs into the target leaves by multisection, uncoarsen with
    refinement (``start="coarsest"``)."""
    deadline = Deadline.of(deadline)
    targets = _targets(graph, topology, eps, deadline)
    target = targets[-1] if targets else _Target(graph, topology, eps, deadline=deadline)
    w = _weights(graph, target)
    levels = coarsen(graph.symmetric, w, target.capacity(graph), seed=seed) if target.coarsens else []
    while True:  # the coarsest graph whose clusters multisection can pack into the target leaves
        adj, cw = (levels[-1][1], levels[-1][2]) if levels else (graph.symmetric, w)
        try:
            pos = multisection_map(_coarse_graph(adj, cw), target.topology, seed=seed, eps=target.eps,
                                   backend="kahip", preset=preset, deadline=deadline)
            break
        except ValueError:
            if not levels:
                raise
            levels.pop()
    leaf = _uncoarsen(graph, target, levels, pos, seed) if levels else pos
    pe = target.settle(graph, leaf, topology)
    return _task_level(graph, topology, pe, seed, eps, deadline)


def vcycle(graph: CommGraph, topology: Topology, pe_of_task, *, seed: int = 0, eps=None,
           deadline: Deadline | None = None) -> np.ndarray:
    """One V-cycle on a mapping: subtree swaps; then for every target,
    coarsest first, coarsening inside its leaves of the current mapping,
    refinement on the way back down to the tasks; then the task level."""
    deadline = Deadline.of(deadline)
    pe = subtree_swaps(graph, topology, pe_of_task, seed, deadline)
    for i, target in enumerate(_targets(graph, topology, eps, deadline)):
        if deadline.expired():
            break
        leaf = target.leaf_of(pe)
        w = _weights(graph, target)
        levels = coarsen(graph.symmetric, w, target.cluster_bound(graph), group=leaf, seed=seed + 17 * i)
        if levels:
            leaf = _uncoarsen(graph, target, levels, levels[-1][3], seed + 17 * i)
        leaf = target.refine(graph.symmetric, w, leaf, seed + 17 * i)
        pe = target.settle(graph, leaf, topology, pe)
    return _task_level(graph, topology, pe, seed, eps, deadline)


def multilevel_map(graph: CommGraph, topology: Topology, *, seed: int = 0, eps=None, start="multisection",
                   cycles: int = MAX_CYCLES, preset: str = "fast", rebisect: str | None = None,
                   max_pairs: int | None = None, max_scans: int | None = None,
                   deadline: Deadline | None = None) -> np.ndarray:
    """A start (``"multisection"`` of the tasks, ``"coarsest"``: the
    construction above, or a mapping), then V-cycles while J drops and the
    ``deadline`` allows; with ``rebisect`` (a KaHIP preset) then the
    re-bisection of top-level subtree pairs (``refine/rebisect.py``, at most
    ``max_pairs``, each split's refinement at most ``max_scans`` task
    scans) and, when it gained, V-cycles again.  Never returns a higher J
    than the start."""
    deadline = Deadline.of(deadline)
    if isinstance(start, str) and start == "coarsest":
        pe = construct(graph, topology, seed=seed, eps=eps, preset=preset, deadline=deadline)
    elif isinstance(start, str) and start == "multisection":
        pe = multisection_map(graph, topology, seed=seed, eps=eps, backend="kahip", preset=preset,
                              deadline=deadline)
    elif isinstance(start, str):
        raise ValueError(f"option start={start!r}: expected multisection or coarsest")
    else:
        pe = np.asarray(start, dtype=np.int64)
    pe, j = _vcycles(graph, topology, pe, mapping_cost(graph, topology, pe), seed, eps, int(cycles), deadline)
    if rebisect and not deadline.expired():
        cand = rebisect_pairs(graph, topology, pe, preset=rebisect, seed=seed, max_pairs=max_pairs,
                              max_scans=max_scans, deadline=deadline)
        cj = mapping_cost(graph, topology, cand)
        if cj < j * (1 - 1e-9):
            pe, j = _vcycles(graph, topology, cand, cj, seed + 1, eps, int(cycles), deadline)
    return pe


def _vcycles(graph, topology, pe, j: float, seed: int, eps, cycles: int, deadline: Deadline):
    """V-cycles from ``pe`` (J ``j``) while J drops: (mapping, J)."""
    for c in range(cycles):
        if deadline.expired():
            break
        cand = vcycle(graph, topology, pe, seed=seed + 101 * (c + 1), eps=eps, deadline=deadline)
        cj = mapping_cost(graph, topology, cand)
        if cj >= j * (1 - 1e-9):
            break
        pe, j = cand, cj
    return pe, j


@register("multilevel", "integrated multilevel mapping (Faraj et al. 2020): V-cycles of heavy-edge "
                        "coarsening inside the subtrees of the current mapping, J-aware swaps and moves at "
                        "every level, while J drops (options: start=multisection|coarsest, cycles=N, "
                        "preset=fast|eco|strong, rebisect=fast|eco|strong: then KaHIP re-bisects pairs "
                        "of top-level subtrees, max_pairs=N, max_scans=N: task scans per split's refinement)")
def multilevel(graph, topology, *, seed=0, eps=None, start="multisection", cycles=MAX_CYCLES, preset="fast",
               rebisect=None, max_pairs=None, max_scans=None, deadline=None, **_):
    if rebisect is not None and str(rebisect) not in ("fast", "eco", "strong"):
        raise ValueError(f"option rebisect={rebisect!r}: expected fast, eco or strong")
    return multilevel_map(graph, topology, seed=seed, eps=eps, start=start, cycles=int(cycles),
                          preset=str(preset), rebisect=None if rebisect is None else str(rebisect),
                          max_pairs=None if max_pairs is None else int(max_pairs),
                          max_scans=None if max_scans is None else int(max_scans), deadline=deadline)
