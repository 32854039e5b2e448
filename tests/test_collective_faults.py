"""Collective failure paths with real ranks (no hang, the same outcome on
every rank), the profiler's end, and a rank killed mid-run.

``mpi_scripts/collective_faults.py`` runs every fault case of every
collective entry point (``reorder_comm``, ``reorder_cart``,
``reorder_dist_graph``, ``rankmap map --distributed``, the profiler's start
and finish) with the fault on each rank in turn, in one launch per size; a
hang fails the test through the launch timeout.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.mpi_util import check_killed_run, run_mpi

pytestmark = pytest.mark.mpi
SCRIPTS = Path(__file__).parent / "mpi_scripts"
#: cases run with the fault on every rank, and those where only rank 0 can be faulty
EVERY_RANK = 39
RANK0_ONLY = 7


@pytest.mark.parametrize("n", [2, 4, 8])
def test_every_fault_on_every_rank_gives_one_outcome(n):
    proc = run_mpi(n, [str(SCRIPTS / "collective_faults.py")], timeout=300)
    cases = re.findall(r"^CASE (\S+) k=(\d+) (ok|BAD) (.*)$", proc.stdout, re.M)
    bad = [c for c in cases if c[2] != "ok"]
    assert not bad, "\n".join(" ".join(c) for c in bad)
    assert len(cases) == EVERY_RANK * n + RANK0_ONLY, proc.stdout
    assert {int(k) for _name, k, _ok, _out in cases} == set(range(n))
    assert f"FAULT CASES {len(cases)} BAD 0" in proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr


def test_profile_output_naming_a_directory_stops_every_rank(tmp_path):
    proc = run_mpi(2, ["-m", "rankmap.profile", "-o", str(tmp_path), "-c", "print('ran')"],
                   timeout=90, cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "ran" not in proc.stdout  # refused before the program runs
    lines = [line for line in proc.stderr.splitlines() if line.startswith("rankmap.profile")]
    assert len(lines) == 1 and "is a directory" in lines[0] and str(tmp_path) in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("victim", [0, 2])
def test_killed_rank_loses_at_most_its_last_flush_interval(tmp_path, victim):
    """One rank SIGKILLed mid-run (hydra then SIGKILLs the others): the
    merged parts hold every rank's traffic older than the flush interval,
    and merge names the ranks that did not finish with the time their data
    stops at; ``--strict`` fails."""
    n, interval = 4, 0.2
    out = tmp_path / "run.rmtrace.npz"
    proc = run_mpi(n, ["-m", "rankmap.profile", "-o", str(out), "--no-topology",
                       "--flush-interval", str(interval), str(SCRIPTS / "profile_kill.py"),
                       str(victim), str(interval)], timeout=120, cwd=tmp_path, check=False)
    assert proc.returncode != 0
    check_killed_run(out, victim, tmp_path)
