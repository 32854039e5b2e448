"""How long does a small ``rankmap map`` take, start to end?

Wall and CPU (user + sys, from the child's resource usage) time of fresh
processes: the interpreter alone, ``import rankmap``, ``rankmap --help``,
the imports a mapping needs (numpy, scipy.sparse, highspy for the
exact splits), and ``rankmap map`` of a small graph with a cheap method and
with auto (``--work-limit 0.1``: a short counted search, the rest is fixed
cost).  Each row gives its first run and the median of the runs after it:
the kernels are compiled when the package is built, so the first run pays
nothing more than the next (rankmap's bytecode is compiled first, with
``compileall``, as ``pip install`` does).

Wall time is what it measures: under ``nice`` on a busy machine it measures
the scheduler, so run it at normal priority when the machine is quiet.

    python benchmarks/startup.py --repeat 5
    python benchmarks/startup.py --graph rankmap/data/btmz64.edges --topology rankmap/data/demo-cluster.txt
"""

from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRAPH = ROOT / "tests" / "data" / "graphs" / "delaunay_n10.graph"
MACHINE = ["--hierarchy", "4:16:16", "--distances", "1:10:100"]


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``cmd`` (in the timed tree: ``-m``
    imports from the working directory first)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=env["PYTHONPATH"].split(os.pathsep)[0],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode()
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed: {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime


def first_and_median(cmd, env, repeat: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """(wall, CPU) of the first run, and the medians of the ``repeat`` runs after it."""
    import statistics

    first = timed(cmd, env)
    runs = [timed(cmd, env) for _ in range(repeat)]
    return first, (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per row after the first (their median is reported)")
    ap.add_argument("--graph", default=str(GRAPH), help="the graph to map (default: delaunay_n10, 1024 tasks)")
    ap.add_argument("--root", default=str(ROOT), help="the tree whose rankmap/ is timed (default: this one)")
    ap.add_argument("--topology", help="a cluster or topology file instead of the 4:16:16 hierarchy")
    args = ap.parse_args(argv)
    compileall.compile_dir(str(Path(args.root) / "rankmap"), quiet=1)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([args.root, os.environ.get("PYTHONPATH", "")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    py = sys.executable
    machine = ["--topology", args.topology] if args.topology else MACHINE
    rankmap_map = [py, "-m", "rankmap", "map", args.graph, *machine, "-o", os.devnull]
    auto = [*rankmap_map, "--work-limit", "0.1"]  # a short counted search: the rest is fixed cost
    rows = [("python -c pass", [py, "-c", "pass"], env),
            ("import rankmap", [py, "-c", "import rankmap"], env),
            ("rankmap --help", [py, "-m", "rankmap", "--help"], env),
            ("import numpy", [py, "-c", "import numpy"], env),
            ("import numpy, scipy.sparse", [py, "-c", "import numpy, scipy.sparse"], env),
            ("import highspy", [py, "-c", "import highspy"], env),
            ("map --method identity", [*rankmap_map, "--method", "identity"], env),
            ("map --method greedy", [*rankmap_map, "--method", "greedy"], env),
            ("map auto --time-limit 0.5", [*rankmap_map, "--time-limit", "0.5"], env),
            ("map auto --time-limit 2", [*rankmap_map, "--time-limit", "2"], env),
            ("map auto --work-limit 0.1", auto, env)]
    print(f"# load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores; first run, then the median of "
          f"{args.repeat}; graph {Path(args.graph).name}; rankmap from {args.root}")
    print(f"{'command':34s} {'first wall':>10s} {'CPU':>6s} {'median wall':>11s} {'CPU':>6s}")
    for label, cmd, run_env in rows:
        (w1, c1), (w, c) = first_and_median(cmd, run_env, args.repeat)
        print(f"{label:34s} {w1:10.2f} {c1:6.2f} {w:11.2f} {c:6.2f}", flush=True)
    print(f"# load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
