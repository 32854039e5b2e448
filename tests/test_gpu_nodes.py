"""GPU nodes: one PE per GPU, the links inside a node as a matrix (true
distances, O(1) per pair), a tree approximating it for the constructions,
each node's PEs settled on the true distances, and bindings that give each
rank its GPU and the cores near it."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.gpu_nodes import WORKLOADS, cluster, tree_approximations
from rankmap import map_tasks
from rankmap.bind import read_bindings
from rankmap.cli import main
from rankmap.cost import evaluate, mapping_cost
from rankmap.formats import write_launch_file
from rankmap.formats.relaunch import bind_command
from rankmap.graph import CommGraph
from rankmap.topology.cluster import compose_cluster, restrict_to_slots
from rankmap.topology.gpu_nodes import GPU_NODES, load_gpu_node, read_gpu_node_file
from rankmap.topology.hwloc_gpus import read_hwloc_gpus
from rankmap.topology.links import gpu_distances
from rankmap.topology.tree import NodeLinks, Topology, TreeNode

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "topologies"


def _matrix(t: Topology, pes=None) -> np.ndarray:
    pes = np.arange(t.n_pes) if pes is None else np.asarray(pes)
    return t.distance(np.repeat(pes, len(pes)), np.tile(pes, len(pes))).reshape(len(pes), len(pes))


def _by_device(t: Topology, host=None) -> dict[str, int]:
    return {d: p for p, d in enumerate(t.pe_device) if host is None or t.pe_host[p] == host}


def test_node_links_are_checked():
    with pytest.raises(ValueError, match="symmetric with a zero diagonal"):
        NodeLinks(np.array([[0, 1], [2, 0.]]), np.zeros(2))
    with pytest.raises(ValueError, match="one egress per row"):
        NodeLinks(np.zeros((2, 2)), np.zeros(3))
    with pytest.raises(ValueError, match="finite and >= 0"):
        NodeLinks(np.array([[0, -1], [-1, 0.]]), np.zeros(2))
    leaves = [TreeNode("gpu", link_row=0), TreeNode("gpu")]
    with pytest.raises(ValueError, match="needs its row"):
        Topology(TreeNode("machine", 1.0, leaves, links=NodeLinks(np.zeros((2, 2)), np.zeros(2))))


def test_distance_reads_the_matrix_inside_a_node_and_adds_egress_across():
    m = np.array([[0, 1, 5], [1, 0, 2], [5, 2, 0.]])

    def node(host):
        return TreeNode("machine", 20.0, [TreeNode("gpu", link_row=i, device=f"rocr:{i}") for i in range(3)],
                        name=host, links=NodeLinks(m, np.array([0, 1, 0.])))

    t = Topology(TreeNode("switch", 100.0, [node("a"), node("b")]))
    assert t.has_links and np.array_equal(_matrix(t, [0, 1, 2]), m)
    assert t.distance(1, 4) == 100 + 1 + 1 and t.distance(0, 3) == 100   # egress of both ends
    assert t.tree_only().distance(0, 2) == 20 and not t.tree_only().has_links
    # restricting to slots keeps the rows of the PEs kept, compose keeps the links
    r = restrict_to_slots(t, [0, 2, 5])
    assert r.has_links and r.distance(0, 1) == 5 and r.distance(0, 2) == 100
    c = compose_cluster([("x", Topology(node("a"))), ("y", Topology(node("a")))])
    assert c.hosts() == ["x", "y"] and c.distance(0, 2) == 5 and c.distance(1, 4) == 100 + 1 + 1


def test_link_bandwidths_become_distances():
    # Frontier's Infinity Fabric: 200 GB/s inside an MI250X, 100 or 50 between
    d = GPU_NODES["frontier"].node()
    gcd = _by_device(d)
    m = _matrix(d)
    assert m[gcd["rocr:0"], gcd["rocr:1"]] == 2.5        # 4 links
    assert m[gcd["rocr:0"], gcd["rocr:6"]] == 5.0        # 2 links
    assert m[gcd["rocr:0"], gcd["rocr:2"]] == 10.0       # 1 link
    assert m[gcd["rocr:0"], gcd["rocr:3"]] == 12.5       # no link: 0-1-3 or 0-2-3, two hops
    # an NVSwitch node: the flow through the switches, the same for every pair
    u = _matrix(GPU_NODES["dgx-h100"].node())
    assert np.allclose(u[~np.eye(8, dtype=bool)], 20 * 25 / 450)
    # no path at all: through the host
    assert np.array_equal(gpu_distances(np.zeros((2, 2))), [[0, 20], [20, 0]])


def test_frontier_binds_each_gcd_to_its_l3_and_marks_the_nics():
    node = GPU_NODES["frontier"].node("frontier00001")
    gcd = _by_device(node)
    assert node.pe_cpus[gcd["rocr:4"]] == tuple(range(0, 8)) + tuple(range(64, 72))
    assert node.pe_cpus[gcd["rocr:0"]] == tuple(range(48, 56)) + tuple(range(112, 120))
    egress = node.node_links[0].egress
    assert [egress[r] for r in range(8)] == [2.5, 0, 2.5, 0, 2.5, 0, 2.5, 0]


def test_hwloc_gpus_of_real_nodes():
    tioga = read_hwloc_gpus(DATA / "eas-tioga.xml")   # MI250X, XGMIBandwidth 100 GB/s between all GCDs
    assert tioga.hosts() == ["tioga29"] and tioga.n_pes == 8
    gcd = _by_device(tioga)
    assert sorted(gcd) == [f"rocr:{i}" for i in range(8)]
    assert tioga.pe_cpus[gcd["rocr:4"]] == tuple(range(0, 8)) + tuple(range(64, 72))
    assert np.allclose(_matrix(tioga)[~np.eye(8, dtype=bool)], 20 * 25 / 100)
    assert tioga.node_links[0].egress[tioga.pe_link_row[gcd["rocr:5"]]] == 0   # a Slingshot NIC there

    dgx2 = read_hwloc_gpus(DATA / "nvidiaDGX2.v2.xml")   # GPUs and NVSwitches (hetero matrix)
    m = _matrix(dgx2)
    board = [p for p in range(16) if int(dgx2.pe_device[p].split(":")[1]) < 8]
    other = [p for p in range(16) if p not in board]
    assert np.allclose(m[np.ix_(board, board)][~np.eye(8, dtype=bool)], 20 * 25 / 150)  # 6 x 25 GB/s
    assert np.all(m[np.ix_(board, other)] >= 20)   # the export has no trunks between the boards

    p8 = read_hwloc_gpus(DATA / "power8gpudistances.v3.xml")   # NVLink GPU pairs, GPU-CPU links
    gpu = _by_device(p8)
    assert p8.distance(gpu["nvml:0"], gpu["nvml:1"]) == 12.5        # 40 GB/s
    assert p8.distance(gpu["nvml:0"], gpu["nvml:2"]) == 30          # host path across the sockets

    with pytest.raises(ValueError, match="no GPU in this topology"):
        read_hwloc_gpus(DATA / "16em64t-4s2c2t.v2-hwloc2.14.xml")


def test_gpu_node_file(tmp_path):
    f = tmp_path / "node.txt"
    f.write_text("gpu-node\ngpu rocr:0 cpus=0-3 nic\ngpu rocr:1 cpus=4-7\ngpu rocr:2\n"
                 "bandwidth\n0 200 0\n200 0 50\n0 50 0\n")
    t = read_gpu_node_file(f)
    gpu = _by_device(t)
    assert t.distance(gpu["rocr:0"], gpu["rocr:1"]) == 2.5 and t.distance(gpu["rocr:1"], gpu["rocr:2"]) == 10
    assert t.distance(gpu["rocr:0"], gpu["rocr:2"]) == 12.5 and t.pe_cpus[gpu["rocr:2"]] is None
    assert t.node_links[0].egress.tolist() == [0, 2.5, 12.5]
    assert load_gpu_node(str(f)).n_pes == 3 and load_gpu_node("LUMI-G").n_pes == 8
    for text, message in [("gpu rocr:0\n", "starts with the line 'gpu-node'"),
                          ("gpu-node\ngpu rocr:0\nbandwidth\n0 1\n", "1 rows of 1 numbers"),
                          ("gpu-node\ngpu cuda:x\n", "not KIND:INDEX"),
                          ("gpu-node\ngpu rocr:0 cpus=3-1\n", "bad CPU list"),
                          ("gpu-node\ngpu rocr:0\nlinks\n", "expected 'gpu DEVICE"),
                          ("gpu-node\ngpu - \ndistance\nx\n", "expected numbers")]:
        f.write_text(text)
        with pytest.raises(ValueError, match=message):
            read_gpu_node_file(f)
    with pytest.raises(ValueError, match="neither a built-in node type"):
        load_gpu_node("no-such-node")


def test_placement_inside_nodes_is_the_exhaustive_optimum():
    """Each node's PEs settled on the true distances: on one node of 6 GPUs
    the result is the best of all 720 placements of the given tasks."""
    rng = np.random.default_rng(3)
    m = rng.uniform(1, 20, (6, 6))
    m = np.triu(m, 1) + np.triu(m, 1).T
    node = Topology(TreeNode("machine", 20.0, [TreeNode("gpu", link_row=i) for i in range(6)],
                             links=NodeLinks(m, np.zeros(6))))
    b = rng.uniform(0, 1, (6, 6)) * (rng.uniform(size=(6, 6)) < 0.6)
    np.fill_diagonal(b, 0)
    g = CommGraph.from_dense(b)
    best = min(mapping_cost(g, node, np.asarray(p)) for p in itertools.permutations(range(6)))
    for method in ("identity", "greedy", "auto"):
        assert mapping_cost(g, node, map_tasks(g, node, method=method).pe_of_task) == pytest.approx(best)


@pytest.mark.parametrize("node_type", ["frontier", "dgx-h100"])
def test_gpu_workloads_beat_the_launcher_and_every_tree_approximation(node_type):
    """16 nodes: J (true distances) of rankmap below the launcher's block
    placement and never above mapping with the best tree approximation of
    the node, strictly below it where the links are not a tree (Frontier);
    on a uniform NVSwitch node the tree is exact and the two agree."""
    topo = cluster(node_type)
    approximations = tree_approximations(topo)
    for name, make in WORKLOADS.items():
        g = make()
        j = mapping_cost(g, topo, map_tasks(g, topo, method="auto").pe_of_task)
        tree = min(mapping_cost(g, topo, to_true[map_tasks(g, approx, method="auto").pe_of_task])
                   for approx, to_true in approximations.values())
        assert j < 0.6 * mapping_cost(g, topo, np.arange(g.n)), name
        if node_type == "frontier":
            assert j < tree, name
        else:
            assert j == pytest.approx(tree), name


def test_report_counts_the_bytes_inside_gpu_nodes_as_one_level():
    topo = cluster("frontier", nodes=2)
    g = WORKLOADS["ring"](tp=8, groups=2, tensor=1, data=1)
    report = evaluate(g, topo, map_tasks(g, topo, method="greedy").pe_of_task)
    names = [lv["level"] for lv in report.bytes_per_level]
    assert "machine links" in names and all(lv["distance"] is None for lv in report.bytes_per_level
                                            if lv["level"] == "machine links")
    assert report.J == pytest.approx(mapping_cost(g, topo, map_tasks(g, topo, method="greedy").pe_of_task))


def test_map_on_gpu_nodes_writes_bindings_with_each_rank_gcd(tmp_path, capsys):
    edges = tmp_path / "ring.edges"
    g = WORKLOADS["ring"](tp=8, groups=2, tensor=64, data=4)
    src, dst, w = g.coo()
    edges.write_text("".join(f"{s} {d} {x:.0f}\n" for s, d, x in zip(src, dst, w)))
    out = tmp_path / "launch"
    assert main(["map", str(edges), "--gpu-node", "frontier", "--hosts", "frontier[00001-00002]",
                 "--as", "all", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{bind_command()} {out / 'bindings'} --" in printed
    placed = read_bindings(out)
    node = GPU_NODES["frontier"].node()
    cpus_of = {node.pe_device[p]: ",".join(map(str, node.pe_cpus[p])) for p in range(8)}
    assert all(b.device.startswith("rocr:") for b in placed)
    assert {b.host for b in placed} == {"frontier00001", "frontier00002"}
    for b in placed:   # each rank's CPUs are the cores of its GCD's L3
        assert b.cpus == _cpulist(cpus_of[b.device])
    # every tensor-parallel ring inside one node
    assert all(len({placed[r].host for r in range(t, 16, 2)}) == 1 for t in range(2))
    # the wrapper, as srun would start each rank: its GCD only, no GPU needed (--dry-run)
    for b in placed:
        proc = subprocess.run([*bind_command().split(), "--dry-run", "--ignore-host", str(out), "--",
                               "app"], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "SLURM_PROCID": str(b.rank)})
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["rank", str(b.rank), "host", b.host, "cpus", b.cpus,
                                       f"ROCR_VISIBLE_DEVICES={b.device.split(':')[1]}"]


def _cpulist(text: str) -> str:
    from rankmap.cpulist import format_cpulist

    return format_cpulist(int(c) for c in text.split(","))


def test_wrapper_gives_each_rank_its_gpu_and_cores_for_real(tmp_path):
    """A two-GPU node on this machine's CPUs: the mapping swaps the ranks'
    GPUs, the wrapper binds for real and sets ROCR_VISIBLE_DEVICES."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    import socket

    f = tmp_path / "node.txt"
    f.write_text(f"gpu-node\ngpu rocr:0 cpus={cpus[0]}\ngpu rocr:1 cpus={cpus[1]}\nbandwidth\n0 100\n100 0\n")
    node = read_gpu_node_file(f)
    node = compose_cluster([(socket.gethostname(), node)])
    gpu = _by_device(node)
    swapped = np.array([gpu["rocr:1"], gpu["rocr:0"]])
    write_launch_file(swapped, node, str(tmp_path / "bindings"), "bind")
    report = ("import json, os; print(json.dumps([sorted(os.sched_getaffinity(0)), "
              "os.environ['ROCR_VISIBLE_DEVICES']]))")
    for rank, (cpu, device) in enumerate([(cpus[1], "1"), (cpus[0], "0")]):
        proc = subprocess.run([*bind_command().split(), str(tmp_path / "bindings"), "--", sys.executable,
                               "-c", report], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "SLURM_PROCID": str(rank)})
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == [[cpu], device]


def test_cli_topo_shows_the_links(capsys):
    assert main(["topo", "--gpu-node", "frontier"]) == 0
    text = capsys.readouterr().out
    assert "links inside localhost (built-in frontier)" in text and "rocr:0" in text
    assert main(["topo", "--xml", str(DATA / "eas-tioga.xml"), "--per", "gpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_pes"] == 8
    assert main(["map", str(ROOT / "rankmap" / "data" / "btmz64.edges"), "--gpu-node", "frontier",
                 "--per", "core"]) == 2
    assert "--gpu-node maps one rank per GPU" in capsys.readouterr().err
