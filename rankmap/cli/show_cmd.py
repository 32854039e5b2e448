"""Summarise a recorded run (a rankmap trace, Score-P OTF2, mpiP report,
SST DUMPI or liballprof trace): ranks, hosts, bytes per kind and phase, the
heaviest pairs, missing ranks; ``--plot FILE`` draws the byte matrix as a
heat map with node boundaries, the nodes in name order, colours in
proportion to the bytes (``--scale log`` shows small messages too; needs
the ``plot`` extra, matplotlib), and ``--mapping FILE`` the matrix in a new
launch order beside it; ``--per gpu`` lists the GPU each rank used (the
visible-device variables and the device it opened, as the profiler recorded
them) and orders the ranks of each node by it in the heat map."""

from __future__ import annotations

import re
import warnings

import numpy as np

from ..formats.launch_files import read_launch_file
from . import UserError, values
from .common import add_collectives_argument, add_traffic_argument

NAME = "show"
HELP = "summarise a recorded run (optionally plot its communication matrix)"
ORDER = 40
HEAT_COLOURS = "magma_r"  # light for few bytes, dark for many: the costly pairs stand out on white


def add_arguments(p) -> None:
    p.add_argument("trace", help="a .rmtrace.npz file, a rank part or a .parts directory; or a "
                                 "Score-P OTF2, mpiP, SST DUMPI or liballprof trace")
    p.add_argument("--format", default="auto",
                   choices=["auto", "trace", "otf2", "mpip", "dumpi", "liballprof"],
                   help="trace format (default: detect)")
    add_collectives_argument(p)
    p.add_argument("--top", type=values.count(0), default=10, help="how many of the heaviest pairs to list")
    add_traffic_argument(p, "the traffic the pair list and plot use")
    p.add_argument("--phase", default=None, help="restrict the pair list and plot to one phase")
    p.add_argument("--plot", metavar="FILE", help="save a heat map of the byte matrix (png, pdf, svg)")
    p.add_argument("--scale", default="linear", choices=["linear", "log"],
                   help="colour scale of the heat map: linear (default: colour in proportion to the bytes, "
                        "so the pairs that cost most stand out) or log (small messages visible too)")
    p.add_argument("--per", choices=["gpu"], default=None,
                   help="gpu: list the GPU each rank used (what the launcher made visible, the "
                        "device it opened) and order each node's ranks by their GPUs in the plot")
    p.add_argument("--mapping", metavar="FILE",
                   help="with --plot: also draw the matrix in the order of this launch file (any "
                        "that rankmap map -o writes: perm, MPICH_RANK_ORDER, hydra machinefile, "
                        "Open MPI rankfile, Slurm hostfile, bindings), side by side")


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
    mpi = trace.meta.get("mpi") or {}  # optional fields may be null
    lines.append(f"program   {' '.join(trace.meta.get('argv') or []) or '?'}")
    if trace.meta.get("tool"):
        lines.append(f"recorded  by {trace.meta['tool']}; collectives model "
                     f"{trace.meta.get('collectives', '?')}")
    else:
        lines.append(f"mpi       {mpi.get('library', '?')}; collectives model "
                     f"{trace.meta.get('collectives', '?')}")
    statuses = {}
    for s in trace.status:
        statuses[s or "missing"] = statuses.get(s or "missing", 0) + 1
    lines.append("status    " + ", ".join(f"{k}: {v}" for k, v in statuses.items()))
    e = trace.events
    lines.append("events    " + ("none (the link time alone judges an order)" if e is None else
                                f"{e.op.size} in program order, what map replays"
                                + (f"; {int(e.truncated.sum())} rank(s) reached --max-events"
                                   if e.truncated.any() else "")))
    gpus = sum(1 for g in trace.gpus if g)
    if gpus:
        lines.append(f"gpus      recorded for {gpus} of {trace.nranks} ranks (--per gpu lists them)")
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


def host_order(hosts) -> dict[str, int]:
    """Each host's place when the heat map groups ranks by host: by name,
    numbers in names compared as numbers (cn2 before cn10), so both panels
    list the nodes alike whatever rank came first on which."""
    def key(h: str):
        return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", h)]

    return {h: i for i, h in enumerate(sorted(set(hosts), key=key))}


def gpu_summary(trace) -> str:
    """The GPU each rank used, one line each (``topology.rank_gpus``)."""
    from ..topology.rank_gpus import rank_gpu_lines

    if not any(trace.gpus):
        return ("GPUs      none recorded (the profiler records the visible-device variables and the "
                "device each rank opened)")
    return "\n".join([f"{'rank':>6}  {'host':<16} {'gpu':<14} known from", *rank_gpu_lines(trace)])


def _gpu_order(trace) -> np.ndarray:
    """Each rank's place among its node's ranks by the GPU it used (device
    index, ranks of unknown GPU after, in rank order)."""
    from ..topology.rank_gpus import rank_devices

    def key(device):
        if device is None:
            return (1, ())
        return (0, tuple(int(x) for x in device.partition(":")[2].split(".") if x.isdigit()))

    keys = [key(d) for _g, d in rank_devices(trace)]
    order = sorted(range(trace.nranks), key=lambda r: (keys[r], r))
    place = np.empty(trace.nranks, dtype=np.int64)
    place[order] = np.arange(trace.nranks)
    return place


def plot(trace, path, kind="all", phase=None, mapping: str | None = None, scale: str = "linear",
         per_gpu: bool = False) -> list:
    """Save ``heat_map``'s picture to ``path``; returns each panel's share of
    bytes between ranks on one node (None where the hosts are unknown)."""
    import matplotlib.pyplot as plt

    fig, shares = heat_map(trace, kind, phase, mapping, scale, per_gpu)
    fig.savefig(path)
    plt.close(fig)
    return shares


def heat_map(trace, kind="all", phase=None, mapping: str | None = None, scale: str = "linear",
             per_gpu: bool = False):
    """Heat map of the byte matrix, ranks on both axes grouped by the host
    they ran on (hosts in ``host_order``; with ``per_gpu`` each host's
    ranks in the order of their GPUs) with node boundaries where the
    trace knows the hosts; with ``mapping`` (a launch file) the matrix in
    the new order beside it.  ``scale`` linear colours cells in proportion
    to their bytes (what costs most stands out), log shows small messages
    too.  Returns the figure and each panel's share of bytes within a node."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm, Normalize
    except ImportError as exc:
        raise ValueError("plotting needs matplotlib: pip install 'rankmap[plot]'") from exc
    g = trace.graph(kind, phase=phase)
    hosts = list(trace.hosts)
    if all(hosts):  # ranks grouped by the host they ran on
        place = host_order(hosts)
        within = _gpu_order(trace) if per_gpu else np.arange(len(hosts))
        order = np.lexsort((within, [place[h] for h in hosts]))
        panels = [(order, [hosts[t] for t in order], "as recorded")]
    else:
        panels = [(np.arange(g.n), None, "as recorded (hosts unknown)")]
    if mapping is not None:
        order, new_hosts = read_launch_file(mapping, g.n).launch_order(host_order)
        panels.append((order, new_hosts, f"after {mapping.rsplit('/', 1)[-1]}"))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5.6), squeeze=False)
    shown, shares = None, []
    coo = g.coo()
    cells = [_cells(g.n, coo, order) for order, _, _ in panels]
    top = max((float(c.max()) for c in cells if c.size), default=1.0) or 1.0
    if scale == "log":
        positive = [float(c[c > 0].min()) for c in cells if np.any(c > 0)]
        norm = LogNorm(min(min(positive, default=top), top / 10), top)
    else:
        norm = Normalize(0.0, top)
    for ax, (order, at, title), img in zip(axes[0], panels, cells):
        shown, inside = _draw(ax, g.n, coo, order, at, img, norm)
        shares.append(inside)
        ax.set_title(title + ("" if inside is None else f": {inside:.0%} of bytes within a node"),
                     pad=28 if at is not None else 6, fontsize=10)
        ax.set_xlabel("destination rank" + (" (grouped by node)" if at is not None else ""))
        ax.set_ylabel("source rank" + (" (grouped by node)" if at is not None else ""))
    fig.colorbar(shown, ax=axes[0].tolist(), label=f"bytes ({scale} scale)", shrink=0.9)
    fig.suptitle(f"{g.name or 'trace'}: {kind} bytes" + (f", phase {phase}" if phase else ""))
    return fig, shares


def _cells(n: int, coo, order) -> np.ndarray:
    """The byte matrix (``coo``: source, destination, bytes) with task
    ``order[i]`` at row and column i; a large job is binned to at most
    1024 x 1024 cells (readable and small)."""
    bins = min(n, 1024)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    src, dst, b = coo
    img = np.zeros((bins, bins))
    np.add.at(img, (pos[src] * bins // n, pos[dst] * bins // n), b)
    return img


def _draw(ax, n: int, coo, order, hosts, img, norm):
    """One matrix (``img``: task ``order[i]`` at row and column i), ticks
    naming the ranks; where ``hosts`` (host of each position) is given, node
    boundaries, host names along the top, and the share of the bytes
    (``coo``) between tasks on one node (returned with the image)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    src, dst, b = coo
    shown = ax.imshow(np.where(img > 0, img, np.nan), cmap=HEAT_COLOURS, interpolation="nearest",
                      norm=norm, extent=(0, n, n, 0))
    rank_at = FuncFormatter(lambda x, _: str(int(order[int(x)])) if 0 <= int(x) < n else "")
    for axis in (ax.xaxis, ax.yaxis):
        if n <= 32:  # every rank named, centred on its cell
            axis.set_ticks(np.arange(n) + 0.5, labels=[str(int(t)) for t in order])
            axis.set_tick_params(labelsize=7 if n > 16 else 8,
                                 rotation=90 if n > 16 and axis is ax.xaxis else 0)  # side by side
        else:
            axis.set_major_locator(MaxNLocator(nbins=8, integer=True))
            axis.set_major_formatter(rank_at)
    if hosts is None:
        return shown, None
    host_of_task = np.empty(n, dtype=object)
    host_of_task[order] = hosts
    inside = float(b[host_of_task[src] == host_of_task[dst]].sum()) / max(float(b.sum()), 1e-300)
    cuts = [i for i in range(1, n) if hosts[i] != hosts[i - 1]]
    if len(cuts) <= 64:
        for c in cuts:
            ax.axhline(c, color="0.35", lw=0.9)
            ax.axvline(c, color="0.35", lw=0.9)
        starts = [0, *cuts]
        if len(starts) <= 16:  # name the hosts along the top
            top = ax.secondary_xaxis("top")
            top.set_ticks([(s + e) / 2 for s, e in zip(starts, [*cuts, n])],
                          labels=[hosts[s] for s in starts])
            top.tick_params(labelsize=7, rotation=90 if len(starts) > 4 else 0)
    return shown, inside


def run(args) -> int:
    from ..formats.registry import read_recorded

    if args.mapping and not args.plot:
        raise ValueError("--mapping goes with --plot FILE")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing ranks are part of the summary
        trace = read_recorded(args.trace, args.format, args.collectives)
    if trace is None:
        raise UserError(f"{args.trace}: a communication graph, not a recorded run: nothing to "
                        "summarise beyond what 'rankmap eval' reports")
    print(summary(trace, args.top, args.traffic, args.phase))
    if args.per == "gpu":
        print("\n" + gpu_summary(trace))
    if args.plot:
        shares = plot(trace, args.plot, args.traffic, args.phase, args.mapping, args.scale,
                      args.per == "gpu")
        print(f"\nheat map written to {args.plot}")
        if all(x is not None for x in shares):
            print("bytes within a node: " + " -> ".join(f"{x:.1%}" for x in shares))
    return 0
