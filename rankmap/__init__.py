"""rankmap: put the MPI ranks that talk most on the cores that are closest.

Library API (no MPI needed): ``CommGraph`` (who sends what), ``Topology``
(the machine tree), ``map_tasks`` (compute task -> PE), ``evaluate`` /
``mapping_cost`` (the one cost model).
"""

from .algorithms import map_tasks, method_names
from .cost import evaluate, mapping_cost
from .graph import CommGraph
from .mapping import Mapping, MappingError, validate_mapping
from .topology import Topology, hierarchy_topology, topology_from_strings

__version__ = "0.1.0"

_LAZY = {"reorder_comm", "reorder_cart", "reorder_dist_graph"}


def __getattr__(name):
    """``rankmap.reorder_comm`` and friends import mpi4py only when used."""
    if name in _LAZY:
        from . import reorder

        return getattr(reorder, name)
    raise AttributeError(f"module 'rankmap' has no attribute {name!r}")


__all__ = ["CommGraph", "Topology", "Mapping", "MappingError", "map_tasks", "method_names",
           "evaluate", "mapping_cost", "validate_mapping", "hierarchy_topology",
           "topology_from_strings", "reorder_comm", "reorder_cart", "reorder_dist_graph",
           "__version__"]
