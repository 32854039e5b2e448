"""A profiling session of one rank: counters, metadata, part files, the merge.

Crash safety without communication: every rank keeps its own part file
(``rankmap.trace`` format, written atomically: temp file + rename).  It is
written when the session starts (status ``started``), by a daemon thread every
``flush_interval`` seconds *when the counters or the event log changed* since
the last write (status ``flushed``, its end time is the time the data is
complete up to), on SIGTERM, on an exception, and at the end (status
``complete``: the rank's finished marker).  MPICH kills the other ranks with
SIGKILL when one dies, so nothing can be written at death: what a killed rank
loses is what it sent in the last ``flush_interval`` seconds (plus one
write).  At a clean end rank 0 gathers every rank's record over a private
duplicate of COMM_WORLD and writes the merged trace; the parts are removed
once merged.  Every step of the end is agreed: a rank that cannot produce its
record, or a merged trace that cannot be written, is an error on every rank
(``ProfileError``), the parts stay.
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

import numpy as np
from mpi4py import MPI

from .. import trace as tracefmt
from . import gpu, wrappers
from .parts import FLUSH_INTERVAL, host_topology_xml, merge_when_complete, output_problem, site_network
from .recorder import Recorder


class ProfileError(RuntimeError):
    """The profiler could not start or write its trace (same message on every rank)."""


def mpi_info() -> dict:
    import mpi4py

    return {"library": MPI.Get_library_version().strip().splitlines()[0],
            "standard": "%d.%d" % MPI.Get_version(), "mpi4py": mpi4py.__version__}


class Session:
    """Profiling state of this rank; ``finish()`` ends it (collectively)."""

    def __init__(self, output, *, collectives: str = "mpi", topology: bool = True,
                 flush_interval: float = FLUSH_INTERVAL, argv=None, program: str = "",
                 max_events: int | None = None):
        world = wrappers.original("COMM_WORLD")
        self.rank, self.size = world.Get_rank(), world.Get_size()
        self.output = Path(output).resolve()
        problem = world.bcast(output_problem(self.output) if self.rank == 0 else None, root=0)
        if problem is not None:
            raise ProfileError(f"rankmap.profile: {problem}")
        if max_events is None:
            max_events = tracefmt.default_max_events(self.size)
        self.recorder = Recorder(self.size, self.rank, collectives, max_events,
                                 library=MPI.Get_library_version())
        self._private = world.Dup()  # the profiler's own traffic never mixes with the program's
        self.host = socket.gethostname()
        self.binding = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.gpu = gpu.record(probe=False)   # the devices opened are asked at the end (write_part)
        self.xml = None
        if topology:  # one rank per host records the host's topology
            node = world.Split_type(MPI.COMM_TYPE_SHARED)
            if node.Get_rank() == 0:
                self.xml = host_topology_xml()
            node.Free()
        self.meta = {"collectives": collectives, "mpi": mpi_info(), "argv": list(argv or sys.argv),
                     "program": program, "python": sys.version.split()[0], **site_network()}
        self.t_start = time.time()
        self.finished = False
        self._lock = threading.Lock()
        self._written = None  # (phases, edges, event log stamp) of the last part written
        self._write_failed = False
        self.part = tracefmt.part_path(self.output, self.rank)
        self.part.parent.mkdir(parents=True, exist_ok=True)
        self.write_part("started")
        self._private.Barrier()  # every rank has a part file before the program runs
        self._stop = threading.Event()
        if flush_interval and flush_interval > 0:
            self._thread = threading.Thread(target=self._flush_loop, args=(flush_interval,),
                                            name="rankmap-profile-flush", daemon=True)
            self._thread.start()
        else:
            self._thread = None

    # --------------------------------------------------------------- parts
    def own_trace(self, status: str, edges=None) -> tracefmt.Trace:
        info = tracefmt.RankInfo(self.host, self.binding, status, self.t_start, time.time(), self.gpu)
        events = self.recorder.events
        return tracefmt.Trace(self.size, self.recorder.edges() if edges is None else edges,
                              list(self.recorder.phases), {self.rank: info},
                              {self.host: self.xml} if self.xml is not None else {},
                              dict(self.meta), str(self.part),
                              None if events is None else events.event_log(self.size, self.rank))

    def write_part(self, status: str) -> None:
        """Write this rank's part; a periodic flush (``flushed``) writes only
        when the counters or the event log changed since the last write, so
        an idle or finished-talking rank costs nothing."""
        if status in ("complete", "error", "exit"):   # the program's thread, its devices opened
            self.gpu = gpu.record()
        with self._lock:
            edges, phases = self.recorder.edges(), list(self.recorder.phases)
            events = self.recorder.events
            stamp = None if events is None else events.stamp()
            if status == "flushed" and self._written is not None and self._written[2] == stamp \
                    and _same_edges(self._written, (phases, edges)):
                try:  # nothing new: the mtime says the data is complete up to now
                    os.utime(self.part)
                except OSError:
                    pass
                return
            try:
                self.own_trace(status, edges).write(self.part)
                self._written = (phases, edges, stamp)
            except Exception as exc:  # noqa: BLE001 - a full disk must not kill the program
                if not self._write_failed:  # said once per rank, not at every flush
                    print(f"rankmap.profile: rank {self.rank}: cannot write {self.part}: {exc}",
                          file=sys.stderr)
                self._write_failed = True

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
        Raises ``ProfileError`` on every rank when a rank's record or the
        merged trace could not be made (the part files stay for
        ``rankmap merge``).
        """
        if self.finished:
            return None
        self.finished = True
        self.stop_flushing()
        self.write_part("complete")
        if MPI.Is_finalized():
            return merge_when_complete(self.output) if self.rank == 0 else None
        mine, error = None, None
        try:
            mine = self.own_trace("complete")
        except Exception as exc:  # noqa: BLE001 - agreed below, never a rank left waiting
            error = f"rank {self.rank}: {type(exc).__name__}: {exc}"
        parts = self._private.gather((mine, error), root=0)
        path, verdict = None, None
        if self.rank == 0:
            try:
                failed = [e for _t, e in parts if e is not None]
                if failed:
                    raise RuntimeError(failed[0])
                merged = tracefmt.merge_traces([t for t, _e in parts])
                merged.source = str(self.output)
                merged.write(self.output)
                shutil.rmtree(self.part.parent, ignore_errors=True)
                path = self.output
            except Exception as exc:  # noqa: BLE001 - agreed below
                verdict = (f"rankmap.profile: the trace {self.output} was not written ({exc}); "
                           f"the per-rank parts stay in {self.part.parent} (rankmap merge)")
        # every rank learns the verdict; nobody exits (and MPI finalizes) before the trace exists
        verdict = self._private.bcast(verdict, root=0)
        self._private.Free()
        if verdict is not None:
            raise ProfileError(verdict)
        return path


def _same_edges(a, b) -> bool:
    """True when two (phases, edges) snapshots hold the same counts."""
    if a[0] != b[0]:
        return False
    return all(np.array_equal(a[1][k][f], b[1][k][f]) for k in a[1] for f in a[1][k])
