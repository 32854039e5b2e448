"""Model creation (Schulz & Traff sec. 4): cut an application graph into n
blocks and take the quotient, an n-task communication graph.

Two ways, both seeded and deterministic:
- ``bisection``: kaffpa's own n-way partition (recursive bisection on the
  coarsest level), blocks numbered as kaffpa numbers them;
- ``multisection``: hierarchical multisection along a machine hierarchy
  (block = PE of the hierarchy), so the identity mapping follows the machine.
The benchmarks build their standard instances with these.
"""

from __future__ import annotations

import numpy as np

from .graph import CommGraph
from .topology.hierarchy import hierarchy_topology

MODEL_KINDS = ("bisection", "multisection")


def partition_into_blocks(app: CommGraph, n_blocks: int, *, how: str = "bisection", hierarchy=None,
                          seed: int = 0, preset: str = "fast", eps: float = 0.03) -> np.ndarray:
    """Block (0..n_blocks-1) of every vertex of ``app``, each block's weight
    within (1 + eps) of c(V) / n_blocks.  ``hierarchy`` (innermost-first
    arities whose product is n_blocks) is needed for ``multisection``."""
    from .algorithms.construct.multisection import multisection_map
    from .algorithms.construct.partition import partition_graph, repair_balance

    if how not in MODEL_KINDS:
        raise ValueError(f"unknown model creation {how!r}; choose from {', '.join(MODEL_KINDS)}")
    if n_blocks < 1 or n_blocks > app.n:
        raise ValueError(f"cannot cut {app.n} vertices into {n_blocks} non-empty blocks")
    if how == "multisection":
        if hierarchy is None or int(np.prod(hierarchy)) != n_blocks:
            raise ValueError(f"multisection model creation needs a hierarchy with {n_blocks} leaves")
        topo = hierarchy_topology(list(hierarchy), [10.0 ** i for i in range(len(hierarchy))])
        return multisection_map(app, topo, seed=seed, eps=eps, preset=preset)
    w = app.vertex_weights
    block = partition_graph(app.symmetric, w, np.ones(n_blocks, dtype=np.int64), eps,
                            preset=preset, seed=seed)
    cap = np.full(n_blocks, np.floor((1 + eps) * np.ceil(w.sum() / n_blocks)))
    return repair_balance(app.symmetric, w, block, cap)


def model_graph(app: CommGraph, n_blocks: int, **kwargs) -> CommGraph:
    """The n_blocks-task communication graph of ``app`` cut into blocks (see
    ``partition_into_blocks``): bytes between blocks = edge weights cut."""
    return app.quotient(partition_into_blocks(app, n_blocks, **kwargs), n_blocks)
