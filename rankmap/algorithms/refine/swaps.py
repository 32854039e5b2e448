"""Swap refinement (Schulz & Traff, "Better Process Mapping and Sparse QAP").

Local search on any mapping: try pairs of tasks (u, v) and swap their PEs
when that lowers J.  Candidate pairs come from the neighbourhood N_C^d
(tasks within graph distance d in the communication graph, nearest first,
at most ``ball_cap`` per task) or, with ``depth="n2"``, all pairs (the
quadratic neighbourhood, pruned to pairs on PEs at non-zero distance; for
small n).  A pass visits every pair once in random order; the search stops
after a pass without gain, at ``max_passes``, after ``max_evaluations``
pairs or when the ``deadline`` passes (checked every PAIR_SLICE pairs).

The gain of a swap is computed from the two tasks' neighbourhoods alone,
O(deg(u) + deg(v)): moving u from p_u to p_v changes J by
sum_x S_ux (D(p_v, p_x) - D(p_u, p_x)), and a swap adds the two moves plus
2 S_uv D(p_u, p_v) for the edge between them.  The per-task contributions
Gamma(u) = sum_x S_ux D(p_u, p_x) (their sec. 3.2) are kept up to date after
every swap, carry J, and prune pairs that cannot gain.

The hot loop is vectorised: a batch of candidate pairs is evaluated at once
with ragged gathers of the CSR rows and one call of the topology's distance
oracle per term.  Swaps with gain are then applied in batch order, each only
when no earlier swap of the batch touched its tasks or their neighbours (so
every gain applied is exact); the others are evaluated again with the next
batch.  The only machine queries are ``topology.distance(p, q)`` (vectorised)
and ``topology.n_pes``, so any topology with that oracle works (trees, meshes,
tori).

On a tree machine with enough tasks, the pairs inside groups of subtrees
run on several threads (``parallel``), the same result for any count.

Many-to-one (``eps`` given or more tasks than PEs): a pair may also become
the move of one task to the other's PE, and every swap or move keeps each PE
load within L_max = floor((1 + eps) * ceil(c(V) / k)).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ...cost import row_costs
from ...graph import CommGraph, renumbered_rows, row_edges
from ...deadline import Deadline
from ...mapping import DEFAULT_EPS, balance_report
from ...topology import Topology
from ..registry import register

BATCH = 32768
DEFAULT_DEPTH = 10
DEFAULT_BALL_CAP = 256
CACHE_PAIRS = 1 << 23  # 8M pairs, 64 MB as int32
PAIR_SLICE = 1 << 14  # pairs between two checks of a work limit
BLOCK_TASKS = 4096    # a pass takes the pairs of one block of tasks (by tree position) at a time ...
BLOCK_ROUNDS = 8      # ... an eighth of them per visit of the block


@dataclass
class RefineStats:
    """What a refinement run did: J before/after, passes, pairs evaluated
    (the hot-loop count) and how many of them inside groups run in
    parallel, improving swaps/moves applied, seconds."""

    j_start: float = 0.0
    j_end: float = 0.0
    passes: int = 0
    evaluated: int = 0
    swaps: int = 0
    seconds: float = 0.0
    in_groups: int = 0  # of the pairs evaluated, those run in parallel (``parallel``)

    @property
    def evaluated_per_s(self) -> float:
        return self.evaluated / self.seconds if self.seconds > 0 else 0.0


def _ball_pairs(adj: sp.csr_array, depth: int, cap: int, rng: np.random.Generator, deadline: Deadline,
                chunk_pairs: int = 1 << 20, groups=None):
    """Yield arrays (U, V), u < v, of the pairs within graph distance
    ``depth``, one pair of arrays per block of consecutive sources of about
    ``chunk_pairs`` pairs, the blocks in random order (``_ball_block``);
    with ``groups`` (``parallel.GroupedPasses``) as many blocks made at
    once as it has threads.  Stops early when ``deadline`` passes."""
    n = adj.shape[0]
    indptr, indices = adj.indptr.astype(np.int64), adj.indices.astype(np.int64)
    chunk = max(1, min(n, chunk_pairs // max(min(cap, n), 1)))
    starts = (rng.permutation(-(-n // chunk)) * chunk).tolist()

    def block(start, space):
        return _ball_block(indptr, indices, start, chunk, depth, cap, space)

    if groups is not None:
        yield from groups.ordered(block, starts, deadline)
        return
    space: dict = {}
    for start in starts:
        if deadline.expired():
            return
        yield block(start, space)


def _ball_block(indptr, indices, start: int, chunk: int, depth: int, cap: int, space: dict):
    """The pairs (s, v), s < v, of the sources s of ``start .. start +
    chunk`` with the tasks v of their balls, in one array pair: BFS from s
    (``_kernels.ball_pairs``, compiled) up to ``depth`` levels, whole levels
    kept, no further level once the ball holds ``cap`` tasks.  ``space``
    keeps the BFS's work arrays (one per thread) between calls."""
    from ._kernels import ball_pairs

    n = indptr.size - 1
    if not space:
        size = max(1 << 16, 2 * chunk * min(cap, n))
        space.update(mark=np.zeros(n, dtype=np.int64), queue=np.empty(n, dtype=np.int64), stamp=0,
                     u=np.empty(size, dtype=np.int64), v=np.empty(size, dtype=np.int64))
    src = np.arange(start, min(start + chunk, n), dtype=np.int64)
    us, vs = [], []
    while src.size:
        done, written, space["stamp"] = ball_pairs(indptr, indices, src, int(depth), int(cap), space["mark"],
                                                   space["stamp"], space["queue"], space["u"], space["v"])
        if done == 0:  # one ball does not fit: a larger buffer
            space["u"], space["v"] = np.empty(2 * space["u"].size, np.int64), np.empty(2 * space["u"].size, np.int64)
            continue
        us.append(space["u"][:written].copy())
        vs.append(space["v"][:written].copy())
        src = src[done:]
    return (np.concatenate(us), np.concatenate(vs)) if us else (np.zeros(0, np.int64), np.zeros(0, np.int64))


def _all_pairs(n: int, rng: np.random.Generator):
    """Yield the quadratic neighbourhood, all pairs u < v, in chunks."""
    order = rng.permutation(n)
    chunk = max(1, (1 << 20) // max(n, 1))
    for start in range(0, n, chunk):
        src = order[start:start + chunk]
        u = np.repeat(src, n)
        v = np.tile(np.arange(n), src.size)
        keep = u < v
        perm = rng.permutation(int(keep.sum()))
        yield u[keep][perm], v[keep][perm]


class _SwapState:
    """Positions, per-task contributions Gamma and PE loads of the search."""

    def __init__(self, graph: CommGraph, topology, pe_of_task, eps):
        self.adj = graph.symmetric
        self.indptr, self.indices, self.w = self.adj.indptr, self.adj.indices, self.adj.data
        self.dist = topology.distance
        self.pos = np.asarray(pe_of_task, dtype=np.int64).copy()
        n, k = graph.n, topology.n_pes
        self.many = eps is not None or n > k
        self.vw = graph.vertex_weights
        if self.many:
            e = DEFAULT_EPS if eps is None else eps
            self.l_max = balance_report(np.zeros(0, dtype=np.int64), self.vw, k, e)["L_max"]
            self.load = np.bincount(self.pos, weights=self.vw, minlength=k)
        self.gamma = row_costs(self.indptr, self.indices, self.w, topology, self.pos)

    @property
    def j(self) -> float:
        return float(self.gamma.sum()) / 2  # every undirected pair sits in two rows

    def move_gain(self, tasks, targets, partners):
        """For each i: J change if tasks[i] alone moved to targets[i], and the
        weight of the edge tasks[i] -- partners[i]."""
        e, owner = row_edges(self.indptr, tasks)
        x = self.indices[e]
        w = self.w[e]
        px = self.pos[x]
        d = self.dist(targets[owner], px) - self.dist(self.pos[tasks][owner], px)
        b = tasks.size
        return (np.bincount(owner, weights=w * d, minlength=b),
                np.bincount(owner, weights=np.where(x == partners[owner], w, 0.0), minlength=b))

    def evaluate(self, U, V):
        """Best J change per pair and the action: 0 swap, 1 move u to p_v,
        2 move v to p_u (inf where nothing is feasible)."""
        pu, pv = self.pos[U], self.pos[V]
        gu, w_uv = self.move_gain(U, pv, V)
        gv, _ = self.move_gain(V, pu, U)
        swap = gu + gv + 2 * w_uv * self.dist(pu, pv)
        if not self.many:
            return swap, np.zeros(U.size, dtype=np.int64)
        wu, wv, lu, lv = self.vw[U], self.vw[V], self.load[pu], self.load[pv]
        opts = np.stack([np.where((lu - wu + wv <= self.l_max) & (lv - wv + wu <= self.l_max), swap, np.inf),
                         np.where(lv + wu <= self.l_max, gu, np.inf),
                         np.where(lu + wv <= self.l_max, gv, np.inf)])
        act = np.argmin(opts, axis=0)
        return opts[act, np.arange(U.size)], act

    def feasible(self, u, v, act) -> bool:
        if not self.many:
            return True
        pu, pv, wu, wv = self.pos[u], self.pos[v], self.vw[u], self.vw[v]
        if act == 0:
            return self.load[pu] - wu + wv <= self.l_max and self.load[pv] - wv + wu <= self.l_max
        if act == 1:
            return self.load[pv] + wu <= self.l_max
        return self.load[pu] + wv <= self.l_max

    def apply(self, u, v, act):
        """Carry out an action; returns the tasks whose PE changed and their old PEs."""
        pu, pv = self.pos[u], self.pos[v]
        if act == 0:
            self.pos[u], self.pos[v] = pv, pu
            moved = [(u, pu), (v, pv)]
        elif act == 1:
            self.pos[u] = pv
            moved = [(u, pu)]
        else:
            self.pos[v] = pu
            moved = [(v, pv)]
        if self.many:
            for t, old in moved:
                self.load[old] -= self.vw[t]
                self.load[self.pos[t]] += self.vw[t]
        return moved

    def update_gamma(self, moved_tasks: np.ndarray, old_pos: np.ndarray):
        """Gamma after a batch of moves with pairwise disjoint closed
        neighbourhoods (apart from swap partners): O(sum of their degrees)."""
        e, owner = row_edges(self.indptr, moved_tasks)
        x, w = self.indices[e], self.w[e]
        new_d = self.dist(self.pos[moved_tasks][owner], self.pos[x])
        is_moved = np.zeros(self.pos.size, dtype=bool)
        is_moved[moved_tasks] = True
        other = ~is_moved[x]
        old_d = self.dist(old_pos[owner][other], self.pos[x[other]])
        np.add.at(self.gamma, x[other], w[other] * (new_d[other] - old_d))
        self.gamma[moved_tasks] = np.bincount(owner, weights=w * new_d, minlength=moved_tasks.size)


def refine_swaps(graph: CommGraph, topology, pe_of_task, *, depth=DEFAULT_DEPTH, seed: int = 0,
                 deadline: Deadline | None = None, eps: float | None = None,
                 max_passes: int | None = None, ball_cap: int = DEFAULT_BALL_CAP,
                 max_evaluations: int | None = None, threads: int | None = None):
    """Swap local search; returns ``(pe_of_task, RefineStats)``.
    ``max_evaluations`` stops it after about that many pairs evaluated: a
    work limit that, unlike the ``deadline``, gives the same result on any
    machine (both checked every PAIR_SLICE pairs, or every step of the
    parallel pairs).  ``threads`` (default: ``parallel.thread_count``, the
    cores available) run the pairs inside groups of a tree machine at once
    (``parallel``): the result is the same for any number."""
    start = time.perf_counter()
    deadline = Deadline.of(deadline)
    s = _SwapState(graph, topology, pe_of_task, eps)
    n = graph.n
    rng = np.random.default_rng(seed)
    stats = RefineStats(j_start=s.j)
    quadratic = isinstance(depth, str)
    if quadratic and depth.lower() != "n2":
        raise ValueError(f"refinement depth must be an integer 1..n or 'n2', got {depth!r}")
    if not quadratic and int(depth) < 1:
        raise ValueError(f"refinement depth must be >= 1, got {depth}")
    tol = 1e-12 * max(s.j, 1.0)
    cache: list = []
    kernel = _compiled_kernel(topology) if n > 1 else None
    if threads is not None and int(threads) < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if kernel is not None:
        back = _by_tree_position(s)
        groups = _groups(topology, n, quadratic, threads)
        try:
            change = _compiled_search(s, kernel, depth, int(ball_cap), rng, cache, tol, deadline, max_passes,
                                      stats, max_evaluations, groups)
        finally:
            if groups is not None:
                groups.close()
        s.pos = s.pos[back]
        stats.j_end = stats.j_start + change  # the gains summed: no O(m depth) pass after the deadline
        stats.seconds = time.perf_counter() - start
        return s.pos, stats
    out_of_time = False
    while not out_of_time and (max_passes is None or stats.passes < max_passes) and n > 1:
        stats.passes += 1
        gained = 0
        pairs = _pass_pairs(s.adj, depth, int(ball_cap), rng, cache, deadline)
        carry_u = carry_v = np.zeros(0, dtype=np.int64)
        for U, V in pairs:
            for b in range(0, max(U.size, 1), BATCH):
                cu = np.concatenate([carry_u, U[b:b + BATCH]])
                cv = np.concatenate([carry_v, V[b:b + BATCH]])
                carry_u, carry_v, n_applied = _run_batch(s, cu, cv, tol, stats)
                gained += n_applied
                if deadline.expired() or (max_evaluations is not None and stats.evaluated >= max_evaluations):
                    out_of_time = True
                    break
            if out_of_time:
                break
        while carry_u.size and not out_of_time:
            carry_u, carry_v, n_applied = _run_batch(s, carry_u, carry_v, tol, stats)
            gained += n_applied
        if gained == 0 or deadline.expired():
            break
    stats.j_end = s.j
    stats.seconds = time.perf_counter() - start
    return s.pos, stats


def _by_tree_position(s: _SwapState) -> np.ndarray:
    """Renumber the tasks of ``s`` in the order of their PEs (the tree's
    leaf order), so that tasks on nearby PEs, and so the graph neighbours
    of a good mapping, sit at nearby indices: a pair and its neighbours
    then share cache lines, and the blocked pair order of ``_pass_pairs``
    keeps a pass inside a small part of the arrays.  Returns the
    permutation that takes the renumbered positions back."""
    order = np.argsort(s.pos, kind="stable")
    indptr, indices, w, back = renumbered_rows(s.indptr, s.indices, s.w, order)
    s.adj = sp.csr_array((w, indices, indptr), shape=s.adj.shape)
    s.adj.sort_indices()
    s.indptr, s.indices, s.w = s.adj.indptr, s.adj.indices, s.adj.data
    s.pos, s.vw = s.pos[order], np.asarray(s.vw)[order]
    return back


def _compiled_kernel(topology):
    """The compiled pass and its distance-oracle arrays for this machine, or
    None where only the numpy path applies: tree machines use the tree's
    oracle (``kernel.tree_oracle``); meshes and tori with an integral
    intra-node distance the same pass with a hop-count oracle
    (``mesh.kernel.mesh_oracle``)."""
    if isinstance(topology, Topology):
        from ._kernels import swap_pass
        from .kernel import tree_oracle

        return (swap_pass, *tree_oracle(topology))
    if float(getattr(topology, "intra_node_distance", 0.5)).is_integer():
        from ..mesh.kernel import mesh_oracle
        from ._kernels import mesh_swap_pass

        return (mesh_swap_pass, *mesh_oracle(topology))
    return None


def _groups(topology, n: int, quadratic: bool, threads):
    """The parallel pass runner (``parallel.GroupedPasses``) for a tree
    machine large enough to have several groups, else None (sequential
    passes: meshes, where no two PEs are equidistant from all others, and
    the quadratic neighbourhood, for small n)."""
    if quadratic or not isinstance(topology, Topology):
        return None
    from .parallel import GroupedPasses, group_of_pe, thread_count

    group = group_of_pe(topology, n)
    return None if group is None else GroupedPasses(group, thread_count(threads))


def _compiled_search(s: _SwapState, kernel, depth, cap, rng, cache, tol, deadline: Deadline, max_passes,
                     stats: RefineStats, max_evaluations=None, groups=None):
    """First-improvement passes in compiled code (the pass of
    ``_compiled_kernel``), the deadline and the work limit checked between
    slices of PAIR_SLICE pairs (the slicing does not change the result: the
    pass is sequential).  With ``groups`` the pairs are taken SLICE_PAIRS
    at a time, those inside a group in parallel (see ``parallel``).
    Returns the J change."""
    swap_pass, oracle_a, oracle_b = kernel
    change = 0.0
    many = bool(s.many)
    vw = np.asarray(s.vw, dtype=np.float64)
    load = s.load if many else np.zeros(1)
    l_max = float(s.l_max) if many else 0.0
    w = np.asarray(s.w, dtype=np.float64)
    indptr, indices = s.indptr.astype(np.int64), s.indices.astype(np.int64)

    def run(U, V):
        return swap_pass(indptr, indices, w, s.pos, oracle_a, oracle_b, U, V, many, vw, load, l_max, tol)

    if groups is not None:
        return _grouped_search(s, run, groups, depth, cap, rng, cache, deadline, max_passes, stats,
                               max_evaluations)
    while max_passes is None or stats.passes < max_passes:
        stats.passes += 1
        gained = 0
        for U, V in _pass_pairs(s.adj, depth, cap, rng, cache, deadline):
            for b in range(0, U.size, PAIR_SLICE):
                ev, applied, delta = run(U[b:b + PAIR_SLICE], V[b:b + PAIR_SLICE])
                change += delta
                stats.evaluated += ev
                stats.swaps += applied
                gained += applied
                if (max_evaluations is not None and stats.evaluated >= max_evaluations) or deadline.expired():
                    return change
        if gained == 0 or deadline.expired():
            return change
    return change


def _grouped_search(s: _SwapState, run, groups, depth, cap, rng, cache, deadline: Deadline, max_passes,
                    stats: RefineStats, max_evaluations):
    """The passes of ``_compiled_search`` with the pairs of a pass gathered
    into slices of about SLICE_PAIRS (from small BFS chunks in random order,
    so a slice holds pairs of many groups) and run by ``groups``."""
    from .parallel import SLICE_PAIRS

    change = 0.0
    while max_passes is None or stats.passes < max_passes:
        stats.passes += 1
        gained = 0
        stream = _pass_pairs(s.adj, depth, cap, rng, cache, deadline, chunk_pairs=1 << 16, groups=groups)
        done = False
        while not done:
            us, vs, total = [], [], 0
            for U, V in stream:
                us.append(U)
                vs.append(V)
                total += U.size
                if total >= SLICE_PAIRS:
                    break
            else:
                done = True
            if not us:
                break
            delta, applied, stop = groups.run_slice(run, s.pos, np.concatenate(us), np.concatenate(vs), stats,
                                                    max_evaluations, deadline, PAIR_SLICE)
            change += delta
            gained += applied
            if stop:
                return change
        if gained == 0 or deadline.expired():
            return change
    return change


def _pass_pairs(adj, depth, cap, rng, cache: list, deadline: Deadline, chunk_pairs: int = 1 << 20, groups=None):
    """The candidate pairs of one pass, in chunks, in a fresh random order.
    Ball neighbourhoods of up to CACHE_PAIRS pairs are built once and
    reshuffled on later passes (never a neighbourhood the deadline cut);
    larger ones are built again every pass, ``chunk_pairs`` at a time
    (on the threads of ``groups`` when given)."""
    n = adj.shape[0]
    if isinstance(depth, str):
        yield from _all_pairs(n, rng)
        return
    if not cache:
        chunks, total = [], 0
        for U, V in _ball_pairs(adj, int(depth), cap, rng, deadline, chunk_pairs, groups):
            total += U.size
            if total > CACHE_PAIRS:
                chunks = None
                break
            chunks.append((U, V))
        if chunks is None:  # too many to keep: rebuild every pass
            for U, V in _ball_pairs(adj, int(depth), cap, rng, deadline, chunk_pairs, groups):
                perm = rng.permutation(U.size)
                yield U[perm], V[perm]
            return
        if deadline.expired():  # a partial neighbourhood: use it this once
            for U, V in chunks:
                perm = rng.permutation(U.size)
                yield U[perm], V[perm]
            return
        U = np.concatenate([c[0] for c in chunks]).astype(np.int32) if chunks else np.zeros(0, np.int32)
        V = np.concatenate([c[1] for c in chunks]).astype(np.int32) if chunks else np.zeros(0, np.int32)
        by_block = np.argsort(U // BLOCK_TASKS, kind="stable")
        U, V = U[by_block], V[by_block]
        bounds = np.searchsorted(U // BLOCK_TASKS, np.arange(0, -(-n // BLOCK_TASKS) + 1))
        cache.append((U, V, bounds))
    U, V, bounds = cache[0]
    # every block's pairs in random order, cut into BLOCK_ROUNDS pieces; round r
    # takes piece r of every block, the blocks in random order: each piece stays
    # in a small part of the arrays, and every task has a share of its pairs
    # looked at early in the pass (a pass cut short still touches every task)
    blocks = [bounds[b] + rng.permutation(int(bounds[b + 1] - bounds[b])) for b in range(bounds.size - 1)]
    for r in range(BLOCK_ROUNDS):
        for blk in rng.permutation(len(blocks)).tolist():
            p = blocks[blk]
            piece = p[r * p.size // BLOCK_ROUNDS:(r + 1) * p.size // BLOCK_ROUNDS]
            yield U[piece].astype(np.int64), V[piece].astype(np.int64)


def _run_batch(s: _SwapState, U, V, tol, stats: RefineStats):
    """Evaluate a batch, apply its non-interfering improving actions; return
    the improving pairs left for the next batch and how many were applied."""
    live = (s.gamma[U] + s.gamma[V] > 0) & (s.pos[U] != s.pos[V])
    U, V = U[live], V[live]
    stats.evaluated += U.size
    if U.size == 0:
        return U, V, 0
    delta, act = s.evaluate(U, V)
    good = np.flatnonzero(delta < -tol)
    if good.size == 0:
        return U[:0], V[:0], 0
    touched = np.zeros(s.pos.size, dtype=bool)
    indptr, indices = s.indptr, s.indices
    moved_tasks, old_pos, deferred = [], [], []
    for i in good.tolist():
        u, v, a = int(U[i]), int(V[i]), int(act[i])
        if (touched[u] or touched[v] or touched[indices[indptr[u]:indptr[u + 1]]].any()
                or touched[indices[indptr[v]:indptr[v + 1]]].any() or not s.feasible(u, v, a)):
            deferred.append(i)
            continue
        for t, old in s.apply(u, v, a):
            moved_tasks.append(t)
            old_pos.append(old)
        touched[u] = touched[v] = True
    if moved_tasks:
        s.update_gamma(np.asarray(moved_tasks, dtype=np.int64), np.asarray(old_pos, dtype=np.int64))
    stats.swaps += len(good) - len(deferred)
    d = np.asarray(deferred, dtype=np.int64)
    return U[d], V[d], len(good) - len(deferred)


def swap_refine(graph: CommGraph, topology, pe_of_task, *, depth=DEFAULT_DEPTH, seed: int = 0,
                deadline: Deadline | None = None, eps: float | None = None, **options) -> np.ndarray:
    """Improve ``pe_of_task`` by swaps (moves too when many-to-one); see the
    module docstring.  Uses only ``topology.distance`` and ``topology.n_pes``."""
    pe, _ = refine_swaps(graph, topology, pe_of_task, depth=depth, seed=seed, deadline=deadline,
                         eps=eps, **options)
    return pe


def refine_option(value) -> bool:
    """Whether a method option ``refine=...`` (bool or CLI string) asks for
    swap refinement."""
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("1", "true", "yes", "on", "swap"):
            return True
        if v in ("0", "false", "no", "off", "none", ""):
            return False
        raise ValueError(f"option refine={value!r}: expected true/false")
    return bool(value)


@register("swap", "swap refinement (Schulz & Traff N_C^d) of the greedy_allc mapping; "
                  "other methods get it with option refine=true (option threads=N: the same result "
                  "on N threads; default: the cores available)")
def swap_method(graph, topology, *, seed=0, eps=None, depth=DEFAULT_DEPTH, deadline=None, threads=None, **_):
    from ..construct.baselines import greedy_allc

    start = greedy_allc(graph, topology, seed=seed, eps=eps)
    return swap_refine(graph, topology, start, depth=swap_refine_option_depth(depth), seed=seed,
                       deadline=deadline, eps=eps, threads=None if threads is None else int(threads))


def swap_refine_option_depth(value):
    """``depth`` option from Python or the CLI: an integer, 'n2', or None
    for the default."""
    if value is None:
        return DEFAULT_DEPTH
    if isinstance(value, str) and value.strip().lower() != "n2":
        return int(value)
    return value


def refine_around(graph: CommGraph, topology: Topology, pe_of_task, changed, *, seed: int = 0,
                  max_scans: int | None = None, deadline: Deadline | None = None):
    """One-to-one swap refinement, quadratic neighbourhood, of a mapping that
    was swap-optimal (``depth="n2"``) before the tasks ``changed`` moved.  A
    pair's gain depends only on the PEs of its two tasks and their
    neighbours, so only pairs with a task in ``changed`` or next to it can
    gain: those tasks are scanned against all partners (each takes its best
    swap), in a fixed random priority order, then again around the tasks the
    swaps moved, until a round moves nothing.  The result is swap-optimal
    like a full ``swap_refine(depth="n2")``; each scan costs O(n depth + m)
    (``kernel.best_swaps_of``), not O(n (deg + deg) depth): the iterated
    local search of ``auto`` kicks 8 tasks.  ``max_scans`` caps the scans (a
    work limit: the result is then better, not necessarily swap-optimal);
    the ``deadline`` is checked between slices of about SCAN_SLICE_WORK
    steps.  Returns ``(pe_of_task, tasks scanned, J)``: the count is auto's
    deterministic measure of the work done."""
    from ._kernels import best_swaps_of, connection_cache, gammas
    from .kernel import cache_columns, tree_oracle

    deadline = Deadline.of(deadline)
    adj = graph.symmetric
    indptr, indices = adj.indptr.astype(np.int64), adj.indices.astype(np.int64)
    w = np.asarray(adj.data, dtype=np.float64)
    paths, dist_ext = tree_oracle(topology)
    pos = np.asarray(pe_of_task, dtype=np.int64).copy()
    moved = np.unique(np.asarray(changed, dtype=np.int64))
    prio = np.random.default_rng(seed).permutation(graph.n).astype(np.int64)
    cap = np.iinfo(np.int64).max if max_scans is None else max(int(max_scans), 1)
    gamma = gammas(indptr, indices, w, pos, paths, dist_ext)
    tol = 1e-12 * max(0.5 * float(gamma.sum()), 1.0)  # J from the gammas: no second pass over the edges
    col = cache_columns(topology)
    if cached_scans(graph, topology):  # dense: a scan's cost no longer grows with the edges
        cache, total = connection_cache(indptr, indices, w, pos, paths, col, int(col.max()) + 1)
        per_call = max(1, SCAN_SLICE_WORK // (2 * graph.n * paths.shape[0] + 1))
    else:
        cache, total = np.zeros((0, 0)), np.zeros(0)
        per_call = max(1, SCAN_SLICE_WORK // (graph.n * paths.shape[0] + indices.size + 1))
    scans = 0
    todo = _with_neighbours(indptr, indices, moved)
    while todo.size and scans < cap and not deadline.expired():
        todo = todo[np.argsort(prio[todo])]
        swapped = []
        for b in range(0, todo.size, per_call):
            part = todo[b:b + min(per_call, cap - scans)]
            buf = np.empty(2 * part.size, dtype=np.int64)
            k = best_swaps_of(indptr, indices, w, pos, paths, dist_ext, gamma, part, tol, buf, cache, total, col)
            swapped.append(buf[:k])
            scans += part.size
            if scans >= cap or deadline.expired():
                break
        todo = _with_neighbours(indptr, indices, np.concatenate(swapped)) if swapped else todo[:0]
    return pos, int(scans), float(0.5 * gamma.sum())


SCAN_SLICE_WORK = 1 << 22  # refine_around: tasks scanned per compiled call ~ this / (n depth + m)
CACHE_ENTRIES = 1 << 23    # the connection cache (tasks x inner nodes) holds at most this many (64 MB)


def dense_graph(graph: CommGraph) -> bool:
    """``construct.partition.dense`` of the communication graph."""
    from ..construct.partition import dense

    return dense(graph.n, graph.symmetric.nnz)


def cached_scans(graph: CommGraph, topology) -> bool:
    """Whether ``refine_around`` scans with the connection cache
    (``kernel.best_swaps_of`` with its cache): on a dense graph (``dense_graph``),
    where a plain scan's pass over all edges (O(m)) outweighs the cache's
    O(n depth), and where the cache fits in CACHE_ENTRIES.  An AMG-like
    graph of 1000 tasks with 221 partners each: 3000 scans in 0.65 s
    against 9.3 s, the same J."""
    inner = int(np.count_nonzero(topology.child_ptr[1:] > topology.child_ptr[:-1])) - 1
    return dense_graph(graph) and graph.n * max(inner, 1) <= CACHE_ENTRIES


def _with_neighbours(indptr, indices, tasks: np.ndarray) -> np.ndarray:
    """``tasks`` and their graph neighbours, each once."""
    edges, _ = row_edges(indptr, tasks)
    return np.union1d(tasks, indices[edges]).astype(np.int64)
