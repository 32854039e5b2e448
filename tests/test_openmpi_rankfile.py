"""Open MPI's mpirun takes the rankfile rankmap writes, with the command
rankmap prints, and binds every rank to the PU the mapping names (checked
from inside the ranks).  Runs wherever an Open MPI mpirun is on PATH (the
program needs no mpi4py: Open MPI tells each process its rank)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess

import numpy as np
import pytest

from mpi_util import launch_options, mpi_kind
from rankmap.formats import write_launch_file
from rankmap.formats.relaunch import relaunch_commands
from rankmap.topology.live import sysfs_topology

REPORT = ("import json, os, sys; sys.stdout.write('RANK ' + json.dumps([int(os.environ["
          "'OMPI_COMM_WORLD_RANK']), sorted(os.sched_getaffinity(0))]) + '\\n')")  # one write per rank


def _openmpi_mpirun():
    exe = shutil.which("mpirun")
    if exe is None or mpi_kind(exe) != "openmpi":
        pytest.skip("no Open MPI mpirun on PATH (Debian: apt-get install openmpi-bin)")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    major = int(version.split(")")[1].split(".")[0])
    return exe, major


@pytest.mark.mpi
def test_mpirun_binds_each_rank_where_the_rankfile_says(tmp_path):
    exe, major = _openmpi_mpirun()
    node = sysfs_topology()
    n = node.n_pes
    if n < 2:
        pytest.skip("needs two PUs to tell bindings apart")
    pe_of_task = np.arange(n)[::-1].copy()      # reversed: rank r on the last-but-r PU
    rankfile = tmp_path / "rankfile"
    write_launch_file(pe_of_task, node, str(rankfile), "openmpi")
    v4, v5 = relaunch_commands("openmpi", str(rankfile), n, "PROGRAM")
    args = shlex.split((v4 if major < 5 else v5).split("#", 1)[0])
    assert args[0] == "mpirun" and args[-1] == "PROGRAM"
    _, env = launch_options(n, kind="openmpi")
    proc = subprocess.run([exe, "--oversubscribe", *args[1:-1], "python3", "-c", REPORT],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = dict(json.loads(line[5:]) for line in proc.stdout.splitlines() if line.startswith("RANK "))
    assert sorted(rows) == list(range(n))
    for rank, cpus in rows.items():
        assert cpus == [int(node.pe_os_index[pe_of_task[rank]])], (rank, cpus, proc.stdout)
