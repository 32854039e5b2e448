"""hydra keeps every host whole: the machinefile names a host once and
``-rankmap`` places the ranks, wherever MPICH reads that placement back
right (``rankmap.formats.hydra`` models what it reads); elsewhere the
machinefile splits hosts and says so.  On an emulated cluster of 4 nodes,
the printed hydra line run through ``rankmap cluster run``: every rank on
its host and CPUs, and MPI_COMM_TYPE_SHARED as large as the ranks that
share its host (its machinefile line where hosts are split); the Open MPI
line the same under Open MPI."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rankmap.emulate import ClusterSpec, ClusterUnavailable, EmulatedCluster, check_environment
from rankmap.emulate.launchers import find_launcher
from rankmap.formats import write_all_launch_files
from rankmap.formats.hydra import (HYDRA_RANKMAP_COMMENT, contiguous, hydra_form, hydra_node_map,
                                   hydra_note, mend_for_hydra, node_map_survives, parse_rankmap,
                                   rankmap_argument)
from rankmap.formats.launch_files import read_launch_file
from rankmap.formats.relaunch import line_argv, relaunch_lines
from rankmap.graph import CommGraph
from rankmap.topology.cluster import compose_cluster
from rankmap.topology import Topology
from rankmap.topology.hierarchy import topology_from_strings

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "tests" / "mpi_programs" / "whereami.c"
HOSTS = [f"cn0{k}" for k in range(1, 5)]
# a 4 x 4 grid's 2 x 2 blocks on the nodes (ranks in row order): MPICH reads its -rankmap right
BLOCKS = [0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3]
# MPICH reads this -rankmap back as [0,1,0,1,2,3,2,3,2,3,0,1,0,1,0,1] (MPICH 5.0.2's hydra gave
# its ranks MPI_COMM_TYPE_SHARED sizes 5,5,5,5,3,3,3,3,3,3,5,5,5,5,5,5): the machinefile splits
MISREAD = [0, 1, 0, 1, 2, 3, 2, 3, 0, 1, 0, 1, 2, 3, 2, 3]


def machine(bound: bool = True):
    """4 hosts of 2 cores of 2 hardware threads, the threads of core c bound
    (where asked) to CPU c: the 2 cores of the machine the emulation runs on,
    which every emulated node shares."""
    node = Topology.uniform([2, 2], [1, 10], ["machine", "core", "pu"])
    topo = compose_cluster([(h, node) for h in HOSTS])
    return topo.with_pe_cpus([((k // 2) % 2,) for k in range(16)]) if bound else topo


def on_nodes(topo, node_of_rank) -> np.ndarray:
    """PEs placing rank r on host ``node_of_rank[r]`` (its next free PE) of ``machine()``."""
    return on_nodes_of(node_of_rank, 4)


def on_nodes_of(node_of_rank, per_host: int) -> np.ndarray:
    pe = np.empty(len(node_of_rank), dtype=np.int64)
    used = {}
    for r, h in enumerate(np.asarray(node_of_rank).tolist()):
        pe[r] = per_host * h + used.get(h, 0)
        used[h] = used.get(h, 0) + 1
    return pe


# ------------------------------------------------------------ the model
def test_rankmap_argument_uses_hydras_block_syntax_and_reads_back():
    for ids in ([0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 2, 3] * 3, BLOCKS, MISREAD, [0, 0, 1, 2, 2, 2, 1, 0]):
        text = rankmap_argument(np.array(ids))
        assert parse_rankmap(text, len(ids)).tolist() == ids
    assert rankmap_argument(np.array([0, 0, 1, 1, 0, 0, 1, 1])) == "(0,2,2),(0,2,2)"
    assert rankmap_argument(np.array([0, 1, 2, 0])) == "(0,3,1),0"
    assert parse_rankmap("(vector,(0,2,2))", 4).tolist() == [0, 0, 1, 1]  # hydra's own wrapping
    for bad, n in (("(0,2)", 4), ("0,x", 2), ("0,1,2", 2), ("0", 2)):
        with pytest.raises(ValueError):
            parse_rankmap(bad, n)


def test_mpich_reads_back_what_its_encoding_says():
    """The read-back MPICH 5.0.2's hydra gave on the emulated cluster (the
    MPI_COMM_TYPE_SHARED sizes of MISREAD above; 2-D blocks of three or
    more block rows are misread too: a 8 x 4 grid's 2 x 2 blocks on 8 nodes
    gave sizes 4, 4, 6, 6, 6, 6, 6, 6 per node)."""
    length, read, defined = hydra_node_map(np.array(MISREAD))
    assert defined and length == len("(vector,[(0,2,1)]x2,[(2,2,1)]x2,[(0,2,1)]x2,[(2,2,1)]x2)")
    assert [int((read == read[r]).sum()) for r in range(16)] == [5] * 4 + [3] * 6 + [5] * 6
    assert not node_map_survives(np.array(MISREAD)) and node_map_survives(np.array(BLOCKS))
    grid = np.array([(r // 2) * 2 + c // 2 for r in range(8) for c in range(4)])
    read = hydra_node_map(grid)[1]
    assert [int((read == read[4 * node]).sum()) for node in range(8)] == [4, 4, 6, 6, 6, 6, 6, 6][:1] + [
        int((read == read[r]).sum()) for r in [4 * k for k in range(1, 8)]]
    assert not node_map_survives(grid)
    assert node_map_survives(np.arange(64) % 4) and node_map_survives(np.arange(64) // 16)  # hydra's own orders


def test_machinefile_forms_and_notes(tmp_path):
    topo = machine()
    contiguous_pe = on_nodes(topo, [k // 4 for k in range(16)][::-1])
    assert hydra_form(contiguous_pe, topo)[0] == "machinefile" and hydra_note(contiguous_pe, topo) is None
    written = write_all_launch_files(contiguous_pe, topo, tmp_path / "c")
    assert (tmp_path / "c" / "machinefile").read_text() == "cn04:4\ncn03:4\ncn02:4\ncn01:4\n"
    assert "hydra_rankmap" not in written

    blocks = on_nodes(topo, BLOCKS)
    assert hydra_form(blocks, topo)[0] == "rankmap" and hydra_note(blocks, topo) is None
    written = write_all_launch_files(blocks, topo, tmp_path / "b")
    text = (tmp_path / "b" / "machinefile").read_text().splitlines()
    assert text == [HYDRA_RANKMAP_COMMENT, "cn01:4", "cn02:4", "cn03:4", "cn04:4"]
    assert (tmp_path / "b" / "machinefile.rankmap").read_text() == "(0,2,2),(0,4,2),(2,2,2)\n"
    line = relaunch_lines(written, 16, "./app")[2]
    assert line.startswith(f'mpiexec -f {tmp_path / "b" / "machinefile"} -rankmap '
                           f'"$(cat {tmp_path / "b" / "machinefile.rankmap"})" -n 16 ')
    assert read_launch_file(tmp_path / "b" / "machinefile", 16).host == [HOSTS[h] for h in BLOCKS]

    misread = on_nodes(topo, MISREAD)
    assert hydra_form(misread, topo)[0] == "split"
    note = hydra_note(misread, topo)
    assert note.startswith("hydra: 4 of 4 hosts take several machinefile lines")
    write_all_launch_files(misread, topo, tmp_path / "b")  # the same directory: no stale -rankmap left
    assert not (tmp_path / "b" / "machinefile.rankmap").exists()
    assert (tmp_path / "b" / "machinefile").read_text().split() == [f"{HOSTS[h]}:1" for h in MISREAD]
    assert read_launch_file(tmp_path / "b" / "machinefile", 16).host == [HOSTS[h] for h in MISREAD]


def test_printed_line_words_as_the_shell_gives_them(tmp_path):
    topo = machine()
    written = write_all_launch_files(on_nodes(topo, BLOCKS), topo, tmp_path / "my launch")
    line = next(x for x in relaunch_lines(written, 16, "./app -x 1") if x.endswith("# MPICH (hydra)"))
    words = line_argv(line)
    shell = subprocess.run(["bash", "-c", f"printf '%s\\n' {line.split('#')[0]}"], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert words == shell and words[:5] == ["mpiexec", "-f", written["hydra"], "-rankmap",
                                            "(0,2,2),(0,4,2),(2,2,2)"]
    assert words[-3:] == ["./app", "-x", "1"]


def test_a_placement_hydra_cannot_start_is_said():
    """Over 1024 bytes of mapping string hydra's mpiexec crashes (a
    segmentation fault before any rank starts, MPICH 5.0.2, seen with 400
    ranks in runs of 1 to 3 on 4 hosts in turn): no hydra line starts it."""
    topo = topology_from_strings("128:4", "1:100")
    rng = np.random.default_rng(3)
    nodes = np.concatenate([np.full(rng.integers(1, 4), k % 4) for k in range(200)])  # 394 ranks
    pe = on_nodes_of(nodes, 128)
    assert hydra_form(pe, topo)[0] == "split"
    note = hydra_note(pe, topo)
    assert note.startswith("hydra cannot start this placement") and "Slurm or Open MPI" in note
    assert hydra_node_map(np.arange(1024) // 4)[0] < 100  # a block order of 256 hosts is short


def test_mend_swaps_few_ranks_where_it_costs_little():
    """Three ranks of each host talk much among themselves, the fourth
    little: MPICH misreads the placement, and swaps of the quiet ranks mend
    it for at most 1 % of J; where every rank talks much, nothing moves."""
    topo = machine(bound=False)
    misread = on_nodes(topo, MISREAD)
    quiet = [10, 9, 6, 5]  # one rank of each host talks little (swapping 6 and 9 mends it)
    hosts = [[r for r in range(16) if MISREAD[r] == h] for h in range(4)]
    loud_members = [[r for r in h if r not in quiet] for h in hosts]

    def cliques(members, weight):
        pairs = np.array([(a, b) for m in members for a in m for b in m if a != b])
        return pairs[:, 0], pairs[:, 1], np.full(len(pairs), weight)

    loud = cliques(loud_members, 1e9)
    all_ = cliques(hosts, 1e3)
    graph = CommGraph.from_edges(*(np.r_[x, y] for x, y in zip(loud, all_)), n=16)
    pe, swaps, rise = mend_for_hydra(graph, topo, misread)
    assert swaps >= 1 and 0 < rise <= 0.01 and hydra_form(pe, topo)[0] == "rankmap"
    assert set(np.flatnonzero(pe != misread).tolist()) <= set(quiet)
    heavy = CommGraph.from_edges(*cliques(hosts, 1e9), n=16)  # every move costs much
    same, swaps, rise = mend_for_hydra(heavy, topo, misread)
    assert swaps == 0 and rise == 0 and np.array_equal(same, misread)


def test_contiguous():
    assert contiguous(np.array([0, 0, 1, 1, 2])) and not contiguous(np.array([0, 1, 0]))


# ------------------------------------------------- on an emulated cluster
@pytest.fixture(scope="module")
def cluster():
    try:
        check_environment()
        c = EmulatedCluster(ClusterSpec(nodes=4, slots=4, bandwidth="500mbit", names="cn[01-04]")).up()
    except ClusterUnavailable as exc:
        pytest.skip(f"no emulated cluster on this machine: {exc}")
    yield c
    c.down()


def _build(tmp_path, mpi: str) -> Path:
    """whereami.c built with ``mpi``'s compiler wrapper (beside its launcher)."""
    launcher = find_launcher(mpi)
    cc = Path(launcher).parent / "mpicc" if launcher else None
    if cc is None or not cc.exists():
        pytest.skip(f"no {mpi} launcher with an mpicc beside it here")
    exe = tmp_path / f"whereami_{mpi}"
    subprocess.run([str(cc), "-O1", "-o", str(exe), str(PROGRAM)], check=True, timeout=300)
    return exe


def _run_printed(cluster, line: str, cwd) -> dict[int, tuple[str, list[int], int]]:
    """A printed relaunch line run on the cluster as a user does:
    ``rankmap cluster run NAME -- LINE`` in a shell; rank -> (host, CPUs, shared size)."""
    rankmap = shutil.which("rankmap") or f"{shlex.quote(sys.executable)} -m rankmap"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"}
    proc = subprocess.run(["bash", "-c", f"{rankmap} cluster run {cluster.name} -- {line.split('#')[0]}"],
                          capture_output=True, text=True, timeout=240, cwd=cwd, env=env)
    assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
    out = {}
    for row in proc.stdout.splitlines():
        if row.startswith("PLACE "):
            _, rank, host, cpus, shared = row.split()
            out[int(rank)] = (host, [int(c) for c in cpus.split(",")], int(shared))
    return out


@pytest.mark.mpi
@pytest.mark.slow
def test_printed_hydra_line_keeps_hosts_whole(cluster, tmp_path):
    exe = _build(tmp_path, "mpich")
    topo = machine()
    for name, nodes in (("blocks", BLOCKS), ("misread", MISREAD)):
        pe = on_nodes(topo, nodes)
        written = write_all_launch_files(pe, topo, tmp_path / name)
        line = next(x for x in relaunch_lines(written, 16, str(exe)) if x.endswith("# MPICH (hydra)"))
        got = _run_printed(cluster, line, tmp_path)
        assert sorted(got) == list(range(16))
        assert [got[r][:2] for r in range(16)] == [(HOSTS[nodes[r]], [int(pe[r] // 2) % 2]) for r in range(16)]
        if name == "blocks":  # -rankmap: one proxy per host, MPICH knows the hosts
            assert "-rankmap" in line and [got[r][2] for r in range(16)] == [4] * 16
        else:  # split: every rank shares memory with its machinefile line's ranks, no one else
            assert "-rankmap" not in line and [got[r][2] for r in range(16)] == [1] * 16


@pytest.mark.mpi
@pytest.mark.slow
def test_printed_open_mpi_line_runs_on_the_cluster(cluster, tmp_path):
    exe = _build(tmp_path, "openmpi")
    topo = machine()
    pe = on_nodes(topo, MISREAD)
    written = write_all_launch_files(pe, topo, tmp_path / "launch")
    line = next(x for x in relaunch_lines(written, 16, str(exe)) if x.endswith("# Open MPI 4"))
    got = _run_printed(cluster, line, tmp_path)
    assert [got[r][:2] for r in range(16)] == [(HOSTS[MISREAD[r]], [int(pe[r] // 2) % 2]) for r in range(16)]
    assert [got[r][2] for r in range(16)] == [4] * 16  # Open MPI keeps the hosts whole
