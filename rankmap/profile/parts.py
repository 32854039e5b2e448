"""What a recording run needs besides MPI: where the trace may go, the
host's machine tree and the network a site describes, and the end merge of
the per-rank part files.

Shared by the mpi4py profiler (``session``) and the per-rank supervisor of
a compiled program (``native.run``), which must not import mpi4py: that
would initialise MPI in the supervisor beside the program's own ranks.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from .. import trace as tracefmt

#: seconds between part-file flushes (written only when the counters changed)
FLUSH_INTERVAL = 1.0


def output_problem(output: Path) -> str | None:
    """Why the trace cannot be written to ``output`` (None when it can)."""
    if output.is_dir():
        return f"{output} is a directory: give a trace file name (e.g. run.rmtrace.npz)"
    parent = output.parent
    if not parent.is_dir():
        return f"{parent} (the directory of {output.name}) does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot write in {parent}"
    return None


def host_topology_xml() -> str | None:
    """This node's hwloc XML: lstopo's when hwloc is installed, else the
    tree rankmap discovers from Linux sysfs written as hwloc XML, else None
    (so ``rankmap map TRACE`` knows the machine after a plain pip install)."""
    try:
        from ..topology.export import hwloc_xml
        from ..topology.live import discover_local_xml, sysfs_topology
    except ImportError:  # rankmap's topology readers need lxml
        return None
    try:
        return discover_local_xml() or hwloc_xml(sysfs_topology())
    except (OSError, ValueError):
        return None


#: how a site, or an emulated cluster, tells the profiler the network its ranks run on: a cluster
#: file's ``network`` and ``interconnect`` lines, ``;`` between them (``topology.cluster.network_description``)
NETWORK_VARIABLE = "RANKMAP_NETWORK"


def site_network() -> dict:
    """``{"network": text}`` for the trace's metadata where ``RANKMAP_NETWORK``
    describes the network, else nothing: ``map`` then prices the links
    between the recorded hosts as the site said, not by defaults."""
    text = os.environ.get(NETWORK_VARIABLE, "").strip()
    return {"network": text} if text else {}


def merge_when_complete(output: Path, timeout: float = 60.0) -> Path:
    """Wait until every rank's part file says ``complete`` (at most
    ``timeout`` seconds), then write the merged trace to ``output`` and
    remove the parts; past the timeout write what there is, say which ranks
    are missing, and keep the parts.  Each part is read again only when it
    was rewritten (a part is replaced by a rename: a new inode)."""
    parts_dir = tracefmt.part_path(output, 0).parent
    known: dict = {}  # part path -> ((inode, mtime, size), Trace)
    deadline = time.time() + timeout
    while True:
        for path in parts_dir.glob("*" + tracefmt.SUFFIX):
            try:
                st = path.stat()
                stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
                if known.get(path, (None,))[0] != stamp:
                    known[path] = (stamp, tracefmt.read_trace(path, warn_missing=False))
            except (OSError, ValueError):
                continue  # replaced while read: read again next round
        traces = [t for _stamp, t in known.values()]
        trace = tracefmt.merge_traces(traces) if traces else None
        done = trace is not None and all(s == "complete" for s in trace.status)
        if done or time.time() > deadline:
            break
        time.sleep(0.2)
    if trace is None:
        raise RuntimeError(f"no part file in {parts_dir}")
    if not done:
        trace.source = str(parts_dir)
        print(f"rankmap.profile: {tracefmt.missing_report(trace)}; partial trace written",
              file=sys.stderr)
    trace.source = str(output)
    trace.write(output)
    if done:
        shutil.rmtree(parts_dir, ignore_errors=True)
    return output
