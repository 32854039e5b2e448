"""The GPU each rank used, recorded by the profiler and read back as the
"before" placement on GPU nodes: visible-device variables the launcher set
per rank, the device a rank opened through a loaded GPU driver (a stand-in
for libcuda, no GPU needed), and records read back on partitioned nodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rankmap.cost import mapping_cost
from rankmap.profile import gpu
from rankmap.topology.cluster import cluster_of_hosts
from rankmap.topology.gpu_nodes import load_gpu_node
from rankmap.topology.rank_gpus import _by_bus_id, gpu_placement, read_record
from rankmap.trace import RankInfo, Trace, read_trace
from tests.mpi_util import ROOT, run_mpi_per_rank_env

SCRIPTS = Path(__file__).parent / "mpi_scripts"
PROGRAMS = Path(__file__).parent / "mpi_programs"
PARTITIONED = ROOT / "tests" / "data" / "topologies" / "partitioned"
#: the GCD each rank of the recorded run sees: pairs (2k, 2k+1) split across MI250Xs
GCDS = [0, 2, 4, 6, 1, 3, 5, 7]


def _record_per_rank_env(tmp_path, envs: list[dict], args: list[str]) -> Path:
    """Profile ``gpu_pairs.py ARGS`` with rank r started in ``envs[r]``."""
    out = tmp_path / "run.rmtrace.npz"
    proc = run_mpi_per_rank_env(envs, ["-m", "rankmap.profile", "-o", str(out), str(SCRIPTS / "gpu_pairs.py"),
                                       *args], cwd=tmp_path)
    assert proc.stdout.count(": ok") == len(envs), proc.stdout
    return out


def _map_json(trace: Path, *options) -> dict:
    proc = subprocess.run([sys.executable, "-m", "rankmap", "map", str(trace), "--json", *options],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.mpi
def test_visible_devices_per_rank_give_the_true_before(tmp_path):
    out = _record_per_rank_env(tmp_path, [{"ROCR_VISIBLE_DEVICES": g} for g in GCDS], [])
    trace = read_trace(out)
    assert [read_record(t).device for t in trace.gpus] == [f"rocr:{g}" for g in GCDS]
    node = cluster_of_hosts(load_gpu_node("frontier"), [("frontier00001", 8)])
    where = {d: p for p, d in enumerate(node.pe_device)}
    true_pe = np.array([where[f"rocr:{g}"] for g in GCDS])
    graph = trace.graph("all")
    report = _map_json(out, "--gpu-node", "frontier", "--hosts", "frontier00001", "--traffic", "all")
    assert report["before"] == "recorded"
    assert report["J_before"] == pytest.approx(mapping_cost(graph, node, true_pe))
    assert report["J_before"] > 1.5 * mapping_cost(graph, node, np.arange(8))   # the launch order's guess
    shown = subprocess.run([sys.executable, "-m", "rankmap", "show", str(out), "--per", "gpu"],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    rows = [line.split() for line in shown.stdout.splitlines() if "ROCR_VISIBLE_DEVICES=" in line]
    assert [(int(r[0]), r[2], r[3]) for r in rows] == \
        [(r, f"rocr:{g}", f"ROCR_VISIBLE_DEVICES={g}") for r, g in enumerate(GCDS)]


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory) -> Path:
    """``libcuda.so.1`` built from the stand-in driver."""
    out = tmp_path_factory.mktemp("driver") / "libcuda.so.1"
    proc = subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(PROGRAMS / "fake_cuda.c")],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        pytest.skip(f"cannot build the stand-in driver: {proc.stderr[:200]}")
    return out


@pytest.mark.mpi
def test_the_device_each_rank_opened_is_recorded(tmp_path, fake_driver):
    """No visible-device variable: each rank opens a device through the
    loaded driver; the trace keeps its ordinal and PCI bus id."""
    opened = [3, 2, 1, 0]
    out = _record_per_rank_env(tmp_path, [{}] * 4, [str(fake_driver), ",".join(map(str, opened))])
    trace = read_trace(out)
    buses = [0x18, 0x2A, 0x3B, 0x4C]
    for r, text in enumerate(trace.gpus):
        rec = json.loads(text)
        assert rec["current"] == {"api": "cuda", "ordinal": opened[r], "pci": f"0000:{buses[opened[r]]:02x}:00.0"}
        assert rec["opened"] == [rec["current"]]
    report = _map_json(out, "--gpu-node", "dgx-h100", "--hosts", "dgx01", "--traffic", "all")
    node = cluster_of_hosts(load_gpu_node("dgx-h100"), [("dgx01", 8)])
    where = {d: p for p, d in enumerate(node.pe_device)}
    true_pe = np.array([where[f"nvml:{d}"] for d in opened])   # CUDA's order is the PCI order here
    assert report["before"] == "recorded"
    assert report["J_before"] == pytest.approx(mapping_cost(trace.graph("all"), node, true_pe))


def test_probing_loads_no_runtime_and_asks_only_a_started_one(fake_driver):
    code = ("import ctypes, json, sys; from rankmap.profile import gpu; "
            "assert gpu.record(probe=True) is None; "
            "assert 'libcuda' not in open('/proc/self/maps').read(); "
            "cu = ctypes.CDLL(sys.argv[1]); assert gpu.record() is None; "   # loaded, not started
            "cu.cuInit(0); print(gpu.record())")
    proc = subprocess.run([sys.executable, "-c", code, str(fake_driver)], capture_output=True, text=True,
                          timeout=60, env={k: v for k, v in os.environ.items() if k not in gpu.VISIBLE_VARIABLES}
                          | {"PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "None"   # started, no device opened: nothing to say


@pytest.mark.parametrize("env, ordinal, device", [
    ({"ROCR_VISIBLE_DEVICES": "5"}, None, "rocr:5"),
    ({"ROCR_VISIBLE_DEVICES": "4,5,6,7", "HIP_VISIBLE_DEVICES": "2"}, None, "rocr:6"),
    ({"ROCR_VISIBLE_DEVICES": "4,5,6,7"}, 1, "rocr:5"),
    ({"ROCR_VISIBLE_DEVICES": "0,1", "SLURM_STEP_GPUS": "6,7"}, 1, "rocr:7"),   # Slurm confines the devices
    ({"ROCR_VISIBLE_DEVICES": "6", "SLURM_STEP_GPUS": "6,7"}, None, "rocr:6"),  # ... or does not
    ({"CUDA_VISIBLE_DEVICES": "3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, None, "nvml:3"),
    ({"CUDA_VISIBLE_DEVICES": "2,3"}, None, None),                               # two seen, none opened
    ({"CUDA_VISIBLE_DEVICES": "GPU-8f0e2c1a"}, None, None),                      # a UUID
    ({"ZE_AFFINITY_MASK": "2.1"}, None, "ze:2.1"),
    ({}, 2, "cuda:2"),
])
def test_records_name_the_device(env, ordinal, device):
    text = {"env": env}
    if ordinal is not None:
        api = "hip" if any(k.startswith(("ROCR", "HIP")) for k in env) else "cuda"
        text["current"] = {"api": api, "ordinal": ordinal, "pci": None}
    assert read_record(json.dumps(text)).device == device
    assert read_record(None) is None and read_record("not json") is None


def test_partition_bus_ids_and_a_trace_on_a_cpx_node(tmp_path):
    """ROCm gives partition k of a GPU at 0000:02:00.0 the bus id
    0000:02:00.k: read back on the node's XML, each rank's partition."""
    xml = (PARTITIONED / "mi300a-cpx.xml").read_text()
    listed = [(f"rocr:{i}", f"000{i // 6}:02:00.0") for i in range(24)]
    rec = read_record(json.dumps({"current": {"api": "hip", "ordinal": 0, "pci": "0002:02:00.3"}}))
    assert _by_bus_id(rec, listed) == "rocr:15"
    ranks = list(range(24))[::-1]
    infos = {}
    for r, part in enumerate(ranks):
        pci = f"000{part // 6}:02:00.{part % 6}"
        text = json.dumps({"current": {"api": "hip", "ordinal": 0, "pci": pci},
                           "env": {"ROCR_VISIBLE_DEVICES": str(part)}})
        infos[r] = RankInfo("mi300a-cpx", [], "complete", 0.0, 1.0, text)
    edges = {k: {f: np.zeros(0, dtype=np.int64) for f in ("src", "dst", "phase", "bytes", "msgs")}
             for k in ("p2p", "collective", "rma")}
    trace = Trace(24, edges, ["main"], infos, {"mi300a-cpx": xml})
    path = trace.write(tmp_path / "cpx.rmtrace.npz")
    back = read_trace(path)
    assert back.gpus == trace.gpus
    from rankmap.topology.hwloc_gpus import read_hwloc_gpus

    node = read_hwloc_gpus(xml, host="mi300a-cpx")
    pe, note = gpu_placement(back, node)
    assert note is None and [node.pe_device[p] for p in pe] == [f"rocr:{p}" for p in ranks]
    # map --per gpu on the trace's own XML: the recorded partitions are the "before"
    ring = np.arange(24)
    edges["p2p"] = {"src": ring, "dst": (ring + 1) % 24, "phase": np.zeros(24, dtype=np.int64),
                    "bytes": np.full(24, 1e6), "msgs": np.ones(24, dtype=np.int64)}
    ringed = Trace(24, edges, ["main"], infos, {"mi300a-cpx": xml}).write(tmp_path / "ring.rmtrace.npz")
    report = _map_json(ringed, "--per", "gpu")
    assert report["before"] == "recorded"
    assert report["J_before"] == pytest.approx(mapping_cost(read_trace(ringed).graph("p2p"), node, pe))
    infos[3] = infos[3]._replace(gpu=json.dumps({"env": {"CUDA_VISIBLE_DEVICES": "0,1"}}))
    pe, note = gpu_placement(Trace(24, edges, ["main"], infos, {"mi300a-cpx": xml}), node)
    assert pe is None and "the GPU of 1 of 24 ranks (rank 3 first) is not known" in note


def test_damaged_gpu_members_are_refused(tmp_path):
    infos = {0: RankInfo("h", [], "complete", 0.0, 1.0, '{"env":{"ROCR_VISIBLE_DEVICES":"1"}}')}
    edges = {k: {f: np.zeros(0, dtype=np.int64) for f in ("src", "dst", "phase", "bytes", "msgs")}
             for k in ("p2p", "collective", "rma")}
    path = Trace(1, edges, ["main"], infos).write(tmp_path / "one.rmtrace.npz")
    with np.load(path) as z:
        arrays = dict(z)
    arrays["gpu_ptr"] = np.array([0, 999], dtype=np.int64)
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="gpu_ptr"):
        read_trace(path)


def test_visible_variables_only():
    assert gpu.visible({"CUDA_VISIBLE_DEVICES": "1", "PATH": "/bin"}) == {"CUDA_VISIBLE_DEVICES": "1"}
    assert json.loads(gpu.record({"ZE_AFFINITY_MASK": "0.1"}, probe=False)) == {"env": {"ZE_AFFINITY_MASK": "0.1"}}
    assert gpu.record({}, probe=False) is None
