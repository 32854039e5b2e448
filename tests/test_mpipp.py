import numpy as np
import pytest

from rankmap.algorithms import map_tasks
from rankmap.algorithms.construct.mpipp import mpipp
from rankmap.cost import mapping_cost
from rankmap.graph import CommGraph
from rankmap.topology import hierarchy_topology


def random_graph(n, m, seed):
    rng = np.random.default_rng(seed)
    return CommGraph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), rng.uniform(1, 100, m), n=n)


def test_local_optimum_no_pair_exchange_gains():
    g = random_graph(12, 40, 0)
    t = hierarchy_topology([2, 2, 4], [1, 10, 100])  # 16 PEs, 4 free
    pe = map_tasks(g, t, method="mpipp1", seed=1).pe_of_task
    j = mapping_cost(g, t, pe)
    for u in range(g.n):
        for q in range(t.n_pes):  # exchange with a task, or move to a free PE
            alt = pe.copy()
            other = np.flatnonzero(pe == q)
            alt[u] = q
            alt[other] = pe[u]
            assert mapping_cost(g, t, alt) >= j - 1e-9


def test_mpipp5_no_worse_than_its_first_start_and_deterministic():
    g = random_graph(32, 120, 1)
    t = hierarchy_topology([4, 4, 2], [1, 10, 100])
    j1 = mapping_cost(g, t, mpipp(g, t, seed=3, restarts=1))
    p5 = map_tasks(g, t, method="mpipp5", seed=3).pe_of_task
    assert mapping_cost(g, t, p5) <= j1
    assert np.array_equal(p5, map_tasks(g, t, method="mpipp5", seed=3).pe_of_task)


def test_many_tasks_per_pe_and_size_limit():
    g = random_graph(16, 60, 2)
    t = hierarchy_topology([2, 4], [1, 10])
    pe = map_tasks(g, t, method="mpipp1").pe_of_task
    assert np.bincount(pe, minlength=8).max() == 2
    with pytest.raises(ValueError, match="max_tasks"):
        map_tasks(g, t, method="mpipp1", max_tasks=8)
