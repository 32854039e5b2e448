"""The command that relaunches a program with a launch file rankmap wrote.

One recipe per launcher, as each one's documentation names its options:

- ``hydra``   MPICH's ``mpiexec -f MACHINEFILE -n P`` (ranks fill the
  machinefile's ``host:count`` lines in order), with ``-rankmap "$(cat
  MACHINEFILE.rankmap)"`` where that file places them (``formats.hydra``).
- ``openmpi`` Open MPI 4: ``mpirun -n P --rankfile FILE``; Open MPI 5
  (PRRTE, where ``--rankfile`` is deprecated): ``mpirun -n P --map-by
  rankfile:file=FILE``.
- ``slurm``   ``SLURM_HOSTFILE=FILE srun -n P --distribution=arbitrary``.
- ``mpich``   Cray MPICH reads ``MPICH_RANK_ORDER`` from the working
  directory when ``MPICH_RANK_REORDER_METHOD=3``.
- ``perm`` and ``bind``: no launcher reads them on their own (the KaHIP/VieM
  mapping file; ``rankmap-bind``'s bindings).

The launch files place ranks on hosts; every line starts the program
through ``rankmap-bind`` with the bindings, which puts each rank on its CPUs
and GPU inside the host, so the launcher's own binding is switched off
(``--bind-to none``, ``--cpu-bind=none``; hydra binds nothing unless asked).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from pathlib import Path


def program_of(argv) -> str:
    """The relaunched program from a trace's recorded argv: a Python script
    (or ``-m module``, ``-c command``) under ``python``, a compiled program
    as it was recorded; ``PROGRAM`` when unknown."""
    if not argv:
        return "PROGRAM"
    words = [str(a) for a in argv]
    if words[0].endswith(".py") or words[0] in ("-m", "-c"):
        return "python " + shlex.join(words)
    return shlex.join(words)


def bind_command() -> str:
    """How the relaunch line starts ``rankmap-bind`` so that it runs as
    printed: its bare name where PATH finds this installation's script, else
    that script's full path, else this Python with ``-m rankmap.bind``."""
    script = Path(sys.executable).parent / "rankmap-bind"
    found = shutil.which("rankmap-bind")
    if found is not None and script.is_file() and Path(found).resolve() == script.resolve():
        return "rankmap-bind"
    if script.is_file():
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m rankmap.bind"


def bound(program: str, bindings: str | None) -> str:
    """``program`` started through ``rankmap-bind`` with ``bindings``."""
    if bindings is None:
        return program
    return f"{bind_command()} {shlex.quote(str(bindings))} -- {program}"


def relaunch_commands(kind: str, path: str, n_ranks: int, program: str = "PROGRAM",
                      bindings: str | None = None, rankmap: str | None = None) -> list[str]:
    """Shell lines that relaunch ``program`` on ``n_ranks`` ranks with the
    ``kind`` launch file at ``path`` and, when given, the ``bindings`` file
    and hydra's ``rankmap`` file (several lines: alternatives, each with a
    ``#`` comment naming its launcher)."""
    f, n = shlex.quote(str(path)), int(n_ranks)
    run = bound(program, bindings)
    if kind == "hydra":
        placed = f' -rankmap "$(cat {shlex.quote(str(rankmap))})"' if rankmap else ""
        return [f"mpiexec -f {f}{placed} -n {n} {run}    # MPICH (hydra)"]
    if kind == "openmpi":
        binding = "--bind-to none" if bindings is not None else "--bind-to core"
        v4 = f"mpirun -n {n} --rankfile {f}" + (" --bind-to none" if bindings is not None else "")
        return [f"{v4} {run}    # Open MPI 4",
                f"mpirun -n {n} --map-by rankfile:file={f} {binding} {run}    # Open MPI 5"]
    cpu_bind = " --cpu-bind=none" if bindings is not None else ""
    if kind == "slurm":
        return [f"SLURM_HOSTFILE={f} srun -n {n} --distribution=arbitrary{cpu_bind} {run}    # Slurm"]
    if kind == "mpich":
        copy = [] if os.path.normpath(str(path)) == "MPICH_RANK_ORDER" else [
            f"cp {f} MPICH_RANK_ORDER    # Cray MPICH reads this name in the working directory"]
        return copy + [f"MPICH_RANK_REORDER_METHOD=3 srun -n {n}{cpu_bind} {run}    # Cray MPICH"]
    if kind in ("perm", "bind", "hydra_rankmap"):
        return []
    raise ValueError(f"unknown launch format {kind!r}")


def relaunch_lines(written: dict, n_ranks: int, program: str = "PROGRAM") -> list[str]:
    """The relaunch lines for every launch file of ``written`` (format ->
    path), each through the bindings among them."""
    bindings, rankmap = written.get("bind"), written.get("hydra_rankmap")
    return [line for kind, path in written.items()
            for line in relaunch_commands(kind, path, n_ranks, program, bindings, rankmap)]


_CAT = re.compile(r"^\$\(cat (.+)\)$")


def line_argv(line: str) -> list[str]:
    """The words a shell hands the launcher for a printed relaunch line:
    its ``#`` comment dropped, quotes removed, ``$(cat FILE)`` read (the
    ``-rankmap`` of hydra's line), for running a line without a shell."""
    words = shlex.split(line.split("  #", 1)[0])
    out = []
    for word in words:
        m = _CAT.match(word)
        if m:
            path = shlex.split(m.group(1))[0]
            with open(path, encoding="utf-8") as fh:
                word = fh.read().strip()
        out.append(word)
    return out

