"""GPU nodes whose inside is not a tree: from link bandwidths to distances.

Inside a GPU node the cost of a byte between two GPUs follows the links
that join them (NVLink, xGMI, through NVSwitches or not), which are not
nested like caches: on a Frontier node GCD 0 has four links to GCD 1, two
to GCD 6, one to GCD 2 and none to the other four.  The node therefore
carries a small matrix of true distances (``tree.NodeLinks``), built here
from a bandwidth graph:

- the bandwidth between two GPUs is the maximum flow between them over
  their direct links and through switches (an NVSwitch node gives every
  pair the sum of a GPU's switch links), other GPUs not used as hops;
- a byte over bandwidth B costs ``HOST_PATH_DISTANCE * REFERENCE_BANDWIDTH
  / B``: at the reference bandwidth (a PCIe 4.0 x16 path through the host)
  it costs what two PEs on one machine cost in the CPU model, faster links
  proportionally less;
- GPUs without such a path are reached over other GPUs (the cheapest chain
  of hops, each hop paying its own cost) or through the host, whichever is
  cheaper: ``HOST_PATH_DISTANCE`` within one CPU package (the reference
  bandwidth), ``CROSS_PACKAGE_DISTANCE`` when the path also crosses between
  packages.

The constructions that need a tree get one: ``links_tree`` clusters the
matrix (average linkage, the least-squares ultrametric of UPGMA) into
nested groups whose distances approximate it; ``gpu_node`` builds a node of
GPU PEs from its matrix, each PE with its device and CPUs.
"""

from __future__ import annotations

import numpy as np

from .levels import DEFAULT_DISTANCES
from .tree import NodeLinks, Topology, TreeNode

HOST_PATH_DISTANCE = DEFAULT_DISTANCES["machine"]
REFERENCE_BANDWIDTH = 25.0  # GB/s: PCIe 4.0 x16, a GPU's path through the host
CROSS_PACKAGE_DISTANCE = 1.5 * HOST_PATH_DISTANCE  # the host path also crosses the socket link


def bandwidth_distance(bandwidth) -> np.ndarray:
    """Cost of one byte over links of ``bandwidth`` GB/s (inf where 0)."""
    bw = np.asarray(bandwidth, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(bw > 0, HOST_PATH_DISTANCE * REFERENCE_BANDWIDTH / bw, np.inf)


def gpu_distances(bandwidth, is_gpu=None, host=None) -> np.ndarray:
    """GPU x GPU distances from a symmetric bandwidth matrix (GB/s) over
    GPUs and switches (``is_gpu`` marks the GPUs, all by default): flow over
    direct links and switches, then hops over GPUs, capped by the path
    through the host (``host``: GPU x GPU, default ``HOST_PATH_DISTANCE``
    everywhere; module docstring)."""
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import maximum_flow, shortest_path

    bw = np.asarray(bandwidth, dtype=np.float64)
    n = bw.shape[0]
    if bw.ndim != 2 or bw.shape != (n, n) or not np.all(np.isfinite(bw)) or bw.min() < 0:
        raise ValueError("link bandwidths: need a square matrix of finite values >= 0")
    bw = np.maximum(bw, bw.T)
    np.fill_diagonal(bw, 0.0)
    gpus = np.flatnonzero(np.ones(n, dtype=bool) if is_gpu is None else np.asarray(is_gpu, dtype=bool))
    switches = np.setdiff1d(np.arange(n), gpus)
    k = len(gpus)
    scale = 1e3 / max(bw[bw > 0].min(), 1e-12) if np.any(bw > 0) else 1.0  # integer capacities
    flow = np.zeros((k, k))
    for a in range(k):
        for b in range(a + 1, k):
            keep = np.concatenate([[gpus[a], gpus[b]], switches])
            sub = np.rint(bw[np.ix_(keep, keep)] * scale).astype(np.int32)
            if not sub[0].any():
                continue
            value = maximum_flow(csr_array(sub), 0, 1).flow_value
            flow[a, b] = flow[b, a] = value / scale
    direct = bandwidth_distance(flow)
    np.fill_diagonal(direct, 0.0)
    hops = shortest_path(np.where(np.isfinite(direct), direct, 0.0), method="FW", directed=False)
    cap = np.full((k, k), HOST_PATH_DISTANCE) if host is None else np.asarray(host, dtype=np.float64)
    return np.minimum(hops, cap) * (1 - np.eye(k))


def links_tree(distance, leaves: list[TreeNode], kind: str = "gpus", method: str = "average") -> TreeNode:
    """A tree over ``leaves`` (one per matrix row, in row order) whose
    distances approximate ``distance``: clusters by ``method`` (scipy's
    linkage: average by default), merges at equal height joined into one
    node, heights made monotone.  Returns the root (itself carrying no
    links)."""
    d = np.asarray(distance, dtype=np.float64)
    k = len(leaves)
    if k == 1:
        return TreeNode(kind, 0.0, [leaves[0]])
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import squareform

    merges = linkage(squareform(d, checks=False), method=method)
    nodes: list[TreeNode] = list(leaves)
    heights = [0.0] * k
    for left, right, height, _ in merges.tolist():
        left, right = int(left), int(right)
        height = max(height, heights[left], heights[right])
        children = []
        for idx in (left, right):  # a child merged at the same height is flattened into this node
            if idx >= k and height - heights[idx] <= 1e-9 * height:
                height = max(height, heights[idx])
                children.extend(nodes[idx].children)
            else:
                children.append(nodes[idx])
        nodes.append(TreeNode(kind, height, children))
        heights.append(height)
    _order_by_row(nodes[-1])
    return nodes[-1]


def _order_by_row(root: TreeNode) -> int:
    """Children in order of their smallest matrix row, so PEs follow the
    GPUs' numbering wherever the clusters leave a choice; returns the root's
    smallest row."""
    if not root.children:
        return int(root.link_row)
    firsts = [_order_by_row(c) for c in root.children]
    root.children = [c for _, c in sorted(zip(firsts, root.children), key=lambda fc: fc[0])]
    return min(firsts)


def gpu_node(devices, cpus, distance, egress=None, source: str = "", host: str | None = None) -> Topology:
    """One node whose PEs are its GPUs: ``devices[i]`` ("rocr:4", or None),
    ``cpus[i]`` (OS CPUs a rank on GPU i is bound to, or None),
    ``distance`` the GPU x GPU matrix, ``egress[i]`` the extra cost of a
    byte from GPU i to another node (its hops to the NIC)."""
    d = np.asarray(distance, dtype=np.float64)
    k = d.shape[0] if d.ndim == 2 else 0
    if k == 0 or len(devices) != k or len(cpus) != k:
        raise ValueError(f"a GPU node needs one device and one CPU set per row of its {k} x {k} matrix")
    leaves = [TreeNode("gpu", link_row=i, device=devices[i], cpus=None if cpus[i] is None else tuple(cpus[i]))
              for i in range(k)]
    approx = links_tree(d, leaves)
    links = NodeLinks(d, np.zeros(k) if egress is None else np.asarray(egress, dtype=np.float64), source)
    return Topology(TreeNode("machine", approx.distance, approx.children, name=host, links=links))
