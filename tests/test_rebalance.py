"""Exact block sizes by chains of moves (``construct/rebalance.py``)."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from rankmap.algorithms.construct import rebalance
from rankmap.algorithms.construct.rebalance import balance_along_paths
from tests.quality_instances import grid_graph


def _grid(rows, cols):
    return grid_graph(rows, cols).bytes  # unit weight each way per neighbour pair


def _cut(adj, block):
    coo = adj.tocoo()
    return float(coo.data[block[coo.row] != block[coo.col]].sum()) / 2


def _quadrants():
    """An 8 x 8 grid in four 4 x 4 quadrants: 0 top left, 1 top right, 2 bottom left, 3 bottom right."""
    rows, cols = np.divmod(np.arange(64), 8)
    return (rows // 4) * 2 + cols // 4


def test_a_chain_through_a_full_block_restores_the_cut():
    """Block 0 holds a task of block 1, which holds one of block 3: moving
    both back (0 -> 1 -> 3) lowers the cut; block 0 does not touch block 3,
    the one with room, and any other way there cuts more."""
    adj, block = _grid(8, 8), _quadrants()
    best = _cut(adj, block)
    moved = block.copy()
    moved[1 * 8 + 4] = 0   # row 1, col 4: a task of block 1 on its border with 0
    moved[4 * 8 + 6] = 1   # row 4, col 6: a task of block 3 on its border with 1
    assert np.bincount(moved).tolist() == [17, 16, 16, 15]
    fixed = balance_along_paths(adj, moved, np.full(4, 16))
    assert np.bincount(fixed, minlength=4).tolist() == [16, 16, 16, 16]
    assert _cut(adj, fixed) == best
    assert np.array_equal(fixed, block)


def test_chains_are_found_back_from_the_rooms_where_the_searches_stop_short(monkeypatch):
    """The same chain when each block's own search expands only its block:
    the search back from the block with room finds it; without that search
    the task too many moves whole and cuts more."""
    adj, block = _grid(8, 8), _quadrants()
    moved = block.copy()
    moved[1 * 8 + 4], moved[4 * 8 + 6] = 0, 1
    monkeypatch.setattr(rebalance, "MAX_EXPAND", 1)
    assert np.array_equal(balance_along_paths(adj, moved, np.full(4, 16)), block)
    monkeypatch.setattr(rebalance, "LEFTOVER_WORK", 0.0)
    whole = balance_along_paths(adj, moved, np.full(4, 16))
    assert np.bincount(whole, minlength=4).tolist() == [16] * 4
    assert _cut(adj, whole) > _cut(adj, block)


def test_an_empty_block_is_planted_next_to_the_tasks_too_many(monkeypatch):
    """A 4 x 12 grid: block 0 holds 32 tasks (columns 0-7), block 1 16, the
    empty block 2 none, so no chain reaches it.  One task planted in it,
    the rest of the 16 follow along chains and it grows as one piece; moved
    whole they scatter over block 0's corners and cut more."""
    adj = _grid(4, 12)
    block = (np.arange(48) % 12 >= 8).astype(np.int64)
    fixed = balance_along_paths(adj, block, np.full(3, 16))
    assert np.bincount(fixed).tolist() == [16, 16, 16]
    assert connected_components(adj[fixed == 2][:, fixed == 2], directed=False)[0] == 1
    monkeypatch.setattr(rebalance, "LEFTOVER_WORK", 0.0)
    whole = balance_along_paths(adj, block, np.full(3, 16))
    assert _cut(adj, fixed) < _cut(adj, whole)


def test_balanced_input_comes_back_unchanged_and_impossible_capacities_are_refused():
    adj, block = _grid(8, 8), _quadrants()
    assert np.array_equal(balance_along_paths(adj, block, np.full(4, 16)), block)
    with pytest.raises(ValueError, match="cannot balance"):
        balance_along_paths(adj, block, np.array([16, 16, 16, 15]))


def test_blocks_no_chain_reaches_give_their_cheapest_task():
    """Two separate paths: the overloaded block has no edge to the block
    with room, so the end of its path (one edge inside) moves there."""
    a = sp.coo_array((np.ones(4), ([0, 1, 5, 6], [1, 2, 6, 7])), shape=(8, 8))
    adj = sp.csr_array(a + a.T)
    block = np.array([0, 0, 0, 0, 0, 1, 1, 1])  # 3 and 4 have no edges at all
    fixed = balance_along_paths(adj, block, np.array([4, 4]))
    assert np.bincount(fixed).tolist() == [4, 4]
    assert fixed[3] == 1 or fixed[4] == 1  # a task without edges costs nothing to move


def test_partition_with_slack_is_repaired_to_exact_sizes_near_its_cut():
    """A 32 x 32 grid in 16 blocks of 64 from strips of uneven height (some
    blocks 72, some 56): the repair reaches exactly 64 each, and its chains
    cost far less than moving the excess tasks away whole."""
    adj = _grid(32, 32)
    rows, cols = np.divmod(np.arange(1024), 32)
    heights = np.array([9, 7, 9, 7])  # rows of each band of blocks: 72 and 56 tasks a block
    band = np.searchsorted(np.cumsum(heights), rows, side="right")
    block = band * 4 + cols // 8
    over = np.bincount(block)
    assert over.max() == 72 and over.min() == 56
    fixed = balance_along_paths(adj, block, np.full(16, 64), seed=3)
    assert np.bincount(fixed, minlength=16).tolist() == [64] * 16
    # 8 tasks leave each of 8 blocks: moved away whole, each would cut at least one edge more (64 in
    # all); shifting the borders between the bands costs a few edges (192 -> 197)
    assert _cut(adj, fixed) <= _cut(adj, block) + 16
    again = balance_along_paths(adj, block, np.full(16, 64), seed=3)
    assert np.array_equal(fixed, again)
