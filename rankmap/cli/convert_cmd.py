"""Convert a communication graph or trace between formats.

The output format comes from --to or the extension: .graph/.metis (METIS,
symmetric S = B + B^T), .mtx (Matrix Market, directed), .edges/.csv/.txt
(edge list 'src dst bytes [messages]'), .mat (dense TreeMatch matrix).

example:
  rankmap convert trace.rmtrace.npz -o app.mtx
  rankmap convert ompi_prof_dir -o app.mat
"""

from __future__ import annotations

from ..formats import WRITE_FORMATS, write_graph
from .common import add_graph_arguments, load_graph

NAME = "convert"
HELP = "convert a graph or trace to METIS, Matrix Market, edge list or dense"
ORDER = 40


def add_arguments(p) -> None:
    add_graph_arguments(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="file to write")
    p.add_argument("--to", choices=WRITE_FORMATS, default=None,
                   help="output format (default: from the extension)")


def run(args) -> int:
    graph = load_graph(args)
    fmt = write_graph(graph, args.output, args.to)
    print(f"wrote {graph.n} tasks, {graph.n_edges} pairs as {fmt} to {args.output}")
    if graph.self_bytes:
        print(f"note: {graph.self_bytes:.6g} bytes of self-traffic were dropped")
    return 0
