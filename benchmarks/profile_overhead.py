"""Overhead of rankmap.profile: per intercepted call, ping-pong, whole program.

    python benchmarks/profile_overhead.py [--quick]

1. per-call: one process, the same call on a plain and on a recording
   communicator (COMM_SELF, message to itself), best CPU time of several
   repeats; the difference is what the wrapper adds per call.
2. ping-pong 8 B .. 1 MiB on 2 ranks (mpiexec), plain vs under
   ``python -m rankmap.profile``: time per round trip.
3. a halo-exchange program (profiling/halo2d.py, 4 ranks): wall time plain vs
   profiled (includes the profiler's start-up and trace writing).
Timings on a shared machine are noisy: the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def best_per_call(fn, number: int, repeat: int) -> float:
    """Best CPU time per call of this thread (time.thread_time): on a loaded
    machine wall time mostly measures waiting for a core."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        for _ in range(number):
            fn()
        best = min(best, (time.thread_time() - t0) / number)
    return best * 1e6


def _isend_recv(c, sbuf, rbuf):
    req = c.Isend(sbuf, 0, 1)
    c.Recv(rbuf, 0, 1)
    req.Wait()


def _recv_send(c, spec, rbuf):
    req = c.Irecv(rbuf, 0, 2)
    c.Send(spec, 0, 2)
    req.Wait()


def per_call(number: int, repeat: int) -> list[tuple[str, float, float]]:
    import numpy as np
    from mpi4py import MPI

    import rankmap.profile as rp

    plain = MPI.COMM_SELF
    tmp = tempfile.mkdtemp()
    rec = rp.start(MPI.COMM_SELF, output=os.path.join(tmp, "bench.rmtrace.npz"), topology=False,
                   flush_interval=0, write_at_exit=False)
    s8, r8 = np.zeros(1), np.zeros(1)
    obj = {"a": 1}
    x = np.zeros(8)
    cases = {
        "Sendrecv 8 B (self)": lambda c: c.Sendrecv(s8, 0, 0, r8, 0, 0),
        "Isend+Recv 8 B (self)": lambda c: _isend_recv(c, s8, r8),
        "Isend PROC_NULL": lambda c: c.Isend(s8, MPI.PROC_NULL).Wait(),
        "Send [buf, count, type]": lambda c: _recv_send(c, [s8, 1, MPI.DOUBLE], r8),
        "sendrecv (pickled obj)": lambda c: c.sendrecv(obj, 0, source=0),
        "Allreduce 64 B": lambda c: c.Allreduce(MPI.IN_PLACE, x),
        "Bcast 64 B": lambda c: c.Bcast(x, 0),
    }
    rows = []
    for name, call in cases.items():
        base = best_per_call(lambda: call(plain), number, repeat)
        prof = best_per_call(lambda: call(rec), number, repeat)
        rows.append((name, base, prof))
    return rows


PINGPONG = r"""
import json, sys, time
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
me = c.Get_rank()
out = {}
for size in [8, 64, 1024, 16384, 131072, 1048576]:
    buf = np.zeros(size, dtype=np.uint8)
    iters = max(20, min(2000, 20_000_000 // (size * 50 + 1)))
    best = 1e9
    for rep in range(3):
        c.Barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            if me == 0:
                c.Send(buf, 1, 0); c.Recv(buf, 1, 0)
            else:
                c.Recv(buf, 0, 0); c.Send(buf, 0, 0)
        best = min(best, (time.perf_counter() - t0) / iters)
    out[size] = best * 1e6
if me == 0:
    print("RESULT " + json.dumps(out))
"""


def mpiexec() -> str:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else "mpiexec"


def run_mpi(n, args, cwd):
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    t0 = time.perf_counter()
    proc = subprocess.run([mpiexec(), "-n", str(n), sys.executable, *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"failed: {args}\n{proc.stderr[-2000:]}")
    return proc.stdout, wall


def pingpong(tmp) -> dict:
    script = Path(tmp) / "pingpong.py"
    script.write_text(PINGPONG)
    res = {}
    for label, pre in (("plain", []), ("profiled", ["-m", "rankmap.profile", "--no-topology", "-o",
                                                     str(Path(tmp) / "pp.rmtrace.npz")])):
        out, _ = run_mpi(2, [*pre, str(script)], tmp)
        line = next(ln for ln in out.splitlines() if ln.startswith("RESULT "))
        res[label] = {int(k): v for k, v in json.loads(line[7:]).items()}
    return res


def halo(tmp, iters: int, repeat: int) -> tuple[float, float]:
    prog = str(ROOT / "profiling" / "halo2d.py")
    args = [prog, "--n", "64", "--iters", str(iters)]
    plain = min(run_mpi(4, args, tmp)[1] for _ in range(repeat))
    prof = min(run_mpi(4, ["-m", "rankmap.profile", "--no-topology", "-o",
                           str(Path(tmp) / "h.rmtrace.npz"), *args], tmp)[1] for _ in range(repeat))
    return plain, prof


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--part", choices=["all", "percall", "pingpong", "halo"], default="all")
    a = ap.parse_args()
    number, repeat = (5000, 3) if a.quick else (20000, 5)
    if a.part in ("all", "percall"):
        print(f"1. per intercepted call, one process, CPU time (best of {repeat} x {number}; "
              f"load {loadavg()})")
        print(f"{'call':<28}{'plain us':>10}{'profiled us':>13}{'added us':>10}")
        for name, base, prof in per_call(number, repeat):
            print(f"{name:<28}{base:>10.3f}{prof:>13.3f}{prof - base:>10.3f}")
    with tempfile.TemporaryDirectory() as tmp:
        if a.part in ("all", "pingpong"):
            print(f"\n2. ping-pong, 2 ranks, time per round trip (best of 3; load {loadavg()})")
            res = pingpong(tmp)
            print(f"{'bytes':>9}{'plain us':>11}{'profiled us':>13}{'added us':>10}")
            for size in res["plain"]:
                b, p = res["plain"][size], res["profiled"][size]
                print(f"{size:>9}{b:>11.2f}{p:>13.2f}{p - b:>10.2f}")
        if a.part in ("all", "halo"):
            iters = 100 if a.quick else 400
            plain, prof = halo(tmp, iters, 2 if a.quick else 3)
            print(f"\n3. halo2d.py, 4 ranks, {iters} iterations, wall time incl. start-up "
                  f"(best of runs; load {loadavg()})")
            print(f"plain {plain:.2f} s   profiled {prof:.2f} s   ratio {prof / plain:.3f}")


if __name__ == "__main__":
    main()
