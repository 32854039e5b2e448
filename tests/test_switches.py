"""The network above the nodes from what sites have: Slurm's topology.conf
(tree and block plugins), topology.yaml (tree, block, flat), and Cray
xnames in host names or in a host -> xname file."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankmap.cli import main
from rankmap.topology import hierarchy_topology
from rankmap.topology.cluster import compose_cluster
from rankmap.topology.switches import load_switches, parse_topology_conf, parse_topology_yaml

SLURM = Path(__file__).resolve().parent / "data" / "slurm"
NODE = hierarchy_topology([2], [1], host_prefix=None)


def _cluster(hosts, switches):
    return compose_cluster([(h, NODE) for h in hosts], switches=switches)


def _host_distance(t, a, b):
    pe = {h: list(t.pe_host).index(h) for h in (a, b)}
    return float(t.distance(pe[a], pe[b]))


def test_topology_yaml_tree_block_and_flat():
    hosts = [f"node{i:02d}" for i in range(1, 5)]
    tree = _cluster(hosts, parse_topology_yaml(SLURM / "topology.yaml"))   # cluster_default
    assert _host_distance(tree, "node01", "node02") == 100 and _host_distance(tree, "node01", "node03") == 400
    hosts16 = [f"node{i:02d}" for i in range(1, 17)]
    block = _cluster(hosts16, load_switches(f"{SLURM / 'topology.yaml'}:topo2", hosts16))
    d = {h: _host_distance(block, "node01", h) for h in ("node04", "node05", "node09")}
    assert d == {"node04": 100, "node05": 400, "node09": 1600}   # block, pair of blocks, pair of pairs
    assert load_switches(f"{SLURM / 'topology.yaml'}:topo3", hosts) is None   # flat: no levels
    with pytest.raises(ValueError, match="no topology 'x'"):
        load_switches(f"{SLURM / 'topology.yaml'}:x", hosts)


def test_topology_yaml_errors(tmp_path):
    f = tmp_path / "t.yaml"
    for text, message in [("- topology: a\n  ring:\n    rings: []\n", "ring topology"),
                          ("- topology: a\n  tree:\n    switches:\n      - nodes: n1\n", "has no 'switch' name"),
                          ("- topology: a\n  tree:\n    switches:\n      - switch: s\n        children: t\n",
                           "unknown switch 't'"),
                          ("- topology: a\n  block:\n    block_sizes: [4, 2]\n    blocks: []\n", "must grow"),
                          ("topology: a\n", "expected a list of topologies"),
                          ("- topology: [\n", r"t.yaml:\d+: malformed YAML")]:
        f.write_text(text)
        with pytest.raises(ValueError, match=message):
            parse_topology_yaml(f)


def test_block_plugin_lines_of_topology_conf():
    switches = parse_topology_conf(SLURM / "block.conf")
    hosts = ["node1", "node32", "node33", "node97"]
    t = _cluster(hosts, switches)
    assert _host_distance(t, "node1", "node32") == 100 and _host_distance(t, "node1", "node33") == 400
    assert _host_distance(t, "node1", "node97") == 1600


def test_xnames_in_host_names_and_in_a_file(tmp_path):
    hosts = ["x1000c0s0b0n0", "x1000c0s0b0n1", "x1000c0s1b0n0", "x1000c1s0b0n0", "x1001c0s0b0n0"]
    t = compose_cluster([(h, NODE) for h in hosts])   # the names say where the nodes are
    assert [_host_distance(t, hosts[0], h) for h in hosts[1:]] == [100, 200, 300, 500]
    assert {"blade", "chassis", "cabinet", "network"} <= {k for k in t.node_kind for k in k.split("+")}
    mapping = tmp_path / "xnames"
    mapping.write_text("".join(f"nid{i:06d} {x}\n" for i, x in enumerate(hosts)))
    nids = [f"nid{i:06d}" for i in range(len(hosts))]
    t2 = _cluster(nids, load_switches(str(mapping), nids))
    assert [_host_distance(t2, nids[0], h) for h in nids[1:]] == [100, 200, 300, 500]
    with pytest.raises(ValueError, match="no xname for host 'nid000009'"):
        load_switches(str(mapping), ["nid000009"])


def test_map_reads_the_network_of_a_yaml_and_of_xnames(tmp_path, capsys):
    edges = tmp_path / "g.edges"
    edges.write_text("0 1 100\n1 2 5\n2 3 100\n")
    assert main(["map", str(edges), "--hosts", "node[01-04]", "--hierarchy", "1",
                 "--switches", str(SLURM / "topology.yaml"), "--json"]) == 0
    assert capsys.readouterr().out.count('"J"') == 1
    assert main(["topo", "--hosts", "x1000c0s[0-1]b0n0", "--json"]) == 0   # two blades of a chassis
    assert '"distances": "4:200"' in capsys.readouterr().out
