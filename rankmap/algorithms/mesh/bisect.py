"""Recursive bisection mapping onto a mesh or torus (Ercal, Ramanujam &
Sadayappan's recursive mincut bipartitioning; what Scotch's dual recursive
bipartitioning and MapLib's partitioning-based tools do).

Cut the communication graph and the machine in step: the box of nodes is
halved across its longest dimension, the tasks are bisected by KaHIP into
parts sized to the halves' capacities, and each part recurses into its
half, down to single nodes (whose cores take the tasks round-robin).

Plain recursive bisection does not know *which* half a part should take:
its bytes to tasks already sent elsewhere decide nothing.  So boxes are
split level by level (breadth first) and each part goes to the half that
lowers the hop-bytes of its edges to tasks outside the box, measured
between box centres (on the circle in torus dimensions): the external-
edge orientation of dual recursive bipartitioning.

Boxes of at most ``EXACT_MAX_TASKS`` tasks (one-to-one) are not given to
KaHIP: every bisection of the right sizes is scored at once
(``_exact_bisection``) and the cheapest kept.  At 16,384 tasks there are
14,336 such boxes out of 16,383, and their KaHIP calls and sparse slicing
were most of the time.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...graph import CommGraph
from ...topology.mesh import MeshTopology
from ..registry import register
from ..construct.baselines import pe_capacity
from ..construct.multisection import task_counts
from ..construct.partition import partition_graph, repair_balance

TRY_MAX_TASKS = 1024  # bisect parts up to this size from several seeds, keep the best
EXACT_MAX_TASKS = 8  # parts up to this size: every bisection scored (C(8, 4) = 70 of them)


def _centre_distance(mesh: MeshTopology, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hop distance between (fractional) box centres, rows of ``a`` and ``b``."""
    d = np.abs(a - b)
    dims = np.asarray(mesh.dims, dtype=np.float64)
    d = np.where(np.asarray(mesh.torus), np.minimum(d, dims - d), d)
    return d.sum(axis=-1)


def bisection_map(graph: CommGraph, mesh: MeshTopology, *, seed: int = 0, eps=None,
                  preset: str = "eco", orient: bool = True, tries: int = 4) -> np.ndarray:
    """``pe_of_task`` by recursive bisection of graph and mesh (module docstring)."""
    n = graph.n
    per_node = int(pe_capacity(graph, mesh, eps)[0]) * mesh.cores
    sym = graph.symmetric
    dims = np.asarray(mesh.dims, dtype=np.int64)
    # every task's current box centre: where the orientation step sees it
    centre = np.tile((dims - 1) / 2.0, (n, 1))
    level = [(np.zeros(mesh.ndim, dtype=np.int64), dims.copy(), np.arange(n, dtype=np.int64))]
    pe = np.full(n, -1, dtype=np.int64)
    local = np.full(n, -1, dtype=np.int64)  # scratch for _exact_bisection: task -> index in its box
    sub_seed = int(seed)
    while level:
        nxt = []
        for lo, size, tasks in level:
            if tasks.size == 0:
                continue
            if np.all(size == 1):
                node = int(mesh.node_at(lo[None, :])[0])
                pe[tasks] = node * mesh.cores + np.arange(tasks.size) % mesh.cores
                continue
            axis = int(np.argmax(size))
            half = size.copy()
            half[axis] = size[axis] // 2
            other = size.copy()
            other[axis] = size[axis] - half[axis]
            lo2 = lo.copy()
            lo2[axis] += half[axis]
            boxes = [(lo, half), (lo2, other)]
            caps = np.array([np.prod(half), np.prod(other)], dtype=np.int64) * per_node
            counts = task_counts(tasks.size, caps) if eps is None else caps
            n_tries = tries if tasks.size <= TRY_MAX_TASKS else 1
            if orient and eps is None and tasks.size <= EXACT_MAX_TASKS and counts.min() > 0:
                block = _exact_bisection(tasks, counts, boxes, centre, sym, mesh, local)
                sub_seed += n_tries  # the seeds KaHIP would have used: larger boxes keep theirs
            else:
                adj = sym[tasks][:, tasks]
                capacity = counts.astype(np.float64)
                block, sub_seed = _best_bisection(adj, tasks, counts, capacity, boxes, centre, sym, mesh,
                                                  eps, preset, sub_seed, n_tries, orient)
            for b, (blo, bsize) in enumerate(boxes):
                part = tasks[block == b]
                centre[part] = blo + (bsize - 1) / 2.0
                nxt.append((blo, bsize, part))
        level = nxt
    return pe


def _best_bisection(adj, tasks, counts, capacity, boxes, centre, sym, mesh, eps, preset, seed,
                    tries, orient):
    """KaHIP bisections from ``tries`` seeds, each repaired to ``capacity``
    and oriented; the one of least hop-bytes (cut edges at the halves'
    centre distance plus external edges) wins.  Returns it and the next seed."""
    ones = np.ones(tasks.size)
    if counts.min() == 0:
        return np.full(tasks.size, int(np.argmax(counts))), seed
    ctr = np.array([blo + (bsize - 1) / 2.0 for blo, bsize in boxes])
    gap = float(_centre_distance(mesh, ctr[0], ctr[1]))
    upper = sp.triu(adj, k=1).tocoo()
    ext_rows, ext_far, ext_w = _external_edges(tasks, centre, sym)
    best, best_cost = None, np.inf
    for _ in range(tries):
        block = partition_graph(adj, ones, counts, 0.0 if eps is None else float(eps),
                                preset=preset, seed=seed)
        seed += 1
        block = repair_balance(adj, ones, block, capacity)
        ext = float(np.dot(ext_w, _centre_distance(mesh, ctr[block[ext_rows]], ext_far)))
        ext_swapped = float(np.dot(ext_w, _centre_distance(mesh, ctr[1 - block[ext_rows]], ext_far)))
        if orient and np.array_equal(capacity, capacity[::-1]) and ext_swapped < ext:
            block, ext = 1 - block, ext_swapped
        cost = ext + gap * float(upper.data[block[upper.row] != block[upper.col]].sum())
        if cost < best_cost:
            best, best_cost = block, cost
    return best, seed


def _exact_bisection(tasks, counts, boxes, centre, sym, mesh, local) -> np.ndarray:
    """The bisection of a small box's tasks with ``counts[1]`` tasks in the
    second half that costs least: hop-bytes of the cut edges at the halves'
    centre distance plus those of the external edges, the measure
    ``_best_bisection`` ranks KaHIP's tries by (first on ties)."""
    m = tasks.size
    ctr = np.array([blo + (bsize - 1) / 2.0 for blo, bsize in boxes])
    gap = float(_centre_distance(mesh, ctr[0], ctr[1]))
    lo, hi = sym.indptr[tasks], sym.indptr[tasks + 1]
    row = np.repeat(np.arange(m), hi - lo)
    pos = np.arange(row.size) + np.repeat(lo - np.cumsum(hi - lo) + (hi - lo), hi - lo)
    col, w = sym.indices[pos], sym.data[pos]
    local[tasks] = np.arange(m)
    j = local[col]
    local[tasks] = -1
    ext = j < 0
    ext_half = [np.bincount(row[ext], weights=w[ext] * _centre_distance(mesh, c, centre[col[ext]]), minlength=m)
                for c in ctr]  # each task's external hop-bytes from either half
    cut = (j > row)  # each inner edge once
    side = (np.arange(1 << m)[:, None] >> np.arange(m)[None, :]) & 1
    side = side[side.sum(axis=1) == counts[1]]
    cost = side @ (ext_half[1] - ext_half[0]) + gap * ((side[:, row[cut]] != side[:, j[cut]]) @ w[cut])
    return side[int(np.argmin(cost))]


def _external_edges(tasks, centre, sym):
    """The edges from the box's tasks to tasks outside it: the row of the
    inside task (position in ``tasks``), the outside task's box centre, bytes.
    Their hop-bytes decide the orientation (centre to centre)."""
    coo = sym[tasks].tocoo()
    inside = np.zeros(sym.shape[0], dtype=bool)
    inside[tasks] = True
    keep = ~inside[coo.col]
    return coo.row[keep], centre[coo.col[keep]], coo.data[keep]


@register("mesh_bisect", "mesh/torus: recursive bisection of graph (KaHIP) and mesh in step, "
                         "parts oriented by their external edges (option preset=fast|eco|strong)",
          machines=("mesh",))
def mesh_bisect(graph, topology, *, seed=0, eps=None, preset="eco", **_):
    if not isinstance(topology, MeshTopology):
        raise ValueError("mesh_bisect maps onto a mesh or torus (--mesh / --torus)")
    return bisection_map(graph, topology, seed=seed, eps=eps, preset=str(preset))
