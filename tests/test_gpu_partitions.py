"""Partitioned GPUs: one PE per partition (MI300A in TPX/CPX mode, Intel
Max stacks), partitions of one package nearest each other, the package's
cores shared out among them, and relaunch bindings that give each rank its
partition's device index and cores."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rankmap import map_tasks
from rankmap.bind import check_device, device_environment, read_bindings
from rankmap.cli import main
from rankmap.cost import mapping_cost
from rankmap.cpulist import parse_cpulist
from rankmap.formats.relaunch import bind_command
from rankmap.graph import CommGraph
from rankmap.topology.cluster import compose_cluster
from rankmap.topology.gpu_nodes import GPU_NODES, load_gpu_node
from rankmap.topology.hwloc_gpus import read_hwloc_gpus
from rankmap.topology.partitions import cores_of, package_distance, share_out, split_packages

ROOT = Path(__file__).resolve().parents[1]
PARTITIONED = ROOT / "tests" / "data" / "topologies" / "partitioned"


def _matrix(t) -> np.ndarray:
    n = t.n_pes
    return t.distance(np.repeat(np.arange(n), n), np.tile(np.arange(n), n)).reshape(n, n)


def _index(device: str) -> int:
    return int(device.split(":")[1])


def _package_cores(p: int) -> set[int]:
    """The CPUs of MI300A package p on an El Capitan-class node."""
    return set(range(24 * p, 24 * p + 24)) | set(range(96 + 24 * p, 96 + 24 * p + 24))


def _check_mi300a(node, parts: int) -> None:
    """``4 x parts`` PEs, devices rocr:0.. numbered package by package, the
    partitions of one package nearer each other than to any other PE, the
    package's cores shared out evenly, both threads of a core together."""
    assert node.n_pes == 4 * parts
    assert sorted(_index(d) for d in node.pe_device) == list(range(4 * parts))
    package = np.array([_index(d) // parts for d in node.pe_device])
    m = _matrix(node)
    same = (package[:, None] == package[None, :]) & ~np.eye(node.n_pes, dtype=bool)
    other = package[:, None] != package[None, :]
    assert parts == 1 or m[same].max() < m[other].min()
    for p in range(4):
        shares = [set(node.pe_cpus[q]) for q in np.flatnonzero(package == p)]
        assert set().union(*shares) == _package_cores(p)
        assert sum(len(s) for s in shares) == 48 and {len(s) for s in shares} == {48 // parts}
        for s in shares:
            assert all((c + 96 in s) if c < 96 else (c - 96 in s) for c in s)


@pytest.mark.parametrize("mode, parts", [("spx", 1), ("tpx", 3), ("cpx", 6)])
def test_built_in_mi300a_node_in_each_mode(mode, parts):
    node = load_gpu_node(f"mi300a:{mode}")
    _check_mi300a(node, parts)
    assert node.node_links[0].source == f"built-in mi300a:{mode}"
    m = _matrix(node)
    assert m.max() == pytest.approx(20 * 25 / 128)   # two APUs: 128 GB/s each way
    if parts > 1:
        assert m[0, 1] == pytest.approx(package_distance(5300))   # the APU's own memory
    assert load_gpu_node("MI300A").n_pes == 4 and load_gpu_node("el-capitan:cpx").n_pes == 24


@pytest.mark.parametrize("name, parts", [("mi300a-tpx.xml", 3), ("mi300a-cpx.xml", 6)])
def test_hwloc_partitions_are_pes(name, parts):
    """Several rsmiN under one PCI device: one PE each, the index ROCm
    gives it, its share of the APU's cores; TPX from the XGMIBandwidth
    matrix, CPX from the XGMIPeers each partition lists."""
    node = read_hwloc_gpus(PARTITIONED / name)
    _check_mi300a(node, parts)
    assert f"{4 * parts} partitions of 4 GPUs" in node.node_links[0].source
    m = _matrix(node)
    if parts == 3:
        assert m.max() == pytest.approx(20 * 25 / 128) and m[0, 1] == pytest.approx(package_distance(5300))
    else:  # XGMIPeers: a link at hwloc's 100 GB/s; partitions of one APU at hwloc's default memory
        assert m.max() == pytest.approx(20 * 25 / 100) and m[0, 1] == pytest.approx(package_distance(None))
    assert np.all(node.node_links[0].egress == 0)   # a NIC at every APU


def test_intel_stacks_in_composite_mode():
    node = read_hwloc_gpus(PARTITIONED / "aurora-composite.xml")
    assert node.n_pes == 12
    assert list(node.pe_device) == [f"ze:{g}.{s}" for g in range(6) for s in range(2)]
    m = _matrix(node)
    assert m[0, 1] < m[0, 2] < m[0, 6]   # stacks of one GPU, one CPU package, across packages
    socket0 = set(range(52)) | set(range(104, 156))
    assert all(set(node.pe_cpus[p]) <= socket0 for p in range(6))
    assert set().union(*(set(node.pe_cpus[p]) for p in range(6))) == socket0
    assert device_environment(check_device("ze:3.1")) == {"ZE_AFFINITY_MASK": "3.1"}
    with pytest.raises(ValueError, match="KIND:INDEX"):
        check_device("rocr:3.1")


def test_partition_helpers():
    units = [[c, c + 8] for c in range(8)]
    assert cores_of([0, 1, 2, 3, 8, 9, 10, 11], 2) == [[0, 8], [1, 9], [2, 10], [3, 11]]
    assert share_out(units, 3) == [[0, 1, 8, 9], [2, 3, 4, 10, 11, 12], [5, 6, 7, 13, 14, 15]]
    assert share_out([[0]], 2) == [[0], [0]]   # more partitions than cores: they share
    d, e, package = split_packages(np.array([[0, 4.], [4, 0]]), [2, 3], [0.5, 0.25], np.array([1., 0]))
    assert package.tolist() == [0, 0, 1, 1, 1] and e.tolist() == [1, 1, 0, 0, 0]
    assert d[0, 1] == 0.5 and d[2, 4] == 0.25 and d[1, 3] == 4 and np.all(np.diag(d) == 0)


def test_modes_are_checked():
    with pytest.raises(ValueError, match="partition mode one of spx, tpx, cpx"):
        load_gpu_node("mi300a:qpx")
    with pytest.raises(ValueError, match="has no partition modes"):
        load_gpu_node("frontier:cpx")
    assert main(["topo", "--gpu-node", "mi300a:cpx"]) == 0


def _groups_of_six(n: int, heavy: float = 1e9, light: float = 1e6) -> CommGraph:
    """Rings of 6 ranks (the ranks k, k + n/6, ...: strided, as a
    data-parallel-outermost launch numbers them) exchanging ``heavy``
    bytes, and one ring over all ranks of ``light``."""
    groups = np.arange(n).reshape(6, n // 6).T
    src = np.concatenate([groups.ravel(), np.arange(n)])
    dst = np.concatenate([np.roll(groups, -1, axis=1).ravel(), np.roll(np.arange(n), -1)])
    w = np.concatenate([np.full(n, heavy), np.full(n, light)])
    return CommGraph.from_edges(src, dst, w, n=n)


def test_a_24_rank_job_maps_one_to_one_on_a_cpx_node():
    node = load_gpu_node("mi300a:cpx")
    g = _groups_of_six(24)
    pe = map_tasks(g, node, method="auto").pe_of_task
    assert sorted(pe.tolist()) == list(range(24))
    package = np.array([_index(node.pe_device[p]) // 6 for p in pe])
    assert all(len(set(package[k::4])) == 1 for k in range(4))   # every ring inside one APU
    assert mapping_cost(g, node, pe) < 0.2 * mapping_cost(g, node, np.arange(24))


def test_384_ranks_on_16_cpx_nodes_relaunch_on_their_partitions(tmp_path, capsys):
    """map writes bindings naming each rank's partition (ROCR index) and
    that partition's cores; rankmap-bind under srun's variables sets them."""
    g = _groups_of_six(384)
    src, dst, w = g.coo()
    edges = tmp_path / "job.edges"
    edges.write_text("".join(f"{s} {d} {x:.0f}\n" for s, d, x in zip(src, dst, w)))
    out = tmp_path / "launch"
    assert main(["map", str(edges), "--gpu-node", "mi300a:cpx", "--hosts", "elcap[1001-1016]",
                 "--as", "all", "-o", str(out), "--time-limit", "20"]) == 0
    capsys.readouterr()
    placed = read_bindings(out)
    node = GPU_NODES["mi300a"].node(mode="cpx")
    cpus_of = {node.pe_device[p]: set(node.pe_cpus[p]) for p in range(24)}
    assert len(placed) == 384 and len({b.host for b in placed}) == 16
    for host in {b.host for b in placed}:
        assert sorted(_index(b.device) for b in placed if b.host == host) == list(range(24))
    for b in placed:
        assert parse_cpulist(b.cpus) == cpus_of[b.device]
        assert parse_cpulist(b.cpus) <= _package_cores(_index(b.device) // 6)
    where = {b.rank: (b.host, _index(b.device) // 6) for b in placed}
    assert all(len({where[r] for r in range(k, 384, 64)}) == 1 for k in range(64))   # rings in one APU
    for b in placed[:3] + placed[-3:]:
        proc = subprocess.run([*bind_command().split(), "--dry-run", "--ignore-host", str(out), "--", "app"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "SLURM_PROCID": str(b.rank)})
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["rank", str(b.rank), "host", b.host, "cpus", b.cpus,
                                       f"ROCR_VISIBLE_DEVICES={_index(b.device)}"]


def test_16_cpx_nodes_compose():
    node = load_gpu_node("mi300a:cpx")
    machine = compose_cluster([(f"n{i}", node) for i in range(16)])
    assert machine.n_pes == 384 and len(machine.hosts()) == 16
