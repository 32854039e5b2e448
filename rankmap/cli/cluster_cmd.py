"""Turn this machine into a small emulated cluster and run MPI jobs on it.

Each node is a network namespace with its own host name (node0, node1, ...,
or the names --hosts gives, e.g. cn[01-04]);
links between nodes are rate limited with tc tbf, so bytes between nodes cost
real time.  Needs root and the ip, tc, unshare, hostname tools.

  rankmap cluster up --nodes 4 --slots 2 --bandwidth 200mbit    prints NAME
  rankmap cluster up --nodes 4 --hosts cn[01-04]                 real-looking host names
  rankmap cluster run NAME --order round-robin -- python app.py
  rankmap cluster run NAME --machinefile order.hydra -- python app.py
  rankmap cluster topology NAME > cluster.topo    for rankmap map --topology
  rankmap cluster list
  rankmap cluster down NAME
"""

from __future__ import annotations

import subprocess
import sys

from . import UserError, values
from ..emulate import (ClusterError, ClusterSpec, EmulatedCluster, check_hydra, list_clusters,
                       load_cluster, teardown)

NAME = "cluster"
HELP = "emulated multi-node cluster on this machine (up, run, list, down)"
ORDER = 80


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="build a cluster that stays up until 'down'; prints its name")
    up.add_argument("--nodes", type=values.count(1), required=True, help="number of nodes (namespaces)")
    up.add_argument("--slots", type=values.count(1), default=2, help="ranks per node in block order (default 2)")
    up.add_argument("--bandwidth", default="200mbit",
                    help="rate of each node's link, each direction (tc units; default 200mbit)")
    up.add_argument("--racks", type=values.count(1), default=1,
                    help="split the nodes into this many racks under a top switch (default 1)")
    up.add_argument("--rack-bandwidth", default=None,
                    help="rate of each rack uplink (default: --bandwidth)")
    up.add_argument("--hosts", default="", metavar="NODELIST",
                    help="the nodes' host names, Slurm hostlist syntax (e.g. cn[01-04]; "
                         "default node0, node1, ...)")

    run = sub.add_parser("run", help="run an MPI program on a cluster (mpiexec across its nodes)")
    run.add_argument("name", help="cluster name printed by 'up'")
    run.add_argument("-n", type=int, default=None, help="number of ranks (default nodes x slots)")
    run.add_argument("--order", choices=["block", "round-robin"], default="block",
                     help="default placement of ranks on nodes (default block)")
    run.add_argument("--ppn", type=int, default=None, help="ranks per node in block order")
    run.add_argument("--machinefile", default=None,
                     help="hydra machinefile (host:count lines) instead of --order, "
                          "e.g. from 'rankmap map ... --as hydra'")
    run.add_argument("--show", action="store_true", help="print the mpiexec command, run nothing")
    run.add_argument("program", nargs="+", help="the program and its arguments (after --)")

    topo = sub.add_parser("topology", help="print the cluster's topology file (rankmap map --topology)")
    topo.add_argument("name", help="cluster name printed by 'up'")

    sub.add_parser("list", help="list clusters that are up")
    down = sub.add_parser("down", help="remove clusters")
    down.add_argument("names", nargs="+", help="cluster names")


def run(args) -> int:
    try:
        return _run(args)
    except ClusterError as exc:
        raise UserError(str(exc)) from None


def _run(args) -> int:
    if args.action == "up":
        spec = ClusterSpec(nodes=args.nodes, slots=args.slots, bandwidth=args.bandwidth,
                           racks=args.racks, rack_bandwidth=args.rack_bandwidth, names=args.hosts)
        cluster = EmulatedCluster(spec).up(persist=True)
        print(cluster.name)
        print(f"# {spec.nodes} nodes ({', '.join(spec.hosts)}) on {cluster.subnet}, "
              f"{spec.bandwidth} links; remove with: rankmap cluster down {cluster.name}",
              file=sys.stderr)
        return 0
    if args.action == "list":
        for state in list_clusters():
            spec = state["spec"]
            owner = ("persistent" if state.get("persist") else
                     f"owner pid {state['owner_pid']}" + ("" if state["owner_alive"] else " (dead: stale)"))
            print(f"{state['name']}\t{spec['nodes']} nodes x {spec['slots']} slots\t"
                  f"{spec['bandwidth']}\t{state['subnet']}\t{owner}")
        return 0
    if args.action == "down":
        for name in args.names:
            if teardown(name) == 0:
                raise UserError(f"no emulated cluster {name!r} here (see 'rankmap cluster list')")
        return 0
    cluster = load_cluster(args.name)
    if args.action == "topology":
        print(cluster.spec.topology_file_text(), end="")
        return 0
    cmd = cluster.mpiexec(args.n, order=args.order, ppn=args.ppn,
                          machinefile=args.machinefile) + list(args.program)
    check_hydra(cmd[0])
    if args.show:
        print(subprocess.list2cmdline(cmd))
        return 0
    return subprocess.call(cmd)
