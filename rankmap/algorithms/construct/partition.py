"""Graph partitioning backends from the field (KaHIP kaffpa, Mt-KaHyPar,
KaMinPar) and a balance repair that turns any partition into one meeting
hard capacities.

``partition_graph`` asks a backend for ``len(targets)`` blocks whose weights
are proportional to ``targets`` within an imbalance ``eps``.  Backends do not
always keep their promise (KaHIP issues #61 and #89: weighted or tiny graphs
come back unbalanced), so ``repair_balance`` then moves the vertices that
cost least from overloaded blocks to blocks with room; hierarchical
multisection relies on it for exact block sizes.

Presets follow SharedMap: ``fast``/``eco``/``strong`` are KaHIP
FAST/ECO/STRONG and Mt-KaHyPar DEFAULT/QUALITY/HIGHEST_QUALITY.  Measured on
delaunay_n15 (64 blocks): two kaffpa calls in two Python threads take twice
as long as one, so kaffpa holds the GIL; Mt-KaHyPar parallelises inside one
call (``threads``).  KaMinPar (deep multilevel, threads inside one call)
is the one for the large cuts: a 2^17-task stencil into 2048 blocks of
exactly 64 in 1.1 s CPU (cut 79342) where KaHIP fast took 3.1 s (79770)
and Mt-KaHyPar 15 s (78240), 2^20 into 16384 blocks in 12 s on one core
(``docs/results/scale.md``); its presets are KaMinPar's fast/default/strong,
their large-k variants beyond LARGE_K blocks.  Its Python binding reads
graphs from files only, so each call writes a ParHIP binary file (memory
backed where /dev/shm exists).  With more than one thread its label
propagation makes the partition differ from run to run; one thread repeats.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import scipy.sparse as sp

BACKENDS = ("kahip", "mtkahypar", "kaminpar")
PRESETS = ("fast", "eco", "strong")
_INT_LIMIT = 2 ** 30  # keep every weight sum inside a C int


def _check(backend: str, preset: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown partitioning backend {backend!r}; choose from {', '.join(BACKENDS)}")
    if preset not in PRESETS:
        raise ValueError(f"unknown partitioning preset {preset!r}; choose from {', '.join(PRESETS)}")


def integer_weights(w: np.ndarray) -> np.ndarray:
    """Non-negative weights as int64 the C libraries accept: kept when they
    are integers with a small sum, else scaled so the sum stays below 2^30
    (positive weights never round to 0)."""
    w = np.asarray(w, dtype=np.float64)
    total = float(w.sum())
    if np.all(w == np.round(w)) and total < _INT_LIMIT:
        return w.astype(np.int64)
    scaled = np.round(w * (_INT_LIMIT / 4 / max(total, 1e-300)))
    return np.where(w > 0, np.maximum(scaled, 1), 0).astype(np.int64)


def partition_graph(adj: sp.csr_array, weights: np.ndarray, targets, eps: float, *,
                    backend: str = "kahip", preset: str = "eco", seed: int = 0,
                    threads: int = 1, deterministic: bool = False) -> np.ndarray:
    """Block of every vertex of the undirected graph ``adj`` (symmetric CSR,
    no diagonal), aiming at block weights ``targets[i] / sum(targets) * c(V)``
    within ``(1 + eps)``.  The result may violate the balance: see
    ``repair_balance``."""
    _check(backend, preset)
    targets = np.asarray(targets, dtype=np.int64)
    k, n = targets.size, adj.shape[0]
    if k == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    if adj.nnz == 0 or n <= k:
        return _spread(weights, targets)
    if backend == "kahip":
        return _kahip(adj, weights, targets, eps, preset, seed)
    if backend == "kaminpar":
        return _kaminpar(adj, weights, targets, eps, preset, seed, threads)
    return _mtkahypar(adj, weights, targets, eps, preset, seed, threads, deterministic)


# seconds of one partition_graph call, KaHIP fast: the larger of two fits, each on the
# graphs it came from (benchmarks/partition_prices.py, CPU seconds).  Up to ~350k adjacency
# entries (model graphs of 12 Walshaw graphs at 64-2048 blocks and the graphs themselves,
# into 2-64 parts): _PARTITION_SCALE (n + nnz)^_SIZE_POWER parts^_PARTS_POWER (the linear
# rate alone priced these 3-12x low, so the multisection's deadline let calls run past it);
# beyond, on 2-D stencils of 2^16-2^20 tasks, the linear rate _PARTITION_RATE (n + nnz)
# (1 + parts/64)^0.85, where the power law priced 2^20 into 2 parts 7x low.  Over all 297
# calls measured / priced 0.20-2.9, median 0.89, 90 % below 1.47.  The other presets and
# Mt-KaHyPar (1 thread) by their ratio to KaHIP fast in auto's work model
_PARTITION_SCALE, _SIZE_POWER, _PARTS_POWER = 3.5e-5, 0.57, 0.62
_PARTITION_RATE = 1e-6
_PRESET_FACTOR = {("kahip", "fast"): 1.0, ("kahip", "eco"): 2.9, ("kahip", "strong"): 8.3,
                  ("mtkahypar", "fast"): 7.6, ("mtkahypar", "eco"): 7.6, ("mtkahypar", "strong"): 7.6}
# KaMinPar, one thread: CPU seconds per vertex and per adjacency entry (fast: a 2-D stencil into blocks
# of 64 with one task of slack, 2^17 tasks 0.57 s, 2^20 5.8 s; held to exactly 64 they took 0.68 and
# 9.4 s; AMG-like graphs of 512 and 1000 tasks with 188 and 221 partners each 0.04 and 0.07 s; default
# 1.9x, strong 25x fast at 2^17, 4.3x on the 1000 AMG tasks, measured without slack) and per call (writing
# and loading the file, its contexts: 12 ms on a 256-task graph); threads divide the rate by
# KAMINPAR_SPEEDUP per thread
_KAMINPAR_RATE = {"fast": (5e-6, 1.9e-7), "eco": (1.5e-5, 5.7e-7), "strong": (2e-4, 1.2e-6)}
_KAMINPAR_CALL = 0.01
# beyond 2^20 vertices into 16384 blocks the time per vertex grows: x (n / 2^20 * k / 16384)^0.17 (one thread:
# 2^20 into 16, 256, 16384 blocks 3.1, 4.3, 9.7 s; 2^24 into 262144 389 s, the rates alone say 154 s)
_KAMINPAR_LARGE = (1 << 20, 16384, 0.17)
KAMINPAR_SPEEDUP = 0.6  # of each further thread (KaMinPar's own figures: 2^20 on 16 threads 6-7x one)


# one map_onto_graph call (mtkahypar_map) on a subtree of <= 64 PEs: a fixed part
# plus a part per adjacency entry.  Fitted on a dedicated core to 15 instances
# (the five 64-rank traffic matrices, five models at 64 and 256 tasks): measured
# over priced 0.33-1.7; the traffic matrix amg (64 tasks, 4002 entries) took 8.3 s
_STEINER_CALL, _STEINER_ENTRY = 0.35, 1.9e-3


def steiner_seconds(nnz: int, calls: int = 1) -> float:
    """Estimated seconds of ``calls`` Mt-KaHyPar mapping calls that together
    see ``nnz`` adjacency entries: what a deadline weighs before them."""
    return calls * _STEINER_CALL + nnz * _STEINER_ENTRY


# on dense graphs (DENSE_DEGREE partners per task and more) KaHIP and Mt-KaHyPar take longer per
# adjacency entry as the degree grows: (degree / 8) to these powers (CPU seconds over the sparse
# price, AMG-like and geometric graphs of 512-1000 tasks and 190-240 partners into nodes of 48: KaHIP
# fast 4.4-5x, eco 11.7x, strong 14x, Mt-KaHyPar 1.7x); KaMinPar's rate holds (0.04-0.07 s)
_DENSITY_POWER = {("kahip", "fast"): 0.45, ("kahip", "eco"): 0.75, ("kahip", "strong"): 0.8,
                  ("mtkahypar", "fast"): 0.16, ("mtkahypar", "eco"): 0.16, ("mtkahypar", "strong"): 0.16}
DENSE_DEGREE = 64       # a graph with at least this many partners per vertex on average ...
DENSE_MIN_TASKS = 512   # ... and at least this many vertices is dense (``dense``)


def dense(n: int, nnz: int) -> bool:
    """Hundreds of partners per task (AMG's coarse levels, all-to-all
    phases): where the partitioners' prices grow with the degree and a
    refinement pass over the edges costs a degree per pair."""
    return n >= DENSE_MIN_TASKS and nnz >= DENSE_DEGREE * n


def density_factor(backend: str, preset: str, n: int, nnz: int) -> float:
    """How much longer than its sparse price a partitioning call of a
    dense graph takes (1 on others)."""
    return (nnz / n / 8) ** _DENSITY_POWER.get((backend, preset), 0.0) if dense(n, nnz) else 1.0


def partition_seconds(n: int, nnz: int, parts: int, backend: str = "kahip", preset: str = "fast",
                      threads: int = 1) -> float:
    """Estimated seconds of ``partition_graph`` on ``n`` vertices with
    ``nnz`` adjacency entries into ``parts`` blocks: what a deadline
    weighs before a call it cannot interrupt."""
    if parts <= 1 or nnz == 0 or n <= parts:
        return 0.0
    if backend == "kaminpar":
        speedup = 1 + KAMINPAR_SPEEDUP * (max(int(threads), 1) - 1)
        per_vertex, per_entry = _KAMINPAR_RATE.get(preset, _KAMINPAR_RATE["strong"])
        large = max(1.0, n / _KAMINPAR_LARGE[0] * parts / _KAMINPAR_LARGE[1]) ** _KAMINPAR_LARGE[2]
        return _KAMINPAR_CALL + large * (per_vertex * n + per_entry * nnz) / speedup
    factor = _PRESET_FACTOR.get((backend, preset), 8.3) * density_factor(backend, preset, n, nnz)
    size = n + nnz
    return factor * max(_PARTITION_SCALE * size ** _SIZE_POWER * parts ** _PARTS_POWER,
                        _PARTITION_RATE * size * (1 + parts / 64) ** 0.85)


def _spread(weights: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """No edges (or no more vertices than blocks): any placement cuts the
    same, so fill blocks in proportion to their targets, heaviest first."""
    order = np.argsort(-np.asarray(weights), kind="stable")
    share = targets / targets.sum() * float(np.sum(weights))
    load = np.zeros(targets.size)
    block = np.empty(len(weights), dtype=np.int64)
    for v in order.tolist():
        b = int(np.argmax(share - load))
        block[v] = b
        load[b] += weights[v]
    return block


def _kahip(adj, weights, targets, eps, preset, seed):
    """kaffpa only knows equal blocks: for unequal targets partition into
    sum(targets) / gcd equal parts and give each block consecutive parts
    (kaffpa numbers parts by recursive bisection, so neighbours stay close)."""
    import kahip

    g = math.gcd(*targets.tolist())
    parts = targets // g
    n_parts = int(parts.sum())
    mode = {"fast": kahip.FAST, "eco": kahip.ECO, "strong": kahip.STRONG}[preset]
    vw = integer_weights(weights)
    # kaffpa with imbalance exactly 0 is very slow (12.6 s against 0.02 s on a
    # 64-vertex graph, same result); below 1 / ceil(c(V)/k) its rule
    # floor((1 + eps) * ceil(c(V)/k)) still demands perfect balance
    if eps <= 0:
        eps = 0.5 / max(1, math.ceil(int(vw.sum()) / n_parts))
    _, part = kahip.kaffpa(vw.astype(np.int32),
                           adj.indptr.astype(np.int32), integer_weights(adj.data).astype(np.int32),
                           adj.indices.astype(np.int32), n_parts, float(eps), True,
                           int(seed) % (2 ** 31), mode)
    block_of_part = np.repeat(np.arange(targets.size), parts)
    return block_of_part[np.asarray(part, dtype=np.int64)]


LARGE_K = 64  # KaMinPar's large-k presets beyond this many blocks
_KAMINPAR_CONTEXT = {"fast": ("fast", "largek-fast"), "eco": ("default", "largek"),
                     "strong": ("strong", "largek-strong")}


def _kaminpar(adj, weights, targets, eps, preset, seed, threads):
    """KaMinPar's partition under the block weight caps of ``targets``
    (never below a block's exact share rounded up, as for Mt-KaHyPar)."""
    import kaminpar

    vw = integer_weights(weights)
    share = int(vw.sum()) * targets / targets.sum()
    caps = np.maximum(np.floor((1 + max(eps, 0.0)) * share + 1e-9), np.ceil(share - 1e-9)).astype(np.int64)
    name = _KAMINPAR_CONTEXT[preset][targets.size > LARGE_K]
    with _parhip_file(adj, vw) as path:
        graph = kaminpar.load_graph(path, kaminpar.GraphFileFormat.PARHIP)
    kaminpar.reseed(int(seed) % (2 ** 31))
    solver = kaminpar.KaMinPar(max(int(threads), 1), kaminpar.context_by_name(name))
    return np.asarray(solver.compute_partition(graph, np.maximum(caps, 1).tolist()), dtype=np.int64)


class _parhip_file:
    """A temporary ParHIP binary graph file (KaMinPar's reader: a header of
    three 64-bit words, version flags, n, m; byte offsets of the rows; the
    neighbours; vertex and edge weights, each left out when all are 1),
    removed on exit.  Widths follow the binding's build (64-bit ids and
    weights, or 32-bit)."""

    def __init__(self, adj, vw: np.ndarray):
        self.adj, self.vw = adj, vw
        self.path = None

    def __enter__(self) -> str:
        import os
        import tempfile

        import kaminpar

        wide = bool(kaminpar.__64bit__)
        word, weight = (np.uint64, np.int64) if wide else (np.uint32, np.int32)
        size = np.dtype(word).itemsize
        ew = integer_weights(self.adj.data)
        unit_edges, unit_vertices = bool((ew == 1).all()), bool((self.vw == 1).all())
        version = (int(unit_edges) | 2 * int(unit_vertices)) + (0 if wide else 4 | 8 | 16 | 32)
        n, m = self.adj.shape[0], self.adj.nnz
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        fd, self.path = tempfile.mkstemp(prefix="rankmap-", suffix=".parhip", dir=shm)
        with os.fdopen(fd, "wb") as fh:
            np.array([version, n, m], dtype=np.uint64).tofile(fh)
            head = 24 + (n + 1) * size
            (head + np.asarray(self.adj.indptr, dtype=np.uint64) * np.uint64(size)).astype(word).tofile(fh)
            np.asarray(self.adj.indices).astype(word).tofile(fh)
            if not unit_vertices:
                self.vw.astype(weight).tofile(fh)
            if not unit_edges:
                ew.astype(weight).tofile(fh)
        return self.path

    def __exit__(self, *exc):
        import os

        os.unlink(self.path)


@lru_cache(maxsize=None)
def mtkahypar_initializer(threads: int):
    """One Mt-KaHyPar thread pool per thread count (creating it is costly)."""
    import mtkahypar

    return mtkahypar.initialize(max(int(threads), 1), False)


def mtkahypar_started() -> bool:
    """Whether this process has Mt-KaHyPar's thread pool already (the first
    call pays its import and start: MTKAHYPAR_START seconds)."""
    return mtkahypar_initializer.cache_info().currsize > 0


MTKAHYPAR_START = 0.5  # its import and thread pool: 0.2-0.6 s wall at load ~20 on the 2-core machine


def first_call_seconds(backend: str) -> float:
    """Seconds the first call of ``backend`` ("both": either) in this process
    pays before it partitions anything: Mt-KaHyPar's import and thread pool,
    which no deadline can cut.  For deadline checks only: a price that
    depended on what the process ran before would make plans differ."""
    return MTKAHYPAR_START if backend in ("mtkahypar", "both") and not mtkahypar_started() else 0.0


def _mtk_preset(preset: str, deterministic: bool):
    """Mt-KaHyPar's preset for ours.  Its other presets are not repeatable
    within one process: the same call with the same seed (1 thread) cut uk
    into 4 blocks at 240, 208, 224, 208 on four calls; DETERMINISTIC and
    DETERMINISTIC_QUALITY give the same partition every time (the same one
    for both, whatever the seed: see ``_mtkahypar`` for how the seed acts)."""
    import mtkahypar

    if deterministic:
        return mtkahypar.PresetType.DETERMINISTIC if preset == "fast" else mtkahypar.PresetType.DETERMINISTIC_QUALITY
    return {"fast": mtkahypar.PresetType.DEFAULT, "eco": mtkahypar.PresetType.QUALITY,
            "strong": mtkahypar.PresetType.HIGHEST_QUALITY}[preset]


def _mtkahypar(adj, weights, targets, eps, preset, seed, threads, deterministic=False):
    """Mt-KaHyPar's partition.  Its deterministic presets ignore the seed
    (one partition for every seed), so there the seed picks a vertex order
    instead: the graph is handed over relabelled by a seeded permutation.
    Different orders give different partitions of different quality (J of
    the refined multisection on add32/2048 over 5 orders: 112792-119578),
    each repeatable."""
    if deterministic:
        order = np.random.default_rng(int(seed)).permutation(adj.shape[0])
        part = _mtkahypar_call(adj[order][:, order], np.asarray(weights)[order], targets, eps, preset, seed,
                               threads, True)
        block = np.empty_like(part)
        block[order] = part
        return block
    return _mtkahypar_call(adj, weights, targets, eps, preset, seed, threads, False)


def _mtkahypar_call(adj, weights, targets, eps, preset, seed, threads, deterministic):
    import mtkahypar

    mtk = mtkahypar_initializer(threads)
    kind = _mtk_preset(preset, deterministic)
    ctx = mtk.context_from_preset(kind)
    ctx.logging = False
    ctx.set_partitioning_parameters(int(targets.size), float(max(eps, 0.0)), mtkahypar.Objective.CUT)
    vw = integer_weights(weights)
    total = int(vw.sum())
    share = total * targets / targets.sum()
    # never below the exact share rounded up: with eps ~ 0 and a total that
    # targets do not divide, floored caps sum below c(V) and Mt-KaHyPar
    # refuses the instance ("sum of individual part weights is less than
    # the total"); repair_balance enforces the real bounds afterwards
    caps = np.maximum(np.floor((1 + max(eps, 0.0)) * share + 1e-9), np.ceil(share - 1e-9)).astype(np.int64)
    ctx.set_individual_target_block_weights(np.maximum(caps, 1).tolist())
    mtkahypar.set_seed(int(seed) % (2 ** 31))  # a C int, as for KaHIP
    upper = sp.triu(adj, k=1).tocoo()
    graph = mtk.create_graph(ctx, adj.shape[0], upper.nnz,
                             list(zip(upper.row.tolist(), upper.col.tolist())),
                             vw.tolist(), integer_weights(upper.data).tolist())
    return np.asarray(graph.partition(ctx).get_partition(), dtype=np.int64)


def mtkahypar_map(adj: sp.csr_array, weights: np.ndarray, distance, capacity: np.ndarray, eps: float, *,
                  preset: str = "eco", seed: int = 0, threads: int = 1) -> np.ndarray:
    """Mt-KaHyPar's own process mapping (``map_onto_graph``, Steiner-tree
    objective): the PE (0..len(capacity)-1) of every vertex of ``adj``,
    where ``distance(p, q)`` is the vectorised distance of the target PEs
    (at most 64, Mt-KaHyPar's limit) and ``capacity`` their loads.  The
    target graph is the complete graph weighted by D: on a tree machine D is
    an ultrametric, so its shortest paths are D itself.  May miss the
    capacities: see ``repair_balance``."""
    import mtkahypar

    _check("mtkahypar", preset)
    k, n = capacity.size, adj.shape[0]
    if k == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    if k > 64:
        raise ValueError(f"Mt-KaHyPar maps onto at most 64 PEs, got {k}")
    mtk = mtkahypar_initializer(threads)
    kind = {"fast": mtkahypar.PresetType.DEFAULT, "eco": mtkahypar.PresetType.QUALITY,
            "strong": mtkahypar.PresetType.HIGHEST_QUALITY}[preset]
    ctx = mtk.context_from_preset(kind)
    ctx.logging = False
    ctx.set_mapping_parameters(k, float(max(eps, 0.0)))
    vw = integer_weights(weights)
    scale = float(vw.sum()) / max(float(np.sum(weights)), 1e-300)
    ctx.set_individual_target_block_weights(np.maximum(np.floor(capacity * scale + 1e-9), 1).astype(int).tolist())
    mtkahypar.set_seed(int(seed) % (2 ** 31))  # a C int, as for KaHIP
    u, v = np.triu_indices(k, 1)
    d = np.asarray(distance(u, v), dtype=np.float64)
    target = mtk.create_target_graph(ctx, k, u.size, list(zip(u.tolist(), v.tolist())),
                                     integer_weights(np.where(d > 0, d, 1.0)).tolist())
    upper = sp.triu(adj, k=1).tocoo()
    graph = mtk.create_graph(ctx, n, upper.nnz, list(zip(upper.row.tolist(), upper.col.tolist())),
                             vw.tolist(), integer_weights(upper.data).tolist())
    return np.asarray(graph.map_onto_graph(target, ctx).get_partition(), dtype=np.int64)


def repair_balance(adj: sp.csr_array, weights: np.ndarray, block: np.ndarray,
                   capacity: np.ndarray) -> np.ndarray:
    """Move vertices out of blocks heavier than ``capacity`` into blocks with
    room, each time the vertex whose move loses the least cut weight.

    Raises ValueError when no vertex of an overloaded block fits anywhere
    (the capacities cannot hold the weights)."""
    block = np.asarray(block, dtype=np.int64).copy()
    weights = np.asarray(weights, dtype=np.float64)
    capacity = np.asarray(capacity, dtype=np.float64)
    k = capacity.size
    load = np.bincount(block, weights=weights, minlength=k)
    tol = 1e-9 * max(float(capacity.max(initial=0)), 1.0)
    while True:
        over = np.flatnonzero(load > capacity + tol)
        if over.size == 0:
            return block
        b = int(over[np.argmax(load[over] - capacity[over])])
        members = np.flatnonzero(block == b)
        # connection of each member to every block, from its rows alone
        # (O(their edges + members k), not O(n) per overloaded block)
        rows = adj[members]
        owner = np.repeat(np.arange(members.size), np.diff(rows.indptr))
        conn = np.bincount(owner * k + block[rows.indices], weights=rows.data,
                           minlength=members.size * k).reshape(members.size, k)
        room = capacity - load
        fits = weights[members][:, None] <= room[None, :] + tol
        fits[:, b] = False
        gain = np.where(fits, conn - conn[:, [b]], -np.inf)
        best = np.argmax(gain, axis=1)
        best_gain = gain[np.arange(members.size), best]
        if not np.isfinite(best_gain).any():
            raise ValueError(f"cannot balance: no task of a block with load {load[b]:g} "
                             f"(capacity {capacity[b]:g}) fits into another block")
        moved = False
        for i in np.argsort(-best_gain, kind="stable").tolist():
            if load[b] <= capacity[b] + tol or not np.isfinite(best_gain[i]):
                break
            v, t = int(members[i]), int(best[i])
            if weights[v] > capacity[t] - load[t] + tol:
                continue  # the target filled up during this round
            block[v] = t
            load[b] -= weights[v]
            load[t] += weights[v]
            moved = True
        if not moved:
            raise ValueError(f"cannot balance: block load {load[b]:g} exceeds capacity {capacity[b]:g}")
