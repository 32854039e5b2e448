"""TreeMatch's GroupProcesses and AggregateComMatrix (Jeannot & Mercier, sec. 4).

Input of one level: the symmetric traffic S (CSR, B + B^T) between ``p``
(virtual) processes, ``p`` a multiple of the arity ``a``; rows past the real
processes are the empty virtual processes of ExtendComMatrix (no traffic).
Output: ``members``, a (p / a, a) array, row g = the processes of group g.

A group's value is the traffic that leaves it (sum of its degrees minus its
internal traffic, the paper's 3218 - 2000 = 1218 for group (0, 1)); a
grouping is good when the sum of its values is small.

* While C(p, a) candidate groups stay below ``max_candidates`` (TreeMatch
  switches at 30,000) every group is listed and the minimum-weight perfect
  independent set of the incompatibility graph is searched with the paper's
  three heuristics, keeping the best: smallest values first, largest values
  last (bounded exact-cover search minimising the largest rank used) and
  largest weighted degree first.
* Beyond, ``fast_grouping``: greedy agglomeration (merge the two clusters
  with the most traffic between them while their sizes fit ``a``), then
  packing of the partial clusters into groups of exactly ``a``
  (most-connected cluster first).
* ``kahip_grouping``: a perfectly balanced KaHIP partition into p / a blocks
  (partition-based grouping for large arities).

Everything is sparse: pair traffic is looked up by binary search in the
sorted CSR keys, never in a dense p x p matrix.
"""

from __future__ import annotations

import heapq
import itertools
import math

import numpy as np
import scipy.sparse as sp

MAX_CANDIDATES = 30_000
_EXACT_COVER_BUDGET = 20_000


# ------------------------------------------------------------- aggregation
def aggregate(sym: sp.csr_array, members: np.ndarray) -> sp.csr_array:
    """AggregateComMatrix: traffic between groups (diagonal dropped), sparse."""
    p = sym.shape[0]
    n_groups = members.shape[0]
    group_of = np.empty(p, dtype=np.int64)
    group_of[members.ravel()] = np.repeat(np.arange(n_groups), members.shape[1])
    c = sym.tocoo()
    r, q = group_of[c.row], group_of[c.col]
    keep = r != q
    out = sp.csr_array((c.data[keep], (r[keep], q[keep])), shape=(n_groups, n_groups))
    out.sum_duplicates()
    out.sort_indices()
    return out


def extend(sym: sp.csr_array, p_new: int) -> sp.csr_array:
    """ExtendComMatrix: add empty virtual processes (zero rows and columns)."""
    if p_new == sym.shape[0]:
        return sym
    return sp.csr_array((sym.data, sym.indices, np.concatenate(
        [sym.indptr, np.full(p_new - sym.shape[0], sym.indptr[-1])])), shape=(p_new, p_new))


def grouping_value(sym: sp.csr_array, members: np.ndarray) -> float:
    """Sum over groups of the traffic leaving them (what the next level sees)."""
    return float(aggregate(sym, members).sum())


# ------------------------------------------------------- exhaustive search
def n_candidates(p: int, a: int) -> int:
    return math.comb(p, a)


def _pair_traffic(sym: sp.csr_array, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """S[i, j] elementwise by binary search in the CSR keys (sorted rows)."""
    p = sym.shape[0]
    rows = np.repeat(np.arange(p, dtype=np.int64), np.diff(sym.indptr))
    keys = rows * p + sym.indices
    want = i.astype(np.int64) * p + j
    pos = np.searchsorted(keys, want)
    pos = np.minimum(pos, max(keys.size - 1, 0))
    hit = keys.size > 0
    return np.where(hit & (keys[pos] == want), sym.data[pos] if hit else 0.0, 0.0)


def candidate_groups(sym: sp.csr_array, a: int) -> tuple[np.ndarray, np.ndarray]:
    """All C(p, a) groups and their values (traffic leaving each group)."""
    p = sym.shape[0]
    cands = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(p), a)),
                        dtype=np.int64, count=n_candidates(p, a) * a).reshape(-1, a)
    deg = np.asarray(sym.sum(axis=1)).ravel()
    values = deg[cands].sum(axis=1)
    for x, y in itertools.combinations(range(a), 2):
        values = values - 2.0 * _pair_traffic(sym, cands[:, x], cands[:, y])
    return cands, values


def _greedy_cover(cands: np.ndarray, order: np.ndarray, p: int) -> np.ndarray:
    """Maximal independent set taken greedily in ``order``; with every
    combination listed, a maximal set covers all p processes."""
    used = np.zeros(p, dtype=bool)
    chosen = []
    need = p // cands.shape[1]
    for g in order.tolist():
        row = cands[g]
        if not used[row].any():
            used[row] = True
            chosen.append(g)
            if len(chosen) == need:
                break
    return np.asarray(chosen, dtype=np.int64)


def _largest_values_last(cands: np.ndarray, by_value: np.ndarray, p: int,
                         bound: int) -> np.ndarray | None:
    """Exact cover using only the ``bound`` best-ranked candidates, minimising
    the largest rank used (bounded depth-first search, lowest uncovered
    process first).  None if nothing better than ``bound`` is found."""
    ranked = cands[by_value]
    masks = [sum(1 << int(x) for x in row) for row in ranked.tolist()]
    by_proc: list[list[int]] = [[] for _ in range(p)]
    for r, row in enumerate(ranked.tolist()):
        for x in row:
            by_proc[x].append(r)
    full = (1 << p) - 1
    best: list | None = None
    steps = 0
    limit = [bound]

    def search(covered: int, picked: list[int], top: int) -> None:
        nonlocal best, steps
        if steps >= _EXACT_COVER_BUDGET:
            return
        steps += 1
        if covered == full:
            best = list(picked)
            limit[0] = top  # later solutions must use strictly better ranks
            return
        free = ~covered & full
        i = (free & -free).bit_length() - 1
        for r in by_proc[i]:
            if r >= limit[0]:
                break
            if masks[r] & covered == 0:
                picked.append(r)
                search(covered | masks[r], picked, max(top, r))
                picked.pop()

    search(0, [], -1)
    return None if best is None else by_value[np.asarray(best, dtype=np.int64)]


def exhaustive_grouping(sym: sp.csr_array, a: int) -> np.ndarray:
    """Best of the paper's three independent-set heuristics over all groups."""
    p = sym.shape[0]
    cands, values = candidate_groups(sym, a)
    by_value = np.argsort(values, kind="stable")
    results = [_greedy_cover(cands, by_value, p)]
    # largest weighted degree first: mean value of the incompatible groups
    # (groups sharing several processes are counted once per shared process)
    total = np.bincount(cands.ravel(), weights=np.repeat(values, a), minlength=p)
    count = np.bincount(cands.ravel(), minlength=p)
    nbr_sum = (total[cands] - values[:, None]).sum(axis=1)
    nbr_cnt = (count[cands] - 1).sum(axis=1)
    wdeg = np.divide(nbr_sum, nbr_cnt, out=np.zeros_like(nbr_sum), where=nbr_cnt > 0)
    results.append(_greedy_cover(cands, np.lexsort((values, -wdeg)), p))
    rank = np.empty(len(values), dtype=np.int64)
    rank[by_value] = np.arange(len(values))
    lvl = _largest_values_last(cands, by_value, p, int(rank[results[0]].max()) + 1)
    if lvl is not None:
        results.append(lvl)
    best = min(results, key=lambda chosen: float(values[chosen].sum()))
    return cands[best]


# ---------------------------------------------------------- fast grouping
def fast_grouping(sym: sp.csr_array, a: int) -> np.ndarray:
    """Groups of exactly ``a``: greedy agglomeration (always merge the two
    clusters with the most traffic between them whose sizes still fit; a
    full cluster leaves), then packing of the partial clusters."""
    p = sym.shape[0]
    up = sp.triu(sym, k=1, format="coo")
    adj: list[dict[int, float]] = [dict() for _ in range(p)]
    for u, v, w in zip(up.row.tolist(), up.col.tolist(), up.data.tolist()):
        adj[u][v] = w
        adj[v][u] = w
    heap = [(-w, u, v) for u, v, w in zip(up.row.tolist(), up.col.tolist(), up.data.tolist())]
    heapq.heapify(heap)
    size = [1] * p
    root = list(range(p))  # cluster id of a process: follow until fixed point
    while heap:
        negw, u, v = heapq.heappop(heap)
        if root[u] != u or root[v] != v or adj[u].get(v) != -negw or size[u] + size[v] > a:
            continue
        if len(adj[u]) < len(adj[v]):
            u, v = v, u
        root[v] = u
        size[u] += size[v]
        del adj[u][v]
        for x, wx in adj[v].items():
            if x == u:
                continue
            del adj[x][v]
            w_new = adj[u].get(x, 0.0) + wx
            adj[u][x] = adj[x][u] = w_new
        adj[v] = {}
        if size[u] == a:  # full: no more merges with u
            for x in list(adj[u]):
                del adj[x][u]
            adj[u] = {}
            continue
        for x, w_new in adj[u].items():
            if size[u] + size[x] <= a:
                heapq.heappush(heap, (-w_new, min(u, x), max(u, x)))
    cluster = np.asarray(root, dtype=np.int64)
    while True:  # path compression to the cluster roots
        nxt = cluster[cluster]
        if np.array_equal(nxt, cluster):
            break
        cluster = nxt
    ids, cluster = np.unique(cluster, return_inverse=True)
    sizes = np.bincount(cluster).astype(np.int64)
    c = sym.tocoo()
    r, q = cluster[c.row], cluster[c.col]
    keep = r != q
    quot = sp.csr_array((c.data[keep], (r[keep], q[keep])), shape=(ids.size, ids.size))
    quot.sum_duplicates()
    return _pack(quot, cluster, sizes, a)


def _pack(quot: sp.csr_array, cluster: np.ndarray, size: np.ndarray, a: int) -> np.ndarray:
    """Pack clusters (sizes <= a) into p / a groups of exactly a: seed each
    group with the largest unplaced cluster, add the most connected cluster
    that fits, else the largest that fits, else split one."""
    n_cl = size.size
    order = np.argsort(cluster, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(cluster, minlength=n_cl))])
    pending = [order[bounds[c]:bounds[c + 1]].tolist() for c in range(n_cl)]
    placed = np.zeros(n_cl, dtype=bool)
    pools: list[list[int]] = [[] for _ in range(a + 1)]  # clusters by size, stacks
    for c in np.argsort(-size, kind="stable")[::-1].tolist():
        pools[size[c]].append(c)
    groups = []

    def pop_largest(max_size: int) -> int:
        for s in range(max_size, 0, -1):
            while pools[s]:
                c = pools[s].pop()
                if not placed[c] and len(pending[c]) == s:
                    return c
        return -1

    while True:
        seed = pop_largest(a)
        if seed < 0:
            break
        group = []
        conn: dict[int, float] = {}

        def take(c: int, count: int) -> None:
            group.extend(pending[c][:count])
            del pending[c][:count]
            if pending[c]:
                pools[len(pending[c])].append(c)
            else:
                placed[c] = True
            lo, hi = quot.indptr[c], quot.indptr[c + 1]
            for d, w in zip(quot.indices[lo:hi].tolist(), quot.data[lo:hi].tolist()):
                if not placed[d]:
                    conn[d] = conn.get(d, 0.0) + w

        take(seed, len(pending[seed]))
        while len(group) < a:
            room = a - len(group)
            best, best_w = -1, -1.0
            for d, w in conn.items():
                if not placed[d] and len(pending[d]) <= room and w > best_w:
                    best, best_w = d, w
            if best < 0:
                best = pop_largest(room)
            if best >= 0:
                conn.pop(best, None)
                take(best, len(pending[best]))
                continue
            # every remaining cluster is larger than the room: split the most
            # connected one (or the smallest) across this group
            live = [d for d in conn if not placed[d]]
            d = max(live, key=lambda x: conn[x]) if live else _smallest_pending(pending, placed)
            conn.pop(d, None)
            take(d, room)
        groups.append(group)
    return np.asarray(groups, dtype=np.int64)


def _smallest_pending(pending, placed) -> int:
    live = [c for c in range(len(pending)) if not placed[c] and pending[c]]
    return min(live, key=lambda c: len(pending[c]))


def kahip_grouping(sym: sp.csr_array, a: int, seed: int = 0) -> np.ndarray:
    """Partition-based grouping: a perfectly balanced KaHIP partition into
    p / a blocks of ``a`` processes.  Traffic is scaled to integers whose sum
    fits KaHIP's 32-bit edge weights."""
    import kahip

    p = sym.shape[0]
    n_blocks = p // a
    if n_blocks == 1 or sym.nnz == 0:
        return np.arange(p, dtype=np.int64).reshape(n_blocks, a)
    top = min(1000.0, (2**31 - 1) / sym.nnz)  # large weights slow KaHIP down 100x
    w = np.maximum(1, np.rint(sym.data / sym.data.max() * top)).astype(np.int64)
    _, part = kahip.kaffpa(np.ones(p, dtype=np.int64).tolist(), sym.indptr.astype(np.int64).tolist(),
                           w.tolist(), sym.indices.astype(np.int64).tolist(),
                           n_blocks, 0.0, True, int(seed), 0)  # mode 0 = FAST
    # blocks are exactly a for a perfectly balanced partition; should KaHIP
    # leave one uneven, cutting the block-sorted order still gives groups of a
    return np.argsort(np.asarray(part, dtype=np.int64), kind="stable").reshape(n_blocks, a)


# -------------------------------------------------------------- refinement
def refine_groups(sym: sp.csr_array, members: np.ndarray) -> np.ndarray:
    """``refine_partition`` for equal groups given as a (groups, a) array."""
    n_groups, a = members.shape
    group_of = np.empty(sym.shape[0], dtype=np.int64)
    group_of[members.ravel()] = np.repeat(np.arange(n_groups), a)
    group_of = refine_partition(sym, group_of, n_groups)
    return np.argsort(group_of, kind="stable").reshape(n_groups, a)


def refine_partition(sym: sp.csr_array, group_of: np.ndarray, n_groups: int,
                     max_passes: int = 25) -> np.ndarray:
    """Swap processes between groups while that lowers the traffic leaving
    the groups; group sizes never change (empty virtual processes, rows
    without traffic, let a process move into a group with room).  Not in
    the 2010 paper: it repairs greedy choices of the independent-set
    heuristics, the fast grouping and the capacity split.

    A pass computes every process's traffic to every group (sparse S x
    membership), takes the processes whose best move gains, largest first,
    and swaps each with the member of its target group that makes the
    exchange gain most; a group takes part in one swap per pass, so every
    gain used is exact.  Stops after a pass with no swap."""
    p = sym.shape[0]
    group_of = np.asarray(group_of, dtype=np.int64).copy()
    if n_groups < 2 or sym.nnz == 0:
        return group_of
    for _ in range(max_passes):
        member_ind = sp.csr_array((np.ones(p), (np.arange(p), group_of)), shape=(p, n_groups))
        conn = (sym @ member_ind).tocoo()
        rows, cols, vals = conn.row.astype(np.int64), conn.col.astype(np.int64), conn.data
        keys = rows * n_groups + cols
        order = np.argsort(keys)
        keys, vals_sorted = keys[order], vals[order]

        def traffic(u, g):
            want = np.asarray(u, dtype=np.int64) * n_groups + g
            pos = np.minimum(np.searchsorted(keys, want), keys.size - 1)
            return np.where(keys[pos] == want, vals_sorted[pos], 0.0)

        own = traffic(np.arange(p), group_of)
        other = cols != group_of[rows]
        r, c, v = rows[other], cols[other], vals[other]
        if r.size == 0:  # no traffic between groups
            break
        pick = np.lexsort((c, -v, r))
        first = np.r_[True, r[pick][1:] != r[pick][:-1]]
        best_r, best_c, best_v = r[pick][first], c[pick][first], v[pick][first]
        gain = best_v - own[best_r]
        good = gain > 0
        cand = np.lexsort((best_r[good], -gain[good]))
        by_group = np.argsort(group_of, kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(group_of, minlength=n_groups))])
        locked = np.zeros(n_groups, dtype=bool)
        swaps = 0
        for u, target, g_u in zip(best_r[good][cand].tolist(), best_c[good][cand].tolist(),
                                  gain[good][cand].tolist()):
            home = int(group_of[u])
            if locked[home] or locked[target]:
                continue
            vs = by_group[starts[target]:starts[target + 1]]
            total = g_u + traffic(vs, home) - own[vs] - 2.0 * _pair_traffic(sym, np.full(vs.size, u), vs)
            j = int(np.argmax(total))
            if total[j] <= 1e-12 * g_u:
                continue
            group_of[u], group_of[vs[j]] = target, home
            locked[home] = locked[target] = True
            swaps += 1
        if swaps == 0:
            break
    return group_of


# ---------------------------------------------------------------- dispatch
def group_processes(sym: sp.csr_array, a: int, method: str = "auto", seed: int = 0,
                    max_candidates: int = MAX_CANDIDATES, refine: bool = True) -> np.ndarray:
    """GroupProcesses for one level: ``method`` is ``auto`` (exhaustive
    while C(p, a) <= max_candidates, else fast), ``exhaustive``, ``fast`` or
    ``kahip``; ``refine`` adds the swap refinement."""
    members = _choose_groups(sym, a, method, seed, max_candidates)
    return refine_groups(sym, members) if refine and 1 < a < sym.shape[0] else members


def _choose_groups(sym, a, method, seed, max_candidates) -> np.ndarray:
    p = sym.shape[0]
    if p % a:
        raise ValueError(f"{p} processes cannot form groups of {a}; extend first")
    if a == 1:
        return np.arange(p, dtype=np.int64).reshape(p, 1)
    if a == p:
        return np.arange(p, dtype=np.int64).reshape(1, p)
    if method == "auto":
        method = "exhaustive" if n_candidates(p, a) <= max_candidates else "fast"
    if method == "exhaustive":
        if n_candidates(p, a) > 100 * max_candidates:
            raise ValueError(f"exhaustive grouping of {p} processes by {a} would list "
                             f"{n_candidates(p, a):.3g} groups; use grouping=fast")
        return exhaustive_grouping(sym, a)
    if method == "fast":
        return fast_grouping(sym, a)
    if method == "kahip":
        return kahip_grouping(sym, a, seed)
    raise ValueError(f"unknown grouping {method!r}: choose auto, exhaustive, fast or kahip")
