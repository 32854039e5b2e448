"""Overhead of rankmap.profile: per intercepted call, ping-pong, whole program.

    python benchmarks/profile_overhead.py [--quick] [--part percall|pingpong|halo] [--runs N]

1. per-call: one process, the same call on a plain and on a recording
   communicator (COMM_SELF, message to itself), best CPU time of several
   repeats; the difference is what the wrapper adds per call.
2. 2 ranks (mpiexec), plain vs under ``python -m rankmap.profile``: ping-pong
   8 B .. 1 MiB (time per round trip) and Allreduce/Bcast of 8 B (time per
   call), with the added time per intercepted call.
3. a halo-exchange program (profiling/halo2d.py, 4 ranks): wall time (start-up
   and trace writing included) and its own loop time, plain vs profiled, and
   the added loop time per intercepted Sendrecv.
Multi-process figures are medians over plain and profiled jobs run
alternately (so a change of load hits both alike), with their spread.
Timings on a shared machine are noisy: the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def best_per_call(fns, number: int, repeat: int) -> list[float]:
    """Best CPU time per call of this thread (time.thread_time: on a loaded
    machine wall time mostly measures waiting for a core) of each function,
    their repeats interleaved so that a busy moment hits them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.thread_time()
            for _ in range(number):
                fn()
            best[i] = min(best[i], (time.thread_time() - t0) / number)
    return [b * 1e6 for b in best]


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
        base, prof = best_per_call([lambda: call(plain), lambda: call(rec)], number, repeat)
        rows.append((name, base, prof))
    return rows


PINGPONG = r"""
import json, sys, time
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
me = c.Get_rank()
reps = int(sys.argv[1])
out = {}
for size in [8, 64, 1024, 16384, 131072, 1048576]:
    buf = np.zeros(size, dtype=np.uint8)
    iters = max(20, min(1000, 10_000_000 // (size * 50 + 1)))
    times = []
    for rep in range(reps):
        c.Barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            if me == 0:
                c.Send(buf, 1, 0); c.Recv(buf, 1, 0)
            else:
                c.Recv(buf, 0, 0); c.Send(buf, 0, 0)
        times.append((time.perf_counter() - t0) / iters * 1e6)
    out[f"pingpong {size}"] = times
x = np.zeros(1)
for name, call in (("Allreduce 8 B", lambda: c.Allreduce(MPI.IN_PLACE, x)),
                   ("Bcast 8 B", lambda: c.Bcast(x, 0))):
    times = []
    for rep in range(reps):
        c.Barrier()
        t0 = time.perf_counter()
        for _ in range(1000):
            call()
        times.append((time.perf_counter() - t0) / 1000 * 1e6)
    out[name] = times
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


def profiled(tmp, name):
    return ["-m", "rankmap.profile", "--no-topology", "-o", str(Path(tmp) / f"{name}.rmtrace.npz")]


def pingpong(tmp, runs: int, reps: int) -> dict:
    """{case: {"plain": [us...], "profiled": [us...]}}: every repetition of
    ``runs`` job pairs, plain and profiled jobs alternating so that a change
    of machine load hits both alike."""
    script = Path(tmp) / "pingpong.py"
    script.write_text(PINGPONG)
    res: dict = {}
    for _ in range(runs):
        for label, pre in (("plain", []), ("profiled", profiled(tmp, "pp"))):
            out, _ = run_mpi(2, [*pre, str(script), str(reps)], tmp)
            line = next(ln for ln in out.splitlines() if ln.startswith("RESULT "))
            for case, times in json.loads(line[7:]).items():
                res.setdefault(case, {"plain": [], "profiled": []})[label].extend(times)
    return res


HALO_CALLS = 4  # Sendrecv calls per iteration and rank in halo2d.py


def halo(tmp, iters: int, runs: int) -> dict:
    """Wall time (start-up and trace writing included) and the program's own
    loop time, plain and profiled jobs alternating."""
    args = [str(ROOT / "profiling" / "halo2d.py"), "--n", "64", "--iters", str(iters)]
    res = {"plain": ([], []), "profiled": ([], [])}
    for _ in range(runs):
        for label, pre in (("plain", []), ("profiled", profiled(tmp, "h"))):
            out, wall = run_mpi(4, [*pre, *args], tmp)
            loop = float(re.search(r"time ([0-9.]+)s", out).group(1))
            res[label][0].append(wall)
            res[label][1].append(loop)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--part", choices=["all", "percall", "pingpong", "halo"], default="all")
    ap.add_argument("--runs", type=int, default=7, help="plain/profiled job pairs per multi-process case")
    a = ap.parse_args()
    number, repeat = (5000, 3) if a.quick else (10000, 15)
    if a.part in ("all", "percall"):
        print(f"1. per intercepted call, one process, CPU time (best of {repeat} x {number}; "
              f"load {loadavg()})")
        print(f"{'call':<28}{'plain us':>10}{'profiled us':>13}{'added us':>10}")
        for name, base, prof in per_call(number, repeat):
            print(f"{name:<28}{base:>10.3f}{prof:>13.3f}{prof - base:>10.3f}")
    runs, reps = (2, 3) if a.quick else (a.runs, 5)
    with tempfile.TemporaryDirectory() as tmp:
        if a.part in ("all", "pingpong"):
            load0 = loadavg()
            res = pingpong(tmp, runs, reps)
            print(f"\n2. 2 ranks: time per round trip (ping-pong) or per call, median of {runs} jobs "
                  f"x {reps} repetitions (load {load0} -> {loadavg()})")
            print(f"{'case':<18}{'plain us':>10}{'spread':>8}{'profiled us':>13}{'added us':>10}"
                  f"{'per call':>10}")
            for case, t in res.items():
                base, prof = median(t["plain"]), median(t["profiled"])
                calls = 2 if case.startswith("pingpong") else 1  # wrapped calls on the critical path
                print(f"{case:<18}{base:>10.2f}{spread(t['plain']):>7.0%} {prof:>12.2f}"
                      f"{prof - base:>10.2f}{(prof - base) / calls:>10.2f}")
            print("spread: interquartile range of the plain runs / median; per call: a round trip "
                  "has two intercepted Sends on its critical path")
        if a.part in ("all", "halo"):
            iters = 100 if a.quick else 400
            load0 = loadavg()
            res = halo(tmp, iters, runs)
            (wall0, loop0), (wall1, loop1) = ([median(x) for x in res[k]] for k in ("plain", "profiled"))
            calls = iters * HALO_CALLS
            print(f"\n3. halo2d.py, 4 ranks, {iters} iterations ({calls} Sendrecv per rank), "
                  f"median of {runs} jobs each (load {load0} -> {loadavg()})")
            print(f"{'':<22}{'plain':>9}{'profiled':>10}{'added':>9}")
            print(f"{'wall incl. start-up s':<22}{wall0:>9.3f}{wall1:>10.3f}{wall1 - wall0:>9.3f}")
            print(f"{'loop s':<22}{loop0:>9.3f}{loop1:>10.3f}{loop1 - loop0:>9.3f}")
            print(f"added per intercepted call (loop): {(loop1 - loop0) / calls * 1e6:.2f} us; "
                  f"loop spread plain {spread(res['plain'][1]):.0%}, profiled {spread(res['profiled'][1]):.0%}")


def spread(values) -> float:
    """Interquartile range relative to the median: how much to trust a median."""
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return (q[2] - q[0]) / q[1]


if __name__ == "__main__":
    main()
