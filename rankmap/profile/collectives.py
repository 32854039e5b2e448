"""Collective models: which pairs a collective's messages travel between.

A collective hides its messages inside the MPI library, so the profiler
attributes them to pairs with a model, selected with ``--collectives``:

``mpi``   (default) the algorithm the MPI library itself selects for the
          operation, the communicator's size and the message size: MPICH's
          default selection (``src/mpi/coll/coll_selection.json``, MPICH 4.1
          to 5.0) or Open MPI's ``coll/tuned`` fixed decision rules
          (``coll_tuned_decision_fixed.c``, Open MPI 4.1 and 5.0), chosen by
          the library the run used (``MPI_Get_library_version``; MPICH's
          rules where the library is unknown or derived from MPICH).  Every
          step of the algorithm is a message: recursive doubling, Rabenseifner
          (reduce-scatter by recursive halving + allgather by recursive
          doubling), binomial and k-nomial trees, scatter + allgather, Bruck,
          ring, pairwise, dissemination barriers (messages without bytes).
          The thresholds and the algorithms are listed in docs/message-costs.md.
``root``  everything goes through the root (rank 0 for unrooted operations):
          bcast/scatter root -> each, gather/reduce each -> root,
          allreduce = reduce + bcast, allgather = gather + bcast of all blocks,
          reduce_scatter = reduce + scatter, scan = chain r -> r+1.
``tree``  binomial trees as MPICH uses for short messages:
          bcast/reduce along the binomial tree rooted at the root, scatter/gather
          along it carrying whole subtrees, allreduce = binomial reduce + bcast,
          allgather = binomial gather + bcast of all blocks, reduce_scatter =
          binomial reduce + scatter, scan = recursive doubling r -> r + 2^k.
``ring``  pipelines as used for long messages: bcast a chain root -> root+1 ...,
          reduce the reverse chain, allreduce and allgather the ring (each rank
          sends 2(p-1)/p of the vector, resp. p-1 blocks, to its right
          neighbour), reduce_scatter p-1 blocks to the right, scan a chain.

In ``root``, ``tree`` and ``ring`` alltoall(v/w) is a direct exchange (block i
goes to rank i), each pair one message, and barriers send nothing.  In every
model neighbourhood collectives are exact: they name their peers.  On an
intercommunicator every model sends straight to the other group
(``intercomm_plan``).

A plan is a list of ``(peer, factor, messages)`` for the calling rank only:
the rank sends ``factor x unit`` bytes to ``peer`` (comm ranks) in
``messages`` messages, where ``unit`` is the operation's natural size (whole
vector for bcast/reduce/allreduce/scan, one block for
scatter/gather/allgather/reduce_scatter/alltoall, nothing for barrier).
The ``mpi`` model needs that unit (``nbytes``) to choose as the library does;
a plan is linear in the unit, so summed units of calls that chose alike give
the summed bytes.

Not modelled: MPICH's node-aware compositions (ch4 runs small allreduce,
bcast, reduce and barrier on a communicator that spans nodes with several
ranks per node as a step inside each node and one among the nodes' first
ranks, ``maint/tuning/coll/ch4/generic.json``) and Open MPI's ``coll/han``;
their steps depend on the placement itself (docs/message-costs.md).
"""

from __future__ import annotations

import math
from functools import lru_cache

MODELS = ("none", "root", "tree", "ring", "mpi")
DEFAULT_MODEL = "mpi"

OPS = ("bcast", "reduce", "scatter", "gather", "allgather", "allreduce",
       "alltoall", "reduce_scatter", "scan", "barrier")

LIBRARIES = ("mpich", "openmpi")
#: the ``mpi`` model counts a reduction's elements as doubles (MPICH picks
#: Rabenseifner only when the vector has at least as many elements as the
#: largest power of two below the communicator's size)
ELEMENT_BYTES = 8


def library_family(version: str | None) -> str:
    """``"openmpi"`` for an Open MPI library version string, else
    ``"mpich"`` (MPICH, and the libraries built on it: Intel MPI, MVAPICH,
    Cray MPICH; also where the library is unknown)."""
    text = (version or "").lower()
    return "openmpi" if "open mpi" in text or "openmpi" in text else "mpich"


def plan(model: str, op: str, rank: int, size: int, root: int = 0, nbytes: float | None = None,
         library: str = "") -> list[tuple[int, float, int]]:
    """Outgoing ``(peer, factor, messages)`` of ``rank`` in ``op`` on ``size``
    ranks; ``nbytes`` (the unit) and ``library`` (a version string or a
    family) choose the algorithm of the ``mpi`` model."""
    if model not in MODELS:
        raise ValueError(f"unknown collective model {model!r}: choose from {', '.join(MODELS)}")
    if op not in OPS:
        raise ValueError(f"unknown collective operation {op!r}")
    if model == "none" or size <= 1:
        return []
    r = (rank - root) % size  # rank relative to the root
    if model == "mpi":
        edges = _steps(algorithm(op, size, nbytes, library), op, r, size, _family(library), nbytes)
    elif op == "alltoall":
        edges = [(q, 1.0, 1) for q in range(size) if q != r]
    elif op == "barrier":
        edges = []
    else:
        edges = [(q, f, 1) for q, f in _MODEL_FUNCS[model](op, r, size) if f]
    return [((q + root) % size, float(f), int(m)) for q, f, m in _merge(edges) if m]


def algorithm(op: str, size: int, nbytes: float | None, library: str = "") -> str:
    """The algorithm the ``mpi`` model gives ``op`` on ``size`` ranks with a
    unit of ``nbytes`` (None: as for short messages) under ``library``."""
    if op not in OPS:
        raise ValueError(f"unknown collective operation {op!r}")
    return choose(op, size, 0.0 if nbytes is None else float(nbytes), _family(library))


@lru_cache(maxsize=4096)
def choose(op: str, size: int, unit: float, family: str) -> str:
    """``algorithm`` for a known ``family`` (``LIBRARIES``) and a unit in
    bytes, remembered: a program repeats a few calls, and the profiler asks
    at every collective call."""
    if family == "openmpi":
        return _openmpi_algorithm(op, size, unit)
    return _mpich_algorithm(op, size, unit)


def intercomm_plan(op: str, size: int, root: int, is_root: bool) -> list[tuple[int, float, int]]:
    """Outgoing ``(peer, factor, messages)`` of a rank in ``op`` on an
    intercommunicator whose remote group has ``size`` ranks: the root
    (``is_root``, MPI_ROOT) of a bcast/scatter sends to every remote rank, a
    rank of the other group of a gather/reduce sends to the remote ``root``
    (``root >= 0``), the unrooted operations send to every remote rank."""
    if op not in OPS:
        raise ValueError(f"unknown collective operation {op!r}")
    if op in ("bcast", "scatter"):
        peers = range(size) if is_root else ()
    elif op in ("gather", "reduce"):
        peers = (root,) if root >= 0 else ()
    else:
        peers = range(size)
    return [(q, 0.0 if op == "barrier" else 1.0, 1) for q in peers]


def _family(library: str) -> str:
    return library if library in LIBRARIES else library_family(library)


def _pof2(size: int) -> int:
    """The largest power of two not above ``size``."""
    return 1 << (size.bit_length() - 1)


# -------------------------------------------------------- MPICH's selection
def _mpich_algorithm(op: str, size: int, unit: float) -> str:
    """MPICH's default algorithms (``coll_selection.json``; the sizes are
    its ``avg_msg_size`` = the unit, ``total_msg_size`` = unit x size)."""
    pof2 = size == _pof2(size)
    total = unit * size
    if op == "bcast":
        if size < 8 or unit <= 12288:
            return "binomial"
        return "scatter_recursive_doubling_allgather" if pof2 and unit <= 524288 else "scatter_ring_allgather"
    if op == "allreduce":
        if unit <= 8 or unit / ELEMENT_BYTES < _pof2(size):
            return "recursive_doubling"
        return "rabenseifner"
    if op == "reduce":
        if unit <= 2048 or unit / ELEMENT_BYTES < _pof2(size):
            return "binomial"
        return "rabenseifner"
    if op == "allgather":
        if pof2:
            return "recursive_doubling" if total < 524288 else "ring"
        return "bruck" if total < 81920 else "ring"
    if op == "reduce_scatter":
        return "recursive_halving" if total < 524288 else "pairwise"
    if op == "alltoall":
        return "bruck" if size >= 8 and unit <= 256 else "direct"
    if op == "barrier":
        return "dissemination"
    if op == "scan":
        return "recursive_doubling"
    return "binomial"  # gather, scatter


# ----------------------------------------------------- Open MPI's selection
_INF = math.inf
#: Open MPI's fixed decision rules (``coll_tuned_decision_fixed.c``, 4.1 and
#: 5.0; commutative operations): per communicator size below a bound, the
#: algorithm per message size below a bound.  Names are this module's; see
#: ``_OPENMPI_NAMES`` for Open MPI's numbering.
_OPENMPI_RULES = {
    "allreduce": (  # 1 linear, 2 nonoverlapping, 3 recursive doubling, 4 ring, 5 segmented ring, 6 rabenseifner
        (4, ((8, 4), (4096, 3), (8192, 4), (16384, 3), (65536, 4), (262144, 5), (_INF, 6))),
        (8, ((16, 4), (8192, 3), (_INF, 6))),
        (16, ((8192, 3), (_INF, 6))),
        (32, ((64, 5), (4096, 3), (_INF, 6))),
        (64, ((128, 5), (_INF, 6))),
        (128, ((262144, 3), (_INF, 6))),
        (256, ((131072, 2), (262144, 3), (_INF, 6))),
        (512, ((4096, 2), (_INF, 6))),
        (2048, ((2048, 2), (16384, 3), (_INF, 6))),
        (4096, ((2048, 2), (4096, 5), (16384, 3), (_INF, 6))),
        (_INF, ((2048, 2), (16384, 5), (32768, 3), (_INF, 6)))),
    "bcast": (  # 1 linear, 2 chain, 3 pipeline, 4 split binary, 5 binary, 6 binomial, 7 knomial,
                # 8 scatter + allgather, 9 scatter + ring allgather
        (4, ((32, 3), (256, 5), (512, 3), (1024, 7), (32768, 1), (131072, 5), (262144, 2), (524288, 1),
             (1048576, 6), (_INF, 5))),
        (8, ((64, 5), (128, 6), (2048, 5), (8192, 6), (1048576, 1), (_INF, 2))),
        (16, ((8, 7), (64, 5), (4096, 7), (16384, 5), (32768, 6), (_INF, 1))),
        (32, ((4096, 7), (1048576, 6), (_INF, 8))),
        (64, ((2048, 6), (_INF, 7))),
        (128, ((_INF, 7),)),
        (256, ((2, 6), (16384, 5), (32768, 1), (65536, 5), (_INF, 7))),
        (1024, ((16384, 7), (32768, 4), (_INF, 7))),
        (2048, ((524288, 7), (_INF, 8))),
        (4096, ((262144, 7), (_INF, 8))),
        (_INF, ((8192, 7), (16384, 5), (262144, 7), (_INF, 8)))),
    "reduce": (  # 1 linear, 2 chain, 3 pipeline, 4 binary, 5 binomial, 6 in-order binary, 7 rabenseifner
        (4, ((8, 7), (16, 4), (32, 3), (262144, 1), (524288, 3), (1048576, 2), (_INF, 3))),
        (8, ((4096, 4), (65536, 2), (262144, 5), (524288, 1), (1048576, 5), (_INF, 1))),
        (16, ((8192, 4), (_INF, 5))),
        (32, ((4096, 4), (_INF, 5))),
        (256, ((_INF, 5),)),
        (512, ((8192, 5), (16384, 6), (_INF, 5))),
        (2048, ((_INF, 5),)),
        (4096, ((512, 5), (1024, 6), (8192, 5), (16384, 6), (_INF, 5))),
        (_INF, ((16, 5), (32, 6), (1024, 5), (2048, 6), (8192, 5), (16384, 6), (_INF, 5)))),
    "allgather": (  # 1 linear, 2 bruck, 3 recursive doubling, 4 ring, 5 neighbour exchange, 6 two procs
        (3, ((_INF, 6),)),
        (32, ((_INF, 3),)),
        (64, ((1024, 3), (65536, 5), (_INF, 4))),
        (128, ((512, 3), (65536, 5), (_INF, 4))),
        (256, ((512, 3), (131072, 5), (524288, 4), (1048576, 5), (_INF, 4))),
        (512, ((32, 3), (128, 2), (1024, 3), (131072, 5), (524288, 4), (1048576, 5), (_INF, 4))),
        (1024, ((64, 3), (256, 2), (2048, 3), (_INF, 5))),
        (2048, ((4, 3), (8, 2), (16, 3), (32, 2), (256, 3), (512, 2), (4096, 3), (_INF, 5))),
        (4096, ((32, 2), (128, 3), (512, 2), (4096, 3), (_INF, 5))),
        (_INF, ((2, 3), (8, 2), (16, 3), (512, 2), (4096, 3), (_INF, 5)))),
    "alltoall": (  # 1 linear, 2 pairwise, 3 modified bruck, 4 linear sync, 5 two procs
        (8, ((_INF, 1),)),
        (16, ((_INF, 4),)),
        (32, ((4, 4), (512, 3), (_INF, 1))),
        (64, ((512, 3), (_INF, 1))),
        (512, ((1024, 3), (_INF, 1))),
        (2048, ((512, 3), (_INF, 1))),
        (4096, ((1024, 3), (_INF, 1))),
        (_INF, ((2048, 3), (_INF, 1)))),
    "reduce_scatter": (  # 1 nonoverlapping, 2 recursive halving, 3 ring, 4 butterfly (on the total)
        (4, ((65536, 3), (131072, 4), (_INF, 3))),
        (8, ((8, 1), (262144, 2), (_INF, 3))),
        (32, ((262144, 2), (_INF, 3))),
        (64, ((64, 1), (2048, 2), (524288, 4), (_INF, 3))),
        (128, ((256, 1), (512, 2), (2048, 4), (4096, 2), (_INF, 4))),
        (256, ((256, 1), (512, 2), (_INF, 4))),
        (512, ((256, 1), (1024, 2), (_INF, 4))),
        (1024, ((512, 1), (2048, 2), (8192, 4), (16384, 2), (_INF, 4))),
        (2048, ((512, 1), (4096, 2), (16384, 4), (32768, 2), (_INF, 4))),
        (4096, ((512, 1), (4096, 2), (_INF, 4))),
        (_INF, ((1024, 1), (8192, 2), (_INF, 4)))),
    "gather": (  # 1 linear, 2 binomial, 3 linear sync
        (4, ((4, 1), (32768, 2), (65536, 1), (131072, 2), (_INF, 3))),
        (8, ((1024, 2), (8192, 1), (32768, 2), (262144, 1), (_INF, 3))),
        (256, ((_INF, 2),)),
        (512, ((2048, 2), (8192, 1), (_INF, 2))),
        (_INF, ((_INF, 2),))),
    "scatter": (  # 1 linear, 2 binomial, 3 linear non-blocking
        (4, ((2, 3), (131072, 1), (262144, 3), (_INF, 1))),
        (8, ((2048, 2), (4096, 1), (8192, 2), (32768, 1), (1048576, 3), (_INF, 1))),
        (16, ((16384, 2), (1048576, 3), (_INF, 1))),
        (32, ((16384, 2), (32768, 1), (_INF, 3))),
        (64, ((512, 2), (8192, 3), (16384, 2), (_INF, 3))),
        (_INF, ((512, 2), (_INF, 3)))),
    "barrier": (  # 1 linear, 2 double ring, 3 recursive doubling, 4 bruck, 6 tree
        (4, ((_INF, 3),)), (8, ((_INF, 1),)), (64, ((_INF, 3),)), (256, ((_INF, 4),)),
        (512, ((_INF, 6),)), (1024, ((_INF, 4),)), (4096, ((_INF, 6),)), (_INF, ((_INF, 4),))),
}
_OPENMPI_NAMES = {
    "allreduce": {1: "linear", 2: "nonoverlapping", 3: "recursive_doubling", 4: "ring", 5: "ring",
                  6: "rabenseifner"},
    "bcast": {1: "linear", 2: "chain", 3: "chain", 4: "binary", 5: "binary", 6: "binomial", 7: "knomial",
              8: "scatter_recursive_doubling_allgather", 9: "scatter_ring_allgather"},
    "reduce": {1: "linear", 2: "chain", 3: "chain", 4: "binary", 5: "binomial", 6: "binary", 7: "rabenseifner"},
    "allgather": {1: "linear", 2: "bruck", 3: "recursive_doubling", 4: "ring", 5: "neighbor_exchange",
                  6: "direct"},
    "alltoall": {1: "direct", 2: "direct", 3: "bruck", 4: "direct", 5: "direct"},
    "reduce_scatter": {1: "nonoverlapping", 2: "recursive_halving", 3: "ring", 4: "recursive_halving"},
    "gather": {1: "linear", 2: "binomial", 3: "linear"},
    "scatter": {1: "linear", 2: "binomial", 3: "linear"},
    "barrier": {1: "linear", 2: "double_ring", 3: "recursive_doubling", 4: "dissemination", 6: "binomial"},
}


def _openmpi_algorithm(op: str, size: int, unit: float) -> str:
    """Open MPI's choice: its rules are on the message size of one call
    (the unit; for reduce_scatter the total over the ranks)."""
    if op == "scan":
        return "chain"
    if op == "allgather" and size == 2:
        return "direct"
    if op == "alltoall" and size == 2:
        return "direct"
    if op == "barrier" and size == 2:
        return "direct"
    measure = unit * size if op == "reduce_scatter" else unit
    for below, rows in _OPENMPI_RULES[op]:
        if size < below:
            alg = next(a for limit, a in rows if measure < limit)
            name = _OPENMPI_NAMES[op][alg]
            if name == "recursive_doubling" and op == "allgather" and size != _pof2(size):
                return "bruck"  # Open MPI's recursive doubling allgather falls back to Bruck
            if name == "neighbor_exchange" and size % 2:
                return "ring"   # ... and its neighbour exchange to the ring on an odd count
            return name
    raise AssertionError(op)


# ---------------------------------------------------------------- the steps
def _steps(name: str, op: str, r: int, size: int, library: str, nbytes) -> list[tuple[int, float, int]]:
    """``(relative peer, factor, messages)`` of relative rank ``r`` in
    algorithm ``name`` of ``op``."""
    if op == "barrier":
        return [(q, 0.0, m) for q, _, m in _BARRIERS[name](r, size)]
    if name == "nonoverlapping":  # reduce then bcast (allreduce), reduce then scatter (reduce_scatter)
        if op == "allreduce":
            return _merge(*(_steps(algorithm(part, size, nbytes, library), part, r, size, library, nbytes)
                            for part in ("reduce", "bcast")))
        whole = None if nbytes is None else nbytes * size
        reduce = _steps(algorithm("reduce", size, whole, library), "reduce", r, size, library, whole)
        return _merge([(q, f * size, m) for q, f, m in reduce], _star_down(r, size))
    return _ALGORITHMS[op, name](r, size)


def _merge(*lists) -> list[tuple[int, float, int]]:
    """Sum factors and messages per peer, peers in order."""
    out: dict[int, list] = {}
    for edges in lists:
        for q, f, m in edges:
            acc = out.setdefault(q, [0.0, 0])
            acc[0] += f
            acc[1] += m
    return [(q, f, m) for q, (f, m) in sorted(out.items())]


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
    return [(c, _subtree(c, size) if carry_subtree else 1, 1) for c in _binomial_children(r, size)]


def _tree_up(r, size, carry_subtree):
    if r == 0:
        return []
    return [(_binomial_parent(r), _subtree(r, size) if carry_subtree else 1, 1)]


def _star_down(r, size, factor=1.0):
    return [(q, factor, 1) for q in range(1, size)] if r == 0 else []


def _star_up(r, size):
    return [] if r == 0 else [(0, 1.0, 1)]


def _pairs(edges):
    """Model functions of the older models give ``(peer, factor)``."""
    return [(q, f) for q, f, _ in edges]


def _direct(r, size, factor=1.0):
    return [(q, factor, 1) for q in range(size) if q != r]


def _knomial_children(r: int, size: int, radix: int) -> list[int]:
    """Children of relative rank r in the k-nomial tree: r + j * radix^l for
    every digit position l below r's lowest non-zero base-radix digit."""
    kids, step = [], 1
    while step < size and (r == 0 or (r // step) % radix == 0):
        kids += [r + j * step for j in range(1, radix) if r + j * step < size]
        step *= radix
    return kids


def _knomial(r, size, radix=4):
    return [(c, 1.0, 1) for c in _knomial_children(r, size, radix)]


def _binary_down(r, size):
    return [(c, 1.0, 1) for c in (2 * r + 1, 2 * r + 2) if c < size]


def _binary_up(r, size):
    return [((r - 1) // 2, 1.0, 1)] if r else []


def _chain_down(r, size):
    return [(r + 1, 1.0, 1)] if r + 1 < size else []


def _chain_up(r, size):
    return [(r - 1, 1.0, 1)] if r else []


def _halving_ranks(r: int, size: int):
    """The non-power-of-two step of recursive doubling and halving (MPICH,
    Open MPI): the first 2 x rem ranks pair up, the even one hands its data
    to the odd one and sits out.  Returns (pof2, rem, newrank or -1, the
    real rank of a newrank)."""
    pof2 = _pof2(size)
    rem = size - pof2
    if r < 2 * rem:
        new = -1 if r % 2 == 0 else r // 2
    else:
        new = r - rem

    def real(x: int) -> int:
        return 2 * x + 1 if x < rem else x + rem

    return pof2, rem, new, real


def _recursive_doubling(r, size, factor=1.0):
    """Allreduce by recursive doubling: the whole vector to the partner
    newrank ^ 2^k at every step, around the pairing of the extra ranks."""
    pof2, rem, new, real = _halving_ranks(r, size)
    edges = [(r + 1, factor, 1)] if new < 0 else []
    mask = 1
    while new >= 0 and mask < pof2:
        edges.append((real(new ^ mask), factor, 1))
        mask <<= 1
    if r < 2 * rem and r % 2:
        edges.append((r - 1, factor, 1))
    return edges


def _rabenseifner(r, size):
    """Allreduce: reduce-scatter by recursive halving (step 2^k sends half of
    what is left to newrank ^ 2^k), then allgather by recursive doubling
    back along the same partners: two messages of 1/(2 x 2^k) each."""
    pof2, rem, new, real = _halving_ranks(r, size)
    edges = [(r + 1, 1.0, 1)] if new < 0 else []
    mask = 1
    while new >= 0 and mask < pof2:
        edges.append((real(new ^ mask), 1.0 / mask, 2))
        mask <<= 1
    if r < 2 * rem and r % 2:
        edges.append((r - 1, 1.0, 1))
    return edges


def _reduce_rabenseifner(r, size):
    """Reduce (MPICH's reduce_scatter_gather): the reduce-scatter of
    ``_rabenseifner``, then a binomial gather of the pieces towards
    newrank 0, whose result goes to the root (relative 0)."""
    pof2, rem, new, real = _halving_ranks(r, size)
    edges = [(r + 1, 1.0, 1)] if new < 0 else []
    mask = 1
    while new >= 0 and mask < pof2:
        edges.append((real(new ^ mask), 1.0 / (2 * mask), 1))
        mask <<= 1
    if new > 0:
        high = 1 << (new.bit_length() - 1)
        parent = new ^ high
        edges.append((0 if parent == 0 else real(parent), 1.0 / (2 * high), 1))
    elif new == 0 and real(0) != 0:
        edges.append((0, 1.0 / pof2, 1))  # newrank 0's own piece, when the root sits out
    return edges


def _recursive_halving(r, size):
    """Reduce-scatter (unit: one block of ``size``): the extra ranks hand
    their whole vector over, halving steps send the partner's half of the
    blocks left, the extra ranks get their block back."""
    pof2, rem, new, real = _halving_ranks(r, size)
    edges = [(r + 1, float(size), 1)] if new < 0 else []
    mask = pof2 >> 1
    while new >= 0 and mask:
        edges.append((real(new ^ mask), size * mask / pof2, 1))
        mask >>= 1
    if r < 2 * rem and r % 2:
        edges.append((r - 1, 1.0, 1))
    return edges


def _allgather_recursive_doubling(r, size, block=1.0):
    """Step 2^k: the 2^k blocks gathered so far to rank r ^ 2^k (power-of-two sizes)."""
    out, mask = [], 1
    while mask < size:
        if r ^ mask < size:
            out.append((r ^ mask, block * mask, 1))
        mask <<= 1
    return out


def _bruck(r, size):
    """Allgather by Bruck: step k sends min(2^k, p - 2^k) blocks to r - 2^k."""
    out, step = [], 1
    while step < size:
        out.append(((r - step) % size, float(min(step, size - step)), 1))
        step <<= 1
    return out


def _ring(r, size, factor, messages):
    return [((r + 1) % size, factor, messages)]


def _neighbor_exchange(r, size):
    """Open MPI's neighbour exchange (even sizes): one block to one
    neighbour, then two blocks at a time to either neighbour in turn."""
    first, second = ((r + 1) % size, (r - 1) % size) if r % 2 == 0 else ((r - 1) % size, (r + 1) % size)
    out = [(first, 1.0, 1)]
    out += [((first, second)[i % 2], 2.0, 1) for i in range(1, size // 2)]
    return out


def _alltoall_bruck(r, size):
    """Step k sends the blocks whose index has bit k set to r + 2^k."""
    out, step = [], 1
    while step < size:
        out.append(((r + step) % size, float(sum(1 for j in range(size) if j & step)), 1))
        step <<= 1
    return out


def _scatter_then(allgather):
    """Bcast as a binomial scatter of 1/p pieces then an allgather of them."""
    def steps(r, size):
        scatter = [(c, s / size, m) for c, s, m in _tree_down(r, size, True)]
        return scatter + allgather(r, size)
    return steps


def _dissemination(r, size):
    out, step = [], 1
    while step < size:
        out.append(((r + step) % size, 0.0, 1))
        step <<= 1
    return out


def _barrier_recursive_doubling(r, size):
    """Open MPI: the ranks above the largest power of two check in with
    r - pof2 before the exchanges and are released after them."""
    pof2 = _pof2(size)
    if r >= pof2:
        return [(r - pof2, 0.0, 1)]
    out = [(r ^ mask, 0.0, 1) for mask in (1 << k for k in range(pof2.bit_length() - 1))]
    return out + ([(r + pof2, 0.0, 1)] if r + pof2 < size else [])


_ALGORITHMS = {
    ("bcast", "binomial"): lambda r, p: _tree_down(r, p, False),
    ("bcast", "scatter_recursive_doubling_allgather"):
        _scatter_then(lambda r, p: _allgather_recursive_doubling(r, p, 1.0 / p)),
    ("bcast", "scatter_ring_allgather"): _scatter_then(lambda r, p: _ring(r, p, (p - 1) / p, p - 1)),
    ("bcast", "linear"): _star_down,
    ("bcast", "chain"): _chain_down,
    ("bcast", "binary"): _binary_down,
    ("bcast", "knomial"): _knomial,
    ("reduce", "binomial"): lambda r, p: _tree_up(r, p, False),
    ("reduce", "rabenseifner"): _reduce_rabenseifner,
    ("reduce", "linear"): lambda r, p: _star_up(r, p),
    ("reduce", "chain"): _chain_up,
    ("reduce", "binary"): _binary_up,
    ("allreduce", "recursive_doubling"): _recursive_doubling,
    ("allreduce", "rabenseifner"): _rabenseifner,
    ("allreduce", "ring"): lambda r, p: _ring(r, p, 2.0 * (p - 1) / p, 2 * (p - 1)),
    ("allreduce", "linear"): lambda r, p: _star_up(r, p) + _star_down(r, p),
    ("allgather", "recursive_doubling"): _allgather_recursive_doubling,
    ("allgather", "bruck"): _bruck,
    ("allgather", "ring"): lambda r, p: _ring(r, p, float(p - 1), p - 1),
    ("allgather", "neighbor_exchange"): _neighbor_exchange,
    ("allgather", "direct"): _direct,
    ("allgather", "linear"): lambda r, p: _star_up(r, p) + _star_down(r, p, float(p)),
    ("reduce_scatter", "recursive_halving"): _recursive_halving,
    ("reduce_scatter", "pairwise"): _direct,
    ("reduce_scatter", "ring"): lambda r, p: _ring(r, p, float(p - 1), p - 1),
    ("alltoall", "direct"): _direct,
    ("alltoall", "bruck"): _alltoall_bruck,
    ("gather", "binomial"): lambda r, p: _tree_up(r, p, True),
    ("gather", "linear"): lambda r, p: _star_up(r, p),
    ("scatter", "binomial"): lambda r, p: _tree_down(r, p, True),
    ("scatter", "linear"): _star_down,
    ("scan", "recursive_doubling"): lambda r, p: [(r ^ (1 << k), 1.0, 1) for k in range(p.bit_length())
                                                  if r ^ (1 << k) < p],
    ("scan", "chain"): _chain_down,
}
_BARRIERS = {
    "dissemination": _dissemination,
    "recursive_doubling": _barrier_recursive_doubling,
    "linear": lambda r, p: _star_up(r, p) + _star_down(r, p),
    "double_ring": lambda r, p: _ring(r, p, 0.0, 2),
    "binomial": lambda r, p: _tree_up(r, p, False) + _tree_down(r, p, False),
    "direct": _direct,
}


# ------------------------------------------------------------- older models
def _root_model(op, r, size):
    if op == "bcast":
        return _pairs(_star_down(r, size))
    if op in ("reduce", "gather"):
        return _pairs(_star_up(r, size))
    if op == "scatter":
        return _pairs(_star_down(r, size))
    if op == "allreduce":
        return _pairs(_star_up(r, size) + _star_down(r, size))
    if op == "allgather":
        return _pairs(_star_up(r, size) + _star_down(r, size, size))
    if op == "reduce_scatter":  # reduce p blocks to the root, then scatter one each
        return [(q, size) for q, _ in _pairs(_star_up(r, size))] + _pairs(_star_down(r, size))
    if op == "scan":
        return [(r + 1, 1)] if r + 1 < size else []
    raise AssertionError(op)


def _tree_model(op, r, size):
    if op == "bcast":
        return _pairs(_tree_down(r, size, False))
    if op == "reduce":
        return _pairs(_tree_up(r, size, False))
    if op == "scatter":
        return _pairs(_tree_down(r, size, True))
    if op == "gather":
        return _pairs(_tree_up(r, size, True))
    if op == "allreduce":
        return _pairs(_tree_up(r, size, False) + _tree_down(r, size, False))
    if op == "allgather":
        return _pairs(_tree_up(r, size, True)) + [(c, size) for c, _, _ in _tree_down(r, size, False)]
    if op == "reduce_scatter":
        return [(p, size) for p, _ in _pairs(_tree_up(r, size, False))] + _pairs(_tree_down(r, size, True))
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
