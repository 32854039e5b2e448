"""A GPU program to record: every rank opens the GPU through PyTorch, works
on it, and swaps a block with its ring neighbours through host memory.
Each rank writes the PCI bus id PyTorch reports for its device to
``DIR/rankN.json`` (``torch_pairs.py DIR``), so the recorded one can be
checked against it."""

import json
import sys
from pathlib import Path

import numpy as np
import torch
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
torch.cuda.set_device(0)
block = torch.full((1 << 20,), float(rank), device="cuda") * 2.0
host, got = block.cpu().numpy(), np.empty(1 << 20, dtype=np.float32)
for _ in range(5):
    comm.Sendrecv(host, dest=(rank + 1) % size, recvbuf=got, source=(rank - 1) % size)
assert got[0] == 2.0 * ((rank - 1) % size)
props = torch.cuda.get_device_properties(0)
bus = [getattr(props, f, None) for f in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps({"bus": bus, "name": props.name}))
print(f"rank {rank}: ok on {props.name}", flush=True)
