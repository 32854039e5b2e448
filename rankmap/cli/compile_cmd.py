"""Compile the mapping kernels into numba's on-disk cache, once per install.

The searching methods (auto, refinement, the mesh heuristics) run compiled
kernels.  Each is compiled on its first use and cached on disk: without the
cache, the first run of each path pays seconds of compilation inside its time
limit.  This command maps small instances that call every kernel (the
bundled demo, a one-to-one mapping of more than 1024 tasks, a many-to-one
mapping, a torus; the growing of large jobs' sub-problems, the repair of
their top cuts, the report's pass over their pairs, their symmetry check and
the scan of their files directly, and the replay of a recorded message
order) and checks that each kernel has been compiled or loaded.

Run it as the user who installed rankmap, right after the install: the cache
then sits next to the installed sources (numba's ``__pycache__``), where every
user's run finds it.  NUMBA_CACHE_DIR, when set, moves the cache for both.

examples:
  pip install rankmap && rankmap compile
"""

from __future__ import annotations

import os
import time

import numpy as np

from . import UserError

NAME = "compile"
HELP = "compile the mapping kernels into numba's cache (once after an install)"
ORDER = 70

#: counted budget of each mapping: enough to reach every kernel, no more
WORK = 0.05


def add_arguments(p) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing unless a kernel was missed")


def grid(rows: int, cols: int):
    """A 2-D five-point stencil: the shape of most MPI programs' traffic."""
    from ..graph import CommGraph

    ids = np.arange(rows * cols).reshape(rows, cols)
    src = np.concatenate([ids[:, :-1].ravel(), ids[:-1, :].ravel()])
    dst = np.concatenate([ids[:, 1:].ravel(), ids[1:, :].ravel()])
    return CommGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]),
                                np.ones(2 * src.size), n=rows * cols)


def dense(n: int, partners: int):
    """Every task exchanging with its ``partners`` nearest in a ring: a dense
    graph (auto's connection-cache refinement)."""
    from ..graph import CommGraph

    src = np.repeat(np.arange(n), partners)
    dst = (src + np.tile(np.arange(1, partners + 1), n)) % n
    return CommGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]),
                                np.ones(2 * src.size), n=n)


def instances():
    """(what, graph, topology, method) that between them call every kernel."""
    from ..formats import read_graph
    from ..topology import load_topology
    from ..topology.hierarchy import topology_from_strings
    from ..topology.mesh import mesh_topology_from_spec
    from .demo_cmd import bundled

    return [("demo: 64 tasks one-to-one", read_graph(bundled("btmz64.edges")),
             load_topology(bundled("demo-cluster.txt")), "auto"),
            ("1156 tasks one-to-one", grid(34, 34), topology_from_strings("4:16:19", "1:10:100"), "auto"),
            ("1156 tasks on 256 PEs", grid(34, 34), topology_from_strings("4:16:4", "1:10:100"), "auto"),
            ("576 dense tasks one-to-one", dense(576, 40), topology_from_strings("24:2:12", "4:20:100"), "auto"),
            ("64 tasks on a 4x4x4 torus", grid(8, 8), mesh_topology_from_spec("4x4x4", torus=True),
             "mesh_auto")]


def _large_job_starts() -> None:
    """The growing with its search, the repair of a top cut made with slack
    and the FM on pairs of its blocks, which only jobs of more than 32768
    tasks reach (too large to map here): called directly on a small
    stencil."""
    from ..algorithms.construct.growing import grow_blocks, grow_split
    from ..algorithms.construct.pair_fm import refine_pairs
    from ..algorithms.construct.rebalance import balance_along_paths

    adj = grid(16, 16).symmetric
    grow_blocks(adj, np.full(4, 64))
    grow_split(adj, [np.arange(64), np.arange(64, 256)], [np.full(4, 16), np.full(2, 96)], search_work=10.0)
    one_over = np.repeat(np.arange(4), 64)
    one_over[64] = 0  # 65 tasks in the first block, 63 in the second
    refine_pairs(adj, balance_along_paths(adj, one_over, np.full(4, 64)), 4)


def _large_job_passes() -> None:
    """The kernels only jobs of millions of pairs reach (the report's pass
    and its link loads, the symmetry check, the scan of a large graph
    file): called directly on a small stencil."""
    from ..cost import _rows, _uniform_breakdown, _uniform_levels
    from ..cost_kernel import row_costs, uniform_pass
    from ..formats.columns import SEPARATORS, _scan_plain, _table
    from ..formats.columns_kernel import scan_digits
    from ..graph_kernel import rows_symmetric
    from ..topology.hierarchy import topology_from_strings

    uniform_pass(*_rows(grid(16, 16)), np.arange(256), np.array([256, 64, 4, 1]), np.zeros((256, 3)),
                 np.zeros(256), 0, 256)
    row_costs(*_rows(grid(16, 16)), np.arange(256), np.array([256, 64, 4]), np.array([100.0, 10.0, 1.0]),
              np.empty(256), 0, 256)
    rows_symmetric(*_rows(grid(16, 16)), 0, 256)
    machine = topology_from_strings("4:16:4", "1:10:100")
    sizes, dists = _uniform_levels(machine)  # the report's link loads per group (``group_loads``)
    _uniform_breakdown(grid(16, 16), machine, np.arange(256), np.append(sizes, 1), np.append(dists, 0.0),
                       machine.level_node_ids())
    _scan_plain(scan_digits, b"2 3\n1\n", _table(SEPARATORS), np.int64)


def _replay() -> None:
    """The replay's rates (``rankmap map`` and ``eval`` on traces with an
    event log): two ranks exchanging one message across a node link."""
    from ..replay import replay_time
    from ..topology.hierarchy import topology_from_strings
    from ..trace import EVENT_RECV, EVENT_SEND, EVENT_WAIT, EventLog

    op = np.array([EVENT_SEND, EVENT_WAIT, EVENT_RECV, EVENT_WAIT], dtype=np.int8)
    peer, nbytes = np.array([1, 0, 0, 0]), np.array([8, 0, 8, 0])
    log = EventLog.from_members([0, 2, 4], op, peer, nbytes, [], [False, False])
    replay_time(log, np.array([0, 2]), topology_from_strings("2:2", "1:100"))


def kernels() -> list:
    """Every compiled kernel of the mapping methods and the report (imports them all)."""
    import sys

    from numba.core.registry import CPUDispatcher

    from .. import algorithms, cost_kernel, graph_kernel, replay_kernel
    from ..formats import columns_kernel

    list(algorithms.METHODS)  # listing the methods imports every module that registers one
    found = {}
    for modname, module in list(sys.modules.items()):
        direct = (cost_kernel.__name__, graph_kernel.__name__, columns_kernel.__name__, replay_kernel.__name__)
        if (modname.startswith(f"{algorithms.__name__}.") or modname in direct) and module is not None:
            for obj in vars(module).values():
                if isinstance(obj, CPUDispatcher):
                    found[f"{obj.py_func.__module__}.{obj.py_func.__name__}"] = obj
    return [found[k] for k in sorted(found)]


def _cached(kernel) -> bool:
    """Whether numba's on-disk cache holds ``kernel``.  A kernel that only
    other kernels call is compiled into them, and loading those from the
    cache leaves it untouched: its own index file says it was compiled."""
    index = getattr(getattr(getattr(kernel, "_cache", None), "_cache_file", None), "_index_path", None)
    return index is not None and os.path.exists(index)


def run(args) -> int:
    from ..algorithms import map_tasks

    begin = time.perf_counter()
    for what, graph, topology, method in instances():
        t = time.perf_counter()
        map_tasks(graph, topology, method=method, work_limit=WORK)
        if not args.quiet:
            print(f"{what:28s} {time.perf_counter() - t:6.1f} s")
    t = time.perf_counter()
    _large_job_starts()
    if not args.quiet:
        print(f"{'starts of large jobs':28s} {time.perf_counter() - t:6.1f} s")
    t = time.perf_counter()
    _large_job_passes()
    if not args.quiet:
        print(f"{'passes of large jobs':28s} {time.perf_counter() - t:6.1f} s")
    t = time.perf_counter()
    _replay()
    if not args.quiet:
        print(f"{'replay of a message order':28s} {time.perf_counter() - t:6.1f} s")
    every = kernels()
    missed = [f"{k.py_func.__module__}.{k.py_func.__name__}" for k in every
              if not (k.signatures or _cached(k))]
    if missed:
        raise UserError(f"{len(missed)} of {len(every)} kernels were not reached: {', '.join(missed)}")
    if not args.quiet:
        import numba

        where = numba.config.CACHE_DIR or "next to the sources (__pycache__)"
        print(f"{len(every)} kernels compiled or loaded in {time.perf_counter() - begin:.1f} s; "
              f"cache: {where}")
    return 0
