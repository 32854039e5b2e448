"""rankmap: put the MPI ranks that talk most on the cores that are closest.

Library API (no MPI needed): ``CommGraph`` (who sends what), ``Topology``
(the machine tree), ``map_tasks`` (compute task -> PE), ``evaluate`` /
``mapping_cost`` (the one cost model).  Inside MPI programs:
``reorder_comm`` and friends.

Names are imported on first use: ``python -m rankmap.profile`` and
``import rankmap.trace`` then start without loading scipy, the mapping
methods or mpi4py's reordering layer.
"""

import importlib
import importlib.util

__version__ = "0.1.0"

if importlib.util.find_spec(f"{__name__}._kernels") is None:  # a look-up, no load: the kernels load where used
    raise ImportError(
        f"rankmap's compiled kernels are missing from {__path__[0]}: this is rankmap's source tree, not a "
        "built install. Install it (pip install . , or pip install -e . to work on it), which compiles "
        "them with the machine's C++ compiler; if it is installed, run from outside the source tree.")

_LAZY = {
    "map_tasks": "algorithms", "method_names": "algorithms",
    "evaluate": "cost", "mapping_cost": "cost",
    "CommGraph": "graph",
    "Mapping": "mapping", "MappingError": "mapping", "validate_mapping": "mapping",
    "Topology": "topology", "hierarchy_topology": "topology", "topology_from_strings": "topology",
    "reorder_comm": "reorder", "reorder_cart": "reorder", "reorder_dist_graph": "reorder",
}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rankmap' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [*_LAZY, "__version__"]
