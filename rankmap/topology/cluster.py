"""Multi-node machines: node trees under network levels, the slots a job
actually runs on, and the host lists users already have (MPI hostfiles,
Slurm nodelists, a small cluster description file).

Network levels are given innermost first like hierarchy strings:
``network_arities=(4, 2)`` puts 4 nodes under each switch and 2 switches
under each rack, ``network_distances=(100, 400)`` their distances.  When the
nodes do not fit under one top group, one more distance (for the level
joining the top groups) is needed; without any network distances the
defaults are ``DEFAULT_NETWORK_DISTANCE * 4**level``.

Slots: ``restrict_to_slots(topology, pes)`` keeps the PEs where processes
run, one entry of ``pes`` per process, distances unchanged; a PE listed m
times becomes m slots at distance 0.  The restricted topology numbers its PEs
in tree order, i.e. in increasing original PE id (repeated PEs adjacent, in
process order): process i sits on PE ``slot_of_process(pes)[i]`` of it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..limits import MAX_TREE_PES
from .bandwidth import parse_bandwidths, parse_latencies
from .hierarchy import hierarchy_topology, parse_hierarchy
from .hosts import expand_nodelist, parse_hostfile
from .levels import DEFAULT_NETWORK_DISTANCE, merge_structureless_levels, normalize_overrides
from .tree import Topology, TreeNode

NETWORK_KINDS = ("switch", "rack")


# ------------------------------------------------------------ tree surgery
def _to_treenodes(topology: Topology, slots_per_pe: np.ndarray | None = None) -> TreeNode:
    """TreeNode copy of ``topology``; with ``slots_per_pe``, only subtrees
    holding a slot are kept and a PE with m > 1 slots becomes a node of m
    slot leaves at distance 0."""
    if slots_per_pe is None:
        slots_per_pe = np.ones(topology.n_pes, dtype=np.int64)
    used = np.concatenate([[0], np.cumsum(slots_per_pe > 0)])
    keep = used[topology.leaf_stop] - used[topology.leaf_start] > 0
    pe_of_node = np.full(topology.n_nodes, -1, dtype=np.int64)
    pe_of_node[topology.leaf_of_pe] = np.arange(topology.n_pes)
    made: list[TreeNode | None] = [None] * topology.n_nodes
    for n in range(topology.n_nodes - 1, -1, -1):  # children before parents
        if not keep[n]:
            continue
        kind, name = topology.node_kind[n], topology.node_name[n]
        pe = pe_of_node[n]
        if pe >= 0:
            os_index = int(topology.pe_os_index[pe])
            leaf = dict(os_index=None if os_index < 0 else os_index, device=topology.pe_device[pe],
                        cpus=topology.pe_cpus[pe],
                        link_row=int(topology.pe_link_row[pe]) if topology.pe_link_row[pe] >= 0 else None)
            m = int(slots_per_pe[pe])
            children = [TreeNode("slot", **leaf) for _ in range(m)] if m > 1 else []
            made[n] = TreeNode(kind, 0.0, children, name=name, **leaf)
        else:
            children = [made[c] for c in topology.children(n).tolist() if made[c] is not None]
            made[n] = TreeNode(kind, float(topology.node_distance[n]), children, None, name,
                               links=topology.node_links.get(n))
        uplink, latency = float(topology.node_uplink[n]), float(topology.node_latency[n])
        made[n].uplink = uplink if np.isfinite(uplink) else None
        made[n].latency = latency if np.isfinite(latency) else None
    return made[0]


def restrict_to_slots(topology: Topology, pes) -> Topology:
    """The topology the algorithms see for a job whose process i runs on PE
    ``pes[i]``: only those PEs, distances unchanged, a PE listed m times as m
    slots at distance 0, levels left without structure merged.  PE j of the
    result is the j-th smallest entry of ``pes`` (ties in process order); use
    ``slot_of_process(pes)`` for the PE of each process."""
    pes = _check_pes(topology, pes)
    counts = np.bincount(pes, minlength=topology.n_pes)
    return Topology(merge_structureless_levels(_to_treenodes(topology, counts)))


def slot_of_process(pes) -> np.ndarray:
    """PE of the restricted topology (``restrict_to_slots(t, pes)``) where
    process i runs."""
    pes = np.asarray(pes, dtype=np.int64)
    out = np.empty(len(pes), dtype=np.int64)
    out[np.argsort(pes, kind="stable")] = np.arange(len(pes))
    return out


def _check_pes(topology: Topology, pes) -> np.ndarray:
    arr = np.asarray(pes)
    if arr.ndim != 1 or len(arr) == 0:
        raise ValueError("slots: need a non-empty list of PE ids, one per process")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError("slots: PE ids must be integers")
    arr = arr.astype(np.int64)
    bad = arr[(arr < 0) | (arr >= topology.n_pes)]
    if len(bad):
        raise ValueError(f"slots: PE {int(bad[0])} is not in this topology (PEs 0..{topology.n_pes - 1})")
    return arr


# ------------------------------------------------------------- composition
def compose_cluster(nodes, network_arities=(), network_distances=(), switches=None,
                    network_bandwidths=(), network_latencies=(), interconnect: str | None = None) -> Topology:
    """One topology for several nodes: ``nodes`` is a list of
    ``(hostname, Topology)`` (heterogeneous nodes allowed), placed in order
    under the network levels (see module docstring), or under the switches
    of a Slurm ``topology.conf`` or ``topology.yaml``
    (``switches.load_switches``).  Hosts named by Cray xnames with no
    levels given sit under the blades, chassis and cabinets their names
    say (``switches.xname_switches``).  ``network_bandwidths`` (bytes/s,
    innermost first like the distances): the links into each network
    level, the first one each node's own link; ``network_latencies``
    (seconds, innermost first): a message between nodes that meet at that
    level; ``interconnect`` (``message_cost.INTERCONNECTS``) the figures of
    the network where neither gives them."""
    nodes = list(nodes)
    if not nodes:
        raise ValueError("a cluster needs at least one node")
    total = sum(int(topo.n_pes) for _, topo in nodes)
    if total > MAX_TREE_PES:
        raise ValueError(f"{len(nodes)} hosts make {total} PEs, more than rankmap handles "
                         f"({MAX_TREE_PES})")
    arities = [int(a) for a in network_arities]
    dists = [float(d) for d in network_distances]
    bandwidths = [float(b) for b in network_bandwidths]
    latencies = [float(x) for x in network_latencies]
    if any(a < 1 for a in arities):
        raise ValueError(f"network {':'.join(map(str, arities))}: arities must be >= 1")
    if any(d < 0 for d in dists):
        raise ValueError("network distances must be non-negative")
    if any(not 0 < b < float("inf") for b in bandwidths):
        raise ValueError("network bandwidths must be finite and > 0")
    if len(bandwidths) > max(len(arities) + 1, 1):
        raise ValueError(f"{len(bandwidths)} network bandwidths for {len(arities)} network levels")
    if any(not 0 <= x < 1 for x in latencies):
        raise ValueError("network latencies must be >= 0 and under a second")
    if len(latencies) > max(len(arities) + 1, 1):
        raise ValueError(f"{len(latencies)} network latencies for {len(arities)} network levels")
    if switches is not None and (arities or dists or bandwidths or latencies):
        raise ValueError("give network levels or switches, not both")
    hosts = [str(h) for h, _ in nodes]
    if switches is None and not arities and not dists and len(hosts) > 1:
        from .switches import XNAME, xname_switches

        if all(XNAME.match(h) for h in hosts):
            switches = xname_switches({h: h for h in hosts})
    if not dists:
        dists = [DEFAULT_NETWORK_DISTANCE * 4.0 ** i for i in range(len(arities) + 1)]
    elif len(dists) not in (len(arities), len(arities) + 1):
        raise ValueError(f"{len(arities)} network levels need {len(arities)} distances "
                         f"(or {len(arities) + 1} with a top level joining the groups), got {len(dists)}")
    seen: set[str] = set()
    seen_order: list[str] = []
    level: list[TreeNode] = []
    for host, topo in nodes:
        host = str(host)
        if host in seen:
            raise ValueError(f"host {host!r} listed twice in the cluster")
        seen.add(host)
        seen_order.append(host)
        root = _to_treenodes(topo)
        root.name = host
        level.append(root)
    if switches is not None:
        from .switches import switch_tree

        return _frozen(switch_tree(switches, list(zip(seen_order, level))), interconnect)
    for i, arity in enumerate(arities):
        kind = NETWORK_KINDS[i] if i < len(NETWORK_KINDS) else "network"
        _set_uplinks(level, bandwidths, i)
        latency = latencies[i] if i < len(latencies) else None
        level = [TreeNode(kind, dists[i], level[j:j + arity], latency=latency) for j in range(0, len(level), arity)]
    _set_uplinks(level, bandwidths, len(arities))
    if len(level) > 1:
        if len(dists) == len(arities):
            cap = int(np.prod(arities)) if arities else 1
            raise ValueError(f"{len(nodes)} nodes do not fit under network "
                             f"{':'.join(map(str, arities)) or '(none)'} (at most {cap}); "
                             "give one more network distance for the level joining the top groups")
        top = len(arities)
        level = [TreeNode("network", dists[top], level, latency=latencies[top] if top < len(latencies) else None)]
    return _frozen(level[0], interconnect)


def _frozen(root: TreeNode, interconnect: str | None) -> Topology:
    """The cluster's tree, its network given the interconnect's figures
    where the description gave none, levels without structure merged."""
    if interconnect is not None:
        from .message_cost import apply_interconnect

        apply_interconnect(root, interconnect)
    return Topology(merge_structureless_levels(root))


def _set_uplinks(children: list[TreeNode], bandwidths: list[float], level: int) -> None:
    """The links of ``children`` into network level ``level`` (when one joins them)."""
    if level < len(bandwidths) and len(children) > 1:
        for child in children:
            child.uplink = bandwidths[level]


def parse_network(arities: str, distances: str = "") -> tuple[list[int], list[float]]:
    """``"4:2"``, ``"100:400"`` -> ``([4, 2], [100.0, 400.0])`` (distances
    may be empty, or have one more entry than the arities)."""
    def numbers(text, what, cast):
        if not text:
            return []
        try:
            return [cast(x) for x in text.replace(",", ":").split(":")]
        except ValueError:
            raise ValueError(f"{what} {text!r}: expected numbers separated by ':' (e.g. 4:2)") from None
    arity, dist = numbers(arities, "network", int), numbers(distances, "network distances", float)
    if any(a < 1 for a in arity) or any(not 0 <= d < float("inf") for d in dist):
        raise ValueError(f"network {arities!r} distances {distances!r}: arities must be >= 1, "
                         "distances finite and >= 0")
    return arity, dist


# --------------------------------------------------------- host list input
def host_slot_pes(topology: Topology, slots: list[tuple[str, int | None]]) -> list[int]:
    """PEs for ``[(host, slots), ...]`` filled the way MPI binds ranks by
    default: host after host, on each host one PE per core before the second
    hardware thread of any core, cycling (oversubscribing) when slots exceed
    PEs; ``None`` slots = every PE of the host."""
    out: list[int] = []
    parent = topology.parent[topology.leaf_of_pe]
    smt = np.zeros(topology.n_pes, dtype=np.int64)
    for p in range(topology.n_pes):
        par = parent[p]
        if par >= 0 and "core" in topology.node_kind[par].split("+"):
            smt[p] = p - topology.leaf_start[par]
    for host, count in slots:
        pes = np.flatnonzero(topology.pe_host == host)
        if len(pes) == 0:
            raise ValueError(f"host {host!r} is not in the topology (hosts: "
                             f"{', '.join(topology.hosts()[:5])}...)")
        order = pes[np.lexsort((pes, smt[pes]))]
        n = len(order) if count is None else count
        out.extend(order[np.arange(n) % len(order)].tolist())
    return out


def cluster_of_hosts(node: Topology, slots: list[tuple[str, int | None]], network_arities=(),
                     network_distances=(), switches=None) -> Topology:
    """Every host of ``slots`` (``[(host, count or None), ...]``, e.g. from a
    hostfile or Slurm) as a copy of the one-node tree ``node``, under the
    network levels or switches; restricted to the counted slots when any
    host has a count (``None``: every PE of that host)."""
    topo = compose_cluster([(h, node) for h, _ in slots], network_arities, network_distances,
                           switches=switches)
    if all(c is None for _, c in slots):
        return topo
    return restrict_to_slots(topo, host_slot_pes(topo, slots))


# ------------------------------------------------------ cluster description
def cluster_from_xmls(xmls, hosts=None, network_arities=(), network_distances=(),
                      distances=None, switches=None) -> Topology:
    """Cluster of hwloc XML nodes.  ``xmls``: files or directories (all
    ``*.xml`` in them, sorted).  With ``hosts``, one XML serves every host or
    there is one XML per host; without, host names come from the XMLs."""
    from .hwloc import read_hwloc_xml

    files: list[Path] = []
    for x in xmls:
        p = Path(x)
        if p.is_dir():
            found = sorted(p.glob("*.xml"))
            if not found:
                raise ValueError(f"{p}: no *.xml file in this directory")
            files.extend(found)
        else:
            files.append(p)
    if not files:
        raise ValueError("no node XML given")
    trees = [read_hwloc_xml(f, distances) for f in files]
    if hosts is None:
        hosts = [t.hosts()[0] if len(t.hosts()) == 1 else f.name.split(".")[0]
                 for t, f in zip(trees, files)]
    elif len(trees) == 1:
        trees = trees * len(hosts)
    elif len(trees) != len(hosts):
        raise ValueError(f"{len(hosts)} hosts but {len(trees)} node XMLs (give one XML for all "
                         "hosts or one per host)")
    return compose_cluster(list(zip(hosts, trees)), network_arities, network_distances,
                           switches=switches)


def read_cluster_file(path) -> Topology:
    """Read a cluster description file (first word ``cluster``)::

        cluster
        xml compute.xml                  # default node XML, relative to this file
        hierarchy 16:2 distances 1:10    # or: default node as a hierarchy string
        nodes node[01-16]                # Slurm nodelist, uses the default node
        nodes bigmem[1-2] xml=bigmem.xml # nodes with their own XML
        nodes gpu[1-4] hierarchy=8:2 distances=1:10   # ... or their own hierarchy
        hostfile hosts.txt               # hosts and slots of an MPI hostfile
        network 4:2 distances 100:400    # nodes per switch, switches per rack ...
        network 4:2 distances 100:400 bandwidths 100gbit:400gbit  # ... and their links
        network 4:2 distances 100:400 latencies 1.2us:1.5us       # ... and a message's latency
        switches topology.conf           # or: Slurm's switches (topology.conf/.yaml, xnames)
        interconnect infiniband          # the network's figures where none are given
        level-distances core=2,package=20

    With a ``hostfile`` line the topology is restricted to its slots (in
    hostfile order, see ``host_slot_pes``).
    """
    from .hwloc import read_hwloc_xml

    path = Path(path)
    base = path.parent
    default_node: tuple | None = None
    members: list[tuple[str, tuple | None, int]] = []
    slots: list[tuple[str, int | None]] | None = None
    network_words: dict = {}
    switches = None
    level_distances = None
    started = False
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        tokens = raw.split("#", 1)[0].split()
        if not tokens:
            continue
        where = f"{path}:{lineno}"
        key, args = tokens[0], tokens[1:]
        if not started:
            if key != "cluster" or args:
                raise ValueError(f"{where}: a cluster file starts with the line 'cluster'")
            started = True
            continue
        if key in ("nodes", "hostfile"):
            opts = dict(a.split("=", 1) for a in args if "=" in a)
            plain = [a for a in args if "=" not in a]
        else:
            opts, plain = {}, args
        node = _node_source(where, base, opts)
        if key == "xml" and len(plain) == 1 and not opts:
            default_node = ("xml", base / plain[0])
        elif key == "hierarchy" and len(plain) in (1, 3) and not opts and (
                len(plain) == 1 or plain[1] == "distances"):
            default_node = _at(where, _hierarchy_source, plain[0], plain[2] if len(plain) == 3 else None)
        elif key == "nodes" and len(plain) == 1:
            members += [(h, node, lineno) for h in _at(where, expand_nodelist, plain[0])]
        elif key == "hostfile" and len(plain) == 1:
            entries = _at(where, parse_hostfile, base / plain[0])
            members += [(h, node, lineno) for h, _ in entries]
            slots = (slots or []) + entries
        elif key in NETWORK_LINES and not opts and _network_shape(key, plain):
            network_words.update(_at(where, _network_words, key, plain))
        elif key == "switches" and len(plain) == 1 and not opts:
            switches, switches_at = base / plain[0], where
        elif key == "level-distances" and len(plain) == 1 and not opts:
            level_distances = _at(where, normalize_overrides, plain[0])
        else:
            raise ValueError(f"{where}: cannot read {raw.strip()!r} (lines: xml FILE, hierarchy S "
                             "[distances D], nodes NODELIST [xml=FILE | hierarchy=S distances=D], "
                             "hostfile FILE, network A:B [distances D1:D2] [bandwidths B1:B2] "
                             "[latencies L1:L2], switches TOPOLOGY.CONF, interconnect KIND, "
                             "level-distances KIND=D,...)")
    if not members:
        raise ValueError(f"{path}: cluster file lists no node ('nodes NODELIST' or 'hostfile FILE')")
    if switches is not None and "network_arities" in network_words:
        raise ValueError(f"{path}: give 'network' or 'switches', not both")
    if switches is not None:
        from .switches import load_switches

        switches = _at(switches_at, load_switches, str(switches), [h for h, _, _ in members])
    cache: dict[tuple, Topology] = {}
    nodes = []
    for host, source, lineno in members:
        source = source or default_node
        if source is None:
            raise ValueError(f"{path}:{lineno}: no node description for host {host!r} (add "
                             "'xml FILE' or 'hierarchy S', or xml=FILE on the line)")
        if source not in cache:
            if source[0] == "xml":
                cache[source] = _at(f"{path}:{lineno}", read_hwloc_xml, source[1], level_distances)
            else:
                cache[source] = hierarchy_topology(source[1], source[2], host_prefix=None)
        nodes.append((host, cache[source]))
    try:
        topo = compose_cluster(nodes, switches=switches, **network_words)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return topo if slots is None else restrict_to_slots(topo, host_slot_pes(topo, slots))


def _known_interconnect(name: str):
    from .message_cost import interconnect

    return interconnect(name)


#: the lines of a cluster file that describe the network above the nodes (``network_description``)
NETWORK_LINES = ("network", "interconnect")


def network_description(text: str) -> dict:
    """``compose_cluster``'s network keywords from a cluster file's lines
    that describe the network, ``network A:B [distances D] [bandwidths B]
    [latencies L]`` and ``interconnect KIND``, separated by ``;`` or new
    lines (how a site or an emulated cluster tells the profiler what links
    its ranks ran on: ``RANKMAP_NETWORK``); ValueError naming a bad line."""
    out: dict = {}
    for line in text.replace(";", "\n").splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if not _network_shape(words[0], words[1:]):
            raise ValueError(f"cannot read {line.strip()!r} (network A:B [distances D1:D2] "
                             "[bandwidths B1:B2] [latencies L1:L2], or interconnect KIND)")
        out.update(_network_words(words[0], words[1:]))
    return out


def _network_shape(key: str, plain: list[str]) -> bool:
    """Whether words are a ``network`` or ``interconnect`` line (values unread)."""
    if key == "interconnect":
        return len(plain) == 1
    return key == "network" and len(plain) in (1, 3, 5, 7) and _pairs_of(plain[1:]) is not None


def _network_words(key: str, plain: list[str]) -> dict:
    """A ``network`` or ``interconnect`` line's words (``_network_shape``)
    as ``compose_cluster`` keywords; ValueError for a bad value."""
    if key == "interconnect":
        _known_interconnect(plain[0])
        return {"interconnect": plain[0]}
    words = _pairs_of(plain[1:])
    arities, distances = parse_network(plain[0], words.get("distances", ""))
    return {"network_arities": arities, "network_distances": distances,
            "network_bandwidths": parse_bandwidths(words["bandwidths"]) if "bandwidths" in words else [],
            "network_latencies": parse_latencies(words["latencies"]) if "latencies" in words else []}


def _pairs_of(words: list[str]) -> dict | None:
    """``["distances", D, "bandwidths", B, "latencies", L]`` -> ``{"distances": D, ...}``;
    None where the words are not such pairs."""
    pairs = dict(zip(words[::2], words[1::2]))
    if len(words) % 2 or len(pairs) != len(words) // 2 or set(pairs) - {"distances", "bandwidths", "latencies"}:
        return None
    return pairs


def _node_source(where: str, base: Path, opts: dict) -> tuple | None:
    """What ``xml=FILE`` or ``hierarchy=S distances=D`` on a line describe."""
    unknown = set(opts) - {"xml", "hierarchy", "distances"}
    if unknown:
        raise ValueError(f"{where}: unknown option {sorted(unknown)[0]}= (xml=, hierarchy=, distances=)")
    if "xml" in opts and len(opts) > 1:
        raise ValueError(f"{where}: give xml= or hierarchy=, not both")
    if "xml" in opts:
        return ("xml", base / opts["xml"])
    if "distances" in opts and "hierarchy" not in opts:
        raise ValueError(f"{where}: distances= needs hierarchy=")
    if "hierarchy" in opts:
        return _at(where, _hierarchy_source, opts["hierarchy"], opts.get("distances"))
    return None


def _hierarchy_source(hierarchy: str, distances: str | None) -> tuple:
    arities, dists = parse_hierarchy(hierarchy, distances)
    return ("hierarchy", tuple(arities), tuple(dists))


def _at(where: str, fn, *args):
    try:
        return fn(*args)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
