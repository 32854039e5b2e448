"""Overhead of recording a compiled program (PMPI interposition): per call
and on a whole program, against the same program run without it.

    python benchmarks/pmpi_overhead.py [--jobs N] [--calls N] [--halo-ranks P] [--max-events N] [--json FILE]

1. per call, one rank: ``benchmarks/pmpi_overhead.c`` times each call form
   (CPU time of the calling thread, best of 15 rounds of 20000 calls) plain
   and under ``python -m rankmap.profile``; the difference is what the
   library adds per intercepted call (goal: at most 0.3 us).
2. 2 ranks: a ping-pong of 8 B, wall time per round trip (two intercepted
   sends on its critical path).
3. ``examples/halo2d.c`` on P ranks: the program's own loop time and the
   job's wall time (start-up: building nothing, the library is cached;
   the final merge), plain and profiled.

The profiled jobs log every call in the event log (``--max-events``,
default 2^24: room for all of them; the profiler's own default stops
logging at 2^18 events a rank, after which a call costs what it costs with
``--max-events 0``).  Plain and profiled jobs alternate (a change of machine load hits both
alike); each figure is the median and the best over ``--jobs`` jobs (on a
busy machine scheduling delays only add time: the best is what a call
costs when the ranks hold a core).  The programs are
built with the ``mpicc`` beside the ``mpiexec`` used (the mpich wheel's in
the virtual environment).  The load average, machine and date are printed
with the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from profile_overhead import loadavg, mpiexec  # noqa: E402  (the sibling benchmark's helpers)


def machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    return f"{platform.node()}, {cpu}, {os.cpu_count()} CPUs"


def build(tmp: Path) -> tuple[Path, Path]:
    mpicc = Path(mpiexec()).parent / "mpicc"
    out = []
    for source in (HERE / "pmpi_overhead.c", ROOT / "examples" / "halo2d.c"):
        exe = tmp / source.stem
        subprocess.run([str(mpicc), "-O2", "-o", str(exe), str(source)], check=True, timeout=300)
        out.append(exe)
    return out[0], out[1]


def job(n: int, program: Path, args: list[str], profiled: bool, tmp: Path,
        max_events: int = 0) -> tuple[str, float]:
    pre = [sys.executable, "-m", "rankmap.profile", "--no-topology", "--max-events", str(max_events),
           "-o", str(tmp / "b.rmtrace.npz")] if profiled else []
    t0 = time.perf_counter()
    proc = subprocess.run([mpiexec(), "-n", str(n), *pre, str(program), *args], capture_output=True,
                          text=True, timeout=600, cwd=tmp,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"failed: {program} {args}\n{proc.stderr[-2000:]}")
    return proc.stdout, wall


def cases(stdout: str) -> dict[str, float]:
    return {name: float(us) for name, us in (ln.rsplit("\t", 1) for ln in stdout.splitlines() if "\t" in ln)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=5, help="plain/profiled job pairs per case (default 5)")
    ap.add_argument("--calls", type=int, default=20000, help="calls per timed round (default 20000)")
    ap.add_argument("--halo-ranks", type=int, default=2, help="ranks of the halo program (default 2)")
    ap.add_argument("--halo-iters", type=int, default=20000, help="halo iterations (default 20000)")
    ap.add_argument("--max-events", type=int, default=1 << 24,
                    help="events each profiled rank logs (default 2^24: every call of the default runs; 0: no log)")
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    print(f"{time.strftime('%Y-%m-%d')}, {machine()}; profiled jobs log up to {a.max_events} events a rank")
    results: dict = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "command": " ".join(sys.argv),
                     "max_events": a.max_events}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        bench, halo = build(tmp)
        job(1, bench, ["100", "1"], True, tmp)  # builds (or finds) the library before anything is timed
        for label, n, program, args in (("per call", 1, bench, [str(a.calls), "15"]),
                                        ("ping-pong", 2, bench, [str(a.calls), "15"]),
                                        ("halo2d", a.halo_ranks, halo, [str(a.halo_iters), "64"])):
            load0 = loadavg()
            runs: dict = {"plain": [], "profiled": []}
            for _ in range(a.jobs):
                for kind in runs:
                    out, wall = job(n, program, args, kind == "profiled", tmp, a.max_events)
                    if label == "halo2d":
                        loops = [float(x) for x in re.findall(r"in ([0-9.]+) s", out)]
                        runs[kind].append({"loop s (slowest rank)": max(loops), "job wall s": wall})
                    else:
                        runs[kind].append(cases(out))
            rows = {case: [f(r[case] for r in runs[kind]) for kind in runs for f in (median, min)]
                    for case in runs["plain"][0]}
            unit = "s" if label == "halo2d" else "us"
            print(f"\n{label}: {n} rank(s), median / best of {a.jobs} jobs each (load {load0} -> {loadavg()})")
            print(f"{'case':<44}{'plain ' + unit:>18}{'profiled ' + unit:>20}{'added ' + unit:>18}")
            for case, (plain, plain_best, prof, prof_best) in rows.items():
                print(f"{case:<44}{plain:>10.4f} /{plain_best:>7.4f}{prof:>12.4f} /{prof_best:>7.4f}"
                      f"{prof - plain:>10.4f} /{prof_best - plain_best:>7.4f}")
            if label == "halo2d":
                calls = 4 * a.halo_iters  # Sendrecv per rank and iteration: 4
                plain, plain_best, prof, prof_best = rows["loop s (slowest rank)"]
                print(f"added loop time per intercepted call: {1e6 * (prof - plain) / calls:.3f} / "
                      f"{1e6 * (prof_best - plain_best) / calls:.3f} us (median / best)")
            if label == "ping-pong":
                print("a round trip has two intercepted sends on its critical path: added per call = added / 2")
            results[label] = {"ranks": n, "load": [load0, loadavg()], "unit": unit, "rows": rows,
                              "columns": ["plain median", "plain best", "profiled median", "profiled best"]}
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
