"""Partitioning backends and the balance repair multisection relies on."""

import numpy as np
import pytest
import scipy.sparse as sp

from rankmap.algorithms.construct.partition import integer_weights, partition_graph, repair_balance


def _grid(rows, cols):
    idx = np.arange(rows * cols).reshape(rows, cols)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    a = sp.coo_array((np.ones(src.size), (src, dst)), shape=(rows * cols,) * 2)
    return sp.csr_array(a + a.T)


@pytest.mark.parametrize("backend", ["kahip", "mtkahypar", "kaminpar"])
def test_backends_split_a_grid_into_balanced_parts(backend):
    adj = _grid(8, 8)
    block = partition_graph(adj, np.ones(64), [1, 1, 1, 1], 0.0, backend=backend, preset="fast", seed=1)
    block = repair_balance(adj, np.ones(64), block, np.full(4, 16.0))
    assert np.bincount(block, minlength=4).tolist() == [16, 16, 16, 16]
    cut = float(adj.multiply(block[:, None] != block[None, :]).sum()) / 2
    assert cut <= 24  # a 4x4 quadrant split cuts 16; anything sane is far below random (~72)


@pytest.mark.parametrize("backend", ["kahip", "mtkahypar", "kaminpar"])
def test_unequal_targets_give_proportional_blocks(backend):
    adj = _grid(6, 6)
    block = partition_graph(adj, np.ones(36), [2, 1], 0.0, backend=backend, preset="fast", seed=0)
    block = repair_balance(adj, np.ones(36), block, np.array([24.0, 12.0]))
    assert np.bincount(block).tolist() == [24, 12]


def test_kaminpar_sees_the_weights_and_repeats_on_one_thread():
    """The ParHIP file carries vertex and edge weights: two heavy edges of
    a 4-cycle are never cut, and a heavy vertex counts as its weight."""
    a = sp.coo_array((np.array([9.0, 1, 9, 1]), ([0, 1, 2, 3], [1, 2, 3, 0])), shape=(4, 4))
    adj = sp.csr_array(a + a.T)
    block = partition_graph(adj, np.ones(4), [1, 1], 0.0, backend="kaminpar", preset="fast", seed=3)
    assert block[0] == block[1] and block[2] == block[3] and block[0] != block[2]
    adj = _grid(4, 4)
    w = np.ones(16)
    w[5] = 9.0  # 24 in all: 12 per block
    block = partition_graph(adj, w, [1, 1], 0.0, backend="kaminpar", preset="fast", seed=1)
    assert np.bincount(block, weights=w).tolist() == [12.0, 12.0]
    big = _grid(40, 40)
    runs = [partition_graph(big, np.ones(1600), np.ones(100, dtype=np.int64), 0.0, backend="kaminpar",
                            preset="fast", seed=5, threads=1) for _ in range(2)]
    assert np.array_equal(runs[0], runs[1]) and runs[0].max() == 99  # the large-k preset


def test_repair_moves_the_cheapest_vertex():
    # path 0-1-2-3-4 all in block 0; block 1 is empty and must get one vertex:
    # an end of the path (one cut edge) is cheaper than a middle vertex (two)
    a = sp.coo_array((np.ones(4), ([0, 1, 2, 3], [1, 2, 3, 4])), shape=(5, 5))
    adj = sp.csr_array(a + a.T)
    block = repair_balance(adj, np.ones(5), np.zeros(5, dtype=np.int64), np.array([4.0, 1.0]))
    assert np.bincount(block).tolist() == [4, 1]
    assert int(np.flatnonzero(block == 1)[0]) in (0, 4)


def test_repair_reports_impossible_capacities():
    adj = _grid(2, 2)
    with pytest.raises(ValueError, match="cannot balance"):
        repair_balance(adj, np.array([5.0, 1, 1, 1]), np.zeros(4, dtype=np.int64), np.array([3.0, 3.0]))


def test_integer_weights_scale_large_or_fractional_weights():
    assert integer_weights(np.array([1.0, 2.0, 0.0])).tolist() == [1, 2, 0]
    big = integer_weights(np.array([1e12, 3e12, 1e-3]))
    assert big.sum() < 2 ** 31 and big[2] >= 1 and big[1] == pytest.approx(3 * big[0], rel=1e-6)


def test_unknown_backend_or_preset_is_a_clear_error():
    with pytest.raises(ValueError, match="backend"):
        partition_graph(_grid(2, 2), np.ones(4), [1, 1], 0.0, backend="metis")
    with pytest.raises(ValueError, match="preset"):
        partition_graph(_grid(2, 2), np.ones(4), [1, 1], 0.0, preset="best")
