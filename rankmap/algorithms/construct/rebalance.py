"""Exact block sizes from a partition with a little slack, by moving tasks
along chains of adjacent blocks.

A partitioner held to blocks of exactly 64 tasks cuts more than one allowed
65 (KaMinPar on a 2-D stencil: 15.2 % of the edges against 14.2 %,
``docs/results/scale.md``): balance at every level of its hierarchy blocks
the moves that would shape the blocks well.  The task too many of a block
rarely fits a neighbour with room, and moving it to a far block cuts all its
edges; but a chain of moves, each block handing a boundary task to the
next, carries it at little or no cost (a boundary task of a grid often has
as many edges outside its block as inside).

For every task too many, Dijkstra over the blocks from its block finds the
cheapest chain to a block with room: a step costs the cut weight that the
best move of a task into that neighbour adds (none where it lowers the cut)
plus HOP mean edge weights, so that of chains that cut alike the shorter
wins.  A search expands at most MAX_EXPAND blocks; the tasks whose searches
found no block with room by then (KaMinPar leaves a few blocks nearly empty,
far from the blocks too full) go along chains found back from all rooms at
once: one Dijkstra from every block with room gives each block its cheapest
chain to one, and only the blocks whose chains end in a room that filled, or
take a step that no longer exists, search again.  An empty block, which no
chain reaches, is planted: the task that loses least of a block that reaches
no room moves into it, and the block grows there.  These searches stop after
LEFTOVER_WORK blocks per task; what is still too many then moves whole (the
task that loses least, to any block with room).  The blocks take their
turns in a seeded random order (in KaMinPar's numbering, which is spatial,
the searches expanded twice as many blocks: the first blocks of a region
used up its room).  The tasks are renumbered block by block, and a block's
best moves are kept until a task in or next to it moves.
"""

from __future__ import annotations

import numpy as np

from ...graph import renumbered_rows

MAX_EXPAND = 512   # blocks one search expands before it takes the cheapest chain it has found
HOP = 0.1          # a step's own cost, in mean edge weights
KNOWN_WIDTH = 16   # a block's moves are kept between searches where it has at most this many neighbours
LEFTOVER_WORK = 1.0  # blocks the searches back from the rooms may visit, per task (about 0.7 us each)
# seconds per task (2-D stencils into blocks of 64 from KaMinPar allowed 65, one core: 2^17 tasks 0.1 s,
# 2^20 in reverse Cuthill-McKee order 1.2-2.8 s, the larger graph's searches longer, its leftovers more)
_PER_TASK = 1.45e-6


def balance_seconds(n: int) -> float:
    """Estimated seconds of ``balance_along_paths`` on ``n`` tasks."""
    return _PER_TASK * n


def balance_along_paths(adj, block: np.ndarray, capacity: np.ndarray, seed: int = 0) -> np.ndarray:
    """``block`` with every block within its ``capacity`` (tasks, all of one
    weight), moved along the cheapest chains of adjacent blocks; raises
    ValueError when the capacities cannot hold the tasks."""
    block = np.array(block, dtype=np.int64)
    capacity = np.asarray(capacity, dtype=np.int64)
    if block.size > int(capacity.sum()):
        raise ValueError(f"cannot balance: {block.size} tasks exceed the capacities' {int(capacity.sum())}")
    if (np.bincount(block, minlength=capacity.size) <= capacity).all():
        return block
    # tasks renumbered block by block: a block's tasks and their neighbours' lie together in memory
    # (on a scrambled 2^20-task stencil a search step cost 12 us, 3.7 us at 2^17)
    task = np.argsort(block, kind="stable")
    indptr, indices, data, _ = renumbered_rows(adj.indptr, adj.indices, np.asarray(adj.data, dtype=np.float64),
                                               task)
    hop = HOP * float(np.abs(data).sum()) / max(data.size, 1)
    order = np.random.default_rng(seed).permutation(capacity.size)
    local = block[task]
    from ._kernels import move_along_chains

    move_along_chains(indptr, indices, data, local, capacity, order, hop, MAX_EXPAND, KNOWN_WIDTH,
                      int(LEFTOVER_WORK * block.size))
    block[task] = local
    return block
