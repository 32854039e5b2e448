"""Max-min fair rates of the replay's flows (numba), recomputed at every
flow start and end.

Progressive filling in numpy takes a pass over all flows per distinct
bottleneck share, and a scattered mapping has dozens a step.  Here the
links wait in a heap by their fair share; the smallest saturates, its flows
take that share and leave their other links, whose shares can only grow,
so an entry found stale at the top goes back with its share now: one pass
over the flows' paths and the heap's work per step.
"""

from __future__ import annotations

import numpy as np

from .algorithms.jit import njit
from .heap_kernel import pop, push


@njit(cache=True, nogil=True)
def fair_rates(links, active, capacity):
    """Rates (bytes/s) of the flows ``active``: each entry a row of
    ``links``, the flow's path (indices into ``capacity``, padded with its
    last index, an infinite link; flows may share a row).  Every flow
    crosses at least one finite link."""
    pad = capacity.size - 1
    width = links.shape[1]
    count = np.zeros(pad, np.int64)
    for a in range(active.size):
        for j in range(width):
            m = links[active[a], j]
            if m < pad:
                count[m] += 1
    start = np.zeros(pad + 1, np.int64)  # the flows of each link (CSR)
    for m in range(pad):
        start[m + 1] = start[m] + count[m]
    fill = start[:pad].copy()
    flows = np.empty(start[pad], np.int64)
    for a in range(active.size):
        for j in range(width):
            m = links[active[a], j]
            if m < pad:
                flows[fill[m]] = a
                fill[m] += 1
    left = capacity[:pad].copy()
    keys = np.empty(pad)  # a heap of links by their share when pushed: at most one entry per link
    vals = np.empty(pad, np.int64)
    size = 0
    for m in range(pad):
        if count[m]:
            size = push(keys, vals, size, left[m] / count[m], m)
    rate = np.full(active.size, -1.0)
    level = 0.0
    while size:
        share, m, size = pop(keys, vals, size)
        if count[m] == 0:
            continue  # its flows all took a smaller share
        now = left[m] / count[m]
        if now != share:  # grown since pushed (shares only grow): back with its share now
            size = push(keys, vals, size, now, m)
            continue
        level = max(share, level)  # a smaller one is rounding
        for k in range(start[m], start[m + 1]):
            a = flows[k]
            if rate[a] >= 0:
                continue
            rate[a] = level
            for j in range(width):
                o = links[active[a], j]
                if o < pad:
                    left[o] -= level
                    count[o] -= 1
    return rate
