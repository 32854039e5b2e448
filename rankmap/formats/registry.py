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
- ``otf2``   Score-P OTF2 trace (``otf2``; needs the ``otf2`` extra)
- ``mpip``   mpiP report with its communication matrix (``mpip``)
- ``dumpi``  SST DUMPI trace, ``.meta`` + one ``.bin`` per rank (``dumpi``)
- ``liballprof`` liballprof PMPI text trace, one file per rank (``liballprof``)

The last five are recorded runs: ``read_recorded`` gives them as a
``rankmap.trace.Trace`` (traffic per kind plus each rank's host), which is
what ``map`` uses for the recorded "before" placement and ``show`` prints.

``weights`` selects how matrix values become bytes: ``values`` (default;
negative values are an error), ``abs``, or ``unit`` (structure only).
"""

from __future__ import annotations

import glob
import os
import re

import numpy as np

from ..graph import CommGraph, GraphError
from ..limits import MAX_TOTAL
from . import dumpi, liballprof, mpip
from . import otf2 as otf2_reader
from .common import FormatError, check_readable
from .dense import read_dense, write_dense
from .edge_list import is_header, names_edge_columns, read_edge_list, split_fields, write_edge_list
from .eztrace import EZTRACE_SIZE, read_eztrace
from .matrix_market import read_matrix_market, write_matrix_market
from .metis import read_metis, write_metis
from .openmpi_monitoring import read_ompi_monitoring

GRAPH_FORMATS = ["metis", "mtx", "edges", "dense", "ompi", "eztrace", "trace", "otf2", "mpip",
                 "dumpi", "liballprof"]
RECORDED_FORMATS = ("trace", "otf2", "mpip", "dumpi", "liballprof")
WRITE_FORMATS = ["metis", "mtx", "edges", "dense"]


def detect_format(path: str) -> str:
    """Guess the format from the name, then from the first data line."""
    if _is_trace(path):
        return "trace"
    for fmt, sniff in (("otf2", otf2_reader.is_otf2), ("dumpi", dumpi.is_dumpi),
                       ("liballprof", liballprof.is_liballprof), ("mpip", mpip.is_mpip)):
        if sniff(path):
            return fmt
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, EZTRACE_SIZE)):
            return "eztrace"
        if glob.glob(os.path.join(path, "*.prof")):
            return "ompi"
        raise FormatError(f"{path}: directory holds no trace this reads (OTF2, DUMPI, liballprof, "
                          "EZTrace stats, Open MPI *.prof, rankmap parts)")
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
        head = fh.read(1 << 16)  # the sniff reads a bounded head, whatever the file holds
    first, first_no = "", 0
    for no, line in enumerate(head.splitlines(), 1):
        if line.startswith("%%MatrixMarket"):
            return "mtx"
        if line.strip() and not line.lstrip().startswith(("#", "%")):
            first, first_no = line, no
            break
    if re.match(r"^[EI]\t\d+\t\d+\t\d+ bytes", first):
        return "ompi"
    fields = split_fields(first.split("#", 1)[0])
    if is_header(fields):
        if names_edge_columns(fields):
            return "edges"
        raise FormatError(f"{path}:{first_no}: the first row {first.strip()[:60]!r} is a header "
                          "that names no edge-list columns (src dst bytes [messages]): give "
                          "--format edges or --format dense to say what the rows are")
    if name.endswith((".csv", ".dat", ".txt")) and len(fields) > 4:
        return "dense"
    if 3 <= len(fields) <= 4:
        return "edges"
    if len(fields) > 4:
        return "dense"
    raise FormatError(f"{path}: cannot tell the format; give it with --format ({', '.join(GRAPH_FORMATS)})")


def _is_trace(path: str) -> bool:
    """A rankmap trace, a part or a parts directory; also a file named
    ``*.rmtrace.npz`` or starting as a zip does, which the trace reader then
    says is truncated or damaged."""
    from .. import trace

    if trace.is_trace(path):
        return True
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as fh:
        zip_start = fh.read(4) == b"PK\x03\x04"
    return zip_start or os.path.basename(path).endswith(trace.SUFFIX)


def read_recorded(path: str, fmt: str = "auto", collectives: str = "tree"):
    """The recorded run in ``path`` as a ``rankmap.trace.Trace``, or None
    when ``path`` is a plain graph.  ``collectives`` is the model that turns
    the collectives of OTF2, DUMPI and liballprof traces into pairs (the
    profiler's ``--collectives``; a rankmap trace keeps the model it was
    recorded with, an mpiP matrix has no collectives)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    check_readable(path)
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt not in RECORDED_FORMATS:
        return None
    if fmt == "trace":
        from ..trace import read_trace

        trace = read_trace(path)
    elif fmt == "otf2":
        trace = otf2_reader.read_otf2(path, collectives)
    elif fmt == "mpip":
        trace = mpip.read_mpip(path)
    elif fmt == "dumpi":
        trace = dumpi.read_dumpi(path, collectives)
    else:
        trace = liballprof.read_liballprof(path, collectives)
    _check_totals(trace, path)
    return trace


def _check_totals(trace, path: str) -> None:
    """The recorded counts fit a communication graph (finite, >= 0, in all
    at most ``graph.MAX_TOTAL``), checked once here so that every graph of
    the trace can be built."""
    for field, what in (("bytes", "byte counts"), ("msgs", "message counts")):
        values = [np.asarray(e[field], dtype=np.float64) for e in trace.edges.values()]
        bad = [v[~(v >= 0)][:1] for v in values if v.size and not np.all(v >= 0)]
        if bad:
            raise FormatError(f"{path}: a recorded {what[:-1]} is {bad[0][0]!r}: counts are finite "
                              "and >= 0")
        with np.errstate(over="ignore", invalid="ignore"):
            total = float(sum(v.sum() for v in values))
        if not total <= MAX_TOTAL:
            amount = "past the float range" if total == np.inf else f"to {total:.4g}"
            raise FormatError(f"{path}: recorded {what} sum {amount}, more than the "
                              f"{MAX_TOTAL:.0e} rankmap handles")


def read_graph(path: str, fmt: str = "auto", weights: str = "values",
               include_internal: bool = False, traffic: str = "all",
               collectives: str = "tree") -> CommGraph:
    """Read a communication graph; ``fmt='auto'`` detects the format.

    ``traffic`` picks what a recorded run contributes: ``p2p``
    (point-to-point and one-sided), ``collective`` (as the collective model
    attributed it to pairs) or ``all``; ``collectives`` is that model for
    OTF2, DUMPI and liballprof traces (see ``read_recorded``)."""
    path = os.fspath(path)
    if not os.path.exists(path) and fmt != "ompi":
        raise FileNotFoundError(f"{path}: no such file")
    check_readable(path)
    try:
        g = _read(path, fmt, weights, include_internal, traffic, collectives)
    except GraphError as exc:  # counts no graph holds: the reader's file is what is wrong
        raise FormatError(f"{path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not a text file (byte {exc.start} is not UTF-8); give its "
                          f"format with --format ({', '.join(GRAPH_FORMATS)})") from None
    g.name = g.name or os.path.basename(path.rstrip("/"))
    return g


def _read(path: str, fmt: str, weights: str, include_internal: bool, traffic: str,
          collectives: str) -> CommGraph:
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt in RECORDED_FORMATS:
        g = read_recorded(path, fmt, collectives).graph(kind=traffic)
    elif fmt == "metis":
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
    else:
        raise ValueError(f"unknown graph format {fmt!r}; choose from auto, {', '.join(GRAPH_FORMATS)}")
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
