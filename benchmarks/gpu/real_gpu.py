"""On a machine with a real GPU: the profiler records the GPU each rank
opened, and the documented reorder_comm example runs on it.

    /opt/torch/.venv/bin/python3 benchmarks/gpu/real_gpu.py [--ranks 4] [--wheels .whl]

From the repository root, rankmap installed from it (``pip install -e .``
compiles its kernels).  MPICH comes from
the ``mpich`` wheel in WHEELS, unpacked into /tmp (its ``data/bin`` and
``data/lib`` first on PATH and LD_LIBRARY_PATH), mpi4py (and the
partitioners rankmap imports) from their wheels there (``pip install
--no-index --target``) where this Python lacks them.

1. ``torch_pairs.py`` under ``python -m rankmap.profile`` with no
   visible-device variable set: each rank opens the GPU through PyTorch;
   the trace must name, for every rank, the PCI bus id PyTorch reports.
2. ``examples/reorder_on_gpus.py`` (gpus=True: this machine's GPUs): every
   rank must be told a GPU, open it and get its partner's block, with no
   fallback.

Exits non-zero with the failed check's message; prints a short summary.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
                 "ZE_AFFINITY_MASK", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_DEVICE_ORDER")


def fail(message: str) -> None:
    print(f"real_gpu: FAILED: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def mpich_from_wheel(wheels: Path, into: Path) -> dict:
    """The environment that puts the wheel's MPICH first."""
    wheel = next(iter(sorted(wheels.glob("mpich-*.whl"))), None)
    if wheel is None:
        fail(f"no mpich wheel in {wheels}")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(into)
        for info in z.infolist():   # zipfile drops the executable bits
            mode = info.external_attr >> 16
            if mode:
                os.chmod(into / info.filename, mode & 0o777)
    data = next(into.glob("mpich-*.data")) / "data"
    for exe in (data / "bin").iterdir():
        exe.chmod(exe.stat().st_mode | 0o755)
    return {"PATH": f"{data / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "LD_LIBRARY_PATH": f"{data / 'lib'}{os.pathsep}{os.environ.get('LD_LIBRARY_PATH', '')}"}


#: what rankmap needs beyond numpy, scipy and lxml, installed from WHEELS where this Python lacks it
FROM_WHEELS = ("mpi4py", "kahip", "kaminpar", "mtkahypar")


def wheels_path(wheels: Path, into: Path) -> str:
    """A directory to put on PYTHONPATH holding the ``FROM_WHEELS`` this
    Python lacks, installed from WHEELS ('' when it lacks none)."""
    import importlib.util

    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    missing = [name for name in FROM_WHEELS if importlib.util.find_spec(name) is None
               and (name == "mpi4py" or any(wheels.glob(f"{name}-*-{tag}-*.whl")))]
    if not missing:
        return ""
    site = into / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--find-links",
                           str(wheels), "--target", str(site), *missing], capture_output=True, text=True)
    if proc.returncode != 0 and "No module named pip" in proc.stderr:   # a Python without pip: a wheel is a zip
        for name in missing:
            for wheel in wheels.glob(f"{name}-*-{tag}-*.whl"):
                zipfile.ZipFile(wheel).extractall(site)
    elif proc.returncode != 0:
        fail(f"pip could not install {', '.join(missing)} from {wheels}: {proc.stderr[-400:]}")
    return str(site)


def run(cmd: list[str], env: dict, timeout: float, what: str) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        fail(f"{what} took over {timeout:.0f} s")
    if proc.returncode != 0:
        fail(f"{what} exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc


def bus_tuple(text: str | None) -> tuple[int, int, int] | None:
    """(domain, bus, device) of a PCI bus id such as 0000:19:00.0 or 00000000:19:00.0."""
    m = re.fullmatch(r"([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.[0-9a-fA-F]", text or "")
    return None if m is None else tuple(int(x, 16) for x in m.groups())


def recorded_gpus(env: dict, ranks: int, work: Path) -> str:
    from rankmap.trace import read_trace

    trace = work / "torch.rmtrace.npz"
    run(["mpiexec", "-n", str(ranks), sys.executable, "-m", "rankmap.profile", "-o", str(trace),
         str(ROOT / "benchmarks" / "gpu" / "torch_pairs.py"), str(work)], env, 150, "the profiled torch run")
    t = read_trace(trace)
    buses = set()
    for r, text in enumerate(t.gpus):
        if not text:
            fail(f"rank {r}: the trace recorded no GPU")
        rec = json.loads(text)
        if "env" in rec:
            fail(f"rank {r}: visible-device variables recorded though none was set: {rec['env']}")
        current = rec.get("current") or {}
        torch_said = json.loads((work / f"rank{r}.json").read_text())["bus"]
        if current.get("api") != "cuda" or current.get("ordinal") != 0:
            fail(f"rank {r}: recorded {rec}, expected the CUDA device 0 it opened")
        if None not in torch_said and bus_tuple(current.get("pci")) != tuple(torch_said):
            fail(f"rank {r}: recorded bus id {current.get('pci')}, PyTorch says {torch_said}")
        buses.add(current.get("pci"))
    shown = run([sys.executable, "-m", "rankmap", "show", str(trace), "--per", "gpu"], env, 60, "rankmap show")
    lines = shown.stdout.splitlines()
    head = next((i for i, line in enumerate(lines) if line.rstrip().endswith("known from")), len(lines))
    listing = "\n".join(lines[head:])
    return f"(1) {ranks} ranks, each recorded on {', '.join(sorted(buses))} (as PyTorch says)\n{listing}"


def reorder_example(env: dict, ranks: int) -> str:
    proc = run(["mpiexec", "-n", str(ranks), sys.executable, str(ROOT / "examples" / "reorder_on_gpus.py")],
               env, 150, "the reorder_comm example")
    rows = re.findall(r"rank (\d+) device (\S+) ordinal (\S+) got (\d+) fallback (\S+)", proc.stdout)
    if len(rows) != ranks:
        fail(f"the example printed {len(rows)} of {ranks} lines:\n{proc.stdout}\n{proc.stderr[-2000:]}")
    for rank, device, ordinal, got, fallback in rows:
        if fallback != "False" or device == "None" or ordinal != "0" or int(got) != int(rank) ^ 1:
            fail(f"rank {rank}: device {device}, ordinal {ordinal}, got {got}, fallback {fallback}\n"
                 f"{proc.stderr[-2000:]}")
    return f"(2) reorder_on_gpus.py, {ranks} ranks: devices {sorted({d for _r, d, *_ in rows})}, no fallback"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4, help="ranks of each run (even; default 4)")
    ap.add_argument("--wheels", type=Path, default=ROOT / ".whl", help="the mpich and mpi4py wheels")
    ap.add_argument("--only", choices=["record", "reorder"], help="one of the two checks")
    args = ap.parse_args()
    start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="rankmap-real-gpu-"))
    env = {k: v for k, v in os.environ.items() if k not in GPU_VARIABLES}
    env.update(mpich_from_wheel(args.wheels, work / "mpich"))
    extra = wheels_path(args.wheels, work)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), extra, env.get("PYTHONPATH", "")) if p)
    sys.path[:0] = [str(ROOT)] + ([extra] if extra else [])
    lines = []
    if args.only != "reorder":
        lines.append(recorded_gpus(env, args.ranks, work))
    if args.only != "record":
        lines.append(reorder_example(env, args.ranks))
    shutil.rmtree(work, ignore_errors=True)
    print("\n".join(lines))
    print(f"real_gpu: OK in {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
