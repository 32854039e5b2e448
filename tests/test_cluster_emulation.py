"""The emulated cluster: 2 nodes x 2 ranks, real MPICH runs across network
namespaces.  Skips (with the reason) where namespaces cannot be made."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from rankmap.emulate import (ClusterError, ClusterSpec, ClusterUnavailable, EmulatedCluster,
                             check_environment, parse_rate)
from rankmap.emulate.cluster import _link_list, _netns_list
from rankmap.topology import load_topology
from rankmap.topology.bandwidth import link_bandwidths

RATE = "50mbit"
PROBE = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank = comm.rank
    nbytes = int(sys.argv[1])
    buf = np.zeros(nbytes, np.uint8)
    ack = np.zeros(1, np.uint8)
    times = {}
    for peer in (1, 2):          # rank 1: same node as 0 in block order; rank 2: the other node
        comm.Barrier()
        t = time.perf_counter()
        if rank == 0:
            comm.Send(buf, peer); comm.Recv(ack, peer)
        elif rank == peer:
            comm.Recv(buf, 0); comm.Send(ack, 0)
        times[peer] = time.perf_counter() - t
    rows = comm.gather({"rank": rank, "host": MPI.Get_processor_name(), "times": times})
    if rank == 0:
        print(json.dumps(rows), flush=True)
""")


def leftovers(name: str) -> list[str]:
    return [x for x in _netns_list() + _link_list() if x.startswith(name)]


def test_parse_rate_units():
    assert parse_rate("200mbit") == 200_000_000
    assert parse_rate("1.5gbit") == 1_500_000_000
    assert parse_rate("10mbps") == 80_000_000
    for bad in ("fast", "200", "10 parsecs", "1bit"):
        with pytest.raises(ValueError):
            parse_rate(bad)


def test_spec_validation_and_topology(tmp_path):
    with pytest.raises(ValueError, match="racks"):
        ClusterSpec(nodes=4, racks=3)
    with pytest.raises(ValueError, match="nodes"):
        ClusterSpec(nodes=0)
    topo = ClusterSpec(nodes=4, slots=2, racks=2).topology()
    assert topo.hosts() == ["node0", "node1", "node2", "node3"]
    assert topo.uniform_hierarchy() == ([2, 2, 2], [1.0, 100.0, 1000.0])
    text = ClusterSpec(nodes=3, slots=4, latency="40us").topology_file_text()
    assert text == ("cluster\nhierarchy 4 distances 1\nnodes node[0-2]\n"
                    "network 3 distances 100 bandwidths 200mbit latencies 40us\n")
    for spec in (ClusterSpec(nodes=3, slots=4), ClusterSpec(nodes=4, racks=2, rack_bandwidth="20mbit")):
        path = tmp_path / "cluster.topo"
        path.write_text(spec.topology_file_text())
        read, built = load_topology(str(path)), spec.topology()
        assert read.hosts() == spec.hosts and read.uniform_hierarchy() == built.uniform_hierarchy()
        assert np.array_equal(link_bandwidths(read).inverse, link_bandwidths(built).inverse)


def test_object_names_fit_linux_limits():
    c = EmulatedCluster(ClusterSpec(nodes=250, racks=10))
    longest = max([c.bridge, f"{c.name}h249", f"{c.name}p249", f"{c.name}u9", f"{c.name}r9"],
                  key=len)
    assert len(longest) <= 15, longest      # IFNAMSIZ - 1
    assert EmulatedCluster(ClusterSpec(nodes=1)).name != c.name


@pytest.fixture(scope="module")
def cluster():
    try:
        check_environment()
        c = EmulatedCluster(ClusterSpec(nodes=2, slots=2, bandwidth=RATE)).up()
    except ClusterUnavailable as exc:
        pytest.skip(f"no emulated cluster on this machine: {exc}")
    try:
        yield c
    finally:
        c.down()
        assert leftovers(c.name) == []


def run_probe(cluster, tmp_path, nbytes, **launch):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    before = cluster.traffic()
    cmd = cluster.mpiexec(**launch) + [sys.executable, str(script), str(nbytes)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"run across the emulated cluster hung: {exc}")
    assert proc.returncode == 0, proc.stderr
    after = cluster.traffic()
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    sent = [a - b for a, b in zip(after["node_tx"], before["node_tx"])]
    return rows, sent


@pytest.mark.mpi
def test_inter_node_bytes_cross_the_rate_limited_network(cluster, tmp_path):
    nbytes = 2 * 2**20
    rows, sent = run_probe(cluster, tmp_path, nbytes, order="block")
    assert [r["host"] for r in rows] == ["node0", "node0", "node1", "node1"]
    # the inter-node message went through node0's link, the intra-node one did not
    assert nbytes <= sent[0] < 1.5 * nbytes
    assert sent[1] < 0.1 * nbytes
    # tbf bounds the rate from above: a slow machine can only make this longer
    floor = 0.8 * nbytes * 8 / parse_rate(RATE)
    assert rows[0]["times"]["2"] >= floor
    assert rows[0]["times"]["1"] < rows[0]["times"]["2"]


@pytest.mark.mpi
def test_round_robin_and_machinefile_orders(cluster, tmp_path):
    rows, _ = run_probe(cluster, tmp_path, 1024, order="round-robin")
    assert [r["host"] for r in rows] == ["node0", "node1", "node0", "node1"]
    machinefile = tmp_path / "hosts"
    machinefile.write_text("node1:1\nnode0:1\nnode0:1\nnode1:1\n")
    rows, _ = run_probe(cluster, tmp_path, 1024, machinefile=machinefile, n=4)
    assert [r["host"] for r in rows] == ["node1", "node0", "node0", "node1"]


def test_launcher_rejects_unknown_host(cluster):
    proc = subprocess.run([str(cluster.launcher), "-x", "elsewhere", "true"],
                          capture_output=True, text=True, timeout=10)
    assert proc.returncode == 255
    assert "unknown host 'elsewhere'" in proc.stderr


def test_teardown_after_error_inside_block():
    try:
        check_environment()
    except ClusterUnavailable as exc:
        pytest.skip(str(exc))
    cluster = EmulatedCluster(ClusterSpec(nodes=2, racks=2, rack_bandwidth="100mbit"))
    with pytest.raises(RuntimeError, match="boom"):
        with cluster:
            assert len(leftovers(cluster.name)) >= 2 * 2 + 2 * 2 + 1
            assert len(cluster.traffic()["rack_tx"]) == 2
            raise RuntimeError("boom")
    assert leftovers(cluster.name) == []
    assert not cluster.state_dir.exists()
    with pytest.raises(ClusterError):
        cluster.traffic()


def test_sigterm_tears_down():
    try:
        check_environment()
    except ClusterUnavailable as exc:
        pytest.skip(str(exc))
    code = ("import sys, time\n"
            "from rankmap.emulate import EmulatedCluster, ClusterSpec\n"
            "with EmulatedCluster(ClusterSpec(nodes=2)) as c:\n"
            "    print(c.name, flush=True)\n"
            "    time.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        name = proc.stdout.readline().strip()
        assert name.startswith("rmx") and leftovers(name)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 5
    while leftovers(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers(name) == []


def test_cli_up_list_run_down(capsys):
    from rankmap.cli import main
    from rankmap.emulate import teardown

    try:
        check_environment()
    except ClusterUnavailable as exc:
        pytest.skip(str(exc))
    assert main(["cluster", "up", "--nodes", "2", "--slots", "3", "--bandwidth", "10mbit"]) == 0
    name = capsys.readouterr().out.strip()
    try:
        assert main(["cluster", "list"]) == 0
        assert f"{name}\t2 nodes x 3 slots\t10mbit" in capsys.readouterr().out
        assert main(["cluster", "topology", name]) == 0
        assert capsys.readouterr().out == ClusterSpec(nodes=2, slots=3, bandwidth="10mbit").topology_file_text()
        assert main(["cluster", "run", name, "--show", "--", "prog", "arg"]) == 0
        shown = capsys.readouterr().out
        assert "-hosts node0:3,node1:3 -n 6 prog arg" in shown and "FI_PROVIDER tcp" in shown
        assert main(["cluster", "down", name]) == 0
        assert leftovers(name) == []
        assert main(["cluster", "down", name]) == 2
        assert "no emulated cluster" in capsys.readouterr().err
    finally:
        teardown(name)
