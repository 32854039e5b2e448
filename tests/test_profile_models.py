"""Collective models and buffer-size rules, without MPI ranks."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from rankmap.profile.buffers import buffer_bytes, vector_bytes
from rankmap.profile.collectives import MODELS, algorithm, library_family, plan


def _matrix(model, op, size, root=0, nbytes=None, library="", messages=False):
    """factor (or messages) from rank r to rank q, summed over the plan."""
    m = np.zeros((size, size))
    for r in range(size):
        for q, f, k in plan(model, op, r, size, root, nbytes, library):
            assert q != r and k >= 1
            m[r, q] += k if messages else f
    return m


@pytest.mark.parametrize("size", [1, 2, 5, 8, 13])
@pytest.mark.parametrize("root", [0, 3])
@pytest.mark.parametrize("model", ["root", "tree", "ring"])
def test_models_deliver_every_block_once(model, size, root):
    root %= size
    bcast = _matrix(model, "bcast", size, root)
    assert (bcast.sum(axis=0) == [0 if q == root else 1 for q in range(size)]).all()
    # scatter moves p - 1 blocks out of the root in total, one arriving per rank net
    scatter = _matrix(model, "scatter", size, root)
    net_in = scatter.sum(axis=0) - scatter.sum(axis=1)
    assert np.allclose(net_in, [-(size - 1) if q == root else 1 for q in range(size)])
    gather = _matrix(model, "gather", size, root)
    assert np.allclose(gather, scatter.T)
    reduce = _matrix(model, "reduce", size, root)
    assert reduce.sum() == size - 1 and reduce[root].sum() == 0


def test_tree_bcast_is_binomial():
    m = _matrix("tree", "bcast", 8)
    assert [int(c) for c in np.flatnonzero(m[0])] == [1, 2, 4]
    assert [int(c) for c in np.flatnonzero(m[4])] == [5, 6]
    assert m.sum() == 7


def test_ring_allreduce_and_alltoall():
    m = _matrix("ring", "allreduce", 4)
    assert np.allclose(m[0], [0, 1.5, 0, 0]) and np.allclose(m[3], [1.5, 0, 0, 0])
    for model in MODELS[1:]:
        assert _matrix(model, "alltoall", 4, nbytes=1024).sum() == 12
    assert _matrix("none", "bcast", 4).sum() == 0
    with pytest.raises(ValueError, match="unknown collective model"):
        plan("star", "bcast", 0, 4)


def test_buffer_bytes_rules():
    a = np.arange(10, dtype=np.float64)
    vec = MPI.DOUBLE.Create_vector(2, 1, 3).Commit()  # size 16, extent 32
    try:
        assert buffer_bytes(a) == 80
        assert buffer_bytes([a, MPI.INT]) == 80
        assert buffer_bytes([a, 4, MPI.FLOAT]) == 16
        assert buffer_bytes([a, (3, 2), MPI.DOUBLE]) == 24
        assert buffer_bytes([a, 3, 1, "d"]) == 24
        assert buffer_bytes([a, 2]) == 16
        assert buffer_bytes([a, vec]) == 2 * 16
        assert buffer_bytes([a, 1, vec]) == 16
        assert buffer_bytes(b"abc") == 3 and buffer_bytes(memoryview(bytearray(7))) == 7
        assert buffer_bytes(MPI.IN_PLACE) == 0 and buffer_bytes(None) == 0
        assert vector_bytes([a, [1, 2, 3], None, MPI.DOUBLE], 3) == [8, 16, 24]
        assert vector_bytes([a, ([1, 2], [0, 1]), MPI.INT], 2) == [4, 8]
        assert vector_bytes([a, ([1, 2], [0, 8]), [MPI.DOUBLE, MPI.INT]], 2) == [8, 8]
        assert vector_bytes(a, 5) == [16] * 5
    finally:
        vec.Free()
    with pytest.raises(ValueError, match="unknown MPI typecode"):
        buffer_bytes([a, "qq"])


# ------------------------------------------------------------- the mpi model
def _edges(op, size, nbytes, library="mpich", root=0):
    """{rank: {peer: (factor, messages)}} of the mpi model."""
    return {r: {q: (f, m) for q, f, m in plan("mpi", op, r, size, root, nbytes, library)} for r in range(size)}


def test_mpich_short_allreduce_is_recursive_doubling():
    # 8 bytes (one double, HPCG's DDOT) on 8 ranks: three exchanges with r ^ 1, r ^ 2, r ^ 4
    assert algorithm("allreduce", 8, 8, "MPICH Version: 4.2.0") == "recursive_doubling"
    edges = _edges("allreduce", 8, 8)
    for r in range(8):
        assert edges[r] == {r ^ 1: (1.0, 1), r ^ 2: (1.0, 1), r ^ 4: (1.0, 1)}


def test_mpich_recursive_doubling_pairs_the_extra_ranks():
    # 6 ranks: pof2 4, rem 2; ranks 0 and 2 hand their vector to 1 and 3 and get the result back,
    # newranks 0..3 are ranks 1, 3, 4, 5
    edges = _edges("allreduce", 6, 8)
    assert edges[0] == {1: (1.0, 1)} and edges[2] == {3: (1.0, 1)}
    assert edges[1] == {0: (1.0, 1), 3: (1.0, 1), 4: (1.0, 1)}
    assert edges[3] == {1: (1.0, 1), 2: (1.0, 1), 5: (1.0, 1)}
    assert edges[4] == {5: (1.0, 1), 1: (1.0, 1)}
    assert edges[5] == {4: (1.0, 1), 3: (1.0, 1)}


def test_mpich_long_allreduce_is_rabenseifner():
    # 64 KiB on 8 ranks: reduce-scatter by recursive halving then allgather by recursive
    # doubling, the same partner twice: r ^ 1 two halves, r ^ 2 two quarters, r ^ 4 two eighths
    assert algorithm("allreduce", 8, 65536, "mpich") == "rabenseifner"
    edges = _edges("allreduce", 8, 65536)
    for r in range(8):
        assert edges[r] == {r ^ 1: (1.0, 2), r ^ 2: (0.5, 2), r ^ 4: (0.25, 2)}
    # a vector shorter than the largest power of two below the size stays on recursive doubling
    assert algorithm("allreduce", 16, 8 * 15, "mpich") == "recursive_doubling"
    assert algorithm("allreduce", 16, 8 * 16, "mpich") == "rabenseifner"


def test_mpich_bcast_thresholds_and_binomial_tree():
    assert algorithm("bcast", 8, 12288, "mpich") == "binomial"
    assert algorithm("bcast", 8, 12289, "mpich") == "scatter_recursive_doubling_allgather"
    assert algorithm("bcast", 8, 524289, "mpich") == "scatter_ring_allgather"
    assert algorithm("bcast", 12, 20000, "mpich") == "scatter_ring_allgather"  # not a power of two
    assert algorithm("bcast", 4, 10 ** 7, "mpich") == "binomial"               # fewer than 8 ranks
    edges = _edges("bcast", 8, 100, root=3)  # relative ranks: 0 -> 1, 2, 4; 4 -> 5, 6; 2 -> 3; 6 -> 7
    relative = {(r - 3) % 8: {(q - 3) % 8 for q in e} for r, e in edges.items()}
    assert relative == {0: {1, 2, 4}, 1: set(), 2: {3}, 3: set(), 4: {5, 6}, 5: set(), 6: {7}, 7: set()}
    # scatter of eighths along the binomial tree, then an allgather by recursive doubling of them
    edges = _edges("bcast", 8, 20000)
    assert edges[0] == {1: (1 / 8 + 1 / 8, 2), 2: (2 / 8 + 2 / 8, 2), 4: (4 / 8 + 4 / 8, 2)}
    assert edges[7] == {6: (1 / 8, 1), 5: (2 / 8, 1), 3: (4 / 8, 1)}
    received = _matrix("mpi", "bcast", 8, 0, 20000, "mpich").sum(axis=0)
    assert (received[1:] >= 1.0).all() and np.isclose(received[0], 7 / 8)


def test_mpich_allgather_reduce_and_barrier():
    # allgather: recursive doubling for a power of two below 512 KiB in all, Bruck otherwise
    assert algorithm("allgather", 8, 1024, "mpich") == "recursive_doubling"
    assert algorithm("allgather", 8, 65536, "mpich") == "ring"
    assert algorithm("allgather", 6, 1024, "mpich") == "bruck"
    assert _edges("allgather", 4, 16) == {0: {1: (1.0, 1), 2: (2.0, 1)}, 1: {0: (1.0, 1), 3: (2.0, 1)},
                                          2: {3: (1.0, 1), 0: (2.0, 1)}, 3: {2: (1.0, 1), 1: (2.0, 1)}}
    bruck = _edges("allgather", 5, 16)
    assert bruck[0] == {4: (1.0, 1), 3: (2.0, 1), 1: (1.0, 1)}  # steps 1, 2, 4: min(2^k, p - 2^k) blocks
    # reduce: binomial up to 2 KiB, Rabenseifner's reduce-scatter + gather above
    assert algorithm("reduce", 8, 2048, "mpich") == "binomial"
    assert algorithm("reduce", 8, 4096, "mpich") == "rabenseifner"
    assert _edges("reduce", 4, 64) == {0: {}, 1: {0: (1.0, 1)}, 2: {0: (1.0, 1)}, 3: {2: (1.0, 1)}}
    # barrier: dissemination, messages without bytes to r + 1, r + 2, r + 4
    assert _edges("barrier", 5, 0)[1] == {2: (0.0, 1), 3: (0.0, 1), 0: (0.0, 1)}
    assert _matrix("mpi", "barrier", 8, nbytes=0, messages=True).sum() == 8 * 3
    # the older models send nothing for a barrier
    assert _matrix("tree", "barrier", 8).sum() == 0


def test_mpi_model_moves_every_byte_it_must():
    # each rank ends with the whole result: bcast's bytes into every rank sum to the vector, an
    # allreduce moves 2 (p - 1) / p of it out of each rank with Rabenseifner on powers of two
    for size in (2, 4, 8, 16):
        m = _matrix("mpi", "allreduce", size, 0, 1 << 20, "mpich")
        assert np.allclose(m.sum(axis=1), 2 * (size - 1) / size)
    for size in (3, 5, 8, 13):
        for nbytes in (64, 20000, 10 ** 6):
            m = _matrix("mpi", "bcast", size, 1 % size, nbytes, "mpich")
            assert m.sum() >= size - 1 - 1e-9  # at least one vector's worth into every other rank
    # alltoall: Bruck for short blocks on 8 ranks or more, else every pair directly
    assert algorithm("alltoall", 16, 64, "mpich") == "bruck"
    assert _matrix("mpi", "alltoall", 8, 0, 4096, "mpich").sum() == 56
    bruck = _edges("alltoall", 8, 64)
    assert bruck[0] == {1: (4.0, 1), 2: (4.0, 1), 4: (4.0, 1)}


def test_openmpi_rules_follow_the_library():
    assert library_family("Open MPI v4.1.4, package: Debian OpenMPI") == "openmpi"
    assert library_family("MPICH Version: 4.2.0") == "mpich"
    assert library_family("Intel(R) MPI Library 2021.10") == "mpich"
    assert library_family("") == "mpich"
    # allreduce on 16 ranks: recursive doubling from 64 B to below 4 KiB, Rabenseifner above
    assert algorithm("allreduce", 16, 4095, "openmpi") == "recursive_doubling"
    assert algorithm("allreduce", 16, 4096, "openmpi") == "rabenseifner"
    assert algorithm("allreduce", 16, 8, "openmpi") == "ring"
    assert _edges("allreduce", 4, 16, "openmpi")[0] == {1: (1.0, 1), 2: (1.0, 1)}
    assert algorithm("bcast", 64, 100, "openmpi") == "knomial"
    knomial = _edges("bcast", 64, 100, "openmpi")
    assert set(knomial[0]) == {1, 2, 3, 4, 8, 12, 16, 32, 48} and set(knomial[4]) == {5, 6, 7}
    assert algorithm("barrier", 6, None, "openmpi") == "linear"
    assert algorithm("allgather", 12, 64, "openmpi") == "bruck"  # recursive doubling needs a power of two
    # nonoverlapping allreduce = the library's reduce then its bcast
    assert algorithm("allreduce", 200, 1024, "openmpi") == "nonoverlapping"
    m = _matrix("mpi", "allreduce", 200, 0, 1024, "openmpi")
    assert m.sum(axis=0)[1:].min() >= 1 and m[:, 0].sum() > 0
