"""Readers and writers of communication graphs in the field's formats.

Every reader returns a ``CommGraph`` and reports bad input as
``FormatError("FILE:LINE: what is wrong")``.  Formats:

- ``metis``  METIS graph (fmt 0/1/10/11, optional vertex sizes, 1-based;
  edge {u, v} with weight w listed at both ends means B[u,v] = B[v,u] = w)
- ``mtx``    Matrix Market coordinate or array (general/symmetric/pattern)
- ``edges``  ``src dst bytes [messages]`` per line, 0-based, CSV or spaces
- ``dense``  square matrix, one row per line (TreeMatch ``.mat``, Open MPI
  ``profile2mat`` output, MapLib CSV), row = sender
- ``ompi``   Open MPI pml monitoring ``*.prof`` files (``E`` lines; ``I``
  lines too with ``include_internal``), one file, a directory or a prefix
- ``eztrace`` EZTrace ``eztrace_stats`` output: the directory or the
  ``communication_matrix_p2p.message_size.dat`` file (its ``nb_messages``
  twin gives message counts)
- ``trace``  a rankmap trace (see ``rankmap.trace``)

``weights`` selects how matrix values become bytes: ``values`` (default;
negative values are an error), ``abs``, or ``unit`` (structure only).
"""

from __future__ import annotations

import glob
import os
import re

import numpy as np

from ..graph import CommGraph

GRAPH_FORMATS = ["metis", "mtx", "edges", "dense", "ompi", "eztrace", "trace"]
WRITE_FORMATS = ["metis", "mtx", "edges", "dense"]
EZTRACE_SIZE = "communication_matrix_p2p.message_size.dat"
EZTRACE_COUNT = "communication_matrix_p2p.nb_messages.dat"


class FormatError(ValueError):
    """Malformed input; the message names the file and line."""


def _err(path, line_no, msg) -> FormatError:
    where = f"{path}:{line_no}" if line_no else str(path)
    return FormatError(f"{where}: {msg}")


def _numbers(path, line_no, text, cast=float) -> list:
    try:
        return [cast(t) for t in re.split(r"[,\s]+", text.strip()) if t]
    except ValueError:
        raise _err(path, line_no, f"expected numbers, got {text.strip()[:60]!r}") from None


def _apply_weights(values: np.ndarray, weights: str, path) -> np.ndarray:
    if weights == "unit":
        return np.ones_like(values, dtype=np.float64)
    if weights == "abs":
        return np.abs(values)
    if weights != "values":
        raise ValueError(f"weights must be values, abs or unit, not {weights!r}")
    if values.size and values.min() < 0:
        raise FormatError(f"{path}: negative values are not byte counts; read with weights "
                          "'abs' or 'unit' (CLI: --weights abs|unit) to use the matrix structure")
    return values


# ------------------------------------------------------------------ detection
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


# ---------------------------------------------------------------------- METIS
def _data_lines(fh):
    """(line number, text) of lines that are not comments; blank lines are
    kept because a METIS vertex without neighbours is a blank line."""
    for no, line in enumerate(fh, 1):
        if line.startswith("%"):
            continue
        yield no, line


def read_metis(path: str) -> CommGraph:
    with open(path, encoding="utf-8") as fh:
        lines = _data_lines(fh)
        header = None
        for no, line in lines:
            if line.strip():
                header = (no, line)
                break
        if header is None:
            raise _err(path, 0, "empty file: no METIS header 'n m [fmt [ncon]]'")
        hno, htext = header
        head = htext.split()
        if len(head) < 2 or len(head) > 4:
            raise _err(path, hno, f"METIS header must be 'n m [fmt [ncon]]', got {htext.strip()!r}")
        try:
            n, m = int(head[0]), int(head[1])
        except ValueError:
            raise _err(path, hno, f"METIS header must start with integers n m, got {htext.strip()!r}") from None
        fmt = head[2] if len(head) > 2 else "0"
        if not re.fullmatch(r"[01]{1,3}", fmt):
            raise _err(path, hno, f"METIS fmt must be 0, 1, 10, 11, 100, 101, 110 or 111, got {fmt!r}")
        fmt = fmt.zfill(3)
        has_size, has_vw, has_ew = fmt[0] == "1", fmt[1] == "1", fmt[2] == "1"
        ncon = int(head[3]) if len(head) > 3 else (1 if has_vw else 0)
        if len(head) > 3 and not has_vw:
            raise _err(path, hno, "METIS ncon given but fmt has no vertex weights")
        src, dst, wts = [], [], []
        vweights = np.ones(n)
        count = 0
        for no, line in lines:
            if count == n:
                if line.strip():
                    raise _err(path, no, f"more than n = {n} vertex lines")
                continue
            vals = _numbers(path, no, line, int)
            lead = int(has_size) + (ncon if has_vw else 0)
            if len(vals) < lead:
                raise _err(path, no, f"vertex {count + 1}: expected {lead} size/weight values first")
            if has_vw:
                vweights[count] = vals[int(has_size)]
            rest = vals[lead:]
            step = 2 if has_ew else 1
            if len(rest) % step:
                raise _err(path, no, f"vertex {count + 1}: neighbour list must be (neighbour weight) pairs")
            nb = np.asarray(rest[0::step], dtype=np.int64)
            w = np.asarray(rest[1::step], dtype=np.float64) if has_ew else np.ones(nb.size)
            if nb.size and (nb.min() < 1 or nb.max() > n):
                bad = int(nb[(nb < 1) | (nb > n)][0])
                raise _err(path, no, f"vertex {count + 1}: neighbour {bad} outside 1..{n}")
            if nb.size and np.any(nb == count + 1):
                raise _err(path, no, f"vertex {count + 1}: self-loop")
            if has_ew and w.size and w.min() < 0:
                raise _err(path, no, f"vertex {count + 1}: negative edge weight")
            src.append(np.full(nb.size, count, dtype=np.int64))
            dst.append(nb - 1)
            wts.append(w)
            count += 1
        if count < n:
            raise _err(path, 0, f"header says n = {n} vertices but the file has {count} vertex lines")
    s = np.concatenate(src) if src else np.zeros(0, dtype=np.int64)
    d = np.concatenate(dst) if dst else np.zeros(0, dtype=np.int64)
    w = np.concatenate(wts) if wts else np.zeros(0)
    if s.size != 2 * m:
        raise _err(path, hno, f"header says m = {m} edges but the adjacency lists hold {s.size} "
                              f"entries (expected 2m = {2 * m})")
    g = CommGraph.from_edges(s, d, w, n=n, vertex_weights=vweights)
    if not g.is_symmetric():
        diff = (g.bytes - g.bytes.T).tocoo()
        k = int(np.flatnonzero(diff.data)[0])
        u, v = int(diff.row[k]) + 1, int(diff.col[k]) + 1
        raise FormatError(f"{path}: not symmetric: edge {u}-{v} is listed at vertex {u} but not "
                          f"at vertex {v} with the same weight")
    return g


def write_metis(graph: CommGraph, path: str) -> None:
    """Symmetric METIS graph of S = B + B^T with integer edge weights (and
    vertex weights when they are not all one)."""
    s = graph.symmetric
    w = s.data
    if w.size and not np.all(np.equal(np.round(w), w)):
        raise ValueError("METIS needs integer edge weights; these bytes are fractional")
    vw = graph.vertex_weights
    has_vw = not np.all(vw == 1)
    if has_vw and not np.all(np.equal(np.round(vw), vw)):
        raise ValueError("METIS needs integer vertex weights")
    fmt = "11" if has_vw else "1"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f"{graph.n} {s.nnz // 2} {fmt}\n")
        for u in range(graph.n):
            lo, hi = s.indptr[u], s.indptr[u + 1]
            parts = [str(int(vw[u]))] if has_vw else []
            parts += [f"{v + 1} {int(x)}" for v, x in zip(s.indices[lo:hi].tolist(), w[lo:hi].tolist())]
            fh.write(" ".join(parts) + "\n")


# -------------------------------------------------------------- Matrix Market
def read_matrix_market(path: str, weights: str = "values") -> CommGraph:
    with open(path, encoding="utf-8") as fh:
        banner = fh.readline()
        parts = banner.lower().split()
        if len(parts) != 5 or parts[0] != "%%matrixmarket" or parts[1] != "matrix":
            raise _err(path, 1, "Matrix Market banner must be '%%MatrixMarket matrix FORMAT FIELD SYMMETRY'")
        layout, field, symmetry = parts[2], parts[3], parts[4]
        if layout not in ("coordinate", "array") or field not in ("real", "integer", "pattern", "double") \
                or symmetry not in ("general", "symmetric", "skew-symmetric"):
            raise _err(path, 1, f"unsupported Matrix Market kind {layout} {field} {symmetry}")
        no = 1
        size = None
        for line in fh:
            no += 1
            if line.startswith("%") or not line.strip():
                continue
            size = _numbers(path, no, line, int)
            break
        if size is None:
            raise _err(path, no, "missing size line")
        if layout == "array":
            if len(size) != 2 or size[0] != size[1]:
                raise _err(path, no, f"array matrix must be square 'rows cols', got {size}")
            n = size[0]
            vals = np.array([_numbers(path, no + i + 1, line)[0] for i, line in
                             enumerate(line for line in fh if line.strip())])
            if vals.size != n * n:
                raise _err(path, no, f"array matrix needs {n * n} values, got {vals.size}")
            mat = vals.reshape(n, n, order="F")
            return CommGraph.from_dense(_apply_weights(mat, weights, path))
        if len(size) != 3:
            raise _err(path, no, f"coordinate size line must be 'rows cols nnz', got {size}")
        rows, cols, nnz = size
        if rows != cols:
            raise _err(path, no, f"communication matrix must be square, got {rows} x {cols}")
        src = np.empty(nnz, dtype=np.int64)
        dst = np.empty(nnz, dtype=np.int64)
        val = np.ones(nnz)
        k = 0
        for line in fh:
            no += 1
            if line.startswith("%") or not line.strip():
                continue
            if k >= nnz:
                raise _err(path, no, f"more entries than nnz = {nnz}")
            f = _numbers(path, no, line)
            need = 2 if field == "pattern" else 3
            if len(f) < need:
                raise _err(path, no, f"entry needs {need} numbers, got {len(f)}")
            i, j = int(f[0]), int(f[1])
            if not (1 <= i <= rows and 1 <= j <= cols):
                raise _err(path, no, f"index ({i}, {j}) outside 1..{rows}")
            src[k], dst[k] = i - 1, j - 1
            if field != "pattern":
                val[k] = f[2]
            k += 1
        if k != nnz:
            raise _err(path, no, f"header says nnz = {nnz} but the file has {k} entries")
    if symmetry != "general":
        off = src != dst
        sign = -1.0 if symmetry == "skew-symmetric" else 1.0
        src, dst, val = (np.concatenate([src, dst[off]]), np.concatenate([dst, src[off]]),
                         np.concatenate([val, sign * val[off]]))
    return CommGraph.from_edges(src, dst, _apply_weights(val, weights, path), n=rows)


def write_matrix_market(graph: CommGraph, path: str) -> None:
    src, dst, w = graph.coo()
    integral = bool(np.all(np.equal(np.round(w), w)))
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f"%%MatrixMarket matrix coordinate {'integer' if integral else 'real'} general\n")
        fh.write("% rankmap communication graph: entry (i, j) = bytes rank i-1 sent to rank j-1\n")
        fh.write(f"{graph.n} {graph.n} {w.size}\n")
        fmt = "{} {} {}\n"
        fh.writelines(fmt.format(s + 1, d + 1, int(x) if integral else repr(float(x)))
                      for s, d, x in zip(src.tolist(), dst.tolist(), w.tolist()))


# ------------------------------------------------------------------ edge list
def read_edge_list(path: str) -> CommGraph:
    src, dst, nbytes, msgs = [], [], [], []
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            fields = [t for t in re.split(r"[,\s]+", text) if t]
            if not src and not re.fullmatch(r"[-+0-9.eE]+", fields[0]):
                continue  # a header row such as "src,dst,bytes,count"
            if len(fields) not in (3, 4):
                raise _err(path, no, f"expected 'src dst bytes [messages]', got {len(fields)} fields")
            try:
                s, d = int(fields[0]), int(fields[1])
                b = float(fields[2])
                c = float(fields[3]) if len(fields) == 4 else np.nan
            except ValueError:
                raise _err(path, no, f"expected integer ranks and numeric bytes: {text[:60]!r}") from None
            if s < 0 or d < 0:
                raise _err(path, no, "ranks must be >= 0 (edge lists are 0-based)")
            if b < 0:
                raise _err(path, no, "negative byte count")
            src.append(s), dst.append(d), nbytes.append(b), msgs.append(c)
    if not src:
        raise _err(path, 0, "no edges")
    m = np.asarray(msgs)
    messages = None if np.isnan(m).any() else m
    return CommGraph.from_edges(src, dst, nbytes, messages=messages)


def write_edge_list(graph: CommGraph, path: str) -> None:
    src, dst, w = graph.coo()
    msgs = None
    if graph.messages is not None:
        msgs = np.asarray(graph.messages[src, dst]).ravel()
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("# src dst bytes" + (" messages" if msgs is not None else "") + "  (0-based ranks)\n")
        for i in range(w.size):
            tail = f" {_num(msgs[i])}" if msgs is not None else ""
            fh.write(f"{src[i]} {dst[i]} {_num(w[i])}{tail}\n")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


# ---------------------------------------------------------------------- dense
def read_dense(path: str, weights: str = "values") -> CommGraph:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            if not line.strip() or line.lstrip().startswith(("#", "%")):
                continue
            row = _numbers(path, no, line)
            if rows and len(row) != len(rows[0]):
                raise _err(path, no, f"row has {len(row)} values, the first row has {len(rows[0])}")
            rows.append(row)
    if not rows:
        raise _err(path, 0, "empty matrix")
    if len(rows) != len(rows[0]):
        raise _err(path, 0, f"matrix is not square: {len(rows)} rows x {len(rows[0])} columns")
    return CommGraph.from_dense(_apply_weights(np.asarray(rows), weights, path))


def write_dense(graph: CommGraph, path: str, max_n: int = 20000) -> None:
    """TreeMatch ``.mat`` style: whitespace rows.  Refuses huge n (dense is
    O(n^2) on disk)."""
    if graph.n > max_n:
        raise ValueError(f"a dense matrix of {graph.n} ranks is too large; use metis, mtx or edges")
    with open(path, "w", encoding="utf-8") as fh:
        b = graph.bytes
        for u in range(graph.n):
            row = np.zeros(graph.n)
            lo, hi = b.indptr[u], b.indptr[u + 1]
            row[b.indices[lo:hi]] = b.data[lo:hi]
            fh.write(" ".join(_num(x) for x in row) + "\n")


# ------------------------------------------------------ Open MPI monitoring
_OMPI_LINE = re.compile(r"^([EI])\t(\d+)\t(\d+)\t(\d+) bytes\t(\d+) msgs sent")


def _ompi_files(path: str) -> list[str]:
    if os.path.isdir(path):
        files = glob.glob(os.path.join(path, "*.prof"))
    elif os.path.exists(path):
        files = [path]
    else:  # the prefix given to pml_monitoring_filename
        files = glob.glob(glob.escape(path) + ".*.prof")
    if not files:
        raise FileNotFoundError(f"{path}: no Open MPI monitoring files (*.prof)")
    return sorted(files)


def read_ompi_monitoring(path: str, include_internal: bool = False) -> CommGraph:
    """Point-to-point traffic from Open MPI's pml monitoring output.  ``E``
    lines are the application's messages; ``I`` lines (internal, e.g. from
    collectives) count only with ``include_internal``."""
    src, dst, nbytes, msgs = [], [], [], []
    files = _ompi_files(path)
    ranks = [int(m.group(1)) for m in (re.search(r"\.(\d+)\.prof$", f) for f in files) if m]
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            for no, line in enumerate(fh, 1):
                if not line.startswith(("E\t", "I\t")):
                    continue
                m = _OMPI_LINE.match(line)
                if m is None:
                    raise _err(f, no, "malformed monitoring line (expected "
                                      "'E|I<TAB>src<TAB>dst<TAB>N bytes<TAB>M msgs sent')")
                if m.group(1) == "I" and not include_internal:
                    continue
                src.append(int(m.group(2))), dst.append(int(m.group(3)))
                nbytes.append(float(m.group(4))), msgs.append(float(m.group(5)))
    if not src:
        raise FormatError(f"{path}: no point-to-point lines (E/I) in the monitoring output")
    n = max(max(src), max(dst), *ranks) + 1
    return CommGraph.from_edges(src, dst, nbytes, n=n, messages=msgs)


# -------------------------------------------------------------------- EZTrace
def read_eztrace(path: str) -> CommGraph:
    """``eztrace_stats`` point-to-point matrices (row = sender)."""
    size_file = os.path.join(path, EZTRACE_SIZE) if os.path.isdir(path) else path
    if not os.path.exists(size_file):
        raise FileNotFoundError(f"{size_file}: no EZTrace message_size matrix")
    g = read_dense(size_file)
    count_file = size_file.replace("message_size", "nb_messages")
    if count_file != size_file and os.path.exists(count_file):
        counts = read_dense(count_file)
        if counts.n != g.n:
            raise FormatError(f"{count_file}: {counts.n} ranks but {size_file} has {g.n}")
        g = CommGraph(g.bytes, counts.bytes)
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
