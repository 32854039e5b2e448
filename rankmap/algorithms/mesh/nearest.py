"""The nearest mesh node with a free PE (Bhatele & Kale sec. III).

Every mesh heuristic asks, once per task, for the free node nearest a
desired grid point.  Two searches answer it with the same result (nearest
in hops, wrap-around on tori, the lowest node id among equally near ones):

- ``FreeNodeTree``: the paper's quadtree (octree in 3-D, 2^d-tree in
  general): boxes halved along every dimension, each box knowing how many
  free slots it holds.  A query is a best-first search keyed by
  (lower bound of the hops to the box, lowest node id in the box), so it
  descends only into non-empty boxes that can still hold a nearer node than
  the best found (the paper's two pruning rules); O(log^2 p) in practice.
  ``take`` updates the counts on one root path, O(log p).
- ``SpiralSearch``: the enumeration the paper compares against: all nodes at
  hop distance 0, 1, 2, ... until one is free; worst case O(p) per query.
"""

from __future__ import annotations

import heapq

import numpy as np


class FreeNodeTree:
    """Free-slot counts over a 2^d-tree of boxes of the mesh's nodes."""

    def __init__(self, mesh, capacity):
        self.mesh = mesh
        self.dims = mesh.dims
        self.torus = mesh.torus
        cap = np.asarray(capacity, dtype=np.int64)
        lo, hi, parent, children, leaf_box = [], [], [], [], np.empty(mesh.n_nodes, dtype=np.int64)
        stack = [(tuple(0 for _ in self.dims), self.dims, -1)]
        while stack:
            blo, bhi, par = stack.pop()
            b = len(lo)
            lo.append(blo)
            hi.append(bhi)
            parent.append(par)
            children.append([])
            if par >= 0:
                children[par].append(b)
            if all(h - l == 1 for l, h in zip(blo, bhi)):
                leaf_box[int(mesh.node_at(blo))] = b
                continue
            halves = [((l, (l + h) // 2), ((l + h) // 2, h)) if h - l > 1 else ((l, h),)
                      for l, h in zip(blo, bhi)]
            for combo in reversed(list(_product(halves))):
                stack.append((tuple(c[0] for c in combo), tuple(c[1] for c in combo), b))
        self.lo, self.hi, self.parent, self.children = lo, hi, parent, children
        self.min_node = [int(mesh.node_at(c)) for c in lo]  # C order: the lo corner has the lowest id
        self.leaf_box = leaf_box
        self.node_of_leaf = {int(leaf_box[v]): v for v in range(mesh.n_nodes)}
        free = np.zeros(len(lo), dtype=np.int64)
        free[leaf_box] = cap
        for b in range(len(lo) - 1, 0, -1):  # children come after their parent
            free[parent[b]] += free[b]
        self.free = free.tolist()

    def free_at(self, node: int) -> int:
        return self.free[int(self.leaf_box[node])]

    def take(self, node: int) -> None:
        """Use one slot of ``node``."""
        b = int(self.leaf_box[node])
        if self.free[b] <= 0:
            raise ValueError(f"node {node} has no free slot")
        while b >= 0:
            self.free[b] -= 1
            b = self.parent[b]

    def _box_bound(self, b: int, point) -> int:
        """Fewest hops from ``point`` to any node of box ``b``."""
        total = 0
        for c, l, h, d, t in zip(point, self.lo[b], self.hi[b], self.dims, self.torus):
            if l <= c < h:
                continue
            if t:  # the nearest point of an interval on a ring is one of its ends
                a, e = abs(c - l), abs(c - (h - 1))
                total += min(a, d - a, e, d - e)
            else:
                total += l - c if c < l else c - (h - 1)
        return total

    def nearest(self, point) -> int:
        """The free node nearest grid point ``point`` (lowest id on ties)."""
        point = tuple(int(c) for c in point)
        if self.free[0] <= 0:
            raise ValueError("no free node left")
        heap = [(0, 0, 0)]
        while heap:
            _, _, b = heapq.heappop(heap)
            kids = self.children[b]
            if not kids:
                return self.node_of_leaf[b]
            for k in kids:
                if self.free[k] > 0:
                    heapq.heappush(heap, (self._box_bound(k, point), self.min_node[k], k))
        raise AssertionError("free counts out of sync")


class SpiralSearch:
    """Nearest free node by enumerating the nodes at distance 0, 1, 2, ...
    (the paper's baseline; same answers as ``FreeNodeTree``)."""

    def __init__(self, mesh, capacity):
        self.mesh = mesh
        self.free = np.asarray(capacity, dtype=np.int64).copy()
        self._shells: dict[int, np.ndarray] = {}
        # the largest offset along each dimension that is not a shorter way round
        self._reach = [d // 2 if t else d - 1 for d, t in zip(mesh.dims, mesh.torus)]

    def free_at(self, node: int) -> int:
        return int(self.free[node])

    def take(self, node: int) -> None:
        if self.free[node] <= 0:
            raise ValueError(f"node {node} has no free slot")
        self.free[node] -= 1

    def _shell(self, r: int) -> np.ndarray:
        """All offsets with |o|_1 == r within the reach of each dimension."""
        if r not in self._shells:
            out: list[tuple] = []
            _offsets(self._reach, 0, r, [], out)
            self._shells[r] = np.asarray(out, dtype=np.int64).reshape(-1, len(self._reach))
        return self._shells[r]

    def nearest(self, point) -> int:
        m = self.mesh
        c = np.asarray(point, dtype=np.int64)
        if self.free.sum() <= 0:
            raise ValueError("no free node left")
        for r in range(m.diameter + 1):
            cand = c + self._shell(r)
            inside = np.all(m._wrap | ((cand >= 0) & (cand < m._dims_arr)), axis=1)
            if not inside.any():
                continue
            nodes = m.node_at(cand[inside])
            nodes = nodes[self.free[nodes] > 0]
            if nodes.size:
                return int(nodes.min())
        raise AssertionError("free counts out of sync")


def _product(lists):
    """Cartesian product of a list of tuples (children of a box, C order)."""
    out = [()]
    for options in lists:
        out = [prefix + (o,) for prefix in out for o in options]
    return out


def _offsets(reach, k, r, prefix, out):
    if k == len(reach) - 1:
        for o in {r, -r}:
            if r <= reach[k]:
                out.append((*prefix, o))
        return
    for a in range(0, min(r, reach[k]) + 1):
        for o in {a, -a}:
            _offsets(reach, k + 1, r - a, prefix + [o], out)
