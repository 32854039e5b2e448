"""METIS graph files (fmt 0/1/10/11, optional vertex sizes, 1-based; edge
{u, v} with weight w listed at both ends means B[u,v] = B[v,u] = w).

Large plain files are read by whole-file scanning (``columns.py``: 2^20
vertices in about a second instead of 11 s by the line loop); the line
loop reads the rest and names the line of every error.
"""

from __future__ import annotations

import os
import re

import numpy as np

from ..graph import CommGraph
from .columns import FAST_MIN_BYTES, one_text_line, scan_numbers
from .common import MAX_INT, FormatError, _data_lines, _err, _numbers, declared_size


def read_metis(path: str) -> CommGraph:
    graph = _read_scanned(path) if os.path.getsize(path) >= FAST_MIN_BYTES else None
    return graph if graph is not None else _read_lines(path)


def _read_lines(path: str) -> CommGraph:
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
        declared_size(path, hno, "METIS header: n =", n)  # a vertex line takes >= 1 byte
        declared_size(path, hno, "METIS header: m =", m, bytes_each=4, most=MAX_INT)
        fmt = head[2] if len(head) > 2 else "0"
        if not re.fullmatch(r"[01]{1,3}", fmt):
            raise _err(path, hno, f"METIS fmt must be 0, 1, 10, 11, 100, 101, 110 or 111, got {fmt!r}")
        fmt = fmt.zfill(3)
        has_size, has_vw, has_ew = fmt[0] == "1", fmt[1] == "1", fmt[2] == "1"
        ncon = _numbers(path, hno, head[3], int)[0] if len(head) > 3 else (1 if has_vw else 0)
        if has_vw and not 1 <= ncon <= 64:
            raise _err(path, hno, f"METIS ncon must be 1..64, got {ncon}")
        if len(head) > 3 and not has_vw:
            raise _err(path, hno, "METIS ncon given but fmt has no vertex weights")
        nbs, wts, degree = [], [], []  # plain lists: one numpy call per file, not per line
        vweights = np.ones(n)
        lead = int(has_size) + (ncon if has_vw else 0)
        step = 2 if has_ew else 1
        count = 0
        for no, line in lines:
            if count == n:
                if line.strip():
                    raise _err(path, no, f"more than n = {n} vertex lines")
                continue
            vals = _numbers(path, no, line, int)
            if len(vals) < lead:
                raise _err(path, no, f"vertex {count + 1}: expected {lead} size/weight values first")
            if has_vw:
                if vals[int(has_size)] < 0:
                    raise _err(path, no, f"vertex {count + 1}: negative vertex weight")
                vweights[count] = vals[int(has_size)]
            rest = vals[lead:]
            if len(rest) % step:
                raise _err(path, no, f"vertex {count + 1}: neighbour list must be (neighbour weight) pairs")
            nb = rest[0::step]
            if nb and (min(nb) < 1 or max(nb) > n):
                bad = next(v for v in nb if not 1 <= v <= n)
                raise _err(path, no, f"vertex {count + 1}: neighbour {bad} outside 1..{n}")
            if count + 1 in nb:
                raise _err(path, no, f"vertex {count + 1}: self-loop")
            if has_ew:
                w = rest[1::step]
                if w and min(w) < 0:
                    raise _err(path, no, f"vertex {count + 1}: negative edge weight")
                wts.extend(w)
            nbs.extend(nb)
            degree.append(len(nb))
            count += 1
        if count < n:
            raise _err(path, 0, f"header says n = {n} vertices but the file has {count} vertex lines")
    s = np.repeat(np.arange(n, dtype=np.int64), np.asarray(degree, dtype=np.int64))
    d = np.asarray(nbs, dtype=np.int64) - 1
    w = np.asarray(wts, dtype=np.float64) if has_ew else np.ones(d.size)
    if s.size != 2 * m:
        raise _err(path, hno, f"header says m = {m} edges but the adjacency lists hold {s.size} "
                              f"entries (expected 2m = {2 * m})")
    g = CommGraph.from_edges(s, d, w, n=n, vertex_weights=vweights)
    pair = g.asymmetric_pair()
    if pair is not None:
        u, v = pair[0] + 1, pair[1] + 1
        raise FormatError(f"{path}: not symmetric: edge {u}-{v} is listed at vertex {u} but not "
                          f"at vertex {v} with the same weight")
    return g


def _read_scanned(path: str) -> CommGraph | None:
    """The graph by whole-file scanning, or None where anything is unusual
    (comments after the header or not UTF-8, signs, a line that is not a
    vertex, a neighbour out of range, an asymmetric pair...): then
    ``_read_lines`` reads the file and says what is wrong where."""
    with open(path, "rb") as fh:
        offset, header = 0, None
        for line in fh:
            offset += len(line)
            text = line.strip()
            if not one_text_line(text):
                return None
            if text and not text.startswith(b"%"):
                header = text.split()
                break
    if header is None or not 2 <= len(header) <= 3 or not all(t.isdigit() for t in header):
        return None  # ncon, a malformed header: the line loop
    n, m = int(header[0]), int(header[1])
    fmt = header[2].decode().zfill(3) if len(header) > 2 else "000"
    if not re.fullmatch(r"[01]{3}", fmt) or n > os.path.getsize(path) or m > MAX_INT:
        return None
    has_size, has_vw, has_ew = fmt[0] == "1", fmt[1] == "1", fmt[2] == "1"
    scan = scan_numbers(path, offset, dtype=np.int64, separators=b" \t\r\n")
    if scan is None or scan.per_line.size < n or scan.per_line[n:].any() or scan.values.size == 0 \
            or scan.values.max() > MAX_INT:
        return None
    per_line = scan.per_line[:n]
    lead, step = int(has_size) + int(has_vw), 2 if has_ew else 1
    if (per_line < lead).any() or ((per_line - lead) % step).any():
        return None
    degree = (per_line - lead) // step
    if int(degree.sum()) != 2 * m:
        return None
    vals = scan.values
    if lead or has_ew:  # where each number stands on its line
        column = np.arange(vals.size, dtype=np.int64) - np.repeat(np.cumsum(per_line) - per_line, per_line)
        first = np.cumsum(per_line) - per_line
        vweights = vals[first + int(has_size)].astype(np.float64) if has_vw else np.ones(n)
        body = column >= lead
        nb = vals[body & ((column - lead) % step == 0)] - 1
        w = vals[body & ((column - lead) % step == 1)].astype(np.float64) if has_ew else None
        del column, body
    else:
        vals -= 1  # in place: the scan's array becomes the neighbour ids (no second copy of m)
        vweights, nb, w = np.ones(n), vals, None
    del vals, scan
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(degree, out=indptr[1:])
    if nb.size and (nb.min() < 0 or nb.max() >= n):
        return None
    g = CommGraph.from_rows(indptr, nb, np.ones(nb.size) if w is None else w, vertex_weights=vweights)
    if g.self_bytes:
        return None  # a self-loop: the line loop names it
    return g if g.asymmetric_pair() is None else None


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
