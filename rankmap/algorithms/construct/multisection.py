"""Top-down hierarchical multisection (Schulz & Traff sec. 3.1; SharedMap).

Partition the tasks into the root's children, each part into that child's
children, and so on down to the PEs; the tasks that end in a leaf's part run
on that PE.  Each part's target weight is proportional to the PEs below its
child, so irregular trees (children of different sizes) work as well as
uniform hierarchies.

One-to-one: every part must hold exactly as many tasks as its subtree will
receive (all its PEs when n == k); the backend is asked for perfect balance
and ``repair_balance`` fixes what it misses, so the result is always a
permutation.  Many-to-one: SharedMap's adaptive imbalance (Lemma 5.1)

    eps' = ((1 + eps) * k_sub * c(V) / (k * c(V_sub))) ** (1 / depth) - 1

for a sub-problem of weight c(V_sub) over k_sub PEs with ``depth`` levels
still below it keeps the final PE loads within (1 + eps) * c(V) / k; parts
are repaired to those bounds, and to L_max at the PEs.

Threads would not help: kaffpa holds the GIL (see partition.py), and
Mt-KaHyPar already uses ``threads`` inside each call.  ``workers`` > 1
uses processes instead: the top levels split serially until there are
SUBTREES_PER_WORKER subtrees per worker, then each subtree is multisected
whole in a worker (instances of at least PARALLEL_MIN_TASKS tasks).

A ``deadline`` is checked before every sub-problem (one partitioning call
is not interrupted); once it has passed, the sub-problems left are placed
in the given order inside their subtrees (``_place_in_order``), so the
result is always a valid mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...cores import workers_option
from ...deadline import Deadline
from ...graph import CommGraph
from ...mapping import DEFAULT_EPS, balance_report
from ...topology import Topology
from ..registry import register
from ..pool import fork_server_pool, without_main
from .partition import (BACKENDS, first_call_seconds, mtkahypar_map, partition_graph, partition_seconds,
                        repair_balance, steiner_seconds)
from .pair_fm import pair_seconds, refine_pairs
from .rebalance import balance_along_paths, balance_seconds


def _height(topology: Topology) -> np.ndarray:
    """Levels below every node (0 for a leaf)."""
    h = np.zeros(topology.n_nodes, dtype=np.int64)
    depth, parent = topology.node_depth, topology.parent
    for d in range(topology.max_depth, 0, -1):
        nodes = np.flatnonzero(depth == d)
        np.maximum.at(h, parent[nodes], h[nodes] + 1)
    return h


def task_counts(n_tasks: int, pes: np.ndarray) -> np.ndarray:
    """One-to-one with fewer tasks than PEs: split ``n_tasks`` over children
    in proportion to their PEs (largest remainder), never more than a
    child's PEs."""
    share = n_tasks * pes / pes.sum()
    counts = np.minimum(np.floor(share).astype(np.int64), pes)
    rest = n_tasks - int(counts.sum())
    order = np.argsort(-(share - counts), kind="stable")
    while rest > 0:
        for i in order.tolist():
            if rest and counts[i] < pes[i]:
                counts[i] += 1
                rest -= 1
    return counts


def _distance_below(topology: Topology) -> np.ndarray:
    """Sum of the distances of the splitting levels from every node down
    (the largest over its children): what a task's cut edges can cost below."""
    splits = np.diff(topology.child_ptr) > 1
    below = np.where(splits, topology.node_distance, 0.0).astype(np.float64)
    depth, parent = topology.node_depth, topology.parent
    deepest = np.zeros(topology.n_nodes)
    for d in range(topology.max_depth, 0, -1):
        nodes = np.flatnonzero(depth == d)
        np.maximum.at(deepest, parent[nodes], below[nodes] + deepest[nodes])
    return below + deepest


def _tries(top_tries: int, distance: float, top_distance: float) -> int:
    """Partitions tried for a sub-problem: ``top_tries`` where a cut edge
    costs the most, scaled down with the distance of the level (a cut at
    distance 1 under a top level at 100 gets one try)."""
    if top_tries <= 1 or top_distance <= 0:
        return 1
    return max(1, int(round(top_tries * float(distance) / top_distance)))


def _cut(adj, block: np.ndarray) -> float:
    rows = np.repeat(np.arange(adj.shape[0]), np.diff(adj.indptr))
    return float(adj.data[block[rows] != block[adj.indices]].sum())


GROWN_SEARCH_WORK = 300.0  # swap evaluations per task of the search after growing (2^20-task stencil on
                           # 4:16:16384: 150 took J 8.06e7 -> 7.92e7, 300 to 7.89e7 in 1.2 s on two threads)
PAIR_ROUNDS = 3            # rounds of FM on matched pairs after a KaMinPar split (``pair_fm.ROUNDS``)
LOCAL_ORDER_MIN_TASKS = 1 << 16  # from this many tasks KaMinPar's multisection runs on the graph in a local order
# seconds, one core: the local order per task and adjacency entry (2^20-task stencil 0.84 s), the growing per
# task, and the search per task and unit of work (the nodes of 2^17- and 2^20-task stencils into 16 x 4: growing
# 2.8-4.1e-7 s per task, with the search at 300 2.35-2.44e-6 s; two threads 1.5-1.9 x faster)
_PER_ORDERED_ENTRY = 1.6e-7
_PER_GROWN_TASK = 4e-7
_PER_SEARCH_WORK = 7e-9
# KaMinPar on a graph in the local order, against the price of its scrambled ids (fast, one thread: 2^17 tasks
# 0.50 s against 0.57, 2^20 4.2 s against 5.8)
LOCAL_ORDER_SPEEDUP = 0.7


def local_order_seconds(n: int, nnz: int) -> float:
    """Estimated seconds of ``_in_local_order`` (0 below LOCAL_ORDER_MIN_TASKS)."""
    return _PER_ORDERED_ENTRY * (n + nnz) if n >= LOCAL_ORDER_MIN_TASKS else 0.0


def grown_seconds(n: int, search_work: float = GROWN_SEARCH_WORK, threads: int = 1) -> float:
    """Estimated seconds of growing ``n`` tasks' small sub-problems and
    searching their splits (``growing.grow_split``: on threads, uncut)."""
    return n * (_PER_GROWN_TASK + _PER_SEARCH_WORK * search_work) / max(int(threads), 1)


def kaminpar_split_seconds(n: int, nnz: int, parts: int, preset: str = "fast", threads: int = 1,
                           pair_rounds: int = PAIR_ROUNDS) -> float:
    """Estimated seconds of one one-to-one KaMinPar split of a multisection
    with slack (``_split``): the call (on the local order from
    LOCAL_ORDER_MIN_TASKS tasks), the chains that restore the sizes and the
    rounds of FM on pairs."""
    call = partition_seconds(n, nnz, parts, "kaminpar", preset, threads)
    if n >= LOCAL_ORDER_MIN_TASKS:
        call *= LOCAL_ORDER_SPEEDUP
    return call + balance_seconds(n) + pair_seconds(n, nnz, pair_rounds, threads)


@dataclass(frozen=True)
class _Setting:
    """What every sub-problem of one multisection needs besides its tasks:
    built once, and sent once to each worker process."""
    topology: Topology
    height: np.ndarray
    below: np.ndarray
    top_distance: float
    one_to_one: bool
    eps: float | None
    l_max: float | None
    total: float
    backend: str
    preset: str
    threads: int
    steiner: bool
    grow_below: int
    tries: int
    fast_below: float
    deterministic: bool
    slack_by_distance: bool
    seed: int
    pair_rounds: int
    search_work: float


def multisection_map(graph: CommGraph, topology: Topology, *, seed: int = 0,
                     eps: float | None = None, backend: str = "kahip", preset: str = "eco",
                     threads: int = 1, steiner: bool = False, tries: int = 1,
                     fast_below: float = 0.0, deterministic: bool = False,
                     slack_by_distance: bool = False, workers: int | None = None, levels: int | None = None,
                     grow_below: int = 0, pair_rounds: int = PAIR_ROUNDS, search_work: float = GROWN_SEARCH_WORK,
                     deadline: Deadline | None = None) -> np.ndarray:
    """``pe_of_task`` by hierarchical multisection of ``graph`` along
    ``topology`` (see the module docstring).  With ``tries`` > 1 every
    sub-problem is partitioned several times (further seeds; with
    ``backend="both"`` KaHIP and Mt-KaHyPar in turn) and the smallest cut
    kept, ``tries`` times at the most expensive level, proportionally fewer
    where a cut edge costs less: the top levels carry most of J.  Likewise
    sub-problems whose cut costs less than ``fast_below`` times the top
    level's (e.g. 0.05: the cores of a socket under 1:10:100) use the fast
    preset: there most calls are made and least of J is decided.
    ``deterministic`` asks Mt-KaHyPar for its deterministic presets (its
    others differ from call to call, see partition.py).
    ``slack_by_distance`` (many-to-one): instead of Lemma 5.1's equal
    factor per level, a sub-problem may use the share d / (d + distances
    of the levels below) of the room that L_max leaves it, so an expensive
    top cut gets most of the imbalance and the cheap levels below split
    nearly evenly; the final loads stay within L_max either way.
    ``workers`` > 1: once the top levels have made enough independent
    subtrees, they are multisected in that many processes (None: the
    cores available, one inside an MPI job; ``rankmap.cores``).  A sub-problem's
    seed is ``seed`` plus its tree node (plus the try), so the result is the
    same for any number of workers.  ``levels``: only the top that many
    splitting levels are partitioned, the tasks of each subtree below are
    placed in the given order (``_place_in_order``): the expensive cuts at
    a fraction of the calls, for a refinement to finish.  ``grow_below``
    (one-to-one): sub-problems of at most that many tasks are split by
    greedy growing instead of a partitioner (``growing.py``), all of a
    level in one compiled call on ``threads`` threads: the thousands of
    small sub-problems under the top cuts of a large instance, where a
    partitioner's call costs more than its split; each grown split is
    then improved by an iterated local search of ``search_work``
    evaluations per task (``_kernels.improve_split``).  KaMinPar's one-to-one
    splits are asked for ONE_TO_ONE_SLACK, restored to exact sizes by
    chains of moves (``rebalance.py``) and their boundaries refined in
    ``pair_rounds`` rounds of FM on matched pairs of blocks
    (``pair_fm.py``); from LOCAL_ORDER_MIN_TASKS tasks KaMinPar's
    multisection runs on the graph in a local order (``_in_local_order``)."""
    if backend not in BACKENDS + ("both",):
        raise ValueError(f"unknown partitioning backend {backend!r}; choose from {', '.join(BACKENDS + ('both',))}")
    if steiner and backend == "both":
        backend = "mtkahypar"
    n, k = graph.n, topology.n_pes
    one_to_one = eps is None and n <= k
    if eps is None and not one_to_one:
        eps = DEFAULT_EPS
    w = np.ones(n) if one_to_one else graph.vertex_weights
    l_max = None if one_to_one else balance_report(np.zeros(0, dtype=np.int64), w, k, eps)["L_max"]
    splits = np.diff(topology.child_ptr) > 1  # nodes with one child split nothing
    setting = _Setting(topology, _height(topology), _distance_below(topology),
                       float(topology.node_distance[splits].max(initial=0.0)), one_to_one, eps, l_max,
                       float(w.sum()), backend, preset, int(threads), bool(steiner), int(grow_below) if one_to_one else 0,
                       int(tries), float(fast_below),
                       bool(deterministic), bool(slack_by_distance), int(seed), int(pair_rounds), float(search_work))
    deadline = Deadline.of(deadline)
    sym, order = graph.symmetric, None
    if one_to_one and backend == "kaminpar" and n >= LOCAL_ORDER_MIN_TASKS:
        sym, order = _in_local_order(sym)
    pe_of_task = np.full(n, -1, dtype=np.int64)
    frontier = [(topology.root, np.arange(n, dtype=np.int64))]
    workers = workers_option(workers)
    parallel = (workers > 1 and n >= PARALLEL_MIN_TASKS and levels is None and backend != "kaminpar"
                and deadline.remaining() > POOL_PAYS_BACK_SECONDS)  # KaMinPar and growing run on threads
    split = 0
    while frontier and not deadline.expired() and (not parallel or len(frontier) < SUBTREES_PER_WORKER * workers) \
            and (levels is None or split < levels):
        frontier = _split_level(setting, sym, w, frontier, pe_of_task, deadline)
        split += 1
    if frontier and (deadline.expired() or levels is not None):
        _place_in_order(setting, w, frontier, pe_of_task)
    elif frontier:  # the independent subtrees, each multisected whole by a worker
        jobs = [(node, sym[tasks][:, tasks], w[tasks], deadline) for node, tasks in frontier]
        with _worker_pool(workers, setting) as pool:
            with without_main():  # map submits every job, so starts every process, here
                results = pool.map(_subtree_job, jobs, chunksize=1)
            for (_, tasks), (pe, cut) in zip(frontier, results):
                pe_of_task[tasks] = pe
                deadline.hit |= cut
    if order is not None:  # back to the given task numbers
        pe_of_task[order] = pe_of_task.copy()
    return pe_of_task


def _in_local_order(sym):
    """``sym`` renumbered in reverse Cuthill-McKee order (neighbours near in
    memory) and the order (new task i is old task ``order[i]``).  On a
    scrambled 2^20-task stencil the order and the copy took 0.8 s and saved
    KaMinPar 1.2 of its 3.5 s on two threads, and the repair, the pairs'
    FM and the growing after it run on neighbours that share cache lines."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    from ...graph import renumbered_rows

    order = reverse_cuthill_mckee(sym, symmetric_mode=True).astype(np.int64)
    indptr, indices, data, _ = renumbered_rows(sym.indptr, sym.indices, np.asarray(sym.data, dtype=np.float64), order)
    return sp.csr_array((data, indices, indptr), shape=sym.shape), order


PARALLEL_MIN_TASKS = 4096  # fewer tasks than this are multisected in this process, whatever ``workers``
SUBTREES_PER_WORKER = 4    # split serially until there are this many subtrees per worker
POOL_PAYS_BACK_SECONDS = 3.0  # the worker processes take 1.1-1.3 s to start: with less time left, one process


def _descend(setting: _Setting, sym, w, node: int, deadline: Deadline) -> np.ndarray:
    """Multisection of the tasks of ``sym`` (all of them) below ``node``:
    every task's PE."""
    pe_of_task = np.full(sym.shape[0], -1, dtype=np.int64)
    frontier = [(node, np.arange(sym.shape[0], dtype=np.int64))]
    while frontier and not deadline.expired():
        frontier = _split_level(setting, sym, w, frontier, pe_of_task, deadline)
    _place_in_order(setting, w, frontier, pe_of_task)
    return pe_of_task


def _place_in_order(setting: _Setting, w, frontier: list, pe_of_task: np.ndarray) -> None:
    """The deadline's fallback: every (node, tasks) of ``frontier`` on the
    PEs below ``node`` in the given order, one task per PE (one-to-one; a
    sub-problem never holds more tasks than its PEs) or consecutive runs
    of tasks of equal weight per PE (else ``_least_loaded_fill``)."""
    topology = setting.topology
    for node, tasks in frontier:
        lo, hi = topology.leaf_range(node)
        if setting.one_to_one:
            pe_of_task[tasks] = lo + np.arange(tasks.size)
            continue
        ws = w[tasks]
        before = np.cumsum(ws) - ws  # equal shares of the weight, in order
        pe = lo + np.minimum((before * (hi - lo) / max(float(ws.sum()), 1e-300)).astype(np.int64), hi - lo - 1)
        if np.bincount(pe - lo, weights=ws, minlength=hi - lo).max(initial=0.0) > setting.l_max:
            pe = _least_loaded_fill(ws, lo, hi, setting.l_max)
        pe_of_task[tasks] = pe


def _least_loaded_fill(ws: np.ndarray, lo: int, hi: int, l_max: float) -> np.ndarray:
    """Heaviest task first onto the least loaded of PEs lo..hi-1, each
    within ``l_max`` (the in-order split's fallback for unequal weights)."""
    import heapq

    heap = [(0.0, pe) for pe in range(lo, hi)]
    out = np.empty(ws.size, dtype=np.int64)
    for i in np.argsort(-ws, kind="stable").tolist():
        load, pe = heapq.heappop(heap)
        if load + ws[i] > l_max:
            raise ValueError("multisection: the deadline passed and the tasks left do not fit their "
                             "subtree's PEs")
        out[i] = pe
        heapq.heappush(heap, (load + float(ws[i]), pe))
    return out


def _split_level(setting: _Setting, sym, w, frontier: list, pe_of_task: np.ndarray, deadline: Deadline) -> list:
    """One level: split the tasks of every (node, tasks) of ``frontier``
    among the node's children; tasks that reach a leaf (or a subtree that
    Mt-KaHyPar maps whole) get their PE in ``pe_of_task``.  Returns the next
    level's (node, tasks); after the ``deadline`` the sub-problems not yet
    split are returned as they are."""
    s, topology = setting, setting.topology
    below_next, grown, counts_of = [], [], {}
    for node, tasks in frontier:
        if deadline.expired():
            below_next.append((node, tasks))
            continue
        node = topology.splitting_node(node)  # a level with one child splits nothing
        children = topology.children(node)
        if children.size == 0:
            pe_of_task[tasks] = topology.leaf_start[node]
            continue
        if tasks.size == 0:
            continue
        if s.one_to_one and s.height[node] == 1:
            # leaves below: any order costs the same, and this is the
            # order a partition into single-PE children would give
            pe_of_task[tasks] = topology.leaf_start[children[:tasks.size]]
            continue
        sub_seed = s.seed + node
        pes = topology.leaf_stop[children] - topology.leaf_start[children]
        if tasks.size <= s.grow_below:  # grown below, with the level's other small ones
            key = (tasks.size, pes.tobytes())  # thousands alike: their counts computed once
            if key not in counts_of:
                counts_of[key] = task_counts(tasks.size, pes)
            grown.append((children, tasks, counts_of[key]))
            continue
        adj = sym if tasks.size == sym.shape[0] else sym[tasks][:, tasks]  # the whole graph: no copy
        ws = w[tasks]
        lo, hi = topology.leaf_range(node)
        if s.steiner and s.height[node] > 1 and hi - lo <= 64 \
                and deadline.allows(steiner_seconds(adj.nnz) + first_call_seconds("mtkahypar")):
            # Mt-KaHyPar maps the rest of this subtree in one call (one that cannot end
            # before the deadline is not made: this subtree is split as without steiner)
            c_sub = float(ws.sum())
            sub_eps = s.eps if s.one_to_one else max(s.l_max * (hi - lo) / max(c_sub, 1e-300) - 1.0, 0.0)
            caps = np.ones(hi - lo) if s.one_to_one else np.full(hi - lo, float(s.l_max))
            part = mtkahypar_map(adj, ws, lambda p, q: topology.distance(p + lo, q + lo), caps,
                                 0.0 if s.one_to_one else sub_eps, preset=s.preset, seed=sub_seed,
                                 threads=s.threads)
            pe_of_task[tasks] = lo + repair_balance(adj, ws, part, caps)
            continue
        _append_children(below_next, children, tasks, _split(s, node, adj, ws, pes, sub_seed, deadline))
    if grown:
        from .growing import grow_split

        blocks = grow_split(sym, [t for _, t, _ in grown], [c for _, _, c in grown], s.threads,
                            search_work=search_work_allowed(sum(t.size for _, t, _ in grown), s.search_work,
                                                            s.threads, deadline), deadline=deadline)
        _settle_grown(s, [c for c, _, _ in grown], [t for _, t, _ in grown], blocks, pe_of_task, below_next)
    return below_next


def search_work_allowed(n: int, search_work: float, threads: int, deadline: Deadline) -> float:
    """The grown splits' search work per task for ``n`` tasks on ``threads``
    threads: ``search_work``, or where the deadline does not allow its
    price (a slow step before it), as much as the time left pays for after
    the growing itself (a cut)."""
    if deadline.allows(grown_seconds(n, search_work, threads)):
        return search_work
    per_work = grown_seconds(n, 1.0, threads) - grown_seconds(n, 0.0, threads)
    left = deadline.remaining() - grown_seconds(n, 0.0, threads)
    return float(min(max(left / per_work, 0.0), search_work)) if per_work > 0 else 0.0


def _settle_grown(s: _Setting, children: list, tasks: list, blocks: list, pe_of_task: np.ndarray,
                  below_next: list) -> None:
    """The children of grown sub-problems (``children[i]``, ``tasks[i]``
    split by ``blocks[i]``; growing is one-to-one), at once: a child that is
    a leaf or has only leaves below takes its PEs here, its tasks in order
    (as ``_split_level`` would: at 2^20 tasks on 4:16:16384 its loop over
    the 262144 groups of 4 took a second); the others join the next level."""
    topology = s.topology
    task = np.concatenate(tasks)
    child = splitting_nodes(topology, np.concatenate([c[b] for c, b in zip(children, blocks)]))
    order = np.argsort(child, kind="stable")
    task, child = task[order], child[order]
    starts = np.flatnonzero(np.r_[True, child[1:] != child[:-1]])
    rank = np.arange(task.size) - np.repeat(starts, np.diff(np.r_[starts, task.size]))
    height = s.height[child]
    leaf = height == 0
    pe_of_task[task[leaf]] = topology.leaf_start[child[leaf]]
    above = height == 1
    pe_of_task[task[above]] = topology.leaf_start[topology.child_idx[topology.child_ptr[child[above]] + rank[above]]]
    bounds = np.r_[starts, task.size]
    for i in np.flatnonzero(height[starts] > 1).tolist():
        below_next.append((int(child[starts[i]]), task[bounds[i]:bounds[i + 1]]))


def splitting_nodes(topology: Topology, nodes: np.ndarray) -> np.ndarray:
    """``Topology.splitting_node`` of every node of ``nodes``."""
    nodes = nodes.copy()
    while True:
        single = topology.child_ptr[nodes + 1] - topology.child_ptr[nodes] == 1
        if not single.any():
            return nodes
        nodes[single] = topology.child_idx[topology.child_ptr[nodes[single]]]


def _append_children(below_next: list, children: np.ndarray, tasks: np.ndarray, block: np.ndarray) -> None:
    """(child, its tasks) of a split sub-problem (``block``: the child index
    of every task), in the children's order."""
    order = np.argsort(block, kind="stable")
    bounds = np.searchsorted(block[order], np.arange(children.size + 1))
    for i, child in enumerate(children.tolist()):
        below_next.append((child, tasks[order[bounds[i]:bounds[i + 1]]]))


def _split(s: _Setting, node: int, adj, ws: np.ndarray, pes: np.ndarray, sub_seed: int,
           deadline: Deadline) -> np.ndarray:
    """The child (index) of every task of one sub-problem: the best cut of
    its tries, repaired to the children's capacities."""
    topology = s.topology
    if s.one_to_one:
        counts = task_counts(adj.shape[0], pes)
        targets, capacity = counts, counts.astype(np.float64)
        sub_eps = ONE_TO_ONE_SLACK if s.backend == "kaminpar" else 0.0
    else:
        c_sub = float(ws.sum())
        if s.slack_by_distance:  # the room L_max leaves, shared out by what a cut costs
            ratio = s.l_max * pes.sum() / max(c_sub, 1e-300)
            share = topology.node_distance[node] / max(s.below[node], 1e-300)
        else:  # SharedMap Lemma 5.1: the same factor at every level
            ratio = (1 + s.eps) * pes.sum() * s.total / (topology.n_pes * max(c_sub, 1e-300))
            share = 1.0 / int(s.height[node])
        sub_eps = max(ratio ** share - 1.0, 0.0)
        capacity = (1 + sub_eps) * c_sub * pes / pes.sum()
        # the Lemma's bound is continuous: with whole tasks allow one more
        # heaviest task when it is tight, but never more than L_max per PE
        capacity = np.maximum(capacity, c_sub * pes / pes.sum() + ws.max(initial=0.0))
        capacity = np.minimum(capacity, s.l_max * pes)
        targets = pes
    live = targets > 0
    if live.sum() <= 1:  # one child gets every task: only its capacity to repair
        return repair_balance(adj, ws, np.full(adj.shape[0], int(np.flatnonzero(live)[0]), dtype=np.int64),
                              capacity)
    n_tries = _tries(s.tries, topology.node_distance[node], s.top_distance)
    preset = "fast" if topology.node_distance[node] < s.fast_below * s.top_distance else s.preset
    best_cut = np.inf
    for t in range(n_tries):
        backend = BACKENDS[t % 2] if s.backend == "both" else s.backend

        def call(sub_adj, sub_ws, sub_targets, seed, backend=backend):
            return partition_graph(sub_adj, sub_ws, sub_targets, sub_eps, backend=backend, preset=preset,
                                   seed=seed, threads=s.threads, deterministic=s.deterministic)

        raw = _grouped_partition(call, adj, ws, targets[live], capacity[live], sub_seed + t, deadline,
                                 (backend, preset, s.threads))
        if sub_eps > 0 and s.one_to_one:  # asked with slack: the tasks too many move along chains of blocks,
            cand = balance_along_paths(adj, np.flatnonzero(live)[raw], targets, seed=sub_seed + t)
            # then the boundaries of adjacent blocks are straightened under the exact sizes
            cand = refine_pairs(adj, cand, targets.size, rounds=s.pair_rounds, seed=sub_seed + t, threads=s.threads,
                                deadline=deadline)
        else:
            cand = repair_balance(adj, ws, np.flatnonzero(live)[raw], capacity)
        cut = _cut(adj, cand)
        if cut < best_cut:
            block, best_cut = cand, cut
    return block


# KaMinPar is asked for blocks up to this much larger than a child's exact count (one task more in a
# block of 64): held to exact counts it cut 15.2 % of a 2-D stencil's edges, allowed one more 14.2 %, and
# the chains of moves that restore the counts (``rebalance.py``) keep most of the difference
ONE_TO_ONE_SLACK = 0.02
FANOUT_MAX = 64  # a node with more children is split through groups of at most this many


def _grouped_partition(call, adj, ws: np.ndarray, targets: np.ndarray, capacity: np.ndarray, seed: int,
                       deadline: Deadline, kind: tuple) -> np.ndarray:
    """``call(adj, ws, targets, seed)``'s blocks for up to FANOUT_MAX
    targets; beyond, the targets in consecutive groups of at most
    FANOUT_MAX (virtual tree levels, all at the node's distance): the
    tasks are split into the groups (repaired to the groups' capacities),
    then each group's tasks into its targets, recursively.  One call into
    2048 parts of a 2^17-task stencil took 14 s (KaHIP fast), into 32
    groups 0.9 s: the partitioner's cost grows with the parts.  Every
    call is priced first (``partition_seconds``, and Mt-KaHyPar's start on
    its first call in the process); one the ``deadline``
    does not allow, and every call after it, gives the grown or in-order
    split instead (``_refused_blocks``), so no partitioning call runs past it."""
    n, c = adj.shape[0], targets.size
    if c <= FANOUT_MAX or kind[0] == "kaminpar":  # KaMinPar's large-k presets take any count at once
        repair = balance_seconds(n) if kind[0] == "kaminpar" else 0.0  # its blocks have slack: the repair after
        if deadline.expired() or not deadline.allows(partition_seconds(n, adj.nnz, c, *kind)
                                                     + first_call_seconds(kind[0]) + repair):
            return _refused_blocks(adj, ws, targets, deadline)
        return call(adj, ws, targets, seed)
    size = -(-c // FANOUT_MAX)  # targets per group
    group_of = np.arange(c) // size
    groups = int(group_of[-1]) + 1
    top = _grouped_partition(call, adj, ws, np.bincount(group_of, weights=targets).astype(np.int64),
                             np.bincount(group_of, weights=capacity), seed, deadline, kind)
    top = repair_balance(adj, ws, top, np.bincount(group_of, weights=capacity))
    block = np.empty(n, dtype=np.int64)
    for g in range(groups):
        members = np.flatnonzero(top == g)
        lo, hi = g * size, min((g + 1) * size, c)
        sub = adj[members][:, members]
        # repaired inside the group (a few thousand tasks), not in one repair
        # over every child, whose rounds each cost O(n)
        part = _grouped_partition(call, sub, ws[members], targets[lo:hi], capacity[lo:hi], seed + 1 + g,
                                  deadline, kind)
        block[members] = lo + repair_balance(sub, ws[members], part, capacity[lo:hi])
    return block


def split_seconds(n: int, nnz: int, parts: int, backend: str = "kahip", preset: str = "fast", calls: int = 1) -> float:
    """Estimated seconds of splitting ``n`` tasks into ``parts`` children
    (``_grouped_partition``): the ``calls`` calls of one virtual level each
    see an equal share of the tasks and edges."""
    share = (-(-n // calls), -(-nnz // calls))
    if parts <= FANOUT_MAX:
        return calls * partition_seconds(*share, parts, backend, preset)
    size = -(-parts // FANOUT_MAX)  # targets per group, as _grouped_partition
    groups = -(-parts // size)
    return calls * partition_seconds(*share, groups, backend, preset) + split_seconds(n, nnz, size, backend, preset,
                                                                                      calls * groups)


_PER_GROWN_ENTRY = 1.3e-7  # grow_blocks: seconds per task and adjacency entry (scrambled stencils into blocks
                           # of 64, 2026-11-28: 2^20 tasks 0.57-0.62 s, 2^22 2.5-2.9 s, 2^24 14.4 s at load 2) ...
_GROWN_CACHED_ENTRIES = 1 << 24  # ... and above this many entries slower by their count to the power 0.35 (every
                                 # neighbour a cache miss, and from there a TLB miss too; 2^24 priced 19 s)


def grow_seconds(n: int, nnz: int) -> float:
    """Estimated seconds of growing blocks over a graph of ``n`` tasks and
    ``nnz`` adjacency entries (``growing.grow_blocks``; it cannot be cut)."""
    entries = n + nnz
    return _PER_GROWN_ENTRY * entries * max(1.0, entries / _GROWN_CACHED_ENTRIES) ** 0.35


def _refused_blocks(adj, ws: np.ndarray, targets: np.ndarray, deadline: Deadline) -> np.ndarray:
    """The split a partitioning call the deadline refused leaves: tasks of
    equal weight, one per PE (one-to-one), grown into blocks of the target
    counts (``growing.grow_blocks``, O(m log m): on a scrambled stencil of
    2^20 tasks a cut between nodes 5.8 x below the given order's), when the
    deadline allows that; else the given order cut in runs
    (``_in_order_blocks``)."""
    n = adj.shape[0]
    if ws.size and int(targets.sum()) == n and np.all(ws == ws[0]) and not deadline.expired() \
            and deadline.allows(grow_seconds(n, adj.nnz)):
        from .growing import grow_blocks

        return grow_blocks(adj, targets)
    return _in_order_blocks(ws, targets)


def _in_order_blocks(ws: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """The tasks in the given order cut into consecutive runs of weight in
    proportion to ``targets`` (the split a refused partitioning call
    leaves; ``repair_balance`` fixes what whole tasks miss)."""
    total = float(ws.sum())
    before = (np.cumsum(ws) - ws) * (float(targets.sum()) / max(total, 1e-300))
    return np.minimum(np.searchsorted(np.cumsum(targets), before, side="right"), targets.size - 1)


_WORKER_SETTING = None  # a worker process's _Setting (sent once, by _worker_pool)


def _adopt_setting(setting: _Setting) -> None:
    global _WORKER_SETTING
    _WORKER_SETTING = setting


def _subtree_job(job) -> tuple[np.ndarray, bool]:
    """A worker's subtree: its tasks' PEs, and whether the deadline cut it."""
    node, sym, w, deadline = job
    return _descend(_WORKER_SETTING, sym, w, node, deadline), deadline.hit


def _worker_pool(workers: int, setting: _Setting):
    """``workers`` processes holding ``setting`` (``pool.fork_server_pool``:
    submit under ``without_main``, the processes start at submission)."""
    return fork_server_pool(workers, __name__, initializer=_adopt_setting, initargs=(setting,))


@register("multisection", "top-down hierarchical multisection with KaHIP, Mt-KaHyPar or KaMinPar "
                          "(options: backend=kahip|mtkahypar|kaminpar|both, preset=fast|eco|strong, threads, "
                          "steiner=true: Mt-KaHyPar's own mapping on subtrees of <= 64 PEs, "
                          "tries=N: best cut of N partitions at the top level, fewer below, "
                          "fast_below=F: fast preset where a cut costs < F x the top level's, "
                          "slack=lemma|distance: imbalance per level as SharedMap or by distance, "
                          "deterministic=true: Mt-KaHyPar's repeatable presets, "
                          "workers=N: sub-problems of a level in N processes, same result (default: the cores), "
                          "levels=N: only the top N levels partitioned, the given order below, "
                          "grow_below=N: sub-problems of at most N tasks split by greedy growing, "
                          "search_work=W: each grown split then improved by W swap evaluations per task, "
                          "pair_rounds=R: KaMinPar's splits refined by R rounds of FM on pairs of blocks)")
def multisection(graph, topology, *, seed=0, eps=None, backend="kahip", preset="eco", threads=1,
                 steiner=False, tries=1, fast_below=0.0, slack="lemma", deterministic=False, workers=None,
                 levels=None, grow_below=0, search_work=None, pair_rounds=None, deadline=None, **_):
    if str(slack) not in ("lemma", "distance"):
        raise ValueError(f"option slack={slack!r}: expected lemma or distance")
    return multisection_map(graph, topology, seed=seed, eps=eps, backend=str(backend),
                            preset=str(preset), threads=int(threads), steiner=str(steiner).strip().lower() in ("1", "true", "yes", "on"),
                            tries=int(tries), fast_below=float(fast_below),
                            slack_by_distance=str(slack) == "distance",
                            deterministic=str(deterministic).strip().lower() in ("1", "true", "yes", "on"),
                            workers=None if workers is None else int(workers), levels=None if levels is None else int(levels),
                            grow_below=int(grow_below),
                            search_work=GROWN_SEARCH_WORK if search_work is None else float(search_work),
                            pair_rounds=PAIR_ROUNDS if pair_rounds is None else int(pair_rounds), deadline=deadline)

