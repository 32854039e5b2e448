"""An emulated multi-node cluster on one Linux machine, for real MPI runs.

Each node is a network namespace with its own host name; nodes hang off a
bridge (one switch) or off rack bridges joined to a top bridge (two levels).
Every link is rate limited in both directions with ``tc ... tbf``, so bytes
between nodes cost real time while bytes within a node do not.  MPICH's hydra
launches across the nodes through a generated "ssh" launcher script that
starts each proxy inside its node's namespace, and ranks talk over the
libfabric tcp provider (``MPICH_CH4_NETMOD=ofi FI_PROVIDER=tcp``): the default
UCX netmod would find the other namespaces' ranks through shared memory and
bypass the emulated network.  Open MPI's ``mpirun`` starts its daemons
through the same script (``plm_rsh_agent``), its ranks talking TCP over the
cluster's subnet (``mpirun``); ``launch`` runs a whole launch line, as
``rankmap map`` prints it, with either launcher.

Every object this module creates carries the cluster's unique name as a prefix
(``rmx<pid><n>``), so clusters of parallel processes never collide, and
tear-down removes exactly those objects.  Needs root and ``ip``, ``tc``,
``unshare``, ``hostname`` (iproute2, util-linux, hostname packages).
"""

from __future__ import annotations

import atexit
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..profile.parts import NETWORK_VARIABLE
from ..topology import Topology
from ..topology.bandwidth import format_latency, parse_latency, parse_rate
from ..topology.hosts import expand_nodelist
from ..topology.tree import TreeNode, format_distance, format_hierarchy

STATE_ROOT = Path(os.environ.get("RANKMAP_CLUSTER_DIR", "/run/rankmap-clusters"))
REQUIRED_TOOLS = {"ip": "iproute2", "tc": "iproute2", "unshare": "util-linux",
                  "hostname": "hostname"}
# The environment that makes MPICH ranks on different nodes use the network.
NETWORK_ENV = {"MPICH_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}
SUBNET_BASE = ipaddress.ip_network("10.213.0.0/16")
HOST_PREFIX = "node"
#: one-way latency of a small MPI message between two nodes, measured with
#: benchmarks/cluster/pingpong.py (MPICH over libfabric tcp through veth and
#: tbf; docs/message-costs.md): what the cluster files say
EMULATED_LATENCY = "40us"
_NAME_RE = re.compile(r"^rmx[0-9a-z]{1,7}$")
_HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$")


class ClusterError(RuntimeError):
    """Setting up, using or tearing down an emulated cluster failed."""


class ClusterUnavailable(ClusterError):
    """This machine cannot host an emulated cluster (not root, tools or kernel
    features missing); the message says what is missing."""


@dataclass(frozen=True)
class ClusterSpec:
    """Shape of an emulated cluster.  ``slots`` is the number of ranks each
    node advertises to the launcher; ``racks > 1`` puts ``nodes / racks``
    nodes under each rack bridge, with uplinks of ``rack_bandwidth``."""

    nodes: int
    slots: int = 2
    bandwidth: str = "200mbit"
    racks: int = 1
    rack_bandwidth: str | None = None
    names: str = ""  # the nodes' host names as a Slurm hostlist (cn[01-04]); default node0...
    latency: str = EMULATED_LATENCY  # a message between nodes (the rates do not change it)

    def __post_init__(self):
        if self.nodes < 1 or self.nodes > 250:
            raise ValueError(f"nodes must be between 1 and 250, got {self.nodes}")
        if self.slots < 1:
            raise ValueError(f"slots must be >= 1, got {self.slots}")
        if self.racks < 1 or self.nodes % self.racks:
            raise ValueError(f"racks ({self.racks}) must divide nodes ({self.nodes})")
        parse_rate(self.bandwidth)
        if self.rack_bandwidth is not None:
            parse_rate(self.rack_bandwidth)
        parse_latency(self.latency)
        if self.names:
            hosts = expand_nodelist(self.names, limit=self.nodes)
            if len(hosts) != self.nodes or len(set(hosts)) != len(hosts):
                raise ValueError(f"names {self.names!r}: need {self.nodes} distinct host names")
            bad = [h for h in hosts if not _HOST_RE.match(h)]
            if bad:
                raise ValueError(f"host name {bad[0]!r}: letters, digits, '-' and '.' only")

    @property
    def hosts(self) -> list[str]:
        if self.names:
            return expand_nodelist(self.names)
        return [f"{HOST_PREFIX}{i}" for i in range(self.nodes)]

    def hierarchy(self, distances=None) -> tuple[list[int], list[float]]:
        """``(arities, distances)``, innermost level first: ``[slots, nodes]``
        with (1, 100), or ``[slots, nodes_per_rack, racks]`` with (1, 100, 1000)."""
        levels = 3 if self.racks > 1 else 2
        d = [float(x) for x in (distances or [1, 100, 1000][:levels])]
        if len(d) != levels:
            raise ValueError(f"{levels} distances needed (node, network"
                             f"{', racks' if levels == 3 else ''}), got {len(d)}")
        arities = [self.slots, self.nodes // self.racks] + ([self.racks] if levels == 3 else [])
        return arities, d

    def topology_file_text(self, distances=None) -> str:
        """The cluster as a rankmap cluster file (``rankmap map --topology``):
        nodes of ``slots`` PEs at distance 1 with the emulated host names,
        under one switch at distance 100 (with racks: rack switches at 100
        under a top switch at 1000), each link's rate as ``bandwidths``, the
        measured latency of a message between nodes as ``latencies``."""
        arities, dists = self.hierarchy(distances)
        node = format_hierarchy(arities[:1], dists[:1])
        nodes = self.names or f"{HOST_PREFIX}[0-{self.nodes - 1}]"
        return (f"cluster\nhierarchy {node[0]} distances {node[1]}\nnodes {nodes}\n"
                f"{self.network_line(distances)}\n")

    def network_line(self, distances=None) -> str:
        """The cluster file's line for the network above the nodes: the
        switches' distances, each link's rate, the latency between nodes
        (also what every rank's ``RANKMAP_NETWORK`` says, so a trace
        recorded here knows its links)."""
        arities, dists = self.hierarchy(distances)
        rates = [self.bandwidth] + ([self.rack_bandwidth or self.bandwidth] if self.racks > 1 else [])
        network = ":".join(format_distance(d) for d in dists[1:])
        latencies = ":".join([format_latency(parse_latency(self.latency))] * len(rates))
        return f"network {arities[1]} distances {network} bandwidths {':'.join(rates)} latencies {latencies}"

    def topology(self, distances=None) -> Topology:
        """The rankmap topology of the cluster's slots, innermost level first:
        ``slots:nodes`` with distances (1, 100), or ``slots:nodes_per_rack:racks``
        with (1, 100, 1000); node subtrees carry the nodes' host names, links
        their rates, the switches the latency between nodes."""
        per_rack = self.nodes // self.racks
        _, d = self.hierarchy(distances)
        latency = parse_latency(self.latency)

        def node(i: int) -> TreeNode:
            return TreeNode("node", d[0], [TreeNode("pe") for _ in range(self.slots)],
                            name=self.hosts[i], uplink=parse_rate(self.bandwidth) / 8)

        if self.racks == 1:
            return Topology(TreeNode("switch", d[1], [node(i) for i in range(self.nodes)], latency=latency))
        uplink = parse_rate(self.rack_bandwidth or self.bandwidth) / 8
        racks = [TreeNode("rack", d[1], [node(j * per_rack + i) for i in range(per_rack)], uplink=uplink,
                          latency=latency) for j in range(self.racks)]
        return Topology(TreeNode("switch", d[2], racks, latency=latency))


def _b36(x: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        x, r = divmod(x, 36)
        out = digits[r] + out
        if x == 0:
            return out


def check_environment() -> None:
    """Raise ClusterUnavailable naming what is missing to build clusters here."""
    if os.geteuid() != 0:
        raise ClusterUnavailable("emulated clusters need root (network namespaces, tc); "
                                 "run as root or in a privileged container")
    missing = [f"{tool} (package {pkg})" for tool, pkg in REQUIRED_TOOLS.items()
               if shutil.which(tool) is None]
    if missing:
        raise ClusterUnavailable("missing tools for emulated clusters: " + ", ".join(missing))


def _run(cmd: list[str], *, unavailable_if: str | None = None) -> str:
    """Run one set-up command; a failure names the command and its message.
    ``unavailable_if``: a failure here means the kernel/container lacks a feature."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        msg = f"{' '.join(cmd)}: {proc.stderr.strip() or f'exit {proc.returncode}'}"
        if unavailable_if:
            raise ClusterUnavailable(f"{unavailable_if} ({msg})")
        raise ClusterError(msg)
    return proc.stdout


def _quiet(cmd: list[str]) -> None:
    """Tear-down step: best effort, the object may already be gone."""
    subprocess.run(cmd, capture_output=True)


def _netns_list() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _link_list() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()
            if line.count(":") >= 2]


class EmulatedCluster:
    """``with EmulatedCluster(ClusterSpec(nodes=4, slots=2)) as c:`` builds the
    cluster and always removes it again (also on errors, SIGTERM/SIGHUP and
    interpreter exit).  ``c.mpiexec(...)`` gives the launch command prefix."""

    _counter = 0
    _lock = threading.Lock()

    def __init__(self, spec: ClusterSpec, name: str | None = None):
        self.spec = spec
        self.name = name or self._new_name()
        if not _NAME_RE.match(self.name):
            raise ValueError(f"cluster name {self.name!r}: expected rmx + up to 7 of [0-9a-z]")
        self.state_dir = STATE_ROOT / self.name
        self.subnet: ipaddress.IPv4Network | None = None
        self.is_up = False
        self.persist = False
        self._saved_handlers: dict = {}

    # ---- names -----------------------------------------------------------
    @classmethod
    def _new_name(cls) -> str:
        existing = set(_netns_list()) | set(_link_list()) if shutil.which("ip") else set()
        while True:
            with cls._lock:
                cls._counter += 1
                name = f"rmx{_b36(os.getpid())}{_b36(cls._counter % 36)}"
            if not any(e.startswith(name) for e in existing) and not (STATE_ROOT / name).exists():
                return name

    @property
    def hosts(self) -> list[str]:
        return self.spec.hosts

    @property
    def bridge(self) -> str:
        """The top bridge; it holds the root namespace's address (for hydra's -iface)."""
        return f"{self.name}s"

    @property
    def launcher(self) -> Path:
        return self.state_dir / "launcher.sh"

    def namespace(self, node: int) -> str:
        return f"{self.name}-n{node}"

    def address(self, node: int) -> str:
        return str(self.subnet[node + 1])

    def _rack_bridge(self, rack: int) -> str:
        return f"{self.name}r{rack}"

    # ---- set-up ----------------------------------------------------------
    def _pick_subnet(self) -> ipaddress.IPv4Network:
        """A /24 of 10.213.0.0/16 that no route of this machine overlaps."""
        routes = json.loads(_run(["ip", "-j", "-4", "route", "show", "table", "all"]) or "[]")
        used = []
        for r in routes:
            dst = r.get("dst", "")
            if dst and dst != "default":
                try:
                    used.append(ipaddress.ip_network(dst, strict=False))
                except ValueError:
                    continue
        subnets = list(SUBNET_BASE.subnets(new_prefix=24))
        start = (os.getpid() * 7 + EmulatedCluster._counter) % len(subnets)
        for k in range(len(subnets)):
            net = subnets[(start + k) % len(subnets)]
            if not any(net.overlaps(u) for u in used):
                return net
        raise ClusterError(f"no free /24 left in {SUBNET_BASE} for an emulated cluster")

    def _tbf(self, dev: str, rate_bits: int, netns: str | None = None) -> None:
        burst = max(32 * 1024, rate_bits // 8 // 500)  # >= one timer tick of traffic
        cmd = ["tc"] + (["-n", netns] if netns else []) + [
            "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{rate_bits}bit",
            "burst", str(burst), "latency", "50ms"]
        _run(cmd, unavailable_if="the kernel has no tbf qdisc (module sch_tbf)")

    def _veth(self, a: str, b: str) -> None:
        _run(["ip", "link", "add", a, "type", "veth", "peer", "name", b],
             unavailable_if="veth links cannot be created here")

    def up(self, persist: bool = False) -> "EmulatedCluster":
        """Build the cluster.  ``persist=True`` (the CLI's ``up``) leaves it
        standing when this process exits; otherwise it goes at exit."""
        check_environment()
        if self.is_up:
            return self
        self.state_dir.mkdir(parents=True, exist_ok=False)
        self.is_up, self.persist = True, persist  # from here on, down() has something to remove
        if not persist:
            atexit.register(self.down)
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        return self

    def _build(self) -> None:
        spec = self.spec
        rate = parse_rate(spec.bandwidth)
        self.subnet = self._pick_subnet()
        self._write_state()
        _run(["ip", "link", "add", self.bridge, "type", "bridge"],
             unavailable_if="bridges cannot be created here")
        _run(["ip", "addr", "add", f"{self.subnet[254]}/24", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        per_rack = spec.nodes // spec.racks
        if spec.racks > 1:
            uplink = parse_rate(spec.rack_bandwidth or spec.bandwidth)
            for j in range(spec.racks):
                rb = self._rack_bridge(j)
                _run(["ip", "link", "add", rb, "type", "bridge"])
                _run(["ip", "link", "set", rb, "up"])
                top, low = f"{self.name}u{j}", f"{self.name}v{j}"
                self._veth(top, low)
                _run(["ip", "link", "set", top, "master", self.bridge])
                _run(["ip", "link", "set", low, "master", rb])
                for dev in (top, low):
                    _run(["ip", "link", "set", dev, "up"])
                    self._tbf(dev, uplink)
        for i in range(spec.nodes):
            ns, outer, inner = self.namespace(i), f"{self.name}h{i}", f"{self.name}p{i}"
            _run(["ip", "netns", "add", ns], unavailable_if="network namespaces cannot be created here")
            self._veth(outer, inner)
            _run(["ip", "link", "set", inner, "netns", ns])
            _run(["ip", "-n", ns, "link", "set", inner, "name", "eth0"])
            _run(["ip", "-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            master = self._rack_bridge(i // per_rack) if spec.racks > 1 else self.bridge
            _run(["ip", "link", "set", outer, "master", master])
            _run(["ip", "link", "set", outer, "up"])
            self._tbf("eth0", rate, netns=ns)   # node -> network
            self._tbf(outer, rate)              # network -> node
        self._write_launcher()

    def _write_state(self) -> None:
        state = {"name": self.name, "spec": asdict(self.spec), "subnet": str(self.subnet),
                 "owner_pid": os.getpid(), "persist": self.persist, "bridge": self.bridge}
        (self.state_dir / "state.json").write_text(json.dumps(state, indent=1) + "\n")

    def _write_launcher(self) -> None:
        ip, unshare = shutil.which("ip"), shutil.which("unshare")
        cases = "\n".join(f"  {h}|{self.address(i)}) ns={self.namespace(i)}; host={h} ;;"
                          for i, h in enumerate(self.hosts))
        script = f"""#!/bin/sh
# hydra "ssh" launcher of emulated cluster {self.name}: hydra calls
#   SCRIPT -x HOST "PROXY COMMAND..."
# and this runs the proxy inside HOST's network namespace, under HOST's name.
[ "$1" = "-x" ] && shift
case "$1" in
{cases}
  *) echo "emulated cluster {self.name}: unknown host '$1' (hosts: {' '.join(self.hosts)})" >&2; exit 255 ;;
esac
shift
exec {ip} netns exec "$ns" {unshare} --uts sh -c 'hostname "$1" && shift && exec sh -c "$*"' launcher "$host" "$@"
"""
        self.launcher.write_text(script)
        self.launcher.chmod(0o755)

    # ---- use -------------------------------------------------------------
    def mpiexec(self, n: int | None = None, *, order: str = "block", ppn: int | None = None,
                machinefile: str | os.PathLike | None = None, mpiexec: str | None = None,
                env: dict | None = None) -> list[str]:
        """The ``mpiexec`` command prefix (append the program) for a run on
        this cluster.  ``order``: ``block`` (ppn consecutive ranks per node) or
        ``round-robin`` (rank r on node r mod N); ``machinefile``: a hydra
        machinefile (``host:count`` lines, e.g. from ``rankmap map --as hydra``,
        with the ``-rankmap`` written beside it) that replaces ``order``."""
        cmd = [mpiexec or default_mpiexec()] + self._hydra_options(env)
        if machinefile is not None:
            cmd += ["-f", str(machinefile)] + hydra_rankmap_option(machinefile)
        else:
            ppn = ppn or self.spec.slots
            if order == "block":
                hosts = ",".join(f"{h}:{ppn}" for h in self.hosts)
            elif order == "round-robin":
                hosts = ",".join(f"{h}:1" for h in self.hosts)
            else:
                raise ValueError(f"order {order!r}: expected 'block' or 'round-robin'")
            cmd += ["-hosts", hosts]
            n = n if n is not None else ppn * self.spec.nodes
        if n is not None:
            cmd += ["-n", str(n)]
        return cmd

    def _hydra_options(self, env: dict | None = None) -> list[str]:
        """hydra's options that reach the nodes: the launcher script, the
        bridge's address, the network netmod (and ``env`` for every rank)."""
        cmd = ["-launcher", "ssh", "-launcher-exec", str(self.launcher), "-iface", self.bridge]
        for key, value in {**self.rank_env(), **(env or {})}.items():
            cmd += ["-genv", key, str(value)]
        return cmd

    def rank_env(self) -> dict:
        """What every rank's environment holds on this cluster: MPICH's
        network module, and the cluster's links for the profiler
        (``RANKMAP_NETWORK``)."""
        return {**NETWORK_ENV, NETWORK_VARIABLE: self.spec.network_line()}

    def mpirun(self, mpirun: str = "mpirun") -> tuple[list[str], dict]:
        """Open MPI's ``mpirun`` command prefix and environment for a run on
        this cluster (append the placement, e.g. ``--rankfile``, and the
        program): its daemons start in the nodes' namespaces through the
        same launcher (``plm_rsh_agent``), daemons and ranks talk over the
        cluster's subnet, root is allowed (the namespaces need it), and a
        node takes more ranks than this machine has cores (every node's
        cores are this machine's)."""
        subnet = str(self.subnet)
        cmd = [mpirun, "--mca", "plm_rsh_agent", str(self.launcher), "--mca", "routed", "direct",
               "--mca", "oob_tcp_if_include", subnet, "--mca", "btl_tcp_if_include", subnet,
               "--oversubscribe"]
        return cmd, {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                     NETWORK_VARIABLE: self.spec.network_line()}

    def mpirun_order(self, mpirun: str, n: int | None = None, *, order: str = "block",
                     ppn: int | None = None, rankfile=None) -> tuple[list[str], dict]:
        """Open MPI's ``mpirun`` command prefix for the orders ``mpiexec``
        makes (block: ``ppn`` consecutive ranks per node; round-robin) or a
        rankfile, and its environment."""
        cmd, env = self.mpirun(mpirun)
        ppn = ppn or self.spec.slots
        if rankfile is not None:
            cmd += ["--rankfile", str(rankfile)]
        else:
            if order not in ("block", "round-robin"):
                raise ValueError(f"order {order!r}: expected 'block' or 'round-robin'")
            cmd += ["--host", ",".join(f"{h}:{ppn}" for h in self.hosts),
                    "--map-by", "slot" if order == "block" else "node"]
            n = n if n is not None else ppn * self.spec.nodes
        if n is not None:
            cmd += ["-n", str(n)]
        return cmd, env

    def launch(self, line, mpi: str | None = None, env: dict | None = None) -> tuple[list[str], dict]:
        """A launch line (``mpiexec ... PROGRAM``, as ``rankmap map`` prints
        it) run on this cluster: its launcher (``mpi``'s, else the one the
        line's options or first word name; see ``launchers``) with the
        emulation's options after it, and the environment to run it in
        (``env`` for every rank included)."""
        from .launchers import find_launcher, launcher_mpi, line_mpi

        line = [str(w) for w in line]
        first = shutil.which(line[0]) or line[0]
        mpi = mpi or line_mpi(line) or launcher_mpi(first) or "mpich"
        exe = find_launcher(mpi, line[0])
        if exe is None:
            raise ClusterError(f"no {MPI_NAMES[mpi]} launcher for {line[0]!r} beside this Python or on PATH "
                               f"({MPI_INSTALL[mpi]})")
        if mpi == "openmpi":
            prefix, ompi_env = self.mpirun(exe)
            return prefix + line[1:], {**ompi_env, **(env or {})}
        return [exe] + self._hydra_options(env) + line[1:], {}

    def traffic(self) -> dict:
        """Byte counters of the rate limiters now: ``node_tx[i]`` (node i ->
        network), ``node_rx[i]`` (network -> node i), ``rack_tx[j]`` (rack j
        uplink, outbound).  Differences of two snapshots give a run's traffic."""
        node_tx = [_qdisc_bytes("eth0", self.namespace(i)) for i in range(self.spec.nodes)]
        node_rx = [_qdisc_bytes(f"{self.name}h{i}") for i in range(self.spec.nodes)]
        rack_tx = [_qdisc_bytes(f"{self.name}v{j}") for j in range(self.spec.racks)] \
            if self.spec.racks > 1 else []
        return {"node_tx": node_tx, "node_rx": node_rx, "rack_tx": rack_tx}

    def topology(self, distances=None) -> Topology:
        return self.spec.topology(distances)

    # ---- tear-down -------------------------------------------------------
    def down(self) -> None:
        """Remove everything this cluster made; safe to call twice."""
        if not self.is_up:
            return
        teardown(self.name)
        self.is_up = False
        atexit.unregister(self.down)

    def __enter__(self) -> "EmulatedCluster":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                self._saved_handlers[sig] = signal.signal(sig, _raise_exit)
        try:
            return self.up()
        except BaseException:
            self._restore_handlers()
            raise

    def __exit__(self, *exc) -> None:
        try:
            self.down()
        finally:
            self._restore_handlers()

    def _restore_handlers(self) -> None:
        for sig, handler in self._saved_handlers.items():
            signal.signal(sig, handler)
        self._saved_handlers.clear()

    def __repr__(self) -> str:
        state = "up" if self.is_up else "down"
        return f"EmulatedCluster({self.name}, {self.spec}, {state})"


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


def _qdisc_bytes(dev: str, netns: str | None = None) -> int:
    cmd = ["tc"] + (["-n", netns] if netns else []) + ["-s", "-j", "qdisc", "show", "dev", dev]
    for q in json.loads(_run(cmd) or "[]"):
        if q.get("kind") == "tbf":
            return int(q["bytes"])
    raise ClusterError(f"no tbf rate limiter on {dev}" + (f" in {netns}" if netns else ""))


def hydra_rankmap_option(machinefile) -> list[str]:
    """``["-rankmap", ...]`` where rankmap wrote hydra's ``-rankmap`` beside
    ``machinefile`` (its first line says so), else nothing."""
    from ..formats.launch import hydra_rankmap_of

    rankmap = hydra_rankmap_of(machinefile)
    if rankmap is None:
        return []
    try:
        with open(rankmap, encoding="utf-8") as fh:
            return ["-rankmap", fh.read().strip()]
    except OSError as exc:
        raise ClusterError(f"{rankmap}: {exc.strerror or exc}") from None


MPI_NAMES = {"mpich": "MPICH (hydra)", "openmpi": "Open MPI"}
MPI_INSTALL = {"mpich": "pip install mpich", "openmpi": "apt-get install openmpi-bin, or the site's module"}


def default_mpiexec() -> str:
    """The hydra ``mpiexec`` next to this Python (the ``mpich`` wheel) or on PATH."""
    local = Path(sys.executable).parent / "mpiexec"
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if not found:
        raise ClusterError("no mpiexec: install MPICH (pip install mpich)")
    return found


def teardown(name: str) -> int:
    """Remove cluster ``name``: stop the processes inside its namespaces,
    delete its links, bridges and namespaces (exactly those with its prefix).
    Returns how many namespaces and links it found."""
    if not _NAME_RE.match(name):
        raise ValueError(f"not an emulated cluster name: {name!r}")
    # exact patterns: cluster "rmxab1" must not match cluster "rmxab1h"'s objects
    own_ns = re.compile(rf"^{name}-n\d+$")
    own_link = re.compile(rf"^{name}(?:[hpuvr]\d+|s)$")
    namespaces = [ns for ns in _netns_list() if own_ns.match(ns)]
    links = [link for link in _link_list() if own_link.match(link)]
    _stop_processes(namespaces)
    for link in links:
        if link != f"{name}s":
            _quiet(["ip", "link", "del", link])
    for ns in namespaces:
        _quiet(["ip", "netns", "del", ns])
    _quiet(["ip", "link", "del", f"{name}s"])
    state_dir = STATE_ROOT / name
    if state_dir.exists():
        shutil.rmtree(state_dir, ignore_errors=True)
    return len(namespaces) + len(links)


def _stop_processes(namespaces: list[str], grace: float = 2.0) -> None:
    """TERM, then KILL, the processes left in our namespaces (stray proxies/ranks)."""
    def pids() -> list[int]:
        out = []
        for ns in namespaces:
            res = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            out += [int(p) for p in res.stdout.split() if p.isdigit()]
        return out

    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = pids()
        if not live:
            return
        for pid in live:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and pids():
            time.sleep(0.05)


def list_clusters() -> list[dict]:
    """Clusters recorded under the state directory, with their owner's liveness."""
    out = []
    if not STATE_ROOT.is_dir():
        return out
    for state_file in sorted(STATE_ROOT.glob("*/state.json")):
        try:
            state = json.loads(state_file.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        try:
            os.kill(int(state["owner_pid"]), 0)
            state["owner_alive"] = True
        except (ProcessLookupError, KeyError, ValueError):
            state["owner_alive"] = False
        except PermissionError:
            state["owner_alive"] = True
        out.append(state)
    return out


def load_cluster(name: str) -> EmulatedCluster:
    """The cluster ``name`` that is up (e.g. made by ``rankmap cluster up``)."""
    state_file = STATE_ROOT / name / "state.json"
    if not _NAME_RE.match(name) or not state_file.exists():
        known = ", ".join(s["name"] for s in list_clusters()) or "none"
        raise ClusterError(f"no emulated cluster {name!r} (up: {known})")
    state = json.loads(state_file.read_text())
    cluster = EmulatedCluster(ClusterSpec(**state["spec"]), name=name)
    cluster.subnet = ipaddress.ip_network(state["subnet"])
    cluster.is_up = True
    return cluster
