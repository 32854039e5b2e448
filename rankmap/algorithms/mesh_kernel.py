"""Compiled swap refinement on meshes and tori (numba).

``refine_kernel.swap_pass`` is written for tree machines; on a mesh the
vectorised numpy path of ``refine.swap_refine`` dominated ``mesh_auto`` on
large instances (16,384 tasks on 128x128: 34 s per refinement, 8.5 s
compiled; see ``benchmarks/mesh_heuristics.py``).  The sequential
Schulz-Traff pass is the same on any machine; only the distance oracle
differs.  So the tree kernel is *reused*, not copied: its functions are
compiled again with the module-level name ``_dist`` bound to the mesh's hop
count (``_mesh_dist``, same signature: two arrays describing the machine,
then the two PEs).  ``refine.swap_refine`` picks this pass on meshes
(``refine._compiled_kernel``): pair stream, pass loop and stopping rule are
the tree search's.

The oracle arrays (``mesh_oracle``): the grid coordinates of every PE's
node and an integer table of hops per coordinate difference and dimension
(integer sums: 6 ns per distance where a float table took 52 ns).
"""

from __future__ import annotations

import types

import numpy as np
from numba import njit

from ..topology.mesh import MeshTopology
from . import refine_kernel


@njit(cache=True, nogil=True)
def _mesh_dist(coords, hops, p, q):
    if p == q:
        return 0.0
    ndim = coords.shape[1]
    h = 0
    for k in range(ndim):
        h += hops[k, abs(coords[p, k] - coords[q, k])]
    if h == 0:
        return float(hops[ndim, 0])
    return float(h)


def _with_mesh_oracle(fn, **callees):
    """``fn`` of ``refine_kernel`` compiled again with its globals
    ``_dist`` (and the given callees) bound to the mesh versions."""
    py = fn.py_func
    scope = dict(py.__globals__, _dist=_mesh_dist, **callees)
    return njit(nogil=True)(types.FunctionType(py.__code__, scope, py.__name__, py.__defaults__))


_move_delta = _with_mesh_oracle(refine_kernel._move_delta)
swap_pass = _with_mesh_oracle(refine_kernel.swap_pass, _move_delta=_move_delta)


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
