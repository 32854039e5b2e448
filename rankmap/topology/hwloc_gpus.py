"""The GPUs of an hwloc XML as a GPU node (``links.gpu_node``).

hwloc lists a GPU as a PCI device with OS devices named after the runtime
that sees it: ``cudaN`` (CUDA), ``nvmlN`` (NVML, PCI order), ``rsmiN``
(ROCm SMI: ROCR_VISIBLE_DEVICES), ``zeN`` (Level Zero), ``openclNdM``.  One
PE per GPU; its ``device`` is the first of rsmi, nvml, cuda, ze found
(the variable ``rankmap-bind`` sets); its CPUs are the cores of the CPU
object the device hangs off, shared out evenly (in PCI order) among the GPUs
that hang off the same object, as mpibind does.

A partitioned GPU is one PE per partition (``partitions``): an AMD MI300 in
TPX or CPX mode is several ``rsmiN`` under one PCI device (N the index ROCm
gives the partition), an Intel GPU in Level Zero's FLAT mode several ``zeN``,
in COMPOSITE mode ``zeN`` with its stacks ``zeN.M`` inside (device
``ze:N.M``, as ZE_AFFINITY_MASK names it).  Partitions of one PCI device
are nearer each other than the host path or any link makes them: at most
``partitions.package_distance`` of the device's local bandwidth (the
diagonal hwloc writes in ``XGMIBandwidth``).

Links: a bandwidth matrix hwloc exports (``<distances2 ... name=
"XGMIBandwidth">`` between OS devices, ``<distances2hetero ...
name="NVLinkBandwidth">`` between GPUs, NVSwitches and CPUs; MB/s)
becomes the node's distances (``links.gpu_distances``: flow through
switches, hops over GPUs); without one, the ``XGMIPeers`` an AMD GPU lists
(hwloc 2) are joined by xGMI at the bandwidth hwloc's ROCm SMI backend
assumes for such a link (``XGMI_PEER_BANDWIDTH``); GPUs no link joins talk
through the host, within one CPU package or across two.  The extra
cost to leave the node is each GPU's distance to the nearest GPU sharing
a NIC's CPU object (0 where a NIC is its own).
"""

from __future__ import annotations

import re

import numpy as np

from dataclasses import dataclass

from .hwloc import IoDevice, _info, _parse_document, _source_bytes, _Walker
from .links import CROSS_PACKAGE_DISTANCE, HOST_PATH_DISTANCE, gpu_distances, gpu_node
from .partitions import package_distance, share_out
from .tree import Topology

_GPU_NAME = re.compile(r"^(rsmi|nvml|cuda|ze|opencl)(\d+)(?:d(\d+)|\.(\d+))?$")
_DEVICE_KIND = {"rsmi": "rocr", "nvml": "nvml", "cuda": "cuda", "ze": "ze"}
_PREFERENCE = ("rsmi", "nvml", "cuda", "ze", "opencl")
_NIC_NAME = re.compile(r"^(hsi|cxi|mlx\d*_|ib|hfi|ib\w*|bnxt_re|efa)")
#: GB/s hwloc's ROCm SMI backend gives an xGMI link between peers
XGMI_PEER_BANDWIDTH = 100.0


@dataclass
class GpuPe:
    """One GPU, or one partition of a partitioned GPU: its PCI device, the
    hwloc ids (gp_index) of the OS devices that stand for it, its OS device
    names and the device a rank on it is given."""

    pci: IoDevice
    gps: list[int]
    names: list[str]
    device: str | None

    @property
    def locality(self) -> int:
        return self.pci.locality


def read_hwloc_gpus(source, host: str | None = None) -> Topology:
    """One node whose PEs are the GPUs (or their partitions) of an hwloc
    XML (path, bytes or str)."""
    data, label, path = _source_bytes(source)
    doc = _parse_document(data, label)
    if doc.tag != "topology":
        raise ValueError(f"{label}:{doc.sourceline}: not an hwloc XML topology with GPUs "
                         f"(root element <{doc.tag}>)")
    root = next((c for c in doc if c.tag == "object"), None)
    if root is None:
        raise ValueError(f"{label}:{doc.sourceline}: hwloc XML without a root <object>")
    walker = _Walker(label)
    walker.walk(root, None)
    gpus = gpu_pes(walker.devices)
    if not gpus:
        raise ValueError(f"{label}: no GPU in this topology (hwloc lists GPUs as OS devices cuda*, "
                         "nvml*, rsmi*, ze*, opencl*: export the node with its I/O devices, "
                         "lstopo --of xml)")
    host = host or _info(root, "HostName") or _info(doc, "HostName") or (
        path.name.split(".")[0] if path is not None else None)
    host_distance = _host_distances(walker, gpus)
    distance = _link_distances(doc, root, label, gpus, host_distance)
    nics = [d.locality for d in walker.devices
            if any(_NIC_NAME.match(name) for name, _ in d.os_devices)]
    egress = None
    if nics:
        near = [i for i, g in enumerate(gpus) if g.locality in nics]
        egress = distance[:, near].min(axis=1) if near else np.full(len(gpus), HOST_PATH_DISTANCE)
        egress[near] = 0.0
    parted = sum(1 for i, g in enumerate(gpus) if i == 0 or g.pci is not gpus[i - 1].pci)
    what = f"{len(gpus)} GPUs" if parted == len(gpus) else f"{len(gpus)} partitions of {parted} GPUs"
    return gpu_node([g.device for g in gpus], _cpus(walker, gpus), distance, egress,
                    f"{label} ({what})", host)


def gpu_bus_ids(source) -> list[tuple[str | None, str]]:
    """``(device, PCI bus id)`` of each GPU PE of an hwloc XML, in PE
    order (partitions of one GPU share its bus id): how a GPU a rank
    opened, known by its bus id, is found on the node."""
    data, label, _path = _source_bytes(source)
    doc = _parse_document(data, label)
    root = next((c for c in doc if c.tag == "object"), None)
    if doc.tag != "topology" or root is None:
        return []
    walker = _Walker(label)
    walker.walk(root, None)
    return [(g.device, g.pci.busid) for g in gpu_pes(walker.devices)]


def gpu_pes(devices: list[IoDevice]) -> list[GpuPe]:
    """The GPU PEs of the PCI devices, in PCI order: one per GPU, or one
    per partition where a GPU's preferred runtime lists several OS devices
    (module docstring), partitions in the runtime's order."""
    out = []
    for pci in sorted(devices, key=lambda d: d.busid):
        found = []   # (runtime, index, stack, name, gp)
        for name, gp in pci.os_devices:
            m = _GPU_NAME.match(name)
            if m:
                stack = m.group(4) if m.group(1) == "ze" else None
                found.append((m.group(1), int(m.group(2)), None if stack is None else int(stack), name, gp))
        if not found:
            continue
        runtime = min((f[0] for f in found), key=_PREFERENCE.index)
        mine = sorted((f for f in found if f[0] == runtime), key=lambda f: (f[1], f[2] or 0))
        stacks = [f for f in mine if f[2] is not None]
        parts = stacks or [f for f in mine if f[2] is None]
        kind = _DEVICE_KIND.get(runtime)
        if len(parts) == 1:   # a whole GPU: every OS device of it stands for it
            f = parts[0]
            out.append(GpuPe(pci, [gp for _, gp in pci.os_devices if gp is not None] +
                             ([pci.gp_index] if pci.gp_index is not None else []),
                             [n for n, _ in pci.os_devices], _device_name(kind, f)))
            continue
        for f in parts:
            out.append(GpuPe(pci, [f[4]] if f[4] is not None else [], [f[3]], _device_name(kind, f)))
    return out


def _device_name(kind: str | None, found) -> str | None:
    if kind is None:
        return None
    _runtime, index, stack, _name, _gp = found
    return f"{kind}:{index}" if stack is None else f"{kind}:{index}.{stack}"


def _cpus(walker: _Walker, gpus: list[GpuPe]) -> list[list[int]]:
    """Each GPU's CPUs: the cores of its CPU object, shared out in PCI order
    (partitions in the runtime's order) among the GPUs hanging off that
    object."""
    cores = sorted((o.mask for o in walker.objects if o.kind == "core"), key=lambda m: m & -m)
    out: list[list[int]] = [[] for _ in gpus]
    for locality in dict.fromkeys(g.locality for g in gpus):
        sharing = [i for i, g in enumerate(gpus) if g.locality == locality]
        units = [m for m in cores if m & locality == m]
        covered = 0
        for m in units:
            covered |= m
        units += [1 << s for s in range(locality.bit_length()) if (locality >> s) & 1 and not (covered >> s) & 1]
        units.sort(key=lambda m: m & -m)
        pus = [[walker.pu_os_index[s] for s in range(m.bit_length()) if (m >> s) & 1] for m in units]
        for i, share in zip(sharing, share_out(pus, len(sharing))):
            out[i] = share
    return out


def _host_distances(walker: _Walker, gpus: list[GpuPe]) -> np.ndarray:
    """GPU x GPU cost through the host: ``HOST_PATH_DISTANCE`` when one CPU
    package holds both GPUs' objects, ``CROSS_PACKAGE_DISTANCE`` else."""
    packages = [o.mask for o in walker.objects if o.kind == "package"]
    k = len(gpus)
    out = np.full((k, k), CROSS_PACKAGE_DISTANCE if len(packages) > 1 else HOST_PATH_DISTANCE)
    for a in range(k):
        for b in range(k):
            both = gpus[a].locality | gpus[b].locality
            if any(m & both == both for m in packages):
                out[a, b] = HOST_PATH_DISTANCE
    np.fill_diagonal(out, 0.0)
    return out


def _link_distances(doc, root, label: str, gpus: list[GpuPe], host: np.ndarray) -> np.ndarray:
    """The node's distances from the first bandwidth matrix hwloc exported
    between its GPUs (and switches), else from the xGMI peers the GPUs
    list, else the host path alone; partitions of one GPU at most the
    package distance of its local bandwidth."""
    rows_of: dict[int, list[int]] = {}   # OSDev or PCIDev gp_index -> GPU rows
    for i, g in enumerate(gpus):
        for gp in dict.fromkeys(g.gps + ([g.pci.gp_index] if g.pci.gp_index is not None else [])):
            rows_of.setdefault(gp, []).append(i)
    local = np.zeros(len(gpus))
    distance = None
    for elem in doc:
        if elem.tag not in ("distances2", "distances2hetero"):
            continue
        name = elem.get("name") or ""
        kind = int(elem.get("kind", "0")) if (elem.get("kind") or "0").isdigit() else 0
        if not (kind & 8 or name.endswith("Bandwidth")):
            continue
        graph = _bandwidth_graph(elem, label, rows_of, len(gpus))
        if graph is not None:
            bandwidth, is_gpu, local = graph
            distance = gpu_distances(bandwidth, is_gpu, host)
            break
    if distance is None:
        peers = _peer_bandwidth(root, gpus)
        distance = host if peers is None else gpu_distances(peers, None, host)
    for i, g in enumerate(gpus):
        for j in range(i + 1, len(gpus)):
            if gpus[j].pci is g.pci:
                near = package_distance(max(local[i], local[j]) or None)
                distance[i, j] = distance[j, i] = min(distance[i, j], near)
    return distance


def _peer_bandwidth(root, gpus: list[GpuPe]) -> np.ndarray | None:
    """GPU x GPU bandwidth (GB/s) of the ``XGMIPeers`` the GPUs' OS devices
    list, or None when none does."""
    row_of_name = {name: i for i, g in enumerate(gpus) for name in g.names}
    bandwidth = np.zeros((len(gpus), len(gpus)))
    found = False
    for osdev in root.iter("object"):
        if osdev.get("type") != "OSDev" or osdev.get("name") not in row_of_name:
            continue
        a = row_of_name[osdev.get("name")]
        for peer in (_info(osdev, "XGMIPeers") or "").split():
            b = row_of_name.get(peer)
            if b is not None and b != a:
                bandwidth[a, b] = bandwidth[b, a] = XGMI_PEER_BANDWIDTH
                found = True
    return bandwidth if found else None


def _bandwidth_graph(elem, label: str, rows_of: dict[int, list[int]], k: int):
    """``(bandwidth GB/s over GPUs then switches, is_gpu, local GB/s of
    each GPU)`` of one hwloc distance matrix, or None when it joins no two
    GPUs.  ``local`` is the matrix's diagonal (hwloc writes a GPU's memory
    bandwidth there), 0 where it has none."""
    tokens = " ".join(i.text or "" for i in elem if i.tag == "indexes").split()
    values = " ".join(v.text or "" for v in elem if v.tag == "u64values").split()
    n = len(tokens)
    hetero = elem.tag == "distances2hetero"
    if elem.tag == "distances2" and elem.get("type") != "OSDev":
        return None
    if elem.tag == "distances2" and elem.get("indexing") not in (None, "gp"):
        return None
    try:
        matrix = np.asarray([float(v) for v in values], dtype=np.float64).reshape(n, n) / 1000.0
    except ValueError:
        raise ValueError(f"{label}:{elem.sourceline}: distance matrix {elem.get('name')!r} does "
                         f"not hold {n} x {n} numbers") from None
    vertex: list[list[int]] = []   # matrix row -> graph vertices (GPU rows, a switch, or none: host)
    switches = 0
    for token in tokens:
        typ, _, gp = token.rpartition(":") if hetero else ("OSDev", "", token)
        gp_index = int(gp) if gp.isdigit() else None
        if gp_index in rows_of:
            vertex.append(rows_of[gp_index])
        elif typ == "PCIDev":      # a switch (NVSwitch) between GPUs
            vertex.append([k + switches])
            switches += 1
        else:                      # CPUs and memory: the host path, which the tree models
            vertex.append([])
    bandwidth = np.zeros((k + switches, k + switches))
    local = np.zeros(k)
    for a, va in enumerate(vertex):
        for b, vb in enumerate(vertex):
            for x in va:
                if a == b:   # the diagonal: a GPU's own memory, shared by its partitions
                    if x < k:
                        local[x] = max(local[x], matrix[a, a])
                    continue
                for y in vb:
                    if x != y:
                        bandwidth[x, y] = max(bandwidth[x, y], matrix[a, b], matrix[b, a])
    if not bandwidth[:k].any():
        return None
    return bandwidth, np.arange(k + switches) < k, local
