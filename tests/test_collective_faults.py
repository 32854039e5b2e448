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
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rankmap.trace import read_trace
from tests.mpi_util import run_mpi

pytestmark = pytest.mark.mpi
SCRIPTS = Path(__file__).parent / "mpi_scripts"
#: cases run with the fault on every rank, and those where only rank 0 can be faulty
EVERY_RANK = 25
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
    parts = Path(str(out) + ".parts")
    merge = subprocess.run([sys.executable, "-m", "rankmap", "merge", str(parts)],
                           capture_output=True, text=True, timeout=60)
    assert merge.returncode == 0, merge.stderr
    assert re.search(rf"rank {victim}: no finished marker \(killed unawares\); its data stops at",
                     merge.stdout), merge.stdout
    trace = read_trace(out, warn_missing=False)
    assert len(trace.missing_ranks) == 0
    sent = np.asarray(trace.graph("p2p").bytes.sum(axis=1)).ravel()
    # the first 10 x 1000 B of every rank were sent 3 flush intervals before the kill
    assert np.all(sent >= 10_000) and np.all(sent <= 20_000), sent
    strict = subprocess.run([sys.executable, "-m", "rankmap", "merge", str(parts), "-o",
                             str(tmp_path / "s.rmtrace.npz"), "--strict"],
                            capture_output=True, text=True, timeout=60)
    assert strict.returncode == 2 and "did not finish (--strict)" in strict.stderr, strict.stderr
