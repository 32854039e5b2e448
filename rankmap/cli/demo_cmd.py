"""Map a bundled real application onto a bundled machine, end to end.

Reads NPB BT-MZ's recorded traffic on 64 ranks (MapLib data) and a 4-node
cluster of real PlaFRIM nodes (hwloc export: 2 sockets x 4 cores x 2 hardware
threads each, one switch), maps with the chosen method, prints J
before (launch order) and after, and writes every launch file format to
the output directory.
"""

from __future__ import annotations

from importlib import resources

from ..algorithms import map_tasks
from ..cost import evaluate
from ..formats import read_graph, write_all_launch_files
from ..topology import load_topology
from . import values
from .common import launch_notes, print_comparison, print_relaunch

NAME = "demo"
HELP = "run the whole pipeline on a bundled trace and machine"
ORDER = 10

def add_arguments(p) -> None:
    p.add_argument("-d", "--output-dir", default="rankmap-demo",
                   help="where to write the launch files (default: ./rankmap-demo)")
    p.add_argument("--method", default="auto", metavar="METHOD",
                   help="mapping method (default auto; `rankmap map --methods` lists them)")
    p.add_argument("--seed", type=values.seed, default=0)


def bundled(name: str) -> str:
    return str(resources.files("rankmap") / "data" / name)


def run(args) -> int:
    graph = read_graph(bundled("btmz64.edges"))
    topology = load_topology(bundled("demo-cluster.txt"))
    print(f"traffic: NPB BT-MZ, {graph.n} ranks, {graph.n_edges} communicating pairs, "
          f"{graph.total_bytes / 2**30:.2f} GiB")
    print(f"machine: {topology.n_pes} PEs on hosts {', '.join(topology.hosts())} "
          "(PlaFRIM devel nodes, hwloc XML)")
    mapping = map_tasks(graph, topology, method=args.method, seed=args.seed)
    identity = map_tasks(graph, topology, method="identity")
    before = evaluate(graph, topology, identity.pe_of_task, check=False)
    after = evaluate(graph, topology, mapping.pe_of_task)
    print()
    print_comparison("launch order", args.method, before, after)
    print(f"mapping time: {mapping.time_s:.3f} s")
    print()
    written = write_all_launch_files(mapping.pe_of_task, topology, args.output_dir)
    print_relaunch(written, graph.n, "./bt-mz.x", launch_notes(written, mapping.pe_of_task, topology))
    return 0
