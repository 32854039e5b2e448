"""Scaling of multisection and swap refinement in the number of tasks.

n = 2^10 ... 2^max tasks of a 2-D periodic stencil (a generated mesh, degree
4) mapped one-to-one onto S = 4:16:(n/64), D = 1:10:100 with multisection
(KaHIP fast) and then swap refinement N_C^10, then with ``auto`` at a fixed
budget (``--auto-limit``: does it keep to it at every size, and how much
lower is its J than multisection + refinement).  The refinement runs once
per ``--threads`` count from the same start (``refine.parallel``: the same
mapping for any count, checked; the share of pairs run in parallel is
shown); ``--no-auto`` leaves out the auto columns.  Each size runs in a fresh
process so its peak memory (ru_maxrss) is its own.  Prints time per phase,
pairs evaluated per second (the refinement hot loop), peak memory after
multisection + refinement and after auto, and time / (n + m) to show
O(n + m) growth, and the multisection again in ``--workers`` processes
(same mapping, checked; not run with ``--workers 1``), and auto with 1
and ``--workers`` processes
(J over the given order's, whether the deadline cut it); saves a plot.

``--cli``: the command as a user runs it, one fresh process per run: the
stencil written as a METIS file, then ``rankmap map FILE --hierarchy
4:16:n/64 --distances 1:10:100 --time-limit L`` (L from ``--limit`` and
``--limit-at``): the whole process's wall time (interpreter start, reading
and the report included) and peak memory, its J over the given order's,
over the regular tiling's (8 x 8 tasks per node in 2 x 2 groups: 67 n) and
over ``--method multisection``'s (KaHIP eco, run up to ``--ms-max-log2``);
``--plot`` draws wall, J ratio and memory against n.

    python benchmarks/quality_scale.py --max-log2 14
    python benchmarks/quality_scale.py --min-log2 14 --max-log2 20 --step 3 --refine-pairs 16
    python benchmarks/quality_scale.py --min-log2 16 --max-log2 20 --step 2 --refine-pairs 32 --threads 1,2 --no-auto
    python benchmarks/quality_scale.py --cli --min-log2 10 --max-log2 24 --step 2 --limit 10 --limit-at 17:3,24:60
    python benchmarks/quality_scale.py --from benchmarks/results/quality_scale_cli.json --plot docs/img/scale.png
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def stencil_graph(log2n: int):
    """A 2-D periodic 5-point stencil of 2^log2n tasks, numbered in a random
    order (scrambled task ids: the mapping has work to do)."""
    import numpy as np
    import scipy.sparse as sp

    from rankmap.graph import CommGraph

    rows, cols = 2 ** (log2n // 2), 2 ** (log2n - log2n // 2)
    idx = np.arange(rows * cols).reshape(rows, cols)
    src = np.concatenate([idx.ravel(), idx.ravel()])
    dst = np.concatenate([np.roll(idx, -1, 1).ravel(), np.roll(idx, -1, 0).ravel()])
    a = sp.coo_array((np.ones(src.size), (src, dst)), shape=(idx.size,) * 2)
    return CommGraph(a + a.T).subgraph(np.random.default_rng(0).permutation(idx.size))


def write_stencil(log2n: int, path: str) -> None:
    """The scrambled stencil as a METIS file (no weights: B[u, v] = 1 each
    way), written in blocks of rows."""
    import numpy as np

    rows, cols = 2 ** (log2n // 2), 2 ** (log2n - log2n // 2)
    n = rows * cols
    perm = np.random.default_rng(0).permutation(n)  # the task on each grid cell
    idx = np.arange(n).reshape(rows, cols)
    nb = np.stack([np.roll(idx, 1, 1).ravel(), np.roll(idx, -1, 1).ravel(),
                   np.roll(idx, 1, 0).ravel(), np.roll(idx, -1, 0).ravel()], axis=1)
    cell_of = np.empty(n, dtype=np.int64)
    cell_of[perm] = np.arange(n)
    with open(path, "w") as fh:
        fh.write(f"{n} {2 * n}\n")
        for lo in range(0, n, 1 << 20):
            partners = np.sort(perm[nb[cell_of[lo:lo + (1 << 20)]]] + 1, axis=1)
            fh.write("\n".join(" ".join(r) for r in partners.astype(str).tolist()) + "\n")


def tiling_j(log2n: int) -> float:
    """J of the regular tiling on 4:16:n/64, 1:10:100: every node an 8 x 8
    block of the torus in 2 x 2 groups (16 edges to other nodes, 48
    between its groups, 64 inside them, each counted both ways)."""
    return 2 ** log2n / 64 * 2 * (16 * 100 + 48 * 10 + 64 * 1)


def cli_run(path: str, log2n: int, extra: list[str]) -> dict:
    """``rankmap map`` in a fresh process: wall time, peak RSS (its own,
    from wait4), J after and of the given order, whether the limit cut."""
    import os
    import re
    import tempfile

    cmd = [sys.executable, "-m", "rankmap", "map", path, "--hierarchy", f"4:16:{2 ** log2n // 64}",
           "--distances", "1:10:100", *extra]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryFile("w+") as out_file, tempfile.TemporaryFile("w+") as err_file:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out_file, stderr=err_file, text=True, env=env)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (peak RSS)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_file.seek(0)
        err_file.seek(0)
        out, err = out_file.read(), err_file.read()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed: {err.strip()}")
    given, j = (float(x) for x in re.search(r"J \(bytes x distance\)\s+(\S+)\s+(\S+)", out).groups())
    return {"wall_s": wall, "J": j, "J_given": given, "cut": "cut the search" in out,
            "peak_mb": usage.ru_maxrss / 1024}


def cli_rows(args) -> list[dict]:
    """One row per size of ``--cli`` (module docstring)."""
    import tempfile

    limits = dict((int(a), float(b)) for a, b in (x.split(":") for x in args.limit_at.split(",") if x))
    rows = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for k in range(args.min_log2, args.max_log2 + 1, args.step):
            path = str(Path(tmp) / f"stencil{k}.graph")
            write_stencil(k, path)
            limit = limits.get(k, args.limit)
            load = Path("/proc/loadavg").read_text().split()[0]
            row = {"log2n": k, "n": 2 ** k, "limit": limit, "load": load, "J_tiling": tiling_j(k),
                   "auto": cli_run(path, k, ["--time-limit", f"{limit:g}"])}
            if k <= args.ms_max_log2:
                row["multisection"] = cli_run(path, k, ["--method", "multisection"])
            rows.append(row)
            print_cli_row(row, flush=True)
            Path(path).unlink()
    return rows


def print_cli_row(r: dict, flush: bool = False) -> None:
    a, ms = r["auto"], r.get("multisection")
    vs_ms = f"{a['J'] / ms['J']:7.4f}" if ms else f"{'-':>7s}"
    ms_cell = f"{ms['wall_s']:8.1f} {ms['peak_mb']:7.0f}" if ms else f"{'-':>8s} {'-':>7s}"
    print(f"2^{r['log2n']:<3d} {r['limit']:5g} {r['load']:>5s} | {a['wall_s']:7.2f}{'*' if a['cut'] else ' '} "
          f"{a['peak_mb']:8.0f} {a['J'] / a['J_given']:8.4f} {a['J'] / r['J_tiling']:8.4f} {vs_ms} | {ms_cell}",
          flush=flush)


def print_cli_head() -> None:
    print(f"{'n':5s} {'L s':>5s} {'load':>5s} | {'wall s':>8s} {'peak MB':>8s} {'J/given':>8s} {'J/tiling':>8s} "
          f"{'J/J_ms':>7s} | {'ms wall':>8s} {'ms MB':>7s}")
    print("(auto: rankmap map --time-limit L, one process per run, * the limit cut the search; ms: --method "
          "multisection, KaHIP eco)")


def plot_cli(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [r["n"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    ax1.loglog(n, [r["auto"]["wall_s"] for r in rows], "o-", label="auto: wall (s)")
    ax1.loglog(n, [r["limit"] for r in rows], "k:", label="its --time-limit")
    ms = [r for r in rows if r.get("multisection")]
    ax1.loglog([r["n"] for r in ms], [r["multisection"]["wall_s"] for r in ms], "s-", label="multisection: wall (s)")
    ax1.loglog(n, [r["auto"]["peak_mb"] / 1000 for r in rows], "^--", label="auto: peak memory (GB)")
    ax1.set_xlabel("tasks n")
    ax1.legend(fontsize=7)
    ax2.semilogx(n, [r["auto"]["J"] / r["J_tiling"] for r in rows], "o-", label="auto J / regular tiling's")
    ax2.semilogx([r["n"] for r in ms], [r["multisection"]["J"] / r["J_tiling"] for r in ms], "s-",
                 label="multisection J / tiling's")
    ax2.semilogx(n, [r["auto"]["J_given"] / r["J_tiling"] / 5 for r in rows], "k:", label="given order / 5")
    ax2.set_xlabel("tasks n")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print("plot:", path)


def one_size(log2n: int, auto_limit: float, workers: int, refine_pairs: int | None = None,
             ms_levels: int | None = None, threads=(1,), auto: bool = True) -> dict:
    import numpy as np

    from rankmap.algorithms import map_tasks
    from rankmap.algorithms.refine.swaps import refine_swaps
    from rankmap.cost import mapping_cost
    from rankmap.topology.hierarchy import hierarchy_topology

    g = stencil_graph(log2n)
    n = g.n
    topo = hierarchy_topology([4, 16, n // 64], [1, 10, 100])
    t = time.perf_counter()
    levels = {} if ms_levels is None else {"levels": ms_levels}
    pe = map_tasks(g, topo, method="multisection", preset="fast", **levels).pe_of_task
    t_ms = time.perf_counter() - t
    t_par, same = None, True
    if workers > 1:
        t = time.perf_counter()  # the same multisection in worker processes (pool start included)
        same = np.array_equal(pe, map_tasks(g, topo, method="multisection", preset="fast", workers=workers,
                                            **levels).pe_of_task)
        t_par = time.perf_counter() - t
    limit = None if refine_pairs is None else refine_pairs * n
    refine_swaps(g, topo, pe, depth=10, max_evaluations=1, threads=1)  # load the compiled kernels: not timed
    runs, cpu = {}, {}
    for t in threads:
        c = time.process_time()
        runs[t] = refine_swaps(g, topo, pe, depth=10, max_evaluations=limit, threads=t)
        cpu[t] = time.process_time() - c
    refined, st = runs[threads[0]]
    peak_ms = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    j_given = mapping_cost(g, topo, np.arange(n))
    out = {"n": n, "m": int(g.symmetric.nnz), "multisection_s": t_ms, "refine_s": st.seconds,
           "parallel_s": t_par, "parallel_same": same, "peak_ms_mb": peak_ms,
           "passes": st.passes, "pairs": st.evaluated, "pairs_per_s": st.evaluated_per_s,
           "in_groups": st.in_groups / max(st.evaluated, 1),
           "threads": {t: {"refine_s": r.seconds, "cpu_s": cpu[t], "pairs_per_s": r.evaluated_per_s,
                           "same": bool(np.array_equal(p, refined) and r.j_end == st.j_end)}
                       for t, (p, r) in runs.items()},
           "gain": 1 - st.j_end / st.j_start, "ms_ref_j": st.j_end / j_given}
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if not auto:
        return out
    for key, procs in (("auto", 1), ("auto_par", workers)):
        t = time.perf_counter()
        m = map_tasks(g, topo, method="auto", time_limit=auto_limit, workers=procs)
        out[key + "_s"], out[key + "_cut"] = time.perf_counter() - t, m.deadline_hit
        out[key + "_j"] = mapping_cost(g, topo, m.pe_of_task) / j_given
    out["auto_gain"] = 1 - out["auto_j"] * j_given / st.j_end
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["children_peak_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--min-log2", type=int, default=10)
    ap.add_argument("--max-log2", type=int, default=16)
    ap.add_argument("--auto-limit", type=float, default=10.0, help="auto's --time-limit at every size")
    ap.add_argument("--step", type=int, default=1, help="log2 n grows by this much per row")
    ap.add_argument("--workers", type=int, default=2,
                    help="processes for the parallel multisection and auto columns")
    ap.add_argument("--refine-pairs", type=int, default=None,
                    help="stop the refinement after this many pairs per task (default: when a pass gains nothing)")
    ap.add_argument("--threads", default="1,2",
                    help="refinement threads, comma-separated: one refinement per count (the first one's in the "
                         "other columns)")
    ap.add_argument("--no-auto", action="store_true", help="leave out the auto columns")
    ap.add_argument("--ms-levels", type=int, default=None,
                    help="partition only the top N levels in the multisection columns (the given order below)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--plot", default="quality_scale.png")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--cli", action="store_true", help="time `rankmap map` as a user runs it (module docstring)")
    ap.add_argument("--limit", type=float, default=10.0, help="--cli: auto's --time-limit")
    ap.add_argument("--limit-at", default="", help="--cli: LOG2N:SECONDS,... limits for some sizes")
    ap.add_argument("--ms-max-log2", type=int, default=17, help="--cli: multisection up to this size")
    ap.add_argument("--tmp", default=None, help="--cli: where the graph files go (default: the system's)")
    ap.add_argument("--from", dest="from_", help="--cli rows from this --json file: table and --plot only")
    args = ap.parse_args(argv)
    if args.from_ or args.cli:
        print("load average:", Path("/proc/loadavg").read_text().strip())
        print_cli_head()
        if args.from_:
            rows = json.loads(Path(args.from_).read_text())
            for r in rows:
                print_cli_row(r)
        else:
            rows = cli_rows(args)
            print("load average:", Path("/proc/loadavg").read_text().strip())
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
        if args.plot:
            plot_cli(rows, args.plot)
        return 0
    threads = tuple(int(t) for t in args.threads.split(","))
    if args.one is not None:
        print(json.dumps(one_size(args.one, args.auto_limit, args.workers, args.refine_pairs, args.ms_levels,
                                  threads, not args.no_auto)))
        return 0
    print("load average:", Path("/proc/loadavg").read_text().strip())
    w = str(args.workers)
    per_t = "".join(f" {'refine x' + str(t) + ' s':>12} {'cpu s':>6} {'pairs/s x' + str(t):>11}" for t in threads)
    auto_head = (f" {'auto s':>7} {'J auto':>7} {'auto x' + w + ' s':>10} {'J auto x' + w:>10} {'vs ms+ref':>9}"
                 if not args.no_auto else "")
    print(f"{'n':>7} {'m':>8} {'multisect s':>11} {'x' + w + ' procs s':>11}{per_t} {'in groups':>9} "
          f"{'passes':>6} {'gain':>6} {'J ms+ref':>8} {'MB ms+ref':>9} {'us/(n+m)':>9}{auto_head} {'peak MB':>8}")
    print("(J: over the given order's; *: the deadline cut auto; !: the parallel mapping differs; "
          "in groups: share of the pairs run in parallel; cpu s: the process's CPU time in the refinement)")
    results = []
    for k in range(args.min_log2, args.max_log2 + 1, args.step):
        cmd = [sys.executable, __file__, "--one", str(k), "--auto-limit", str(args.auto_limit), "--workers", w,
               "--threads", args.threads] + (["--no-auto"] if args.no_auto else [])
        if args.refine_pairs is not None:
            cmd += ["--refine-pairs", str(args.refine_pairs)]
        if args.ms_levels is not None:
            cmd += ["--ms-levels", str(args.ms_levels)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        results.append(r)
        per = (r["multisection_s"] + r["refine_s"]) / (r["n"] + r["m"]) * 1e6
        same = "" if r["parallel_same"] else "!"  # ! = a different mapping: must not happen
        cols = "".join(f" {x['refine_s']:>11.2f}{'' if x['same'] else '!':1} {x['cpu_s']:>6.1f} {x['pairs_per_s']:>11.3g}"
                       for x in r["threads"].values())
        auto_cols = (f" {r['auto_s']:>6.2f}{'*' if r['auto_cut'] else ' '} {r['auto_j']:>7.4f} "
                     f"{r['auto_par_s']:>9.2f}{'*' if r['auto_par_cut'] else ' '} {r['auto_par_j']:>10.4f} "
                     f"{r['auto_gain'] * 100:>8.2f}%" if not args.no_auto else "")
        par = "-" if r["parallel_s"] is None else f"{r['parallel_s']:.2f}"
        print(f"{r['n']:>7} {r['m']:>8} {r['multisection_s']:>11.2f} {par:>10}{same:1}{cols} "
              f"{r['in_groups'] * 100:>8.1f}% {r['passes']:>6} {r['gain'] * 100:>5.1f}% {r['ms_ref_j']:>8.4f} "
              f"{r['peak_ms_mb']:>9.0f} {per:>9.1f}{auto_cols} {r['peak_mb']:>8.0f}", flush=True)
    print("load average:", Path("/proc/loadavg").read_text().strip())
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        n = [r["n"] for r in results]
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.loglog(n, [r["multisection_s"] for r in results], "o-", label="multisection (KaHIP fast)")
        ax.loglog(n, [r["refine_s"] for r in results], "s-", label="swap refinement N_C^10")
        for t in threads[1:]:
            ax.loglog(n, [r["threads"][str(t)]["refine_s"] for r in results], "s:", label=f"... on {t} threads")
        if not args.no_auto:
            ax.loglog(n, [r["auto_s"] for r in results], "d-", label=f"auto (--time-limit {args.auto_limit:g})")
        ax.loglog(n, [r["peak_mb"] / 1000 for r in results], "^--", label="peak memory (GB)")
        ax.set_xlabel("tasks n")
        ax.set_ylabel("seconds")
        ax.legend(fontsize=8)
        fig.tight_layout()
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.plot, dpi=120)
        print("plot:", args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
