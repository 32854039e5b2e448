"""Compiled swap refinement on meshes and tori (numba).

``refine.swap_refine`` runs its compiled loop (``refine_kernel.swap_pass``)
only on tree machines; on a mesh it takes the vectorised numpy path, which
dominates ``mesh_auto`` on large instances (16,384 tasks on 128x128: 34 s
per refinement, see ``benchmarks/mesh_heuristics.py``).  The sequential
Schulz-Traff pass is the same on any machine; only the distance oracle
differs.  So the tree kernel is *reused*, not copied: its functions are
compiled again with the module-level name ``_dist`` bound to the mesh's hop
count (``_mesh_dist``, same signature: two arrays describing the machine,
then the two PEs).  Pair stream, pass loop and stopping rule are those of
``refine._compiled_search``.

The oracle arrays (``mesh_oracle``): the grid coordinates of every PE's
node and an integer table of hops per coordinate difference and dimension
(integer sums: 6 ns per distance where a float table took 52 ns).
"""

from __future__ import annotations

import time
import types

import numpy as np
from numba import njit

from ..cost import mapping_cost
from ..topology.mesh import MeshTopology
from . import refine_kernel
from .refine import _pass_pairs, _SwapState, swap_refine  # the tree search's pair stream and state


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


def mesh_swap_refine(graph, mesh: MeshTopology, pe_of_task, *, depth=10, seed: int = 0, eps=None,
                     ball_cap: int = 256, max_passes: int | None = None,
                     time_limit: float | None = None) -> np.ndarray:
    """``refine.swap_refine`` on a mesh or torus, in compiled code: passes
    over the N_C^depth (or "n2") pairs in random order until one gains
    nothing, each improving swap (or move, many-to-one) taken at once."""
    if not float(mesh.intra_node_distance).is_integer():  # the compiled oracle sums integers
        return swap_refine(graph, mesh, pe_of_task, depth=depth, seed=seed, eps=eps, ball_cap=ball_cap,
                           max_passes=max_passes, time_limit=time_limit)
    start = time.perf_counter()
    s = _SwapState(graph, mesh, pe_of_task, eps)
    if graph.n < 2:
        return s.pos
    coords, hops = mesh_oracle(mesh)
    many = bool(s.many)
    vw = np.asarray(s.vw, dtype=np.float64)
    load = s.load if many else np.zeros(1)
    l_max = float(s.l_max) if many else 0.0
    w = np.asarray(s.w, dtype=np.float64)
    indptr, indices = s.indptr.astype(np.int64), s.indices.astype(np.int64)
    tol = 1e-12 * max(float(mapping_cost(graph, mesh, s.pos)), 1.0)
    rng, cache, passes = np.random.default_rng(seed), [], 0
    while max_passes is None or passes < max_passes:
        passes += 1
        gained = 0
        for U, V in _pass_pairs(s.adj, depth, int(ball_cap), rng, cache):
            _, applied, _ = swap_pass(indptr, indices, w, s.pos, coords, hops, U, V, many, vw, load, l_max, tol)
            gained += applied
            if time_limit is not None and time.perf_counter() - start > time_limit:
                return s.pos
        if gained == 0:
            return s.pos
    return s.pos
