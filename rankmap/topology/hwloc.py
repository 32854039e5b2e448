"""Read hwloc XML exports (``lstopo --of xml``) into a machine Topology.

All formats real machines produce are read:

* hwloc 1.x (no ``version`` attribute): ``Socket``, ``Cache`` objects with a
  ``depth`` and ``cache_type``, NUMANode objects inside the CPU tree,
  ``online_cpuset``/``allowed_cpuset`` on the root, ``System`` roots holding
  several machines;
* hwloc 2.x (``version="2.0"``) and 3.x (``version="3.0"``): ``Package``,
  ``Die``, ``L3Cache``..., NUMA nodes as memory children of CPU objects;
* hwloc topology diffs (``<topologydiff refname=...>``, as ``hwloc-diff``
  writes for identical cluster nodes): the reference file next to the diff is
  read and the diff's host name applied (a diff cannot change the CPU tree).

Kept levels: machine, package, die, NUMA domain, L3, L2, core, PU and groups
(plus unknown object types that contain PUs, as groups); L1/L1i/L4/L5 and
memory-side caches, I/O and Misc objects are dropped, one-to-one levels are
merged (see ``levels``).  Only PUs in the root's ``cpuset``,
``allowed_cpuset`` and ``online_cpuset`` (where present) become PEs; every PE
keeps its PU OS index.  Each object's PU set comes from the PUs nested in it,
so the tree does not depend on the cpuset attributes being consistent.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from ..limits import check_readable
from .cpuset_tree import CpuObject, build_machine_tree
from .levels import canonical_kind, normalize_overrides
from .tree import Topology

_KIND_OF_TYPE = {"Machine": "machine", "System": "system", "Package": "package",
                 "Socket": "package", "Die": "die", "Group": "group", "NUMANode": "numa",
                 "Core": "core", "L2Cache": "L2", "L3Cache": "L3"}
# objects that never become levels (their PUs, if any, still count for the parent)
_TRANSPARENT = {"L1Cache", "L1iCache", "L2iCache", "L3iCache", "L4Cache", "L5Cache",
                "MemCache", "Bridge", "PCIDev", "OSDev", "Misc"}
_MACHINE_TYPES = {"Machine", "System"}
_IO_TYPES = {"Bridge", "PCIDev", "OSDev"}
_V1_CACHE_KIND = {2: "L2", 3: "L3"}


def parse_bitmap(text: str) -> int:
    """hwloc bitmap string -> int bitmask.

    ``"0x000000ff,,0x00000003"``: 32-bit words, most significant first, an
    empty word is zero; a leading ``0xf...f`` word means every higher bit is
    set, returned as a negative int (two's complement: infinitely many ones).
    """
    words = text.strip().split(",")
    value = 0
    infinite = False
    for i, word in enumerate(words):
        word = word.strip()
        if i == 0 and word.lower() == "0xf...f":
            infinite = True
            continue
        value = (value << 32) | (int(word, 16) if word else 0)
    if infinite:
        value |= -1 << (32 * (len(words) - 1))
    return value


def _parse_bitmap_attr(elem, attr: str, label: str) -> int | None:
    text = elem.get(attr)
    if text is None:
        return None
    try:
        return parse_bitmap(text)
    except ValueError:
        raise ValueError(f"{label}:{elem.sourceline}: bad {attr} {text!r} "
                         "(expected an hwloc bitmap like 0x000000ff,0x00000003)") from None


def _gp(elem) -> int | None:
    text = elem.get("gp_index")
    return int(text) if text is not None and text.isdigit() else None


def _info(elem, name: str) -> str | None:
    for child in elem:
        if child.tag == "info" and child.get("name") == name:
            return child.get("value")
    return None


def read_hwloc_xml(source, distances=None) -> Topology:
    """Topology of an hwloc XML export.

    ``source``: a path, or the XML itself as bytes or str.  ``distances``
    overrides the default distance model per level kind or merged label,
    e.g. ``{"core": 2, "package": 20}`` or ``"core=2,package=20"``.  The
    machine node is named after the XML's HostName (else the file name, else
    ``localhost``).
    """
    overrides = normalize_overrides(distances)
    data, label, path = _source_bytes(source)
    return _read(data, label, path, overrides)


def _source_bytes(source) -> tuple[bytes, str, Path | None]:
    if isinstance(source, bytes):
        return source, "<hwloc xml>", None
    if isinstance(source, str) and source.lstrip().startswith("<"):
        return source.encode("utf-8"), "<hwloc xml>", None
    path = Path(os.fspath(source))
    check_readable(path)
    return path.read_bytes(), str(path), path


def _parse_document(data: bytes, label: str):
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True,
                             remove_comments=True, remove_pis=True)
    try:
        return etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        line = exc.lineno if exc.lineno else "?"
        # libxml2 ends its message with ", line L, column C" on a line of its own
        msg = " ".join(re.sub(r",\s*line \d+, column \d+\s*$", "", exc.msg or "").split())
        raise ValueError(f"{label}:{line}: malformed XML: {msg or 'cannot parse'}") from None


def _read(data: bytes, label: str, path: Path | None, overrides) -> Topology:
    doc = _parse_document(data, label)
    if doc.tag == "topologydiff":
        return _read_diff(doc, label, path, overrides)
    if doc.tag != "topology":
        raise ValueError(f"{label}:{doc.sourceline}: not an hwloc XML topology "
                         f"(root element <{doc.tag}>, expected <topology>)")
    default_name = path.name.split(".")[0] if path is not None else "localhost"
    return _topology_of(doc, label, default_name, None, overrides)


def _read_diff(doc, label: str, path: Path | None, overrides) -> Topology:
    ref = doc.get("refname")
    if path is None or not ref:
        raise ValueError(f"{label}: hwloc topology diff needs its reference XML "
                         "(give the diff as a file next to the file named in refname)")
    hostname = None
    for d in doc.iter("diff"):
        if d.get("type") != "0":
            raise ValueError(f"{label}:{d.sourceline}: topology diff too complex to apply "
                             f"(type {d.get('type')!r}); export this node in full")
        if d.get("obj_depth") == "0" and d.get("obj_attr_name") == "HostName":
            hostname = d.get("obj_attr_newvalue")
    if Path(ref).is_absolute() or ".." in Path(ref).parts:
        raise ValueError(f"{label}: refname {ref!r} must name a file beside the diff (a relative "
                         "path inside its directory)")
    ref_path = path.parent / ref
    if not ref_path.is_file():
        raise ValueError(f"{label}: reference topology {ref_path} of this diff not found")
    ref_doc = _parse_document(ref_path.read_bytes(), str(ref_path))
    if ref_doc.tag != "topology":
        raise ValueError(f"{label}: reference {ref_path} is not a full hwloc topology "
                         "(diffs of diffs are not supported)")
    return _topology_of(ref_doc, str(ref_path), path.name.split(".")[0], hostname, overrides)


def _topology_of(doc, label: str, default_name: str, hostname: str | None, overrides) -> Topology:
    root_obj = next((c for c in doc if c.tag == "object"), None)
    if root_obj is None:
        raise ValueError(f"{label}:{doc.sourceline}: hwloc XML without a root <object>")
    walker = _Walker(label)
    walker.walk(root_obj, None)
    if not walker.pu_os_index:
        raise ValueError(f"{label}: no allowed and online PU in this topology")
    root_type = root_obj.get("type", "Machine")
    root_name = (hostname or _info(root_obj, "HostName") or _info(doc, "HostName")
                 or default_name)
    machines = [o for o in walker.objects if o.kind == "machine"]
    for i, obj in enumerate(machines):
        if obj.name is None:
            obj.name = f"{root_name}-{i}"
    root_kind = "system" if root_type == "System" else "machine"
    try:
        return build_machine_tree(walker.objects, walker.pu_os_index, overrides,
                                  root_kind=root_kind, root_name=root_name)
    except ValueError as exc:
        raise ValueError(f"{label}: {exc}") from None


def _kind(elem, label: str) -> str | None:
    """Level kind of an hwloc object, or None when it is not a level."""
    typ = elem.get("type")
    if typ is None:
        raise ValueError(f"{label}:{elem.sourceline}: <object> without a type")
    if typ in _KIND_OF_TYPE:
        return _KIND_OF_TYPE[typ]
    if typ == "Cache":
        if elem.get("cache_type") == "2":
            return None
        try:
            return _V1_CACHE_KIND.get(int(elem.get("depth", "0")))
        except ValueError:
            raise ValueError(f"{label}:{elem.sourceline}: Cache depth "
                             f"{elem.get('depth')!r} is not a number") from None
    if typ in _TRANSPARENT or typ == "PU":
        return None
    return canonical_kind(typ)


@dataclass
class IoDevice:
    """A PCI device found under a CPU object: its OS devices' names and
    hwloc ids, and the PU slots of the CPU object it hangs off (its
    locality)."""

    busid: str
    gp_index: int | None
    os_devices: list[tuple[str, int | None]]  # (name, gp_index)
    locality: int = 0
    sourceline: int | None = None


class _Walker:
    """One pass over the object elements: collects level objects with their
    PU slot masks and the allowed PUs (slot -> OS index), and the PCI
    devices with their locality."""

    def __init__(self, label: str):
        self.label = label
        self.objects: list[CpuObject] = []
        self.pu_os_index: dict[int, int] = {}
        self.seen_os_index: set[int] = set()
        self.is_root = True
        self.devices: list[IoDevice] = []
        self._io_below: list[list[IoDevice]] = [[]]  # per open CPU object: its I/O devices

    def walk(self, elem, allowed: int | None) -> int:
        label = self.label
        typ = elem.get("type")
        if self.is_root or typ in _MACHINE_TYPES:
            allowed = self._allowed(elem, allowed)
        if typ == "Machine":  # OS indexes are unique within one machine
            self.seen_os_index = set()
        self.is_root = False
        if typ == "PU":
            return self._pu(elem, allowed)
        if typ in _IO_TYPES:
            self._io(elem)
            return 0
        kind = _kind(elem, label)
        mask = 0
        memory_children = []
        self._io_below.append([])
        for child in elem:
            if child.tag != "object":
                continue
            child_mask = self.walk(child, allowed)
            if child_mask == 0 and child.get("type") == "NUMANode":
                memory_children.append(child)
            mask |= child_mask
        for device in self._io_below.pop():
            device.locality = mask
        for numa in memory_children:
            self._memory_numa(numa, mask)
        if kind is not None and mask:
            name = _info(elem, "HostName") if typ == "Machine" else None
            self.objects.append(CpuObject(kind, mask, name))
        return mask

    def _io(self, elem) -> None:
        """Bridges, PCI and OS devices hold no PUs; the PCI devices are
        kept for the nearest CPU object above them (their locality), each
        with its OS devices, nested ones too (Level Zero's subdevices
        ``ze0.1`` sit inside ``ze0``)."""
        for pci in elem.iter("object"):
            if pci.get("type") != "PCIDev":
                continue
            os_devices = [(d.get("name") or "", _gp(d)) for d in pci.iter("object")
                          if d.get("type") == "OSDev"]
            device = IoDevice(pci.get("pci_busid") or "", _gp(pci), os_devices,
                              sourceline=pci.sourceline)
            self.devices.append(device)
            self._io_below[-1].append(device)

    def _allowed(self, elem, allowed: int | None) -> int | None:
        for attr in ("cpuset", "allowed_cpuset", "online_cpuset"):
            bits = _parse_bitmap_attr(elem, attr, self.label)
            if bits is not None:
                allowed = bits if allowed is None else allowed & bits
        return allowed

    def _pu(self, elem, allowed: int | None) -> int:
        text = elem.get("os_index")
        try:
            os_index = int(text)
        except (TypeError, ValueError):
            raise ValueError(f"{self.label}:{elem.sourceline}: PU without a valid os_index "
                             f"({text!r})") from None
        if not 0 <= os_index < 1 << 24:
            raise ValueError(f"{self.label}:{elem.sourceline}: PU os_index {os_index} is out of "
                             "range")
        if os_index in self.seen_os_index:
            raise ValueError(f"{self.label}:{elem.sourceline}: two PUs of one machine have "
                             f"os_index {os_index}")
        self.seen_os_index.add(os_index)
        if allowed is not None and not (allowed >> os_index) & 1:
            return 0
        slot = len(self.pu_os_index)
        self.pu_os_index[slot] = os_index
        return 1 << slot

    def _memory_numa(self, numa, parent_mask: int) -> None:
        """A NUMA node attached as memory child (hwloc 2+): its CPUs are the
        parent's PUs in its cpuset (all of them when it has none)."""
        bits = _parse_bitmap_attr(numa, "cpuset", self.label)
        if bits is None:
            mask = parent_mask
        else:
            mask = 0
            rest = parent_mask
            while rest:
                low = rest & -rest
                slot = low.bit_length() - 1
                if (bits >> self.pu_os_index[slot]) & 1:
                    mask |= low
                rest ^= low
        if mask:
            self.objects.append(CpuObject("numa", mask))
