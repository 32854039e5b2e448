"""GPU nodes: one PE per GPU (or GCD), the true distances inside the node as
``NodeLinks``, each PE with its device and the CPUs near it.

Three sources describe a node:

- a built-in node type (``GPU_NODES``) written from the vendors' and
  centres' public documentation, in a partition mode where its GPUs have
  them (``mi300a:cpx``: one PE per partition, ``partitions``);
- a GPU node file (``read_gpu_node_file``): one line per GPU and the link
  bandwidths;
- an hwloc XML with its GPUs (``hwloc_gpus``).

All three end in ``links.gpu_node``, which builds the node's tree: the
links' matrix on the node, a tree approximating it below
(``links.links_tree``) for the constructions that need one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cpulist import parse_cpulist
from .links import gpu_distances, gpu_node
from .partitions import cores_of, package_distance, share_out, split_packages
from .tree import Topology


@dataclass(frozen=True)
class GpuNodeType:
    """A node type from public documentation: GPU links as ``(a, b,
    GB/s)``, switches as extra vertices of the link graph, each GPU's device
    and CPUs, and the GPUs the NICs hang off (``None``: every GPU has its
    own).

    GPUs that can be partitioned name their ``modes`` (mode -> partitions
    per GPU, the first the default), their memory bandwidth (GB/s: what
    partitions of one package exchange through) and the hardware threads
    per core of their CPU lists (``partitions.cores_of``)."""

    name: str
    about: str
    devices: tuple[str, ...]
    cpus: tuple[str, ...]
    links: tuple[tuple[int, int, float], ...]
    switches: int = 0
    nic_gpus: tuple[int, ...] | None = None
    modes: tuple[tuple[str, int], ...] = ()
    memory_bandwidth: float = 0.0
    threads: int = 1

    def node(self, host: str | None = None, mode: str | None = None) -> Topology:
        k = len(self.devices)
        bandwidth = np.zeros((k + self.switches, k + self.switches))
        for a, b, gbs in self.links:
            bandwidth[a, b] += gbs
            bandwidth[b, a] += gbs
        distance = gpu_distances(bandwidth, np.arange(k + self.switches) < k)
        egress = None
        if self.nic_gpus is not None:
            egress = distance[:, list(self.nic_gpus)].min(axis=1)
        cpus = [sorted(parse_cpulist(c)) for c in self.cpus]
        parts = self.partitions(mode)
        source = f"built-in {self.name}" + (f":{mode}" if mode else "")
        if parts == 1:
            return gpu_node(list(self.devices), cpus, distance, egress, source, host)
        inner = np.full(k, package_distance(self.memory_bandwidth))
        distance, egress, package = split_packages(distance, [parts] * k, inner, egress)
        kind = self.devices[0].partition(":")[0]
        devices = [f"{kind}:{i}" for i in range(k * parts)]   # the runtime numbers partitions in order
        shares = [share for c in cpus for share in share_out(cores_of(c, self.threads), parts)]
        return gpu_node(devices, shares, distance, egress, source, host)

    def partitions(self, mode: str | None) -> int:
        """Partitions per GPU in ``mode`` (None: the default mode)."""
        if mode is None:
            return self.modes[0][1] if self.modes else 1
        for name, parts in self.modes:
            if name == mode:
                return parts
        if not self.modes:
            raise ValueError(f"--gpu-node {self.name}:{mode}: the {self.name} node has no partition modes")
        raise ValueError(f"--gpu-node {self.name}:{mode}: partition mode one of "
                         f"{', '.join(n for n, _ in self.modes)}")


def _frontier() -> GpuNodeType:
    # OLCF Frontier user guide, "Frontier Compute Nodes" (HPE Cray EX235a):
    # 4 MI250X = 8 GCDs; the two GCDs of one MI250X joined by 4 Infinity
    # Fabric links (200 GB/s), GCDs of different MI250X by 1 or 2 links
    # (50-100 GB/s) as in the node diagram; each GCD near one L3 region of 8
    # cores; the 4 Slingshot NICs attached at GCDs 1, 3, 5, 7.  The GCD -> L3
    # attachment is the one hwloc reports on an EX235a node (LLNL's Tioga
    # export in the mpibind repository).
    quad, dual, single = 200.0, 100.0, 50.0
    links = ((0, 1, quad), (2, 3, quad), (4, 5, quad), (6, 7, quad), (0, 6, dual), (2, 4, dual),
             (0, 2, single), (1, 3, single), (4, 6, single), (5, 7, single), (1, 5, single),
             (3, 7, single))
    l3 = {0: 6, 1: 7, 2: 2, 3: 3, 4: 0, 5: 1, 6: 4, 7: 5}   # GCD -> L3 region (cores 8r..8r+7)
    cpus = tuple(f"{8 * l3[g]}-{8 * l3[g] + 7},{64 + 8 * l3[g]}-{64 + 8 * l3[g] + 7}" for g in range(8))
    return GpuNodeType("frontier", "OLCF Frontier / LUMI-G node: 4 AMD MI250X (8 GCDs), EPYC 7A53",
                       tuple(f"rocr:{g}" for g in range(8)), cpus, links, nic_gpus=(1, 3, 5, 7))


def _nvswitch(name: str, about: str, per_switch: tuple[float, ...], cpus: tuple[str, ...]) -> GpuNodeType:
    """8 GPUs, each joined to every NVSwitch by ``per_switch[s]`` GB/s: every
    pair gets the same bandwidth (the sum), so the node is uniform."""
    links = tuple((g, 8 + s, gbs) for g in range(8) for s, gbs in enumerate(per_switch))
    return GpuNodeType(name, about, tuple(f"nvml:{g}" for g in range(8)), cpus, links,
                       switches=len(per_switch))


def _mi300a() -> GpuNodeType:
    # LLNL's El Capitan systems overview (El Capitan, Tuolumne, RZAdams; HPE
    # Cray EX255a): 4 AMD MI300A APUs, each its own socket and NUMA domain
    # with 24 Zen 4 cores (3 CCDs) and 128 GB of HBM3, every APU joined to
    # each of the others by two Infinity Fabric links, 256 GB/s both ways
    # (128 each way); AMD's MI300A data sheet: 5.3 TB/s of HBM3; one
    # Slingshot NIC per APU.  Cores 0-95 with their second threads 96-191
    # (an EX255a node's lstopo output published with LLNL's mpibind).  Modes
    # as ROCm's compute partitioning names them: SPX one GPU per APU, TPX
    # three (two XCDs each), CPX six (one XCD each).
    links = tuple((a, b, 128.0) for a in range(4) for b in range(a + 1, 4))
    cpus = tuple(f"{24 * p}-{24 * p + 23},{96 + 24 * p}-{96 + 24 * p + 23}" for p in range(4))
    return GpuNodeType("mi300a", "LLNL El Capitan / Tuolumne node: 4 AMD MI300A APUs (24 cores each)",
                       tuple(f"rocr:{p}" for p in range(4)), cpus, links,
                       modes=(("spx", 1), ("tpx", 3), ("cpx", 6)), memory_bandwidth=5300.0, threads=2)


GPU_NODES: dict[str, GpuNodeType] = {
    "mi300a": _mi300a(),
    "frontier": _frontier(),
    # NVIDIA DGX A100 user guide: 8 A100, 6 NVSwitches, 12 NVLink 3 links per
    # GPU (2 to each switch, 25 GB/s each way per link); two 64-core EPYC
    # 7742 (NPS4), GPU pairs near NUMA nodes 3, 1, 7, 5; one NIC per GPU
    "dgx-a100": _nvswitch("dgx-a100", "NVIDIA DGX A100: 8 A100 over 6 NVSwitches, 2 x EPYC 7742",
                          (50.0,) * 6,
                          ("48-55,176-183", "56-63,184-191", "16-23,144-151", "24-31,152-159",
                           "112-119,240-247", "120-127,248-255", "80-87,208-215", "88-95,216-223")),
    # NVIDIA DGX H100 user guide: 8 H100, 4 NVSwitch chips, 18 NVLink 4 links
    # per GPU (5, 4, 4, 5 to the four chips); two 56-core Xeon 8480C, GPUs
    # 0-3 near socket 0, 4-7 near socket 1; one NIC per GPU
    "dgx-h100": _nvswitch("dgx-h100", "NVIDIA DGX H100: 8 H100 over 4 NVSwitch chips, 2 x Xeon 8480C",
                          (125.0, 100.0, 100.0, 125.0),
                          tuple(f"{s * 56 + 14 * i}-{s * 56 + 14 * i + 13},"
                                f"{112 + s * 56 + 14 * i}-{112 + s * 56 + 14 * i + 13}"
                                for s in (0, 1) for i in range(4))),
}
GPU_NODES["lumi-g"] = GPU_NODES["frontier"]
GPU_NODES["el-capitan"] = GPU_NODES["mi300a"]


def read_gpu_node_file(path) -> Topology:
    """A GPU node file::

        gpu-node                     # first line
        gpu rocr:0 cpus=48-55 nic    # one line per GPU: device (or -), CPUs, a NIC here
        gpu rocr:1 cpus=56-63
        bandwidth                    # then one row per GPU: GB/s to every GPU
        0 200
        200 0

    ``distance`` instead of ``bandwidth`` gives the distances themselves.
    GPUs with no direct link are reached over others or through the host
    (``links.gpu_distances``)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the GPU node file ({exc})") from None
    rows = [(no, raw.split("#", 1)[0].split()) for no, raw in enumerate(lines, 1)]
    rows = [(no, words) for no, words in rows if words]
    if not rows or rows[0][1] != ["gpu-node"]:
        raise ValueError(f"{path}:1: a GPU node file starts with the line 'gpu-node'")
    devices, cpus, nics, matrix, what = [], [], [], [], None
    for no, words in rows[1:]:
        where = f"{path}:{no}"
        if what is not None:
            try:
                matrix.append([float(w) for w in words])
            except ValueError:
                raise ValueError(f"{where}: expected numbers, got {' '.join(words)[:40]!r}") from None
            continue
        if words[0] == "gpu":
            device, cpu_set, nic = _gpu_line(where, words[1:])
            devices.append(device)
            cpus.append(cpu_set)
            if nic:
                nics.append(len(devices) - 1)
        elif words in (["bandwidth"], ["distance"]):
            what = words[0]
        else:
            raise ValueError(f"{where}: expected 'gpu DEVICE [cpus=LIST] [nic]', 'bandwidth' or 'distance'")
    k = len(devices)
    if k == 0 or what is None:
        raise ValueError(f"{path}: a GPU node file lists its GPUs, then 'bandwidth' or 'distance' and a matrix")
    m = np.asarray(matrix, dtype=np.float64) if all(len(r) == k for r in matrix) else None
    if m is None or m.shape != (k, k):
        raise ValueError(f"{path}: the {what} matrix must have {k} rows of {k} numbers (one per GPU)")
    if not np.all(np.isfinite(m)) or m.min() < 0:
        raise ValueError(f"{path}: {what} values must be finite and >= 0")
    distance = gpu_distances(m) if what == "bandwidth" else np.maximum(m, m.T) * (1 - np.eye(k))
    egress = distance[:, nics].min(axis=1) if nics else None
    try:
        return gpu_node(devices, cpus, distance, egress, f"{path.name}", None)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _gpu_line(where: str, words: list[str]):
    from ..bind import check_device

    if not words:
        raise ValueError(f"{where}: 'gpu' needs a device (KIND:INDEX, or -)")
    try:
        device = check_device(words[0])
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    cpus, nic = None, False
    for word in words[1:]:
        if word.startswith("cpus="):
            try:
                cpus = sorted(parse_cpulist(word[5:]))
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        elif word == "nic":
            nic = True
        else:
            raise ValueError(f"{where}: unknown word {word!r} (cpus=LIST, nic)")
    return device, cpus, nic


def load_gpu_node(spec: str) -> Topology:
    """A built-in node type by name (``NAME:MODE`` picks a partition
    mode: ``mi300a:cpx``), a GPU node file, or an hwloc XML with GPUs."""
    key = spec.strip().lower()
    name, _, mode = key.partition(":")
    if name in GPU_NODES:
        return GPU_NODES[name].node(mode=mode or None)
    path = Path(spec)
    if not path.exists():
        raise ValueError(f"--gpu-node {spec}: neither a built-in node type ({', '.join(_listed())}) "
                         "nor a file")
    with open(path, "rb") as fh:
        head = fh.read(512).lstrip()
    if head[:1] == b"<":
        from .hwloc_gpus import read_hwloc_gpus

        return read_hwloc_gpus(path)
    return read_gpu_node_file(path)


def _listed() -> list[str]:
    """The built-in names, each with its partition modes."""
    return [name + (f"[:{'|'.join(m for m, _ in t.modes)}]" if t.modes else "")
            for name, t in sorted(GPU_NODES.items())]
