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


#: entries of a pass below which threads are not worth starting
THREADED_MIN_ENTRIES = 1 << 20


def row_slices(indptr) -> list[tuple[int, int]]:
    """The rows of a CSR pass as [lo, hi) ranges of about equal entries,
    one per core available (``default_workers``), one range below
    THREADED_MIN_ENTRIES entries: the compiled passes over a large graph
    read it at random (one cache miss per pair), and several cores keep
    more misses in flight (J at 2^24 tasks: 2.0 s on one core, 1.0 s on two)."""
    import numpy as np

    n, m = len(indptr) - 1, int(indptr[-1])
    parts = 1 if m < THREADED_MIN_ENTRIES else max(min(default_workers(), n), 1)
    cuts = np.searchsorted(indptr, np.linspace(0, m, parts + 1)).clip(0, n)
    cuts[0], cuts[-1] = 0, n
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]


def on_threads(task, slices: list) -> list:
    """``task(lo, hi)`` for every slice, each on a thread of its own (the
    compiled kernels release the GIL), the results in order; inline for
    one slice."""
    if len(slices) == 1:
        return [task(*slices[0])]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(slices)) as pool:
        return list(pool.map(lambda s: task(*s), slices))
