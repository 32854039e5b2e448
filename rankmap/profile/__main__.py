"""``python -m rankmap.profile [options] (app.py | -m module | -c cmd | ./app) [args]``

Runs an unmodified mpi4py program under mpiexec and records its traffic
(mirrors ``python -m mpi4py``: an exception in one rank aborts the whole job
instead of hanging it, exit codes propagate).  A compiled program (an
executable that is not Python) is recorded through PMPI interposition
(``rankmap.profile.native``) into the same trace.
"""

from __future__ import annotations

import math
import os
import runpy
import sys
import traceback
from pathlib import Path

from .collectives import DEFAULT_MODEL, MODELS
from .native import run as run_native
from .parts import FLUSH_INTERVAL

USAGE = """\
usage: mpiexec -n P python -m rankmap.profile [options] (app.py | -m module | -c cmd | ./app) [args]

An mpi4py program runs in this Python; a compiled program (C, C++, Fortran:
any executable that is not Python) runs with a PMPI recording library built
for its MPI by that MPI's mpicc on first use (cached in ~/.cache/rankmap).

options:
  -o, --output FILE        trace file (default: <program>.rmtrace.npz); per-rank
                           parts go to FILE.parts/ until rank 0 merges them
  --collectives MODEL      how collectives are attributed to pairs: mpi (default:
                           the algorithms this MPI library selects by message
                           and communicator size, each step a message) |
                           none | root | tree | ring
  --phase NAME             name of the phase recording starts in (default: main)
  --paused                 start paused; the program calls MPI.Pcontrol(1) or
                           rankmap.profile.resume() to begin
  --no-topology            do not record the hosts' hwloc topology
  --flush-interval SEC     rewrite a rank's part file every SEC seconds when its
                           counters changed (default 1: a rank killed without
                           warning loses at most its last SEC seconds; 0 = only
                           at exit/SIGTERM/error)
  --max-events N           events each rank logs in program order (posts, waits,
                           collectives: what the replay of an order follows;
                           default 262144, fewer beyond 16 ranks: 2^22 in all,
                           none beyond 4096 ranks; 0 = no log)
  -h, --help               show this help
"""


def parse(argv: list[str]) -> tuple[dict, str, str, list[str]]:
    opts = {"output": None, "collectives": DEFAULT_MODEL, "phase": None, "paused": False,
            "topology": True, "flush_interval": None, "max_events": None}
    i = 0
    valued = {"-o": "output", "--output": "output", "--collectives": "collectives",
              "--phase": "phase", "--flush-interval": "flush_interval", "--max-events": "max_events"}
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if arg in ("-h", "--help"):
            print(USAGE)
            raise SystemExit(0)
        if arg in ("-m", "-c"):
            if i + 1 >= len(argv):
                raise SystemExit(f"rankmap.profile: {arg} needs an argument\n{USAGE}")
            return opts, ("module" if arg == "-m" else "cmd"), argv[i + 1], argv[i + 2:]
        if name in valued:
            if not eq:
                if i + 1 >= len(argv):
                    raise SystemExit(f"rankmap.profile: {arg} needs a value")
                value = argv[i + 1]
                i += 1
            key = valued[name]
            opts[key] = {"flush_interval": flush_interval, "max_events": max_events}.get(key, str)(value)
        elif arg == "--paused":
            opts["paused"] = True
        elif arg == "--no-topology":
            opts["topology"] = False
        elif arg.startswith("-") and arg != "-":
            raise SystemExit(f"rankmap.profile: unknown option {arg}\n{USAGE}")
        else:
            return opts, "path", arg, argv[i + 1:]
        i += 1
    raise SystemExit(f"rankmap.profile: no program given\n{USAGE}")


def flush_interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value < 0:
        raise SystemExit(f"rankmap.profile: --flush-interval must be a finite number of seconds "
                         f">= 0, not {text!r}")
    return value


def max_events(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise SystemExit(f"rankmap.profile: --max-events must be an integer >= 0, not {text!r}")
    return value


def default_output(kind: str, target: str) -> str:
    stem = {"path": Path(target).stem, "module": target.rsplit(".", 1)[-1], "cmd": "cmd"}[kind]
    return f"{stem or 'program'}.rmtrace.npz"


def run_program(kind: str, target: str, args: list[str]) -> None:
    if kind == "path":
        sys.argv = [target, *args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        runpy.run_path(target, run_name="__main__")
    elif kind == "module":
        sys.argv = [target, *args]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.argv = ["-c", *args]
        sys.path.insert(0, "")
        exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})


def main(argv=None) -> int:
    opts, kind, target, args = parse(sys.argv[1:] if argv is None else argv)
    if opts["collectives"] not in MODELS:
        raise SystemExit(f"rankmap.profile: unknown collective model {opts['collectives']!r}")
    program = run_native.is_program(target) if kind == "path" else None
    if program is not None:  # before mpi4py: importing it would initialise MPI here
        if opts["flush_interval"] is None:
            opts["flush_interval"] = FLUSH_INTERVAL
        return run_native.main(opts, program, target, args, opts["output"] or default_output(kind, target))
    from mpi4py import MPI

    from . import _session, start, wrappers
    from .session import ProfileError

    try:
        start(collectives=opts["collectives"], output=opts["output"] or default_output(kind, target),
              topology=opts["topology"], flush_interval=opts["flush_interval"], write_at_exit=False,
              max_events=opts["max_events"])
    except ProfileError as exc:  # agreed: every rank stops, rank 0 says why
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(exc, file=sys.stderr)
        return 2
    session = _session()
    flag = {"path": [], "module": ["-m"], "cmd": ["-c"]}[kind]  # so that the relaunch command runs it again
    session.meta["argv"] = [*flag, target, *args]
    session.meta["program"] = target
    if opts["phase"]:
        session.recorder.set_phase(opts["phase"])
    if opts["paused"]:
        session.recorder.pause()
    world = wrappers.original("COMM_WORLD")
    try:
        run_program(kind, target, args)
    except SystemExit as exc:
        code = exc.code
        if code not in (None, 0):
            if not isinstance(code, int):
                print(code, file=sys.stderr)
                code = 1
            session.abandon("exit")
            sys.stderr.flush()
            if MPI.Is_finalized():
                return code
            world.Abort(code)
    except BaseException:  # noqa: BLE001 - any failure must abort the job, not hang it
        traceback.print_exc()
        session.abandon("error")
        sys.stderr.flush()
        if not MPI.Is_finalized():
            world.Abort(1)
        return 1
    try:
        path = session.finish()
    except ProfileError as exc:  # agreed: every rank exits 1, rank 0 says why
        if session.rank == 0:
            print(exc, file=sys.stderr)
        return 1
    if path is not None:
        print(f"rankmap.profile: trace written to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
