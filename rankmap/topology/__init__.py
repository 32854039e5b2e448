"""Machine topologies: a rooted tree whose leaves are PEs (see ``tree``).

Sources: uniform hierarchy strings and Scotch ``tleaf`` files (``hierarchy``);
hwloc XML, live discovery and clusters build on the same ``Topology`` type.
"""

from .hierarchy import (format_hierarchy, from_tleaf, hierarchy_topology, parse_hierarchy,
                        to_tleaf, topology_from_strings)
from .mesh import MeshTopology, mesh_topology_from_spec
from .tree import Topology, TreeNode

__all__ = ["Topology", "TreeNode", "hierarchy_topology", "topology_from_strings",
           "parse_hierarchy", "format_hierarchy", "to_tleaf", "from_tleaf", "load_topology",
           "MeshTopology", "mesh_topology_from_spec"]


def load_topology(path: str) -> Topology | MeshTopology:
    """Read a topology file: a Scotch ``tleaf`` target file, a file with
    one line ``hierarchy 4:16:8 distances 1:10:100``, or one line
    ``mesh 8x8`` / ``torus 16x32x32 cores 4`` (``MeshTopology``)."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    stripped = text.strip()
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
    raise ValueError(f"{path}: unknown topology file (expected a Scotch 'tleaf' target, "
                     "'hierarchy A:B:C distances X:Y:Z' or 'torus AxBxC cores N')")
