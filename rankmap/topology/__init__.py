"""Machine topologies: a rooted tree whose leaves are PEs (see ``tree``).

Sources: uniform hierarchy strings and Scotch ``tleaf`` files (``hierarchy``),
hwloc XML of real nodes (``hwloc``), this machine (``live``: lstopo or
sysfs), multi-node clusters and job slots (``cluster``); ``describe`` prints
any of them.
"""

from ..limits import check_readable
from .hierarchy import (format_hierarchy, from_tleaf, hierarchy_topology, parse_hierarchy,
                        to_tleaf, topology_from_strings)
from .mesh import MeshTopology, mesh_topology_from_spec
from .tree import Topology, TreeNode

__all__ = ["Topology", "TreeNode", "hierarchy_topology", "topology_from_strings",
           "parse_hierarchy", "format_hierarchy", "to_tleaf", "from_tleaf", "load_topology",
           "read_hwloc_xml", "compose_cluster", "restrict_to_slots", "slot_of_process",
           "discover_local", "MeshTopology", "mesh_topology_from_spec"]


def __getattr__(name):
    # hwloc/cluster/live load lazily: lxml is only needed when XML is read
    if name == "read_hwloc_xml":
        from .hwloc import read_hwloc_xml
        return read_hwloc_xml
    if name in ("compose_cluster", "restrict_to_slots", "slot_of_process"):
        from . import cluster
        return getattr(cluster, name)
    if name == "discover_local":
        from .live import discover_local
        return discover_local
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_topology(path: str) -> Topology | MeshTopology:
    """Read a topology file: hwloc XML (any version, or a topology diff), a
    cluster description (first word ``cluster``, see
    ``cluster.read_cluster_file``), a Scotch ``tleaf`` target file, a file
    with one line ``hierarchy 4:16:8 distances 1:10:100``, or one line
    ``mesh 8x8`` / ``torus 16x32x32 cores 4`` (``MeshTopology``)."""
    check_readable(path)
    with open(path, "rb") as fh:
        raw = fh.read()
    if raw.lstrip()[:1] == b"<":
        from .hwloc import read_hwloc_xml

        return read_hwloc_xml(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text topology file (not UTF-8)") from None
    stripped = text.strip()
    if stripped.split(None, 1)[:1] == ["cluster"]:
        from .cluster import read_cluster_file

        return read_cluster_file(path)
    if stripped.startswith("tleaf"):
        try:
            return hierarchy_topology(*from_tleaf(stripped))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    tokens = stripped.split()
    if len(tokens) in (2, 4) and tokens[0] == "hierarchy" and (len(tokens) == 2 or tokens[2] == "distances"):
        try:
            return topology_from_strings(tokens[1], tokens[3] if len(tokens) == 4 else None)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    if len(tokens) in (2, 4) and tokens[0] in ("mesh", "torus") and (len(tokens) == 2 or tokens[2] == "cores"):
        try:
            return mesh_topology_from_spec(tokens[1], torus=tokens[0] == "torus",
                                           cores=int(tokens[3]) if len(tokens) == 4 else 1)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    raise ValueError(f"{path}: unknown topology file (expected hwloc XML, a 'cluster' file, a Scotch "
                     "'tleaf' target, 'hierarchy A:B:C distances X:Y:Z' or 'torus AxBxC cores N')")
