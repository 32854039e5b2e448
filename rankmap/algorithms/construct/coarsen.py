"""Graph contraction for multilevel schemes: CSR and cluster labels in,
coarse CSR out.

Shared by the multilevel mapper (``construct/multilevel.py``) and any
other multilevel path (e.g. a distributed one): nothing here knows about
mappings or topologies.  ``contract`` builds the quotient graph of a
clustering in O(n + m) with one sparse product, ``heavy_edge_matching``
is the classic coarsening step (heaviest incident edge first, clusters
kept under a weight bound and, optionally, inside given groups such as
"the same subtree of the current mapping").
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def contract(adj: sp.csr_array, labels, weights=None, n_coarse: int | None = None):
    """Quotient of the symmetric graph ``adj`` by ``labels`` (cluster id of
    every vertex, 0..n_coarse-1): coarse edge (a, b) carries the summed
    weight of the edges between clusters a and b, self loops dropped.
    Returns ``(coarse_adj, coarse_weights)``; coarse vertex weights are the
    sums of ``weights`` (ones when None).  Empty clusters stay as isolated
    vertices of weight 0."""
    labels = np.asarray(labels, dtype=np.int64)
    n = adj.shape[0]
    if labels.shape != (n,):
        raise ValueError(f"labels has {labels.size} entries for {n} vertices")
    nc = int(labels.max(initial=-1)) + 1 if n_coarse is None else int(n_coarse)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    p = sp.csr_array((np.ones(n), (np.arange(n), labels)), shape=(n, nc))
    coarse = (p.T @ sp.csr_array(adj) @ p).tocsr()
    coarse.setdiag(0)
    coarse.eliminate_zeros()
    coarse.sort_indices()
    return coarse, np.bincount(labels, weights=w, minlength=nc)


def heavy_edge_matching(adj: sp.csr_array, weights, max_weight: float, *, group=None, seed: int = 0):
    """One round of heavy-edge matching: vertices in seeded random order
    each take the unmatched neighbour of heaviest edge whose cluster stays
    within ``max_weight`` and, when ``group`` is given, has the same group
    label.  Returns cluster labels 0..n_coarse-1 (a matched pair shares
    one; the lower vertex's cluster comes first) and n_coarse."""
    n = adj.shape[0]
    g = np.zeros(n, dtype=np.int64) if group is None else np.asarray(group, dtype=np.int64)
    # random order (Karypis & Kumar): sorting by heaviest edge first lost the
    # exchange the V-cycles find on fe_4elt2/512 (docs/methods.md)
    order = np.random.default_rng(seed).permutation(n).astype(np.int64)
    from ._kernels import heavy_edge_mates

    mate = heavy_edge_mates(adj.indptr.astype(np.int64), adj.indices.astype(np.int64),
                            np.asarray(adj.data, np.float64), np.asarray(weights, dtype=np.float64), g, order,
                            float(max_weight))
    rep = np.where(mate >= 0, np.minimum(np.arange(n), mate), np.arange(n))
    uniq, labels = np.unique(rep, return_inverse=True)
    return labels.astype(np.int64), int(uniq.size)
