"""Run real MPI ranks from pytest: ``run_mpi(4, script)``.

Uses the ``mpiexec`` next to the running Python (the ``mpich`` wheel puts it
there) or the one on PATH; oversubscription is fine on a 2-core machine.
Every test that calls this must pass a ``timeout`` small enough that a hang
fails the test instead of the CI run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def mpiexec_path() -> str | None:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else shutil.which("mpiexec")


def run_mpi(n: int, args: list[str], timeout: float = 120, env: dict | None = None,
            cwd: str | Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``mpiexec -n n python ARGS...``; ``args`` start with a script path
    or ``-m``/``-c``.  Fails the test (not the run) on a timeout."""
    exe = mpiexec_path()
    if exe is None:
        pytest.skip("no mpiexec: install the 'mpich' extra (pip install .[mpich])")
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), full_env.get("PYTHONPATH", "")])
    # more ranks than cores: waiting ranks sleep instead of spinning, so the
    # rank doing the work (rank 0 mapping for all) gets a core (README)
    full_env.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
    if env:
        full_env.update(env)
    cmd = [exe, "-n", str(n), sys.executable, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=full_env, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"mpiexec -n {n} timed out after {timeout}s (hang?): {' '.join(cmd)}\n"
                    f"stdout: {exc.stdout}\nstderr: {exc.stderr}")
    if check and proc.returncode != 0:
        pytest.fail(f"mpiexec -n {n} exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
                    f"stderr:\n{proc.stderr}")
    return proc
