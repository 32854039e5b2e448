"""A profiled parent spawns a profiled child (trace path ``sys.argv[1]``);
the child reaches its parent only through ``MPI.Comm.Get_parent()``."""
import sys

import numpy as np
from mpi4py import MPI

if sys.argv[2:] == ["child"]:
    parent = MPI.Comm.Get_parent()
    got = np.empty(3)
    parent.Recv(got, 0, 1)
    parent.Send(np.zeros(5), 0, 2)  # 40 bytes to the parent
    parent.Disconnect()
else:
    child = MPI.COMM_SELF.Spawn(sys.executable, ["-m", "rankmap.profile", "--no-topology", "-o", sys.argv[1],
                                                 __file__, sys.argv[1], "child"], maxprocs=1)
    child.Send(np.zeros(3), 0, 1)  # 24 bytes to the child
    child.Recv(np.empty(5), 0, 2)
    child.Disconnect()
    print("parent: ok")
