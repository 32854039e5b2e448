"""``reorder_comm``: one collective call returns a communicator whose ranks are
placed well on the machine the job runs on.

New rank t takes over task t: the role that old rank t declared its traffic
for, now on the slot chosen for it.  A program that derives its work from its
rank (a domain decomposition, neighbour lists computed from the rank) just
carries on with the new communicator: its neighbour lists, in task numbers,
are new ranks.  Data a process already holds belongs to its old role;
``newcomm.carry(obj)`` hands it to the process that now plays that role, and
``newcomm.old_to_new(ranks)`` names processes across the two numberings.

Safety: every step is agreed by all ranks before anyone goes on (``agree``);
if anything fails on any rank, every rank returns a duplicate of the original
communicator, ``newcomm.reorder.fallback`` is True and every rank warns with
the same message.  The permutation is checked before ``Split``.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from ..algorithms.distributed.multilevel import COARSE_TIME_LIMIT, Multilevel, level_caps
from ..algorithms.distributed.swap_rounds import MAX_ROUNDS, REPLICAS, SwapRounds, refine_rounds
from ..algorithms import AUTO_FIRST_CALL, auto_loaded, objective_of
from ..algorithms.refine.swaps import swap_refine
from ..cost import link_time, mapping_cost
from ..deadline import Deadline
from ..graph import CommGraph
from ..mapping import validate_mapping
from .arguments import cart_arguments, dist_graph_arguments, reorder_settings
from .agree import RankmapWarning, ReorderFailed, agreed_arguments, root_step, step, warn_once
from .exchange import MPIExchange, agreed_symmetric_rows
from .gpus import gpu_slots, gpus_argument, use_gpu
from .placement import locate
from .traffic import own_row

#: above this many ranks the permutation is computed without gathering the
#: graph on one rank (``distributed=None``)
CENTRALISED_MAX = 4096

#: seconds a call may take inside a running program, unless ``options``
#: gives ``time_limit``: auto's counted budget and the wall-clock deadline
#: of the whole call, every method (plus auto's one-time start on a first
#: call, ``call_seconds``; auto's own default is for offline mapping).  Measured on 2 cores at load
#: ~24 (benchmarks in the report): auto took 14 s / 66 s / 10 s at P = 64 /
#: 256 / 1024 with 10 s, 2.8 s / 0.6 s / 2.7 s with 0.2 s, J within 1%.
IN_PROGRAM_TIME_LIMIT = 0.5

def call_seconds(options: dict, method: str) -> float:
    """The wall-clock bound of one call: the ``time_limit`` the caller gave,
    else IN_PROGRAM_TIME_LIMIT plus, while this process has not loaded auto,
    auto's one-time start (``AUTO_FIRST_CALL``): without it
    the default could never pay that start, and a first call would always
    keep the given order."""
    if "time_limit" in options:
        return float(options["time_limit"])
    if method == "auto" and not auto_loaded():
        return IN_PROGRAM_TIME_LIMIT + AUTO_FIRST_CALL
    return IN_PROGRAM_TIME_LIMIT


#: ``options`` that the distributed multilevel path takes (rank 0's values)
MULTILEVEL_OPTIONS = ("coarse_max", "coarse_time_limit", "set_size")
#: the share of the call's time limit that is the coarse mapping's budget, unless ``coarse_time_limit`` is given
COARSE_SHARE = 0.5

#: methods whose result is already swap-refined: ``refine="auto"`` skips them
ALREADY_REFINED = ("auto", "swap")


@dataclass(frozen=True)
class ReorderInfo:
    """What ``reorder_comm`` did; identical on every rank except the ranks."""

    fallback: bool          # True: the original order was kept because something failed
    reason: str | None      # the failure (same text on every rank), else None
    path: str               # "centralised", "distributed" or "none"
    method: str             # mapping method and refinement used
    J_before: float         # bytes x distance of the original order
    J_after: float          # ... of the new order (== J_before on fallback)
    old_rank: int
    new_rank: int
    rounds: int = 0         # distributed refinement rounds
    swaps: int = 0          # pairs swapped by the distributed refinement (all copies, kicks too)
    topology: str = ""      # "given", "discovered" or "gpus (NODE)"
    time_s: float = 0.0
    deadline_hit: bool = False  # rank 0's deadline cut the search (the same on every rank)
    objective: str = ""     # what the centralised path optimised ("time", "sum", "bottleneck")
    link_time_before: float = float("nan")  # the busiest link's bytes over bandwidth, original order
    link_time_after: float = float("nan")   # ... new order (centralised path; relative without bandwidths)
    device: str | None = None  # on GPU slots: the GPU this process opens for its new rank ("rocr:5")

    @property
    def improvement(self) -> float:
        """Fraction of J saved (0 when nothing changed)."""
        return 1.0 - self.J_after / self.J_before if self.J_before else 0.0


class _Reordered:
    """Methods every reordered communicator has (mixed into mpi4py classes)."""

    reorder: ReorderInfo
    _old_group: MPI.Group

    def old_to_new(self, old_ranks) -> np.ndarray:
        """New ranks of the processes that had ``old_ranks``."""
        return self._translate(self._old_group, old_ranks, into_new=True)

    def new_to_old(self, new_ranks) -> np.ndarray:
        """Old ranks of the processes that have ``new_ranks``."""
        return self._translate(self._old_group, new_ranks, into_new=False)

    def _translate(self, old_group, ranks, into_new: bool) -> np.ndarray:
        new_group = self.Get_group()
        try:
            a, b = (old_group, new_group) if into_new else (new_group, old_group)
            ranks = np.atleast_1d(np.asarray(ranks, dtype=np.int64))
            return np.asarray(MPI.Group.Translate_ranks(a, ranks.tolist(), b), dtype=np.int64)
        finally:
            new_group.Free()

    def use_gpu(self) -> int | None:
        """Make this process's GPU (``reorder.device``) the one its runtime
        opens: sets the visible-device variable for this process and the
        libraries it starts; returns the device ordinal to open (0), or
        None off GPU slots.  Call it before creating a device context
        (``gpus.use_gpu``)."""
        return use_gpu(self.reorder.device)

    def carry(self, obj):
        """Collective: give ``obj`` (this process's data for its old role) to
        the process that now has that role; returns the data of the role this
        process now plays."""
        source = int(self.old_to_new([self.reorder.new_rank])[0])
        return self.sendrecv(obj, dest=self.reorder.old_rank, source=source)


class ReorderedComm(_Reordered, MPI.Intracomm):
    """An ``Intracomm`` with ``.reorder`` (a ``ReorderInfo``)."""


class ReorderedCartcomm(_Reordered, MPI.Cartcomm):
    """A ``Cartcomm`` whose ranks really are reordered."""


class ReorderedDistgraphcomm(_Reordered, MPI.Distgraphcomm):
    """A ``Distgraphcomm`` whose ranks are reordered and whose neighbour lists
    are those of the role each process now plays."""


def _wrap(cls, new, base_comm, info: ReorderInfo):
    out = cls(new)
    out.reorder = info
    out._old_group = base_comm.Get_group()
    return out


def reorder_comm(comm=None, traffic=None, *, topology=None, method: str = "auto",
                 objective: str | None = None, refine: str = "auto", distributed: bool | None = None, seed: int = 0,
                 network=None, max_rounds: int = MAX_ROUNDS, min_improvement: float = 1e-4,
                 replicas: int = REPLICAS, kicks: int = 0, multilevel: bool = True,
                 options: dict | None = None, gpus=None) -> ReorderedComm:
    """Collective over ``comm`` (default ``COMM_WORLD``): a new communicator
    in which rank t sits on the slot chosen for task t.

    ``traffic``: this rank's row ``(destinations, bytes)`` (or a dict, or a
    length-P array), a ``CommGraph`` / sparse matrix / trace or graph file of
    the whole job, ``"profile"`` (recorded so far in this run), or a function
    returning one of those.  ``topology``: the slots, rank r on PE r (default:
    discovered).  ``method``: a ``rankmap.map_tasks`` method for the
    centralised path; ``options["time_limit"]`` (default
    ``IN_PROGRAM_TIME_LIMIT``) is auto's budget and a wall-clock deadline on
    the mapping and refinement, rank 0's clock deciding for every rank
    (``.reorder.deadline_hit``); ``objective``: what the centralised path
    optimises (``rankmap.map_tasks``: "time", auto's default, J with the
    busiest link's time lowered within 1 % of J; "sum", J alone; "bottleneck");
    ``refine``: "auto" (swap
    refinement unless the method already ends with it: auto, swap), "swap"
    (the centralised Schulz-Traff swap refinement, N_C^10), "rounds" (the
    distributed swap rounds), "none".
    ``distributed``: None picks the distributed path above
    ``CENTRALISED_MAX`` ranks: the distributed multilevel mapping
    (``algorithms.distributed.multilevel``: label propagation coarsening
    across the ranks, the coarse graph of at most 4096 vertices mapped by
    auto on rank 0, projection, swap rounds), kept only where it beats the
    current placement; ``multilevel=False``: the swap rounds alone, from the
    current placement; ``options`` may set its ``coarse_max`` (default 4096),
    ``coarse_time_limit`` (auto's budget on rank 0, default half the call's
    time limit, at most 10) and
    ``set_size`` (sibling groups mapped again together on the tasks' level,
    default 8).  No rank holds more than its own row, its
    neighbours' slot labels and its share of the coarse levels (rank 0 also
    the coarsest graph, the owner of a set its tasks).

    The swap rounds (the distributed path, and ``refine="rounds"``):
    ``max_rounds`` per descent; ``replicas`` (default 8): independent copies
    of the problem carried by every round in the same collectives, each
    breaking ties its own way, the best copy wins: more copies give the best
    of more local optima, at ``replicas`` times the local work and message
    volume per round (the same collectives); 1 is a single plain run.  ``kicks``
    (default 0): after the rounds converge, this many times perturb every
    copy (random swaps of a tenth of the tasks), descend again and keep the
    result where J fell (iterated local search): never a higher J than
    without kicks, each kick costs another descent's rounds.
    ``replicas`` must be an integer >= 1 and ``kicks`` >= 0 on every rank,
    ``method`` a mapping method, ``refine`` one of the above, ``seed`` in
    0..2^63 - 1, ``max_rounds`` >= 1, ``min_improvement`` finite and >= 0,
    ``distributed`` and ``multilevel`` booleans, and ``options`` keys options
    of some method (``algorithms.options``), all the same on every rank;
    otherwise every rank raises the same ``ValueError`` (a caller's mistake,
    not a failure to fall back from).  ``topology=`` given on some ranks only
    is a failure (fallback) on every rank.  A ``traffic`` function that
    raises ``SystemExit`` or ``KeyboardInterrupt`` on any rank stops every
    rank the same way (see ``agree``).

    ``gpus``: the slots are GPUs (``gpus.py``): ``True`` each node's own
    (hwloc's XML, else sysfs), or a GPU node for every node (a built-in
    type such as ``"mi300a:cpx"``, a GPU node file, an hwloc XML); the same
    on every rank.  Each process keeps its node and is told the GPU of its
    slot (``.reorder.device``; ``newcomm.use_gpu()`` makes it the one its
    runtime opens), so new rank t runs on the GPU chosen for task t; on
    fallback each keeps the GPU its slot had.

    Returns a
    ``ReorderedComm`` (an ``Intracomm``) with ``.reorder`` saying what
    happened.
    """
    comm = MPI.COMM_WORLD if comm is None else comm
    start, begun = time.perf_counter(), time.monotonic()
    rank, size = comm.Get_rank(), comm.Get_size()
    settings = agreed_arguments(comm, reorder_settings, method, refine, distributed, seed,
                                max_rounds, min_improvement, replicas, kicks, multilevel, options,
                                objective, same="reorder_comm's settings")
    gpus = agreed_arguments(comm, gpus_argument, gpus, same="reorder_comm's gpus")
    source = "given" if topology is not None else "discovered"
    place = None
    # rank 0's clock decides: only rank 0 maps, and the rounds carry its verdict
    deadline = Deadline(call_seconds(settings["options"], settings["method"]), start=begun)
    try:
        with warnings.catch_warnings(record=True) as caught:  # e.g. a trace missing ranks
            warnings.simplefilter("always")
            row = step(comm, "reading the traffic", lambda: own_row(
                _resolve_traffic(comm, traffic), rank, size))
        warn_once(comm, f"rankmap.reorder_comm: {caught[0].message}" if caught else None)
        place = locate(comm, topology, network, None if gpus is None else gpu_slots(gpus))
        if place.warning and rank == 0:  # known on every rank: said once per job
            warnings.warn(f"rankmap.reorder_comm: {place.warning}", RankmapWarning, stacklevel=2)
        use_distributed = settings["distributed"]
        if use_distributed is None:
            use_distributed = size > CENTRALISED_MAX
        if use_distributed:
            key, info = _distributed(comm, row, place, settings, deadline)
        else:
            key, info = _centralised(comm, row, place, settings, deadline)
    except ReorderFailed as exc:
        reason = str(exc)
        if rank == 0:  # the same reason on every rank: said once per job
            warnings.warn(f"rankmap.reorder_comm: {reason}; keeping the original rank order "
                          f"(all {size} ranks)", RankmapWarning, stacklevel=2)
        info = ReorderInfo(True, reason, "none", "", float("nan"), float("nan"), rank, rank,
                           topology=source if place is None else place.source,
                           time_s=time.perf_counter() - start, device=None if place is None else place.device)
        return _wrap(ReorderedComm, comm.Dup(), comm, info)
    new = comm.Split(0, key)
    info = ReorderInfo(False, None, info["path"], info["method"], info["J_before"], info["J_after"],
                       rank, new.Get_rank(), info.get("rounds", 0), info.get("swaps", 0),
                       place.source, time.perf_counter() - start, info["deadline_hit"],
                       info.get("objective", "sum"), info.get("T_before", float("nan")),
                       info.get("T_after", float("nan")), place.device)
    return _wrap(ReorderedComm, new, comm, info)


def _resolve_traffic(comm, traffic):
    """Call a traffic function; turn "profile" into this rank's recorded row
    in ranks of ``comm`` (the profiler counts COMM_WORLD ranks)."""
    if callable(traffic):
        traffic = traffic()
    if not (isinstance(traffic, str) and traffic == "profile"):
        return traffic
    try:
        from ..profile import recorded_row
    except ImportError as exc:
        raise ValueError("traffic='profile' needs the profiling layer (rankmap.profile), which is "
                         f"not available: {exc}") from None
    world_dst, nbytes, _messages = recorded_row(kind="p2p")
    world = MPI.COMM_WORLD.Get_group()
    group = comm.Get_group()
    try:
        dst = np.asarray(MPI.Group.Translate_ranks(world, np.asarray(world_dst).tolist(), group),
                         dtype=np.int64)
    finally:
        world.Free()
        group.Free()
    inside = dst != MPI.UNDEFINED  # traffic to processes outside comm does not move
    return dst[inside], np.asarray(nbytes, dtype=np.float64)[inside]


# ------------------------------------------------------------ centralised


def _centralised(comm, row, place, settings, deadline):
    rows = comm.gather(row, root=0)
    out = root_step(comm, "mapping", _map_on_root, rows, place.topology, place.pe_of_rank, settings,
                    deadline)
    task_of_pe, info = out if out is not None else (None, None)
    info = comm.bcast(info, root=0)
    # the process on slot p takes over the task mapped to p
    key = comm.scatter(None if task_of_pe is None else task_of_pe[place.pe_of_rank].tolist(), root=0)
    return key, info


def _map_on_root(rows, topology, pe_of_rank, settings, deadline=None):
    """Root: gather the sparse rows into a graph, map, refine, never worse
    than the current placement; returns (task on each slot, info).  The
    ``deadline`` (default: ``call_seconds`` from now, as reorder_comm's)
    bounds the mapping and the refinement."""
    from ..algorithms import apply_objective, map_tasks, prefers

    size = len(rows)
    lengths = [len(d) for d, _ in rows]
    graph = CommGraph.from_edges(np.repeat(np.arange(size), lengths),
                                 np.concatenate([d for d, _ in rows]),
                                 np.concatenate([b for _, b in rows]), n=size)
    current = np.asarray(pe_of_rank, dtype=np.int64)
    j_before, t_before = mapping_cost(graph, topology, current), link_time(graph, topology, current)
    objective = objective_of(settings["method"], settings.get("objective"))
    options = {k: v for k, v in settings["options"].items() if k not in MULTILEVEL_OPTIONS}
    if settings["method"] == "auto":
        options.setdefault("time_limit", IN_PROGRAM_TIME_LIMIT)
    if deadline is None:
        deadline = Deadline(call_seconds(settings["options"], settings["method"]))
    refine = settings["refine"]
    if refine == "auto" and settings["method"] in ALREADY_REFINED:
        refine = "none"
    # threads and worker processes: one, as in every rank of a job of several (``rankmap.cores``)
    mapping = map_tasks(graph, topology, method=settings["method"], seed=settings["seed"], deadline=deadline,
                        objective="sum", **options)
    pe, refined_by = refine_mapping(graph, topology, mapping.pe_of_task, refine, settings["seed"],
                                    replicas=settings["replicas"], kicks=settings["kicks"], deadline=deadline)
    pe = apply_objective(graph, topology, pe, objective, seed=settings["seed"], deadline=deadline)
    name = settings["method"] + (f"+{refined_by}" if refined_by else "")
    j_after, t_after = mapping_cost(graph, topology, pe), link_time(graph, topology, pe)
    if not prefers(objective, (t_after, j_after), (t_before, j_before)):  # moving processes would only cost
        pe, j_after, t_after, name = current, j_before, t_before, f"current order (kept: {name} found no better)"
    validate_mapping(pe, graph, topology)
    task_of_pe = np.empty(size, dtype=np.int64)
    task_of_pe[pe] = np.arange(size)
    return task_of_pe, {"path": "centralised", "method": name, "J_before": j_before, "J_after": j_after,
                        "deadline_hit": deadline.hit, "objective": objective, "T_before": t_before,
                        "T_after": t_after}


def refine_mapping(graph, topology, pe, refine, seed, *, replicas: int = REPLICAS,
                   kicks: int = 0, deadline: Deadline | None = None) -> tuple[np.ndarray, str]:
    """Apply the chosen refinement to a one-to-one mapping (``replicas`` and
    ``kicks`` for the swap rounds) until the ``deadline``; returns the new
    mapping and the name of what ran ("" for none)."""
    if refine in (None, False, "none"):
        return pe, ""
    if refine not in ("auto", "swap", "rounds"):
        raise ValueError(f"refine must be 'auto', 'swap', 'rounds' or 'none', not {refine!r}")
    if refine in ("auto", "swap"):
        # N_C^10 with its default ball cap (the library default): about
        # 0.3 s at P = 1024 on a loaded 2-core machine
        return np.asarray(swap_refine(graph, topology, pe, seed=seed, deadline=deadline), dtype=np.int64), "swap"
    return refine_rounds(graph, topology, pe, seed=seed, replicas=replicas, kicks=kicks,
                         deadline=deadline)[0], "rounds"


# ------------------------------------------------------------ distributed


def _distributed(comm, row, place, settings, deadline):
    """Swap rounds across the ranks, starting from the current placement:
    each rank holds its own row and its neighbours' slot labels only."""
    rank = comm.Get_rank()
    ex = MPIExchange(comm, comm.Get_size())
    dst, nbytes = row
    rows = agreed_symmetric_rows(comm, np.array([rank]),
                np.array([0, len(dst)]), dst, nbytes, ex)
    if settings.get("multilevel", True):
        res, method = _multilevel(comm, rows, place, ex, settings, deadline)
    else:
        rounds = SwapRounds(rows, place.label, ex, seed=settings["seed"], replicas=settings["replicas"])
        res = step(comm, "distributed refinement", rounds.run, max_rounds=settings["max_rounds"],
                   min_improvement=settings["min_improvement"], kicks=settings["kicks"],
                   deadline=deadline)
        method = "distributed swap rounds"
    # task `rank` now runs on slot res.labels.pe[0]: tell the rank on that slot
    owner = place.rank_of_pe[res.labels.pe[:1]]
    got = ex.exchange(owner, np.array([[rank]], dtype=np.float64))

    def one_key():
        if got.shape[0] != 1:
            raise RuntimeError(f"the new order is not a permutation: {got.shape[0]} tasks chose "
                               "this rank's slot")
        return int(got[0, 0])

    key = step(comm, "checking the permutation", one_key)
    return key, {"path": "distributed",
                 "method": f"{method} (replicas={settings['replicas']}, kicks={settings['kicks']})",
                 "J_before": res.J_before, "J_after": res.J_after, "rounds": res.rounds,
                 "swaps": res.swaps if hasattr(res, "swaps") else res.refine.swaps,
                 "deadline_hit": res.deadline_hit}


def multilevel_tuning(options: dict) -> dict:
    """The distributed multilevel path's options: those given, and the
    coarse mapping's counted budget as a share of the call's time limit (a
    larger one would only be cut by the clock, and no longer repeat)."""
    tuning = {k: v for k, v in options.items() if k in MULTILEVEL_OPTIONS}
    limit = float(options.get("time_limit", IN_PROGRAM_TIME_LIMIT))
    tuning.setdefault("coarse_time_limit", min(COARSE_TIME_LIMIT, COARSE_SHARE * limit))
    return tuning


def _multilevel(comm, rows, place, ex, settings, deadline):
    """The distributed multilevel mapping; rank 0 (which holds the slot
    topology) maps the coarse graph."""
    root = comm.Get_rank() == 0
    caps = comm.bcast(root_step(comm, "reading the machine levels", level_caps, place.topology),
                      root=0)
    tuning = multilevel_tuning(settings["options"])
    ml = Multilevel(rows, place.label, ex, caps, place.topology if root else None,
                    seed=settings["seed"], replicas=settings["replicas"], kicks=settings["kicks"],
                    min_improvement=settings["min_improvement"], deadline=deadline, **tuning)
    res = step(comm, "distributed multilevel mapping", ml.run)
    return res, "distributed multilevel" + (" (current order kept)" if res.kept_start else "")


# ------------------------------------------------------------- variants


def cart_row(dims, periods, rank: int, weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Traffic row of ``rank`` in a Cartesian grid (row-major ranks as in
    ``MPI_Cart_create``): ``weights[d]`` bytes to each neighbour along d."""
    dims = [int(d) for d in dims]
    weights = np.ones(len(dims)) if weights is None else np.asarray(weights, dtype=np.float64)
    coords = list(np.unravel_index(rank, dims))
    dst, nbytes = [], []
    for d, (n, periodic) in enumerate(zip(dims, periods)):
        for step_ in (-1, 1):
            c = coords[d] + step_
            if periodic:
                c %= n
            elif not 0 <= c < n:
                continue
            nb = list(coords)
            nb[d] = c
            dst.append(int(np.ravel_multi_index(nb, dims)))
            nbytes.append(float(weights[d]))
    return np.asarray(dst, dtype=np.int64), np.asarray(nbytes)


def reorder_cart(comm=None, dims=(0, 0), periods=None, *, weights=None,
                 **kwargs) -> ReorderedCartcomm:
    """``Create_cart(dims, periods, reorder=True)`` that really reorders:
    ranks are placed for nearest-neighbour traffic (``weights[d]`` bytes per
    neighbour along dimension d), then the Cartesian communicator is built
    on the new order.  Zeros in ``dims`` are filled by ``MPI.Compute_dims``.
    ``dims``, ``periods`` and ``weights`` that do not fit, or differ between
    ranks, raise the same ``ValueError`` on every rank."""
    comm = MPI.COMM_WORLD if comm is None else comm
    dims, periods, weights = agreed_arguments(comm, cart_arguments, comm.Get_size(), dims, periods,
                                              weights, same="reorder_cart's dims, periods and weights")
    base = reorder_comm(comm, traffic=lambda: cart_row(dims, periods, comm.Get_rank(), weights),
                        **kwargs)
    try:
        cart = base.Create_cart(dims, periods, reorder=False)
    finally:
        base.Free()
    return _wrap(ReorderedCartcomm, cart, comm, base.reorder)


def reorder_dist_graph(comm, sources, destinations, sourceweights=None, destweights=None, *,
                       info=None, **kwargs) -> ReorderedDistgraphcomm:
    """``Create_dist_graph_adjacent(..., reorder=True)`` that really reorders
    and gets the neighbours right: this rank's outgoing edges (weights =
    bytes, 1 each when absent) are its traffic; after reordering each process
    gets the adjacency of the role it now plays, whose ranks are new ranks.
    Weights given for one direction only get weight 1 in the other.  A
    neighbour that is not a rank of ``comm``, or weights that are not one
    non-negative integer per neighbour, on any rank raise the same
    ``ValueError`` on every rank."""
    comm = MPI.COMM_WORLD if comm is None else comm
    src, dst, sw, dw = agreed_arguments(comm, dist_graph_arguments, comm.Get_size(), sources,
                                        destinations, sourceweights, destweights)
    base = reorder_comm(comm, traffic=(np.asarray(dst, dtype=np.int64),
                                       np.ones(len(dst)) if dw is None else np.asarray(dw, dtype=np.float64)),
                        **kwargs)
    try:
        if (sw is None) != (dw is None):  # MPI wants both or neither
            sw = [1] * len(src) if sw is None else sw
            dw = [1] * len(dst) if dw is None else dw
        src, dsts, sw, dw = base.carry((src, dst, sw, dw))
        graph = base.Create_dist_graph_adjacent(src, dsts, sourceweights=sw, destweights=dw,
                                                info=MPI.INFO_NULL if info is None else info,
                                                reorder=False)
    finally:
        base.Free()
    return _wrap(ReorderedDistgraphcomm, graph, comm, base.reorder)
