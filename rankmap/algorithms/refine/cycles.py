"""Cyclic exchanges among the leaf groups of one tree node (one-to-one, uniform trees).

A peer's better mapping can differ from auto's only inside the nodes: on
data/128 Mt-KaHyPar puts the same tasks on every node as auto does but
groups one node's tasks better into its groups of 4 cores, by moving five
pairs of coupled tasks around a cycle of five groups (0 -> 9 -> 8 -> 1 ->
3 -> 0, ``benchmarks/quality_witness.py data 2 --peer mtkahypar``).  Every group
keeps its four tasks, so no step of it is a swap, three of the five pair
moves lose when made alone, and FM between two groups
(``refine/exchange.py``) never closes the cycle.

A cycle in the graph of a node's groups finds it (the negative-cycle moves
of Sanders and Schulz for perfectly balanced partitions, "Think Locally,
Act Globally", SEA 2013): the arc a -> b carries the best gain of moving
one unit (a task, or two tasks of one group) from group a to group b, and a
positive closed walk of up to MAX_CYCLE arcs (max-plus products of the
arc gains) that visits every group once moves one unit along every arc,
so every group keeps its load.  All units of a cycle have one size; the
units were priced alone, so the exact change (moved units may be
adjacent) decides.  Between groups of one node every task outside the
node is equally far away and inside a group all cores are, so the cut
gain times (node distance - group distance) is the exact J gain, and the
nodes are independent: each gets its best valid cycle per round.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...deadline import Deadline
from ...graph import CommGraph
from ...topology import Topology

MAX_CYCLE = 6    # arcs of a cycle at most
MAX_ROUNDS = 32  # rounds (every node at most one cycle per round)
TRIES = 8        # candidate cycles checked per node, unit size and round, best estimate first
MAX_GROUP = 8    # pairs of tasks as units only in groups of at most this many cores
MAX_GROUPS = 32  # groups per node at most (the max-plus products hold groups^3 entries per node)


def leaf_groups(topology: Topology) -> tuple[int, int, float] | None:
    """(cores per group, groups per node, node distance - group distance) of
    a uniform tree whose nodes hold at least three groups, else None."""
    uniform = topology.uniform_hierarchy()
    if uniform is None or len(uniform[0]) < 2:
        return None
    (a0, a1, *_), (d0, d1, *_) = uniform
    if a0 < 1 or not 3 <= a1 <= MAX_GROUPS or d1 <= d0:
        return None
    return int(a0), int(a1), float(d1 - d0)


def _units(group: np.ndarray, a0: int):
    """Units of two tasks: every pair of tasks in one group, as (first, second)."""
    order = np.argsort(group, kind="stable")
    g = group[order]
    first, second = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]  # none with one core per group
    for d in range(1, min(a0, MAX_GROUP)):
        i = np.flatnonzero(g[:-d] == g[d:])
        first.append(order[i])
        second.append(order[i + d])
    return np.concatenate(first), np.concatenate(second)


def _arcs(gain: np.ndarray, node: np.ndarray, sib: np.ndarray, n_nodes: int, a1: int):
    """Best unit per arc (node, from group, to group): the gain array G
    (n_nodes, a1, a1; -inf where no unit) and the unit of each arc."""
    m = gain.shape[0]
    key = ((node * a1 + sib)[:, None] * a1 + np.arange(a1)[None, :]).ravel()
    val = gain.ravel()
    unit = np.repeat(np.arange(m), a1)
    ok = np.isfinite(val)
    key, val, unit = key[ok], val[ok], unit[ok]
    order = np.lexsort((unit, -val, key))
    first = order[np.r_[True, key[order][1:] != key[order][:-1]]] if order.size else order
    G = np.full(n_nodes * a1 * a1, -np.inf)
    pick = np.full(n_nodes * a1 * a1, -1, dtype=np.int64)
    G[key[first]], pick[key[first]] = val[first], unit[first]
    return G.reshape(n_nodes, a1, a1), pick.reshape(n_nodes, a1, a1)


def _cycles(G: np.ndarray, tol: float) -> list[list[tuple[float, list[int]]]]:
    """Per node, the simple cycles (as group lists) of 2..MAX_CYCLE arcs
    whose closed walk has the best estimated gain from its start, best first."""
    n_nodes, a1, _ = G.shape
    P, args = G, []
    found: list[list[tuple[float, list[int]]]] = [[] for _ in range(n_nodes)]
    for length in range(2, min(MAX_CYCLE, a1) + 1):
        S = P[:, :, :, None] + G[:, None, :, :]          # node, start, via, to
        args.append(S.argmax(axis=2))
        P = S.max(axis=2)
        diag = np.diagonal(P, axis1=1, axis2=2)
        for p, s in zip(*np.nonzero(diag > tol)):
            back, v = [], s
            for arg in reversed(args):                     # arg of walks of length, length - 1, ..., 2
                v = int(arg[p, s, v])
                back.append(v)
            cyc = [int(s)] + back[::-1]
            if len(set(cyc)) == length:
                found[p].append((float(diag[p, s]), cyc))
    for lst in found:
        lst.sort(key=lambda c: -c[0])
    return found


def _cut_change(adj: sp.csr_array, group: np.ndarray, tasks: np.ndarray, new_group: np.ndarray) -> float:
    """Cut weight removed by giving ``tasks`` the groups ``new_group``."""
    after = group.copy()
    after[tasks] = new_group
    rows = np.repeat(tasks, np.diff(adj.indptr)[tasks])
    cols = np.concatenate([adj.indices[adj.indptr[t]:adj.indptr[t + 1]] for t in tasks])
    w = np.concatenate([adj.data[adj.indptr[t]:adj.indptr[t + 1]] for t in tasks])
    both = np.isin(cols, tasks)
    w = np.where(both, 0.5 * w, w)                         # edges between moved tasks are seen twice
    return float(np.sum(w * ((group[rows] != group[cols]).astype(float) - (after[rows] != after[cols]))))


def cycle_refine(graph: CommGraph, topology: Topology, pe_of_task, *, max_rounds: int = MAX_ROUNDS,
                 deadline: Deadline | None = None) -> tuple[np.ndarray, float, int]:
    """Cyclic exchanges of tasks and of pairs of tasks among the groups of
    every node while one lowers J, for at most ``max_rounds`` rounds (see
    the module docstring); returns the mapping, the J removed and the rounds
    made (the work done).  Group loads never change; one-to-one on a
    uniform tree only (otherwise the mapping comes back unchanged)."""
    deadline = Deadline.of(deadline)
    pe = np.asarray(pe_of_task, dtype=np.int64).copy()
    shape = leaf_groups(topology)
    if shape is None or graph.n < 3 or graph.n > topology.n_pes:
        return pe, 0.0, 0
    a0, a1, factor = shape
    adj = sp.csr_array(graph.symmetric)
    adj.sort_indices()
    rows = np.repeat(np.arange(graph.n), np.diff(adj.indptr))
    n_nodes = topology.n_pes // (a0 * a1)
    tol = 1e-12 * max(float(adj.data.sum()), 1.0)
    removed, rounds = 0.0, 0
    while rounds < max_rounds and not deadline.expired():
        rounds += 1
        group = pe // a0
        node, sib = group // a1, group % a1
        inside = node[rows] == node[adj.indices]
        conn = np.zeros((graph.n, a1))
        np.add.at(conn, (rows[inside], sib[adj.indices[inside]]), adj.data[inside])
        single = conn - conn[np.arange(graph.n), sib][:, None]
        single[np.arange(graph.n), sib] = -np.inf
        u, v = _units(group, a0)
        pair = single[u] + single[v] + 2 * np.asarray(adj[u, v]).ravel()[:, None]
        members = {1: (np.arange(graph.n)[:, None], single), 2: (np.stack([u, v], axis=1), pair)}
        moved_any = False
        changed = np.zeros(n_nodes, dtype=bool)
        for size in (1, 2):
            tasks_of, gain = members[size]
            if gain.shape[0] == 0:
                continue
            first = tasks_of[:, 0]
            G, pick = _arcs(gain, node[first], sib[first], n_nodes, a1)
            for p, cands in enumerate(_cycles(G, tol)):
                if changed[p]:
                    continue
                for _est, cyc in cands[:TRIES]:
                    units = [pick[p, a, cyc[(i + 1) % len(cyc)]] for i, a in enumerate(cyc)]
                    tasks = np.concatenate([tasks_of[x] for x in units])
                    to = np.concatenate([np.full(size, p * a1 + cyc[(i + 1) % len(cyc)]) for i in range(len(cyc))])
                    delta = _cut_change(adj, group, tasks, to)
                    if delta > tol:
                        # the unit entering a group takes the PEs of the unit leaving it
                        nxt = np.concatenate([tasks_of[units[(i + 1) % len(units)]] for i in range(len(units))])
                        pe[tasks] = pe[nxt].copy()
                        group[tasks] = to
                        removed += factor * delta
                        changed[p] = moved_any = True
                        break
        if not moved_any:
            break
    return pe, removed, rounds
