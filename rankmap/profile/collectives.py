"""Collective models: which pairs a collective's bytes travel between.

A collective hides its messages inside the MPI library, so the profiler
attributes them to pairs with a model, selected with ``--collectives``:

``none``  collectives are not recorded.
``root``  everything goes through the root (rank 0 for unrooted operations):
          bcast/scatter root -> each, gather/reduce each -> root,
          allreduce = reduce + bcast, allgather = gather + bcast of all blocks,
          reduce_scatter = reduce + scatter, scan = chain r -> r+1.
``tree``  (default) binomial trees as MPICH uses for short messages:
          bcast/reduce along the binomial tree rooted at the root, scatter/gather
          along it carrying whole subtrees, allreduce = binomial reduce + bcast,
          allgather = binomial gather + bcast of all blocks, reduce_scatter =
          binomial reduce + scatter, scan = recursive doubling r -> r + 2^k.
``ring``  pipelines as used for long messages: bcast a chain root -> root+1 ...,
          reduce the reverse chain, allreduce and allgather the ring (each rank
          sends 2(p-1)/p of the vector, resp. p-1 blocks, to its right
          neighbour), reduce_scatter p-1 blocks to the right, scan a chain.

In every model alltoall(v/w) is a direct exchange (block i goes to rank i), and
neighbourhood collectives are exact: they name their peers.  On an
intercommunicator every model sends straight to the other group
(``intercomm_plan``).  Barriers carry no data and are not counted (the event
log has them: a collective without flows).

A plan is a list of ``(peer, factor)`` for the calling rank only: the rank
sends ``factor x unit`` bytes to ``peer`` (comm ranks), where ``unit`` is the
operation's natural size (whole vector for bcast/reduce/allreduce/scan, one
block for scatter/gather/allgather/reduce_scatter/alltoall).
"""

from __future__ import annotations

MODELS = ("none", "root", "tree", "ring")

OPS = ("bcast", "reduce", "scatter", "gather", "allgather", "allreduce",
       "alltoall", "reduce_scatter", "scan")


def plan(model: str, op: str, rank: int, size: int, root: int = 0) -> list[tuple[int, float]]:
    """Outgoing ``(peer, factor)`` list of ``rank`` in ``op`` on ``size`` ranks."""
    if model not in MODELS:
        raise ValueError(f"unknown collective model {model!r}: choose from {', '.join(MODELS)}")
    if op not in OPS:
        raise ValueError(f"unknown collective operation {op!r}")
    if model == "none" or size <= 1:
        return []
    if op == "alltoall":
        return [(q, 1.0) for q in range(size) if q != rank]
    r = (rank - root) % size  # rank relative to the root

    def absolute(edges):
        return [((q + root) % size, f) for q, f in edges if f]

    return absolute(_MODEL_FUNCS[model](op, r, size))


def intercomm_plan(op: str, size: int, root: int, is_root: bool) -> list[tuple[int, float]]:
    """Outgoing ``(peer, factor)`` of a rank in ``op`` on an intercommunicator
    whose remote group has ``size`` ranks: the root (``is_root``, MPI_ROOT)
    of a bcast/scatter sends to every remote rank, a rank of the other group
    of a gather/reduce sends to the remote ``root`` (``root >= 0``), the
    unrooted operations send to every remote rank."""
    if op not in OPS:
        raise ValueError(f"unknown collective operation {op!r}")
    if op in ("bcast", "scatter"):
        peers = range(size) if is_root else ()
    elif op in ("gather", "reduce"):
        peers = (root,) if root >= 0 else ()
    else:
        peers = range(size)
    return [(q, 1.0) for q in peers]


# -------------------------------------------------------------- building blocks
def _binomial_parent(r: int) -> int:
    """Parent of relative rank r > 0 in the binomial tree: r without its lowest bit."""
    return r & (r - 1)


def _binomial_children(r: int, size: int) -> list[int]:
    """Children of relative rank r: r + 2^j for 2^j below r's lowest set bit."""
    low = (r & -r) if r else 1 << max(size - 1, 0).bit_length()
    kids = []
    bit = 1
    while bit < low and r + bit < size:
        kids.append(r + bit)
        bit <<= 1
    return kids


def _subtree(r: int, size: int) -> int:
    """Ranks in the binomial subtree of relative rank r (itself included)."""
    low = (r & -r) if r else 1 << max(size - 1, 0).bit_length()
    return min(low, size - r)


def _tree_down(r, size, carry_subtree):
    return [(c, _subtree(c, size) if carry_subtree else 1) for c in _binomial_children(r, size)]


def _tree_up(r, size, carry_subtree):
    if r == 0:
        return []
    return [(_binomial_parent(r), _subtree(r, size) if carry_subtree else 1)]


def _star_down(r, size, factor=1):
    return [(q, factor) for q in range(1, size)] if r == 0 else []


def _star_up(r, size):
    return [] if r == 0 else [(0, 1)]


def _merge(*lists):
    out: dict[int, float] = {}
    for edges in lists:
        for q, f in edges:
            out[q] = out.get(q, 0) + f
    return sorted(out.items())


# ------------------------------------------------------------------ the models
def _root_model(op, r, size):
    if op == "bcast":
        return _star_down(r, size)
    if op in ("reduce", "gather"):
        return _star_up(r, size)
    if op == "scatter":
        return _star_down(r, size)
    if op == "allreduce":
        return _merge(_star_up(r, size), _star_down(r, size))
    if op == "allgather":
        return _merge(_star_up(r, size), _star_down(r, size, size))
    if op == "reduce_scatter":  # reduce p blocks to the root, then scatter one each
        return _merge([(q, size) for q, _ in _star_up(r, size)], _star_down(r, size))
    if op == "scan":
        return [(r + 1, 1)] if r + 1 < size else []
    raise AssertionError(op)


def _tree_model(op, r, size):
    if op == "bcast":
        return _tree_down(r, size, False)
    if op == "reduce":
        return _tree_up(r, size, False)
    if op == "scatter":
        return _tree_down(r, size, True)
    if op == "gather":
        return _tree_up(r, size, True)
    if op == "allreduce":
        return _merge(_tree_up(r, size, False), _tree_down(r, size, False))
    if op == "allgather":
        return _merge(_tree_up(r, size, True), [(c, size) for c, _ in _tree_down(r, size, False)])
    if op == "reduce_scatter":
        return _merge([(p, size) for p, _ in _tree_up(r, size, False)], _tree_down(r, size, True))
    if op == "scan":
        out, bit = [], 1
        while r + bit < size:
            out.append((r + bit, 1))
            bit <<= 1
        return out
    raise AssertionError(op)


def _ring_model(op, r, size):
    right = (r + 1) % size
    if op == "bcast":
        return [(r + 1, 1)] if r + 1 < size else []
    if op == "reduce":
        return [(r - 1, 1)] if r > 0 else []
    if op == "scatter":  # chain from the root, each hop carries the blocks beyond it
        return [(r + 1, size - 1 - r)] if r + 1 < size else []
    if op == "gather":
        return [(r - 1, size - r)] if r > 0 else []
    if op == "allreduce":
        return [(right, 2.0 * (size - 1) / size)]
    if op in ("allgather", "reduce_scatter"):
        return [(right, size - 1)]
    if op == "scan":
        return [(r + 1, 1)] if r + 1 < size else []
    raise AssertionError(op)


_MODEL_FUNCS = {"root": _root_model, "tree": _tree_model, "ring": _ring_model}
