"""Dense and application-shaped communication graphs of 1000-4096 ranks:
does auto converge at its default budget where every rank has hundreds of
partners, and does it beat TreeMatch at small limits?

Graphs (generated here, seeded, natural rank order as a launch gives it):

* ``amg``: an algebraic multigrid's traffic on a 3-D process grid: the fine
  level's 26 neighbours, then coarse levels whose operators couple ranks
  within growing radii (2.5 and 4.5 grid steps), bytes 10x lower per level,
  each pair's bytes times a log-normal factor (sigma 1): 222 partners per
  rank on average at 1000 ranks (388 inside the grid), 278 at 4096.
* ``geo``: ranks at random points of the unit cube, each exchanging with
  its ``k`` nearest (200), bytes Pareto-distributed (alpha 1.5) and falling
  with the distance.
* ``npb-bt``, ``npb-mg``: the point-to-point patterns of the NAS Parallel
  Benchmarks BT and MG (MPI versions, class C) on 1024 ranks, from the
  codes' decompositions: BT's multi-partition on a 32 x 32 process torus,
  each rank exchanging faces with its x, y and anti-diagonal neighbours;
  MG's 16 x 8 x 8 process grid with face exchanges on every level of the
  V-cycle, partners at distance 1, 2, 4, 8 where a coarse level leaves
  fewer points than processes in a dimension, bytes by each level's faces.

Each tool runs in a fresh process (``rankmap map FILE --method M ... --json``,
its wall time from the outside): auto at its default budget, at
``--work-limit 60`` and at ``--time-limit`` L (``--limits``), and TreeMatch.
Machine: ``--hierarchy 24:2:N --distances 4:20:100`` (48-core nodes, N the
nodes the ranks need).

    nice -n 5 python benchmarks/app_graphs.py --graphs amg:1000,geo:1000 --limits 2
    python benchmarks/app_graphs.py --graphs npb-bt:1024,npb-mg:1024 --limits 0.5,1,2 --json app_graphs.json
    python benchmarks/app_graphs.py --from benchmarks/results/app_graphs.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rankmap.graph import CommGraph  # noqa: E402

CORES, SOCKETS, DISTANCES = 24, 2, "4:20:100"


def _pairs_to_graph(u, v, w, n: int) -> CommGraph:
    """Symmetric traffic: w bytes each way between u and v."""
    keep = u != v
    u, v, w = u[keep], v[keep], w[keep]
    return CommGraph.from_edges(np.concatenate([u, v]), np.concatenate([v, u]), np.concatenate([w, w]), n=n)


def _grid3(n: int) -> tuple[int, int, int]:
    """The most cubic a x b x c = n."""
    best = (n, 1, 1)
    for a in range(1, round(n ** (1 / 3)) + 2):
        if n % a:
            continue
        for b in range(a, round(math.sqrt(n // a)) + 2):
            if (n // a) % b == 0:
                c = n // a // b
                if max(a, b, c) - min(a, b, c) < max(best) - min(best):
                    best = (a, b, c)
    return best


def amg_graph(n: int, seed: int = 0) -> CommGraph:
    """AMG-like traffic (module docstring) on the most cubic grid of n ranks."""
    rng = np.random.default_rng(seed)
    dims = np.array(_grid3(n))
    coords = np.stack(np.unravel_index(np.arange(n), dims), axis=1)
    us, vs, ws = [], [], []
    for radius, nbytes in ((math.sqrt(3), 1e5), (2.5, 1e4), (4.5, 1e3)):
        r = int(radius)
        offsets = np.array([(x, y, z) for x in range(-r, r + 1) for y in range(-r, r + 1) for z in range(-r, r + 1)
                            if 0 < x * x + y * y + z * z <= radius * radius + 1e-9
                            and (x, y, z) > (0, 0, 0)])
        for off in offsets:
            other = coords + off
            ok = np.all((other >= 0) & (other < dims), axis=1)
            src = np.flatnonzero(ok)
            dst = np.ravel_multi_index(other[ok].T, dims)
            us.append(src)
            vs.append(dst)
            ws.append(nbytes * rng.lognormal(0.0, 1.0, src.size))
    return _pairs_to_graph(np.concatenate(us), np.concatenate(vs), np.round(np.concatenate(ws)), n)


def geometric_graph(n: int, k: int = 200, seed: int = 0) -> CommGraph:
    """``k`` nearest neighbours of random points, heavy-tailed bytes."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    pts = rng.random((n, 3))
    order = np.lexsort((pts[:, 2], pts[:, 1], np.floor(pts[:, 0] * 8)))  # a launch's order: slabs along x
    pts = pts[order]
    dist, idx = cKDTree(pts).query(pts, k + 1)
    u = np.repeat(np.arange(n), k)
    v = idx[:, 1:].ravel()
    scale = float(np.median(dist[:, 1:]))
    w = np.round(1e4 * (rng.pareto(1.5, u.size) + 1) * np.exp(-dist[:, 1:].ravel() / scale))
    lo, hi = np.minimum(u, v), np.maximum(u, v)  # one value per pair, the larger of the two draws
    key = lo * n + hi
    order = np.argsort(key, kind="stable")
    key, w = key[order], w[order]
    first = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    w = np.maximum.reduceat(w, first)
    key = key[first]
    return _pairs_to_graph(key // n, key % n, w, n)


def npb_bt_graph(n: int = 1024) -> CommGraph:
    """NPB BT's multi-partition on sqrt(n) x sqrt(n) ranks: faces to the x, y
    and anti-diagonal neighbours (copy_faces and the three solve sweeps
    send about the same per direction), class C: 162^3 points."""
    c = int(round(math.sqrt(n)))
    if c * c != n:
        raise ValueError("NPB BT runs on a square number of ranks")
    i, j = np.arange(n) % c, np.arange(n) // c
    cell = 162 / c  # points per cell edge
    face = 5 * 8 * cell * cell * c * 2  # 5 variables, doubles, c cells, two layers
    us, vs = [], []
    for di, dj in ((1, 0), (0, 1), (1, -1)):
        us.append(np.arange(n))
        vs.append((i + di) % c + c * ((j + dj) % c))
    u, v = np.concatenate(us), np.concatenate(vs)
    return _pairs_to_graph(u, v, np.full(u.size, round(face)), n)


def npb_mg_graph(n: int = 1024, size: int = 512) -> CommGraph:
    """NPB MG's face exchanges (comm3) on every level of its V-cycle, class
    C (512^3), on the process grid MG builds for n = 2^k ranks (x gets the
    extra factors of 2): where a level has fewer points than processes in a
    dimension, only every s-th process holds one and its partner is s away."""
    log = int(round(math.log2(n)))
    if 2 ** log != n:
        raise ValueError("NPB MG runs on a power of two ranks")
    dims = np.array([2 ** (log // 3 + (log % 3 > 0)), 2 ** (log // 3 + (log % 3 > 1)), 2 ** (log // 3)])
    coords = np.stack(np.unravel_index(np.arange(n), dims, order="F"), axis=1)
    us, vs, ws = [], [], []
    points = size
    while points >= 2:
        step = np.maximum(dims // points, 1)  # processes per point along each dimension
        local = np.maximum(points // dims, 1)
        active = np.all(coords % step == 0, axis=1)
        for axis in range(3):
            other = coords.copy()
            other[:, axis] = (other[:, axis] + step[axis]) % dims[axis]
            dst = np.ravel_multi_index(other.T, dims, order="F")
            face = 8.0 * np.prod(np.delete(local, axis)) * 4  # doubles, a few exchanges per level and cycle
            src = np.flatnonzero(active & (dst != np.arange(n)))
            us.append(src)
            vs.append(dst[src])
            ws.append(np.full(src.size, face))
        points //= 2
    return _pairs_to_graph(np.concatenate(us), np.concatenate(vs), np.concatenate(ws), n)


GENERATORS = {"amg": amg_graph, "geo": geometric_graph, "npb-bt": lambda n, seed=0: npb_bt_graph(n),
              "npb-mg": lambda n, seed=0: npb_mg_graph(n)}


def machine(n: int) -> str:
    return f"{CORES}:{SOCKETS}:{-(-n // (CORES * SOCKETS))}"


def run(path: str, n: int, args: list[str], timeout: float = 3600) -> dict:
    """``rankmap map`` in a fresh process: its JSON plus the wall time."""
    cmd = [sys.executable, "-m", "rankmap", "map", path, "--hierarchy", machine(n), "--distances", DISTANCES,
           "--json", *args]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    wall = time.perf_counter() - t
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    out = json.loads(proc.stdout)
    return {"J": out["J"], "wall_s": wall, "cut": out["deadline_hit"]}


def measure(name: str, n: int, limits: list[float], skip: set) -> dict:
    from rankmap.formats import write_graph

    kind, _, seed = name.partition("@")
    g = GENERATORS[kind](n, seed=int(seed or 0))
    partners = np.diff(g.symmetric.indptr)
    row = {"instance": f"{name}:{n}", "n": n, "machine": machine(n), "partners_mean": float(partners.mean()),
           "partners_max": int(partners.max())}
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / f"{kind}.edges")
        write_graph(g, path)
        row["given_J"] = run(path, n, ["--method", "identity"])["J"]
        runs = {"treematch": ["--method", "treematch"], "auto": [], "auto_work60": ["--work-limit", "60"]}
        runs.update({f"auto_L{limit:g}": ["--time-limit", f"{limit:g}"] for limit in limits})
        for key, extra in runs.items():
            if key not in skip:
                row[key] = run(path, n, extra)
                print(f"  {row['instance']:16s} {key:12s} J {row[key]['J']:.6g}  {row[key]['wall_s']:7.2f} s",
                      flush=True)
    return row


def table(rows: list[dict]) -> None:
    limits = sorted({k for r in rows for k in r if k.startswith("auto_L")}, key=lambda k: float(k[6:]))
    head = " ".join(f"{'auto ' + k[5:]:>16s}" for k in limits)
    print(f"{'instance':16s} {'partners':>8s} {'TreeMatch J, s':>18s} {'auto default':>16s} {'work 60':>16s} "
          f"{head}   (J over TreeMatch's, wall s)")
    for r in rows:
        tm = r.get("treematch")
        def cell(key):
            x = r.get(key)
            if not x or not tm:
                return f"{'-':>16s}"
            return f"{x['J'] / tm['J']:>8.4f} {x['wall_s']:6.1f}s "
        tm_cell = f"{tm['J']:>10.4g} {tm['wall_s']:6.1f}s" if tm else f"{'-':>18s}"
        print(f"{r['instance']:16s} {r['partners_mean']:8.0f} {tm_cell} {cell('auto')} {cell('auto_work60')} "
              + " ".join(cell(k) for k in limits))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", default="amg:1000,geo:1000,amg:4096,geo:4096,npb-bt:1024,npb-mg:1024",
                    help="KIND[@SEED]:N, comma-separated (kinds: " + ", ".join(GENERATORS) + ")")
    ap.add_argument("--limits", default="2", help="auto --time-limit values, comma-separated")
    ap.add_argument("--skip", default="", help="runs to leave out: treematch, auto, auto_work60, auto_L2, ...")
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--from", dest="from_", help="print the table of a --json file")
    args = ap.parse_args(argv)
    if args.from_:
        table(json.loads(Path(args.from_).read_text()))
        return 0
    print("load average:", Path("/proc/loadavg").read_text().strip())
    limits = [float(x) for x in args.limits.split(",") if x]
    rows = []
    for spec in args.graphs.split(","):
        name, _, n = spec.rpartition(":")
        rows.append(measure(name, int(n), limits, set(filter(None, args.skip.split(",")))))
    print("load average:", Path("/proc/loadavg").read_text().strip())
    table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
