"""Hierarchical multisection: exact permutations, planted optima, irregular
trees, many-to-one balance (SharedMap Lemma 5.1)."""

import os

import numpy as np
import pytest

from rankmap.algorithms import map_tasks
from rankmap.algorithms.construct.multisection import task_counts
from rankmap.cost import mapping_cost
from rankmap.graph import CommGraph
from rankmap.mapping import balance_report
from rankmap.topology import Topology, TreeNode
from rankmap.topology.hierarchy import hierarchy_topology
from tests.quality_instances import grid_graph, planted_hierarchy


@pytest.mark.parametrize("backend,preset", [("kahip", "fast"), ("kahip", "strong"), ("mtkahypar", "fast")])
def test_finds_the_planted_optimum(backend, preset):
    g, best = planted_hierarchy([4, 4, 4], [1000, 10, 1], seed=3)
    topo = hierarchy_topology([4, 4, 4], [1, 10, 100])
    m = map_tasks(g, topo, method="multisection", backend=backend, preset=preset, seed=1)
    assert sorted(m.pe_of_task.tolist()) == list(range(64))
    assert mapping_cost(g, topo, m.pe_of_task) == mapping_cost(g, topo, best)
    assert mapping_cost(g, topo, m.pe_of_task) < mapping_cost(g, topo, np.arange(64)) / 3


def test_beats_greedy_on_a_stencil_and_is_deterministic():
    g = grid_graph(16, 16)
    topo = hierarchy_topology([4, 16, 4], [1, 10, 100])
    a = map_tasks(g, topo, method="multisection", seed=5).pe_of_task
    b = map_tasks(g, topo, method="multisection", seed=5).pe_of_task
    assert np.array_equal(a, b)
    greedy = map_tasks(g, topo, method="greedy").pe_of_task
    assert mapping_cost(g, topo, a) < mapping_cost(g, topo, greedy)


def test_irregular_tree_children_of_different_sizes():
    # root: a 6-PE node and a 2-PE node; the big one has groups of 4 and 2
    big = TreeNode("node", 10, [TreeNode("l3", 1, [TreeNode("pu") for _ in range(4)]),
                                TreeNode("l3", 1, [TreeNode("pu") for _ in range(2)])])
    small = TreeNode("node", 10, [TreeNode("pu"), TreeNode("pu")])
    topo = Topology(TreeNode("net", 100, [big, small]))
    g = grid_graph(2, 4)
    pe = map_tasks(g, topo, method="multisection").pe_of_task
    assert sorted(pe.tolist()) == list(range(8))
    # the 2x4 grid fits as 2x3 on the big node and 2x1 on the small: cut 2 at distance 100
    assert mapping_cost(g, topo, pe) <= mapping_cost(g, topo, np.arange(8))


def test_fewer_tasks_than_pes_stays_one_to_one():
    g = grid_graph(3, 5)
    topo = hierarchy_topology([4, 4, 2], [1, 10, 100])
    pe = map_tasks(g, topo, method="multisection").pe_of_task
    assert np.unique(pe).size == 15
    assert task_counts(15, np.array([16, 16])).tolist() == [8, 7]
    assert task_counts(5, np.array([1, 8])).tolist() == [1, 4]


@pytest.mark.parametrize("backend", ["kahip", "mtkahypar"])
def test_many_to_one_respects_l_max_with_vertex_weights(backend):
    g = grid_graph(24, 24)
    w = np.random.default_rng(0).integers(1, 5, size=g.n).astype(float)
    g = CommGraph(g.bytes, vertex_weights=w)
    topo = hierarchy_topology([4, 4, 2], [1, 10, 100])
    m = map_tasks(g, topo, method="multisection", eps=0.03, backend=backend, preset="fast")
    rep = balance_report(m.pe_of_task, w, topo.n_pes, 0.03)
    assert rep["balanced"], rep
    # a random placement puts half the bytes across the network (distance 100)
    assert mapping_cost(g, topo, m.pe_of_task) < 0.1 * 100 * g.total_bytes


def test_bad_options_are_clear_errors():
    g = grid_graph(2, 2)
    topo = hierarchy_topology([2, 2], [1, 10])
    with pytest.raises(ValueError, match="backend"):
        map_tasks(g, topo, method="multisection", backend="scotch")


def test_many_to_one_with_tight_l_max():
    # 2851 tasks on 128 PEs: L_max = floor(1.03 * 23) = 23, only 3% slack in total;
    # the Lemma's continuous bounds alone would round below what the tasks need
    g = grid_graph(2851, 1)
    topo = hierarchy_topology([4, 8, 4], [1, 10, 100])
    m = map_tasks(g, topo, method="multisection", eps=0.03, preset="fast")
    assert np.bincount(m.pe_of_task, minlength=128).max() <= 23


def test_steiner_maps_subtrees_with_mtkahypar_one_to_one_and_balanced():
    g = grid_graph(12, 12)
    topo = hierarchy_topology([4, 4, 9], [1, 10, 100])  # 144 PEs: hosts of 16 mapped by Mt-KaHyPar
    m = map_tasks(g, topo, method="multisection", backend="mtkahypar", preset="fast", steiner="true", seed=1)
    assert sorted(m.pe_of_task.tolist()) == list(range(144))
    assert mapping_cost(g, topo, m.pe_of_task) < 0.5 * mapping_cost(g, topo, map_tasks(g, topo, method="random").pe_of_task)
    w = np.random.default_rng(2).integers(1, 4, size=g.n).astype(float)
    heavy = CommGraph(g.bytes, vertex_weights=w)
    small = hierarchy_topology([4, 4], [1, 10])
    many = map_tasks(heavy, small, method="multisection", backend="mtkahypar", steiner=True, eps=0.03)
    assert balance_report(many.pe_of_task, w, 16, 0.03)["balanced"]


@pytest.mark.parametrize("graph,arities", [("delaunay_n10", [4, 4, 8]), ("3elt", [4, 16, 4])])
def test_both_backends_keep_the_lower_top_cut(graph, arities):
    """backend="both" with two tries: KaHIP (the seed) and Mt-KaHyPar (the
    next seed) each cut the top level and the lower cut is kept; below it one
    try.  Neither backend's top cut is always the lower (auto's first start)."""
    from rankmap.formats.registry import read_graph
    from rankmap.modelgen import model_graph

    topo = hierarchy_topology(arities, [1, 10, 100])
    g = model_graph(read_graph(f"tests/data/graphs/{graph}.graph"), topo.n_pes, seed=0)
    sym, size = g.symmetric.tocoo(), topo.n_pes // arities[-1]

    def top_cut(pe):
        return sym.data[pe[sym.row] // size != pe[sym.col] // size].sum() / 2

    winners = set()
    for seed in range(2):
        both = map_tasks(g, topo, method="multisection", seed=seed, backend="both", tries=2, deterministic=True,
                         preset="fast").pe_of_task
        kahip = map_tasks(g, topo, method="multisection", seed=seed, preset="fast").pe_of_task
        mtk = map_tasks(g, topo, method="multisection", seed=seed + 1, backend="mtkahypar", deterministic=True,
                        preset="fast").pe_of_task
        assert sorted(both.tolist()) == list(range(topo.n_pes))
        assert top_cut(both) == min(top_cut(kahip), top_cut(mtk))
        winners.add("kahip" if top_cut(kahip) < top_cut(mtk) else "mtkahypar" if top_cut(mtk) < top_cut(kahip) else "")
    assert winners - {""}  # the two cuts differ on these models: the minimum above is a real choice


def test_workers_give_the_same_mapping(monkeypatch):
    """Subtrees multisected in worker processes: the same result as in one
    process (a sub-problem's seed depends on its tree node, not on the
    order the sub-problems run in)."""
    from rankmap.algorithms.construct import multisection as ms

    monkeypatch.setattr(ms, "PARALLEL_MIN_TASKS", 0)  # the test instances are small
    pools = []
    real_pool = ms._worker_pool
    monkeypatch.setattr(ms, "_worker_pool", lambda *a: pools.append(a) or real_pool(*a))
    g = grid_graph(16, 16)
    cases = [(hierarchy_topology([4, 16, 4], [1, 10, 100]), {}),
             (hierarchy_topology([4, 4, 4], [1, 10, 100]), {"eps": 0.03, "backend": "both", "tries": 2}),
             (hierarchy_topology([4, 16, 4], [1, 10, 100]), {"backend": "mtkahypar", "steiner": True,
                                                            "deterministic": True})]
    for topo, kw in cases:
        one = ms.multisection_map(g, topo, seed=2, **kw)
        two = ms.multisection_map(g, topo, seed=2, workers=2, **kw)
        assert np.array_equal(one, two), kw
    assert len(pools) >= 2  # the first two cases went through worker processes
    m = map_tasks(g, cases[0][0], method="multisection", workers="2", seed=2)
    assert np.array_equal(m.pe_of_task, ms.multisection_map(g, cases[0][0], seed=2))


def test_a_script_without_a_main_guard_can_use_workers(tmp_path):
    """Worker processes start without the caller's main module: a script
    with no ``if __name__ == "__main__":`` guard runs once and gets the
    mapping of one process (the fork server would otherwise re-run it in
    every worker)."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "no_guard.py"
    script.write_text(
        "from rankmap.algorithms.construct import multisection as ms\n"
        "from rankmap.topology.hierarchy import hierarchy_topology\n"
        "from tests.quality_instances import grid_graph\n"
        "print('main ran', flush=True)\n"
        "ms.PARALLEL_MIN_TASKS = 0\n"
        "pools = []\n"
        "real_pool = ms._worker_pool\n"
        "ms._worker_pool = lambda *a: pools.append(a) or real_pool(*a)\n"
        "pe = ms.multisection_map(grid_graph(16, 16), hierarchy_topology([4, 16, 4], [1, 10, 100]), seed=2,\n"
        "                         workers=2)\n"
        "print('pools', len(pools))\n"
        "print(' '.join(map(str, pe)))\n")
    root = Path(__file__).resolve().parent.parent
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert lines.count("main ran") == 1 and "pools 1" in lines
    from rankmap.algorithms.construct import multisection as ms

    one = ms.multisection_map(grid_graph(16, 16), hierarchy_topology([4, 16, 4], [1, 10, 100]), seed=2, workers=1)
    assert lines[-1] == " ".join(map(str, one))


def test_workers_default_to_the_cores_and_to_one_inside_an_mpi_job(monkeypatch):
    from rankmap import cores
    from rankmap.algorithms.construct import multisection as ms

    for v in cores.MPI_SIZE_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    assert cores.default_workers() == cores.available_cores() >= 1
    monkeypatch.setenv("PMI_SIZE", "1")  # a job of one rank: the cores are its own
    assert cores.default_workers() == cores.available_cores()
    monkeypatch.setenv("PMI_SIZE", "4")  # as Hydra sets it in every rank
    assert cores.default_workers() == 1
    monkeypatch.setattr(ms, "PARALLEL_MIN_TASKS", 0)
    monkeypatch.setattr(ms, "_worker_pool", lambda *a: pytest.fail("a worker pool inside an MPI job"))
    ms.multisection_map(grid_graph(8, 8), hierarchy_topology([4, 4, 4], [1, 10, 100]), seed=1)


def test_many_children_are_split_through_groups():
    # 130 nodes under the root (more than FANOUT_MAX): the root's tasks are
    # split into groups of nodes first, then each group into its nodes
    from rankmap.algorithms.construct import multisection as ms

    g = grid_graph(26, 20)
    topo = hierarchy_topology([4, 130], [1, 10])
    assert topo.children(topo.root).size > ms.FANOUT_MAX
    a = map_tasks(g, topo, method="multisection", preset="fast", seed=2).pe_of_task
    assert sorted(a.tolist()) == list(range(520))
    assert np.array_equal(a, map_tasks(g, topo, method="multisection", preset="fast", seed=2).pe_of_task)
    # 2x2 blocks per node cut half the edges: J about 0.6 of a random placement's
    assert mapping_cost(g, topo, a) < 0.65 * mapping_cost(g, topo, np.random.default_rng(0).permutation(520))
    # the estimate of such a split adds the virtual levels' calls
    assert ms.split_seconds(520, 2000, 130) > ms.split_seconds(520, 2000, 64) > 0


def test_levels_partitions_only_the_top_and_keeps_the_given_order_below():
    g = grid_graph(16, 16)
    topo = hierarchy_topology([4, 16, 4], [1, 10, 100])
    whole = map_tasks(g, topo, method="multisection", preset="fast", seed=1).pe_of_task
    top = map_tasks(g, topo, method="multisection", preset="fast", seed=1, levels=1).pe_of_task
    assert sorted(top.tolist()) == list(range(256))
    assert np.array_equal(top // 64, whole // 64)  # the same top split
    for node in range(4):  # inside a node: its tasks in the given order
        tasks = np.flatnonzero(top // 64 == node)
        assert np.array_equal(top[tasks], node * 64 + np.arange(64))


def test_a_partitioning_call_the_deadline_cannot_afford_is_not_made(monkeypatch):
    # priced above the time left: the in-order split instead, the cut recorded
    from rankmap.algorithms.construct import multisection as ms
    from rankmap.deadline import Deadline

    calls = []
    monkeypatch.setattr(ms, "partition_seconds", lambda *a: 3600.0)
    monkeypatch.setattr(ms, "partition_graph", lambda *a, **k: calls.append(a))
    g = grid_graph(16, 16)
    topo = hierarchy_topology([4, 16, 4], [1, 10, 100])
    d = Deadline(600.0)
    pe = ms.multisection_map(g, topo, preset="fast", deadline=d)
    assert d.hit and not calls
    assert sorted(pe.tolist()) == list(range(256))


def test_a_steiner_call_the_deadline_cannot_afford_is_not_made(monkeypatch):
    # Mt-KaHyPar's mapping call is priced too: refused, the subtree is split as without steiner
    from rankmap.algorithms.construct import multisection as ms
    from rankmap.deadline import Deadline

    calls = []

    def mapping_call(adj, ws, distance, caps, eps, **_):
        calls.append(adj.shape[0])
        return np.arange(adj.shape[0]) % caps.size

    monkeypatch.setattr(ms, "mtkahypar_map", mapping_call)
    g = grid_graph(16, 16)
    topo = hierarchy_topology([4, 16, 4], [1, 10, 100])
    for price, made in ((3600.0, []), (0.0, [64, 64, 64, 64])):  # affordable: one call per node
        monkeypatch.setattr(ms, "steiner_seconds", lambda nnz, price=price: price)
        calls.clear()
        d = Deadline(600.0)
        pe = ms.multisection_map(g, topo, preset="fast", backend="mtkahypar", steiner=True, deadline=d)
        assert d.hit == bool(price) and calls == made
        assert sorted(pe.tolist()) == list(range(256))


def test_mtkahypars_start_counts_against_the_deadline_on_its_first_call(monkeypatch):
    # its import and thread pool (MTKAHYPAR_START) cannot be cut: with less time left than that in a process
    # that has not started it, the first start of auto (both backends at the top) keeps KaHIP's cut alone
    from rankmap.algorithms.construct import multisection as ms
    from rankmap.algorithms.construct import partition
    from rankmap.deadline import Deadline

    backends = []
    real = ms.partition_graph
    monkeypatch.setattr(ms, "partition_graph", lambda *a, **k: backends.append(k["backend"]) or real(*a, **k))
    monkeypatch.setattr(ms, "partition_seconds", lambda *a: 0.0)
    monkeypatch.setattr(partition, "MTKAHYPAR_START", 3600.0)
    g = grid_graph(16, 16)
    topo = hierarchy_topology([4, 16, 4], [1, 10, 100])
    for started, tried in ((False, {"kahip"}), (True, {"kahip", "mtkahypar"})):
        monkeypatch.setattr(partition, "mtkahypar_started", lambda started=started: started)
        backends.clear()
        d = Deadline(600.0)
        pe = ms.multisection_map(g, topo, preset="fast", backend="both", tries=2, deterministic=True, deadline=d)
        assert set(backends) == tried and d.hit != started
        assert sorted(pe.tolist()) == list(range(256))


def test_small_sub_problems_are_grown_into_their_groups():
    """Growing splits a node's tasks along the planted groups (the heavy
    traffic inside them), the same mapping for any thread count."""
    g, best = planted_hierarchy([4, 4, 8], [1000, 10, 1], seed=2)
    topo = hierarchy_topology([4, 4, 8], [1, 10, 100])
    runs = [map_tasks(g, topo, method="multisection", backend="kahip", preset="fast", grow_below=16,
                      threads=t).pe_of_task for t in (1, 3)]
    assert np.array_equal(runs[0], runs[1])
    assert sorted(runs[0].tolist()) == list(range(128))
    assert mapping_cost(g, topo, runs[0]) == mapping_cost(g, topo, best)


def test_grown_children_above_other_levels_are_split_again():
    """Growing from the root: its children (nodes of 16 tasks, two levels
    above the PEs) are grown again at the next level, all at once, and the
    planted groups come out."""
    g, best = planted_hierarchy([4, 4, 8], [1000, 10, 1], seed=4)
    topo = hierarchy_topology([4, 4, 8], [1, 10, 100])
    pe = map_tasks(g, topo, method="multisection", backend="kaminpar", preset="fast", grow_below=128,
                   threads=1).pe_of_task
    assert sorted(pe.tolist()) == list(range(128))
    assert mapping_cost(g, topo, pe) == mapping_cost(g, topo, best)


def test_kaminpars_multisection_of_a_large_graph_runs_in_a_local_order(monkeypatch):
    """From LOCAL_ORDER_MIN_TASKS tasks the multisection works on the graph
    renumbered (reverse Cuthill-McKee) and maps the PEs back to the given
    tasks: a one-to-one mapping as good as without."""
    from rankmap.algorithms.construct import multisection as ms

    g = grid_graph(32, 32).subgraph(np.random.default_rng(2).permutation(1024))
    topo = hierarchy_topology([4, 16, 16], [1, 10, 100])
    runs = {}
    for smallest in (1 << 20, 1):
        monkeypatch.setattr(ms, "LOCAL_ORDER_MIN_TASKS", smallest)
        runs[smallest] = ms.multisection_map(g, topo, backend="kaminpar", preset="fast", grow_below=64)
        assert sorted(runs[smallest].tolist()) == list(range(1024))
    assert mapping_cost(g, topo, runs[1]) <= 1.05 * mapping_cost(g, topo, runs[1 << 20])


def test_kaminpar_cuts_the_top_and_growing_the_rest_of_a_stencil():
    g = grid_graph(32, 32).subgraph(np.random.default_rng(0).permutation(1024))  # scrambled ids
    topo = hierarchy_topology([4, 16, 16], [1, 10, 100])
    fast = map_tasks(g, topo, method="multisection", backend="kaminpar", preset="fast", grow_below=64,
                     threads=1).pe_of_task
    assert sorted(fast.tolist()) == list(range(1024))
    kahip = map_tasks(g, topo, method="multisection", backend="kahip", preset="fast").pe_of_task
    assert mapping_cost(g, topo, fast) <= 1.1 * mapping_cost(g, topo, kahip)
    assert mapping_cost(g, topo, fast) < mapping_cost(g, topo, np.arange(1024)) / 2


def test_grown_blocks_pack_a_scrambled_stencil():
    """Growing over the whole graph (what a refused top cut falls back to):
    blocks of exactly the sizes asked, far below the given order's cut."""
    from rankmap.algorithms.construct.growing import grow_blocks

    g = grid_graph(32, 32).subgraph(np.random.default_rng(1).permutation(1024))
    sizes = np.full(16, 64)
    block = grow_blocks(g.symmetric, sizes)
    assert np.array_equal(np.bincount(block, minlength=16), sizes)
    rows, cols = g.symmetric.nonzero()
    cut = int(np.count_nonzero(block[rows] != block[cols])) // 2
    tiling = 3 * 32 * 2  # 8 x 8 tiles: three lines of 32 edges each way
    given = int(np.count_nonzero(np.arange(1024)[rows] // 64 != np.arange(1024)[cols] // 64)) // 2
    assert cut <= 2 * tiling < given / 4
    assert np.array_equal(grow_blocks(g.symmetric, sizes), block)  # deterministic
    with pytest.raises(ValueError, match="sum to 1000"):
        grow_blocks(g.symmetric, np.full(10, 100))


def test_blocks_split_beside_the_growing_are_those_split_after_it(monkeypatch):
    """``grow_and_split``: the order of growth (block after block, as
    ``grow_blocks`` grows them) and every block's split, on any count of
    threads and stretches, are the growing's and ``split_grown``'s one
    after the other."""
    from rankmap.algorithms.construct import growing

    g = grid_graph(32, 32).subgraph(np.random.default_rng(1).permutation(1024))
    sizes, counts, ptr = np.full(16, 64), np.full(256, 4), np.arange(0, 257, 16)
    order, none = growing.grow_and_split(g.symmetric, sizes)
    assert none is None and np.array_equal(growing.grow_blocks(g.symmetric, sizes)[order], np.repeat(np.arange(16), 64))
    child = growing.split_grown(g.symmetric, order, np.arange(0, 1025, 64), counts, ptr, 1, 50.0)
    assert not np.array_equal(child, growing.split_grown(g.symmetric, order, np.arange(0, 1025, 64), counts, ptr))
    for stretches in (1, 5, 64):
        monkeypatch.setattr(growing, "STRETCHES", stretches)
        for threads in (1, 2, 3):
            got_order, got_child = growing.grow_and_split(g.symmetric, sizes, counts, ptr, threads, 50.0)
            assert np.array_equal(got_order, order) and np.array_equal(got_child, child)


def test_the_growing_stops_at_the_deadline_and_the_rest_follows_in_the_given_order(monkeypatch):
    """Once the deadline has passed (checked between stretches) the tasks
    not grown follow in their given order, each remaining block cut into
    its children in that order; the blocks grown before are kept."""
    from rankmap.algorithms.construct import growing
    from rankmap.deadline import Deadline

    class AfterChecks(Deadline):  # passes at its third check
        def __init__(self):
            super().__init__(600.0)
            self.checks = 0

        def expired(self):
            self.checks += 1
            self.hit = self.hit or self.checks >= 3
            return self.checks >= 3

    g = grid_graph(32, 32).subgraph(np.random.default_rng(1).permutation(1024))
    sizes, counts, ptr = np.full(16, 64), np.full(256, 4), np.arange(0, 257, 16)
    monkeypatch.setattr(growing, "STRETCHES", 4)  # stretches of 4 blocks: 2 grown before the deadline
    whole, _ = growing.grow_and_split(g.symmetric, sizes)
    deadline = AfterChecks()
    order, _ = growing.grow_and_split(g.symmetric, sizes, deadline=deadline)
    rest = np.setdiff1d(np.arange(1024), whole[:512])
    assert deadline.hit and np.array_equal(order[:512], whole[:512]) and np.array_equal(order[512:], rest)
    deadline = AfterChecks()
    order, child = growing.grow_and_split(g.symmetric, sizes, counts, ptr, 1, 0.0, deadline)
    assert np.array_equal(order[512:], rest) and np.array_equal(child[512:], np.arange(512) % 64 // 4)
    assert np.array_equal(child[:512], growing.split_grown(g.symmetric, whole[:512], np.arange(0, 513, 64),
                                                           counts[:128], ptr[:9]))


def test_growing_along_the_tree_places_each_grown_block_on_one_subtree(monkeypatch):
    """``grow``: the top level's subtrees get the grown blocks (the same
    blocks as ``grow_blocks``), each block is grown into its subtree's
    children and the split searched (``grow_split`` with GROWN_SEARCH_WORK)
    and their PEs take the tasks in the order of growth; where the deadline
    cannot afford the search, the grown split as far as it pays for; where
    it cannot afford the split, the whole block in the order of growth;
    fewer tasks than PEs are shared out over the subtrees by their PEs;
    more tasks than PEs are refused; a deadline already past gets the given
    order."""
    from rankmap.algorithms.construct import growing, multisection as ms, tree_growing
    from rankmap.deadline import Deadline

    g = grid_graph(32, 32).subgraph(np.random.default_rng(1).permutation(1024))
    topo = hierarchy_topology([4, 16, 16], [1, 10, 100])
    pe = map_tasks(g, topo, method="grow").pe_of_task
    assert sorted(pe.tolist()) == list(range(1024))
    assert np.array_equal(pe // 64, growing.grow_blocks(g.symmetric, np.full(16, 64)))
    order, _ = growing.grow_and_split(g.symmetric, np.full(16, 64))
    groups = growing.grow_split(g.symmetric, np.split(order, 16), [np.full(16, 4)] * 16,
                                search_work=ms.GROWN_SEARCH_WORK)
    assert np.array_equal(pe[order] % 64 // 4, np.concatenate(groups))
    assert mapping_cost(g, topo, pe) < mapping_cost(g, topo, np.arange(1024)) / 3
    # ... and the order inside a node is worth keeping: below a shuffle of each node's PEs
    relabel = np.random.default_rng(2).permuted(np.arange(1024).reshape(16, 64), axis=1).reshape(-1)
    assert mapping_cost(g, topo, pe) < mapping_cost(g, topo, relabel[pe])
    with monkeypatch.context() as m:  # time for the split but hardly any search: a cut, J above the searched
        m.setattr(ms, "_PER_SEARCH_WORK", 1e6)
        deadline = Deadline(600.0)
        grown = tree_growing.grow(g, topo, deadline=deadline)
    assert deadline.hit and mapping_cost(g, topo, pe) < mapping_cost(g, topo, grown)
    with monkeypatch.context() as m:  # no time for the split: the order of growth
        m.setattr(ms, "_PER_GROWN_TASK", 1e6)
        deadline = Deadline(600.0)
        unsplit = tree_growing.grow(g, topo, deadline=deadline)
    assert deadline.hit and np.array_equal(unsplit[order], np.arange(1024))
    assert mapping_cost(g, topo, grown) < mapping_cost(g, topo, unsplit)
    deadline = Deadline(600.0)  # one level of PEs: nothing below to split, so nothing refused
    flat = tree_growing.grow(grid_graph(8, 8), hierarchy_topology([64], [1]), deadline=deadline)
    assert sorted(flat.tolist()) == list(range(64)) and not deadline.hit
    wide = hierarchy_topology([4, 16, 20], [1, 10, 100])  # 1280 PEs for 1024 tasks
    pe = map_tasks(g, wide, method="grow").pe_of_task
    assert np.unique(pe).size == 1024 and np.array_equal(np.bincount(pe // 64, minlength=20),
                                                         ms.task_counts(1024, np.full(20, 64)))
    with pytest.raises(ValueError, match="one task per PE"):
        map_tasks(g, hierarchy_topology([4, 16, 8], [1, 10, 100]), method="grow")
    deadline = Deadline(0.0)
    assert np.array_equal(tree_growing.grow(g, topo, deadline=deadline), np.arange(1024)) and deadline.hit


def test_a_top_cut_the_deadline_refuses_is_grown_not_left_in_the_given_order(monkeypatch):
    """Where the deadline cannot afford the partitioner's top cut, the
    blocks are grown: J several times below the given order's, and the
    cut is reported."""
    from rankmap.algorithms.construct import multisection as ms
    from rankmap.deadline import Deadline

    g = grid_graph(32, 32).subgraph(np.random.default_rng(0).permutation(1024))
    topo = hierarchy_topology([4, 16, 16], [1, 10, 100])
    monkeypatch.setattr(ms, "partition_seconds", lambda *a, **k: 1e6)  # no call fits
    deadline = Deadline(600.0)
    pe = ms.multisection_map(g, topo, backend="kaminpar", preset="fast", grow_below=64, deadline=deadline)
    assert deadline.hit and sorted(pe.tolist()) == list(range(1024))
    assert mapping_cost(g, topo, pe) < mapping_cost(g, topo, np.arange(1024)) / 3
    monkeypatch.setattr(ms, "_PER_GROWN_ENTRY", 1e6)  # nor does growing: the given order cut in runs
    pe = ms.multisection_map(g, topo, backend="kaminpar", preset="fast", grow_below=64, deadline=Deadline(600.0))
    assert mapping_cost(g, topo, pe) > mapping_cost(g, topo, np.arange(1024)) / 2
