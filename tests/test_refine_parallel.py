"""Swap refinement on several threads: groups of a tree machine whose PEs
are equidistant from every PE outside, phase 1 confined to its group, and
the same mapping, J and pair count for any thread count."""

import numpy as np
import pytest

from rankmap import cores
from rankmap.algorithms import map_tasks
from rankmap.algorithms.refine import parallel
from rankmap.algorithms.refine.parallel import GroupedPasses, thread_count, tree_groups
from rankmap.algorithms.refine import swaps
from rankmap.algorithms.refine.swaps import refine_swaps
from rankmap.cost import mapping_cost
from rankmap.graph import CommGraph
from rankmap.mapping import balance_report
from rankmap.topology.hierarchy import hierarchy_topology
from rankmap.topology.tree import Topology, TreeNode
from tests.quality_instances import grid_graph


def _ragged_tree() -> Topology:
    """Leaves at several depths, arities 1 to 5, distinct distances."""
    rng = np.random.default_rng(0)

    def node(depth):
        if depth == 3 or (depth > 0 and rng.random() < 0.25):
            return TreeNode("pu")
        return TreeNode("n", distance=float(10 ** (3 - depth)) + rng.random(),
                        children=[node(depth + 1) for _ in range(int(rng.integers(1, 6)))])

    return Topology(node(0))


def _equidistant(topo, starts) -> bool:
    """Whether every PE sees all PEs of another group at one distance."""
    group = np.searchsorted(starts, np.arange(topo.n_pes), side="right") - 1
    p, q = np.meshgrid(np.arange(topo.n_pes), np.arange(topo.n_pes), indexing="ij")
    d = topo.distance(p.ravel(), q.ravel()).reshape(p.shape)
    for g in range(starts.size):
        cols = d[:, group == g][group != g]
        if np.any(cols != cols[:, :1]):
            return False
    return True


@pytest.mark.parametrize("topo", [hierarchy_topology([4, 4, 12], [1, 10, 100]),
                                  hierarchy_topology([2, 3, 5, 3], [1, 5, 20, 70]), _ragged_tree()])
@pytest.mark.parametrize("max_pes", [1, 3, 7, 16, 50])
def test_groups_are_equidistant_from_every_other_pe(topo, max_pes):
    starts = tree_groups(topo, max_pes)
    assert starts[0] == 0 and np.all(np.diff(starts) > 0)
    sizes = np.diff(np.append(starts, topo.n_pes))
    assert sizes.max() <= max_pes
    assert _equidistant(topo, starts)


def test_the_equidistance_check_catches_groups_across_subtrees():
    topo = hierarchy_topology([4, 4, 12], [1, 10, 100])
    assert not _equidistant(topo, np.arange(0, topo.n_pes, 6))  # blocks of 6 PEs straddle 4-PE packages


def _parallel_instance(monkeypatch, n_side=32):
    monkeypatch.setattr(parallel, "GROUP_TASKS", 64)  # many groups on a test-sized graph
    monkeypatch.setattr(parallel, "SLICE_PAIRS", 1 << 13)
    monkeypatch.setattr(parallel, "STEP_PAIRS", 1 << 10)
    monkeypatch.setattr(parallel, "MIN_STEP", 16)
    return grid_graph(n_side, n_side)


@pytest.mark.parametrize("cache_pairs", [1 << 23, 1000])  # the balls kept, or made again every pass
def test_one_to_one_same_result_for_any_thread_count(monkeypatch, cache_pairs):
    g = _parallel_instance(monkeypatch)
    monkeypatch.setattr(swaps, "CACHE_PAIRS", cache_pairs)
    topo = hierarchy_topology([4, 4, 64], [1, 10, 100])
    start = map_tasks(g, topo, method="multisection", preset="fast").pe_of_task
    noisy = start.copy()
    rng = np.random.default_rng(2)
    a, b = rng.integers(0, g.n, 300), rng.integers(0, g.n, 300)
    for x, y in zip(a, b):  # local damage inside and across groups
        noisy[x], noisy[y] = noisy[y], noisy[x]
    runs = [refine_swaps(g, topo, noisy, depth=4, seed=3, threads=t) for t in (1, 2, 3)]
    pe, st = runs[0]
    assert sorted(pe.tolist()) == list(range(g.n))
    assert st.j_end == pytest.approx(mapping_cost(g, topo, pe)) and st.j_end < 0.9 * st.j_start
    for other, so in runs[1:]:
        assert np.array_equal(pe, other)
        assert (so.j_end, so.evaluated, so.swaps, so.passes) == (st.j_end, st.evaluated, st.swaps, st.passes)
    # swap-optimal for the neighbourhood: one more pass finds nothing
    again, sa = refine_swaps(g, topo, pe, depth=4, seed=5, threads=2, max_passes=1)
    assert sa.swaps == 0 and np.array_equal(again, pe)


def test_many_to_one_same_result_for_any_thread_count_within_l_max(monkeypatch):
    base = _parallel_instance(monkeypatch)
    w = np.random.default_rng(4).integers(1, 4, size=base.n).astype(float)
    g = CommGraph(base.bytes, vertex_weights=w)
    topo = hierarchy_topology([4, 4, 16], [1, 10, 100])
    start = map_tasks(g, topo, method="multisection", eps=0.05, preset="fast").pe_of_task
    scrambled = start[np.random.default_rng(5).permutation(g.n)]  # same loads, bad locality
    runs = [refine_swaps(g, topo, scrambled, eps=0.05, seed=1, depth=3, threads=t) for t in (1, 2, 3)]
    pe, st = runs[0]
    assert balance_report(pe, w, topo.n_pes, 0.05)["balanced"]
    assert st.j_end == pytest.approx(mapping_cost(g, topo, pe)) and st.j_end < 0.7 * st.j_start
    for other, so in runs[1:]:
        assert np.array_equal(pe, other) and (so.j_end, so.evaluated) == (st.j_end, st.evaluated)


def test_work_limit_counts_the_same_for_any_thread_count(monkeypatch):
    g = _parallel_instance(monkeypatch)
    topo = hierarchy_topology([4, 4, 64], [1, 10, 100])
    start = np.random.default_rng(0).permutation(g.n)
    full = refine_swaps(g, topo, start, depth=4, threads=1)[1]
    cut = [refine_swaps(g, topo, start, depth=4, threads=t, max_evaluations=full.evaluated // 3) for t in (1, 2)]
    assert np.array_equal(cut[0][0], cut[1][0]) and cut[0][1].evaluated == cut[1][1].evaluated
    assert full.evaluated // 3 <= cut[0][1].evaluated < full.evaluated
    assert full.j_end < cut[0][1].j_end < cut[0][1].j_start


def test_parallel_parts_stay_inside_their_group(monkeypatch):
    # every part run in parallel: both tasks of each pair on one group's PEs,
    # and only tasks of that group change PE while it runs
    g = _parallel_instance(monkeypatch)
    topo = hierarchy_topology([4, 4, 64], [1, 10, 100])
    start = np.random.default_rng(0).permutation(g.n)
    seen = {"parts": 0, "groups": set()}
    run_slice, map_parts = GroupedPasses.run_slice, GroupedPasses._map

    def checked_slice(self, run, pos, *args, **kw):
        def checked_map(run_, U, V, parts):
            out = []
            for a, b in parts:
                groups = np.unique(self.group[pos[np.concatenate([U[a:b], V[a:b]])]])
                assert groups.size == 1
                before = pos.copy()
                out.extend(map_parts(self, run_, U, V, [(a, b)]))
                changed = np.flatnonzero(before != pos)
                assert np.all(self.group[before[changed]] == groups[0])
                assert np.all(self.group[pos[changed]] == groups[0])
                seen["parts"] += 1
                seen["groups"].add(int(groups[0]))
            return out

        self._map = checked_map
        return run_slice(self, run, pos, *args, **kw)

    monkeypatch.setattr(GroupedPasses, "run_slice", checked_slice)
    pe, st = refine_swaps(g, topo, start, depth=4, threads=2)
    assert seen["parts"] > 16 and len(seen["groups"]) == 16
    assert st.j_end == pytest.approx(mapping_cost(g, topo, pe)) and st.j_end < 0.9 * st.j_start


def test_thread_count_option_and_default(monkeypatch):
    for name in cores.MPI_SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert thread_count(3) == 3
    assert thread_count(None) == cores.available_cores() >= 1
    with pytest.raises(ValueError, match="threads"):
        thread_count(0)
    with pytest.raises(ValueError, match="threads"):
        refine_swaps(grid_graph(4, 4), hierarchy_topology([4, 4], [1, 10]), np.arange(16), threads=0)


def test_swap_method_takes_a_threads_option(monkeypatch):
    g = _parallel_instance(monkeypatch)
    topo = hierarchy_topology([4, 4, 64], [1, 10, 100])
    one, two = (map_tasks(g, topo, method="swap", threads=t, seed=2).pe_of_task for t in (1, 2))
    assert np.array_equal(one, two)


def test_one_thread_in_a_rank_of_an_mpi_job(monkeypatch):
    for name in cores.MPI_SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cores, "available_cores", lambda: 8)
    assert thread_count(None) == 8
    monkeypatch.setenv("PMI_SIZE", "1")  # a singleton job: the cores are its own
    assert thread_count(None) == 8
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    assert thread_count(None) == 1 and thread_count(2) == 2
