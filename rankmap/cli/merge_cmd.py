"""Merge the per-rank part files of a profiled run into one trace.

A run that finished merges itself; one that died leaves
``TRACE.rmtrace.npz.parts/``.  Give that directory (or part files).  Every
rank writes a finished marker (status ``complete``) at its end; merge names
the ranks with no part file and the ranks without a finished marker, with the
time their data stops at (their last flush: a rank killed unawares lost what
it sent after it).  ``--strict`` fails (exit 2) on such a merge and on one
that holds no traffic at all.
"""

from __future__ import annotations

import time
from pathlib import Path

from . import UserError

NAME = "merge"
HELP = "merge per-rank trace parts (from a run that died) into one trace"
ORDER = 41


def add_arguments(p) -> None:
    p.add_argument("parts", nargs="+", help="a .parts directory, part files, or traces of disjoint ranks")
    p.add_argument("-o", "--output", help="merged trace (default: the directory name without .parts)")
    p.add_argument("--strict", action="store_true",
                   help="fail (exit 2) when a rank is missing or did not finish, or nothing was recorded")


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 10) % 10}"


def unfinished_report(trace) -> list[str]:
    """One line per group of ranks without a finished marker: their status
    and when their data stops, earliest first (the rank that died first
    leads)."""
    from ..trace import UNFINISHED

    start = min((i.t_start for i in trace.info.values()), default=0.0)
    late = sorted((i.t_end, r, i.status) for r, i in trace.info.items() if i.status != "complete")
    lines = []
    for t_end, r, status in late[:20]:
        why = "killed unawares" if status in UNFINISHED else status
        lines.append(f"  rank {r}: no finished marker ({why}); its data stops at {_clock(t_end)} "
                     f"({t_end - start:.1f} s after the start)")
    if len(late) > 20:
        lines.append(f"  ... and {len(late) - 20} more ranks")
    return lines


def run(args) -> int:
    from ..trace import PARTS_SUFFIX, SUFFIX, merge_traces, missing_report, read_trace

    traces = [read_trace(p, warn_missing=False) for p in args.parts]
    merged = merge_traces(traces)
    first = Path(args.parts[0])
    if args.output:
        out = Path(args.output)
    elif first.is_dir() and first.name.endswith(PARTS_SUFFIX):
        out = first.with_name(first.name.removesuffix(PARTS_SUFFIX))
    else:
        out = Path("merged" + SUFFIX)
    merged.source = str(out)
    merged.write(out)
    print(f"merged {len(merged.ranks)} of {merged.nranks} ranks into {out}")
    unfinished = unfinished_report(merged)
    if unfinished:
        count = sum(s != "complete" for s in merged.status if s is not None)
        print(f"{count} ranks did not finish:")
        print("\n".join(unfinished))
    problems = []
    if len(merged.missing_ranks):
        print("WARNING: " + missing_report(merged))
        problems.append(f"{len(merged.missing_ranks)} ranks missing")
    if unfinished:
        problems.append(f"{count} ranks did not finish")
    if not any(merged.edges[k]["src"].size for k in merged.edges):
        problems.append("no traffic recorded")
    if args.strict and problems:
        raise UserError(f"{', '.join(problems)} (--strict)")
    return 0
