"""Reading speed and peak memory of the trace readers on synthetic traces.

Writes one trace per format (OTF2 with the ``otf2`` writer API, DUMPI from
its format definition, liballprof and mpiP text), then reads each in a
fresh process and reports events per second and the reader's peak
resident memory.  Every rank sends to its right and left neighbours and
takes part in an allreduce every 16 rounds, so the pair table stays small
while the event count grows: bounded memory shows as a flat peak RSS.

    python benchmarks/trace_readers.py --events 2e6 [--ranks 64] [--formats otf2,dumpi]

The writers are also used by tests/test_trace_formats.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

# ------------------------------------------------------------------ OTF2


def write_otf2(path: str, ranks: int, rounds: int, threads: int = 1, sub_every: int = 0) -> dict:
    """Score-P-like trace: per round each rank enters MPI_Send, sends to
    rank+1 (and, every ``sub_every`` rounds, to its partner in a
    sub-communicator of the even ranks), leaves; every 16 rounds an
    allreduce of 8 bytes.  ``threads`` > 1 adds worker-thread locations
    whose sends count for their process.  Returns the expected p2p bytes
    per (src, dst) and the event count."""
    import _otf2
    import otf2
    from otf2.enums import CollectiveOp, GroupType, LocationGroupType, LocationType, Paradigm, RegionRole

    expected: dict = {}
    with otf2.writer.open(path, timer_resolution=1_000_000) as w:
        d = w.definitions
        root = d.system_tree_node("machine", class_name="machine")
        nodes = [d.system_tree_node(f"host{i}", class_name="node", parent=root)
                 for i in range((ranks + 3) // 4)]
        groups = [d.location_group(f"MPI Rank {r}", location_group_type=LocationGroupType.PROCESS,
                                   system_tree_parent=nodes[r // 4]) for r in range(ranks)]
        masters = [d.location("Master thread", type=LocationType.CPU_THREAD, group=g) for g in groups]
        workers = [d.location(f"thread {t}", type=LocationType.CPU_THREAD, group=g)
                   for g in groups for t in range(1, threads)]
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=masters)
        world = d.comm("MPI_COMM_WORLD", group=d.group("", group_type=GroupType.COMM_GROUP,
                                                       paradigm=Paradigm.MPI, members=masters))
        evens = masters[::2]
        sub = d.comm("evens", parent=world, group=d.group("", group_type=GroupType.COMM_GROUP,
                                                          paradigm=Paradigm.MPI, members=evens))
        send = d.region("MPI_Send", region_role=RegionRole.POINT2POINT, paradigm=Paradigm.MPI)
        coll = d.region("MPI_Allreduce", region_role=RegionRole.COLL_ALL2ALL, paradigm=Paradigm.MPI)
        events = 0
        for loc in masters + workers:
            r = groups.index(loc.group)
            h = w.event_writer_from_location(loc).handle
            n = 0
            for k in range(rounds):
                t = 10 * k
                _otf2.EvtWriter_Enter(h, None, t, send._ref)
                nbytes = 100 + r
                _otf2.EvtWriter_MpiSend(h, None, t + 1, (r + 1) % ranks, world._ref, 0, nbytes)
                expected[(r, (r + 1) % ranks)] = expected.get((r, (r + 1) % ranks), 0) + nbytes
                n += 3
                if sub_every and r % 2 == 0 and k % sub_every == 0 and len(evens) > 1:
                    peer = (r // 2 + 1) % len(evens)  # a rank of the sub-communicator
                    _otf2.EvtWriter_MpiSend(h, None, t + 1, peer, sub._ref, 1, 7)
                    expected[(r, 2 * peer)] = expected.get((r, 2 * peer), 0) + 7
                    n += 1
                _otf2.EvtWriter_Leave(h, None, t + 2, send._ref)
                if loc in masters and k % 16 == 15:
                    _otf2.EvtWriter_Enter(h, None, t + 3, coll._ref)
                    _otf2.EvtWriter_MpiCollectiveBegin(h, None, t + 3)
                    _otf2.EvtWriter_MpiCollectiveEnd(h, None, t + 4, CollectiveOp.ALLREDUCE,
                                                     world._ref, _otf2.UNDEFINED_UINT32, 8 * ranks,
                                                     8 * ranks)
                    _otf2.EvtWriter_Leave(h, None, t + 5, coll._ref)
                    n += 4
            loc._number_of_events_written = n
            events += n
        w._update_timestamps(0)
        w._update_timestamps(10 * rounds + 5)
    return {"expected": expected, "events": events,
            "hosts": [f"host{r // 4}" for r in range(ranks)]}


# ----------------------------------------------------------------- DUMPI
_MAGIC = 0xFFAADD44554D5049
_SIZES = [0, 0, 1, 1, 1, 1, 4, 2, 2, 4, 4, 8, 8, 4, 8]  # datatype id -> bytes


def write_dumpi(folder: str, prefix: str, ranks: int, rounds: int) -> dict:
    """One ``.bin`` per rank laid out as sst-dumpi writes it: magic, body
    (Send to rank+1 of 4-byte ints, an Allreduce every 16 rounds),
    end-of-stream label, header, footer with per-function call counts,
    datatype sizes, index."""
    from rankmap.formats.dumpi import FUNCTIONS

    label = {n: i for i, n in enumerate(FUNCTIONS)}
    n_all = label["ALL_FUNCTIONS"] + 1
    expected: dict = {}
    events = 0
    with open(os.path.join(folder, prefix + ".meta"), "w") as fh:
        fh.write(f"hostname=node0\nnumprocs={ranks}\nusername=bench\nstartime=0\n"
                 f"fileprefix={prefix}\nversion=0\nsubversion=6\nsubsubversion=9\n")
    send = struct.Struct(">HBHiHiiH")  # label, mask, thread, count, dtype, dest, tag, comm
    allreduce = struct.Struct(">HBHiHBH")  # label, mask, thread, count, dtype, op, comm
    for r in range(ranks):
        counts = [0] * n_all
        with open(os.path.join(folder, f"{prefix}-{r:04d}.bin"), "wb") as fh:
            fh.write(struct.pack(">Q", _MAGIC))
            body = fh.tell()
            fh.write(struct.pack(">II", 0, 0))
            buf = bytearray()
            count = 25 + r
            for k in range(rounds):
                buf += send.pack(label["Send"], 0x40, 0, count, 6, (r + 1) % ranks, 0, 2)
                counts[label["Send"]] += 1
                if k % 16 == 15:
                    buf += allreduce.pack(label["Allreduce"], 0x40, 0, 2, 12, 1, 2)
                    counts[label["Allreduce"]] += 1
                if len(buf) > 1 << 20:
                    fh.write(buf)
                    buf.clear()
            fh.write(buf)
            expected[(r, (r + 1) % ranks)] = 4 * count * rounds
            events += sum(counts)
            fh.write(struct.pack(">H", label["END_OF_STREAM"]))
            header = fh.tell()
            host = f"node{r // 4}".encode()
            fh.write(bytes([0, 6, 9]) + struct.pack(">QH", 0, len(host)) + host
                     + struct.pack(">H", 5) + b"bench" + struct.pack(">II", 0, 0))
            footer = fh.tell()
            fh.write(struct.pack(f">Q{n_all}I{n_all}I", 0xF007FEE7, *counts, *([0] * n_all)))
            sizes = fh.tell()
            fh.write(struct.pack(f">I{len(_SIZES)}I", len(_SIZES), *_SIZES))
            fh.write(struct.pack(">8Q", _MAGIC, sizes, 0, 0, header, body, footer, 0))
    return {"expected": expected, "events": events,
            "hosts": [f"node{r // 4}" for r in range(ranks)]}


# ------------------------------------------------------------ text formats
def write_liballprof(folder: str, ranks: int, rounds: int) -> dict:
    """liballprof 0.9 lines: MPI_Send of doubles to rank+1, an Allreduce
    every 16 rounds."""
    events = 0
    for r in range(ranks):
        with open(os.path.join(folder, f"pmpi-trace-rank-{r}.txt"), "w") as fh:
            fh.write(f"# htor's PMPI Tracer 0.9 Output File\n# hostname: node{r // 4}.\n\n")
            lines = []
            for k in range(rounds):
                t = 10 * k
                lines.append(f"MPI_Send:{t}:1000:{10 + r}:11,8,8:{(r + 1) % ranks}:0:0,{r},{ranks}:{t + 1}\n")
                if k % 16 == 15:
                    lines.append(f"MPI_Allreduce:{t}:2000:3000:1:11,8,8:3:0,{r},{ranks}:{t + 2}\n")
                if len(lines) >= 100_000:
                    fh.writelines(lines)
                    events += len(lines)
                    lines = []
            fh.writelines(lines)
            events += len(lines) + 1
            fh.write("MPI_Finalize:0:-\n")
    return {"events": events}


def write_mpip(path: str, ranks: int) -> dict:
    """An mpiP_cm report whose matrix has each rank's 6 torus neighbours."""
    with open(path, "w") as fh:
        fh.write("@ mpiP\n@ Command : ./bench\n@ Version                  : 3.4.1\n")
        for r in range(ranks):
            fh.write(f"@ MPI Task Assignment      : {r} node{r // 4}\n")
        fh.write("------- Start Communication Matrix -------------\n")
        rows = 0
        for r in range(ranks):
            fh.write(f"\nStatistics of rank: {r}\n\nSource\tTarget\tTotal Amount\tTotal Count\n")
            for d in (1, 2, 3, ranks - 1, ranks - 2, ranks - 3):
                fh.write(f"{r}\t{(r + d) % ranks}\t{1000 * (d + 1)}\t{d}\n")
                rows += 1
        fh.write("------- End Communication Matrix -------------\n")
    return {"events": rows}


# ---------------------------------------------------------------- driver
_PEAK = """
def peak_kib():
    # VmHWM is this process's own peak: ru_maxrss would also carry the
    # parent's peak across fork + exec (the writer's, here)
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
"""
_READ = _PEAK + """
import json, sys, time
from rankmap.formats.registry import read_recorded
t = time.perf_counter()
tr = read_recorded(sys.argv[1], sys.argv[2])
dt = time.perf_counter() - t
g = tr.graph("all")
print(json.dumps({"seconds": dt, "rss_kib": peak_kib(), "pairs": int(g.bytes.nnz),
                  "bytes": g.total_bytes}))
"""
_BASELINE = _PEAK + """
import json
import rankmap.formats.registry, numpy, scipy.sparse
print(json.dumps({"rss_kib": peak_kib()}))
"""


def _child(code: str, *argv) -> dict:
    env = dict(os.environ, RANKMAP_NO_PROGRESS="1",
               PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=float, default=2e6, help="events per format (about)")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--formats", default="otf2,dumpi,liballprof,mpip")
    args = ap.parse_args(argv)
    n, p = int(args.events), args.ranks
    base = _child(_BASELINE)["rss_kib"]
    print(f"{os.uname().nodename}: load {os.getloadavg()[0]:.1f}; baseline RSS (python + "
          f"rankmap imports) {base / 1024:.0f} MiB")
    print(f"{'format':<11}{'events':>12}{'write s':>9}{'read s':>9}{'events/s':>12}"
          f"{'peak RSS MiB':>14}{'over base':>11}{'pairs':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in args.formats.split(","):
            t = time.perf_counter()
            if fmt == "otf2":
                rounds = max(1, int(n / (p * 3.25)))
                info = write_otf2(os.path.join(tmp, "otf2"), p, rounds)
                path = os.path.join(tmp, "otf2", "traces.otf2")
            elif fmt == "dumpi":
                rounds = max(1, int(n / (p * 1.0625)))
                info = write_dumpi(tmp, "bench", p, rounds)
                path = os.path.join(tmp, "bench.meta")
            elif fmt == "liballprof":
                os.makedirs(os.path.join(tmp, "lap"))
                info = write_liballprof(os.path.join(tmp, "lap"), p, max(1, int(n / (p * 1.0625))))
                path = os.path.join(tmp, "lap")
            elif fmt == "mpip":
                ranks = min(max(p, n // 6), 200_000)  # a report of 200k ranks is plenty
                info = write_mpip(os.path.join(tmp, "bench.mpiP"), ranks)
                path = os.path.join(tmp, "bench.mpiP")
            else:
                raise SystemExit(f"unknown format {fmt}")
            wrote = time.perf_counter() - t
            r = _child(_READ, path, fmt)
            ev = info["events"]
            print(f"{fmt:<11}{ev:>12,}{wrote:>9.1f}{r['seconds']:>9.1f}{ev / r['seconds']:>12,.0f}"
                  f"{r['rss_kib'] / 1024:>14.0f}{(r['rss_kib'] - base) / 1024:>11.0f}{r['pairs']:>9}",
                  flush=True)
            for f in os.listdir(tmp):  # keep the disk use to one trace at a time
                full = os.path.join(tmp, f)
                shutil.rmtree(full) if os.path.isdir(full) else os.remove(full)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
