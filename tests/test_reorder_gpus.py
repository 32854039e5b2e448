"""reorder_comm on GPU nodes: every process is told a GPU, the GPUs of
the new order follow the mapping, the launcher's confinement to one GPU
is kept, use_gpu sets the visible-device variable; the documented example
runs as written under mpiexec -n 8 on a simulated 8-GCD node."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rankmap.reorder.gpus import _assign, gpus_argument, use_gpu
from rankmap.topology.gpu_nodes import load_gpu_node
from rankmap.topology.local_gpus import sysfs_gpus
from rankmap.topology.partitions import shared_gpus
from tests.mpi_util import ROOT, run_mpi, run_mpi_per_rank_env

SCRIPTS = Path(__file__).parent / "mpi_scripts"
DOC = ROOT / "docs" / "gpu-nodes.md"


def _gcd(device: str) -> int:
    return int(device.split(":")[1])


def _rows(stdout: str) -> list[dict]:
    return sorted((json.loads(row) for row in re.findall(r"\{[^{}]*\}", stdout)),   # ranks' lines may interleave
                  key=lambda r: r["new"])


@pytest.mark.mpi
def test_every_rank_learns_a_gpu_that_follows_the_mapping():
    rows = _rows(run_mpi(8, [str(SCRIPTS / "reorder_gpus.py"), "frontier"], timeout=180).stdout)
    assert len(rows) == 8 and not any(r["fallback"] for r in rows)
    gcds = [_gcd(r["device"]) for r in rows]
    assert sorted(gcds) == list(range(8))
    for t in range(4):   # tasks t and t + 4 exchange most: the two GCDs of one MI250X
        assert {gcds[t], gcds[t + 4]} in ({0, 1}, {2, 3}, {4, 5}, {6, 7})
    assert all(r["ordinal"] == 0 and r["rocr"] == str(_gcd(r["device"])) for r in rows)


@pytest.mark.mpi
def test_a_process_the_launcher_confined_keeps_its_gcd():
    """Each process sees one GCD (ROCR_VISIBLE_DEVICES = its old rank): it
    cannot change GPU, so the mapping gives it the task that belongs there."""
    proc = run_mpi_per_rank_env([{"ROCR_VISIBLE_DEVICES": str(r)} for r in range(8)],
                                [str(SCRIPTS / "reorder_gpus.py"), "frontier"])
    rows = _rows(proc.stdout)
    assert all(r["device"] == f"rocr:{r['old']}" for r in rows) and not any(r["fallback"] for r in rows)
    for t in range(4):
        assert {_gcd(rows[t]["device"]), _gcd(rows[t + 4]["device"])} in ({0, 1}, {2, 3}, {4, 5}, {6, 7})


@pytest.mark.mpi
def test_a_node_without_gpus_falls_back_everywhere():
    proc = run_mpi(4, [str(SCRIPTS / "reorder_gpus.py"), "no-such-node"], timeout=120)
    rows = _rows(proc.stdout)
    assert all(r["fallback"] and r["device"] is None and r["ordinal"] is None for r in rows)
    assert proc.stderr.count("keeping the original rank order") == 1   # one warning per job


@pytest.mark.mpi
def test_the_documented_example_runs_on_a_simulated_node(tmp_path):
    text = DOC.read_text()
    block = re.search(r"<!-- example: reorder_on_gpus.py -->\n```python\n(.*?)```", text, re.S)
    assert block is not None, "docs/gpu-nodes.md lost its reorder_comm example"
    example = ROOT / "examples" / "reorder_on_gpus.py"
    assert block.group(1) == example.read_text(), "the docs' example and examples/reorder_on_gpus.py differ"
    assert len(block.group(1).splitlines()) <= 30
    out = run_mpi(8, [str(example), "frontier"], timeout=180).stdout
    lines = sorted(re.findall(r"rank (\d) device rocr:(\d) ordinal 0 got (\d) fallback False", out))
    assert len(lines) == 8 and sorted(int(d) for _r, d, _g in lines) == list(range(8))
    for r, d, got in lines:   # each pair on one MI250X, and each rank got its pair's block
        partner = next(x for x in lines if int(x[0]) == int(r) ^ 1)
        assert int(got) == int(r) ^ 1 and int(d) // 2 == int(partner[1]) // 2


def test_use_gpu_narrows_before_the_runtime_starts():
    env = {"ROCR_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "HIP_VISIBLE_DEVICES": "3", "PATH": "/bin"}
    assert use_gpu("rocr:5", env) == 0
    assert env == {"ROCR_VISIBLE_DEVICES": "5", "PATH": "/bin"}
    env = {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert use_gpu("nvml:6", env) == 0 and env == {"CUDA_VISIBLE_DEVICES": "6", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert use_gpu(None, env) is None
    assert gpus_argument(True) == "local" and gpus_argument(None) is None
    with pytest.raises(ValueError, match="gpus must be"):
        gpus_argument(3)


def test_slots_claims_bindings_then_order():
    node = load_gpu_node("frontier")
    dev = list(node.pe_device)
    near_gcd4 = list(node.pe_cpus[dev.index("rocr:4")])[:2]
    local = _assign("n", node, [None, "rocr:3", None, None], [[], [], near_gcd4, []])
    assert [dev[p] for p in local] == [dev[0], "rocr:3", "rocr:4", dev[1]]
    shared = shared_gpus(load_gpu_node("frontier"), 2)
    assert shared.n_pes == 16 and sorted(shared.pe_device) == sorted(dev * 2)
    with pytest.raises(RuntimeError, match="more ranks were given rocr:3"):
        _assign("n", node, ["rocr:3", "rocr:3"], [[], []])


def test_gpus_of_sysfs(tmp_path):
    """The PCI devices Linux lists: GPUs by class and vendor, PCI order,
    the CPUs near each shared out among the GPUs that share them."""
    def dev(bus, cls, vendor, cpus, node):
        d = tmp_path / "bus" / "pci" / "devices" / bus
        d.mkdir(parents=True)
        for name, value in (("class", cls), ("vendor", vendor), ("local_cpulist", cpus), ("numa_node", node)):
            (d / name).write_text(value + "\n")

    dev("0000:18:00.0", "0x030200", "0x10de", "0-7", "0")
    dev("0000:2a:00.0", "0x030200", "0x10de", "0-7", "0")
    dev("0000:9a:00.0", "0x030200", "0x10de", "8-15", "1")
    dev("0000:05:00.0", "0x020000", "0x15b3", "0-7", "0")   # a NIC
    node = sysfs_gpus(str(tmp_path))
    by = {d: p for p, d in enumerate(node.pe_device)}
    assert sorted(by) == ["nvml:0", "nvml:1", "nvml:2"]
    assert node.pe_cpus[by["nvml:0"]] == (0, 1, 2, 3) and node.pe_cpus[by["nvml:2"]] == tuple(range(8, 16))
    assert node.distance(by["nvml:0"], by["nvml:1"]) < node.distance(by["nvml:0"], by["nvml:2"])
    with pytest.raises(ValueError, match="no GPU among the PCI devices"):
        sysfs_gpus(str(tmp_path / "empty"))
