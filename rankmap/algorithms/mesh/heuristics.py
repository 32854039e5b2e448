"""Bhatele & Kale's heuristics for irregular graphs on meshes and tori.

All of them follow one scheme (sec. II): pick a "suitable" task, find a
"desirable" grid point for it, and take the nearest node with a free PE
(``mesh_nearest``: the paper's quadtree/octree, or spiralling with
``search="spiral"``).

- ``bft``: breadth-first traversal from task 0 on node 0; neighbours are
  placed around the node of the task that reached them.
- ``mht``: max-heap traversal: start with the task of most neighbours at the
  centre; then always the task with the most placed neighbours (ties: the
  most bytes to them), at the centroid of their nodes.  The centroid is the
  paper's: "placed close to the centroid of the processors on which its
  neighbors have been placed" (sec. IV, Algorithm 1), each placed neighbour
  counting once, whatever its bytes (a byte-weighted centroid gives 3.43
  against 3.28 hops per byte at 1024 tasks on 32x32).  The
  paper's algorithm is 2-D-mesh only; in torus dimensions we take the mean
  on the circle, since the plain mean of neighbours on both sides of the
  wrap lands on the far side of the ring (8x8x4 torus, 256 tasks: 2.60
  plain vs 2.15 circular).
- ``affn``: affine map of task coordinates onto the grid, task id order.
- ``coce`` / ``coce_mht``: the tasks nearest the 2^d corners of the
  coordinates' bounding box go to the grid's corners, then BFT / MHT from
  there.  The paper wants "the four corners of the communication graph"
  and, because a graph's corners are not always found, "simplistically"
  takes the tasks of minimum and maximum X and Y (sec. VI); it does not say
  which of them goes to which mesh corner, and in 3-D it uses "eight
  corners", which four extremes cannot give.  The tasks nearest the
  bounding box's corners are the graph's corners on a rectangular domain
  and give the eight 3-D corners, so we take those.
- ``pairs``: MHT followed by pairwise exchanges (``pairwise_exchange``),
  the paper's PAIRS.
- ``mesh_auto``: identity, ``curve`` (the given order along a Z-order
  curve, ``curve.py``), every heuristic above and ``mesh_bisect``
  (recursive bisection, ``bisect.py``); the three of lowest J
  are each refined (two ways up to 256 tasks, see ``mesh_auto``) and the
  lowest J is kept: rankmap's own method on meshes.  The two refinements search different neighbourhoods:
  swap refinement (``refine.swap_refine``'s search, compiled for meshes in
  ``refine._kernels``) swaps tasks close in the *graph* (N_C^d), pairwise
  exchange tries the *machine* slots around a task's neighbours (free slots
  included).  Measured on MapLib's 64-rank traffic and delaunay partitions
  (``benchmarks/mesh_heuristics.py``), neither wins everywhere: pairwise
  exchange alone is best on CG and BT-MZ at 64 ranks, swap refinement then
  pairwise exchange on the 256 ... 4096-task meshes.

Coordinates (``coords=`` array, ``coords_file=`` path) are optional: without
them a force-directed layout of the graph stands in (``rankmap.layout``).
Several tasks per PE work for equal vertex weights (``pe_capacity``); a
node's slots are handed out round-robin over its cores.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

from ...cost import mapping_cost
from ...deadline import Deadline
from ...graph import CommGraph
from ...layout import check_coordinates, infer_coordinates, layout_method, load_coordinates
from ...topology.mesh import MeshTopology
from ..registry import METHODS, register
from ..construct.baselines import pe_capacity
from .nearest import FreeNodeTree, SpiralSearch
from ..refine.swaps import swap_refine
from ..construct.slots import SlotTable, candidate_slots

SEARCHES = {"tree": FreeNodeTree, "spiral": SpiralSearch}


def _require_mesh(topology) -> MeshTopology:
    if not isinstance(topology, MeshTopology):
        raise ValueError("this method maps onto a mesh or torus (--mesh / --torus); "
                         "on a tree topology use treematch, multisection or greedy")
    return topology


class _Placer:
    """Task -> PE assignment on a mesh through a nearest-free-node search."""

    def __init__(self, graph: CommGraph, mesh: MeshTopology, eps, search: str):
        if search not in SEARCHES:
            raise ValueError(f"unknown nearest-node search {search!r}; choose tree or spiral")
        self.mesh = mesh
        self.per_pe = int(pe_capacity(graph, mesh, eps)[0])
        self.search = SEARCHES[search](mesh, np.full(mesh.n_nodes, self.per_pe * mesh.cores))
        self.used = np.zeros(mesh.n_nodes, dtype=np.int64)
        self.pe = np.full(graph.n, -1, dtype=np.int64)
        self.node = np.full(graph.n, -1, dtype=np.int64)

    def place(self, task: int, point) -> int:
        node = self.search.nearest(point)
        self.search.take(node)
        self.pe[task] = node * self.mesh.cores + self.used[node] % self.mesh.cores
        self.used[node] += 1
        self.node[task] = node
        return node

    def coords_of(self, task: int) -> np.ndarray:
        return self.mesh.node_coords(self.node[task])

    def centroid(self, nbrs) -> np.ndarray:
        """Centroid of the nodes of placed tasks ``nbrs``, each counted once
        (Bhatele & Kale, Algorithm 1), as a grid point (circular mean in
        torus dimensions)."""
        m = self.mesh
        c = m.node_coords(self.node[nbrs]).astype(np.float64)
        w = np.full(len(nbrs), 1.0 / len(nbrs))
        out = np.empty(m.ndim)
        for k, (d, t) in enumerate(zip(m.dims, m.torus)):
            if t and d > 1:
                ang = 2 * np.pi * c[:, k] / d
                s, co = np.dot(w, np.sin(ang)), np.dot(w, np.cos(ang))
                out[k] = (np.arctan2(s, co) * d / (2 * np.pi)) % d if abs(s) + abs(co) > 1e-9 else c[0, k]
            else:
                out[k] = np.dot(w, c[:, k])
        return np.rint(out).astype(np.int64) % np.asarray(m.dims)


def _centre(mesh: MeshTopology) -> tuple:
    return tuple(d // 2 for d in mesh.dims)


def _bft(graph, placer: _Placer, seeds: list[int], origin) -> np.ndarray:
    """Breadth-first traversal from the already placed ``seeds``; components
    the traversal cannot reach restart at the free node nearest ``origin``."""
    sym = graph.symmetric
    queue = deque(seeds)
    next_unplaced = 0
    while True:
        while queue:
            u = queue.popleft()
            here = placer.coords_of(u)
            for v in sym.indices[sym.indptr[u]:sym.indptr[u + 1]].tolist():
                if placer.pe[v] < 0:
                    placer.place(v, here)
                    queue.append(v)
        while next_unplaced < graph.n and placer.pe[next_unplaced] >= 0:
            next_unplaced += 1
        if next_unplaced == graph.n:
            return placer.pe
        placer.place(next_unplaced, origin)
        queue.append(next_unplaced)


def _mht(graph, placer: _Placer, seeds: list[int]) -> np.ndarray:
    """Max-heap traversal from the placed ``seeds``: next is the task with
    the most placed neighbours (then most bytes to them), placed nearest the
    centroid of those neighbours; a new component starts at the centre with
    its task of most neighbours."""
    sym = graph.symmetric
    indptr, indices, data = sym.indptr, sym.indices, sym.data
    count = np.zeros(graph.n, dtype=np.int64)
    conn = np.zeros(graph.n)
    heap: list = []

    def placed(u):
        lo, hi = indptr[u], indptr[u + 1]
        for v, w in zip(indices[lo:hi].tolist(), data[lo:hi].tolist()):
            if placer.pe[v] < 0:
                count[v] += 1
                conn[v] += w
                heapq.heappush(heap, (-count[v], -conn[v], v))

    for s in seeds:
        placed(s)
    degree = np.diff(indptr)
    by_degree = np.argsort(-degree, kind="stable").tolist()
    next_start = 0
    while True:
        while heap:
            negc, negw, u = heapq.heappop(heap)
            if placer.pe[u] >= 0 or -negc != count[u] or -negw != conn[u]:
                continue  # stale entry
            lo, hi = indptr[u], indptr[u + 1]
            nbrs = indices[lo:hi]
            mask = placer.pe[nbrs] >= 0
            placer.place(u, placer.centroid(nbrs[mask]))
            placed(u)
        while next_start < graph.n and placer.pe[by_degree[next_start]] >= 0:
            next_start += 1
        if next_start == graph.n:
            return placer.pe
        start = by_degree[next_start]
        placer.place(start, _centre(placer.mesh))
        placed(start)


def task_coordinates(graph: CommGraph, mesh: MeshTopology, coords=None, coords_file=None,
                     seed: int = 0, layout: str = "auto") -> np.ndarray:
    """The tasks' coordinates: given (array or file), or a layout of the graph."""
    if coords_file is not None:
        coords = load_coordinates(coords_file, graph.n)
    if coords is None:
        return infer_coordinates(graph, mesh.ndim, seed=seed, method=layout)
    return check_coordinates(coords, graph.n, mesh.ndim)


def _affine(coords: np.ndarray, mesh: MeshTopology) -> np.ndarray:
    """Grid point of each task: floor(P * (x - min) / (max - min)), clamped;
    a dimension without spread goes to the middle."""
    lo, hi = coords.min(axis=0), coords.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    dims = np.asarray(mesh.dims)
    pts = np.floor(dims * (coords - lo) / span).astype(np.int64)
    pts = np.minimum(pts, dims - 1)
    return np.where(hi > lo, pts, dims // 2)


def _place_corners(coords: np.ndarray, placer: _Placer) -> list[int]:
    """Tasks nearest the corners of the coordinates' bounding box go to the
    matching corners of the grid; returns the tasks placed."""
    mesh = placer.mesh
    lo, hi = coords.min(axis=0), coords.max(axis=0)
    unit = (coords - lo) / np.where(hi > lo, hi - lo, 1.0)
    seeds: list[int] = []
    for corner in range(2 ** mesh.ndim):
        bits = np.array([(corner >> (mesh.ndim - 1 - k)) & 1 for k in range(mesh.ndim)])
        dist = np.abs(unit - bits).sum(axis=1)
        dist[seeds] = np.inf
        t = int(np.argmin(dist))
        if not np.isfinite(dist[t]):
            break
        placer.place(t, bits * (np.asarray(mesh.dims) - 1))
        seeds.append(t)
    return seeds


@register("bft", "mesh/torus: breadth-first traversal (Bhatele & Kale)", machines=("mesh",))
def bft(graph, topology, *, seed=0, eps=None, search="tree", **_):
    mesh = _require_mesh(topology)
    placer = _Placer(graph, mesh, eps, search)
    if graph.n == 0:
        return placer.pe
    origin = (0,) * mesh.ndim
    placer.place(0, origin)
    return _bft(graph, placer, [0], origin)


@register("mht", "mesh/torus: max-heap traversal, most placed neighbours first (Bhatele & Kale)",
          machines=("mesh",))
def mht(graph, topology, *, seed=0, eps=None, search="tree", **_):
    mesh = _require_mesh(topology)
    return _mht(graph, _Placer(graph, mesh, eps, search), [])


@register("affn", "mesh/torus: affine map of task coordinates (given or laid out)", machines=("mesh",))
def affn(graph, topology, *, seed=0, eps=None, search="tree", coords=None, coords_file=None,
         layout="auto", **_):
    mesh = _require_mesh(topology)
    xyz = task_coordinates(graph, mesh, coords, coords_file, seed, layout)
    placer = _Placer(graph, mesh, eps, search)
    for t, point in enumerate(_affine(xyz, mesh)):
        placer.place(t, point)
    return placer.pe


def _corners_then(traverse, graph, topology, eps, search, coords, coords_file, seed, layout):
    """COCE's shared part: corner tasks on the grid's corners, then ``traverse``."""
    mesh = _require_mesh(topology)
    placer = _Placer(graph, mesh, eps, search)
    if graph.n == 0:
        return placer.pe
    seeds = _place_corners(task_coordinates(graph, mesh, coords, coords_file, seed, layout), placer)
    return traverse(graph, placer, seeds)


@register("coce", "mesh/torus: corners to centre, then breadth-first (Bhatele & Kale)",
          machines=("mesh",))
def coce(graph, topology, *, seed=0, eps=None, search="tree", coords=None, coords_file=None,
         layout="auto", **_):
    def bft_from(g, placer, seeds):
        return _bft(g, placer, seeds, _centre(placer.mesh))

    return _corners_then(bft_from, graph, topology, eps, search, coords, coords_file, seed, layout)


@register("coce_mht", "mesh/torus: corners to centre, then max-heap traversal (Bhatele & Kale)",
          machines=("mesh",))
def coce_mht(graph, topology, *, seed=0, eps=None, search="tree", coords=None, coords_file=None,
             layout="auto", **_):
    return _corners_then(_mht, graph, topology, eps, search, coords, coords_file, seed, layout)


@register("pairs", "mesh/torus: MHT then pairwise exchanges lowering hop-bytes", machines=("mesh",))
def pairs(graph, topology, *, seed=0, eps=None, search="tree", rounds=8, **_):
    pe = mht(graph, topology, seed=seed, eps=eps, search=search)
    return pairwise_exchange(graph, topology, pe, eps=eps, rounds=rounds)


# identity is a candidate: a program's own rank order is often a good
# mapping already (Bhatele & Kale sec. VIII), and auto must not lose to it
# mesh_bisect: recursive bisection of graph and mesh (KaHIP), the partitioning start;
# curve: the given order along a Z-order curve (mesh_curve.py: exact on NPB CG);
# under a budget the order matters: the partitioning start first, the ones
# that need a graph layout (the costliest step below 1024 tasks) last
MESH_AUTO_CANDIDATES = ["identity", "curve", "mesh_bisect", "mht", "bft", "coce_mht", "coce", "affn"]


MESH_AUTO_N2_MAX_TASKS = 256  # swap refinement: all pairs up to here, N_C^10 beyond


#: the candidates that need task coordinates (a layout of the graph when none are given)
NEEDS_COORDS = ("coce_mht", "coce", "affn")
#: counted seconds per task of each candidate, of a graph layout, of one pair
#: the swap refinement evaluates and of a pairwise-exchange round per task
#: (CPU seconds, warm, on scrambled 2-D and 3-D stencils of 256-4096 tasks
#: on tori: about the larger figure of each)
CANDIDATE_PRICE = {"identity": 0.0, "curve": 0.0, "mht": 6.0e-4, "coce_mht": 6.0e-4, "bft": 3.5e-4,
                   "coce": 4.0e-4, "affn": 7.0e-4, "mesh_bisect": 3.5e-3}
LAYOUT_PRICE = {"spring": 1.0e-5, "spectral": 2.0e-4}  # spring: per task squared
PAIR_PRICE = 1.2e-6
EXCHANGE_ROUND_PRICE = 1.5e-5
CANDIDATE_SHARE = 0.5  # of a budget: the candidates; the rest refines the best of them


@register("mesh_auto", "mesh/torus: the best mesh heuristics (and identity), each refined by swap "
                       "refinement and pairwise exchange",
          machines=("mesh",))
def mesh_auto(graph, topology, *, seed=0, eps=None, rounds=8, refine_best=3, time_limit=None, deadline=None,
              **options):
    """Run the candidates; refine the ``refine_best`` lowest-J ones (local
    optima differ by start) by swap refinement followed by pairwise
    exchange, and up to MESH_AUTO_N2_MAX_TASKS tasks also by pairwise
    exchange alone (it won only on the 64-rank MapLib traffic); keep the
    lowest J.  ``time_limit`` is a counted budget (the prices above): half
    of it for candidates that fit, the rest shared by the refinements as
    pairs evaluated and exchange rounds, so the result repeats on any
    machine; none: every candidate, refinement to convergence.  After the
    ``deadline`` no further candidate or refinement starts (the first
    candidate always runs)."""
    deadline = Deadline.of(deadline)
    _require_mesh(topology)
    n = graph.n
    budget = math.inf if time_limit is None else float(time_limit)
    spent = 0.0
    laid_out = options.get("coords") is not None or options.get("coords_file") is not None or not n
    starts = []
    for name in MESH_AUTO_CANDIDATES:
        if starts and deadline.expired():
            break
        price = CANDIDATE_PRICE[name] * n
        if name in NEEDS_COORDS and not laid_out:
            price += _layout_price(n, options.get("layout", "auto"))
        if starts and spent + price > CANDIDATE_SHARE * budget:
            continue  # a cheaper one may still fit
        spent += price
        if name in NEEDS_COORDS and not laid_out:  # lay the graph out once for the geometric heuristics
            options["coords"] = infer_coordinates(graph, topology.ndim, seed=seed,
                                                  method=options.get("layout", "auto"))
            laid_out = True
        pe = METHODS[name].fn(graph, topology, seed=seed, eps=eps, **options)
        starts.append((mapping_cost(graph, topology, pe), len(starts), pe))
    depth = "n2" if n <= MESH_AUTO_N2_MAX_TASKS else 10
    best_starts = sorted(starts, key=lambda s: s[:2])[:max(1, refine_best)]
    share = (budget - spent) / len(best_starts) / 2  # per start: half swaps, half exchange rounds
    pairs = None if math.isinf(share) else int(share / PAIR_PRICE)
    exchange_rounds = rounds if math.isinf(share) else min(rounds, int(share / (EXCHANGE_ROUND_PRICE * max(n, 1))))
    best, best_j = None, np.inf
    for _, _, pe in best_starts:
        swapped = swap_refine(graph, topology, pe, depth=depth, seed=seed, eps=eps, deadline=deadline,
                              max_evaluations=pairs)
        for start in ((pe, swapped) if n <= MESH_AUTO_N2_MAX_TASKS else (swapped,)):
            if best is not None and deadline.expired():
                break
            out = pairwise_exchange(graph, topology, start, eps=eps, rounds=exchange_rounds)
            j = mapping_cost(graph, topology, out)
            if j < best_j:
                best, best_j = out, j
    return best


def _layout_price(n: int, method: str) -> float:
    """Counted seconds of ``infer_coordinates`` for ``n`` tasks."""
    if layout_method(n, method) == "spring":
        return LAYOUT_PRICE["spring"] * n * n
    return LAYOUT_PRICE["spectral"] * n


def pairwise_exchange(graph: CommGraph, topology, pe_of_task, *, eps=None, rounds: int = 8,
                      max_candidates: int = 128) -> np.ndarray:
    """Lower J by swapping tasks (and moving tasks to free slots), Bokhari's
    pairwise exchange: each task, heaviest first, tries every slot when there
    are at most ``max_candidates``, else a neighbourhood: the slots on and
    around the node at the byte-weighted median of its neighbours and on
    its heaviest neighbours' nodes (mesh), or the slots of its 2-hop graph
    neighbours (any topology); it takes the swap of largest J decrease.  Up to ``rounds``
    passes, stopping when a pass finds nothing.  Works on the distance oracle
    only; a PE has ``pe_capacity`` slots (equal vertex weights).  Compiled
    (``refine._kernels.exchange_rounds``) on meshes and trees, the same search
    as the numpy one below (``_pairwise_exchange_numpy``), which serves the
    other machines."""
    from .kernel import exchange_kernel

    kernel = exchange_kernel(topology)
    if graph.n < 2 or kernel is None:
        return _pairwise_exchange_numpy(graph, topology, pe_of_task, eps=eps, rounds=rounds,
                                        max_candidates=max_candidates)
    table = SlotTable(graph, topology, pe_of_task, eps)
    sym = graph.symmetric
    order = np.argsort(-graph.volume(), kind="stable")
    exchange_rounds, (oracle_a, oracle_b, coords, dims, wrap, cores, on_mesh) = kernel
    exchange_rounds(sym.indptr.astype(np.int64), sym.indices.astype(np.int64), sym.data.astype(np.float64),
                    order, table.pe, table.slot, table.task_of_slot, table.slot_pe, oracle_a, oracle_b,
                    coords, dims, wrap, cores, table.cap, int(max_candidates), int(rounds), on_mesh)
    return table.pe


def _pairwise_exchange_numpy(graph: CommGraph, topology, pe_of_task, *, eps=None, rounds: int = 8,
                             max_candidates: int = 128) -> np.ndarray:
    """``pairwise_exchange`` in numpy on any distance oracle: per task the
    candidate slots' gains as arrays (a Python loop over the tasks)."""
    if graph.n < 2:
        return np.array(pe_of_task, dtype=np.int64)
    table = SlotTable(graph, topology, pe_of_task, eps)
    pe, slot, task_of_slot, slot_pe = table.pe, table.slot, table.task_of_slot, table.slot_pe  # views, updated by swap
    sym = graph.symmetric
    indptr, indices, data = sym.indptr, sym.indices, sym.data
    dist = topology.distance
    mesh = topology if isinstance(topology, MeshTopology) else None
    order = np.argsort(-graph.volume(), kind="stable")
    for _ in range(rounds):
        improved = False
        for u in order.tolist():
            lo, hi = indptr[u], indptr[u + 1]
            if lo == hi:
                continue
            nbr, w = indices[lo:hi], data[lo:hi]
            cand = candidate_slots(nbr, w, table, mesh, sym, max_candidates)
            cand = cand[cand != slot[u]]
            if cand.size == 0:
                continue
            pu, pv = pe[u], slot_pe[cand]
            v = task_of_slot[cand]
            old_u = np.dot(w, dist(pu, pe[nbr]))
            gain = dist(pv[:, None], pe[nbr][None, :]) @ w - old_u  # u moves to pv
            has = v >= 0
            if has.any():
                vv = v[has]
                counts = indptr[vv + 1] - indptr[vv]
                seg = np.repeat(np.arange(vv.size), counts)
                pos = np.concatenate([np.arange(indptr[x], indptr[x + 1]) for x in vv.tolist()])
                y, wy = indices[pos], data[pos]
                py = pe[y]
                delta_v = wy * (dist(pu, py) - dist(pv[has][seg], py))  # v moves to pu
                gain[has] += np.bincount(seg, weights=delta_v, minlength=vv.size)
                # the u-v edge itself keeps its length; both sums above got it wrong once each
                k = np.searchsorted(nbr, vv)
                k = np.minimum(k, nbr.size - 1)
                s_uv = np.where(nbr[k] == vv, w[k], 0.0)
                gain[has] += 2 * s_uv * dist(pu, pv[has])
            best = int(np.argmin(gain))
            if gain[best] < -1e-9 * max(1.0, old_u):
                table.swap(u, int(cand[best]))
                improved = True
        if not improved:
            break
    return pe
