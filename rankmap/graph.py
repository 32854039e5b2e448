"""The communication graph G_C: who sends how many bytes to whom.

Directed byte counts B[u, v] (and message counts) in CSR, O(n + m) memory.
Algorithms mostly want the symmetric view S = B + B^T (traffic in either
direction costs the same on a tree); partitioners want integer weights.
Self-traffic never crosses a link and is dropped on construction; the bytes
dropped are kept in ``self_bytes`` so readers can say so.  Counts must be
finite and sum to at most ``limits.MAX_TOTAL``: J multiplies them by
distances, so a matrix whose entries sum past that is refused (``GraphError``)
instead of turning every cost into infinity or NaN.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from .limits import MAX_TOTAL


class GraphError(ValueError):
    """Counts no communication graph can hold (negative, not finite, a sum
    past ``MAX_TOTAL``); readers add the file's name."""


class CommGraph:
    """Sparse directed communication graph of ``n`` tasks.

    ``bytes`` and ``messages`` are ``scipy.sparse.csr_array`` (n x n, float64,
    no diagonal, no explicit zeros, sorted indices).  The graph keeps them as
    plain CSR arrays and builds the scipy views on first use, so reading a
    graph, scoring a mapping and the cheap methods never import scipy (its
    import is most of a small ``rankmap map``'s start).  ``vertex_weights`` is
    the load of each task (ones unless given) used by many-tasks-per-PE
    mapping.

    ``bytes_matrix`` (and ``messages``) may be a scipy sparse matrix or array
    of any format, or a dense square array.
    """

    def __init__(self, bytes_matrix, messages=None, vertex_weights=None, name: str = ""):
        if isinstance(bytes_matrix, _Rows) and bytes_matrix.canonical():  # a reader's rows: kept as they are
            n = bytes_matrix.n
            _check_total(bytes_matrix.total, "byte counts")
            self._b, self.self_bytes = (bytes_matrix.indptr, bytes_matrix.indices, bytes_matrix.data), 0.0
        else:
            row, col, val, n = _triples(bytes_matrix, "communication matrix")
            self._b, self.self_bytes = _csr(row, col, val, n, "byte counts")
        self._n = n
        self._bytes = None
        self._symmetric_b = None  # B == B^T, once known (``_transpose_equal``)
        self.messages = messages
        if vertex_weights is None:
            self.vertex_weights = np.ones(n, dtype=np.float64)
        else:
            w = np.asarray(vertex_weights, dtype=np.float64)
            if w.shape != (n,):
                raise ValueError(f"vertex_weights has {w.size} entries for {n} tasks")
            if not np.all((w >= 0) & (w < np.inf)):
                raise GraphError("vertex weights must be finite and non-negative")
            self.vertex_weights = w
        self.name = name

    # ------------------------------------------------------------ constructors
    @classmethod
    def from_edges(cls, src, dst, nbytes, n: int | None = None, messages=None,
                   vertex_weights=None, name: str = "") -> "CommGraph":
        """Build from parallel arrays of (source, destination, bytes); repeated
        pairs are summed."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        w = np.asarray(nbytes, dtype=np.float64)
        if not (src.shape == dst.shape == w.shape):
            raise ValueError("src, dst and bytes must have the same length")
        if n is None:
            n = int(max(src.max(initial=-1), dst.max(initial=-1)) + 1)
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            raise ValueError(f"task ids must lie in 0..{n - 1}")
        m = None if messages is None else _Triples(src, dst, np.asarray(messages, dtype=np.float64), n)
        return cls(_Triples(src, dst, w, n), m, vertex_weights, name)

    @classmethod
    def from_rows(cls, indptr, indices, nbytes, vertex_weights=None, name: str = "") -> "CommGraph":
        """Build from rows in order (CSR: row u's destinations
        ``indices[indptr[u]:indptr[u + 1]]``, as a graph file lists them):
        kept without a copy or a sort when every row is canonical (strictly
        increasing destinations, no diagonal, no zero bytes), else summed
        and sorted as ``from_edges`` does."""
        return cls(_Rows(np.ascontiguousarray(indptr, dtype=np.int64), np.ascontiguousarray(indices, dtype=np.int64),
                         np.ascontiguousarray(nbytes, dtype=np.float64)), None, vertex_weights, name)

    @classmethod
    def from_dense(cls, matrix, messages=None, name: str = "") -> "CommGraph":
        return cls(np.asarray(matrix, dtype=np.float64),
                   None if messages is None else np.asarray(messages, dtype=np.float64), name=name)

    # ------------------------------------------------------------------ views
    @property
    def n(self) -> int:
        return self._n

    @property
    def n_edges(self) -> int:
        """Directed pairs with traffic."""
        return int(self._b[2].size)

    @property
    def total_bytes(self) -> float:
        return float(self._b[2].sum())

    @property
    def bytes(self):
        """B as a ``scipy.sparse.csr_array`` (built on first use)."""
        if self._bytes is None:
            self._bytes = _scipy_csr(self._b, self._n)
        return self._bytes

    @property
    def messages(self):
        """Message counts as a ``scipy.sparse.csr_array``, or None when the
        source recorded none (built on first use)."""
        if self._m is not None and self._messages is None:
            self._messages = _scipy_csr(self._m, self._n)
        return self._messages

    @messages.setter
    def messages(self, matrix) -> None:
        self._m = self._messages = None
        if matrix is not None:
            row, col, val, n = _triples(matrix, "message matrix")
            if n != self._n:
                raise ValueError(f"message matrix shape {(n, n)} != byte matrix shape {(self._n, self._n)}")
            self._m, _ = _csr(row, col, val, n, "message counts")

    @cached_property
    def symmetric(self):
        """S = B + B^T: undirected traffic of each pair, stored at both ends
        (2B where B is symmetric, as every METIS graph is: no sparse sum)."""
        if self._transpose_equal():  # 2B on B's own index arrays (no copy of them)
            b = self.bytes
            return _scipy_csr((b.indptr, b.indices, b.data * 2), self._n)
        s = (self.bytes + self.bytes.T).tocsr()
        s.sum_duplicates()
        s.sort_indices()
        return s

    def is_symmetric(self) -> bool:
        return self.asymmetric_pair() is None

    def known_symmetric(self) -> bool:
        """Whether B == B^T has been checked already and holds (as every
        METIS graph's is when read): no pass made here."""
        return bool(self._symmetric_b)

    def _transpose_equal(self) -> bool:
        """Whether B == B^T, in one compiled pass over the rows that writes
        nothing (``_kernels.mirror_hash``: a symmetric graph hashes to 0, an
        asymmetric one to 0 only by a chance of about 2^-64); remembered."""
        if self._symmetric_b is None:
            from ._kernels import mirror_hash
            from .cores import on_threads, row_slices

            indptr, indices, data = self._b
            bits = data.view(np.uint64)
            sums = on_threads(lambda lo, hi: mirror_hash(indptr, indices, bits, lo, hi), row_slices(indptr))
            self._symmetric_b = sum(sums) % (1 << 64) == 0
        return self._symmetric_b

    def asymmetric_pair(self) -> tuple[int, int] | None:
        """The first pair (u, v), in row order, with B[u, v] != B[v, u]; None
        when B is symmetric."""
        if self.n_edges > _SORT_CHECK_MAX and self._transpose_equal():
            return None  # a large symmetric graph: no sort of 2m keys to say so
        src, dst, w = self.coo()
        n = max(self._n, 1)
        keys = np.concatenate([src * n + dst, dst * n + src])  # each pair once from B, once from B^T
        order = np.argsort(keys, kind="stable")
        keys, signed = keys[order], np.concatenate([w, -w])[order]
        if keys.size == 0:
            return None
        starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
        bad = np.flatnonzero(np.add.reduceat(signed, starts))
        return None if bad.size == 0 else tuple(int(x) for x in divmod(int(keys[starts[bad[0]]]), n))

    def volume(self) -> np.ndarray:
        """Bytes each task sends plus receives (weighted degree in S)."""
        src, dst, w = self.coo()
        return np.bincount(src, weights=w, minlength=self._n) + np.bincount(dst, weights=w, minlength=self._n)

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indptr, indices, bytes): the pairs row by row, without the m
        source ids ``coo`` spells out (the compiled passes read these)."""
        return self._b

    def coo(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(src, dst, bytes) of every directed pair with traffic, in row order."""
        indptr, indices, data = self._b
        return np.repeat(np.arange(self._n, dtype=np.int64), np.diff(indptr)), indices, data

    def message_coo(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(src, dst, messages) of every directed pair with messages, in row
        order; None when the source recorded no message counts."""
        if self._m is None:
            return None
        indptr, indices, data = self._m
        return np.repeat(np.arange(self._n, dtype=np.int64), np.diff(indptr)), indices, data

    def subgraph(self, tasks) -> "CommGraph":
        """Induced subgraph on ``tasks`` (renumbered 0..len-1 in that order)."""
        tasks = np.asarray(tasks, dtype=np.int64)
        b = self.bytes[tasks][:, tasks]
        m = None if self.messages is None else self.messages[tasks][:, tasks]
        return CommGraph(b, m, self.vertex_weights[tasks], self.name)

    def quotient(self, block_of_task, n_blocks: int | None = None) -> "CommGraph":
        """Quotient graph of a partition: block i sends to block j the bytes
        its tasks send to j's tasks; block weight = sum of task weights.  This
        is model creation (Schulz & Traff, sec. 4): an application graph cut
        into n blocks becomes an n-task communication graph."""
        block = np.asarray(block_of_task, dtype=np.int64)
        if block.shape != (self.n,):
            raise ValueError(f"partition has {block.size} entries for {self.n} vertices")
        if n_blocks is None:
            n_blocks = int(block.max()) + 1
        src, dst, w = self.coo()
        bs, bd = block[src], block[dst]
        keep = bs != bd
        g = CommGraph.from_edges(bs[keep], bd[keep], w[keep], n=n_blocks,
                                 vertex_weights=np.bincount(block, weights=self.vertex_weights,
                                                            minlength=n_blocks),
                                 name=f"{self.name}/q{n_blocks}" if self.name else "")
        if self._m is not None:
            indptr, indices, data = self._m
            ms = block[np.repeat(np.arange(self._n, dtype=np.int64), np.diff(indptr))]
            g.messages = _Triples(ms, block[indices], data, n_blocks)  # the diagonal drops
        return g

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        return f"CommGraph({label}n={self.n}, pairs={self.n_edges}, bytes={self.total_bytes:.4g})"


_SORT_CHECK_MAX = 1 << 16  # beyond this many pairs a symmetric graph is told by its hash, not by a sort


class _Triples:
    """(row, col, value) arrays of an n x n matrix, repeats allowed: what the
    constructors hand to ``CommGraph`` without building a matrix first."""

    __slots__ = ("row", "col", "val", "n")

    def __init__(self, row, col, val, n: int):
        self.row, self.col, self.val, self.n = row, col, val, n


class _Rows:
    """CSR rows in order (``from_rows``): ``canonical`` says whether they
    can be the graph's arrays as they are."""

    __slots__ = ("indptr", "indices", "data", "n", "total")

    def __init__(self, indptr, indices, data, n: int | None = None):
        self.indptr, self.indices, self.data = indptr, indices, data
        self.total = None  # the bytes' sum, once ``canonical`` has read them
        self.n = indptr.size - 1 if n is None else n
        if indices.shape != data.shape or indptr[-1] != indices.size:
            raise ValueError("rows: indptr, indices and bytes do not match")

    def canonical(self) -> bool:
        """Strictly increasing destinations in every row, in range, none on
        the diagonal, bytes finite and above zero: one compiled pass over
        slices of rows on threads (``_kernels.rows_canonical``), which also
        sums the bytes (``total``)."""
        from ._kernels import rows_canonical
        from .cores import on_threads, row_slices

        indptr, indices, data, n = self.indptr, self.indices, self.data, self.n
        found = on_threads(lambda lo, hi: rows_canonical(indptr, indices, data, n, lo, hi), row_slices(indptr))
        self.total = sum(total for _, total in found)
        return all(ok for ok, _ in found)


def row_edges(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edge ids of the CSR rows ``rows`` concatenated, and for each edge the
    position of its row in ``rows``: the edges of a renumbered or induced
    graph, without a Python loop."""
    lens = indptr[rows + 1] - indptr[rows]
    owner = np.repeat(np.arange(rows.size), lens)
    offsets = np.cumsum(lens) - lens
    edges = np.arange(int(lens.sum()), dtype=np.int64) - offsets[owner] + indptr[rows][owner]
    return edges, owner


def renumbered_rows(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
                    order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The CSR graph with its vertices renumbered so that vertex ``order[i]``
    becomes i (neighbours that sit together in memory), as (indptr, indices,
    data) with each row's entries in their old order, and ``back``, each old
    vertex's new number."""
    back = np.empty_like(order)
    back[order] = np.arange(order.size)
    edges, _ = row_edges(indptr, order)
    new_indptr = np.concatenate([[0], np.cumsum(np.diff(indptr)[order])]).astype(np.int64)
    return new_indptr, back[indices[edges]], data[edges], back


def _triples(matrix, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(row, col, value, n) of a square matrix given as ``_Triples``, ``_Rows``,
    a scipy sparse matrix or a dense array."""
    if isinstance(matrix, _Rows):
        return (np.repeat(np.arange(matrix.n, dtype=np.int64), np.diff(matrix.indptr)), matrix.indices,
                matrix.data, matrix.n)
    if isinstance(matrix, _Triples):
        return matrix.row, matrix.col, matrix.val, matrix.n
    if hasattr(matrix, "tocoo"):  # scipy sparse: scipy is loaded already
        c = matrix.tocoo()
        row, col, val = c.row.astype(np.int64), c.col.astype(np.int64), c.data.astype(np.float64)
    else:
        dense = np.asarray(matrix, dtype=np.float64)
        if dense.ndim != 2:
            raise ValueError(f"{what} must be a square 2-D array, got {dense.ndim} dimension(s)")
        row, col = np.nonzero(dense)
        val = dense[row, col]
    shape = tuple(int(x) for x in matrix.shape) if hasattr(matrix, "shape") else dense.shape
    if shape[0] != shape[1]:
        raise ValueError(f"{what} must be square, got {shape[0]} x {shape[1]}")
    return row.astype(np.int64, copy=False), col.astype(np.int64, copy=False), val, shape[0]


def _check_values(val, what: str) -> None:
    """Refuse counts that are not finite or whose sum passes ``MAX_TOTAL``."""
    if val.size and not np.all(np.isfinite(val)):
        raise GraphError(f"{what} must be finite numbers, not {val[~np.isfinite(val)][0]!r}")
    with np.errstate(over="ignore"):
        _check_total(float(np.abs(val).sum()), what)


def _check_total(total: float, what: str) -> None:
    """Refuse counts whose (absolute) sum ``total`` passes ``MAX_TOTAL``."""
    if not total <= MAX_TOTAL:
        amount = "past the float range" if total == np.inf else f"to {total:.4g}"
        raise GraphError(f"{what} sum {amount}, more than the {MAX_TOTAL:.0e} rankmap handles "
                         "(bytes x distance must stay a finite number): give them in a larger unit")


def _csr(row, col, val, n: int, what: str):
    """Canonical CSR ``(indptr, indices, data)`` of the triples (repeats
    summed, diagonal and zeros dropped, sorted) and the diagonal's total;
    ``what`` the values are, for the errors."""
    _check_values(val, what)
    key = row * max(n, 1) + col  # n <= MAX_TASKS = 2^26: n^2 fits int64
    if key.size > 1 and not bool(np.all(key[1:] > key[:-1])):  # a reader's rows in order skip the sort
        order = np.argsort(key, kind="stable")  # stable: repeated pairs summed in the file's order
        key, val = key[order], val[order]
        first = np.empty(key.size, dtype=bool)
        first[0] = True
        np.not_equal(key[1:], key[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        key, val = key[starts], np.add.reduceat(val, starts)
        row, col = np.divmod(key, max(n, 1))
    del key
    if val.size and val.min() < 0:
        raise GraphError(f"{what} must not be negative")
    diagonal = row == col
    self_total = float(val[diagonal].sum())
    keep = ~diagonal & (val != 0)
    row, col, val = row[keep], col[keep], val[keep]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=n), out=indptr[1:])
    return (indptr, col, val), self_total


def _scipy_csr(csr, n: int):
    import scipy.sparse as sp

    indptr, indices, data = csr
    out = sp.csr_array((data, indices, indptr), shape=(n, n))
    out.has_sorted_indices = True
    out.has_canonical_format = True
    return out
