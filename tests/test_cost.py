import numpy as np
import pytest

from rankmap import CommGraph, MappingError, evaluate, mapping_cost, topology_from_strings, validate_mapping
from rankmap.mapping import balance_report

# 4 tasks; hierarchy 2:2 with distances 1:10 (pairs {0,1} and {2,3})
EDGES = [(0, 1, 5), (1, 0, 3), (0, 2, 2), (3, 1, 4), (2, 2, 9)]


@pytest.fixture
def small():
    s, d, w = zip(*EDGES)
    return CommGraph.from_edges(s, d, w, n=4), topology_from_strings("2:2", "1:10")


def test_J_hand_computed(small):
    g, t = small
    # identity: 0->1 and 1->0 at distance 1, 0->2 and 3->1 at distance 10
    assert mapping_cost(g, t, [0, 1, 2, 3]) == 5 + 3 + 2 * 10 + 4 * 10
    # tasks 1 and 2 swapped
    assert mapping_cost(g, t, [0, 2, 1, 3]) == 5 * 10 + 3 * 10 + 2 * 1 + 4 * 1
    assert g.self_bytes == 9  # the self-message never counts


def test_symmetric_graph_counts_each_edge_twice():
    g = CommGraph.from_edges([0, 1], [1, 0], [7, 7], n=2)  # METIS edge {0,1} weight 7
    t = topology_from_strings("2", "3")
    assert mapping_cost(g, t, [0, 1]) == 2 * 7 * 3


def test_report_levels_bottleneck_hops(small):
    g, t = small
    r = evaluate(g, t, [0, 1, 2, 3])
    assert r.J == 68 and r.total_bytes == 14
    assert [(lv["level"], lv["bytes"], lv["distance"]) for lv in r.bytes_per_level] == \
        [("level1", 8.0, 1.0), ("level2", 6.0, 10.0)]
    assert r.bottleneck == 9  # into PE 1: 5 from task 0 plus 4 from task 3
    assert r.hops_per_byte == pytest.approx((5 * 2 + 3 * 2 + 2 * 4 + 4 * 4) / 14)


def test_link_loads_against_brute_force():
    rng = np.random.default_rng(3)
    t = topology_from_strings("3:2:2", "1:5:20")
    k = t.n_pes
    src, dst = rng.integers(0, k, 60), rng.integers(0, k, 60)
    w = rng.random(60)
    g = CommGraph.from_edges(src, dst, w, n=k)
    pe = rng.permutation(k)
    r = evaluate(g, t, pe)
    # brute force: for every node, bytes leaving and entering its PE range
    s, d, ww = g.coo()
    best = 0.0
    for node in range(1, t.n_nodes):
        lo, hi = t.leaf_range(node)
        inside_s = (pe[s] >= lo) & (pe[s] < hi)
        inside_d = (pe[d] >= lo) & (pe[d] < hi)
        best = max(best, ww[inside_s & ~inside_d].sum(), ww[~inside_s & inside_d].sum())
    assert r.bottleneck == pytest.approx(best)


def test_validation(small):
    g, t = small
    with pytest.raises(MappingError, match="not one-to-one"):
        validate_mapping([0, 0, 1, 2], g, t)
    with pytest.raises(MappingError, match="outside"):
        validate_mapping([0, 1, 2, 4], g, t)
    with pytest.raises(MappingError, match="4 tasks"):
        validate_mapping([0, 1, 2], g, t)
    with pytest.raises(MappingError):
        evaluate(g, t, [0, 1, 1, 3])


def test_balance_rule_strict_and_sharedmap():
    # 10 unit tasks on 4 PEs, eps 3%: strict L_max = floor(1.03 * 3) = 3, SharedMap ceil(1.03*2.5) = 3
    rep = balance_report(np.array([0, 0, 0, 1, 1, 1, 2, 2, 3, 3]), np.ones(10), 4, 0.03)
    assert rep["L_max"] == 3 and rep["balanced"]
    rep = balance_report(np.array([0] * 4 + [1] * 2 + [2] * 2 + [3] * 2), np.ones(10), 4, 0.03)
    assert not rep["balanced"]


@pytest.mark.parametrize("hierarchy,distances", [("2", "3"), ("2:2", "1:10"), ("3:2:2", "1:5:20"),
                                                 ("4:16:8", "1:10:100"), ("2:3:1:4", "1:2:7:50")])
@pytest.mark.parametrize("many", [False, True])
def test_uniform_pass_equals_pairwise_path(monkeypatch, hierarchy, distances, many):
    """On a uniform hierarchy the one compiled pass (``cost_kernel``) gives
    the report the pairwise numpy path gives: several trees, graphs
    with asymmetric bytes, one-to-one and many-to-one mappings (same-PE
    pairs)."""
    import rankmap.graph as graph_module
    from rankmap import cores, cost

    t = topology_from_strings(hierarchy, distances)
    rng = np.random.default_rng(len(hierarchy) + many)
    n = 3 * t.n_pes if many else t.n_pes
    m = 8 * n
    g = CommGraph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), rng.integers(1, 1000, m) * 1.5, n=n)
    for pe in ([rng.integers(0, t.n_pes, n), np.arange(n) % t.n_pes] if many
               else [rng.permutation(n), np.arange(n)]):
        monkeypatch.setattr(cost, "UNIFORM_PASS_PAIRS", 1 << 62)
        pairwise = evaluate(g, t, pe, check=False, comm_factor=2.0)
        j_pairwise = mapping_cost(g, t, pe)
        monkeypatch.setattr(cost, "UNIFORM_PASS_PAIRS", 0)
        one_pass = evaluate(g, t, pe, check=False, comm_factor=2.0)
        with monkeypatch.context() as threaded:  # the compiled passes in slices of rows on three threads
            threaded.setattr(cores, "THREADED_MIN_ENTRIES", 0)
            threaded.setattr(cores, "default_workers", lambda: 3)
            assert mapping_cost(g, t, pe) == pytest.approx(j_pairwise, rel=1e-12)
            sliced = evaluate(g, t, pe, check=False, comm_factor=2.0).as_dict()
            mirrored = CommGraph(g.bytes + g.bytes.T)  # known symmetric: what PEs receive from the row sums
            threaded.setattr(graph_module, "_SORT_CHECK_MAX", 0)
            assert mirrored.is_symmetric() and mirrored.known_symmetric()
            assert evaluate(mirrored, t, pe, check=False).J == pytest.approx(2 * j_pairwise, rel=1e-12)
            assert evaluate(mirrored, t, pe, check=False).bottleneck == pytest.approx(
                evaluate(CommGraph(g.bytes + g.bytes.T), t, pe, check=False).bottleneck, rel=1e-12)
        assert {k: sliced[k] for k in ("J", "bottleneck", "link_time", "hops_per_byte")} == pytest.approx(
            {k: pairwise.as_dict()[k] for k in ("J", "bottleneck", "link_time", "hops_per_byte")}, rel=1e-12)
        a, b = pairwise.as_dict(), one_pass.as_dict()
        numbers = [k for k, v in a.items() if isinstance(v, float)]
        assert {k: b[k] for k in numbers} == pytest.approx({k: a[k] for k in numbers}, rel=1e-12)
        for x, y in zip(b.pop("bytes_per_level"), a.pop("bytes_per_level"), strict=True):
            assert x == {**y, "bytes": pytest.approx(y["bytes"], rel=1e-12)}
        assert {k: v for k, v in b.items() if k not in numbers} == {k: v for k, v in a.items() if k not in numbers}
        assert one_pass.J == pytest.approx(mapping_cost(g, t, pe), rel=1e-12)
        # every link's load both ways and every PE's bytes, not only the largest
        loads, pe_bytes = cost._uniform_breakdown(g, t, pe, *cost._uniform_groups(g, t))[3:]
        assert loads == pytest.approx(cost._pairwise_breakdown(g, t, pe)[3], rel=1e-12, abs=1e-9)
        assert pe_bytes == pytest.approx(cost._pairwise_breakdown(g, t, pe)[4], rel=1e-12, abs=1e-9)
        assert a["J"] > 0 and a["bottleneck"] > 0


def test_large_graphs_remember_the_cost_of_a_mapping(monkeypatch):
    """From MEMO_MIN_PAIRS pairs J is remembered per graph, machine and
    mapping (auto scores the given order and its best, the check after a cut
    search scores them again): a mapping changed in place, another machine
    or another graph is scored anew, and the memory stays small."""
    from rankmap import cost

    monkeypatch.setattr(cost, "MEMO_MIN_PAIRS", 0)
    g = CommGraph.from_edges(np.arange(63), np.arange(1, 64), np.ones(63), n=64)
    t, other = topology_from_strings("4:16", "1:10"), topology_from_strings("4:16", "1:100")
    passes, one_pass = [], cost._cost
    monkeypatch.setattr(cost, "_cost", lambda *a: passes.append(1) or one_pass(*a))
    pe = np.arange(64)
    j = mapping_cost(g, t, pe)
    assert mapping_cost(g, t, pe.copy()) == j and len(passes) == 1  # same mapping, same machine: remembered
    pe[[0, 63]] = pe[[63, 0]]
    assert mapping_cost(g, t, pe) > j and len(passes) == 2          # changed in place: scored anew
    assert mapping_cost(g, other, np.arange(64)) > j and len(passes) == 3
    assert mapping_cost(CommGraph(g.bytes * 2), t, np.arange(64)) == 2 * j and len(passes) == 4
    for seed in range(10):
        mapping_cost(g, t, np.random.default_rng(seed).permutation(64))
    assert len(cost._REMEMBERED[g]) <= cost.MEMO_SIZE

