"""The README's path on whatever MPI the environment gives (the mpich wheel,
or a site MPI with mpi4py built against it, as CI's Open MPI lane): profile
a program, `rankmap map TRACE -o FILE --as FORMAT` with no machine options
(the trace recorded the host's tree, lstopo or not), then relaunch with the
command rankmap prints and check from inside the ranks that each runs on the
host and the CPUs the launch file and its bindings say."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mpi_util import ROOT, launch_options, mpi_kind, mpiexec_path, run_mpi
from rankmap.bind import read_bindings
from rankmap.cpulist import parse_cpulist

REPORT = ("import json, os, socket, sys; from mpi4py import MPI; "
          "sys.stdout.write('RANK ' + json.dumps([MPI.COMM_WORLD.rank, socket.gethostname(), "
          "sorted(os.sched_getaffinity(0))]) + '\\n')")


@pytest.mark.mpi
def test_profile_map_relaunch_with_the_printed_command(tmp_path):
    kind = mpi_kind()
    if kind not in ("mpich", "openmpi"):
        pytest.skip(f"no MPICH or Open MPI mpiexec here ({kind})")
    n = 4
    trace = tmp_path / "halo.rmtrace.npz"
    run_mpi(n, ["-m", "rankmap.profile", "-o", str(trace), str(ROOT / "profiling" / "halo2d.py"),
                "--iters", "3"], timeout=120, cwd=tmp_path)
    fmt = "openmpi" if kind == "openmpi" else "hydra"
    launch = tmp_path / ("rankfile" if fmt == "openmpi" else "machinefile")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "rankmap", "map", str(trace), "-o", str(launch),
                           "--as", fmt, "--method", "greedy"], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = "mpirun -n" if fmt == "openmpi" else "mpiexec -f"
    printed = next(x.strip() for x in proc.stdout.splitlines() if x.strip().startswith(first))
    args = shlex.split(printed.split("#", 1)[0])
    program_at = args.index("--") + 1   # ... rankmap-bind BINDINGS -- PROGRAM
    assert args[program_at:] == ["python", str(ROOT / "profiling" / "halo2d.py"), "--iters", "3"]
    assert args[program_at - 2] == f"{launch}.bindings"
    opts, launch_env = launch_options(n, binding="none")
    if kind == "openmpi":
        opts = ["--oversubscribe"]   # the printed line switches Open MPI's binding off itself
    cmd = [mpiexec_path(), *opts, *args[1:program_at], sys.executable, "-c", REPORT]
    ran = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                         env={**env, **launch_env}, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    rows = {r: (host, cpus) for r, host, cpus in
            (json.loads(line[5:]) for line in ran.stdout.splitlines() if line.startswith("RANK "))}
    assert sorted(rows) == list(range(n))
    placed = read_bindings(f"{launch}.bindings")
    for b in placed:  # every rank on its host and exactly its CPUs
        assert rows[b.rank] == (b.host, sorted(parse_cpulist(b.cpus))), (b, rows)
    if fmt == "openmpi":  # the rankfile names the same hosts
        hosts = [line.split()[1].split("=")[1] for line in launch.read_text().splitlines()]
    else:  # host:count lines fill ranks in order
        hosts = [h for line in launch.read_text().split()
                 for h in [line.split(":")[0]] * int(line.split(":")[1])]
    assert [rows[r][0] for r in range(n)] == hosts
