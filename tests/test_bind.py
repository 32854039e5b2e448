"""rankmap-bind: every rank on the CPUs (and GPU) its bindings line names,
whatever the launcher.  The file format, the rank variables of each
launcher, Slurm's environment simulated, and real MPICH (hydra) runs with
the printed relaunch line, including a mapping that swaps the cores of two
ranks inside a node."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys

import numpy as np
import pytest

from mpi_util import ROOT, launch_options, mpi_kind, mpiexec_path, run_mpi
from rankmap.bind import (Binding, BindError, binding_of, device_environment,
                          rank_from_environment, read_bindings, same_host)
from rankmap.cpulist import format_cpulist, parse_cpulist
from rankmap.formats import write_all_launch_files, write_launch_file
from rankmap.formats.relaunch import bind_command, relaunch_lines
from rankmap.topology import hierarchy_topology
from rankmap.topology.cluster import compose_cluster
from rankmap.trace import read_trace

HOST = socket.gethostname()
CPUS = sorted(os.sched_getaffinity(0))
REPORT = ("import json, os, socket, sys; r = next(os.environ[v] for v in ('PMI_RANK', "
          "'OMPI_COMM_WORLD_RANK', 'SLURM_PROCID') if v in os.environ); "
          "sys.stdout.write('RANK ' + json.dumps([int(r), socket.gethostname(), "
          "sorted(os.sched_getaffinity(0)), os.environ.get('ROCR_VISIBLE_DEVICES'), "
          "os.environ.get('CUDA_VISIBLE_DEVICES')]) + '\\n')")


def _bind_argv() -> list[str]:
    return shlex.split(bind_command())


def test_cpulists_round_trip():
    assert format_cpulist([8, 0, 1, 2, 3, 10, 11]) == "0-3,8,10-11"
    assert parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    for bad in ("3-1", "-1", "a", "0-x"):
        with pytest.raises(ValueError, match="bad CPU list"):
            parse_cpulist(bad)


def test_bindings_file_is_read_back_and_checked(tmp_path):
    f = tmp_path / "bindings"
    f.write_text("# rank host cpus device\n1 b 0-3 rocr:4\n0 a @2 -\n")
    assert read_bindings(tmp_path) == [Binding(0, "a", "@2", None), Binding(1, "b", "0-3", "rocr:4")]
    with pytest.raises(ValueError, match=r"bindings:2: line 1 places rank 1, not 0"):
        binding_of(f, 0)   # a rank reads its own line only: line r must be rank r
    f.write_text("# rank host cpus device\n0 a @2 -\n1 b 0-3 rocr:4\n")
    assert binding_of(f, 1) == (Binding(1, "b", "0-3", "rocr:4"), 2)
    with pytest.raises(BindError, match="PMI_RANK=2, but .* places ranks 0..1: start the job with -n 2"):
        binding_of(f, 2, "PMI_RANK=2")
    for text, message in [("0 a 1\n", r"bindings:1: expected 'rank host cpus device'"),
                          ("0 a 1 -\n0 a 2 -\n", r"bindings:2: rank 0 listed twice"),
                          ("0 a 1 -\n2 a 2 -\n", "no line for rank 1"),
                          ("0 a 1-x -\n", r"bindings:1: bad CPU list '1-x'"),
                          ("0 a @x -\n", "logical core '@x'"),
                          ("0 a 1 gpu:1\n", "device 'gpu:1' is not KIND:INDEX"),
                          ("x a 1 -\n", "rank 'x' is not a number"), ("# nothing\n", "no rank")]:
        f.write_text(text)
        with pytest.raises(ValueError, match=message):
            read_bindings(f)


def test_rank_comes_from_the_most_specific_launcher_variable():
    # mpirun inside a Slurm job: SLURM_PROCID is the batch step's, Open MPI's is the rank
    assert rank_from_environment({"SLURM_PROCID": "0", "OMPI_COMM_WORLD_RANK": "5"}) == (5, "OMPI_COMM_WORLD_RANK")
    assert rank_from_environment({"SLURM_PROCID": "3", "PMI_RANK": "7"}) == (7, "PMI_RANK")
    assert rank_from_environment({"PALS_RANKID": "2"}) == (2, "PALS_RANKID")
    assert rank_from_environment({"SLURM_PROCID": "9"}) == (9, "SLURM_PROCID")
    with pytest.raises(BindError, match="no rank in the environment"):
        rank_from_environment({})
    with pytest.raises(BindError, match="PMI_RANK='x' is not a rank number"):
        rank_from_environment({"PMI_RANK": "x"})


def test_each_gpu_kind_sets_its_own_runtime_variable():
    assert device_environment("rocr:4") == {"ROCR_VISIBLE_DEVICES": "4"}
    assert device_environment("cuda:1") == {"CUDA_VISIBLE_DEVICES": "1"}
    assert device_environment("nvml:2") == {"CUDA_VISIBLE_DEVICES": "2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert device_environment("ze:0") == {"ZE_AFFINITY_MASK": "0"}
    assert device_environment(None) == {}
    assert same_host("cn01", "CN01.cluster.local") and not same_host("cn01", "cn02")


def test_bindings_name_os_cpus_or_logical_cores(tmp_path):
    node = hierarchy_topology([4, 2], [1, 10], host_prefix=None)   # no OS indices known
    cluster = compose_cluster([("cn01", node), ("cn02", node)])
    pe = np.array([9, 8, 0, 1])
    f = tmp_path / "bindings"
    write_launch_file(pe, cluster, str(f), "bind")
    assert read_bindings(f) == [Binding(0, "cn02", "@1", None), Binding(1, "cn02", "@0", None),
                                Binding(2, "cn01", "@0", None), Binding(3, "cn01", "@1", None)]


def test_bindings_of_a_trace_keep_each_rank_whole_cpu_set(tmp_path):
    """Ranks recorded bound to several CPUs each (an OpenMP team per rank)
    are relaunched bound to all of them, not to the first."""
    trace = _recorded_trace(tmp_path, bindings=[[0, 1], [2, 3]], nranks=2)
    topo, placement = trace.topology_and_placement()
    assert topo.pe_cpus[placement[0]] == (0, 1) and topo.pe_cpus[placement[1]] == (2, 3)
    f = tmp_path / "b"
    write_launch_file(placement[::-1], topo, str(f), "bind")
    assert [b.cpus for b in read_bindings(f)] == ["2-3", "0-1"]


def _recorded_trace(tmp_path, bindings, nranks):
    """A trace as the profiler writes it, ranks bound as given, on this
    host with a small hwloc node of 4 PUs."""
    from rankmap.trace import KINDS, STATUSES, RankInfo, Trace

    xml = ("<?xml version='1.0'?><topology version='2.0'><object type='Machine' os_index='0' "
           "cpuset='0x0000000f'>" + "".join(
               f"<object type='Core' os_index='{c}' cpuset='0x{1 << c:08x}'><object type='PU' "
               f"os_index='{c}' cpuset='0x{1 << c:08x}'/></object>" for c in range(4))
           + "</object></topology>")
    edges = {kind: {"src": np.zeros(0, np.int32), "dst": np.zeros(0, np.int32),
                    "phase": np.zeros(0, np.int32), "bytes": np.zeros(0), "msgs": np.zeros(0, np.int64)}
             for kind in KINDS}
    t = Trace(nranks, edges, [], {r: RankInfo("h", bindings[r], STATUSES[0], 0.0, 1.0)
                                  for r in range(nranks)}, {"h": xml})
    path = tmp_path / "t.rmtrace.npz"
    t.write(path)
    return read_trace(path)


def _run_wrapper(bindings, env, *program, check=True):
    proc = subprocess.run([*_bind_argv(), str(bindings), "--", *program], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _rows(stdout: str) -> dict:
    return {r: rest for r, *rest in (json.loads(line[5:]) for line in stdout.splitlines()
                                     if line.startswith("RANK "))}


def test_wrapper_under_slurm_variables_binds_swapped_cores_and_gpus(tmp_path):
    """srun sets SLURM_PROCID per task; the wrapper puts task r on its line's
    CPUs and makes its line's GPU the only visible one (no GPU needed)."""
    if len(CPUS) < 2:
        pytest.skip("needs two CPUs to tell bindings apart")
    f = tmp_path / "bindings"
    f.write_text(f"0 {HOST} {CPUS[1]} rocr:5\n1 {HOST} {CPUS[0]} cuda:2\n")
    for rank, (cpu, rocr, cuda) in enumerate([(CPUS[1], "5", None), (CPUS[0], None, "2")]):
        out = _run_wrapper(f, {"SLURM_PROCID": str(rank)}, sys.executable, "-c", REPORT).stdout
        assert _rows(out) == {rank: [HOST, [cpu], rocr, cuda]}


def test_wrapper_refuses_in_one_line(tmp_path):
    f = tmp_path / "bindings"
    f.write_text(f"0 {HOST} {CPUS[0]} -\n1 elsewhere {CPUS[0]} -\n")
    for env, message in [({"SLURM_PROCID": "1"}, "rank 1 runs on"),
                         ({"SLURM_PROCID": "2"}, "SLURM_PROCID=2, but"),
                         ({}, "no rank in the environment")]:
        proc = subprocess.run([*_bind_argv(), str(f), "--", "true"], capture_output=True, text=True,
                              timeout=60, env={k: v for k, v in os.environ.items()
                                               if k not in ("PMI_RANK", "OMPI_COMM_WORLD_RANK",
                                                            "PMIX_RANK", "SLURM_PROCID")} | env)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    ok = _run_wrapper(f, {"SLURM_PROCID": "1"}, "true", check=False)
    assert ok.returncode == 2
    forced = subprocess.run([*_bind_argv(), "--ignore-host", str(f), "--", "true"],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "SLURM_PROCID": "1"})
    assert forced.returncode == 0, forced.stderr
    missing = _run_wrapper(f, {"SLURM_PROCID": "0"}, "no-such-program-here", check=False)
    assert missing.returncode == 127 and "cannot run 'no-such-program-here'" in missing.stderr


def test_logical_core_is_resolved_on_the_host(tmp_path):
    """``@K``: the K-th core in hwloc's logical order of the host it runs on
    (as an Open MPI rankfile's slot=K)."""
    from rankmap.topology.tree import core_slots
    from rankmap.topology.live import discover_local

    here = discover_local()
    slots = core_slots(here)
    last = int(slots.max())
    want = sorted(int(c) for c, s in zip(here.pe_os_index, slots) if s == last)
    f = tmp_path / "bindings"
    f.write_text(f"0 {HOST} @{last} -\n")
    assert _rows(_run_wrapper(f, {"SLURM_PROCID": "0"}, sys.executable, "-c", REPORT).stdout)[0][1] == want


def _hydra_or_skip():
    if mpi_kind() != "mpich":
        pytest.skip("MPICH hydra runs (the mpich wheel); the Open MPI lane runs test_site_mpi")


def _relaunch(line: str, tmp_path) -> dict:
    """Run a printed relaunch line with the report program in place of the
    recorded one; rank -> [host, cpus, rocr, cuda]."""
    args = shlex.split(line.split("#", 1)[0])
    program_at = args.index("--") + 1
    opts, env = launch_options(2)
    cmd = [mpiexec_path(), *opts, *args[1:program_at], sys.executable, "-c", REPORT]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return _rows(proc.stdout)


@pytest.mark.mpi
def test_hydra_relaunch_puts_every_rank_on_its_mapped_core(tmp_path):
    """Record two ranks bound by core, map with the CLI, write a mapping
    that swaps their cores, relaunch both with the printed hydra lines:
    every rank reports exactly the CPUs its bindings line names."""
    _hydra_or_skip()
    if len(CPUS) < 2:
        pytest.skip("needs two CPUs to tell bindings apart")
    app = ROOT / "profiling" / "halo2d.py"
    trace = tmp_path / "app.rmtrace.npz"
    run_mpi(2, ["-m", "rankmap.profile", "-o", str(trace), str(app), "--iters", "2"],
            binding="core", cwd=tmp_path, timeout=120)
    recorded = read_trace(trace)
    assert sorted(b[0] for b in recorded.bindings) == CPUS[:2]   # bound one core each

    printed = subprocess.run([sys.executable, "-m", "rankmap", "map", str(trace), "--as", "all",
                              "-o", str(tmp_path / "launch")], capture_output=True, text=True,
                             timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert printed.returncode == 0, printed.stderr
    line = next(x.strip() for x in printed.stdout.splitlines() if x.strip().startswith("mpiexec -f"))
    rows = _relaunch(line, tmp_path)
    for b in read_bindings(tmp_path / "launch"):
        assert rows[b.rank][:2] == [b.host, sorted(parse_cpulist(b.cpus))]

    topo, placement = recorded.topology_and_placement()
    swapped = placement[::-1].copy()                 # rank 0 on rank 1's core and back
    written = write_all_launch_files(swapped, topo, tmp_path / "swapped")
    line = next(x for x in relaunch_lines(written, 2, "python app.py") if x.startswith("mpiexec -f"))
    rows = _relaunch(line, tmp_path)
    assert [rows[r][1] for r in (0, 1)] == [[recorded.bindings[1][0]], [recorded.bindings[0][0]]]
