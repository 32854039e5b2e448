"""liballprof PMPI text traces: one file per rank (``pmpi-trace-rank-N.txt``,
N the COMM_WORLD rank), one line per MPI call:

``MPI_Name:t_start:ARG:ARG:...:t_end`` with the arguments in the C
prototype's order: a buffer or handle as a number, a datatype as
``id,size,extent``, a communicator as ``handle,rank,size`` (the caller's
rank in it and its size), a count array as its address then ``c0,c1,...``.

Sends give exact bytes (count x type size) per pair; collectives are
attributed to pairs with the profiler's models.  A communicator is resolved
to world ranks only when it spans COMM_WORLD in the same order (size =
world size and each caller's rank in it = its world rank); a smaller one
is refused, since the trace does not record its members.  The ``# host``
header line gives each rank's host.
"""

from __future__ import annotations

import glob
import os
import re

from ..trace import Trace
from .common import FormatError, _err
from .traffic_table import PairTable, Progress, add_collective

_NAME = re.compile(r"^(.*?)(\d+)(\.[^.]*)$")
_HEADERS = ("# htor's PMPI Tracer", "# collprof")

# argument kinds after t_start: p pointer/handle, i integer, d datatype,
# c communicator, o op, v count array (two fields: address, values), r request
_SPECS = {
    **{f"MPI_{n}": "pidiic" for n in ("Send", "Bsend", "Ssend", "Rsend")},
    **{f"MPI_{n}": "pidiicr" for n in ("Isend", "Ibsend", "Issend", "Irsend")},
    "MPI_Sendrecv": "pidiipidiicr",
    "MPI_Sendrecv_replace": "pidiiiicr",
    "MPI_Bcast": "pidic",
    "MPI_Reduce": "ppidoic",
    "MPI_Allreduce": "ppidoc",
    "MPI_Scan": "ppidoc",
    "MPI_Exscan": "ppidoc",
    "MPI_Gather": "pidpidic",
    "MPI_Scatter": "pidpidic",
    "MPI_Allgather": "pidpidc",
    "MPI_Alltoall": "pidpidc",
    "MPI_Gatherv": "pidpvvdic",
    "MPI_Scatterv": "pvvdpidic",
    "MPI_Allgatherv": "pidpvvdc",
    "MPI_Alltoallv": "pvvdpvvdc",
    "MPI_Reduce_scatter": "ppvdoc",
    "MPI_Reduce_scatter_block": "ppidoc",
    "MPI_Barrier": "c",
}
_UNSUPPORTED = {
    **{f"MPI_{n}_init": "persistent sends" for n in ("Send", "Bsend", "Ssend", "Rsend")},
    **{f"MPI_{n}": "one-sided communication" for n in ("Put", "Get", "Accumulate")},
}


def trace_files(path: str) -> list[tuple[int, str]]:
    """(world rank, file) of the whole trace, from its directory or any one
    of its files."""
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*.txt")))
        files = [f for f in files if _looks_like(f)]
        if not files:
            raise FormatError(f"{path}: no liballprof trace files in this directory")
        m = _NAME.match(os.path.basename(files[0]))
    else:
        m = _NAME.match(os.path.basename(path))
        if m is None:
            raise FormatError(f"{path}: a liballprof file name ends in the rank number "
                              "(pmpi-trace-rank-N.txt)")
    folder = path if os.path.isdir(path) else os.path.dirname(path) or "."
    prefix, suffix = m.group(1), m.group(3)
    out = []
    for f in glob.glob(os.path.join(glob.escape(folder), glob.escape(prefix) + "*" + glob.escape(suffix))):
        mm = _NAME.match(os.path.basename(f))
        if mm and mm.group(1) == prefix and mm.group(3) == suffix:
            out.append((int(mm.group(2)), f))
    out.sort()
    ranks = [r for r, _ in out]
    if ranks != list(range(len(ranks))):  # the first rank without its file
        missing = next(r for r in range(len(ranks) + 1) if r >= len(ranks) or ranks[r] != r)
        raise FormatError(f"{folder}: liballprof trace lacks the file of rank {missing} "
                          f"({prefix}{missing}{suffix})")
    return out


def _looks_like(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.readline(4096).startswith(_HEADERS)  # bounded: a sniff of any file
    except OSError:
        return False


def is_liballprof(path: str) -> bool:
    if os.path.isdir(path):
        return any(_looks_like(f) for f in sorted(glob.glob(os.path.join(path, "*.txt")))[:3])
    return _looks_like(path)


def read_liballprof(path: str, collectives: str = "tree") -> Trace:
    files = trace_files(path)
    p = len(files)
    table = PairTable()
    hosts = [None] * p
    total = sum(os.path.getsize(f) for _, f in files)
    with Progress(total, "reading liballprof") as bar:
        for rank, f in files:
            hosts[rank] = _read_rank(f, rank, p, table, collectives, bar)
    return table.to_trace(p, hosts, path, "liballprof", collectives)


def _read_rank(path: str, rank: int, p: int, table: PairTable, model: str, bar) -> str | None:
    host = None
    finalized = False
    world = range(p)
    with open(path, encoding="utf-8", errors="replace") as fh:
        for no, line in enumerate(fh, 1):
            bar.update(len(line))
            if line.startswith("#"):
                if line.startswith(("# host:", "# hostname:")):
                    # liballprof writes "hostname.domainname"; no domain leaves "host." or
                    # "host.(none)"
                    host = line.split(":", 1)[1].strip().removesuffix("(none)").rstrip(".") or None
                continue
            if not line.strip():
                continue
            name = line.split(":", 1)[0]
            if not name.startswith("MPI_"):
                raise _err(path, no, f"not a liballprof event line: {line.strip()[:60]!r}")
            if name == "MPI_Finalize":
                finalized = True
            spec = _SPECS.get(name)
            if spec is None:
                if name in _UNSUPPORTED:
                    raise _err(path, no, f"{name}: {_UNSUPPORTED[name]} are not read from "
                                         "liballprof traces")
                continue
            args = _parse(path, no, line, spec, rank, p)
            try:
                _count(table, model, name, args, rank, world)
            except ValueError as exc:
                raise _err(path, no, str(exc)) from None
    if not finalized:
        raise FormatError(f"{path}: no MPI_Finalize line: the trace is truncated (liballprof "
                          "writes its last buffer at MPI_Finalize)")
    return host


def _parse(path, no, line, spec, rank, p) -> list:
    tokens = line.rstrip("\n").split(":")
    need = 3 + len(spec) + spec.count("v")
    if len(tokens) != need:
        raise _err(path, no, f"{tokens[0]} needs {need - 1} ':'-separated fields, got "
                             f"{len(tokens) - 1} (truncated or another tracer version?)")
    out = []
    k = 2
    try:
        float(tokens[-1])
        for kind in spec:
            tok = tokens[k]
            k += 1
            if kind == "i":
                out.append(int(tok))
            elif kind == "d":
                out.append(int(tok.split(",")[1]))  # the type's size in bytes
            elif kind == "c":
                _, crank, csize = (int(x) for x in tok.split(","))
                if csize != p or crank != rank:
                    raise _err(path, no, f"communicator of {csize} ranks where this rank is "
                                         f"{crank}: only communicators spanning COMM_WORLD in its "
                                         "order can be resolved to world ranks")
                out.append(csize)
            elif kind == "v":
                out.append([int(x) for x in tokens[k].split(",")])
                k += 1
            else:
                out.append(None)
    except FormatError:
        raise
    except (ValueError, IndexError):
        raise _err(path, no, f"malformed {tokens[0]} fields: {line.strip()[:80]!r}") from None
    return out


def _count(table, model, name, a, rank, world) -> None:
    """Sends of one call (``a``: the parsed arguments by position)."""
    op = name[4:].lower()
    if name in ("MPI_Send", "MPI_Bsend", "MPI_Ssend", "MPI_Rsend", "MPI_Isend", "MPI_Ibsend",
                "MPI_Issend", "MPI_Irsend", "MPI_Sendrecv", "MPI_Sendrecv_replace"):
        count, size, dest = a[1], a[2], a[3]
        if count < 0 or size < 0:
            raise ValueError(f"{name}: a count of {count} elements of {size} bytes")
        if 0 <= dest < len(world):
            table.add("p2p", rank, dest, float(count * size))
        elif dest >= len(world):
            raise ValueError(f"{name}: destination {dest} outside COMM_WORLD")
        return
    if op == "barrier":
        return
    if op == "bcast":
        add_collective(table, model, "bcast", rank, world, a[3], unit=a[1] * a[2])
    elif op in ("reduce",):
        add_collective(table, model, "reduce", rank, world, a[5], unit=a[2] * a[3])
    elif op in ("allreduce", "scan", "exscan"):
        add_collective(table, model, "scan" if "scan" in op else op, rank, world,
                       unit=a[2] * a[3])
    elif op == "gather":
        add_collective(table, model, "gather", rank, world, a[6], unit=a[1] * a[2])
    elif op == "scatter":
        add_collective(table, model, "scatter", rank, world, a[6], unit=a[4] * a[5])
    elif op == "allgather":
        add_collective(table, model, "allgather", rank, world, unit=a[1] * a[2])
    elif op == "alltoall":
        add_collective(table, model, "alltoall", rank, world, per_peer=[a[1] * a[2]] * len(world))
    elif op == "gatherv":
        add_collective(table, model, "gather", rank, world, a[7], unit=a[1] * a[2])
    elif op == "allgatherv":
        add_collective(table, model, "allgather", rank, world, unit=a[1] * a[2])
    elif op == "scatterv":
        root = a[7]
        if rank == root:
            per_peer = [c * a[3] for c in a[1]]
            if model == "root":
                add_collective(table, model, "scatter", rank, world, root, per_peer=per_peer)
            else:
                add_collective(table, model, "scatter", rank, world, root,
                               unit=sum(per_peer) / len(per_peer))
        else:
            add_collective(table, model, "scatter", rank, world, root, unit=a[5] * a[6])
    elif op == "alltoallv":
        add_collective(table, model, "alltoall", rank, world, per_peer=[c * a[3] for c in a[1]])
    elif op == "reduce_scatter":
        add_collective(table, model, "reduce_scatter", rank, world,
                       unit=sum(a[2]) * a[3] / len(world))
    elif op == "reduce_scatter_block":
        add_collective(table, model, "reduce_scatter", rank, world, unit=a[2] * a[3])
