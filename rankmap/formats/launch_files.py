"""Launch files read back: every format ``launch`` writes is a mapping that
``rankmap eval --mapping`` scores and ``rankmap show --mapping`` draws.

Each format says where its ranks start as far as it can: a PE (``perm``),
a position in the launcher's slot order (``mpich``), a host (``hydra``,
``slurm``), a host and a core (``openmpi``) or a host and CPUs (``bind``).
``read_launch_file`` gives that as a ``LaunchPlacement``;
``LaunchPlacement.pe_of_task`` turns it into PEs of a machine the way the
launcher places ranks (ranks of one host fill its PEs in rank order where
the file names hosts only), ``launch_order`` into the order of the ranks
for a picture.

One ``LaunchReader`` per format in ``READERS``: its name (a key of
``launch.LAUNCH_FORMATS``), how its content looks, and its reader.  A
format ``launch`` learns to write is one more entry here (a test checks that
every written format reads back).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..limits import MAX_PES, MAX_TASKS, check_readable
from .common import FormatError
from ..topology.tree import core_slots
from .hydra import parse_rankmap
from .launch import LAUNCH_FILE_NAMES, LAUNCH_FORMATS, hydra_rankmap_of, hydra_rankmap_path


@dataclass
class LaunchPlacement:
    """Where launch file ``path`` (format ``kind``) starts each of its ``n``
    ranks: whichever of these the format says (the others None)."""

    path: str
    kind: str
    n: int
    pe: np.ndarray | None = None          # perm: PE of each rank
    slot_order: np.ndarray | None = None  # mpich: the ranks in the order slots are filled
    host: list[str] | None = None         # hydra, slurm, openmpi, bind: host of each rank
    core: np.ndarray | None = None        # openmpi (slot=K), bind (@K): logical core, else -1
    cpus: list[set[int] | None] | None = None  # bind: the OS CPUs of each rank

    @property
    def hosts_only(self) -> bool:
        """The file places ranks on hosts, not on cores (hydra, Slurm)."""
        return self.host is not None and self.core is None and self.cpus is None

    def launch_order(self, host_order=None) -> tuple[np.ndarray, list[str] | None]:
        """The ranks in launch order (hosts in the order ``host_order``
        gives them, a function of the hosts returning host -> place,
        default their first appearance; then core or rank within a host)
        and, where the file names hosts, the host at each position."""
        if self.pe is not None:
            return np.argsort(self.pe, kind="stable"), None
        if self.slot_order is not None:
            return self.slot_order.copy(), None
        first = host_order(self.host) if host_order is not None else \
            {h: i for i, h in enumerate(dict.fromkeys(self.host))}
        within = np.zeros(self.n, dtype=np.int64) if self.core is None else self.core
        if self.cpus is not None:
            within = np.asarray([min(c) if c else k for c, k in zip(self.cpus, within.tolist())])
        order = np.lexsort((np.arange(self.n), within, [first[h] for h in self.host]))
        return order, [self.host[t] for t in order]

    def pe_of_task(self, topology) -> np.ndarray:
        """The PE of each rank on ``topology`` as the launcher places it;
        a ``FormatError`` naming the file when the machine lacks a host, a
        core or a CPU the file names."""
        if self.pe is not None:
            return self.pe
        if self.slot_order is not None:
            if self.n > topology.n_pes:
                raise FormatError(f"{self.path}: an MPICH_RANK_ORDER file orders {self.n} ranks "
                                  f"but names no PEs, and the machine has only {topology.n_pes}: "
                                  "give the perm file (mapping.txt) for several ranks per PE")
            pe = np.empty(self.n, dtype=np.int64)
            pe[self.slot_order] = np.arange(self.n)  # position i: the i-th slot the launcher fills
            return pe
        return self._on_hosts(topology)

    def _on_hosts(self, topology) -> np.ndarray:
        pes_of: dict[str, np.ndarray] = {}
        for h in dict.fromkeys(self.host):
            pes = np.flatnonzero(topology.pe_host == h)
            if not pes.size:
                known = list(dict.fromkeys(topology.pe_host.tolist()))
                shown = ", ".join(known[:6]) + (" ..." if len(known) > 6 else "")
                raise FormatError(f"{self.path}: host {h!r} is not in the machine (its hosts: "
                                  f"{shown}); describe the machine with --hosts/--hostfile")
            pes_of[h] = pes
        cores = core_slots(topology) if self.core is not None and (self.core >= 0).any() else None
        os_index = np.asarray(topology.pe_os_index)
        pe_cpus = getattr(topology, "pe_cpus", None)
        used: dict[int, int] = {}
        filled: dict[str, int] = {}
        out = np.empty(self.n, dtype=np.int64)
        for r, h in enumerate(self.host):
            pes = pes_of[h]
            if self.cpus is not None and self.cpus[r]:
                # the PE bound to exactly these CPUs (a trace's), else the PUs among them
                exact = [p for p in pes.tolist() if pe_cpus is not None and pe_cpus[p]
                         and set(pe_cpus[p]) == self.cpus[r]]
                choice = np.asarray(exact, dtype=np.int64) if exact else \
                    pes[np.isin(os_index[pes], sorted(self.cpus[r]))]
                what = f"CPUs {sorted(self.cpus[r])[:8]}"
            elif self.core is not None and self.core[r] >= 0:
                choice = pes[cores[pes] == self.core[r]]
                what = f"core {int(self.core[r])}"
            else:  # hosts only: the host's ranks fill its PEs in rank order
                k = filled.get(h, 0)
                filled[h] = k + 1
                out[r] = pes[k % pes.size]
                continue
            if not choice.size:
                raise FormatError(f"{self.path}: rank {r}: host {h!r} of the machine has no {what}")
            # hardware threads of one core (or one CPU set) in turn
            pick = min(choice.tolist(), key=lambda p: (used.get(p, 0), p))
            used[pick] = used.get(pick, 0) + 1
            out[r] = pick
        return out


# ------------------------------------------------------------- the readers
def _data(lines) -> list[tuple[int, str]]:
    """(line number, text) of the lines that are not comments or blank."""
    out = []
    for no, raw in enumerate(lines, 1):
        text = raw.split("#", 1)[0].strip()
        if text:
            out.append((no, text))
    return out


def _count_check(path: str, kind: str, got: int, n: int, what: str) -> None:
    if got != n:
        raise FormatError(f"{path}: {got} {what} for a job of {n} ranks (a {kind} places every "
                          "rank once)")


def _read_perm(path: str, data, n: int) -> LaunchPlacement:
    from .launch import read_perm

    pe = read_perm(path)
    _count_check(path, "perm file", pe.size, n, "lines")
    return LaunchPlacement(path, "perm", n, pe=pe)


_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def _read_rank_order(path: str, data, n: int) -> LaunchPlacement:
    """Cray ``MPICH_RANK_ORDER``: ranks and ranges ``a-b`` separated by commas."""
    order: list[int] = []
    for no, text in data:
        for token in (t.strip() for t in text.split(",")):
            m = _RANGE.fullmatch(token)
            if not token:
                continue
            if m is None:
                raise FormatError(f"{path}:{no}: expected ranks separated by commas (or a-b), "
                                  f"got {token[:30]!r}")
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            if hi < lo or hi >= n or len(order) + hi - lo + 1 > n:
                raise FormatError(f"{path}:{no}: {token!r} is not in the ranks 0..{n - 1} of the job "
                                  "or repeats one")
            order.extend(range(lo, hi + 1))
    _count_check(path, "MPICH_RANK_ORDER file", len(order), n, "ranks")
    if len(set(order)) != n:
        dup = next(r for r in order if order.count(r) > 1)
        raise FormatError(f"{path}: rank {dup} listed twice")
    return LaunchPlacement(path, "mpich", n, slot_order=np.asarray(order, dtype=np.int64))


def _read_machinefile(path: str, data, n: int) -> LaunchPlacement:
    """MPICH hydra ``host[:count]`` lines: ranks fill them in file order,
    wrapping round as hydra does when the counts hold fewer ranks; or,
    where the file says ``-rankmap`` places the ranks, line ``k`` of
    ``FILE.rankmap`` for each rank."""
    if hydra_rankmap_of(path) is not None:
        return _read_rankmap_placement(path, data, n)
    runs = []
    for no, text in data:
        fields = text.split()
        host, sep, count = fields[0].partition(":")
        if not host or (sep and not count.isdigit()) or any("=" not in f for f in fields[1:]):
            raise FormatError(f"{path}:{no}: expected 'host[:count]', got {text[:60]!r}")
        c = int(count) if sep else 1
        if c < 1 or c > MAX_TASKS:
            raise FormatError(f"{path}:{no}: count {c} is not in 1..{MAX_TASKS}")
        runs.append((host, c))
        if sum(k for _, k in runs) >= n:
            break
    hosts = [h for h, c in runs for _ in range(c)]
    if not hosts:
        raise FormatError(f"{path}: no host line")
    return LaunchPlacement(path, "hydra", n, host=[hosts[r % len(hosts)] for r in range(n)])


def _read_rankmap_placement(path: str, data, n: int) -> LaunchPlacement:
    hosts = []
    for no, text in data:
        host, sep, count = text.partition(":")
        if not host or (sep and not count.isdigit()) or " " in text:
            raise FormatError(f"{path}:{no}: expected 'host:count', got {text[:60]!r}")
        hosts.append(host)
    rankmap = hydra_rankmap_path(path)
    check_readable(rankmap)
    with open(rankmap, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    try:
        line = parse_rankmap(text, n)
    except ValueError as exc:
        raise FormatError(f"{rankmap}: {exc} (hydra's -rankmap: host line numbers and "
                          "(first,hosts,ranks) blocks)") from None
    if line.size and line.max() >= len(hosts):
        raise FormatError(f"{rankmap}: host line {int(line.max())} is not in {path} "
                          f"({len(hosts)} lines)")
    return LaunchPlacement(path, "hydra", n, host=[hosts[k] for k in line.tolist()])


def _read_rankfile(path: str, data, n: int) -> LaunchPlacement:
    """Open MPI ``rank R=HOST slot=K`` (K: a logical core; a list or range
    gives its first)."""
    host: list[str | None] = [None] * n
    core = np.full(n, -1, dtype=np.int64)
    for no, text in data:
        m = re.fullmatch(r"rank\s+(\d+)\s*=\s*(\S+)\s+slot\s*=\s*(\d+)(?:[-,]\d+)*(\s.*)?", text)
        if m is None:
            raise FormatError(f"{path}:{no}: expected 'rank R=HOST slot=K' with K a core number, "
                              f"got {text[:60]!r}")
        r, k = int(m.group(1)), int(m.group(3))
        if r >= n:
            raise FormatError(f"{path}:{no}: rank {r} is not in the job's ranks 0..{n - 1}")
        if k >= MAX_PES:
            raise FormatError(f"{path}:{no}: slot {k} is beyond the {MAX_PES} PEs rankmap handles")
        if host[r] is not None:
            raise FormatError(f"{path}:{no}: rank {r} listed twice")
        host[r], core[r] = m.group(2), k
    missing = [r for r, h in enumerate(host) if h is None]
    if missing:
        raise FormatError(f"{path}: no line for rank {missing[0]} ({n - len(missing)} of the job's "
                          f"{n} ranks placed)")
    return LaunchPlacement(path, "openmpi", n, host=host, core=core)


def _read_hostfile(path: str, data, n: int) -> LaunchPlacement:
    """``SLURM_HOSTFILE``: line r is the host of rank r."""
    hosts = []
    for no, text in data:
        if len(text.split()) != 1 or ":" in text or "=" in text:
            raise FormatError(f"{path}:{no}: expected one host name per line, got {text[:60]!r}")
        hosts.append(text)
    _count_check(path, "Slurm hostfile", len(hosts), n, "lines")
    return LaunchPlacement(path, "slurm", n, host=hosts)


def _read_bindings(path: str, data, n: int) -> LaunchPlacement:
    from ..bind import read_bindings
    from ..cpulist import parse_cpulist

    try:
        lines = read_bindings(path)
    except ValueError as exc:
        raise FormatError(str(exc)) from None
    _count_check(path, "bindings file", len(lines), n, "ranks")
    core = np.asarray([int(b.cpus[1:]) if b.cpus.startswith("@") else -1 for b in lines],
                      dtype=np.int64)
    cpus = [None if b.cpus.startswith("@") else parse_cpulist(b.cpus) for b in lines]
    return LaunchPlacement(path, "bind", n, host=[b.host for b in lines], core=core, cpus=cpus)


@dataclass(frozen=True)
class LaunchReader:
    """One launch format read back: ``looks_like(data lines, comment)``
    tells its content, ``read(path, data lines, n)`` reads it."""

    kind: str
    looks_like: Callable[[list[tuple[int, str]], str], bool]
    read: Callable[[str, list[tuple[int, str]], int], LaunchPlacement]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _words(data) -> list[list[str]]:
    return [text.split() for _, text in data]


READERS = {r.kind: r for r in (
    LaunchReader("bind", lambda d, c: "rankmap bindings" in c or (bool(d) and all(
        len(w) == 4 and w[0].isdigit() for w in _words(d))), _read_bindings),
    LaunchReader("openmpi", lambda d, c: bool(d) and d[0][1].startswith("rank "), _read_rankfile),
    LaunchReader("hydra", lambda d, c: bool(d) and re.fullmatch(r"[^\s:,=]+:\S*(\s.*)?", d[0][1])
                 is not None, _read_machinefile),
    LaunchReader("mpich", lambda d, c: "MPICH_RANK_ORDER" in c or (bool(d) and any(
        "," in t or "-" in t.lstrip("-") for _, t in d) and all(
        re.fullmatch(r"[\d,\s-]+", t) for _, t in d)), _read_rank_order),
    LaunchReader("perm", lambda d, c: bool(d) and all(len(w) == 1 for w in _words(d))
                 and _is_number(d[0][1]), _read_perm),
    LaunchReader("slurm", lambda d, c: bool(d) and all(len(w) == 1 for w in _words(d)),
                 _read_hostfile),
)}
#: the file names ``rankmap map --as all`` writes, and ``-o FILE``'s bindings beside FILE
_KIND_OF_NAME = {name: kind for kind, name in LAUNCH_FILE_NAMES.items()}


def launch_kind(path: str, text: str) -> str:
    """The launch format of ``path``: from its name when rankmap gave it
    that name, else from its content."""
    name = os.path.basename(path)
    if name in _KIND_OF_NAME:
        return _KIND_OF_NAME[name]
    if name.endswith("." + LAUNCH_FILE_NAMES["bind"]):
        return "bind"
    lines = text.splitlines()
    data = _data(lines)
    comment = "\n".join(line for line in lines[:3] if line.lstrip().startswith("#"))
    for reader in READERS.values():
        if reader.looks_like(data, comment):
            return reader.kind
    first = data[0][1][:60] if data else ""
    raise FormatError(f"{path}: not a launch file rankmap reads ({', '.join(LAUNCH_FORMATS)}); "
                      f"first line {first!r}" if data else f"{path}: empty mapping file")


def read_launch_file(path, n: int) -> LaunchPlacement:
    """Where launch file ``path`` (any of ``LAUNCH_FORMATS``, detected)
    starts each of a job's ``n`` ranks."""
    path = os.fspath(path)
    check_readable(path)
    if os.path.isdir(path):
        raise FormatError(f"{path}: a directory; give one launch file in it "
                          f"({', '.join(LAUNCH_FILE_NAMES.values())})")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not a text file (byte {exc.start} is not UTF-8)") from None
    except OSError as exc:
        raise FormatError(f"{path}: cannot read the mapping ({exc.strerror or exc})") from None
    kind = launch_kind(path, text)
    return READERS[kind].read(path, _data(text.splitlines()), n)
