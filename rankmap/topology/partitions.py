"""GPU packages that run several ranks: one PE per partition.

An AMD MI300A or MI300X in TPX or CPX mode shows 3 or 6 (MI300X: up to 8)
GPUs per package, an Intel Max GPU in FLAT mode one per stack, and users
run one rank per partition; a job that shares one GPU among several ranks
is the same shape.  Each partition is a PE with its own device index, the
index the runtime numbers it by (ROCm: 0..23 on a 4-APU node in CPX mode,
partitions of one package consecutive).

Distances: partitions of one package exchange bytes through the package's
own memory, and a copy reads and writes it, so at half the memory's
bandwidth (``package_distance``); partitions of different packages pay
what their packages' link costs (the link's full bandwidth is a pair's when
that pair alone uses it, as for whole GPUs in ``links.gpu_distances``).
So partitions of one package are always nearer each other than to any
other package's.

CPUs: the cores near a package are shared out evenly among its
partitions, in order, hardware threads of one core kept together
(``share_out``), as LLNL's mpibind does.
"""

from __future__ import annotations

import numpy as np

from .links import bandwidth_distance

#: GB/s of a package's memory when nothing says it: the local bandwidth
#: hwloc writes for AMD GPUs that report none (1 TB/s, "it somehow matches
#: the HBM")
DEFAULT_MEMORY_BANDWIDTH = 1000.0


def package_distance(memory_gbs: float | None = None) -> float:
    """Cost of a byte between two partitions of one package whose memory
    moves ``memory_gbs`` GB/s: a copy reads and writes it, so half that."""
    gbs = DEFAULT_MEMORY_BANDWIDTH if not memory_gbs or memory_gbs <= 0 else float(memory_gbs)
    return float(bandwidth_distance(gbs / 2.0))


def share_out(units: list[list[int]], parts: int) -> list[list[int]]:
    """``units`` (each core's OS CPUs, in order) shared among ``parts``
    partitions: consecutive cores each, as even as the count allows; a
    partition left without a core shares the first one."""
    out = []
    for j in range(parts):
        lo, hi = j * len(units) // parts, (j + 1) * len(units) // parts
        share = units[lo:hi] or units[:1]
        out.append(sorted(c for unit in share for c in unit))
    return out


def cores_of(cpus, threads: int) -> list[list[int]]:
    """The cores of a CPU list written as ``threads`` equal runs, first
    threads first (``0-23,96-119``: core i is CPUs i and 96 + i): each
    core's CPUs, in core order."""
    cpus = sorted(cpus)
    if threads <= 1 or len(cpus) % threads:
        return [[c] for c in cpus]
    per = len(cpus) // threads
    return [[cpus[t * per + i] for t in range(threads)] for i in range(per)]


def split_packages(distance, parts, inner, egress=None):
    """Each package (row of the ``distance`` matrix) as ``parts[i]``
    partition rows: between partitions of package i ``inner[i]``, between
    partitions of packages i != j ``distance[i, j]``.  Returns ``(distance,
    egress, package_of_row)`` over the partitions, package by package."""
    d = np.asarray(distance, dtype=np.float64)
    parts = np.asarray(parts, dtype=np.int64)
    if parts.size != d.shape[0] or np.any(parts < 1):
        raise ValueError("every package needs at least one partition")
    package = np.repeat(np.arange(parts.size), parts)
    out = d[np.ix_(package, package)]
    same = package[:, None] == package[None, :]
    out[same] = np.asarray(inner, dtype=np.float64)[package[np.nonzero(same)[0]]]
    np.fill_diagonal(out, 0.0)
    e = None if egress is None else np.asarray(egress, dtype=np.float64)[package]
    return out, e, package


def shared_gpus(node, ranks: int):
    """A one-node GPU topology whose GPUs each hold ``ranks`` PEs: several
    ranks sharing one GPU (as many per GPU as it takes), each with its share
    of the GPU's CPUs, ranks of one GPU as near as partitions of a package."""
    from .links import gpu_node

    links = next(iter(node.node_links.values()))
    k = links.distance.shape[0]
    devices, cpus = [None] * k, [None] * k
    for p in range(node.n_pes):
        row = int(node.pe_link_row[p])
        devices[row], cpus[row] = node.pe_device[p], node.pe_cpus[p]
    distance, egress, package = split_packages(links.distance, [ranks] * k, [package_distance()] * k,
                                               links.egress)
    shares = [share_out([[c] for c in (cpus[g] or ())], ranks) if cpus[g] else [None] * ranks
              for g in range(k)]
    return gpu_node([devices[g] for g in package], [s for g in range(k) for s in shares[g]], distance,
                    egress, f"{links.source}, {ranks} ranks per GPU", node.hosts()[0])
