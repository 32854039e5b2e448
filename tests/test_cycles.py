"""Cyclic exchanges among the groups of a node (refine/cycles.py) and their step in auto."""

import numpy as np
import scipy.sparse as sp

from rankmap.algorithms.portfolio.one_to_one import cycle_exchanges
from rankmap.algorithms.refine.cycles import cycle_refine, leaf_groups
from rankmap.algorithms.refine.swaps import refine_swaps
from rankmap.cost import mapping_cost
from rankmap.deadline import Deadline
from rankmap.graph import CommGraph
from rankmap.topology.hierarchy import hierarchy_topology

# three groups A, B, C; task x1 of each talks 5 to x2 of the next group (A -> B -> C -> A)
# and 3 to its own partner: every swap loses, moving x1 of every group one group on gains
TRIANGLE = [(0, 3, 5), (2, 5, 5), (4, 1, 5), (0, 1, 3), (2, 3, 3), (4, 5, 3)]
BEST_GROUPS = [1, 0, 2, 1, 0, 2]  # a1 in B, a2 in A, b1 in C, b2 in B, c1 in A, c2 in C
TOGETHER = [(0, 3), (2, 5), (4, 1)]  # the optimum's groups, whichever group each one is


def _together(group):
    return sorted(tuple(sorted(np.flatnonzero(group == x).tolist())) for x in np.unique(group))


def _graph(edges, n):
    u, v, w = (np.asarray(x) for x in zip(*edges))
    a = sp.coo_array((w.astype(float), (u, v)), shape=(n, n))
    return CommGraph(sp.csr_array(a + a.T))


def _pairs(edges, coupling=100.0):
    """Every task of ``edges`` as two tasks coupled by ``coupling``, linked member by member."""
    out = [(2 * t, 2 * t + 1, coupling) for t in range(6)]
    for a, b, w in edges:
        out += [(2 * a, 2 * b, w), (2 * a + 1, 2 * b + 1, w)]
    return out


def _group_loads(pe, size, groups):
    return np.bincount(np.asarray(pe) // size, minlength=groups)


def test_leaf_groups_of_uniform_trees():
    assert leaf_groups(hierarchy_topology([4, 16, 8], [1, 10, 100])) == (4, 16, 9.0)
    assert leaf_groups(hierarchy_topology([2, 2], [1, 10])) is None    # two groups: a cycle is a swap
    assert leaf_groups(hierarchy_topology([4], [1])) is None


def test_cycle_of_single_tasks_that_no_swap_reaches():
    g, topo = _graph(TRIANGLE, 6), hierarchy_topology([2, 3], [1, 10])
    start = np.arange(6)
    j0 = mapping_cost(g, topo, start)
    swapped, _ = refine_swaps(g, topo, start, depth="n2", seed=0)
    assert mapping_cost(g, topo, swapped) == j0                         # a local optimum of swaps
    pe, removed, rounds = cycle_refine(g, topo, start)
    best = mapping_cost(g, topo, np.array(BEST_GROUPS) * 2 + np.array([0, 0, 0, 1, 1, 1]))
    assert mapping_cost(g, topo, pe) == best < j0
    assert removed == j0 - best and rounds >= 1
    assert sorted(pe.tolist()) == list(range(6))
    assert _together(pe // 2) == sorted(tuple(sorted(p)) for p in TOGETHER)


def test_cycle_of_coupled_pairs():
    g, topo = _graph(_pairs(TRIANGLE), 12), hierarchy_topology([4, 3], [1, 10])
    start = np.arange(12)
    j0 = mapping_cost(g, topo, start)
    swapped, _ = refine_swaps(g, topo, start, depth="n2", seed=0)
    assert mapping_cost(g, topo, swapped) == j0
    pe, removed, _ = cycle_refine(g, topo, start)
    assert np.array_equal(pe[0::2] // 4, pe[1::2] // 4)              # the pairs stay together ...
    assert _together(pe[0::2] // 4) == sorted(tuple(sorted(p)) for p in TOGETHER)  # ... and cycle as units
    assert removed == j0 - mapping_cost(g, topo, pe) > 0


def test_random_instances_keep_loads_and_never_raise_j():
    rng = np.random.default_rng(3)
    topo = hierarchy_topology([4, 8, 3], [1, 10, 100])
    for n in (96, 80):  # full, and with free PEs
        m = rng.integers(0, n, size=(4 * n, 2))
        m = m[m[:, 0] != m[:, 1]]
        g = _graph([(a, b, float(rng.integers(1, 50))) for a, b in m], n)
        start = rng.permutation(topo.n_pes)[:n]
        pe, removed, _ = cycle_refine(g, topo, start)
        assert len(set(pe.tolist())) == n
        assert np.array_equal(_group_loads(pe, 4, 24), _group_loads(start, 4, 24))
        assert np.isclose(mapping_cost(g, topo, start) - mapping_cost(g, topo, pe), removed)
        assert removed >= 0
        again, removed_again, _ = cycle_refine(g, topo, start)
        assert np.array_equal(again, pe) and removed_again == removed  # deterministic


def test_many_to_one_and_irregular_trees_come_back_unchanged():
    g = _graph(TRIANGLE, 6)
    topo = hierarchy_topology([1, 3], [1, 10])                          # 3 PEs, 6 tasks
    pe, removed, rounds = cycle_refine(g, topo, np.array([0, 0, 1, 1, 2, 2]))
    assert pe.tolist() == [0, 0, 1, 1, 2, 2] and removed == 0 and rounds == 0


def test_auto_step_settles_with_swaps_and_never_raises_j():
    g, topo = _graph(TRIANGLE, 6), hierarchy_topology([2, 3], [1, 10])
    start = np.arange(6)
    j0 = mapping_cost(g, topo, start)
    pe, j, work = cycle_exchanges(g, topo, start, j0, 0.0, seed=0, deadline=Deadline.of(None))
    assert j == mapping_cost(g, topo, pe) < j0 and work > 0              # the floor of rounds, budget 0
    best = np.array(BEST_GROUPS) * 2 + np.array([0, 0, 0, 1, 1, 1])
    same, j_same, _ = cycle_exchanges(g, topo, best, mapping_cost(g, topo, best), 1.0, seed=0,
                                      deadline=Deadline.of(None))
    assert np.array_equal(same, best) and j_same == mapping_cost(g, topo, best)


def test_groups_of_one_core_cycle_single_tasks():
    # 1:10-like trees: every group is one core, so units are single tasks only (no pairs)
    g, topo = _graph(TRIANGLE, 6), hierarchy_topology([1, 6], [1, 10])
    start = np.arange(6)
    pe, removed, _ = cycle_refine(g, topo, start)
    assert removed == 0 and np.array_equal(pe, start)   # one task per group: every cycle leaves the cut as it is
