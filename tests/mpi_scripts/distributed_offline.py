"""The offline distributed refinement under mpiexec (tests/test_distributed_mpi.py).

Rank 0 alone builds the graph, the machine and the start; every rank gets the
rows of its block of tasks.  Checks, printed as "CHECK name ok": the result
equals the serial rounds with the same options (the decisions do not depend on
the number of ranks), J is exact and lower, and ranks other than 0 never
loaded scipy or the mapping methods.
"""

import sys

import numpy as np
from mpi4py import MPI

from rankmap.reorder.offline import refine_distributed

OPTIONS = dict(seed=3, replicas=3, kicks=1, kick_fraction=0.3)


def problem():
    import rankmap

    rng = np.random.default_rng(11)
    n = 48
    src, dst = rng.integers(0, n, 4 * n), rng.integers(0, n, 4 * n)
    graph = rankmap.CommGraph.from_edges(src, dst, rng.integers(1, 1000, 4 * n).astype(float), n=n)
    return graph, rankmap.topology_from_strings("4:4:3", "1:10:100"), rng.permutation(n)


def main() -> None:
    comm = MPI.COMM_WORLD
    graph = topology = start = None
    if comm.Get_rank() == 0:
        graph, topology, start = problem()
    pe, res, state = refine_distributed(comm, graph, topology, start, **OPTIONS)
    heavy = comm.gather(sorted(m for m in ("scipy", "numba", "kahip", "mtkahypar") if m in sys.modules))
    j_after = comm.allgather(res.J_after)
    if comm.Get_rank() != 0:
        return
    from rankmap import mapping_cost
    from rankmap.algorithms.distributed.swap_rounds import refine_rounds

    serial, sres = refine_rounds(graph, topology, start, **OPTIONS)
    assert np.array_equal(pe, serial), (pe, serial)
    print("CHECK same-as-serial ok", flush=True)
    j = mapping_cost(graph, topology, pe)
    assert abs(j - res.J_after) <= 1e-9 * j and j < mapping_cost(graph, topology, start)
    assert len(set(j_after)) == 1 and sres.rounds == res.rounds
    print("CHECK exact-J ok", flush=True)
    assert not any(heavy[1:]), heavy
    print(f"CHECK lean-ranks ok (state {state} B on rank 0)", flush=True)


if __name__ == "__main__":
    main()
