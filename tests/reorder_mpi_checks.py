"""Run under ``mpiexec -n P``: every reorder_comm check for one launch.

Each check asserts on every rank; any failure prints the traceback and aborts
the whole job (so a failing check never leaves other ranks waiting).  Rank 0
prints ``CHECK <name> ok`` lines that the pytest side counts.
"""

from __future__ import annotations

import sys
import time
import traceback
import warnings

import numpy as np
from mpi4py import MPI

import rankmap
from rankmap.cost import link_time
from rankmap.algorithms.distributed.multilevel import multilevel_map
from rankmap.algorithms.distributed.swap_rounds import SwapRounds, refine_rounds
from rankmap.deadline import Deadline
from rankmap.reorder import RankmapWarning
from rankmap.reorder.agree import ReorderFailed, root_step
from rankmap.reorder.api import IN_PROGRAM_TIME_LIMIT, _map_on_root

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()


def pretend_machine(p: int) -> rankmap.Topology:
    """A multi-node machine of exactly p slots: 2 cores per socket, 2 sockets
    per node (smaller jobs: fewer levels), nodes 100 apart."""
    if p >= 8:
        return rankmap.topology_from_strings(f"2:2:{p // 4}", "1:10:100")
    if p == 4:
        return rankmap.topology_from_strings("2:2", "1:100")
    return rankmap.topology_from_strings(f"1:{p}", "1:100")


def scrambled_ring(p: int, rank: int):
    """A ring over a fixed random order of the ranks: the launch order is bad."""
    order = np.random.default_rng(7).permutation(p)
    pos = np.argsort(order)
    here = pos[rank]
    nbrs = sorted({int(order[(here - 1) % p]), int(order[(here + 1) % p])} - {rank})
    return np.array(nbrs, dtype=np.int64), np.full(len(nbrs), 1000.0)


def full_graph(p: int) -> rankmap.CommGraph:
    src, dst, w = [], [], []
    for r in range(p):
        d, b = scrambled_ring(p, r)
        src += [r] * len(d)
        dst += d.tolist()
        w += b.tolist()
    return rankmap.CommGraph.from_edges(src, dst, w, n=p)


def halo_sums(comm, task: int):
    """Each task sends its value (task * 10 + 1) to its ring neighbours and
    sums what it receives; returns the sum for every task (gathered)."""
    nbrs, _ = scrambled_ring(SIZE, task)
    reqs = [comm.isend(task * 10 + 1, dest=int(n), tag=5) for n in nbrs]
    total = sum(comm.recv(source=int(n), tag=5) for n in nbrs)
    MPI.Request.Waitall(reqs)
    by_rank = comm.allgather((task, total))
    return dict(by_rank)


def same_on_all(value) -> None:
    values = WORLD.allgather(value)
    assert all(v == values[0] for v in values), f"differs between ranks: {values}"


def pe_of_task_from(newcomm) -> np.ndarray:
    """Old rank r sits on PE r and now runs task new_rank: pe_of_task."""
    pairs = WORLD.allgather((newcomm.Get_rank(), RANK))
    pe = np.empty(SIZE, dtype=np.int64)
    for task, pe_of in pairs:
        pe[task] = pe_of
    assert sorted(pe.tolist()) == list(range(SIZE)), "not a permutation"
    return pe


def ok(name: str) -> None:
    WORLD.Barrier()
    if RANK == 0:
        print(f"CHECK {name} ok", flush=True)


def check_reorder(path: str, topo, graph) -> None:
    # auto's in-program budget, counted, under a deadline no load reaches: the
    # result is repeatable (compared with the same mapping run on one process)
    options = {"work_limit": IN_PROGRAM_TIME_LIMIT, "time_limit": 600}
    new = rankmap.reorder_comm(WORLD, traffic=scrambled_ring(SIZE, RANK), topology=topo,
                               distributed=(path == "distributed"), seed=3, options=options)
    info = new.reorder
    assert not info.fallback, info.reason
    assert info.path == path
    same_on_all((info.J_before, info.J_after, info.method, info.rounds, info.swaps))
    pe = pe_of_task_from(new)
    j_ident = rankmap.mapping_cost(graph, topo, np.arange(SIZE))
    assert np.isclose(info.J_before, j_ident), (info.J_before, j_ident)
    assert np.isclose(info.J_after, rankmap.mapping_cost(graph, topo, pe)), info
    assert info.J_after <= info.J_before
    if SIZE >= 8:
        assert info.J_after < 0.9 * info.J_before, info
    # the same halo numbers before and after: roles follow the new ranks
    assert halo_sums(WORLD, RANK) == halo_sums(new, new.Get_rank())
    # data a process holds for its old role reaches the process that now plays it
    assert new.carry(("role", RANK)) == ("role", new.Get_rank())
    assert int(new.old_to_new([RANK])[0]) == new.Get_rank()
    assert int(new.new_to_old([new.Get_rank()])[0]) == RANK
    if path == "centralised":
        same_on_all((info.objective, info.link_time_before, info.link_time_after))
        assert info.objective == "time" and info.link_time_after <= info.link_time_before, info
        assert np.isclose(info.link_time_after, link_time(graph, topo, pe)), info
        # how the ranks waited for rank 0 does not change its result
        alone = None
        if RANK == 0:
            settings = dict(method="auto", refine="auto", seed=3, replicas=8, kicks=0, options=options)
            rows = [scrambled_ring(SIZE, r) for r in range(SIZE)]
            task_of_pe, _ = _map_on_root(rows, topo, np.arange(SIZE), settings, Deadline(600))
            alone = np.argsort(task_of_pe)
        assert np.array_equal(WORLD.bcast(alone, root=0), pe), pe
    if path == "distributed":
        # no rank held the graph, yet the result is the serial protocol's
        serial, res = multilevel_map(graph, topo, np.arange(SIZE), seed=3)
        assert np.array_equal(serial, pe), (serial, pe)
        assert info.rounds == res.rounds and info.swaps == res.refine.swaps
        assert info.method.startswith("distributed multilevel"), info.method
        # the swap rounds alone (multilevel=False): the serial rounds' result
        alone = rankmap.reorder_comm(WORLD, traffic=scrambled_ring(SIZE, RANK), topology=topo,
                                     distributed=True, multilevel=False, seed=3,
                                     options={"time_limit": 600})  # no deadline cuts the rounds
        serial, res = refine_rounds(graph, topo, np.arange(SIZE), seed=3)
        assert np.array_equal(serial, pe_of_task_from(alone)), serial
        assert alone.reorder.rounds == res.rounds and alone.reorder.swaps == res.swaps
        alone.Free()
        # coarsened in the program (most ranks hold no cluster above the tasks)
        opts = {"coarse_max": 3, "coarse_time_limit": 0.05}
        coarse = rankmap.reorder_comm(WORLD, traffic=scrambled_ring(SIZE, RANK), topology=topo,
                                      distributed=True, seed=3, options={**opts, "time_limit": 600})
        serial, res = multilevel_map(graph, topo, np.arange(SIZE), seed=3, **opts)
        assert np.array_equal(serial, pe_of_task_from(coarse)), serial
        assert coarse.reorder.rounds == res.rounds and not coarse.reorder.fallback
        assert SIZE < 8 or len(res.level_sizes) > 1, res.level_sizes
        coarse.Free()
    new.Free()
    ok(f"{path}")


def expect_fallback(name: str, **kwargs) -> str:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        new = rankmap.reorder_comm(WORLD, **kwargs)
    info = new.reorder
    assert info.fallback and info.reason, info
    assert MPI.Comm.Compare(new, WORLD) == MPI.CONGRUENT
    assert new.Get_rank() == RANK
    texts = [str(w.message) for w in caught if issubclass(w.category, RankmapWarning)]
    # said once per job: rank 0 warns, with the count of ranks concerned
    assert len(texts) == (1 if RANK == 0 else 0), texts
    if RANK == 0:
        assert info.reason in texts[0] and f"(all {SIZE} ranks)" in texts[0], texts
    same_on_all(info.reason)
    new.Free()
    ok(f"fallback {name}")
    return info.reason


def check_failures(topo) -> None:
    row = scrambled_ring(SIZE, RANK)
    bad = (np.array([SIZE]), np.array([1.0])) if RANK == SIZE - 1 else row
    reason = expect_fallback("bad-input", traffic=bad, topology=topo)
    assert f"rank {SIZE - 1}" in reason and "destination" in reason, reason

    import rankmap.algorithms as algorithms

    real = algorithms.map_tasks
    if RANK == 0:
        def broken(*a, **k):
            raise RuntimeError("injected mapping failure")
        algorithms.map_tasks = broken
    try:
        reason = expect_fallback("mapping", traffic=row, topology=topo)
        assert "injected mapping failure" in reason, reason
    finally:
        algorithms.map_tasks = real

    real_gains = SwapRounds.half_gains
    if RANK == SIZE // 2:
        def broken_gains(self, *a, **k):
            raise RuntimeError("injected refinement failure")
        SwapRounds.half_gains = broken_gains
    try:
        reason = expect_fallback("distributed", traffic=row, topology=topo, distributed=True)
        assert "injected refinement failure" in reason, reason
    finally:
        SwapRounds.half_gains = real_gains

    other = pretend_machine(SIZE) if RANK else rankmap.topology_from_strings(
        f"{SIZE}", "5")
    if SIZE > 1:
        reason = expect_fallback("topology-mismatch", traffic=row, topology=other)
        assert "differs between ranks" in reason, reason


def check_variants(topo) -> None:
    cart = rankmap.reorder_cart(WORLD, dims=[0, 0], periods=[True, False], topology=topo)
    assert cart.Get_topology() == MPI.CART and not cart.reorder.fallback, cart.reorder
    assert cart.reorder.J_after <= cart.reorder.J_before
    dims, periods, coords = cart.Get_topo()
    assert list(coords) == list(np.unravel_index(cart.Get_rank(), dims))
    same_on_all((cart.reorder.J_before, cart.reorder.J_after))
    cart.Free()
    ok("cart")

    nbrs, w = scrambled_ring(SIZE, RANK)
    dg = rankmap.reorder_dist_graph(WORLD, nbrs.tolist(), nbrs.tolist(), None,
                                    w.astype(int).tolist(), topology=topo)
    assert not dg.reorder.fallback, dg.reorder
    task = dg.Get_rank()
    sources, dests = dg.Get_dist_neighbors()[:2]
    assert sorted(dests) == scrambled_ring(SIZE, task)[0].tolist()
    got = dg.neighbor_allgather(task * 10 + 1)
    assert sorted(got) == sorted(int(s) * 10 + 1 for s in sources)
    dg.Free()
    ok("dist-graph")


def check_deadline(topo) -> None:
    """A limit that passes at once: rank 0's clock decides for every rank,
    each path still returns a valid order, never worse than the start, and
    every rank reports that the deadline cut the search."""
    for path in ("centralised", "distributed"):
        new = rankmap.reorder_comm(WORLD, traffic=scrambled_ring(SIZE, RANK), topology=topo, seed=3,
                                   distributed=(path == "distributed"), options={"time_limit": 1e-6})
        info = new.reorder
        assert not info.fallback and info.path == path, info
        assert info.deadline_hit, info
        assert info.J_after <= info.J_before
        same_on_all((info.J_before, info.J_after, info.method, info.rounds, info.deadline_hit))
        pe_of_task_from(new)
        new.Free()
        ok(f"deadline {path}")


def check_waiting() -> None:
    """Ranks waiting for rank 0's work sleep instead of spinning, so rank 0
    gets the cores; a failure at the end of that work reaches every rank.
    CPU time is counted, not timed: under load a sleeping rank only uses
    less of it (a spinning one used its whole share of a core)."""
    WORLD.Barrier()
    wall, cpu = time.perf_counter(), time.process_time()
    root_step(WORLD, "working", time.sleep, 1.0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    spent = WORLD.gather((wall, cpu), root=0)
    if RANK == 0:
        waiting = [c / w for w, c in spent[1:]]
        assert max(waiting) < 0.1, f"waiting ranks' CPU time / wall time: {waiting}"
        assert sum(c for _w, c in spent[1:]) < 0.5 * spent[0][0], spent
    ok("waiting sleeps")

    def fails_late():
        time.sleep(0.3)
        raise RuntimeError("late failure")

    try:
        root_step(WORLD, "working", fails_late)
    except ReorderFailed as exc:
        same_on_all(str(exc))
        assert "late failure" in str(exc) and "rank 0" in str(exc), exc
    else:
        raise AssertionError("rank 0's failure did not reach this rank")
    ok("waiting failure")


def check_discovery() -> None:
    try:
        import rankmap.topology.live  # noqa: F401
    except ImportError:
        reason = expect_fallback("discovery", traffic=scrambled_ring(SIZE, RANK))
        assert "discovery" in reason, reason
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RankmapWarning)  # unbound ranks on this host
        new = rankmap.reorder_comm(WORLD, traffic=scrambled_ring(SIZE, RANK))
    assert not new.reorder.fallback, new.reorder
    assert new.reorder.topology == "discovered"
    pe_of_task_from(new)
    new.Free()
    ok("discovery")


def check_binding() -> None:
    """Discovery on this host as launched: rank 0 prints whether the ranks
    were placed by core (no warning) and on which slots."""
    from rankmap.reorder.placement import locate

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        new = rankmap.reorder_comm(WORLD, traffic=scrambled_ring(SIZE, RANK))
    assert not new.reorder.fallback and new.reorder.topology == "discovered", new.reorder
    assert new.reorder.J_after <= new.reorder.J_before
    pe_of_task_from(new)
    new.Free()
    warned = WORLD.bcast(any("node granularity" in str(w.message) for w in caught), root=0)
    assert RANK == 0 or not any("node granularity" in str(w.message) for w in caught)
    place = locate(WORLD)
    if RANK == 0:
        slots = place.pe_of_rank.tolist()
        print(f"CHECK binding warned={warned} slots={slots} "
              f"distance01={place.topology.distance(place.pe_of_rank[:1], place.pe_of_rank[1:2])[0]}",
              flush=True)


def main() -> None:
    topo = pretend_machine(SIZE)
    graph = full_graph(SIZE)
    wanted = sys.argv[1:] or ["centralised", "distributed", "failures", "variants", "deadline", "waiting",
                              "discovery"]
    for name in wanted:
        if name in ("centralised", "distributed"):
            check_reorder(name, topo, graph)
        elif name == "failures":
            check_failures(topo)
        elif name == "variants":
            check_variants(topo)
        elif name == "deadline":
            check_deadline(topo)
        elif name == "waiting":
            check_waiting()
        elif name == "discovery":
            check_discovery()
        elif name == "binding":
            check_binding()
    if RANK == 0:
        print("ALL DONE", flush=True)


def run_aborting(main) -> None:
    """Run ``main``; a failure on any rank prints its traceback and aborts
    the whole job, so it never leaves the other ranks waiting."""
    try:
        main()
    except BaseException:  # noqa: BLE001 - one failing rank must not leave the others waiting
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        WORLD.Abort(1)


if __name__ == "__main__":
    run_aborting(main)
