import numpy as np
import pytest

from rankmap.algorithms import map_tasks
from rankmap.graph import CommGraph
from rankmap.topology import Topology, TreeNode, hierarchy_topology


def ring(n):
    return CommGraph.from_edges(np.arange(n), (np.arange(n) + 1) % n, np.ones(n), n=n)


def test_packed_fills_tree_order_and_round_robin_deals_root_children():
    t = hierarchy_topology([2, 3, 2], [1, 10, 100])  # the paper's Fig. 1 tree
    g = ring(8)
    assert map_tasks(g, t, method="packed").pe_of_task.tolist() == list(range(8))
    # alternately left half (PEs 0-5) and right half (PEs 6-11)
    assert map_tasks(g, t, method="round_robin").pe_of_task.tolist() == [0, 6, 1, 7, 2, 8, 3, 9]
    # dealing over the 6 sockets
    rr2 = map_tasks(g, t, method="round_robin", depth=2).pe_of_task.tolist()
    assert rr2 == [0, 2, 4, 6, 8, 10, 1, 3]


def test_round_robin_skips_full_subtrees_on_irregular_tree():
    small = TreeNode("machine", 10, [TreeNode("pu")], name="a")
    big = TreeNode("machine", 10, [TreeNode("pu") for _ in range(3)], name="b")
    t = Topology(TreeNode("cluster", 100, [small, big]))
    pe = map_tasks(ring(4), t, method="round_robin").pe_of_task.tolist()
    assert pe == [0, 1, 2, 3]
    pe = map_tasks(ring(3), Topology(TreeNode("c", 100, [big, small])), method="round_robin").pe_of_task
    assert pe.tolist() == [0, 3, 1]


def test_oversubscribed_and_allowed():
    t = hierarchy_topology([2, 2], [1, 10])
    pe = map_tasks(ring(8), t, method="round_robin").pe_of_task
    assert np.bincount(pe).tolist() == [2, 2, 2, 2] and pe[:2].tolist() == [0, 2]
    pe = map_tasks(ring(2), t, method="packed", allowed_pes=[1, 3]).pe_of_task
    assert pe.tolist() == [1, 3]
    with pytest.raises(ValueError, match="do not fit"):
        map_tasks(ring(3), t, method="packed", allowed_pes="1,3")
