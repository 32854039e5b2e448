"""Network levels from Slurm's ``topology.conf`` (tree plugin)::

    SwitchName=s0 Nodes=dev[0-5]
    SwitchName=s1 Nodes=dev[6-11]
    SwitchName=s2 Switches=s[0-1] LinkSpeed=100

Each switch becomes a tree node above its nodes or switches; a switch's
distance grows with its height (leaf switches ``DEFAULT_NETWORK_DISTANCE``,
x4 per level up, as for uniform network levels).  Only the job's hosts are
kept, and switches left without any of them are dropped; separate fabrics
(several top switches) join under one more level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .hosts import expand_nodelist
from .levels import DEFAULT_NETWORK_DISTANCE
from .tree import TreeNode


@dataclass
class Switch:
    name: str
    nodes: list[str] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)
    line: int = 0


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
        if "switchname" not in fields:
            raise ValueError(f"{where}: not a tree-plugin line (expected SwitchName=... "
                             "Nodes=... or Switches=...)")
        name = fields["switchname"]
        if name in switches:
            raise ValueError(f"{where}: switch {name!r} defined twice (line {switches[name].line})")
        sw = Switch(name, line=lineno)
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
    if not switches:
        raise ValueError(f"{label}: no SwitchName line")
    for sw in switches.values():
        for child in sw.switches:
            if child not in switches:
                raise ValueError(f"{label}:{sw.line}: switch {sw.name!r} lists unknown switch {child!r}")
    return switches


def switch_tree(switches: dict[str, Switch], nodes: list[tuple[str, TreeNode]],
                label: str = "topology.conf") -> TreeNode:
    """The job's machine: ``nodes`` (host name, node tree) placed under the
    switches that list them, in switch order; hosts keep their relative
    order within a switch.  A host no switch lists is an error."""
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
        memo[name] = (None, height) if not children else (
            TreeNode("switch", DEFAULT_NETWORK_DISTANCE * 4.0 ** height, children, name=None), height)
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
