"""The GPU each rank of a recorded run used, found on its node: the
"before" placement of a trace on GPU nodes (``rankmap map``, ``rankmap
show --per gpu``).

A rank's record (``rankmap.profile.gpu``) says what the launcher made
visible and which device the rank opened.  The device on the node:

- by its PCI bus id, where the rank opened one and the node's hwloc XML
  (recorded with the trace) lists the GPUs' bus ids; partitions of one GPU
  share its bus id, so there the runtime's partition number decides (ROCm
  writes it in the function digit of the partition's bus id, 0 for the
  first);
- else by index: the visible-device variables narrow the node's GPUs in
  the order the runtime applies them (ROCR_VISIBLE_DEVICES, then
  HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES among those; CUDA's own), and
  the ordinal the rank opened picks among what is left (a rank that sees
  one GPU used that one).  Inside a Slurm step that lists its GPUs
  (SLURM_STEP_GPUS, else SLURM_JOB_GPUS), indices that all fit the list
  count within it, as Slurm numbers them where it confines the devices
  (its usual setting); else they are the node's own.

``cuda:N`` matches ``nvml:N`` (the PCI order) where the node names GPUs
only one way: CUDA orders GPUs of one model by PCI bus id too.  UUIDs in
a variable are not resolved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RankGpu:
    """What a rank's record says: ``device`` ("rocr:3", None when the
    variables and ordinal do not pin one), ``pci`` (the bus id of the
    device it opened) and ``said`` (how it is known, for people)."""

    device: str | None
    pci: str | None
    said: str


def read_record(text: str | None) -> RankGpu | None:
    """A rank's GPU record (JSON text) as a ``RankGpu``; None for none."""
    if not text:
        return None
    try:
        rec = json.loads(text)
    except ValueError:
        return None
    if not isinstance(rec, dict):
        return None
    env = {k: str(v) for k, v in (rec.get("env") or {}).items()}
    opened = [d for d in rec.get("opened") or [] if isinstance(d, dict)]
    current = rec.get("current") if isinstance(rec.get("current"), dict) else None
    chosen = current if current is not None else (opened[0] if len(opened) == 1 else None)
    api = chosen.get("api") if chosen else _api_of(env)
    ordinal = chosen.get("ordinal") if chosen else None
    pci = (chosen.get("pci") or None) if chosen else None
    device = _device(api, env, ordinal if isinstance(ordinal, int) else None)
    said = [f"{k}={v}" for k, v in sorted(env.items()) if k != "CUDA_DEVICE_ORDER"]
    if chosen:
        said.append(f"opened {api} device {ordinal}" + (f" ({pci})" if pci else ""))
    if len(opened) > 1:
        said.append(f"{len(opened)} devices opened")
    return RankGpu(device, pci, "; ".join(said))


def _api_of(env: dict) -> str | None:
    if "ROCR_VISIBLE_DEVICES" in env or "HIP_VISIBLE_DEVICES" in env:
        return "hip"
    if "CUDA_VISIBLE_DEVICES" in env:
        return "cuda"
    if "ZE_AFFINITY_MASK" in env:
        return "ze"
    return None


def _device(api: str | None, env: dict, ordinal: int | None) -> str | None:
    """The device a rank of ``api`` used, from the variables and the
    ordinal it opened (module docstring)."""
    step = _numbers(env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS"))
    if api == "hip":
        kind, order = "rocr", [env.get("ROCR_VISIBLE_DEVICES"),
                               env.get("HIP_VISIBLE_DEVICES") or env.get("CUDA_VISIBLE_DEVICES")]
    elif api == "cuda":
        kind = "nvml" if env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" else "cuda"
        order = [env.get("CUDA_VISIBLE_DEVICES")]
    elif api == "ze":
        mask = [t for t in (env.get("ZE_AFFINITY_MASK") or "").split(",") if t.strip()]
        if len(mask) == 1 and all(p.isdigit() for p in mask[0].strip().split(".")):
            return f"ze:{mask[0].strip()}"
        return None
    else:
        return None
    seen: list | None = None   # the node's GPUs this rank sees, None: all of them
    for text in order:
        if text is None:
            continue
        listed = _numbers(text)
        if listed is None:
            return None
        if seen is None:
            seen = _within_step(listed, step)
        else:
            if any(j >= len(seen) for j in listed):
                return None
            seen = [seen[j] for j in listed]
    if ordinal is not None:
        if seen is None:
            return f"{kind}:{ordinal}"
        return f"{kind}:{seen[ordinal]}" if 0 <= ordinal < len(seen) else None
    if seen is not None and len(seen) == 1:
        return f"{kind}:{seen[0]}"
    return None


def _numbers(text: str | None) -> list[int] | None:
    if text is None:
        return None
    tokens = [t.strip() for t in text.split(",") if t.strip()]
    return [int(t) for t in tokens] if tokens and all(t.isdigit() for t in tokens) else None


def _within_step(listed: list[int], step: list[int] | None) -> list[int]:
    """Indices of a launcher variable as the node's: counted within Slurm's
    GPU list where they all fit it."""
    if step and all(j < len(step) for j in listed):
        return [step[j] for j in listed]
    return listed


#: CUDA's order and the PCI order name the same GPUs of one model alike
_OTHER_ORDER = {"cuda": "nvml", "nvml": "cuda"}


def same_device(a: str | None, b: str | None) -> bool:
    """Whether two device names name one GPU (``cuda:N`` is ``nvml:N``)."""
    if a is None or b is None:
        return False
    if a == b:
        return True
    ka, _, ia = a.partition(":")
    kb, _, ib = b.partition(":")
    return ia == ib and _OTHER_ORDER.get(ka) == kb


def _by_bus_id(gpu: RankGpu, listed: list[tuple[str | None, str]]) -> str | None:
    """The device of the bus id a rank opened, among ``(device, bus id)``."""
    bus = gpu.pci.lower()
    hits = [d for d, b in listed if b.lower() == bus]
    if not hits and bus[-2:-1] == ".":   # a partition's bus id: the function digit is its number
        whole = bus[:-1] + "0"
        parts = [d for d, b in listed if b.lower() == whole]
        part = int(bus[-1], 16)
        hits = [parts[part]] if part < len(parts) else []
    if len(hits) > 1:   # partitions of one GPU: the index decides among them
        hits = [d for d in hits if same_device(d, gpu.device)] or hits[:1]
    return hits[0] if hits else None


def rank_devices(trace) -> list[tuple[RankGpu | None, str | None]]:
    """Each rank's record and the device it used on its node (None where
    the record does not pin one)."""
    from .hwloc_gpus import gpu_bus_ids

    bus_ids: dict[str, list] = {}
    records: dict = {}   # ranks of different nodes often hold the same record: read each once
    out = []
    for text, host in zip(trace.gpus, trace.hosts):
        gpu = records[text] if text in records else records.setdefault(text, read_record(text))
        device = None
        if gpu is not None and gpu.pci and host is not None:
            if host not in bus_ids:
                xml = trace.host_topology_xml.get(host)
                bus_ids[host] = gpu_bus_ids(xml) if xml else []
            device = _by_bus_id(gpu, bus_ids[host])
        out.append((gpu, device or (gpu.device if gpu is not None else None)))
    return out


def gpu_placement(trace, topology) -> tuple[np.ndarray | None, str | None]:
    """``(pe_of_rank, note)``: the GPU PE of ``topology`` each rank of
    ``trace`` used, on its recorded host, or ``(None, why)`` when a rank's
    GPU is not known or two ranks name one GPU (``(None, None)``: the trace
    recorded no GPU at all)."""
    if not any(trace.gpus):
        return None, None
    where: dict[tuple[str, str], int] = {}
    for pe, (h, d) in enumerate(zip(topology.pe_host, topology.pe_device)):
        if d is not None:
            where[(h, d)] = pe
    for (h, d), pe in list(where.items()):   # cuda:N where the node says nvml:N, and back
        kind, _, index = d.partition(":")
        if kind in _OTHER_ORDER:
            where.setdefault((h, f"{_OTHER_ORDER[kind]}:{index}"), pe)
    named = list(dict.fromkeys(topology.pe_host))
    recorded = [h for h in dict.fromkeys(trace.hosts) if h is not None]
    # hosts the machine does not name (another allocation): matched in order of first appearance
    rename = {h: h for h in recorded} if set(recorded) <= set(named) else dict(zip(recorded, named))
    out = np.full(trace.nranks, -1, dtype=np.int64)
    unknown = []
    for r, ((_gpu, device), ran_on) in enumerate(zip(rank_devices(trace), trace.hosts)):
        host = rename.get(ran_on)
        pe = where.get((host, device)) if device else None
        if pe is None:
            unknown.append(r)
        else:
            out[r] = pe
    if unknown:
        return None, (f"the GPU of {len(unknown)} of {trace.nranks} ranks (rank {unknown[0]} first) is "
                      "not known on its node: the launch order stands for where they ran")
    if np.unique(out).size != out.size:
        return None, ("ranks of the trace shared GPUs: the launch order (one rank per GPU) stands for "
                      "where they ran")
    return out, None


def rank_gpu_lines(trace) -> list[str]:
    """One line per rank: its host, the GPU it used and how that is known."""
    lines = []
    for r, ((gpu, device), host) in enumerate(zip(rank_devices(trace), trace.hosts)):
        shown = device or (gpu.pci if gpu is not None else None) or "?"
        said = gpu.said if gpu is not None else "not recorded"
        lines.append(f"{r:>6}  {host or '?':<16} {shown:<14} {said}")
    return lines
