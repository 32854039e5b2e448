"""Rank 2 sends 800 bytes to rank 3, then raises; the others wait forever."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
me = comm.Get_rank()
if me == 2:
    comm.Send(np.zeros(100), 3, 0)
    1 / 0
if me == 3:
    comm.Recv(np.zeros(100), 2, 0)
comm.Barrier()  # never completes: rank 2 is gone
