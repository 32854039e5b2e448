"""Options and output shared by several commands: the input graph, the
machine, and the before/after table."""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from ..formats import GRAPH_FORMATS, read_graph
from ..formats.registry import read_recorded
from ..graph import CommGraph
from ..profile.collectives import MODELS
from ..topology import (Topology, hierarchy_topology, load_topology, mesh_topology_from_spec,
                        parse_hierarchy, topology_from_strings)
from ..topology.hosts import expand_nodelist, parse_hostfile, slurm_job_slots
from . import UserError, values


def add_graph_arguments(parser) -> None:
    parser.add_argument("input", metavar="INPUT",
                        help="communication graph or trace (METIS, Matrix Market, edge list, dense "
                             "matrix, Open MPI monitoring *.prof, EZTrace stats, rankmap trace, "
                             "Score-P OTF2, mpiP report, SST DUMPI, liballprof)")
    parser.add_argument("--format", default="auto", choices=["auto", *GRAPH_FORMATS],
                        help="input format (default: detect from name and content)")
    parser.add_argument("--weights", default="values", choices=["values", "abs", "unit"],
                        help="how matrix values become bytes: as given, absolute, or 1 per entry")
    parser.add_argument("--ompi-internal", action="store_true",
                        help="Open MPI monitoring: also count internal (I) messages")
    add_traffic_argument(parser, "rankmap traces: which recorded traffic to map")
    add_collectives_argument(parser)


def add_traffic_argument(parser, what: str) -> None:
    """``--traffic``: which recorded traffic a command reads (every command
    that chooses among a trace's kinds of traffic names it so)."""
    parser.add_argument("--traffic", default="all", choices=["all", "p2p", "collective", "rma"],
                        help=f"{what} (default: all; p2p includes one-sided, rma is one-sided alone, "
                             "collectives as the trace's collective model attributed them)")


def add_collectives_argument(parser) -> None:
    parser.add_argument("--collectives", default="tree", choices=list(MODELS),
                        help="OTF2, DUMPI and liballprof traces: how collectives become pairs, "
                             "as rankmap.profile's --collectives (default tree; mpi: MPICH's "
                             "algorithms by message size, each step a message)")


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
    g.add_argument("--gpu-node", metavar="NAME|FILE",
                   help="one rank per GPU, every node this GPU node: a built-in type (frontier, "
                        "lumi-g, dgx-a100, dgx-h100, mi300a:spx|tpx|cpx: one rank per partition), "
                        "a GPU node file (rankmap.topology.gpu_nodes) "
                        "or an hwloc XML with its GPUs; the links inside the node are a matrix, "
                        "and the relaunch binds each rank to its GPU and the cores near it")
    g.add_argument("--per", choices=["core", "gpu"], default=None,
                   help="what a PE is on hwloc machines (a trace's, --topology XML, this "
                        "machine): a core's hardware thread (default) or a GPU, one rank each")
    h = parser.add_argument_group(
        "hosts (with these, --hierarchy or --topology describe ONE node; default node: the "
        "trace's recorded one, else this machine; inside a Slurm allocation its nodes are used "
        "when nothing else names the machine)")
    h.add_argument("--hosts", metavar="NODELIST",
                   help="the job's hosts in Slurm hostlist syntax, e.g. cn[01-16] or a[1-3,7],b[01-02]")
    h.add_argument("--hostfile", metavar="FILE",
                   help="the job's hosts and slots: MPICH 'host:n', Open MPI 'host slots=n', or "
                        "one host per line (Slurm)")
    h.add_argument("--switches", metavar="FILE",
                   help="the network above the hosts: Slurm's topology.conf (tree or block plugin) "
                        "or topology.yaml (FILE:NAME picks a topology), or a file of 'HOST XNAME' "
                        "lines (Cray); hosts named by Cray xnames (x1000c0s0b0n0) need none")
    h.add_argument("--slots", type=values.count(1), default=None, metavar="N",
                   help="ranks per host for the hosts named without a count (default: every PE "
                        "of the --hierarchy/--topology node; without those, as many as the trace "
                        "ran on that host, or on each of its hosts for a host it did not run on)")


def load_graph(args) -> CommGraph:
    """The input graph; a recorded run is kept on ``args`` for
    ``load_machine`` (its hosts are the "before"), so it is read once."""
    args.recorded_run = read_recorded(args.input, args.format, args.collectives) \
        if os.path.exists(args.input) else None
    if args.recorded_run is not None:
        g = args.recorded_run.graph(kind=args.traffic)
        g.name = g.name or os.path.basename(args.input.rstrip("/"))
        return g
    return read_graph(args.input, args.format, weights=args.weights,
                      include_internal=args.ompi_internal, traffic=args.traffic)


def load_machine(args, graph_source: str | None = None) -> tuple[Topology, np.ndarray | None]:
    """The machine from the options, else from the trace being mapped,
    else from the Slurm allocation this runs in.

    Returns ``(topology, recorded)``: ``recorded`` is the PE each task ran on
    when a trace says so (the real "before"), else None (identity is then
    the launch order)."""
    mesh, torus = getattr(args, "mesh", None), getattr(args, "torus", None)
    gpu_node = getattr(args, "gpu_node", None)
    if sum(bool(x) for x in (args.hierarchy, args.topology, mesh, torus, gpu_node)) > 1:
        raise UserError("give one machine: --hierarchy, --topology, --gpu-node, --mesh or --torus")
    if gpu_node and getattr(args, "per", None) == "core":
        raise UserError("--gpu-node maps one rank per GPU: leave out --per core")
    if getattr(args, "cores", None) is not None and not (mesh or torus):
        raise UserError("--cores needs --mesh or --torus")
    if args.distances and not args.hierarchy:
        raise UserError("--distances needs --hierarchy")
    if args.hosts and args.hostfile:
        raise UserError("give --hosts or --hostfile, not both")
    if args.slots is not None and not (args.hosts or args.hostfile or args.switches):
        raise UserError("--slots counts ranks per host of --hosts or --hostfile")
    trace = _trace(graph_source, args)
    if args.hosts or args.hostfile or args.switches:
        if mesh or torus:
            raise UserError("--hosts/--hostfile/--switches describe a tree machine, not --mesh/--torus")
        topo = _cluster_of_hosts(args, trace)
    else:
        topo = None
        if mesh or torus:
            topo = mesh_topology_from_spec(mesh or torus, torus=bool(torus), cores=args.cores or 1)
        elif args.hierarchy:
            topo = topology_from_strings(args.hierarchy, args.distances)
        elif gpu_node or (args.topology and _per_gpu(args)):
            topo = _one_node(args, None)
        elif args.topology:
            topo = load_topology(args.topology)
    if topo is not None:
        return topo, None if trace is None else _recorded_gpus(args, trace, topo, _hosts_placement(trace.hosts, topo))
    if trace is not None and _per_gpu(args):
        topo = _trace_gpus(trace)
        return topo, _recorded_gpus(args, trace, topo, None)
    if trace is not None:
        topo, recorded = trace.topology_and_placement()
        if topo is not None:
            return topo, recorded
    slurm = slurm_job_slots()
    if slurm is not None:
        print(f"note: machine from the Slurm allocation: {len(slurm)} hosts of this node's kind",
              file=sys.stderr)
        from ..topology.cluster import cluster_of_hosts
        from ..topology.live import discover_local

        topo = cluster_of_hosts(discover_local(), slurm)
        return topo, None if trace is None else _hosts_placement(trace.hosts, topo)
    raise UserError("no machine given: use --hierarchy S [--distances D], --topology FILE or "
                    "--hosts NODELIST (a trace gives its own machine only when it recorded each "
                    "host's topology)")


def _cluster_of_hosts(args, trace) -> Topology:
    """The machine of --hosts/--hostfile/--switches: hosts (from the option,
    else the Slurm allocation, else the trace) each a copy of one node tree,
    under the switches of a topology.conf when given.

    The slots of a host named without a count: ``--slots``; else every PE
    of the node that --hierarchy/--topology/--gpu-node describe (every GPU
    with --per gpu); else, for a trace, as
    many as it ran ranks on that host, and on a host it did not run on as
    many as it ran on each of its hosts (when that number is the same on
    all of them; else every PE of the node)."""
    from ..topology.cluster import cluster_of_hosts
    from ..topology.switches import load_switches

    if args.hosts:
        slots, named = [(h, None) for h in expand_nodelist(args.hosts)], "--hosts"
    elif args.hostfile:
        slots, named = parse_hostfile(args.hostfile), args.hostfile
    else:
        slots, named = slurm_job_slots(), "the Slurm allocation"
        if slots is None and trace is not None:
            slots = [(h, None) for h in dict.fromkeys(trace.hosts) if h is not None]
        if not slots:
            raise UserError("--switches needs the hosts: --hosts, --hostfile, a Slurm allocation "
                            "or a trace that recorded them")
    ran: dict[str, int] = {}
    for h in trace.hosts if trace is not None else ():
        if h is not None:
            ran[h] = ran.get(h, 0) + 1
    each = next(iter(set(ran.values()))) if len(set(ran.values())) == 1 else None
    explicit_node = bool(args.hierarchy or args.topology or _per_gpu(args))
    counted = []
    for h, c in slots:
        if c is None:
            c = args.slots if args.slots is not None or explicit_node else ran.get(h, each)
        counted.append((h, c))
    if ran:
        _warn_new_hosts(named, [h for h, _ in slots], ran,
                        None if args.slots is not None or explicit_node else each)
    node = _one_node(args, trace)
    switches = load_switches(args.switches, [h for h, _ in slots]) if args.switches else None
    return cluster_of_hosts(node, counted, switches=switches)


def _names(hosts: list[str], most: int = 6) -> str:
    shown = ", ".join(hosts[:most])
    return shown + (f", ... ({len(hosts)} in all)" if len(hosts) > most else "")


def _warn_new_hosts(named: str, hosts: list[str], ran: dict, each: int | None) -> None:
    """One warning when hosts are not ones the trace ran on: a new
    allocation is normal, a misspelt name (``cn1`` for ``cn01``) is not."""
    new = [h for h in hosts if h not in ran]
    if not new:
        return
    ran_on = _names(list(ran))
    if len(new) == len(hosts):
        said = f"none of the hosts {named} names ({_names(hosts)}) is one the trace ran on ({ran_on})"
    else:
        said = (f"{len(new)} of the hosts {named} names ({_names(new)}) "
                f"{'is not one' if len(new) == 1 else 'are not ones'} the trace ran on ({ran_on})")
    gets = f"; {'it gets' if len(new) == 1 else 'they get'} {each} slots, as each host of the " \
           "trace had (--slots N to say otherwise)" if each else ""
    print(f"warning: {said}{gets}", file=sys.stderr)


def check_fits(graph: CommGraph, topology, eps) -> None:
    """A job larger than the machine is an error naming ranks, slots and
    hosts, unless ``--eps`` asks for several ranks per slot."""
    if graph.n <= topology.n_pes or eps is not None:
        return
    hosts = topology.hosts()
    per = {}
    for h in topology.pe_host.tolist():
        per[h] = per.get(h, 0) + 1
    counts = sorted(set(per.values()))
    spread = f"{counts[0]} each" if len(counts) == 1 else f"{counts[0]} to {counts[-1]} each"
    raise UserError(f"{graph.n} ranks but the machine has {topology.n_pes} slots on {len(hosts)} "
                    f"host(s) ({_names(hosts, 4)}: {spread}): name more hosts or slots (--hosts, "
                    "--hostfile, --slots), or give --eps to map several ranks per slot")


def _per_gpu(args) -> bool:
    return bool(getattr(args, "gpu_node", None)) or getattr(args, "per", None) == "gpu"


def _recorded_gpus(args, trace, topo, otherwise):
    """On GPU nodes, the GPU each rank of the trace used (its recorded
    record, ``topology.rank_gpus``); ``otherwise`` where that is not known
    (said once) or the machine is not one of GPUs."""
    if not _per_gpu(args):
        return otherwise
    from ..topology.rank_gpus import gpu_placement

    pe, note = gpu_placement(trace, topo)
    if note:
        print(f"note: {note}", file=sys.stderr)
    return otherwise if pe is None else pe


def _trace_gpus(trace) -> Topology:
    """The GPUs of every host a trace recorded (each host's hwloc XML)."""
    from ..topology.cluster import compose_cluster
    from ..topology.hwloc_gpus import read_hwloc_gpus

    hosts = [h for h in dict.fromkeys(trace.hosts) if h is not None]
    missing = [h for h in hosts if not trace.host_topology_xml.get(h)]
    if not hosts or missing:
        raise UserError("--per gpu: the trace recorded no hwloc XML of "
                        f"{missing[0] if missing else 'its hosts'}; give --gpu-node or --topology")
    nodes = [(h, read_hwloc_gpus(trace.host_topology_xml[h], host=h)) for h in hosts]
    return compose_cluster(nodes) if len(nodes) > 1 else nodes[0][1]


def _one_node(args, trace) -> Topology:
    """The tree of one node when the hosts are given: --hierarchy,
    --gpu-node, an --topology file of one host, the trace's first recorded
    host, or this machine (with --per gpu: the GPUs of the XML)."""
    if args.hierarchy:
        return hierarchy_topology(*parse_hierarchy(args.hierarchy, args.distances), host_prefix=None)
    if getattr(args, "gpu_node", None):
        from ..topology.gpu_nodes import load_gpu_node

        return load_gpu_node(args.gpu_node)
    if _per_gpu(args):
        from ..topology.hwloc_gpus import read_hwloc_gpus
        from ..topology.live import discover_local_xml

        xml = args.topology
        if xml is None and trace is not None:
            xml = next((trace.host_topology_xml[h] for h in trace.hosts
                        if trace.host_topology_xml.get(h)), None)
        elif xml is None:
            xml = discover_local_xml()
        if xml is None:
            raise UserError("--per gpu needs an hwloc XML with the GPUs: --topology node.xml, a "
                            "trace that recorded one, or lstopo on this machine")
        return read_hwloc_gpus(xml)
    if args.topology:
        topo = load_topology(args.topology)
        if not isinstance(topo, Topology) or len(topo.hosts()) > 1:
            raise UserError(f"{args.topology}: with --hosts/--hostfile, --topology describes one "
                            "node (an hwloc XML, a one-node hierarchy)")
        return topo
    if trace is not None:
        from ..topology.hwloc import read_hwloc_xml

        xml = next((trace.host_topology_xml.get(h) for h in trace.hosts
                    if trace.host_topology_xml.get(h)), None)
        if xml is not None:
            return read_hwloc_xml(xml)
    from ..topology.live import discover_local

    return discover_local()


def _trace(path: str | None, args=None):
    """The recorded run being mapped (rankmap, OTF2, mpiP, DUMPI or
    liballprof trace), or None for other inputs."""
    if path is None or not os.path.exists(path):
        return None
    if getattr(args, "recorded_run", None) is not None:
        return args.recorded_run
    return read_recorded(path, getattr(args, "format", "auto"),
                         getattr(args, "collectives", "tree"))


def _hosts_placement(rank_hosts, topology) -> np.ndarray | None:
    """Where a trace's ranks ran on a machine given by the user: each rank
    on the next PE of its recorded host, in rank order.  Recorded host
    names the machine does not have (a hierarchy's generated names, another
    cluster) are matched to its hosts in order of first appearance.  None
    when a rank has no host or a host has more ranks than PEs."""
    if any(h is None for h in rank_hosts):
        return None
    pes_of_host: dict[str, list[int]] = {}
    for pe, host in enumerate(topology.pe_host):
        pes_of_host.setdefault(host, []).append(pe)
    recorded = list(dict.fromkeys(rank_hosts))
    if not set(recorded) <= set(pes_of_host):
        if len(recorded) > len(pes_of_host):
            return None
        rename = dict(zip(recorded, pes_of_host))
        rank_hosts = [rename[h] for h in rank_hosts]
    used: dict[str, int] = {}
    out = np.empty(len(rank_hosts), dtype=np.int64)
    for r, host in enumerate(rank_hosts):
        i = used.get(host, 0)
        if host not in pes_of_host or i >= len(pes_of_host[host]):
            return None
        out[r] = pes_of_host[host][i]
        used[host] = i + 1
    return out


def recorded_program(path: str | None) -> str:
    """The program a trace recorded, as a relaunch command's tail."""
    from ..formats.relaunch import program_of

    trace = _trace(path)
    return program_of(trace.meta.get("argv") if trace is not None else None)


def print_relaunch(written: dict, n_ranks: int, program: str, notes: dict | None = None) -> None:
    """Name each launch file written, the commands that relaunch with it
    and what a launcher's user must know (``launch_notes``)."""
    from ..formats.relaunch import relaunch_lines

    for kind, path in written.items():
        print(f"wrote {kind.split('_')[0]:8s} {path}")
    lines = relaunch_lines(written, n_ranks, program)
    if lines:
        print("relaunch with:")
        for line in lines:
            print(f"  {line}")
    for note in (notes or {}).values():
        print(f"note: {note}")


def launch_notes(written: dict, pe_of_task, topology) -> dict:
    """Launcher -> what its user must know about this placement (hydra: a
    placement it cannot start with every host whole, ``hydra.hydra_note``)."""
    from ..formats.hydra import hydra_note

    note = hydra_note(pe_of_task, topology) if "hydra" in written else None
    return {"hydra": note} if note else {}


def human_bytes(x: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return f"{x:.4g} {unit}" if unit != "B" else f"{x:.0f} B"
        x /= 1024
    return f"{x:.4g} PiB"


def phase_graphs(args) -> list:
    """One graph per phase of the recorded run (the traffic ``map`` reads),
    when at least two phases carry bytes; else none."""
    run = getattr(args, "recorded_run", None)
    if run is None or len(run.phases) < 2:
        return []
    graphs = [run.graph(kind=args.traffic, phase=p) for p in run.phases]
    graphs = [g for g in graphs if g.total_bytes > 0]
    return graphs if len(graphs) > 1 else []


def recorded_replay(args, topology, pe, deadline=None):
    """The replay of the recorded run's message order (``rankmap.replay``)
    with its ranks on ``pe``, when the trace has an event log of at most
    ``trace.JOB_MAX_EVENTS`` events and the machine is a tree; else, or
    when ``deadline`` expires first, None."""
    from ..topology import Topology
    from ..trace import JOB_MAX_EVENTS

    events = getattr(getattr(args, "recorded_run", None), "events", None)
    if events is None or not isinstance(topology, Topology) or events.op.size > JOB_MAX_EVENTS:
        return None
    from ..replay import replay_time

    return replay_time(events, pe, topology, deadline=deadline)


def print_comparison(title_before: str, title_after: str, before, after, phased=None, replayed=None) -> None:
    """The short before/after table of ``map``, ``eval`` and ``demo``: J,
    the busiest link (the largest bytes over bandwidth) and its time (with
    ``phased``, before and after: the sum of the phases' link times; with
    ``replayed``, the replays of the recorded message order), the message
    time per rank and its latency and bandwidth parts where the graph counts
    messages, hops per byte, bytes per level."""
    ratio = after.J / before.J if before.J else 1.0
    seconds = after.link_time_unit == "s"
    scale = 1.0 if seconds else before.link_time or 1.0  # no bandwidth given: relative to the first

    def time(t: float) -> str:
        return f"{t:.3g} s" if seconds else f"{t / scale:.3f}"

    rows = [("J (bytes x distance)", f"{before.J:.6g}", f"{after.J:.6g}"),
            ("busiest link", human_bytes(before.busiest_link_bytes), human_bytes(after.busiest_link_bytes)),
            ("link time" + ("" if seconds else " (relative)"), time(before.link_time), time(after.link_time))]
    if phased is not None:
        rows.append(("  phases in turn", time(phased[0]), time(phased[1])))
    if replayed is not None:
        rows.append(("  message order replayed", time(replayed[0].seconds), time(replayed[1].seconds)))
    if before.time is not None and after.time is not None:
        rows += [("message time per rank", f"{before.time.total:.3g} s", f"{after.time.total:.3g} s"),
                 ("  latency (alpha x messages)", f"{before.time.latency:.3g} s", f"{after.time.latency:.3g} s"),
                 ("  bandwidth (bytes / beta)", f"{before.time.bandwidth:.3g} s", f"{after.time.bandwidth:.3g} s")]
    rows.append(("hops per byte", f"{before.hops_per_byte:.3f}", f"{after.hops_per_byte:.3f}"))
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
    if after.time is not None and before.time is not None and before.time.total:
        print(f"{'time ratio':{w0}}  {'':>{w1}}  {after.time.total / before.time.total:>{w2}.4f}"
              f"  (alpha, beta per level: {after.time.source})")
    if after.busiest_link:
        print(f"busiest link: {after.busiest_link}" + (f" (before: {before.busiest_link})"
                                                       if before.busiest_link != after.busiest_link else ""))


def dump_json(obj: dict) -> None:
    def default(o):
        if isinstance(o, (np.integer,)):
            return int(o)
        if isinstance(o, (np.floating,)):
            return float(o)
        raise TypeError(type(o))

    print(json.dumps(obj, default=default))
