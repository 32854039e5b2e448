"""Ranks 2k and 2k + 1 exchange 8 MiB, neighbours on the ring 64 KiB.

``gpu_pairs.py [DRIVER DEVICES]``: first open a GPU as CuPy and PyTorch
do, through the CUDA driver at DRIVER (a library path), rank r the device
DEVICES.split(",")[r]."""

import ctypes
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
if len(sys.argv) > 2:
    cu = ctypes.CDLL(sys.argv[1])
    device = int(sys.argv[2].split(",")[rank])
    ctx = ctypes.c_void_p()
    assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
partner = rank ^ 1
if partner < size:
    out, got = np.ones(1 << 20), np.empty(1 << 20)
    comm.Sendrecv(out, dest=partner, recvbuf=got, source=partner)
small, back = np.ones(1 << 13), np.empty(1 << 13)
comm.Sendrecv(small, dest=(rank + 1) % size, recvbuf=back, source=(rank - 1) % size)
print(f"rank {rank}: ok", flush=True)
