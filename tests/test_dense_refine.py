"""Dense graphs: best-partner scans with the connection cache find what the
plain scans find, and auto's starts there are KaMinPar's and Mt-KaHyPar's."""

import numpy as np
import pytest

from rankmap.algorithms import map_tasks
from rankmap.algorithms.construct import partition
from rankmap.algorithms.portfolio.one_to_one import plan
from rankmap.algorithms.refine import swaps
from rankmap.cost import mapping_cost
from rankmap.graph import CommGraph
from rankmap.topology.hierarchy import hierarchy_topology


def dense_graph(n: int, partners: int, seed: int = 0) -> CommGraph:
    """Every task talks to ``partners`` random others, integer bytes with a
    heavy tail (integer sums: both scan kinds add the same numbers exactly)."""
    rng = np.random.default_rng(seed)
    u = np.repeat(np.arange(n), partners // 2)
    v = rng.integers(0, n, u.size)
    w = np.floor(rng.pareto(1.5, u.size) * 100) + 1
    keep = u != v
    u, v, w = u[keep], v[keep], w[keep]
    return CommGraph.from_edges(np.concatenate([u, v]), np.concatenate([v, u]), np.concatenate([w, w]), n=n)


@pytest.fixture
def small_dense(monkeypatch):
    """Graphs of 96 tasks and 40 partners count as dense."""
    monkeypatch.setattr(partition, "DENSE_MIN_TASKS", 64)
    monkeypatch.setattr(partition, "DENSE_DEGREE", 16)


@pytest.mark.parametrize("arities", [[4, 2, 12], [2, 3, 4, 4]])
def test_cached_scans_make_the_plain_scans_swaps(small_dense, monkeypatch, arities):
    g = dense_graph(96, 40)
    topo = hierarchy_topology(arities, [1, 4, 20, 100][:len(arities)])
    start = np.random.default_rng(1).permutation(96)
    assert swaps.cached_scans(g, topo)
    cached = swaps.refine_around(g, topo, start, np.arange(96), seed=3)
    monkeypatch.setattr(swaps, "cached_scans", lambda graph, topology: False)
    plain = swaps.refine_around(g, topo, start, np.arange(96), seed=3)
    assert np.array_equal(cached[0], plain[0]) and cached[1] == plain[1]
    assert cached[2] == mapping_cost(g, topo, cached[0]) < mapping_cost(g, topo, start)
    # around a few moved tasks too (auto's kicks), with a cap on the scans
    kicked = cached[0].copy()
    kicked[[0, 5, 9]] = kicked[[9, 0, 5]]
    monkeypatch.undo()
    small_dense_again = swaps.refine_around(g, topo, kicked, np.array([0, 5, 9]), seed=4, max_scans=50)
    monkeypatch.setattr(partition, "DENSE_MIN_TASKS", 10 ** 9)
    plain_again = swaps.refine_around(g, topo, kicked, np.array([0, 5, 9]), seed=4, max_scans=50)
    assert np.array_equal(small_dense_again[0], plain_again[0])


def test_the_result_is_swap_optimal(small_dense):
    g = dense_graph(96, 40, seed=2)
    topo = hierarchy_topology([4, 2, 12], [1, 20, 100])
    pe, _, j = swaps.refine_around(g, topo, np.arange(96), np.arange(96))
    for u in range(0, 96, 7):
        for v in range(96):
            other = pe.copy()
            other[[u, v]] = other[[v, u]]
            assert mapping_cost(g, topo, other) >= j - 1e-6


def test_dense_starts_are_kaminpar_and_mtkahypar(small_dense):
    g = dense_graph(96, 40)
    topo = hierarchy_topology([4, 2, 12], [1, 20, 100])
    starts, _ = plan(g, topo, 1000.0)
    backends = {opts.get("backend") for name, opts, _ in starts if name == "multisection"}
    assert backends == {"kaminpar", "mtkahypar"}
    assert not any(name == "multilevel" for name, _, _ in starts)
    m = map_tasks(g, topo, method="auto", work_limit=1.0)
    assert mapping_cost(g, topo, m.pe_of_task) <= mapping_cost(g, topo, np.arange(96))
    assert np.array_equal(m.pe_of_task, map_tasks(g, topo, method="auto", work_limit=1.0).pe_of_task)


def test_partitioners_are_priced_by_the_degree():
    sparse = partition.partition_seconds(2000, 2000 * 6, 40, "kahip", "fast")
    dense = partition.partition_seconds(2000, 2000 * 200, 40, "kahip", "fast")
    assert partition.density_factor("kahip", "fast", 2000, 2000 * 6) == 1.0
    factor = partition.density_factor("kahip", "fast", 2000, 2000 * 200)
    assert factor == pytest.approx((200 / 8) ** 0.45) and dense > factor * sparse
    assert partition.density_factor("kaminpar", "fast", 2000, 2000 * 200) == 1.0
