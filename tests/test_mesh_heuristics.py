"""Bhatele & Kale heuristics on meshes/tori, the nearest-free-node searches,
pairwise exchange and task coordinates."""

import numpy as np
import pytest

from rankmap.algorithms import map_tasks, method_names
from rankmap.algorithms.mesh.curve import morton_order
from rankmap.algorithms.mesh.heuristics import _Placer, _pairwise_exchange_numpy, pairwise_exchange
from rankmap.algorithms.mesh.kernel import exchange_kernel, mesh_oracle
from rankmap.algorithms.refine._kernels import mesh_distance
from rankmap.algorithms.refine.swaps import _compiled_kernel, swap_refine
from rankmap.algorithms.mesh.nearest import FreeNodeTree, SpiralSearch
from rankmap.cost import evaluate, mapping_cost
from rankmap.graph import CommGraph
from rankmap.layout import infer_coordinates, load_coordinates
from rankmap.topology import MeshTopology, topology_from_strings

HEURISTICS = ["bft", "mht", "affn", "coce", "coce_mht", "pairs", "mesh_auto"]


def grid_graph(a, b, perm=None):
    """Stencil graph of an a x b grid (the ideal mesh workload) and its coordinates."""
    idx = np.arange(a * b).reshape(a, b)
    s = np.concatenate([idx[:, :-1].ravel(), idx[:-1].ravel()])
    d = np.concatenate([idx[:, 1:].ravel(), idx[1:].ravel()])
    g = CommGraph.from_edges(np.r_[s, d], np.r_[d, s], np.full(2 * s.size, 8.0), n=a * b)
    coords = np.stack(np.unravel_index(np.arange(a * b), (a, b)), axis=1).astype(float)
    if perm is not None:
        g = CommGraph(g.bytes[perm][:, perm])
        coords = coords[perm]
    return g, coords


@pytest.mark.parametrize("dims,torus", [((8, 8), False), ((5, 7), True), ((4, 4, 4), True), ((3, 5, 4), False)])
def test_quadtree_and_spiral_find_the_same_nearest_node(dims, torus):
    m = MeshTopology(dims, torus=torus)
    rng = np.random.default_rng(3)
    cap = rng.integers(1, 3, m.n_nodes)
    tree, spiral = FreeNodeTree(m, cap), SpiralSearch(m, cap)
    for _ in range(int(cap.sum())):
        point = [int(rng.integers(0, d)) for d in dims]
        a = tree.nearest(point)
        assert a == spiral.nearest(point)
        # it really is the nearest free node, lowest id on ties
        free = np.flatnonzero([spiral.free_at(v) > 0 for v in range(m.n_nodes)])
        dist = m.node_distance(m.node_at(point), free)
        assert a == free[np.flatnonzero(dist == dist.min())[0]]
        tree.take(a)
        spiral.take(a)
    with pytest.raises(ValueError):
        tree.nearest([0] * len(dims))


@pytest.mark.parametrize("method", HEURISTICS)
def test_heuristics_give_valid_mappings_and_beat_random(method):
    rng = np.random.default_rng(11)  # not seed 0: "random" would undo the permutation
    g, coords = grid_graph(8, 8, perm=rng.permutation(64))
    m = MeshTopology((8, 8))
    res = map_tasks(g, m, method=method, coords=coords)  # map_tasks validates one-to-one
    rand = map_tasks(g, m, method="random")
    assert mapping_cost(g, m, res.pe_of_task) < 0.6 * mapping_cost(g, m, rand.pe_of_task)


def test_affine_mapping_recovers_the_grid_from_true_coordinates():
    rng = np.random.default_rng(1)
    g, coords = grid_graph(8, 16, perm=rng.permutation(128))
    m = MeshTopology((8, 16))
    pe = map_tasks(g, m, method="affn", coords=coords).pe_of_task
    assert evaluate(g, m, pe).hops_per_byte == pytest.approx(1.0)
    # stretched onto a 16 x 8 machine it cannot be perfect, but stays valid
    pe = map_tasks(g, MeshTopology((16, 8)), method="affn", coords=coords).pe_of_task
    assert evaluate(g, MeshTopology((16, 8)), pe).hops_per_byte > 1.0


def test_fewer_tasks_disconnected_graph_cores_and_many_per_pe():
    # two components, 10 tasks on a 3x3 torus with 2 cores per node
    g = CommGraph.from_edges([0, 1, 2, 5, 6, 7], [1, 2, 3, 6, 7, 8], np.ones(6), n=10)
    m = MeshTopology((3, 3), torus=True, cores=2)
    coords = np.random.default_rng(0).random((10, 2))
    for method in HEURISTICS:
        pe = map_tasks(g, m, method=method, coords=coords).pe_of_task
        assert np.unique(pe).size == 10
    # 40 tasks on 18 PEs: L_max = 3 per PE at eps = 0
    g2, c2 = grid_graph(5, 8)
    for method in HEURISTICS:
        res = map_tasks(g2, m, method=method, eps=0.0, coords=c2)
        assert np.bincount(res.pe_of_task, minlength=18).max() <= 3


def test_spiral_search_option_gives_the_same_mapping():
    rng = np.random.default_rng(2)
    g, coords = grid_graph(6, 6, perm=rng.permutation(36))
    m = MeshTopology((3, 3, 4), torus=True)
    for method in ("bft", "mht", "affn"):
        a = map_tasks(g, m, method=method, coords=np.c_[coords, coords[:, 0]]).pe_of_task
        b = map_tasks(g, m, method=method, coords=np.c_[coords, coords[:, 0]], search="spiral").pe_of_task
        assert np.array_equal(a, b)


def test_mesh_methods_refuse_tree_topologies_and_bad_coordinates(tmp_path):
    g, coords = grid_graph(2, 2)
    with pytest.raises(ValueError, match="does not map onto a tree topology"):
        map_tasks(g, topology_from_strings("4", "1"), method="mht")
    with pytest.raises(ValueError, match="does not map onto a mesh topology"):
        map_tasks(g, MeshTopology((2, 2)), method="greedy")
    assert "mht" in method_names(MeshTopology((2, 2))) and "greedy" not in method_names(MeshTopology((2, 2)))
    # auto on a mesh is mesh_auto
    assert np.array_equal(map_tasks(g, MeshTopology((2, 2)), method="auto").pe_of_task,
                          map_tasks(g, MeshTopology((2, 2)), method="mesh_auto").pe_of_task)
    with pytest.raises(ValueError, match="2 dimensions but the machine has 3"):
        map_tasks(g, MeshTopology((2, 2, 1)), method="affn", coords=coords)
    f = tmp_path / "xy.txt"
    f.write_text("0 0\n1 0\n# comment\n0, 1\n1 x\n")
    with pytest.raises(ValueError, match=r"xy.txt:5"):
        load_coordinates(str(f))
    f.write_text("0 0\n1 0\n0 1\n1 1\n")
    assert load_coordinates(str(f), 4).shape == (4, 2)
    with pytest.raises(ValueError, match="3 coordinate lines for 4 tasks|4 coordinate lines for 3"):
        load_coordinates(str(f), 3)
    pe = map_tasks(g, MeshTopology((2, 2)), method="affn", coords_file=str(f)).pe_of_task
    assert np.unique(pe).size == 4


def test_inferred_layout_keeps_neighbours_close():
    g, coords = grid_graph(6, 6)
    xy = infer_coordinates(g, 2, seed=0)
    assert xy.shape == (36, 2)
    assert np.array_equal(xy, infer_coordinates(g, 2, seed=0))
    src, dst, _ = g.coo()
    near = np.linalg.norm(xy[src] - xy[dst], axis=1).mean()
    far = np.linalg.norm(xy[:, None] - xy[None], axis=2).mean()
    assert near < 0.5 * far


@pytest.mark.parametrize("topo", [MeshTopology((4, 4), torus=True, cores=2), topology_from_strings("2:4:4", "1:10:100")])
def test_pairwise_exchange_only_lowers_J(topo):
    rng = np.random.default_rng(5)
    n = 24
    src, dst = rng.integers(0, n, 120), rng.integers(0, n, 120)
    g = CommGraph.from_edges(src, dst, rng.integers(1, 100, 120).astype(float), n=n)
    start = rng.permutation(topo.n_pes)[:n]
    out = pairwise_exchange(g, topo, start)
    assert np.unique(out).size == n
    assert mapping_cost(g, topo, out) < mapping_cost(g, topo, start)
    assert mapping_cost(g, topo, pairwise_exchange(g, topo, out)) <= mapping_cost(g, topo, out)


@pytest.mark.parametrize("topo,n,eps", [
    (MeshTopology((16, 16)), 200, None),  # > 128 slots: the neighbourhood of the weighted median
    (MeshTopology((8, 8, 4), torus=True), 256, None),
    (MeshTopology((6, 5), torus=(True, False), cores=4), 100, None),  # fewer tasks than PEs
    (MeshTopology((8, 8), torus=True, cores=2), 512, 0.03),  # 4 tasks per PE
    (MeshTopology((8, 8), cores=2, intra_node_distance=1), 60, None),
    (MeshTopology((5, 5)), 20, None),  # every slot a candidate
    (topology_from_strings("4:8:8", "1:10:100"), 200, None),  # 2-hop graph neighbourhood
    (topology_from_strings("2:4:4", "1:10:100"), 100, 0.1),
])
def test_compiled_pairwise_exchange_is_the_numpy_search(topo, n, eps):
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, n, 4 * n), rng.integers(0, n, 4 * n)
    g = CommGraph.from_edges(src, dst, rng.integers(1, 20, 4 * n).astype(float), n=n)
    start = map_tasks(g, topo, method="random", eps=eps).pe_of_task
    out = pairwise_exchange(g, topo, start, eps=eps)
    assert np.array_equal(out, _pairwise_exchange_numpy(g, topo, start, eps=eps))
    assert mapping_cost(g, topo, out) < 0.7 * mapping_cost(g, topo, start)


def test_pairwise_exchange_falls_back_to_numpy_for_a_fractional_intra_node_distance():
    m = MeshTopology((4, 4), cores=2, intra_node_distance=0.5)
    assert exchange_kernel(m) is None
    g, _ = grid_graph(4, 6)
    start = np.random.default_rng(2).permutation(m.n_pes)[:g.n]
    assert mapping_cost(g, m, pairwise_exchange(g, m, start)) < mapping_cost(g, m, start)


def test_exact_bisection_of_a_small_box_is_the_cheapest():
    import itertools

    from rankmap.algorithms.mesh.bisect import _exact_bisection

    rng = np.random.default_rng(4)
    n = 30
    src, dst = rng.integers(0, n, 150), rng.integers(0, n, 150)
    g = CommGraph.from_edges(src, dst, rng.integers(1, 20, 150).astype(float), n=n)
    sym = g.symmetric
    mesh = MeshTopology((6, 4), torus=(True, False))
    boxes = [(np.array([2, 0]), np.array([2, 2])), (np.array([4, 0]), np.array([2, 2]))]
    ctr = [lo + (size - 1) / 2 for lo, size in boxes]
    centre = rng.integers(0, 4, (n, 2)).astype(float)  # where the other tasks' boxes are
    tasks = np.array([3, 7, 8, 12, 20, 21, 25])

    def hops(a, b):
        d = np.abs(a - b)
        return min(d[0], 6 - d[0]) + d[1]

    def cost(side):
        where = dict(zip(tasks.tolist(), side))
        total = 0.0
        for u in tasks.tolist():
            for x, w in zip(sym.indices[sym.indptr[u]:sym.indptr[u + 1]].tolist(),
                            sym.data[sym.indptr[u]:sym.indptr[u + 1]].tolist()):
                if x not in where:
                    total += w * hops(ctr[where[u]], centre[x])
                elif u < x and where[u] != where[x]:
                    total += w * hops(ctr[0], ctr[1])
        return total

    local = np.full(n, -1)
    side = _exact_bisection(tasks, np.array([4, 3]), boxes, centre, sym, mesh, local)
    assert side.sum() == 3 and (local == -1).all()
    best = min(cost(s) for s in itertools.product((0, 1), repeat=tasks.size) if sum(s) == 3)
    assert cost(side.tolist()) == pytest.approx(best)


def test_mesh_auto_beats_every_heuristic_and_both_refinements():
    rng = np.random.default_rng(3)
    n = 32
    src, dst = rng.integers(0, n, 160), rng.integers(0, n, 160)
    g = CommGraph.from_edges(src, dst, rng.integers(1, 100, 160).astype(float), n=n)
    m = MeshTopology((4, 4), torus=True, cores=2)
    best = mapping_cost(g, m, map_tasks(g, m, method="mesh_auto").pe_of_task)
    for method in HEURISTICS[:-1]:
        start = map_tasks(g, m, method=method).pe_of_task
        assert best <= mapping_cost(g, m, start)
    mht = map_tasks(g, m, method="mht").pe_of_task
    assert best <= mapping_cost(g, m, swap_refine(g, m, mht, depth="n2"))


@pytest.mark.parametrize("torus", [False, True])
def test_mesh_bisect_maps_a_stencil_onto_its_own_mesh_almost_perfectly(torus):
    """A 8x8 stencil on an 8x8 mesh: recursive bisection with oriented halves
    keeps almost every edge at one hop (the optimum is exactly 1.0); with
    fewer tasks, several cores and many tasks per PE it stays valid."""
    rng = np.random.default_rng(5)
    g, _ = grid_graph(8, 8, perm=rng.permutation(64))
    m = MeshTopology((8, 8), torus=torus)
    res = map_tasks(g, m, method="mesh_bisect")
    assert evaluate(g, m, res.pe_of_task).hops_per_byte < 1.25
    small, _ = grid_graph(5, 7)
    map_tasks(small, MeshTopology((3, 3, 2), cores=2), method="mesh_bisect")  # 35 tasks on 36 PEs
    map_tasks(g, MeshTopology((4, 4)), method="mesh_bisect", eps=0.0)  # 4 tasks per PE


def test_mht_centroid_counts_each_placed_neighbour_once_and_wraps_on_tori():
    """Bhatele & Kale's Algorithm 1: the centroid of the neighbours' nodes,
    whatever their bytes; on a torus ring the mean on the circle."""
    g = CommGraph.from_edges([0, 0], [1, 2], [1.0, 1000.0], n=3)
    placer = _Placer(g, MeshTopology((5, 5)), None, "tree")
    placer.place(1, (0, 0))
    placer.place(2, (4, 0))
    assert placer.centroid(np.array([1, 2])).tolist() == [2, 0]
    ring = _Placer(g, MeshTopology((8, 3), torus=True), None, "tree")
    ring.place(1, (0, 1))
    ring.place(2, (7, 1))
    assert ring.centroid(np.array([1, 2]))[0] in (0, 7)  # next to both, not 3 or 4


def cg_like_graph():
    """NPB CG's 64-rank pattern: 8 groups of 8 ranks exchanging along 3 bits
    (a 3-cube each), rank 8r + c also with its transpose 8c + r."""
    src, dst = [], []
    for t in range(64):
        r, c = divmod(t, 8)
        src += [t ^ 1, t ^ 2, t ^ 4] + ([8 * c + r] if r != c else [])
        dst += [t] * (4 if r != c else 3)
    return CommGraph.from_edges(np.array(src), np.array(dst), np.ones(len(src)), n=64)


@pytest.mark.parametrize("torus", [False, True])
def test_curve_lays_the_given_order_along_a_z_curve_and_finds_cg(torus):
    assert morton_order(MeshTopology((4, 4)))[:8].tolist() == [0, 1, 4, 5, 2, 3, 6, 7]
    assert sorted(morton_order(MeshTopology((3, 5))).tolist()) == list(range(15))
    g, m = cg_like_graph(), MeshTopology((4, 4, 4), torus=torus)
    # every 3-cube in a 2x2x2 box (1 hop), transposes at the Hamming distance of r and c
    exact = (96 + 48) / 124
    assert evaluate(g, m, map_tasks(g, m, method="curve").pe_of_task).hops_per_byte == pytest.approx(exact)
    assert evaluate(g, m, map_tasks(g, m, method="mesh_auto").pe_of_task).hops_per_byte <= exact + 1e-12
    # several cores, fewer tasks, many tasks per PE
    assert np.unique(map_tasks(g, MeshTopology((3, 3, 2), cores=4), method="curve").pe_of_task).size == 64
    res = map_tasks(g, MeshTopology((2, 2, 2), cores=2), method="curve", eps=0.0)
    assert np.bincount(res.pe_of_task, minlength=16).max() == 4


@pytest.mark.parametrize("topo", [MeshTopology((3, 4, 2), torus=(True, False, True), cores=2, intra_node_distance=2),
                                  MeshTopology((5, 3))])
def test_compiled_mesh_oracle_is_the_hop_count(topo):
    coords, hops = mesh_oracle(topo)
    p, q = np.meshgrid(np.arange(topo.n_pes), np.arange(topo.n_pes))
    compiled = [mesh_distance(coords, hops, int(a), int(b)) for a, b in zip(p.ravel(), q.ravel())]
    assert np.array_equal(compiled, topo.distance(p.ravel(), q.ravel()))


def test_compiled_mesh_swap_refinement_reaches_a_swap_optimum():
    rng = np.random.default_rng(4)
    n = 30
    g = CommGraph.from_edges(rng.integers(0, n, 150), rng.integers(0, n, 150), rng.integers(1, 50, 150).astype(float), n=n)
    m = MeshTopology((4, 4), torus=True, cores=2)
    start = rng.permutation(m.n_pes)[:n]
    assert _compiled_kernel(m) is not None  # the compiled pass, not the numpy search
    out = swap_refine(g, m, start, depth="n2")
    assert np.unique(out).size == n and mapping_cost(g, m, out) < mapping_cost(g, m, start)
    j = mapping_cost(g, m, out)
    for u in range(n):  # no swap of two tasks lowers J any more
        for v in range(u + 1, n):
            trial = out.copy()
            trial[[u, v]] = trial[[v, u]]
            assert mapping_cost(g, m, trial) >= j - 1e-9
    # many tasks per PE: moves within L_max; a fractional intra-node distance takes the numpy search
    res = swap_refine(g, MeshTopology((2, 2), cores=2), np.arange(n) % 8, eps=0.0, depth=3)
    assert np.bincount(res, minlength=8).max() <= 4
    frac = MeshTopology((4, 4), cores=2, intra_node_distance=0.5)
    assert _compiled_kernel(frac) is None
    assert mapping_cost(g, frac, swap_refine(g, frac, start)) <= mapping_cost(g, frac, start)


def test_mesh_auto_keeps_to_a_work_limit(monkeypatch):
    """A counted budget: candidates that do not fit are skipped (here the
    graph layout and the geometric heuristics), the refinements get the
    rest as pairs and exchange rounds; the result repeats, is never worse
    than the given order, and more budget is never worse here."""
    import rankmap.algorithms.mesh.heuristics as heuristics
    from rankmap.algorithms.refine import swaps

    g, _ = grid_graph(32, 32, perm=np.random.default_rng(1).permutation(1024))
    m = MeshTopology((8, 8, 16), torus=True)
    evaluated = []
    real = swaps.refine_swaps
    monkeypatch.setattr(swaps, "refine_swaps", lambda *a, **k: (lambda r: evaluated.append(r[1].evaluated) or r)(
        real(*a, **k)))
    monkeypatch.setattr(heuristics, "infer_coordinates", lambda *a, **k: pytest.fail("laid out beyond the budget"))
    small = [map_tasks(g, m, method="auto", work_limit=0.3).pe_of_task for _ in range(2)]
    assert np.array_equal(*small)
    assert max(evaluated) <= 0.3 / heuristics.PAIR_PRICE + swaps.PAIR_SLICE
    j_small = mapping_cost(g, m, small[0])
    assert j_small < mapping_cost(g, m, np.arange(g.n))
    assert mapping_cost(g, m, map_tasks(g, m, method="mesh_auto", work_limit=1.0).pe_of_task) <= j_small
