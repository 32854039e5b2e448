"""Bottleneck objective: routes agree with the link loads of cost.evaluate,
refinement lowers the maximum link load and never raises it."""

import numpy as np
import pytest

from rankmap.algorithms import map_tasks
from rankmap.algorithms.refine.bottleneck import bottleneck_refine, link_routes
from rankmap.cost import all_link_loads, evaluate
from rankmap.graph import CommGraph
from rankmap.topology import MeshTopology, topology_from_strings

TOPOLOGIES = [MeshTopology((4, 4), torus=True, cores=2), MeshTopology((3, 4)),
              topology_from_strings("2:4:4", "1:10:100")]


def random_graph(n, m, seed):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    return CommGraph.from_edges(src, dst, rng.integers(1, 1000, m).astype(float), n=n)


@pytest.mark.parametrize("topo", TOPOLOGIES)
def test_routes_add_up_to_link_loads(topo):
    rng = np.random.default_rng(0)
    p, q = rng.integers(0, topo.n_pes, 300), rng.integers(0, topo.n_pes, 300)
    w = rng.random(300)
    pair, link = link_routes(topo, p, q)
    loads = np.bincount(link, weights=w[pair], minlength=all_link_loads(topo, p, q, w).size)
    assert np.allclose(loads, all_link_loads(topo, p, q, w))
    assert np.all(np.bincount(pair, minlength=300)[p == q] == 0)


@pytest.mark.parametrize("topo", TOPOLOGIES)
def test_refinement_lowers_the_maximum_link_load(topo):
    n = min(topo.n_pes, 24)
    g = random_graph(n, 150, seed=1)
    start = np.random.default_rng(2).permutation(topo.n_pes)[:n]
    before = evaluate(g, topo, start)
    out = bottleneck_refine(g, topo, start)
    after = evaluate(g, topo, out)  # validates one-to-one
    assert after.bottleneck < before.bottleneck
    again = bottleneck_refine(g, topo, out)
    assert evaluate(g, topo, again).bottleneck <= after.bottleneck


def test_bottleneck_method_against_sum_objective_and_makespan():
    topo = MeshTopology((4, 4, 4), torus=True)
    g = random_graph(64, 400, seed=3)
    s = map_tasks(g, topo, method="mht").pe_of_task
    b = map_tasks(g, topo, method="bottleneck", start="mht").pe_of_task
    rs, rb = evaluate(g, topo, s, comm_factor=1e-3), evaluate(g, topo, b, comm_factor=1e-3)
    assert rb.bottleneck < rs.bottleneck
    assert rb.makespan == max(rb.max_pe_load, 1e-3 * rb.bottleneck)
    with pytest.raises(ValueError, match="unknown start method"):
        map_tasks(g, topo, method="bottleneck", start="nope")


def test_many_tasks_per_pe_keep_their_balance():
    topo = topology_from_strings("2:2:2", "1:10:100")
    g = random_graph(16, 80, seed=4)
    start = np.repeat(np.arange(8), 2)
    out = bottleneck_refine(g, topo, start, eps=0.0)
    assert np.bincount(out, minlength=8).max() <= 2
    assert evaluate(g, topo, out, eps=0.0).bottleneck <= evaluate(g, topo, start, eps=0.0).bottleneck
