"""The trace file: what a profiled MPI run sent, and where it ran.

File convention: ``NAME.rmtrace.npz``, a plain numpy ``.npz`` (zip of
``.npy`` arrays; ``numpy.load`` reads it without rankmap), format version 1:

``rankmap_trace``   uint8 array holding UTF-8 JSON metadata: ``format``
                    ("rankmap-trace"), ``version``, ``nranks``, ``phases``
                    (names, index = phase id), ``hosts`` (distinct host names),
                    ``host_topology_xml`` (host -> hwloc XML or null),
                    ``statuses`` (names, index = status id), ``collectives``
                    (model), ``mpi`` (library, version), ``argv``, ``program``,
                    ``network`` (optional: the network the site described,
                    ``RANKMAP_NETWORK``, a cluster file's network lines).
``ranks``           the COMM_WORLD ranks this file covers (int64)
``rank_host``       host id of each covered rank (index into ``hosts``)
``rank_status``     status id: complete (the rank's finished marker), error,
                    signal, exit, flushed (the last periodic flush of a rank
                    that never finished: its data stops at ``rank_t_end``),
                    started (nothing flushed since the start)
``rank_t_start``, ``rank_t_end``   Unix times per covered rank
``binding_ptr``, ``binding_cpus``  CSR list of each covered rank's CPU set
``gpu_ptr``, ``gpu_json``  optional: each covered rank's GPU record
                    (``rankmap.profile.gpu``: visible-device variables, the
                    devices it opened), UTF-8 JSON, empty where none
``{kind}_src``, ``{kind}_dst``, ``{kind}_phase``, ``{kind}_bytes``,
``{kind}_msgs``     sparse traffic for kind in p2p, collective, rma: world
                    ranks, phase id, bytes (float64: collective models may
                    split bytes), message count.  ``dst = -1`` is traffic to
                    processes outside COMM_WORLD.

A run leaves one part file per rank, ``NAME.rmtrace.npz.parts/rankNNNNNN
.rmtrace.npz``, each a trace covering one rank; rank 0 merges them into
``NAME.rmtrace.npz`` at the end.  ``read_trace`` accepts the merged file, a
parts directory, or a part; ``merge_traces`` joins traces over disjoint ranks.

Optional: each rank's event log in program order (``EventLog``, the input of
``rankmap.replay``): ``events_ptr``, ``events_op``, ``events_peer``,
``events_nbytes``, ``events_comm_ptr``, ``events_comm_runs``,
``events_truncated``; a file without them reads with ``Trace.events`` None.
"""

from __future__ import annotations

import json
import os
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

FORMAT = "rankmap-trace"
VERSION = 1
SUFFIX = ".rmtrace.npz"
PARTS_SUFFIX = ".parts"
KINDS = ("p2p", "collective", "rma")
STATUSES = ("complete", "error", "signal", "exit", "flushed", "started")
#: statuses of a rank that did not finish (no finished marker, killed unawares)
UNFINISHED = ("flushed", "started")
_FIELDS = ("src", "dst", "phase", "bytes", "msgs")
_MARKER = "rankmap_trace"

#: event kinds of an ``EventLog`` (its ``op`` values)
EVENT_SEND, EVENT_RECV, EVENT_WAIT, EVENT_COLL, EVENT_CSEND = range(5)
#: events a rank logs before its log stops (``EventLog.truncated``), at most ...
DEFAULT_MAX_EVENTS = 1 << 18
#: ... and the job's share of this many (the replay keeps 50-100 bytes an event: what it replays at most) ...
JOB_MAX_EVENTS = 1 << 22
#: ... and no log where a rank's share is below this (beyond 4096 ranks, unless asked for)
MIN_LOG_EVENTS = 1 << 10


def default_max_events(nranks: int) -> int:
    """Events each of ``nranks`` ranks logs unless told: the job's log stays
    within what the replay takes, and a share too short to hold an
    iteration is no log."""
    share = min(DEFAULT_MAX_EVENTS, JOB_MAX_EVENTS // max(int(nranks), 1))
    return share if share >= MIN_LOG_EVENTS else 0
_EVENT_FIELDS = ("ptr", "op", "peer", "nbytes", "comm_ptr", "comm_runs", "truncated")


@dataclass
class EventLog:
    """Every rank's point-to-point posts, waits and collectives in program
    order: what the link time cannot see (who waits for whom), for the replay.

    Rank r's events are ``ptr[r]:ptr[r+1]`` of ``op``/``peer``/``nbytes``:
    SEND/RECV name the peer's world rank (RECV -1: an ANY_SOURCE receive
    that never completed), WAIT the rank's own event (0-based within the
    rank) whose request it waits for, COLL a communicator, CSEND one
    modelled flow of the COLL before it.  ``truncated[r]``: rank r's log
    reached its cap.  Communicator c's world ranks, in its rank order, are
    the arithmetic runs ``comm_runs.reshape(-1, 3)[comm_ptr[c]:comm_ptr[c+1]]``
    (start, step, count each: COMM_WORLD, a row or a column of a grid is one
    run, so every rank's part carries its communicators in O(1), not O(P)).
    """

    ptr: np.ndarray
    op: np.ndarray
    peer: np.ndarray
    nbytes: np.ndarray
    comm_ptr: np.ndarray
    comm_runs: np.ndarray
    truncated: np.ndarray

    @property
    def nranks(self) -> int:
        return self.ptr.size - 1

    @property
    def ncomms(self) -> int:
        return self.comm_ptr.size - 1

    def rank_events(self, rank: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(op, peer, nbytes) of ``rank``'s events, in program order."""
        lo, hi = self.ptr[rank], self.ptr[rank + 1]
        return self.op[lo:hi], self.peer[lo:hi], self.nbytes[lo:hi]

    def runs(self, comm: int) -> np.ndarray:
        """Communicator ``comm``'s runs, one (start, step, count) a row."""
        return self.comm_runs.reshape(-1, 3)[self.comm_ptr[comm]:self.comm_ptr[comm + 1]]

    def members(self, comm: int) -> np.ndarray:
        """World ranks of communicator ``comm`` (in its rank order)."""
        start, step, count = self.runs(comm).T
        first = np.repeat(np.cumsum(count) - count, count)
        return np.repeat(start, count) + np.repeat(step, count) * (np.arange(int(count.sum())) - first)

    def sizes(self) -> np.ndarray:
        """Members of every communicator."""
        count = np.concatenate([[0], np.cumsum(self.comm_runs.reshape(-1, 3)[:, 2])])
        return count[self.comm_ptr[1:]] - count[self.comm_ptr[:-1]]

    @classmethod
    def from_members(cls, ptr, op, peer, nbytes, comms, truncated) -> EventLog:
        """A log whose communicators are given as member lists (``comms``)."""
        runs = [member_runs(c) for c in comms]
        return cls(np.asarray(ptr, dtype=np.int64), np.asarray(op, dtype=np.int8),
                   np.asarray(peer, dtype=np.int64), np.asarray(nbytes, dtype=np.int64),
                   np.concatenate([[0], np.cumsum([r.size // 3 for r in runs], dtype=np.int64)]).astype(np.int64),
                   np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64),
                   np.asarray(truncated, dtype=bool))

    @classmethod
    def of_rank(cls, nranks: int, rank: int, op, peer, nbytes, comms, truncated: bool) -> EventLog:
        """The log of a trace covering one rank (``comms``: member lists)."""
        ptr = np.zeros(nranks + 1, dtype=np.int64)
        ptr[rank + 1:] = len(op)
        trunc = np.zeros(nranks, dtype=bool)
        trunc[rank] = truncated
        return cls.from_members(ptr, op, peer, nbytes, comms, trunc)


def member_runs(members) -> np.ndarray:
    """World ranks as arithmetic runs, flat (start, step, count) triples:
    a run per stretch of equal differences, the same list always the same
    runs (communicators merge by them)."""
    m = np.asarray(members, dtype=np.int64)
    if m.size < 2:
        return np.array([m[0], 1, 1] if m.size else [], dtype=np.int64)
    d = np.diff(m)
    cut = np.flatnonzero(d[1:] != d[:-1]) + 1  # where the difference changes: a new stretch of d
    lo = np.concatenate([[0], cut])            # each stretch of d starts a run at that member ...
    count = np.diff(np.concatenate([lo, [m.size - 1]]))  # ... holding all but the stretch's last member,
    count[-1] += 1                             # which opens the next run; the last run holds it
    return np.stack([m[lo], d[lo], count], axis=1).ravel()


class RankInfo(NamedTuple):
    """Where and how one rank ran."""

    host: str | None
    binding: list
    status: str
    t_start: float
    t_end: float
    gpu: str | None = None   # JSON: the GPU it used (rankmap.profile.gpu), None: not recorded


@dataclass
class Trace:
    """A (possibly partial) recorded run: per-kind COO traffic plus metadata.

    ``info`` maps each COMM_WORLD rank whose own record is present to its
    ``RankInfo``; ``hosts``, ``bindings``, ``status`` are per-rank lists
    (``nranks`` entries, None where a rank's record is missing).
    """

    nranks: int
    edges: dict            # kind -> {"src","dst","phase","bytes","msgs"} arrays
    phases: list
    info: dict             # rank -> RankInfo
    host_topology_xml: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    source: str = ""
    events: EventLog | None = None  # each rank's event log (None: not recorded)

    @property
    def ranks(self) -> np.ndarray:
        return np.array(sorted(self.info), dtype=np.int64)

    def _per_rank(self, attr):
        out = [None] * self.nranks
        for r, i in self.info.items():
            out[r] = getattr(i, attr)
        return out

    @property
    def hosts(self) -> list:
        return self._per_rank("host")

    @property
    def bindings(self) -> list:
        return self._per_rank("binding")

    @property
    def gpus(self) -> list:
        """Each rank's GPU record (JSON text), None where none was recorded."""
        return self._per_rank("gpu")

    @property
    def status(self) -> list:
        return self._per_rank("status")

    @property
    def missing_ranks(self) -> np.ndarray:
        have = np.zeros(self.nranks, dtype=bool)
        have[self.ranks] = True
        return np.flatnonzero(~have)

    def _select(self, kind: str, phase):
        kinds = {"p2p": ("p2p", "rma"), "collective": ("collective",), "rma": ("rma",),
                 "all": KINDS}.get(kind)
        if kinds is None:
            raise ValueError(f"unknown traffic kind {kind!r}: choose p2p, collective, rma or all")
        cols = {f: np.concatenate([self.edges[k][f] for k in kinds]) for f in _FIELDS}
        keep = cols["dst"] >= 0
        if phase is not None:
            if phase not in self.phases:
                raise ValueError(f"{self.source or 'trace'}: no phase {phase!r} "
                                 f"(phases: {', '.join(self.phases) or 'none'})")
            keep &= cols["phase"] == self.phases.index(phase)
        return {f: v[keep] for f, v in cols.items()}

    def graph(self, kind: str = "p2p", phase: str | None = None):
        """The communication graph over COMM_WORLD ranks.

        ``kind``: ``p2p`` (point-to-point and one-sided), ``collective`` (as
        the recorded collective model attributed it), ``rma`` or ``all``;
        ``phase``: one phase, or None for the whole run.
        """
        from .graph import CommGraph

        c = self._select(kind, phase)
        name = Path(self.source).name.removesuffix(SUFFIX) if self.source else ""
        return CommGraph.from_edges(c["src"], c["dst"], c["bytes"], n=self.nranks,
                                    messages=c["msgs"].astype(np.float64), name=name)

    def external_bytes(self) -> float:
        """Bytes sent to processes outside COMM_WORLD (spawned/connected)."""
        return float(sum(e["bytes"][e["dst"] < 0].sum() for e in self.edges.values()))

    def topology(self):
        """The machine the job ran on, restricted to the ranks' slots, or None.

        Needs every host's hwloc XML (recorded at run time) and rankmap's
        hwloc/cluster readers.  One slot per rank: on the first CPU of each
        rank's binding when the bindings are distinct, else spread over the
        CPUs each rank may run on (ranks that shared CPUs share slots' PEs,
        as many slots on each host as it ran ranks).
        """
        return self.topology_and_placement()[0]

    def network(self) -> dict:
        """``compose_cluster``'s keywords for the network the run's site
        described (``RANKMAP_NETWORK`` when it was recorded); none where it
        described none, or where its text does not read (a warning)."""
        text = self.meta.get("network")
        if not text:
            return {}
        from .topology.cluster import network_description

        try:
            return network_description(text)
        except ValueError as exc:
            warnings.warn(f"{self.source or 'trace'}: the network recorded from RANKMAP_NETWORK does not read "
                          f"({exc}); its links are priced by the defaults", stacklevel=2)
            return {}

    def topology_and_placement(self):
        """``(topology, pe_of_rank)``: the job's machine restricted to its
        ranks' slots, and the slot each rank ran on.

        Ranks bound to distinct CPUs ran on the first CPU of their binding.
        Ranks that were not (unbound, as MPICH's hydra leaves them, or
        sharing CPUs) ran somewhere on their host: each host gets one slot
        per rank that ran there, on the CPUs its ranks could use, filled as
        MPI binds by default (``cluster.host_slot_pes``), and rank r the next
        slot of its host, so the placement is exact at node granularity.
        ``(None, None)`` when a host's machine tree was not recorded."""
        try:
            from .topology.cluster import compose_cluster, host_slot_pes, restrict_to_slots, slot_of_process
            from .topology.hwloc import read_hwloc_xml
        except ImportError:
            return None, None
        hosts, bindings = self.hosts, self.bindings
        order = [h for h in dict.fromkeys(hosts) if h is not None]
        if not order or any(self.host_topology_xml.get(h) is None for h in order):
            return None, None
        if any(not b for b in bindings):
            return None, None
        network = self.network()
        try:
            trees = [(h, read_hwloc_xml(self.host_topology_xml[h])) for h in order]
            topo = compose_cluster(trees, **network) if len(trees) > 1 else trees[0][1]
        except (ValueError, OSError):
            return None, None
        pe_of = {(h, int(os_i)): pe for pe, (h, os_i) in
                 enumerate(zip(_pe_hosts(topo, order), topo.pe_os_index))}
        distinct = len({(h, tuple(b)) for h, b in zip(hosts, bindings)}) == self.nranks
        try:
            if distinct:  # each rank's PE: its first CPU; a relaunch binds it to all of them
                rank_pes = np.asarray([pe_of[(h, b[0])] for h, b in zip(hosts, bindings)], dtype=np.int64)
                slots = slot_of_process(rank_pes)
                cpus: list = [None] * self.nranks
                for r, s in enumerate(slots.tolist()):
                    cpus[s] = bindings[r]
                return restrict_to_slots(topo, rank_pes).with_pe_cpus(cpus), slots
        except KeyError:
            return None, None
        if any((h, c) not in pe_of for h, b in zip(hosts, bindings) for c in b):
            return None, None  # a CPU the recorded tree does not have
        usable = {h: set() for h in order}
        for h, b in zip(hosts, bindings):
            usable[h].update(b)
        named = compose_cluster([(h, restrict_to_slots(tree, [p for p, c in enumerate(tree.pe_os_index)
                                                            if int(c) in usable[h]])) for h, tree in trees],
                                **network)
        ranks_on = {h: [] for h in order}
        for r, h in enumerate(hosts):
            ranks_on[h].append(r)
        slots = host_slot_pes(named, [(h, len(ranks_on[h])) for h in order])
        rank_pes, start = np.empty(self.nranks, dtype=np.int64), 0
        for h in order:  # rank i of a host on its i-th slot, as --hosts places the ranks of a trace
            rank_pes[ranks_on[h]] = np.sort(slots[start:start + len(ranks_on[h])])
            start += len(ranks_on[h])
        return restrict_to_slots(named, rank_pes), slot_of_process(rank_pes)

    # ----------------------------------------------------------------- I/O
    def write(self, path) -> Path:
        """Write atomically (temp file + rename): a reader never sees half a file."""
        path = Path(path)
        meta = dict(self.meta)
        hosts = sorted({i.host for i in self.info.values() if i.host is not None})
        meta.update(format=FORMAT, version=VERSION, nranks=int(self.nranks), phases=list(self.phases),
                    hosts=hosts, statuses=list(STATUSES),
                    host_topology_xml={h: self.host_topology_xml.get(h) for h in hosts})
        ranks = self.ranks
        infos = [self.info[r] for r in ranks]
        binds = [i.binding or [] for i in infos]
        arrays = {
            _MARKER: np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            "ranks": ranks,
            "rank_host": np.array([hosts.index(i.host) if i.host is not None else -1 for i in infos],
                                  dtype=np.int32),
            "rank_status": np.array([STATUSES.index(i.status) for i in infos], dtype=np.int8),
            "rank_t_start": np.array([i.t_start for i in infos], dtype=np.float64),
            "rank_t_end": np.array([i.t_end for i in infos], dtype=np.float64),
            "binding_ptr": np.concatenate([[0], np.cumsum([len(b) for b in binds])]).astype(np.int64),
            "binding_cpus": np.array([c for b in binds for c in b], dtype=np.int32),
        }
        if any(i.gpu for i in infos):
            gpus = [(i.gpu or "").encode() for i in infos]
            arrays["gpu_ptr"] = np.concatenate([[0], np.cumsum([len(g) for g in gpus])]).astype(np.int64)
            arrays["gpu_json"] = np.frombuffer(b"".join(gpus), dtype=np.uint8)
        for kind in KINDS:
            e = self.edges[kind]
            arrays.update({f"{kind}_src": e["src"].astype(np.int32), f"{kind}_dst": e["dst"].astype(np.int32),
                           f"{kind}_phase": e["phase"].astype(np.int32),
                           f"{kind}_bytes": e["bytes"].astype(np.float64),
                           f"{kind}_msgs": e["msgs"].astype(np.int64)})
        if self.events is not None:
            dtypes = {"op": np.int8, "truncated": bool}
            arrays.update({f"events_{f}": np.asarray(getattr(self.events, f), dtype=dtypes.get(f, np.int64))
                           for f in _EVENT_FIELDS})
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)
        os.replace(tmp, path)
        return path


def _pe_hosts(topo, order):
    hosts = getattr(topo, "pe_host", None)
    if hosts is None or len(order) == 1:
        return [order[0]] * len(topo.pe_os_index)
    return list(hosts)


# --------------------------------------------------------------------- reading
def is_trace(path) -> bool:
    """True for a trace file, a part file, or a directory of part files."""
    p = Path(path)
    if p.is_dir():
        return any(p.glob("*" + SUFFIX))
    if not p.is_file() or not zipfile.is_zipfile(p):
        return False
    try:
        with zipfile.ZipFile(p) as z:
            return _MARKER + ".npy" in z.namelist()
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError):  # the reader says how
        return False


def read_trace(path, *, warn_missing: bool = True) -> Trace:
    """Read a merged trace, a part file, or a parts directory (merged on the
    fly; missing ranks are reported by name in a warning and in
    ``Trace.missing_ranks``)."""
    p = Path(path)
    if p.is_dir():
        parts = sorted(p.glob("*" + SUFFIX))
        if not parts:
            raise ValueError(f"{p}: no {SUFFIX} files in this directory")
        trace = merge_traces([_read_file(f) for f in parts])
        trace.source = str(p)
    else:
        trace = _read_file(p)
    if warn_missing and len(trace.missing_ranks):
        warnings.warn(missing_report(trace), stacklevel=2)
    return trace


def missing_report(trace: Trace) -> str:
    """One line naming the ranks a trace has no record from (a crashed job)."""
    miss = trace.missing_ranks
    shown = ", ".join(map(str, miss[:20])) + (" ..." if len(miss) > 20 else "")
    return (f"{trace.source}: no record from {len(miss)} of {trace.nranks} ranks ({shown}); "
            f"their sends are missing from the graph")


#: a member may expand to at most this many times the file's size (DEFLATE
#: reaches about 1000x on runs of zeros: a zip bomb), or this many bytes
MAX_EXPANSION, MIN_EXPANSION_CAP = 200, 512 << 20


def _read_file(path: Path) -> Trace:
    if not path.exists():
        raise OSError(f"{path}: no such trace file")
    if not path.is_file():
        raise ValueError(f"{path}: not a regular file")
    try:
        with zipfile.ZipFile(path) as z:
            names = {n.removesuffix(".npy"): n for n in z.namelist()}
            if _MARKER not in names:
                raise ValueError(f"{path}: not a rankmap trace (no {_MARKER!r} member)")
            cap = max(MIN_EXPANSION_CAP, MAX_EXPANSION * path.stat().st_size)
            total = sum(z.getinfo(n).file_size for n in names.values())
            if total > cap:
                raise ValueError(f"{path}: members expand to {total} bytes from a {path.stat().st_size}"
                                 f"-byte file (more than {cap}): refused as a zip bomb")
            marker = _member(path, z, names[_MARKER])
            try:
                meta = json.loads(marker.tobytes().decode())
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValueError(f"{path}: corrupt trace metadata ({exc})") from None
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
                raise ValueError(f"{path}: format {got!r} is not {FORMAT!r}")
            version = meta.get("version", 0)
            if not isinstance(version, int) or version > VERSION:
                raise ValueError(f"{path}: trace version {version!r} is newer than this "
                                 f"rankmap reads ({VERSION}); upgrade rankmap")
            a = {k: _member(path, z, n) for k, n in names.items() if k != _MARKER}
    except (OSError, zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError) as exc:
        if isinstance(exc, FileNotFoundError):  # NotImplementedError: an unknown compression
            raise
        raise ValueError(_damaged(path, exc)) from None
    try:
        trace = _build(_checked_meta(meta, path), a, str(path))
    except KeyError as exc:
        raise ValueError(f"{path}: trace lacks member {exc}") from None
    # a part whose rank never finished is complete up to its last flush,
    # which touches the file when nothing changed
    mtime = path.stat().st_mtime
    for r, i in trace.info.items():
        if i.status in UNFINISHED and mtime > i.t_end:
            trace.info[r] = i._replace(t_end=mtime)
    return trace


def _damaged(path: Path, exc: BaseException) -> str:
    """Why a trace file's zip cannot be read, and how to get the trace back."""
    with open(path, "rb") as fh:
        zip_start = fh.read(4) == b"PK\x03\x04"
    merge = f"rankmap merge {path}{PARTS_SUFFIX} -o {path}"  # where the run kept its parts
    if zip_start and "not a zip file" in str(exc):  # a zip ends with its directory: cut short
        return (f"{path}: truncated (the zip directory at its end is missing: a copy cut short, or "
                f"a run that died while writing it); a run's trace is rebuilt from its per-rank "
                f"parts with '{merge}'")
    if zip_start:
        return (f"{path}: damaged ({exc}); a run's trace is rebuilt from its per-rank parts with "
                f"'{merge}'")
    return f"{path}: not a rankmap trace ({exc})"


def _member(path: Path, z: zipfile.ZipFile, name: str) -> np.ndarray:
    """One ``.npy`` member, its declared shape checked against its stored
    size before anything is allocated (never unpickled)."""
    fmt = np.lib.format
    size = z.getinfo(name).file_size
    try:
        with z.open(name) as fh:
            version = fmt.read_magic(fh)
            read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, _fortran, dtype = read_header(fh)
            if dtype.hasobject:
                raise ValueError("holds Python objects (never unpickled)")
            declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if declared > size:
                raise ValueError(f"declares {declared} bytes but stores {size}")
        with z.open(name) as fh:
            return fmt.read_array(fh, allow_pickle=False)
    except ValueError as exc:
        raise ValueError(f"{path}: member {name!r} {exc}") from None


def _field(path, name, value, kind, *, optional=False):
    """``value`` of metadata field ``name`` if it is a ``kind`` (a list of
    str for ``"strings"``), else one error naming the trace and the field."""
    if value is None and optional:
        return value
    ok = (all(isinstance(x, str) for x in value) if isinstance(value, list) else False) \
        if kind == "strings" else isinstance(value, kind) and not isinstance(value, bool)
    if not ok:
        want = "a list of strings" if kind == "strings" else f"a {getattr(kind, '__name__', kind)}"
        raise ValueError(f"{path}: metadata field {name!r} must be {want}, not "
                         f"{json.dumps(value)[:60]}")
    return value


def _checked_meta(meta: dict, path) -> dict:
    from .limits import MAX_TASKS

    n = _field(path, "nranks", meta.get("nranks"), int)
    if not 0 <= n <= MAX_TASKS:
        raise ValueError(f"{path}: metadata field 'nranks' must be 0..{MAX_TASKS}, not {n}")
    _field(path, "phases", meta.get("phases"), "strings")
    _field(path, "hosts", meta.get("hosts"), "strings")
    _field(path, "statuses", meta.get("statuses"), "strings", optional=True)
    _field(path, "argv", meta.get("argv"), "strings", optional=True)
    for name in ("program", "collectives", "network"):
        _field(path, name, meta.get(name), str, optional=True)
    _field(path, "mpi", meta.get("mpi"), dict, optional=True)
    xml = _field(path, "host_topology_xml", meta.get("host_topology_xml"), dict, optional=True)
    for h, x in (xml or {}).items():
        if x is not None and not isinstance(x, str):
            raise ValueError(f"{path}: metadata field 'host_topology_xml' of host {h!r} must be "
                             "XML text or null")
    return meta


def _array(path, a, name, length=None, *, integer=True, low=None, high=None) -> np.ndarray:
    """Member ``name``: 1-D, of ``length``, integer (or finite) values in low..high."""
    v = a[name]
    if v.ndim != 1 or (length is not None and v.size != length):
        raise ValueError(f"{path}: member {name!r} must hold {length} values, not shape {v.shape}")
    if integer and v.size and v.dtype.kind not in "iu":
        raise ValueError(f"{path}: member {name!r} must hold integers, not {v.dtype}")
    if not integer and v.size and (v.dtype.kind not in "iuf" or not np.all(np.isfinite(v))):
        raise ValueError(f"{path}: member {name!r} must hold finite numbers")
    if v.size and ((low is not None and v.min() < low) or (high is not None and v.max() > high)):
        raise ValueError(f"{path}: member {name!r} holds values outside {low}..{high}")
    return v


def _build(meta: dict, a: dict, source: str) -> Trace:
    n = meta["nranks"]
    hosts_list, statuses = meta["hosts"], meta.get("statuses") or list(STATUSES)
    ranks = _array(source, a, "ranks", low=0, high=n - 1).astype(np.int64)
    if np.unique(ranks).size != ranks.size:
        raise ValueError(f"{source}: member 'ranks' names a rank twice")
    r_count = ranks.size
    host = _array(source, a, "rank_host", r_count, low=-1, high=len(hosts_list) - 1)
    status = _array(source, a, "rank_status", r_count, low=0, high=len(statuses) - 1)
    t0 = _array(source, a, "rank_t_start", r_count, integer=False)
    t1 = _array(source, a, "rank_t_end", r_count, integer=False)
    cpus = _array(source, a, "binding_cpus", low=0)
    ptr = _array(source, a, "binding_ptr", r_count + 1, low=0, high=cpus.size)
    if ptr.size and (ptr[0] != 0 or ptr[-1] != cpus.size or np.any(np.diff(ptr) < 0)):
        raise ValueError(f"{source}: member 'binding_ptr' is not an index into 'binding_cpus'")
    gpus = _gpu_records(source, a, r_count)
    info = {}
    for i, r in enumerate(ranks.tolist()):
        h = int(host[i])
        info[r] = RankInfo(hosts_list[h] if h >= 0 else None, cpus[ptr[i]:ptr[i + 1]].tolist(),
                           statuses[int(status[i])], float(t0[i]), float(t1[i]), gpus[i])
    edges = {}
    for kind in KINDS:
        count = a[f"{kind}_src"].size
        e = {"src": _array(source, a, f"{kind}_src", count, low=0, high=n - 1).astype(np.int64),
             "dst": _array(source, a, f"{kind}_dst", count, low=-1, high=n - 1).astype(np.int64),
             "phase": _array(source, a, f"{kind}_phase", count, low=0,
                             high=len(meta["phases"]) - 1).astype(np.int32),
             "bytes": _array(source, a, f"{kind}_bytes", count, integer=False,
                             low=0).astype(np.float64),
             "msgs": _array(source, a, f"{kind}_msgs", count, low=0).astype(np.int64)}
        edges[kind] = e
    xml = dict(meta.get("host_topology_xml") or {})
    keep = {k: v for k, v in meta.items() if k not in ("hosts", "host_topology_xml", "phases", "statuses")}
    events = _events(source, a, n, ranks) if any(k.startswith("events_") for k in a) else None
    return Trace(n, edges, list(meta["phases"]), info, xml, keep, source, events)


def _gpu_records(source, a: dict, count: int) -> list:
    """Each covered rank's GPU record text (None where empty or absent)."""
    if "gpu_ptr" not in a:
        return [None] * count
    text = _array(source, a, "gpu_json", low=0, high=255)
    ptr = _array(source, a, "gpu_ptr", count + 1, low=0, high=text.size)
    if ptr.size and (ptr[0] != 0 or ptr[-1] != text.size or np.any(np.diff(ptr) < 0)):
        raise ValueError(f"{source}: member 'gpu_ptr' is not an index into 'gpu_json'")
    raw = text.astype(np.uint8).tobytes()
    try:
        return [raw[ptr[i]:ptr[i + 1]].decode() or None for i in range(count)]
    except UnicodeDecodeError:
        raise ValueError(f"{source}: member 'gpu_json' is not UTF-8 text") from None


def _events(source, a: dict, n: int, ranks: np.ndarray) -> EventLog:
    """The event log members, checked so that the replay can follow every
    index: the rank pointer, peers per kind, waits on an earlier post of the
    same rank, communicators, and no events for ranks the file lacks."""
    for f in _EVENT_FIELDS:
        if f"events_{f}" not in a:
            raise ValueError(f"{source}: trace lacks member 'events_{f}' (its event log is incomplete)")
    ptr = _array(source, a, "events_ptr", n + 1, low=0)
    op = _array(source, a, "events_op", low=EVENT_SEND, high=EVENT_CSEND)
    count = op.size
    peer = _array(source, a, "events_peer", count, low=-1).astype(np.int64)
    nbytes = _array(source, a, "events_nbytes", count, low=0).astype(np.int64)
    runs = _array(source, a, "events_comm_runs").astype(np.int64)
    if runs.size % 3:
        raise ValueError(f"{source}: member 'events_comm_runs' is not a list of (start, step, count)")
    start, step, length = runs.reshape(-1, 3).T
    last = start + step * (length - 1)
    if np.any(length < 1) or np.any(np.minimum(start, last) < 0) or np.any(np.maximum(start, last) > n - 1):
        raise ValueError(f"{source}: member 'events_comm_runs' names ranks outside 0..{n - 1}")
    comm_ptr = _array(source, a, "events_comm_ptr", low=0, high=runs.size // 3).astype(np.int64)
    trunc = a["events_truncated"]
    flags = trunc.dtype.kind in "biu" and (trunc.size == 0 or 0 <= trunc.min() <= trunc.max() <= 1)
    if trunc.ndim != 1 or trunc.size != n or not flags:
        raise ValueError(f"{source}: member 'events_truncated' must hold {n} flags")
    if ptr[0] != 0 or ptr[-1] != count or np.any(np.diff(ptr) < 0):
        raise ValueError(f"{source}: member 'events_ptr' is not an index into the events")
    if comm_ptr.size < 1 or comm_ptr[0] != 0 or comm_ptr[-1] != runs.size // 3 or np.any(np.diff(comm_ptr) < 0):
        raise ValueError(f"{source}: member 'events_comm_ptr' is not an index into 'events_comm_runs'")
    covered = np.zeros(n, dtype=bool)
    covered[ranks] = True
    if np.any((np.diff(ptr) > 0) & ~covered) or np.any(trunc.astype(bool) & ~covered):
        raise ValueError(f"{source}: member 'events_ptr' holds events of a rank the trace does not cover")
    op = op.astype(np.int8)
    rank_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    local = np.arange(count, dtype=np.int64) - ptr[rank_of]
    wait = op == EVENT_WAIT
    high = np.select([wait, op == EVENT_COLL], [local - 1, comm_ptr.size - 2], n - 1)
    low = np.where(op == EVENT_RECV, -1, 0)
    bad = np.flatnonzero((peer < low) | (peer > high))
    if bad.size == 0 and wait.any():  # a wait names a send or receive
        posted = op[ptr[rank_of[wait]] + peer[wait]]
        bad = np.flatnonzero(wait)[(posted != EVENT_SEND) & (posted != EVENT_RECV)]
    if bad.size:
        e = int(bad[0])
        raise ValueError(f"{source}: event {int(local[e])} of rank {int(rank_of[e])} (op {int(op[e])}) "
                         f"names {int(peer[e])}, out of its range")
    return EventLog(ptr.astype(np.int64), op, peer, nbytes, comm_ptr, runs, trunc.astype(bool))


# --------------------------------------------------------------------- merging
def merge_traces(traces: list[Trace]) -> Trace:
    """Join traces that cover disjoint ranks of the same run (rank parts)."""
    if not traces:
        raise ValueError("nothing to merge")
    n = traces[0].nranks
    for t in traces:
        if t.nranks != n:
            raise ValueError(f"{t.source}: {t.nranks} ranks, but {traces[0].source} has {n}: "
                             f"not parts of the same run")
    info: dict = {}
    for t in traces:
        dup = info.keys() & t.info.keys()
        if dup:
            raise ValueError(f"{t.source}: rank {min(dup)} is recorded twice")
        info.update(t.info)
    phases: list = []
    for t in traces:
        phases.extend(p for p in t.phases if p not in phases)
    edges = {}
    for kind in KINDS:
        cols = {f: [] for f in _FIELDS}
        for t in traces:
            remap = np.array([phases.index(p) for p in t.phases], dtype=np.int32)
            for f in _FIELDS:
                v = t.edges[kind][f]
                cols[f].append(remap[v] if f == "phase" and v.size else v)
        edges[kind] = {f: np.concatenate(v) for f, v in cols.items()}
    xml: dict = {}
    for t in traces:
        for h, x in t.host_topology_xml.items():
            if x is not None or h not in xml:
                xml[h] = x
    events = _merge_events(traces, n)
    return Trace(n, edges, phases, info, xml, dict(traces[0].meta), traces[0].source, events)


def _merge_events(traces: list[Trace], n: int) -> EventLog | None:
    """Each rank's events from the trace that covers it, in rank order; the
    communicators merged by content (the same world ranks in the same order,
    hence the same runs, are one index).  None unless every trace has its log: a log with ranks
    missing only because their profiler logged nothing would mislead."""
    if any(t.events is None for t in traces):
        return None
    index: dict = {}
    runs, rank_of, ops, peers, nbytes = [], [], [], [], []
    truncated = np.zeros(n, dtype=bool)
    for t in traces:
        e = t.events
        remap = np.empty(e.ncomms, dtype=np.int64)
        for c in range(e.ncomms):
            r = np.asarray(e.runs(c), dtype=np.int64).ravel()
            key = r.tobytes()
            if key not in index:
                index[key] = len(runs)
                runs.append(r)
            remap[c] = index[key]
        peer = np.asarray(e.peer, dtype=np.int64).copy()
        coll = np.asarray(e.op) == EVENT_COLL
        peer[coll] = remap[peer[coll]]
        rank_of.append(np.repeat(np.arange(n, dtype=np.int64), np.diff(e.ptr)))
        ops.append(np.asarray(e.op, dtype=np.int8))
        peers.append(peer)
        nbytes.append(np.asarray(e.nbytes, dtype=np.int64))
        truncated |= np.asarray(e.truncated, dtype=bool)
    rank = np.concatenate(rank_of)
    order = np.argsort(rank, kind="stable")  # ranks come from one trace each, in program order
    ptr = np.concatenate([[0], np.cumsum(np.bincount(rank, minlength=n))]).astype(np.int64)
    comm_ptr = np.concatenate([[0], np.cumsum([r.size // 3 for r in runs], dtype=np.int64)]).astype(np.int64)
    return EventLog(ptr, np.concatenate(ops)[order], np.concatenate(peers)[order],
                    np.concatenate(nbytes)[order], comm_ptr,
                    np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64), truncated)


def part_path(output, rank: int) -> Path:
    """Where rank ``rank`` of a run writing ``output`` keeps its part file."""
    output = Path(output)
    return output.with_name(output.name + PARTS_SUFFIX) / f"rank{rank:06d}{SUFFIX}"
