"""``replicas`` and ``kicks`` of the swap rounds at the user-facing entry
points: ``reorder_comm``, ``map_distributed`` and ``rankmap map --distributed``
(real ranks, oversubscribed), and their checks."""

import json
from pathlib import Path

import numpy as np
import pytest

import rankmap
from rankmap.algorithms.distributed.swap_rounds import refine_rounds, rounds_options
from rankmap.cli import main as cli_main
from mpi_util import ROOT, run_mpi
from test_distributed_mpi import _scrambled_grid

SCRIPT = str(Path(__file__).with_name("rounds_options_checks.py"))
HEAVY_YIELD = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"}  # oversubscribed ranks sleep, not spin


@pytest.mark.mpi
def test_reorder_comm_and_map_distributed_options_under_mpiexec():
    proc = run_mpi(8, [SCRIPT], timeout=90, env=HEAVY_YIELD)
    for name in ("distributed settings", "differing settings", "centralised rounds",
                 "bad reorder_comm values", "bad map_distributed values", "in step after errors"):
        assert f"CHECK {name} ok" in proc.stdout, f"{name}:\n{proc.stdout}\n{proc.stderr}"
    assert "ALL DONE" in proc.stdout


@pytest.mark.parametrize("replicas, kicks, word", [(0, 0, "replicas"), (-1, 0, "replicas"),
                                                    (1.0, 0, "replicas"), (True, 0, "replicas"),
                                                    (8, -1, "kicks"), (8, "2", "kicks")])
def test_rounds_options_reject_what_is_not_a_count(replicas, kicks, word):
    with pytest.raises(ValueError, match=word):
        rounds_options(replicas, kicks)
    assert rounds_options(np.int64(3), 0) == (3, 0)


MACHINE = ["--hierarchy", "4:4", "--distances", "1:10"]


@pytest.mark.mpi
def test_map_cli_distributed_replicas_and_kicks(tmp_path):
    g, path = _scrambled_grid(tmp_path)
    topo = rankmap.topology_from_strings("4:4", "1:10")
    proc = run_mpi(4, ["-m", "rankmap", "map", str(path), *MACHINE, "--method", "identity",
                       "--distributed", "--rounds-only", "--replicas", "1", "--kicks", "2", "--json"],
                   timeout=60, cwd=ROOT, env=HEAVY_YIELD)
    report = json.loads(proc.stdout)
    info = report["distributed"]
    assert (info["ranks"], info["replicas"], info["kicks"]) == (4, 1, 2)
    # the same decisions as the serial rounds with these settings (the
    # default settings give other statistics: the options reached every rank)
    pe, res = refine_rounds(g, topo, np.arange(16), seed=0, replicas=1, kicks=2)
    _, default = refine_rounds(g, topo, np.arange(16), seed=0)
    assert (res.rounds, res.swaps) != (default.rounds, default.swaps)
    assert report["pe_of_task"] == pe.tolist()
    assert (info["rounds"], info["swaps"]) == (res.rounds, res.swaps)
    assert report["J"] == pytest.approx(res.J_after) and report["J"] < report["J_before"]


LEAN_CLI = """
import sys
from mpi4py import MPI
from rankmap.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as exc:  # argparse rejects a bad value
    rc = exc.code
print(f"RANK {MPI.COMM_WORLD.Get_rank()} rc={rc}", flush=True)
"""


@pytest.mark.mpi
def test_map_cli_bad_value_fails_on_every_rank(tmp_path):
    _, path = _scrambled_grid(tmp_path)
    proc = run_mpi(2, ["-c", LEAN_CLI, "map", str(path), *MACHINE, "--distributed", "--kicks", "-1"],
                   timeout=60, cwd=ROOT, check=False, env=HEAVY_YIELD)
    for rank in range(2):
        assert f"RANK {rank} rc=2" in proc.stdout, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(lines) == 2 and len(set(lines)) == 1 and "--kicks" in lines[0], proc.stderr


@pytest.mark.parametrize("extra, named", [(["--replicas", "2"], "--replicas only applies"),
                                          (["--replicas", "2", "--kicks", "1"],
                                           "--replicas and --kicks only apply")])
def test_map_cli_rejects_rounds_options_without_distributed(tmp_path, capsys, extra, named):
    _, path = _scrambled_grid(tmp_path)
    assert cli_main(["map", str(path), *MACHINE, "--method", "identity", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and named in err and "--distributed" in err, err
