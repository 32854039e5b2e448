"""Collective models and buffer-size rules, without MPI ranks."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from rankmap.profile.buffers import buffer_bytes, vector_bytes
from rankmap.profile.collectives import MODELS, plan


def _matrix(model, op, size, root=0):
    m = np.zeros((size, size))
    for r in range(size):
        for q, f in plan(model, op, r, size, root):
            assert q != r
            m[r, q] += f
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
        assert _matrix(model, "alltoall", 4).sum() == 12
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
