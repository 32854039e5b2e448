"""Clusters: network levels, slots (with oversubscription), hostfiles,
nodelists, the cluster file, and the `rankmap topo` command."""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from rankmap.cli import main
from rankmap.topology import load_topology
from rankmap.topology.cluster import compose_cluster, host_slot_pes, restrict_to_slots, slot_of_process
from rankmap.topology.hosts import expand_nodelist, parse_hostfile_text
from rankmap.topology.hwloc import read_hwloc_xml

TOPO = Path(__file__).parent / "data" / "topologies"
NODE = TOPO / "16em64t-4s2c2t.v2-hwloc2.14.xml"  # 4 packages x 2 cores x 2 PUs, distances 1:4:20


@pytest.fixture(scope="module")
def node():
    return read_hwloc_xml(NODE)


def test_network_levels(node):
    c = compose_cluster([(f"h{i}", node) for i in range(8)], (4, 2), (100, 400))
    assert c.n_pes == 128 and c.hosts() == [f"h{i}" for i in range(8)]
    assert c.uniform_hierarchy() == ([2, 2, 4, 4, 2], [1.0, 4.0, 20.0, 100.0, 400.0])
    assert c.distance([0, 0, 0], [16, 64, 127]).tolist() == [100.0, 400.0, 400.0]
    assert pickle.loads(pickle.dumps(c)).distance(0, 127) == 400.0


def test_network_overflow_needs_a_top_distance(node):
    nodes = [(f"h{i}", node) for i in range(10)]
    with pytest.raises(ValueError, match="at most 8"):
        compose_cluster(nodes, (4, 2), (100, 400))
    c = compose_cluster(nodes, (4, 2), (100, 400, 1000))
    assert c.distance(0, 159) == 1000.0 and c.distance(0, 16 * 4) == 400.0
    flat = compose_cluster(nodes)  # default: one network level
    assert flat.distance(0, 16) == 100.0
    with pytest.raises(ValueError, match="listed twice"):
        compose_cluster([("a", node), ("a", node)])


def test_heterogeneous_nodes(node):
    other = read_hwloc_xml(TOPO / "coral-lassen.xml")
    c = compose_cluster([("x", node), ("lassen", other)], (), (500,))
    assert c.n_pes == 16 + 160 and c.uniform_hierarchy() is None
    assert c.distance(0, 16) == 500.0 and c.distance(16, 17) == 1.0
    assert c.pe_os_index[16] == 8


def test_restriction_keeps_distances_and_oversubscribes(node):
    c = compose_cluster([(f"h{i}", node) for i in range(4)], (2,), (100, 400))
    rng = np.random.default_rng(0)
    pes = rng.integers(0, c.n_pes, 40)
    pes[5] = pes[6] = pes[7]  # a PE with three processes
    r = restrict_to_slots(c, pes)
    assert r.n_pes == 40
    slot = slot_of_process(pes)
    i, j = np.triu_indices(40, 1)
    assert np.array_equal(r.distance(slot[i], slot[j]), c.distance(pes[i], pes[j]))
    assert r.distance(slot[5], slot[6]) == 0.0
    assert np.array_equal(r.pe_os_index[slot], c.pe_os_index[pes])
    assert list(r.pe_host[slot]) == list(c.pe_host[pes])
    assert slot_of_process([3, 1, 3, 0]).tolist() == [2, 1, 3, 0]
    with pytest.raises(ValueError, match="not in this topology"):
        restrict_to_slots(c, [0, c.n_pes])


def test_restriction_to_one_core_per_package(node):
    r = restrict_to_slots(node, [0, 4, 8, 12])
    assert r.uniform_hierarchy() == ([4], [20.0])


def test_nodelist():
    assert expand_nodelist("node[01-03,07],gpu[1-2]-ib,login") == [
        "node01", "node02", "node03", "node07", "gpu1-ib", "gpu2-ib", "login"]
    assert expand_nodelist("r[1-2]n[8-9]") == ["r1n8", "r1n9", "r2n8", "r2n9"]
    assert expand_nodelist("n[098-101]") == ["n098", "n099", "n100", "n101"]
    for bad in ("n[1-", "n[a-b]", "n[3-1]", "n]"):
        with pytest.raises(ValueError):
            expand_nodelist(bad)


def test_hostfile_and_slots(node):
    entries = parse_hostfile_text("# comment\nh0 slots=3 max_slots=8\nh1:2\nh2\nh0 slots=1\n")
    assert entries == [("h0", 4), ("h1", 2), ("h2", None)]
    with pytest.raises(ValueError, match="<hostfile>:1: slot count"):
        parse_hostfile_text("h0 slots=zero")
    c = compose_cluster([(h, node) for h in ("h0", "h1", "h2")])
    pes = host_slot_pes(c, [("h1", 2), ("h0", 9)])
    # one PU per core first (PU pairs are SMT siblings), cycling past 8 cores
    assert pes[:2] == [16, 18]
    assert pes[2:10] == [0, 2, 4, 6, 8, 10, 12, 14] and pes[10] == 1
    assert len(host_slot_pes(c, [("h2", None)])) == 16


def test_cluster_file(tmp_path, node):
    (tmp_path / "hosts").write_text("n01 slots=2\nn02:2\n")
    f = tmp_path / "machine.cluster"
    f.write_text(f"cluster\n# test\nxml {NODE}\nnodes n[01-03]\nnodes big xml={TOPO / 'coral-lassen.xml'}\n"
                 "network 2 distances 100:300\nlevel-distances core=2\n")
    t = load_topology(str(f))
    assert t.hosts() == ["n01", "n02", "n03", "big"] and t.n_pes == 3 * 16 + 160
    assert t.distance(0, 1) == 2.0 and t.distance(0, 16) == 100.0 and t.distance(0, 32) == 300.0
    f.write_text(f"cluster\nxml {NODE}\nhostfile hosts\n")
    t = load_topology(str(f))
    assert t.n_pes == 4 and t.hosts() == ["n01", "n02"]
    f.write_text("cluster\nnodes a[1-2]\n")
    with pytest.raises(ValueError, match=r"machine\.cluster:2: no node description for host 'a1'"):
        load_topology(str(f))
    f.write_text("cluster\nfrobnicate\n")
    with pytest.raises(ValueError, match=r"machine\.cluster:2: cannot read"):
        load_topology(str(f))


def run_cli(capsys, *argv):
    code = main(["topo", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_json(capsys):
    code, out, _ = run_cli(capsys, "--xml", str(NODE), "--json")
    info = json.loads(out)
    assert code == 0 and info["n_pes"] == 16 and info["uniform"]
    assert info["hierarchy"] == "2:2:4" and info["distances"] == "1:4:20"
    assert [lv["name"] for lv in info["levels"]] == ["machine", "package+L3", "L2+core"]
    assert info["levels"][0] == {"name": "machine", "arity": 4, "distance": 20, "count": 1}


def test_cli_cluster_and_text(capsys):
    code, out, _ = run_cli(capsys, "--xml", str(NODE), "--nodes", "n[1-8]", "--network", "4:2",
                           "--network-distances", "100:400", "--level-distances", "core=2")
    assert code == 0
    assert "128 PEs on 8 hosts" in out and "uniform hierarchy 2:2:4:4:2  distances 2:4:20:100:400" in out
    assert "2 x switch (64 PEs each, distance 100)" in out
    code, out, _ = run_cli(capsys, "--xml", str(TOPO / "Intel-ArrowLake-CoreUltra5-225U.xml"), "--json")
    levels = json.loads(out)["levels"]
    assert not json.loads(out)["uniform"] and any(isinstance(lv["arity"], list) for lv in levels)


def test_cli_hostfile_directory_and_live(capsys, tmp_path):
    hf = tmp_path / "hosts"
    hf.write_text("a slots=3\nb slots=1\n")
    code, out, _ = run_cli(capsys, "--xml", str(NODE), "--hostfile", str(hf), "--json")
    assert code == 0 and json.loads(out)["n_pes"] == 4
    code, out, _ = run_cli(capsys, "--xml", str(TOPO / "avakas"), "--json")
    assert code == 0 and json.loads(out)["hosts"] == ["node002", "node006"]
    code, out, _ = run_cli(capsys, "--live", "--no-lstopo", "--json")
    assert code == 0 and json.loads(out)["n_pes"] >= 1


def test_cli_errors(capsys, tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<topology><object type='Machine'>")
    code, _, err = run_cli(capsys, "--xml", str(bad))
    assert code == 2 and "bad.xml:1: malformed XML" in err
    code, _, err = run_cli(capsys, "--xml", str(NODE), "--network", "4:x")
    assert code == 2 and "network '4:x'" in err
