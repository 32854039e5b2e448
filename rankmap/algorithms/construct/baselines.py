"""Baseline mappings: identity, random, Muller-Merbach greedy, GreedyAllC.

The greedy methods follow Schulz & Traff's description (sec. 2): repeatedly
take the unassigned task with the most traffic to assigned tasks (the largest
total volume when none has any) and give it a PE.  Muller-Merbach picks the
free PE with the smallest total distance to all assigned PEs; GreedyAllC
(Glantz et al.) links the two choices and picks the free PE with the smallest
sum of traffic x distance to the task's assigned neighbours.

Both PE choices are exact minimisations done on the tree, never over a
distance matrix: the distance from a leaf to the PEs below a node splits into
per-ancestor terms, so a bottom-up pass over the ancestors of the affected
PEs (Muller-Merbach: the path just assigned; GreedyAllC: the Steiner tree of
the neighbours' PEs) finds the best free leaf in O(depth * arity) per task.
"""

from __future__ import annotations

import heapq

import numpy as np

from ...graph import CommGraph
from ...mapping import balance_report
from ...topology import Topology
from ..registry import register


def pe_capacity(graph: CommGraph, topology: Topology, eps: float | None) -> np.ndarray:
    """Tasks each PE may hold: 1 for one-to-one; for many-to-one with equal
    vertex weights, floor(L_max / weight)."""
    k = topology.n_pes
    if eps is None:
        return np.ones(k, dtype=np.int64)
    w = graph.vertex_weights
    if w.size and not np.all(w == w[0]):
        raise ValueError("this method maps many tasks per PE only for equal vertex weights; "
                         "use method 'multisection' for weighted tasks")
    l_max = balance_report(np.zeros(0, dtype=np.int64), w, k, eps)["L_max"]
    per = int(l_max // w[0]) if w.size and w[0] > 0 else graph.n
    if per * k < graph.n:
        raise ValueError(f"{graph.n} tasks do not fit on {k} PEs at {per} per PE")
    return np.full(k, max(per, 1), dtype=np.int64)


@register("identity", "task t on PE t (the launcher's block order); many-to-one: blocks in order",
          machines=("tree", "mesh"))
def identity(graph, topology, *, seed=0, eps=None, **_):
    if eps is None:  # one-to-one: task t on PE t (``pe_capacity``'s ones need no repeat)
        return np.arange(graph.n, dtype=np.int64)
    return np.repeat(np.arange(topology.n_pes), pe_capacity(graph, topology, eps))[:graph.n]


@register("random", "uniformly random placement (seeded)", machines=("tree", "mesh"))
def random_mapping(graph, topology, *, seed=0, eps=None, **_):
    cap = pe_capacity(graph, topology, eps)
    slots = np.repeat(np.arange(topology.n_pes), cap)
    return np.random.default_rng(seed).permutation(slots)[:graph.n]


class _TaskOrder:
    """Lazy max-heap of unassigned tasks by (traffic to assigned tasks,
    total volume): the next task to place."""

    def __init__(self, sym, volume):
        self.sym = sym
        self.conn = np.zeros(sym.shape[0])
        self.volume = volume
        self.done = np.zeros(sym.shape[0], dtype=bool)
        self.heap = [(0.0, -float(v), t) for t, v in enumerate(volume)]
        heapq.heapify(self.heap)

    def pop(self) -> int:
        while True:
            negc, _, t = heapq.heappop(self.heap)
            if not self.done[t] and -negc == self.conn[t]:
                self.done[t] = True
                return t

    def assigned(self, t: int) -> None:
        lo, hi = self.sym.indptr[t], self.sym.indptr[t + 1]
        for u, w in zip(self.sym.indices[lo:hi].tolist(), self.sym.data[lo:hi].tolist()):
            if not self.done[u]:
                self.conn[u] += w
                heapq.heappush(self.heap, (-self.conn[u], -float(self.volume[u]), u))


class _FreeTree:
    """Remaining capacity per tree node, with descent to a free leaf."""

    def __init__(self, topology: Topology, cap: np.ndarray):
        self.t = topology
        self.free = np.zeros(topology.n_nodes, dtype=np.int64)
        self.free[topology.leaf_of_pe] = cap
        for d in range(topology.max_depth, 0, -1):
            nodes = np.flatnonzero(topology.node_depth == d)
            np.add.at(self.free, topology.parent[nodes], self.free[nodes])
        self.pe_of_leaf = np.full(topology.n_nodes, -1, dtype=np.int64)
        self.pe_of_leaf[topology.leaf_of_pe] = np.arange(topology.n_pes)

    def take(self, pe: int) -> np.ndarray:
        path = self.t.pe_path(pe)
        self.free[path] -= 1
        return path

    def emptiest_leaf(self, node: int) -> int:
        """Descend from ``node`` into the child with the most free capacity
        (leftmost on ties): where a task with no placed neighbours goes."""
        while True:
            ch = self.t.children(node)
            if ch.size == 0:
                return int(self.pe_of_leaf[node])
            node = int(ch[np.argmax(self.free[ch])])


def _greedy_start(graph: CommGraph, topology: Topology, eps) -> tuple[_TaskOrder, _FreeTree]:
    """Task order and free-capacity tree shared by both greedy methods."""
    cap = pe_capacity(graph, topology, eps)
    return _TaskOrder(graph.symmetric, graph.volume()), _FreeTree(topology, cap)


@register("greedy", "Muller-Merbach greedy construction (Schulz & Traff sec. 2)")
def muller_merbach(graph, topology, *, seed=0, eps=None, **_):
    t = topology
    order, tree = _greedy_start(graph, t, eps)
    cnt = np.zeros(t.n_nodes)           # assigned tasks below each node
    best = np.zeros(t.n_nodes)          # min over free leaves below: distance to assigned PEs below
    dist = t.node_distance
    pe_of_task = np.empty(graph.n, dtype=np.int64)
    for _ in range(graph.n):
        task = order.pop()
        node = 0
        while True:  # descend along the argmin of best
            ch = t.children(node)
            if ch.size == 0:
                break
            score = np.where(tree.free[ch] > 0, dist[node] * (cnt[node] - cnt[ch]) + best[ch], np.inf)
            node = int(ch[np.argmin(score)])
        pe = int(tree.pe_of_leaf[node])
        pe_of_task[task] = pe
        order.assigned(task)
        path = tree.take(pe)
        cnt[path] += 1
        best[path[-1]] = 0.0 if tree.free[path[-1]] > 0 else np.inf
        for x in path[::-1][1:].tolist():  # recompute best bottom-up on the path
            ch = t.children(x)
            ok = tree.free[ch] > 0
            best[x] = np.min(dist[x] * (cnt[x] - cnt[ch[ok]]) + best[ch[ok]]) if ok.any() else np.inf
    return pe_of_task


@register("greedy_allc", "GreedyAllC (Glantz et al.): PE choice weighted by traffic to placed neighbours")
def greedy_allc(graph, topology, *, seed=0, eps=None, **_):
    t = topology
    order, tree = _greedy_start(graph, t, eps)
    sym = graph.symmetric
    dist = t.node_distance
    pe_of_task = np.full(graph.n, -1, dtype=np.int64)
    paths = {}
    for _ in range(graph.n):
        task = order.pop()
        lo, hi = sym.indptr[task], sym.indptr[task + 1]
        nbr, w = sym.indices[lo:hi], sym.data[lo:hi]
        placed = pe_of_task[nbr] >= 0
        if not placed.any():
            pe = tree.emptiest_leaf(0)
        else:
            pe = _best_leaf_near(t, tree, dist, pe_of_task[nbr[placed]], w[placed], paths)
        pe_of_task[task] = pe
        order.assigned(task)
        tree.take(pe)
    return pe_of_task


def _best_leaf_near(t: Topology, tree: _FreeTree, dist, pes, weights, paths) -> int:
    """Free leaf minimising sum_i weights[i] * D(leaf, pes[i]), by a DP over
    the Steiner tree of ``pes``."""
    W: dict[int, float] = {}
    kids: dict[int, set[int]] = {}
    for pe, w in zip(pes.tolist(), weights.tolist()):
        path = paths.get(pe)
        if path is None:
            path = paths[pe] = t.pe_path(pe).tolist()
        prev = None
        for x in reversed(path):
            W[x] = W.get(x, 0.0) + w
            if prev is not None:
                kids.setdefault(x, set()).add(prev)
            prev = x
    free = tree.free
    best: dict[int, float] = {}
    choice: dict[int, int] = {}  # child to descend into, -1: any non-Steiner child
    for x in sorted(W, key=lambda n: -t.node_depth[n]):
        ks = kids.get(x)
        if ks is None:  # a leaf holding neighbours
            best[x] = 0.0 if free[x] > 0 else np.inf
            continue
        b, c = np.inf, -2
        steiner_free = 0
        for ch in sorted(ks):
            steiner_free += free[ch]
            if free[ch] > 0:
                v = dist[x] * (W[x] - W[ch]) + best[ch]
                if v < b:
                    b, c = v, ch
        if free[x] - steiner_free > 0 and dist[x] * W[x] < b:
            b, c = dist[x] * W[x], -1
        best[x], choice[x] = b, c
    node = 0
    while node in choice:
        c = choice[node]
        if c == -1:
            ks = kids[node]
            ch = t.children(node)
            cand = [x for x in ch.tolist() if x not in ks and free[x] > 0]
            return tree.emptiest_leaf(cand[0])
        node = c
    return int(tree.pe_of_leaf[node])
