"""The distributed multilevel mapping's pieces, run serially (no MPI; the
same decisions under mpiexec are checked in test_distributed_mpi.py)."""

import numpy as np
import pytest

import rankmap
from rankmap.algorithms.distributed.balance import overflow_matching
from rankmap.algorithms.distributed.coarsen import Coarsening, Level
from rankmap.algorithms.distributed.multilevel import level_caps, machine_groups, multilevel_map
from rankmap.algorithms.distributed.swap_rounds import LocalExchange, rows_of_graph, symmetric_rows
from rankmap.topology import Topology, TreeNode


def stencil3d(side, weights=(1000.0, 100.0, 10.0)):
    """27-point stencil on a side^3 grid (LULESH's pattern)."""
    idx = np.arange(side ** 3).reshape(side, side, side)
    src, dst, w = [], [], []
    for off in np.ndindex(3, 3, 3):
        o = np.array(off) - 1
        k = int(np.abs(o).sum())
        if k == 0:
            continue
        a = idx[tuple(slice(max(0, -x), side - max(0, x)) for x in o)].ravel()
        b = idx[tuple(slice(max(0, x), side - max(0, -x)) for x in o)].ravel()
        src.append(a)
        dst.append(b)
        w.append(np.full(len(a), weights[k - 1]))
    return rankmap.CommGraph.from_edges(np.concatenate(src), np.concatenate(dst), np.concatenate(w),
                                        n=side ** 3)


def test_level_caps_follow_the_machine():
    assert level_caps(rankmap.topology_from_strings("24:2:21", "4:20:100")) == [(2, 24), (1, 48)]
    assert level_caps(rankmap.topology_from_strings("4:16:8", "1:10:100")) == [(2, 4), (1, 64)]
    # one child per group adds nothing; an irregular machine takes the smallest group
    core = lambda: TreeNode("core", 1, [TreeNode("pu"), TreeNode("pu")])  # noqa: E731
    a = TreeNode("machine", 20, [TreeNode("package", 5, [core(), core(), core()])], name="a")
    b = TreeNode("machine", 20, [TreeNode("package", 5, [core(), core()])], name="b")
    caps = level_caps(Topology(TreeNode("switch", 100, [a, b])))
    assert [c for _, c in caps] == [2, 4]


def test_machine_groups_cut_the_tree():
    topo = rankmap.topology_from_strings("4:3:2", "1:10:100")
    groups, start, stop = machine_groups(topo, 2)
    assert groups.n_pes == 6 and np.array_equal(stop - start, np.full(6, 4))
    assert np.array_equal(start, np.arange(0, 24, 4))
    # distances between groups are the machine's
    assert groups.distance(np.array([0, 0]), np.array([1, 3])).tolist() == [10.0, 100.0]


def test_coarsening_respects_the_cap_and_keeps_every_byte():
    g = stencil3d(6)
    n = g.n
    ex = LocalExchange(n)
    rows = symmetric_rows(np.arange(n), *rows_of_graph(g, np.arange(n)), ex)
    co = Coarsening(Level(rows, np.ones(n)), ex, cap=5, seed=1)
    con, moved = co.run(4)
    assert moved[0] > 0
    sizes = np.bincount(np.unique(co.label, return_inverse=True)[1])
    assert sizes.max() <= 5 and sizes.sum() == n
    coarse = con.coarse
    assert np.array_equal(coarse.rows.tasks, np.unique(co.label))
    assert np.array_equal(coarse.weight, np.bincount(np.searchsorted(coarse.rows.tasks, co.label)))
    # the coarse edges carry exactly the traffic between clusters, both ways
    s = g.symmetric.tocoo()
    cut = s.data[co.label[s.row] != co.label[s.col]].sum()
    assert coarse.rows.weights.sum() == pytest.approx(cut)
    assert len(con.members) == n and set(con.members[:, 1].astype(int)) == set(range(n))


def test_overflow_goes_to_the_nearest_free_pes():
    cap = np.array([4, 4, 4, 4, 4])
    # group 0 sends 2 to group 2 (the only room), group 4 sends 1 there after them
    assert overflow_matching(np.array([6, 4, 1, 4, 5]), cap) == [(0, 2, 2, 0), (4, 2, 1, 2)]
    # nearest first: group 0's excess goes to group 1, not 4
    assert overflow_matching(np.array([5, 3, 4, 4, 3]), cap) == [(0, 1, 1, 0)]
    with pytest.raises(ValueError, match="more tasks than PEs"):
        overflow_matching(np.array([5, 4]), np.array([4, 4]))


@pytest.mark.parametrize("coarse_max", [4096, 40])
def test_multilevel_maps_one_to_one_exactly_and_never_loses(coarse_max):
    g = stencil3d(6)  # 216 tasks on 256 PEs: 40 stay free
    topo = rankmap.topology_from_strings("4:4:4:4", "1:10:100:1000")
    start = np.random.default_rng(0).permutation(256)[:g.n]
    pe, res = multilevel_map(g, topo, start, seed=2, replicas=2, coarse_max=coarse_max,
                             coarse_time_limit=0.05)
    assert len(np.unique(pe)) == g.n and pe.max() < 256
    assert res.J_after == pytest.approx(rankmap.mapping_cost(g, topo, pe))
    assert res.J_before == pytest.approx(rankmap.mapping_cost(g, topo, start))
    assert res.J_after < 0.5 * res.J_before
    assert (len(res.level_sizes) > 1) == (coarse_max < g.n)
    assert res.rounds == sum(res.coarsening_rounds) + len(res.group_moves) + res.refine.rounds
    again, _ = multilevel_map(g, topo, start, seed=2, replicas=2, coarse_max=coarse_max,
                              coarse_time_limit=0.05)
    assert np.array_equal(pe, again)
    # from a placement it cannot beat, it keeps the placement
    kept, res2 = multilevel_map(g, topo, pe, seed=2, replicas=1, coarse_max=coarse_max,
                                coarse_time_limit=0.05, refine_rounds=0)
    assert rankmap.mapping_cost(g, topo, kept) <= res.J_after * (1 + 1e-12)


def test_multilevel_refuses_more_tasks_than_pes():
    g = stencil3d(3)
    with pytest.raises(ValueError, match="one-to-one"):
        multilevel_map(g, rankmap.topology_from_strings("4:4", "1:10"))


def test_an_owner_without_vertices_takes_part():
    """Above the task level many ranks hold no cluster: their steps must run
    (every collective) on empty arrays."""
    from rankmap.algorithms.distributed.balance import GroupMoves, Groups
    from rankmap.algorithms.distributed.swap_rounds import Rows

    empty = Rows(np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                 np.zeros(0), 10)
    groups = Groups(np.array([0, 4]), np.array([4, 8]), np.zeros((2, 2), dtype=np.int64), np.zeros((2, 2)), 8)
    moves = GroupMoves(empty, np.zeros(0), np.zeros((0, 0)), groups, LocalExchange(10))
    assert moves.run(2) == [0] and moves.error is None
    co = Coarsening(Level(empty, np.zeros(0)), LocalExchange(10), cap=4)
    con, moved = co.run(2)
    assert moved == [0] and len(con.coarse.rows.tasks) == 0 and con.members.shape == (0, 3)
