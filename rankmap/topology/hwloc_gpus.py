"""The GPUs of an hwloc XML as a GPU node (``links.gpu_node``).

hwloc lists a GPU as a PCI device with OS devices named after the runtime
that sees it: ``cudaN`` (CUDA), ``nvmlN`` (NVML, PCI order), ``rsmiN``
(ROCm SMI: ROCR_VISIBLE_DEVICES), ``zeN`` (Level Zero), ``openclNdM``.  One
PE per PCI device; its ``device`` is the first of rsmi, nvml, cuda, ze found
(the variable ``rankmap-bind`` sets); its CPUs are the cores of the CPU
object the device hangs off, shared out evenly (in PCI order) among the GPUs
that hang off the same object, as mpibind does.

Links: a bandwidth matrix hwloc exports (``<distances2 ... name=
"XGMIBandwidth">`` between OS devices, ``<distances2hetero ...
name="NVLinkBandwidth">`` between GPUs, NVSwitches and CPUs; MB/s)
becomes the node's distances (``links.gpu_distances``: flow through
switches, hops over GPUs); GPUs no link joins talk through the host, within
one CPU package or across two.  The extra
cost to leave the node is each GPU's distance to the nearest GPU sharing
a NIC's CPU object (0 where a NIC is its own).
"""

from __future__ import annotations

import re

import numpy as np

from .hwloc import IoDevice, _info, _parse_document, _source_bytes, _Walker
from .links import CROSS_PACKAGE_DISTANCE, HOST_PATH_DISTANCE, gpu_distances, gpu_node
from .tree import Topology

_GPU_NAME = re.compile(r"^(rsmi|nvml|cuda|ze|opencl)(\d+)(d\d+)?$")
_DEVICE_KIND = {"rsmi": "rocr", "nvml": "nvml", "cuda": "cuda", "ze": "ze"}
_PREFERENCE = ("rsmi", "nvml", "cuda", "ze", "opencl")
_NIC_NAME = re.compile(r"^(hsi|cxi|mlx\d*_|ib|hfi|ib\w*|bnxt_re|efa)")


def read_hwloc_gpus(source, host: str | None = None) -> Topology:
    """One node whose PEs are the GPUs of an hwloc XML (path, bytes or str)."""
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
    gpus = sorted((d for d in walker.devices if _gpu_names(d)), key=lambda d: d.busid)
    if not gpus:
        raise ValueError(f"{label}: no GPU in this topology (hwloc lists GPUs as OS devices cuda*, "
                         "nvml*, rsmi*, ze*, opencl*: export the node with its I/O devices, "
                         "lstopo --of xml)")
    host = host or _info(root, "HostName") or _info(doc, "HostName") or (
        path.name.split(".")[0] if path is not None else None)
    host_distance = _host_distances(walker, gpus)
    distance = _link_distances(doc, label, gpus, host_distance)
    nics = [d.locality for d in walker.devices
            if any(_NIC_NAME.match(name) for name, _ in d.os_devices)]
    egress = None
    if nics:
        near = [i for i, g in enumerate(gpus) if g.locality in nics]
        egress = distance[:, near].min(axis=1) if near else np.full(len(gpus), HOST_PATH_DISTANCE)
        egress[near] = 0.0
    return gpu_node([_device(g) for g in gpus], _cpus(walker, gpus), distance, egress,
                    f"{label} ({len(gpus)} GPUs)", host)


def _gpu_names(device: IoDevice) -> list[tuple[str, str]]:
    """(runtime, index) of the device's GPU OS devices, preferred first."""
    found = []
    for name, _ in device.os_devices:
        m = _GPU_NAME.match(name)
        if m:
            found.append((m.group(1), m.group(2)))
    return sorted(found, key=lambda f: _PREFERENCE.index(f[0]))


def _device(gpu: IoDevice) -> str | None:
    runtime, index = _gpu_names(gpu)[0]
    return f"{_DEVICE_KIND[runtime]}:{index}" if runtime in _DEVICE_KIND else None


def _cpus(walker: _Walker, gpus: list[IoDevice]) -> list[list[int]]:
    """Each GPU's CPUs: the cores of its CPU object, shared out in PCI order
    among the GPUs hanging off that object."""
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
        for j, i in enumerate(sharing):
            lo, hi = j * len(units) // len(sharing), (j + 1) * len(units) // len(sharing)
            share = units[lo:hi] or units[:1]
            out[i] = sorted(walker.pu_os_index[s] for m in share
                            for s in range(m.bit_length()) if (m >> s) & 1)
    return out


def _host_distances(walker: _Walker, gpus: list[IoDevice]) -> np.ndarray:
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


def _link_distances(doc, label: str, gpus: list[IoDevice], host: np.ndarray) -> np.ndarray:
    """The node's distances from the first bandwidth matrix hwloc exported
    between its GPUs (and switches), else the host path alone."""
    row_of: dict[int, int] = {}   # OSDev or PCIDev gp_index -> GPU
    for i, g in enumerate(gpus):
        if g.gp_index is not None:
            row_of[g.gp_index] = i
        for _, gp in g.os_devices:
            if gp is not None:
                row_of[gp] = i
    for elem in doc:
        if elem.tag not in ("distances2", "distances2hetero"):
            continue
        name = elem.get("name") or ""
        kind = int(elem.get("kind", "0")) if (elem.get("kind") or "0").isdigit() else 0
        if not (kind & 8 or name.endswith("Bandwidth")):
            continue
        graph = _bandwidth_graph(elem, label, row_of, len(gpus))
        if graph is not None:
            bandwidth, is_gpu = graph
            return gpu_distances(bandwidth, is_gpu, host)
    return host


def _bandwidth_graph(elem, label: str, row_of: dict[int, int], k: int):
    """``(bandwidth GB/s over GPUs then switches, is_gpu)`` of one hwloc
    distance matrix, or None when it joins no two GPUs."""
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
    vertex: list[int | None] = []   # matrix row -> graph vertex (GPU row, switch, or None: host)
    switches = 0
    for token in tokens:
        typ, _, gp = token.rpartition(":") if hetero else ("OSDev", "", token)
        gp_index = int(gp) if gp.isdigit() else None
        if gp_index in row_of:
            vertex.append(row_of[gp_index])
        elif typ == "PCIDev":      # a switch (NVSwitch) between GPUs
            vertex.append(k + switches)
            switches += 1
        else:                      # CPUs and memory: the host path, which the tree models
            vertex.append(None)
    bandwidth = np.zeros((k + switches, k + switches))
    for a, va in enumerate(vertex):
        for b, vb in enumerate(vertex):
            if va is not None and vb is not None and va != vb:
                bandwidth[va, vb] = max(bandwidth[va, vb], matrix[a, b], matrix[b, a])
    if not bandwidth[:k].any():
        return None
    return bandwidth, np.arange(k + switches) < k
