"""The long fuzzing campaign over every reader (the families of
``tests/fuzz_inputs.py``; CI runs the same families with a small budget).

    python benchmarks/fuzz_readers.py --cases 100000 --seed 1 [--keep DIR] [--json OUT]
    python benchmarks/fuzz_readers.py --cases 2000 --families graph-mtx,hostfile

The cases are shared out by each family's weight; a family whose reader is
in C (OTF2) runs each case in its own process and gets ``--subprocess-cases``
at most, the rest going to the other families, so that ``--cases`` is the
number run in all.  Every case's outcome is counted: read (exit 0, and for generated
files exactly what was written), refused (exit 2 and one line naming the
input) or a problem (a traceback, a hang, another exit status, a second
line, an error naming no input, a numpy warning, a generated file read as
something else, or memory past ``--memory-gb``).  Problem cases are copied
under ``--keep`` with the command that replays them (and, for the families
of the whole-file scan, the block size it read in).  Prints one table row
per family, the date, the machine and its load; exits 1 when there was a
problem.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st  # noqa: E402

from tests.fuzz_inputs import SCANNED, Tally, check, check_subprocess, families  # noqa: E402


def run_family(family, cases: int, rng_seed: int, keep: Path | None) -> Tally:
    tally = Tally()
    run = check_subprocess if family.subprocess else check

    @seed(rng_seed)
    @settings(max_examples=cases, database=None, deadline=None, phases=(Phase.generate,),
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def fuzz(data):
        outcome, problem = run(family.make(data.draw), keep)
        tally.cases += 1
        if outcome == "read":
            tally.read += 1
        elif outcome == "refused":
            tally.refused += 1
        else:
            tally.problems.append(problem)

    fuzz()
    return tally


def shares(chosen, cases: int, subprocess_cases: int) -> dict[str, int]:
    """Cases per family name: by weight, families in their own processes
    capped at ``subprocess_cases``, the others sharing the rest (largest
    remainders first, so that the shares sum to ``cases``), one at least."""
    weight = sum(f.weight for f in chosen)
    out = {f.name: max(1, min(subprocess_cases, round(cases * f.weight / weight)))
           for f in chosen if f.subprocess}
    free = [f for f in chosen if not f.subprocess]
    left, free_weight = max(cases - sum(out.values()), 0), sum(f.weight for f in free)
    exact = {f.name: left * f.weight / free_weight for f in free}
    out.update({name: int(x) for name, x in exact.items()})
    rest = left - sum(out[name] for name in exact)
    for name in sorted(exact, key=lambda k: exact[k] % 1, reverse=True)[:rest]:
        out[name] += 1
    return {name: max(1, n) for name, n in out.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=100_000, help="cases in all (default 100000)")
    p.add_argument("--seed", type=int, default=1, help="hypothesis seed (default 1)")
    p.add_argument("--families", default="", help="comma-separated family names (default: all)")
    p.add_argument("--subprocess-cases", type=int, default=400,
                   help="at most this many cases for a family run in its own processes (OTF2)")
    p.add_argument("--keep", type=Path, default=None, help="copy problem cases here")
    p.add_argument("--json", type=Path, default=None, help="write the table as JSON here")
    p.add_argument("--memory-gb", type=float, default=4.0,
                   help="the process's data limit: a case that needs more fails with MemoryError, "
                        "a problem, instead of the machine's memory (default 4)")
    args = p.parse_args(argv)
    limit = int(args.memory_gb * (1 << 30))
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    chosen = [f for f in families() if not args.families or f.name in args.families.split(",")]
    share_of = shares(chosen, args.cases, args.subprocess_cases)
    started = time.time()
    load = os.getloadavg()
    rows = []
    print(f"# {datetime.now():%Y-%m-%d %H:%M}, {platform.node()}: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, load {load[0]:.1f}; python {platform.python_version()}")
    print(f"# {' '.join(['python', 'benchmarks/fuzz_readers.py', *(argv or sys.argv[1:])])}")
    print(f"{'family':<20} {'cases':>7} {'read':>7} {'refused':>8} {'problems':>9} {'seconds':>8}")
    for family in chosen:
        share = share_of[family.name]
        t0 = time.time()
        scanned = SCANNED.copy()
        tally = run_family(family, share, args.seed, args.keep)
        scanned = SCANNED - scanned
        row = {"family": family.name, "about": family.about, "cases": tally.cases,
               "read": tally.read, "refused": tally.refused, "problems": len(tally.problems),
               "seconds": round(time.time() - t0, 1), "first_problems": tally.problems[:3]}
        if scanned:  # files the whole-file scan read, and those it left to the line loop
            row["scan"] = {"read": scanned["read"], "line loop": scanned["fell back"]}
        rows.append(row)
        print(f"{family.name:<20} {row['cases']:>7} {row['read']:>7} {row['refused']:>8} "
              f"{row['problems']:>9} {row['seconds']:>8}", flush=True)
        if scanned:
            print(f"    the scan read {scanned['read']} files and left {scanned['fell back']} to the "
                  "line loop", flush=True)
        for problem in tally.problems[:3]:
            print("    " + problem[-600:].replace("\n", "\n    "), flush=True)
    total = {k: sum(r[k] for r in rows) for k in ("cases", "read", "refused", "problems")}
    print(f"{'all':<20} {total['cases']:>7} {total['read']:>7} {total['refused']:>8} "
          f"{total['problems']:>9} {time.time() - started:>8.0f}")
    end_load = os.getloadavg()
    print(f"# load at the end {end_load[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps({
            "date": f"{datetime.now():%Y-%m-%d}", "machine": platform.node(), "cpus": os.cpu_count(),
            "load": [round(load[0], 1), round(end_load[0], 1)], "seed": args.seed,
            "command": " ".join(["python", "benchmarks/fuzz_readers.py", *(argv or sys.argv[1:])]),
            "families": rows, "total": total}, indent=1) + "\n")
    return 1 if total["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
