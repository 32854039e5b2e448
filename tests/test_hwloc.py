"""hwloc XML reader: every copied real machine loads, formats agree, cpusets
are honoured, distances follow the documented model, bad files fail clearly."""

import pickle
from pathlib import Path

import numpy as np
import pytest

from rankmap.topology import load_topology
from rankmap.topology.hwloc import parse_bitmap, read_hwloc_xml

TOPO = Path(__file__).parent / "data" / "topologies"
ALL_XML = sorted(TOPO.rglob("*.xml"))


def signature(t):
    p, q = np.triu_indices(t.n_pes, 1)
    return (t.n_pes, t.pe_os_index.tolist(), t.level_kinds(), t.level_arities(),
            t.distance(p, q).tolist())


@pytest.mark.parametrize("path", ALL_XML, ids=lambda p: p.name)
def test_every_copied_xml_loads(path):
    t = read_hwloc_xml(path)
    assert t.n_pes >= 1
    assert (t.pe_os_index >= 0).all()
    for host in t.hosts():  # OS indexes are unique within a host
        idx = t.pe_os_index[t.pe_host == host]
        assert len(set(idx.tolist())) == len(idx)
    inner = np.flatnonzero(t.child_ptr[1:] > t.child_ptr[:-1])
    for n in inner.tolist():  # distances never grow going down
        kids = t.children(n)
        assert (t.node_distance[kids] <= t.node_distance[n]).all()
    assert signature(pickle.loads(pickle.dumps(t))) == signature(t)


def test_v1_v2_v3_exports_of_one_machine_give_one_tree():
    sigs = [signature(read_hwloc_xml(TOPO / f"16em64t-4s2c2t.{v}.xml"))
            for v in ("v1-hwloc1.11", "v2-hwloc2.14", "v3-master")]
    assert sigs[0] == sigs[1] == sigs[2]
    t = read_hwloc_xml(TOPO / "16em64t-4s2c2t.v2-hwloc2.14.xml")
    assert t.uniform_hierarchy() == ([2, 2, 4], [1.0, 4.0, 20.0])
    assert t.level_kinds() == ["machine", "package+L3", "L2+core", "pu"]


@pytest.mark.parametrize("stem,variants", [
    ("16amd64-4distances", ["", ".v1", ".v1tov2", ".v2tov1"]),
    ("28intel64-2p2g7c-CoDgroups", [".v1", ".v1tov2"]),
])
def test_converted_pairs_agree(stem, variants):
    sigs = [signature(read_hwloc_xml(TOPO / f"{stem}{v}.xml")) for v in variants]
    assert all(s == sigs[0] for s in sigs)


def test_disallowed_pus_are_not_pes():
    # 64 PUs, allowed_cpuset 0x0000ffff
    t = read_hwloc_xml(TOPO / "irregulargroups-disallowed.xml")
    assert sorted(t.pe_os_index.tolist()) == list(range(16))
    assert t.hosts() == ["condor"]


def test_offline_pus_are_not_pes():
    # v1: cpuset/online 0x905b, allowed 0x915b -> PUs 0,1,3,4,6,12,15
    t = read_hwloc_xml(TOPO / "16em64t-4s2c2t-offlines.v1.xml")
    assert sorted(t.pe_os_index.tolist()) == [0, 1, 3, 4, 6, 12, 15]
    assert t.uniform_hierarchy() is None


def test_smt_and_allowed_cores_of_a_power9_node():
    t = read_hwloc_xml(TOPO / "coral-lassen.xml")
    assert t.n_pes == 160  # 2 x 22 cores x SMT4, 4 cores per socket reserved
    assert sorted(t.pe_os_index.tolist()) == list(range(8, 88)) + list(range(96, 176))
    assert t.uniform_hierarchy() == ([4, 2, 10, 2], [1.0, 2.0, 8.0, 20.0])
    assert t.hosts() == ["lassen28"]


def test_hybrid_cores_give_an_irregular_tree():
    t = read_hwloc_xml(TOPO / "Intel-ArrowLake-CoreUltra5-225U.xml")
    assert t.n_pes == 14 and t.uniform_hierarchy() is None
    kinds = [t.node_kind[t.parent[leaf]] for leaf in t.leaf_of_pe.tolist()]
    assert "core" in kinds  # SMT siblings of a P-core share a core node ...
    smt = [p for p in range(t.n_pes) if kinds[p] == "core"]
    assert t.distance(smt[0], smt[1]) == 1.0  # ... at the smallest distance
    assert t.distance(0, t.n_pes - 1) == 10.0  # L2 cluster outside the L3: package


def test_zen4_uniform_hierarchy():
    t = read_hwloc_xml(TOPO / "AMD-19h-Zen4-2xEpyc-9654.xml")
    assert t.uniform_hierarchy() == ([2, 8, 12, 2], [1.0, 4.0, 10.0, 20.0])


def test_system_root_with_several_machines():
    t = read_hwloc_xml(TOPO / "8em64t-2mi2ma2c.xml")
    assert t.n_pes == 8 and len(t.hosts()) == 4
    assert t.level_kinds()[0] == "system"
    # PUs of different machines are further apart than any two in one machine
    assert t.distance(0, 2) > t.distance(0, 1) > 0


def test_distance_overrides_by_kind_and_label():
    t = read_hwloc_xml(TOPO / "coral-lassen.xml", distances={"Core": 3, "socket": 50})
    assert t.uniform_hierarchy()[1] == [3.0, 3.0, 50.0, 50.0]  # monotone: L3+L2 >= core
    t = read_hwloc_xml(TOPO / "coral-lassen.xml", distances="L3+L2=5,machine=100")
    assert t.uniform_hierarchy()[1] == [1.0, 5.0, 8.0, 100.0]
    with pytest.raises(ValueError, match="not a number"):
        read_hwloc_xml(TOPO / "coral-lassen.xml", distances={"core": "x"})
    with pytest.raises(ValueError, match="KIND=VALUE"):
        read_hwloc_xml(TOPO / "coral-lassen.xml", distances="core")


def test_topology_diff_applies_host_name():
    base = read_hwloc_xml(TOPO / "avakas" / "node002.xml")
    diffed = read_hwloc_xml(TOPO / "avakas" / "node006.diff.xml")
    assert base.hosts() == ["node002"] and diffed.hosts() == ["node006"]
    assert signature(base) == signature(diffed)
    with pytest.raises(ValueError, match="reference XML"):
        read_hwloc_xml((TOPO / "avakas" / "node006.diff.xml").read_bytes())


def test_xml_text_and_load_topology():
    path = TOPO / "16em64t-4s2c2t.v3-master.xml"
    assert signature(read_hwloc_xml(path.read_text())) == signature(read_hwloc_xml(path))
    assert signature(load_topology(str(path))) == signature(read_hwloc_xml(path))
    # no HostName in this export: named after the file, or localhost for bare XML
    assert read_hwloc_xml(path).hosts() == ["16em64t-4s2c2t"]
    assert read_hwloc_xml(path.read_bytes()).hosts() == ["localhost"]


def test_truncated_xml_names_the_line(tmp_path):
    text = (TOPO / "16em64t-4s2c2t.v2-hwloc2.14.xml").read_text()
    bad = tmp_path / "cut.xml"
    bad.write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match=r"cut\.xml:\d+: malformed XML"):
        read_hwloc_xml(bad)


def test_bad_documents(tmp_path):
    with pytest.raises(ValueError, match="not an hwloc XML"):
        read_hwloc_xml("<graph/>")
    with pytest.raises(ValueError, match=":3: PU without a valid os_index"):
        read_hwloc_xml('<topology>\n<object type="Machine">\n<object type="PU"/>\n'
                       "</object></topology>")
    with pytest.raises(ValueError, match="no allowed and online PU"):
        read_hwloc_xml('<topology><object type="Machine" allowed_cpuset="0x0">'
                       '<object type="PU" os_index="0"/></object></topology>')


def test_unknown_types_and_attributes_are_tolerated():
    t = read_hwloc_xml(
        '<topology version="9.9"><object type="Machine" shiny="yes">'
        '<object type="Cluster" weird="1"><object type="PU" os_index="0"/>'
        '<object type="PU" os_index="1"/></object>'
        '<object type="Cluster"><object type="PU" os_index="2"/><object type="PU" os_index="3"/>'
        '</object><newthing/></object></topology>')
    assert t.level_kinds() == ["machine", "cluster", "pu"]
    assert t.distance(0, 1) < t.distance(0, 2)


def test_parse_bitmap():
    assert parse_bitmap("0x00000003") == 3
    assert parse_bitmap("0x00000001,,0x00000002") == (1 << 64) | 2
    inf = parse_bitmap("0xf...f,0x00000003")
    assert inf < 0 and (inf >> 1000) & 1 and (inf & 0xFFFFFFFF) == 3
