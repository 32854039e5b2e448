"""TreeMatch (Jeannot & Mercier, Euro-Par 2010) on any machine tree.

The paper's algorithm works on a balanced, symmetric tree: bottom-up, group
the (virtual) processes by the arity of each level (``treematch_grouping``),
extending the matrix with empty virtual processes where the arity does not
divide their number, aggregate, repeat to the root; then MapGroups unrolls
the group hierarchy top-down onto the tree.

Real trees are often not symmetric (cluster of unlike nodes, switches with
different node counts, cores with and without SMT, binding constraints).
Like TreeMatch's constrained mode (``tm_kpartitioning``), a node whose
children are not all alike first splits its tasks among its children by
capacity (greedy growth of the most connected parts, largest child first),
then each child is placed the same way; as soon as a subtree is symmetric the
bottom-up algorithm runs on it.  Symmetry is checked on the tree restricted
to the allowed PEs, with single-child nodes collapsed (they never are a
lowest common ancestor, so they do not change any distance).

Options (``map_tasks(..., option=value)`` or ``rankmap map --option k=v``):

* ``allowed_pes``: binding constraint, the PEs tasks may use (list of ids or
  a string like ``0-15,32-47``).
* ``oversubscribe``: at most this many tasks per PE; by default as many as
  the balance rule allows when there are more tasks than PEs (or ``eps``
  is given), else one.  Several tasks per PE are a last, distance-0 level.
* ``grouping``: ``auto`` (exhaustive candidate lists while C(p, a) <=
  ``max_candidates``, else ``fast``), ``exhaustive``, ``fast``, ``kahip``.
* ``split_arity``: ``auto`` (split an arity into its prime factors, as
  ``tm_optimize_topology`` does, when its candidate list would be too long
  and the factor levels' lists are short enough), ``always``, ``never``.
* ``max_candidates``: the exhaustive/fast switch (TreeMatch's 30,000).
* ``group_refine``: swap refinement of each level's groups (default true).
* ``final_refine``: J-based swap refinement of the whole mapping
  (``refine.swap_refine``) after the bottom-up pass: ``true`` (default; all
  pairs up to FINAL_N2_MAX_TASKS tasks, graph neighbours beyond), a depth
  ``d`` or ``n2``, or ``false``.  Grouping sees only the traffic, not the
  given rank order; when the program's order already follows the machine
  (stencil codes numbered like the grid, e.g. AMG and LULESH) the packed or
  round-robin placement can be better, so when either has a lower J than
  the refined TreeMatch result it is refined too and the lowest J is kept:
  ``treematch`` is never worse than ``packed`` or ``round_robin``.

``group_refine=false final_refine=false`` is the paper's algorithm as
published.  (``refine=true`` is the swap refinement ``map_tasks`` can apply
after any method; with ``final_refine`` on it only adds a deeper search.)
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import scipy.sparse as sp

from ...cost import mapping_cost
from ...deadline import Deadline
from ...graph import CommGraph
from ...topology import Topology
from ..registry import register
from .baselines import pe_capacity
from .placements import dealt_slots, parse_pe_list
from ..refine.swaps import swap_refine
from .treematch_grouping import (MAX_CANDIDATES, aggregate, extend, group_processes, n_candidates,
                                 refine_partition)

_LEAF = 0
FINAL_N2_MAX_TASKS = 256  # final refinement: all pairs up to here, then graph neighbours (depth 1)


def _choice(value, name: str, allowed: tuple[str, ...]) -> str:
    text = str(value).lower()
    aliases = {"true": "always", "1": "always", "yes": "always",
               "false": "never", "0": "never", "no": "never"}
    text = aliases.get(text, text) if name in ("split_arity", "group_refine") else text
    if text not in allowed:
        raise ValueError(f"option {name}={value!r}: choose one of {', '.join(allowed)}")
    return text


class _SymmetryIndex:
    """Per node of the tree restricted to allowed PEs: allowed PE count,
    kept children, and a symmetry type (-1: children not all alike).  A
    type is (arity, distance, child type), single-child nodes collapsed."""

    def __init__(self, topo: Topology, allowed: np.ndarray):
        mask = np.zeros(topo.n_pes + 1, dtype=np.int64)
        mask[allowed + 1] = 1
        cum = np.cumsum(mask)
        self.count = cum[topo.leaf_stop] - cum[topo.leaf_start]
        self.topo = topo
        self.levels: list[tuple[int, float, int]] = [(0, 0.0, -1)]  # type id -> level
        ids: dict[tuple[int, float, int], int] = {}
        stype = np.full(topo.n_nodes, -1, dtype=np.int64)
        for node in np.argsort(-topo.node_depth, kind="stable").tolist():
            if self.count[node] == 0:
                continue
            kids = self.kept_children(node)
            if kids.size == 0:
                stype[node] = _LEAF
                continue
            kt = stype[kids]
            if kids.size == 1:
                stype[node] = kt[0]
            elif kt[0] >= 0 and np.all(kt == kt[0]):
                key = (int(kids.size), float(topo.node_distance[node]), int(kt[0]))
                if key not in ids:
                    ids[key] = len(self.levels)
                    self.levels.append(key)
                stype[node] = ids[key]
        self.stype = stype

    def kept_children(self, node: int) -> np.ndarray:
        ch = self.topo.children(node)
        return ch[self.count[ch] > 0]

    def arities(self, node: int) -> list[int]:
        """Arities of a symmetric node's levels, innermost first."""
        out = []
        t = int(self.stype[node])
        while t != _LEAF:
            a, _, t = self.levels[t]
            out.append(a)
        return out[::-1]


def bottom_up(sym: sp.csr_array, arities: list[int], *, grouping: str = "auto",
              split_arity: str = "auto", max_candidates: int = MAX_CANDIDATES,
              refine: bool = True, seed: int = 0) -> np.ndarray:
    """TreeMatch on a symmetric tree with level ``arities`` (innermost
    first): returns, for each slot (leaf position, left to right), the local
    process in it or -1.  Needs sym.shape[0] <= prod(arities)."""
    levels: list[tuple[np.ndarray, int]] = []  # (members, real processes below)
    cur = sym
    for a in arities:
        parts = _level_parts(cur.shape[0], a, grouping, split_arity, max_candidates)
        for f in parts:
            p = cur.shape[0]
            cur = extend(cur, math.ceil(p / f) * f)
            members = group_processes(cur, f, grouping, seed, max_candidates, refine)
            levels.append((members, p))
            cur = aggregate(cur, members)
    if cur.shape[0] != 1:
        raise ValueError(f"{sym.shape[0]} processes do not fit on {math.prod(arities)} slots")
    seq = np.zeros(1, dtype=np.int64)
    for members, real in reversed(levels):
        nxt = np.full((seq.size, members.shape[1]), -1, dtype=np.int64)
        ok = seq >= 0
        nxt[ok] = members[seq[ok]]
        nxt[nxt >= real] = -1
        seq = nxt.ravel()
    return seq


def exhaustive_candidates(n: int, arities: list[int], max_candidates: int = MAX_CANDIDATES) -> int:
    """How many candidate groups the exhaustive groupings of ``bottom_up``
    list for ``n`` processes on ``arities`` (the levels below
    ``max_candidates``): what their search costs grows with it (128 tasks on
    4:16:2 list 35,960 at one level and took 2.4 s, where the fast levels
    of 1024 tasks took 0.1 s)."""
    total, p = 0, n
    for a in arities:
        for f in _level_parts(p, a, "auto", "auto", max_candidates):
            p = math.ceil(p / f) * f
            if n_candidates(p, f) <= max_candidates:
                total += n_candidates(p, f)
            p //= f
    return total


def _level_parts(p: int, a: int, grouping: str, split_arity: str, max_candidates: int) -> list[int]:
    """Arity ``a`` as one level or as its prime factors (innermost first).
    ``auto`` splits only when the whole arity is too large for exhaustive
    candidate lists and every factor level then is small enough: on large
    levels the fast grouping sees more structure with the whole arity."""
    factors = _prime_factors(a)
    if split_arity == "always":
        return factors
    if split_arity == "never" or grouping not in ("auto", "exhaustive") or len(factors) == 1:
        return [a]
    if n_candidates(math.ceil(p / a) * a, a) <= max_candidates:
        return [a]
    for f in factors:
        p = math.ceil(p / f) * f
        if n_candidates(p, f) > max_candidates:
            return [a]
        p //= f
    return factors


def _prime_factors(a: int) -> list[int]:
    out, f = [], 2
    while f * f <= a:
        while a % f == 0:
            out.append(f)
            a //= f
        f += 1
    if a > 1:
        out.append(a)
    return out


def split_by_capacity(sym: sp.csr_array, caps: np.ndarray, refine: bool = True) -> np.ndarray:
    """Part of each process for parts of at most ``caps[j]`` processes:
    parts grow largest first, each time taking the process with the most
    traffic into the part (the heaviest remaining process seeds a part and
    restarts it when its frontier is empty); then swap refinement, with
    empty virtual processes filling the free capacity."""
    part = _grow_parts(sym, caps)
    if not refine:
        return part
    n, total = sym.shape[0], int(caps.sum())
    free = np.repeat(np.arange(caps.size), caps - np.bincount(part, minlength=caps.size))
    padded = refine_partition(extend(sym, total), np.concatenate([part, free]), caps.size)
    return padded[:n]


def _grow_parts(sym: sp.csr_array, caps: np.ndarray) -> np.ndarray:
    n = sym.shape[0]
    part = np.full(n, -1, dtype=np.int64)
    volume = np.asarray(sym.sum(axis=1)).ravel()
    by_volume = np.lexsort((np.arange(n), -volume)).tolist()
    nxt_seed = 0
    left = n
    for j in np.argsort(-caps, kind="stable").tolist():
        room = int(caps[j])
        conn = np.zeros(n)
        heap: list[tuple[float, int]] = []
        while room > 0 and left > 0:
            u = -1
            while heap:
                negw, v = heapq.heappop(heap)
                if part[v] < 0 and -negw == conn[v]:
                    u = v
                    break
            if u < 0:
                while part[by_volume[nxt_seed]] >= 0:
                    nxt_seed += 1
                u = by_volume[nxt_seed]
            part[u] = j
            room -= 1
            left -= 1
            lo, hi = sym.indptr[u], sym.indptr[u + 1]
            nb, w = sym.indices[lo:hi], sym.data[lo:hi]
            free = part[nb] < 0
            np.add.at(conn, nb[free], w[free])
            for v in np.unique(nb[free]).tolist():
                heapq.heappush(heap, (-conn[v], v))
    return part


def treematch_map(graph: CommGraph, topology: Topology, *, seed: int = 0, eps=None,
                  allowed_pes=None, oversubscribe=None, grouping: str = "auto",
                  split_arity: str = "auto", max_candidates=MAX_CANDIDATES,
                  group_refine=True, final_refine=True, deadline: Deadline | None = None) -> np.ndarray:
    """pe_of_task for ``graph`` on ``topology`` (see module docstring).  The
    ``deadline`` is checked before every subtree: once it has passed, the
    subtrees left get their tasks in the given order on their allowed PEs,
    and the final refinement stops."""
    deadline = Deadline.of(deadline)
    k = topology.n_pes
    grouping = _choice(grouping, "grouping", ("auto", "exhaustive", "fast", "kahip"))
    split_arity = _choice(split_arity, "split_arity", ("auto", "always", "never"))
    max_candidates = int(max_candidates)
    refine = _choice(group_refine, "group_refine", ("always", "never")) == "always"
    final_depth = _final_depth(final_refine, graph.n)
    allowed = np.arange(k) if allowed_pes is None else parse_pe_list(allowed_pes, k)
    cap = int(pe_capacity(graph, topology, eps)[0]) if eps is not None or graph.n > k else 1
    if oversubscribe is not None:
        if int(oversubscribe) < 1:
            raise ValueError("oversubscribe must be >= 1 task per PE")
        cap = min(cap, int(oversubscribe))
    if cap * allowed.size < graph.n:
        hint = "" if eps is not None else " (pass eps to allow several tasks per PE)"
        raise ValueError(f"{graph.n} tasks do not fit on {allowed.size} allowed PEs at "
                         f"{cap} per PE{hint}")
    index = _SymmetryIndex(topology, allowed)
    pe_of_task = np.full(graph.n, -1, dtype=np.int64)
    opts = dict(grouping=grouping, split_arity=split_arity, max_candidates=max_candidates,
                refine=refine, seed=seed)
    stack = [(topology.root, np.arange(graph.n, dtype=np.int64), graph.symmetric)]
    while stack:
        node, tasks, sym = stack.pop()
        if tasks.size == 0:
            continue
        if deadline.expired():  # a subtree never holds more tasks than its allowed PEs take
            lo, hi = topology.leaf_range(node)
            pes = allowed[(allowed >= lo) & (allowed < hi)]
            pe_of_task[tasks] = np.repeat(pes, cap)[:tasks.size]
            continue
        if index.stype[node] >= 0:
            arities = ([cap] if cap > 1 else []) + index.arities(node)
            slot_task = bottom_up(sym, arities, **opts)
            lo, hi = topology.leaf_range(node)
            pes = allowed[(allowed >= lo) & (allowed < hi)]
            slots = np.flatnonzero(slot_task >= 0)
            pe_of_task[tasks[slot_task[slots]]] = pes[slots // cap]
            continue
        kids = index.kept_children(node)
        if kids.size == 1:
            stack.append((int(kids[0]), tasks, sym))
            continue
        part = split_by_capacity(sym, index.count[kids] * cap, refine)
        for j, child in enumerate(kids.tolist()):
            sel = np.flatnonzero(part == j)
            stack.append((child, tasks[sel], sym[sel][:, sel].tocsr()))
    if final_depth is None:
        return pe_of_task
    return _final_refinement(graph, topology, pe_of_task, final_depth, cap, allowed, seed, deadline)


def _final_depth(value, n: int):
    """Neighbourhood of the final refinement from the ``final_refine``
    option (bool, CLI string, depth, ``n2``); None: no final refinement."""
    text = str(value).strip().lower()
    if text in ("false", "0", "no", "off", "never"):
        return None
    if text in ("true", "yes", "on", "always"):
        return "n2" if n <= FINAL_N2_MAX_TASKS else 1
    if text == "n2":
        return "n2"
    try:
        depth = int(text)
    except ValueError:
        raise ValueError(f"option final_refine={value!r}: choose true, false, a depth d >= 1 or n2") from None
    if depth < 1:
        raise ValueError(f"option final_refine={value!r}: a depth must be >= 1")
    return depth


def _final_refinement(graph, topology, pe_of_task, depth, cap: int, allowed, seed: int,
                      deadline: Deadline) -> np.ndarray:
    """Swap refinement of the TreeMatch mapping; the packed and round-robin
    placements (same PEs, same tasks per PE) are refined too when their J is
    lower, and the lowest J is kept.  Loads stay within ``cap`` tasks per PE
    (one-to-one: swaps only)."""
    eps = None
    if cap > 1:  # moves allowed too: eps whose L_max is ``cap`` tasks (equal weights)
        w = graph.vertex_weights
        eps = (cap + 0.5) * float(w[0]) / math.ceil(float(w.sum()) / topology.n_pes) - 1.0

    def refined(pe):
        return swap_refine(graph, topology, pe, depth=depth, seed=seed, eps=eps, deadline=deadline)

    best = refined(pe_of_task)
    best_j = mapping_cost(graph, topology, best)
    for depth_deal in (0, 1):  # packed, round-robin over the root's children
        if deadline.expired():
            break
        start = dealt_slots(topology, graph.n, cap, depth_deal, allowed)
        if mapping_cost(graph, topology, start) < best_j:
            pe = refined(start)
            j = mapping_cost(graph, topology, pe)
            if j < best_j:
                best, best_j = pe, j
    return best


@register("treematch", "TreeMatch (Jeannot & Mercier): bottom-up grouping by level arity, any tree, "
                       "then swap refinement (final_refine=false: as published)")
def treematch(graph, topology, *, seed=0, eps=None, time_limit=None, **options):
    # a budget plans nothing here (TreeMatch's work is fixed); map_tasks's deadline bounds the call
    return treematch_map(graph, topology, seed=seed, eps=eps, **options)
