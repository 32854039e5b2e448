"""Record a compiled MPI program: one supervisor per rank.

Under ``mpiexec -n P python -m rankmap.profile ./app args`` every rank is
this Python process.  It never initialises MPI: it builds (or finds in the
cache) the interposition library for the program's MPI, starts the program
with it in ``LD_PRELOAD``, in its own process group, killed if the
supervisor dies (so a launcher that kills the ranks kills the program), and
waits.  The program's rank is the MPI rank: it records its calls and tells
the supervisor over a socket each time it wrote a counters snapshot; the
supervisor turns each snapshot into the rank's part file
(``TRACE.parts/rankNNNNNN.rmtrace.npz``, the mpi4py profiler's format,
collectives spread by the same models) with the host name, the CPU binding,
the event log (``events``: what the snapshots appended to it since the last
one) and, on the first rank of each host, the host's machine tree.  The
log's cap (``--max-events``, else ``trace.default_max_events`` for the
job's size) goes to the program in the answer to its first snapshot.  So the part
files, their statuses, ``--flush-interval`` and ``rankmap merge`` mean what
they mean for a Python program, and a rank killed without warning loses at
most the last flush interval (plus one write).

Signals the supervisor receives (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1,
SIGUSR2) go to the program; before a terminating one, the program's
counters are written, so its part is complete up to the signal.  The
supervisor ends as the program did: its exit code, or death by its signal.
When the program ended well, the supervisor of rank 0 waits for every
rank's part to be complete and writes the merged trace.
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from ... import trace as tracefmt
from .. import gpu
from ..parts import host_topology_xml, merge_when_complete, output_problem, site_network
from . import build, counts
from .events import NativeEvents

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
TERMINATING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
#: how a program that died of a signal is marked: asked to stop, or crashed;
#: SIGKILL leaves the last flush's status ("killed unawares")
ASKED, CRASHED = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}, \
    {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}
_PR_SET_PDEATHSIG = 1


def is_program(target: str) -> Path | None:
    """The executable to record through the interposition library, or None
    when ``target`` is a Python program (``*.py``, a Python ``#!`` script,
    or nothing executable by that name)."""
    if target.endswith(".py"):
        return None
    path = Path(target)
    if not path.is_file():
        found = shutil.which(target) if os.sep not in target else None
        if found is None:
            return None
        path = Path(found)
    if not os.access(path, os.X_OK):
        return None
    try:
        with open(path, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return None
    if first.startswith(b"#!") and b"python" in first:
        return None
    return path


#: where launchers (hydra, Open MPI, PMIx, Slurm) say a process's rank, and its rank on its host
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")
LOCAL_RANK_VARIABLES = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK", "SLURM_LOCALID")


def launcher_rank(names=RANK_VARIABLES) -> int | None:
    """This process's rank as the launcher says (before any MPI call), or None."""
    return next((int(os.environ[v]) for v in names if os.environ.get(v, "").isdigit()), None)


def _die_with_parent(parent: int, own_group: bool):
    """In the program's process before exec: killed when the supervisor dies."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not in the forked child

    def setup():
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the supervisor died before prctl
            os._exit(1)
        if own_group:
            os.setpgid(0, 0)
    return setup


class Supervisor:
    """One rank: the program's process, its snapshots, its part file."""

    def __init__(self, opts: dict, program: Path, target: str, args: list[str], output: Path):
        self.opts, self.program, self.args, self.output = opts, program, args, output
        self.model = opts["collectives"]
        self.parts = tracefmt.part_path(output, 0).parent
        self.counts = self.parts / f".counts-{socket.gethostname()}-{os.getpid()}"
        self.events: NativeEvents | None = None  # the event log, from the first snapshot on (None: no log)
        self.meta = {"collectives": self.model, "argv": [target, *args], "program": target, **site_network()}
        self.snapshot: counts.Snapshot | None = None
        self.part: Path | None = None
        self.xml = None
        self._xml_thread = None
        self._complained = False  # a problem with the files said once per rank
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.own_group = not os.isatty(0)  # a terminal's Ctrl-C reaches its group itself
        self._pending: list = []  # signals waiting for the program's counters to be written
        self._deadline = 0.0

    # ------------------------------------------------------------ the parts
    def _prefetch_xml(self) -> None:
        """Start reading the host's tree while the program starts, when the
        launcher says this is the first rank of its host."""
        if self.opts["topology"] and launcher_rank(LOCAL_RANK_VARIABLES) == 0:
            self._xml_thread = threading.Thread(target=self._read_xml, daemon=True)
            self._xml_thread.start()

    def _read_xml(self) -> None:
        self.xml = host_topology_xml()

    def _host_xml(self) -> None:
        if not (self.opts["topology"] and self.snapshot.leader):
            self.xml = None
            return
        if self._xml_thread is None:
            self._read_xml()
        else:
            self._xml_thread.join()

    def read(self) -> bool:
        """Read the program's latest snapshot; False when there is none (or
        it is damaged: said once, the part keeps the last good one)."""
        try:
            self.snapshot = counts.read_snapshot(self.counts)
        except FileNotFoundError:
            return False
        except (OSError, ValueError) as exc:
            if not self._complained:
                print(f"rankmap.profile: {exc}", file=sys.stderr)
            self._complained = True
            return False
        if self.part is None:
            s = self.snapshot
            self.part = tracefmt.part_path(self.output, s.rank)
            self.meta["mpi"] = {"library": s.mpi_library, "standard": s.mpi_standard}
            cap = self.opts["max_events"]
            cap = tracefmt.default_max_events(s.size) if cap is None else cap
            if cap:
                self.events = NativeEvents(f"{self.counts}.events", s.size, s.rank, cap, self.model)
        if self.events is not None:
            try:
                self.events.update(self.snapshot)
            except ValueError as exc:  # the log stays as read so far
                if not self._complained:
                    print(f"rankmap.profile: {exc}", file=sys.stderr)
                self._complained = True
        return True

    def write_part(self, status: str) -> None:
        s = self.snapshot
        info = tracefmt.RankInfo(s.host, s.cpus, status, s.t_start, s.t_end,
                                 gpu.record(probe=False))   # the program's environment is this one's
        rec = counts.recorder(s, self.model)
        part = tracefmt.Trace(s.size, rec.edges(), list(rec.phases), {s.rank: info},
                              {s.host: self.xml} if self.xml is not None else {}, dict(self.meta),
                              str(self.part), None if self.events is None else self.events.event_log(s))
        try:
            part.write(self.part)
        except OSError as exc:  # a full disk must not kill the program
            if not self._complained:
                print(f"rankmap.profile: rank {s.rank}: cannot write {self.part}: {exc}", file=sys.stderr)
            self._complained = True

    def on_message(self, data: bytes) -> None:
        """The program wrote a snapshot ('S' first, 'F', 'E' the last) or had nothing new ('T')."""
        if b"S" in data and self.read():
            self._host_xml()
            self.write_part("started")
            cap = 0 if self.events is None else self.events.cap   # the program waits for its part file to exist
            self.sock.sendall(b"A" + struct.pack("=q", cap))
        if b"F" in data and self.read():
            self.write_part("flushed")
        elif b"T" in data and self.part is not None:
            try:
                os.utime(self.part)   # the data is complete up to now
            except OSError:
                pass
        if b"E" in data:
            self.read()

    # ------------------------------------------------------------ the program
    def forward(self, signum, _frame) -> None:
        """Pass a signal on; a terminating one once the program wrote its
        counters (asked for here, delivered by ``wait`` on the answer or
        after 2 s), so the part is complete up to the signal."""
        if self.proc is None or self.proc.poll() is not None:
            return
        if not self._pending and signum in TERMINATING and self.part is not None:
            try:
                self.sock.send(b"R")
            except OSError:
                pass
            else:
                self._deadline = time.monotonic() + 2.0
                self._pending.append(signum)
                return
        if self._pending:
            self._pending.append(signum)  # in order, after the one waiting
        else:
            self._deliver(signum)

    def _deliver(self, signum) -> None:
        if not self.own_group and signum in (signal.SIGINT, signal.SIGQUIT):
            return  # a terminal sent it to the whole group: the program has it already
        try:
            os.kill(self.proc.pid, signum)
        except ProcessLookupError:
            pass

    def _deliver_pending(self) -> None:
        pending, self._pending = self._pending, []
        for signum in pending:
            self._deliver(signum)

    def start(self, library: Path) -> None:
        self.parts.mkdir(parents=True, exist_ok=True)
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["LD_PRELOAD"] = os.pathsep.join(filter(None, [str(library), env.get("LD_PRELOAD")]))
        env.update(RANKMAP_PMPI_COUNTS=str(self.counts), RANKMAP_PMPI_SOCKET=str(theirs.fileno()),
                   RANKMAP_PMPI_MODEL=self.model, RANKMAP_PMPI_PHASE=self.opts["phase"] or "",
                   RANKMAP_PMPI_PAUSED="1" if self.opts["paused"] else "0",
                   RANKMAP_PMPI_INTERVAL=str(self.opts["flush_interval"]))
        # the program inherits what this rank inherited from the launcher (hydra's
        # PMI_FD, Open MPI's pipes), not the descriptors this Python opened
        os.set_inheritable(theirs.fileno(), True)
        try:
            self.proc = subprocess.Popen([self.meta["program"], *self.args], executable=self.program.absolute(),
                                         env=env, close_fds=False,
                                         preexec_fn=_die_with_parent(os.getpid(), self.own_group))
        finally:
            theirs.close()
        self.sock = ours
        self._prefetch_xml()  # a thread: only once the program is forked
        for signum in FORWARDED:
            signal.signal(signum, self.forward)

    def wait(self) -> int:
        """Serve the program's messages until it ends; its return code."""
        while True:
            # the socket's end says the program ended; the timeout only catches a
            # descendant of it holding the socket open
            timeout = 2.0 if not self._pending else max(0.0, min(2.0, self._deadline - time.monotonic()))
            ready, _, _ = select.select([self.sock], [], [], timeout)
            data = self.sock.recv(4096) if ready else None
            if data:
                self.on_message(data)
            if self._pending and ((data and (b"F" in data or b"E" in data))
                                  or time.monotonic() >= self._deadline):
                self._deliver_pending()
            if data == b"" or (data is None and self.proc.poll() is not None):
                break   # the program closed the socket (it ended) or ended
        code = self.proc.wait()
        for signum in FORWARDED:
            signal.signal(signum, signal.SIG_DFL)
        self.sock.close()
        return code

    def finish(self, code: int) -> None:
        """The part's last status: complete, exit, error, signal, or the last
        flush's (killed unawares)."""
        if not self.read():
            return
        if code == 0:
            status = "complete" if self.snapshot.status in ("finalized", "exited") else "exit"
        elif code > 0:
            status = "exit"
        elif -code in ASKED:
            status = "signal"
        elif -code in CRASHED:
            status = "error"
        else:
            status = "started" if self.snapshot.status == "started" else "flushed"
        self.write_part(status)
        for path in (self.counts, Path(f"{self.counts}.events")):
            try:
                path.unlink()
            except OSError:
                pass


def _say(message: str) -> None:
    """Say a job-wide problem once (on the launcher's rank 0, or when unknown)."""
    if launcher_rank() in (None, 0):
        print(message, file=sys.stderr)


def _end_like(code: int) -> int:
    """Return ``code``, or die of the program's signal."""
    if code < 0:
        sys.stdout.flush()
        sys.stderr.flush()
        if -code != signal.SIGKILL:  # SIGKILL's action cannot be set (EINVAL), and it always kills
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


def main(opts: dict, program: Path, target: str, args: list[str], output: str) -> int:
    """Record ``program args`` as one rank of the job; the exit code."""
    out = Path(output).resolve()
    problem = output_problem(out)
    if problem is not None:
        _say(f"rankmap.profile: {problem}")
        return 2
    try:
        library = build.library_for(program)
    except (build.BuildError, OSError, subprocess.SubprocessError) as exc:
        _say(str(exc) if isinstance(exc, build.BuildError) else f"rankmap.profile: {exc}")
        return 2
    sup = Supervisor(opts, program, target, args, out)
    try:
        sup.start(library)
    except OSError as exc:
        _say(f"rankmap.profile: cannot run {target}: {exc.strerror or exc}")
        return 2
    code = sup.wait()
    sup.finish(code)
    if sup.snapshot is None:
        if code == 0:
            _say(f"rankmap.profile: {target} never called MPI_Init: nothing recorded")
        return _end_like(code)
    if code == 0 and sup.snapshot.rank == 0:
        try:
            path = merge_when_complete(out)
        except (OSError, ValueError, RuntimeError) as exc:
            print(f"rankmap.profile: the trace {out} was not written ({exc}); the per-rank parts stay "
                  f"in {sup.parts} (rankmap merge)", file=sys.stderr)
            return 1
        print(f"rankmap.profile: trace written to {path}", file=sys.stderr)
    return _end_like(code)
