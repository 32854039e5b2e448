"""reorder_comm on GPU slots: ranks r and r + P/2 exchange 64 MB, the ring
1 MB.  ``reorder_gpus.py NODE``: prints each process's old and new rank,
the device it was told, what use_gpu set, and the fallback flag, as JSON."""

import json
import os
import sys

import numpy as np
from mpi4py import MPI

from rankmap import reorder_comm

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
traffic = (np.array([(rank + size // 2) % size, (rank + 1) % size]), np.array([64e6, 1e6]))
newcomm = reorder_comm(comm, traffic=traffic, gpus=sys.argv[1])
ordinal = newcomm.use_gpu()
print(json.dumps({"old": rank, "new": newcomm.Get_rank(), "device": newcomm.reorder.device,
                  "ordinal": ordinal, "fallback": newcomm.reorder.fallback,
                  "rocr": os.environ.get("ROCR_VISIBLE_DEVICES")}), flush=True)
