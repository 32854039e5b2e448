"""Real host names: Slurm hostlists, hostfiles of MPICH / Open MPI / Slurm,
Slurm's job environment, topology.conf switches, writing the machine back
(hwloc XML, cluster file), and `rankmap map --hosts ... --as all` with the
relaunch commands it prints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rankmap.cli import main
from rankmap.formats.relaunch import bind_command, relaunch_commands
from rankmap.topology import hierarchy_topology, load_topology
from rankmap.topology.cluster import cluster_of_hosts, compose_cluster
from rankmap.topology.export import hwloc_xml, write_topology
from rankmap.topology.hosts import (MAX_HOSTS, expand_nodelist, parse_hostfile,
                                    parse_hostfile_text, parse_tasks_per_node, slurm_job_slots)
from rankmap.topology.hwloc import read_hwloc_xml
from rankmap.topology.switches import parse_topology_conf, parse_topology_conf_text

DATA = Path(__file__).parent / "data"
SLURM = DATA / "slurm"
NODE = DATA / "topologies" / "16em64t-4s2c2t.v2-hwloc2.14.xml"
TRAFFIC = DATA / "traffic" / "lulesh64.size.csv"


def test_hostlist_expressions_as_slurm_writes_them():
    assert expand_nodelist("a[1-3,7],b[01-02]") == ["a1", "a2", "a3", "a7", "b01", "b02"]
    assert expand_nodelist("tux[0-3,12,18-20]") == [
        "tux0", "tux1", "tux2", "tux3", "tux12", "tux18", "tux19", "tux20"]
    assert expand_nodelist("linux[0-2],linux[5-6]") == ["linux0", "linux1", "linux2", "linux5", "linux6"]
    assert expand_nodelist("cn[01-04]") == ["cn01", "cn02", "cn03", "cn04"]
    assert expand_nodelist("rack[1-2]-n[1-2]") == ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]


def test_hostlist_size_is_bounded_before_expanding():
    with pytest.raises(ValueError, match=f"more than {MAX_HOSTS} hosts"):
        expand_nodelist("n[0-99999999999]")
    with pytest.raises(ValueError, match="more than 10 hosts"):
        expand_nodelist("a[1-6],b[1-6]", limit=10)
    with pytest.raises(ValueError, match="more than"):
        parse_tasks_per_node(f"1(x{MAX_HOSTS + 1})")
    with pytest.raises(ValueError, match="more than .* tasks"):
        parse_tasks_per_node("99999999999")
    with pytest.raises(ValueError, match="more than .* slots"):
        parse_hostfile_text("a slots=99999999999\n")


def test_hostfiles_of_three_launchers_mean_the_same_slots():
    want = [("cn01", 2), ("cn02", 2)]
    for name in ("openmpi.hosts", "mpich.hosts", "slurm.hosts"):
        assert parse_hostfile(SLURM / name) == want, name
    with pytest.raises(ValueError, match="missing.hosts: cannot read"):
        parse_hostfile(SLURM / "missing.hosts")


def test_slurm_environment():
    assert parse_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert parse_tasks_per_node("16") == [16]
    for bad in ("2(x0)", "x", "2(3)", "0"):
        with pytest.raises(ValueError, match="SLURM_TASKS_PER_NODE"):
            parse_tasks_per_node(bad)
    env = {"SLURM_JOB_NODELIST": "tux[0-3]", "SLURM_TASKS_PER_NODE": "2(x3),1"}
    assert slurm_job_slots(env) == [("tux0", 2), ("tux1", 2), ("tux2", 2), ("tux3", 1)]
    assert slurm_job_slots({"SLURM_NODELIST": "a[1-2]"}) == [("a1", None), ("a2", None)]
    assert slurm_job_slots({}) is None
    with pytest.raises(ValueError, match="gives 2 nodes, the nodelist 4"):
        slurm_job_slots({"SLURM_JOB_NODELIST": "tux[0-3]", "SLURM_TASKS_PER_NODE": "2(x2)"})


def test_topology_conf_switches_become_network_levels():
    switches = parse_topology_conf(SLURM / "topology.conf")
    assert sorted(switches) == ["s0", "s1", "s2", "s3"] and switches["s3"].switches == ["s0", "s1", "s2"]
    node = hierarchy_topology([2], [1.0], host_prefix=None)
    hosts = ["dev0", "dev1", "dev6", "dev12", "dev13"]
    t = compose_cluster([(h, node) for h in hosts], switches=switches)
    assert t.hosts() == hosts
    pe = {h: int(np.flatnonzero(t.pe_host == h)[0]) for h in hosts}
    assert t.distance(pe["dev0"], pe["dev1"]) == 100.0      # same leaf switch
    assert t.distance(pe["dev0"], pe["dev6"]) == 400.0      # through s3
    assert t.distance(pe["dev0"], pe["dev0"] + 1) == 1.0    # within the node
    # dev6 is the only job host under s1: it meets dev0 and dev12 at s3
    with pytest.raises(ValueError, match="host 'cn01' is under no switch"):
        compose_cluster([("cn01", node)], switches=switches)


def test_topology_conf_fabrics_and_errors():
    sw = parse_topology_conf(SLURM / "fabrics.conf")
    node = hierarchy_topology([1], [0.0], host_prefix=None)
    t = compose_cluster([(h, node) for h in ["tux0", "tux4", "tux12", "gpu01"]], switches=sw)
    assert t.hosts() == ["tux0", "tux12", "tux4", "gpu01"]  # PEs in switch order
    # leaf1 and leaf2 meet at the spine (400), the gpu fabric joins above it
    assert t.distance(0, 1) == 100.0 and t.distance(0, 2) == 400.0 and t.distance(0, 3) == 1600.0
    for text, msg in [("SwitchName=s0\n", "neither Nodes= nor Switches="),
                      ("SwitchName=s0 Nodes=a[1-\n", ":1: nodelist"),
                      ("SwitchName=s0 Switches=s9\n", "unknown switch 's9'"),
                      ("NodeName=a1\n", "not a tree- or block-plugin line"),
                      ("SwitchName=s0 Nodes=a1\nSwitchName=s0 Nodes=a2\n", ":2: switch 's0' defined twice"),
                      ("SwitchName=a Switches=b\nSwitchName=b Switches=a\n", None)]:
        if msg is None:
            parsed = parse_topology_conf_text(text)
            with pytest.raises(ValueError, match="under no switch|cycle"):
                compose_cluster([("x", node)], switches=parsed)
            continue
        with pytest.raises(ValueError, match=msg):
            parse_topology_conf_text(text)


def test_cluster_file_with_hierarchy_nodes_and_switches(tmp_path):
    (tmp_path / "topology.conf").write_text((SLURM / "topology.conf").read_text())
    f = tmp_path / "site.cluster"
    f.write_text("cluster\nhierarchy 4:2 distances 1:10\nnodes dev[0-1]\n"
                 "nodes dev[6-7] hierarchy=2 distances=1\nswitches topology.conf\n")
    t = load_topology(str(f))
    assert t.hosts() == ["dev0", "dev1", "dev6", "dev7"] and t.n_pes == 8 + 8 + 2 + 2
    assert t.distance(0, 4) == 10.0 and t.distance(0, 8) == 100.0 and t.distance(0, 16) == 400.0
    f.write_text("cluster\nnodes a1 hierarchy=2 xml=x.xml\n")
    with pytest.raises(ValueError, match="site.cluster:2: give xml= or hierarchy="):
        load_topology(str(f))
    f.write_text("cluster\nhierarchy 2\nnodes a[1-2]\nnetwork 2\nswitches topology.conf\n")
    with pytest.raises(ValueError, match="'network' or 'switches'"):
        load_topology(str(f))


def test_export_round_trips(tmp_path):
    node = read_hwloc_xml(NODE)
    back = read_hwloc_xml(hwloc_xml(node))
    assert back.node_kind == node.node_kind and back.hosts() == node.hosts()
    assert back.pe_os_index.tolist() == node.pe_os_index.tolist()
    assert back.node_distance.tolist() == node.node_distance.tolist()
    cluster = cluster_of_hosts(node, [("cn01", None), ("cn02", None), ("cn03", 4), ("cn04", None)],
                               (2,), (100, 400))
    files = write_topology(cluster, tmp_path / "site.cluster")
    assert [p.name for p in files] == ["site.cluster", "site.cn01.xml", "site.cn03.xml"]  # cn03: 4 slots
    again = load_topology(str(tmp_path / "site.cluster"))
    assert again.hosts() == cluster.hosts() and again.n_pes == cluster.n_pes == 3 * 16 + 4
    pes = np.arange(cluster.n_pes)
    for p in pes:  # every pair at the same distance
        assert [again.distance(p, q) for q in pes] == [cluster.distance(p, q) for q in pes]
    assert again.pe_os_index.tolist() == cluster.pe_os_index.tolist()
    assert main(["topo", "--xml", str(NODE), "--export", str(tmp_path / "n.xml")]) == 0
    assert read_hwloc_xml(tmp_path / "n.xml").node_kind == node.node_kind


BIND = bind_command()  # rankmap-bind as this installation's relaunch lines start it


def test_relaunch_recipes():
    assert relaunch_commands("hydra", "out/machinefile", 8, "python app.py") == [
        "mpiexec -f out/machinefile -n 8 python app.py    # MPICH (hydra)"]
    assert relaunch_commands("hydra", "out/machinefile", 8, "python app.py", "out/bindings") == [
        f"mpiexec -f out/machinefile -n 8 {BIND} out/bindings -- python app.py    # MPICH (hydra)"]
    v4, v5 = relaunch_commands("openmpi", "rf", 8)
    assert v4.startswith("mpirun -n 8 --rankfile rf PROGRAM")
    assert v5.startswith("mpirun -n 8 --map-by rankfile:file=rf --bind-to core PROGRAM")
    v4, v5 = relaunch_commands("openmpi", "rf", 8, bindings="b")
    assert v4.startswith(f"mpirun -n 8 --rankfile rf --bind-to none {BIND} b -- PROGRAM")
    assert v5.startswith(f"mpirun -n 8 --map-by rankfile:file=rf --bind-to none {BIND} b -- PROGRAM")
    assert relaunch_commands("slurm", "h", 2)[0].startswith(
        "SLURM_HOSTFILE=h srun -n 2 --distribution=arbitrary PROGRAM")
    assert relaunch_commands("slurm", "h", 2, bindings="b")[0].startswith(
        f"SLURM_HOSTFILE=h srun -n 2 --distribution=arbitrary --cpu-bind=none {BIND} b -- PROGRAM")
    cray = relaunch_commands("mpich", "d/MPICH_RANK_ORDER", 2, bindings="d/bindings")
    assert cray[0].startswith("cp d/MPICH_RANK_ORDER MPICH_RANK_ORDER")
    assert cray[1].startswith(f"MPICH_RANK_REORDER_METHOD=3 srun -n 2 --cpu-bind=none {BIND} "
                              "d/bindings -- PROGRAM")
    assert len(relaunch_commands("mpich", "MPICH_RANK_ORDER", 2)) == 1
    assert relaunch_commands("perm", "m.txt", 2) == []
    assert relaunch_commands("bind", "bindings", 2) == []


def test_map_with_hosts_writes_all_formats(tmp_path, capsys):
    out = tmp_path / "launch"
    assert main(["map", str(TRAFFIC), "--hosts", "cn[01-04]", "--hierarchy", "8:2",
                 "--distances", "1:10", "--method", "greedy", "--as", "all", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == [
        "MPICH_RANK_ORDER", "bindings", "machinefile", "machinefile.rankmap", "mapping.txt", "rankfile",
        "slurm.hostfile"]
    hosts = (out / "slurm.hostfile").read_text().split()
    assert len(hosts) == 64 and sorted(set(hosts)) == ["cn01", "cn02", "cn03", "cn04"]
    assert all(hosts.count(h) == 16 for h in set(hosts))
    # the hosts' ranks interleave: each host once in the machinefile, -rankmap places the ranks
    lines = (out / "machinefile").read_text().splitlines()
    assert lines[0].startswith("#") and sorted(lines[1:]) == [f"cn0{k}:16" for k in range(1, 5)]
    assert (f"mpiexec -f {out / 'machinefile'} -rankmap \"$(cat {out / 'machinefile.rankmap'})\" -n 64 "
            f"{BIND} {out / 'bindings'} -- PROGRAM") in text
    ranks = [line.split()[1] for line in (out / "rankfile").read_text().splitlines()]
    assert ranks == [f"{r}=cn0{1 + hosts_index}" for r, hosts_index in
                     enumerate(["cn01", "cn02", "cn03", "cn04"].index(h) for h in hosts)]


def test_map_json_names_the_files_and_commands(tmp_path, capsys):
    import json

    out = tmp_path / "order.hydra"
    assert main(["map", str(TRAFFIC), "--hosts", "cn[01-04]", "--hierarchy", "16", "--method",
                 "greedy", "-o", str(out), "--as", "hydra", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["launch_files"] == {"hydra": str(out), "hydra_rankmap": f"{out}.rankmap",
                                      "bind": f"{out}.bindings"}
    assert report["relaunch"] == [f'mpiexec -f {out} -rankmap "$(cat {out}.rankmap)" -n 64 {BIND} '
                                  f"{out}.bindings -- PROGRAM    # MPICH (hydra)"]
    assert report["hydra_note"] is None and report["hydra_swaps"] == 0


def test_map_with_hostfile_and_slurm_environment(tmp_path, capsys, monkeypatch):
    out = tmp_path / "order.hydra"
    assert main(["map", str(TRAFFIC), "--hostfile", str(SLURM / "mpich.hosts"), "--hierarchy", "16",
                 "--method", "greedy", "-o", str(out), "--as", "hydra"]) == 2
    assert "64 ranks but the machine has 4 slots on 2 host(s)" in capsys.readouterr().err
    assert main(["map", str(TRAFFIC), "--hostfile", str(SLURM / "mpich.hosts"), "--hierarchy", "16",
                 "--method", "greedy", "-o", str(out), "--as", "hydra", "--eps", "0.03"]) == 0
    assert "64 tasks" in capsys.readouterr().out  # 4 slots: many tasks per slot, as asked
    lines = [line for line in out.read_text().splitlines() if not line.startswith("#")]
    assert {line.split(":")[0] for line in lines} == {"cn01", "cn02"}
    monkeypatch.setenv("SLURM_JOB_NODELIST", "tux[0-3]")
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "16(x4)")
    assert main(["map", str(TRAFFIC), "--method", "greedy", "-o", str(out), "--as", "slurm"]) == 0
    captured = capsys.readouterr()
    assert "machine from the Slurm allocation: 4 hosts" in captured.err
    hosts = out.read_text().split()
    assert len(hosts) == 64 and sorted(set(hosts)) == ["tux0", "tux1", "tux2", "tux3"]
    assert main(["map", str(TRAFFIC), "--switches", str(SLURM / "topology.conf"),
                 "--hosts", "dev[0-3]", "--hierarchy", "16", "--method", "greedy"]) == 0
    assert "64 PEs on 4 host(s)" in capsys.readouterr().out


def test_bad_host_options_are_one_line(capsys):
    assert main(["map", str(TRAFFIC), "--hosts", "n[0-99999999999]", "--hierarchy", "4"]) == 2
    err = capsys.readouterr().err
    assert "names more than" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["map", str(TRAFFIC), "--hosts", "a1", "--hostfile", "x", "--hierarchy", "4"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["map", str(TRAFFIC), "--hosts", "a[1-2]", "--mesh", "4x4"]) == 2
    assert "not --mesh" in capsys.readouterr().err


def test_profiler_records_the_sysfs_tree_without_lstopo(monkeypatch):
    from rankmap.profile import session
    from rankmap.topology import live

    monkeypatch.setattr(live, "discover_local_xml", lambda timeout=60.0: None)
    xml = session.host_topology_xml()
    assert xml is not None and xml.lstrip().startswith("<?xml")
    recorded, found = read_hwloc_xml(xml), live.sysfs_topology()
    assert recorded.pe_os_index.tolist() == found.pe_os_index.tolist()
    assert recorded.hosts() == found.hosts() and recorded.node_kind == found.node_kind


def test_openmpi_rankfile_slots_are_logical_cores():
    from rankmap.formats.launch import format_openmpi_rankfile
    from rankmap.topology.tree import core_slots

    smt = read_hwloc_xml(NODE)   # 4 packages x 2 cores x 2 hardware threads
    assert core_slots(smt).tolist() == [k // 2 for k in range(16)]
    text = format_openmpi_rankfile(np.array([1, 0, 15]), smt)
    assert text.splitlines() == [f"rank 0={smt.hosts()[0]} slot=0", f"rank 1={smt.hosts()[0]} slot=0",
                                 f"rank 2={smt.hosts()[0]} slot=7"]
    two = cluster_of_hosts(hierarchy_topology([2, 2], [1.0, 10.0], host_prefix=None),
                           [("cn01", None), ("cn02", None)])
    assert core_slots(two).tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    three = cluster_of_hosts(smt, [("cn01", None), ("cn02", None), ("cn03", None)])  # SMT cores on every host
    assert core_slots(three).tolist() == [k // 2 for k in range(16)] * 3
    assert three.slot_in_host().tolist() == list(range(16)) * 3
    assert three.host_ids().tolist() == [h for h in range(3) for _ in range(16)]
