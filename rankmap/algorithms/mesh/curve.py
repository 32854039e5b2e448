"""The given task order along a Z-order (Morton) curve of the grid.

A program's own rank order often carries its communication structure
(Bhatele & Kale sec. VIII: the default mapping is far better than random
because the partitioner numbered communicating parts close together).  The
plain default mapping lays that order out row by row, so ranks 8 apart
already sit a row apart; a Z-order curve keeps every aligned block of 2^k
consecutive ranks in a compact box instead.  This is the space-filling-curve
family of the *Mapping Matters* tools (their ``peano``/``hilbert`` mappings).
On NPB CG's 64 ranks (8 groups of 8 ranks exchanging along 3 bits, plus
transposes between groups) it is the exact box-of-boxes embedding that
recursive bisection misses: 1.161 hops per byte on a 4x4x4 mesh against
1.605 for ``mesh_bisect`` (``benchmarks/mesh_maplib.py``).

On grids whose sides are not powers of two the curve is the Z-order of the
enclosing power-of-two grid restricted to the existing nodes (it then has
jumps; ``mesh_auto`` only keeps it where it wins).
"""

from __future__ import annotations

import numpy as np

from ...topology.mesh import MeshTopology
from ..registry import register
from ..construct.baselines import pe_capacity


def morton_order(mesh: MeshTopology) -> np.ndarray:
    """Node ids in Z-order: coordinates' bits interleaved, most significant
    level first, dimension 0 first within a level."""
    coords = mesh.node_coords(np.arange(mesh.n_nodes))
    bits = max(int(max(mesh.dims) - 1).bit_length(), 1)
    key = np.zeros(mesh.n_nodes, dtype=np.int64)
    for b in range(bits - 1, -1, -1):
        for k in range(mesh.ndim):
            key = (key << 1) | ((coords[:, k] >> b) & 1)
    return np.argsort(key, kind="stable")


@register("curve", "mesh/torus: tasks in their given order along a Z-order (Morton) curve of the grid",
          machines=("mesh",))
def curve(graph, topology, *, seed=0, eps=None, **_):
    if not isinstance(topology, MeshTopology):
        raise ValueError("curve maps onto a mesh or torus (--mesh / --torus)")
    per_node = int(pe_capacity(graph, topology, eps)[0]) * topology.cores
    t = np.arange(graph.n, dtype=np.int64)
    node = morton_order(topology)[t // per_node]
    return node * topology.cores + (t % per_node) % topology.cores
