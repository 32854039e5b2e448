"""How many cores a mapping may use when the caller does not say.

Worker processes (multisection) and threads (swap refinement) default to
the cores of this process's affinity mask; in a rank of an MPI job of
several ranks the ranks already own the cores, so there one.
"""

from __future__ import annotations

import os
import sys

#: what MPI launchers (Open MPI, MPICH's hydra and Intel MPI, MVAPICH) tell each rank of the job's size
MPI_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")


def available_cores() -> int:
    """The cores this process may run on (its affinity mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call on this platform
        return os.cpu_count() or 1


def in_mpi_job() -> bool:
    """Whether this process is one of several ranks of an MPI job: mpi4py
    initialised here with more than one rank, or a launcher's size
    variable above 1.  Never imports MPI."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized() and mpi.COMM_WORLD.Get_size() > 1:
        return True
    for name in MPI_SIZE_VARIABLES:
        try:
            if int(os.environ.get(name, "1")) > 1:
                return True
        except ValueError:
            continue
    return False


def default_workers() -> int:
    """Worker processes or threads for a call that names none: the cores
    available, one in a rank of an MPI job (its children would compete with
    the other ranks for their cores)."""
    return 1 if in_mpi_job() else available_cores()


def workers_option(value) -> int:
    """``workers`` as given (an int or a CLI string), or the default."""
    return default_workers() if value is None else int(value)
