"""Summaries of a topology for people and programs: the level table (kinds,
arities, distances, from the root), the uniform-hierarchy strings when the
tree is one, and an lstopo-like indented tree where runs of identical
siblings print once as ``N x``."""

from __future__ import annotations

import numpy as np

from ..cpulist import format_cpulist
from .hierarchy import format_hierarchy
from .tree import Topology


def _number(x: float):
    return int(x) if float(x).is_integer() else float(x)


def describe_topology(topology: Topology) -> dict:
    """JSON-ready description: ``n_pes``, ``n_hosts``, ``hosts`` (first 16),
    ``levels`` from the root (``name``, ``arity`` — an int, or the sorted
    list of arities when irregular —, ``distance`` likewise, ``count`` of
    nodes), ``uniform`` and, when uniform, ``hierarchy``/``distances``
    strings (innermost first)."""
    t = topology
    if not isinstance(t, Topology):  # a mesh or torus: its grid, not a tree
        return {"n_pes": int(t.n_pes), "n_hosts": int(t.n_nodes), "hosts": t.hosts()[:16],
                "levels": [], "uniform": False, "mesh": t.spec(), "diameter": int(t.diameter)}
    is_inner = t.child_ptr[1:] > t.child_ptr[:-1]
    levels = []
    for depth, kind in enumerate(t.level_kinds()):
        nodes = np.flatnonzero((t.node_depth == depth) & is_inner)
        if len(nodes) == 0:
            continue
        arities = sorted(set((t.child_ptr[nodes + 1] - t.child_ptr[nodes]).tolist()))
        dists = sorted({_number(d) for d in t.node_distance[nodes].tolist()})
        levels.append({"name": kind,
                       "arity": arities[0] if len(arities) == 1 else arities,
                       "distance": dists[0] if len(dists) == 1 else dists,
                       "count": int(len(nodes))})
    hosts = t.hosts()
    out = {"n_pes": int(t.n_pes), "n_hosts": len(hosts), "hosts": hosts[:16], "levels": levels}
    uniform = t.uniform_hierarchy()
    out["uniform"] = uniform is not None
    if uniform is not None:
        out["hierarchy"], out["distances"] = format_hierarchy(*uniform)
    return out


def format_topology(topology: Topology, max_lines: int = 200) -> str:
    """Level table, hierarchy line, then the tree (like ``lstopo``'s console
    output, identical consecutive siblings folded, at most ``max_lines``)."""
    t = topology
    info = describe_topology(t)
    if "mesh" in info:
        return (f"{t.n_pes} PEs on {info['n_hosts']} nodes: {info['mesh']} (distance = hops, "
                f"diameter {info['diameter']})")
    lines = [f"{t.n_pes} PEs on {info['n_hosts']} host{'s' if info['n_hosts'] != 1 else ''}: "
             + ", ".join(info["hosts"][:8]) + (" ..." if info["n_hosts"] > 8 else "")]
    lines.append("levels (from the root):")
    for lv in info["levels"]:
        ar = lv["arity"] if isinstance(lv["arity"], int) else "/".join(map(str, lv["arity"]))
        di = lv["distance"] if not isinstance(lv["distance"], list) else "/".join(map(str, lv["distance"]))
        lines.append(f"  {lv['name']:<28} x{lv['count']:<6} arity {ar:<8} distance {di}")
    if info["uniform"]:
        lines.append(f"uniform hierarchy {info['hierarchy']}  distances {info['distances']}"
                     + ("  (inside the nodes: the tree approximating their links)" if t.has_links else ""))
    else:
        lines.append("not a uniform hierarchy (irregular tree)")
    lines.append("")
    sig = _signatures(t)
    stack = [(0, 0, [0])]
    tree_lines = []
    while stack:
        node, indent, run = stack.pop()
        if len(tree_lines) >= max_lines:
            tree_lines.append("  ...")
            break
        tree_lines.append("  " * indent + _node_line(t, node, run))
        runs: list[list[int]] = []
        for c in t.children(node).tolist():
            if runs and sig[runs[-1][0]] == sig[c]:
                runs[-1].append(c)
            else:
                runs.append([c])
        folded = len(run) > 1
        for r in reversed(runs):
            stack.append((r[0], indent + 1, r if not folded else r + [-1]))
    return "\n".join(lines + tree_lines + _links_lines(t))


def _links_lines(t: Topology) -> list[str]:
    """The true distances of each distinct link matrix (first host using it)."""
    out: list[str] = []
    seen: set[int] = set()
    for node, links in t.node_links.items():
        if id(links) in seen:
            continue
        seen.add(id(links))
        lo, hi = t.leaf_range(node)
        rows = t.pe_link_row[lo:hi]
        k = hi - lo
        out += ["", f"links inside {t.pe_host[lo]} ({links.source}): true distances between its "
                f"{k} PEs (the tree above approximates them), egress to other nodes last"]
        labels = [str(t.pe_device[p] or p) for p in range(lo, hi)]
        width = max(6, *(len(x) for x in labels)) + 1
        out.append(" " * width + "".join(f"{x:>{width}}" for x in labels) + f"{'egress':>{width + 1}}")
        for i in range(k):
            row = links.distance[rows[i], rows]
            out.append(f"{labels[i]:>{width}}" + "".join(f"{_number(round(v, 3)):>{width}}" for v in row)
                       + f"{_number(round(links.egress[rows[i]], 3)):>{width + 1}}")
    return out


def _node_line(t: Topology, node: int, run: list[int]) -> str:
    """One tree line; ``run`` lists the identical siblings folded into it
    (a trailing -1 marks a line inside an already folded subtree, where
    names and PU numbers would only be those of the first copy)."""
    start, stop = t.leaf_range(node)
    real = [n for n in run if n >= 0]
    folded = len(run) > 1
    prefix = f"{len(real)} x " if len(real) > 1 else ""
    name = ""
    if t.node_name[node] is not None and -1 not in run:
        last = t.node_name[real[-1]]
        name = f' "{t.node_name[node]}"' + (f'..."{last}"' if len(real) > 1 else "")
    pus = ""
    os_idx = t.pe_os_index[start:stop]
    if not folded and (os_idx >= 0).all() and len(set(t.pe_host[start:stop])) == 1:
        pus = f"  P#{format_cpulist(os_idx.tolist())}"
    if stop - start == 1 and len(t.children(node)) == 0:
        device = t.pe_device[start]
        if device is not None and not folded:
            cpus = t.pe_cpus[start]
            pus = f"  {device}" + (f"  cpus {format_cpulist(cpus)}" if cpus else "")
        return f"{prefix}{t.node_kind[node]}{name}{pus}"
    count = f"{stop - start} PE{'s' if stop - start > 1 else ''}{' each' if len(real) > 1 else ''}"
    return f"{prefix}{t.node_kind[node]}{name} ({count}, distance {_number(t.node_distance[node])}){pus}"


def _signatures(t: Topology) -> list:
    """Per node an id equal for structurally identical subtrees (kind,
    distance, children's ids), host names ignored."""
    ids: dict[tuple, int] = {}
    sig = [0] * t.n_nodes
    for n in range(t.n_nodes - 1, -1, -1):
        key = (t.node_kind[n], float(t.node_distance[n]), tuple(sig[c] for c in t.children(n).tolist()))
        sig[n] = ids.setdefault(key, len(ids))
    return sig
