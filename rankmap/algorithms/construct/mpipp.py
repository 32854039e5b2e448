"""MPIPP (Chen et al., ICS 2006) as Jeannot & Mercier evaluate it: start from
a random placement, exchange the PEs of two processes while that lowers J,
stop when no exchange gains.  ``mpipp1`` uses one random start, ``mpipp5``
keeps the best of five (the paper's MPIPP.1 and MPIPP.5).

One pass visits the tasks in random order; for each task u the gain of
exchanging it with every slot (a task, or a free PE) is computed at once and
the best positive exchange is applied (first improvement per task, best
partner); passes repeat until one changes nothing, a local optimum for
pairwise exchanges.  Gains come from the tree: u's cost on every PE is
O(deg(u) * k * depth) distance lookups, every task's cost at u's PE one
sparse product, so a pass is O(n * (m + k * deg)) — quadratic, hence the
``max_tasks`` limit (default 4096).
"""

from __future__ import annotations

import numpy as np

from ...graph import CommGraph
from ...topology import Topology
from ..registry import register
from .baselines import pe_capacity

MAX_TASKS = 4096


def _task_costs(sym, topo: Topology, pe: np.ndarray) -> np.ndarray:
    """cost[v] = sum_w S[v, w] * D(pe[v], pe[w])."""
    c = sym.tocoo()
    return np.bincount(c.row, weights=c.data * topo.distance(pe[c.row], pe[c.col]), minlength=sym.shape[0])


def mpipp_descent(sym, topo: Topology, slots_pe: np.ndarray, n: int, rng) -> np.ndarray:
    """Pairwise-exchange descent from a random assignment of n tasks to
    ``slots_pe`` (one PE per slot); returns pe_of_task."""
    k = topo.n_pes
    n_slots = slots_pe.size
    slot_of_task = rng.permutation(n_slots)[:n]
    task_in_slot = np.full(n_slots, -1, dtype=np.int64)
    task_in_slot[slot_of_task] = np.arange(n)
    pe = slots_pe[slot_of_task]
    all_pes = np.arange(k)
    tol = 1e-12 * float(sym.sum() or 1.0) * float(topo.node_distance.max() or 1.0)
    improved = True
    while improved:
        improved = False
        for u in rng.permutation(n).tolist():
            lo, hi = sym.indptr[u], sym.indptr[u + 1]
            nb, w = sym.indices[lo:hi], sym.data[lo:hi]
            if nb.size == 0:
                continue
            pu = pe[u]
            # u's cost on every PE, and every task's cost on u's PE
            d = topo.distance(np.repeat(all_pes, nb.size), np.tile(pe[nb], k)).reshape(k, nb.size)
            cost_u = d @ w
            cost_at_pu = sym @ topo.distance(np.full(n, pu), pe)
            cost_now = _task_costs(sym, topo, pe)
            s_u = np.zeros(n)
            s_u[nb] = w
            v = task_in_slot
            has = v >= 0
            vv = np.where(has, v, 0)
            q = slots_pe
            gain = cost_u[pu] - cost_u[q]
            gain += np.where(has, cost_now[vv] - cost_at_pu[vv] - 2 * s_u[vv] * topo.distance(np.full(n_slots, pu), q), 0.0)
            best = int(np.argmax(gain))
            if gain[best] > tol:
                su = slot_of_task[u]
                other = task_in_slot[best]
                task_in_slot[su], task_in_slot[best] = other, u
                slot_of_task[u] = best
                pe[u] = slots_pe[best]
                if other >= 0:
                    slot_of_task[other] = su
                    pe[other] = slots_pe[su]
                improved = True
    return pe


def mpipp(graph: CommGraph, topology: Topology, *, seed=0, eps=None, restarts=1,
          max_tasks=MAX_TASKS) -> np.ndarray:
    """Best of ``restarts`` MPIPP descents (each from its own random start)."""
    if graph.n > int(max_tasks):
        raise ValueError(f"MPIPP is quadratic: {graph.n} tasks exceed max_tasks={int(max_tasks)} "
                         "(pass max_tasks=N to run it anyway)")
    cap = pe_capacity(graph, topology, eps)
    slots_pe = np.repeat(np.arange(topology.n_pes), cap)
    sym = graph.symmetric
    rng = np.random.default_rng(seed)
    best, best_j = None, np.inf
    for _ in range(int(restarts)):
        pe = mpipp_descent(sym, topology, slots_pe, graph.n, rng)
        j = float(_task_costs(sym, topology, pe).sum())
        if j < best_j:
            best, best_j = pe, j
    return best


@register("mpipp1", "MPIPP.1: random start, pairwise exchanges until no gain (quadratic; max_tasks)")
def mpipp1(graph, topology, *, seed=0, eps=None, max_tasks=MAX_TASKS, **_):
    return mpipp(graph, topology, seed=seed, eps=eps, restarts=1, max_tasks=max_tasks)


@register("mpipp5", "MPIPP.5: best of five MPIPP.1 runs from different random starts")
def mpipp5(graph, topology, *, seed=0, eps=None, max_tasks=MAX_TASKS, **_):
    return mpipp(graph, topology, seed=seed, eps=eps, restarts=5, max_tasks=max_tasks)
