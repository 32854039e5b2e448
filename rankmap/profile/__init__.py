"""Record the traffic of an unmodified mpi4py program.

Run ``mpiexec -n P python -m rankmap.profile app.py [args]`` (or ``./app
[args]`` for a compiled program: ``rankmap.profile.native``): every message
the program sends on COMM_WORLD or any communicator derived from it is
counted per (source, destination) COMM_WORLD rank pair, separately for
point-to-point, collectives (by a selectable model, see
``rankmap.profile.collectives``) and one-sided traffic, and written to one
trace file (``rankmap.trace``).  No communication happens while counting.
Each rank also logs its posts, waits and collectives in program order (the
replay's input, ``trace.EventLog``; ``--max-events``).

Inside a program:

``start(comm=None, collectives="mpi", output=None)``
    begin recording (the runner does this for you) and return the recording
    version of ``comm`` (default COMM_WORLD);
``phase(name)``
    context manager: traffic inside is recorded under phase ``name``
    (``MPI.Pcontrol(0)`` pauses, ``Pcontrol(1)`` resumes, ``Pcontrol(k>=2)``
    records into phase ``pcontrol-k`` until the next ``Pcontrol``);
``recorded_row(kind="p2p")``
    what this rank has sent so far: (world ranks, bytes, messages);
``finish()``
    collective: write the trace now (rank 0 returns its path).
"""

from __future__ import annotations

import atexit
import contextlib
import sys

_SESSION = None


def is_active() -> bool:
    """True while this process records (between start and finish)."""
    return _SESSION is not None


def _session():
    if _SESSION is None:
        raise RuntimeError("rankmap profiling is not active: run the program with "
                           "`python -m rankmap.profile app.py` or call rankmap.profile.start() first")
    return _SESSION


def start(comm=None, *, collectives: str = "mpi", output=None, topology: bool = True,
          flush_interval: float | None = None, write_at_exit: bool = True, max_events: int | None = None):
    """Begin recording (collective over COMM_WORLD) and return the recording
    version of ``comm`` (default: COMM_WORLD).

    After this call ``MPI.COMM_WORLD`` and every communicator derived from it
    record.  ``output``: the trace file written by ``finish()`` (by default at
    interpreter exit when ``write_at_exit``); default ``rankmap.rmtrace.npz``.
    Calling ``start`` again only wraps ``comm``.  ``flush_interval``: seconds
    between rewrites of this rank's part file when its counters changed (a
    rank killed without warning loses at most that much; default
    ``session.FLUSH_INTERVAL``; 0: only at the end, on SIGTERM or an error).
    ``max_events``: events each rank logs in program order for the replay
    (default ``trace.default_max_events``: 2^18, fewer beyond 16 ranks so
    that the job logs at most 2^22, none beyond 4096 ranks; 0: no log).
    Raises ``ProfileError`` on every rank when ``output`` cannot be written.
    """
    global _SESSION
    from . import wrappers

    if _SESSION is None:
        from .session import FLUSH_INTERVAL, Session

        _SESSION = Session(output or "rankmap.rmtrace.npz", collectives=collectives,
                           topology=topology,
                           flush_interval=FLUSH_INTERVAL if flush_interval is None else flush_interval,
                           program=sys.argv[0] if sys.argv else "",
                           max_events=max_events)
        wrappers.install(_SESSION.recorder, pcontrol=_pcontrol)
        _SESSION.install_signal_handler()
        if write_at_exit:
            atexit.register(_finish_at_exit)
    world = wrappers.install(_SESSION.recorder)
    return world if comm is None else wrappers.wrap(comm)


def wrap(comm):
    """The recording version of a communicator profiling did not create
    (e.g. one built with ``MPI.Comm.f2py`` from a library's handle)."""
    from . import wrappers

    _session()
    return wrappers.wrap(comm)


@contextlib.contextmanager
def phase(name: str):
    """Record the traffic inside the ``with`` block under phase ``name``."""
    rec = _session().recorder
    previous = rec.phase_name
    rec.set_phase(name)
    try:
        yield
    finally:
        rec.set_phase(previous)


def _pcontrol(level: int) -> None:
    """MPI.Pcontrol while profiling: 0 pauses, 1 resumes, k >= 2 records
    into phase ``pcontrol-k`` until the next call."""
    from . import wrappers

    wrappers.original("Pcontrol")(level)
    rec = _session().recorder
    level = int(level)
    in_pc = rec.phase_name.startswith("pcontrol-")
    if level == 0:
        rec.pause()
        return
    if level == 1:
        if in_pc:
            rec.set_phase(rec.pcontrol_base)
    else:
        if not in_pc:
            rec.pcontrol_base = rec.phase_name
        rec.set_phase(f"pcontrol-{level}")
    rec.resume()


def pause() -> None:
    """Stop counting this rank's traffic until ``resume()`` (as ``MPI.Pcontrol(0)``)."""
    _session().recorder.pause()


def resume() -> None:
    """Count this rank's traffic again after ``pause()`` (as ``MPI.Pcontrol(1)``)."""
    _session().recorder.resume()


def recorded_row(kind: str = "p2p"):
    """(dst_world_ranks, nbytes, nmsgs) this rank has sent so far in this run.

    ``kind``: ``p2p`` (point-to-point and one-sided), ``collective``, ``all``.
    Raises RuntimeError when profiling is not active.
    """
    return _session().recorder.row(kind)


def finish():
    """Collective: end recording and write the trace (path on rank 0, else None)."""
    return _session().finish()


def _finish_at_exit():
    from mpi4py import MPI

    from .session import ProfileError

    if _SESSION is not None and not _SESSION.finished and not MPI.Is_finalized():
        try:
            path = _SESSION.finish()
        except ProfileError as exc:  # the same on every rank: said by rank 0
            if _SESSION.rank == 0:
                print(exc, file=sys.stderr)
            return
        if path is not None:
            print(f"rankmap.profile: trace written to {path}", file=sys.stderr)


__all__ = ["start", "wrap", "phase", "pause", "resume", "recorded_row", "finish", "is_active"]
