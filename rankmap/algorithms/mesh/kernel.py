"""A mesh or torus as the compiled searches (``refine._kernels``) read it.

The Schulz-Traff swap pass and pairwise exchange are the same on any
machine; only the distance oracle differs.  On a mesh it is the grid
coordinates of every PE's node and an integer table of hops per coordinate
difference and dimension (integer sums: 6 ns per distance where a float
table took 52 ns).  ``refine.swap_refine`` picks the mesh pass on meshes
(``refine.swaps._compiled_kernel``); pair stream, pass loop and stopping
rule are the tree search's.  Pairwise exchange
(``mesh_heuristics.pairwise_exchange``, Bokhari's search of PAIRS) is
compiled too: per task a Python loop with numpy on arrays of a dozen
entries cost 22 s per call at 16,384 tasks on 128x128 on an idle core;
``exchange_kernel`` gives it the mesh's oracle or a tree's.
"""

from __future__ import annotations

import numpy as np

from ...topology import Topology
from ...topology.mesh import MeshTopology


def mesh_oracle(mesh: MeshTopology) -> tuple[np.ndarray, np.ndarray]:
    """The arrays of the compiled hop-count oracle of ``mesh``: every PE's
    node coordinates, and ``hops[k, |a - b|]``, the hops between
    coordinates a and b along dimension k (wrap-around on tori), with the
    intra-node distance at ``hops[ndim, 0]``."""
    coords = np.ascontiguousarray(mesh.pe_coords(np.arange(mesh.n_pes)), dtype=np.int64)
    if mesh.intra_node_distance != int(mesh.intra_node_distance):
        raise ValueError("the compiled mesh oracle needs an integral intra-node distance")
    hops = np.zeros((mesh.ndim + 1, max(mesh.dims)), dtype=np.int64)
    for k, d in enumerate(mesh.dims):
        hops[k, :d] = mesh.ring_hops(0, np.arange(d), k)
    hops[mesh.ndim, 0] = int(mesh.intra_node_distance)
    return coords, hops


def exchange_kernel(topology):
    """The compiled pairwise exchange for this machine with its oracle and
    geometry arguments (``oracle_a, oracle_b, coords, dims, wrap, cores, on_mesh``),
    or None where only the numpy search applies (a mesh with a fractional
    intra-node distance, a machine of another kind)."""
    if isinstance(topology, MeshTopology):
        if not topology.intra_node_distance.is_integer():
            return None
        coords, hops = mesh_oracle(topology)
        from ..refine._kernels import exchange_rounds

        return exchange_rounds, (coords, hops, coords, topology._dims_arr, topology._wrap.copy(),
                                 topology.cores, True)
    if isinstance(topology, Topology):
        from ..refine._kernels import tree_exchange_rounds
        from ..refine.kernel import tree_oracle

        paths, dist_ext = tree_oracle(topology)
        none = np.zeros(0, dtype=np.int64)
        return tree_exchange_rounds, (paths, dist_ext, np.zeros((0, 0), dtype=np.int64), none,
                                      np.zeros(0, dtype=np.bool_), 1, False)
    return None
