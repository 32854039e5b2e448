"""Write the hwloc XMLs of partitioned GPU nodes that the tests read.

No export of a partitioned node is public, so these are written here in
hwloc 2's XML export format, after the layouts the sites and hwloc
describe (see README.md beside this file):

- ``mi300a-tpx.xml``: an El Capitan-class node (HPE Cray EX255a): 4 MI300A
  APUs, each a package of 3 L3 regions of 8 cores, 2 threads per core
  (PUs 0-95 and 96-191), its NUMA node, one Slingshot NIC, and one GPU PCI
  device holding 3 ``rsmiN`` OS devices (TPX), N numbered as ROCm numbers
  the partitions (0-11, package by package); an ``XGMIBandwidth`` matrix
  (MB/s) over the 12 OS devices as hwloc's AMD SMI backend writes it: the
  memory bandwidth on the diagonal, 128 GB/s between partitions of two
  APUs, none between partitions of one;
- ``mi300a-cpx.xml``: the same node in CPX mode, 6 partitions per APU
  (``rsmi0``-``rsmi23``), no bandwidth matrix but each OS device's
  ``XGMIPeers`` (hwloc 2's attribute): the partitions of the other APUs;
- ``aurora-composite.xml``: an Aurora-class node: 2 Xeon packages of 52
  cores (PUs 0-103, 104-207), 6 Intel Max GPUs (3 per package) whose Level
  Zero root devices ``zeN`` hold their two stacks ``zeN.0``, ``zeN.1``
  (COMPOSITE mode), 4 Slingshot NICs per package.

    python tests/data/topologies/partitioned/make_xml.py
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def bitmap(cpus) -> str:
    """hwloc's bitmap text: 32-bit words, most significant first."""
    value = 0
    for c in cpus:
        value |= 1 << c
    words = []
    while True:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
        if not value:
            break
    return ",".join(f"0x{w:08x}" for w in reversed(words))


class Writer:
    def __init__(self):
        self.lines: list[str] = []
        self.gp = 1

    def next_gp(self) -> int:
        self.gp += 1
        return self.gp

    def open(self, depth: int, typ: str, attrs: str = "") -> None:
        self.lines.append(f'{"  " * depth}<object type="{typ}"{attrs} gp_index="{self.next_gp()}">')

    def close(self, depth: int) -> None:
        self.lines.append(f'{"  " * depth}</object>')

    def leaf(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)


def cpu_attrs(cpus, nodes) -> str:
    return (f' cpuset="{bitmap(cpus)}" complete_cpuset="{bitmap(cpus)}" nodeset="{bitmap(nodes)}"'
            f' complete_nodeset="{bitmap(nodes)}"')


def cores(w: Writer, depth: int, first: int, count: int, smt_offset: int, l3: int, node: int) -> None:
    """``count`` cores from ``first`` in L3 regions of ``l3`` cores, two threads each."""
    for start in range(first, first + count, l3):
        region = [c for i in range(start, start + l3) for c in (i, i + smt_offset)]
        w.open(depth, "L3Cache", cpu_attrs(region, [node]) + ' cache_size="33554432" depth="3" '
               'cache_linesize="64" cache_associativity="16" cache_type="0"')
        for i in range(start, start + l3):
            w.open(depth + 1, "Core", f' os_index="{i}"' + cpu_attrs([i, i + smt_offset], [node]))
            for pu in (i, i + smt_offset):
                w.leaf(depth + 2, f'<object type="PU" os_index="{pu}"' + cpu_attrs([pu], [node])
                       + f' gp_index="{w.next_gp()}"/>')
            w.close(depth + 1)
        w.close(depth)


def package(w: Writer, p: int, count: int, smt_offset: int, l3: int, model: str, memory: int) -> None:
    """Opens package ``p`` of ``count`` cores (threads ``smt_offset`` apart), its NUMA node and L3s."""
    pus = [c for i in range(count * p, count * p + count) for c in (i, i + smt_offset)]
    w.open(2, "Package", f' os_index="{p}"' + cpu_attrs(pus, [p]))
    w.leaf(3, f'<info name="CPUModel" value="{model}"/>')
    w.leaf(3, f'<object type="NUMANode" os_index="{p}"' + cpu_attrs(pus, [p])
           + f' gp_index="{w.next_gp()}" local_memory="{memory}"/>')
    cores(w, 3, count * p, count, smt_offset, l3, p)


def pci_device(w: Writer, depth: int, busid: str, pci_type: str, osdevs) -> list[int]:
    """A host bridge, a bridge and a PCI device holding ``osdevs`` (name,
    infos, children); returns the OS devices' gp indices in order."""
    domain, bus = busid.split(":")[0], busid.split(":")[1]
    w.open(depth, "Bridge", f' bridge_type="0-1" depth="0" bridge_pci="{domain}:[{bus}-{bus}]"')
    w.open(depth + 1, "Bridge", f' bridge_type="1-1" depth="1" bridge_pci="{domain}:[{bus}-{bus}]"'
           f' pci_busid="{domain}:00:01.1" pci_type="0604 [1022:14ab] [0000:0000] 00"'
           ' pci_link_speed="31.507692"')
    w.open(depth + 2, "PCIDev", f' pci_busid="{busid}" pci_type="{pci_type}" pci_link_speed="31.507692"')
    gps = []

    def osdev(d, name, infos, children):
        w.open(d, "OSDev", f' name="{name}" osdev_type="{2 if name.startswith("hsi") else 1}"')
        gps.append(w.gp)
        for key, value in infos:
            w.leaf(d + 1, f'<info name="{key}" value="{value}"/>')
        for child in children:
            osdev(d + 1, *child)
        w.close(d)

    for name, infos, children in osdevs:
        osdev(depth + 3, name, infos, children)
    w.close(depth + 2)
    w.close(depth + 1)
    w.close(depth)
    return gps


def machine(w: Writer, host: str, pus, nodes) -> None:
    w.leaf(0, '<?xml version="1.0" encoding="UTF-8"?>')
    w.leaf(0, '<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    w.leaf(0, '<topology version="2.0">')
    w.open(1, "Machine", ' os_index="0"' + cpu_attrs(pus, nodes) + f' allowed_cpuset="{bitmap(pus)}"'
           f' allowed_nodeset="{bitmap(nodes)}"')
    w.leaf(2, f'<info name="HostName" value="{host}"/>')
    w.leaf(2, '<info name="hwlocVersion" value="2.11.2"/>')


def mi300a(parts: int, peers: bool) -> str:
    w = Writer()
    machine(w, f"mi300a-{'tpx' if parts == 3 else 'cpx'}", range(192), range(4))
    gpu_gps = []
    for p in range(4):
        package(w, p, 24, 96, 8, "AMD Instinct MI300A Accelerator", 137438953472)
        others = [f"rsmi{q * parts + j}" for q in range(4) if q != p for j in range(parts)]
        partitions = []
        for j in range(parts):
            infos = [("Backend", "RSMI"), ("GPUVendor", "AMD"), ("GPUModel", "AMD Instinct MI300A"),
                     ("XGMIHiveID", "5a0c3b2e1f4d6789")]
            if peers:
                infos.append(("XGMIPeers", " ".join(others) + " "))
            partitions.append((f"rsmi{p * parts + j}", infos, []))
        gpu_gps += pci_device(w, 3, f"000{p}:02:00.0", "0380 [1002:74a0] [1002:0c34] 00", partitions)
        pci_device(w, 3, f"000{p}:05:00.0", "0200 [17db:0501] [17db:0000] 02",
                   [(f"hsi{p}", [("Address", f"02:00:00:00:00:0{p}")], [])])
        w.close(2)
    w.close(1)
    if not peers:
        k = len(gpu_gps)
        rows = []
        for a in range(k):
            rows.append(" ".join("5300000" if a == b else "0" if a // parts == b // parts else "128000"
                                 for b in range(k)))
        w.leaf(1, f'<distances2 type="OSDev" nbobjs="{k}" kind="9" name="XGMIBandwidth" indexing="gp">')
        indexes = " ".join(map(str, gpu_gps)) + " "
        w.leaf(2, f'<indexes length="{len(indexes)}">{indexes}</indexes>')   # length: characters
        for row in rows:
            w.leaf(2, f'<u64values length="{len(row) + 1}">{row} </u64values>')
        w.leaf(1, "</distances2>")
    w.leaf(0, "</topology>")
    return "\n".join(w.lines) + "\n"


def aurora() -> str:
    w = Writer()
    machine(w, "aurora-composite", range(208), range(2))
    for p in range(2):
        package(w, p, 52, 104, 52, "Intel(R) Xeon(R) CPU Max 9470C", 549755813888)
        for g in range(3 * p, 3 * p + 3):
            stacks = [(f"ze{g}.{s}", [("LevelZeroSubdeviceID", str(s))], []) for s in range(2)]
            pci_device(w, 3, f"0000:{0x18 + 0x10 * g:02x}:00.0", "0380 [8086:0bd6] [8086:0000] 2f",
                       [(f"ze{g}", [("Backend", "LevelZero"), ("LevelZeroSubdevices", "2")], stacks)])
        for n in range(4 * p, 4 * p + 4):
            pci_device(w, 3, f"0000:{0x80 + 0x10 * n:02x}:00.0", "0200 [17db:0501] [17db:0000] 02",
                       [(f"hsi{n}", [], [])])
        w.close(2)
    w.close(1)
    w.leaf(0, "</topology>")
    return "\n".join(w.lines) + "\n"


if __name__ == "__main__":
    (HERE / "mi300a-tpx.xml").write_text(mi300a(3, peers=False))
    (HERE / "mi300a-cpx.xml").write_text(mi300a(6, peers=True))
    (HERE / "aurora-composite.xml").write_text(aurora())
