"""Launch files: how a mapping reaches the next run of the program.

- ``perm``     one integer per line, line t = PE of task t (KaHIP/VieM
  mapping files); PEs are the topology's leaves left to right.
- ``mpich``    Cray MPICH ``MPICH_RANK_ORDER`` file: the ranks in the order
  the launcher fills slots (PE order), comma separated.
- ``hydra``    MPICH hydra machinefile (``mpiexec -f FILE``): one
  ``host:count`` line per host where each host holds consecutive ranks;
  otherwise each host once and ``FILE.rankmap``, hydra's ``-rankmap`` (the
  line of each rank), where MPICH reads that placement back right, else
  ``host:count`` runs in rank order (``formats.hydra`` says why).
- ``openmpi``  Open MPI rankfile: ``rank r=HOST slot=S`` with S the logical
  core of the PE on its host (``mpirun --rankfile FILE``).
- ``slurm``    ``SLURM_HOSTFILE`` for ``srun --distribution=arbitrary``:
  line r = host of rank r.
- ``bind``     ``rankmap-bind``'s bindings: line r = host, CPUs and GPU of
  rank r.  hydra and Slurm place ranks on hosts only; the relaunch lines
  for them start each rank through ``rankmap-bind`` with this file (see
  ``rankmap.bind``).

Host names come from the topology (generated ``node0``... for a hierarchy).
"""

from __future__ import annotations

import os

import numpy as np

from ..bind import BINDINGS_FILE, HEADER as BINDINGS_HEADER, Binding, cpus_token
from ..topology import Topology
from ..topology.tree import core_slots
from .common import FormatError, check_number, check_readable
from .hydra import HYDRA_RANKMAP_COMMENT, hydra_form, rankmap_argument, runs as hydra_runs

LAUNCH_FORMATS = ["perm", "mpich", "hydra", "openmpi", "slurm", "bind"]
# the file names ``--as all -o DIR`` (and the demo) write, one per format
LAUNCH_FILE_NAMES = {"perm": "mapping.txt", "mpich": "MPICH_RANK_ORDER", "hydra": "machinefile",
                     "openmpi": "rankfile", "slurm": "slurm.hostfile", "bind": BINDINGS_FILE}


def _ranks_in_slot_order(pe_of_task: np.ndarray) -> np.ndarray:
    """Tasks sorted by PE (stable: tasks sharing a PE keep their order)."""
    return np.argsort(pe_of_task, kind="stable")


def format_perm(pe_of_task, topology: Topology) -> str:
    """Line t = PE of task t (KaHIP/VieM mapping file)."""
    return "".join(f"{int(p)}\n" for p in pe_of_task)


def format_mpich_rank_order(pe_of_task, topology: Topology, per_line: int = 16) -> str:
    """Cray ``MPICH_RANK_ORDER``: ranks in the order the launcher fills slots."""
    order = _ranks_in_slot_order(np.asarray(pe_of_task)).tolist()
    lines = [",".join(str(r) for r in order[i:i + per_line]) for i in range(0, len(order), per_line)]
    return "# MPICH_RANK_ORDER written by rankmap: ranks in slot order\n" + ",\n".join(lines) + "\n"


def format_hydra_machinefile(pe_of_task, topology: Topology) -> str:
    """MPICH hydra machinefile (``hydra.hydra_form``): ``host:count`` runs of
    consecutive ranks, or each host once when ``format_hydra_rankmap``
    places the ranks (a comment line says so)."""
    form, hosts, ids = hydra_form(pe_of_task, topology)
    if form == "rankmap":
        counts = np.bincount(ids, minlength=len(hosts))
        return (f"{HYDRA_RANKMAP_COMMENT}\n"
                + "".join(f"{h}:{c}\n" for h, c in zip(hosts, counts.tolist())))
    out = []
    for first, nodes, count in hydra_runs(ids):
        out.extend(f"{hosts[first + k]}:{count}" for k in range(nodes))
    return "\n".join(out) + "\n"


def format_hydra_rankmap(pe_of_task, topology: Topology) -> str | None:
    """hydra's ``-rankmap`` for the machinefile above (the line of each
    rank), or None where the machinefile places the ranks itself."""
    form, _, ids = hydra_form(pe_of_task, topology)
    return rankmap_argument(ids) + "\n" if form == "rankmap" else None


def format_openmpi_rankfile(pe_of_task, topology: Topology) -> str:
    """Open MPI rankfile: ``rank r=HOST slot=S``, S the logical core of the
    PE on its host (hardware threads of one core share it; see
    ``core_slots``)."""
    pe = np.asarray(pe_of_task)
    slot = core_slots(topology)
    return "".join(f"rank {r}={topology.pe_host[p]} slot={slot[p]}\n" for r, p in enumerate(pe.tolist()))


def format_slurm_hostfile(pe_of_task, topology: Topology) -> str:
    """``SLURM_HOSTFILE``: line r = host of rank r."""
    return "".join(f"{topology.pe_host[p]}\n" for p in np.asarray(pe_of_task).tolist())


def format_bindings(pe_of_task, topology) -> str:
    """``rankmap-bind``'s file: line r = host, CPUs and GPU of rank r."""
    cpus = pe_cpu_tokens(topology)
    devices = getattr(topology, "pe_device", None)
    return BINDINGS_HEADER + "".join(
        Binding(r, topology.pe_host[p], cpus[p], None if devices is None else devices[p]).line()
        for r, p in enumerate(np.asarray(pe_of_task).tolist()))


def pe_cpu_tokens(topology) -> list[str]:
    """Each PE's CPUs as a bindings field: the CPUs its leaf names (a GPU's
    cores, a trace's recorded binding), else its PU's OS index, else its
    logical core on the host (``@K``, resolved there by ``rankmap-bind``)."""
    if not isinstance(topology, Topology):
        return [cpus_token(logical_core=s) for s in topology.slot_in_host().tolist()]
    slots = None
    out = []
    for p, (cpus, os_index) in enumerate(zip(topology.pe_cpus, topology.pe_os_index.tolist())):
        if cpus is None and os_index >= 0:
            cpus = (os_index,)
        if cpus:
            out.append(cpus_token(cpus))
        else:
            slots = core_slots(topology) if slots is None else slots
            out.append(cpus_token(logical_core=int(slots[p])))
    return out


def has_devices(topology) -> bool:
    """Whether some PE is a GPU (then every launcher needs ``rankmap-bind``)."""
    devices = getattr(topology, "pe_device", None)
    return devices is not None and any(d is not None for d in devices)


FORMATTERS = {"perm": format_perm, "mpich": format_mpich_rank_order,
              "hydra": format_hydra_machinefile, "openmpi": format_openmpi_rankfile,
              "slurm": format_slurm_hostfile, "bind": format_bindings}


def write_launch_file(pe_of_task, topology: Topology, path: str, kind: str = "perm") -> None:
    """Write the mapping as launch format ``kind`` (``LAUNCH_FORMATS``) to ``path``."""
    if kind not in FORMATTERS:
        raise ValueError(f"unknown launch format {kind!r}; choose from {', '.join(LAUNCH_FORMATS)}")
    text = FORMATTERS[kind](np.asarray(pe_of_task, dtype=np.int64), topology)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def write_all_launch_files(pe_of_task, topology: Topology, directory) -> dict[str, str]:
    """Every launch format into ``directory`` (created), named as
    ``LAUNCH_FILE_NAMES``; returns format -> path."""
    os.makedirs(directory, exist_ok=True)
    paths = {}
    for kind in LAUNCH_FORMATS:
        paths[kind] = os.path.join(str(directory), LAUNCH_FILE_NAMES[kind])
        write_launch_file(pe_of_task, topology, paths[kind], kind)
    _write_hydra_rankmap(pe_of_task, topology, paths)
    return paths


def _write_hydra_rankmap(pe_of_task, topology, written: dict) -> None:
    """Beside a hydra machinefile ``F`` in ``written``: ``F.rankmap`` where
    the machinefile names each host once (``written["hydra_rankmap"]``),
    else no such file (an older one removed: its line would misplace)."""
    if "hydra" not in written:
        return
    path = hydra_rankmap_path(written["hydra"])
    text = format_hydra_rankmap(np.asarray(pe_of_task, dtype=np.int64), topology)
    if text is None:
        if os.path.isfile(path):
            os.remove(path)
        return
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    written["hydra_rankmap"] = path


def hydra_rankmap_path(machinefile) -> str:
    """The ``-rankmap`` file that goes with hydra machinefile ``machinefile``."""
    return f"{machinefile}.rankmap"


def hydra_rankmap_of(machinefile) -> str | None:
    """``hydra_rankmap_path(machinefile)`` where the machinefile opens with
    the comment that says ``-rankmap`` places its ranks, else None."""
    try:
        with open(machinefile, encoding="utf-8", errors="replace") as fh:
            first = fh.readline().rstrip("\n")
    except OSError:
        return None
    return hydra_rankmap_path(machinefile) if first == HYDRA_RANKMAP_COMMENT else None


def write_launch_files(pe_of_task, topology: Topology, output, kind: str) -> dict[str, str]:
    """``kind`` "all": every format into the directory ``output``; else the
    one format to the file ``output`` and, for a format a launcher reads,
    the bindings its relaunch needs beside it (``OUTPUT.bindings``).
    Returns format -> path."""
    if kind == "all":
        return write_all_launch_files(pe_of_task, topology, output)
    write_launch_file(pe_of_task, topology, output, kind)
    written = {kind: str(output)}
    _write_hydra_rankmap(pe_of_task, topology, written)
    if kind not in ("perm", "bind"):
        written["bind"] = f"{output}.{BINDINGS_FILE}"
        write_launch_file(pe_of_task, topology, written["bind"], "bind")
    return written


def read_perm(path: str) -> np.ndarray:
    """Read a plain permutation file (one PE per line; ``#`` comments)."""
    values = []
    check_readable(path)
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        for no, line in enumerate(fh, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            try:
                values.append(check_number(path, no, int(text), "PE"))
            except ValueError as exc:
                if isinstance(exc, FormatError):
                    raise
                raise FormatError(f"{path}:{no}: expected one integer PE per line, got "
                                  f"{text[:40]!r}") from None
    if not values:
        raise ValueError(f"{path}: empty mapping file")
    return np.asarray(values, dtype=np.int64)
