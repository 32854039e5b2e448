"""The command that relaunches a program with a launch file rankmap wrote.

One recipe per launcher, as each one's documentation names its options:

- ``hydra``   MPICH's ``mpiexec -f MACHINEFILE -n P`` (ranks fill the
  machinefile's ``host:count`` lines in order).
- ``openmpi`` Open MPI 4: ``mpirun -n P --rankfile FILE``; Open MPI 5
  (PRRTE, where ``--rankfile`` is deprecated): ``mpirun -n P --map-by
  rankfile:file=FILE --bind-to core``.  Both bind each rank to the slot the
  rankfile names.
- ``slurm``   ``SLURM_HOSTFILE=FILE srun -n P --distribution=arbitrary``.
- ``mpich``   Cray MPICH reads ``MPICH_RANK_ORDER`` from the working
  directory when ``MPICH_RANK_REORDER_METHOD=3``.
- ``perm``    no launcher reads it; it is the KaHIP/VieM mapping file.
"""

from __future__ import annotations

import os
import shlex


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


def relaunch_commands(kind: str, path: str, n_ranks: int, program: str = "PROGRAM") -> list[str]:
    """Shell lines that relaunch ``program`` on ``n_ranks`` ranks with the
    ``kind`` launch file at ``path`` (several lines: alternatives, each
    with a ``#`` comment naming its launcher)."""
    f, n = shlex.quote(str(path)), int(n_ranks)
    if kind == "hydra":
        return [f"mpiexec -f {f} -n {n} {program}    # MPICH (hydra)"]
    if kind == "openmpi":
        return [f"mpirun -n {n} --rankfile {f} {program}    # Open MPI 4",
                f"mpirun -n {n} --map-by rankfile:file={f} --bind-to core {program}    # Open MPI 5"]
    if kind == "slurm":
        return [f"SLURM_HOSTFILE={f} srun -n {n} --distribution=arbitrary {program}    # Slurm"]
    if kind == "mpich":
        copy = [] if os.path.normpath(str(path)) == "MPICH_RANK_ORDER" else [
            f"cp {f} MPICH_RANK_ORDER    # Cray MPICH reads this name in the working directory"]
        return copy + [f"MPICH_RANK_REORDER_METHOD=3 srun -n {n} {program}    # Cray MPICH"]
    if kind == "perm":
        return []
    raise ValueError(f"unknown launch format {kind!r}")
