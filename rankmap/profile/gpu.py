"""Which GPU this rank used: the record the trace keeps beside its host and
CPU binding, so that on GPU nodes the "before" of ``rankmap map`` is where
the ranks really ran.

Two sources, both cheap and neither loading anything the program did not:

- the visible-device variables the launcher or the user set
  (``VISIBLE_VARIABLES``: ROCR/HIP/CUDA_VISIBLE_DEVICES, ZE_AFFINITY_MASK,
  Slurm's step and job GPUs), read at any time;
- the devices the rank opened, asked at the end of the run of a GPU runtime
  already loaded and started in this process (``opened``): the CUDA driver
  (``libcuda``, under CUDA, CuPy and PyTorch alike) and the HIP runtime
  (``libamdhip64``), found among the process's mapped libraries and opened
  with ``RTLD_NOLOAD``, so that a program that never touched a GPU stays
  without a runtime.  Each device opened (a primary context active) is
  recorded by its ordinal (the index the program used) and PCI bus id,
  and the calling thread's current device beside them.

``rankmap.topology.rank_gpus`` turns a record into the device on the node.
Standard library only: it runs inside every rank.
"""

from __future__ import annotations

import ctypes
import json
import os

#: variables that say which GPUs a rank sees, read as the launcher left them
VISIBLE_VARIABLES = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
                     "CUDA_DEVICE_ORDER", "GPU_DEVICE_ORDINAL", "ZE_AFFINITY_MASK",
                     "ZE_FLAT_DEVICE_HIERARCHY", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS")

_BUS_ID_LENGTH = 64


def visible(environ=None) -> dict[str, str]:
    """The visible-device variables that are set."""
    env = os.environ if environ is None else environ
    return {k: env[k] for k in VISIBLE_VARIABLES if k in env}


def record(environ=None, *, probe: bool = True) -> str | None:
    """This rank's GPU record as JSON text (None when nothing says
    anything): ``{"env": {...}, "opened": [{"api", "ordinal", "pci"}],
    "current": {"api", "ordinal", "pci"}}``; ``probe`` asks the loaded runtimes (call it from
    the program's main thread: a runtime's current device is per thread)."""
    out: dict = {}
    env = visible(environ)
    if env:
        out["env"] = env
    if probe:
        for api, ask in (("cuda", _cuda), ("hip", _hip)):
            try:
                found = ask()
            except (OSError, AttributeError):   # a runtime of another version or a broken install
                found = None
            if found is None:
                continue
            devices, current = found
            if devices:
                out.setdefault("opened", []).extend({"api": api, "ordinal": o, "pci": p} for o, p in devices)
            if current is not None and "current" not in out:
                out["current"] = {"api": api, "ordinal": current[0], "pci": current[1]}
    return json.dumps(out, separators=(",", ":"), sort_keys=True) if out else None


def _loaded(stem: str) -> str | None:
    """Path of the shared library ``stem*`` this process has mapped."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                path = line.rstrip("\n").split(None, 5)[-1]
                if os.path.basename(path).startswith(stem):
                    return path
    except OSError:
        return None
    return None


def _library(stem: str):
    path = _loaded(stem)
    if path is None:
        return None
    return ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)   # OSError if it went away


def _bus_id(fn, device) -> str | None:
    buf = ctypes.create_string_buffer(_BUS_ID_LENGTH)
    if fn(buf, _BUS_ID_LENGTH, device) != 0:
        return None
    return buf.value.decode("ascii", "replace").lower()


def _cuda():
    """``([(ordinal, bus id)], (ordinal, bus id) or None)``: the devices
    whose primary context is active and the calling thread's current
    device, of the CUDA driver the
    process started, or None (not loaded, or never initialised: the driver
    then answers CUDA_ERROR_NOT_INITIALIZED and nothing is started here)."""
    cu = _library("libcuda.so")
    if cu is None:
        return None
    count = ctypes.c_int(0)
    if cu.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None
    devices = []
    for ordinal in range(count.value):
        dev, flags, active = ctypes.c_int(0), ctypes.c_uint(0), ctypes.c_int(0)
        if cu.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
            continue
        if cu.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(active)) == 0 and active.value:
            devices.append((ordinal, _bus_id(cu.cuDeviceGetPCIBusId, dev)))
    current = None
    ctx, dev = ctypes.c_void_p(), ctypes.c_int(-1)
    if cu.cuCtxGetCurrent(ctypes.byref(ctx)) == 0 and ctx.value and cu.cuCtxGetDevice(ctypes.byref(dev)) == 0:
        current = (dev.value, _bus_id(cu.cuDeviceGetPCIBusId, dev))   # a CUdevice is its ordinal
    return devices, current


def _kfd_open() -> bool:
    """Whether this process opened the ROCm kernel driver (the HIP runtime
    started): asking an unstarted runtime would start it."""
    try:
        return any(os.readlink(f"/proc/self/fd/{fd}") == "/dev/kfd" for fd in os.listdir("/proc/self/fd"))
    except OSError:
        return False


def _hip():
    """Like ``_cuda`` for the HIP runtime, asked only once it started."""
    hip = _library("libamdhip64.so")
    if hip is None or not _kfd_open():
        return None
    count = ctypes.c_int(0)
    if hip.hipGetDeviceCount(ctypes.byref(count)) != 0:
        return None
    devices = []
    for ordinal in range(count.value):
        flags, active = ctypes.c_uint(0), ctypes.c_int(0)
        if hip.hipDevicePrimaryCtxGetState(ordinal, ctypes.byref(flags), ctypes.byref(active)) == 0 \
                and active.value:
            devices.append((ordinal, _bus_id(hip.hipDeviceGetPCIBusId, ordinal)))
    current = ctypes.c_int(-1)
    if hip.hipGetDevice(ctypes.byref(current)) != 0:
        return devices, None
    return devices, (current.value, _bus_id(hip.hipDeviceGetPCIBusId, current.value))
