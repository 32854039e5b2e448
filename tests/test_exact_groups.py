"""The optimal split of a node's tasks into its leaf groups (refine/exact_groups.py) and its step in auto."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from rankmap.algorithms import map_tasks
from rankmap.algorithms.portfolio.one_to_one import exact_groups
from rankmap.algorithms.refine import exact_groups as exact_groups_module
from rankmap.algorithms.refine.exact_groups import (BRANCH_WORK, best_split, connected_pieces, exact_group_refine,
                                                     pieces_within, relaxed_split, set_partitioning)
from rankmap.cost import mapping_cost
from rankmap.deadline import Deadline
from rankmap.graph import CommGraph
from rankmap.topology.hierarchy import hierarchy_topology


def _random_graph(n, density, seed):
    rng = np.random.default_rng(seed)
    a = sp.random_array((n, n), density=density, rng=rng, data_sampler=lambda size: rng.integers(1, 20, size))
    a = sp.triu(a, 1)
    return CommGraph(sp.csr_array(a + a.T))


def _splits(items, size):
    """Every split of ``items`` into groups of ``size`` (unordered)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for others in itertools.combinations(rest, size - 1):
        left = [x for x in rest if x not in others]
        for tail in _splits(left, size):
            yield [(first, *others)] + tail


def _best_by_enumeration(graph, topo, pe, a0, a1):
    """J of the best regrouping of every node's tasks, by trying every split."""
    pe = np.asarray(pe).copy()
    for node in np.unique(pe // (a0 * a1)):
        tasks = np.flatnonzero(pe // (a0 * a1) == node)
        cores = np.sort(pe[tasks])
        best, best_j = None, np.inf
        for split in _splits(list(tasks), a0):
            trial = pe.copy()
            trial[np.concatenate(split)] = cores
            j = mapping_cost(graph, topo, trial)
            if j < best_j:
                best, best_j = trial, j
        pe = best
    return mapping_cost(graph, topo, pe)


@pytest.mark.parametrize("a0,a1,k,seed", [(2, 4, 2, 0), (3, 3, 2, 1), (4, 3, 1, 2), (4, 3, 2, 3), (4, 3, 2, 4)])
def test_each_node_gets_its_best_split(a0, a1, k, seed):
    topo = hierarchy_topology([a0, a1, k], [1.0, 10.0, 100.0])
    n = a0 * a1 * k
    graph = _random_graph(n, 0.25, seed)
    start = np.random.default_rng(seed).permutation(n)
    j0 = mapping_cost(graph, topo, start)
    pe, removed, pieces = exact_group_refine(graph, topo, start)
    assert sorted(pe.tolist()) == list(range(n))
    assert np.array_equal(pe // (a0 * a1), start // (a0 * a1))  # nothing moves between nodes
    j = mapping_cost(graph, topo, pe)
    assert j == pytest.approx(_best_by_enumeration(graph, topo, start, a0, a1))
    assert j0 - j == pytest.approx(removed)
    assert pieces > 0


def test_a_node_already_split_best_keeps_its_pes():
    topo = hierarchy_topology([4, 3, 1], [1.0, 10.0, 100.0])
    graph = _random_graph(12, 0.3, 5)
    best, _, _ = exact_group_refine(graph, topo, np.random.default_rng(5).permutation(12))
    again, removed, _ = exact_group_refine(graph, topo, best)
    assert removed == 0 and np.array_equal(again, best)


def test_pieces_are_the_connected_sets():
    w = np.zeros((5, 5))
    for u, v in [(0, 1), (1, 2), (3, 4)]:  # a path 0-1-2 and an edge 3-4
        w[u, v] = w[v, u] = 1.0
    levels = connected_pieces(w, 3)
    assert [lvl.tolist() for lvl in levels] == [[[0], [1], [2], [3], [4]], [[0, 1], [1, 2], [3, 4]], [[0, 1, 2]]]


def test_the_work_budget_and_unsupported_trees():
    topo = hierarchy_topology([4, 4, 2], [1.0, 10.0, 100.0])
    graph = _random_graph(32, 0.3, 6)
    start = np.random.default_rng(6).permutation(32)
    _, _, work = exact_group_refine(graph, topo, start, max_work=1)
    assert work == 0  # no node fits
    _, _, both = exact_group_refine(graph, topo, start)
    _, _, work = exact_group_refine(graph, topo, start, max_work=both - 1)
    assert 0 < work < both  # one node fits, the other is passed over
    wide = hierarchy_topology([5, 3, 1], [1.0, 10.0, 100.0])  # groups of five cores: no packing rule
    g15 = _random_graph(15, 0.3, 7)
    pe, removed, work = exact_group_refine(g15, wide, np.arange(15))
    assert removed == 0 and work == 0 and np.array_equal(pe, np.arange(15))
    fewer = _random_graph(30, 0.3, 8)  # one node not full: only the full one is split
    pe, removed, _ = exact_group_refine(fewer, topo, np.arange(30))
    assert np.array_equal(pe[16:], np.arange(16, 30))


def _node_graph(edges, n):
    w = sp.coo_array((np.array([c for _, _, c in edges], float), ([u for u, _, _ in edges], [v for _, v, _ in edges])),
                     shape=(n, n))
    return CommGraph(sp.csr_array(w + w.T))


def test_an_integral_lp_is_the_split_without_branch_and_bound():
    """Three 4-cliques scrambled over three groups: the LP's optimum is
    integral, so the work is the node's pieces alone and the split is the
    cliques."""
    cliques = np.arange(12).reshape(3, 4)
    edges = [(u, v, 5) for c in cliques for u, v in itertools.combinations(c, 2)]
    graph, topo = _node_graph(edges, 12), hierarchy_topology([4, 3, 1], [1.0, 10.0, 100.0])
    start = np.arange(12).reshape(4, 3).T.ravel()  # one edge of each clique inside a group
    pe, removed, work = exact_group_refine(graph, topo, start)
    assert work == sum(level.shape[0] for level in connected_pieces(graph.symmetric.toarray(), 4))
    assert [len(set(pe[c] // 4)) for c in cliques] == [1, 1, 1]
    assert removed == pytest.approx(mapping_cost(graph, topo, start) - mapping_cost(graph, topo, pe))


def test_a_fractional_lp_branches_only_where_the_work_pays():
    """Two triangles and a bridge onto three pairs of cores: the LP takes
    every triangle edge by half (inside 30), the best split keeps 21.  With
    work for the LP alone the node is passed over; with no limit the branch
    and bound finds the optimum and counts BRANCH_WORK units per piece."""
    edges = [(0, 1, 10), (1, 2, 10), (0, 2, 10), (3, 4, 10), (4, 5, 10), (3, 5, 10), (2, 3, 1)]
    graph, topo = _node_graph(edges, 6), hierarchy_topology([2, 3, 1], [1.0, 10.0, 100.0])
    start = np.array([0, 2, 4, 1, 3, 5])  # groups {0, 3}, {1, 4}, {2, 5}: nothing inside
    pieces = sum(level.shape[0] for level in connected_pieces(graph.symmetric.toarray(), 2))
    pe, removed, work = exact_group_refine(graph, topo, start, max_work=pieces)
    assert work == pieces and removed == 0 and np.array_equal(pe, start)
    pe, removed, work = exact_group_refine(graph, topo, start)
    assert work == (1 + BRANCH_WORK) * pieces
    assert mapping_cost(graph, topo, pe) == pytest.approx(_best_by_enumeration(graph, topo, start, 2, 3))
    assert removed == pytest.approx(mapping_cost(graph, topo, start) - mapping_cost(graph, topo, pe))


def test_the_branch_and_bound_goes_to_the_node_whose_lp_promises_most():
    """Two nodes of two triangles on pairs of cores, both LPs fractional.
    Node A (triangles of 10 and a bridge, one edge of each inside now)
    has more weight between its groups, node B (triangles of 4, nothing
    inside now) the larger gap between LP and now (12 against 10, and 8
    to win against 1): with work for both LPs and one branch and bound,
    B gets it."""
    edges = [(0, 1, 10), (1, 2, 10), (0, 2, 10), (3, 4, 10), (4, 5, 10), (3, 5, 10), (2, 3, 1)]
    edges += [(6 + u, 6 + v, 4) for u, v in [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5)]]
    graph, topo = _node_graph(edges, 12), hierarchy_topology([2, 3, 2], [1.0, 10.0, 100.0])
    start = np.array([0, 1, 4, 2, 3, 5, 6, 8, 10, 7, 9, 11])  # A: {0, 1} {3, 4} {2, 5}; B: {6, 9} {7, 10} {8, 11}
    w = graph.symmetric.toarray()
    pieces_a = sum(level.shape[0] for level in connected_pieces(w[:6, :6], 2))
    pieces_b = sum(level.shape[0] for level in connected_pieces(w[6:, 6:], 2))
    pe, removed, work = exact_group_refine(graph, topo, start, max_work=pieces_a + pieces_b + BRANCH_WORK * pieces_a)
    assert work == pieces_a + pieces_b + BRANCH_WORK * pieces_b
    assert np.array_equal(pe[:6], start[:6]) and not np.array_equal(pe[6:], start[6:])
    assert removed == pytest.approx(mapping_cost(graph, topo, start) - mapping_cost(graph, topo, pe)) and removed > 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_column_generation_reaches_the_lp_over_all_pieces(seed, monkeypatch):
    """With one piece per task per round the LP takes several rounds; its
    bound is the LP over every piece at once."""
    from scipy.optimize import linprog

    monkeypatch.setattr(exact_groups_module, "COLUMNS_PER_TASK", 1)
    w = _random_graph(24, 0.4, seed).symmetric.toarray()
    model = set_partitioning(w, connected_pieces(w, 4), 4)
    whole = linprog(-model.value, A_ub=-model.pack, b_ub=[0.0], A_eq=model.cover, b_eq=np.ones(24), bounds=(0, 1))
    bound, found, _ = relaxed_split(model, 4, 6)
    assert bound == pytest.approx(-whole.fun)
    if found is not None:  # an integral optimum is a split whose inside weight is the bound
        groups, inside = found
        assert inside == pytest.approx(bound) and sorted(np.concatenate(groups).tolist()) == list(range(24))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_pieces_kept_by_their_reduced_cost_hold_every_better_split(seed):
    """A split better than an incumbent takes no piece whose reduced cost
    exceeds the LP bound less the incumbent: the branch and bound over
    the kept pieces alone finds the optimum, and keeps fewer pieces the
    closer the incumbent is."""
    w = _random_graph(24, 0.4, 20 + seed).symmetric.toarray()
    model = set_partitioning(w, connected_pieces(w, 4), 4)
    bound, _, reduced = relaxed_split(model, 4, 6)
    groups, optimum, proven = best_split(model, 4, 6)
    assert proven == pytest.approx(optimum) and bound >= optimum - 1e-9
    kept = []
    for incumbent in (optimum - 1, optimum - 10, 0.0):
        keep = pieces_within(reduced, bound - incumbent)
        found = best_split(model.columns(keep), 4, 6)
        assert found[1] == pytest.approx(optimum)
        assert sorted(np.concatenate(found[0]).tolist()) == list(range(24))
        kept.append(keep.size)
    assert kept[0] <= kept[1] <= kept[2] == model.value.size and kept[0] < model.value.size


def test_an_expired_deadline_changes_nothing():
    topo = hierarchy_topology([4, 3, 2], [1.0, 10.0, 100.0])
    graph = _random_graph(24, 0.3, 9)
    start = np.random.default_rng(9).permutation(24)
    pe, removed, pieces = exact_group_refine(graph, topo, start, deadline=Deadline(0.0))
    assert removed == 0 and pieces == 0 and np.array_equal(pe, start)


def test_auto_returns_every_node_split_best(data_dir):
    """On the 3elt model of 128 tasks swaps, kicks and cycles stop where a
    better split of a node exists (J 41484 before this step): auto's result
    is now a fixed point of the exact split (itself checked against every
    split above)."""
    from rankmap.formats import read_graph
    from rankmap.modelgen import model_graph

    g = model_graph(read_graph(str(data_dir / "graphs/3elt.graph")), 128, seed=0)
    topo = hierarchy_topology([4, 16, 2], [1.0, 10.0, 100.0])
    pe = map_tasks(g, topo, method="auto", seed=0).pe_of_task
    again, removed, pieces = exact_group_refine(g, topo, pe)
    assert pieces > 0 and removed == 0 and np.array_equal(again, pe)


def test_the_step_in_auto_never_raises_j():
    topo = hierarchy_topology([4, 3, 2], [1.0, 10.0, 100.0])
    graph = _random_graph(24, 0.3, 13)
    start = np.random.default_rng(13).permutation(24)
    j = mapping_cost(graph, topo, start)
    pe, cj, work = exact_groups(graph, topo, start, j, 0.01, 0, Deadline())
    assert cj <= j and cj == pytest.approx(mapping_cost(graph, topo, pe)) and work > 0
