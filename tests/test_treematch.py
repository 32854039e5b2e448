"""TreeMatch: the paper's worked example, irregular trees, options."""

import numpy as np
import pytest

from rankmap.algorithms import map_tasks
from rankmap.algorithms.construct.placements import parse_pe_list
from rankmap.algorithms.construct.treematch import bottom_up, split_by_capacity, treematch_map
from rankmap.algorithms.construct.treematch_grouping import aggregate, extend, group_processes
from rankmap.cost import mapping_cost
from rankmap.graph import CommGraph
from rankmap.topology import Topology, TreeNode, hierarchy_topology

# Fig. 1(a) of Jeannot & Mercier
FIG1 = np.array([
    [0, 1000, 10, 1, 100, 1, 1, 1],
    [1000, 0, 1000, 1, 1, 100, 1, 1],
    [10, 1000, 0, 1000, 1, 1, 100, 1],
    [1, 1, 1000, 0, 1, 1, 1, 100],
    [100, 1, 1, 1, 0, 1000, 10, 1],
    [1, 100, 1, 1, 1000, 0, 1000, 1],
    [1, 1, 100, 1, 10, 1000, 0, 1000],
    [1, 1, 1, 100, 1, 1, 1000, 0]])


def exhaustive_optimum(graph, topo):
    """Minimum J over all placements of a small graph on a uniform tree.
    Empty sibling subtrees are interchangeable, so a task enters at most
    one empty child per node: every placement class is still visited."""
    used = np.zeros(topo.n_nodes, dtype=np.int64)
    pe_of_leaf = {int(leaf): pe for pe, leaf in enumerate(topo.leaf_of_pe)}
    pe = np.full(graph.n, -1)
    best = [np.inf]

    def leaves(node):
        ch = topo.children(node)
        if ch.size == 0:
            if used[node] == 0:
                yield node
            return
        seen_empty = False
        for c in ch.tolist():
            if used[c] == 0:
                if seen_empty:
                    continue
                seen_empty = True
            yield from leaves(c)

    def place(t):
        if t == graph.n:
            best[0] = min(best[0], mapping_cost(graph, topo, pe))
            return
        for leaf in list(leaves(0)):
            path = topo.pe_path(pe_of_leaf[leaf])
            used[path] += 1
            pe[t] = pe_of_leaf[leaf]
            place(t + 1)
            used[path] -= 1
        pe[t] = -1

    place(0)
    return best[0]


@pytest.fixture
def fig1():
    # 12 leaves, arities 2 -> 3 -> 2 from the root (innermost first below)
    return CommGraph.from_dense(FIG1), hierarchy_topology([2, 3, 2], [1, 10, 100])


def test_paper_lowest_level_grouping(fig1):
    g, _ = fig1
    groups = group_processes(g.symmetric, 2, "exhaustive")
    assert sorted(map(tuple, np.sort(groups, axis=1).tolist())) == [(0, 1), (2, 3), (4, 5), (6, 7)]


def test_paper_aggregated_and_extended_matrices(fig1):
    g, _ = fig1
    groups = np.array([[0, 1], [2, 3], [4, 5], [6, 7]])
    r = aggregate(g.symmetric, groups)  # S = B + B^T = 2 x Fig. 2(a)
    assert r[0, 1] == 2 * 1012 and r[0, 2] == 2 * 202 and r[0, 3] == 2 * 4
    ext = extend(r, 6)
    assert ext.shape == (6, 6) and ext[4].sum() == 0 and ext.sum() == r.sum()
    mid = group_processes(ext, 3, "exhaustive")
    # virtual processes {0, 1} and {2, 3} stay together, each with an empty one
    assert sorted(map(tuple, np.sort(mid, axis=1).tolist())) == [(0, 1, 4), (2, 3, 5)]


def test_paper_mapping_is_optimal(fig1):
    g, t = fig1
    m = map_tasks(g, t, method="treematch")
    # processes (0..3) under one root child, (4..7) under the other, one
    # empty socket each: the paper's 0,2,4,6,1,3,5,7 in our left-to-right PE ids
    assert m.pe_of_task.tolist() == [0, 1, 2, 3, 6, 7, 8, 9]
    j = mapping_cost(g, t, m.pe_of_task)
    assert j == exhaustive_optimum(g, t)
    assert j < mapping_cost(g, t, map_tasks(g, t, method="packed").pe_of_task)
    assert j < mapping_cost(g, t, map_tasks(g, t, method="round_robin").pe_of_task)


def planted(sizes, weights, seed=0):
    """Hierarchical pattern: at level i (sizes innermost first) every
    subgroup talks (about weights[i] bytes per task) to the next subgroup
    of the same group, position by position; labels shuffled by ``perm``:
    task perm[x] sits at planted position x."""
    n = int(np.prod(sizes))
    rng = np.random.default_rng(seed)
    src, dst, w = [], [], []
    sub = 1
    for size, weight in zip(sizes, weights):
        block = sub * size
        x = np.arange(n)
        nxt = (x // block) * block + (x % block + sub) % block
        src.append(x)
        dst.append(nxt)
        w.append(weight * rng.uniform(0.9, 1.1, size=n))
        sub = block
    perm = rng.permutation(n)
    g = CommGraph.from_edges(perm[np.concatenate(src)], perm[np.concatenate(dst)], np.concatenate(w), n=n)
    return g, perm


@pytest.mark.parametrize("grouping", ["auto", "fast", "kahip"])
def test_planted_pattern_recovered_at_scale(grouping):
    # 256 tasks: C(256, 2) > 30,000, so auto uses the fast grouping
    sizes, weights = [4, 4, 4, 4], [1000.0, 100.0, 10.0, 1.0]
    g, perm = planted(sizes, weights)
    t = hierarchy_topology(sizes, [1, 10, 100, 1000])
    pe = treematch_map(g, t, grouping=grouping)
    truth = np.empty(g.n, dtype=np.int64)
    truth[perm] = np.arange(g.n)
    j, j_opt = mapping_cost(g, t, pe), mapping_cost(g, t, truth)
    assert j <= 1.02 * j_opt
    assert j < 0.5 * mapping_cost(g, t, np.arange(g.n))


def irregular_tree():
    """Root (100) -> host A (10): 2 sockets (1) of 4 and 2 cores; host B
    (10): one socket of 3 cores plus a lone core directly under the host."""
    def socket(n):
        return TreeNode("socket", 1, [TreeNode("pu") for _ in range(n)])
    a = TreeNode("machine", 10, [socket(4), socket(2)], name="a")
    b = TreeNode("machine", 10, [socket(3), TreeNode("pu")], name="b")
    return Topology(TreeNode("cluster", 100, [a, b]))


def test_irregular_tree_matches_blocks():
    t = irregular_tree()
    # blocks of heavy talkers sized like the sockets: {4}, {2}, {3}, {1}
    blocks = [[0, 5, 7, 9], [1, 8], [2, 3, 6], [4]]
    M = np.ones((10, 10))
    for b in blocks:
        M[np.ix_(b, b)] = 1000
    g = CommGraph.from_dense(M)
    pe = map_tasks(g, t, method="treematch").pe_of_task
    socket_of_pe = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2, 3])
    for b in blocks:
        assert len(set(socket_of_pe[pe[b]].tolist())) == 1
    assert mapping_cost(g, t, pe) == exhaustive_optimum_small(g, t)


def exhaustive_optimum_small(g, t):
    import itertools
    return min(mapping_cost(g, t, np.asarray(p)) for p in itertools.permutations(range(t.n_pes), g.n))\
        if g.n <= 5 else _block_optimum(g, t)


def _block_optimum(g, t):
    # 10 tasks on 10 PEs: J is invariant under permutations inside a socket,
    # so enumerate which tasks fill each socket (multinomial, 12,600 cases)
    import itertools
    sockets = [[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]]
    best = np.inf
    tasks = set(range(g.n))
    for s0 in itertools.combinations(sorted(tasks), 4):
        r0 = tasks - set(s0)
        for s1 in itertools.combinations(sorted(r0), 2):
            r1 = r0 - set(s1)
            for s2 in itertools.combinations(sorted(r1), 3):
                s3 = tuple(r1 - set(s2))
                pe = np.empty(g.n, dtype=np.int64)
                for pes, ts in zip(sockets, (s0, s1, s2, s3)):
                    pe[list(ts)] = pes
                best = min(best, mapping_cost(g, t, pe))
    return best


def test_fewer_tasks_than_pes_on_irregular_tree_is_one_to_one():
    t = irregular_tree()
    g, _ = planted([2, 3], [50.0, 5.0], seed=3)
    pe = map_tasks(g, t, method="treematch").pe_of_task
    assert len(set(pe.tolist())) == g.n


def test_allowed_pes_binding_constraint():
    t = hierarchy_topology([2, 4, 4], [1, 10, 100])
    g, _ = planted([2, 2, 4], [100.0, 10.0, 1.0], seed=1)
    allowed = "0-7,16,18,20,22,24,26,28,30"
    pe = map_tasks(g, t, method="treematch", allowed_pes=allowed).pe_of_task
    assert set(pe.tolist()) <= set(parse_pe_list(allowed, t.n_pes).tolist())
    assert len(set(pe.tolist())) == g.n
    with pytest.raises(ValueError, match="do not fit"):
        treematch_map(g, t, allowed_pes=range(8))
    with pytest.raises(ValueError, match="allowed_pes"):
        treematch_map(g, t, allowed_pes="0-3,x")


def test_oversubscription_puts_heavy_pairs_on_one_pe():
    t = hierarchy_topology([4, 4], [1, 10])
    g, perm = planted([2, 4, 4], [1000.0, 10.0, 1.0], seed=2)  # 32 tasks, 16 PEs
    m = map_tasks(g, t, method="treematch")  # eps defaults to 3%: 2 tasks per PE
    pe = m.pe_of_task
    assert np.bincount(pe, minlength=16).max() == 2
    pairs = perm.reshape(-1, 2)  # tasks planted as pairs
    assert np.all(pe[pairs[:, 0]] == pe[pairs[:, 1]])
    with pytest.raises(ValueError, match="do not fit"):
        treematch_map(g, t, eps=0.03, oversubscribe=1)


def test_deterministic_and_options_checked():
    g, _ = planted([4, 4, 4], [100.0, 10.0, 1.0], seed=5)
    t = hierarchy_topology([8, 8], [1, 10])
    a = map_tasks(g, t, method="treematch", seed=3, grouping="kahip").pe_of_task
    b = map_tasks(g, t, method="treematch", seed=3, grouping="kahip").pe_of_task
    assert np.array_equal(a, b)
    for key, value in [("grouping", "magic"), ("split_arity", "sometimes")]:
        with pytest.raises(ValueError, match=key):
            treematch_map(g, t, **{key: value})


def test_split_arity_and_bottom_up_slots():
    g, perm = planted([2, 2, 2, 4], [1000.0, 100.0, 10.0, 1.0], seed=4)
    sym = g.symmetric
    for split in ("always", "never"):
        slots = bottom_up(sym, [8, 4], split_arity=split, grouping="fast")
        assert sorted(slots.tolist()) == list(range(32))
        groups_of_8 = slots.reshape(4, 8)
        owner = np.argsort(perm) // 8  # planted octet of each task
        for row in groups_of_8:
            assert len(set(owner[row].tolist())) == 1


def test_split_by_capacity_respects_capacities():
    g, perm = planted([4, 8], [100.0, 1.0], seed=6)
    part = split_by_capacity(g.symmetric, np.array([12, 4, 20]))
    # largest part first, filled to capacity; the 4-slot part stays empty
    assert np.bincount(part, minlength=3).tolist() == [12, 0, 20]
    # parts grow along traffic: the 20 tasks hold 5 whole planted quads
    quad = np.argsort(perm) // 4
    assert len(set(quad[part == 2].tolist())) == 5


def test_string_options_as_the_cli_passes_them(fig1):
    g, t = fig1
    # refine off is the paper's algorithm as published: same mapping here
    pe = map_tasks(g, t, method="treematch", group_refine="false", final_refine="false",
                   max_candidates="100", split_arity="never", allowed_pes="0-11").pe_of_task
    assert pe.tolist() == [0, 1, 2, 3, 6, 7, 8, 9]
    with pytest.raises(ValueError, match="group_refine"):
        treematch_map(g, t, group_refine="maybe")
    for bad in ("maybe", "0.5", "-1"):
        with pytest.raises(ValueError, match="final_refine"):
            treematch_map(g, t, final_refine=bad)


def grid_graph(cols, rows):
    """5-point stencil on a cols x rows grid, ranks numbered row by row."""
    idx = np.arange(cols * rows).reshape(rows, cols)
    pairs = [(idx[:, :-1], idx[:, 1:]), (idx[:-1], idx[1:])]
    src = np.concatenate([np.concatenate([a.ravel(), b.ravel()]) for a, b in pairs])
    dst = np.concatenate([np.concatenate([b.ravel(), a.ravel()]) for a, b in pairs])
    return CommGraph.from_edges(src, dst, np.ones(src.size), n=cols * rows)


def test_final_refinement_never_worse_than_packed_or_round_robin():
    # the rank order already follows the grid: the published algorithm loses to packed
    g, t = grid_graph(4, 4), hierarchy_topology([3, 3, 3], [1, 10, 100])
    cost = {m: mapping_cost(g, t, map_tasks(g, t, method=m).pe_of_task) for m in ("packed", "round_robin")}
    published = map_tasks(g, t, method="treematch", group_refine=False, final_refine=False).pe_of_task
    assert mapping_cost(g, t, published) > cost["packed"]
    for final in (True, 1, "n2"):
        pe = map_tasks(g, t, method="treematch", final_refine=final).pe_of_task
        assert mapping_cost(g, t, pe) <= min(cost.values())
        assert mapping_cost(g, t, pe) < mapping_cost(g, t, published)


def test_final_refinement_keeps_the_oversubscription_cap():
    g, _ = planted([2, 4, 4], [1000.0, 10.0, 1.0], seed=2)  # 32 tasks, 16 PEs
    t = hierarchy_topology([4, 4], [1, 10])
    for cap in (2, 3):  # eps = 1 alone would allow 4 tasks per PE
        pe = map_tasks(g, t, method="treematch", eps=1.0, oversubscribe=cap).pe_of_task
        assert np.bincount(pe, minlength=16).max() <= cap
        packed = map_tasks(g, t, method="packed", eps=1.0).pe_of_task
        assert mapping_cost(g, t, pe) <= mapping_cost(g, t, packed)


def test_a_time_or_work_limit_is_taken_like_any_method_takes_it(tmp_path):
    """map_tasks hands every method the budget; TreeMatch plans nothing with
    it and maps as without one, within the deadline."""
    from rankmap.cli import main as cli

    g, _ = planted([4, 4, 4], [100, 10, 1])
    t = hierarchy_topology([4, 4, 4], [1, 10, 100])
    plain = map_tasks(g, t, method="treematch").pe_of_task
    for limit in ({"time_limit": 5.0}, {"work_limit": 0.1}):
        assert np.array_equal(map_tasks(g, t, method="treematch", **limit).pe_of_task, plain)
    path = tmp_path / "g.txt"
    src, dst, b = g.coo()
    path.write_text("".join(f"{s} {d} {w:g}\n" for s, d, w in zip(src, dst, b)))
    assert cli(["map", str(path), "--hierarchy", "4:4:4", "--method", "treematch", "--time-limit", "5"]) == 0
