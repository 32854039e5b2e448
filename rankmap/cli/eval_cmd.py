"""Score a mapping made by anyone (rankmap, Scotch, KaHIP/VieM, a launcher).

The mapping file has one integer per line: line t is the PE of task t, PEs
numbered as the machine's leaves left to right (the KaHIP/VieM convention).
J uses the same cost function as every rankmap report.

example:
  rankmap eval app.mat --mapping scotch.map --hierarchy 4:16:8 --distances 1:10:100
"""

from __future__ import annotations

from ..cost import evaluate, phased_link_time
from ..formats import read_perm
from ..mapping import balance_report, validate_mapping
from . import UserError, values
from .common import (add_graph_arguments, add_topology_arguments, dump_json, load_graph, phase_graphs,
                     load_machine, print_comparison)

NAME = "eval"
HELP = "score a mapping file (J, bytes per level, bottleneck)"
ORDER = 30


def add_arguments(p) -> None:
    add_graph_arguments(p)
    add_topology_arguments(p)
    p.add_argument("--mapping", required=True, metavar="FILE",
                   help="permutation file: line t = PE of task t")
    p.add_argument("--eps", type=values.eps, default=None,
                   help="balance tolerance when tasks outnumber PEs (default 0.03)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args) -> int:
    graph = load_graph(args)
    topology, _ = load_machine(args, graph_source=args.input)
    pe = read_perm(args.mapping)
    try:
        validate_mapping(pe, graph, topology, eps=args.eps)
    except ValueError as exc:  # the mapping file is what is wrong: name it
        raise UserError(f"{args.mapping}: {exc}") from None
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
                   "balance": balance, "mapping": args.mapping})
        return 0
    print(f"{graph.n} tasks on {topology.n_pes} PEs; mapping {args.mapping}")
    phases = phase_graphs(args)
    phased = (phased_link_time(phases, topology, identity), phased_link_time(phases, topology, pe)) \
        if phases else None
    print_comparison("identity", "mapping", before, after, phased)
    if graph.n > topology.n_pes:
        print(f"max PE load {balance['max_load']:g} (L_max {balance['L_max']}, "
              f"SharedMap rule {balance['L_max_sharedmap']})")
    return 0
