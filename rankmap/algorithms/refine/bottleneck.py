"""The link-time objective: the busiest link decides (Langguth, Schlag & Schulz).

A program whose exchanges are bandwidth-bound waits for its busiest link:
the link whose bytes over its bandwidth (``topology.bandwidth``) are the
largest, its *link time* T.  ``bottleneck_refine`` lowers T (ties broken by
J) with moves and swaps of tasks (a swap with an empty slot is a move):

- **descent**: the tasks whose traffic crosses the busiest links (tree:
  the bytes leaving or entering the link's subtree, in the link's
  direction; mesh: dimension-ordered routes), heaviest share first, try
  every slot when there are few, else the slots around their neighbours,
  their heaviest neighbours' PEs and random ones.  All candidate slots of a
  task are scored at once, exactly (the routes of the pairs the swap
  changes, old minus new).  A swap is taken when it improves the sorted
  vector of link times, largest first (leximin): it lowers the busiest
  link it touches without raising another to that time, so a link at the
  maximum can come down while others rise below it (with the maximum alone
  a slab layout of a 3-D halo admits no single improving swap, the blocks
  that halve its busiest link lie several swaps away);
- **kicks**: from the best mapping, a few random swaps of the tasks on the
  busiest link, then the descent, kept where (T, J) drops: iterated local
  search, until PATIENCE kicks in a row bring nothing (on instances of up to
  16 tasks it reaches the exhaustive optimum, ``tests/test_bottleneck.py``);
- **J afterwards**: swaps around the moved tasks that lower J without any
  link rising above T.

``j_cap`` bounds J throughout (the default objective of ``map_tasks``
keeps J within 1 % of the best J found: ``OBJECTIVES``).  The work is
counted in candidate swaps scored (``max_evals``), never read from the
clock; the ``deadline`` guards it.  The makespan M = max(max comp(b),
F * max comm(l)) of the paper is reported by ``cost.evaluate(...,
comm_factor=F)``; swaps keep every PE's computation.  On nodes whose inside
is a link matrix (GPU nodes) the links are those of the tree that
approximates it.
"""

from __future__ import annotations

import numpy as np

from ...cost import all_link_loads, mapping_cost
from ...deadline import Deadline
from ...topology import MeshTopology, Topology
from ...topology.bandwidth import link_bandwidths
from ..construct.slots import SlotTable, candidate_slots
from ..registry import METHODS, register

PATIENCE = 32          # kicks in a row without a gain that end the search
KICK_SWAPS = 3         # random swaps of one kick
TOP_LINKS = 8          # the busiest links whose tasks the descent tries, at most
TASKS_PER_LINK = 8     # ... the tasks with the largest share on each
MAX_CANDIDATES = 64    # slots tried per task (all when there are at most this many)
RANDOM_SLOTS = 8       # ... of which random
EVALS_PER_TASK = 1000  # default work: candidate swaps scored per task, at most ...
MIN_EVALS = 200_000    # ... and at least this many (small instances: enough kicks to be exact)
REL_TOL = 1e-9         # link times within this share of the largest are equal
DENSE_KEYS = 1 << 22   # (candidate, link) keys counted in an array up to this many, else sorted


def link_routes(topology, src_pe, dst_pe) -> tuple[np.ndarray, np.ndarray]:
    """``(pair, link)``: every link pair i crosses, numbered as in
    ``cost.all_link_loads`` (tree: up link of node x is x, down link is
    ``n_nodes + x``; mesh: its dimension-ordered routes)."""
    if not isinstance(topology, Topology):
        return topology.routes(src_pe, dst_pe)
    p = np.asarray(src_pe, dtype=np.int64)
    q = np.asarray(dst_pe, dtype=np.int64)
    stop = topology.lca_depth(p, q)  # p == q: the leaf's own depth, so no links
    pairs, links = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for pes, offset in ((p, 0), (q, topology.n_nodes)):
        node, idx = topology.leaf_of_pe[pes], np.arange(pes.size)
        while node.size:
            keep = topology.node_depth[node] > stop[idx]
            node, idx = node[keep], idx[keep]
            pairs.append(idx)
            links.append(node + offset)
            node = topology.parent[node]
    return np.concatenate(pairs), np.concatenate(links)


def leximin_compare(a, b, tol: float) -> int:
    """-1 when the values ``b`` are better than ``a`` (sorted largest first,
    the first that differs by more than ``tol`` is smaller in ``b``), 1 when
    worse, 0 when equal; ``a`` and ``b`` have the same length."""
    a = np.sort(np.asarray(a))[::-1]
    b = np.sort(np.asarray(b))[::-1]
    diff = np.flatnonzero(np.abs(a - b) > tol)
    if diff.size == 0:
        return 0
    return -1 if b[diff[0]] < a[diff[0]] else 1


class _Pairs:
    """The directed pairs (COO order of ``graph.bytes``), out and in per task."""

    def __init__(self, graph):
        self.src, self.dst, self.w = graph.coo()
        self.out_ptr = graph.bytes.indptr
        self.in_pairs = np.argsort(self.dst, kind="stable")
        self.in_ptr = np.concatenate([[0], np.cumsum(np.bincount(self.dst, minlength=graph.n))])

    def of(self, tasks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(owner, pair)``: the out- and in-pairs of every task of
        ``tasks`` (entries < 0 have none), ``owner`` the position in
        ``tasks``."""
        t = np.asarray(tasks, dtype=np.int64)
        ok = t >= 0
        tt = np.where(ok, t, 0)
        out_lo, out_n = self.out_ptr[tt], np.where(ok, self.out_ptr[tt + 1] - self.out_ptr[tt], 0)
        in_lo, in_n = self.in_ptr[tt], np.where(ok, self.in_ptr[tt + 1] - self.in_ptr[tt], 0)
        owner_out, pos_out = _ranges(out_lo, out_n)
        owner_in, pos_in = _ranges(in_lo, in_n)
        return (np.concatenate([owner_out, owner_in]),
                np.concatenate([pos_out, self.in_pairs[pos_in]]))


def _ranges(lo, count) -> tuple[np.ndarray, np.ndarray]:
    """``(owner, index)`` of the concatenated ranges ``lo[i] .. lo[i] + count[i]``."""
    owner = np.repeat(np.arange(lo.size), count)
    start = np.repeat(np.cumsum(count) - count, count)
    return owner, np.repeat(lo, count) + np.arange(owner.size) - start


class _Search:
    """The state of one search: the slots, the link loads (exact bytes),
    their times and J."""

    def __init__(self, graph, topology, pe_of_task, eps, j_cap, rng):
        self.graph, self.topology = graph, topology
        self.eps = eps
        self.pairs = _Pairs(graph)
        self.inverse = link_bandwidths(topology).inverse
        self.tree = isinstance(topology, Topology)
        self.mesh = topology if isinstance(topology, MeshTopology) else None
        self.j_cap = np.inf if j_cap is None else float(j_cap)
        self.rng = rng
        self.compiled = None  # a tree without node links: the compiled scoring (``_score_compiled``)
        if self.tree and not topology.has_links:
            from ._bottleneck import TreeSwapScores

            pr = self.pairs
            self.compiled = TreeSwapScores(topology, pr.src, pr.dst, pr.w, pr.out_ptr, pr.in_ptr, pr.in_pairs)
        self.evals = 0
        self.reset(pe_of_task)

    def reset(self, pe_of_task) -> None:
        """Start from ``pe_of_task``: the loads, J and an empty undo log."""
        self.table = SlotTable(self.graph, self.topology, pe_of_task, self.eps)
        src, dst, w = self.pairs.src, self.pairs.dst, self.pairs.w
        self.loads = all_link_loads(self.topology, self.table.pe[src], self.table.pe[dst], w)
        self.j = mapping_cost(self.graph, self.topology, self.table.pe)
        self.log = []

    def mark(self) -> None:
        """Forget the swaps made so far: ``rollback`` returns here."""
        self.log = []

    def rollback(self) -> None:
        """Undo the swaps since ``mark``, last first."""
        for u, slot, link, load, d_j in reversed(self.log):
            self.table.swap(u, slot)
            self.loads[link] = load
            self.j -= d_j
        self.log = []

    def times(self, links=None) -> np.ndarray:
        return self.loads * self.inverse if links is None else self.loads[links] * self.inverse[links]

    def key(self) -> tuple[float, float]:
        return float(self.times().max(initial=0.0)), self.j

    # ---------------------------------------------------------- scoring
    def score(self, us: np.ndarray, slots: np.ndarray, *, lowers: int | None = None, j_only: bool = False,
              every: bool = False):
        """Swaps of task ``us[c]`` into slot ``slots[c]``, scored exactly:
        ``(cand, link, new_load, d_j, viable)``, one entry per link whose
        load a viable candidate changes (sorted by candidate, then link), J's
        change per candidate and which candidates were viable: J within the
        cap (``j_only``: J falls), and on a tree, where ``lowers`` names a
        link, its load falls (the routes, the costly part, are followed
        only for these); ``every``: all are.  Compiled on a tree without
        node links, with the same floats; numpy elsewhere."""
        us, slots = np.asarray(us, dtype=np.int64), np.asarray(slots, dtype=np.int64)
        self.evals += slots.size
        scored = self._score_arrays if self.compiled is None else self._score_compiled
        return scored(us, slots, lowers, j_only, every)

    def _viable(self, d_j: np.ndarray, j_only: bool, every: bool) -> np.ndarray:
        """The candidates whose J change ``d_j`` is allowed (``score``)."""
        if every:
            return np.ones(d_j.size, dtype=bool)
        if j_only:
            return d_j < -1e-12 * max(abs(self.j), 1.0)
        return (self.j + d_j <= self.j_cap) | (d_j <= 0)

    def _score_compiled(self, us, slots, lowers, j_only: bool, every: bool):
        """``score`` on a tree, by ``_bottleneck.TreeSwapScores``."""
        t = self.table
        d_j, falls = self.compiled.changes(us, slots, t.pe, t.task_of_slot, t.slot_pe, -1 if lowers is None else lowers)
        viable = self._viable(d_j, j_only, every) & falls
        cand, link, new_load = self.compiled.routes(us, slots, viable, t.pe, t.task_of_slot, t.slot_pe, self.loads)
        return cand, link, new_load, d_j, viable

    def _score_arrays(self, us, slots, lowers, j_only: bool, every: bool):
        """``score`` in numpy, on any topology."""
        t, pr = self.table, self.pairs
        pe = t.pe
        k = slots.size
        v = t.task_of_slot[slots]
        pu, pv = pe[us], t.slot_pe[slots]
        own_owner, own_pairs = pr.of(us)
        other_owner, other_pairs = pr.of(v)
        # a pair between u and v is in both lists: keep u's copy
        u_of = us[other_owner]
        keep = (pr.src[other_pairs] != u_of) & (pr.dst[other_pairs] != u_of)
        cand = np.concatenate([own_owner, other_owner[keep]])
        pairs = np.concatenate([own_pairs, other_pairs[keep]])
        s, d = pr.src[pairs], pr.dst[pairs]
        uc, vc = us[cand], v[cand]
        ps, pd = pe[s], pe[d]
        ns = np.where(s == uc, pv[cand], np.where(s == vc, pu[cand], ps))
        nd = np.where(d == uc, pv[cand], np.where(d == vc, pu[cand], pd))
        w = pr.w[pairs]
        topo = self.topology
        d_j = np.bincount(cand, weights=w * (topo.distance(ns, nd) - topo.distance(ps, pd)), minlength=k)
        viable = self._viable(d_j, j_only, every)
        if lowers is not None and self.tree:
            node = lowers % topo.n_nodes
            lo, hi = topo.leaf_range(node)
            inside = lambda p: (p >= lo) & (p < hi)  # noqa: E731
            far, near = (ps, pd) if lowers >= topo.n_nodes else (pd, ps)
            new_far, new_near = (ns, nd) if lowers >= topo.n_nodes else (nd, ns)
            crossing = (inside(new_near) & ~inside(new_far)).astype(float) - (inside(near) & ~inside(far))
            viable &= np.bincount(cand, weights=w * crossing, minlength=k) < 0
        sel = viable[cand]
        cand, ps, pd, ns, nd, w = cand[sel], ps[sel], pd[sel], ns[sel], nd[sel], w[sel]
        old_pair, old_link = link_routes(topo, ps, pd)
        new_pair, new_link = link_routes(topo, ns, nd)
        n_links = self.loads.size
        keys = np.concatenate([cand[old_pair] * n_links + old_link, cand[new_pair] * n_links + new_link])
        change = np.concatenate([-w[old_pair], w[new_pair]])
        if k * n_links <= DENSE_KEYS:  # a count per key beats sorting them
            delta = np.bincount(keys, weights=change, minlength=k * n_links)
            uniq = np.flatnonzero(delta)
            delta = delta[uniq]
        else:
            uniq, inv = np.unique(keys, return_inverse=True)
            delta = np.bincount(inv, weights=change, minlength=uniq.size)
            uniq, delta = uniq[delta != 0], delta[delta != 0]
        link = uniq % n_links
        return uniq // n_links, link, self.loads[link] + delta, d_j, viable

    def improving(self, cand, link, new_load, k: int, tol: float):
        """Which of ``k`` scored candidates improve the link times (leximin:
        the largest time among the links a candidate changes falls, or
        stays and the next decides, ``leximin_compare``), and for each the
        largest time it changes and the largest it leaves there."""
        old = self.times(link)
        new = new_load * self.inverse[link]
        top_old = np.full(k, -np.inf)
        top_new = np.full(k, -np.inf)
        np.maximum.at(top_old, cand, old)
        np.maximum.at(top_new, cand, new)
        better = top_old > top_new + tol
        with np.errstate(invalid="ignore"):  # -inf - -inf: the candidate changes nothing
            gap = np.where(np.isfinite(top_old), np.abs(top_old - top_new), np.inf)
        for c in np.flatnonzero(gap <= tol).tolist():
            here = cand == c
            better[c] = leximin_compare(old[here], new[here], tol) < 0
        return better, top_old, top_new

    def apply(self, u: int, slot: int, link: np.ndarray, new_load: np.ndarray, d_j: float) -> None:
        self.log.append((u, int(self.table.slot[u]), link, self.loads[link].copy(), d_j))
        self.table.swap(u, slot)
        self.loads[link] = new_load
        self.j += d_j

    # --------------------------------------------------------- the moves
    def slots_for(self, u: int) -> np.ndarray:
        """Candidate slots of task ``u`` (module docstring)."""
        t, sym = self.table, self.graph.symmetric
        lo, hi = sym.indptr[u], sym.indptr[u + 1]
        nbr, w = sym.indices[lo:hi], sym.data[lo:hi]
        near = candidate_slots(nbr, w, t, self.mesh, sym, MAX_CANDIDATES)
        if near.size < t.slot_pe.size:
            heavy = nbr[np.argsort(-w, kind="stable")[:4]]
            near = np.concatenate([near, t.slots_of_pes(t.pe[heavy]),
                                   self.rng.integers(0, t.slot_pe.size, RANDOM_SLOTS)])
        near = np.unique(near)
        return near[t.slot_pe[near] != t.pe[u]]

    def contributors(self, link: int) -> np.ndarray:
        """Tasks whose traffic crosses ``link``, largest share first."""
        pr, pe = self.pairs, self.table.pe
        topo = self.topology
        if self.tree:
            node, down = link % topo.n_nodes, link >= topo.n_nodes
            lo, hi = topo.leaf_range(node)
            inside = np.flatnonzero((pe >= lo) & (pe < hi))
            _, pairs = pr.of(inside)
            far = pr.src[pairs] if down else pr.dst[pairs]
            near = pr.dst[pairs] if down else pr.src[pairs]
            on = (pe[far] < lo) | (pe[far] >= hi)
            on &= (pe[near] >= lo) & (pe[near] < hi)
            pairs = pairs[on]
        else:
            pair, links = link_routes(topo, pe[pr.src], pe[pr.dst])
            pairs = pair[links == link]
        share = np.bincount(np.concatenate([pr.src[pairs], pr.dst[pairs]]),
                            weights=np.tile(pr.w[pairs], 2), minlength=pe.size)
        some = np.flatnonzero(share > 0)  # the few tasks on the link: sorted, not all tasks
        return some[np.argsort(-share[some], kind="stable")[:TASKS_PER_LINK]]

    def best_swap(self, us, link: int, tol: float):
        """The best improving swap of one of the tasks ``us`` (leximin) that
        lowers ``link``, J within the cap: the one that lowers the busiest
        link it changes, then leaves the lowest time there, then the lowest
        J.  Returns ``(u, slot, links, loads, d_j)`` or None."""
        tried = [(u, self.slots_for(u)) for u in us]
        if not tried:
            return None
        u_of = np.concatenate([np.full(sl.size, u) for u, sl in tried])
        slots = np.concatenate([sl for _, sl in tried])
        if slots.size == 0:
            return None
        cand, link, new_load, d_j, viable = self.score(u_of, slots, lowers=link)
        ok, top_old, top_new = self.improving(cand, link, new_load, slots.size, tol)
        ok &= viable
        if not ok.any():
            return None
        c = np.flatnonzero(ok)
        c = int(c[np.lexsort((d_j[c], top_new[c], -top_old[c]))[0]])
        a, b = np.searchsorted(cand, [c, c + 1])
        return int(u_of[c]), int(slots[c]), link[a:b], new_load[a:b], float(d_j[c])

    def descend(self, max_evals: int, deadline: Deadline) -> None:
        """Improving swaps on the busiest links' tasks until none is left."""
        while self.evals < max_evals and not deadline.expired():
            times = self.times()
            top = float(times.max(initial=0.0))
            if top <= 0:
                return
            tol = REL_TOL * top
            links = np.flatnonzero(times >= top - tol)  # the busiest links: sorted, not all links
            links = links[np.argsort(-times[links], kind="stable")[:TOP_LINKS]]
            move = self._first_move(links, tol)
            if move is None:
                return
            self.apply(*move)

    def _first_move(self, links, tol: float):
        """The best swap of the tasks of the first link (busiest first)
        that has an improving one: ``(u, slot, links, loads, d_j)``."""
        for link in links.tolist():
            move = self.best_swap(self.contributors(link).tolist(), link, tol)
            if move is not None:
                return move
        return None

    def lower_j(self, tasks, max_evals: int, deadline: Deadline) -> None:
        """Swaps of ``tasks`` (and the tasks they wake) that lower J while
        no link rises above the link time."""
        top = float(self.times().max(initial=0.0))
        tol = REL_TOL * max(top, 1e-300)
        queue = list(dict.fromkeys(np.asarray(tasks).tolist()))
        seen = set(queue)
        while queue and self.evals < max_evals and not deadline.expired():
            u = queue.pop(0)
            seen.discard(u)
            slots = self.slots_for(u)
            if slots.size == 0:
                continue
            cand, link, new_load, d_j, viable = self.score(np.full(slots.size, u), slots, j_only=True)
            worst = np.full(slots.size, -np.inf)
            np.maximum.at(worst, cand, new_load * self.inverse[link])
            ok = np.flatnonzero(viable & (worst <= top + tol))
            if ok.size == 0:
                continue
            c = int(ok[np.argmin(d_j[ok])])
            a, b = np.searchsorted(cand, [c, c + 1])
            other = int(self.table.task_of_slot[slots[c]])
            self.apply(u, int(slots[c]), link[a:b], new_load[a:b], float(d_j[c]))
            sym = self.graph.symmetric
            for x in [u, other, *sym.indices[sym.indptr[u]:sym.indptr[u + 1]].tolist()]:
                if x >= 0 and x not in seen:
                    seen.add(x)
                    queue.append(x)

    def kick(self) -> None:
        """A few random swaps of tasks on the busiest link with others."""
        times = self.times()
        link = int(np.argmax(times))
        tasks = self.contributors(link)
        if tasks.size == 0:
            return
        for u in self.rng.choice(tasks, size=min(KICK_SWAPS, tasks.size), replace=False).tolist():
            slot = int(self.rng.integers(0, self.table.slot_pe.size))
            if self.table.slot_pe[slot] == self.table.pe[u]:
                continue
            _, link_ids, new_load, d_j, _ = self.score(np.array([u]), np.array([slot]), every=True)
            self.apply(u, slot, link_ids, new_load, float(d_j[0]))


def bottleneck_refine(graph, topology, pe_of_task, *, eps=None, seed: int = 0, j_cap: float | None = None,
                      max_evals: int | None = None, patience: int = PATIENCE,
                      deadline: Deadline | None = None) -> np.ndarray:
    """Lower the link time T of a mapping, then J at that T (module
    docstring); never a higher (T, J) than the given mapping, J within
    ``j_cap`` when one is given and the given J is within it.  The kicks
    end after ``patience`` in a row without a gain, the whole search after
    ``max_evals`` candidate swaps scored."""
    deadline = Deadline.of(deadline)
    search = _Search(graph, topology, pe_of_task, eps, j_cap, np.random.default_rng([seed, 11]))
    start = search.table.pe.copy()
    if graph.n < 2 or graph.n_edges == 0:
        return start
    max_evals = max(MIN_EVALS, EVALS_PER_TASK * graph.n) if max_evals is None else max_evals
    given = search.key()
    search.descend(max_evals, deadline)
    best = search.key()
    search.mark()
    idle = 0
    while idle < patience and search.evals < max_evals and not deadline.expired():
        search.kick()
        search.descend(max_evals, deadline)
        key = search.key()
        if _lower(key, best) and key[1] <= max(search.j_cap, given[1]):
            best, idle = key, 0
            search.mark()
        else:
            idle += 1
            search.rollback()
    search.lower_j(np.flatnonzero(search.table.pe != start), search.evals + max_evals // 4, deadline)
    out = search.table.pe.copy()
    return out if _lower(search.key(), given) else start


def _lower(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """(T, J) ``a`` below ``b``, T first (equal within REL_TOL)."""
    tol = REL_TOL * max(a[0], b[0])
    if a[0] < b[0] - tol:
        return True
    return abs(a[0] - b[0]) <= tol and a[1] < b[1] * (1 - 1e-12)


@register("bottleneck", "lower the busiest link's time (bytes over its bandwidth), ties by J: a start "
                        "mapping (start=METHOD) then moves and swaps off the busiest links",
          machines=("tree", "mesh"))
def bottleneck(graph, topology, *, seed=0, eps=None, start=None, deadline=None, **options):
    start = start or ("mesh_auto" if isinstance(topology, MeshTopology) else "auto")
    if start not in METHODS or start == "bottleneck":
        raise ValueError(f"unknown start method {start!r} for the bottleneck objective")
    pe = METHODS[start].fn(graph, topology, seed=seed, eps=eps, deadline=deadline, **options)
    return bottleneck_refine(graph, topology, pe, eps=eps, seed=seed, deadline=deadline)
