"""MeshTopology: hop distances with wrap-around, node-major PEs, dimension-
ordered routes, and cost.evaluate on a mesh (brute force as the reference)."""

import itertools

import numpy as np
import pytest

from rankmap.cost import all_link_loads, evaluate, link_loads, mapping_cost
from rankmap.graph import CommGraph
from rankmap.topology import MeshTopology, load_topology, mesh_topology_from_spec, topology_from_strings


def brute_hops(dims, torus, a, b):
    h = 0
    for x, y, d, t in zip(a, b, dims, torus):
        diff = abs(x - y)
        h += min(diff, d - diff) if t else diff
    return h


@pytest.mark.parametrize("dims,torus", [((4, 4, 4), True), ((5, 3), False), ((3, 4, 2), (True, False, True))])
def test_distance_matches_brute_force(dims, torus):
    m = MeshTopology(dims, torus=torus, cores=2)
    tor = m.torus
    p, q = np.meshgrid(np.arange(m.n_pes), np.arange(m.n_pes))
    got = m.distance(p.ravel(), q.ravel())
    coords = list(itertools.product(*[range(d) for d in dims]))  # C order = node ids
    want = [0 if a == b else brute_hops(dims, tor, coords[a // 2], coords[b // 2])
            for a, b in zip(p.ravel(), q.ravel())]
    assert np.array_equal(got, want)


def test_node_major_numbering_and_hosts():
    m = MeshTopology((2, 3), cores=4)
    assert m.n_pes == 24 and m.n_nodes == 6
    assert m.pe_coords(5).tolist() == [0, 1]          # PE 5 = core 1 of node 1 = (0, 1)
    assert m.node_at([1, 2]) == 5
    assert m.hosts()[:2] == ["node0", "node1"] and len(m.hosts()) == 6
    assert m.pe_host[7] == "node1"
    assert m.slot_in_host()[:6].tolist() == [0, 1, 2, 3, 0, 1]
    assert m.distance(0, 3) == 0 and MeshTopology((2, 3), cores=4, intra_node_distance=0.5).distance(0, 3) == 0.5
    assert m.diameter == 3 and MeshTopology((16, 32, 32), torus=True).diameter == 40


def test_spec_parsing_and_topology_file(tmp_path):
    m = mesh_topology_from_spec("16x32x32", torus=True, cores=4)
    assert m.dims == (16, 32, 32) and all(m.torus) and m.n_pes == 16 * 32 * 32 * 4
    assert m.spec() == "torus 16x32x32 cores 4"
    f = tmp_path / "machine.txt"
    f.write_text("mesh 8x8\n")
    t = load_topology(str(f))
    assert isinstance(t, MeshTopology) and t.dims == (8, 8) and not any(t.torus)
    for bad in ("8x", "8xx8", "0x4", "a"):
        with pytest.raises(ValueError):
            mesh_topology_from_spec(bad)
    f.write_text("torus 4x4 cores x\n")
    with pytest.raises(ValueError, match="machine.txt"):
        load_topology(str(f))


def brute_route(m, a, b):
    """Links of the dimension-ordered route between nodes a and b, step by step."""
    cur = list(m.node_coords(a))
    tgt = list(m.node_coords(b))
    links = []
    for k, d in enumerate(m.dims):
        while cur[k] != tgt[k]:
            fwd = (tgt[k] - cur[k]) % d
            step = (1 if fwd <= d - fwd else -1) if m.torus[k] else (1 if tgt[k] > cur[k] else -1)
            node = int(m.node_at(cur))
            links.append((k * 2 + (step < 0)) * m.n_nodes + node)
            cur[k] = (cur[k] + step) % d
    return links


@pytest.mark.parametrize("dims,torus", [((4, 4, 4), True), ((6, 3), False), ((5, 4), True)])
def test_routes_follow_dimension_order(dims, torus):
    m = MeshTopology(dims, torus=torus)
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, m.n_pes, 200), rng.integers(0, m.n_pes, 200)
    pair, link = m.routes(src, dst)
    for i in range(200):
        assert link[pair == i].tolist() == brute_route(m, src[i], dst[i])
    # every route has the minimal length: hop count = distance
    assert np.array_equal(np.bincount(pair, minlength=200), m.distance(src, dst))
    w = rng.random(200)
    loads = m.link_loads(src, dst, w)
    assert np.isclose(loads.sum(), np.dot(w, m.distance(src, dst)))


def test_mesh_boundary_links_carry_nothing():
    m = MeshTopology((4, 4))
    src, dst = np.meshgrid(np.arange(16), np.arange(16))
    loads = m.link_loads(src.ravel(), dst.ravel(), np.ones(256))
    coords = m.node_coords(np.arange(16))
    plus_x_edge = (0 * 2 + 0) * 16 + np.flatnonzero(coords[:, 0] == 3)
    minus_y_edge = (1 * 2 + 1) * 16 + np.flatnonzero(coords[:, 1] == 0)
    assert loads[plus_x_edge].sum() == 0 and loads[minus_y_edge].sum() == 0


def test_evaluate_on_torus_hop_bytes():
    m = MeshTopology((4, 4), torus=True, cores=2)
    # 4 tasks: 0->1 100 bytes, 1->2 10 bytes, 2->3 1 byte
    g = CommGraph.from_edges([0, 1, 2], [1, 2, 3], [100.0, 10.0, 1.0], n=4, vertex_weights=[1, 2, 3, 4])
    pe = np.array([0, 1, 2, 31])  # 0,1 same node; node1 = (0,1); PE 31 = node 15 = (3,3)
    rep = evaluate(g, m, pe, comm_factor=2.0)
    # hops: 0 (same node), 1 (node0->node1), node1 (0,1) -> node15 (3,3): 1 + 2 = 3 hops (wrap in x, direct in y)
    assert rep.J == 10 * 1 + 1 * 3 == mapping_cost(g, m, pe)
    assert rep.hops_per_byte == pytest.approx(13 / 111)
    assert [lv["level"] for lv in rep.bytes_per_level] == ["node", "network"]
    assert rep.bottleneck == 10.0 and rep.bottleneck_link.startswith("node0 (0,0) -> +y")
    assert rep.busiest_pe == 1 and rep.busiest_pe_bytes == 110.0
    assert rep.max_pe_load == 4 and rep.makespan == max(4, 2.0 * 10)


def test_tree_evaluate_keeps_its_numbers_and_link_numbering():
    t = topology_from_strings("2:2:2", "1:10:100")
    g = CommGraph.from_dense(np.arange(64, dtype=float).reshape(8, 8))
    pe = np.array([3, 1, 4, 0, 5, 7, 2, 6])
    rep = evaluate(g, t, pe, comm_factor=0.5)
    src, dst, w = g.coo()
    up, down = link_loads(t, pe[src], pe[dst], w)
    assert rep.J == mapping_cost(g, t, pe)
    assert rep.bottleneck == max(up.max(), down.max())
    assert np.array_equal(all_link_loads(t, pe[src], pe[dst], w), np.concatenate([up, down]))
    assert rep.makespan == 0.5 * rep.bottleneck and "node" in rep.bottleneck_link


def test_tree_only_attribute_names_the_way_out():
    with pytest.raises(AttributeError, match="needs a tree topology"):
        MeshTopology((2, 2)).node_depth


def test_cli_maps_onto_a_torus_with_both_objectives(data_dir, capsys):
    import json

    from rankmap.cli import main

    trace = str(data_dir / "traffic/amg64.size.csv")  # 64 ranks of AMG (MapLib)
    runs = {}
    for objective in ("sum", "bottleneck"):
        assert main(["map", trace, "--torus", "4x4x2", "--cores", "2", "--objective", objective,
                     "--comm-factor", "1e-6", "--json"]) == 0
        runs[objective] = json.loads(capsys.readouterr().out)
    assert runs["sum"]["n_pes"] == 64 and runs["sum"]["J"] < runs["sum"]["J_identity"] * 1.0001
    assert runs["bottleneck"]["bottleneck"] <= runs["sum"]["bottleneck"]
    assert runs["sum"]["makespan"] == pytest.approx(1e-6 * runs["sum"]["bottleneck"])
    assert main(["map", trace, "--mesh", "4x4", "--hierarchy", "4:4"]) == 2
    assert "one machine" in capsys.readouterr().err
