"""The one cost model (DESIGN.md): every algorithm, report and benchmark
scores a mapping here.

J(pi) = sum over ordered pairs u != v of B[u, v] * D(pi(u), pi(v)).
Beside J: bytes per level (traffic by the depth of the lowest common
ancestor of the two PEs), the bottleneck (max bytes over one tree link in one
direction; links are full duplex), the link time (max over links of bytes
over the link's bandwidth, ``topology.bandwidth``: what a bandwidth-bound
program waits for), the average number of tree links a byte crosses and,
where the graph has message counts, the message time (alpha per message
plus bytes over beta at the level each pair crosses, per rank,
``topology.message_cost``: what a program waiting on many small messages
pays; ``latency_weighted`` gives the search the pair weights that fold it
in).  All O(m * depth), vectorised;
on a uniform hierarchy of a million pairs or more, one compiled pass (``_kernels``).  A ``MeshTopology`` (not a tree)
answers the same questions itself: ``distance`` in hops, ``link_loads``
under dimension-ordered routing, ``traffic_breakdown`` for the levels.
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass, field

import numpy as np

from .cores import on_threads, row_slices
from .graph import CommGraph
from .mapping import validate_mapping
from .topology import Topology
from .topology.bandwidth import link_bandwidths
from .topology.message_cost import message_costs


def mapping_cost(graph: CommGraph, topology: Topology, pe_of_task) -> float:
    """J of a mapping: the single definition of the objective (in slices of
    COST_SLICE pairs: memory stays O(n + m) at any size; on a uniform
    hierarchy of UNIFORM_PASS_PAIRS pairs or more, one compiled pass).
    From MEMO_MIN_PAIRS pairs on, the last few results are remembered per
    graph, by machine and by a digest of the mapping: auto scores the given
    order and its best mapping, and the check after a cut search scores
    them again (at 2^24 tasks a pass takes 1-2 s, the digest 0.07 s)."""
    pe = np.ascontiguousarray(pe_of_task, dtype=np.int64)
    if graph.n_edges < MEMO_MIN_PAIRS:
        return _cost(graph, topology, pe)
    key = (hashlib.sha1(memoryview(pe), usedforsecurity=False).digest(), id(topology))
    try:
        memo = _REMEMBERED.setdefault(graph, {})
        machine = weakref.ref(topology)
    except TypeError:  # an object without weak references: nothing kept
        return _cost(graph, topology, pe)
    if key in memo and memo[key][0]() is topology:
        return memo[key][1]
    j = _cost(graph, topology, pe)
    while len(memo) >= MEMO_SIZE:
        memo.pop(next(iter(memo)))
    memo[key] = (machine, j)
    return j


MEMO_MIN_PAIRS = 1 << 20  # graphs from this many pairs remember J (``mapping_cost``) ...
MEMO_SIZE = 4             # ... of this many mappings
_REMEMBERED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _cost(graph: CommGraph, topology: Topology, pe: np.ndarray) -> float:
    if graph.n_edges >= UNIFORM_PASS_PAIRS and _uniform_levels(topology) is not None:
        return float(row_costs(*graph.rows(), topology, pe).sum())
    src, dst, w = graph.coo()
    if w.size == 0:
        return 0.0
    if w.size <= COST_SLICE:
        return float(np.dot(w, topology.distance(pe[src], pe[dst])))
    return float(sum(np.dot(w[i:i + COST_SLICE], topology.distance(pe[src[i:i + COST_SLICE]],
                                                                   pe[dst[i:i + COST_SLICE]]))
                     for i in range(0, w.size, COST_SLICE)))


COST_SLICE = 1 << 22  # pairs per slice of mapping_cost
#: pairs from which ``evaluate`` takes the compiled pass on a uniform
#: hierarchy (below, numpy's passes take milliseconds)
UNIFORM_PASS_PAIRS = 1 << 20


def row_costs(indptr, indices, w, topology, pe) -> np.ndarray:
    """Per row u of a CSR graph, the bytes x distance of its pairs mapped by
    ``pe`` (the swap search's per-task sums; summed, J): compiled on a
    uniform hierarchy (``_kernels.row_costs``), else O(m) numpy."""
    n = indptr.size - 1
    levels = _uniform_levels(topology)
    if levels is not None:
        from ._kernels import row_costs as kernel

        out = np.empty(n)
        args = (np.asarray(indptr, dtype=np.int64), np.asarray(indices, dtype=np.int64),
                np.asarray(w, dtype=np.float64), pe, *levels, out)
        on_threads(lambda lo, hi: kernel(*args, lo, hi), row_slices(indptr))
        return out
    rows = np.repeat(np.arange(n), np.diff(indptr))
    return np.bincount(rows, weights=w * topology.distance(pe[rows], pe[indices]), minlength=n)


def _uniform_levels(topology) -> tuple[np.ndarray, np.ndarray] | None:
    """(PEs per group, distance) per depth, root first, of a tree built by
    ``Topology.uniform`` without link matrices; else None."""
    if not isinstance(topology, Topology) or topology._levels is None or topology.has_links:
        return None
    sizes, dists = topology._levels
    return np.asarray(sizes, dtype=np.int64), np.asarray(dists, dtype=np.float64)


def _uniform_groups(graph: CommGraph, topology) -> tuple[np.ndarray, np.ndarray, tuple] | None:
    """(PEs per group and LCA distance per depth, root first and the leaves
    last, and the node ids of each depth's groups, packed) where the one-pass
    kernels of ``_kernels`` apply: a tree built by ``Topology.uniform``,
    no link matrices, at least ``UNIFORM_PASS_PAIRS`` pairs; else None."""
    levels = _uniform_levels(topology) if graph.n_edges >= UNIFORM_PASS_PAIRS else None
    if levels is None:
        return None
    sizes, dists = levels
    return np.append(sizes, 1), np.append(dists, 0.0), topology.packed_level_node_ids()


def _rows(graph: CommGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The graph's CSR arrays in the kernels' types (no copy when they are)."""
    indptr, indices, w = graph.rows()
    return (np.asarray(indptr, dtype=np.int64), np.asarray(indices, dtype=np.int64),
            np.asarray(w, dtype=np.float64))


def link_time(graph: CommGraph, topology, pe_of_task) -> float:
    """The link time of a mapping: the largest bytes over bandwidth of any
    link (``topology.bandwidth``), what a bandwidth-bound program waits for."""
    pe = np.asarray(pe_of_task, dtype=np.int64)
    src, dst, w = graph.coo()
    if w.size == 0:
        return 0.0
    return float(link_bandwidths(topology).times(all_link_loads(topology, pe[src], pe[dst], w)).max())


def phased_link_time(graphs, topology, pe_of_task) -> float:
    """The link time of a run whose phases use the links one after another
    (a sweep's corners, marked with ``rankmap.profile.phase``): the sum of
    each phase's link time, ``graphs`` one per phase."""
    return sum(link_time(g, topology, pe_of_task) for g in graphs)


@dataclass(frozen=True)
class MessageTime:
    """What a mapping's messages cost per rank (``message_time``): the
    ``latency`` part (alpha x messages) and the ``bandwidth`` part (bytes /
    beta), seconds; ``source``: where the network's alpha and beta came from."""

    latency: float
    bandwidth: float
    source: str

    @property
    def total(self) -> float:
        return self.latency + self.bandwidth


def message_time(graph: CommGraph, topology, pe_of_task) -> MessageTime | None:
    """The message time of a mapping: over every pair, its messages x alpha
    plus its bytes / beta at the level its PEs meet
    (``message_cost.message_costs``), summed and divided by the tasks (the
    mean time a rank's sends take one after another).  None where the graph
    has no message counts or the machine is not a tree."""
    messages = graph.message_coo()
    if messages is None or not isinstance(topology, Topology) or graph.n == 0:
        return None
    pe = np.asarray(pe_of_task, dtype=np.int64)
    costs = message_costs(topology)
    latency = _sliced(lambda s, d, m: costs.times(topology.lca(pe[s], pe[d]), m, None)[0], *messages)
    bandwidth = _sliced(lambda s, d, w: costs.times(topology.lca(pe[s], pe[d]), None, w)[1], *graph.coo())
    return MessageTime(latency / graph.n, bandwidth / graph.n, costs.source)


def _sliced(fn, src, dst, values) -> float:
    """``fn`` summed over slices of COST_SLICE pairs (memory O(n + m))."""
    return float(sum(fn(src[i:i + COST_SLICE], dst[i:i + COST_SLICE], values[i:i + COST_SLICE])
                     for i in range(0, values.size, COST_SLICE)))


def latency_weighted(graph: CommGraph, topology) -> CommGraph:
    """The graph the search maps when the objective is the message time:
    each pair's bytes plus its messages x the network's alpha x beta (the
    bytes one message's latency is worth there, ``MessageCosts.fold``), so
    the one weighted QAP the methods solve folds the latency in.  The graph
    itself where it has no message counts or the machine is not a tree."""
    messages = graph.message_coo()
    if messages is None or not isinstance(topology, Topology):
        return graph
    fold = message_costs(topology).fold
    src, dst, w = graph.coo()
    ms, md, m = messages
    return CommGraph.from_edges(np.concatenate([src, ms]), np.concatenate([dst, md]),
                                np.concatenate([w, fold * m]), n=graph.n,
                                vertex_weights=graph.vertex_weights, name=graph.name)


@dataclass
class CostReport:
    J: float
    total_bytes: float
    bytes_per_level: list[dict] = field(default_factory=list)
    bottleneck: float = 0.0
    hops_per_byte: float = 0.0
    bottleneck_link: str = ""
    busiest_pe: int = -1
    busiest_pe_bytes: float = 0.0
    max_pe_load: float = 0.0
    comm_factor: float | None = None
    makespan: float | None = None
    link_time: float = 0.0        # the busiest link's bytes over its bandwidth ...
    link_time_unit: str = ""      # ... in seconds ("s") or relative ("": no bandwidth given)
    busiest_link: str = ""        # the link with that time ...
    busiest_link_bytes: float = 0.0  # ... and its bytes
    time: MessageTime | None = None  # the message time per rank, where the graph counts messages

    def as_dict(self) -> dict:
        return {"J": self.J, "total_bytes": self.total_bytes,
                "bytes_per_level": self.bytes_per_level, "bottleneck": self.bottleneck,
                "hops_per_byte": self.hops_per_byte, "bottleneck_link": self.bottleneck_link,
                "busiest_pe": self.busiest_pe, "busiest_pe_bytes": self.busiest_pe_bytes,
                "max_pe_load": self.max_pe_load, "comm_factor": self.comm_factor,
                "makespan": self.makespan, "link_time": self.link_time,
                "link_time_unit": self.link_time_unit, "busiest_link": self.busiest_link,
                "busiest_link_bytes": self.busiest_link_bytes,
                "time": None if self.time is None else self.time.total,
                "time_latency": None if self.time is None else self.time.latency,
                "time_bandwidth": None if self.time is None else self.time.bandwidth,
                "time_source": None if self.time is None else self.time.source}


def link_loads(topology: Topology, src_pe, dst_pe, w, lca=None) -> tuple[np.ndarray, np.ndarray]:
    """Bytes over every tree link (node -> parent), per direction.

    Returns ``(up, down)`` indexed by the child node of the link: ``up[x]``
    is what leaves the subtree of x, ``down[x]`` what enters it.  Each pair
    adds its bytes at its leaf and removes them at the LCA (``lca``: the
    pairs' LCAs when the caller has them); a bottom-up subtree sum then
    gives every link's load in O(m * depth + nodes).
    """
    lca = topology.lca(src_pe, dst_pe) if lca is None else lca
    inner = src_pe != dst_pe  # same-PE pairs cross no link
    n_nodes = topology.n_nodes
    leaf, wi, top = topology.leaf_of_pe, w[inner], lca[inner]
    up = _sums(leaf[src_pe[inner]], wi, n_nodes) - _sums(top, wi, n_nodes)
    down = _sums(leaf[dst_pe[inner]], wi, n_nodes) - _sums(top, wi, n_nodes)
    depth, parent = topology.node_depth, topology.parent
    for d in range(topology.max_depth, 0, -1):
        nodes = np.flatnonzero(depth == d)
        up += _sums(parent[nodes], up[nodes], n_nodes)
        down += _sums(parent[nodes], down[nodes], n_nodes)
    up[0] = down[0] = 0.0  # the root has no link above it
    return up, down


def _sums(index, weights, n: int) -> np.ndarray:
    """The weights summed per index, float64 even when there are none
    (bincount, not np.add.at: 10x faster on 10^7 pairs; bincount of nothing
    is int64)."""
    return np.bincount(index, weights=weights, minlength=n).astype(np.float64, copy=False)


def all_link_loads(topology, src_pe, dst_pe, w, lca=None) -> np.ndarray:
    """Bytes over every directed link of any topology, one flat array.

    Tree: ``concatenate(link_loads(...))``, i.e. entry x is the up link of
    node x and entry ``n_nodes + x`` its down link.  Mesh/torus: the
    topology's own numbering under dimension-ordered routing."""
    if isinstance(topology, Topology):
        return np.concatenate(link_loads(topology, src_pe, dst_pe, w, lca))
    return topology.link_loads(src_pe, dst_pe, w)


def link_label(topology, link: int) -> str:
    """Name of a link from ``all_link_loads``' numbering."""
    if not isinstance(topology, Topology):
        return topology.link_label(link)
    direction, node = divmod(int(link), topology.n_nodes)
    name = topology.node_name[node]
    where = f"{topology.node_kind[node]} node {node}" + (f" ({name})" if name else "")
    return f"{where} {'down' if direction else 'up'}"


def evaluate(graph: CommGraph, topology: Topology, pe_of_task, check: bool = True,
             eps: float | None = None, comm_factor: float | None = None) -> CostReport:
    """Full report of a mapping: J, bytes per level, hops/byte, the link
    time and the bottleneck view (Langguth, Schlag & Schulz): the most loaded link, the
    PE whose tasks send and receive the most bytes to other PEs, the
    largest computational PE load (vertex weights) and, with ``comm_factor``
    F, the makespan M = max(max_b comp(b), F * max_l comm(l)), and the
    message time where the graph counts messages (``message_time``).

    Works for tree topologies and for ``MeshTopology`` (hops = network hops,
    links under dimension-ordered routing).  ``check`` validates the mapping
    first (see ``mapping.validate_mapping``)."""
    pe = np.asarray(pe_of_task, dtype=np.int64)
    if check:
        validate_mapping(pe, graph, topology, eps=eps)
    pe_load = np.bincount(pe, weights=graph.vertex_weights, minlength=topology.n_pes)
    max_pe_load = float(pe_load.max()) if pe_load.size else 0.0
    total = graph.total_bytes
    timed = message_time(graph, topology, pe)
    if graph.n_edges == 0:
        return CostReport(0.0, 0.0, [], 0.0, 0.0, max_pe_load=max_pe_load, comm_factor=comm_factor,
                          makespan=None if comm_factor is None else max_pe_load,
                          link_time_unit=link_bandwidths(topology).unit, time=timed)
    uniform = _uniform_groups(graph, topology)
    if uniform is not None:
        J, levels, hop_bytes, loads, pe_bytes = _uniform_breakdown(graph, topology, pe, *uniform)
    else:
        J, levels, hop_bytes, loads, pe_bytes = _pairwise_breakdown(graph, topology, pe)
    top = int(np.argmax(loads))
    model = link_bandwidths(topology)
    times = model.times(loads)
    slowest = int(np.argmax(times))
    busiest = int(np.argmax(pe_bytes))
    bottleneck = float(loads[top])
    return CostReport(J=J, total_bytes=total, bytes_per_level=levels, bottleneck=bottleneck,
                      hops_per_byte=hop_bytes / total if total else 0.0,
                      bottleneck_link=link_label(topology, top) if bottleneck > 0 else "",
                      busiest_pe=busiest, busiest_pe_bytes=float(pe_bytes[busiest]),
                      max_pe_load=max_pe_load, comm_factor=comm_factor,
                      makespan=None if comm_factor is None else max(max_pe_load, comm_factor * bottleneck),
                      link_time=float(times[slowest]), link_time_unit=model.unit,
                      busiest_link=link_label(topology, slowest) if times[slowest] > 0 else "",
                      busiest_link_bytes=float(loads[slowest]), time=timed)


def _pairwise_breakdown(graph: CommGraph, topology, pe):
    """J, bytes per level, bytes x links crossed, ``all_link_loads`` and
    each PE's off-PE bytes, from arrays over the pairs (any machine)."""
    src, dst, w = graph.coo()
    p, q = pe[src], pe[dst]
    lca = None
    if isinstance(topology, Topology):
        lca = topology.lca(p, q)
        J, levels, hop_bytes = _tree_breakdown(topology, p, q, w, lca)
    else:
        J = float(np.dot(w, topology.distance(p, q)))
        levels, hops = topology.traffic_breakdown(p, q, w)
        hop_bytes = float(np.dot(w, hops))
    loads = all_link_loads(topology, p, q, w, lca)
    off_pe = p != q
    pe_bytes = (np.bincount(p[off_pe], weights=w[off_pe], minlength=topology.n_pes)
                + np.bincount(q[off_pe], weights=w[off_pe], minlength=topology.n_pes))
    return J, levels, hop_bytes, loads, pe_bytes


def _uniform_breakdown(graph: CommGraph, topology: Topology, pe, sizes, dists, packed_ids):
    """What ``_pairwise_breakdown`` gives, on a uniform hierarchy, from the
    per-PE sums of one compiled pass (``_kernels``); the links' loads
    come per group and are placed at the groups' node ids."""
    from ._kernels import group_loads

    within, same, received, same_pairs = _uniform_sums(graph, topology.n_pes, pe, sizes)
    leaves = sizes.size - 1  # the leaves' depth
    shared = np.append(within.sum(axis=0), 0.0)  # bytes between PEs that share their depth-d group
    per_depth = shared[:-1] - shared[1:]  # ... whose LCA is at depth d
    ids, offsets = packed_ids  # the groups of depth d: ids[offsets[d]:offsets[d + 1]]
    loads = np.zeros(2 * topology.n_nodes)  # the root (depth 0) has no link above it: stays 0
    group_loads(within, received, sizes, offsets, ids, loads)
    kinds = topology.level_kinds()
    levels = [{"depth": d, "level": kinds[d], "bytes": float(per_depth[d]), "distance": float(dists[d])}
              for d in range(leaves - 1, -1, -1) if per_depth[d] > 0]
    if same_pairs:
        levels.insert(0, {"depth": leaves, "level": "same PE", "bytes": float(same.sum()), "distance": 0.0})
    hop_bytes = float(np.dot(per_depth, 2.0 * (leaves - np.arange(leaves))))
    return float(np.dot(per_depth, dists[:leaves])), levels, hop_bytes, loads, within[:, 0] + received


def _uniform_sums(graph: CommGraph, n_pes: int, pe, sizes):
    """``_kernels.uniform_pass``'s per-PE sums over every row (in slices
    on threads where each PE holds one task at most, else in one), what
    every PE receives from other PEs (its tasks' column sums; where the
    bytes are known to be symmetric, what it sends: no pass), and the
    same-PE pairs."""
    from ._kernels import uniform_pass

    indptr, indices, w = _rows(graph)
    within, same = np.zeros((n_pes, sizes.size - 1)), np.zeros(n_pes)
    slices = row_slices(indptr)
    if len(slices) > 1 and np.bincount(pe, minlength=n_pes).max(initial=0) > 1:
        slices = [(0, graph.n)]  # two rows of one PE in different slices would add to one sum at once
    same_pairs = sum(on_threads(lambda lo, hi: uniform_pass(indptr, indices, w, pe, sizes, within, same, lo, hi),
                                slices))
    if graph.known_symmetric():  # a PE receives what it sends: its rows' bytes to other PEs
        return within, same, within[:, 0], same_pairs
    received = np.bincount(pe, weights=np.bincount(indices, weights=w, minlength=graph.n), minlength=n_pes) - same
    return within, same, received, same_pairs


def _tree_breakdown(topology: Topology, p, q, w, lca):
    """J, bytes per level and the bytes times the tree links they cross, on
    a tree (``lca``: the pairs' lowest common ancestors).  Where a node's
    inside is a link matrix, J takes its true distances and the bytes
    between two PEs of that node are one level, "... links" at the node's
    depth, whose distance the matrix gives pair by pair."""
    J = float(np.dot(w, topology.distance(p, q) if topology.has_links else topology._dist_ext[lca]))
    lca_depth = topology._depth_ext[lca]
    same_pe = p == q
    off = ~same_pe
    kinds = topology.level_kinds()
    if topology.has_links:
        link_node = topology.pe_link_node[p]
        in_links = (link_node >= 0) & (link_node == topology.pe_link_node[q]) & off
        level_depth = np.where(in_links, topology.node_depth[link_node], lca_depth)
    else:
        in_links, level_depth = None, lca_depth
    per_depth = np.bincount(level_depth[off], weights=w[off], minlength=topology.max_depth + 1)
    levels = []
    for d in range(topology.max_depth - 1, -1, -1):
        if per_depth[d] > 0:
            here = None
            if in_links is not None:
                here = (level_depth == d) & off
                if in_links[here].any():
                    levels.append({"depth": d, "level": f"{kinds[d]} links", "bytes": float(per_depth[d]),
                                   "distance": None})
                    continue
            at_depth = topology.node_distance[topology.node_depth == d]  # one distance per level: no pair pass
            if at_depth.min() != at_depth.max():
                here = (level_depth == d) & off if here is None else here
                at_depth = topology.node_distance[lca[here]]
            levels.append({"depth": d, "level": kinds[d], "bytes": float(per_depth[d]),
                           "distance": float(at_depth[0]) if at_depth.min() == at_depth.max() else None})
    if same_pe.any():
        levels.insert(0, {"depth": topology.max_depth, "level": "same PE",
                          "bytes": float(w[same_pe].sum()), "distance": 0.0})
    leaf_depth = topology.node_depth[topology.leaf_of_pe]
    hops = leaf_depth[p] + leaf_depth[q] - 2 * lca_depth  # 0 for a pair on one PE (its LCA is the leaf)
    return J, levels, float(np.dot(w, hops))
