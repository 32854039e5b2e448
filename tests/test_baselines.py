import numpy as np
import pytest

from rankmap import CommGraph, map_tasks, mapping_cost, method_names, topology_from_strings
from rankmap.formats import read_graph


def ring_of_cliques(groups: int, size: int, seed: int = 0) -> tuple[CommGraph, np.ndarray]:
    """Heavy traffic inside groups, light between: a good mapping is obvious.
    Returns the graph with tasks shuffled and the shuffle."""
    src, dst, w = [], [], []
    for g in range(groups):
        base = g * size
        for a in range(size):
            for b in range(size):
                if a != b:
                    src.append(base + a), dst.append(base + b), w.append(100.0)
        src.append(base), dst.append(((g + 1) % groups) * size), w.append(1.0)
    perm = np.random.default_rng(seed).permutation(groups * size)
    return CommGraph.from_edges(perm[src], perm[dst], w, n=groups * size), perm


@pytest.mark.parametrize("method", ["greedy", "greedy_allc", "auto"])
def test_greedy_finds_the_obvious_grouping(method):
    g, _ = ring_of_cliques(8, 4)
    t = topology_from_strings("4:8", "1:10")
    pe = map_tasks(g, t, method=method).pe_of_task
    # every clique lands inside one group of 4 PEs
    src, dst, w = g.coo()
    heavy = w == 100
    assert np.all(pe[src[heavy]] // 4 == pe[dst[heavy]] // 4)
    assert mapping_cost(g, t, pe) < mapping_cost(g, t, np.arange(32))


def test_all_methods_valid_and_deterministic(data_dir):
    g = read_graph(data_dir / "traffic/app.mat")
    t = topology_from_strings("4:16:1", "1:10:100")
    for m in method_names(t):
        opts = {"work_limit": 0.5} if m == "auto" else {}
        a = map_tasks(g, t, method=m, seed=5, **opts).pe_of_task
        b = map_tasks(g, t, method=m, seed=5, **opts).pe_of_task
        assert sorted(a.tolist()) == list(range(64)), m
        assert np.array_equal(a, b), m


def test_fewer_tasks_than_pes():
    g, _ = ring_of_cliques(3, 4)
    t = topology_from_strings("4:4", "1:10")
    for m in ["identity", "random", "greedy", "greedy_allc"]:
        pe = map_tasks(g, t, method=m).pe_of_task
        assert len(set(pe.tolist())) == 12 and pe.max() < 16


def test_many_tasks_per_pe():
    g, _ = ring_of_cliques(8, 4)
    t = topology_from_strings("2:2", "1:10")  # 32 tasks on 4 PEs: 8 each
    for m in ["identity", "random", "greedy", "greedy_allc", "auto"]:
        pe = map_tasks(g, t, method=m).pe_of_task
        assert np.bincount(pe, minlength=4).max() <= 8, m
    pe = map_tasks(g, t, method="greedy_allc").pe_of_task
    src, dst, w = g.coo()
    heavy = w == 100
    assert np.mean(pe[src[heavy]] == pe[dst[heavy]]) > 0.9


def test_weighted_many_to_one_is_refused_clearly():
    g = CommGraph.from_edges([0, 1], [1, 2], [1, 1], n=6, vertex_weights=[1, 2, 1, 1, 1, 1])
    t = topology_from_strings("2", "1")
    with pytest.raises(ValueError, match="equal vertex weights"):
        map_tasks(g, t, method="greedy")


def test_unknown_method():
    g, _ = ring_of_cliques(2, 2)
    with pytest.raises(ValueError, match="unknown mapping method"):
        map_tasks(g, topology_from_strings("4"), method="magic")


def test_greedy_scales_linearly_enough():
    """2^12 tasks of a 2-D grid on a 3-level machine: a functional check that
    the tree DPs handle large k (timings live in benchmarks/)."""
    side = 64
    idx = np.arange(side * side).reshape(side, side)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    g = CommGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]),
                             np.ones(2 * src.size), n=side * side)
    t = topology_from_strings("16:8:32", "1:10:100")
    pe = map_tasks(g, t, method="greedy_allc").pe_of_task
    assert mapping_cost(g, t, pe) < mapping_cost(g, t, map_tasks(g, t, method="random").pe_of_task)
