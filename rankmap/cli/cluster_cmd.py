"""Turn this machine into a small emulated cluster and run MPI jobs on it.

Each node is a network namespace with its own host name (node0, node1, ...,
or the names --hosts gives, e.g. cn[01-04]);
links between nodes are rate limited with tc tbf, so bytes between nodes cost
real time.  Needs root and the ip, tc, unshare, hostname tools.

  rankmap cluster up --nodes 4 --slots 2 --bandwidth 200mbit    prints NAME
  rankmap cluster up --nodes 4 --hosts cn[01-04]                 real-looking host names
  rankmap cluster run NAME --order round-robin -- python app.py
  rankmap cluster run NAME --machinefile order.hydra -- python app.py
  rankmap cluster run NAME --mpi openmpi --order round-robin -- ./app     an Open MPI program
  rankmap cluster run NAME -- mpiexec -f launch/machinefile -n 16 ...     a line rankmap map printed
  rankmap cluster run NAME -- mpirun -n 16 --rankfile launch/rankfile ...
  rankmap cluster topology NAME > cluster.topo    for rankmap map --topology
  rankmap cluster list
  rankmap cluster down NAME
"""

from __future__ import annotations

import os
import subprocess
import sys

from . import UserError, values
from ..emulate import (ClusterError, ClusterSpec, EmulatedCluster, list_clusters, load_cluster,
                       teardown)
from ..emulate.cluster import MPI_INSTALL, MPI_NAMES
from ..emulate.launchers import MPIS, find_launcher, is_launcher, program_mpi

NAME = "cluster"
#: ``run``'s program comes after ``--``, verbatim (``rankmap.cli.TAIL_DEST``)
TAKES_PROGRAM = True
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

    run = sub.add_parser(
        "run", help="run an MPI program on a cluster, or a launch line rankmap map printed",
        description="Run PROGRAM across the cluster's nodes in an order (--order, --machinefile, "
                    "--rankfile), or run a whole launch line (one rankmap map prints: mpiexec ... or "
                    "mpirun ...) with the emulation's options put after its launcher. MPICH "
                    "programs run under hydra (mpiexec), Open MPI programs under Open MPI's "
                    "mpirun: --mpi chooses, else the launch line's options, else the MPI library "
                    "the program loads, else hydra.")
    run.add_argument("name", help="cluster name printed by 'up'")
    run.add_argument("--mpi", choices=["auto", *MPIS], default="auto",
                     help="the MPI the program was built with (default auto: see above)")
    run.add_argument("-n", type=int, default=None, help="number of ranks (default nodes x slots)")
    run.add_argument("--order", choices=["block", "round-robin"], default="block",
                     help="default placement of ranks on nodes (default block)")
    run.add_argument("--ppn", type=int, default=None, help="ranks per node in block order")
    run.add_argument("--machinefile", default=None,
                     help="hydra machinefile (host:count lines) instead of --order, "
                          "e.g. from 'rankmap map ... --as hydra'")
    run.add_argument("--rankfile", default=None,
                     help="Open MPI rankfile instead of --order, e.g. from 'rankmap map ... --as openmpi'")
    run.add_argument("--show", action="store_true", help="print the command, run nothing")
    run.add_argument("program", nargs="*",
                     help="the program and its arguments, or a whole launch line (after --)")

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
    if not args.program:
        raise UserError("no program to run: give it after --, e.g. rankmap cluster run NAME -- ./app")
    cmd, env = _command(cluster, args)
    if args.show:
        print(" ".join(f"{k}={v}" for k, v in env.items()) + (" " if env else "")
              + subprocess.list2cmdline(cmd))
        return 0
    return subprocess.call(cmd, env={**os.environ, **env})


def _command(cluster, args) -> tuple[list[str], dict]:
    """The command (and environment) that runs ``args.program`` on the cluster."""
    mpi = None if args.mpi == "auto" else args.mpi
    program = list(args.program)
    if is_launcher(program[0]):
        given = [o for o, v in (("-n", args.n), ("--ppn", args.ppn), ("--machinefile", args.machinefile),
                                ("--rankfile", args.rankfile)) if v is not None]
        if given:
            raise UserError(f"{', '.join(given)}: the launch line {program[0]} ... places the ranks "
                            "itself; give either a launch line or the program with its placement")
        return cluster.launch(program, mpi)
    if args.machinefile and args.rankfile:
        raise UserError("--machinefile is hydra's, --rankfile Open MPI's: give one")
    mpi = mpi or ("openmpi" if args.rankfile else "mpich" if args.machinefile else None) \
        or program_mpi(program[0]) or "mpich"
    exe = find_launcher(mpi)
    if exe is None:
        raise UserError(f"no {MPI_NAMES[mpi]} launcher beside this Python or on PATH ({MPI_INSTALL[mpi]})")
    if mpi == "openmpi":
        if args.machinefile:
            raise UserError("--machinefile is a hydra machinefile: give Open MPI a --rankfile "
                            "(rankmap map ... --as openmpi)")
        cmd, env = cluster.mpirun_order(exe, args.n, order=args.order, ppn=args.ppn, rankfile=args.rankfile)
        return cmd + program, env
    if args.rankfile:
        raise UserError("--rankfile is Open MPI's: give hydra a --machinefile (rankmap map ... --as hydra)")
    return cluster.mpiexec(args.n, order=args.order, ppn=args.ppn, machinefile=args.machinefile,
                           mpiexec=exe) + program, {}
