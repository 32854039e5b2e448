"""Task <-> slot bookkeeping for swap-based refinement.

A PE that may hold ``cap`` tasks (``baselines.pe_capacity``: 1 for
one-to-one, L_max / weight for equal-weight many-to-one) has ``cap`` slots;
refinement then only ever swaps the contents of two slots (a task and a task,
or a task and an empty slot), which keeps every PE load within its bound
without further checks.

``place_in_leaves`` turns a choice of leaf (a group of PEs) per task into
one PE per task, the tasks already in their leaf keeping their PEs: the
multilevel method's projection and the node-pair re-bisection's new split.
"""

from __future__ import annotations

import numpy as np

from ...mapping import DEFAULT_EPS
from .baselines import pe_capacity


class SlotTable:
    """``pe[t]`` (the mapping, updated in place by ``swap``), ``slot[t]``,
    ``task_of_slot[s]`` (-1 when empty) and ``slot_pe[s]``."""

    def __init__(self, graph, topology, pe_of_task, eps=None):
        if eps is None and graph.n > topology.n_pes:
            eps = DEFAULT_EPS  # as map_tasks does
        self.cap = int(pe_capacity(graph, topology, eps)[0])
        self.pe = np.array(pe_of_task, dtype=np.int64)
        self.slot_pe = np.repeat(np.arange(topology.n_pes), self.cap)
        self.task_of_slot = np.full(self.slot_pe.size, -1, dtype=np.int64)
        fill = np.zeros(topology.n_pes, dtype=np.int64)
        self.slot = np.empty(self.pe.size, dtype=np.int64)
        for t, p in enumerate(self.pe.tolist()):  # tasks take their PE's slots in order
            if fill[p] >= self.cap:
                raise ValueError(f"PE {p} holds more than {self.cap} tasks")
            self.slot[t] = p * self.cap + fill[p]
            self.task_of_slot[self.slot[t]] = t
            fill[p] += 1

    def swap(self, u: int, s_new: int) -> int:
        """Move task ``u`` into slot ``s_new`` and whatever was there into
        u's old slot; returns that other task (-1 for an empty slot)."""
        s_old = int(self.slot[u])
        other = int(self.task_of_slot[s_new])
        self.task_of_slot[s_old], self.task_of_slot[s_new] = other, u
        self.slot[u], self.pe[u] = s_new, self.slot_pe[s_new]
        if other >= 0:
            self.slot[other], self.pe[other] = s_old, self.slot_pe[s_old]
        return other

    def slots_of_pes(self, pes) -> np.ndarray:
        """All slots of the given PEs."""
        pes = np.asarray(pes, dtype=np.int64)
        return (pes[:, None] * self.cap + np.arange(self.cap)[None, :]).ravel()


def candidate_slots(nbr, w, table: SlotTable, mesh, sym, limit) -> np.ndarray:
    """Slots worth trying for a task with neighbours ``nbr`` (bytes ``w``):
    all when there are at most ``limit``; else around their weighted centre
    and on the heaviest neighbours' nodes on a mesh, or those of 2-hop
    neighbours."""
    pe = table.pe
    if table.slot_pe.size <= limit:
        return np.arange(table.slot_pe.size)
    if mesh is not None:
        ctr = _weighted_centre(mesh, mesh.node_of_pe(pe[nbr]), w)
        offs = np.vstack([np.zeros(mesh.ndim, dtype=np.int64),
                          np.eye(mesh.ndim, dtype=np.int64), -np.eye(mesh.ndim, dtype=np.int64)])
        pts = ctr + offs
        ok = np.all(mesh._wrap | ((pts >= 0) & (pts < mesh._dims_arr)), axis=1)
        heavy = mesh.node_of_pe(pe[nbr[np.argsort(-w, kind="stable")[:4]]])
        nodes = np.unique(np.concatenate([mesh.node_at(pts[ok]), heavy]))
        pes = (nodes[:, None] * mesh.cores + np.arange(mesh.cores)[None, :]).ravel()
        return table.slots_of_pes(pes)[:limit]
    two_hop = np.unique(np.concatenate([nbr] + [sym.indices[sym.indptr[x]:sym.indptr[x + 1]]
                                                for x in nbr[np.argsort(-w, kind="stable")[:8]].tolist()]))
    return np.unique(table.slot[two_hop])[:limit]


def _weighted_centre(mesh, nodes, w) -> np.ndarray:
    """Grid point at the byte-weighted per-dimension median of ``nodes``:
    the point minimising sum w * |x - x_i| in each mesh dimension."""
    c = mesh.node_coords(nodes)
    out = np.empty(mesh.ndim, dtype=np.int64)
    for k in range(mesh.ndim):
        order = np.argsort(c[:, k], kind="stable")
        cum = np.cumsum(w[order])
        out[k] = c[order[np.searchsorted(cum, cum[-1] / 2)], k]
    return out


def place_in_leaves(leaf_of_task: np.ndarray, group: int, k: int, prev_pe=None) -> np.ndarray:
    """One-to-one PEs from target leaves of ``group`` PEs: a task still in
    its leaf keeps its PE (``prev_pe``), the others take the free PEs of
    their leaf in task order."""
    n = leaf_of_task.size
    stay = np.zeros(n, dtype=bool) if prev_pe is None else (prev_pe // group == leaf_of_task)
    pe = np.full(n, -1, dtype=np.int64)
    if prev_pe is not None:
        pe[stay] = prev_pe[stay]
    used = np.zeros(k, dtype=bool)
    used[pe[stay]] = True
    free = np.flatnonzero(~used)
    movers = np.flatnonzero(~stay)
    movers = movers[np.argsort(leaf_of_task[movers], kind="stable")]
    leaves = leaf_of_task[movers]
    first_free = np.searchsorted(free // group, leaves)  # a leaf's free PEs, in order
    first_mover = np.searchsorted(leaves, leaves)          # rank of a mover within its leaf
    pe[movers] = free[first_free + np.arange(movers.size) - first_mover]
    return pe
