"""Dense square matrices, one row per line (TreeMatch ``.mat``, Open MPI
``profile2mat`` output, MapLib CSV), row = sender.  A first row of words,
one per column (a spreadsheet's column labels), is skipped."""

from __future__ import annotations

import numpy as np

from ..graph import CommGraph
from .common import _apply_weights, _err, _num, _numbers
from .edge_list import is_header, split_fields


def read_dense(path: str, weights: str = "values") -> CommGraph:
    rows = []
    header = None
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            if not line.strip() or line.lstrip().startswith(("#", "%")):
                continue
            if not rows and header is None and is_header(split_fields(line)):
                header = (no, len(split_fields(line)))
                continue
            row = _numbers(path, no, line)
            if rows and len(row) != len(rows[0]):
                raise _err(path, no, f"row has {len(row)} values, the first row has {len(rows[0])}")
            rows.append(row)
    if not rows:
        raise _err(path, 0, "empty matrix")
    if len(rows) != len(rows[0]):
        raise _err(path, 0, f"matrix is not square: {len(rows)} rows x {len(rows[0])} columns")
    if header is not None and header[1] != len(rows[0]):
        raise _err(path, header[0], f"header row names {header[1]} columns, the matrix has "
                                    f"{len(rows[0])}")
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
