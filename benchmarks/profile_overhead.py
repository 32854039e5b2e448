"""Overhead of rankmap.profile: per intercepted call, ping-pong, whole program.

    python benchmarks/profile_overhead.py [--quick] [--part percall|pingpong|halo] [--runs N]

1. per-call: one process, the same call on a plain and on a recording
   communicator (COMM_SELF, message to itself), best CPU time of several
   repeats; the difference is what the wrapper adds per call.
2. 2 ranks (mpiexec), plain vs under ``python -m rankmap.profile``: ping-pong
   8 B .. 1 MiB (time per round trip) and Allreduce/Bcast of 8 B (time per
   call), timed in many short chunks, with the added time per intercepted call.
3. a halo-exchange program (profiling/halo2d.py, 2 ranks by default: one per
   core here): wall time (start-up and trace writing included) and its own
   loop time, plain vs profiled, and the added loop time per Sendrecv.
4. a part-file flush (``--part flush``): one rank's periodic flush when its
   counters changed (a write: temp file + rename) and when they did not (a
   comparison and a touch), for rows of 2 .. 4096 peers; with the flush
   interval T the background cost is at most (write time) / T.
Multi-process figures come from plain and profiled jobs run alternately (so
a change of load hits both alike): medians, and the 10th percentile of the
chunks (resp. the fastest job), which scheduling delays on a busy machine
do not reach.  The load average is printed beside every table.
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
    # the event log on and never full: room for every call's events (at most 6 a call, 72 bytes each)
    rec = rp.start(MPI.COMM_SELF, output=os.path.join(tmp, "bench.rmtrace.npz"), topology=False,
                   flush_interval=0, write_at_exit=False, max_events=6 * 7 * 2 * number * repeat)
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
chunks = int(sys.argv[1])


def sample(step, iters):
    # time per iteration of `chunks` short chunks: on a busy machine some
    # chunks run with both ranks on a core, and the low percentiles show it
    times = []
    for _ in range(chunks):
        c.Barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        times.append((time.perf_counter() - t0) / iters * 1e6)
    return times


out = {}
for size in [8, 64, 1024, 16384, 131072, 1048576]:
    buf = np.zeros(size, dtype=np.uint8)
    if me == 0:
        step = lambda: (c.Send(buf, 1, 0), c.Recv(buf, 1, 0))
    else:
        step = lambda: (c.Recv(buf, 0, 0), c.Send(buf, 0, 0))
    out[f"pingpong {size}"] = sample(step, max(5, min(50, 400_000 // size)))
x = np.zeros(1)
out["Allreduce 8 B"] = sample(lambda: c.Allreduce(MPI.IN_PLACE, x), 50)
out["Bcast 8 B"] = sample(lambda: c.Bcast(x, 0), 50)
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


FLUSH_INTERVAL: list[str] = []  # --flush-interval passed to the profiled jobs


def profiled(tmp, name):
    return ["-m", "rankmap.profile", "--no-topology", *FLUSH_INTERVAL,
            "-o", str(Path(tmp) / f"{name}.rmtrace.npz")]


def flush_costs(repeat: int) -> list[tuple[int, float, float, int]]:
    """(peers, ms per changed flush, ms per unchanged flush, part bytes) of
    one rank's ``Session.write_part`` (one process, no mpiexec)."""
    from rankmap.profile.session import Session

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for peers in (2, 64, 1024, 4096):
            session = Session(Path(tmp) / f"f{peers}.rmtrace.npz", topology=False, flush_interval=0)
            session.recorder = type(session.recorder)(peers + 1, 0)
            counters = session.recorder.active
            changed, same = [], []
            for i in range(repeat):
                for p in range(1, peers + 1):
                    counters.pb[p] += 100 + i
                    counters.pm[p] += 1
                t0 = time.perf_counter()
                session.write_part("flushed")
                changed.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                session.write_part("flushed")
                same.append(time.perf_counter() - t0)
            rows.append((peers, 1e3 * median(changed), 1e3 * median(same), session.part.stat().st_size))
            session.finished = True
    return rows


def pingpong(tmp, runs: int, chunks: int) -> dict:
    """{case: {"plain": [us...], "profiled": [us...]}}: every chunk of
    ``runs`` job pairs, plain and profiled jobs alternating so that a change
    of machine load hits both alike."""
    script = Path(tmp) / "pingpong.py"
    script.write_text(PINGPONG)
    res: dict = {}
    for _ in range(runs):
        for label, pre in (("plain", []), ("profiled", profiled(tmp, "pp"))):
            out, _ = run_mpi(2, [*pre, str(script), str(chunks)], tmp)
            line = next(ln for ln in out.splitlines() if ln.startswith("RESULT "))
            for case, times in json.loads(line[7:]).items():
                res.setdefault(case, {"plain": [], "profiled": []})[label].extend(times)
    return res


HALO_CALLS = 4  # Sendrecv calls per iteration and rank in halo2d.py


def halo(tmp, ranks: int, iters: int, runs: int) -> dict:
    """Wall time (start-up and trace writing included) and the program's own
    loop time, plain and profiled jobs alternating."""
    args = [str(ROOT / "profiling" / "halo2d.py"), "--n", "64", "--iters", str(iters)]
    res = {"plain": ([], []), "profiled": ([], [])}
    for _ in range(runs):
        for label, pre in (("plain", []), ("profiled", profiled(tmp, "h"))):
            out, wall = run_mpi(ranks, [*pre, *args], tmp)
            loop = float(re.search(r"time ([0-9.]+)s", out).group(1))
            res[label][0].append(wall)
            res[label][1].append(loop)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--part", choices=["all", "percall", "pingpong", "halo", "flush"], default="all")
    ap.add_argument("--flush-interval", default=None, metavar="SEC",
                    help="the profiled jobs' --flush-interval (default: the profiler's)")
    ap.add_argument("--halo-iters", type=int, default=None, help="halo iterations (default 400)")
    ap.add_argument("--runs", type=int, default=7, help="plain/profiled job pairs per multi-process case")
    ap.add_argument("--halo-ranks", type=int, default=2, help="ranks of the halo program (2: one per core here)")
    a = ap.parse_args()
    if a.flush_interval is not None:
        FLUSH_INTERVAL[:] = ["--flush-interval", a.flush_interval]
    if a.part in ("all", "flush"):
        print(f"4. one rank's part-file flush, median of 20 (load {loadavg()})")
        print(f"{'peers':>6}{'changed ms':>12}{'unchanged ms':>14}{'part bytes':>12}")
        for peers, wrote, skipped, size in flush_costs(20):
            print(f"{peers:>6}{wrote:>12.2f}{skipped:>14.3f}{size:>12}")
        if a.part == "flush":
            return
    number, repeat = (5000, 3) if a.quick else (10000, 15)
    if a.part in ("all", "percall"):
        print(f"1. per intercepted call, one process, CPU time (best of {repeat} x {number}; "
              f"load {loadavg()})")
        print(f"{'call':<28}{'plain us':>10}{'profiled us':>13}{'added us':>10}")
        for name, base, prof in per_call(number, repeat):
            print(f"{name:<28}{base:>10.3f}{prof:>13.3f}{prof - base:>10.3f}")
    runs, chunks = (2, 10) if a.quick else (a.runs, 40)
    with tempfile.TemporaryDirectory() as tmp:
        if a.part in ("all", "pingpong"):
            load0 = loadavg()
            res = pingpong(tmp, runs, chunks)
            print(f"\n2. 2 ranks: us per round trip (ping-pong) or per call; median and 10th percentile "
                  f"of {runs} jobs x {chunks} chunks (load {load0} -> {loadavg()})")
            print(f"{'case':<17}{'plain med/p10':>16}{'profiled med/p10':>19}{'added per call med/p10':>25}")
            for case, t in res.items():
                calls = 2 if case.startswith("pingpong") else 1  # wrapped calls on the critical path
                base, prof = summary(t["plain"]), summary(t["profiled"])
                added = [(p - b) / calls for p, b in zip(prof, base)]
                print(f"{case:<17}{pair(base):>16}{pair(prof):>19}{pair(added):>25}")
            print("a round trip has two intercepted Sends on its critical path: added per call = added / 2")
        if a.part in ("all", "halo"):
            iters = a.halo_iters or (100 if a.quick else 400)
            load0 = loadavg()
            res = halo(tmp, a.halo_ranks, iters, runs)
            calls = iters * HALO_CALLS
            print(f"\n3. halo2d.py, {a.halo_ranks} ranks, {iters} iterations ({calls} Sendrecv per rank), "
                  f"median and minimum of {runs} jobs each (load {load0} -> {loadavg()})")
            print(f"{'':<22}{'plain med/min':>16}{'profiled med/min':>19}{'added med/min':>16}")
            for row, k, unit in (("wall incl. start-up s", 0, 1), ("loop s", 1, 1),
                                 ("loop per call us", 1, 1e6 / calls)):
                base, prof = (best_and_median(res[label][k], unit) for label in ("plain", "profiled"))
                print(f"{row:<22}{pair(base, 3):>16}{pair(prof, 3):>19}"
                      f"{pair([p - b for p, b in zip(prof, base)], 3):>16}")


def summary(values) -> tuple[float, float]:
    """(median, 10th percentile): scheduling delays only add time, so the low
    percentile is what a call costs when both ranks hold a core."""
    return median(values), statistics.quantiles(values, n=10)[0] if len(values) > 1 else values[0]


def best_and_median(values, scale) -> tuple[float, float]:
    return median(values) * scale, min(values) * scale


def pair(values, digits: int = 2) -> str:
    return " / ".join(f"{v:.{digits}f}" for v in values)


if __name__ == "__main__":
    main()
