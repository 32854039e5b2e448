"""Irregular exchange: every rank talks to a few seeded random peers through
a distributed graph communicator (Neighbor_alltoallv, uneven sizes)."""
import argparse

import numpy as np
from mpi4py import MPI

p = argparse.ArgumentParser()
p.add_argument("--degree", type=int, default=3)
p.add_argument("--iters", type=int, default=10)
p.add_argument("--seed", type=int, default=7)
a = p.parse_args()
world = MPI.COMM_WORLD
me, P = world.Get_rank(), world.Get_size()
rng = np.random.default_rng(a.seed)  # same on every rank: a global symmetric graph
edges = set()
for u in range(P):
    for v in rng.choice(P, size=min(a.degree, P - 1), replace=False):
        if u != v:
            edges |= {(u, int(v)), (int(v), u)}
peers = sorted(v for u, v in edges if u == me)
weight = {v: 1 + (me * 31 + v * 17) % 7 for v in peers}     # uneven message sizes
peer_weight = {v: 1 + (v * 31 + me * 17) % 7 for v in peers}
g = world.Create_dist_graph_adjacent(peers, peers, reorder=False)
scounts = [64 * weight[v] for v in peers]
rcounts = [64 * peer_weight[v] for v in peers]
sbuf = np.full(sum(scounts), float(me))
rbuf = np.empty(sum(rcounts))
for _ in range(a.iters):
    g.Neighbor_alltoallv([sbuf, scounts], [rbuf, rcounts])
check = world.allreduce(float(rbuf.sum()))
if me == 0:
    print(f"irregular: {len(edges) // 2} edges checksum {check:.1f}")
