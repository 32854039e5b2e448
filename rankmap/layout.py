"""Task coordinates: where a task sits in the simulated space.

Geometric mapping heuristics (AFFN, COCE; Bhatele & Kale sec. VI) place
tasks by their coordinates.  A program that knows them (the centroid of
each rank's sub-domain) gives them as a file or an array; otherwise they
are inferred from the communication graph by a graph layout (sec. V: the
paper uses graphviz's force-directed ``neato``).  We use networkx rather
than hand-written layout code: the spectral layout (Laplacian
eigenvectors, sparse, seconds at 10^5 tasks) as the start, refined by
Fruchterman-Reingold forces (``spring_layout``) up to ``SPRING_MAX_TASKS``
tasks; above that the O(n^2)-per-iteration force model is too slow and the
spectral layout is used alone.
"""

from __future__ import annotations

import numpy as np

from .graph import CommGraph

#: above this many tasks ``infer_coordinates(method="auto")`` uses the spectral layout
SPRING_MAX_TASKS = 1024


def load_coordinates(path: str, n_tasks: int | None = None) -> np.ndarray:
    """Read task coordinates: one line per task (in task order) with 1 to 3
    numbers separated by blanks or commas; blank lines and ``#`` comments
    are skipped.  Returns an ``(n, dim)`` float array."""
    rows: list[list[float]] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            text = line.split("#", 1)[0].replace(",", " ").split()
            if not text:
                continue
            try:
                row = [float(x) for x in text]
            except ValueError:
                raise ValueError(f"{path}:{lineno}: expected numbers, got {line.strip()!r}") from None
            if rows and len(row) != len(rows[0]):
                raise ValueError(f"{path}:{lineno}: {len(row)} coordinates, earlier lines have {len(rows[0])}")
            if not 1 <= len(row) <= 3:
                raise ValueError(f"{path}:{lineno}: expected 1 to 3 coordinates per task, got {len(row)}")
            if not np.all(np.isfinite(row)):
                raise ValueError(f"{path}:{lineno}: coordinates must be finite numbers")
            rows.append(row)
    coords = np.asarray(rows, dtype=np.float64)
    if n_tasks is not None and len(coords) != n_tasks:
        raise ValueError(f"{path}: {len(coords)} coordinate lines for {n_tasks} tasks")
    return coords


def check_coordinates(coords, n_tasks: int, dim: int) -> np.ndarray:
    """Validate a user-given ``(n_tasks, dim)`` coordinate array."""
    c = np.asarray(coords, dtype=np.float64)
    if c.ndim == 1:
        c = c[:, None]
    if c.shape[0] != n_tasks:
        raise ValueError(f"{c.shape[0]} task coordinates for {n_tasks} tasks")
    if c.shape[1] != dim:
        raise ValueError(f"task coordinates have {c.shape[1]} dimensions but the machine has {dim}: "
                         f"give {dim}-D coordinates, or none to infer a {dim}-D layout from the graph")
    if not np.all(np.isfinite(c)):
        raise ValueError("task coordinates must be finite numbers")
    return c


def layout_method(n: int, method: str) -> str:
    """The layout ``infer_coordinates`` makes of ``n`` tasks for ``method``:
    "auto" is spring up to SPRING_MAX_TASKS tasks, spectral beyond."""
    if method == "auto":
        method = "spring" if n <= SPRING_MAX_TASKS else "spectral"
    if method not in ("spring", "spectral"):
        raise ValueError(f"unknown layout method {method!r}; choose spring, spectral or auto")
    return method


def infer_coordinates(graph: CommGraph, dim: int, seed: int = 0, method: str = "auto") -> np.ndarray:
    """A ``dim``-D layout of the tasks in which heavily communicating tasks
    lie close: ``method`` is "spring" (force-directed from a spectral
    start), "spectral" or "auto" (spring up to ``SPRING_MAX_TASKS`` tasks).
    Edge weights are the symmetric byte counts, scaled to mean 1."""
    import networkx as nx

    method = layout_method(graph.n, method)
    n = graph.n
    if n <= dim:  # too few tasks for a layout: spread them on a line
        return np.eye(n, dim) * np.arange(1, n + 1)[:, None] if n else np.zeros((0, dim))
    sym = graph.symmetric
    scale = float(sym.data.mean()) if sym.nnz else 1.0
    g = nx.from_scipy_sparse_array(sym / scale if sym.nnz else sym)
    pos = _spectral(g, dim)
    if method == "spring":
        pos = nx.spring_layout(g, dim=dim, pos=pos, seed=seed, weight="weight")
    return np.asarray([pos[i] for i in range(n)], dtype=np.float64)


def _spectral(g, dim: int) -> dict:
    """networkx's spectral layout; it needs a connected graph, so each
    component is laid out on its own and the components side by side."""
    import networkx as nx

    comps = sorted(nx.connected_components(g), key=len, reverse=True)
    if len(comps) == 1:
        return nx.spectral_layout(g, dim=dim)
    pos = {}
    for i, comp in enumerate(comps):
        sub = g.subgraph(comp)
        if len(comp) > dim + 1:
            part = nx.spectral_layout(sub, dim=dim)
        else:
            part = {v: np.zeros(dim) for v in comp}
        shift = np.zeros(dim)
        shift[0] = 2.5 * i
        for v, p in part.items():
            pos[v] = np.asarray(p) + shift
    return pos
