"""Link bandwidths of the machine description and the link time of a mapping:
the rates a cluster file gives, the distance-proportional model elsewhere,
and what ``cost.evaluate`` reports from them."""

import numpy as np
import pytest

from rankmap.cost import all_link_loads, evaluate
from rankmap.graph import CommGraph
from rankmap.topology import MeshTopology, Topology, TreeNode, load_topology, restrict_to_slots
from rankmap.topology import topology_from_strings
from rankmap.topology.bandwidth import link_bandwidths, parse_bandwidths, parse_rate
from rankmap.topology.levels import merge_structureless_levels

CLUSTER = """cluster
hierarchy 2:2 distances 1:10
nodes cn[01-04]
network 2 distances 100:1000 bandwidths 100mbit:50mbit
"""


def test_rates():
    assert parse_rate("200mbit") == 200_000_000 and parse_rate("10mbps") == 80_000_000
    assert parse_bandwidths("8gbit:1gbps") == [1e9, 1e9]
    for bad in ("fast", "10", "1bit"):
        with pytest.raises(ValueError, match="bandwidth"):
            parse_rate(bad)


def test_cluster_file_bandwidths_and_the_distance_model(tmp_path):
    f = tmp_path / "c.topo"
    f.write_text(CLUSTER)
    t = load_topology(str(f))
    bw = link_bandwidths(t)
    assert bw.unit == "s" and bw.inverse.size == 2 * t.n_nodes
    with np.errstate(divide="ignore"):
        per_node = 1 / bw.inverse[:t.n_nodes]
    hosts = [n for n in range(t.n_nodes) if t.node_name[n] is not None]
    assert np.allclose(per_node[hosts], 100e6 / 8)                     # each node's own link
    racks = [n for n in range(t.n_nodes) if t.node_kind[n] == "switch"]
    assert np.allclose(per_node[racks], 50e6 / 8)                      # the rack uplinks
    # inside a node: the anchor (smallest bandwidth x distance: 100mbit x 100) over the distance
    leaves, groups = t.leaf_of_pe, t.parent[t.leaf_of_pe]
    assert np.allclose(per_node[leaves], 100e6 / 8 * 100 / 1)
    assert np.allclose(per_node[groups], 100e6 / 8 * 100 / 10)
    assert bw.inverse[0] == 0 and bw.inverse[t.n_nodes] == 0           # the root has no link
    for bad, msg in [("bandwidths 1mbit:2mbit:3mbit", "3 network bandwidths"),
                     ("bandwidths fast", "bandwidth 'fast'"), ("speed 1mbit", "cannot read")]:
        f.write_text(CLUSTER.replace("bandwidths 100mbit:50mbit", bad))
        with pytest.raises(ValueError, match=msg):
            load_topology(str(f))


def test_without_bandwidths_times_are_relative_and_proportional_to_distance():
    t = topology_from_strings("4:4", "1:100")
    bw = link_bandwidths(t)
    assert bw.unit == ""
    assert set(bw.inverse[:t.n_nodes].tolist()) == {0.0, 1.0, 100.0}
    mesh = MeshTopology((4, 4), torus=True)
    assert np.all(link_bandwidths(mesh).inverse == 1)
    # made once per machine (the report asks before and after the mapping), anew for bandwidths given later
    assert link_bandwidths(t) is bw
    t.node_uplink = np.where(t.parent >= 0, 1e6, np.nan)
    assert link_bandwidths(t) is not bw and link_bandwidths(t).unit == "s"


def test_merged_levels_and_slots_keep_the_slowest_link():
    pes = [TreeNode("pe") for _ in range(2)]
    inner = TreeNode("core", 1, pes, uplink=5e9)
    chain = TreeNode("package", 10, [inner], uplink=2e9)
    other = TreeNode("package", 10, [TreeNode("core", 1, [TreeNode("pe"), TreeNode("pe")])])
    root = TreeNode("machine", 20, [chain, other])  # every package has one core: merged
    t = Topology(merge_structureless_levels(root))
    merged = t.parent[t.leaf_of_pe[0]]
    assert t.node_kind[merged] == "package+core" and t.node_uplink[merged] == 2e9
    assert np.isnan(t.node_uplink[t.parent[t.leaf_of_pe[2]]])  # the other package: none given
    r = restrict_to_slots(t, [0, 0, 1, 2])  # PE 0 twice: two slots at distance 0
    kept = [n for n in range(r.n_nodes) if r.node_kind[n] == "package+core"]
    assert r.node_uplink[kept[0]] == 2e9
    with pytest.raises(ValueError, match="bandwidths must be > 0"):
        Topology(TreeNode("machine", 1, [TreeNode("pe", uplink=0.0), TreeNode("pe")]))


def test_evaluate_reports_the_link_time(tmp_path):
    f = tmp_path / "c.topo"
    f.write_text(CLUSTER)
    t = load_topology(str(f))
    # tasks 0..3 on the first node, 4..7 on the second (same rack), 8.. on the other rack
    g = CommGraph.from_edges(np.array([0, 4, 0]), np.array([4, 8, 1]), np.array([1e6, 2e6, 5e6]), n=16)
    pe = np.arange(16)
    rep = evaluate(g, t, pe)
    # 2 MB over the rack uplink at 50mbit beats 1e6 + 2e6 over a node link at 100mbit
    assert rep.link_time_unit == "s" and rep.link_time == pytest.approx(2e6 / 6.25e6)
    assert rep.busiest_link_bytes == 2e6 and rep.busiest_link.startswith("switch node")
    assert rep.bottleneck == 6e6                   # the most bytes: PE 0's own link
    loads = all_link_loads(t, pe[g.coo()[0]], pe[g.coo()[1]], g.coo()[2])
    assert rep.link_time == pytest.approx(np.max(link_bandwidths(t).times(loads)))
