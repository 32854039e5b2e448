"""Small communication graphs with a known best mapping, shared by the
multisection, refinement and auto tests."""

import numpy as np
import scipy.sparse as sp

from rankmap.graph import CommGraph


def planted_hierarchy(arities, weights, seed=0):
    """Tasks in nested groups (innermost ``arities[0]``) talking ``weights[i]``
    bytes to every task sharing their level-i group and no lower one, under a
    random renumbering.  Returns ``(graph, best_pe_of_task)``: the mapping
    that keeps every group together on a hierarchy of the same shape."""
    n = int(np.prod(arities))
    group = np.arange(n)
    u, v = np.triu_indices(n, 1)
    w = np.zeros(u.size)
    size = 1
    for a, wt in zip(arities, weights):
        size *= a
        w[(w == 0) & (u // size == v // size)] = wt
    perm = np.random.default_rng(seed).permutation(n)  # task perm[i] plays role i
    keep = w > 0
    g = CommGraph.from_edges(perm[u[keep]], perm[v[keep]], w[keep], n=n)
    g = CommGraph(g.bytes + g.bytes.T)
    best = np.empty(n, dtype=np.int64)
    best[perm] = group
    return g, best


def grid_graph(rows, cols, wrap=False):
    """2-D stencil communication (unit bytes each way per neighbour pair)."""
    idx = np.arange(rows * cols).reshape(rows, cols)
    right = np.roll(idx, -1, axis=1) if wrap else idx[:, 1:]
    down = np.roll(idx, -1, axis=0) if wrap else idx[1:, :]
    src = np.concatenate([(idx if wrap else idx[:, :-1]).ravel(), (idx if wrap else idx[:-1, :]).ravel()])
    dst = np.concatenate([right.ravel(), down.ravel()])
    a = sp.coo_array((np.ones(src.size), (src, dst)), shape=(rows * cols,) * 2)
    return CommGraph(a + a.T)
