"""METIS graph files (fmt 0/1/10/11, optional vertex sizes, 1-based; edge
{u, v} with weight w listed at both ends means B[u,v] = B[v,u] = w)."""

from __future__ import annotations

import re

import numpy as np

from ..graph import CommGraph
from .common import MAX_INT, FormatError, _data_lines, _err, _numbers, declared_size


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
    pair = g.asymmetric_pair()
    if pair is not None:
        u, v = pair[0] + 1, pair[1] + 1
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
