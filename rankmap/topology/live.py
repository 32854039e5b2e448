"""The machine this process runs on: hwloc's ``lstopo`` when installed, else
Linux sysfs, both giving the same tree shape (see ``cpuset_tree``).

sysfs sources: ``/sys/devices/system/cpu/online``,
``cpu*/topology/{package,die,cluster,core}_cpus_list`` (older kernels:
``core_siblings_list``/``thread_siblings_list``),
``cpu*/cache/index*/{level,type,shared_cpu_list}`` and
``/sys/devices/system/node/node*/cpulist``.  Like hwloc, only the CPUs of the
process's cgroup cpuset are PEs (not its affinity mask: ``affinity_pes`` maps
that onto the tree), a die equal to its package and a cluster equal to
another level are not levels.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import numpy as np

from ..cpulist import parse_cpulist
from .cpuset_tree import CpuObject, build_machine_tree
from .hwloc import read_hwloc_xml
from .levels import normalize_overrides
from .tree import Topology

LSTOPO_NAMES = ("lstopo-no-graphics", "lstopo", "hwloc-ls")


def discover_local_xml(timeout: float = 60.0) -> str | None:
    """This machine as hwloc XML from ``lstopo --of xml``, or None when
    hwloc's tools are not installed or fail."""
    for name in LSTOPO_NAMES:
        exe = shutil.which(name)
        if exe is None:
            continue
        try:
            proc = subprocess.run([exe, "--of", "xml", "-"], capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0 and "<topology" in proc.stdout:
            return proc.stdout
    return None


def discover_local(distances=None, use_lstopo: bool = True) -> Topology:
    """Topology of this machine: lstopo's XML when available (and
    ``use_lstopo``), else sysfs."""
    xml = discover_local_xml() if use_lstopo else None
    if xml is not None:
        return read_hwloc_xml(xml, distances)
    return sysfs_topology(distances=distances)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cgroup_cpus(proc_root: str = "/proc", cgroup_root: str = "/sys/fs/cgroup") -> set[int] | None:
    """CPUs of this process's cgroup cpuset (v2 or v1), None if unknown."""
    text = _read(Path(proc_root) / "self" / "cgroup")
    if text is None:
        return None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hier, controllers, rel = parts
        rel = rel.lstrip("/")
        if hier == "0" and controllers == "":
            candidates = [Path(cgroup_root) / rel / "cpuset.cpus.effective"]
        elif "cpuset" in controllers.split(","):
            base = Path(cgroup_root) / "cpuset" / rel
            candidates = [base / "cpuset.effective_cpus", base / "cpuset.cpus"]
        else:
            continue
        for cand in candidates:
            value = _read(cand)
            if value:
                return parse_cpulist(value)
    return None


def sysfs_topology(sys_root: str = "/sys", allowed: set[int] | None = None, distances=None,
                   hostname: str | None = None) -> Topology:
    """Topology from Linux sysfs under ``sys_root``; ``allowed`` restricts
    the PEs (default: this process's cgroup cpuset when ``sys_root`` is the
    real ``/sys``)."""
    cpu_dir = Path(sys_root) / "devices" / "system" / "cpu"
    online_text = _read(cpu_dir / "online")
    if online_text is not None:
        cpus = parse_cpulist(online_text)
    else:
        cpus = {int(m.group(1)) for p in cpu_dir.glob("cpu[0-9]*")
                if (m := re.fullmatch(r"cpu(\d+)", p.name))}
    if not cpus:
        raise ValueError(f"{cpu_dir}: no CPU found in sysfs")
    if allowed is None and os.path.realpath(sys_root) == "/sys":
        allowed = cgroup_cpus()
    if allowed is not None:
        cpus &= set(allowed)

    def mask_of(text: str | None) -> int:
        mask = 0
        for c in parse_cpulist(text or ""):
            mask |= 1 << c
        return mask

    found: dict[str, set[int]] = {k: set() for k in ("package", "die", "group", "core", "L2", "L3", "numa")}
    for cpu in sorted(cpus):
        topo = cpu_dir / f"cpu{cpu}" / "topology"
        for kind, names in (("package", ("package_cpus_list", "core_siblings_list")),
                            ("die", ("die_cpus_list",)),
                            ("group", ("cluster_cpus_list",)),
                            ("core", ("core_cpus_list", "thread_siblings_list"))):
            for name in names:
                text = _read(topo / name)
                if text:
                    found[kind].add(mask_of(text))
                    break
        for index in (cpu_dir / f"cpu{cpu}" / "cache").glob("index[0-9]*"):
            level, ctype = _read(index / "level"), _read(index / "type")
            if level in ("2", "3") and ctype in ("Unified", "Data"):
                found[f"L{level}"].add(mask_of(_read(index / "shared_cpu_list")))
    for node in (Path(sys_root) / "devices" / "system" / "node").glob("node[0-9]*"):
        found["numa"].add(mask_of(_read(node / "cpulist")))
    found["die"] -= found["package"]
    objects = [CpuObject(kind, m) for kind, masks in found.items() for m in masks]
    name = hostname or socket.gethostname() or "localhost"
    return build_machine_tree(objects, {c: c for c in cpus}, normalize_overrides(distances),
                              root_name=name)


def affinity_pes(topology: Topology, cpus=None, host: str | None = None) -> list[int]:
    """PEs whose PU OS index is in ``cpus`` (default: this process's
    affinity, ``os.sched_getaffinity(0)``), in PE order.  On a multi-host
    topology only the PEs of ``host`` count (default: this machine's name)."""
    if cpus is None:
        cpus = os.sched_getaffinity(0)
    wanted = np.fromiter((int(c) for c in cpus), dtype=np.int64)
    hit = np.isin(topology.pe_os_index, wanted)
    hosts = topology.hosts()
    if len(hosts) > 1:
        host = host or socket.gethostname()
        if host not in hosts:
            raise ValueError(f"host {host!r} is not in this topology (hosts: {', '.join(hosts[:5])}"
                             f"{', ...' if len(hosts) > 5 else ''})")
        hit &= topology.pe_host == host
    return np.flatnonzero(hit).tolist()
