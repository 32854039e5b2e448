"""Reordering inside a running MPI program (imports mpi4py).

``reorder_comm`` (any traffic), ``reorder_cart`` (a Cartesian grid that really
reorders), ``reorder_dist_graph`` (a reordered ``Distgraphcomm`` with the
right neighbours).  See ``api`` for the semantics and ``agree`` for the
collective-safety rules.
"""

import importlib

from .agree import RankmapWarning, ReorderFailed

# ``api`` (and the centralised mapping behind it: scipy, the refinement) is
# imported on first use, so the ranks of ``offline`` and ``exchange`` stay lean
_FROM_API = ("CENTRALISED_MAX", "ReorderedCartcomm", "ReorderedComm", "ReorderedDistgraphcomm",
             "ReorderInfo", "reorder_cart", "reorder_comm", "reorder_dist_graph")


def __getattr__(name):
    if name in _FROM_API:
        value = getattr(importlib.import_module(".api", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["reorder_comm", "reorder_cart", "reorder_dist_graph", "ReorderInfo", "ReorderedComm",
           "ReorderedCartcomm", "ReorderedDistgraphcomm", "RankmapWarning", "ReorderFailed",
           "CENTRALISED_MAX"]
