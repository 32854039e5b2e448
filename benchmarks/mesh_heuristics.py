"""Bhatele & Kale's setting: irregular mesh-partition graphs on 2-D meshes
and 3-D tori, average hops per byte and time of every heuristic.

The workload is the paper's kind (sec. VII): a triangle mesh (Delaunay
triangulation of 65,536 random points in the unit square, ~131k triangles)
cut into n parts by KaHIP, bytes = triangle edges shared by two parts, each
task's coordinates the centroid of its triangles ("true" coordinates, what
AFFN and COCE use on 2-D meshes).  "identity" is the partitioner's part
numbering (the paper's default mapping).  The paper does not say where the
3-D coordinates of its 2-D mesh came from for the 3-D tori; we lay the
graph out in 3-D (``rankmap.layout``, its sec. V).  ``--coords layout``
uses the layout on 2-D meshes too (no true coordinates).  rankmap's own
method is ``mesh_auto``.  Also the nearest-free-node search: quadtree/octree
vs spiralling.

    python benchmarks/mesh_heuristics.py            # n = 256, 1024, 4096
    python benchmarks/mesh_heuristics.py --sizes 256,1024
    python benchmarks/mesh_heuristics.py --full     # adds n = 16384 (about an hour on 2 busy cores)
    python benchmarks/mesh_heuristics.py --ordering 5 --sizes 256,1024,4096,16384  # heuristics only, 5 partitions each
    python benchmarks/mesh_heuristics.py --ordering 3 --domain lshape   # an L-shaped domain (also: disc)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path[:0] = [os.path.dirname(__file__), os.path.join(os.path.dirname(__file__), "..")]  # this checkout

from mesh_common import DOMAINS, partition_with_coordinates, triangle_mesh  # noqa: E402

from rankmap.algorithms import map_tasks  # noqa: E402
from rankmap.algorithms.mesh.nearest import FreeNodeTree, SpiralSearch  # noqa: E402
from rankmap.cost import evaluate  # noqa: E402
from rankmap.layout import infer_coordinates  # noqa: E402
from rankmap.topology import MeshTopology  # noqa: E402

MESH_POINTS = 1 << 16  # ~2^17 triangles: 8 per part at 16,384 parts
HEURISTICS = ["bft", "mht", "affn", "coce", "coce_mht"]
METHODS = ["identity", "random", *HEURISTICS, "pairs", "curve", "mesh_bisect", "mesh_auto"]
MESH_2D = {256: (16, 16), 1024: (32, 32), 4096: (64, 64), 16384: (128, 128)}
ASPECTS = [(512, 2), (256, 4), (128, 8), (64, 16), (32, 32)]
TORUS_3D = {256: (8, 8, 4), 1024: (8, 16, 8), 4096: (16, 16, 16), 16384: (16, 32, 32)}
TORUS_3D_4CORES = {256: (4, 4, 4), 1024: (8, 8, 4), 4096: (8, 16, 8), 16384: (16, 16, 16)}


def run_row(graph, topo, coords, label, rows):
    res = {}
    for m in METHODS:
        t0 = time.perf_counter()
        opts = {"coords": coords} if m in ("affn", "coce", "coce_mht", "mesh_auto") else {}
        pe = map_tasks(graph, topo, method=m, **opts).pe_of_task
        res[m] = (evaluate(graph, topo, pe).hops_per_byte, time.perf_counter() - t0)
    rows.append((label, res))
    heur = {m: res[m][0] for m in HEURISTICS}
    pair = "mht" if res["mht"][0] <= res["coce_mht"][0] else "coce_mht"
    print(f"{label:<26}" + "".join(f"{res[m][0]:12.2f}" for m in METHODS)
          + f"  {min(heur, key=heur.get):>9} {pair:>9}")
    print(f"{'  seconds':<26}" + "".join(f"{res[m][1]:12.2f}" for m in METHODS)
          + f"  load {open('/proc/loadavg').read().split()[0]}", flush=True)


def header(title):
    print(f"\n{title}\n{'instance':<26}" + "".join(f"{m:>12}" for m in METHODS)
          + "  best heur  mht|coce_mht")


def search_timing(sides):
    """The paper's synthetic case: fill a 2-D mesh with the processors
    nearest (0, 0) and nearest the centre, one query per processor."""
    print("\nnearest free node: whole 2-D mesh taken in order of nearness, seconds")
    print(f"{'mesh':<10}{'from':<8}{'quadtree':>10}{'spiral':>10}")
    for side in sides:
        mesh = MeshTopology((side, side))
        for name, point in (("corner", (0, 0)), ("centre", (side // 2, side // 2))):
            times = []
            for cls in (FreeNodeTree, SpiralSearch):
                s = cls(mesh, np.ones(mesh.n_nodes, dtype=np.int64))
                t0 = time.perf_counter()
                for _ in range(mesh.n_nodes):
                    s.take(s.nearest(point))
                times.append(time.perf_counter() - t0)
            print(f"{side}x{side:<6}{name:<8}{times[0]:10.3f}{times[1]:10.3f}", flush=True)


def ordering_study(adj, xy, sizes, seeds: int) -> None:
    """How stable is the paper's ordering?  The five heuristics on the
    square 2-D meshes over ``seeds`` partitions (KaHIP seeds) of the same
    triangle mesh, with true and with layout coordinates: mean hops per
    byte and how often each heuristic is the best."""
    print(f"\nordering over {seeds} partition seeds, 2-D square meshes: mean hops per byte (times best)")
    print(f"{'n':<7}{'coords':<8}" + "".join(f"{m:>14}" for m in HEURISTICS))
    for n in sizes:
        hops = {c: [] for c in ("true", "layout")}
        for seed in range(seeds):
            g, centroids = partition_with_coordinates(adj, xy, n, seed=seed)
            for c, xyz in (("true", centroids), ("layout", infer_coordinates(g, 2))):
                topo = MeshTopology(MESH_2D[n])
                hops[c].append([evaluate(g, topo, map_tasks(g, topo, method=m, coords=xyz).pe_of_task).hops_per_byte
                                for m in HEURISTICS])
        for c, rows in hops.items():
            h = np.asarray(rows)
            wins = np.bincount(h.argmin(axis=1), minlength=len(HEURISTICS))
            print(f"{n:<7}{c:<8}" + "".join(f"{m:9.2f} ({w})" for m, w in zip(h.mean(axis=0), wins)), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="also n = 16384")
    ap.add_argument("--sizes", default="256,1024,4096", help="task counts (of 256, 1024, 4096, 16384)")
    ap.add_argument("--coords", choices=["true", "layout"], default="true",
                    help="task coordinates on 2-D meshes: part centroids or a graph layout")
    ap.add_argument("--parts", default="2d,aspect,tori",
                    help="which tables: 2d (square meshes), aspect (n=1024 aspect ratios), tori")
    ap.add_argument("--domain", choices=sorted(DOMAINS), default="square",
                    help="shape of the simulated domain (the triangle mesh)")
    ap.add_argument("--ordering", type=int, metavar="SEEDS", default=0,
                    help="only the ordering study: the heuristics over SEEDS partitions per size")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")] + ([16384] if args.full else [])
    parts = args.parts.split(",")
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
    adj, xy = triangle_mesh(MESH_POINTS, seed=0, domain=args.domain)
    if args.ordering:
        ordering_study(adj, xy, sizes, args.ordering)
        return
    graphs, coords = {}, {}
    for n in sizes:
        t0 = time.perf_counter()
        graphs[n], centroids = partition_with_coordinates(adj, xy, n, seed=0)
        t1 = time.perf_counter()
        coords[(n, 2)] = centroids if args.coords == "true" else infer_coordinates(graphs[n], 2)
        coords[(n, 3)] = infer_coordinates(graphs[n], 3) if "tori" in parts else None
        print(f"n={n}: {graphs[n]} partitioned in {t1 - t0:.1f}s, layouts {time.perf_counter() - t1:.1f}s")
    rows = []
    header("2-D meshes: average hops per byte")
    for n in sizes if "2d" in parts else []:
        run_row(graphs[n], MeshTopology(MESH_2D[n]), coords[(n, 2)], f"n={n} mesh {MESH_2D[n]}", rows)
    if 1024 in graphs and "aspect" in parts:
        header("n=1024 on 2-D meshes of different aspect ratios")
        for dims in ASPECTS:
            run_row(graphs[1024], MeshTopology(dims), coords[(1024, 2)], f"mesh {dims[0]}x{dims[1]}", rows)
    header("3-D tori, 1 and 4 cores per node")
    for n in sizes if "tori" in parts else []:
        run_row(graphs[n], MeshTopology(TORUS_3D[n], torus=True), coords[(n, 3)], f"n={n} torus {TORUS_3D[n]}", rows)
        nodes = TORUS_3D_4CORES[n]
        run_row(graphs[n], MeshTopology(nodes, torus=True, cores=4), coords[(n, 3)],
                f"n={n} torus {nodes} 4c", rows)
    print("\nseconds per method (same rows)")
    print(f"{'instance':<26}" + "".join(f"{m:>12}" for m in METHODS))
    for label, res in rows:
        print(f"{label:<26}" + "".join(f"{res[m][1]:12.2f}" for m in METHODS))
    search_timing([side for side in (32, 64, 128) if side == 32 or side * side <= max(sizes)])
    print(f"\nload average: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
