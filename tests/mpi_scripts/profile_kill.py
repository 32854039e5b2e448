"""Every rank sends 10 x 1000 B around a ring, waits ``3 x`` the flush
interval (so each rank's part holds it), sends 10 x 1000 B more, then rank
``sys.argv[1]`` SIGKILLs itself; hydra SIGKILLs the others."""
import os
import signal
import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
me, size = comm.Get_rank(), comm.Get_size()
victim, interval = int(sys.argv[1]), float(sys.argv[2])
buf, got = np.zeros(125), np.empty(125)  # 1000 bytes


def ring(times):
    for _ in range(times):
        comm.Sendrecv(buf, (me + 1) % size, 0, got, (me - 1) % size, 0)


ring(10)
time.sleep(3 * interval)
ring(10)
comm.Barrier()
if me == victim:
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(60)  # killed by the launcher long before
