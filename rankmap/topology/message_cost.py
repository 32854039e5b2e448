"""What a message costs between two PEs: a latency alpha per message and a
bandwidth beta per byte, both of the level where the two PEs' paths meet.

A pair of tasks that exchanges m messages of b bytes in all, placed on PEs
whose lowest common ancestor is node x, costs ``m * alpha[x] + b / beta[x]``
(Hockney's model, one (alpha, beta) per tree level).  Bytes alone (J, the
link time) do not see that a program waiting on many small messages pays
alpha for each one, and more of it when a step crosses the network.

Where the figures come from, in order:

1. the machine description: ``TreeNode.latency`` of the node (a cluster
   file's ``network ... latencies 30us``), and the bandwidths it gives for
   the links of the paths below the node (``TreeNode.uplink``);
2. defaults by where the node lies (docs/message-costs.md says where each figure
   comes from): inside a host, shared memory (``SHARED_MEMORY``; the host's
   own node, where packages meet, costs ``SHARED_MEMORY.across``); above the
   hosts, the interconnect (``INTERCONNECTS``, ``DEFAULT_INTERCONNECT`` unless
   the description names one, see ``apply_interconnect``), one switch hop
   more each way for every network level above the first.

beta is what a pair gets when every PE sends at once: a link's bandwidth
shared by the PEs below it (a node's 50mbit link among its 4 slots: 12.5mbit
each), the slowest such share on the way deciding.  A pair's own figure
would make a byte across a 200 Gb/s NIC cheaper than one through shared
memory, where the NIC in fact serves every rank of its host; and a level
is never faster per byte than the levels below it (a message between hosts
also crosses the inside of both).  A PE shares no link with itself: a pair
on one PE costs nothing.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Interconnect:
    """Representative MPI-level figures of one kind of network (rounded;
    measured ones belong in the machine description): one-way latency of a
    small message (s), bandwidth per direction (bytes/s), and what one more
    switch on the way adds (s)."""

    name: str
    latency: float
    bandwidth: float
    hop: float


@dataclass(frozen=True)
class SharedMemory:
    """MPI over shared memory inside a host: latency within a package (s),
    across packages (s), and bandwidth (bytes/s)."""

    latency: float
    across: float
    bandwidth: float


#: docs/message-costs.md gives the source of every figure
INTERCONNECTS = {
    "infiniband": Interconnect("InfiniBand HDR", 1.0e-6, 25e9, 0.13e-6),
    "slingshot": Interconnect("Slingshot-11", 2.0e-6, 25e9, 0.35e-6),
    "omnipath": Interconnect("Omni-Path 100", 1.0e-6, 12.5e9, 0.11e-6),
    "ethernet": Interconnect("TCP over 10 Gb Ethernet", 20e-6, 1.25e9, 1.0e-6),
}
DEFAULT_INTERCONNECT = "infiniband"
SHARED_MEMORY = SharedMemory(0.3e-6, 0.6e-6, 10e9)


def interconnect(name: str) -> Interconnect:
    """The interconnect of that name (``INTERCONNECTS``), else ValueError."""
    key = str(name).strip().lower().replace("-", "").replace("_", "")
    aliases = {"ib": "infiniband", "opa": "omnipath", "tcp": "ethernet", "eth": "ethernet"}
    key = aliases.get(key, key)
    if key not in INTERCONNECTS:
        raise ValueError(f"interconnect {name!r}: choose from {', '.join(INTERCONNECTS)}")
    return INTERCONNECTS[key]


@dataclass(frozen=True)
class MessageCosts:
    """Per node as the lowest common ancestor of a pair (then one 0 per PE
    for the PEs' pad ids, ``Topology.lca``): ``alpha`` seconds per message,
    ``inverse`` seconds per byte.  ``source`` says where the network's
    figures came from; ``fold`` is the network's alpha x beta, the bytes a
    message's latency is worth there (what the search adds per message)."""

    alpha: np.ndarray
    inverse: np.ndarray
    source: str
    fold: float

    def times(self, lca, messages, nbytes) -> tuple[float, float]:
        """(latency, bandwidth) seconds of pairs meeting at ``lca``: their
        ``messages`` and ``nbytes`` (either may be None: 0)."""
        lat = 0.0 if messages is None else float(np.dot(self.alpha[lca], messages))
        band = 0.0 if nbytes is None else float(np.dot(self.inverse[lca], nbytes))
        return lat, band


_MODELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def message_costs(topology) -> MessageCosts:
    """The alpha and beta of every level of the tree ``topology`` (module
    docstring), made once per topology and its given figures."""
    model = _MODELS.get(topology)
    if model is None or model[0] is not topology.node_uplink or model[1] is not topology.node_latency:
        model = _MODELS[topology] = (topology.node_uplink, topology.node_latency, _tree_costs(topology))
    return model[2]


def _tree_costs(topology) -> MessageCosts:
    parent = topology.parent
    host = topology.host_ids()
    inner = topology.child_ptr[1:] > topology.child_ptr[:-1]
    network = inner & (host[topology.leaf_start] != host[np.maximum(topology.leaf_stop - 1, 0)])
    into_network = (parent >= 0) & network[np.maximum(parent, 0)]
    host_top = inner & ~network & ((parent < 0) | into_network)
    level = _network_levels(topology, network)
    net = interconnect(DEFAULT_INTERCONNECT)
    # seconds per byte of each link's share: its bandwidth over the PEs below it
    sharing = (topology.leaf_stop - topology.leaf_start).astype(np.float64)
    given = np.where(np.isfinite(topology.node_uplink) & (parent >= 0), sharing / topology.node_uplink, 0.0)
    assumed = np.where((given == 0) & into_network & ~network, sharing / net.bandwidth, given)  # a host's NIC
    alpha = np.where(network, net.latency + 2 * level * net.hop,
                     np.where(host_top, SHARED_MEMORY.across, SHARED_MEMORY.latency))
    latency_given = np.isfinite(topology.node_latency)
    alpha = np.where(inner, np.where(latency_given, topology.node_latency, alpha), 0.0)
    crossed = _slowest_below(topology, assumed)
    inverse = np.where(inner, np.where(crossed > 0, crossed, 1.0 / SHARED_MEMORY.bandwidth), 0.0)
    inverse = np.maximum(inverse, _slowest_below(topology, inverse))  # a byte between hosts also crosses inside
    pads = np.zeros(topology.n_pes)
    given_net = bool((latency_given & network).any() or (_slowest_below(topology, given)[network] > 0).any())
    source = "the machine description" if given_net else f"defaults ({net.name})"
    if not network.any():
        source = "defaults (shared memory)" if not (latency_given & inner).any() else "the machine description"
    return MessageCosts(np.concatenate([alpha, pads]), np.concatenate([inverse, pads]), source,
                        _fold(alpha, inverse, network & (level == 0), host_top))


def _network_levels(topology, network) -> np.ndarray:
    """Each network node's level: 0 just above the hosts, one more per level up."""
    level = np.zeros(topology.n_nodes, dtype=np.int64)
    for d in range(topology.max_depth, 0, -1):
        nodes = np.flatnonzero(topology.node_depth == d)
        np.maximum.at(level, topology.parent[nodes], np.where(network[nodes], level[nodes] + 1, 0))
    return level


def _slowest_below(topology, link) -> np.ndarray:
    """Per node, the largest ``link`` value (seconds per byte of a node's link
    to its parent) on the paths from its children down to the leaves: what a
    pair meeting at the node crosses at worst."""
    parent, depth = topology.parent, topology.node_depth
    slowest = link.copy()                  # ... from the node itself down
    below = np.zeros(topology.n_nodes)     # ... from its children down
    for d in range(topology.max_depth, 0, -1):
        nodes = np.flatnonzero(depth == d)
        np.maximum.at(below, parent[nodes], slowest[nodes])
        rows = np.flatnonzero(depth == d - 1)
        slowest[rows] = np.maximum(slowest[rows], below[rows])
    return below


def _fold(alpha, inverse, first_network, host_top) -> float:
    """alpha x beta of the level just above the hosts (the median over its
    nodes), else of the hosts' own nodes: the bytes a message is worth."""
    for where in (first_network, host_top):
        if where.any():
            return float(np.median(alpha[where] / inverse[where]))
    return 0.0


def apply_interconnect(root, name: str) -> None:
    """Give the network of a cluster's ``TreeNode`` tree the figures of the
    interconnect ``name`` where the description gave none: the latency of
    every node above the hosts (one switch hop more each way per level up)
    and the bandwidth of every link into such a node.  The hosts are the
    named nodes."""
    net = interconnect(name)

    def walk(node) -> int | None:
        """The node's network level (None: the node is a host or inside one)."""
        if node.name is not None or not node.children:
            return None
        levels = [walk(c) for c in node.children]
        level = max((x + 1 for x in levels if x is not None), default=0)
        if node.latency is None:
            node.latency = net.latency + 2 * level * net.hop
        for child in node.children:
            if child.uplink is None:
                child.uplink = net.bandwidth
        return level

    walk(root)
