"""How long does a small ``rankmap map`` take, start to end?

Wall and CPU (user + sys, from the child's resource usage) time of fresh
processes, the minimum of ``--repeat`` runs each: the interpreter alone, the
imports a mapping needs (numpy, scipy.sparse, numba), and ``rankmap map`` of
a small graph with a cheap method and with auto.  auto's fixed cost (a
short counted search, ``--work-limit 0.1``) is timed three ways:
with numba's cache warm; with an empty cache (``NUMBA_CACHE_DIR`` pointing at
a new directory: the first run after a fresh install, which compiles every
kernel it calls); and with a new cache that ``rankmap compile`` filled
first (a site's install step).

rankmap's own bytecode is compiled first (``compileall``), as ``pip install``
does: a tree run from sources with PYTHONDONTWRITEBYTECODE set would recompile
every module on every start.

Wall time is what it measures: under ``nice`` on a busy machine it measures
the scheduler, so run it at normal priority when the machine is quiet.

    python benchmarks/startup.py --repeat 5
    mkdir /tmp/main-tree && git -C ../main archive HEAD rankmap | tar -x -C /tmp/main-tree && \
        python benchmarks/startup.py --root /tmp/main-tree --no-cache-rows   # another version
"""

from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
import tempfile
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


def best(cmd, env, repeat: int) -> tuple[float, float]:
    runs = [timed(cmd, env) for _ in range(repeat)]
    return min(w for w, _ in runs), min(c for _, c in runs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per row (the minimum is reported)")
    ap.add_argument("--graph", default=str(GRAPH), help="the graph to map (default: delaunay_n10, 1024 tasks)")
    ap.add_argument("--root", default=str(ROOT), help="the tree whose rankmap/ is timed (default: this one)")
    ap.add_argument("--no-cache-rows", action="store_true", help="leave out the empty/filled numba cache rows")
    args = ap.parse_args(argv)
    compileall.compile_dir(str(Path(args.root) / "rankmap"), quiet=1)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([args.root, os.environ.get("PYTHONPATH", "")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    py = sys.executable
    rankmap_map = [py, "-m", "rankmap", "map", args.graph, *MACHINE, "-o", os.devnull]
    auto = [*rankmap_map, "--work-limit", "0.1"]  # a short counted search: the rest is fixed cost
    rows = [("python -c pass", [py, "-c", "pass"], env),
            ("import numpy", [py, "-c", "import numpy"], env),
            ("import numpy, scipy.sparse", [py, "-c", "import numpy, scipy.sparse"], env),
            ("import numpy, numba", [py, "-c", "import numpy, numba"], env),
            ("map --method identity", [*rankmap_map, "--method", "identity"], env),
            ("map --method greedy", [*rankmap_map, "--method", "greedy"], env),
            ("map auto --time-limit 0.5", [*rankmap_map, "--time-limit", "0.5"], env),
            ("map auto --time-limit 2", [*rankmap_map, "--time-limit", "2"], env),
            ("map auto --work-limit 0.1 (warm cache)", auto, env)]
    print(f"# load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores; min of {args.repeat} runs; "
          f"graph {Path(args.graph).name}; rankmap from {args.root}")
    print(f"{'command':44s} {'wall s':>7s} {'CPU s':>7s}")
    for label, cmd, run_env in rows:
        wall, cpu = best(cmd, run_env, args.repeat)
        print(f"{label:44s} {wall:7.2f} {cpu:7.2f}", flush=True)
    if args.no_cache_rows:
        return 0
    with tempfile.TemporaryDirectory() as cold, tempfile.TemporaryDirectory() as filled:
        wall, cpu = timed(auto, dict(env, NUMBA_CACHE_DIR=cold))
        print(f"{'map auto --work-limit 0.1 (empty cache)':44s} {wall:7.2f} {cpu:7.2f}", flush=True)
        filled_env = dict(env, NUMBA_CACHE_DIR=filled)
        wall, cpu = timed([py, "-m", "rankmap", "compile", "-q"], filled_env)
        print(f"{'rankmap compile (empty cache)':44s} {wall:7.2f} {cpu:7.2f}", flush=True)
        wall, cpu = timed(auto, filled_env)
        print(f"{'map auto --work-limit 0.1 (after compile)':44s} {wall:7.2f} {cpu:7.2f}", flush=True)
    print(f"# load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
