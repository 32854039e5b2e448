"""The distributed multilevel mapping's pieces, run serially (no MPI; the
same decisions under mpiexec are checked in test_distributed_mpi.py)."""

import numpy as np
import pytest

import rankmap
from rankmap.algorithms.distributed.balance import overflow_matching
from rankmap.algorithms.distributed.coarsen import Coarsening, Level
from rankmap.algorithms.distributed.multilevel import level_caps, machine_groups, multilevel_map, set_depth
from rankmap.algorithms.distributed.pairs import PairExchange, SetRemap, greedy_pairs, greedy_sets, labels_machine
from rankmap.algorithms.distributed.swap_rounds import Labels, LocalExchange, pe_labels, rows_of_graph, symmetric_rows
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
    groups, start, stop, parent = machine_groups(topo, 2)
    assert groups.n_pes == 6 and np.array_equal(stop - start, np.full(6, 4))
    assert np.array_equal(start, np.arange(0, 24, 4))
    # distances between groups are the machine's
    assert groups.distance(np.array([0, 0]), np.array([1, 3])).tolist() == [10.0, 100.0]


def test_set_depth_joins_nodes_where_groups_come_in_pairs():
    # sockets (depth 2) come two per node: the sets join sibling nodes instead
    assert set_depth(rankmap.topology_from_strings("24:2:21", "4:20:100"), 2, 8) == 1
    assert set_depth(rankmap.topology_from_strings("4:2:2:8", "1:5:10:100"), 3, 8) == 1
    # nodes with many siblings stay; a single set per parent needs no lift past the root's children
    assert set_depth(rankmap.topology_from_strings("4:16:8", "1:10:100"), 1, 8) == 1
    assert set_depth(rankmap.topology_from_strings("4:16:8:4", "1:10:50:100"), 2, 8) == 2
    assert set_depth(rankmap.topology_from_strings("24:2:21", "4:20:100"), 2, 2) == 2


def test_one_coarse_level_on_sockets_still_remaps_nodes():
    """One coarse level on 24:2:k leaves sockets as the groups; set rounds
    on the two sockets of a node cannot change which tasks share a node
    (J / auto 1.079 when they did so); sets of nodes come within 5%."""
    g = stencil3d(6)
    topo = rankmap.topology_from_strings("24:2:5", "4:20:100")
    pe, res = multilevel_map(g, topo, coarse_max=100)
    assert res.level_sizes == [216, 38] and res.set_gains[0] > 0
    auto = rankmap.map_tasks(g, topo, method="auto", seed=0).pe_of_task
    assert rankmap.mapping_cost(g, topo, pe) < 1.05 * rankmap.mapping_cost(g, topo, auto)


def test_sets_in_worker_processes_give_the_same_result(monkeypatch):
    """The sets of a round solved in two processes (as the serial
    simulation does on a machine of many cores) give the serial result."""
    from rankmap.algorithms.distributed import pairs

    pools = []

    def counted(workers, preload):
        pools.append(workers)
        return pairs_pool(workers, preload)

    pairs_pool = pairs.fork_server_pool
    monkeypatch.setattr(pairs, "fork_server_pool", counted)
    g = stencil3d(6)
    topo = rankmap.topology_from_strings("24:2:5", "4:20:100")
    sets_only = dict(coarse_max=100, set_size=2, set_rounds=1, replicas=1)  # one replica: the sets are the test
    serial, res = multilevel_map(g, topo, workers=1, **sets_only)
    assert pools == [] and res.set_gains and res.set_gains[0] > 0
    parallel, res2 = multilevel_map(g, topo, workers=2, **sets_only)
    assert pools == [2]  # one pool for all the set rounds
    assert np.array_equal(parallel, serial) and res2.set_gains == res.set_gains


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


@pytest.mark.parametrize("coarse_max, pair_rounds", [(4096, 0), (40, 0), (40, 2)])
def test_multilevel_maps_one_to_one_exactly_and_never_loses(coarse_max, pair_rounds):
    g = stencil3d(6)  # 216 tasks on 256 PEs: 40 stay free
    topo = rankmap.topology_from_strings("4:4:4:4", "1:10:100:1000")
    start = np.random.default_rng(0).permutation(256)[:g.n]
    pe, res = multilevel_map(g, topo, start, seed=2, replicas=2, coarse_max=coarse_max,
                             coarse_time_limit=0.05, pair_rounds=pair_rounds)
    assert len(np.unique(pe)) == g.n and pe.max() < 256
    assert res.J_after == pytest.approx(rankmap.mapping_cost(g, topo, pe))
    assert res.J_before == pytest.approx(rankmap.mapping_cost(g, topo, start))
    assert res.J_after < 0.5 * res.J_before
    assert (len(res.level_sizes) > 1) == (coarse_max < g.n)
    assert res.rounds == sum(res.coarsening_rounds) + len(res.group_moves) + sum(res.pair_rounds) + \
        len(res.set_gains) + res.refine.rounds
    assert res.rounds <= 30 and (len(res.pair_rounds) > 0) == (coarse_max < g.n and pair_rounds > 0)
    assert (len(res.set_gains) > 0) == (coarse_max < g.n)
    again, _ = multilevel_map(g, topo, start, seed=2, replicas=2, coarse_max=coarse_max,
                              coarse_time_limit=0.05, pair_rounds=pair_rounds)
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
    groups = Groups(np.array([0, 4]), np.array([4, 8]), np.zeros((2, 2), dtype=np.int64), np.zeros((2, 2)), 8,
                    np.zeros(2, dtype=np.int64))
    moves = GroupMoves(empty, np.zeros(0), np.zeros((0, 0)), groups, LocalExchange(10))
    assert moves.run(2) == [0] and moves.error is None
    pairs = PairExchange(empty, np.zeros(0), np.zeros(0), groups, np.array([4, 4]), LocalExchange(10))
    assert pairs.run(2) == [0.0] and pairs.error is None
    nothing = Labels(np.zeros(0, dtype=np.int64), np.zeros((0, 2), dtype=np.int64), np.zeros((0, 2)))
    sets = SetRemap(empty, nothing, groups, LocalExchange(10))
    assert sets.run(2) == [0.0] and sets.error is None
    co = Coarsening(Level(empty, np.zeros(0)), LocalExchange(10), cap=4)
    con, moved = co.run(2)
    assert moved == [0, 0] and len(con.coarse.rows.tasks) == 0  # a round, the lone round and con.members.shape == (0, 3)


def test_the_lone_round_leaves_fewer_vertices_alone():
    g = stencil3d(6)
    ex = LocalExchange(g.n)
    rows = symmetric_rows(np.arange(g.n), *rows_of_graph(g, np.arange(g.n)), ex)
    alone = []
    for lone in (False, True):
        co = Coarsening(Level(rows, np.ones(g.n)), ex, cap=3, seed=1)
        co.run(2, lone=lone)
        sizes = np.bincount(np.unique(co.label, return_inverse=True)[1])
        assert sizes.max() <= 3
        alone.append(int((sizes == 1).sum()))
    assert alone[1] < alone[0]


def test_greedy_pairs_takes_the_heaviest_first():
    partner = greedy_pairs(np.array([0, 1, 0, 2]), np.array([1, 2, 3, 3]), np.array([5.0, 9.0, 1.0, 2.0]), 5, 0)
    assert partner.tolist() == [3, 2, 1, 0, -1]


def test_pair_fm_fixes_a_bad_split_between_two_groups():
    """A 4 x 8 grid split column-wise into 4 x 4 halves, but with the two
    middle columns swapped: FM between the two sibling groups restores the
    straight cut, loads stay at the capacity."""
    from rankmap.algorithms.distributed.balance import Groups

    side, n = 8, 32
    idx = np.arange(n).reshape(4, side)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    g = rankmap.CommGraph.from_edges(src, dst, np.ones(len(src)), n=n)
    ex = LocalExchange(n)
    rows = symmetric_rows(np.arange(n), *rows_of_graph(g, np.arange(n)), ex)
    col = np.arange(n) % side
    group = (col >= 4).astype(np.int64)
    group[col == 3], group[col == 4] = 1, 0
    groups = Groups(np.array([0, 16]), np.array([16, 32]), np.zeros((2, 2), dtype=np.int64), np.zeros((2, 2)),
                    32, np.zeros(2, dtype=np.int64))
    pairs = PairExchange(rows, group, np.ones(n), groups, np.array([16, 16]), ex)
    gains = pairs.run(3)
    cut = lambda gr: int((gr[src] != gr[dst]).sum())  # noqa: E731
    assert cut(pairs.group) == 4 < cut(group) and gains[0] > 0
    assert np.bincount(pairs.group).tolist() == [16, 16]


def test_greedy_sets_join_the_heaviest_up_to_the_size():
    a, b = np.array([0, 1, 2, 0, 4]), np.array([1, 2, 3, 3, 5])
    w = np.array([9.0, 8.0, 7.0, 1.0, 5.0])
    assert greedy_sets(a, b, w, 7, 0, 4).tolist() == [0, 0, 0, 0, 4, 4, -1]
    assert greedy_sets(a, b, w, 7, 0, 3).tolist() == [0, 0, 0, -1, 4, 4, -1]
    # pairs that were apart last round go first, whatever their traffic
    apart = np.array([False, True, True, True, False])
    assert greedy_sets(a, b, w, 7, 0, 2, apart).tolist() == [0, 1, 1, 0, 4, 4, -1]
    assert greedy_sets(a, b, w, 7, 0, 2).tolist() == [0, 0, 2, 2, 4, 4, -1]


def test_labels_machine_keeps_the_distances():
    topo = rankmap.topology_from_strings("2:3:2:2", "1:10:100:1000")
    pes = np.array([1, 4, 5, 6, 7, 13, 20])  # some PEs of several nodes, in order
    anc, dist = pe_labels(topo, pes)
    sub = labels_machine(anc, dist)
    assert sub.n_pes == len(pes)
    i, j = np.triu_indices(len(pes), 1)
    assert np.array_equal(sub.distance(i, j), topo.distance(pes[i], pes[j]))


def test_set_remap_fixes_the_cut_of_four_groups():
    """An 8 x 8 grid on four groups of 16 PEs (siblings), placed row by row
    with the rows shuffled: auto on the set of four groups finds a far
    smaller cut; every task keeps one PE of the set, J only falls."""
    from rankmap.algorithms.distributed.multilevel import machine_groups

    side, n = 8, 64
    idx = np.arange(n).reshape(side, side)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    g = rankmap.CommGraph.from_edges(src, dst, np.full(len(src), 10.0), n=n)
    topo = rankmap.topology_from_strings("4:4:4", "1:10:100")
    _, start, stop, parent = machine_groups(topo, 1)
    anc, dist = pe_labels(topo, start)
    from rankmap.algorithms.distributed.balance import Groups

    groups = Groups(start, stop, anc, dist, topo.n_pes, parent)
    rows_order = np.random.default_rng(3).permutation(side)
    pe = (rows_order[:, None] * side + np.arange(side)).ravel()  # grid row r on PEs of row rows_order[r]
    ex = LocalExchange(n)
    rows = symmetric_rows(np.arange(n), *rows_of_graph(g, np.arange(n)), ex)
    labels = Labels.of(topo, pe)
    from rankmap.deadline import Deadline

    late = SetRemap(rows, labels, groups, ex, set_size=4, time_limit=0.2)
    assert late.run(2, Deadline(0.0)) == [] and np.array_equal(labels.pe, pe)  # no time: no round
    sets = SetRemap(rows, labels, groups, ex, set_size=4, time_limit=0.2)
    before = rankmap.mapping_cost(g, topo, pe)
    gains = sets.run(2)
    after = rankmap.mapping_cost(g, topo, labels.pe)
    assert sorted(labels.pe.tolist()) == list(range(n))
    assert gains[0] > 0 and after < 0.8 * before
    assert np.array_equal(labels.anc, pe_labels(topo, labels.pe)[0])
    assert np.array_equal(sets.group, labels.pe // 16)
