"""Inputs shared by the mesh and bottleneck benchmarks.

- ``triangle_mesh`` / ``partition_with_coordinates``: the paper's own kind of
  workload (sec. VII: a CHARM++ unstructured-grid code, each task a part of
  a triangle mesh, its coordinates "the centroid for all triangles in a
  node"): a Delaunay triangulation of random points in the unit square (how
  the DIMACS ``delaunay_n*`` graphs are made, but with the points kept;
  optionally an L-shaped or disc domain), its triangles cut into n parts by KaHIP; bytes between two parts = the
  triangle edges they share (ghost exchange).
- ``maplib_traffic`` / ``maplib_mappings``: the 64-rank traffic of the
  *Mapping Matters* study (AMG, BT-MZ, CG, LULESH) and the mappings its
  tools wrote for a 4x4x4 mesh and torus.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import scipy.sparse as sp

from rankmap.graph import CommGraph

SHARED = os.environ.get("RANKMAP_SHARED", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared"))
if not os.path.isdir(SHARED):
    SHARED = "/work/shared"
DATA = os.path.join(SHARED, "data")
MAPLIB_TRAFFIC = os.path.join(DATA, "traffic", "maplib-mapping-matters")
MAPLIB_RESULTS = os.path.join(DATA, "results", "maplib-mapping-matters")
MAPLIB_APPS = ["amg", "btmz", "cg", "lulesh"]

DOMAINS = {
    "square": lambda p: np.ones(len(p), dtype=bool),
    "lshape": lambda p: (p[:, 0] < 0.5) | (p[:, 1] < 0.5),  # the unit square less a quadrant
    "disc": lambda p: np.hypot(p[:, 0] - 0.5, p[:, 1] - 0.5) < 0.5,
}


def triangle_mesh(n_points: int, seed: int = 0, domain: str = "square") -> tuple[sp.csr_array, np.ndarray]:
    """Dual graph of a Delaunay triangulation of ``n_points`` random points
    in the unit square (triangles adjacent across an edge) and the
    triangles' centroids; ``domain`` "lshape" or "disc" keeps only the
    triangles whose centroid lies in that shape."""
    from scipy.spatial import Delaunay

    pts = np.random.default_rng(seed).random((n_points, 2))
    tri = Delaunay(pts)
    centroid = pts[tri.simplices].mean(axis=1)
    keep_tri = DOMAINS[domain](centroid)
    new_id = np.cumsum(keep_tri) - 1
    nbr = tri.neighbors[keep_tri]  # -1 on the hull
    rows = np.repeat(np.arange(nbr.shape[0]), 3)
    cols = nbr.ravel()
    keep = cols >= 0
    keep[keep] = keep_tri[cols[keep]]
    m = nbr.shape[0]
    adj = sp.csr_array((np.ones(int(keep.sum())), (rows[keep], new_id[cols[keep]])), shape=(m, m))
    return adj, centroid[keep_tri]


def partition_with_coordinates(adj: sp.csr_array, xy: np.ndarray, n_blocks: int,
                               seed: int = 0) -> tuple[CommGraph, np.ndarray]:
    """``adj`` cut into ``n_blocks`` by KaHIP (fast, 3%): the n-task graph
    and each task's coordinates, the centroid of its elements."""
    block = _kaffpa_blocks(adj, n_blocks, seed)
    sizes = np.bincount(block, minlength=n_blocks)
    if (sizes == 0).any():
        raise ValueError(f"{n_blocks} parts of {adj.shape[0]} elements leave some empty: use a larger mesh")
    coords = np.stack([np.bincount(block, weights=xy[:, k], minlength=n_blocks) for k in range(xy.shape[1])],
                      axis=1) / sizes[:, None]
    return CommGraph(adj, name=f"triangles{adj.shape[0]}").quotient(block, n_blocks), coords


def _kaffpa_blocks(adj: sp.csr_array, n_blocks: int, seed: int) -> np.ndarray:
    import kahip

    xadj = adj.indptr.astype(np.int64).tolist()
    adjncy = adj.indices.astype(np.int64).tolist()
    _, blocks = kahip.kaffpa([1] * (len(xadj) - 1), xadj, [1] * len(adjncy), adjncy, n_blocks, 0.03, True,
                             seed, 0)
    return np.asarray(blocks, dtype=np.int64)


def maplib_traffic(app: str) -> CommGraph:
    """Bytes matrix (row = sender) of a Mapping Matters application."""
    path = os.path.join(MAPLIB_TRAFFIC, f"{app}CMatrices", "comm_matrix.p2p.size.csv")
    return CommGraph.from_dense(np.loadtxt(path, delimiter=","), name=app)


def maplib_mappings(app: str, topology: str) -> dict[str, np.ndarray]:
    """The Mapping Matters tools' mappings of ``app`` onto the 4x4x4
    ``topology`` ("mesh" or "torus"): name -> pe_of_task, PE = node id of
    (x, y, z) in C order (``MeshTopology`` numbering)."""
    out = {}
    pattern = os.path.join(MAPLIB_RESULTS, "size", f"{app}MAP{topology}", "Mapping.p2p.size.csv.*.4x4x4.csv")
    for path in sorted(glob.glob(pattern)):
        name = path.split(".csv.")[1].split(f".{topology}.")[0]
        with open(path, encoding="utf-8") as fh:  # a header line, then x y z count ranks...
            rows = [[int(v) for v in ln.split()] for ln in fh if ln.split() and ln.split()[0].isdigit()]
        pe = np.full(64, -1, dtype=np.int64)
        for x, y, z, count, *procs in rows:
            for p in procs[:count]:
                pe[p] = (x * 4 + y) * 4 + z
        if (pe < 0).any():
            raise ValueError(f"{path}: ranks {np.flatnonzero(pe < 0).tolist()} are not mapped")
        out[name] = pe
    return out


def maplib_reported_hops(app: str, topology: str) -> dict[str, float]:
    """Hops per byte as the Mapping Matters statistics give them:
    IeNPC_total / IeNLC_total (inter-node path bytes / inter-node bytes)."""
    import csv

    out = {}
    with open(os.path.join(MAPLIB_RESULTS, "DERIVED_summary_all_statistics.csv"), encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["app"] == app and row["topology"] == topology and row["matrix"] == "size":
                if row["IeNPC_total"] and row["IeNLC_total"] and row["WTAD"]:
                    out[row["algorithm"]] = float(row["IeNPC_total"]) / float(row["IeNLC_total"])
    return out
