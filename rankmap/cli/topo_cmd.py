"""Show the machine as rankmap sees it: levels, arities, distances, PE count,
and whether it is a uniform hierarchy (with its a1:a2:... string).

Sources: this machine (--live, the default: lstopo when installed, else
sysfs), hwloc XML exports (--xml, v1/v2/v3; several files or a directory
make a cluster of those nodes), or any --topology file `rankmap map` reads.
A cluster: --nodes node[01-16] (Slurm nodelist; one XML for all nodes, or one
per node), --network 4:2 --network-distances 100:400 (nodes per switch,
switches per rack, innermost first).  --hostfile keeps only the slots of an
MPI hostfile (`host slots=N` or `host:N`).

Examples:
  rankmap topo
  rankmap topo --xml node.xml --level-distances core=2,package=20 --json
  rankmap topo --xml node.xml --nodes node[01-08] --network 4:2 --network-distances 100:400
  rankmap topo --xml node.xml --hostfile hosts.txt
  rankmap topo --export node.xml        (describe a compute node once, map elsewhere)
  rankmap topo --gpu-node frontier      (8 GCDs, their links, devices and cores)
  rankmap topo --gpu-node mi300a:cpx    (4 MI300A APUs in CPX mode: 24 partitions)
  rankmap topo --xml gpu-node.xml --per gpu
"""

from __future__ import annotations

import json
import sys

from . import values

NAME = "topo"
HELP = "show the machine tree (hwloc XML, this machine, a cluster)"
ORDER = 40


def add_arguments(parser) -> None:
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--xml", action="append", metavar="FILE|DIR",
                     help="hwloc XML of a node (repeat, or give a directory, for several nodes)")
    src.add_argument("--live", action="store_true", help="this machine (default)")
    src.add_argument("--topology", metavar="FILE",
                     help="any topology file rankmap reads (hwloc XML, cluster file, tleaf, hierarchy)")
    src.add_argument("--gpu-node", metavar="NAME|FILE",
                     help="a GPU node, one PE per GPU: built-in (frontier, lumi-g, dgx-a100, "
                          "dgx-h100, mi300a:spx|tpx|cpx: one PE per partition), a GPU node file or "
                          "an hwloc XML with GPUs")
    parser.add_argument("--per", choices=["core", "gpu"], default="core",
                        help="with --xml/--live: PEs are hardware threads (default) or GPUs")
    parser.add_argument("--no-lstopo", action="store_true",
                        help="with --live: read Linux sysfs even when lstopo is installed")
    parser.add_argument("--affinity", action="store_true",
                        help="with --live: only the PEs this process may run on")
    parser.add_argument("--nodes", "--hosts", dest="nodes", metavar="NODELIST",
                        help="host names, Slurm syntax allowed: node[01-04],gpu1")
    parser.add_argument("--hostfile", metavar="FILE",
                        help="MPI hostfile: its hosts, restricted to its slots")
    parser.add_argument("--network", metavar="A:B", default="",
                        help="network levels above the nodes, innermost first (4:2 = 4 nodes per "
                             "switch, 2 switches per rack)")
    parser.add_argument("--network-distances", metavar="D1:D2", default="",
                        help="distance of each network level (default 100, 400, ...; one more for "
                             "a top level joining the groups)")
    parser.add_argument("--switches", metavar="FILE",
                        help="the network above the nodes: Slurm topology.conf (tree or block "
                             "plugin), topology.yaml (FILE:NAME picks one), or 'HOST XNAME' lines")
    parser.add_argument("--level-distances", metavar="KIND=D,...",
                        help="override the default distance of node levels, e.g. core=2,package=20")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--export", metavar="FILE",
                        help="write the machine found: hwloc XML for one node, a cluster file "
                             "(plus one XML per distinct node) for several; rankmap map "
                             "--topology FILE reads it back")
    parser.add_argument("--max-lines", type=values.count(1), default=200, metavar="N",
                        help="longest tree printed (default 200 lines)")


def build_topology(args):
    """The topology the options describe."""
    from ..topology import load_topology
    from ..topology.cluster import (cluster_from_xmls, compose_cluster, host_slot_pes,
                                    parse_network, restrict_to_slots)
    from ..topology.gpu_nodes import load_gpu_node
    from ..topology.hosts import expand_nodelist, parse_hostfile
    from ..topology.hwloc_gpus import read_hwloc_gpus
    from ..topology.live import affinity_pes, discover_local, discover_local_xml
    from ..topology.switches import load_switches

    arities, net_dists = parse_network(args.network, args.network_distances)
    hosts = expand_nodelist(args.nodes) if args.nodes else None
    slots = parse_hostfile(args.hostfile) if args.hostfile else None
    if slots is not None:
        if hosts is not None:
            raise ValueError("give either --nodes or --hostfile, not both")
        hosts = [h for h, _ in slots]
    switches = load_switches(args.switches, hosts or []) if args.switches else None
    clustered = hosts is not None or arities or net_dists or switches is not None
    if args.topology:
        if clustered or args.level_distances:
            raise ValueError("--topology FILE takes no cluster or distance options "
                             "(describe the cluster in the file)")
        return load_topology(args.topology)
    if (args.affinity or args.no_lstopo) and args.xml:
        raise ValueError("--affinity and --no-lstopo go with --live")
    if args.gpu_node or args.per == "gpu":
        if args.gpu_node:
            node = load_gpu_node(args.gpu_node)
        else:
            xml = args.xml[0] if args.xml else discover_local_xml()
            if xml is None or (args.xml and len(args.xml) > 1):
                raise ValueError("--per gpu reads one hwloc XML with GPUs (--xml FILE, or lstopo here)")
            node = read_hwloc_gpus(xml)
        topo = (compose_cluster([(h, node) for h in hosts or node.hosts()], arities, net_dists,
                                switches=switches) if clustered else node)
    elif args.xml:
        topo = cluster_from_xmls(args.xml, hosts, arities, net_dists, args.level_distances,
                                 switches=switches)
    else:
        node = discover_local(args.level_distances, use_lstopo=not args.no_lstopo)
        if args.affinity:
            node = restrict_to_slots(node, affinity_pes(node))
        topo = (compose_cluster([(h, node) for h in (hosts or node.hosts())], arities, net_dists,
                                switches=switches) if clustered else node)
    if slots is not None:
        topo = restrict_to_slots(topo, host_slot_pes(topo, slots))
    return topo


def run(args) -> int:
    from ..topology.describe import describe_topology, format_topology

    topo = build_topology(args)
    if args.export:
        from ..topology.export import write_topology

        for path in write_topology(topo, args.export):
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(describe_topology(topo), indent=2))
    else:
        print(format_topology(topo, max_lines=args.max_lines))
    return 0
