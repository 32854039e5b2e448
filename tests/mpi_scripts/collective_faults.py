"""Fault injection with real ranks: every collective entry point, the fault
on each rank in turn, many cases in one launch.

For each case every rank runs the entry point with the fault injected on rank
``k`` only (a raising traffic callback, an argument given or shaped
differently, a failing step), records its outcome as one string, and rank 0
checks over a communicator the cases never touch that every rank had the
same outcome, of the expected kind.  Rank 0 prints ``CASE name k=K ok
OUTCOME`` (or ``BAD``) as it goes, so a hang names its case; the launching
test's timeout fails it.
"""

import contextlib
import io
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from mpi4py import MPI

import rankmap
import rankmap.reorder.api as api
import rankmap.reorder.offline as offline
from rankmap.algorithms.distributed import multilevel
from rankmap.cli import main as cli_main
from rankmap.graph import CommGraph
from rankmap.profile.session import ProfileError, Session
from rankmap.topology import topology_from_strings

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()
CHECK = WORLD.Dup()  # the verdicts travel here, never on a communicator a case uses
TOPO = topology_from_strings(f"2:{SIZE // 2}", "1:10")
OTHER = topology_from_strings(f"2:{SIZE // 2}", "1:20")
FAST = dict(method="identity", refine="swap")
TMP = Path(CHECK.bcast(tempfile.mkdtemp(prefix="faults") if RANK == 0 else None, root=0))


def ring_row():
    return np.array([(RANK + 1) % SIZE]), np.array([1000.0])


def outcome(fn) -> str:
    """What happened on this rank, as text comparable across ranks."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fn()
    except SystemExit as exc:
        code = exc.code if exc.code is None or isinstance(exc.code, int) else 1
        return f"SystemExit({code})"
    except KeyboardInterrupt:
        return "KeyboardInterrupt"
    except (ValueError, ProfileError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if hasattr(result, "reorder"):
        info = result.reorder
        result.Free()
        return f"fallback: {info.reason}" if info.fallback else "reordered"
    return result if isinstance(result, str) else f"returned {result!r}"


def raising(k, exc):
    def traffic():
        if RANK == k:
            raise exc
        return ring_row()
    return traffic


@contextlib.contextmanager
def patched(obj, name, k, exc, after: float = 0.0):
    """``obj.name`` raises ``exc`` on rank ``k`` (unchanged elsewhere),
    ``after`` seconds of work (the other ranks meanwhile waiting for it)."""
    original = getattr(obj, name)

    def fail(*args, **kwargs):
        if RANK == k:
            time.sleep(after)
            raise exc
        return original(*args, **kwargs)

    setattr(obj, name, fail)
    try:
        yield
    finally:
        setattr(obj, name, original)


def comm(**kwargs):
    return lambda: rankmap.reorder_comm(WORLD, **{"topology": TOPO, **FAST, **kwargs})


# --------------------------------------------------------------- the cases
def cases(k):
    """(name, expected outcome prefix, callable) with the fault on rank k."""
    yield "comm-raise", "fallback", comm(traffic=raising(k, RuntimeError("boom")))
    yield "comm-sysexit", "SystemExit(3)", comm(traffic=raising(k, SystemExit(3)))
    yield "comm-sysexit-text", "SystemExit(1)", comm(traffic=raising(k, SystemExit("bye")))
    yield "comm-interrupt", "KeyboardInterrupt", comm(traffic=raising(k, KeyboardInterrupt()))
    yield "comm-bad-row", "fallback", comm(
        traffic=(np.array([SIZE + 5]), np.array([1.0])) if RANK == k else ring_row())
    yield "comm-nan-row", "fallback", comm(
        traffic=(np.array([0]), np.array([np.nan])) if RANK == k else ring_row())
    yield "comm-topology-one-rank", "fallback", lambda: rankmap.reorder_comm(
        WORLD, traffic=ring_row(), topology=TOPO if RANK == k else None, **FAST)
    yield "comm-topology-differs", "fallback", comm(traffic=ring_row(),
                                                    topology=OTHER if RANK == k else TOPO)
    yield "comm-replicas", "ValueError", comm(traffic=ring_row(), replicas=0 if RANK == k else 2)
    yield "comm-unknown-option", "ValueError", comm(
        traffic=ring_row(), options={"backnd": "kahip"} if RANK == k else None)
    # a setting that is malformed on rank k, or differs there from the others'
    bad = RANK == k
    for name, kwargs in (
            ("method-unknown", dict(method="nosuch" if bad else "identity")),
            ("method-differs", dict(method="greedy" if bad else "identity")),
            ("refine-unknown", dict(refine="sometimes" if bad else "swap")),
            ("seed-negative", dict(seed=-1 if bad else 0)),
            ("seed-differs", dict(seed=1 if bad else 0)),
            ("seed-text", dict(seed="7" if bad else 0)),
            ("max-rounds-zero", dict(max_rounds=0 if bad else 4)),
            ("min-improvement-nan", dict(min_improvement=np.nan if bad else 1e-4)),
            ("distributed-differs", dict(distributed=True if bad else False)),
            ("multilevel-text", dict(multilevel="yes" if bad else True)),
            ("options-differ", dict(options={"time_limit": 2.0} if bad else None)),
            ("options-not-dict", dict(options=[("time_limit", 1.0)] if bad else None))):
        yield f"comm-{name}", "ValueError", comm(traffic=ring_row(), **kwargs)
    yield "cart-seed-differs", "ValueError", lambda: rankmap.reorder_cart(
        WORLD, (0, 0), topology=TOPO, **{**FAST, "seed": 3 if RANK == k else 0})
    yield "dist-graph-method-unknown", "ValueError", lambda: rankmap.reorder_dist_graph(
        WORLD, [(RANK - 1) % SIZE], [(RANK + 1) % SIZE], topology=TOPO,
        **{**FAST, "method": "nosuch" if RANK == k else "identity"})
    yield "comm-distributed-step", "fallback", lambda: _with(
        patched(api.SwapRounds, "contributions", k, RuntimeError("rounds broke")),
        comm(traffic=ring_row(), distributed=True))
    yield "comm-root-map-interrupt", "KeyboardInterrupt" if k == 0 else "reordered", lambda: _with(
        patched(api, "_map_on_root", k, KeyboardInterrupt()), comm(traffic=ring_row()))
    dims = (1, SIZE) if RANK == k else (0, 0)
    yield "cart-dims-differ", "ValueError", lambda: rankmap.reorder_cart(
        WORLD, dims, topology=TOPO, **FAST)
    yield "cart-dims-unfit", "ValueError", lambda: rankmap.reorder_cart(
        WORLD, (SIZE + 1, 1) if RANK == k else (0, 0), topology=TOPO, **FAST)
    yield "cart-periods", "ValueError", lambda: rankmap.reorder_cart(
        WORLD, (0, 0), [True] if RANK == k else None, topology=TOPO, **FAST)
    yield "cart-weights-nan", "ValueError", lambda: rankmap.reorder_cart(
        WORLD, (0, 0), weights=[np.nan, 1] if RANK == k else None, topology=TOPO, **FAST)
    yield "cart-interrupt", "SystemExit(4)", lambda: _with(
        patched(api, "cart_row", k, SystemExit(4)), lambda: rankmap.reorder_cart(
            WORLD, (0, 0), topology=TOPO, **FAST))
    nbr = [(RANK + 1) % SIZE]
    yield "dist-graph-nonint", "ValueError", lambda: rankmap.reorder_dist_graph(
        WORLD, [(RANK - 1) % SIZE], ["x"] if RANK == k else nbr, topology=TOPO, **FAST)
    yield "dist-graph-float", "ValueError", lambda: rankmap.reorder_dist_graph(
        WORLD, [(RANK - 1) % SIZE], [0.5] if RANK == k else nbr, topology=TOPO, **FAST)
    yield "dist-graph-range", "ValueError", lambda: rankmap.reorder_dist_graph(
        WORLD, [(RANK - 1) % SIZE], [SIZE] if RANK == k else nbr, topology=TOPO, **FAST)
    yield "dist-graph-weights", "ValueError", lambda: rankmap.reorder_dist_graph(
        WORLD, [(RANK - 1) % SIZE], nbr, destweights=[1, 2] if RANK == k else [1],
        topology=TOPO, **FAST)
    yield "dist-graph-negative-weight", "ValueError", lambda: rankmap.reorder_dist_graph(
        WORLD, [(RANK - 1) % SIZE], nbr, [1], [-1] if RANK == k else [1], topology=TOPO, **FAST)
    yield "map-distributed-rounds", "rc=2", lambda: _with(
        patched(offline.SwapRounds, "contributions", k, RuntimeError("rounds broke")), _map_cli())
    yield "map-distributed-nan-row", "ValueError", lambda: offline.map_distributed(
        *_nan_in_row(k), comm=WORLD, replicas=2)
    if k == 0:  # rank 0 alone maps (centrally, the coarse graph), reads the input, writes the result
        yield "comm-root-map-fails-late", "fallback", lambda: _with(
            patched(api, "_map_on_root", k, RuntimeError("late"), after=0.3), comm(traffic=ring_row()))
        yield "comm-root-map-exits-late", "SystemExit(5)", lambda: _with(
            patched(api, "_map_on_root", k, SystemExit(5), after=0.3), comm(traffic=ring_row()))
        yield "comm-coarse-map-fails-late", "fallback", lambda: _with(
            patched(multilevel, "map_coarse", k, RuntimeError("late"), after=0.3),
            comm(traffic=ring_row(), distributed=True))
        yield "map-distributed-bad-input", "rc=2", _map_cli(graph=TMP / "missing.edges")
        yield "map-distributed-output-dir", "rc=2", _map_cli(output=TMP)
    yield "profile-record-fails", "ProfileError", lambda: _profile(k, "record")
    if k == 0:
        yield "profile-output-is-dir", "ProfileError", lambda: _profile(k, "dir-at-start")
        yield "profile-final-write-fails", "ProfileError", lambda: _profile(k, "dir-at-end")


def _with(ctx, fn):
    with ctx:
        return fn()


def _graph_file() -> Path:
    path = TMP / "ring.edges"
    if RANK == 0 and not path.exists():
        path.write_text("".join(f"{t} {(t + 1) % SIZE} {100 * (t + 1)}\n" for t in range(SIZE)))
    CHECK.Barrier()
    return path


def _nan_in_row(k):
    """Rank 0's graph with a NaN byte count in the row of task k, which the
    distributed rounds give to rank k (written into the graph's arrays after
    construction: ``CommGraph`` itself refuses NaN)."""
    if RANK != 0:
        return None, None
    graph = CommGraph.from_edges(np.arange(SIZE), (np.arange(SIZE) + 1) % SIZE, np.full(SIZE, 10.0),
                                 n=SIZE)
    graph.coo()[2][k] = np.nan  # row k holds one pair (k, k + 1)
    return graph, TOPO


def _map_cli(graph=None, output=None):
    graph = _graph_file() if graph is None else graph

    def run():
        argv = ["map", str(graph), "--hierarchy", f"2:{SIZE // 2}", "--distributed",
                "--replicas", "2"] + (["-o", str(output)] if output else [])
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return f"rc={cli_main(argv)}"
    return run


def _profile(k, fault):
    out = TMP / f"prof-{fault}-{k}.rmtrace.npz"
    if fault == "dir-at-start" and RANK == 0:
        out.mkdir(exist_ok=True)
    CHECK.Barrier()
    session = Session(out, topology=False, flush_interval=0)
    if fault == "record" and RANK == k:
        def broken(*args, **kwargs):
            raise RuntimeError("counters lost")
        session.own_trace = broken
    if fault == "dir-at-end" and RANK == 0:
        out.mkdir()
    try:
        return session.finish()
    finally:
        session.finished = True


def main():
    only = sys.argv[1:]  # optional case names
    ran = bad = 0
    for k in range(SIZE):
        for name, expected, fn in cases(k):
            if only and name not in only:
                continue
            mine = outcome(fn)
            every = CHECK.gather(mine, root=0)
            if RANK == 0:
                same = all(o == every[0] for o in every)
                fine = same and every[0].startswith(expected)
                ran += 1
                bad += not fine
                shown = every[0] if same else " | ".join(f"rank {r}: {o}" for r, o in enumerate(every))
                print(f"CASE {name} k={k} {'ok' if fine else 'BAD'} {shown}", flush=True)
    if RANK == 0:
        shutil.rmtree(TMP, ignore_errors=True)
        print(f"FAULT CASES {ran} BAD {bad}", flush=True)


main()
