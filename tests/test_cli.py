"""The console script end to end, in-process (``main(argv)``) and once as a
real subprocess."""

import json
import subprocess
import sys

import numpy as np
import pytest

from rankmap.cli import main
from rankmap.formats import read_graph
from rankmap.topology import topology_from_strings


def run_json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_map_json_fields(capsys, data_dir):
    out = run_json(capsys, ["map", str(data_dir / "traffic/app.mat"), "--hierarchy", "4:16:1",
                            "--distances", "1:10:100", "--method", "greedy", "--json"])
    for key in ["method", "n_tasks", "n_pes", "J", "J_identity", "bytes_per_level", "bottleneck",
                "time_s", "output"]:
        assert key in out
    assert out["n_tasks"] == 64 and out["J"] < out["J_identity"]


def test_eval_matches_independent_computation(capsys, data_dir, tmp_path):
    """J from `rankmap eval` equals a direct sum over the dense matrix with
    the distance written out by hand."""
    mat = np.loadtxt(data_dir / "traffic/app.mat")
    perm = np.random.default_rng(7).permutation(64)
    f = tmp_path / "perm.txt"
    f.write_text("\n".join(map(str, perm)) + "\n")
    out = run_json(capsys, ["eval", str(data_dir / "traffic/app.mat"), "--mapping", str(f),
                            "--hierarchy", "4:16:1", "--distances", "1:10:100", "--json"])

    def dist(p, q):
        return 0 if p == q else 1 if p // 4 == q // 4 else 10 if p // 64 == q // 64 else 100

    want = sum(mat[u, v] * dist(perm[u], perm[v]) for u in range(64) for v in range(64) if u != v)
    assert out["J"] == pytest.approx(want, rel=1e-12)


def test_map_writes_every_launch_format(capsys, data_dir, tmp_path):
    src = str(data_dir / "traffic/lulesh64.size.csv")
    topo = topology_from_strings("8:2:4", "1:10:100")
    outs = {}
    for kind in ["perm", "mpich", "hydra", "openmpi", "slurm"]:
        f = tmp_path / kind
        assert main(["map", src, "--hierarchy", "8:2:4", "--distances", "1:10:100",
                     "--method", "greedy_allc", "-o", str(f), "--as", kind]) == 0
        outs[kind] = f.read_text().splitlines()
    capsys.readouterr()
    pe = np.array([int(x) for x in outs["perm"]])
    assert sorted(pe.tolist()) == list(range(64))
    # MPICH rank order: slot s holds rank order[s]
    order = [int(x) for line in outs["mpich"] if not line.startswith("#")
             for x in line.rstrip(",").split(",")]
    assert [pe[r] for r in order] == list(range(64))
    # hydra machinefile: each host once, -rankmap beside it places the ranks (or host:count runs)
    from rankmap.formats.launch_files import read_launch_file

    assert read_launch_file(tmp_path / "hydra", 64).host == [topo.pe_host[p] for p in pe]
    # Open MPI rankfile: rank r=host slot=s with s the PE's index in its host
    for r, line in enumerate(outs["openmpi"]):
        assert line == f"rank {r}={topo.pe_host[pe[r]]} slot={pe[r] % 16}"
    assert outs["slurm"] == [topo.pe_host[p] for p in pe]


def test_greedy_beats_random_on_real_traffic(capsys, data_dir):
    src = str(data_dir / "traffic/app.mat")
    j = {m: run_json(capsys, ["map", src, "--hierarchy", "4:16:1", "--distances", "1:10:100",
                              "--method", m, "--json"])["J"] for m in ["greedy", "random", "identity"]}
    assert j["greedy"] < j["identity"] < j["random"]


def test_convert_round_trip(capsys, data_dir, tmp_path):
    out = tmp_path / "a.mtx"
    assert main(["convert", str(data_dir / "traffic/amg64.size.csv"), "-o", str(out)]) == 0
    a = read_graph(data_dir / "traffic/amg64.size.csv")
    b = read_graph(out)
    assert abs(a.bytes - b.bytes).max() == 0


def test_tleaf_topology_file(capsys, data_dir):
    # the Scotch target of a real 3-node cluster (hwloc netloc test): 2304 PEs
    out = run_json(capsys, ["map", str(data_dir / "traffic/app.mat"), "--topology",
                            str(data_dir / "traffic/arch.scotch"), "--method", "greedy", "--json"])
    assert out["n_pes"] == 4 * 24 * 2 * 2 * 6


@pytest.mark.parametrize("argv,msg", [
    (["map", "missing.graph", "--hierarchy", "4"], "no such file"),
    (["map", "{app}"], "no machine given"),
    (["map", "{app}", "--hierarchy", "4:x"], "hierarchy"),
    (["map", "{app}", "--hierarchy", "4:16", "--distances", "1:2:3"], "levels"),
    (["map", "{app}", "--hierarchy", "4:16:1", "--option", "nokey"], "KEY=VALUE"),
    (["eval", "{app}", "--hierarchy", "4:16:1", "--mapping", "{bad}"], "one-to-one"),
])
def test_errors_are_one_line(capsys, data_dir, tmp_path, argv, msg):
    bad = tmp_path / "bad.txt"
    bad.write_text("0\n" * 64)
    argv = [a.format(app=data_dir / "traffic/app.mat", bad=bad) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_console_script_demo(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rankmap", "demo", "-d", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "J ratio" in proc.stdout
    ratio = float(proc.stdout.split("J ratio")[1].split()[0])
    assert ratio < 1.0
    for name in ["mapping.txt", "MPICH_RANK_ORDER", "machinefile", "rankfile", "slurm.hostfile"]:
        assert (tmp_path / name).stat().st_size > 0


def test_trace_on_a_given_machine_compares_with_where_ranks_ran(capsys, tmp_path):
    """A 16-rank trace recorded on host 'vm', mapped onto a given cluster
    that contains 'vm': "before" is the recorded host placement."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    trace = root / "profiling/traces/halo2d-16.rmtrace.npz"
    xml = root / "tests/data/topologies/16em64t-4s2c2t.v2-hwloc2.14.xml"
    cluster = tmp_path / "machine.txt"
    cluster.write_text(f"cluster\nxml {xml}\nnodes vm,other\nnetwork 2 distances 100\n")
    out = run_json(capsys, ["map", str(trace), "--topology", str(cluster), "--method", "greedy",
                            "--json"])
    assert out["before"] == "recorded" and out["n_tasks"] == 16
    # identity would put 16 ranks on the first host as well: same J here
    assert out["J_before"] == out["J_identity"]
    # a smaller node listed first: identity would spread the ranks over both
    # hosts, but they all ran on 'vm'
    small = root / "tests/data/topologies/8em64t-2mi2ma2c.xml"
    cluster.write_text(f"cluster\nxml {xml}\nnodes other xml={small}\nnodes vm\n"
                       "network 2 distances 100\n")
    out = run_json(capsys, ["map", str(trace), "--topology", str(cluster), "--method", "greedy",
                            "--json"])
    assert out["before"] == "recorded" and out["J_before"] < out["J_identity"]


def test_hosts_placement_fills_each_host_in_rank_order():
    from rankmap.cli.common import _hosts_placement

    topo = topology_from_strings("2:2", "1:10")  # hosts node0 (PEs 0,1), node1 (PEs 2,3)
    assert _hosts_placement(["node1", "node0", "node1", "node0"], topo).tolist() == [2, 0, 3, 1]
    assert _hosts_placement(["node0", "node0", "node0"], topo) is None
    # names the machine lacks (a trace from another cluster) are matched to
    # its hosts in order of first appearance: ranks that shared a host still do
    assert _hosts_placement(["b", "a", "b", "a"], topo).tolist() == [0, 2, 1, 3]
    assert _hosts_placement(["a", "b", "c"], topo) is None  # more hosts than the machine has
    assert _hosts_placement(["a", None], topo) is None


def test_map_shows_j_and_the_busiest_link_before_and_after(capsys, tmp_path):
    """A cluster file with its link rates: the table gives the busiest link's
    bytes and its predicted time in seconds, the JSON both before and after."""
    topo = tmp_path / "c.topo"
    topo.write_text("cluster\nhierarchy 4 distances 1\nnodes cn[01-04]\n"
                    "network 4 distances 100 bandwidths 50mbit\n")
    rng = np.random.default_rng(3)
    m = np.zeros((16, 16))
    for r in range(16):  # a ring of 16 ranks, 1 MB to the next, numbered in a random order
        m[r, (r + 1) % 16] = 1e6
    perm = rng.permutation(16)
    mat = tmp_path / "ring.mat"
    np.savetxt(mat, m[np.ix_(perm, perm)], fmt="%d")
    assert main(["map", str(mat), "--topology", str(topo)]) == 0
    text = capsys.readouterr().out
    assert "busiest link " in text and "link time " in text and " s " in text
    out = run_json(capsys, ["map", str(mat), "--topology", str(topo), "--json"])
    assert out["objective"] == "time" and out["link_time_unit"] == "s"
    # a ring cut into 4 arcs: each node sends 1 MB to the next at 50 Mbit/s
    assert out["link_time"] == pytest.approx(1e6 / 6.25e6) and out["busiest_link_bytes"] == 1e6
    assert out["link_time_before"] > out["link_time"] and "cn0" in out["busiest_link"]
    summed = run_json(capsys, ["map", str(mat), "--topology", str(topo), "--json", "--objective", "sum"])
    assert summed["objective"] == "sum" and summed["J"] <= out["J"]


def test_map_sums_the_link_times_of_phases_in_turn(capsys, tmp_path):
    """Two phases that use the node links in turn (ranks 0, 1 of nodeA send
    to 2, 3 of nodeB, then back): the links are busy twice as long as the
    whole run's busiest link says; the new order keeps each pair on a node
    (2 MB over a node link at distance 100 before, 1 MB over a PE's link
    after, times relative)."""
    from rankmap.trace import RankInfo, Trace

    src, dst, phase = np.array([0, 1, 2, 3]), np.array([2, 3, 0, 1]), np.array([0, 0, 1, 1])
    empty = {f: np.zeros(0, dtype=np.int64) for f in ("src", "dst", "phase", "msgs")} | {"bytes": np.zeros(0)}
    edges = {"p2p": {"src": src, "dst": dst, "phase": phase, "bytes": np.full(4, 1e6), "msgs": np.ones(4, int)},
             "collective": dict(empty), "rma": dict(empty)}
    ranks = {r: RankInfo("nodeA" if r < 2 else "nodeB", [r], "complete", 1.0, 2.0) for r in range(4)}
    path = Trace(4, edges, ["east", "west"], ranks, {"nodeA": None, "nodeB": None},
                 {"collectives": "tree", "argv": ["app.py"]}, "t").write(tmp_path / "t.rmtrace.npz")
    out = run_json(capsys, ["map", str(path), "--hierarchy", "2:2", "--distances", "1:100", "--json"])
    assert out["phased_link_time_before"] == pytest.approx(2 * out["link_time_before"])
    # after: only the PEs' own links (100 x faster than a node's) carry bytes
    assert out["phased_link_time"] == 2 * out["link_time"] == pytest.approx(out["link_time_before"] / 100)
    assert main(["map", str(path), "--hierarchy", "2:2", "--distances", "1:100"]) == 0
    assert "  phases in turn" in capsys.readouterr().out


def test_map_keeps_the_given_order_where_the_mapping_is_no_better(capsys, tmp_path):
    """A ring numbered along the nodes is as good as it gets: multisection's
    mapping (the nodes relabelled, J ratio 1.0) would move every process for
    nothing, so map keeps the given order, says so, and writes launch files
    of it; a mapping worse beyond the noise (random) stays what was asked."""
    n = 16
    ring = tmp_path / "ring.edges"
    ring.write_text("".join(f"{u} {(u + 1) % n} 1000\n{(u + 1) % n} {u} 1000\n" for u in range(n)))
    out = tmp_path / "order.perm"
    args = ["map", str(ring), "--hierarchy", "4:4", "--distances", "1:100", "--method", "multisection"]
    report = run_json(capsys, args + ["-o", str(out), "--json"])
    assert report["kept_given_order"] and report["ratio"] == 1.0
    assert report["no_better_than_given"] == {"J": 1.0, "time": "link time", "ratio": 1.0}
    assert [int(x) for x in out.read_text().split()] == list(range(n))
    assert main(args) == 0
    assert "kept the identity order: the search's mapping is no better (J 1.0000 x" in capsys.readouterr().out
    report = run_json(capsys, args[:-1] + ["random", "--json"])
    assert not report["kept_given_order"] and report["no_better_than_given"] is None and report["ratio"] > 1.5
