"""Uniform hierarchies: the ``4:16:8`` / ``1:10:100`` strings of KaHIP and
SharedMap (innermost level first), and Scotch/TreeMatch ``tleaf`` strings
(outermost first).

``S = a1:...:ak`` means a1 PEs per innermost group, a2 of those per next group,
and so on; ``D = d1:...:dk`` gives the distance between two PEs whose first
shared group is at level i.  The groups just below the root are the hosts
(nodes) of the job, named ``node0``, ``node1``, ... when launch files need
names.
"""

from __future__ import annotations

import math

from ..limits import MAX_DISTANCE, MAX_PES
from .tree import Topology, TreeNode, format_distance, format_hierarchy  # noqa: F401 (re-exported)


def check_levels(arities, distances, what: str = "hierarchy") -> tuple[list[int], list[float]]:
    """Arities (integers >= 1, at most ``MAX_PES`` PEs in all) and distances
    (finite, >= 0), one per level: checked before any tree is built."""
    if len(arities) != len(distances):
        raise ValueError(f"{what}: {len(arities)} levels but {len(distances)} distances")
    if any(not float(a).is_integer() or a < 1 for a in arities):
        raise ValueError(f"{what}: every level needs an integer arity >= 1, got {list(arities)}")
    arities = [int(a) for a in arities]
    if math.prod(arities) > MAX_PES:
        raise ValueError(f"{what}: {':'.join(map(str, arities))} makes {math.prod(arities)} PEs, "
                         f"more than rankmap handles ({MAX_PES})")
    if any(not 0 <= d <= MAX_DISTANCE for d in distances):
        raise ValueError(f"{what}: distances must be finite, >= 0 and at most {MAX_DISTANCE:g}, "
                         f"got {list(distances)}")
    return arities, [float(d) for d in distances]


def _split_numbers(text: str, what: str, cast) -> list:
    parts = [p for p in str(text).replace(",", ":").split(":")]
    try:
        values = [cast(p) for p in parts]
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected numbers separated by ':' (e.g. 4:16:8)") from None
    return values


def parse_hierarchy(hierarchy: str, distances: str | None = None) -> tuple[list[int], list[float]]:
    """Parse ``"4:16:8"`` and ``"1:10:100"`` into lists, checking both."""
    arities = _split_numbers(hierarchy, "hierarchy", int)
    if distances is None:
        dists = [float(10 ** i) for i in range(len(arities))]
    else:
        dists = _split_numbers(distances, "distances", float)
    if len(dists) != len(arities):
        raise ValueError(
            f"hierarchy {hierarchy!r} has {len(arities)} levels but distances {distances!r} "
            f"has {len(dists)}")
    return check_levels(arities, dists, f"hierarchy {hierarchy!r} distances {distances!r}"
                        if distances is not None else f"hierarchy {hierarchy!r}")


def hierarchy_topology(arities, distances, host_prefix: str | None = "node") -> Topology:
    """Build the regular tree of a uniform hierarchy (innermost level first).
    The root's children are hosts named ``host_prefix0``, ``host_prefix1``...
    (the whole tree is one host when there is one level); with
    ``host_prefix=None`` nothing is named: the tree describes one node that
    a cluster names (``cluster.compose_cluster``)."""
    arities, distances = check_levels(list(arities), [float(d) for d in distances])
    kinds = [f"level{i}" for i in range(len(arities), 0, -1)] + ["pe"]
    hosts = None
    if host_prefix is not None:
        hosts = [f"{host_prefix}{i}" for i in range(arities[-1] if len(arities) >= 2 else 1)]
    return Topology.uniform(arities, distances, kinds, hosts)


def topology_from_strings(hierarchy: str, distances: str | None = None) -> Topology:
    """The machine of a hierarchy string and its distances, innermost level
    first (KaHIP convention): ``topology_from_strings("4:16:8", "1:10:100")``
    is 8 hosts (``node0``...) of 16 groups of 4 PEs; without distances
    1, 10, 100, ... are used."""
    return hierarchy_topology(*parse_hierarchy(hierarchy, distances))


def to_tleaf(arities, distances) -> str:
    """Scotch/TreeMatch ``tleaf`` string: ``tleaf k a_k d_k ... a_1 d_1``
    (levels listed from the root down, each with the cost of crossing it)."""
    parts = ["tleaf", str(len(arities))]
    for a, d in zip(reversed(list(arities)), reversed(list(distances))):
        parts += [str(int(a)), format_distance(d)]
    return " ".join(parts)


def from_tleaf(text: str) -> tuple[list[int], list[float]]:
    """Parse a ``tleaf`` string or Scotch target file content back into
    ``(arities, distances)``, innermost first."""
    tokens = text.split()
    if not tokens or tokens[0] != "tleaf":
        raise ValueError(f"not a tleaf description: {text[:40]!r} (expected 'tleaf LEVELS size cost ...')")
    try:
        levels = int(tokens[1])
        values = [float(t) for t in tokens[2:]]
    except (IndexError, ValueError):
        raise ValueError(f"malformed tleaf description: {text.strip()!r}") from None
    if len(values) != 2 * levels or levels < 1:
        raise ValueError(
            f"tleaf with {levels} levels needs {2 * levels} numbers after the level count, "
            f"got {len(values)}")
    arities = [values[2 * i] for i in range(levels)][::-1]
    dists = [values[2 * i + 1] for i in range(levels)][::-1]
    return check_levels(arities, dists, "tleaf")
