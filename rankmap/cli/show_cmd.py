"""Summarise a trace: ranks, hosts, bytes per kind and phase, the heaviest
pairs, missing ranks; ``--plot FILE`` draws the byte matrix as a heat map
(needs the ``plot`` extra, matplotlib)."""

from __future__ import annotations

import warnings

import numpy as np

from . import values

NAME = "show"
HELP = "summarise a recorded trace (optionally plot its communication matrix)"
ORDER = 40


def add_arguments(p) -> None:
    p.add_argument("trace", help="a .rmtrace.npz file, a rank part, or a .parts directory")
    p.add_argument("--top", type=values.count(0), default=10, help="how many of the heaviest pairs to list")
    p.add_argument("--kind", default="all", choices=["p2p", "collective", "rma", "all"],
                   help="traffic the pair list and plot use (default all)")
    p.add_argument("--phase", default=None, help="restrict the pair list and plot to one phase")
    p.add_argument("--plot", metavar="FILE", help="save a heat map of the byte matrix (png, pdf, svg)")


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def summary(trace, top: int = 10, kind: str = "all", phase=None) -> str:
    from ..trace import missing_report

    lines = [f"trace     {trace.source}",
             f"ranks     {trace.nranks} ({len(trace.ranks)} recorded)"]
    hosts = [h for h in trace.hosts if h is not None]
    per_host = {h: hosts.count(h) for h in dict.fromkeys(hosts)}
    lines.append(f"hosts     {len(per_host)}: " + ", ".join(f"{h} ({c} ranks)" for h, c in per_host.items()))
    mpi = trace.meta.get("mpi", {})
    lines.append(f"program   {' '.join(trace.meta.get('argv', [])) or '?'}")
    lines.append(f"mpi       {mpi.get('library', '?')}; collectives model {trace.meta.get('collectives', '?')}")
    statuses = {}
    for s in trace.status:
        statuses[s or "missing"] = statuses.get(s or "missing", 0) + 1
    lines.append("status    " + ", ".join(f"{k}: {v}" for k, v in statuses.items()))
    if len(trace.missing_ranks):
        lines.append("WARNING   " + missing_report(trace))
    lines.append("")
    lines.append(f"{'phase':<20}{'p2p':>14}{'collective':>14}{'one-sided':>14}{'messages':>12}")
    for ph in [*trace.phases, None]:
        row = [trace.graph(k, phase=ph) for k in ("p2p", "collective", "rma")]
        p2p_only = row[0].total_bytes - row[2].total_bytes
        msgs = sum(float(g.messages.sum()) for g in row[:2])
        lines.append(f"{ph or 'TOTAL':<20}{_human(p2p_only):>14}{_human(row[1].total_bytes):>14}"
                     f"{_human(row[2].total_bytes):>14}{msgs:>12.0f}")
    ext = trace.external_bytes()
    if ext:
        lines.append(f"bytes to processes outside COMM_WORLD: {_human(ext)}")
    g = trace.graph(kind, phase=phase)
    src, dst, b = g.coo()
    order = np.argsort(-b, kind="stable")[:top]
    lines.append("")
    lines.append(f"top {len(order)} pairs ({kind}{', phase ' + phase if phase else ''}):")
    for i in order:
        lines.append(f"  {src[i]:>6} -> {dst[i]:<6} {_human(b[i]):>12}  ({b[i] / max(g.total_bytes, 1):.1%})")
    return "\n".join(lines)


def plot(trace, path, kind="all", phase=None) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm
    except ImportError as exc:
        raise ValueError("plotting needs matplotlib: pip install 'rankmap[plot]'") from exc
    g = trace.graph(kind, phase=phase)
    n = g.n
    bins = min(n, 1024)  # a large job is binned: the picture stays readable and small
    src, dst, b = g.coo()
    img = np.zeros((bins, bins))
    np.add.at(img, (src * bins // n, dst * bins // n), b)
    fig, ax = plt.subplots(figsize=(6, 5))
    shown = ax.imshow(np.where(img > 0, img, np.nan), cmap="viridis", interpolation="nearest",
                      norm=LogNorm() if img.max() > 0 else None, extent=(0, n, n, 0))
    fig.colorbar(shown, ax=ax, label="bytes")
    ax.set_xlabel("destination rank")
    ax.set_ylabel("source rank")
    ax.set_title(f"{g.name or 'trace'}: {kind} bytes" + (f", phase {phase}" if phase else ""))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run(args) -> int:
    from ..trace import read_trace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing ranks are part of the summary
        trace = read_trace(args.trace)
    print(summary(trace, args.top, args.kind, args.phase))
    if args.plot:
        plot(trace, args.plot, args.kind, args.phase)
        print(f"\nheat map written to {args.plot}")
    return 0
