"""The distributed refinement on a saved graph: ``mpiexec -n P rankmap map
TRACE --distributed``.

Rank 0 computes the start (the ``--method`` mapping; ``identity`` keeps the
recorded order) and sends every rank the rows of its block of tasks and their
PE labels; from then on no rank holds more than its own rows and its
neighbours' labels, the rounds run, and rank 0 gathers the result.  Ranks
other than 0 need neither the graph nor the topology (nor scipy).
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from ..algorithms.distributed.multilevel import Multilevel, level_caps
from ..algorithms.distributed.swap_rounds import (MAX_ROUNDS, REPLICAS, Labels, SwapRounds, block_tasks,
                                                  rounds_options, rows_of_graph)
from ..deadline import Deadline
from ..mapping import Mapping, validate_mapping
from .agree import ReorderFailed, agreed_arguments, root_step, step
from .exchange import MPIExchange, agreed_symmetric_rows


def _blocks_on_root(graph, topology, pe_of_task, size: int) -> list:
    """Rank 0: per rank, (out-rows indptr, columns, bytes, packed PE labels)
    of its block of tasks."""
    pe = np.asarray(pe_of_task, dtype=np.int64)
    validate_mapping(pe, graph, topology)
    if graph.n > topology.n_pes:
        raise ValueError("distributed refinement swaps tasks: it needs at most one task per PE")
    labels = Labels.of(topology, pe)
    out = []
    for r in range(size):
        tasks = block_tasks(r, graph.n, size)
        out.append((graph.n, labels.anc.shape[1], *rows_of_graph(graph, tasks), labels.pack(tasks)))
    return out


def _scatter_rows(comm, graph, topology, pe_of_task):
    """Collective: every rank's block of tasks, their symmetric rows and PE
    labels (rank 0 reads ``graph``, ``topology`` and ``pe_of_task``), and
    the machine's level caps for the multilevel coarsening."""
    size, rank = comm.Get_size(), comm.Get_rank()

    def setup():
        return _blocks_on_root(graph, topology, pe_of_task, size), level_caps(topology)

    got = root_step(comm, "distributed refinement setup", setup)
    blocks, caps = got if got is not None else (None, None)
    n, levels, indptr, cols, nbytes, packed = comm.scatter(blocks, root=0)
    caps = comm.bcast(caps, root=0)
    del blocks
    ex = MPIExchange(comm, n)
    tasks = block_tasks(rank, n, size)
    rows = agreed_symmetric_rows(comm, tasks, indptr, cols, nbytes, ex)
    return ex, rows, Labels.unpack(packed, levels), caps


def refine_distributed(comm, graph, topology, pe_of_task, *, seed: int = 0,
                       max_rounds: int = MAX_ROUNDS, min_improvement: float = 1e-4,
                       replicas: int = REPLICAS, kicks: int = 0, kick_fraction: float = 0.1,
                       deadline: Deadline | None = None, **swap_options):
    """Collective: swap rounds on ``graph`` from ``pe_of_task`` with the tasks
    spread over ``comm`` in blocks.  ``graph``, ``topology`` and
    ``pe_of_task`` are read on rank 0 only (pass None elsewhere); the other
    settings must be the same on every rank (``replicas`` >= 1 and ``kicks``
    >= 0 are checked on every rank: ``ValueError`` everywhere).  Returns
    the refined mapping on rank 0 (None elsewhere), the ``RoundsResult``
    (this rank's labels) and this rank's memory use in bytes (its rows, its
    labels, the neighbour labels of a round and its largest exchange).
    Rank 0's ``deadline`` ends the rounds on every rank."""
    rank = comm.Get_rank()
    replicas, kicks = agreed_arguments(comm, rounds_options, replicas, kicks)
    ex, rows, labels, _caps = _scatter_rows(comm, graph, topology, pe_of_task)
    levels = labels.anc.shape[1]
    rounds = SwapRounds(rows, labels, ex, seed=seed, replicas=replicas, **swap_options)
    res = step(comm, "distributed refinement", rounds.run, max_rounds=max_rounds,
               min_improvement=min_improvement, kicks=kicks, kick_fraction=kick_fraction, deadline=deadline)
    work = rounds.rows  # the replicated rows and labels the rounds worked on
    own = sum(a.nbytes for a in (work.tasks, work.indptr, work.cols, work.weights,
                                 rounds.labels.pe, rounds.labels.anc, rounds.labels.dist))
    neighbour_labels = len(work.cols) * (1 + 2 * levels) * 8
    parts = comm.gather(res.labels.pe, root=0)
    full = np.concatenate(parts) if rank == 0 else None
    return full, res, own + neighbour_labels + ex.peak_bytes


def multilevel_distributed(comm, graph, topology, pe_of_task, *, seed: int = 0,
                           replicas: int = REPLICAS, kicks: int = 0, deadline: Deadline | None = None,
                           **options):
    """Collective: the distributed multilevel mapping
    (``algorithms.distributed.multilevel``) of ``graph`` with the tasks
    spread over ``comm`` in blocks, never worse than ``pe_of_task``.
    ``graph``, ``topology`` and ``pe_of_task`` are read on rank 0 only, which
    also maps the coarse graph.  Returns the mapping on rank 0 (None
    elsewhere), the ``MultilevelResult`` (this rank's labels) and this
    rank's largest exchange buffer in bytes."""
    rank = comm.Get_rank()
    replicas, kicks = agreed_arguments(comm, rounds_options, replicas, kicks)
    ex, rows, labels, caps = _scatter_rows(comm, graph, topology, pe_of_task)
    ml = Multilevel(rows, labels, ex, caps, topology if rank == 0 else None, seed=seed,
                    replicas=replicas, kicks=kicks, deadline=deadline, **options)
    res = step(comm, "distributed multilevel mapping", ml.run)
    parts = comm.gather(res.labels.pe, root=0)
    full = np.concatenate(parts) if rank == 0 else None
    return full, res, ex.peak_bytes


def map_distributed(graph, topology, *, method: str = "identity", seed: int = 0, eps=None,
                    comm=None, replicas: int = REPLICAS, kicks: int = 0, multilevel: bool = True,
                    deadline: Deadline | None = None, **options) -> Mapping | None:
    """Collective: ``method`` on rank 0 as the start, then the distributed
    multilevel mapping (never worse than the start; ``multilevel=False``:
    the distributed swap rounds from the start) with ``replicas`` copies per
    round and ``kicks`` (see ``rankmap.reorder_comm``).  ``graph`` and ``topology`` are read on rank 0
    only (pass None elsewhere).  Returns the ``Mapping`` on rank 0, None on
    other ranks; raises ``ValueError`` with the same message on every rank
    on failure.  Option ``time_limit`` bounds the whole call by rank 0's
    clock (``deadline``: one that started earlier, as ``map_tasks`` takes)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    deadline = Deadline(options.get("time_limit")) if deadline is None else deadline
    replicas, kicks = agreed_arguments(comm, rounds_options, replicas, kicks)
    if eps is not None:
        raise ValueError("--distributed refines one-to-one mappings (no --eps)")

    def start_mapping():
        from ..algorithms import map_tasks

        if graph.n > topology.n_pes:
            raise ValueError(f"--distributed refines one-to-one mappings: {graph.n} tasks on "
                             f"{topology.n_pes} PEs")
        # J alone: the rounds descend in J, the link time comes after them (rankmap map --distributed)
        return map_tasks(graph, topology, method=method, seed=seed, deadline=deadline, objective="sum",
                         **options).pe_of_task

    begin = time.perf_counter()
    # GPU nodes: the rounds run on the tree approximating each node's links,
    # rank 0 then settles every node on the true distances
    tree = topology.tree_only() if getattr(topology, "has_links", False) else topology
    try:
        start = root_step(comm, f"mapping with {method}", start_mapping)
        if multilevel:
            pe, res, _ = multilevel_distributed(comm, graph, tree, start, seed=seed,
                                                replicas=replicas, kicks=kicks, deadline=deadline)
        else:
            pe, res, _ = refine_distributed(comm, graph, tree, start, seed=seed,
                                            replicas=replicas, kicks=kicks, deadline=deadline)
    except ReorderFailed as exc:
        raise ValueError(str(exc)) from None
    if comm.Get_rank() != 0:
        return None
    if tree is not topology:
        from ..algorithms.refine.within_nodes import place_within_nodes
        from ..cost import mapping_cost

        pe = place_within_nodes(graph, topology, pe, deadline)
        if mapping_cost(graph, topology, start) < mapping_cost(graph, topology, pe):
            pe = start
    info = {"ranks": comm.Get_size(), "replicas": replicas, "kicks": kicks, "rounds": res.rounds,
            "J_start": res.J_before, "J_refined": res.J_after}
    if multilevel:
        what = "distributed multilevel"
        info.update(swaps=res.refine.swaps, level_sizes=res.level_sizes,
                    coarsening_rounds=res.coarsening_rounds, refine_rounds=res.refine.rounds,
                    kept_start=res.kept_start)
    else:
        what = "distributed swap rounds"
        info.update(swaps=res.swaps)
    return Mapping(pe, method=f"{method}+{what} ({comm.Get_size()} ranks)", seed=seed,
                   time_s=time.perf_counter() - begin,
                   deadline_hit=deadline.hit or res.deadline_hit, info=info)
