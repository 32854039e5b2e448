"""The bottleneck objective (Langguth, Schlag & Schulz): the most loaded link.

A program whose communication phases are bulk-synchronous waits for its
busiest link, not for the sum of bytes x distance.  ``bottleneck_refine``
lowers max_l comm(l) (bytes over a directed link: tree edges, or mesh links
under dimension-ordered routing) by swap local search:

- a lazy max-heap over link loads names the link at the top;
- the tasks whose traffic crosses it, heaviest contribution first, try swaps
  with the slots around their neighbours (as in ``pairwise_exchange``) and a
  few random slots;
- a swap is taken only if every link it touches ends strictly below the
  current maximum (so the maximum never rises and the number of links at
  the maximum falls), the best such swap by (largest touched load, J);
- it stops when the top link admits no such swap, or after ``max_moves``.

Each candidate is scored exactly: the routes of the pairs of the two tasks
(O(deg(u) + deg(v)) pairs times the path length), old minus new.  The
makespan M = max(max comp(b), F * max comm(l)) of the paper is reported by
``cost.evaluate(..., comm_factor=F)``; swaps keep every PE's computation.
"""

from __future__ import annotations

import heapq

import numpy as np

from ...cost import all_link_loads
from ...topology import MeshTopology, Topology
from ..registry import METHODS, register
from ..construct.slots import SlotTable, candidate_slots


def link_routes(topology, src_pe, dst_pe) -> tuple[np.ndarray, np.ndarray]:
    """``(pair, link)``: every link pair i crosses, numbered as in
    ``cost.all_link_loads`` (tree: up link of node x is x, down link is
    ``n_nodes + x``; mesh: its dimension-ordered routes)."""
    if not isinstance(topology, Topology):
        return topology.routes(src_pe, dst_pe)
    p = np.asarray(src_pe, dtype=np.int64)
    q = np.asarray(dst_pe, dtype=np.int64)
    stop = topology.lca_depth(p, q)  # p == q: the leaf's own depth, so no links
    pairs, links = [], []
    for pes, offset in ((p, 0), (q, topology.n_nodes)):
        node, idx = topology.leaf_of_pe[pes], np.arange(pes.size)
        while node.size:
            keep = topology.node_depth[node] > stop[idx]
            node, idx = node[keep], idx[keep]
            pairs.append(idx)
            links.append(node + offset)
            node = topology.parent[node]
    return np.concatenate(pairs), np.concatenate(links)


class _Pairs:
    """The directed pairs (COO order of ``graph.bytes``) touching each task."""

    def __init__(self, graph):
        self.src, self.dst, self.w = graph.coo()
        self.out_ptr = graph.bytes.indptr
        order = np.argsort(self.dst, kind="stable")
        self.in_pairs = order
        self.in_ptr = np.concatenate([[0], np.cumsum(np.bincount(self.dst, minlength=graph.n))])

    def of(self, tasks) -> np.ndarray:
        parts = []
        for t in tasks:
            if t >= 0:
                parts.append(np.arange(self.out_ptr[t], self.out_ptr[t + 1]))
                parts.append(self.in_pairs[self.in_ptr[t]:self.in_ptr[t + 1]])
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


def bottleneck_refine(graph, topology, pe_of_task, *, eps=None, seed: int = 0,
                      max_moves: int | None = None, tasks_per_link: int = 8,
                      random_slots: int = 16, max_candidates: int = 64) -> np.ndarray:
    """Swap refinement lowering the maximum link load (see module doc)."""
    table = SlotTable(graph, topology, pe_of_task, eps)
    pe = table.pe
    if graph.n < 2 or graph.n_edges == 0:
        return pe
    pairs = _Pairs(graph)
    src, dst, w = pairs.src, pairs.dst, pairs.w
    loads = all_link_loads(topology, pe[src], pe[dst], w)
    heap = [(-loads[l], l) for l in np.flatnonzero(loads).tolist()]
    heapq.heapify(heap)
    rng = np.random.default_rng(seed)
    sym = graph.symmetric
    mesh = topology if isinstance(topology, MeshTopology) else None
    max_moves = 4 * graph.n if max_moves is None else max_moves
    for _ in range(max_moves):
        while heap and -heap[0][0] != loads[heap[0][1]]:
            heapq.heappop(heap)  # stale entry
        if not heap:
            break
        top_load, top = -heap[0][0], heap[0][1]
        move = _best_move(topology, table, pairs, loads, top, top_load, sym, mesh, rng,
                          tasks_per_link, random_slots, max_candidates)
        if move is None:
            break
        u, s_new, touched, new_loads = move
        table.swap(u, s_new)
        loads[touched] = new_loads
        for link, load in zip(touched.tolist(), new_loads.tolist()):
            heapq.heappush(heap, (-load, link))
    return pe


def _best_move(topology, table, pairs, loads, top, top_load, sym, mesh, rng,
               tasks_per_link, random_slots, max_candidates):
    pe = table.pe
    src, dst, w = pairs.src, pairs.dst, pairs.w
    pair, link = link_routes(topology, pe[src], pe[dst])
    on = pair[link == top]
    contrib = np.bincount(np.concatenate([src[on], dst[on]]), weights=np.tile(w[on], 2),
                          minlength=pe.size)
    tol = 1e-9 * max(1.0, top_load)
    for u in np.argsort(-contrib, kind="stable")[:tasks_per_link].tolist():
        if contrib[u] <= 0:
            break
        lo, hi = sym.indptr[u], sym.indptr[u + 1]
        near = candidate_slots(sym.indices[lo:hi], sym.data[lo:hi], table, mesh, sym, max_candidates)
        cand = np.unique(np.concatenate([near, rng.integers(0, table.slot_pe.size, random_slots)]))
        best, best_key = None, None
        for s_new in cand[cand != table.slot[u]].tolist():
            v = int(table.task_of_slot[s_new])
            a = pairs.of((u, v))
            ps, pd = pe[src[a]], pe[dst[a]]
            pu, pv = pe[u], table.slot_pe[s_new]
            ns = np.where(src[a] == u, pv, np.where(src[a] == v, pu, ps))
            nd = np.where(dst[a] == u, pv, np.where(dst[a] == v, pu, pd))
            op, ol = link_routes(topology, ps, pd)
            np_, nl = link_routes(topology, ns, nd)
            touched, inv = np.unique(np.concatenate([ol, nl]), return_inverse=True)
            delta = np.bincount(inv, weights=np.concatenate([-w[a][op], w[a][np_]]),
                                minlength=touched.size)
            new_loads = loads[touched] + delta
            worst = float(new_loads.max()) if new_loads.size else 0.0
            at_top = touched == top
            if not at_top.any() or worst >= top_load - tol:
                continue
            d_j = float(np.dot(w[a], topology.distance(ns, nd) - topology.distance(ps, pd)))
            key = (worst, d_j)
            if best_key is None or key < best_key:
                best, best_key = (u, s_new, touched, new_loads), key
        if best is not None:
            return best
    return None


@register("bottleneck", "lower the most loaded link: a start mapping (start=METHOD) then bottleneck swap refinement",
          machines=("tree", "mesh"))
def bottleneck(graph, topology, *, seed=0, eps=None, start=None, **options):
    start = start or ("mesh_auto" if isinstance(topology, MeshTopology) else "auto")
    if start not in METHODS or start == "bottleneck":
        raise ValueError(f"unknown start method {start!r} for the bottleneck objective")
    pe = METHODS[start].fn(graph, topology, seed=seed, eps=eps, **options)
    return bottleneck_refine(graph, topology, pe, eps=eps, seed=seed)
