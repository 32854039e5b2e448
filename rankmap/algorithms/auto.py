"""``auto``: the strongest combination that fits a time budget, best J kept.

The plan is a list of (start method, options) runs, each followed by swap
refinement, cheap first: multisection fast with KaHIP, the given
order (identity: when the tasks are blocks numbered by a recursive
bisection, as in model creation, it is often the best start), multisection
fast with Mt-KaHyPar (1 thread), GreedyAllC, TreeMatch when it is
registered, multisection eco with both backends, multisection with
Mt-KaHyPar's own mapping (``map_onto_graph``, Steiner-tree objective) on
the subtrees of at most 64 PEs (0.5-7 s for 64 PEs: it comes late, as its
refined result rarely beats the cheap starts refined, measured on the
tiny/small benchmark sets), strong with both backends, then strong with
further seeds.  Neither backend wins everywhere (Mt-KaHyPar's cuts are much better
on some many-to-one instances, KaHIP's on others), hence both.  What time
is left goes to an iterated local search on the best mapping (one-to-one).  Runs join the plan while their *estimated* cost (a
work model in tasks, edges and tree nodes, calibrated on a 2-core machine)
fits ``time_limit``; the first run always happens.  Because the plan depends
only on the instance, the seed and the budget, never on the clock, auto is
deterministic for a given seed and budget; the budget is a target, not a
hard deadline; auto also stops early, still deterministically, once the
later starts or the kicks stop lowering J (a count, not the clock).  The
given order is always a candidate (unrefined when the
budget leaves no room), so auto never returns a higher J than it.  On a
mesh or torus the tree methods do not apply and auto is ``mesh_auto``.
"""

from __future__ import annotations

import numpy as np

from ..cost import mapping_cost
from ..topology import Topology
from . import METHODS, register
from .refine import refine_around, swap_refine

DEFAULT_TIME_LIMIT = 10.0
N2_MAX_TASKS = 1024  # the quadratic refinement neighbourhood up to this many tasks

# seconds per unit of work, measured on the development machine (2 cores,
# shared: scaled to an idle core)
_PER_PARTITION_CALL = {"fast": 2e-3, "eco": 4e-3, "strong": 1.2e-2}
_PER_EDGE_LEVEL = {"fast": 2e-6, "eco": 6e-6, "strong": 2.5e-5}
_PER_PAIR_EDGE = 2.5e-8  # compiled swap refinement: one neighbour of one pair looked at
_REFINE_PASSES = 4    # typical passes until no gain from a good start
_PER_GREEDY_TASK = 5e-5
KICK_TASKS = 8        # iterated local search: tasks whose PEs one kick shuffles
PATIENCE = 64         # ... and kicks without a gain before it stops
DIVERSE_STARTS = 3    # the three cheapest starts always run (when planned) ...
START_PATIENCE = 2    # ... later ones stop after this many without a gain


def _refine_depth(n: int):
    return "n2" if n <= N2_MAX_TASKS else 10


def _refine_cost(graph, passes: int = _REFINE_PASSES) -> float:
    n = graph.n
    pairs = n * (n - 1) / 2 if n <= N2_MAX_TASKS else min(n * 128, graph.symmetric.nnz * 40)
    return passes * pairs * (2 + 2 * graph.symmetric.nnz / max(n, 1)) * _PER_PAIR_EDGE


def _multisection_cost(graph, topology, preset: str) -> float:
    internal = int(np.count_nonzero(topology.child_ptr[1:] > topology.child_ptr[:-1]))
    calls = min(internal, graph.n)
    levels = max(int(topology.max_depth), 1)
    return calls * _PER_PARTITION_CALL[preset] + (graph.n + graph.symmetric.nnz) * levels * _PER_EDGE_LEVEL[preset]


def plan(graph, topology, time_limit: float | None, seed: int = 0) -> tuple[list[tuple[str, dict]], float]:
    """The starts auto makes for this instance and budget, in order, and
    their estimated seconds."""
    budget = DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)
    refine = _refine_cost(graph)

    def ms(backend, preset, run_seed, steiner=False):
        cost = _multisection_cost(graph, topology, preset) * (1.5 if backend == "mtkahypar" else 1.0)
        opts = {"preset": preset, "backend": backend, "seed": run_seed}
        if backend == "mtkahypar":
            opts["threads"] = 1  # one thread: deterministic per seed
        if steiner:  # Mt-KaHyPar's own mapping objective below 64 PEs: slower
            opts["steiner"] = True
            cost *= 3
        return ("multisection", opts, cost)

    greedy_cost = graph.n * _PER_GREEDY_TASK * max(topology.max_depth, 1)
    runs = [ms("kahip", "fast", seed), ("identity", {"seed": seed}, 0.0), ms("mtkahypar", "fast", seed),
            ("greedy_allc", {"seed": seed}, greedy_cost), ("treematch", {"seed": seed}, greedy_cost),
            ms("kahip", "eco", seed), ms("mtkahypar", "eco", seed), ms("mtkahypar", "eco", seed, True),
            ms("kahip", "strong", seed), ms("mtkahypar", "strong", seed)]
    runs += [ms(b, "strong", seed + i) for i in range(1, 5) for b in ("kahip", "mtkahypar")]
    chosen, spent = [], 0.0
    for name, opts, cost in runs:
        if name not in METHODS:
            continue
        if chosen and spent + cost + refine > budget:
            continue
        chosen.append((name, opts))
        spent += cost + refine
    return chosen, spent


@register("auto", "best J of multisection / GreedyAllC / TreeMatch runs with swap refinement "
                  "within time_limit seconds (default 10; deterministic per seed and budget)",
          machines=("tree", "mesh"))
def auto(graph, topology, *, seed=0, eps=None, time_limit=None, **options):
    if not isinstance(topology, Topology):  # a mesh/torus: the tree methods do not apply
        return METHODS["mesh_auto"].fn(graph, topology, seed=seed, eps=eps, **options)
    if eps is not None or graph.n > topology.n_pes:  # many tasks per PE: a portfolio of its own
        from .auto_many import auto_many

        return auto_many(graph, topology, seed=seed, eps=eps, time_limit=time_limit)
    try:
        best_pe = np.asarray(METHODS["identity"].fn(graph, topology, seed=seed, eps=eps))
        best_j = mapping_cost(graph, topology, best_pe)
    except ValueError:  # weighted tasks: no fixed "given order" placement
        best_pe, best_j = None, np.inf
    depth = _refine_depth(graph.n)
    starts, spent = plan(graph, topology, time_limit, seed)
    idle = 0
    for i, (name, opts) in enumerate(starts):
        if i >= DIVERSE_STARTS and idle >= START_PATIENCE:
            break  # converged: the stronger presets keep finding the same J
        run_seed = opts.pop("seed")
        try:
            pe = np.asarray(METHODS[name].fn(graph, topology, seed=run_seed, eps=eps, **opts))
        except ValueError:
            continue  # e.g. a greedy method that cannot place weighted tasks
        pe = swap_refine(graph, topology, pe, depth=depth, seed=run_seed, eps=eps)
        j = mapping_cost(graph, topology, pe)
        idle = 0 if j < best_j * (1 - 1e-9) else idle + 1
        if j < best_j:
            best_pe, best_j = pe, j
    if best_pe is None:
        raise ValueError("auto: no candidate method could map this instance")
    if eps is None and graph.n <= topology.n_pes:  # kicks permute PEs: one-to-one only
        budget = DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)
        rounds = int(max(budget - spent, 0.0) / max(_refine_cost(graph, passes=2), 1e-9))
        best_pe, best_j = iterated_search(graph, topology, best_pe, best_j, rounds, depth, seed)
    return best_pe


def kick(graph, pe_of_task, rng: np.random.Generator, size: int = KICK_TASKS) -> np.ndarray:
    """Shuffle the PEs of a connected group of ``size`` tasks grown by BFS
    from a random task: a jump out of a swap-local optimum that a single
    swap cannot make."""
    adj = graph.symmetric
    group, seen = [int(rng.integers(graph.n))], set()
    seen.add(group[0])
    i = 0
    while i < len(group) and len(group) < size:
        nbrs = adj.indices[adj.indptr[group[i]]:adj.indptr[group[i] + 1]]
        for x in rng.permutation(nbrs).tolist():
            if x not in seen and len(group) < size:
                seen.add(x)
                group.append(x)
        i += 1
    out = np.array(pe_of_task, copy=True)
    idx = np.asarray(group)
    out[idx] = out[idx][rng.permutation(idx.size)]
    return out


def iterated_search(graph, topology, pe_of_task, j, rounds: int, depth, seed: int):
    """Iterated local search: kick the best mapping, refine, keep it when J
    drops; at most ``rounds`` kicks, stop after PATIENCE in a row without a
    gain (deterministic: the count, not the clock, ends it)."""
    rng = np.random.default_rng([seed, 7])
    best_pe, best_j, idle = pe_of_task, j, 0
    for r in range(rounds):
        kicked = kick(graph, best_pe, rng)
        if depth == "n2":  # best_pe is swap-optimal: search only around the kick
            cand = refine_around(graph, topology, kicked, np.flatnonzero(kicked != best_pe), seed=seed + r)
        else:
            cand = swap_refine(graph, topology, kicked, depth=depth, seed=seed + r)
        cj = mapping_cost(graph, topology, cand)
        if cj < best_j * (1 - 1e-12):
            best_pe, best_j, idle = cand, cj, 0
        else:
            idle += 1
            if idle >= PATIENCE:
                break
    return best_pe, best_j
