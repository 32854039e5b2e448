"""The MPI transport of the distributed algorithms (``algorithms.distributed``:
the swap rounds, the multilevel coarsening and its central coarse mapping).

Records (rows of float64) go to the owners of the tasks they concern with one
``Alltoall`` of counts and one ``Alltoallv``: every rank calls the same
collectives in the same order whatever it sends, so the rounds cannot
deadlock.  The counts array is O(P) integers per rank, the only per-rank state
that grows with P beside the rank's own rows.  The rounds' collectives
stay blocking: every rank works in a round, and a sleeping rank would add its
wake-up to each of them (measured: 4 ranks, 6.7 ms per exchange blocking,
42 ms sleeping, on a loaded machine); only ``central``, where one rank works
alone, waits without spinning (``idle``).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from ..algorithms.distributed.swap_rounds import block_owner, check_out_rows, symmetric_rows
from . import idle
from .agree import step


class MPIExchange:
    """Tasks spread over the ranks of ``comm`` in blocks (``block_owner``)."""

    def __init__(self, comm, n_tasks: int):
        self.comm = comm
        self.size = comm.Get_size()
        self.rank = comm.Get_rank()
        self.n_tasks = n_tasks
        self.peak_bytes = 0  # largest send + receive buffer of one exchange

    def owner(self, tasks) -> np.ndarray:
        return block_owner(tasks, self.n_tasks, self.size)

    def exchange(self, dest, records: np.ndarray) -> np.ndarray:
        """Send row i of ``records`` to rank ``dest[i]``; return the rows
        received (ordered by source rank: callers sort by key anyway)."""
        records = np.asarray(records, dtype=np.float64)
        width = records.shape[1] if records.ndim == 2 and records.shape[1] else 1
        dest = np.asarray(dest, dtype=np.int64)
        order = np.argsort(dest, kind="stable")
        send = np.ascontiguousarray(records[order]).ravel()
        send_counts = (np.bincount(dest, minlength=self.size) * width).astype(np.int32)
        recv_counts = np.empty(self.size, dtype=np.int32)
        self.comm.Alltoall(send_counts, recv_counts)
        send_displ = np.concatenate([[0], np.cumsum(send_counts)[:-1]]).astype(np.int32)
        recv_displ = np.concatenate([[0], np.cumsum(recv_counts)[:-1]]).astype(np.int32)
        recv = np.empty(int(recv_counts.sum()), dtype=np.float64)
        self.comm.Alltoallv([send, (send_counts, send_displ), MPI.DOUBLE],
                            [recv, (recv_counts, recv_displ), MPI.DOUBLE])
        self.peak_bytes = max(self.peak_bytes, send.nbytes + recv.nbytes + 4 * send_counts.nbytes)
        return recv.reshape(-1, width)

    def allreduce(self, values) -> np.ndarray:
        send = np.asarray(values, dtype=np.float64)
        out = np.empty_like(send)
        self.comm.Allreduce(send, out, op=MPI.SUM)
        return out

    def central(self, records, fn, root: int = 0):
        """Collective: gather every rank's ``records`` on ``root``, run
        ``fn`` on them there; it returns (a result for all, one result per
        rank): the first is broadcast, the second scattered.  A failure of
        ``fn`` raises the same error on every rank; the others wait for
        ``root`` without spinning (``idle``)."""
        records = np.zeros((0, 1)) if records is None else np.asarray(records, dtype=np.float64)
        parts = self.comm.gather(records, root=root)
        out, error = None, None
        if self.rank == root:
            try:
                width = max(p.shape[1] for p in parts)
                out = fn(np.vstack([p for p in parts if p.shape[1] == width]))
            except Exception as exc:  # noqa: BLE001 - every rank must learn of it
                error = f"rank {root}: {type(exc).__name__}: {exc}"
        idle.barrier(self.comm)
        error = self.comm.bcast(error, root=root)
        if error is not None:
            raise RuntimeError(error)
        shared = self.comm.bcast(out[0] if out is not None else None, root=root)
        mine = self.comm.scatter(out[1] if out is not None else None, root=root)
        return shared, mine

    def first_error(self, message: str | None) -> str | None:
        """Collective: the message of the lowest rank that has one."""
        first = self.comm.allreduce(self.rank if message is not None else self.size, op=MPI.MIN)
        return None if first == self.size else self.comm.bcast(message, root=first)


def agreed_symmetric_rows(comm, tasks, indptr, cols, nbytes, ex: MPIExchange):
    """Collective ``symmetric_rows``: the rows are checked on every rank and
    the verdict agreed before its exchange, so bad rows on one rank (a NaN
    byte count, a destination out of range) fail on every rank."""
    step(comm, "checking the traffic rows", check_out_rows, cols, nbytes, ex.n_tasks)
    return step(comm, "building the traffic rows", symmetric_rows, tasks, indptr, cols, nbytes, ex)
