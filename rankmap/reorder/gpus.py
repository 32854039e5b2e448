"""``reorder_comm(..., gpus=...)``: the slots are GPUs, and every process is
told which one to open.

A process that has not yet created its device context can use any GPU of
its node, so on GPU nodes the mapping places tasks on GPUs (or partitions)
and each process, which keeps its node and its cores, is given the GPU of
its slot: new rank t then runs on the GPU the mapping chose for task t.
``ReorderInfo.device`` names it ("rocr:5"); ``use_gpu`` makes it the
device the program's runtime opens (the visible-device variable, set
before the runtime starts, so that libraries that start later see it too).

Slots on a node: its GPUs (``gpus=True``: this machine's, from hwloc's XML
or sysfs, ``topology.local_gpus``; or a built-in node type, a GPU node
file or an hwloc XML, ``topology.gpu_nodes.load_gpu_node``).  A process
the launcher confined to one GPU (a visible-device variable naming one)
keeps that GPU's slot; one bound to the cores of a GPU takes that GPU's;
the others take the remaining GPUs in rank order.  More processes than
GPUs on a node share them, as many to each as it takes
(``partitions.shared_gpus``).
"""

from __future__ import annotations

import json
import os

import numpy as np
from mpi4py import MPI

from ..algorithms.distributed.swap_rounds import Labels
from ..bind import device_environment
from ..profile.gpu import record
from ..topology.partitions import shared_gpus
from ..topology.rank_gpus import read_record, same_device
from .agree import root_step, step
from .placement import Placement, on_node_leader, slots_of

#: variables that narrow the GPUs a runtime sees, per device kind: those
#: ``use_gpu`` replaces (a leftover one would index into the narrowed list)
NARROWING = {"rocr": ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
                      "GPU_DEVICE_ORDINAL"),
             "cuda": ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"),
             "nvml": ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"),
             "ze": ("ZE_AFFINITY_MASK",)}


def gpus_argument(gpus) -> str | None:
    """``gpus=`` checked: None (CPU slots), "local" (``True``: this
    machine's GPUs) or a node spec for ``load_gpu_node``."""
    if gpus is None or gpus is False:
        return None
    if gpus is True:
        return "local"
    if isinstance(gpus, (str, os.PathLike)) and str(gpus).strip():
        return str(gpus)
    raise ValueError(f"gpus must be True, None or a GPU node (a built-in type such as 'mi300a:cpx', "
                     f"a GPU node file or an hwloc XML), not {gpus!r}")


def node_gpus(spec: str):
    """One node's GPU topology for the ``gpus=`` spec."""
    if spec == "local":
        from ..topology.local_gpus import discover_local_gpus

        return discover_local_gpus()
    from ..topology.gpu_nodes import load_gpu_node

    return load_gpu_node(spec)


def claimed_device(environ=None) -> str | None:
    """The one GPU the launcher left this process (a visible-device
    variable naming one), else None."""
    got = read_record(record(environ, probe=False))
    return None if got is None else got.device


def gpu_slots(spec: str):
    """The slot discovery of ``placement.locate`` for GPU slots of ``spec``."""
    return lambda comm, network: locate_gpus(comm, spec, network)


def locate_gpus(comm, spec: str, network):
    """Collective: the GPU slots of the job (``Placement``), this rank's
    device on it."""
    from ..topology import cluster

    node, error, leader = on_node_leader(comm, f"finding the node's GPUs ({spec})", lambda: node_gpus(spec))

    def where():
        if error is not None:
            raise RuntimeError(error)
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        return MPI.Get_processor_name(), claimed_device(), cpus

    host, claim, cpus = step(comm, "reading the GPU binding", where)
    gathered = comm.gather((host, claim, cpus, node if leader else None), root=0)
    built = root_step(comm, "placing the ranks on GPUs", _compose, gathered, cluster, network)
    topo, labels, pe_of_rank, devices = built if built is not None else (None, None, None, None)
    pe_of_rank = comm.bcast(pe_of_rank, root=0)
    label, device = comm.scatter(None if labels is None else
                                 [(labels.take([r]), devices[r]) for r in range(comm.Get_size())], root=0)
    return Placement(topo, label, f"gpus ({spec})", pe_of_rank, device=device)


def _compose(gathered, cluster, network):
    """Root: each node's GPU slots given to its processes, the cluster of
    the nodes restricted to them; each rank's device."""
    nodes_of: dict = {}
    for host, _claim, _cpus, node in gathered:
        if node is not None:
            nodes_of.setdefault(host, node)
    nodes, offset, slot_pe = [], 0, np.empty(len(gathered), dtype=np.int64)
    for host, node in nodes_of.items():
        ranks = [r for r, g in enumerate(gathered) if g[0] == host]
        if len(ranks) > node.n_pes:
            node = shared_gpus(node, -(-len(ranks) // node.n_pes))
        local = _assign(host, node, [gathered[r][1] for r in ranks], [gathered[r][2] for r in ranks])
        slot_pe[ranks] = offset + np.asarray(local, dtype=np.int64)
        nodes.append((host, node))
        offset += node.n_pes
    slots, pe_of_rank = slots_of(nodes, slot_pe, cluster, network)
    devices = [slots.pe_device[p] for p in pe_of_rank]
    return slots, Labels.of(slots, pe_of_rank), pe_of_rank, devices


def _assign(host, node, claims, cpus) -> list[int]:
    """The PE of ``node`` each of its processes takes: the GPU the launcher
    confined it to, else one whose cores hold its binding, else the next
    free one (module docstring)."""
    free = list(range(node.n_pes))
    out = [-1] * len(claims)
    for i, claim in enumerate(claims):
        if claim is None:
            continue
        mine = [p for p in free if same_device(node.pe_device[p], claim)]
        if not mine:
            raise RuntimeError(f"{host}: more ranks were given {claim} than it can hold, or the node has "
                               "no such GPU")
        out[i] = mine[0]
        free.remove(mine[0])
    for i, bound in enumerate(cpus):
        if out[i] < 0 and bound:
            near = [p for p in free if node.pe_cpus[p] and set(bound) <= set(node.pe_cpus[p])]
            if near:
                out[i] = near[0]
                free.remove(near[0])
    for i in range(len(claims)):
        if out[i] < 0:
            out[i] = free.pop(0)
    return out


def use_gpu(device: str | None, environ=None) -> int | None:
    """Make ``device`` ("rocr:5") the GPU this process's runtime opens and
    return the ordinal to open (0), or None for no device.  The
    visible-device variable names that one GPU (in ``environ``, default
    this process's, so that libraries started later see it too); a process
    whose runtime already opened a GPU keeps it: the ordinal it opened when
    that is ``device``, else RuntimeError (nothing can be narrowed then)."""
    if device is None:
        return None
    env = os.environ if environ is None else environ
    text = record(env)
    opened = json.loads(text).get("current") if text else None
    if opened is not None:
        if same_device(read_record(text).device, device):
            return int(opened["ordinal"])
        raise RuntimeError(f"use_gpu: this process already opened GPU {read_record(text).said}; call "
                           f"use_gpu before the program creates its device context to open {device}")
    for name in NARROWING[device.partition(":")[0]]:
        env.pop(name, None)
    env.update(device_environment(device))
    return 0
