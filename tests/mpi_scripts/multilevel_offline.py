"""The distributed multilevel mapping under mpiexec (tests/test_distributed_mpi.py).

Rank 0 alone builds the graph, the machine and the start; every rank gets the
rows of its block of tasks, coarsens its share, rank 0 maps the coarse graph.
Checks, printed as "CHECK name ok": every rank's part equals the serial run
with the same options (the decisions do not depend on the number of ranks),
through several coarse levels, the pair and the set rounds, and J is exact.
"""

import numpy as np
from mpi4py import MPI

from rankmap.reorder.offline import multilevel_distributed

# a small coarse_max forces several levels of label propagation on 216 tasks;
# a pair round per coarse level (off by default) so that FM between groups runs too
OPTIONS = dict(seed=5, replicas=1, coarse_max=24, coarse_time_limit=0.05, pair_rounds=1)


def problem():
    import rankmap

    side = 6  # a 6 x 6 x 6 27-point stencil, 216 tasks on 256 PEs (40 stay free)
    idx = np.arange(side ** 3).reshape(side, side, side)
    src, dst, w = [], [], []
    for off in np.ndindex(3, 3, 3):
        o = np.array(off) - 1
        if not o.any():
            continue
        a = idx[tuple(slice(max(0, -x), side - max(0, x)) for x in o)].ravel()
        b = idx[tuple(slice(max(0, x), side - max(0, -x)) for x in o)].ravel()
        src.append(a)
        dst.append(b)
        w.append(np.full(len(a), 1000.0 / 10 ** (np.abs(o).sum() - 1)))
    graph = rankmap.CommGraph.from_edges(np.concatenate(src), np.concatenate(dst), np.concatenate(w),
                                         n=side ** 3)
    start = np.random.default_rng(2).permutation(256)[:side ** 3]
    return graph, rankmap.topology_from_strings("4:4:4:4", "1:10:100:1000"), start


def main() -> None:
    comm = MPI.COMM_WORLD
    graph = topology = start = None
    if comm.Get_rank() == 0:
        graph, topology, start = problem()
    pe, res, _ = multilevel_distributed(comm, graph, topology, start, **OPTIONS)
    seen = comm.gather((res.J_after, res.rounds, res.level_sizes, res.coarsening_rounds,
                        res.kept_start, res.set_gains, res.pair_rounds), root=0)
    if comm.Get_rank() != 0:
        return
    from rankmap import mapping_cost
    from rankmap.algorithms.distributed.multilevel import multilevel_map

    serial, sres = multilevel_map(graph, topology, start, **OPTIONS)
    assert np.array_equal(pe, serial), (pe, serial)
    assert all(s == seen[0] for s in seen), seen
    assert seen[0] == (sres.J_after, sres.rounds, sres.level_sizes, sres.coarsening_rounds,
                       sres.kept_start, sres.set_gains, sres.pair_rounds), (seen[0], sres)
    print("CHECK same-as-serial ok", flush=True)
    assert len(sres.level_sizes) >= 3 and sres.level_sizes[-1] <= 24, sres.level_sizes
    assert len(sres.set_gains) > 0, sres  # the sets of groups were mapped again on their owners
    assert sum(sres.pair_rounds) > 0, sres
    print(f"CHECK levels ok {sres.level_sizes}, set rounds {len(sres.set_gains)}", flush=True)
    j = mapping_cost(graph, topology, pe)
    assert abs(j - res.J_after) <= 1e-9 * j and j < 0.7 * mapping_cost(graph, topology, start)
    assert len(np.unique(pe)) == graph.n
    print("CHECK exact-J ok", flush=True)


if __name__ == "__main__":
    main()
