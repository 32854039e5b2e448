"""Build one machine's tree from objects given as PU sets.

hwloc XML (v1: NUMA nodes inside the CPU tree; v2/v3: NUMA nodes as memory
children) and Linux sysfs describe the same machine differently; turning both
into a flat list of ``(kind, PU set)`` objects and rebuilding the tree by set
inclusion gives the same tree from every source.  PU sets are Python ints used
as bitmasks over PU *slots* (a slot is one PU of the description; for sysfs
and single-machine XML the slot is simply the OS index).
"""

from __future__ import annotations

from dataclasses import dataclass

from .levels import assign_distances, kind_rank, merge_structureless_levels
from .tree import Topology, TreeNode


@dataclass
class CpuObject:
    """A level object (package, L3, core, NUMA node, group...) covering the
    PU slots set in ``mask``; ``name`` is a host name for machines."""

    kind: str
    mask: int
    name: str | None = None


def _lowest_bit(mask: int) -> int:
    return (mask & -mask).bit_length() - 1


def build_machine_tree(objects: list[CpuObject], pu_os_index: dict[int, int],
                       distances: dict[str, float] | None = None, root_kind: str = "machine",
                       root_name: str | None = None) -> Topology:
    """Tree of the PU slots ``pu_os_index`` (slot -> OS index) under the
    ``objects`` containing them.

    Objects are masked to the PUs given (so disallowed or offline PUs vanish),
    empty or duplicate objects are dropped, and so is an object that cuts
    across another (not nested, not disjoint: a NUMA domain straddling two
    L3s, say).  Levels that add no structure are merged, distances follow the
    default model of ``levels`` with ``distances`` overrides (canonical keys).
    """
    if not pu_os_index:
        raise ValueError("no usable PU (all offline or disallowed)")
    full = 0
    for slot in pu_os_index:
        full |= 1 << slot
    seen: set[tuple[str, int]] = set()
    # like hwloc: a group equal to another object adds nothing, and a NUMA
    # domain spanning the whole machine says nothing about distances
    # (hwloc 2 always reports one, hwloc 1 none)
    plain_masks = {obj.mask & full for obj in objects if obj.kind != "group"}
    items: list[tuple[int, int, int, CpuObject]] = []
    for obj in objects:
        mask = obj.mask & full
        if not mask or (obj.kind, mask) in seen:
            continue
        if (obj.kind == "group" and mask in plain_masks) or (obj.kind == "numa" and mask == full):
            continue
        seen.add((obj.kind, mask))
        items.append((-mask.bit_count(), kind_rank(obj.kind), _lowest_bit(mask), obj))
    items.sort(key=lambda t: t[:3])

    root = TreeNode(root_kind, name=root_name)
    masks = {id(root): full}
    for _, _, _, obj in items:
        mask = obj.mask & full
        if mask == full and obj.kind == root_kind:
            if obj.name is not None and root.name is None:
                root.name = obj.name
            continue
        node = _insertion_parent(root, mask, masks)
        if node is None:
            continue
        child = TreeNode(obj.kind, name=obj.name)
        masks[id(child)] = mask
        node.children.append(child)
    for slot in sorted(pu_os_index):
        parent = _insertion_parent(root, 1 << slot, masks)
        leaf = TreeNode("pu", os_index=pu_os_index[slot])
        masks[id(leaf)] = 1 << slot
        parent.children.append(leaf)
    _sort_children(root, masks)
    merged = merge_structureless_levels(root)
    assign_distances(merged, distances)
    return Topology(merged)


def _insertion_parent(root: TreeNode, mask: int, masks: dict[int, int]) -> TreeNode | None:
    """Smallest placed node containing ``mask``; None if ``mask`` cuts across
    a placed node (objects are placed largest first, so a node that meets
    ``mask`` without containing it can never end up inside it)."""
    node = root
    while True:
        nxt = None
        for child in node.children:
            cm = masks[id(child)]
            if cm & mask:
                if cm & mask != mask:
                    return None
                nxt = child
                break
        if nxt is None:
            return node
        node = nxt


def _sort_children(root: TreeNode, masks: dict[int, int]) -> None:
    """Children in order of their first PU, as hwloc's logical order."""
    stack = [root]
    while stack:
        node = stack.pop()
        node.children.sort(key=lambda c: _lowest_bit(masks[id(c)]))
        stack.extend(node.children)

