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

Pairwise exchange (``mesh_heuristics.pairwise_exchange``, Bokhari's search
of PAIRS) is compiled here too (``exchange_rounds``): per task a Python
loop with numpy on arrays of a dozen entries cost 22 s per call at 16,384
tasks on 128x128 on an idle core.  It is written against ``_dist``, the
mesh's hop count here; ``exchange_kernel`` compiles it again with the tree
oracle of ``refine_kernel`` for tree machines.
"""

from __future__ import annotations

import functools
import types

import numpy as np
from ..jit import njit

from ...topology import Topology
from ...topology.mesh import MeshTopology
from ..refine import kernel as refine_kernel


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


_dist = _mesh_dist  # the oracle the kernels below are written against


def _recompiled(fn, **bindings):
    """``fn`` (compiled) compiled again with the given module globals
    rebound: ``_dist`` to another oracle, callees to their rebound versions."""
    py = fn.py_func
    scope = dict(py.__globals__, **bindings)
    return njit(nogil=True)(types.FunctionType(py.__code__, scope, py.__name__, py.__defaults__))


_move_delta = _recompiled(refine_kernel._move_delta, _dist=_mesh_dist)
swap_pass = _recompiled(refine_kernel.swap_pass, _dist=_mesh_dist, _move_delta=_move_delta)


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


@njit(cache=True, nogil=True)
def _weighted_median(vals, w):
    """The first of ``vals`` in sorted order (stable) at which the running
    sum of ``w`` reaches half its total (``construct.slots._weighted_centre``,
    the same sums in the same order)."""
    order = np.argsort(vals, kind="mergesort")
    total = 0.0
    for i in order:
        total += w[i]
    half = total / 2
    cum = 0.0
    for i in order:
        cum += w[i]
        if cum >= half:
            return vals[i]
    return vals[order[-1]]


@njit(cache=True, nogil=True)
def _mesh_candidates(nbr, w, pe, coords, dims, wrap, cores, cap, out):
    """``construct.slots.candidate_slots`` on a mesh, into ``out``
    (truncated at its size): the slots of the nodes on and around the
    byte-weighted median of the neighbours and of the 4 heaviest
    neighbours' nodes, node by node in id order; returns the count."""
    ndim = dims.size
    ctr = np.empty(ndim, dtype=np.int64)
    vals = np.empty(nbr.size, dtype=np.int64)
    for k in range(ndim):
        for j in range(nbr.size):
            vals[j] = coords[pe[nbr[j]], k]
        ctr[k] = _weighted_median(vals, w)
    heavy = np.argsort(-w, kind="mergesort")[:4]
    nodes = np.empty(1 + 2 * ndim + heavy.size, dtype=np.int64)
    count = 0
    for r in range(1 + 2 * ndim):  # the centre, then +1 and -1 along each dimension
        node = 0
        inside = True
        for k in range(ndim):
            x = ctr[k]
            if r == 1 + k:
                x += 1
            elif r == 1 + ndim + k:
                x -= 1
            if wrap[k]:
                x %= dims[k]
            elif x < 0 or x >= dims[k]:
                inside = False
                break
            node = node * dims[k] + x
        if inside:
            nodes[count] = node
            count += 1
    for j in heavy:
        nodes[count] = pe[nbr[j]] // cores
        count += 1
    nodes = np.unique(nodes[:count])
    size = 0
    for node in nodes:
        for p in range(node * cores, (node + 1) * cores):
            for s in range(p * cap, (p + 1) * cap):
                if size == out.size:
                    return size
                out[size] = s
                size += 1
    return size


@njit(cache=True, nogil=True)
def _graph_candidates(indptr, indices, nbr, w, slot, mark, stamp, buf, out):
    """``candidate_slots`` off a mesh: the slots of the neighbours and of
    the 8 heaviest neighbours' neighbours, lowest slot ids first, into
    ``out`` (truncated at its size); ``mark``/``stamp`` dedupe the tasks
    (``buf`` holds them); returns the count."""
    count = 0
    for x in nbr:
        if mark[x] != stamp:
            mark[x] = stamp
            buf[count] = x
            count += 1
    for j in np.argsort(-w, kind="mergesort")[:8]:
        count = refine_kernel.push_unmarked(indptr, indices, nbr[j], mark, stamp, buf, count)
    slots = np.sort(slot[buf[:count]])
    size = min(count, out.size)
    out[:size] = slots[:size]
    return size


@njit(cache=True, nogil=True)
def exchange_rounds(indptr, indices, w, order, pe, slot, task_of_slot, slot_pe, oracle_a, oracle_b,
                    coords, dims, wrap, cores, cap, limit, rounds, on_mesh):
    """Pairwise exchange (``mesh_heuristics.pairwise_exchange``): up to
    ``rounds`` passes over the tasks in ``order``, each task swapped into
    the candidate slot of largest J decrease (first on ties), until a pass
    swaps nothing.  Candidates: every slot when there are at most
    ``limit``, else ``_mesh_candidates`` (``on_mesh``) or
    ``_graph_candidates``.  Updates the slot table (``pe``, ``slot``,
    ``task_of_slot``) in place; returns the passes run."""
    n = pe.size
    n_slots = slot_pe.size
    every_slot = n_slots <= limit
    cand = np.arange(n_slots) if every_slot else np.empty(limit, dtype=np.int64)
    mark = np.zeros(0 if on_mesh else n, dtype=np.int64)
    buf = np.empty(0 if on_mesh else n, dtype=np.int64)
    stamp = 0
    passes = 0
    for _ in range(rounds):
        passes += 1
        improved = False
        for u in order:
            lo, hi = indptr[u], indptr[u + 1]
            if lo == hi:
                continue
            nbr, wu = indices[lo:hi], w[lo:hi]
            if every_slot:
                size = n_slots
            elif on_mesh:
                size = _mesh_candidates(nbr, wu, pe, coords, dims, wrap, cores, cap, cand)
            else:
                stamp += 1
                size = _graph_candidates(indptr, indices, nbr, wu, slot, mark, stamp, buf, cand)
            pu = pe[u]
            su = slot[u]
            old_u = 0.0
            for e in range(lo, hi):
                old_u += w[e] * _dist(oracle_a, oracle_b, pu, pe[indices[e]])
            best = np.inf
            best_slot = -1
            for i in range(size):
                c = cand[i]
                if c == su:
                    continue
                pv = slot_pe[c]
                gain = 0.0  # u moves to pv
                for e in range(lo, hi):
                    gain += w[e] * _dist(oracle_a, oracle_b, pv, pe[indices[e]])
                gain -= old_u
                v = task_of_slot[c]
                if v >= 0:  # v moves to pu
                    delta_v = 0.0
                    s_uv = 0.0
                    for e in range(indptr[v], indptr[v + 1]):
                        y = indices[e]
                        py = pe[y]
                        delta_v += w[e] * (_dist(oracle_a, oracle_b, pu, py) - _dist(oracle_a, oracle_b, pv, py))
                        if y == u:
                            s_uv = w[e]
                    gain += delta_v
                    gain += 2 * s_uv * _dist(oracle_a, oracle_b, pu, pv)  # the u-v edge keeps its length
                if gain < best:
                    best = gain
                    best_slot = c
            if best_slot >= 0 and best < -1e-9 * max(1.0, old_u):
                other = task_of_slot[best_slot]
                task_of_slot[su] = other
                task_of_slot[best_slot] = u
                slot[u] = best_slot
                pe[u] = slot_pe[best_slot]
                if other >= 0:
                    slot[other] = su
                    pe[other] = slot_pe[su]
                improved = True
        if not improved:
            break
    return passes


@functools.cache
def _tree_exchange_rounds():
    from ..refine.kernel import _dist as tree_dist

    return _recompiled(exchange_rounds, _dist=tree_dist)


def exchange_kernel(topology):
    """``exchange_rounds`` for this machine with its oracle and geometry
    arguments (``oracle_a, oracle_b, coords, dims, wrap, cores, on_mesh``),
    or None where only the numpy search applies (a mesh with a fractional
    intra-node distance, a machine of another kind)."""
    if isinstance(topology, MeshTopology):
        if not topology.intra_node_distance.is_integer():
            return None
        coords, hops = mesh_oracle(topology)
        return exchange_rounds, (coords, hops, coords, topology._dims_arr, topology._wrap.copy(),
                                 topology.cores, True)
    if isinstance(topology, Topology):
        paths, dist_ext = refine_kernel.tree_oracle(topology)
        none = np.zeros(0, dtype=np.int64)
        return _tree_exchange_rounds(), (paths, dist_ext, np.zeros((0, 0), dtype=np.int64), none,
                                         np.zeros(0, dtype=np.bool_), 1, False)
    return None
