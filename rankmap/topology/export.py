"""Write a machine back out: one node as hwloc XML, a cluster as a cluster
file (see ``cluster.read_cluster_file``) with one XML per distinct node.

The XML uses hwloc's 1.x layout (NUMA nodes inside the CPU tree, ``Cache``
objects with a depth), which hwloc 1.x-3.x and rankmap's reader all import;
reading it back gives the same tree, PU OS indices and host name.  Distances
are not part of hwloc XML: a reader applies its default model again (or the
``--level-distances`` it is given).
"""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from .tree import Topology, TreeNode

_ELEMENT = {"machine": ("Machine", {}), "system": ("System", {}), "package": ("Package", {}),
            "die": ("Die", {}), "numa": ("NUMANode", {}), "core": ("Core", {}),
            "L3": ("Cache", {"depth": "3", "cache_type": "0"}),
            "L2": ("Cache", {"depth": "2", "cache_type": "0"})}


def _bitmap(os_indices) -> str:
    """hwloc bitmap text: 32-bit hex words, most significant first."""
    mask = 0
    for i in os_indices:
        mask |= 1 << int(i)
    words = []
    while True:
        words.append(f"0x{mask & 0xFFFFFFFF:08x}")
        mask >>= 32
        if not mask:
            break
    return ",".join(reversed(words))


def hwloc_xml(topology: Topology, host: str | None = None) -> str:
    """hwloc XML of a one-host topology (PEs without an OS index get their
    PE number)."""
    hosts = topology.hosts()
    if len(hosts) > 1:
        raise ValueError(f"hwloc XML describes one node; this machine has {len(hosts)} hosts "
                         "(write a cluster file)")
    host = host or hosts[0]
    os_index = [int(o) if o >= 0 else pe for pe, o in enumerate(topology.pe_os_index.tolist())]
    doc = etree.Element("topology")
    root_parts = topology.node_kind[0].split("+")
    if root_parts[0] in ("machine", "system"):
        top = _append(doc, topology, 0, os_index)
    else:  # a hierarchy's root: wrap it in the machine hwloc needs
        top = etree.SubElement(doc, "object", type="Machine", os_index="0",
                               cpuset=_bitmap(os_index))
        _append(top, topology, 0, os_index)
    etree.SubElement(top, "info", name="HostName", value=host)
    top.insert(0, top[-1])  # info elements come first
    body = etree.tostring(doc, pretty_print=True, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc.dtd">\n' + body


def _append(parent, topology: Topology, node: int, os_index: list[int]):
    """Elements for ``node`` (one per part of a merged kind, outer first)
    under ``parent``; returns the outermost."""
    pes = range(int(topology.leaf_start[node]), int(topology.leaf_stop[node]))
    cpuset = _bitmap(os_index[p] for p in pes)
    parts = topology.node_kind[node].split("+")
    leaf = topology.leaf_start[node] + 1 == topology.leaf_stop[node] and not len(topology.children(node))
    if leaf and parts[-1] in ("pu", "pe", "slot"):
        parts = parts[:-1]
    outer = elem = parent
    for i, part in enumerate(parts):
        typ, extra = _ELEMENT.get(part, ("Group", {}))
        elem = etree.SubElement(elem, "object", type=typ, cpuset=cpuset, **extra)
        if i == 0:
            outer = elem
    if leaf:
        pu = etree.SubElement(elem, "object", type="PU", os_index=str(os_index[int(topology.leaf_start[node])]),
                              cpuset=cpuset)
        return outer if parts else pu
    for child in topology.children(node).tolist():
        _append(elem, topology, child, os_index)
    return outer


def write_topology(topology: Topology, path) -> list[Path]:
    """Write ``topology`` to ``path``: hwloc XML for one host; for several, a
    cluster file there plus ``<stem>.<host>.xml`` per distinct node tree
    (network levels above the hosts must be uniform).  Returns the files."""
    path = Path(path)
    hosts = topology.hosts()
    if len(hosts) == 1:
        path.write_text(hwloc_xml(topology), encoding="utf-8")
        return [path]
    roots = _host_roots(topology)
    arities, distances = _network_levels(topology, roots)
    written, xml_of_shape, lines = [path], {}, ["cluster"]
    for host, node in zip(hosts, roots):
        sub = _subtree(topology, node)
        shape = hwloc_xml(sub, "HOST")
        if shape not in xml_of_shape:
            name = f"{path.stem}.{host}.xml"
            (path.parent / name).write_text(hwloc_xml(sub, host), encoding="utf-8")
            written.append(path.parent / name)
            xml_of_shape[shape] = name
        lines.append(f"nodes {host} xml={xml_of_shape[shape]}")
    if arities:
        lines.append(f"network {':'.join(map(str, arities))} distances "
                     f"{':'.join(f'{d:g}' for d in distances)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return written


def _host_roots(topology: Topology) -> list[int]:
    """Node id of each host's subtree root, in host order."""
    roots = []
    for n in range(topology.n_nodes):
        name = topology.node_name[n]
        if name is not None and (topology.parent[n] < 0 or not _named_above(topology, n)):
            roots.append(n)
    return roots


def _named_above(topology: Topology, n: int) -> bool:
    p = topology.parent[n]
    while p >= 0:
        if topology.node_name[p] is not None:
            return True
        p = topology.parent[p]
    return False


def _subtree(topology: Topology, node: int) -> Topology:
    """The host below ``node`` as a topology of its own."""
    def copy(n: int) -> TreeNode:
        kids = [copy(c) for c in topology.children(n).tolist()]
        pe = int(topology.leaf_start[n])
        os_index = int(topology.pe_os_index[pe]) if not kids and topology.pe_os_index[pe] >= 0 else None
        return TreeNode(topology.node_kind[n], float(topology.node_distance[n]), kids, os_index,
                        topology.node_name[n])

    return Topology(copy(node))


def _network_levels(topology: Topology, roots: list[int]) -> tuple[list[int], list[float]]:
    """Arities and distances of the levels above the hosts, innermost first;
    ValueError when they are not uniform (a cluster file cannot say so)."""
    depth = {int(topology.node_depth[r]) for r in roots}
    if len(depth) != 1:
        raise ValueError("cannot write this cluster: hosts at different depths of the tree")
    arities, distances = [], []
    level = roots
    for _ in range(int(depth.pop())):
        parents = list(dict.fromkeys(int(topology.parent[n]) for n in level))
        counts = {int(len(topology.children(p))) for p in parents}
        dists = {float(topology.node_distance[p]) for p in parents}
        if len(counts) != 1 or len(dists) != 1:
            raise ValueError("cannot write this cluster: the network levels above the hosts are "
                             "not uniform (a cluster file gives one arity and distance per level)")
        arities.append(counts.pop())
        distances.append(dists.pop())
        level = parents
    return arities, distances
