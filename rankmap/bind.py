"""``rankmap-bind``: start one rank on the PE its mapping names, under any launcher.

A hydra machinefile or a Slurm hostfile says on which host each rank runs,
not on which core or GPU: inside a host the launcher binds ranks in its own
order, or not at all.  The relaunch lines rankmap prints for those launchers
therefore start every rank through this wrapper::

    mpiexec -f launch/machinefile -n 16 rankmap-bind launch/bindings -- ./app

Each rank reads its number from the launcher's environment
(``RANK_VARIABLES``), finds its line in the bindings file rankmap wrote,
checks that it runs on the host the line names, sets its CPU affinity to the
line's CPUs and, on GPU nodes, makes the line's GPU the only visible device,
then execs the program: Python and compiled programs alike, the PID and the
environment the launcher gave stay the program's.

The bindings file (``formats.launch.format_bindings`` writes it)::

    # rank host cpus device
    0 cn01 2 -
    1 cn01 0-7,64-71 rocr:4
    2 cn02 @3 -

``cpus`` is a Linux CPU list of OS indices, or ``@K``: the K-th core of the
host in hwloc's logical order (what an Open MPI rankfile's ``slot=K`` names),
resolved on the host itself when the mapping knew only the machine's shape.
``device`` is ``-`` or ``KIND:INDEX``: ``cuda`` (CUDA_VISIBLE_DEVICES,
CUDA's order), ``nvml`` (CUDA_VISIBLE_DEVICES in PCI order), ``rocr``
(ROCR_VISIBLE_DEVICES), ``ze`` (ZE_AFFINITY_MASK).  The index is the one
the runtime gives the device, a partition of a partitioned GPU included
(``rocr:17``: partition 17 of a node whose MI300As run in CPX mode);
``ze:N.M`` names stack M of Intel GPU N (Level Zero's COMPOSITE mode).

Standard library only until a logical core must be resolved: the wrapper
runs before every rank and must start fast.  Errors are one line on stderr
and exit status 2 (127 when the program is not found).
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from .cpulist import MAX_CPU, format_cpulist, parse_cpulist

BINDINGS_FILE = "bindings"
HEADER = "# rankmap bindings: line per rank, read by rankmap-bind\n# rank host cpus device\n"

#: where launchers put a process's rank, the most specific first: under
#: ``mpirun`` inside a Slurm job SLURM_PROCID is the batch step's, not the rank
RANK_VARIABLES = (
    ("OMPI_COMM_WORLD_RANK", "Open MPI"),
    ("PMIX_RANK", "PMIx (Open MPI 5, PRRTE, srun --mpi=pmix)"),
    ("PMI_RANK", "MPICH hydra, Intel MPI, MVAPICH"),
    ("PALS_RANKID", "Cray PALS"),
    ("MV2_COMM_WORLD_RANK", "MVAPICH mpirun_rsh"),
    ("FLUX_TASK_RANK", "Flux"),
    ("JSM_NAMESPACE_RANK", "IBM jsrun"),
    ("ALPS_APP_PE", "Cray ALPS"),
    ("SLURM_PROCID", "Slurm srun"),
)

#: device kind -> the environment that makes that one device visible
DEVICE_ENVIRONMENT = {
    "cuda": lambda i: {"CUDA_VISIBLE_DEVICES": i},
    "nvml": lambda i: {"CUDA_VISIBLE_DEVICES": i, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
    "rocr": lambda i: {"ROCR_VISIBLE_DEVICES": i},
    "ze": lambda i: {"ZE_AFFINITY_MASK": i},
}


class BindError(Exception):
    """A rank cannot be started where its bindings line says."""


@dataclass(frozen=True)
class Binding:
    """One line of a bindings file: where rank ``rank`` runs."""

    rank: int
    host: str
    cpus: str           # a Linux CPU list, or "@K" (logical core K of the host)
    device: str | None  # "KIND:INDEX" or None

    def line(self) -> str:
        return f"{self.rank} {self.host} {self.cpus} {self.device or '-'}\n"


def cpus_token(os_cpus=None, logical_core: int | None = None) -> str:
    """The ``cpus`` field: OS CPUs when known, else a logical core."""
    if os_cpus:
        return format_cpulist(os_cpus)
    return f"@{int(logical_core)}"


def _bindings_path(path) -> Path:
    path = Path(path)
    return path / BINDINGS_FILE if path.is_dir() else path


def _lines(path: Path):
    """``(line number, words)`` of the data lines of a bindings file."""
    try:
        with open(path, encoding="utf-8") as fh:
            for no, raw in enumerate(fh, 1):
                words = raw.split("#", 1)[0].split()
                if words:
                    yield no, words
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the bindings file "
                         f"({getattr(exc, 'strerror', None) or exc})") from None


def _parse(path: Path, no: int, words: list[str]) -> Binding:
    where = f"{path}:{no}"
    if len(words) != 4:
        raise ValueError(f"{where}: expected 'rank host cpus device', got {' '.join(words)[:60]!r}")
    rank_text, host, cpus, device = words
    if not rank_text.isdecimal():
        raise ValueError(f"{where}: rank {rank_text[:20]!r} is not a number")
    try:
        _check_cpus(cpus)
        return Binding(int(rank_text), host, cpus, check_device(device))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def read_bindings(path) -> list[Binding]:
    """The bindings file ``path`` (or ``path/bindings`` for a directory),
    one ``Binding`` per rank, checked: ranks 0..P-1 each once, valid CPU
    lists and devices.  ValueError naming the file and line."""
    path = _bindings_path(path)
    out: dict[int, Binding] = {}
    for no, words in _lines(path):
        b = _parse(path, no, words)
        if b.rank in out:
            raise ValueError(f"{path}:{no}: rank {b.rank} listed twice")
        out[b.rank] = b
    if not out:
        raise ValueError(f"{path}: no rank in the bindings file")
    missing = sorted(set(range(len(out))) - set(out))
    if missing:
        raise ValueError(f"{path}: {len(out)} lines but no line for rank {missing[0]} "
                         "(ranks must be 0..P-1)")
    return [out[r] for r in range(len(out))]


def binding_of(path, rank: int, who: str | None = None) -> tuple[Binding, int]:
    """Rank ``rank``'s line of a bindings file (line r is rank r, as
    rankmap writes it) and the number of ranks the file places.  Only that
    line is parsed: every rank of a large job reads the file.  ``who``
    names the rank in errors (default ``rank R``)."""
    path = _bindings_path(path)
    found, count = None, 0
    for no, words in _lines(path):
        if count == rank:
            found = _parse(path, no, words)
            if found.rank != rank:
                raise ValueError(f"{path}:{no}: line {rank + 1} places rank {found.rank}, not "
                                 f"{rank} (rankmap writes line r for rank r)")
        count += 1
    if found is None:
        raise BindError(f"{who or f'rank {rank}'}, but {path} places ranks 0..{count - 1}: "
                        f"start the job with -n {count}")
    return found, count


def _check_cpus(cpus: str) -> None:
    if cpus.startswith("@"):
        if not cpus[1:].isdecimal() or int(cpus[1:]) >= MAX_CPU:
            raise ValueError(f"logical core {cpus[:20]!r} is not @ and a core number")
        return
    try:
        if not parse_cpulist(cpus):
            raise ValueError
    except ValueError:
        raise ValueError(f"bad CPU list {cpus[:40]!r} (expected e.g. 0-3,8 or @5)") from None


def check_device(device: str) -> str | None:
    """A device field: ``-`` (None) or ``KIND:INDEX``; ValueError else."""
    if device == "-":
        return None
    kind, sep, index = device.partition(":")
    whole, dot, stack = index.partition(".")
    stacked = dot and kind == "ze" and stack.isdigit()
    if not sep or kind not in DEVICE_ENVIRONMENT or not whole.isdigit() or (dot and not stacked):
        raise ValueError(f"device {device[:30]!r} is not KIND:INDEX with KIND one of "
                         f"{', '.join(DEVICE_ENVIRONMENT)} (ze:N.M for a stack; or - for none)")
    return device


def rank_from_environment(environ=None) -> tuple[int, str]:
    """``(rank, variable)`` from the first launcher variable set."""
    env = os.environ if environ is None else environ
    for name, _ in RANK_VARIABLES:
        value = env.get(name)
        if value is None:
            continue
        if not value.strip().isdigit():
            raise BindError(f"{name}={value[:20]!r} is not a rank number")
        return int(value), name
    raise BindError("no rank in the environment: start rankmap-bind under an MPI launcher "
                    f"(it reads {', '.join(n for n, _ in RANK_VARIABLES)})")


def same_host(a: str, b: str) -> bool:
    """Host names equal up to case and domain (``cn01`` is ``cn01.cluster``)."""
    return a.split(".", 1)[0].lower() == b.split(".", 1)[0].lower()


def resolve_cpus(token: str) -> set[int]:
    """OS CPUs of a ``cpus`` field; ``@K`` looks this host's cores up."""
    if not token.startswith("@"):
        return parse_cpulist(token)
    from .topology.tree import core_slots
    from .topology.live import discover_local

    core = int(token[1:])
    here = discover_local(use_lstopo=False)  # sysfs: the same tree as lstopo's, no process per rank
    slots = core_slots(here)
    cpus = {int(c) for c, s in zip(here.pe_os_index, slots) if s == core}
    if not cpus:
        raise BindError(f"this host has {int(slots.max()) + 1} cores, no logical core {core}")
    return cpus


def device_environment(device: str | None) -> dict[str, str]:
    """The variables that make ``device`` the only one a rank sees."""
    if device is None:
        return {}
    kind, _, index = device.partition(":")
    return DEVICE_ENVIRONMENT[kind](index)


def apply(binding: Binding, environ: dict, *, check_host: bool = True, dry_run: bool = False) -> set[int]:
    """Bind this process as ``binding`` says: affinity set (not with
    ``dry_run``), ``environ`` updated for the device; returns the CPUs."""
    here = socket.gethostname()
    if check_host and not same_host(here, binding.host):
        raise BindError(f"rank {binding.rank} runs on {here}, but the bindings place it on "
                        f"{binding.host}: relaunch with the host file written beside the bindings "
                        "(or pass --ignore-host when the names differ only in form)")
    cpus = resolve_cpus(binding.cpus) if not (dry_run and binding.cpus.startswith("@")) else set()
    if not dry_run:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError as exc:
            raise BindError(f"rank {binding.rank}: cannot bind to CPUs {format_cpulist(cpus)} on "
                            f"{here} ({exc.strerror}; outside this job's CPUs?)") from None
    environ.update(device_environment(binding.device))
    return cpus


USAGE = """usage: rankmap-bind [--report] [--ignore-host] [--dry-run] BINDINGS -- PROGRAM [ARGS...]

Start PROGRAM as the rank the launcher gave this process, bound to the CPUs
(and GPU) that line of BINDINGS names (a bindings file rankmap map wrote, or
the directory holding it). Put it between the launcher and the program:

  mpiexec -f launch/machinefile -n 16 rankmap-bind launch/bindings -- ./app
  SLURM_HOSTFILE=launch/slurm.hostfile srun -n 16 --distribution=arbitrary \\
      --cpu-bind=none rankmap-bind launch/bindings -- python app.py

  --report       each rank prints its host, CPUs and device on stderr
  --ignore-host  bind even when this host is not the one the line names
  --dry-run      each rank prints its line's CPUs and device variables on
                 stdout and exits, binding and running nothing (a check of
                 the bindings under the real launcher)
"""


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if args else 2
    flags = {"--report": False, "--ignore-host": False, "--dry-run": False}
    while args and args[0] in flags:
        flags[args.pop(0)] = True
    if len(args) < 3 or args[1] != "--":
        print("rankmap-bind: expected BINDINGS -- PROGRAM [ARGS...] (rankmap-bind --help)", file=sys.stderr)
        return 2
    path, program = args[0], args[2:]
    try:
        rank, variable = rank_from_environment()
        b, _ = binding_of(path, rank, f"{variable}={rank}")
        environ = dict(os.environ)
        cpus = apply(b, environ, check_host=not flags["--ignore-host"], dry_run=flags["--dry-run"])
    except (ValueError, BindError) as exc:
        print(f"rankmap-bind: {exc}", file=sys.stderr)
        return 2
    if flags["--dry-run"]:
        variables = " ".join(f"{k}={v}" for k, v in device_environment(b.device).items())
        print(f"rank {rank} host {b.host} cpus {b.cpus} {variables}".rstrip(), flush=True)
        return 0
    if flags["--report"]:
        print(f"rankmap-bind: rank {rank} on {socket.gethostname()} cpus {format_cpulist(cpus)}"
              f" device {b.device or '-'}", file=sys.stderr, flush=True)
    try:
        os.execvpe(program[0], program, environ)
    except OSError as exc:
        print(f"rankmap-bind: cannot run {program[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main())
