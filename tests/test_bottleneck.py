"""The link-time objective: routes agree with the link loads of
cost.evaluate; the search never raises (T, J), keeps J under its cap, and on
instances of up to 16 tasks reaches the optimum of an exhaustive search."""

import itertools

import numpy as np
import pytest

from rankmap.algorithms import map_tasks
from rankmap.algorithms.refine.bottleneck import bottleneck_refine, leximin_compare, link_routes
from rankmap.cost import all_link_loads, evaluate
from rankmap.graph import CommGraph
from rankmap.topology import MeshTopology, Topology, TreeNode, load_topology, topology_from_strings
from rankmap.topology.bandwidth import link_bandwidths

TOPOLOGIES = [MeshTopology((4, 4), torus=True, cores=2), MeshTopology((3, 4)),
              topology_from_strings("2:4:4", "1:10:100")]


def random_graph(n, m, seed):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    return CommGraph.from_edges(src, dst, rng.integers(1, 1000, m).astype(float), n=n)


def halo(dims, seed, nbytes=1.0):
    """A halo exchange on a process grid, ranks numbered in a random order."""
    n = int(np.prod(dims))
    name = np.random.default_rng(seed).permutation(n)
    src, dst = [], []
    for r in range(n):
        c = np.unravel_index(r, dims)
        for axis in range(len(dims)):
            for step in (-1, 1):
                cc = list(c)
                cc[axis] += step
                if 0 <= cc[axis] < dims[axis]:
                    src.append(name[r])
                    dst.append(name[np.ravel_multi_index(cc, dims)])
    return CommGraph.from_edges(np.array(src), np.array(dst), np.full(len(src), nbytes), n=n)


def key(graph, topo, pe):
    rep = evaluate(graph, topo, pe)
    return rep.link_time, rep.J


# ---------------------------------------------------------------- exhaustive
def exhaustive_over_maps(graph, topo, n):
    """(T, J) optimum over every one-to-one map of n tasks into the PEs,
    every link's load from a table of which links each PE pair crosses."""
    k, n_links = topo.n_pes, 2 * topo.n_nodes
    p, q = np.divmod(np.arange(k * k), k)
    pair, link = link_routes(topo, p, q)
    crosses = np.zeros((k * k, n_links))
    crosses[pair, link] = 1.0
    inverse = link_bandwidths(topo).inverse
    src, dst, w = graph.coo()
    maps = np.array(list(itertools.permutations(range(k), n)), dtype=np.int64)
    maps = maps[np.unique(maps, axis=0, return_index=True)[1]]
    best = (np.inf, np.inf)
    for chunk in np.array_split(maps, max(1, len(maps) // 5000)):
        route = chunk[:, src] * k + chunk[:, dst]                      # (maps, pairs)
        loads = np.einsum("mp,mpl->ml", np.broadcast_to(w, route.shape), crosses[route])
        t = (loads * inverse).max(1)
        j = (w * topo.distance(chunk[:, src], chunk[:, dst])).sum(1)
        i = np.lexsort((j, t))[0]
        best = min(best, (t[i], j[i]))
    return best


def exhaustive_over_groups(graph, groups, size):
    """The busiest node link's bytes, optimal over every split of the tasks
    into ``groups`` nodes of ``size`` (a two-level machine: which PE of a
    node a task takes changes nothing), and the fewest bytes between nodes
    among those splits."""
    part = np.zeros((1, 1), dtype=np.int8)  # canonical: groups numbered by first use
    for _ in range(1, graph.n):
        count = np.stack([(part == g).sum(1) for g in range(groups)], 1)
        used = part.max(1) + 1
        rows = [np.flatnonzero((count[:, g] < size) & (g <= used)) for g in range(groups)]
        part = np.concatenate([part[np.concatenate(rows)],
                               np.concatenate([np.full(r.size, g, np.int8) for g, r in enumerate(rows)])[:, None]], 1)
    src, dst, w = graph.coo()
    best = (np.inf, np.inf)
    for chunk in np.array_split(part, max(1, len(part) // 200_000)):
        a, b = chunk[:, src], chunk[:, dst]
        cross = (a != b) * w
        out = np.stack([(cross * (a == g)).sum(1) for g in range(groups)]
                       + [(cross * (b == g)).sum(1) for g in range(groups)], 1).max(1)
        between = cross.sum(1)
        i = np.lexsort((between, out))[0]
        best = min(best, (out[i], between[i]))
    return best


def test_the_scrambled_halo_reaches_the_blocks_that_halve_its_busiest_link():
    """The 2 x 2 x 4 halo on 4 nodes of 4: slabs of 2 x 2 x 1 cut as few grid
    edges as blocks of 2 x 1 x 2 (J the same) but send 8 faces from the
    middle nodes, blocks 6 from every node: the exhaustive optimum."""
    g = halo((2, 2, 4), seed=5, nbytes=256 * 1024)
    topo = topology_from_strings("4:4", "1:100")
    assert exhaustive_over_groups(g, 4, 4) == (6 * 256 * 1024, 24 * 256 * 1024)
    z = np.argsort(np.random.default_rng(5).permutation(16)) % 4  # each task's z (slab = node)
    slabs = np.empty(16, dtype=np.int64)
    slabs[np.argsort(z, kind="stable")] = np.arange(16)
    starts = [slabs] + [map_tasks(g, topo, method="auto", objective="sum", seed=s).pe_of_task for s in range(3)]
    for start in starts:
        out = bottleneck_refine(g, topo, start, j_cap=evaluate(g, topo, start).J)
        rep = evaluate(g, topo, out)
        assert rep.busiest_link_bytes == 6 * 256 * 1024 and rep.J == evaluate(g, topo, slabs).J


@pytest.mark.parametrize("seed", range(4))
def test_twelve_tasks_on_three_nodes_reach_the_exhaustive_optimum(seed):
    g = random_graph(12, 30, seed)
    topo = topology_from_strings("4:3", "1:100")
    start = np.random.default_rng(seed).permutation(12)
    out = bottleneck_refine(g, topo, start, seed=seed)
    node = out // 4
    src, dst, w = g.coo()
    cross = (node[src] != node[dst]) * w
    busiest = max(max(cross[node[src] == k].sum(), cross[node[dst] == k].sum()) for k in range(3))
    assert (busiest, cross.sum()) == exhaustive_over_groups(g, 3, 4)


@pytest.mark.parametrize("hierarchy,distances,n,seed", [("2:2:2", "1:10:100", 8, 0), ("2:2:2", "1:10:100", 8, 1),
                                                        ("2:2:2", "1:10:100", 6, 2), ("4:2", "1:100", 5, 3)])
def test_three_levels_and_free_pes_reach_the_exhaustive_optimum(hierarchy, distances, n, seed):
    """Every level's links count (the distances make the bandwidths); with
    fewer tasks than PEs the search moves tasks into free PEs."""
    topo = topology_from_strings(hierarchy, distances)
    g = random_graph(n, 3 * n, seed)
    start = np.random.default_rng(seed).permutation(topo.n_pes)[:n]
    out = bottleneck_refine(g, topo, start, seed=seed)
    assert key(g, topo, out) == pytest.approx(exhaustive_over_maps(g, topo, n), rel=1e-12)


def test_slower_rack_uplinks_weigh_more(tmp_path):
    """A cluster file's bandwidths decide which link is the busiest: with a
    slow rack uplink the search keeps heavy pairs inside a rack."""
    f = tmp_path / "c.topo"
    f.write_text("cluster\nhierarchy 2 distances 1\nnodes n[1-4]\n"
                 "network 2 distances 100:1000 bandwidths 100mbit:10mbit\n")
    topo = load_topology(str(f))
    g = random_graph(8, 24, 7)
    start = np.random.default_rng(7).permutation(8)
    out = bottleneck_refine(g, topo, start, seed=7)
    assert key(g, topo, out) == pytest.approx(exhaustive_over_maps(g, topo, 8), rel=1e-12)


# ----------------------------------------------------------------- contracts
@pytest.mark.parametrize("topo", TOPOLOGIES)
def test_routes_add_up_to_link_loads(topo):
    rng = np.random.default_rng(0)
    p, q = rng.integers(0, topo.n_pes, 300), rng.integers(0, topo.n_pes, 300)
    w = rng.random(300)
    pair, link = link_routes(topo, p, q)
    loads = np.bincount(link, weights=w[pair], minlength=all_link_loads(topo, p, q, w).size)
    assert np.allclose(loads, all_link_loads(topo, p, q, w))
    assert np.all(np.bincount(pair, minlength=300)[p == q] == 0)


@pytest.mark.parametrize("topo", TOPOLOGIES)
def test_refinement_lowers_the_link_time_and_keeps_the_cap(topo):
    n = min(topo.n_pes, 24)
    g = random_graph(n, 150, seed=1)
    start = np.random.default_rng(2).permutation(topo.n_pes)[:n]
    before = evaluate(g, topo, start)
    out = bottleneck_refine(g, topo, start, max_evals=20_000)
    after = evaluate(g, topo, out)  # validates one-to-one
    assert after.link_time < before.link_time
    capped = evaluate(g, topo, bottleneck_refine(g, topo, start, j_cap=before.J, max_evals=20_000))
    assert capped.J <= before.J and capped.link_time <= before.link_time
    again = bottleneck_refine(g, topo, out, max_evals=20_000)
    assert key(g, topo, again) <= (after.link_time, after.J)


def test_leximin_order():
    assert leximin_compare([5, 3, 1], [4, 4, 4], 0) < 0      # the largest falls
    assert leximin_compare([5, 3, 1], [5, 1, 3], 0) == 0     # the same values
    assert leximin_compare([5, 3, 1], [5, 3, 2], 0) > 0      # the third rises
    assert leximin_compare([5, 3, 1], [3, 5, 1 + 1e-12], 1e-9) == 0


def test_bottleneck_method_against_sum_objective_and_makespan():
    topo = MeshTopology((4, 4, 4), torus=True)
    g = random_graph(64, 400, seed=3)
    s = map_tasks(g, topo, method="mht").pe_of_task
    b = map_tasks(g, topo, method="bottleneck", start="mht").pe_of_task
    rs, rb = evaluate(g, topo, s, comm_factor=1e-3), evaluate(g, topo, b, comm_factor=1e-3)
    assert rb.bottleneck < rs.bottleneck
    assert rb.makespan == max(rb.max_pe_load, 1e-3 * rb.bottleneck)
    with pytest.raises(ValueError, match="unknown start method"):
        map_tasks(g, topo, method="bottleneck", start="nope")


def test_many_tasks_per_pe_keep_their_balance():
    topo = topology_from_strings("2:2:2", "1:10:100")
    g = random_graph(16, 80, seed=4)
    start = np.repeat(np.arange(8), 2)
    out = bottleneck_refine(g, topo, start, eps=0.0)
    assert np.bincount(out, minlength=8).max() <= 2
    assert key(g, topo, out) <= key(g, topo, start)


# ----------------------------------------------------------------- objectives
def test_objectives_of_map_tasks():
    """auto's default objective finds the halving blocks, J within the slack
    of J alone; a named method keeps its own result; "bottleneck" ignores J."""
    from rankmap.algorithms import J_SLACK, objective_of, prefers

    g = halo((2, 2, 4), seed=5, nbytes=256 * 1024)
    topo = topology_from_strings("4:4", "1:100")
    for seed in range(3):
        default = evaluate(g, topo, map_tasks(g, topo, method="auto", seed=seed).pe_of_task)
        alone = evaluate(g, topo, map_tasks(g, topo, method="auto", seed=seed, objective="sum").pe_of_task)
        assert default.busiest_link_bytes == 6 * 256 * 1024 and default.J <= (1 + J_SLACK) * alone.J
    greedy = map_tasks(g, topo, method="greedy").pe_of_task
    assert np.array_equal(greedy, map_tasks(g, topo, method="greedy", objective="sum").pe_of_task)
    lowered = map_tasks(g, topo, method="greedy", objective="bottleneck").pe_of_task
    assert key(g, topo, lowered) <= key(g, topo, greedy)
    assert objective_of("auto") == "time" and objective_of("greedy") == "sum"
    with pytest.raises(ValueError, match="unknown objective 'fast'"):
        map_tasks(g, topo, method="greedy", objective="fast")
    # "time": J decides beyond the slack, the link time within it
    assert prefers("time", (1.0, 100.5), (2.0, 100.0)) and not prefers("time", (1.0, 102.0), (2.0, 100.0))
    assert prefers("time", (2.0, 97.0), (1.0, 100.0)) and prefers("bottleneck", (1.0, 150.0), (2.0, 100.0))
    assert not prefers("sum", (1.0, 100.5), (2.0, 100.0))


def test_the_search_keeps_its_loads_and_j_exact():
    """After descents, kicks and rollbacks the loads and J it carries are
    those of its mapping."""
    from rankmap.algorithms.refine.bottleneck import _Search
    from rankmap.cost import mapping_cost

    topo = topology_from_strings("2:2:3", "1:10:100")
    g = random_graph(12, 40, 9)
    s = _Search(g, topo, np.arange(12), None, None, np.random.default_rng(0))
    from rankmap.deadline import Deadline

    for _ in range(5):
        s.mark()
        s.kick()
        s.descend(10_000, Deadline())
        s.rollback()
        s.kick()
    src, dst, w = g.coo()
    assert np.allclose(s.loads, all_link_loads(topo, s.table.pe[src], s.table.pe[dst], w))
    assert s.j == pytest.approx(mapping_cost(g, topo, s.table.pe))


# ----------------------------------------------------------- compiled scoring
def uneven_tree(seed):
    """A tree of 1 to 3 children per node whose PEs lie at different depths."""
    rng = np.random.default_rng(seed)

    def node(height):
        if height == 0 or (height < 3 and rng.random() < 0.3):
            return TreeNode("pu")
        kids = [node(height - 1) for _ in range(int(rng.integers(1, 4)))]
        return TreeNode(f"level{height}", float(rng.integers(1, 50)) * height, kids)

    while (topo := Topology(node(4))).n_pes < 6:
        pass
    return topo


SCORED_TREES = [topology_from_strings("2:4:4", "1:10:100"),  # a uniform hierarchy: distances by arithmetic
                Topology(TreeNode("net", 100, [TreeNode("node", 10, [TreeNode("pu") for _ in range(3)])
                                               for _ in range(3)]))] + [uneven_tree(s) for s in range(4)]


@pytest.mark.parametrize("topo", SCORED_TREES)
@pytest.mark.parametrize("per_pe", [1, 2])
def test_compiled_scores_are_the_numpy_scores_bit_for_bit(topo, per_pe):
    """On a tree the compiled scoring gives numpy's arrays to the last bit
    (bytes of fractional sizes, so the order of every sum shows), for every
    kind of call, as the mapping changes: one-to-one with free PEs and
    many-to-one with empty slots."""
    from rankmap.algorithms.refine.bottleneck import _Search

    rng = np.random.default_rng(topo.n_pes * 10 + per_pe)
    n = per_pe * topo.n_pes - 2
    g = CommGraph.from_edges(rng.integers(0, n, 6 * n), rng.integers(0, n, 6 * n), rng.random(6 * n) * 1e3, n=n)
    start = rng.permutation(np.repeat(np.arange(topo.n_pes), per_pe))[:n]
    s = _Search(g, topo, start, None if per_pe == 1 else 0.0, None, rng)
    assert s.compiled is not None and s.table.cap == per_pe
    n_slots, n_links = s.table.slot_pe.size, s.loads.size
    for step in range(12):
        s.j_cap = s.j * (1 + 1e-3 * rng.random())
        us, slots = rng.integers(0, n, 40), rng.integers(0, n_slots, 40)
        for lowers, j_only, every in [(None, False, False), (int(rng.integers(n_links)), False, False),
                                      (int(rng.integers(n_links)), False, True), (None, True, False),
                                      (None, False, True)]:
            compiled = s._score_compiled(us, slots, lowers, j_only, every)
            arrays = s._score_arrays(us, slots, lowers, j_only, every)
            for a, b in zip(compiled, arrays):
                assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        cand, link, new_load, d_j, viable = compiled
        c = int(rng.integers(40))
        a, b = np.searchsorted(cand, [c, c + 1])
        if us[c] != s.table.task_of_slot[slots[c]]:
            s.apply(int(us[c]), int(slots[c]), link[a:b], new_load[a:b], float(d_j[c]))
