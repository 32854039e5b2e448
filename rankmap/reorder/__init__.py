"""Reordering inside a running MPI program (imports mpi4py).

``reorder_comm`` (any traffic), ``reorder_cart`` (a Cartesian grid that really
reorders), ``reorder_dist_graph`` (a reordered ``Distgraphcomm`` with the
right neighbours).  See ``api`` for the semantics and ``agree`` for the
collective-safety rules.
"""

from .agree import RankmapWarning, ReorderFailed
from .api import (CENTRALISED_MAX, ReorderedCartcomm, ReorderedComm, ReorderedDistgraphcomm,
                  ReorderInfo, reorder_cart, reorder_comm, reorder_dist_graph)

__all__ = ["reorder_comm", "reorder_cart", "reorder_dist_graph", "ReorderInfo", "ReorderedComm",
           "ReorderedCartcomm", "ReorderedDistgraphcomm", "RankmapWarning", "ReorderFailed",
           "CENTRALISED_MAX"]
