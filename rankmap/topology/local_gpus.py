"""This machine's GPUs as a GPU node: hwloc's XML where lstopo is installed
and lists GPUs (links, partitions, NICs: ``hwloc_gpus``), else the PCI
devices Linux lists in sysfs.

sysfs knows each GPU's PCI class, vendor and the CPUs near it
(``local_cpulist``), not its links nor its partitions: one PE per GPU in
PCI order, named as the vendor's runtime numbers GPUs of one model
(``nvml:N`` for NVIDIA, ``rocr:N`` for AMD, ``ze:N`` for Intel: PCI order),
each with its share of the CPUs near it, joined through the host.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..cpulist import parse_cpulist
from .links import CROSS_PACKAGE_DISTANCE, HOST_PATH_DISTANCE, gpu_node
from .live import _read, discover_local_xml
from .partitions import share_out
from .tree import Topology

#: PCI vendor -> the device kind its runtime numbers
VENDOR_KIND = {"0x10de": "nvml", "0x1002": "rocr", "0x8086": "ze"}
#: PCI classes of compute GPUs: VGA, 3D controller, other display controller
GPU_CLASSES = ("0x0300", "0x0302", "0x0380")


def discover_local_gpus(sys_root: str = "/sys") -> Topology:
    """This machine's GPU node; ValueError when it has no GPU."""
    from .hwloc_gpus import read_hwloc_gpus

    xml = discover_local_xml()
    if xml is not None:
        try:
            return read_hwloc_gpus(xml)
        except ValueError:   # hwloc without its GPU backends: sysfs may still list them
            pass
    return sysfs_gpus(sys_root)


def sysfs_gpus(sys_root: str = "/sys") -> Topology:
    """The GPUs of ``sys_root``/bus/pci/devices (module docstring)."""
    found = []
    for dev in sorted(Path(sys_root, "bus", "pci", "devices").glob("*")):
        cls, vendor = _read(dev / "class") or "", (_read(dev / "vendor") or "").lower()
        if vendor in VENDOR_KIND and cls[:6] in GPU_CLASSES:
            try:
                cpus = sorted(parse_cpulist(_read(dev / "local_cpulist") or ""))
            except ValueError:
                cpus = []
            node = _read(dev / "numa_node")
            found.append((dev.name, VENDOR_KIND[vendor], cpus, node))
    if not found:
        raise ValueError(f"no GPU among the PCI devices of {sys_root}/bus/pci/devices "
                         "(and no lstopo that lists one)")
    counts: dict[str, int] = {}
    devices = []
    for _bus, kind, _cpus, _node in found:
        devices.append(f"{kind}:{counts.get(kind, 0)}")
        counts[kind] = counts.get(kind, 0) + 1
    cpus: list = [None] * len(found)
    for near in dict.fromkeys(tuple(c) for _b, _k, c, _n in found):
        sharing = [i for i, f in enumerate(found) if tuple(f[2]) == near]
        for i, share in zip(sharing, share_out([[c] for c in near], len(sharing))):
            cpus[i] = share if near else None
    k = len(found)
    same = np.array([[found[a][3] == found[b][3] for b in range(k)] for a in range(k)])
    distance = np.where(same, HOST_PATH_DISTANCE, CROSS_PACKAGE_DISTANCE) * (1 - np.eye(k))
    return gpu_node(devices, cpus, distance, None, f"sysfs ({k} GPUs)", None)
