"""This rank's traffic row from whatever the program has at hand.

``reorder_comm(traffic=...)`` accepts: this rank's own row (``(destinations,
bytes)`` as for ``Create_dist_graph_adjacent``, a ``{destination: bytes}``
dict, or a length-P array of bytes per destination), a ``CommGraph`` or sparse
matrix of the whole job, or a saved trace or graph file (any format
``rankmap.formats.read_graph`` reads).  ``"profile"`` (what the profiling
layer has recorded so far) is turned into a row by the caller, which knows
the communicator.  No MPI here: the row is checked locally and the verdict
agreed by the caller.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from ..graph import CommGraph


def own_row(traffic, rank: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(destination ranks, bytes)`` this rank sends, checked."""
    dst, nbytes = _row(traffic, rank, size)
    dst = np.asarray(dst)
    nbytes = np.asarray(nbytes, dtype=np.float64)
    if dst.ndim != 1 or dst.shape != nbytes.shape:
        raise ValueError(f"traffic row: {dst.size} destinations but {nbytes.size} byte counts")
    if dst.size and not np.issubdtype(dst.dtype, np.integer):
        if not np.all(np.equal(np.mod(dst, 1), 0)):
            raise ValueError("traffic row: destinations must be integer ranks")
    dst = dst.astype(np.int64)
    if dst.size and (dst.min() < 0 or dst.max() >= size):
        bad = int(dst[(dst < 0) | (dst >= size)][0])
        raise ValueError(f"traffic row: destination {bad} is not a rank of this communicator "
                         f"(0..{size - 1})")
    if nbytes.size and (not np.all(np.isfinite(nbytes)) or nbytes.min() < 0):
        raise ValueError("traffic row: byte counts must be finite and non-negative")
    return dst, nbytes


def _row(traffic, rank: int, size: int):
    if traffic is None:
        raise ValueError("traffic is required: this rank's (destinations, bytes), a CommGraph, "
                         "a trace file or 'profile'")
    if isinstance(traffic, (str, os.PathLike)):
        from ..formats import read_graph

        return _graph_row(read_graph(os.fspath(traffic)), rank, size, os.fspath(traffic))
    if isinstance(traffic, CommGraph):
        return _graph_row(traffic, rank, size, "the CommGraph")
    if sp.issparse(traffic):
        return _graph_row(CommGraph(traffic), rank, size, "the traffic matrix")
    if isinstance(traffic, dict):
        return list(traffic.keys()), list(traffic.values())
    if isinstance(traffic, (tuple, list)) and len(traffic) == 2:
        return traffic[0], traffic[1]
    try:
        arr = np.asarray(traffic, dtype=np.float64)
    except (TypeError, ValueError):
        arr = None
    if arr is not None and arr.ndim == 1 and arr.size == size:
        nz = np.flatnonzero(arr)
        return nz, arr[nz]
    raise ValueError(f"traffic: cannot use a {type(traffic).__name__} (give (destinations, bytes), "
                     f"a length-{size} array, a dict, a CommGraph, a file or 'profile')")


def _graph_row(graph: CommGraph, rank: int, size: int, what: str):
    if graph.n != size:
        raise ValueError(f"{what} has {graph.n} tasks but the communicator has {size} ranks")
    row = graph.bytes[[rank]]
    return row.indices, row.data
