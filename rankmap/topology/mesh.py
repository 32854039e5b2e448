"""Mesh and torus machines (Blue Gene, Cray XT/XE, Tofu reduced to 3-D).

A mesh is not a tree, so it cannot be a ``Topology``; ``MeshTopology`` offers
the same oracle the algorithms and the cost model use (``n_pes``, vectorised
``distance``, ``pe_host``, ``hosts()``, ``slot_in_host()``) plus what a
network has that a tree does not: node coordinates, and the links a message
uses under dimension-ordered routing.

Nodes sit at the points of a ``dims[0] x dims[1] x ...`` grid, numbered in C
order (the last coordinate varies fastest); each node has ``cores`` PEs, and
PEs are numbered node-major: PE ``p`` is core ``p % cores`` of node
``p // cores``.  The distance of two PEs is the minimal hop count between
their nodes (with wrap-around in the torus dimensions), so J is the
hop-bytes metric of Bhatele & Kale.  Two PEs of one node are at
``intra_node_distance`` (default 0: a byte that stays in the node crosses no
network link, which is how the paper counts hops with several cores per
node); D(p, p) = 0 always.
"""

from __future__ import annotations

import re

import numpy as np

from ..limits import MAX_PES

#: pairs routed per vectorised batch, to bound memory on large instances
_ROUTE_CHUNK = 1 << 16


class MeshTopology:
    """A ``dims`` grid of nodes (torus in the dimensions where ``torus`` is
    true) with ``cores`` PEs per node.

    Links are directed (full duplex): link ``((dim * 2 + dir) * n_nodes +
    node)`` leaves ``node`` along ``dim`` in the + (``dir`` 0) or -
    (``dir`` 1) direction.  On a mesh the links that would leave the grid
    exist in the numbering but never carry bytes.
    """

    def __init__(self, dims, torus=False, cores: int = 1, intra_node_distance: float = 0.0):
        dims = tuple(int(d) for d in dims)
        if not dims or any(d < 1 for d in dims):
            raise ValueError(f"mesh dimensions must be positive integers, got {dims}")
        if isinstance(torus, (bool, np.bool_)):
            torus = (bool(torus),) * len(dims)
        torus = tuple(bool(t) for t in torus)
        if len(torus) != len(dims):
            raise ValueError(f"{len(dims)} mesh dimensions but {len(torus)} torus flags")
        if int(cores) < 1:
            raise ValueError(f"cores per node must be >= 1, got {cores}")
        if not intra_node_distance >= 0 or not np.isfinite(intra_node_distance):
            raise ValueError("intra-node distance must be finite and non-negative")
        if int(np.prod(dims, dtype=object)) * int(cores) > MAX_PES:
            raise ValueError(f"a {'x'.join(map(str, dims))} mesh with {cores} cores per node has "
                             f"more PEs than rankmap handles ({MAX_PES})")
        self.dims = dims
        self.torus = torus
        self.cores = int(cores)
        self.intra_node_distance = float(intra_node_distance)
        self.ndim = len(dims)
        self.n_nodes = int(np.prod(dims))
        self.n_pes = self.n_nodes * self.cores
        self.n_links = 2 * self.ndim * self.n_nodes
        self._dims_arr = np.asarray(dims, dtype=np.int64)
        self._wrap = np.asarray(torus, dtype=bool)
        nodes = np.arange(self.n_pes, dtype=np.int64) // self.cores
        self.pe_host = np.asarray([f"node{i}" for i in nodes.tolist()], dtype=object)
        self.pe_os_index = np.arange(self.n_pes, dtype=np.int64) % self.cores

    # ------------------------------------------------------------ coordinates
    def node_of_pe(self, pe) -> np.ndarray:
        return np.asarray(pe, dtype=np.int64) // self.cores

    def node_coords(self, node) -> np.ndarray:
        """Grid coordinates of node ids: shape ``(..., ndim)``."""
        node = np.asarray(node, dtype=np.int64)
        return np.stack(np.unravel_index(node, self.dims), axis=-1).astype(np.int64)

    def node_at(self, coords) -> np.ndarray:
        """Node id of grid coordinates ``(..., ndim)`` (wrapped on tori)."""
        c = np.asarray(coords, dtype=np.int64)
        c = np.where(self._wrap, c % self._dims_arr, c)
        return np.ravel_multi_index(tuple(np.moveaxis(c, -1, 0)), self.dims)

    def pe_coords(self, pe) -> np.ndarray:
        return self.node_coords(self.node_of_pe(pe))

    def ring_hops(self, a, b, dim: int) -> np.ndarray:
        """Hops from coordinate ``a`` to ``b`` along ``dim`` (minimal, with wrap-around on a torus)."""
        d = np.abs(np.asarray(b, dtype=np.int64) - np.asarray(a, dtype=np.int64))
        return np.minimum(d, self.dims[dim] - d) if self.torus[dim] else d

    # ----------------------------------------------------------------- oracle
    def node_distance(self, a, b) -> np.ndarray:
        """Hop count between nodes ``a`` and ``b`` (arrays)."""
        ca, cb = self.node_coords(a), self.node_coords(b)
        return sum(self.ring_hops(ca[..., k], cb[..., k], k) for k in range(self.ndim))

    def distance(self, p, q) -> np.ndarray:
        """Distance between PEs, elementwise: network hops between their
        nodes; ``intra_node_distance`` for two PEs of one node; 0 for p == q."""
        p = np.asarray(p, dtype=np.int64)
        q = np.asarray(q, dtype=np.int64)
        hops = self.node_distance(p // self.cores, q // self.cores).astype(np.float64)
        if self.intra_node_distance:
            hops = np.where((hops == 0) & (p != q), self.intra_node_distance, hops)
        return hops

    @property
    def diameter(self) -> int:
        return int(sum(d // 2 if t else d - 1 for d, t in zip(self.dims, self.torus)))

    def hosts(self) -> list[str]:
        """Host names in PE order, without repeats: ``node0``, ``node1``, ..."""
        return [f"node{i}" for i in range(self.n_nodes)]

    def slot_in_host(self) -> np.ndarray:
        """Index of each PE among the PEs of its node."""
        return np.arange(self.n_pes, dtype=np.int64) % self.cores

    # ---------------------------------------------------------------- routing
    def routes(self, src_pe, dst_pe) -> tuple[np.ndarray, np.ndarray]:
        """Dimension-ordered routes: ``(pair, link)`` arrays listing every
        link that pair ``i`` (``src_pe[i] -> dst_pe[i]``) crosses.  Dimension
        0 is corrected first, then 1, ...; on a torus ring the shorter way
        round is taken, the + direction on a tie."""
        src = np.asarray(src_pe, dtype=np.int64).ravel()
        dst = np.asarray(dst_pe, dtype=np.int64).ravel()
        pairs, links = [], []
        for lo in range(0, src.size, _ROUTE_CHUNK):
            p, l = self._routes_chunk(src[lo:lo + _ROUTE_CHUNK], dst[lo:lo + _ROUTE_CHUNK])
            pairs.append(p + lo)
            links.append(l)
        if not pairs:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(pairs), np.concatenate(links)

    def _routes_chunk(self, src, dst):
        cur = self.node_coords(src // self.cores)
        target = self.node_coords(dst // self.cores)
        pairs, links = [], []
        for k, d in enumerate(self.dims):
            a, b = cur[:, k], target[:, k]
            if self.torus[k]:
                fwd = (b - a) % d
                step = np.where(fwd <= d - fwd, 1, -1)
                length = np.minimum(fwd, d - fwd)
            else:
                step = np.where(b >= a, 1, -1)
                length = np.abs(b - a)
            total = int(length.sum())
            if total:
                idx = np.repeat(np.arange(src.size), length)
                offset = np.arange(total) - np.repeat(np.cumsum(length) - length, length)
                at = cur[idx].copy()
                at[:, k] = (a[idx] + step[idx] * offset) % d
                direction = (step[idx] < 0).astype(np.int64)
                node = np.ravel_multi_index(tuple(at.T), self.dims)
                pairs.append(idx)
                links.append((k * 2 + direction) * self.n_nodes + node)
            cur[:, k] = b
        if not pairs:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(pairs), np.concatenate(links)

    def link_loads(self, src_pe, dst_pe, w) -> np.ndarray:
        """Bytes over every directed network link (see the class docstring for
        the numbering) when pair i sends ``w[i]`` bytes along its route."""
        pair, link = self.routes(src_pe, dst_pe)
        return np.bincount(link, weights=np.asarray(w, dtype=np.float64)[pair],
                           minlength=self.n_links)

    def link_label(self, link: int) -> str:
        """Human-readable name of a link, e.g. ``node5 (1,1) -> +y``."""
        group, node = divmod(int(link), self.n_nodes)
        dim, direction = divmod(group, 2)
        axis = "xyzuvw"[dim] if dim < 6 else f"d{dim}"
        coords = ",".join(str(c) for c in self.node_coords(node).tolist())
        return f"node{node} ({coords}) -> {'-' if direction else '+'}{axis}"

    def traffic_breakdown(self, src_pe, dst_pe, w) -> tuple[list[dict], np.ndarray]:
        """For ``cost.evaluate``: bytes per level (same PE, same node,
        network) and the network hops of every pair."""
        p = np.asarray(src_pe, dtype=np.int64)
        q = np.asarray(dst_pe, dtype=np.int64)
        w = np.asarray(w, dtype=np.float64)
        hops = self.node_distance(p // self.cores, q // self.cores)
        same_pe = p == q
        same_node = (hops == 0) & ~same_pe
        levels = []
        if same_pe.any():
            levels.append({"depth": 2, "level": "same PE", "bytes": float(w[same_pe].sum()),
                           "distance": 0.0})
        if same_node.any():
            levels.append({"depth": 1, "level": "node", "bytes": float(w[same_node].sum()),
                           "distance": self.intra_node_distance})
        net = hops > 0
        if net.any():
            levels.append({"depth": 0, "level": "network", "bytes": float(w[net].sum()),
                           "distance": None})
        return levels, hops

    # ------------------------------------------------------------ description
    def spec(self) -> str:
        """The CLI description, e.g. ``torus 16x32x32 cores 4``."""
        kind = "torus" if all(self.torus) else "mesh" if not any(self.torus) else "mixed"
        text = f"{kind} {'x'.join(map(str, self.dims))}"
        if kind == "mixed":
            text += " torus " + "".join("1" if t else "0" for t in self.torus)
        return text + (f" cores {self.cores}" if self.cores > 1 else "")

    def __repr__(self) -> str:
        return (f"MeshTopology(dims={self.dims}, torus={self.torus}, cores={self.cores}, "
                f"n_pes={self.n_pes})")

    def __getattr__(self, name: str):
        # tree-only methods (treematch, multisection, greedy) reach for tree
        # attributes; say why instead of a bare AttributeError
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"MeshTopology has no attribute {name!r}: this method needs a tree topology; "
            "on a mesh or torus use bft, mht, affn, coce, coce_mht, pairs or mesh_auto")


_SPEC = re.compile(r"^\s*(\d+(?:\s*[x*]\s*\d+)*)\s*$")


def mesh_topology_from_spec(spec: str, torus: bool = False, cores: int = 1,
                            intra_node_distance: float = 0.0) -> MeshTopology:
    """``mesh_topology_from_spec("16x32x32", torus=True, cores=4)``: the
    grid as the CLI's ``--torus 16x32x32`` / ``--mesh 8x8`` write it."""
    m = _SPEC.match(str(spec))
    if not m:
        raise ValueError(f"mesh dimensions {spec!r}: expected sizes separated by 'x' (e.g. 8x8 or 16x32x32)")
    dims = [int(x) for x in re.split(r"\s*[x*]\s*", m.group(1).strip())]
    return MeshTopology(dims, torus=torus, cores=cores, intra_node_distance=intra_node_distance)
