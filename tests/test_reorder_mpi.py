"""reorder_comm under real ranks (oversubscribed): one launch per size runs
every check of ``reorder_mpi_checks.py`` (see there)."""

import json
import os
import re
from pathlib import Path

import pytest

from mpi_util import run_mpi

SCRIPT = str(Path(__file__).with_name("reorder_mpi_checks.py"))
CHECKS = ["centralised", "distributed", "fallback bad-input", "fallback mapping",
          "fallback distributed", "fallback topology-mismatch", "cart", "dist-graph",
          "deadline centralised", "deadline distributed", "waiting sleeps", "waiting failure"]


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_reorder_comm_under_mpiexec(n):
    proc = run_mpi(n, [SCRIPT], timeout=240)  # 16 ranks at load 20: about 100 s
    out = proc.stdout
    for name in CHECKS:
        assert f"CHECK {name} ok" in out, f"{name} did not pass:\n{out}\n{proc.stderr}"
    assert "CHECK discovery ok" in out or "CHECK fallback discovery ok" in out
    assert "ALL DONE" in out


@pytest.mark.mpi
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to bind two ranks apart")
@pytest.mark.parametrize("binding", ["core", "none"])
def test_discovery_follows_the_binding(binding):
    """Automatic discovery on this host: ranks bound to distinct cores are
    placed by core, without a warning; unbound ranks at node granularity,
    with one (``--bind-to`` of Open MPI, ``HYDRA_BINDING`` of MPICH)."""
    proc = run_mpi(2, [SCRIPT, "binding"], timeout=60, binding=binding)
    found = re.search(r"CHECK binding warned=(\w+) slots=(\[.*?\]) distance01=(\S+)", proc.stdout)
    assert found, proc.stdout + proc.stderr
    warned, slots = found.group(1) == "True", json.loads(found.group(2))
    assert sorted(slots) == [0, 1]
    assert warned == (binding == "none")
    assert float(found.group(3)) > 0  # two processes on two cores (or one node) are apart
