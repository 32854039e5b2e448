"""The machine as a rooted tree whose leaves are PEs.

One type serves every machine rankmap knows: a uniform hierarchy (``4:16:8``)
is a regular tree, an hwloc node is an irregular one, a cluster is node trees
under network levels.  The distance between two PEs is the ``distance`` of
their lowest common ancestor, so an O(1)-per-pair oracle needs only each PE's
ancestor path, never a dense k x k matrix.

Nodes are stored in DFS preorder, so the leaves of any subtree are a
contiguous range of PE ids (``leaf_range``); algorithms that split the machine
top-down (multisection, TreeMatch's top-down placement) rely on that.

Where the inside of a node is not a tree (GPUs joined by links of unequal
width), that node carries ``NodeLinks``: the true distances between the PEs
below it as a small matrix, and each PE's extra cost to leave the node (the
hops to its NIC).  ``distance`` then reads the matrix for two PEs of that
node, still O(1) per pair; the tree inside the node is an approximation for
the constructions that need a tree (``tree_only``).
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..limits import MAX_DISTANCE


@dataclass
class TreeNode:
    """A node of a machine description before it is frozen into a Topology.

    ``distance`` is the cost of one byte between two PEs whose lowest common
    ancestor is this node (0 for a leaf).  ``kind`` names the level
    ("machine", "package", "L3", "core", "pu", "switch", ...); ``os_index`` is
    the OS processor number of a leaf PU; ``name`` is a host name for nodes
    that are hosts.
    """

    kind: str
    distance: float = 0.0
    children: list["TreeNode"] = field(default_factory=list)
    os_index: int | None = None
    name: str | None = None
    links: "NodeLinks | None" = None  # inner node: true distances among the PEs below
    link_row: int | None = None       # leaf: its row in the links of the node above
    device: str | None = None         # leaf that is a GPU: "rocr:4", "cuda:0", "ze:1"
    cpus: tuple[int, ...] | None = None  # leaf: the OS CPUs a rank on it is bound to
    uplink: float | None = None       # bytes/s of the link to the parent, each way (None: from distances)
    latency: float | None = None      # inner node: seconds of a message between PEs meeting here
                                      # (None: the defaults of ``message_cost``)


@dataclass(frozen=True)
class NodeLinks:
    """True distances among the PEs of one node whose inside is not a tree.

    ``distance[i, j]``: cost of one byte between the PEs of rows i and j
    (0 on the diagonal; each leaf below the node names its row in
    ``TreeNode.link_row``, so restricting or reordering leaves keeps the
    matrix valid); ``egress[i]``: what a byte to or from another node costs
    on top of the tree's distance, from row i (hops to the nearest NIC).
    ``source`` says where the matrix came from (an hwloc distance matrix, a
    built-in node type, a file)."""

    distance: np.ndarray
    egress: np.ndarray
    source: str = ""

    def __post_init__(self):
        d = np.asarray(self.distance, dtype=np.float64)
        e = np.asarray(self.egress, dtype=np.float64)
        k = d.shape[0] if d.ndim == 2 else -1
        if d.ndim != 2 or d.shape != (k, k) or e.shape != (k,):
            raise ValueError("node links: need a square distance matrix and one egress per row")
        if not (np.all(np.isfinite(d)) and np.all(np.isfinite(e))) or d.min() < 0 or e.min() < 0:
            raise ValueError("node links: distances and egress must be finite and >= 0")
        if np.any(np.diag(d) != 0) or np.any(d != d.T):
            raise ValueError("node links: the distance matrix must be symmetric with a zero diagonal")
        object.__setattr__(self, "distance", d)
        object.__setattr__(self, "egress", e)


class _LeafExtras:
    """What leaves and link nodes carry beyond the tree, gathered in DFS order."""

    def __init__(self):
        self.rows: list[int] = []
        self.devices: list[str | None] = []
        self.cpus: list[tuple[int, ...] | None] = []
        self.links: dict[int, NodeLinks] = {}

    def leaf(self, node: TreeNode) -> None:
        self.rows.append(-1 if node.link_row is None else int(node.link_row))
        self.devices.append(node.device)
        self.cpus.append(None if node.cpus is None else tuple(int(c) for c in node.cpus))


@dataclass
class _Blocks:
    """The nodes with links, flattened for vectorised lookups: PE p lies in
    block ``block[p]`` (-1: none) at matrix row ``row[p]``; block b's
    matrix is ``values[offset[b]:offset[b] + width[b]**2]``."""

    block: np.ndarray
    row: np.ndarray
    egress: np.ndarray
    offset: np.ndarray
    width: np.ndarray
    values: np.ndarray

    def adjust(self, tree_distance, p, q) -> np.ndarray:
        """True distances from the tree's: the matrix inside a block, the
        egress of both ends for a pair in different blocks."""
        bp, bq = self.block[p], self.block[q]
        out = tree_distance + np.where(bp != bq, self.egress[p] + self.egress[q], 0.0)
        same = (bp == bq) & (bp >= 0) & (p != q)
        if np.any(same):
            b = bp[same]
            out[same] = self.values[self.offset[b] + self.row[p[same]] * self.width[b]
                                    + self.row[q[same]]]
        return out


def _unset(n: int, value) -> np.ndarray:
    """``n`` times ``value`` (-1, NaN, None: "not given"), read-only and
    without memory of its own (a broadcast of one value): a machine built
    from a hierarchy string gives no OS index, link row, device, bandwidth
    or latency per node, and at 2^22 PEs each such array is 34-42 MB to
    write first."""
    return np.broadcast_to(np.asarray(value, dtype=object if value is None else None), (n,))


class Topology:
    """Frozen machine tree with vectorised queries.

    Attributes (arrays are indexed by node id, nodes in DFS preorder):
    ``parent`` (-1 for the root), ``node_distance``, ``node_depth``,
    ``node_kind`` (list of str), ``leaf_of_pe`` (node id of PE p),
    ``leaf_start``/``leaf_stop`` (the PE range below a node),
    ``pe_os_index`` (OS index of each PE, or -1), ``pe_host`` (host name of
    each PE: the nearest ancestor with a name, else "localhost"),
    ``pe_device`` (the GPU of a PE that is one, else None), ``pe_cpus`` (the
    CPUs a rank on the PE is bound to when the leaf names them, else None:
    its PU ``pe_os_index``), ``node_links`` (node id -> ``NodeLinks``),
    ``node_uplink`` (bytes/s of the link from a node to its parent where the
    description gives it, else NaN; ``bandwidth.link_bandwidths``),
    ``node_latency`` (seconds of a message between two PEs whose lowest
    common ancestor is the node, where the description gives it, else NaN;
    ``message_cost.message_costs``).
    """

    def __init__(self, root: TreeNode):
        parent: list[int] = []
        distance: list[float] = []
        depth: list[int] = []
        kinds: list[str] = []
        names: list[str | None] = []
        os_index: list[int] = []
        leaves: list[int] = []
        child_lists: list[list[int]] = []
        uplinks: list[float] = []
        latencies: list[float] = []
        extras = _LeafExtras()
        # iterative DFS preorder (trees of 10^5+ leaves would overflow recursion)
        stack: list[tuple[TreeNode, int, int]] = [(root, -1, 0)]
        while stack:
            node, par, dep = stack.pop()
            nid = len(parent)
            parent.append(par)
            distance.append(float(node.distance) if node.children else 0.0)
            depth.append(dep)
            kinds.append(node.kind)
            names.append(node.name)
            os_index.append(-1 if node.os_index is None else int(node.os_index))
            uplinks.append(np.nan if node.uplink is None else float(node.uplink))
            latencies.append(np.nan if node.latency is None or not node.children else float(node.latency))
            child_lists.append([])
            if par >= 0:
                child_lists[par].append(nid)
            if not node.children:
                leaves.append(nid)
                extras.leaf(node)
            elif node.links is not None:
                extras.links[nid] = node.links
            for child in reversed(node.children):
                stack.append((child, nid, dep + 1))
        counts = np.array([len(c) for c in child_lists], dtype=np.int64)
        self._init_arrays(
            np.asarray(parent, dtype=np.int64),
            np.asarray(distance, dtype=np.float64),
            np.asarray(depth, dtype=np.int64),
            kinds,
            names,
            np.asarray(os_index, dtype=np.int64),
            np.asarray(leaves, dtype=np.int64),
            np.concatenate([[0], np.cumsum(counts)]),
            np.fromiter((c for cl in child_lists for c in cl), dtype=np.int64, count=int(counts.sum())),
        )
        self._init_extras(extras)
        self.node_uplink = np.asarray(uplinks, dtype=np.float64)
        if np.any(self.node_uplink <= 0):
            raise ValueError("link bandwidths must be > 0")
        self.node_latency = np.asarray(latencies, dtype=np.float64)
        if np.any(self.node_latency < 0):
            raise ValueError("latencies must be >= 0")

    @classmethod
    def uniform(cls, arities, distances, kinds, host_names=None) -> "Topology":
        """The regular tree of a uniform hierarchy (``arities`` and
        ``distances`` innermost first, ``kinds`` the level names, root
        first, leaves last) built as arrays in one compiled walk
        (``_kernels.uniform_tree``), no ``TreeNode`` per PE.
        ``host_names``: names of the root's children (or of the root when
        it is the only level)."""
        arities = [int(a) for a in arities][::-1]  # root first from here on
        dists = [float(d) for d in distances][::-1]
        levels = len(arities)
        width = np.cumprod([1] + arities)  # nodes per depth
        n_pes = int(width[-1])
        n_nodes = int(width.sum())
        parent, depth, start, stop, level_ids = (np.empty(n_nodes, dtype=np.int64) for _ in range(5))
        distance, child_ptr = np.empty(n_nodes), np.empty(n_nodes + 1, dtype=np.int64)
        child_idx = np.empty(n_nodes - 1, dtype=np.int64)
        level_ptr = np.concatenate([[0], np.cumsum(width)]).astype(np.int64)
        from .._kernels import uniform_tree

        uniform_tree(np.asarray(arities, dtype=np.int64), np.asarray(dists, dtype=np.float64), parent, depth,
                     distance, child_ptr, child_idx, start, stop, level_ids, level_ptr)
        node_kind = [kinds[levels]]  # in preorder: a subtree's kinds are its root's, then its children's
        for d in range(levels - 1, -1, -1):
            node_kind = [kinds[d]] + node_kind * arities[d]
        leaves = level_ids[level_ptr[-2]:]
        names = [None] * n_nodes
        named = level_ids[level_ptr[1]:level_ptr[2]] if levels >= 2 else level_ids[:1]
        if host_names is not None:
            hosts = list(host_names)
            if len(hosts) != named.size:
                raise ValueError(f"{len(hosts)} host names for {named.size} hosts")
            for node, host in zip(named.tolist(), hosts):
                names[node] = host
            pe_host = np.empty((len(hosts), n_pes // named.size), dtype=object)
            pe_host[:] = np.asarray(hosts, dtype=object)[:, None]  # each host's PEs one after the other
            pe_host = pe_host.ravel()
            host_order = list(dict.fromkeys(hosts))
        else:
            host_order = ["localhost"]
            pe_host = np.empty(n_pes, dtype=object)
            pe_host[:] = "localhost"  # one string shared (np.full would make one per PE: 0.8 s at 2^22)
        out = cls.__new__(cls)
        out._init_arrays(parent, distance, depth, node_kind, names, None, leaves, child_ptr, child_idx,
                         pe_host=pe_host, ranges=(start, stop), inner_distances=dists)
        # PEs per group and the distance within it, depth by depth from the root (``_uniform_distance``)
        out._levels = ([n_pes // int(w) for w in width[:-1]], dists)
        out._kinds = list(kinds)  # one kind per depth: nothing to count (1 s at 2^22 PEs)
        out._level_ids = (level_ids, level_ptr)  # each depth's nodes in group order, as built
        out._host_order = host_order
        extras = _LeafExtras()
        extras.rows, extras.cpus = _unset(n_pes, -1), [None] * n_pes
        extras.devices = _unset(n_pes, None)
        out._init_extras(extras)
        out.node_uplink = _unset(n_nodes, np.nan)  # no bandwidths given: link_bandwidths derives them
        out.node_latency = _unset(n_nodes, np.nan)  # ... nor latencies: message_costs' defaults
        return out

    # ------------------------------------------------------------------ build
    def _init_arrays(self, parent, distance, depth, kinds, names, os_index, leaves, child_ptr, child_idx,
                     pe_host=None, ranges=None, inner_distances=None):
        self.parent = parent
        self.node_distance = distance
        self.node_depth = depth
        self.node_kind = kinds
        self.node_name = names
        self.leaf_of_pe = leaves
        self.n_nodes = len(parent)
        self.n_pes = len(leaves)
        if self.n_pes == 0:
            raise ValueError("a topology needs at least one PE")
        self.child_ptr, self.child_idx = child_ptr, child_idx
        self.pe_os_index = _unset(self.n_pes, -1) if os_index is None else os_index[leaves]
        self.max_depth = int(depth.max())
        # PE range below every node (leaves are numbered in preorder), unless the caller knows it
        self.leaf_start, self.leaf_stop = ranges if ranges is not None else self._leaf_ranges()
        self._path_rows = self._ext = None  # ``_paths``, ``_dist_ext`` and ``_depth_ext``: built on first use
        if pe_host is not None:
            self.pe_host = pe_host
            self._validate_distances(inner_distances)
            return
        hosts = []
        host_cache: dict[int, str] = {}
        for leaf in leaves.tolist():
            n = leaf
            chain = []
            while n >= 0 and names[n] is None and n not in host_cache:
                chain.append(n)
                n = parent[n]
            host = "localhost" if n < 0 else host_cache.get(n, names[n])
            for c in chain:
                host_cache[c] = host
            hosts.append(host)
        self.pe_host = np.asarray(hosts, dtype=object)
        self._validate_distances()

    def _leaf_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, stop) of the PEs below every node, children before parents."""
        start = np.full(self.n_nodes, np.iinfo(np.int64).max, dtype=np.int64)
        stop = np.full(self.n_nodes, -1, dtype=np.int64)
        start[self.leaf_of_pe] = np.arange(self.n_pes)
        stop[self.leaf_of_pe] = np.arange(1, self.n_pes + 1)
        for d in range(self.max_depth, 0, -1):
            nodes = np.flatnonzero(self.node_depth == d)
            np.minimum.at(start, self.parent[nodes], start[nodes])
            np.maximum.at(stop, self.parent[nodes], stop[nodes])
        return start, stop

    @property
    def _dist_ext(self) -> np.ndarray:
        """Node distances, then a 0 for every PE's pad id (``_paths``)."""
        return self._extended()[0]

    @property
    def _depth_ext(self) -> np.ndarray:
        """Node depths, then every PE's leaf depth for its pad id."""
        return self._extended()[1]

    def _extended(self) -> tuple[np.ndarray, np.ndarray]:
        if self._ext is None:
            self._ext = (np.concatenate([self.node_distance, np.zeros(self.n_pes)]),
                         np.concatenate([self.node_depth, self.node_depth[self.leaf_of_pe]]))
        return self._ext

    @property
    def _paths(self) -> np.ndarray:
        """The ancestor path of every PE, one row per depth; short paths are
        padded with ids >= n_nodes unique to the PE, so they never match
        another PE.  Built on first use: a uniform hierarchy finds its
        common ancestors by arithmetic (``lca``), and at 2^24 PEs the rows
        take 0.5 GB."""
        if self._path_rows is None:
            depth, parent = self.node_depth, self.parent
            paths = np.empty((self.max_depth + 1, self.n_pes), dtype=np.int64)
            pad = self.n_nodes + np.arange(self.n_pes)
            anc = self.leaf_of_pe.copy()
            for d in range(self.max_depth, -1, -1):
                here = depth[anc] == d
                paths[d] = np.where(here, anc, pad)
                anc = np.where(here & (parent[anc] >= 0), parent[anc], anc)
            self._path_rows = paths
        return self._path_rows

    _levels = None  # (PEs per group, distance) per depth where the tree is a uniform hierarchy (``uniform``)
    _level_ids = None  # ... and the node ids of every depth in group order, packed (``level_node_ids``)
    _host_order = None  # ... and its hosts in PE order (``hosts``: no pass over the PEs)
    _kinds = None  # ``level_kinds``, once counted

    def _init_extras(self, extras: _LeafExtras) -> None:
        self.pe_device = np.asarray(extras.devices, dtype=object)
        self.pe_cpus = extras.cpus
        self.node_links = extras.links
        self._blocks = None
        self.pe_link_row = np.asarray(extras.rows, dtype=np.int64)  # the row its leaf names, or -1
        if not extras.links:
            self.pe_link_node = _unset(self.n_pes, -1)  # the node whose links hold PE p: none
            return
        self.pe_link_node = np.full(self.n_pes, -1, dtype=np.int64)
        rows = self.pe_link_row
        block = np.full(self.n_pes, -1, dtype=np.int64)
        egress = np.zeros(self.n_pes)
        offset, width, values = [], [], []
        for b, (node, links) in enumerate(sorted(extras.links.items())):
            lo, hi = self.leaf_range(node)
            k = links.distance.shape[0]
            if np.any(block[lo:hi] >= 0):
                raise ValueError(f"{self.node_kind[node]} node {node}: node links inside node links")
            if np.any(rows[lo:hi] < 0) or np.any(rows[lo:hi] >= k):
                raise ValueError(f"{self.node_kind[node]} node {node}: every PE below node links "
                                 f"needs its row of the {k} x {k} matrix")
            block[lo:hi] = b
            self.pe_link_node[lo:hi] = node
            egress[lo:hi] = links.egress[rows[lo:hi]]
            offset.append(sum(w * w for w in width))
            width.append(k)
            values.append(links.distance.ravel())
        self._blocks = _Blocks(block, np.where(rows < 0, 0, rows), egress,
                               np.asarray(offset, dtype=np.int64), np.asarray(width, dtype=np.int64),
                               np.concatenate(values))

    def _validate_distances(self, inner=None):
        """The inner nodes' distances (``inner``: those values, where the
        caller knows them without a pass over the nodes) in range."""
        d = self.node_distance[self.child_ptr[1:] > self.child_ptr[:-1]] if inner is None else np.asarray(inner)
        if not np.all((d >= 0) & (d <= MAX_DISTANCE)):
            raise ValueError(f"topology distances must be finite, >= 0 and at most {MAX_DISTANCE:g} "
                             "(bytes x distance must stay a finite number)")

    # ---------------------------------------------------------------- queries
    def children(self, node: int) -> np.ndarray:
        return self.child_idx[self.child_ptr[node]:self.child_ptr[node + 1]]

    def splitting_node(self, node: int = 0) -> int:
        """``node`` (default the root), or its first descendant with more than
        one child: where a split below ``node`` is made (levels of one child
        split nothing)."""
        while self.child_ptr[node + 1] - self.child_ptr[node] == 1:
            node = int(self.child_idx[self.child_ptr[node]])
        return node

    @property
    def root(self) -> int:
        return 0

    def leaf_range(self, node: int) -> tuple[int, int]:
        """PEs below ``node`` are ``range(start, stop)``."""
        return int(self.leaf_start[node]), int(self.leaf_stop[node])

    def lca(self, p, q) -> np.ndarray:
        """Lowest common ancestor node of PE arrays ``p`` and ``q`` (ids may
        be >= n_nodes when p == q at a short path: the PE's own pad id)."""
        p = np.asarray(p, dtype=np.int64)
        q = np.asarray(q, dtype=np.int64)
        if self._levels is not None:  # a uniform hierarchy: group arithmetic (``_uniform_distance``)
            sizes, _ = self._levels
            level_ids = self.level_node_ids()
            out = np.full(np.broadcast_shapes(p.shape, q.shape), level_ids[0][0])
            for size, ids in zip(list(sizes[1:]) + [1], level_ids[1:]):
                group = p // size
                same = group == q // size
                out[same] = np.broadcast_to(ids[group], same.shape)[same]
            return out
        paths = self._paths
        out = paths[0, p] if p.ndim else paths[0, int(p)]
        for d in range(1, self.max_depth + 1):
            a, b = paths[d, p], paths[d, q]
            out = np.where(a == b, a, out)
        return out

    def level_node_ids(self) -> list[np.ndarray]:
        """On a uniform hierarchy (``uniform``, which keeps them as it builds
        the tree): the node ids of every depth, root first, in group order
        (group g of depth d holds PEs g * s_d ... (g + 1) * s_d - 1), the
        leaves last."""
        ids, ptr = self._level_ids
        return [ids[a:b] for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist())]

    def packed_level_node_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """``level_node_ids`` as one array and the offsets of its depths
        (depth d at ``ids[ptr[d]:ptr[d + 1]]``), as the compiled passes read them."""
        return self._level_ids

    def distance(self, p, q) -> np.ndarray:
        """Distance between PEs, elementwise over arrays: O(depth) vector ops,
        no k x k matrix (inside a node with links, its small matrix).
        D(p, p) = 0."""
        if self._levels is not None and self._blocks is None:  # a uniform hierarchy: arithmetic, no gathers
            return self._uniform_distance(np.asarray(p, dtype=np.int64), np.asarray(q, dtype=np.int64))
        tree = self._dist_ext[self.lca(p, q)]
        if self._blocks is None:
            return tree
        p, q = np.broadcast_arrays(np.asarray(p, dtype=np.int64), np.asarray(q, dtype=np.int64))
        flat = np.broadcast_to(np.asarray(tree, dtype=np.float64), p.shape).reshape(-1)
        return self._blocks.adjust(flat, p.reshape(-1), q.reshape(-1)).reshape(p.shape)

    def _uniform_distance(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        """``distance`` on a uniform hierarchy: PEs p and q share their
        depth-d group when p // s == q // s (s: PEs per group), so the
        distance is the deepest shared group's, without the ancestor
        paths (at 2^24 PEs a random gather from 0.5 GB per level)."""
        sizes, dists = self._levels
        out = np.full(np.broadcast_shapes(p.shape, q.shape), dists[0])
        for size, dist in zip(sizes[1:], dists[1:]):
            out[p // size == q // size] = dist
        out[p == q] = 0.0
        return out

    def with_pe_cpus(self, cpus) -> "Topology":
        """This machine with ``cpus[p]`` (OS CPUs, or None) as the CPUs a
        rank on PE p is bound to: a trace whose ranks were each bound to
        several CPUs (a core's threads, an L3 for OpenMP) keeps them."""
        cpus = [None if c is None else tuple(int(x) for x in c) for c in cpus]
        if len(cpus) != self.n_pes:
            raise ValueError(f"{len(cpus)} CPU sets for {self.n_pes} PEs")
        out = copy.copy(self)
        out.pe_cpus = cpus
        return out

    @property
    def has_links(self) -> bool:
        """Whether some node's inside is a link matrix rather than a tree."""
        return self._blocks is not None

    def tree_only(self) -> "Topology":
        """This machine with every node's links replaced by the tree inside
        it: the approximation the tree constructions and the compiled
        refinement kernels work on (``self`` when there are no links)."""
        if self._blocks is None:
            return self
        approx = copy.copy(self)
        approx._blocks = None
        approx.node_links = {}
        approx.pe_link_node = np.full(self.n_pes, -1, dtype=np.int64)
        return approx

    def lca_depth(self, p, q) -> np.ndarray:
        return self._depth_ext[self.lca(p, q)]

    def pe_path(self, pe: int) -> np.ndarray:
        """Node ids from the root down to the leaf of ``pe``."""
        col = self._paths[:, pe]
        return col[col < self.n_nodes]

    def depth_of_pe(self) -> np.ndarray:
        return self.node_depth[self.leaf_of_pe]

    # ------------------------------------------------------------ description
    def level_arities(self) -> list[list[int]]:
        """Distinct arities of internal nodes per depth, from the root."""
        out = []
        for d in range(self.max_depth):
            nodes = np.flatnonzero(self.node_depth == d)
            ar = self.child_ptr[nodes + 1] - self.child_ptr[nodes]
            out.append(sorted(set(ar[ar > 0].tolist())))
        return out

    def level_kinds(self) -> list[str]:
        """The most common node kind at each depth, from the root (counted
        once: every report names the levels)."""
        if self._kinds is None:
            out = []
            for d in range(self.max_depth + 1):
                nodes = np.flatnonzero(self.node_depth == d)
                kinds = Counter(self.node_kind[n] for n in nodes.tolist())
                out.append(max(kinds, key=lambda k: (kinds[k], -list(kinds).index(k))))
            self._kinds = out
        return list(self._kinds)

    def uniform_hierarchy(self) -> tuple[list[int], list[float]] | None:
        """``(arities, distances)`` innermost first when this tree is a
        uniform hierarchy (all leaves at one depth, one arity and distance per
        level), else None."""
        if self._levels is not None and self._blocks is None:  # built by ``uniform``: from its group sizes
            sizes, dists = self._levels
            groups = list(sizes) + [1]
            return [groups[d] // groups[d + 1] for d in range(len(sizes))][::-1], [float(x) for x in dists][::-1]
        leaf_depth = self.depth_of_pe()
        if leaf_depth.min() != leaf_depth.max():
            return None
        arities, dists = [], []
        for d in range(self.max_depth):
            nodes = np.flatnonzero(self.node_depth == d)
            ar = np.unique(self.child_ptr[nodes + 1] - self.child_ptr[nodes])
            ds = np.unique(self.node_distance[nodes])
            if len(ar) != 1 or len(ds) != 1:
                return None
            arities.append(int(ar[0]))
            dists.append(float(ds[0]))
        return arities[::-1], dists[::-1]

    def hosts(self) -> list[str]:
        """Host names in PE order, without repeats."""
        if self._host_order is not None:  # ``uniform``: the hosts' PEs one after the other, as named
            return list(self._host_order)
        return list(dict.fromkeys(self.pe_host.tolist()))

    def host_ids(self) -> np.ndarray:
        """Each PE's host as its index in ``hosts()``."""
        ids: dict[str, int] = {}
        return np.fromiter((ids.setdefault(h, len(ids)) for h in self.pe_host.tolist()), dtype=np.int64,
                           count=self.n_pes)

    def slot_in_host(self) -> np.ndarray:
        """Index of each PE among the PEs of its host (the logical core number
        an Open MPI rankfile uses)."""
        host = self.host_ids()
        order = np.argsort(host, kind="stable")  # a host's PEs in PE order
        first = np.searchsorted(host[order], host[order])  # where each PE's host begins
        out = np.empty(self.n_pes, dtype=np.int64)
        out[order] = np.arange(self.n_pes) - first
        return out

    def __repr__(self) -> str:
        u = self.uniform_hierarchy()
        if u is not None:
            s, d = format_hierarchy(*u)
            return f"Topology(hierarchy={s!r}, distances={d!r}, n_pes={self.n_pes})"
        return f"Topology(n_pes={self.n_pes}, depth={self.max_depth}, irregular)"


def format_distance(x: float) -> str:
    """A distance as hierarchy strings write it: ``10``, or ``2.5``."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def format_hierarchy(arities, distances) -> tuple[str, str]:
    """``([4, 16], [1, 10])`` -> ``("4:16", "1:10")``, the inverse of ``hierarchy.parse_hierarchy``."""
    return ":".join(str(int(a)) for a in arities), ":".join(format_distance(d) for d in distances)


def core_slots(topology) -> np.ndarray:
    """Slot number of each PE as Open MPI's rankfile reads ``slot=N``: the
    logical index of its core among its host's cores (cores in tree order,
    which is hwloc's logical order for a whole node).  A PE with no core
    above it (hierarchy strings, meshes) is a core of its own."""
    if not isinstance(topology, Topology):  # a mesh: each PE its own core
        return topology.slot_in_host()
    kinds = topology.node_kind
    core_kind = {k: "core" in k.split("+") for k in set(kinds)}  # a few kinds, millions of nodes
    is_core = np.fromiter((core_kind[k] for k in kinds), dtype=bool, count=len(kinds))
    cur = topology.leaf_of_pe.copy()
    found = is_core[cur]
    for _ in range(topology.max_depth):
        move = ~found & (topology.parent[cur] >= 0)
        if not move.any():
            break
        cur[move] = topology.parent[cur[move]]
        found |= is_core[cur]
    unit = np.where(found, cur, topology.leaf_of_pe)
    # each PE's core among its host's cores in tree order (node ids follow it): sorted by (host, core),
    # a core's rank counts the cores before it on its host (one sort, not a pass over every PE per host)
    host = topology.host_ids()
    order = np.lexsort((unit, host))
    h, u = host[order], unit[order]
    new_host = np.r_[True, h[1:] != h[:-1]]
    rank = np.cumsum(new_host | np.r_[True, u[1:] != u[:-1]]) - 1
    out = np.empty(topology.n_pes, dtype=np.int64)
    out[order] = rank - np.maximum.accumulate(np.where(new_host, rank, 0))
    return out
