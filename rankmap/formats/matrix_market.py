"""Matrix Market coordinate or array files (general/symmetric/pattern)."""

from __future__ import annotations

import numpy as np

from ..graph import CommGraph
from .common import MAX_INT, MAX_TASKS, _apply_weights, _err, _numbers, declared_size


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
            size = _numbers(path, no, line, int, spaces_only=True)
            break
        if size is None:
            raise _err(path, no, "missing size line")
        if layout == "array":
            if len(size) != 2 or size[0] != size[1]:
                raise _err(path, no, f"array matrix must be square 'rows cols', got {size}")
            n = declared_size(path, no, "array matrix size", size[0])
            declared_size(path, no, "array matrix values", n * n, bytes_each=2, most=MAX_TASKS ** 2)
            vals = []  # one value per line by the format; several per line read in order
            for line in fh:
                no += 1
                if not line.startswith("%"):
                    vals.extend(_numbers(path, no, line, spaces_only=True))
                if len(vals) > n * n:
                    raise _err(path, no, f"array matrix needs {n * n} values, this is value "
                                         f"{len(vals)}")
            if len(vals) != n * n:
                raise _err(path, no, f"array matrix needs {n * n} values, got {len(vals)}")
            vals = np.asarray(vals)
            mat = vals.reshape(n, n, order="F")
            return CommGraph.from_dense(_apply_weights(mat, weights, path))
        if len(size) != 3:
            raise _err(path, no, f"coordinate size line must be 'rows cols nnz', got {size}")
        rows, cols, nnz = size
        if rows != cols:
            raise _err(path, no, f"communication matrix must be square, got {rows} x {cols}")
        declared_size(path, no, "rows", rows, bytes_each=0)  # rows without entries take no room
        declared_size(path, no, "nnz", nnz, bytes_each=4, most=MAX_INT)  # 'i j\n' per entry
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
            tokens = line.split()
            need = 2 if field == "pattern" else 3
            if len(tokens) < need:
                raise _err(path, no, f"entry needs {need} numbers, got {len(tokens)}")
            i, j = _numbers(path, no, " ".join(tokens[:2]), int, spaces_only=True)  # 1.5 is no index
            f = [i, j, *_numbers(path, no, " ".join(tokens[2:need]), spaces_only=True)]
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
