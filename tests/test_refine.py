"""Swap refinement: exact gain bookkeeping, monotone J, the distance oracle
as the only machine query, many-to-one moves under L_max."""

import numpy as np
import pytest

from rankmap.algorithms import map_tasks
from rankmap.algorithms.refine.swaps import PAIR_SLICE, refine_swaps, swap_refine
from rankmap.cost import mapping_cost
from rankmap.deadline import Deadline
from rankmap.graph import CommGraph
from rankmap.mapping import balance_report
from rankmap.topology.hierarchy import hierarchy_topology
from tests.quality_instances import grid_graph, planted_hierarchy


class RingOracle:
    """A machine known only by its distance oracle (hops on a ring)."""

    def __init__(self, k):
        self.n_pes = k

    def distance(self, p, q):
        d = np.abs(np.asarray(p) - np.asarray(q))
        return np.minimum(d, self.n_pes - d).astype(float)


@pytest.mark.parametrize("depth", [1, 3, 10, "n2"])
def test_tracked_j_is_exact_and_never_worse(depth):
    g = grid_graph(12, 12)
    topo = hierarchy_topology([4, 4, 9], [1, 10, 100])
    start = np.random.default_rng(1).permutation(g.n)
    pe, st = refine_swaps(g, topo, start, depth=depth, seed=2)
    assert sorted(pe.tolist()) == list(range(g.n))
    assert st.j_start == pytest.approx(mapping_cost(g, topo, start))
    assert st.j_end == pytest.approx(mapping_cost(g, topo, pe))
    assert st.j_end < {1: 0.9, 3: 0.7}.get(depth, 0.5) * st.j_start
    assert st.evaluated > 0 and st.swaps > 0


def test_repairs_a_planted_optimum_from_one_bad_swap():
    g, best = planted_hierarchy([4, 4, 4], [1000, 10, 1], seed=0)
    topo = hierarchy_topology([4, 4, 4], [1, 10, 100])
    bad = best.copy()
    a, b = int(np.flatnonzero(best == 0)[0]), int(np.flatnonzero(best == 63)[0])
    bad[a], bad[b] = bad[b], bad[a]
    pe = swap_refine(g, topo, bad, depth=1)
    assert mapping_cost(g, topo, pe) == mapping_cost(g, topo, best)


def test_uses_only_the_distance_oracle():
    g = grid_graph(1, 32, wrap=True)  # a ring of tasks
    ring = RingOracle(32)
    start = np.random.default_rng(0).permutation(32)
    pe, st = refine_swaps(g, ring, start, depth="n2", seed=0)
    assert sorted(pe.tolist()) == list(range(32))
    assert st.j_end < st.j_start
    src, dst, w = g.coo()
    assert st.j_end == pytest.approx(float(np.dot(w, ring.distance(pe[src], pe[dst]))))


def test_deterministic_per_seed():
    g = grid_graph(10, 10)
    topo = hierarchy_topology([4, 5, 5], [1, 10, 100])
    start = np.random.default_rng(3).permutation(g.n)
    assert np.array_equal(swap_refine(g, topo, start, seed=7), swap_refine(g, topo, start, seed=7))


def test_many_to_one_moves_keep_balance():
    base = grid_graph(16, 16)
    w = np.random.default_rng(4).integers(1, 4, size=base.n).astype(float)
    g = CommGraph(base.bytes, vertex_weights=w)
    topo = hierarchy_topology([4, 4], [1, 10])
    start = map_tasks(g, topo, method="multisection", eps=0.05, preset="fast").pe_of_task
    scrambled = start[np.random.default_rng(5).permutation(g.n)]  # same loads, bad locality
    pe, st = refine_swaps(g, topo, scrambled, eps=0.05, seed=1)
    assert balance_report(pe, w, topo.n_pes, 0.05)["balanced"]
    assert st.j_end == pytest.approx(mapping_cost(g, topo, pe))
    assert st.j_end < 0.7 * st.j_start


def test_a_passed_deadline_stops_in_the_first_pass():
    g = grid_graph(20, 20)
    topo = hierarchy_topology([4, 10, 10], [1, 10, 100])
    start = np.random.default_rng(0).permutation(g.n)
    deadline = Deadline(1e-9)
    pe, st = refine_swaps(g, topo, start, deadline=deadline)
    assert st.passes == 1 and sorted(pe.tolist()) == list(range(g.n)) and deadline.hit
    assert st.j_end <= st.j_start


def test_work_limit_stops_early_and_deterministically():
    g = grid_graph(20, 20)
    topo = hierarchy_topology([4, 10, 10], [1, 10, 100])
    start = np.random.default_rng(0).permutation(g.n)
    full = refine_swaps(g, topo, start, depth="n2")[1]
    a, sa = refine_swaps(g, topo, start, depth="n2", max_evaluations=20000)
    b, sb = refine_swaps(g, topo, start, depth="n2", max_evaluations=20000)
    assert np.array_equal(a, b) and sa.evaluated == sb.evaluated
    assert 20000 <= sa.evaluated < 20000 + PAIR_SLICE < full.evaluated
    assert full.j_end < sa.j_end < sa.j_start


def test_refine_option_of_map_tasks():
    g = grid_graph(8, 8)
    topo = hierarchy_topology([4, 4, 4], [1, 10, 100])
    plain = map_tasks(g, topo, method="random", seed=1)
    refined = map_tasks(g, topo, method="random", seed=1, refine="true", refine_depth="2")
    assert mapping_cost(g, topo, refined.pe_of_task) < mapping_cost(g, topo, plain.pe_of_task)
    same = map_tasks(g, topo, method="random", seed=1, refine="no")
    assert np.array_equal(same.pe_of_task, plain.pe_of_task)
    with pytest.raises(ValueError, match="refine"):
        map_tasks(g, topo, method="random", refine="maybe")
    with pytest.raises(ValueError, match="depth"):
        swap_refine(g, topo, plain.pe_of_task, depth="n3")


def test_balls_are_the_bfs_balls_whole_levels_up_to_the_cap():
    # the compiled BFS against a plain one: every task within `depth` hops,
    # levels added whole while the ball holds fewer than `cap` tasks
    from collections import deque

    from rankmap.algorithms.refine.swaps import _ball_pairs

    adj = grid_graph(9, 7).symmetric
    n = adj.shape[0]
    for depth, cap in ((1, 256), (3, 10), (10, 256), (10, 30)):
        got = set()
        for U, V in _ball_pairs(adj, depth, cap, np.random.default_rng(1), Deadline()):
            assert np.all(U < V)
            got |= set(zip(U.tolist(), V.tolist()))
        want = set()
        for s in range(n):
            dist, level, q = {s: 0}, [s], deque()
            for d in range(1, depth + 1):
                if len(dist) >= cap:
                    break
                nxt = [y for x in level for y in adj.indices[adj.indptr[x]:adj.indptr[x + 1]].tolist()]
                level = [y for y in dict.fromkeys(nxt) if y not in dist]
                if not level:
                    break
                dist.update({y: d for y in level})
            want |= {(s, v) for v in dist if s < v}
        assert got == want


def test_more_tasks_than_a_block_still_refine_exactly():
    # beyond BLOCK_TASKS the pairs come block by block in rounds, on tasks
    # renumbered by tree position: the result is a permutation of the
    # original tasks, J tracked exactly, the same for the same seed
    from rankmap.algorithms.refine.swaps import BLOCK_TASKS

    g = grid_graph(80, 64)
    assert g.n > BLOCK_TASKS
    topo = hierarchy_topology([4, 16, 80], [1, 10, 100])
    start = np.random.default_rng(0).permutation(g.n)
    pe, st = refine_swaps(g, topo, start, depth=3, max_passes=2, seed=4)
    assert sorted(pe.tolist()) == list(range(g.n))
    assert st.j_end == pytest.approx(mapping_cost(g, topo, pe)) and st.j_end < 0.95 * st.j_start
    assert np.array_equal(pe, refine_swaps(g, topo, start, depth=3, max_passes=2, seed=4)[0])
