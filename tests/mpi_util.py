"""Run real MPI ranks from pytest: ``run_mpi(4, script)``.

The MPI is the one the environment gives: the ``mpiexec`` next to the running
Python (the ``mpich`` wheel puts hydra there), else the one on PATH (a site
MPI, e.g. Open MPI from Debian in CI's Open MPI lane, with mpi4py built
against it).  ``mpi_kind()`` says which; ``run_mpi`` adds what each needs to
run oversubscribed on a small machine (Open MPI: ``--oversubscribe``, core
binding with ``overload-allowed``, running as root when CI is root).
Every test that calls this must pass a ``timeout`` small enough that a hang
fails the test instead of the CI run.
"""

from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=None)
def mpi_kind(exe: str | None = None) -> str | None:
    """``"mpich"`` (hydra), ``"openmpi"`` or ``"other"`` for the mpiexec
    tests use; None when there is none."""
    exe = exe or mpiexec_path()
    if exe is None:
        return None
    try:
        text = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "other"
    if "HYDRA" in text:
        return "mpich"
    if "Open MPI" in text or "OpenRTE" in text:
        return "openmpi"
    return "other"


def launch_options(n: int, binding: str | None = None,
                   kind: str | None = None) -> tuple[list[str], dict]:
    """Launcher options and environment for ``n`` ranks on this machine
    (``kind`` of MPI: default ``mpi_kind()``); ``binding`` ``"core"`` or
    ``"none"`` (None: Open MPI by core, MPICH its default)."""
    env: dict[str, str] = {}
    if (kind or mpi_kind()) == "openmpi":
        opts = ["--oversubscribe"]
        if os.geteuid() == 0:  # CI runs as root; Open MPI refuses that unless told
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        if binding == "none":
            opts += ["--bind-to", "none"]
        else:  # by core, several ranks per core once there are more ranks than cores
            cores = len(os.sched_getaffinity(0))
            opts += ["--bind-to", "core" if n <= cores else "core:overload-allowed"]
        env["OMPI_MCA_mpi_yield_when_idle"] = "1"  # oversubscribed ranks yield the core
        return opts, env
    # MPICH: more ranks than cores, waiting ranks sleep instead of spinning, so
    # the rank doing the work (rank 0 mapping for all) gets a core (docs/guide.md)
    env["MPIR_CVAR_ENABLE_HEAVY_YIELD"] = "1"
    if binding is not None:
        env["HYDRA_BINDING"] = binding
    return [], env


def run_mpi(n: int, args: list[str], timeout: float = 120, env: dict | None = None,
            cwd: str | Path | None = None, check: bool = True,
            binding: str | None = None) -> subprocess.CompletedProcess:
    """Run ``mpiexec -n n python ARGS...``; ``args`` start with a script path
    or ``-m``/``-c``.  Fails the test (not the run) on a timeout."""
    exe = mpiexec_path()
    if exe is None:
        pytest.skip("no mpiexec: install the 'mpich' extra (pip install .[mpich]) or a site MPI")
    opts, launch_env = launch_options(n, binding)
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), full_env.get("PYTHONPATH", "")])
    for key, value in launch_env.items():
        full_env.setdefault(key, value)
    if env:
        full_env.update(env)
    cmd = [exe, *opts, "-n", str(n), sys.executable, *args]
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


def check_killed_run(out: Path, victim: int, tmp_path: Path) -> None:
    """After a profiled ring whose rank ``victim`` was SIGKILLed 3 flush
    intervals after every rank's first 10 x 1000 B (and 10 x 1000 B more):
    merge names the victim with the time its data stops at, the merged
    parts hold those first bytes of every rank and no more than all, and
    ``--strict`` fails."""
    import re

    import numpy as np

    from rankmap.trace import read_trace

    parts = Path(str(out) + ".parts")
    merge = subprocess.run([sys.executable, "-m", "rankmap", "merge", str(parts)],
                           capture_output=True, text=True, timeout=60)
    assert merge.returncode == 0, merge.stderr
    assert re.search(rf"rank {victim}: no finished marker \(killed unawares\); its data stops at",
                     merge.stdout), merge.stdout
    trace = read_trace(out, warn_missing=False)
    assert len(trace.missing_ranks) == 0
    sent = np.asarray(trace.graph("p2p").bytes.sum(axis=1)).ravel()
    assert np.all(sent >= 10_000) and np.all(sent <= 20_000), sent
    strict = subprocess.run([sys.executable, "-m", "rankmap", "merge", str(parts), "-o",
                             str(tmp_path / "s.rmtrace.npz"), "--strict"],
                            capture_output=True, text=True, timeout=60)
    assert strict.returncode == 2 and "did not finish (--strict)" in strict.stderr, strict.stderr


def run_mpi_per_rank_env(envs: list[dict], args: list[str], timeout: float = 180,
                         cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` as ``len(envs)`` ranks, rank r started with
    ``envs[r]`` set, as a launcher that binds each rank to its GPU starts
    them: one MPMD segment per rank (hydra's ``-env``, Open MPI's ``-x``).
    Fails the test on a timeout or a non-zero exit."""
    exe = mpiexec_path()
    if exe is None:
        pytest.skip("no mpiexec: install the 'mpich' extra (pip install .[mpich]) or a site MPI")
    opts, launch_env = launch_options(len(envs))
    cmd = [exe, *opts]
    for r, env in enumerate(envs):
        cmd += [":"] if r else []
        cmd += ["-n", "1"]
        for key, value in env.items():
            cmd += ["-x", f"{key}={value}"] if mpi_kind() == "openmpi" else ["-env", key, str(value)]
        cmd += [sys.executable, *args]
    full_env = {**os.environ, **launch_env,
                "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{len(envs)} ranks timed out after {timeout}s (hang?)\nstdout: {exc.stdout}\n"
                    f"stderr: {exc.stderr}")
    if proc.returncode != 0:
        pytest.fail(f"{len(envs)} ranks exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc
