"""The refinements of a multisection's splits under exact sizes: the search
of a grown split (``construct/_kernels.improve_split``) and FM on pairs of blocks
(``construct/pair_fm.py``)."""

import numpy as np

from rankmap.algorithms.construct.growing import grow_split
from rankmap.algorithms.construct.pair_fm import refine_pairs
from rankmap.algorithms.construct._kernels import improve_split
from rankmap.deadline import Deadline
from tests.quality_instances import grid_graph


def _cut(adj, block):
    coo = adj.tocoo()
    return float(coo.data[block[coo.row] != block[coo.col]].sum()) / 2


def _local(adj):
    return (np.asarray(adj.indptr, dtype=np.int64), np.asarray(adj.indices, dtype=np.int64),
            np.asarray(adj.data, dtype=np.float64))


def test_the_search_turns_stripes_into_squares():
    """A 4 x 4 grid in four rows of 4 (12 pairs cut) into four 2 x 2 squares
    (8, the optimum): no single swap of the rows gains, the kicks find it."""
    adj = grid_graph(4, 4).symmetric
    rows = np.arange(16) // 4
    mine = rows.copy()
    removed = improve_split(*_local(adj), 16, mine, 4, 20_000.0, 7)
    assert np.array_equal(np.bincount(mine, minlength=4), [4, 4, 4, 4])
    assert _cut(adj, mine) == 2 * 8 and removed == 2 * (12 - 8)  # a pair weighs 2: one byte each way
    again = rows.copy()
    improve_split(*_local(adj), 16, again, 4, 20_000.0, 7)
    assert np.array_equal(again, mine)  # the seed fixes the kicks


def test_no_work_left_keeps_the_local_optimum_of_the_swaps():
    """Without work beyond the first descent the search is plain swaps: the
    rows stay (no swap gains), and the cut never rises."""
    adj = grid_graph(4, 4).symmetric
    mine = np.arange(16) // 4
    assert improve_split(*_local(adj), 16, mine, 4, 0.0, 0) == 0.0
    assert np.array_equal(mine, np.arange(16) // 4)


def test_searched_growing_cuts_less_and_ignores_the_threads():
    g = grid_graph(16, 16).subgraph(np.random.default_rng(3).permutation(256))
    groups = [np.flatnonzero(np.arange(256) // 64 == q) for q in range(4)]
    sizes = [np.full(16, 4)] * 4
    plain = grow_split(g.symmetric, groups, sizes)
    searched = [grow_split(g.symmetric, groups, sizes, threads=t, search_work=300.0) for t in (1, 3)]
    for a, b in zip(*searched):
        assert np.array_equal(a, b)
    for tasks, p, s in zip(groups, plain, searched[0]):
        sub = g.symmetric[tasks][:, tasks]
        assert np.array_equal(np.bincount(s, minlength=16), np.full(16, 4))
        assert _cut(sub, s) <= _cut(sub, p)
    total = sum(_cut(g.symmetric[t][:, t], b) for t, b in zip(groups, searched[0]))
    assert total < sum(_cut(g.symmetric[t][:, t], b) for t, b in zip(groups, plain))


def _jagged_halves():
    """An 8 x 16 grid in two blocks of 64 whose boundary zigzags (22 pairs
    cut where the straight line cuts 8; a pair weighs 2)."""
    rows, cols = np.divmod(np.arange(128), 16)
    block = (cols >= 8 + (rows % 2) * 2 - 1).astype(np.int64)  # columns 7 and 9 in turn
    return grid_graph(8, 16).symmetric, block


def test_fm_straightens_a_zigzag_boundary_and_keeps_the_sizes():
    adj, block = _jagged_halves()
    assert np.array_equal(np.bincount(block), [64, 64]) and _cut(adj, block) == 2 * 22
    out = refine_pairs(adj, block, 2)
    assert np.array_equal(np.bincount(out), [64, 64])
    assert _cut(adj, out) == 2 * 8
    assert np.array_equal(block, _jagged_halves()[1])  # the input is left alone


def test_fm_on_pairs_repairs_a_shaken_tiling_whatever_the_threads():
    """A 32 x 32 stencil's 8 x 8 tiles with 40 random swaps of neighbours
    across their boundaries, on scrambled ids: the rounds of FM on the
    matched pairs find the tiling again; the threads do not change the
    result."""
    perm = np.random.default_rng(5).permutation(1024)
    g = grid_graph(32, 32).subgraph(perm)  # task i is cell perm[i]
    rows, cols = np.divmod(perm, 32)
    tiles = (rows // 8) * 4 + cols // 8
    adj, block, rng = g.symmetric, tiles.copy(), np.random.default_rng(0)
    for _ in range(40):
        u = rng.integers(1024)
        v = rng.choice(adj.indices[adj.indptr[u]:adj.indptr[u + 1]])
        block[u], block[v] = block[v], block[u]
    assert _cut(adj, block) > _cut(adj, tiles)
    runs = [refine_pairs(adj, block, 16, seed=1, threads=t) for t in (1, 4)]
    assert np.array_equal(runs[0], runs[1])
    assert np.array_equal(np.bincount(runs[0], minlength=16), np.full(16, 64))
    assert _cut(adj, runs[0]) == _cut(adj, tiles)


def test_fm_starts_no_round_after_the_deadline():
    adj, block = _jagged_halves()
    passed = Deadline(0.0)
    assert np.array_equal(refine_pairs(adj, block, 2, deadline=passed), block)


def test_the_grown_search_shrinks_to_the_time_left():
    """The grown splits' search is cut to what the deadline leaves after
    the growing (a slow step before it), down to none; a cut is a hit."""
    from rankmap.algorithms.construct.multisection import grown_seconds, search_work_allowed

    assert search_work_allowed(1 << 20, 300.0, 1, Deadline(None)) == 300.0
    plenty = Deadline(3600.0)
    assert search_work_allowed(1 << 20, 300.0, 1, plenty) == 300.0 and not plenty.hit
    half = grown_seconds(1 << 20, 0.0) + (grown_seconds(1 << 20, 300.0) - grown_seconds(1 << 20, 0.0)) / 2
    some = Deadline(half)
    assert 100.0 < search_work_allowed(1 << 20, 300.0, 1, some) < 150.0 and some.hit
    assert search_work_allowed(1 << 20, 300.0, 1, Deadline(0.0)) == 0.0
