"""Live discovery: sysfs and lstopo agree on this machine; a fake sysfs tree
gives the expected shape; affinity maps onto leaves."""

import os
import shutil

import pytest

from rankmap.topology.hwloc import read_hwloc_xml
from rankmap.cpulist import parse_cpulist
from rankmap.topology.live import (affinity_pes, cgroup_cpus, discover_local,
                                   discover_local_xml, sysfs_topology)


def shape(t):
    return (t.n_pes, t.pe_os_index.tolist(), t.level_kinds(), t.level_arities(),
            t.node_distance.tolist(), t.hosts())


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def fake_sysfs(root, offline=()):
    """2 packages x 2 cores x 2 threads; cpu c: package c//4, core c//2;
    L2 per core, L3 and NUMA node per package."""
    cpu = root / "devices" / "system" / "cpu"
    online = [c for c in range(8) if c not in offline]
    write(cpu / "online", ",".join(map(str, online)))
    for c in range(8):
        pkg, core = c // 4, c // 2
        topo = cpu / f"cpu{c}" / "topology"
        write(topo / "package_cpus_list", f"{4 * pkg}-{4 * pkg + 3}")
        write(topo / "die_cpus_list", f"{4 * pkg}-{4 * pkg + 3}")
        write(topo / "core_cpus_list", f"{2 * core}-{2 * core + 1}")
        write(topo / "cluster_cpus_list", f"{2 * core}-{2 * core + 1}")
        for i, (level, typ, shared) in enumerate([(1, "Data", f"{2 * core}-{2 * core + 1}"),
                                                   (1, "Instruction", f"{2 * core}-{2 * core + 1}"),
                                                   (2, "Unified", f"{2 * core}-{2 * core + 1}"),
                                                   (3, "Unified", f"{4 * pkg}-{4 * pkg + 3}")]):
            idx = cpu / f"cpu{c}" / "cache" / f"index{i}"
            write(idx / "level", str(level))
            write(idx / "type", typ)
            write(idx / "shared_cpu_list", shared)
    for n in range(2):
        write(root / "devices" / "system" / "node" / f"node{n}" / "cpulist", f"{4 * n}-{4 * n + 3}")


def test_fake_sysfs_tree(tmp_path):
    fake_sysfs(tmp_path)
    t = sysfs_topology(str(tmp_path), hostname="fake")
    assert t.level_kinds() == ["machine", "package+numa+L3", "L2+core", "pu"]
    assert t.uniform_hierarchy() == ([2, 2, 2], [1.0, 4.0, 20.0])
    assert t.pe_os_index.tolist() == list(range(8)) and t.hosts() == ["fake"]


def test_fake_sysfs_offline_and_disallowed(tmp_path):
    fake_sysfs(tmp_path, offline=(3,))
    t = sysfs_topology(str(tmp_path), allowed={0, 1, 2, 3, 4, 5}, distances={"core": 2})
    assert sorted(t.pe_os_index.tolist()) == [0, 1, 2, 4, 5]
    assert t.distance(0, 1) == 2.0  # SMT siblings, overridden
    assert t.distance(0, 3) == 20.0  # other package


def test_fake_sysfs_matches_equivalent_hwloc_xml(tmp_path):
    fake_sysfs(tmp_path)
    pu = '<object type="PU" os_index="{}"/>'
    core = '<object type="L2Cache"><object type="Core">{}{}</object></object>'
    pkg = ('<object type="Package"><object type="NUMANode" os_index="{n}" cpuset="{cs}"/>'
           '<object type="L3Cache">{a}{b}</object></object>')
    cores = [core.format(pu.format(2 * k), pu.format(2 * k + 1)) for k in range(4)]
    xml = ('<topology version="2.0"><object type="Machine"><info name="HostName" value="fake"/>'
           + pkg.format(n=0, cs="0x0000000f", a=cores[0], b=cores[1])
           + pkg.format(n=1, cs="0x000000f0", a=cores[2], b=cores[3])
           + "</object></topology>")
    assert shape(read_hwloc_xml(xml)) == shape(sysfs_topology(str(tmp_path), hostname="fake"))


def test_live_sysfs_matches_lstopo():
    xml = discover_local_xml()
    if xml is None:
        pytest.skip("hwloc's lstopo is not installed (Debian/Ubuntu package: hwloc)")
    assert shape(sysfs_topology()) == shape(read_hwloc_xml(xml))


def test_discover_local_without_lstopo():
    t = discover_local(use_lstopo=False)
    assert t.n_pes == len(set(t.pe_os_index.tolist())) >= 1
    if shutil.which("lstopo-no-graphics") or shutil.which("lstopo"):
        assert shape(discover_local()) == shape(t)


def test_affinity_pes():
    t = discover_local(use_lstopo=False)
    mine = os.sched_getaffinity(0)
    pes = affinity_pes(t)
    assert sorted(t.pe_os_index[pes].tolist()) == sorted(c for c in mine if c in set(t.pe_os_index.tolist()))
    last = int(t.pe_os_index[-1])
    assert affinity_pes(t, [last]) == [t.n_pes - 1]
    assert affinity_pes(t, []) == []


def test_cgroup_cpus(tmp_path):
    write(tmp_path / "proc" / "self" / "cgroup", "0::/job/step")
    write(tmp_path / "cg" / "job" / "step" / "cpuset.cpus.effective", "2-3,6")
    assert cgroup_cpus(str(tmp_path / "proc"), str(tmp_path / "cg")) == {2, 3, 6}
    write(tmp_path / "p1" / "self" / "cgroup", "4:memory:/x\n3:cpuset:/slurm/uid")
    write(tmp_path / "cg1" / "cpuset" / "slurm" / "uid" / "cpuset.cpus", "0-1")
    assert cgroup_cpus(str(tmp_path / "p1"), str(tmp_path / "cg1")) == {0, 1}
    assert cgroup_cpus(str(tmp_path / "nothing")) is None


def test_parse_cpulist():
    assert parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpulist("") == set()
    with pytest.raises(ValueError, match="bad CPU list"):
        parse_cpulist("0-x")
