"""Swap refinement of a one-to-one start within a counted budget.

auto refines every start it makes, and the multilevel method its task
level, the same way: up to N2_MAX_TASKS tasks the quadratic neighbourhood
by best-partner scans (``refine_around`` with every task active; 5-10x less
work than first-improvement passes over all pairs, local optima of the same
strength on the benchmark starts), beyond it ``refine_swaps`` on N_C^10.
The work is counted (task scans, pairs evaluated) and priced by the work
model below, so a budget in seconds becomes a count and the result depends
only on the instance, the seed and the budget.

The prices are seconds per unit of work, fitted on an idle core of the
development machine (2 cores) to 24 models of n = 64 ... 2048 tasks on
4:16:k, each start and its refinement timed alone (relative error of a
fitted term mostly within 0.7-1.4x).
"""

from __future__ import annotations

import numpy as np

from ...deadline import Deadline
from .swaps import cached_scans, refine_around, refine_swaps

N2_MAX_TASKS = 1024  # the quadratic refinement neighbourhood up to this many tasks
REFINE_PASSES = 4    # typical passes until no gain from a good start
_PER_PAIR_EDGE = 2e-8      # compiled swap refinement: one neighbour of one pair looked at
_PER_SCAN_STEP = 1.7e-9    # refine_around: one task scan costs n * depth + m of these
_CACHED_TASKS = 12_000    # ... up to about this many tasks (beyond: memory_factor)
_PER_CACHED_STEP = 1.2e-8  # a scan with the connection cache costs n depth of these (its swaps included;
                           # CPU, AMG-like graphs on 24:2:k from a random order to swap-optimal: 1000
                           # tasks of 221 partners 2.6e-5 s per scan, 4096 tasks of 278 partners 1.45e-4)
CACHED_N2_MAX_TASKS = 8192  # dense graphs: all partners up to here
_PER_SETUP_ENTRY = 2e-7    # a refinement's set-up, per task and adjacency entry (``setup_seconds``)


def setup_seconds(graph) -> float:
    """Estimated seconds a refinement spends before its first pair: the
    per-task sums, the tasks renumbered by PE, the tree's distance oracle
    (at 2^24 tasks on 4:16:262144, 14 s on an idle core of the
    development machine)."""
    return _PER_SETUP_ENTRY * (graph.n + graph.symmetric.nnz)


def refine_depth(n: int):
    """The swap neighbourhood for ``n`` tasks: all pairs, or N_C^10."""
    return "n2" if n <= N2_MAX_TASKS else 10


def memory_factor(n: int) -> float:
    """How much slower a pair or a scan gets once the per-task arrays leave
    the cache: (n / 12,000)^0.85 beyond 12,000 tasks (pairs per second on a
    stencil at 2^13, 2^14, 2^15, 2^16 tasks: 5.4, 3.9, 2.2, 1.25 million)."""
    return max(1.0, (n / _CACHED_TASKS) ** 0.85)


def pair_seconds(graph) -> float:
    """Estimated seconds per pair the compiled swap search evaluates: the
    unit that turns its (deterministic) pair counts into budget time."""
    return (2 + 2 * graph.symmetric.nnz / max(graph.n, 1)) * _PER_PAIR_EDGE * memory_factor(graph.n)


def quadratic(graph, topology) -> bool:
    """Whether a one-to-one refinement scans all partners (``refine_around``):
    up to N2_MAX_TASKS tasks, and on dense graphs whose scans use the
    connection cache up to CACHED_N2_MAX_TASKS (a scan there costs O(n
    depth), a pair of N_C^10 O(deg) on top of its share of the ball)."""
    return graph.n <= N2_MAX_TASKS or (graph.n <= CACHED_N2_MAX_TASKS and cached_scans(graph, topology))


def scan_seconds(graph, topology, cached: bool | None = None) -> float:
    """Estimated seconds of one task scan of ``refine_around`` (``cached``:
    with the connection cache or without; None: as ``refine_around`` scans)."""
    depth = max(int(topology.max_depth), 1)
    if cached_scans(graph, topology) if cached is None else cached:
        return graph.n * depth * _PER_CACHED_STEP * memory_factor(graph.n)
    return (graph.n * depth + graph.symmetric.nnz) * _PER_SCAN_STEP * memory_factor(graph.n)


def refine_cost(graph, topology=None, one_to_one: bool = False, cached: bool | None = None) -> float:
    """Estimated seconds of the refinement of one start (``refine_start``):
    about two scans per task for best-partner scans (one-to-one; ``cached``
    as in ``scan_seconds``), else REFINE_PASSES passes over the
    neighbourhood's pairs (also what auto_many's final refinement costs)."""
    n = graph.n
    if one_to_one and topology is not None and quadratic(graph, topology):
        return 2 * n * scan_seconds(graph, topology, cached)
    pairs = n * (n - 1) / 2 if n <= N2_MAX_TASKS else min(n * 128, graph.symmetric.nnz * 40)
    return REFINE_PASSES * pairs * pair_seconds(graph)


def refine_start(graph, topology, pe_of_task, budget: float, seed: int, deadline: Deadline):
    """Swap refinement of a one-to-one start within ``budget`` estimated
    seconds of counted work; returns the mapping and the work's estimated
    seconds.  Both neighbourhoods stop early at the ``deadline``; their
    set-up cannot stop, and where the deadline cannot afford it the start
    is returned as it is.  So is a start too large for N_C^10 to look at
    each of its tasks once before the deadline (n pairs at
    ``pair_seconds``): cut before that, its pairs go to a sliver of the
    tasks for a gain too small to see, and the set-up's passes over the
    whole graph cost seconds (docs/time-limits.md)."""
    n, scans_all = graph.n, quadratic(graph, topology)
    if not deadline.allows(setup_seconds(graph) + (0.0 if scans_all else n * pair_seconds(graph))):
        return pe_of_task, 0.0
    if scans_all:
        per_scan = scan_seconds(graph, topology)
        pe, scans, _ = refine_around(graph, topology, pe_of_task, np.arange(n), seed=seed,
                                     max_scans=max(int(budget / per_scan), n), deadline=deadline)
        return pe, scans * per_scan
    per_pair = pair_seconds(graph)
    pe, stats = refine_swaps(graph, topology, pe_of_task, depth=refine_depth(n), seed=seed,
                             max_evaluations=max(int(budget / per_pair), n), deadline=deadline)
    return pe, stats.evaluated * per_pair
