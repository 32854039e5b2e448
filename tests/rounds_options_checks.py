"""Run under ``mpiexec -n P`` (P a multiple of 4): ``replicas`` and
``kicks`` of ``reorder_comm`` and ``map_distributed``
(tests/test_rounds_options.py).

Every check asserts on every rank; a failure aborts the whole job, so a
failing check never leaves ranks waiting.  Rank 0 prints "CHECK name ok"
(helpers shared with ``reorder_mpi_checks.py``).
"""

from __future__ import annotations

import numpy as np
from reorder_mpi_checks import RANK, SIZE, WORLD, ok, pe_of_task_from, run_aborting, same_on_all

import rankmap
from rankmap.algorithms.distributed.swap_rounds import refine_rounds
from rankmap.reorder.offline import map_distributed

SEED = 3


def machine() -> rankmap.Topology:
    return rankmap.topology_from_strings(f"2:2:{SIZE // 4}", "1:10:100")


def scrambled_row(rank: int):
    """This rank's row of a ring plus chords over a fixed random order of the
    ranks (the launch order is bad, and several swap optima exist)."""
    order = np.random.default_rng(7).permutation(SIZE)
    here = int(np.argsort(order)[rank])
    nbrs = {int(order[(here + k) % SIZE]): 1000.0 / abs(k) for k in (-3, -1, 1, 3)}
    nbrs.pop(rank, None)
    dst = np.array(sorted(nbrs), dtype=np.int64)
    return dst, np.array([nbrs[d] for d in dst])


def full_graph() -> rankmap.CommGraph:
    rows = [scrambled_row(r) for r in range(SIZE)]
    return rankmap.CommGraph.from_edges(np.repeat(np.arange(SIZE), [len(d) for d, _ in rows]),
                                        np.concatenate([d for d, _ in rows]),
                                        np.concatenate([b for _, b in rows]), n=SIZE)


def reorder(**kwargs):
    # a deadline no load reaches: the rounds are compared with the serial protocol's
    new = rankmap.reorder_comm(WORLD, traffic=scrambled_row(RANK), topology=machine(), seed=SEED,
                               options={"time_limit": 600}, **kwargs)
    info = new.reorder
    assert not info.fallback, info.reason
    pe = pe_of_task_from(new)
    same_on_all((info.J_before, info.J_after, info.method, info.rounds, info.swaps))
    new.Free()
    return pe, info


def check_distributed(graph, topo) -> None:
    """Every setting reaches every rank: the result, rounds and swaps are the
    serial protocol's with the same settings (which differ between them).
    The swap rounds alone (``multilevel=False``), whose statistics tell the
    settings apart."""
    infos = {}
    for replicas, kicks in ((1, 0), (8, 0), (1, 2)):
        pe, info = reorder(distributed=True, multilevel=False, replicas=replicas, kicks=kicks)
        serial, res = refine_rounds(graph, topo, np.arange(SIZE), seed=SEED, replicas=replicas,
                                    kicks=kicks)
        assert np.array_equal(pe, serial), (replicas, kicks, pe, serial)
        assert (info.rounds, info.swaps) == (res.rounds, res.swaps), (info, res)
        assert info.J_after == rankmap.mapping_cost(graph, topo, pe) or \
            np.isclose(info.J_after, rankmap.mapping_cost(graph, topo, pe))
        assert info.J_after <= info.J_before
        assert f"(replicas={replicas}, kicks={kicks})" in info.method, info.method
        infos[replicas, kicks] = info
    # the statistics tell the settings apart (swaps count every copy's), so
    # equality with the serial run shows that each setting reached every rank
    stats = {(i.rounds, i.swaps) for i in infos.values()}
    assert len(stats) == len(infos), infos
    # by construction: the first descent is the same, a kick is kept only
    # where J fell, and each kick is at least one more round
    assert infos[1, 2].J_after <= infos[1, 0].J_after
    assert infos[1, 2].rounds >= infos[1, 0].rounds + 2
    ok("distributed settings")

    # settings that differ between ranks are the same error on every rank
    msg = expect_value_error(reorder, distributed=True, multilevel=False,
                             replicas=1 if RANK == 0 else 5, kicks=2 if RANK == 0 else 0)
    assert "differ between ranks: replicas=5, kicks=0 on rank 1, replicas=1, kicks=2 on rank 0" \
        in msg, msg
    ok("differing settings")

    # the centralised path's refine="rounds" runs the same rounds in one process
    pe, info = reorder(distributed=False, method="identity", refine="rounds", replicas=1, kicks=2)
    serial, _ = refine_rounds(graph, topo, np.arange(SIZE), seed=SEED, replicas=1, kicks=2)
    assert np.array_equal(pe, serial) and info.path == "centralised", (pe, serial, info)
    ok("centralised rounds")


def expect_value_error(fn, **kwargs) -> str:
    try:
        fn(**kwargs)
    except ValueError as exc:
        message = str(exc)
    else:
        raise AssertionError(f"no ValueError on rank {RANK} for {kwargs}")
    same_on_all(message)
    return message


def check_bad_values(graph, topo) -> None:
    def call(**kwargs):
        rankmap.reorder_comm(WORLD, traffic=scrambled_row(RANK), topology=topo, distributed=True,
                             **kwargs)

    last = SIZE - 1
    msg = expect_value_error(call, replicas=0 if RANK == last else 8)
    assert "replicas" in msg and ">= 1" in msg and f"rank {last}" in msg, msg
    msg = expect_value_error(call, kicks=-1)
    assert "kicks" in msg and ">= 0" in msg and "rank 0" in msg, msg
    for bad in (2.5, True, "8"):
        msg = expect_value_error(call, replicas=bad)
        assert "replicas" in msg and repr(bad) in msg, msg
    msg = expect_value_error(call, objective="fast" if RANK == last else None)
    assert "unknown objective 'fast'" in msg and f"rank {last}" in msg, msg
    ok("bad reorder_comm values")

    def offline(**kwargs):
        mine = (graph, topo) if RANK == 0 else (None, None)
        map_distributed(*mine, method="identity", comm=WORLD, **kwargs)

    msg = expect_value_error(offline, kicks=-2 if RANK == 1 else 0)
    assert "kicks" in msg and "rank 1" in msg, msg
    ok("bad map_distributed values")

    # the ranks are still in step: a good call after the errors works
    pe, info = reorder(distributed=True, multilevel=False, replicas=2, kicks=1)
    assert np.array_equal(pe, refine_rounds(graph, topo, np.arange(SIZE), seed=SEED, replicas=2,
                                            kicks=1)[0])
    ok("in step after errors")


def main() -> None:
    assert SIZE % 4 == 0, "run with a multiple of 4 ranks"
    graph, topo = full_graph(), machine()
    check_distributed(graph, topo)
    check_bad_values(graph, topo)
    if RANK == 0:
        print("ALL DONE", flush=True)


if __name__ == "__main__":
    run_aborting(main)
