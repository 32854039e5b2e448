"""The distributed refinement with real ranks (oversubscribed): the offline
path (``refine_distributed``, ``rankmap map --distributed``)."""

import json
from pathlib import Path

import numpy as np
import pytest

from mpi_util import ROOT, run_mpi

SCRIPTS = Path(__file__).parent / "mpi_scripts"
#: the swap rounds alone, and the multilevel path (several coarse levels)
RUNS = {"rounds": ("distributed_offline.py", ("same-as-serial", "exact-J", "lean-ranks"), [2, 4, 8, 16]),
        "multilevel": ("multilevel_offline.py", ("same-as-serial", "levels", "exact-J"), [2, 3, 8, 16])}


@pytest.mark.mpi
@pytest.mark.parametrize("kind, n", [(k, n) for k, (_, _, ns) in RUNS.items() for n in ns])
def test_distributed_equals_the_serial_run_on_every_rank(kind, n):
    script, checks, _ = RUNS[kind]
    out = run_mpi(n, [str(SCRIPTS / script)], timeout=600).stdout
    for name in checks:
        assert f"CHECK {name} ok" in out, out


def _scrambled_grid(tmp_path):
    import rankmap
    from rankmap.formats import write_graph

    grid = np.arange(16).reshape(4, 4)
    src = np.concatenate([grid[:-1].ravel(), grid[:, :-1].ravel()])
    dst = np.concatenate([grid[1:].ravel(), grid[:, 1:].ravel()])
    order = np.random.default_rng(1).permutation(16)  # scrambled: the launch order is bad
    g = rankmap.CommGraph.from_edges(order[np.concatenate([src, dst])], order[np.concatenate([dst, src])],
                                     np.full(2 * len(src), 100.0), n=16)
    path = tmp_path / "grid.edges"
    write_graph(g, str(path))
    return g, path


@pytest.mark.mpi
def test_map_cli_distributed(tmp_path):
    import rankmap

    g, path = _scrambled_grid(tmp_path)
    proc = run_mpi(4, ["-m", "rankmap", "map", str(path), "--hierarchy", "4:4", "--distances", "1:10",
                       "--method", "identity", "--distributed", "--json"], timeout=120, cwd=ROOT)
    report = json.loads(proc.stdout)
    assert sorted(report["pe_of_task"]) == list(range(16))
    assert report["J"] < report["J_before"]
    assert report["J"] == pytest.approx(rankmap.mapping_cost(g, rankmap.topology_from_strings("4:4", "1:10"),
                                                             report["pe_of_task"]))
    assert report["distributed"]["level_sizes"][0] == 16


@pytest.mark.mpi
def test_map_cli_distributed_rounds_only(tmp_path):
    g, path = _scrambled_grid(tmp_path)
    proc = run_mpi(4, ["-m", "rankmap", "map", str(path), "--hierarchy", "4:4", "--distances", "1:10",
                       "--method", "identity", "--distributed", "--rounds-only"], timeout=120, cwd=ROOT)
    assert "distributed swap rounds on 4 ranks" in proc.stdout, proc.stdout


LEAN_CLI = """
import sys
from mpi4py import MPI
from rankmap.cli import main
rc = main(sys.argv[1:])
heavy = sorted(m for m in ("rankmap.algorithms.refine._kernels", "kahip", "mtkahypar") if m in sys.modules)
print(f"RANK {MPI.COMM_WORLD.Get_rank()} rc={rc} heavy={','.join(heavy) or '-'}", flush=True)
"""


@pytest.mark.mpi
def test_map_cli_distributed_ranks_stay_lean(tmp_path):
    _, path = _scrambled_grid(tmp_path)
    out = run_mpi(4, ["-c", LEAN_CLI, "map", str(path), "--hierarchy", "4:4", "--distances", "1:10",
                      "--method", "greedy", "--distributed", "--json"], timeout=120, cwd=ROOT).stdout
    for rank in (1, 2, 3):  # only rank 0 reads the input and runs the start method
        assert f"RANK {rank} rc=0 heavy=-" in out, out
    assert "RANK 0 rc=0" in out, out


@pytest.mark.mpi
@pytest.mark.parametrize("problem", ["missing file", "malformed file", "unknown method"])
def test_map_cli_distributed_bad_input_fails_on_every_rank(tmp_path, problem):
    path = tmp_path / "bad.edges"
    method = "identity"
    if problem == "malformed file":
        path.write_text("0 1 100\n1 two 5\n")
    elif problem == "unknown method":
        _, path = _scrambled_grid(tmp_path)
        method = "no_such_method"
    out = run_mpi(4, ["-c", LEAN_CLI, "map", str(path), "--hierarchy", "4:4", "--distances", "1:10",
                      "--method", method, "--distributed"], timeout=120, cwd=ROOT, check=False)
    for rank in range(4):  # every rank returns the error code: none waits for the others
        assert f"RANK {rank} rc=2" in out.stdout, out.stdout + out.stderr
    assert out.stderr.count("rankmap map: error:") == 4, out.stderr
