"""reorder_comm under real ranks (oversubscribed): one launch per size runs
every check of ``reorder_mpi_checks.py`` (see there)."""

from pathlib import Path

import pytest

from mpi_util import run_mpi

SCRIPT = str(Path(__file__).with_name("reorder_mpi_checks.py"))
CHECKS = ["centralised", "distributed", "fallback bad-input", "fallback mapping",
          "fallback distributed", "fallback topology-mismatch", "cart", "dist-graph"]


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_reorder_comm_under_mpiexec(n):
    proc = run_mpi(n, [SCRIPT], timeout=90)
    out = proc.stdout
    for name in CHECKS:
        assert f"CHECK {name} ok" in out, f"{name} did not pass:\n{out}\n{proc.stderr}"
    assert "CHECK discovery ok" in out or "CHECK fallback discovery ok" in out
    assert "ALL DONE" in out
