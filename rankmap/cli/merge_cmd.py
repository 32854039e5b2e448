"""Merge the per-rank part files of a profiled run into one trace.

A run that finished merges itself; one that died leaves
``TRACE.rmtrace.npz.parts/``.  Give that directory (or part files); ranks with
no part file are reported by number, and ranks whose last record is a
periodic flush (killed before they finished) are listed too.
"""

from __future__ import annotations

from pathlib import Path

NAME = "merge"
HELP = "merge per-rank trace parts (from a run that died) into one trace"
ORDER = 41


def add_arguments(p) -> None:
    p.add_argument("parts", nargs="+", help="a .parts directory, part files, or traces of disjoint ranks")
    p.add_argument("-o", "--output", help="merged trace (default: the directory name without .parts)")
    p.add_argument("--strict", action="store_true", help="fail (exit 1) when any rank is missing")


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
    unfinished = [r for r, s in enumerate(merged.status) if s not in (None, "complete")]
    if unfinished:
        shown = ", ".join(f"{r} ({merged.status[r]})" for r in unfinished[:20])
        print(f"ranks that did not finish: {shown}{' ...' if len(unfinished) > 20 else ''}")
    if len(merged.missing_ranks):
        print("WARNING: " + missing_report(merged))
        return 1 if args.strict else 0
    return 0
