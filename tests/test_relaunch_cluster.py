"""From a trace to a relaunch on a cluster with a real site's host names:
4 emulated nodes cn01..cn04, profile a program launched round-robin with
ranks bound by core, `rankmap map TRACE --hosts cn[01-04] --as all -o DIR`,
run the hydra command it prints (each rank through rankmap-bind), and check
from inside the ranks that every rank runs on the host and the core the
mapping names; then the same for a mapping that swaps the two ranks of every
node.  Skips where namespaces cannot be made (not root)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mpi_util import mpi_kind
from rankmap.bind import read_bindings
from rankmap.cpulist import parse_cpulist
from rankmap.emulate import ClusterSpec, ClusterUnavailable, EmulatedCluster, check_environment
from rankmap.formats import read_perm, write_all_launch_files
from rankmap.trace import read_trace

ROOT = Path(__file__).resolve().parents[1]
# pairs (2k, 2k+1) exchange 1 MiB, neighbours in the ring of pairs 4 KiB; every
# rank reports where it runs: host and CPUs
APP = textwrap.dedent("""
    import json, os, socket
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    r, p = comm.rank, comm.size
    big, small = np.zeros(2**20, np.uint8), np.zeros(4096, np.uint8)
    partner = r ^ 1
    comm.Sendrecv(big, partner, recvbuf=np.empty_like(big), source=partner)
    nxt, prv = (r + 2) % p, (r - 2) % p
    comm.Sendrecv(small, nxt, recvbuf=np.empty_like(small), source=prv)
    where = comm.gather([socket.gethostname(), sorted(os.sched_getaffinity(0))])
    if r == 0:
        print("HOSTS " + json.dumps(where), flush=True)
""")


# Open MPI's ranks report without MPI (OMPI_COMM_WORLD_RANK), one write each
OMPI_REPORT = ("import json, os, socket, sys; sys.stdout.write('PLACE ' + json.dumps([int(os.environ["
               "'OMPI_COMM_WORLD_RANK']), socket.gethostname(), sorted(os.sched_getaffinity(0))]) + '\\n')")


def _run(cmd, env=None, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, **kw)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _hosts_of(stdout: str) -> list[str]:
    line = next(x for x in stdout.splitlines() if x.startswith("HOSTS "))
    return json.loads(line[len("HOSTS "):])


@pytest.mark.mpi
def test_profile_map_relaunch_on_named_hosts_and_cores(tmp_path):
    try:
        check_environment()
        cluster = EmulatedCluster(ClusterSpec(nodes=4, slots=2, bandwidth="500mbit",
                                              names="cn[01-04]")).up()
    except ClusterUnavailable as exc:
        pytest.skip(f"no emulated cluster on this machine: {exc}")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs per node to tell the cores apart")
    try:
        app = tmp_path / "app.py"
        app.write_text(APP)
        trace = tmp_path / "app.rmtrace.npz"
        out = _run(cluster.mpiexec(order="round-robin") + ["-bind-to", "core"] + [
            sys.executable, "-m", "rankmap.profile", "-o", str(trace), str(app)], cwd=tmp_path)
        assert [h for h, _ in _hosts_of(out)] == ["cn01", "cn02", "cn03", "cn04"] * 2  # round-robin

        launch = tmp_path / "launch"
        printed = _run([sys.executable, "-m", "rankmap", "map", str(trace), "--hosts", "cn[01-04]",
                        "--as", "all", "-o", str(launch)], cwd=tmp_path)
        want = (launch / "slurm.hostfile").read_text().split()       # line r: host of rank r
        assert sorted(want) == sorted(["cn01", "cn02", "cn03", "cn04"] * 2)
        assert all(want[2 * k] == want[2 * k + 1] for k in range(4))  # each pair on one node
        hydra = next(x.strip() for x in printed.splitlines() if x.strip().startswith("mpiexec -f"))
        args = shlex.split(hydra.split("#", 1)[0])
        assert args[:5] == ["mpiexec", "-f", str(launch / "machinefile"), "-n", "8"]
        assert args[-4:] == [str(launch / "bindings"), "--", "python", str(app)]
        assert _placed(_relaunch(cluster, args, launch, tmp_path)) == _bound(launch / "bindings")

        # the two ranks of every node swap cores: the relaunch follows
        topo, placement = read_trace(trace).topology_and_placement()
        mapped = read_perm(str(launch / "mapping.txt"))
        swapped = np.empty_like(mapped)
        for r in range(8):
            partner = next(q for q in range(8) if q != r and want[q] == want[r])
            swapped[r] = mapped[partner]
        write_all_launch_files(swapped, topo, tmp_path / "swapped")
        bound = _bound(tmp_path / "swapped" / "bindings")
        assert bound != _bound(launch / "bindings") and [h for h, _ in bound] == want
        assert _placed(_relaunch(cluster, args, tmp_path / "swapped", tmp_path)) == bound

        # Open MPI (where installed): the printed Open MPI 4 line, same launch files
        mpirun = shutil.which("mpirun")
        if mpirun is not None and mpi_kind(mpirun) == "openmpi":
            v4 = next(x.strip() for x in printed.splitlines() if x.strip().endswith("# Open MPI 4"))
            line = shlex.split(v4.split("#", 1)[0])
            program_at = line.index("--") + 1
            prefix, env = cluster.mpirun(mpirun)
            out = _run(prefix + [*line[1:program_at], sys.executable, "-c", OMPI_REPORT],
                       cwd=tmp_path, env=env)
            rows = sorted(json.loads(x[6:]) for x in out.splitlines() if x.startswith("PLACE "))
            assert [(h, cpus) for _, h, cpus in rows] == _bound(launch / "bindings")
    finally:
        cluster.down()


def _relaunch(cluster, printed_args, launch, cwd):
    """The printed hydra line with the emulation's launcher options (how
    hydra reaches the namespaces) in front, this Python for "python", and
    the launch files of ``launch``."""
    prefix = cluster.mpiexec(machinefile=launch / "machinefile")
    prefix = prefix[:prefix.index("-f")]
    args = list(printed_args)
    args[2] = str(launch / "machinefile")
    args[-4] = str(launch / "bindings")
    args[-2] = sys.executable
    return _run(prefix + args[1:], cwd=cwd)


def _placed(stdout: str) -> list:
    return [(h, cpus) for h, cpus in _hosts_of(stdout)]


def _bound(bindings) -> list:
    return [(b.host, sorted(parse_cpulist(b.cpus))) for b in read_bindings(bindings)]


def test_named_hosts_spec_and_topology_file(tmp_path):
    spec = ClusterSpec(nodes=4, slots=2, names="cn[01-04]")
    assert spec.hosts == ["cn01", "cn02", "cn03", "cn04"]
    assert spec.topology().hosts() == spec.hosts
    f = tmp_path / "c.topo"
    f.write_text(spec.topology_file_text())
    from rankmap.topology import load_topology

    t = load_topology(str(f))
    assert t.hosts() == spec.hosts and t.n_pes == 8 and t.distance(0, 1) == 1 and t.distance(0, 2) == 100
    for names, msg in [("cn[01-03]", "need 4 distinct"), ("cn[01-09]", "more than 4"),
                       ("a,a,b,c", "distinct"), ("a_1,b,c,d", "letters, digits")]:
        with pytest.raises(ValueError, match=msg):
            ClusterSpec(nodes=4, names=names)


def test_cluster_run_finds_the_launcher_of_the_programs_mpi(tmp_path, monkeypatch):
    """A launch line's options, else its launcher's answer to --version,
    say which MPI runs it; each MPI's launcher is found by asking."""
    from rankmap.emulate.launchers import find_launcher, launcher_mpi, line_mpi

    ompi = tmp_path / "ompi" / "mpirun"
    ompi.parent.mkdir()
    ompi.write_text("#!/bin/sh\necho 'mpirun (Open MPI) 4.1.4'\n")
    other = tmp_path / "other" / "mpiexec"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\necho 'mpiexec from somewhere else'\n")
    for f in (ompi, other):
        f.chmod(0o755)
    assert launcher_mpi(str(ompi)) == "openmpi" and launcher_mpi(str(other)) is None
    assert line_mpi(["mpirun", "-n", "4", "--rankfile", "rf", "./a"]) == "openmpi"
    assert line_mpi(["mpiexec", "-f", "mf", "-n", "4", "./a"]) == "mpich"
    assert line_mpi(["mpiexec", "-n", "4", "./a", "--", "--rankfile"]) is None
    monkeypatch.setenv("PATH", f"{other.parent}{os.pathsep}{ompi.parent}")
    assert find_launcher("openmpi") == str(ompi)
    from rankmap.emulate.cluster import default_mpiexec

    assert launcher_mpi(default_mpiexec()) == "mpich"  # the mpich wheel's mpiexec is hydra
