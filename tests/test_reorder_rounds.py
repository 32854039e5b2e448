"""The distributed swap rounds' math, run serially (no MPI)."""

import subprocess
import sys

import numpy as np
import pytest

import rankmap
from rankmap.algorithms.distributed.swap_rounds import (REPLICA_OFFSET, Labels, LocalExchange, Rows, block_owner,
                                           block_tasks, label_distance, refine_rounds, replicate,
                                           rows_of_graph, symmetric_rows)
from rankmap.topology import Topology, TreeNode


def grid_graph(nx, ny, w=100.0):
    idx = np.arange(nx * ny).reshape(nx, ny)
    src = np.concatenate([idx[:-1].ravel(), idx[:, :-1].ravel()])
    dst = np.concatenate([idx[1:].ravel(), idx[:, 1:].ravel()])
    return rankmap.CommGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]),
                                        np.full(2 * len(src), w), n=nx * ny)


def irregular_machine():
    """Two hosts of different shapes, leaves at different depths."""
    core = lambda: TreeNode("core", 1, [TreeNode("pu"), TreeNode("pu")])  # noqa: E731
    a = TreeNode("machine", 20, [TreeNode("package", 5, [core(), core()]), core()], name="a")
    b = TreeNode("machine", 20, [TreeNode("pu") for _ in range(4)], name="b")
    return Topology(TreeNode("switch", 100, [a, b]))


@pytest.mark.parametrize("topo", [rankmap.topology_from_strings("2:3:2", "1:10:100"),
                                  irregular_machine()])
def test_label_distance_is_the_tree_distance(topo):
    p, q = np.meshgrid(np.arange(topo.n_pes), np.arange(topo.n_pes))
    p, q = p.ravel(), q.ravel()
    a, b = Labels.of(topo, p), Labels.of(topo, q)
    assert np.array_equal(label_distance(a.anc, a.dist, b.anc), topo.distance(p, q))


def test_block_distribution_covers_every_task_once():
    for n, size in [(10, 3), (7, 7), (16, 5), (3, 8)]:
        tasks = np.concatenate([block_tasks(r, n, size) for r in range(size)])
        assert np.array_equal(tasks, np.arange(n))
        for r in range(size):
            assert np.all(block_owner(block_tasks(r, n, size), n, size) == r)


@pytest.mark.parametrize("seed", [0, 1])
def test_rounds_lower_J_exactly_and_keep_a_permutation(seed):
    g = grid_graph(8, 8)
    topo = rankmap.topology_from_strings("4:4:4", "1:10:100")
    start = np.random.default_rng(seed).permutation(64)
    pe, res = refine_rounds(g, topo, start, seed=seed)
    assert sorted(pe.tolist()) == list(range(64))
    assert res.J_before == pytest.approx(rankmap.mapping_cost(g, topo, start))
    # committed gains add up exactly: the bookkeeping equals the cost model
    assert res.J_after == pytest.approx(rankmap.mapping_cost(g, topo, pe))
    assert res.J_after < 0.75 * res.J_before
    js = [h["J"] for h in res.history]
    assert all(b < a for a, b in zip([res.J_before] + js, js) if b != a) and res.swaps > 0
    # deterministic for a seed, and the input is not modified
    again, _ = refine_rounds(g, topo, start, seed=seed)
    assert np.array_equal(pe, again)
    assert np.array_equal(start, np.random.default_rng(seed).permutation(64))


def test_rounds_keep_a_local_optimum():
    g = grid_graph(4, 4)
    topo = rankmap.topology_from_strings("4:4", "1:10")
    # rows of the grid on nodes: no single swap can help
    pe, res = refine_rounds(g, topo, np.arange(16))
    assert res.J_after == res.J_before and res.swaps == 0
    assert np.array_equal(pe, np.arange(16))


def best_swap_gain(graph, topo, pe) -> float:
    """The largest decrease of J by swapping the PEs of two tasks, by brute
    force over all pairs (dense, test-sized)."""
    s = graph.symmetric.toarray()
    c = topo.distance(*np.meshgrid(pe, pe, indexing="ij"))
    move = s @ c - (s * c).sum(axis=1)[:, None]  # [u, v]: J change of u taking v's PE
    delta = move + move.T + 2 * s * c  # the u-v edge keeps its length
    return float(-delta.min())


def test_rounds_end_where_no_single_swap_improves():
    # random traffic on hosts of 64 PEs: a host has more members than one
    # round's directory shows, so only a check round sees every place
    rng = np.random.default_rng(5)
    n = 128
    src, dst = rng.integers(0, n, 4 * n), rng.integers(0, n, 4 * n)
    g = rankmap.CommGraph.from_edges(src, dst, rng.integers(1, 1000, 4 * n).astype(float), n=n)
    topo = rankmap.topology_from_strings("4:16:2", "1:10:100")
    pe, res = refine_rounds(g, topo, rng.permutation(n), seed=1, min_improvement=0.0, max_rounds=200,
                            replicas=2)
    assert res.history[-1]["check"] and res.history[-1]["swaps"] == 0
    assert best_swap_gain(g, topo, pe) <= 1e-9 * res.J_after


def test_rounds_on_an_irregular_machine_and_isolated_tasks():
    topo = irregular_machine()
    n = topo.n_pes
    # a scrambled ring plus an isolated task (no traffic at all)
    order = np.random.default_rng(3).permutation(n - 1)
    src, dst = order, np.roll(order, 1)
    g = rankmap.CommGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]),
                                     np.full(2 * len(src), 8.0), n=n)
    pe, res = refine_rounds(g, topo, np.arange(n), seed=2)
    assert sorted(pe.tolist()) == list(range(n))
    assert res.J_after == pytest.approx(rankmap.mapping_cost(g, topo, pe)) and \
        res.J_after < res.J_before


def test_rounds_refuse_a_mapping_that_is_not_one_to_one():
    g = grid_graph(2, 2)
    with pytest.raises(ValueError, match="one-to-one"):
        refine_rounds(g, rankmap.topology_from_strings("4", "1"), [0, 0, 1, 2])


def test_import_rankmap_does_not_import_mpi4py():
    code = ("import sys, rankmap, rankmap.algorithms.distributed.swap_rounds; "
            "assert 'mpi4py' not in sys.modules; print(callable(rankmap.reorder_comm))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_replicas_are_copies_that_never_meet():
    g = grid_graph(3, 3)
    topo = rankmap.topology_from_strings("3:3", "1:10")
    ex = LocalExchange(9)
    rows = symmetric_rows(np.arange(9), *rows_of_graph(g, np.arange(9)), ex)
    lab = Labels.of(topo, np.arange(9))
    big, blab = replicate(rows, lab, 3)
    assert isinstance(big, Rows) and big.n_tasks == 27 and np.array_equal(big.tasks, np.arange(27))
    for r in range(3):  # copy r: the same rows, shifted ids, the same distances
        sl = slice(big.indptr[9 * r], big.indptr[9 * r + 9])
        assert np.array_equal(big.cols[sl], rows.cols + 9 * r)
        assert np.array_equal(blab.anc[9 * r:9 * r + 9], lab.anc + r * REPLICA_OFFSET)
        assert np.array_equal(blab.dist[9 * r:9 * r + 9], lab.dist)
    # no ancestor (so no group, no distance) is shared between two copies
    assert not np.intersect1d(blab.anc[:9], blab.anc[9:18]).size


def test_replicas_return_the_best_copy_exactly():
    g = grid_graph(8, 8)
    topo = rankmap.topology_from_strings("4:4:4", "1:10:100")
    start = np.random.default_rng(2).permutation(64)
    results = {r: refine_rounds(g, topo, start, seed=0, replicas=r) for r in (1, 4)}
    for pe, res in results.values():
        assert sorted(pe.tolist()) == list(range(64))
        assert res.J_after == pytest.approx(rankmap.mapping_cost(g, topo, pe))
        assert res.J_after < res.J_before
    # copies take different paths: four local optima give a better best here
    assert results[4][1].J_after < results[1][1].J_after


def test_kicks_keep_the_best_and_never_lose():
    g = grid_graph(8, 8)
    topo = rankmap.topology_from_strings("4:4:4", "1:10:100")
    start = np.random.default_rng(2).permutation(64)
    plain, res0 = refine_rounds(g, topo, start, seed=1, replicas=2)
    kicked, res = refine_rounds(g, topo, start, seed=1, replicas=2, kicks=3, kick_fraction=0.3)
    assert sum(h["kick"] for h in res.history) == 3
    # the first descent is the same, kicks are only kept when J falls
    assert res.J_after <= res0.J_after
    assert res.J_after == pytest.approx(rankmap.mapping_cost(g, topo, kicked))
    assert sorted(kicked.tolist()) == list(range(64))
    again, _ = refine_rounds(g, topo, start, seed=1, replicas=2, kicks=3, kick_fraction=0.3)
    assert np.array_equal(kicked, again)


def test_the_rounds_import_neither_scipy_nor_the_mapping_methods():
    """An MPI rank of the distributed path loads numpy and the rounds only
    (the method registry imports the methods on first lookup)."""
    heavy = ("scipy", "kahip", "mtkahypar", "matplotlib")
    code = ("import sys; import rankmap.algorithms.distributed.swap_rounds; "
            f"print(sorted(m for m in {heavy!r} if m in sys.modules)); "
            "from rankmap.algorithms import method_names; print('auto' in method_names())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "True"]
