import numpy as np
import pytest

from rankmap.topology import (Topology, TreeNode, from_tleaf, hierarchy_topology, load_topology,
                              parse_hierarchy, to_tleaf, topology_from_strings)


def brute_distance(p, q, arities, dists):
    if p == q:
        return 0.0
    group = 1
    for a, d in zip(arities, dists):
        group *= a
        if p // group == q // group:
            return d
    raise AssertionError("PEs share no group")


@pytest.mark.parametrize("s,d", [("4:16:8", "1:10:100"), ("2:3:5:2", "1:2:7:30"), ("7", "3")])
def test_distance_oracle_matches_definition(s, d):
    arities, dists = parse_hierarchy(s, d)
    topo = hierarchy_topology(arities, dists)
    k = topo.n_pes
    p, q = np.meshgrid(np.arange(k), np.arange(k))
    got = topo.distance(p.ravel(), q.ravel())
    want = [brute_distance(a, b, arities, dists) for a, b in zip(p.ravel(), q.ravel())]
    assert np.array_equal(got, want)


def test_irregular_tree_distance_and_ranges():
    # two packages with 3 and 2 cores, one core with two hardware threads
    pu = lambda i: TreeNode("pu", os_index=i)
    core_smt = TreeNode("core", 1, [pu(0), pu(1)])
    pkg0 = TreeNode("package", 10, [core_smt, pu(2), pu(3)])
    pkg1 = TreeNode("package", 10, [pu(4), pu(5)])
    topo = Topology(TreeNode("machine", 100, [pkg0, pkg1], name="hostA"))
    assert topo.n_pes == 6
    assert topo.pe_os_index.tolist() == [0, 1, 2, 3, 4, 5]
    assert topo.distance([0, 0, 2, 1, 4], [1, 2, 3, 5, 4]).tolist() == [1, 10, 10, 100, 0]
    assert topo.leaf_range(topo.children(0)[1]) == (4, 6)
    assert topo.uniform_hierarchy() is None
    assert set(topo.pe_host) == {"hostA"}


def test_tleaf_round_trip():
    arities, dists = [4, 16, 8], [1.0, 10.0, 100.0]
    text = to_tleaf(arities, dists)
    assert text == "tleaf 3 8 100 16 10 4 1"
    assert from_tleaf(text) == (arities, dists)
    # the Scotch target of the netloc test (a real machine description)
    assert from_tleaf("tleaf\n5 4 180 24 90 2 9 2 3 6 1") == ([6, 2, 2, 24, 4],
                                                            [1.0, 3.0, 9.0, 90.0, 180.0])


@pytest.mark.parametrize("bad", ["tleaf 2 4 1", "tleaf x", "leaf 1 2 3", "tleaf 1 0 5"])
def test_tleaf_errors(bad):
    with pytest.raises(ValueError):
        from_tleaf(bad)


@pytest.mark.parametrize("s,d", [("4:x", None), ("4:0", None), ("4:16", "1:10:100"), ("4", "-1")])
def test_hierarchy_errors(s, d):
    with pytest.raises(ValueError):
        parse_hierarchy(s, d)


def test_uniform_description_and_hosts():
    topo = topology_from_strings("4:16:8", "1:10:100")
    assert topo.uniform_hierarchy() == ([4, 16, 8], [1.0, 10.0, 100.0])
    assert topo.hosts() == [f"node{i}" for i in range(8)]
    assert topo.slot_in_host()[64:68].tolist() == [0, 1, 2, 3]


def test_load_topology_files(tmp_path):
    f = tmp_path / "arch.tgt"
    f.write_text("tleaf\n2 4 50 8 5\n")
    assert load_topology(str(f)).uniform_hierarchy() == ([8, 4], [5.0, 50.0])
    g = tmp_path / "h.txt"
    g.write_text("hierarchy 2:2 distances 1:9\n")
    assert load_topology(str(g)).n_pes == 4
    bad = tmp_path / "bad.txt"
    bad.write_text("what is this")
    with pytest.raises(ValueError, match="bad.txt"):
        load_topology(str(bad))


@pytest.mark.parametrize("arities,distances,prefix", [([4, 16, 8], [1, 10, 100], "node"), ([2], [5], "node"),
                                                      ([3, 1, 2], [1, 2, 3], None), ([2, 2, 2, 3], [1, 2, 3, 4], "n")])
def test_a_uniform_hierarchy_built_as_arrays_is_the_tree_of_its_nodes(arities, distances, prefix):
    """``Topology.uniform`` (no TreeNode per PE: 2^24 PEs in seconds) gives
    the same machine as the tree built node by node."""
    def build(level):
        if level < 0:
            return TreeNode("pe")
        return TreeNode(f"level{level + 1}", float(distances[level]), [build(level - 1) for _ in range(arities[level])])

    root = build(len(arities) - 1)
    for i, node in enumerate([] if prefix is None else root.children if len(arities) >= 2 else [root]):
        node.name = f"{prefix}{i}"
    a, b = Topology(root), hierarchy_topology(arities, distances, prefix)
    for key in ("parent", "node_distance", "node_depth", "leaf_of_pe", "child_ptr", "child_idx", "pe_os_index",
                "leaf_start", "leaf_stop", "_paths", "_dist_ext", "_depth_ext", "pe_host", "pe_device",
                "pe_link_row", "pe_link_node"):
        assert np.array_equal(np.asarray(getattr(a, key)), np.asarray(getattr(b, key))), key
    assert (a.node_kind, a.node_name, a.pe_cpus, a.n_nodes) == (b.node_kind, b.node_name, b.pe_cpus, b.n_nodes)
    assert a.level_kinds() == b.level_kinds() and a.hosts() == b.hosts()
    # its LCA and distance by group arithmetic are the ancestor paths' (pairs on one PE included)
    rng = np.random.default_rng(0)
    p, q = rng.integers(0, a.n_pes, 4000), rng.integers(0, a.n_pes, 4000)
    q[:50] = p[:50]
    assert np.array_equal(b.lca(p, q), a.lca(p, q)) and np.array_equal(b.distance(p, q), a.distance(p, q))
    assert b.distance(1 % b.n_pes, 1 % b.n_pes) == 0 and b.lca(0, b.n_pes - 1) == a.lca(0, a.n_pes - 1)
