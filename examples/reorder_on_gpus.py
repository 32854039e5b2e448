"""Each task on the GPU rankmap chose for it: mpiexec -n 8 python reorder_on_gpus.py [NODE]."""
import sys

import numpy as np
from mpi4py import MPI

from rankmap import reorder_comm

comm = MPI.COMM_WORLD
size = comm.Get_size()
pair = comm.Get_rank() ^ 1 if comm.Get_rank() ^ 1 < size else comm.Get_rank()
traffic = (np.array([pair, (comm.Get_rank() + 1) % size]), np.array([64e6, 1e6]))  # pairs talk most
gpus = sys.argv[1] if len(sys.argv) > 1 else True   # True: each node's GPUs; or e.g. "mi300a:cpx"
newcomm = reorder_comm(comm, traffic=traffic, gpus=gpus)
ordinal = newcomm.use_gpu()          # before the first device context: sets CUDA/ROCR_VISIBLE_DEVICES
try:
    import cupy as xp                # (torch: torch.device("cuda", ordinal))
    xp.cuda.Device(ordinal or 0).use()
except ImportError:
    xp = np                          # no CuPy here: the same steps on the host
rank = newcomm.Get_rank()            # the task this process plays now
block = xp.full(1 << 16, float(rank))
got = np.empty(1 << 16)
peer = rank ^ 1 if rank ^ 1 < size else rank
newcomm.Sendrecv(block.get() if xp is not np else block, dest=peer, recvbuf=got, source=peer)
print(f"rank {rank} device {newcomm.reorder.device} ordinal {ordinal} got {got[0]:.0f} "
      f"fallback {newcomm.reorder.fallback}", flush=True)
