"""Where the ranks are: the slot topology of the running job.

With ``topology=`` the caller says it (rank r on PE r; tests pretend a
multi-node machine this way).  Otherwise each rank reports its host and CPU
binding (``os.sched_getaffinity``), one rank per node discovers the node's
tree (``rankmap.topology.live``), shared over the node-local communicator
(``Split_type(COMM_TYPE_SHARED)``), and the root composes the cluster of those
nodes restricted to the occupied slots (``rankmap.topology.cluster``).  A node
whose ranks are not bound to distinct cores is placed at node granularity
(all its ranks at one distance) with a warning.  Every rank ends with the
label of its own slot; only the root holds the whole topology.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from ..algorithms.distributed.swap_rounds import Labels
from ..topology import Topology, TreeNode
from . import idle
from .agree import ReorderFailed, root_step, same_everywhere, step


@dataclass
class Placement:
    """``topology`` of the slots: on the root always, on every rank when the
    caller gave it.  ``pe_of_rank[r]``: the slot rank r runs on (identity for
    a given topology; discovered slots are numbered in tree order, so a
    round-robin launch is not the identity).  ``label``: this rank's slot
    label."""

    topology: Topology | None
    label: Labels
    source: str
    pe_of_rank: np.ndarray
    warning: str | None = None
    device: str | None = None   # the GPU of this rank's slot ("rocr:5"), None off GPU slots

    @property
    def rank_of_pe(self) -> np.ndarray:
        inv = np.empty_like(self.pe_of_rank)
        inv[self.pe_of_rank] = np.arange(self.pe_of_rank.size)
        return inv


def locate(comm, topology=None, network=None, discover=None) -> Placement:
    """Collective: the slot topology and this rank's label.  Whether a
    topology was given decides the path, so it is agreed first: given on
    some ranks only fails on every rank.  ``discover`` (the same on every
    rank, e.g. ``gpus.locate_gpus`` for GPU slots) finds the slots instead
    of the nodes' cores: ``discover(comm, network)``."""
    given = comm.allreduce(int(topology is not None), op=MPI.SUM)
    if 0 < given < comm.Get_size():
        without = comm.allreduce(comm.Get_rank() if topology is None else comm.Get_size(), op=MPI.MIN)
        raise ReorderFailed(f"topology= given on {given} of {comm.Get_size()} ranks (not on rank "
                            f"{without}): pass it on every rank or on none")
    if given:
        return _given(comm, topology)
    return (discover or _discovered)(comm, network)


def _given(comm, topology) -> Placement:
    size, rank = comm.Get_size(), comm.Get_rank()

    def check():
        if not isinstance(topology, Topology):
            raise TypeError(f"topology must be a rankmap Topology, not {type(topology).__name__}")
        if topology.n_pes != size:
            raise ValueError(f"topology has {topology.n_pes} PEs but the communicator has {size} "
                             "ranks: give the topology of the occupied slots (rank r on PE r; "
                             "rankmap.topology.cluster.restrict_to_slots makes one)")
        return float(np.dot(topology.node_distance, np.arange(1, topology.n_nodes + 1)) + topology.n_nodes)

    fingerprint = step(comm, "checking the topology", check)
    same_everywhere(comm, "the topology", fingerprint)
    return Placement(topology, step(comm, "labelling slots", Labels.of, topology, [rank]), "given",
                     np.arange(size), device=topology.pe_device[rank])


def _discovery_modules():
    try:
        from ..topology import cluster, live
    except ImportError as exc:
        raise RuntimeError("automatic topology discovery needs rankmap.topology.live and "
                           f"rankmap.topology.cluster ({exc}); pass topology=") from None
    return live, cluster


def on_node_leader(comm, what: str, fn):
    """Collective: ``fn()`` on the first rank of each node, its result (or
    the error, ``what`` failed) on every rank of the node: ``(value, error,
    leader)``.  The errors are agreed by the caller's next step."""
    node_comm = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        leader = node_comm.Get_rank() == 0
        value, error = None, None
        if leader:
            try:
                value = fn()
            except Exception as exc:  # noqa: BLE001 - agreed by the caller
                error = f"{what}: {type(exc).__name__}: {exc}"
        idle.barrier(node_comm)  # the node's other ranks wait for the leader without spinning
        value, error = node_comm.bcast((value, error), root=0)
    finally:
        node_comm.Free()
    return value, error, leader


def slots_of(nodes, slot_pe, cluster, network):
    """Root: the cluster of ``nodes`` (host, tree) under the network,
    restricted to the slots ``slot_pe``; ``(slots, pe_of_rank)``."""
    arities, distances = network if network is not None else _default_network(nodes)
    machine = cluster.compose_cluster(nodes, arities, distances)
    return cluster.restrict_to_slots(machine, slot_pe), cluster.slot_of_process(slot_pe)


def _discovered(comm, network) -> Placement:
    live, cluster = step(comm, "topology discovery", _discovery_modules)
    node_topo, error, leader = on_node_leader(comm, "discovering the node topology", live.discover_local)

    def where():
        if error is not None:
            raise RuntimeError(error)
        cpus = sorted(os.sched_getaffinity(0))
        pes = np.asarray(live.affinity_pes(node_topo, cpus), dtype=np.int64)
        bound = 0 < pes.size < node_topo.n_pes
        return MPI.Get_processor_name(), int(pes.min()) if bound else -1

    host, pe = step(comm, "reading the binding", where)
    gathered = comm.gather((host, pe, node_topo if leader else None), root=0)
    built = root_step(comm, "composing the cluster", _compose, gathered, cluster, network)
    topo, labels, pe_of_rank, warning = built if built is not None else (None, None, None, None)
    # every rank learns where every rank is: O(P) integers, needed to address
    # the slot owners in the distributed path
    warning, pe_of_rank = comm.bcast((warning, pe_of_rank), root=0)
    label = comm.scatter(None if labels is None else [labels.take([r]) for r in range(comm.Get_size())],
                         root=0)
    return Placement(topo, label, "discovered", pe_of_rank, warning)


def _compose(gathered, cluster, network):
    """Root: the cluster of the job's nodes restricted to its slots."""
    hosts: dict[str, Topology] = {}
    for host, _pe, topo in gathered:
        if topo is not None:
            hosts.setdefault(host, topo)
    ranks_on = {h: [r for r, g in enumerate(gathered) if g[0] == h] for h in hosts}
    unbound = [h for h in hosts if any(gathered[r][1] < 0 for r in ranks_on[h])]
    warning = None
    if unbound:
        count = sum(len(ranks_on[h]) for h in unbound)
        warning = (f"ranks on {', '.join(unbound)} ({count} of {len(gathered)} ranks) are not bound "
                   "to distinct cores: placed at node granularity (bind ranks, e.g. mpiexec -bind-to core, to place them by core)")
    nodes, offset, slot_pe = [], 0, np.empty(len(gathered), dtype=np.int64)
    for h, topo in hosts.items():
        if h in unbound:
            # all ranks of the node one distance apart: the widest the node has
            width = float(topo.node_distance.max()) or 1.0
            topo = Topology(TreeNode("machine", width, [TreeNode("slot") for _ in ranks_on[h]], name=h))
            local = np.arange(len(ranks_on[h]))
        else:
            local = np.array([gathered[r][1] for r in ranks_on[h]], dtype=np.int64)
        slot_pe[ranks_on[h]] = offset + local
        nodes.append((h, topo))
        offset += topo.n_pes
    slots, pe_of_rank = slots_of(nodes, slot_pe, cluster, network)
    return slots, Labels.of(slots, pe_of_rank), pe_of_rank, warning


def _default_network(nodes):
    """One switch above all nodes, ten times the widest distance in a node."""
    widest = max(float(t.node_distance.max()) for _h, t in nodes) or 1.0
    return [len(nodes)], [10.0 * widest]
