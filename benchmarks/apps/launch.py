"""Launch lines on an emulated cluster, for each MPI an application was built
against: the launcher's own orders (block, round-robin, and what it does
unasked with a hostfile of slot counts) and rankmap's printed relaunch line,
each run by ``EmulatedCluster.launch`` (the cluster's options put after the
launcher word).

- ``mpich``: MPICH's hydra ``mpiexec``.  Ranks get
  ``MPIR_CVAR_ENABLE_HEAVY_YIELD=1`` and
  ``MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE``: MPICH yields
  (nanosleep) while it waits only where it takes its lock, at
  MPI_THREAD_MULTIPLE; a compiled program that calls ``MPI_Init`` runs
  single-threaded and busy-polls, and 16 polling ranks on 2 cores spend
  their time waiting for the CPU (HPCG 16^3 on 16 ranks: DDOT 10.6 s of a
  12.7 s Total polling, 0.55 s of 2.2 s yielding).
- ``openmpi``: Open MPI's ``mpirun``, with ``--mca mpi_yield_when_idle 1``
  (LAMMPS' 200-step melt on 16 ranks, one node: 6.4 s yielding, 161 s
  polling).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rankmap.emulate import EmulatedCluster
from rankmap.emulate.launchers import MPIS, find_launcher
from rankmap.formats.relaunch import line_argv

MPICH_YIELD = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1",
               "MPIR_CVAR_DEFAULT_THREAD_LEVEL": "MPI_THREAD_MULTIPLE"}
OPENMPI_YIELD = ["--mca", "mpi_yield_when_idle", "1"]
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


class LaunchError(RuntimeError):
    """A relaunch line the benchmark cannot run as printed."""


@dataclass
class Command:
    argv: list[str]
    env: dict[str, str]


@dataclass
class RelaunchLine:
    """A printed relaunch line taken apart: environment assignments, the
    launcher word, its options, and the program (the recorded command)."""

    env: dict[str, str]
    launcher: str
    options: list[str]
    program: list[str]

    def unpinned(self) -> "RelaunchLine":
        """The same line without its ``rankmap-bind FILE --`` words (or
        ``python -m rankmap.bind FILE --``): the ranks on the mapping's
        hosts, their CPUs left to the operating system."""
        words = self.options
        for i, w in enumerate(words):
            if Path(w).name == "rankmap-bind" or words[i:i + 2] == ["-m", "rankmap.bind"]:
                start = i - 1 if w == "-m" else i
                end = words.index("--", i)
                return RelaunchLine(self.env, self.launcher, words[:start] + words[end + 1:], self.program)
        raise LaunchError(f"the relaunch line starts no rankmap-bind: {shlex.join(words)}")


def parse_relaunch(line: str, program: list[str]) -> RelaunchLine:
    """Take ``line`` apart around ``program``, the command the trace
    recorded, which the line must end with (after ``rankmap-bind FILE --``
    where it binds).  The words are those a shell would pass
    (``relaunch.line_argv``: quotes removed, ``$(cat FILE)`` read)."""
    try:
        words = line_argv(line)
    except (ValueError, OSError) as exc:
        raise LaunchError(f"relaunch line {line!r}: {exc}") from None
    env = {}
    while words and _ASSIGNMENT.match(words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    n = len(program)
    if len(words) < n + 1 or words[-n:] != program:
        raise LaunchError(f"relaunch line {line!r} does not end with the recorded program "
                          f"{shlex.join(program)!r}")
    return RelaunchLine(env, words[0], words[1:-n], words[-n:])


def find_relaunch(lines: list[str], comment: str) -> str:
    """The printed relaunch line whose ``#`` comment is ``comment``."""
    for line in lines:
        if line.rstrip().endswith(f"# {comment}"):
            return line
    raise LaunchError(f"rankmap map printed no '# {comment}' line among {len(lines)}: {lines}")


class Launcher:
    """Launch commands of one MPI on one emulated cluster: every one a
    launch line run by ``EmulatedCluster.launch`` (the emulation's options
    after the launcher word), with the yield settings."""

    def __init__(self, cluster: EmulatedCluster, mpi: str, exe: str | None = None,
                 busy_poll: bool = False):
        if mpi not in MPIS:
            raise SystemExit(f"MPI {mpi!r}: expected one of {', '.join(MPIS)}")
        self.cluster, self.mpi, self.busy_poll = cluster, mpi, busy_poll
        self.exe = find_launcher(mpi, exe)
        if self.exe is None or (exe and Path(self.exe) != Path(exe)):
            raise SystemExit(f"no {mpi} launcher{f' at {exe}' if exe else ''} (MPICH: pip install mpich; "
                             "Open MPI: apt-get install openmpi-bin)")
        spec = cluster.spec
        self.n = spec.nodes * spec.slots

    @property
    def relaunch_comment(self) -> str:
        """The comment of this launcher's line among those ``map`` prints:
        hydra's, or Open MPI's of the mpirun's major version (4 and 5
        take the rankfile by different options)."""
        if self.mpi == "mpich":
            return "MPICH (hydra)"
        text = subprocess.run([self.exe, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"(?:Open MPI|OpenRTE)\)?\s+(\d+)\.", text)
        if m is None:
            raise SystemExit(f"{self.exe} --version: not Open MPI ({text.strip()[:80]!r})")
        return "Open MPI 5" if int(m.group(1)) >= 5 else "Open MPI 4"

    @property
    def mpicc(self) -> str:
        """The compiler wrapper beside the launcher (the probe is built with it)."""
        found = Path(self.exe).parent / "mpicc"
        if not found.exists():
            raise SystemExit(f"no mpicc beside {self.exe}: install the MPI's development files")
        return str(found)

    def command(self, words: list[str], env: dict[str, str] | None = None) -> Command:
        """The launch line ``words`` (launcher word first) on the cluster,
        ranks yielding while they wait unless ``busy_poll``."""
        rest = list(words[1:])
        rank_env = dict(env or {})
        if not self.busy_poll:
            if self.mpi == "openmpi":
                rest = OPENMPI_YIELD + rest
            else:
                rank_env = {**MPICH_YIELD, **rank_env}
        argv, run_env = self.cluster.launch([self.exe, *rest], self.mpi, env=rank_env)
        return Command(argv, run_env)

    def order(self, order: str, hostfile: Path | None = None) -> list[str]:
        """The launch line (without the program) of ``block``,
        ``round-robin``, or ``default``: a hostfile of each node with its
        slot count (``hostfile``, written here) and no order option."""
        hosts, slots, n = self.cluster.hosts, self.cluster.spec.slots, str(self.n)
        hydra = self.mpi == "mpich"
        if order == "default":
            hostfile.write_text("".join(f"{h}:{slots}\n" if hydra else f"{h} slots={slots}\n" for h in hosts))
            return [self.exe, "-f" if hydra else "--hostfile", str(hostfile), "-n", n]
        if order not in ("block", "round-robin"):
            raise ValueError(f"order {order!r}")
        if hydra:
            per = slots if order == "block" else 1
            return [self.exe, "-hosts", ",".join(f"{h}:{per}" for h in hosts), "-n", n]
        return [self.exe, "--host", ",".join(f"{h}:{slots}" for h in hosts), "-n", n,
                "--map-by", "slot" if order == "block" else "node"]

    def relaunch(self, line: RelaunchLine, program: list[str] | None = None) -> Command:
        """The printed line run on the cluster, ``program`` (default: the
        recorded one) in place of the recorded program."""
        return self.command([line.launcher, *line.options, *(program or line.program)], line.env)

    def expected_hosts(self, order: str) -> list[str]:
        hosts, slots = self.cluster.hosts, self.cluster.spec.slots
        if order == "block":
            return [hosts[r // slots] for r in range(self.n)]
        return [hosts[r % len(hosts)] for r in range(self.n)]
