"""The message time: alpha per message and bytes over beta at the level a
pair crosses.  Where alpha and beta come from (a cluster file's latencies
and bandwidths, a named interconnect, the defaults), what a mapping costs,
a mapping chosen by message counts alone, graphs without counts left as
they were, and the report's time."""

import json

import numpy as np
import pytest

from rankmap.algorithms import map_tasks
from rankmap.cli import main
from rankmap.cost import evaluate, latency_weighted, mapping_cost, message_time
from rankmap.emulate import ClusterSpec
from rankmap.graph import CommGraph
from rankmap.topology import load_topology, topology_from_strings
from rankmap.topology.bandwidth import format_latency, parse_latency
from rankmap.topology.message_cost import INTERCONNECTS, SHARED_MEMORY, message_costs

# two nodes of two slots; a message between the nodes costs 50 us, a byte 1 / (1gbit / 8 / 2):
# each node's link shared by its two slots
TWO_NODES = """cluster
hierarchy 2 distances 1
nodes node[0-1]
network 2 distances 100 bandwidths 1gbit latencies 50us
"""
BETA = 1e9 / 8 / 2


def _costs_at(topology, kind):
    """(alpha, beta) of the nodes of ``kind`` (all alike)."""
    costs = message_costs(topology)
    nodes = [x for x in range(topology.n_nodes) if topology.node_kind[x] == kind]
    alpha, inverse = set(costs.alpha[nodes].tolist()), set(costs.inverse[nodes].tolist())
    assert len(alpha) == 1 and len(inverse) == 1, kind
    return alpha.pop(), 1 / inverse.pop()


def _two_nodes(tmp_path):
    f = tmp_path / "two.topo"
    f.write_text(TWO_NODES)
    return load_topology(str(f))


def test_latencies_as_users_write_them():
    assert parse_latency("1.5us") == pytest.approx(1.5e-6) and parse_latency("80 ns") == pytest.approx(8e-8)
    assert parse_latency("0.2ms") == pytest.approx(2e-4) and parse_latency("2e-6s") == pytest.approx(2e-6)
    assert parse_latency(format_latency(37.5e-6)) == pytest.approx(37.5e-6)
    for bad in ("fast", "10", "1us2", "2s"):
        with pytest.raises(ValueError, match="latency"):
            parse_latency(bad)


def test_cluster_file_latencies_bandwidths_and_interconnect(tmp_path):
    t = _two_nodes(tmp_path)
    assert _costs_at(t, "switch") == pytest.approx((50e-6, BETA))       # as the file says
    assert message_costs(t).source == "the machine description"
    assert message_costs(t).fold == pytest.approx(50e-6 * BETA)         # the bytes a message is worth there
    # inside a node: shared memory's defaults (the node's own level: where packages meet)
    assert _costs_at(t, "level1") == pytest.approx((SHARED_MEMORY.across, SHARED_MEMORY.bandwidth))
    # a named interconnect fills what the file leaves out, one switch hop more each way per level up
    f = tmp_path / "racks.topo"
    f.write_text("cluster\nhierarchy 2 distances 1\nnodes n[1-8]\n"
                 "network 4:2 distances 100:400 bandwidths 100gbit\ninterconnect slingshot\n")
    t = load_topology(str(f))
    net = INTERCONNECTS["slingshot"]
    assert _costs_at(t, "switch") == pytest.approx((net.latency, 100e9 / 8 / 2))   # the given rate wins
    # between racks: one more hop each way; the slowest share on the way decides beta: the
    # switches' links (the interconnect's rate) serve 8 slots, the nodes' own 2
    assert _costs_at(t, "rack") == pytest.approx((net.latency + 2 * net.hop, net.bandwidth / 8))
    top = [x for x in range(t.n_nodes) if t.node_kind[x] == "switch"]
    assert np.isclose(t.node_uplink[top], net.bandwidth).all()  # the switches' links into the racks
    for bad, msg in [("interconnect token-ring", "interconnect 'token-ring'"),
                     ("network 4:2 distances 100:400 latencies 1us:2us:3us:4us", "4 network latencies"),
                     ("network 4:2 distances 100:400 latencies fast", "latency 'fast'")]:
        f.write_text("cluster\nhierarchy 2 distances 1\nnodes n[1-8]\n" + bad + "\n"
                     + ("" if bad.startswith("network") else "network 4:2 distances 100:400\n"))
        with pytest.raises(ValueError, match=msg):
            load_topology(str(f))


def test_defaults_without_a_description():
    t = topology_from_strings("4:2:4", "1:10:100")  # 4 hosts of 2 packages of 4 cores
    net = INTERCONNECTS["infiniband"]
    assert _costs_at(t, "level3") == pytest.approx((net.latency, net.bandwidth / 8))  # a NIC per host of 8
    assert _costs_at(t, "level2") == pytest.approx((SHARED_MEMORY.across, SHARED_MEMORY.bandwidth))
    assert _costs_at(t, "level1") == pytest.approx((SHARED_MEMORY.latency, SHARED_MEMORY.bandwidth))
    assert message_costs(t).source == "defaults (InfiniBand HDR)"


def test_message_time_prices_each_pair_at_its_level(tmp_path):
    t = _two_nodes(tmp_path)
    # 0 <-> 1: 1000 messages of 100 kB in all; 0 -> 2: one message of 1 MB
    g = CommGraph.from_edges([0, 1, 0], [1, 0, 2], [1e5, 1e5, 1e6], n=4, messages=[1000, 1000, 1])
    across = message_time(g, t, [0, 2, 1, 3])  # 0 and 1 on different nodes, 0 and 2 together
    inside = SHARED_MEMORY.across
    assert across.latency == pytest.approx((2000 * 50e-6 + inside) / 4)
    assert across.bandwidth == pytest.approx((2e5 / BETA + 1e6 / SHARED_MEMORY.bandwidth) / 4)
    together = message_time(g, t, [0, 1, 2, 3])
    assert together.latency == pytest.approx((2000 * inside + 50e-6) / 4)
    assert together.total < across.total
    assert message_time(g, t, [0, 0, 0, 0]).total == 0.0  # one PE: nothing crosses a link
    assert message_time(CommGraph.from_edges([0], [1], [5.0], n=4), t, np.arange(4)) is None


def test_only_message_counts_separate_two_layouts(tmp_path):
    """Equal bytes on every pair: the pairs that exchange 1000 small messages
    share a node, those that exchange one message cross the network."""
    t = _two_nodes(tmp_path)
    pairs = [(0, 2, 1000), (1, 3, 1000), (0, 1, 1), (2, 3, 1)]  # the given order puts 0 and 2 apart
    src, dst, nbytes, msgs = [], [], [], []
    for u, v, k in pairs:
        src += [u, v]
        dst += [v, u]
        nbytes += [1e5, 1e5]
        msgs += [k, k]
    g = CommGraph.from_edges(src, dst, nbytes, n=4, messages=msgs)
    bytes_only = CommGraph.from_edges(src, dst, nbytes, n=4)
    given = np.arange(4)
    for method in ("auto", "greedy", "treematch"):
        pe = map_tasks(g, t, method=method, objective="time").pe_of_task
        node = pe // 2
        assert node[0] == node[2] and node[1] == node[3], method
        assert mapping_cost(bytes_only, t, pe) == mapping_cost(bytes_only, t, given)  # J cannot tell them apart
        assert message_time(g, t, pe).total < message_time(g, t, given).total / 10


def test_a_graph_without_message_counts_maps_as_before(tmp_path):
    t = _two_nodes(tmp_path)
    g = CommGraph.from_edges([0, 1, 2], [1, 2, 3], [10.0, 20.0, 30.0], n=4)
    assert latency_weighted(g, t) is g  # the search sees the very same graph
    assert evaluate(g, t, np.arange(4)).time is None


def _edge_list(tmp_path):
    f = tmp_path / "app.edges"
    f.write_text("# src dst bytes messages\n0 2 100000 1000\n2 0 100000 1000\n1 3 100000 1000\n"
                 "3 1 100000 1000\n0 1 100000 1\n1 0 100000 1\n2 3 100000 1\n3 2 100000 1\n")
    topo = tmp_path / "two.topo"
    topo.write_text(TWO_NODES)
    return str(f), str(topo)


def test_map_reports_the_message_time_before_and_after(tmp_path, capsys):
    edges, topo = _edge_list(tmp_path)
    assert main(["map", edges, "--topology", topo, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    per_rank = (2000 * 50e-6 + 2 * SHARED_MEMORY.across) * 2 / 4  # the given order: the 1000s cross
    assert out["time_before"] == pytest.approx(per_rank + (4e5 / BETA + 4e5 / SHARED_MEMORY.bandwidth) / 4)
    assert out["time_latency_before"] == pytest.approx(per_rank)
    assert out["time"] < out["time_before"] / 10 and out["time_source"] == "the machine description"
    assert out["time_latency"] + out["time_bandwidth"] == pytest.approx(out["time"])
    assert out["J"] == out["J_before"]  # bytes alone see no difference
    assert main(["map", edges, "--topology", topo]) == 0
    table = capsys.readouterr().out
    assert "message time per rank" in table and "latency (alpha x messages)" in table
    assert "alpha, beta per level: the machine description" in table


def test_the_emulated_cluster_file_carries_its_latency(tmp_path):
    spec = ClusterSpec(nodes=4, slots=2, bandwidth="50mbit")
    f = tmp_path / "c.topo"
    f.write_text(spec.topology_file_text())
    read, built = load_topology(str(f)), spec.topology()
    assert _costs_at(read, "switch") == pytest.approx((parse_latency(spec.latency), 50e6 / 8 / 2))
    assert np.allclose(message_costs(read).alpha, message_costs(built).alpha)
    assert np.allclose(message_costs(read).inverse, message_costs(built).inverse)
