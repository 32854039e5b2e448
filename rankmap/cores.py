"""How many cores a mapping may use when the caller does not say.

A library call starts worker processes only for large instances; inside an
MPI program the ranks already own the cores, so there it keeps to one.
"""

from __future__ import annotations

import os
import sys

#: environment variables that MPICH/Hydra, Open MPI and PMIx launchers set in every rank
LAUNCHER_VARIABLES = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")


def available_cores() -> int:
    """The cores this process may run on (its affinity mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call on this platform
        return os.cpu_count() or 1


def in_mpi_job() -> bool:
    """Whether this process is an MPI rank: mpi4py initialised here, or a
    launcher's variables in the environment.  Never imports MPI."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        return True
    return any(v in os.environ for v in LAUNCHER_VARIABLES)


def default_workers() -> int:
    """Worker processes for a call that names none: the cores available,
    one inside an MPI job (a rank's children would compete with the other
    ranks for their cores)."""
    return 1 if in_mpi_job() else available_cores()


def workers_option(value) -> int:
    """``workers`` as given (an int or a CLI string), or the default."""
    return default_workers() if value is None else int(value)
