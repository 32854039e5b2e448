"""Score a mapping made by anyone (rankmap, Scotch, KaHIP/VieM, a launcher).

The mapping file is a perm file (line t is the PE of task t, PEs numbered as
the machine's leaves left to right: the KaHIP/VieM convention) or any launch
file rankmap map writes (MPICH_RANK_ORDER, hydra machinefile, Open MPI
rankfile, Slurm hostfile, bindings), placed on the machine as its launcher
places ranks.  J uses the same cost function as every rankmap report.

example:
  rankmap eval app.mat --mapping scotch.map --hierarchy 4:16:8 --distances 1:10:100
  rankmap eval trace.rmtrace.npz --mapping launch/rankfile
"""

from __future__ import annotations

import sys

import numpy as np

from ..cost import evaluate, phased_link_time
from ..formats.launch_files import read_launch_file
from ..mapping import balance_report, validate_mapping
from . import UserError, values
from .common import (add_graph_arguments, add_topology_arguments, check_fits, dump_json,
                     load_graph, load_machine, phase_graphs, print_comparison, recorded_replay)

NAME = "eval"
HELP = "score a mapping file (J, bytes per level, bottleneck)"
ORDER = 30


def add_arguments(p) -> None:
    add_graph_arguments(p)
    add_topology_arguments(p)
    p.add_argument("--mapping", required=True, metavar="FILE",
                   help="permutation file (line t = PE of task t) or a launch file rankmap map "
                        "wrote (format detected)")
    p.add_argument("--eps", type=values.eps, default=None,
                   help="balance tolerance when tasks outnumber PEs, e.g. 0.03 (needed then)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args) -> int:
    graph = load_graph(args)
    topology, _ = load_machine(args, graph_source=args.input)
    check_fits(graph, topology, args.eps)
    placement = read_launch_file(args.mapping, graph.n)
    pe = placement.pe_of_task(topology)
    try:
        validate_mapping(pe, graph, topology, eps=args.eps)
    except ValueError as exc:  # the mapping file is what is wrong: name it
        raise UserError(f"{args.mapping}: {exc}") from None
    if placement.hosts_only and not args.json:
        print(f"note: {args.mapping} places ranks on hosts only: the ranks of a host take its PEs "
              "in rank order, as a launcher binds them without rankmap-bind (the bindings file "
              "beside it gives rankmap's placement inside each host)", file=sys.stderr)
    from ..algorithms import map_tasks

    identity = map_tasks(graph, topology, method="identity", eps=args.eps).pe_of_task
    before = evaluate(graph, topology, identity, check=False)
    after = evaluate(graph, topology, pe, check=False)
    balance = balance_report(pe, graph.vertex_weights, topology.n_pes,
                             0.03 if args.eps is None else args.eps)
    if args.json:
        dump_json({"n_tasks": graph.n, "n_pes": topology.n_pes, "J": after.J,
                   "J_identity": before.J, "bytes_per_level": after.bytes_per_level,
                   "bottleneck": after.bottleneck, "hops_per_byte": after.hops_per_byte,
                   "link_time": after.link_time, "link_time_unit": after.link_time_unit,
                   "busiest_link": after.busiest_link, "busiest_link_bytes": after.busiest_link_bytes,
                   **{k: v for k, v in after.as_dict().items() if k.startswith("time")},
                   "balance": balance, "mapping": args.mapping})
        return 0
    print(f"{graph.n} tasks on {topology.n_pes} PEs; mapping {args.mapping}")
    phases = phase_graphs(args)
    phased = (phased_link_time(phases, topology, identity), phased_link_time(phases, topology, pe)) \
        if phases else None
    given = recorded_replay(args, topology, identity)
    replays = None if given is None else \
        (given, given if np.array_equal(pe, identity) else recorded_replay(args, topology, pe))
    print_comparison("identity", "mapping", before, after, phased, replays)
    if graph.n > topology.n_pes:
        print(f"max PE load {balance['max_load']:g} (L_max {balance['L_max']}, "
              f"SharedMap rule {balance['L_max_sharedmap']})")
    return 0
