"""The simple placements TreeMatch is judged against (Jeannot & Mercier, sec. 5).

* ``packed``: processes fill the PEs in tree order, each node until it is
  fully occupied before the next (the launcher's ``--map-by core``).
* ``round_robin``: processes are dealt in turn to the subtrees at one depth
  (default 1: the root's children, i.e. the NUMA nodes of one machine or the
  hosts of a cluster, ``--map-by node``), packed inside each subtree.  On
  the paper's Fig. 1 this is its "process i on core i" with cores numbered
  alternately on the two halves.

Both take ``allowed_pes`` (binding constraint) and place several tasks per
PE when the balance rule allows it (more tasks than PEs, or ``eps``).
"""

from __future__ import annotations

import numpy as np

from ...topology import Topology
from ..registry import register
from .baselines import pe_capacity


def parse_pe_list(value, n_pes: int) -> np.ndarray:
    """PE ids from a list/array or a string ``"0-3,8,10-11"``; sorted, unique."""
    if isinstance(value, str):
        ids: list[int] = []
        for part in value.replace(" ", "").split(","):
            if not part:
                continue
            lo, _, hi = part.partition("-")
            try:
                ids.extend(range(int(lo), int(hi or lo) + 1))
            except ValueError:
                raise ValueError(f"allowed_pes: {part!r} is not a PE id or range a-b") from None
        pes = np.asarray(ids, dtype=np.int64)
    else:
        pes = np.asarray(value, dtype=np.int64).ravel()
    if pes.size == 0:
        raise ValueError("allowed_pes is empty")
    if pes.min() < 0 or pes.max() >= n_pes:
        raise ValueError(f"allowed_pes must lie in 0..{n_pes - 1}")
    return np.unique(pes)


def dealt_slots(topology: Topology, n: int, cap: int, depth: int, allowed=None) -> np.ndarray:
    """PE of the first ``n`` slots when slots are dealt in turn to the
    subtrees at ``depth`` (a leaf above that depth is a subtree of its own),
    skipping full subtrees; each PE has ``cap`` slots."""
    t = topology
    if depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    pes = np.arange(t.n_pes) if allowed is None else parse_pe_list(allowed, t.n_pes)
    # subtree of each PE: its ancestor at ``depth`` (or itself if shallower)
    anc = t._paths[min(depth, t.max_depth), pes]
    slots_pe = np.repeat(pes, cap)
    slots_sub = np.repeat(anc, cap)
    # rank of each slot inside its subtree (slots are in PE order)
    order = np.argsort(slots_sub, kind="stable")
    sub_sorted = slots_sub[order]
    starts = np.flatnonzero(np.r_[True, sub_sorted[1:] != sub_sorted[:-1]])
    rank_sorted = np.arange(sub_sorted.size) - np.repeat(starts, np.diff(np.r_[starts, sub_sorted.size]))
    rank = np.empty_like(rank_sorted)
    rank[order] = rank_sorted
    first_pe = np.full(t.n_nodes + t.n_pes, t.n_pes, dtype=np.int64)
    np.minimum.at(first_pe, slots_sub, slots_pe)
    deal = np.lexsort((first_pe[slots_sub], rank))  # turn by turn, subtrees left to right
    if n > deal.size:
        raise ValueError(f"{n} tasks do not fit on {pes.size} PEs at {cap} per PE")
    return slots_pe[deal[:n]]


@register("packed", "fill the PEs in tree order, each node before the next (paper's Packed)")
def packed(graph, topology, *, seed=0, eps=None, allowed_pes=None, **_):
    cap = int(pe_capacity(graph, topology, eps)[0])
    return dealt_slots(topology, graph.n, cap, 0, allowed_pes)


@register("round_robin", "deal tasks in turn to the root's children (option depth=d), packed inside")
def round_robin(graph, topology, *, seed=0, eps=None, allowed_pes=None, depth=1, **_):
    cap = int(pe_capacity(graph, topology, eps)[0])
    return dealt_slots(topology, graph.n, cap, int(depth), allowed_pes)
