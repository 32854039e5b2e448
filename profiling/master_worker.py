"""Master-worker: rank 0 hands out task descriptions (pickled send/recv) and
collects results; the workers never talk to each other."""
import argparse

from mpi4py import MPI

p = argparse.ArgumentParser()
p.add_argument("--tasks", type=int, default=200)
a = p.parse_args()
comm = MPI.COMM_WORLD
me, P = comm.Get_rank(), comm.Get_size()
if me == 0:
    status, results, next_task = MPI.Status(), [], 0
    for w in range(1, P):
        comm.send(next_task if next_task < a.tasks else None, w)
        next_task += 1
    active = P - 1
    while active:
        res = comm.recv(source=MPI.ANY_SOURCE, status=status)
        results.append(res)
        w = status.Get_source()
        comm.send(next_task if next_task < a.tasks else None, w)
        next_task += 1
        active -= res is None
    print(f"master_worker: {sum(r for r in results if r is not None)} from {a.tasks} tasks")
else:
    while True:
        task = comm.recv(source=0)
        if task is None:
            comm.send(None, 0)
            break
        comm.send(sum(i * i for i in range(task % 100)) + task, 0)
