"""Mapping methods behind one interface: ``map_tasks(graph, topology, method=...)``.

A method is a function ``fn(graph, topology, *, seed, eps, **options)`` that
returns ``pe_of_task``; ``register`` adds it under a name.  ``map_tasks``
times it, validates the result and wraps it in a ``Mapping``, so every method
is checked the same way.  Algorithms never import MPI.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only: importing one module here must not load scipy
    from ..graph import CommGraph
from ..deadline import Deadline
from ..mapping import Mapping, validate_mapping
from ..topology import Topology
from .registry import METHODS, MethodSpec, method_names, register  # noqa: F401 (the package's interface)

#: seconds auto's first call in a process pays before it maps anything:
#: importing its methods, scipy and the partitioners (the kernels are
#: compiled when the package is built); none of it can be cut, so a
#: deadline that leaves less keeps the given order (measured:
#: docs/time-limits.md, "Start-up")
AUTO_FIRST_CALL = 0.4


def map_tasks(graph: CommGraph, topology: Topology, method: str = "auto", seed: int = 0,
              eps: float | None = None, *, objective: str | None = None, deadline: Deadline | None = None,
              **options) -> Mapping:
    """Map the tasks of ``graph`` onto the PEs of ``topology``.

    One-to-one when ``graph.n <= topology.n_pes`` and ``eps`` is None;
    otherwise many-to-one with PE loads within (1 + eps) of balance.
    Option ``refine=True`` (``refine_depth=d``) passes the method's result
    through swap refinement (``refine.swap_refine``), ``refine="moves"``
    through move refinement (``move_refine.move_refine``, tree topologies).

    ``objective`` (``OBJECTIVES``; default "time" for auto, else "sum": a
    named method gives its own result): "sum" is J alone; "time" then
    lowers the link time, the busiest link's bytes over its bandwidth, with
    J kept within J_SLACK of the method's (``refine.bottleneck``);
    "bottleneck" lowers the link time whatever J.  Where the graph counts
    messages and the machine is a tree, "time" maps the latency-weighted
    graph (``cost.latency_weighted``: each message worth the network's
    alpha x beta in bytes) and returns the result or the given order,
    whichever has the lower message time (``cost.message_time``, with the
    machine's true alpha and beta per level).

    Time: option ``time_limit`` (seconds) is the counted budget of the
    methods that plan their work (auto) and a wall-clock bound on this whole
    call, which every stage checks (``deadline``: a ``Deadline`` the caller
    started earlier, e.g. at process start; else one from ``time_limit``).
    Option ``work_limit`` is the counted budget alone (no clock: the result
    is the same on any machine).  When the deadline cuts the search,
    ``Mapping.deadline_hit`` says so and the result is never worse than the
    given order (identity)."""
    if graph.n > topology.n_pes and eps is None:
        from ..mapping import DEFAULT_EPS

        eps = DEFAULT_EPS
    deadline = Deadline(_limit(options.get("time_limit"), "time_limit")) if deadline is None else deadline
    # nodes whose inside is a link matrix: the methods map onto the tree that
    # approximates it, then each node's PEs are settled on the true distances
    tree = topology.tree_only() if getattr(topology, "has_links", False) else topology
    if method == "auto" and not auto_loaded() and not deadline.allows(AUTO_FIRST_CALL):
        start = time.perf_counter()
        given = _given_order(graph, topology, eps)  # auto could not even start: skip its imports
        if given is not None:
            return Mapping(given, method=method, seed=seed, time_s=time.perf_counter() - start, deadline_hit=True)
    timed = _times_messages(graph, topology, method, objective)
    search = _latency_weighted(graph, topology) if timed else graph  # the QAP the methods solve
    if method not in METHODS:
        raise ValueError(f"unknown mapping method {method!r}; choose from {', '.join(method_names())}")
    kind = "tree" if isinstance(topology, Topology) else "mesh"
    if kind not in METHODS[method].machines:
        raise ValueError(f"method {method!r} does not map onto a {kind} topology; "
                         f"choose from {', '.join(method_names(topology))}")
    refine = options.pop("refine", False)
    refine_depth = options.pop("refine_depth", None)
    time_limit = _limit(options.pop("time_limit", None), "time_limit")
    work_limit = _limit(options.pop("work_limit", None), "work_limit")
    budget = time_limit if work_limit is None else work_limit
    if budget is not None:
        options["time_limit"] = budget
    start = time.perf_counter()
    # the method stops early enough for the checks below (whole-graph passes, not cut)
    inner = deadline.sooner(_tail_seconds(graph, deadline, timed))
    pe = METHODS[method].fn(search, tree, seed=seed, eps=eps, deadline=inner, **options)
    deadline.hit |= inner.hit
    if isinstance(refine, str) and refine.strip().lower() == "moves":  # many-to-one: single-task moves
        from .refine.moves import move_refine

        pe = move_refine(search, tree, pe, seed=seed, eps=eps, deadline=deadline)
    elif refine:  # any method's result may go through swap refinement
        from .refine.swaps import refine_option, swap_refine_option_depth, swap_refine

        if refine_option(refine):
            pe = swap_refine(search, tree, pe, seed=seed, eps=eps,
                             depth=swap_refine_option_depth(refine_depth), deadline=deadline)
    pe = apply_objective(search, tree, np.asarray(pe, dtype=np.int64), objective_of(method, objective),
                         seed=seed, eps=eps, deadline=deadline)
    pe = _within_nodes(search, topology, pe, deadline)
    validate_mapping(pe, graph, topology, eps=eps)
    if deadline.hit or timed:  # the folded weights price messages only roughly: the true time judges
        pe = _not_worse_than_given(graph, topology, pe, eps, timed)
    elapsed = time.perf_counter() - start
    return Mapping(pe, method=method, seed=seed, time_s=elapsed, deadline_hit=deadline.hit)


#: what a mapping is optimised for: J alone, the link time with J within
#: J_SLACK of the method's, or the link time whatever J
OBJECTIVES = ("time", "sum", "bottleneck")
OBJECTIVE_OF = {"auto": "time"}  # a method's default objective; the others give their own result ("sum")
#: J may rise this much for a lower link time: a near-tie of J (a shared
#: network pays J, a link-bound exchange the link time).  The halving blocks
#: of a scrambled 3-D halo lie at J's optimum; on the 89 quality rows J rose
#: 0.11 % on average, at most 0.99 % (docs/results/link-loads.md, quality-one-to-one.md)
J_SLACK = 0.01
LINK_EVALS_PER_TASK = 100  # the link stage's work: candidate swaps scored per task ...
MIN_LINK_EVALS = 10_000    # ... at least ...
MAX_LINK_EVALS = 200_000   # ... and at most (about 4 s at 20 us per candidate) ...
LINK_PATIENCE = 8          # ... and kicks in a row without a gain before it stops


def objective_of(method: str, objective: str | None = None) -> str:
    """The objective a mapping by ``method`` is made for: ``objective``, else
    the method's default (OBJECTIVE_OF, else "sum")."""
    objective = objective or OBJECTIVE_OF.get(method, "sum")
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose from {', '.join(OBJECTIVES)}")
    return objective


def prefers(objective: str, new: tuple[float, float], old: tuple[float, float]) -> bool:
    """Whether a mapping of (link time, J) ``new`` is better than ``old``
    for ``objective``: "sum" compares J; "bottleneck" the link time, then J;
    "time" J where they differ by more than J_SLACK, else as "bottleneck"."""
    (t_new, j_new), (t_old, j_old) = new, old
    if objective == "sum" or (objective == "time" and not j_old / (1 + J_SLACK) <= j_new <= j_old * (1 + J_SLACK)):
        return j_new < j_old
    return (t_new, j_new) < (t_old, j_old)


def apply_objective(graph, topology, pe, objective: str, *, seed: int = 0, eps=None,
                    deadline: Deadline | None = None):
    """``pe`` with its link time lowered as ``objective`` says (``map_tasks``):
    unchanged for "sum", and for tasks of unequal weights on shared PEs
    (the search moves tasks between slots, which keeps only equal weights
    balanced)."""
    deadline = Deadline.of(deadline)
    weights = graph.vertex_weights
    unequal = (eps is not None or graph.n > topology.n_pes) and weights.size and np.ptp(weights) > 0
    if objective_of("", objective) == "sum" or unequal or deadline.expired() \
            or not deadline.allows(_PER_LINK_SETUP_ENTRY * (graph.n_edges + graph.n)):
        return pe  # its tables cannot be cut: where the deadline cannot afford them, J's mapping as it is
    from ..cost import mapping_cost
    from .refine.bottleneck import bottleneck_refine

    cap = (1 + J_SLACK) * mapping_cost(graph, topology, pe) if objective == "time" else None
    evals = int(np.clip(LINK_EVALS_PER_TASK * graph.n, MIN_LINK_EVALS, MAX_LINK_EVALS))
    return bottleneck_refine(graph, topology, pe, eps=eps, seed=seed, j_cap=cap, max_evals=evals,
                             patience=LINK_PATIENCE, deadline=deadline)


_PER_LINK_SETUP_ENTRY = 1e-6  # the link stage's set-up, per graph entry: the J cap and bottleneck_refine's
                              # tables before its first move (2^20 tasks: 9.4 s at load 4 on 2 cores)
_PER_COST_ENTRY = 1e-7  # seconds per graph entry of one J pass (mapping_cost at 2^20 tasks: 0.15-0.5 s, load 7;
                        # 2^24: 2.3 s on an idle core, a third of the price)
_TAIL_PASSES = 2          # after the method: J of its last start, or of the given order and the result
                          # (what one computed, the other finds remembered: ``cost.mapping_cost``)
_TAIL_MARGIN = 1.25       # ... reserved this many times over where their pace was measured
_TIMED_PASSES = 4         # ... and, judged by the message time, its passes over the bytes and the
                          # messages of the result and the given order


def pass_seconds(graph) -> float:
    """Estimated seconds of one whole-graph pass that no deadline cuts (the
    J of a mapping): what a caller reserves for the passes after a search."""
    return _PER_COST_ENTRY * (graph.n_edges + graph.n)


def _tail_seconds(graph, deadline: Deadline, timed: bool = False) -> float:
    """Estimated seconds of the whole-graph passes that follow a method's
    search and that no deadline cuts: the J of its last start, the check
    of the mapping, the comparison with the given order (``timed``: by the
    message time); at the pace the ``deadline`` carries where a caller
    measured one (with a margin), else at the price."""
    pace = 1.0 if deadline.pace is None else _TAIL_MARGIN * deadline.pace
    return (_TAIL_PASSES + (_TIMED_PASSES if timed else 0)) * pass_seconds(graph) * pace


def _within_nodes(graph, topology, pe, deadline: Deadline):
    """``pe`` with the PEs of every link node settled on the true distances
    (``refine.within_nodes``); unchanged on machines that are trees."""
    if not getattr(topology, "has_links", False):
        return pe
    from .refine.within_nodes import place_within_nodes

    return place_within_nodes(graph, topology, pe, deadline)


def _limit(value, name: str) -> float | None:
    """A time or work limit: None, or finite seconds > 0."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not (0 < seconds < float("inf")):
        raise ValueError(f"option {name}={value!r}: expected a finite number of seconds > 0")
    return seconds


def auto_loaded() -> bool:
    """Whether this process has loaded auto (its first call paid the imports)."""
    return f"{__name__}.portfolio.one_to_one" in sys.modules


def _given_order(graph, topology, eps):
    """The identity placement, or None where it is no valid mapping
    (weighted tasks over their PEs' balance)."""
    try:
        given = np.asarray(METHODS["identity"].fn(graph, topology, eps=eps), dtype=np.int64)
        validate_mapping(given, graph, topology, eps=eps)
    except ValueError:
        return None
    return given


def _times_messages(graph, topology, method: str, objective: str | None) -> bool:
    """Whether the mapping is judged by the message time: the time
    objective, a graph with message counts, a tree machine."""
    return (objective_of(method, objective) == "time" and graph.message_coo() is not None
            and isinstance(topology, Topology))


def _latency_weighted(graph, topology):
    from ..cost import latency_weighted

    return latency_weighted(graph, topology)


def _better(graph, topology, pe, other, timed: bool = False):
    """``pe`` or ``other``, whichever has the lower J, or with ``timed`` the
    lower message time (``other`` on a tie)."""
    if timed:
        from ..cost import message_time

        return pe if message_time(graph, topology, pe).total < message_time(graph, topology, other).total else other
    from ..cost import mapping_cost

    return pe if mapping_cost(graph, topology, pe) < mapping_cost(graph, topology, other) else other


def _not_worse_than_given(graph, topology, pe, eps, timed: bool = False):
    """A search the deadline cut may hold a half-improved start, and one on
    latency-folded weights a mapping that only they prefer: keep the given
    order (the identity placement) when that is valid and better (J, or
    with ``timed`` the message time)."""
    given = _given_order(graph, topology, eps)
    if given is None or np.array_equal(pe, given):  # nothing to compare (two J passes at 2^22 tasks: 2 s)
        return pe
    return _better(graph, topology, given, pe, timed)
