"""Does ``--time-limit`` hold?  Wall time of a mapping against its limit.

Instances: the quality set of ``quality_peers.py`` (Walshaw graphs cut into
n = 64 k blocks by KaHIP, seed 0, onto S = 4:16:k, D = 1:10:100, and the
64-rank traffic matrices of ../shared/data/traffic onto 4:16:1), and
real-application graphs at about 1000 ranks: model graphs of the same
applications cut into 1152 blocks onto 48-core nodes, S = 24:2:24,
D = 4:20:100 (``--apps``).  For every instance and limit L (``--limits``):

* ``cli``: wall time of ``rankmap map FILE --time-limit L --json`` in a fresh
  process (interpreter start, imports and reading the file included), its
  ratio to L, and whether it met the goal wall <= 1.1 L + 0.3 s;
* ``map_tasks``: wall time of ``map_tasks(..., time_limit=L)`` in this process
  and whether the deadline cut the search;
* ``J/J_work``: J of the deadline run over J of the same budget as a pure work
  limit (``work_limit=L``: the counted plan run to its end, no clock) with
  that run's wall time: what the deadline costs in quality.

Run it under load too: the deadline is meant to hold there.  ``--scramble
SEED`` numbers the tasks in a random order first (the given order of these
models is a recursive bisection, often auto's best start; a scrambled one is
what a launch that ignored the communication leaves), and ``J/given`` is the
command's J over the given order's.

    nice -n 10 python benchmarks/time_limits.py --size tiny --limits 0.5,2
    python benchmarks/time_limits.py --size small --apps 4 --limits 0.5,2,10
    python benchmarks/time_limits.py --size full --tasks 1024 --no-traffic --apps 0 --scramble 0 --cli-only --limits 0.5,1,1.5,2
    python benchmarks/time_limits.py --from all.json,cli.json --plot limits.png   # later files' columns win
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import math
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality_peers import DATA, SIZES, TRAFFIC, read_matrix, read_metis  # noqa: E402

from rankmap.algorithms import map_tasks  # noqa: E402
from rankmap.cost import mapping_cost  # noqa: E402
from rankmap.formats import write_graph  # noqa: E402
from rankmap.modelgen import model_graph  # noqa: E402
from rankmap.topology.hierarchy import hierarchy_topology  # noqa: E402

APPS = ["add32", "3elt", "uk", "whitaker3", "crack", "wing_nodal", "fe_4elt2", "vibrobox", "bcsstk29", "bcsstk33"]
APP_BLOCKS, APP_HIERARCHY, APP_DISTANCES = 1152, [24, 2, 24], [4.0, 20.0, 100.0]
GOAL_FACTOR, GOAL_SLACK = 1.1, 0.3


def instances(size: str, traffic: bool, apps: int):
    """(label, graph factory, arities, distances) of the instances to time."""
    graphs, ks = SIZES[size]
    out = []
    for name in graphs:
        path = (DATA / "graphs" / (name if "/" in name else f"walshaw/{name}")).with_suffix(".graph")
        for k in ks:
            out.append((f"{path.stem}/{64 * k}", lambda path=path, k=k: model_graph(read_metis(path), 64 * k, seed=0),
                        [4, 16, k], [1.0, 10.0, 100.0], 64 * k))
    if traffic:
        for rel in TRAFFIC:
            out.append((f"traffic:{Path(rel).parent.name.replace('CMatrices', '')}",
                        lambda rel=rel: read_matrix(DATA / "traffic" / rel), [4, 16, 1], [1.0, 10.0, 100.0], 64))
    for name in APPS[:apps]:
        path = DATA / "graphs" / "walshaw" / f"{name}.graph"
        out.append((f"app:{name}/{APP_BLOCKS}", lambda path=path: model_graph(read_metis(path), APP_BLOCKS, seed=0),
                    APP_HIERARCHY, APP_DISTANCES, APP_BLOCKS))
    return out


def cli_run(path: str, arities, distances, limit: float) -> tuple[float, dict]:
    """Wall time of ``rankmap map`` in a fresh process, and its JSON."""
    cmd = [sys.executable, "-m", "rankmap", "map", path, "--hierarchy", ":".join(map(str, arities)),
           "--distances", ":".join(f"{d:g}" for d in distances), "--time-limit", f"{limit:g}", "--json"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=max(600, 20 * limit))
    wall = time.perf_counter() - t
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    return wall, json.loads(proc.stdout)


def goal(limit: float) -> float:
    return GOAL_FACTOR * limit + GOAL_SLACK


def merged_rows(paths: list[str]) -> list[dict]:
    """Rows of --json files by (instance, limit); a later file's measured
    (not NaN) columns replace an earlier one's (a --cli-only rerun)."""
    rows: dict = {}
    for path in paths:
        for row in json.loads(Path(path).read_text()):
            old = rows.setdefault((row["instance"], row["limit"]), {})
            old.update({k: v for k, v in row.items() if not (isinstance(v, float) and math.isnan(v))})
    return list(rows.values())


def summarize(rows: list[dict]) -> None:
    """Per limit: rows within the goal for the command and for map_tasks, the
    largest ratios, and what the deadline cost in J against the counted plan."""
    print(f"{'L':>5s} {'rows':>5s} | {'cli ok':>7s} {'max /L':>7s} | {'map ok':>7s} {'max /L':>7s} | "
          f"{'J/J_work geomean':>16s} {'max':>7s} {'> 1.01':>6s}")
    for limit in sorted({r["limit"] for r in rows}):
        part = [r for r in rows if r["limit"] == limit]
        cli = [r["cli_s"] for r in part]
        maps = [r["map_s"] for r in part if not math.isnan(r.get("map_s", math.nan))]
        ratios = [r["J"] / r["J_work"] for r in part
                  if r.get("J_work") and not math.isnan(r["J_work"]) and not math.isnan(r["J"])]
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else math.nan
        print(f"{limit:5g} {len(part):5d} | {sum(c <= goal(limit) for c in cli):3d}/{len(cli):<3d} "
              f"{max(cli) / limit:7.2f} | {sum(m <= goal(limit) for m in maps):3d}/{len(maps):<3d} "
              f"{max(maps, default=math.nan) / limit:7.2f} | {geo:16.4f} {max(ratios, default=math.nan):7.4f} "
              f"{sum(x > 1.01 for x in ratios):6d}")
    for r in rows:
        if r["cli_s"] > goal(r["limit"]) or r.get("map_s", 0) > goal(r["limit"]):
            print(f"  over: {r['instance']} at L = {r['limit']:g}: rankmap map {r['cli_s']:.2f} s, "
                  f"map_tasks {r.get('map_s', math.nan):.2f} s")


def plot(rows: list[dict], path: str) -> None:
    """Wall time over the limit against the task count, one panel per limit,
    the goal as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    limits = sorted({r["limit"] for r in rows})
    fig, axes = plt.subplots(1, len(limits), figsize=(4.2 * len(limits), 3.6), sharey=True)
    for ax, limit in zip(list(axes) if len(limits) > 1 else [axes], limits):
        part = [r for r in rows if r["limit"] == limit]
        for key, label, marker in (("cli_s", "rankmap map (process)", "o"), ("map_s", "map_tasks", "x")):
            pts = [(r["n"], r[key] / limit) for r in part if not math.isnan(r.get(key, math.nan))]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, marker=marker, label=label, alpha=0.7)
        ax.axhline(goal(limit) / limit, color="red", lw=1, label="goal 1.1 L + 0.3 s")
        ax.set_xscale("log", base=2)
        ax.set_title(f"L = {limit:g} s")
        ax.set_xlabel("tasks")
    (axes[0] if len(limits) > 1 else axes).set_ylabel("wall time / L")
    (axes[0] if len(limits) > 1 else axes).legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="tiny", choices=list(SIZES), help="the quality set (quality_peers.py)")
    ap.add_argument("--no-traffic", action="store_true", help="leave out the 64-rank traffic matrices")
    ap.add_argument("--apps", type=int, default=2, help=f"application model graphs at {APP_BLOCKS} ranks (0-{len(APPS)})")
    ap.add_argument("--only-apps", action="store_true", help="only the application graphs")
    ap.add_argument("--limits", default="0.5,2,10", help="comma-separated time limits in seconds")
    ap.add_argument("--tasks", help="only the instances of these task counts (comma-separated, e.g. 2048)")
    ap.add_argument("--scramble", type=int, metavar="SEED",
                    help="number the tasks of every instance in a random order (this seed): a given order "
                         "without locality, as from a launch that ignored the communication")
    ap.add_argument("--no-work", action="store_true", help="skip the pure work-limit reference runs")
    ap.add_argument("--cli-only", action="store_true",
                    help="only the rankmap map column (no map_tasks or work-limit runs)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--from", dest="from_json", metavar="JSON[,JSON]",
                    help="summarise (and --plot) the rows of --json files instead of measuring")
    ap.add_argument("--plot", metavar="FILE", help="plot wall time / L against the task count")
    args = ap.parse_args(argv)
    if args.from_json:
        rows = merged_rows(args.from_json.split(","))
        summarize(rows)
        if args.plot:
            plot(rows, args.plot)
        return 0
    limits = [float(x) for x in args.limits.split(",")]
    todo = instances(args.size, not args.no_traffic, args.apps)
    if args.only_apps:
        todo = [i for i in todo if i[0].startswith("app:")]
    if args.tasks:
        todo = [i for i in todo if i[4] in {int(x) for x in args.tasks.split(",")}]
    print(f"# load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores; goal: wall <= {GOAL_FACTOR} L + {GOAL_SLACK} s")
    print(f"{'instance':24s} {'n':>5s} {'L':>5s} | {'cli s':>7s} {'/L':>5s} {'ok':>3s} {'hit':>3s} {'J/given':>7s} | "
          f"{'map s':>7s} {'/L':>5s} {'hit':>3s} | {'work s':>7s} {'J/J_work':>8s}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, make, arities, distances, k in todo:
            g = make()
            if args.scramble is not None:
                g = g.subgraph(np.random.default_rng(args.scramble).permutation(g.n))
            topo = hierarchy_topology(arities, distances)
            path = os.path.join(tmp, label.replace("/", "_").replace(":", "_") + ".graph")
            write_graph(g, path)
            for limit in limits:
                cli_wall, out = cli_run(path, arities, distances, limit)
                map_wall = j = work_wall = j_work = float("nan")
                map_hit = None
                if not args.cli_only:
                    t = time.perf_counter()
                    m = map_tasks(g, topo, method="auto", time_limit=limit)
                    map_wall, map_hit = time.perf_counter() - t, m.deadline_hit
                    j = mapping_cost(g, topo, m.pe_of_task)
                if not (args.no_work or args.cli_only):
                    t = time.perf_counter()
                    j_work = mapping_cost(g, topo, map_tasks(g, topo, method="auto", work_limit=limit).pe_of_task)
                    work_wall = time.perf_counter() - t
                ok = cli_wall <= GOAL_FACTOR * limit + GOAL_SLACK
                row = {"instance": label, "n": g.n, "limit": limit, "cli_s": cli_wall, "cli_ok": ok,
                       "cli_deadline_hit": out["deadline_hit"], "cli_J": out["J"],
                       "cli_J_given": out["J_identity"], "map_s": map_wall,
                       "map_deadline_hit": map_hit, "J": j, "work_s": work_wall, "J_work": j_work,
                       "load": os.getloadavg()[0]}
                rows.append(row)
                print(f"{label:24s} {g.n:5d} {limit:5g} | {cli_wall:7.2f} {cli_wall / limit:5.2f} "
                      f"{'yes' if ok else 'NO':>3s} {'y' if out['deadline_hit'] else '-':>3s} "
                      f"{out['J'] / out['J_identity']:7.4f} | "
                      f"{map_wall:7.2f} {map_wall / limit:5.2f} {'y' if map_hit else '-':>3s} | "
                      f"{work_wall:7.2f} {j / j_work:8.4f}", flush=True)
    met = sum(r["cli_ok"] for r in rows)
    worst = max((r["cli_s"] - r["limit"] for r in rows), default=0.0)
    print(f"# goal met {met}/{len(rows)}; largest overshoot of the CLI {worst:.2f} s; "
          f"load {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    summarize(rows)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
