"""Level vocabulary of machine trees, the default distance model, and the
merge of levels that add no structure.

Node kinds of a machine: ``machine``, ``package``, ``die``, ``numa``, ``L3``,
``L2``, ``core``, ``pu``, ``group`` (hwloc Groups, and any unknown object type
that contains PUs, named by its lowercased type); clusters add network kinds
above the machines (``switch``, ``rack``, ``network``).  When adjacent levels
are one-to-one (every package has exactly one L3, every core one PU) they are
merged into one node whose kind joins the parts outer-first, e.g.
``package+numa+L3`` or ``core+pu``.

Default distance model (cost of one byte between two PEs whose closest shared
level is this one; see ``DEFAULT_DISTANCES``)::

    core 1 < L2 2 < L3 4 < die 6 < numa 8 < package 10 < machine 20
    < network levels (DEFAULT_NETWORK_DISTANCE = 100, x4 per level up)

A merged node takes the smallest distance of its parts (its PEs share all of
them, the closest shared resource decides).  Groups and unknown kinds sit
half-way between the largest distance below them and the nearest ancestor of
a known kind.  Finally distances are made monotone: a node never costs less
than a node below it.  Users override the model per kind
(``{"core": 2, "package": 20}``) or per merged label (``{"package+L3": 5}``);
an override of any part of a merged node wins over the defaults of the others.
"""

from __future__ import annotations

from collections import defaultdict

from .tree import TreeNode

DEFAULT_DISTANCES: dict[str, float] = {
    "core": 1.0, "L2": 2.0, "L3": 4.0, "die": 6.0, "numa": 8.0, "package": 10.0,
    "machine": 20.0,
}
"""Default distance per level kind inside a machine."""
DEFAULT_NETWORK_DISTANCE = 100.0
"""Default distance of the first network level above the machines (x4 per level up)."""

# outer-first order of kinds inside a merged label; unknown kinds sort with groups
_RANK = {"network": -3, "rack": -2, "cabinet": -2, "switch": -1, "chassis": -1, "blade": -1, "system": 0, "machine": 0, "group": 1,
         "package": 2, "die": 3, "numa": 4, "L3": 5, "L2": 6, "core": 7, "pu": 8}
_GROUP_RANK = 1

_ALIASES = {"socket": "package", "numanode": "numa", "l3": "L3", "l3cache": "L3",
            "l2": "L2", "l2cache": "L2", "thread": "pu", "hwthread": "pu"}


def canonical_kind(name: str) -> str:
    """Canonical spelling of one kind name (``Socket`` -> ``package``,
    ``L3Cache`` -> ``L3``); unknown names are lowercased."""
    low = str(name).strip().lower()
    if low in _ALIASES:
        return _ALIASES[low]
    for kind in _RANK:
        if kind.lower() == low:
            return kind
    return low


def kind_rank(kind: str) -> int:
    return _RANK.get(kind, _GROUP_RANK)


def join_kinds(kinds) -> str:
    """Merged label: the distinct parts ordered outer-first, joined by '+'."""
    parts = []
    for k in kinds:
        for part in k.split("+"):
            if part not in parts:
                parts.append(part)
    return "+".join(sorted(parts, key=kind_rank))


def normalize_overrides(distances) -> dict[str, float]:
    """Check and canonicalise a per-level distance override mapping.

    Accepts a dict or a string ``"core=2,package=20"``; keys are kind names
    (any case, aliases such as ``socket``) or merged labels (``package+L3``).
    """
    if not distances:
        return {}
    if isinstance(distances, str):
        items = []
        for part in distances.replace(";", ",").split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"level distance {part.strip()!r}: expected KIND=VALUE (e.g. core=2)")
            items.append((key, value))
    else:
        items = list(dict(distances).items())
    out: dict[str, float] = {}
    for key, value in items:
        kinds = [canonical_kind(p) for p in str(key).split("+") if p.strip()]
        unknown = [k for k in kinds if k not in _RANK]
        if unknown:
            raise ValueError(f"level distance {str(key).strip()}=...: unknown level {unknown[0]!r} "
                             f"(levels: {', '.join(_RANK)}; aliases: {', '.join(_ALIASES)})")
        label = join_kinds(kinds)
        if not label:
            raise ValueError(f"level distance: empty level name in {key!r}")
        try:
            val = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"level distance {key}={value!r}: not a number") from None
        if not 0 <= val < float("inf"):
            raise ValueError(f"level distance {key}={value!r}: must be finite and non-negative")
        out[label] = val
    return out


def iter_nodes(root: TreeNode):
    """All nodes of a TreeNode tree, preorder, without recursion."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def merge_structureless_levels(root: TreeNode) -> TreeNode:
    """Merge every level (all nodes of one kind) whose nodes all have exactly
    one child into that child, like ``lstopo --merge``.

    A node with one child is never the lowest common ancestor of two PEs, so
    PE distances do not change; the merged node keeps the smallest distance
    of its parts, the first host name, any node links, what the leaf
    carries (OS index, link row, GPU, CPUs), the smallest link bandwidth
    of the chain (its links all carry the same bytes) and the latency of
    its lowest node that gives one (the only one that can be an LCA).  Returns the
    new root (the old root itself may merge into its only child).
    """
    single: dict[str, bool] = defaultdict(lambda: True)
    for node in iter_nodes(root):
        single[node.kind] = single[node.kind] and len(node.children) == 1
    removable = {k for k, v in single.items() if v}

    def collapse(node: TreeNode) -> TreeNode:
        chain = [node]
        while chain[-1].kind in removable and len(chain[-1].children) == 1:
            chain.append(chain[-1].children[0])
        last = chain[-1]
        if len(chain) == 1:
            return node
        inner = [n.distance for n in chain if n.children]
        name = next((n.name for n in chain if n.name is not None), None)
        links = next((n.links for n in chain if n.links is not None), None)
        uplinks = [n.uplink for n in chain if n.uplink is not None]  # one load: the slowest decides
        latency = next((n.latency for n in reversed(chain) if n.latency is not None), None)
        return TreeNode(join_kinds(n.kind for n in chain), min(inner) if last.children else 0.0,
                        list(last.children), last.os_index, name, links if last.children else None,
                        last.link_row, last.device, last.cpus, min(uplinks) if uplinks else None,
                        latency if last.children else None)

    new_root = collapse(root)
    stack = [new_root]
    while stack:
        node = stack.pop()
        node.children = [collapse(c) for c in node.children]
        stack.extend(node.children)
    return new_root


def assign_distances(root: TreeNode, overrides: dict[str, float] | None = None) -> None:
    """Set ``distance`` on every inner node of a merged machine tree from its
    kind label, the default model and canonical ``overrides`` (see module
    docstring); leaves get 0."""
    overrides = overrides or {}
    nodes = list(iter_nodes(root))
    parent: dict[int, TreeNode | None] = {id(root): None}
    for node in nodes:
        for c in node.children:
            parent[id(c)] = node
    fixed: dict[int, float | None] = {}
    for node in nodes:
        parts = node.kind.split("+")
        if node.kind in overrides:
            fixed[id(node)] = overrides[node.kind]
            continue
        given = [overrides[p] for p in parts if p in overrides]
        known = [DEFAULT_DISTANCES[p] for p in parts if p in DEFAULT_DISTANCES]
        fixed[id(node)] = min(given) if given else (min(known) if known else None)
    # bottom-up (reverse preorder): groups between their subtree and the
    # nearest ancestor of known distance, then monotone along every path
    for node in reversed(nodes):
        if not node.children:
            node.distance = 0.0
            continue
        below = max(c.distance for c in node.children)
        own = fixed[id(node)]
        if own is None:
            anc = parent[id(node)]
            while anc is not None and fixed[id(anc)] is None:
                anc = parent[id(anc)]
            above = fixed[id(anc)] if anc is not None else None
            if above is not None and above > below:
                own = (below + above) / 2.0
            else:
                own = 2.0 * below if below > 0 else DEFAULT_DISTANCES["core"]
        node.distance = max(own, below)
