"""``auto``: the strongest combination that fits a time budget, best J kept.

Starts, each followed by swap refinement, cheap first: multisection fast
with KaHIP (beyond N2_MAX_TASKS tasks eco, where the budget also pays for
the V-cycles: ``_eco_first``; its top cut between nodes tried by
Mt-KaHyPar as well, the lower kept: ``_top_by_both``), the given order
(identity: when the tasks are blocks numbered by a recursive bisection, as
in model creation, it is often the best start), multilevel V-cycles on the best of these
(``construct/multilevel.py``: FM exchanges of task groups between nodes,
which no swap sequence makes), KaHIP strong re-bisection of the heaviest
pairs of nodes (``refine/rebisect.py``; as many pairs as the budget pays
for, often none at the default budget), multisection fast with Mt-KaHyPar (1
thread, its deterministic presets: the others differ from call to call),
multisection eco with KaHIP, Mt-KaHyPar with a second seed, multisection
with Mt-KaHyPar's own mapping (``map_onto_graph``, Steiner-tree
objective, 0.3-0.6 s per subtree of 64 PEs) on the subtrees of at most 64
PEs, then KaHIP strong and Mt-KaHyPar with further seeds in turn, and
last TreeMatch (when registered), which was never the best start on the
benchmark models (nor was GreedyAllC, no start any more).  Neither backend
wins everywhere (Mt-KaHyPar's cuts are much better on some many-to-one
instances, KaHIP's on others), hence both.  The starts after the first
three leave SEARCH_SHARE of the budget to an iterated local search on the best mapping
(one-to-one): kick 8 connected tasks, refine around them
(``refine_around``), keep when J drops.  Then, on top of the budget,
what neither swaps nor kicks reach: KaHIP re-bisection of the
heaviest node pairs (``rebisect_heaviest``), cyclic exchanges inside
the nodes (``cycle_exchanges``) and the optimal split of the nodes' tasks
into their groups of cores (``exact_groups``).  With fewer tasks than PEs the
result finally alternates moves into free PEs with swaps (a swap never
uses a free PE).

Three instances take other starts (``candidates``): beyond LARGE_TASKS
tasks the parallel multisection goes first (``large_start``: KaMinPar's top
cuts on threads, the small sub-problems grown); a dense graph
(``refine.swaps.dense_graph``) starts with KaMinPar's and Mt-KaHyPar's
multisections, no KaHIP and no V-cycles (``_dense_candidates``); and under
a limit of SMALL_LIMIT seconds or less the quick constructions that fit
(``quick_starts``: KaMinPar's multisection, TreeMatch) go first.

Without a ``time_limit`` the budget is DEFAULT_EFFORT times the work of
one KaHIP eco multisection plus a refinement (VieM's default run; beyond
N2_MAX_TASKS tasks plus the V-cycles), at most DEFAULT_TIME_LIMIT seconds
(``budget.py``): on 21 benchmark models a 10 s budget gave J 0.9995 of
the default budget's at 5.4 times the time.

Budget and determinism: a work model (tasks, edges, tree nodes; fitted
on an idle core of the development machine) prices every start before it
runs, and the refinement and search work actually done is counted (pairs
evaluated, tasks scanned) and priced by the same model.  A start runs only
while the estimated time spent plus its cost fits ``time_limit`` (the
first always runs; when the budget cannot pay for a multisection the given
order goes first), and refinement stops when the pairs the budget has left
are used.  Nothing reads the clock, so the result depends only on the
instance, the seed and the budget; the wall time follows the budget as far
as the machine matches the model.  auto also stops when it has converged:
after the first three starts, two in a row that return the best J again,
or four in a row without a gain, end the starts;
the search ends once the kicks without a gain reach max(PATIENCE, the
kicks made up to the last gain).  The wall-clock ``deadline`` (from
``time_limit``, see ``rankmap.deadline``) is a guard on top of that plan:
every start, refinement slice and kick checks it, and when it cuts, the best
mapping so far is returned.  A later start whose estimated seconds, scaled by
how much slower than the model this run has been so far (``slowness``),
would end after the deadline is skipped (a partitioning call cannot be
cut); the first one runs and is cut inside.  Where the given order's J is below
the first start's, the given order is refined first and the first start
takes its place in the plan.  The given order is always a candidate
(unrefined when the budget leaves no room), so auto never returns a higher
J than it.  This is one-to-one mapping; many tasks per PE (``eps`` or more
tasks than PEs) go to ``auto_many``, a portfolio of its own.  On a mesh or
torus the tree methods do not apply and auto is ``mesh_auto``.
"""

from __future__ import annotations

import time

import numpy as np

from ...cores import workers_option
from ...cost import mapping_cost
from ...deadline import Deadline, slowness
from ...topology import Topology
from ..refine.budgeted import (N2_MAX_TASKS, REFINE_PASSES, memory_factor, refine_cost, refine_start,
                               scan_seconds, setup_seconds)
from ..refine.cycles import cycle_refine
from ..refine.swaps import dense_graph
from ..refine.exact_groups import MAX_PIECES, exact_group_refine
from ..refine.moves import move_refine
from ..refine.rebisect import rebisect_pairs, top_subtree_size
from ..refine.swaps import refine_around
from ..registry import METHODS, register
from .budget import budget_seconds, first_use

DEFAULT_EFFORT = 1.6  # without a time_limit auto plans this many times a VieM-like run's work (budget_of)

# seconds per unit of work of the starts, fitted like the refinement's prices (refine/budgeted.py: an idle
# core of the development machine, 24 models of 64-2048 tasks on 4:16:k, each start timed alone)
_PER_PARTITION_CALL = {("kahip", "fast"): 1.7e-4, ("kahip", "eco"): 3.1e-4, ("kahip", "strong"): 1.5e-3,
                       ("mtkahypar", "fast"): 5.9e-4}  # Mt-KaHyPar 1 thread, deterministic presets ...
_PER_EDGE_LEVEL = {("kahip", "fast"): 1.75e-6, ("kahip", "eco"): 5e-6, ("kahip", "strong"): 1.45e-5,
                   ("mtkahypar", "fast"): 1.33e-5}  # ... which cost the same for every preset
_TREEMATCH = (0.05, 3e-4, 2.5e-7)  # TreeMatch with its final refinement: fixed, per task, per edge ...
_TREEMATCH_CANDIDATE = 4e-5  # ... plus this per candidate group its exhaustive levels list (CPU: 0.15 and 0.54 s
                             # for 2514 and 10795 candidates at 64 and 128 tasks on 4:16:k, 0.05-0.1 s priced)
_TREEMATCH_DENSE = 1.6  # ... on dense graphs times (degree / 8) to this power (its grouping and final
                        # refinement go with the degree: 3.0, 7.2, 11.8 s CPU on AMG-like and geometric
                        # graphs of 512-1000 tasks with 188-238 partners, priced 3.7, 7.0, 11.2 s)
_DENSE_BELOW_TOP = 1.2  # a dense graph's multisection: its top split's price times this (Mt-KaHyPar on an
                        # AMG-like graph of 1000 tasks into 21 nodes of 48: 3.7 s CPU in all, 3.6 s the top)
_PER_KICK = 1.2e-4         # one kick's fixed cost (kick, J, pair lists) ...
_PER_KICK_EDGE = 1e-8      # ... plus this per edge
_PER_CYCLE_TASK = 4e-5     # one round of cyclic exchanges (refine/cycles.py), per task (0.2 s cpu for
                           # 10 rounds on a 512-task model at load ~80: cpu time, which the load leaves alone)
FREE_PE_ROUNDS = 4    # fewer tasks than PEs: move/swap alternations at the end
_ML_CYCLES = 2              # multilevel on the best so far: V-cycles expected (it stops when one does not gain) ...
_PER_ML_TASK = 1.2e-5       # ... each FM and coarsening work per task and tree level, plus a task-level refinement
                            # (fitted as a ratio to the KaHIP fast term timed in the same runs, 11 models of
                            # 64-512 tasks on a loaded machine: the load cancels in the ratio)
KICK_TASKS = 8        # iterated local search: tasks whose PEs one kick shuffles
PATIENCE = 64         # ... and kicks without a gain before it stops, at least, and at least
COVER_TOUCHES = 4     # enough kicks to touch every task this many times on average
DIVERSE_STARTS = 3    # the three cheapest starts always run (when planned) ...
SEARCH_SHARE = 0.3    # ... later ones leave this share of the budget to the iterated local search
CYCLE_SHARE = 0.1     # the cyclic exchanges after the search: this share of the budget on top of it ...
MIN_CYCLE_ROUNDS = 4  # ... and at least this many rounds (a round that finds no cycle ends them)
EXACT_SHARE = 0.2     # the exact split of nodes into leaf groups after the cycles: this share on top ...
MIN_EXACT_WORK = 2 * MAX_PIECES  # ... and at least this much: the LPs of two nodes as dense as it takes, or three
                                 # branch and bounds of a mesh node (half of it left uk/2048 +0.18 %, add32/512 +0.14 %)
_PER_PIECE = 1e-5     # ... one unit of its work, a piece (column) of a node's LP relaxation with its enumeration
                      # (5-8e-6 s on mesh nodes of 2-18k pieces, where the LP's 10-15 ms a node weigh most, 2-3e-6 s on
                      # dense ones of 70k; a branch and bound counts BRANCH_WORK units per piece on top, see
                      # refine/exact_groups.py)
REBISECT_SHARE = 0.3  # the node-pair re-bisection after the search: this share of the budget on top (against
                      # 0.1 it lowers J on 8 and 10 of the 89 benchmark rows at seeds 0 and 2, raises it on
                      # none) ...
MIN_REBISECT_PAIRS = 1  # ... and at least the heaviest pair up to N2_MAX_TASKS tasks ...
REBISECT_PRESET, REBISECT_SEEDS = "eco", 3  # ... each by KaHIP eco with this many seeds (with the slack of
                                            # refine/rebisect.py, 3 seeds of eco found what strong finds on
                                            # add32/256 and uk/256 at a third of its time)
_REBISECT_SCALE = {"fast": 2.0, "eco": 2.0, "strong": 5.0}  # one pair took this many times the
                       # multisection terms below (cpu, as a ratio to KaHIP fast timed in the same runs, 8 models
                       # of 128-1024 tasks, load 5-11: eco 1.6-2.8, strong 4.1-6.1); with the refinement capped
                       # (_rebisect_scans) auto's eco pass took 0.6-1.05 x its price on add32/256 and uk/256,
                       # 1.2-2.0 x on add20, data, 3elt /2048, where auto's kicks took 1.7-2.3 x theirs (cpu, load 1,
                       # 3 runs; uncapped 7 x on add20/2048)
START_PATIENCE = 2    # ... later ones stop after this many in a row that return the best J again ...
IDLE_STARTS = 4       # ... or this many in a row without a gain
SMALL_LIMIT = 2.0      # a time or work limit up to this many seconds starts with the quick constructions
LARGE_TASKS = 1 << 15  # beyond this many tasks the parallel multisection (KaMinPar, growing) starts first
GROW_BELOW = 512      # ... its sub-problems of at most this many tasks grown, not partitioned
TOP_CUTS_SHARE = 0.8  # ... and where its top cuts would take more of the budget, growing along the tree


def budget_of(graph, topology, time_limit: float | None) -> float:
    """auto's budget in the work model's seconds.  A ``time_limit`` sets it
    (``budget_seconds``); without one it is DEFAULT_EFFORT times the work of
    one KaHIP eco multisection and one refinement (what VieM's default run
    does; beyond N2_MAX_TASKS tasks plus the multilevel V-cycles, which
    the eco start there leads to: ``candidates``), plus Mt-KaHyPar's try
    at the top cut (``_top_by_both``), at most
    DEFAULT_TIME_LIMIT's budget: beyond the first starts,
    the multilevel V-cycles and a short local search, further starts and
    kicks rarely lower J (the module docstring)."""
    if time_limit is not None:
        return budget_seconds(time_limit)
    # VieM's work: its refinement has no connection cache (on dense graphs a scan costs O(m) there)
    work = _multisection_cost(graph, topology, "kahip", "eco") + refine_cost(graph, topology, True, cached=False)
    if graph.n > N2_MAX_TASKS:  # a start's refinement costs about a multisection: pay for the V-cycles too
        work += _multilevel_cost(graph, topology)
    return min(budget_seconds(None), DEFAULT_EFFORT * work + _mtkahypar_top_cost(graph, topology))


def _multisection_cost(graph, topology, backend: str, preset: str) -> float:
    from ..construct.multisection import grown_seconds, kaminpar_split_seconds, local_order_seconds
    from ..construct.partition import partition_seconds

    nnz = graph.symmetric.nnz
    if backend == "kaminpar":  # the top cut (its repair and FM): the levels below are grown (``large_start``)
        return (local_order_seconds(graph.n, nnz) + kaminpar_split_seconds(graph.n, nnz, _top_parts(topology), preset)
                + grown_seconds(graph.n))
    key = (backend, "fast" if backend == "mtkahypar" else preset)
    if dense_graph(graph):  # most edges are cut at the top: the levels below see few of them
        return _DENSE_BELOW_TOP * partition_seconds(graph.n, nnz, _top_parts(topology), *key)
    internal = int(np.count_nonzero(topology.child_ptr[1:] > topology.child_ptr[:-1]))
    calls = min(internal, graph.n)
    levels = max(int(topology.max_depth), 1)
    return calls * _PER_PARTITION_CALL[key] + (graph.n + nnz) * levels * _PER_EDGE_LEVEL[key]


def _rebisect_pair_cost(graph, topology, preset: str = "strong") -> float | None:
    """Estimated seconds of re-bisecting one pair of top-level subtrees
    (``refine/rebisect.py``, one seed): KaHIP ``preset`` on the pair's tasks
    and its share of the edges, then in both orientations the swap
    refinement around the pair's tasks, capped at ``_rebisect_scans``; None
    when the tree has no such pairs."""
    bisection = _bisection_cost(graph, topology, preset)
    if bisection is None:
        return None
    scans = 2 * _rebisect_scans(graph, topology, preset) * scan_seconds(graph, topology)
    return _REBISECT_SCALE[preset] * (bisection + scans)


def _bisection_cost(graph, topology, preset: str) -> float | None:
    """Estimated seconds of KaHIP ``preset`` bisecting the tasks of a pair of
    top-level subtrees; None when the tree has no such pairs."""
    size = top_subtree_size(topology)
    if size is None or graph.n > topology.n_pes:
        return None
    from ..construct.partition import density_factor

    key = ("kahip", preset)
    edges = 2 * graph.symmetric.nnz * size / topology.n_pes
    return (_PER_PARTITION_CALL[key] + (2 * size + edges) * _PER_EDGE_LEVEL[key]) \
        * density_factor(*key, graph.n, graph.symmetric.nnz)


def _rebisect_scans(graph, topology, preset: str) -> int:
    """Task scans the swap refinement of a re-bisected pair may make per
    orientation: the two orientations together what its bisection is
    priced at, at least one scan per task of the pair.  Uncapped, a scan
    that swaps wakes its neighbours' tasks, and beyond N2_MAX_TASKS (where
    the mapping is swap-optimal only in N_C^10) that cascaded through the
    whole mapping: 7-14 scans per task of the pair on add20/2048, 2.0 s cpu
    for 0.18 s priced.  On 256 tasks a scan is cheap, and the cap is above
    any refinement seen (at most 353 scans of a pair's 128 tasks on
    add32/256 and uk/256: the re-bisection's gains there are kept)."""
    bisection = _bisection_cost(graph, topology, preset)
    if bisection is None:
        return 0
    pair_tasks = 2 * top_subtree_size(topology)
    return max(pair_tasks, int(np.ceil(bisection / (2 * scan_seconds(graph, topology)))))


def _steiner_cost(graph, topology) -> float:
    """Mt-KaHyPar's own mapping on the subtrees of at most 64 PEs: one call
    per such subtree (about k / 64) on its share of the edges."""
    from ..construct.partition import steiner_seconds

    return steiner_seconds(graph.symmetric.nnz, calls=max(topology.n_pes // 64, 1))


def large_start(graph, topology, seed: int = 0, threads: int = 1,
                budget: float | None = None) -> tuple[str, dict, float]:
    """auto's first start beyond LARGE_TASKS tasks, with its estimated
    seconds: the parallel multisection, KaMinPar fast on ``threads``
    threads for the large sub-problems (the top cuts, each followed by the
    chains of ``rebalance.py`` and FM on pairs of blocks), greedy growing
    and a search of each split for those of at most GROW_BELOW tasks
    (``construct/growing.py``), every level's at once
    (``docs/results/scale.md``).  Where the top cuts and the plain growing
    would take more than TOP_CUTS_SHARE of ``budget`` (KaMinPar's time
    grows faster than the graph: 2^24 tasks into 262144 nodes took 389 s
    on one thread), the start is greedy growing along the tree alone
    (``tree_growing.grow``, compiled passes).  Otherwise the searches get
    what the budget leaves, up to their defaults: a first round of FM, the
    grown splits' search (GROWN_SEARCH_WORK; 1.2 s of it lowered J 2 % at
    2^20), further rounds (PAIR_ROUNDS; three rounds 0.5 %)."""
    from ..construct.multisection import (GROWN_SEARCH_WORK, PAIR_ROUNDS, grow_seconds, grown_seconds,
                                          kaminpar_split_seconds, local_order_seconds)

    n, nnz = graph.n, graph.symmetric.nnz

    def cuts(rounds: int) -> float:  # the local order and the top cuts, with ``rounds`` of FM after each
        cost, tasks = local_order_seconds(n, nnz), n
        for parts in _splitting_levels(topology):
            if tasks <= GROW_BELOW:
                break
            calls = -(-n // tasks)  # the level's sub-problems, each a share of the graph
            cost += calls * kaminpar_split_seconds(tasks, -(-nnz // calls), parts, "fast", threads, rounds)
            tasks = -(-tasks // parts)
        return cost

    base = cuts(0) + grown_seconds(n, 0.0, threads)
    grown = grow_seconds(n, nnz)
    if budget is not None and base > TOP_CUTS_SHARE * budget and grown < base:
        return ("grow", {"seed": seed}, grown)
    work, rounds = GROWN_SEARCH_WORK, PAIR_ROUNDS
    if budget is not None:  # the searches take what the budget leaves, in the order of their J a second:
        left = budget - base  # a first round of FM, the grown splits' search, further rounds
        per_round = cuts(1) - cuts(0)
        rounds = 1 if left >= per_round else 0
        search = grown_seconds(n, GROWN_SEARCH_WORK, threads) - grown_seconds(n, 0.0, threads)
        left -= rounds * per_round
        work = GROWN_SEARCH_WORK * min(max(left, 0.0) / search, 1.0) if search > 0 else work
        left -= grown_seconds(n, work, threads) - grown_seconds(n, 0.0, threads)
        if rounds and per_round > 0:
            rounds = min(PAIR_ROUNDS, 1 + max(int(left // per_round), 0))
    opts = {"preset": "fast", "backend": "kaminpar", "seed": seed, "threads": threads, "grow_below": GROW_BELOW,
            "search_work": work, "pair_rounds": rounds}
    return ("multisection", opts, cuts(rounds) + grown_seconds(n, work, threads))


def _splitting_levels(topology) -> list[int]:
    """Children per splitting node, top down, along the first path (a
    uniform tree's arities, leaves last)."""
    out, node = [], topology.root
    while True:
        children = topology.children(node)
        if children.size == 0:
            return out
        if children.size > 1:
            out.append(int(children.size))
        node = int(children[0])


def candidates(graph, topology, seed: int = 0, budget: float | None = None,
               threads: int = 1) -> list[tuple[str, dict, float]]:
    """Every start auto may make, in order, with its estimated seconds
    (without the refinement that follows it).  The first is KaHIP fast,
    or beyond N2_MAX_TASKS tasks KaHIP eco when ``budget`` pays for it,
    the given order and the V-cycles on the better (``_eco_first``);
    beyond LARGE_TASKS the parallel multisection (``large_start``) goes
    before all of them; dense graphs have starts of their own
    (``_dense_candidates``)."""
    def ms(backend, preset, run_seed, steiner=False):
        cost = _multisection_cost(graph, topology, backend, preset)
        opts = {"preset": preset, "backend": backend, "seed": run_seed}
        if backend == "kaminpar":  # one thread: repeatable
            opts.update(threads=1, grow_below=GROW_BELOW)
        if backend == "mtkahypar":
            # its other presets differ from call to call even with one
            # thread and the same seed (auto on add32/512 gave J 52922,
            # 54866, 54470 in one process); over the small benchmark set
            # the deterministic ones give J 0.998 of them (geometric mean).
            # They are one preset whatever ours, and the seed picks the
            # vertex order Mt-KaHyPar sees (partition.py)
            opts.update(deterministic=True, threads=1)
        if steiner:  # Mt-KaHyPar's own mapping objective below 64 PEs: slower
            opts["steiner"] = True
            cost += _steiner_cost(graph, topology)
        return ("multisection", opts, cost)

    treematch_cost = _treematch_cost(graph, topology)
    if dense_graph(graph):
        return [r for r in _dense_candidates(ms, seed, treematch_cost) if r[0] in METHODS]
    multilevel_cost = _multilevel_cost(graph, topology)
    eco = ms("kahip", "eco", seed)
    eco_first = _eco_first(graph, topology, budget)
    runs = [_top_by_both(eco if eco_first else ms("kahip", "fast", seed), graph, topology),
            top_split(graph, topology, seed),
            ("identity", {"seed": seed}, 0.0), ("multilevel", {"seed": seed, "start": "best"}, multilevel_cost)]
    if _rebisect_pair_cost(graph, topology) is not None:  # priced with one pair: auto gives it what fits
        runs.append(("multilevel", {"seed": seed, "start": "best", "rebisect": "strong",
                                    "max_scans": _rebisect_scans(graph, topology, "strong")},
                     multilevel_cost / _ML_CYCLES + _rebisect_pair_cost(graph, topology)))
    runs += [ms("mtkahypar", "fast", seed)] + ([] if eco_first else [eco]) + [
            ms("mtkahypar", "fast", seed + 1), ms("mtkahypar", "eco", seed, True),
            ms("kahip", "strong", seed), ms("mtkahypar", "fast", seed + 2)]
    for i in range(1, 5):  # further seeds of both: on 2048 tasks the cuts of different seeds spread by 5-7%
        runs += [ms("kahip", "strong", seed + i), ms("mtkahypar", "fast", seed + 2 + i)]
    # last: on 16 graph models and 5 traffic matrices of the quality set it was never the best start (refined:
    # 1.004-1.005 x the best); GreedyAllC is not a start at all (refined: 1.05-2.06 x the best)
    runs.append(("treematch", {"seed": seed}, treematch_cost))
    if graph.n > LARGE_TASKS and graph.n <= topology.n_pes:  # the KaHIP top split alone: no start here
        runs = [large_start(graph, topology, seed, threads, budget)] + runs[:1] + runs[2:]
    return [r for r in runs if r[0] in METHODS]


def _dense_candidates(ms, seed: int, treematch_cost: float) -> list[tuple[str, dict, float]]:
    """The starts on a dense graph (``refine.swaps.dense_graph``), whose
    refinement scans with the connection cache.  There KaHIP is slow and
    cuts worse than KaMinPar and Mt-KaHyPar (an AMG-like graph of 1000
    tasks with 221 partners into 21 nodes: KaHIP fast 1.24 s CPU, cut
    2.23e9; eco 11.7x fast's time; KaMinPar 0.07 s, 1.99e9; Mt-KaHyPar 3.6
    s, 1.93e9), and Mt-KaHyPar's multisection is the start that pays:
    refined J 207.3e9 against 216.1-216.7e9 from KaMinPar's (fast, eco,
    strong alike).  So KaMinPar fast first (a start within any budget), the
    given order, Mt-KaHyPar, then further seeds of both; the multilevel
    V-cycles are no start here (their FM scans every edge per move: 8
    cycles doubled auto's time and left J 0.2 % higher than the same
    budget's kicks), the node-pair re-bisection (KaHIP) neither."""
    runs = [ms("kaminpar", "fast", seed), ("identity", {"seed": seed}, 0.0), ms("mtkahypar", "fast", seed),
            ms("kaminpar", "eco", seed)]
    for i in range(1, 5):
        runs += [ms("mtkahypar", "fast", seed + i), ms("kaminpar", "fast", seed + i)]
    runs.append(("treematch", {"seed": seed}, treematch_cost))
    return runs


def _treematch_cost(graph, topology) -> float:
    """Estimated seconds of TreeMatch with its final refinement, its
    exhaustive groupings included (``treematch.exhaustive_candidates``)."""
    from ..construct.treematch import exhaustive_candidates

    degree = graph.symmetric.nnz / max(graph.n, 1)
    dense = (degree / 8) ** _TREEMATCH_DENSE if dense_graph(graph) else 1.0
    arities = [level[0] for level in topology.level_arities()[::-1] if level]  # innermost first
    return _TREEMATCH[0] + graph.n * _TREEMATCH[1] + graph.symmetric.nnz * _TREEMATCH[2] * dense \
        + _TREEMATCH_CANDIDATE * exhaustive_candidates(graph.n, arities)


def _multilevel_cost(graph, topology) -> float:
    """Estimated seconds of the multilevel V-cycles on the best start."""
    return _ML_CYCLES * (graph.n * max(topology.max_depth, 1) * _PER_ML_TASK + refine_cost(graph, topology, True))


def _eco_first(graph, topology, budget: float | None) -> bool:
    """Beyond N2_MAX_TASKS tasks a start's refinement (N_C^10) costs about as
    much as the multisection, so few starts fit, and KaHIP eco's cut is worth
    more there than a second start: on add20, data, 3elt at 2048 tasks eco +
    refinement + V-cycles gave J 0.971-0.994 of fast + the same.
    Only when ``budget`` pays for eco, the given order and the V-cycles,
    each refined; otherwise fast, as below N2_MAX_TASKS."""
    if budget is None or graph.n <= N2_MAX_TASKS:
        return False
    need = _multisection_cost(graph, topology, "kahip", "eco") + _multilevel_cost(graph, topology) \
        + 3 * refine_cost(graph, topology, True)
    return need <= budget


def _top_by_both(start, graph, topology) -> tuple[str, dict, float]:
    """``start`` (a KaHIP multisection) with its top split made by Mt-KaHyPar
    as well (deterministic preset, one more call), the lower cut kept: the
    top cut weighs most in J, and neither backend's is always lower (add32
    at 2048 tasks into 32 nodes: KaHIP eco 654, Mt-KaHyPar 544-582 over
    three seeds; final J 5 % lower).  Below the top, one try (KaHIP).  Only
    where the top cut is above the groups of cores (``_top_above_groups``)."""
    if not _top_above_groups(topology):
        return start
    name, opts, cost = start
    return (name, {**opts, "backend": "both", "tries": 2, "deterministic": True, "threads": 1},
            cost + _mtkahypar_top_cost(graph, topology))


def _mtkahypar_top_cost(graph, topology) -> float:
    """Estimated seconds of Mt-KaHyPar's try at the top split (``_top_by_both``)."""
    from ..construct.multisection import split_seconds

    if not _top_above_groups(topology):
        return 0.0
    return split_seconds(graph.n, graph.symmetric.nnz, _top_parts(topology), "mtkahypar", "fast")


def _top_parts(topology) -> int:
    """Children of the first node that splits (the top cut's parts)."""
    return max(int(topology.children(topology.splitting_node()).size), 1)


def _top_above_groups(topology) -> bool:
    """Whether the top cut separates subtrees that are split at least twice
    more (nodes of groups of cores), not the groups of one node, which
    the exact split (``exact_groups``) already makes optimally: on the one-node
    models Mt-KaHyPar's try changed no J and took a third more time."""
    return topology.max_depth - int(topology.node_depth[topology.splitting_node()]) >= 3


def top_split(graph, topology, seed: int = 0) -> tuple[str, dict, float]:
    """The multisection of the top splitting level alone (KaHIP fast; the
    given order inside each subtree), with its estimated seconds: the start
    of an instance too large for a whole multisection within the budget
    (on a 2^17-task stencil the top cut takes a few seconds, the 2048
    16-way splits below it some 40 s at load 5).  Only where a whole
    multisection does not fit (``_ordered``)."""
    from ..construct.multisection import split_seconds

    cost = split_seconds(graph.n, graph.symmetric.nnz, _top_parts(topology), "kahip", "fast")
    return ("multisection", {"preset": "fast", "backend": "kahip", "seed": seed, "levels": 1}, cost)


def plan(graph, topology, time_limit: float | None, seed: int = 0,
         threads: int = 1) -> tuple[list[tuple[str, dict, float]], float]:
    """The starts auto may make for this instance and budget, in order,
    each with its estimated seconds, and their estimated total with the
    refinements: the estimates alone decide, before any run.  auto runs
    them in this order and skips one that no longer fits once the counted
    refinement work is known."""
    budget = budget_of(graph, topology, time_limit)
    refine = refine_cost(graph, topology, graph.n <= topology.n_pes)
    chosen, spent = [], 0.0
    quick = quick_starts(graph, topology, seed, refine)
    small = time_limit is not None and time_limit <= SMALL_LIMIT
    for name, opts, cost in _ordered(candidates(graph, topology, seed, budget, threads), budget, graph.n, quick,
                                     small):
        if chosen and spent + cost + refine > _start_budget(budget, len(chosen)):
            continue
        chosen.append((name, opts, cost))
        spent += cost + refine
    return chosen, spent


def _start_budget(budget: float, tried: int) -> float:
    """What the starts may spend: all of ``budget`` up to DIVERSE_STARTS
    starts, later ones leave SEARCH_SHARE to the iterated local search (on
    the benchmark models its kicks gained more than a further start)."""
    return budget if tried < DIVERSE_STARTS else budget * (1 - SEARCH_SHARE)


def _ordered(runs, budget: float, n: int, quick=(), small: bool = False):
    """The candidates in the order auto tries them.  The top level's split
    alone (``top_split``, second) is a start only when the budget cannot
    pay for the whole first multisection of a large instance; it then goes
    first, since refining an arbitrary given order of 2^15 tasks within a
    few seconds leaves J several times higher.  When the budget cannot pay
    for that either, or for the first multisection of a small instance (up
    to N2_MAX_TASKS), the ``quick`` constructions that fit it go first,
    cheapest first (``quick_starts``: at 0.5 s, TreeMatch's J on NPB MG of
    1024 ranks was 3 % below auto's refined given order), else the given
    order (no partitioning: only its refinement, which the budget limits,
    costs).  Under a ``small`` time limit (SMALL_LIMIT, what reorder_comm
    plans for) the quick constructions that fit go first whatever else
    fits: where the partitioners run slower than priced (a loaded machine)
    they are what the deadline leaves.  Nothing here sees whether the budget
    is a time or a work limit: both plan alike."""
    fits = sorted((r for r in quick if r[2] <= budget), key=lambda r: r[2])
    if len(runs) < 2 or runs[1][1].get("levels") != 1:
        return runs  # beyond LARGE_TASKS or dense: KaMinPar's multisection first, whatever the budget
    whole, top, rest = runs[0], runs[1], runs[2:]
    first = fits if small else []
    if whole[2] <= budget:
        return first + [whole] + rest
    if n > N2_MAX_TASKS and top[2] <= budget:
        return first + [top] + rest
    return fits + sorted([whole] + rest, key=lambda r: r[2] > 0)  # stable: the zero-cost identity first


def quick_starts(graph, topology, seed: int, refine: float) -> list[tuple[str, dict, float]]:
    """Constructions cheap enough for a budget that pays for no KaHIP
    multisection, each priced with the refinement that follows it: KaMinPar's
    multisection (the top cut, grown nodes) and TreeMatch."""
    opts = {"preset": "fast", "backend": "kaminpar", "seed": seed, "threads": 1, "grow_below": GROW_BELOW}
    runs = [("multisection", opts, _multisection_cost(graph, topology, "kaminpar", "fast")),
            ("treematch", {"seed": seed}, _treematch_cost(graph, topology))]
    return [(name, o, cost + refine) for name, o, cost in runs if name in METHODS]


@register("auto", "best J of multisection / GreedyAllC / TreeMatch runs with swap refinement "
                  "within time_limit seconds (default 10; deterministic per seed and budget; "
                  "workers=N: multisections in N processes, same result; default the cores; beyond "
                  "32768 tasks KaMinPar's threads, where only workers=1 repeats exactly)",
          machines=("tree", "mesh"))
def auto(graph, topology, *, seed=0, eps=None, time_limit=None, workers=None, deadline=None, **options):
    deadline = Deadline.of(deadline)
    if not isinstance(topology, Topology):  # a mesh/torus: the tree methods do not apply
        return METHODS["mesh_auto"].fn(graph, topology, seed=seed, eps=eps, time_limit=time_limit, deadline=deadline,
                                        **options)
    if eps is not None or graph.n > topology.n_pes:  # many tasks per PE: a portfolio of its own
        from .many_to_one import auto_many  # loaded only for many tasks per PE

        return auto_many(graph, topology, seed=seed, eps=eps, time_limit=time_limit, workers=workers,
                         deadline=deadline)
    best_pe = np.arange(graph.n, dtype=np.int64)  # the given order: one task per PE
    if deadline.expired():  # reading and the report's first half took the time: not even its J
        return best_pe
    best_j = mapping_cost(graph, topology, best_pe)
    budget = budget_of(graph, topology, time_limit)
    refine = refine_cost(graph, topology, True)
    spent, idle, repeats, tried = 0.0, 0, 0, 0
    began, spent_then = time.monotonic(), 0.0  # the pace is measured from the second start on
    starts, _ = plan(graph, topology, time_limit, seed, workers_option(workers))
    given_later = any(name == "identity" for name, _, _ in starts[1:])
    deferred = None  # the first start's unrefined mapping, when the given order was refined in its place
    for name, opts, cost in starts:
        if deadline.expired():
            break
        if name == "identity" and deferred is not None:  # the given order went first: the first start's turn
            name = "deferred"
        if tried and spent + cost + refine > _start_budget(budget, tried):
            continue  # the counted work left no room: a cheaper later one still may fit
        opts = dict(opts)
        if opts.get("rebisect"):  # as many subtree pairs (heaviest first) as the budget pays for
            pair, k = _rebisect_pair_cost(graph, topology), topology.n_pes // top_subtree_size(topology)
            opts["max_pairs"] = min(int((_start_budget(budget, tried) - spent - refine - cost) // pair) + 1,
                                    k * (k - 1) // 2)
            cost += (opts["max_pairs"] - 1) * pair
        if tried >= DIVERSE_STARTS and (repeats >= START_PATIENCE or idle >= IDLE_STARTS):
            break  # converged: the stronger presets keep finding the same J, or none does better
        if tried and not deadline.allows((cost + first_use(opts)) * slowness(began, spent - spent_then)):
            continue  # it would end after the deadline (the first start is cut inside instead)
        run_seed = opts.pop("seed")
        if name == "multisection" and opts.get("backend") != "kaminpar":  # the result does not depend on it
            opts["workers"] = workers
        if opts.get("start") == "best":  # V-cycles on the best mapping so far
            opts["start"] = best_pe
        spent += cost
        if name == "deferred":
            pe = deferred
        else:
            pe = np.asarray(METHODS[name].fn(graph, topology, seed=run_seed, deadline=deadline, **opts))
        if not tried and name != "identity" and mapping_cost(graph, topology, pe) > best_j:
            # the given order is the better start: refine it first (the refinement the budget always
            # pays for, and the one a deadline cuts last), the first start in the given order's place
            deferred, pe = (pe if given_later else None), np.arange(graph.n, dtype=np.int64)
        # the first start gets at least about one refinement pass, whatever the budget
        floor = refine / REFINE_PASSES if not tried else 0.0
        tried += 1
        pe, work = refine_start(graph, topology, pe, max(budget - spent, floor), run_seed, deadline)
        spent += work
        j = mapping_cost(graph, topology, pe)
        gain = j < best_j * (1 - 1e-9)
        idle = 0 if gain else idle + 1
        repeats = 0 if gain or j > best_j * (1 + 1e-9) else repeats + 1
        if j < best_j:
            best_pe, best_j = pe, j
        if tried == 1:  # the first start paid the one-off costs (imports)
            began, spent_then = time.monotonic(), spent
    best_pe, best_j = iterated_search(graph, topology, best_pe, best_j, seed=seed, budget=budget - spent,
                                      deadline=deadline)
    # then, on top of the budget, what the kicks never make: node-pair re-bisection, cyclic exchanges
    best_pe, best_j, _ = rebisect_heaviest(graph, topology, best_pe, best_j, REBISECT_SHARE * budget, seed,
                                           deadline)
    best_pe, best_j, _ = cycle_exchanges(graph, topology, best_pe, best_j, CYCLE_SHARE * budget, seed, deadline)
    best_pe, best_j, _ = exact_groups(graph, topology, best_pe, best_j, EXACT_SHARE * budget, seed, deadline)
    if graph.n < topology.n_pes:
        best_pe, best_j = _use_free_pes(graph, topology, best_pe, best_j, seed, deadline)
    return best_pe


def rebisect_heaviest(graph, topology, pe_of_task, j: float, budget: float, seed: int, deadline: Deadline):
    """Re-bisection of the top-level subtree pairs with the most traffic
    between them (``refine/rebisect.py``, REBISECT_PRESET with
    REBISECT_SEEDS seeds), as many as ``budget``
    (estimated seconds) pays for, at least MIN_REBISECT_PAIRS up to
    N2_MAX_TASKS tasks: the 26-task group Mt-KaHyPar's mapping of add32/256
    puts on the other node of a pair (``benchmarks/quality_witness.py``) is out of reach of
    swaps, the V-cycles' FM and the kicks, and the heaviest pair alone
    finds it (with KaHIP's slack, J 0.967 x).  Returns the mapping, its J and the work's estimated seconds;
    never a higher J."""
    pair = _rebisect_pair_cost(graph, topology, REBISECT_PRESET)
    if pair is None:
        return pe_of_task, j, 0.0
    pair *= REBISECT_SEEDS
    k = topology.n_pes // top_subtree_size(topology)
    least = MIN_REBISECT_PAIRS if graph.n <= N2_MAX_TASKS and not dense_graph(graph) else 0  # KaHIP is slow there
    pairs = min(max(int(budget / pair), least), k * (k - 1) // 2)
    if pairs < 1 or not deadline.allows(pair):  # a KaHIP call cannot be cut: the first pair must fit
        return pe_of_task, j, 0.0
    pe = rebisect_pairs(graph, topology, pe_of_task, preset=REBISECT_PRESET, seed=seed, seeds=REBISECT_SEEDS,
                        max_pairs=pairs, max_scans=_rebisect_scans(graph, topology, REBISECT_PRESET),
                        deadline=deadline)
    cj = mapping_cost(graph, topology, pe)
    return (pe, cj, pairs * pair) if cj < j else (pe_of_task, j, pairs * pair)


def cycle_exchanges(graph, topology, pe_of_task, j: float, budget: float, seed: int, deadline: Deadline):
    """Cyclic exchanges of tasks and task pairs among the groups of every
    node (``refine/cycles.py``: moves no swap sequence makes, e.g. the five
    pairs Mt-KaHyPar's mapping of data/128 moves around five groups), as many
    rounds as ``budget`` (estimated seconds) pays for (at least MIN_CYCLE_ROUNDS
    up to N2_MAX_TASKS tasks: the default budget of a 128-task model pays for
    none), then swap refinement
    around the moved tasks; returns the mapping, its J and the work's
    estimated seconds.  Never a higher J."""
    per_round = graph.n * _PER_CYCLE_TASK * memory_factor(graph.n)
    rounds = max(int(budget / per_round), MIN_CYCLE_ROUNDS if graph.n <= N2_MAX_TASKS else 0)
    if rounds < 1:
        return pe_of_task, j, 0.0
    pe, removed, made = cycle_refine(graph, topology, pe_of_task, max_rounds=rounds, deadline=deadline)
    return _settle(graph, topology, pe_of_task, j, pe, removed, made * per_round, budget, seed, deadline)


def exact_groups(graph, topology, pe_of_task, j: float, budget: float, seed: int, deadline: Deadline):
    """The optimal split of the nodes' tasks into their leaf groups
    (``refine/exact_groups.py``: every node's LP, then branch and bounds
    where it is fractional), as much as ``budget`` (estimated seconds) pays
    for (at least MIN_EXACT_WORK: on data/64 and crack/64 it found the
    optimum, 0.3 % and 0.1 % below what the swaps, kicks and cycles had
    stopped at, on traffic:btmz 0.6 % below, where the LP's optimum is
    integral), then swap refinement around the moved tasks; returns the
    mapping, its J and the work's estimated seconds.  Never a higher J."""
    if not deadline.allows(setup_seconds(graph)):  # its passes over the graph before the first node
        return pe_of_task, j, 0.0
    work = max(int(budget / _PER_PIECE), MIN_EXACT_WORK)
    pe, removed, work = exact_group_refine(graph, topology, pe_of_task, max_work=work, deadline=deadline)
    return _settle(graph, topology, pe_of_task, j, pe, removed, work * _PER_PIECE, budget, seed, deadline)


def _settle(graph, topology, before, j: float, pe, removed: float, work: float, budget: float, seed: int,
            deadline: Deadline):
    """After a pass that moved tasks (``removed``: the J it removed, ``work``:
    its estimated seconds): swap refinement around the moved tasks with what
    ``budget`` has left; the mapping, its J and the work, or ``before`` when
    J did not drop."""
    if removed <= 0:
        return before, j, work
    if not deadline.allows(setup_seconds(graph)):  # the refinement's set-up cannot be cut: the pass as it is
        return pe, j - removed, work
    cap = max(int((budget - work) / scan_seconds(graph, topology)), 1)
    pe, scans, cj = refine_around(graph, topology, pe, np.flatnonzero(pe != before), seed=seed,
                                  max_scans=cap, deadline=deadline)
    work += scans * scan_seconds(graph, topology)
    return (pe, cj, work) if cj < j else (before, j, work)


def _use_free_pes(graph, topology, pe_of_task, j: float, seed: int, deadline: Deadline):
    """With fewer tasks than PEs a swap never uses a free PE: moves into free
    PEs (``move_refine``) and swap refinement alternate while the moves
    lower J, up to FREE_PE_ROUNDS times.  On auto's result for 3elt, uk and
    data models of 200-400 tasks on 256-512 PEs: J 0-6% lower in 0.02 s.
    On a dense graph the swaps scan around the moved tasks only (the
    mapping was swap-optimal before them): a whole refinement per round
    there took 25 s of an AMG-like graph's 4096 tasks on 4128 PEs."""
    pe = pe_of_task
    for r in range(FREE_PE_ROUNDS):
        if deadline.expired():
            break
        moved = move_refine(graph, topology, pe, eps=None, seed=seed + r, deadline=deadline)
        if mapping_cost(graph, topology, moved) >= j * (1 - 1e-12):
            break
        if dense_graph(graph):
            cap = max(int(refine_cost(graph, topology, True) / scan_seconds(graph, topology)), 1)
            pe, _, _ = refine_around(graph, topology, moved, np.flatnonzero(moved != pe), seed=seed + r,
                                     max_scans=cap, deadline=deadline)
        else:
            pe, _ = refine_start(graph, topology, moved, refine_cost(graph, topology, True), seed + r, deadline)
        j = mapping_cost(graph, topology, pe)
    return pe, j


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


def iterated_search(graph, topology, pe_of_task, j, *, seed: int, budget: float | None = None,
                    rounds: int | None = None, deadline: Deadline | None = None):
    """Iterated local search: kick the best mapping, refine, keep it when J
    drops.  Stops when the work done (pairs evaluated and kicks, priced by
    the work model) reaches ``budget`` seconds, after ``rounds`` kicks, or
    once converged: as many kicks without a gain as were made up to the
    last gain, at least PATIENCE and at least enough to touch every task
    COVER_TOUCHES times on average (4 n / 8 kicks: gains on the 512-task
    benchmark models still come after 1000 kicks).  All three are counts, never the
    clock, so the result is deterministic unless the ``deadline`` (checked
    between kicks and inside each refinement) cuts it first."""
    deadline = Deadline.of(deadline)
    rng = np.random.default_rng([seed, 7])
    best_pe, best_j, last_gain = pe_of_task, j, 0
    if not deadline.allows(setup_seconds(graph)):  # each kick's refinement sums over every task first
        return best_pe, best_j
    per_scan = scan_seconds(graph, topology)
    per_kick = _PER_KICK + graph.symmetric.nnz * _PER_KICK_EDGE
    patience = max(PATIENCE, COVER_TOUCHES * graph.n // KICK_TASKS)
    spent, r = 0.0, 0
    while (rounds is None or r < rounds) and (budget is None or spent < budget) \
            and r - last_gain < max(patience, last_gain) and not deadline.expired():
        kicked = kick(graph, best_pe, rng)
        # best_pe is swap-optimal (or nearly, beyond N2_MAX_TASKS): search only around the kick
        cap = None if budget is None else int((budget - spent) / per_scan) + 1
        cand, scans, cj = refine_around(graph, topology, kicked, np.flatnonzero(kicked != best_pe),
                                        seed=seed + r, max_scans=cap, deadline=deadline)
        spent += per_kick + scans * per_scan
        r += 1
        if cj < best_j * (1 - 1e-12):
            best_pe, best_j, last_gain = cand, cj, r
    return best_pe, best_j
