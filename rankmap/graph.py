"""The communication graph G_C: who sends how many bytes to whom.

Directed byte counts B[u, v] (and message counts) in CSR, O(n + m) memory.
Algorithms mostly want the symmetric view S = B + B^T (traffic in either
direction costs the same on a tree); partitioners want integer weights.
Self-traffic never crosses a link and is dropped on construction; the bytes
dropped are kept in ``self_bytes`` so readers can say so.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import scipy.sparse as sp


class CommGraph:
    """Sparse directed communication graph of ``n`` tasks.

    ``bytes`` and ``messages`` are ``scipy.sparse.csr_array`` (n x n, float64,
    no diagonal, no explicit zeros).  ``vertex_weights`` is the load of each
    task (ones unless given) used by many-tasks-per-PE mapping.
    """

    def __init__(self, bytes_matrix, messages=None, vertex_weights=None, name: str = ""):
        b = sp.csr_array(bytes_matrix, dtype=np.float64)
        if b.shape[0] != b.shape[1]:
            raise ValueError(f"communication matrix must be square, got {b.shape[0]} x {b.shape[1]}")
        b.sum_duplicates()
        if b.nnz and b.data.min() < 0:
            raise ValueError("communication matrix has negative byte counts")
        self.self_bytes = float(b.diagonal().sum())
        self.bytes = _drop_diagonal(b)
        n = b.shape[0]
        if messages is not None:
            m = sp.csr_array(messages, dtype=np.float64)
            if m.shape != b.shape:
                raise ValueError(f"message matrix shape {m.shape} != byte matrix shape {b.shape}")
            m.sum_duplicates()
            self.messages = _drop_diagonal(m)
        else:
            self.messages = None
        if vertex_weights is None:
            self.vertex_weights = np.ones(n, dtype=np.float64)
        else:
            w = np.asarray(vertex_weights, dtype=np.float64)
            if w.shape != (n,):
                raise ValueError(f"vertex_weights has {w.size} entries for {n} tasks")
            if np.any(w < 0):
                raise ValueError("vertex weights must be non-negative")
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
        b = sp.coo_array((w, (src, dst)), shape=(n, n)).tocsr()
        m = None
        if messages is not None:
            m = sp.coo_array((np.asarray(messages, dtype=np.float64), (src, dst)), shape=(n, n)).tocsr()
        return cls(b, m, vertex_weights, name)

    @classmethod
    def from_dense(cls, matrix, messages=None, name: str = "") -> "CommGraph":
        return cls(sp.csr_array(np.asarray(matrix, dtype=np.float64)),
                   None if messages is None else sp.csr_array(np.asarray(messages, dtype=np.float64)),
                   name=name)

    # ------------------------------------------------------------------ views
    @property
    def n(self) -> int:
        return self.bytes.shape[0]

    @property
    def n_edges(self) -> int:
        """Directed pairs with traffic."""
        return self.bytes.nnz

    @property
    def total_bytes(self) -> float:
        return float(self.bytes.sum())

    @cached_property
    def symmetric(self) -> sp.csr_array:
        """S = B + B^T: undirected traffic of each pair, stored at both ends."""
        s = (self.bytes + self.bytes.T).tocsr()
        s.sum_duplicates()
        s.sort_indices()
        return s

    def is_symmetric(self) -> bool:
        diff = self.bytes - self.bytes.T
        return diff.nnz == 0 or float(abs(diff).max()) == 0.0

    def volume(self) -> np.ndarray:
        """Bytes each task sends plus receives (weighted degree in S)."""
        return np.asarray(self.symmetric.sum(axis=1)).ravel()

    def coo(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(src, dst, bytes) of every directed pair with traffic."""
        c = self.bytes.tocoo()
        return c.row.astype(np.int64), c.col.astype(np.int64), c.data

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
        if self.messages is not None:
            mc = self.messages.tocoo()
            ms, md = block[mc.row], block[mc.col]
            k = ms != md
            g.messages = _drop_diagonal(sp.coo_array((mc.data[k], (ms[k], md[k])),
                                                     shape=(n_blocks, n_blocks)).tocsr())
        return g

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        return f"CommGraph({label}n={self.n}, pairs={self.n_edges}, bytes={self.total_bytes:.4g})"


def _drop_diagonal(m: sp.csr_array) -> sp.csr_array:
    c = m.tocoo()
    keep = (c.row != c.col) & (c.data != 0)
    out = sp.csr_array((c.data[keep], (c.row[keep], c.col[keep])), shape=m.shape)
    out.sum_duplicates()
    out.sort_indices()
    return out
