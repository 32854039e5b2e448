"""A tree machine as the compiled searches (``_kernels``) read it.

The distance oracle is the tree's own: ``paths[d, p]`` is the ancestor of
PE p at depth d (padded with ids unique to p below a short leaf), so D(p, q)
is ``dist_ext`` of the deepest common entry, O(depth), no k x k matrix.
The connection cache of the one-to-one scan (``_kernels.best_swaps_of``)
keeps a column per inner node.
"""

from __future__ import annotations

import numpy as np


def tree_oracle(topology):
    """The arrays of the compiled distance oracle of a tree topology."""
    return (np.ascontiguousarray(topology._paths, dtype=np.int64),
            np.ascontiguousarray(topology._dist_ext, dtype=np.float64))


def cache_columns(topology) -> np.ndarray:
    """Column of every inner node below the root in the connection cache,
    -1 for the root, the leaves and the padding ids of the paths."""
    inner = np.flatnonzero((topology.child_ptr[1:] > topology.child_ptr[:-1]) & (topology.parent >= 0))
    col = np.full(topology.n_nodes + topology.n_pes, -1, dtype=np.int64)
    col[inner] = np.arange(inner.size)
    return col
