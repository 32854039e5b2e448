"""A mapping task -> PE, its checks and its balance report.

One-to-one (n <= k PEs): every task on its own PE.  Many-to-one (n > k):
PE loads (sums of vertex weights) must respect
L_max = floor((1 + eps) * ceil(c(V) / k)), the KaHIP/Mt-KaHyPar rule;
SharedMap's looser ceil((1 + eps) * c(V) / k) is reported beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

DEFAULT_EPS = 0.03


class MappingError(ValueError):
    """A mapping that is not valid for its graph and topology."""


@dataclass
class Mapping:
    """``pe_of_task[t]`` is the PE of task t; PEs are the topology's leaves,
    numbered left to right."""

    pe_of_task: np.ndarray
    method: str = ""
    seed: int | None = None
    time_s: float = 0.0
    info: dict = field(default_factory=dict)
    deadline_hit: bool = False  # the wall-clock deadline cut the search (result not repeatable)

    def __post_init__(self):
        self.pe_of_task = np.asarray(self.pe_of_task, dtype=np.int64)

    @property
    def n_tasks(self) -> int:
        return int(self.pe_of_task.size)

    def task_of_pe(self, n_pes: int) -> np.ndarray:
        """Inverse of a one-to-one mapping: the task on each PE, -1 where none."""
        inv = np.full(n_pes, -1, dtype=np.int64)
        inv[self.pe_of_task] = np.arange(self.n_tasks)
        return inv


def balance_report(pe_of_task, weights, n_pes: int, eps: float = DEFAULT_EPS) -> dict:
    """Loads per PE against both balance rules (KaHIP's strict L_max and
    SharedMap's), so a report says which rule a mapping meets."""
    loads = np.bincount(pe_of_task, weights=weights, minlength=n_pes)
    total = float(np.sum(weights))
    strict = math.floor((1 + eps) * math.ceil(total / n_pes))
    loose = math.ceil((1 + eps) * total / n_pes)
    max_load = float(loads.max()) if loads.size else 0.0
    return {"eps": eps, "max_load": max_load, "L_max": strict, "L_max_sharedmap": loose,
            "balanced": max_load <= strict, "balanced_sharedmap": max_load <= loose,
            "imbalance": max_load / (total / n_pes) - 1 if total else 0.0}


def validate_mapping(pe_of_task, graph, topology, eps: float | None = None) -> None:
    """Raise ``MappingError`` unless the mapping is usable.

    n <= k (and no ``eps``): must be one-to-one.  Otherwise PE loads must meet
    L_max for ``eps`` (default 3%)."""
    pe = np.asarray(pe_of_task)
    n, k = graph.n, topology.n_pes
    if pe.shape != (n,):
        raise MappingError(f"mapping has {pe.size} entries but the graph has {n} tasks")
    if pe.size and not np.issubdtype(pe.dtype, np.integer):
        if not np.all(np.equal(np.mod(pe, 1), 0)):
            raise MappingError("mapping entries must be integer PE ids")
        pe = pe.astype(np.int64)
    if pe.size and (pe.min() < 0 or pe.max() >= k):
        bad = int(np.flatnonzero((pe < 0) | (pe >= k))[0])
        raise MappingError(f"task {bad} is mapped to PE {int(pe[bad])}, outside 0..{k - 1}")
    if n <= k and eps is None:
        counts = np.bincount(pe, minlength=k)
        if counts.max(initial=0) > 1:
            dup = int(np.flatnonzero(counts > 1)[0])
            tasks = np.flatnonzero(pe == dup)[:4].tolist()
            raise MappingError(f"not one-to-one: PE {dup} holds tasks {tasks}")
        return
    rep = balance_report(pe, graph.vertex_weights, k, DEFAULT_EPS if eps is None else eps)
    if not rep["balanced"]:
        raise MappingError(
            f"PE load {rep['max_load']:g} exceeds L_max = {rep['L_max']} "
            f"(eps = {rep['eps']:g}, total load {graph.vertex_weights.sum():g} on {k} PEs)")
