"""Options and output shared by several commands: the input graph, the
machine, and the before/after table."""

from __future__ import annotations

import json

import numpy as np

from ..cost import evaluate
from ..formats import GRAPH_FORMATS, read_graph
from ..graph import CommGraph
from ..topology import Topology, load_topology, mesh_topology_from_spec, topology_from_strings
from . import UserError, values


def add_graph_arguments(parser) -> None:
    parser.add_argument("input", metavar="INPUT",
                        help="communication graph or trace (METIS, Matrix Market, edge list, dense "
                             "matrix, Open MPI monitoring *.prof, EZTrace stats, rankmap trace)")
    parser.add_argument("--format", default="auto", choices=["auto", *GRAPH_FORMATS],
                        help="input format (default: detect from name and content)")
    parser.add_argument("--weights", default="values", choices=["values", "abs", "unit"],
                        help="how matrix values become bytes: as given, absolute, or 1 per entry")
    parser.add_argument("--ompi-internal", action="store_true",
                        help="Open MPI monitoring: also count internal (I) messages")
    parser.add_argument("--traffic", default="all", choices=["all", "p2p", "collective"],
                        help="rankmap traces: which recorded traffic to map (default: all; "
                             "collectives as the trace's collective model attributed them)")


def add_topology_arguments(parser) -> None:
    g = parser.add_argument_group("machine (one of)")
    g.add_argument("--hierarchy", metavar="S",
                   help="uniform hierarchy, innermost level first, e.g. 4:16:8 (4 cores per "
                        "socket, 16 sockets per node, 8 nodes)")
    g.add_argument("--distances", metavar="D",
                   help="distance per level of --hierarchy, e.g. 1:10:100 (default 1:10:100...)")
    g.add_argument("--topology", metavar="FILE",
                   help="machine file: Scotch tleaf target, 'hierarchy S distances D' file, or "
                        "any format rankmap.topology.load_topology reads")
    g.add_argument("--mesh", metavar="DIMS", help="mesh of nodes, e.g. 8x8 or 8x8x8 (distance = hops)")
    g.add_argument("--torus", metavar="DIMS", help="torus of nodes, e.g. 16x32x32 (hops with wrap-around)")
    g.add_argument("--cores", type=values.count(1), default=None, metavar="N",
                   help="PEs per node of --mesh/--torus (default 1)")


def load_graph(args) -> CommGraph:
    return read_graph(args.input, args.format, weights=args.weights,
                      include_internal=args.ompi_internal, traffic=args.traffic)


def load_machine(args, graph_source: str | None = None) -> tuple[Topology, np.ndarray | None]:
    """The machine from the options, else from the trace being mapped.

    Returns ``(topology, recorded)``: ``recorded`` is the PE each task ran on
    when a trace says so (the real "before"), else None (identity is then
    the launch order)."""
    mesh, torus = getattr(args, "mesh", None), getattr(args, "torus", None)
    if sum(bool(x) for x in (args.hierarchy, args.topology, mesh, torus)) > 1:
        raise UserError("give one machine: --hierarchy, --topology, --mesh or --torus")
    if getattr(args, "cores", None) is not None and not (mesh or torus):
        raise UserError("--cores needs --mesh or --torus")
    if args.distances and not args.hierarchy:
        raise UserError("--distances needs --hierarchy")
    topo = None
    if mesh or torus:
        topo = mesh_topology_from_spec(mesh or torus, torus=bool(torus), cores=args.cores or 1)
    elif args.hierarchy:
        topo = topology_from_strings(args.hierarchy, args.distances)
    elif args.topology:
        topo = load_topology(args.topology)
    trace = _trace(graph_source)
    if topo is not None:
        return topo, None if trace is None else _hosts_placement(trace.hosts, topo)
    if trace is not None:
        topo, recorded = trace.topology_and_placement()
        if topo is not None:
            return topo, recorded
    raise UserError("no machine given: use --hierarchy S [--distances D] or --topology FILE "
                    "(a trace gives its own machine only when it recorded each host's topology)")


def _trace(path: str | None):
    """The recorded trace being mapped, or None for other inputs."""
    from .. import trace

    if path is None or not trace.is_trace(path):
        return None
    return trace.read_trace(path)


def _hosts_placement(rank_hosts, topology) -> np.ndarray | None:
    """Where a trace's ranks ran on a machine given by the user: each rank
    on the next PE of its recorded host, in rank order.  None when the hosts
    do not match the machine's (e.g. a hierarchy with generated names)."""
    pes_of_host: dict[str, list[int]] = {}
    for pe, host in enumerate(topology.pe_host):
        pes_of_host.setdefault(host, []).append(pe)
    used: dict[str, int] = {}
    out = np.empty(len(rank_hosts), dtype=np.int64)
    for r, host in enumerate(rank_hosts):
        i = used.get(host, 0)
        if host not in pes_of_host or i >= len(pes_of_host[host]):
            return None
        out[r] = pes_of_host[host][i]
        used[host] = i + 1
    return out


def human_bytes(x: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return f"{x:.4g} {unit}" if unit != "B" else f"{x:.0f} B"
        x /= 1024
    return f"{x:.4g} PiB"


def print_comparison(title_before: str, title_after: str, before, after) -> None:
    """The short before/after table of ``map`` and ``demo``."""
    ratio = after.J / before.J if before.J else 1.0
    rows = [("J (bytes x distance)", f"{before.J:.6g}", f"{after.J:.6g}"),
            ("bottleneck link", human_bytes(before.bottleneck), human_bytes(after.bottleneck)),
            ("hops per byte", f"{before.hops_per_byte:.3f}", f"{after.hops_per_byte:.3f}")]
    levels = {}
    for which, rep in (("b", before), ("a", after)):
        for lv in rep.bytes_per_level:
            name = lv["level"] + (f" (d={lv['distance']:g})" if lv.get("distance") is not None else "")
            levels.setdefault((lv["depth"], name), {})[which] = lv["bytes"]
    for (depth, name), v in sorted(levels.items(), key=lambda kv: -kv[0][0]):
        rows.append((f"  bytes within {name}", human_bytes(v.get("b", 0.0)), human_bytes(v.get("a", 0.0))))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(title_before), *(len(r[1]) for r in rows))
    w2 = max(len(title_after), *(len(r[2]) for r in rows))
    print(f"{'':{w0}}  {title_before:>{w1}}  {title_after:>{w2}}")
    for r in rows:
        print(f"{r[0]:{w0}}  {r[1]:>{w1}}  {r[2]:>{w2}}")
    print(f"{'J ratio':{w0}}  {'':>{w1}}  {ratio:>{w2}.4f}")


def dump_json(obj: dict) -> None:
    def default(o):
        if isinstance(o, (np.integer,)):
            return int(o)
        if isinstance(o, (np.floating,)):
            return float(o)
        raise TypeError(type(o))

    print(json.dumps(obj, default=default))
