"""The one entry to the graph readers and writers: format detection,
``read_graph`` and ``write_graph``.

Every reader returns a ``CommGraph`` and reports bad input as
``FormatError("FILE:LINE: what is wrong")``.  Formats (one module each):

- ``metis``  METIS graph (``metis``)
- ``mtx``    Matrix Market (``matrix_market``)
- ``edges``  ``src dst bytes [messages]`` per line (``edge_list``)
- ``dense``  square matrix, one row per line (``dense``)
- ``ompi``   Open MPI pml monitoring ``*.prof`` (``openmpi_monitoring``)
- ``eztrace`` EZTrace ``eztrace_stats`` output (``eztrace``)
- ``trace``  a rankmap trace (see ``rankmap.trace``)

``weights`` selects how matrix values become bytes: ``values`` (default;
negative values are an error), ``abs``, or ``unit`` (structure only).
"""

from __future__ import annotations

import glob
import os
import re

from ..graph import CommGraph
from .common import FormatError
from .dense import read_dense, write_dense
from .edge_list import read_edge_list, write_edge_list
from .eztrace import EZTRACE_SIZE, read_eztrace
from .matrix_market import read_matrix_market, write_matrix_market
from .metis import read_metis, write_metis
from .openmpi_monitoring import read_ompi_monitoring

GRAPH_FORMATS = ["metis", "mtx", "edges", "dense", "ompi", "eztrace", "trace"]
WRITE_FORMATS = ["metis", "mtx", "edges", "dense"]


def detect_format(path: str) -> str:
    """Guess the format from the name, then from the first data line."""
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, EZTRACE_SIZE)):
            return "eztrace"
        if glob.glob(os.path.join(path, "*.prof")):
            return "ompi"
        raise FormatError(f"{path}: directory holds neither EZTrace stats nor Open MPI *.prof files")
    if _is_trace(path):
        return "trace"
    name = os.path.basename(path).lower()
    if name.endswith((".graph", ".metis", ".mgraph")):
        return "metis"
    if name.endswith(".mtx"):
        return "mtx"
    if name.endswith(".prof"):
        return "ompi"
    if name.endswith(".mat"):
        return "dense"
    if name.startswith("communication_matrix") and name.endswith(".dat"):
        return "eztrace"
    with open(path, encoding="utf-8", errors="replace") as fh:
        first = ""
        for line in fh:
            if line.startswith("%%MatrixMarket"):
                return "mtx"
            if line.strip() and not line.lstrip().startswith(("#", "%")):
                first = line
                break
    if re.match(r"^[EI]\t\d+\t\d+\t\d+ bytes", first):
        return "ompi"
    fields = [t for t in re.split(r"[,\s]+", first.strip()) if t]
    if name.endswith((".csv", ".dat", ".txt")) and len(fields) > 4:
        return "dense"
    if 3 <= len(fields) <= 4:
        return "edges"
    if len(fields) > 4:
        return "dense"
    raise FormatError(f"{path}: cannot tell the format; give it with --format ({', '.join(GRAPH_FORMATS)})")


def _is_trace(path: str) -> bool:
    try:
        from .. import trace
    except ImportError:
        return False
    return trace.is_trace(path)


def read_graph(path: str, fmt: str = "auto", weights: str = "values",
               include_internal: bool = False, traffic: str = "all") -> CommGraph:
    """Read a communication graph; ``fmt='auto'`` detects the format.

    ``traffic`` picks what a rankmap trace contributes: ``p2p``
    (point-to-point and one-sided), ``collective`` (as the recorded
    collective model attributed it to pairs) or ``all``."""
    path = os.fspath(path)
    if not os.path.exists(path) and fmt != "ompi":
        raise FileNotFoundError(f"{path}: no such file")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "metis":
        g = read_metis(path)
    elif fmt == "mtx":
        g = read_matrix_market(path, weights)
    elif fmt == "edges":
        g = read_edge_list(path)
    elif fmt == "dense":
        g = read_dense(path, weights)
    elif fmt == "ompi":
        g = read_ompi_monitoring(path, include_internal)
    elif fmt == "eztrace":
        g = read_eztrace(path)
    elif fmt == "trace":
        from ..trace import read_trace

        g = read_trace(path).graph(kind=traffic)
    else:
        raise ValueError(f"unknown graph format {fmt!r}; choose from auto, {', '.join(GRAPH_FORMATS)}")
    g.name = g.name or os.path.basename(path.rstrip("/"))
    return g


WRITERS = {"metis": write_metis, "mtx": write_matrix_market, "edges": write_edge_list,
           "dense": write_dense}


def format_from_extension(path: str) -> str | None:
    name = path.lower()
    for ext, fmt in ((".graph", "metis"), (".metis", "metis"), (".mtx", "mtx"),
                     (".edges", "edges"), (".csv", "edges"), (".txt", "edges"), (".mat", "dense")):
        if name.endswith(ext):
            return fmt
    return None


def write_graph(graph: CommGraph, path: str, fmt: str | None = None) -> str:
    """Write ``graph``; the format comes from ``fmt`` or the file extension."""
    fmt = fmt or format_from_extension(path)
    if fmt not in WRITERS:
        raise ValueError(f"cannot tell the output format of {path!r}; give one of "
                         f"{', '.join(WRITE_FORMATS)}")
    WRITERS[fmt](graph, path)
    return fmt
