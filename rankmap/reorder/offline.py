"""The distributed refinement on a saved graph: ``mpiexec -n P rankmap map
TRACE --distributed``.

Rank 0 computes the start (the ``--method`` mapping; ``identity`` keeps the
recorded order), the tasks are spread over the ranks in blocks, each rank
keeps only the rows of its tasks and refines with the others through the swap
rounds, and rank 0 gathers the result.  Every rank reads the input file (the
rows it does not own are dropped after reading).
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from ..algorithms.label_swap import Labels, SwapRounds, block_tasks, rows_of_graph, symmetric_rows
from ..mapping import Mapping, validate_mapping
from .agree import ReorderFailed, root_step, step
from .exchange import MPIExchange


def refine_distributed(comm, graph, topology, pe_of_task, *, seed: int = 0, max_rounds: int = 50,
                       min_improvement: float = 1e-4, **swap_options):
    """Collective: swap rounds on ``graph`` from ``pe_of_task`` (known on
    every rank) with the tasks spread over ``comm``.  Returns the refined
    mapping on rank 0 (None elsewhere), the ``RoundsResult`` (this rank's
    labels) and this rank's memory use in bytes (rows + labels + largest
    exchange)."""
    size, rank = comm.Get_size(), comm.Get_rank()
    ex = MPIExchange(comm, graph.n)
    tasks = block_tasks(rank, graph.n, size)

    def setup():
        pe = np.asarray(pe_of_task, dtype=np.int64)
        validate_mapping(pe, graph, topology)
        if graph.n > topology.n_pes:
            raise ValueError("distributed refinement swaps tasks: it needs at most one task per PE")
        return pe[tasks], rows_of_graph(graph, tasks)

    my_pe, out_rows = step(comm, "distributed refinement setup", setup)
    rows = step(comm, "building the traffic rows", symmetric_rows, tasks, *out_rows, ex)
    rounds = SwapRounds(rows, Labels.of(topology, my_pe), ex, seed=seed, **swap_options)
    res = step(comm, "distributed refinement", rounds.run, max_rounds=max_rounds,
               min_improvement=min_improvement)
    state = sum(a.nbytes for a in (rows.tasks, rows.indptr, rows.cols, rows.weights,
                                   res.labels.pe, res.labels.anc, res.labels.dist))
    parts = comm.gather(res.labels.pe, root=0)
    full = np.concatenate(parts) if rank == 0 else None
    return full, res, state + ex.peak_bytes


def map_distributed(graph, topology, *, method: str = "identity", seed: int = 0, eps=None,
                    comm=None, **options) -> Mapping | None:
    """Collective: ``method`` on rank 0 as the start, then the distributed
    swap rounds.  Returns the ``Mapping`` on rank 0, None on other ranks;
    raises ``ValueError`` with the same message on every rank on failure."""
    from ..algorithms import map_tasks

    comm = MPI.COMM_WORLD if comm is None else comm
    if eps is not None or graph.n > topology.n_pes:
        raise ValueError("--distributed refines one-to-one mappings (no --eps, at most one task "
                         "per PE)")
    begin = time.perf_counter()
    try:
        start = root_step(comm, f"mapping with {method}",
                          lambda: map_tasks(graph, topology, method=method, seed=seed,
                                            **options).pe_of_task)
        start = comm.bcast(start, root=0)
        pe, res, _ = refine_distributed(comm, graph, topology, start, seed=seed)
    except ReorderFailed as exc:
        raise ValueError(str(exc)) from None
    if comm.Get_rank() != 0:
        return None
    return Mapping(pe, method=f"{method}+distributed swap rounds ({comm.Get_size()} ranks)",
                   seed=seed, time_s=time.perf_counter() - begin,
                   info={"rounds": res.rounds, "swaps": res.swaps, "J_start": res.J_before,
                         "J_refined": res.J_after})
