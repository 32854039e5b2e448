"""Open MPI pml monitoring ``*.prof`` files (``E`` lines; ``I`` lines too
with ``include_internal``): one file, a directory or a prefix."""

from __future__ import annotations

import glob
import os
import re

from ..graph import CommGraph
from .common import FormatError, _err


_OMPI_LINE = re.compile(r"^([EI])\t(\d+)\t(\d+)\t(\d+) bytes\t(\d+) msgs sent")


def _ompi_files(path: str) -> list[str]:
    if os.path.isdir(path):
        files = glob.glob(os.path.join(path, "*.prof"))
    elif os.path.exists(path):
        files = [path]
    else:  # the prefix given to pml_monitoring_filename
        files = glob.glob(glob.escape(path) + ".*.prof")
    if not files:
        raise FileNotFoundError(f"{path}: no Open MPI monitoring files (*.prof)")
    return sorted(files)


def read_ompi_monitoring(path: str, include_internal: bool = False) -> CommGraph:
    """Point-to-point traffic from Open MPI's pml monitoring output.  ``E``
    lines are the application's messages; ``I`` lines (internal, e.g. from
    collectives) count only with ``include_internal``."""
    src, dst, nbytes, msgs = [], [], [], []
    files = _ompi_files(path)
    ranks = [int(m.group(1)) for m in (re.search(r"\.(\d+)\.prof$", f) for f in files) if m]
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            for no, line in enumerate(fh, 1):
                if not line.startswith(("E\t", "I\t")):
                    continue
                m = _OMPI_LINE.match(line)
                if m is None:
                    raise _err(f, no, "malformed monitoring line (expected "
                                      "'E|I<TAB>src<TAB>dst<TAB>N bytes<TAB>M msgs sent')")
                if m.group(1) == "I" and not include_internal:
                    continue
                src.append(int(m.group(2))), dst.append(int(m.group(3)))
                nbytes.append(float(m.group(4))), msgs.append(float(m.group(5)))
    if not src:
        raise FormatError(f"{path}: no point-to-point lines (E/I) in the monitoring output")
    n = max(max(src), max(dst), *ranks) + 1
    return CommGraph.from_edges(src, dst, nbytes, n=n, messages=msgs)
