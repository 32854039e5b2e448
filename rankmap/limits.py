"""Sane bounds on what an input may declare, checked before allocating.

A hostile or broken file (a header declaring 10^12 vertices, a hierarchy
``100000:100000:100000``, ``slots=1000000000``) is refused with one line
instead of exhausting memory.  The bounds sit far above any MPI job rankmap
maps; raising one is a one-line change here.
"""

import os
import stat

#: the most tasks (ranks, graph vertices) an input may declare
MAX_TASKS = 1 << 26
#: the most PEs a machine description may expand to: a few bytes of text
#: (``hierarchy 4096:4096:4``) expand to a whole tree, so this bound, not
#: the file's size, caps the memory.  A uniform hierarchy is built as arrays
#: (``Topology.uniform``: 2^22 PEs 1.3 s; 2^24, the largest job measured in
#: docs/results/scale.md, 4.4 GB) ...
MAX_PES = 1 << 24
#: ... a machine built node by node (hosts composed into a cluster, hwloc
#: trees) takes about 800 bytes per PE (2^20 PEs 0.8 GB and 8 s, 2^22 PEs
#: 3.2 GB and 43 s on a loaded 2-core machine)
MAX_TREE_PES = 1 << 21
#: integers beyond this are refused before numpy sees them (int64 arrays)
MAX_INT = 1 << 62
#: seeds are 63-bit: numpy's generators take them, the partitioners' C-int
#: seeds are folded from them
MAX_SEED = (1 << 63) - 1
#: the most bytes (or messages) a communication graph may hold in all, and
#: the largest distance a machine may give: J, bytes times distances summed,
#: stays below MAX_TOTAL * MAX_DISTANCE = 1e300, a finite float (about 1.8e308)
MAX_TOTAL = 1e250
MAX_DISTANCE = 1e50


def check_readable(path) -> None:
    """A regular file or a directory: a device (``/dev/zero``) or a pipe
    would be read forever.  Raises ``ValueError`` naming the path."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return  # the reader says it is missing
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ValueError(f"{path}: not a regular file (a device or pipe cannot be read as input)")
