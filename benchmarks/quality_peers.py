"""Mapping quality against the peers of the field, all in one run.

Standard instances (Schulz & Traff): each application graph of
../shared/data/graphs cut into n = 64 k blocks (model creation by KaHIP
fast recursive bisection, seed 0) is mapped one-to-one onto S = 4:16:k,
D = 1:10:100; plus the real 64-rank traffic matrices of ../shared/data/traffic
onto 4:16:1.  Every mapping is scored by rankmap's one J function.

Peers: Mt-KaHyPar's own mapping (``map_onto_graph``, Steiner-tree objective,
QUALITY preset, 1 thread; its target graph holds at most 64 nodes, so beyond
64 PEs it is used recursively: first onto the k hosts, then each host's
tasks onto its 64 PEs), Scotch static mapping (``gmap`` onto a ``tleaf``
target, installed with apt-get when missing), KaHIP partition + identity
(the model's own block order), TreeMatch (when registered), greedy
(Muller-Merbach), identity.  Where a peer returns a mapping that is not a
permutation, ``repair_balance`` makes it one and the table marks it with *.

Many-to-one (``--many``): the application graphs themselves onto 4:8:k with
eps = 3% (SharedMap's setting): rankmap auto vs Mt-KaHyPar and Scotch, J and
max load / L_max.

auto is scored for J alone (``--objective sum``, what the peers optimise);
``--objective time`` scores auto's own default, which keeps J within 1 % of
that and lowers the busiest link's time.

    python benchmarks/quality_peers.py --size small              # auto at its default budget
    python benchmarks/quality_peers.py --size small --time-limit 5 --also-limits 0.5,60
    python benchmarks/quality_peers.py --size full --jobs 8      # one process per graph, 8 at once
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rankmap.algorithms import METHODS, map_tasks  # noqa: E402
from rankmap.algorithms.construct.partition import integer_weights, mtkahypar_initializer, repair_balance  # noqa: E402
from rankmap.cost import mapping_cost  # noqa: E402
from rankmap.graph import CommGraph  # noqa: E402
from rankmap.mapping import balance_report  # noqa: E402
from rankmap.modelgen import model_graph  # noqa: E402
from rankmap.topology.hierarchy import hierarchy_topology, to_tleaf  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if not DATA.exists():
    DATA = Path("/work/shared/data")

SIZES = {  # graphs (walshaw unless a path) and k values
    "tiny": (["add20", "data"], [1, 2]),
    "small": (["add20", "data", "3elt", "uk", "add32", "whitaker3"], [1, 2, 4, 8]),
    "medium": (["add20", "data", "3elt", "uk", "add32", "bcsstk33", "whitaker3", "crack", "wing_nodal",
                "fe_4elt2", "vibrobox", "bcsstk29"], [1, 2, 4, 8, 16]),
    "full": (["add20", "data", "3elt", "uk", "add32", "bcsstk33", "whitaker3", "crack", "wing_nodal",
              "fe_4elt2", "vibrobox", "bcsstk29", "kahip-examples/delaunay_n15",
              "kahip-examples/rgg_n_2_15_s0"], [1, 2, 4, 8, 16, 32]),
}
TIED = 1.0005  # J within this factor of the best counts as tied
TRAFFIC = ["maplib-mapping-matters/amgCMatrices/comm_matrix.p2p.size.csv",
           "maplib-mapping-matters/btmzCMatrices/comm_matrix.p2p.size.csv",
           "maplib-mapping-matters/cgCMatrices/comm_matrix.p2p.size.csv",
           "maplib-mapping-matters/luleshCMatrices/comm_matrix.p2p.size.csv",
           "hwloc-netloc-scotch-test/app.mat"]


# ------------------------------------------------------------------ inputs
def graph_path(name: str) -> Path:
    """A graph of the set: a Walshaw name, or a path under graphs/ (kahip-examples/...)."""
    return (DATA / "graphs" / (name if "/" in name else f"walshaw/{name}")).with_suffix(".graph")


def read_metis(path: Path) -> CommGraph:
    """A METIS graph of the benchmark set (rankmap's reader)."""
    from rankmap.formats import read_graph

    return read_graph(str(path))


def read_matrix(path: Path) -> CommGraph:
    text = path.read_text().replace(",", " ")
    m = np.array([[float(x) for x in ln.split()] for ln in text.splitlines() if ln.strip()])
    g = CommGraph.from_dense(m)
    g.name = path.parent.name.replace("CMatrices", "") if path.suffix == ".csv" else path.stem
    return g


# ------------------------------------------------------------------ peers
def _complete_target(mtk, ctx, arities, distances):
    """Mt-KaHyPar target graph of a uniform hierarchy: the complete graph on
    its PEs weighted by D (an ultrametric, so shortest paths are D)."""
    topo = hierarchy_topology(arities, distances)
    k = topo.n_pes
    u, v = np.triu_indices(k, 1)
    d = topo.distance(u, v)
    return mtk.create_target_graph(ctx, k, u.size, list(zip(u.tolist(), v.tolist())),
                                   np.maximum(np.round(d), 1).astype(int).tolist())


def _mtk_map(graph: CommGraph, arities, distances, seed):
    import mtkahypar

    mtk = mtkahypar_initializer(1)
    k = int(np.prod(arities))
    ctx = mtk.context_from_preset(mtkahypar.PresetType.QUALITY)
    ctx.logging = False
    ctx.set_mapping_parameters(k, 0.0)
    sizes = np.bincount(np.arange(graph.n) * k // max(graph.n, 1), minlength=k)
    ctx.set_individual_target_block_weights(np.maximum(sizes, 1).tolist())
    mtkahypar.set_seed(seed)
    sym = graph.symmetric
    up = sp.triu(sym, k=1).tocoo()
    g = mtk.create_graph(ctx, graph.n, up.nnz, list(zip(up.row.tolist(), up.col.tolist())),
                         [1] * graph.n, integer_weights(up.data).tolist())
    part = np.asarray(g.map_onto_graph(_complete_target(mtk, ctx, arities, distances), ctx).get_partition())
    fixed = repair_balance(sym, np.ones(graph.n), part, sizes.astype(float))
    return fixed, int(np.count_nonzero(fixed != part))


def mtkahypar_peer(graph: CommGraph, arities, distances, seed=0):
    """Mt-KaHyPar mapping; recursive (hosts, then inside each host) beyond 64 PEs."""
    if int(np.prod(arities)) <= 64:
        return _mtk_map(graph, arities, distances, seed)
    inner = int(np.prod(arities[:-1]))
    host, fixes = _mtk_map(graph, [arities[-1]], [distances[-1]], seed)
    pe = np.empty(graph.n, dtype=np.int64)
    for h in range(arities[-1]):
        tasks = np.flatnonzero(host == h)
        sub, f = _mtk_map(graph.subgraph(tasks), arities[:-1], distances[:-1], seed)
        pe[tasks] = h * inner + sub
        fixes += f
    return pe, fixes


def scotch_binary():
    for name in ("scotch_gmap", "gmap"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def ensure_scotch() -> str | None:
    """Install Debian's scotch package when gmap is missing (root only)."""
    if scotch_binary() is None and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "-q", "scotch"], capture_output=True, timeout=600)
    return scotch_binary()


def scotch_peer(graph: CommGraph, arities, distances, eps=0.0, weights=None):
    """Scotch gmap onto a tleaf target; returns (pe_of_task, repaired count)."""
    sym = graph.symmetric
    ew = integer_weights(sym.data)
    vw = None if weights is None else integer_weights(weights)
    with tempfile.TemporaryDirectory() as tmp:
        grf, tgt, out = (os.path.join(tmp, f) for f in ("g.grf", "t.tgt", "m.map"))
        lines = ["0", f"{graph.n} {sym.nnz}", f"0 {'011' if vw is not None else '010'}"]
        for v in range(graph.n):
            lo, hi = sym.indptr[v], sym.indptr[v + 1]
            pairs = " ".join(f"{w} {u}" for w, u in zip(ew[lo:hi].tolist(), sym.indices[lo:hi].tolist()))
            lines.append((f"{vw[v]} " if vw is not None else "") + f"{hi - lo} {pairs}")
        Path(grf).write_text("\n".join(lines) + "\n")
        levels = [(a, int(d)) for a, d in zip(arities, distances) if a > 1]  # Scotch crashes on arity 1
        Path(tgt).write_text(to_tleaf([a for a, _ in levels], [d for _, d in levels]) + "\n")
        subprocess.run([scotch_binary(), f"-b{eps}", "-Cd", grf, tgt, out], check=True,
                       capture_output=True, timeout=600)
        rows = [ln.split() for ln in Path(out).read_text().splitlines()[1:]]
    pe = np.empty(graph.n, dtype=np.int64)
    for v, p in rows:
        pe[int(v)] = int(p)
    if weights is not None:
        return pe, 0
    fixed = repair_balance(sym, np.ones(graph.n), pe, np.ones(int(np.prod(arities))))
    return fixed, int(np.count_nonzero(fixed != pe))


# VieM and SharedMap are built from their public sources outside the repository
# (docs/results/peers.md); RANKMAP_PEERS_DIR names the folder
# holding VieM/ and SharedMap/.  A peer that is not built there is skipped.
PEERS_DIR = os.environ.get("RANKMAP_PEERS_DIR", "")
PEER_BINARIES = {"viem": ("VieM/deploy/viem", "VieM/build/viem"),
                 "sharedmap": ("SharedMap/build/SharedMap",)}


def peer_binary(name: str) -> str | None:
    """Path of a built peer under RANKMAP_PEERS_DIR, or None."""
    for rel in PEER_BINARIES[name]:
        path = Path(PEERS_DIR) / rel
        if PEERS_DIR and path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def _write_peer_graph(graph: CommGraph, path: str, weights=None) -> None:
    """METIS file of S = B + B^T with integer edge (and vertex) weights."""
    from rankmap.formats.metis import write_metis

    sym = graph.symmetric
    half = sp.csr_array((integer_weights(sym.data) * 0.5, sym.indices, sym.indptr), shape=sym.shape)
    vw = None if weights is None else integer_weights(weights).astype(float)
    write_metis(CommGraph(half, vertex_weights=vw), path)
    # the format field as three digits: SharedMap reads its 2nd and 3rd characters ("1" would
    # make it read edge weights as neighbours); KaHIP/VieM read it as a number either way
    text = Path(path).read_text().split("\n", 1)
    head = text[0].split()
    if len(head) > 2:
        head[2] = head[2].zfill(3)
        Path(path).write_text(" ".join(head) + "\n" + text[1])


def _run_peer(cmd: list[str], out: str, n: int) -> np.ndarray:
    subprocess.run(cmd, check=True, capture_output=True, timeout=3600)
    pe = np.loadtxt(out, dtype=np.int64, ndmin=1)
    if pe.shape != (n,):
        raise RuntimeError(f"{cmd[0]} wrote {pe.size} PEs for {n} tasks")
    return pe


def viem_peer(graph: CommGraph, arities, distances, seed=0, preset="eco"):
    """VieM (Schulz & Traff): top-down multisection with KaHIP ``preset`` plus
    N_C^10 swap refinement, its defaults; (pe_of_task, repaired count)."""
    hier = ":".join(str(int(a)) for a in arities)
    dist = ":".join(f"{d:g}" for d in distances)
    with tempfile.TemporaryDirectory() as tmp:
        g, out = os.path.join(tmp, "g.graph"), os.path.join(tmp, "perm")
        _write_peer_graph(graph, g)
        pe = _run_peer([peer_binary("viem"), g, f"--hierarchy_parameter_string={hier}",
                        f"--distance_parameter_string={dist}", f"--preconfiguration_mapping={preset}",
                        f"--seed={seed}", f"--output_filename={out}"], out, graph.n)
    fixed = repair_balance(graph.symmetric, np.ones(graph.n), pe, np.ones(int(np.prod(arities))))
    return fixed, int(np.count_nonzero(fixed != pe))


def sharedmap_peer(graph: CommGraph, arities, distances, config="strong", eps=0.0, weights=None, seed=0):
    """SharedMap (Woydt et al.) with ``config`` (strong: KaHIP strong /
    Mt-KaHyPar highest quality; eco), 1 thread; one-to-one with eps 0."""
    with tempfile.TemporaryDirectory() as tmp:
        g, out = os.path.join(tmp, "g.graph"), os.path.join(tmp, "map")
        _write_peer_graph(graph, g, weights)
        pe = _run_peer([peer_binary("sharedmap"), "-g", g, "-m", out, "-h", ":".join(str(int(a)) for a in arities),
                        "-d", ":".join(f"{d:g}" for d in distances), "-e", f"{eps:g}", "-c", config, "-t", "1",
                        "-s", "naive", "--seed", str(seed)], out, graph.n)
    if weights is not None:
        return pe, 0
    fixed = repair_balance(graph.symmetric, np.ones(graph.n), pe, np.ones(int(np.prod(arities))))
    return fixed, int(np.count_nonzero(fixed != pe))


def external_peers(seed: int) -> dict:
    """The built peers among VieM and SharedMap strong/eco (one-to-one)."""
    out = {}
    if peer_binary("viem"):
        out["viem"] = lambda g, t, a, d: viem_peer(g, a, d, seed)
    if peer_binary("sharedmap"):
        out["sm-strong"] = lambda g, t, a, d: sharedmap_peer(g, a, d, "strong", seed=seed)
        out["sm-eco"] = lambda g, t, a, d: sharedmap_peer(g, a, d, "eco", seed=seed)
    return out


# ------------------------------------------------------------------ runs
def record(args, row: dict) -> None:
    """Append one instance's results to ``--json`` as a JSON line, as soon as
    it is measured, so a long run's rows survive a cut."""
    if args.json:
        row["load"] = Path("/proc/loadavg").read_text().split()[:3]
        with open(args.json, "a") as f:
            f.write(json.dumps(row) + "\n")


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def one_to_one_methods(args, scotch):
    def ours(g, topo, arities, dists):
        return map_tasks(g, topo, method="auto", seed=args.seed, time_limit=args.time_limit,
                         objective=args.objective).pe_of_task, 0

    def ms(g, topo, arities, dists):
        return map_tasks(g, topo, method="multisection", seed=args.seed, preset="fast").pe_of_task, 0

    def auto_at(limit):
        return lambda g, topo, a, d: (map_tasks(g, topo, method="auto", seed=args.seed, time_limit=limit,
                                                objective=args.objective).pe_of_task, 0)

    peers = {"mtkahypar": lambda g, t, a, d: mtkahypar_peer(g, a, d, args.seed),
             "kahip+id": lambda g, t, a, d: (np.arange(g.n), 0),
             "greedy": lambda g, t, a, d: (map_tasks(g, t, method="greedy").pe_of_task, 0),
             "identity": lambda g, t, a, d: (np.arange(g.n), 0)}
    if scotch:
        peers["scotch"] = lambda g, t, a, d: scotch_peer(g, a, d)
    peers.update(external_peers(args.seed))
    if "treematch" in METHODS:
        peers["treematch"] = lambda g, t, a, d: (map_tasks(g, t, method="treematch").pe_of_task, 0)
    def multilevel(g, topo, arities, dists):
        return map_tasks(g, topo, method="multilevel", seed=args.seed).pe_of_task, 0

    extra = {f"auto@{limit:g}": auto_at(limit) for limit in args.also_limits}
    ours = {"auto": ours, **extra, "ms-fast": ms, "multilevel": multilevel}
    return ({k: v for k, v in ours.items() if k == "auto" or k not in args.skip},
            {k: v for k, v in peers.items() if k not in args.skip})


def warm_up(tools, instances):
    """One untimed run of every tool on the first instance and on the first of several nodes: imports
    and thread pools (Mt-KaHyPar's starts at auto's first cut between nodes) are once per process, so
    no row pays them (with one process per graph, every 128-task row did)."""
    firsts = instances[:1] + [inst for inst in instances if inst[2] > 1][:1]
    for _, make, k in dict.fromkeys(firsts):
        g = make()
        arities, dists = [4, 16, k], [1.0, 10.0, 100.0]
        for fn in tools.values():
            fn(g, hierarchy_topology(arities, dists), arities, dists)


def run_one_to_one(args, scotch):
    graphs, ks = SIZES[args.size]
    graphs = args.graphs or graphs
    ks = args.ks or ks
    ours, peers = one_to_one_methods(args, scotch)
    columns = list(ours) + (["auto-match"] if args.match else [])
    instances = []
    for name in ([] if args.only_traffic else graphs):
        path = graph_path(name)
        app = read_metis(path)
        for k in ks:
            if 64 * k <= app.n:
                instances.append((f"{path.stem}/{64 * k}", lambda app=app, k=k: model_graph(app, 64 * k, seed=0), k))
    if args.traffic or args.only_traffic:
        for rel in TRAFFIC:
            instances.append((f"traffic:{Path(rel).parent.name.replace('CMatrices', '')}",
                              lambda rel=rel: read_matrix(DATA / "traffic" / rel), 1))
    warm_up({**peers, **ours}, instances)
    rows = []
    for label, make, k in instances:
        g = make()
        arities, dists = [4, 16, k], [1.0, 10.0, 100.0]
        topo = hierarchy_topology(arities, dists)
        res = {}
        for name, fn in {**peers, **ours}.items():
            (pe, fixes), secs = timed(lambda fn=fn: fn(g, topo, arities, dists))
            res[name] = (mapping_cost(g, topo, pe), secs, fixes)
        if args.match:
            res["auto-match"] = time_to_match(args, g, topo, min(res[p][0] for p in peers), res["auto"])
        rows.append((label, g.n, res))
        print_row(label, g.n, res, list(peers), columns, flush=True)
        record(args, {"kind": "one-to-one", "instance": label, "n": g.n, "peers": list(peers),
                      "results": {m: {"J": float(j), "seconds": t, "repaired": bool(f)}
                                  for m, (j, t, f) in res.items() if m != "auto-match"}})
    return rows, list(peers), columns


def time_to_match(args, g, topo, best_peer_j, main_run, eps=None):
    """auto's time to reach the best peer's J: auto runs at each budget of
    ``args.match`` in turn (it is deterministic per budget) until its J ties
    or beats the best peer (<= 1.0005 x); (J, seconds, budget) of that run,
    or of the main run when no budget on the ladder gets there."""
    for limit in args.match:
        pe, secs = timed(lambda: map_tasks(g, topo, method="auto", seed=args.seed, eps=eps,
                                           time_limit=limit, objective=args.objective).pe_of_task)
        j = mapping_cost(g, topo, pe)
        if j <= TIED * best_peer_j:
            return j, secs, limit
    return main_run[0], main_run[1], args.time_limit


def reference_time(res, peers) -> float:
    """Time of the fastest mapping algorithm among the peers (identity and
    the model's own order take no time) within 2% of the best peer J; the
    best such algorithm's time when none is that close."""
    algos = [p for p in peers if p not in ("identity", "kahip+id")]
    best = min(res[p][0] for p in peers)
    close = [res[p][1] for p in algos if res[p][0] <= 1.02 * best]
    return min(close) if close else res[min(algos, key=lambda p: res[p][0])][1]


def _header(peers, ours):
    cols = " ".join(f"{p:>10}" for p in peers)
    viem = f" {'auto/viem t':>9} {'viem s':>8}" if "viem" in peers else ""
    return f"{'instance':<22}{'n':>6} {'best peer':>12} {cols} " + " ".join(
        f"{o + ' J':>10} {o + ' t':>9}" for o in ours) + viem


def print_row(label, n, res, peers, ours, flush=False):
    if not hasattr(print_row, "done"):
        print("J / best-peer J per method (* = peer result repaired into a permutation); ours also time / "
              "time of the fastest peer algorithm within 2% of the best peer J")
        print(_header(peers, ours))
        print_row.done = True
    best = min(res[p][0] for p in peers)
    ref_t = reference_time(res, peers)
    cells = " ".join(f"{res[p][0] / best:>9.3f}{'*' if res[p][2] else ' '}" for p in peers)
    ours_cells = " ".join(f"{res[o][0] / best:>10.3f} {res[o][1] / max(ref_t, 1e-6):>9.2f}" for o in ours)
    viem = f" {res['auto'][1] / max(res['viem'][1], 1e-6):>9.2f} {res['viem'][1]:>8.2f}" if "viem" in peers else ""
    print(f"{label:<22}{n:>6} {best:>12.4g} {cells} {ours_cells}{viem}", flush=flush)


def summarize(rows, peers, ours):
    print("\nsummary over", len(rows), "instances")
    if "auto-match" in ours:
        budgets = [res["auto-match"][2] for _, _, res in rows]
        print("auto-match: auto at the smallest budget of the ladder whose J ties or beats the best peer; "
              "budgets reached:", " ".join("default" if b is None else f"{b:g}" for b in budgets))
    if "viem" in peers:
        for o in ours:
            tv = [res[o][1] / max(res["viem"][1], 1e-6) for _, _, res in rows]
            tg = [t for t, (label, _, _) in zip(tv, rows) if not label.startswith("traffic:")]
            print(f"{o:>10}: geomean wall time / VieM's {math.exp(np.mean(np.log(tv))):.2f}"
                  + (f" (graph models alone {math.exp(np.mean(np.log(tg))):.2f})" if tg else ""))
    for o in ours + peers:
        ratios, tr = [], []
        for _, _, res in rows:
            best = min(res[p][0] for p in peers)
            ratios.append(res[o][0] / best if best > 0 else 1.0)
            tr.append(res[o][1] / max(reference_time(res, peers), 1e-6))
        r = np.asarray(ratios)
        print(f"{o:>10}: geomean J/best-peer {math.exp(np.mean(np.log(np.maximum(r, 1e-12)))):.4f}  "
              f"best-or-tied(<=1.0005) {np.mean(r <= TIED) * 100:5.1f}%  worst {r.max():.4f}  "
              f"geomean time/fastest-comparable-peer {math.exp(np.mean(np.log(np.maximum(tr, 1e-9)))):.2f}")


def plot(rows, peers, ours, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6, len(rows) * 0.45), 4))
    x = np.arange(len(rows))
    for i, m in enumerate(ours + peers):
        vals = [res[m][0] / min(res[p][0] for p in peers) for _, _, res in rows]
        ax.plot(x, vals, "o-" if m in ours else ".", label=m, lw=1.5 if m in ours else 0.6)
    ax.axhline(1.0, color="k", lw=0.5)
    ax.set_xticks(x, [r[0] for r in rows], rotation=70, fontsize=7)
    ax.set_ylabel("J / best peer J")
    ax.set_ylim(0.8, 1.6)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print("plot:", path)


def load_json_rows(paths: list[str]) -> list[dict]:
    """The one-to-one rows of ``--json`` files in order of first appearance.
    For an instance in several lines a later line's results win; a column
    it lacks (a peer that run skipped) is kept from the earlier line and
    listed in the row's ``carried``."""
    rows: dict[str, dict] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            new = json.loads(line)
            if new.get("kind") != "one-to-one":
                continue
            old = rows.get(new["instance"])
            if old is not None:
                kept = {m: r for m, r in old["results"].items() if m not in new["results"]}
                new["carried"] = sorted(kept)
                new["results"] = {**kept, **new["results"]}
                new["peers"] = [p for p in old["peers"] if p in new["results"]] + \
                    [p for p in new["peers"] if p not in old["peers"]]
            rows[new["instance"]] = new
    return list(rows.values())


def json_report(rows: list[dict], plot_path: str | None) -> None:
    """Markdown table of auto against the peers (J / best peer J; a value
    carried from an earlier run marked +), the summary against the goals of
    docs/results/quality-one-to-one.md, and the plot."""
    peers = [p for p in dict.fromkeys(p for r in rows for p in r["peers"]) if p != "identity"]
    print("| instance | n | best peer J | " + " | ".join(peers) + " | auto | auto s | VieM s | auto/VieM t | load |")
    print("|---|---:|---:|" + "---:|" * (len(peers) + 5))
    ratios, times = [], []
    for r in rows:
        res, carried = r["results"], set(r.get("carried", []))
        best = min(res[p]["J"] for p in r["peers"] if p in res)
        cells = [f"{res[p]['J'] / best:.3f}{'+' if p in carried else ''}" if p in res else "-" for p in peers]
        ratio = res["auto"]["J"] / best
        viem = res.get("viem", {}).get("seconds")
        t = res["auto"]["seconds"] / viem if viem and "viem" not in carried else None
        ratios.append(ratio)
        times.append(t)
        print(f"| {r['instance']} | {r['n']} | {best:.6g} | " + " | ".join(cells)
              + f" | **{ratio:.4f}** | {res['auto']['seconds']:.2f} | "
              + (f"{viem:.2f} | {t:.2f}" if t else "- | -") + f" | {float(r['load'][0]):.2f} |")
    r = np.asarray(ratios)
    tv = [t for t in times if t]
    worst = int(np.argmax(r))
    print(f"\n{len(rows)} rows: auto geomean J / best peer {math.exp(np.mean(np.log(r))):.4f}, best or tied "
          f"(<= {TIED}) {int(np.sum(r <= TIED))}, above 1.01 {int(np.sum(r > 1.01))}, worst {r[worst]:.4f} "
          f"({rows[worst]['instance']})" + (f", auto / VieM wall time geomean {math.exp(np.mean(np.log(tv))):.2f} "
                                            f"over {len(tv)} rows" if tv else ""))
    if plot_path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(max(6, len(rows) * 0.22), 4))
        ax.plot(np.arange(len(rows)), r, "o", ms=4, label="auto")
        ax.axhline(1.0, color="k", lw=0.5)
        for y in (1.01, 0.97):
            ax.axhline(y, color="grey", lw=0.8, ls="--")
        ax.set_xticks(np.arange(len(rows)), [x["instance"] for x in rows], rotation=80, fontsize=6)
        ax.set_ylabel("auto J / best peer J")
        fig.tight_layout()
        fig.savefig(plot_path, dpi=120)
        print("plot:", plot_path)


def run_many_to_one(args, scotch):
    """The application graphs themselves onto 4:8:k, eps = 3%: J of auto
    and of the peers (each peer counted as best even when it breaks L_max,
    marked !), max load / L_max, seconds; then the quality goals."""
    graphs, ks = SIZES[args.size]
    graphs = args.graphs or graphs
    ks = args.ks or ks
    print("\nmany-to-one: application graph onto 4:8:k, D = 1:10:100, eps = 3%: J / best peer J "
          "(max load / L_max, ! = above L_max), seconds")
    sharedmap = peer_binary("sharedmap") is not None
    names = ["auto", "multilevel", "mtkahypar"] + (["scotch"] if scotch else []) + (["sm-strong"] if sharedmap else [])
    names = [m for m in names if m == "auto" or m not in args.skip]
    ours = ("auto", "multilevel")
    print(f"{'instance':<14}{'n':>6} {'best peer J':>12} " + " ".join(f"{m:>26}" for m in names)
          + (f" {'auto-match budget, s':>26}" if args.match else ""))
    ratios, ml_ratios, times, match = [], [], [], []
    for name in graphs[:4]:
        app = read_metis(graph_path(name))
        for k in ks[:3]:
            arities, dists = [4, 8, k], [1.0, 10.0, 100.0]
            topo = hierarchy_topology(arities, dists)
            runs = {"auto": lambda: map_tasks(app, topo, method="auto", eps=0.03, seed=args.seed,
                                              time_limit=args.time_limit, objective=args.objective).pe_of_task,
                    "multilevel": lambda: map_tasks(app, topo, method="multilevel", eps=0.03, seed=args.seed).pe_of_task,
                    "mtkahypar": lambda: _mtk_many(app, arities, dists, args.seed)}
            if scotch:
                runs["scotch"] = lambda: scotch_peer(app, arities, dists, eps=0.03, weights=app.vertex_weights)[0]
            if sharedmap:  # its own balance rule is one unit looser on small blocks: checked against ours below
                runs["sm-strong"] = lambda: sharedmap_peer(app, arities, dists, "strong", eps=0.03,
                                                           weights=app.vertex_weights, seed=args.seed)[0]
            res = {m: timed(fn) for m, fn in runs.items() if m in names}
            js = {m: mapping_cost(app, topo, pe) for m, (pe, _) in res.items()}
            best = min(v for m, v in js.items() if m not in ours)
            cells = []
            for m in names:
                rep = balance_report(res[m][0], app.vertex_weights, topo.n_pes, 0.03)
                over = "!" if rep["max_load"] > rep["L_max"] else " "
                cells.append(f"{js[m] / best:>9.3f} ({rep['max_load'] / rep['L_max']:.3f}{over}) {res[m][1]:>6.2f}s")
            ratios.append(js["auto"] / best)
            if "multilevel" in js:
                ml_ratios.append(js["multilevel"] / best)
            fastest = min(res[m][1] for m in names if m not in ours)
            times.append(res["auto"][1] / fastest)
            if args.match:
                _, secs, limit = time_to_match(args, app, topo, best, (js["auto"], res["auto"][1]), eps=0.03)
                match.append((secs / fastest, limit))
                cells.append(f"{'default' if limit is None else f'{limit:g}':>7} {secs:>6.2f}s")
            print(f"{name + '/' + str(topo.n_pes):<14}{app.n:>6} {best:>12.6g} " + " ".join(f"{c:>26}" for c in cells),
                  flush=True)
            reports = {m: balance_report(res[m][0], app.vertex_weights, topo.n_pes, 0.03) for m in names}
            record(args, {"kind": "many-to-one", "instance": f"{name}/{topo.n_pes}", "n": app.n, "eps": 0.03,
                          "results": {m: {"J": float(js[m]), "seconds": res[m][1],
                                          "max_load": float(reports[m]["max_load"]),
                                          "L_max": float(reports[m]["L_max"])} for m in names}})
    r = np.asarray(ratios)
    print(f"auto many-to-one over {r.size} instances: geomean J/best-peer "
          f"{math.exp(np.mean(np.log(r))):.4f}  best-or-tied(<=1.0005) {np.mean(r <= TIED) * 100:.1f}%  "
          f"worst {r.max():.4f}  geomean time/fastest peer {math.exp(np.mean(np.log(times))):.2f}")
    if ml_ratios:  # not when --skip multilevel
        r = np.asarray(ml_ratios)
        print(f"multilevel many-to-one: geomean J/best-peer {math.exp(np.mean(np.log(r))):.4f}  "
              f"best-or-tied(<=1.0005) {np.mean(r <= TIED) * 100:.1f}%  worst {r.max():.4f}")
    if match:
        print(f"auto-match (smallest ladder budget whose J ties or beats the best peer): geomean time/fastest peer "
              f"{math.exp(np.mean(np.log([t for t, _ in match]))):.2f}; budgets "
              + " ".join("default" if b is None else f"{b:g}" for _, b in match))


def _mtk_many(app, arities, dists, seed):
    import mtkahypar

    mtk = mtkahypar_initializer(1)
    k = int(np.prod(arities))
    ctx = mtk.context_from_preset(mtkahypar.PresetType.QUALITY)
    ctx.logging = False
    ctx.set_mapping_parameters(k, 0.03)
    mtkahypar.set_seed(seed)
    up = sp.triu(app.symmetric, k=1).tocoo()
    g = mtk.create_graph(ctx, app.n, up.nnz, list(zip(up.row.tolist(), up.col.tolist())),
                         integer_weights(app.vertex_weights).tolist(), integer_weights(up.data).tolist())
    return np.asarray(g.map_onto_graph(_complete_target(mtk, ctx, arities, dists), ctx).get_partition())


def run_in_parallel(args) -> None:
    """``--jobs N``: one process per graph (and one for the traffic matrices), at most N at a time, each
    pinned to a CPU of its own, largest graphs first; each process times its rows as a run of its own
    (warm-up included), so the ratios stay same-process ones. The rows of all go to ``--json``, then
    the table and summary of ``--from``."""
    graphs = [] if args.only_traffic else \
        sorted(args.graphs or SIZES[args.size][0], key=lambda g: -graph_path(g).stat().st_size)
    shards = [(g, ["--graphs", g, "--no-traffic"]) for g in graphs] + \
        ([("traffic", ["--only-traffic"])] if args.traffic or args.only_traffic else [])
    common = ["--size", args.size, "--seed", str(args.seed), "--objective", args.objective, "--plot", "",
              "--match", ",".join(map(str, args.match)), "--skip", ",".join(sorted(args.skip))]
    common += ["--time-limit", str(args.time_limit)] if args.time_limit is not None else []
    common += ["--also-limits", ",".join(map(str, args.also_limits))] if args.also_limits else []
    common += ["--ks", ",".join(map(str, args.ks))] if args.ks else []
    cpus: queue.Queue = queue.Queue()
    for cpu in sorted(os.sched_getaffinity(0))[:args.jobs]:
        cpus.put(cpu)
    work = Path(tempfile.mkdtemp(prefix="quality_jobs_"))
    failed = []

    def run(shard):
        name, extra = shard
        out = work / (Path(name).name + ".jsonl")
        cpu = cpus.get()
        try:
            t = time.perf_counter()
            with open(out.with_suffix(".log"), "w") as log:
                rc = subprocess.run([sys.executable, __file__, *common, *extra, "--json", str(out)], stdout=log,
                                    stderr=subprocess.STDOUT, preexec_fn=lambda: os.sched_setaffinity(0, {cpu})).returncode
            print(f"{name}: {'done' if rc == 0 else f'exit {rc}, see ' + str(out.with_suffix('.log'))} on CPU {cpu} "
                  f"in {time.perf_counter() - t:.0f} s", flush=True)
            if rc:
                failed.append(name)
        finally:
            cpus.put(cpu)
        return out

    with ThreadPoolExecutor(args.jobs) as pool:
        parts = [p for p in pool.map(run, shards) if p.exists()]
    rows = load_json_rows([str(p) for p in parts])
    if args.json:
        with open(args.json, "a") as f:
            for part in parts:
                f.write(part.read_text())
    if not failed:  # the logs of failed processes stay for reading
        shutil.rmtree(work)
    if rows:
        json_report(rows, args.plot)
    else:
        print("no process wrote a row")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=list(SIZES), default="small")
    ap.add_argument("--time-limit", type=lambda v: None if v == "default" else float(v), default=None,
                    help="auto's budget per instance (s); default: auto's own default budget")
    ap.add_argument("--also-limits", type=lambda v: [float(x) for x in v.split(",") if x], default=[],
                    help="comma-separated further budgets for auto, one column each (e.g. 0.5,60: "
                         "a fast setting and a long near-optimal reference)")
    ap.add_argument("--match", type=lambda v: [float(x) for x in v.split(",") if x],
                    default=[0.01, 0.03, 0.1, 0.3, 1.0, 3.0],
                    help="budget ladder for the auto-match column: auto's time to tie or beat the best "
                         "peer J (the time-to-quality comparison); empty to skip")
    ap.add_argument("--ks", type=lambda v: [int(x) for x in v.split(",") if x], default=None,
                    help="k values of S = 4:16:k instead of the size's (e.g. 16,32: n = 1024, 2048)")
    ap.add_argument("--graphs", type=lambda v: [x for x in v.split(",") if x], default=None,
                    help="comma-separated graph names instead of the size's (a representative subset)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--objective", default="sum", choices=["sum", "time", "bottleneck"],
                    help="auto's objective: sum (default), J alone as the peers optimise it; time, "
                         "auto's own default (J within 1 %% of it, the busiest link lowered)")
    ap.add_argument("--no-traffic", dest="traffic", action="store_false")
    ap.add_argument("--many", action="store_true", help="also run the many-to-one comparison")
    ap.add_argument("--only-many", action="store_true", help="run only the many-to-one comparison")
    ap.add_argument("--only-traffic", action="store_true", help="one-to-one: only the traffic matrices")
    ap.add_argument("--jobs", type=int, default=1,
                    help="one-to-one: run the graphs in this many processes at once, each pinned to a CPU "
                         "(at most one per core; rows as in a run of their own)")
    ap.add_argument("--plot", default="quality_peers.png")
    ap.add_argument("--json", help="append every instance's results to this file as JSON lines as they come")
    ap.add_argument("--skip", type=lambda v: {x for x in v.split(",") if x}, default=set(),
                    help="comma-separated tools to leave out (ours or peers, not auto), e.g. multilevel,mtkahypar")
    ap.add_argument("--from", dest="from_json", type=lambda v: [x for x in v.split(",") if x],
                    metavar="JSONL[,JSONL]", help="no run: the one-to-one table, summary and plot (--plot) of "
                    "--json files; a later file's line for an instance wins, columns it lacks are kept (+)")
    args = ap.parse_args(argv)
    if args.from_json:
        json_report(load_json_rows(args.from_json), args.plot)
        return 0
    missing = [str(graph_path(g)) for g in args.graphs or [] if not graph_path(g).exists()]
    if missing:
        ap.error("no such graph file: " + ", ".join(missing))
    if args.jobs > 1 and (args.many or args.only_many):
        ap.error("--jobs runs the one-to-one set only: leave out --many / --only-many")
    print("load average:", Path("/proc/loadavg").read_text().strip())
    if args.jobs > 1:
        run_in_parallel(args)
        print("load average:", Path("/proc/loadavg").read_text().strip())
        return 0
    scotch = ensure_scotch()
    print("scotch:", scotch or "not installable here: Scotch skipped")
    for peer in PEER_BINARIES:
        print(f"{peer}:", peer_binary(peer) or "not built under RANKMAP_PEERS_DIR "
              f"({PEERS_DIR or 'unset'}): skipped (docs/results/peers.md says how to build it)")
    if not args.only_many:
        rows, peers, ours = run_one_to_one(args, scotch)
        summarize(rows, peers, ours)
        if args.plot:
            Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
            plot(rows, peers, ours, args.plot)
    if args.many or args.only_many:
        run_many_to_one(args, scotch)
    print("load average:", Path("/proc/loadavg").read_text().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
