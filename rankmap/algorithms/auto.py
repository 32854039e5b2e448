"""``auto``: run the strongest available methods and keep the lowest J.

The current order (identity) is a candidate, so auto never makes J worse.
Each candidate runs with the same seed; the result is deterministic for a
seed.  Stronger methods (multisection, TreeMatch, refinement) join the
candidate list as they are registered.
"""

from __future__ import annotations

import numpy as np

from ..cost import mapping_cost
from ..topology import Topology
from . import METHODS, register

AUTO_CANDIDATES = ["greedy_allc", "greedy", "identity"]


@register("auto", "best J of the strongest available methods (default)", machines=("tree", "mesh"))
def auto(graph, topology, *, seed=0, eps=None, **options):
    if not isinstance(topology, Topology):  # a mesh/torus: the tree methods do not apply
        return METHODS["mesh_auto"].fn(graph, topology, seed=seed, eps=eps, **options)
    best_pe, best_j, best_name = None, np.inf, ""
    for name in AUTO_CANDIDATES:
        if name not in METHODS:
            continue
        pe = np.asarray(METHODS[name].fn(graph, topology, seed=seed, eps=eps, **options))
        j = mapping_cost(graph, topology, pe)
        if j < best_j:
            best_pe, best_j, best_name = pe, j, name
    return best_pe
