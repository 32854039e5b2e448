"""Network levels from what a site already has: Slurm's ``topology.conf``
(tree or block plugin), Slurm's ``topology.yaml`` (tree and block
topologies), and Cray xnames (``x1000c2s7b0n1``: cabinet, chassis, slot,
board, node), in the host names themselves or in a file mapping host names
to xnames::

    SwitchName=s0 Nodes=dev[0-5]          # topology.conf, tree plugin
    SwitchName=s1 Nodes=dev[6-11]
    SwitchName=s2 Switches=s[0-1] LinkSpeed=100

    BlockName=b1 Nodes=node[01-04]        # topology.conf, block plugin
    BlockName=b2 Nodes=node[05-08]
    BlockSizes=4,8

Each switch becomes a tree node above its nodes or switches; a switch's
distance grows with its height (leaf switches ``DEFAULT_NETWORK_DISTANCE``,
x4 per level up, as for uniform network levels).  Blocks are leaf switches
that Slurm pairs with their contiguous neighbours into larger and larger
blocks, so each level of pairs is one more level.  xnames give a blade's
nodes one switch, a chassis one more hop, a cabinet (a dragonfly group) one
more, the system two more: ``XNAME_DISTANCES``, 100 per switch hop.  Only the
job's hosts are kept, and switches left without any of them are dropped;
separate fabrics (several top switches) join under one more level.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .hosts import expand_nodelist
from .levels import DEFAULT_NETWORK_DISTANCE
from .tree import TreeNode


XNAME = re.compile(r"^x(\d+)c(\d+)s(\d+)b(\d+)n(\d+)$")
#: blade (slot), chassis, cabinet, system: the most switch hops a byte crosses, x100
XNAME_DISTANCES = (100.0, 200.0, 300.0, 500.0)


@dataclass
class Switch:
    name: str
    nodes: list[str] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)
    line: int = 0
    distance: float | None = None  # None: by the switch's height
    kind: str = "switch"
    source: str = "topology.conf"  # the file it was read from, for errors


def parse_topology_conf(path) -> dict[str, Switch]:
    """Switches of a ``topology.conf`` by name (parameter names are case
    insensitive, ``#`` starts a comment); a bad line raises ValueError
    naming the file and line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read topology.conf ({exc})") from None
    return parse_topology_conf_text(text, str(path))


def parse_topology_conf_text(text: str, label: str = "<topology.conf>") -> dict[str, Switch]:
    """``parse_topology_conf`` of text; ``label`` names it in errors."""
    switches: dict[str, Switch] = {}
    blocks: list[Switch] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{label}:{lineno}"
        fields: dict[str, str] = {}
        for tok in line.split():
            key, sep, value = tok.partition("=")
            if not sep or not value:
                raise ValueError(f"{where}: expected KEY=VALUE, got {tok!r}")
            fields[key.lower()] = value
        if "blocksizes" in fields:
            _block_sizes(where, fields["blocksizes"].split(","))
            continue
        if "blockname" in fields:
            name = fields["blockname"]
            if any(b.name == name for b in blocks):
                raise ValueError(f"{where}: block {name!r} defined twice")
            blocks.append(Switch(name, _nodes(where, fields.get("nodes"), f"block {name!r}"), line=lineno))
            continue
        if "switchname" not in fields:
            raise ValueError(f"{where}: not a tree- or block-plugin line (expected SwitchName=... "
                             "Nodes=... or Switches=..., or BlockName=... Nodes=...)")
        name = fields["switchname"]
        if name in switches:
            raise ValueError(f"{where}: switch {name!r} defined twice (line {switches[name].line})")
        sw = Switch(name, line=lineno, source=label)
        try:
            if "nodes" in fields:
                sw.nodes = expand_nodelist(fields["nodes"])
            if "switches" in fields:
                sw.switches = expand_nodelist(fields["switches"])
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if not sw.nodes and not sw.switches:
            raise ValueError(f"{where}: switch {name!r} has neither Nodes= nor Switches=")
        switches[name] = sw
    if blocks and switches:
        raise ValueError(f"{label}: both SwitchName (tree) and BlockName (block) lines; a "
                         "topology.conf describes one plugin")
    if blocks:
        return block_switches(blocks)
    if not switches:
        raise ValueError(f"{label}: no SwitchName or BlockName line")
    _check_children(switches, label)
    return switches


def _nodes(where: str, text, what: str) -> list[str]:
    if not text:
        raise ValueError(f"{where}: {what} has no nodes")
    try:
        return expand_nodelist(str(text))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _block_sizes(where: str, values) -> list[int]:
    try:
        sizes = [int(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"{where}: block sizes must be whole numbers, got {values!r}") from None
    if not sizes or sizes[0] < 1 or any(b <= a for a, b in zip(sizes, sizes[1:])):
        raise ValueError(f"{where}: block sizes must grow from a base size >= 1, got {sizes}")
    return sizes


def _check_children(switches: dict[str, Switch], label: str) -> None:
    for sw in switches.values():
        for child in sw.switches:
            if child not in switches:
                raise ValueError(f"{label}:{sw.line}: switch {sw.name!r} lists unknown switch {child!r}")


def block_switches(blocks: list[Switch]) -> dict[str, Switch]:
    """Blocks as leaf switches, paired with their contiguous neighbours
    level by level (as Slurm's block plugin builds larger blocks) up to one
    top."""
    out = {b.name: b for b in blocks}
    level = [b.name for b in blocks]
    while len(level) > 1:
        paired = []
        for i in range(0, len(level), 2):
            pair = level[i:i + 2]
            name = "+".join(pair) if len(pair) > 1 else pair[0]
            if len(pair) > 1:
                out[name] = Switch(name, switches=pair)
            paired.append(name)
        level = paired
    return out


def parse_topology_yaml(path, name: str | None = None) -> dict[str, Switch] | None:
    """The switches of one topology of a Slurm ``topology.yaml``: ``name``,
    else the one with ``cluster_default: true``, else the first; None for
    a flat topology (no network levels)."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read topology.yaml ({exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ValueError(f"{where}: malformed YAML ({getattr(exc, 'problem', None) or exc})".replace("\n", " ")) from None
    if not isinstance(doc, list) or not all(isinstance(t, dict) for t in doc) or not doc:
        raise ValueError(f"{path}: expected a list of topologies (- topology: NAME ...)")
    names = [str(t.get("topology")) for t in doc]
    if name is not None:
        if name not in names:
            raise ValueError(f"{path}: no topology {name!r} (topologies: {', '.join(names)})")
        chosen = doc[names.index(name)]
    else:
        chosen = next((t for t in doc if t.get("cluster_default") is True), doc[0])
    where = f"{path}: topology {chosen.get('topology')!r}"
    if chosen.get("flat"):
        return None
    if isinstance(chosen.get("tree"), dict):
        switches: dict[str, Switch] = {}
        for i, entry in enumerate(chosen["tree"].get("switches") or []):
            if not isinstance(entry, dict) or not entry.get("switch"):
                raise ValueError(f"{where}: switch entry {i + 1} has no 'switch' name")
            sw_name = str(entry["switch"])
            if sw_name in switches:
                raise ValueError(f"{where}: switch {sw_name!r} defined twice")
            sw = Switch(sw_name, line=i + 1)
            if entry.get("nodes"):
                sw.nodes = _nodes(where, entry["nodes"], f"switch {sw_name!r}")
            if entry.get("children"):
                sw.switches = _nodes(where, entry["children"], f"switch {sw_name!r}")
            if not sw.nodes and not sw.switches:
                raise ValueError(f"{where}: switch {sw_name!r} has neither nodes nor children")
            switches[sw_name] = sw
        if not switches:
            raise ValueError(f"{where}: a tree topology needs switches")
        _check_children(switches, where)
        return switches
    if isinstance(chosen.get("block"), dict):
        block = chosen["block"]
        if block.get("block_sizes") is not None:
            _block_sizes(where, block["block_sizes"] if isinstance(block["block_sizes"], list)
                         else [block["block_sizes"]])
        blocks = []
        for i, entry in enumerate(block.get("blocks") or []):
            if not isinstance(entry, dict) or not entry.get("block"):
                raise ValueError(f"{where}: block entry {i + 1} has no 'block' name")
            blocks.append(Switch(str(entry["block"]), _nodes(where, entry.get("nodes"), f"block {entry['block']!r}")))
        if not blocks:
            raise ValueError(f"{where}: a block topology needs blocks")
        return block_switches(blocks)
    kinds = [k for k in ("ring", "torus3d") if k in chosen]
    raise ValueError(f"{where}: {kinds[0] if kinds else 'no tree, block or flat'} topology; rankmap "
                     "reads tree, block and flat ones (a torus: --torus)")


def xname_switches(xname_of: dict[str, str]) -> dict[str, Switch]:
    """Blade, chassis, cabinet and system switches of hosts given by their
    Cray xnames (``{host: xname}``), with ``XNAME_DISTANCES``."""
    out: dict[str, Switch] = {}
    blade_d, chassis_d, cabinet_d, system_d = XNAME_DISTANCES
    for host, xname in xname_of.items():
        m = XNAME.match(xname)
        if m is None:
            raise ValueError(f"{host}: {xname!r} is not a Cray xname (x1000c0s0b0n0)")
        cab, chassis, slot = (f"x{m.group(1)}", f"x{m.group(1)}c{m.group(2)}",
                              f"x{m.group(1)}c{m.group(2)}s{m.group(3)}")
        for name, child, dist, kind in ((slot, host, blade_d, "blade"), (chassis, slot, chassis_d, "chassis"),
                                        (cab, chassis, cabinet_d, "cabinet"), ("system", cab, system_d, "network")):
            sw = out.setdefault(name, Switch(name, distance=dist, kind=kind))
            is_node = kind == "blade"
            children = sw.nodes if is_node else sw.switches
            if child not in children:
                children.append(child)
    return out


def load_switches(spec: str, hosts: list[str]) -> dict[str, Switch] | None:
    """The switches ``--switches SPEC`` names: a topology.conf (tree or block),
    a topology.yaml (``FILE`` or ``FILE:TOPOLOGY``), or a file of ``HOST
    XNAME`` lines; None for a flat topology."""
    path, name = Path(spec), None
    if not path.exists() and ":" in spec and Path(spec.rsplit(":", 1)[0]).exists():
        path, name = Path(spec.rsplit(":", 1)[0]), spec.rsplit(":", 1)[1]
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{spec}: cannot read the network description ({exc})") from None
    words = [line.split("#", 1)[0].split() for line in text.splitlines()]
    words = [w for w in words if w]
    if path.suffix in (".yaml", ".yml") or (words and words[0][0] in ("---", "-")):
        switches = parse_topology_yaml(path, name)
    elif words and all(len(w) == 2 and XNAME.match(w[1]) for w in words):
        mapping = dict(words)
        unknown = [h for h in hosts if h not in mapping]
        if unknown:
            raise ValueError(f"{path}: no xname for host {unknown[0]!r}")
        switches = xname_switches({h: mapping[h] for h in hosts})
    else:
        switches = parse_topology_conf_text(text, str(path))
    for sw in (switches or {}).values():
        sw.source = str(path)  # errors of the tree built from them name the file
    return switches


def switch_tree(switches: dict[str, Switch], nodes: list[tuple[str, TreeNode]],
                label: str | None = None) -> TreeNode:
    """The job's machine: ``nodes`` (host name, node tree) placed under the
    switches that list them, in switch order; hosts keep their relative
    order within a switch.  A host no switch lists is an error naming
    ``label`` (default: the file the switches were read from)."""
    label = label or next((sw.source for sw in switches.values()), "topology.conf")
    by_host = dict(nodes)
    parent_of: dict[str, str] = {}
    for sw in switches.values():
        for child in sw.switches:
            if child in parent_of:
                raise ValueError(f"{label}: switch {child!r} is under both {parent_of[child]!r} "
                                 f"and {sw.name!r}")
            parent_of[child] = sw.name
    placed: set[str] = set()
    memo: dict[str, tuple[TreeNode | None, int]] = {}

    def build(name: str, trail: tuple[str, ...]) -> tuple[TreeNode | None, int]:
        if name in trail:
            raise ValueError(f"{label}: switches form a cycle ({' -> '.join(trail + (name,))})")
        if name in memo:
            return memo[name]
        sw = switches[name]
        children, height = [], 0
        for child in sw.switches:
            node, h = build(child, trail + (name,))
            if node is not None:
                children.append(node)
                height = max(height, h + 1)
        for host in sw.nodes:
            if host in by_host and host not in placed:
                placed.add(host)
                children.append(by_host[host])
        distance = DEFAULT_NETWORK_DISTANCE * 4.0 ** height if sw.distance is None else sw.distance
        memo[name] = (None, height) if not children else (
            TreeNode(sw.kind, distance, children, name=None), height)
        return memo[name]

    tops = [build(name, ()) for name in switches if name not in parent_of]
    missing = [h for h, _ in nodes if h not in placed]
    if missing:
        raise ValueError(f"{label}: host {missing[0]!r} is under no switch"
                         + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    tops = [(t, h) for t, h in tops if t is not None]
    if len(tops) == 1:
        return tops[0][0]
    height = max(h for _, h in tops) + 1
    return TreeNode("network", DEFAULT_NETWORK_DISTANCE * 4.0 ** height, [t for t, _ in tops])
