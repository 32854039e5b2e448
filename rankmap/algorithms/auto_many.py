"""``auto`` for many tasks per PE: a portfolio of whole multisection runs.

Measured on the many-to-one benchmark (Walshaw graphs onto 4:8:k, eps 3%,
benchmarks/quality_peers.py --only-many): J is decided by the partitions of
the top levels (a cut edge at distance 100 costs as much as 100 at distance
1), and which backend and preset cut best varies from graph to graph and
seed to seed (Mt-KaHyPar fast beats KaHIP strong by 17% on add20/64, KaHIP
strong beats Mt-KaHyPar strong by 5% on uk/32); refinement after a strong
start gains well under 1%.  The starts TreeMatch, GreedyAllC and the given
order, which serve one-to-one mapping, land 3-6x above the best here.  So
auto many-to-one runs whole multisections, cheap first (KaHIP and
Mt-KaHyPar fast, then strong, eco, then both backends with several top
partitions per run and further seeds), each followed by move refinement
(O(m * depth) per pass, ``move_refine``), keeps the best J and gives it
swap refinement (moves and swaps, Schulz & Traff N_C^d) at the end.

The plan depends only on the instance, the seed and the budget (runs join
while their estimated cost fits; the first always runs), so the result is
deterministic for a given seed and budget.  The given order stays a
candidate when it is a valid placement, so auto never returns a higher J.
"""

from __future__ import annotations

import numpy as np

from ..cost import mapping_cost
from ..mapping import DEFAULT_EPS, validate_mapping
from . import METHODS
from .auto import DEFAULT_TIME_LIMIT, _multisection_cost, _refine_cost, _refine_depth
from .move_refine import move_refine
from .multisection import multisection_map
from .refine import swap_refine

_PER_MOVE_EDGE_LEVEL = 3e-8  # compiled move pass: one neighbour at one depth
_MOVE_PASSES = 3
_MTKAHYPAR_FACTOR = 1.5       # Mt-KaHyPar (1 thread) against kaffpa, same preset
TOP_TRIES = 4                 # partitions per top-level split in the "both" runs


def _move_cost(graph, topology) -> float:
    return _MOVE_PASSES * (graph.n + graph.symmetric.nnz) * max(topology.max_depth, 1) * _PER_MOVE_EDGE_LEVEL


def _run_cost(graph, topology, opts: dict) -> float:
    base = _multisection_cost(graph, topology, opts["preset"])
    if opts["backend"] == "mtkahypar":
        return base * _MTKAHYPAR_FACTOR
    if opts["backend"] == "both":  # the extra tries partition the top level only
        levels = max(int(topology.max_depth), 1)
        return base * (1 + (opts["tries"] - 1) * (1 + _MTKAHYPAR_FACTOR) / 2 / levels)
    return base


def plan_many(graph, topology, time_limit: float | None, seed: int = 0) -> tuple[list[dict], float]:
    """The multisection runs (keyword options of ``multisection_map``) auto
    makes many-to-one, in order, and their estimated seconds including move
    refinement and the final swap refinement."""
    budget = DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)

    def ms(backend, preset, run_seed, tries=1):
        return {"backend": backend, "preset": preset, "seed": run_seed, "tries": tries}

    runs = [ms("kahip", "fast", seed), ms("mtkahypar", "fast", seed), ms("kahip", "strong", seed),
            ms("mtkahypar", "strong", seed), ms("kahip", "eco", seed), ms("mtkahypar", "eco", seed),
            ms("both", "strong", seed, TOP_TRIES)]
    runs += [ms(b, "strong", seed + i) for i in range(1, 5) for b in ("kahip", "mtkahypar")]
    moves = _move_cost(graph, topology)
    spent = _refine_cost(graph)  # the final swap refinement of the best
    chosen = []
    for opts in runs:
        cost = _run_cost(graph, topology, opts) + moves
        if chosen and spent + cost > budget:
            continue
        chosen.append(opts)
        spent += cost
    return chosen, spent


def auto_many(graph, topology, *, seed: int = 0, eps: float | None = None,
              time_limit: float | None = None) -> np.ndarray:
    """Best J of the planned multisection runs, move-refined, then the best
    swap-refined (see the module docstring)."""
    eps = DEFAULT_EPS if eps is None else eps
    best_pe, best_j = None, np.inf
    try:  # the given order, when it is a valid placement
        pe = np.asarray(METHODS["identity"].fn(graph, topology, seed=seed, eps=eps))
        validate_mapping(pe, graph, topology, eps=eps)
        best_pe, best_j = pe, mapping_cost(graph, topology, pe)
    except ValueError:
        pass
    runs, _ = plan_many(graph, topology, time_limit, seed)
    for opts in runs:
        pe = multisection_map(graph, topology, eps=eps, threads=1, **opts)
        pe = move_refine(graph, topology, pe, eps=eps, seed=opts["seed"])
        j = mapping_cost(graph, topology, pe)
        if j < best_j:
            best_pe, best_j = pe, j
    if best_pe is None:
        raise ValueError("auto: no candidate method could map this instance")
    refined = swap_refine(graph, topology, best_pe, depth=_refine_depth(graph.n), seed=seed, eps=eps)
    return refined if mapping_cost(graph, topology, refined) < best_j else best_pe
