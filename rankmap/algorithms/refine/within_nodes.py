"""Placement inside the nodes whose links are a matrix (GPU nodes), on the
true distances.

Every method maps onto the tree that approximates such a node
(``Topology.tree_only``); what the tree gets wrong is only where inside a
node each task sits.  With the tasks of every node fixed, J splits into one
small problem per node: permute the contents of the node's PEs to lower the
bytes between them times the link matrix, plus the bytes leaving the node
times each PE's egress (its hops to the NIC); nothing outside the node
changes.  Nodes of up to ``EXHAUSTIVE_PES`` PEs are solved exactly (every
permutation, 40320 for 8 GPUs), larger ones by pairwise swaps until none
gains.  Moving whole PE contents keeps every PE's load, so the result stays
as balanced as the mapping it starts from, and it never costs more.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np

from ...deadline import Deadline

EXHAUSTIVE_PES = 8


@lru_cache(maxsize=None)
def _permutations(k: int) -> np.ndarray:
    return np.asarray(list(itertools.permutations(range(k))), dtype=np.int64).reshape(-1, k)


def place_within_nodes(graph, topology, pe_of_task, deadline: Deadline | None = None) -> np.ndarray:
    """``pe_of_task`` with the contents of each link node's PEs permuted to
    the lowest true J (see the module docstring); the same array when the
    topology has no links."""
    pe = np.asarray(pe_of_task, dtype=np.int64)
    if not getattr(topology, "has_links", False):
        return pe
    node = topology.pe_link_node
    src, dst, w = graph.coo()
    p, q = pe[src], pe[dst]
    bp, bq = node[p], node[q]
    inside = (bp == bq) & (bp >= 0) & (p != q)
    leaving = bp != bq
    out = pe.copy()
    for n in sorted(topology.node_links):
        lo, hi = topology.leaf_range(n)
        k = hi - lo
        here = inside & (bp == n)
        between = np.zeros((k, k))
        np.add.at(between, (p[here] - lo, q[here] - lo), w[here])
        between += between.T
        external = (np.bincount(p[leaving & (bp == n)] - lo, weights=w[leaving & (bp == n)], minlength=k)
                    + np.bincount(q[leaving & (bq == n)] - lo, weights=w[leaving & (bq == n)], minlength=k))
        if not between.any() and not external.any():
            continue
        links = topology.node_links[n]
        rows = topology.pe_link_row[lo:hi]
        distance = links.distance[np.ix_(rows, rows)]
        egress = links.egress[rows]
        exact = k <= EXHAUSTIVE_PES and (deadline is None or not deadline.expired())
        perm = (_best_permutation if exact else _swap_descent)(between, external, distance, egress)
        if np.any(perm != np.arange(k)):
            moved = (pe >= lo) & (pe < hi)
            out[moved] = lo + perm[pe[moved] - lo]
    return out


def _costs(perms: np.ndarray, between: np.ndarray, external: np.ndarray, distance: np.ndarray,
           egress: np.ndarray) -> np.ndarray:
    """Cost of each row of ``perms`` (content of PE i to PE perms[:, i])."""
    cost = np.zeros(perms.shape[0])
    for i, j in zip(*np.nonzero(np.triu(between, 1))):
        cost += between[i, j] * distance[perms[:, i], perms[:, j]]
    for i in np.flatnonzero(external):
        cost += external[i] * egress[perms[:, i]]
    return cost


def _best_permutation(between, external, distance, egress) -> np.ndarray:
    """The cheapest of all permutations; the identity on a tie."""
    k = between.shape[0]
    perms = _permutations(k)
    cost = _costs(perms, between, external, distance, egress)
    best = int(np.argmin(cost))
    return perms[best] if cost[best] < cost[0] * (1 - 1e-12) else np.arange(k)


def _swap_descent(between, external, distance, egress) -> np.ndarray:
    """Best-improvement pairwise swaps of PE contents until none gains."""
    k = between.shape[0]
    perm = np.arange(k)
    a, b = np.triu_indices(k, 1)
    current = _costs(perm[None, :], between, external, distance, egress)[0]
    while True:
        tries = np.repeat(perm[None, :], a.size, axis=0)
        rows = np.arange(a.size)
        tries[rows, a], tries[rows, b] = perm[b], perm[a]
        cost = _costs(tries, between, external, distance, egress)
        best = int(np.argmin(cost))
        if cost[best] >= current * (1 - 1e-12):
            return perm
        perm, current = tries[best], cost[best]
