"""A profiling session of one rank: counters, metadata, part files, the merge.

Crash safety without communication: every rank writes its own part file when
the session starts, again every ``flush_interval`` seconds from a daemon
thread (MPICH kills the other ranks with SIGKILL when one aborts, so a file
written at death is not an option), on SIGTERM, on an exception, and at the
end.  At a clean end rank 0 gathers every rank's record over a private
duplicate of COMM_WORLD and writes the merged trace; the parts are removed
once merged.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from mpi4py import MPI

from .. import trace as tracefmt
from . import wrappers
from .recorder import Recorder


def host_topology_xml() -> str | None:
    """This node's hwloc XML: lstopo's when hwloc is installed, else the
    tree rankmap discovers from Linux sysfs written as hwloc XML, else None
    (so ``rankmap map TRACE`` knows the machine after a plain pip install)."""
    try:
        from ..topology.export import hwloc_xml
        from ..topology.live import discover_local_xml, sysfs_topology
    except ImportError:  # rankmap's topology readers need lxml
        return None
    try:
        return discover_local_xml() or hwloc_xml(sysfs_topology())
    except (OSError, ValueError):
        return None


def mpi_info() -> dict:
    import mpi4py

    return {"library": MPI.Get_library_version().strip().splitlines()[0],
            "standard": "%d.%d" % MPI.Get_version(), "mpi4py": mpi4py.__version__}


class Session:
    """Profiling state of this rank; ``finish()`` ends it (collectively)."""

    def __init__(self, output, *, collectives: str = "tree", topology: bool = True,
                 flush_interval: float = 10.0, argv=None, program: str = ""):
        world = wrappers.original("COMM_WORLD")
        self.rank, self.size = world.Get_rank(), world.Get_size()
        self.output = Path(output).resolve()
        self.recorder = Recorder(self.size, self.rank, collectives)
        self._private = world.Dup()  # the profiler's own traffic never mixes with the program's
        self.host = socket.gethostname()
        self.binding = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.xml = None
        if topology:  # one rank per host records the host's topology
            node = world.Split_type(MPI.COMM_TYPE_SHARED)
            if node.Get_rank() == 0:
                self.xml = host_topology_xml()
            node.Free()
        self.meta = {"collectives": collectives, "mpi": mpi_info(), "argv": list(argv or sys.argv),
                     "program": program, "python": sys.version.split()[0]}
        self.t_start = time.time()
        self.finished = False
        self._lock = threading.Lock()
        self.part = tracefmt.part_path(self.output, self.rank)
        self.part.parent.mkdir(parents=True, exist_ok=True)
        self.write_part("flushed")
        self._private.Barrier()  # every rank has a part file before the program runs
        self._stop = threading.Event()
        if flush_interval and flush_interval > 0:
            self._thread = threading.Thread(target=self._flush_loop, args=(flush_interval,),
                                            name="rankmap-profile-flush", daemon=True)
            self._thread.start()
        else:
            self._thread = None

    # --------------------------------------------------------------- parts
    def own_trace(self, status: str) -> tracefmt.Trace:
        info = tracefmt.RankInfo(self.host, self.binding, status, self.t_start, time.time())
        return tracefmt.Trace(self.size, self.recorder.edges(), list(self.recorder.phases),
                              {self.rank: info},
                              {self.host: self.xml} if self.xml is not None else {},
                              dict(self.meta), str(self.part))

    def write_part(self, status: str) -> None:
        with self._lock:
            try:
                self.own_trace(status).write(self.part)
            except OSError as exc:  # a full disk must not kill the program
                print(f"rankmap.profile: rank {self.rank}: cannot write {self.part}: {exc}",
                      file=sys.stderr)

    def _flush_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.write_part("flushed")

    def install_signal_handler(self) -> None:
        """On SIGTERM write the part file, then die of SIGTERM as before."""
        previous = signal.getsignal(signal.SIGTERM)

        def handler(signum, frame):
            self.stop_flushing()
            self.write_part("signal")
            if callable(previous):
                previous(signum, frame)
            else:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(signal.SIGTERM, handler)

    def stop_flushing(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    # --------------------------------------------------------------- the end
    def abandon(self, status: str) -> None:
        """The run failed on this rank: leave the part file, merge nothing."""
        self.stop_flushing()
        self.write_part(status)
        self.finished = True

    def finish(self) -> Path | None:
        """Collective: write this rank's part, merge at rank 0 into ``output``.

        Returns the merged trace's path on rank 0 (None elsewhere).  When the
        program finalized MPI itself, rank 0 waits for the other part files.
        """
        if self.finished:
            return None
        self.finished = True
        self.stop_flushing()
        self.write_part("complete")
        if MPI.Is_finalized():
            return self._merge_files() if self.rank == 0 else None
        mine = self.own_trace("complete")
        parts = self._private.gather(mine, root=0)
        path = None
        if self.rank == 0:
            merged = tracefmt.merge_traces(parts)
            merged.source = str(self.output)
            merged.write(self.output)
            shutil.rmtree(self.part.parent, ignore_errors=True)
            path = self.output
        self._private.Barrier()  # nobody exits (and MPI finalizes) before the trace exists
        self._private.Free()
        return path

    def _merge_files(self, timeout: float = 60.0) -> Path | None:
        deadline = time.time() + timeout
        while True:
            trace = tracefmt.read_trace(self.part.parent, warn_missing=False)
            done = all(s == "complete" for s in trace.status)
            if done or time.time() > deadline:
                break
            time.sleep(0.2)
        if not done:
            print(f"rankmap.profile: {tracefmt.missing_report(trace)}; partial trace written",
                  file=sys.stderr)
        trace.source = str(self.output)
        trace.write(self.output)
        if done:
            shutil.rmtree(self.part.parent, ignore_errors=True)
        return self.output
