"""What the cluster benchmark programs share: the process grid, the program's
own communication graph, the in-program reorder, and the timing report.

Ranks are numbered row-major over the process grid (rank = task), so the
graph of a program is known before it runs; the benchmark maps that graph.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager

import numpy as np

from rankmap import CommGraph


def parse_grid(text: str) -> tuple[int, ...]:
    """``"8x4"`` -> (8, 4); ``"4x4x2"`` -> (4, 4, 2)."""
    try:
        dims = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--grid {text!r}: expected e.g. 8x4 or 4x4x2") from None
    if not dims or min(dims) < 1:
        raise SystemExit(f"--grid {text!r}: every dimension must be >= 1")
    return dims


def neighbours(dims: tuple[int, ...], rank: int) -> list[tuple[int, int, int]]:
    """(axis, direction, neighbour rank) of each face of ``rank`` (not periodic)."""
    coords = list(np.unravel_index(rank, dims))
    out = []
    for axis in range(len(dims)):
        for step in (-1, 1):
            c = list(coords)
            c[axis] += step
            if 0 <= c[axis] < dims[axis]:
                out.append((axis, step, int(np.ravel_multi_index(c, dims))))
    return out


def face_graph(dims: tuple[int, ...], face_bytes, iterations: int, name: str) -> CommGraph:
    """Bytes each task sends each face neighbour over the run;
    ``face_bytes[axis]`` is one message across a face normal to ``axis``."""
    src, dst, nbytes = [], [], []
    for r in range(int(np.prod(dims))):
        for axis, _, peer in neighbours(dims, r):
            src.append(r)
            dst.append(peer)
            nbytes.append(float(face_bytes[axis]) * iterations)
    return CommGraph.from_edges(np.array(src), np.array(dst), np.array(nbytes),
                                n=int(np.prod(dims)), name=name)


def exchange(comm, faces, send, recv, timer: "Timer") -> None:
    """One message per face: ``send[i]``/``recv[i]`` go to/come from
    ``faces[i]`` (from ``neighbours``); the wait counts as communication."""
    from mpi4py import MPI

    reqs = [comm.Irecv(buf, source=peer, tag=2 * axis + (step < 0))
            for buf, (axis, step, peer) in zip(recv, faces)]
    reqs += [comm.Isend(buf, dest=peer, tag=2 * axis + (step > 0))
             for buf, (axis, step, peer) in zip(send, faces)]
    with timer.waiting():
        MPI.Request.Waitall(reqs)


def reorder_in_program(comm, graph: CommGraph, method: str):
    """The in-program path: map ``graph`` onto the slots this job got (hosts
    from MPI_Get_processor_name, distances 1 within a host and 100 between
    hosts) and return ``(communicator, J)``: rank t of the communicator runs
    where task t should.  Rank 0 maps; everyone splits."""
    from mpi4py import MPI

    from rankmap import map_tasks, mapping_cost
    from rankmap.topology import Topology
    from rankmap.topology.tree import TreeNode

    hosts = comm.allgather(MPI.Get_processor_name())
    task_of_process, cost = None, None
    if comm.rank == 0:
        names = list(dict.fromkeys(hosts))
        slots = [[r for r in range(comm.size) if hosts[r] == h] for h in names]
        topo = Topology(TreeNode("network", 100.0, [
            TreeNode("node", 1.0, [TreeNode("pe") for _ in s], name=h) for h, s in zip(names, slots)]))
        pe_of_task = map_tasks(graph, topo, method=method).pe_of_task
        cost = mapping_cost(graph, topo, pe_of_task)
        process_of_pe = np.asarray([r for s in slots for r in s])  # PEs: host by host
        task_of_process = np.empty(comm.size, dtype=np.int64)
        task_of_process[process_of_pe[pe_of_task]] = np.arange(comm.size)
        task_of_process = task_of_process.tolist()
    key = comm.scatter(task_of_process, root=0)
    return comm.Split(0, key), comm.bcast(cost, root=0)


def add_reorder_arguments(p):
    """The options of the in-program path, the same in every program."""
    p.add_argument("--reorder", action="store_true",
                   help="reorder ranks in the program at start-up (in-program path)")
    p.add_argument("--method", default="auto", help="mapping method for --reorder")
    return p


def start(comm, args, dims, graph_of):
    """Check the job size against the grid; with ``args.reorder`` take the
    in-program path.  Returns ``(communicator, J or None, seconds spent)``."""
    if comm.size != int(np.prod(dims)):
        raise SystemExit(f"--grid {args.grid} needs {int(np.prod(dims))} ranks, got {comm.size}")
    t = time.perf_counter()
    cost = None
    if args.reorder:
        comm, cost = reorder_in_program(comm, graph_of(args), args.method)
    return comm, cost, time.perf_counter() - t


class Timer:
    """Wall time of the timed loop and the part of it spent waiting in MPI."""

    def __init__(self):
        self.comm_s = 0.0
        self.start = time.perf_counter()

    @contextmanager
    def waiting(self):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.comm_s += time.perf_counter() - t

    def report(self, comm, **extra) -> None:
        """Rank 0 prints one JSON line: max wall and max/mean communication time."""
        wall = time.perf_counter() - self.start
        walls = comm.gather(wall)
        comms = comm.gather(self.comm_s)
        if comm.rank == 0:
            print(json.dumps({"wall_s": max(walls), "comm_s": max(comms),
                              "comm_mean_s": float(np.mean(comms)), **extra}), flush=True)
