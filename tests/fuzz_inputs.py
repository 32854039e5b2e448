"""Property-based fuzzing of every file rankmap reads (hypothesis).

A *family* is one kind of input, the samples it starts from and the command
that reads it: every graph and trace reader of ``rankmap/formats`` (the
formats ``registry.GRAPH_FORMATS`` lists), hwloc XML and the other topology
files, Slurm's topology.conf, hierarchy strings, host files and host lists,
and every launch file ``rankmap map`` writes as a ``--mapping``.  A case is
a sample mutated the ways broken and hostile files are (cut short, bytes
flipped, inserted or deleted, a NUL byte, numbers made huge, negative, NaN,
hexadecimal or fractional, delimiters swapped, re-encoded, lines duplicated,
emptied or swapped), or a file generated from a random graph or mapping
whose reading is known exactly.  The readers with a whole-file scan for
large files (METIS, edge lists) are also run with the scan taking every
file whatever its size, in blocks of a few bytes so that lines cross block
ends (``scanning``); the outcome must be the line loop's, to the byte of the
output and the error line.  ``check`` runs the command through the CLI in
this process and says what went wrong, if anything:

- exit 0: a result; for generated files, exactly the graph or placement
  that was written (never a silently different one); no numpy warning;
- exit 2: exactly one line on stderr, ``rankmap CMD: error: ...``, naming
  the file (or the option) that holds the input;
- anything else is a problem: a traceback, another exit status, a second
  line, an error that names no input, or no answer within ``TIME_LIMIT``.

``tests/test_fuzz_inputs.py`` runs every family with a fixed seed and a
small budget; ``benchmarks/fuzz_readers.py`` runs the long campaign.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import re
import shutil
import signal
import tempfile
import traceback
import warnings
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from typing import Callable

import numpy as np
from hypothesis import assume, strategies as st

from rankmap.cli import main

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
#: seconds one case may take before it counts as a hang
TIME_LIMIT = 60.0


# ------------------------------------------------------------------ a case
@dataclass
class Case:
    """Files to write (path relative to a fresh directory -> bytes), the
    command line (``{d}`` is that directory), the names an error must
    mention (one of them), and for generated inputs the check of the
    result (``same(directory, stdout) -> problem or None``)."""

    files: dict[str, bytes]
    argv: list[str]
    names: tuple[str, ...]
    same: Callable[[Path, str], str | None] | None = None
    about: str = ""
    #: a context to run the command under (``scanning``) whose outcome must
    #: be the plain run's: the same exit status, error line and output files
    variant: Callable[[], contextlib.AbstractContextManager] | None = None


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def _write(case: Case) -> tuple[Path, list[str]]:
    d = Path(tempfile.mkdtemp(prefix="fuzz"))
    for rel, content in case.files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content)
    return d, [a.replace("{d}", str(d)) for a in case.argv]


def _keep(d: Path, argv: list[str], problem: str, keep: Path | None) -> None:
    """A problem case's files and command, kept under ``keep`` to replay."""
    if keep is None:
        return
    keep.mkdir(parents=True, exist_ok=True)
    target = Path(tempfile.mkdtemp(prefix="case", dir=keep))
    shutil.copytree(d, target, dirs_exist_ok=True)
    (target / "COMMAND").write_text("rankmap " + " ".join(
        a.replace(str(d), str(target)) for a in argv) + "\n\n" + problem + "\n")


def check(case: Case, keep: Path | None = None) -> tuple[str, str | None]:
    """Run ``case`` through the CLI in this process; returns ``(outcome,
    problem)``: outcome "read" (exit 0), "refused" (exit 2) or "problem",
    and what is wrong (None if nothing).  A problem case is copied under
    ``keep`` when given."""
    d, argv = _write(case)
    try:
        outcome, problem = _run_in_process(case, d, argv)
        if problem:
            _keep(d, argv, problem, keep)
        return outcome, problem
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _execute(argv: list[str], context=None):
    """``(exit status, stdout, stderr, numpy warnings)`` of the CLI run
    under ``context``; raises ``_Hang`` past ``TIME_LIMIT``."""
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                warnings.catch_warnings(record=True) as caught, \
                np.errstate(over="warn", invalid="warn", divide="warn", under="ignore"), \
                (context() if context is not None else contextlib.nullcontext()):
            warnings.simplefilter("always")
            try:
                rc = main(argv)
            except SystemExit as exc:
                rc = exc.code
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    numeric = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    return rc, out.getvalue(), err.getvalue(), numeric


def _run_in_process(case: Case, d: Path, argv: list[str]) -> tuple[str, str | None]:
    how = f" ({case.about})" if case.about else ""
    try:
        rc, out, err, numeric = _execute(argv, case.variant)
        if case.variant is not None and not numeric:
            differs = _differs_from_plain(case, d, argv, rc, err)
            if differs:
                return "problem", f"{differs}{how}"
    except _Hang:
        return "problem", f"no answer within {TIME_LIMIT:g} s: {' '.join(argv)}{how}"
    except BaseException:  # noqa: BLE001 - a traceback is what the fuzzing looks for
        return "problem", f"traceback from {' '.join(argv)}{how}:\n{traceback.format_exc()}"
    if numeric:
        return "problem", f"numpy warning {numeric[0].message} ({numeric[0].filename}:" \
                          f"{numeric[0].lineno}) from {' '.join(argv)}{how}"
    if rc == 0:
        problem = case.same(d, out) if case.same is not None else None
        return ("problem", problem) if problem else ("read", None)
    return _judged(case, argv, rc, err)


def _differs_from_plain(case: Case, d: Path, argv: list[str], rc, err: str) -> str | None:
    """What the plain run (no ``case.variant``) does otherwise: its exit
    status, error line or output files; None when all are the same."""
    made = {p: p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()
            and p.relative_to(d).as_posix() not in case.files}
    for p in made:
        p.unlink()
    rc0, _, err0, _ = _execute(argv)
    made0 = {p: p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()
             and p.relative_to(d).as_posix() not in case.files}
    if (rc, err.strip()) != (rc0, err0.strip()):
        return f"exit {rc} {err.strip()!r}, but plainly exit {rc0} {err0.strip()!r} from {' '.join(argv)}"
    if made != made0:
        changed = sorted(p.name for p in made.keys() | made0.keys() if made.get(p) != made0.get(p))
        return f"{', '.join(changed)} differs from the plain run's from {' '.join(argv)}"
    return None


def _judged(case: Case, argv: list[str], rc, stderr: str) -> tuple[str, str | None]:
    """The verdict on a command that did not succeed: exit 2 and one line
    ``rankmap CMD: error: ...`` naming the input."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if rc != 2:
        return "problem", f"exit {rc} from {' '.join(argv)}: {stderr[-400:]}"
    if len(lines) != 1 or not lines[0].startswith("rankmap ") or ": error: " not in lines[0]:
        return "problem", f"not one error line from {' '.join(argv)}:\n{stderr[-800:]}"
    if not any(name in lines[0] for name in case.names):
        return "problem", f"the error names none of {case.names}: {lines[0]}"
    return "refused", None


def check_subprocess(case: Case, keep: Path | None = None) -> tuple[str, str | None]:
    """``check`` with the command in its own ``python -m rankmap`` process:
    for readers in C, whose crash or output on file descriptor 2 only a
    process of its own shows."""
    import subprocess
    import sys

    d, argv = _write(case)
    try:
        try:
            proc = subprocess.run([sys.executable, "-m", "rankmap", *argv], capture_output=True,
                                  text=True, errors="replace", timeout=2 * TIME_LIMIT,
                                  env={**os.environ, "RANKMAP_NO_PROGRESS": "1"})
            if proc.returncode == 0:
                outcome, problem = ("read", None) if not proc.stderr.strip() else (
                    "problem", f"exit 0 with stderr: {proc.stderr[:400]}")
            else:
                outcome, problem = _judged(case, argv, proc.returncode, proc.stderr)
        except subprocess.TimeoutExpired:
            outcome, problem = "problem", f"no answer within {2 * TIME_LIMIT:g} s: {' '.join(argv)}"
        if problem:
            _keep(d, argv, problem, keep)
        return outcome, problem
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------- mutations
_NUMBER = re.compile(rb"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
NUMBERS = [b"nan", b"NaN", b"inf", b"-inf", b"1e400", b"-1e400", b"1e308", b"-1", b"-0", b"0",
           b"99999999999999999999", b"9223372036854775808", b"2147483648", b"67108864",
           b"0x1f", b"0X10", b"1.5", b"1,5", b"1e3", b"+3", b"1e-320", b"007", b"", b"1_000",
           b"\xef\xbc\x91"]  # the last: a full-width digit one
DELIMITERS = [b" ", b"\t", b",", b";", b":", b"  ", b"\r\n", b"\n", b"|"]
TEXT_OPS = ("truncate", "flip", "insert", "delete", "nul", "number", "delimiter", "encoding",
            "duplicate", "empty", "swap", "crlf")
BINARY_OPS = ("truncate", "flip", "insert", "delete", "nul")


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True) or [b""]


def _mutate_once(draw, data: bytes, op: str) -> bytes:
    n = len(data)
    if op == "truncate":
        return data[:draw(st.integers(0, max(n - 1, 0)))]
    if op == "flip":
        if not n:
            return data
        i = draw(st.integers(0, n - 1))
        return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1:]
    if op == "insert":
        i = draw(st.integers(0, n))
        return data[:i] + draw(st.binary(min_size=1, max_size=8)) + data[i:]
    if op == "delete":
        if not n:
            return data
        i = draw(st.integers(0, n - 1))
        return data[:i] + data[i + draw(st.integers(1, 64)):]
    if op == "nul":
        i = draw(st.integers(0, n))
        return data[:i] + b"\x00" + data[i:]
    if op == "number":
        spans = [m.span() for m in _NUMBER.finditer(data[:1 << 16])]
        if not spans:
            return data
        a, b = spans[draw(st.integers(0, len(spans) - 1))]
        new = draw(st.one_of(st.sampled_from(NUMBERS),
                             st.integers(-(1 << 70), 1 << 70).map(lambda v: str(v).encode())))
        return data[:a] + new + data[b:]
    if op == "delimiter":
        old, new = draw(st.sampled_from(DELIMITERS)), draw(st.sampled_from(DELIMITERS))
        if draw(st.booleans()):
            return data.replace(old, new)
        i = data.find(old, draw(st.integers(0, n)))
        return data if i < 0 else data[:i] + new + data[i + len(old):]
    if op == "encoding":
        text = data.decode("utf-8", errors="replace")
        how = draw(st.sampled_from(["utf-16", "utf-16-le", "utf-32", "bom", "latin-1"]))
        if how == "bom":
            return b"\xef\xbb\xbf" + data
        if how == "latin-1":
            return (text.replace("0", "\u00d8", 1)).encode("latin-1", errors="replace")
        return text.encode(how, errors="replace")
    lines = _lines(data)
    i = draw(st.integers(0, len(lines) - 1))
    if op == "duplicate":
        k = draw(st.integers(1, 4))
        return b"".join(lines[:i + k] + lines[i:i + k] + lines[i + k:])
    if op == "empty":
        k = draw(st.integers(1, 4))
        return b"".join(lines[:i] + [b"\n"] + lines[i + k:])
    if op == "swap":
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        return b"".join(lines)
    if op == "crlf":
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    raise AssertionError(op)


def mutate(draw, data: bytes, binary: bool = False) -> bytes:
    """``data`` after one to three mutations."""
    ops = draw(st.lists(st.sampled_from(BINARY_OPS if binary else TEXT_OPS), min_size=1, max_size=3))
    for op in ops:
        data = _mutate_once(draw, data, op)
    return data


# --------------------------------------------------------------- samples
RING = [(0, 1, 5), (1, 2, 6), (2, 3, 8), (3, 0, 7)]


def _text(path: Path) -> bytes:
    return path.read_bytes()


@lru_cache(maxsize=None)
def graph_samples() -> dict[str, list[tuple[str, dict[str, bytes]]]]:
    """Format -> samples ``(file or directory to read, files)``."""
    ring_edges = "".join(f"{s} {d} {b}\n" for s, d, b in RING).encode()
    dense = np.zeros((4, 4), dtype=int)
    for s, d, b in RING:
        dense[s, d] = b
    mat = "".join(" ".join(map(str, row)) + "\n" for row in dense).encode()
    return {
        "metis": [("g.graph", {"g.graph": b"4 4 1\n2 5 4 7\n1 5 3 6\n2 6 4 8\n1 7 3 8\n"}),
                  ("w.graph", {"w.graph": _text(DATA / "graphs/example_weighted.graph")}),
                  ("d.graph", {"d.graph": _text(DATA / "graphs/delaunay_n10.graph")})],
        "mtx": [("g.mtx", {"g.mtx": b"%%MatrixMarket matrix coordinate real general\n4 4 4\n"
                                    + "".join(f"{s + 1} {d + 1} {b}\n" for s, d, b in RING).encode()}),
                ("a.mtx", {"a.mtx": b"%%MatrixMarket matrix array real general\n4 4\n"
                                    + b"".join(b"%d\n" % x for x in dense.T.ravel())}),
                ("j.mtx", {"j.mtx": _text(DATA / "graphs/jagmesh7.mtx")})],
        "edges": [("g.edges", {"g.edges": ring_edges}),
                  ("h.csv", {"h.csv": b"src,dst,bytes,messages\n" + ring_edges.replace(b" ", b",")
                             .replace(b"\n", b",1\n")}),
                  ("b.edges", {"b.edges": _text(ROOT / "rankmap/data/btmz64.edges")})],
        "dense": [("g.mat", {"g.mat": mat}),
                  ("app.mat", {"app.mat": _text(DATA / "traffic/app.mat")}),
                  ("amg.csv", {"amg.csv": _text(DATA / "traffic/amg64.size.csv")})],
        "ompi": [("run.0.prof", {"run.0.prof": "".join(
            f"E\t{s}\t{d}\t{b} bytes\t1 msgs sent\n" for s, d, b in RING).encode()
            + b"I\t0\t2\t64 bytes\t2 msgs sent\n"})],
        "eztrace": [("ez", {"ez/communication_matrix_p2p.message_size.dat": mat,
                            "ez/communication_matrix_p2p.nb_messages.dat": (dense > 0).astype(int)
                            .__str__().replace("[", "").replace("]", "").encode() + b"\n"})],
    }


def _dir_files(folder: Path, prefix: str = "", pattern: str = "*") -> dict[str, bytes]:
    return {prefix + p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob(pattern)) if p.is_file()}


@lru_cache(maxsize=None)
def trace_samples() -> dict[str, list[tuple[str, dict[str, bytes]]]]:
    """Recorded-run format -> samples ``(path to read, files)``."""
    from benchmarks.trace_readers import write_liballprof, write_mpip

    tmp = Path(tempfile.mkdtemp(prefix="fuzz-samples"))
    try:
        write_liballprof(str(tmp), ranks=4, rounds=20)
        lap = _dir_files(tmp, "lap/")
        write_mpip(str(tmp / "small.mpiP"), ranks=8)
        small_mpip = (tmp / "small.mpiP").read_bytes()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    traces = ROOT / "profiling/traces"
    return {
        "trace": [(f"{n}.rmtrace.npz", {f"{n}.rmtrace.npz": (traces / f"{n}.rmtrace.npz").read_bytes()})
                  for n in ("halo2d-4", "master_worker-4", "cg-4")],
        "mpip": [("small.mpiP", {"small.mpiP": small_mpip}),
                 ("amr.mpiP", {"amr.mpiP": _text(DATA / "traces/mpip/miniAMR.x.64.253515.1.mpiP")})],
        "dumpi": [("dumpi/testtrace.meta", _dir_files(DATA / "traces/dumpi", "dumpi/", "testtrace*"))],
        "liballprof": [("lap", lap)],
        "otf2": [("otf2/traces.otf2", _dir_files(DATA / "traces/otf2", "otf2/"))],
    }


def _is_binary(name: str, content: bytes) -> bool:
    return name.endswith((".npz", ".bin", ".evt", ".def", ".otf2")) or b"\x00" in content[:512]


def mutated_sample(draw, samples) -> tuple[str, dict[str, bytes], str]:
    """One sample with one of its files mutated: ``(path, files, that file)``."""
    path, files = draw(st.sampled_from(samples))
    files = dict(files)
    name = draw(st.sampled_from(sorted(files)))
    files[name] = mutate(draw, files[name], binary=_is_binary(name, files[name]))
    return path, files, name


# ------------------------------------------------------------- families
@dataclass
class Family:
    """``make(draw) -> Case``; ``covers``: the formats it feeds (the test
    checks every reader is covered); ``subprocess``: run each case in its
    own process (a reader in C that could take this one down)."""

    name: str
    make: Callable
    covers: tuple[str, ...] = ()
    weight: int = 1
    subprocess: bool = False
    about: str = ""


def _names(path: str, name: str) -> tuple[str, ...]:
    return tuple({os.path.basename(path.rstrip("/")), os.path.basename(name), name.split("/")[0]})


def graph_family(fmt: str) -> Family:
    def make(draw):
        path, files, name = mutated_sample(draw, graph_samples()[fmt])
        return Case(files, ["convert", f"{{d}}/{path}", "-o", "{d}/out.mtx"], _names(path, name))
    return Family(f"graph-{fmt}", make, covers=(fmt,), weight=2,
                  about=f"{fmt} graph files mutated, read by rankmap convert")


# the whole-file scan of large METIS and edge-list files, on small files
#: block sizes the scan reads in: a small block makes lines cross block ends
SCAN_BLOCKS = (1, 5, 64, 1000, 1 << 24)
#: cases the scan read (``read``) or left to the line loop (``fell back``)
SCANNED: collections.Counter = collections.Counter()


def scanned_readers() -> dict:
    """Format module name -> module, for every reader with a whole-file
    scan (those that have a ``_read_scanned``)."""
    import importlib
    import pkgutil

    import rankmap.formats as formats

    mods = (importlib.import_module(f"rankmap.formats.{m.name}") for m in pkgutil.iter_modules(formats.__path__))
    return {m.__name__.rsplit(".", 1)[1]: m for m in mods if hasattr(m, "_read_scanned")}


@contextlib.contextmanager
def scanning(block: int, compiled: bool = False):
    """Every file through the readers' whole-file scan whatever its size,
    read in blocks of ``block`` bytes (``compiled``: plain blocks by the
    compiled pass, as large files are); ``SCANNED`` counts the files the
    scan read and those it left to the line loop."""
    from unittest import mock

    from rankmap.formats import columns

    def counted(scan):
        def wrapper(path):
            graph = scan(path)
            SCANNED["read" if graph is not None else "fell back"] += 1
            return graph
        return wrapper

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(columns, "BLOCK", block))
        stack.enter_context(mock.patch.object(columns, "COMPILED_MIN_BYTES", 0 if compiled else 1 << 62))
        for module in scanned_readers().values():
            stack.enter_context(mock.patch.object(module, "FAST_MIN_BYTES", 0))
            stack.enter_context(mock.patch.object(module, "_read_scanned", counted(module._read_scanned)))
        yield


def _scan_samples(fmt: str) -> list[tuple[str, dict[str, bytes]]]:
    """The graph samples and files the scan reads whole: a written edge
    list (its comment line first), four columns, vertex weights and sizes."""
    extra = {
        "metis": [("v.graph", {"v.graph": b"4 4 11\n3 2 5 4 7\n1 1 5 3 6\n2 2 6 4 8\n9 1 7 3 8\n"}),
                  ("s.graph", {"s.graph": b"% sizes\n4 3 100\n7 2\n7 1 3\n7 2\n7\n"})],
        "edges": [("w.edges", {"w.edges": b"# src dst bytes messages  (0-based ranks)\n"
                                          b"0 1 5.5 1\n1 2 6e3 2\n2 3 8 3\n3 0 7 4\n0 1 1 1\n"}),
                  ("t.csv", {"t.csv": b"0,1,5\r\n1,2,6\r\n2,0,1.5E2\r\n"})],
    }[fmt]
    return graph_samples()[fmt] + extra


def _metis_layout(draw) -> bytes:
    """A valid METIS file of a random graph in any fmt and layout (sizes,
    vertex and edge weights, spacing, CRLF, a leading comment): mutated
    METIS files are mostly invalid, and the scan must also read the valid
    ones exactly."""
    n = draw(st.integers(1, 12))
    weights = {}
    for u, v, w in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1),
                                           st.integers(0, 1 << 40)), max_size=3 * n)):
        if u != v:
            weights[(u, v)] = weights[(v, u)] = w
    fmt = draw(st.sampled_from(["", "0", "1", "001", "10", "11", "100", "101", "110", "111"]))
    has_size, has_vw, has_ew = (c == "1" for c in fmt.zfill(3))
    sep, eol = draw(st.sampled_from([" ", "  ", "\t", " \t"])), draw(st.sampled_from(["\n", "\r\n"]))
    lines = ["% generated"] if draw(st.booleans()) else []
    lines.append(sep.join([str(n), str(len(weights) // 2)] + ([fmt] if fmt else [])))
    for u in range(n):
        words = [str(draw(st.integers(0, 99)))] * has_size + [str(draw(st.integers(0, 1 << 40)))] * has_vw
        for v in sorted((v for (a, v) in weights if a == u), key=lambda _: draw(st.integers(0, 9))):
            words += [str(v + 1)] + [str(weights[(u, v)])] * has_ew
        lines.append(sep.join(words))
    return (eol.join(lines) + eol * draw(st.integers(0, 2))).encode()


def scanned_family(fmt: str, module: str) -> Family:
    def make(draw):
        if fmt == "metis" and draw(st.booleans()):
            data = _metis_layout(draw)
            path = name = "l.graph"
            files = {name: mutate(draw, data) if draw(st.booleans()) else data}
        else:
            path, files, name = mutated_sample(draw, _scan_samples(fmt))
        block, compiled = draw(st.sampled_from(SCAN_BLOCKS)), draw(st.booleans())
        return Case(files, ["convert", f"{{d}}/{path}", "-o", "{d}/out.mtx"], _names(path, name),
                    variant=partial(scanning, block, compiled),
                    about=f"scanned in blocks of {block} bytes" + (", compiled" if compiled else ""))
    return Family(f"scanned-{fmt}", make, covers=(f"scan:{module}",), weight=2,
                  about=f"{fmt} graph files mutated, read by the whole-file scan whatever their size "
                        "and compared with the line loop's reading")


def trace_family(fmt: str) -> Family:
    def make(draw):
        path, files, name = mutated_sample(draw, trace_samples()[fmt])
        cmd = draw(st.sampled_from(["show", "convert"]))
        argv = ["show", f"{{d}}/{path}"] if cmd == "show" else \
            ["convert", f"{{d}}/{path}", "-o", "{d}/out.mtx"]
        return Case(files, argv, _names(path, name))
    return Family(f"trace-{fmt}", make, covers=(fmt,), weight=2, subprocess=fmt == "otf2",
                  about=f"{fmt} recorded runs mutated, read by rankmap show and convert")


# rankmap traces member by member: arrays and metadata of the wrong type, shape or range
def _trace_members_case(draw) -> Case:
    name = draw(st.sampled_from(["halo2d-4", "master_worker-4"]))
    with np.load(ROOT / f"profiling/traces/{name}.rmtrace.npz") as z:
        members = {k: z[k] for k in z.files}
    meta = json.loads(members["rankmap_trace"].tobytes())
    if draw(st.booleans()):
        key = draw(st.sampled_from(sorted(k for k in members if k != "rankmap_trace")))
        members[key] = draw(_arrays(members[key]))
    else:
        key = draw(st.sampled_from(sorted(meta) + ["extra"]))
        value = draw(st.one_of(
            st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), st.floats(allow_nan=True),
            st.text(max_size=6), st.lists(st.one_of(st.integers(-3, 3), st.text(max_size=3)), max_size=4),
            st.dictionaries(st.text(max_size=3), st.one_of(st.none(), st.text(max_size=3)), max_size=2)))
        if draw(st.booleans()) or key == "extra":
            meta[key] = value
        else:
            meta.pop(key, None)
        members["rankmap_trace"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for k, v in members.items():
            with z.open(k + ".npy", "w") as fh:
                np.lib.format.write_array(fh, np.asarray(v), allow_pickle=True)
    argv = draw(st.sampled_from([["show", "{d}/t.rmtrace.npz"],
                                 ["convert", "{d}/t.rmtrace.npz", "-o", "{d}/out.mtx"]]))
    return Case({"t.rmtrace.npz": buf.getvalue()}, argv, ("t.rmtrace.npz",))


def _arrays(like: np.ndarray):
    size = st.integers(0, max(like.size + 2, 3))
    special = st.sampled_from([np.nan, np.inf, -np.inf, -1.0, 1e300, 2.0 ** 63, 0.5, -(2.0 ** 40)])

    @st.composite
    def arrays(draw):
        kind = draw(st.sampled_from(["same-poked", "ints", "floats", "2d", "text", "bool", "object"]))
        if kind == "same-poked" and like.size:
            out = like.astype(np.float64 if like.dtype.kind == "f" else np.int64)
            i = draw(st.integers(0, like.size - 1))
            value = draw(special) if out.dtype.kind == "f" else draw(
                st.sampled_from([-1, -(1 << 31), (1 << 31) - 1, 10 ** 9, len(like) + 5]))
            out.flat[i] = value
            return out
        n = draw(size)
        if kind == "ints":
            return np.asarray(draw(st.lists(st.integers(-(1 << 40), 1 << 40), min_size=n, max_size=n)),
                              dtype=np.int64)
        if kind == "floats":
            return np.asarray(draw(st.lists(st.floats(allow_nan=True), min_size=n, max_size=n)))
        if kind == "2d":
            return np.ones((2, max(n, 1)))
        if kind == "text":
            return np.asarray(["x"] * n)
        if kind == "bool":
            return np.ones(n, dtype=bool)
        return np.asarray([{"a": 1}] * n + [None], dtype=object)
    return arrays()


# machines --------------------------------------------------------------
XML_SAMPLES = ("8em64t-2mi2ma2c.xml", "16em64t-4s2c2t.v1-hwloc1.11.xml",
               "16em64t-4s2c2t.v2-hwloc2.14.xml", "16em64t-4s2c2t.v3-master.xml",
               "16em64t-4s2c2t-offlines.v1.xml", "28intel64-2p2g7c-CoDgroups.v1.xml",
               "16amd64-4distances.xml")


def _xml_case(draw) -> Case:
    name = draw(st.sampled_from(XML_SAMPLES))
    data = mutate(draw, (DATA / "topologies" / name).read_bytes())
    argv = draw(st.sampled_from([["topo", "--xml", "{d}/node.xml"],
                                 ["topo", "--topology", "{d}/node.xml", "--json"]]))
    return Case({"node.xml": data}, argv, ("node.xml",))


TOPOLOGY_FILES = [
    b"cluster\n# two kinds of node\nxml node.xml\nnodes cn[01-04]\nnodes big[1-2] hierarchy=4:2 "
    b"distances=1:10\nnetwork 2:2 distances 100:400:1600\nlevel-distances core=2,package=20\n",
    b"cluster\nhierarchy 8:2 distances 1:10\nhostfile hosts.txt\nswitches fabric.conf\n",
    b"tleaf 3 4 100 2 10 8 1\n",
    b"hierarchy 4:16:8 distances 1:10:100\n",
    b"torus 4x4x2 cores 2\n",
    b"mesh 8x8\n",
]


def _topology_file_case(draw) -> Case:
    data = mutate(draw, draw(st.sampled_from(TOPOLOGY_FILES)))
    files = {"m.topo": data, "node.xml": (DATA / "topologies/8em64t-2mi2ma2c.xml").read_bytes(),
             "hosts.txt": b"dev0 slots=4\ndev1:2\ndev7\n",
             "fabric.conf": (DATA / "slurm/topology.conf").read_bytes()}
    return Case(files, ["topo", "--topology", "{d}/m.topo"], ("m.topo",))


TINY = b"0 1 5\n1 0 3\n"
QUICK = ["--method", "identity", "--eps", "100"]  # reading is what is tested: any machine fits


XNAMES = "".join(f"nid{i:06d} x100{i // 4}c0s{i % 4}b0n0\n" for i in range(8)).encode()
#: the network descriptions --switches reads: (sample, hosts it names, the name it is read under)
NETWORKS = [(DATA / "slurm/topology.conf", "dev[0-17]", "fabric.conf"),
            (DATA / "slurm/fabrics.conf", "tux[0-7]", "fabric.conf"),
            (DATA / "slurm/block.conf", "node[1-40]", "fabric.conf"),
            (DATA / "slurm/topology.yaml", "node[01-04]", "fabric.yaml"),
            (XNAMES, "nid[000000-000007]", "xnames")]


def _switches_case(draw) -> Case:
    sample, hosts, name = draw(st.sampled_from(NETWORKS))
    data = mutate(draw, sample if isinstance(sample, bytes) else sample.read_bytes())
    return Case({"g.edges": TINY, name: data},
                ["map", "{d}/g.edges", "--hosts", hosts, "--switches", f"{{d}}/{name}",
                 "--hierarchy", "2", *QUICK], (name,))


GPU_NODE_FILE = (b"gpu-node\ngpu rocr:0 cpus=0-3 nic\ngpu rocr:1 cpus=4-7\ngpu rocr:2\n"
                 b"bandwidth\n0 200 0\n200 0 50\n0 50 0\n")


def _gpu_node_case(draw) -> Case:
    sample = draw(st.sampled_from([GPU_NODE_FILE, GPU_NODE_FILE.replace(b"bandwidth", b"distance"),
                                   "nvidiaDGX2.v2.xml", "power8gpudistances.v3.xml"]))
    data = sample if isinstance(sample, bytes) else (DATA / "topologies" / sample).read_bytes()
    return Case({"g.edges": TINY, "gpu.node": mutate(draw, data)},
                ["map", "{d}/g.edges", "--gpu-node", "{d}/gpu.node", *QUICK], ("gpu.node",))


def _hostfile_case(draw) -> Case:
    name = draw(st.sampled_from(["mpich.hosts", "openmpi.hosts", "slurm.hosts"]))
    data = mutate(draw, (DATA / "slurm" / name).read_bytes())
    return Case({"g.edges": TINY, "h.hosts": data},
                ["map", "{d}/g.edges", "--hostfile", "{d}/h.hosts", "--hierarchy", "2", *QUICK],
                ("h.hosts",))


_HOSTLIST_ALPHABET = "cn0123456789[]-,x. _"
#: a hostlist naming more hosts than this is left out: building a cluster of
#: 10^5-10^6 hosts (rankmap takes up to 2^20) is seconds to minutes of work,
#: not a hang, and would spend the budget on one case
MANY_HOSTS = 20_000


def _hosts_named(text: str) -> int:
    from rankmap.topology.hosts import expand_nodelist

    try:
        return len(expand_nodelist(text))
    except ValueError:
        return 0  # refused (more than rankmap takes, or malformed): counted before any name is made


def _hostlist_case(draw) -> Case:
    if draw(st.booleans()):
        text = draw(st.text(alphabet=_HOSTLIST_ALPHABET, min_size=0, max_size=24))
    else:
        text = mutate(draw, draw(st.sampled_from([b"cn[01-04]", b"a[1-3,7],b[01-02]",
                                                  b"node[0-3]-ib,login", b"x[00-99][0-9]"]))
                      ).decode("utf-8", errors="replace")
    text = text.replace("\x00", "")  # a NUL cannot reach a program's argv
    assume(_hosts_named(text) <= MANY_HOSTS)
    return Case({"g.edges": TINY}, ["map", "{d}/g.edges", "--hosts", text, "--hierarchy", "2", *QUICK],
                ("--hosts", "nodelist", "host"))


_LEVEL = st.one_of(st.integers(-3, 70).map(str), st.sampled_from(
    ["", "x", "nan", "inf", "1e400", "2.5", "0x4", "99999999999999999999", "1e3", "-0", " 4"]))


def _hierarchy_case(draw) -> Case:
    levels = draw(st.lists(_LEVEL, min_size=0, max_size=5))
    sep = draw(st.sampled_from([":", ",", ":", " ", "::"]))
    argv = ["map", "{d}/g.edges", "--hierarchy", sep.join(levels), *QUICK]
    if draw(st.booleans()):
        dists = draw(st.lists(_LEVEL, min_size=0, max_size=5))
        argv[4:4] = ["--distances", sep.join(dists)]
    return Case({"g.edges": TINY}, argv, ("hierarchy", "distances", "--hierarchy"))


# mapping files: every launch file rankmap map writes, mutated, as eval --mapping
LAUNCH_MACHINE = ["--hosts", "cn[01-04]", "--hierarchy", "2:2"]


@lru_cache(maxsize=None)
def launch_samples() -> dict[str, bytes]:
    """Launch format -> the file ``rankmap map --as all`` wrote for 16 tasks."""
    from rankmap.formats import LAUNCH_FILE_NAMES

    tmp = Path(tempfile.mkdtemp(prefix="fuzz-launch"))
    try:
        (tmp / "g.edges").write_bytes(_ring16())
        with contextlib.redirect_stdout(io.StringIO()):
            rc = main(["map", str(tmp / "g.edges"), *LAUNCH_MACHINE, "--method", "greedy",
                       "--as", "all", "-o", str(tmp / "launch")])
        assert rc == 0
        return {kind: (tmp / "launch" / name).read_bytes() for kind, name in LAUNCH_FILE_NAMES.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _ring16() -> bytes:
    return "".join(f"{t} {(t + 1) % 16} {100 + t}\n{t} {(t + 5) % 16} 7\n" for t in range(16)).encode()


def launch_family(kind: str) -> Family:
    from rankmap.formats import LAUNCH_FILE_NAMES

    def make(draw):
        data = mutate(draw, launch_samples()[kind])
        # under the name map gave it, or another (the content tells the format)
        name = draw(st.sampled_from([LAUNCH_FILE_NAMES[kind], "m.txt"]))
        return Case({"g.edges": _ring16(), name: data},
                    ["eval", "{d}/g.edges", "--mapping", f"{{d}}/{name}", *LAUNCH_MACHINE],
                    (name,))
    return Family(f"mapping-{kind}", make, covers=(f"launch:{kind}",),
                  about=f"{kind} launch files mutated, read by rankmap eval --mapping")


# ------------------------------------------------------------- generated files
def _generated_graph_case(draw) -> Case:
    """A random graph written by hand in a random format and layout:
    convert must give exactly that graph (checked with scipy's reader)."""
    n = draw(st.integers(1, 9))
    value = st.one_of(st.integers(1, 1 << 53), st.floats(1e-3, 1e12, allow_nan=False),
                      st.sampled_from([1, 2, 4096, 65536.5, 1e15]))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), value),
                          min_size=1, max_size=3 * n))
    fmt = draw(st.sampled_from(["edges", "mtx", "mtx-array", "dense", "metis"]))
    if fmt == "metis":  # undirected: each edge once, listed at both ends with one weight
        pairs = {}
        for s, d, w in edges:
            if s != d:
                pairs[(min(s, d), max(s, d))] = int(w) % (1 << 40) + 1
        edges = [(s, d, w) for (s, d), w in pairs.items()] + [(d, s, w) for (s, d), w in pairs.items()]
    expect = np.zeros((n, n))
    for s, d, w in edges:
        if s != d:
            expect[s, d] += float(w)
    num = draw(st.sampled_from([repr, lambda x: f"{x!r}".replace("e+", "E"),
                                lambda x: str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(x)]))
    if fmt == "edges":
        sep = draw(st.sampled_from([" ", "\t", ",", " , "]))
        header = draw(st.sampled_from(["", "src,dst,bytes\n", "# comment\n", "Source Dest Bytes\n"]))
        text = header + "".join(f"{s}{sep}{d}{sep}{num(float(w))}\n" for s, d, w in edges)
        name, extra = "g.edges", []
        size = max(max(s, d) for s, d, _ in edges) + 1  # an edge list has as many tasks as it names
        expect = expect[:size, :size]
    elif fmt == "mtx":
        text = (f"%%MatrixMarket matrix coordinate real general\n% generated\n{n} {n} {len(edges)}\n"
                + "".join(f"{s + 1} {d + 1} {num(float(w))}\n" for s, d, w in edges))
        name, extra = "g.mtx", []
    elif fmt == "mtx-array":
        dense = np.zeros((n, n))
        for s, d, w in edges:
            dense[s, d] = float(w)  # an array file holds one value per entry: the last one written
        expect = dense.copy()
        np.fill_diagonal(expect, 0)
        per_line = draw(st.integers(1, 3))
        vals = [num(float(x)) for x in dense.T.ravel()]
        text = (f"%%MatrixMarket matrix array real general\n{n} {n}\n"
                + "".join(" ".join(vals[i:i + per_line]) + "\n" for i in range(0, len(vals), per_line)))
        name, extra = "a.mtx", []
    elif fmt == "dense":
        dense = np.zeros((n, n))
        for s, d, w in edges:
            dense[s, d] = float(w)
        expect = dense.copy()
        np.fill_diagonal(expect, 0)
        sep = draw(st.sampled_from([" ", ",", "\t"]))
        header = draw(st.booleans())
        text = (sep.join(f"r{j}" for j in range(n)) + "\n" if header else "") + "".join(
            sep.join(num(float(x)) for x in row) + "\n" for row in dense)
        name, extra = "g.mat", ["--format", "dense"] if header else []
    else:
        adj = [[] for _ in range(n)]
        for s, d, w in edges:
            adj[s].append(f"{d + 1} {int(w)}")
        text = f"{n} {len(edges) // 2} 1\n" + "".join(" ".join(a) + "\n" for a in adj)
        name, extra = "g.graph", []

    def same(d: Path, _out: str) -> str | None:
        from scipy.io import mmread

        got = mmread(str(d / "out.mtx"))
        got = got.toarray() if hasattr(got, "toarray") else np.asarray(got)
        # the same entries, each exact but for the rounding of summing a pair's repeats
        if got.shape != expect.shape or not np.array_equal(got != 0, expect != 0) or \
                not np.allclose(got, expect, rtol=1e-12, atol=0):
            return (f"{fmt} file read as a different graph:\n{text[:400]}\nexpected\n{expect}\n"
                    f"got\n{got}")
        return None

    variant = None
    if fmt in ("edges", "metis") and draw(st.booleans()):  # the scan too must read exactly that graph
        variant = partial(scanning, draw(st.sampled_from(SCAN_BLOCKS)), draw(st.booleans()))
    return Case({name: text.encode()}, ["convert", f"{{d}}/{name}", *extra, "-o", "{d}/out.mtx"],
                (name,), same=same, variant=variant)


def _generated_launch_case(draw) -> Case:
    """A random mapping on a random cluster, written in every launch format
    by rankmap, read back by eval: the J of each must be the J of the
    mapping (formats that name PEs or cores) or of the same hosts."""
    hosts = draw(st.integers(1, 4))
    inner = draw(st.sampled_from(["2", "2:2", "4:2"]))
    per = int(np.prod([int(x) for x in inner.split(":")]))
    n_pes = hosts * per
    n = draw(st.integers(1, n_pes))
    pe = draw(st.permutations(range(n_pes)))[:n]
    kind = draw(st.sampled_from(["perm", "mpich", "hydra", "openmpi", "slurm", "bind"]))
    from rankmap.formats import write_launch_file

    machine = ["--hosts", f"h[1-{hosts}]", "--hierarchy", inner]
    topo = _cluster(hosts, inner)
    buf = Path(tempfile.mkdtemp(prefix="fuzz-gen"))
    try:
        write_launch_file(np.asarray(pe), topo, str(buf / "m"), kind)
        data = (buf / "m").read_bytes()
    finally:
        shutil.rmtree(buf, ignore_errors=True)
    graph = "".join(f"{t} {(t + 1) % n} {t + 1}\n" for t in range(n)) if n > 1 else "0 0 1\n"
    if kind == "mpich":  # a rank order names no PEs: the launcher fills the first n slots in order
        pe = np.argsort(np.argsort(pe)).tolist()
    want_hosts = [topo.pe_host[p] for p in pe]

    def same(d: Path, out: str) -> str | None:
        from rankmap.formats.launch_files import read_launch_file

        got = read_launch_file(d / "m", n).pe_of_task(topo)
        if [topo.pe_host[p] for p in got] != want_hosts:
            return f"{kind} file read back on other hosts: {got.tolist()} for {pe}"
        if kind in ("perm", "bind") and got.tolist() != list(pe):
            return f"{kind} file read back as {got.tolist()}, written {pe}"
        return None

    return Case({"g.edges": graph.encode(), "m": data},
                ["eval", "{d}/g.edges", "--mapping", "{d}/m", *machine, "--json"], ("m",), same=same)


def _cluster(hosts: int, inner: str):
    from rankmap.topology import hierarchy_topology, parse_hierarchy
    from rankmap.topology.cluster import compose_cluster

    node = hierarchy_topology(*parse_hierarchy(inner), host_prefix=None)
    return compose_cluster([(f"h{i}", node) for i in range(1, hosts + 1)])


def families() -> list[Family]:
    from rankmap.formats import GRAPH_FORMATS, LAUNCH_FORMATS

    out = [graph_family(f) for f in ("metis", "mtx", "edges", "dense", "ompi", "eztrace")]
    out += [scanned_family("metis", "metis"), scanned_family("edges", "edge_list")]
    out += [trace_family(f) for f in ("trace", "mpip", "dumpi", "liballprof", "otf2")]
    out += [
        Family("trace-members", _trace_members_case, covers=("trace",), weight=2,
               about="rankmap trace members and metadata of the wrong type, shape or range"),
        Family("hwloc-xml", _xml_case, covers=("topology:hwloc",), weight=2,
               about="hwloc XML exports (v1, v2, v3) mutated, read by rankmap topo"),
        Family("topology-file", _topology_file_case, covers=("topology:file",),
               about="cluster files, tleaf, hierarchy and mesh lines mutated"),
        Family("switches", _switches_case, covers=("topology:switches",),
               about="network descriptions (topology.conf tree and block, topology.yaml, xname "
                     "files) mutated, read by map --switches"),
        Family("gpu-node", _gpu_node_case, covers=("topology:gpu-node",),
               about="GPU node files and hwloc XML with GPUs mutated, read by map --gpu-node"),
        Family("hierarchy", _hierarchy_case, covers=("topology:hierarchy",),
               about="hierarchy and distance strings generated"),
        Family("hostfile", _hostfile_case, covers=("hosts:file",),
               about="MPICH, Open MPI and Slurm hostfiles mutated, read by map --hostfile"),
        Family("hostlist", _hostlist_case, covers=("hosts:list",),
               about="Slurm hostlists generated and mutated, read by map --hosts"),
        Family("generated-graph", _generated_graph_case, covers=("generated",), weight=2,
               about="random graphs written in every text format: read back exactly"),
        Family("generated-launch", _generated_launch_case, covers=("generated",),
               about="random mappings written as every launch file: read back exactly"),
    ]
    out += [launch_family(k) for k in LAUNCH_FORMATS]
    covered = {c for f in out for c in f.covers}
    missing = [f for f in GRAPH_FORMATS if f not in covered]
    missing += [k for k in LAUNCH_FORMATS if f"launch:{k}" not in covered]
    missing += [f"scan:{m}" for m in scanned_readers() if f"scan:{m}" not in covered]
    assert not missing, f"formats without a fuzz family: {missing}"
    return out


@dataclass
class Tally:
    """Outcomes of a family's cases."""

    cases: int = 0
    read: int = 0
    refused: int = 0
    problems: list = field(default_factory=list)
