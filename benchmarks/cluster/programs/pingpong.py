"""osu_latency-style ping-pong between ranks 0 and 1 (mpi4py): for each
message size, the half round trip of blocking Send/Recv, averaged over
many exchanges after a warm-up.  Rank 0 prints one JSON object:
``{"sizes": [...], "seconds": [...]}`` (one-way seconds per size)."""

from __future__ import annotations

import json
import sys

import numpy as np
from mpi4py import MPI

SIZES = [0, 1, 8, 64, 512, 4096, 16384, 65536, 262144, 1 << 20]


def main(argv) -> int:
    iterations = int(argv[1]) if len(argv) > 1 else 200
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    peer = 1 - rank
    out = []
    for size in SIZES:
        buf = np.zeros(max(size, 1), dtype=np.uint8)
        n = max(4, iterations if size <= 16384 else iterations // 10)
        warm = max(2, n // 10)
        comm.Barrier()
        for i in range(warm + n):
            if i == warm:
                comm.Barrier()
                start = MPI.Wtime()
            if rank == 0:
                comm.Send([buf, size, MPI.BYTE], dest=peer)
                comm.Recv([buf, size, MPI.BYTE], source=peer)
            elif rank == 1:
                comm.Recv([buf, size, MPI.BYTE], source=peer)
                comm.Send([buf, size, MPI.BYTE], dest=peer)
        out.append((MPI.Wtime() - start) / (2 * n))
    if rank == 0:
        print(json.dumps({"sizes": SIZES, "seconds": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
